//! Every attack vector of `audit/ATTACKS.md` gets the outcome its manifest line names
//! (`audit/vectors/MANIFEST.tsv`: file, expected kind or `ok`, limit, policy, limit overrides
//! (and `deadline_ms=N`, a deadline N ms after the decode starts),
//! mode (`single`, `stream`, `mitogen` for a child's stdout, `model` for a model file
//! scanned as `picklewarden scan` scans it, or `convert` for a torch checkpoint converted as
//! `picklewarden convert` converts it), attack id), and the
//! hash-flooding checks: dicts and sets whose keys all collide under CPython's hash decode
//! correctly (timings are printed, never asserted; see audit/FUZZING.md).

// Test code: a failed check is a panic, by design (clippy.toml's allow-*-in-tests covers
// #[test] fns only, not helpers).
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use common::long1;
use picklewarden::{json, repr, Decoder, ErrorKind, Limits, Policy, Value};

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("audit/vectors")
}

struct Row {
    file: String,
    expected: String,
    limit: String,
    policy: String,
    limits: String,
    stream: bool,
    /// The file is a Mitogen child's stdout: a bootstrap handshake, then frames.
    mitogen: bool,
    /// The file is a model file (a torch zip or tar...), scanned with
    /// `formats::container::scan_bytes`.
    model: bool,
    /// The file is a torch zip checkpoint converted to safetensors with
    /// `formats::safetensors::convert` (its default output bound).
    convert: bool,
    attack: String,
}

fn manifest() -> Vec<Row> {
    let text = std::fs::read_to_string(vectors_dir().join("MANIFEST.tsv")).unwrap();
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let c: Vec<&str> = line.split('\t').collect();
        assert_eq!(c.len(), 7, "MANIFEST.tsv line {}: {line:?}", i + 1);
        rows.push(Row {
            file: c[0].to_owned(),
            expected: c[1].to_owned(),
            limit: c[2].to_owned(),
            policy: c[3].to_owned(),
            limits: c[4].to_owned(),
            stream: match c[5] {
                "single" | "mitogen" | "model" | "convert" => false,
                "stream" => true,
                other => panic!("line {}: mode {other:?}", i + 1),
            },
            mitogen: c[5] == "mitogen",
            model: c[5] == "model",
            convert: c[5] == "convert",
            attack: c[6].to_owned(),
        });
    }
    rows
}

fn limits_for(policy: &Policy, overrides: &str) -> Limits {
    let mut limits = policy.limits;
    if overrides != "-" {
        for o in overrides
            .split(',')
            .filter(|o| !o.starts_with("deadline_ms="))
        {
            limits.set_from_str(o.trim()).unwrap();
        }
    }
    limits
}

/// The `deadline_ms=N` override (not a limit): the decode is given a deadline N ms after it
/// starts ([`Decoder::deadline`]), as the service gives one.
fn deadline_for(overrides: &str) -> Option<std::time::Duration> {
    overrides
        .split(',')
        .find_map(|o| o.trim().strip_prefix("deadline_ms="))
        .map(|ms| std::time::Duration::from_millis(ms.parse().unwrap()))
}

/// A Mitogen child's stdout, as `filter --mitogen` and `guard` check it: the bootstrap handshake
/// is passed (`bootstrap::Handshake`, Mitogen's own rule for where it ends), then every frame
/// is checked under the policy's message policy and decoded (`mitogen::StreamCheck`, one for
/// the stream); the outcome is the first refusal's kind and its limit or setting (`-` for
/// none), or `ok`.
fn mitogen_outcome(data: &[u8], policy: &Policy, limits: Limits) -> (String, String) {
    use picklewarden::mitogen::bootstrap::{Handshake, Step};
    use picklewarden::mitogen::{FrameError, FrameReader, StreamCheck};
    let refused = |e: &FrameError| {
        (
            e.kind_name().to_owned(),
            e.limit_name().unwrap_or("-").to_owned(),
        )
    };
    let mut h = Handshake::default();
    let start = match h.feed(data, 1 << 20) {
        Step::Done(k) => k,
        _ => return ("bootstrap_not_ended".into(), "-".into()),
    };
    let mut reader = FrameReader::new().starting_at(start as u64);
    reader.push(&data[start..]);
    let mut check = StreamCheck::new();
    loop {
        match reader.next_frame() {
            Ok(Some(frame)) => {
                if let Err(e) = check.check_frame(&frame, policy, limits) {
                    return refused(&e);
                }
            }
            Ok(None) => break,
            Err(e) => return refused(&e),
        }
    }
    match reader.finish() {
        Ok(()) => ("ok".into(), "-".into()),
        Err(e) => refused(&e),
    }
}

#[test]
fn every_vector_has_its_expected_outcome() {
    let rows = manifest();
    assert!(rows.len() >= 25, "only {} vectors", rows.len());
    let mut failures = Vec::new();
    for row in &rows {
        let data = std::fs::read(vectors_dir().join(&row.file)).unwrap();
        let policy = Policy::builtin(&row.policy)
            .unwrap_or_else(|| panic!("{}: unknown policy {}", row.file, row.policy));
        let limits = limits_for(&policy, &row.limits);
        if row.convert {
            // The outcome is `ok`, `output_too_large`, or the scan's refusal kind.
            use picklewarden::formats::safetensors::{convert, ConvertError};
            let got = match convert(std::io::Cursor::new(&data), std::io::sink(), None) {
                Ok(_) => "ok".to_owned(),
                Err(ConvertError::OutputTooLarge { .. }) => "output_too_large".to_owned(),
                Err(ConvertError::Refused(r)) => r
                    .reason
                    .as_ref()
                    .map_or_else(|| "refused".to_owned(), |f| f.kind.clone()),
                Err(e) => format!("{e}"),
            };
            if got != row.expected {
                failures.push(format!(
                    "{} ({}, convert): expected {}, got {got}",
                    row.file, row.attack, row.expected
                ));
            }
            continue;
        }
        if row.model {
            // The outcome is the kind of the first refusal, or of the first part not
            // understood (`incomplete`), or `ok` for a clean file.
            use picklewarden::formats::container::{scan_bytes, ScanOptions, Verdict};
            let r = scan_bytes(&data, &ScanOptions::new().policy(Some(policy)));
            let got = match (&r.verdict, &r.reason) {
                (Verdict::Clean, _) => "ok".to_owned(),
                (_, Some(f)) => f.kind.clone(),
                (v, None) => format!("{} without a reason", v.name()),
            };
            if got != row.expected {
                failures.push(format!(
                    "{} ({}, model): expected {}, got {got} ({} {:?})",
                    row.file,
                    row.attack,
                    row.expected,
                    r.verdict.name(),
                    r.reason.as_ref().map(|f| f.message.as_str())
                ));
            }
            continue;
        }
        if row.mitogen {
            let (got, limit) = mitogen_outcome(&data, &policy, limits);
            if got != row.expected || limit != row.limit {
                failures.push(format!(
                    "{} ({}, mitogen): expected {} ({}), got {got} ({limit})",
                    row.file, row.attack, row.expected, row.limit
                ));
            }
            continue;
        }
        let mut d = Decoder::new(&data, &policy).limits(limits);
        if let Some(after) = deadline_for(&row.limits) {
            d = d.deadline(Instant::now() + after);
        }
        let result = if row.stream {
            d.decode_stream()
        } else {
            d.decode()
        };
        let got = match &result {
            Ok(doc) => {
                // Accepted within bounds: the outputs are linear in the input (DUP/GET
                // amplification must not blow them up).
                let text = json::to_typed_json(doc);
                let bound = 64 * data.len() + 4096;
                if text.len() > bound {
                    failures.push(format!(
                        "{}: typed JSON of {} bytes from {} input bytes",
                        row.file,
                        text.len(),
                        data.len()
                    ));
                }
                let r = repr::to_repr(doc);
                if r.len() > bound {
                    failures.push(format!("{}: repr of {} bytes", row.file, r.len()));
                }
                "ok".to_owned()
            }
            Err(e) => {
                if let ErrorKind::LimitExceeded { limit, .. } = e.kind() {
                    if limit.name() != row.limit {
                        failures.push(format!(
                            "{}: limit {} exceeded, manifest says {}",
                            row.file,
                            limit.name(),
                            row.limit
                        ));
                    }
                }
                assert!(e.offset() <= data.len() as u64, "{}: {e}", row.file);
                e.kind().name().to_owned()
            }
        };
        if got != row.expected {
            failures.push(format!(
                "{} ({}, policy {}, limits {}, {}): expected {}, got {got}{}",
                row.file,
                row.attack,
                row.policy,
                row.limits,
                if row.stream { "stream" } else { "single" },
                row.expected,
                result
                    .as_ref()
                    .err()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_vector_file_is_listed_and_every_attack_has_a_vector() {
    let rows = manifest();
    let listed: BTreeSet<&str> = rows.iter().map(|r| r.file.as_str()).collect();
    for entry in std::fs::read_dir(vectors_dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".pkl") || name.ends_with(".bin") || name.ends_with(".pt") {
            assert!(
                listed.contains(name.as_str()),
                "{name} is not in MANIFEST.tsv"
            );
        }
    }
    let attacks_md =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("audit/ATTACKS.md"))
            .unwrap();
    let documented: BTreeSet<String> = attacks_md
        .lines()
        .filter_map(|l| l.strip_prefix("## A"))
        .map(|l| {
            format!(
                "A{}",
                l.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
            )
        })
        .collect();
    let with_vectors: BTreeSet<String> = rows.iter().map(|r| r.attack.clone()).collect();
    assert!(
        documented.len() >= 25,
        "{} attacks documented",
        documented.len()
    );
    for a in &with_vectors {
        assert!(
            documented.contains(a),
            "vectors for {a}, which ATTACKS.md does not describe"
        );
    }
    for a in &documented {
        assert!(with_vectors.contains(a), "{a} in ATTACKS.md has no vector");
    }
}

// ---------------------------------------------------------------- hash flooding

/// `k * MODULUS` hashes to 0 in CPython for every int k: a dict of such keys is one long
/// collision chain there.
const MODULUS: u128 = common::CPYTHON_HASH_MODULUS;

/// `{k * (2**61 - 1): k % 256 for k in range(n)}` at protocol 2 (the value as BININT1).
fn colliding_dict(n: usize) -> Vec<u8> {
    let mut p = b"\x80\x02}(".to_vec();
    for k in 0..n {
        p.extend(long1(k as u128 * MODULUS));
        p.extend_from_slice(&[b'K', k as u8]);
    }
    p.extend_from_slice(b"u.");
    p
}

/// `{k * (2**61 - 1) for k in range(n)}` at protocol 4 (EMPTY_SET, ADDITEMS).
fn colliding_set(n: usize) -> Vec<u8> {
    let mut p = b"\x80\x04\x8f(".to_vec();
    for k in 0..n {
        p.extend(long1(k as u128 * MODULUS));
    }
    p.extend_from_slice(b"\x90.");
    p
}

/// The limits with the model of CPython's key work lifted: picklewarden's own hashing of the
/// colliding keys, which CPython's reader would refuse to be handed (below).
fn own_hashing_only() -> Limits {
    let mut limits = Limits::default();
    limits.max_key_collisions = u64::MAX;
    limits.max_key_steps = u64::MAX;
    limits.max_key_steps_per_byte = u64::MAX;
    limits
}

fn check_dict(n: usize) -> f64 {
    let bytes = colliding_dict(n);
    let policy = Policy::data();
    let start = Instant::now();
    let doc = Decoder::new(&bytes, &policy)
        .limits(own_hashing_only())
        .decode()
        .unwrap();
    let secs = start.elapsed().as_secs_f64();
    let Some(Value::Dict(d)) = doc.get(doc.root().unwrap()) else {
        panic!("not a dict");
    };
    assert_eq!(d.len(), n, "keys merged that CPython keeps apart");
    for (k, &(key, value)) in d.iter().enumerate().step_by(997) {
        let want = (k as u128 * MODULUS).to_string();
        let got = match doc.get(key).unwrap() {
            Value::Int(i) => i.to_string(),
            Value::BigInt(b) => b.to_string(),
            other => panic!("key {k} decoded as {other:?}"),
        };
        assert_eq!(got, want, "key {k}");
        assert!(matches!(doc.get(value), Some(Value::Int(v)) if v == (k % 256) as i64));
    }
    secs
}

fn check_set(n: usize) -> f64 {
    let bytes = colliding_set(n);
    let policy = Policy::data();
    let start = Instant::now();
    let doc = Decoder::new(&bytes, &policy)
        .limits(own_hashing_only())
        .decode()
        .unwrap();
    let secs = start.elapsed().as_secs_f64();
    let Some(Value::Set(s)) = doc.get(doc.root().unwrap()) else {
        panic!("not a set");
    };
    assert_eq!(s.len(), n);
    secs
}

#[test]
fn keys_colliding_under_cpython_hash_decode_correctly() {
    // The oracle: these keys really all hash to 0 in CPython (python3 is a test dependency).
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "print(all(hash(k * (2**61 - 1)) == 0 for k in range(50000)))",
        ])
        .output()
        .expect("python3");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "True");

    // Work is counted by the timings below (printed for audit/FUZZING.md, never asserted):
    // picklewarden hashes keys with keyed SipHash over their value (src/build/keys/mod.rs), so
    // these keys spread over the table like any others and 5x the keys costs about 5x the time.
    let mut report = Vec::new();
    for n in [10_000, 50_000] {
        let d = check_dict(n);
        let s = check_set(n);
        report.push(format!(
            "n={n}: dict {:.1} ms, set {:.1} ms",
            d * 1e3,
            s * 1e3
        ));
    }
    eprintln!(
        "hash flooding (CPython-colliding int keys): {}",
        report.join("; ")
    );

    // Under the default limits the reader after picklewarden is protected: the 33rd key
    // sharing CPython's hash 0 in one dict or set is refused (max_key_collisions is 32), at
    // the SETITEMS or ADDITEMS that inserts it.
    let policy = Policy::data();
    for (bytes, op) in [(colliding_dict(50), b'u'), (colliding_set(50), 0x90)] {
        let e = Decoder::new(&bytes, &policy).decode().unwrap_err();
        match e.kind() {
            ErrorKind::LimitExceeded { limit, seen, max } => {
                assert_eq!(limit.name(), "max_key_collisions", "{e}");
                assert_eq!((*seen, *max), (33, 32), "{e}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(e.offset(), bytes.len() as u64 - 2, "{e}");
        assert_eq!(e.opcode(), Some(op));
    }
}
