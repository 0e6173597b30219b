//! The good corpus (`tests/corpus/good`, real pickles written by CPython 3): every file decodes,
//! and its typed JSON equals what CPython loads, as `tests/python/oracle.py compare` judges.
//!
//! - plain files: `Policy::data()`, oracle `--mode data`;
//! - `record_*`: a records policy (every global the files name, listed with pickletools.genops,
//!   kept as a record, except the globals the oracle itself decodes natively), `--mode records`;
//! - `stream_*`: `decode_stream()`, oracle `--mode data --stream`.

// Test code: a failed invariant is a panic, by design (clippy.toml's allow-*-in-tests covers
// #[test] fns only, not the helpers and the shared module).
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

mod common;

use common::{
    decode_outcome, good_corpus, good_policies, oracle_line, run_oracle, scratch, Outcome,
};

#[test]
fn good_corpus_matches_cpython() {
    let files = good_corpus();
    let folder_count = files.len();
    assert!(folder_count >= 1000, "only {folder_count} good files");
    let (data, records) = good_policies(&files);

    let mut plain_lines = Vec::new();
    let mut record_lines = Vec::new();
    let mut stream_lines = Vec::new();
    let mut refused = Vec::new();
    let mut records_refused = 0;
    for f in &files {
        let bytes =
            std::fs::read(&f.path).unwrap_or_else(|e| panic!("read {}: {e}", f.path.display()));
        let policy = if f.records { &records } else { &data };
        let out = decode_outcome(&bytes, policy, None, f.stream, true);
        match &out {
            Outcome::Ok { roots, .. } => {
                if f.stream {
                    assert!(
                        *roots >= 2,
                        "{}: a stream file gave {roots} root(s)",
                        f.name
                    );
                } else {
                    assert_eq!(*roots, 1, "{}: one pickle, one root", f.name);
                }
            }
            // A records file may be refused only where the record model itself cannot express
            // it (e.g. KwPoint at protocol 2/3: REDUCE of functools.partial(...), a record,
            // not a global); the oracle then expects an error, and a refusal of a file it
            // loads is a mismatch. Plain and stream files must all decode; nothing may panic.
            Outcome::Err { .. } if f.records => {
                eprintln!(
                    "records file refused (the oracle must agree): {}: {}",
                    f.name,
                    out.detail()
                );
                records_refused += 1;
            }
            _ => refused.push(format!("{}: {}: {}", f.name, out.label(), out.detail())),
        }
        let line = oracle_line(&f.path, &out);
        if f.stream {
            stream_lines.push(line);
        } else if f.records {
            record_lines.push(line);
        } else {
            plain_lines.push(line);
        }
    }

    let dir = scratch("good_corpus");
    let runs = [
        (
            "data",
            run_oracle(&dir, "data.jsonl", &plain_lines, &["--mode", "data"]),
            plain_lines.len(),
        ),
        (
            "records",
            run_oracle(&dir, "records.jsonl", &record_lines, &["--mode", "records"]),
            record_lines.len(),
        ),
        (
            "stream",
            run_oracle(
                &dir,
                "stream.jsonl",
                &stream_lines,
                &["--mode", "data", "--stream"],
            ),
            stream_lines.len(),
        ),
    ];
    let mut failures = Vec::new();
    let mut compared = 0;
    for (label, run, lines) in &runs {
        eprintln!(
            "oracle {label}: {} compared, {} mismatched, {} skipped ({lines} lines)",
            run.compared, run.mismatched, run.skipped
        );
        compared += run.compared;
        if !run.success || run.mismatched != 0 {
            failures.push(format!(
                "oracle {label} exited {} ({} mismatched):\n{}\n{}",
                run.status, run.mismatched, run.stdout, run.stderr
            ));
        }
        if run.compared + run.skipped != *lines as u64 {
            failures.push(format!(
                "oracle {label}: {} compared + {} skipped != {lines} lines written",
                run.compared, run.skipped
            ));
        }
    }
    assert!(
        refused.is_empty() && failures.is_empty(),
        "{} good file(s) refused by picklewarden:\n{}\n\n{}",
        refused.len(),
        refused.join("\n"),
        failures.join("\n\n")
    );
    assert!(
        records_refused <= 8,
        "{records_refused} records files refused"
    );
    assert!(
        compared >= folder_count as u64,
        "the oracle compared {compared} files but the folder holds {folder_count} (the rest were skipped)"
    );
}
