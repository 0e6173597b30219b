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

/// The most memory a reservation from a guess (not the scan's count) takes for one of the
/// arena's vectors, the pools and the memo when the input is at most [`SMALL_INPUT_BYTES`]
/// ([`guess_cap`]).
pub(super) const GUESS_BYTES: usize = 4 << 10;

/// Inputs up to this length have their reservations capped ([`guess_cap`]).
pub(super) const SMALL_INPUT_BYTES: usize = 256 << 10;

/// The most entries of `size` bytes a reservation from a guess (not the scan's count) takes
/// for one of the arena's vectors, the pools and the memo, for an input of `input_len` bytes:
/// [`GUESS_BYTES`] of memory when the input is at most [`SMALL_INPUT_BYTES`], else no cap.
/// Below that length the vectors grow as they fill past the guess (doubling, so the copies
/// cost at most what they hold once more): a guess from the length is wrong by orders of
/// magnitude for an input that is mostly one long bytes or text value (a 128 KiB Mitogen
/// transfer chunk makes one node), and blocks sized by it, allocated and freed at every
/// decode, made glibc malloc grow and trim its heap at each (two `brk` calls, and the pages
/// faulted in again), which cost a chunk's decode a hundred times its work. A few KiB each
/// stay well under malloc's trim threshold (128 KiB) and give the fast loop room for a
/// small message without a regrowth. A longer input keeps the guess, which spares a decode
/// of 20 MB of small objects its regrowths.
pub(super) fn guess_cap(input_len: usize, size: usize) -> usize {
    if input_len <= SMALL_INPUT_BYTES {
        GUESS_BYTES / size.max(1)
    } else {
        usize::MAX
    }
}

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
    ///
    /// For an input of at most [`SMALL_INPUT_BYTES`], each guess is capped at [`GUESS_BYTES`] of
    /// memory ([`guess_cap`]).
    pub(super) fn reserve_pools(&mut self, input_len: usize) {
        let most = self.limits.max_alloc_bytes as usize / 32;
        let cap = |n: usize, size: usize| n.min(most).min(guess_cap(input_len, size));
        let _ = self
            .arena
            .items
            .try_reserve(cap(input_len / 4, ITEM_BYTES as usize));
        let _ = self.arena.pairs.try_reserve(cap(input_len / 10, 8));
        self.memo
            .reserve(cap(input_len / 10, mem::size_of::<crate::value::NodeId>()));
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
