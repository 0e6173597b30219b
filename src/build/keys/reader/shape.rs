//! The shapes of keys the model sizes without its walk: scalars from their node, flat tuples
//! and frozensets of at most [`SMALL_TUPLE`] items, texts by their length, and which items of
//! a flat tuple have a CPython hash the peer can choose (the collisions under CPython 3.7's
//! tuple hash). Part of the model of the reader's key work (`reader.rs`).

use super::super::pyhash::{
    bigint_hash, complex_hash, float_hash, frozenset_hash, int_hash, OldTupleHash, TupleHash,
    HASH_NONE,
};
use super::super::KeyOps;
use super::Shape;
use crate::value::{Node, NodeId, Value};

/// The shape of a value that is not a tuple or frozenset (`Err`: their items, and whether
/// it is a tuple), computed from its node alone.
pub(super) fn leaf_shape<'v, S: std::hash::BuildHasher>(
    ops: &'v KeyOps<'_, '_, S>,
    id: NodeId,
) -> Result<Shape, (&'v [NodeId], bool)> {
    let one = |hash: Option<u64>| Shape {
        size: 1,
        hash_size: 1,
        hash,
        old_hash: hash,
    };
    Ok(match ops.arena.get(id) {
        // CPython before 3.12 hashes `None` by its address: unknown here, but one value for
        // the process, so a constant stands in for it (tuples that collide before a `None`
        // item collide after it, whatever its hash).
        Some(Value::None) => one(Some(HASH_NONE)),
        Some(Value::Bool(b)) => one(Some(u64::from(b))),
        Some(Value::Int(i)) => one(Some(int_hash(i))),
        Some(Value::BigInt(b)) => {
            let digits = b.bits().div_ceil(30).max(1);
            let hash = Some(bigint_hash(b));
            Shape {
                size: digits,
                hash_size: digits,
                hash,
                old_hash: hash,
            }
        }
        Some(Value::Float(x)) => one(float_hash(x)),
        Some(Value::Complex(re, im)) => one(complex_hash(re, im)),
        Some(Value::Tuple(items)) => return Err((items, true)),
        Some(Value::FrozenSet(items)) => return Err((items, false)),
        // A text's hash is kept by CPython (one step), but its comparison with an equal text
        // that is another object reads both ([`text_size`]).
        Some(v @ (Value::Str(_) | Value::Bytes(_))) => {
            let len = match v {
                Value::Str(t) => t.as_bytes().len(),
                Value::Bytes(b) => b.len(),
                _ => 0,
            };
            Shape {
                size: text_size(len),
                ..one(ops.hash_scalar(id).ok().flatten())
            }
        }
        // Texts and bytes hash with a random key in CPython, but one key for the process:
        // equal texts hash alike, so tuples that differ only in items whose hashes collide
        // collide too (`(k * (2**61 - 1), 'x')` for every k). The build's keyed hash of them
        // stands in for CPython's ([`KeyOps::hash`]), and so for globals and records (which
        // CPython hashes by address); anything else is not met (the key was hashed first, so
        // it is hashable).
        _ => one(ops.hash_scalar(id).ok().flatten()),
    })
}

/// Keys of at most this size go through the model's filter
/// ([`super::ReaderKeys::first_time`]); larger ones are counted exactly.
pub(super) const SMALL_KEY_SIZE: u64 = 16;

/// Tuples of at most this many items, none a tuple or frozenset, are walked directly and not
/// kept: the commonest tuple keys, `(i, j)`, cost no table.
pub(super) const SMALL_TUPLE: usize = 16;

/// The shape of `id` when it is a tuple or frozenset of at most [`SMALL_TUPLE`] items, none of
/// them a tuple or frozenset; `None` otherwise.
#[inline]
pub(super) fn small_shape<S: std::hash::BuildHasher>(
    ops: &KeyOps<'_, '_, S>,
    id: NodeId,
) -> Option<Shape> {
    let (items, tuple) = match ops.arena.get(id) {
        Some(Value::Tuple(items)) => (items, true),
        Some(Value::FrozenSet(items)) => (items, false),
        _ => return None,
    };
    if items.len() > SMALL_TUPLE {
        return None;
    }
    let mut th = TupleHash::new();
    let mut old = OldTupleHash::new(items.len());
    let mut hashes = [0u64; SMALL_TUPLE];
    let mut old_hashes = [0u64; SMALL_TUPLE];
    let (mut size, mut hash_size) = (1u64, 1u64);
    let (mut deterministic, mut old_deterministic) = (true, true);
    for (i, &item) in items.iter().enumerate() {
        let s = leaf_shape(ops, ops.resolve(item).unwrap_or(item)).ok()?;
        size = size.saturating_add(s.size);
        hash_size = hash_size.saturating_add(s.hash_size);
        match s.hash {
            Some(h) if tuple => th.lane(h),
            Some(h) => {
                if let Some(slot) = hashes.get_mut(i) {
                    *slot = h;
                }
            }
            None => deterministic = false,
        }
        match s.old_hash {
            Some(h) if tuple => old.lane(h),
            Some(h) => {
                if let Some(slot) = old_hashes.get_mut(i) {
                    *slot = h;
                }
            }
            None => old_deterministic = false,
        }
    }
    let of = |deterministic: bool, tuple_hash: u64, hashes: &[u64; SMALL_TUPLE]| match (
        deterministic,
        tuple,
    ) {
        (false, _) => None,
        (true, true) => Some(tuple_hash),
        (true, false) => Some(frozenset_hash(hashes.iter().take(items.len()).copied())),
    };
    Some(Shape {
        size,
        hash_size: if tuple { hash_size } else { 1 },
        hash: of(deterministic, th.finish(), &hashes),
        old_hash: of(old_deterministic, old.finish(), &old_hashes),
    })
}

/// The size of a tuple or frozenset of at most [`SMALL_TUPLE`] `items` that are all ints held
/// in their ids or arena nodes of one step (an int, a float, a text or bytes): 1 plus one a
/// item; `None` for any other (a big int, a record, a tuple or frozenset: [`small_shape`] or
/// the walk sizes them). Its hash size is the same.
#[inline]
pub(super) fn flat_size<S: std::hash::BuildHasher>(
    ops: &KeyOps<'_, '_, S>,
    items: &[NodeId],
) -> Option<u64> {
    flat_size_chosen(ops, items).map(|(size, _)| size)
}

/// [`flat_size`] of `items`, and how many of them have a CPython hash the peer can choose:
/// ints, floats and the shared `None`, `False`, `True` and small ints (texts and bytes hash
/// with CPython's random key). Two tuples collide under the tuple hash of CPython 3.7 and
/// before only where they differ in at least two items (each lane, `x = (x ^ h) * mult` with
/// an odd `mult`, is a bijection of `x`), and a collision is chosen by the hashes of those
/// items: with fewer than two chosen items, the other differences are in hashes the peer
/// cannot know.
#[inline]
pub(super) fn flat_size_chosen<S: std::hash::BuildHasher>(
    ops: &KeyOps<'_, '_, S>,
    items: &[NodeId],
) -> Option<(u64, usize)> {
    if items.len() > SMALL_TUPLE {
        return None;
    }
    let (mut size, mut chosen) = (1u64, 0usize);
    for &item in items {
        size += match ops.arena.node(item) {
            None if item.is_shared() => {
                chosen += usize::from(item != NodeId::EMPTY_STR && item != NodeId::EMPTY_BYTES);
                1
            }
            Some(Node::Int(_) | Node::Float(_)) => {
                chosen += 1;
                1
            }
            Some(
                Node::Str { len, .. }
                | Node::Surrogates { len, .. }
                | Node::Bytes { len, .. }
                | Node::Latin1 { len, .. },
            ) => text_size(len as usize),
            _ => return None,
        };
    }
    Some((size, chosen))
}

/// Bytes of a text or bytes value that one step of the model stands for when CPython compares
/// it with an equal text that is another object (`unicode_eq`, `bytes_richcompare`: a
/// `memcmp` of the whole text, some 256 bytes in the time of one comparison of two items).
pub(super) const TEXT_STEP_BYTES: u64 = 256;

/// The size of a text or bytes value of `len` bytes ([`TEXT_STEP_BYTES`]): one step, and one
/// more for each `TEXT_STEP_BYTES` bytes.
#[inline]
pub(crate) fn text_size(len: usize) -> u64 {
    1 + len as u64 / TEXT_STEP_BYTES
}

/// The items of a tuple or frozenset whose node is the pool's run `start`, `len`.
#[inline(always)]
pub(super) fn run_of<'v, S>(ops: &'v KeyOps<'_, '_, S>, start: u32, len: u32) -> &'v [NodeId] {
    let s = start as usize;
    ops.arena.items.get(s..s + len as usize).unwrap_or_default()
}
