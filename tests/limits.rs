//! Every limit of `picklewarden::LimitName::ALL` at N-1, N and N+1, where N is exactly what a
//! small pickle needs: N-1 is refused with `LimitExceeded` of that limit (seen = N, max = N-1),
//! N and N+1 are accepted. The counting rules (from src/build/budget.rs and src/limits.rs):
//!
//! - max_input_bytes: the input length (checked before anything is read);
//! - max_nesting_depth: values on the longest path from a root, a root is depth 1, each
//!   container level adds one (an int inside a list at the root is depth 2), a value shared
//!   through the memo counts at every place it is reached, an edge back to a container on the
//!   path (a cycle) is a leaf;
//! - max_stack_len: the peak of values plus MARKs on the stack;
//! - max_memo_entries: distinct memo indices set (setting an index again is free);
//! - max_container_items: items of one container (a dict pair is one item);
//! - max_nodes: values created (scalars, containers, globals, constructed values);
//! - max_alloc_bytes: bytes charged for the document (implementation-defined, found by
//!   bisection);
//! - max_long_text_digits: digits of INT/LONG text, sign excluded (leading zeros count);
//! - max_long_bytes: LONG1/LONG4 payload bytes;
//! - max_opcodes: opcodes executed, STOP (and PROTO, FRAME) included.

// Test code: a failed invariant is a panic, by design (clippy.toml's allow-*-in-tests covers
// #[test] fns only, not the helpers and the shared module).
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

mod common;

use common::python_hex;
use picklewarden::{Decoder, Error, ErrorKind, LimitName, Limits, Policy};

fn decode_with(data: &[u8], policy: &Policy, name: LimitName, value: u64) -> Result<(), Error> {
    let mut limits = Limits::default();
    limits.set(name, value);
    Decoder::new(data, policy)
        .limits(limits)
        .decode()
        .map(|_| ())
}

/// N-1 refused with this limit (seen == N unless `exact_seen` is false, then seen >= N),
/// N and N+1 accepted.
fn check_exact(
    label: &str,
    data: &[u8],
    policy: &Policy,
    name: LimitName,
    n: u64,
    exact_seen: bool,
) {
    assert!(n >= 1, "{label}: N must be at least 1");
    match decode_with(data, policy, name, n - 1) {
        Ok(()) => panic!(
            "{label}: {name}={} (N-1) was accepted; N should be {n}",
            n - 1
        ),
        Err(e) => match e.kind() {
            ErrorKind::LimitExceeded { limit, seen, max } => {
                assert_eq!(*limit, name, "{label}: wrong limit in {e}");
                assert_eq!(*max, n - 1, "{label}: max in {e}");
                if exact_seen {
                    assert_eq!(*seen, n, "{label}: seen in {e}");
                } else {
                    assert!(*seen >= n, "{label}: seen below N in {e}");
                }
                assert_eq!(e.category().name(), "limit_exceeded");
                assert_eq!(e.kind().name(), "limit_exceeded");
                // The message says what was measured, the limit by name and its maximum.
                let text = e.to_string();
                assert!(
                    text.contains(&format!(" {seen} is over {name} {} (", n - 1)),
                    "{label}: message {text}"
                );
            }
            other => panic!(
                "{label}: {name}={}: expected limit_exceeded({name}), got {} ({e})",
                n - 1,
                other.name()
            ),
        },
    }
    for v in [n, n + 1] {
        if let Err(e) = decode_with(data, policy, name, v) {
            panic!("{label}: {name}={v} refused, but the pickle needs exactly {n}: {e}");
        }
    }
}

fn data() -> Policy {
    Policy::data()
}

// ------------------------------------------------------------------------------- per limit

fn max_input_bytes() {
    let pickles: [&[u8]; 2] = [b"K\x05.", b"\x80\x02]q\x00(K\x01K\x02e."];
    for p in pickles {
        check_exact(
            "input",
            p,
            &data(),
            LimitName::MaxInputBytes,
            p.len() as u64,
            true,
        );
        // refused before anything is read: offset 0, no opcode
        let e = decode_with(p, &data(), LimitName::MaxInputBytes, p.len() as u64 - 1)
            .err()
            .unwrap_or_else(|| panic!("accepted"));
        assert_eq!(e.offset(), 0);
        assert_eq!(e.opcode(), None);
    }
}

fn max_nesting_depth() {
    // [[[[1]]]]: 4 lists + the int = depth 5
    check_exact(
        "nested lists",
        b"((((K\x01llll.",
        &data(),
        LimitName::MaxNestingDepth,
        5,
        true,
    );
    // {"a": ([1],)}: dict 1, tuple 2, list 3, int 4 (CPython-written, protocol 2)
    let p = python_hex("import pickle; print(pickle.dumps({'a': ([1],)}, 2).hex())");
    check_exact(
        "dict/tuple/list",
        &p,
        &data(),
        LimitName::MaxNestingDepth,
        4,
        true,
    );
    // 30 nested lists around an int, protocol 0 and 4: depth 31
    for proto in [0, 4] {
        let p = python_hex(&format!(
            "import pickle\nv = 1\nfor _ in range(30): v = [v]\nprint(pickle.dumps(v, {proto}).hex())"
        ));
        check_exact(
            &format!("30 lists p{proto}"),
            &p,
            &data(),
            LimitName::MaxNestingDepth,
            31,
            true,
        );
    }
    // A memoized list reached twice counts at both places, the deeper deciding (as `repr`
    // or `hash` of the loaded value meets it twice). x = [1]:
    // [x, [[x]]]: x at 2 (its int at 3), then again at 4, its int at 5 -> 5 (it was 4 when
    // the depth was typed JSON's, where the second x is a ref leaf)
    let p = b"\x80\x02](]K\x01aq\x00]]h\x00aae.";
    check_exact(
        "x first shallow",
        p,
        &data(),
        LimitName::MaxNestingDepth,
        5,
        true,
    );
    // [[[x]], x]: x first at depth 4, its int at 5 -> 5
    let p = b"\x80\x02](]]]K\x01aq\x00aah\x00e.";
    check_exact(
        "x first deep",
        p,
        &data(),
        LimitName::MaxNestingDepth,
        5,
        true,
    );
    many_containers_beside_a_deep_value();
    // A list of 30 cons cells c_i = (i, c_(i-1)), c_0 = None, each shared through the memo:
    // typed JSON writes each c_i once and a ref after that, 3 deep, but `repr` or `hash` of
    // the loaded list goes through every c_i: c_30 at 2, c_1 at 31, its None at 32. That is
    // the depth (a review helper's list of a million such tuples, passed as 3 deep, made
    // CPython 3.11's pickle.loads overflow its C stack hashing the chain).
    for proto in [2, 4] {
        let p = python_hex(&format!(
            "import pickle\nc, cs = None, []\nfor i in range(30):\n    c = (i, c)\n    cs.append(c)\nprint(pickle.dumps(cs, {proto}).hex())"
        ));
        check_exact(
            &format!("cons cells p{proto}"),
            &p,
            &data(),
            LimitName::MaxNestingDepth,
            32,
            true,
        );
    }
    // CPython's pickler writes a chain of 2000 tuples t_k = (t_(k-1),), t_0 = (), kept in one
    // list, link by link through the memo (no deep recursion): list 1, t_2000 2, ..., t_0 at
    // 2002. Typed JSON nests it 3 deep; CPython's hash(v[-1]) recurses 2001 levels (A51).
    let p = python_hex(
        "import pickle\nt, v = (), [()]\nfor _ in range(2000):\n    t = (t,)\n    v.append(t)\nprint(pickle.dumps(v, 4).hex())",
    );
    check_exact(
        "tuple chain kept in a list",
        &p,
        &data(),
        LimitName::MaxNestingDepth,
        2002,
        true,
    );
    // A cycle: the list met again is a leaf one level down (found by a review helper: with
    // the number of values as a bound, both were accepted one level too deep).
    // l = [l]: l 1, l again 2.
    check_exact(
        "l = [l]",
        b"\x80\x04]\x94h\x00a.",
        &data(),
        LimitName::MaxNestingDepth,
        2,
        true,
    );
    // l = [[[l]]]: 4.
    check_exact(
        "l = [[[l]]]",
        b"\x80\x04]\x94]]h\x00aaa.",
        &data(),
        LimitName::MaxNestingDepth,
        4,
        true,
    );
    // A set item shared with another item counts at its deeper place, whatever the order of
    // the items (when the depth was typed JSON's, the writer's sorted order decided; found
    // by a review): x = (((((()),),),),); frozenset({x, (1, x)}), x added first: frozenset 1,
    // (1, x) 2, x 3, its innermost () at 8.
    let p = common::hex_decode("800428298585858585944a01000000680086912e");
    check_exact(
        "frozenset({x, (1, x)})",
        &p,
        &data(),
        LimitName::MaxNestingDepth,
        8,
        true,
    );
    // frozenset({x20, ..., x1}) with x_i = (i, x_(i+1)), x21 = (), added x20 first: the
    // path from x1 goes through every x_i: 22 (the () in x20).
    let mut p = b"\x80\x04)\x940".to_vec();
    for i in (1u8..=20).rev() {
        p.extend_from_slice(&[b'K', i, b'h', 20 - i, 0x86, 0x94, b'0']);
    }
    p.push(b'(');
    for i in (1u8..=20).rev() {
        p.extend_from_slice(&[b'h', 21 - i]);
    }
    p.extend_from_slice(b"\x91.");
    check_exact(
        "frozenset of a chain",
        &p,
        &data(),
        LimitName::MaxNestingDepth,
        22,
        true,
    );
    // Hand-made (CPython's pickler fills a container before putting it into another): l is
    // put into the root, then filled through the memo with [[[1]]], which makes the root
    // deeper after its height was taken; three empty lists beside it. root 1, l 2, [[[1]]]
    // 3, [[1]] 4, [1] 5, 1 at 6.
    check_exact(
        "filled after it was put into another",
        b"\x80\x02]]q\x00ah\x00]]]K\x01aaaa0]a]a]a.",
        &data(),
        LimitName::MaxNestingDepth,
        6,
        true,
    );
}

/// Values with far more containers than their depth, so that the build keeps heights
/// (src/build/depth.rs) and they, or the walk when they cannot, decide: written by CPython at every
/// protocol, with the depth computed in Python as `max_nesting_depth` defines it (on what
/// `pickle.loads` gives, so sharing is what the memo shares): the longest path from the root,
/// an edge to a container on the path a leaf.
fn many_containers_beside_a_deep_value() {
    let script = r#"
import pickle

def depth(root):
    containers = (list, tuple, dict, set, frozenset)
    def kids(v):
        return [c for kv in v.items() for c in kv] if isinstance(v, dict) else list(v)
    if not isinstance(root, containers):
        return 1
    # id -> None while on the path, then the height; post-order by an explicit stack
    height, work = {}, [(root, False)]
    while work:
        v, leaving = work.pop()
        if leaving:
            h = 1
            for c in kids(v):
                hc = height.get(id(c)) if isinstance(c, containers) else 1
                h = max(h, 1 + (hc or 1))
            height[id(v)] = h
        elif id(v) not in height:
            height[id(v)] = None
            work.append((v, True))
            work.extend((c, False) for c in reversed(kids(v)) if isinstance(c, containers))
    return height[id(root)]

def chain(n, wrap):
    v = 1000
    for _ in range(n):
        v = wrap(v)
    return v

cases = {}
# a chain of 30 lists, then 100 empty dicts beside it
cases["lists"] = [chain(30, lambda v: [v])] + [{} for _ in range(100)]
# the deep value last, after 200 small containers
cases["last"] = [[i, (i,), {"k": [i]}] for i in range(200)] + [chain(25, lambda v: (v, "t"))]
# dicts of dicts, and frozensets of frozensets, among many lists
cases["dicts"] = {"d": chain(20, lambda v: {"x": v}), "l": [[i] for i in range(80)]}
cases["frozen"] = ([], [chain(12, lambda v: frozenset([v, 7]))], [[] for _ in range(60)])
# a list reached twice: first shallow, then under a deep chain (counted at the deeper)
x = [[[2000]]]
cases["dag"] = [x, chain(10, lambda v: [v, x])] + [[] for _ in range(50)]
# a list that holds a list holding it: filled after it was put into another (the walk decides)
a = []
a.append([a, [[3000]]])
cases["cycle"] = [a] + [[[]] for _ in range(50)]
# a dict filled after the list that holds it was made (d's SETITEMS come after [d] is built)
d = {}
d["self"] = [d, [[[4000]]]]
cases["dict-cycle"] = [d] + [{} for _ in range(50)]

for name, v in cases.items():
    for proto in range(6):
        data = pickle.dumps(v, proto)
        print(name, proto, depth(pickle.loads(data)), data.hex())
"#;
    let out = common::python(script, &[]);
    let mut n = 0;
    for line in out.lines() {
        let mut f = line.split(' ');
        let (Some(name), Some(proto), Some(depth), Some(hex)) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            panic!("bad line {line:?}");
        };
        let depth: u64 = depth.parse().unwrap();
        assert!(depth >= 5, "{name}: depth {depth}");
        check_exact(
            &format!("{name} p{proto}"),
            &common::hex_decode(hex),
            &data(),
            LimitName::MaxNestingDepth,
            depth,
            true,
        );
        n += 1;
    }
    assert_eq!(n, 7 * 6);
}

fn max_stack_len() {
    // MARK, 1, 2, 3 -> 4 entries, then LIST leaves 1
    check_exact(
        "mark+3",
        b"(K\x01K\x02K\x03l.",
        &data(),
        LimitName::MaxStackLen,
        4,
        true,
    );
    // 1, 2, 3, TUPLE3 -> 3 entries
    check_exact(
        "tuple3",
        b"\x80\x02K\x01K\x02K\x03\x87.",
        &data(),
        LimitName::MaxStackLen,
        3,
        true,
    );
    // list, DUP, APPEND -> 2 entries (a list holding itself)
    check_exact("dup", b"]2a.", &data(), LimitName::MaxStackLen, 2, true);
    // nested marks: MARK MARK MARK 1 -> 4
    check_exact(
        "marks",
        b"(((K\x01ttt.",
        &data(),
        LimitName::MaxStackLen,
        4,
        true,
    );
}

fn max_memo_entries() {
    // indices 0, 1, 257 (ahead of the 2 set, within 2 x 2 + 256), MEMOIZE (index 3), then
    // index 0 set again: 4 distinct
    let p = b"\x80\x04(K\x01q\x00K\x02q\x01K\x03r\x01\x01\x00\x00K\x04\x94h\x00q\x00l.";
    check_exact("memo", p, &data(), LimitName::MaxMemoEntries, 4, true);
    // CPython's own pickle of [a, b, c] strings at protocol 2: BINPUT 0..3 -> 4
    let p = python_hex("import pickle; print(pickle.dumps(['a', 'b', 'c'], 2).hex())");
    check_exact(
        "cpython memo",
        &p,
        &data(),
        LimitName::MaxMemoEntries,
        4,
        true,
    );
}

fn max_container_items() {
    let d = data();
    // list by APPENDS: 5 items
    check_exact(
        "list",
        b"](K\x01K\x02K\x03K\x04K\x05e.",
        &d,
        LimitName::MaxContainerItems,
        5,
        true,
    );
    // list by APPEND one at a time: 3 items
    check_exact(
        "append",
        b"]K\x01aK\x02aK\x03a.",
        &d,
        LimitName::MaxContainerItems,
        3,
        true,
    );
    // tuple by TUPLE: 3
    check_exact(
        "tuple",
        b"(K\x01K\x02K\x03t.",
        &d,
        LimitName::MaxContainerItems,
        3,
        true,
    );
    // dict by SETITEMS: 2 pairs count as 2 items
    check_exact(
        "dict",
        b"}(K\x01K\x02K\x03K\x04u.",
        &d,
        LimitName::MaxContainerItems,
        2,
        true,
    );
    // dict by DICT: 3 pairs
    check_exact(
        "DICT",
        b"(K\x01K\x02K\x03K\x04K\x05K\x06d.",
        &d,
        LimitName::MaxContainerItems,
        3,
        true,
    );
    // set by ADDITEMS: 3
    check_exact(
        "set",
        b"\x80\x04\x8f(K\x01K\x02K\x03\x90.",
        &d,
        LimitName::MaxContainerItems,
        3,
        true,
    );
    // frozenset: 2
    check_exact(
        "frozenset",
        b"\x80\x04(K\x01K\x02\x91.",
        &d,
        LimitName::MaxContainerItems,
        2,
        true,
    );
    // the biggest container counts, not the total: [[1, 2], [3, 4, 5, 6]] -> 4
    check_exact(
        "biggest",
        b"((K\x01K\x02l(K\x03K\x04K\x05K\x06ll.",
        &d,
        LimitName::MaxContainerItems,
        4,
        true,
    );
}

fn max_nodes() {
    // 1, 2, tuple -> 3 values
    check_exact(
        "tuple",
        b"(K\x01K\x02t.",
        &data(),
        LimitName::MaxNodes,
        3,
        true,
    );
    // __builtin__.set([1]): global, list, int, args tuple, set -> 5 (APPEND creates nothing)
    check_exact(
        "set()",
        b"c__builtin__\nset\n]K\x01a\x85R.",
        &data(),
        LimitName::MaxNodes,
        5,
        true,
    );
    // memo GET and DUP create nothing: list, 1, GET, DUP -> 2
    check_exact(
        "get/dup",
        b"\x80\x02]q\x00K\x01ah\x002a0.",
        &data(),
        LimitName::MaxNodes,
        2,
        true,
    );
}

fn max_alloc_bytes() {
    // No closed formula is promised: find the smallest accepted value by bisection, then check
    // N-1 / N / N+1. Several CPython pickles, every protocol.
    let value = "{'a': [1, 2.5, 'xyz', b'bytes', (1, 2)], 'b': {1, 2, 3}, 'c': bytearray(b'ab'), 10**30: None, 'd': 'caf\\xe9'}";
    let mut needs = Vec::new();
    for proto in 0..=5 {
        let p = python_hex(&format!(
            "import pickle; print(pickle.dumps({value}, {proto}).hex())"
        ));
        let n = smallest_accepted(&p, &data(), LimitName::MaxAllocBytes, 1 << 24);
        assert!(n > 0, "p{proto}: a document needs some bytes");
        check_exact(
            &format!("alloc p{proto}"),
            &p,
            &data(),
            LimitName::MaxAllocBytes,
            n,
            false,
        );
        needs.push(n);
    }
    eprintln!("max_alloc_bytes needed per protocol 0..5: {needs:?}");
    // more of the same needs more
    let small = python_hex("import pickle; print(pickle.dumps(list(range(10)), 2).hex())");
    let big = python_hex("import pickle; print(pickle.dumps(list(range(1000)), 2).hex())");
    let ns = smallest_accepted(&small, &data(), LimitName::MaxAllocBytes, 1 << 24);
    let nb = smallest_accepted(&big, &data(), LimitName::MaxAllocBytes, 1 << 24);
    check_exact(
        "alloc small list",
        &small,
        &data(),
        LimitName::MaxAllocBytes,
        ns,
        false,
    );
    check_exact(
        "alloc big list",
        &big,
        &data(),
        LimitName::MaxAllocBytes,
        nb,
        false,
    );
    assert!(
        nb > ns + 990 * 4,
        "1000 ints ({nb}) should cost well above 10 ints ({ns})"
    );
}

/// Smallest value of `name` that accepts `data` (bisection; `hi` must be accepted).
fn smallest_accepted(data: &[u8], policy: &Policy, name: LimitName, hi: u64) -> u64 {
    if let Err(e) = decode_with(data, policy, name, hi) {
        panic!("not accepted even at {name}={hi}: {e}");
    }
    let (mut lo, mut hi) = (0u64, hi); // lo refused (or 0), hi accepted
    if decode_with(data, policy, name, 0).is_ok() {
        return 0;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if decode_with(data, policy, name, mid).is_ok() {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

fn max_long_text_digits() {
    // INT, sign excluded: 5 digits
    check_exact(
        "INT",
        b"I-12345\n.",
        &data(),
        LimitName::MaxLongTextDigits,
        5,
        true,
    );
    // LONG with the L suffix (not a digit): 22 digits
    check_exact(
        "LONG",
        b"L1234567890123456789012L\n.",
        &data(),
        LimitName::MaxLongTextDigits,
        22,
        true,
    );
    // leading zeros are digits of the text: 2 (`00`, read as 0 by every CPython; a leading
    // zero before other digits is refused as version_dependent_number)
    check_exact(
        "zeros",
        b"L00L\n.",
        &data(),
        LimitName::MaxLongTextDigits,
        2,
        true,
    );
    // CPython protocol 0 of 10**40: 41 digits
    let p = python_hex("import pickle; print(pickle.dumps(-10**40, 0).hex())");
    check_exact(
        "cpython LONG",
        &p,
        &data(),
        LimitName::MaxLongTextDigits,
        41,
        true,
    );
}

fn max_long_bytes() {
    check_exact(
        "LONG1",
        b"\x80\x02\x8a\x05\x01\x02\x03\x04\x05.",
        &data(),
        LimitName::MaxLongBytes,
        5,
        true,
    );
    let mut p = b"\x80\x02\x8b\x0a\x00\x00\x00".to_vec();
    p.extend_from_slice(&[0x11; 10]);
    p.push(b'.');
    check_exact("LONG4", &p, &data(), LimitName::MaxLongBytes, 10, true);
    // CPython's pickle of 2**100 at protocol 2: LONG1 with 13 bytes
    let p = python_hex("import pickle; print(pickle.dumps(2**100, 2).hex())");
    check_exact(
        "cpython LONG1",
        &p,
        &data(),
        LimitName::MaxLongBytes,
        13,
        true,
    );
}

fn max_opcodes() {
    check_exact(
        "3 ops",
        b"\x80\x02K\x01.",
        &data(),
        LimitName::MaxOpcodes,
        3,
        true,
    );
    check_exact(
        "5 ops",
        b"(K\x01K\x02l.",
        &data(),
        LimitName::MaxOpcodes,
        5,
        true,
    );
    // CPython pickles (FRAME at protocol 4/5 counts): N from pickletools.genops
    for proto in [2, 4, 5] {
        let out = common::python(
            &format!(
                "import pickle, pickletools\nd = pickle.dumps({{'k': [1, 2, (3, 'x')]}}, {proto})\nprint(d.hex(), len(list(pickletools.genops(d))))"
            ),
            &[],
        );
        let (hex, n) = out
            .trim()
            .split_once(' ')
            .unwrap_or_else(|| panic!("bad output {out:?}"));
        let n: u64 = n.parse().unwrap_or_else(|e| panic!("{e}"));
        check_exact(
            &format!("ops p{proto}"),
            &common::hex_decode(hex),
            &data(),
            LimitName::MaxOpcodes,
            n,
            true,
        );
    }
}

/// A dict whose key is a DAG of tuples, `levels` deep: `(1, 1, 1)` (4 steps: the tuple and its
/// items), then each level a tuple of the one below three times (DUP, DUP, TUPLE3; 1 + 3 x
/// the level below). The unfolded size of `levels` levels is (3**(levels+1) - 1) / 2, what
/// CPython's `tuplehash` walks at the SETITEM.
fn tuple_dag_key(levels: u32) -> (Vec<u8>, u64) {
    let mut p = b"\x80\x02}K\x01".to_vec();
    for _ in 0..levels {
        p.extend_from_slice(b"22\x87");
    }
    p.extend_from_slice(b"K\x02s.");
    (p, (3u64.pow(levels + 1) - 1) / 2)
}

fn max_key_steps() {
    for levels in [1, 3, 6] {
        let (p, n) = tuple_dag_key(levels);
        check_exact(
            "tuple DAG key",
            &p,
            &data(),
            LimitName::MaxKeySteps,
            n,
            true,
        );
    }
    // The same DAG as a set item (ADDITEMS), a frozenset item (FROZENSET) and set()'s argument
    // (REDUCE on builtins.set of a list): 40 steps each (3 levels).
    let dag = b"K\x0122\x8722\x8722\x87";
    let mut set = b"\x80\x04\x8f(".to_vec();
    set.extend_from_slice(dag);
    set.extend_from_slice(b"\x90.");
    let mut frozen = b"\x80\x04(".to_vec();
    frozen.extend_from_slice(dag);
    frozen.extend_from_slice(b"\x91.");
    let mut call = b"\x80\x04\x8c\x08builtins\x8c\x03set\x93](".to_vec();
    call.extend_from_slice(dag);
    call.extend_from_slice(b"e\x85R.");
    for (label, p) in [
        ("set item", set),
        ("frozenset item", frozen),
        ("set()", call),
    ] {
        check_exact(label, &p, &data(), LimitName::MaxKeySteps, 40, true);
    }
    // A key equal to one in the set but another object is compared item by item: a set of
    // two equal 1,000-int tuples (MARK, BININT2 x 1,000, TUPLE, twice); the second costs its
    // hash and one comparison, 2 x 1,001 steps.
    let mut p = b"\x80\x04\x8f(".to_vec();
    for _ in 0..2 {
        p.push(b'(');
        for i in 0..1000u16 {
            p.push(b'M');
            p.extend_from_slice(&i.to_le_bytes());
        }
        p.push(b't');
    }
    p.extend_from_slice(b"\x90.");
    check_exact(
        "equal tuples",
        &p,
        &data(),
        LimitName::MaxKeySteps,
        2002,
        true,
    );
}

fn max_key_steps_per_byte() {
    // A 1,000-int tuple (1,001 steps) as the key of 2,000 dicts, reached through the memo:
    // 2,002,000 steps in all, over max_key_steps' 1 Mi, so the per-byte rule decides.
    let p = python_hex(
        "import pickle; t = tuple(range(1000)); print(pickle.dumps([{t: 0} for _ in range(2000)], 4).hex())",
    );
    let total = 2000u64 * 1001;
    let n = total.div_ceil(p.len() as u64);
    check_exact(
        "shared tuple key",
        &p,
        &data(),
        LimitName::MaxKeyStepsPerByte,
        n,
        true,
    );
}

fn max_key_collisions() {
    // k * (2**61 - 1) all have CPython hash 0 (ints and big ints alike); so do the tuples
    // (k * (2**61 - 1),), and the floats 2.0**61 * m and the int m share one (2**61 is 1
    // modulo 2**61 - 1).
    for (label, expr, n) in [
        ("ints", "{k * (2**61 - 1): 0 for k in range(1, 10)}", 9),
        (
            "tuples",
            "{(k * (2**61 - 1),): 0 for k in range(1, 12)}",
            11,
        ),
        ("floats", "set(3 * 2.0**(61 * j) for j in range(7))", 7),
    ] {
        for proto in [2, 4] {
            let p = python_hex(&format!(
                "import pickle; print(pickle.dumps({expr}, {proto}).hex())"
            ));
            check_exact(label, &p, &data(), LimitName::MaxKeyCollisions, n, true);
        }
    }
}

fn max_copy_bytes_per_byte() {
    // `bytearray(b)` of one memoized 100,000-byte bytes object, 30 times: 3,000,000 bytes
    // copied (each call its length; src/build/copies.rs), over the 64 KiB floor, so the
    // per-byte rule decides.
    let mut p = b"\x80\x03cbuiltins\nbytearray\nq\x000B".to_vec();
    p.extend_from_slice(&100_000u32.to_le_bytes());
    p.extend_from_slice(&[b'x'; 100_000]);
    p.extend_from_slice(b"q\x010(");
    for _ in 0..30 {
        p.extend_from_slice(b"h\x00h\x01\x85R");
    }
    p.extend_from_slice(b"l.");
    let n = (30u64 * 100_000).div_ceil(p.len() as u64);
    check_exact(
        "bytearray of one bytes object",
        &p,
        &data(),
        LimitName::MaxCopyBytesPerByte,
        n,
        false,
    );
}

/// One test per limit; a limit added without one fails the test (`LimitName` is
/// `#[non_exhaustive]`, so the match cannot be exhaustive outside the crate).
#[test]
fn every_limit_at_n_minus_1_n_and_n_plus_1() {
    for name in LimitName::ALL {
        eprintln!("checking {name}");
        match name {
            LimitName::MaxInputBytes => max_input_bytes(),
            LimitName::MaxNestingDepth => max_nesting_depth(),
            LimitName::MaxStackLen => max_stack_len(),
            LimitName::MaxMemoEntries => max_memo_entries(),
            LimitName::MaxContainerItems => max_container_items(),
            LimitName::MaxNodes => max_nodes(),
            LimitName::MaxAllocBytes => max_alloc_bytes(),
            LimitName::MaxLongTextDigits => max_long_text_digits(),
            LimitName::MaxLongBytes => max_long_bytes(),
            LimitName::MaxOpcodes => max_opcodes(),
            LimitName::MaxKeySteps => max_key_steps(),
            LimitName::MaxKeyStepsPerByte => max_key_steps_per_byte(),
            LimitName::MaxKeyCollisions => max_key_collisions(),
            LimitName::MaxCopyBytesPerByte => max_copy_bytes_per_byte(),
            other => panic!("no test of the limit {other}"),
        }
    }
}

/// The documented rule "a scalar at top level is depth 1" with the strict-maximum rule means
/// `max_nesting_depth = 0` refuses even a bare int (and an empty list, also depth 1).
#[test]
fn nesting_depth_of_a_scalar_root_is_one() {
    check_exact(
        "scalar root",
        b"K\x01.",
        &data(),
        LimitName::MaxNestingDepth,
        1,
        true,
    );
    check_exact(
        "empty list root",
        b"].",
        &data(),
        LimitName::MaxNestingDepth,
        1,
        true,
    );
    check_exact(
        "list of int",
        b"]K\x01a.",
        &data(),
        LimitName::MaxNestingDepth,
        2,
        true,
    );
}

/// A protocol-2 pickle whose LONG_BINPUT names memo index 0x0fffffff: CPython 3.11 would grow
/// its memo array to twice that (4 GiB); picklewarden refuses it before anything is set, as
/// the reader after it must not be handed it (`memo_index_ahead`), and accepts any index
/// below 2**20, and past it the index 2 x entries + 255, the last below the bound.
#[test]
fn memo_index_dos_is_refused_for_the_reader_after() {
    let p = b"\x80\x02]r\xff\xff\xff\x0f.";
    let policy = Policy::data();
    let e = Decoder::new(p, &policy).decode().unwrap_err();
    assert_eq!(
        e.kind(),
        &ErrorKind::MemoIndexAhead {
            index: 0x0fff_ffff,
            entries: 0
        }
    );
    assert_eq!((e.offset(), e.opcode()), (3, Some(b'r')));
    // One entry set (index 0): every index below 2**20 is allowed (an older CPython's memo
    // array then takes at most 16 MiB; src/vm/memo.rs), 2**20 is the first refused.
    for (index, ok) in [
        (257u32, true),
        (258, true),
        ((1 << 20) - 1, true),
        (1 << 20, false),
    ] {
        let mut p = b"\x80\x02]q\x00]r".to_vec();
        p.extend_from_slice(&index.to_le_bytes());
        p.extend_from_slice(b"0.");
        let got = Decoder::new(&p, &policy).decode();
        assert_eq!(got.is_ok(), ok, "index {index}: {:?}", got.err());
    }
    // Past 2**20 the bound is twice the entries plus 256: 600,000 entries (0 to 599,999)
    // allow index 1,200,255, not 1,200,256.
    for (index, ok) in [(1_200_255u32, true), (1_200_256, false)] {
        let mut p = b"\x80\x04]".to_vec();
        p.extend_from_slice(&[0x94; 600_000]); // MEMOIZE
        p.push(b'r');
        p.extend_from_slice(&index.to_le_bytes());
        p.push(b'.');
        let got = Decoder::new(&p, &policy).decode();
        assert_eq!(got.is_ok(), ok, "index {index}: {:?}", got.err());
    }
}

/// Every default is the documented constant, and a limit set to its default changes nothing.
#[test]
fn defaults_are_documented_values() {
    use picklewarden::limits::*;
    let d = Limits::default();
    assert_eq!(d.max_input_bytes, DEFAULT_MAX_INPUT_BYTES);
    assert_eq!(d.max_input_bytes, 256 << 20);
    assert_eq!(d.max_nesting_depth, 1000);
    assert_eq!(d.max_long_text_digits, 4300);
    assert_eq!(d.max_long_bytes, 4096);
    for name in LimitName::ALL {
        assert_eq!(name.default_value(), d.get(name), "{name}");
        let mut l = Limits::default();
        l.set_from_str(&format!("{}={}", name.name(), d.get(name)))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l, d);
    }
}

/// With a deadline, the decoder looks at the clock every 65,536 opcodes; a run of ints that
/// crosses that mark (CPython writes a list in APPENDS groups of 1,000) is still counted
/// opcode by opcode: the deadline is seen, max_opcodes is exact across the mark, the decode's
/// value is the list, and no counter wraps (a debug build panics on a wrap; before the fix a
/// release build lost count until the next FRAME, and to the end of a protocol 2 pickle).
#[test]
fn a_deadline_keeps_max_opcodes_exact_across_int_runs() {
    for protocol in [2, 4] {
        deadline_across_int_runs(protocol);
    }
}

fn deadline_across_int_runs(protocol: u8) {
    // 200,000 ints of each size: BININT1, BININT2, BININT and LONG1 runs; then the number of
    // opcodes as pickletools counts them (PROTO, FRAME and STOP included).
    let out = common::python(
        &format!(
            "import pickle, pickletools\n\
             p = pickle.dumps([i % 256 for i in range(200000)] + [300 + i for i in range(200000)]\n\
                 + [70000 + i for i in range(200000)] + [(1 << 40) + i for i in range(200000)], {protocol})\n\
             print(p.hex())\n\
             print(sum(1 for _ in pickletools.genops(p)))"
        ),
        &[],
    );
    let mut lines = out.lines();
    let p = common::hex_decode(lines.next().unwrap_or_default());
    let opcodes: u64 = lines.next().unwrap_or_default().parse().unwrap();
    let policy = Policy::data();
    let far = std::time::Instant::now() + std::time::Duration::from_secs(3600);
    let doc = Decoder::new(&p, &policy)
        .deadline(far)
        .decode()
        .unwrap_or_else(|e| panic!("{e}"));
    let root = doc.root().unwrap();
    match doc.get(root) {
        Some(picklewarden::Value::List(items)) => {
            assert_eq!(items.len(), 800_000);
            let int = |i: usize| match doc.get(items[i]) {
                Some(picklewarden::Value::Int(x)) => x,
                other => panic!("item {i}: {other:?}"),
            };
            assert_eq!(int(199_999), 199_999 % 256);
            assert_eq!(int(200_000), 300);
            assert_eq!(int(599_999), 70_000 + 199_999);
            assert_eq!(int(799_999), (1 << 40) + 199_999);
        }
        other => panic!("expected a list, got {other:?}"),
    }
    // A deadline already passed is seen at the first look, 65,536 opcodes in, inside the
    // ints (before the fix the fast loop's budget wrapped there, and it never looked again).
    let passed = Decoder::new(&p, &policy)
        .deadline(std::time::Instant::now())
        .decode();
    match passed {
        Err(e) => assert_eq!(*e.kind(), ErrorKind::DeadlineExceeded, "{e}"),
        Ok(_) => panic!("protocol {protocol}: a passed deadline was not seen"),
    }
    for max in [opcodes - 1, opcodes] {
        let mut limits = Limits::default();
        limits.set(LimitName::MaxOpcodes, max);
        let r = Decoder::new(&p, &policy)
            .limits(limits)
            .deadline(far)
            .decode();
        match r {
            Ok(_) => assert_eq!(
                max, opcodes,
                "protocol {protocol}: max_opcodes={max} was accepted"
            ),
            Err(e) => match e.kind() {
                ErrorKind::LimitExceeded {
                    limit,
                    seen,
                    max: m,
                } => {
                    assert_eq!((*limit, *seen, *m), (LimitName::MaxOpcodes, opcodes, max));
                    assert_eq!(max, opcodes - 1, "{e}");
                }
                other => panic!("max_opcodes={max}: {other:?}"),
            },
        }
    }
}

/// A nesting refusal says the limit by name, its maximum, what it measures and where: the
/// STOP, where the depth of the finished value is checked.
#[test]
fn a_nesting_refusal_reads_well() {
    // 1,201 lists, each in the one before: EMPTY_LIST x 1201, APPEND x 1200, STOP.
    let mut p = b"\x80\x02".to_vec();
    p.extend(std::iter::repeat_n(b']', 1201));
    p.extend(std::iter::repeat_n(b'a', 1200));
    p.push(b'.');
    let e = Decoder::new(&p, &data()).decode().unwrap_err();
    assert_eq!(
        e.to_string(),
        "nesting depth 1001 is over max_nesting_depth 1000 (a value nested deeper than the \
         limit; the root is at depth 1) at offset 2403 (0x963, opcode 0x2e STOP)"
    );
}
