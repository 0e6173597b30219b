//! SETITEMS into an empty dict and ADDITEMS into an empty set of a few distinct plain keys
//! ([`Machine::fill_distinct`]): the commonest insertion of small objects, in two passes,
//! one that reads the keys and one that copies the group into its pool at once.

use super::budget::KEYED_BYTES;
use super::keyed::{plain_bit, plain_find, plain_key, SMALL_KEYED};
use super::machine::Machine;
use crate::error::Result;
use crate::value::{Node, NodeId};

impl<'a, 'p> Machine<'a, 'p> {
    /// SETITEMS into an empty dict, or ADDITEMS into an empty set (`DICT` false), of at most
    /// [`SMALL_KEYED`] keys that are all ints held in their ids or short texts
    /// ([`plain_key`]) and all different: the keys are `self.stack[start..]` (for a dict,
    /// every other item), `self.stack[start - 1]` is `target`. The same insertion as
    /// [`Machine::fill_fast`]'s, with the same checks, charges, node and heights, for the
    /// group it takes when no key equals another: the keys are read first (a key met for the
    /// first time has a [`plain_bit`] no key before it has; one whose bit was seen is
    /// compared with the keys before it as `fill_fast` compares them), then the group goes
    /// to the end of its pool in one copy. `None` (nothing done) when a key is not plain,
    /// two keys are equal (`fill_fast` keeps the last value of the first key), or the pool
    /// cannot grow in place of the general path's own error; else the insertion's outcome.
    #[inline]
    pub(super) fn fill_distinct<const DICT: bool>(
        &mut self,
        target: NodeId,
        start: usize,
    ) -> Option<Result<()>> {
        let width = if DICT { 2 } else { 1 };
        match self.arena.nodes.get(target.index())? {
            Node::Dict { len: 0, .. } if DICT => {}
            Node::Set { len: 0, .. } if !DICT => {}
            _ => return None,
        }
        let n = {
            let group = self.stack.get(start..)?;
            let n = group.len() / width;
            if n > SMALL_KEYED || group.len() % width != 0 || !self.sealed.is_empty() {
                return None;
            }
            let (nodes, input) = (self.arena.nodes.as_slice(), self.arena.input);
            if DICT {
                let (pairs, _) = group.as_chunks::<2>();
                distinct(nodes, input, pairs.iter().map(|&[k, _]| k), group, width)?;
            } else {
                distinct(nodes, input, group.iter().copied(), group, width)?;
            }
            n
        };
        // The pool's room first, so that nothing is charged for a group left to the general
        // path.
        let base = if DICT {
            self.arena.pairs.len()
        } else {
            self.arena.items.len()
        };
        let end = u32::try_from(base + n).ok()?;
        let room = if DICT {
            self.arena.pairs.capacity() - base
        } else {
            self.arena.items.capacity() - base
        };
        if room < n {
            let reserved = if DICT {
                self.arena.pairs.try_reserve(n)
            } else {
                self.arena.items.try_reserve(n)
            };
            reserved.ok()?;
        }
        // `check_items` and `charge`, tested in line: out of line only to report the refusal.
        let bytes = n as u64 * KEYED_BYTES;
        let alloc = self.alloc.saturating_add(bytes);
        if n as u64 > self.limits.max_container_items || alloc > self.limits.max_alloc_bytes {
            if let Err(e) = self.check_items(n).and_then(|()| self.charge(bytes)) {
                return Some(Err(e));
            }
        } else {
            self.alloc = alloc;
        }
        let base32 = end - n as u32;
        let group = self.stack.get(start..).unwrap_or_default();
        if DICT {
            let (pairs, _) = group.as_chunks::<2>();
            self.arena.pairs.extend(pairs.iter().map(|&[k, v]| (k, v)));
        } else {
            self.arena.items.extend_from_slice(group);
        }
        if let Some(slot) = self.arena.nodes.get_mut(target.index()) {
            *slot = if DICT {
                Node::Dict {
                    start: base32,
                    len: n as u32,
                }
            } else {
                Node::Set {
                    start: base32,
                    len: n as u32,
                }
            };
        }
        // The keys (for a set, the items) are leaves: texts and ints.
        if DICT {
            self.heights.filled_values(target, group);
        } else {
            self.heights
                .filled(target, group.get(..1).unwrap_or_default());
        }
        self.stack.truncate(start);
        Some(Ok(()))
    }
}

/// `Some` when every key of `keys` (every `width`-th item of `group`) is plain ([`plain_key`])
/// and none equals another: a key met for the first time has a [`plain_bit`] no key before
/// it has; one whose bit was seen is compared with the keys before it ([`equal_before`]).
#[inline(always)]
fn distinct(
    nodes: &[Node],
    input: &[u8],
    keys: impl Iterator<Item = NodeId>,
    group: &[NodeId],
    width: usize,
) -> Option<()> {
    let mut seen = 0u64;
    // The keys so far, each as its fingerprint folded into a word: equal keys have equal
    // words (and keys whose words are equal are compared).
    let mut kept = [0u64; SMALL_KEYED];
    for (i, k) in keys.enumerate() {
        let key = plain_key(nodes, input, k)?;
        let bit = plain_bit(key);
        let word = key.1 ^ u64::from(key.0).rotate_right(8);
        if seen & bit != 0 && equal_before(nodes, input, kept.get(..i)?, word, key, group, width) {
            return None;
        }
        seen |= bit;
        *kept.get_mut(i)? = word;
    }
    Some(())
}

/// Whether the key whose fingerprint is `key` (folded: `word`) equals one of the keys before
/// it, the `width`-th items of `group` whose words are `kept`, compared as
/// [`plain_find`] compares them (a key that is not plain counts as equal: the caller then
/// leaves the group to the general path). Out of line: most keys never come here.
#[inline(never)]
fn equal_before(
    nodes: &[Node],
    input: &[u8],
    kept: &[u64],
    word: u64,
    key: (u32, u64, u32),
    group: &[NodeId],
    width: usize,
) -> bool {
    kept.iter().enumerate().any(|(j, &w)| {
        w == word
            && group
                .get(j * width)
                .and_then(|&e| plain_key(nodes, input, e))
                .is_none_or(|earlier| plain_find(&[earlier], key, input).is_some())
    })
}

#[cfg(test)]
#[path = "plain_test.rs"]
mod tests;
