//! REDUCE, NEWOBJ, NEWOBJ_EX, INST and OBJ: the call of a global, as a record object or one of
//! the native constructors the policy names (bytes, bytearray, set, frozenset, complex, Latin-1
//! `_codecs.encode`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::mem;

use super::budget::ITEM_BYTES;
use super::copies::KEYED_ITEM_BYTES;
use super::keys::bigint_to_f64;
use super::keys::mix::MixState;
use super::machine::{internal, Machine};
use crate::error::{Error, ErrorKind, Result};
use crate::latin1;
use crate::policy::Constructor;
use crate::value::{CallKind, Fat, Node, NodeId, Object, Value, LATIN1_NODE_BYTES};

/// A call's positional arguments, copied out of their tuple (so that the constructor can
/// change the arena meanwhile): in place for up to four, as nearly every call has, else in
/// a `Vec`.
pub(super) struct Args {
    inline: [NodeId; 4],
    len: usize,
    heap: Vec<NodeId>,
}

impl Args {
    fn of(items: &[NodeId]) -> Args {
        let mut inline = [NodeId::NONE; 4];
        match inline.get_mut(..items.len()) {
            Some(slots) => {
                slots.copy_from_slice(items);
                Args {
                    inline,
                    len: items.len(),
                    heap: Vec::new(),
                }
            }
            None => Args {
                inline,
                len: items.len(),
                heap: items.to_vec(),
            },
        }
    }

    fn as_slice(&self) -> &[NodeId] {
        match self.inline.get(..self.len) {
            Some(items) => items,
            None => &self.heap,
        }
    }
}

impl<'a, 'p> Machine<'a, 'p> {
    /// BINPERSID: under `persistent_ids = "record"` the id it pops stays on the stack in the
    /// place of `persistent_load`'s object, checked against the policy's schema (a tuple whose
    /// items match it) and listed in the document; under `reject`, refused.
    pub(super) fn persistent_id_node(&mut self, pid: NodeId) -> Result<NodeId> {
        let crate::policy::PersistentIds::Record(schema) = &self.policy.persistent_ids else {
            return Err(self.err(ErrorKind::PersistentIdRejected));
        };
        if let Some(schema) = schema {
            let items = match self.get(pid)? {
                Value::Tuple(items) => Args::of(items),
                _ => return Err(self.rejected("persistent id: not a tuple")),
            };
            schema
                .check(&self.arena, items.as_slice(), &mut self.checked)
                .map_err(|why| self.rejected(&format!("persistent id: {why}")))?;
        }
        self.charge(ITEM_BYTES)?;
        self.persistent_ids
            .try_reserve(1)
            .map_err(|_| self.err(internal()))?;
        self.persistent_ids.push(pid);
        Ok(pid)
    }

    /// The policy rule of a global node; for a record object (what a call made, which CPython
    /// would call) a policy refusal, and for anything else a type mismatch (as `Scan::call`).
    pub(super) fn rule_of(&self, callable: NodeId) -> Result<usize> {
        match self.get(callable)? {
            Value::Global(g) => Ok(g.rule),
            Value::Object(_) => Err(self.err(ErrorKind::CallableNotAllowed)),
            _ => Err(self.err(ErrorKind::TypeMismatch("callable is not a global"))),
        }
    }

    pub(super) fn tuple_items(&self, id: NodeId) -> Result<Args> {
        match self.get(id)? {
            Value::Tuple(items) => Ok(Args::of(items)),
            _ => Err(self.err(ErrorKind::TypeMismatch("arguments are not a tuple"))),
        }
    }

    pub(super) fn rejected(&self, why: &str) -> Error {
        self.err(ErrorKind::ConstructorRejected(why.to_owned()))
    }

    /// Applies the constructor the policy names for `callable`. A `constructor_rejected`
    /// refusal names the global (`collections.OrderedDict: ...`).
    pub(super) fn call(
        &mut self,
        callable: NodeId,
        args: NodeId,
        kwargs: Option<NodeId>,
        kind: CallKind,
    ) -> Result<NodeId> {
        self.apply(callable, args, kwargs, kind)
            .map_err(|e| match (e.kind(), self.get(callable)) {
                (ErrorKind::ConstructorRejected(why), Ok(Value::Global(g))) => {
                    let why = format!("{}.{}: {why}", g.module, g.name);
                    self.err(ErrorKind::ConstructorRejected(why))
                }
                _ => e,
            })
    }

    /// [`Machine::call`] without the global's name in its refusals.
    pub(super) fn apply(
        &mut self,
        callable: NodeId,
        args: NodeId,
        kwargs: Option<NodeId>,
        kind: CallKind,
    ) -> Result<NodeId> {
        let rule_index = self.rule_of(callable)?;
        let argv = self.tuple_items(args)?;
        let argv = argv.as_slice();
        if let Some(k) = kwargs {
            if !matches!(self.get(k)?, Value::Dict(_)) {
                return Err(self.err(ErrorKind::TypeMismatch("NEWOBJ_EX kwargs are not a dict")));
            }
        }
        let policy = self.policy;
        let rule = policy
            .rule(rule_index)
            .ok_or_else(|| self.err(internal()))?;
        rule.check_call(kind).map_err(|k| self.err(k))?;
        match rule.constructor {
            Constructor::Record => {
                if let Some(schema) = &rule.args {
                    schema
                        .check(&self.arena, argv, &mut self.checked)
                        .map_err(|why| self.rejected(&why))?;
                    if let Some(k) = kwargs {
                        if matches!(self.get(k)?, Value::Dict(d) if !d.is_empty()) {
                            return Err(self.rejected("keyword arguments are not in the schema"));
                        }
                    }
                    for &id in argv.iter().chain(&kwargs) {
                        if matches!(self.get(id)?, Value::List(_) | Value::Dict(_)) {
                            if self.sealed.capacity() == 0 {
                                // Empty: nothing was hashed with the unseeded state.
                                self.sealed =
                                    HashMap::with_capacity_and_hasher(8, MixState::random());
                            }
                            self.sealed.entry(id).or_insert(callable);
                        }
                    }
                }
                if kind.is_inst() {
                    self.records_unreplayable = true;
                }
                // What the class's constructor does with its arguments in the reader after,
                // at every call (src/build/copies.rs).
                self.charge_call(rule.call_cost, argv, rule.forms.items)?;
                self.note_call_arguments(args)?;
                if let Some(k) = kwargs {
                    self.note_call_arguments(k)?;
                }
                let object = Object {
                    kind,
                    callable,
                    args,
                    kwargs,
                    state: None,
                    listitems: Vec::new(),
                    dictitems: Vec::new(),
                    key: rule.key,
                };
                // The object is its side-table slot ([`FAT_BYTES`]); what it gains later
                // (items, pairs) is charged as it comes.
                let id = self.fat(Fat::Object(object), 0)?;
                // The rule's check of what the global's writer produces (src/build/checks.rs).
                if let Some(check) = rule.check {
                    self.check_call(check, id, callable, argv, kind, kwargs)?;
                }
                Ok(id)
            }
            Constructor::Latin1Bytes => self.latin1_bytes(argv),
            Constructor::Bytes => match argv {
                // CPython's `bytes()` is its one `b''`.
                [] => self.shared(NodeId::EMPTY_BYTES, 0),
                [b] if matches!(self.get(*b)?, Value::Bytes(_)) => Ok(*b),
                _ => Err(self.rejected("bytes() takes no argument or one bytes")),
            },
            Constructor::ByteArray => self.bytearray(argv),
            Constructor::Set | Constructor::FrozenSet => {
                let frozen = rule.constructor == Constructor::FrozenSet;
                // frozenset(fs) of a frozenset is fs itself, as CPython's frozenset_new returns
                // its argument when it is an exact frozenset.
                if let [it] = argv {
                    if frozen && matches!(self.get(*it)?, Value::FrozenSet(_)) {
                        return Ok(*it);
                    }
                }
                // The items, copied out of their container (the insertion reads the arena);
                // into a buffer kept from call to call.
                let mut items = mem::take(&mut self.call_items);
                items.clear();
                match argv {
                    [] => {}
                    [it] => match self.get(*it)? {
                        Value::List(v) | Value::Tuple(v) | Value::Set(v) | Value::FrozenSet(v) => {
                            if items.try_reserve(v.len()).is_err() {
                                return Err(self.err(ErrorKind::AllocationFailed {
                                    bytes: v.len() as u64 * ITEM_BYTES,
                                }));
                            }
                            items.extend_from_slice(v);
                        }
                        _ => {
                            return Err(self.rejected("set() takes a list, tuple, set or frozenset"))
                        }
                    },
                    _ => return Err(self.rejected("set() takes at most one argument")),
                };
                // CPython inserts every item again, whatever inserted them before, into a new
                // table: one step and one entry an item, at every call.
                let r = self
                    .model_items(items.len())
                    .and_then(|()| {
                        self.charge_copy(KEYED_ITEM_BYTES.saturating_mul(items.len() as u64))
                    })
                    .and_then(|()| self.new_set(&items, frozen));
                self.call_items = items;
                r
            }
            Constructor::Complex => {
                let part = |id: &NodeId| -> Result<f64> {
                    match self.get(*id)? {
                        Value::Bool(b) => Ok(f64::from(u8::from(b))),
                        Value::Int(i) => Ok(i as f64),
                        Value::BigInt(b) => bigint_to_f64(b)
                            .ok_or_else(|| self.rejected("int too large for a float")),
                        Value::Float(x) => Ok(x),
                        _ => Err(self.rejected("complex() takes int or float parts")),
                    }
                };
                let (re, im) = match argv {
                    [] => (0.0, 0.0),
                    [re] => (part(re)?, 0.0),
                    [re, im] => (part(re)?, part(im)?),
                    _ => return Err(self.rejected("complex() takes at most two arguments")),
                };
                self.fat(Fat::Complex(re, im), 0)
            }
        }
    }

    /// The text of `_codecs.encode(text, 'latin1')` and its Latin-1 length, once the encoding
    /// is checked and every code point of the text is below U+0100.
    pub(super) fn latin1_source(
        &self,
        text: NodeId,
        encoding: NodeId,
    ) -> Result<(Cow<'a, [u8]>, usize)> {
        let enc_ok = matches!(self.get(encoding)?, Value::Str(e)
            if !e.has_surrogates() && matches!(e.as_bytes(), b"latin1" | b"latin-1"));
        if !enc_ok {
            return Err(self.rejected("encoding must be 'latin1' or 'latin-1'"));
        }
        match self.str_text(text)? {
            Some(t) if !t.surrogates => match latin1::len(&t.bytes) {
                Some(len) => Ok((t.bytes, len)),
                None => Err(self.rejected("code point above U+00FF")),
            },
            Some(_) => Err(self.rejected("code point above U+00FF")),
            None => Err(self.rejected("text to encode is not a str")),
        }
    }

    /// `_codecs.encode(text, 'latin1')`: bytes whose values are the code points of text that
    /// are all below U+0100. The text is checked, not transcoded: the bytes node stands for
    /// its Latin-1 encoding ([`crate::PyBytes`]), which is made only when asked for (a Mitogen
    /// hop that checks and passes a transfer on never makes it).
    pub(super) fn latin1_bytes(&mut self, argv: &[NodeId]) -> Result<NodeId> {
        let [text, encoding] = argv else {
            return Err(self.rejected("_codecs.encode takes (str, 'latin1')"));
        };
        let (text, len) = self.latin1_source(*text, *encoding)?;
        // Charged its length even though it is not copied: CPython makes a new bytes object
        // of that length for every call, and one memoized text encoded again and again (a
        // BINGET and a REDUCE a call) would otherwise cost its length in every call in the
        // consumer that loads the same pickle, without reaching any limit here (an audit
        // helper: a 16 MiB text encoded 10,000 times in 16.8 MB of input took 6 s here and
        // 34 s in CPython). A pickler encodes each text once, so a real pickle's charges stay
        // within its input's size.
        if len == 0 {
            // `''.encode('latin1')` is CPython's one `b''`.
            return self.shared(NodeId::EMPTY_BYTES, 0);
        }
        let extra = len as u64;
        // And a copy in the reader after, at every call (`max_copy_bytes_per_byte`).
        self.charge_copy(extra)?;
        match text {
            Cow::Borrowed(t) => match self.arena.offsets(t) {
                // ASCII: the bytes are the text's.
                Some((start, n)) if len == t.len() => {
                    self.node(Node::Bytes { start, len: n }, extra)
                }
                Some((start, n)) if t.len() < LATIN1_NODE_BYTES => {
                    self.node(Node::Latin1 { start, len: n }, extra)
                }
                None if len == t.len() => self.fat(Fat::Bytes(Cow::Borrowed(t)), extra),
                _ => self.fat(Fat::Latin1(t, len), extra),
            },
            Cow::Owned(t) => self.fat(Fat::Bytes(Cow::Owned(latin1::pack(&t, len))), extra),
        }
    }

    /// `bytearray()`, `bytearray(b)`, `bytearray(text, 'latin-1')`: a copy, here and in the
    /// reader after, charged (`max_alloc_bytes`, `max_copy_bytes_per_byte`) before it is made.
    pub(super) fn bytearray(&mut self, argv: &[NodeId]) -> Result<NodeId> {
        let len = match argv {
            [] => 0,
            [b] => match self.get(*b)? {
                Value::Bytes(b) => b.len(),
                Value::ByteArray(b) => b.len(),
                _ => return Err(self.rejected("bytearray() takes bytes")),
            },
            [text, encoding] => self.latin1_source(*text, *encoding)?.1,
            _ => return Err(self.rejected("bytearray() takes at most two arguments")),
        };
        self.fat_fits(len as u64)?;
        self.charge_copy(len as u64)?;
        let data = match argv {
            [b] => match self.get(*b)? {
                Value::Bytes(b) => b.to_vec(),
                Value::ByteArray(b) => b.to_vec(),
                _ => return Err(self.err(internal())),
            },
            [text, encoding] => {
                let (text, len) = self.latin1_source(*text, *encoding)?;
                latin1::pack(&text, len)
            }
            _ => Vec::new(),
        };
        let extra = data.len() as u64;
        self.fat(Fat::ByteArray(data), extra)
    }
}
