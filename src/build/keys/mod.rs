//! Python equality and hashing of dict keys and set items, over the arena.
//!
//! Rules (CPython's `Objects/object.c`, `longobject.c`, `floatobject.c`): numbers compare by
//! value across bool, int, float and complex (`1 == 1.0 == True == 1+0j`); str, bytes compare by
//! content; tuple and frozenset by items; a global by (module, name); a record object by
//! identity; NaN only equals itself (the same node, as CPython's identity shortcut in dict
//! lookup). list, dict, set and bytearray are unhashable, and so is a tuple or frozenset that
//! holds one.
//!
//! Two hashes: [`KeyOps::hash`] is CPython's (`reader.rs`), with keyed SipHash
//! (`std::hash::RandomState`) for texts, bytes and what CPython hashes by address; the model of
//! the reader's work ([`reader`]) reads it from here, and kept hashes are compared before
//! equality with it. The build's tables (dict and set indexes) use it too, mixed with a
//! random seed per decode, while the model caps its collisions (texts and bytes excepted);
//! when a caller lifts that cap they use the content hash (`content.rs`,
//! [`KeyOps::content_hash`]), keyed by the seed, so that keys whose CPython hashes the peer
//! made collide spread like any others there (`index.rs` says why both stay linear). Every
//! walk uses an explicit stack.

mod content;
mod datetime;
pub(crate) mod entries;
mod eq;
mod index;
pub(crate) mod mix;
mod num;
mod pyhash;
pub(crate) mod reader;

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hash, Hasher};

use hashbrown::HashTable;

use crate::clock::Clock;
use crate::policy::RecordKey;
use crate::value::{Arena, Node, NodeId, Object, PyBytes, Value};
use datetime::key_of;
pub(crate) use index::INDEX_BY_CPYTHON_COLLISIONS;
pub(crate) use num::bigint_to_f64;
use num::{num_eq, num_of};
use pyhash::{
    bigint_hash, complex_hash, float_hash, int_hash, FrozenSetHash, OldTupleHash, TupleHash,
    HASH_NONE,
};

/// The index of a dict or set: `(hash, position in items)` pairs.
pub(crate) type KeyIndex = HashTable<(u64, u32)>;

/// A value is unhashable (list, dict, set, bytearray, or a tuple/frozenset holding one).
#[derive(Debug)]
pub(crate) struct Unhashable;

/// Tuples of at most this many items whose items are plain scalars are compared directly.
const SMALL_TUPLE: usize = 16;
/// An equality walk that compared at least this many pairs remembers its container pairs
/// ([`KeyCache`]); a shorter one is cheaper to repeat than to remember.
const REMEMBER_AFTER_PAIRS: usize = 32;

/// An equality walk checks its pairs against the insertion's room once per this many
/// ([`KeyCache`]).
const WALK_CHECK: usize = 256;

/// Two distinct texts or bytes at least this long that compare equal are remembered as equal
/// ([`KeyCache`]): the comparison costs more than the lookup.
const LONG_EQUAL_BYTES: usize = 4096;

/// Big ints of at most this many 64-bit digits are hashed again rather than kept in the
/// [`HashCache`] (their hash costs less than the lookup).
const SHORT_BIG_INT_DIGITS: usize = 4;

/// Texts and bytes at least this long have their hash kept in the [`HashCache`] (shorter ones
/// hash faster than the lookup).
pub(crate) const CACHED_TEXT_BYTES: usize = 64;

/// The hashes of the tuples, frozensets and long texts and bytes of one decode, by node: they
/// are immutable, so a hash never changes, and a value hashed again (a text shared by many
/// tuples that are set items, a frozenset inside the next one) costs a lookup, not its size.
/// Without it, `frozenset(frozenset(...))` nested n deep hashed the chain below at each level
/// (n**2), and 200,000 set items `(i, s)` sharing a 1 MiB `s` hashed 200 GB.
///
/// It also keeps the pairs of distinct tuples or frozensets found equal (by node ids, the
/// smaller first), for the same reason: immutable values stay equal, and a set that meets a
/// 10,000-item tuple equal to one it holds, 10,000 times through the memo, compared the two
/// item by item each time (10**8 comparisons in 120 KB of pickle; A43).
pub(crate) type HashCache = RefCell<KeyCache>;

/// What a [`HashCache`] holds.
///
/// It is also where one insertion's memory is metered: what the cache keeps, and the pairs an
/// equality walk holds while it runs, cost [`PAIR_BYTES`] each, and together may not pass the
/// `room` the build gives it (the allocation budget left, [`KeyCache::open`]). A walk over two
/// tuple DAGs that unfold alike but share differently meets up to one pair per two nodes of
/// each (W**2 pairs a level from 2W nodes): 1.77 GB for 2 MB of pickle when they were not
/// metered (A46). Past the room the walk stops and the build refuses the insertion as
/// `max_alloc_bytes` ([`KeyCache::close`]).
#[derive(Debug)]
pub(crate) struct KeyCache {
    hashes: HashMap<NodeId, u64>,
    /// Content hashes (`content.rs`), kept as `hashes` are.
    content: HashMap<NodeId, u64>,
    equal: HashSet<(NodeId, NodeId)>,
    /// The seed of [`KeyOps::content_hash`] for this decode, drawn at the first insertion
    /// that hashes (0 until then: [`KeyCache::seed`]).
    seed: u64,
    /// Bytes this insertion may use.
    room: u64,
    /// Bytes kept (hashes and equal pairs) during this insertion.
    kept: u64,
    /// Why the insertion stopped, if it did.
    over: Option<Over>,
    /// When walks stop ([`crate::Decoder::deadline`]).
    pub(crate) clock: Clock,
    /// The last flat tuple [`KeyOps::hash`] hashed and its hash under CPython 3.7 and before
    /// ([`pyhash::OldTupleHash`], from the same item hashes), for the model of the reader's
    /// work, which asks for it right after ([`KeyOps::old_hash_of`]).
    last_old: Option<(NodeId, u64)>,
}

/// Why an insertion's hashing or equality walks stopped ([`KeyCache::close`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Over {
    /// They would have reached this many bytes, past the room.
    Bytes(u64),
    /// The decode's deadline passed.
    Deadline,
}

/// What a kept hash, a kept equal pair and a pair held by an equality walk are charged (a
/// hash-table entry of 12 to 16 bytes at a load of 1/2 or more, the walk's work-list entry).
pub(crate) const PAIR_BYTES: u64 = 32;

impl Default for KeyCache {
    /// An empty cache with unlimited room (until [`KeyCache::open`] gives it some).
    fn default() -> KeyCache {
        KeyCache {
            hashes: HashMap::new(),
            content: HashMap::new(),
            equal: HashSet::new(),
            seed: 0,
            room: u64::MAX,
            kept: 0,
            last_old: None,
            over: None,
            clock: Clock::default(),
        }
    }
}

impl KeyCache {
    /// Starts an insertion that may use `room` bytes.
    pub(crate) fn open(&mut self, room: u64) {
        self.room = room;
        self.kept = 0;
        self.over = None;
    }

    /// Ends an insertion: the bytes it kept, and the bytes it would have reached past its
    /// room (then nothing it decided stands).
    pub(crate) fn close(&mut self) -> (u64, Option<Over>) {
        (std::mem::take(&mut self.kept), self.over.take())
    }

    /// The seed of [`KeyOps::content_hash`], drawn from `state` the first time (every table
    /// of one decode uses the same).
    pub(crate) fn seed<S: BuildHasher>(&mut self, state: &S) -> u64 {
        if self.seed == 0 {
            self.seed = state.hash_one(0x5eed_u64) | 1;
        }
        self.seed
    }

    /// The seed [`KeyCache::seed`] drew (1 before it drew one: only tests hash then).
    pub(crate) fn seed_drawn(&self) -> u64 {
        self.seed.max(1)
    }

    /// Keeps `PAIR_BYTES` more if the room allows, else marks the insertion as over.
    fn keep(&mut self) -> bool {
        let wanted = self.kept.saturating_add(PAIR_BYTES);
        if wanted > self.room {
            self.over.get_or_insert(Over::Bytes(wanted));
            return false;
        }
        self.kept = wanted;
        true
    }
}

/// Hashing and equality over one arena with one key.
pub(crate) struct KeyOps<'n, 'a, S> {
    pub(crate) arena: &'n Arena<'a>,
    pub(crate) state: &'n S,
    /// Hashes kept across calls, if any (the build's; see [`HashCache`]).
    pub(crate) cache: Option<&'n HashCache>,
    /// The seed of [`KeyOps::content_hash`] ([`KeyCache::seed`]).
    pub(crate) seed: u64,
}

/// A tuple's or frozenset's hash being computed from its items' ([`KeyOps::hash`]).
enum Acc {
    Tuple(TupleHash),
    Set(FrozenSetHash),
}

impl Acc {
    #[inline(always)]
    fn add(&mut self, h: u64) {
        match self {
            Acc::Tuple(t) => t.lane(h),
            Acc::Set(s) => s.add(h),
        }
    }

    #[inline(always)]
    fn finish(&self) -> u64 {
        match self {
            Acc::Tuple(t) => t.finish(),
            Acc::Set(s) => s.finish(),
        }
    }
}

/// The value of an int held in its id ([`NodeId::is_held_int`]).
#[inline(always)]
fn held_int(id: NodeId) -> Option<i64> {
    // Sign-extend the low 31 bits.
    id.is_held_int()
        .then(|| i64::from(((id.0 << 1) as i32) >> 1))
}

impl<S: BuildHasher> KeyOps<'_, '_, S> {
    #[inline(always)]
    fn node(&self, id: NodeId) -> Option<Value<'_>> {
        self.arena.get(id)
    }

    /// The value `id` is hashed and compared as: itself, or for a record whose key is its
    /// first argument ([`RecordKey::FirstArgument`]: Mitogen's `Secret`, `Blob`), that
    /// argument, followed through records of the same kind (each argument was made before
    /// its record, so the chain only goes back, and ends). `Unhashable` for a record that is
    /// ([`RecordKey::Unhashable`], or a first-argument record called with none).
    #[inline]
    pub(crate) fn resolve(&self, mut id: NodeId) -> Result<NodeId, Unhashable> {
        loop {
            // Only a value of the side table can be a record: the rest are themselves,
            // found from the node without a view.
            if !matches!(self.arena.node(id), Some(Node::Fat(_))) {
                return Ok(id);
            }
            let Some(Value::Object(o)) = self.node(id) else {
                return Ok(id);
            };
            match o.key {
                RecordKey::Identity | RecordKey::OnePerFirstArgument | RecordKey::Datetime => {
                    return Ok(id)
                }
                RecordKey::Unhashable => return Err(Unhashable),
                RecordKey::FirstArgument => {
                    let next = self.first_argument(o)?;
                    // Never forward (a guard: arguments are made before their record).
                    if !next.is_shared() && next >= id {
                        return Err(Unhashable);
                    }
                    id = next;
                }
            }
        }
    }

    /// The first positional argument of a record; `Unhashable` when it has none.
    fn first_argument(&self, o: &Object) -> Result<NodeId, Unhashable> {
        match self.node(o.args) {
            Some(Value::Tuple(items)) => items.first().copied().ok_or(Unhashable),
            _ => Err(Unhashable),
        }
    }

    /// The hash of a [`RecordKey::OnePerFirstArgument`] record: its global's name and its
    /// first argument's hash, which must be a scalar's (else `Unhashable`, so that no walk
    /// goes through records).
    fn hash_one_per_argument(&self, o: &Object) -> Result<u64, Unhashable> {
        self.one_per_argument(o, self.state.build_hasher(), Self::hash_scalar)
    }

    /// A [`RecordKey::OnePerFirstArgument`] record hashed into `h`: its global's name and
    /// `scalar`'s hash of its first argument, which must be a scalar (else `Unhashable`). The
    /// shared body of [`KeyOps::hash`]'s and [`KeyOps::content_hash`]'s record keys.
    fn one_per_argument<H: Hasher>(
        &self,
        o: &Object,
        mut h: H,
        scalar: impl Fn(&Self, NodeId) -> Result<Option<u64>, Unhashable>,
    ) -> Result<u64, Unhashable> {
        let a = self.resolve(self.first_argument(o)?)?;
        let ha = match self.node(a) {
            Some(
                Value::None
                | Value::Bool(_)
                | Value::Int(_)
                | Value::BigInt(_)
                | Value::Float(_)
                | Value::Complex(..)
                | Value::Str(_)
                | Value::Bytes(_)
                | Value::Global(_),
            ) => scalar(self, a)?.ok_or(Unhashable)?,
            _ => return Err(Unhashable),
        };
        h.write_u8(12);
        if let Some(Value::Global(g)) = self.node(o.callable) {
            let (module, name) = g.python3_name();
            module.hash(&mut h);
            name.hash(&mut h);
        }
        h.write_u64(ha);
        Ok(h.finish())
    }

    fn cached(&self, id: NodeId) -> Option<u64> {
        self.cache?.try_borrow().ok()?.hashes.get(&id).copied()
    }

    fn remember(&self, id: NodeId, h: u64) {
        // Not reentrant, so the borrow cannot fail; if it did, the hash is only not kept.
        if let Some(Ok(mut c)) = self.cache.map(RefCell::try_borrow_mut) {
            // Grown fallibly: short of memory, the hash is only not kept.
            if c.hashes.try_reserve(1).is_ok() && c.keep() {
                c.hashes.insert(id, h);
            }
        }
    }

    /// Whether a walk holding `pairs` pairs still fits the insertion's room and the decode's
    /// deadline; marks the insertion as over when it does not. Without a cache, any walk fits.
    fn walk_fits(&self, pairs: usize) -> bool {
        let Some(Ok(mut c)) = self.cache.map(RefCell::try_borrow_mut) else {
            return true;
        };
        let wanted = c
            .kept
            .saturating_add((pairs as u64).saturating_mul(PAIR_BYTES));
        if wanted > c.room {
            c.over.get_or_insert(Over::Bytes(wanted));
            return false;
        }
        if c.clock.passed() {
            c.over.get_or_insert(Over::Deadline);
            return false;
        }
        true
    }

    /// Whether the tuples, frozensets, or long texts or bytes `a` and `b` were found equal
    /// before.
    fn known_equal(&self, a: NodeId, b: NodeId) -> bool {
        let Some(Ok(c)) = self.cache.map(RefCell::try_borrow) else {
            return false;
        };
        c.equal.contains(&(a.min(b), a.max(b)))
    }

    fn remember_equal(&self, a: NodeId, b: NodeId) {
        if let Some(Ok(mut c)) = self.cache.map(RefCell::try_borrow_mut) {
            let pair = (a.min(b), a.max(b));
            if !c.equal.contains(&pair) && c.equal.try_reserve(1).is_ok() && c.keep() {
                c.equal.insert(pair);
            }
        }
    }

    /// CPython's hash of a hashable value (`hash(v)`), or `Unhashable`, with picklewarden's
    /// keyed SipHash standing in for CPython's where CPython's is keyed or by address (str,
    /// bytes, a global, a record, a NaN: [`KeyOps::hash_scalar`]). Numbers, tuples and
    /// frozensets hash as CPython hashes them (`reader.rs`), so equal values hash alike across
    /// kinds (`1 == 1.0 == True`), and two keys share a hash exactly when CPython's would (for
    /// a text, one random key per decode as one per process there): what the model of the
    /// reader's work counts. The build's tables use [`KeyOps::content_hash`].
    pub(crate) fn hash(&self, root: NodeId) -> Result<u64, Unhashable> {
        let root = self.resolve(root)?;
        let v = self.node(root).ok_or(Unhashable)?;
        let items = match v {
            Value::Tuple(items) | Value::FrozenSet(items) => items,
            _ => return self.hash_view(root, v),
        };
        if let Some(h) = self.hash_flat(root, v, items)? {
            return Ok(h);
        }
        if let Some(h) = self.cached(root) {
            return Ok(h);
        }
        // Tuples and frozensets: post-order with an explicit stack of frames.
        // Each tuple or frozenset is hashed once per call (`done`), so a DAG of shared tuples
        // (`t = (t', t')` through DUP or the memo) costs its size, not its unfolded size.
        struct Frame<'v> {
            id: NodeId,
            items: &'v [NodeId],
            next: usize,
            acc: Acc,
        }
        let mut done: HashMap<NodeId, u64> = HashMap::new();
        let mut stack: Vec<Frame<'_>> = Vec::new();
        let mut pending = Some(root);
        loop {
            if let Some(id) = pending.take() {
                let id = self.resolve(id)?;
                let known = match done.get(&id).copied().or_else(|| self.cached(id)) {
                    Some(h) => Some(h),
                    None => self.hash_scalar(id)?,
                };
                match known {
                    Some(h) => match stack.last_mut() {
                        Some(f) => f.acc.add(h),
                        None => return Ok(h),
                    },
                    None => {
                        let (items, acc) = match self.node(id) {
                            Some(Value::Tuple(items)) => (items, Acc::Tuple(TupleHash::new())),
                            Some(Value::FrozenSet(items)) => {
                                (items, Acc::Set(FrozenSetHash::new()))
                            }
                            _ => return Err(Unhashable),
                        };
                        stack.push(Frame {
                            id,
                            items,
                            next: 0,
                            acc,
                        });
                    }
                }
            }
            let Some(top) = stack.last_mut() else {
                return Err(Unhashable);
            };
            if let Some(&child) = top.items.get(top.next) {
                top.next += 1;
                pending = Some(child);
                continue;
            }
            // Frame complete.
            let Some(frame) = stack.pop() else {
                return Err(Unhashable);
            };
            let h = frame.acc.finish();
            done.insert(frame.id, h);
            self.remember(frame.id, h);
            match stack.last_mut() {
                Some(f) => f.acc.add(h),
                None => return Ok(h),
            }
        }
    }

    /// The hash of the tuple or frozenset `v` of at most [`SMALL_TUPLE`] `items`, none of them
    /// a tuple or frozenset (the commonest keys, `(i, j)`, `(i, 'name')`): the walk's hash of
    /// it, without the walk's tables, and not kept (it costs at most `SMALL_TUPLE` scalar
    /// hashes, less than keeping it). `None` when there are more items, or one is a tuple or
    /// frozenset (after hashing some of the items: at most `SMALL_TUPLE` hashes lost).
    #[inline]
    fn hash_flat(
        &self,
        id: NodeId,
        v: Value<'_>,
        items: &[NodeId],
    ) -> Result<Option<u64>, Unhashable> {
        if items.len() > SMALL_TUPLE {
            return Ok(None);
        }
        let tuple = matches!(v, Value::Tuple(_));
        let mut acc = if tuple {
            Acc::Tuple(TupleHash::new())
        } else {
            Acc::Set(FrozenSetHash::new())
        };
        let mut old = OldTupleHash::new(items.len());
        for &item in items {
            // An int held in its id (most items of such keys) hashes from the id.
            let h = match held_int(item) {
                Some(i) => int_hash(i),
                None => {
                    let item = self.resolve(item)?;
                    let Some(h) = self.hash_scalar(item)? else {
                        return Ok(None);
                    };
                    h
                }
            };
            acc.add(h);
            old.lane(h);
        }
        if tuple {
            self.keep_old(id, old.finish());
        }
        Ok(Some(acc.finish()))
    }

    /// Keeps `old`, the hash under CPython 3.7 and before of the flat tuple `id`, as the last
    /// one hashed ([`KeyOps::old_hash_of`]).
    #[inline]
    pub(crate) fn keep_old(&self, id: NodeId, old: u64) {
        if let Some(Ok(mut c)) = self.cache.map(RefCell::try_borrow_mut) {
            c.last_old = Some((id, old));
        }
    }

    /// The hash under CPython 3.7 and before of the flat tuple `id`, when it is the last
    /// tuple [`KeyOps::hash`] hashed without a walk (else `None`: the model works it out).
    pub(crate) fn old_hash_of(&self, id: NodeId) -> Option<u64> {
        self.cache?
            .try_borrow()
            .ok()?
            .last_old
            .filter(|&(i, _)| i == id)
            .map(|(_, h)| h)
    }

    /// The hash of a text's or bytes value's bytes after the tag byte, kept in the cache when
    /// the value is long.
    fn hash_bytes(&self, id: NodeId, tag: u8, bytes: &[u8]) -> u64 {
        self.hash_kept(id, bytes.len() >= CACHED_TEXT_BYTES, || {
            let mut h = self.state.build_hasher();
            h.write_u8(tag);
            h.write(bytes);
            h.finish()
        })
    }

    /// [`KeyOps::hash_bytes`] of a bytes value, however it is held: the same hash for the
    /// same bytes (the hasher is fed the bytes in pieces, which hash as the whole).
    fn hash_py_bytes(&self, id: NodeId, bytes: PyBytes<'_>) -> u64 {
        if let Some(b) = bytes.as_slice() {
            return self.hash_bytes(id, 6, b);
        }
        self.hash_kept(id, bytes.len() >= CACHED_TEXT_BYTES, || {
            let mut h = self.state.build_hasher();
            h.write_u8(6);
            bytes.for_each_chunk(|piece| h.write(piece));
            h.finish()
        })
    }

    /// `hash()`, read from the cache and kept there when `keep` (a value whose hash costs
    /// more than the lookup).
    fn hash_kept(&self, id: NodeId, keep: bool, hash: impl FnOnce() -> u64) -> u64 {
        if let Some(h) = keep.then(|| self.cached(id)).flatten() {
            return h;
        }
        let h = hash();
        if keep {
            self.remember(id, h);
        }
        h
    }

    /// A hash by identity (a record, a NaN): keyed SipHash of the tag and the node's id.
    fn identity_hash(&self, tag: u8, id: NodeId) -> u64 {
        let mut h = self.state.build_hasher();
        h.write_u8(tag);
        h.write_u32(id.0);
        h.finish()
    }

    /// `Some(hash)` for a scalar, `None` for a tuple or frozenset (walked by the caller).
    pub(crate) fn hash_scalar(&self, id: NodeId) -> Result<Option<u64>, Unhashable> {
        match self.node(id).ok_or(Unhashable)? {
            Value::Tuple(_) | Value::FrozenSet(_) => Ok(None),
            v => self.hash_view(id, v).map(Some),
        }
    }

    /// The hash of the scalar `id` from its view `v` (`Unhashable` for a tuple or frozenset,
    /// which [`KeyOps::hash`] walks): CPython's for None, numbers (a NaN, equal only to
    /// itself, by identity, as CPython 3.10+ hashes it: `_Py_HashDouble(inst, v)`, bpo-43475);
    /// keyed SipHash of the content for texts and bytes (CPython's is keyed too), of the name
    /// for a global, of the value for a date, by identity for a record.
    fn hash_view(&self, id: NodeId, v: Value<'_>) -> Result<u64, Unhashable> {
        Ok(match v {
            Value::None => HASH_NONE,
            Value::Bool(b) => u64::from(b),
            Value::Int(i) => int_hash(i),
            Value::BigInt(b) => {
                // Kept like a long text's: up to 4 KiB of digits hashed once, not once per
                // comparison. One of at most `SHORT_BIG_INT_DIGITS` 64-bit digits hashes
                // faster than the lookup, and is not kept.
                let keep = b.iter_u64_digits().len() > SHORT_BIG_INT_DIGITS;
                self.hash_kept(id, keep, || bigint_hash(b))
            }
            Value::Float(x) => match float_hash(x) {
                Some(h) => h,
                None => self.identity_hash(9, id),
            },
            Value::Complex(re, im) => match complex_hash(re, im) {
                Some(h) => h,
                None => self.identity_hash(9, id),
            },
            Value::Str(s) => self.hash_bytes(id, 5, s.as_bytes()),
            Value::Bytes(b) => self.hash_py_bytes(id, b),
            Value::Global(g) => {
                let mut h = self.state.build_hasher();
                h.write_u8(7);
                let (module, name) = g.python3_name();
                module.hash(&mut h);
                name.hash(&mut h);
                h.finish()
            }
            Value::Object(o) => match o.key {
                RecordKey::Identity => self.identity_hash(8, id),
                // Every caller resolves first (`KeyOps::resolve`), so a first-argument record
                // is not met here; were it, it would be refused, not hashed as itself.
                RecordKey::Unhashable | RecordKey::FirstArgument => return Err(Unhashable),
                RecordKey::OnePerFirstArgument => return self.hash_one_per_argument(o),
                RecordKey::Datetime => {
                    let mut h = self.state.build_hasher();
                    h.write_u8(13);
                    key_of(self.arena, o).ok_or(Unhashable)?.hash(&mut h);
                    h.finish()
                }
            },
            _ => return Err(Unhashable),
        })
    }

    /// `Ok` when the value is hashable (a type test for scalars, the full walk, a hash, only
    /// for tuples and frozensets), with the hash of `id` when comparing by hash first pays for
    /// itself: a tuple, a frozenset, a big int, or a text or bytes of at least
    /// [`CACHED_TEXT_BYTES`]. That hash is computed once and kept (so [`KeyOps::eq_hashed`]
    /// finds it for a key inserted before). `None` for other hashable values, which compare
    /// as fast as their hash looks up.
    #[inline]
    pub(crate) fn hashable_costly(&self, id: NodeId) -> Result<Option<u64>, Unhashable> {
        // The commonest keys from their node, without a view: a short text, an int or float,
        // a shared value (None, a bool, an int held in its id).
        match self.arena.node(id) {
            Some(Node::Str { len, .. }) if (len as usize) < CACHED_TEXT_BYTES => return Ok(None),
            Some(Node::Int(_) | Node::Float(_)) => return Ok(None),
            None if id.is_shared() => return Ok(None),
            _ => {}
        }
        let id = self.resolve(id)?;
        match self.node(id) {
            Some(Value::Str(s)) => {
                let b = s.as_bytes();
                Ok((b.len() >= CACHED_TEXT_BYTES).then(|| self.hash_bytes(id, 5, b)))
            }
            Some(Value::Bytes(b)) => {
                Ok((b.len() >= CACHED_TEXT_BYTES).then(|| self.hash_py_bytes(id, b)))
            }
            // A big int is compared by its kept hash first too: unequal ones of up to 4 KiB
            // then cost no digit comparison, as in CPython's dict and set lookups.
            Some(Value::BigInt(_)) => self.hash(id).map(Some),
            Some(
                Value::None
                | Value::Bool(_)
                | Value::Int(_)
                | Value::Float(_)
                | Value::Complex(..)
                | Value::Global(_),
            ) => Ok(None),
            Some(Value::Object(o)) => match o.key {
                RecordKey::Identity => Ok(None),
                // Resolved above: not met here.
                RecordKey::Unhashable | RecordKey::FirstArgument => Err(Unhashable),
                RecordKey::OnePerFirstArgument => self.hash_one_per_argument(o).map(|_| None),
                RecordKey::Datetime => key_of(self.arena, o).map(|_| None).ok_or(Unhashable),
            },
            Some(Value::Tuple(_) | Value::FrozenSet(_)) => self.hash(id).map(Some),
            _ => Err(Unhashable),
        }
    }

    /// [`KeyOps::eq`], where `ha` is `a`'s [`KeyOps::hashable_costly`]: when `b` has a kept hash
    /// too and the two differ, they are unequal without a comparison (equal values hash
    /// alike), as CPython's dict and set lookups compare hashes before `==`.
    #[inline(always)]
    pub(crate) fn eq_hashed(&self, a: NodeId, ha: Option<u64>, b: NodeId) -> bool {
        match ha {
            None => self.eq(a, b),
            Some(ha) => a == b || (self.cached(b).is_none_or(|hb| hb == ha) && self.eq(a, b)),
        }
    }

    /// Python `a == b` for two hashable values (both already hashed successfully). Inlined
    /// into the insertion loops, whose fast paths (equal ids, short texts) it mostly is.
    #[inline(always)]
    pub(crate) fn eq(&self, a: NodeId, b: NodeId) -> bool {
        if a == b {
            return true;
        }
        // Fast paths for the common keys, from their nodes (no view); everything else walks.
        match (self.arena.node(a), self.arena.node(b)) {
            (Some(Node::Str { start: p, len: m }), Some(Node::Str { start: q, len: n })) => {
                m == n && self.bytes_eq(a, b, self.arena.text(p, m), self.arena.text(q, n))
            }
            (Some(Node::Int(x)), Some(Node::Int(y))) => x == y,
            // Shared values: None, the bools and the ints of 31 bits. Two distinct ones are
            // equal only as a bool and an int (`True == 1`).
            (None, None) => match (self.node(a), self.node(b)) {
                (Some(Value::Int(x)), Some(Value::Int(y))) => x == y,
                _ => self.eq_other(a, b),
            },
            // A shared value and a text, or an int node (never of 31 bits, so never 0 or 1).
            (Some(Node::Str { .. } | Node::Int(_)), None)
            | (None, Some(Node::Str { .. } | Node::Int(_))) => false,
            _ => self.eq_other(a, b),
        }
    }

    /// The position of `key` (with index hash `h`, `index.rs`) among the keys of `index`
    /// (`key_at` gives the key at a position), or, when it is not there, its insertion at
    /// position `new` (where the caller appends it) in the same probe of the index (`None`);
    /// and, when `count`, how many keys of the index share `h`, `key`'s equal among them
    /// (the probe then goes past an equal key to count them all, and ends where an
    /// insertion's would); 0 when not `count`.
    #[inline]
    pub(crate) fn find_or_insert(
        &self,
        index: &mut KeyIndex,
        (h, count): (u64, bool),
        key: NodeId,
        new: u32,
        key_at: impl Fn(u32) -> Option<NodeId>,
    ) -> (Option<u32>, u32) {
        use hashbrown::hash_table::Entry;
        if !count {
            let eq = |&(eh, pos): &(u64, u32)| {
                eh == h && key_at(pos).is_some_and(|other| self.eq(key, other))
            };
            return match index.entry(h, eq, |&(eh, _)| eh) {
                Entry::Occupied(e) => (Some(e.get().1), 0),
                Entry::Vacant(e) => {
                    e.insert((h, new));
                    (None, 0)
                }
            };
        }
        let (mut same, mut found) = (0u32, None);
        let entry = index.entry(
            h,
            |&(eh, pos): &(u64, u32)| {
                if eh == h {
                    same = same.saturating_add(1);
                    if found.is_none() && key_at(pos).is_some_and(|other| self.eq(key, other)) {
                        found = Some(pos);
                    }
                }
                false
            },
            |&(eh, _)| eh,
        );
        if let (None, Entry::Vacant(e)) = (found, entry) {
            e.insert((h, new));
        }
        (found, same)
    }
}

/// Adds `(h, pos)` to an index (`h` the key's index hash, `index.rs`; the key is known to
/// be absent).
pub(crate) fn index_insert(index: &mut KeyIndex, h: u64, pos: u32) {
    index.insert_unique(h, (h, pos), |&(eh, _)| eh);
}

#[cfg(test)]
mod tests;
