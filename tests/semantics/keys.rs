//! Dict keys and set items as CPython compares them: `1`, `1.0` and `True` are one key,
//! unhashable keys are refused, keys equal across SETITEMS/ADDITEMS batches, NaN identity,
//! the Python 2 and 3 names of one global, a record's `key` setting, and the canonical set
//! order of typed JSON.

use picklewarden::{json::to_typed_json, Decoder, Document, NodeId, Policy, Value};

use crate::common::{self, python};
use crate::{decode, py, refusal, root, value, FMT, PY_PRELUDE};

#[test]
fn dict_keys_1_1_0_true_are_one_key_first_kept_last_value() {
    // Keys pushed separately and added by one SETITEMS, so no Python-side dict literal merges
    // them before pickling. CPython: {1: 'c'} with the int 1 (the first key object) kept.
    let data = py(r#"
d = b"\x80\x02}(K\x01" + u("a") + f(1.0) + u("b") + b"\x88" + u("c") + b"u."
v = pickle.loads(d)
assert v == {1: "c"} and type(next(iter(v))) is int, v
assert py_load(d) == v
print(d.hex())
"#);
    let policy = Policy::data();
    let doc = decode(&data, &policy);
    let (_, r) = root(&doc);
    let Value::Dict(d) = r else {
        panic!("not a dict: {r:?}")
    };
    assert_eq!(d.len(), 1, "one key");
    let (k, v) = d[0];
    assert!(
        matches!(value(&doc, k), Value::Int(1)),
        "first key object (int 1) kept: {:?}",
        value(&doc, k)
    );
    assert!(
        matches!(value(&doc, v), Value::Str(s) if s.as_str() == Some("c")),
        "last value: {:?}",
        value(&doc, v)
    );
    assert_eq!(
        to_typed_json(&doc),
        format!("{FMT}{{\"type\":\"dict\",\"items\":[[{{\"type\":\"int\",\"value\":\"1\"}},{{\"type\":\"str\",\"value\":\"c\"}}]]}}}}")
    );

    // True first: the bool key is kept
    let data = py(r#"
d = b"\x80\x02}(\x88" + u("a") + b"K\x01" + u("b") + b"u."
v = pickle.loads(d)
assert v == {True: "b"} and next(iter(v)) is True
print(d.hex())
"#);
    let doc = decode(&data, &policy);
    let (_, r) = root(&doc);
    let Value::Dict(d) = r else {
        panic!("not a dict")
    };
    assert_eq!(d.len(), 1);
    assert!(matches!(value(&doc, d[0].0), Value::Bool(true)));
    // SETITEM one at a time, float key first: 1.0 kept
    let data = py(r#"
d = b"\x80\x02}" + f(1.0) + u("a") + b"s" + b"K\x01" + u("b") + b"s."
v = pickle.loads(d)
assert v == {1.0: "b"} and type(next(iter(v))) is float
print(d.hex())
"#);
    let doc = decode(&data, &policy);
    let (_, r) = root(&doc);
    let Value::Dict(d) = r else {
        panic!("not a dict")
    };
    assert_eq!(d.len(), 1);
    assert!(matches!(value(&doc, d[0].0), Value::Float(x) if x == 1.0));
    assert!(matches!(value(&doc, d[0].1), Value::Str(s) if s.as_str() == Some("b")));
}

#[test]
fn sets_with_1_1_0_true_hold_one_item() {
    let policy = Policy::data();
    // protocol 4 ADDITEMS, FROZENSET, and protocol 2 __builtin__.set([1, 1.0, True]) by REDUCE
    for (code, frozen) in [
        (
            r#"d = b"\x80\x04\x8f(K\x01" + f(1.0) + b"\x88\x90.""#,
            false,
        ),
        (r#"d = b"\x80\x04(K\x01" + f(1.0) + b"\x88\x91.""#, true),
        (
            r#"d = b"\x80\x02c__builtin__\nset\n](K\x01" + f(1.0) + b"\x88e\x85R.""#,
            false,
        ),
    ] {
        let data = py(&format!(
            "{code}\nv = pickle.loads(d)\nassert v == {{1}} and len(v) == 1 and type(next(iter(v))) is int, v\nassert py_load(d) == v\nprint(d.hex())"
        ));
        let doc = decode(&data, &policy);
        let (_, r) = root(&doc);
        let items = match (r, frozen) {
            (Value::Set(s), false) | (Value::FrozenSet(s), true) => s,
            other => panic!("wrong container {other:?}"),
        };
        assert_eq!(items.len(), 1, "{}", to_typed_json(&doc));
        assert!(
            matches!(value(&doc, items[0]), Value::Int(1)),
            "first item kept: {:?}",
            value(&doc, items[0])
        );
    }
}

#[test]
fn unhashable_keys_are_refused() {
    let policy = Policy::data();
    for (label, code) in [
        ("list key", r#"d = b"}(]K\x01u.""#),
        ("tuple holding a list", r#"d = b"}(]\x85K\x01u.""#),
        ("dict key by SETITEM", r#"d = b"}}K\x01s.""#),
        ("set item", r#"d = b"\x80\x04\x8f(]\x90.""#),
        ("frozenset of a set", r#"d = b"\x80\x04(\x8f\x91.""#),
        (
            "DICT with a bytearray key",
            r#"d = b"\x80\x05(\x96\x00\x00\x00\x00\x00\x00\x00\x00K\x01d.""#,
        ),
    ] {
        let data = py(&format!(
            "{code}\ntry:\n    pickle.loads(d)\nexcept TypeError as e:\n    assert 'unhashable' in str(e), e\nelse:\n    raise SystemExit('CPython loaded {label}')\nprint(d.hex())"
        ));
        let e = refusal(&data, &policy);
        assert_eq!(e.kind().name(), "unhashable_key", "{label}: {e}");
        assert_eq!(e.category().name(), "malformed", "{label}");
    }
}

/// Dicts, sets and frozensets past 16 entries go through a hash index that lives in the
/// decoder between SETITEMS/ADDITEMS batches: keys equal across batches (`1` and `1.0`) are
/// one key, the first key object kept and the last value winning, as CPython's `pickle.loads`
/// gives. Hand-made batches (pickle.dumps never repeats a key), checked against CPython.
#[test]
fn large_dicts_and_sets_dedup_across_batches_as_cpython() {
    let out = python(
        &format!(
            "{PY_PRELUDE}\n{}",
            r#"
def i(n):
    return b"J" + struct.pack("<i", n)
def show(v):
    if isinstance(v, dict):
        return " ".join(f"{type(k).__name__}:{k!r}={w}" for k, w in v.items())
    return " ".join(f"{type(k).__name__}:{k!r}" for k in v)
ints = b"".join(i(n) + u(f"i{n}") for n in range(1000))
floats = b"".join(f(float(n)) + u(f"f{n}") for n in range(0, 3000, 2))
d = b"\x80\x02}q\x00(" + ints + b"u(" + floats + b"u."
s = (b"\x80\x04\x8f(" + b"".join(i(n) for n in range(1000)) + b"\x90("
     + b"".join(f(float(n)) for n in range(0, 3000, 2)) + b"\x90.")
fs = b"\x80\x04(" + b"".join(i(n % 40) for n in range(100)) + f(3.0) + f(0.5) + b"\x91."
for data in (d, s, fs):
    v = pickle.loads(data)
    assert py_load(data) == v
    print(data.hex())
    print(show(v))
"#
        ),
        &[],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6);
    let policy = Policy::data();
    let show = |doc: &Document, id: NodeId| -> String {
        match value(doc, id) {
            Value::Int(n) => format!("int:{n}"),
            Value::Float(x) => format!("float:{x:?}"),
            Value::Str(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
            other => panic!("{other:?}"),
        }
    };
    for pair in lines.chunks(2) {
        let data = common::hex_decode(pair[0]);
        let doc = decode(&data, &policy);
        let (_, r) = root(&doc);
        let got: Vec<String> = match r {
            Value::Dict(d) => d
                .iter()
                .map(|&(k, v)| format!("{}={}", show(&doc, k), show(&doc, v)))
                .collect(),
            Value::Set(s) | Value::FrozenSet(s) => s.iter().map(|&k| show(&doc, k)).collect(),
            other => panic!("{other:?}"),
        };
        assert_eq!(got.join(" "), pair[1]);
    }
}

/// Typed JSON's set order is canonical however a set was built: the same value pickled by
/// CPython at protocols 2 and 3 (REDUCE of `set([...])`, items before the set) and 4 and 5
/// (EMPTY_SET then ADDITEMS, the set before its items) gives the same text, including sets of
/// frozensets whose own order decides the outer one, nested two deep. (The writer used to order sets in arena order, which gave the protocol-4
/// sets of frozensets an order keyed on their items' unsorted text.)
#[test]
fn set_order_does_not_depend_on_the_protocol() {
    let values = [
        "{frozenset({(0,), 9}), frozenset({(1,), 20, 1})}",
        "{frozenset({'b', 1}), frozenset({'a', 2})}",
        "[{frozenset({frozenset({3, 'x'}), (2,)}), frozenset({frozenset({'y', 1})})}]",
        "{(frozenset({2, 'q'}), 1), (frozenset({'p', 3}), 0)}",
    ];
    for v in values {
        let hexes = python(
            &format!(
                "import pickle\nv = {v}\nfor p in (2, 3, 4, 5):\n    print(pickle.dumps(v, p).hex())"
            ),
            &[],
        );
        let texts: Vec<String> = hexes
            .lines()
            .map(|h| {
                let data = common::hex_decode(h);
                let doc = Decoder::new(&data, &Policy::data())
                    .decode()
                    .unwrap_or_else(|e| panic!("{v}: {e}"));
                to_typed_json(&doc)
            })
            .collect();
        assert_eq!(texts.len(), 4);
        for t in &texts[1..] {
            assert_eq!(t, &texts[0], "{v}");
        }
    }
}

/// NaN keys and set items, as CPython 3.10+ treats them (a NaN hashes by identity and equals
/// only itself): distinct NaN objects are distinct items, one NaN object met twice (through
/// the memo) is one, and containers of the same NaN objects are equal. 20,000 distinct NaNs
/// used to hash alike and cost 20,000**2 comparisons (A43); the item counts are CPython's.
#[test]
fn nan_keys_and_items_follow_identity_as_in_cpython() {
    let cases = [
        "{float('nan') for _ in range(20000)}",
        "{float('nan'): i for i in range(20000)}",
        "{(float('nan'),) for _ in range(3000)}",
        "(lambda x: {x, x, (x,), (x,)})(float('nan'))",
        "(lambda a, b: {frozenset({(a,), (b,)}): 1, frozenset({(b,), (a,)}): 2})(float('nan'), float('nan'))",
        "(lambda a: {complex(a, 1), complex(a, 1), a})(float('nan'))",
    ];
    for v in cases {
        let out = python(
            &format!(
                "import pickle\nv = {v}\nprint(len(v))\nfor p in (2, 4):\n    print(pickle.dumps(v, p).hex())"
            ),
            &[],
        );
        let mut lines = out.lines();
        let want: usize = lines
            .next()
            .unwrap_or_default()
            .parse()
            .unwrap_or(usize::MAX);
        for h in lines {
            let data = common::hex_decode(h);
            let doc = Decoder::new(&data, &Policy::data())
                .decode()
                .unwrap_or_else(|e| panic!("{v}: {e}"));
            let got = match root(&doc).1 {
                Value::Set(s) => s.len(),
                Value::Dict(d) => d.len(),
                other => panic!("{v}: {other:?}"),
            };
            assert_eq!(got, want, "{v}");
        }
    }
}

/// At protocols 0-2 CPython finds `__builtin__.set` as `builtins.set` (`fix_imports`), so a dict
/// whose keys are both holds one key (the first, with the last value), as a set of both holds
/// one item. At protocol 3 the names are taken as written.
#[test]
fn python2_and_python3_names_of_one_global_are_one_key() {
    let policy = Policy::data();
    let dict: &[u8] = b"\x80\x02}(c__builtin__\nset\nK\x01cbuiltins\nset\nK\x02u.";
    let cpython = python(
        "import pickle, sys\nd = pickle.loads(bytes.fromhex(sys.argv[1]))\nprint(len(d), d[set])",
        &[&common::hex_encode(dict)],
    );
    assert_eq!(cpython.trim(), "1 2");
    let doc = decode(dict, &policy);
    assert_eq!(
        to_typed_json(&doc),
        format!(
            "{FMT}{{\"type\":\"dict\",\"items\":[[{{\"type\":\"global\",\"module\":\"__builtin__\",\
             \"name\":\"set\"}},{{\"type\":\"int\",\"value\":\"2\"}}]]}}}}"
        )
    );
    let set: &[u8] = b"\x80\x02(c__builtin__\nset\ncbuiltins\nset\n\x91.";
    let doc = decode(set, &policy);
    assert!(matches!(root(&doc).1, Value::FrozenSet(s) if s.len() == 1));
    // Protocol 3: CPython maps nothing and cannot import `__builtin__`: refused.
    let p3: &[u8] = b"\x80\x03}(c__builtin__\nset\nK\x01cbuiltins\nset\nK\x02u.";
    let e = picklewarden::decode(p3, &policy).unwrap_err();
    assert_eq!(e.kind().name(), "python2_name_at_protocol_3");
}

/// A record's `key` setting (src/policy/rule.rs, `RecordKey`): `first_argument` hashes and
/// compares as its first argument (a `str` subclass made from it), `one_per_first_argument`
/// is equal to a call of the same global with an equal first argument and to nothing else,
/// `unhashable` is refused as a key, and `identity` (the default) is a key of its own.
#[test]
fn record_keys_follow_their_policy_setting() {
    let policy = Policy::from_toml_str(
        r#"
name = "keys"
[[global]]
module = "m"
name = "AsArg"
constructor = "record"
key = "first_argument"
[[global]]
module = "m"
name = "OnePer"
constructor = "record"
key = "one_per_first_argument"
[[global]]
module = "m"
name = "Other"
constructor = "record"
key = "one_per_first_argument"
[[global]]
module = "m"
name = "NoHash"
constructor = "record"
key = "unhashable"
[[global]]
module = "m"
name = "Plain"
constructor = "record"
"#,
    )
    .unwrap();
    let pairs = |p: &[u8]| {
        let doc = decode(p, &policy);
        match doc.root().and_then(|r| doc.get(r)) {
            Some(Value::Dict(d)) => d.len(),
            other => panic!("{other:?}"),
        }
    };
    let g = |name: &str| format!("cm\n{name}\n").into_bytes();
    let dict = |body: Vec<u8>| [b"\x80\x02}(".to_vec(), body, b"u.".to_vec()].concat();
    // {AsArg('a'): 1, 'a': 2}: one pair, as {Secret('a'): 1, 'a': 2} in Mitogen.
    let as_arg = dict(
        [
            g("AsArg"),
            b"X\x01\x00\x00\x00a\x85RK\x01X\x01\x00\x00\x00aK\x02".to_vec(),
        ]
        .concat(),
    );
    assert_eq!(pairs(&as_arg), 1);
    // {('a',): 1, (AsArg('a'),): 2}: one pair (inside a tuple too).
    let in_tuple = dict(
        [
            b"X\x01\x00\x00\x00a\x85K\x01".to_vec(),
            g("AsArg"),
            b"X\x01\x00\x00\x00a\x85R\x85K\x02".to_vec(),
        ]
        .concat(),
    );
    assert_eq!(pairs(&in_tuple), 1);
    // OnePer(5) twice: one pair; OnePer(5) and OnePer(6): two; OnePer(5) and 5: two;
    // OnePer(5) and Other(5): two (another global).
    let one_per = |a: &[u8], b: &[u8]| {
        dict(
            [
                g("OnePer"),
                a.to_vec(),
                b"\x85RK\x01".to_vec(),
                b.to_vec(),
                b"K\x02".to_vec(),
            ]
            .concat(),
        )
    };
    let call = |name: &str, arg: &[u8]| [g(name), arg.to_vec(), b"\x85R".to_vec()].concat();
    assert_eq!(pairs(&one_per(b"K\x05", &call("OnePer", b"K\x05"))), 1);
    assert_eq!(pairs(&one_per(b"K\x05", &call("OnePer", b"K\x06"))), 2);
    assert_eq!(pairs(&one_per(b"K\x05", b"K\x05")), 2);
    assert_eq!(pairs(&one_per(b"K\x05", &call("Other", b"K\x05"))), 2);
    // Plain() twice: two pairs (identity).
    let plain = dict(
        [
            g("Plain"),
            b")RK\x01".to_vec(),
            g("Plain"),
            b")RK\x02".to_vec(),
        ]
        .concat(),
    );
    assert_eq!(pairs(&plain), 2);
    // Refused as keys: NoHash(), AsArg() with no argument, AsArg([]) (its argument is a
    // list), OnePer((1,)) (its argument is not a scalar).
    for (label, key) in [
        ("NoHash()", [g("NoHash"), b")R".to_vec()].concat()),
        ("AsArg()", [g("AsArg"), b")R".to_vec()].concat()),
        ("AsArg([])", call("AsArg", b"]")),
        ("OnePer((1,))", call("OnePer", b"K\x01\x85")),
    ] {
        let p = dict([key, b"K\x01".to_vec()].concat());
        let e = refusal(&p, &policy);
        assert_eq!(e.kind().name(), "unhashable_key", "{label}: {e}");
    }
    // A setting that could never apply is refused: key on a constructor other than record,
    // or an unknown key.
    let bad = Policy::from_toml_str(
        "name = \"x\"\n[[global]]\nmodule = \"builtins\"\nname = \"set\"\nconstructor = \"set\"\nkey = \"unhashable\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(bad.contains("key applies to record globals only"), "{bad}");
    let bad = Policy::from_toml_str(
        "name = \"x\"\n[[global]]\nmodule = \"m\"\nname = \"R\"\nconstructor = \"record\"\nkey = \"value\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(bad.contains("unknown key \"value\""), "{bad}");
}
