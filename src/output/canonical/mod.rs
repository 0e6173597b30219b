//! Canonical pickle output: a decoded [`Document`] written back as a protocol-5 pickle (or,
//! for Python 2 and Mitogen, a protocol-2 one: [`Protocol::V2`]) that holds only what the
//! document holds, in one fixed form whatever the input's form was.
//!
//! A service that checks pickles for another (DESIGN's second user) can hand on these bytes
//! instead of the peer's: they name no global but those the policy allowed and the few the
//! form itself names (`builtins.complex`; at protocol 2 also `_codecs.encode` and
//! `__builtin__.bytes`, `bytearray`, `set`, `frozenset`, `complex`), carry none of the input's
//! opcodes, memo indices, frames, padding or dead values (but for the calls of records it
//! popped: CPython made them), and set a memo entry only for a value reached more than once
//! or on a cycle (indices 0, 1, 2, ... in order; at protocol 2 also for each of those named
//! globals and the text `'latin1'`), so a consumer's own unpickler meets none of the input's
//! tricks (a far LONG_BINPUT index, a huge declared length, values popped unseen).
//!
//! The form, opcode names as CPython's `Lib/pickletools.py` spells them:
//! - `PROTO 5`, then the value, then `STOP`; no FRAME (framing is optional from protocol 4
//!   on, PEP 3154; every CPython since 3.8 reads protocol 5, PEP 574). A stream document is
//!   one such pickle per root, back to back, sharing one memo, as `pickle.Unpickler.load()`
//!   called again on the same file reads them.
//! - None, bool: `NONE`, `NEWTRUE` / `NEWFALSE`. int: `BININT1` (0..=255), `BININT2`
//!   (..=65535), `BININT` (32-bit signed), else `LONG1` / `LONG4` with the fewest
//!   two's-complement bytes, as CPython's `encode_long` writes them. float: `BINFLOAT` (the
//!   IEEE-754 bits, so NaN payloads and -0.0 are kept).
//! - str: `SHORT_BINUNICODE` / `BINUNICODE` / `BINUNICODE8` of its `surrogatepass` UTF-8 (as
//!   CPython's pickler writes lone surrogates). bytes: `SHORT_BINBYTES` / `BINBYTES` /
//!   `BINBYTES8`.
//! - list, dict, set: `EMPTY_LIST` / `EMPTY_DICT` / `EMPTY_SET`, then the items in batches of
//!   1000 (`APPENDS` / `SETITEMS` / `ADDITEMS` after a MARK; `APPEND` / `SETITEM` for a batch
//!   of one), as CPython's `_batch_appends` writes them; items in the document's order
//!   (insertion order).
//! - tuple: `EMPTY_TUPLE`, `TUPLE1`..`TUPLE3`, or MARK, items, `TUPLE`. frozenset: MARK,
//!   items, `FROZENSET`. When one of them is reached again from inside itself (through a list,
//!   dict, set or record), its items are thrown away with `POP` / `POP_MARK` and it is
//!   fetched with `BINGET`, as CPython's `save_tuple` does.
//! - complex: `builtins.complex` (`STACK_GLOBAL`, memoized once per output) with the tuple
//!   `(real, imag)` and `REDUCE` (a policy that reads the output back must allow that spelling;
//!   the shipped ones that allow complex list both `builtins` and `__builtin__`). bytearray: `BYTEARRAY8`, which needs no global, so that a
//!   policy without `builtins.bytearray` (`strict`) reads back the bytearray it accepted.
//! - a global used as a value: `STACK_GLOBAL` of its module and name as CPython 3 reads them:
//!   as written in the input, except that a global read at protocol 0, 1 or 2 is written under
//!   the Python 3 name CPython's `find_class` maps it to there ([`python3_name`]:
//!   `__builtin__.set` -> `builtins.set`), since at protocol 5 it maps nothing. Decoding the
//!   output then gives that name; the policy must allow it (the shipped ones list both).
//! - A value reached more than once, and a container on a cycle (even one reached by a single
//!   reference: the list of `t = ([t],)`), is followed by `MEMOIZE` where it is first written (a
//!   list, dict or set right after it is made, so that a cycle through it can refer to it) and
//!   is `BINGET` / `LONG_BINGET` after. When a tuple on a cycle is written again from inside
//!   itself, the items of that outer copy that are on no cycle are written a second time
//!   before `POP` throws them away.
//! - A record object: its global (as a global value above), its argument tuple, then `REDUCE`
//!   (or `NEWOBJ` for one NEWOBJ made), as CPython's `save_reduce` writes a `__reduce__`
//!   result. Every record the input made, reached by the value or not, is written at the start
//!   of the pickle that made it, in the order the input made the calls, memoized when the
//!   value reaches it and popped, so that CPython makes the same calls in the same order, each
//!   once (Mitogen's `_unpickle_context` hands out the first Context its Router made for an
//!   id, so the order decides the name).
//! - At protocol 2 ([`Protocol::V2`]) the forms its documentation gives.
//!
//! Three kinds of document have no canonical pickle ([`Unwritable`]): one holding a record object
//! that is more than its call (changed by BUILD, APPEND or SETITEM after it, made by
//! NEWOBJ_EX, INST or OBJ, or called with a container that changed after the call,
//! [`Document::records_replayable`]: the record keeps what its object holds at the end, not
//! the calls and their order, so CPython would run other code on the output than on the
//! input), and a stream in which a later pickle changed a value of an earlier one through the
//! shared memo (the document holds only the end, [`Document::changed_earlier`]). And at
//! protocol 2, one
//! holding a value that protocol cannot write as it is ([`Unwritable::Protocol`]).
//!
//! Decoding the output under the policy that decoded the document gives the same typed JSON,
//! but for the names of globals written under another name (the Python 3 name of one read at
//! protocols 0-2; at protocol 2 its Python 2 name), when the policy allows what the form names
//! (at protocol 2 `_codecs.encode` and the `__builtin__` globals above: `strict` does not).
//! CPython's `pickle.loads` of it gives a value equal to, and shaped like, `pickle.loads` of
//! the input, as the newest CPython reads the input: where CPython 3.11 reads number text
//! otherwise (INT `010` as octal 8, INT `+1` as True; see `src/build/mod.rs`), the output holds
//! picklewarden's reading. `tests/canonical.rs` checks both on every good corpus file that
//! has a canonical pickle, at both protocols.
//!
//! Known differences, all in what a policy accepts and CPython shares or not: shared empty
//! tuples are written with a memo entry each (CPython has one `()`), so a document of more
//! than `max_memo_entries` of them decodes only under a higher limit; at protocol 5 a
//! frozenset is written with all its items on the stack (as CPython's pickler writes it), so
//! one of more than `max_stack_len` items does too.
//!
//! The writer is a visitor of the one document walk (`src/output/walk.rs`), an explicit
//! stack of a frame per open container, never the call stack. `writer.rs` writes the form,
//! `python2.rs` protocol 2's spellings, `checks.rs` finds what has no canonical pickle.

use std::time::Instant;

pub use crate::compat::{python2_name, python3_name};
use crate::opcode::Opcode;
use crate::options::OutputBound;
use crate::output::walk::Walker;
use crate::value::Document;

mod checks;
mod python2;
mod writer;

use checks::Plan;
use writer::Writer;

/// The protocol of the output ([`Opcode::Proto`]'s argument): 5, which every CPython since 3.8
/// reads, for `BYTEARRAY8`; the other opcodes written are protocol 4's (`STACK_GLOBAL`,
/// `MEMOIZE`, `EMPTY_SET` / `ADDITEMS`, `FROZENSET`) and older.
pub const PROTOCOL: u8 = 5;

/// The form of a canonical pickle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Protocol {
    /// Protocol 5, the form the module documentation gives ([`to_pickle`]).
    #[default]
    V5,
    /// Protocol 2, as Python 3's pickler writes it for Python 2 and for Mitogen (whose
    /// Python 3 side pickles at protocol 2 and whose `Message._find_global` knows only
    /// `_codecs.encode` and `__builtin__.bytes` for bytes): `PROTO 2`, `BINPUT` /
    /// `LONG_BINPUT` for the memo, str as `BINUNICODE`, bytes as `_codecs.encode(<latin-1
    /// text>, 'latin1')` (`__builtin__.bytes()` when empty), bytearray as
    /// `__builtin__.bytearray(<that bytes>)`, set and frozenset as `__builtin__.set([...])` /
    /// `__builtin__.frozenset([...])`, complex as `__builtin__.complex(re, im)`, every global
    /// by `GLOBAL` under its Python 2 name ([`python2_name`]), each of those globals and the
    /// text `'latin1'` memoized where first written. These are the forms of CPython 3.11's
    /// `pickle.dumps(value, 2)`; ints, floats, lists, dicts, tuples and records are as at
    /// protocol 5. A global's Python 2 name is that of the Python 3 name CPython reads it as,
    /// so one read at protocol 0-2 may come out under another Python 2 spelling of the same
    /// class (`__builtin__.basestring` as `__builtin__.unicode`): an unpickler whose
    /// `find_class` matches raw names (Mitogen's) sees that spelling. The `mitogen` policies'
    /// names all map to themselves. A nested (dotted) name is refused: below protocol 4
    /// `find_class` looks it up with one `getattr`.
    V2,
}

impl Protocol {
    /// The protocol number (`PROTO`'s argument): 5 or 2.
    pub fn number(self) -> u8 {
        match self {
            Protocol::V5 => 5,
            Protocol::V2 => 2,
        }
    }
}

/// Why a document has no canonical pickle, or why writing it stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unwritable {
    /// The document holds a record object that cannot be written back as the call that made
    /// it: one changed after the call (BUILD, APPEND or SETITEM on it: the record keeps only
    /// the last state and the items, not their order), made by NEWOBJ_EX, INST or OBJ, or
    /// called with a list, dict, set or record that changed after the call
    /// ([`Document::records_replayable`]); or a persistent id kept under
    /// `persistent_ids = "record"` ([`Document::persistent_ids`]). Writing it back would make
    /// CPython run other code than the input made it run, or read other objects.
    #[error(
        "the value holds a record object, which a canonical pickle cannot write back as the \
         input made it"
    )]
    Record,
    /// The value holds something the protocol asked for cannot write as it is: at protocol 2,
    /// a str or bytes of 4 GiB or more (BINUNICODE has a 4-byte length), a global whose name
    /// is not ASCII or holds a newline (GLOBAL is a text line) or is nested (dotted: below
    /// protocol 4 `find_class` looks it up with one `getattr`), or one CPython's protocol-2
    /// names would change (`builtins.FileNotFoundError` is written `exceptions.OSError`,
    /// [`python2_name`]), or a set or frozenset on a cycle (at protocol 2 it is made by a call
    /// after its items, so a cycle through it cannot be closed).
    #[error("the value holds {what}, which a protocol-{protocol} pickle cannot write as it is")]
    Protocol {
        /// The protocol asked for.
        protocol: u8,
        /// What it cannot write.
        what: &'static str,
    },
    /// The document is a stream in which a later pickle changed a value an earlier one made,
    /// through the shared memo ([`Document::changed_earlier`]). The document holds only the
    /// end result, so the earlier pickle written back would show what CPython's `load()` of it
    /// had not seen.
    #[error(
        "the input is a stream in which a later pickle changes a value of an earlier one \
         through the shared memo"
    )]
    Stream,
    /// The output passed the byte bound it was given.
    #[error("the canonical pickle is over {0} bytes")]
    TooLarge(usize),
    /// The deadline passed while writing.
    #[error("the deadline passed while the canonical pickle was written")]
    Deadline,
}

/// The canonical pickle of `doc`: `PROTO 5 ... STOP`, one such pickle per root of a stream,
/// sharing one memo (see the module documentation for the form).
///
/// Its size is about that of the decoded values, which `max_alloc_bytes` bounds, not that of
/// the input: a pickle can make many values from one shared one (`[bytearray(b)] * k` made by
/// k calls, as CPython also makes k copies), and each is written out in full.
///
/// # Errors
/// [`Unwritable::Record`] or [`Unwritable::Stream`] for a document the form cannot write back
/// as CPython would have read the input.
pub fn to_pickle(doc: &Document<'_>) -> Result<Vec<u8>, Unwritable> {
    write_pickle(doc, Protocol::V5, usize::MAX, None)
}

/// The canonical pickle of `doc` in the form `protocol` names, giving up
/// ([`Unwritable::TooLarge`]) once the output passes `bound.max_bytes` (by at most one value's
/// own bytes, a long text or bytes) or ([`Unwritable::Deadline`]) once `bound.deadline` has
/// passed (looked at every 65,536 values written): the one bounded form of the writer.
///
/// # Errors
/// As [`to_pickle`], [`Unwritable::TooLarge`], [`Unwritable::Deadline`], and
/// [`Unwritable::Protocol`] for a value `protocol` cannot write.
pub fn to_pickle_bounded(
    doc: &Document<'_>,
    protocol: Protocol,
    bound: OutputBound,
) -> Result<Vec<u8>, Unwritable> {
    write_pickle(doc, protocol, bound.max_bytes, bound.deadline)
}

/// As [`to_pickle`], but gives up ([`Unwritable::TooLarge`]) once the output passes
/// `max_bytes`, so that a caller that must bound its memory (the service) never holds much more
/// than that. The output may pass `max_bytes` by at most one value's own bytes (a long text or
/// bytes) before the writer stops.
///
/// # Errors
/// As [`to_pickle`], and [`Unwritable::TooLarge`].
#[deprecated(note = "use to_pickle_bounded(doc, Protocol::V5, OutputBound::bytes(max_bytes))")]
pub fn to_pickle_limited(doc: &Document<'_>, max_bytes: usize) -> Result<Vec<u8>, Unwritable> {
    write_pickle(doc, Protocol::V5, max_bytes, None)
}

/// As [`to_pickle_limited`], and also gives up ([`Unwritable::Deadline`]) once `deadline` has
/// passed (looked at every 65,536 values written), as [`crate::json::to_typed_json_until`]
/// does for typed JSON.
///
/// # Errors
/// As [`to_pickle_limited`], and [`Unwritable::Deadline`].
#[deprecated(
    note = "use to_pickle_bounded(doc, Protocol::V5, OutputBound::bytes(max_bytes).deadline(Some(deadline)))"
)]
pub fn to_pickle_until(
    doc: &Document<'_>,
    max_bytes: usize,
    deadline: Instant,
) -> Result<Vec<u8>, Unwritable> {
    write_pickle(doc, Protocol::V5, max_bytes, Some(deadline))
}

/// The canonical pickle of `doc` in the form `protocol` names, giving up past `max_bytes`
/// ([`to_pickle_limited`]) or `deadline` ([`to_pickle_until`]).
///
/// # Errors
/// As [`to_pickle_until`], and [`Unwritable::Protocol`] for a value `protocol` cannot write.
#[deprecated(
    note = "use to_pickle_bounded(doc, protocol, OutputBound::bytes(max_bytes).deadline(deadline))"
)]
pub fn to_pickle_with(
    doc: &Document<'_>,
    protocol: Protocol,
    max_bytes: usize,
    deadline: Option<Instant>,
) -> Result<Vec<u8>, Unwritable> {
    write_pickle(doc, protocol, max_bytes, deadline)
}

fn write_pickle(
    doc: &Document<'_>,
    protocol: Protocol,
    max_bytes: usize,
    deadline: Option<Instant>,
) -> Result<Vec<u8>, Unwritable> {
    let Plan { records, refs } = checks::plan(doc, protocol)?;
    let mut walker = Walker::new(&doc.arena, refs);
    // A memo index per node, set for the nodes written with MEMOIZE only; the arena is
    // already allocated, so this is at most 4 bytes for each of its nodes.
    if !walker.marks.reserve_numbers() {
        return Err(Unwritable::TooLarge(max_bytes));
    }
    let mut w = Writer::new(protocol, max_bytes, deadline, doc.len());
    let mut calls = records.iter().copied().peekable();
    for (k, &root) in doc.roots.iter().enumerate() {
        w.out
            .extend_from_slice(&[Opcode::Proto.byte(), protocol.number()]);
        let end = doc.pickle_starts.get(k + 1).copied().unwrap_or(usize::MAX);
        while let Some(record) = calls.next_if(|r| r.index() < end) {
            w.write(&mut walker, record)?;
            w.out.push(Opcode::Pop.byte());
        }
        w.write(&mut walker, root)?;
        w.out.push(Opcode::Stop.byte());
    }
    if let Some(e) = w.failed {
        return Err(e);
    }
    if w.out.len() > max_bytes {
        return Err(Unwritable::TooLarge(max_bytes));
    }
    Ok(w.out)
}
