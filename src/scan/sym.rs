//! The scan's values: a symbol ([`Sym`]) for each stack item and memo entry, and the scan's
//! side of the one interpreter (`src/vm/`): the value operations of [`Vm`] on symbols, which
//! check the kinds opcodes need (APPEND onto a list, SETITEM onto a dict, REDUCE of a global
//! with a tuple, ...) and the forms the policy allows, and build nothing.

use std::borrow::Cow;

use super::{run, GlobalRef, Scan};
use crate::clock::Clock;
use crate::error::{escape_bytes_for_display, Error, ErrorKind, Result};
use crate::limits::{LimitName, Limits};
use crate::memo::{Memo, Slot};
use crate::policy::{Constructor, Policy, Python2Str, TextEncoding};
use crate::reader::Reader;
use crate::text::{self, IntTextOf, Text};
use crate::value::CallKind;
use crate::vm::{Empty, GlobalName, Kind, TextAt, TextKind, Vm};

/// The symbolic value of a stack slot or memo entry: 16 bytes (the memo of a pickle holds one
/// per MEMOIZE, a million or more in a large file). A str is one variant per [`TextKind`],
/// so that every variant's fields sit at offsets 4 and 8: with the kind as a byte field at
/// offset 1, the copies of a symbol (BINGET's, from the memo to the stack) were two
/// overlapping 4-byte moves through the stack that missed store forwarding (perf: 30% of
/// the scan of small objects on two instructions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sym {
    Scalar,
    Bytes,
    ByteArray,
    /// A str of [`TextKind::Utf8`], with where its text is in the input (for STACK_GLOBAL).
    Utf8 {
        start: usize,
        len: u32,
    },
    /// A str of [`TextKind::RawEscape`].
    RawEscape {
        start: usize,
        len: u32,
    },
    /// A str of [`TextKind::Py2Escaped`].
    Py2Escaped {
        start: usize,
        len: u32,
    },
    /// A str of [`TextKind::Py2Raw`].
    Py2Raw {
        start: usize,
        len: u32,
    },
    /// A str of 4 GiB or more: no global has such a name, so its text is not kept.
    LongStr,
    /// A str held apart from the input (from a build the scan took over from,
    /// [`super::resume`]): its index in `Scan::owned`.
    Owned(u32),
    List,
    Tuple,
    Dict,
    Set,
    FrozenSet,
    Global(usize),
    Object(usize),
}

impl Sym {
    /// The symbol of a str whose text is `len` bytes at `start` in the input.
    fn text(start: usize, len: usize, kind: TextKind) -> Sym {
        let Ok(len) = u32::try_from(len) else {
            return Sym::LongStr;
        };
        match kind {
            TextKind::Utf8 => Sym::Utf8 { start, len },
            TextKind::RawEscape => Sym::RawEscape { start, len },
            TextKind::Py2Escaped => Sym::Py2Escaped { start, len },
            TextKind::Py2Raw => Sym::Py2Raw { start, len },
        }
    }

    /// Where the text of a str symbol is (start, length in bytes) and how to read it.
    fn as_text(self) -> Option<(usize, usize, TextKind)> {
        let (start, len, kind) = match self {
            Sym::Utf8 { start, len } => (start, len, TextKind::Utf8),
            Sym::RawEscape { start, len } => (start, len, TextKind::RawEscape),
            Sym::Py2Escaped { start, len } => (start, len, TextKind::Py2Escaped),
            Sym::Py2Raw { start, len } => (start, len, TextKind::Py2Raw),
            _ => return None,
        };
        Some((start, len as usize, kind))
    }
}

const _: () = assert!(std::mem::size_of::<Sym>() == 16);

/// An unset slot of the scan's memo: a text no input holds (its start is past any input).
impl Slot for Sym {
    const UNSET: Sym = Sym::Utf8 {
        start: usize::MAX,
        len: u32::MAX,
    };
}

impl Scan<'_, '_> {
    /// The symbol of what the build made (a scan taking over from it, [`super::resume`]).
    pub(super) fn sym_of(&mut self, kind: Kind) -> Sym {
        match kind {
            Kind::Scalar => Sym::Scalar,
            Kind::Bytes => Sym::Bytes,
            Kind::ByteArray => Sym::ByteArray,
            Kind::InputStr { start, len } => Sym::text(start, len, TextKind::Utf8),
            Kind::OwnedStr(bytes, surrogates) => match u32::try_from(self.owned.len()) {
                Ok(i) => {
                    self.owned.push((bytes, surrogates));
                    Sym::Owned(i)
                }
                Err(_) => Sym::LongStr,
            },
            Kind::List => Sym::List,
            Kind::Tuple => Sym::Tuple,
            Kind::Dict => Sym::Dict,
            Kind::Set => Sym::Set,
            Kind::FrozenSet => Sym::FrozenSet,
            Kind::Global(rule) => Sym::Global(rule),
            Kind::Object(rule) => Sym::Object(rule),
        }
    }

    /// The `surrogatepass` UTF-8 of the str the input's text at `start..start + len` decodes
    /// to (`None` when it does not decode): what the build keeps for it.
    fn text_bytes_of(&self, start: usize, len: usize, kind: TextKind) -> Option<Vec<u8>> {
        let raw = self.r.input.get(start..start.checked_add(len)?)?;
        let bytes: Vec<u8> = match kind {
            TextKind::Utf8 => {
                text::decode_utf8_surrogatepass(raw).ok()?;
                raw.to_vec()
            }
            TextKind::RawEscape => text::decode_raw_unicode_escape(raw)
                .ok()?
                .bytes
                .into_owned(),
            TextKind::Py2Escaped | TextKind::Py2Raw => {
                let unescaped = if kind == TextKind::Py2Escaped {
                    text::decode_string_escape(raw).ok()?.into_owned()
                } else {
                    raw.to_vec()
                };
                match self.policy.python2_str {
                    Python2Str::Str(TextEncoding::Latin1) => unescaped
                        .iter()
                        .map(|&b| char::from(b))
                        .collect::<String>()
                        .into_bytes(),
                    _ => unescaped,
                }
            }
        };
        Some(bytes)
    }

    /// The policy rule of a callable: a global's; for a record object (what a call made, which
    /// CPython would call) a policy refusal, for anything else a type mismatch (as the build's
    /// `Machine::rule_of`).
    fn callable_rule(&self, callable: Sym) -> Result<usize> {
        match callable {
            Sym::Global(rule) => Ok(rule),
            Sym::Object(_) => Err(self.err(ErrorKind::CallableNotAllowed)),
            _ => Err(self.err(ErrorKind::TypeMismatch("callable is not a global"))),
        }
    }

    /// Whether a record made from `rule` allows APPEND/SETITEM (`items`) or BUILD.
    fn record_allows(&self, rule: usize, build: bool) -> bool {
        self.policy
            .rule(rule)
            .is_some_and(|r| if build { r.forms.build } else { r.forms.items })
    }

    /// [`ErrorKind::FormNotAllowed`] of `form` on a record made from `rule`, naming its global.
    #[cold]
    fn form_refused(&self, rule: usize, form: &'static str) -> Error {
        match self.policy.rule(rule) {
            Some(r) => self.err(r.form_refused(form)),
            None => self.err(ErrorKind::TypeMismatch("dangling rule")),
        }
    }
}

impl<'a> Vm<'a> for Scan<'a, '_> {
    type V = Sym;

    #[inline(always)]
    fn reader(&self) -> &Reader<'a> {
        &self.r
    }
    #[inline(always)]
    fn reader_mut(&mut self) -> &mut Reader<'a> {
        &mut self.r
    }
    #[inline(always)]
    fn stack(&self) -> &Vec<Sym> {
        &self.stack
    }
    #[inline(always)]
    fn stack_mut(&mut self) -> &mut Vec<Sym> {
        &mut self.stack
    }
    #[inline(always)]
    fn marks(&self) -> &Vec<usize> {
        &self.marks
    }
    #[inline(always)]
    fn marks_mut(&mut self) -> &mut Vec<usize> {
        &mut self.marks
    }
    #[inline(always)]
    fn memo(&self) -> &Memo<Sym> {
        &self.memo
    }
    #[inline(always)]
    fn memo_mut(&mut self) -> &mut Memo<Sym> {
        &mut self.memo
    }
    #[inline(always)]
    fn limits(&self) -> &Limits {
        &self.limits
    }
    #[inline(always)]
    fn policy(&self) -> &Policy {
        self.policy
    }
    #[inline(always)]
    fn opcodes_mut(&mut self) -> &mut u64 {
        &mut self.opcodes
    }
    #[inline(always)]
    fn clock_mut(&mut self) -> &mut Clock {
        &mut self.clock
    }

    #[inline(always)]
    fn on_opcode(&mut self, byte: u8) {
        if let Some(c) = self.report.opcode_counts.get_mut(usize::from(byte)) {
            *c += 1;
        }
    }

    /// Reads on through the scalar opcodes that follow an int (a list of ints is mostly
    /// these): the state lives in locals for the run ([`run::scalar_run`]) and is written
    /// back once. The run stops before any opcode it would not read in full, which the
    /// interpreter then reads with the usual checks, errors and offsets.
    #[inline]
    fn after_int(&mut self) {
        let depth = (self.stack.len() + self.marks.len()) as u64;
        let room = self
            .limits
            .max_stack_len
            .saturating_sub(depth)
            .min(self.limits.max_opcodes.saturating_sub(self.opcodes));
        let long1 = self.limits.max_long_bytes >= u64::from(u8::MAX);
        let (pos, n) = run::scalar_run(
            self.r.input,
            self.r.pos,
            self.r.read_end(),
            room,
            long1,
            &mut self.report.opcode_counts,
        );
        if n > 0 {
            self.r.pos = pos;
            self.opcodes += n;
            // n <= room <= max_stack_len, and each of the n opcodes is at least a byte of
            // the input: the stack grows by what the input holds.
            let len = self
                .stack
                .len()
                .saturating_add(usize::try_from(n).unwrap_or(0));
            self.stack.resize(len, Sym::Scalar);
        }
    }

    fn root(&mut self, root: Sym) -> Result<Sym> {
        Ok(root)
    }

    fn protocol(&mut self, p: u8) {
        self.report.protocol = self.report.protocol.max(p);
    }

    /// The scan builds nothing else of that size: its memo alone is held to the allocation
    /// budget, charged as the decode's memo takes it (src/vm/memo.rs), so that the scan never
    /// refuses on the budget an input the decode accepts (the decode charges the same memo
    /// with the document).
    fn charge_memo(&mut self, grown: u64) -> Result<()> {
        self.memo_bytes += grown;
        if self.memo_bytes > self.limits.max_alloc_bytes {
            return Err(self.limit(LimitName::MaxAllocBytes, self.memo_bytes));
        }
        Ok(())
    }

    fn none(&mut self) -> Result<Sym> {
        Ok(Sym::Scalar)
    }

    fn bool(&mut self, _b: bool) -> Result<Sym> {
        Ok(Sym::Scalar)
    }

    fn int(&mut self, _x: i64) -> Result<Sym> {
        Ok(Sym::Scalar)
    }

    fn int_text(&mut self, digits: &[u8], of: IntTextOf) -> Result<Sym> {
        text::check_decimal_int(digits, self.limits.max_long_text_digits, of)
            .map_err(|e| self.number_err(e))?;
        Ok(Sym::Scalar)
    }

    fn long_le(&mut self, _bytes: &'a [u8]) -> Result<Sym> {
        Ok(Sym::Scalar)
    }

    fn float(&mut self, _x: f64) -> Result<Sym> {
        Ok(Sym::Scalar)
    }

    fn str(&mut self, _text: Text<'a>, at: TextAt) -> Result<Sym> {
        Ok(Sym::text(at.start, at.len, at.kind))
    }

    fn python2_str(&mut self, _raw: Cow<'a, [u8]>, _enc: TextEncoding, at: TextAt) -> Result<Sym> {
        Ok(Sym::text(at.start, at.len, at.kind))
    }

    fn bytes(&mut self, _b: Cow<'a, [u8]>) -> Result<Sym> {
        Ok(Sym::Bytes)
    }

    fn bytearray(&mut self, _b: &'a [u8]) -> Result<Sym> {
        Ok(Sym::ByteArray)
    }

    fn next_buffer(&mut self) -> Result<Sym> {
        match self.buffers.as_mut() {
            Some(n) if *n > 0 => *n -= 1,
            _ => return Err(self.err(ErrorKind::BuffersNotSupplied)),
        }
        Ok(Sym::Bytes)
    }

    fn is_buffer(&self, v: Sym) -> Result<bool> {
        Ok(matches!(v, Sym::Bytes | Sym::ByteArray))
    }

    fn empty(&mut self, kind: Empty) -> Result<Sym> {
        Ok(match kind {
            Empty::List => Sym::List,
            Empty::Tuple => Sym::Tuple,
            Empty::Dict => Sym::Dict,
            Empty::Set => Sym::Set,
        })
    }

    fn seq(&mut self, _start: usize, tuple: bool) -> Result<Sym> {
        Ok(if tuple { Sym::Tuple } else { Sym::List })
    }

    fn dict(&mut self, _start: usize) -> Result<Sym> {
        Ok(Sym::Dict)
    }

    fn frozenset(&mut self, _start: usize) -> Result<Sym> {
        Ok(Sym::FrozenSet)
    }

    fn append(&mut self, target: Sym, _start: usize) -> Result<()> {
        match target {
            Sym::List => {}
            Sym::Object(rule) if self.record_allows(rule, false) => {}
            Sym::Object(rule) => return Err(self.form_refused(rule, "APPEND")),
            _ => return Err(self.err(ErrorKind::TypeMismatch("APPEND target is not a list"))),
        }
        Ok(())
    }

    fn set_items(&mut self, target: Sym, _start: usize) -> Result<()> {
        match target {
            Sym::Dict => {}
            Sym::Object(rule) if self.record_allows(rule, false) => {}
            Sym::Object(rule) => return Err(self.form_refused(rule, "SETITEM")),
            _ => return Err(self.err(ErrorKind::TypeMismatch("SETITEM target is not a dict"))),
        }
        Ok(())
    }

    fn add_items(&mut self, target: Sym, _start: usize) -> Result<()> {
        if target != Sym::Set {
            return Err(self.err(ErrorKind::TypeMismatch("ADDITEMS target is not a set")));
        }
        Ok(())
    }

    fn persistent_id(&mut self, _pid: Sym) -> Result<Sym> {
        // The id stands where persistent_load's object would; what it holds is checked by the
        // build (the schema) and the container (torch storages).
        match self.policy.persistent_ids {
            crate::policy::PersistentIds::Record(_) => Ok(Sym::Scalar),
            crate::policy::PersistentIds::Reject => Err(self.err(ErrorKind::PersistentIdRejected)),
        }
    }

    fn set_state(&mut self, target: Sym, _state: Sym) -> Result<()> {
        match target {
            Sym::Object(rule) if self.record_allows(rule, true) => Ok(()),
            Sym::Object(rule) => Err(self.form_refused(rule, "BUILD")),
            _ => Err(self.err(ErrorKind::BuildNotAllowed)),
        }
    }

    /// A call: checks kinds and forms; returns the result's symbol.
    fn call(
        &mut self,
        callable: Sym,
        args: Sym,
        kwargs: Option<Sym>,
        kind: CallKind,
    ) -> Result<Sym> {
        let rule_index = self.callable_rule(callable)?;
        if args != Sym::Tuple {
            return Err(self.err(ErrorKind::TypeMismatch("arguments are not a tuple")));
        }
        if kwargs.is_some_and(|k| k != Sym::Dict) {
            return Err(self.err(ErrorKind::TypeMismatch("NEWOBJ_EX kwargs are not a dict")));
        }
        let rule = self
            .policy
            .rule(rule_index)
            .ok_or_else(|| self.err(ErrorKind::TypeMismatch("dangling rule")))?;
        rule.check_call(kind).map_err(|k| self.err(k))?;
        Ok(match rule.constructor {
            Constructor::Latin1Bytes | Constructor::Bytes => Sym::Bytes,
            Constructor::ByteArray => Sym::ByteArray,
            Constructor::Set => Sym::Set,
            Constructor::FrozenSet => Sym::FrozenSet,
            Constructor::Complex => Sym::Scalar,
            Constructor::Record => Sym::Object(rule_index),
        })
    }

    fn global(&mut self, _module: Cow<'a, str>, _name: Cow<'a, str>, rule: usize) -> Result<Sym> {
        Ok(Sym::Global(rule))
    }

    /// Records a global reference for the report, once.
    fn note_global(&mut self, module: &str, name: &str, allowed: bool) {
        if self
            .report
            .globals
            .iter()
            .any(|g| g.module == module && g.name == name)
        {
            return;
        }
        // An allowed global's names are the policy's own; a refused one's are the input's,
        // of any length (a GLOBAL line can be as long as the input), so they are kept as
        // written only when they are Python names of at most MAX_NAME_CHARS characters (what
        // `scan --trust` writes into a policy), else as the error message shows them:
        // escaped and cut at 64 characters. Else a verdict listing them (`scan`, the
        // service's /v1/check) grows with the input, six times over for control characters
        // written `\u00XX`.
        let (module, name) = if allowed {
            (module.to_owned(), name.to_owned())
        } else {
            (
                crate::policy::shown_name(module.as_bytes()),
                crate::policy::shown_name(name.as_bytes()),
            )
        };
        self.report.globals.push(GlobalRef {
            module,
            name,
            allowed,
            offset: self.r.op_pos as u64,
        });
    }

    fn global_name(&self, v: Sym) -> Result<GlobalName<'a>> {
        if v == Sym::LongStr {
            return Ok(GlobalName::Unnamed("<a str of 4 GiB or more>".to_string()));
        }
        if let Sym::Owned(i) = v {
            let Some((bytes, surrogates)) = self.owned.get(i as usize) else {
                return Ok(GlobalName::NotStr);
            };
            return Ok(match std::str::from_utf8(bytes) {
                Ok(t) if !surrogates => GlobalName::Text(Cow::Owned(t.to_owned())),
                _ => GlobalName::Unnamed(escape_bytes_for_display(bytes)),
            });
        }
        let Some((start, len, kind)) = v.as_text() else {
            return Ok(GlobalName::NotStr);
        };
        // Shown as the build shows it: the decoded text (its lone surrogates lossy), so that
        // both report one refusal.
        let bytes = self.text_bytes_of(start, len, kind);
        Ok(match bytes.map(String::from_utf8) {
            Some(Ok(t)) => GlobalName::Text(Cow::Owned(t)),
            Some(Err(e)) => GlobalName::Unnamed(escape_bytes_for_display(e.as_bytes())),
            None => GlobalName::Unnamed(escape_bytes_for_display(
                self.r.input.get(start..start + len).unwrap_or_default(),
            )),
        })
    }
}
