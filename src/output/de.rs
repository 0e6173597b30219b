//! serde deserialization of a decoded [`Document`] into any `Deserialize` type (feature
//! `serde`): [`from_slice`], [`from_document`] and the [`Deserializer`] they use.
//!
//! # The data model
//!
//! | Python value | serde |
//! |---|---|
//! | `None` | unit; `None` of an `Option` (anything else is `Some`) |
//! | `bool` | bool |
//! | `int` | `i64`, or `u64`/`i128`/`u128` for a big int that fits; a typed target checks the range (`300` into a `u8` is an error); an int past 128 bits is [`DeError::IntTooBig`] |
//! | `float` | `f64` |
//! | `complex` | a 2-tuple `(real, imag)` |
//! | `str` | a borrowed str (one with lone surrogates is [`DeError::Surrogates`]: not UTF-8) |
//! | `bytes`, `bytearray` | bytes (borrowed where the pickle holds them verbatim); a sequence of `u8` for a `Vec<u8>` |
//! | `list`, `tuple`, `set`, `frozenset` | a sequence (sets in insertion order) |
//! | `dict` | a map, in insertion order; a struct from a dict with str keys |
//! | a global (`module.name` as a value) | a map `{"module": .., "name": ..}` |
//! | a record object | a map `{"module", "name", "args", "kwargs", "state", "listitems", "dictitems"}` (the last four when present); or [`Record`]; a struct other than `Record` reads the record's `state` when that is a dict (a plain class's `__dict__`) |
//!
//! Enums: a str is a unit variant; a dict of one entry with a str key is `{variant: content}`;
//! a record is the variant named by its callable's name, with its args as content (the one
//! arg of a 1-tuple for a newtype variant).
//!
//! # Bounds
//!
//! A document is a graph: a value shared through the memo is one node reached from several
//! places, and a list can hold itself. Deserialization unfolds it into a tree, so:
//! - a container met again on its own path (a cycle) is [`DeError::Cycle`];
//! - every value visited counts toward [`Deserializer::max_visits`]
//!   ([`DEFAULT_MAX_VISITS`]), a shared value once per place it is reached: `t = (t, t)` sixty
//!   times over is 61 nodes in 252 bytes but 2^60 paths, refused with
//!   [`DeError::TooManyVisits`] after the budget instead of running for ever.
//!   Values a target ignores (`serde::de::IgnoredAny`, unknown struct fields) are skipped
//!   unvisited.
//!
//! The visit budget is a bound of the walk, not one of the [`Limits`](crate::Limits): those
//! bound the decode and are checked by it, while this one bounds a walk over a document
//! already decoded ([`from_document`] walks one with no decode and no limits in sight), and
//! the other writers keep sharing and need none. [`from_slice`] and [`from_slice_with`] walk
//! with [`DEFAULT_MAX_VISITS`]; for another budget, decode with
//! [`decode_with`](crate::decode_with) and walk with
//! `Deserializer::new(&doc).max_visits(n).deserialize()` (docs/limits.md, "The serde walks'
//! visit budget").
//!
//! serde's `Deserializer` is recursive: each container is one level of Rust calls. Its depth
//! is bounded by the decode, not by this walk: the decode refuses a document whose longest
//! path from the root is over [`Limits::max_nesting_depth`](crate::Limits::max_nesting_depth)
//! nodes, counting a shared value at every place it is reached and a cycle's edge back as a
//! leaf (`src/build/depth.rs`), which is exactly the path this walk follows before it stops at
//! a cycle. [`Deserializer::max_depth`] checks it again (the policy's `max_nesting_depth` in
//! [`from_slice`]; CPython's 1000 in [`from_document`]), so a document decoded under looser
//! limits than the walk is given is refused, not walked deeper. Each level costs the stack
//! frames of the target type's visitor: a thread with a small stack should lower the depth.

use num_traits::ToPrimitive;
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, EnumAccess, IntoDeserializer, MapAccess, SeqAccess,
    VariantAccess, Visitor,
};
use serde::Deserialize;

use crate::limits::DEFAULT_MAX_NESTING_DEPTH;
use crate::options::DecodeOptions;
use crate::output::serde_path::OnPath;
use crate::value::{Document, NodeId, Object, PyStr, Value};
use crate::Policy;

pub use super::de_error::DeError;

/// Default for [`Deserializer::max_visits`]: 64 Mi values, as many as a decode may create
/// under the default [`Limits::max_nodes`](crate::Limits::max_nodes), so a document without
/// shared containers always fits.
pub const DEFAULT_MAX_VISITS: u64 = 64 * 1024 * 1024;

/// The struct name [`Record`] declares; a struct of that name reads a record's map form.
pub const RECORD_STRUCT: &str = "picklewarden::Record";

/// Decodes `bytes` under `policy` (its limits, one pickle, no trailing bytes) and
/// deserializes the value into `T`, with the walk bounded by the policy's
/// `max_nesting_depth` and [`DEFAULT_MAX_VISITS`].
///
/// ```
/// #[derive(serde::Deserialize, Debug, PartialEq)]
/// struct Point { x: i32, y: i32, tags: Vec<String> }
/// // pickle.dumps({"x": 1, "y": -2, "tags": ["a"]}, protocol=2)
/// let bytes = b"\x80\x02}q\x00(X\x01\x00\x00\x00xq\x01K\x01X\x01\x00\x00\x00yq\x02J\xfe\xff\xff\xffX\x04\x00\x00\x00tagsq\x03]q\x04X\x01\x00\x00\x00aq\x05au.";
/// let p: Point = picklewarden::from_slice(bytes, &picklewarden::Policy::data())?;
/// assert_eq!(p, Point { x: 1, y: -2, tags: vec!["a".into()] });
/// # Ok::<(), picklewarden::DeError>(())
/// ```
///
/// # Errors
/// [`DeError::Decode`] with the decode's refusal, or a [`DeError`] of the walk.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8], policy: &Policy) -> Result<T, DeError> {
    from_slice_with(bytes, policy, &DecodeOptions::from_policy(policy))
}

/// [`from_slice`] with the decode's options (limits, deadline, stream, buffers, trailing
/// bytes) given; the walk's depth bound is the `max_nesting_depth` of the limits in force.
///
/// # Errors
/// As [`from_slice`].
pub fn from_slice_with<T: DeserializeOwned>(
    bytes: &[u8],
    policy: &Policy,
    options: &DecodeOptions<'_>,
) -> Result<T, DeError> {
    let doc = crate::decode_with(bytes, policy, options)?;
    Deserializer::new(&doc)
        .max_depth(options.effective_limits(policy).max_nesting_depth)
        .deserialize()
}

/// Deserializes the root of `doc` (the first pickle of a stream) into `T`, which may borrow
/// strs and bytes from the document, with the default bounds ([`Deserializer::new`]).
///
/// # Errors
/// A [`DeError`] of the walk.
pub fn from_document<'de, T: Deserialize<'de>>(doc: &'de Document<'_>) -> Result<T, DeError> {
    Deserializer::new(doc).deserialize()
}

/// A walk of one value of a document into a `Deserialize` type, with its bounds.
#[derive(Debug)]
pub struct Deserializer<'de, 'a> {
    doc: &'de Document<'a>,
    root: Option<NodeId>,
    max_visits: u64,
    max_depth: u64,
}

impl<'de, 'a> Deserializer<'de, 'a> {
    /// A walk of `doc`'s root, with at most [`DEFAULT_MAX_VISITS`] values visited and
    /// [`DEFAULT_MAX_NESTING_DEPTH`] containers deep.
    pub fn new(doc: &'de Document<'a>) -> Deserializer<'de, 'a> {
        Deserializer {
            doc,
            root: doc.root(),
            max_visits: DEFAULT_MAX_VISITS,
            max_depth: DEFAULT_MAX_NESTING_DEPTH,
        }
    }

    /// Walks the node `id` instead of the root (another pickle of a stream, or a part).
    pub fn at(mut self, id: NodeId) -> Deserializer<'de, 'a> {
        self.root = Some(id);
        self
    }

    /// At most `max` values visited: reaching it is allowed, passing it is
    /// [`DeError::TooManyVisits`].
    pub fn max_visits(mut self, max: u64) -> Deserializer<'de, 'a> {
        self.max_visits = max;
        self
    }

    /// At most `max` containers on a path (a container at depth `max` is allowed, one inside
    /// it is [`DeError::TooDeep`]).
    pub fn max_depth(mut self, max: u64) -> Deserializer<'de, 'a> {
        self.max_depth = max;
        self
    }

    /// Deserializes the value into `T`.
    ///
    /// # Errors
    /// A [`DeError`] of the walk (an empty document is a [`DeError::Message`]).
    pub fn deserialize<T: Deserialize<'de>>(self) -> Result<T, DeError> {
        let root = self
            .root
            .ok_or_else(|| DeError::Message("the document has no value".to_owned()))?;
        let mut cx = Cx {
            strs: [(NO_STR, ""); STR_SLOTS],
            visits: 0,
            max_visits: self.max_visits,
            path: OnPath::new(self.doc.len(), self.max_depth),
        };
        T::deserialize(At {
            doc: self.doc,
            part: Part::Node(root),
            cx: &mut cx,
        })
    }
}

/// The walk's state: values visited, containers on the current path.
struct Cx<'de> {
    /// The last str seen in each of [`STR_SLOTS`] slots (by node id), with its `&str`: a str
    /// shared through the memo (a dict key written once and fetched by BINGET at every
    /// record) is checked as UTF-8 once, not at every place it is reached.
    strs: [(u32, &'de str); STR_SLOTS],
    visits: u64,
    max_visits: u64,
    path: OnPath,
}

/// Slots of [`Cx::strs`] (a power of two: the slot is the id's low bits).
const STR_SLOTS: usize = 64;
/// An empty slot of [`Cx::strs`]: no str has this id (it is past every arena index).
const NO_STR: u32 = u32::MAX;

impl<'de> Cx<'de> {
    /// The `&str` of the str `s` of node `id` (checked once per slot fill).
    #[inline(always)]
    fn str_of(&mut self, id: NodeId, s: PyStr<'de>) -> Result<&'de str, DeError> {
        let key = id.0;
        let slot = self.strs.get_mut(key as usize % STR_SLOTS);
        if let Some(&mut (k, t)) = slot {
            if k == key {
                return Ok(t);
            }
        }
        let t = s.as_str().ok_or(DeError::Surrogates)?;
        if let Some(slot) = self.strs.get_mut(key as usize % STR_SLOTS) {
            *slot = (key, t);
        }
        Ok(t)
    }

    #[inline(always)]
    fn visit(&mut self) -> Result<(), DeError> {
        self.visits += 1;
        if self.visits > self.max_visits {
            return Err(self.too_many());
        }
        Ok(())
    }

    #[cold]
    fn too_many(&self) -> DeError {
        DeError::TooManyVisits {
            max: self.max_visits,
        }
    }
}

/// A node id the document does not hold (only a caller's [`Deserializer::at`] can give one).
#[cold]
fn outside() -> DeError {
    DeError::Message("a node id outside the document".to_owned())
}

/// What a deserializer stands on: a node, or a part of a record's or global's map form.
#[derive(Clone, Copy)]
enum Part<'de> {
    Node(NodeId),
    Text(&'de str),
    Ids(&'de [NodeId]),
    Pairs(&'de [(NodeId, NodeId)]),
}

/// The serde `Deserializer` of one part of the document.
struct At<'de, 'a, 'c> {
    doc: &'de Document<'a>,
    part: Part<'de>,
    cx: &'c mut Cx<'de>,
}

/// The map form of a global or a record: keys and their parts.
type Entries<'de> = Vec<(&'static str, Part<'de>)>;

impl<'de, 'a, 'c> At<'de, 'a, 'c> {
    /// Counts a visit to the node and gives its value.
    #[inline(always)]
    fn value(&mut self, id: NodeId) -> Result<Value<'de>, DeError> {
        self.cx.visit()?;
        match self.doc.get(id) {
            Some(v) => Ok(v),
            None => Err(outside()),
        }
    }

    /// Runs `f` with the container `id` (whose value is `value`) on the path.
    fn inside<R>(
        &mut self,
        id: NodeId,
        value: Value<'de>,
        f: impl FnOnce(&mut Cx<'de>) -> Result<R, DeError>,
    ) -> Result<R, DeError> {
        self.cx.path.enter(id, &value)?;
        let r = f(self.cx);
        self.cx.path.leave(id, &value);
        r
    }

    fn global_entries(&self, id: NodeId) -> Option<Entries<'de>> {
        match self.doc.get(id)? {
            Value::Global(g) => Some(vec![
                ("module", Part::Text(&g.module)),
                ("name", Part::Text(&g.name)),
            ]),
            _ => None,
        }
    }

    fn record_entries(&self, o: &'de Object) -> Entries<'de> {
        let mut e = self
            .global_entries(o.callable)
            .unwrap_or_else(|| vec![("callable", Part::Node(o.callable))]);
        e.push(("args", Part::Node(o.args)));
        if let Some(k) = o.kwargs {
            e.push(("kwargs", Part::Node(k)));
        }
        if let Some(s) = o.state {
            e.push(("state", Part::Node(s)));
        }
        if !o.listitems.is_empty() {
            e.push(("listitems", Part::Ids(&o.listitems)));
        }
        if !o.dictitems.is_empty() {
            e.push(("dictitems", Part::Pairs(&o.dictitems)));
        }
        e
    }

    fn visit_any<V: Visitor<'de>>(mut self, id: NodeId, visitor: V) -> Result<V::Value, DeError> {
        let doc = self.doc;
        let value = self.value(id)?;
        match value {
            Value::None => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(b),
            Value::Int(i) => visitor.visit_i64(i),
            Value::BigInt(b) => {
                if let Some(u) = b.to_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = b.to_i128() {
                    visitor.visit_i128(i)
                } else if let Some(u) = b.to_u128() {
                    visitor.visit_u128(u)
                } else {
                    Err(DeError::IntTooBig { bits: b.bits() })
                }
            }
            Value::Float(x) => visitor.visit_f64(x),
            Value::Complex(re, im) => visitor.visit_seq(Floats([re, im], 0)),
            Value::Str(s) => visitor.visit_borrowed_str(self.cx.str_of(id, s)?),
            Value::Bytes(b) => match b.as_slice() {
                Some(b) => visitor.visit_borrowed_bytes(b),
                None => visitor.visit_byte_buf(b.to_vec()),
            },
            Value::ByteArray(b) => visitor.visit_borrowed_bytes(b),
            Value::List(items)
            | Value::Tuple(items)
            | Value::Set(items)
            | Value::FrozenSet(items) => {
                self.inside(id, value, |cx| visitor.visit_seq(Seq { doc, items, cx }))
            }
            Value::Dict(pairs) => self.inside(id, value, |cx| {
                visitor.visit_map(Map {
                    doc,
                    pairs,
                    value: None,
                    cx,
                })
            }),
            Value::Global(g) => visitor.visit_map(Fields {
                doc,
                entries: vec![
                    ("module", Part::Text(&g.module)),
                    ("name", Part::Text(&g.name)),
                ]
                .into_iter(),
                value: None,
                cx: self.cx,
            }),
            Value::Object(o) => {
                let entries = self.record_entries(o).into_iter();
                self.inside(id, value, |cx| {
                    visitor.visit_map(Fields {
                        doc,
                        entries,
                        value: None,
                        cx,
                    })
                })
            }
        }
    }

    /// The value of a node without counting a visit (the typed paths look before they walk).
    fn peek(&self) -> Option<Value<'de>> {
        match self.part {
            Part::Node(id) => self.doc.get(id),
            _ => None,
        }
    }
}

impl<'de> de::Deserializer<'de> for At<'de, '_, '_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.part {
            Part::Node(id) => self.visit_any(id, visitor),
            Part::Text(s) => {
                self.cx.visit()?;
                visitor.visit_borrowed_str(s)
            }
            Part::Ids(items) => {
                self.cx.visit()?;
                visitor.visit_seq(Seq {
                    doc: self.doc,
                    items,
                    cx: self.cx,
                })
            }
            Part::Pairs(pairs) => {
                self.cx.visit()?;
                visitor.visit_map(Map {
                    doc: self.doc,
                    pairs,
                    value: None,
                    cx: self.cx,
                })
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.peek() {
            Some(Value::None) => {
                self.cx.visit()?;
                visitor.visit_none()
            }
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let bytes = match self.peek() {
            Some(Value::Bytes(b)) => Some(b.to_cow()),
            Some(Value::ByteArray(b)) => Some(std::borrow::Cow::Borrowed(b)),
            _ => None,
        };
        match bytes {
            Some(bytes) => {
                self.cx.visit()?;
                visitor.visit_seq(de::value::SeqDeserializer::<_, DeError>::new(
                    bytes.iter().copied(),
                ))
            }
            None => self.deserialize_any(visitor),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        mut self,
        name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        if name != RECORD_STRUCT {
            if let (Part::Node(id), Some(Value::Object(o))) = (self.part, self.peek()) {
                if let Some(state) = o.state {
                    if let Some(Value::Dict(pairs)) = self.doc.get(state) {
                        self.cx.visit()?;
                        self.cx.visit()?;
                        let doc = self.doc;
                        return self.inside(id, Value::Object(o), |cx| {
                            visitor.visit_map(Map {
                                doc,
                                pairs,
                                value: None,
                                cx,
                            })
                        });
                    }
                }
            }
        }
        self.deserialize_any(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        mut self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let Part::Node(id) = self.part else {
            return self.deserialize_any(visitor);
        };
        match self.peek() {
            Some(Value::Str(s)) => {
                self.cx.visit()?;
                let s = s.as_str().ok_or(DeError::Surrogates)?;
                visitor.visit_enum(s.into_deserializer())
            }
            Some(dict @ Value::Dict(&[(k, v)])) => {
                self.cx.visit()?;
                let doc = self.doc;
                self.inside(id, dict, |cx| {
                    visitor.visit_enum(Variant {
                        doc,
                        tag: Part::Node(k),
                        content: Content::Node(v),
                        cx,
                    })
                })
            }
            Some(Value::Object(o)) => {
                let name = match self.doc.get(o.callable) {
                    Some(Value::Global(g)) => &*g.name,
                    _ => return self.deserialize_any(visitor),
                };
                self.cx.visit()?;
                let doc = self.doc;
                let content = match doc.get(o.args) {
                    Some(Value::Tuple(&[one])) => Content::Node(one),
                    _ => Content::Node(o.args),
                };
                self.inside(id, Value::Object(o), |cx| {
                    visitor.visit_enum(Variant {
                        doc,
                        tag: Part::Text(name),
                        content,
                        cx,
                    })
                })
            }
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct tuple tuple_struct map identifier
    }
}

/// The items of a list, tuple, set or frozenset.
struct Seq<'de, 'a, 'c> {
    doc: &'de Document<'a>,
    items: &'de [NodeId],
    cx: &'c mut Cx<'de>,
}

impl<'de> SeqAccess<'de> for Seq<'de, '_, '_> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        let Some((&first, rest)) = self.items.split_first() else {
            return Ok(None);
        };
        self.items = rest;
        seed.deserialize(At {
            doc: self.doc,
            part: Part::Node(first),
            cx: self.cx,
        })
        .map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

/// The two parts of a complex.
struct Floats([f64; 2], usize);

impl<'de> SeqAccess<'de> for Floats {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        let Some(&x) = self.0.get(self.1) else {
            return Ok(None);
        };
        self.1 += 1;
        seed.deserialize(x.into_deserializer()).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(2 - self.1.min(2))
    }
}

/// The pairs of a dict (or a record's dictitems).
struct Map<'de, 'a, 'c> {
    doc: &'de Document<'a>,
    pairs: &'de [(NodeId, NodeId)],
    value: Option<NodeId>,
    cx: &'c mut Cx<'de>,
}

impl<'de> MapAccess<'de> for Map<'de, '_, '_> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some((&(k, v), rest)) = self.pairs.split_first() else {
            return Ok(None);
        };
        self.pairs = rest;
        self.value = Some(v);
        seed.deserialize(At {
            doc: self.doc,
            part: Part::Node(k),
            cx: self.cx,
        })
        .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let v = self
            .value
            .take()
            .ok_or_else(|| DeError::Message("a map value asked before its key".to_owned()))?;
        seed.deserialize(At {
            doc: self.doc,
            part: Part::Node(v),
            cx: self.cx,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.pairs.len())
    }
}

/// The map form of a global or a record.
struct Fields<'de, 'a, 'c> {
    doc: &'de Document<'a>,
    entries: std::vec::IntoIter<(&'static str, Part<'de>)>,
    value: Option<Part<'de>>,
    cx: &'c mut Cx<'de>,
}

impl<'de> MapAccess<'de> for Fields<'de, '_, '_> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some((key, part)) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some(part);
        seed.deserialize(de::value::BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let part = self
            .value
            .take()
            .ok_or_else(|| DeError::Message("a map value asked before its key".to_owned()))?;
        seed.deserialize(At {
            doc: self.doc,
            part,
            cx: self.cx,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// An enum's content.
#[derive(Clone, Copy)]
enum Content {
    Node(NodeId),
}

/// An enum variant: its tag and content.
struct Variant<'de, 'a, 'c> {
    doc: &'de Document<'a>,
    tag: Part<'de>,
    content: Content,
    cx: &'c mut Cx<'de>,
}

impl<'de, 'a, 'c> EnumAccess<'de> for Variant<'de, 'a, 'c> {
    type Error = DeError;
    type Variant = Variant<'de, 'a, 'c>;

    fn variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<(T::Value, Self), DeError> {
        let tag = seed.deserialize(At {
            doc: self.doc,
            part: self.tag,
            cx: &mut *self.cx,
        })?;
        Ok((tag, self))
    }
}

impl<'de> VariantAccess<'de> for Variant<'de, '_, '_> {
    type Error = DeError;

    fn unit_variant(mut self) -> Result<(), DeError> {
        let Content::Node(id) = self.content;
        de::Deserialize::deserialize(self.at(id))
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        mut self,
        seed: T,
    ) -> Result<T::Value, DeError> {
        let Content::Node(id) = self.content;
        seed.deserialize(self.at(id))
    }

    fn tuple_variant<V: Visitor<'de>>(
        mut self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let Content::Node(id) = self.content;
        de::Deserializer::deserialize_tuple(self.at(id), len, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        mut self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let Content::Node(id) = self.content;
        de::Deserializer::deserialize_struct(self.at(id), "", fields, visitor)
    }
}

impl<'de, 'a> Variant<'de, 'a, '_> {
    fn at(&mut self, id: NodeId) -> At<'de, 'a, '_> {
        At {
            doc: self.doc,
            part: Part::Node(id),
            cx: self.cx,
        }
    }
}

/// A record's map form, typed: `module.name(*args)`, then `state` given to BUILD. `A` is the
/// args' type (often a tuple), `S` the state's (`()` to accept only a record without one, or
/// [`serde::de::IgnoredAny`] to skip it).
///
/// ```
/// use picklewarden::{de::Record, Policy};
/// let policy = Policy::from_toml_str(r#"
///     name = "points"
///     [[global]]
///     module = "geometry"
///     name = "Point"
///     constructor = "record"
///     forms = ["reduce"]
/// "#)?;
/// // Point(3, 4) pickled by a class whose __reduce__ returns (Point, (3, 4)), protocol 2
/// let bytes = b"\x80\x02cgeometry\nPoint\nq\x00K\x03K\x04\x86q\x01Rq\x02.";
/// let r: Record<(u16, u16)> = picklewarden::from_slice(bytes, &policy)?;
/// assert_eq!((r.module.as_str(), r.name.as_str(), r.args), ("geometry", "Point", (3, 4)));
/// assert!(r.state.is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename = "picklewarden::Record")]
#[non_exhaustive]
pub struct Record<A, S = serde::de::IgnoredAny> {
    /// The callable's module.
    pub module: String,
    /// The callable's name.
    pub name: String,
    /// The arguments.
    pub args: A,
    /// The state given to BUILD, if any.
    pub state: Option<S>,
}
