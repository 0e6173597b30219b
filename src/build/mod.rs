//! The pickle machine: executes the opcodes of protocols 0-5 into a [`Document`], with the
//! semantics of CPython 3's unpickler (`Modules/_pickle.c`, `Lib/pickle.py`), except that no
//! code ever runs: globals resolve only through the policy, and calls only through the closed
//! set of constructors it names.
//!
//! Where picklewarden is stricter than CPython (all of it on input CPython's own pickler never
//! writes):
//! - FRAME is enforced as `Lib/pickle.py`'s `_Unframer` enforces it: an opcode and its argument
//!   may not cross the end of a frame, and a FRAME may not start before the current one is used
//!   up. CPython's C unpickler (`_pickle.c`) does not check either.
//! - INT/LONG/FLOAT/PUT/GET text must be plain decimal (`[+-]?[0-9]+`): no whitespace,
//!   underscores, NUL bytes, or base prefixes (CPython <= 3.13 reads INT and LONG text with
//!   base 0, and its C unpickler stops at a NUL; later releases read decimal). Decimal text
//!   that CPython 3's releases read differently (`I010`, `I+1`, `L01`, more than 4300 digits)
//!   is refused as `version_dependent_number` (`text::version_dependent_int_text`).
//! - The memo is sparse: a huge index costs one map entry, not an array of that size.
//! - STOP must leave nothing else on the stack (CPython ignores what is left).
//! - Anything after STOP is refused unless the input is decoded as a stream.
//!
//! # Layout
//!
//! The build runs the one interpreter of the opcodes (`src/vm/`), which the scan
//! (`src/scan/`) runs too, with arena nodes as its values; it only accepts what the scan
//! accepts. A [`Decoder`] makes a `Machine`, which runs each pickle in its fast loop and, for
//! what that loop leaves, one opcode at a time through the interpreter:
//!
//! ```text
//! build/
//!   mod.rs           Decoder and decode(): the public entry points; the scan's bound on the arena
//!   machine.rs       Machine: the arena's nodes and pools, errors at the current opcode
//!   step.rs          the value operations of the interpreter (Machine as a Vm); the depth check
//!   rescan.rs        a refusal only the build sees, followed by the scan from there
//!   budget.rs        the allocation budget: what a value, item and entry is charged, the checks
//!   fast.rs          the fast loop: the common opcodes, taken only when every check would pass
//!   ints.rs          runs of int opcodes read in one go (int_run, int_steps, int_blocks)
//!   fill.rs          APPEND(S), SETITEM(S) and BUILD into a list, dict or record made earlier
//!   keyed.rs         dict and set insertion: linear while small, else a hash index; plain keys
//!   plain.rs         the fast loop's SETITEMS/ADDITEMS of a few distinct plain keys, read, copied
//!   globals.rs       a global the policy allowed, as a node
//!   spare.rs         the stack, MARK and memo vectors kept from one small decode to the next
//!   constructors.rs  REDUCE, NEWOBJ(_EX), INST, OBJ: records and the native constructors
//!   checks.rs        the checks policy rules name (numpy, joblib) at the call and the BUILD
//!   depth.rs         max_nesting_depth: containers' heights; the exact walk when they cannot tell
//!   keys/            Python equality and hashing of keys (mod.rs), numbers as keys (num.rs),
//!                    datetime records as keys (datetime.rs), and the model of the reader's
//!                    key work (reader.rs); unit tests in tests.rs and reader/tests.rs
//!   tests.rs, ints_test.rs, plain_test.rs   unit tests
//! ```

mod budget;
mod called;
mod checks;
mod constructors;
mod copies;
mod depth;
mod fast;
mod fill;
mod globals;
mod ints;
mod keyed;
mod keys;
mod machine;
mod plain;
mod rescan;
mod spare;
mod step;

use std::time::Instant;

use crate::clock::Clock;
use crate::error::Result;
use crate::limits::Limits;
use crate::opcode::Opcode;
use crate::options::Pickles;
use crate::policy::check::joblib::ArraySpan;
use crate::policy::Policy;
use crate::scan::{ScanReport, Scanner};
use crate::value::{Arena, Document, Scratch};
use crate::vm::Interpreter;
use depth::Heights;
use machine::Machine;

/// Decodes pickles under a policy. Build one with [`Decoder::new`], adjust it, then call
/// [`Decoder::decode`] (one pickle) or [`Decoder::decode_stream`] (several pickles one after
/// another sharing one memo, as Mitogen's `unpickle_iter` and CPython's `Unpickler.load()`
/// called repeatedly read them).
///
/// ```
/// use picklewarden::{Decoder, Policy, Value};
/// let policy = Policy::data();
/// // pickle.dumps([1, "a"], protocol=2)
/// let doc = Decoder::new(b"\x80\x02]q\x00(K\x01X\x01\x00\x00\x00aq\x01e.", &policy).decode()?;
/// let root = doc.get(doc.root().unwrap()).unwrap();
/// assert!(matches!(root, Value::List(items) if items.len() == 2));
/// # Ok::<(), picklewarden::Error>(())
/// ```
pub struct Decoder<'a, 'p> {
    input: &'a [u8],
    policy: &'p Policy,
    limits: Limits,
    buffers: Option<Vec<&'a [u8]>>,
    scratch: Scratch,
    deadline: Option<Instant>,
    careful: bool,
    allow_trailing: bool,
}

impl<'a, 'p> Decoder<'a, 'p> {
    /// A decoder of `input` under `policy`, with the policy's limits.
    pub fn new(input: &'a [u8], policy: &'p Policy) -> Decoder<'a, 'p> {
        Decoder {
            input,
            policy,
            limits: policy.limits,
            buffers: None,
            scratch: Scratch::new(),
            deadline: None,
            careful: false,
            allow_trailing: false,
        }
    }

    /// Refuses the decode
    /// ([`ErrorKind::DeadlineExceeded`](crate::ErrorKind::DeadlineExceeded)) once `at` has
    /// passed, in either pass: for a caller that answers by a deadline (the service's
    /// `--deadline`) and must not leave the decode running after it, holding its thread and
    /// memory. Checked every
    /// 65,536 opcodes, every 4,096 keys of one dict or set insertion and every 256 pairs of
    /// an equality walk; with hashes, equal pairs and long texts' comparisons kept (nothing
    /// is hashed twice, no two keys compared in full twice), that is a few milliseconds late
    /// at most on inputs built to stretch it. Without it a decode is bounded by the limits
    /// alone.
    ///
    /// Takes an `Instant`, or an `Option<Instant>` where `None` is no deadline (the shape
    /// [`Scanner::deadline`], [`DecodeOptions::deadline`](crate::DecodeOptions::deadline) and
    /// [`OutputBound::deadline`](crate::OutputBound::deadline) take too).
    pub fn deadline(mut self, at: impl Into<Option<Instant>>) -> Decoder<'a, 'p> {
        self.deadline = at.into();
        self
    }

    /// Builds into the arena `scratch` holds (from [`Document::recycle`]) instead of a fresh
    /// one; see [`Scratch`]. The values decoded are the same either way.
    pub fn scratch(mut self, scratch: Scratch) -> Decoder<'a, 'p> {
        self.scratch = scratch;
        self
    }

    /// Runs every opcode through the machine's careful path (`Machine::step`, with every
    /// check) instead of taking the common ones in its fast loop (which takes an opcode only
    /// when the careful path would accept it, and makes the same values). The careful path
    /// has shortcuts of its own that this does not turn off, and that the comparison so does
    /// not test: runs of ints read in one go after an int (`int_run`), and small dicts and sets
    /// of plain keys filled without the key machinery (`fill_fast`, `plain_set`). For tests
    /// that compare the two (`fuzz/src/harness/`, `tests/fast_path.rs`); the document and
    /// any refusal are the same.
    #[doc(hidden)]
    pub fn careful_only(mut self) -> Decoder<'a, 'p> {
        self.careful = true;
        self
    }

    /// Whether bytes after the STOP of the pickle are allowed (default `false`: refused as
    /// [`ErrorKind::TrailingData`](crate::ErrorKind::TrailingData)). When allowed they are
    /// left unread and reported ([`Document::trailing`]: offset and length), for files that
    /// end with padding or a newline after the pickle (numpy payloads written by Python 2
    /// do); CPython's `pickle.loads` ignores them. 4 GiB or more of them is no padding and
    /// stays refused, as is a FRAME that runs on past the STOP
    /// ([`ErrorKind::FrameStraddle`](crate::ErrorKind::FrameStraddle)). [`Decoder::decode`]
    /// only: a stream ([`Decoder::decode_stream`]) reads pickles to the end of the input.
    pub fn allow_trailing(mut self, allow: bool) -> Decoder<'a, 'p> {
        self.allow_trailing = allow;
        self
    }

    /// Replaces the limits.
    pub fn limits(mut self, limits: Limits) -> Decoder<'a, 'p> {
        self.limits = limits;
        self
    }

    /// Supplies out-of-band buffers for NEXT_BUFFER (protocol 5), in order, as CPython's
    /// `pickle.loads(data, buffers=...)`. Each decodes to a bytes value. Without this,
    /// NEXT_BUFFER is refused with
    /// [`ErrorKind::BuffersNotSupplied`](crate::ErrorKind::BuffersNotSupplied); READONLY_BUFFER
    /// on an in-band bytes or bytearray needs no buffers, as in CPython.
    pub fn buffers(mut self, buffers: Vec<&'a [u8]>) -> Decoder<'a, 'p> {
        self.buffers = Some(buffers);
        self
    }

    fn scan(&self, stream: bool) -> ScanReport {
        Scanner::new(self.input, self.policy)
            .limits(self.limits)
            .pickles(if stream {
                Pickles::Stream
            } else {
                Pickles::One
            })
            .buffers(self.buffers.as_ref().map(Vec::len))
            .deadline(self.deadline)
            .allow_trailing(self.allow_trailing)
            .run()
    }

    /// Decodes as [`Decoder::decode`] (or [`Decoder::decode_stream`] when `stream`), and also
    /// returns the scan pass's report: the globals named (up to the first refusal the scan
    /// finds), the opcode counts and the protocol. The scan runs once, as in `decode`.
    ///
    /// # Errors
    /// The first refusal of the scan or the build, as `decode` returns it. The report's own
    /// `result` is the scan's verdict alone.
    #[deprecated(note = "use .decode_and_report(Pickles::One) (or Pickles::Stream)")]
    pub fn decode_with_report(self, stream: bool) -> (Result<Document<'a>>, ScanReport) {
        let report = self.scan(stream);
        if let Err(e) = &report.result {
            let e = e.clone();
            return (Err(e), report);
        }
        let bound = Bound::of(&report.opcode_counts);
        (self.build(Some(bound), stream, None), report)
    }

    /// The decode in one pass: the machine runs the one interpreter (`src/vm/`) and so makes
    /// every check the scan makes, and those that need the values. A refusal of the latter is
    /// followed by the scan from where the build was (`src/build/rescan.rs`): a refusal the
    /// scan finds there is the one reported, so that the error of an input does not depend on
    /// whether the decode or `scan` met it (`fuzz/src/harness/scan_build.rs`,
    /// `check_scan_build_agree`).
    fn decode_one_pass(self, stream: bool) -> Result<Document<'a>> {
        self.build(None, stream, None)
    }

    /// Decodes one pickle of a joblib file, whose arrays sit between its opcodes: each
    /// `joblib.numpy_pickle.NumpyArrayWrapper` BUILD under a rule with the
    /// `joblib_array_wrapper` check reads the array joblib reads after it
    /// (src/build/checks.rs). Also returns the arrays read, up to a refusal. In one pass
    /// (there is no scan first: a scan would read the arrays as opcodes), and a refusal is the
    /// build's own.
    pub(crate) fn decode_joblib(self) -> (Result<Document<'a>>, Vec<ArraySpan>) {
        let mut arrays = Vec::new();
        let doc = self.build(None, false, Some(&mut arrays));
        (doc, arrays)
    }

    /// The build: executes the opcodes into a document. `bound` is the scan's count of what
    /// it makes, when the scan ran first (the arena is then reserved once); without it the
    /// arena starts from a guess from the input's length and grows.
    ///
    /// With `arrays`, the decode is a joblib file's ([`Decoder::decode_joblib`]), and the arrays
    /// read are put there.
    fn build(
        self,
        bound: Option<Bound>,
        stream: bool,
        arrays: Option<&mut Vec<ArraySpan>>,
    ) -> Result<Document<'a>> {
        Machine::check_input(self.input, &self.limits)?;
        let arena = Arena::new(self.input, self.scratch);
        let mut m = Machine::new(self.input, self.policy, self.limits, self.buffers, arena);
        let joblib = arrays.is_some();
        m.checks.joblib = joblib;
        m.careful = self.careful;
        m.clock = Clock::new(self.deadline);
        if let Ok(mut c) = m.hash_cache.try_borrow_mut() {
            c.clock = m.clock;
        }
        // Without the scan's count: about one node per 8 bytes of input (small objects at
        // protocol 4 make one per 12, a list of ints one per 7), capped for a small input
        // (`budget::guess_cap`); more grows the arena.
        let cap = budget::guess_cap(self.input.len(), budget::NODE_BYTES as usize);
        let guess = (self.input.len() / 8).min(cap) as u64;
        let nodes = bound.map_or(guess, |b| b.nodes);
        m.reserve_nodes(nodes);
        m.reserve_pools(self.input.len());
        // A walk's path holds each container once, plus a leaf: with no more containers than
        // this, the depth check never walks, and heights are not worth keeping. Without the
        // scan's count, they are kept.
        // Nor for an input shorter than `max_nesting_depth` bytes: the heights cost such a
        // decode more than the check's walk (linear in the arena, run only when there are more
        // containers than `max_nesting_depth`, which so few bytes seldom make) would.
        m.heights = Heights::new(
            bound.is_none_or(|b| b.containers.saturating_add(1) > self.limits.max_nesting_depth)
                && self.input.len() as u64 >= self.limits.max_nesting_depth,
        );
        let (input, allow_trailing, deadline) = (self.input, self.allow_trailing, self.deadline);
        // Input that is not a pickle at all says so (src/input/sniff.rs), as the scan says.
        let explain = |e| crate::sniff::explain(input, e);
        // The build's refusal, or the scan's from there (one pass: `bound` is `None`).
        // A joblib file's refusal is the build's: a scan from there would read its arrays as
        // opcodes.
        let refused = |m: &Machine<'a, 'p>, e| match bound {
            None if !joblib => m.rescan(e, stream, allow_trailing, deadline),
            _ => e,
        };
        if !stream {
            let run = m.run();
            if let Some(arrays) = arrays {
                *arrays = std::mem::take(&mut m.checks.arrays);
            }
            let root = match run {
                Ok(root) => root,
                Err(e) => return Err(refused(&m, e)),
            };
            let trailing = if self.allow_trailing {
                m.r.trailing().map_err(explain)?
            } else {
                m.r.expect_end().map_err(explain)?;
                None
            };
            let mut doc = m.finish(vec![root], false);
            doc.trailing_len = trailing.and_then(|t| {
                u32::try_from(t.len)
                    .ok()
                    .and_then(std::num::NonZeroU32::new)
            });
            return Ok(doc);
        }
        m.stream = true;
        let mut roots = Vec::new();
        loop {
            m.pickle_start = m.arena.len();
            m.pickle_starts.push(m.pickle_start);
            match m.run() {
                Ok(root) => roots.push(root),
                Err(e) => return Err(refused(&m, e)),
            }
            m.r.end_pickle().map_err(explain)?;
            m.proto = 0;
            if m.r.at_end() {
                break;
            }
        }
        // After the last opcode: nothing is left for a scan to refuse.
        m.check_depth(&roots)?;
        Ok(m.finish(roots, true))
    }

    /// Decodes exactly one pickle; anything after its STOP is refused
    /// ([`ErrorKind::TrailingData`](crate::ErrorKind::TrailingData)) unless
    /// [`Decoder::allow_trailing`] allowed it.
    ///
    /// # Errors
    /// Any refusal, with its kind, offset and opcode.
    pub fn decode(self) -> Result<Document<'a>> {
        self.decode_one_pass(false)
    }

    /// Decodes every pickle in the input, one after another, sharing one memo; the input must
    /// end right after a STOP. The document has one root per pickle.
    ///
    /// # Errors
    /// Any refusal; an empty input is
    /// [`ErrorKind::NotAPickle`](crate::ErrorKind::NotAPickle).
    pub fn decode_stream(self) -> Result<Document<'a>> {
        self.decode_one_pass(true)
    }
}

/// Upper bounds on what a build makes, from the scan's opcode counts.
#[derive(Clone, Copy, Debug)]
struct Bound {
    /// Arena slots: every opcode creates at most one node, except NONE, NEWTRUE, NEWFALSE,
    /// BININT1 and BININT2 (values held in the id, no slot: a bound, not a count), INST (the
    /// global, the argument tuple and the object)
    /// and OBJ (the argument tuple and the object); stack, memo and container-filling opcodes
    /// create none.
    nodes: u64,
    /// Containers (list, tuple, dict, set, frozenset, record object): one per opcode that
    /// makes one (EMPTY_*, LIST, TUPLE*, DICT, FROZENSET; REDUCE, NEWOBJ and NEWOBJ_EX make a
    /// set, frozenset or record), two per INST and OBJ (the argument tuple and the object).
    containers: u64,
}

impl Bound {
    fn of(counts: &[u64; 256]) -> Bound {
        use Opcode as O;
        let mut containers = 0u64;
        for (byte, &n) in counts.iter().enumerate() {
            let per = match u8::try_from(byte).ok().and_then(Opcode::from_byte) {
                Some(
                    O::EmptyList
                    | O::EmptyTuple
                    | O::EmptyDict
                    | O::EmptySet
                    | O::List
                    | O::Tuple
                    | O::Tuple1
                    | O::Tuple2
                    | O::Tuple3
                    | O::Dict
                    | O::Frozenset
                    | O::Reduce
                    | O::Newobj
                    | O::NewobjEx,
                ) => 1,
                Some(O::Inst | O::Obj) => 2,
                _ => 0,
            };
            containers = containers.saturating_add(n.saturating_mul(per));
        }
        Bound {
            nodes: node_bound(counts),
            containers,
        }
    }
}

/// [`Bound::nodes`].
fn node_bound(counts: &[u64; 256]) -> u64 {
    use Opcode as O;
    let mut total = 0u64;
    for (byte, &n) in counts.iter().enumerate() {
        let per = match u8::try_from(byte).ok().and_then(Opcode::from_byte) {
            Some(
                O::Mark
                | O::Stop
                | O::Pop
                | O::PopMark
                | O::Dup
                | O::Append
                | O::Appends
                | O::Setitem
                | O::Setitems
                | O::Additems
                | O::Get
                | O::Binget
                | O::LongBinget
                | O::Put
                | O::Binput
                | O::LongBinput
                | O::Memoize
                | O::Build
                | O::Proto
                | O::Frame,
            )
            | None => 0,
            // Always a shared value (src/value.rs), never an arena slot.
            Some(O::None | O::Newtrue | O::Newfalse | O::Binint1 | O::Binint2) => 0,
            Some(O::Inst) => 3,
            Some(O::Obj) => 2,
            Some(_) => 1,
        };
        total = total.saturating_add(n.saturating_mul(per));
    }
    total
}

/// Decodes one pickle under `policy` with the policy's limits.
///
/// # Errors
/// Any refusal, with its kind, offset and opcode.
pub fn decode<'a>(input: &'a [u8], policy: &Policy) -> Result<Document<'a>> {
    Decoder::new(input, policy).decode()
}

#[cfg(test)]
mod tests;
