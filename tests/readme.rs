//! The documentation's policy examples are policies picklewarden reads, and they do what the
//! documentation says of them: every ```toml block of README.md and docs/*.md is parsed by
//! `Policy::from_toml_str`, and the example policy's claims (docs/policies.md: the limits, the
//! `myapp.models.Point` record with its argument schema, `set` under both of its names, the
//! EXT1 code 240, Python 2 strings as latin-1 str, the `[mitogen]` section) are checked on
//! pickles CPython writes at every protocol, 0 to 5, where the claim is about such pickles.

#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

mod common;

use common::{hex_decode, python, repo};
use picklewarden::json::to_typed_json;
use picklewarden::policy::PayloadRule;
use picklewarden::repr::to_repr;
use picklewarden::{Decoder, ErrorKind, LimitName, Policy};

/// Each ```toml fenced block of README.md and docs/*.md, with the file it is in.
fn toml_blocks() -> Vec<(String, String)> {
    let mut files = vec![repo().join("README.md")];
    let mut docs: Vec<_> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut blocks = Vec::new();
    for file in files {
        let name = file.strip_prefix(repo()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let mut current: Option<String> = None;
        for line in text.lines() {
            match (&mut current, line.trim_end()) {
                (None, "```toml") => current = Some(String::new()),
                (Some(_), "```") => blocks.extend(current.take().map(|t| (name.clone(), t))),
                (Some(text), l) => {
                    text.push_str(l);
                    text.push('\n');
                }
                (None, _) => {}
            }
        }
        assert!(current.is_none(), "{name}: a ```toml block is not closed");
    }
    blocks
}

#[test]
fn every_toml_block_of_the_docs_is_a_policy() {
    let blocks = toml_blocks();
    assert!(
        !blocks.is_empty(),
        "README.md and docs/*.md have no ```toml block"
    );
    for (i, (file, text)) in blocks.iter().enumerate() {
        if let Err(e) = Policy::from_toml_str(text) {
            panic!("{file}: toml block {i} is refused: {e}\n{text}");
        }
    }
}

/// The example policy of docs/policies.md.
fn example_policy() -> Policy {
    let (_, text) = toml_blocks()
        .into_iter()
        .find(|(_, t)| t.contains("name = \"example\""))
        .expect("the example policy (docs/policies.md)");
    Policy::from_toml_str(&text).unwrap()
}

/// What CPython writes for the example's claims, at protocols 0 to 5: one line per pickle,
/// `NAME PROTOCOL HEX`. `myapp.models.Point` is a class whose `__reduce__` returns
/// `(Point, (x, y))`, as the example's comment says; `ext_` pickles are written after
/// `copyreg.add_extension("myapp.models", "Point", 240)`.
const CPYTHON_PICKLES: &str = r#"
import copyreg, pickle, sys, types
myapp = types.ModuleType("myapp")
models = types.ModuleType("myapp.models")
class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y
    def __reduce__(self):
        return (Point, (self.x, self.y))
Point.__module__ = "myapp.models"
models.Point = Point
myapp.models = models
sys.modules["myapp"] = myapp
sys.modules["myapp.models"] = models

def nested(lists):
    v = 0
    for _ in range(lists):
        v = [v]
    return v

values = {
    "point": Point(3, 4),
    "far": Point(3, 2000),
    "set": {1, 2},
    "points": [Point(1, 2), {5, 6}],
    "depth200": nested(199),
    "depth201": nested(200),
}
for proto in range(6):
    for name, v in values.items():
        print(name, proto, pickle.dumps(v, proto).hex())
copyreg.add_extension("myapp.models", "Point", 240)
for proto in range(6):
    print("ext_point", proto, pickle.dumps(Point(3, 4), proto).hex())
"#;

#[test]
fn the_example_policy_does_what_the_docs_say_at_every_protocol() {
    let policy = example_policy();
    assert_eq!(policy.limits.get(LimitName::MaxNestingDepth), 200);
    assert_eq!(policy.limits.get(LimitName::MaxInputBytes), 64 << 20);

    let out = python(CPYTHON_PICKLES, &[]);
    let mut pickles = std::collections::BTreeMap::new();
    for line in out.lines() {
        let mut parts = line.split(' ');
        let (name, proto, hex) = (
            parts.next().unwrap(),
            parts.next().unwrap().parse::<u8>().unwrap(),
            parts.next().unwrap(),
        );
        pickles.insert((name.to_owned(), proto), hex_decode(hex));
    }
    let get = |name: &str, proto: u8| &pickles[&(name.to_owned(), proto)];
    let accept = |name: &str, proto: u8| {
        let data = get(name, proto);
        match Decoder::new(data, &policy).decode() {
            Ok(doc) => to_typed_json(&doc),
            Err(e) => panic!("{name} at protocol {proto} is refused: {e}"),
        }
    };
    let refuse = |name: &str, proto: u8| {
        let data = get(name, proto);
        match Decoder::new(data, &policy).decode() {
            Ok(doc) => panic!(
                "{name} at protocol {proto} is accepted: {}",
                to_typed_json(&doc)
            ),
            Err(e) => e,
        }
    };

    for proto in 0..=5 {
        // Point(3, 4): a record by REDUCE with two ints in the schema's range.
        let json = accept("point", proto);
        assert!(json.contains("\"Point\""), "protocol {proto}: {json}");
        assert!(json.contains("\"reduce\""), "protocol {proto}: {json}");
        // y = 2000 is above the schema's max of 1000.
        let err = refuse("far", proto);
        assert!(
            matches!(err.kind(), ErrorKind::ConstructorRejected(_)),
            "protocol {proto}: {err}"
        );
        // A set: builtins.set at protocol 3, __builtin__.set at 0-2, EMPTY_SET at 4-5.
        let json = accept("set", proto);
        assert!(json.contains("\"set\""), "protocol {proto}: {json}");
        let json = accept("points", proto);
        assert!(
            json.contains("\"Point\"") && json.contains("\"set\""),
            "{json}"
        );
        // max_nesting_depth = 200: 199 lists around an int are depth 200, 200 lists 201.
        accept("depth200", proto);
        let err = refuse("depth201", proto);
        assert!(
            matches!(
                err.kind(),
                ErrorKind::LimitExceeded {
                    limit: LimitName::MaxNestingDepth,
                    ..
                }
            ),
            "protocol {proto}: {err}"
        );
        // The extension code: CPython writes EXT1 240 at protocols 2-5 (GLOBAL at 0-1), and
        // it decodes to the value the global gives.
        let ext = get("ext_point", proto);
        let has_ext1 = ext.windows(2).any(|w| w == b"\x82\xf0");
        assert_eq!(
            has_ext1,
            proto >= 2,
            "protocol {proto}: EXT1 240 expected from 2"
        );
        assert_eq!(accept("ext_point", proto), accept("point", proto));
    }

    // A Python 2 str is latin-1 text: b"\xe9" reads as "é", as CPython's
    // pickle.loads(data, encoding="latin1") reads it. These are the bytes Python 2's
    // pickle.dumps('\xe9', protocol) writes: STRING at protocol 0, SHORT_BINSTRING at 1 and 2.
    let python2: [&[u8]; 3] = [
        b"S'\\xe9'\np0\n.",
        b"U\x01\xe9q\x00.",
        b"\x80\x02U\x01\xe9q\x00.",
    ];
    for data in python2 {
        let s = Decoder::new(data, &policy).decode().unwrap();
        assert_eq!(to_repr(&s), "'é'\n", "{data:?}");
    }

    // The [mitogen] section is the whole handle allowlist: GET_RESOURCE for ansible_mitogen,
    // GET_MODULE for modules of two packages, and replies.
    let m = &policy.mitogen;
    assert!(m.reply_handles);
    assert_eq!(m.handles.keys().copied().collect::<Vec<_>>(), [100, 112]);
    assert_eq!(
        m.handles[&112].payload,
        PayloadRule::ResourceRequest {
            packages: vec!["ansible_mitogen".to_owned()]
        }
    );
    assert_eq!(
        m.handles[&100].payload,
        PayloadRule::ModuleName {
            top_level_packages: Some(vec!["mitogen".to_owned(), "ansible_mitogen".to_owned()])
        }
    );
    assert_eq!(m.max_new_contexts_per_frame, 100);
    assert_eq!(m.max_new_contexts_per_stream, 10_000);
}
