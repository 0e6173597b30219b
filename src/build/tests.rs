use super::budget::NODE_BYTES;
use super::*;
use crate::error::ErrorKind;
use crate::value::{NodeId, Value};

fn kind(input: &[u8]) -> &'static str {
    match decode(input, &Policy::data()) {
        Ok(_) => "ok",
        Err(e) => e.kind().name(),
    }
}

/// Texts are validated by the one pass that builds them: valid UTF-8 is borrowed from
/// the input, text with a lone surrogate is kept as its `surrogatepass` bytes, and
/// invalid UTF-8 is refused, in any interleaving and at any length.
#[test]
fn texts_are_validated_and_borrowed_by_the_build() {
    let long_ascii = "a".repeat(64);
    let long_utf8 = "\u{e9}\u{20ac}".repeat(64);
    let mut surrogates = b"x".repeat(64);
    surrogates.extend_from_slice(b"\xed\xa0\x80");
    let texts: [&[u8]; 6] = [
        long_ascii.as_bytes(),
        b"short",
        &surrogates,
        long_utf8.as_bytes(),
        &surrogates,
        long_ascii.as_bytes(),
    ];
    // [text, ...] at protocol 4: EMPTY_LIST MARK (BINUNICODE text)* APPENDS STOP.
    let list = |texts: &[&[u8]]| {
        let mut p = b"\x80\x04](".to_vec();
        for t in texts {
            p.push(b'X');
            p.extend_from_slice(&(t.len() as u32).to_le_bytes());
            p.extend_from_slice(t);
        }
        p.extend_from_slice(b"e.");
        p
    };
    let p = list(&texts);
    let policy = Policy::data();
    let doc = decode(&p, &policy).unwrap();
    let Some(Value::List(items)) = doc.root().and_then(|r| doc.get(r)) else {
        panic!("not a list");
    };
    let got: Vec<&[u8]> = items
        .iter()
        .map(|&id| match doc.get(id) {
            Some(Value::Str(s)) => s.as_bytes(),
            other => panic!("not a str: {other:?}"),
        })
        .collect();
    assert_eq!(got, texts);
    assert!(matches!(
        doc.get(items[2]),
        Some(Value::Str(s)) if s.has_surrogates()
    ));
    // Valid text is the input's own bytes, borrowed.
    assert!(matches!(
        doc.get(items[3]),
        Some(Value::Str(s)) if s.as_str().is_some() && s.as_bytes().as_ptr() > p.as_ptr()
    ));
    // A lone continuation byte, short or long, is refused at its opcode.
    for bad in [&b"\x80"[..], &[b"a".repeat(100), b"\xc3".to_vec()].concat()] {
        let p = list(&[b"ok", bad]);
        let e = decode(&p, &policy).unwrap_err();
        assert_eq!((e.kind().name(), e.offset()), ("invalid_utf8", 11));
    }
}

/// BININT1/BININT2/BININT through `run`'s branch-free path: unsigned 1 and 2 bytes, signed
/// 4 bytes, with four bytes left after the opcode and with fewer (the last opcode before
/// STOP), and a BININT cut short by the end of a FRAME (pickle.dumps gives the values).
#[test]
fn binint_opcodes_read_their_width_and_sign() {
    let ints = |input: &[u8]| -> Vec<i64> {
        let doc = decode(input, &Policy::data()).unwrap();
        let root = doc.get(doc.root().unwrap()).unwrap();
        let items: Vec<NodeId> = match root {
            Value::List(items) => items.to_vec(),
            Value::Int(v) => return vec![v],
            other => panic!("{other:?}"),
        };
        items
            .iter()
            .map(|&id| match doc.get(id) {
                Some(Value::Int(v)) => v,
                other => panic!("{other:?}"),
            })
            .collect()
    };
    // pickle.dumps([255, 65535, -1, -2**31, 2**31 - 1, 0, 256], 2)
    let list = b"\x80\x02]q\x00(K\xffM\xff\xffJ\xff\xff\xff\xffJ\x00\x00\x00\x80J\xff\xff\xff\x7fK\x00M\x00\x01e.";
    assert_eq!(
        ints(list),
        [255, 65535, -1, -(1 << 31), (1 << 31) - 1, 0, 256]
    );
    // pickle.dumps(255, 2), pickle.dumps(65535, 2), pickle.dumps(-2, 2): under 4 bytes left.
    assert_eq!(ints(b"\x80\x02K\xff."), [255]);
    assert_eq!(ints(b"\x80\x02M\xff\xff."), [65535]);
    assert_eq!(ints(b"\x80\x02J\xfe\xff\xff\xff."), [-2]);
    // A FRAME of 3 bytes holding `J` and 2 of its 4 bytes: the argument straddles the frame.
    let straddle = b"\x80\x04\x95\x03\x00\x00\x00\x00\x00\x00\x00J\x01\x00\x00\x00.";
    assert_eq!(kind(straddle), "frame_straddle");
    assert_eq!(kind(b"\x80\x02M\x01"), "truncated");
}

/// In a stream, the depth is checked once over every root on the final graph: a later
/// pickle reaching an earlier one's list through the memo has that list's depth under its
/// own root too, and what it appended to it is not hidden.
#[test]
fn stream_depth_is_checked_on_the_final_graph_over_all_roots() {
    let at3 = |input: &[u8]| {
        let limits = Limits {
            max_nesting_depth: 3,
            ..Policy::data().limits
        };
        Decoder::new(input, &Policy::data())
            .limits(limits)
            .decode_stream()
            .map(|d| d.roots().len())
            .map_err(|e| e.to_string())
    };
    // l = [[1000, 1001]] (memo 0), depth 3, then [l]: depth 4 (typed JSON writes l as a
    // ref there, 2 deep); [1002] instead is 2 deep.
    let reach = b"\x80\x02]q\x00](J\xe8\x03\x00\x00J\xe9\x03\x00\x00ea.\x80\x02]h\x00a.";
    let err = at3(reach).unwrap_err();
    assert!(
        err.contains("nesting depth 4 is over max_nesting_depth 3"),
        "{err}"
    );
    let apart =
        b"\x80\x02]q\x00](J\xe8\x03\x00\x00J\xe9\x03\x00\x00ea.\x80\x02]J\xea\x03\x00\x00a.";
    assert_eq!(at3(apart), Ok(2));
    // l = [[], [], []] (memo 0, depth 2), then the second pickle appends [[[1004]]] to l
    // and returns l: the first root is now 5 deep (refused where the walk first passes 3).
    let deepen = b"\x80\x02]q\x00(]]]e.\x80\x02h\x00]]]J\xec\x03\x00\x00aaaa.";
    let err = at3(deepen).unwrap_err();
    assert!(
        err.contains("nesting depth 4 is over max_nesting_depth 3"),
        "{err}"
    );
}

/// A limit reached in the middle of a run of ints (`int_run` in the build, `scalar_run` in
/// the scan) is refused as the general path refuses it: same limit, count and offset.
#[test]
fn limits_inside_a_run_of_ints_refuse_at_the_opcode_that_passes_them() {
    // [1000, ..., 1099] at protocol 2: `]` at 2, MARK at 3, the i-th BININT at 4 + 5i.
    let mut input = b"\x80\x02](".to_vec();
    for i in 1000i32..1100 {
        input.push(b'J');
        input.extend_from_slice(&i.to_le_bytes());
    }
    input.extend_from_slice(b"e.");
    let refusal = |limits: Limits| -> (String, u64, u64) {
        let e = Decoder::new(&input, &Policy::data())
            .limits(limits)
            .decode()
            .unwrap_err();
        match e.kind() {
            ErrorKind::LimitExceeded { limit, seen, .. } => {
                (limit.name().to_string(), *seen, e.offset())
            }
            other => panic!("{other:?}"),
        }
    };
    let base = Policy::data().limits;
    // The list is value 1, the i-th int value i + 2: the 51st value is int 49.
    let nodes = Limits {
        max_nodes: 50,
        ..base
    };
    assert_eq!(refusal(nodes), ("max_nodes".into(), 51, 4 + 5 * 49));
    // PROTO, EMPTY_LIST and MARK are opcodes 1-3: the 51st opcode is int 47.
    let ops = Limits {
        max_opcodes: 50,
        ..base
    };
    assert_eq!(refusal(ops), ("max_opcodes".into(), 51, 4 + 5 * 47));
    // The list and the MARK hold 2 of the 50 slots: int 48 would be the 51st.
    let stack = Limits {
        max_stack_len: 50,
        ..base
    };
    assert_eq!(refusal(stack), ("max_stack_len".into(), 51, 4 + 5 * 48));
    // Each value is charged its slot: the list and 50 ints fit, int 50 does not.
    let slot = NODE_BYTES;
    let alloc = Limits {
        max_alloc_bytes: slot * 51,
        ..base
    };
    assert_eq!(
        refusal(alloc),
        ("max_alloc_bytes".into(), slot * 52, 4 + 5 * 50)
    );
    // With room for all of them, the ints are read in full and in order.
    let doc = Decoder::new(&input, &Policy::data()).decode().unwrap();
    let Some(Value::List(items)) = doc.root().and_then(|r| doc.get(r)) else {
        panic!("not a list");
    };
    let got: Vec<i64> = items
        .iter()
        .filter_map(|&id| match doc.get(id) {
            Some(Value::Int(v)) => Some(v),
            _ => None,
        })
        .collect();
    assert_eq!(got, (1000..1100).collect::<Vec<i64>>());
}

/// A schema's `max_len` counts code points in a text with lone surrogates too (it counted
/// its `surrogatepass` UTF-8 bytes: a review helper's real Mitogen CallError naming a
/// `surrogateescape` file, 4,024 code points, was refused as 12,024 over 9,999).
#[test]
fn max_len_counts_code_points_of_text_with_surrogates() {
    let policy = Policy::from_toml_str(
        "name = \"t\"\n[[global]]\nmodule = \"m\"\nname = \"E\"\nconstructor = \"record\"\n\
         forms = [\"reduce\"]\nargs = [{ type = \"str\", max_len = 5 }]\n",
    )
    .unwrap();
    // m.E('\udcff' * n) at protocol 2: BINUNICODE of n times ED B3 BF.
    let call = |n: usize| {
        let mut p = b"\x80\x02cm\nE\nX".to_vec();
        p.extend_from_slice(&(3 * n as u32).to_le_bytes());
        for _ in 0..n {
            p.extend_from_slice(b"\xed\xb3\xbf");
        }
        p.extend_from_slice(b"\x85R.");
        Decoder::new(&p, &policy).decode().map(|_| ())
    };
    call(5).unwrap();
    let e = call(6).unwrap_err();
    assert!(e.to_string().contains("length at least 6 over 5"), "{e}");
}

/// A deadline stops the scan and the build within `DEADLINE_EVERY` opcodes, and an
/// equality walk within 256 pairs (A48: the service answered 503 at its deadline while the
/// decode ran on, holding its slot).
#[test]
fn a_deadline_stops_either_pass_and_a_long_walk() {
    // NONE POP 100,000 times, then NONE STOP: opcode k (from 1) is at offset k.
    let mut p = b"\x80\x04".to_vec();
    for _ in 0..100_000 {
        p.extend_from_slice(b"N0");
    }
    p.extend_from_slice(b"N.");
    let policy = Policy::data();
    let e = Decoder::new(&p, &policy)
        .deadline(Instant::now())
        .decode()
        .unwrap_err();
    assert_eq!(e.kind().name(), "deadline_exceeded", "{e}");
    assert_eq!(e.offset(), crate::clock::CHECK_EVERY, "{e}");
    let later = Instant::now() + std::time::Duration::from_secs(600);
    Decoder::new(&p, &policy).deadline(later).decode().unwrap();
    // Under 65,536 opcodes, but its last ADDITEMS compares two tuple DAGs pair by pair
    // (with the model of CPython's key work lifted: it refuses those keys at once).
    let dag = include_bytes!("../../audit/vectors/a46-two-tuple-dags-that-share-differently.pkl");
    let own = Limits {
        max_key_steps: u64::MAX,
        max_key_steps_per_byte: u64::MAX,
        max_key_collisions: u64::MAX,
        ..policy.limits
    };
    let e = Decoder::new(dag, &policy)
        .limits(own)
        .deadline(Instant::now())
        .decode()
        .unwrap_err();
    assert_eq!(e.kind().name(), "deadline_exceeded", "{e}");
    assert_eq!(e.opcode(), Some(0x90), "{e}");
    Decoder::new(dag, &policy)
        .limits(own)
        .deadline(later)
        .decode()
        .unwrap();
    let e = Decoder::new(dag, &policy).decode().unwrap_err();
    assert_eq!(e.kind().name(), "limit_exceeded", "{e}");
    // Under 65,536 opcodes, but one FROZENSET of 10,000 keys (distinct ints): stopped
    // within KEYS_CHECK keys, at the FROZENSET.
    let mut p = b"\x80\x04(".to_vec();
    for i in 0..10_000u32 {
        p.push(b'J');
        p.extend_from_slice(&(i + 1_000_000).to_le_bytes());
    }
    p.extend_from_slice(b"\x91.");
    let e = Decoder::new(&p, &policy)
        .deadline(Instant::now())
        .decode()
        .unwrap_err();
    assert_eq!(e.kind().name(), "deadline_exceeded", "{e}");
    assert_eq!(e.opcode_name(), Some("FROZENSET"), "{e}");
    Decoder::new(&p, &policy).deadline(later).decode().unwrap();
}

/// `_codecs.encode` of ASCII text borrows the text but is charged its length, as CPython
/// allocates it for every call: one memoized text encoded again and again reaches
/// `max_alloc_bytes` (at the REDUCE that passes it), where each call was free before.
#[test]
fn latin1_of_ascii_text_is_charged_every_time() {
    let text = vec![b'a'; 1 << 20];
    let pickle = |calls: usize| {
        let mut p = b"\x80\x02c_codecs\nencode\nq\x000X".to_vec();
        p.extend_from_slice(&(text.len() as u32).to_le_bytes());
        p.extend_from_slice(&text);
        p.extend_from_slice(b"q\x010X\x06\x00\x00\x00latin1q\x020");
        for _ in 0..calls {
            p.extend_from_slice(b"h\x00h\x01h\x02\x86R0");
        }
        p.extend_from_slice(b"N.");
        p
    };
    let policy = Policy::data();
    let mut limits = policy.limits;
    limits.max_alloc_bytes = 64 << 20;
    // The copies are `max_copy_bytes_per_byte`'s too (src/build/copies_test.rs); lifted here.
    limits.max_copy_bytes_per_byte = 1 << 20;
    // 48 calls are 48 MiB of charges (with the text's own node): accepted.
    let accepted = pickle(48);
    let doc = Decoder::new(&accepted, &policy)
        .limits(limits)
        .decode()
        .unwrap();
    let borrowed = doc
        .nodes()
        .filter(|v| matches!(v, Value::Bytes(b) if b.len() == 1 << 20 && b.as_slice().is_some()))
        .count();
    assert_eq!(borrowed, 48);
    // 80 calls pass 64 MiB at a REDUCE.
    let e = Decoder::new(&pickle(80), &policy)
        .limits(limits)
        .decode()
        .unwrap_err();
    assert_eq!(e.kind().name(), "limit_exceeded", "{e}");
    assert!(e.to_string().contains("max_alloc_bytes"), "{e}");
    assert_eq!(e.opcode_name(), Some("REDUCE"), "{e}");
}

/// A list or dict that a record's argument schema checked cannot change after the call
/// (else `Kwargs(d)` checked `d`'s keys and a later SETITEM through the memo gave it an
/// int key; A46): APPEND, APPENDS, SETITEM and SETITEMS on it are refused at their
/// opcode. The same values built before the call are accepted, and a dict passed again
/// is accepted without its keys being walked again.
#[test]
fn what_an_argument_schema_checked_cannot_change_after_the_call() {
    let policy = Policy::from_toml_str(
        "name = \"t\"\n[[global]]\nmodule = \"m\"\nname = \"K\"\nconstructor = \"record\"\n\
         forms = [\"reduce\"]\nargs = [{ type = \"dict\", keys = \"str\" }]\n\
         [[global]]\nmodule = \"m\"\nname = \"L\"\nconstructor = \"record\"\n\
         forms = [\"reduce\"]\nargs = [{ type = \"list\", max_len = 1 }]\n",
    )
    .unwrap();
    let run = |p: &[u8]| Decoder::new(p, &policy).decode().map(|_| ());
    // [K(d), K(d)] with d = {'a': 1} (memo 1, K in memo 0), built before the calls.
    let ok = b"\x80\x02cm\nK\nq\x000}q\x01X\x01\x00\x00\x00aK\x01s0]q\x02(h\x00h\x01\x85Rh\x00h\x01\x85Re.";
    run(ok).unwrap();
    // K(d), then d[5] = 6 through the memo: refused at the SETITEM (offset 40).
    let setitem = b"\x80\x02cm\nK\nq\x000}q\x01X\x01\x00\x00\x00aK\x01s0]q\x02(h\x00h\x01\x85Reh\x01K\x05K\x06s0.";
    let e = run(setitem).unwrap_err();
    assert_eq!(e.kind().name(), "constructor_rejected", "{e}");
    assert!(e.to_string().contains("m.K: a list or dict"), "{e}");
    assert_eq!((e.offset(), e.opcode()), (40, Some(b's')), "{e}");
    // L(l) with l = [1], then l.append(2) through the memo (which would pass max_len 1).
    let append = b"\x80\x02cm\nL\nq\x000]q\x01K\x01a0]q\x02(h\x00h\x01\x85Reh\x01K\x02a0.";
    let e = run(append).unwrap_err();
    assert_eq!(e.kind().name(), "constructor_rejected", "{e}");
    assert_eq!((e.offset(), e.opcode()), (32, Some(b'a')), "{e}");
    // The same append before the call is over max_len at the call.
    let before = b"\x80\x02cm\nL\nq\x000]q\x01(K\x01K\x02e0]q\x02(h\x00h\x01\x85Re.";
    let e = run(before).unwrap_err();
    assert!(e.to_string().contains("length 2 over 1"), "{e}");
}

/// LONG1 inside a run of ints: read by the run when `max_long_bytes` admits 8 bytes, else
/// by the general path, which refuses a payload over the limit at its opcode.
#[test]
fn long1_inside_a_run_of_ints() {
    // pickle.loads gives [1000, 2**40, -2**63, 2**63, 0, -1]: made by hand so that the
    // run holds BININT 1000, LONG1 of 6, 8, 9 (2**63 needs a sign byte) and 0 bytes (which
    // pickle.dumps writes only for larger ints and as BININT1), and BININT -1.
    // Offsets: MARK 3, BININT 4, LONG1 9, 17, 27 and 38, BININT 40.
    let input = b"\x80\x02](J\xe8\x03\x00\x00\x8a\x06\x00\x00\x00\x00\x00\x01\
\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00\
\x8a\x00J\xff\xff\xff\xffe.";
    let doc = Decoder::new(input, &Policy::data()).decode().unwrap();
    let Some(Value::List(items)) = doc.root().and_then(|r| doc.get(r)) else {
        panic!("not a list");
    };
    let got: Vec<String> = items
        .iter()
        .map(|&id| match doc.get(id) {
            Some(Value::Int(v)) => v.to_string(),
            Some(Value::BigInt(b)) => b.to_string(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        got,
        [
            "1000",
            "1099511627776",
            "-9223372036854775808",
            "9223372036854775808",
            "0",
            "-1"
        ]
    );
    // 0 is the shared int, 2**40 an arena node.
    assert!(items.get(4).is_some_and(|id| id.is_shared()));
    assert!(items.get(1).is_some_and(|id| !id.is_shared()));
    // max_long_bytes 6: the 6-byte LONG1 is read, the 8-byte one refused at offset 17.
    let limits = Limits {
        max_long_bytes: 6,
        ..Policy::data().limits
    };
    let e = Decoder::new(input, &Policy::data())
        .limits(limits)
        .decode()
        .unwrap_err();
    assert_eq!(e.offset(), 17, "{e}");
    assert!(
        e.to_string()
            .contains("LONG1/LONG4 length 8 is over max_long_bytes 6"),
        "{e}"
    );
}

/// None, True, False and the ints of 31 bits (-2**30 to 2**30 - 1) are shared: they get
/// ids of their own and no arena node, equal values are one id (CPython: `l[11] is l[12]`,
/// and `l[4] is not l[5]` for 256 written twice, which no output can tell), and the other
/// ints are arena nodes.
#[test]
fn small_ints_and_singletons_are_shared_as_cpython_shares_them() {
    // pickle.dumps([None, True, False, -5, 256, 257, -2**30, 2**30-1, 2**30, -2**30-1,
    // 2**40, 5, 5], 2)
    let input = b"\x80\x02]q\x00(N\x88\x89J\xfb\xff\xff\xffM\x00\x01M\x01\x01J\x00\x00\x00\xc0J\xff\xff\xff?J\x00\x00\x00@J\xff\xff\xff\xbf\x8a\x06\x00\x00\x00\x00\x00\x01K\x05K\x05e.";
    let doc = decode(input, &Policy::data()).unwrap();
    let root = doc.root().unwrap();
    let Some(Value::List(items)) = doc.get(root) else {
        panic!("not a list");
    };
    let shared: Vec<bool> = items.iter().map(|id| id.is_shared()).collect();
    assert_eq!(
        shared,
        [true, true, true, true, true, true, true, true, false, false, false, true, true]
    );
    assert_eq!(items[11], items[12]);
    // The list, 2**30, -2**30 - 1 and 2**40.
    assert_eq!(doc.len(), 4);
    let shown: Vec<String> = items
        .iter()
        .map(|&id| match doc.get(id) {
            Some(Value::None) => "None".to_owned(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Int(i)) => i.to_string(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        shown,
        [
            "None",
            "true",
            "false",
            "-5",
            "256",
            "257",
            "-1073741824",
            "1073741823",
            "1073741824",
            "-1073741825",
            "1099511627776",
            "5",
            "5"
        ]
    );
    // Scalars are written in full where they occur, never as refs.
    let json = crate::json::to_typed_json(&doc);
    assert!(!json.contains("\"ref\""), "{json}");
    assert_eq!(
        json.matches("{\"type\":\"int\",\"value\":\"5\"}").count(),
        2,
        "{json}"
    );
    // A repr longer than the repeat limit still prints every shared value.
    let zeros = [&b"\x80\x02](K\x00"[..], &b"K\x00".repeat(2999), b"e."].concat();
    let doc = decode(&zeros, &Policy::data()).unwrap();
    let text = crate::repr::to_repr(&doc);
    assert_eq!(text.matches('0').count(), 3000);
    assert!(!text.contains("..."));
}

/// `max_nodes` counts shared values as it counts the others, and the depth check counts a
/// shared leaf as a level.
#[test]
fn shared_values_count_toward_the_limits() {
    let nones = b"\x80\x02](NNNe.";
    let three = Limits {
        max_nodes: 3,
        ..Policy::data().limits
    };
    let err = Decoder::new(nones, &Policy::data())
        .limits(three)
        .decode()
        .unwrap_err();
    assert_eq!(err.kind().name(), "limit_exceeded");
    assert!(err.to_string().contains("max_nodes"), "{err}");
    let four = Limits {
        max_nodes: 4,
        ..three
    };
    assert!(Decoder::new(nones, &Policy::data())
        .limits(four)
        .decode()
        .is_ok());
    // [[1]]: depth 3 with the shared 1.
    let nested = b"\x80\x02]q\x00]q\x01K\x01aa.";
    let two = Limits {
        max_nodes: 100,
        max_nesting_depth: 2,
        ..three
    };
    let err = Decoder::new(nested, &Policy::data())
        .limits(two)
        .decode()
        .unwrap_err();
    assert!(err.to_string().contains("max_nesting_depth"), "{err}");
}

#[test]
fn decode_with_report_gives_the_scan_globals() {
    let policy = Policy::data();
    // pickle.dumps({1}, 2): __builtin__.set via GLOBAL.
    let ok = b"\x80\x02c__builtin__\nset\nq\x00]q\x01K\x01a\x85q\x02Rq\x03.";
    let (doc, report) = Decoder::new(ok, &policy).decode_and_report(crate::Pickles::One);
    let doc = doc.unwrap();
    assert!(matches!(
        doc.root().and_then(|r| doc.get(r)),
        Some(Value::Set(_))
    ));
    let names: Vec<_> = report
        .globals
        .iter()
        .map(|g| (g.module.as_str(), g.name.as_str(), g.allowed))
        .collect();
    assert_eq!(names, [("__builtin__", "set", true)]);
    // os.system: refused by the scan, which still names it.
    let bad = b"\x80\x02cos\nsystem\nX\x02\x00\x00\x00id\x85R.";
    let (doc, report) = Decoder::new(bad, &policy).decode_and_report(crate::Pickles::One);
    assert_eq!(
        doc.err().map(|e| e.kind().name()),
        Some("global_not_allowed")
    );
    assert_eq!(
        report.globals.first().map(|g| (g.name.as_str(), g.allowed)),
        Some(("system", false))
    );
    // Accepted by the scan, refused by the build only: the report's result is the scan's.
    let deep = b"\x80\x02N\x85\x85\x85.";
    let tight = Limits {
        max_nesting_depth: 2,
        ..policy.limits
    };
    let (doc, report) = Decoder::new(deep, &policy)
        .limits(tight)
        .decode_and_report(crate::Pickles::One);
    assert_eq!(doc.err().map(|e| e.kind().name()), Some("limit_exceeded"));
    assert!(report.result.is_ok());
}

/// `check_depth` skips its walk when `containers + 1 <= max`: the verdict must be the
/// walk's at the edge, with many more leaves than the limit.
#[test]
fn depth_bound_from_container_count_is_exact_at_the_edge() {
    let at = |input: &[u8], max: u64| {
        let limits = Limits {
            max_nesting_depth: max,
            ..Policy::data().limits
        };
        Decoder::new(input, &Policy::data())
            .limits(limits)
            .decode()
            .map(|d| d.value_count())
            .map_err(|e| e.to_string())
    };
    // [[1000, ..., 1099]] at protocol 2: 2 containers, 100 leaves, depth 3.
    let mut nested = b"\x80\x02](](".to_vec();
    for i in 1000i32..1100 {
        nested.push(b'J');
        nested.extend_from_slice(&i.to_le_bytes());
    }
    nested.extend_from_slice(b"ee.");
    assert_eq!(at(&nested, 3), Ok(102));
    let err = at(&nested, 2).unwrap_err();
    assert!(
        err.contains("nesting depth 3 is over max_nesting_depth 2"),
        "{err}"
    );
    // A flat list of 100 ints: depth 2, one container.
    let mut flat = b"\x80\x02](".to_vec();
    flat.extend_from_slice(nested.get(6..506).unwrap_or_default());
    flat.extend_from_slice(b"e.");
    assert_eq!(at(&flat, 2), Ok(101));
    assert!(at(&flat, 1).is_err());
    // [[]]: the bound (3) is above the limit, so the walk decides: depth 2.
    assert_eq!(at(b"\x80\x02](]e.", 2), Ok(2));
    // l = [1000]; [l, [l]]: 3 containers, so the heights decide. `l` counts at both
    // places, the deeper deciding: the path through [l] is 4 deep (typed JSON, which
    // writes the second `l` as a ref, nests 3).
    let dag = b"\x80\x02](]q\x00J\xe8\x03\x00\x00a](h\x00ee.";
    assert_eq!(at(dag, 4), Ok(4));
    let err = at(dag, 3).unwrap_err();
    assert!(
        err.contains("nesting depth 4 is over max_nesting_depth 3"),
        "{err}"
    );
}

#[test]
fn a_key_holding_its_own_dict_is_unhashable() {
    // d = {}; d[(d,)] = 1
    assert_eq!(kind(b"\x80\x02}q\x00h\x00\x85K\x01s."), "unhashable_key");
    // s = set(); s.add((s,)) through ADDITEMS
    assert_eq!(kind(b"\x80\x04\x8f\x94(h\x00\x85\x90."), "unhashable_key");
}

#[test]
fn a_memo_index_ahead_within_the_bound_decodes_far_past_it_is_refused() {
    let policy = Policy::data();
    let doc = decode(b"\x80\x02]r\xff\x00\x00\x00.", &policy).unwrap();
    let root = doc.get(doc.root().unwrap()).unwrap();
    assert!(matches!(root, Value::List(items) if items.is_empty()));
    let e = decode(b"\x80\x02]r\xff\xff\xff\x0f.", &policy).unwrap_err();
    assert_eq!(e.kind().name(), "memo_index_ahead");
}

#[test]
fn get_of_an_unset_index_is_refused_by_the_scan() {
    let e = decode(b"\x80\x02]q\x00h\x01.", &Policy::data()).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::MemoKeyMissing(1));
    assert_eq!(e.offset(), 5);
    assert_eq!(e.opcode_name(), Some("BINGET"));
}

/// Floods of MARK POP_MARK and of MARK with an empty APPENDS (taken as one step of two
/// opcodes by the fast loop), of FRAMEs, DUP and POP decode as the careful path decodes them,
/// and are refused as it refuses them: at `max_stack_len` and `max_opcodes` edges, with no
/// MARK to pop, on a target that is not a list, below the fence, a FRAME inside a FRAME or
/// past the input, and when a pair is cut by the end of the input.
#[test]
fn mark_frame_and_stack_floods_agree_with_the_careful_path() {
    let flood = |head: &[u8], unit: &[u8], n: usize, tail: &[u8]| {
        let mut p = head.to_vec();
        for _ in 0..n {
            p.extend_from_slice(unit);
        }
        p.extend_from_slice(tail);
        p
    };
    let inputs: Vec<Vec<u8>> = vec![
        flood(b"\x80\x04N", b"(1", 50, b"."),
        flood(b"\x80\x04]", b"(e", 50, b"."),
        flood(b"\x80\x04]", b"(e(1", 20, b"K\x01a."),
        flood(b"\x80\x04](K\x01", b"(1", 5, b"e."),
        flood(b"\x80\x04]K\x01a", b"(e", 5, b"."),
        // Not a list, a target below the fence, POP_MARK with no MARK, a pair cut short.
        flood(b"\x80\x04}", b"(e", 3, b"."),
        flood(b"\x80\x04](", b"(e", 1, b"e."),
        b"\x80\x04(e.".to_vec(),
        b"\x80\x04N1.".to_vec(),
        b"\x80\x04N(".to_vec(),
        b"\x80\x04](e(".to_vec(),
        flood(b"\x80\x04N", b"(", 3, b"111."),
        flood(b"\x80\x04N", b"(", 3, b"1111."),
        // Empty FRAMEs, FRAMEs holding opcodes, one inside another, one past the input.
        flood(
            b"\x80\x04",
            b"\x95\x00\x00\x00\x00\x00\x00\x00\x00",
            20,
            b"N.",
        ),
        flood(
            b"\x80\x04",
            b"\x95\x02\x00\x00\x00\x00\x00\x00\x00N0",
            10,
            b"N.",
        ),
        b"\x80\x04\x95\x0b\x00\x00\x00\x00\x00\x00\x00\x95\x00\x00\x00\x00\x00\x00\x00\x00N."
            .to_vec(),
        b"\x80\x04\x95\x09\x00\x00\x00\x00\x00\x00\x00N.".to_vec(),
        b"\x80\x04\x95\x01\x00\x00\x00\x00\x00\x00\x00N\x95\x01\x00\x00\x00\x00\x00".to_vec(),
        b"\x80\x04\x95\x01\x00\x00\x00\x00\x00\x00\x00N\x95\x01\x00\x00\x00\x00\x00\x00\x00."
            .to_vec(),
        // DUP and POP: floods, of a MARK, below the fence, with nothing.
        flood(b"\x80\x04N", b"20", 30, b"."),
        flood(b"\x80\x04N", b"2", 5, b"00000."),
        flood(b"\x80\x04N", b"(0", 5, b"0."),
        b"\x80\x04N(2.".to_vec(),
        b"\x80\x04N(00.".to_vec(),
        b"\x80\x042.".to_vec(),
        b"\x80\x040.".to_vec(),
        // PROTO: again later, past 5, cut short.
        b"\x80\x04N\x80\x02\x80\x05.".to_vec(),
        b"\x80\x06N.".to_vec(),
        b"\x80".to_vec(),
    ];
    let policy = Policy::data();
    let outcome = |p: &[u8], limits: Limits, careful: bool| {
        let mut d = Decoder::new(p, &policy).limits(limits);
        if careful {
            d = d.careful_only();
        }
        d.decode()
            .map(|doc| crate::json::to_typed_json(&doc))
            .map_err(|e| (e.kind().name(), e.offset()))
    };
    let mut seen_ok = 0;
    for p in &inputs {
        for (stack, opcodes) in [
            (u64::MAX, u64::MAX),
            (2, u64::MAX),
            (3, u64::MAX),
            (u64::MAX, 6),
            (u64::MAX, 7),
        ] {
            let mut limits = policy.limits;
            limits.max_stack_len = stack.min(limits.max_stack_len);
            limits.max_opcodes = opcodes.min(limits.max_opcodes);
            let fast = outcome(p, limits, false);
            assert_eq!(
                fast,
                outcome(p, limits, true),
                "{p:?} stack {stack} opcodes {opcodes}"
            );
            seen_ok += usize::from(fast.is_ok());
        }
    }
    assert!(seen_ok >= 10, "too few accepted: {seen_ok}");
    // The values: None, an empty list, a list holding 1 (five times the same shape).
    assert_eq!(kind(&inputs[0]), "ok");
    assert_eq!(kind(&inputs[7]), "stack_underflow");
    assert_eq!(kind(&inputs[8]), "mark_missing");
}

/// The stack, MARK and memo vectors one decode leaves for the next on the same thread
/// (`src/build/spare.rs`) carry nothing over: a memo entry, a MARK or an item of the decode
/// before is not seen by the next one, refused or not.
#[test]
fn a_decode_sees_nothing_of_the_one_before() {
    let policy = Policy::data();
    // [] memoized as 0 and 1 (BINPUT), then a GET of 0 in a pickle that puts nothing.
    assert_eq!(kind(b"\x80\x02]q\x00q\x01."), "ok");
    assert_eq!(kind(b"\x80\x02h\x00."), "memo_key_missing");
    // A decode refused with a MARK and items on the stack, then one that needs an empty stack.
    assert_eq!(kind(b"\x80\x04(K\x01(K\x02"), "truncated");
    assert_eq!(kind(b"\x80\x04K\x07."), "ok");
    assert_eq!(kind(b"\x80\x04e."), "mark_missing");
    for _ in 0..3 {
        let doc = decode(b"\x80\x04]\x94(K\x01K\x02h\x00e.", &policy).unwrap();
        let Some(Value::List(items)) = doc.root().and_then(|r| doc.get(r)) else {
            panic!("not a list");
        };
        assert_eq!(items.len(), 3);
        assert_eq!(items[2], doc.root().unwrap());
    }
}

/// A Python 2 name (`__builtin__.set`, `copy_reg._reconstructor`) is read by CPython 3 only
/// while the last PROTO is below 3 (`Lib/pickle.py` `find_class`): past it CPython raises
/// `ModuleNotFoundError` (each outcome here is CPython 3.11's on the same bytes), so it is
/// refused as `python2_name_at_protocol_3`, and `builtins.set` is not.
#[test]
fn python2_names_are_read_only_before_protocol_3() {
    let policy = Policy::data();
    for (bytes, refused) in [
        (&b"\x80\x03c__builtin__\nset\n)R."[..], true),
        (b"\x80\x02c__builtin__\nset\n)R.", false),
        (b"c__builtin__\nset\n)R.", false),
        // The last PROTO decides, as CPython's `load_proto` sets `self.proto`.
        (b"\x80\x02\x80\x03c__builtin__\nset\n)R.", true),
        (b"\x80\x03\x80\x02c__builtin__\nset\n)R.", false),
        (b"\x80\x04\x8c\x0b__builtin__\x8c\x03set\x93)R.", true),
        (b"\x80\x04\x8c\x08builtins\x8c\x03set\x93)R.", false),
    ] {
        match decode(bytes, &policy) {
            Ok(_) => assert!(!refused, "{bytes:?} accepted"),
            Err(e) => {
                assert!(refused, "{bytes:?}: {e}");
                assert_eq!(e.kind().name(), "python2_name_at_protocol_3", "{e}");
                assert!(e.to_string().contains("__builtin__.set"), "{e}");
            }
        }
    }
}
