//! Protocol 2's spellings ([`Protocol::V2`]): globals by GLOBAL under their Python 2 names,
//! and bytes as `_codecs.encode(<latin-1 text>, 'latin1')`, as CPython's pickler writes them
//! below protocol 3.

use super::writer::{Fixed, Writer};
use super::{python2_name, python3_name};
use crate::opcode::Opcode;
use crate::output::walk::Marks;
use crate::value::PyBytes;

#[cfg(doc)]
use super::Protocol;

impl Writer {
    /// GLOBAL of the Python 2 name ([`python2_name`]) of the global CPython 3 finds as
    /// `module.name`, as CPython's pickler writes it at protocol 2, when that name is ASCII,
    /// holds no newline and reads back as the same global.
    pub(super) fn global2(&mut self, module: &str, name: &str) {
        let (m2, n2) = python2_name(module, name);
        // GLOBAL is a text line; below protocol 4 CPython's `find_class` looks the name up
        // with one `getattr`, so a dotted (nested) name is not found.
        let line = |t: &str| t.is_ascii() && !t.contains('\n');
        if !(line(m2) && line(n2)) || n2.contains('.') || python3_name(m2, n2) != (module, name) {
            self.fail("a global that has no protocol-2 name reading back as itself");
            return;
        }
        self.out.push(Opcode::Global.byte());
        for t in [m2, n2] {
            self.out.extend_from_slice(t.as_bytes());
            self.out.push(b'\n');
        }
    }

    /// bytes at protocol 2: `_codecs.encode(<latin-1 text>, 'latin1')` (BINUNICODE of each
    /// byte as the code point of the same value), or `__builtin__.bytes()` when empty, as
    /// CPython's `save_bytes` writes them below protocol 3.
    /// Bytes the document holds as their Latin-1 text (read from protocol 2) are written as
    /// that text, with no transcoding.
    pub(super) fn bytes2(&mut self, marks: &mut Marks, b: PyBytes<'_>) {
        if b.is_empty() {
            self.fixed(marks, Fixed::Bytes);
            self.out
                .extend_from_slice(&[Opcode::EmptyTuple.byte(), Opcode::Reduce.byte()]);
            return;
        }
        let b = match (b.latin1_text(), b.as_slice()) {
            (Some(text), _) => {
                let Ok(n) = u32::try_from(text.len()) else {
                    self.fail("a bytes whose latin-1 text is 4 GiB or more");
                    return;
                };
                self.fixed(marks, Fixed::Encode);
                self.out.push(Opcode::Binunicode.byte());
                self.out.extend_from_slice(&n.to_le_bytes());
                self.out.extend_from_slice(text);
                self.fixed(marks, Fixed::Latin1);
                self.out
                    .extend_from_slice(&[Opcode::Tuple2.byte(), Opcode::Reduce.byte()]);
                return;
            }
            (None, Some(b)) => b,
            // Raw bytes are always a slice.
            (None, None) => return,
        };
        // Counted in u8 lanes over runs of 255 bytes, which the compiler vectorises (as the
        // decoder's `latin1_len`).
        let high: usize = b
            .chunks(255)
            .map(|run| usize::from(run.iter().fold(0u8, |n, &c| n + (c >> 7))))
            .sum();
        let Some(n) = b
            .len()
            .checked_add(high)
            .and_then(|n| u32::try_from(n).ok())
        else {
            self.fail("a bytes whose latin-1 text is 4 GiB or more");
            return;
        };
        self.fixed(marks, Fixed::Encode);
        self.out.push(Opcode::Binunicode.byte());
        self.out.extend_from_slice(&n.to_le_bytes());
        latin1_to_utf8(b, n as usize, &mut self.out);
        self.fixed(marks, Fixed::Latin1);
        self.out
            .extend_from_slice(&[Opcode::Tuple2.byte(), Opcode::Reduce.byte()]);
    }
}

/// Appends the UTF-8 of `b` read as Latin-1 (each byte the code point of its value), which is
/// `len` bytes long (`b.len()` plus the bytes of 0x80 and above). Without a branch per byte:
/// each byte writes two (its lead or itself, then its continuation) and the cursor moves by one
/// or two, so the next byte overwrites the second of an ASCII byte; one byte of slack at the
/// end is cut off after. Random bytes (Mitogen's file transfers) would mispredict a branch on
/// every other byte.
pub(super) fn latin1_to_utf8(b: &[u8], len: usize, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + len + 1, 0);
    if let Some(dst) = out.get_mut(start..) {
        let mut j = 0usize;
        for &c in b {
            let high = c >> 7;
            // The lead byte 0xC2 / 0xC3 of a byte of 0x80 and above, else the byte itself.
            let first = c ^ (high * (c ^ (0xc0 | (c >> 6))));
            if let Some([x, y]) = dst.get_mut(j..j + 2) {
                *x = first;
                *y = 0x80 | (c & 0x3f);
            }
            j += 1 + usize::from(high);
        }
    }
    out.truncate(start + len);
}

#[cfg(test)]
mod tests {
    use super::latin1_to_utf8;

    /// The branch-free encoder gives what `char::from(byte)` encoded as UTF-8 gives, for every
    /// byte value, at every length and after text already in the buffer.
    #[test]
    fn latin1_to_utf8_is_chars_encoded() {
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        for len in 0..all.len() {
            let b = all.get(..len).unwrap_or_default();
            let want: String = b.iter().map(|&c| char::from(c)).collect();
            let high = b.iter().filter(|&&c| c >= 0x80).count();
            let mut out = b"prefix".to_vec();
            latin1_to_utf8(b, b.len() + high, &mut out);
            assert_eq!(out.get(6..), Some(want.as_bytes()), "{len}");
            assert_eq!(out.get(..6), Some(&b"prefix"[..]));
        }
    }
}
