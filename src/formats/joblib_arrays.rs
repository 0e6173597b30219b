//! The arrays joblib writes between a pickle's opcodes (see [`super::joblib`]).
//!
//! joblib's `NumpyUnpickler.load_build` reads array bytes from the file right after a BUILD
//! whose object is a `NumpyArrayWrapper`. To check such a file, a locating pass walks the
//! opcodes with a small symbolic stack (strs, ints, tuples, the wrapper class and objects,
//! numpy dtypes, and the memo of them) to find each wrapper's BUILD and what follows it:
//! one padding-length byte and that many padding bytes (when the wrapper's state has
//! `numpy_array_alignment_bytes`), then `prod(shape) x itemsize` bytes, or, for a dtype that
//! holds objects, a pickle of its own. The pickle with those spans taken out is then checked
//! by the scan and the build like any other, each object-array pickle on its own, and the
//! wrappers the build made are compared with what the locating pass skipped: any difference,
//! or anything the locating pass cannot follow, and the file is not clean.
//!
//! The locating pass runs nothing and decides nothing about safety: every byte it does not
//! skip goes through the real machine, and the bytes it skips are the ones joblib reads as
//! data, never as opcodes.

use std::collections::HashMap;

use super::container::Report;
use crate::opcode::{Arg, Opcode};
use crate::value::{Document, Value};

/// Most memo entries the locating pass keeps.
const MAX_MEMO: usize = 1 << 20;

/// Longest str the locating pass keeps the text of (dtype strs and state keys are short).
const MAX_STR: usize = 256;

/// How a locating failure that means the file is cut short (refused, not incomplete) starts.
const CUT_SHORT: &str = "cut short: ";

/// A value on the locating pass's stack.
#[derive(Clone, Debug, PartialEq)]
enum Slot {
    Other,
    Mark,
    Str(String),
    Int(i64),
    Tuple(Vec<Slot>),
    Dict(Vec<(Slot, Slot)>),
    Global(String, String),
    /// A numpy dtype: its element size, `None` when it holds objects.
    Dtype(Option<u64>),
    Wrapper,
}

/// One array found: where its bytes are in the pickle, and what the wrapper said.
#[derive(Debug)]
struct Array {
    /// The span skipped (padding included), or the nested pickle's span.
    start: usize,
    end: usize,
    shape: Vec<u64>,
    object: bool,
}

/// Checks a joblib pickle that holds arrays between its opcodes.
pub(crate) fn scan(data: &[u8], entry: &str, report: &mut Report<'_>) {
    let arrays = match locate(data, report) {
        Ok(a) => a,
        Err(why) if why.starts_with(CUT_SHORT) => {
            return report.refuse("joblib_array_truncated", "truncated", why, entry, None)
        }
        Err(why) => {
            return report.incomplete(
                "not_understood",
                format!("joblib arrays: {why}"),
                entry,
                None,
            )
        }
    };
    // The pickle without the array spans, and where each kept run starts in `data`.
    let mut spliced = Vec::new();
    let mut runs: Vec<(usize, usize)> = Vec::new(); // (spliced start, original start)
    let mut pos = 0;
    for a in &arrays {
        runs.push((spliced.len(), pos));
        spliced.extend_from_slice(data.get(pos..a.start).unwrap_or_default());
        pos = a.end;
    }
    runs.push((spliced.len(), pos));
    spliced.extend_from_slice(data.get(pos..).unwrap_or_default());
    let original = |at: u64| -> u64 {
        let at = usize::try_from(at).unwrap_or(usize::MAX);
        let run = runs
            .iter()
            .rev()
            .find(|(s, _)| *s <= at)
            .copied()
            .unwrap_or((0, 0));
        (at - run.0 + run.1) as u64
    };
    for (i, a) in arrays.iter().enumerate().filter(|(_, a)| a.object) {
        let nested = data.get(a.start..a.end).unwrap_or_default();
        let name = format!(
            "{entry}{}array {} at {:#x}",
            if entry.is_empty() { "" } else { " " },
            i + 1,
            a.start
        );
        report.pickle(&name, nested, false);
    }
    let mut sub = Report::new(
        super::container::Format::Pickle,
        report.policy,
        report.limits,
    );
    sub.pickle_then(entry, &spliced, false, |sub, doc| {
        if let Err(why) = cross_check(doc, &arrays) {
            sub.refuse("joblib_array_mismatch", "malformed", why, entry, None);
        }
    });
    sub.map_offsets(original);
    report.absorb(sub);
}

/// The wrappers the build made (records of `joblib.numpy_pickle.NumpyArrayWrapper`, in the
/// order they were made) against the arrays the locating pass skipped.
fn cross_check(doc: &Document<'_>, arrays: &[Array]) -> Result<(), String> {
    let mut wrappers = Vec::new();
    let mut stack: Vec<_> = doc.roots().to_vec();
    let mut seen = std::collections::HashSet::new();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        let Some(v) = doc.get(id) else { continue };
        v.for_each_child(|c| stack.push(c));
        if let Value::Object(o) = v {
            if matches!(doc.get(o.callable), Some(Value::Global(g)) if g.module == "joblib.numpy_pickle" && g.name == "NumpyArrayWrapper")
            {
                wrappers.push((id, o.state));
            }
        }
    }
    wrappers.sort_by_key(|(id, _)| *id);
    if wrappers.len() != arrays.len() {
        return Err(format!(
            "{} array wrappers built, {} arrays located",
            wrappers.len(),
            arrays.len()
        ));
    }
    for ((_, state), a) in wrappers.iter().zip(arrays) {
        let Some(Value::Dict(items)) = state.and_then(|s| doc.get(s)) else {
            return Err("an array wrapper without a state dict".into());
        };
        let shape = items.iter().find_map(|&(k, v)| match doc.get(k) {
            Some(Value::Str(s)) if s.as_bytes() == b"shape" => Some(v),
            _ => None,
        });
        let Some(Value::Tuple(dims)) = shape.and_then(|s| doc.get(s)) else {
            return Err("an array wrapper whose shape is not a tuple".into());
        };
        let dims: Vec<u64> = dims
            .iter()
            .map(|&d| match doc.get(d) {
                Some(Value::Int(n)) => u64::try_from(n).unwrap_or(u64::MAX),
                _ => u64::MAX,
            })
            .collect();
        if dims != a.shape {
            return Err(format!(
                "an array wrapper of shape {dims:?} where {:?} was located",
                a.shape
            ));
        }
    }
    Ok(())
}

/// The locating pass (module docs).
fn locate(data: &[u8], report: &Report<'_>) -> Result<Vec<Array>, String> {
    let mut stack: Vec<Slot> = Vec::new();
    let mut memo: HashMap<u32, Slot> = HashMap::new();
    let mut arrays = Vec::new();
    let mut pos = 0usize;
    let max_stack = usize::try_from(report.policy.limits.max_stack_len).unwrap_or(usize::MAX);
    let underflow = || "a stack underflow".to_owned();
    loop {
        if pos >= data.len() {
            return Err(format!("{CUT_SHORT}the pickle ends before its STOP"));
        }
        let op = data
            .get(pos)
            .copied()
            .and_then(Opcode::from_byte)
            .ok_or_else(|| format!("no opcode at {pos:#x}"))?;
        let (arg, end) = arg_of(data, pos + 1, op.arg())
            .ok_or_else(|| format!("{CUT_SHORT}an argument runs past the end"))?;
        pos = end;
        if stack.len() > max_stack {
            return Err("a stack over max_stack_len".into());
        }
        use Opcode as O;
        match op {
            O::Stop => break,
            O::Proto | O::Frame => {}
            O::Mark => stack.push(Slot::Mark),
            O::Binint | O::Binint1 | O::Binint2 => stack.push(Slot::Int(int_le(arg, op))),
            O::ShortBinunicode | O::Binunicode | O::Binunicode8 => {
                let text = arg.get(len_bytes(op.arg())..).unwrap_or_default();
                stack.push(if text.len() <= MAX_STR {
                    std::str::from_utf8(text).map_or(Slot::Other, |s| Slot::Str(s.to_owned()))
                } else {
                    Slot::Other
                });
            }
            O::Newtrue | O::Newfalse => stack.push(Slot::Int(i64::from(op == O::Newtrue))),
            O::EmptyTuple => stack.push(Slot::Tuple(Vec::new())),
            O::EmptyDict => stack.push(Slot::Dict(Vec::new())),
            O::Global => {
                let mut lines = arg.split(|&b| b == b'\n');
                let m = String::from_utf8_lossy(lines.next().unwrap_or_default()).into_owned();
                let n = String::from_utf8_lossy(lines.next().unwrap_or_default()).into_owned();
                stack.push(Slot::Global(m, n));
            }
            O::StackGlobal => {
                let n = stack.pop().ok_or_else(underflow)?;
                let m = stack.pop().ok_or_else(underflow)?;
                stack.push(match (m, n) {
                    (Slot::Str(m), Slot::Str(n)) => Slot::Global(m, n),
                    _ => Slot::Other,
                });
            }
            O::Memoize | O::Put | O::Binput | O::LongBinput => {
                let key = match op {
                    O::Memoize => u32::try_from(memo.len()).unwrap_or(u32::MAX),
                    O::Put => line_int(arg)?,
                    _ => u32::try_from(int_le(arg, op)).map_err(|_| "a memo index")?,
                };
                if memo.len() >= MAX_MEMO {
                    return Err("too many memo entries".into());
                }
                memo.insert(key, stack.last().cloned().ok_or_else(underflow)?);
            }
            O::Get | O::Binget | O::LongBinget => {
                let key = match op {
                    O::Get => line_int(arg)?,
                    _ => u32::try_from(int_le(arg, op)).map_err(|_| "a memo index")?,
                };
                stack.push(memo.get(&key).cloned().ok_or("a memo index never set")?);
            }
            O::Tuple1 | O::Tuple2 | O::Tuple3 => {
                let n = usize::from(op.byte() - O::Tuple1.byte()) + 1;
                let at = stack.len().checked_sub(n).ok_or_else(underflow)?;
                let items = stack.split_off(at);
                stack.push(Slot::Tuple(items));
            }
            O::Tuple | O::List | O::Dict | O::Frozenset | O::Inst | O::Obj => {
                let items = pop_mark(&mut stack)?;
                stack.push(if op == O::Tuple {
                    Slot::Tuple(items)
                } else {
                    Slot::Other
                });
            }
            O::Appends | O::Additems | O::PopMark => {
                pop_mark(&mut stack)?;
            }
            O::Setitems => {
                let items = pop_mark(&mut stack)?;
                if let Some(Slot::Dict(d)) = stack.last_mut() {
                    let mut it = items.into_iter();
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        d.push((k, v));
                    }
                }
            }
            O::Setitem => {
                let v = stack.pop().ok_or_else(underflow)?;
                let k = stack.pop().ok_or_else(underflow)?;
                if let Some(Slot::Dict(d)) = stack.last_mut() {
                    d.push((k, v));
                }
            }
            O::Append | O::Pop => {
                stack.pop().ok_or_else(underflow)?;
            }
            O::Dup => stack.push(stack.last().cloned().ok_or_else(underflow)?),
            O::Reduce => {
                let args = stack.pop().ok_or_else(underflow)?;
                let f = stack.pop().ok_or_else(underflow)?;
                stack.push(match (f, args) {
                    (Slot::Global(m, n), Slot::Tuple(a)) if m == "numpy" && n == "dtype" => {
                        match a.first() {
                            Some(Slot::Str(d)) => Slot::Dtype(
                                super::numpy::dtype_itemsize(d)
                                    .map_err(|e| format!("dtype {d:?}: {e}"))?,
                            ),
                            _ => Slot::Other,
                        }
                    }
                    _ => Slot::Other,
                });
            }
            O::Newobj | O::NewobjEx => {
                if op == O::NewobjEx {
                    stack.pop().ok_or_else(underflow)?;
                }
                stack.pop().ok_or_else(underflow)?;
                let cls = stack.pop().ok_or_else(underflow)?;
                stack.push(match cls {
                    Slot::Global(m, n)
                        if m == "joblib.numpy_pickle" && n == "NumpyArrayWrapper" =>
                    {
                        Slot::Wrapper
                    }
                    _ => Slot::Other,
                });
            }
            O::Binpersid | O::ReadonlyBuffer => {
                stack.pop().ok_or_else(underflow)?;
                stack.push(Slot::Other);
            }
            O::Build => {
                let state = stack.pop().ok_or_else(underflow)?;
                match stack.last_mut() {
                    Some(Slot::Wrapper) => {
                        let a = array_after(data, pos, &state, report)?;
                        pos = a.end;
                        let last = a.end == data.len() && a.object;
                        arrays.push(a);
                        if last {
                            // An object array's pickle the scan refused: its end is unknown,
                            // so it runs to the end; it is checked (and refused) first.
                            break;
                        }
                    }
                    Some(slot @ Slot::Dtype(_)) => {
                        // The dtype's state: (version, byteorder, subarray, names, fields,
                        // elsize, alignment, flags); flags bit 0 is NPY_ITEM_REFCOUNT (holds
                        // objects), elsize the size of a structured or flexible dtype.
                        if let Slot::Tuple(t) = &state {
                            if let Some(Slot::Int(flags)) = t.get(7) {
                                if flags & 1 == 1 {
                                    *slot = Slot::Dtype(None);
                                }
                            }
                            if let (Slot::Dtype(Some(_)), Some(Slot::Int(e))) = (&slot, t.get(5)) {
                                if *e > 0 {
                                    *slot = Slot::Dtype(Some(*e as u64));
                                }
                            }
                        }
                    }
                    Some(_) => {}
                    None => return Err(underflow()),
                }
            }
            _ => stack.push(Slot::Other),
        }
    }
    Ok(arrays)
}

/// The array bytes after a wrapper's BUILD at `pos`, as `NumpyArrayWrapper.read_array` reads
/// them.
fn array_after(
    data: &[u8],
    pos: usize,
    state: &Slot,
    report: &Report<'_>,
) -> Result<Array, String> {
    let Slot::Dict(items) = state else {
        return Err("an array wrapper whose state is not a dict".into());
    };
    let get = |k: &str| {
        items
            .iter()
            .rev()
            .find(|(key, _)| matches!(key, Slot::Str(s) if s == k))
            .map(|(_, v)| v)
    };
    let shape: Vec<u64> = match get("shape") {
        Some(Slot::Tuple(d)) => d
            .iter()
            .map(|x| match x {
                Slot::Int(n) => u64::try_from(*n).map_err(|_| "a negative dimension".to_owned()),
                _ => Err("a dimension that is not an int".into()),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err("an array wrapper without a shape tuple".into()),
    };
    let itemsize = match get("dtype") {
        Some(Slot::Dtype(i)) => *i,
        _ => return Err("an array wrapper whose dtype is not read".into()),
    };
    let Some(itemsize) = itemsize else {
        // An object array: a pickle of its own, to its STOP.
        let rest = data.get(pos..).unwrap_or_default();
        let scan = crate::Scanner::new(rest, report.policy)
            .allow_trailing(true)
            .run();
        let len = match (&scan.result, scan.trailing) {
            (Ok(()), Some(t)) => usize::try_from(t.offset).map_err(|_| "offset")?,
            (Ok(()), None) | (Err(_), _) => rest.len(),
        };
        return Ok(Array {
            start: pos,
            end: pos + len,
            shape,
            object: true,
        });
    };
    let mut at = pos;
    if get("numpy_array_alignment_bytes").is_some_and(|v| *v != Slot::Other) {
        let pad = data
            .get(at)
            .copied()
            .ok_or_else(|| format!("{CUT_SHORT}the file ends before the array's padding"))?;
        at += 1 + usize::from(pad);
    }
    let count = shape.iter().try_fold(1u64, |acc, &n| acc.checked_mul(n));
    let len = count
        .and_then(|c| c.checked_mul(itemsize))
        .and_then(|l| usize::try_from(l).ok())
        .ok_or("an array whose size overflows")?;
    let end = at
        .checked_add(len)
        .filter(|&e| e <= data.len())
        .ok_or_else(|| {
            format!("{CUT_SHORT}an array of {len} bytes at {at:#x} runs past the end of the pickle")
        })?;
    Ok(Array {
        start: pos,
        end,
        shape,
        object: false,
    })
}

fn pop_mark(stack: &mut Vec<Slot>) -> Result<Vec<Slot>, String> {
    let m = stack
        .iter()
        .rposition(|s| *s == Slot::Mark)
        .ok_or("no MARK")?;
    let items = stack.split_off(m + 1);
    stack.pop();
    Ok(items)
}

fn len_bytes(arg: Arg) -> usize {
    match arg {
        Arg::Len1 => 1,
        Arg::Len4 => 4,
        Arg::Len8 => 8,
        _ => 0,
    }
}

fn int_le(arg: &[u8], op: Opcode) -> i64 {
    let mut b = [0u8; 8];
    let n = arg.len().min(8);
    if let (Some(dst), Some(src)) = (b.get_mut(..n), arg.get(..n)) {
        dst.copy_from_slice(src);
    }
    let v = u64::from_le_bytes(b);
    if op == Opcode::Binint {
        i64::from(v as u32 as i32)
    } else {
        v as i64
    }
}

fn line_int(arg: &[u8]) -> Result<u32, String> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.trim_end().parse().ok())
        .ok_or_else(|| "a memo index that is not a number".into())
}

/// The argument of the opcode whose argument starts at `pos` (the length prefix included),
/// and where the next opcode starts.
fn arg_of(data: &[u8], pos: usize, arg: Arg) -> Option<(&[u8], usize)> {
    let nl = |from: usize| {
        data.get(from..)?
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| from + i + 1)
    };
    let prefixed = |n: usize| -> Option<usize> {
        let mut b = [0u8; 8];
        b.get_mut(..n)?.copy_from_slice(data.get(pos..pos + n)?);
        pos.checked_add(n)?
            .checked_add(usize::try_from(u64::from_le_bytes(b)).ok()?)
    };
    let end = match arg {
        Arg::Line => nl(pos)?,
        Arg::TwoLines => nl(nl(pos)?)?,
        Arg::Len1 => prefixed(1)?,
        Arg::Len4 => prefixed(4)?,
        Arg::Len8 => prefixed(8)?,
        fixed => pos + usize::from(fixed.fixed_size()?),
    };
    Some((data.get(pos..end)?, end))
}
