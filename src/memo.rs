//! The memo: dense for the indices CPython's pickler writes (0, 1, 2, ...), sparse beyond, so
//! that one huge index costs one entry (CPython 3.11 allocates an array as large as the largest
//! index: 9 bytes of LONG_BINPUT could cost gigabytes).

use std::collections::HashMap;

/// Memo entries of type `T` (node ids in the build pass, symbols in the scan pass).
pub(crate) struct Memo<T> {
    dense: Vec<Option<T>>,
    sparse: HashMap<u64, T>,
    /// Distinct indices set (what MEMOIZE uses as its index, as CPython's `memo_len`).
    pub(crate) count: u64,
}

impl<T> Default for Memo<T> {
    fn default() -> Memo<T> {
        Memo {
            dense: Vec::new(),
            sparse: HashMap::new(),
            count: 0,
        }
    }
}

impl<T: Copy> Memo<T> {
    pub(crate) fn get(&self, index: u64) -> Option<T> {
        match usize::try_from(index).ok().and_then(|i| self.dense.get(i)) {
            Some(v) => *v,
            None => self.sparse.get(&index).copied(),
        }
    }

    /// Sets an entry. The dense part grows only to cover indices below twice the number of
    /// entries (plus 256), so its size stays linear in the entries actually set.
    #[inline]
    pub(crate) fn put(&mut self, index: u64, value: T) {
        // The next index (MEMOIZE's, and every PUT of CPython's pickler): one push.
        if index == self.dense.len() as u64 && self.sparse.is_empty() {
            self.dense.push(Some(value));
            self.count += 1;
            return;
        }
        if let Some(slot) = usize::try_from(index)
            .ok()
            .and_then(|i| self.dense.get_mut(i))
        {
            self.count += u64::from(slot.is_none());
            *slot = Some(value);
            return;
        }
        if index < self.count.saturating_mul(2).saturating_add(256) && self.sparse.is_empty() {
            if let Ok(i) = usize::try_from(index) {
                if i > self.dense.len() {
                    self.dense.resize(i, None);
                }
                self.dense.push(Some(value));
                self.count += 1;
                return;
            }
        }
        let new = self.sparse.insert(index, value).is_none();
        self.count += u64::from(new);
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
        m.put(0, 1u32);
        m.put(0xFFFF_FFFF, 2);
        m.put(1, 3);
        assert_eq!(m.get(0), Some(1));
        assert_eq!(m.get(0xFFFF_FFFF), Some(2));
        assert_eq!(m.get(1), Some(3));
        assert_eq!(m.get(2), None);
        assert_eq!(m.count, 3);
        assert!(m.dense.len() < 300);
        m.put(1, 4);
        assert_eq!(m.count, 3);
    }
}
