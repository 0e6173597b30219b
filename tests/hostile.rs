//! The hostile corpus (`tests/corpus/hostile`, written by `tests/python/gen_hostile.py`): every
//! file must be refused with exactly the kind (and, for limit_exceeded, the limit) that
//! MANIFEST.tsv names, under the named built-in policy with the listed limit overrides.

// Test code: a failed invariant is a panic, by design (clippy.toml's allow-*-in-tests covers
// #[test] fns only, not the helpers and the shared module).
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

mod common;

use std::time::{Duration, Instant};

use common::{decode_outcome, repo, Outcome};
use picklewarden::{Decoder, ErrorKind, Limits, Policy};

struct Entry {
    file: String,
    kind: String,
    limit: String,
    policy: String,
    limits: String,
    description: String,
}

fn manifest() -> Vec<Entry> {
    let path = repo().join("tests/corpus/hostile/MANIFEST.tsv");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    assert_eq!(
        header, "file\tkind\tlimit\tpolicy\tlimits\tdescription",
        "manifest header"
    );
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert_eq!(
                cols.len(),
                6,
                "manifest line has {} columns: {l:?}",
                cols.len()
            );
            Entry {
                file: cols[0].to_owned(),
                kind: cols[1].to_owned(),
                limit: cols[2].to_owned(),
                policy: cols[3].to_owned(),
                limits: cols[4].to_owned(),
                description: cols[5].to_owned(),
            }
        })
        .collect()
}

fn limits_for(entry: &Entry, policy: &Policy) -> Limits {
    let mut limits = policy.limits;
    if entry.limits != "-" {
        for item in entry.limits.split(',') {
            limits
                .set_from_str(item.trim())
                .unwrap_or_else(|e| panic!("{}: bad limits override {item:?}: {e}", entry.file));
        }
    }
    limits
}

#[test]
fn manifest_is_well_formed() {
    let entries = manifest();
    assert!(
        entries.len() >= 60,
        "only {} manifest entries",
        entries.len()
    );
    let mut names = std::collections::BTreeSet::new();
    for e in &entries {
        assert!(names.insert(e.file.clone()), "{} listed twice", e.file);
        assert!(
            repo().join("tests/corpus/hostile").join(&e.file).is_file(),
            "{} is in the manifest but missing",
            e.file
        );
        assert_eq!(
            e.kind == "limit_exceeded",
            e.limit != "-",
            "{}: a limit name goes with limit_exceeded only",
            e.file
        );
        if e.limit != "-" {
            assert!(
                picklewarden::LimitName::ALL
                    .iter()
                    .any(|l| l.name() == e.limit),
                "{}: unknown limit {}",
                e.file,
                e.limit
            );
        }
        assert!(
            Policy::builtin(&e.policy).is_some(),
            "{}: unknown policy {}",
            e.file,
            e.policy
        );
        assert!(!e.description.is_empty(), "{}: no description", e.file);
    }
    // every .pkl in the folder is in the manifest
    for entry in
        std::fs::read_dir(repo().join("tests/corpus/hostile")).unwrap_or_else(|e| panic!("{e}"))
    {
        let name = entry
            .unwrap_or_else(|e| panic!("{e}"))
            .file_name()
            .to_string_lossy()
            .into_owned();
        if name.ends_with(".pkl") {
            assert!(
                names.contains(&name),
                "{name} is in the folder but not in the manifest"
            );
        }
    }
}

#[test]
fn every_hostile_file_is_refused_as_the_manifest_says() {
    let entries = manifest();
    assert!(
        entries.len() >= 60,
        "only {} manifest entries",
        entries.len()
    );
    let mut mismatches = Vec::new();
    let mut times: Vec<(Duration, String)> = Vec::new();
    let mut decoded_ok = Vec::new();
    for e in &entries {
        let path = repo().join("tests/corpus/hostile").join(&e.file);
        let data = match std::fs::read(&path) {
            Ok(d) => d,
            Err(err) => {
                mismatches.push(format!("{}: cannot read: {err}", e.file));
                continue;
            }
        };
        let policy =
            Policy::builtin(&e.policy).unwrap_or_else(|| panic!("unknown policy {}", e.policy));
        let limits = limits_for(e, &policy);
        let start = Instant::now();
        let got = decode_outcome(&data, &policy, Some(limits), false, false);
        times.push((start.elapsed(), e.file.clone()));
        let expected = if e.limit == "-" {
            e.kind.clone()
        } else {
            format!("{}({})", e.kind, e.limit)
        };
        if matches!(got, Outcome::Ok { .. }) {
            decoded_ok.push(e.file.clone());
        }
        if got.label() != expected {
            mismatches.push(format!(
                "{}: expected {expected}, got {} -- {} [{}]",
                e.file,
                got.label(),
                got.detail(),
                e.description
            ));
        }
    }
    times.sort_by_key(|t| std::cmp::Reverse(t.0));
    eprintln!("slowest hostile decodes:");
    for (t, f) in times.iter().take(5) {
        eprintln!("  {:>10.3} ms  {f}", t.as_secs_f64() * 1000.0);
    }
    assert!(
        decoded_ok.is_empty(),
        "hostile files decoded successfully: {decoded_ok:?}"
    );
    assert!(
        mismatches.is_empty(),
        "{} of {} hostile files were not refused as the manifest says:\n{}",
        mismatches.len(),
        entries.len(),
        mismatches.join("\n")
    );
}

/// The limit errors carry a `seen` above the configured `max`, which is the override.
#[test]
fn limit_refusals_report_seen_above_max() {
    let mut checked = 0;
    for e in manifest().iter().filter(|e| e.kind == "limit_exceeded") {
        let data = std::fs::read(repo().join("tests/corpus/hostile").join(&e.file))
            .unwrap_or_else(|err| panic!("{err}"));
        let policy = Policy::builtin(&e.policy).unwrap_or_else(|| panic!("policy"));
        let limits = limits_for(e, &policy);
        let err = match picklewarden::Decoder::new(&data, &policy)
            .limits(limits)
            .decode()
        {
            Ok(_) => panic!("{} decoded", e.file),
            Err(err) => err,
        };
        if let ErrorKind::LimitExceeded { limit, seen, max } = err.kind() {
            assert_eq!(
                *max,
                limits.get(*limit),
                "{}: max is the configured limit",
                e.file
            );
            assert!(seen > max, "{}: seen {seen} not above max {max}", e.file);
            assert_eq!(err.category().name(), "limit_exceeded");
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} limit files checked");
}

/// Input that is not a pickle at all (empty, text, JSON, an archive, compressed data, a NumPy
/// file) is refused as `not_a_pickle` at offset 0, saying what it looks like, by the scan and
/// the decode alike, as one pickle and as a stream; a pickle (even a refused one, even one
/// that starts like those) keeps its own refusal.
#[test]
fn input_that_is_not_a_pickle_says_so() {
    let policy = Policy::data();
    let zip = b"PK\x03\x04\x14\x00\x00\x00\x08\x00\x9c\x8a\x83Y\xf9\xa7\xb2\x8b".to_vec();
    let gzip = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xffKLJ\x06\x00\xc2A$5\x03\x00\x00\x00";
    let bz2 = b"BZh91AY&SY\xd5\x8c\x13\x1e\x00\x00\x00\x01\x00\x07\x00 \x00!";
    let xz = b"\xfd7zXZ\x00\x00\x04\xe6\xd6\xb4F\x02\x00!\x01\x16\x00\x00\x00";
    let zstd = b"\x28\xb5\x2f\xfd\x20\x03\x19\x00\x00abc";
    let npy = b"\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, }";
    let cases: [(&[u8], &str); 10] = [
        (b"", "the input is empty"),
        (b"hello", "text"),
        (b"{\"a\": 1}\n", "JSON"),
        (b" [1, 2]", "JSON"),
        (&zip, "a zip archive"),
        (gzip, "gzip-compressed data"),
        (bz2, "bzip2-compressed data"),
        (xz, "xz-compressed data"),
        (zstd, "zstd-compressed data"),
        (npy, "a NumPy .npy file"),
    ];
    for (input, looks_like) in cases {
        for stream in [false, true] {
            let d = Decoder::new(input, &policy);
            let e = if stream {
                d.decode_stream()
            } else {
                d.decode()
            }
            .unwrap_err();
            assert_eq!(
                (e.kind().name(), e.category().name(), e.offset(), e.opcode()),
                ("not_a_pickle", "malformed", 0, None),
                "{input:?}: {e}"
            );
            assert!(e.to_string().contains(looks_like), "{input:?}: {e}");
            let scanned = picklewarden::scan_with(
                input,
                &policy,
                &picklewarden::DecodeOptions::default().pickles(if stream {
                    picklewarden::Pickles::Stream
                } else {
                    picklewarden::Pickles::One
                }),
            )
            .result;
            assert_eq!(scanned.unwrap_err().to_string(), e.to_string());
        }
    }
    // Pickles keep their refusal: one cut short after PROTO or in a protocol-0 string, a
    // protocol-0 one with a persistent id (even one that starts like a zip archive, as long
    // as CPython could read its id: an ASCII line), number text CPython versions read
    // differently, a protocol past 5, a refused global, MARK then an unknown byte.
    for (input, kind) in [
        (&b"\x80"[..], "truncated"),
        (b"\x80\x02]h\x05.", "memo_key_missing"),
        (b"S'abc", "truncated"),
        (b"Pid\n.", "persistent_id_rejected"),
        (b"PK\x03\x04ab\n.", "persistent_id_rejected"),
        (b"I010\n.", "version_dependent_number"),
        (b"\x80\x06N.", "unsupported_protocol"),
        (b"cos\nsystem\n.", "global_not_allowed"),
        (b"(\xff", "unknown_opcode"),
    ] {
        let e = Decoder::new(input, &policy).decode().unwrap_err();
        assert_eq!(e.kind().name(), kind, "{input:?}: {e}");
    }
}
