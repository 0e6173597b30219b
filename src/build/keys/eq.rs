//! Python equality of two distinct key nodes beyond the fast paths of [`KeyOps::eq`]: long
//! texts compared once, numbers across kinds, tuples and frozensets walked with an explicit
//! stack (pairs met often remembered), records by identity.

use std::hash::BuildHasher;

use super::*;

impl<S: BuildHasher> KeyOps<'_, '_, S> {
    /// Equality of the texts or bytes `p` and `q` of the distinct nodes `a` and `b`. Two that
    /// are at least [`LONG_EQUAL_BYTES`] long are compared once: found equal, the pair is
    /// remembered, as equal tuples are. Else every SETITEM of a key equal to a key already
    /// in the dict, but another node (two copies of one 16 MiB text, SETITEM'd again and
    /// again through the memo), compares them in full again, as CPython does.
    #[inline(always)]
    pub(super) fn bytes_eq(&self, a: NodeId, b: NodeId, p: &[u8], q: &[u8]) -> bool {
        if p.len() != q.len() {
            return false;
        }
        if p.len() < LONG_EQUAL_BYTES {
            return p == q;
        }
        self.long_bytes_eq(a, b, p, q)
    }

    /// [`KeyOps::bytes_eq`] for bytes values of which one at least is held as Latin-1 text.
    #[inline(never)]
    pub(super) fn py_bytes_eq(&self, a: NodeId, b: NodeId, p: PyBytes<'_>, q: PyBytes<'_>) -> bool {
        if p.len() != q.len() {
            return false;
        }
        if p.len() < LONG_EQUAL_BYTES {
            return p == q;
        }
        self.remembered_eq(a, b, || p == q)
    }

    #[inline(never)]
    pub(super) fn long_bytes_eq(&self, a: NodeId, b: NodeId, p: &[u8], q: &[u8]) -> bool {
        self.remembered_eq(a, b, || p == q)
    }

    /// Whether `a` and `b` are equal: true when they were found equal before, else `same()`,
    /// remembered when it is true (see [`KeyOps::bytes_eq`]).
    #[inline(always)]
    pub(super) fn remembered_eq(&self, a: NodeId, b: NodeId, same: impl FnOnce() -> bool) -> bool {
        if self.known_equal(a, b) {
            return true;
        }
        let same = same();
        if same {
            self.remember_equal(a, b);
        }
        same
    }

    /// [`KeyOps::eq`] past its inlined fast paths (two strs, two ints).
    #[inline(never)]
    pub(super) fn eq_other(&self, a: NodeId, b: NodeId) -> bool {
        match (self.node(a), self.node(b)) {
            // IEEE equality is Python's for two floats: -0.0 == 0.0, NaN != NaN.
            (Some(Value::Float(x)), Some(Value::Float(y))) => x == y,
            (Some(Value::Tuple(p)), Some(Value::Tuple(q))) if p.len() != q.len() => false,
            (Some(Value::Tuple(p)), Some(Value::Tuple(q))) if p.len() <= SMALL_TUPLE => {
                match self.scalar_items_eq(p, q) {
                    Some(same) => same,
                    None => self.known_equal(a, b) || self.eq_walk(a, b),
                }
            }
            (
                Some(Value::Tuple(_) | Value::FrozenSet(_)),
                Some(Value::Tuple(_) | Value::FrozenSet(_)),
            ) => {
                if self.known_equal(a, b) {
                    return true;
                }
                // The walk remembers the pair (and the pairs inside it) when they are equal.
                self.eq_walk(a, b)
            }
            _ => self.eq_walk(a, b),
        }
    }

    /// Item-by-item equality of two tuples of the same length whose items are all ints, strs
    /// or floats (or the same node), without the walk's allocations; `None` when an item
    /// is anything else.
    pub(super) fn scalar_items_eq(&self, p: &[NodeId], q: &[NodeId]) -> Option<bool> {
        for (&x, &y) in p.iter().zip(q) {
            if x == y {
                continue;
            }
            let same = match (self.node(x)?, self.node(y)?) {
                (Value::Int(a), Value::Int(b)) => a == b,
                (Value::Str(a), Value::Str(b)) => self.bytes_eq(x, y, a.as_bytes(), b.as_bytes()),
                (Value::Float(a), Value::Float(b)) => a == b,
                _ => return None,
            };
            if !same {
                return Some(false);
            }
        }
        Some(true)
    }

    /// `eq` for any two hashable values, with an explicit work list.
    #[inline(never)]
    pub(super) fn eq_walk(&self, a: NodeId, b: NodeId) -> bool {
        // A pair is compared once: on shared tuples (DAGs) the walk is linear in the pairs of
        // distinct nodes, not in the unfolded trees.
        let mut compared: HashSet<(NodeId, NodeId)> = HashSet::new();
        // The pairs of distinct tuples or frozensets met: all equal if the walk ends true, and
        // then remembered (a pair met inside one comparison is often met again in the next:
        // a set of 8,000 distinct `(q,)` whose `q` equals the `p` of a `(p,)` it holds).
        let mut containers: Vec<(NodeId, NodeId)> = Vec::new();
        let mut work = vec![(a, b)];
        // Pairs taken from the work list, the same node twice included: what the walk cost,
        // which decides whether its result is remembered (two equal tuples of ints held in
        // their ids meet only pairs of one id, none of them compared, but as many as items).
        let mut met = 0usize;
        while let Some((x, y)) = work.pop() {
            met += 1;
            // Metered every WALK_CHECK pairs met (the room is overshot by at most that many).
            if met.is_multiple_of(WALK_CHECK) && !self.walk_fits(compared.len() + work.len()) {
                return false;
            }
            // A record compared as its first argument is that argument.
            let (Ok(x), Ok(y)) = (self.resolve(x), self.resolve(y)) else {
                return false;
            };
            if x == y || !compared.insert((x, y)) {
                continue;
            }
            let (Some(vx), Some(vy)) = (self.node(x), self.node(y)) else {
                return false;
            };
            if matches!(vx, Value::Tuple(_) | Value::FrozenSet(_))
                && matches!(vy, Value::Tuple(_) | Value::FrozenSet(_))
            {
                if self.known_equal(x, y) {
                    continue;
                }
                containers.push((x, y));
            }
            if let (Some(nx), Some(ny)) = (num_of(vx), num_of(vy)) {
                if !num_eq(&nx, &ny) {
                    return false;
                }
                continue;
            }
            let same = match (vx, vy) {
                (Value::None, Value::None) => true,
                (Value::Str(p), Value::Str(q)) => self.bytes_eq(x, y, p.as_bytes(), q.as_bytes()),
                (Value::Bytes(p), Value::Bytes(q)) => match (p.as_slice(), q.as_slice()) {
                    (Some(p), Some(q)) => self.bytes_eq(x, y, p, q),
                    _ => self.py_bytes_eq(x, y, p, q),
                },
                (Value::Global(p), Value::Global(q)) => p.python3_name() == q.python3_name(),
                // One object per first argument: the same global, equal arguments.
                (Value::Object(p), Value::Object(q))
                    if p.key == RecordKey::OnePerFirstArgument
                        && q.key == RecordKey::OnePerFirstArgument =>
                {
                    let same_global = matches!(
                        (self.node(p.callable), self.node(q.callable)),
                        (Some(Value::Global(g)), Some(Value::Global(h)))
                            if g.python3_name() == h.python3_name()
                    );
                    match (self.first_argument(p), self.first_argument(q)) {
                        (Ok(m), Ok(n)) if same_global => {
                            work.push((m, n));
                            true
                        }
                        _ => false,
                    }
                }
                // By value: two equal dates are one key.
                (Value::Object(p), Value::Object(q))
                    if p.key == RecordKey::Datetime && q.key == RecordKey::Datetime =>
                {
                    matches!(
                        (key_of(self.arena, p), key_of(self.arena, q)),
                        (Some(m), Some(n)) if m == n
                    )
                }
                (Value::Tuple(p), Value::Tuple(q)) => {
                    if p.len() != q.len() {
                        return false;
                    }
                    work.extend(p.iter().copied().zip(q.iter().copied()));
                    true
                }
                (Value::FrozenSet(p), Value::FrozenSet(q)) => {
                    if p.len() != q.len() {
                        return false;
                    }
                    // Pair items by (hash, content hash, node id); equal sets pair up equal
                    // items.
                    let (Some(ps), Some(qs)) = (self.sorted_by_hash(p), self.sorted_by_hash(q))
                    else {
                        return false;
                    };
                    if ps
                        .iter()
                        .map(|e| (e.0, e.1))
                        .ne(qs.iter().map(|e| (e.0, e.1)))
                    {
                        return false;
                    }
                    work.extend(ps.iter().map(|e| e.2).zip(qs.iter().map(|e| e.2)));
                    true
                }
                _ => false,
            };
            if !same {
                return false;
            }
        }
        // Only when the walk was long enough for a lookup to be worth its memory.
        if met >= REMEMBER_AFTER_PAIRS {
            for (x, y) in containers {
                self.remember_equal(x, y);
            }
        }
        true
    }

    /// The items of a frozenset as `(hash, content hash, node id)`, sorted: equal frozensets
    /// give equal items at the same places. The hash is CPython's ([`KeyOps::hash`]), which
    /// the peer can make collide; only when two items share one are the content hashes
    /// (`content.rs`, keyed) computed, to order them (else 0): an equal frozenset has the
    /// same hashes, so it computes them too.
    pub(super) fn sorted_by_hash(&self, items: &[NodeId]) -> Option<Vec<(u64, u64, NodeId)>> {
        let mut v = Vec::with_capacity(items.len());
        for &i in items {
            v.push((self.hash(i).ok()?, 0, i));
        }
        v.sort_unstable();
        if v.windows(2)
            .any(|w| w.first().map(|e| e.0) == w.get(1).map(|e| e.0))
        {
            for e in v.iter_mut() {
                e.1 = self.content_hash(e.2).ok()?;
            }
            v.sort_unstable();
        }
        Some(v)
    }
}
