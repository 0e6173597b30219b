//! Object identity as CPython's `pickle.loads` gives it: shared references are one node,
//! a recursive list holds itself, `frozenset(fs)` is `fs`, READONLY_BUFFER on in-band values,
//! and a recycled arena decodes as a fresh one.

use picklewarden::{json::to_typed_json, Decoder, Policy, Value};

use crate::common::{self, python, python_hex};
use crate::{decode, py, refusal, root, value, FMT};

#[test]
fn shared_reference_is_one_node() {
    let data = python_hex("import pickle\na = [1]\nprint(pickle.dumps([a, a], 2).hex())");
    let policy = Policy::data();
    let doc = decode(&data, &policy);
    let (_, r) = root(&doc);
    let Value::List(items) = r else {
        panic!("not a list")
    };
    assert_eq!(items.len(), 2);
    assert_eq!(items[0], items[1], "the same NodeId");
    assert!(matches!(value(&doc, items[0]), Value::List(inner) if inner.len() == 1));
    assert_eq!(
        to_typed_json(&doc),
        format!("{FMT}{{\"type\":\"list\",\"items\":[{{\"type\":\"list\",\"id\":0,\"items\":[{{\"type\":\"int\",\"value\":\"1\"}}]}},{{\"type\":\"ref\",\"id\":0}}]}}}}")
    );
    // protocol 0 (PUT/GET text) too
    let data = python_hex("import pickle\na = {'k': 1}\nprint(pickle.dumps((a, [a]), 0).hex())");
    let doc = decode(&data, &policy);
    let (_, r) = root(&doc);
    let Value::Tuple(items) = r else {
        panic!("not a tuple")
    };
    let Value::List(inner) = value(&doc, items[1]) else {
        panic!("not a list")
    };
    assert_eq!(items[0], inner[0]);
}

#[test]
fn recursive_list_contains_itself() {
    let policy = Policy::data();
    for proto in 0..=5 {
        let data = python_hex(&format!(
            "import pickle\nl = []\nl.append(l)\nprint(pickle.dumps(l, {proto}).hex())"
        ));
        let doc = decode(&data, &policy);
        let (id, r) = root(&doc);
        let Value::List(items) = r else {
            panic!("p{proto}: not a list")
        };
        assert_eq!(items, &[id], "p{proto}: the item is the list itself");
        assert_eq!(
            to_typed_json(&doc),
            format!(
                "{FMT}{{\"type\":\"list\",\"id\":0,\"items\":[{{\"type\":\"ref\",\"id\":0}}]}}}}"
            )
        );
    }
}

/// A recycled arena (`Document::recycle`, `Decoder::scratch`) keeps its allocation, and a
/// decode into it gives what a fresh decode gives: the same typed JSON, none of the nodes of
/// the decode before, and the same refusals under the same limits.
#[test]
fn a_recycled_arena_decodes_as_a_fresh_one() {
    let out = python(
        r#"
import pickle
print(pickle.dumps([float(i) for i in range(1000, 3000)], 4).hex())
print(pickle.dumps({"a": [1, 2.5, "x"], "b": (b"y", None), "c": {300, 301}}, 2).hex())
"#,
        &[],
    );
    let lines: Vec<&str> = out.lines().collect();
    let big = common::hex_decode(lines[0]);
    let small = common::hex_decode(lines[1]);
    let policy = Policy::data();

    let big_doc = decode(&big, &policy);
    assert_eq!(big_doc.len(), 2001);
    // 16 bytes a node, 4 an item.
    let arena = 2001 * 16 + 2000 * 4;
    let scratch = big_doc.recycle();
    assert!(scratch.capacity_bytes() >= arena);

    let fresh = decode(&small, &policy);
    let doc = Decoder::new(&small, &policy)
        .scratch(scratch)
        .decode()
        .unwrap();
    assert_eq!(to_typed_json(&doc), to_typed_json(&fresh));
    assert_eq!(doc.nodes().len(), fresh.nodes().len());
    let scratch = doc.recycle();
    assert!(scratch.capacity_bytes() >= arena);

    // The same refusal, at the same offset, as without the scratch.
    let mut tight = policy.limits;
    tight.max_nodes = 10;
    let with = Decoder::new(&big, &policy)
        .limits(tight)
        .scratch(scratch)
        .decode()
        .unwrap_err();
    let without = refusal_with(&big, &policy, tight);
    assert_eq!(with.to_string(), without.to_string());
    assert_eq!(with.offset(), without.offset());
}

fn refusal_with(data: &[u8], policy: &Policy, limits: picklewarden::Limits) -> picklewarden::Error {
    match Decoder::new(data, policy).limits(limits).decode() {
        Ok(doc) => panic!("decoded to {}", to_typed_json(&doc)),
        Err(e) => e,
    }
}

/// `frozenset(fs)` of a frozenset is `fs` itself in CPython (`frozenset_new` returns an exact
/// frozenset argument), so the two places share one node; `set(s)` and `frozenset(list)` are
/// new objects.
#[test]
fn frozenset_of_a_frozenset_is_the_same_object() {
    let policy = Policy::data();
    // (frozenset(fs), fs, set(fs)) with fs = frozenset({1, 2}), at protocol 4.
    let pickle: &[u8] = b"\x80\x04\x8c\x08builtins\x8c\x09frozenset\x93(K\x01K\x02\x91\x94\x85R\
h\x00\x8c\x08builtins\x8c\x03set\x93h\x00\x85R\x87.";
    let cpython = python(
        "import pickle, sys\nt = pickle.loads(bytes.fromhex(sys.argv[1]))\n\
         print(t[0] is t[1], t[2] is t[1], t[2] == t[1])",
        &[&common::hex_encode(pickle)],
    );
    assert_eq!(cpython.trim(), "True False True");
    let doc = decode(pickle, &policy);
    let Value::Tuple(items) = root(&doc).1 else {
        panic!("not a tuple")
    };
    assert_eq!(items[0], items[1]);
    assert_ne!(items[2], items[1]);
    assert!(matches!(value(&doc, items[2]), Value::Set(s) if s.len() == 2));
}

/// READONLY_BUFFER on an in-band value needs no out-of-band buffers, as in CPython
/// (`memoryview(obj).toreadonly()` unless already read-only): on bytes it is the same bytes;
/// on a bytearray CPython gives a read-only memoryview of that bytearray (equal to it,
/// unhashable like it), which picklewarden, having no memoryview value, keeps as that
/// bytearray; on anything else CPython raises TypeError.
#[test]
fn readonly_buffer_on_in_band_bytes_and_bytearray() {
    let bytes = py(r#"
d = b"\x80\x05C\x03abc\x98."
assert type(pickle.loads(d)) is bytes and pickle.loads(d) == b"abc"
print(d.hex())
"#);
    let policy = Policy::data();
    let doc = decode(&bytes, &policy);
    assert_eq!(
        to_typed_json(&doc),
        format!("{FMT}{{\"type\":\"bytes\",\"hex\":\"616263\"}}}}")
    );
    assert!(picklewarden::scan(&bytes, &policy).result.is_ok());
    let bytearray = py(r#"
d = b"\x80\x05\x96\x03\x00\x00\x00\x00\x00\x00\x00abc\x98."
m = pickle.loads(d)
assert isinstance(m, memoryview) and m.readonly and m == b"abc" and type(m.obj) is bytearray
print(d.hex())
"#);
    let doc = decode(&bytearray, &policy);
    assert_eq!(
        to_typed_json(&doc),
        format!("{FMT}{{\"type\":\"bytearray\",\"hex\":\"616263\"}}}}")
    );
    // As a dict key: unhashable in CPython (the view of a bytearray), and here.
    let key = py(r#"
d = b"\x80\x05}\x96\x01\x00\x00\x00\x00\x00\x00\x00a\x98K\x01s."
try:
    pickle.loads(d)
    raise SystemExit("hashed")
except TypeError:
    pass
print(d.hex())
"#);
    assert_eq!(refusal(&key, &policy).kind().name(), "unhashable_key");
    // On an int: a type mismatch (CPython: TypeError), buffers or not.
    let int = b"\x80\x05K\x01\x98.";
    assert_eq!(refusal(int, &policy).kind().name(), "type_mismatch");
    assert_eq!(
        picklewarden::scan(int, &policy)
            .result
            .unwrap_err()
            .kind()
            .name(),
        "type_mismatch"
    );
}
