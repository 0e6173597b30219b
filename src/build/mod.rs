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

mod budget;
mod constructors;
mod depth;
mod fast;
mod fill;
mod globals;
mod ints;
mod keyed;
mod keys;
mod step;

use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::RandomState;
use std::mem;
use std::time::Instant;

use crate::clock::Clock;
use crate::error::{Error, ErrorKind, Result};
use crate::limits::{LimitName, Limits};
use crate::memo::Memo;
use crate::opcode::Opcode;
use crate::policy::{Checked, Policy};
use crate::reader::Reader;
use crate::scan::{ScanReport, Scanner};
use crate::text::Text;
use crate::value::{Arena, Document, Fat, Node, NodeId, Object, Scratch, Value, Word, ARENA_END};
use budget::{FAT_BYTES, ITEM_BYTES, KEYED_BYTES, NODE_BYTES};
use depth::Heights;
use keys::reader::ReaderCell;
use keys::{HashCache, KeyIndex};

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
        }
    }

    /// Refuses the decode ([`ErrorKind::DeadlineExceeded`]) once `at` has passed, in either
    /// pass: for a caller that answers by a deadline (the service's `--deadline`) and must not
    /// leave the decode running after it, holding its thread and memory. Checked every
    /// 65,536 opcodes, every 4,096 keys of one dict or set insertion and every 256 pairs of
    /// an equality walk; with hashes, equal pairs and long texts' comparisons kept (nothing
    /// is hashed twice, no two keys compared in full twice), that is a few milliseconds late
    /// at most on inputs the reviews built to stretch it. Without it a decode is bounded by
    /// the limits alone.
    pub fn deadline(mut self, at: Instant) -> Decoder<'a, 'p> {
        self.deadline = Some(at);
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
    /// that compare the two (`fuzz/src/harness.rs`, `tests/fast_path.rs`); the document and
    /// any refusal are the same.
    #[doc(hidden)]
    pub fn careful_only(mut self) -> Decoder<'a, 'p> {
        self.careful = true;
        self
    }

    /// Replaces the limits.
    pub fn limits(mut self, limits: Limits) -> Decoder<'a, 'p> {
        self.limits = limits;
        self
    }

    /// Supplies out-of-band buffers for NEXT_BUFFER (protocol 5), in order, as CPython's
    /// `pickle.loads(data, buffers=...)`. Each decodes to a bytes value. Without this,
    /// NEXT_BUFFER and READONLY_BUFFER are refused with
    /// [`ErrorKind::BuffersNotSupplied`].
    pub fn buffers(mut self, buffers: Vec<&'a [u8]>) -> Decoder<'a, 'p> {
        self.buffers = Some(buffers);
        self
    }

    fn scan(&self, stream: bool) -> ScanReport {
        Scanner::new(self.input, self.policy)
            .limits(self.limits)
            .stream(stream)
            .buffers(self.buffers.as_ref().map(Vec::len))
            .deadline(self.deadline)
            .run()
    }

    /// Decodes as [`Decoder::decode`] (or [`Decoder::decode_stream`] when `stream`), and also
    /// returns the scan pass's report: the globals named (up to the first refusal the scan
    /// finds), the opcode counts and the protocol. The scan runs once, as in `decode`.
    ///
    /// # Errors
    /// The first refusal of the scan or the build, as `decode` returns it. The report's own
    /// `result` is the scan's verdict alone.
    pub fn decode_with_report(self, stream: bool) -> (Result<Document<'a>>, ScanReport) {
        let report = self.scan(stream);
        if let Err(e) = &report.result {
            let e = e.clone();
            return (Err(e), report);
        }
        let bound = Bound::of(&report.opcode_counts);
        (self.build(Some(bound), stream), report)
    }

    /// The decode in one pass (the machine makes every check the scan makes, and more), and,
    /// only when it refuses, the scan: a refusal the scan finds is the one reported, as it was
    /// when the scan ran first, so that the error of an input does not depend on whether the
    /// decode or `scan` met it (`fuzz/src/harness.rs` `check_scan_build_agree`). Either way an
    /// accepted input was accepted by every check of both passes.
    fn decode_one_pass(self, stream: bool) -> Result<Document<'a>> {
        let scanner = Scanner::new(self.input, self.policy)
            .limits(self.limits)
            .stream(stream)
            .buffers(self.buffers.as_ref().map(Vec::len))
            .deadline(self.deadline);
        match self.build(None, stream) {
            Ok(doc) => Ok(doc),
            Err(e) => {
                scanner.run().result?;
                Err(e)
            }
        }
    }

    /// The build: executes the opcodes into a document. `bound` is the scan's count of what
    /// it makes, when the scan ran first (the arena is then reserved once); without it the
    /// arena starts from a guess from the input's length and grows.
    fn build(self, bound: Option<Bound>, stream: bool) -> Result<Document<'a>> {
        let mut m = Machine::new(self.input, self.policy, self.limits, self.buffers)?;
        m.careful = self.careful;
        m.clock = Clock::new(self.deadline);
        if let Ok(mut c) = m.hash_cache.try_borrow_mut() {
            c.clock = m.clock;
        }
        m.arena = Arena::new(self.input, self.scratch);
        // Without the scan's count: about one node per 8 bytes of input (small objects at
        // protocol 4 make one per 12, a list of ints one per 7); more grows the arena.
        let nodes = bound.map_or(self.input.len() as u64 / 8, |b| b.nodes);
        m.reserve_nodes(nodes);
        m.reserve_pools(self.input.len());
        // A walk's path holds each container once, plus a leaf: with no more containers than
        // this, the depth check never walks, and heights are not worth keeping. Without the
        // scan's count, they are kept.
        m.heights = Heights::new(
            bound.is_none_or(|b| b.containers.saturating_add(1) > self.limits.max_nesting_depth),
        );
        if !stream {
            let root = m.run()?;
            m.r.expect_end()?;
            return Ok(m.finish(vec![root], false));
        }
        m.stream = true;
        let mut roots = Vec::new();
        loop {
            m.pickle_start = m.arena.len();
            m.pickle_starts.push(m.pickle_start);
            roots.push(m.run()?);
            m.r.end_pickle()?;
            m.proto = 0;
            if m.r.at_end() {
                break;
            }
        }
        m.check_depth(&roots)?;
        Ok(m.finish(roots, true))
    }

    /// Decodes exactly one pickle; anything after its STOP is refused
    /// ([`ErrorKind::TrailingData`]).
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
    /// Any refusal; an empty input is [`ErrorKind::Truncated`].
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

struct Machine<'a, 'p> {
    r: Reader<'a>,
    policy: &'p Policy,
    limits: Limits,
    arena: Arena<'a>,
    stack: Vec<NodeId>,
    marks: Vec<usize>,
    memo: Memo<NodeId>,
    opcodes: u64,
    alloc: u64,
    proto: u8,
    hasher: RandomState,
    buffers: Option<VecDeque<&'a [u8]>>,
    /// Whether the input is a stream of pickles: the depth check then runs once, over every
    /// root, after the last one.
    stream: bool,
    /// The arena's length when the current pickle of a stream began: values below it were
    /// made by an earlier pickle.
    pickle_start: usize,
    /// Where each pickle of a stream began in the arena (`Document::pickle_starts`).
    pickle_starts: Vec<usize>,
    /// A pickle of a stream changed a value an earlier one made (APPEND, SETITEM, ADDITEMS or
    /// BUILD on it, reached through the shared memo): [`Document::changed_earlier`].
    changed_earlier: bool,
    /// The containers a record's arguments reached when it was made (the record objects
    /// among them included): a later APPEND, SETITEM, ADDITEMS or BUILD on one of them changes
    /// what CPython's call received, which the record does not show
    /// ([`Document::records_replayable`]).
    called_with: HashSet<NodeId>,
    /// No record of the document can be written back as the call that made it: one was made by
    /// INST or OBJ (which CPython runs as `cls.__new__(cls)` when there is no argument, not as
    /// a REDUCE), or a value in [`Machine::called_with`] changed after the call.
    records_unreplayable: bool,
    /// Values created, shared ones included (`max_nodes` counts them all, as before values
    /// were shared, so the limit does not depend on which values happen to be shared).
    created: u64,
    /// The hash indexes of the dicts, sets and frozensets that outgrew linear search (more
    /// than `SMALL_KEYED` entries at an insertion), by arena index. Only the build looks keys
    /// up, and most dicts never need one, so the values do not carry them.
    indexes: HashMap<u32, KeyIndex>,
    /// The hashes of the tuples, frozensets and long texts hashed so far (src/keys.rs).
    hash_cache: HashCache,
    /// The model of the work CPython does with the keys (src/reader_keys.rs).
    reader_keys: ReaderCell,
    /// Containers created (list, tuple, dict, set, frozenset, record object): no path of the
    /// depth check holds more than these plus one leaf.
    containers: u64,
    /// The containers' heights, a bound on the depth check's walk (src/depth.rs): always kept
    /// by a decode in one pass; after a scan (`decode_with_report`), only when it counted
    /// more opcodes that make containers than `max_nesting_depth`.
    heights: Heights,
    /// The lists and dicts an argument schema checked (a `record` call's arguments, and its
    /// empty NEWOBJ_EX keyword arguments), with the global called: they may not change after
    /// the call, or what the schema checked would no longer be what the record holds (A46).
    sealed: HashMap<NodeId, NodeId>,
    /// What argument schemas found (dicts whose keys matched, texts' lengths): not found
    /// again when the same value is passed again.
    checked: Checked,
    /// When to stop ([`Decoder::deadline`]), looked at by opcode count.
    clock: Clock,
    /// Where a new dict's pairs and a new set's items are gathered while their keys are
    /// compared (the arena's pools are read by the comparisons meanwhile), then appended to
    /// the pool in one piece; kept between containers so that its allocation is reused.
    new_pairs: Vec<(NodeId, NodeId)>,
    new_items: Vec<NodeId>,
    /// The items a `set()` or `frozenset()` call copies out of its argument, kept from call
    /// to call.
    call_items: Vec<NodeId>,
    /// Every opcode through the careful path ([`Decoder::careful_only`]).
    careful: bool,
}

fn internal() -> ErrorKind {
    ErrorKind::TypeMismatch("dangling node id")
}

impl<'a, 'p> Machine<'a, 'p> {
    fn new(
        input: &'a [u8],
        policy: &'p Policy,
        limits: Limits,
        buffers: Option<Vec<&'a [u8]>>,
    ) -> Result<Machine<'a, 'p>> {
        let len = input.len() as u64;
        if len > limits.max_input_bytes {
            return Err(Error::new(
                ErrorKind::LimitExceeded {
                    limit: LimitName::MaxInputBytes,
                    seen: len,
                    max: limits.max_input_bytes,
                },
                0,
                None,
            ));
        }
        Ok(Machine {
            r: Reader::new(input),
            policy,
            limits,
            arena: Arena::new(input, Scratch::new()),
            created: 0,
            containers: 0,
            heights: Heights::default(),
            indexes: HashMap::new(),
            hash_cache: HashCache::default(),
            reader_keys: ReaderCell::default(),
            sealed: HashMap::new(),
            checked: Checked::default(),
            clock: Clock::default(),
            new_pairs: Vec::new(),
            new_items: Vec::new(),
            call_items: Vec::new(),
            careful: false,
            stack: Vec::new(),
            marks: Vec::new(),
            memo: Memo::default(),
            opcodes: 0,
            alloc: 0,
            proto: 0,
            hasher: RandomState::new(),
            buffers: buffers.map(VecDeque::from),
            stream: false,
            pickle_start: 0,
            changed_earlier: false,
            pickle_starts: Vec::new(),
            called_with: HashSet::new(),
            records_unreplayable: false,
        })
    }

    fn finish(self, roots: Vec<NodeId>, stream: bool) -> Document<'a> {
        Document {
            arena: self.arena,
            roots,
            stream,
            values: self.created,
            changed_earlier: self.changed_earlier,
            records_replayable: !self.records_unreplayable,
            pickle_starts: if stream { self.pickle_starts } else { vec![0] },
        }
    }

    /// Notes that `target` is about to change: when an earlier pickle of the stream made it,
    /// the document remembers that a later pickle changed it.
    #[inline(always)]
    fn touch(&mut self, target: NodeId) {
        self.changed_earlier |= target.index() < self.pickle_start;
        if !self.called_with.is_empty() {
            self.touch_call_argument(target);
        }
    }

    /// [`Machine::touch`] once a record was made: whether `target` is in what a record's
    /// arguments reached. Out of line, so that documents without records pay one test.
    #[cold]
    #[inline(never)]
    fn touch_call_argument(&mut self, target: NodeId) {
        if self.called_with.contains(&target) {
            self.records_unreplayable = true;
        }
    }

    /// Adds the containers `args` reaches (through lists, tuples, dicts, sets, frozensets and
    /// record objects) to [`Machine::called_with`]. A container already there is not walked
    /// again: what it reached was added with it, and anything added under it since touched
    /// it or one below it. So every node is walked at most once in a whole decode, and the
    /// walk uses an explicit stack.
    fn note_call_arguments(&mut self, args: NodeId) -> Result<()> {
        let mut todo = vec![args];
        while let Some(id) = todo.pop() {
            if id.is_shared() || !self.get(id)?.is_container() || !self.called_with.insert(id) {
                continue;
            }
            // The set's entry, charged as the allocation budget charges the arena.
            self.charge(2 * mem::size_of::<NodeId>() as u64)?;
            let v = self.arena.get(id).ok_or_else(|| self.err(internal()))?;
            v.for_each_child(|c| todo.push(c));
        }
        Ok(())
    }

    #[cold]
    fn err(&self, kind: ErrorKind) -> Error {
        let e = self.r.err(kind);
        if e.category() == crate::Category::PolicyDenied {
            e.with_policy(&self.policy.name)
        } else {
            e
        }
    }

    #[cold]
    fn limit(&self, limit: LimitName, seen: u64) -> Error {
        self.err(ErrorKind::LimitExceeded {
            limit,
            seen,
            max: self.limits.get(limit),
        })
    }

    // ---------------------------------------------------------------- stack and nodes

    fn fence(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    #[inline]
    fn push(&mut self, id: NodeId) -> Result<()> {
        let depth = (self.stack.len() + self.marks.len()) as u64;
        if depth >= self.limits.max_stack_len {
            return Err(self.limit(LimitName::MaxStackLen, depth + 1));
        }
        self.stack.push(id);
        Ok(())
    }

    fn pop(&mut self) -> Result<NodeId> {
        if self.stack.len() <= self.fence() {
            return Err(self.err(ErrorKind::StackUnderflow));
        }
        self.stack
            .pop()
            .ok_or_else(|| self.err(ErrorKind::StackUnderflow))
    }

    fn top(&self) -> Result<NodeId> {
        if self.stack.len() <= self.fence() {
            return Err(self.err(ErrorKind::StackUnderflow));
        }
        self.stack
            .last()
            .copied()
            .ok_or_else(|| self.err(ErrorKind::StackUnderflow))
    }

    /// Pops the topmost MARK and returns where its group starts; the group stays on the stack
    /// (`self.stack[start..]`) for the caller to use and truncate, with no temporary `Vec`.
    fn group(&mut self) -> Result<usize> {
        let mark = self
            .marks
            .pop()
            .ok_or_else(|| self.err(ErrorKind::MarkMissing))?;
        Ok(mark.min(self.stack.len()))
    }

    /// The stack item just below `start` (the target of a group), which must be above the
    /// current fence: what `top()` gives once the group is popped.
    fn below(&self, start: usize) -> Result<NodeId> {
        if start <= self.fence() {
            return Err(self.err(ErrorKind::StackUnderflow));
        }
        start
            .checked_sub(1)
            .and_then(|i| self.stack.get(i))
            .copied()
            .ok_or_else(|| self.err(ErrorKind::StackUnderflow))
    }

    /// Starts a group of the top `n` items (APPEND: 1, SETITEM: 2) after checking that they
    /// are above the current fence, as `n` pops would.
    fn top_group(&self, n: usize) -> Result<usize> {
        if self.stack.len() < self.fence() + n {
            return Err(self.err(ErrorKind::StackUnderflow));
        }
        Ok(self.stack.len() - n)
    }

    /// A new value that every document shares (`None`, a bool, an int held in its id),
    /// counted and charged as a node.
    #[inline(always)]
    fn shared(&mut self, id: NodeId, extra: u64) -> Result<NodeId> {
        self.count_value(extra)?;
        Ok(id)
    }

    /// Adds a node, charging its slot plus `extra` bytes. Inlined into every opcode that makes
    /// a value, so the node is written straight into its arena slot; refusals and growth are
    /// out of line. A container's items are already in their pool: its height is worked out
    /// from them.
    #[inline(always)]
    fn node(&mut self, n: Node, extra: u64) -> Result<NodeId> {
        self.count_value(extra)?;
        self.counted_node(n)
    }

    /// [`Machine::node`] for a value already counted ([`Machine::count_value`]).
    #[inline(always)]
    fn counted_node(&mut self, n: Node) -> Result<NodeId> {
        let len = self.arena.nodes.len();
        if len == self.arena.nodes.capacity() {
            self.grow_arena()?;
        }
        let id = u32::try_from(len)
            .ok()
            .filter(|&i| i < ARENA_END)
            .ok_or_else(|| self.limit(LimitName::MaxNodes, self.created))?;
        if !matches!(
            n,
            Node::Int(_) | Node::Float(_) | Node::Str { .. } | Node::Bytes { .. }
        ) {
            self.made(NodeId(id), n);
        }
        self.arena.nodes.push(n);
        Ok(NodeId(id))
    }

    /// Notes a container made as node `id` (not yet in the arena) for the depth check.
    #[inline(never)]
    fn made(&mut self, id: NodeId, n: Node) {
        // A list, tuple, set or frozenset of the items pool: its items read from the pool.
        if let Node::List { start, len }
        | Node::Tuple { start, len }
        | Node::Set { start, len }
        | Node::FrozenSet { start, len } = n
        {
            self.containers += 1;
            let items = self
                .arena
                .items
                .get(start as usize..start as usize + len as usize)
                .unwrap_or_default();
            self.heights.made_with(id, items);
            return;
        }
        let v = self.arena.view(n);
        if v.is_container() {
            self.containers += 1;
            self.heights.made(id, &v);
        }
    }

    /// Makes room for more nodes. The arena is the document's largest allocation: it grows
    /// fallibly, so a process short of memory refuses the input instead of aborting.
    #[cold]
    #[inline(never)]
    fn grow_arena(&mut self) -> Result<()> {
        let nodes = &mut self.arena.nodes;
        let more = nodes.len().max(1024);
        if nodes.try_reserve(more).is_err() {
            let bytes = (nodes.len().saturating_add(more) as u64).saturating_mul(NODE_BYTES);
            return Err(self.err(ErrorKind::AllocationFailed { bytes }));
        }
        Ok(())
    }

    /// Adds a value kept outside the node ([`Fat`]), charging its node, its slot in the side
    /// table ([`FAT_BYTES`]) and `extra` bytes.
    fn fat(&mut self, f: Fat<'a>, extra: u64) -> Result<NodeId> {
        let i = u32::try_from(self.arena.fat.len())
            .map_err(|_| self.limit(LimitName::MaxNodes, self.created.saturating_add(1)))?;
        if self.arena.fat.try_reserve(1).is_err() {
            return Err(self.err(ErrorKind::AllocationFailed {
                bytes: mem::size_of::<Fat<'a>>() as u64,
            }));
        }
        // In place before its node is made, which looks at it (a record is a container).
        self.arena.fat.push(f);
        self.node(Node::Fat(i), extra.saturating_add(FAT_BYTES))
    }

    #[inline]
    fn push_new(&mut self, n: Node, extra: u64) -> Result<()> {
        let id = self.node(n, extra)?;
        self.push(id)
    }

    /// EMPTY_LIST, EMPTY_DICT, EMPTY_SET, EMPTY_TUPLE: a container with no items, made and
    /// pushed without looking at its (no) children.
    #[inline]
    fn push_empty(&mut self, n: Node) -> Result<()> {
        self.count_value(0)?;
        let len = self.arena.nodes.len();
        if len == self.arena.nodes.capacity() {
            self.grow_arena()?;
        }
        let id = u32::try_from(len)
            .ok()
            .filter(|&i| i < ARENA_END)
            .ok_or_else(|| self.limit(LimitName::MaxNodes, self.created))?;
        self.containers += 1;
        self.heights.made_empty(NodeId(id));
        self.arena.nodes.push(n);
        self.push(NodeId(id))
    }

    /// An int: held in its id when it fits, else a node.
    #[inline]
    fn int(&mut self, x: i64, extra: u64) -> Result<NodeId> {
        match NodeId::int(x) {
            Some(id) => self.shared(id, extra),
            None => self.node(Node::Int(Word::int(x)), extra),
        }
    }

    /// A str whose `surrogatepass` UTF-8 is `bytes` (validated by the caller; `surrogates`
    /// when it holds a lone surrogate): offsets into the input when it is there, else a copy
    /// charged `extra` bytes.
    fn str_node(&mut self, text: Text<'a>, extra: u64) -> Result<NodeId> {
        if let Cow::Borrowed(b) = text.bytes {
            if let Some((start, len)) = self.arena.offsets(b) {
                let n = if text.surrogates {
                    Node::Surrogates { start, len }
                } else {
                    Node::Str { start, len }
                };
                return self.node(n, extra);
            }
        }
        self.fat(
            Fat::Str {
                bytes: text.bytes,
                surrogates: text.surrogates,
            },
            extra,
        )
    }

    /// Bytes: offsets into the input when they are there, else kept as they are.
    fn bytes_node(&mut self, b: Cow<'a, [u8]>, extra: u64) -> Result<NodeId> {
        if let Cow::Borrowed(b) = b {
            if let Some((start, len)) = self.arena.offsets(b) {
                return self.node(Node::Bytes { start, len }, extra);
            }
        }
        self.fat(Fat::Bytes(b), extra)
    }

    fn get(&self, id: NodeId) -> Result<Value<'_>> {
        self.arena.get(id).ok_or_else(|| self.err(internal()))
    }

    /// The record object of node `id`, to change.
    fn object_mut(&mut self, id: NodeId) -> Option<&mut Object> {
        match self.arena.node(id) {
            Some(Node::Fat(i)) => match self.arena.fat.get_mut(i as usize) {
                Some(Fat::Object(o)) => Some(o),
                _ => None,
            },
            _ => None,
        }
    }

    /// Appends `items` to the items pool; returns where they start and how many they are.
    fn pool_items(&mut self, items: &[NodeId]) -> Result<(u32, u32)> {
        let pool = &mut self.arena.items;
        let start = u32::try_from(pool.len()).ok();
        let end = pool
            .len()
            .checked_add(items.len())
            .and_then(|e| u32::try_from(e).ok());
        match (start, end, pool.try_reserve(items.len())) {
            (Some(start), Some(end), Ok(())) => {
                pool.extend_from_slice(items);
                Ok((start, end - start))
            }
            _ => Err(self.err(ErrorKind::AllocationFailed {
                bytes: (items.len() as u64).saturating_mul(ITEM_BYTES),
            })),
        }
    }

    /// Appends `pairs` to the pairs pool; returns where they start and how many they are.
    fn pool_pairs(&mut self, pairs: &[(NodeId, NodeId)]) -> Result<(u32, u32)> {
        let pool = &mut self.arena.pairs;
        let start = u32::try_from(pool.len()).ok();
        let end = pool
            .len()
            .checked_add(pairs.len())
            .and_then(|e| u32::try_from(e).ok());
        match (start, end, pool.try_reserve(pairs.len())) {
            (Some(start), Some(end), Ok(())) => {
                pool.extend_from_slice(pairs);
                Ok((start, end - start))
            }
            _ => Err(self.err(ErrorKind::AllocationFailed {
                bytes: (pairs.len() as u64).saturating_mul(KEYED_BYTES),
            })),
        }
    }

    /// A new list or tuple of `self.stack[start..]`, which are popped.
    fn seq_from_stack(&mut self, start: usize, tuple: bool) -> Result<NodeId> {
        let stack = mem::take(&mut self.stack);
        let r = self.new_seq(stack.get(start..).unwrap_or_default(), tuple);
        self.stack = stack;
        self.stack.truncate(start);
        r
    }

    /// A new list or tuple of `items`.
    fn new_seq(&mut self, items: &[NodeId], tuple: bool) -> Result<NodeId> {
        self.check_items(items.len())?;
        // Counted and charged (node and items) before the pool grows.
        self.count_value(items.len() as u64 * ITEM_BYTES)?;
        let (start, len) = self.pool_items(items)?;
        self.counted_node(if tuple {
            Node::Tuple { start, len }
        } else {
            Node::List { start, len }
        })
    }

    // ---------------------------------------------------------------- values

    // ---------------------------------------------------------------- globals and calls

    // ---------------------------------------------------------------- the loop
}

#[cfg(test)]
mod tests;
