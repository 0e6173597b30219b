//! [`GlobalTable`]: the policy's index from `(module, name)` to its rule, looked up at every
//! GLOBAL / STACK_GLOBAL of every decode.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::GlobalRule;

/// The rule indices of a policy, by `(module, name)`: one open-addressing table hashed by a
/// keyed word-at-a-time mix of both names ([`name_hash`]), so that a lookup costs one pass
/// over the names' bytes, a probe and one comparison of each, with no allocation.
///
/// Why a fast hash instead of SipHash is safe here: the peer chooses the names looked up,
/// never what the table holds. The table is filled from the policy alone (a few dozen
/// entries at most in the shipped ones) and never grows during a decode, so a lookup's probe
/// sequence ends at the first empty slot of a table whose layout the policy fixed: however
/// the peer picks its names, a lookup compares against at most the longest run of occupied
/// slots, bounded by the policy's size. The seed (random per table) only keeps that layout
/// from being predictable; the bound does not depend on it.
#[derive(Clone, Debug, Default)]
pub(super) struct GlobalTable {
    seed: u64,
    table: HashTable<usize>,
}

impl GlobalTable {
    /// An empty table with a random seed.
    pub(super) fn new() -> GlobalTable {
        GlobalTable {
            seed: std::hash::RandomState::new().hash_one(0x9e37_u64),
            table: HashTable::new(),
        }
    }

    /// The index of the rule of `(module, name)` among `rules`, if any.
    #[inline]
    pub(super) fn find(&self, rules: &[GlobalRule], module: &str, name: &str) -> Option<usize> {
        let hash = name_hash(self.seed, module, name);
        self.table
            .find(hash, |&i| {
                rules
                    .get(i)
                    .is_some_and(|r| r.module == module && r.name == name)
            })
            .copied()
    }

    /// Adds `index`, the rule of `(module, name)` in `rules` (not already in the table).
    pub(super) fn insert(&mut self, rules: &[GlobalRule], module: &str, name: &str, index: usize) {
        let seed = self.seed;
        self.table
            .insert_unique(name_hash(seed, module, name), index, |&i| {
                rules
                    .get(i)
                    .map_or(0, |r| name_hash(seed, &r.module, &r.name))
            });
    }
}

/// The splitmix64 finaliser (a bijection of `u64`).
#[inline(always)]
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Mixes `bytes` into `state` eight at a time (little-endian words), the last partial word
/// with its length, so that `("ab", "c")` and `("a", "bc")` differ.
#[inline(always)]
fn mix_bytes(mut state: u64, bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        state = splitmix64(state ^ u64::from_le_bytes(b));
    }
    let rest = words.remainder();
    let mut b = [0u8; 8];
    for (d, s) in b.iter_mut().zip(rest) {
        *d = *s;
    }
    splitmix64(state ^ u64::from_le_bytes(b) ^ ((rest.len() as u64 + 1) << 59))
}

/// The table's hash of `(module, name)` under `seed`.
#[inline]
fn name_hash(seed: u64, module: &str, name: &str) -> u64 {
    mix_bytes(mix_bytes(seed, module.as_bytes()), name.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Constructor;

    /// Every rule is found by its exact names, and near misses (a name split differently
    /// between module and name, a prefix, another case) are not.
    #[test]
    fn finds_exact_names_only() {
        let rules: Vec<GlobalRule> = [
            ("builtins", "set"),
            ("builtins", "frozenset"),
            ("collections", "OrderedDict"),
            ("a", "bc"),
            ("mitogen.core", "_unpickle_call_error"),
        ]
        .iter()
        .map(|&(m, n)| GlobalRule::new(m, n, Constructor::Set))
        .collect();
        let mut t = GlobalTable::new();
        for (i, r) in rules.iter().enumerate() {
            t.insert(&rules, &r.module, &r.name, i);
        }
        for (i, r) in rules.iter().enumerate() {
            assert_eq!(t.find(&rules, &r.module, &r.name), Some(i));
        }
        for (m, n) in [
            ("ab", "c"),
            ("builtins", "se"),
            ("builtins", "Set"),
            ("builtin", "sset"),
            ("mitogen.core", "_unpickle_call_erro"),
            ("", ""),
        ] {
            assert_eq!(t.find(&rules, m, n), None, "{m}.{n}");
        }
        assert_eq!(GlobalTable::default().find(&rules, "builtins", "set"), None);
    }

    /// The split between module and name and the length of the last word change the hash.
    #[test]
    fn hash_separates_splits_and_lengths() {
        assert_ne!(name_hash(1, "ab", "c"), name_hash(1, "a", "bc"));
        assert_ne!(name_hash(1, "a", ""), name_hash(1, "a\0", ""));
        assert_ne!(name_hash(1, "abcdefgh", ""), name_hash(1, "abcdefgh\0", ""));
        assert_ne!(name_hash(1, "x", "y"), name_hash(2, "x", "y"));
    }
}
