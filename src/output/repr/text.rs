//! Python's repr of scalars: str and bytes quoting and escapes (CPython's `str.isprintable()`),
//! and complex numbers.

use std::fmt::Write as _;

use crate::text::float_repr;
use crate::value::PyStr;

/// Python's complex repr: `2j`, `(1+2j)`, `(-0-1j)`, parts without a trailing `.0`.
pub(super) fn complex_repr(out: &mut String, re: f64, im: f64) {
    let part = |x: f64| {
        let s = float_repr(x);
        s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
    };
    let imag = part(im);
    if re == 0.0 && re.is_sign_positive() {
        let _ = write!(out, "{imag}j");
    } else {
        let sign = if imag.starts_with('-') { "" } else { "+" };
        let _ = write!(out, "({}{sign}{imag}j)", part(re));
    }
}

fn quote_for(has_single: bool, has_double: bool) -> char {
    if has_single && !has_double {
        '"'
    } else {
        '\''
    }
}

/// Whether CPython's `str.isprintable()` calls `c` printable, so its repr writes `c` itself
/// rather than an escape.
///
/// CPython's rule (`_PyUnicode_IsPrintable` in Objects/unicodectype.c, from the
/// `PRINTABLE_MASK` that Tools/unicode/makeunicodedata.py sets): a character is printable
/// unless its Unicode General_Category is Cc, Cf, Cs, Co, Cn, Zl, Zp or Zs, except that
/// U+0020 SPACE is printable. The categories come from `unicode-general-category` 1.1.0, which
/// has Unicode 16.0.0 (a test checks its `UNICODE_VERSION`), the version of CPython 3.14, the
/// newest release and the oracle. So this matches CPython 3.14's repr; an older CPython uses
/// an older Unicode and escapes the characters assigned since then as unassigned (Cn): the
/// machine's python3 (3.11, Unicode 14.0.0) escapes e.g. U+1C89 CYRILLIC CAPITAL LETTER TJE
/// (Unicode 16.0), which this prints raw, as 3.14 does. A character assigned after Unicode
/// 16.0 is escaped here until the crate, and CPython, move on.
pub(super) fn printable(c: char) -> bool {
    use unicode_general_category::{get_general_category, GeneralCategory as G};
    c == ' '
        || !matches!(
            get_general_category(c),
            G::Control
                | G::Format
                | G::Surrogate
                | G::PrivateUse
                | G::Unassigned
                | G::LineSeparator
                | G::ParagraphSeparator
                | G::SpaceSeparator
        )
}

/// `s` as CPython's `repr(str)` writes it (also the header text of an `.npy` file,
/// `src/formats/numpy.rs`).
pub(crate) fn str_repr(out: &mut String, s: &PyStr<'_>) {
    // Decode surrogatepass bytes to code points.
    let cps = code_points(s.as_bytes());
    let has_single = cps.contains(&u32::from('\''));
    let has_double = cps.contains(&u32::from('"'));
    let q = quote_for(has_single, has_double);
    out.push(q);
    for cp in cps {
        match char::from_u32(cp) {
            Some('\\') => out.push_str("\\\\"),
            Some('\n') => out.push_str("\\n"),
            Some('\r') => out.push_str("\\r"),
            Some('\t') => out.push_str("\\t"),
            Some(c) if c == q => {
                out.push('\\');
                out.push(c);
            }
            Some(c) if printable(c) => out.push(c),
            _ if cp < 0x100 => {
                let _ = write!(out, "\\x{cp:02x}");
            }
            _ if cp < 0x10000 => {
                let _ = write!(out, "\\u{cp:04x}");
            }
            _ => {
                let _ = write!(out, "\\U{cp:08x}");
            }
        }
    }
    out.push(q);
}

/// Code points of `surrogatepass` UTF-8 (input already validated by the decoder).
fn code_points(b: &[u8]) -> Vec<u32> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&lead) = b.get(i) {
        let (len, init) = match lead {
            0x00..=0x7F => (1, u32::from(lead)),
            0xC0..=0xDF => (2, u32::from(lead & 0x1F)),
            0xE0..=0xEF => (3, u32::from(lead & 0x0F)),
            _ => (4, u32::from(lead & 0x07)),
        };
        let mut cp = init;
        for k in 1..len {
            cp = (cp << 6) | u32::from(b.get(i + k).copied().unwrap_or(0x80) & 0x3F);
        }
        out.push(cp);
        i += len;
    }
    out
}

/// `b'...'` as CPython writes bytes (Objects/bytesobject.c: the quote not in the text, `'`
/// when both or neither are, and only the chosen quote escaped) or, for a bytearray, as
/// Objects/bytearrayobject.c writes it inside `bytearray(...)`: the same quote, but `'`
/// escaped whichever quote is used (`bytearray(b"\'")`).
pub(super) fn bytes_repr(out: &mut String, b: &[u8], bytearray: bool) {
    let q = quote_for(b.contains(&b'\''), b.contains(&b'"'));
    out.push('b');
    out.push(q);
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ if char::from(c) == q || (bytearray && c == b'\'') => {
                out.push('\\');
                out.push(char::from(c));
            }
            0x20..=0x7E => out.push(char::from(c)),
            _ => {
                let _ = write!(out, "\\x{c:02x}");
            }
        }
    }
    out.push(q);
}
