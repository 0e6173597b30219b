//! joblib's array wrapper, canonical or refused: `joblib.numpy_pickle.NumpyArrayWrapper` as
//! joblib's `NumpyPickler` writes it, and the bytes its `NumpyUnpickler` reads after the
//! wrapper's BUILD, computed with joblib's own rule. The sources cited are joblib 1.6.0
//! (`joblib/numpy_pickle.py`; the history is github.com/joblib/joblib).
//!
//! The writer (`NumpyPickler.save`, `numpy_pickle.py:366-400`) pickles each array as a
//! wrapper (NEWOBJ with no arguments, then BUILD with the wrapper's `__dict__`), ends the
//! protocol-4 frame there (`self.framer.commit_frame(force=True)`, line 395), and writes the
//! array after it (`write_array`, line 118): for a dtype holding objects, a pickle of its own
//! (`pickle.dump(array, fh, protocol=2)` before joblib 1.5, `protocol=5` since); otherwise,
//! when the wrapper has `numpy_array_alignment_bytes` (joblib 1.2 and later, line 133), one
//! byte giving a padding length `16 - ((pos + 1) % 16)` for the position `pos` where the byte
//! is written (the stream's `tell()`: the decompressed position for every compressor joblib
//! has), that many `0xff` bytes, then the array's `prod(shape) x itemsize` bytes. The reader
//! (`NumpyUnpickler.load_build`, line 444; `read_array`, line 158) reads the padding byte
//! whenever the attribute is not None, skips what it says, and reads `count x itemsize`
//! bytes, or the nested pickle (with `pickle.load` before joblib 1.6, with a fresh pure-Python
//! `Unpickler` since).

use super::numpy::{shape_product, Dtype, MAX_DIMS};
use crate::value::{Arena, NodeId, Value};

/// joblib's `NUMPY_ARRAY_ALIGNMENT_BYTES` (`numpy_pickle.py:60`).
pub(crate) const ALIGNMENT: u64 = 16;

/// The keys of a wrapper's state (`NumpyArrayWrapper.__init__`, `numpy_pickle.py:93-111`):
/// joblib 1.2 and later add the last.
const KEYS: [&str; 6] = [
    "subclass",
    "shape",
    "order",
    "dtype",
    "allow_mmap",
    "numpy_array_alignment_bytes",
];

/// The classes `NumpyPickler.save` wraps (`type(obj) in (np.ndarray, np.matrix, np.memmap)`,
/// line 376), as pickle names them.
const SUBCLASSES: [&str; 3] = ["ndarray", "matrix", "memmap"];

/// What a wrapper's state says about the bytes after its BUILD.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wrapper {
    /// Elements: the product of `shape` (1 for `()`, as `read_array` counts).
    pub(crate) count: u64,
    /// The dtype's element size.
    pub(crate) itemsize: u64,
    /// Whether the dtype holds objects: a nested pickle follows.
    pub(crate) objects: bool,
    /// Whether `numpy_array_alignment_bytes` is 16: a padding byte and padding follow.
    pub(crate) padded: bool,
    /// The shape tuple's node.
    pub(crate) shape: NodeId,
}

/// The call that makes a wrapper: NEWOBJ with no arguments (`copyreg.__reduce_ex__` at
/// protocol 2 and later gives `copyreg.__newobj__(cls)`, which pickle writes as NEWOBJ).
///
/// # Errors
/// Why the call is not joblib's.
pub(crate) fn wrapper_call(argv: &[NodeId], kwargs: Option<NodeId>) -> Result<(), String> {
    if !argv.is_empty() || kwargs.is_some() {
        return Err("not made by NEWOBJ with no arguments (NumpyPickler.save)".into());
    }
    Ok(())
}

/// The BUILD state of a wrapper: a dict of exactly joblib's keys (the alignment key optional:
/// files of joblib before 1.2 lack it), `subclass` the global `numpy.ndarray`, `numpy.matrix`
/// or `numpy.memmap`, `shape` a tuple of at most 64 ints >= 0 whose product fits 63 bits,
/// `order` `'C'` or `'F'`, `dtype` a checked dtype that is not a sub-array, of a size above 0
/// (joblib's writer divides by it, `numpy_pickle.py:125`), `allow_mmap` a bool (False for a
/// dtype holding objects: `allow_mmap = not self.buffered and not array.dtype.hasobject`,
/// line 347), `numpy_array_alignment_bytes` the int 16, or None (what joblib writes when
/// the stream has no `tell()`, lines 350-353).
///
/// # Errors
/// Why the state is not joblib's.
pub(crate) fn wrapper_state(
    arena: &Arena<'_>,
    state: NodeId,
    lookup: &mut dyn FnMut(NodeId) -> Result<Dtype, String>,
) -> Result<Wrapper, String> {
    let Some(Value::Dict(pairs)) = arena.get(state) else {
        return Err("the state is not a dict (the wrapper's __dict__)".into());
    };
    let mut found: [Option<NodeId>; 6] = [None; 6];
    for &(k, v) in pairs {
        let key = match arena.get(k) {
            Some(Value::Str(s)) => s.as_str(),
            _ => None,
        };
        let slot = key
            .and_then(|key| KEYS.iter().position(|&n| n == key))
            .and_then(|i| found.get_mut(i));
        match slot {
            // Keys are distinct in a dict: each slot is filled once.
            Some(slot) => *slot = Some(v),
            None => return Err("a key joblib does not write in the state".into()),
        }
    }
    let [Some(subclass), Some(shape), Some(order), Some(dtype), Some(allow_mmap), alignment] =
        found
    else {
        return Err("the state lacks one of subclass, shape, order, dtype, allow_mmap".into());
    };
    let subclass_ok = matches!(arena.get(subclass), Some(Value::Global(g))
        if g.module == "numpy" && SUBCLASSES.contains(&&*g.name));
    if !subclass_ok {
        return Err("subclass is not numpy.ndarray, numpy.matrix or numpy.memmap".into());
    }
    let (count, _) = shape_product(arena, shape, MAX_DIMS)
        .ok_or("the shape is not a tuple of at most 64 ints >= 0 whose product fits 63 bits")?;
    let order_ok =
        matches!(arena.get(order), Some(Value::Str(s)) if matches!(s.as_bytes(), b"C" | b"F"));
    if !order_ok {
        return Err("order is not 'C' or 'F'".into());
    }
    let d = lookup(dtype)?;
    if d.layout == super::numpy::Layout::Subarray || d.itemsize == 0 {
        return Err("the dtype is a sub-array or has no bytes (joblib writes neither)".into());
    }
    let Some(Value::Bool(mmap)) = arena.get(allow_mmap) else {
        return Err("allow_mmap is not a bool".into());
    };
    let objects = d.holds_objects();
    if objects && mmap {
        return Err("allow_mmap is True for a dtype holding objects".into());
    }
    let padded = match alignment.map(|a| arena.get(a)) {
        None | Some(Some(Value::None)) => false,
        Some(Some(Value::Int(16))) => true,
        Some(_) => {
            return Err(
                "numpy_array_alignment_bytes is not 16 or None (joblib reads a padding byte \
                 whenever it is not None)"
                    .into(),
            )
        }
    };
    Ok(Wrapper {
        count,
        itemsize: d.itemsize,
        objects,
        padded,
        shape,
    })
}

/// An array joblib reads after a wrapper's BUILD, as the build found it (a joblib file's
/// decode lists them, so that its report can name them and take them out of the pickle).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ArraySpan {
    /// Offset of the wrapper's BUILD opcode.
    pub(crate) build: usize,
    /// Where the array's bytes (its padding first) or its pickle start: right after the BUILD.
    pub(crate) start: usize,
    /// Where they end; `None` for a nested pickle refused before its end was known.
    pub(crate) end: Option<usize>,
    /// A pickle of its own (an array holding objects) rather than raw bytes.
    pub(crate) pickle: bool,
}

/// Why the bytes after a wrapper are refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not what joblib's writer writes there.
    NonCanonical(String),
    /// The input ends before the array does.
    Truncated,
}

/// Where the array of a wrapper without objects ends, its bytes starting at `pos` in
/// `input` (the decompressed stream, whose start is position 0): the padding byte, which must
/// be `16 - ((pos + 1) % 16)` (`write_array`, `numpy_pickle.py:135-141`), that many `0xff`
/// bytes, then `count x itemsize` bytes, as `read_array` reads them (lines 183-207); with no
/// alignment attribute, only the array's bytes.
///
/// # Errors
/// [`Refusal::NonCanonical`] for padding joblib does not write; [`Refusal::Truncated`] when
/// the input ends first.
pub(crate) fn array_end(input: &[u8], pos: usize, w: &Wrapper) -> Result<usize, Refusal> {
    let mut at = pos;
    if w.padded {
        let &pad = input.get(at).ok_or(Refusal::Truncated)?;
        let want = ALIGNMENT - ((at as u64 + 1) % ALIGNMENT);
        if u64::from(pad) != want {
            return Err(Refusal::NonCanonical(format!(
                "a padding length of {pad} where joblib writes {want} (16 - (position + 1) \
                 % 16)"
            )));
        }
        let padding = input
            .get(at + 1..at + 1 + usize::from(pad))
            .ok_or(Refusal::Truncated)?;
        if padding.iter().any(|&b| b != 0xff) {
            return Err(Refusal::NonCanonical(
                "padding bytes that are not 0xff (joblib writes b'\\xff' * length)".into(),
            ));
        }
        at += 1 + usize::from(pad);
    }
    let len = w
        .count
        .checked_mul(w.itemsize)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(Refusal::Truncated)?;
    let end = at.checked_add(len).ok_or(Refusal::Truncated)?;
    if end > input.len() {
        return Err(Refusal::Truncated);
    }
    Ok(end)
}
