//! A listing of a pickle's opcodes, one line each, as CPython's `pickletools.dis` prints them
//! (`python3 -m pickletools FILE`): nothing is executed, no policy applies, no value is built.
//! For an engineer who wants to see what a file says before (or instead of) decoding it.
//!
//! Each line is `OFFSET: NAME ARGUMENT`, indented by one step per open MARK (at most
//! [`MAX_INDENT`] steps) as `pickletools.dis` indents. Arguments: ints in decimal, a BINFLOAT
//! as Python's `repr`, LONG1 / LONG4 as their int (up to [`LONG_SHOWN_BYTES`] bytes), text
//! lines, strings and bytes as Python byte-string escapes cut at [`SHOWN_BYTES`] bytes (with the
//! full length after a cut), GLOBAL and INST as `module name`.
//! FRAME is listed like any opcode (frames are not checked), and a stream of pickles is listed
//! one after another, with an empty line between two.
//!
//! The listing stops at the first byte that is not an opcode or at an argument cut short by the
//! end of the input, with that error. It never reads past the input and holds one line at a
//! time: its output is at most a few hundred bytes per opcode (a BINUNICODE line shows at most
//! 64 bytes of its text, escaped).

use std::fmt::Write as _;
use std::io::Write;

use num_bigint::BigInt;

use crate::error::{Error, ErrorKind};
use crate::opcode::{Arg, Opcode};
use crate::text::float_repr;
use crate::Result;

/// Bytes of a text, string or bytes argument that a line shows.
pub const SHOWN_BYTES: usize = 64;

/// The longest LONG1 / LONG4 argument shown as its int (in bytes); a longer one shows its size.
pub const LONG_SHOWN_BYTES: usize = 256;

/// The deepest indentation shown, in MARK levels.
pub const MAX_INDENT: usize = 32;

/// Writes the listing of `input` to `out`, one line per opcode (see the module documentation).
///
/// Gives `Ok(Err(e))` for a listing the input stops: [`ErrorKind::UnknownOpcode`] at a byte
/// that is no opcode, [`ErrorKind::Truncated`] at an opcode whose argument the input cuts
/// short, [`ErrorKind::InvalidNumber`] for a BINSTRING of negative length; the lines before it
/// are written.
///
/// # Errors
/// The first error of `out` (nothing more is written after it).
pub fn write_dis(input: &[u8], out: &mut dyn Write) -> std::io::Result<Result<()>> {
    let mut lister = Lister {
        input,
        pos: 0,
        depth: 0,
    };
    let mut line = String::new();
    while lister.pos < input.len() {
        line.clear();
        if let Err(e) = lister.next(&mut line) {
            return Ok(Err(e));
        }
        out.write_all(line.as_bytes())?;
    }
    Ok(Ok(()))
}

/// Where the listing is: the next opcode's offset and the open MARKs.
struct Lister<'a> {
    input: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Lister<'_> {
    /// The line of the opcode at `pos` into `line` (ending in a newline); moves past it.
    fn next(&mut self, line: &mut String) -> Result<()> {
        let input = self.input;
        let at = self.pos;
        let byte = input.get(at).copied().unwrap_or_default();
        let op = Opcode::from_byte(byte)
            .ok_or_else(|| Error::new(ErrorKind::UnknownOpcode, at as u64, Some(byte)))?;
        let truncated = || Error::new(ErrorKind::Truncated, at as u64, Some(byte));
        let mut pos = at + 1;
        if pops_mark(op) {
            self.depth = self.depth.saturating_sub(1);
        }
        let _ = write!(line, "{at:>8}: ");
        for _ in 0..self.depth.min(MAX_INDENT) {
            line.push_str("    ");
        }
        line.push_str(op.name());
        let arg = op.arg();
        let fixed = |n: usize, pos: &mut usize| -> Result<[u8; 8]> {
            let bytes = input.get(*pos..*pos + n).ok_or_else(truncated)?;
            let mut buf = [0u8; 8];
            for (slot, b) in buf.iter_mut().zip(bytes) {
                *slot = *b;
            }
            *pos += n;
            Ok(buf)
        };
        match arg {
            Arg::None => {}
            Arg::U1 | Arg::U2 | Arg::U4 | Arg::U8 => {
                let n = usize::from(arg.fixed_size().unwrap_or(0));
                let v = u64::from_le_bytes(fixed(n, &mut pos)?);
                let _ = write!(line, " {v}");
            }
            Arg::I4 => {
                let [a, b, c, d, ..] = fixed(4, &mut pos)?;
                let _ = write!(line, " {}", i32::from_le_bytes([a, b, c, d]));
            }
            Arg::F8 => {
                let v = f64::from_bits(u64::from_be_bytes(fixed(8, &mut pos)?));
                line.push(' ');
                line.push_str(&float_repr(v));
            }
            Arg::Line | Arg::TwoLines => {
                let count = if arg == Arg::TwoLines { 2 } else { 1 };
                for _ in 0..count {
                    let rest = input.get(pos..).unwrap_or_default();
                    let n = rest
                        .iter()
                        .position(|&b| b == b'\n')
                        .ok_or_else(truncated)?;
                    line.push(' ');
                    shown(line, rest.get(..n).unwrap_or_default());
                    pos += n + 1;
                }
            }
            Arg::Len1 | Arg::Len4 | Arg::Len8 => {
                let width = match arg {
                    Arg::Len1 => 1,
                    Arg::Len4 => 4,
                    _ => 8,
                };
                let raw = fixed(width, &mut pos)?;
                let mut n = u64::from_le_bytes(raw);
                if op == Opcode::Binstring {
                    let [a, b, c, d, ..] = raw;
                    n = u64::try_from(i32::from_le_bytes([a, b, c, d]))
                        .map_err(|_| Error::new(ErrorKind::InvalidNumber, at as u64, Some(byte)))?;
                }
                let rest = input.get(pos..).unwrap_or_default();
                let data = usize::try_from(n)
                    .ok()
                    .and_then(|n| rest.get(..n))
                    .ok_or_else(truncated)?;
                pos += data.len();
                line.push(' ');
                if matches!(op, Opcode::Long1 | Opcode::Long4) && data.len() <= LONG_SHOWN_BYTES {
                    // The int, as pickletools shows it (decimal text of at most ~620 digits).
                    let _ = write!(line, "{}", BigInt::from_signed_bytes_le(data));
                } else if matches!(op, Opcode::Long1 | Opcode::Long4) {
                    let _ = write!(line, "({}-byte int)", data.len());
                } else {
                    shown(line, data);
                }
            }
        }
        line.push('\n');
        match op {
            Opcode::Mark => self.depth += 1,
            Opcode::Stop => {
                self.depth = 0;
                if pos < input.len() {
                    line.push('\n');
                }
            }
            _ => {}
        }
        self.pos = pos;
        Ok(())
    }
}

/// The opcodes whose arguments on the stack begin at the topmost MARK (`stack_before` holds
/// `markobject` in `Lib/pickletools.py`).
fn pops_mark(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::Tuple
            | Opcode::List
            | Opcode::Dict
            | Opcode::Appends
            | Opcode::Setitems
            | Opcode::Additems
            | Opcode::Frozenset
            | Opcode::PopMark
            | Opcode::Inst
            | Opcode::Obj
    )
}

/// `data` as a Python bytes literal without the `b` (`'a\n'`), its first [`SHOWN_BYTES`] bytes
/// only, followed by `... (N bytes)` when cut.
fn shown(line: &mut String, data: &[u8]) {
    let cut = data.get(..SHOWN_BYTES).unwrap_or(data);
    line.push('\'');
    for &b in cut {
        match b {
            b'\\' => line.push_str("\\\\"),
            b'\'' => line.push_str("\\'"),
            b'\n' => line.push_str("\\n"),
            b'\r' => line.push_str("\\r"),
            b'\t' => line.push_str("\\t"),
            0x20..=0x7e => line.push(char::from(b)),
            _ => {
                let _ = write!(line, "\\x{b:02x}");
            }
        }
    }
    line.push('\'');
    if cut.len() < data.len() {
        let _ = write!(line, "... ({} bytes)", data.len());
    }
}
