// The size- and deadline-bounded shorthands are deprecated for `*_bounded`; these tests keep
// checking them, as they still answer.
#![allow(deprecated)]

use std::io;
use std::time::Instant;

use super::sets::{sort_key_bytes, SetOrders, SORT_KEY_BYTES, SORT_KEY_MIN_BYTES};
use super::text::{text_prefix, write_hex, write_json_string};
use super::*;
use crate::value::Value;

/// A list's runs of scalar items, with a shared int's id and ref, a big int, a nested list
/// and a tuple among them, give this exact text (the output of an earlier writer that used a
/// task per item); writing stops inside a run at `max_bytes` and at the deadline.
#[test]
fn scalar_runs_write_what_the_tasks_wrote() {
    // [1000, x, x, None, 2**70, [1], 'a', b'b', 1.5, True, (2, 3)], x = 2**40 memoized (an
    // arena node: ints of 31 bits are held in their ids, and never written as refs).
    let mut p =
        b"\x80\x04]\x94(M\xe8\x03\x8a\x06\x00\x00\x00\x00\x00\x01\x94h\x01N\x8a\x09".to_vec();
    p.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0x40]);
    p.extend_from_slice(
        b"]K\x01a\x8c\x01aC\x01bG?\xf8\x00\x00\x00\x00\x00\x00\x88K\x02K\x03\x86e.",
    );
    let doc = crate::decode(&p, &crate::Policy::data()).unwrap();
    let want = concat!(
        "{\"format\":\"picklewarden-typed-json/1\",\"value\":{\"type\":\"list\",\"items\":[",
        "{\"type\":\"int\",\"value\":\"1000\"},{\"type\":\"int\",\"id\":0,\"value\":\"1099511627776\"},",
        "{\"type\":\"ref\",\"id\":0},{\"type\":\"none\"},",
        "{\"type\":\"int\",\"value\":\"1180591620717411303424\"},",
        "{\"type\":\"list\",\"items\":[{\"type\":\"int\",\"value\":\"1\"}]},",
        "{\"type\":\"str\",\"value\":\"a\"},{\"type\":\"bytes\",\"hex\":\"62\"},",
        "{\"type\":\"float\",\"bits\":\"3ff8000000000000\",\"repr\":\"1.5\"},",
        "{\"type\":\"bool\",\"value\":true},",
        "{\"type\":\"tuple\",\"items\":[{\"type\":\"int\",\"value\":\"2\"},{\"type\":\"int\",\"value\":\"3\"}]}]}}"
    );
    assert_eq!(to_typed_json(&doc), want);
    assert_eq!(
        to_typed_json_limited(&doc, want.len()).as_deref(),
        Some(want)
    );
    // Cut inside the first run (after the 1000) and inside the last (the tuple's items).
    assert_eq!(to_typed_json_limited(&doc, 100), None);
    assert_eq!(to_typed_json_limited(&doc, want.len() - 40), None);

    // list(range(1000, 201000)) at protocol 4: one run of 200,000 items.
    let mut p = b"\x80\x04](".to_vec();
    for i in 1000..201_000u32 {
        p.push(b'J');
        p.extend_from_slice(&i.to_le_bytes());
    }
    p.extend_from_slice(b"e.");
    let ints = crate::decode(&p, &crate::Policy::data()).unwrap();
    let text = to_typed_json(&ints);
    assert!(text.ends_with("{\"type\":\"int\",\"value\":\"200999\"}]}}"));
    assert_eq!(text.matches("\"type\":\"int\"").count(), 200_000);
    let past = Instant::now();
    assert_eq!(to_typed_json_until(&ints, usize::MAX, past), None);
}

/// A sink that records each piece it is given, and fails at the piece numbered `fail_at`
/// (counting from 0), recording any call made after that (also used by the repr tests).
pub(crate) struct Pieces {
    pub(crate) text: Vec<u8>,
    pub(crate) sizes: Vec<usize>,
    pub(crate) fail_at: usize,
    pub(crate) calls_after_failing: usize,
}

impl Default for Pieces {
    fn default() -> Pieces {
        Pieces {
            text: Vec::new(),
            sizes: Vec::new(),
            fail_at: usize::MAX,
            calls_after_failing: 0,
        }
    }
}

impl io::Write for Pieces {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.sizes.len() > self.fail_at {
            self.calls_after_failing += 1;
        }
        if self.sizes.len() >= self.fail_at {
            self.sizes.push(0);
            return Err(io::Error::other("sink full"));
        }
        self.sizes.push(buf.len());
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `write_typed_json` passes on the bytes `to_typed_json` makes, in pieces of about
/// `SPILL_BYTES` (one piece longer by a 3 MiB text written whole), for one pickle and for a
/// stream, with runs of scalars, sorted sets and a shared value; a failing sink stops it at
/// its first error.
#[test]
fn written_as_it_is_made_the_text_is_the_same() {
    // [[0, ..., 199999], [{i} for i in range(20000)], t, t, 'x' * 3 MiB], t = [1000] shared,
    // at protocol 4.
    let mut p = b"\x80\x04](](".to_vec();
    for i in 0..200_000u32 {
        p.push(b'J');
        p.extend_from_slice(&i.to_le_bytes());
    }
    p.extend_from_slice(b"e](");
    for i in 0..20_000u32 {
        p.extend_from_slice(b"\x8f(J");
        p.extend_from_slice(&i.to_le_bytes());
        p.push(0x90);
    }
    p.extend_from_slice(b"e]M\xe8\x03a\x94h\x00\x8d");
    let long = 3 << 20;
    p.extend_from_slice(&(long as u64).to_le_bytes());
    p.extend(std::iter::repeat_n(b'x', long));
    p.extend_from_slice(b"e.");
    let doc = crate::decode(&p, &crate::Policy::data()).unwrap();
    let want = to_typed_json(&doc);
    assert!(want.len() > 10 << 20, "{}", want.len());
    let mut sink = Pieces::default();
    write_typed_json(&doc, &mut sink).unwrap();
    assert!(sink.text == want.as_bytes());
    assert!(sink.sizes.len() >= 8, "{:?}", sink.sizes);
    // A `dyn Write` is taken as it is.
    let mut text = Vec::new();
    let out: &mut dyn io::Write = &mut text;
    write_typed_json(&doc, out).unwrap();
    crate::repr::write_repr(&doc, out).unwrap();
    assert!(text == [want.as_bytes(), crate::repr::to_repr(&doc).as_bytes()].concat());
    let over: Vec<usize> = sink
        .sizes
        .iter()
        .copied()
        .filter(|&n| n > SPILL_BYTES + 256)
        .collect();
    assert_eq!(over.len(), 1, "{:?}", sink.sizes);
    assert!(over.iter().all(|&n| n <= SPILL_BYTES + long + 256));

    // The same pickle twice, as a stream: `values`.
    let mut twice = p.clone();
    twice.extend_from_slice(&p);
    let stream = crate::Decoder::new(&twice, &crate::Policy::data())
        .decode_stream()
        .unwrap();
    let want_stream = to_typed_json(&stream);
    assert!(want_stream.contains("\"values\":["));
    let mut sink = Pieces::default();
    write_typed_json(&stream, &mut sink).unwrap();
    assert!(sink.text == want_stream.as_bytes());

    // A sink that fails at its third piece: that error, and nothing asked of it after.
    let mut sink = Pieces {
        fail_at: 2,
        ..Pieces::default()
    };
    let e = write_typed_json(&doc, &mut sink).unwrap_err();
    assert_eq!(e.to_string(), "sink full");
    assert_eq!(sink.sizes.len(), 3);
    assert_eq!(sink.calls_after_failing, 0);
    assert!(want.as_bytes().starts_with(&sink.text));
}

/// Cut at every few bytes (and at every value, `piece` 0), typed JSON and repr pass on
/// what `to_typed_json` and `to_repr` make, on every file of the good corpus that the
/// `data` policy accepts (none reaches repr's repeat cut: `written_as_it_is_made_the_repr_
/// is_the_same` in the repr tests does).
#[test]
fn pieces_of_any_size_give_the_same_text_on_the_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/good");
    let mut files = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "pkl") {
            continue;
        }
        let input = std::fs::read(&path).unwrap();
        let Ok(doc) = crate::decode(&input, &crate::Policy::data()) else {
            continue;
        };
        files += 1;
        let json = to_typed_json(&doc);
        let repr = crate::repr::to_repr(&doc);
        for piece in [0, 1, 5, 64] {
            let mut out = Vec::new();
            write_in_pieces(&doc, &mut out, piece).unwrap();
            assert!(
                out == json.as_bytes(),
                "{} json piece {piece}",
                path.display()
            );
            let mut out = Vec::new();
            crate::repr::write_in_pieces(&doc, &mut out, piece).unwrap();
            assert!(
                out == repr.as_bytes(),
                "{} repr piece {piece}",
                path.display()
            );
        }
    }
    assert!(files > 1000, "{files} files");
}

/// The up-front reservation counts popped values too; a short text does not keep it.
#[test]
fn a_short_text_does_not_keep_the_reservation() {
    // NONE POP a million times, then NONE: a million values created, one written.
    let mut input = b"\x80\x04".to_vec();
    for _ in 0..1_000_000 {
        input.extend_from_slice(b"N0");
    }
    input.extend_from_slice(b"N.");
    let doc = crate::decode(&input, &crate::Policy::data()).unwrap();
    assert!(doc.value_count() > 1_000_000);
    let text = to_typed_json(&doc);
    assert_eq!(
        text,
        "{\"format\":\"picklewarden-typed-json/1\",\"value\":{\"type\":\"none\"}}"
    );
    assert!(text.capacity() < 8192, "capacity {}", text.capacity());
}

/// The writers give up once their deadline has passed: typed JSON while ordering sets and
/// while writing, repr while printing (A48: the service held a decode slot for 9 s of set
/// ordering after answering 503 at its 1 s deadline).
#[test]
fn the_writers_stop_at_their_deadline() {
    // [{0}, {1}, ..., {99999}] at protocol 4.
    let mut p = b"\x80\x04](".to_vec();
    for i in 0..100_000u32 {
        p.extend_from_slice(b"\x8f(J");
        p.extend_from_slice(&i.to_le_bytes());
        p.push(0x90);
    }
    p.extend_from_slice(b"e.");
    let sets = crate::decode(&p, &crate::Policy::data()).unwrap();
    let past = Instant::now();
    let later = past + std::time::Duration::from_secs(600);
    assert_eq!(to_typed_json_until(&sets, usize::MAX, past), None);
    assert!(SetOrders::until(&sets.arena, &sets.roots, Some(past)).is_none());
    assert_eq!(
        to_typed_json_until(&sets, usize::MAX, later).as_deref(),
        Some(to_typed_json(&sets).as_str())
    );
    let r = crate::repr::to_repr(&sets);
    assert_eq!(crate::repr::to_repr_until(&sets, usize::MAX, past), None);
    assert_eq!(
        crate::repr::to_repr_until(&sets, usize::MAX, later).as_deref(),
        Some(r.as_str())
    );
}

/// Every byte value, across the 4 KiB blocks of the writer, against `format!("{:02x}")`.
#[test]
fn hex_of_every_byte_across_blocks() {
    let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 256) as u8).collect();
    let want: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    for len in [0, 1, 255, 4095, 4096, 4097, 5000] {
        let mut out = String::from("x");
        write_hex(&mut out, &bytes[..len]);
        assert_eq!(out, format!("x{}", &want[..2 * len]), "{len}");
    }
}

#[test]
fn limited_output_stops_past_the_bound() {
    // [None] * 1000 (protocol 2, one APPENDS): 1008 bytes of pickle, 15 bytes of JSON per
    // None.
    let mut p = b"\x80\x02](".to_vec();
    p.extend(std::iter::repeat_n(b'N', 1000));
    p.extend_from_slice(b"e.");
    let policy = crate::Policy::strict();
    let doc = crate::Decoder::new(&p, &policy).decode().unwrap();
    let full = to_typed_json(&doc);
    assert_eq!(full.matches("{\"type\":\"none\"}").count(), 1000);
    assert_eq!(
        to_typed_json_limited(&doc, full.len()).as_deref(),
        Some(full.as_str())
    );
    assert_eq!(to_typed_json_limited(&doc, 10_000), None);
    assert_eq!(to_typed_json_limited(&doc, 0), None);
    let repr = crate::repr::to_repr(&doc);
    assert_eq!(repr.matches("None").count(), 1000);
    assert_eq!(
        crate::repr::to_repr_limited(&doc, repr.len()).as_deref(),
        Some(repr.as_str())
    );
    assert_eq!(crate::repr::to_repr_limited(&doc, 3000), None);
}

/// Equal sets give the same typed JSON whatever the pickle shared: a tuple met twice in an
/// item is written twice in its sort key (a ref to it sorted before any tuple, so
/// `{((1,), (1,)), ((1,), (0,))}` came out in one order when the inner `(1,)` was one
/// object and in the other when it was two).
#[test]
fn set_order_does_not_depend_on_shared_tuples() {
    // pickle.dumps(s, 4) of the two sets, shared: t = (1,); {(t, t), ((1,), (0,))}.
    let shared = b"\x80\x04\x95\x17\x00\x00\x00\x00\x00\x00\x00\x8f\x94(K\x01\x85\x94h\x01\x86\x94K\x01\x85\x94K\x00\x85\x94\x86\x94\x90.";
    let unshared = b"\x80\x04\x95\x19\x00\x00\x00\x00\x00\x00\x00\x8f\x94(K\x01\x85\x94K\x01\x85\x94\x86\x94K\x01\x85\x94K\x00\x85\x94\x86\x94\x90.";
    let json = |p: &[u8]| to_typed_json(&crate::decode(p, &crate::Policy::data()).unwrap());
    let one = "{\"type\":\"tuple\",\"items\":[{\"type\":\"int\",\"value\":\"1\"}]}";
    let zero = "{\"type\":\"tuple\",\"items\":[{\"type\":\"int\",\"value\":\"0\"}]}";
    let first = format!("{{\"type\":\"tuple\",\"items\":[{one},{zero}]}}");
    for p in [&shared[..], &unshared[..]] {
        let text = json(p);
        let items = text.split_once("\"items\":[").unwrap().1;
        assert!(items.starts_with(&first), "{text}");
    }
}

#[test]
/// A set's items are ordered by the first bytes of their texts: 1024 of them for a set of
/// up to 16,384 items, fewer for a larger set (ties in arena order), all of it for an item
/// that is one text; texts inside an item are written only as far as the key needs them.
fn set_order_compares_key_prefixes() {
    // A frozenset of `n` tuples of one text each, added in reverse of their sorted order:
    // 900 'x', then the index (so the keys differ at byte 957), then 200 'y'.
    let order = |n: usize| {
        let mut p = b"\x80\x04(".to_vec();
        for i in (0..n).rev() {
            let t = format!("{}{i:06}{}", "x".repeat(900), "y".repeat(200));
            p.push(b'X');
            p.extend_from_slice(&(t.len() as u32).to_le_bytes());
            p.extend_from_slice(t.as_bytes());
            p.push(0x85);
        }
        p.extend_from_slice(b"\x91.");
        let doc = crate::decode(&p, &crate::Policy::strict()).unwrap();
        let Some(Value::FrozenSet(s)) = doc.root().and_then(|r| doc.get(r)) else {
            panic!("not a frozenset");
        };
        let orders = SetOrders::of(&doc.arena, &doc.roots);
        let sorted = orders.items(doc.root().unwrap()).unwrap().to_vec();
        (s.to_vec(), sorted)
    };
    // 3 items: 1024-byte keys see the index, so the order is the texts' (reversed).
    let (added, sorted) = order(3);
    assert_eq!(sorted, added.iter().rev().copied().collect::<Vec<_>>());
    // 20,000 items: keys of 16 MiB / 20,000 = 838 bytes all tie: arena order.
    assert_eq!(sort_key_bytes(20_000), 838);
    let (added, sorted) = order(20_000);
    assert_eq!(sorted, added);
    assert_eq!(sort_key_bytes(1 << 30), SORT_KEY_MIN_BYTES);
    assert_eq!(sort_key_bytes(1), SORT_KEY_BYTES);
    // Items that are one text and agree on their first 1024 bytes of JSON are ordered by
    // length, then by the FNV-1a hash of their content, whatever order they were added
    // in (whole-text keys would cost sets x text length when many sets share one long
    // text).
    let texts_order = |texts: &[String]| -> Vec<String> {
        let mut p = b"\x80\x04(".to_vec();
        for t in texts {
            p.push(b'X');
            p.extend_from_slice(&(t.len() as u32).to_le_bytes());
            p.extend_from_slice(t.as_bytes());
        }
        p.extend_from_slice(b"\x91.");
        let doc = crate::decode(&p, &crate::Policy::strict()).unwrap();
        let root = doc.root().unwrap();
        SetOrders::of(&doc.arena, &doc.roots)
            .items(root)
            .unwrap()
            .iter()
            .map(|&id| match doc.get(id) {
                Some(Value::Str(s)) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    let long = "a".repeat(1011) + "b" + &"c".repeat(5);
    let short = "a".repeat(1012);
    let (x, y) = ("a".repeat(1011) + "x", "a".repeat(1011) + "y");
    for texts in [
        vec![long.clone(), short.clone(), x.clone(), y.clone()],
        vec![y.clone(), x.clone(), short.clone(), long.clone()],
        vec![x.clone(), long.clone(), y.clone(), short.clone()],
    ] {
        let got = texts_order(&texts);
        // The three of 1012 characters first (by hash, in one fixed order), then `long`.
        assert_eq!(got.last(), Some(&long));
        assert_eq!(
            got,
            texts_order(&[short.clone(), x.clone(), y.clone(), long.clone()])
        );
    }
    let fnv = |t: &str| {
        t.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    let mut by_hash = vec![short.clone(), x.clone(), y.clone()];
    by_hash.sort_by_key(|t| fnv(t));
    assert_eq!(&texts_order(&[x, y, short, long])[..3], by_hash.as_slice());
    assert_eq!(text_prefix("ab\u{e9}c", 3), "ab\u{e9}");
    assert_eq!(text_prefix("ab", 3), "ab");
}

#[test]
fn set_sort_keys_are_cut_at_a_char_boundary() {
    // {'\u{e9}' * 2000}: the item's text passes the 1024-byte sort-key cut inside a
    // two-byte character (found by the mitogen_frames fuzzer).
    let text = "\u{e9}".repeat(2000);
    let mut p = b"\x80\x04\x8f(X".to_vec();
    p.extend_from_slice(&(text.len() as u32).to_le_bytes());
    p.extend_from_slice(text.as_bytes());
    p.extend_from_slice(b"\x90.");
    let policy = crate::Policy::strict();
    let doc = crate::decode(&p, &policy).unwrap();
    let json = to_typed_json(&doc);
    assert!(json.contains(&text));
}

#[test]
fn json_strings_escape() {
    let mut s = String::new();
    write_json_string(&mut s, "a\"b\\c\n\u{1}é");
    assert_eq!(s, "\"a\\\"b\\\\c\\n\\u0001é\"");
}
