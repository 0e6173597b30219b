//! A decoded [`Document`] turned into Python objects. With `api.rs`, the only files that use
//! the picklewarden library's API (here: the document's views).
//!
//! A document is a graph in creation order: node `i` was made by the `i`-th value-making
//! opcode. A tuple or frozenset is made from items that already exist, so its items have lower
//! indices; a list, dict, set or record is made empty and filled later (APPENDS, SETITEMS,
//! ADDITEMS, BUILD), possibly with values made after it, itself included. Only the nodes the
//! roots reach are made (a document also holds what the pickle popped, and the arguments of
//! native constructors, such as the Latin-1 text of `_codecs.encode`).
//!
//! Without classes of the caller's, in two passes:
//! 1. in index order: tuples, frozensets, globals and records (a record empty), and the
//!    scalars reached more than once (so that they stay one object, as pickle's memo keeps
//!    them); a scalar reached once is made where it is used;
//! 2. in reverse index order: each list, dict and set made with its items (its items made
//!    after it are done by then; one made before it, or itself, is made empty then and filled
//!    when its turn comes), and each record filled.
//!
//! With classes (`classes=`), every node is made in pass 1 in index order (lists, dicts and
//! sets empty), a mapped record by its class from its arguments completed first; pass 2
//! completes every value after what it refers to (post-order, on an explicit stack), so that
//! BUILD and dict insertion see finished values, as they do in CPython.
//!
//! Nothing recurses: every walk has an explicit stack.

use std::collections::HashMap;

use picklewarden::{CallKind, Document, NodeId, Value};
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyComplex, PyDict, PyFloat, PyFrozenSet, PyList, PySet, PyTuple,
};

use crate::api::{refused_own, types_attr, Options, GLOBAL, REBUILD, RECORD};

/// The nodes a walk's stack, and the list of pass 2's containers, hold before they grow.
const WALK_ROOM: usize = 1024;

/// The bits of [`Builder::refs`] that count how many times a node is reached (0, 1, 2 for
/// more).
const COUNT: u8 = 0b011;
/// The bit of [`Builder::refs`] set on a node that is not a scalar ([`is_scalar`]).
const STRUCTURED: u8 = 0b100;

/// Whether `v` refers to no other node (made by [`Builder::scalar`]).
fn is_scalar(v: &Value<'_>) -> bool {
    matches!(
        v,
        Value::None
            | Value::Bool(_)
            | Value::Int(_)
            | Value::BigInt(_)
            | Value::Float(_)
            | Value::Complex(..)
            | Value::Str(_)
            | Value::Bytes(_)
            | Value::ByteArray(_)
    )
}

/// Pass-2 state of a node in the completion walk (classes mode).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Done {
    No,
    Open,
    Yes,
}

pub(crate) struct Builder<'py, 'd> {
    py: Python<'py>,
    doc: &'d Document<'d>,
    /// The Python object of each arena node made and kept.
    objs: Vec<Option<Bound<'py, PyAny>>>,
    /// How many times each node is reached from a container or a root ([`COUNT`]: 0, 1, or
    /// 2 for more), and whether it is a scalar ([`STRUCTURED`] clear).
    refs: Vec<u8>,
    /// The caller's classes (`classes=`), `None` when none were given.
    classes: Option<&'d HashMap<String, Bound<'py, PyAny>>>,
    /// Classes mode: every node is made in pass 1 and completed in post-order.
    keep_all: bool,
    done: Vec<Done>,
    rebuild: Option<Bound<'py, PyModule>>,
}

impl<'py, 'd> Builder<'py, 'd> {
    pub(crate) fn new(
        py: Python<'py>,
        doc: &'d Document<'d>,
        opts: &'d Options<'py>,
    ) -> PyResult<Self> {
        let n = doc.len();
        let mut objs = Vec::new();
        objs.try_reserve_exact(n)
            .map_err(|_| pyo3::exceptions::PyMemoryError::new_err("no memory for the objects"))?;
        objs.resize_with(n, || None);
        let classes = opts.classes();
        Ok(Builder {
            py,
            doc,
            objs,
            refs: Vec::new(),
            classes,
            keep_all: classes.is_some(),
            done: Vec::new(),
            rebuild: None,
        })
    }

    fn missing(&self, id: NodeId) -> PyErr {
        refused_own(
            self.py,
            "rebuild_order",
            format!(
                "value {} is used before it is made (a class given in classes= was called with \
                 arguments that changed after the call); decode without classes= to get records",
                id.index()
            ),
        )
    }

    /// The object of `id`: the one kept for it; else a scalar reached once (or a shared value:
    /// None, bools, small ints) made now; else a list, dict or set not made yet, made empty
    /// and kept (pass 2 fills it).
    pub(crate) fn obj(&mut self, id: NodeId) -> PyResult<Bound<'py, PyAny>> {
        // A scalar reached once is never kept (unless classes mode keeps all): its flags
        // (a byte a node) say so without reading its slot (eight).
        let once_scalar = !self.keep_all && self.refs.get(id.index()) == Some(&1);
        if !id.is_shared() && !once_scalar {
            if let Some(Some(o)) = self.objs.get(id.index()) {
                return Ok(o.clone());
            }
        }
        let Some(v) = self.doc.get(id) else {
            return Err(self.missing(id));
        };
        match v {
            Value::List(_) | Value::Dict(_) | Value::Set(_) if !self.keep_all => {
                let o = self.empty(v)?;
                self.keep(id, &o);
                Ok(o)
            }
            _ => match self.scalar(v)? {
                Some(o) => Ok(o),
                None => Err(self.missing(id)),
            },
        }
    }

    fn keep(&mut self, id: NodeId, o: &Bound<'py, PyAny>) {
        if let Some(slot) = self.objs.get_mut(id.index()) {
            *slot = Some(o.clone());
        }
    }

    fn is_kept(&self, id: NodeId) -> bool {
        matches!(self.objs.get(id.index()), Some(Some(_)))
    }

    fn empty(&self, v: Value<'_>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match v {
            Value::Dict(_) => PyDict::new(self.py).into_any(),
            Value::Set(_) => PySet::empty(self.py)?.into_any(),
            _ => PyList::empty(self.py).into_any(),
        })
    }

    /// The object of a value that refers to no other node, or `None` for one that does.
    fn scalar(&self, v: Value<'_>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = self.py;
        Ok(Some(match v {
            Value::None => py.None().into_bound(py),
            Value::Bool(b) => PyBool::new(py, b).to_owned().into_any(),
            Value::Int(i) => i.into_pyobject(py)?.into_any(),
            Value::BigInt(b) => b.into_pyobject(py)?.into_any(),
            Value::Float(f) => PyFloat::new(py, f).into_any(),
            Value::Complex(re, im) => PyComplex::from_doubles(py, re, im).into_any(),
            Value::Str(s) => crate::text::str_of(py, &s)?,
            // The protocol 0-2 form (`_codecs.encode(text, 'latin1')`) transcoded from its
            // UTF-8 straight into the new bytes object.
            Value::Bytes(b) => match b.as_slice() {
                Some(s) => PyBytes::new(py, s).into_any(),
                None => PyBytes::new_with(py, b.len(), |buf| {
                    if picklewarden::copy_bytes_into(&b, buf) {
                        Ok(())
                    } else {
                        Err(pyo3::exceptions::PySystemError::new_err(
                            "bytes of a length other than the document's",
                        ))
                    }
                })?
                .into_any(),
            },
            Value::ByteArray(b) => PyByteArray::new(py, b).into_any(),
            _ => return Ok(None),
        }))
    }

    /// A list of the objects of `ids`, made straight into the list (no vector in between:
    /// for a list of 5 million ints that is 40 MB less to fault in).
    fn list_of(&mut self, ids: &[NodeId]) -> PyResult<Bound<'py, PyList>> {
        let py = self.py;
        let mut failed: Option<PyErr> = None;
        let list = PyList::new(
            py,
            ids.iter().map(|&i| match self.obj(i) {
                Ok(o) => o,
                Err(e) => {
                    failed.get_or_insert(e);
                    py.None().into_bound(py)
                }
            }),
        )?;
        match failed {
            Some(e) => Err(e),
            None => Ok(list),
        }
    }

    /// A tuple of the objects of `ids`, as [`Builder::list_of`].
    fn tuple_of(&mut self, ids: &[NodeId]) -> PyResult<Bound<'py, PyTuple>> {
        let py = self.py;
        let mut failed: Option<PyErr> = None;
        let tuple = PyTuple::new(
            py,
            ids.iter().map(|&i| match self.obj(i) {
                Ok(o) => o,
                Err(e) => {
                    failed.get_or_insert(e);
                    py.None().into_bound(py)
                }
            }),
        )?;
        match failed {
            Some(e) => Err(e),
            None => Ok(tuple),
        }
    }

    fn objs_of(&mut self, ids: &[NodeId]) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let mut out = Vec::with_capacity(ids.len());
        for &i in ids {
            out.push(self.obj(i)?);
        }
        Ok(out)
    }

    fn rebuild(&mut self) -> PyResult<Bound<'py, PyModule>> {
        if let Some(m) = &self.rebuild {
            return Ok(m.clone());
        }
        let py = self.py;
        let m = REBUILD
            .get_or_try_init(py, || py.import("picklewarden._rebuild").map(Bound::unbind))?
            .bind(py)
            .clone();
        self.rebuild = Some(m.clone());
        Ok(m)
    }

    /// The caller's class for a global, by its name as written or as CPython 3 finds it.
    fn class_of(&self, g: &picklewarden::Global<'_>) -> Option<Bound<'py, PyAny>> {
        let classes = self.classes?;
        let written = format!("{}.{}", g.module, g.name);
        if let Some(c) = classes.get(&written) {
            return Some(c.clone());
        }
        let (m, n) = g.python3_name();
        classes.get(&format!("{m}.{n}")).cloned()
    }

    /// How many times the roots and containers reach each node (saturating at 2; 0 for a
    /// node no root reaches), with [`STRUCTURED`] set on a node that is not a scalar (made
    /// or kept in pass 1, or filled in pass 2): pass 1 then passes over a scalar reached once
    /// without viewing it. Returns the walk's stack, empty, for pass 2's list to reuse its
    /// room (one allocation a build less).
    fn count_refs(&mut self) -> Vec<NodeId> {
        let doc = self.doc;
        let mut refs = vec![0u8; doc.len()];
        // Room for a small document's walk at once (it grows for a larger one).
        let mut stack: Vec<NodeId> = Vec::with_capacity(doc.len().min(WALK_ROOM));
        let reach = |id: NodeId, refs: &mut Vec<u8>, stack: &mut Vec<NodeId>| {
            if id.is_shared() {
                return;
            }
            if let Some(r) = refs.get_mut(id.index()) {
                if *r == 0 {
                    stack.push(id);
                }
                *r = (*r & STRUCTURED) | (*r & COUNT).saturating_add(1).min(2);
            }
        };
        for &r in doc.roots() {
            reach(r, &mut refs, &mut stack);
        }
        while let Some(id) = stack.pop() {
            if let Some(v) = doc.get(id) {
                if !is_scalar(&v) {
                    if let Some(r) = refs.get_mut(id.index()) {
                        *r |= STRUCTURED;
                    }
                    v.for_each_child(|c| reach(c, &mut refs, &mut stack));
                }
            }
        }
        self.refs = refs;
        stack
    }

    fn reached(&self, id: NodeId) -> u8 {
        self.refs.get(id.index()).map_or(0, |r| r & COUNT)
    }

    /// Makes the objects of every node the roots reach.
    pub(crate) fn build_all(&mut self) -> PyResult<()> {
        let doc = self.doc;
        let mut later = self.count_refs();
        if self.keep_all {
            self.done = vec![Done::No; doc.len()];
        }
        // The lists, dicts, sets and records, for pass 2 (in the walk's emptied stack).
        later.clear();
        for id in doc.ids() {
            let flags = self.refs.get(id.index()).copied().unwrap_or(0);
            let reached = flags & COUNT;
            if reached == 0 || (reached == 1 && flags & STRUCTURED == 0 && !self.keep_all) {
                continue; // unreached, or a scalar made where it is used
            }
            let Some(v) = doc.get(id) else { continue };
            let o = match v {
                Value::List(_) | Value::Dict(_) | Value::Set(_) => {
                    if !self.keep_all {
                        later.push(id);
                        continue; // made in pass 2, or empty by obj() when met earlier
                    }
                    self.empty(v)?
                }
                Value::Tuple(items) => self.tuple_of(items)?.into_any(),
                Value::FrozenSet(items) => {
                    let items = self.objs_of(items)?;
                    PyFrozenSet::new(self.py, items)?.into_any()
                }
                Value::Global(g) => match self.class_of(g) {
                    Some(c) => c,
                    None => global_value(self.py, g)?,
                },
                Value::Object(o) => {
                    later.push(id);
                    self.make_record(id, o)?
                }
                _ => {
                    if reached < 2 && !self.keep_all {
                        continue; // made where it is used
                    }
                    match self.scalar(v)? {
                        Some(o) => o,
                        None => continue,
                    }
                }
            };
            self.keep(id, &o);
        }
        if self.keep_all {
            for id in doc.ids() {
                if self.reached(id) > 0 {
                    self.complete(id, None)?;
                }
            }
            return Ok(());
        }
        for &id in later.iter().rev() {
            let Some(v) = doc.get(id) else { continue };
            match v {
                Value::List(items) if !self.is_kept(id) => {
                    let made = self.list_of(items)?;
                    if let Some(Some(list)) = self.objs.get(id.index()) {
                        // It holds itself: made empty while its items were made.
                        list.cast::<PyList>()?.set_slice(0, 0, &made)?;
                    } else {
                        self.keep(id, made.as_any());
                    }
                }
                Value::Dict(_) | Value::Set(_) if !self.is_kept(id) => {
                    let o = self.empty(v)?;
                    self.keep(id, &o);
                    self.fill(id, v)?;
                }
                Value::List(_) | Value::Dict(_) | Value::Set(_) | Value::Object(_) => {
                    self.fill(id, v)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn make_record(&mut self, id: NodeId, o: &picklewarden::Object) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let Some(Value::Global(g)) = self.doc.get(o.callable) else {
            return Err(self.missing(id));
        };
        let kind = o.kind.name();
        if let Some(cls) = self.class_of(g) {
            // Its arguments as the call received them: finished first.
            self.complete(o.args, Some(id))?;
            if let Some(k) = o.kwargs {
                self.complete(k, Some(id))?;
            }
            let args = self.obj(o.args)?;
            let kwargs = match o.kwargs {
                Some(k) => self.obj(k)?,
                None => py.None().into_bound(py),
            };
            let kind = if matches!(o.kind, CallKind::Obj) {
                "inst"
            } else {
                kind
            };
            return self
                .rebuild()?
                .getattr("instantiate")?
                .call1((cls, kind, args, kwargs));
        }
        let (m, n) = g.python3_name();
        let kwargs = match o.kwargs {
            Some(k) => self.obj(k)?,
            None => py.None().into_bound(py),
        };
        let args = self.obj(o.args)?;
        types_attr(py, &RECORD, "Record")?.call1((m, n, kind, args, kwargs))
    }

    /// Fills one list, dict, set or record, made empty, with what the pickle put in it.
    fn fill(&mut self, id: NodeId, v: Value<'_>) -> PyResult<()> {
        let py = self.py;
        match v {
            Value::List(items) if !items.is_empty() => {
                let list = self.obj(id)?;
                let items = self.list_of(items)?;
                list.cast::<PyList>()?.set_slice(0, 0, &items)?;
            }
            Value::Dict(pairs) if !pairs.is_empty() => {
                let d = self.obj(id)?;
                let d = d.cast::<PyDict>()?;
                for &(k, v) in pairs {
                    d.set_item(self.obj(k)?, self.obj(v)?)?;
                }
            }
            Value::Set(items) if !items.is_empty() => {
                let s = self.obj(id)?;
                let s = s.cast::<PySet>()?;
                for &i in items {
                    s.add(self.obj(i)?)?;
                }
            }
            Value::Object(o) => {
                let obj = self.obj(id)?;
                let Some(Value::Global(g)) = self.doc.get(o.callable) else {
                    return Err(self.missing(id));
                };
                if self.class_of(g).is_some() {
                    // The caller's class: APPENDS, SETITEMS, then BUILD, in the order
                    // pickle's save_reduce writes them.
                    let rb = self.rebuild()?;
                    if !o.listitems.is_empty() {
                        let items = PyList::new(py, self.objs_of(&o.listitems)?)?;
                        rb.getattr("extend")?.call1((&obj, items))?;
                    }
                    if !o.dictitems.is_empty() {
                        let pairs = self.pairs(&o.dictitems)?;
                        rb.getattr("setitems")?.call1((&obj, pairs))?;
                    }
                    if let Some(s) = o.state {
                        rb.getattr("build")?.call1((&obj, self.obj(s)?))?;
                    }
                    return Ok(());
                }
                if let Some(s) = o.state {
                    obj.setattr("state", self.obj(s)?)?;
                }
                if !o.listitems.is_empty() {
                    let items = PyList::new(py, self.objs_of(&o.listitems)?)?;
                    obj.getattr("listitems")?.call_method1("extend", (items,))?;
                }
                if !o.dictitems.is_empty() {
                    let pairs = self.pairs(&o.dictitems)?;
                    obj.getattr("dictitems")?.call_method1("extend", (pairs,))?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn pairs(&mut self, pairs: &[(NodeId, NodeId)]) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(self.py);
        for &(k, v) in pairs {
            let pair = PyTuple::new(self.py, [self.obj(k)?, self.obj(v)?])?;
            list.append(pair)?;
        }
        Ok(list)
    }

    /// Classes mode: completes `root` and everything it reaches, filling each list, dict, set
    /// and record after what it refers to (post-order, on an explicit stack; a cycle is cut
    /// where it closes). With `before`, every node reached must have been made before that
    /// one (the arguments of the call that made it), else the call received values this
    /// document holds only as they were later, and is refused.
    fn complete(&mut self, root: NodeId, before: Option<NodeId>) -> PyResult<()> {
        let doc = self.doc;
        let mut stack: Vec<(NodeId, bool)> = vec![(root, false)];
        while let Some((id, expanded)) = stack.pop() {
            if id.is_shared() {
                continue;
            }
            let i = id.index();
            if let Some(b) = before {
                if i >= b.index() {
                    return Err(self.missing(id));
                }
            }
            let state = self.done.get(i).copied().unwrap_or(Done::Yes);
            let Some(v) = doc.get(id) else { continue };
            if expanded {
                self.fill(id, v)?;
                if let Some(d) = self.done.get_mut(i) {
                    *d = Done::Yes;
                }
                continue;
            }
            if state != Done::No {
                continue; // finished, or open on the stack (a cycle)
            }
            if let Some(d) = self.done.get_mut(i) {
                *d = Done::Open;
            }
            stack.push((id, true));
            let mut children = Vec::new();
            match v {
                Value::Object(o) => {
                    // A mapped record's arguments were completed when it was made.
                    if let Some(Value::Global(g)) = doc.get(o.callable) {
                        if self.class_of(g).is_none() {
                            children.push(o.args);
                            children.extend(o.kwargs);
                        }
                    }
                    children.extend(o.state);
                    children.extend(o.listitems.iter().copied());
                    for &(k, v) in &o.dictitems {
                        children.push(k);
                        children.push(v);
                    }
                }
                _ => v.for_each_child(|c| children.push(c)),
            }
            for c in children.into_iter().rev() {
                if !c.is_shared() && self.done.get(c.index()).copied() == Some(Done::No) {
                    stack.push((c, false));
                }
            }
        }
        Ok(())
    }
}

/// A global used as a value: the builtin it names when it is one of the few the built-in
/// constructors stand for (what CPython's find_class returns), else an inert
/// picklewarden.Global.
fn global_value<'py>(py: Python<'py>, g: &picklewarden::Global<'_>) -> PyResult<Bound<'py, PyAny>> {
    let (m, n) = g.python3_name();
    match (m, n) {
        ("builtins", "set" | "frozenset" | "bytearray" | "bytes" | "complex") => {
            py.import("builtins")?.getattr(n)
        }
        ("_codecs", "encode") => py.import("_codecs")?.getattr(n),
        _ => types_attr(py, &GLOBAL, "Global")?.call1((m, n)),
    }
}
