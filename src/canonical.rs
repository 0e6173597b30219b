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
//! shared memo (the document holds only the end, [`Document::changed_earlier`]); a review
//! helper found both by replaying records and streams through CPython. And at protocol 2, one
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
//! The writer walks an explicit stack, never the call stack: a few entries per nesting level,
//! whatever the number of items.

use std::time::Instant;

use num_bigint::BigInt;

use crate::clock::Clock;
pub use crate::compat::{python2_name, python3_name};
use crate::json::reachable_refs;
use crate::opcode::Opcode;
use crate::value::{Arena, CallKind, Document, NodeId, PyBytes, Value};

/// The protocol of the output ([`Opcode::Proto`]'s argument): 5, which every CPython since 3.8
/// reads, for `BYTEARRAY8`; the other opcodes written are protocol 4's (`STACK_GLOBAL`,
/// `MEMOIZE`, `EMPTY_SET` / `ADDITEMS`, `FROZENSET`) and older.
pub const PROTOCOL: u8 = 5;

/// The form of a canonical pickle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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

/// Items per `APPENDS`, `SETITEMS` or `ADDITEMS`: CPython's `Pickler._BATCHSIZE`.
const BATCH: usize = 1000;

/// No memo index yet.
const NO_MEMO: u32 = u32::MAX;

/// Why a document has no canonical pickle, or why writing it stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unwritable {
    /// The document holds a record object that cannot be written back as the call that made
    /// it: one changed after the call (BUILD, APPEND or SETITEM on it: the record keeps only
    /// the last state and the items, not their order), made by NEWOBJ_EX, INST or OBJ, or
    /// called with a list, dict, set or record that changed after the call
    /// ([`Document::records_replayable`]). Writing it back would make CPython run other code
    /// than the input made it run.
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

/// As [`to_pickle`], but gives up ([`Unwritable::TooLarge`]) once the output passes
/// `max_bytes`, so that a caller that must bound its memory (the service) never holds much more
/// than that. The output may pass `max_bytes` by at most one value's own bytes (a long text or
/// bytes) before the writer stops.
///
/// # Errors
/// As [`to_pickle`], and [`Unwritable::TooLarge`].
pub fn to_pickle_limited(doc: &Document<'_>, max_bytes: usize) -> Result<Vec<u8>, Unwritable> {
    write_pickle(doc, Protocol::V5, max_bytes, None)
}

/// As [`to_pickle_limited`], and also gives up ([`Unwritable::Deadline`]) once `deadline` has
/// passed (looked at every 65,536 values written), as [`crate::json::to_typed_json_until`]
/// does for typed JSON.
///
/// # Errors
/// As [`to_pickle_limited`], and [`Unwritable::Deadline`].
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
    if doc.roots.len() > 1 && doc.changed_earlier {
        return Err(Unwritable::Stream);
    }
    // Every record's call is made where the input made it: in the order of the calls, in the
    // pickle that made it, before that pickle's value, each written once (memoized when the
    // value reaches it, popped), whether the value reaches it or not, since CPython made the
    // call either way. Written where the value reaches it instead, calls would come in the
    // output's order (Mitogen's `_unpickle_context` returns the Context its Router made first
    // for an id, so the order decides the name), and a record inside a tuple on a cycle would
    // be called again for the tuple's outer copy (both found by a review helper).
    let records: Vec<NodeId> = doc
        .ids()
        .filter(|&id| matches!(doc.get(id), Some(Value::Object(_))))
        .collect();
    let mut starts: Vec<NodeId> = doc.roots.clone();
    starts.extend(&records);
    let (mut refs, _) = reachable_refs(&doc.arena, &starts);
    // A container on a cycle is memoized even when one reference reaches it: the list of
    // `t = ([t],)` is written inside `t`, then again inside the copy of `t` its own items make,
    // and only its memo entry ends that (a review helper's 15-byte pickle wrote without end).
    for ((r, on), id) in refs
        .iter_mut()
        .zip(on_cycles(&doc.arena, &starts))
        .zip(doc.ids())
    {
        let Some(v) = doc.get(id) else { continue };
        if on {
            *r = (*r).max(2);
            match v {
                // A record is never on a cycle when it can be written back (what its
                // arguments reached did not change after the call); refuse one that is.
                Value::Object(_) => return Err(Unwritable::Record),
                Value::Set(_) | Value::FrozenSet(_) if protocol == Protocol::V2 => {
                    return Err(Unwritable::Protocol {
                        protocol: 2,
                        what: "a set or frozenset on a cycle",
                    })
                }
                _ => {}
            }
        }
    }
    // Every record is written (above), so every record must be its call alone.
    let unreplayable = records.iter().any(|&id| match doc.get(id) {
        Some(Value::Object(o)) => {
            o.kind == CallKind::NewObjEx
                || o.state.is_some()
                || !o.listitems.is_empty()
                || !o.dictitems.is_empty()
        }
        _ => false,
    });
    if !records.is_empty() && (!doc.records_replayable || unreplayable) {
        return Err(Unwritable::Record);
    }
    let mut w = Writer {
        arena: &doc.arena,
        refs,
        memo: Vec::new(),
        next_memo: 0,
        fixed: [NO_MEMO; FIXED],
        proto: protocol,
        out: Vec::new(),
        max_bytes,
        clock: Clock::new(deadline),
        work: 0,
        failed: None,
    };
    // A memo index per node, set for the nodes written with MEMOIZE only; the arena is
    // already allocated, so this is at most 4 bytes for each of its nodes.
    if w.memo.try_reserve_exact(doc.len()).is_err() {
        return Err(Unwritable::TooLarge(max_bytes));
    }
    w.memo.resize(doc.len(), NO_MEMO);
    let mut calls = records.iter().copied().peekable();
    for (k, &root) in doc.roots.iter().enumerate() {
        w.out
            .extend_from_slice(&[Opcode::Proto.byte(), protocol.number()]);
        let end = doc.pickle_starts.get(k + 1).copied().unwrap_or(usize::MAX);
        while let Some(record) = calls.next_if(|r| r.index() < end) {
            w.write(record)?;
            w.out.push(Opcode::Pop.byte());
        }
        w.write(root)?;
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

/// What is left to write of one value: the value itself, or the rest of one it has begun.
enum Task<'d> {
    /// A value, from the start.
    Value(NodeId),
    /// The items of a list or set (`list`: APPEND for a batch of one) from `next` on, inside a
    /// batch that ends at `end` (`next == end`: the batch's closing opcode is due).
    Batch {
        items: &'d [NodeId],
        next: usize,
        end: usize,
        close: Opcode,
        list: bool,
    },
    /// The pairs of a dict, as [`Task::Batch`].
    Pairs {
        pairs: &'d [(NodeId, NodeId)],
        next: usize,
        end: usize,
    },
    /// Items written one after another, nothing around them (a tuple's or frozenset's).
    Seq { items: &'d [NodeId], next: usize },
    /// A call whose callable and arguments are written (a record, or at protocol 2 a set or
    /// frozenset): `op` (REDUCE or NEWOBJ), then the memo entry if it is shared. (None of
    /// these is ever on a cycle, [`write_pickle`], so it cannot have been memoized meanwhile.)
    /// `list_argument`: the argument written is one list, to be made the argument tuple
    /// (`TUPLE1`) first.
    Call {
        id: NodeId,
        op: Opcode,
        list_argument: bool,
    },
    /// A tuple or frozenset whose items are written: close it, or, when it was memoized
    /// meanwhile (reached again from inside itself), throw the items away and fetch it.
    Close {
        id: NodeId,
        items: usize,
        op: Opcode,
    },
}

struct Writer<'d, 'a> {
    arena: &'d Arena<'a>,
    /// In-degree of each node over what the roots reach ([`reachable_refs`]).
    refs: Vec<u8>,
    /// The memo index of each node written with MEMOIZE, or [`NO_MEMO`].
    memo: Vec<u32>,
    next_memo: u32,
    /// The memo index of each [`Fixed`] global or text once written.
    fixed: [u32; FIXED],
    proto: Protocol,
    out: Vec<u8>,
    max_bytes: usize,
    clock: Clock,
    /// Values written so far, by which the clock is looked at.
    work: u64,
    /// Why the output cannot be finished, once found (a value the protocol cannot write).
    failed: Option<Unwritable>,
}

/// The globals (and the one text) the writer itself names, each written once and memoized.
#[derive(Clone, Copy)]
enum Fixed {
    Complex,
    Encode,
    Bytes,
    ByteArray,
    Set,
    FrozenSet,
    Latin1,
}

/// How many [`Fixed`] there are.
const FIXED: usize = 7;

impl<'d> Writer<'d, '_> {
    /// Writes one root; stops past `max_bytes` or the deadline.
    fn write(&mut self, root: NodeId) -> Result<(), Unwritable> {
        let mut stack: Vec<Task<'d>> = vec![Task::Value(root)];
        // A few tasks per level of nesting, and a value nests at most once in itself (a tuple
        // on a cycle, written again inside itself): past this the walk is not ending, which a
        // missed cycle once caused (a review helper), and it stops rather than fill memory.
        let max_tasks = self.arena.len().saturating_mul(8).saturating_add(64);
        while let Some(task) = stack.pop() {
            match task {
                Task::Value(id) => {
                    self.work += 1;
                    if self.out.len() > self.max_bytes || stack.len() > max_tasks {
                        return Err(Unwritable::TooLarge(self.max_bytes));
                    }
                    if self.clock.passed_after(self.work) {
                        return Err(Unwritable::Deadline);
                    }
                    self.value(id, &mut stack);
                }
                Task::Batch {
                    items,
                    next,
                    end,
                    close,
                    list,
                } => {
                    if let Some(&item) = items.get(next).filter(|_| next < end) {
                        stack.push(Task::Batch {
                            items,
                            next: next + 1,
                            end,
                            close,
                            list,
                        });
                        stack.push(Task::Value(item));
                        continue;
                    }
                    if next > 0 {
                        // The batch ends here.
                        let one = list && end - batch_start(end, items.len()) == 1;
                        self.out
                            .push(if one { Opcode::Append } else { close }.byte());
                    }
                    if let Some(task) = self.open_batch(items, next, close, list) {
                        stack.push(task);
                    }
                }
                Task::Pairs { pairs, next, end } => {
                    if let Some(&(k, v)) = pairs.get(next).filter(|_| next < end) {
                        stack.push(Task::Pairs {
                            pairs,
                            next: next + 1,
                            end,
                        });
                        stack.push(Task::Value(v));
                        stack.push(Task::Value(k));
                        continue;
                    }
                    if next > 0 {
                        let one = end - batch_start(end, pairs.len()) == 1;
                        let op = if one {
                            Opcode::Setitem
                        } else {
                            Opcode::Setitems
                        };
                        self.out.push(op.byte());
                    }
                    if let Some(task) = self.open_pairs(pairs, next) {
                        stack.push(task);
                    }
                }
                Task::Seq { items, next } => {
                    if let Some(&item) = items.get(next) {
                        stack.push(Task::Seq {
                            items,
                            next: next + 1,
                        });
                        stack.push(Task::Value(item));
                    }
                }
                Task::Call {
                    id,
                    op,
                    list_argument,
                } => {
                    if list_argument {
                        self.out.push(Opcode::Tuple1.byte());
                    }
                    self.out.push(op.byte());
                    self.memoize_if_shared(id);
                }
                Task::Close { id, items, op } => {
                    if let Some(index) = self.memo_of(id) {
                        // Reached again from inside itself and memoized there: its items on
                        // the stack are a second copy of it, thrown away.
                        if op == Opcode::Frozenset || items > 3 {
                            self.out.push(Opcode::PopMark.byte());
                        } else {
                            self.out
                                .extend(std::iter::repeat_n(Opcode::Pop.byte(), items));
                        }
                        self.get(index);
                    } else {
                        self.out.push(op.byte());
                        self.memoize_if_shared(id);
                    }
                }
            }
        }
        Ok(())
    }

    /// The first batch from `start` on of a list's or set's items: its MARK now (for a list
    /// batch of more than one item, or any set batch), and the task that writes its items.
    fn open_batch(
        &mut self,
        items: &'d [NodeId],
        start: usize,
        close: Opcode,
        list: bool,
    ) -> Option<Task<'d>> {
        if start >= items.len() {
            return None;
        }
        let end = items.len().min(start + BATCH);
        if !(list && end - start == 1) {
            self.out.push(Opcode::Mark.byte());
        }
        Some(Task::Batch {
            items,
            next: start,
            end,
            close,
            list,
        })
    }

    /// As [`Writer::open_batch`], for a dict's pairs (SETITEM for a batch of one).
    fn open_pairs(&mut self, pairs: &'d [(NodeId, NodeId)], start: usize) -> Option<Task<'d>> {
        if start >= pairs.len() {
            return None;
        }
        let end = pairs.len().min(start + BATCH);
        if end - start > 1 {
            self.out.push(Opcode::Mark.byte());
        }
        Some(Task::Pairs {
            pairs,
            next: start,
            end,
        })
    }

    /// Writes `id` if it is a scalar; for a container writes its opening and pushes the rest.
    fn value(&mut self, id: NodeId, stack: &mut Vec<Task<'d>>) {
        if let Some(index) = self.memo_of(id) {
            self.get(index);
            return;
        }
        let arena = self.arena;
        let Some(v) = arena.get(id) else {
            // Not in the arena (a document never holds such an id): None, so the output
            // stays a well-formed pickle.
            self.out.push(Opcode::None.byte());
            return;
        };
        match v {
            Value::None => self.out.push(Opcode::None.byte()),
            Value::Bool(b) => self.out.push(if b {
                Opcode::Newtrue.byte()
            } else {
                Opcode::Newfalse.byte()
            }),
            Value::Int(i) => self.int(i),
            Value::BigInt(b) => self.big_int(b),
            Value::Float(f) => self.float(f),
            Value::Str(s) => self.text(s.as_bytes()),
            Value::Bytes(b) if self.proto == Protocol::V2 => self.bytes2(b),
            Value::Bytes(b) => self.counted_bytes(
                b,
                [Opcode::ShortBinbytes, Opcode::Binbytes, Opcode::Binbytes8],
            ),
            Value::Complex(re, im) => {
                self.fixed(Fixed::Complex);
                self.float(re);
                self.float(im);
                self.out
                    .extend_from_slice(&[Opcode::Tuple2.byte(), Opcode::Reduce.byte()]);
            }
            Value::ByteArray(b) if self.proto == Protocol::V2 => {
                // `bytearray(_codecs.encode(text, 'latin1'))`, or `bytearray()`.
                self.fixed(Fixed::ByteArray);
                if b.is_empty() {
                    self.out.push(Opcode::EmptyTuple.byte());
                } else {
                    self.bytes2(PyBytes::raw(b));
                    self.out.push(Opcode::Tuple1.byte());
                }
                self.out.push(Opcode::Reduce.byte());
            }
            Value::ByteArray(b) => {
                self.out.push(Opcode::Bytearray8.byte());
                self.out.extend_from_slice(&(b.len() as u64).to_le_bytes());
                self.out.extend_from_slice(b);
            }
            Value::Global(g) => {
                let (module, name) = g.python3_name();
                self.global(module, name);
            }
            Value::List(items) => {
                self.out.push(Opcode::EmptyList.byte());
                self.memoize_if_shared(id);
                stack.extend(self.open_batch(items, 0, Opcode::Appends, true));
                return;
            }
            Value::Set(s) | Value::FrozenSet(s) if self.proto == Protocol::V2 => {
                // `__builtin__.set([items])`: the list is the call's argument only, never
                // memoized (nothing else reaches it).
                self.fixed(if matches!(v, Value::Set(_)) {
                    Fixed::Set
                } else {
                    Fixed::FrozenSet
                });
                self.out.push(Opcode::EmptyList.byte());
                stack.push(Task::Call {
                    id,
                    op: Opcode::Reduce,
                    list_argument: true,
                });
                stack.extend(self.open_batch(s, 0, Opcode::Appends, true));
                return;
            }
            Value::Set(s) => {
                self.out.push(Opcode::EmptySet.byte());
                self.memoize_if_shared(id);
                stack.extend(self.open_batch(s, 0, Opcode::Additems, false));
                return;
            }
            Value::Dict(d) => {
                self.out.push(Opcode::EmptyDict.byte());
                self.memoize_if_shared(id);
                stack.extend(self.open_pairs(d, 0));
                return;
            }
            Value::Tuple(items) => {
                let op = match items.len() {
                    0 => Opcode::EmptyTuple,
                    1 => Opcode::Tuple1,
                    2 => Opcode::Tuple2,
                    3 => Opcode::Tuple3,
                    _ => {
                        self.out.push(Opcode::Mark.byte());
                        Opcode::Tuple
                    }
                };
                stack.push(Task::Close {
                    id,
                    items: items.len(),
                    op,
                });
                stack.push(Task::Seq { items, next: 0 });
                return;
            }
            Value::FrozenSet(s) => {
                self.out.push(Opcode::Mark.byte());
                stack.push(Task::Close {
                    id,
                    items: s.len(),
                    op: Opcode::Frozenset,
                });
                stack.push(Task::Seq { items: s, next: 0 });
                return;
            }
            Value::Object(o) => {
                // `callable(*args)` (REDUCE) or `cls.__new__(cls, *args)` (NEWOBJ), as
                // CPython's `save_reduce` writes them; records that are more than that call
                // were refused before anything was written (`Unwritable::Record`).
                let op = match o.kind {
                    CallKind::Reduce => Opcode::Reduce,
                    CallKind::NewObj => Opcode::Newobj,
                    CallKind::NewObjEx => {
                        self.failed = Some(Unwritable::Record);
                        return;
                    }
                };
                stack.push(Task::Call {
                    id,
                    op,
                    list_argument: false,
                });
                stack.push(Task::Value(o.args));
                stack.push(Task::Value(o.callable));
                return;
            }
        }
        self.memoize_if_shared(id);
    }

    fn memo_of(&self, id: NodeId) -> Option<u32> {
        self.memo.get(id.index()).copied().filter(|&m| m != NO_MEMO)
    }

    /// MEMOIZE `id` when it is reached more than once (and is not memoized already).
    fn memoize_if_shared(&mut self, id: NodeId) {
        let shared = self.refs.get(id.index()).is_some_and(|&r| r >= 2);
        if let Some(slot) = self.memo.get_mut(id.index()).filter(|m| **m == NO_MEMO) {
            if shared {
                *slot = self.next_memo;
                self.put();
            }
        }
    }

    /// Sets the next memo index to the value on top: MEMOIZE at protocol 5, `BINPUT` /
    /// `LONG_BINPUT` of the index at protocol 2 (MEMOIZE is protocol 4's); gives the index.
    fn put(&mut self) -> u32 {
        let index = self.next_memo;
        self.next_memo += 1;
        match (self.proto, u8::try_from(index)) {
            (Protocol::V5, _) => self.out.push(Opcode::Memoize.byte()),
            (Protocol::V2, Ok(i)) => self.out.extend_from_slice(&[Opcode::Binput.byte(), i]),
            (Protocol::V2, Err(_)) => {
                self.out.push(Opcode::LongBinput.byte());
                self.out.extend_from_slice(&index.to_le_bytes());
            }
        }
        index
    }

    /// BINGET or LONG_BINGET of memo index `index`.
    fn get(&mut self, index: u32) {
        match u8::try_from(index) {
            Ok(i) => self.out.extend_from_slice(&[Opcode::Binget.byte(), i]),
            Err(_) => {
                self.out.push(Opcode::LongBinget.byte());
                self.out.extend_from_slice(&index.to_le_bytes());
            }
        }
    }

    /// A global (or the text `'latin1'`) the writer names itself: written and memoized the
    /// first time, fetched after.
    fn fixed(&mut self, which: Fixed) {
        let slot = which as usize;
        if let Some(&memo) = self.fixed.get(slot).filter(|&&m| m != NO_MEMO) {
            self.get(memo);
            return;
        }
        match which {
            Fixed::Latin1 => self.text(b"latin1"),
            Fixed::Encode => self.global("_codecs", "encode"),
            Fixed::Complex => self.global("builtins", "complex"),
            Fixed::Bytes => self.global("builtins", "bytes"),
            Fixed::ByteArray => self.global("builtins", "bytearray"),
            Fixed::Set => self.global("builtins", "set"),
            Fixed::FrozenSet => self.global("builtins", "frozenset"),
        }
        let index = self.put();
        if let Some(m) = self.fixed.get_mut(slot) {
            *m = index;
        }
    }

    /// The global CPython 3 finds as `module.name` (its Python 3 name): STACK_GLOBAL at
    /// protocol 5; at protocol 2, GLOBAL of its Python 2 name ([`python2_name`]), as CPython's
    /// pickler writes it there, when that name is ASCII, holds no newline and reads back as
    /// the same global.
    fn global(&mut self, module: &str, name: &str) {
        if self.proto == Protocol::V5 {
            for text in [module, name] {
                self.text(text.as_bytes());
            }
            self.out.push(Opcode::StackGlobal.byte());
            return;
        }
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

    /// Notes that the output cannot be finished (the first reason is kept).
    fn fail(&mut self, what: &'static str) {
        self.failed.get_or_insert(Unwritable::Protocol {
            protocol: self.proto.number(),
            what,
        });
    }

    /// A str's UTF-8: SHORT_BINUNICODE, BINUNICODE or BINUNICODE8 at protocol 5, BINUNICODE at
    /// protocol 2 (the others are protocol 4's).
    fn text(&mut self, utf8: &[u8]) {
        match (self.proto, u32::try_from(utf8.len())) {
            (Protocol::V5, _) => self.counted(
                utf8,
                [
                    Opcode::ShortBinunicode,
                    Opcode::Binunicode,
                    Opcode::Binunicode8,
                ],
            ),
            (Protocol::V2, Ok(n)) => {
                self.out.push(Opcode::Binunicode.byte());
                self.out.extend_from_slice(&n.to_le_bytes());
                self.out.extend_from_slice(utf8);
            }
            (Protocol::V2, Err(_)) => self.fail("a str of 4 GiB or more"),
        }
    }

    /// bytes at protocol 2: `_codecs.encode(<latin-1 text>, 'latin1')` (BINUNICODE of each
    /// byte as the code point of the same value), or `__builtin__.bytes()` when empty, as
    /// CPython's `save_bytes` writes them below protocol 3.
    /// Bytes the document holds as their Latin-1 text (read from protocol 2) are written as
    /// that text, with no transcoding.
    fn bytes2(&mut self, b: PyBytes<'_>) {
        if b.is_empty() {
            self.fixed(Fixed::Bytes);
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
                self.fixed(Fixed::Encode);
                self.out.push(Opcode::Binunicode.byte());
                self.out.extend_from_slice(&n.to_le_bytes());
                self.out.extend_from_slice(text);
                self.fixed(Fixed::Latin1);
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
        self.fixed(Fixed::Encode);
        self.out.push(Opcode::Binunicode.byte());
        self.out.extend_from_slice(&n.to_le_bytes());
        latin1_to_utf8(b, n as usize, &mut self.out);
        self.fixed(Fixed::Latin1);
        self.out
            .extend_from_slice(&[Opcode::Tuple2.byte(), Opcode::Reduce.byte()]);
    }

    /// `ops[0]` with a 1-byte length when `data` is shorter than 256 bytes, `ops[1]` with a
    /// 4-byte length below 4 GiB, else `ops[2]` with an 8-byte length (little-endian).
    fn counted(&mut self, data: &[u8], ops: [Opcode; 3]) {
        self.length(data.len(), ops);
        self.out.extend_from_slice(data);
    }

    /// [`Writer::counted`] for a bytes value, however the document holds it.
    fn counted_bytes(&mut self, data: PyBytes<'_>, ops: [Opcode; 3]) {
        self.length(data.len(), ops);
        data.for_each_chunk(|piece| self.out.extend_from_slice(piece));
    }

    /// The opcode of [`Writer::counted`] and its length argument.
    fn length(&mut self, len: usize, ops: [Opcode; 3]) {
        if let Ok(n) = u8::try_from(len) {
            self.out.extend_from_slice(&[ops[0].byte(), n]);
        } else if let Ok(n) = u32::try_from(len) {
            self.out.push(ops[1].byte());
            self.out.extend_from_slice(&n.to_le_bytes());
        } else {
            self.out.push(ops[2].byte());
            self.out.extend_from_slice(&(len as u64).to_le_bytes());
        }
    }

    fn float(&mut self, f: f64) {
        self.out.push(Opcode::Binfloat.byte());
        self.out.extend_from_slice(&f.to_bits().to_be_bytes());
    }

    /// An int that fits in 64 bits, in the shortest of CPython's forms (`save_long`).
    fn int(&mut self, i: i64) {
        if let Ok(b) = u8::try_from(i) {
            self.out.extend_from_slice(&[Opcode::Binint1.byte(), b]);
        } else if let Ok(b) = u16::try_from(i) {
            self.out.push(Opcode::Binint2.byte());
            self.out.extend_from_slice(&b.to_le_bytes());
        } else if let Ok(b) = i32::try_from(i) {
            self.out.push(Opcode::Binint.byte());
            self.out.extend_from_slice(&b.to_le_bytes());
        } else {
            // The fewest little-endian bytes that hold the int and its sign bit.
            let magnitude_bits = 64 - if i < 0 { !i } else { i }.leading_zeros() as usize;
            let n = magnitude_bits / 8 + 1;
            let bytes = i.to_le_bytes();
            self.long(bytes.get(..n).unwrap_or(&bytes));
        }
    }

    /// An int outside 64 bits: LONG1 or LONG4 of its two's-complement little-endian bytes
    /// (`BigInt::to_signed_bytes_le` gives the fewest, as CPython's `encode_long`).
    fn big_int(&mut self, b: &BigInt) {
        self.long(&b.to_signed_bytes_le());
    }

    fn long(&mut self, bytes: &[u8]) {
        if let Ok(n) = u8::try_from(bytes.len()) {
            self.out.extend_from_slice(&[Opcode::Long1.byte(), n]);
        } else {
            // A big int of 4 GiB of digits cannot be decoded (max_long_digits), so the length
            // fits; saturate rather than wrap if it ever does not.
            let n = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
            self.out.push(Opcode::Long4.byte());
            self.out.extend_from_slice(&n.to_le_bytes());
        }
        self.out.extend_from_slice(bytes);
    }
}

/// Appends the UTF-8 of `b` read as Latin-1 (each byte the code point of its value), which is
/// `len` bytes long (`b.len()` plus the bytes of 0x80 and above). Without a branch per byte:
/// each byte writes two (its lead or itself, then its continuation) and the cursor moves by one
/// or two, so the next byte overwrites the second of an ASCII byte; one byte of slack at the
/// end is cut off after. Random bytes (Mitogen's file transfers) would mispredict a branch on
/// every other byte.
fn latin1_to_utf8(b: &[u8], len: usize, out: &mut Vec<u8>) {
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

/// Which arena nodes lie on a cycle of containers that the roots reach: those in a strongly
/// connected component of more than one node, or with an edge to themselves (Tarjan's
/// algorithm, on an explicit stack: a frame per open node, never the call stack).
fn on_cycles(arena: &Arena<'_>, roots: &[NodeId]) -> Vec<bool> {
    let n = arena.len();
    let mut t = Tarjan {
        index: vec![UNSEEN; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
    };
    let mut cyclic = vec![false; n];
    let mut frames: Vec<(usize, usize)> = Vec::new();
    let node = |i: usize| arena.nodes.get(i).map(|&n| arena.view(n));
    let container = |i: usize| node(i).is_some_and(|v| v.is_container());
    for &root in roots {
        let r = root.index();
        if !container(r) || t.index.get(r) != Some(&UNSEEN) {
            continue;
        }
        t.open(r);
        frames.push((r, 0));
        while let Some(&mut (v, ref mut k)) = frames.last_mut() {
            if let Some(w) = node(v).and_then(|value| nth_child(&value, *k)) {
                *k += 1;
                let w = w.index();
                if !container(w) {
                    continue;
                }
                if w == v {
                    if let Some(c) = cyclic.get_mut(v) {
                        *c = true;
                    }
                }
                match t.index.get(w).copied() {
                    Some(UNSEEN) => {
                        t.open(w);
                        frames.push((w, 0));
                    }
                    Some(iw) if t.on_stack.get(w) == Some(&true) => t.lower(v, iw),
                    _ => {}
                }
                continue;
            }
            frames.pop();
            let lv = t.low.get(v).copied().unwrap_or(0);
            if let Some(&(u, _)) = frames.last() {
                t.lower(u, lv);
            }
            if Some(&lv) == t.index.get(v) {
                // v roots a component: the stack from v up holds it.
                let at = t
                    .stack
                    .iter()
                    .rposition(|&x| x == v)
                    .unwrap_or(t.stack.len());
                let members = t.stack.len() - at;
                for &x in t.stack.get(at..).unwrap_or_default() {
                    if let Some(o) = t.on_stack.get_mut(x) {
                        *o = false;
                    }
                    if members > 1 {
                        if let Some(c) = cyclic.get_mut(x) {
                            *c = true;
                        }
                    }
                }
                t.stack.truncate(at);
            }
        }
    }
    cyclic
}

/// Not visited yet, in [`Tarjan::index`].
const UNSEEN: u32 = u32::MAX;

/// The state of [`on_cycles`]' walk: each node's visit order and lowest reachable visit order,
/// and the nodes of the components still open.
struct Tarjan {
    index: Vec<u32>,
    low: Vec<u32>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    next: u32,
}

impl Tarjan {
    fn open(&mut self, v: usize) {
        if let Some(i) = self.index.get_mut(v) {
            *i = self.next;
        }
        if let Some(l) = self.low.get_mut(v) {
            *l = self.next;
        }
        if let Some(o) = self.on_stack.get_mut(v) {
            *o = true;
        }
        self.next = self.next.saturating_add(1);
        self.stack.push(v);
    }

    fn lower(&mut self, v: usize, to: u32) {
        if let Some(l) = self.low.get_mut(v) {
            *l = (*l).min(to);
        }
    }
}

/// The `k`-th node `value` refers to (a dict's key then value), as
/// [`Value::for_each_child`] orders them; `None` past the last.
fn nth_child(value: &Value<'_>, k: usize) -> Option<NodeId> {
    match value {
        Value::List(items) | Value::Tuple(items) => items.get(k).copied(),
        Value::Set(s) | Value::FrozenSet(s) => s.get(k).copied(),
        Value::Dict(d) => d
            .get(k / 2)
            .map(|&(key, v)| if k.is_multiple_of(2) { key } else { v }),
        // A record: its callable, arguments and keyword arguments, then what was done to it
        // after (the writer refuses a record that has any, but the walk must still see a
        // cycle through it: a review helper's `Kwargs({'a': t})` with `t = ([t],)`, whose list
        // was reached only through the record's arguments, was never memoized and written
        // without end).
        Value::Object(o) => {
            let mut n = 0;
            for id in [Some(o.callable), Some(o.args), o.kwargs, o.state]
                .into_iter()
                .flatten()
            {
                if n == k {
                    return Some(id);
                }
                n += 1;
            }
            let k = k - n;
            if let Some(&id) = o.listitems.get(k) {
                return Some(id);
            }
            let k = k - o.listitems.len();
            o.dictitems
                .get(k / 2)
                .map(|&(key, v)| if k.is_multiple_of(2) { key } else { v })
        }
        _ => None,
    }
}

/// Where the batch that ends at `end` began, for a sequence of `len` items cut into batches of
/// [`BATCH`] from 0.
fn batch_start(end: usize, len: usize) -> usize {
    if end == 0 || len == 0 {
        return 0;
    }
    (end - 1) / BATCH * BATCH
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
