//! Drives real Mitogen (pinned in `.ci/run`: a virtualenv with mitogen from PyPI) through
//! `picklewarden guard`: a parent calls functions in a child, both directions are captured and
//! every frame must decode to what Mitogen's own unpickler gives; and a child that sends a
//! frame calling `os.system` is cut off before the parent reads it, with an audit event naming
//! the global and the offset. The Python side is `tests/python/mitogen_drive.py`.
//!
//! The virtualenv's python is `$PICKLEWARDEN_MITOGEN_PYTHON`, else
//! `target/mitogen-venv/bin/python`. Without it the tests are skipped with a message, unless
//! `PICKLEWARDEN_REQUIRE_MITOGEN=1` (set by `.ci/run`) makes that a failure. Every subprocess
//! runs under `timeout`, so a misbehaving Mitogen cannot hang the test run.
// Helpers outside #[test] functions may panic too: these are tests.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::PathBuf;
use std::process::Command;

fn mitogen_python() -> Option<PathBuf> {
    let p = std::env::var_os("PICKLEWARDEN_MITOGEN_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
                .join("target/mitogen-venv/bin/python")
        });
    if p.exists() {
        return Some(p);
    }
    if std::env::var_os("PICKLEWARDEN_REQUIRE_MITOGEN").is_some_and(|v| v == "1") {
        panic!(
            "PICKLEWARDEN_REQUIRE_MITOGEN=1 but there is no Mitogen virtualenv python at {}",
            p.display()
        );
    }
    eprintln!(
        "SKIPPED: no Mitogen virtualenv python at {} (create it with .ci/run, or \
         `python3 -m venv target/mitogen-venv && target/mitogen-venv/bin/pip install \
         mitogen==0.3.54`, or set PICKLEWARDEN_MITOGEN_PYTHON)",
        p.display()
    );
    None
}

fn drive(mode: &str) -> Option<serde_json::Value> {
    let python = mitogen_python()?;
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("mitogen-{mode}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let script = concat!(
        concat!(env!("CARGO_MANIFEST_DIR"), "/.."),
        "/tests/python/mitogen_drive.py"
    );
    let out = Command::new("timeout")
        .args(["--kill-after=10", "240"])
        .arg(&python)
        .arg(script)
        .arg(mode)
        .arg(env!("CARGO_BIN_EXE_picklewarden"))
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mitogen_drive.py {mode} failed ({:?}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let last = text.lines().last().unwrap_or_default();
    Some(serde_json::from_str(last).unwrap())
}

#[test]
fn calls_through_guard_decode_as_mitogen_unpickles_them() {
    let Some(r) = drive("calls") else { return };
    assert_eq!(r["calls"], "ok", "{r}");
    // Both directions were captured and compared frame by frame (the Python side raises on
    // any difference); make sure there was something to compare.
    assert!(r["up"]["frames"].as_u64().unwrap() >= 12, "{r}");
    assert!(r["up"]["kinds"]["values"].as_u64().unwrap() >= 11, "{r}");
    assert!(r["down"]["frames"].as_u64().unwrap() >= 12, "{r}");
    assert_eq!(r["audit_events"].as_array().unwrap().len(), 0, "{r}");
}

/// `guard --canonical`: the parent reads picklewarden's protocol-2 rewrite of every reply
/// (the calls' results are checked on the parent's side), and every rewritten frame reads in
/// Mitogen's own unpickler as the child's frame does (`mitogen_drive.py canonical`).
#[test]
fn calls_through_a_canonical_guard_read_as_the_childs_frames() {
    let Some(r) = drive("canonical") else { return };
    assert_eq!(r["calls"], "ok", "{r}");
    assert!(r["rewritten"].as_u64().unwrap() >= 11, "{r}");
    // The calls of the rewrite come in the child's order: the Router's first Context for id 5
    // is the one named 'b', as from the child's own frame.
    assert_eq!(
        r["context_order"],
        serde_json::json!([[5, "b"], [5, "b"], true]),
        "{r}"
    );
    assert_eq!(r["audit_events"].as_array().unwrap().len(), 0, "{r}");
}

#[test]
fn guard_cuts_off_a_child_sending_os_system() {
    let Some(r) = drive("evil") else { return };
    assert!(
        r["outcome"].as_str().unwrap().starts_with("disconnected"),
        "{r}"
    );
    assert_eq!(r["marker_exists"], false);
    let events = r["audit_events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{r}");
    let f = &events[0];
    assert_eq!(f["event"], "mitogen_frame_refused");
    assert_eq!(f["global"], "os.system");
    assert_eq!(f["kind"], "global_not_allowed");
    assert_eq!(f["category"], "policy_denied");
    assert_eq!(f["action"], "disconnect");
    // The offset is absolute in the child's stdout: it points at the GLOBAL opcode.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mitogen-evil");
    let up = std::fs::read(dir.join("up.bin")).unwrap();
    let at = f["offset"].as_u64().unwrap() as usize;
    assert_eq!(&up[at..at + 10], b"cos\nsystem");
}

/// Hand-over safety against real Mitogen (`mitogen_drive.py handover`): one child behind the
/// default `guard` (canonical hand-over, message policy, fail-call refusals) sends what a
/// hostile child would. Each refused frame fails only its own call with the refusal's reason,
/// and the next call on the same child works:
/// - GET_RESOURCE naming `this` is refused (`payload_not_allowed`), and the master never
///   imports `this`; a guard whose policy lists `this` lets the same frame through and the
///   master imports it (the vector is real);
/// - a reply of 101 new Contexts is refused (`max_new_contexts_per_frame`, 101 > 100) and the
///   parent's Router keeps none of them; 100 are accepted and kept;
/// - a set reply (stock Mitogen refuses it too) fails that call;
/// - the child's own malformed CALL_SERVICE with a reply handle gets the dead notice back
///   through the parent (`ChannelError` in the child), instead of waiting forever;
/// - a message whose dict key is a 40-level tuple DAG (3**40 item hashes in CPython) fails
///   with `max_key_steps`, and the next call works;
/// - last, a `None` reply with a LONG_BINPUT at 2**27 (2 GiB of memo in CPython 3.11) is
///   refused (`memo_index_ahead`: no stock child writes it) and cuts the stream, so the parent
///   never reads it and its memory stays small.
#[test]
fn guard_fails_only_the_refused_call_and_the_parent_stays_responsive() {
    let Some(r) = drive("handover") else { return };
    assert_eq!(r["still_responsive"], true, "{r}");
    assert_eq!(r["this_imported"], false, "{r}");
    assert_eq!(r["control_this_imported"], true, "{r}");
    let flood = r["flood_error"].as_str().unwrap();
    assert!(
        flood.starts_with("refused by picklewarden: limit_exceeded (max_new_contexts_per_frame)")
            && flood.contains("101 > 100"),
        "{flood}"
    );
    assert_eq!(r["contexts_kept_after_flood"], 0, "{r}");
    assert_eq!(r["contexts_kept_after_100"], 100, "{r}");
    assert!(!r["bomb_error"].as_str().unwrap().is_empty(), "{r}");
    assert!(r["parent_maxrss_mib"].as_u64().unwrap() < 512, "{r}");
    let set = r["set_error"].as_str().unwrap();
    assert!(
        set.starts_with("refused by picklewarden: global_not_allowed")
            && set.contains("__builtin__.set"),
        "{set}"
    );
    let service = r["service_call"].as_str().unwrap();
    assert!(
        service.starts_with("ChannelError: refused by picklewarden: payload_not_allowed")
            && service.contains("handle 110 (CALL_SERVICE)"),
        "{service}"
    );
    let events = r["audit_events"].as_array().unwrap();
    let seen: Vec<(String, String, String)> = events
        .iter()
        .map(|e| {
            (
                e["handle"].to_string(),
                e["kind"].as_str().unwrap().to_owned(),
                e["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let want = |h: &str, k: &str| (h.to_owned(), k.to_owned(), "fail_call".to_owned());
    let dag = r["dag_error"].as_str().unwrap();
    assert!(
        dag.starts_with("refused by picklewarden: limit_exceeded (max_key_steps)"),
        "{dag}"
    );
    assert_eq!(seen.len(), 6, "{r}");
    assert_eq!(seen[4].1, "limit_exceeded", "{r}");
    assert_eq!(events[4]["limit"], "max_key_steps", "{r}");
    assert_eq!(seen[5].1, "memo_index_ahead", "{r}");
    assert_eq!(seen[5].2, "disconnect", "{r}");
    assert_eq!(seen[0], want("112", "payload_not_allowed"));
    // The two replies were to the parent's reply handles (from 1000 up).
    assert!(events[1]["handle"].as_u64().unwrap() >= 1000, "{r}");
    assert!(events[2]["handle"].as_u64().unwrap() >= 1000, "{r}");
    assert!(seen[..5].iter().all(|s| s.2 == "fail_call"), "{r}");
    assert_eq!(seen[1].1, "limit_exceeded");
    assert_eq!(events[1]["limit"], "max_new_contexts_per_frame");
    assert_eq!(seen[2].1, "global_not_allowed");
    assert_eq!(events[2]["global"], "__builtin__.set");
    assert_eq!(seen[3], want("110", "payload_not_allowed"));
}

/// `bootstrap::Handshake` ends the handshake at the same byte as Mitogen's own parent, on
/// 3,000 generated inputs mixing the three markers, parts of them, `\r`, spaces and newlines:
/// Mitogen's side is its `BootstrapProtocol.PATTERNS` applied by `mitogen.core.iter_split`
/// as `RegexProtocol.on_line_received` applies them (the first pattern that matches a line
/// decides; `MITO002` switches to framing). If the two disagreed, frames the parent reads
/// could pass the filter as handshake text.
#[test]
fn handshake_ends_where_mitogens_parent_ends_it() {
    use picklewarden::mitogen::bootstrap::{Handshake, Step};
    let Some(python) = mitogen_python() else {
        return;
    };
    let tokens: [&[u8]; 11] = [
        b"MITO000",
        b"MITO001",
        b"MITO002",
        b"MITO00",
        b"2",
        b"\n",
        b"\n",
        b"\r",
        b" ",
        b"x",
        b"MITO0012",
    ];
    let mut x: u32 = 0x1234_5678;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    let inputs: Vec<Vec<u8>> = (0..3000)
        .map(|_| {
            let n = 1 + next() % 24;
            (0..n)
                .flat_map(|_| tokens[(next() % tokens.len() as u32) as usize].to_vec())
                .collect()
        })
        .collect();
    let code = r#"
import sys, mitogen.core, mitogen.parent
P = mitogen.parent.BootstrapProtocol.PATTERNS
EC2 = mitogen.parent.BootstrapProtocol._on_ec2_received
def on_line(line):
    for pattern, func in P:
        if pattern.search(line) is not None:
            return False if func is EC2 else None
for h in sys.stdin:
    buf = bytes.fromhex(h.strip())
    trailer, cont = mitogen.core.iter_split(buf=buf, delim=b'\n', func=on_line)
    print(-1 if cont else len(buf) - len(trailer))
"#;
    let stdin: String = inputs
        .iter()
        .map(|i| i.iter().map(|b| format!("{b:02x}")).collect::<String>() + "\n")
        .collect();
    let mut child = Command::new("timeout")
        .arg("120")
        .arg(&python)
        .args(["-c", code])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let theirs: Vec<i64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(theirs.len(), inputs.len());
    let mut ended = 0;
    for (input, &want) in inputs.iter().zip(&theirs) {
        let mut h = Handshake::default();
        let got = match h.feed(input, 1 << 20) {
            Step::Done(k) => k as i64,
            _ => -1,
        };
        assert_eq!(got, want, "{:?}", String::from_utf8_lossy(input));
        ended += usize::from(want >= 0);
    }
    // Both kinds occur often enough to mean something.
    assert!(ended > 300 && ended < 2700, "{ended} of 3000 ended");
}

/// Dict keys made of Mitogen's classes (`tests/python/mitogen_keys.py`): a `Secret` or `Blob`
/// key is equal to the plain text or bytes it holds (a `str` and a `bytes` subclass), two
/// `_unpickle_context` calls with one id are one key (the parent's Router keeps one Context per
/// id), a `Kwargs` key (a `dict` subclass) is refused, and `CallError`s and Senders are keys
/// of their own. Mitogen's own unpickler and `decode --policy mitogen` give the same number
/// of pairs for each (found by a review helper: records were all keys by identity).
#[test]
fn record_keys_are_equal_where_mitogens_are() {
    let Some(python) = mitogen_python() else {
        return;
    };
    let script = concat!(
        concat!(env!("CARGO_MANIFEST_DIR"), "/.."),
        "/tests/python/mitogen_keys.py"
    );
    let out = Command::new("timeout")
        .args(["--kill-after=10", "120"])
        .arg(&python)
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_picklewarden"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mitogen_keys.py failed ({:?}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let r: serde_json::Value =
        serde_json::from_str(text.lines().last().unwrap_or_default()).unwrap();
    let cases = r.as_object().unwrap();
    for (case, pair) in cases {
        assert_eq!(pair[0], pair[1], "{case}: [mitogen, picklewarden] = {pair}");
    }
    let expected = serde_json::json!({
        "secret-vs-str-keys": 1, "str-vs-secret-keys": 1, "blob-vs-bytes-keys": 1,
        "kwargs-as-key": "refused", "two-secrets": 1, "secrets-differ": 2,
        "two-contexts-one-id": 1, "two-contexts-two-ids": 2, "context-vs-int": 2,
        "secret-in-tuple-key": 1, "two-senders": 2, "call-errors": 2,
    });
    for (case, n) in expected.as_object().unwrap() {
        assert_eq!(&r[case][1], n, "{case}: {r}");
    }
}
