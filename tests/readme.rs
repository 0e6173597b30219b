//! The README's policy example is a policy picklewarden reads, and it does what the README
//! says of it: every ```toml block of README.md is parsed by `Policy::from_toml_str`, and the
//! example's settings (limits, the `myapp.models.Point` record with its argument schema, the
//! EXT1 code 240, Python 2 strings as latin-1 str) are checked on pickles CPython writes.

#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

mod common;

use common::repo;
use picklewarden::json::to_typed_json;
use picklewarden::repr::to_repr;
use picklewarden::{Decoder, ErrorKind, LimitName, Policy};

/// The text of every ```toml fenced block of README.md.
fn toml_blocks() -> Vec<String> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in readme.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```toml") => current = Some(String::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(text), l) => {
                text.push_str(l);
                text.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn every_toml_block_of_the_readme_is_a_policy() {
    let blocks = toml_blocks();
    assert!(!blocks.is_empty(), "README.md has no ```toml block");
    for (i, text) in blocks.iter().enumerate() {
        if let Err(e) = Policy::from_toml_str(text) {
            panic!("README.md toml block {i} is refused: {e}\n{text}");
        }
    }
}

#[test]
fn the_readme_example_policy_does_what_the_readme_says() {
    let text = toml_blocks()
        .into_iter()
        .find(|t| t.contains("name = \"example\""))
        .expect("the README's example policy");
    let policy = Policy::from_toml_str(&text).unwrap();
    assert_eq!(policy.limits.get(LimitName::MaxNestingDepth), 200);
    assert_eq!(policy.limits.get(LimitName::MaxInputBytes), 64 << 20);

    // Point(3, 4) by REDUCE, as a class whose __reduce__ returns (Point, (x, y)) is written
    // at protocol 2 (GLOBAL, the argument tuple, REDUCE).
    let point = |x: u8, y: u16| {
        let mut p = b"\x80\x02cmyapp.models\nPoint\nq\x00K".to_vec();
        p.push(x);
        p.push(b'M');
        p.extend_from_slice(&y.to_le_bytes());
        p.extend_from_slice(b"\x86q\x01Rq\x02.");
        p
    };
    let ok = point(3, 4);
    let doc = Decoder::new(&ok, &policy).decode().unwrap();
    let json = to_typed_json(&doc);
    assert!(json.contains("\"Point\""), "{json}");
    let far = point(3, 2000);
    let err = Decoder::new(&far, &policy).decode().unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::ConstructorRejected(_)),
        "y = 2000 is above the schema's max of 1000: {err}"
    );

    // EXT1 240 is myapp.models.Point: the same value as by GLOBAL.
    let ext = b"\x80\x02\x82\xf0K\x03K\x04\x86R.";
    let by_ext = Decoder::new(ext, &policy).decode().unwrap();
    assert_eq!(to_typed_json(&by_ext), json);

    // A Python 2 str (SHORT_BINSTRING) is latin-1 text: b"\xe9" reads as "é", as
    // CPython's pickle.loads(data, encoding="latin1") reads it.
    let py2 = b"\x80\x02U\x01\xe9.";
    let s = Decoder::new(py2, &policy).decode().unwrap();
    assert_eq!(to_repr(&s), "'é'\n");
}
