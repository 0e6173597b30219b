//! [`Document`]: the arena with its roots, and [`Scratch`] to reuse one.

use super::{Arena, Node, NodeId, Value};

/// Bytes after the STOP of a pickle decoded with
/// [`Decoder::allow_trailing`](crate::Decoder::allow_trailing) (or scanned with
/// [`Scanner::allow_trailing`](crate::Scanner::allow_trailing)), left unread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
    /// Node lists most documents do not have, boxed together (one word), so that a document
    /// stays as small as it was (`mitogen::Content` holds one): `None` when both are empty.
    pub(crate) kept: Option<Box<Kept>>,
}

/// The node lists of a document kept apart ([`Document::kept`]).
#[derive(Debug, Default)]
pub(crate) struct Kept {
    /// The ids of the persistent ids kept under `persistent_ids = "record"`, in stream order.
    pub(crate) persistent_ids: Vec<NodeId>,
    /// The records whose BUILD state a policy check found to be the one their writer writes
    /// (`numpy_dtype`, `numpy_reconstruct`), sorted: the canonical writer writes each as its
    /// call and that BUILD.
    pub(crate) canonical_builds: Vec<NodeId>,
}

impl Kept {
    /// The lists, boxed, or `None` when both are empty.
    pub(crate) fn boxed(
        persistent_ids: Vec<NodeId>,
        canonical_builds: Vec<NodeId>,
    ) -> Option<Box<Kept>> {
        (!persistent_ids.is_empty() || !canonical_builds.is_empty()).then(|| {
            Box::new(Kept {
                persistent_ids,
                canonical_builds,
            })
        })
    }
}

impl<'a> Document<'a> {
    /// Whether `record`'s BUILD state was checked as its writer's (`canonical_builds`).
    pub(crate) fn canonical_build(&self, record: NodeId) -> bool {
        self.kept
            .as_deref()
            .is_some_and(|k| k.canonical_builds.binary_search(&record).is_ok())
    }

    /// The persistent ids (the values BINPERSID popped) kept under the policy's
    /// `persistent_ids = "record"` ([`crate::policy::PersistentIds::Record`]), in the order the
    /// stream gave them; each stands in the document where `persistent_load`'s object would.
    /// Empty under `reject`, which refuses them.
    pub fn persistent_ids(&self) -> &[NodeId] {
        self.kept
            .as_deref()
            .map_or(&[], |k| k.persistent_ids.as_slice())
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
    #[inline]
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
