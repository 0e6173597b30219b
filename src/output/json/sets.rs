//! The order typed JSON writes a set's items in: sorted by the compact JSON text of each item
//! written on its own (its sort key), cut to a bounded length.

use std::cell::RefCell;
use std::collections::HashMap;
#[cfg(test)]
use std::time::Instant;

use super::writer::Writer;
use crate::clock::Clock;
use crate::output::sink::Text;
use crate::output::walk::{Marks, Step, Visitor, Walker};
use crate::value::{Arena, NodeId, PyBytes, Value};

/// Bytes of a set item's standalone text used as its sort key.
pub(super) const SORT_KEY_BYTES: usize = 1024;
/// The sort keys of one set's items are together at most this many bytes: a set of more than
/// 16,384 items compares shorter keys, so that a set of a million items that share a large
/// value (each key would be 1024 bytes of it) does not hold a gigabyte of keys.
pub(super) const SORT_KEYS_BUDGET: usize = 16 << 20;
/// The shortest key, whatever the set's size (ints, floats and short texts fit in it whole).
pub(super) const SORT_KEY_MIN_BYTES: usize = 64;

/// The bytes of each item's sort key in a set of `items` items.
pub(super) fn sort_key_bytes(items: usize) -> usize {
    (SORT_KEYS_BUDGET / items.max(1)).clamp(SORT_KEY_MIN_BYTES, SORT_KEY_BYTES)
}

/// The tie-break of a set item whose cut sort key tied with another's: `Some((length, FNV-1a
/// 64 hash))` of the content of a text (its `surrogatepass` UTF-8) or bytes value, `None` for
/// anything else (a container: the tie keeps arena order). FNV-1a (Fowler, Noll, Vo) is fixed,
/// so the order does not change between runs or builds; it is no defence against chosen
/// collisions, which only make two items keep arena order. Cached by node.
fn text_fingerprint(
    arena: &Arena<'_>,
    cache: &RefCell<HashMap<NodeId, (usize, u64)>>,
    id: NodeId,
) -> Option<(usize, u64)> {
    let bytes = match arena.get(id)? {
        Value::Str(s) => PyBytes::raw(s.as_bytes()),
        Value::Bytes(b) => b,
        _ => return None,
    };
    if let Some(&f) = cache.try_borrow().ok()?.get(&id) {
        return Some(f);
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    bytes.for_each_chunk(|piece| {
        for &b in piece {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    });
    let f = (bytes.len(), h);
    if let Ok(mut c) = cache.try_borrow_mut() {
        c.insert(id, f);
    }
    Some(f)
}

/// The order in which typed JSON writes the items of each set and frozenset reachable from
/// some roots (sorted by the compact JSON text of each item, see the module docs), for the
/// tests of that order.
#[cfg(test)]
pub(crate) struct SetOrders {
    by_set: HashMap<NodeId, u32>,
    orders: Vec<Vec<NodeId>>,
}

#[cfg(test)]
impl SetOrders {
    /// The orders of the sets that `roots` reach in `arena`.
    pub(crate) fn of(arena: &Arena<'_>, roots: &[NodeId]) -> SetOrders {
        SetOrders::until(arena, roots, None).unwrap_or(SetOrders {
            by_set: HashMap::new(),
            orders: Vec::new(),
        })
    }

    /// The orders of the sets that `roots` reach in `arena`, or `None` once
    /// `deadline` has passed.
    pub(crate) fn until(
        arena: &Arena<'_>,
        roots: &[NodeId],
        deadline: Option<Instant>,
    ) -> Option<SetOrders> {
        let w = super::writer::Output::new(arena, roots, deadline).writer;
        (!w.text.timed_out).then_some(SetOrders {
            by_set: w.set_orders,
            orders: w.orders,
        })
    }

    /// The items of set `id` in the order typed JSON writes them, if `id` is a reachable set.
    pub(crate) fn items(&self, id: NodeId) -> Option<&[NodeId]> {
        let &i = self.by_set.get(&id)?;
        self.orders.get(i as usize).map(Vec::as_slice)
    }
}

/// The sets and frozensets that `roots` reach, each after every set reachable from it (a
/// depth-first walk from the roots in order, children in document order; on a cycle, a set
/// met again while it is still being walked is not waited for).
pub(super) fn sets_in_post_order(arena: &Arena<'_>, roots: &[NodeId]) -> Vec<NodeId> {
    let mut walker = Walker::new(arena, Vec::new());
    let mut post = PostOrder(Vec::new());
    for &root in roots {
        walker.walk(root, &mut post);
    }
    post.0
}

/// The sets met, in the order their walks end. Each container is numbered when first met, so
/// that it is walked once (met again, it is a reference, which adds nothing).
struct PostOrder(Vec<NodeId>);

impl<'d> Visitor<'d> for PostOrder {
    fn go_on(&mut self, _: &Marks) -> bool {
        true
    }

    fn may_have_number(&self, _: &Marks, _: NodeId, value: &Value<'d>) -> bool {
        value.is_container()
    }

    fn reference(&mut self, _: NodeId, _: u32) {}

    fn enter(&mut self, marks: &mut Marks, id: NodeId, value: Value<'d>) -> Step {
        if !value.is_container() {
            return Step::Leaf;
        }
        marks.give(id);
        Step::Open
    }

    fn item(&mut self, _: &Value<'d>, _: crate::output::walk::Slot) {}

    fn exit(&mut self, _: &mut Marks, id: NodeId, value: Value<'d>) {
        if matches!(value, Value::Set(_) | Value::FrozenSet(_)) {
            self.0.push(id);
        }
    }
}

impl Writer<'_, '_, '_> {
    /// Orders the items of each set by the compact JSON text of the item written on its own
    /// (its first [`sort_key_bytes`] bytes: [`SORT_KEY_BYTES`] unless the set is large; all of
    /// it when the item is one scalar, such as a long text; ties keep arena order). One set's
    /// keys are written into one buffer, at most [`SORT_KEYS_BUDGET`] bytes for a set of more
    /// than 16,384 items (but for items that are one scalar, whose keys are in the input).
    pub(super) fn sort_sets(&mut self, sets: &[NodeId]) {
        // The keys are written by a writer of their own (every mutable value gets an id, ids
        // from 0 in each key), which reads the orders of the sets sorted before (those inside
        // the items) and keeps the big ints' digits; all three come back at the end.
        let mut key = Writer::new(self.arena, Text::new(usize::MAX, Clock::default()), true);
        key.set_orders = std::mem::take(&mut self.set_orders);
        key.orders = std::mem::take(&mut self.orders);
        key.decimals = std::mem::take(&mut self.decimals);
        let mut walker = Walker::new(self.arena, Vec::new()).forget_cheaply();
        // The (length, FNV-1a hash) of the texts and bytes values whose cut sort keys tied,
        // by node ([`text_fingerprint`]), kept for the whole document.
        let fingerprints = RefCell::default();
        'sets: for &set in sets {
            let Some(Value::Set(s) | Value::FrozenSet(s)) = self.arena.get(set) else {
                continue;
            };
            let key_bytes = sort_key_bytes(s.len());
            key.text.out = String::new();
            key.key_bytes = key_bytes;
            let mut keyed: Vec<(usize, usize, NodeId)> = Vec::new();
            if keyed.try_reserve_exact(s.len()).is_err() {
                continue;
            }
            for (n, &item) in s.iter().enumerate() {
                if n % 256 == 0 && self.text.clock.passed() {
                    self.text.timed_out = true;
                    self.text.stopped = true;
                    break 'sets;
                }
                let start = key.text.out.len();
                key.key_start = start;
                walker.marks.forget_numbers();
                walker.walk(item, &mut key);
                // An item that is one text or bytes value is written a little past the key
                // (to a char boundary): cut it as the walk cuts the others.
                key.cut_key();
                keyed.push((start, key.text.out.len(), item));
            }
            let keys = std::mem::take(&mut key.text.out);
            let key_of = |&(a, b, _): &(usize, usize, NodeId)| keys.get(a..b).unwrap_or_default();
            // Keys that tie may be cut: two texts (or bytes values) that agree on their first
            // `key_bytes` of JSON are ordered by their length, then by a fixed hash of their
            // content (canonical: the same values give the same order however they were
            // built; each text is hashed at most once per document). Other ties keep arena
            // order.
            let arena = self.arena;
            keyed.sort_by(|x, y| {
                key_of(x)
                    .cmp(key_of(y))
                    .then_with(|| {
                        if key_of(x).len() < key_bytes.saturating_sub(8) {
                            // Not cut (a cut key is within a few bytes of the limit).
                            return std::cmp::Ordering::Equal;
                        }
                        text_fingerprint(arena, &fingerprints, x.2).cmp(&text_fingerprint(
                            arena,
                            &fingerprints,
                            y.2,
                        ))
                    })
                    .then(x.2.cmp(&y.2))
            });
            let Ok(i) = u32::try_from(key.orders.len()) else {
                continue;
            };
            key.orders
                .push(keyed.iter().map(|&(_, _, id)| id).collect());
            key.set_orders.insert(set, i);
        }
        self.set_orders = key.set_orders;
        self.orders = key.orders;
        self.decimals = key.decimals;
    }
}
