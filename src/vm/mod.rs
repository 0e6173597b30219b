//! The one interpreter of the opcodes, shared by scan-only mode and the build: the way
//! wasmparser's validator walks the operators its reader decoded, the interpreter decodes each
//! instruction once (through the [`Reader`]) and applies one set of rules (stack and MARK
//! discipline, the memo, globals resolution, Python 2 strings, number text, protocol, frames,
//! the limits it can see), calling the value operations of a [`Vm`] for what the values are.
//!
//! ```text
//! vm/
//!   mod.rs      the Vm trait: the state the interpreter needs and the value operations
//!   stack.rs    the stack and its MARKs: push, pop, groups, fences (StackOps)
//!   globals.rs  GLOBAL, STACK_GLOBAL, INST's class and EXT1/2/4 resolved through the policy
//!   interp.rs   run() and step(): the opcodes, one arm each, for every Vm (Interpreter)
//!   memo.rs     the memo: dense for the indices picklers write, sparse beyond
//!   clock.rs    the deadline, looked at once per so much work
//! ```
//!
//! Two values implement [`Vm`]: the scan's symbols (`src/scan/`: the kind of each item, no
//! values) and the build's arena nodes (`src/build/`). An input is accepted by a build only if
//! every rule here passed, so a rule written here holds for both.

pub(crate) mod clock;
mod globals;
mod interp;
pub(crate) mod memo;
mod stack;

use std::borrow::Cow;

use crate::clock::Clock;
use crate::error::{Error, ErrorKind, Result};
use crate::limits::{LimitName, Limits};
use crate::memo::{Memo, Slot};
use crate::policy::{Policy, TextEncoding};
use crate::reader::Reader;
use crate::text::{IntTextOf, NumberError, Text};
use crate::value::CallKind;

pub(crate) use globals::Globals;
pub(crate) use interp::Interpreter;
pub(crate) use stack::StackOps;

/// How the text of a str is written in the input (the scan reads a name for STACK_GLOBAL back
/// from there, keeping no text of its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TextKind {
    /// BINUNICODE payload (UTF-8, surrogatepass).
    Utf8,
    /// UNICODE line (raw-unicode-escape).
    RawEscape,
    /// STRING line body (escaped), decoded with the policy's Python 2 encoding.
    Py2Escaped,
    /// BINSTRING/SHORT_BINSTRING payload, decoded with the policy's Python 2 encoding.
    Py2Raw,
}

/// Where a str's text is in the input: `len` bytes at `start`, written as `kind`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TextAt {
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) kind: TextKind,
}

/// The empty containers EMPTY_LIST, EMPTY_TUPLE, EMPTY_DICT and EMPTY_SET make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Empty {
    List,
    Tuple,
    Dict,
    Set,
}

/// What a stack item gives STACK_GLOBAL as a module or qualified name.
pub(crate) enum GlobalName<'a> {
    /// Not a str: STACK_GLOBAL is refused as a type mismatch.
    NotStr,
    /// A str, as text.
    Text(Cow<'a, str>),
    /// A str that can name no global (lone surrogates, 4 GiB or more), as an error shows it.
    Unnamed(String),
}

/// What a value is, as the scan sees it: what the build tells a scan that takes over from it
/// (`Machine::rescan`, `scan::resume`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// None, a bool, an int, a float, a complex.
    Scalar,
    Bytes,
    ByteArray,
    /// A str whose `surrogatepass` UTF-8 is `len` bytes at `start` in the input.
    InputStr {
        start: usize,
        len: usize,
    },
    /// A str held apart from the input: its `surrogatepass` UTF-8, and whether it holds a lone
    /// surrogate.
    OwnedStr(Vec<u8>, bool),
    List,
    Tuple,
    Dict,
    Set,
    FrozenSet,
    /// A global, as its policy rule.
    Global(usize),
    /// A record object made from the global of that rule.
    Object(usize),
}

/// An error of `kind` at the reader's current opcode, naming the policy when it is a policy
/// refusal: the one form of every refusal of the interpreter, the scan and the build.
#[cold]
pub(crate) fn error_at(r: &Reader<'_>, policy: &Policy, kind: ErrorKind) -> Error {
    let e = r.err(kind);
    if e.category() == crate::Category::PolicyDenied {
        e.with_policy(&policy.name)
    } else {
        e
    }
}

/// The state the interpreter works on, and the operations that make and fill values. The
/// interpreter ([`Interpreter`]) has decoded each instruction and checked every rule that does
/// not depend on what the values are before it calls one of these. An operation that refuses
/// leaves the stack and the MARKs as they were (the interpreter removes what an opcode used
/// once every operation succeeded).
pub(crate) trait Vm<'a> {
    /// A stack item and memo entry: the scan's symbol or the build's node id.
    type V: Slot;

    fn reader(&self) -> &Reader<'a>;
    fn reader_mut(&mut self) -> &mut Reader<'a>;
    fn stack(&self) -> &Vec<Self::V>;
    fn stack_mut(&mut self) -> &mut Vec<Self::V>;
    /// The stack lengths at each MARK, innermost last.
    fn marks(&self) -> &Vec<usize>;
    fn marks_mut(&mut self) -> &mut Vec<usize>;
    fn memo(&self) -> &Memo<Self::V>;
    fn memo_mut(&mut self) -> &mut Memo<Self::V>;
    fn limits(&self) -> &Limits;
    fn policy(&self) -> &Policy;
    /// The opcodes executed so far (`max_opcodes`).
    fn opcodes_mut(&mut self) -> &mut u64;
    fn clock_mut(&mut self) -> &mut Clock;

    /// An error of `kind` at the current opcode ([`error_at`]).
    #[cold]
    fn err(&self, kind: ErrorKind) -> Error {
        error_at(self.reader(), self.policy(), kind)
    }

    /// [`ErrorKind::LimitExceeded`] of `limit`, having seen `seen`.
    #[cold]
    fn limit(&self, limit: LimitName, seen: u64) -> Error {
        self.err(ErrorKind::LimitExceeded {
            limit,
            seen,
            max: self.limits().get(limit),
        })
    }

    /// The refusal of number text.
    #[cold]
    fn number_err(&self, e: NumberError) -> Error {
        match e {
            NumberError::Invalid => self.err(ErrorKind::InvalidNumber),
            NumberError::TooManyDigits(n) => self.limit(LimitName::MaxLongTextDigits, n),
            NumberError::VersionDependent(why) => self.err(ErrorKind::VersionDependentNumber(why)),
        }
    }

    // ------------------------------------------------------------ hooks of the run loop

    /// Called with each opcode byte as it is read (the scan counts them).
    #[inline(always)]
    fn on_opcode(&mut self, _byte: u8) {}

    /// Called after a BININT, BININT1 or BININT2 was pushed: reads on through a run of them.
    fn after_int(&mut self);

    /// Runs what a specialised loop takes before the next opcode is read one at a time;
    /// returns the pickle's value if it reached STOP.
    #[inline(always)]
    fn fast(&mut self) -> Result<Option<Self::V>> {
        Ok(None)
    }

    /// The pickle's value at STOP, once the stack rules passed.
    fn root(&mut self, root: Self::V) -> Result<Self::V>;

    /// PROTO `p` (at most 5).
    fn protocol(&mut self, p: u8);

    /// The memo's tables grew by `grown` bytes ([`Memo::put`]).
    fn charge_memo(&mut self, grown: u64) -> Result<()>;

    // ------------------------------------------------------------ values

    fn none(&mut self) -> Result<Self::V>;
    fn bool(&mut self, b: bool) -> Result<Self::V>;
    fn int(&mut self, x: i64) -> Result<Self::V>;
    /// INT or LONG decimal text (sign and digits; LONG's `L` removed).
    fn int_text(&mut self, text: &[u8], of: IntTextOf) -> Result<Self::V>;
    /// LONG1/LONG4 payload: little-endian two's complement, within `max_long_bytes`.
    fn long_le(&mut self, bytes: &'a [u8]) -> Result<Self::V>;
    fn float(&mut self, x: f64) -> Result<Self::V>;
    /// A str whose `surrogatepass` UTF-8 is `text` (validated), written at `at`.
    fn str(&mut self, text: Text<'a>, at: TextAt) -> Result<Self::V>;
    /// A Python 2 string read as str: `raw`, valid in `enc`, written at `at`.
    fn python2_str(&mut self, raw: Cow<'a, [u8]>, enc: TextEncoding, at: TextAt)
        -> Result<Self::V>;
    fn bytes(&mut self, b: Cow<'a, [u8]>) -> Result<Self::V>;
    fn bytearray(&mut self, b: &'a [u8]) -> Result<Self::V>;
    /// NEXT_BUFFER: the next out-of-band buffer, or [`ErrorKind::BuffersNotSupplied`].
    fn next_buffer(&mut self) -> Result<Self::V>;
    /// Whether READONLY_BUFFER may apply to `v` (bytes or a bytearray).
    fn is_buffer(&self, v: Self::V) -> Result<bool>;
    fn empty(&mut self, kind: Empty) -> Result<Self::V>;
    /// A list or tuple of `stack[start..]` (the interpreter removes them).
    fn seq(&mut self, start: usize, tuple: bool) -> Result<Self::V>;
    /// A dict of the pairs `stack[start..]` (an even count; the interpreter removes them).
    fn dict(&mut self, start: usize) -> Result<Self::V>;
    /// A frozenset of `stack[start..]` (the interpreter removes them).
    fn frozenset(&mut self, start: usize) -> Result<Self::V>;
    /// APPEND(S): `stack[start..]` added to `target` (`stack[start - 1]`).
    fn append(&mut self, target: Self::V, start: usize) -> Result<()>;
    /// SETITEM(S): the pairs `stack[start..]` (an even count) set in `target`.
    fn set_items(&mut self, target: Self::V, start: usize) -> Result<()>;
    /// ADDITEMS: `stack[start..]` added to the set `target`.
    fn add_items(&mut self, target: Self::V, start: usize) -> Result<()>;
    /// BINPERSID: the value standing for the persistent id `pid`: under the policy's
    /// `persistent_ids = "record"` the id itself (checked against the schema), under
    /// `reject` a refusal.
    fn persistent_id(&mut self, pid: Self::V) -> Result<Self::V>;
    /// BUILD: `state` given to `target`.
    fn set_state(&mut self, target: Self::V, state: Self::V) -> Result<()>;
    /// REDUCE, NEWOBJ, NEWOBJ_EX, INST and OBJ: the constructor the policy names for
    /// `callable`, on the tuple `args` (and the dict `kwargs`).
    fn call(
        &mut self,
        callable: Self::V,
        args: Self::V,
        kwargs: Option<Self::V>,
        kind: CallKind,
    ) -> Result<Self::V>;
    /// A global the policy allows, as its rule `rule`.
    fn global(&mut self, module: Cow<'a, str>, name: Cow<'a, str>, rule: usize) -> Result<Self::V>;
    /// Called with every global named, allowed or not, before it is resolved (the scan's
    /// report lists them).
    #[inline(always)]
    fn note_global(&mut self, _module: &str, _name: &str, _allowed: bool) {}
    /// What `v` gives STACK_GLOBAL as a name.
    fn global_name(&self, v: Self::V) -> Result<GlobalName<'a>>;
}
