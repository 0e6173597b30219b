//! The command-line tool as a user runs it: exit status 0 accepted, 1 refused (reason on
//! stderr), 2 usage or I/O error; typed JSON, repr and scan output.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../tests/common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};

const GOOD: &str = "tests/corpus/good/mixed_bag.p2.c.pkl";
const HOSTILE: &str = "tests/corpus/hostile/global-os.system-GLOBAL_REDUCE.pkl";

fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_picklewarden"));
    cmd.args(args);
    run_command(cmd, stdin)
}

/// Runs `cmd` in the repository with `stdin` as its input.
fn run_command(cmd: Command, stdin: Option<&[u8]>) -> Output {
    spawn_fed(cmd, stdin.unwrap_or_default())
        .wait_with_output()
        .unwrap()
}

/// Starts `cmd` in the repository, writes `stdin` to it and closes it; stdout and stderr are
/// pipes left to the caller.
fn spawn_fed(mut cmd: Command, stdin: &[u8]) -> std::process::Child {
    let mut child = cmd
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).unwrap();
    drop(input);
    child
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn check_exit_status() {
    let ok = run(&["check", GOOD], None);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    assert!(ok.stdout.is_empty());

    let refused = run(&["check", HOSTILE], None);
    assert_eq!(refused.status.code(), Some(1));
    let err = text(&refused.stderr);
    assert!(
        err.contains("refused (policy_denied, global_not_allowed)"),
        "{err}"
    );
    assert!(
        err.contains("global os.system is not allowed by policy \"data\""),
        "{err}"
    );
    assert!(
        err.contains("at offset 2 (0x2, opcode 0x63 GLOBAL)"),
        "{err}"
    );

    // Without FILE, a pipe on standard input is the input (`-`).
    let hostile = std::fs::read(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join(HOSTILE),
    );
    let piped = run(&["check"], Some(&hostile.unwrap()));
    assert_eq!(piped.status.code(), Some(1), "{}", text(&piped.stderr));
    assert!(text(&piped.stderr).starts_with("picklewarden: -: refused (policy_denied"));
    let good =
        std::fs::read(std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join(GOOD));
    let out = run(&["decode", "--format", "repr"], Some(&good.unwrap()));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("'shared': [[1, 2, 3], [1, 2, 3]]"));

    assert_eq!(
        run(&["check", "no/such/file.pkl"], None).status.code(),
        Some(2)
    );
    assert_eq!(
        run(&["check", "--policy", "nope", GOOD], None)
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        run(&["check", "--limit", "max_bogus=1", GOOD], None)
            .status
            .code(),
        Some(2)
    );
    // No FILE and an empty pipe: an empty input, refused as no pickle at all (as `check -`
    // is).
    let empty = run(&["check"], None);
    assert_eq!(empty.status.code(), Some(1));
    assert!(text(&empty.stderr)
        .contains("refused (malformed, not_a_pickle): not a pickle: the input is empty"));
}

#[test]
fn limits_and_policies_from_the_command_line() {
    // [[1]] is depth 3.
    let nested = b"\x80\x02]q\x00]q\x01K\x01aa.";
    assert_eq!(run(&["check", "-"], Some(nested)).status.code(), Some(0));
    let out = run(
        &["check", "--limit", "max_nesting_depth=2", "-"],
        Some(nested),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("(limit_exceeded, max_nesting_depth)"));
    // Protocol 2 bytes name _codecs.encode: data accepts, strict refuses.
    let bytes = b"\x80\x02c_codecs\nencode\nq\x00X\x01\x00\x00\x00aq\x01X\x06\x00\x00\x00latin1q\x02\x86q\x03Rq\x04.";
    assert_eq!(run(&["check", "-"], Some(bytes)).status.code(), Some(0));
    assert_eq!(
        run(&["check", "--policy", "strict", "-"], Some(bytes))
            .status
            .code(),
        Some(1)
    );
    // Empty input is truncated (a refusal, not an I/O error).
    assert_eq!(run(&["check", "-"], Some(b"")).status.code(), Some(1));
}

/// `--allow-trailing`: bytes after STOP left unread and reported (stderr, typed JSON, scan),
/// refused without it.
#[test]
fn allow_trailing_reports_what_was_left() {
    let padded = b"\x80\x02K\x01.\n\x00";
    let out = run(&["decode", "-"], Some(padded));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--allow-trailing"),
        "{}",
        text(&out.stderr)
    );
    let out = run(&["decode", "--allow-trailing", "-"], Some(padded));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["value"]["value"], "1");
    assert_eq!(
        doc["trailing"],
        serde_json::json!({"offset": 5, "length": 2})
    );
    assert!(
        text(&out.stderr).contains("2 bytes after STOP left unread, from offset 5"),
        "{}",
        text(&out.stderr)
    );
    let out = run(&["check", "--allow-trailing", "-"], Some(padded));
    assert_eq!(out.status.code(), Some(0));
    let out = run(&["scan-pickle", "--allow-trailing", "-"], Some(padded));
    assert_eq!(out.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["trailing"],
        serde_json::json!({"offset": 5, "length": 2})
    );
    // Not with --stream, which reads pickles to the end.
    let out = run(&["decode", "--allow-trailing", "--stream", GOOD], None);
    assert_eq!(out.status.code(), Some(2));
}

/// Python 2 strings: ASCII str under `data` (CPython's default), a non-ASCII one refused as a
/// policy refusal; `--python2-str` chooses another reading, whatever the policy says.
#[test]
fn python2_strings_follow_the_policy_or_the_option() {
    let ascii = b"U\x03abc.";
    let out = run(&["decode", "--format", "repr", "-"], Some(ascii));
    assert_eq!(text(&out.stdout), "'abc'\n", "{}", text(&out.stderr));
    let latin1 = b"U\x03ab\xe9.";
    let out = run(&["decode", "-"], Some(latin1));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("refused (policy_denied, invalid_ascii)"),
        "{}",
        text(&out.stderr)
    );
    for (setting, want) in [
        ("bytes", "b'ab\\xe9'\n"),
        ("latin1", "'ab\u{e9}'\n"),
        ("ascii", ""),
    ] {
        let out = run(
            &["decode", "--format", "repr", "--python2-str", setting, "-"],
            Some(latin1),
        );
        assert_eq!(text(&out.stdout), want, "{setting}: {}", text(&out.stderr));
    }
    // mitogen reads them as bytes, as Mitogen does.
    let out = run(
        &["decode", "--format", "repr", "--policy", "mitogen", "-"],
        Some(ascii),
    );
    assert_eq!(text(&out.stdout), "b'abc'\n", "{}", text(&out.stderr));
}

#[test]
fn decode_json_repr_and_stream() {
    let out = run(
        &["decode", "-"],
        Some(b"\x80\x02]q\x00(K\x01X\x01\x00\x00\x00aq\x01e."),
    );
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["format"], "picklewarden-typed-json/1");
    assert_eq!(doc["value"]["type"], "list");
    assert_eq!(doc["value"]["items"][0]["value"], "1");
    assert_eq!(doc["value"]["items"][1]["value"], "a");

    let repr = run(&["decode", "--format", "repr", GOOD], None);
    assert_eq!(repr.status.code(), Some(0));
    assert!(text(&repr.stdout).contains("'shared': [[1, 2, 3], [1, 2, 3]]"));
    assert!(text(&repr.stdout).contains("'recursive': [1, [...]]"));

    // Two pickles sharing one memo: the second is a GET of the first's list.
    let stream = b"\x80\x02]q\x00K\x07a.\x80\x02h\x00.";
    let single = run(&["decode", "-"], Some(stream));
    assert_eq!(single.status.code(), Some(1));
    assert!(text(&single.stderr).contains("trailing_data"));
    assert!(text(&single.stderr).contains("--stream reads them all"));
    let both = run(&["decode", "--stream", "-"], Some(stream));
    assert_eq!(both.status.code(), Some(0), "{}", text(&both.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&both.stdout).unwrap();
    let values = doc["values"].as_array().unwrap();
    assert_eq!(values.len(), 2);
    assert_eq!(values[0]["id"], 0);
    assert_eq!(values[1], serde_json::json!({"type": "ref", "id": 0}));
}

/// `decode --format pickle` writes the canonical pickle: CPython reads it as it reads the input,
/// and the bytes are the library's; a stream whose later pickle changes an earlier value has
/// none.
#[test]
fn decode_writes_a_canonical_pickle() {
    let out = run(&["decode", "--format", "pickle", GOOD], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let input =
        std::fs::read(std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join(GOOD))
            .unwrap();
    let policy = picklewarden::Policy::data();
    let doc = picklewarden::Decoder::new(&input, &policy)
        .decode()
        .unwrap();
    assert_eq!(
        out.stdout,
        picklewarden::canonical::to_pickle(&doc).unwrap()
    );
    let same = common::python(
        "import pickle, sys\n\
         a = pickle.loads(bytes.fromhex(sys.argv[1]))\n\
         b = pickle.loads(bytes.fromhex(sys.argv[2]))\n\
         print(repr(a) == repr(b))",
        &[
            &common::hex_encode(&input),
            &common::hex_encode(&out.stdout),
        ],
    );
    assert_eq!(same.trim(), "True");

    let stream = run(
        &["decode", "--stream", "--format", "pickle", "-"],
        Some(b"\x80\x02]q\x05K\x07a.\x80\x02h\x05."),
    );
    assert_eq!(stream.status.code(), Some(0), "{}", text(&stream.stderr));
    assert_eq!(stream.stdout, b"\x80\x05]\x94K\x07a.\x80\x05h\x00.");
    // A stream whose second pickle appends to the first one's list has none.
    let changed = run(
        &["decode", "--stream", "--format", "pickle", "-"],
        Some(b"\x80\x02]q\x05K\x07a.\x80\x02h\x05K\x08a0N."),
    );
    assert_eq!(changed.status.code(), Some(2), "{}", text(&changed.stderr));
    assert!(changed.stdout.is_empty());
    assert!(
        text(&changed.stderr).contains("a later pickle changes a value of an earlier one"),
        "{}",
        text(&changed.stderr)
    );
    // --protocol 2: the library's protocol-2 form; --protocol without --format pickle is a
    // usage error.
    let two = run(
        &["decode", "--format", "pickle", "--protocol", "2", GOOD],
        None,
    );
    assert_eq!(two.status.code(), Some(0), "{}", text(&two.stderr));
    assert_eq!(
        two.stdout,
        picklewarden::canonical::to_pickle_bounded(
            &doc,
            picklewarden::canonical::Protocol::V2,
            picklewarden::OutputBound::NONE,
        )
        .unwrap()
    );
    assert_eq!(&two.stdout[..2], b"\x80\x02");
    let bad = run(&["decode", "--protocol", "2", GOOD], None);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
    assert!(text(&bad.stderr).contains("--format pickle"));
}

/// `decode` writes its text as it is made (`json::write_typed_json`, `repr::write_repr`): a
/// text of several MiB, from a real pickle, is the library's `to_typed_json` text and a
/// newline (`to_repr`'s text for repr); a reader that stops early ends the tool quietly, with
/// the verdict's status.
#[test]
fn decode_writes_a_big_text_as_it_is_made() {
    let pickle = common::python_hex(
        "import pickle; print(pickle.dumps([list(range(300000)), 'é' * (1 << 20), \
         [{i, -i} for i in range(20000)], (b'\\x00' * 100000,)], 4).hex())",
    );
    let doc = picklewarden::decode(&pickle, &picklewarden::Policy::data()).unwrap();
    let want = picklewarden::json::to_typed_json(&doc) + "\n";
    assert!(want.len() > 8 << 20, "{}", want.len());
    let out = run(&["decode", "-"], Some(&pickle));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(out.stdout == want.as_bytes());
    let repr = run(&["decode", "--format", "repr", "-"], Some(&pickle));
    assert_eq!(repr.status.code(), Some(0), "{}", text(&repr.stderr));
    assert!(repr.stdout == picklewarden::repr::to_repr(&doc).as_bytes());

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_picklewarden"));
    cmd.args(["decode", "-"]);
    let mut child = spawn_fed(cmd, &pickle);
    let mut stdout = child.stdout.take().unwrap();
    let mut head = [0u8; 4096];
    stdout.read_exact(&mut head).unwrap();
    assert!(want.as_bytes().starts_with(&head));
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stderr), "");
}

/// The example Python client reads back the typed JSON of ints longer than the 4,300 digits
/// Python 3.11's `int()` reads by default: an int pickled in binary can have up to
/// `max_long_bytes` (4096 bytes, about 9,860 digits), and picklewarden writes it in decimal.
#[test]
fn the_example_client_reads_ints_of_any_size() {
    let values = "[2**32000, -(2**32000) + 7, 10**4000, -1, 0, 5]";
    let pickle = common::python_hex(&format!(
        "import pickle; print(pickle.dumps({values}, 4).hex())"
    ));
    let doc = picklewarden::decode(&pickle, &picklewarden::Policy::data()).unwrap();
    let json = common::scratch("client_big_ints").join("doc.json");
    std::fs::write(&json, picklewarden::json::to_typed_json(&doc)).unwrap();
    let out = common::python(
        &format!(
            "import json, sys; sys.path.insert(0, 'examples/python')\n\
             import picklewarden_client as c\n\
             node = json.load(open(sys.argv[1]))['value']\n\
             assert c.from_typed_json(node) == {values}\n\
             print('equal')"
        ),
        &[json.to_str().unwrap()],
    );
    assert_eq!(out.trim(), "equal");
}

#[test]
fn scan_reports_globals_and_opcodes() {
    let out = run(&["scan-pickle", HOSTILE], None);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["verdict"], "refused");
    assert_eq!(report["error"]["kind"], "global_not_allowed");
    assert_eq!(report["error"]["offset"], 2);
    assert_eq!(report["globals"][0]["module"], "os");
    assert_eq!(report["globals"][0]["allowed"], false);

    let ok = run(&["scan-pickle", GOOD], None);
    assert_eq!(ok.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(report["verdict"], "accepted");
    assert_eq!(report["protocol"], 2);
    assert_eq!(report["opcodes"]["STOP"], 1);
}

#[test]
fn help_has_examples_and_exit_status() {
    for sub in ["check", "decode", "scan", "scan-pickle"] {
        let out = run(&[sub, "--help"], None);
        assert_eq!(out.status.code(), Some(0));
        let help = text(&out.stdout);
        assert!(help.contains("Examples:"), "{sub}");
        assert!(help.contains("Exit status"), "{sub}");
    }
    // `--policy` names every built-in policy, taken from the library's list.
    for sub in ["check", "decode", "scan-pickle", "filter", "guard"] {
        let help = text(&run(&[sub, "--help"], None).stdout);
        for name in picklewarden::policy::BUILTIN_POLICIES {
            assert!(help.contains(name), "{sub} --help lacks {name}:\n{help}");
        }
    }
    // The top-level help lists the subcommands that exist, and no other.
    let help = text(&run(&["--help"], None).stdout);
    assert!(
        help.contains("(check, decode, scan, convert, scan-pickle, dis, filter, guard)"),
        "{help}"
    );
}

/// `check` on a model file says which command reads it.
#[test]
fn check_points_model_files_at_scan() {
    for file in [
        "tests/corpus/models/good/state_dict.pt",
        "tests/corpus/models/hostile/os_system.bz2.joblib",
    ] {
        let out = run(&["check", file], None);
        assert_eq!(out.status.code(), Some(1), "{file}");
        let err = text(&out.stderr);
        assert!(
            err.contains("refused (malformed, not_a_pickle): not a pickle"),
            "{err}"
        );
        assert!(
            err.trim_end()
                .ends_with("(use `picklewarden scan` for model files)"),
            "{err}"
        );
    }
    // A plain pickle's refusal gets no such hint.
    let err = text(&run(&["check", HOSTILE], None).stderr);
    assert!(!err.contains("picklewarden scan"), "{err}");
}

/// Typed JSON orders a set's items by a key written from each item on its own: a set of
/// 20,000 tuples that share one 40 KB text (200 KB of pickle) once cost 20,000 full copies of
/// the text, kept as keys (870 MB of memory, 0.9 s). Each key is now written only as far as it
/// is compared, so the decode fits in 256 MiB of address space.
#[test]
fn set_sort_keys_stay_small() {
    let mut p = b"\x80\x04X".to_vec();
    p.extend_from_slice(&40_000u32.to_le_bytes());
    p.extend(std::iter::repeat_n(b'z', 40_000));
    p.extend_from_slice(b"\x940(");
    for i in 0..20_000i32 {
        p.push(b'J');
        p.extend_from_slice(&i.to_le_bytes());
        p.extend_from_slice(b"h\x00\x86");
    }
    p.extend_from_slice(b"\x91.");
    let exe = env!("CARGO_BIN_EXE_picklewarden");
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(format!("ulimit -v 262144 && exec '{exe}' decode -"));
    let out = run_command(sh, Some(&p));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let items = json["value"]["items"].as_array().unwrap();
    assert_eq!(items.len(), 20_000);
    // Sorted by their text: the int's digits decide ("0" < "1" < "10" < "100" ...).
    assert_eq!(items[0]["items"][0]["value"], "0");
    assert_eq!(items[1]["items"][0]["value"], "1");
    assert_eq!(items[2]["items"][0]["value"], "10");
}

/// `dis` lists the opcodes `pickletools.genops` finds, at the same offsets, with their
/// arguments; a stream is listed pickle after pickle; a byte that is no opcode stops it with
/// exit 1 and the offset.
#[test]
fn dis_lists_what_pickletools_lists() {
    let files = [
        GOOD,
        "tests/corpus/good/mixed_bag.p0.c.pkl",
        "tests/corpus/good/mixed_bag.p5.c.pkl",
        HOSTILE,
    ];
    for file in files {
        let out = run(&["dis", file], None);
        assert_eq!(out.status.code(), Some(0), "{file}: {}", text(&out.stderr));
        let ours: Vec<(u64, String)> = text(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (offset, rest) = l.split_once(':').unwrap();
                let name = rest.split_whitespace().next().unwrap().to_owned();
                (offset.trim().parse().unwrap(), name)
            })
            .collect();
        let theirs = common::python(
            "import pickletools, sys\n\
             for op, arg, pos in pickletools.genops(open(sys.argv[1], 'rb').read()):\n\
             \x20   print(pos, op.name)",
            &[file],
        );
        let theirs: Vec<(u64, String)> = theirs
            .lines()
            .map(|l| {
                let (p, n) = l.split_once(' ').unwrap();
                (p.parse().unwrap(), n.to_owned())
            })
            .collect();
        assert_eq!(ours, theirs, "{file}");
    }
    let listing = text(&run(&["dis", HOSTILE], None).stdout);
    assert!(
        listing.contains("       2: GLOBAL 'os' 'system'\n"),
        "{listing}"
    );
    assert!(
        listing.contains("      14:     SHORT_BINUNICODE 'id'\n"),
        "{listing}"
    );

    let stream = run(&["dis", "-"], Some(b"K\x01.\x80\x02\x8a\x02\x00\x80."));
    assert_eq!(stream.status.code(), Some(0));
    assert_eq!(
        text(&stream.stdout),
        "       0: BININT1 1\n       2: STOP\n\n       3: PROTO 2\n       5: LONG1 -32768\n       9: STOP\n"
    );
    // Without a FILE, a piped standard input is read, as check, decode and scan read it.
    let piped = run(&["dis"], Some(b"K\x01.\x80\x02\x8a\x02\x00\x80."));
    assert_eq!(piped.status.code(), Some(0), "{}", text(&piped.stderr));
    assert_eq!(piped.stdout, stream.stdout);
    let bad = run(&["dis", "-"], Some(b"N\xff."));
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(text(&bad.stdout), "       0: NONE\n");
    assert!(
        text(&bad.stderr).contains("unknown_opcode"),
        "{}",
        text(&bad.stderr)
    );
    assert!(
        text(&bad.stderr).contains("offset 1"),
        "{}",
        text(&bad.stderr)
    );
}

#[test]
fn a_missing_policy_file_is_named_as_a_file() {
    let file = run(&["check", "--policy", "./nosuch.toml", "-"], None);
    assert_eq!(file.status.code(), Some(2));
    assert!(
        text(&file.stderr).contains("no policy file ./nosuch.toml"),
        "{}",
        text(&file.stderr)
    );
    let name = run(&["check", "--policy", "nosuch", "-"], None);
    assert_eq!(name.status.code(), Some(2));
    assert!(
        text(&name.stderr).contains("no built-in policy \"nosuch\""),
        "{}",
        text(&name.stderr)
    );
}
