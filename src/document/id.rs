//! [`NodeId`]: the id of a value in its document.

use super::{PyBytes, PyStr, Value};

/// The id of a value in its [`Document`](super::Document): the index of an arena node, or one of the ids of the
/// values every document shares (see [`NodeId::is_shared`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub(crate) u32);

/// Ids with this bit set are ints held in the id itself: the low 31 bits, two's complement.
const IMMEDIATE_BIT: u32 = 0x8000_0000;
/// The smallest and largest int held in an id ([`NodeId::is_shared`]).
pub(super) const IMMEDIATE_MIN: i64 = -(1 << 30);
pub(super) const IMMEDIATE_MAX: i64 = (1 << 30) - 1;
/// The ids of `None`, `False`, `True`, `''` and `b''`.
pub(crate) const SHARED_BASE: u32 = 0x7FFF_FFFB;
/// Arena indices stay below this; it is [`NodeId::NO_NODE`], an id that names no value.
pub(crate) const ARENA_END: u32 = SHARED_BASE - 1;
const FALSE_ID: u32 = SHARED_BASE + 1;
const TRUE_ID: u32 = SHARED_BASE + 2;
const EMPTY_STR_ID: u32 = SHARED_BASE + 3;
const EMPTY_BYTES_ID: u32 = SHARED_BASE + 4;
const _: () = assert!(EMPTY_BYTES_ID < IMMEDIATE_BIT);

impl NodeId {
    /// The id of `None`.
    pub(crate) const NONE: NodeId = NodeId(SHARED_BASE);

    /// The id of the empty `str`: one value for every empty text of the document (from any
    /// text opcode, Python 2 strings read as text included), as CPython's `''` is one object.
    pub(crate) const EMPTY_STR: NodeId = NodeId(EMPTY_STR_ID);

    /// The id of the empty `bytes`: one value for every empty bytes of the document (from
    /// any bytes opcode, Python 2 strings read as bytes, `bytes()` and `_codecs.encode('',
    /// 'latin1')`), as CPython 3's `b''` is one object.
    pub(crate) const EMPTY_BYTES: NodeId = NodeId(EMPTY_BYTES_ID);

    /// An id that names no value (past every arena index, below the shared ids): an unset
    /// slot of the memo.
    pub(crate) const NO_NODE: NodeId = NodeId(ARENA_END);

    /// The position of an arena node among the document's nodes (creation order, from 0; see
    /// [`Document::len`](super::Document::len)). A shared value's index is past the arena's end.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// Whether this is one of the values every document shares instead of storing them in its
    /// arena: `None`, `False`, `True`, the empty `str` and `bytes` (every `''` and `b''` of
    /// a document is one id each), and the ints from -2**30 to 2**30 - 1, held in the id
    /// itself (a list of five million such ints costs no arena node per item). Equal ones are
    /// one id. CPython preallocates and shares `None`, `False`, `True`, `''`, `b''` and the
    /// ints -5 to 256; other equal ints are separate objects there, which no output of
    /// picklewarden can tell apart (typed JSON and the canonical pickle never refer to a
    /// shared id, they write its value each time). CPython also shares `()` and
    /// one-character Latin-1 strings; those are arena nodes here, one per occurrence (equal
    /// in value; typed JSON allows either).
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
    pub(super) fn shared_value(self) -> Option<Value<'static>> {
        if self.0 & IMMEDIATE_BIT != 0 {
            // Sign-extend the low 31 bits.
            return Some(Value::Int(i64::from(((self.0 << 1) as i32) >> 1)));
        }
        match self.0 {
            SHARED_BASE => Some(Value::None),
            FALSE_ID => Some(Value::Bool(false)),
            TRUE_ID => Some(Value::Bool(true)),
            EMPTY_STR_ID => Some(Value::Str(PyStr::new(b"", false))),
            EMPTY_BYTES_ID => Some(Value::Bytes(PyBytes::raw(b""))),
            _ => None,
        }
    }
}
