//! The text of typed JSON's scalar nodes, and JSON's string and hex escapes.

use std::fmt::Write as _;

use crate::text::float_repr;
use crate::value::Value;

/// The first `room` bytes of `s`, or a few more to end at a char boundary (all of `s` if it
/// is shorter): what a sort key needs of a text, since its JSON is at least as long.
pub(super) fn text_prefix(s: &str, room: usize) -> &str {
    if room >= s.len() {
        return s;
    }
    let end = (room..=s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    s.get(..end).unwrap_or(s)
}

/// Writes `{"type":"NAME"` for `v` (the fields and the closing brace follow): the Python type
/// name ([`Value::type_name`]), but `none` for None, as docs/typed-json.md spells it.
#[inline]
pub(super) fn write_type(out: &mut String, v: Value<'_>) {
    out.push_str("{\"type\":\"");
    out.push_str(match v {
        Value::None => "none",
        v => v.type_name(),
    });
    out.push('"');
}

/// Writes the fields and the closing brace of a value that refers to no other node and is
/// not a big int (None, bool, int, float, complex, str, bytes, bytearray), after its
/// [`write_type`] (and id), and returns true; writes nothing and returns false for any other
/// value. `room` is the writer's `key_room`: a text or bytes value is written only as far as a
/// sort key needs it (each byte is at least one byte of JSON, two of hex).
#[inline]
pub(super) fn write_scalar_fields(out: &mut String, v: Value<'_>, room: usize) -> bool {
    let prefix_len = |len: usize| -> usize { len.min(room.saturating_add(1) / 2 + 1) };
    let bytes_prefix = |b: &[u8]| -> usize { prefix_len(b.len()) };
    match v {
        Value::None => out.push('}'),
        Value::Bool(b) => {
            let _ = write!(out, ",\"value\":{b}}}");
        }
        Value::Int(i) => {
            out.push_str(",\"value\":\"");
            out.push_str(itoa::Buffer::new().format(i));
            out.push_str("\"}");
        }
        Value::Float(x) => {
            write_float_fields(out, x);
            out.push('}');
        }
        Value::Complex(re, im) => {
            out.push_str(",\"real\":{\"type\":\"float\"");
            write_float_fields(out, re);
            out.push_str("},\"imag\":{\"type\":\"float\"");
            write_float_fields(out, im);
            out.push_str("}}");
        }
        Value::Str(s) => match s.as_str() {
            Some(t) => {
                out.push_str(",\"value\":");
                write_json_string(out, text_prefix(t, room));
                out.push('}');
            }
            None => {
                let b = s.as_bytes();
                out.push_str(",\"surrogatepass_hex\":\"");
                write_hex(out, b.get(..bytes_prefix(b)).unwrap_or(b));
                out.push_str("\"}");
            }
        },
        Value::Bytes(b) => {
            out.push_str(",\"hex\":\"");
            b.for_each_chunk_of(prefix_len(b.len()), |piece| write_hex(out, piece));
            out.push_str("\"}");
        }
        Value::ByteArray(b) => {
            out.push_str(",\"hex\":\"");
            write_hex(out, b.get(..bytes_prefix(b)).unwrap_or(b));
            out.push_str("\"}");
        }
        _ => return false,
    }
    true
}

fn write_float_fields(out: &mut String, x: f64) {
    let _ = write!(
        out,
        ",\"bits\":\"{:016x}\",\"repr\":\"{}\"",
        x.to_bits(),
        float_repr(x)
    );
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The two hex digits of every byte value.
#[allow(clippy::indexing_slicing)]
const HEX_PAIRS: [[u8; 2]; 256] = {
    let mut table = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        table[i] = [HEX[i >> 4], HEX[i & 15]];
        i += 1;
    }
    table
};

/// Appends the lowercase hex of `bytes`: 4 KiB at a time through a stack buffer, two digits per
/// byte from a table (a `String::push` per digit ran at ~22 instructions per input byte).
pub(crate) fn write_hex(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len() * 2);
    let mut buf = [0u8; 8192];
    for chunk in bytes.chunks(4096) {
        for (pair, &b) in buf.chunks_exact_mut(2).zip(chunk) {
            pair.copy_from_slice(&HEX_PAIRS.get(usize::from(b)).copied().unwrap_or_default());
        }
        // ASCII digits only: the check cannot fail.
        if let Ok(hex) = std::str::from_utf8(buf.get(..chunk.len() * 2).unwrap_or_default()) {
            out.push_str(hex);
        }
    }
}

/// Appends `s` as a JSON string literal (RFC 8259): `"` and `\` escaped, control characters as
/// `\n`, `\r`, `\t` or `\u00XX`; everything else as UTF-8.
pub(crate) fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let esc: Option<&str> = match b {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            b'\n' => Some("\\n"),
            b'\r' => Some("\\r"),
            b'\t' => Some("\\t"),
            0..=0x1f => None,
            _ => continue,
        };
        out.push_str(s.get(start..i).unwrap_or_default());
        match esc {
            Some(e) => out.push_str(e),
            None => {
                let _ = write!(out, "\\u{:04x}", b);
            }
        }
        start = i + 1;
    }
    out.push_str(s.get(start..).unwrap_or_default());
    out.push('"');
}
