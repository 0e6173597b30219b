//! Typed JSON, picklewarden's lossless output format (`picklewarden-typed-json/1`, described in
//! the repository's `docs/typed-json.md`).
//!
//! The writer walks an explicit stack (never the call stack), writes every node referenced more
//! than once with an `"id"` on its first appearance and as `{"type":"ref","id":N}` after, so the
//! output is linear in the size of the arena and cycles are representable. Set and frozenset
//! items are sorted by the compact JSON text of each item written on its own.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io;
use std::time::Instant;

use crate::clock::Clock;
use crate::text::float_repr;
use crate::value::{Arena, Document, NodeId, PyBytes, Value};

/// The format tag written at the top of every document.
pub const FORMAT: &str = "picklewarden-typed-json/1";

/// The typed JSON text of a document: `{"format": ..., "value": node}` for one pickle, or
/// `{"format": ..., "values": [...]}` for a document decoded as a stream.
pub fn to_typed_json(doc: &Document<'_>) -> String {
    write_document(doc, usize::MAX, None).unwrap_or_default()
}

/// As [`to_typed_json`], but gives up (`None`) once the text passes `max_bytes`, so a caller
/// that must bound its memory (the service) never holds much more than `max_bytes` of output.
/// Typed JSON can be many times the size of the pickle (a 1-byte NONE is 15 bytes of JSON);
/// the text may pass `max_bytes` by at most one scalar node before the writer stops.
pub fn to_typed_json_limited(doc: &Document<'_>, max_bytes: usize) -> Option<String> {
    write_document(doc, max_bytes, None)
}

/// What one big int counts for, in the writers' work between two looks at the clock
/// ([`crate::clock::CHECK_EVERY`] values): a 4096-byte one takes about 0.2 ms to write.
pub(crate) const BIG_INT_WORK: u64 = 1024;

/// As [`to_typed_json_limited`], and also gives up (`None`) once `deadline` has passed (looked
/// at every 256 set items while ordering sets, every 65,536 values, or 64 big ints, while
/// writing): for a
/// caller that answers by a deadline, as [`crate::Decoder::deadline`] is for the decode.
/// Ordering the sets can cost up to a sort key (1 KiB) per set item before anything is
/// written, which `max_bytes` does not bound.
pub fn to_typed_json_until(
    doc: &Document<'_>,
    max_bytes: usize,
    deadline: Instant,
) -> Option<String> {
    write_document(doc, max_bytes, Some(deadline))
}

/// Writes typed JSON of `doc` to `out` as the text is made, in pieces of about 1 MiB
/// ([`SPILL_BYTES`]): the same bytes as [`to_typed_json`] (no newline after), without ever
/// holding them all. Typed JSON is often several times the size of its pickle (the 20 MB of
/// small objects of bench/gen_workloads.py are 141 MB of it), so a program that passes the
/// text on (the command-line tool, to its standard output) holds the document and one piece,
/// not the document and the whole text.
///
/// # Errors
/// The first error `out` returns; nothing more is written after it (the text is then cut
/// short). The writer calls `out.write_all` and never `flush`.
pub fn write_typed_json(
    doc: &Document<'_>,
    mut out: &mut (impl io::Write + ?Sized),
) -> io::Result<()> {
    // `&mut W` is a sized writer whatever `W` is (a `dyn Write` included).
    write_in_pieces(doc, &mut out, SPILL_BYTES)
}

/// [`write_typed_json`] with pieces of about `piece` bytes (the tests cut at every few bytes).
pub(crate) fn write_in_pieces(
    doc: &Document<'_>,
    out: &mut dyn io::Write,
    piece: usize,
) -> io::Result<()> {
    let mut w = Writer::new(&doc.arena, &doc.roots, None);
    w.sink = Sink::new(out);
    w.check_at = piece;
    let _ = w.out.try_reserve(piece.saturating_add(piece / 8));
    write_wrapped(&mut w, doc);
    w.sink.finish(&mut w.out)
}

/// Where a writer passes its text on as it is made ([`write_typed_json`],
/// [`crate::repr::write_repr`]): the writer, the bytes passed on so far, and its first error.
#[derive(Default)]
pub(crate) struct Sink<'s> {
    out: Option<&'s mut dyn io::Write>,
    /// Bytes passed on so far.
    pub(crate) passed: usize,
    error: Option<io::Error>,
}

impl<'s> Sink<'s> {
    pub(crate) fn new(out: &'s mut dyn io::Write) -> Sink<'s> {
        Sink {
            out: Some(out),
            ..Sink::default()
        }
    }

    /// Passes `text` on and empties it; `false` when there is no writer (the caller's text
    /// stays whole) or the writer failed (its error is kept, and it is never called again).
    #[cold]
    pub(crate) fn pass(&mut self, text: &mut String) -> bool {
        let Some(out) = self.out.as_mut() else {
            return false;
        };
        if let Err(e) = out.write_all(text.as_bytes()) {
            self.error = Some(e);
            self.out = None;
            return false;
        }
        self.passed += text.len();
        text.clear();
        true
    }

    /// Passes the rest of `text` on, unless the writer failed; gives its first error.
    pub(crate) fn finish(mut self, text: &mut String) -> io::Result<()> {
        if self.error.is_none() {
            self.pass(text);
        }
        self.error.map_or(Ok(()), Err)
    }
}

/// The text held before it is passed to the sink of [`write_typed_json`]: it is passed on at
/// the first look past this many bytes (every value, or every item of a run of scalars), so a
/// piece is this plus at most one scalar value (a long text, or bytes written as hex, is one
/// piece of its own).
pub const SPILL_BYTES: usize = 1 << 20;

fn write_document(
    doc: &Document<'_>,
    max_bytes: usize,
    deadline: Option<Instant>,
) -> Option<String> {
    let mut w = Writer::new(&doc.arena, &doc.roots, deadline);
    if w.timed_out {
        return None;
    }
    w.check_at = max_bytes;
    // Room for ~24 bytes a value up front (a small int is 31): fewer regrowth copies while the
    // text is small enough to be copied when it grows. At most 64 MiB (past that glibc grows
    // it by remapping, without a copy), so popped values, which `values` counts but nothing
    // writes, cannot make a short text hold a large reservation; never past `max_bytes`.
    const HINT_MAX: usize = 64 << 20;
    let hint = usize::try_from(doc.values)
        .unwrap_or(usize::MAX)
        .saturating_mul(24)
        .min(HINT_MAX)
        .min(max_bytes.saturating_add(64));
    let _ = w.out.try_reserve(hint);
    write_wrapped(&mut w, doc);
    // A text far shorter than its reservation (values popped, or shared) gives the rest back.
    if w.out.capacity() > w.out.len().saturating_mul(2).saturating_add(4096) {
        w.out.shrink_to_fit();
    }
    (!w.overflowed).then_some(w.out)
}

/// Writes `{"format": ..., "value": node}` (or `"values": [...]` for a stream) for `doc`.
fn write_wrapped(w: &mut Writer<'_, '_>, doc: &Document<'_>) {
    w.out.push_str("{\"format\":\"");
    w.out.push_str(FORMAT);
    if doc.stream {
        w.out.push_str("\",\"values\":[");
        for (i, &root) in doc.roots.iter().enumerate() {
            if i > 0 {
                w.out.push(',');
            }
            w.write(root);
        }
        w.out.push_str("]}");
    } else {
        w.out.push_str("\",\"value\":");
        if let Some(root) = doc.root() {
            w.write(root);
        } else {
            w.out.push_str("null");
        }
        w.out.push('}');
    }
}

/// The typed JSON node of one value of a document (no `format` wrapper), with ids numbered
/// from 0 within this text.
pub fn node_to_typed_json(doc: &Document<'_>, id: NodeId) -> String {
    let mut w = Writer::new(&doc.arena, &[id], None);
    w.write(id);
    w.out
}

/// The in-degree of each arena node (saturating at 255) over what `roots` reach, and whether
/// they reach a set or frozenset. Only reachable nodes count: an unreachable cycle (values
/// popped from the stack) must not be mistaken for a shared value, nor written. A node with an
/// in-degree of 2 or more is written once and referred to after (typed JSON's ids,
/// [`crate::canonical`]'s memo).
pub(crate) fn reachable_refs(arena: &Arena<'_>, roots: &[NodeId]) -> (Vec<u8>, bool) {
    let mut refs = vec![0u8; arena.len()];
    let mut seen = vec![false; arena.len()];
    let mut work: Vec<NodeId> = Vec::new();
    for &r in roots {
        if let Some(c) = refs.get_mut(r.index()) {
            *c = c.saturating_add(1);
        }
        work.push(r);
    }
    let mut any_set = false;
    while let Some(id) = work.pop() {
        match seen.get_mut(id.index()) {
            Some(s) if !*s => *s = true,
            _ => continue,
        }
        let Some(v) = arena.get(id) else {
            continue;
        };
        any_set |= matches!(v, Value::Set(_) | Value::FrozenSet(_));
        v.for_each_child(|c| {
            if let Some(n) = refs.get_mut(c.index()) {
                *n = n.saturating_add(1);
            }
            // Only containers have children to count: a scalar (or a shared value) is not
            // queued at all (a list of five million ints queued five million).
            if arena.get(c).is_some_and(|v| v.is_container()) {
                work.push(c);
            }
        });
    }
    (refs, any_set)
}

/// The writer's explicit stack (no recursion): a node, fixed text, or the rest of a sequence
/// of `id` from item `next` on. A sequence is one task however long it is, so the stack holds
/// a few entries per nesting level, not one per item.
enum Task {
    Node(NodeId),
    Raw(&'static str),
    Seq { id: NodeId, seq: Seq, next: usize },
}

/// Which sequence of a node a [`Task::Seq`] walks.
#[derive(Clone, Copy)]
enum Seq {
    /// List or tuple items (or set items, for a set with no sorted order).
    Items,
    /// Set items in their sorted order: `Writer::orders[i]`.
    Sorted(u32),
    /// Dict pairs, written `[k,v]`.
    Pairs,
    /// A record object's listitems.
    ObjList,
    /// A record object's dictitems, written `[k,v]`.
    ObjPairs,
}

/// Bytes of a set item's standalone text used as its sort key.
const SORT_KEY_BYTES: usize = 1024;
/// The sort keys of one set's items are together at most this many bytes: a set of more than
/// 16,384 items compares shorter keys, so that a set of a million items that share a large
/// value (each key would be 1024 bytes of it) does not hold a gigabyte of keys.
const SORT_KEYS_BUDGET: usize = 16 << 20;
/// The shortest key, whatever the set's size (ints, floats and short texts fit in it whole).
const SORT_KEY_MIN_BYTES: usize = 64;

/// The bytes of each item's sort key in a set of `items` items.
fn sort_key_bytes(items: usize) -> usize {
    (SORT_KEYS_BUDGET / items.max(1)).clamp(SORT_KEY_MIN_BYTES, SORT_KEY_BYTES)
}

/// The tie-break of a set item whose cut sort key tied with another's: `Some((length, FNV-1a
/// 64 hash))` of the content of a text (its `surrogatepass` UTF-8) or bytes value, `None` for
/// anything else (a container: the tie keeps arena order). FNV-1a (Fowler, Noll, Vo) is fixed,
/// so the order does not change between runs or builds; it is no defence against chosen
/// collisions, which only make two items keep arena order. Cached by node.
fn text_fingerprint(
    arena: &Arena<'_>,
    cache: &RefCell<HashMap<NodeId, (usize, u64)>>,
    id: NodeId,
) -> Option<(usize, u64)> {
    let bytes = match arena.get(id)? {
        Value::Str(s) => PyBytes::raw(s.as_bytes()),
        Value::Bytes(b) => b,
        _ => return None,
    };
    if let Some(&f) = cache.try_borrow().ok()?.get(&id) {
        return Some(f);
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    bytes.for_each_chunk(|piece| {
        for &b in piece {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    });
    let f = (bytes.len(), h);
    if let Ok(mut c) = cache.try_borrow_mut() {
        c.insert(id, f);
    }
    Some(f)
}

/// The first `room` bytes of `s`, or a few more to end at a char boundary (all of `s` if it
/// is shorter): what a sort key needs of a text, since its JSON is at least as long.
fn text_prefix(s: &str, room: usize) -> &str {
    if room >= s.len() {
        return s;
    }
    let end = (room..=s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    s.get(..end).unwrap_or(s)
}

/// The order in which typed JSON writes the items of each set and frozenset reachable from
/// some roots (sorted by the compact JSON text of each item, see the module docs), for the
/// tests of that order.
#[cfg(test)]
pub(crate) struct SetOrders {
    by_set: HashMap<NodeId, u32>,
    orders: Vec<Vec<NodeId>>,
}

#[cfg(test)]
impl SetOrders {
    /// The orders of the sets that `roots` reach in `arena`.
    pub(crate) fn of(arena: &Arena<'_>, roots: &[NodeId]) -> SetOrders {
        SetOrders::until(arena, roots, None).unwrap_or(SetOrders {
            by_set: HashMap::new(),
            orders: Vec::new(),
        })
    }

    /// The orders of the sets that `roots` reach in `arena`, or `None` once
    /// `deadline` has passed.
    pub(crate) fn until(
        arena: &Arena<'_>,
        roots: &[NodeId],
        deadline: Option<Instant>,
    ) -> Option<SetOrders> {
        let w = Writer::new(arena, roots, deadline);
        (!w.timed_out).then_some(SetOrders {
            by_set: w.set_orders,
            orders: w.orders,
        })
    }

    /// The items of set `id` in the order typed JSON writes them, if `id` is a reachable set.
    pub(crate) fn items(&self, id: NodeId) -> Option<&[NodeId]> {
        let &i = self.by_set.get(&id)?;
        self.orders.get(i as usize).map(Vec::as_slice)
    }
}

/// The sets and frozensets that `roots` reach, each after every set reachable from it (a
/// depth-first walk from the roots in order, children in document order; on a cycle, a set
/// met again while it is still being walked is not waited for). Iterative: one frame per
/// level, the children of all open frames in one stack.
fn sets_in_post_order(arena: &Arena<'_>, roots: &[NodeId]) -> Vec<NodeId> {
    let mut seen = vec![false; arena.len()];
    let mut kids: Vec<NodeId> = Vec::new();
    // (node, next child's index in `kids`, end of its children in `kids`)
    let mut frames: Vec<(NodeId, usize, usize)> = Vec::new();
    let mut post = Vec::new();
    let mut open =
        |id: NodeId, kids: &mut Vec<NodeId>, frames: &mut Vec<(NodeId, usize, usize)>| {
            match seen.get_mut(id.index()) {
                Some(s) if !*s => *s = true,
                _ => return,
            }
            let start = kids.len();
            if let Some(v) = arena.get(id) {
                v.for_each_child(|c| kids.push(c));
            }
            frames.push((id, start, kids.len()));
        };
    for &r in roots {
        open(r, &mut kids, &mut frames);
        while let Some(top) = frames.last_mut() {
            let (id, next, end) = *top;
            if next < end {
                top.1 += 1;
                if let Some(&c) = kids.get(next) {
                    open(c, &mut kids, &mut frames);
                }
                continue;
            }
            frames.pop();
            // The children of the frame below end where this frame's began.
            let start = frames.last().map_or(0, |f| f.2);
            kids.truncate(start);
            if matches!(arena.get(id), Some(Value::Set(_) | Value::FrozenSet(_))) {
                post.push(id);
            }
        }
    }
    post
}

struct Writer<'d, 'a> {
    /// The arena written from.
    arena: &'d Arena<'a>,
    out: String,
    /// How many times each node is referenced within the part of the graph reachable from the
    /// roots being written (roots count once).
    refs: Vec<u8>,
    /// Ids given to nodes written so far (only nodes referenced twice or more).
    ids: HashMap<NodeId, u64>,
    next_id: u64,
    /// The sorted item order of each reachable set and frozenset: an index into `orders`
    /// (looked up once per set, not once per item).
    set_orders: HashMap<NodeId, u32>,
    orders: Vec<Vec<NodeId>>,
    /// Writing a set item's sort key: every mutable value gets an id (so any cycle ends in a
    /// ref) and writing stops `key_bytes` past `key_start` (a texts or bytes value is written only
    /// as far as the key needs it).
    sort_key: bool,
    key_start: usize,
    key_bytes: usize,
    /// The (length, FNV-1a hash) of the texts and bytes values whose cut sort keys tied, by
    /// node ([`text_fingerprint`]), kept for the whole document.
    fingerprints: RefCell<HashMap<NodeId, (usize, u64)>>,
    /// The first digits of each big int written into a sort key (at most [`SORT_KEY_BYTES`]
    /// and one more), by node, kept for the whole document: a key needs no more, and the decimal
    /// conversion is quadratic in the int's size (one 4096-byte int in 200,000 set items was
    /// converted 200,000 times: 41 s; A46).
    decimals: HashMap<NodeId, String>,
    /// Output length (of `out`) past which [`Writer::go_on`] looks again: the caller's
    /// `max_bytes`, after which writing stops (`overflowed` is then set), or, with a `sink`,
    /// [`SPILL_BYTES`], after which `out` is passed to the sink and emptied.
    check_at: usize,
    /// Where [`write_typed_json`] passes the text on (without a writer, it stays in `out`).
    sink: Sink<'d>,
    /// Writing stopped at `max_bytes` (or at the deadline).
    overflowed: bool,
    /// When to give up, and whether it has (ordering sets or writing); the tasks run so far
    /// (a big int counts as [`BIG_INT_WORK`]), by which the clock is looked at.
    clock: Clock,
    timed_out: bool,
    work: u64,
}

impl<'d, 'a> Writer<'d, 'a> {
    fn new(arena: &'d Arena<'a>, roots: &[NodeId], deadline: Option<Instant>) -> Writer<'d, 'a> {
        let (refs, any_set) = reachable_refs(arena, roots);
        let mut w = Writer {
            arena,
            out: String::new(),
            refs,
            ids: HashMap::new(),
            next_id: 0,
            set_orders: HashMap::new(),
            orders: Vec::new(),
            sort_key: false,
            key_start: 0,
            key_bytes: SORT_KEY_BYTES,
            fingerprints: RefCell::default(),
            decimals: HashMap::new(),
            check_at: usize::MAX,
            sink: Sink::default(),
            overflowed: false,
            clock: Clock::new(deadline),
            timed_out: false,
            work: 0,
        };
        if any_set {
            // A set's sort keys hold the orders of the sets inside its items, so those are
            // computed first: post-order. (Arena order is not enough: EMPTY_SET and ADDITEMS
            // make a set before its items, and a record's state comes after it.)
            let sets = sets_in_post_order(arena, roots);
            w.sort_sets(&sets);
        }
        w
    }

    /// Orders the items of each set by the compact JSON text of the item written on its own
    /// (its first [`sort_key_bytes`] bytes: [`SORT_KEY_BYTES`] unless the set is large; all of
    /// it when the item is one scalar, such as a long text; ties keep arena order). One set's
    /// keys are written into one buffer, at most [`SORT_KEYS_BUDGET`] bytes for a set of more
    /// than 16,384 items (but for items that are one scalar, whose keys are in the input).
    fn sort_sets(&mut self, sets: &[NodeId]) {
        for &set in sets {
            let Some(Value::Set(s) | Value::FrozenSet(s)) = self.arena.get(set) else {
                continue;
            };
            let key_bytes = sort_key_bytes(s.len());
            let mut keys = String::new();
            let mut keyed: Vec<(usize, usize, NodeId)> = Vec::new();
            if keyed.try_reserve_exact(s.len()).is_err() {
                continue;
            }
            for (n, &item) in s.iter().enumerate() {
                if n % 256 == 0 && self.clock.passed() {
                    self.timed_out = true;
                    return;
                }
                let start = keys.len();
                let mut sub = Writer {
                    arena: self.arena,
                    out: std::mem::take(&mut keys),
                    refs: Vec::new(),
                    ids: HashMap::new(),
                    next_id: 0,
                    set_orders: std::mem::take(&mut self.set_orders),
                    orders: std::mem::take(&mut self.orders),
                    sort_key: true,
                    key_start: start,
                    key_bytes,
                    fingerprints: RefCell::default(),
                    decimals: std::mem::take(&mut self.decimals),
                    check_at: usize::MAX,
                    sink: Sink::default(),
                    overflowed: false,
                    clock: Clock::default(),
                    timed_out: false,
                    work: 0,
                };
                sub.write(item);
                self.set_orders = sub.set_orders;
                self.orders = sub.orders;
                self.decimals = sub.decimals;
                keys = sub.out;
                // An item that is one text or bytes value is written a little past the key
                // (to a char boundary): cut it as the writer cuts the others.
                let limit = start + key_bytes;
                if keys.len() > limit {
                    let cut = (start..=limit)
                        .rev()
                        .find(|&i| keys.is_char_boundary(i))
                        .unwrap_or(start);
                    keys.truncate(cut);
                }
                keyed.push((start, keys.len(), item));
            }
            let key = |&(a, b, _): &(usize, usize, NodeId)| keys.get(a..b).unwrap_or_default();
            // Keys that tie may be cut: two texts (or bytes values) that agree on their first
            // `key_bytes` of JSON are ordered by their length, then by a fixed hash of their
            // content (canonical: the same values give the same order however they were
            // built; each text is hashed at most once per document). Other ties keep arena
            // order.
            let arena = self.arena;
            let fingerprints = &self.fingerprints;
            keyed.sort_by(|x, y| {
                key(x)
                    .cmp(key(y))
                    .then_with(|| {
                        if key(x).len() < key_bytes.saturating_sub(8) {
                            // Not cut (a cut key is within a few bytes of the limit).
                            return std::cmp::Ordering::Equal;
                        }
                        text_fingerprint(arena, fingerprints, x.2).cmp(&text_fingerprint(
                            arena,
                            fingerprints,
                            y.2,
                        ))
                    })
                    .then(x.2.cmp(&y.2))
            });
            let Ok(i) = u32::try_from(self.orders.len()) else {
                continue;
            };
            self.orders
                .push(keyed.iter().map(|&(_, _, id)| id).collect());
            self.set_orders.insert(set, i);
        }
    }

    /// The bytes of a sort key still to write, or `usize::MAX` outside a sort key.
    fn key_room(&self) -> usize {
        if self.sort_key {
            (self.key_start + self.key_bytes).saturating_sub(self.out.len())
        } else {
            usize::MAX
        }
    }

    /// Counts one more task (or item written without one) and tells whether writing goes on:
    /// it stops past `max_bytes` (`check_at`, without a sink), at a sink's error or past the
    /// deadline, and `overflowed` is then set.
    #[inline]
    fn go_on(&mut self) -> bool {
        if self.out.len() > self.check_at && !self.sink.pass(&mut self.out) {
            self.overflowed = true;
            return false;
        }
        self.work += 1;
        if self.clock.passed_after(self.work) {
            self.timed_out = true;
            self.overflowed = true;
            return false;
        }
        true
    }

    fn write(&mut self, root: NodeId) {
        let mut tasks = vec![Task::Node(root)];
        while let Some(task) = tasks.pop() {
            if self.overflowed || !self.go_on() {
                return;
            }
            if self.sort_key && self.out.len() >= self.key_start + self.key_bytes {
                // Cut at a char boundary at or below the limit (text is UTF-8).
                let end = self.key_start + self.key_bytes;
                let cut = (self.key_start..=end)
                    .rev()
                    .find(|&i| self.out.is_char_boundary(i))
                    .unwrap_or(self.key_start);
                self.out.truncate(cut);
                return;
            }
            match task {
                Task::Raw(s) => self.out.push_str(s),
                Task::Node(id) => self.node(id, &mut tasks),
                Task::Seq { id, seq, next } => self.seq_step(id, seq, next, &mut tasks),
            }
        }
    }

    /// Writes the separator before item `next` of the sequence and queues that item, then the
    /// rest of the sequence; nothing when the sequence is done.
    fn seq_step(&mut self, id: NodeId, seq: Seq, mut next: usize, tasks: &mut Vec<Task>) {
        let Some(v) = self.arena.get(id) else {
            return;
        };
        if let (Seq::Items, false) = (seq, self.sort_key) {
            if let Value::List(items)
            | Value::Tuple(items)
            | Value::Set(items)
            | Value::FrozenSet(items) = v
            {
                next = self.scalar_items(items, next);
                if self.overflowed {
                    return;
                }
            }
        }
        let item = match (seq, v) {
            (Seq::Items, Value::List(items) | Value::Tuple(items)) => {
                items.get(next).map(|&i| (i, None))
            }
            (Seq::Items, Value::Set(s) | Value::FrozenSet(s)) => s.get(next).map(|&i| (i, None)),
            (Seq::Sorted(order), Value::Set(_) | Value::FrozenSet(_)) => self
                .orders
                .get(order as usize)
                .and_then(|o| o.get(next))
                .map(|&i| (i, None)),
            (Seq::Pairs, Value::Dict(d)) => d.get(next).map(|&(k, v)| (k, Some(v))),
            (Seq::ObjList, Value::Object(o)) => o.listitems.get(next).map(|&i| (i, None)),
            (Seq::ObjPairs, Value::Object(o)) => o.dictitems.get(next).map(|&(k, v)| (k, Some(v))),
            _ => None,
        };
        let Some((first, second)) = item else {
            return;
        };
        tasks.push(Task::Seq {
            id,
            seq,
            next: next + 1,
        });
        if next > 0 {
            self.out.push(',');
        }
        match second {
            None => tasks.push(Task::Node(first)),
            Some(value) => {
                self.out.push('[');
                tasks.push(Task::Raw("]"));
                tasks.push(Task::Node(value));
                tasks.push(Task::Raw(","));
                tasks.push(Task::Node(first));
            }
        }
    }

    /// Writes the items of a list, tuple or unordered set from `next` on for as long as they
    /// are values that refer to no other node (not big ints) and cannot have an id (shared,
    /// or reached once), each as [`Writer::node`] would, without a task of its own (a list of
    /// five million ints was two tasks an item); returns the index of the first item not
    /// written. Counts each item as a task and stops, as [`Writer::write`] does, past
    /// `max_bytes` or the deadline ([`Writer::go_on`]). Not in a sort key, whose cut
    /// [`Writer::write`] checks between tasks.
    fn scalar_items(&mut self, items: &[NodeId], mut next: usize) -> usize {
        while let Some(&item) = items.get(next) {
            if self.refs.get(item.index()).is_some_and(|&r| r >= 2) {
                break;
            }
            let Some(v) = self.arena.get(item) else {
                break;
            };
            if v.is_container() || matches!(v, Value::BigInt(_) | Value::Global(_)) {
                break;
            }
            if !self.go_on() {
                break;
            }
            if next > 0 {
                self.out.push(',');
            }
            match v {
                // The commonest items in one piece each (the same text as below).
                Value::Int(i) => {
                    self.out.push_str("{\"type\":\"int\",\"value\":\"");
                    self.out.push_str(itoa::Buffer::new().format(i));
                    self.out.push_str("\"}");
                }
                Value::None => self.out.push_str("{\"type\":\"none\"}"),
                _ => {
                    write_type(&mut self.out, v);
                    write_scalar_fields(&mut self.out, v, usize::MAX);
                }
            }
            next += 1;
        }
        next
    }

    fn node(&mut self, id: NodeId, tasks: &mut Vec<Task>) {
        // Only a node referenced twice or more can have an id (a sort key gives one to every
        // mutable value): most nodes skip the lookup.
        let may_have_id = self.sort_key || self.refs.get(id.index()).is_some_and(|&r| r >= 2);
        if let Some(&n) = may_have_id.then(|| self.ids.get(&id)).flatten() {
            self.out.push_str("{\"type\":\"ref\",\"id\":");
            self.out.push_str(itoa::Buffer::new().format(n));
            self.out.push('}');
            return;
        }
        let Some(v) = self.arena.get(id) else {
            self.out.push_str("{\"type\":\"none\"}");
            return;
        };
        write_type(&mut self.out, v);
        let shared = if self.sort_key {
            // Only a mutable value can close a cycle (a tuple or frozenset is made after its
            // items), so only those get ids in a key: a tuple met twice in an item is written
            // twice, and the key is the same whether the pickle shared it or not. The key's
            // cut bounds what a DAG of tuples unfolds to.
            v.is_mutable()
        } else {
            self.refs.get(id.index()).is_some_and(|&r| r >= 2)
        };
        if shared {
            let n = self.next_id;
            self.next_id += 1;
            self.ids.insert(id, n);
            self.out.push_str(",\"id\":");
            self.out.push_str(itoa::Buffer::new().format(n));
        }
        // A sort key needs only the first bytes of a text or a bytes value: each byte is at
        // least one byte of JSON (two of hex), and the key is cut where it ends
        // ([`Writer::sort_sets`] cuts an item that is itself a text, which has no next step).
        let room = self.key_room();
        if write_scalar_fields(&mut self.out, v, room) {
            return;
        }
        let out = &mut self.out;
        match v {
            Value::BigInt(b) if self.sort_key => {
                // Digits (and a sign) are one byte each: `room` and one more make the key
                // what the whole text would, once cut (no key is longer than SORT_KEY_BYTES).
                let cap = SORT_KEY_BYTES + 1;
                let digits = self.decimals.entry(id).or_insert_with(|| {
                    let mut d = b.to_string();
                    d.truncate(cap);
                    d
                });
                out.push_str(",\"value\":\"");
                out.push_str(digits.get(..room.saturating_add(1)).unwrap_or(digits));
                out.push_str("\"}");
            }
            Value::BigInt(b) => {
                // Quadratic in its size to convert: counted as many tasks.
                self.work += BIG_INT_WORK;
                let _ = write!(out, ",\"value\":\"{b}\"}}");
            }
            Value::Global(g) => {
                out.push_str(",\"module\":");
                write_json_string(out, &g.module);
                out.push_str(",\"name\":");
                write_json_string(out, &g.name);
                out.push('}');
            }
            Value::List(_) | Value::Tuple(_) => {
                out.push_str(",\"items\":[");
                tasks.push(Task::Raw("]}"));
                tasks.push(Task::Seq {
                    id,
                    seq: Seq::Items,
                    next: 0,
                });
            }
            Value::Set(_) | Value::FrozenSet(_) => {
                out.push_str(",\"items\":[");
                tasks.push(Task::Raw("]}"));
                let seq = self
                    .set_orders
                    .get(&id)
                    .map_or(Seq::Items, |&i| Seq::Sorted(i));
                tasks.push(Task::Seq { id, seq, next: 0 });
            }
            Value::Dict(_) => {
                out.push_str(",\"items\":[");
                tasks.push(Task::Raw("]}"));
                tasks.push(Task::Seq {
                    id,
                    seq: Seq::Pairs,
                    next: 0,
                });
            }
            Value::Object(o) => {
                let _ = write!(out, ",\"kind\":\"{}\",\"callable\":", o.kind.name());
                // Pushed in reverse order of writing.
                tasks.push(Task::Raw("}"));
                if !o.dictitems.is_empty() {
                    tasks.push(Task::Raw("]"));
                    tasks.push(Task::Seq {
                        id,
                        seq: Seq::ObjPairs,
                        next: 0,
                    });
                    tasks.push(Task::Raw(",\"dictitems\":["));
                }
                if !o.listitems.is_empty() {
                    tasks.push(Task::Raw("]"));
                    tasks.push(Task::Seq {
                        id,
                        seq: Seq::ObjList,
                        next: 0,
                    });
                    tasks.push(Task::Raw(",\"listitems\":["));
                }
                if let Some(s) = o.state {
                    tasks.push(Task::Node(s));
                    tasks.push(Task::Raw(",\"state\":"));
                }
                if let Some(k) = o.kwargs {
                    tasks.push(Task::Node(k));
                    tasks.push(Task::Raw(",\"kwargs\":"));
                }
                tasks.push(Task::Node(o.args));
                tasks.push(Task::Raw(",\"args\":"));
                tasks.push(Task::Node(o.callable));
            }
            // Written by `write_scalar_fields` above.
            Value::None
            | Value::Bool(_)
            | Value::Int(_)
            | Value::Float(_)
            | Value::Complex(..)
            | Value::Str(_)
            | Value::Bytes(_)
            | Value::ByteArray(_) => {}
        }
    }
}

/// Writes `{"type":"NAME"` for `v` (the fields and the closing brace follow): the Python type
/// name ([`Value::type_name`]), but `none` for None, as docs/typed-json.md spells it.
#[inline]
fn write_type(out: &mut String, v: Value<'_>) {
    out.push_str("{\"type\":\"");
    out.push_str(match v {
        Value::None => "none",
        v => v.type_name(),
    });
    out.push('"');
}

/// Writes the fields and the closing brace of a value that refers to no other node and is
/// not a big int (None, bool, int, float, complex, str, bytes, bytearray), after its
/// [`write_type`] (and id), and returns true; writes nothing and returns false for any other
/// value. `room` is [`Writer::key_room`]: a text or bytes value is written only as far as a
/// sort key needs it (each byte is at least one byte of JSON, two of hex).
#[inline]
fn write_scalar_fields(out: &mut String, v: Value<'_>, room: usize) -> bool {
    let prefix_len = |len: usize| -> usize { len.min(room.saturating_add(1) / 2 + 1) };
    let bytes_prefix = |b: &[u8]| -> usize { prefix_len(b.len()) };
    match v {
        Value::None => out.push('}'),
        Value::Bool(b) => {
            let _ = write!(out, ",\"value\":{b}}}");
        }
        Value::Int(i) => {
            out.push_str(",\"value\":\"");
            out.push_str(itoa::Buffer::new().format(i));
            out.push_str("\"}");
        }
        Value::Float(x) => {
            write_float_fields(out, x);
            out.push('}');
        }
        Value::Complex(re, im) => {
            out.push_str(",\"real\":{\"type\":\"float\"");
            write_float_fields(out, re);
            out.push_str("},\"imag\":{\"type\":\"float\"");
            write_float_fields(out, im);
            out.push_str("}}");
        }
        Value::Str(s) => match s.as_str() {
            Some(t) => {
                out.push_str(",\"value\":");
                write_json_string(out, text_prefix(t, room));
                out.push('}');
            }
            None => {
                let b = s.as_bytes();
                out.push_str(",\"surrogatepass_hex\":\"");
                write_hex(out, b.get(..bytes_prefix(b)).unwrap_or(b));
                out.push_str("\"}");
            }
        },
        Value::Bytes(b) => {
            out.push_str(",\"hex\":\"");
            b.for_each_chunk_of(prefix_len(b.len()), |piece| write_hex(out, piece));
            out.push_str("\"}");
        }
        Value::ByteArray(b) => {
            out.push_str(",\"hex\":\"");
            write_hex(out, b.get(..bytes_prefix(b)).unwrap_or(b));
            out.push_str("\"}");
        }
        _ => return false,
    }
    true
}

fn write_float_fields(out: &mut String, x: f64) {
    let _ = write!(
        out,
        ",\"bits\":\"{:016x}\",\"repr\":\"{}\"",
        x.to_bits(),
        float_repr(x)
    );
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The two hex digits of every byte value.
#[allow(clippy::indexing_slicing)]
const HEX_PAIRS: [[u8; 2]; 256] = {
    let mut table = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        table[i] = [HEX[i >> 4], HEX[i & 15]];
        i += 1;
    }
    table
};

/// Appends the lowercase hex of `bytes`: 4 KiB at a time through a stack buffer, two digits per
/// byte from a table (a `String::push` per digit ran at ~22 instructions per input byte).
pub(crate) fn write_hex(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len() * 2);
    let mut buf = [0u8; 8192];
    for chunk in bytes.chunks(4096) {
        for (pair, &b) in buf.chunks_exact_mut(2).zip(chunk) {
            pair.copy_from_slice(&HEX_PAIRS.get(usize::from(b)).copied().unwrap_or_default());
        }
        // ASCII digits only: the check cannot fail.
        if let Ok(hex) = std::str::from_utf8(buf.get(..chunk.len() * 2).unwrap_or_default()) {
            out.push_str(hex);
        }
    }
}

/// Appends `s` as a JSON string literal (RFC 8259): `"` and `\` escaped, control characters as
/// `\n`, `\r`, `\t` or `\u00XX`; everything else as UTF-8.
pub(crate) fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let esc: Option<&str> = match b {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            b'\n' => Some("\\n"),
            b'\r' => Some("\\r"),
            b'\t' => Some("\\t"),
            0..=0x1f => None,
            _ => continue,
        };
        out.push_str(s.get(start..i).unwrap_or_default());
        match esc {
            Some(e) => out.push_str(e),
            None => {
                let _ = write!(out, "\\u{:04x}", b);
            }
        }
        start = i + 1;
    }
    out.push_str(s.get(start..).unwrap_or_default());
    out.push('"');
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A list's runs of scalar items are written without a task each (`scalar_items`): the
    /// text is the one the task-per-item writer gave (this string is its output, at
    /// b6611bd), with a shared int's id and ref, a big int, a nested list and a tuple
    /// breaking the runs; the run stops at `max_bytes` and at the deadline as the tasks do.
    #[test]
    fn scalar_runs_write_what_the_tasks_wrote() {
        // [1000, x, x, None, 2**70, [1], 'a', b'b', 1.5, True, (2, 3)], x = 2**40 memoized (an
        // arena node: ints of 31 bits are held in their ids, and never written as refs).
        let mut p =
            b"\x80\x04]\x94(M\xe8\x03\x8a\x06\x00\x00\x00\x00\x00\x01\x94h\x01N\x8a\x09".to_vec();
        p.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0x40]);
        p.extend_from_slice(
            b"]K\x01a\x8c\x01aC\x01bG?\xf8\x00\x00\x00\x00\x00\x00\x88K\x02K\x03\x86e.",
        );
        let doc = crate::decode(&p, &crate::Policy::data()).unwrap();
        let want = concat!(
            "{\"format\":\"picklewarden-typed-json/1\",\"value\":{\"type\":\"list\",\"items\":[",
            "{\"type\":\"int\",\"value\":\"1000\"},{\"type\":\"int\",\"id\":0,\"value\":\"1099511627776\"},",
            "{\"type\":\"ref\",\"id\":0},{\"type\":\"none\"},",
            "{\"type\":\"int\",\"value\":\"1180591620717411303424\"},",
            "{\"type\":\"list\",\"items\":[{\"type\":\"int\",\"value\":\"1\"}]},",
            "{\"type\":\"str\",\"value\":\"a\"},{\"type\":\"bytes\",\"hex\":\"62\"},",
            "{\"type\":\"float\",\"bits\":\"3ff8000000000000\",\"repr\":\"1.5\"},",
            "{\"type\":\"bool\",\"value\":true},",
            "{\"type\":\"tuple\",\"items\":[{\"type\":\"int\",\"value\":\"2\"},{\"type\":\"int\",\"value\":\"3\"}]}]}}"
        );
        assert_eq!(to_typed_json(&doc), want);
        assert_eq!(
            to_typed_json_limited(&doc, want.len()).as_deref(),
            Some(want)
        );
        // Cut inside the first run (after the 1000) and inside the last (the tuple's items).
        assert_eq!(to_typed_json_limited(&doc, 100), None);
        assert_eq!(to_typed_json_limited(&doc, want.len() - 40), None);

        // list(range(1000, 201000)) at protocol 4: one run of 200,000 items.
        let mut p = b"\x80\x04](".to_vec();
        for i in 1000..201_000u32 {
            p.push(b'J');
            p.extend_from_slice(&i.to_le_bytes());
        }
        p.extend_from_slice(b"e.");
        let ints = crate::decode(&p, &crate::Policy::data()).unwrap();
        let text = to_typed_json(&ints);
        assert!(text.ends_with("{\"type\":\"int\",\"value\":\"200999\"}]}}"));
        assert_eq!(text.matches("\"type\":\"int\"").count(), 200_000);
        let past = Instant::now();
        assert_eq!(to_typed_json_until(&ints, usize::MAX, past), None);
    }

    /// A sink that records each piece it is given, and fails at the piece numbered `fail_at`
    /// (counting from 0), recording any call made after that (also used by src/repr.rs).
    pub(crate) struct Pieces {
        pub(crate) text: Vec<u8>,
        pub(crate) sizes: Vec<usize>,
        pub(crate) fail_at: usize,
        pub(crate) calls_after_failing: usize,
    }

    impl Default for Pieces {
        fn default() -> Pieces {
            Pieces {
                text: Vec::new(),
                sizes: Vec::new(),
                fail_at: usize::MAX,
                calls_after_failing: 0,
            }
        }
    }

    impl io::Write for Pieces {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.sizes.len() > self.fail_at {
                self.calls_after_failing += 1;
            }
            if self.sizes.len() >= self.fail_at {
                self.sizes.push(0);
                return Err(io::Error::other("sink full"));
            }
            self.sizes.push(buf.len());
            self.text.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// `write_typed_json` passes on the bytes `to_typed_json` makes, in pieces of about
    /// `SPILL_BYTES` (one piece longer by a 3 MiB text written whole), for one pickle and for a
    /// stream, with runs of scalars, sorted sets and a shared value; a failing sink stops it at
    /// its first error.
    #[test]
    fn written_as_it_is_made_the_text_is_the_same() {
        // [[0, ..., 199999], [{i} for i in range(20000)], t, t, 'x' * 3 MiB], t = [1000] shared,
        // at protocol 4.
        let mut p = b"\x80\x04](](".to_vec();
        for i in 0..200_000u32 {
            p.push(b'J');
            p.extend_from_slice(&i.to_le_bytes());
        }
        p.extend_from_slice(b"e](");
        for i in 0..20_000u32 {
            p.extend_from_slice(b"\x8f(J");
            p.extend_from_slice(&i.to_le_bytes());
            p.push(0x90);
        }
        p.extend_from_slice(b"e]M\xe8\x03a\x94h\x00\x8d");
        let long = 3 << 20;
        p.extend_from_slice(&(long as u64).to_le_bytes());
        p.extend(std::iter::repeat_n(b'x', long));
        p.extend_from_slice(b"e.");
        let doc = crate::decode(&p, &crate::Policy::data()).unwrap();
        let want = to_typed_json(&doc);
        assert!(want.len() > 10 << 20, "{}", want.len());
        let mut sink = Pieces::default();
        write_typed_json(&doc, &mut sink).unwrap();
        assert!(sink.text == want.as_bytes());
        assert!(sink.sizes.len() >= 8, "{:?}", sink.sizes);
        // A `dyn Write` is taken as it is.
        let mut text = Vec::new();
        let out: &mut dyn io::Write = &mut text;
        write_typed_json(&doc, out).unwrap();
        crate::repr::write_repr(&doc, out).unwrap();
        assert!(text == [want.as_bytes(), crate::repr::to_repr(&doc).as_bytes()].concat());
        let over: Vec<usize> = sink
            .sizes
            .iter()
            .copied()
            .filter(|&n| n > SPILL_BYTES + 256)
            .collect();
        assert_eq!(over.len(), 1, "{:?}", sink.sizes);
        assert!(over.iter().all(|&n| n <= SPILL_BYTES + long + 256));

        // The same pickle twice, as a stream: `values`.
        let mut twice = p.clone();
        twice.extend_from_slice(&p);
        let stream = crate::Decoder::new(&twice, &crate::Policy::data())
            .decode_stream()
            .unwrap();
        let want_stream = to_typed_json(&stream);
        assert!(want_stream.contains("\"values\":["));
        let mut sink = Pieces::default();
        write_typed_json(&stream, &mut sink).unwrap();
        assert!(sink.text == want_stream.as_bytes());

        // A sink that fails at its third piece: that error, and nothing asked of it after.
        let mut sink = Pieces {
            fail_at: 2,
            ..Pieces::default()
        };
        let e = write_typed_json(&doc, &mut sink).unwrap_err();
        assert_eq!(e.to_string(), "sink full");
        assert_eq!(sink.sizes.len(), 3);
        assert_eq!(sink.calls_after_failing, 0);
        assert!(want.as_bytes().starts_with(&sink.text));
    }

    /// Cut at every few bytes (and at every value, `piece` 0), typed JSON and repr pass on
    /// what `to_typed_json` and `to_repr` make, on every file of the good corpus that the
    /// `data` policy accepts (none reaches repr's repeat cut: `written_as_it_is_made_the_repr_
    /// is_the_same` in src/repr.rs does).
    #[test]
    fn pieces_of_any_size_give_the_same_text_on_the_corpus() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/good");
        let mut files = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "pkl") {
                continue;
            }
            let input = std::fs::read(&path).unwrap();
            let Ok(doc) = crate::decode(&input, &crate::Policy::data()) else {
                continue;
            };
            files += 1;
            let json = to_typed_json(&doc);
            let repr = crate::repr::to_repr(&doc);
            for piece in [0, 1, 5, 64] {
                let mut out = Vec::new();
                write_in_pieces(&doc, &mut out, piece).unwrap();
                assert!(
                    out == json.as_bytes(),
                    "{} json piece {piece}",
                    path.display()
                );
                let mut out = Vec::new();
                crate::repr::write_in_pieces(&doc, &mut out, piece).unwrap();
                assert!(
                    out == repr.as_bytes(),
                    "{} repr piece {piece}",
                    path.display()
                );
            }
        }
        assert!(files > 1000, "{files} files");
    }

    /// The up-front reservation counts popped values too; a short text does not keep it.
    #[test]
    fn a_short_text_does_not_keep_the_reservation() {
        // NONE POP a million times, then NONE: a million values created, one written.
        let mut input = b"\x80\x04".to_vec();
        for _ in 0..1_000_000 {
            input.extend_from_slice(b"N0");
        }
        input.extend_from_slice(b"N.");
        let doc = crate::decode(&input, &crate::Policy::data()).unwrap();
        assert!(doc.value_count() > 1_000_000);
        let text = to_typed_json(&doc);
        assert_eq!(
            text,
            "{\"format\":\"picklewarden-typed-json/1\",\"value\":{\"type\":\"none\"}}"
        );
        assert!(text.capacity() < 8192, "capacity {}", text.capacity());
    }

    /// The writers give up once their deadline has passed: typed JSON while ordering sets and
    /// while writing, repr while printing (A48: the service held a decode slot for 9 s of set
    /// ordering after answering 503 at its 1 s deadline).
    #[test]
    fn the_writers_stop_at_their_deadline() {
        // [{0}, {1}, ..., {99999}] at protocol 4.
        let mut p = b"\x80\x04](".to_vec();
        for i in 0..100_000u32 {
            p.extend_from_slice(b"\x8f(J");
            p.extend_from_slice(&i.to_le_bytes());
            p.push(0x90);
        }
        p.extend_from_slice(b"e.");
        let sets = crate::decode(&p, &crate::Policy::data()).unwrap();
        let past = Instant::now();
        let later = past + std::time::Duration::from_secs(600);
        assert_eq!(to_typed_json_until(&sets, usize::MAX, past), None);
        assert!(SetOrders::until(&sets.arena, &sets.roots, Some(past)).is_none());
        assert_eq!(
            to_typed_json_until(&sets, usize::MAX, later).as_deref(),
            Some(to_typed_json(&sets).as_str())
        );
        let r = crate::repr::to_repr(&sets);
        assert_eq!(crate::repr::to_repr_until(&sets, usize::MAX, past), None);
        assert_eq!(
            crate::repr::to_repr_until(&sets, usize::MAX, later).as_deref(),
            Some(r.as_str())
        );
    }

    /// Every byte value, across the 4 KiB blocks of the writer, against `format!("{:02x}")`.
    #[test]
    fn hex_of_every_byte_across_blocks() {
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 256) as u8).collect();
        let want: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        for len in [0, 1, 255, 4095, 4096, 4097, 5000] {
            let mut out = String::from("x");
            write_hex(&mut out, &bytes[..len]);
            assert_eq!(out, format!("x{}", &want[..2 * len]), "{len}");
        }
    }

    #[test]
    fn limited_output_stops_past_the_bound() {
        // [None] * 1000 (protocol 2, one APPENDS): 1008 bytes of pickle, 15 bytes of JSON per
        // None.
        let mut p = b"\x80\x02](".to_vec();
        p.extend(std::iter::repeat_n(b'N', 1000));
        p.extend_from_slice(b"e.");
        let policy = crate::Policy::strict();
        let doc = crate::Decoder::new(&p, &policy).decode().unwrap();
        let full = to_typed_json(&doc);
        assert_eq!(full.matches("{\"type\":\"none\"}").count(), 1000);
        assert_eq!(
            to_typed_json_limited(&doc, full.len()).as_deref(),
            Some(full.as_str())
        );
        assert_eq!(to_typed_json_limited(&doc, 10_000), None);
        assert_eq!(to_typed_json_limited(&doc, 0), None);
        let repr = crate::repr::to_repr(&doc);
        assert_eq!(repr.matches("None").count(), 1000);
        assert_eq!(
            crate::repr::to_repr_limited(&doc, repr.len()).as_deref(),
            Some(repr.as_str())
        );
        assert_eq!(crate::repr::to_repr_limited(&doc, 3000), None);
    }

    /// Equal sets give the same typed JSON whatever the pickle shared: a tuple met twice in an
    /// item is written twice in its sort key (a ref to it sorted before any tuple, so
    /// `{((1,), (1,)), ((1,), (0,))}` came out in one order when the inner `(1,)` was one
    /// object and in the other when it was two).
    #[test]
    fn set_order_does_not_depend_on_shared_tuples() {
        // pickle.dumps(s, 4) of the two sets, shared: t = (1,); {(t, t), ((1,), (0,))}.
        let shared = b"\x80\x04\x95\x17\x00\x00\x00\x00\x00\x00\x00\x8f\x94(K\x01\x85\x94h\x01\x86\x94K\x01\x85\x94K\x00\x85\x94\x86\x94\x90.";
        let unshared = b"\x80\x04\x95\x19\x00\x00\x00\x00\x00\x00\x00\x8f\x94(K\x01\x85\x94K\x01\x85\x94\x86\x94K\x01\x85\x94K\x00\x85\x94\x86\x94\x90.";
        let json = |p: &[u8]| to_typed_json(&crate::decode(p, &crate::Policy::data()).unwrap());
        let one = "{\"type\":\"tuple\",\"items\":[{\"type\":\"int\",\"value\":\"1\"}]}";
        let zero = "{\"type\":\"tuple\",\"items\":[{\"type\":\"int\",\"value\":\"0\"}]}";
        let first = format!("{{\"type\":\"tuple\",\"items\":[{one},{zero}]}}");
        for p in [&shared[..], &unshared[..]] {
            let text = json(p);
            let items = text.split_once("\"items\":[").unwrap().1;
            assert!(items.starts_with(&first), "{text}");
        }
    }

    #[test]
    /// A set's items are ordered by the first bytes of their texts: 1024 of them for a set of
    /// up to 16,384 items, fewer for a larger set (ties in arena order), all of it for an item
    /// that is one text; texts inside an item are written only as far as the key needs them.
    fn set_order_compares_key_prefixes() {
        // A frozenset of `n` tuples of one text each, added in reverse of their sorted order:
        // 900 'x', then the index (so the keys differ at byte 957), then 200 'y'.
        let order = |n: usize| {
            let mut p = b"\x80\x04(".to_vec();
            for i in (0..n).rev() {
                let t = format!("{}{i:06}{}", "x".repeat(900), "y".repeat(200));
                p.push(b'X');
                p.extend_from_slice(&(t.len() as u32).to_le_bytes());
                p.extend_from_slice(t.as_bytes());
                p.push(0x85);
            }
            p.extend_from_slice(b"\x91.");
            let doc = crate::decode(&p, &crate::Policy::strict()).unwrap();
            let Some(Value::FrozenSet(s)) = doc.root().and_then(|r| doc.get(r)) else {
                panic!("not a frozenset");
            };
            let orders = SetOrders::of(&doc.arena, &doc.roots);
            let sorted = orders.items(doc.root().unwrap()).unwrap().to_vec();
            (s.to_vec(), sorted)
        };
        // 3 items: 1024-byte keys see the index, so the order is the texts' (reversed).
        let (added, sorted) = order(3);
        assert_eq!(sorted, added.iter().rev().copied().collect::<Vec<_>>());
        // 20,000 items: keys of 16 MiB / 20,000 = 838 bytes all tie: arena order.
        assert_eq!(sort_key_bytes(20_000), 838);
        let (added, sorted) = order(20_000);
        assert_eq!(sorted, added);
        assert_eq!(sort_key_bytes(1 << 30), SORT_KEY_MIN_BYTES);
        assert_eq!(sort_key_bytes(1), SORT_KEY_BYTES);
        // Items that are one text and agree on their first 1024 bytes of JSON are ordered by
        // length, then by the FNV-1a hash of their content, whatever order they were added
        // in (a review helper found whole-text keys costing sets x text length when many
        // sets share one long text).
        let texts_order = |texts: &[String]| -> Vec<String> {
            let mut p = b"\x80\x04(".to_vec();
            for t in texts {
                p.push(b'X');
                p.extend_from_slice(&(t.len() as u32).to_le_bytes());
                p.extend_from_slice(t.as_bytes());
            }
            p.extend_from_slice(b"\x91.");
            let doc = crate::decode(&p, &crate::Policy::strict()).unwrap();
            let root = doc.root().unwrap();
            SetOrders::of(&doc.arena, &doc.roots)
                .items(root)
                .unwrap()
                .iter()
                .map(|&id| match doc.get(id) {
                    Some(Value::Str(s)) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        let long = "a".repeat(1011) + "b" + &"c".repeat(5);
        let short = "a".repeat(1012);
        let (x, y) = ("a".repeat(1011) + "x", "a".repeat(1011) + "y");
        for texts in [
            vec![long.clone(), short.clone(), x.clone(), y.clone()],
            vec![y.clone(), x.clone(), short.clone(), long.clone()],
            vec![x.clone(), long.clone(), y.clone(), short.clone()],
        ] {
            let got = texts_order(&texts);
            // The three of 1012 characters first (by hash, in one fixed order), then `long`.
            assert_eq!(got.last(), Some(&long));
            assert_eq!(
                got,
                texts_order(&[short.clone(), x.clone(), y.clone(), long.clone()])
            );
        }
        let fnv = |t: &str| {
            t.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            })
        };
        let mut by_hash = vec![short.clone(), x.clone(), y.clone()];
        by_hash.sort_by_key(|t| fnv(t));
        assert_eq!(&texts_order(&[x, y, short, long])[..3], by_hash.as_slice());
        assert_eq!(text_prefix("ab\u{e9}c", 3), "ab\u{e9}");
        assert_eq!(text_prefix("ab", 3), "ab");
    }

    #[test]
    fn set_sort_keys_are_cut_at_a_char_boundary() {
        // {'\u{e9}' * 2000}: the item's text passes the 1024-byte sort-key cut inside a
        // two-byte character (found by the mitogen_frames fuzzer).
        let text = "\u{e9}".repeat(2000);
        let mut p = b"\x80\x04\x8f(X".to_vec();
        p.extend_from_slice(&(text.len() as u32).to_le_bytes());
        p.extend_from_slice(text.as_bytes());
        p.extend_from_slice(b"\x90.");
        let policy = crate::Policy::strict();
        let doc = crate::decode(&p, &policy).unwrap();
        let json = to_typed_json(&doc);
        assert!(json.contains(&text));
    }

    #[test]
    fn json_strings_escape() {
        let mut s = String::new();
        write_json_string(&mut s, "a\"b\\c\n\u{1}é");
        assert_eq!(s, "\"a\\\"b\\\\c\\n\\u0001é\"");
    }
}
