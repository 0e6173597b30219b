//! Targeted CPython semantics, with pickles made (and checked against CPython) by python3 at
//! test time: dict key and set item equality, shared references and cycles, unhashable keys,
//! lone surrogates, INT text (tests/number_text.rs has the rest), FRAME boundaries, Python 2 STRING.

// Test code: a failed invariant is a panic, by design (clippy.toml's allow-*-in-tests covers
// #[test] fns only, not the helpers and the shared module).
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

mod common;

use common::{python, python_hex};
use picklewarden::{json::to_typed_json, Decoder, Document, NodeId, Policy, Value};

const FMT: &str = "{\"format\":\"picklewarden-typed-json/1\",\"value\":";

fn decode<'a>(data: &'a [u8], policy: &Policy) -> Document<'a> {
    Decoder::new(data, policy)
        .decode()
        .unwrap_or_else(|e| panic!("refused {}: {e}", common::hex_encode(data)))
}

fn refusal(data: &[u8], policy: &Policy) -> picklewarden::Error {
    match Decoder::new(data, policy).decode() {
        Ok(doc) => panic!(
            "decoded {} to {}",
            common::hex_encode(data),
            to_typed_json(&doc)
        ),
        Err(e) => e,
    }
}

fn root<'d>(doc: &'d Document<'_>) -> (NodeId, Value<'d>) {
    let id = doc.root().unwrap_or_else(|| panic!("no root"));
    (
        id,
        doc.get(id)
            .unwrap_or_else(|| panic!("root id out of range")),
    )
}

fn value<'d>(doc: &'d Document<'_>, id: NodeId) -> Value<'d> {
    doc.get(id).unwrap_or_else(|| panic!("id out of range"))
}

/// Python helpers shared by the snippets: `u(s)` is BINUNICODE, `f(x)` is BINFLOAT.
const PY_PRELUDE: &str = r#"
import io, pickle, struct
def u(s):
    b = s.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(b)) + b
def f(x):
    return b"G" + struct.pack(">d", x)
def py_load(d):
    return pickle._Unpickler(io.BytesIO(d)).load()
"#;

fn py(code: &str) -> Vec<u8> {
    python_hex(&format!("{PY_PRELUDE}\n{code}"))
}

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

#[test]
fn lone_surrogates_round_trip_as_surrogatepass_hex() {
    let policy = Policy::data();
    for proto in [0, 1, 2, 3, 4, 5] {
        let data = python_hex(&format!(
            "import pickle\nprint(pickle.dumps('a\\ud800b\\udfff', {proto}).hex())"
        ));
        let doc = decode(&data, &policy);
        let (_, r) = root(&doc);
        assert!(
            matches!(r, Value::Str(s) if s.has_surrogates()),
            "p{proto}: {r:?}"
        );
        assert_eq!(
            to_typed_json(&doc),
            format!("{FMT}{{\"type\":\"str\",\"surrogatepass_hex\":\"61eda08062edbfbf\"}}}}"),
            "p{proto}"
        );
    }
    // a proper pair spelled as two surrogates stays two code points (no UTF-16 joining)
    let data = python_hex("import pickle\nprint(pickle.dumps('\\ud83d\\ude00', 3).hex())");
    let doc = decode(&data, &policy);
    assert_eq!(
        to_typed_json(&doc),
        format!("{FMT}{{\"type\":\"str\",\"surrogatepass_hex\":\"eda0bdedb880\"}}}}")
    );
}

/// Protocol-0 INT text "010" is refused as version_dependent_number: CPython <= 3.13's C
/// unpickler reads INT with base 0 through strtol and gives 8 (octal), its pure-Python
/// unpickler raises ValueError, later CPython releases read decimal (10). Asked here of the
/// machine's CPython; tests/number_text.rs has the rest of the table and the survey.
#[test]
fn int_text_with_leading_zero_is_refused() {
    let out = python(
        "import io, pickle\nd = b'I010\\n.'\nprint(pickle.loads(d))\ntry:\n    pickle._Unpickler(io.BytesIO(d)).load()\n    print('loaded')\nexcept ValueError:\n    print('ValueError')",
        &[],
    );
    eprintln!(
        "CPython {}: C unpickler / pure-Python unpickler: {:?}",
        python("import sys; print(sys.version.split()[0])", &[]).trim(),
        out.trim()
    );
    let policy = Policy::data();
    for data in [&b"I010\n."[..], b"I-007\n."] {
        let e = refusal(data, &policy);
        assert_eq!(e.kind().name(), "version_dependent_number", "{e}");
        assert_eq!((e.offset(), e.opcode()), (0, Some(b'I')));
    }
    // "00" and "01" are protocol 0's False and True, not ints
    assert!(matches!(
        root(&decode(b"I01\n.", &policy)).1,
        Value::Bool(true)
    ));
    assert!(matches!(
        root(&decode(b"I00\n.", &policy)).1,
        Value::Bool(false)
    ));
    // base prefixes are not decimal
    assert_eq!(
        refusal(b"I0x10\n.", &policy).kind().name(),
        "invalid_number"
    );
}

/// PUT and GET text indices as CPython reads them (`PyLong_FromString(s, NULL, 10)`, then
/// `PyLong_AsSsize_t`): a sign is taken (`+1`, `-0`), a negative index and one past
/// 2**63 - 1 are refused (found by a differential helper: 2**63 to 2**64 - 1 were accepted).
/// Each verdict is CPython's own, asked here.
#[test]
fn put_and_get_text_indices_are_read_as_cpython_reads_them() {
    let policy = Policy::data();
    for text in [
        "+1",
        "-0",
        "0",
        "007",
        "9223372036854775807",
        "-1",
        "+-1",
        "9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "",
        "+",
        "-",
    ] {
        let pickle = format!("]p{text}\n0g{text}\n.");
        let cpython = python(
            "import pickle, sys\ntry:\n    print(pickle.loads(sys.argv[1].encode()))\nexcept Exception as e:\n    print('refused', type(e).__name__)",
            &[&pickle],
        );
        let ours = Decoder::new(pickle.as_bytes(), &policy).decode();
        if text == "9223372036854775807" {
            // CPython sizes its memo array by the largest index (MemoryError here): refused,
            // as the reader after picklewarden must not be handed it (src/vm/memo.rs).
            let e = ours.err().unwrap_or_else(|| panic!("{text:?} accepted"));
            assert_eq!(e.kind().name(), "memo_index_ahead", "{text:?}");
            continue;
        }
        match ours {
            Ok(doc) => {
                assert_eq!(cpython.trim(), "[]", "{text:?}: CPython {cpython}");
                assert!(matches!(root(&doc).1, Value::List(l) if l.is_empty()));
            }
            Err(e) => {
                assert!(
                    cpython.starts_with("refused"),
                    "{text:?}: CPython {cpython}, ours {e}"
                );
                assert_eq!(e.kind().name(), "invalid_number", "{text:?}: {e}");
            }
        }
    }
}

/// An opcode whose argument crosses the end of its FRAME: refused as frame_straddle, as
/// `Lib/pickle.py`'s _Unframer refuses it; CPython's C unpickler does not check frame ends
/// and loads 'a'.
#[test]
fn frame_straddle_is_refused_though_the_c_unpickler_accepts_it() {
    let data = py(r#"
d = b"\x80\x04\x95" + struct.pack("<Q", 3) + b"X\x01\x00" + b"\x00\x00a."
assert pickle.loads(d) == "a"
try:
    py_load(d)
except pickle.UnpicklingError:
    pass
else:
    raise SystemExit("pickle._Unpickler accepted a frame straddle")
print(d.hex())
"#);
    let policy = Policy::data();
    let e = refusal(&data, &policy);
    assert_eq!(e.kind().name(), "frame_straddle", "{e}");
    assert_eq!(e.offset(), 11, "at the BINUNICODE inside the frame: {e}");
    assert_eq!(e.opcode(), Some(b'X'));
    // the same bytes with a frame that covers the whole opcode decode
    let ok = py(r#"
d = b"\x80\x04\x95" + struct.pack("<Q", 7) + b"X\x01\x00\x00\x00a."
assert pickle.loads(d) == "a" and py_load(d) == "a"
print(d.hex())
"#);
    let doc = decode(&ok, &policy);
    assert!(matches!(root(&doc).1, Value::Str(s) if s.as_str() == Some("a")));
}

/// Python 2 STRING: ASCII str under `data` and `strict`, as CPython's `pickle.loads` reads it
/// by default (`encoding="ASCII"`), a non-ASCII byte refused (as a policy refusal, since the
/// policy's encoding refuses it: CPython raises `UnicodeDecodeError`); bytes under `mitogen`
/// and a policy with python2_str = "bytes" (CPython's encoding="bytes"), str under a policy
/// with python2_str = "str" and latin1 (CPython's encoding="latin1").
#[test]
fn python2_string_is_ascii_str_by_default_bytes_or_latin1_str_by_policy() {
    let data = py(r#"
d = b"S'abc\\xe9'\n."
assert pickle.loads(d, encoding="bytes") == b"abc\xe9"
assert pickle.loads(d, encoding="latin1") == "abc\xe9"
try:
    pickle.loads(d)
    raise SystemExit("CPython's default read non-ASCII")
except UnicodeDecodeError:
    pass
assert pickle.loads(b"S'abc'\n.") == "abc"
print(d.hex())
"#);
    assert_eq!(data, b"S'abc\\xe9'\n.");
    // The built-in data and strict policies: CPython's default.
    for policy in [Policy::data(), Policy::strict()] {
        for ascii in [&b"S'abc'\n."[..], b"U\x03abc.", b"T\x03\x00\x00\x00abc."] {
            let doc = decode(ascii, &policy);
            assert_eq!(
                to_typed_json(&doc),
                format!("{FMT}{{\"type\":\"str\",\"value\":\"abc\"}}}}"),
                "{}",
                policy.name
            );
        }
        for bad in [&data[..], b"U\x04abc\xe9.", b"T\x04\x00\x00\x00abc\xe9."] {
            let e = refusal(bad, &policy);
            assert_eq!(e.kind().name(), "invalid_ascii", "{e}");
            assert_eq!(e.category(), picklewarden::Category::PolicyDenied, "{e}");
            let text = e.to_string();
            assert!(
                text.contains("byte above 0x7F")
                    && text.contains(&format!("policy \"{}\"", policy.name)),
                "{text}"
            );
            // The scan gives the same refusal.
            let report = picklewarden::scan(bad, &policy);
            assert_eq!(report.result.unwrap_err().kind().name(), "invalid_ascii");
        }
    }

    // Bytes, as Mitogen reads them (`Unpickler(encoding='bytes')`) and a policy may choose.
    let bytes_file = Policy::from_toml_str("name = \"b\"\npython2_str = \"bytes\"\n")
        .unwrap_or_else(|e| panic!("{e}"));
    for bytes_policy in [
        Policy::builtin("mitogen").unwrap(),
        Policy::builtin("mitogen-plus").unwrap(),
        bytes_file,
    ] {
        let doc = decode(&data, &bytes_policy);
        assert!(
            matches!(root(&doc).1, Value::Bytes(b) if b.to_cow().as_ref() == b"abc\xe9"),
            "{:?}",
            root(&doc).1
        );
        assert_eq!(
            to_typed_json(&doc),
            format!("{FMT}{{\"type\":\"bytes\",\"hex\":\"616263e9\"}}}}")
        );
        // BINSTRING and SHORT_BINSTRING follow the same rule
        for d in [&b"U\x04abc\xe9."[..], &b"T\x04\x00\x00\x00abc\xe9."[..]] {
            assert!(
                matches!(root(&decode(d, &bytes_policy)).1, Value::Bytes(b) if b.to_cow().as_ref() == b"abc\xe9")
            );
        }
    }

    let str_policy = Policy::from_toml_str(
        "name = \"py2str\"\npython2_str = \"str\"\npython2_str_encoding = \"latin1\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let doc = decode(&data, &str_policy);
    assert!(
        matches!(root(&doc).1, Value::Str(s) if s.as_str() == Some("abc\u{e9}")),
        "{:?}",
        root(&doc).1
    );
    assert_eq!(
        to_typed_json(&doc),
        format!("{FMT}{{\"type\":\"str\",\"value\":\"abc\u{e9}\"}}}}")
    );
    for d in [&b"U\x04abc\xe9."[..], &b"T\x04\x00\x00\x00abc\xe9."[..]] {
        assert!(
            matches!(root(&decode(d, &str_policy)).1, Value::Str(s) if s.as_str() == Some("abc\u{e9}"))
        );
    }
}

/// Runs of int opcodes (BININT1, BININT2, BININT, LONG1), read by the build's and the scan's
/// run loops: 60,000 ints of every width and sign, as `pickle.dumps` writes them at protocols
/// 2, 4 and 5 (protocols 4 and 5 cut them into 64 KiB FRAMEs, so runs meet frame ends and
/// ints straddle none), decode to the ints CPython's `pickle.loads` gives, in order: ints of
/// 31 bits held in their ids (shared values, equal ones one id), the others distinct nodes.
#[test]
fn runs_of_ints_of_every_width_match_cpython() {
    let out = python(
        r#"
import pickle, random
rnd = random.Random(6_0004)
vals = []
for _ in range(60_000):
    bits = rnd.choice([3, 8, 9, 16, 17, 31, 32, 40, 63, 64, 65, 80])
    v = rnd.randrange(1 << bits) - (1 << (bits - 1)) * rnd.randrange(2)
    vals.append(v)
vals += [-5, 256, 257, -6, 255, 65535, 65536, -2**31, 2**31 - 1, 2**31, -2**63, 2**63 - 1, 2**63]
for p in (2, 4, 5):
    d = pickle.dumps(vals, p)
    assert pickle.loads(d) == vals
    print(d.hex())
print(" ".join(map(str, vals)))
"#,
        &[],
    );
    let lines: Vec<&str> = out.lines().collect();
    let want: Vec<&str> = lines.last().unwrap().split(' ').collect();
    assert!(want.len() > 60_000);
    let policy = Policy::data();
    for hex in &lines[..3] {
        let data = common::hex_decode(hex);
        let doc = decode(&data, &policy);
        let (_, r) = root(&doc);
        let Value::List(items) = r else {
            panic!("not a list: {r:?}")
        };
        assert_eq!(items.len(), want.len());
        for (i, (&id, w)) in items.iter().zip(&want).enumerate() {
            let got = match value(&doc, id) {
                Value::Int(v) => v.to_string(),
                Value::BigInt(b) => b.to_string(),
                other => panic!("item {i}: {other:?}"),
            };
            assert_eq!(&got, w, "item {i}");
            let small = got
                .parse::<i64>()
                .is_ok_and(|v| (-(1 << 30)..1 << 30).contains(&v));
            assert_eq!(id.is_shared(), small, "item {i} ({got})");
        }
        // Equal ints from separate opcodes are separate objects in CPython (unless -5..=256),
        // and separate nodes here unless held in their ids.
        let arena: std::collections::HashSet<NodeId> =
            items.iter().copied().filter(|id| !id.is_shared()).collect();
        assert_eq!(
            arena.len(),
            items.iter().filter(|id| !id.is_shared()).count()
        );
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

/// A `constructor_rejected` refusal names the global and counts arguments from 1, at the
/// REDUCE's offset. (The pickle is the shape CPython's protocol 2 writes for an object whose
/// `__reduce__` returns `(Point, (1, 2000))`, without its BINPUTs.)
#[test]
fn constructor_refusals_name_the_global_and_the_argument() {
    let policy = Policy::from_toml_str(
        "name = \"p\"\n[[global]]\nmodule = \"myapp.models\"\nname = \"Point\"\n\
         constructor = \"record\"\nforms = [\"reduce\"]\n\
         args = [{ type = \"int\", min = 0, max = 1000 }, { type = \"int\", min = 0, max = 1000 }]\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // c myapp.models\nPoint\n K\x01 M\xd0\x07 \x86 R .
    let data = b"\x80\x02cmyapp.models\nPoint\nK\x01M\xd0\x07\x86R.";
    let e = refusal(data, &policy);
    assert_eq!(e.kind().name(), "constructor_rejected");
    assert_eq!(e.offset(), data.len() as u64 - 2);
    let msg = e.to_string();
    assert!(
        msg.contains("myapp.models.Point: argument 2 of 2: "),
        "{msg}"
    );
    // The first argument in range, the second out: nothing about argument 1.
    assert!(!msg.contains("argument 1"), "{msg}");
}

/// `[[extension]]` entries are checked when a policy loads: a code outside 1..=0x7fffffff (as
/// CPython's copyreg.add_extension), a code mapped twice, or a global no `[[global]]` allows
/// is a load error. A mapping made through the Rust API to a global the policy does not allow
/// still decodes to a `global_not_allowed` refusal.
#[test]
fn extension_entries_are_checked_when_the_policy_loads() {
    let point =
        "name = \"p\"\n[[global]]\nmodule = \"m\"\nname = \"Point\"\nconstructor = \"record\"\n";
    let ext = |code: &str, module: &str| {
        format!("\n[[extension]]\ncode = {code}\nmodule = \"{module}\"\nname = \"Point\"\n")
    };
    assert!(Policy::from_toml_str(&format!("{point}{}", ext("240", "m"))).is_ok());
    for (bad, why) in [
        (ext("0", "m"), "codes run from 1"),
        (ext("2147483648", "m"), "codes run from 1"),
        (
            ext("240", "other"),
            "other.Point is not allowed by any [[global]]",
        ),
        (
            format!("{}{}", ext("240", "m"), ext("240", "m")),
            "mapped twice",
        ),
    ] {
        match Policy::from_toml_str(&format!("{point}{bad}")) {
            Ok(_) => panic!("loaded {bad:?}"),
            Err(e) => assert!(e.to_string().contains(why), "{bad:?}: {e}"),
        }
    }
    let mut policy = Policy::from_toml_str(point).unwrap_or_else(|e| panic!("{e}"));
    policy
        .extensions
        .insert(1, ("os".to_string(), "system".to_string()));
    // pickle.dumps at protocol 2 with copyreg.add_extension('os', 'system', 1): EXT1 1, then
    // arguments and REDUCE (hand-shortened to the EXT1).
    let e = refusal(b"\x80\x02\x82\x01.", &policy);
    assert_eq!(e.kind().name(), "global_not_allowed");
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

/// `float_repr` (typed JSON's `repr` of a float, and the repr output) is CPython's
/// `repr(float)` on 120,000 doubles: random bit patterns, the range 1e13 to 1e16 where exact
/// ties between two shortest candidates are common (the old digits broke them upwards: 742
/// of 250,000 random doubles differed), and short dyadic fractions.
#[test]
fn float_repr_is_cpythons_on_many_doubles() {
    let out = python(
        "import random, struct\n\
         random.seed(6)\n\
         for i in range(120000):\n\
         \x20   k = i % 3\n\
         \x20   if k == 0: x = random.uniform(1e13, 1e16) * random.choice((1, -1))\n\
         \x20   elif k == 1: x = struct.unpack('<d', random.getrandbits(64).to_bytes(8, 'little'))[0]\n\
         \x20   else: x = random.randint(-10**6, 10**6) / random.choice((2, 4, 8, 1024, 3, 10))\n\
         \x20   print(struct.pack('>d', x).hex(), repr(x))\n",
        &[],
    );
    let mut differ = Vec::new();
    let mut n = 0;
    for line in out.lines() {
        let (bits, want) = line.split_once(' ').unwrap_or_default();
        let x = f64::from_bits(u64::from_str_radix(bits, 16).unwrap_or_default());
        n += 1;
        let got = picklewarden::float_repr(x);
        if got != want {
            differ.push(format!("{bits}: {got} != {want}"));
        }
    }
    assert_eq!(n, 120_000);
    assert!(
        differ.is_empty(),
        "{} differ: {:?}",
        differ.len(),
        &differ[..differ.len().min(5)]
    );
}

/// INT lines that are bools: only "00" and "01", as Lib/pickle.py reads them and, since
/// gh-135241 (merged June 2025), `_pickle.c` too. Before that fix the C unpickler made a bool
/// of any two-character line valued 0 or 1 ("+0", "-0", "+1"), so those three are read
/// differently by CPython versions and refused (version_dependent_number); the rest are
/// checked against both of the machine's unpicklers.
#[test]
fn int_lines_are_bools_only_when_00_or_01() {
    // (No leading zeros but "00"/"01": CPython <= 3.13's Lib/pickle.py reads INT text in
    // base 0.)
    let texts = ["00", "01", "-1", "0", "1", "10", "-10"];
    let want = python(
        &format!(
            "import pickle\n\
             for t in {texts:?}:\n\
             \x20   d = b'I' + t.encode() + b'\\n.'\n\
             \x20   c, p = pickle.loads(d), pickle._loads(d)\n\
             \x20   assert type(c) is type(p) and c == p, t\n\
             \x20   print(repr(p))"
        ),
        &[],
    );
    for (t, want) in texts.iter().zip(want.lines()) {
        let data = format!("I{t}\n.");
        let doc = decode(data.as_bytes(), &Policy::data());
        assert_eq!(picklewarden::repr::to_repr(&doc).trim_end(), want, "I{t}");
    }
    assert_eq!(want.lines().count(), texts.len());
    for t in ["+0", "-0", "+1"] {
        let data = format!("I{t}\n.");
        let e = refusal(data.as_bytes(), &Policy::data());
        assert_eq!(e.kind().name(), "version_dependent_number", "I{t}: {e}");
    }
}

/// FLOAT text with exponents of every size, mantissas that offset them (up to 700,000
/// digits: `0.000...1e655360` is 1.0), signs and zeros, against CPython's `pickle.loads` of the
/// same opcode: the same bits, or both refuse. `str::parse::<f64>` alone stops reading
/// exponent digits past 65,536 and gave 0.0 there (src/input/text.rs `long_exponent`).
#[test]
fn float_text_with_long_exponents_is_read_as_cpython_reads_it() {
    let dir = common::scratch("float_exponents");
    let file = dir.join("floats.txt");
    python(
        r#"
import pickle, random, struct, sys
rnd = random.Random(655360)
texts = [b"0." + b"0" * 655359 + b"1e655360", b"1" + b"0" * 655360 + b"e-655360",
         b"0." + b"0" * 655358 + b"1e655360", b"1" + b"0" * 655360 + b"e-655361"]
for _ in range(300):
    zeros = rnd.choice([0, 1, 9, 300, 4000, 65535, 65536, 70000, 100000])
    exp = rnd.choice([9999, 10000, 65535, 65536, 65537, 99999, 100000, 123456, 10**6, 10**19])
    digits = str(rnd.randrange(1, 10**rnd.randrange(1, 30))).encode()
    sign = rnd.choice([b"", b"-", b"+"])
    esign = rnd.choice([b"", b"-", b"+"])
    pad = b"0" * rnd.choice([0, 0, 3, 30])
    if rnd.random() < 0.5:
        # small mantissa after many zeros, pushed back up by the exponent
        text = sign + b"0." + b"0" * zeros + digits + b"e" + esign + pad + str(exp).encode()
    else:
        # many digits before the point, pushed back down
        text = sign + digits + b"0" * zeros + rnd.choice([b"", b".", b".5"]) + b"E" + esign + pad + str(exp).encode()
    texts.append(text)
    # near the edges: shift such that the value is around 1e308 or 1e-320
    edge = rnd.choice([308, 309, -307, -320, -323, -324, -330])
    texts.append(sign + b"0." + b"0" * zeros + digits + b"e" + str(zeros + edge).encode())
with open(sys.argv[1], "wb") as f:
    for t in texts:
        try:
            r = struct.pack(">d", pickle.loads(b"F" + t + b"\n.")).hex().encode()
        except Exception as e:
            r = b"refused"
        f.write(t + b"\t" + r + b"\n")
"#,
        &[file.to_str().unwrap()],
    );
    let text = std::fs::read(&file).unwrap();
    let policy = Policy::data();
    let mut checked = 0;
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let tab = line.iter().rposition(|&b| b == b'\t').unwrap();
        let (t, want) = (&line[..tab], std::str::from_utf8(&line[tab + 1..]).unwrap());
        let mut pickle = b"F".to_vec();
        pickle.extend_from_slice(t);
        pickle.extend_from_slice(b"\n.");
        let got = match Decoder::new(&pickle, &policy).decode() {
            Ok(doc) => match root(&doc).1 {
                Value::Float(x) => common::hex_encode(&x.to_bits().to_be_bytes()),
                other => panic!("not a float: {other:?}"),
            },
            Err(e) => {
                assert_eq!(e.kind().name(), "invalid_number", "{e}");
                "refused".to_owned()
            }
        };
        let shown = String::from_utf8_lossy(&t[..t.len().min(40)]).into_owned();
        assert_eq!(got, want, "FLOAT {shown}... ({} bytes)", t.len());
        checked += 1;
    }
    assert!(checked >= 600, "{checked} texts");
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
    // Protocol 3: no mapping, two keys (CPython cannot import `__builtin__` there at all).
    let p3: &[u8] = b"\x80\x03}(c__builtin__\nset\nK\x01cbuiltins\nset\nK\x02u.";
    let doc = decode(p3, &policy);
    assert!(matches!(root(&doc).1, Value::Dict(d) if d.len() == 2));
}

/// A record's `key` setting (src/policy/mod.rs, `RecordKey`): `first_argument` hashes and
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

/// A form refusal names the global it was refused on (module.name), in the message and the
/// kind, for every form, in the scan and the decode alike; the names are escaped and cut at
/// 64 characters as other text from the input is.
#[test]
fn form_refusals_name_the_global() {
    let mitogen = Policy::builtin("mitogen").unwrap();
    let g = b"cmitogen.core\nCallError\n".to_vec();
    let record = [&b"\x80\x02"[..], &g, b"X\x01\x00\x00\x00x\x85R"].concat();
    let cases: [(&str, Vec<u8>); 7] = [
        ("NEWOBJ", [&b"\x80\x02"[..], &g, b")\x81."].concat()),
        ("NEWOBJ_EX", [&b"\x80\x04"[..], &g, b")}\x92."].concat()),
        ("INST/OBJ", b"\x80\x02(imitogen.core\nCallError\n.".to_vec()),
        ("INST/OBJ", [&b"\x80\x02("[..], &g, b"o."].concat()),
        ("BUILD", [&record[..], b"}b."].concat()),
        ("APPEND", [&record[..], b"K\x01a."].concat()),
        ("SETITEM", [&record[..], b"K\x01K\x02s."].concat()),
    ];
    for (form, p) in cases {
        let want = format!("{form} on mitogen.core.CallError is not allowed by policy \"mitogen\"");
        let e = refusal(&p, &mitogen);
        assert_eq!(e.kind().name(), "form_not_allowed", "{e}");
        assert!(e.to_string().starts_with(&want), "{form}: {e}");
        let kind = format!("{:?}", e.kind());
        assert!(
            kind.contains("module: \"mitogen.core\"") && kind.contains("name: \"CallError\""),
            "{kind}"
        );
        let scanned = picklewarden::scan(&p, &mitogen).result;
        assert_eq!(scanned.unwrap_err().to_string(), e.to_string());
    }
    // A policy's names are written as they are in the input: escaped and cut.
    let long = "n".repeat(100);
    let policy = Policy::from_toml_str(&format!(
        "name = \"x\"\n[[global]]\nmodule = \"m\\u0007\"\nname = \"{long}\"\n\
         constructor = \"record\"\nforms = [\"reduce\"]\n"
    ))
    .unwrap();
    let mut p = b"\x80\x04\x8c\x02m\x07\x8c\x64".to_vec();
    p.extend_from_slice(long.as_bytes());
    p.extend_from_slice(b"\x93)\x81.");
    let e = refusal(&p, &policy).to_string();
    let want = format!("NEWOBJ on m\\u{{7}}.{}... is not allowed", "n".repeat(64));
    assert!(e.starts_with(&want), "{e}");
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

/// INST and OBJ records keep how they were made: CPython calls `cls(*args)` for REDUCE, but
/// `cls.__new__(cls)` for INST and OBJ with no arguments (`Lib/pickle.py` `_instantiate`), so
/// typed JSON and `Object::kind` say `inst` and `obj`, not `reduce`.
#[test]
fn inst_and_obj_records_keep_their_kind() {
    let policy = Policy::from_toml_str(
        "name = \"p\"\n[[global]]\nmodule = \"m\"\nname = \"C\"\nconstructor = \"record\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let global = "{\"type\":\"global\",\"module\":\"m\",\"name\":\"C\"}";
    for (data, kind, args) in [
        (&b"(im\nC\n."[..], "inst", "[]"),
        (
            b"(I1\nim\nC\n.",
            "inst",
            "[{\"type\":\"int\",\"value\":\"1\"}]",
        ),
        (b"(cm\nC\no.", "obj", "[]"),
        (
            b"(cm\nC\nI1\no.",
            "obj",
            "[{\"type\":\"int\",\"value\":\"1\"}]",
        ),
        (b"cm\nC\n)R.", "reduce", "[]"),
    ] {
        let doc = decode(data, &policy);
        match root(&doc).1 {
            Value::Object(o) => assert_eq!(o.kind.name(), kind),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            to_typed_json(&doc),
            format!(
                "{FMT}{{\"type\":\"object\",\"kind\":\"{kind}\",\"callable\":{global},\
                 \"args\":{{\"type\":\"tuple\",\"items\":{args}}}}}}}"
            ),
        );
    }
    // The policy's `inst` form covers both.
    let no_inst = Policy::from_toml_str(
        "name = \"p\"\n[[global]]\nmodule = \"m\"\nname = \"C\"\nconstructor = \"record\"\nforms = [\"reduce\"]\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for data in [&b"(im\nC\n."[..], b"(cm\nC\no."] {
        assert_eq!(refusal(data, &no_inst).kind().name(), "form_not_allowed");
    }
}

/// Bytes after STOP: refused by default; with `allow_trailing` (files padded or ending in a
/// newline, as numpy payloads from Python 2 do) decoded, and what was left reported: its
/// offset and length, in the document, the scan report and typed JSON. CPython's
/// `pickle.loads` ignores them.
#[test]
fn trailing_data_is_refused_unless_allowed_and_then_reported() {
    let data = py(r#"
d = pickle.dumps([1], protocol=2) + b"\n\x00\x00"
assert pickle.loads(d) == [1]
print(d.hex())
"#);
    let policy = Policy::data();
    let stop = data.len() as u64 - 3;
    let e = refusal(&data, &policy);
    assert_eq!((e.kind().name(), e.offset()), ("trailing_data", stop));
    let doc = Decoder::new(&data, &policy)
        .allow_trailing(true)
        .decode()
        .unwrap_or_else(|e| panic!("{e}"));
    let t = doc.trailing().unwrap_or_else(|| panic!("no trailing"));
    assert_eq!((t.offset, t.len), (stop, 3));
    let json = to_typed_json(&doc);
    assert!(
        json.ends_with(&format!(
            ",\"trailing\":{{\"offset\":{stop},\"length\":3}}}}"
        )),
        "{json}"
    );
    // Without trailing bytes, nothing is reported.
    let clean = data.get(..data.len() - 3).unwrap();
    let doc = Decoder::new(clean, &policy)
        .allow_trailing(true)
        .decode()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(doc.trailing().is_none());
    assert!(!to_typed_json(&doc).contains("trailing"));
    // The scan alike.
    let report = picklewarden::Scanner::new(&data, &policy)
        .allow_trailing(true)
        .run();
    assert!(report.result.is_ok());
    assert_eq!(report.trailing.map(|t| (t.offset, t.len)), Some((stop, 3)));
    let report = picklewarden::Scanner::new(&data, &policy).run();
    assert_eq!(report.result.unwrap_err().kind().name(), "trailing_data");
    // With the report (scan first), too.
    let (doc, report) = Decoder::new(&data, &policy)
        .allow_trailing(true)
        .decode_and_report(picklewarden::Pickles::One);
    assert!(report.result.is_ok());
    assert_eq!(doc.unwrap().trailing().map(|t| t.len), Some(3));
}

/// A callable that is not a global (REDUCE, NEWOBJ or OBJ on the object a call made, as dill
/// writes `dill._dill._load_type('set')(...)`): CPython calls it, picklewarden never calls
/// what a call returned, so it is a policy refusal (`callable_not_allowed`), in the scan and
/// the build alike; a value that cannot be called in CPython either (a list) stays a
/// `type_mismatch`.
#[test]
fn a_callable_made_by_a_call_is_a_policy_refusal() {
    // getattr(str, 'upper')('a'), at protocol 0: CPython gives 'A'.
    let data = py(r#"
d = b"c__builtin__\ngetattr\n(c__builtin__\nstr\nVupper\ntR(Va\ntR."
assert pickle.loads(d) == "A"
print(d.hex())
"#);
    let policy = Policy::from_toml_str(
        "name = \"p\"\n[[global]]\nmodule = \"__builtin__\"\nname = \"getattr\"\nconstructor = \"record\"\n\
         [[global]]\nmodule = \"__builtin__\"\nname = \"str\"\nconstructor = \"record\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let reduce_at = data.len() as u64 - 2;
    // NEWOBJ on it (protocol 2), and OBJ (protocol 1) with it as the class.
    let mut newobj = b"\x80\x02".to_vec();
    newobj.extend_from_slice(data.get(..data.len() - 7).unwrap());
    newobj.extend_from_slice(b")\x81.");
    let mut obj = b"(".to_vec();
    obj.extend_from_slice(data.get(..data.len() - 7).unwrap());
    obj.extend_from_slice(b"o.");
    for (input, at) in [
        (&data[..], reduce_at),
        (&newobj[..], newobj.len() as u64 - 2),
        (&obj[..], obj.len() as u64 - 2),
    ] {
        let e = refusal(input, &policy);
        assert_eq!(e.kind().name(), "callable_not_allowed", "{e}");
        assert_eq!(e.category(), picklewarden::Category::PolicyDenied);
        assert_eq!(e.offset(), at, "{e}");
        assert!(e.to_string().contains("policy \"p\""), "{e}");
        let careful = Decoder::new(input, &policy).careful_only().decode();
        assert_eq!(careful.unwrap_err().kind().name(), "callable_not_allowed");
        let scanned = picklewarden::scan(input, &policy).result.unwrap_err();
        assert_eq!(
            (scanned.kind().name(), scanned.offset()),
            ("callable_not_allowed", at)
        );
    }
    // A list is no callable in CPython either.
    let list = b"]\x94)R.";
    assert_eq!(refusal(list, &policy).kind().name(), "type_mismatch");
}
