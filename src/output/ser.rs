//! serde serialization of a decoded [`Document`] (feature `serde`), so a value can go to JSON,
//! CBOR, MessagePack and the rest through their serde crates:
//! `serde_json::to_string(&doc)`.
//!
//! The data model is [`crate::de`]'s: `None` a unit, an int an `i64` (or `u64`, `i128`,
//! `u128` for a big int that fits; a bigger one is an error), a complex a 2-tuple, bytes and
//! bytearray bytes, list, tuple, set and frozenset sequences, a dict a map in insertion order
//! (a serializer that wants str keys, as serde_json does, refuses other keys), a global a map
//! `{"module", "name"}`, a record its map form (`module`, `name`, `args`, and `kwargs`,
//! `state`, `listitems`, `dictitems` when present). A document decoded as a stream
//! serializes as a sequence of its pickles' values.
//!
//! The walk is bounded as [`crate::de::Deserializer`]'s is: a cycle is an error, and a
//! shared value is written at every place it is reached, counted toward a visit budget
//! ([`Serialized::max_visits`], [`crate::de::DEFAULT_MAX_VISITS`] by default), so that 61
//! nested shared tuples (2^60 paths) are refused rather than written for ever. For a lossless
//! form with shared values and cycles kept, use typed JSON ([`crate::json`]). serde's
//! `Serializer` is recursive, its depth that of the document, which the decode bounded by
//! `max_nesting_depth` (see [`crate::de`]).

use std::cell::RefCell;

use num_traits::ToPrimitive;
use serde::ser::{Error as _, SerializeMap, SerializeSeq, SerializeTuple};
use serde::{Serialize, Serializer};

use crate::de::{DeError, DEFAULT_MAX_VISITS};
use crate::limits::DEFAULT_MAX_NESTING_DEPTH;
use crate::output::serde_path::OnPath;
use crate::value::{Document, NodeId, Object, Value};

/// A document or one of its values, ready for a serde `Serializer`, with the walk's bounds.
/// [`Document`] itself is `Serialize` through this with the default bounds.
#[derive(Debug)]
pub struct Serialized<'d, 'a> {
    doc: &'d Document<'a>,
    /// `None`: every root (a stream as a sequence).
    node: Option<NodeId>,
    state: RefCell<State>,
}

#[derive(Debug)]
struct State {
    visits: u64,
    max_visits: u64,
    path: OnPath,
}

impl<'d, 'a> Serialized<'d, 'a> {
    /// The whole document: its value, or for a stream the sequence of its values.
    pub fn document(doc: &'d Document<'a>) -> Serialized<'d, 'a> {
        Serialized {
            doc,
            node: None,
            state: RefCell::new(State {
                visits: 0,
                max_visits: DEFAULT_MAX_VISITS,
                path: OnPath::new(doc.len(), DEFAULT_MAX_NESTING_DEPTH),
            }),
        }
    }

    /// One value of the document.
    pub fn node(doc: &'d Document<'a>, id: NodeId) -> Serialized<'d, 'a> {
        let mut s = Serialized::document(doc);
        s.node = Some(id);
        s
    }

    /// At most `max` values written (a shared value counts at every place).
    pub fn max_visits(self, max: u64) -> Serialized<'d, 'a> {
        self.state.borrow_mut().max_visits = max;
        self
    }

    /// At most `max` containers on a path.
    pub fn max_depth(self, max: u64) -> Serialized<'d, 'a> {
        self.state.borrow_mut().path.max_depth(max);
        self
    }
}

impl Serialize for Serialized<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        {
            let mut st = self.state.borrow_mut();
            st.visits = 0;
            st.path.clear();
        }
        match self.node {
            Some(id) => Node { top: self, id }.serialize(s),
            None if self.doc.is_stream() => {
                let roots = self.doc.roots();
                let mut seq = s.serialize_seq(Some(roots.len()))?;
                for &id in roots {
                    seq.serialize_element(&Node { top: self, id })?;
                }
                seq.end()
            }
            None => match self.doc.root() {
                Some(id) => Node { top: self, id }.serialize(s),
                None => s.serialize_unit(),
            },
        }
    }
}

impl Serialize for Document<'_> {
    /// The document as [`Serialized::document`] writes it, with the default bounds.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Serialized::document(self).serialize(s)
    }
}

/// One node of the walk.
struct Node<'t, 'd, 'a> {
    top: &'t Serialized<'d, 'a>,
    id: NodeId,
}

/// A part of a record's or global's map form.
enum Part<'t, 'd, 'a> {
    Text(&'d str),
    Node(Node<'t, 'd, 'a>),
    Ids(&'t Serialized<'d, 'a>, &'d [NodeId]),
    Pairs(&'t Serialized<'d, 'a>, &'d [(NodeId, NodeId)]),
}

impl Serialize for Part<'_, '_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Part::Text(t) => s.serialize_str(t),
            Part::Node(n) => n.serialize(s),
            Part::Ids(top, ids) => {
                let mut seq = s.serialize_seq(Some(ids.len()))?;
                for &id in *ids {
                    seq.serialize_element(&Node { top, id })?;
                }
                seq.end()
            }
            Part::Pairs(top, pairs) => {
                let mut map = s.serialize_map(Some(pairs.len()))?;
                for &(k, v) in *pairs {
                    map.serialize_entry(&Node { top, id: k }, &Node { top, id: v })?;
                }
                map.end()
            }
        }
    }
}

impl<'t, 'd, 'a> Node<'t, 'd, 'a> {
    fn child(&self, id: NodeId) -> Node<'t, 'd, 'a> {
        Node { top: self.top, id }
    }

    fn record(&self, o: &'d Object) -> Vec<(&'static str, Part<'t, 'd, 'a>)> {
        let mut e = match self.top.doc.get(o.callable) {
            Some(Value::Global(g)) => {
                vec![
                    ("module", Part::Text(&g.module)),
                    ("name", Part::Text(&g.name)),
                ]
            }
            _ => vec![("callable", Part::Node(self.child(o.callable)))],
        };
        e.push(("args", Part::Node(self.child(o.args))));
        if let Some(k) = o.kwargs {
            e.push(("kwargs", Part::Node(self.child(k))));
        }
        if let Some(st) = o.state {
            e.push(("state", Part::Node(self.child(st))));
        }
        if !o.listitems.is_empty() {
            e.push(("listitems", Part::Ids(self.top, &o.listitems)));
        }
        if !o.dictitems.is_empty() {
            e.push(("dictitems", Part::Pairs(self.top, &o.dictitems)));
        }
        e
    }

    fn enter<E: serde::ser::Error>(&self, value: &Value<'_>) -> Result<(), E> {
        let mut st = self.top.state.borrow_mut();
        st.visits += 1;
        if st.visits > st.max_visits {
            return Err(E::custom(DeError::TooManyVisits { max: st.max_visits }));
        }
        if value.is_container() {
            st.path.enter(self.id, value).map_err(E::custom)?;
        }
        Ok(())
    }

    fn leave(&self, value: &Value<'_>) {
        self.top.state.borrow_mut().path.leave(self.id, value);
    }

    fn write<S: Serializer>(&self, value: Value<'d>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Value::None => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(b),
            Value::Int(i) => s.serialize_i64(i),
            Value::BigInt(b) => {
                if let Some(u) = b.to_u64() {
                    s.serialize_u64(u)
                } else if let Some(i) = b.to_i128() {
                    s.serialize_i128(i)
                } else if let Some(u) = b.to_u128() {
                    s.serialize_u128(u)
                } else {
                    Err(S::Error::custom(DeError::IntTooBig { bits: b.bits() }))
                }
            }
            Value::Float(x) => s.serialize_f64(x),
            Value::Complex(re, im) => {
                let mut t = s.serialize_tuple(2)?;
                t.serialize_element(&re)?;
                t.serialize_element(&im)?;
                t.end()
            }
            Value::Str(t) => match t.as_str() {
                Some(t) => s.serialize_str(t),
                None => Err(S::Error::custom(DeError::Surrogates)),
            },
            Value::Bytes(b) => s.serialize_bytes(&b.to_cow()),
            Value::ByteArray(b) => s.serialize_bytes(b),
            Value::List(items)
            | Value::Tuple(items)
            | Value::Set(items)
            | Value::FrozenSet(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for &id in items {
                    seq.serialize_element(&self.child(id))?;
                }
                seq.end()
            }
            Value::Dict(pairs) => {
                let mut map = s.serialize_map(Some(pairs.len()))?;
                for &(k, v) in pairs {
                    map.serialize_entry(&self.child(k), &self.child(v))?;
                }
                map.end()
            }
            Value::Global(g) => {
                let mut map = s.serialize_map(Some(2))?;
                map.serialize_entry("module", &*g.module)?;
                map.serialize_entry("name", &*g.name)?;
                map.end()
            }
            Value::Object(o) => {
                let entries = self.record(o);
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, part) in &entries {
                    map.serialize_entry(k, part)?;
                }
                map.end()
            }
        }
    }
}

impl Serialize for Node<'_, '_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Some(value) = self.top.doc.get(self.id) else {
            return Err(S::Error::custom("a node id outside the document"));
        };
        self.enter::<S::Error>(&value)?;
        let r = self.write(value, s);
        if value.is_container() {
            self.leave(&value);
        }
        r
    }
}
