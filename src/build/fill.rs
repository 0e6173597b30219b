//! APPEND, APPENDS, SETITEM, SETITEMS and BUILD: filling a list, dict or record made earlier.

use std::mem;

use super::budget::ITEM_BYTES;
use super::keys::reader::{text_size, Container};
use super::machine::{internal, Machine};
use crate::error::{ErrorKind, Result};
use crate::limits::LimitName;
use crate::value::{Fat, Node, NodeId, Value};

impl<'a, 'p> Machine<'a, 'p> {
    /// APPEND/APPENDS: extend a list, or add listitems to a record that allows items.
    /// The items are `self.stack[start..]`; on success they are popped.
    pub(super) fn extend(&mut self, target: NodeId, start: usize) -> Result<()> {
        let allowed = self.items_allowed(target)?;
        let max = self.limits.max_container_items;
        let n = self.stack.len().saturating_sub(start);
        let extra = n as u64 * ITEM_BYTES;
        let current = match self.get(target)? {
            Value::List(l) => l.len(),
            Value::Object(o) => o.listitems.len(),
            _ => return Err(self.err(ErrorKind::TypeMismatch("APPEND target is not a list"))),
        };
        if !allowed {
            return Err(self.form_refused(target, "APPEND"));
        }
        let total = (current + n) as u64;
        if total > max {
            return Err(self.limit(LimitName::MaxContainerItems, total));
        }
        self.charge(extra)?;
        let items = self.stack.get(start..).unwrap_or_default();
        // A list can be the document's second-largest allocation: grown fallibly, as the arena.
        let a = &mut self.arena;
        let grown = match a.nodes.get(target.index()).copied() {
            // The list's items are the last of the pool (or it has none): they grow in place.
            Some(Node::List { start: s, len })
                if len == 0 || s as usize + len as usize == a.items.len() =>
            {
                let s = if len == 0 { a.items.len() } else { s as usize };
                let end = s.checked_add(len as usize + items.len());
                match (
                    u32::try_from(s),
                    end.map(u32::try_from),
                    a.items.try_reserve(items.len()),
                ) {
                    (Ok(s32), Some(Ok(end)), Ok(())) => {
                        a.items.extend_from_slice(items);
                        if let Some(node) = a.nodes.get_mut(target.index()) {
                            *node = Node::List {
                                start: s32,
                                len: end - s32,
                            };
                        }
                        Ok(())
                    }
                    _ => Err(()),
                }
            }
            // Other containers were made since: the list moves to a `Vec` of its own, where it
            // grows from now on.
            Some(Node::List { start: s, len }) => {
                let old = a
                    .items
                    .get(s as usize..s as usize + len as usize)
                    .unwrap_or_default();
                let mut v = Vec::new();
                match (
                    u32::try_from(a.vecs.len()),
                    v.try_reserve(old.len() + items.len()),
                    a.vecs.try_reserve(1),
                ) {
                    (Ok(i), Ok(()), Ok(())) => {
                        v.extend_from_slice(old);
                        v.extend_from_slice(items);
                        a.vecs.push(v);
                        if let Some(node) = a.nodes.get_mut(target.index()) {
                            *node = Node::ListVec(i);
                        }
                        Ok(())
                    }
                    _ => Err(()),
                }
            }
            Some(Node::ListVec(i)) => match a.vecs.get_mut(i as usize) {
                Some(v) => v
                    .try_reserve(items.len())
                    .map(|()| v.extend_from_slice(items))
                    .map_err(|_| ()),
                None => Err(()),
            },
            Some(Node::Fat(i)) => match a.fat.get_mut(i as usize) {
                Some(Fat::Object(o)) => o
                    .listitems
                    .try_reserve(items.len())
                    .map(|()| o.listitems.extend_from_slice(items))
                    .map_err(|_| ()),
                _ => return Err(self.r.err(internal())),
            },
            _ => return Err(self.r.err(internal())),
        };
        if grown.is_err() {
            return Err(self.err(ErrorKind::AllocationFailed { bytes: extra }));
        }
        self.heights.filled(target, items);
        self.stack.truncate(start);
        Ok(())
    }

    /// Whether APPEND/SETITEM may add to `target`: always for lists and dicts, for a record
    /// only when its rule allows the `items` form.
    pub(super) fn items_allowed(&self, target: NodeId) -> Result<bool> {
        // Most decodes seal nothing: no lookup (and no hash of `target`) then.
        if let Some(&callable) = (!self.sealed.is_empty())
            .then(|| self.sealed.get(&target))
            .flatten()
        {
            let name = match self.get(callable)? {
                Value::Global(g) => format!("{}.{}", g.module, g.name),
                _ => "a record".to_owned(),
            };
            return Err(self.rejected(&format!(
                "{name}: a list or dict its argument schema or check read changed after the call"
            )));
        }
        // Only a record (a side-table value) may refuse: the rest answer from the node.
        if !matches!(self.arena.node(target), Some(Node::Fat(_))) {
            return Ok(true);
        }
        match self.get(target)? {
            Value::Object(o) => {
                let rule = self.rule_of(o.callable)?;
                Ok(self.policy.rule(rule).is_some_and(|r| r.forms.items))
            }
            _ => Ok(true),
        }
    }

    /// [`ErrorKind::FormNotAllowed`] of `form` on the record `target`, naming its global.
    #[cold]
    fn form_refused(&self, target: NodeId, form: &'static str) -> crate::Error {
        let rule = match self.get(target) {
            Ok(Value::Object(o)) => self.rule_of(o.callable).ok(),
            _ => None,
        };
        match rule.and_then(|r| self.policy.rule(r)) {
            Some(r) => self.err(r.form_refused(form)),
            None => self.err(internal()),
        }
    }

    /// SETITEM/SETITEMS with a flat `[k, v, ...]` group `self.stack[start..]` (an even
    /// count, which the interpreter checked), popped on success.
    pub(super) fn fill_items(&mut self, target: NodeId, start: usize) -> Result<()> {
        let flat_len = self.stack.len().saturating_sub(start);
        if let Some(done) = self.fill_fast::<true>(target, start) {
            return done;
        }
        let allowed = self.items_allowed(target)?;
        // A dict from its node (the commonest target), without a view.
        let dict = matches!(
            self.arena.node(target),
            Some(Node::Dict { .. } | Node::DictVec(_))
        );
        match if dict {
            Value::Dict(&[])
        } else {
            self.get(target)?
        } {
            Value::Dict(_) => {
                let stack = mem::take(&mut self.stack);
                let r = self.dict_items(target, stack.get(start..).unwrap_or_default());
                self.stack = stack;
                r?;
                self.heights
                    .filled(target, self.stack.get(start..).unwrap_or_default());
                self.stack.truncate(start);
                Ok(())
            }
            Value::Object(o) => {
                if !allowed {
                    return Err(self.form_refused(target, "SETITEM"));
                }
                let total = o.dictitems.len() + flat_len / 2;
                self.check_items(total)?;
                self.charge((flat_len / 2) as u64 * 8)?;
                self.open_keys();
                let r = self.model_record_items(target, start);
                self.close_keys(r)?;
                let flat = self.stack.get(start..).unwrap_or_default();
                if let Some(Fat::Object(o)) = match self.arena.node(target) {
                    Some(Node::Fat(i)) => self.arena.fat.get_mut(i as usize),
                    _ => None,
                } {
                    o.dictitems
                        .extend(flat.chunks_exact(2).filter_map(|p| match p {
                            &[k, v] => Some((k, v)),
                            _ => None,
                        }));
                }
                self.heights.filled(target, flat);
                self.stack.truncate(start);
                Ok(())
            }
            _ => Err(self.err(ErrorKind::TypeMismatch("SETITEM target is not a dict"))),
        }
    }

    /// Runs the model of the reader's key work (src/build/keys/reader.rs) on the keys of a
    /// SETITEM/SETITEMS group `self.stack[start..]` given to the record `target`: the reader
    /// after calls the object's `__setitem__` with each (`collections.OrderedDict` under the
    /// `torch` policy inserts them into a dict, hashing and comparing as a dict does). Equal
    /// keys are not looked up here: each key counts as one not there yet, so a key set again
    /// is counted once more than CPython works, never less.
    fn model_record_items(&self, target: NodeId, start: usize) -> Result<()> {
        let ops = self.keys();
        let container = Container::node(target);
        for pair in self.stack.get(start..).unwrap_or_default().chunks_exact(2) {
            if let &[k, _] = pair {
                self.model_key(&ops, container, k, None, None, None)?;
                self.model_record_text_key(k)?;
            }
        }
        Ok(())
    }

    /// Counts a text or bytes key given to a record that takes items as if it met an equal
    /// key that is another object (`reader.rs` `text_size`: one step per 256 bytes beyond the
    /// one `model_key` counts). Equal keys are not looked up here, and the memo can hand one
    /// long text again and again while the record already holds an equal one: CPython then
    /// compares the two whole at every insertion. An over-count for a long key set once.
    pub(super) fn model_record_text_key(&self, k: NodeId) -> Result<()> {
        let len = match self.get(k) {
            Ok(Value::Str(t)) => t.as_bytes().len(),
            Ok(Value::Bytes(b)) => b.len(),
            _ => return Ok(()),
        };
        let steps = text_size(len) - 1;
        if steps == 0 {
            return Ok(());
        }
        let Ok(mut m) = self.reader_keys.try_borrow_mut() else {
            return Err(self.err(internal()));
        };
        m.add(steps, &self.limits, self.arena.input.len() as u64)
            .map_err(|r| self.limit(r.limit, r.seen))
    }

    /// Runs the model of the reader's key work on what a record that takes items is called
    /// with: the reader after builds `OrderedDict(pairs)` (or a `Counter`, a dict subclass)
    /// by inserting the first item of each pair of its first argument, a list or tuple (or
    /// the keys of a dict), into a new dict. Each key is counted as one not there yet; the
    /// argument, which the memo can hand to many calls, costs one step an item, as the
    /// argument of `set()` does.
    pub(super) fn model_record_argument(&self, argv: &[NodeId]) -> Result<()> {
        let Some(&first) = argv.first() else {
            return Ok(());
        };
        let ops = self.keys();
        let container = match self.reader_keys.try_borrow_mut() {
            Ok(mut m) => m.fresh_container(),
            Err(_) => return Err(self.err(internal())),
        };
        let input_len = self.arena.input.len() as u64;
        let count = |n: usize| -> Result<()> {
            let Ok(mut m) = self.reader_keys.try_borrow_mut() else {
                return Err(self.err(internal()));
            };
            m.add(n as u64, &self.limits, input_len)
                .map_err(|r| self.limit(r.limit, r.seen))
        };
        match self.get(first)? {
            Value::List(items) | Value::Tuple(items) => {
                count(items.len())?;
                for &pair in items {
                    if let Ok(Value::Tuple([k, _]) | Value::List([k, _])) = self.get(pair) {
                        self.model_key(&ops, container, *k, None, None, None)?;
                        self.model_record_text_key(*k)?;
                    }
                }
            }
            Value::Dict(pairs) => {
                count(pairs.len())?;
                for &(k, _) in pairs {
                    self.model_key(&ops, container, k, None, None, None)?;
                    self.model_record_text_key(k)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// BUILD: `state` kept as the record `target`'s, when its rule allows the `build` form.
    pub(super) fn build_state(&mut self, target: NodeId, state: NodeId) -> Result<()> {
        let (rule, callable) = match self.get(target)? {
            Value::Object(o) => (self.rule_of(o.callable)?, o.callable),
            _ => return Err(self.err(ErrorKind::BuildNotAllowed)),
        };
        let policy = self.policy;
        let (check, cost) = match policy.rule(rule) {
            Some(r) if r.forms.build => (r.check, r.build_cost),
            Some(r) => return Err(self.err(r.form_refused("BUILD"))),
            None => return Err(self.err(internal())),
        };
        // The rule's check of what the global's writer produces (src/build/checks.rs).
        if let Some(check) = check {
            self.check_build(check, target, callable, state)?;
        }
        // What the reader's BUILD does with the state, at every BUILD (src/build/copies.rs).
        self.charge_build(cost, state)?;
        if let Some(o) = self.object_mut(target) {
            o.state = Some(state);
        }
        self.heights.filled(target, &[state]);
        Ok(())
    }
}
