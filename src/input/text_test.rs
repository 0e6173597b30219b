//! Unit tests of the text and number codecs.

use super::*;

#[test]
fn float_repr_matches_python() {
    for (x, want) in [
        (1.5, "1.5"),
        (1e16, "1e+16"),
        (1e15, "1000000000000000.0"),
        (1e-5, "1e-05"),
        (0.0001, "0.0001"),
        (0.1, "0.1"),
        (-0.0, "-0.0"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (123456789.125, "123456789.125"),
        (f64::NAN, "nan"),
        (f64::NEG_INFINITY, "-inf"),
        (-2.5e-7, "-2.5e-07"),
        // Exact ties between two shortest candidates go to the even digit, as in CPython.
        // 992309244667425.25, exactly a double.
        (f64::from_bits(0x430c_3400_0049_310a), "992309244667425.2"),
        (f64::from_bits(0xc2b4_c879_5c0a_2950), "-22851262089769.312"),
        (0.3, "0.3"),
        (2.0f64.powi(-1074), "5e-324"),
        (100.0, "100.0"),
        (1.0e22, "1e+22"),
    ] {
        assert_eq!(float_repr(x), want, "{x:e}");
    }
}

/// The short validator agrees with std on every sequence of up to three bytes (every
/// lead with every continuation), on every four-byte sequence of a fixed grid of bytes,
/// and on pseudo-random strings mixing valid and broken sequences.
#[test]
fn short_utf8_validation_is_std_s() {
    for a in 0..=255u8 {
        for b in 0..=255u8 {
            let two = [a, b];
            assert_eq!(short_utf8_is_valid(&two), std::str::from_utf8(&two).is_ok());
            for c in [
                0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF,
            ] {
                let three = [a, b, c];
                assert_eq!(
                    short_utf8_is_valid(&three),
                    std::str::from_utf8(&three).is_ok(),
                    "{three:02x?}"
                );
            }
        }
    }
    let grid = [
        0x41, 0x80, 0x8F, 0x90, 0xBF, 0xC2, 0xE0, 0xED, 0xF0, 0xF4, 0xF5,
    ];
    for &a in &[0xF0u8, 0xF1, 0xF3, 0xF4, 0xF5, 0xE0, 0xED] {
        for &b in &grid {
            for &c in &grid {
                for &d in &grid {
                    let four = [a, b, c, d];
                    assert_eq!(
                        short_utf8_is_valid(&four),
                        std::str::from_utf8(&four).is_ok(),
                        "{four:02x?}"
                    );
                }
            }
        }
    }
    let pieces: [&[u8]; 9] = [
        b"a",
        "\u{e9}".as_bytes(),
        "\u{20ac}".as_bytes(),
        "\u{1f600}".as_bytes(),
        b"\x80",
        b"\xc3",
        b"\xed\xa0\x80",
        b"\xf4\x90\x80\x80",
        b"\xe0\x80\x80",
    ];
    let mut x = 0x2545_f491u32;
    for _ in 0..20_000 {
        let mut t = Vec::new();
        while t.len() < 60 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            if x.is_multiple_of(7) {
                break;
            }
            t.extend_from_slice(pieces[(x % 9) as usize]);
        }
        assert_eq!(
            short_utf8_is_valid(&t),
            std::str::from_utf8(&t).is_ok(),
            "{t:02x?}"
        );
    }
}

#[test]
fn surrogatepass_accepts_lone_surrogates_only() {
    assert_eq!(decode_utf8_surrogatepass(b"a\xed\xa0\x80b"), Ok(true));
    assert_eq!(decode_utf8_surrogatepass("a\u{e9}".as_bytes()), Ok(false));
    assert!(decode_utf8_surrogatepass(b"\xc0\x80").is_err());
    assert!(decode_utf8_surrogatepass(b"\xed\xa0").is_err());
    assert!(decode_utf8_surrogatepass(b"\xff").is_err());
}

#[test]
fn raw_unicode_escape_rules() {
    let s = decode_raw_unicode_escape(b"a\\u00e9\\U0001f600\\\\x\\").unwrap();
    assert_eq!(&*s.bytes, "a\u{e9}\u{1f600}\\\\x\\".as_bytes());
    assert!(!s.surrogates);
    assert!(decode_raw_unicode_escape(b"\\u12").is_err());
    assert!(decode_raw_unicode_escape(b"\\U00110000").is_err());
    let s = decode_raw_unicode_escape(b"\\ud800").unwrap();
    assert_eq!((&*s.bytes, s.surrogates), (&b"\xed\xa0\x80"[..], true));
    assert_eq!(
        &*decode_raw_unicode_escape(b"\xe9").unwrap().bytes,
        "\u{e9}".as_bytes()
    );
}

#[test]
fn string_escape_rules() {
    assert_eq!(
        &*decode_string_escape(b"a\\n\\x41\\101\\777\\q\\\nz").unwrap(),
        b"a\nAA\xff\\qz"
    );
    assert!(decode_string_escape(b"\\x4").is_err());
    assert!(decode_string_escape(b"\\").is_err());
}

#[test]
fn decimal_ints() {
    use IntTextOf::{Int, Long, Memo};
    assert_eq!(
        parse_decimal_int(b"010", 10, Memo),
        Ok(ParsedInt::Small(10))
    );
    assert_eq!(parse_decimal_int(b"-5", 10, Int), Ok(ParsedInt::Small(-5)));
    assert_eq!(
        parse_decimal_int(b"0x10", 10, Long),
        Err(NumberError::Invalid)
    );
    assert_eq!(
        parse_decimal_int(b"1\x002", 10, Int),
        Err(NumberError::Invalid)
    );
    assert_eq!(parse_decimal_int(b" 1", 10, Int), Err(NumberError::Invalid));
    assert_eq!(
        parse_decimal_int(b"12345", 4, Int),
        Err(NumberError::TooManyDigits(5))
    );
    // The limit is checked before the version dependence.
    assert_eq!(
        parse_decimal_int(b"00012", 4, Int),
        Err(NumberError::TooManyDigits(5))
    );
    assert!(matches!(
        parse_decimal_int(b"99999999999999999999", 100, Long),
        Ok(ParsedInt::Big(_))
    ));
}

/// Which plain decimal texts CPython 3's releases read differently, per opcode
/// (tests/number_text.rs checks them against the surveyed readings).
#[test]
fn version_dependent_int_texts() {
    use IntTextOf::{Int, Long, Memo};
    let differs = |t: &[u8], of| version_dependent_int_text(t, of).is_some();
    for t in [&b"010"[..], b"001", b"-01", b"+01", b"007", b"08", b"0010"] {
        assert!(
            differs(t, Int) && differs(t, Long) && !differs(t, Memo),
            "{t:?}"
        );
    }
    for t in [&b"+0"[..], b"-0", b"+1"] {
        assert!(
            differs(t, Int) && !differs(t, Long) && !differs(t, Memo),
            "{t:?}"
        );
    }
    // "01" is True to INT and refused as LONG by CPython <= 3.13.
    assert!(!differs(b"01", Int) && differs(b"01", Long));
    for t in [
        &b"0"[..],
        b"00",
        b"000",
        b"-00",
        b"+00",
        b"1",
        b"-1",
        b"10",
        b"+10",
        b"-10",
    ] {
        for of in [Int, Long, Memo] {
            assert!(!differs(t, of), "{t:?} {of:?}");
        }
    }
    let mut long = vec![b'-'];
    long.extend(std::iter::repeat_n(b'0', CPYTHON_MAX_STR_DIGITS));
    for of in [Int, Long, Memo] {
        assert!(!differs(&long, of));
    }
    long.push(b'0');
    for of in [Int, Long, Memo] {
        assert!(differs(&long, of));
    }
}

#[test]
fn floats() {
    assert_eq!(parse_float(b"1.5"), Ok(1.5));
    assert!(parse_float(b"-inf").unwrap().is_infinite());
    assert!(parse_float(b"nan").unwrap().is_nan());
    assert!(parse_float(b"1e999").is_err());
    assert!(parse_float(b" 1").is_err());
    assert!(parse_float(b"1_0").is_err());
    assert!(parse_float(b"0x1p3").is_err());
    // Exponents past 65,536 (str::parse stops reading their digits there), checked against
    // CPython's float() in tests/semantics/text.rs too.
    let mut one = b"0.".to_vec();
    one.extend(std::iter::repeat_n(b'0', 655_359));
    one.extend_from_slice(b"1e655360");
    assert_eq!(parse_float(&one), Ok(1.0));
    let mut one = b"1".to_vec();
    one.extend(std::iter::repeat_n(b'0', 655_360));
    one.extend_from_slice(b"e-655360");
    assert_eq!(parse_float(&one), Ok(1.0));
    assert_eq!(parse_float(b"-25e-000000000000000000000000001"), Ok(-2.5));
    assert_eq!(parse_float(b"1e100000"), Err(()));
    assert_eq!(
        parse_float(b"-1e-100000").map(f64::to_bits),
        Ok((-0.0f64).to_bits())
    );
    assert_eq!(parse_float(b"0.000e999999"), Ok(0.0));
    assert_eq!(parse_float(b"12.5e00000000001"), Ok(125.0));
    assert_eq!(parse_float(b"1.5e+99999999999999999999999"), Err(()));
    assert_eq!(parse_float(b"1.5e-99999999999999999999999"), Ok(0.0));
    assert_eq!(parse_float(b".e100000"), Err(()));
    assert_eq!(parse_float(b"1e+-100000"), Err(()));
}
