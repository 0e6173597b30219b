//! The interpreter ([`Interpreter`]): [`Interpreter::run`] reads one opcode at a time and
//! [`Interpreter::step`] decodes its argument and executes it with every rule that does not
//! depend on what the values are, for every [`Vm`].

use std::borrow::Cow;

use super::{Empty, Globals, StackOps, TextAt, TextKind, Vm};
use crate::error::{ErrorKind, Result};
use crate::limits::LimitName;
use crate::memo::memo_index_ahead;
use crate::opcode::{Opcode, BININT_ARG};
use crate::policy::{PersistentIds, Python2Str, TextEncoding};
use crate::text::{self, IntTextOf, Text};
use crate::value::CallKind;

/// Text payloads shorter than this are checked for ASCII first (most keys and names), which is
/// a few instructions where the UTF-8 validation costs a call and its setup.
const SHORT_TEXT_BYTES: usize = 64;

/// Whether `raw` (a Python 2 string) is valid in `enc`, as the policy reads such strings.
pub(crate) fn check_python2(raw: &[u8], enc: TextEncoding) -> std::result::Result<(), ErrorKind> {
    match enc {
        TextEncoding::Ascii if !raw.is_ascii() => Err(ErrorKind::InvalidAscii),
        TextEncoding::Utf8 if simdutf8::basic::from_utf8(raw).is_err() => {
            Err(ErrorKind::InvalidUtf8)
        }
        _ => Ok(()),
    }
}

/// The opcodes of protocols 0-5, for every [`Vm`].
pub(crate) trait Interpreter<'a>: Vm<'a> {
    /// Runs until STOP; returns the pickle's value. The opcodes run in [`Vm::fast`] for as
    /// long as it takes them, and one at a time here when it does not.
    fn run(&mut self) -> Result<Self::V> {
        loop {
            if let Some(root) = self.fast()? {
                return Ok(root);
            }
            let byte = self.reader_mut().next_opcode()?;
            let opcodes = {
                let n = self.opcodes_mut();
                *n += 1;
                *n
            };
            if opcodes > self.limits().max_opcodes {
                return Err(self.limit(LimitName::MaxOpcodes, opcodes));
            }
            if self.clock_mut().passed_after(opcodes) {
                return Err(self.err(ErrorKind::DeadlineExceeded));
            }
            self.on_opcode(byte);
            let arg = BININT_ARG.get(usize::from(byte)).copied().unwrap_or(0);
            if arg != 0 {
                let v = self.reader_mut().take_binint(arg - 1)?;
                let v = self.int(v)?;
                self.push(v)?;
                self.after_int();
                continue;
            }
            // The memo opcodes pickle.dumps writes most (every value MEMOIZEd at protocol 4,
            // BINPUT at 1-3; every repeated object a BINGET) without the dispatch's indirect
            // jump. Their arms in `step` are then not reached (its match lists every opcode).
            if byte == Opcode::Memoize.byte() {
                let i = self.memo().count;
                self.memo_put(i)?;
                continue;
            }
            if byte == Opcode::Binget.byte() {
                let i = u64::from(self.reader_mut().take_u8()?);
                self.memo_get(i)?;
                continue;
            }
            if byte == Opcode::Binput.byte() {
                let i = u64::from(self.reader_mut().take_u8()?);
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

    /// STOP: the stack must hold the one value and no MARK (CPython ignores what is left).
    fn stop(&mut self) -> Result<Self::V> {
        if !self.marks().is_empty() {
            return Err(self.err(ErrorKind::StackNotEmpty));
        }
        let start = self.top_group(1)?;
        if start != 0 {
            return Err(self.err(ErrorKind::StackNotEmpty));
        }
        let root = self.below(1)?;
        let root = self.root(root)?;
        self.stack_mut().clear();
        Ok(root)
    }

    /// Executes `op` (any opcode but STOP, which [`Interpreter::stop`] ends a pickle with).
    ///
    /// The stack and the MARKs change only once every operation of the opcode succeeded: a
    /// value operation that refuses leaves them as they were before the opcode (the MARK of
    /// a group is popped, and its items removed, after the value is made), so that a scan can
    /// take over from there (`Machine::rescan`).
    fn step(&mut self, op: Opcode) -> Result<()> {
        use Opcode as O;
        match op {
            O::Mark => self.mark()?,
            O::Stop => {}
            O::Pop => {
                // POP of a MARK on top pops the MARK (`Lib/pickle.py` `load_pop`).
                let len = self.stack().len();
                if self.marks().last() == Some(&len) {
                    self.marks_mut().pop();
                } else {
                    self.pop()?;
                }
            }
            O::PopMark => {
                let start = self.group_start()?;
                self.end_group(start);
            }
            O::Dup => {
                let top = self.top()?;
                self.push(top)?;
            }
            O::Float => {
                let line = self.reader_mut().read_line()?;
                let x = text::parse_float(line).map_err(|_| self.err(ErrorKind::InvalidNumber))?;
                let v = self.float(x)?;
                self.push(v)?;
            }
            O::Binfloat => {
                let b = self.reader_mut().take_array::<8>()?;
                let v = self.float(f64::from_be_bytes(b))?;
                self.push(v)?;
            }
            O::Int => {
                let line = self.reader_mut().read_line()?;
                // Only "00" and "01" (how protocol 0 writes False and True) are bools, as in
                // Lib/pickle.py and, since gh-135241 (2025), _pickle.c; before it, the C
                // unpickler also made bools of "+0", "-0" and "+1" (any two characters valued
                // 0 or 1), so those three are refused (text::parse_decimal_int).
                let v = match line {
                    b"00" => self.bool(false)?,
                    b"01" => self.bool(true)?,
                    _ => self.int_text(line, IntTextOf::Int)?,
                };
                self.push(v)?;
            }
            O::Long => {
                let line = self.reader_mut().read_line()?;
                let digits = line.strip_suffix(b"L").unwrap_or(line);
                let v = self.int_text(digits, IntTextOf::Long)?;
                self.push(v)?;
            }
            // `run` reads these before dispatching (one branch-free path for the three).
            O::Binint | O::Binint1 | O::Binint2 => {
                let arg = BININT_ARG.get(usize::from(op.byte())).copied().unwrap_or(0);
                let x = self.reader_mut().take_binint(arg.saturating_sub(1))?;
                let v = self.int(x)?;
                self.push(v)?;
            }
            O::Long1 => {
                let n = self.reader_mut().take_u8()?;
                self.long_bytes(u64::from(n))?;
            }
            O::Long4 => {
                let n = i32::from_le_bytes(self.reader_mut().take_array::<4>()?);
                let n = u64::try_from(n).map_err(|_| self.err(ErrorKind::InvalidNumber))?;
                self.long_bytes(n)?;
            }
            O::None => {
                let v = self.none()?;
                self.push(v)?;
            }
            O::Newtrue | O::Newfalse => {
                let v = self.bool(op == O::Newtrue)?;
                self.push(v)?;
            }
            O::String => {
                let line = self.reader_mut().read_line()?;
                let body = match line {
                    [q @ (b'\'' | b'"'), body @ .., last] if q == last => body,
                    _ => return Err(self.err(ErrorKind::InvalidString)),
                };
                let raw = text::decode_string_escape(body)
                    .map_err(|_| self.err(ErrorKind::InvalidEscape))?;
                // The body starts after the opening quote; the line ended with a newline.
                let start = self.reader().pos - line.len();
                let at = TextAt {
                    start,
                    len: body.len(),
                    kind: TextKind::Py2Escaped,
                };
                self.python2_string(raw, at)?;
            }
            O::Binstring => {
                let n = i32::from_le_bytes(self.reader_mut().take_array::<4>()?);
                let n = u64::try_from(n).map_err(|_| self.err(ErrorKind::InvalidNumber))?;
                let b = self.reader_mut().take(n)?;
                self.python2_payload(b)?;
            }
            O::ShortBinstring => {
                let b = self.reader_mut().take_prefixed::<1>()?;
                self.python2_payload(b)?;
            }
            O::Unicode => {
                let line = self.reader_mut().read_line()?;
                let s = text::decode_raw_unicode_escape(line)
                    .map_err(|_| self.err(ErrorKind::InvalidEscape))?;
                let at = TextAt {
                    start: self.reader().pos - 1 - line.len(),
                    len: line.len(),
                    kind: TextKind::RawEscape,
                };
                let v = self.str(s, at)?;
                self.push(v)?;
            }
            O::Binunicode => {
                let b = self.reader_mut().take_prefixed::<4>()?;
                self.unicode(b)?;
            }
            O::ShortBinunicode => {
                let b = self.reader_mut().take_prefixed::<1>()?;
                self.unicode(b)?;
            }
            O::Binunicode8 => {
                let b = self.reader_mut().take_prefixed::<8>()?;
                self.unicode(b)?;
            }
            O::Binbytes | O::ShortBinbytes | O::Binbytes8 => {
                let b = match op {
                    O::Binbytes => self.reader_mut().take_prefixed::<4>()?,
                    O::ShortBinbytes => self.reader_mut().take_prefixed::<1>()?,
                    _ => self.reader_mut().take_prefixed::<8>()?,
                };
                let v = self.bytes(Cow::Borrowed(b))?;
                self.push(v)?;
            }
            O::Bytearray8 => {
                let b = self.reader_mut().take_prefixed::<8>()?;
                let v = self.bytearray(b)?;
                self.push(v)?;
            }
            O::NextBuffer => {
                let v = self.next_buffer()?;
                self.push(v)?;
            }
            // CPython's `memoryview(obj).toreadonly()` unless the view is already read-only,
            // in-band or out-of-band alike: bytes (and an out-of-band buffer, bytes here) stay
            // as they are; a bytearray becomes a read-only memoryview of it, which has no value
            // of its own here and is kept as that bytearray (equal, shared, unhashable, as the
            // view is; docs/how-it-works.md).
            O::ReadonlyBuffer => {
                let top = self.top()?;
                if !self.is_buffer(top)? {
                    return Err(
                        self.err(ErrorKind::TypeMismatch("READONLY_BUFFER on a non-buffer"))
                    );
                }
            }
            O::EmptyList | O::EmptyTuple | O::EmptyDict | O::EmptySet => {
                let kind = match op {
                    O::EmptyList => Empty::List,
                    O::EmptyTuple => Empty::Tuple,
                    O::EmptyDict => Empty::Dict,
                    _ => Empty::Set,
                };
                let v = self.empty(kind)?;
                self.push(v)?;
            }
            O::List | O::Tuple => {
                let start = self.group_start()?;
                let v = self.seq(start, op == O::Tuple)?;
                self.end_group(start);
                self.push(v)?;
            }
            O::Tuple1 | O::Tuple2 | O::Tuple3 => {
                let n = match op {
                    O::Tuple1 => 1,
                    O::Tuple2 => 2,
                    _ => 3,
                };
                let start = self.top_group(n)?;
                let v = self.seq(start, true)?;
                self.stack_mut().truncate(start);
                self.push(v)?;
            }
            O::Dict => {
                let start = self.group_start()?;
                if !(self.stack().len() - start).is_multiple_of(2) {
                    return Err(self.err(ErrorKind::OddItemCount));
                }
                let v = self.dict(start)?;
                self.end_group(start);
                self.push(v)?;
            }
            O::Frozenset => {
                let start = self.group_start()?;
                let v = self.frozenset(start)?;
                self.end_group(start);
                self.push(v)?;
            }
            O::Append | O::Appends => {
                let (start, target) = if op == O::Append {
                    let start = self.top_group(1)?;
                    (start, self.below(start)?)
                } else {
                    let start = self.group_start()?;
                    (start, self.group_target(start)?)
                };
                self.append(target, start)?;
                self.end_items(op == O::Appends, start);
            }
            O::Setitem | O::Setitems => {
                let (start, target) = if op == O::Setitem {
                    let start = self.top_group(2)?;
                    (start, self.below(start)?)
                } else {
                    let start = self.group_start()?;
                    (start, self.group_target(start)?)
                };
                if !(self.stack().len() - start).is_multiple_of(2) {
                    return Err(self.err(ErrorKind::OddItemCount));
                }
                self.set_items(target, start)?;
                self.end_items(op == O::Setitems, start);
            }
            O::Additems => {
                let start = self.group_start()?;
                let target = self.group_target(start)?;
                self.add_items(target, start)?;
                self.end_group(start);
            }
            O::Get | O::Binget | O::LongBinget => {
                let i = self.reader_mut().memo_arg(op)?;
                self.memo_get(i)?;
            }
            O::Put | O::Binput | O::LongBinput => {
                let i = self.reader_mut().memo_arg(op)?;
                self.memo_put(i)?;
            }
            O::Memoize => {
                let i = self.memo().count;
                self.memo_put(i)?;
            }
            O::Global => {
                let g = self.global_line()?;
                self.push(g)?;
            }
            O::StackGlobal => self.stack_global()?,
            O::Inst => {
                if self.marks().is_empty() {
                    return Err(self.err(ErrorKind::MarkMissing));
                }
                let cls = self.global_line()?;
                let start = self.group_start()?;
                let args = self.seq(start, true)?;
                let v = self.call(cls, args, None, CallKind::Inst)?;
                self.end_group(start);
                self.push(v)?;
            }
            O::Obj => {
                let start = self.group_start()?;
                let Some(&cls) = self.stack().get(start) else {
                    return Err(self.err(ErrorKind::StackUnderflow));
                };
                let args = self.seq(start + 1, true)?;
                let v = self.call(cls, args, None, CallKind::Obj)?;
                self.end_group(start);
                self.push(v)?;
            }
            O::Reduce | O::Newobj => {
                let start = self.top_group(2)?;
                let (callable, args) = (self.below(start + 1)?, self.below(start + 2)?);
                let kind = if op == O::Reduce {
                    CallKind::Reduce
                } else {
                    CallKind::NewObj
                };
                let v = self.call(callable, args, None, kind)?;
                self.stack_mut().truncate(start);
                self.push(v)?;
            }
            O::NewobjEx => {
                let start = self.top_group(3)?;
                let (cls, args, kwargs) = (
                    self.below(start + 1)?,
                    self.below(start + 2)?,
                    self.below(start + 3)?,
                );
                let v = self.call(cls, args, Some(kwargs), CallKind::NewObjEx)?;
                self.stack_mut().truncate(start);
                self.push(v)?;
            }
            O::Build => {
                let start = self.top_group(2)?;
                let (target, state) = (self.below(start + 1)?, self.below(start + 2)?);
                self.set_state(target, state)?;
                self.stack_mut().truncate(start + 1);
            }
            O::Ext1 => {
                let c = self.reader_mut().take_u8()?;
                self.extension(i64::from(c))?;
            }
            O::Ext2 => {
                let c = u16::from_le_bytes(self.reader_mut().take_array::<2>()?);
                self.extension(i64::from(c))?;
            }
            O::Ext4 => {
                let c = i32::from_le_bytes(self.reader_mut().take_array::<4>()?);
                self.extension(i64::from(c))?;
            }
            O::Binpersid => {
                // Under `reject` refused before the stack is looked at: a policy refusal,
                // whatever the stack holds.
                if !matches!(self.policy().persistent_ids, PersistentIds::Record(_)) {
                    return Err(self.err(ErrorKind::PersistentIdRejected));
                }
                let start = self.top_group(1)?;
                let pid = self.below(start + 1)?;
                let v = self.persistent_id(pid)?;
                self.stack_mut().truncate(start);
                self.push(v)?;
            }
            O::Persid => {
                return Err(self.err(ErrorKind::PersistentIdRejected));
            }
            O::Proto => {
                let p = self.reader_mut().take_u8()?;
                if p > 5 {
                    return Err(self.err(ErrorKind::UnsupportedProtocol(p)));
                }
                self.reader_mut().proto = p;
                self.protocol(p);
            }
            O::Frame => self.reader_mut().frame()?,
        }
        Ok(())
    }

    /// GET, BINGET, LONG_BINGET: the memo entry `index`, which an earlier PUT must have set.
    // Inlined into `run`, which the compiler would not choose for a function of `run`'s
    // size: BINGET is one of the commonest opcodes, and the call would be on its path.
    #[inline(always)]
    fn memo_get(&mut self, index: u64) -> Result<()> {
        let v = self
            .memo()
            .get(index)
            .ok_or_else(|| self.err(ErrorKind::MemoKeyMissing(index)))?;
        self.push(v)
    }

    /// PUT, BINPUT, LONG_BINPUT, MEMOIZE: the top item as memo entry `index`.
    fn memo_put(&mut self, index: u64) -> Result<()> {
        let top = self.top()?;
        let count = self.memo().count;
        // Near the entries set, as every pickler writes it, or below 2**20
        // (`ErrorKind::MemoIndexAhead`, src/vm/memo.rs `memo_index_ahead`).
        if memo_index_ahead(index, count) {
            return Err(self.err(ErrorKind::MemoIndexAhead {
                index,
                entries: count,
            }));
        }
        if count >= self.limits().max_memo_entries && self.memo().is_new(index) {
            return Err(self.limit(LimitName::MaxMemoEntries, count + 1));
        }
        // The memo is charged like the document: its tables hold up to 80 bytes a sparse
        // entry, which `max_alloc_bytes` (and the service's address-space limit made from
        // it) must account for.
        let grown = self.memo_mut().put(index, top).map_err(|_| {
            self.err(ErrorKind::AllocationFailed {
                bytes: count.saturating_mul(32),
            })
        })?;
        if grown > 0 {
            self.charge_memo(grown)?;
        }
        Ok(())
    }

    /// LONG1/LONG4 payload of `n` bytes.
    fn long_bytes(&mut self, n: u64) -> Result<()> {
        // A length past the input is truncation; a present payload over the limit is refused
        // before it is converted.
        if n > self.reader().left() {
            return Err(self.reader().overrun());
        }
        if n > self.limits().max_long_bytes {
            return Err(self.limit(LimitName::MaxLongBytes, n));
        }
        let bytes = self.reader_mut().take(n)?;
        let v = self.long_le(bytes)?;
        self.push(v)
    }

    /// BINSTRING, SHORT_BINSTRING: `raw`, the payload just read.
    fn python2_payload(&mut self, raw: &'a [u8]) -> Result<()> {
        let at = TextAt {
            start: self.reader().pos - raw.len(),
            len: raw.len(),
            kind: TextKind::Py2Raw,
        };
        self.python2_string(Cow::Borrowed(raw), at)
    }

    /// A Python 2 string, as the policy reads it: bytes, or str in its encoding.
    fn python2_string(&mut self, raw: Cow<'a, [u8]>, at: TextAt) -> Result<()> {
        let v = match self.policy().python2_str {
            Python2Str::Bytes => self.bytes(raw)?,
            Python2Str::Str(enc) => {
                check_python2(&raw, enc).map_err(|k| self.err(k))?;
                self.python2_str(raw, enc, at)?
            }
        };
        self.push(v)
    }

    /// BINUNICODE, SHORT_BINUNICODE, BINUNICODE8: `bytes`, the payload just read, as CPython
    /// decodes it (`'utf-8', 'surrogatepass'`).
    fn unicode(&mut self, bytes: &'a [u8]) -> Result<()> {
        // Short ASCII text (most keys and names) is valid as it is: a few instructions, where
        // the validation costs a call and its setup.
        let surrogates = if bytes.len() < SHORT_TEXT_BYTES && bytes.is_ascii() {
            false
        } else {
            text::decode_utf8_surrogatepass(bytes).map_err(|_| self.err(ErrorKind::InvalidUtf8))?
        };
        let at = TextAt {
            start: self.reader().pos - bytes.len(),
            len: bytes.len(),
            kind: TextKind::Utf8,
        };
        let v = self.str(
            Text {
                bytes: Cow::Borrowed(bytes),
                surrogates,
            },
            at,
        )?;
        self.push(v)
    }
}

impl<'a, T: Vm<'a> + ?Sized> Interpreter<'a> for T {}
