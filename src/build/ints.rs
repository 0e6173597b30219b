//! Runs of int opcodes (BININT1, BININT2, BININT, LONG1 of up to 8 bytes) read in one go.

use std::hint::select_unpredictable;

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

/// The bytes a block of [`int_blocks`] may read: [`INT_BLOCK`] opcodes of at most
/// [`INT_WINDOW`] bytes each.
pub(super) const INT_BLOCK_BYTES: usize = INT_BLOCK * INT_WINDOW;

/// The bytes of a shorter block near the end of the frame or input, where fewer than
/// [`INT_BLOCK_BYTES`] are left: 8 opcodes.
pub(super) const INT_TAIL_BYTES: usize = 8 * INT_WINDOW;

/// How [`int_blocks`] reads an opcode, by its byte. Its payload is `len_mask & the byte
/// after it` bytes long (LONG1's length byte; 0 for the others, whose payload is not
/// charged), it takes `step` bytes more, and the [`IntShape`] of its value is at row
/// `row | payload` of [`INT_SHAPES`], so that LONG1 (row 0) has a row for each length byte.
/// What the next opcode's position depends on (`step`, `len_mask`) is in this table, one
/// load from the opcode's byte: that position is the chain every opcode waits on.
#[derive(Clone, Copy)]
pub(super) struct IntOp {
    row: u16,
    len_mask: u8,
    step: u8,
}

/// How [`int_blocks`] makes an int: the value is the payload's first 8 bytes (after the
/// length byte when `long`, else after the opcode), masked with `mask`, then sign-extended
/// from bit `63 - shift` (`(w & mask) << shift >> shift`, arithmetic): BININT1 and BININT2
/// zero-extended, BININT and LONG1 two's complement, as CPython's `load_binint*` and
/// `_PyLong_FromByteArray(..., little_endian=1, is_signed=1)` read them. `int` is false for
/// what stops the run: an opcode not of the run, a LONG1 longer than 8 bytes.
#[derive(Clone, Copy)]
pub(super) struct IntShape {
    mask: u64,
    shift: u8,
    long: bool,
    int: bool,
}

/// The row of [`INT_SHAPES`] of BININT1, BININT2, BININT, and of what is no int opcode.
const ROW_BININT1: u16 = 256;
const ROW_BININT2: u16 = 257;
const ROW_BININT: u16 = 258;
const ROW_NOT_INT: u16 = 259;

/// The [`IntOp`] of an opcode [`int_blocks`] stops before.
const NOT_INT: IntOp = IntOp {
    row: ROW_NOT_INT,
    len_mask: 0,
    step: 1,
};

/// The [`IntOp`] of every byte: BININT1, BININT2, BININT, and LONG1 when `long1`.
// Evaluated at compile time only (into statics): an index out of bounds fails the build.
#[allow(clippy::indexing_slicing)]
const fn int_ops(long1: bool) -> [IntOp; 256] {
    let mut t = [NOT_INT; 256];
    t[Opcode::Binint1 as usize] = fixed_op(ROW_BININT1, 2);
    t[Opcode::Binint2 as usize] = fixed_op(ROW_BININT2, 3);
    t[Opcode::Binint as usize] = fixed_op(ROW_BININT, 5);
    if long1 {
        t[Opcode::Long1 as usize] = IntOp {
            row: 0,
            len_mask: 0xFF,
            step: 2,
        };
    }
    t
}

/// The rows of [`IntShape`]: LONG1 of each length byte (rows 0 to 255, ints up to 8 bytes),
/// BININT1, BININT2, BININT, and stops (512 rows, so a row masked with 511 is one).
// Evaluated at compile time only (into statics): an index out of bounds fails the build.
#[allow(clippy::indexing_slicing)]
const fn int_shapes() -> [IntShape; 512] {
    const STOP: IntShape = IntShape {
        mask: 0,
        shift: 0,
        long: false,
        int: false,
    };
    let mut t = [STOP; 512];
    let mut len = 0;
    while len <= 8 {
        t[len] = IntShape {
            mask: if len == 0 { 0 } else { u64::MAX },
            shift: ((64 - 8 * len) & 63) as u8,
            long: true,
            int: true,
        };
        len += 1;
    }
    t[ROW_BININT1 as usize] = fixed_shape(0xFF, 0);
    t[ROW_BININT2 as usize] = fixed_shape(0xFFFF, 0);
    t[ROW_BININT as usize] = fixed_shape(u64::MAX, 32);
    t
}

/// The [`IntOp`] of BININT1, BININT2 or BININT: no length byte.
const fn fixed_op(row: u16, step: u8) -> IntOp {
    IntOp {
        row,
        len_mask: 0,
        step,
    }
}

/// The [`IntShape`] of BININT1, BININT2 or BININT: the payload right after the opcode.
const fn fixed_shape(mask: u64, shift: u8) -> IntShape {
    IntShape {
        mask,
        shift,
        long: false,
        int: true,
    }
}

// `int_blocks` tells LONG1 from the other int opcodes by its high bit.
const _: () = assert!(
    Opcode::Long1 as u8 >= 0x80
        && (Opcode::Binint1 as u8) < 0x80
        && (Opcode::Binint2 as u8) < 0x80
        && (Opcode::Binint as u8) < 0x80
);

/// [`int_ops`] without LONG1 and with it, and [`int_shapes`].
static INT_OPS: [[IntOp; 256]; 2] = [int_ops(false), int_ops(true)];
static INT_SHAPES: [IntShape; 512] = int_shapes();

/// The fast part of [`int_run`], for a run longer than [`INT_BLOCK_AFTER`]: the same opcodes,
/// the same stopping rules and the same nodes, ids and charges, but each opcode read without
/// a branch that depends on which int opcode it is or on whether its value is shared. On a
/// list of mixed ints those branches mispredict on a third or more of the opcodes (which
/// opcode comes next, and whether the value fits in 31 bits, is as random as the data). What
/// differs between the opcodes is looked up by the opcode's byte and the next one
/// ([`IntOp`], [`IntShape`]), and the choices left are `select_unpredictable` (a conditional
/// move).
///
/// A block ([`int_block`]) reads the [`INT_BLOCK_BYTES`] bytes from its start (near `end`, a
/// block of 8 opcodes the [`INT_TAIL_BYTES`] from its start), each opcode from a window of
/// [`INT_WINDOW`] bytes within those, so the run stops short of the last bytes before `end`
/// (the caller's loop, [`int_steps`], reads those). Values
/// and ids are gathered in blocks of [`INT_BLOCK`]: every value is written to the block's next
/// free slot, which only a value outside the shared range keeps, and the block's nodes are
/// appended to the arena, and its ids pushed on the stack, at the block's end. A block never
/// holds more new nodes than the arena has room for or than arena ids remain, so the arena
/// does not grow; and a block starts only when the allocation budget covers its most costly
/// case (every opcode a LONG1 of 8 bytes), so it checks no charge of its own: what it
/// charges (a node's size an opcode, and LONG1's payload bytes) is added up at its end.
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
    let [no_long1, with_long1] = &INT_OPS;
    let ops = if room.long1 { with_long1 } else { no_long1 };
    let hay = input.get(..end).unwrap_or(input);
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
        // The arena index of the block's first new node (below `ARENA_END`, by `block`).
        let first = base as u32;
        // The block's bytes: as many as its opcodes could take at most, all before `end`;
        // near `end`, a shorter block in fewer bytes.
        let rest = hay.get(pos..).unwrap_or_default();
        let (block, read) = if let Some(chunk) = rest.first_chunk::<INT_BLOCK_BYTES>() {
            (
                block,
                int_block(chunk, ops, block, first, &mut vals, &mut ids),
            )
        } else if let Some(chunk) = rest.first_chunk::<INT_TAIL_BYTES>() {
            let block = block.min(INT_TAIL_BYTES / INT_WINDOW);
            (
                block,
                int_block(chunk, ops, block, first, &mut vals, &mut ids),
            )
        } else {
            return run;
        };
        let BlockRead {
            n,
            fresh,
            payload,
            off,
        } = read;
        pos += off;
        nodes.extend(
            vals.iter()
                .take(fresh as usize)
                .map(|&x| Node::Int(Word::int(x))),
        );
        stack.extend_from_slice(ids.get(..n).unwrap_or_default());
        run.count += n as u64;
        run.charged += n as u64 * NODE_BYTES + payload;
        run.pos = pos;
        // A block stopped short stopped at an opcode it does not read.
        if n < block || n == 0 {
            return run;
        }
    }
}

/// What [`int_block`] read: `n` opcodes (their ids in `ids[..n]`), `fresh` new nodes (their
/// values in `vals[..fresh]`), `payload` bytes of LONG1 to charge, `off` bytes taken.
struct BlockRead {
    n: usize,
    fresh: u32,
    payload: u64,
    off: usize,
}

/// One block of [`int_blocks`]: at most `block` opcodes (no more than `BYTES /
/// INT_WINDOW`, so that every window is in `chunk`) from the start of `chunk`, until one
/// that is not of the run. New nodes get the arena indices from `first` on.
#[inline(always)]
fn int_block<const BYTES: usize>(
    chunk: &[u8; BYTES],
    ops: &[IntOp; 256],
    block: usize,
    first: u32,
    vals: &mut [i64; INT_BLOCK],
    ids: &mut [NodeId; INT_BLOCK],
) -> BlockRead {
    let (mut n, mut fresh, mut payload, mut off) = (0usize, 0u32, 0u64, 0usize);
    while n < block {
        // No int opcode is longer than the window, so one whose window is in the block's
        // bytes ends in them too (and every window of the block's opcodes is).
        let Some(w) = chunk.get(off..).and_then(<[u8]>::first_chunk::<INT_WINDOW>) else {
            break;
        };
        let [b, len, ..] = *w;
        let op = ops.get(usize::from(b)).copied().unwrap_or(NOT_INT);
        let long_len = len & op.len_mask;
        let row = usize::from(op.row | u16::from(long_len)) & 511;
        let Some(&shape) = INT_SHAPES.get(row).filter(|s| s.int) else {
            break;
        };
        // The 8 bytes after the opcode, and after LONG1's length byte.
        let after_op = w.get(1..).and_then(<[u8]>::first_chunk::<8>);
        let after_len = w.last_chunk::<8>();
        let word = select_unpredictable(
            shape.long,
            after_len.map_or(0, |c| u64::from_le_bytes(*c)),
            after_op.map_or(0, |c| u64::from_le_bytes(*c)),
        );
        let shift = u32::from(shape.shift);
        let x = (((word & shape.mask) << shift) as i64) >> shift;
        let (held_id, held) = NodeId::int_bits(x);
        let id = select_unpredictable(held, held_id, first + fresh);
        if let Some(slot) = vals.get_mut(fresh as usize % INT_BLOCK) {
            *slot = x;
        }
        fresh += u32::from(!held);
        if let Some(slot) = ids.get_mut(n % INT_BLOCK) {
            *slot = NodeId(id);
        }
        n += 1;
        payload += u64::from(long_len);
        // The next opcode's position is the chain each opcode waits on: LONG1's length
        // byte is added from the opcode's byte alone (LONG1 is the one int opcode with
        // its high bit set; what else has it stops the block above), while the table
        // load of `step` is under way.
        off += usize::from(len & ((b as i8 >> 7) as u8));
        off += usize::from(op.step);
    }
    BlockRead {
        n,
        fresh,
        payload,
        off,
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
