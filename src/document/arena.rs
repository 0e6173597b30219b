//! The arena: the private encoding of a document (12-byte nodes, a side table of larger
//! values, pools of items and pairs) and the views [`Value`] made from it.

use std::borrow::Cow;

use num_bigint::BigInt;

use super::{Global, NodeId, Object, PyBytes, PyStr, Scratch, Value};
use crate::latin1;

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

/// An arena node: 12 bytes, no destructor (what needs one is in [`Arena::fat`](super::Arena::fat)). Text and
/// bytes are offsets into the input; lists, tuples, sets and frozensets are a run of
/// [`Arena::items`](super::Arena::items), dicts of [`Arena::pairs`](super::Arena::pairs); a list, set or dict that grows again once other
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
    /// ASCII ([`PyBytes`]), and shorter than [`LATIN1_NODE_BYTES`](super::LATIN1_NODE_BYTES) (its Latin-1 length is
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
    /// The Latin-1 encoding of UTF-8 text (not all ASCII) of [`LATIN1_NODE_BYTES`](super::LATIN1_NODE_BYTES) or more,
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

/// Values to build an arena from by hand, in tests ([`Arena::of`](super::Arena::of)).
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
