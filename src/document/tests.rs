//! Unit tests of the document.

use super::id::{IMMEDIATE_MAX, IMMEDIATE_MIN, SHARED_BASE};
use super::*;
use crate::{decode, Policy};

#[test]
fn ids_hold_ints_of_31_bits_and_the_singletons() {
    for i in [
        0,
        1,
        -1,
        -5,
        256,
        257,
        1000,
        IMMEDIATE_MIN,
        IMMEDIATE_MAX,
        -123_456_789,
    ] {
        let id = NodeId::int(i).unwrap();
        assert!(id.is_shared(), "{i}");
        assert!(
            matches!(id.shared_value(), Some(Value::Int(j)) if j == i),
            "{i}"
        );
    }
    for i in [IMMEDIATE_MIN - 1, IMMEDIATE_MAX + 1, i64::MAX, i64::MIN] {
        assert_eq!(NodeId::int(i), None, "{i}");
    }
    assert!(matches!(NodeId::NONE.shared_value(), Some(Value::None)));
    assert!(matches!(
        NodeId::bool(true).shared_value(),
        Some(Value::Bool(true))
    ));
    assert!(matches!(
        NodeId::bool(false).shared_value(),
        Some(Value::Bool(false))
    ));
    assert!(matches!(
        NodeId::EMPTY_STR.shared_value(),
        Some(Value::Str(s)) if s.as_bytes().is_empty()
    ));
    assert!(matches!(
        NodeId::EMPTY_BYTES.shared_value(),
        Some(Value::Bytes(b)) if b.is_empty()
    ));
    assert!(NodeId::EMPTY_STR.is_shared() && NodeId::EMPTY_BYTES.is_shared());
    assert!(!NodeId::EMPTY_BYTES.is_held_int());
    assert!(!NodeId(SHARED_BASE - 1).is_shared());
    assert_eq!(NodeId(SHARED_BASE - 1).shared_value().map(|_| ()), None);
}

#[test]
fn latin1_bytes_equal_raw_bytes_of_the_same_content() {
    let all: Vec<u8> = (0..=255u8).collect();
    let text: String = all.iter().map(|&b| char::from(b)).collect();
    let lazy = PyBytes::latin1(text.as_bytes(), 256);
    assert_eq!(lazy.len(), 256);
    assert_eq!(lazy.as_slice(), None);
    assert_eq!(lazy.to_cow().as_ref(), all.as_slice());
    assert_eq!(lazy, PyBytes::raw(&all));
    assert_eq!(PyBytes::raw(&all), lazy);
    let mut other = all.clone();
    other[200] ^= 1;
    assert_ne!(lazy, PyBytes::raw(&other));
    let mut pieces = Vec::new();
    lazy.for_each_chunk(|c| pieces.extend_from_slice(c));
    assert_eq!(pieces, all);
    for n in [0, 3, 200, 256, 300] {
        let mut head = Vec::new();
        lazy.for_each_chunk_of(n, |c| head.extend_from_slice(c));
        assert_eq!(head, all[..n.min(256)], "{n}");
        let mut head = Vec::new();
        PyBytes::raw(&all).for_each_chunk_of(n, |c| head.extend_from_slice(c));
        assert_eq!(head, all[..n.min(256)], "{n}");
    }
    let short = PyBytes::latin1("é".as_bytes(), 1);
    assert_eq!(short.to_vec(), vec![0xE9]);
    assert_ne!(short, PyBytes::raw("é".as_bytes()));
}

/// Every empty text is the one shared `''` and every empty bytes the one `b''`, from each
/// opcode that reads them (fast loop and careful path alike), as in CPython, where
/// `pickle.loads` of this list gives four times one object and three times another.
#[test]
fn empty_texts_and_bytes_are_one_shared_value_each() {
    let mut p = b"\x80\x04](X\x00\x00\x00\x00\x8c\x00\x8d".to_vec();
    p.extend_from_slice(&[0; 8]);
    p.extend_from_slice(b"V\nC\x00B\x00\x00\x00\x00\x8e");
    p.extend_from_slice(&[0; 8]);
    p.extend_from_slice(b"e.");
    let doc = decode(&p, &Policy::data()).unwrap();
    let root = doc.root().unwrap();
    let Some(Value::List(items)) = doc.get(root) else {
        panic!("not a list")
    };
    let want = [[NodeId::EMPTY_STR; 4].as_slice(), &[NodeId::EMPTY_BYTES; 3]].concat();
    assert_eq!(items, want.as_slice());
    assert!(matches!(doc.get(NodeId::EMPTY_STR), Some(Value::Str(s)) if s.as_bytes().is_empty()));
    assert!(matches!(doc.get(NodeId::EMPTY_BYTES), Some(Value::Bytes(b)) if b.is_empty()));
    // The list is the one arena node; the seven values still count against max_nodes.
    assert_eq!(doc.len(), 1);
    assert_eq!(doc.value_count(), 8);
}

/// `bytes()` and `_codecs.encode('', 'latin1')` (Python 3's protocol 2 spellings of `b''`)
/// are the shared `b''` too, as in CPython.
#[test]
fn empty_bytes_made_by_calls_are_the_shared_one() {
    let calls: [&[u8]; 2] = [
        b"\x80\x02]q\x00(c__builtin__\nbytes\nq\x01)Rq\x02h\x02e.",
        b"\x80\x02]q\x00(c_codecs\nencode\nq\x01X\x00\x00\x00\x00X\x06\x00\x00\x00latin1\x86RC\x00e.",
    ];
    for p in calls {
        let doc = decode(p, &Policy::data()).unwrap();
        let Some(Value::List(items)) = doc.get(doc.root().unwrap()) else {
            panic!("not a list")
        };
        assert_eq!(items, [NodeId::EMPTY_BYTES; 2].as_slice(), "{p:?}");
    }
}
