//! The copies charged to `max_copy_bytes_per_byte` (src/build/copies.rs): for each charge, a
//! pickle whose total is known is refused with the limit one below the ratio it needs and
//! accepted at that ratio, so that every byte counted is the one documented.

use crate::policy::{Constructor, Cost, GlobalRule};
use crate::{Decoder, ErrorKind, LimitName, Limits, Policy};

/// A protocol-2 pickle: `head`, then `body` `calls` times, then `tail`.
fn repeat(head: &[u8], body: &[u8], calls: usize, tail: &[u8]) -> Vec<u8> {
    let mut p = b"\x80\x02".to_vec();
    p.extend_from_slice(head);
    for _ in 0..calls {
        p.extend_from_slice(body);
    }
    p.extend_from_slice(tail);
    p
}

/// BINUNICODE of `text`.
fn text(t: &[u8]) -> Vec<u8> {
    let mut p = b"X".to_vec();
    p.extend_from_slice(&(t.len() as u32).to_le_bytes());
    p.extend_from_slice(t);
    p
}

/// What `max_copy_bytes_per_byte` must be for `pickle` to be accepted when it copies
/// `copied` bytes (more than the floor): the ratio rounded up.
fn ratio(pickle: &[u8], copied: u64) -> u64 {
    assert!(copied > crate::limits::COPY_BYTES_FLOOR, "{copied}");
    copied.div_ceil(pickle.len() as u64)
}

/// Refused by `max_copy_bytes_per_byte` at `ratio - 1`, accepted at `ratio` and `ratio + 1`;
/// with every other limit lifted where it would stop the pickle first.
fn edge(pickle: &[u8], policy: &Policy, copied: u64) {
    let need = ratio(pickle, copied);
    let mut limits = Limits {
        max_key_steps_per_byte: 1 << 20,
        ..policy.limits
    };
    for (r, ok) in [(need - 1, false), (need, true), (need + 1, true)] {
        limits.max_copy_bytes_per_byte = r;
        let got = Decoder::new(pickle, policy).limits(limits).decode();
        match (got, ok) {
            (Ok(_), true) => {}
            (Err(e), false) => assert!(
                matches!(
                    e.kind(),
                    ErrorKind::LimitExceeded {
                        limit: LimitName::MaxCopyBytesPerByte,
                        ..
                    }
                ),
                "limit {r}: {e}"
            ),
            (got, _) => panic!("limit {r} (needs {need}): {:?}", got.err()),
        }
    }
}

/// `bytearray(b)` of one memoized bytes object, again and again: its length each time.
#[test]
fn bytearray_of_one_bytes_object_is_charged_at_every_call() {
    let b = vec![b'x'; 100_000];
    // Protocol 3: BINBYTES holds the bytes.
    let mut p = b"\x80\x03cbuiltins\nbytearray\nq\x000B".to_vec();
    p.extend_from_slice(&(b.len() as u32).to_le_bytes());
    p.extend_from_slice(&b);
    p.extend_from_slice(b"q\x010(");
    for _ in 0..30 {
        p.extend_from_slice(b"h\x00h\x01\x85R");
    }
    p.extend_from_slice(b"l.");
    let policy = Policy::builder()
        .allow("builtins", "bytearray", Constructor::ByteArray)
        .build()
        .unwrap();
    edge(&p, &policy, 30 * 100_000);
}

/// `_codecs.encode(t, 'latin1')` of one memoized text: the bytes' length each time, though
/// picklewarden borrows the text (CPython makes a new bytes object at every call).
#[test]
fn latin1_bytes_of_one_text_are_charged_at_every_call() {
    let mut head = b"c_codecs\nencode\nq\x000".to_vec();
    head.extend_from_slice(&text(&vec![b'a'; 50_000]));
    head.extend_from_slice(b"q\x010");
    head.extend_from_slice(&text(b"latin1"));
    head.extend_from_slice(b"q\x020(");
    let p = repeat(&head, b"h\x00h\x01h\x02\x86R", 40, b"l.");
    edge(&p, &Policy::data(), 40 * 50_000);
}

/// `set(l)` of one memoized list: 32 bytes an item at every call.
#[test]
fn set_of_one_list_is_charged_at_every_call() {
    let mut head = b"c__builtin__\nset\nq\x000](".to_vec();
    for i in 0..1000u32 {
        head.push(b'J');
        head.extend_from_slice(&(i * 7).to_le_bytes());
    }
    head.extend_from_slice(b"eq\x010(");
    let p = repeat(&head, b"h\x00h\x01\x85R", 10, b"l.");
    edge(&p, &Policy::data(), 10 * 1000 * 32);
}

/// A policy with one record `m.C` of these costs.
fn record(call: Cost, build: Cost) -> Policy {
    Policy::builder()
        .name("costs")
        .allow_rule(GlobalRule::new("m", "C", Constructor::Record).cost(call, build))
        .build()
        .unwrap()
}

/// `head` memoizes `m.C` as 0 and the argument as 1; each call is `C(arg)`.
fn calls(arg: &[u8], n: usize) -> Vec<u8> {
    let mut head = b"cm\nC\nq\x000".to_vec();
    head.extend_from_slice(arg);
    head.extend_from_slice(b"q\x010(");
    repeat(&head, b"h\x00h\x01\x85R", n, b"l.")
}

/// A text argument: its length under `copies` and `walks`; nothing under `keeps`.
#[test]
fn a_record_call_is_charged_as_its_cost_says() {
    let arg = text(&vec![b'q'; 10_000]);
    let p = calls(&arg, 20);
    edge(&p, &record(Cost::Copies, Cost::Keeps), 20 * 10_000);
    edge(&p, &record(Cost::Walks, Cost::Keeps), 20 * 10_000);
    // `keeps`: accepted however low the limit (the floor alone).
    let policy = record(Cost::Keeps, Cost::Keeps);
    let mut limits = policy.limits;
    limits.max_copy_bytes_per_byte = 0;
    assert!(Decoder::new(&p, &policy).limits(limits).decode().is_ok());
}

/// A list of 2,000 ints: 8 bytes an item copied, 32 inserted (`inserts_items`), and a dict of
/// 2,000 pairs 32 bytes a pair under `copies` and `inserts_pairs`.
#[test]
fn sequences_and_dicts_are_charged_by_items() {
    let mut list = b"](".to_vec();
    let mut dict = b"}(".to_vec();
    for i in 0..2000u32 {
        list.push(b'J');
        list.extend_from_slice(&i.to_le_bytes());
        dict.push(b'J');
        dict.extend_from_slice(&i.to_le_bytes());
        dict.push(b'N');
    }
    list.push(b'e');
    dict.push(b'u');
    let p = calls(&list, 20);
    edge(&p, &record(Cost::Copies, Cost::Keeps), 20 * 2000 * 8);
    edge(&p, &record(Cost::InsertsItems, Cost::Keeps), 20 * 2000 * 32);
    let p = calls(&dict, 20);
    edge(&p, &record(Cost::Copies, Cost::Keeps), 20 * 2000 * 32);
    edge(&p, &record(Cost::InsertsPairs, Cost::Keeps), 20 * 2000 * 32);
    edge(&p, &record(Cost::InsertsItems, Cost::Keeps), 20 * 2000 * 32);
}

/// `walks` counts everything plain its argument reaches once per call, a value reached twice
/// once: a tuple of the same 1,000-byte text 50 times, and a list of 100 ints, in a list.
#[test]
fn walks_count_what_the_argument_reaches_once_each() {
    let mut arg = b"](".to_vec();
    arg.extend_from_slice(&text(&vec![b'z'; 1000]));
    arg.extend_from_slice(b"q\x02(");
    for _ in 0..50 {
        arg.extend_from_slice(b"h\x02");
    }
    arg.extend_from_slice(b"t](");
    for i in 0..100u8 {
        arg.extend_from_slice(&[b'K', i]);
    }
    arg.extend_from_slice(b"ee");
    // The outer list's 3 items (the text, the tuple, the inner list), the tuple's 50, the
    // inner list's 100, at 8 bytes each, and the text once.
    let per_call = (3 + 50 + 100) * 8 + 1000;
    let p = calls(&arg, 100);
    edge(&p, &record(Cost::Walks, Cost::Keeps), 100 * per_call);
}

/// BUILD: a state dict of 3,000 pairs given to 30 objects through the memo, 32 bytes a pair
/// each time under `sets_attributes`; `keeps` charges nothing.
#[test]
fn build_state_is_charged_at_every_build() {
    let mut head = b"cm\nC\nq\x000}q\x01(".to_vec();
    for i in 0..3000u32 {
        head.extend_from_slice(&text(format!("k{i}").as_bytes()));
        head.push(b'N');
    }
    head.extend_from_slice(b"u0(");
    let p = repeat(&head, b"h\x00)Rh\x01b", 30, b"l.");
    edge(
        &p,
        &record(Cost::Keeps, Cost::SetsAttributes),
        30 * 3000 * 32,
    );
    edge(
        &p,
        &record(Cost::Keeps, Cost::Walks),
        30 * (3000 * 32 + 3000 * 5 - 1110),
    );
    let policy = record(Cost::Keeps, Cost::Keeps);
    let mut limits = policy.limits;
    limits.max_copy_bytes_per_byte = 0;
    assert!(Decoder::new(&p, &policy).limits(limits).decode().is_ok());
}

/// A BUILD state whose int keys collide in CPython's hash, given again and again: the model
/// of the reader's key work counts the keys' insertion at every BUILD (refused by
/// `max_key_collisions` at the first, as the dict itself is), and a copy of a dict with
/// colliding keys inserts them again.
#[test]
fn colliding_keys_are_modelled_again_at_every_copy() {
    let m = (1u128 << 61) - 1;
    let mut keys = b"}q\x01(".to_vec();
    for k in 1..=20u128 {
        let v = k * m;
        let bytes = v.to_le_bytes();
        keys.extend_from_slice(&[b'\x8a', 9]);
        keys.extend_from_slice(bytes.get(..9).unwrap());
        keys.push(b'N');
    }
    keys.push(b'u');
    // 20 keys of one hash: accepted once (under the 32 of `max_key_collisions`); 20 copies of
    // the dict cost 20 x 190 comparisons of the model's steps.
    let mut head = b"cm\nC\nq\x000".to_vec();
    head.extend_from_slice(&keys);
    head.extend_from_slice(b"0(");
    let p = repeat(&head, b"h\x00h\x01\x85R", 20, b"l.");
    let policy = record(Cost::Copies, Cost::Keeps);
    let mut limits = policy.limits;
    limits.max_copy_bytes_per_byte = 1 << 20;
    // The allowance is the larger of the two: 1,000 steps.
    limits.max_key_steps = 1000;
    limits.max_key_steps_per_byte = 1;
    let e = Decoder::new(&p, &policy)
        .limits(limits)
        .decode()
        .unwrap_err();
    assert!(
        matches!(
            e.kind(),
            ErrorKind::LimitExceeded {
                limit: LimitName::MaxKeyStepsPerByte,
                ..
            }
        ),
        "{e}"
    );
    limits.max_key_steps_per_byte = 1000;
    assert!(Decoder::new(&p, &policy).limits(limits).decode().is_ok());
    // With `keeps` the copies are not modelled: accepted at one step a byte.
    let policy = record(Cost::Keeps, Cost::Keeps);
    limits.max_key_steps_per_byte = 1;
    assert!(Decoder::new(&p, &policy).limits(limits).decode().is_ok());
}
