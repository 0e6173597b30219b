//! Where the entries of a dict (key-value pairs) or a set (items) live while keys are
//! inserted: none yet, a run of the arena's pool, or a `Vec` of their own; and the
//! detaching of a container from its node during an insertion ([`Machine::keyed_insert`]),
//! so that a key holding the container itself is refused as unhashable, as CPython refuses it.

use std::mem;

use crate::build::budget::{ITEM_BYTES, KEYED_BYTES};
use crate::build::keyed::DETACHED;
use crate::build::machine::{internal, Machine};
use crate::error::{ErrorKind, Result};
use crate::value::{Arena, Node, NodeId};

use super::KeyIndex;

/// Where a dict's pairs or a set's items are: none yet, a run of the pool, or a `Vec` of
/// their own ([`Keyed::run`]).
pub(in crate::build) enum Run {
    Empty,
    Pool(u32, u32),
    Vec(u32),
}

/// The entries of a dict (key-value pairs) or of a set (items), as the arena keeps them, for
/// [`Machine::keyed_insert`].
pub(in crate::build) trait Keyed: Copy {
    /// Bytes charged per entry ([`AllocationFailed`](ErrorKind::AllocationFailed) of a copy).
    const BYTES: u64;
    /// Where the entries of `n` are; `None` when `n` is not this kind of container.
    fn run(n: Node) -> Option<Run>;
    /// The pool of such entries.
    fn pool<'x>(a: &'x Arena<'_>) -> &'x [Self];
    /// The `Vec`s of containers that grew out of the pool.
    fn vecs<'x>(a: &'x mut Arena<'_>) -> &'x mut Vec<Vec<Self>>;
    /// The node of a container whose entries are a run of the pool.
    fn pool_node(start: u32, len: u32) -> Node;
    /// The node of a container whose entries are `vecs()[i]`.
    fn vec_node(i: u32) -> Node;
    /// The buffer a new container's entries are gathered in, kept between containers.
    fn gathered<'x>(m: &'x mut Machine<'_, '_>) -> &'x mut Vec<Self>;
    /// Appends `entries` to the pool; where they start and how many.
    fn place(m: &mut Machine<'_, '_>, entries: &[Self]) -> Result<(u32, u32)>;
}

impl Keyed for (NodeId, NodeId) {
    const BYTES: u64 = KEYED_BYTES;
    fn run(n: Node) -> Option<Run> {
        match n {
            Node::Dict { len: 0, .. } => Some(Run::Empty),
            Node::Dict { start, len } => Some(Run::Pool(start, len)),
            Node::DictVec(i) => Some(Run::Vec(i)),
            _ => None,
        }
    }
    fn pool<'x>(a: &'x Arena<'_>) -> &'x [Self] {
        &a.pairs
    }
    fn vecs<'x>(a: &'x mut Arena<'_>) -> &'x mut Vec<Vec<Self>> {
        &mut a.pair_vecs
    }
    fn pool_node(start: u32, len: u32) -> Node {
        Node::Dict { start, len }
    }
    fn vec_node(i: u32) -> Node {
        Node::DictVec(i)
    }
    fn gathered<'x>(m: &'x mut Machine<'_, '_>) -> &'x mut Vec<Self> {
        &mut m.new_pairs
    }
    fn place(m: &mut Machine<'_, '_>, entries: &[Self]) -> Result<(u32, u32)> {
        m.pool_pairs(entries)
    }
}

impl Keyed for NodeId {
    const BYTES: u64 = ITEM_BYTES;
    fn run(n: Node) -> Option<Run> {
        match n {
            Node::Set { len: 0, .. } => Some(Run::Empty),
            Node::Set { start, len } => Some(Run::Pool(start, len)),
            Node::SetVec(i) => Some(Run::Vec(i)),
            _ => None,
        }
    }
    fn pool<'x>(a: &'x Arena<'_>) -> &'x [Self] {
        &a.items
    }
    fn vecs<'x>(a: &'x mut Arena<'_>) -> &'x mut Vec<Vec<Self>> {
        &mut a.vecs
    }
    fn pool_node(start: u32, len: u32) -> Node {
        Node::Set { start, len }
    }
    fn vec_node(i: u32) -> Node {
        Node::SetVec(i)
    }
    fn gathered<'x>(m: &'x mut Machine<'_, '_>) -> &'x mut Vec<Self> {
        &mut m.new_items
    }
    fn place(m: &mut Machine<'_, '_>, entries: &[Self]) -> Result<(u32, u32)> {
        m.pool_items(entries)
    }
}

impl<'a, 'p> Machine<'a, 'p> {
    /// Inserts into the dict or set `target` with `insert`, which is given its entries and hash
    /// index. The container is detached from its node meanwhile (its node is an empty list, so
    /// a key holding the container is unhashable). One with no entries yet gathers them in
    /// [`Machine::new_pairs`] (or [`Machine::new_items`]) and appends them to its pool; one
    /// that has some moves to a `Vec` of its own, where it grows from now on.
    pub(in crate::build) fn keyed_insert<T: Keyed>(
        &mut self,
        target: NodeId,
        insert: impl FnOnce(&mut Self, &mut Vec<T>, &mut KeyIndex) -> Result<()>,
    ) -> Result<()> {
        let node = self
            .arena
            .node(target)
            .ok_or_else(|| self.err(internal()))?;
        let (mut d, vec_index) = match T::run(node) {
            Some(Run::Empty) => {
                let mut d = mem::take(T::gathered(self));
                d.clear();
                (d, None)
            }
            Some(Run::Pool(start, len)) => {
                let old = T::pool(&self.arena)
                    .get(start as usize..start as usize + len as usize)
                    .unwrap_or_default();
                let mut d = Vec::new();
                if d.try_reserve_exact(old.len()).is_err() {
                    return Err(self.err(ErrorKind::AllocationFailed {
                        bytes: old.len() as u64 * T::BYTES,
                    }));
                }
                d.extend_from_slice(old);
                (d, None)
            }
            Some(Run::Vec(i)) => {
                let d = T::vecs(&mut self.arena)
                    .get_mut(i as usize)
                    .map(mem::take)
                    .unwrap_or_default();
                (d, Some(i))
            }
            None => return Err(self.err(internal())),
        };
        if let Some(slot) = self.arena.nodes.get_mut(target.index()) {
            *slot = DETACHED;
        }
        let mut index = self.take_index(target);
        let r = insert(self, &mut d, &mut index);
        self.keep_index(target, index);
        // Back in place, whatever the insertion's outcome (a refusal ends the decode anyway).
        let back = match (T::run(node), vec_index) {
            (_, Some(i)) => {
                if let Some(v) = T::vecs(&mut self.arena).get_mut(i as usize) {
                    *v = d;
                }
                Ok(T::vec_node(i))
            }
            (Some(Run::Empty), None) => {
                let placed = T::place(self, &d);
                *T::gathered(self) = d;
                placed.map(|(start, len)| T::pool_node(start, len))
            }
            _ => {
                let vecs = T::vecs(&mut self.arena);
                match (u32::try_from(vecs.len()), vecs.try_reserve(1)) {
                    (Ok(i), Ok(())) => {
                        vecs.push(d);
                        Ok(T::vec_node(i))
                    }
                    _ => Err(self.err(ErrorKind::AllocationFailed {
                        bytes: mem::size_of::<Vec<T>>() as u64,
                    })),
                }
            }
        };
        let (back, placed) = match back {
            Ok(n) => (n, Ok(())),
            Err(e) => (T::pool_node(0, 0), Err(e)),
        };
        if let Some(slot) = self.arena.nodes.get_mut(target.index()) {
            *slot = back;
        }
        r.and(placed)
    }
}
