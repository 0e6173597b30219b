//! `scan` on real folders (tests/corpus/scan, made by tests/python/gen_scan_corpus.py and
//! gen_scan_py27.py with transformers, torch, pandas, scikit-learn and joblib, and Python 2.7
//! with joblib 0.10): each file's format, verdict, refusal and severity against MANIFEST.tsv; a
//! model folder clean and skipped; the `--trust` round trip in one round; severities on the
//! hostile corpus; `--fail-on`; a folder of Python sources skipped in a two-line report.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};

use picklewarden::formats::container::{runs_code, scan_bytes, ScanOptions, Severity, Verdict};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).to_path_buf()
}

fn pw(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_picklewarden"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap()
}

fn json(args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec!["scan", "--format", "json"];
    all.extend_from_slice(args);
    let out = pw(&all);
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap(),
    )
}

fn file<'v>(v: &'v Value, suffix: &str) -> &'v Value {
    v["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with(suffix))
        .unwrap_or_else(|| panic!("no {suffix}"))
}

#[test]
fn every_file_gets_its_manifest_verdict() {
    let dir = root().join("tests/corpus/scan");
    let text = std::fs::read_to_string(dir.join("MANIFEST.tsv")).unwrap();
    let mut n = 0;
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        let r = scan_bytes(&std::fs::read(dir.join(f[0])).unwrap(), &ScanOptions::new());
        let kind = r.reason.as_ref().map_or("-", |x| x.kind.as_str());
        let severity = r.severity.map_or("-", Severity::name);
        assert_eq!(
            (r.format.name(), r.verdict.name(), kind, severity),
            (f[1], f[2], f[3], f[4]),
            "{}: {:?}",
            f[0],
            r.reason
        );
        n += 1;
    }
    assert!(n >= 19, "{n} rows");
}

/// A model folder as transformers writes it: the model files clean, the configuration,
/// tokenizer and card skipped, exit 0, and a text report of the two model files and two
/// summary lines.
#[test]
fn a_model_folder_is_clean_and_the_rest_skipped() {
    let (code, v) = json(&["tests/corpus/scan/model"]);
    assert_eq!(code, Some(0));
    assert_eq!(file(&v, "model.safetensors")["verdict"], "clean");
    assert_eq!(file(&v, "model.safetensors")["format"], "safetensors");
    assert_eq!(file(&v, "pytorch_model.bin")["verdict"], "clean");
    assert_eq!(file(&v, "pytorch_model.bin")["format"], "torch-zip");
    for name in [
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.txt",
        "README.md",
    ] {
        assert_eq!(file(&v, name)["verdict"], "skipped", "{name}");
        assert_eq!(file(&v, name)["format"], "text", "{name}");
    }
    assert_eq!(v["summary"]["clean"], 2);
    assert_eq!(v["summary"]["skipped"], 5);
    let out = pw(&["scan", "tests/corpus/scan/model"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(
        text.contains("5 files skipped, not pickle-bearing (5 text)"),
        "{text}"
    );
    assert!(text.ends_with("7 files: 2 clean, 0 refused, 0 incomplete, 0 unreadable, 5 skipped\n"));
    // Read as before, every file a pickle: the text is refused.
    assert_eq!(
        pw(&["scan", "--all-as-pickle", "tests/corpus/scan/model"])
            .status
            .code(),
        Some(1)
    );
}

/// A folder of Python sources and bytecode (the standard library's `json` package, as a
/// site-packages folder holds packages): nothing is pickle-bearing, a two-line report, exit 0.
#[test]
fn a_python_package_folder_is_skipped_in_two_lines() {
    // python3 is what every run of the tests needs (README, "Tests").
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import json, os; print(os.path.dirname(json.__file__))",
        ])
        .output()
        .expect("python3");
    let dir = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let out = pw(&["scan", &dir]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.contains(" text"), "{text}");
    assert!(text.contains(" 0 refused"), "{text}");
}

/// `--trust` on pandas and scikit-learn pickles of protocols 2, 4 and 5 and a Python 2 pickle
/// of non-ASCII str: the policy it writes makes the next scan clean, in one round.
#[test]
fn trust_round_trips_in_one_round() {
    let dir = std::env::temp_dir().join(format!("pw-trust1-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut files: Vec<String> = ["dataframe", "pipeline"]
        .iter()
        .flat_map(|n| {
            (2..=5)
                .filter(|p| *p != 3)
                .map(move |p| format!("{n}.p{p}.pkl"))
        })
        .map(|n| format!("tests/corpus/scan/pickles/{n}"))
        .collect();
    files.push("tests/corpus/scan/py27/py2_str.pkl".into());
    let mut args = vec!["scan", "--trust"];
    args.extend(files.iter().map(String::as_str));
    let out = pw(&args);
    assert_eq!(out.status.code(), Some(1));
    let toml = String::from_utf8(out.stdout).unwrap();
    assert!(!toml.contains("module = \"?\""), "{toml}");
    assert!(
        toml.contains("\npython2_str_encoding = \"latin1\"\n"),
        "{toml}"
    );
    for (m, n) in [
        ("pandas", "Index"),
        ("pandas", "RangeIndex"),
        ("pandas", "StringDtype"),
        ("sklearn.pipeline", "Pipeline"),
        ("numpy._core.numeric", "_frombuffer"),
    ] {
        assert!(
            toml.contains(&format!(
                "module = \"{m}\"\nname = \"{n}\"\nconstructor = \"record\""
            )),
            "{m}.{n}: {toml}"
        );
    }
    let policy = dir.join("trusted.toml");
    std::fs::write(&policy, &toml).unwrap();
    let mut args = vec![
        "scan",
        "--format",
        "json",
        "--policy",
        policy.to_str().unwrap(),
    ];
    args.extend(files.iter().map(String::as_str));
    let out = pw(&args);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(v["summary"]["clean"], files.len());
    let _ = std::fs::remove_dir_all(&dir);
}

/// What `pickle.dump` called twice writes: each pickle checked, each listed.
#[test]
fn a_stream_of_pickles_is_checked_pickle_by_pickle() {
    let (code, v) = json(&["tests/corpus/scan/pickles/two_pickles.pkl"]);
    assert_eq!(code, Some(0));
    let f = &v["files"][0];
    assert_eq!(f["verdict"], "clean");
    assert_eq!(f["pickles"], serde_json::json!(["", "pickle 2 at 0x2a"]));
    // A second pickle that calls posix.system is refused, with its offset in that pickle.
    let dir = std::env::temp_dir().join(format!("pw-stream-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("two.pkl");
    let mut bytes =
        std::fs::read(root().join("tests/corpus/scan/pickles/two_pickles.pkl")).unwrap();
    bytes.truncate(0x2a);
    bytes.extend_from_slice(b"\x80\x02cposix\nsystem\nX\x02\x00\x00\x00id\x85R.");
    std::fs::write(&p, &bytes).unwrap();
    let (code, v) = json(&[p.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    let f = &v["files"][0];
    assert_eq!(f["severity"], "code");
    assert_eq!(f["reason"]["entry"], "pickle 2 at 0x2a");
    assert_eq!(f["reason"]["offset"], 2);
    // Bytes after the last STOP that are no pickle: refused.
    bytes.truncate(0x2a);
    bytes.extend_from_slice(b"garbage\n");
    std::fs::write(&p, &bytes).unwrap();
    let (code, v) = json(&[p.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert_eq!(v["files"][0]["reason"]["kind"], "trailing_data");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every hostile corpus file naming a global known to run code has severity `code`; one that
/// names only classes outside the policy is `untrusted`; the text table lists code first.
#[test]
fn severity_on_the_hostile_corpus() {
    let dir = root().join("tests/corpus/hostile");
    let mut code = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "pkl") {
            continue;
        }
        let r = scan_bytes(&std::fs::read(&path).unwrap(), &ScanOptions::new());
        if r.verdict == Verdict::Skipped {
            continue;
        }
        let names_code = r
            .globals
            .iter()
            .any(|g| !g.allowed && runs_code(&g.module, &g.name));
        if names_code {
            assert_eq!(r.severity, Some(Severity::Code), "{}", path.display());
            code += 1;
        }
        if r.verdict == Verdict::Refused && r.severity == Some(Severity::Code) {
            let why = r.globals.iter().any(|g| !g.allowed && g.runs_code)
                || r.globals.iter().any(|g| g.module == "?" || g.name == "?")
                || r.reason
                    .as_ref()
                    .is_some_and(|f| f.kind == "callable_not_allowed");
            assert!(why, "{}: code with no reason", path.display());
        }
    }
    assert!(code >= 20, "{code} files name code-running globals");
    let (_, v) = json(&["tests/corpus/hostile/global-os.system-GLOBAL_REDUCE.pkl"]);
    assert_eq!(v["files"][0]["severity"], "code");
    assert_eq!(v["files"][0]["reason"]["severity"], "code");
    let out = pw(&[
        "scan",
        "tests/corpus/scan/pickles/dataframe.p4.pkl",
        "tests/corpus/hostile/global-os.system-GLOBAL_REDUCE.pkl",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.lines().next().unwrap();
    assert!(first.starts_with("REFUSED    code "), "{text}");
    assert!(text.contains("(1 code, 1 untrusted)"), "{text}");
}

/// `--fail-on`: a folder whose refusals are classes outside the policy fails only under
/// `untrusted` and `any`; one with a code-running global fails under each.
#[test]
fn fail_on_sets_the_exit_status() {
    let untrusted = "tests/corpus/scan/pickles";
    let hostile = "tests/corpus/hostile/global-os.system-GLOBAL_REDUCE.pkl";
    for (args, want) in [
        (vec!["--fail-on", "code", untrusted], 0),
        (vec!["--fail-on", "untrusted", untrusted], 1),
        (vec![untrusted], 1),
        (vec!["--fail-on", "code", untrusted, hostile], 1),
    ] {
        let mut all = vec!["scan"];
        all.extend(args.iter());
        assert_eq!(pw(&all).status.code(), Some(want), "{args:?}");
    }
}

/// SARIF: a code-running global is an error of rule runs_code, a class outside the policy a
/// warning, each rule with GitHub's security-severity.
#[test]
fn sarif_levels_follow_the_severity() {
    let out = pw(&[
        "scan",
        "--format",
        "sarif",
        "tests/corpus/scan/pickles/dataframe.p4.pkl",
        "tests/corpus/hostile/global-os.system-GLOBAL_REDUCE.pkl",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = v["runs"][0]["results"].as_array().unwrap();
    let level = |rule: &str| {
        results
            .iter()
            .find(|r| r["ruleId"] == rule)
            .map(|r| r["level"].as_str().unwrap().to_owned())
    };
    assert_eq!(level("runs_code").as_deref(), Some("error"));
    assert_eq!(level("global_not_allowed").as_deref(), Some("warning"));
    let rules = v["runs"][0]["tool"]["driver"]["rules"].as_array().unwrap();
    let rule = rules.iter().find(|r| r["id"] == "runs_code").unwrap();
    assert_eq!(rule["properties"]["security-severity"], "9.8");
}
