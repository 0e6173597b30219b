//! Runs of int opcodes (BININT1, BININT2, BININT, LONG1 of up to 8 bytes) read in one go.

use super::budget::NODE_BYTES;
use super::machine::Machine;
use crate::opcode::{Opcode, BININT_ARG};
use crate::reader::binint_at;
use crate::value::{Node, NodeId, Word, ARENA_END};

/// What an int run may use: opcodes (each also a value and a stack slot), bytes of the
/// allocation budget, and whether LONG1 of up to 8 bytes is within `max_long_bytes`.
pub(super) struct IntRoom {
    ops: u64,
    bytes: u64,
    long1: bool,
}

/// Where an int run stopped, how many opcodes it read, and the bytes it charged.
pub(super) struct IntRun {
    pos: usize,
    count: u64,
    charged: u64,
}

/// Walks a run of int opcodes: BININT1, BININT2, BININT, and LONG1 of at most 8 bytes when
/// `room.long1`. From `pos`, reading no byte at or past `end` (the end of the frame or of the
/// input), it pushes each int's id on `stack`: the int itself for one of 31 bits
/// ([`NodeId::int`]), else a new node in
/// `nodes` (charged as `Machine::node` charges it: the node's size, plus the payload for
/// LONG1). It stops before an opcode that is not of the run, whose argument would cross
/// `end`, that would pass `room`, or that needs the arena to grow, having consumed nothing of
/// it.
///
/// A function of its own, on plain arguments, so that the cursor and counters stay in
/// registers (as fields behind `&mut self` they went through memory on every opcode).
#[inline]
pub(super) fn int_run(
    input: &[u8],
    pos: usize,
    end: usize,
    room: IntRoom,
    nodes: &mut Vec<Node>,
    stack: &mut Vec<NodeId>,
) -> IntRun {
    let end = end.min(input.len());
    let run = IntRun {
        pos,
        count: 0,
        charged: 0,
    };
    // Most runs in mixed data are a few ints long: those never pay for a block's setup.
    let head = IntRoom {
        ops: room.ops.min(INT_BLOCK_AFTER),
        ..room
    };
    let run = int_steps(input, end, &head, nodes, stack, run);
    if run.count < head.ops || head.ops == room.ops {
        return run;
    }
    int_long_run(input, end, &room, nodes, stack, run)
}

/// The rest of a run longer than [`INT_BLOCK_AFTER`]: blocks, then the careful loop for what
/// they leave. Out of line, so that the short runs' loop inlined in the build stays small.
#[inline(never)]
pub(super) fn int_long_run(
    input: &[u8],
    end: usize,
    room: &IntRoom,
    nodes: &mut Vec<Node>,
    stack: &mut Vec<NodeId>,
    run: IntRun,
) -> IntRun {
    let run = int_blocks(input, end, room, nodes, stack, run);
    int_steps(input, end, room, nodes, stack, run)
}

/// How many opcodes of a run of ints [`int_steps`] reads before [`int_blocks`] takes over.
pub(super) const INT_BLOCK_AFTER: u64 = 16;

/// The careful part of [`int_run`]: one opcode at a time, from where `run` stopped, for a
/// run's first [`INT_BLOCK_AFTER`] opcodes and for what [`int_blocks`] does not read (the
/// input's last bytes, an arena with no room, and the opcode that stopped it, which this loop
/// then stops before as well).
#[inline(always)]
pub(super) fn int_steps(
    input: &[u8],
    end: usize,
    room: &IntRoom,
    nodes: &mut Vec<Node>,
    stack: &mut Vec<NodeId>,
    mut run: IntRun,
) -> IntRun {
    let mut pos = run.pos;
    while run.count < room.ops {
        let Some(&b) = input.get(pos) else { break };
        let arg = BININT_ARG.get(usize::from(b)).copied().unwrap_or(0);
        let (next, x, extra) = if arg != 0 {
            let next = pos + usize::from(arg);
            if next > end {
                break;
            }
            (next, binint_at(input, pos + 1, arg - 1), 0)
        } else if b == Opcode::Long1.byte() && room.long1 {
            let Some(&len) = input.get(pos + 1) else {
                break;
            };
            let next = pos + 2 + usize::from(len);
            if len > 8 || next > end {
                break;
            }
            let Some(bytes) = input.get(pos + 2..next) else {
                break;
            };
            (next, long_le(bytes), u64::from(len))
        } else {
            break;
        };
        let cost = NODE_BYTES + extra;
        if cost > room.bytes - run.charged {
            break;
        }
        let id = match NodeId::int(x) {
            Some(id) => id,
            None => {
                let len = nodes.len();
                let Some(id) = u32::try_from(len).ok().filter(|&i| i < ARENA_END) else {
                    break;
                };
                if len == nodes.capacity() {
                    break;
                }
                nodes.push(Node::Int(Word::int(x)));
                NodeId(id)
            }
        };
        stack.push(id);
        run.charged += cost;
        run.count += 1;
        pos = next;
        run.pos = pos;
    }
    run
}

/// How many opcodes [`int_blocks`] reads before it writes their nodes and ids out.
pub(super) const INT_BLOCK: usize = 64;

/// The bytes from an opcode's first that [`int_blocks`] reads at once: the opcode, LONG1's
/// length byte and 8 payload bytes (for BININT1/2/BININT the payload starts a byte earlier).
pub(super) const INT_WINDOW: usize = 10;

/// The fast part of [`int_run`], for a run longer than [`INT_BLOCK_AFTER`]: the same opcodes, the same stopping rules and the same
/// nodes, ids and charges, but each opcode read without a branch that depends on which int
/// opcode it is or on whether its value is shared. On a list of mixed ints those branches
/// mispredict on a third or more of the opcodes (which opcode comes next, and whether the
/// value fits in 31 bits, is as random as the data).
///
/// Each opcode is read from a window of [`INT_WINDOW`] bytes that ends at or before `end`, so
/// the run stops short of the last bytes before `end` (the caller's loop reads those). Values
/// and ids are gathered in blocks of [`INT_BLOCK`]: every value is written to the block's next
/// free slot, which only a value outside the shared range keeps, and the block's nodes are
/// appended to the arena, and its ids pushed on the stack, at the block's end. A block never
/// holds more new nodes than the arena has room for or than arena ids remain, so the arena
/// does not grow; and a block starts only when the allocation budget covers its most costly
/// case (every opcode a LONG1 of 8 bytes), so it checks no charge of its own.
pub(super) fn int_blocks(
    input: &[u8],
    end: usize,
    room: &IntRoom,
    nodes: &mut Vec<Node>,
    stack: &mut Vec<NodeId>,
    mut run: IntRun,
) -> IntRun {
    let mut pos = run.pos;
    let mut vals = [0i64; INT_BLOCK];
    let mut ids = [NodeId(0); INT_BLOCK];
    // The last position a window may start at (it then ends at `end`).
    let Some(last) = end.checked_sub(INT_WINDOW) else {
        return run;
    };
    loop {
        let base = nodes.len();
        let ops_left = usize::try_from(room.ops.saturating_sub(run.count)).unwrap_or(usize::MAX);
        let block = INT_BLOCK
            .min(nodes.capacity().saturating_sub(base))
            .min((ARENA_END as usize).saturating_sub(base))
            .min(ops_left);
        // A block charges at most this much, so its opcodes need no check of their own.
        if room.bytes - run.charged < block as u64 * (NODE_BYTES + 8) {
            return run;
        }
        let (mut n, mut fresh) = (0usize, 0usize);
        let mut stopped = false;
        while n < block {
            // No int opcode is longer than the window, so one that starts a window before
            // `end` also ends before it.
            let window = input
                .get(pos..)
                .filter(|_| pos <= last)
                .and_then(<[u8]>::first_chunk::<INT_WINDOW>);
            let Some(&[b, len, p0, p1, p2, p3, p4, p5, p6, p7]) = window else {
                stopped = true;
                break;
            };
            let arg = BININT_ARG.get(usize::from(b)).copied().unwrap_or(0);
            let long = b == Opcode::Long1.byte() && room.long1;
            // Payload size in bytes and where it starts: BININT1/2/BININT after the opcode,
            // LONG1 after its length byte.
            let size = if long {
                usize::from(len)
            } else {
                usize::from(arg.saturating_sub(1))
            };
            let next = pos + 1 + usize::from(long) + size;
            let extra = if long { u64::from(len) } else { 0 };
            let cost = NODE_BYTES + extra;
            if (arg == 0 && !long) || size > 8 {
                stopped = true;
                break;
            }
            let word = u64::from_le_bytes([p0, p1, p2, p3, p4, p5, p6, p7]);
            let raw = if long {
                word
            } else {
                (word << 8) | u64::from(len)
            };
            // The low `size` bytes, sign-extended for BININT and LONG1 (two's complement, as
            // `load_binint` and `_PyLong_FromByteArray` read them), zero-extended for
            // BININT1 and BININT2. `size` is 0 only for LONG1's empty payload, which is 0.
            let shift = (64 - 8 * size as u32) & 63;
            let up = raw << shift;
            let signed = long || b == Opcode::Binint.byte();
            let x = if signed {
                (up as i64) >> shift
            } else {
                (up >> shift) as i64
            };
            let x = if size == 0 { 0 } else { x };
            // The id without a branch: the int held in its id or the next arena index, by mask.
            let (held_id, held) = NodeId::int_bits(x);
            let keep = u32::from(!held);
            let mask = keep.wrapping_sub(1);
            let id = (held_id & mask) | ((base + fresh) as u32 & !mask);
            if let Some(slot) = vals.get_mut(fresh % INT_BLOCK) {
                *slot = x;
            }
            fresh += keep as usize;
            if let Some(slot) = ids.get_mut(n % INT_BLOCK) {
                *slot = NodeId(id);
            }
            n += 1;
            run.charged += cost;
            pos = next;
        }
        nodes.extend(vals.iter().take(fresh).map(|&x| Node::Int(Word::int(x))));
        stack.extend_from_slice(ids.get(..n).unwrap_or_default());
        run.count += n as u64;
        run.pos = pos;
        if stopped || n == 0 {
            return run;
        }
    }
}

/// A LONG1/LONG4 payload of at most 8 bytes as an i64: two's complement, little-endian,
/// sign-extended (as CPython's `_PyLong_FromByteArray(..., little_endian=1, is_signed=1)`).
pub(super) fn long_le(bytes: &[u8]) -> i64 {
    let fill = if bytes.last().is_some_and(|&b| b & 0x80 != 0) {
        0xFF
    } else {
        0
    };
    let mut buf = [fill; 8];
    if let Some(head) = buf.get_mut(..bytes.len()) {
        head.copy_from_slice(bytes);
    }
    i64::from_le_bytes(buf)
}

impl<'a, 'p> Machine<'a, 'p> {
    /// Reads on through the int opcodes that follow one (see [`int_run`]), at most `room` of
    /// them, with the cursor, counters and budgets in locals for the run, written back once.
    /// The run stops before any opcode it would not read in full or that a limit would
    /// refuse, which the general path then reads with the usual checks, errors and offsets.
    #[inline]
    pub(super) fn int_run(&mut self, room: u64) {
        let depth = (self.stack.len() + self.marks.len()) as u64;
        let ops = self
            .limits
            .max_opcodes
            .saturating_sub(self.opcodes)
            .min(room)
            .min(self.limits.max_stack_len.saturating_sub(depth))
            .min(self.limits.max_nodes.saturating_sub(self.created));
        let run = int_run(
            self.r.input,
            self.r.pos,
            self.r.read_end(),
            IntRoom {
                ops,
                bytes: self.limits.max_alloc_bytes.saturating_sub(self.alloc),
                long1: self.limits.max_long_bytes >= 8,
            },
            &mut self.arena.nodes,
            &mut self.stack,
        );
        self.r.pos = run.pos;
        self.opcodes += run.count;
        self.created += run.count;
        self.alloc += run.charged;
    }
}

#[cfg(test)]
#[path = "ints_test.rs"]
mod tests;
