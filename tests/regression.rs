//! Replays every file in `tests/regression/` (fuzz finds and other reproducers, named
//! `crash-<sha1>.pkl`) and checks its expected outcome from `tests/regression/EXPECTED.tsv`:
//! `file<TAB>expected<TAB>policy<TAB>status<TAB>note`, where expected is an error kind name
//! (`limit_exceeded`, `global_not_allowed`, ...) or `ok`, policy is a built-in policy name or
//! `fuzz-records` (the fuzz harness's policy; `-` for `data`), and status is `fixed` or `open`.
//! Every file must be listed, and every listed file must exist. Each file is also run through
//! the fuzz harness's invariants (as `tests/fuzz_smoke.rs` does), and an accepted file's typed
//! JSON and repr are written. A file whose bug is `open` is only listed and not run (it may
//! hang), so the suite stays finite until the fix lands; then flip it to `fixed`.

// Test code: a failed invariant is a panic, by design (clippy.toml's allow-*-in-tests covers
// #[test] fns only, not the helpers and the shared harness module).
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

#[allow(unreachable_pub, dead_code, missing_docs)]
#[path = "../fuzz/src/gen.rs"]
mod gen;
// unused_imports: the harness re-exports (`pub use`) what the fuzz crate's targets name.
#[allow(unreachable_pub, dead_code, missing_docs, unused_imports)]
#[path = "../fuzz/src/harness/mod.rs"]
mod harness;

use std::collections::BTreeMap;
use std::path::Path;

use picklewarden::{Decoder, Policy};

struct Expected {
    outcome: String,
    policy: String,
    open: bool,
}

fn manifest(dir: &Path) -> BTreeMap<String, Expected> {
    let text = std::fs::read_to_string(dir.join("EXPECTED.tsv")).expect("EXPECTED.tsv");
    let mut m = BTreeMap::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        assert!(cols.len() >= 2, "EXPECTED.tsv line {}: {line:?}", i + 1);
        let policy = match cols.get(2).copied() {
            None | Some("-") | Some("") => "data",
            Some(p) => p,
        };
        let prev = m.insert(
            cols[0].to_owned(),
            Expected {
                outcome: cols[1].to_owned(),
                policy: policy.to_owned(),
                open: match cols.get(3).copied() {
                    None | Some("fixed") | Some("-") => false,
                    Some("open") => true,
                    Some(other) => panic!("{}: status {other:?} is not fixed or open", cols[0]),
                },
            },
        );
        assert!(prev.is_none(), "{} listed twice", cols[0]);
    }
    m
}

#[test]
fn every_regression_file_has_its_expected_outcome() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/regression");
    let expected = manifest(&dir);
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name == "EXPECTED.tsv" || name.ends_with(".md") {
            continue;
        }
        let e = expected
            .get(&name)
            .unwrap_or_else(|| panic!("{name} is not listed in tests/regression/EXPECTED.tsv"));
        if e.open {
            // An open bug may hang or blow up: only listed, not run, until its fix lands.
            eprintln!("{name}: open bug, not run");
            seen += 1;
            continue;
        }
        let data = std::fs::read(&path).unwrap();
        let policy = harness::policies()
            .iter()
            .find(|p| p.name == e.policy)
            .cloned()
            .or_else(|| Policy::builtin(&e.policy))
            .unwrap_or_else(|| panic!("{name}: unknown policy {}", e.policy));
        let got = match Decoder::new(&data, &policy).decode() {
            Ok(doc) => {
                let _ = picklewarden::json::to_typed_json(&doc);
                let _ = picklewarden::repr::to_repr(&doc);
                "ok".to_owned()
            }
            Err(err) => err.kind().name().to_owned(),
        };
        assert_eq!(got, e.outcome, "{name} under policy {}", e.policy);
        harness::check_decode(&data);
        harness::check_scan_build_agree(&data);
        seen += 1;
    }
    for name in expected.keys() {
        assert!(dir.join(name).is_file(), "{name} is listed but missing");
    }
    assert_eq!(seen, expected.len());
}
