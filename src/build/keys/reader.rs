//! The work the reader after picklewarden does with dict keys and set items.
//!
//! An accepted document is built again by someone else: CPython's `pickle.loads` behind a
//! sidecar's verdict, a Mitogen parent behind `guard`, the Python objects of the Python
//! package. picklewarden's own hashing caches every tuple's hash, and its tables hash keys by a
//! keyed content hash (`content.rs`), so its own work is linear whatever keys the peer chose.
//! The keys' CPython hashes (`super::KeyOps::hash`, from `pyhash.rs`) are what this model
//! counts and bounds, because CPython's work is not linear:
//!
//! - CPython does not cache a tuple's hash (`Objects/tupleobject.c` `tuplehash`), so a key
//!   that is a DAG of tuples (`t1 = (t0, t0, t0)`, `t2 = (t1, t1, t1)`, ...) costs its
//!   *unfolded* size at every insertion: 40 levels in 130 bytes are 3**40 item hashes;
//! - ints, floats, complex numbers, `None`, bools and tuples and frozensets of them hash
//!   deterministically (no `PYTHONHASHSEED`), so keys that share one hash value can be chosen
//!   (`k * (2**61 - 1)` all hash to 0), and a dict or set of n of them costs n**2 comparisons;
//! - a key equal to one already in the container but another object is compared item by item
//!   (`tuplerichcompare`) at every insertion.
//!
//! This module models that work in **steps** and the build refuses a document whose model
//! passes the limits [`Limits::max_key_steps`] (one insertion), [`Limits::max_key_steps_per_byte`]
//! (the document) and [`Limits::max_key_collisions`] (keys of one container sharing one CPython
//! hash value).
//!
//! ## The model
//! The *size* of a value, as CPython's `==` walks it: 1 for a scalar, a big int's count of
//! 30-bit digits (`longobject.c` works digit by digit), 1 plus the items' sizes for a tuple or
//! a frozenset (unfolded: a value reached twice counts twice, saturating at `u64::MAX`). Its
//! *hash size*, as `hash` walks it: the same, but 1 for a frozenset inside a tuple (CPython
//! keeps a frozenset's hash). One insertion (SETITEM/SETITEMS on a dict, ADDITEMS, FROZENSET,
//! `set()`/`frozenset()`) costs, for its key:
//! - the hash: the hash size of a tuple or big int; of a frozenset, 1 plus its length the
//!   first time it is hashed (from the hashes its table keeps), 0 after (one of at most 16
//!   items is counted every time, which needs no table); 0 for anything else
//!   (str and bytes keep their hash; the first hash of each is linear in bytes the input or
//!   `max_alloc_bytes` already pays for; other scalars are constant);
//! - the comparisons: one per key of the container that CPython would compare it with, each
//!   costing the key's size: every key already there with the same CPython hash value, for
//!   keys whose hash is deterministic; else one, if a key equal to it but not the same object
//!   is there.
//!
//! Keys that are ints from -2**30 to 2**30 - 1, texts and bytes are counted as cost 0 (but a text
//! or bytes that meets an equal key which is another object, as the memo can hand one again and
//! again, costs its length: one step per 256 bytes, as CPython compares the two whole; so does a
//! text inside a tuple) and are not tracked for collisions (their hashes are unique among
//! themselves, or randomized; a text *inside* a tuple or frozenset is hashed with the build's keyed
//! hash, as CPython's is keyed but one for the process, so that `(k * (2**61 - 1), 'x')` for every
//! k collide here as there): inserted from the stack, each needs at least one input byte per
//! insertion, so they add at most one constant step a byte, and at most two members (`''`, `b''`
//! and one such int) to a class of colliding keys. A `set()` or `frozenset()` call inserts the
//! items of a list that the memo may hand it again and again: it adds one step per item
//! ([`ReaderKeys::add`]).
//!
//! CPython's hash functions are those of CPython 3.12 and later (`Python/pyhash.c`,
//! `Objects/longobject.c`, `floatobject.c`, `complexobject.c`, `tupleobject.c` (xxHash-based,
//! 3.8+), `setobject.c`; `hash(None)` is the constant `0xFCA86420` from 3.12). Tuples (and the
//! frozensets holding them) are counted a second time under the tuple hash of CPython 3.7 and
//! before ([`OldTupleHash`]), which a Mitogen parent on CPython 3.6 uses and whose collisions
//! are easy to choose; the other hashes are the same in CPython 3.6 to 3.13. Not seen:
//! collisions chosen against `hash(None)` before 3.12 (its address), and against CPython
//! 2.7's hashes of big ints, floats and frozensets.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use super::mix::MixState;
#[cfg(test)]
use super::pyhash::HASH_NONE;
use super::pyhash::{
    bigint_hash, complex_hash, float_hash, frozenset_hash, int_hash, OldTupleHash, TupleHash,
};
use super::KeyOps;
use crate::limits::{LimitName, Limits};
use crate::value::{Fat, Node, NodeId, Value};

mod shape;
pub(crate) use shape::text_size;
use shape::{
    flat_size, flat_size_chosen, leaf_shape, run_of, small_shape, SMALL_KEY_SIZE, SMALL_TUPLE,
};

/// What the bookkeeping of one remembered value or one class of keys is charged
/// (`max_alloc_bytes`): a hash-table entry and its share of the table.
pub(crate) const ENTRY_BYTES: u64 = 32;

/// What the model knows of one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Its size (module docs), saturating.
    pub(crate) size: u64,
    /// Its hash size (module docs), saturating.
    pub(crate) hash_size: u64,
    /// CPython's hash of it, when that is deterministic.
    pub(crate) hash: Option<u64>,
    /// Its hash under CPython 3.7 and before ([`OldTupleHash`] for tuples, and so for
    /// frozensets holding them; the others' are `hash`), when that is deterministic.
    pub(crate) old_hash: Option<u64>,
}

/// A refusal of the model: the limit and the value seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) limit: LimitName,
    pub(crate) seen: u64,
}

/// The running state of the model for one decode.
#[derive(Debug, Default)]
pub(crate) struct ReaderKeys {
    /// Shapes of the tuples, frozensets and big ints met, by node (each is walked once).
    shapes: HashMap<NodeId, Shape, MixState>,
    /// Frozensets CPython has hashed (and so keeps the hash of).
    hashed: HashSet<NodeId, MixState>,
    /// Distinct tracked keys per (container, CPython hash value), for the pairs met more than
    /// once ([`ReaderKeys::seen`] holds the others).
    classes: HashMap<(u64, u64), u32, MixState>,
    /// A Bloom filter (two bits a pair) of the (container, CPython hash value) pairs of keys of
    /// at most [`SMALL_KEY_SIZE`] met: a pair not in it is met for the first time, and needs no
    /// entry in `classes` (most keys never share a hash: a table entry for each cost more than
    /// the rest of the model). A false positive counts one key more for its pair (one comparison
    /// of at most `SMALL_KEY_SIZE` steps too many). A larger key's pairs are all in `classes`,
    /// so its comparisons are counted exactly; a class mixing both may count one small key
    /// fewer (one comparison of at most `SMALL_KEY_SIZE` steps). Two bits per input byte (at
    /// least 2**12 bits, 512 bytes, so that a tiny input does not zero a table sized for a
    /// large one: the 9 keys of a small input meet a false positive in about one decode of
    /// 2,000, which counts one comparison too many), made at the first small tracked key.
    seen: Vec<u64>,
    /// The seed of the filter's and the tables' hashing, drawn at the first insertion or
    /// shape the model is asked for ([`ReaderKeys::seed`]): a decode that inserts no key
    /// does not pay for drawing it.
    mix: MixState,
    /// Whether `mix` and the tables' hashers were drawn.
    seeded: bool,
    /// Steps of the whole document so far.
    total: u64,
    /// Bytes of the tables above not yet charged to `max_alloc_bytes`.
    pub(crate) uncharged: u64,
    /// Containers made by a call (`set()`, FROZENSET) before they have a node.
    fresh: u64,
}

/// One insertion's key, for [`ReaderKeys::insert`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Key {
    /// The key inserted.
    pub(crate) k: NodeId,
    /// The key already there that `k` equals, if any (the same node or another).
    pub(crate) equal: Option<NodeId>,
    /// `k`'s [`KeyOps::hash`], when the caller has it.
    pub(crate) hash: Option<u64>,
    /// How many keys of the container share `hash`, when the caller counted them (the
    /// build's index keyed by CPython's hash: `index.rs`); the model's classes then are not
    /// asked, nor kept, for this container.
    pub(crate) same: Option<u32>,
}

/// The container an insertion goes into, as the model names it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Container(u64);

impl Container {
    /// A dict or set that has a node.
    pub(crate) fn node(id: NodeId) -> Container {
        Container(u64::from(id.0))
    }
}

/// Whether the key `k` is of a kind the model counts (module docs): a tuple, frozenset, an int
/// outside the shared range, a float or a complex number, or a record (resolved to what it is
/// compared as). The commonest keys, short texts and shared ints, answer from their node.
#[inline]
pub(crate) fn counted(node: Option<Node>, k: NodeId) -> bool {
    match node {
        Some(
            Node::Str { .. } | Node::Surrogates { .. } | Node::Bytes { .. } | Node::Latin1 { .. },
        ) => false,
        None => !k.is_shared(),
        Some(_) => true,
    }
}

impl ReaderKeys {
    /// Draws the seed of the tables and the filter before their first use (they are empty
    /// until then, so nothing was hashed with the unseeded state).
    #[inline]
    fn seed(&mut self) {
        if !self.seeded {
            self.draw_seed();
        }
    }

    #[cold]
    #[inline(never)]
    fn draw_seed(&mut self) {
        let mix = MixState::random();
        self.shapes = HashMap::with_hasher(mix.clone());
        self.hashed = HashSet::with_hasher(mix.clone());
        self.classes = HashMap::with_hasher(mix.clone());
        self.mix = mix;
        self.seeded = true;
    }

    /// Whether the (container, CPython hash) pair `key` is met for the first time (then it is
    /// marked as met), by [`ReaderKeys::seen`]: `false` may be a false positive.
    fn first_time(&mut self, input_len: u64, key: (u64, u64)) -> bool {
        if self.seen.is_empty() {
            let bits = input_len.saturating_mul(2).max(1 << 12).next_power_of_two();
            // A power of two (the word is picked by a mask).
            let words = usize::try_from(bits / 64).unwrap_or(1 << 10);
            if self.seen.try_reserve_exact(words).is_err() {
                // No filter: every pair is taken as met before, so that every pair goes to
                // the table (counting one key more for each, never fewer).
                return false;
            }
            // Not charged to `max_alloc_bytes`: a quarter of the input's length at most (the
            // docs/limits.md, "Peak memory", counts it with the input).
            self.seen.resize(words, 0);
        }
        use std::hash::BuildHasher;
        let h = self.mix.hash_one(key);
        // Two bits per pair, in one word (one cache line touched): a false positive needs
        // both set by other pairs.
        let at = h as usize & (self.seen.len() - 1);
        let mask = (1u64 << ((h >> 40) & 63)) | (1u64 << ((h >> 46) & 63));
        let Some(word) = self.seen.get_mut(at) else {
            return true;
        };
        let first = *word & mask != mask;
        *word |= mask;
        first
    }

    /// A name for a container made by a call, before its node exists.
    pub(crate) fn fresh_container(&mut self) -> Container {
        self.fresh += 1;
        Container((1 << 32) | self.fresh)
    }

    /// The shape of `id`, walked with an explicit stack; the shapes of tuples, frozensets
    /// and big ints are kept, so every node is walked once per decode.
    pub(crate) fn shape<S: std::hash::BuildHasher>(
        &mut self,
        ops: &KeyOps<'_, '_, S>,
        id: NodeId,
    ) -> Shape {
        struct Frame<'v> {
            id: NodeId,
            items: &'v [NodeId],
            next: usize,
            tuple: bool,
            size: u64,
            hash_size: u64,
            th: TupleHash,
            hashes: Vec<u64>,
            deterministic: bool,
            old: OldTupleHash,
            old_hashes: Vec<u64>,
            old_deterministic: bool,
        }
        let root = ops.resolve(id).unwrap_or(id);
        if let Some(s) = small_shape(ops, root) {
            return s;
        }
        self.seed();
        let leaf = |this: &Self, id: NodeId| match this.shapes.get(&id) {
            Some(s) => Ok(*s),
            None => leaf_shape(ops, id),
        };
        let mut stack: Vec<Frame<'_>> = Vec::new();
        let mut pending = Some(root);
        loop {
            if let Some(id) = pending.take() {
                let id = ops.resolve(id).unwrap_or(id);
                match leaf(self, id) {
                    Ok(s) => match stack.last_mut() {
                        Some(f) => feed(f, s),
                        None => return s,
                    },
                    Err((items, tuple)) => stack.push(Frame {
                        id,
                        items,
                        next: 0,
                        tuple,
                        size: 1,
                        hash_size: 1,
                        th: TupleHash::new(),
                        hashes: Vec::new(),
                        deterministic: true,
                        old: OldTupleHash::new(items.len()),
                        old_hashes: Vec::new(),
                        old_deterministic: true,
                    }),
                }
            }
            let Some(top) = stack.last_mut() else {
                return Shape {
                    size: 1,
                    hash_size: 1,
                    hash: None,
                    old_hash: None,
                };
            };
            if let Some(&child) = top.items.get(top.next) {
                top.next += 1;
                pending = Some(child);
                continue;
            }
            let Some(f) = stack.pop() else {
                continue;
            };
            let s = if f.tuple {
                Shape {
                    size: f.size,
                    hash_size: f.hash_size,
                    hash: f.deterministic.then(|| f.th.finish()),
                    old_hash: f.old_deterministic.then(|| f.old.finish()),
                }
            } else {
                Shape {
                    size: f.size,
                    hash_size: 1,
                    hash: f
                        .deterministic
                        .then(|| frozenset_hash(f.hashes.iter().copied())),
                    old_hash: f
                        .old_deterministic
                        .then(|| frozenset_hash(f.old_hashes.iter().copied())),
                }
            };
            self.keep(f.id, s);
            match stack.last_mut() {
                Some(parent) => feed(parent, s),
                None => return s,
            }
        }

        fn feed(f: &mut Frame<'_>, s: Shape) {
            f.size = f.size.saturating_add(s.size);
            f.hash_size = f.hash_size.saturating_add(s.hash_size);
            match s.hash {
                Some(h) if f.deterministic => {
                    if f.tuple {
                        f.th.lane(h);
                    } else {
                        f.hashes.push(h);
                    }
                }
                _ => f.deterministic = false,
            }
            match s.old_hash {
                Some(h) if f.old_deterministic => {
                    if f.tuple {
                        f.old.lane(h);
                    } else {
                        f.old_hashes.push(h);
                    }
                }
                _ => f.old_deterministic = false,
            }
        }
    }

    fn keep(&mut self, id: NodeId, s: Shape) {
        if self.shapes.try_reserve(1).is_ok() && self.shapes.insert(id, s).is_none() {
            self.uncharged += ENTRY_BYTES;
        }
    }

    /// Models one insertion of the key `k` into `container` ([`Key`]: `equal` is the key
    /// already there that `k` equals, if any; `hash`, `k`'s [`KeyOps::hash`] when the caller
    /// has it (the model's hash of a flat tuple or frozenset, or of a big int, is that hash; a
    /// flat tuple's hash under CPython 3.7 is the one [`KeyOps::hash`] or the index's hash kept,
    /// else the walk works both out). Refuses when the insertion passes `max_key_steps` or
    /// `max_key_collisions`, or the document passes `max_key_steps_per_byte` for an input of
    /// `input_len` bytes.
    pub(crate) fn insert<S: std::hash::BuildHasher>(
        &mut self,
        ops: &KeyOps<'_, '_, S>,
        limits: &Limits,
        input_len: u64,
        container: Container,
        Key {
            k,
            equal,
            hash: known,
            same,
        }: Key,
    ) -> Result<(), Refusal> {
        let k = ops.resolve(k).unwrap_or(k);
        let equal = equal.map(|e| ops.resolve(e).unwrap_or(e));
        // A tuple's or frozenset's hash under CPython 3.7 and before, when it may differ from
        // `hash` (from an item that is a tuple or `None`); `None` when it is not deterministic.
        let mut old_hash = None;
        let (hash_steps, size, hash, tracked) = match ops.arena.node(k) {
            // The commonest counted scalars from their node, without a view: an int node is
            // never one held in an id (so it is tracked).
            Some(Node::Int(w)) => (
                0,
                1,
                Some(known.unwrap_or_else(|| int_hash(w.get_i64()))),
                true,
            ),
            Some(Node::Float(w)) => (0, 1, known.or_else(|| float_hash(w.get_f64())), true),
            // A flat tuple whose hash the caller has, counted without a view: with fewer than
            // two items whose CPython hash the peer can choose ([`flat_size_chosen`]: no collision
            // under the old tuple hash can be chosen there) by its hash alone, else with the
            // old hash `KeyOps::hash` kept for it; others as [`ReaderKeys::insert_shape`]
            // counts them.
            Some(Node::Tuple { start, len }) if known.is_some() => {
                match flat_size_chosen(ops, run_of(ops, start, len)) {
                    Some((size, chosen)) if chosen < 2 => (size, size, known, true),
                    Some((size, _)) => match ops.old_hash_of(k) {
                        Some(old) => {
                            old_hash = Some(old);
                            (size, size, known, true)
                        }
                        None => self.insert_shape(ops, k, known, &mut old_hash),
                    },
                    None => self.insert_shape(ops, k, known, &mut old_hash),
                }
            }
            // A flat frozenset (items of one step, none a tuple): its hash is the same under
            // every CPython 3, so the old hash is `known` too.
            Some(Node::FrozenSet { start, len }) if known.is_some() => {
                match flat_size(ops, run_of(ops, start, len)) {
                    Some(size) => {
                        old_hash = known;
                        (1 + u64::from(len), size, known, len > 0)
                    }
                    None => self.insert_shape(ops, k, known, &mut old_hash),
                }
            }
            Some(Node::Fat(i)) => match ops.arena.fat.get(i as usize) {
                Some(Fat::BigInt(b)) => {
                    let digits = b.bits().div_ceil(30).max(1);
                    let h = known.unwrap_or_else(|| bigint_hash(b));
                    (digits, digits, Some(h), true)
                }
                _ => self.insert_shape(ops, k, known, &mut old_hash),
            },
            _ => self.insert_shape(ops, k, known, &mut old_hash),
        };
        let mut compares = u64::from(equal.is_some_and(|e| e != k));
        if tracked {
            let small = size <= SMALL_KEY_SIZE;
            let fresh = equal.is_none();
            match (hash, same) {
                // Counted by the index (exactly: every key there that shares the hash).
                (Some(_), Some(count)) => {
                    compares = u64::from(count).max(compares);
                    let now = count.saturating_add(1);
                    if fresh && u64::from(now) > limits.max_key_collisions {
                        return Err(Refusal {
                            limit: LimitName::MaxKeyCollisions,
                            seen: u64::from(now),
                        });
                    }
                }
                (Some(h), None) => {
                    let count =
                        self.class(limits, input_len, (container.0, h), small, fresh, true)?;
                    compares = u64::from(count).max(compares);
                }
                (None, _) => {}
            }
            // The same keys as CPython 3.6 and 3.7 (and 2.7) hash tuples, in a class space of
            // their own (the container's name with its top bit set): a Mitogen parent on an
            // older CPython compares what collides there. That hash collides on plain data too
            // (the 64,000 points of `range(-20, 20)` cubed share hashes 13 at a time: why
            // CPython 3.8 replaced it), so a class there is not held to `max_key_collisions`:
            // its comparisons are counted, and `max_key_steps_per_byte` keeps the reader's
            // work linear in the input. A class there counts tuples and frozensets only, not
            // scalars that collide with them (counted under the new hash). The build's index
            // counts the new hash only, so this class space is the model's in every case.
            if let Some(h) = old_hash {
                let key = (container.0 | 1 << 63, h);
                let count = self.class(limits, input_len, key, small, fresh, false)?;
                compares = u64::from(count).max(compares);
            }
        }
        let steps = hash_steps.saturating_add(compares.saturating_mul(size));
        if steps > limits.max_key_steps {
            return Err(Refusal {
                limit: LimitName::MaxKeySteps,
                seen: steps,
            });
        }
        self.add(steps, limits, input_len)
    }

    /// Hash steps, size, CPython hash and whether tracked, of a key `k` (resolved) that is not
    /// an int or float node ([`ReaderKeys::insert`]); sets `old_hash` to its hash under CPython
    /// 3.7 and before where that is counted (tuples and frozensets).
    fn insert_shape<S: std::hash::BuildHasher>(
        &mut self,
        ops: &KeyOps<'_, '_, S>,
        k: NodeId,
        known: Option<u64>,
        old_hash: &mut Option<u64>,
    ) -> (u64, u64, Option<u64>, bool) {
        match ops.arena.get(k) {
            // A tuple or frozenset whose walk found no deterministic hash (one holding a NaN,
            // which CPython hashes by address) is tracked by the caller's hash, if any: the
            // stand-in of a NaN is by node, so keys that hold the same NaN share it, as they
            // share CPython's (and the build's index keys them by it: `index.rs`).
            Some(Value::Tuple(items)) => {
                // A flat tuple's shape is `known`; its old hash is the one `KeyOps::hash`
                // worked out with `known`, and is not counted with fewer than two items whose
                // CPython hash is deterministic ([`flat_size_chosen`]).
                let flat = match (known, flat_size_chosen(ops, items)) {
                    (Some(hash), Some((size, chosen))) if chosen < 2 => Some((hash, size, None)),
                    (Some(hash), Some((size, _))) => {
                        ops.old_hash_of(k).map(|old| (hash, size, Some(old)))
                    }
                    _ => None,
                };
                match flat {
                    Some((hash, size, old)) => {
                        *old_hash = old;
                        (size, size, Some(hash), true)
                    }
                    None => {
                        let s = self.shape(ops, k);
                        *old_hash = s.old_hash;
                        (s.hash_size, s.size, s.hash.or(known), true)
                    }
                }
            }
            Some(Value::BigInt(b)) => {
                let digits = b.bits().div_ceil(30).max(1);
                let h = known.unwrap_or_else(|| bigint_hash(b));
                (digits, digits, Some(h), true)
            }
            Some(Value::FrozenSet(items)) => {
                let s = match (known, flat_size(ops, items)) {
                    // Items of one step, none a tuple: the hash is the same under every
                    // CPython 3.
                    (Some(hash), Some(size)) => Shape {
                        size,
                        hash_size: size,
                        hash: Some(hash),
                        old_hash: Some(hash),
                    },
                    _ => self.shape(ops, k),
                };
                *old_hash = s.old_hash;
                self.seed();
                // A small frozenset is counted as hashed afresh each time (at most
                // SMALL_TUPLE + 1 steps more than CPython, which keeps its hash); a larger
                // one only the first time.
                let first = items.len() <= SMALL_TUPLE
                    || (self.hashed.try_reserve(1).is_ok() && self.hashed.insert(k));
                if first && items.len() > SMALL_TUPLE {
                    self.uncharged += ENTRY_BYTES;
                }
                let hash_steps = if first {
                    1u64.saturating_add(items.len() as u64)
                } else {
                    0
                };
                (hash_steps, s.size, s.hash.or(known), !items.is_empty())
            }
            Some(Value::Int(i)) => (
                0,
                1,
                Some(known.unwrap_or_else(|| int_hash(i))),
                NodeId::int(i).is_none(),
            ),
            Some(Value::Float(x)) => (0, 1, known.or_else(|| float_hash(x)), true),
            Some(Value::Complex(re, im)) => (0, 1, complex_hash(re, im), true),
            // A record, by the caller's hash when it has one (a record kept one per first
            // argument hashes by that argument's hash, which the peer can make collide).
            Some(Value::Object(_)) => (0, 1, known, known.is_some()),
            // A text or bytes met again as another object equal to a key already there
            // (through the memo): CPython compares the two whole ([`text_size`]).
            Some(Value::Str(t)) => (0, text_size(t.as_bytes().len()), None, false),
            Some(Value::Bytes(b)) => (0, text_size(b.len()), None, false),
            // Singletons and globals: constant (module docs).
            _ => (0, 1, None, false),
        }
    }

    /// Counts a key in the class `key` (a container and a CPython hash value): returns the
    /// keys of the class already there (which CPython compares it with), and, when the key is
    /// `fresh` (no key equal to it is there), adds it, refusing past `max_key_collisions` when
    /// `capped`. `small`: of at most [`SMALL_KEY_SIZE`] (met through the filter).
    fn class(
        &mut self,
        limits: &Limits,
        input_len: u64,
        key: (u64, u64),
        small: bool,
        fresh: bool,
        capped: bool,
    ) -> Result<u32, Refusal> {
        self.seed();
        let count = if !small {
            // Exact: a comparison with this key may cost much.
            self.classes.get(&key).copied().unwrap_or(0)
        } else if self.first_time(input_len, key) {
            0
        } else {
            // Met before: the pair's count, or 1 when only the filter has it.
            self.classes.get(&key).copied().unwrap_or(1)
        };
        if fresh {
            let now = count.saturating_add(1);
            if capped && u64::from(now) > limits.max_key_collisions {
                return Err(Refusal {
                    limit: LimitName::MaxKeyCollisions,
                    seen: u64::from(now),
                });
            }
            if (now > 1 || !small)
                && self.classes.try_reserve(1).is_ok()
                && self.classes.insert(key, now).is_none()
            {
                self.uncharged += ENTRY_BYTES;
            }
        }
        Ok(count)
    }

    /// Adds `steps` to the document's total; refuses past `max_key_steps_per_byte` times
    /// `input_len` (or `max_key_steps`, whichever is more). A `set()` or `frozenset()` call
    /// adds one step per item of its argument, as CPython inserts each again: a call of a few
    /// bytes can name, through the memo, a list of any length, and its keys, cheap one by
    /// one, are not one input byte each.
    pub(crate) fn add(
        &mut self,
        steps: u64,
        limits: &Limits,
        input_len: u64,
    ) -> Result<(), Refusal> {
        self.total = self.total.saturating_add(steps);
        let allowed = limits
            .max_key_steps_per_byte
            .saturating_mul(input_len)
            .max(limits.max_key_steps);
        if self.total > allowed {
            return Err(Refusal {
                limit: LimitName::MaxKeyStepsPerByte,
                seen: self.total.div_ceil(input_len.max(1)),
            });
        }
        Ok(())
    }
}

/// The model as the machine holds it (borrowed through `&self` while keys are compared).
pub(crate) type ReaderCell = RefCell<ReaderKeys>;

#[cfg(test)]
mod tests;
