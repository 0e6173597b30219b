//! CPython's hash functions, for the values a pickle can make a key of: ints and big ints,
//! floats, complex numbers, `None`, tuples and frozensets, as CPython 3.12 and later computes
//! them, and the tuple hash of CPython 3.7 and before ([`OldTupleHash`]) (`Python/pyhash.c`,
//! `Objects/longobject.c`, `floatobject.c`, `complexobject.c`, `tupleobject.c` (xxHash-based,
//! 3.8+), `setobject.c`). [`super::KeyOps::hash`] builds a
//! key's hash from them; the model of the reader's work (`reader.rs`) counts the keys that
//! share one.

use num_bigint::{BigInt, Sign};

/// CPython's `_PyHASH_MODULUS`, 2**61 - 1 (`Include/cpython/pyhash.h`).
const MODULUS: u64 = (1 << 61) - 1;
/// `_PyHASH_BITS`.
const HASH_BITS: u32 = 61;
/// `_PyHASH_INF`, the hash of `float('inf')`.
const HASH_INF: u64 = 314_159;
/// `_PyHASH_IMAG`, the multiplier of a complex number's imaginary part.
const HASH_IMAG: u64 = 1_000_003;
/// `hash(None)` since CPython 3.12 (`Objects/object.c` `none_hash`).
pub(crate) const HASH_NONE: u64 = 0xFCA8_6420;

/// `-1` is CPython's error return of a hash function, so a hash of -1 becomes -2.
fn not_minus_one(h: u64) -> u64 {
    if h == u64::MAX {
        u64::MAX - 1
    } else {
        h
    }
}

/// `hash(i)` of an int (`long_hash`): `|i| mod (2**61 - 1)`, negated for a negative `i`.
pub(crate) fn int_hash(i: i64) -> u64 {
    let m = i.unsigned_abs() % MODULUS;
    not_minus_one(if i < 0 { m.wrapping_neg() } else { m })
}

/// `hash(b)` of a big int.
pub(crate) fn bigint_hash(b: &BigInt) -> u64 {
    // |b| mod (2**61 - 1), from the most significant 64-bit digit down, without allocating
    // or dividing: 2**64 is 8 modulo 2**61 - 1, so `acc * 2**64 + d` is `8 * acc + d`, and
    // a number is folded below 2**61 + 16 by adding its bits past the 61st to the rest.
    let mut acc: u64 = 0;
    for d in b.iter_u64_digits().rev() {
        let x = (u128::from(acc) << 3) + u128::from(d);
        let x = (x & u128::from(MODULUS)) + (x >> HASH_BITS);
        let x = (x & u128::from(MODULUS)) + (x >> HASH_BITS);
        let x = x as u64;
        acc = if x >= MODULUS { x - MODULUS } else { x };
    }
    let m = acc;
    not_minus_one(if b.sign() == Sign::Minus {
        m.wrapping_neg()
    } else {
        m
    })
}

/// `frexp`: `x == m * 2**e` with `0.5 <= |m| < 1`, for a finite non-zero `x`.
fn frexp(x: f64) -> (f64, i32) {
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    if exp == 0 {
        // Subnormal: scale into the normal range first.
        let (m, e) = frexp(x * f64::from_bits(0x43f0_0000_0000_0000)); // 2**64
        return (m, e - 64);
    }
    let m = f64::from_bits((bits & !(0x7ff << 52)) | (1022 << 52));
    (m, exp - 1022)
}

/// `hash(x)` of a float (`_Py_HashDouble`); `None` for a NaN, which CPython 3.10+ hashes by
/// the object's address.
pub(crate) fn float_hash(v: f64) -> Option<u64> {
    // An integral float below 2**63 in magnitude hashes as the int it equals (CPython makes
    // `hash(float(i)) == hash(i)`); the conversion saturates, so the round trip holds only
    // for those (2**63 saturates to `i64::MAX`, whose float is 2**63 again: excluded).
    let i = v as i64;
    if i as f64 == v && i != i64::MAX {
        return Some(int_hash(i));
    }
    if v.is_nan() {
        return None;
    }
    if v.is_infinite() {
        return Some(if v > 0.0 {
            HASH_INF
        } else {
            HASH_INF.wrapping_neg()
        });
    }
    if v == 0.0 {
        return Some(0);
    }
    let (mut m, mut e) = frexp(v);
    let mut negative = false;
    if m < 0.0 {
        negative = true;
        m = -m;
    }
    let mut x: u64 = 0;
    while m != 0.0 {
        x = ((x << 28) & MODULUS) | x >> (HASH_BITS - 28);
        m *= 268_435_456.0; // 2**28
        e -= 28;
        let y = m as u64; // the integer part (0 <= m < 2**28)
        m -= y as f64;
        x += y;
        if x >= MODULUS {
            x -= MODULUS;
        }
    }
    let bits = HASH_BITS as i32;
    let e = if e >= 0 {
        e % bits
    } else {
        bits - 1 - ((-1 - e) % bits)
    } as u32;
    x = ((x << e) & MODULUS) | x.checked_shr(HASH_BITS - e).unwrap_or(0);
    Some(not_minus_one(if negative { x.wrapping_neg() } else { x }))
}

/// `hash(complex(re, im))` (`complex_hash`).
pub(crate) fn complex_hash(re: f64, im: f64) -> Option<u64> {
    let (r, i) = (float_hash(re)?, float_hash(im)?);
    Some(not_minus_one(r.wrapping_add(HASH_IMAG.wrapping_mul(i))))
}

/// `hash(t)` of a tuple from its items' hashes (`tuplehash`, xxHash-based, CPython 3.8+).
pub(crate) struct TupleHash {
    acc: u64,
    len: u64,
}

const XXPRIME_1: u64 = 11_400_714_785_074_694_791;
const XXPRIME_2: u64 = 14_029_467_366_897_019_727;
const XXPRIME_5: u64 = 2_870_177_450_012_600_261;

impl TupleHash {
    pub(crate) fn new() -> TupleHash {
        TupleHash {
            acc: XXPRIME_5,
            len: 0,
        }
    }

    #[inline]
    pub(crate) fn lane(&mut self, h: u64) {
        self.acc = self.acc.wrapping_add(h.wrapping_mul(XXPRIME_2));
        self.acc = self.acc.rotate_left(31);
        self.acc = self.acc.wrapping_mul(XXPRIME_1);
        self.len += 1;
    }

    pub(crate) fn finish(&self) -> u64 {
        let acc = self.acc.wrapping_add(self.len ^ (XXPRIME_5 ^ 3_527_539));
        if acc == u64::MAX {
            1_546_275_796
        } else {
            acc
        }
    }
}

/// `hash(t)` of a tuple from its items' hashes as CPython 3.7 and before (and 2.7) compute it
/// (`Objects/tupleobject.c` `tuplehash` before bpo-34751): a multiply-and-xor whose
/// collisions are easy to choose (for `(a, b)`, any `a'` and the `b'` whose hash is
/// `x1(a) ^ x1(a') ^ hash(b)`), so that a Mitogen parent on CPython 3.6 takes seconds over a
/// set of a few thousand 2-tuples of ints that CPython 3.8+ spreads.
pub(crate) struct OldTupleHash {
    x: u64,
    mult: u64,
    /// Items not yet hashed.
    left: u64,
}

impl OldTupleHash {
    /// The hash of a tuple of `len` items, fed by [`OldTupleHash::lane`].
    pub(crate) fn new(len: usize) -> OldTupleHash {
        OldTupleHash {
            x: 0x0034_5678,
            mult: 1_000_003,
            left: len as u64,
        }
    }

    #[inline]
    pub(crate) fn lane(&mut self, h: u64) {
        self.left = self.left.wrapping_sub(1);
        self.x = (self.x ^ h).wrapping_mul(self.mult);
        self.mult = self
            .mult
            .wrapping_add(82_520u64.wrapping_add(self.left).wrapping_add(self.left));
    }

    pub(crate) fn finish(&self) -> u64 {
        not_minus_one(self.x.wrapping_add(97_531))
    }
}

/// `_shuffle_bits` of `setobject.c`.
fn shuffle_bits(h: u64) -> u64 {
    ((h ^ 89_869_747) ^ (h << 16)).wrapping_mul(3_644_798_167)
}

/// `hash(frozenset)` from its items' hashes (`frozenset_hash`): the xor of the shuffled item
/// hashes is independent of the table's layout.
pub(crate) fn frozenset_hash(items: impl Iterator<Item = u64>) -> u64 {
    let mut f = FrozenSetHash::new();
    for i in items {
        f.add(i);
    }
    f.finish()
}

/// [`frozenset_hash`] one item at a time.
pub(crate) struct FrozenSetHash {
    acc: u64,
    len: u64,
}

impl FrozenSetHash {
    pub(crate) fn new() -> FrozenSetHash {
        FrozenSetHash { acc: 0, len: 0 }
    }

    #[inline]
    pub(crate) fn add(&mut self, h: u64) {
        self.acc ^= shuffle_bits(h);
        self.len += 1;
    }

    pub(crate) fn finish(&self) -> u64 {
        let mut h = self.acc;
        h ^= (self.len + 1).wrapping_mul(1_927_868_237);
        h ^= (h >> 11) ^ (h >> 25);
        h = h.wrapping_mul(69_069).wrapping_add(907_133_923);
        if h == u64::MAX {
            590_923_713
        } else {
            h
        }
    }
}
