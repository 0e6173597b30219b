//! The hash of a key in the build's own tables (the index of a dict or set, [`KeyIndex`]).
//!
//! While the model of the reader's work (`reader.rs`) caps the keys of one container that
//! share one CPython hash value at [`INDEX_BY_CPYTHON_COLLISIONS`] or fewer
//! (`max_key_collisions`, 32 by default), the index is keyed by CPython's hash
//! ([`KeyOps::hash`]), which the model needs anyway, through a keyed bijection
//! ([`KeyOps::index_mix`]): one hash a key instead of two. This stays linear: the index's
//! entries with the same mixed hash are exactly the keys with the same 64-bit CPython hash
//! (the mix is a bijection), and an insertion compares its key only with those (the index
//! keeps each entry's hash and compares it first). The model counts every key it tracks into
//! its (container, CPython hash) class and refuses the document when a class would pass
//! `max_key_collisions`, so a class holds at most that many tracked keys, plus a few the model
//! does not track (at most one int from -2**30 to 2**30 - 1, None, the empty frozenset, a
//! complex number with a NaN part, and the records among the first 16 keys, inserted before
//! the container had an index);
//! every such comparison is also counted in the model's steps (`max_key_steps`,
//! `max_key_steps_per_byte`). Where buckets are concerned, distinct CPython hashes spread as
//! the mix's random seed makes them: the peer, who chooses the CPython hashes, does not know it.
//!
//! The same probe counts the keys of the index that share the inserted key's hash
//! ([`KeyOps::find_or_insert`]), and the model takes that count for the key's class instead
//! of its own filter and table (`reader.rs` `Key::same`): exactly every key of the container
//! with that CPython hash, the ones the model would not track included, as CPython's probe
//! meets them all. (A container's first 16 keys, inserted before it has an index, are
//! counted by the model's classes.)
//!
//! When a caller lifts `max_key_collisions` past [`INDEX_BY_CPYTHON_COLLISIONS`], the index
//! is keyed by the content hash (`content.rs`), whose collisions are by chance only, so that
//! 50,000 keys `k * (2**61 - 1)` (all CPython hash 0) do not cost picklewarden n**2
//! comparisons.
//!
//! Texts and bytes take the content hash in both cases: their CPython hash is itself a keyed
//! stand-in (`KeyOps::hash_bytes`), and a text equals only a text, bytes only bytes, so equal
//! keys still get the same index hash. Every other kind of key that can equal a key of
//! another kind (`1 == 1.0 == True`, tuples and frozensets of them, a record resolved to its
//! first argument) takes CPython's, which is equal for equal values across kinds.

use std::hash::BuildHasher;

use super::mix::splitmix64;
use super::pyhash::{bigint_hash, float_hash, int_hash, FrozenSetHash, OldTupleHash, TupleHash};
use super::reader::counted;
use super::{held_int, Acc, KeyOps, Unhashable, SHORT_BIG_INT_DIGITS, SMALL_TUPLE};
use crate::value::{Fat, Node, NodeId, Value};

/// The largest `max_key_collisions` under which the build's indexes are keyed by CPython's
/// hash (module docs): an insertion then compares its key with at most this many keys of its
/// CPython hash, plus a few the model does not track.
pub(crate) const INDEX_BY_CPYTHON_COLLISIONS: u64 = 64;

impl<S: BuildHasher> KeyOps<'_, '_, S> {
    /// The index hash of a key whose CPython hash ([`KeyOps::hash`]) is `h`: splitmix64 of `h`
    /// and the decode's seed, a bijection of `u64` for one seed (so two keys share an index
    /// hash exactly when they share a CPython hash) whose every output bit depends on every
    /// bit of `h` (hashbrown picks the bucket with the low bits and tags with the top 7).
    #[inline(always)]
    pub(crate) fn index_mix(&self, h: u64) -> u64 {
        splitmix64(h ^ self.seed)
    }

    /// The index hash of `k` while the indexes are keyed by CPython's hash (module docs), and
    /// `k`'s [`KeyOps::hash`] when the model counts `k` (`reader.rs` `counted`) and it was
    /// computed; `Unhashable` for an unhashable `k`.
    #[inline]
    pub(crate) fn index_hash(&self, k: NodeId) -> Result<(u64, Option<u64>), Unhashable> {
        // The commonest keys from their node, without a view.
        match self.arena.node(k) {
            Some(
                Node::Str { .. }
                | Node::Surrogates { .. }
                | Node::Bytes { .. }
                | Node::Latin1 { .. },
            ) => return Ok((self.content_hash(k)?, None)),
            None => {
                if let Some(i) = held_int(k) {
                    // Not counted (a shared value).
                    return Ok((self.index_mix(int_hash(i)), None));
                }
            }
            // An int node is never one held in an id (so it is counted), and an integral
            // float hashes as its int; a NaN (hashed by identity) goes the general way.
            Some(Node::Int(w)) => {
                let h = int_hash(w.get_i64());
                return Ok((self.index_mix(h), Some(h)));
            }
            Some(Node::Float(w)) => {
                if let Some(h) = float_hash(w.get_f64()) {
                    return Ok((self.index_mix(h), Some(h)));
                }
            }
            Some(Node::Tuple { start, len }) => {
                let h = match self.flat_hash(k, start, len, true) {
                    Some(h) => h,
                    None => self.hash(k)?,
                };
                return Ok((self.index_mix(h), Some(h)));
            }
            Some(Node::FrozenSet { start, len }) => {
                let h = match self.flat_hash(k, start, len, false) {
                    Some(h) => h,
                    None => self.hash(k)?,
                };
                return Ok((self.index_mix(h), Some(h)));
            }
            // A big int from its side-table slot, without a view (one of at most
            // `SHORT_BIG_INT_DIGITS` 64-bit digits is not kept: [`KeyOps::hash_view`]).
            Some(Node::Fat(i)) => {
                if let Some(Fat::BigInt(b)) = self.arena.fat.get(i as usize) {
                    if b.iter_u64_digits().len() <= SHORT_BIG_INT_DIGITS {
                        let h = bigint_hash(b);
                        return Ok((self.index_mix(h), Some(h)));
                    }
                }
            }
            Some(_) => {}
        }
        let r = self.resolve(k)?;
        match self.node(r) {
            Some(Value::Str(_) | Value::Bytes(_)) => Ok((self.content_hash(r)?, None)),
            _ => {
                let h = self.hash(r)?;
                let model = counted(self.arena.node(k), k).then_some(h);
                Ok((self.index_mix(h), model))
            }
        }
    }
}

impl<S: BuildHasher> KeyOps<'_, '_, S> {
    /// [`KeyOps::hash`] of the tuple (`tuple`) or frozenset whose items are the pool's run
    /// `start`, `len`, from the items' nodes, when it has at most [`SMALL_TUPLE`] items and
    /// each is an int, a float that is no NaN or a text held as a node (the commonest keys:
    /// `(i, j)`, `(i, 'name')`); `None` for any other (the caller takes the general way). The
    /// same hash as [`KeyOps::hash`]'s, item by item (`hash_flat`, `hash_view`).
    #[inline]
    fn flat_hash(&self, id: NodeId, start: u32, len: u32, tuple: bool) -> Option<u64> {
        let s = start as usize;
        let items = self.arena.items.get(s..s.checked_add(len as usize)?)?;
        if items.len() > SMALL_TUPLE {
            return None;
        }
        let mut acc = if tuple {
            Acc::Tuple(TupleHash::new())
        } else {
            Acc::Set(FrozenSetHash::new())
        };
        let mut old = OldTupleHash::new(items.len());
        for &item in items {
            let h = match held_int(item) {
                Some(i) => int_hash(i),
                None => match self.arena.node(item)? {
                    Node::Int(w) => int_hash(w.get_i64()),
                    Node::Float(w) => float_hash(w.get_f64())?,
                    Node::Str { start, len } => {
                        self.hash_bytes(item, 5, self.arena.text(start, len))
                    }
                    _ => return None,
                },
            };
            acc.add(h);
            old.lane(h);
        }
        // A tuple's hash under CPython 3.7 and before, from the same item hashes, for the
        // model ([`KeyOps::old_hash_of`]), as `KeyOps::hash` keeps it for a flat tuple.
        if tuple {
            self.keep_old(id, old.finish());
        }
        Some(acc.finish())
    }
}

#[cfg(test)]
#[path = "index_test.rs"]
mod tests;
