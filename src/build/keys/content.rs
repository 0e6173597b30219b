//! The content hash of a key: a keyed hash of the value itself (splitmix64 over its canonical
//! words from a random seed per decode, [`MixState`]), so that two distinct values share one
//! only by chance, whatever the peer chose. It is the hash of the build's tables (dict and set
//! indexes): [`KeyOps::hash`] is CPython's hash, whose collisions the peer can choose (as
//! against CPython: the model of `reader.rs` bounds them for the reader after picklewarden,
//! but a caller may lift its limits, and the build's own tables stay linear without it). It
//! also orders the items of two frozensets whose CPython hashes collide, so that
//! `KeyOps::eq_walk` pairs up equal items. Equal values hash alike (numbers reduced to one
//! form, [`num_of`]). Kept in the [`KeyCache`](super::KeyCache)'s own table of content hashes.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};

use super::datetime::key_of;
use super::mix::{Mix, MixState};
use super::num::{hash_num, num_of, Num};
use super::{held_int, KeyOps, Unhashable, CACHED_TEXT_BYTES, SHORT_BIG_INT_DIGITS, SMALL_TUPLE};
use crate::policy::RecordKey;
use crate::value::{Node, NodeId, Object, PyBytes, Value};

/// Feeds the hash `x` of a tuple item that [`KeyOps::content_feed_value`] does not take into
/// the tuple's hasher, tagged.
#[inline]
fn feed_hash<H: Hasher>(hasher: &mut H, x: u64) {
    hasher.write_u8(15);
    hasher.write_u64(x);
}

impl<S: BuildHasher> KeyOps<'_, '_, S> {
    /// A hasher of the content hash: splitmix64 over the words written, from the decode's
    /// seed ([`KeyOps::seed`]).
    #[inline(always)]
    fn content_hasher(&self) -> Mix {
        MixState::keyed(self.seed).build_hasher()
    }

    fn content_cached(&self, id: NodeId) -> Option<u64> {
        self.cache?.try_borrow().ok()?.content.get(&id).copied()
    }

    fn content_remember(&self, id: NodeId, h: u64) {
        // Not reentrant, so the borrow cannot fail; if it did, the hash is only not kept.
        if let Some(Ok(mut c)) = self.cache.map(std::cell::RefCell::try_borrow_mut) {
            // Grown fallibly: short of memory, the hash is only not kept.
            if c.content.try_reserve(1).is_ok() && c.keep() {
                c.content.insert(id, h);
            }
        }
    }

    /// The hash of a [`RecordKey::OnePerFirstArgument`] record: its global's name and its
    /// first argument's hash, which must be a scalar's (else `Unhashable`, so that no walk
    /// goes through records).
    fn content_one_per_argument(&self, o: &Object) -> Result<u64, Unhashable> {
        self.one_per_argument(o, self.content_hasher(), Self::content_scalar)
    }

    /// The content hash of a hashable value, or `Unhashable`.
    pub(crate) fn content_hash(&self, root: NodeId) -> Result<u64, Unhashable> {
        let root = self.resolve(root)?;
        // Fast path: scalars (a tuple or frozenset is an arena node of its own kind).
        if !matches!(
            self.arena.node(root),
            Some(Node::Tuple { .. } | Node::FrozenSet { .. })
        ) {
            if let Some(h) = self.content_scalar(root)? {
                return Ok(h);
            }
        }
        if let Some(h) = self.content_flat(root)? {
            return Ok(h);
        }
        if let Some(h) = self.content_cached(root) {
            return Ok(h);
        }
        // Tuples and frozensets: post-order with an explicit stack of frames.
        // Each tuple or frozenset is hashed once per call (`done`), so a DAG of shared tuples
        // (`t = (t', t')` through DUP or the memo) costs its size, not its unfolded size.
        struct Frame<'v, H> {
            id: NodeId,
            items: &'v [NodeId],
            next: usize,
            tuple: bool,
            hasher: H,
            acc: u64,
        }
        let mut done: HashMap<NodeId, u64> = HashMap::new();
        let mut stack: Vec<Frame<'_, Mix>> = Vec::new();
        let mut pending = Some(root);
        loop {
            if let Some(id) = pending.take() {
                let id = self.resolve(id)?;
                // A number or None inside a tuple: its value, into the tuple's hasher.
                if let Some(f) = stack.last_mut().filter(|f| f.tuple) {
                    if self.content_feed_value(&mut f.hasher, id) {
                        continue;
                    }
                }
                let known = match done.get(&id).copied().or_else(|| self.content_cached(id)) {
                    Some(h) => Some(h),
                    None => self.content_scalar(id)?,
                };
                match known {
                    Some(h) => {
                        // Feed into the parent frame or return.
                        match stack.last_mut() {
                            Some(f) => feed(f.tuple, &mut f.hasher, &mut f.acc, h),
                            None => return Ok(h),
                        }
                    }
                    None => {
                        let (items, tuple) = match self.node(id) {
                            Some(Value::Tuple(items)) => (items, true),
                            Some(Value::FrozenSet(items)) => (items, false),
                            _ => return Err(Unhashable),
                        };
                        let mut hasher = self.content_hasher();
                        hasher.write_u8(if tuple { 10 } else { 11 });
                        hasher.write_usize(items.len());
                        stack.push(Frame {
                            id,
                            items,
                            next: 0,
                            tuple,
                            hasher,
                            acc: 0,
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
            let mut hasher = frame.hasher;
            if !frame.tuple {
                hasher.write_u64(frame.acc);
            }
            let h = hasher.finish();
            done.insert(frame.id, h);
            self.content_remember(frame.id, h);
            match stack.last_mut() {
                Some(f) => feed(f.tuple, &mut f.hasher, &mut f.acc, h),
                None => return Ok(h),
            }
        }

        fn feed<H: Hasher>(tuple: bool, hasher: &mut H, acc: &mut u64, h: u64) {
            if tuple {
                feed_hash(hasher, h);
            } else {
                // Order-independent for frozensets.
                *acc = acc.wrapping_add(h);
            }
        }
    }

    /// Feeds the tuple item `id` (resolved) into its tuple's hasher when it is None or a
    /// number that [`hash_num`] writes in a fixed size (a bool, an int, a float or a complex
    /// number that is no NaN and does not reduce to a big int): its tagged value, so that the
    /// item costs no hasher of its own. `false` for any other item, whose hash the caller
    /// feeds ([`feed_hash`]). Every value equal to a number fed here is one fed here too (the
    /// number kinds reduce to one form, [`num_of`]; one that reduces to a big int is fed by
    /// hash, as big ints are), so equal tuples hash alike; the tag byte first (0 for None, 15
    /// before a hash, the numbers' own from [`hash_num`]) keeps the items' encodings
    /// prefix-free, so that distinct tuples feed distinct bytes.
    fn content_feed_value(&self, h: &mut Mix, id: NodeId) -> bool {
        let v = match self.node(id) {
            Some(Value::None) => {
                h.write_u8(0);
                return true;
            }
            Some(v @ (Value::Bool(_) | Value::Int(_) | Value::Float(_) | Value::Complex(..))) => v,
            _ => return false,
        };
        match num_of(v) {
            Some(n @ (Num::I(_) | Num::F(_) | Num::C(..))) if !n.has_nan() => {
                hash_num(&n, h);
                true
            }
            _ => false,
        }
    }

    /// The hash of a tuple or frozenset of at most [`SMALL_TUPLE`] items, none of them a
    /// tuple or frozenset (the commonest keys, `(i, j)`, `(i, 'name')`): the walk's hash of it
    /// (the same bytes fed to the same hasher), without the walk's tables, and not kept (it
    /// costs at most `SMALL_TUPLE` scalar hashes, less than keeping it). `None` for any other
    /// value, and for such a container holding a tuple or frozenset (after hashing some of its
    /// items: at most `SMALL_TUPLE` hashes lost).
    #[inline]
    fn content_flat(&self, id: NodeId) -> Result<Option<u64>, Unhashable> {
        let (items, tuple) = match self.node(id) {
            Some(Value::Tuple(items)) => (items, true),
            Some(Value::FrozenSet(items)) => (items, false),
            _ => return Ok(None),
        };
        if items.len() > SMALL_TUPLE {
            return Ok(None);
        }
        let mut hasher = self.content_hasher();
        hasher.write_u8(if tuple { 10 } else { 11 });
        hasher.write_usize(items.len());
        let mut acc = 0u64;
        for &item in items {
            // An int held in its id, as `content_feed_value` and `content_scalar` write it
            // (`hash_num` of `Num::I`), from the id.
            if let Some(i) = held_int(item) {
                if tuple {
                    hasher.write_u8(1);
                    hasher.write_u64(i as u64);
                } else {
                    let mut h = self.content_hasher();
                    h.write_u8(1);
                    h.write_u64(i as u64);
                    acc = acc.wrapping_add(h.finish());
                }
                continue;
            }
            let item = self.resolve(item)?;
            if tuple && self.content_feed_value(&mut hasher, item) {
                continue;
            }
            let Some(h) = self.content_scalar(item)? else {
                return Ok(None);
            };
            if tuple {
                feed_hash(&mut hasher, h);
            } else {
                acc = acc.wrapping_add(h);
            }
        }
        if !tuple {
            hasher.write_u64(acc);
        }
        Ok(Some(hasher.finish()))
    }

    /// The hash of a text's or bytes value's bytes after the tag byte, kept in the cache when
    /// the value is long.
    fn content_bytes(&self, id: NodeId, tag: u8, bytes: &[u8]) -> u64 {
        self.content_kept(id, bytes.len() >= CACHED_TEXT_BYTES, || {
            let mut h = self.content_hasher();
            h.write_u8(tag);
            h.write(bytes);
            h.finish()
        })
    }

    /// [`KeyOps::hash_bytes`] of a bytes value, however it is held: the same hash for the
    /// same bytes (the hasher is fed the bytes in pieces, which hash as the whole).
    fn content_py_bytes(&self, id: NodeId, bytes: PyBytes<'_>) -> u64 {
        if let Some(b) = bytes.as_slice() {
            return self.content_bytes(id, 6, b);
        }
        self.content_kept(id, bytes.len() >= CACHED_TEXT_BYTES, || {
            let mut h = self.content_hasher();
            h.write_u8(6);
            bytes.for_each_chunk(|piece| h.write(piece));
            h.finish()
        })
    }

    /// `hash()`, read from the cache and kept there when `keep` (a value whose hash costs
    /// more than the lookup).
    fn content_kept(&self, id: NodeId, keep: bool, hash: impl FnOnce() -> u64) -> u64 {
        if let Some(h) = keep.then(|| self.content_cached(id)).flatten() {
            return h;
        }
        let h = hash();
        if keep {
            self.content_remember(id, h);
        }
        h
    }

    /// `Some(hash)` for a scalar, `None` for a tuple or frozenset (walked by the caller).
    fn content_scalar(&self, id: NodeId) -> Result<Option<u64>, Unhashable> {
        let v = self.node(id).ok_or(Unhashable)?;
        if let Value::BigInt(b) = v {
            // Kept like a long text's: up to 4 KiB of digits hashed once, not once per
            // comparison (frozensets of 30 such ints compared once per ADDITEMS would
            // otherwise hash their digits at every comparison; CPython keeps its hashes in the
            // set).
            // One of at most `SHORT_BIG_INT_DIGITS` 64-bit digits hashes faster than the
            // lookup, and is not kept.
            let keep = b.iter_u64_digits().len() > SHORT_BIG_INT_DIGITS;
            return Ok(Some(self.content_kept(id, keep, || {
                let mut h = self.content_hasher();
                hash_num(&Num::Big(Cow::Borrowed(b)), &mut h);
                h.finish()
            })));
        }
        let mut h = self.content_hasher();
        if let Some(n) = num_of(v) {
            if n.has_nan() {
                // A NaN is equal only to itself (the identity test before `==`), so it hashes
                // by identity, as CPython 3.10+ does (`_Py_HashDouble(inst, v)`, bpo-43475):
                // hashed by value, every NaN with the same bits collided with every other and
                // a set of n NaNs cost n**2 comparisons.
                h.write_u8(9);
                h.write_u32(id.0);
            } else {
                hash_num(&n, &mut h);
            }
            return Ok(Some(h.finish()));
        }
        match v {
            Value::None => h.write_u8(0),
            Value::Str(s) => {
                let b = s.as_bytes();
                return Ok(Some(self.content_bytes(id, 5, b)));
            }
            Value::Bytes(b) => return Ok(Some(self.content_py_bytes(id, b))),
            Value::Global(g) => {
                h.write_u8(7);
                let (module, name) = g.python3_name();
                module.hash(&mut h);
                name.hash(&mut h);
            }
            Value::Object(o) => match o.key {
                RecordKey::Identity => {
                    h.write_u8(8);
                    h.write_u32(id.0);
                }
                // Every caller resolves first (`KeyOps::resolve`), so a first-argument record
                // is not met here; were it, it would be refused, not hashed as itself.
                RecordKey::Unhashable | RecordKey::FirstArgument => return Err(Unhashable),
                RecordKey::OnePerFirstArgument => {
                    return self.content_one_per_argument(o).map(Some)
                }
                RecordKey::Datetime => {
                    h.write_u8(13);
                    key_of(self.arena, o).ok_or(Unhashable)?.hash(&mut h);
                }
            },
            Value::Tuple(_) | Value::FrozenSet(_) => return Ok(None),
            _ => return Err(Unhashable),
        }
        Ok(Some(h.finish()))
    }
}
