//! The machine's fast loop (src/build/fast.rs `Machine::fast`) against its careful path
//! (`Decoder::careful_only`, every opcode one at a time with every check), on real input:
//! pickles CPython writes at every protocol of the small objects the fast loop is built for
//! (nested dicts, lists, tuples, sets and frozensets of ints, floats, texts, bytes and
//! singletons, shared and self-referencing containers), one pickle and a stream.
//!
//! The two must decode to the same typed JSON, and charge and count exactly alike: for every
//! limit, the smallest value the careful path accepts (found by bisection) is the smallest the
//! fast loop accepts, and one less is refused by both with the same error at the same offset.
//! A fast arm that skipped a charge, counted an opcode twice or left a height out would move
//! one of these thresholds.

// Test code: a failed invariant is a panic, by design (clippy.toml's allow-*-in-tests covers
// #[test] fns only, not the helpers and the shared module).
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

mod common;

use picklewarden::{Decoder, Error, LimitName, Limits, Policy};

/// Pickles of random small objects at protocols 0 to 5, one per line as `protocol hex`, and
/// a stream of three pickles at protocol 4 as `stream hex` (one Pickler, whose memo lasts
/// from pickle to pickle, as an Unpickler's does).
fn pickles() -> Vec<(String, Vec<u8>)> {
    let out = common::python(
        r#"
import pickle, random
rnd = random.Random(6)
KEYS = ["id", "name", "value", "tags", "k%d", "été", "x" * 20, "a much longer key of text"]
def value(depth):
    r = rnd.random()
    if depth < 4 and r < 0.35:
        kind = rnd.randrange(7)
        n = rnd.randrange(0, 7)
        if kind == 0:
            return {rnd.choice(KEYS): value(depth + 1) for _ in range(n)}
        if kind == 1:
            return [value(depth + 1) for _ in range(n)]
        if kind == 2:
            return tuple(value(depth + 1) for _ in range(rnd.choice([0, 1, 2, 3, n])))
        if kind == 3:
            return {rnd.randrange(-5, 300) for _ in range(n)}
        if kind == 4:
            return frozenset(rnd.choice(KEYS) for _ in range(n))
        if kind == 5:
            return {rnd.randrange(-3, 3): value(depth + 1) for _ in range(n)}
        return [rnd.randrange(1 << 70) for _ in range(n)] + [rnd.randrange(256) for _ in range(20)]
    r = rnd.random()
    if r < 0.2:
        return rnd.randrange(-1000, 100000)
    if r < 0.3:
        return rnd.randrange(-(1 << 40), 1 << 40)
    if r < 0.4:
        return rnd.random() * 1e6 - 5e5
    if r < 0.6:
        return rnd.choice(KEYS) + str(rnd.randrange(100))
    if r < 0.7:
        return rnd.randbytes(rnd.randrange(0, 24))
    return rnd.choice([None, True, False, "", b"", (), 0, -1])
shared = [1, 2, "three"]
loop = []
loop.append(loop)
records = [value(0) for _ in range(400)] + [shared, {"a": shared, "b": (shared, shared)}, loop]
for p in range(6):
    print(p, pickle.dumps(records, p).hex())
import io
buf = io.BytesIO()
pickler = pickle.Pickler(buf, 4)
for i in range(3):
    pickler.dump(records[i::3])
print("stream", buf.getvalue().hex())
"#,
        &[],
    );
    out.lines()
        .map(|line| {
            let (label, hex) = line.split_once(' ').unwrap();
            (label.to_owned(), common::hex_decode(hex))
        })
        .collect()
}

fn decode(
    data: &[u8],
    policy: &Policy,
    limits: Limits,
    stream: bool,
    careful: bool,
) -> Result<String, Error> {
    let mut d = Decoder::new(data, policy).limits(limits);
    if careful {
        d = d.careful_only();
    }
    let doc = if stream {
        d.decode_stream()
    } else {
        d.decode()
    }?;
    Ok(picklewarden::json::to_typed_json(&doc))
}

/// The outcome of both paths under `limit` = `value`: `Ok(accepted)` when they agree.
fn agree(
    label: &str,
    data: &[u8],
    policy: &Policy,
    stream: bool,
    limit: LimitName,
    value: u64,
) -> bool {
    let mut limits = policy.limits;
    limits.set(limit, value);
    let fast = decode(data, policy, limits, stream, false);
    let careful = decode(data, policy, limits, stream, true);
    match (&fast, &careful) {
        (Ok(a), Ok(b)) => {
            assert!(
                a == b,
                "{label}: {limit}={value}: the two paths decode differently"
            );
            true
        }
        (Err(a), Err(b)) => {
            assert_eq!(
                (a.kind(), a.offset()),
                (b.kind(), b.offset()),
                "{label}: {limit}={value}: fast refused with {a}, careful with {b}"
            );
            false
        }
        _ => panic!(
            "{label}: {limit}={value}: fast {:?}, careful {:?}",
            fast.as_ref().err(),
            careful.as_ref().err()
        ),
    }
}

#[test]
fn fast_loop_decodes_counts_and_charges_as_the_careful_path() {
    let policy = Policy::data();
    let all = pickles();
    assert_eq!(all.len(), 7);
    for (label, data) in &all {
        let stream = label == "stream";
        // Accepted under the policy's own limits, alike.
        assert!(
            agree(
                label,
                data,
                &policy,
                stream,
                LimitName::MaxOpcodes,
                u64::MAX
            ),
            "{label}: refused under the data policy"
        );
        for limit in LimitName::ALL {
            if matches!(limit, LimitName::MaxInputBytes) {
                continue;
            }
            // The smallest accepted value: bisection between a refused `lo` and an accepted
            // `hi`, each step checking that the two paths agree.
            let (mut lo, mut hi) = (0u64, policy.limits.get(limit));
            if agree(label, data, &policy, stream, limit, lo) {
                continue;
            }
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if agree(label, data, &policy, stream, limit, mid) {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            assert_eq!(lo + 1, hi, "{label}: {limit}");
        }
    }
}
