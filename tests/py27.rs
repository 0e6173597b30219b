//! Python 2.7 pickles, compared with CPython 3 in the oracle's records mode
//! (`oracle.py compare --mode records --encoding latin1`: each file is loaded with
//! `pickle.loads(data, encoding="latin1")`, files CPython 3 cannot load are skipped, then with
//! the record-model unpickler), decoded with Python 2 str as latin1 str, natives native and
//! every other global a record. Three tiers:
//!
//! - `tests/corpus/py27/` (committed, 110 KB): the pickles `tests/python/gen_py27.py` makes with
//!   CPython 2.7.18, cPickle and pickle, protocols 0-2. Needs only python3; always runs.
//! - the generator itself: when Python 2.7 is found (`PICKLEWARDEN_PYTHON27`, else
//!   `~/.pyenv/versions/2.7*/bin/python`, else `python2.7` / `python2` on PATH), it is run and
//!   must give the committed files byte for byte. Without Python 2.7 the test prints
//!   `SKIPPED: ...` and passes, unless `PICKLEWARDEN_REQUIRE_PY27=1` (set by `.ci/run`).
//! - the team's shared pickle-fuzz corpus (`**/*.pkl.xz` under `PICKLEWARDEN_PY27_CORPUS`, for
//!   instance `../shared/corpus/py27-pickle-fuzz` beside the checkout), decoded under
//!   `tests/policy/py27-records.toml`, only when that variable is set (minutes and gigabytes of
//!   the Python oracle); `SKIPPED: ...` otherwise.

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
use std::process::Command;

use common::{
    decode_outcome, list_globals, oracle_line, python, records_policy_toml, repo, run_oracle,
    scratch, Outcome,
};
use picklewarden::{Decoder, Policy};

/// `NAME=1` in the environment.
fn required(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| v == "1")
}

/// Files under `dir` (recursively) whose name ends with `suffix`, sorted.
fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, suffix: &str, out: &mut Vec<PathBuf>) {
        for entry in
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            if path.is_dir() {
                walk(&path, suffix, out);
            } else if path.to_string_lossy().ends_with(suffix) {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, suffix, &mut out);
    out.sort();
    out
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

/// What one records-mode comparison found.
struct Summary {
    decoded: u64,
    compared: u64,
    skipped: u64,
}

/// Decodes every file (`raw[i]` holds the bytes of `files[i]`, which the oracle reads itself,
/// .xz or not) under `policy` and compares each outcome with the oracle's records mode. Fails
/// on a decoder panic, on any mismatch and when a line is neither compared nor skipped.
fn compare_records(name: &str, files: &[PathBuf], raw: &[PathBuf], policy: &Policy) -> Summary {
    let dir = scratch(name);
    let mut lines = Vec::new();
    let mut panics = Vec::new();
    let mut decoded = 0;
    for (file, pkl) in files.iter().zip(raw) {
        let bytes = std::fs::read(pkl).unwrap_or_else(|e| panic!("read {}: {e}", pkl.display()));
        let out = decode_outcome(&bytes, policy, None, false, true);
        match &out {
            Outcome::Panic(msg) => panics.push(format!("{}: {msg}", file.display())),
            Outcome::Ok { .. } => decoded += 1,
            Outcome::Err { .. } => eprintln!("refused: {}: {}", file.display(), out.detail()),
        }
        lines.push(oracle_line(file, &out));
    }
    assert!(panics.is_empty(), "decoder panics:\n{}", panics.join("\n"));

    let run = run_oracle(
        &dir,
        &format!("{name}.jsonl"),
        &lines,
        &["--mode", "records", "--encoding", "latin1"],
    );
    eprintln!(
        "{name}: picklewarden decoded {decoded} of {} files; oracle compared {}, mismatched {}, \
         skipped {}",
        files.len(),
        run.compared,
        run.mismatched,
        run.skipped
    );
    assert!(
        run.success && run.mismatched == 0,
        "oracle exited {} with {} mismatch(es):\n{}\n{}",
        run.status,
        run.mismatched,
        run.stdout,
        run.stderr
    );
    assert_eq!(
        run.compared + run.skipped,
        files.len() as u64,
        "every line is compared or skipped"
    );
    Summary {
        decoded,
        compared: run.compared,
        skipped: run.skipped,
    }
}

// ------------------------------------------------------------------------ committed corpus

fn committed_dir() -> PathBuf {
    repo().join("tests/corpus/py27")
}

/// The committed corpus: every file CPython 3 loads, and picklewarden decodes every one the
/// same way.
#[test]
fn committed_py27_corpus_matches_cpython_records_mode() {
    let files = files_ending(&committed_dir(), ".pkl");
    assert!(
        files.len() >= 500,
        "only {} .pkl files under {} (regenerate with python2.7 tests/python/gen_py27.py)",
        files.len(),
        committed_dir().display()
    );
    // Natives native, every other global the files name a record (as py27-records.toml does
    // for the shared corpus).
    let globals = list_globals(&files);
    for (m, n) in [
        ("copy_reg", "_reconstructor"),
        ("__builtin__", "set"),
        ("py27types", "Classic"),
        ("datetime", "datetime"),
    ] {
        assert!(
            globals.contains(&(m.to_owned(), n.to_owned())),
            "the globals listing missed {m}.{n}: {globals:?}"
        );
    }
    let toml = records_policy_toml("py27-generated", &globals);
    let policy = Policy::from_toml_str(&toml).unwrap_or_else(|e| panic!("{e}\n{toml}"));
    let s = compare_records("py27-committed", &files, &files, &policy);
    // CPython 3 loads every one of them (nothing skipped), so each was compared.
    assert_eq!(s.skipped, 0, "CPython 3 loads every committed file");
    assert_eq!(s.compared, files.len() as u64);
    assert_eq!(
        s.decoded,
        files.len() as u64,
        "picklewarden decodes them all"
    );
}

// ------------------------------------------------------------------------ the generator

/// `Some(version)` when `python` runs and is CPython 2.7.
fn python27_version(python: &Path) -> Option<String> {
    let out = Command::new(python)
        .args([
            "-c",
            "import sys; sys.stdout.write('%d.%d.%d' % sys.version_info[:3])",
        ])
        .output()
        .ok()?;
    let v = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && v.starts_with("2.7.")).then_some(v)
}

/// Python 2.7: `PICKLEWARDEN_PYTHON27` (which must work when set), else the newest
/// `$PYENV_ROOT/versions/2.7*/bin/python` (`~/.pyenv` by default), else `python2.7` or
/// `python2` on PATH (a pyenv shim that is not enabled does not run, and is passed over).
fn python27() -> Result<(PathBuf, String), String> {
    if let Some(p) = std::env::var_os("PICKLEWARDEN_PYTHON27") {
        let p = PathBuf::from(p);
        return python27_version(&p)
            .map(|v| (p.clone(), v))
            .ok_or_else(|| format!("PICKLEWARDEN_PYTHON27={} is not a Python 2.7", p.display()));
    }
    let mut tried = Vec::new();
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
    let mut candidates = Vec::new();
    if let Some(root) = pyenv {
        let versions = root.join("versions");
        let mut found: Vec<PathBuf> = std::fs::read_dir(&versions)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().starts_with("2.7"))
                    .map(|e| e.path().join("bin/python"))
                    .collect()
            })
            .unwrap_or_default();
        found.sort();
        found.reverse();
        if found.is_empty() {
            tried.push(format!("{}/2.7*/bin/python", versions.display()));
        }
        candidates.extend(found);
    }
    candidates.extend([PathBuf::from("python2.7"), PathBuf::from("python2")]);
    for c in candidates {
        if let Some(v) = python27_version(&c) {
            return Ok((c, v));
        }
        tried.push(c.display().to_string());
    }
    Err(format!("no Python 2.7 (tried {})", tried.join(", ")))
}

/// The committed files are what `gen_py27.py` makes with this machine's Python 2.7, byte for
/// byte: the corpus is real Python 2.7 output and the generator is its source.
#[test]
fn python27_regenerates_the_committed_corpus() {
    let (py27, version) = match python27() {
        Ok(found) => found,
        Err(why) => {
            assert!(
                !required("PICKLEWARDEN_REQUIRE_PY27"),
                "PICKLEWARDEN_REQUIRE_PY27=1 but {why}; install it with \
                 `pyenv install 2.7.18` or point PICKLEWARDEN_PYTHON27 at one"
            );
            eprintln!(
                "SKIPPED: {why}: tests/corpus/py27 is not regenerated from \
                 tests/python/gen_py27.py (install it with `pyenv install 2.7.18`, or set \
                 PICKLEWARDEN_PYTHON27; .ci/run requires it)"
            );
            return;
        }
    };
    let dir = scratch("py27-generated");
    let out = Command::new(&py27)
        .arg(repo().join("tests/python/gen_py27.py"))
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", py27.display()));
    assert!(
        out.status.success(),
        "gen_py27.py under {} failed:\n{}{}",
        py27.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let name = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
    let made: Vec<String> = files_ending(&dir, ".pkl").iter().map(name).collect();
    let committed: Vec<String> = files_ending(&committed_dir(), ".pkl")
        .iter()
        .map(name)
        .collect();
    let regen = "regenerate with `python2.7 tests/python/gen_py27.py` and commit";
    assert_eq!(made, committed, "file names differ; {regen}");
    let differ: Vec<&String> = made
        .iter()
        .filter(|n| {
            std::fs::read(dir.join(n)).unwrap() != std::fs::read(committed_dir().join(n)).unwrap()
        })
        .collect();
    assert!(
        differ.is_empty(),
        "Python {version} ({}) writes other bytes than tests/corpus/py27 holds for {differ:?}; \
         {regen}",
        py27.display()
    );
    eprintln!(
        "py27: {} files regenerated by Python {version} ({}) match tests/corpus/py27",
        made.len(),
        py27.display()
    );
}

// ------------------------------------------------------------------------ the shared corpus

/// The shared corpus, only when `PICKLEWARDEN_PY27_CORPUS` names it (it must exist then): the
/// team's folder beside the checkout (`../shared/corpus/py27-pickle-fuzz`) holds containers of
/// 2**20 items whose comparison takes minutes and gigabytes in the Python oracle, so it is not
/// run by default; `tests/corpus/py27` covers the same kinds of values at small sizes.
fn shared_corpus_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PICKLEWARDEN_PY27_CORPUS") {
        let dir = PathBuf::from(dir);
        assert!(
            dir.is_dir(),
            "PICKLEWARDEN_PY27_CORPUS={} is not a folder",
            dir.display()
        );
        return Some(dir);
    }
    eprintln!(
        "SKIPPED: the shared Python 2.7 pickle-fuzz corpus runs only when PICKLEWARDEN_PY27_CORPUS \
         names it (e.g. PICKLEWARDEN_PY27_CORPUS=../shared/corpus/py27-pickle-fuzz: 269 files, \
         24 MB, minutes and a few GB of the Python oracle). tests/corpus/py27 is still compared."
    );
    None
}

#[test]
fn shared_py27_corpus_matches_cpython_records_mode() {
    let Some(dir) = shared_corpus_dir() else {
        return;
    };
    let files = files_ending(&dir, ".pkl.xz");
    assert!(
        files.len() >= 255,
        "only {} .pkl.xz files under {}",
        files.len(),
        dir.display()
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

    let raw_dir = scratch("py27-shared-raw");
    let raw = decompress_all(&files, &raw_dir);
    let s = compare_records("py27-shared", &files, &raw, &policy);
    assert!(
        s.compared >= 255,
        "only {} files compared (CPython 3 loads 255 of them)",
        s.compared
    );
    assert!(
        s.decoded >= 255,
        "picklewarden decoded only {} files",
        s.decoded
    );
}
