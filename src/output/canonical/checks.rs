//! What a canonical pickle can write back, before anything is written: the records (each
//! call made again as the input made it), the containers on cycles (memoized even when
//! reached once), and the documents that have no canonical pickle ([`Unwritable`]).

use super::{Protocol, Unwritable};
use crate::output::walk::{reachable_refs, Marks, Slot, Step, Visitor, Walker};
use crate::value::{Arena, CallKind, Document, NodeId, Value};

/// What the writer needs: the records, in the order the input made them, and each node's
/// in-degree, at least 2 for a container on a cycle (so that it is memoized).
pub(super) struct Plan {
    pub(super) records: Vec<NodeId>,
    pub(super) refs: Vec<u8>,
}

/// The plan for writing `doc` at `protocol`.
///
/// # Errors
/// [`Unwritable::Stream`], [`Unwritable::Record`], or at protocol 2 [`Unwritable::Protocol`]
/// for a set or frozenset on a cycle.
pub(super) fn plan(doc: &Document<'_>, protocol: Protocol) -> Result<Plan, Unwritable> {
    if doc.roots.len() > 1 && doc.changed_earlier {
        return Err(Unwritable::Stream);
    }
    // A persistent id kept as data: written back, CPython would read the id itself where the
    // input meant the object persistent_load makes of it.
    if !doc.persistent_ids().is_empty() {
        return Err(Unwritable::Record);
    }
    // Every record's call is made where the input made it: in the order of the calls, in the
    // pickle that made it, before that pickle's value, each written once (memoized when the
    // value reaches it, popped), whether the value reaches it or not, since CPython made the
    // call either way. Written where the value reaches it instead, calls would come in the
    // output's order (Mitogen's `_unpickle_context` returns the Context its Router made first
    // for an id, so the order decides the name), and a record inside a tuple on a cycle would
    // be called again for the tuple's outer copy.
    let records: Vec<NodeId> = doc
        .ids()
        .filter(|&id| matches!(doc.get(id), Some(Value::Object(_))))
        .collect();
    let mut starts: Vec<NodeId> = doc.roots.clone();
    starts.extend(&records);
    let (mut refs, _) = reachable_refs(&doc.arena, &starts);
    // A container on a cycle is memoized even when one reference reaches it: the list of
    // `t = ([t],)` is written inside `t`, then again inside the copy of `t` its own items make,
    // and only its memo entry ends that (without it, a 15-byte pickle was written without
    // end).
    for ((r, on), id) in refs
        .iter_mut()
        .zip(on_cycles(&doc.arena, &starts))
        .zip(doc.ids())
    {
        let Some(v) = doc.get(id) else { continue };
        if on {
            *r = (*r).max(2);
            match v {
                // A record is never on a cycle when it can be written back (what its
                // arguments reached did not change after the call); refuse one that is.
                Value::Object(_) => return Err(Unwritable::Record),
                Value::Set(_) | Value::FrozenSet(_) if protocol == Protocol::V2 => {
                    return Err(Unwritable::Protocol {
                        protocol: 2,
                        what: "a set or frozenset on a cycle",
                    })
                }
                _ => {}
            }
        }
    }
    // Every record is written (above), so every record must be its call alone, or its call
    // and a BUILD state a policy check found to be the one its writer writes (a numpy dtype's
    // or ndarray's, `Document::canonical_build`), written again as the writer wrote it.
    let unreplayable = records.iter().any(|&id| match doc.get(id) {
        Some(Value::Object(o)) => {
            o.kind == CallKind::NewObjEx
                || (o.state.is_some() && !(o.kind == CallKind::Reduce && doc.canonical_build(id)))
                || !o.listitems.is_empty()
                || !o.dictitems.is_empty()
        }
        _ => false,
    });
    if !records.is_empty() && (!doc.records_replayable || unreplayable) {
        return Err(Unwritable::Record);
    }
    Ok(Plan { records, refs })
}

/// Which arena nodes lie on a cycle of containers that the roots reach: those in a strongly
/// connected component of more than one node, or with an edge to themselves. Tarjan's
/// algorithm as a visitor of the document walk: the walk's numbers are the visit order, and a
/// record's state, listitems and dictitems are followed too (the writer refuses a record that
/// has any, but a cycle through one must still be seen: a list reached only through a
/// record's arguments is on a cycle all the same).
fn on_cycles(arena: &Arena<'_>, roots: &[NodeId]) -> Vec<bool> {
    let n = arena.len();
    let mut t = Tarjan {
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        open: Vec::new(),
        cyclic: vec![false; n],
    };
    let mut walker = Walker::new(arena, Vec::new());
    for &root in roots {
        walker.walk(root, &mut t);
    }
    t.cyclic
}

/// The state of [`on_cycles`]' walk: each container's lowest reachable visit order, the
/// containers of the components still open (Tarjan's stack), and the open containers of the
/// walk, innermost last (whose edges are being followed).
struct Tarjan {
    low: Vec<u32>,
    on_stack: Vec<bool>,
    stack: Vec<NodeId>,
    open: Vec<NodeId>,
    cyclic: Vec<bool>,
}

impl Tarjan {
    fn lower(&mut self, v: NodeId, to: u32) {
        if let Some(l) = self.low.get_mut(v.index()) {
            *l = (*l).min(to);
        }
    }

    fn set(flags: &mut [bool], v: NodeId, on: bool) {
        if let Some(f) = flags.get_mut(v.index()) {
            *f = on;
        }
    }
}

impl<'d> Visitor<'d> for Tarjan {
    fn go_on(&mut self, _: &Marks) -> bool {
        true
    }

    /// Only containers are numbered.
    #[inline]
    fn may_have_number(&self, _: &Marks, _: NodeId, value: &Value<'d>) -> bool {
        value.is_container()
    }

    /// An edge to a container met before (scalars are never numbered).
    fn reference(&mut self, w: NodeId, index: u32) {
        let Some(&v) = self.open.last() else {
            return; // a root met before
        };
        if w == v {
            Tarjan::set(&mut self.cyclic, v, true);
        }
        if self.on_stack.get(w.index()) == Some(&true) {
            self.lower(v, index);
        }
    }

    fn enter(&mut self, marks: &mut Marks, id: NodeId, value: Value<'d>) -> Step {
        if !value.is_container() {
            return Step::Leaf;
        }
        let index = marks.give(id);
        if let Some(l) = self.low.get_mut(id.index()) {
            *l = index;
        }
        Tarjan::set(&mut self.on_stack, id, true);
        self.stack.push(id);
        self.open.push(id);
        Step::Open
    }

    fn item(&mut self, _: &Value<'d>, _: Slot) {}

    fn exit(&mut self, marks: &mut Marks, v: NodeId, _: Value<'d>) {
        self.open.pop();
        let lv = self.low.get(v.index()).copied().unwrap_or(0);
        if let Some(&u) = self.open.last() {
            self.lower(u, lv);
        }
        if Some(lv) == marks.number(v) {
            // v roots a component: the stack from v up holds it.
            let at = self
                .stack
                .iter()
                .rposition(|&x| x == v)
                .unwrap_or(self.stack.len());
            let members = self.stack.len() - at;
            for x in self.stack.drain(at..) {
                Tarjan::set(&mut self.on_stack, x, false);
                if members > 1 {
                    Tarjan::set(&mut self.cyclic, x, true);
                }
            }
        }
    }
}
