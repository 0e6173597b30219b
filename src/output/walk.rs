//! One explicit-stack walk over a document's values, which the typed JSON, repr and canonical
//! pickle writers drive as [`Visitor`]s.
//!
//! The walk is depth-first in document order: a container's children in the order
//! [`Value::for_each_child`] gives them (items in order; a dict's key then value; a record's
//! callable, args, kwargs, state, listitems, dictitems), or in an order the visitor gives for
//! a set ([`Step::Sorted`], typed JSON's sorted items). It tells the visitor of each node it
//! meets ([`Visitor::enter`]), of each child slot before the child ([`Visitor::item`]), of the
//! end of each container it opened ([`Visitor::exit`]), and of a node met again after the
//! visitor numbered it ([`Visitor::reference`]). The stack holds one frame per open container,
//! however many items each has, never the call stack: its depth is what the input nests, which
//! the decoder bounded (`max_nesting_depth`), or for the canonical writer at most twice that.
//!
//! [`Marks`] is the bookkeeping the writers share: the in-degree of each node over what the
//! roots reach ([`reachable_refs`]: a node referenced twice or more gets typed JSON's `id` or
//! the canonical pickle's memo entry), dense numbers given to nodes in the order the visitor
//! gives them (typed JSON's ids, the canonical memo's indices, a walk's "seen" set), and which
//! containers are on the path from the root (repr's `[...]` for a container inside itself).

use crate::value::{Arena, NodeId, Value};

/// What the walk does with a node the visitor has entered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Nothing more: the visitor wrote all of it (or refers to it).
    Leaf,
    /// Walk its children in document order, then [`Visitor::exit`].
    Open,
    /// Walk the items of this set or frozenset in the visitor's order `n`
    /// ([`Visitor::sorted_item`]), then [`Visitor::exit`].
    Sorted(u32),
}

/// Where a child sits in its container, as [`Visitor::item`] is told before the child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Item `n` of a list, tuple, set or frozenset.
    Item(usize),
    /// The key of pair `n` of a dict.
    Key(usize),
    /// The value of pair `n` of a dict.
    Value(usize),
    /// A record's callable, args, kwargs and state.
    Callable,
    Args,
    Kwargs,
    State,
    /// Item `n` of a record's listitems.
    ListItem(usize),
    /// The key and the value of pair `n` of a record's dictitems.
    DictKey(usize),
    DictValue(usize),
}

/// A writer driven by [`Walker::walk`].
pub(crate) trait Visitor<'d> {
    /// Called before each node and each [`Visitor::exit`]: whether the walk goes on (a writer
    /// stops past its byte bound, at its deadline or at a sink's error).
    fn go_on(&mut self, marks: &Marks) -> bool;

    /// Whether the visitor may have given `id` (of value `value`) a number: the walk looks
    /// the number up only then. A visitor that numbers only shared nodes, or only containers,
    /// says so here, and the walk spares the lookup in the larger table for the others.
    #[inline]
    fn may_have_number(&self, marks: &Marks, id: NodeId, value: &Value<'d>) -> bool {
        let _ = (marks, id, value);
        true
    }

    /// `id` is met again and the visitor gave it number `number` ([`Marks::give`]).
    fn reference(&mut self, id: NodeId, number: u32);

    /// `id` (of value `value`) is met and has no number: write it, or its opening.
    fn enter(&mut self, marks: &mut Marks, id: NodeId, value: Value<'d>) -> Step;

    /// The child in `slot` of the open container `parent` comes next.
    fn item(&mut self, parent: &Value<'d>, slot: Slot);

    /// The state of the record `id` (its BUILD's, [`Slot::State`]) comes next, after its
    /// callable and arguments: the canonical writer makes the call here, before the state,
    /// as CPython's `save_reduce` does.
    #[inline]
    fn before_state(&mut self, marks: &mut Marks, id: NodeId) {
        let _ = (marks, id);
    }

    /// The children of the container `id` (of value `value`) are done.
    fn exit(&mut self, marks: &mut Marks, id: NodeId, value: Value<'d>);

    /// Item `k` of the visitor's order `order` ([`Step::Sorted`]), `None` past the last.
    fn sorted_item(&self, order: u32, k: usize) -> Option<NodeId> {
        let _ = (order, k);
        None
    }
}

/// No number given ([`Marks::number`]).
const UNNUMBERED: u32 = u32::MAX;
/// A frame walked in document order.
const DOCUMENT_ORDER: u32 = u32::MAX;

/// The bookkeeping a walk keeps for its visitor: in-degrees, numbers and the current path.
#[derive(Debug, Default)]
pub(crate) struct Marks {
    /// The arena's length: the nodes that can be numbered or on the path.
    nodes: usize,
    /// In-degree of each arena node over what the roots reach (empty when not counted).
    refs: Vec<u8>,
    /// The number of each arena node, or [`UNNUMBERED`]; allocated at the first number.
    numbers: Vec<u32>,
    next: u32,
    /// The nodes numbered since the last [`Marks::forget_numbers`], when that is cheaper than
    /// clearing the whole table (typed JSON's sort keys number a few nodes per set item).
    numbered: Option<Vec<u32>>,
    /// Whether each arena node is an open container of the walk (empty when not tracked).
    path: Vec<bool>,
    /// Open containers.
    depth: usize,
}

impl Marks {
    /// The in-degree of `id` ([`reachable_refs`]; 0 when not counted or not an arena node).
    #[inline]
    pub(crate) fn refs(&self, id: NodeId) -> u8 {
        self.refs.get(id.index()).copied().unwrap_or(0)
    }

    /// Whether `id` is reached twice or more from the roots (or was marked so).
    #[inline]
    pub(crate) fn is_shared(&self, id: NodeId) -> bool {
        self.refs(id) >= 2
    }

    /// The number given to `id`, if any.
    #[inline]
    pub(crate) fn number(&self, id: NodeId) -> Option<u32> {
        self.numbers
            .get(id.index())
            .copied()
            .filter(|&n| n != UNNUMBERED)
    }

    /// Gives `id` the next number and returns it (the walk then reports `id` as
    /// [`Visitor::reference`] instead of entering it). Ids that are not arena nodes (shared
    /// values) take a number but are not marked.
    pub(crate) fn give(&mut self, id: NodeId) -> u32 {
        if self.numbers.is_empty() && self.nodes > 0 {
            self.numbers = vec![UNNUMBERED; self.nodes];
        }
        let n = self.take();
        if let Some(slot) = self.numbers.get_mut(id.index()) {
            *slot = n;
            if let Some(list) = self.numbered.as_mut() {
                list.push(id.0);
            }
        }
        n
    }

    /// Allocates the table of numbers now (a number for each arena node), so that numbering
    /// cannot fail later; `false` when the allocation fails.
    pub(crate) fn reserve_numbers(&mut self) -> bool {
        if self.numbers.is_empty() && self.nodes > 0 {
            if self.numbers.try_reserve_exact(self.nodes).is_err() {
                return false;
            }
            self.numbers.resize(self.nodes, UNNUMBERED);
        }
        true
    }

    /// The next number, for something that is not a node (the canonical writer's own
    /// globals share the memo's indices).
    pub(crate) fn take(&mut self) -> u32 {
        let n = self.next;
        self.next = self.next.saturating_add(1);
        n
    }

    /// Forgets every number given, and numbers from 0 again.
    pub(crate) fn forget_numbers(&mut self) {
        match self.numbered.as_mut() {
            Some(list) => {
                for i in list.drain(..) {
                    if let Some(slot) = self.numbers.get_mut(i as usize) {
                        *slot = UNNUMBERED;
                    }
                }
            }
            None => self.numbers.fill(UNNUMBERED),
        }
        self.next = 0;
    }

    /// Whether the container `id` is open: `id` is being walked and is met inside itself.
    /// Always false unless the walker tracks the path ([`Walker::track_path`]).
    #[inline]
    pub(crate) fn on_path(&self, id: NodeId) -> bool {
        self.path.get(id.index()).copied().unwrap_or(false)
    }

    /// How many containers are open.
    #[inline]
    pub(crate) fn depth(&self) -> usize {
        self.depth
    }

    #[inline]
    fn set_path(&mut self, id: NodeId, on: bool) {
        if let Some(p) = self.path.get_mut(id.index()) {
            *p = on;
        }
    }
}

/// An open container: its value and the index of its next child.
struct Frame<'d> {
    id: NodeId,
    value: Value<'d>,
    next: usize,
    /// [`DOCUMENT_ORDER`], or the visitor's order of the set's items.
    order: u32,
}

/// The walk: the arena, the stack of open containers and the [`Marks`].
pub(crate) struct Walker<'d, 'a> {
    arena: &'d Arena<'a>,
    frames: Vec<Frame<'d>>,
    pub(crate) marks: Marks,
}

impl<'d, 'a> Walker<'d, 'a> {
    /// A walker over `arena` with in-degrees `refs` (empty: none counted).
    pub(crate) fn new(arena: &'d Arena<'a>, refs: Vec<u8>) -> Walker<'d, 'a> {
        Walker {
            arena,
            frames: Vec::new(),
            marks: Marks {
                nodes: arena.len(),
                refs,
                ..Marks::default()
            },
        }
    }

    /// Tracks which containers are open ([`Marks::on_path`]). A visitor that uses it must not
    /// open a container that is on the path again.
    pub(crate) fn track_path(mut self) -> Walker<'d, 'a> {
        self.marks.path = vec![false; self.marks.nodes];
        self
    }

    /// Keeps a list of the nodes numbered, so that [`Marks::forget_numbers`] costs what was
    /// numbered, not the arena's length.
    pub(crate) fn forget_cheaply(mut self) -> Walker<'d, 'a> {
        self.marks.numbered = Some(Vec::new());
        self
    }

    /// Walks from `root`, telling `visitor`; `false` when the visitor stopped the walk
    /// ([`Visitor::go_on`]). Numbers persist from one walk to the next (a stream's pickles
    /// share one memo); an earlier walk that stopped leaves nothing open.
    pub(crate) fn walk<V: Visitor<'d>>(&mut self, root: NodeId, visitor: &mut V) -> bool {
        while let Some(f) = self.frames.pop() {
            self.marks.set_path(f.id, false);
        }
        self.marks.depth = 0;
        if !visitor.go_on(&self.marks) {
            return false;
        }
        self.visit(root, visitor);
        while let Some(top) = self.frames.last_mut() {
            let k = top.next;
            let child = if top.order == DOCUMENT_ORDER {
                child(&top.value, k)
            } else {
                visitor
                    .sorted_item(top.order, k)
                    .map(|id| (id, Slot::Item(k)))
            };
            if let Some((id, slot)) = child {
                top.next = k + 1;
                visitor.item(&top.value, slot);
                if slot == Slot::State {
                    let record = top.id;
                    visitor.before_state(&mut self.marks, record);
                }
                if !visitor.go_on(&self.marks) {
                    return false;
                }
                self.visit(id, visitor);
                continue;
            }
            if !visitor.go_on(&self.marks) {
                return false;
            }
            if let Some(f) = self.frames.pop() {
                self.marks.set_path(f.id, false);
                self.marks.depth = self.frames.len();
                visitor.exit(&mut self.marks, f.id, f.value);
            }
        }
        true
    }

    /// Meets `id`: a reference if numbered, else entered (and opened if the visitor says so).
    /// An id outside the arena (a document never holds one) is met as `None`.
    #[inline(always)]
    fn visit<V: Visitor<'d>>(&mut self, id: NodeId, visitor: &mut V) {
        let value = self.arena.get(id).unwrap_or(Value::None);
        if visitor.may_have_number(&self.marks, id, &value) {
            if let Some(n) = self.marks.number(id) {
                visitor.reference(id, n);
                return;
            }
        }
        let order = match visitor.enter(&mut self.marks, id, value) {
            Step::Leaf => return,
            Step::Open => DOCUMENT_ORDER,
            Step::Sorted(order) => order,
        };
        self.marks.set_path(id, true);
        self.frames.push(Frame {
            id,
            value,
            next: 0,
            order,
        });
        self.marks.depth = self.frames.len();
    }
}

/// The `k`-th node `value` refers to, in document order, and its slot; `None` past the last.
#[inline]
pub(crate) fn child(value: &Value<'_>, k: usize) -> Option<(NodeId, Slot)> {
    match *value {
        Value::List(items) | Value::Tuple(items) | Value::Set(items) | Value::FrozenSet(items) => {
            items.get(k).map(|&id| (id, Slot::Item(k)))
        }
        Value::Dict(pairs) => pairs.get(k / 2).map(|&(key, v)| {
            if k.is_multiple_of(2) {
                (key, Slot::Key(k / 2))
            } else {
                (v, Slot::Value(k / 2))
            }
        }),
        Value::Object(o) => {
            let fixed = [
                (Some(o.callable), Slot::Callable),
                (Some(o.args), Slot::Args),
                (o.kwargs, Slot::Kwargs),
                (o.state, Slot::State),
            ];
            let mut n = 0;
            for (id, slot) in fixed {
                if let Some(id) = id {
                    if n == k {
                        return Some((id, slot));
                    }
                    n += 1;
                }
            }
            let k = k - n;
            if let Some(&id) = o.listitems.get(k) {
                return Some((id, Slot::ListItem(k)));
            }
            let k = k - o.listitems.len();
            o.dictitems.get(k / 2).map(|&(key, v)| {
                if k.is_multiple_of(2) {
                    (key, Slot::DictKey(k / 2))
                } else {
                    (v, Slot::DictValue(k / 2))
                }
            })
        }
        _ => None,
    }
}

/// The in-degree of each arena node (saturating at 255) over what `roots` reach, and whether
/// they reach a set or frozenset. Only reachable nodes count: an unreachable cycle (values
/// popped from the stack) must not be mistaken for a shared value, nor written. A node with an
/// in-degree of 2 or more is written once and referred to after (typed JSON's ids, the
/// canonical pickle's memo). Each container is expanded once, in any order (the counts do not
/// depend on it).
pub(crate) fn reachable_refs(arena: &Arena<'_>, roots: &[NodeId]) -> (Vec<u8>, bool) {
    let mut refs = vec![0u8; arena.len()];
    let mut seen = vec![false; arena.len()];
    let mut work: Vec<NodeId> = Vec::new();
    for &r in roots {
        if let Some(c) = refs.get_mut(r.index()) {
            *c = c.saturating_add(1);
        }
        work.push(r);
    }
    let mut any_set = false;
    while let Some(id) = work.pop() {
        match seen.get_mut(id.index()) {
            Some(s) if !*s => *s = true,
            _ => continue,
        }
        let Some(v) = arena.get(id) else {
            continue;
        };
        any_set |= matches!(v, Value::Set(_) | Value::FrozenSet(_));
        v.for_each_child(|c| {
            if let Some(n) = refs.get_mut(c.index()) {
                *n = n.saturating_add(1);
            }
            // Only containers have children to count: a scalar (or a shared value) is not
            // queued at all (a list of five million ints queued five million).
            if arena.get(c).is_some_and(|v| v.is_container()) {
                work.push(c);
            }
        });
    }
    (refs, any_set)
}
