//! The Python 2.7 corpus (`../shared/corpus/py27-pickle-fuzz/**/*.pkl.xz`, pickles written by
//! CPython 2.7): decoded under `tests/policy/py27-records.toml` (Python 2 str as latin1 str,
//! natives native, every other global a record) and compared with
//! `oracle.py compare --mode records --encoding latin1`, which loads each file with
//! `pickle.loads(data, encoding="latin1")` (files CPython 3 cannot load are skipped) and then
//! with its record-model unpickler.

// Test code: a failed invariant is a panic, by design (clippy.toml's allow-*-in-tests covers
// #[test] fns only, not the helpers and the shared module).
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

mod common;

use std::path::{Path, PathBuf};

use common::{decode_outcome, oracle_line, python, repo, run_oracle, scratch, Outcome};
use picklewarden::{Decoder, Policy};

/// The corpus: `PICKLEWARDEN_PY27_CORPUS` when set, else the team's shared folder beside the
/// checkout (`../shared/corpus/py27-pickle-fuzz`). A missing corpus fails the test, naming
/// both: a run without it has not tested Python 2 input.
fn corpus_dir() -> PathBuf {
    let dir = std::env::var_os("PICKLEWARDEN_PY27_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared/corpus/py27-pickle-fuzz"));
    assert!(
        dir.is_dir(),
        "the Python 2.7 corpus is not at {} (the shared/corpus/py27-pickle-fuzz folder \
         beside this checkout; or set PICKLEWARDEN_PY27_CORPUS to where it is)",
        dir.display()
    );
    dir
}

fn xz_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
        if path.is_dir() {
            xz_files(&path, out);
        } else if path.to_string_lossy().ends_with(".pkl.xz") {
            out.push(path);
        }
    }
}

/// Decompresses every file (python3's lzma) into `dest`, as `dest/<index>.pkl`.
fn decompress_all(files: &[PathBuf], dest: &Path) -> Vec<PathBuf> {
    let list = dest.join("inputs.txt");
    let text: Vec<String> = files
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    std::fs::write(&list, text.join("\n")).unwrap_or_else(|e| panic!("{e}"));
    let code = r#"
import lzma, os, sys
dest = sys.argv[2]
paths = open(sys.argv[1], encoding="utf-8").read().split("\n")
for i, p in enumerate(paths):
    with open(p, "rb") as f:
        data = lzma.decompress(f.read())
    with open(os.path.join(dest, "%d.pkl" % i), "wb") as f:
        f.write(data)
print(len(paths))
"#;
    let n: usize = python(
        code,
        &[
            list.to_str().unwrap_or_default(),
            dest.to_str().unwrap_or_default(),
        ],
    )
    .trim()
    .parse()
    .unwrap_or_else(|e| panic!("decompress count: {e}"));
    assert_eq!(n, files.len());
    (0..n).map(|i| dest.join(format!("{i}.pkl"))).collect()
}

#[test]
fn py27_corpus_matches_cpython_records_mode() {
    let mut files = Vec::new();
    xz_files(&corpus_dir(), &mut files);
    files.sort();
    assert!(
        files.len() >= 255,
        "only {} .pkl.xz files under {}",
        files.len(),
        corpus_dir().display()
    );

    let policy_path = repo().join("tests/policy/py27-records.toml");
    let toml = std::fs::read_to_string(&policy_path)
        .unwrap_or_else(|e| panic!("read {}: {e}", policy_path.display()));
    let mut policy =
        Policy::from_toml_str(&toml).unwrap_or_else(|e| panic!("{}: {e}", policy_path.display()));
    // builtins/int/1e1000000.proto2 holds 10**1000000 as a 415 242-byte LONG4, which CPython 3
    // loads; picklewarden's default max_long_bytes (4096) refuses it on purpose (printing a big
    // int as decimal is quadratic), so this comparison raises that one limit. The proto0/1
    // spellings (1 000 001 digits of LONG text) are refused by CPython 3.11 itself (past
    // max_str_digits), so the oracle skips them.
    policy.limits.max_long_bytes = policy.limits.max_long_bytes.max(512 * 1024);
    assert_eq!(
        Decoder::new(b"\x80\x02\x8b\x00\x20\x00\x00", &policy)
            .decode()
            .map(|_| ())
            .map_err(|e| e.kind().name()),
        Err("truncated"),
        "the raised max_long_bytes is in effect (an 8192-byte LONG4 gets past the limit check)"
    );

    let dir = scratch("py27");
    let raw_dir = dir.join("raw");
    std::fs::create_dir_all(&raw_dir).unwrap_or_else(|e| panic!("{e}"));
    let raw = decompress_all(&files, &raw_dir);

    // Two oracle processes (the pure-Python side is slow on the 2**20-item files), balanced by
    // input size: biggest first, each to the lighter chunk.
    let mut pairs: Vec<(&PathBuf, Vec<u8>)> = files
        .iter()
        .zip(&raw)
        .map(|(xz, pkl)| (xz, std::fs::read(pkl).unwrap_or_else(|e| panic!("{e}"))))
        .collect();
    pairs.sort_by_key(|(xz, bytes)| (std::cmp::Reverse(bytes.len()), (*xz).clone()));
    let mut lines: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    let mut load = [0u64; 2];
    let mut panics = Vec::new();
    let mut decoded = 0;
    for (xz, bytes) in &pairs {
        let out = decode_outcome(bytes, &policy, None, false, true);
        match &out {
            Outcome::Panic(msg) => panics.push(format!("{}: {msg}", xz.display())),
            Outcome::Ok { .. } => decoded += 1,
            Outcome::Err { .. } => eprintln!("refused: {}: {}", xz.display(), out.detail()),
        }
        // The oracle reads the .xz itself.
        let k = usize::from(load[1] < load[0]);
        load[k] += bytes.len() as u64;
        lines[k].push(oracle_line(xz, &out));
    }
    assert!(panics.is_empty(), "decoder panics:\n{}", panics.join("\n"));

    let args = ["--mode", "records", "--encoding", "latin1"];
    let runs = std::thread::scope(|s| {
        let handles: Vec<_> = lines
            .iter()
            .enumerate()
            .map(|(i, chunk)| {
                let dir = &dir;
                s.spawn(move || run_oracle(dir, &format!("py27-{i}.jsonl"), chunk, &args))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| panic!("oracle thread panicked"))
            })
            .collect::<Vec<_>>()
    });
    let (mut compared, mut skipped) = (0, 0);
    let mut failures = Vec::new();
    for run in &runs {
        eprintln!(
            "oracle py27 chunk: {} compared, {} mismatched, {} skipped",
            run.compared, run.mismatched, run.skipped
        );
        compared += run.compared;
        skipped += run.skipped;
        if !run.success || run.mismatched != 0 {
            failures.push(format!(
                "oracle exited {} with {} mismatch(es):\n{}\n{}",
                run.status, run.mismatched, run.stdout, run.stderr
            ));
        }
    }
    eprintln!(
        "picklewarden decoded {decoded} of {} files; oracle compared {compared}, skipped {skipped}",
        files.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(
        compared + skipped,
        files.len() as u64,
        "every line is compared or skipped"
    );
    assert!(
        compared >= 255,
        "only {compared} files compared (CPython 3 loads 255 of them)"
    );
    assert!(decoded >= 255, "picklewarden decoded only {decoded} files");
}
