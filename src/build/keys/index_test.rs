use std::hash::RandomState;

use num_bigint::BigInt;

use super::*;
use crate::value::{Arena, Owned};

/// `(M, 2M, ..)` share CPython's hash 0, as `1`, `1.0`, `True`, `(1, 2)` and `(1.0, 2.0)`
/// share theirs: the index hash of keys equal across kinds is one, of keys with one CPython
/// hash is one (the mix is a bijection), and texts and bytes take their content hash.
#[test]
fn index_hashes_follow_cpython_hashes() {
    const M: i64 = (1 << 61) - 1;
    let one = NodeId::int(1).unwrap();
    let two = NodeId::int(2).unwrap();
    let nodes = vec![
        Owned::Float(1.0),                            // 0
        Owned::Int(M),                                // 1: hash 0
        Owned::BigInt(BigInt::from(M) * 2),           // 2: hash 0
        Owned::Float(2.0),                            // 3
        Owned::Tuple(vec![one, two]),                 // 4: (1, 2)
        Owned::Tuple(vec![NodeId(0), NodeId(3)]),     // 5: (1.0, 2.0)
        Owned::FrozenSet(vec![one, two]),             // 6
        Owned::FrozenSet(vec![NodeId(3), NodeId(0)]), // 7
        Owned::Str("k".into()),                       // 8
        Owned::Bytes(b"k".to_vec()),                  // 9
        Owned::Int(1 << 40),                          // 10
    ];
    let arena = Arena::of(nodes);
    let state = RandomState::new();
    let ops = KeyOps {
        arena: &arena,
        state: &state,
        cache: None,
        seed: 0x1234_5678_9abc_def1,
    };
    let ih = |id: NodeId| ops.index_hash(id).unwrap();
    // Equal across kinds: one index hash; CPython's for the model when it counts the key.
    assert_eq!(ih(one).0, ih(NodeId(0)).0);
    assert_eq!(ih(one).0, ih(NodeId::bool(true)).0);
    assert_eq!(ih(one).1, None, "a shared int is not counted");
    assert_eq!(ih(NodeId(0)).1, Some(1));
    assert_eq!(ih(NodeId(4)).0, ih(NodeId(5)).0);
    assert_eq!(ih(NodeId(4)).1, Some(ops.hash(NodeId(4)).unwrap()));
    assert_eq!(ih(NodeId(6)).0, ih(NodeId(7)).0);
    // One CPython hash, one index hash: what the model counts is what the index meets.
    assert_eq!(ops.hash(NodeId(1)).unwrap(), 0);
    assert_eq!(ih(NodeId(1)), (ops.index_mix(0), Some(0)));
    assert_eq!(ih(NodeId(2)), (ops.index_mix(0), Some(0)));
    assert_eq!(ih(NodeId(10)).1, Some(1 << 40));
    // Texts and bytes: the content hash, not counted.
    assert_eq!(ih(NodeId(8)), (ops.content_hash(NodeId(8)).unwrap(), None));
    assert_eq!(ih(NodeId(9)), (ops.content_hash(NodeId(9)).unwrap(), None));
    assert_ne!(ih(NodeId(8)).0, ih(NodeId(9)).0);
}

/// The mix of CPython hashes is one-to-one and spreads the hashes a peer picks (small ints,
/// multiples of 2**61 - 1 plus a few) over hashbrown's bucket bits (low) and tag bits (top 7).
#[test]
fn index_mix_is_one_to_one_and_spreads() {
    let arena = Arena::of(Vec::new());
    let state = RandomState::new();
    let ops = KeyOps {
        arena: &arena,
        state: &state,
        cache: None,
        seed: 0x9e37_79b9_7f4a_7c15,
    };
    // 0..4096, 2**61 - 1 times 1..4096, 2**20 times 4096..8192: 12,287 distinct hashes.
    let hashes: Vec<u64> = (0..4096u64)
        .chain((1..4096u64).map(|k| k.wrapping_mul((1 << 61) - 1)))
        .chain((4096..8192u64).map(|k| k << 20))
        .collect();
    let mixed: std::collections::HashSet<u64> = hashes.iter().map(|&h| ops.index_mix(h)).collect();
    assert_eq!(mixed.len(), hashes.len());
    let mut low = [0u32; 256];
    let mut top = [0u32; 128];
    for &h in &mixed {
        low[(h & 255) as usize] += 1;
        top[(h >> 57) as usize] += 1;
    }
    // 48 a low byte and 96 a tag on average; none far off.
    assert!(low.iter().all(|&n| (16..=100).contains(&n)), "{low:?}");
    assert!(top.iter().all(|&n| (40..=170).contains(&n)), "{top:?}");
}

/// The node-level hash of small tuples and frozensets of ints, floats and texts is
/// [`KeyOps::hash`]'s; one holding a NaN, a bytes value, a tuple or a text that is no node
/// of the input is left to it.
#[test]
fn flat_hashes_are_the_walks() {
    let one = NodeId::int(1).unwrap();
    let nodes = vec![
        Owned::Float(2.5),                                                       // 0
        Owned::Str("k".into()),                                                  // 1
        Owned::Int(1 << 40),                                                     // 2
        Owned::Float(f64::NAN),                                                  // 3
        Owned::Bytes(b"b".to_vec()),                                             // 4
        Owned::Float(3.0),                                                       // 5
        Owned::Tuple(vec![one, NodeId(0), NodeId(1), NodeId(2), NodeId(5)]),     // 6
        Owned::FrozenSet(vec![one, NodeId(0), NodeId(1), NodeId(2), NodeId(5)]), // 7
        Owned::Tuple(vec![one, NodeId(3)]),                                      // 8
        Owned::Tuple(vec![one, NodeId(4)]),                                      // 9
        Owned::Tuple(vec![one, NodeId(6)]),                                      // 10
        Owned::Tuple(Vec::new()),                                                // 11
        Owned::FrozenSet(Vec::new()),                                            // 12
    ];
    let mut arena = Arena::of(nodes);
    // 13: a text held as a node of the input (`Arena::of` owns its texts), in a tuple (14)
    // and a frozenset (15) with the numbers.
    arena.input = b"name";
    arena.nodes.push(Node::Str { start: 0, len: 4 });
    for frozen in [false, true] {
        let start = arena.items.len() as u32;
        arena
            .items
            .extend_from_slice(&[one, NodeId(13), NodeId(0), NodeId(2)]);
        arena.nodes.push(if frozen {
            Node::FrozenSet { start, len: 4 }
        } else {
            Node::Tuple { start, len: 4 }
        });
    }
    let state = RandomState::new();
    let ops = KeyOps {
        arena: &arena,
        state: &state,
        cache: None,
        seed: 7,
    };
    for id in [11u32, 12, 14, 15] {
        let Some(Node::Tuple { start, len } | Node::FrozenSet { start, len }) =
            arena.node(NodeId(id))
        else {
            panic!("{id}: not a tuple or frozenset");
        };
        let tuple = matches!(arena.node(NodeId(id)), Some(Node::Tuple { .. }));
        assert_eq!(
            ops.flat_hash(NodeId(id), start, len, tuple),
            Some(ops.hash(NodeId(id)).unwrap()),
            "{id}"
        );
        if tuple {
            // The old (CPython 3.7) hash kept by the index's hash is the walk's.
            let cache = super::super::HashCache::default();
            let cached = KeyOps {
                cache: Some(&cache),
                ..ops
            };
            cached.index_hash(NodeId(id)).unwrap();
            let from_index = cached.old_hash_of(NodeId(id));
            assert!(from_index.is_some(), "{id}");
            let fresh = super::super::HashCache::default();
            let walk = KeyOps {
                cache: Some(&fresh),
                ..ops
            };
            walk.hash(NodeId(id)).unwrap();
            assert_eq!(from_index, walk.old_hash_of(NodeId(id)), "{id}");
        }
        assert_eq!(
            ops.index_hash(NodeId(id)).unwrap().1,
            ops.hash(NodeId(id)).ok()
        );
    }
    // A text the walk meets as a view of the side table (`Arena::of`'s), a NaN, bytes, a
    // tuple: the general way.
    for id in [6u32, 8, 9, 10] {
        let Some(Node::Tuple { start, len }) = arena.node(NodeId(id)) else {
            panic!("{id}: not a tuple");
        };
        assert_eq!(ops.flat_hash(NodeId(id), start, len, true), None, "{id}");
        // The general way, the same index hash as the hash says.
        let h = ops.hash(NodeId(id)).unwrap();
        assert_eq!(
            ops.index_hash(NodeId(id)).unwrap(),
            (ops.index_mix(h), Some(h))
        );
    }
}
