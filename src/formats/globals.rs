//! A listing pass over a pickle's opcodes after the scan refused it: the globals the rest of the
//! stream names, so that one report lists everything a file would make a loader import. It
//! runs nothing and checks nothing; it only steps from opcode to opcode as
//! [`crate::dis`] lists them, reading GLOBAL and INST names and the two str a STACK_GLOBAL
//! takes when they were pushed just before it (the form every pickler writes; a name taken
//! from the memo is shown as `?`).

use crate::opcode::{Arg, Opcode};

/// Most globals listed after a refusal, so a hostile stream of millions cannot make the report
/// grow without bound.
pub(crate) const MAX_LISTED: usize = 4096;

/// `(module, name, offset)` of each global named from the opcode at `from` (the refused one)
/// to the first STOP, the end of the input, or a byte that is no opcode.
pub(crate) fn globals_after(input: &[u8], from: u64) -> Vec<(String, String, u64)> {
    let mut out = Vec::new();
    let Ok(mut pos) = usize::try_from(from) else {
        return out;
    };
    // The last two str pushed directly, and where the opcode after them is.
    let mut strs: [Option<(usize, usize)>; 2] = [None, None];
    while out.len() < MAX_LISTED {
        let at = pos;
        let Some(op) = input.get(pos).copied().and_then(Opcode::from_byte) else {
            break;
        };
        pos += 1;
        let (arg_start, arg_end) = match arg_span(input, pos, op.arg()) {
            Some(span) => span,
            None => break,
        };
        pos = arg_end;
        match op {
            Opcode::Global | Opcode::Inst => {
                let text = input.get(arg_start..arg_end).unwrap_or_default();
                let mut lines = text.split(|&b| b == b'\n');
                let module = show(lines.next().unwrap_or_default());
                let name = show(lines.next().unwrap_or_default());
                out.push((module, name, at as u64));
                strs = [None, None];
            }
            Opcode::ShortBinunicode | Opcode::Binunicode | Opcode::Binunicode8 => {
                let len_bytes = match op.arg() {
                    Arg::Len1 => 1,
                    Arg::Len4 => 4,
                    _ => 8,
                };
                strs = [strs[1], Some((arg_start + len_bytes, arg_end))];
            }
            Opcode::Memoize | Opcode::Binput | Opcode::LongBinput | Opcode::Put => {}
            Opcode::StackGlobal => {
                let text = |s: Option<(usize, usize)>| {
                    s.and_then(|(a, b)| input.get(a..b))
                        .map_or("?".to_owned(), show)
                };
                out.push((text(strs[0]), text(strs[1]), at as u64));
                strs = [None, None];
            }
            Opcode::Stop => break,
            _ => strs = [None, None],
        }
    }
    out
}

/// Where the argument of an opcode at `pos` lies (`(start, end)`, the length prefix
/// included), or `None` when the input cuts it short.
fn arg_span(input: &[u8], pos: usize, arg: Arg) -> Option<(usize, usize)> {
    let len_at = |n: usize| -> Option<usize> {
        let b = input.get(pos..pos.checked_add(n)?)?;
        let mut v = [0u8; 8];
        v.get_mut(..n)?.copy_from_slice(b);
        usize::try_from(u64::from_le_bytes(v)).ok()
    };
    let end = match arg {
        Arg::Line => pos + memchr_nl(input.get(pos..)?)? + 1,
        Arg::TwoLines => {
            let first = pos + memchr_nl(input.get(pos..)?)? + 1;
            first + memchr_nl(input.get(first..)?)? + 1
        }
        Arg::Len1 => pos.checked_add(1)?.checked_add(len_at(1)?)?,
        Arg::Len4 => pos.checked_add(4)?.checked_add(len_at(4)?)?,
        Arg::Len8 => pos.checked_add(8)?.checked_add(len_at(8)?)?,
        fixed => pos + usize::from(fixed.fixed_size().unwrap_or(0)),
    };
    (end <= input.len()).then_some((pos, end))
}

fn memchr_nl(s: &[u8]) -> Option<usize> {
    s.iter().position(|&b| b == b'\n')
}

/// A name as reports show it: escaped and cut as error messages show text from the input.
fn show(bytes: &[u8]) -> String {
    crate::error::escape_bytes_for_display(bytes)
}
