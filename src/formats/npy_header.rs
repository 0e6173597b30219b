//! The header of an `.npy` file, canonical or refused.
//!
//! numpy reads the header with `ast.literal_eval` and `descr_to_dtype`
//! (`numpy/lib/_format_impl.py:621`, `_read_array_header`). Rather than decide with rules of
//! our own what that parse gives, the header is read loosely here ([`Parser`]), its values
//! checked, and the header written again exactly as numpy's writer writes it for those values
//! (`_write_array_header`, line 445, and `_wrap_header`, line 397): the dict with sorted keys and
//! `repr` of each value, the spaces numpy 1.24 and later add so that the shape can grow in
//! place (`GROWTH_AXIS_MAX_DIGITS`), spaces and a `\n` to the 64-byte alignment, the version
//! `_wrap_header_guess_version` (line 421) picks: 1.0, else 2.0 for a header longer than
//! 65535 bytes, else 3.0 for one that is not Latin-1. The file's header must be those bytes,
//! or those of an older numpy (before 1.24 without the growth spaces; before 1.14 aligned to 16
//! bytes). The `descr` must be one `dtype_to_descr` (line 251) writes: `dtype.str` for a
//! plain dtype (`'<f8'`, `'|O'`, `'<M8[ns]'`), `dtype.descr` for a structured one.

use std::collections::HashSet;

use crate::output::repr::str_repr;
use crate::value::PyStr;

/// Longest header read (bytes): numpy refuses headers over 10 000 characters unless told
/// otherwise (`max_header_size`); version 2.0 is for headers over 65 535 bytes.
pub(crate) const MAX_HEADER_BYTES: usize = 1 << 20;

/// Deepest nesting of the header literal (a structured dtype's list of field tuples, with a
/// nested structured dtype or sub-array shape inside).
const MAX_LITERAL_DEPTH: usize = 8;

/// `GROWTH_AXIS_MAX_DIGITS` (`_format_impl.py:183`).
const GROWTH_AXIS_MAX_DIGITS: usize = 21;

/// The largest element size numpy keeps (a C `int`).
const MAX_ITEMSIZE: u64 = i32::MAX as u64;

/// A value of the header's literal.
#[derive(Clone, Debug, PartialEq)]
enum Lit {
    Str(String),
    Int(u64),
    Bool(bool),
    None,
    Tuple(Vec<Lit>),
    List(Vec<Lit>),
    Dict(Vec<(Lit, Lit)>),
}

/// A header numpy writes, read.
#[derive(Debug)]
pub(crate) struct Header {
    /// Data element size in bytes.
    pub(crate) itemsize: u64,
    /// Whether the dtype holds Python objects: the data is a pickle.
    pub(crate) objects: bool,
    /// The shape.
    pub(crate) shape: Vec<u64>,
    /// `fortran_order`.
    pub(crate) fortran: bool,
    /// Where the data starts.
    pub(crate) data_start: usize,
}

/// Reads the magic, version and header of an `.npy` file, and requires the bytes numpy's
/// writer writes for what they say.
///
/// # Errors
/// Why the header is not numpy's.
pub(crate) fn read_header(bytes: &[u8]) -> Result<Header, String> {
    let rest = bytes
        .strip_prefix(b"\x93NUMPY")
        .ok_or("no \\x93NUMPY magic")?;
    let (&major, rest) = rest.split_first().ok_or("cut short in the version")?;
    let (&minor, rest) = rest.split_first().ok_or("cut short in the version")?;
    let (len, start) = match (major, minor) {
        (1, 0) => {
            let b: [u8; 2] = rest
                .get(..2)
                .and_then(|b| b.try_into().ok())
                .ok_or("cut short in the header length")?;
            (usize::from(u16::from_le_bytes(b)), 10)
        }
        (2 | 3, 0) => {
            let b: [u8; 4] = rest
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .ok_or("cut short in the header length")?;
            let n = u32::from_le_bytes(b);
            (usize::try_from(n).map_err(|_| "header length")?, 12)
        }
        (v, m) => return Err(format!("format version {v}.{m} is not one numpy writes")),
    };
    if len > MAX_HEADER_BYTES {
        return Err(format!(
            "a header of {len} bytes, more than {MAX_HEADER_BYTES}"
        ));
    }
    let raw = bytes
        .get(start..start + len)
        .ok_or("the file ends inside the header")?;
    let text: String = if major == 3 {
        std::str::from_utf8(raw)
            .map_err(|_| "a header that is not UTF-8")?
            .to_owned()
    } else {
        raw.iter().map(|&b| char::from(b)).collect()
    };
    let lit = Parser {
        s: text.trim_end().as_bytes(),
        pos: 0,
    }
    .parse()?;
    let Lit::Dict(items) = lit else {
        return Err("a header that is not a dict".into());
    };
    let [(Lit::Str(k1), descr), (Lit::Str(k2), fortran), (Lit::Str(k3), Lit::Tuple(shape))] =
        items.as_slice()
    else {
        return Err(
            "a header that is not {'descr': ..., 'fortran_order': bool, 'shape': (...)}".into(),
        );
    };
    let Lit::Bool(fortran) = fortran else {
        return Err(
            "a header that is not {'descr': ..., 'fortran_order': bool, 'shape': (...)}".into(),
        );
    };
    if (k1.as_str(), k2.as_str(), k3.as_str()) != ("descr", "fortran_order", "shape") {
        return Err("the header's keys are not descr, fortran_order, shape in that order".into());
    }
    let shape = shape
        .iter()
        .map(|d| match d {
            Lit::Int(n) => Ok(*n),
            _ => Err("a shape item that is not an int".to_owned()),
        })
        .collect::<Result<Vec<u64>, String>>()?;
    let (itemsize, objects) = match descr {
        Lit::Str(s) => plain_descr(s)?,
        Lit::List(fields) => structured_descr(fields, 0)?,
        _ => return Err("a descr that is neither a str nor a list".into()),
    };
    let mut descr_repr = String::new();
    render(descr, &mut descr_repr);
    let file = bytes.get(..start + len).unwrap_or_default();
    let canonical = [(true, 64), (false, 64), (false, 16)]
        .into_iter()
        .filter_map(|(growth, align)| written(&descr_repr, *fortran, &shape, growth, align))
        .any(|w| w == file);
    if !canonical {
        return Err(
            "a header that is not the bytes numpy writes for its values (_write_array_header: \
             sorted keys, repr, padding, version)"
                .into(),
        );
    }
    Ok(Header {
        itemsize,
        objects,
        shape,
        fortran: *fortran,
        data_start: start + len,
    })
}

/// The magic, version, length and header numpy writes for `descr_repr`, `fortran` and
/// `shape` (`_write_array_header`, `_wrap_header`, `_wrap_header_guess_version`), with or
/// without the growth spaces and with the alignment `align`; `None` when no version holds it.
fn written(
    descr_repr: &str,
    fortran: bool,
    shape: &[u64],
    growth: bool,
    align: usize,
) -> Option<Vec<u8>> {
    let mut header = format!(
        "{{'descr': {descr_repr}, 'fortran_order': {}, 'shape': {}, }}",
        if fortran { "True" } else { "False" },
        shape_repr(shape)
    );
    if growth {
        let axis = if fortran { shape.last() } else { shape.first() };
        if let Some(n) = axis {
            let pad = GROWTH_AXIS_MAX_DIGITS.saturating_sub(n.to_string().len());
            header.extend(std::iter::repeat_n(' ', pad));
        }
    }
    // Latin-1 for 1.0 and 2.0 (a header that is not Latin-1 is 3.0, UTF-8).
    let latin1: Option<Vec<u8>> = header
        .chars()
        .map(|c| u8::try_from(u32::from(c)).ok())
        .collect();
    let wrap = |encoded: &[u8], major: u8| -> Option<Vec<u8>> {
        let fmt = if major == 1 { 2 } else { 4 };
        let hlen = encoded.len() + 1;
        let padlen = align - ((8 + fmt + hlen) % align);
        let total = hlen + padlen;
        let mut out = vec![0x93, b'N', b'U', b'M', b'P', b'Y', major, 0];
        if major == 1 {
            out.extend_from_slice(&u16::try_from(total).ok()?.to_le_bytes());
        } else {
            out.extend_from_slice(&u32::try_from(total).ok()?.to_le_bytes());
        }
        out.extend_from_slice(encoded);
        out.extend(std::iter::repeat_n(b' ', padlen));
        out.push(b'\n');
        Some(out)
    };
    match latin1 {
        Some(l) => wrap(&l, 1).or_else(|| wrap(&l, 2)),
        None => wrap(header.as_bytes(), 3),
    }
}

/// `repr` of a shape tuple: `()`, `(5,)`, `(3, 4)`.
fn shape_repr(shape: &[u64]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => {
            let items: Vec<String> = shape.iter().map(u64::to_string).collect();
            format!("({})", items.join(", "))
        }
    }
}

/// `repr` of a literal, as Python writes it (a str as CPython's `repr`).
fn render(lit: &Lit, out: &mut String) {
    // Nesting is bounded by the parser (MAX_LITERAL_DEPTH).
    match lit {
        Lit::Str(s) => str_repr(out, &PyStr::new(s.as_bytes(), false)),
        Lit::Int(n) => out.push_str(&n.to_string()),
        Lit::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
        Lit::None => out.push_str("None"),
        Lit::Tuple(items) | Lit::List(items) => {
            let (open, close) = if matches!(lit, Lit::List(_)) {
                ('[', ']')
            } else {
                ('(', ')')
            };
            out.push(open);
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                render(item, out);
            }
            if items.len() == 1 && close == ')' {
                out.push(',');
            }
            out.push(close);
        }
        Lit::Dict(_) => out.push_str("{...}"),
    }
}

/// The element size of a plain descr and whether it holds objects, when it is one
/// `dtype.str` gives (`'<f8'`, `'|b1'`, `'|O'`, `'<U3'`, `'|S5'`, `'|V8'`, `'<M8[ns]'`): the
/// byte order `|` for types without one and `<` or `>` for the others, the size in decimal
/// (characters for `U`), no size for `O`, a datetime unit in brackets unless generic.
fn plain_descr(s: &str) -> Result<(u64, bool), String> {
    let bad = || {
        format!(
            "descr {:?} is not one numpy writes",
            s.chars().take(24).collect::<String>()
        )
    };
    let b = s.as_bytes();
    let (&order, rest) = b.split_first().ok_or_else(bad)?;
    let (&kind, rest) = rest.split_first().ok_or_else(bad)?;
    if kind == b'O' {
        return if rest.is_empty() && order == b'|' {
            Ok((8, true))
        } else {
            Err(bad())
        };
    }
    let digits_end = rest
        .iter()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (digits, unit) = rest.split_at(digits_end);
    let canonical_digits = !digits.is_empty()
        && digits.len() <= 10
        && (digits.len() == 1 || digits.first() != Some(&b'0'));
    if !canonical_digits {
        return Err(bad());
    }
    let size: u64 = std::str::from_utf8(digits)
        .ok()
        .and_then(|d| d.parse().ok())
        .ok_or_else(bad)?;
    let no_order = matches!((kind, size), (b'b' | b'i' | b'u', 1) | (b'S' | b'V', _));
    let order_ok = if no_order {
        order == b'|'
    } else {
        matches!(order, b'<' | b'>')
    };
    let itemsize = match (kind, size) {
        (b'b', 1) | (b'i' | b'u', 1 | 2 | 4 | 8) | (b'f', 2 | 4 | 8 | 16) | (b'c', 8 | 16 | 32) => {
            Some(size)
        }
        (b'M' | b'm', 8) => Some(8),
        (b'S' | b'V', n) if n <= MAX_ITEMSIZE => Some(n),
        (b'U', n) if n <= MAX_ITEMSIZE / 4 => Some(n * 4),
        _ => None,
    };
    let unit_ok = match kind {
        b'M' | b'm' => unit.is_empty() || datetime_unit(unit),
        _ => unit.is_empty(),
    };
    match itemsize {
        Some(n) if order_ok && unit_ok => Ok((n, false)),
        _ => Err(bad()),
    }
}

/// `[unit]` or `[Nunit]` as `dtype.str` writes a datetime's (N from 2 up, no leading zero).
fn datetime_unit(unit: &[u8]) -> bool {
    const UNITS: [&[u8]; 13] = [
        b"Y", b"M", b"W", b"D", b"h", b"m", b"s", b"ms", b"us", b"ns", b"ps", b"fs", b"as",
    ];
    let Some(inner) = unit.strip_prefix(b"[").and_then(|u| u.strip_suffix(b"]")) else {
        return false;
    };
    let n_end = inner
        .iter()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(inner.len());
    let (n, name) = inner.split_at(n_end);
    let n_ok = n.is_empty()
        || (n.first() != Some(&b'0')
            && n.len() <= 10
            && std::str::from_utf8(n)
                .ok()
                .and_then(|t| t.parse::<u64>().ok())
                .is_some_and(|v| v >= 2 && v <= i32::MAX as u64));
    n_ok && UNITS.contains(&name)
}

/// The element size of a structured descr (`dtype.descr`: a list of `(name, type)` and
/// `(name, type, shape)` tuples, with `('', '|Vn')` for padding) and whether it holds objects,
/// as `descr_to_dtype` (`_format_impl.py:311`) makes it: each field at the sum of the sizes
/// before it. Titles (`((title, name), type)`) and empty names outside padding are refused.
fn structured_descr(fields: &[Lit], depth: usize) -> Result<(u64, bool), String> {
    if depth > MAX_LITERAL_DEPTH {
        return Err("a dtype nested too deeply".into());
    }
    let mut total = 0u64;
    let mut objects = false;
    // A set, not a list: a header may hold tens of thousands of fields.
    let mut names: HashSet<&str> = HashSet::new();
    for f in fields {
        let Lit::Tuple(parts) = f else {
            return Err("a structured dtype field that is not a tuple".into());
        };
        let (name, ty, shape) = match parts.as_slice() {
            [Lit::Str(n), ty] => (n, ty, None),
            [Lit::Str(n), ty, Lit::Tuple(dims)] if !dims.is_empty() => (n, ty, Some(dims)),
            _ => return Err("a structured dtype field that is not (name, type[, shape])".into()),
        };
        let (size, holds) = match ty {
            Lit::Str(s) => plain_descr(s)?,
            Lit::List(inner) => structured_descr(inner, depth + 1)?,
            _ => return Err("a field type that is neither a str nor a list".into()),
        };
        let padding =
            name.is_empty() && shape.is_none() && matches!(ty, Lit::Str(s) if s.starts_with("|V"));
        if name.is_empty() && !padding {
            return Err("a field without a name that is not padding".into());
        }
        if !padding && !names.insert(name.as_str()) {
            return Err("a field name twice".into());
        }
        let count = match shape {
            None => 1,
            Some(dims) => dims.iter().try_fold(1u64, |acc, d| match d {
                Lit::Int(n) => acc.checked_mul(*n).ok_or("a field shape overflows"),
                _ => Err("a field shape that is not ints"),
            })?,
        };
        total = size
            .checked_mul(count)
            .and_then(|s| total.checked_add(s))
            .filter(|&t| t <= MAX_ITEMSIZE)
            .ok_or("a structured dtype whose size overflows")?;
        objects |= holds;
    }
    Ok((total, objects))
}

/// A parser of the header's Python literal (strs without escapes, ints, True, False, None,
/// tuples, lists, dicts), at most [`MAX_LITERAL_DEPTH`] deep. Loose on spacing: the header
/// written again from what it read is what decides ([`read_header`]).
struct Parser<'s> {
    s: &'s [u8],
    pos: usize,
}

impl Parser<'_> {
    fn parse(mut self) -> Result<Lit, String> {
        let v = self.value(0)?;
        self.ws();
        if self.pos != self.s.len() {
            return Err("text after the header's dict".into());
        }
        Ok(v)
    }

    fn ws(&mut self) {
        while self.s.get(self.pos).is_some_and(|&b| b == b' ') {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.pos).copied()
    }

    fn value(&mut self, depth: usize) -> Result<Lit, String> {
        if depth > MAX_LITERAL_DEPTH {
            return Err("a header nested too deeply".into());
        }
        match self.peek().ok_or("the header ends early")? {
            q @ (b'\'' | b'"') => {
                let start = self.pos + 1;
                let len = self
                    .s
                    .get(start..)
                    .and_then(|r| r.iter().position(|&b| b == q))
                    .ok_or("an unterminated str")?;
                let text = self.s.get(start..start + len).unwrap_or_default();
                if text.contains(&b'\\') {
                    return Err("a str with an escape".into());
                }
                self.pos = start + len + 1;
                let text = std::str::from_utf8(text).map_err(|_| "a str that is not text")?;
                Ok(Lit::Str(text.to_owned()))
            }
            b'0'..=b'9' => {
                let start = self.pos;
                while self.s.get(self.pos).is_some_and(u8::is_ascii_digit) {
                    self.pos += 1;
                }
                std::str::from_utf8(self.s.get(start..self.pos).unwrap_or_default())
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .map(Lit::Int)
                    .ok_or_else(|| "an int over 64 bits".into())
            }
            b'(' | b'[' | b'{' => {
                let open = self.s.get(self.pos).copied().unwrap_or_default();
                let close = match open {
                    b'(' => b')',
                    b'[' => b']',
                    _ => b'}',
                };
                self.pos += 1;
                let mut items = Vec::new();
                let mut pairs = Vec::new();
                loop {
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        break;
                    }
                    let v = self.value(depth + 1)?;
                    if open == b'{' {
                        if self.peek() != Some(b':') {
                            return Err("a dict item without ':'".into());
                        }
                        self.pos += 1;
                        pairs.push((v, self.value(depth + 1)?));
                    } else {
                        items.push(v);
                    }
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(c) if c == close => {}
                        _ => return Err("a missing ',' in the header".into()),
                    }
                }
                Ok(match open {
                    b'(' => Lit::Tuple(items),
                    b'[' => Lit::List(items),
                    _ => Lit::Dict(pairs),
                })
            }
            _ => {
                for (word, lit) in [
                    (&b"True"[..], Lit::Bool(true)),
                    (b"False", Lit::Bool(false)),
                    (b"None", Lit::None),
                ] {
                    if self.s.get(self.pos..).is_some_and(|r| r.starts_with(word)) {
                        self.pos += word.len();
                        return Ok(lit);
                    }
                }
                Err("a header value that is not a literal numpy writes".into())
            }
        }
    }
}

#[cfg(test)]
#[path = "npy_header_test.rs"]
mod tests;
