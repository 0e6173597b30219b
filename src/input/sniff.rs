//! Input that is not a pickle at all: empty input, text, JSON, an archive, compressed data or
//! a NumPy file, refused as [`ErrorKind::NotAPickle`] (saying what it looks like) instead of
//! the refusal its first bytes meet read as opcodes ("memo index 101 was never set" for
//! `hello`, a persistent id for a zip archive).
//!
//! The rule looks only at the start of the input, and only at input that was refused anyway,
//! at its first opcode: it changes which refusal is reported, never whether the input is
//! refused. Every pickle CPython writes starts with an opcode that pushes a value or a MARK
//! (PROTO at protocol 2 and later; at 0 and 1 `(`, `]`, `}`, `)`, `I`, `S`, `V`, `c`, `N`,
//! ...): input is not a pickle when
//! - it is empty;
//! - its first byte is no opcode, or an opcode that needs something a pickle's start cannot
//!   have (a value on the stack, a MARK, a memo entry): always refused at offset 0;
//! - it starts like a zip archive (`PK\x03\x04`, `PK\x05\x06`, `PK\x07\x08`) and is refused
//!   at offset 0 (PERSID, refused under every policy), unless what follows `P` is an ASCII
//!   line, which CPython could read as the persistent id of a protocol-0 pickle;
//! - it starts like bzip2 data (`BZh1`..`BZh9` and a block or end magic; no CPython pickle
//!   starts with BINBYTES, a protocol-3 opcode after PROTO) and is refused at offset 0;
//! - it starts like zstd data (`\x28\xb5\x2f\xfd`: MARK, then a byte that is no opcode) and is
//!   refused at offset 0 or 1.
//!
//! Limit refusals are kept as they are (the input size, say, is refused before anything is
//! read). Text and JSON that start with a byte a protocol-0 pickle can start with (`I`, `S`,
//! `(`...) keep the pickle's refusal: protocol-0 pickles are text themselves.
//!
//! Applied to the scan's verdict ([`crate::Scanner::run`]); the decode reports the scan's
//! refusal whenever the scan refuses, so the two agree. What decides anything beyond the
//! message (Mitogen's dispositions) looks at the refusal underneath
//! ([`Error::read_as_pickle`]).

use crate::error::{Category, Error, ErrorKind};
use crate::opcode::Opcode;

/// How many bytes of the input a [`ErrorKind::NotAPickle`] message shows.
const SHOWN: usize = 16;

/// `refusal` of `input`, or [`ErrorKind::NotAPickle`] in its place when the input is not a
/// pickle (module docs).
#[cold]
pub(crate) fn explain(input: &[u8], refusal: Error) -> Error {
    match looks_like(input, &refusal) {
        Some(looks_like) => Error::new(
            ErrorKind::NotAPickle {
                looks_like,
                start: escape_start(input),
            },
            0,
            None,
        )
        .read_as(refusal),
        None => refusal,
    }
}

/// What the input looks like, when it is not a pickle (module docs).
fn looks_like(input: &[u8], refusal: &Error) -> Option<&'static str> {
    if matches!(refusal.category(), Category::LimitExceeded | Category::Io) {
        return None;
    }
    let Some(&first) = input.first() else {
        return Some("the input is empty");
    };
    if input.starts_with(b"\x28\xb5\x2f\xfd") {
        return (refusal.offset() <= 1).then_some("zstd-compressed data");
    }
    if refusal.offset() != 0 {
        return None;
    }
    let zip = [&b"PK\x03\x04"[..], b"PK\x05\x06", b"PK\x07\x08"];
    if zip.iter().any(|m| input.starts_with(m)) {
        let line = input.get(1..).unwrap_or_default();
        let ascii_line = line
            .iter()
            .position(|&b| b == b'\n')
            .is_some_and(|end| line.get(..end).is_some_and(<[u8]>::is_ascii));
        return (!ascii_line)
            .then_some("a zip archive (torch.save and .npz files are zip archives)");
    }
    if let [b'B', b'Z', b'h', b'1'..=b'9', rest @ ..] = input {
        if rest.starts_with(b"1AY&SY") || rest.starts_with(b"\x17rE8P\x90") {
            return Some("bzip2-compressed data");
        }
    }
    if Opcode::from_byte(first).is_some_and(can_start) {
        return None;
    }
    Some(if input.starts_with(b"\x1f\x8b") {
        "gzip-compressed data"
    } else if input.starts_with(b"\xfd7zXZ\x00") {
        "xz-compressed data"
    } else if input.starts_with(b"\x93NUMPY") {
        "a NumPy .npy file"
    } else if matches!(
        input.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{' | b'[')
    ) {
        "JSON"
    } else if is_text(input) {
        "text"
    } else {
        "binary data: no pickle starts with its first byte"
    })
}

/// Whether a pickle can start with `op`: it needs nothing on the stack, no MARK and no memo
/// entry (it pushes a value or a MARK, or sets the protocol or a frame).
fn can_start(op: Opcode) -> bool {
    use Opcode as O;
    !matches!(
        op,
        O::Stop
            | O::Pop
            | O::PopMark
            | O::Dup
            | O::Append
            | O::Appends
            | O::List
            | O::Tuple
            | O::Tuple1
            | O::Tuple2
            | O::Tuple3
            | O::Dict
            | O::Setitem
            | O::Setitems
            | O::Additems
            | O::Frozenset
            | O::Build
            | O::Reduce
            | O::Newobj
            | O::NewobjEx
            | O::StackGlobal
            | O::Inst
            | O::Obj
            | O::Get
            | O::Binget
            | O::LongBinget
            | O::Put
            | O::Binput
            | O::LongBinput
            | O::Memoize
            | O::Binpersid
            | O::ReadonlyBuffer
    )
}

/// Whether the first bytes read as text: UTF-8 (a character cut at the end of what is looked
/// at allowed) with no control characters but tab, newline and carriage return.
fn is_text(input: &[u8]) -> bool {
    let head = input.get(..input.len().min(256)).unwrap_or_default();
    let valid = match std::str::from_utf8(head) {
        Ok(s) => s,
        Err(e) if e.error_len().is_none() => {
            std::str::from_utf8(head.get(..e.valid_up_to()).unwrap_or_default()).unwrap_or("")
        }
        Err(_) => return false,
    };
    !valid.is_empty()
        && valid
            .chars()
            .all(|c| !c.is_control() || matches!(c, '\t' | '\n' | '\r'))
}

/// The first [`SHOWN`] bytes of the input: printable ASCII as it is, other bytes as `\xNN`.
fn escape_start(input: &[u8]) -> String {
    let head = input.get(..input.len().min(SHOWN)).unwrap_or_default();
    let mut out = String::new();
    for &b in head {
        match b {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(char::from(b));
            }
            b' '..=b'~' => out.push(char::from(b)),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    if input.len() > SHOWN {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    /// Every opcode [`can_start`] rules out is refused at offset 0 on its own and before any
    /// other byte, by the scan and the decode: the rule never reports anything but a
    /// refusal of the first opcode.
    #[test]
    fn no_pickle_starts_with_an_opcode_ruled_out() {
        let policy = Policy::data();
        for b in 0..=255u8 {
            let Some(op) = Opcode::from_byte(b) else {
                continue;
            };
            if can_start(op) {
                continue;
            }
            for tail in [&b""[..], b"\x00\x00\x00\x00\n\n.", b"aaaaaaaaaa\n.", b"N."] {
                let input = [&[b][..], tail].concat();
                let e = crate::Decoder::new(&input, &policy)
                    .decode()
                    .expect_err("a ruled-out first opcode was accepted");
                let under = e.read_as_pickle().expect("not reported as not_a_pickle");
                assert_eq!(under.offset(), 0, "{op:?} {tail:?}: {under}");
                assert_eq!(e.kind().name(), "not_a_pickle");
            }
        }
    }

    #[test]
    fn the_start_is_escaped_and_cut() {
        assert_eq!(escape_start(b"ab\"\\\x00\xff"), "ab\\\"\\\\\\x00\\xff");
        assert_eq!(escape_start(&[b'x'; 20]), format!("{}...", "x".repeat(16)));
    }
}
