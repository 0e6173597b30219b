//! The allocation budget: what each value, item and entry is charged, and its checks against
//! `max_nodes`, `max_container_items` and `max_alloc_bytes`; the arena's reservations.

use std::mem;

use super::machine::Machine;
use crate::error::Result;
use crate::limits::LimitName;
use crate::value::{Fat, Node};

/// Bytes charged per node (the arena slot).
pub(super) const NODE_BYTES: u64 = mem::size_of::<Node>() as u64;

/// Bytes charged per value kept in the arena's side table ([`Fat`]: globals, big ints,
/// complex numbers, records, bytes and text not in the input), on top of its node: the slot.
pub(super) const FAT_BYTES: u64 = mem::size_of::<Fat<'static>>() as u64;

/// Bytes charged per list/tuple/set item slot.
pub(super) const ITEM_BYTES: u64 = 4;

/// Bytes charged per dict pair or hashed set item (slot plus index entry).
pub(super) const KEYED_BYTES: u64 = 8 + 16;

impl<'a, 'p> Machine<'a, 'p> {
    /// Reserves the arena for the nodes the scan counted (no regrowth, no copies, no doubling
    /// slack), never past what `max_nodes` and `max_alloc_bytes` allow. A failed reservation
    /// is only a lost hint: the arena then grows as nodes arrive, under the same limits.
    pub(super) fn reserve_nodes(&mut self, bound: u64) {
        let cap = bound
            .min(self.limits.max_nodes)
            .min(self.limits.max_alloc_bytes / NODE_BYTES);
        if let Ok(cap) = usize::try_from(cap) {
            let _ = self.arena.nodes.try_reserve_exact(cap);
        }
    }

    /// Reserves the item and pair pools and the memo for a guess from the input's length (an
    /// item per 4 bytes, as a list of ints at protocol 4 holds; a pair or a memo entry per 10
    /// bytes, small objects at protocol 4 use one pair per 12 bytes and one memo entry per
    /// 16), so that they seldom grow and copy what they hold (a growth copied up to 20 MB at
    /// a time). Only a hint: a reservation is address space, not memory, until it is
    /// written, and a failed one leaves them to grow as they fill (they are charged by what
    /// they hold).
    pub(super) fn reserve_pools(&mut self, input_len: usize) {
        let most = self.limits.max_alloc_bytes as usize / 32;
        let _ = self.arena.items.try_reserve((input_len / 4).min(most));
        let _ = self.arena.pairs.try_reserve((input_len / 10).min(most));
        self.memo.reserve((input_len / 10).min(most));
    }

    #[inline]
    pub(super) fn charge(&mut self, bytes: u64) -> Result<()> {
        let total = self.alloc.saturating_add(bytes);
        if total > self.limits.max_alloc_bytes {
            return Err(self.limit(LimitName::MaxAllocBytes, total));
        }
        self.alloc = total;
        Ok(())
    }

    pub(super) fn check_items(&self, items: usize) -> Result<()> {
        if items as u64 > self.limits.max_container_items {
            return Err(self.limit(LimitName::MaxContainerItems, items as u64));
        }
        Ok(())
    }

    /// Counts a new value against `max_nodes` and charges its slot plus `extra` bytes (a
    /// shared value is charged as a node too, so that no limit depends on which values happen
    /// to be shared).
    #[inline(always)]
    pub(super) fn count_value(&mut self, extra: u64) -> Result<()> {
        self.alloc = self.value_fits(extra)?;
        self.created += 1;
        Ok(())
    }

    /// [`Machine::count_value`]'s checks without the counting: the bytes charged once the
    /// value is counted, or the refusal it would make.
    #[inline(always)]
    pub(super) fn value_fits(&self, extra: u64) -> Result<u64> {
        let n = self.created;
        if n >= self.limits.max_nodes {
            return Err(self.limit(LimitName::MaxNodes, n + 1));
        }
        let total = self.alloc.saturating_add(NODE_BYTES.saturating_add(extra));
        if total > self.limits.max_alloc_bytes {
            return Err(self.limit(LimitName::MaxAllocBytes, total));
        }
        Ok(total)
    }

    /// Refuses, as [`Machine::fat`] would, a value of the side table owning `extra` bytes that
    /// the limits have no room for: called before those bytes are copied, so that a copy
    /// never passes `max_alloc_bytes` before it is charged.
    pub(super) fn fat_fits(&self, extra: u64) -> Result<()> {
        self.value_fits(extra.saturating_add(FAT_BYTES)).map(|_| ())
    }
}
