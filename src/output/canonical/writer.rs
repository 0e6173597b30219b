//! The canonical pickle writer: a visitor of the document walk ([`crate::output::walk`]) that
//! writes each value in the one form the module documentation gives.

use std::time::Instant;

use num_bigint::BigInt;

use super::{Protocol, Unwritable};
use crate::clock::Clock;
use crate::opcode::Opcode;
use crate::output::walk::{Marks, Slot, Step, Visitor, Walker};
use crate::value::{CallKind, NodeId, PyBytes, Value};

/// Items per `APPENDS`, `SETITEMS` or `ADDITEMS`: CPython's `Pickler._BATCHSIZE`.
const BATCH: usize = 1000;

/// No memo index yet, in [`Writer::fixed`].
const NO_MEMO: u32 = u32::MAX;

/// The globals (and the one text) the writer itself names, each written once and memoized.
#[derive(Clone, Copy)]
pub(super) enum Fixed {
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

/// The output and its bounds. The memo is the walk's numbering ([`Marks::number`]): a node's
/// memo index is the number the writer gave it when it wrote MEMOIZE (or BINPUT) for it, and
/// the walk reports a numbered node met again as a reference, written BINGET.
pub(super) struct Writer {
    pub(super) proto: Protocol,
    pub(super) out: Vec<u8>,
    max_bytes: usize,
    clock: Clock,
    /// Values written so far, by which the clock is looked at.
    work: u64,
    /// Open containers past which the walk is not ending: a value nests at most once in
    /// itself (a tuple on a cycle, written again inside itself), so a path holds each node at
    /// most twice. A missed cycle would otherwise fill memory.
    max_depth: usize,
    /// The memo index of each [`Fixed`] global or text once written.
    fixed: [u32; FIXED],
    /// Why the output cannot be finished, once found (a value the protocol cannot write).
    pub(super) failed: Option<Unwritable>,
    /// Why the walk stopped (past `max_bytes`, or the deadline).
    stopped: Option<Unwritable>,
}

/// How a list's, set's or dict's items are written: in batches of [`BATCH`], each closed by
/// `close`, or by `one` for a batch of one item (which then has no MARK).
#[derive(Clone, Copy)]
struct Batches {
    len: usize,
    close: Opcode,
    one: Option<Opcode>,
}

impl Writer {
    /// A writer at `protocol`, for a document of `nodes` arena nodes.
    pub(super) fn new(
        protocol: Protocol,
        max_bytes: usize,
        deadline: Option<Instant>,
        nodes: usize,
    ) -> Writer {
        Writer {
            proto: protocol,
            out: Vec::new(),
            max_bytes,
            clock: Clock::new(deadline),
            work: 0,
            max_depth: nodes.saturating_mul(2).saturating_add(64),
            fixed: [NO_MEMO; FIXED],
            failed: None,
            stopped: None,
        }
    }

    /// Writes `root` (memo indices go on from the values written before); stops past
    /// `max_bytes` or the deadline.
    pub(super) fn write(
        &mut self,
        walker: &mut Walker<'_, '_>,
        root: NodeId,
    ) -> Result<(), Unwritable> {
        if walker.walk(root, self) {
            return Ok(());
        }
        Err(self.stopped.unwrap_or(Unwritable::TooLarge(self.max_bytes)))
    }

    /// How the items of `v` are batched, for a list, a dict, a set at protocol 5 (ADDITEMS,
    /// always after a MARK) and a set or frozenset at protocol 2 (the list of its call).
    fn batches(&self, v: &Value<'_>) -> Option<Batches> {
        let (len, close, one) = match *v {
            Value::List(items) => (items.len(), Opcode::Appends, Some(Opcode::Append)),
            Value::Set(s) | Value::FrozenSet(s) if self.proto == Protocol::V2 => {
                (s.len(), Opcode::Appends, Some(Opcode::Append))
            }
            Value::Set(s) => (s.len(), Opcode::Additems, None),
            Value::Dict(d) => (d.len(), Opcode::Setitems, Some(Opcode::Setitem)),
            _ => return None,
        };
        Some(Batches { len, close, one })
    }

    /// Opens the batch that begins at item `start`: its MARK, unless it is one item with an
    /// opcode of its own.
    fn open_batch(&mut self, b: Batches, start: usize) {
        let end = b.len.min(start + BATCH);
        if b.one.is_none() || end - start > 1 {
            self.out.push(Opcode::Mark.byte());
        }
    }

    /// Closes the batch that ends before item `end`.
    fn close_batch(&mut self, b: Batches, end: usize) {
        let start = (end - 1) / BATCH * BATCH;
        let op = match b.one {
            Some(one) if end - start == 1 => one,
            _ => b.close,
        };
        self.out.push(op.byte());
    }

    /// MEMOIZE `id` when it is reached more than once (and is not memoized already).
    fn memoize_if_shared(&mut self, marks: &mut Marks, id: NodeId) {
        if marks.is_shared(id) && marks.number(id).is_none() {
            let index = marks.give(id);
            self.put(index);
        }
    }

    /// Sets memo index `index` to the value on top: MEMOIZE at protocol 5 (the index is the
    /// next one), `BINPUT` / `LONG_BINPUT` of the index at protocol 2 (MEMOIZE is protocol
    /// 4's).
    fn put(&mut self, index: u32) {
        match (self.proto, u8::try_from(index)) {
            (Protocol::V5, _) => self.out.push(Opcode::Memoize.byte()),
            (Protocol::V2, Ok(i)) => self.out.extend_from_slice(&[Opcode::Binput.byte(), i]),
            (Protocol::V2, Err(_)) => {
                self.out.push(Opcode::LongBinput.byte());
                self.out.extend_from_slice(&index.to_le_bytes());
            }
        }
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
    /// first time (its memo index is the walk's next number), fetched after.
    pub(super) fn fixed(&mut self, marks: &mut Marks, which: Fixed) {
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
        let index = marks.take();
        self.put(index);
        if let Some(m) = self.fixed.get_mut(slot) {
            *m = index;
        }
    }

    /// The global CPython 3 finds as `module.name` (its Python 3 name): STACK_GLOBAL at
    /// protocol 5; at protocol 2, GLOBAL of its Python 2 name ([`Writer::global2`]).
    fn global(&mut self, module: &str, name: &str) {
        if self.proto == Protocol::V2 {
            self.global2(module, name);
            return;
        }
        for text in [module, name] {
            self.text(text.as_bytes());
        }
        self.out.push(Opcode::StackGlobal.byte());
    }

    /// Notes that the output cannot be finished (the first reason is kept).
    pub(super) fn fail(&mut self, what: &'static str) {
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

    /// REDUCE, or NEWOBJ for a record NEWOBJ made.
    fn call(&mut self, kind: CallKind) {
        self.out.push(if kind == CallKind::NewObj {
            Opcode::Newobj.byte()
        } else {
            Opcode::Reduce.byte()
        });
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

impl<'d> Visitor<'d> for Writer {
    /// Counts a value; stops past `max_bytes`, past the walk's depth bound, or at the
    /// deadline.
    #[inline]
    fn go_on(&mut self, marks: &Marks) -> bool {
        self.work += 1;
        if self.out.len() > self.max_bytes || marks.depth() > self.max_depth {
            self.stopped = Some(Unwritable::TooLarge(self.max_bytes));
            return false;
        }
        if self.clock.passed_after(self.work) {
            self.stopped = Some(Unwritable::Deadline);
            return false;
        }
        true
    }

    /// Only values reached more than once are memoized.
    #[inline]
    fn may_have_number(&self, marks: &Marks, id: NodeId, _: &Value<'d>) -> bool {
        marks.is_shared(id)
    }

    /// A value memoized before: fetched.
    fn reference(&mut self, _: NodeId, index: u32) {
        self.get(index);
    }

    /// Writes a scalar (and memoizes it if shared); for a container writes its opening.
    #[inline]
    fn enter(&mut self, marks: &mut Marks, id: NodeId, v: Value<'d>) -> Step {
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
            Value::Bytes(b) if self.proto == Protocol::V2 => self.bytes2(marks, b),
            Value::Bytes(b) => self.counted_bytes(
                b,
                [Opcode::ShortBinbytes, Opcode::Binbytes, Opcode::Binbytes8],
            ),
            Value::Complex(re, im) => {
                self.fixed(marks, Fixed::Complex);
                self.float(re);
                self.float(im);
                self.out
                    .extend_from_slice(&[Opcode::Tuple2.byte(), Opcode::Reduce.byte()]);
            }
            Value::ByteArray(b) if self.proto == Protocol::V2 => {
                // `bytearray(_codecs.encode(text, 'latin1'))`, or `bytearray()`.
                self.fixed(marks, Fixed::ByteArray);
                if b.is_empty() {
                    self.out.push(Opcode::EmptyTuple.byte());
                } else {
                    self.bytes2(marks, PyBytes::raw(b));
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
                self.memoize_if_shared(marks, id);
                return if items.is_empty() {
                    Step::Leaf
                } else {
                    Step::Open
                };
            }
            Value::Set(_) | Value::FrozenSet(_) if self.proto == Protocol::V2 => {
                // `__builtin__.set([items])`: the list is the call's argument only, never
                // memoized (nothing else reaches it); the call is made at the exit.
                self.fixed(
                    marks,
                    if matches!(v, Value::Set(_)) {
                        Fixed::Set
                    } else {
                        Fixed::FrozenSet
                    },
                );
                self.out.push(Opcode::EmptyList.byte());
                return Step::Open;
            }
            Value::Set(s) => {
                self.out.push(Opcode::EmptySet.byte());
                self.memoize_if_shared(marks, id);
                return if s.is_empty() { Step::Leaf } else { Step::Open };
            }
            Value::Dict(d) => {
                self.out.push(Opcode::EmptyDict.byte());
                self.memoize_if_shared(marks, id);
                return if d.is_empty() { Step::Leaf } else { Step::Open };
            }
            Value::Tuple(items) => {
                if items.len() > 3 {
                    self.out.push(Opcode::Mark.byte());
                }
                return Step::Open;
            }
            Value::FrozenSet(_) => {
                self.out.push(Opcode::Mark.byte());
                return Step::Open;
            }
            Value::Object(o) => {
                // `callable(*args)` (REDUCE) or `cls.__new__(cls, *args)` (NEWOBJ), as
                // CPython's `save_reduce` writes them, made at the exit, or before the state
                // of one whose BUILD a policy check found to be its writer's (then BUILD at
                // the exit); records that are more than that were refused before anything
                // was written (`Unwritable::Record`), so the walk meets only the callable, the
                // args and such a state.
                if o.kind == CallKind::NewObjEx {
                    self.failed = Some(Unwritable::Record);
                    return Step::Leaf;
                }
                return Step::Open;
            }
        }
        self.memoize_if_shared(marks, id);
        Step::Leaf
    }

    /// A new batch every [`BATCH`] items of a list, set or dict.
    #[inline]
    fn item(&mut self, parent: &Value<'d>, slot: Slot) {
        let (Slot::Item(k) | Slot::Key(k)) = slot else {
            return;
        };
        if k % BATCH != 0 {
            return;
        }
        if let Some(b) = self.batches(parent) {
            if k > 0 {
                self.close_batch(b, k);
            }
            self.open_batch(b, k);
        }
    }

    /// The last batch's closing opcode, then what makes the value of what is on the stack.
    fn exit(&mut self, marks: &mut Marks, id: NodeId, v: Value<'d>) {
        if let Some(b) = self.batches(&v).filter(|b| b.len > 0) {
            self.close_batch(b, b.len);
        }
        match v {
            Value::Set(_) | Value::FrozenSet(_) if self.proto == Protocol::V2 => {
                self.out
                    .extend_from_slice(&[Opcode::Tuple1.byte(), Opcode::Reduce.byte()]);
                self.memoize_if_shared(marks, id);
            }
            Value::Tuple(s) | Value::FrozenSet(s) => {
                let op = match (v, s.len()) {
                    (Value::FrozenSet(_), _) => Opcode::Frozenset,
                    (_, 0) => Opcode::EmptyTuple,
                    (_, 1) => Opcode::Tuple1,
                    (_, 2) => Opcode::Tuple2,
                    (_, 3) => Opcode::Tuple3,
                    _ => Opcode::Tuple,
                };
                if let Some(index) = marks.number(id) {
                    // Reached again from inside itself and memoized there: its items on the
                    // stack are a second copy of it, thrown away.
                    if op == Opcode::Frozenset || s.len() > 3 {
                        self.out.push(Opcode::PopMark.byte());
                    } else {
                        self.out
                            .extend(std::iter::repeat_n(Opcode::Pop.byte(), s.len()));
                    }
                    self.get(index);
                } else {
                    self.out.push(op.byte());
                    self.memoize_if_shared(marks, id);
                }
            }
            Value::Object(o) => {
                if o.state.is_some() {
                    // The call was made before the state (`before_state`).
                    self.out.push(Opcode::Build.byte());
                } else {
                    self.call(o.kind);
                }
                self.memoize_if_shared(marks, id);
            }
            _ => {}
        }
    }

    /// A record's call, then its memo entry (when shared), before its BUILD state: as
    /// `save_reduce` writes `func, args, REDUCE, MEMOIZE, state, BUILD`. Only a record whose
    /// BUILD a check accepted has a state here, and those checks accept only REDUCE calls.
    fn before_state(&mut self, marks: &mut Marks, id: NodeId) {
        self.call(CallKind::Reduce);
        self.memoize_if_shared(marks, id);
    }
}
