//! A listing pass over a pickle's opcodes after the scan refused it: the globals the rest of the
//! stream names, so that one report lists everything a file would make a loader import. It
//! runs nothing and checks nothing; it only steps from opcode to opcode as
//! [`crate::dis`] lists them from the start of the pickle, reading GLOBAL and INST names and
//! the two str a STACK_GLOBAL takes: pushed just before it, or fetched from the memo where an
//! earlier str was put (BINGET after MEMOIZE: how protocol 4 and 5 name a second class of a
//! module already named). A name it cannot follow (a str made by a call, or taken off the
//! stack out of order) is listed as [`UNREAD`].

use std::collections::HashMap;

use crate::opcode::{Arg, Opcode};

/// Most globals listed after a refusal, so a hostile stream of millions cannot make the report
/// grow without bound.
pub(crate) const MAX_LISTED: usize = 4096;

/// Most memo entries the listing follows (each takes a few bytes); past it a name fetched from
/// the memo is [`UNREAD`].
const MAX_MEMO: usize = 1 << 20;

/// The module and name of a STACK_GLOBAL whose str the listing could not follow.
pub(crate) const UNREAD: &str = "?";

/// What the listing found from the refused opcode on.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Listing {
    /// `(module, name, offset)` of each global named.
    pub(crate) globals: Vec<(String, String, u64)>,
    /// Whether a Python 2 str (STRING, BINSTRING, SHORT_BINSTRING) holds a byte above 0x7F,
    /// which a policy reading them as ASCII refuses (`invalid_ascii`).
    pub(crate) python2_text: bool,
    /// Where the pickle ends (after its STOP), when the listing reached it.
    pub(crate) end: Option<usize>,
}

/// `(module, name, offset)` of each global named from the opcode at `from` (the refused one)
/// to the first STOP, the end of the input, or a byte that is no opcode. The opcodes before
/// `from` are stepped through too, for the strs they put in the memo.
#[cfg(test)]
pub(crate) fn globals_after(input: &[u8], from: u64) -> Vec<(String, String, u64)> {
    list_after(input, from).globals
}

/// [`globals_after`], and whether a Python 2 str after `from` is not ASCII.
pub(crate) fn list_after(input: &[u8], from: u64) -> Listing {
    let mut python2_text = false;
    let mut end = None;
    let mut out = Vec::new();
    let from = usize::try_from(from).unwrap_or(usize::MAX);
    let mut pos = 0usize;
    // The last two values pushed, when each was a str whose text is at (start, end); a value
    // that is not a str, or not known, is None. Every opcode but these and the memo's leaves
    // both unknown: the listing follows names pushed right before STACK_GLOBAL, as every
    // pickler writes them.
    let mut strs: [Option<(usize, usize)>; 2] = [None, None];
    // The memo, as CPython's dict of it: index -> the str there, if the value put was one.
    let mut memo: HashMap<u64, Option<(usize, usize)>> = HashMap::new();
    while out.len() < MAX_LISTED {
        let at = pos;
        let Some(op) = input.get(pos).copied().and_then(Opcode::from_byte) else {
            break;
        };
        pos += 1;
        let Some((arg_start, arg_end)) = arg_span(input, pos, op.arg()) else {
            break;
        };
        pos = arg_end;
        let arg = input.get(arg_start..arg_end).unwrap_or_default();
        match op {
            Opcode::Global | Opcode::Inst => {
                if at >= from {
                    let mut lines = arg.split(|&b| b == b'\n');
                    let module = show(lines.next().unwrap_or_default());
                    let name = show(lines.next().unwrap_or_default());
                    out.push((module, name, at as u64));
                }
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
            Opcode::Memoize | Opcode::Binput | Opcode::LongBinput | Opcode::Put => {
                let index = match op {
                    Opcode::Memoize => Some(memo.len() as u64),
                    Opcode::Put => std::str::from_utf8(arg)
                        .ok()
                        .and_then(|t| t.trim_end_matches('\n').parse::<u64>().ok()),
                    _ => Some(le_uint(arg)),
                };
                match index {
                    Some(i) if memo.len() < MAX_MEMO || memo.contains_key(&i) => {
                        memo.insert(i, strs[1]);
                    }
                    // An index the listing cannot read: what it holds is unknown from here.
                    _ => memo.clear(),
                }
            }
            Opcode::Binget | Opcode::LongBinget | Opcode::Get => {
                let index = match op {
                    Opcode::Get => std::str::from_utf8(arg)
                        .ok()
                        .and_then(|t| t.trim_end_matches('\n').parse::<u64>().ok()),
                    _ => Some(le_uint(arg)),
                };
                let fetched = index.and_then(|i| memo.get(&i).copied().flatten());
                strs = [strs[1], fetched];
            }
            Opcode::Frame => {}
            Opcode::String | Opcode::Binstring | Opcode::ShortBinstring => {
                if at >= from && !python2_text {
                    python2_text = match op {
                        Opcode::String => match arg.strip_suffix(b"\n") {
                            Some([q @ (b'\'' | b'"'), body @ .., last]) if q == last => {
                                crate::text::decode_string_escape(body).is_ok_and(|b| !b.is_ascii())
                            }
                            _ => false,
                        },
                        Opcode::Binstring => !arg.get(4..).unwrap_or_default().is_ascii(),
                        _ => !arg.get(1..).unwrap_or_default().is_ascii(),
                    };
                }
                strs = [None, None];
            }
            Opcode::StackGlobal => {
                if at >= from {
                    let text = |s: Option<(usize, usize)>| {
                        s.and_then(|(a, b)| input.get(a..b))
                            .map_or(UNREAD.to_owned(), show)
                    };
                    out.push((text(strs[0]), text(strs[1]), at as u64));
                }
                strs = [None, None];
            }
            Opcode::Stop => {
                end = Some(pos);
                break;
            }
            _ => strs = [None, None],
        }
    }
    Listing {
        globals: out,
        python2_text,
        end,
    }
}

/// A little-endian unsigned int of up to 8 bytes.
fn le_uint(b: &[u8]) -> u64 {
    let mut v = [0u8; 8];
    for (d, s) in v.iter_mut().zip(b) {
        *d = *s;
    }
    u64::from_le_bytes(v)
}

/// Where the argument of an opcode at `pos` lies (`(start, end)`, the length prefix
/// included), or `None` when the input cuts it short.
pub(super) fn arg_span(input: &[u8], pos: usize, arg: Arg) -> Option<(usize, usize)> {
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

/// A name as reports show it: as written when it is a Python name ([`crate::policy::is_python_name`])
/// of at most [`crate::policy::MAX_NAME_CHARS`] characters, so that `scan --trust` writes the
/// name the pickle names; otherwise escaped and cut as error messages show text from the input.
fn show(bytes: &[u8]) -> String {
    crate::policy::shown_name(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Protocol 4 names a second class of a module already named by fetching the module's
    /// text from the memo: the listing reads it there.
    #[test]
    fn stack_global_names_fetched_from_the_memo() {
        // pickle.dumps([A(), B()], 4) for classes pandas.Index and pandas.RangeIndex, the
        // module str memoized at 1 and fetched back by BINGET for the second.
        let input = b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00]\x94(\x8c\x06pandas\x94\x8c\x05Index\x94\x93\x94)\x81\x94h\x01\x8c\nRangeIndex\x94\x93\x94)\x81\x94e.";
        let got = globals_after(input, 0);
        let names: Vec<String> = got.iter().map(|(m, n, _)| format!("{m}.{n}")).collect();
        assert_eq!(names, ["pandas.Index", "pandas.RangeIndex"]);
        // Only those at or after `from` are listed, with the memo of the opcodes before.
        let second = got[1].2;
        let after: Vec<(String, String, u64)> = globals_after(input, second);
        assert_eq!(
            after,
            [("pandas".to_owned(), "RangeIndex".to_owned(), second)]
        );
    }

    /// A str the listing cannot follow (made by a call) is listed as unread, never guessed.
    #[test]
    fn a_name_made_by_a_call_is_unread() {
        // STACK_GLOBAL of ('os', <the result of a REDUCE>).
        let input = b"\x80\x04\x8c\x02os\x94\x8c\x01a\x8c\x01b\x86R\x93.";
        let got = globals_after(input, 0);
        assert_eq!(got, [(UNREAD.to_owned(), UNREAD.to_owned(), 15)]);
    }
}
