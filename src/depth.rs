//! The build's bound on the nesting depth (`max_nesting_depth`) of what it has built: a height
//! for each container, kept up to date as containers are made and filled, so that the exact
//! walk at STOP ([`walk_depth`]) runs only when the bound does not settle the verdict.
//!
//! The depth is defined by the walk (`src/limits.rs`): the longest path from a root, in
//! nodes, where a container already on the path is a leaf (so a cycle ends where it closes:
//! `l = [l]` is 2 deep), roots in order, depth first, items in order. A value shared by
//! several parents adds its depth under each of them, as it does to a consumer that recurses
//! (CPython's `repr`, `json.dumps`, typed JSON's tuples): counting it only where it was first
//! met let 50 chains of 900 tuples, each chain ending in the one before, through the memo,
//! pass a limit of 1,000 with a real depth of 45,000 (found by an audit helper). Without
//! cycles the longest path is the *height* the bound keeps, and it is cheap to keep while the
//! graph is a forest growing at its roots or a DAG of finished values, which is how CPython's
//! pickler writes: a container is made, filled (APPENDS, SETITEMS, ADDITEMS, BUILD) and only
//! then put into its parent. A container filled after it was put into another (through the
//! memo), or given itself, leaves the parents' heights stale; the bound then gives up and the
//! walk decides. The bound never decides a refusal: a document it does not accept is walked.

use crate::json::SetOrders;
use crate::value::{NodeId, Value};

/// Bit 15 of an entry: the container has been given to another container as a child.
const CONTAINED: u16 = 0x8000;
/// The largest height kept; a container at least this tall leaves the verdict to the walk.
const SATURATED: u16 = 0x7FFF;

/// Heights of the containers built so far (see the module docs). Costs 2 to 4 bytes per
/// arena node (2 per entry, grown by doubling), and only when it is switched on.
#[derive(Debug, Default)]
pub(crate) struct Heights {
    /// Whether heights are kept. Off when the scan's count of opcodes that make containers
    /// already bounds the walk (a walk's path holds each container once, plus a leaf).
    on: bool,
    /// By arena index, up to the last container made: 0 for a value that is not a container;
    /// else [`CONTAINED`] and the height (1 for an empty container).
    entries: Vec<u16>,
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
    #[inline]
    fn enter(&mut self, child: NodeId) -> u16 {
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
        let i = id.index();
        if self.entries.len() <= i {
            self.grow(i);
        }
        if let Some(e) = self.entries.get_mut(i) {
            *e = tallest.saturating_add(1).min(SATURATED);
        }
    }

    /// Makes room for the entry of arena index `i`, at least doubling (so the cost per node is
    /// a constant). Fallible: a failure stops keeping heights, and the walk decides.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, i: usize) {
        let len = (i + 1).max(self.entries.len() * 2).max(4096);
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
    #[inline]
    pub(crate) fn filled(&mut self, target: NodeId, children: &[NodeId]) {
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
        let mut tallest = entry & SATURATED;
        for &c in children {
            if c == target {
                self.give_up();
                return;
            }
            tallest = tallest.max(self.enter(c).saturating_add(1).min(SATURATED));
        }
        if let Some(e) = self.entries.get_mut(target.index()) {
            *e = tallest;
        }
    }

    fn give_up(&mut self) {
        self.stale = true;
        self.entries = Vec::new();
    }

    /// An upper bound on the depth of the walk from `roots`, or `None` when heights are not
    /// kept, are stale, or reach [`SATURATED`].
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

/// The walk of `roots` among `nodes` (see the module docs): the longest path from a root, in
/// nodes, where a container already on the path is a leaf (a cycle ends there) and a
/// container walked before counts with its height (so a value shared by many parents is
/// walked once, but the depth it adds is counted wherever it is reached). Returns `Err(max +
/// 1)` at the first path longer than `max`, or `Ok(())`. Iterative, post-order: a node is
/// entered once, so the walk is linear in the arena and its edges. The items of a set or
/// frozenset are walked in the order typed JSON writes them (`sets`, sorted; not the order
/// they were added), which decides, in a cycle, which edge closes it.
pub(crate) fn walk_depth(
    nodes: &[Value<'_>],
    roots: &[NodeId],
    max: u64,
    sets: Option<&SetOrders>,
) -> Result<(), u64> {
    let mut state: Vec<u32> = vec![NOT_WALKED; nodes.len()];
    let mut kids: Vec<NodeId> = Vec::new();
    let mut path: Vec<Frame> = Vec::new();
    let is_container = |c: NodeId| nodes.get(c.index()).is_some_and(Value::is_container);
    let over = max.saturating_add(1);
    for &root in roots {
        match state.get(root.index()) {
            // A shared value: a leaf.
            None => continue,
            // A container walked from an earlier root.
            Some(&h) if h != NOT_WALKED => {
                if u64::from(h) > max {
                    return Err(over);
                }
                continue;
            }
            Some(_) if !is_container(root) => continue,
            Some(_) => {}
        }
        path.push(enter(nodes, sets, &mut state, &mut kids, root, 1));
        while let Some(top) = path.last_mut() {
            if top.next < top.end {
                let c = kids.get(top.next).copied().unwrap_or(root);
                top.next += 1;
                let h = match state.get(c.index()) {
                    Some(&NOT_WALKED) if is_container(c) => {
                        if top.depth.saturating_add(1) > max {
                            return Err(over);
                        }
                        let depth = top.depth + 1;
                        path.push(enter(nodes, sets, &mut state, &mut kids, c, depth));
                        continue;
                    }
                    Some(&h) if h != NOT_WALKED && h != ON_PATH => h,
                    // A leaf (a scalar, a shared value), or a container on the path.
                    _ => 1,
                };
                if top.depth.saturating_add(u64::from(h)) > max {
                    return Err(over);
                }
                top.tallest = top.tallest.max(h);
                continue;
            }
            // Every child walked: the container's height is known.
            let Some(done) = path.pop() else { break };
            kids.truncate(done.start);
            let h = done.tallest.saturating_add(1).min(ON_PATH - 1);
            if let Some(s) = state.get_mut(done.id.index()) {
                *s = h;
            }
            if let Some(parent) = path.last_mut() {
                parent.tallest = parent.tallest.max(h);
            }
        }
    }
    Ok(())
}

/// [`walk_depth`]'s state of a node not walked yet.
const NOT_WALKED: u32 = 0;
/// [`walk_depth`]'s state of a container on the current path.
const ON_PATH: u32 = u32::MAX;

/// A container being walked by [`walk_depth`]: its children are `kids[next..end]`.
struct Frame {
    id: NodeId,
    depth: u64,
    start: usize,
    next: usize,
    end: usize,
    /// The tallest child's height so far (0: none yet; at most the arena's containers + 1,
    /// which fits: node ids are `u32`).
    tallest: u32,
}

/// Puts the container `id`, at `depth`, on the path: its children (a set's in `sets` order)
/// onto `kids`.
fn enter(
    nodes: &[Value<'_>],
    sets: Option<&SetOrders>,
    state: &mut [u32],
    kids: &mut Vec<NodeId>,
    id: NodeId,
    depth: u64,
) -> Frame {
    let start = kids.len();
    if let Some(v) = nodes.get(id.index()) {
        match sets.and_then(|s| s.items(id)) {
            Some(sorted) if matches!(v, Value::Set(_) | Value::FrozenSet(_)) => {
                kids.extend_from_slice(sorted);
            }
            _ => v.for_each_child(|c| kids.push(c)),
        }
    }
    if let Some(s) = state.get_mut(id.index()) {
        *s = ON_PATH;
    }
    Frame {
        id,
        depth,
        start,
        next: start,
        end: kids.len(),
        tallest: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[u32]) -> Value<'static> {
        Value::List(items.iter().map(|&i| NodeId(i)).collect())
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
}
