//! [`CalledWith`]: the set of containers a record's arguments reached
//! ([`Machine::called_with`](super::machine::Machine)).

use std::collections::HashSet;

use super::keys::mix::MixState;
use crate::value::NodeId;

/// How many ids [`CalledWith`] keeps in its array before its hash set.
const FEW: usize = 16;

/// A set of node ids: the first [`FEW`] in an array searched in order (a Mitogen call's
/// arguments reach about ten containers: no allocation, no hashing, no seed drawn), the
/// rest in a hash set under the seeded mix ([`MixState`], seeded at its first insertion), so
/// that a lookup costs at most `FEW` comparisons and one probe however many ids it holds.
#[derive(Debug)]
pub(super) struct CalledWith {
    few: [NodeId; FEW],
    /// Ids in `few`.
    len: usize,
    more: HashSet<NodeId, MixState>,
}

impl Default for CalledWith {
    fn default() -> CalledWith {
        CalledWith {
            few: [NodeId(0); FEW],
            len: 0,
            more: HashSet::default(),
        }
    }
}

impl CalledWith {
    /// Whether no id was added.
    #[inline(always)]
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `id` was added.
    #[inline]
    pub(super) fn contains(&self, id: NodeId) -> bool {
        self.few.iter().take(self.len).any(|&x| x == id)
            || (!self.more.is_empty() && self.more.contains(&id))
    }

    /// Adds `id`; `false` when it was there already.
    #[inline]
    pub(super) fn insert(&mut self, id: NodeId) -> bool {
        if self.contains(id) {
            return false;
        }
        if let Some(slot) = self.few.get_mut(self.len) {
            *slot = id;
            self.len += 1;
            return true;
        }
        if self.more.capacity() == 0 {
            self.more = HashSet::with_capacity_and_hasher(FEW, MixState::random());
        }
        self.more.insert(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids are found once added, past the array too, and added once.
    #[test]
    fn holds_ids_in_the_array_and_past_it() {
        let mut s = CalledWith::default();
        assert!(s.is_empty() && !s.contains(NodeId(0)));
        for i in 0..40 {
            assert!(s.insert(NodeId(i)), "{i}");
            assert!(!s.insert(NodeId(i)), "{i}");
        }
        assert!(!s.is_empty());
        assert_eq!(s.len, FEW);
        assert_eq!(s.more.len(), 40 - FEW);
        for i in 0..40 {
            assert!(s.contains(NodeId(i)), "{i}");
        }
        assert!(!s.contains(NodeId(40)));
    }
}
