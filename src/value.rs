//! The decoded document: an arena of values.
//!
//! Values live in one `Vec` ([`Document::nodes`]); containers hold [`NodeId`]s. The memo holds
//! node ids too, so a value reached through the memo twice is the same node (shared references
//! and cycles are kept as the graph they are, never deep-copied). Bytes and text are borrowed
//! from the input where the pickle holds them verbatim (`Cow::Borrowed`), so a [`Document`]
//! lives no longer than the input bytes it was decoded from: keep both together, or turn what
//! you need into owned data of your own (typed JSON, [`crate::json::to_typed_json`], is one
//! owned form).
//!
//! # Walking a document
//!
//! A document is a graph, not a tree: a value the pickle shares (a memo GET, or what CPython
//! shares itself, such as small ints) is one node reached from several places, and a
//! container can hold itself. Walk it with an explicit stack and a set of the ids already seen
//! (`NodeId` is `Copy + Hash + Eq`), not by recursion, whose depth the input would choose:
//!
//! ```
//! use std::collections::HashSet;
//! use picklewarden::{decode, Policy, Value};
//! // a = [1, "x"]; a.append(a); pickle.dumps({"k": a, "again": a}, 2)
//! let bytes = b"\x80\x02}q\x00(X\x01\x00\x00\x00kq\x01]q\x02(K\x01X\x01\x00\x00\x00xq\x03h\x02eX\x05\x00\x00\x00againq\x04h\x02u.";
//! let doc = decode(bytes, &Policy::data())?;
//! let mut seen = HashSet::new();
//! let mut stack: Vec<_> = doc.root().into_iter().collect();
//! let (mut lists, mut strs) = (0, Vec::new());
//! while let Some(id) = stack.pop() {
//!     if !seen.insert(id) {
//!         continue; // shared, or a cycle: already visited
//!     }
//!     let Some(value) = doc.get(id) else { continue };
//!     match value {
//!         Value::List(_) => lists += 1,
//!         Value::Str(s) => strs.push(s.as_str().unwrap_or("<surrogates>").to_owned()),
//!         _ => {}
//!     }
//!     value.for_each_child(|child| stack.push(child));
//! }
//! assert_eq!(lists, 1); // the list is one node, met three times
//! strs.sort();
//! assert_eq!(strs, ["again", "k", "x"]);
//! # Ok::<(), picklewarden::Error>(())
//! ```
//!
//! Without the set of ids seen, a walk can take exponential time on a small input that every
//! limit accepts: `t = (t, t)` sixty times over pickles in 252 bytes (protocol 4) and is 61
//! nodes, but 2^60 paths from the root. Typed JSON ([`crate::json`]) writes every mutable value
//! once and refers to it by id after that; [`crate::repr`] stops printing a value again once
//! its text passes a size bound. Dict keys and set items are node ids too: compare them
//! through the values they refer to.

use std::borrow::Cow;

use num_bigint::BigInt;

/// The id of a value in its [`Document`]: the index of an arena slot, or one of the ids of
/// the values every document shares (see [`NodeId::is_shared`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub(crate) u32);

/// The smallest and largest int CPython preallocates and shares: `-_PY_NSMALLNEGINTS` and
/// `_PY_NSMALLPOSINTS - 1` (5 and 257 in CPython 3.11's
/// `Include/internal/pycore_global_objects.h` and 3.14's `pycore_runtime_structs.h`; CPython's
/// main branch has raised the upper end to 1024, which changes only which equal ints are one
/// object, never a value).
const SMALL_INT_MIN: i64 = -5;
const SMALL_INT_MAX: i64 = 256;
/// None, False, True, then the small ints in order.
const SHARED_LEN: usize = 3 + (SMALL_INT_MAX - SMALL_INT_MIN + 1) as usize;
/// The first shared id; arena indices stay below it.
pub(crate) const SHARED_BASE: u32 = u32::MAX - (SHARED_LEN as u32 - 1);
/// The shared id of the int -5 (the others follow in order).
pub(crate) const SHARED_INT_BASE: u32 = SHARED_BASE + 3;

/// The shared values, built at compile time (indexing in const evaluation is checked by the
/// compiler; the `forget` only discards the `None` each slot held before).
#[allow(clippy::indexing_slicing)]
static SHARED: [Value<'static>; SHARED_LEN] = {
    let mut table = [const { Value::None }; SHARED_LEN];
    std::mem::forget(std::mem::replace(&mut table[1], Value::Bool(false)));
    std::mem::forget(std::mem::replace(&mut table[2], Value::Bool(true)));
    let mut i = 3;
    while i < SHARED_LEN {
        let v = Value::Int(SMALL_INT_MIN + (i - 3) as i64);
        std::mem::forget(std::mem::replace(&mut table[i], v));
        i += 1;
    }
    table
};

impl NodeId {
    /// The position in [`Document::nodes`] (for an arena value; a shared value's index is
    /// past the arena's end).
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// Whether this is one of the values every document shares instead of storing them in its
    /// arena: `None`, `False`, `True` and the ints -5 to 256, the objects CPython itself
    /// preallocates and shares (a list of five million small ints costs no arena slot per
    /// item). CPython also shares `()`, `''`, `b''` and one-character Latin-1 strings; those are
    /// arena nodes here, one per occurrence (equal in value; typed JSON allows either).
    /// [`Document::get`] resolves shared ids; they are not in [`Document::nodes`], so index
    /// that slice only with ids that are not shared.
    pub fn is_shared(self) -> bool {
        self.0 >= SHARED_BASE
    }

    /// The shared id of the int `i`, when it is one of the shared small ints.
    #[inline]
    pub(crate) fn shared_int(i: i64) -> Option<NodeId> {
        if (SMALL_INT_MIN..=SMALL_INT_MAX).contains(&i) {
            Some(NodeId(SHARED_BASE + 3 + (i - SMALL_INT_MIN) as u32))
        } else {
            None
        }
    }

    /// `i`'s place among the shared ints (0 for -5), when it is one of them: its shared id is
    /// [`SHARED_INT_BASE`] plus that.
    #[inline]
    pub(crate) fn shared_int_offset(i: i64) -> Option<u32> {
        let off = i.wrapping_sub(SMALL_INT_MIN) as u64;
        (off <= (SMALL_INT_MAX - SMALL_INT_MIN) as u64).then_some(off as u32)
    }

    /// The shared id of `v`, when `v` is one of the shared values.
    pub(crate) fn shared(v: &Value<'_>) -> Option<NodeId> {
        let i = match *v {
            Value::None => 0,
            Value::Bool(b) => 1 + u32::from(b),
            Value::Int(i) => return NodeId::shared_int(i),
            _ => return None,
        };
        Some(NodeId(SHARED_BASE + i))
    }
}

/// The value of `id` among `nodes` (an arena) or the shared values.
pub(crate) fn lookup<'d, 'a>(nodes: &'d [Value<'a>], id: NodeId) -> Option<&'d Value<'a>> {
    match id.0.checked_sub(SHARED_BASE) {
        Some(i) => SHARED.get(i as usize),
        None => nodes.get(id.index()),
    }
}

/// A Python `str`. Pickle can carry lone surrogates (CPython decodes BINUNICODE with
/// `surrogatepass`), which Rust's `str` cannot hold, so such text is kept as its
/// `surrogatepass` UTF-8 bytes (surrogates as 3-byte sequences ED A0 80 ... ED BF BF).
/// Each code point is encoded on its own, so two `PyStr` are equal as Python strings exactly
/// when their bytes are equal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PyStr<'a> {
    /// Text without lone surrogates.
    Utf8(Cow<'a, str>),
    /// Text holding at least one lone surrogate, as `surrogatepass` UTF-8 bytes.
    Surrogates(Cow<'a, [u8]>),
}

impl PyStr<'_> {
    /// The `surrogatepass` UTF-8 bytes of the text (plain UTF-8 when it has no surrogates).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            PyStr::Utf8(s) => s.as_bytes(),
            PyStr::Surrogates(b) => b,
        }
    }

    /// The text as `&str`, or `None` when it holds a lone surrogate.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            PyStr::Utf8(s) => Some(s),
            PyStr::Surrogates(_) => None,
        }
    }
}

/// How a record object was made, as typed JSON's `kind` field names it ([`crate::json`],
/// docs/typed-json.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// REDUCE, INST or OBJ: `callable(*args)`.
    Reduce,
    /// NEWOBJ: `cls.__new__(cls, *args)`.
    NewObj,
    /// NEWOBJ_EX: `cls.__new__(cls, *args, **kwargs)`.
    NewObjEx,
}

impl CallKind {
    /// `"reduce"`, `"newobj"` or `"newobj_ex"`.
    pub fn name(self) -> &'static str {
        match self {
            CallKind::Reduce => "reduce",
            CallKind::NewObj => "newobj",
            CallKind::NewObjEx => "newobj_ex",
        }
    }
}

/// An object that the policy keeps as a record (constructor `record`): the call that made it
/// and what was done to it afterwards, as plain data. Nothing is ever called.
#[derive(Clone, Debug, PartialEq)]
pub struct Object {
    /// How it was made.
    pub kind: CallKind,
    /// The global that was called (a [`Value::Global`] node).
    pub callable: NodeId,
    /// The positional arguments (a [`Value::Tuple`] node).
    pub args: NodeId,
    /// The keyword arguments (a [`Value::Dict`] node), NEWOBJ_EX only.
    pub kwargs: Option<NodeId>,
    /// The state given by the last BUILD, if any.
    pub state: Option<NodeId>,
    /// Items added by APPEND/APPENDS.
    pub listitems: Vec<NodeId>,
    /// Pairs added by SETITEM/SETITEMS.
    pub dictitems: Vec<(NodeId, NodeId)>,
}

/// A global (class or function) named by GLOBAL, STACK_GLOBAL, INST or an extension code and
/// allowed by the policy. Module and name are exactly as written in the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Global<'a> {
    /// Module name (`"__builtin__"`, `"collections"`).
    pub module: Cow<'a, str>,
    /// Qualified name (`"set"`, `"OrderedDict"`).
    pub name: Cow<'a, str>,
    /// Index of the policy rule that allowed it.
    pub(crate) rule: usize,
    /// Read at a protocol below 3, where CPython's `find_class` maps Python 2 names to Python
    /// 3 ones (`fix_imports`); the canonical writer, whose protocol 5 maps nothing, writes the
    /// mapped name ([`crate::canonical::python3_name`]).
    pub(crate) fix_imports: bool,
}

impl Global<'_> {
    /// The (module, name) CPython 3 finds this global under: as written, except that one read
    /// at protocol 0-2 has the Python 3 name `find_class` maps it to there
    /// ([`crate::canonical::python3_name`]). Two globals are one dict key or set item when these
    /// agree, as CPython finds one object for `__builtin__.set` at protocol 2 and `builtins.set`.
    pub fn python3_name(&self) -> (&str, &str) {
        if self.fix_imports {
            crate::compat::python3_name(&self.module, &self.name)
        } else {
            (&self.module, &self.name)
        }
    }
}

/// The items of a dict in insertion order, after Python's key equality (`1`, `1.0` and `True`
/// are one key; the first key object is kept, the last value wins). Held in the node itself
/// (no box: one allocation per dict); the hash index the decoder needs for a dict of more
/// than 16 keys lives in the decoder only while it builds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DictItems {
    /// Key-value pairs in insertion order.
    pub items: Vec<(NodeId, NodeId)>,
}

/// The items of a set or frozenset in insertion order (duplicates under Python equality are
/// dropped, the first kept). Held in the node itself, like [`DictItems`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetItems {
    /// Items in insertion order.
    pub items: Vec<NodeId>,
}

/// One decoded Python value.
#[derive(Clone, Debug)]
pub enum Value<'a> {
    /// `None`.
    None,
    /// `True` or `False`.
    Bool(bool),
    /// An int that fits in 64 bits.
    Int(i64),
    /// An int outside the 64-bit range (never one that fits; ints are kept normalised).
    BigInt(Box<BigInt>),
    /// A float (IEEE-754 binary64, NaN payloads and -0.0 kept).
    Float(f64),
    /// A complex number (real, imaginary), from `complex(re, im)`.
    Complex(f64, f64),
    /// A str.
    Str(PyStr<'a>),
    /// A bytes object.
    Bytes(Cow<'a, [u8]>),
    /// A bytearray.
    ByteArray(Vec<u8>),
    /// A list.
    List(Vec<NodeId>),
    /// A tuple.
    Tuple(Vec<NodeId>),
    /// A dict.
    Dict(DictItems),
    /// A set.
    Set(SetItems),
    /// A frozenset.
    FrozenSet(SetItems),
    /// A global used as a value (or as the callable of a record).
    Global(Box<Global<'a>>),
    /// A record object.
    Object(Box<Object>),
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
        match self {
            Value::List(items) | Value::Tuple(items) => items.iter().copied().for_each(f),
            Value::Dict(d) => {
                for &(k, v) in &d.items {
                    f(k);
                    f(v);
                }
            }
            Value::Set(s) | Value::FrozenSet(s) => s.items.iter().copied().for_each(f),
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

/// A decoded pickle (or a stream of pickles sharing one memo): the arena and its roots.
#[derive(Debug)]
pub struct Document<'a> {
    pub(crate) nodes: Vec<Value<'a>>,
    pub(crate) roots: Vec<NodeId>,
    /// Whether the input was decoded as a stream of pickles (typed JSON then writes `values`).
    pub(crate) stream: bool,
    /// Values created while decoding, shared ones included (so at least `nodes.len()`).
    pub(crate) values: u64,
    /// A later pickle of the stream changed a value an earlier one made.
    pub(crate) changed_earlier: bool,
    /// Every record can be written back as the call that made it
    /// ([`Document::records_replayable`]).
    pub(crate) records_replayable: bool,
    /// The arena index at which each pickle's values begin, one per root (`[0]` for a
    /// single pickle): the canonical writer makes each record's call in the pickle that made
    /// it.
    pub(crate) pickle_starts: Vec<usize>,
}

impl<'a> Document<'a> {
    /// Every value created while decoding, including ones that were popped and are not
    /// reachable from a root, except the shared values ([`NodeId::is_shared`]).
    pub fn nodes(&self) -> &[Value<'a>] {
        &self.nodes
    }

    /// The value of each pickle, in stream order (one root unless decoded as a stream).
    pub fn roots(&self) -> &[NodeId] {
        &self.roots
    }

    /// How many values were created while decoding: the arena's nodes plus every occurrence of
    /// a shared value ([`NodeId::is_shared`]).
    pub fn value_count(&self) -> u64 {
        self.values
    }

    /// Whether the document was decoded as a stream (several pickles sharing one memo).
    pub fn is_stream(&self) -> bool {
        self.stream
    }

    /// Whether a pickle of the stream changed a value that an earlier pickle made (APPEND,
    /// APPENDS, SETITEM, SETITEMS, ADDITEMS or BUILD on a value reached through the shared
    /// memo). The document then holds each value as the last pickle left it, which is not what
    /// CPython's `load()` of the earlier pickle returned at the time (`crate::canonical` refuses
    /// such a stream). Always `false` for a single pickle.
    pub fn changed_earlier(&self) -> bool {
        self.changed_earlier
    }

    /// Whether every record object of the document holds exactly what the call that made it
    /// received: none was made by INST or OBJ (which CPython runs as `cls.__new__(cls)`
    /// when there is no argument), and no list, dict, set or record its arguments reached was
    /// changed (APPEND, SETITEM, ADDITEMS, BUILD) after the call, so that CPython's call, made
    /// again on the values the document holds, receives what it received the first time
    /// (`crate::canonical` writes records back only then). `true` for a document without
    /// records.
    pub fn records_replayable(&self) -> bool {
        self.records_replayable
    }

    /// The value of the (first) pickle.
    pub fn root(&self) -> Option<NodeId> {
        self.roots.first().copied()
    }

    /// The value at `id` (in the arena, or a shared value). Ids come from this document, so
    /// the lookup cannot fail for them; an id from another document gives `None` when out of
    /// range.
    pub fn get(&self, id: NodeId) -> Option<&Value<'a>> {
        lookup(&self.nodes, id)
    }

    /// Drops every value and keeps the arena's allocation, for the next decode to build into
    /// ([`crate::Decoder::scratch`]). Costs what dropping the document costs.
    pub fn recycle(self) -> Scratch {
        let mut nodes = self.nodes;
        nodes.clear();
        // An empty Vec<Value<'a>> into an empty Vec<Value<'static>>: the same layout, so
        // collecting in place keeps the allocation (the closure never runs).
        Scratch {
            nodes: nodes.into_iter().map(|_| Value::None).collect(),
        }
    }
}

/// An arena left by an earlier decode ([`Document::recycle`]) for the next one to build into
/// ([`crate::Decoder::scratch`]): its pages are already mapped, so the next decode does not
/// page-fault its nodes in again. On these machines a fault costs about 2 us per 4 KiB page
/// (128 nodes): a third of the time of decoding a list of 5 million ints into a fresh arena.
///
/// For a process that decodes one input after another (a Mitogen hop reading a stream of
/// messages, a service). It holds the largest arena so far (32 bytes per node) until it is
/// dropped; it changes no limit, which count values, not capacity. A refused decode drops
/// the arena it was given.
///
/// ```
/// use picklewarden::{Decoder, Policy, Scratch, Value};
/// let policy = Policy::data();
/// let mut scratch = Scratch::new();
/// // pickle.dumps([1000, 1001], 2), then pickle.dumps(1002, 2)
/// let inputs: [&[u8]; 2] = [b"\x80\x02]q\x00(M\xe8\x03M\xe9\x03e.", b"\x80\x02M\xea\x03."];
/// for input in inputs {
///     let doc = Decoder::new(input, &policy).scratch(scratch).decode()?;
///     assert!(doc.root().and_then(|r| doc.get(r)).is_some());
///     scratch = doc.recycle(); // drops the values, keeps the arena
/// }
/// assert!(scratch.capacity_bytes() >= 2 * std::mem::size_of::<Value>());
/// # Ok::<(), picklewarden::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct Scratch {
    pub(crate) nodes: Vec<Value<'static>>,
}

impl Scratch {
    /// An empty scratch (no allocation).
    pub fn new() -> Scratch {
        Scratch::default()
    }

    /// The bytes of arena it holds.
    pub fn capacity_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Value<'static>>()
    }
}
