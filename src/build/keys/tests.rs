use std::hash::RandomState;

use num_bigint::BigInt;

use super::*;
use crate::value::Owned;

/// With the cache, every hash is the hash without it; the cache keeps the tuples and
/// frozensets it walked and the long texts it met, and a value hashed again is read from it.
#[test]
fn cached_hashes_are_the_hashes() {
    let long = "s".repeat(CACHED_TEXT_BYTES);
    let mut nodes = vec![
        Owned::Str(long),       // 0: a long text, shared
        Owned::Str("k".into()), // 1: a short one
    ];
    // 2..12: (i, text) tuples; 12..22: frozensets nested, each holding the one before.
    for i in 0..10u32 {
        nodes.push(Owned::Tuple(vec![NodeId(1), NodeId(0), NodeId(i % 2)]));
    }
    nodes.push(Owned::FrozenSet(Vec::new()));
    for i in 0..9u32 {
        nodes.push(Owned::FrozenSet(vec![NodeId(12 + i), NodeId(2)]));
    }
    let count = nodes.len() as u32;
    let arena = Arena::of(nodes);
    let state = RandomState::new();
    let cache = HashCache::default();
    let plain = KeyOps {
        arena: &arena,
        state: &state,
        cache: None,
        seed: 1,
    };
    let cached = KeyOps {
        arena: &arena,
        state: &state,
        cache: Some(&cache),
        seed: 1,
    };
    for round in 0..2 {
        for id in (0..count).map(NodeId) {
            assert_eq!(
                cached.hash(id).unwrap(),
                plain.hash(id).unwrap(),
                "{id:?} round {round}"
            );
        }
    }
    let kept = cache.borrow();
    assert!(kept.hashes.contains_key(&NodeId(0)));
    assert!(
        !kept.hashes.contains_key(&NodeId(1)),
        "short texts are not kept"
    );
    // Tuples and frozensets holding one (13..) are walked and kept, with what the walk met
    // (2, 12); tuples of scalars hashed on their own are not kept (they are hashed directly).
    assert!((13..count).all(|i| kept.hashes.contains_key(&NodeId(i))));
    assert!((3..12).all(|i| !kept.hashes.contains_key(&NodeId(i))));
    // Equal tuples hash alike through the cache too.
    assert_eq!(
        cached.hash(NodeId(2)).unwrap(),
        cached.hash(NodeId(4)).unwrap()
    );
    drop(kept);
    // Small tuples of scalars are compared directly, not remembered.
    assert!(cached.eq(NodeId(4), NodeId(2)));
    assert!(!cached.eq(NodeId(2), NodeId(3)));
    assert!(cache.borrow().equal.is_empty());
}

fn key_ops<'n, 'a>(
    arena: &'n Arena<'a>,
    state: &'n RandomState,
    cache: Option<&'n HashCache>,
) -> KeyOps<'n, 'a, RandomState> {
    KeyOps {
        arena,
        state,
        cache,
        seed: 1,
    }
}

/// A big int's hash (of more than `SHORT_BIG_INT_DIGITS` digits) is kept like a long text's, is the hash of an equal float or of an
/// equal big int node, and is what `hashable_costly` gives, so that unequal big ints
/// are told apart by hash before their digits are compared.
#[test]
fn big_int_hashes_are_kept() {
    let big = Owned::BigInt;
    let two_300: BigInt = BigInt::from(1u8) << 300u32;
    let two_70: BigInt = BigInt::from(1u8) << 70u32;
    let nodes = Arena::of(vec![
        big(two_300.clone()),         // 0
        big(two_300.clone()),         // 1: equal to 0, another node
        big(two_300 + 1u8),           // 2: unequal
        Owned::Float(2f64.powi(300)), // 3: equal to 0 as a number
        Owned::Int(5),                // 4
        big(two_70.clone()),          // 5: two 64-bit digits
        Owned::Float(2f64.powi(70)),  // 6: equal to 5
    ]);
    let (state, cache) = (RandomState::new(), HashCache::default());
    let ops = key_ops(&nodes, &state, Some(&cache));
    let plain = key_ops(&nodes, &state, None);
    let h0 = ops.hashable_costly(NodeId(0)).unwrap();
    assert_eq!(h0, Some(plain.hash(NodeId(0)).unwrap()));
    assert_eq!(cache.borrow().hashes.get(&NodeId(0)).copied(), h0);
    assert_eq!(ops.hash(NodeId(1)).unwrap(), h0.unwrap());
    assert_eq!(ops.hash(NodeId(3)).unwrap(), h0.unwrap());
    assert_ne!(ops.hash(NodeId(2)).unwrap(), h0.unwrap());
    // Read from the cache the second time, and the same.
    assert_eq!(ops.hash(NodeId(0)).unwrap(), h0.unwrap());
    assert!(ops.eq_hashed(NodeId(0), h0, NodeId(1)));
    assert!(ops.eq_hashed(NodeId(0), h0, NodeId(3)));
    assert!(!ops.eq_hashed(NodeId(0), h0, NodeId(2)));
    assert!(!ops.eq_hashed(NodeId(0), h0, NodeId(4)));
    // Small ints are not kept (they hash faster than the lookup).
    assert_eq!(ops.hashable_costly(NodeId(4)).unwrap(), None);
    assert!(!cache.borrow().hashes.contains_key(&NodeId(4)));
    // Nor are big ints of a few digits, which hash alike all the same.
    let h5 = ops.hashable_costly(NodeId(5)).unwrap();
    assert_eq!(h5, Some(plain.hash(NodeId(5)).unwrap()));
    assert!(!cache.borrow().hashes.contains_key(&NodeId(5)));
    assert_eq!(ops.hash(NodeId(6)).unwrap(), h5.unwrap());
    assert!(ops.eq_hashed(NodeId(5), h5, NodeId(6)));
    assert!(!ops.eq_hashed(NodeId(5), h5, NodeId(0)));
}

/// Two distinct long texts (or bytes) found equal are remembered, and then equal without
/// a comparison; short ones and unequal ones are not remembered.
#[test]
fn long_equal_texts_are_remembered() {
    let long = "t".repeat(LONG_EQUAL_BYTES);
    let mut other = long.clone();
    other.pop();
    other.push('u');
    let text = |s: &str| Owned::Str(s.to_owned());
    let nodes = Arena::of(vec![
        text(&long),                             // 0
        text(&long),                             // 1: equal to 0
        text(&other),                            // 2: same length, unequal
        text("ab"),                              // 3
        text("ab"),                              // 4
        Owned::Bytes(long.clone().into_bytes()), // 5
        Owned::Bytes(long.clone().into_bytes()), // 6
        Owned::Tuple(vec![NodeId(0)]),           // 7
        Owned::Tuple(vec![NodeId(1)]),           // 8
    ]);
    let (state, cache) = (RandomState::new(), HashCache::default());
    let ops = key_ops(&nodes, &state, Some(&cache));
    assert!(ops.eq(NodeId(0), NodeId(1)));
    assert!(!ops.eq(NodeId(0), NodeId(2)));
    assert!(ops.eq(NodeId(3), NodeId(4)));
    assert!(ops.eq(NodeId(5), NodeId(6)));
    assert_eq!(
        cache.borrow().equal,
        HashSet::from([(NodeId(0), NodeId(1)), (NodeId(5), NodeId(6))])
    );
    assert!(ops.known_equal(NodeId(1), NodeId(0)));
    // A tuple around each: its item comparison finds the pair remembered.
    assert!(ops.eq(NodeId(7), NodeId(8)));
    assert!(!ops.eq(NodeId(2), NodeId(1)));
}

/// Distinct tuples found equal by a walk of at least `REMEMBER_AFTER_PAIRS` pairs are
/// remembered (by ids, smaller first), with the equal tuples inside them; unequal ones
/// are not; a remembered pair is equal without a walk.
#[test]
fn long_equal_tuples_are_remembered() {
    let n = REMEMBER_AFTER_PAIRS as u32;
    // 0..2n: ints, twice over; 2n, 2n+1: two equal tuples, one of each run; 2n+2, 2n+3:
    // (t,) around each; 2n+4: a tuple that differs from t in its last item.
    let mut nodes: Vec<Owned> = (0..2 * n)
        .map(|i| Owned::Int(1000 + i64::from(i % n)))
        .collect();
    let items: Vec<NodeId> = (0..n).map(NodeId).collect();
    nodes.push(Owned::Tuple(items.clone()));
    nodes.push(Owned::Tuple((n..2 * n).map(NodeId).collect()));
    nodes.push(Owned::Tuple(vec![NodeId(2 * n)]));
    nodes.push(Owned::Tuple(vec![NodeId(2 * n + 1)]));
    let mut other: Vec<NodeId> = (n..2 * n).map(NodeId).collect();
    other.pop();
    other.push(NodeId(0));
    nodes.push(Owned::Tuple(other));
    let nodes = Arena::of(nodes);
    let state = RandomState::new();
    let cache = HashCache::default();
    let ops = KeyOps {
        arena: &nodes,
        state: &state,
        cache: Some(&cache),
        seed: 1,
    };
    let m = 2 * n;
    let (t, u, wt, wu, x) = (
        NodeId(m),
        NodeId(m + 1),
        NodeId(m + 2),
        NodeId(m + 3),
        NodeId(m + 4),
    );
    assert!(ops.eq(wu, wt));
    assert!(!ops.eq(t, x));
    let kept = cache.borrow();
    assert!(kept.equal.contains(&(wt, wu)));
    assert!(
        kept.equal.contains(&(t, u)),
        "the pair inside is remembered too"
    );
    assert!(!kept.equal.contains(&(t, x)));
    drop(kept);
    assert!(ops.eq(t, u) && ops.eq(u, t));
}

/// Equal tuples of numbers of different kinds hash alike, whether hashed directly (flat) or
/// walked (inside a tuple holding a tuple, or of more than `SMALL_TUPLE` items), and equal
/// big ints and the floats equal to them too; unequal ones do not collide.
#[test]
fn tuples_of_equal_numbers_hash_alike_on_every_path() {
    let two_70: BigInt = BigInt::from(1u8) << 70u32;
    let mut nodes = vec![
        Owned::Int(1),               // 0
        Owned::Float(2.0),           // 1
        Owned::Float(1.0),           // 2
        Owned::Int(2),               // 3
        Owned::BigInt(two_70),       // 4
        Owned::Float(2f64.powi(70)), // 5
        Owned::Float(0.5),           // 6
    ];
    let t = |items: &[u32]| Owned::Tuple(items.iter().map(|&i| NodeId(i)).collect());
    nodes.push(t(&[0, 1, 4])); // 7: (1, 2.0, 2**70)
    nodes.push(t(&[2, 3, 5])); // 8: (1.0, 2, 2.0**70)
    nodes.push(t(&[7])); // 9: ((1, 2.0, 2**70),), walked
    nodes.push(t(&[8])); // 10: ((1.0, 2, 2.0**70),), walked
    nodes.push(t(&[0, 6])); // 11: (1, 0.5)
    let long: Vec<u32> = std::iter::repeat_n([0u32, 1], 9).flatten().collect();
    let long_eq: Vec<u32> = std::iter::repeat_n([2u32, 3], 9).flatten().collect();
    nodes.push(t(&long)); // 12: 18 items, walked
    nodes.push(t(&long_eq)); // 13
    let arena = Arena::of(nodes);
    let state = RandomState::new();
    for cache in [None, Some(HashCache::default())] {
        let ops = key_ops(&arena, &state, cache.as_ref());
        let h = |i: u32| ops.hash(NodeId(i)).unwrap();
        assert_eq!(h(7), h(8));
        assert_eq!(h(9), h(10));
        assert_eq!(h(12), h(13));
        assert_ne!(h(7), h(11));
        assert_ne!(h(7), h(9));
        assert!(ops.eq(NodeId(7), NodeId(8)));
        assert!(ops.eq(NodeId(9), NodeId(10)));
    }
}

/// The content hash's hasher gathers bytes into words whatever pieces they come in: a bytes
/// value held in pieces (Latin-1 text) hashes as the same bytes in one slice.
#[test]
fn mix_hashes_bytes_alike_in_any_pieces() {
    use std::hash::{BuildHasher, Hasher};
    let state = super::mix::MixState::keyed(0x1234_5678);
    let bytes: Vec<u8> = (0u8..=40).collect();
    let whole = {
        let mut h = state.build_hasher();
        h.write_u8(6);
        h.write(&bytes);
        h.finish()
    };
    for cut in [1usize, 3, 7, 8, 9, 16, 17, 40] {
        for step in [1usize, 2, 5, 8, 13] {
            let mut h = state.build_hasher();
            h.write_u8(6);
            let (head, tail) = bytes.split_at(cut);
            h.write(head);
            for piece in tail.chunks(step) {
                h.write(piece);
            }
            assert_eq!(h.finish(), whole, "cut {cut} step {step}");
        }
    }
    // A shorter value padded with zeros is another value.
    let mut h = state.build_hasher();
    h.write_u8(6);
    h.write(&bytes[..5]);
    let mut g = state.build_hasher();
    g.write_u8(6);
    g.write(&[0, 1, 2, 3, 4, 0]);
    assert_ne!(h.finish(), g.finish());
}
