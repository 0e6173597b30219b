use super::super::{decode, Decoder};
use crate::{Limits, Policy};

/// `{k: i for i, k in enumerate(keys)}` as protocol 4 writes it without a memo: EMPTY_DICT
/// MARK (SHORT_BINUNICODE key, BININT1 i)* SETITEMS STOP, every key its own node.
fn dict_of(keys: &[&str]) -> Vec<u8> {
    let mut p = b"\x80\x04}(".to_vec();
    for (i, k) in keys.iter().enumerate() {
        p.push(0x8c);
        p.push(k.len() as u8);
        p.extend_from_slice(k.as_bytes());
        p.extend_from_slice(&[b'K', i as u8]);
    }
    p.extend_from_slice(b"u.");
    p
}

/// The fast loop (through [`Machine::fill_distinct`]) and the careful path (through
/// `fill_fast`) decode a pickle alike, to typed JSON, or refuse it alike.
fn both(p: &[u8], limits: Limits) -> std::result::Result<String, (&'static str, u64)> {
    let policy = Policy::data();
    let mut outcome = [true, false].map(|careful| {
        let mut d = Decoder::new(p, &policy).limits(limits);
        if careful {
            d = d.careful_only();
        }
        d.decode()
            .map(|doc| crate::json::to_typed_json(&doc))
            .map_err(|e| (e.kind().name(), e.offset()))
    });
    let [careful, fast] = &mut outcome;
    assert_eq!(careful, fast);
    fast.clone()
}

/// Distinct keys whose [`plain_bit`]s collide ("id" and "größe", "name" and "tags") are all
/// kept; equal texts that are different nodes are one key, first place, last value, as
/// CPython's dict keeps them; sets of ints drop their duplicates.
#[test]
fn distinct_keys_are_kept_and_equal_keys_merged() {
    let limits = Policy::data().limits;
    for (keys, want) in [
        (
            &["id", "größe", "name", "tags"][..],
            &[("id", 0), ("größe", 1), ("name", 2), ("tags", 3)][..],
        ),
        (
            &["name", "tags", "name"][..],
            &[("name", 2), ("tags", 1)][..],
        ),
        (
            &[
                "a long key of text 1",
                "a long key of text 2",
                "a long key of text 1",
            ][..],
            &[("a long key of text 1", 2), ("a long key of text 2", 1)][..],
        ),
        (&["", "x", ""][..], &[("", 2), ("x", 1)][..]),
    ] {
        let p = dict_of(keys);
        both(&p, limits).unwrap_or_else(|e| panic!("{keys:?}: refused {e:?}"));
        let doc = decode(&p, &Policy::data()).unwrap_or_else(|e| panic!("{e}"));
        let root = doc.root_ref().unwrap_or_else(|| panic!("no root"));
        let got: Vec<(String, i64)> = root
            .pairs()
            .map(|(k, v)| {
                (
                    k.as_str().unwrap_or("?").to_owned(),
                    v.as_i64().unwrap_or(-1),
                )
            })
            .collect();
        let want: Vec<(String, i64)> = want.iter().map(|&(k, v)| (k.to_owned(), v)).collect();
        assert_eq!(got, want, "{keys:?}");
    }
    // EMPTY_SET MARK 1 2 1 300 ADDITEMS STOP: {1, 2, 300}.
    let p = b"\x80\x04\x8f(K\x01K\x02K\x01M\x2c\x01\x90.";
    both(p, limits).unwrap_or_else(|e| panic!("set refused {e:?}"));
    let doc = decode(p, &Policy::data()).unwrap_or_else(|e| panic!("{e}"));
    let root = doc.root_ref().unwrap_or_else(|| panic!("no root"));
    let items: Vec<i64> = root.items().map(|v| v.as_i64().unwrap_or(-1)).collect();
    assert_eq!(items, [1, 2, 300]);
}

/// `max_container_items` and `max_alloc_bytes` refuse the insertion of distinct keys at
/// the same threshold and offset on both paths: limit - 1 refused, limit accepted.
#[test]
fn distinct_keys_are_counted_and_charged_as_the_careful_path() {
    let p = dict_of(&["id", "größe", "name", "tags", "value"]);
    let base = Policy::data().limits;
    let mut limits = base;
    limits.max_container_items = 5;
    assert!(both(&p, limits).is_ok());
    limits.max_container_items = 4;
    assert_eq!(both(&p, limits).map_err(|e| e.0), Err("limit_exceeded"));
    // The smallest allocation budget accepted, found from above: one byte less is refused
    // by both at the SETITEMS.
    let mut alloc = base;
    let (mut lo, mut hi) = (0u64, 1 << 20);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        alloc.max_alloc_bytes = mid;
        if both(&p, alloc).is_ok() {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    alloc.max_alloc_bytes = lo;
    let refused = both(&p, alloc);
    assert_eq!(refused.map_err(|e| e.1), Err(p.len() as u64 - 2));
}

/// `short_ascii` (src/build/fast.rs) against `<[u8]>::is_ascii`, for every length below 64
/// and a byte of 0x80 or more at every place, or none.
#[test]
fn short_ascii_agrees_with_is_ascii() {
    let base: Vec<u8> = (0..64u8).map(|i| b'a' + i % 26).collect();
    for len in 0..64 {
        let mut text = base.get(..len).unwrap_or_default().to_vec();
        assert!(super::super::fast::short_ascii(&text), "{len}");
        for at in 0..len {
            for high in [0x80, 0xc3, 0xff] {
                if let Some(b) = text.get_mut(at) {
                    *b = high;
                }
                assert_eq!(
                    super::super::fast::short_ascii(&text),
                    text.is_ascii(),
                    "{len} {at}"
                );
                if let Some(b) = text.get_mut(at) {
                    *b = b'a';
                }
            }
        }
    }
}
