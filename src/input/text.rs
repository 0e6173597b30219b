//! Text and number codecs used by the opcodes: UTF-8 with `surrogatepass`, protocol-0
//! `raw-unicode-escape`, STRING's escape decoding, decimal ints and floats, and Python's float
//! `repr`.

use std::borrow::Cow;

use num_bigint::BigInt;

/// A str's text as a codec gives it: `surrogatepass` UTF-8 bytes, borrowed from the input
/// when they are there as they are, and whether they hold a lone surrogate (else they are
/// valid UTF-8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Text<'a> {
    pub(crate) bytes: Cow<'a, [u8]>,
    pub(crate) surrogates: bool,
}

/// Checks UTF-8 as CPython decodes BINUNICODE (`'utf-8', 'surrogatepass'`): lone surrogates
/// written as 3-byte sequences (ED A0 80 to ED BF BF) are accepted. Returns whether the text
/// holds one (else it is valid UTF-8).
///
/// # Errors
/// `Err(())` on any other invalid sequence.
#[allow(clippy::result_unit_err)]
pub(crate) fn decode_utf8_surrogatepass(bytes: &[u8]) -> Result<bool, ()> {
    // Short text (most of small objects' text) inline, byte by byte; longer with simdutf8,
    // several times faster than std's on non-ASCII text (which it calls for short text). On
    // failure, the slow path that accepts lone surrogates decides.
    let valid = if bytes.len() < SHORT_UTF8_BYTES {
        short_utf8_is_valid(bytes)
    } else {
        simdutf8::basic::from_utf8(bytes).is_ok()
    };
    if valid {
        return Ok(false);
    }
    validate_surrogatepass(bytes)?;
    Ok(true)
}

/// Text shorter than this is validated by [`short_utf8_is_valid`].
const SHORT_UTF8_BYTES: usize = 64;

/// Whether `b` is valid UTF-8 (Unicode's table 3-7, as `std::str::from_utf8` checks it: no
/// overlong form, no surrogate, nothing above U+10FFFF), one sequence at a time, inlined:
/// for a few dozen bytes the call and setup of `from_utf8` cost more than the check.
#[inline]
fn short_utf8_is_valid(b: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c < 0x80 {
            i += 1;
            continue;
        }
        // The sequence's length, and the range of its second byte.
        let (len, lo, hi) = match c {
            0xC2..=0xDF => (2, 0x80, 0xBF),
            0xE0 => (3, 0xA0, 0xBF),
            0xE1..=0xEC | 0xEE..=0xEF => (3, 0x80, 0xBF),
            0xED => (3, 0x80, 0x9F),
            0xF0 => (4, 0x90, 0xBF),
            0xF1..=0xF3 => (4, 0x80, 0xBF),
            0xF4 => (4, 0x80, 0x8F),
            _ => return false,
        };
        let Some(rest) = b.get(i + 1..i + len) else {
            return false;
        };
        let mut ok = rest.first().is_some_and(|&x| (lo..=hi).contains(&x));
        for &x in rest.get(1..).unwrap_or_default() {
            ok &= x & 0xC0 == 0x80;
        }
        if !ok {
            return false;
        }
        i += len;
    }
    true
}

/// Checks that `bytes` is UTF-8 where surrogate code points (U+D800..U+DFFF, ED A0 80..ED BF BF)
/// are allowed.
fn validate_surrogatepass(mut bytes: &[u8]) -> Result<(), ()> {
    loop {
        match std::str::from_utf8(bytes) {
            Ok(_) => return Ok(()),
            Err(e) => {
                let rest = bytes.get(e.valid_up_to()..).ok_or(())?;
                match rest {
                    [0xED, b1, b2, ..]
                        if (0xA0..=0xBF).contains(b1) && (0x80..=0xBF).contains(b2) =>
                    {
                        bytes = rest.get(3..).ok_or(())?;
                    }
                    _ => return Err(()),
                }
            }
        }
    }
}

/// Appends code point `cp` (any value up to U+10FFFF, surrogates included) to `out` as
/// `surrogatepass` UTF-8. Returns whether it was a surrogate.
pub(crate) fn push_code_point(out: &mut Vec<u8>, cp: u32) -> bool {
    match char::from_u32(cp) {
        Some(c) => {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            false
        }
        None => {
            // A surrogate: the 3-byte form UTF-8 would give it.
            out.push(0xE0 | ((cp >> 12) & 0x0F) as u8);
            out.push(0x80 | ((cp >> 6) & 0x3F) as u8);
            out.push(0x80 | (cp & 0x3F) as u8);
            true
        }
    }
}

/// Turns `surrogatepass` UTF-8 built by the decoder into a [`Text`].
pub(crate) fn owned_text(bytes: Vec<u8>, has_surrogates: bool) -> Text<'static> {
    let surrogates = has_surrogates || simdutf8::basic::from_utf8(&bytes).is_err();
    Text {
        bytes: Cow::Owned(bytes),
        surrogates,
    }
}

/// Decodes the argument of UNICODE as CPython's `raw-unicode-escape` codec does
/// (`Objects/unicodeobject.c`): bytes are Latin-1 code points, except `\uXXXX` (exactly four
/// hex digits) and `\UXXXXXXXX` (exactly eight, at most U+10FFFF); a backslash followed by any
/// other byte is kept with that byte; a lone backslash at the end is kept.
///
/// # Errors
/// `Err(())` for a truncated escape or a code point above U+10FFFF.
#[allow(clippy::result_unit_err)]
pub(crate) fn decode_raw_unicode_escape(bytes: &[u8]) -> Result<Text<'_>, ()> {
    if bytes.is_ascii() && !bytes.contains(&b'\\') {
        return Ok(Text {
            bytes: Cow::Borrowed(bytes),
            surrogates: false,
        });
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut surrogates = false;
    let mut i = 0;
    while let Some(&c) = bytes.get(i) {
        i += 1;
        if c != b'\\' {
            push_code_point(&mut out, u32::from(c));
            continue;
        }
        let Some(&next) = bytes.get(i) else {
            out.push(b'\\');
            break;
        };
        i += 1;
        let count = match next {
            b'u' => 4,
            b'U' => 8,
            _ => {
                out.push(b'\\');
                push_code_point(&mut out, u32::from(next));
                continue;
            }
        };
        let hex = bytes.get(i..i + count).ok_or(())?;
        let mut cp: u32 = 0;
        for &h in hex {
            cp = (cp << 4) | (h as char).to_digit(16).ok_or(())?;
        }
        if cp > 0x10FFFF {
            return Err(());
        }
        i += count;
        surrogates |= push_code_point(&mut out, cp);
    }
    Ok(owned_text(out, surrogates))
}

/// Decodes the body of a STRING argument (quotes removed) as CPython's
/// `PyBytes_DecodeEscape` does: `\\ \' \" \a \b \f \n \r \t \v`, `\xHH` (exactly two hex
/// digits), octal `\O`, `\OO`, `\OOO` (values above 0o377 keep their low 8 bits, as CPython
/// does), backslash-newline is dropped, and any other escape is kept as written.
///
/// # Errors
/// `Err(())` for a bad `\x` escape or a lone backslash at the end.
#[allow(clippy::result_unit_err)]
pub fn decode_string_escape(bytes: &[u8]) -> Result<Cow<'_, [u8]>, ()> {
    if !bytes.contains(&b'\\') {
        return Ok(Cow::Borrowed(bytes));
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&c) = bytes.get(i) {
        i += 1;
        if c != b'\\' {
            out.push(c);
            continue;
        }
        let next = *bytes.get(i).ok_or(())?;
        i += 1;
        match next {
            b'\n' => {}
            b'\\' => out.push(b'\\'),
            b'\'' => out.push(b'\''),
            b'"' => out.push(b'"'),
            b'b' => out.push(0x08),
            b'f' => out.push(0x0C),
            b't' => out.push(b'\t'),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b'v' => out.push(0x0B),
            b'a' => out.push(0x07),
            b'0'..=b'7' => {
                let mut v = u32::from(next - b'0');
                for _ in 0..2 {
                    match bytes.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push((v & 0xFF) as u8);
            }
            b'x' => {
                let hex = bytes.get(i..i + 2).ok_or(())?;
                let hi = (hex.first().copied().ok_or(())? as char)
                    .to_digit(16)
                    .ok_or(())?;
                let lo = (hex.get(1).copied().ok_or(())? as char)
                    .to_digit(16)
                    .ok_or(())?;
                out.push((hi * 16 + lo) as u8);
                i += 2;
            }
            other => {
                out.push(b'\\');
                out.push(other);
            }
        }
    }
    Ok(Cow::Owned(out))
}

/// A parsed int: small or big.
#[derive(Debug, PartialEq)]
pub enum ParsedInt {
    /// Fits in i64.
    Small(i64),
    /// Outside the i64 range.
    Big(BigInt),
}

/// Why number text was refused.
#[derive(Debug, PartialEq)]
pub enum NumberError {
    /// Not `[+-]?[0-9]+`.
    Invalid,
    /// More digits than allowed (the count of digits).
    TooManyDigits(u64),
    /// Plain decimal, but read differently by CPython's releases: why
    /// ([`version_dependent_int_text`]).
    VersionDependent(&'static str),
}

/// Parses decimal int text `[+-]?[0-9]+` of opcode `of` (no whitespace, no underscores, no
/// NUL). `max_digits` bounds the digits before any conversion. Leading zeros are read as
/// decimal, as the newest CPython reads them, where no CPython 3 reads the text otherwise
/// (`-00`, and PUT/GET's `007`); text an older CPython 3 reads otherwise is refused
/// ([`version_dependent_int_text`]).
///
/// # Errors
/// [`NumberError`]: not decimal, then more digits than `max_digits`, then version-dependent.
pub fn parse_decimal_int(
    text: &[u8],
    max_digits: u64,
    of: IntTextOf,
) -> Result<ParsedInt, NumberError> {
    check_decimal_int(text, max_digits, of)?;
    let s = std::str::from_utf8(text).map_err(|_| NumberError::Invalid)?;
    if let Ok(v) = s.parse::<i64>() {
        return Ok(ParsedInt::Small(v));
    }
    BigInt::parse_bytes(text, 10)
        .map(ParsedInt::Big)
        .ok_or(NumberError::Invalid)
}

/// Checks decimal int text as [`parse_decimal_int`] does, without converting it.
///
/// # Errors
/// [`NumberError`].
pub fn check_decimal_int(text: &[u8], max_digits: u64, of: IntTextOf) -> Result<(), NumberError> {
    let digits = match text.first() {
        Some(b'+' | b'-') => text.get(1..).unwrap_or_default(),
        _ => text,
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(NumberError::Invalid);
    }
    if digits.len() as u64 > max_digits {
        return Err(NumberError::TooManyDigits(digits.len() as u64));
    }
    match version_dependent_int_text(text, of) {
        Some(why) => Err(NumberError::VersionDependent(why)),
        None => Ok(()),
    }
}

/// Which opcode's text an int text is: CPython's releases read INT, LONG and the memo index
/// of PUT/GET each their own way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntTextOf {
    /// INT (`I`): `00` and `01` are False and True.
    Int,
    /// LONG (`L`), its trailing `L` removed.
    Long,
    /// PUT (`p`) or GET (`g`): a memo index.
    Memo,
}

/// The most digits CPython 3.7.14+, 3.8.14+, 3.9.14+, 3.10.7+ and 3.11+ read as an int in
/// base 10 (`sys.int_info.default_max_str_digits`, CVE-2020-10735; leading zeros count, a
/// sign does not). CPython 3.6 and the releases before those read any number of digits.
pub const CPYTHON_MAX_STR_DIGITS: usize = 4300;

/// Why CPython 3 releases read a plain decimal int text (`[+-]?[0-9]+`, as
/// [`check_decimal_int`] accepts it) of opcode `of` differently, or `None` when every CPython
/// 3.6 to 3.13 (the C and the Python unpickler) reads it as the newest does, which is how
/// picklewarden reads it. The readings were surveyed with `tests/python/number_text_survey.py`
/// (recorded in `tests/python/number_text_survey.tsv`):
/// - INT with a leading zero and other digits (`010`, `001`, `-01`, `+010`; not `00`, `01`,
///   `-00`, `000`): CPython <= 3.13's C unpickler reads it with `strtol(s, &end, 0)`, as octal
///   (`010` is 8; `08` refused), its Python unpickler with `int(text, 0)`, which refuses it;
///   newer releases read decimal (gh-126992), as picklewarden would (10).
/// - INT `+0`, `-0`, `+1`: CPython <= 3.13's C unpickler makes a bool of any two-character
///   line valued 0 or 1 (`False`, `False`, `True`); its Python unpickler and newer C ones
///   (gh-135241) give the int. `00` and `01` are bools to all (Python 2 writes them).
/// - LONG with a leading zero and other digits (`010`, `01`, `-01`): CPython <= 3.13 reads
///   LONG with `int(text, 0)` and refuses it; newer releases read decimal.
/// - INT, LONG, PUT or GET text of more than [`CPYTHON_MAX_STR_DIGITS`] digits: CPython 3.6
///   (and the 3.7-3.10 releases before the CVE-2020-10735 fix) reads it, later ones refuse
///   it (ValueError; the C unpickler's INT, through `strtol`, still reads a value that fits a
///   C long, such as `000...01`).
///
/// PUT and GET texts are otherwise read alike by every CPython 3 (base 10, sign and leading
/// zeros taken: `007` is 7). Python 2.7 keys its memo by the text itself (`p01` and `g1` name
/// two slots), which no CPython 3 does; it is not a reader picklewarden hands bytes on to.
pub fn version_dependent_int_text(text: &[u8], of: IntTextOf) -> Option<&'static str> {
    let digits = match text.split_first() {
        Some((b'+' | b'-', rest)) => rest,
        _ => text,
    };
    if digits.len() > CPYTHON_MAX_STR_DIGITS {
        return Some(
            "more than 4300 digits: read by CPython 3.6, refused (int_max_str_digits) by \
             3.7.14+, 3.8.14+, 3.9.14+, 3.10.7+ and newer",
        );
    }
    let leading_zero =
        digits.len() > 1 && digits.first() == Some(&b'0') && digits.iter().any(|&d| d != b'0');
    match of {
        IntTextOf::Int if text == b"01" => None,
        IntTextOf::Int if matches!(text, b"+0" | b"-0" | b"+1") => Some(
            "a bool to the C unpickler of CPython <= 3.13 (any two-character line valued 0 \
             or 1) and an int to its Python unpickler and to newer CPython (gh-135241)",
        ),
        IntTextOf::Int if leading_zero => Some(
            "a leading zero: octal to the C unpickler of CPython <= 3.13 (strtol base 0), \
             refused by its Python unpickler (int(text, 0)), decimal to newer CPython \
             (gh-126992)",
        ),
        IntTextOf::Long if leading_zero => Some(
            "a leading zero: refused by CPython <= 3.13 (int(text, 0)), decimal to newer \
             CPython (gh-126992)",
        ),
        _ => None,
    }
}

/// Parses FLOAT text as CPython's `PyOS_string_to_double` does for the FLOAT opcode: decimal or
/// exponent notation, `inf`, `infinity`, `nan` (any case, optional sign); no whitespace; a
/// finite text that overflows is refused (CPython raises OverflowError).
///
/// # Errors
/// `Err(())` when the text is not a float.
#[allow(clippy::result_unit_err)]
pub fn parse_float(text: &[u8]) -> Result<f64, ()> {
    let s = std::str::from_utf8(text).map_err(|_| ())?;
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let named = ["inf", "infinity", "nan"]
        .iter()
        .any(|n| body.eq_ignore_ascii_case(n));
    if !named
        && !body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return Err(());
    }
    let v: f64 = match long_exponent(s) {
        Some(v) => v,
        None => s.parse().map_err(|_| ())?,
    };
    if v.is_infinite() && !named {
        return Err(());
    }
    Ok(v)
}

/// The value of decimal text `[sign] digits [. digits] (e|E) [sign] digits` whose exponent has
/// more than 4 significant digits, or `None` for any other text (`str::parse` reads it, or
/// refuses it). `str::parse::<f64>` stops reading exponent digits past 65,536, so that
/// `0.000...0001e655360` (655,359 zeros, which is 1.0, as CPython's dtoa reads it) gave 0.0.
/// Here the digits are moved into the exponent instead: the text is `0.D x 10^E` with `D` its
/// digits from the first nonzero one, which overflows for `E > 400`, is 0 for `E < -400`, and
/// in between is `0.De<E>`, which `str::parse` reads right however long `D` is.
fn long_exponent(s: &str) -> Option<f64> {
    let (negative, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (mantissa, exponent) = body.split_once(['e', 'E'])?;
    let (exp_negative, exp_digits) = match exponent.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, exponent.strip_prefix('+').unwrap_or(exponent)),
    };
    let all_digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if exp_digits.is_empty() || !all_digits(exp_digits) {
        return None;
    }
    let exp_digits = exp_digits.trim_start_matches('0');
    if exp_digits.len() <= 4 {
        return None;
    }
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if (int_part.is_empty() && frac_part.is_empty())
        || !all_digits(int_part)
        || !all_digits(frac_part)
    {
        return None;
    }
    let zero = if negative { -0.0 } else { 0.0 };
    // Leading zeros of the digits, across the point.
    let int_zeros = int_part.len() - int_part.trim_start_matches('0').len();
    let lead = if int_zeros == int_part.len() {
        let frac_zeros = frac_part.len() - frac_part.trim_start_matches('0').len();
        if frac_zeros == frac_part.len() {
            return Some(zero);
        }
        int_zeros + frac_zeros
    } else {
        int_zeros
    };
    // value = 0.D x 10^(exponent + len(int_part) - lead); saturating, as any exponent past
    // 10^18 is far past both ends.
    let exp: i64 = if exp_digits.len() > 18 {
        i64::MAX / 4
    } else {
        exp_digits.parse().ok()?
    };
    let exp = if exp_negative { -exp } else { exp };
    let to_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX / 4);
    let e = exp
        .saturating_add(to_i64(int_part.len()))
        .saturating_sub(to_i64(lead));
    if e > 400 {
        return Some(if negative {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        });
    }
    if e < -400 {
        return Some(zero);
    }
    let digits: String = int_part
        .chars()
        .chain(frac_part.chars())
        .skip(lead)
        .collect();
    let sign = if negative { "-" } else { "" };
    format!("{sign}0.{digits}e{e}").parse().ok()
}

/// Python's `repr()` of a float (`float_repr` with the `'r'` format: shortest round-trip
/// digits; positional notation when the decimal exponent is in -4 < exp <= 16, else
/// `d.ddde+XX`; `inf`, `-inf`, `nan`).
///
/// The digits are Ryu's (the `ryu` crate): the shortest that read back as `x`, the closest to
/// `x` among those, and of two equally close the even one, which is what CPython's
/// `Python/dtoa.c` (mode 0) gives. `core::fmt`'s shortest `{:e}` breaks that tie upwards:
/// 992309244667425.25 is exactly a double, CPython writes `992309244667425.2`, `{:e}` gave
/// `9.923092446674253e14`.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    let (digits, decpt) = shortest_digits(x.abs());
    let exp = decpt - 1;
    let mut out = String::new();
    if x < 0.0 {
        out.push('-');
    }
    let n = digits.len() as i32;
    if -4 < decpt && decpt <= 16 {
        if decpt <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-decpt) as usize));
            out.push_str(&digits);
        } else if decpt >= n {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', (decpt - n) as usize));
            out.push_str(".0");
        } else {
            let (a, b) = digits.split_at(decpt as usize);
            out.push_str(a);
            out.push('.');
            out.push_str(b);
        }
    } else {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.abs()));
    }
    out
}

/// The shortest round-trip decimal digits of a finite, positive `x` (no leading or trailing
/// zeros) and the position of the decimal point: `x` = 0.`digits` x 10^`decpt`. Ryu writes
/// `1.5e-7`, `123.25` or `1e16`; the digits and the point's position are read off that text.
fn shortest_digits(x: f64) -> (String, i32) {
    let mut buf = ryu::Buffer::new();
    let text = buf.format_finite(x);
    let (mant, exp) = text.split_once(['e', 'E']).unwrap_or((text, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let all = format!("{int}{frac}");
    let lead = all.len() - all.trim_start_matches('0').len();
    let digits = all.trim_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let decpt = i32::try_from(int.len()).unwrap_or(0) + exp - i32::try_from(lead).unwrap_or(0);
    (digits.to_string(), decpt)
}

#[cfg(test)]
#[path = "text_test.rs"]
mod tests;
