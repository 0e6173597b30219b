//! The memo: dense for the indices CPython's pickler writes (0, 1, 2, ...), sparse beyond, so
//! that one huge index costs one entry (CPython 3.11 allocates an array as large as the largest
//! index: 9 bytes of LONG_BINPUT could cost gigabytes).

use std::collections::{HashMap, TryReserveError};

use crate::value::NodeId;

/// Bytes charged per dense slot: what the decode's memo holds there (a `NodeId`),
/// whichever pass's memo grows. The scan's symbols are larger, but its verdict on
/// `max_alloc_bytes` must be the decode's (the decode runs in one pass and scans only to
/// report a refusal), so both charge what the decode's memo takes.
const DENSE_SLOT_BYTES: usize = std::mem::size_of::<NodeId>();
/// Bytes charged per sparse slot, as [`DENSE_SLOT_BYTES`]: an entry of index and node id, and
/// the hash table's control byte.
const SPARSE_SLOT_BYTES: usize = std::mem::size_of::<(u64, NodeId)>() + 1;

/// The first memo index up to which this memo stays dense when `entries` are set: twice the
/// entries plus 256. CPython's unpickler, which sizes its memo array by the largest index,
/// holds an array linear in the entries below it.
#[inline]
pub(crate) fn memo_index_bound(entries: u64) -> u64 {
    entries.saturating_mul(2).saturating_add(256)
}

/// Memo indices below this may be set however few entries are: CPython's C unpickler
/// (`Modules/_pickle.c` `_Unpickler_MemoPut`, up to 3.13) grows its memo array to twice the
/// index, 8 bytes a slot, so an index below 2**20 costs the reader after at most 16 MiB once
/// (and nothing here: a sparse entry). CPython's own tests write such pickles
/// (`Lib/test/pickletester.py` `test_get`: PUT 100000; `test_long_binget`: LONG_BINPUT
/// 65536, each with an empty memo).
pub(crate) const MEMO_INDEX_FREE: u64 = 1 << 20;

/// Whether a PUT may not set memo `index` when `entries` are set
/// (`crate::ErrorKind::MemoIndexAhead`): it is at or past both [`memo_index_bound`] and
/// [`MEMO_INDEX_FREE`]. Past them, 9 bytes of LONG_BINPUT would make CPython allocate
/// gigabytes. The bound of the entries is tested first: every pickler's index is below it (a
/// MEMOIZE's always is), so the common path is one comparison.
#[inline(always)]
pub(crate) fn memo_index_ahead(index: u64, entries: u64) -> bool {
    index >= memo_index_bound(entries) && index >= MEMO_INDEX_FREE
}

/// A memo entry's type, with the value that marks a dense slot as unset (so that a slot is
/// the size of the entry, not of an `Option` of it).
pub(crate) trait Slot: Copy + PartialEq {
    /// The unset slot: a value no entry has.
    const UNSET: Self;
}

impl Slot for NodeId {
    const UNSET: NodeId = NodeId::NO_NODE;
}

/// Memo entries of type `T` (node ids in the build pass, symbols in the scan pass).
pub(crate) struct Memo<T> {
    dense: Vec<T>,
    /// The dense slots charged so far: the capacity the dense part would have if it grew
    /// only as it fills (doubling), whatever was reserved ahead ([`Memo::reserve`]), so that
    /// the charges do not depend on a reservation, and the scan's and the build's agree.
    charged: usize,
    sparse: HashMap<u64, T>,
    /// Distinct indices set (what MEMOIZE uses as its index, as CPython's `memo_len`).
    pub(crate) count: u64,
}

impl<T> Default for Memo<T> {
    fn default() -> Memo<T> {
        Memo {
            dense: Vec::new(),
            charged: 0,
            sparse: HashMap::new(),
            count: 0,
        }
    }
}

impl<T: Slot> Memo<T> {
    pub(crate) fn get(&self, index: u64) -> Option<T> {
        match usize::try_from(index).ok().and_then(|i| self.dense.get(i)) {
            Some(&v) => (v != T::UNSET).then_some(v),
            None => self.sparse.get(&index).copied(),
        }
    }

    /// Sets an entry; returns the bytes the memo's tables grew by (by capacity, a dense slot
    /// per index and a hash-table entry of index, node id and control byte per sparse slot, as
    /// the decode's memo takes them from the allocator: [`DENSE_SLOT_BYTES`]), which the
    /// callers charge. The dense part grows only
    /// to cover indices below twice the number of entries (plus 256), so its size stays linear
    /// in the entries actually set. Every growth is fallible: when memory runs out the memo is
    /// unchanged and the error is returned (an infallible one aborted the process: two
    /// requests of 16 M sparse entries each took the service down; A47).
    #[inline]
    pub(crate) fn put(&mut self, index: u64, value: T) -> Result<u64, TryReserveError> {
        // The next index (MEMOIZE's, and every PUT of CPython's pickler): one push.
        if index == self.dense.len() as u64 && self.sparse.is_empty() {
            let grown = self.reserve_dense(1)?;
            self.dense.push(value);
            self.count += 1;
            return Ok(grown);
        }
        if let Some(slot) = usize::try_from(index)
            .ok()
            .and_then(|i| self.dense.get_mut(i))
        {
            self.count += u64::from(*slot == T::UNSET);
            *slot = value;
            return Ok(0);
        }
        if index < memo_index_bound(self.count) && self.sparse.is_empty() {
            if let Ok(i) = usize::try_from(index) {
                let grown = self.reserve_dense((i + 1).saturating_sub(self.dense.len()))?;
                if i > self.dense.len() {
                    self.dense.resize(i, T::UNSET);
                }
                self.dense.push(value);
                self.count += 1;
                return Ok(grown);
            }
        }
        let before = self.sparse.capacity();
        self.sparse.try_reserve(1)?;
        let grown = (self.sparse.capacity() - before) * SPARSE_SLOT_BYTES;
        let new = self.sparse.insert(index, value).is_none();
        self.count += u64::from(new);
        Ok(grown as u64)
    }

    /// Reserves room for `n` dense entries, as a hint: nothing is charged for it (entries are
    /// charged as the dense part's length passes [`Memo::charged`]), and a failure changes
    /// nothing.
    pub(crate) fn reserve(&mut self, n: usize) {
        let _ = self.dense.try_reserve_exact(n);
    }

    /// [`Memo::put`] when it takes no allocation, so that it can neither fail nor charge: a
    /// dense index already covered, or the next dense index while the dense part has room.
    /// `new_allowed`: whether an entry may be added (`max_memo_entries`). Returns whether it
    /// was set; `false` leaves the memo as it was, for [`Memo::put`] to do the rest.
    #[inline(always)]
    pub(crate) fn put_in_place(&mut self, index: u64, value: T, new_allowed: bool) -> bool {
        let len = self.dense.len();
        if index == len as u64 && self.sparse.is_empty() {
            if !new_allowed || len >= self.charged || len == self.dense.capacity() {
                return false;
            }
            self.dense.push(value);
            self.count += 1;
            return true;
        }
        match usize::try_from(index)
            .ok()
            .and_then(|i| self.dense.get_mut(i))
        {
            Some(slot) if *slot != T::UNSET || new_allowed => {
                self.count += u64::from(*slot == T::UNSET);
                *slot = value;
                true
            }
            _ => false,
        }
    }

    /// Makes room for `more` dense slots; returns the bytes charged for them ([`Memo::charged`]).
    #[inline]
    fn reserve_dense(&mut self, more: usize) -> Result<u64, TryReserveError> {
        let need = self.dense.len() + more;
        self.dense.try_reserve(more)?;
        if need <= self.charged {
            return Ok(0);
        }
        // As `Vec` grows when it is not reserved ahead: to twice its capacity or what is
        // needed, at least 4 slots.
        let grown = need.max(self.charged * 2).max(4);
        let bytes = (grown - self.charged) * DENSE_SLOT_BYTES;
        self.charged = grown;
        Ok(bytes as u64)
    }

    /// The bytes the memo's tables have been charged so far (the sum of what [`Memo::put`]
    /// returned).
    pub(crate) fn charged_bytes(&self) -> u64 {
        (self.charged * DENSE_SLOT_BYTES + self.sparse.capacity() * SPARSE_SLOT_BYTES) as u64
    }

    /// The same memo with each entry `f` of what it was: the same indices, count, charges and
    /// table sizes, so that it grows and is charged from here as this one would.
    pub(crate) fn map<U: Slot>(&self, mut f: impl FnMut(T) -> U) -> Memo<U> {
        let dense = self
            .dense
            .iter()
            .map(|&v| if v == T::UNSET { U::UNSET } else { f(v) })
            .collect();
        let mut sparse = HashMap::with_capacity(self.sparse.capacity());
        sparse.extend(self.sparse.iter().map(|(&i, &v)| (i, f(v))));
        Memo {
            dense,
            charged: self.charged,
            sparse,
            count: self.count,
        }
    }

    /// An empty memo whose dense part is `dense`'s allocation (its contents dropped): only
    /// room, which changes neither the charges ([`Memo::charged_bytes`] counts slots as if
    /// the dense part grew as it fills) nor what the memo holds.
    pub(crate) fn with_dense(mut dense: Vec<T>) -> Memo<T> {
        dense.clear();
        Memo {
            dense,
            ..Memo::default()
        }
    }

    /// The dense part's allocation, for [`Memo::with_dense`].
    pub(crate) fn into_dense(self) -> Vec<T> {
        self.dense
    }

    /// Whether setting `index` would add an entry.
    pub(crate) fn is_new(&self, index: u64) -> bool {
        self.get(index).is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_indices_stay_small() {
        let mut m = Memo::default();
        let mut grown = m.put(0, NodeId(1)).unwrap();
        grown += m.put(0xFFFF_FFFF, NodeId(2)).unwrap();
        grown += m.put(1, NodeId(3)).unwrap();
        assert_eq!(m.get(0), Some(NodeId(1)));
        assert_eq!(m.get(0xFFFF_FFFF), Some(NodeId(2)));
        assert_eq!(m.get(1), Some(NodeId(3)));
        assert_eq!(m.get(2), None);
        assert_eq!(m.count, 3);
        assert!(m.dense.len() < 300);
        assert_eq!(m.put(1, NodeId(4)).unwrap(), 0);
        assert_eq!(m.count, 3);
        // Dense slots of 4 bytes (a node id, the unset one marking a hole), sparse entries of
        // 16 (8 + 4, padded) + 1 bytes, counted by capacity.
        let want = m.dense.capacity() * 4 + m.sparse.capacity() * 17;
        assert_eq!(grown, want as u64);
    }
}
