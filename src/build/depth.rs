//! The build's check of the nesting depth (`max_nesting_depth`) of what it has built: a
//! height for each container, kept up to date as containers are made and filled, so that the
//! exact walk at STOP ([`walk_depth`]) runs only when the heights do not settle the verdict.
//!
//! The depth is defined in `src/limits.rs`: the number of nodes on the longest path from a
//! root, a value shared through the memo counted at every place it is reached (as CPython's
//! `hash`, `repr` and `==` recurse into it each time), and an edge back to a container on the
//! path (a cycle) a leaf. A container's *height* is that length from it. Heights are cheap to
//! keep while the graph grows at its roots, which is how CPython's pickler writes: a container
//! is made, filled (APPENDS, SETITEMS, ADDITEMS, BUILD) and only then put into its parent,
//! whose height is then one more than its tallest child's, shared or not. A container filled
//! after it was put into another (through the memo), or given itself, leaves the parents'
//! heights stale; the heights then give up and the walk decides. The heights never decide a
//! refusal: a document they do not accept is walked.

use crate::value::{Arena, NodeId, Value};

/// Bit 15 of an entry: the container has been given to another container as a child.
const CONTAINED: u16 = 0x8000;
/// The largest height kept; a container at least this tall leaves the verdict to the walk.
const SATURATED: u16 = 0x7FFF;

/// Heights of the containers built so far (see the module docs). Costs 2 to 3 bytes per
/// arena node (2 per entry, grown by half again), and only when it is switched on.
#[derive(Debug, Default)]
pub(crate) struct Heights {
    /// Whether heights are kept. Off when the scan's count of opcodes that make containers
    /// already bounds the walk (a walk's path holds each container once, plus a leaf).
    on: bool,
    /// By arena index: 0 for a value that is not a container; else [`CONTAINED`] and the
    /// height (1 for an empty container). Zero-filled ahead of the containers, in steps.
    entries: Vec<u16>,
    /// One past the last container made: a child at or past it is a leaf.
    made: usize,
    /// A container already inside another gained a child, or a container was given itself:
    /// the heights of its parents may be too low, so the bound no longer holds.
    stale: bool,
}

impl Heights {
    /// Heights kept when `on`; else every call is a no-op and [`Heights::bound`] gives `None`.
    pub(crate) fn new(on: bool) -> Heights {
        Heights {
            on,
            entries: Vec::new(),
            made: 0,
            stale: false,
        }
    }

    /// The height of `id`: 1 for a leaf (shared values included), else its entry's.
    fn height(&self, id: NodeId) -> u16 {
        match self.entries.get(id.index()) {
            Some(&e) if e != 0 => e & SATURATED,
            _ => 1,
        }
    }

    /// Marks `child` as inside a container; returns its height.
    #[inline(always)]
    fn enter(&mut self, child: NodeId) -> u16 {
        // A shared value is a leaf: no look at the entries.
        if child.is_shared() {
            return 1;
        }
        match self.entries.get_mut(child.index()) {
            Some(e) if *e != 0 => {
                *e |= CONTAINED;
                *e & SATURATED
            }
            _ => 1,
        }
    }

    /// The container `v` was just made as node `id` (not yet in the arena), holding its
    /// children ([`Value::for_each_child`]).
    #[inline]
    pub(crate) fn made(&mut self, id: NodeId, v: &Value<'_>) {
        if !self.on || self.stale {
            return;
        }
        let mut tallest = 0u16;
        v.for_each_child(|c| tallest = tallest.max(self.enter(c)));
        self.set(id, tallest.saturating_add(1).min(SATURATED));
    }

    /// Sets the entry of the container `id`, the last made, extending the entries to it.
    #[inline(always)]
    fn set(&mut self, id: NodeId, height: u16) {
        let i = id.index();
        if i >= self.entries.len() {
            self.grow(i);
        }
        if let Some(e) = self.entries.get_mut(i) {
            *e = height;
            self.made = i + 1;
        }
    }

    /// [`Heights::made`] for a container whose children are `items`.
    #[inline]
    pub(crate) fn made_with(&mut self, id: NodeId, items: &[NodeId]) {
        if !self.on || self.stale {
            return;
        }
        let made = self.made;
        let mut tallest = u16::from(!items.is_empty());
        for &c in items {
            // Past the last container made (shared values included): a leaf, counted above.
            if c.index() < made {
                tallest = tallest.max(self.enter(c));
            }
        }
        self.set(id, tallest.saturating_add(1).min(SATURATED));
    }

    /// The container made as node `id` (not yet in the arena) has no children: height 1.
    #[inline]
    pub(crate) fn made_empty(&mut self, id: NodeId) {
        if !self.on || self.stale {
            return;
        }
        self.set(id, 1);
    }

    /// [`Heights::filled`] with the key-value pairs `flat` (`[k, v, k, v, ...]`) whose keys
    /// are all leaves (texts, ints): only the values are looked at.
    #[inline]
    pub(crate) fn filled_values(&mut self, target: NodeId, flat: &[NodeId]) {
        let (pairs, _) = flat.as_chunks::<2>();
        self.fill(target, pairs.iter().map(|&[_, v]| v));
    }

    /// [`Heights::fill`] for children that are all leaves (each past the last container
    /// made, so none is `target`): the height of `target` becomes at least 2 when there is
    /// `any` child. The same entry and the same give-up as `fill`, with no look at the
    /// children's entries.
    #[inline(always)]
    fn fill_leaves(&mut self, target: NodeId, any: bool) {
        let Some(e) = self.entries.get_mut(target.index()) else {
            self.give_up();
            return;
        };
        let entry = *e;
        // As in `fill`: not a container made through `made`, or already inside another.
        if entry == 0 || entry & CONTAINED != 0 {
            self.give_up();
            return;
        }
        if any {
            *e = entry.max(2);
        }
    }

    /// [`Heights::filled`] and [`Heights::filled_values`]: `children` were put into
    /// `target`.
    #[inline(always)]
    fn fill(&mut self, target: NodeId, children: impl Iterator<Item = NodeId>) {
        if !self.on || self.stale {
            return;
        }
        let entry = self.entries.get(target.index()).copied().unwrap_or(0);
        // Not a container made through `made` (cannot happen), or already inside another:
        // its parents' heights would have to grow too.
        if entry == 0 || entry & CONTAINED != 0 {
            self.give_up();
            return;
        }
        let made = self.made;
        let mut tallest = entry & SATURATED;
        let mut itself = false;
        for c in children {
            // Every child is at least a leaf, one level below the container.
            tallest = tallest.max(2);
            // Past the last container made (shared values included): a leaf.
            if c.index() >= made {
                continue;
            }
            itself |= c == target;
            // `enter` without its branches: a container's entry is marked contained, and a
            // value that is no container (entry 0) gives height 1, below a leaf's 2.
            if let Some(e) = self.entries.get_mut(c.index()) {
                let entry = *e;
                *e = entry | if entry != 0 { CONTAINED } else { 0 };
                tallest = tallest.max((entry & SATURATED) + 1);
            }
        }
        // A container given itself: the walk decides.
        if itself {
            self.give_up();
            return;
        }
        if let Some(e) = self.entries.get_mut(target.index()) {
            *e = tallest.min(SATURATED);
        }
    }

    /// Makes room for the entry of arena index `i`, growing the entries geometrically (so the
    /// cost per node is a constant) from a few cache lines (so that a tiny pickle does not pay
    /// for a table sized for a large one). Fallible: a failure stops keeping heights, and the
    /// walk decides.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, i: usize) {
        // Doubling up to 64 Ki entries (128 KiB), then half again; at least 64 entries (128
        // bytes). Zero-filled a step at once, where a fill per container cost a call to memset
        // each.
        let now = self.entries.len();
        let step = if now < 1 << 16 { now * 2 } else { now / 2 * 3 };
        let len = (i + 1).max(step).max(64);
        if self
            .entries
            .try_reserve_exact(len - self.entries.len())
            .is_err()
        {
            self.give_up();
            return;
        }
        self.entries.resize(len, 0);
    }

    /// `children` were put into the existing container `target` (APPEND, APPENDS, SETITEM,
    /// SETITEMS, ADDITEMS; BUILD's state).
    #[inline(always)]
    pub(crate) fn filled(&mut self, target: NodeId, children: &[NodeId]) {
        if !self.on || self.stale {
            return;
        }
        // Every child past the last container made (ints, texts, shared values, as a list
        // of leaves holds): all leaves, whose heights are one, and none is `target`. One
        // pass for the least id, in place of a look at each child's entry.
        let least = children.iter().fold(u32::MAX, |m, c| m.min(c.0));
        if least as usize >= self.made {
            return self.fill_leaves(target, !children.is_empty());
        }
        self.fill(target, children.iter().copied());
    }

    fn give_up(&mut self) {
        self.stale = true;
        self.entries = Vec::new();
        self.made = 0;
    }

    /// The depth of the values of `roots` (at least 1; heights that are not stale hold no cycle),
    /// or `None` when heights are not kept, are stale, or reach [`SATURATED`].
    pub(crate) fn bound(&self, roots: &[NodeId]) -> Option<u64> {
        if !self.on || self.stale {
            return None;
        }
        let mut bound = 1;
        for &r in roots {
            let h = self.height(r);
            if h >= SATURATED {
                return None;
            }
            bound = bound.max(h);
        }
        Some(u64::from(bound))
    }
}

/// What [`walk_depth`] knows of a node, by arena index: not entered yet.
const UNSEEN: u32 = 0;
/// On the walk's current path (entered, not left): an edge to it closes a cycle.
const ON_PATH: u32 = u32::MAX;

/// One step of [`walk_depth`]'s explicit stack.
#[derive(Clone, Copy)]
enum Step {
    /// Enter the container `id`, `depth` nodes from its root (the root is 1).
    Enter { id: NodeId, depth: u64 },
    /// Every child of `id` has been walked: its height is now known.
    Leave { id: NodeId, depth: u64 },
}

/// The nesting depth of the values of `roots` (see the module docs and `src/limits.rs`): the
/// number of nodes on the longest path from a root, a child that is on the path already (a
/// cycle) counting as a leaf. Roots in order, depth first, children in
/// [`Value::for_each_child`]'s order (which only decides which edge of a cycle is cut).
/// Returns `Err(max + 1)` once a path longer than `max` is found (its first `max + 1` values
/// are a path too), or `Ok(())` when every value is within `max`. Iterative; each node is entered
/// once and each child looked at twice, so the walk is linear in the arena; 4 bytes a node.
pub(crate) fn walk_depth(arena: &Arena<'_>, roots: &[NodeId], max: u64) -> Result<(), u64> {
    // By arena index: UNSEEN, ON_PATH, or the height of a container left (at least 1).
    let mut state = vec![UNSEEN; arena.len()];
    let is_container = |c: NodeId| arena.node(c).is_some_and(|n| arena.view(n).is_container());
    let mut work: Vec<Step> = Vec::new();
    for &root in roots {
        if is_container(root) {
            work.push(Step::Enter { id: root, depth: 1 });
        }
        while let Some(step) = work.pop() {
            match step {
                Step::Enter { id, depth } => {
                    let Some(s) = state.get_mut(id.index()) else {
                        continue;
                    };
                    // Left already (its height is known), or on the path (a cycle: a leaf,
                    // counted when its parent is left).
                    if *s != UNSEEN {
                        continue;
                    }
                    *s = ON_PATH;
                    let Some(v) = arena.node(id).map(|n| arena.view(n)) else {
                        continue;
                    };
                    let mut has_children = false;
                    work.push(Step::Leave { id, depth });
                    let start = work.len();
                    v.for_each_child(|c| {
                        has_children = true;
                        // Only a child that can hold children can go deeper: leaves (the bulk
                        // of most documents) are not queued.
                        if is_container(c) {
                            work.push(Step::Enter {
                                id: c,
                                depth: depth + 1,
                            });
                        }
                    });
                    if has_children && depth + 1 > max {
                        return Err(depth + 1);
                    }
                    // Popped in item order.
                    if let Some(added) = work.get_mut(start..) {
                        added.reverse();
                    }
                }
                Step::Leave { id, depth } => {
                    let Some(v) = arena.node(id).map(|n| arena.view(n)) else {
                        continue;
                    };
                    // 1 for an empty container; else one more than its tallest child, a leaf
                    // or a node on the path (a cycle) being 1.
                    let mut tallest = 0u64;
                    v.for_each_child(|c| {
                        // A leaf was never entered: UNSEEN, as is a shared value's missing
                        // entry.
                        let h = match state.get(c.index()) {
                            Some(&h) if h != UNSEEN && h != ON_PATH => u64::from(h),
                            _ => 1,
                        };
                        tallest = tallest.max(h);
                    });
                    let height = tallest + 1;
                    // The path from the root to this node, then its tallest way down.
                    let through = depth - 1 + height;
                    if through > max {
                        return Err(max.saturating_add(1));
                    }
                    if let Some(s) = state.get_mut(id.index()) {
                        // At most `max`, and at most the arena's length plus one.
                        *s = u32::try_from(height).unwrap_or(ON_PATH - 1);
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[u32]) -> Value<'static> {
        let ids: Vec<NodeId> = items.iter().map(|&i| NodeId(i)).collect();
        Value::List(Vec::leak(ids))
    }

    #[test]
    fn heights_follow_a_forest_and_give_up_on_refilling_a_child() {
        let mut h = Heights::new(true);
        // 0 = [], 1 = [0], then 0 gets a child after it is inside 1.
        h.made(NodeId(0), &list(&[]));
        assert_eq!(h.bound(&[NodeId(0)]), Some(1));
        h.made(NodeId(1), &list(&[0]));
        assert_eq!(h.bound(&[NodeId(1)]), Some(2));
        // Filling the root grows its height only.
        h.made(NodeId(2), &list(&[]));
        h.filled(NodeId(2), &[NodeId(1), NodeId(7)]);
        assert_eq!(h.bound(&[NodeId(2)]), Some(3));
        h.filled(NodeId(0), &[NodeId(9)]);
        assert_eq!(h.bound(&[NodeId(2)]), None);
    }

    /// Children all past the last container made (leaves) and children among the
    /// containers give the same heights through `filled` and `filled_values`.
    #[test]
    fn leaves_past_the_last_container_count_as_leaves() {
        let mut h = Heights::new(true);
        h.made(NodeId(0), &list(&[]));
        // No child: the height stays 1; leaves only (ids 5, 6 and a held int): 2.
        h.filled(NodeId(0), &[]);
        assert_eq!(h.bound(&[NodeId(0)]), Some(1));
        h.filled_values(
            NodeId(0),
            &[NodeId(5), NodeId(6), NodeId(0x8000_0001), NodeId::NONE],
        );
        assert_eq!(h.bound(&[NodeId(0)]), Some(2));
        // 1 = {k: 0, k: leaf}: the value 0 is a container of height 2.
        h.made(NodeId(1), &list(&[]));
        h.filled_values(NodeId(1), &[NodeId(7), NodeId(9), NodeId(8), NodeId(0)]);
        assert_eq!(h.bound(&[NodeId(1)]), Some(3));
        // Leaves given to 0, now inside 1: the heights give up.
        h.filled(NodeId(0), &[NodeId(11)]);
        assert_eq!(h.bound(&[NodeId(1)]), None);
    }

    #[test]
    fn heights_give_up_on_a_container_given_itself() {
        let mut h = Heights::new(true);
        h.made(NodeId(0), &list(&[]));
        h.filled(NodeId(0), &[NodeId(0)]);
        assert_eq!(h.bound(&[NodeId(0)]), None);
    }

    #[test]
    fn heights_off_give_no_bound() {
        let mut h = Heights::new(false);
        h.made(NodeId(0), &list(&[]));
        assert_eq!(h.bound(&[NodeId(0)]), None);
    }

    #[test]
    fn saturated_heights_leave_the_verdict_to_the_walk() {
        let mut h = Heights::new(true);
        h.made(NodeId(0), &list(&[]));
        for i in 1..u32::from(SATURATED) {
            h.made(NodeId(i), &list(&[i - 1]));
        }
        let top = NodeId(u32::from(SATURATED) - 1);
        assert_eq!(h.bound(&[top]), None);
        assert_eq!(h.bound(&[NodeId(u32::from(SATURATED) - 2)]), Some(0x7FFE));
    }

    /// The walk counts a shared value at every place it is reached (A51: a list of every link
    /// of a chain of tuples, and a set of the last link), cuts a cycle at the edge back to
    /// the path, and refuses at `max + 1`.
    #[test]
    fn the_walk_finds_the_longest_path_through_shared_values() {
        const N: u32 = 50;
        let mut p = b"\x80\x04]\x94)\x94a".to_vec();
        for k in 2..N + 2 {
            p.push(b'j');
            p.extend_from_slice(&(k - 1).to_le_bytes());
            p.extend_from_slice(b"\x85\x94a");
        }
        p.extend_from_slice(b"\x8f(j");
        p.extend_from_slice(&(N + 1).to_le_bytes());
        p.extend_from_slice(b"\x90a.");
        let doc = crate::decode(&p, &crate::Policy::data()).unwrap();
        // list 1, set 2, t_N 3, ..., t_0 = () at N + 3.
        let depth = u64::from(N) + 3;
        assert_eq!(walk_depth(&doc.arena, &doc.roots, depth), Ok(()));
        assert_eq!(walk_depth(&doc.arena, &doc.roots, depth - 1), Err(depth));
        assert_eq!(walk_depth(&doc.arena, &doc.roots, 5), Err(6));
        // l = [[l, [[1]]], l]: l 1, [l, [[1]]] 2, its l a leaf at 3, [[1]] 3, [1] 4, 1 at 5.
        let cycle = b"\x80\x04]\x94(]\x94(h\x00]]K\x01aae\x94h\x00e.";
        let doc = crate::decode(cycle, &crate::Policy::data()).unwrap();
        assert_eq!(walk_depth(&doc.arena, &doc.roots, 5), Ok(()));
        assert_eq!(walk_depth(&doc.arena, &doc.roots, 4), Err(5));
    }
}
