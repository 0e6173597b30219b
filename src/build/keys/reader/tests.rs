//! The CPython hash functions of the model against CPython itself (the `python3` on PATH, 3.8
//! or later, as every other oracle of the tests), and the model's counts on small documents.

use std::process::Command;

use num_bigint::BigInt;

use super::*;
use crate::{Decoder, ErrorKind, Policy};

/// Runs a Python program and returns its standard output.
fn python(program: &str) -> String {
    let out = Command::new("python3")
        .args(["-c", program])
        .output()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap_or_default()
}

/// `hash()` of ints, big ints, floats (subnormal, huge, negative zero, infinities) and complex
/// numbers, as CPython gives it (as a signed 64-bit number).
#[test]
fn number_hashes_are_cpythons() {
    let ints: Vec<i64> = vec![
        0,
        1,
        -1,
        -2,
        2,
        (1 << 61) - 1,
        (1 << 61) - 2,
        1 << 61,
        -(1 << 61) + 1,
        i64::MAX,
        i64::MIN,
        i64::MIN + 1,
        123_456_789_012_345,
        -987_654_321,
    ];
    let floats: Vec<f64> = vec![
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.0,
        1.5,
        1e300,
        -1e300,
        1e-300,
        5e-324,
        -5e-324,
        2.2250738585072014e-308,
        f64::MAX,
        f64::MIN_POSITIVE,
        f64::INFINITY,
        f64::NEG_INFINITY,
        2f64.powi(61),
        2f64.powi(122) * 3.0,
        0.1,
        -123.456,
        9007199254740993.0,
        1.0 / 3.0,
    ];
    let program = format!(
        "import struct\n\
         for i in {ints:?}: print(hash(i))\n\
         for b in {bits:?}: print(hash(struct.unpack('<d', b.to_bytes(8, 'little'))[0]))\n\
         for i in {ints:?}: print(hash(i * (2**64) + 12345), hash(-(i * 2**70) - 7))\n\
         for b in {bits:?}: x = struct.unpack('<d', b.to_bytes(8, 'little'))[0]; print(hash(complex(x, 1.5)), hash(complex(-2.0, x)))\n",
        bits = floats.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
    );
    let out = python(&program);
    let mut lines = out.lines();
    let mut next = || -> Vec<u64> {
        lines
            .next()
            .unwrap_or_default()
            .split(' ')
            .map(|t| t.parse::<i64>().unwrap_or_else(|e| panic!("{t}: {e}")) as u64)
            .collect()
    };
    for &i in &ints {
        assert_eq!(next(), vec![int_hash(i)], "hash({i})");
    }
    for &x in &floats {
        assert_eq!(next(), vec![float_hash(x).unwrap_or(0)], "hash({x:e})");
    }
    for &i in &ints {
        let a = BigInt::from(i) * (BigInt::from(1) << 64) + 12345;
        let b: BigInt = -(BigInt::from(i) << 70u32) - 7;
        assert_eq!(next(), vec![bigint_hash(&a), bigint_hash(&b)], "{i}");
    }
    for &x in &floats {
        let want = next();
        let got = vec![
            complex_hash(x, 1.5).unwrap_or(0),
            complex_hash(-2.0, x).unwrap_or(0),
        ];
        assert_eq!(want, got, "complex of {x:e}");
    }
    assert_eq!(float_hash(f64::NAN), None);
}

/// `hash(None)` is a constant from CPython 3.12 (the oracle's 3.11 hashes its address).
#[test]
fn none_hash_is_the_constant_of_cpython_3_12() {
    assert_eq!(HASH_NONE, 4_238_894_112);
}

/// Tuples (nested, empty) and frozensets (empty, nested, of tuples) hash as CPython's, from
/// the hashes of their items.
#[test]
fn tuple_and_frozenset_hashes_are_cpythons() {
    let out = python(
        "print(hash(()), hash((1,)), hash((1, 2)), hash((-1, 0.5, True)), hash(((1, 2), (3,))))\n\
         print(hash(frozenset()), hash(frozenset([1])), hash(frozenset([1, 2, 3])), hash(frozenset([(1, 2), frozenset([5])])))\n",
    );
    let mut lines = out.lines().map(|l| {
        l.split(' ')
            .map(|t| t.parse::<i64>().unwrap_or_else(|e| panic!("{t}: {e}")) as u64)
            .collect::<Vec<u64>>()
    });
    let tuple = |lanes: &[u64]| {
        let mut t = TupleHash::new();
        for &l in lanes {
            t.lane(l);
        }
        t.finish()
    };
    let t12 = tuple(&[1, 2]);
    let got = vec![
        tuple(&[]),
        tuple(&[1]),
        t12,
        tuple(&[int_hash(-1), float_hash(0.5).unwrap_or(0), 1]),
        tuple(&[t12, tuple(&[3])]),
    ];
    assert_eq!(lines.next(), Some(got));
    let f5 = frozenset_hash([5].into_iter());
    let got = vec![
        frozenset_hash([].into_iter()),
        frozenset_hash([1].into_iter()),
        frozenset_hash([3, 1, 2].into_iter()),
        frozenset_hash([f5, t12].into_iter()),
    ];
    assert_eq!(lines.next(), Some(got));
}

/// The tuple hash of CPython 3.7 and before, against values CPython 3.7.16 printed
/// (`hash(t)` as a signed 64-bit number; the oracle's python3 is newer, so they are written
/// here): tuples of ints, floats and big ints, nested, and a frozenset of tuples.
#[test]
fn old_tuple_hash_is_cpython_3_7s() {
    let tuple = |lanes: &[u64]| {
        let mut t = OldTupleHash::new(lanes.len());
        for &l in lanes {
            t.lane(l);
        }
        t.finish() as i64
    };
    let big = |digits: &[u8]| bigint_hash(&BigInt::parse_bytes(digits, 10).unwrap_or_default());
    let t12 = tuple(&[1, 2]) as u64;
    let cases: [(i64, i64); 8] = [
        (tuple(&[]), 3_527_539),
        (tuple(&[1, 2]), 3_713_081_631_934_410_656),
        (
            tuple(&[int_hash(-1), int_hash(1 << 61), int_hash(-2)]),
            3_789_705_017_591_816_854,
        ),
        (tuple(&[t12, 3]), 5_314_947_466_933_101_882),
        (
            tuple(&[float_hash(1.5).unwrap_or(0)]),
            3_458_767_943_839_928_486,
        ),
        (
            tuple(&[big(b"1267650600228229401496703205376"), int_hash(-7)]),
            -1_053_576_876_348_796_952,
        ),
        (
            frozenset_hash([t12, tuple(&[3]) as u64].into_iter()) as i64,
            -1_158_129_417_992_779_874,
        ),
        (
            tuple(&[frozenset_hash([t12].into_iter()), 5]),
            -6_085_299_469_842_366_443,
        ),
    ];
    for (i, (got, want)) in cases.into_iter().enumerate() {
        assert_eq!(got, want, "case {i}");
    }
}

fn refusal(p: &[u8], limits: Limits) -> Option<(LimitName, u64)> {
    let policy = Policy::data();
    match Decoder::new(p, &policy).limits(limits).decode() {
        Ok(_) => None,
        Err(e) => match e.kind() {
            ErrorKind::LimitExceeded { limit, seen, .. } => Some((*limit, *seen)),
            other => panic!("{other:?}"),
        },
    }
}

/// A DAG of tuples as a dict key: each level a tuple of the level below three times (DUP,
/// DUP, TUPLE3). The unfolded size of level n is (3**(n+1) - 1) / 2; the key's insertion is
/// that many steps, refused by `max_key_steps` however small the input.
#[test]
fn a_tuple_dag_key_costs_its_unfolded_size() {
    for levels in [3u32, 10, 40] {
        let mut p = b"\x80\x02}K\x01".to_vec();
        for _ in 0..levels {
            p.extend_from_slice(b"22\x87");
        }
        p.extend_from_slice(b"K\x02s.");
        // (3**(levels+1) - 1) / 2, below u64::MAX for 40 levels.
        let size = ((3u128.pow(levels + 1) - 1) / 2) as u64;
        let limits = Limits::default();
        let got = refusal(&p, limits);
        if size <= limits.max_key_steps {
            assert_eq!(got, None, "{levels} levels");
        } else {
            assert_eq!(got, Some((LimitName::MaxKeySteps, size)), "{levels} levels");
        }
        // At N-1, N and N+1 for the small ones.
        if size < 1 << 20 {
            let at = |n: u64| {
                refusal(
                    &p,
                    Limits {
                        max_key_steps: n,
                        ..limits
                    },
                )
            };
            assert_eq!(at(size - 1), Some((LimitName::MaxKeySteps, size)));
            assert_eq!(at(size), None);
            assert_eq!(at(size + 1), None);
        }
    }
}
