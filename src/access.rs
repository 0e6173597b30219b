//! Accessors of decoded values: [`Value`]'s `as_*` methods, and [`ValueRef`], a value with its
//! document, which can look up a dict key and iterate items and pairs as values.
//!
//! ```
//! use picklewarden::{decode, Policy};
//! // pickle.dumps({"name": "pw", "ports": [80, 443], "blob": b"\x00"}, protocol=2)
//! let bytes = b"\x80\x02}q\x00(X\x04\x00\x00\x00nameq\x01X\x02\x00\x00\x00pwq\x02X\x05\x00\x00\x00portsq\x03]q\x04(KPM\xbb\x01eX\x04\x00\x00\x00blobq\x05c_codecs\nencode\nq\x06X\x01\x00\x00\x00\x00q\x07X\x06\x00\x00\x00latin1q\x08\x86q\tRq\nu.";
//! let doc = decode(bytes, &Policy::data())?;
//! let root = doc.root_ref().unwrap();
//! assert_eq!(root.get("name").and_then(|v| v.as_str()), Some("pw"));
//! let ports: Vec<i64> = root.get("ports").unwrap().items().filter_map(|v| v.as_i64()).collect();
//! assert_eq!(ports, [80, 443]);
//! assert_eq!(root.get("blob").unwrap().as_bytes().as_deref(), Some(&b"\x00"[..]));
//! for (key, value) in root.pairs() {
//!     println!("{} = {}", key.as_str().unwrap_or("?"), value.type_name());
//! }
//! # Ok::<(), picklewarden::Error>(())
//! ```

use std::borrow::Cow;

use num_bigint::BigInt;

use crate::value::{Document, NodeId, PyStr, Value};

impl<'d> Value<'d> {
    /// Whether the value is `None`.
    pub fn is_none(&self) -> bool {
        matches!(self, Value::None)
    }

    /// A bool's value (`None` for anything else: an int is not a bool here).
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// An int that fits `i64` (`None` for a big int, a bool or anything else).
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Int(i) => Some(i),
            _ => None,
        }
    }

    /// An int that fits `u64`, big or not.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::Int(i) => u64::try_from(i).ok(),
            Value::BigInt(b) => u64::try_from(b).ok(),
            _ => None,
        }
    }

    /// Any int as a [`BigInt`] (borrowed when it is one).
    pub fn as_bigint(&self) -> Option<Cow<'d, BigInt>> {
        match *self {
            Value::Int(i) => Some(Cow::Owned(BigInt::from(i))),
            Value::BigInt(b) => Some(Cow::Borrowed(b)),
            _ => None,
        }
    }

    /// A float's value (`None` for an int: convert explicitly).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Float(x) => Some(x),
            _ => None,
        }
    }

    /// A str as UTF-8 (`None` for a str with lone surrogates, see [`Value::as_py_str`]).
    pub fn as_str(&self) -> Option<&'d str> {
        match self {
            Value::Str(s) => s.as_str(),
            _ => None,
        }
    }

    /// A str as it is, surrogates and all.
    pub fn as_py_str(&self) -> Option<PyStr<'d>> {
        match *self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes of a bytes or bytearray value: borrowed from the input where the pickle holds
    /// them verbatim, owned where it holds them as Latin-1 text (`_codecs.encode`).
    pub fn as_bytes(&self) -> Option<Cow<'d, [u8]>> {
        match *self {
            Value::Bytes(b) => Some(b.to_cow()),
            Value::ByteArray(b) => Some(Cow::Borrowed(b)),
            _ => None,
        }
    }

    /// The items of a list, tuple, set or frozenset, as node ids.
    pub fn as_items(&self) -> Option<&'d [NodeId]> {
        match *self {
            Value::List(i) | Value::Tuple(i) | Value::Set(i) | Value::FrozenSet(i) => Some(i),
            _ => None,
        }
    }

    /// The key-value pairs of a dict, as node ids, in insertion order.
    pub fn as_pairs(&self) -> Option<&'d [(NodeId, NodeId)]> {
        match *self {
            Value::Dict(p) => Some(p),
            _ => None,
        }
    }
}

/// A value together with its document: [`Document::root_ref`], [`Document::value_ref`].
/// `Copy`; every method that gives other values gives them as `ValueRef`s too.
#[derive(Clone, Copy, Debug)]
pub struct ValueRef<'d, 'a> {
    doc: &'d Document<'a>,
    id: NodeId,
    value: Value<'d>,
}

impl<'a> Document<'a> {
    /// The root value (the first pickle's, for a stream) with the document.
    pub fn root_ref(&self) -> Option<ValueRef<'_, 'a>> {
        self.value_ref(self.root()?)
    }

    /// The value `id` with the document (`None` for an id of another document).
    pub fn value_ref(&self, id: NodeId) -> Option<ValueRef<'_, 'a>> {
        Some(ValueRef {
            doc: self,
            id,
            value: self.get(id)?,
        })
    }
}

impl<'d, 'a> ValueRef<'d, 'a> {
    /// The node id (equal ids: the same Python object).
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The value.
    pub fn value(&self) -> Value<'d> {
        self.value
    }

    /// The document.
    pub fn document(&self) -> &'d Document<'a> {
        self.doc
    }

    fn at(&self, id: NodeId) -> Option<ValueRef<'d, 'a>> {
        self.doc.value_ref(id)
    }

    /// For a dict, the value of the str key `key` (the pairs are searched in order: linear in
    /// the dict's size); `None` for a missing key or a value that is not a dict.
    pub fn get(&self, key: &str) -> Option<ValueRef<'d, 'a>> {
        self.value
            .as_pairs()?
            .iter()
            .find(|(k, _)| self.doc.get(*k).and_then(|k| k.as_str()) == Some(key))
            .and_then(|&(_, v)| self.at(v))
    }

    /// For a list or tuple (or set, in insertion order), the item at `index`.
    pub fn index(&self, index: usize) -> Option<ValueRef<'d, 'a>> {
        self.at(*self.value.as_items()?.get(index)?)
    }

    /// The number of items (or pairs, for a dict); 0 for a scalar.
    pub fn len(&self) -> usize {
        match self.value {
            Value::Dict(p) => p.len(),
            v => v.as_items().map_or(0, <[NodeId]>::len),
        }
    }

    /// Whether [`ValueRef::len`] is 0.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The items of a list, tuple, set or frozenset (nothing for other values).
    pub fn items(&self) -> impl ExactSizeIterator<Item = ValueRef<'d, 'a>> + 'd
    where
        'a: 'd,
    {
        let doc = self.doc;
        let ids = self.value.as_items().unwrap_or(&[]);
        ids.iter().map(move |&id| ValueRef {
            doc,
            id,
            value: doc.get(id).unwrap_or(Value::None),
        })
    }

    /// The key-value pairs of a dict, in insertion order (nothing for other values).
    pub fn pairs(&self) -> impl ExactSizeIterator<Item = (ValueRef<'d, 'a>, ValueRef<'d, 'a>)> + 'd
    where
        'a: 'd,
    {
        let doc = self.doc;
        let pairs = self.value.as_pairs().unwrap_or(&[]);
        let view = move |id: NodeId| ValueRef {
            doc,
            id,
            value: doc.get(id).unwrap_or(Value::None),
        };
        pairs.iter().map(move |&(k, v)| (view(k), view(v)))
    }

    /// Deserializes this value into `T` with the default bounds (see [`crate::de`]).
    ///
    /// # Errors
    /// A [`crate::de::DeError`] of the walk.
    #[cfg(feature = "serde")]
    pub fn deserialize<T: serde::Deserialize<'d>>(&self) -> Result<T, crate::de::DeError> {
        crate::de::Deserializer::new(self.doc)
            .at(self.id)
            .deserialize()
    }
}

impl<'d> std::ops::Deref for ValueRef<'d, '_> {
    type Target = Value<'d>;

    fn deref(&self) -> &Value<'d> {
        &self.value
    }
}
