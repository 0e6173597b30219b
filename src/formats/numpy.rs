//! NumPy's `.npy` and `.npz` files, as `numpy/lib/format.py` writes them.
//!
//! `.npy`: the magic `\x93NUMPY`, a version (1.0: a 2-byte header length; 2.0 and 3.0: 4
//! bytes), then the header, a Python dict literal `{'descr': ..., 'fortran_order': ...,
//! 'shape': (...), }`, then the data: `prod(shape) x itemsize` raw bytes, or, for a dtype that
//! holds Python objects, a pickle of the whole array (read under the `numpy` policy).
//! `.npz`: a zip of `.npy` files.

use std::io::{Read, Seek};

use super::container::Report;

/// Longest header read (bytes). numpy itself refuses headers over 10 000 bytes unless told
/// otherwise (`max_header_size`); structured dtypes with many fields can be longer.
pub const MAX_HEADER_BYTES: usize = 1 << 16;

/// Deepest nesting of the header literal (a structured dtype's list of field tuples, with a
/// nested structured dtype or sub-array shape inside).
const MAX_LITERAL_DEPTH: usize = 8;

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

/// A parsed header.
#[derive(Debug)]
pub(crate) struct Header {
    /// Data element size in bytes, `None` for a dtype holding objects.
    pub(crate) itemsize: Option<u64>,
    pub(crate) shape: Vec<u64>,
    /// Where the data starts.
    pub(crate) data_start: usize,
}

/// Reads the magic, version and header of an `.npy` file.
pub(crate) fn read_header(bytes: &[u8]) -> Result<Header, String> {
    let rest = bytes
        .strip_prefix(b"\x93NUMPY")
        .ok_or("no \\x93NUMPY magic")?;
    let (&major, rest) = rest.split_first().ok_or("cut short in the version")?;
    let (_minor, rest) = rest.split_first().ok_or("cut short in the version")?;
    let (len, start) = match major {
        1 => {
            let b = rest.get(..2).ok_or("cut short in the header length")?;
            let mut n = [0u8; 2];
            n.copy_from_slice(b);
            (usize::from(u16::from_le_bytes(n)), 10)
        }
        2 | 3 => {
            let b = rest.get(..4).ok_or("cut short in the header length")?;
            let mut n = [0u8; 4];
            n.copy_from_slice(b);
            let n = u32::from_le_bytes(n);
            (usize::try_from(n).map_err(|_| "header length")?, 12)
        }
        v => return Err(format!("format version {v} is not read")),
    };
    if len > MAX_HEADER_BYTES {
        return Err(format!(
            "a header of {len} bytes, more than {MAX_HEADER_BYTES}"
        ));
    }
    let text = bytes
        .get(start..start + len)
        .ok_or("the file ends inside the header")?;
    let text = if major == 3 {
        std::str::from_utf8(text)
            .map_err(|_| "a header that is not UTF-8")?
            .to_owned()
    } else {
        text.iter().map(|&b| char::from(b)).collect()
    };
    let lit = Parser {
        s: text.trim_end().as_bytes(),
        pos: 0,
    }
    .parse()?;
    let Lit::Dict(items) = lit else {
        return Err("a header that is not a dict".into());
    };
    let get = |k: &str| {
        items
            .iter()
            .find(|(key, _)| matches!(key, Lit::Str(s) if s == k))
            .map(|(_, v)| v)
    };
    if items.len() != 3 {
        return Err("a header whose keys are not descr, fortran_order and shape".into());
    }
    let descr = get("descr").ok_or("no descr")?;
    if !matches!(get("fortran_order"), Some(Lit::Bool(_))) {
        return Err("fortran_order is not a bool".into());
    }
    let shape = match get("shape") {
        Some(Lit::Tuple(items)) => items
            .iter()
            .map(|i| match i {
                Lit::Int(n) => Ok(*n),
                _ => Err("a shape item that is not an int".to_owned()),
            })
            .collect::<Result<Vec<u64>, String>>()?,
        _ => return Err("shape is not a tuple".into()),
    };
    Ok(Header {
        itemsize: descr_itemsize(descr, 0)?,
        shape,
        data_start: start + len,
    })
}

/// The element size of a descr (`'<f8'`, `'|O'`, `[('a', '<i4'), ('b', '<f4', (2,))]`), or
/// `None` when the dtype holds Python objects.
fn descr_itemsize(descr: &Lit, depth: usize) -> Result<Option<u64>, String> {
    if depth > MAX_LITERAL_DEPTH {
        return Err("a dtype nested too deeply".into());
    }
    match descr {
        Lit::Str(s) => simple_itemsize(s),
        Lit::List(fields) => {
            let mut total = 0u64;
            for f in fields {
                let Lit::Tuple(parts) = f else {
                    return Err("a structured dtype field that is not a tuple".into());
                };
                let (Some(_name), Some(ty)) = (parts.first(), parts.get(1)) else {
                    return Err("a structured dtype field without a type".into());
                };
                let Some(size) = descr_itemsize(ty, depth + 1)? else {
                    return Ok(None);
                };
                let count = match parts.get(2) {
                    None => 1,
                    Some(Lit::Tuple(dims)) => dims.iter().try_fold(1u64, |acc, d| match d {
                        Lit::Int(n) => acc.checked_mul(*n).ok_or("a field shape overflows"),
                        _ => Err("a field shape that is not ints"),
                    })?,
                    Some(Lit::Int(n)) => *n,
                    Some(_) => return Err("a field shape that is not ints".into()),
                };
                if parts.len() > 3 {
                    return Err("a structured dtype field of more than 3 items".into());
                }
                total = size
                    .checked_mul(count)
                    .and_then(|s| total.checked_add(s))
                    .ok_or("a structured dtype whose size overflows")?;
            }
            Ok(Some(total))
        }
        _ => Err("a descr that is neither a str nor a list".into()),
    }
}

/// The element size of a dtype string (`<f8`, `|u1`, `<U3`, `|S5`, `<M8[ns]`, `|O`).
fn simple_itemsize(s: &str) -> Result<Option<u64>, String> {
    let body = s.strip_prefix(['<', '>', '|', '=']).unwrap_or(s);
    let body = match body.find('[') {
        Some(i) if body.ends_with(']') => body.get(..i).unwrap_or(body),
        _ => body,
    };
    let mut chars = body.chars();
    let kind = chars.next().ok_or("an empty dtype")?;
    let digits = chars.as_str();
    let n = if digits.is_empty() {
        None
    } else {
        Some(digits.parse::<u64>().map_err(|_| format!("dtype {s:?}"))?)
    };
    Ok(Some(match (kind, n) {
        ('O', _) => return Ok(None),
        ('b' | 'i' | 'u' | 'f' | 'c' | 'S' | 'a' | 'V' | 'M' | 'm', Some(n)) => n,
        ('?', None) => 1,
        ('U', Some(n)) => n.checked_mul(4).ok_or("dtype size overflows")?,
        _ => return Err(format!("dtype {s:?} is not read")),
    }))
}

/// A parser of the header's Python literal (strs without escapes, ints, True, False, None,
/// tuples, lists, dicts), at most [`MAX_LITERAL_DEPTH`] deep.
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
        while self
            .s
            .get(self.pos)
            .is_some_and(|b| b.is_ascii_whitespace())
        {
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
                Ok(Lit::Str(String::from_utf8_lossy(text).into_owned()))
            }
            b'0'..=b'9' => {
                let start = self.pos;
                while self.s.get(self.pos).is_some_and(u8::is_ascii_digit) {
                    self.pos += 1;
                }
                let text = std::str::from_utf8(self.s.get(start..self.pos).unwrap_or_default())
                    .unwrap_or_default();
                // numpy writes Python ints; `L` is Python 2's long suffix.
                if self.s.get(self.pos) == Some(&b'L') {
                    self.pos += 1;
                }
                text.parse()
                    .map(Lit::Int)
                    .map_err(|_| "an int over 64 bits".into())
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

/// Checks an `.npy` file (or an npz member named `entry`).
pub(crate) fn scan_npy(bytes: &[u8], entry: &str, report: &mut Report<'_>) {
    let header = match read_header(bytes) {
        Ok(h) => h,
        Err(why) => return report.refuse("npy_header", "malformed", why, entry, None),
    };
    let data = bytes.get(header.data_start..).unwrap_or_default();
    let numel = header
        .shape
        .iter()
        .try_fold(1u64, |acc, &n| acc.checked_mul(n));
    match header.itemsize {
        None => {
            report.pickle(
                &format!("{entry}{}", if entry.is_empty() { "" } else { ":" }),
                data,
                false,
            );
        }
        Some(itemsize) => {
            let want = numel.and_then(|n| n.checked_mul(itemsize));
            if want != Some(data.len() as u64) {
                report.refuse(
                    "npy_size_mismatch",
                    "malformed",
                    format!(
                        "shape {:?} of {itemsize}-byte elements needs {} bytes, the file holds {}",
                        header.shape,
                        want.map_or("more than 2**64".to_owned(), |w| w.to_string()),
                        data.len()
                    ),
                    entry,
                    Some(header.data_start as u64),
                );
            }
        }
    }
}

/// Checks an `.npz` file: every member an `.npy`.
pub(crate) fn scan_npz<R: Read + Seek>(mut archive: zip::ZipArchive<R>, report: &mut Report<'_>) {
    let count = archive.len();
    for i in 0..count {
        let limits = report.limits;
        let (name, data) = {
            let file = match archive.by_index(i) {
                Ok(f) => f,
                Err(e) => {
                    return report.refuse("zip_malformed", "malformed", e.to_string(), "", None)
                }
            };
            let name = String::from_utf8_lossy(file.name_raw()).into_owned();
            if !matches!(
                file.compression(),
                zip::CompressionMethod::Stored | zip::CompressionMethod::Deflated
            ) || file.encrypted()
            {
                report.incomplete(
                    "not_understood",
                    "a compression method not read",
                    &name,
                    None,
                );
                continue;
            }
            let compressed = file.compressed_size();
            match super::decompress::read_bounded(file, compressed, &limits) {
                Ok(d) => (name, d),
                Err(
                    super::decompress::Failure::Malformed(why)
                    | super::decompress::Failure::Trailing(why),
                ) => return report.refuse("zip_malformed", "malformed", why, &name, None),
                Err(super::decompress::Failure::Limit(why)) => {
                    return report.refuse("container_limit", "limit_exceeded", why, &name, None)
                }
            }
        };
        scan_npy(&data, &name, report);
    }
}
