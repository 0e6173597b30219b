//! Dict and set insertion: keys compared with Python equality (`keys/`), linearly while a
//! container is small and through a hash index after; plain keys (short texts, ints held in
//! their ids) filled without the key machinery; the model of the reader's key work on each key.

use std::hash::RandomState;
use std::mem;

use super::budget::KEYED_BYTES;
use super::keys::reader::{counted, Container, Key};
use super::keys::{
    index_insert, KeyIndex, KeyOps, Over, Unhashable, CACHED_TEXT_BYTES,
    INDEX_BY_CPYTHON_COLLISIONS,
};
use super::machine::{internal, Machine};
use crate::error::{ErrorKind, Result};
use crate::limits::LimitName;
use crate::value::{Arena, Node, NodeId};

/// What stands in the arena slot of a dict or set while items are inserted into it: an
/// unhashable value (an empty list), so that a key holding the container itself (`d[(d,)] =
/// 1`) is refused as unhashable, as CPython refuses it.
pub(super) const DETACHED: Node = Node::List { start: 0, len: 0 };

/// Dicts and sets of up to this many entries are searched linearly with Python equality and
/// get no hash index (no hashing, no table); the index is built when an insertion could take
/// them past it. The charge per entry (`KEYED_BYTES`) is the same either way.
pub(super) const SMALL_KEYED: usize = 16;

/// Keys of one dict or set insertion between two looks at the deadline
/// ([`Machine::keys_deadline`]).
pub(super) const KEYS_CHECK: usize = 4096;

/// The fingerprint of a key of a small insertion that is an int held in its id or a text
/// shorter than [`CACHED_TEXT_BYTES`], `None` for any other key. Such keys are equal exactly
/// when they are the same id or texts of the same bytes (an int is never equal to a text, two
/// ints held in ids are equal only as one id), which is the general path's verdict on them,
/// and none can be unhashable or hold the container. The fingerprint is an int's id, or a
/// text's length, first 8 bytes (the whole of most keys) and start; [`plain_bit`] of it, kept
/// in a `u64` of the keys so far, tells a key met for the first time (most) without comparing
/// it to them ([`plain_find`]).
#[inline(always)]
pub(super) fn plain_key(nodes: &[Node], input: &[u8], k: NodeId) -> Option<(u32, u64, u32)> {
    match nodes.get(k.index()) {
        Some(&Node::Str { start, len }) if (len as usize) < CACHED_TEXT_BYTES => {
            let s = start as usize;
            // Eight bytes from the text's start (the input has them but at its very end), the
            // ones past a text shorter than 8 masked off.
            let word = match input.get(s..s + 8) {
                Some(&[a, b, c, d, e, f, g, h]) => u64::from_le_bytes([a, b, c, d, e, f, g, h]),
                _ => {
                    let mut head = [0u8; 8];
                    for (h, &b) in head.iter_mut().zip(input.get(s..).unwrap_or_default()) {
                        *h = b;
                    }
                    u64::from_le_bytes(head)
                }
            };
            let mask = u64::MAX.checked_shr(64 - 8 * len.min(8)).unwrap_or(0);
            Some((len, word & mask, start))
        }
        None if k.is_held_int() => Some((u32::MAX, u64::from(k.0), 0)),
        _ => None,
    }
}

/// One bit of 64 for a [`plain_key`] fingerprint.
#[inline(always)]
pub(super) fn plain_bit((m, head, _): (u32, u64, u32)) -> u64 {
    1u64 << ((head ^ u64::from(m)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58)
}

/// The position among `kept` of the key whose fingerprint is `key`: equal as ints when the
/// ids are; as texts when length and bytes are (the first 8 in the fingerprint, the rest
/// compared only when those agree).
#[inline(always)]
pub(super) fn plain_find(
    kept: &[(u32, u64, u32)],
    (m, head, at): (u32, u64, u32),
    input: &[u8],
) -> Option<usize> {
    let text = |start: u32, len: u32| {
        let s = start as usize;
        input.get(s..s + len as usize).unwrap_or_default()
    };
    kept.iter()
        .position(|&(n, h, bt)| n == m && h == head && (m <= 8 || text(at, m) == text(bt, n)))
}

impl<'a, 'p> Machine<'a, 'p> {
    pub(super) fn keys(&self) -> KeyOps<'_, 'a, RandomState> {
        // The seed is drawn by `open_keys`, before any insertion hashes.
        let seed = self.hash_cache.try_borrow().map_or(1, |c| c.seed_drawn());
        KeyOps {
            arena: &self.arena,
            state: &self.hasher,
            cache: Some(&self.hash_cache),
            seed,
        }
    }

    /// The hash index of the dict or set `id`, taken out of `indexes` (empty if it has none).
    pub(super) fn take_index(&mut self, id: NodeId) -> KeyIndex {
        if self.indexes.is_empty() {
            return KeyIndex::default();
        }
        self.indexes.remove(&id.0).unwrap_or_default()
    }

    /// Puts back the hash index of `id`, if it has one.
    pub(super) fn keep_index(&mut self, id: NodeId, index: KeyIndex) {
        if !index.is_empty() {
            self.indexes.insert(id.0, index);
        }
    }

    /// Inserts key-value pairs (a flat `[k, v, k, v, ...]` slice) into a detached dict and its
    /// hash index (empty while the dict is small enough for a linear search).
    pub(super) fn dict_insert(
        &mut self,
        container: Container,
        d: &mut Vec<(NodeId, NodeId)>,
        index: &mut KeyIndex,
        flat: &[NodeId],
    ) -> Result<()> {
        self.open_keys();
        let r = self.dict_insert_keys(container, d, index, flat);
        self.close_keys(r)
    }

    /// Gives the key cache the allocation budget left, for what one insertion's hashing and
    /// equality walks keep and hold (src/build/keys/mod.rs `KeyCache::room`).
    pub(super) fn open_keys(&mut self) {
        let room = self.limits.max_alloc_bytes.saturating_sub(self.alloc);
        if let Ok(mut c) = self.hash_cache.try_borrow_mut() {
            c.open(room);
            c.seed(&self.hasher);
        }
    }

    /// Charges what the key cache kept during an insertion, and refuses the insertion (as
    /// `max_alloc_bytes`, whatever `r` says) when its walks needed more than the budget left:
    /// a walk that ran out answered "unequal" without finishing, so nothing it decided stands.
    pub(super) fn close_keys(&mut self, r: Result<()>) -> Result<()> {
        let (kept, over) = match self.hash_cache.try_borrow_mut() {
            Ok(mut c) => c.close(),
            Err(_) => (0, None),
        };
        // And what the model of the reader's key work remembered (src/build/keys/reader.rs).
        let modelled = match self.reader_keys.try_borrow_mut() {
            Ok(mut m) => std::mem::take(&mut m.uncharged),
            Err(_) => 0,
        };
        let kept = kept.saturating_add(modelled);
        match over {
            Some(Over::Bytes(wanted)) => {
                let seen = self.alloc.saturating_add(wanted);
                return Err(self.limit(LimitName::MaxAllocBytes, seen));
            }
            Some(Over::Deadline) => return Err(self.err(ErrorKind::DeadlineExceeded)),
            None => {}
        }
        r?;
        self.charge(kept)
    }

    pub(super) fn dict_insert_keys(
        &mut self,
        container: Container,
        d: &mut Vec<(NodeId, NodeId)>,
        index: &mut KeyIndex,
        flat: &[NodeId],
    ) -> Result<()> {
        let pairs = flat.len() / 2;
        self.check_items(d.len() + pairs)?;
        self.charge(pairs as u64 * KEYED_BYTES)?;
        d.try_reserve(pairs).map_err(|_| {
            self.err(ErrorKind::AllocationFailed {
                bytes: pairs as u64 * KEYED_BYTES,
            })
        })?;
        let ops = self.keys();
        let unhashable = |_| self.err(ErrorKind::UnhashableKey);
        if index.is_empty() && d.len() + pairs <= SMALL_KEYED {
            // Small: linear search with Python equality, no index; a tuple, frozenset or
            // long text is first compared by its kept hash, as CPython compares hashes
            // before `==` (else 15 keys that are 1 MiB texts differing in their last byte,
            // or unequal frozensets of 3,000 items, cost that much per insertion: A46).
            for pair in flat.chunks_exact(2) {
                let &[k, v] = pair else { continue };
                let hk = ops.hashable_costly(k).map_err(unhashable)?;
                let equal = match d.iter_mut().find(|e| ops.eq_hashed(k, hk, e.0)) {
                    Some(slot) => {
                        slot.1 = v;
                        Some(slot.0)
                    }
                    None => {
                        d.push((k, v));
                        None
                    }
                };
                self.model_key(&ops, container, k, equal, hk, None)?;
            }
            return Ok(());
        }
        if index.is_empty() {
            // Leaving the small form: index the items so far (all hashable).
            index.reserve(d.len() + pairs, |e| e.0);
            for (pos, e) in d.iter().enumerate() {
                let (h, _) = self.index_hash(&ops, e.0).map_err(unhashable)?;
                index_insert(index, h, pos as u32);
            }
        } else {
            index.reserve(pairs, |e| e.0);
        }
        let by_cpython = self.by_cpython();
        for (i, pair) in flat.chunks_exact(2).enumerate() {
            self.keys_deadline(i)?;
            let &[k, v] = pair else { continue };
            let (h, hk) = self.index_hash(&ops, k).map_err(unhashable)?;
            // The index counts the keys sharing `k`'s CPython hash for the model, when it is
            // keyed by that hash and the model counts `k`.
            let count = by_cpython && hk.is_some();
            let (items, new) = (&d, d.len() as u32);
            let (found, same) = ops.find_or_insert(index, (h, count), k, new, |pos| {
                items.get(pos as usize).map(|e| e.0)
            });
            let equal = match found {
                Some(pos) => d.get_mut(pos as usize).map(|slot| {
                    slot.1 = v;
                    slot.0
                }),
                None => {
                    d.push((k, v));
                    None
                }
            };
            self.model_key(&ops, container, k, equal, hk, count.then_some(same))?;
        }
        Ok(())
    }

    /// The hash of `k` in a dict's or set's index ([`KeyIndex`]), and `k`'s
    /// [`KeyOps::hash`] (CPython's) for the model of the reader's work when the model counts
    /// `k` (src/build/keys/reader.rs `counted`); `Unhashable` for an unhashable `k`. While the
    /// model caps CPython-hash collisions at [`INDEX_BY_CPYTHON_COLLISIONS`] or fewer (the
    /// default limits), one hash serves both: the index hash is CPython's, mixed
    /// ([`KeyOps::index_mix`]); else the index hash is the content hash
    /// ([`KeyOps::content_hash`]). Texts and bytes take the content hash either way (their
    /// CPython hash is a keyed stand-in; they equal only their own kind, so equal keys still
    /// hash alike: src/build/keys/index.rs).
    #[inline]
    fn index_hash<S: std::hash::BuildHasher>(
        &self,
        ops: &KeyOps<'_, 'a, S>,
        k: NodeId,
    ) -> std::result::Result<(u64, Option<u64>), Unhashable> {
        if self.by_cpython() {
            ops.index_hash(k)
        } else {
            Ok((ops.content_hash(k)?, self.model_hash(ops, k)))
        }
    }

    /// Whether the indexes are keyed by CPython's hash ([`Machine::index_hash`]): then the
    /// index counts the keys that share one, for the model.
    #[inline(always)]
    fn by_cpython(&self) -> bool {
        self.limits.max_key_collisions <= INDEX_BY_CPYTHON_COLLISIONS
    }

    /// `k`'s [`KeyOps::hash`] (CPython's) for the model of the reader's work, when the model
    /// counts `k` (else it is not asked: src/build/keys/reader.rs `counted`).
    #[inline]
    fn model_hash<S: std::hash::BuildHasher>(
        &self,
        ops: &KeyOps<'_, 'a, S>,
        k: NodeId,
    ) -> Option<u64> {
        if counted(self.arena.node(k), k) {
            ops.hash(k).ok()
        } else {
            None
        }
    }

    /// Adds the `n` insertions of a `set()` or `frozenset()` call to the model's total
    /// (src/build/keys/reader.rs `ReaderKeys::add`).
    pub(super) fn model_items(&self, n: usize) -> Result<()> {
        let Ok(mut model) = self.reader_keys.try_borrow_mut() else {
            return Err(self.err(internal()));
        };
        let input_len = self.arena.input.len() as u64;
        model
            .add(n as u64, &self.limits, input_len)
            .map_err(|r| self.limit(r.limit, r.seen))
    }

    /// Runs the model of the reader's key work (src/build/keys/reader.rs) on one insertion of `k`
    /// into `container` (`equal`: the key there that `k` equals, if any; `hash`: `k`'s
    /// [`KeyOps::hash`] when the caller has it), refusing with the model's limit. The
    /// commonest keys (short texts, shared ints) cost nothing there and are answered from
    /// their node.
    #[inline]
    pub(super) fn model_key<S: std::hash::BuildHasher>(
        &self,
        ops: &KeyOps<'_, 'a, S>,
        container: Container,
        k: NodeId,
        equal: Option<NodeId>,
        hash: Option<u64>,
        same: Option<u32>,
    ) -> Result<()> {
        // A short text or shared int is cheap unless it meets an equal key that is another
        // object (a long text met again through the memo: CPython compares the two whole).
        if !counted(self.arena.node(k), k) && equal.is_none_or(|e| e == k) {
            return Ok(());
        }
        let Ok(mut model) = self.reader_keys.try_borrow_mut() else {
            return Err(self.err(internal()));
        };
        let input_len = self.arena.input.len() as u64;
        model
            .insert(
                ops,
                &self.limits,
                input_len,
                container,
                Key {
                    k,
                    equal,
                    hash,
                    same,
                },
            )
            .map_err(|r| self.limit(r.limit, r.seen))
    }

    /// Looks at the deadline once per [`KEYS_CHECK`] keys of one insertion: the opcode count
    /// checks it between opcodes, but one SETITEMS, ADDITEMS or FROZENSET can insert as many
    /// keys as the input has opcodes, each hashed and compared.
    #[inline]
    pub(super) fn keys_deadline(&self, i: usize) -> Result<()> {
        if i % KEYS_CHECK == KEYS_CHECK - 1 && self.clock.passed() {
            return Err(self.err(ErrorKind::DeadlineExceeded));
        }
        Ok(())
    }

    /// Inserts items into a detached set and its hash index (as [`Machine::dict_insert`]).
    pub(super) fn set_insert(
        &mut self,
        container: Container,
        s: &mut Vec<NodeId>,
        index: &mut KeyIndex,
        items: &[NodeId],
    ) -> Result<()> {
        self.open_keys();
        let r = self.set_insert_keys(container, s, index, items);
        self.close_keys(r)
    }

    pub(super) fn set_insert_keys(
        &mut self,
        container: Container,
        s: &mut Vec<NodeId>,
        index: &mut KeyIndex,
        items: &[NodeId],
    ) -> Result<()> {
        self.check_items(s.len() + items.len())?;
        self.charge(items.len() as u64 * KEYED_BYTES)?;
        s.try_reserve(items.len()).map_err(|_| {
            self.err(ErrorKind::AllocationFailed {
                bytes: items.len() as u64 * KEYED_BYTES,
            })
        })?;
        let ops = self.keys();
        let unhashable = |_| self.err(ErrorKind::UnhashableKey);
        if index.is_empty() && s.len() + items.len() <= SMALL_KEYED {
            for &k in items {
                let hk = ops.hashable_costly(k).map_err(unhashable)?;
                let equal = s.iter().copied().find(|&e| ops.eq_hashed(k, hk, e));
                if equal.is_none() {
                    s.push(k);
                }
                self.model_key(&ops, container, k, equal, hk, None)?;
            }
            return Ok(());
        }
        if index.is_empty() {
            index.reserve(s.len() + items.len(), |e| e.0);
            for (pos, &e) in s.iter().enumerate() {
                let (h, _) = self.index_hash(&ops, e).map_err(unhashable)?;
                index_insert(index, h, pos as u32);
            }
        } else {
            index.reserve(items.len(), |e| e.0);
        }
        let by_cpython = self.by_cpython();
        for (i, &k) in items.iter().enumerate() {
            self.keys_deadline(i)?;
            let (h, hk) = self.index_hash(&ops, k).map_err(unhashable)?;
            // The index counts the keys sharing `k`'s CPython hash for the model, when it is
            // keyed by that hash and the model counts `k`.
            let count = by_cpython && hk.is_some();
            let (existing, new) = (&s, s.len() as u32);
            let (found, same) = ops.find_or_insert(index, (h, count), k, new, |pos| {
                existing.get(pos as usize).copied()
            });
            let equal = found.and_then(|pos| s.get(pos as usize).copied());
            if equal.is_none() {
                s.push(k);
            }
            self.model_key(&ops, container, k, equal, hk, count.then_some(same))?;
        }
        Ok(())
    }

    /// A new set or frozenset of `items` (duplicates under Python equality dropped), gathered
    /// in [`Machine::new_items`] and appended to the items pool.
    pub(super) fn new_set(&mut self, items: &[NodeId], frozen: bool) -> Result<NodeId> {
        let mut set = mem::take(&mut self.new_items);
        set.clear();
        let mut index = KeyIndex::default();
        let r = match self.plain_set(items, &mut set) {
            Some(r) => r,
            None => {
                set.clear();
                let container = self.reader_keys.get_mut().fresh_container();
                self.set_insert(container, &mut set, &mut index, items)
            }
        };
        let id = r.and_then(|()| {
            let (start, len) = self.pool_items(&set)?;
            self.node(
                if frozen {
                    Node::FrozenSet { start, len }
                } else {
                    Node::Set { start, len }
                },
                0,
            )
        });
        self.new_items = set;
        let id = id?;
        self.keep_index(id, index);
        Ok(id)
    }

    /// [`Machine::set_insert`] into the empty `set` of at most [`SMALL_KEYED`] items that are
    /// all ints held in their ids or short texts ([`plain_key`]), with the same checks and
    /// charges; `None` (the caller clears `set`) when the items are not all such.
    pub(super) fn plain_set(
        &mut self,
        items: &[NodeId],
        set: &mut Vec<NodeId>,
    ) -> Option<Result<()>> {
        if items.len() > SMALL_KEYED {
            return None;
        }
        let (nodes, input) = (&self.arena.nodes, self.arena.input);
        let mut kept = [(0u32, 0u64, 0u32); SMALL_KEYED];
        let mut len = 0usize;
        let mut seen = 0u64;
        for &k in items {
            let key = plain_key(nodes, input, k)?;
            let bit = plain_bit(key);
            if seen & bit != 0
                && plain_find(kept.get(..len).unwrap_or_default(), key, input).is_some()
            {
                continue;
            }
            seen |= bit;
            *kept.get_mut(len)? = key;
            len += 1;
            set.push(k);
        }
        Some(
            self.check_items(items.len())
                .and_then(|()| self.charge(items.len() as u64 * KEYED_BYTES)),
        )
    }

    /// SETITEMS into an empty dict, or ADDITEMS into an empty set (`DICT` false), of at most
    /// [`SMALL_KEYED`] keys that are all ints held in their ids or texts shorter than
    /// [`CACHED_TEXT_BYTES`]: the keys are `self.stack[start..]` (for a dict, every other
    /// item), `self.stack[start - 1]` is `target`. The commonest insertion of small objects,
    /// without the general path's key machinery: such keys are equal exactly when they are the
    /// same id or texts of the same bytes (an int is never equal to a text, and two ints held
    /// in ids are equal only as one id), which is the general path's verdict on them, and
    /// none can be unhashable or hold the container. `None` when the insertion is not of this
    /// kind (nothing done); else its outcome, with the same checks, charges and refusals as
    /// the general path.
    pub(super) fn fill_fast<const DICT: bool>(
        &mut self,
        target: NodeId,
        start: usize,
    ) -> Option<Result<()>> {
        let dict = DICT;
        let node = self.arena.node(target)?;
        let items = match node {
            Node::Dict { len: 0, .. } if dict => 2,
            Node::Set { len: 0, .. } if !dict => 1,
            _ => return None,
        };
        let group = self.stack.get(start..)?;
        let n = group.len() / items;
        if n > SMALL_KEYED || group.len() % items != 0 || !self.sealed.is_empty() {
            return None;
        }
        // The keys go straight to the end of their pool, the dict's (or set's) run, and are
        // taken back if one is not of the kind this path takes ([`plain_key`]).
        let Arena {
            input,
            nodes,
            items: item_pool,
            pairs,
            ..
        } = &mut self.arena;
        let input: &[u8] = input;
        let base = if dict { pairs.len() } else { item_pool.len() };
        u32::try_from(base + n).ok()?;
        let reserved = if dict {
            pairs.try_reserve(n)
        } else {
            item_pool.try_reserve(n)
        };
        reserved.ok()?;
        let mut kept = [(0u32, 0u64, 0u32); SMALL_KEYED];
        let mut len = 0usize;
        let mut seen = 0u64;
        let mut plain = true;
        for kv in group.chunks_exact(items) {
            let (k, v) = match *kv {
                [k, v] => (k, v),
                [k] => (k, k),
                _ => continue,
            };
            let Some(key) = plain_key(nodes, input, k) else {
                plain = false;
                break;
            };
            let bit = plain_bit(key);
            let same = if seen & bit == 0 {
                None
            } else {
                plain_find(kept.get(..len).unwrap_or_default(), key, input)
            };
            seen |= bit;
            match same {
                Some(i) => {
                    if let Some(e) = pairs.get_mut(base + i).filter(|_| dict) {
                        e.1 = v;
                    }
                }
                None => {
                    if let Some(f) = kept.get_mut(len) {
                        *f = key;
                    }
                    len += 1;
                    if dict {
                        pairs.push((k, v));
                    } else {
                        item_pool.push(k);
                    }
                }
            }
        }
        if !plain {
            pairs.truncate(if dict { base } else { pairs.len() });
            item_pool.truncate(if dict { item_pool.len() } else { base });
            return None;
        }
        if let Err(e) = self
            .check_items(n)
            .and_then(|()| self.charge(n as u64 * KEYED_BYTES))
        {
            return Some(Err(e));
        }
        let (start32, len32) = (base as u32, len as u32);
        if let Some(slot) = self.arena.nodes.get_mut(target.index()) {
            *slot = if dict {
                Node::Dict {
                    start: start32,
                    len: len32,
                }
            } else {
                Node::Set {
                    start: start32,
                    len: len32,
                }
            };
        }
        // The keys (for a set, the items) are leaves: texts and ints.
        let group = self.stack.get(start..).unwrap_or_default();
        if dict {
            self.heights.filled_values(target, group);
        } else {
            self.heights
                .filled(target, group.get(..1).unwrap_or_default());
        }
        self.stack.truncate(start);
        Some(Ok(()))
    }

    /// SETITEM of one key that is an int held in its id or a short text ([`plain_key`]) into
    /// a dict of at most [`SMALL_KEYED`] keys that holds it already: the value replaced in
    /// place, with the general path's checks and charges. The key is compared with keys of the
    /// same kind only, as [`Machine::fill_fast`] compares them (equal exactly when their
    /// fingerprints are); a dict holding a key of another kind before the equal one (a float
    /// or a bool may equal an int) goes the general way. Replacing a value changes no key, so
    /// a hash index the dict may have stays as it is, and nothing is modelled (such keys cost
    /// the reader nothing: src/build/keys/reader.rs). `None` when the insertion is not of this
    /// kind (nothing done).
    fn set_plain_again(&mut self, target: NodeId, flat: &[NodeId]) -> Option<Result<()>> {
        let &[k, v] = flat else { return None };
        let (at, len) = {
            let Arena {
                input,
                nodes,
                pairs,
                pair_vecs,
                ..
            } = &self.arena;
            let input: &[u8] = input;
            let entries = match *nodes.get(target.index())? {
                Node::Dict { start, len } => pairs.get(start as usize..(start + len) as usize)?,
                Node::DictVec(i) => pair_vecs.get(i as usize)?.as_slice(),
                _ => return None,
            };
            if entries.len() > SMALL_KEYED {
                return None;
            }
            let key = plain_key(nodes, input, k)?;
            let mut at = None;
            for (i, e) in entries.iter().enumerate() {
                if e.0 == k || plain_find(&[plain_key(nodes, input, e.0)?], key, input).is_some() {
                    at = Some(i);
                    break;
                }
            }
            (at?, entries.len())
        };
        if let Err(e) = self
            .check_items(len + 1)
            .and_then(|()| self.charge(KEYED_BYTES))
        {
            return Some(Err(e));
        }
        let slot = match *self.arena.nodes.get(target.index())? {
            Node::Dict { start, .. } => self.arena.pairs.get_mut(start as usize + at),
            Node::DictVec(i) => self.arena.pair_vecs.get_mut(i as usize)?.get_mut(at),
            _ => None,
        };
        match slot {
            Some(slot) => slot.1 = v,
            None => return Some(Err(self.err(internal()))),
        }
        Some(Ok(()))
    }

    /// Inserts the pairs of `flat` into the dict `target` ([`Machine::keyed_insert`]).
    pub(super) fn dict_items(&mut self, target: NodeId, flat: &[NodeId]) -> Result<()> {
        if let Some(done) = self.set_plain_again(target, flat) {
            return done;
        }
        self.keyed_insert::<(NodeId, NodeId)>(target, |m, d, index| {
            m.dict_insert(Container::node(target), d, index, flat)
        })
    }

    /// ADDITEMS: inserts `items` into the set `target` ([`Machine::keyed_insert`]).
    pub(super) fn set_add(&mut self, target: NodeId, items: &[NodeId]) -> Result<()> {
        self.keyed_insert::<NodeId>(target, |m, s, index| {
            m.set_insert(Container::node(target), s, index, items)
        })
    }
}
