//! Dict keys that are equal across kinds merge as CPython merges them, on the small (linear)
//! and the indexed path: floats, complex numbers, bools and big ints equal to ints, tuples and
//! frozensets of them, tuples holding texts, and keys whose CPython hashes collide (which the
//! build's tables see as CPython's do). Pickles are written by python3 at test time, each
//! checked against `pickle.loads`.

// Test code: a failed invariant is a panic, by design.
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

mod common;

use picklewarden::{repr::to_repr, Decoder, ErrorKind, LimitName, Limits, Policy, Value};

/// `pairs(ps)`: a protocol-4 pickle of a dict filled by one SETITEMS from `(key bytes, value)`
/// pairs, so that equal keys meet in the pickle (a dict CPython pickles has none).
const PRELUDE: &str = r#"
import pickle, pickletools
M = 2**61 - 1
def frag(o):
    return pickletools.optimize(pickle.dumps(o, 3))[2:-1]
def pairs(ps):
    return b"\x80\x04}(" + b"".join(k + frag(v) for k, v in ps) + b"u."
def keyed(ps):
    return pairs([(frag(k), v) for k, v in ps])
def fs(*items):
    return b"(" + b"".join(frag(i) for i in items) + b"\x91"
"#;

/// The hex of each pickle and what CPython makes of it: its repr, or for frozenset keys
/// (whose repr order is the set's) the dict's length and values.
const CASES: &str = r#"
cases = []
nums = [(i, i) for i in range(30)] + [(float(i), -i) for i in range(0, 30, 4)] + [
    (True, "T"), (complex(2, 0), "c"), (1 << 70, "b"), (float(1 << 70), "bf"),
    (-(1 << 70), "nb"), (M, "m"), (2 * M, "m2"), (float(2**53), "f53"), (2**53, "i53"),
    (-0.0, "z"), (0.5, "h"), (complex(0.5, 0), "h2"), (float("inf"), "inf"),
]
tuples = [((i, i + 1), i) for i in range(30)] + [((float(i), i + 1.0), "f") for i in range(0, 30, 5)] + [
    ((True, 2), "T"), (((1, 2), (3,)), "n"), (((1.0, 2), (3.0,)), "n2"), ((1, "a"), "s"),
    ((1.0, "a"), "s2"), ((M, "x"), "mx"), ((2 * M, "x"), "m2x"), ((M, "x"), "mx2"),
    ((1 << 70, None), "bn"), ((float(1 << 70), None), "bn2"), ((), "e"), ((), "e2"),
]
for ps in (nums, nums[-14:], tuples, tuples[-12:]):
    data = keyed(ps)
    cases.append((data, repr(pickle.loads(data))))
fsk = [(fs(i, i + 1), i) for i in range(30)] + [(fs(float(i), i + 1.0), -i) for i in range(0, 30, 5)] + [
    (fs((M,), (2 * M,)), "a"), (fs((2 * M,), (M,)), "b"), (fs((M,), (3 * M,)), "c"),
    (fs(M, 2 * M, 1.5), "d"), (fs(1.5, 2 * M, float(M)), "e"), (fs(), "f"), (fs(), "g"),
]
for ps in (fsk, fsk[-7:]):
    data = pairs(ps)
    d = pickle.loads(data)
    cases.append((data, f"{len(d)} {list(d.values())!r}"))
for data, want in cases:
    print(data.hex())
    print(want)
"#;

/// With the default limits (the indexes keyed by CPython's hash) and with the model's limits
/// lifted (the indexes keyed by the content hash: src/build/keys/index.rs).
#[test]
fn equal_keys_merge_as_in_cpython() {
    let mut lifted = Limits::default();
    lifted.max_key_collisions = u64::MAX;
    lifted.max_key_steps = u64::MAX;
    lifted.max_key_steps_per_byte = u64::MAX;
    let out = common::python(&format!("{PRELUDE}\n{CASES}"), &[]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 12);
    let policy = Policy::data();
    for (limits, (n, pair)) in [Limits::default(), lifted]
        .into_iter()
        .flat_map(|l| lines.chunks(2).enumerate().map(move |c| (l, c)))
    {
        let data = common::hex_decode(pair[0]);
        let doc = Decoder::new(&data, &policy)
            .limits(limits)
            .decode()
            .unwrap_or_else(|e| panic!("case {n} refused: {e}"));
        let got = if n < 4 {
            to_repr(&doc).trim_end().to_string()
        } else {
            let root = doc.root().unwrap();
            let Some(Value::Dict(d)) = doc.get(root) else {
                panic!("case {n}: not a dict");
            };
            let values: Vec<String> = d
                .iter()
                .map(|&(_, v)| match doc.get(v) {
                    Some(Value::Int(i)) => i.to_string(),
                    Some(Value::Str(s)) => format!("'{}'", String::from_utf8_lossy(s.as_bytes())),
                    other => panic!("case {n}: value {other:?}"),
                })
                .collect();
            format!("{} [{}]", d.len(), values.join(", "))
        };
        assert_eq!(got, pair[1], "case {n}");
    }
}

/// Tuples that differ only in items whose CPython hashes collide, beside an equal text
/// (`(k * (2**61 - 1), 'x')`), share one CPython hash (the text's hash is random but one
/// for the process): more than `max_key_collisions` of them in one dict are refused, on
/// both paths, and as many as the limit are not.
#[test]
fn tuples_colliding_beside_a_text_are_counted() {
    let out = common::python(
        &format!(
            "{PRELUDE}\nfor n in (32, 33, 40):\n    print(keyed([((k * M, 'x'), k) for k in range(1, n + 1)]).hex())\n"
        ),
        &[],
    );
    let lines: Vec<&str> = out.lines().collect();
    let policy = Policy::data();
    let ok = common::hex_decode(lines[0]);
    assert!(Decoder::new(&ok, &policy).decode().is_ok());
    for line in &lines[1..] {
        let data = common::hex_decode(line);
        let e = Decoder::new(&data, &policy).decode().err().unwrap();
        assert!(
            matches!(
                e.kind(),
                ErrorKind::LimitExceeded {
                    limit: LimitName::MaxKeyCollisions,
                    ..
                }
            ),
            "{e}"
        );
    }
}

/// SETITEM one key at a time into a small dict that holds it already (the value replaced in
/// place when every key before it is an int or a short text), or holds a key of another kind
/// equal to it (a float, a bool: the key kept, the value replaced), as CPython does.
#[test]
fn setitem_again_replaces_the_value_as_in_cpython() {
    let out = common::python(
        &format!(
            "{PRELUDE}\n{}",
            r#"
def again(first, then):
    return (b"\x80\x04}(" + b"".join(frag(k) + frag(v) for k, v in first) + b"u"
            + b"".join(frag(k) + frag(v) + b"s" for k, v in then) + b".")
cases = [
    again([(1, "a"), ("k", "b"), (2**40, "c")], [(1, "x"), ("k", "y"), (1, "z"), (2**40, "w"), (3, "n")]),
    again([(1.0, "a"), (True, "b"), ("k", "c")], [(1, "x"), ("k", "y"), (0, "z"), (False, "f")]),
    again([("k" * 100, "a"), ("s", "b")], [("k" * 100, "x"), ("s", "y")]),
    again([(i, i) for i in range(16)], [(i, -i) for i in range(0, 18, 3)]),
    again([((1, 2), "t"), (1, "a")], [(1, "x"), ((1.0, 2.0), "u")]),
]
for data in cases:
    print(data.hex())
    print(repr(pickle.loads(data)))
"#
        ),
        &[],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 10);
    let policy = Policy::data();
    for (n, pair) in lines.chunks(2).enumerate() {
        let data = common::hex_decode(pair[0]);
        let doc = Decoder::new(&data, &policy)
            .decode()
            .unwrap_or_else(|e| panic!("case {n} refused: {e}"));
        assert_eq!(to_repr(&doc).trim_end(), pair[1], "case {n}");
    }
}

/// Tuples that hold one NaN through the memo (CPython hashes a NaN by address, so one NaN
/// object gives the tuples one hash) beside ints whose hashes collide (`(t, k * (2**61 - 1))`,
/// `t = (nan,)`): more than `max_key_collisions` of them in one dict are refused, as for any
/// keys sharing a CPython hash, and as many as the limit are kept apart, as CPython keeps
/// them.
#[test]
fn tuples_sharing_a_nan_are_counted() {
    let out = common::python(
        &format!(
            "{PRELUDE}\nt = (float('nan'),)\nfor n in (32, 33, 40):\n    d = {{(t, k * M): k for k in range(1, n + 1)}}\n    print(pickle.dumps(d, 4).hex())\n"
        ),
        &[],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3);
    let policy = Policy::data();
    let ok = common::hex_decode(lines[0]);
    let doc = Decoder::new(&ok, &policy).decode().unwrap();
    let Some(Value::Dict(d)) = doc.get(doc.root().unwrap()) else {
        panic!("not a dict");
    };
    assert_eq!(d.len(), 32);
    for line in &lines[1..] {
        let data = common::hex_decode(line);
        let e = Decoder::new(&data, &policy).decode().err().unwrap();
        assert!(
            matches!(
                e.kind(),
                ErrorKind::LimitExceeded {
                    limit: LimitName::MaxKeyCollisions,
                    ..
                }
            ),
            "{e}"
        );
    }
}

/// Keys sharing CPython's hash 0 (`k * (2**61 - 1)`) that arrive after a dict has its index
/// (past its first 16 keys): the index counts them for the model, which refuses the
/// `max_key_collisions + 1`st and keeps as many as the limit; with the model's limits lifted,
/// the index is keyed by the content hash and keeps all of them, as CPython does.
#[test]
fn colliding_keys_past_the_small_form_are_counted_by_the_index() {
    let out = common::python(
        &format!(
            "{PRELUDE}\nfor n in (32, 33, 40):\n    print(keyed([(i, i) for i in range(1, 21)] + [(k * M, k) for k in range(1, n + 1)]).hex())\n"
        ),
        &[],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3);
    let policy = Policy::data();
    let len = |data: &[u8], limits: Limits| -> Result<usize, picklewarden::Error> {
        let doc = Decoder::new(data, &policy).limits(limits).decode()?;
        match doc.get(doc.root().unwrap()) {
            Some(Value::Dict(d)) => Ok(d.len()),
            other => panic!("not a dict: {other:?}"),
        }
    };
    let ok = common::hex_decode(lines[0]);
    assert_eq!(len(&ok, Limits::default()).unwrap(), 52);
    for line in &lines[1..] {
        let data = common::hex_decode(line);
        let e = len(&data, Limits::default()).err().unwrap();
        assert!(
            matches!(
                e.kind(),
                ErrorKind::LimitExceeded {
                    limit: LimitName::MaxKeyCollisions,
                    seen: 33,
                    ..
                }
            ),
            "{e}"
        );
    }
    let mut lifted = Limits::default();
    lifted.max_key_collisions = u64::MAX;
    lifted.max_key_steps = u64::MAX;
    lifted.max_key_steps_per_byte = u64::MAX;
    let all = common::hex_decode(lines[2]);
    assert_eq!(len(&all, lifted).unwrap(), 60);
}

/// Plain data that collides in CPython: `hash(-1) == hash(-2)`, so the points of a grid of
/// small ints holding -1 and -2 share one hash 2**d at a time in d dimensions. A set of the
/// points of `range(-4, 4)` in 1 to 5 dimensions (classes of up to 32) is accepted and equal
/// to `pickle.loads`' (as many points, the same sum of coordinates); in 6 dimensions (a class
/// of 64) the 33rd key of the class is refused by `max_key_collisions`, and the set is
/// accepted once the limit is 64.
#[test]
fn grid_points_colliding_through_minus_one_are_accepted_up_to_the_cap() {
    let out = common::python(
        r#"
import itertools, pickle
for d in range(1, 7):
    axis = range(-4, 4) if d < 6 else (-1, -2, 0)
    pts = set(itertools.product(axis, repeat=d))
    data = pickle.dumps(pts, 4)
    got = pickle.loads(data)
    assert len({hash(p) for p in got if all(x in (-1, -2) for x in p)}) == 1
    print(data.hex(), len(got), sum(map(sum, got)))
"#,
        &[],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6);
    let policy = Policy::data();
    for (d, line) in (1..).zip(&lines) {
        let f: Vec<&str> = line.split(' ').collect();
        let data = common::hex_decode(f[0]);
        let want: (usize, i64) = (f[1].parse().unwrap(), f[2].parse().unwrap());
        let decode = |limits: Limits| -> Result<(usize, i64), picklewarden::Error> {
            let doc = Decoder::new(&data, &policy).limits(limits).decode()?;
            let Some(Value::Set(items)) = doc.get(doc.root().unwrap()) else {
                panic!("d={d}: not a set");
            };
            let mut sum = 0i64;
            for &t in items {
                let Some(Value::Tuple(xs)) = doc.get(t) else {
                    panic!("d={d}: not a tuple");
                };
                assert_eq!(xs.len(), d, "d={d}");
                for &x in xs {
                    let Some(Value::Int(i)) = doc.get(x) else {
                        panic!("d={d}: not an int");
                    };
                    sum += i;
                }
            }
            Ok((items.len(), sum))
        };
        if d < 6 {
            assert_eq!(decode(Limits::default()).unwrap(), want, "d={d}");
        } else {
            let e = decode(Limits::default()).err().unwrap();
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::LimitExceeded {
                        limit: LimitName::MaxKeyCollisions,
                        seen: 33,
                        ..
                    }
                ),
                "{e}"
            );
            let mut wider = Limits::default();
            wider.max_key_collisions = 64;
            assert_eq!(decode(wider).unwrap(), want, "d={d}");
        }
    }
}
