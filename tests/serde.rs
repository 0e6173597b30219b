//! serde (`picklewarden::from_slice`, `from_document`, `Serialize` for a document) against
//! CPython's `pickle.loads`: the good corpus into `serde_json::Value` and into typed structs,
//! the hostile corpus refused with the kinds `decode` gives, ints of every width, and the
//! shared-value visit budget at N-1, N and N+1.

#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::type_complexity
)]

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use common::{good_corpus, good_policies, python, python_hex, repo};
use picklewarden::de::{DeError, Deserializer, Record};
use picklewarden::{decode, from_document, from_slice, from_slice_with, DecodeOptions, Policy};
use serde::de::{DeserializeOwned, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value as Json;

/// Prints, for each file named, one JSON line: `{"file", "value"}` with the value
/// `pickle.loads` gives in the form a `serde_json::Value` takes through picklewarden's serde
/// data model, or `{"file", "unrepresentable": why}` where serde_json cannot hold it (bytes, a
/// dict key that is not a str, an int past 64 bits, a str with lone surrogates, a cycle).
/// Floats are `{"$f64": bits}` and sets `{"$set": [...]}` (their order is Python's hash order,
/// compared as a multiset).
const AS_JSON_PY: &str = r#"
import json, math, pickle, struct, sys
class Unrep(Exception):
    pass
def conv(v, path):
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        if -2**63 <= v < 2**64:
            return v
        raise Unrep("int past 64 bits")
    if isinstance(v, float):
        return None if not math.isfinite(v) else {"$f64": struct.unpack("<Q", struct.pack("<d", v))[0]}
    if isinstance(v, complex):
        return [conv(v.real, path), conv(v.imag, path)]
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise Unrep("surrogates")
        return v
    if isinstance(v, (bytes, bytearray)):
        raise Unrep("bytes")
    if id(v) in path:
        raise Unrep("cycle")
    path = path | {id(v)}
    if isinstance(v, (list, tuple)):
        return [conv(x, path) for x in v]
    if isinstance(v, (set, frozenset)):
        return {"$set": [conv(x, path) for x in v]}
    if isinstance(v, dict):
        if not all(type(k) is str for k in v):
            raise Unrep("a key that is not a str")
        return {conv(k, path): conv(x, path) for k, x in v.items()}
    raise Unrep(type(v).__name__)
def depth(v):
    return 1 + max(map(depth, v), default=0) if isinstance(v, list) else 0
for p in sys.argv[1:]:
    v = pickle.loads(open(p, "rb").read())
    try:
        c = conv(v, frozenset())
    except Unrep as e:
        print(json.dumps({"file": p, "unrepresentable": str(e)}))
        continue
    # serde_json's parser stops at 128 levels: a deeper value is compared as its text.
    if depth(c) > 100:
        print(json.dumps({"file": p, "deep_text": json.dumps(c, separators=(",", ":"))}))
    else:
        print(json.dumps({"file": p, "value": c}))
"#;

/// Whether `actual` (from picklewarden) is the value `expected` (from [`AS_JSON_PY`]) stands for.
fn same(expected: &Json, actual: &Json) -> bool {
    match (expected, actual) {
        (Json::Object(e), a) if e.len() == 1 && e.contains_key("$f64") => {
            let bits = e["$f64"].as_u64().unwrap();
            a.as_f64().is_some_and(|x| x.to_bits() == bits)
        }
        (Json::Object(e), Json::Array(a)) if e.len() == 1 && e.contains_key("$set") => {
            let items = e["$set"].as_array().unwrap();
            let mut used = vec![false; a.len()];
            items.len() == a.len()
                && items.iter().all(|x| {
                    let hit = (0..a.len()).find(|&i| !used[i] && same(x, &a[i]));
                    hit.map(|i| used[i] = true).is_some()
                })
        }
        (Json::Array(e), Json::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(x, y)| same(x, y))
        }
        (Json::Object(e), Json::Object(a)) => {
            e.len() == a.len() && e.iter().all(|(k, x)| a.get(k).is_some_and(|y| same(x, y)))
        }
        _ => expected == actual,
    }
}

#[test]
fn good_corpus_into_serde_json_value_equals_pickle_loads() {
    let files: Vec<_> = good_corpus()
        .into_iter()
        .filter(|f| !f.records && !f.stream)
        .collect();
    let paths: Vec<String> = files
        .iter()
        .map(|f| f.path.to_string_lossy().into_owned())
        .collect();
    let args: Vec<&str> = paths.iter().map(String::as_str).collect();
    let lines = python(AS_JSON_PY, &args);
    let policy = Policy::data();
    let (mut equal, mut unrep) = (0, 0);
    let mut failures = Vec::new();
    for line in lines.lines() {
        let oracle: Json = serde_json::from_str(line).unwrap();
        let file = oracle["file"].as_str().unwrap();
        let bytes = std::fs::read(file).unwrap();
        let ours = from_slice::<Json>(&bytes, &policy);
        // Serialize agrees with Deserialize.
        let doc = decode(&bytes, &policy).unwrap();
        let serialized = serde_json::to_value(&doc);
        if let Some(text) = oracle.get("deep_text").and_then(Json::as_str) {
            let ours = ours.as_ref().map(|v| serde_json::to_string(v).unwrap());
            assert_eq!(ours.as_deref().ok(), Some(text), "{file}");
            equal += 1;
            continue;
        }
        match (&oracle.get("value"), &ours) {
            (Some(v), Ok(a)) if same(v, a) => {
                equal += 1;
                assert_eq!(serialized.as_ref().ok(), Some(a), "{file}: Serialize");
            }
            // serde_json writes bytes as a list of ints, where its Value refuses bytes: the
            // two sides agree only on what a Value holds.
            (None, Err(e)) if !matches!(e, DeError::Decode(_)) => unrep += 1,
            _ => failures.push(format!("{file}: oracle {oracle} ours {ours:?}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(equal + unrep, files.len());
    assert!(
        equal > 900,
        "only {equal} files compared equal ({unrep} unrepresentable)"
    );
    assert!(unrep > 50, "only {unrep} unrepresentable");
}

/// `pickle.loads(FILE)` as plain JSON for typed targets: tuples and sets as lists, bytes as
/// lists of ints, complex as `[re, im]`, a record as `{"module", "name", "state"}` (its class
/// and its `__dict__` or `__getstate__()`).
const AS_PLAIN_JSON_PY: &str = r#"
import json, pickle, sys
sys.path.insert(0, "tests/python")
path = set()
def conv(v):
    if id(v) in path:
        return None
    if isinstance(v, (list, tuple, set, frozenset)):
        path.add(id(v))
        out = [conv(x) for x in v]
        path.discard(id(v))
        return out
    if isinstance(v, (bytes, bytearray)):
        return list(v)
    if isinstance(v, complex):
        return [v.real, v.imag]
    if isinstance(v, dict):
        return {k: conv(x) for k, x in v.items() if isinstance(k, (str, int))}
    if isinstance(v, float) and v != v or v in (float("inf"), float("-inf")):
        return None
    if isinstance(v, int) and not -2**63 <= v < 2**64:
        return str(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    state = v.__getstate__() if hasattr(type(v), "__getstate__") and type(v).__getstate__ is not object.__getstate__ else v.__dict__
    return {"module": type(v).__module__, "name": type(v).__qualname__, "args": [], "state": conv(state), **conv(v.__dict__)}
print(json.dumps(conv(pickle.loads(open(sys.argv[1], "rb").read()))))
"#;

/// Every protocol's file of corpus value `name`: `T` from picklewarden equals `T` from the
/// oracle's JSON of `pickle.loads`.
fn typed<T: DeserializeOwned + PartialEq + std::fmt::Debug>(name: &str, policy: &Policy) -> usize {
    let mut n = 0;
    for f in good_corpus() {
        if !f.name.starts_with(&format!("{name}.p")) {
            continue;
        }
        let json = python(AS_PLAIN_JSON_PY, &[&f.path.to_string_lossy()]);
        let want: T =
            serde_json::from_str(&json).unwrap_or_else(|e| panic!("{}: {e}\n{json}", f.name));
        let bytes = std::fs::read(&f.path).unwrap();
        let got: T = from_slice(&bytes, policy).unwrap_or_else(|e| panic!("{}: {e}", f.name));
        assert_eq!(got, want, "{}", f.name);
        n += 1;
    }
    assert!(n >= 6, "{name}: {n} files");
    n
}

#[derive(Debug, PartialEq, Deserialize)]
struct DictSmall {
    a: i64,
    b: (u8, u16),
    c: HashMap<String, Option<u32>>,
}

#[derive(Debug, PartialEq, Deserialize)]
struct Nested {
    list: (i32, (i64, (u8, BTreeMap<String, [u8; 2]>))),
    tuple: (Vec<String>, HashMap<String, bool>, HashSet<i8>),
    n: Option<u8>,
}

/// mixed_bag's fields that a struct can hold; the others (a str with a lone surrogate, a
/// recursive list, a dict with tuple and bytes keys) are not fields, so they are skipped
/// unvisited.
#[derive(Debug, PartialEq, Deserialize)]
struct MixedBag {
    none: Option<String>,
    bools: Vec<bool>,
    // The last, -2**100, is checked by ints_of_every_width_with_range_checks (i128); the
    // oracle's JSON has no such int.
    ints: (u8, i8, u8, u64, IgnoredAny),
    bytes: Vec<u8>,
    bytearray: Vec<u8>,
    tuple: (u8, (u8, u8)),
    set: BTreeSet<u8>,
    frozenset: BTreeSet<String>,
    complex: (f64, f64),
    shared: Vec<Vec<Json>>,
    empty: (
        Vec<u8>,
        Vec<u8>,
        HashMap<String, u8>,
        Vec<u8>,
        Vec<u8>,
        String,
        Vec<u8>,
    ),
}

#[test]
fn good_corpus_into_typed_structs_equals_pickle_loads() {
    let data = Policy::data();
    typed::<DictSmall>("dict_small", &data);
    typed::<Nested>("nested", &data);
    typed::<MixedBag>("mixed_bag", &data);
    typed::<(Vec<u8>, (Vec<u8>,), (u8, (u8, (u8, (u8,)))))>("tuple_nested", &data);
    typed::<BTreeMap<i64, String>>("dict_1000", &data);
    typed::<HashSet<String>>("set_1500_str", &data);
    typed::<Vec<u8>>("bytes_all256", &data);
    typed::<Vec<u8>>("bytearray_300", &data);
    typed::<String>("str_astral_mix", &data);
}

#[derive(Debug, PartialEq, Deserialize)]
struct Point {
    x: i64,
    y: i64,
}

#[derive(Debug, PartialEq, Deserialize)]
struct Shape {
    module: String,
    name: String,
    x: i64,
}

#[test]
fn records_into_structs_and_the_record_wrapper() {
    let files = good_corpus();
    let (_, records) = good_policies(&files);
    // A plain class: a struct reads its __dict__ (the record's BUILD state), at every protocol.
    typed::<Point>("record_point", &records);
    for f in files
        .iter()
        .filter(|f| f.name.starts_with("record_point.p"))
    {
        let bytes = std::fs::read(&f.path).unwrap();
        // The map form names the class (NEWOBJ at protocol 2 and up; copyreg's
        // _reconstructor below).
        let m: BTreeMap<String, Json> = from_slice(&bytes, &records).unwrap();
        assert_eq!(
            m["state"],
            serde_json::json!({"x": 1, "y": 2}),
            "{}",
            f.name
        );
        if f.name.contains(".p2.") || f.name.contains(".p4.") {
            assert_eq!(m["module"], "recordtypes");
            assert_eq!(m["name"], "Point");
            let r: Record<Vec<Json>, Point> = from_slice(&bytes, &records).unwrap();
            assert_eq!(
                (r.module.as_str(), r.name.as_str(), r.args.len(), r.state),
                ("recordtypes", "Point", 0, Some(Point { x: 1, y: 2 }))
            );
        }
    }
    // __getstate__ giving a tuple: the state as a typed tuple, through the wrapper.
    for f in files
        .iter()
        .filter(|f| f.name.starts_with("record_withstate.p4"))
    {
        let bytes = std::fs::read(&f.path).unwrap();
        let r: Record<IgnoredAny, (Vec<i32>, BTreeMap<String, u8>)> =
            from_slice(&bytes, &records).unwrap();
        assert_eq!(r.name, "WithState");
        assert_eq!(
            r.state,
            Some((vec![1], BTreeMap::from([("two".to_owned(), 2)])))
        );
    }
    // A record holding itself is a cycle.
    let f = files
        .iter()
        .find(|f| f.name.starts_with("record_recursive.p4"))
        .unwrap();
    let e = from_slice::<Json>(&std::fs::read(&f.path).unwrap(), &records).unwrap_err();
    assert!(matches!(e, DeError::Cycle { .. }), "{e:?}");
}

#[test]
fn ints_of_every_width_with_range_checks() {
    let mut checked = 0;
    for f in good_corpus() {
        if !(f.name.starts_with("int_") && f.name.contains(".p")) {
            continue;
        }
        let text = python(
            "import pickle, sys; print(pickle.loads(open(sys.argv[1], 'rb').read()))",
            &[&f.path.to_string_lossy()],
        );
        let want: Option<i128> = text.trim().parse().ok();
        let bytes = std::fs::read(&f.path).unwrap();
        let policy = Policy::data();
        macro_rules! width {
            ($($t:ty),*) => {$(
                let got = from_slice::<$t>(&bytes, &policy).ok().map(i128::try_from);
                let fits = want.and_then(|w| <$t>::try_from(w).ok());
                assert_eq!(got.map(Result::ok).flatten(), fits.map(|x| x as i128), "{} as {}", f.name, stringify!($t));
                assert_eq!(got.is_some(), fits.is_some(), "{} as {}", f.name, stringify!($t));
            )*};
        }
        width!(i8, i16, i32, i64, i128, u8, u16, u32, u64);
        let got = from_slice::<u128>(&bytes, &policy).ok();
        let fits = text.trim().parse::<u128>().ok();
        assert_eq!(got, fits, "{} as u128", f.name);
        if want.is_none() && fits.is_none() {
            let e = from_slice::<i128>(&bytes, &policy).unwrap_err();
            assert!(matches!(e, DeError::IntTooBig { .. }), "{}: {e:?}", f.name);
        }
        checked += 1;
    }
    assert!(checked > 150, "{checked} int files");
}

#[test]
fn hostile_corpus_is_refused_with_the_kinds_decode_gives() {
    let dir = repo().join("tests/corpus/hostile");
    let manifest = std::fs::read_to_string(dir.join("MANIFEST.tsv")).unwrap();
    let mut n = 0;
    for line in manifest.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let cols: Vec<&str> = line.split('\t').collect();
        let (file, kind, limit, policy, overrides) = (cols[0], cols[1], cols[2], cols[3], cols[4]);
        let policy = Policy::builtin(policy).unwrap();
        let mut limits = policy.limits;
        if overrides != "-" {
            for item in overrides.split(',') {
                limits.set_from_str(item.trim()).unwrap();
            }
        }
        let bytes = std::fs::read(dir.join(file)).unwrap();
        let options = DecodeOptions::default().limits(limits);
        let e = from_slice_with::<Json>(&bytes, &policy, &options).unwrap_err();
        let DeError::Decode(e) = e else {
            panic!("{file}: not refused by the decode: {e:?}");
        };
        assert_eq!(e.kind().name(), kind, "{file}: {e}");
        if limit != "-" {
            assert!(e.to_string().contains(limit), "{file}: {e}");
        }
        n += 1;
    }
    assert!(n >= 400, "{n} hostile files");
}

/// `t = (); t = (t, t)` `levels` times, pickled by CPython at protocol 4: `levels + 1` nodes,
/// `2**(levels + 1) - 1` values on the unfolded tree.
fn shared_dag(levels: u32) -> Vec<u8> {
    python_hex(&format!(
        "import pickle\nt = ()\nfor _ in range({levels}): t = (t, t)\nprint(pickle.dumps(t, 4).hex())"
    ))
}

/// Counts the values of a sequence tree without keeping any.
struct Count(u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Count, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Count;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a tuple")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
                let mut n = 1;
                while let Some(Count(k)) = seq.next_element()? {
                    n += k;
                }
                Ok(Count(n))
            }
        }
        d.deserialize_seq(V)
    }
}

#[test]
fn shared_values_are_visited_within_the_budget_at_n_minus_1_n_n_plus_1() {
    let policy = Policy::data();
    let bytes = shared_dag(10);
    let doc = decode(&bytes, &policy).unwrap();
    assert!(doc.len() <= 12, "{} nodes", doc.len());
    let n = (1 << 11) - 1;
    let at = |max: u64| {
        Deserializer::new(&doc)
            .max_visits(max)
            .deserialize::<Count>()
    };
    assert!(matches!(at(n - 1), Err(DeError::TooManyVisits { max }) if max == n - 1));
    assert_eq!(at(n).unwrap().0, n);
    assert_eq!(at(n + 1).unwrap().0, n);
    // Serialize counts the same way.
    let json = |max: u64| {
        serde_json::to_string(&picklewarden::ser::Serialized::document(&doc).max_visits(max))
    };
    assert!(json(n - 1)
        .unwrap_err()
        .to_string()
        .contains("values visited"));
    assert_eq!(json(n).unwrap().matches("[]").count(), 1 << 10);
    // 61 nodes, 2**61 - 1 values: refused after the budget (the default, 64 Mi, here a
    // smaller one to keep the test short).
    let big = shared_dag(60);
    let doc = decode(&big, &policy).unwrap();
    assert!(doc.len() <= 62, "{} nodes", doc.len());
    let e = Deserializer::new(&doc)
        .max_visits(100_000)
        .deserialize::<Count>();
    assert!(matches!(e, Err(DeError::TooManyVisits { max: 100_000 })));
    let e = serde_json::to_string(&doc).unwrap_err().to_string();
    assert!(e.contains("values visited"), "{e}");
    // IgnoredAny skips without visiting.
    assert!(from_document::<IgnoredAny>(&doc).is_ok());
}

#[test]
fn cycles_are_an_error_and_depth_is_bounded() {
    let policy = Policy::data();
    // a = []; a.append(a)
    let bytes = python_hex("import pickle\na = []\na.append(a)\nprint(pickle.dumps(a, 2).hex())");
    let e = from_slice::<Json>(&bytes, &policy).unwrap_err();
    assert!(matches!(e, DeError::Cycle { type_name: "list" }), "{e:?}");
    assert!(serde_json::to_string(&decode(&bytes, &policy).unwrap()).is_err());
    // 30 nested lists: the walk's own bound at 29, 30, 31.
    let deep = python_hex(
        "import pickle\nv = []\nfor _ in range(29): v = [v]\nprint(pickle.dumps(v, 2).hex())",
    );
    let doc = decode(&deep, &policy).unwrap();
    let at = |max: u64| Deserializer::new(&doc).max_depth(max).deserialize::<Json>();
    assert!(matches!(at(29), Err(DeError::TooDeep { max: 29 })));
    assert!(at(30).is_ok());
    assert!(at(31).is_ok());
}

#[derive(Debug, PartialEq, Deserialize)]
enum Shape2 {
    Empty,
    Circle(f64),
    Rect { w: u32, h: u32 },
    Pair(u8, u8),
}

#[test]
fn enums_options_and_borrowed_strs() {
    let policy = Policy::data();
    let bytes = python_hex(
        "import pickle\nprint(pickle.dumps(['Empty', {'Circle': 1.5}, {'Rect': {'w': 2, 'h': 3}}, {'Pair': (4, 5)}], 2).hex())",
    );
    let shapes: Vec<Shape2> = from_slice(&bytes, &policy).unwrap();
    assert_eq!(
        shapes,
        [
            Shape2::Empty,
            Shape2::Circle(1.5),
            Shape2::Rect { w: 2, h: 3 },
            Shape2::Pair(4, 5)
        ]
    );
    let bytes = python_hex("import pickle\nprint(pickle.dumps([None, 'abc', None], 2).hex())");
    let doc = decode(&bytes, &policy).unwrap();
    let v: Vec<Option<&str>> = from_document(&doc).unwrap();
    assert_eq!(v, [None, Some("abc"), None]);
    // A typed target refuses a value of another type with serde's message.
    let e = from_slice::<Vec<u8>>(
        &python_hex("import pickle\nprint(pickle.dumps(['x'], 2).hex())"),
        &policy,
    );
    assert!(matches!(e, Err(DeError::Message(m)) if m.contains("invalid type")));
    let _ = Shape {
        module: String::new(),
        name: String::new(),
        x: 0,
    };
}

/// Strs shared through the memo, more than the walk's cache of checked strs holds, and a str
/// with a lone surrogate among them: every place gets its own text, and the surrogate is
/// refused wherever it is reached, however often it was met before.
#[test]
fn shared_strs_past_the_walks_cache_keep_their_own_text() {
    // [s0, ..., s199, s199, ..., s0]: each str BINPUT once, then fetched again by BINGET.
    let mut p = b"\x80\x02]q\x00(".to_vec();
    let mut want = Vec::new();
    for i in 0u8..200 {
        let s = format!("s{i}");
        p.push(b'X');
        p.extend_from_slice(&(s.len() as u32).to_le_bytes());
        p.extend_from_slice(s.as_bytes());
        p.extend_from_slice(&[b'q', i.wrapping_add(1)]);
        want.push(s);
    }
    for i in (0u8..200).rev() {
        p.extend_from_slice(&[b'h', i.wrapping_add(1)]);
        want.push(format!("s{i}"));
    }
    p.extend_from_slice(b"e.");
    let got: Vec<String> = from_slice(&p, &Policy::data()).unwrap();
    assert_eq!(got, want);
    let borrowed = decode(&p, &Policy::data()).unwrap();
    let got: Vec<&str> = from_document(&borrowed).unwrap();
    assert_eq!(got, want);

    // ["a", "\ud800", "\ud800"]: the lone surrogate is refused at its first and every place.
    let p = b"\x80\x02]q\x00(X\x01\x00\x00\x00aX\x03\x00\x00\x00\xed\xa0\x80q\x01h\x01e.";
    let doc = decode(p, &Policy::data()).unwrap();
    assert!(matches!(
        from_document::<Vec<String>>(&doc),
        Err(DeError::Surrogates)
    ));
    assert!(matches!(
        from_document::<(String, IgnoredAny, String)>(&doc),
        Err(DeError::Surrogates)
    ));
}
