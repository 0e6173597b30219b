//! The careful path: [`Machine::run`] reads one opcode at a time and [`Machine::step`] executes
//! it with every check; the helpers of the text, number and memo opcodes.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::mem;

use num_bigint::BigInt;

use super::depth::walk_depth;
use super::ints::long_le;
use super::keys::KeyIndex;
use super::machine::Machine;
use crate::error::{ErrorKind, Result};
use crate::limits::LimitName;
use crate::memo::memo_index_bound;
use crate::opcode::{Opcode, BININT_ARG};
use crate::policy::{Python2Str, TextEncoding};
use crate::text::Text;
use crate::text::{self, IntTextOf, NumberError, ParsedInt};
use crate::value::{CallKind, Fat, Node, NodeId, Value, Word};

impl<'a, 'p> Machine<'a, 'p> {
    /// Runs until STOP; returns the pickle's value. The opcodes run in [`Machine::fast`] for
    /// as long as it takes them, and one at a time here (with every check) when it does not.
    pub(super) fn run(&mut self) -> Result<NodeId> {
        loop {
            if !self.careful {
                if let Some(root) = self.fast()? {
                    return Ok(root);
                }
            }
            let byte = self.r.next_opcode()?;
            self.opcodes += 1;
            if self.opcodes > self.limits.max_opcodes {
                return Err(self.limit(LimitName::MaxOpcodes, self.opcodes));
            }
            if self.clock.passed_after(self.opcodes) {
                return Err(self.err(ErrorKind::DeadlineExceeded));
            }
            let arg = BININT_ARG.get(usize::from(byte)).copied().unwrap_or(0);
            if arg != 0 {
                let v = self.r.take_binint(arg - 1)?;
                let id = self.int(v, 0)?;
                self.push(id)?;
                // Up to the deadline's next look, which the opcode after the run then makes.
                self.int_run(self.clock.room(self.opcodes));
                continue;
            }
            // The memo opcodes pickle.dumps writes most (every value MEMOIZEd at protocol 4,
            // BINPUT at 1-3; every repeated object a BINGET) without the dispatch's indirect
            // jump, as in the scan. Their arms in the match below are then not reached (the match
            // lists every opcode).
            if byte == Opcode::Memoize.byte() {
                let i = self.memo.count;
                self.memo_put(i)?;
                continue;
            }
            if byte == Opcode::Binget.byte() {
                let i = u64::from(self.r.take_u8()?);
                self.memo_get(i)?;
                continue;
            }
            if byte == Opcode::Binput.byte() {
                let i = u64::from(self.r.take_u8()?);
                self.memo_put(i)?;
                continue;
            }
            let Some(op) = Opcode::from_byte(byte) else {
                return Err(self.err(ErrorKind::UnknownOpcode));
            };
            if op == Opcode::Stop {
                return self.stop();
            }
            self.step(op)?;
        }
    }

    pub(super) fn stop(&mut self) -> Result<NodeId> {
        if !self.marks.is_empty() {
            return Err(self.err(ErrorKind::StackNotEmpty));
        }
        let root = self.pop()?;
        if !self.stack.is_empty() {
            return Err(self.err(ErrorKind::StackNotEmpty));
        }
        // In a stream, a later pickle can reach into this one's values through the memo (and
        // append to them): the writer sees the final graph, so the check waits for it.
        if !self.stream {
            self.check_depth(&[root])?;
        }
        Ok(root)
    }

    /// Enforces `max_nesting_depth` on the values of `roots` (src/limits.rs): the longest
    /// path from a root, a value shared through the memo counted at each place it is reached,
    /// an edge that closes a cycle a leaf ([`walk_depth`]).
    pub(super) fn check_depth(&self, roots: &[NodeId]) -> Result<()> {
        let max = self.limits.max_nesting_depth;
        // The root itself is depth 1 (src/limits.rs), so a maximum of 0 refuses any value.
        if max == 0 {
            return Err(self.limit(LimitName::MaxNestingDepth, 1));
        }
        // A path never holds a container twice (an edge back to one on it is a leaf), so it
        // holds at most every container, plus one leaf (which may be a container met again:
        // `l = [l]` is 2 deep): the depth is at most `containers + 1`. A flat list of
        // millions of ints is not walked.
        if self.containers.saturating_add(1) <= max {
            return Ok(());
        }
        // The heights of the containers are the longest paths from them (src/build/depth.rs).
        if self.heights.bound(roots).is_some_and(|h| h <= max) {
            return Ok(());
        }
        walk_depth(&self.arena, roots, max)
            .map_err(|depth| self.limit(LimitName::MaxNestingDepth, depth))
    }

    pub(super) fn step(&mut self, op: Opcode) -> Result<()> {
        use Opcode as O;
        match op {
            O::Mark => {
                let depth = (self.stack.len() + self.marks.len()) as u64;
                if depth >= self.limits.max_stack_len {
                    return Err(self.limit(LimitName::MaxStackLen, depth + 1));
                }
                self.marks.push(self.stack.len());
            }
            O::Stop => {}
            O::Pop => {
                if self.marks.last() == Some(&self.stack.len()) {
                    self.marks.pop();
                } else {
                    self.pop()?;
                }
            }
            O::PopMark => {
                let start = self.group()?;
                self.stack.truncate(start);
            }
            O::Dup => {
                let top = self.top()?;
                self.push(top)?;
            }
            O::Float => {
                let line = self.r.read_line()?;
                let x = text::parse_float(line).map_err(|_| self.err(ErrorKind::InvalidNumber))?;
                self.push_new(Node::Float(Word::float(x)), 0)?;
            }
            O::Binfloat => {
                let b = self.r.take_array::<8>()?;
                self.push_new(Node::Float(Word::float(f64::from_be_bytes(b))), 0)?;
            }
            O::Int => {
                let line = self.r.read_line()?;
                // Only "00" and "01" (how protocol 0 writes False and True) are bools, as in
                // Lib/pickle.py and, since gh-135241 (2025), _pickle.c; before it, the C
                // unpickler also made bools of "+0", "-0" and "+1" (any two characters valued
                // 0 or 1), so those three are refused (parse_int_text).
                let id = match line {
                    b"00" => self.shared(NodeId::bool(false), 0)?,
                    b"01" => self.shared(NodeId::bool(true), 0)?,
                    _ => {
                        let p = self.parse_int_text(line, IntTextOf::Int)?;
                        self.int_node(p, 0)?
                    }
                };
                self.push(id)?;
            }
            O::Long => {
                let line = self.r.read_line()?;
                let digits = line.strip_suffix(b"L").unwrap_or(line);
                let p = self.parse_int_text(digits, IntTextOf::Long)?;
                let extra = match &p {
                    ParsedInt::Big(b) => b.bits() / 8,
                    ParsedInt::Small(_) => 0,
                };
                let id = self.int_node(p, extra)?;
                self.push(id)?;
            }
            // `run` reads these before dispatching (one branch-free path for the three).
            O::Binint | O::Binint1 | O::Binint2 => {
                let arg = BININT_ARG.get(usize::from(op.byte())).copied().unwrap_or(0);
                let v = self.r.take_binint(arg.saturating_sub(1))?;
                let id = self.int(v, 0)?;
                self.push(id)?;
            }
            O::Long1 => {
                let n = self.r.take_u8()?;
                self.long_bytes(u64::from(n))?;
            }
            O::Long4 => {
                let n = i32::from_le_bytes(self.r.take_array::<4>()?);
                let n = u64::try_from(n).map_err(|_| self.err(ErrorKind::InvalidNumber))?;
                self.long_bytes(n)?;
            }
            O::None => {
                let id = self.shared(NodeId::NONE, 0)?;
                self.push(id)?;
            }
            O::Newtrue | O::Newfalse => {
                let id = self.shared(NodeId::bool(op == O::Newtrue), 0)?;
                self.push(id)?;
            }
            O::String => {
                let line = self.r.read_line()?;
                let body = match line {
                    [q @ (b'\'' | b'"'), body @ .., last] if q == last => body,
                    _ => return Err(self.err(ErrorKind::InvalidString)),
                };
                let raw = text::decode_string_escape(body)
                    .map_err(|_| self.err(ErrorKind::InvalidEscape))?;
                self.python2_string(raw)?;
            }
            O::Binstring => {
                let n = i32::from_le_bytes(self.r.take_array::<4>()?);
                let n = u64::try_from(n).map_err(|_| self.err(ErrorKind::InvalidNumber))?;
                let b = self.r.take(n)?;
                self.python2_string(Cow::Borrowed(b))?;
            }
            O::ShortBinstring => {
                let b = self.r.take_prefixed::<1>()?;
                self.python2_string(Cow::Borrowed(b))?;
            }
            O::Unicode => {
                let line = self.r.read_line()?;
                let s = text::decode_raw_unicode_escape(line)
                    .map_err(|_| self.err(ErrorKind::InvalidEscape))?;
                let extra = match &s.bytes {
                    Cow::Owned(o) => o.len() as u64,
                    Cow::Borrowed(_) => 0,
                };
                let id = self.str_node(s, extra)?;
                self.push(id)?;
            }
            O::Binunicode => {
                let b = self.r.take_prefixed::<4>()?;
                self.unicode(b)?;
            }
            O::ShortBinunicode => {
                let b = self.r.take_prefixed::<1>()?;
                self.unicode(b)?;
            }
            O::Binunicode8 => {
                let b = self.r.take_prefixed::<8>()?;
                self.unicode(b)?;
            }
            O::Binbytes => {
                let b = self.r.take_prefixed::<4>()?;
                let id = self.bytes_node(Cow::Borrowed(b), 0)?;
                self.push(id)?;
            }
            O::ShortBinbytes => {
                let b = self.r.take_prefixed::<1>()?;
                let id = self.bytes_node(Cow::Borrowed(b), 0)?;
                self.push(id)?;
            }
            O::Binbytes8 => {
                let b = self.r.take_prefixed::<8>()?;
                let id = self.bytes_node(Cow::Borrowed(b), 0)?;
                self.push(id)?;
            }
            O::Bytearray8 => {
                let b = self.r.take_prefixed::<8>()?;
                self.fat_fits(b.len() as u64)?;
                let id = self.fat(Fat::ByteArray(b.to_vec()), b.len() as u64)?;
                self.push(id)?;
            }
            O::NextBuffer => {
                let buf = self
                    .buffers
                    .as_mut()
                    .and_then(VecDeque::pop_front)
                    .ok_or_else(|| self.err(ErrorKind::BuffersNotSupplied))?;
                let id = self.bytes_node(Cow::Borrowed(buf), 0)?;
                self.push(id)?;
            }
            // CPython's `memoryview(obj).toreadonly()` unless the view is already read-only,
            // in-band or out-of-band alike: bytes (and an out-of-band buffer, bytes here) stay
            // as they are; a bytearray becomes a read-only memoryview of it, which has no value
            // of its own here and is kept as that bytearray (equal, shared, unhashable, as the
            // view is; docs/how-it-works.md).
            O::ReadonlyBuffer => {
                let top = self.top()?;
                match self.get(top)? {
                    Value::Bytes(_) | Value::ByteArray(_) => {}
                    _ => {
                        return Err(
                            self.err(ErrorKind::TypeMismatch("READONLY_BUFFER on a non-buffer"))
                        )
                    }
                }
            }
            O::EmptyList => self.push_empty(Node::List { start: 0, len: 0 })?,
            O::EmptyTuple => self.push_empty(Node::Tuple { start: 0, len: 0 })?,
            O::EmptyDict => self.push_empty(Node::Dict { start: 0, len: 0 })?,
            O::EmptySet => self.push_empty(Node::Set { start: 0, len: 0 })?,
            O::List | O::Tuple => {
                let start = self.group()?;
                let id = self.seq_from_stack(start, op == O::Tuple)?;
                self.push(id)?;
            }
            O::Tuple1 | O::Tuple2 | O::Tuple3 => {
                let n = match op {
                    O::Tuple1 => 1,
                    O::Tuple2 => 2,
                    _ => 3,
                };
                if self.stack.len() < self.fence() + n {
                    return Err(self.err(ErrorKind::StackUnderflow));
                }
                let id = self.seq_from_stack(self.stack.len() - n, true)?;
                self.push(id)?;
            }
            O::Dict => {
                let start = self.group()?;
                if !(self.stack.len() - start).is_multiple_of(2) {
                    return Err(self.err(ErrorKind::OddItemCount));
                }
                let mut d = mem::take(&mut self.new_pairs);
                d.clear();
                let mut index = KeyIndex::default();
                let stack = mem::take(&mut self.stack);
                let container = self.reader_keys.get_mut().fresh_container();
                let r = self.dict_insert(
                    container,
                    &mut d,
                    &mut index,
                    stack.get(start..).unwrap_or_default(),
                );
                self.stack = stack;
                let placed = r.and_then(|()| self.pool_pairs(&d));
                self.new_pairs = d;
                let (pool_start, len) = placed?;
                self.stack.truncate(start);
                let id = self.node(
                    Node::Dict {
                        start: pool_start,
                        len,
                    },
                    0,
                )?;
                self.keep_index(id, index);
                self.push(id)?;
            }
            O::Frozenset => {
                let start = self.group()?;
                let stack = mem::take(&mut self.stack);
                let r = self.new_set(stack.get(start..).unwrap_or_default(), true);
                self.stack = stack;
                let id = r?;
                self.stack.truncate(start);
                self.push(id)?;
            }
            O::Append => {
                let start = self.top_group(1)?;
                let target = self.below(start)?;
                self.touch(target);
                self.extend(target, start)?;
            }
            O::Appends => {
                let start = self.group()?;
                let target = self.below(start)?;
                self.touch(target);
                self.extend(target, start)?;
            }
            O::Setitem => {
                let start = self.top_group(2)?;
                let target = self.below(start)?;
                self.touch(target);
                self.set_items(target, start)?;
            }
            O::Setitems => {
                let start = self.group()?;
                let target = self.below(start)?;
                self.touch(target);
                self.set_items(target, start)?;
            }
            O::Additems => {
                let start = self.group()?;
                let target = self.below(start)?;
                self.touch(target);
                if let Some(done) = self.fill_fast::<false>(target, start) {
                    done?;
                    return Ok(());
                }
                if !matches!(self.get(target)?, Value::Set(_)) {
                    return Err(self.err(ErrorKind::TypeMismatch("ADDITEMS target is not a set")));
                }
                let stack = mem::take(&mut self.stack);
                let r = self.set_add(target, stack.get(start..).unwrap_or_default());
                self.stack = stack;
                r?;
                self.heights
                    .filled(target, self.stack.get(start..).unwrap_or_default());
                self.stack.truncate(start);
            }
            O::Get | O::Binget | O::LongBinget => {
                let i = self.r.memo_arg(op)?;
                self.memo_get(i)?;
            }
            O::Put | O::Binput | O::LongBinput => {
                let i = self.r.memo_arg(op)?;
                self.memo_put(i)?;
            }
            O::Memoize => {
                let i = self.memo.count;
                self.memo_put(i)?;
            }
            O::Global => {
                let id = self.global_line()?;
                self.push(id)?;
            }
            O::StackGlobal => self.stack_global()?,
            O::Inst => {
                if self.marks.is_empty() {
                    return Err(self.err(ErrorKind::MarkMissing));
                }
                let cls = self.global_line()?;
                let start = self.group()?;
                let args = self.seq_from_stack(start, true)?;
                let id = self.call(cls, args, None, CallKind::Inst)?;
                self.push(id)?;
            }
            O::Obj => {
                let start = self.group()?;
                let Some(&cls) = self.stack.get(start) else {
                    return Err(self.err(ErrorKind::StackUnderflow));
                };
                let args = self.seq_from_stack(start + 1, true)?;
                self.stack.truncate(start);
                let id = self.call(cls, args, None, CallKind::Obj)?;
                self.push(id)?;
            }
            O::Reduce => {
                let args = self.pop()?;
                let callable = self.pop()?;
                let id = self.call(callable, args, None, CallKind::Reduce)?;
                self.push(id)?;
            }
            O::Newobj => {
                let args = self.pop()?;
                let cls = self.pop()?;
                let id = self.call(cls, args, None, CallKind::NewObj)?;
                self.push(id)?;
            }
            O::NewobjEx => {
                let kwargs = self.pop()?;
                let args = self.pop()?;
                let cls = self.pop()?;
                let id = self.call(cls, args, Some(kwargs), CallKind::NewObjEx)?;
                self.push(id)?;
            }
            O::Build => self.build()?,
            O::Ext1 => {
                let c = self.r.take_u8()?;
                self.extension(i64::from(c))?;
            }
            O::Ext2 => {
                let c = u16::from_le_bytes(self.r.take_array::<2>()?);
                self.extension(i64::from(c))?;
            }
            O::Ext4 => {
                let c = i32::from_le_bytes(self.r.take_array::<4>()?);
                self.extension(i64::from(c))?;
            }
            O::Binpersid => self.persistent_id()?,
            O::Persid => return Err(self.err(ErrorKind::PersistentIdRejected)),
            O::Proto => {
                let p = self.r.take_u8()?;
                if p > 5 {
                    return Err(self.err(ErrorKind::UnsupportedProtocol(p)));
                }
                self.proto = p;
            }
            O::Frame => self.r.frame()?,
        }
        Ok(())
    }

    // Inlined into `run`, which the compiler would not choose for a function of `run`'s
    // size: BINGET is one of the commonest opcodes, and the call would be on its path.
    #[inline(always)]
    pub(super) fn memo_get(&mut self, index: u64) -> Result<()> {
        let id = self
            .memo
            .get(index)
            .ok_or_else(|| self.err(ErrorKind::MemoKeyMissing(index)))?;
        self.push(id)
    }

    pub(super) fn memo_put(&mut self, index: u64) -> Result<()> {
        let top = self.top()?;
        // Near the entries set, as every pickler writes it (`ErrorKind::MemoIndexAhead`).
        if index >= memo_index_bound(self.memo.count) {
            return Err(self.err(ErrorKind::MemoIndexAhead {
                index,
                entries: self.memo.count,
            }));
        }
        if self.memo.count >= self.limits.max_memo_entries && self.memo.is_new(index) {
            return Err(self.limit(LimitName::MaxMemoEntries, self.memo.count + 1));
        }
        // The memo is charged like the document: its tables hold up to 80 bytes a sparse
        // entry, which `max_alloc_bytes` (and the service's address-space limit made from
        // it) must account for.
        let grown = self.memo.put(index, top).map_err(|_| {
            self.err(ErrorKind::AllocationFailed {
                bytes: self.memo.count.saturating_mul(32),
            })
        })?;
        if grown > 0 {
            self.charge(grown)?;
        }
        Ok(())
    }

    pub(super) fn int_node(&mut self, p: ParsedInt, extra: u64) -> Result<NodeId> {
        match p {
            ParsedInt::Small(v) => self.int(v, extra),
            ParsedInt::Big(b) => self.fat(Fat::BigInt(b), extra),
        }
    }

    pub(super) fn parse_int_text(&self, text: &[u8], of: IntTextOf) -> Result<ParsedInt> {
        text::parse_decimal_int(text, self.limits.max_long_text_digits, of).map_err(|e| match e {
            NumberError::Invalid => self.err(ErrorKind::InvalidNumber),
            NumberError::TooManyDigits(n) => self.limit(LimitName::MaxLongTextDigits, n),
            NumberError::VersionDependent(why) => self.err(ErrorKind::VersionDependentNumber(why)),
        })
    }

    /// LONG1/LONG4 payload: little-endian two's complement.
    pub(super) fn long_bytes(&mut self, n: u64) -> Result<()> {
        // A length past the input is truncation; a present payload over the limit is refused
        // before it is converted.
        if n > self.r.left() {
            return Err(self.r.overrun());
        }
        if n > self.limits.max_long_bytes {
            return Err(self.limit(LimitName::MaxLongBytes, n));
        }
        let bytes = self.r.take(n)?;
        let id = if bytes.len() <= 8 {
            self.int(long_le(bytes), n)?
        } else {
            let b = BigInt::from_signed_bytes_le(bytes);
            match i64::try_from(&b) {
                Ok(v) => self.int(v, n)?,
                Err(_) => self.fat(Fat::BigInt(b), n)?,
            }
        };
        self.push(id)
    }

    pub(super) fn python2_string(&mut self, raw: Cow<'a, [u8]>) -> Result<()> {
        let extra = match &raw {
            Cow::Owned(b) => b.len() as u64,
            Cow::Borrowed(_) => 0,
        };
        let id = match self.policy.python2_str {
            Python2Str::Bytes => self.bytes_node(raw, extra)?,
            Python2Str::Str(enc) => {
                let text = self.decode_python2(raw, enc)?;
                let extra = match &text.bytes {
                    Cow::Owned(b) => b.len() as u64,
                    Cow::Borrowed(_) => 0,
                };
                self.str_node(text, extra)?
            }
        };
        self.push(id)
    }

    pub(super) fn decode_python2(&self, raw: Cow<'a, [u8]>, enc: TextEncoding) -> Result<Text<'a>> {
        let ascii = raw.is_ascii();
        let bytes = match (enc, raw) {
            (TextEncoding::Ascii, _) if !ascii => return Err(self.err(ErrorKind::InvalidAscii)),
            (TextEncoding::Latin1, raw) if !ascii => Cow::Owned(
                raw.iter()
                    .map(|&b| char::from(b))
                    .collect::<String>()
                    .into_bytes(),
            ),
            (_, raw) => {
                if simdutf8::basic::from_utf8(&raw).is_err() {
                    return Err(self.err(ErrorKind::InvalidUtf8));
                }
                raw
            }
        };
        Ok(Text {
            bytes,
            surrogates: false,
        })
    }

    pub(super) fn unicode(&mut self, bytes: &'a [u8]) -> Result<()> {
        // Short ASCII text (most keys and names) is valid as it is: a few instructions, where
        // the validation costs a call and its setup.
        let surrogates = if bytes.len() < 64 && bytes.is_ascii() {
            false
        } else {
            text::decode_utf8_surrogatepass(bytes).map_err(|_| self.err(ErrorKind::InvalidUtf8))?
        };
        let id = self.str_node(
            Text {
                bytes: Cow::Borrowed(bytes),
                surrogates,
            },
            0,
        )?;
        self.push(id)
    }
}
