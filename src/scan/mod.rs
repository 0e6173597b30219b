//! The scan: the validating first pass. It walks the opcodes with a symbolic stack (the kind of
//! each item, and where the text of str constants is), builds no values, and checks:
//! - opcodes, protocol, truncation, FRAME rules and trailing data (the shared reader);
//! - MARK discipline and stack underflow;
//! - the memo: every GET names an index that an earlier PUT/BINPUT/LONG_BINPUT/MEMOIZE set, so
//!   memo indices are validated before the build pass creates anything;
//! - every global (GLOBAL, STACK_GLOBAL including names fetched through the memo, INST, OBJ,
//!   EXT1/2/4) against the policy, and every call and BUILD against the forms it allows;
//! - the kinds opcodes need (APPEND onto a list, SETITEM onto a dict, REDUCE of a global with a
//!   tuple, ...), number text and string escapes, UTF-8 of text;
//! - the limits it can see: input bytes, stack length, memo entries, opcodes, LONG text digits
//!   and LONG1/LONG4 bytes.
//!
//! What only the build pass can check (it needs the values): a constructor's argument contents
//! (`constructor_rejected`), a policy rule's check of the writer's form (`non_canonical`;
//! and so a scan never reads a joblib file's arrays), hashability of dict keys and set items (`unhashable_key`), the
//! nesting depth of the value tree, and the node, item and allocation budgets.
//!
//! A scan alone is also picklewarden's scan-only mode: a verdict, the first error, the globals
//! referenced and the opcode counts, in one pass and without allocating values.
//!
//! The scan is the shared interpreter (`src/vm/`) over symbols ([`sym`](self)): what kind each
//! stack item and memo entry is, and where the text of a str is in the input.
//!
//! ```text
//! scan/
//!   mod.rs       Scanner, ScanReport, GlobalRef: the public entry points (picklewarden::scan
//!                and scan_with, in src/options.rs, run a Scanner)
//!   sym.rs       the symbols and the scan's value operations of the interpreter (Vm)
//!   run.rs       runs of scalar opcodes read a chunk at a time
//! ```

mod run;
mod sym;

use std::time::Instant;

use crate::clock::Clock;
use crate::error::{Error, ErrorKind, Result};
use crate::limits::{LimitName, Limits};
use crate::memo::Memo;
use crate::options::{DecodeOptions, Pickles};
use crate::policy::Policy;
use crate::reader::Reader;
use crate::value::{NodeId, Trailing};
use crate::vm::{Interpreter, Kind};
use sym::Sym;

/// A global named in the input.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GlobalRef {
    /// Module, as written when allowed (so one of the policy's); when refused, as written if
    /// it is a Python name ([`crate::policy::is_python_name`]) of at most
    /// [`crate::policy::MAX_NAME_CHARS`] characters, else escaped and cut at 64 characters
    /// as error messages show it (`...` marks the cut; characters other than printable ASCII
    /// as Rust's `char::escape_default` writes them).
    pub module: String,
    /// Qualified name, as `module` is kept.
    pub name: String,
    /// Whether the policy allows it.
    pub allowed: bool,
    /// Offset of the opcode that named it first.
    pub offset: u64,
}

/// What a scan found.
#[derive(Debug)]
#[non_exhaustive]
pub struct ScanReport {
    /// `Ok` when the input passed every check the scan makes, else the first refusal.
    pub result: Result<()>,
    /// The distinct globals named, in order of first appearance (up to the first refusal).
    pub globals: Vec<GlobalRef>,
    /// How many times each opcode byte was executed (index = opcode byte).
    pub opcode_counts: Box<[u64; 256]>,
    /// The highest protocol named by PROTO (0 if none).
    pub protocol: u8,
    /// Pickles completed (their STOP reached).
    pub pickles: usize,
    /// The bytes after STOP left unread, when [`Scanner::allow_trailing`] allowed them.
    pub trailing: Option<Trailing>,
}

/// Configures and runs a scan. See the module docs.
pub struct Scanner<'a, 'p> {
    input: &'a [u8],
    policy: &'p Policy,
    limits: Limits,
    stream: bool,
    buffers: Option<usize>,
    deadline: Option<Instant>,
    allow_trailing: bool,
}

impl<'a, 'p> Scanner<'a, 'p> {
    /// A scan of `input` under `policy` with the policy's limits, as one pickle.
    pub fn new(input: &'a [u8], policy: &'p Policy) -> Scanner<'a, 'p> {
        Scanner {
            input,
            policy,
            limits: policy.limits,
            stream: false,
            buffers: None,
            deadline: None,
            allow_trailing: false,
        }
    }

    /// Replaces the limits.
    pub fn limits(mut self, limits: Limits) -> Scanner<'a, 'p> {
        self.limits = limits;
        self
    }

    /// Allows bytes after the STOP of a single pickle, as
    /// [`Decoder::allow_trailing`](crate::Decoder::allow_trailing) does; they are reported in
    /// [`ScanReport::trailing`].
    pub fn allow_trailing(mut self, allow: bool) -> Scanner<'a, 'p> {
        self.allow_trailing = allow;
        self
    }

    /// Scans one pickle ([`Pickles::One`], the default) or several one after another sharing
    /// one memo ([`Pickles::Stream`]).
    pub fn pickles(mut self, pickles: Pickles) -> Scanner<'a, 'p> {
        self.stream = pickles == Pickles::Stream;
        self
    }

    /// Scans several pickles one after another sharing one memo when `stream`.
    #[deprecated(
        note = "use .pickles(Pickles::Stream) (or Pickles::One), or .options(&DecodeOptions)"
    )]
    pub fn stream(self, stream: bool) -> Scanner<'a, 'p> {
        self.pickles(if stream {
            Pickles::Stream
        } else {
            Pickles::One
        })
    }

    /// Refuses the scan ([`ErrorKind::DeadlineExceeded`]) once `at` has passed, as
    /// [`Decoder::deadline`](crate::Decoder::deadline) does: an `Instant`, or an
    /// `Option<Instant>` where `None` is no deadline.
    pub fn deadline(mut self, at: impl Into<Option<Instant>>) -> Scanner<'a, 'p> {
        self.deadline = at.into();
        self
    }

    /// Applies `options`: limits (when given), one pickle or a stream, deadline, the number
    /// of out-of-band buffers (counted, not read) and trailing bytes; as
    /// [`Decoder::options`](crate::Decoder::options).
    pub fn options(self, options: &DecodeOptions<'_>) -> Scanner<'a, 'p> {
        let s = match options.limits {
            Some(limits) => self.limits(limits),
            None => self,
        };
        s.pickles(options.pickles)
            .deadline(options.deadline)
            .buffers(options.buffers.as_ref().map(Vec::len))
            .allow_trailing(options.allow_trailing)
    }

    /// The number of out-of-band buffers the build pass will be given (NEXT_BUFFER).
    pub fn buffers(mut self, count: Option<usize>) -> Scanner<'a, 'p> {
        self.buffers = count;
        self
    }

    /// Runs the scan.
    pub fn run(self) -> ScanReport {
        let mut s = Scan::new(
            Reader::new(self.input),
            self.policy,
            self.limits,
            self.buffers,
            self.deadline,
        );
        // Input that is not a pickle at all says so (src/input/sniff.rs).
        let result = s
            .all(self.stream, self.allow_trailing)
            .map_err(|e| crate::sniff::explain(self.input, e));
        let mut report = s.report;
        report.result = result;
        report
    }
}

/// Scans `input` under `policy` with `limits` (one pickle, or a stream of pickles sharing one
/// memo when `stream`).
#[deprecated(
    note = "use picklewarden::scan(input, policy), or picklewarden::scan_with(input, policy, &DecodeOptions::default().limits(limits).stream())"
)]
pub fn scan(input: &[u8], policy: &Policy, limits: Limits, stream: bool) -> ScanReport {
    Scanner::new(input, policy)
        .limits(limits)
        .pickles(if stream {
            Pickles::Stream
        } else {
            Pickles::One
        })
        .run()
}

struct Scan<'a, 'p> {
    r: Reader<'a>,
    policy: &'p Policy,
    limits: Limits,
    stack: Vec<Sym>,
    marks: Vec<usize>,
    memo: Memo<Sym>,
    opcodes: u64,
    buffers: Option<usize>,
    /// The bytes the memo's tables took, as the decode's memo takes them ([`Memo::put`]).
    memo_bytes: u64,
    /// When to stop ([`Scanner::deadline`]), looked at by opcode count.
    clock: Clock,
    report: ScanReport,
    /// The text of strs the build held apart from the input, when the scan took over from it
    /// ([`resume`]): `surrogatepass` UTF-8, and whether it holds a lone surrogate.
    owned: Vec<(Vec<u8>, bool)>,
}

impl<'a, 'p> Scan<'a, 'p> {
    /// A scan reading from `r`, with nothing on its stack, memo or report yet.
    fn new(
        r: Reader<'a>,
        policy: &'p Policy,
        limits: Limits,
        buffers: Option<usize>,
        deadline: Option<Instant>,
    ) -> Scan<'a, 'p> {
        Scan {
            r,
            policy,
            limits,
            stack: Vec::new(),
            marks: Vec::new(),
            memo: Memo::default(),
            opcodes: 0,
            buffers,
            memo_bytes: 0,
            clock: Clock::new(deadline),
            report: ScanReport {
                result: Ok(()),
                globals: Vec::new(),
                opcode_counts: Box::new([0; 256]),
                protocol: 0,
                pickles: 0,
                trailing: None,
            },
            owned: Vec::new(),
        }
    }

    fn all(&mut self, stream: bool, allow_trailing: bool) -> Result<()> {
        let len = self.r.input.len() as u64;
        if len > self.limits.max_input_bytes {
            return Err(Error::new(
                ErrorKind::LimitExceeded {
                    limit: LimitName::MaxInputBytes,
                    seen: len,
                    max: self.limits.max_input_bytes,
                },
                0,
                None,
            ));
        }
        self.rest(stream, allow_trailing)
    }

    /// The rest of the input: the current pickle from the reader's position, then those after
    /// it (a stream), or the end of the input (or trailing bytes allowed).
    fn rest(&mut self, stream: bool, allow_trailing: bool) -> Result<()> {
        loop {
            self.run()?;
            self.report.pickles += 1;
            if !stream && allow_trailing {
                self.report.trailing = self.r.trailing()?;
                return Ok(());
            }
            if !stream {
                return self.r.expect_end();
            }
            self.r.end_pickle()?;
            if self.r.at_end() {
                return Ok(());
            }
        }
    }
}

/// Where a build that refused on grounds only it sees (a value's contents, the budgets) was,
/// for a scan to take over from there ([`resume`]).
pub(crate) struct Resume<'s> {
    /// Where the scan starts reading: the opcode the build refused at (or the one after it).
    pub(crate) pos: usize,
    pub(crate) frame_end: Option<usize>,
    /// The protocol of the last PROTO before `pos` (Python 2 names are read below 3).
    pub(crate) proto: u8,
    /// The opcodes run before `pos`.
    pub(crate) opcodes: u64,
    pub(crate) stack: &'s [NodeId],
    pub(crate) marks: &'s [usize],
    pub(crate) memo: &'s Memo<NodeId>,
    /// What each value of the stack and the memo is.
    pub(crate) kind_of: &'s dyn Fn(NodeId) -> Kind,
    /// The out-of-band buffers not taken yet.
    pub(crate) buffers: Option<usize>,
    pub(crate) deadline: Option<Instant>,
}

/// The scan's verdict on the rest of `input` from where a build refused (`Machine::rescan`):
/// the same as a scan of the whole input, which would have passed every opcode before `at`
/// as the build did (every rule of the scan is the interpreter's, which the build ran too).
pub(crate) fn resume(
    input: &[u8],
    policy: &Policy,
    limits: Limits,
    stream: bool,
    allow_trailing: bool,
    at: Resume<'_>,
) -> Result<()> {
    let mut r = Reader::new(input);
    r.pos = at.pos;
    r.frame_end = at.frame_end;
    r.proto = at.proto;
    let mut s = Scan::new(r, policy, limits, at.buffers, at.deadline);
    s.marks = at.marks.to_vec();
    s.opcodes = at.opcodes;
    s.memo_bytes = at.memo.charged_bytes();
    let stack = at
        .stack
        .iter()
        .map(|&id| s.sym_of((at.kind_of)(id)))
        .collect();
    let memo = at.memo.map(|id| s.sym_of((at.kind_of)(id)));
    s.stack = stack;
    s.memo = memo;
    s.rest(stream, allow_trailing)
        .map_err(|e| crate::sniff::explain(input, e))
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
