//! Numbers as dict keys: bool, int, float and complex reduced to one form, so that equal numbers
//! compare and hash alike (`1 == 1.0 == True == 1+0j`, as CPython's `Objects/longobject.c`,
//! `floatobject.c` and `complexobject.c` compare them).

use std::borrow::Cow;
use std::hash::Hasher;

use num_bigint::BigInt;
use num_traits::{FromPrimitive, ToPrimitive};

use crate::value::Value;

/// A number reduced to one canonical form so that equal numbers compare and hash alike. A big
/// int is borrowed from its node (cloning a 4 KiB LONG4 for every hash and comparison of it
/// cost more than the comparison); only a float past 2**63 makes one.
pub(super) enum Num<'v> {
    I(i64),
    Big(Cow<'v, BigInt>),
    F(f64),
    C(f64, f64),
}

impl Num<'_> {
    /// Whether a float part is NaN (a float or complex that equals nothing but itself).
    pub(super) fn has_nan(&self) -> bool {
        match *self {
            Num::F(x) => x.is_nan(),
            Num::C(re, im) => re.is_nan() || im.is_nan(),
            Num::I(_) | Num::Big(_) => false,
        }
    }
}

pub(super) fn float_num(x: f64) -> Num<'static> {
    // Integral and from -2**63 to 2**63 (excluded): the int it equals. The conversion
    // saturates, so the round trip holds only for those (2**63 saturates to `i64::MAX`, whose
    // float is 2**63 again: excluded, and made a big int below).
    let i = x as i64;
    if i as f64 == x && i != i64::MAX {
        return Num::I(i);
    }
    if x.is_finite() && x.fract() == 0.0 {
        if let Some(b) = BigInt::from_f64(x) {
            return Num::Big(Cow::Owned(b));
        }
    }
    Num::F(x)
}

pub(super) fn num_of(v: Value<'_>) -> Option<Num<'_>> {
    Some(match v {
        Value::Bool(b) => Num::I(i64::from(b)),
        Value::Int(i) => Num::I(i),
        Value::BigInt(b) => Num::Big(Cow::Borrowed(b)),
        Value::Float(x) => float_num(x),
        Value::Complex(re, im) => {
            if im == 0.0 {
                float_num(re)
            } else {
                Num::C(re, im)
            }
        }
        _ => return None,
    })
}

pub(super) fn num_eq(a: &Num<'_>, b: &Num<'_>) -> bool {
    match (a, b) {
        (Num::I(x), Num::I(y)) => x == y,
        (Num::Big(x), Num::Big(y)) => x == y,
        (Num::F(x), Num::F(y)) => x == y,
        (Num::C(a, b), Num::C(c, d)) => a == c && b == d,
        _ => false,
    }
}

/// Writes the number `n` into `h`: a tag (1 int, 2 big int, 3 float, 4 complex) and the
/// value, a fixed size for each tag but the big int's (which writes its length first), so
/// that numbers fed one after another (a tuple's items, [`super::KeyOps::feed_value`]) are
/// prefix-free.
pub(super) fn hash_num<H: Hasher>(n: &Num<'_>, h: &mut H) {
    // The tag byte, then the word: integer writes, which std's SipHash takes by its short
    // path (a byte slice of the same bytes goes through its general one, slower).
    let tagged = |h: &mut H, tag: u8, word: u64| {
        h.write_u8(tag);
        h.write_u64(word);
    };
    match n {
        Num::I(i) => tagged(h, 1, *i as u64),
        Num::Big(b) => {
            // The sign and the 64-bit digits of the magnitude, least significant first (a
            // `BigInt` keeps no leading zero digit, so equal values write the same words),
            // without the allocation of a byte form.
            let sign = match b.sign() {
                num_bigint::Sign::Minus => 0,
                num_bigint::Sign::NoSign => 1,
                num_bigint::Sign::Plus => 2,
            };
            tagged(h, 2, sign);
            h.write_usize(b.iter_u64_digits().len());
            for d in b.iter_u64_digits() {
                h.write_u64(d);
            }
        }
        Num::F(x) => tagged(h, 3, x.to_bits()),
        Num::C(re, im) => {
            // -0.0 == 0.0: hash them alike.
            tagged(h, 4, (re + 0.0).to_bits());
            h.write_u64((im + 0.0).to_bits());
        }
    }
}

/// The f64 nearest to a big int, or `None` if out of range (CPython's OverflowError).
pub(crate) fn bigint_to_f64(b: &BigInt) -> Option<f64> {
    b.to_f64().filter(|x| x.is_finite())
}
