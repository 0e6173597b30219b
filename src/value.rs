//! The decoded document: an arena of values, and the views [`Document::get`] gives of them.
//!
//! Values are nodes of 12 bytes in one `Vec`; containers hold [`NodeId`]s. The memo holds node
//! ids too, so a value reached through the memo twice is the same node (shared references and
//! cycles are kept as the graph they are, never deep-copied). Text and bytes are offsets into
//! the input where the pickle holds them verbatim (so a [`Document`] lives no longer than the
//! input bytes it was decoded from: keep both together, or turn what you need into owned data
//! of your own; typed JSON, [`crate::json::to_typed_json`], is one owned form). The items of
//! lists, tuples, sets and dicts sit side by side in a few shared pools rather than in an
//! allocation each. [`Document::get`] gives a [`Value`]: a small `Copy` view that borrows the
//! document (a text as its bytes, a list as a slice of ids).
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

use crate::latin1;
use crate::policy::RecordKey;

/// The UTF-8 text of a [`Node::Latin1`] is shorter than this: counting its Latin-1 length
/// when it is viewed costs little. A longer one is a [`Fat::Latin1`], which keeps its length,
/// so that hashing, comparing or writing a long one does not count it again each time.
pub(crate) const LATIN1_NODE_BYTES: usize = 4096;

/// The id of a value in its [`Document`]: the index of an arena node, or one of the ids of the
/// values every document shares (see [`NodeId::is_shared`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub(crate) u32);

/// Ids with this bit set are ints held in the id itself: the low 31 bits, two's complement.
const IMMEDIATE_BIT: u32 = 0x8000_0000;
/// The smallest and largest int held in an id ([`NodeId::is_shared`]).
const IMMEDIATE_MIN: i64 = -(1 << 30);
const IMMEDIATE_MAX: i64 = (1 << 30) - 1;
/// The ids of `None`, `False` and `True`.
pub(crate) const SHARED_BASE: u32 = 0x7FFF_FFFD;
/// Arena indices stay below this; it is [`NodeId::NO_NODE`], an id that names no value.
pub(crate) const ARENA_END: u32 = SHARED_BASE - 1;
const FALSE_ID: u32 = SHARED_BASE + 1;
const TRUE_ID: u32 = SHARED_BASE + 2;

impl NodeId {
    /// The id of `None`.
    pub(crate) const NONE: NodeId = NodeId(SHARED_BASE);

    /// An id that names no value (past every arena index, below the shared ids): an unset
    /// slot of the memo.
    pub(crate) const NO_NODE: NodeId = NodeId(ARENA_END);

    /// The position of an arena node among the document's nodes (creation order, from 0; see
    /// [`Document::len`]). A shared value's index is past the arena's end.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// Whether this is one of the values every document shares instead of storing them in its
    /// arena: `None`, `False`, `True` and the ints from -2**30 to 2**30 - 1, held in the id
    /// itself (a list of five million such ints costs no arena node per item). Equal ones are
    /// one id. CPython preallocates and shares `None`, `False`, `True` and the ints -5 to 256;
    /// other equal ints are separate objects there, which no output of picklewarden can tell
    /// apart (typed JSON and the canonical pickle never refer to a shared id, they write its
    /// value each time). CPython also shares `()`, `''`, `b''` and one-character Latin-1
    /// strings; those are arena nodes here, one per occurrence (equal in value; typed JSON
    /// allows either).
    pub fn is_shared(self) -> bool {
        self.0 >= SHARED_BASE
    }

    /// Whether this is an int held in the id itself.
    #[inline]
    pub(crate) fn is_held_int(self) -> bool {
        self.0 & IMMEDIATE_BIT != 0
    }

    /// The id of the bool `b`.
    #[inline]
    pub(crate) fn bool(b: bool) -> NodeId {
        NodeId(if b { TRUE_ID } else { FALSE_ID })
    }

    /// The shared id of the int `i`, when it is held in an id.
    #[inline]
    pub(crate) fn int(i: i64) -> Option<NodeId> {
        if (IMMEDIATE_MIN..=IMMEDIATE_MAX).contains(&i) {
            Some(NodeId(IMMEDIATE_BIT | (i as u32 & !IMMEDIATE_BIT)))
        } else {
            None
        }
    }

    /// [`NodeId::int`] without a branch: the bits of the id that would hold `x`, and whether
    /// it does.
    #[inline(always)]
    pub(crate) fn int_bits(x: i64) -> (u32, bool) {
        let held = (x.wrapping_sub(IMMEDIATE_MIN) as u64) <= (IMMEDIATE_MAX - IMMEDIATE_MIN) as u64;
        (IMMEDIATE_BIT | (x as u32 & !IMMEDIATE_BIT), held)
    }

    /// The value of a shared id.
    #[inline]
    fn shared_value(self) -> Option<Value<'static>> {
        if self.0 & IMMEDIATE_BIT != 0 {
            // Sign-extend the low 31 bits.
            return Some(Value::Int(i64::from(((self.0 << 1) as i32) >> 1)));
        }
        match self.0 {
            SHARED_BASE => Some(Value::None),
            FALSE_ID => Some(Value::Bool(false)),
            TRUE_ID => Some(Value::Bool(true)),
            _ => None,
        }
    }
}

/// A Python `str`, as the document holds it: its UTF-8 bytes. Pickle can carry lone
/// surrogates (CPython decodes BINUNICODE with `surrogatepass`), which Rust's `str` cannot
/// hold, so such text is its `surrogatepass` UTF-8 bytes (surrogates as 3-byte sequences
/// ED A0 80 ... ED BF BF). Each code point is encoded on its own, so two `PyStr` are equal as
/// Python strings exactly when their bytes are equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PyStr<'d> {
    bytes: &'d [u8],
    surrogates: bool,
}

impl<'d> PyStr<'d> {
    /// A text of `bytes`: valid UTF-8 when `surrogates` is false, else `surrogatepass` UTF-8
    /// holding at least one lone surrogate (the decoder checked which).
    pub(crate) fn new(bytes: &'d [u8], surrogates: bool) -> PyStr<'d> {
        PyStr { bytes, surrogates }
    }

    /// The `surrogatepass` UTF-8 bytes of the text (plain UTF-8 when it has no surrogates).
    pub fn as_bytes(&self) -> &'d [u8] {
        self.bytes
    }

    /// The text as `&str`, or `None` when it holds a lone surrogate. The document keeps text
    /// as bytes it validated once; this validates them again (SIMD, several GB/s), since safe
    /// Rust has no other way to turn bytes into `&str`.
    pub fn as_str(&self) -> Option<&'d str> {
        if self.surrogates {
            return None;
        }
        simdutf8::basic::from_utf8(self.bytes).ok()
    }

    /// Whether the text holds a lone surrogate (and so has no `&str`).
    pub fn has_surrogates(&self) -> bool {
        self.surrogates
    }

    /// The number of code points (each byte that is not a UTF-8 continuation byte begins one;
    /// a surrogate is one 3-byte sequence).
    pub fn chars_count(&self) -> usize {
        self.bytes.iter().filter(|&&b| b & 0xC0 != 0x80).count()
    }
}

/// A Python `bytes` value as the document holds it: bytes of the input, or text whose code
/// points are all below U+0100 standing for its Latin-1 encoding (what protocols 0-2 write
/// for bytes: `_codecs.encode(text, 'latin1')`, the bytes are each code point's value). The
/// text was checked when it was decoded; its bytes are made only when they are asked for
/// ([`PyBytes::to_cow`], [`PyBytes::for_each_chunk`]), so a decode that only checks and passes
/// a Mitogen transfer on never transcodes it.
#[derive(Clone, Copy, Debug)]
pub struct PyBytes<'d> {
    repr: BytesRepr<'d>,
}

#[derive(Clone, Copy, Debug)]
enum BytesRepr<'d> {
    Raw(&'d [u8]),
    /// UTF-8 text with code points below U+0100 only, one of them at least above U+007F
    /// (ASCII text is held as [`BytesRepr::Raw`]: its bytes are the text's), and the length
    /// of its Latin-1 encoding.
    Latin1 {
        text: &'d [u8],
        len: usize,
    },
}

impl<'d> PyBytes<'d> {
    /// Bytes held as they are.
    pub(crate) fn raw(bytes: &'d [u8]) -> PyBytes<'d> {
        PyBytes {
            repr: BytesRepr::Raw(bytes),
        }
    }

    /// The Latin-1 encoding, `len` bytes long, of `text`: valid UTF-8 whose code points are
    /// all below U+0100, one at least above U+007F (the arena holds ASCII text's encoding as
    /// the text's own bytes, [`PyBytes::raw`]).
    pub(crate) fn latin1(text: &'d [u8], len: usize) -> PyBytes<'d> {
        PyBytes {
            repr: BytesRepr::Latin1 { text, len },
        }
    }

    /// The number of bytes (for the Latin-1 encoding of text, counted when the text was
    /// checked or viewed, not again).
    pub fn len(&self) -> usize {
        match self.repr {
            BytesRepr::Raw(b) => b.len(),
            BytesRepr::Latin1 { len, .. } => len,
        }
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes as a slice of the document, when it holds them as they are (always, but for
    /// the Latin-1 encoding of text that is not all ASCII: then `None`; see [`PyBytes::to_cow`]).
    pub fn as_slice(&self) -> Option<&'d [u8]> {
        match self.repr {
            BytesRepr::Raw(b) => Some(b),
            BytesRepr::Latin1 { .. } => None,
        }
    }

    /// The bytes: borrowed where the document holds them as they are, else made from the text
    /// (one allocation of [`PyBytes::len`] bytes).
    pub fn to_cow(&self) -> Cow<'d, [u8]> {
        match self.repr {
            BytesRepr::Raw(b) => Cow::Borrowed(b),
            BytesRepr::Latin1 { text, len } => Cow::Owned(latin1::pack(text, len)),
        }
    }

    /// The bytes in an owned `Vec`.
    pub fn to_vec(&self) -> Vec<u8> {
        self.to_cow().into_owned()
    }

    /// The UTF-8 text the bytes are the Latin-1 encoding of, when the document holds them so
    /// (the protocol 0-2 form, `_codecs.encode(text, 'latin1')`, of text that is not all
    /// ASCII).
    pub fn latin1_text(&self) -> Option<&'d [u8]> {
        match self.repr {
            BytesRepr::Raw(_) => None,
            BytesRepr::Latin1 { text, .. } => Some(text),
        }
    }

    /// Calls `f` on the bytes in order, in one or more pieces that together are the bytes
    /// (without allocating: Latin-1 text is transcoded 4 KiB at a time on the stack). Empty
    /// bytes make no call.
    pub fn for_each_chunk(&self, mut f: impl FnMut(&[u8])) {
        match self.repr {
            BytesRepr::Raw(b) => {
                if !b.is_empty() {
                    f(b)
                }
            }
            BytesRepr::Latin1 { text, .. } => latin1::for_each_chunk(text, f),
        }
    }

    /// [`PyBytes::for_each_chunk`] of the first `n` bytes (all of them when there are fewer):
    /// nothing past them is transcoded.
    pub fn for_each_chunk_of(&self, n: usize, mut f: impl FnMut(&[u8])) {
        match self.repr {
            BytesRepr::Raw(b) => {
                let head = b.get(..n).unwrap_or(b);
                if !head.is_empty() {
                    f(head)
                }
            }
            BytesRepr::Latin1 { text, .. } => {
                let mut left = n;
                latin1::for_each_chunk_while(text, |piece| {
                    let take = piece.len().min(left);
                    if take > 0 {
                        f(piece.get(..take).unwrap_or(piece));
                    }
                    left -= take;
                    left > 0
                });
            }
        }
    }
}

impl PartialEq for PyBytes<'_> {
    /// Byte equality, whichever way each side is held.
    fn eq(&self, other: &PyBytes<'_>) -> bool {
        if self.len() != other.len() {
            return false;
        }
        match (self.as_slice(), other.as_slice()) {
            (Some(a), Some(b)) => a == b,
            (Some(raw), None) => other.latin1_text().is_some_and(|t| latin1::eq(t, raw)),
            (None, Some(raw)) => self.latin1_text().is_some_and(|t| latin1::eq(t, raw)),
            // Two texts, each with a code point above U+007F: equal bytes are equal text.
            (None, None) => self.latin1_text() == other.latin1_text(),
        }
    }
}

impl Eq for PyBytes<'_> {}

/// How a record object was made (the opcode that made it), as typed JSON's `kind` field
/// names it ([`crate::json`], docs/typed-json.md). More kinds may come, as opcodes are told
/// apart that CPython runs differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallKind {
    /// REDUCE: `callable(*args)`.
    Reduce,
    /// NEWOBJ: `cls.__new__(cls, *args)`.
    NewObj,
    /// NEWOBJ_EX: `cls.__new__(cls, *args, **kwargs)`.
    NewObjEx,
    /// INST (protocol 0: the class named by the opcode, the arguments after the MARK):
    /// `cls(*args)`, but `cls.__new__(cls)` with no arguments when `cls` is a class without
    /// `__getinitargs__` (`Lib/pickle.py` `_instantiate`).
    Inst,
    /// OBJ (protocol 1: the class is the first item after the MARK), as INST.
    Obj,
}

impl CallKind {
    /// `"reduce"`, `"newobj"`, `"newobj_ex"`, `"inst"` or `"obj"`.
    pub fn name(self) -> &'static str {
        match self {
            CallKind::Reduce => "reduce",
            CallKind::NewObj => "newobj",
            CallKind::NewObjEx => "newobj_ex",
            CallKind::Inst => "inst",
            CallKind::Obj => "obj",
        }
    }

    /// INST or OBJ (the policy's `inst` form).
    pub fn is_inst(self) -> bool {
        matches!(self, CallKind::Inst | CallKind::Obj)
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
    /// How it is compared as a dict key or set item: its policy rule's `key`.
    pub key: RecordKey,
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

/// One decoded Python value, as [`Document::get`] gives it: a view that borrows the document
/// (`Copy`, at most 24 bytes).
#[derive(Clone, Copy, Debug)]
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

/// An `i64` or `f64` as two `u32` halves, so that a node is aligned to 4 bytes (12 bytes
/// long, not 16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Word([u32; 2]);

impl Word {
    #[inline(always)]
    pub(crate) fn int(x: i64) -> Word {
        Word::bits(x as u64)
    }

    #[inline(always)]
    pub(crate) fn float(x: f64) -> Word {
        Word::bits(x.to_bits())
    }

    #[inline(always)]
    fn bits(b: u64) -> Word {
        Word([b as u32, (b >> 32) as u32])
    }

    #[inline(always)]
    pub(crate) fn get_i64(self) -> i64 {
        self.get_bits() as i64
    }

    #[inline(always)]
    pub(crate) fn get_f64(self) -> f64 {
        f64::from_bits(self.get_bits())
    }

    #[inline(always)]
    fn get_bits(self) -> u64 {
        let [lo, hi] = self.0;
        u64::from(lo) | (u64::from(hi) << 32)
    }
}

/// An arena node: 12 bytes, no destructor (what needs one is in [`Arena::fat`]). Text and
/// bytes are offsets into the input; lists, tuples, sets and frozensets are a run of
/// [`Arena::items`], dicts of [`Arena::pairs`]; a list, set or dict that grows again once other
/// containers were made after it moves to a `Vec` of its own (`*Vec`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Node {
    Int(Word),
    Float(Word),
    /// Valid UTF-8 without lone surrogates, `input[start..start + len]`.
    Str {
        start: u32,
        len: u32,
    },
    /// `surrogatepass` UTF-8 holding a lone surrogate, `input[start..start + len]`.
    Surrogates {
        start: u32,
        len: u32,
    },
    /// Bytes, `input[start..start + len]`.
    Bytes {
        start: u32,
        len: u32,
    },
    /// The Latin-1 encoding of the UTF-8 text `input[start..start + len]`, which is not all
    /// ASCII ([`PyBytes`]), and shorter than [`LATIN1_NODE_BYTES`] (its Latin-1 length is
    /// counted when it is viewed; a longer text's is kept in [`Fat::Latin1`]).
    Latin1 {
        start: u32,
        len: u32,
    },
    List {
        start: u32,
        len: u32,
    },
    Tuple {
        start: u32,
        len: u32,
    },
    Set {
        start: u32,
        len: u32,
    },
    FrozenSet {
        start: u32,
        len: u32,
    },
    Dict {
        start: u32,
        len: u32,
    },
    /// A list whose items are `Arena::vecs[i]`.
    ListVec(u32),
    /// A set whose items are `Arena::vecs[i]`.
    SetVec(u32),
    /// A dict whose pairs are `Arena::pair_vecs[i]`.
    DictVec(u32),
    /// `Arena::fat[i]`.
    Fat(u32),
}

const _: () = assert!(std::mem::size_of::<Node>() == 12);
// The side table's slot, charged as `FAT_BYTES` and documented in docs/limits.md, "Peak memory".
const _: () = assert!(std::mem::size_of::<Fat<'static>>() == 80);

/// The values too large or too rare for a [`Node`] of their own.
#[derive(Debug)]
pub(crate) enum Fat<'a> {
    BigInt(BigInt),
    Complex(f64, f64),
    /// Text not in the input (decoded from escapes, or from Python 2 bytes), or past the
    /// reach of a node's 32-bit offsets.
    Str {
        bytes: Cow<'a, [u8]>,
        surrogates: bool,
    },
    /// Bytes not in the input (out-of-band buffers, copies), or past a node's reach.
    Bytes(Cow<'a, [u8]>),
    /// The Latin-1 encoding of UTF-8 text (not all ASCII) of [`LATIN1_NODE_BYTES`] or more,
    /// or past a node's reach, and its length.
    Latin1(&'a [u8], usize),
    ByteArray(Vec<u8>),
    Global(Global<'a>),
    Object(Object),
}

/// The values of one decode: nodes, the pools their items are in, and the input their text
/// and bytes are offsets into.
#[derive(Debug)]
pub(crate) struct Arena<'a> {
    pub(crate) input: &'a [u8],
    pub(crate) nodes: Vec<Node>,
    /// Items of lists, tuples, sets and frozensets, each a run.
    pub(crate) items: Vec<NodeId>,
    /// Pairs of dicts, each a run.
    pub(crate) pairs: Vec<(NodeId, NodeId)>,
    pub(crate) vecs: Vec<Vec<NodeId>>,
    pub(crate) pair_vecs: Vec<Vec<(NodeId, NodeId)>>,
    pub(crate) fat: Vec<Fat<'a>>,
}

/// `pool[start..start + len]`, or empty (never, for a node the decoder made).
#[inline]
fn run<T>(pool: &[T], start: u32, len: u32) -> &[T] {
    let start = start as usize;
    pool.get(start..start + len as usize).unwrap_or_default()
}

impl<'a> Arena<'a> {
    /// An empty arena over `input`, building into `scratch`'s allocations.
    pub(crate) fn new(input: &'a [u8], scratch: Scratch) -> Arena<'a> {
        Arena {
            input,
            nodes: scratch.nodes,
            items: scratch.items,
            pairs: scratch.pairs,
            vecs: Vec::new(),
            pair_vecs: Vec::new(),
            fat: Vec::new(),
        }
    }

    /// The number of nodes.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The value of `id` (a node, or a shared value); `None` for an id past the arena.
    #[inline]
    pub(crate) fn get(&self, id: NodeId) -> Option<Value<'_>> {
        match self.nodes.get(id.index()) {
            Some(&n) => Some(self.view(n)),
            None => id.shared_value(),
        }
    }

    /// The node of `id`, when it is an arena node.
    #[inline]
    pub(crate) fn node(&self, id: NodeId) -> Option<Node> {
        self.nodes.get(id.index()).copied()
    }

    /// `input[start..start + len]` (the text of a [`Node::Str`], [`Node::Bytes`], ...).
    #[inline(always)]
    pub(crate) fn text(&self, start: u32, len: u32) -> &[u8] {
        run(self.input, start, len)
    }

    /// The view of a node.
    #[inline]
    pub(crate) fn view(&self, n: Node) -> Value<'_> {
        match n {
            Node::Int(i) => Value::Int(i.get_i64()),
            Node::Float(x) => Value::Float(x.get_f64()),
            Node::Str { start, len } => Value::Str(PyStr::new(self.text(start, len), false)),
            Node::Surrogates { start, len } => Value::Str(PyStr::new(self.text(start, len), true)),
            Node::Bytes { start, len } => Value::Bytes(PyBytes::raw(self.text(start, len))),
            Node::Latin1 { start, len } => {
                let text = self.text(start, len);
                Value::Bytes(PyBytes::latin1(text, latin1::len(text).unwrap_or(0)))
            }
            Node::List { start, len } => Value::List(run(&self.items, start, len)),
            Node::Tuple { start, len } => Value::Tuple(run(&self.items, start, len)),
            Node::Set { start, len } => Value::Set(run(&self.items, start, len)),
            Node::FrozenSet { start, len } => Value::FrozenSet(run(&self.items, start, len)),
            Node::Dict { start, len } => Value::Dict(run(&self.pairs, start, len)),
            Node::ListVec(i) => Value::List(self.vecs.get(i as usize).map_or(&[], |v| v)),
            Node::SetVec(i) => Value::Set(self.vecs.get(i as usize).map_or(&[], |v| v)),
            Node::DictVec(i) => Value::Dict(self.pair_vecs.get(i as usize).map_or(&[], |v| v)),
            Node::Fat(i) => match self.fat.get(i as usize) {
                Some(Fat::BigInt(b)) => Value::BigInt(b),
                Some(&Fat::Complex(re, im)) => Value::Complex(re, im),
                Some(Fat::Str { bytes, surrogates }) => Value::Str(PyStr::new(bytes, *surrogates)),
                Some(Fat::Bytes(b)) => Value::Bytes(PyBytes::raw(b)),
                Some(&Fat::Latin1(text, len)) => Value::Bytes(PyBytes::latin1(text, len)),
                Some(Fat::ByteArray(b)) => Value::ByteArray(b),
                Some(Fat::Global(g)) => Value::Global(g),
                Some(Fat::Object(o)) => Value::Object(o),
                None => Value::None,
            },
        }
    }

    /// Where `bytes` lies in the input, as a node's offsets, when it does and they fit.
    pub(crate) fn offsets(&self, bytes: &[u8]) -> Option<(u32, u32)> {
        let start = (bytes.as_ptr() as usize).checked_sub(self.input.as_ptr() as usize)?;
        let inside = self
            .input
            .get(start..start.checked_add(bytes.len())?)
            .is_some_and(|s| std::ptr::eq(s, bytes));
        if !inside {
            return None;
        }
        Some((u32::try_from(start).ok()?, u32::try_from(bytes.len()).ok()?))
    }
}

/// Bytes after the STOP of a pickle decoded with
/// [`Decoder::allow_trailing`](crate::Decoder::allow_trailing) (or scanned with
/// [`Scanner::allow_trailing`](crate::Scanner::allow_trailing)), left unread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trailing {
    /// Absolute byte offset of the first byte after STOP.
    pub offset: u64,
    /// How many bytes follow, to the end of the input.
    pub len: u64,
}

/// A decoded pickle (or a stream of pickles sharing one memo): the arena and its roots.
#[derive(Debug)]
pub struct Document<'a> {
    pub(crate) arena: Arena<'a>,
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
    pub(crate) pickle_starts: Box<[usize]>,
    /// How many bytes were left after STOP, when the decoder allowed them; they run to the
    /// end of the input (less than 4 GiB: `Reader::trailing`). 32 bits, so that a document
    /// stays as small as it was (`mitogen::Content` holds one).
    pub(crate) trailing_len: Option<std::num::NonZeroU32>,
    /// The ids of the persistent ids kept under `persistent_ids = "record"`, in stream order.
    /// Boxed (one word), so that a document stays as small as it was (`mitogen::Content`
    /// holds one).
    #[allow(clippy::box_collection)]
    pub(crate) persistent_ids: Option<Box<Vec<NodeId>>>,
}

impl<'a> Document<'a> {
    /// The persistent ids (the values BINPERSID popped) kept under the policy's
    /// `persistent_ids = "record"` ([`crate::policy::PersistentIds::Record`]), in the order the
    /// stream gave them; each stands in the document where `persistent_load`'s object would.
    /// Empty under `reject`, which refuses them.
    pub fn persistent_ids(&self) -> &[NodeId] {
        self.persistent_ids.as_deref().map_or(&[], Vec::as_slice)
    }

    /// The bytes after the pickle's STOP that were left unread, when the decoder allowed them
    /// ([`Decoder::allow_trailing`](crate::Decoder::allow_trailing)) and there were any;
    /// `None` otherwise (and always for a stream).
    pub fn trailing(&self) -> Option<Trailing> {
        self.trailing_len.map(|len| {
            let len = u64::from(len.get());
            Trailing {
                offset: (self.arena.input.len() as u64).saturating_sub(len),
                len,
            }
        })
    }

    /// The number of arena nodes: every value created while decoding, including ones that
    /// were popped and are not reachable from a root, except the shared values
    /// ([`NodeId::is_shared`]). Their ids are `NodeId`s of index 0 to `len() - 1`
    /// ([`Document::ids`]).
    pub fn len(&self) -> usize {
        self.arena.len()
    }

    /// Whether the arena has no node (a document of shared values only, such as `None`).
    pub fn is_empty(&self) -> bool {
        self.arena.len() == 0
    }

    /// The ids of the arena's nodes, in the order they were made.
    pub fn ids(&self) -> impl ExactSizeIterator<Item = NodeId> + '_ {
        (0..self.arena.len()).map(|i| NodeId(i as u32))
    }

    /// The values of the arena's nodes, in the order they were made (the value of id
    /// `NodeId` of index `i` is the `i`-th): every value created while decoding, including
    /// ones that were popped and are not reachable from a root, except the shared values
    /// ([`NodeId::is_shared`]).
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = Value<'_>> + '_ {
        self.arena.nodes.iter().map(|&n| self.arena.view(n))
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

    /// The value at `id` (an arena node, or a shared value), as a view that borrows the
    /// document. Ids come from this document, so the lookup cannot fail for them; an id from
    /// another document gives `None` when out of range.
    pub fn get(&self, id: NodeId) -> Option<Value<'_>> {
        self.arena.get(id)
    }

    /// Drops every value and keeps the arena's allocations (nodes and item pools), for the
    /// next decode to build into ([`crate::Decoder::scratch`]). Costs what dropping the
    /// document costs.
    pub fn recycle(self) -> Scratch {
        let Arena {
            mut nodes,
            mut items,
            mut pairs,
            ..
        } = self.arena;
        nodes.clear();
        items.clear();
        pairs.clear();
        Scratch {
            nodes,
            items,
            pairs,
        }
    }
}

/// An arena left by an earlier decode ([`Document::recycle`]) for the next one to build into
/// ([`crate::Decoder::scratch`]): its pages are already mapped, so the next decode does not
/// page-fault its nodes in again. On these machines a fault costs about 2 us per 4 KiB page
/// (256 nodes).
///
/// For a process that decodes one input after another (a Mitogen hop reading a stream of
/// messages, a service). It holds the largest arena so far (12 bytes per node, 4 per item, 8
/// per dict pair) until it is dropped; it changes no limit, which count values, not capacity.
/// A refused decode drops the arena it was given.
///
/// ```
/// use picklewarden::{Decoder, Policy, Scratch, Value};
/// let policy = Policy::data();
/// let mut scratch = Scratch::new();
/// // pickle.dumps([1.5, 2.5], 2), then pickle.dumps(3.5, 2)
/// let inputs: [&[u8]; 2] = [
///     b"\x80\x02]q\x00(G?\xf8\x00\x00\x00\x00\x00\x00G@\x04\x00\x00\x00\x00\x00\x00e.",
///     b"\x80\x02G@\x0c\x00\x00\x00\x00\x00\x00.",
/// ];
/// for input in inputs {
///     let doc = Decoder::new(input, &policy).scratch(scratch).decode()?;
///     assert!(doc.root().and_then(|r| doc.get(r)).is_some());
///     scratch = doc.recycle(); // drops the values, keeps the arena
/// }
/// assert!(scratch.capacity_bytes() >= 3 * 16);
/// # Ok::<(), picklewarden::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct Scratch {
    pub(crate) nodes: Vec<Node>,
    pub(crate) items: Vec<NodeId>,
    pub(crate) pairs: Vec<(NodeId, NodeId)>,
}

impl Scratch {
    /// An empty scratch (no allocation).
    pub fn new() -> Scratch {
        Scratch::default()
    }

    /// The bytes of arena it holds.
    pub fn capacity_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.items.capacity() * std::mem::size_of::<NodeId>()
            + self.pairs.capacity() * std::mem::size_of::<(NodeId, NodeId)>()
    }
}

/// Values to build an arena from by hand, in tests ([`Arena::of`]).
#[cfg(test)]
#[derive(Clone, Debug)]
pub(crate) enum Owned {
    Int(i64),
    BigInt(BigInt),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    Tuple(Vec<NodeId>),
    FrozenSet(Vec<NodeId>),
}

#[cfg(test)]
impl Arena<'static> {
    /// An arena whose node `i` is `values[i]` (text and bytes owned, items pooled).
    pub(crate) fn of(values: Vec<Owned>) -> Arena<'static> {
        let mut a = Arena::new(&[], Scratch::new());
        for v in values {
            let fat = |a: &mut Arena<'static>, f: Fat<'static>| {
                a.fat.push(f);
                Node::Fat(a.fat.len() as u32 - 1)
            };
            let items = |a: &mut Arena<'static>, items: &[NodeId]| {
                a.items.extend_from_slice(items);
                ((a.items.len() - items.len()) as u32, items.len() as u32)
            };
            let n = match v {
                Owned::Int(i) => Node::Int(Word::int(i)),
                Owned::Float(x) => Node::Float(Word::float(x)),
                Owned::BigInt(b) => fat(&mut a, Fat::BigInt(b)),
                Owned::Str(s) => fat(
                    &mut a,
                    Fat::Str {
                        bytes: Cow::Owned(s.into_bytes()),
                        surrogates: false,
                    },
                ),
                Owned::Bytes(b) => fat(&mut a, Fat::Bytes(Cow::Owned(b))),
                Owned::Tuple(v) => {
                    let (start, len) = items(&mut a, &v);
                    Node::Tuple { start, len }
                }
                Owned::FrozenSet(v) => {
                    let (start, len) = items(&mut a, &v);
                    Node::FrozenSet { start, len }
                }
            };
            a.nodes.push(n);
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_hold_ints_of_31_bits_and_the_singletons() {
        for i in [
            0,
            1,
            -1,
            -5,
            256,
            257,
            1000,
            IMMEDIATE_MIN,
            IMMEDIATE_MAX,
            -123_456_789,
        ] {
            let id = NodeId::int(i).unwrap();
            assert!(id.is_shared(), "{i}");
            assert!(
                matches!(id.shared_value(), Some(Value::Int(j)) if j == i),
                "{i}"
            );
        }
        for i in [IMMEDIATE_MIN - 1, IMMEDIATE_MAX + 1, i64::MAX, i64::MIN] {
            assert_eq!(NodeId::int(i), None, "{i}");
        }
        assert!(matches!(NodeId::NONE.shared_value(), Some(Value::None)));
        assert!(matches!(
            NodeId::bool(true).shared_value(),
            Some(Value::Bool(true))
        ));
        assert!(matches!(
            NodeId::bool(false).shared_value(),
            Some(Value::Bool(false))
        ));
        assert!(!NodeId(SHARED_BASE - 1).is_shared());
        assert_eq!(NodeId(SHARED_BASE - 1).shared_value().map(|_| ()), None);
    }

    #[test]
    fn latin1_bytes_equal_raw_bytes_of_the_same_content() {
        let all: Vec<u8> = (0..=255u8).collect();
        let text: String = all.iter().map(|&b| char::from(b)).collect();
        let lazy = PyBytes::latin1(text.as_bytes(), 256);
        assert_eq!(lazy.len(), 256);
        assert_eq!(lazy.as_slice(), None);
        assert_eq!(lazy.to_cow().as_ref(), all.as_slice());
        assert_eq!(lazy, PyBytes::raw(&all));
        assert_eq!(PyBytes::raw(&all), lazy);
        let mut other = all.clone();
        other[200] ^= 1;
        assert_ne!(lazy, PyBytes::raw(&other));
        let mut pieces = Vec::new();
        lazy.for_each_chunk(|c| pieces.extend_from_slice(c));
        assert_eq!(pieces, all);
        for n in [0, 3, 200, 256, 300] {
            let mut head = Vec::new();
            lazy.for_each_chunk_of(n, |c| head.extend_from_slice(c));
            assert_eq!(head, all[..n.min(256)], "{n}");
            let mut head = Vec::new();
            PyBytes::raw(&all).for_each_chunk_of(n, |c| head.extend_from_slice(c));
            assert_eq!(head, all[..n.min(256)], "{n}");
        }
        let short = PyBytes::latin1("é".as_bytes(), 1);
        assert_eq!(short.to_vec(), vec![0xE9]);
        assert_ne!(short, PyBytes::raw("é".as_bytes()));
    }
}
