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
