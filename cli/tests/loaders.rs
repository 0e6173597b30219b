//! The differential harness of issue 34 (`tests/differential/run.py`) against the built
//! `picklewarden`: real files written by numpy, joblib, pickle and Mitogen, mutated
//! structure-aware, and for every file or pickle picklewarden accepts, the real loader
//! (`joblib.load`, `numpy.load`, `pickle.loads`, Mitogen's `Message.unpickle`) in a child
//! process with a tripwire, a memory cap and a CPU bound relative to picklewarden's own time.
//! A tripwire mark, a signal or a bound passed fails the run, unless its mutation class is
//! listed as known open in `tests/differential/KNOWN_OPEN.tsv`; and the saved finds of
//! `tests/differential/found` are replayed (those marked `fixed` must be refused or loaded
//! safely). torch is not run here (too big for CI; see tests/differential/README.md).
//!
//! The Python is `$PICKLEWARDEN_LOADERS_PYTHON`, else `target/loaders-venv/bin/python`, and
//! must import numpy and joblib. Without it the tests are skipped with a message, unless
//! `PICKLEWARDEN_REQUIRE_LOADERS=1` (set by `.ci/run`) makes that a failure. The budget is
//! `PICKLEWARDEN_LOADERS_SECONDS` (default 75, shared by the readers), the seed
//! `PICKLEWARDEN_LOADERS_SEED` (default 1).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn loaders_python() -> Option<PathBuf> {
    let p = std::env::var_os("PICKLEWARDEN_LOADERS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/loaders-venv/bin/python"));
    let works = p.exists()
        && Command::new(&p)
            .args(["-c", "import numpy, joblib"])
            .output()
            .is_ok_and(|o| o.status.success());
    if works {
        return Some(p);
    }
    if std::env::var_os("PICKLEWARDEN_REQUIRE_LOADERS").is_some_and(|v| v == "1") {
        panic!(
            "PICKLEWARDEN_REQUIRE_LOADERS=1 but there is no Python with numpy and joblib at {}",
            p.display()
        );
    }
    eprintln!(
        "SKIPPED: no Python with numpy and joblib at {} (create it with .ci/run, or \
         `python3 -m venv target/loaders-venv && target/loaders-venv/bin/pip install \
         numpy==2.4.6 joblib==1.6.0 mitogen==0.3.54 lz4`, or set PICKLEWARDEN_LOADERS_PYTHON)",
        p.display()
    );
    None
}

fn harness(python: &Path, args: &[&str], out: &str) -> (bool, String) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(out);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let o = Command::new("timeout")
        .args(["--kill-after=10", "900"])
        .arg(python)
        .arg(root().join("tests/differential/run.py"))
        .args(args)
        .arg("--picklewarden")
        .arg(env!("CARGO_BIN_EXE_picklewarden"))
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // The summary table and the run's findings, for `cargo test -- --nocapture` and for a
    // failing run's output.
    eprintln!("{text}");
    (o.status.success(), text)
}

#[test]
fn real_loaders_read_what_picklewarden_accepts() {
    let Some(python) = loaders_python() else {
        return;
    };
    let seconds = std::env::var("PICKLEWARDEN_LOADERS_SECONDS").unwrap_or_else(|_| "75".into());
    let seed = std::env::var("PICKLEWARDEN_LOADERS_SEED").unwrap_or_else(|_| "1".into());
    let (ok, text) = harness(
        &python,
        &[
            "--reader",
            "joblib,numpy,pickle-numpy,pickle-data,mitogen",
            "--seconds",
            &seconds,
            "--seed",
            &seed,
        ],
        "loaders-run",
    );
    assert!(text.contains("new failures:"), "the harness did not finish");
    // Every reader ran and accepted something (a harness that only met refusals would test
    // nothing of the loaders).
    for reader in ["joblib ", "numpy ", "pickle-numpy ", "pickle-data "] {
        assert!(
            text.lines().any(|l| l.starts_with(reader)),
            "no cases for {reader}"
        );
    }
    assert!(ok, "new failures (see above and the harness's found.tsv)");
}

#[test]
fn saved_finds_are_refused_or_load_safely() {
    let Some(python) = loaders_python() else {
        return;
    };
    let found = root().join("tests/differential/found");
    let (ok, text) = harness(
        &python,
        &["--replay", found.to_str().unwrap()],
        "loaders-replay",
    );
    assert!(text.contains("replay:"), "the replay did not finish");
    assert!(
        ok,
        "a saved find marked fixed is not refused or safe (see above)"
    );
}
