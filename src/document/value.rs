//! [`Value`]: the public view of one decoded value.

use num_bigint::BigInt;

use super::{Global, NodeId, Object, PyBytes, PyStr};

/// One decoded Python value, as [`Document::get`](super::Document::get) gives it: a view that borrows the document
/// (`Copy`, at most 24 bytes).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Value<'d> {
    /// `None`.
    None,
    /// `True` or `False`.
    Bool(bool),
    /// An int that fits in 64 bits.
    Int(i64),
    /// An int outside the 64-bit range (never one that fits; ints are kept normalised).
    BigInt(&'d BigInt),
    /// A float (IEEE-754 binary64, NaN payloads and -0.0 kept).
    Float(f64),
    /// A complex number (real, imaginary), from `complex(re, im)`.
    Complex(f64, f64),
    /// A str.
    Str(PyStr<'d>),
    /// A bytes object.
    Bytes(PyBytes<'d>),
    /// A bytearray.
    ByteArray(&'d [u8]),
    /// A list: its items.
    List(&'d [NodeId]),
    /// A tuple: its items.
    Tuple(&'d [NodeId]),
    /// A dict: its key-value pairs in insertion order, after Python's key equality (`1`,
    /// `1.0` and `True` are one key; the first key object is kept, the last value wins).
    Dict(&'d [(NodeId, NodeId)]),
    /// A set: its items in insertion order (duplicates under Python equality dropped, the
    /// first kept).
    Set(&'d [NodeId]),
    /// A frozenset, as a set.
    FrozenSet(&'d [NodeId]),
    /// A global used as a value (or as the callable of a record).
    Global(&'d Global<'d>),
    /// A record object.
    Object(&'d Object),
}

impl Value<'_> {
    /// The Python type name (`"list"`, `"str"`), or `"object"` for a record.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "NoneType",
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::BigInt(_) => "int",
            Value::Float(_) => "float",
            Value::Complex(..) => "complex",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::ByteArray(_) => "bytearray",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(_) => "dict",
            Value::Set(_) => "set",
            Value::FrozenSet(_) => "frozenset",
            Value::Global(_) => "global",
            Value::Object(_) => "object",
        }
    }

    /// Whether the value is a container, the kinds that can refer to other nodes (list, tuple,
    /// dict, set, frozenset, record object; see [`Value::for_each_child`]).
    pub fn is_container(&self) -> bool {
        matches!(
            self,
            Value::List(_)
                | Value::Tuple(_)
                | Value::Dict(_)
                | Value::Set(_)
                | Value::FrozenSet(_)
                | Value::Object(_)
        )
    }

    /// Whether the value is mutable in Python (list, dict, set, bytearray, record object): the
    /// values whose identity matters.
    pub fn is_mutable(&self) -> bool {
        matches!(
            self,
            Value::List(_)
                | Value::Dict(_)
                | Value::Set(_)
                | Value::ByteArray(_)
                | Value::Object(_)
        )
    }

    /// Calls `f` on every node this value refers to, in document order (items in order; for a
    /// dict key then value; for an object callable, args, kwargs, state, listitems, dictitems).
    pub fn for_each_child(&self, mut f: impl FnMut(NodeId)) {
        match *self {
            Value::List(items)
            | Value::Tuple(items)
            | Value::Set(items)
            | Value::FrozenSet(items) => items.iter().copied().for_each(f),
            Value::Dict(pairs) => {
                for &(k, v) in pairs {
                    f(k);
                    f(v);
                }
            }
            Value::Object(o) => {
                f(o.callable);
                f(o.args);
                if let Some(k) = o.kwargs {
                    f(k);
                }
                if let Some(s) = o.state {
                    f(s);
                }
                o.listitems.iter().copied().for_each(&mut f);
                for &(k, v) in &o.dictitems {
                    f(k);
                    f(v);
                }
            }
            _ => {}
        }
    }
}
