//! The build's state ([`Machine`]): the stack and its MARKs, the arena's nodes and pools, and
//! errors at the current opcode.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::hash::RandomState;
use std::mem;

use super::budget::{FAT_BYTES, ITEM_BYTES, KEYED_BYTES, NODE_BYTES};
use super::called::CalledWith;
use super::depth::Heights;
use super::keys::mix::MixState;
use super::keys::reader::ReaderCell;
use super::keys::{HashCache, KeyIndex};
use super::spare::Spare;
use crate::clock::Clock;
use crate::error::{Error, ErrorKind, Result};
use crate::limits::{LimitName, Limits};
use crate::memo::Memo;
use crate::policy::{Checked, Policy};
use crate::reader::Reader;
use crate::text::Text;
use crate::value::{
    Arena, Document, Fat, Kept, Node, NodeId, Object, Scratch, Value, Word, ARENA_END,
};
use crate::vm::Vm;

pub(super) struct Machine<'a, 'p> {
    pub(super) r: Reader<'a>,
    pub(super) policy: &'p Policy,
    pub(super) limits: Limits,
    pub(super) arena: Arena<'a>,
    pub(super) stack: Vec<NodeId>,
    pub(super) marks: Vec<usize>,
    pub(super) memo: Memo<NodeId>,
    pub(super) opcodes: u64,
    pub(super) alloc: u64,
    pub(super) proto: u8,
    pub(super) hasher: RandomState,
    pub(super) buffers: Option<VecDeque<&'a [u8]>>,
    /// Whether the input is a stream of pickles: the depth check then runs once, over every
    /// root, after the last one.
    pub(super) stream: bool,
    /// The arena's length when the current pickle of a stream began: values below it were
    /// made by an earlier pickle.
    pub(super) pickle_start: usize,
    /// Where each pickle of a stream began in the arena (`Document::pickle_starts`).
    pub(super) pickle_starts: Vec<usize>,
    /// A pickle of a stream changed a value an earlier one made (APPEND, SETITEM, ADDITEMS or
    /// BUILD on it, reached through the shared memo): [`Document::changed_earlier`].
    pub(super) changed_earlier: bool,
    /// The containers a record's arguments reached when it was made (the record objects
    /// among them included): a later APPEND, SETITEM, ADDITEMS or BUILD on one of them changes
    /// what CPython's call received, which the record does not show
    /// ([`Document::records_replayable`]). The first few in an array, the rest hashed with a
    /// seeded mix rather than SipHash ([`CalledWith`]).
    pub(super) called_with: CalledWith,
    /// No record of the document can be written back as the call that made it: one was made by
    /// INST or OBJ (which CPython runs as `cls.__new__(cls)` when there is no argument, not as
    /// a REDUCE), or a value in [`Machine::called_with`] changed after the call.
    pub(super) records_unreplayable: bool,
    /// Values created, shared ones included (`max_nodes` counts them all, as before values
    /// were shared, so the limit does not depend on which values happen to be shared).
    pub(super) created: u64,
    /// The hash indexes of the dicts, sets and frozensets that outgrew linear search (more
    /// than `SMALL_KEYED` entries at an insertion), by arena index. Only the build looks keys
    /// up, and most dicts never need one, so the values do not carry them.
    pub(super) indexes: HashMap<u32, KeyIndex>,
    /// The hashes of the tuples, frozensets and long texts hashed so far (src/build/keys/mod.rs).
    pub(super) hash_cache: HashCache,
    /// The model of the work CPython does with the keys (src/build/keys/reader.rs).
    pub(super) reader_keys: ReaderCell,
    /// Containers created (list, tuple, dict, set, frozenset, record object): no path of the
    /// depth check holds more than these plus one leaf.
    pub(super) containers: u64,
    /// The containers' heights, a bound on the depth check's walk (src/build/depth.rs): always kept
    /// by a decode in one pass; after a scan (`decode_with_report`), only when it counted
    /// more opcodes that make containers than `max_nesting_depth`.
    pub(super) heights: Heights,
    /// The lists and dicts an argument schema checked (a `record` call's arguments, and its
    /// empty NEWOBJ_EX keyword arguments), with the global called: they may not change after
    /// the call, or what the schema checked would no longer be what the record holds (A46).
    /// Hashed with the seeded mix, seeded at the first insertion, as [`Machine::called_with`].
    pub(super) sealed: HashMap<NodeId, NodeId, MixState>,
    /// What argument schemas found (dicts whose keys matched, texts' lengths): not found
    /// again when the same value is passed again.
    pub(super) checked: Checked,
    /// When to stop ([`Decoder::deadline`]), looked at by opcode count.
    pub(super) clock: Clock,
    /// Where a new dict's pairs and a new set's items are gathered while their keys are
    /// compared (the arena's pools are read by the comparisons meanwhile), then appended to
    /// the pool in one piece; kept between containers so that its allocation is reused.
    pub(super) new_pairs: Vec<(NodeId, NodeId)>,
    pub(super) new_items: Vec<NodeId>,
    /// The items a `set()` or `frozenset()` call copies out of its argument, kept from call
    /// to call.
    pub(super) call_items: Vec<NodeId>,
    /// The walk's stack of [`Machine::note_call_arguments`], kept from call to call.
    pub(super) call_walk: Vec<NodeId>,
    /// Every opcode through the careful path ([`Decoder::careful_only`]).
    pub(super) careful: bool,
    /// The persistent ids kept under `persistent_ids = "record"` ([`Document::persistent_ids`]).
    pub(super) persistent_ids: Vec<NodeId>,
    /// Bytes the reader after allocates copying what constructors and BUILD were given, so
    /// far (`max_copy_bytes_per_byte`, src/build/copies.rs).
    pub(super) copied: u64,
    /// What the policy's checks found about the records they saw (src/build/checks.rs).
    pub(super) checks: super::checks::Checks,
}

pub(super) fn internal() -> ErrorKind {
    ErrorKind::TypeMismatch("dangling node id")
}

impl<'a, 'p> Machine<'a, 'p> {
    /// Refuses an input longer than `max_input_bytes`, before any machine is made.
    pub(super) fn check_input(input: &[u8], limits: &Limits) -> Result<()> {
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
        Ok(())
    }

    /// A machine at the start of `input` (checked by [`Machine::check_input`]) building into
    /// `arena`. Inlined, so that it is made in its caller's place rather than moved there.
    #[inline(always)]
    pub(super) fn new(
        input: &'a [u8],
        policy: &'p Policy,
        limits: Limits,
        buffers: Option<Vec<&'a [u8]>>,
        arena: Arena<'a>,
    ) -> Machine<'a, 'p> {
        let spare = Spare::take();
        Machine {
            r: Reader::new(input),
            policy,
            limits,
            arena,
            created: 0,
            containers: 0,
            heights: Heights::default(),
            indexes: HashMap::new(),
            hash_cache: HashCache::default(),
            reader_keys: ReaderCell::default(),
            sealed: HashMap::default(),
            persistent_ids: Vec::new(),
            checks: super::checks::Checks::default(),
            checked: Checked::default(),
            clock: Clock::default(),
            new_pairs: Vec::new(),
            new_items: Vec::new(),
            call_items: Vec::new(),
            call_walk: Vec::new(),
            careful: false,
            stack: spare.stack,
            marks: spare.marks,
            memo: Memo::with_dense(spare.memo),
            opcodes: 0,
            alloc: 0,
            proto: 0,
            hasher: RandomState::new(),
            buffers: buffers.map(VecDeque::from),
            stream: false,
            pickle_start: 0,
            changed_earlier: false,
            pickle_starts: Vec::new(),
            called_with: CalledWith::default(),
            records_unreplayable: false,
            copied: 0,
        }
    }

    /// The document of the values built, with `roots`; the machine's stack, MARK and memo
    /// vectors kept for the next decode on this thread ([`Spare`]). Takes what it needs out of
    /// the machine (which is left empty) rather than the machine itself, which is large to move.
    pub(super) fn finish(&mut self, roots: Vec<NodeId>, stream: bool) -> Document<'a> {
        Spare {
            stack: mem::take(&mut self.stack),
            marks: mem::take(&mut self.marks),
            memo: mem::take(&mut self.memo).into_dense(),
        }
        .keep();
        let persistent_ids = mem::take(&mut self.persistent_ids);
        Document {
            arena: mem::replace(&mut self.arena, Arena::new(self.r.input, Scratch::new())),
            roots,
            stream,
            values: self.created,
            changed_earlier: self.changed_earlier,
            records_replayable: !self.records_unreplayable,
            pickle_starts: if stream {
                mem::take(&mut self.pickle_starts).into_boxed_slice()
            } else {
                // One pickle: its values begin at 0, as an empty list says (no allocation).
                Box::default()
            },
            trailing_len: None,
            kept: Kept::boxed(persistent_ids, self.checks.canonical_builds()),
        }
    }

    /// Notes that `target` is about to change: when an earlier pickle of the stream made it,
    /// the document remembers that a later pickle changed it.
    #[inline(always)]
    pub(super) fn touch(&mut self, target: NodeId) {
        self.changed_earlier |= target.index() < self.pickle_start;
        if !self.called_with.is_empty() {
            self.touch_call_argument(target);
        }
    }

    /// [`Machine::touch`] once a record was made: whether `target` is in what a record's
    /// arguments reached. Out of line, so that documents without records pay one test.
    #[cold]
    #[inline(never)]
    pub(super) fn touch_call_argument(&mut self, target: NodeId) {
        if self.called_with.contains(target) {
            self.records_unreplayable = true;
        }
    }

    /// Adds the containers `args` reaches (through lists, tuples, dicts, sets, frozensets and
    /// record objects) to [`Machine::called_with`]. A container already there is not walked
    /// again: what it reached was added with it, and anything added under it since touched
    /// it or one below it. So every node is walked at most once in a whole decode, and the
    /// walk uses an explicit stack.
    pub(super) fn note_call_arguments(&mut self, args: NodeId) -> Result<()> {
        let mut todo = mem::take(&mut self.call_walk);
        todo.clear();
        todo.push(args);
        let mut r = Ok(());
        while let Some(id) = todo.pop() {
            if !id.is_shared() && self.arena.node(id).is_none() {
                r = Err(self.err(internal()));
                break;
            }
            if !self.is_container_node(id) || !self.called_with.insert(id) {
                continue;
            }
            // The set's entry, charged as the allocation budget charges the arena.
            if let Err(e) = self.charge(2 * mem::size_of::<NodeId>() as u64) {
                r = Err(e);
                break;
            }
            let Some(v) = self.arena.get(id) else {
                r = Err(self.err(internal()));
                break;
            };
            // Only containers are walked: texts, numbers and shared values are not pushed.
            let arena = &self.arena;
            v.for_each_child(|c| {
                if !c.is_shared()
                    && !matches!(
                        arena.node(c),
                        Some(Node::Str { .. } | Node::Int(_) | Node::Float(_) | Node::Bytes { .. })
                    )
                {
                    todo.push(c);
                }
            });
        }
        self.call_walk = todo;
        r
    }

    /// Whether `id` is a container (list, tuple, dict, set, frozenset, record object), from
    /// its node without making its view.
    fn is_container_node(&self, id: NodeId) -> bool {
        match self.arena.node(id) {
            Some(
                Node::List { .. }
                | Node::Tuple { .. }
                | Node::Set { .. }
                | Node::FrozenSet { .. }
                | Node::Dict { .. }
                | Node::ListVec(_)
                | Node::SetVec(_)
                | Node::DictVec(_),
            ) => true,
            Some(Node::Fat(i)) => matches!(self.arena.fat.get(i as usize), Some(Fat::Object(_))),
            _ => false,
        }
    }

    /// An error of `kind` at the current opcode ([`crate::vm::error_at`]).
    #[cold]
    pub(super) fn err(&self, kind: ErrorKind) -> Error {
        crate::vm::error_at(&self.r, self.policy, kind)
    }

    #[cold]
    pub(super) fn limit(&self, limit: LimitName, seen: u64) -> Error {
        Vm::limit(self, limit, seen)
    }

    // ---------------------------------------------------------------- nodes

    /// A new value that every document shares (`None`, a bool, an int held in its id),
    /// counted and charged as a node.
    #[inline(always)]
    pub(super) fn shared(&mut self, id: NodeId, extra: u64) -> Result<NodeId> {
        self.count_value(extra)?;
        Ok(id)
    }

    /// Adds a node, charging its slot plus `extra` bytes. Inlined into every opcode that makes
    /// a value, so the node is written straight into its arena slot; refusals and growth are
    /// out of line. A container's items are already in their pool: its height is worked out
    /// from them.
    #[inline(always)]
    pub(super) fn node(&mut self, n: Node, extra: u64) -> Result<NodeId> {
        self.count_value(extra)?;
        self.counted_node(n)
    }

    /// [`Machine::node`] for a value already counted ([`Machine::count_value`]).
    #[inline(always)]
    pub(super) fn counted_node(&mut self, n: Node) -> Result<NodeId> {
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
    pub(super) fn made(&mut self, id: NodeId, n: Node) {
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
    pub(super) fn grow_arena(&mut self) -> Result<()> {
        let nodes = &mut self.arena.nodes;
        let more = nodes.len().max(16);
        if nodes.try_reserve(more).is_err() {
            let bytes = (nodes.len().saturating_add(more) as u64).saturating_mul(NODE_BYTES);
            return Err(self.err(ErrorKind::AllocationFailed { bytes }));
        }
        Ok(())
    }

    /// Adds a value kept outside the node ([`Fat`]), charging its node, its slot in the side
    /// table ([`FAT_BYTES`]) and `extra` bytes.
    pub(super) fn fat(&mut self, f: Fat<'a>, extra: u64) -> Result<NodeId> {
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

    /// EMPTY_LIST, EMPTY_DICT, EMPTY_SET, EMPTY_TUPLE: a container with no items, made
    /// without looking at its (no) children.
    #[inline]
    pub(super) fn new_empty(&mut self, n: Node) -> Result<NodeId> {
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
        Ok(NodeId(id))
    }

    /// An int: held in its id when it fits, else a node.
    #[inline]
    pub(super) fn int(&mut self, x: i64, extra: u64) -> Result<NodeId> {
        match NodeId::int(x) {
            Some(id) => self.shared(id, extra),
            None => self.node(Node::Int(Word::int(x)), extra),
        }
    }

    /// A str whose `surrogatepass` UTF-8 is `bytes` (validated by the caller; `surrogates`
    /// when it holds a lone surrogate): offsets into the input when it is there, else a copy
    /// charged `extra` bytes. The empty text is [`NodeId::EMPTY_STR`], as every empty str
    /// CPython makes is its one `''`.
    pub(super) fn str_node(&mut self, text: Text<'a>, extra: u64) -> Result<NodeId> {
        if text.bytes.is_empty() {
            return self.shared(NodeId::EMPTY_STR, extra);
        }
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

    /// Bytes: offsets into the input when they are there, else kept as they are. Empty bytes
    /// are [`NodeId::EMPTY_BYTES`], as every empty bytes CPython 3 makes is its one `b''`.
    pub(super) fn bytes_node(&mut self, b: Cow<'a, [u8]>, extra: u64) -> Result<NodeId> {
        if b.is_empty() {
            return self.shared(NodeId::EMPTY_BYTES, extra);
        }
        if let Cow::Borrowed(b) = b {
            if let Some((start, len)) = self.arena.offsets(b) {
                return self.node(Node::Bytes { start, len }, extra);
            }
        }
        self.fat(Fat::Bytes(b), extra)
    }

    pub(super) fn get(&self, id: NodeId) -> Result<Value<'_>> {
        self.arena.get(id).ok_or_else(|| self.err(internal()))
    }

    /// The record object of node `id`, to change.
    pub(super) fn object_mut(&mut self, id: NodeId) -> Option<&mut Object> {
        match self.arena.node(id) {
            Some(Node::Fat(i)) => match self.arena.fat.get_mut(i as usize) {
                Some(Fat::Object(o)) => Some(o),
                _ => None,
            },
            _ => None,
        }
    }

    /// Appends `items` to the items pool; returns where they start and how many they are.
    pub(super) fn pool_items(&mut self, items: &[NodeId]) -> Result<(u32, u32)> {
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
    pub(super) fn pool_pairs(&mut self, pairs: &[(NodeId, NodeId)]) -> Result<(u32, u32)> {
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

    /// A new list or tuple of `items`.
    pub(super) fn new_seq(&mut self, items: &[NodeId], tuple: bool) -> Result<NodeId> {
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
}
