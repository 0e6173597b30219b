use num_bigint::BigInt;

use super::long_le_i128;
use crate::value::Value;
use crate::{Decoder, Policy};

/// LONG1 payloads of 9 to 17 bytes (the i128 path up to 16, the general one past) decode to
/// the two's-complement value CPython's `decode_long` reads (`int.from_bytes(b, 'little',
/// signed=True)`), as an int when it fits 64 bits.
#[test]
fn long1_of_9_to_17_bytes_is_the_twos_complement_value() {
    let patterns: [&dyn Fn(usize, usize) -> u8; 5] = [
        &|_, _| 0xff,
        &|i, n| if i + 1 == n { 0x80 } else { 0 },
        &|i, n| if i + 1 == n { 0x7f } else { 0xff },
        &|i, _| (i as u8).wrapping_mul(37).wrapping_add(11),
        &|i, n| if i + 1 == n { 0xff } else { 0x01 },
    ];
    for n in 9..=17usize {
        for p in &patterns {
            let payload: Vec<u8> = (0..n).map(|i| p(i, n)).collect();
            let want = BigInt::from_signed_bytes_le(&payload);
            assert_eq!(
                long_le_i128(&payload).map(BigInt::from),
                (n <= 16).then(|| want.clone())
            );
            let mut input = b"\x80\x02\x8a".to_vec();
            input.push(n as u8);
            input.extend_from_slice(&payload);
            input.push(b'.');
            let doc = Decoder::new(&input, &Policy::data()).decode().unwrap();
            let got = match doc.root().and_then(|r| doc.get(r)) {
                Some(Value::Int(v)) => {
                    assert!(i64::try_from(&want).is_ok(), "{payload:x?}");
                    BigInt::from(v)
                }
                Some(Value::BigInt(b)) => {
                    assert!(i64::try_from(b).is_err(), "{payload:x?} not normalised");
                    b.clone()
                }
                other => panic!("{other:?}"),
            };
            assert_eq!(got, want, "{payload:x?}");
        }
    }
}
