#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use super::*;

fn corpus(dir: &str) -> Vec<(String, Vec<u8>)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            let name = p.file_name()?.to_str()?.to_owned();
            (name.ends_with(".pkl")).then(|| (name, std::fs::read(&p).unwrap()))
        })
        .collect();
    out.sort();
    out
}

/// Every pickle CPython wrote (protocols 0 to 5, C and Python picklers, Python 2.7's
/// cPickle and pickle) is a pickle, whole and from any prefix that decides it.
#[test]
fn every_real_pickle_is_one() {
    let mut n = 0;
    for dir in ["tests/corpus/good", "tests/corpus/py27"] {
        for (name, bytes) in corpus(dir) {
            assert_eq!(is_pickle(&bytes, true), Some(true), "{dir}/{name}");
            for cut in [0, 1, 2, 7, 64, bytes.len() / 2] {
                let head = &bytes[..cut.min(bytes.len())];
                assert_ne!(
                    is_pickle(head, false),
                    Some(false),
                    "{dir}/{name} cut at {cut}"
                );
            }
            n += 1;
        }
    }
    assert!(n > 1500, "{n} files");
}

/// Every hostile file the parse does not take for a pickle is one CPython's unpickler fails on
/// before it names a global or a persistent id (tests/python/check_hostile_cpython.py runs
/// them): nothing a scan skips could make a loader import or call anything.
#[test]
fn hostile_files_that_name_anything_are_pickles() {
    let mut skipped = 0;
    for (name, bytes) in corpus("tests/corpus/hostile") {
        if is_pickle(&bytes, true) == Some(true) {
            continue;
        }
        // A file skipped names no global: no GLOBAL, INST, STACK_GLOBAL, EXT or persistent id
        // before the point where the parse failed.
        let listed = super::super::globals::globals_after(&bytes, 0);
        assert!(
            listed
                .iter()
                .all(|(m, n, _)| !crate::policy::is_python_name(m)
                    || !crate::policy::is_python_name(n)),
            "{name}: not taken for a pickle, but names {listed:?}"
        );
        skipped += 1;
    }
    // Empty, cut in PROTO or a line before a global's, an unknown first opcode, a pop of
    // nothing, a MARK missing, an INST name that is not UTF-8: none names a global.
    assert_eq!(skipped, 14);
}

#[test]
fn text_is_no_pickle() {
    for text in [
        &b"import numpy as np\nfrom libc.stdint cimport uint8_t\n"[..],
        b"class Foo:\n    pass\n",
        b"{\"vocab_size\": 30522}\n",
        b"[CLS]\n[SEP]\nthe\n",
        b"# README\n\nSome text.\n",
        b"changelog\n=========\n",
        b"",
        b"\x7fELF\x02\x01\x01",
        // A PNG: NEWFALSE, a persistent id `NG\r` (which pickle.load has no persistent_load
        // for), then a byte that is no opcode.
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
    ] {
        assert_eq!(
            is_pickle(text, true),
            Some(false),
            "{:?}",
            String::from_utf8_lossy(text)
        );
    }
    // What pickle.load acts on, even when broken after.
    for p in [
        &b"N."[..],
        b"I1\n.",
        b"cos\nsystem\n(S'id'\ntR.",
        b"cos\nsystem\n",
        b"\x80\x02N.",
        b"\x80\x05garbage",
        b"\x8c\x02os\x8c\x06system\x93",
        b"(X\x02\x00\x00\x00idQ.",
        // C's readline hands back a last line without its newline: the module is imported.
        b"cevil\nfun",
    ] {
        assert_eq!(is_pickle(p, true), Some(true), "{p:?}");
    }
    // A prefix that does not decide it.
    assert_eq!(is_pickle(b"(lp0\nI1\na", false), None);
    assert_eq!(is_pickle(b"(lp0\nI1\na", true), Some(false));
}

#[test]
fn stack_and_marks_as_cpython_keeps_them() {
    for (input, want) in [
        (&b"."[..], false),
        (b"(.", false),
        (b"N0.", false),
        (b"(0N.", true),
        (b"N(t.", true),
        (b"}(K\x01s.", false),
        (b"}(K\x01K\x02u.", true),
        (b"(K\x01d.", false),
        (b"h\x00.", false),
        (b"N\x94h\x00.", true),
        (b"Nq\x05h\x05.", true),
        (b"Nq\x05h\x06.", false),
        (b"N2\x86.", true),
    ] {
        assert_eq!(
            parse_to_stop(input, true) == Parse::Pickle,
            want,
            "{input:?}"
        );
    }
}

#[test]
fn contents_are_named() {
    for (head, want) in [
        (&b""[..], "empty"),
        (b"hello\n", "text"),
        (b"\x7fELF\x02", "executable"),
        (b"\xa7\x0d\x0d\x0a\0\0\0\0", "python-bytecode"),
        (b"\x89PNG\r\n\x1a\n", "image"),
        (b"\x1f\x8b\x08\x00", "compressed"),
        (b"GGUF\x03\0\0\0", "gguf"),
        (b"\x00\x01\x02\x03", "binary"),
    ] {
        assert_eq!(content_of(head).name(), want, "{head:?}");
    }
}
