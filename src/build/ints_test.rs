use super::*;
use crate::value::{Node, NodeId, Word};

/// The block loop of a run of ints (`int_blocks`, then `int_steps` for the rest) against
/// the one-opcode-at-a-time loop alone, on random runs: BININT1/2/BININT and LONG1 of 0 to
/// 9 bytes (values near the ends of the ints held in an id and far from them), broken by other bytes,
/// cut by the end of a frame or of the input, with random room (opcodes, bytes, LONG1
/// allowed) and arenas of random spare capacity. Both must stop at the same opcode with
/// the same count and charge, and push the same ids and nodes.
#[test]
fn int_blocks_read_what_the_careful_loop_reads() {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n.max(1)
    };
    let mut blocked = 0;
    for _ in 0..4000 {
        let mut input = vec![0x80, 0x04];
        let ops = rnd(300);
        for _ in 0..ops {
            // Around the ends of the ints held in an id (-2**30, 2**30 - 1), small ones,
            // and any.
            let near: i64 = match rnd(4) {
                0 => -(1 << 30) - 2 + rnd(4) as i64,
                1 => (1 << 30) - 2 + rnd(4) as i64,
                2 => rnd(300) as i64,
                _ => (rnd(u64::MAX) as i64) >> rnd(64),
            };
            match rnd(12) {
                0 => input.extend_from_slice(&[b'K', near as u8]),
                1 => {
                    input.push(b'M');
                    input.extend_from_slice(&(near as u16).to_le_bytes());
                }
                2..=4 => {
                    input.push(b'J');
                    input.extend_from_slice(&(near as i32).to_le_bytes());
                }
                5..=7 => {
                    let len = if rnd(40) == 0 { 9 } else { rnd(9) as usize };
                    input.extend_from_slice(&[0x8a, len as u8]);
                    let bytes = near.to_le_bytes();
                    let fill = if near < 0 { 0xff } else { 0 };
                    input.extend((0..len).map(|i| bytes.get(i).copied().unwrap_or(fill)));
                }
                8 if rnd(40) == 0 => input.push(b'N'),
                _ => input.extend_from_slice(&[b'K', rnd(256) as u8]),
            }
        }
        let start = 2;
        let end = if rnd(3) == 0 {
            start + rnd(input.len() as u64) as usize
        } else {
            input.len()
        };
        let room = IntRoom {
            ops: if rnd(3) == 0 { rnd(400) } else { u64::MAX },
            bytes: if rnd(3) == 0 {
                rnd(300 * (NODE_BYTES + 9))
            } else {
                u64::MAX
            },
            long1: rnd(4) != 0,
        };
        let capacity = rnd(320) as usize;
        let before = rnd(capacity as u64 + 1) as usize;
        let arena = || {
            let mut nodes: Vec<Node> = Vec::with_capacity(capacity);
            nodes.extend((0..before).map(|i| Node::Int(Word::int(i as i64))));
            nodes
        };
        let ints = |nodes: &[Node]| -> Vec<i64> {
            nodes
                .iter()
                .map(|v| match v {
                    Node::Int(x) => x.get_i64(),
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        let (mut fast_nodes, mut fast_stack) = (arena(), vec![NodeId(7)]);
        let fast = int_run(
            &input,
            start,
            end,
            IntRoom { ..room },
            &mut fast_nodes,
            &mut fast_stack,
        );
        let (mut slow_nodes, mut slow_stack) = (arena(), vec![NodeId(7)]);
        let empty = IntRun {
            pos: start,
            count: 0,
            charged: 0,
        };
        let slow = int_steps(&input, end, &room, &mut slow_nodes, &mut slow_stack, empty);
        assert_eq!(
            (fast.pos, fast.count, fast.charged),
            (slow.pos, slow.count, slow.charged),
            "{input:02x?} end {end}"
        );
        assert_eq!(fast_stack, slow_stack);
        assert_eq!(ints(&fast_nodes), ints(&slow_nodes));
        assert_eq!(fast_nodes.capacity(), slow_nodes.capacity());
        blocked += usize::from(fast.count >= INT_BLOCK as u64);
    }
    // Enough of the cases ran a whole block (the rest stopped early on purpose).
    assert!(blocked > 500, "{blocked}");
}

/// Every width the block loop reads, at its ends and around the ints held in an id: LONG1
/// of 0 to 8 bytes, BININT1, BININT2 and BININT, in a run long enough for several blocks,
/// then a LONG1 of 9 bytes, which stops the run. Each value is worked out here from its
/// bytes through `i128`: LONG1's payload as two's complement little-endian (CPython's
/// `_PyLong_FromByteArray(..., little_endian=1, is_signed=1)`, 0 when empty), BININT1 and
/// BININT2 unsigned, BININT signed. An int of 31 bits is held in its id, any other is a new
/// node; the run charges a node's size for each and LONG1's payload bytes besides.
#[test]
fn int_blocks_read_every_width_at_its_ends() {
    let mut input = vec![0x80, 0x04];
    let mut want: Vec<i64> = Vec::new();
    let mut payload = 0u64;
    let held = [-(1i128 << 30) - 1, -(1 << 30), (1 << 30) - 1, 1 << 30];
    for round in 0..3 {
        // The careful loop reads a run's first opcodes; the blocks the rest.
        for i in 0..INT_BLOCK_AFTER as u8 {
            input.extend_from_slice(&[b'K', i.wrapping_mul(97).wrapping_add(round)]);
            want.push(i64::from(i.wrapping_mul(97).wrapping_add(round)));
        }
        for len in 0..=8u32 {
            let bits = 8 * len;
            let (lo, hi) = if len == 0 {
                (0, 0)
            } else {
                (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
            };
            let mut vals = vec![lo, hi, lo + 1, hi - 1, -1, 0, 1, 0x7F, -0x80];
            vals.extend(held);
            for v in vals.into_iter().filter(|v| (lo..=hi).contains(v)) {
                input.extend_from_slice(&[0x8a, len as u8]);
                input.extend_from_slice(&v.to_le_bytes()[..len as usize]);
                payload += u64::from(len);
                want.push(v as i64);
            }
        }
        for v in [0u8, 1, 0x7F, 0x80, 0xFF] {
            input.extend_from_slice(&[b'K', v]);
            want.push(i64::from(v));
        }
        for v in [0u16, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF] {
            input.push(b'M');
            input.extend_from_slice(&v.to_le_bytes());
            want.push(i64::from(v));
        }
        for v in [i32::MIN, i32::MIN + 1, -1, 0, i32::MAX]
            .into_iter()
            .map(i128::from)
            .chain(held)
        {
            input.push(b'J');
            input.extend_from_slice(&(v as i32).to_le_bytes());
            want.push(v as i64);
        }
    }
    let stop = input.len();
    input.extend_from_slice(&[0x8a, 9, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
    input.extend(std::iter::repeat_n(b'N', INT_BLOCK_BYTES));
    let room = IntRoom {
        ops: u64::MAX,
        bytes: u64::MAX,
        long1: true,
    };
    let (mut nodes, mut stack) = (Vec::with_capacity(want.len()), Vec::new());
    let run = int_run(&input, 2, input.len(), room, &mut nodes, &mut stack);
    assert_eq!(run.pos, stop);
    assert_eq!(run.count, want.len() as u64);
    assert_eq!(run.charged, want.len() as u64 * NODE_BYTES + payload);
    assert_eq!(stack.len(), want.len());
    let mut fresh = 0;
    for (i, (&id, &v)) in stack.iter().zip(&want).enumerate() {
        match NodeId::int(v) {
            Some(shared) => assert_eq!(id, shared, "item {i}: {v}"),
            None => {
                assert_eq!(id, NodeId(fresh), "item {i}: {v}");
                match nodes.get(fresh as usize) {
                    Some(Node::Int(x)) => assert_eq!(x.get_i64(), v, "item {i}"),
                    other => panic!("item {i}: {other:?}"),
                }
                fresh += 1;
            }
        }
    }
    assert_eq!(nodes.len(), fresh as usize);
    // Values outside the held range were read by the blocks too, not only by the careful loop.
    assert!(fresh > 3 * 30, "{fresh}");
}
