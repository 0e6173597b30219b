//! Runs of scalar opcodes read in one go ([`scalar_run`]): a list of ints is mostly BININT,
//! BININT1, BININT2, LONG1, BINFLOAT, NONE, NEWTRUE and NEWFALSE, which the scan reads with
//! their steps worked out a chunk at a time instead of through the interpreter's dispatch.

use crate::opcode::{Opcode, SCALAR_ARG};

/// Walks a run of opcodes that each push one scalar and touch nothing else: those of
/// [`SCALAR_ARG`], and LONG1 when `long1` (its longest argument, 255 bytes, is within
/// `max_long_bytes`). From `pos`, reading no byte at or past `end` (the end of the frame or
/// of the input) and at most `limit` opcodes, each counted in `counts`. Returns where the run
/// stopped and how many opcodes it read. It stops before an opcode that is not of the run or
/// whose argument would cross `end`, having consumed nothing of it.
///
/// A function of its own, on plain arguments, so that the cursor and the count stay in
/// registers (as fields behind `&mut self` they went through memory on every opcode).
/// The first [`STEPS_AFTER`] opcodes are read one at a time ([`scalar_steps`]); a run that
/// goes on past them continues in [`scalar_long_run`].
#[inline]
pub(super) fn scalar_run(
    input: &[u8],
    pos: usize,
    end: usize,
    limit: u64,
    long1: bool,
    counts: &mut [u64; 256],
) -> (usize, u64) {
    let first = limit.min(STEPS_AFTER);
    let (pos, n) = scalar_steps(input, pos, end, first, long1, counts);
    if n < first || n == limit {
        return (pos, n);
    }
    let (pos, more) = scalar_long_run(input, pos, end, limit - n, long1, counts);
    (pos, n + more)
}

/// How many opcodes of a scalar run [`scalar_steps`] reads before the run goes on in
/// [`scalar_long_run`]: the runs of small objects are mostly shorter (a tuple's few items),
/// and a list of ints is thousands long.
const STEPS_AFTER: u64 = 16;

/// The input bytes whose steps [`scalar_long_run`] works out at a time.
const STEP_CHUNK: usize = 256;

/// [`scalar_run`] for a long run, a chunk of [`STEP_CHUNK`] input bytes at a time. The step
/// from each byte to the opcode after it, as if an opcode started there (0 where none of the
/// run's would), is worked out for every byte of the chunk at once ([`chunk_steps`]), and
/// the run then walks the chunk by one table read and one add per opcode. Reading one
/// opcode after another (the step found from the opcode byte through [`SCALAR_ARG`], two
/// loads in a row) is bounded by the latency of that chain, about 11 cycles an opcode on
/// a list of ints; the chunk's steps cost no more than its walk saves. The tail of the
/// input, shorter than a chunk and its one byte of lookahead, is read by [`scalar_steps`].
#[inline(never)]
fn scalar_long_run(
    input: &[u8],
    mut pos: usize,
    end: usize,
    limit: u64,
    long1: bool,
    counts: &mut [u64; 256],
) -> (usize, u64) {
    let end = end.min(input.len());
    let mut n = 0u64;
    let mut steps = [0u8; STEP_CHUNK];
    while let Some(window) = input
        .get(pos..pos.saturating_add(STEP_CHUNK + 1))
        .and_then(|w| <&[u8; STEP_CHUNK + 1]>::try_from(w).ok())
    {
        chunk_steps(window, &mut steps, long1);
        let mut p = 0usize;
        while let (Some(&step), Some(&b)) = (steps.get(p), window.get(p)) {
            let next = pos + p + usize::from(step);
            if step == 0 || next > end || n == limit {
                return (pos + p, n);
            }
            if let Some(c) = counts.get_mut(usize::from(b)) {
                *c += 1;
            }
            n += 1;
            p += usize::from(step);
        }
        pos += p;
    }
    let (pos, more) = scalar_steps(input, pos, end, limit - n, long1, counts);
    (pos, n + more)
}

/// The step of a scalar run's opcode at each byte of `window` but its last (the byte after
/// the chunk, which only LONG1's length may need), into `steps`: [`SCALAR_ARG`]'s entry, or
/// for LONG1 when `long1` 2 + its length byte when that is at most 253 (a step fits a byte;
/// a longer LONG1 ends the run and is read by the general path). 16 bytes at a time with
/// SSE2 (every x86-64 CPU), through safe_arch.
#[cfg(target_arch = "x86_64")]
#[inline]
fn chunk_steps(window: &[u8; STEP_CHUNK + 1], steps: &mut [u8; STEP_CHUNK], long1: bool) {
    use safe_arch::{
        add_i8_m128i, bitand_m128i, bitor_m128i, cmp_eq_mask_i8_m128i, load_unaligned_m128i, m128i,
        min_u8_m128i, set_splat_i8_m128i, store_unaligned_m128i,
    };
    let splat = |b: u8| set_splat_i8_m128i(i8::from_ne_bytes([b]));
    let ones = if long1 { splat(0xff) } else { m128i::default() };
    for (k, out) in steps.chunks_exact_mut(16).enumerate() {
        let at = k * 16;
        let (Some(v), Some(after)) = (
            window
                .get(at..at + 16)
                .and_then(|w| <&[u8; 16]>::try_from(w).ok()),
            window
                .get(at + 1..at + 17)
                .and_then(|w| <&[u8; 16]>::try_from(w).ok()),
        ) else {
            return;
        };
        let (v, after) = (load_unaligned_m128i(v), load_unaligned_m128i(after));
        let is = |op: Opcode| cmp_eq_mask_i8_m128i(v, splat(op.byte()));
        let with = |op: Opcode, step: u8| bitand_m128i(is(op), splat(step));
        let mut s = bitor_m128i(
            bitor_m128i(with(Opcode::Binint1, 2), with(Opcode::Binint2, 3)),
            bitor_m128i(with(Opcode::Binint, 5), with(Opcode::Binfloat, 9)),
        );
        let one = bitor_m128i(
            bitor_m128i(is(Opcode::None), is(Opcode::Newtrue)),
            is(Opcode::Newfalse),
        );
        s = bitor_m128i(s, bitand_m128i(one, splat(1)));
        // LONG1 whose length byte is at most 253: min(len, 253) == len.
        let short = cmp_eq_mask_i8_m128i(min_u8_m128i(after, splat(253)), after);
        let long = bitand_m128i(bitand_m128i(is(Opcode::Long1), short), ones);
        s = bitor_m128i(s, bitand_m128i(long, add_i8_m128i(after, splat(2))));
        if let Ok(out) = <&mut [u8; 16]>::try_from(out) {
            store_unaligned_m128i(out, s);
        }
    }
}

/// [`chunk_steps`] a byte at a time, on other architectures (and as the SSE2 version's
/// oracle in the tests).
#[cfg_attr(target_arch = "x86_64", cfg(test))]
fn chunk_steps_bytes(window: &[u8; STEP_CHUNK + 1], steps: &mut [u8; STEP_CHUNK], long1: bool) {
    for (i, out) in steps.iter_mut().enumerate() {
        let (Some(&b), Some(&len)) = (window.get(i), window.get(i + 1)) else {
            return;
        };
        *out = if b == Opcode::Long1.byte() {
            if long1 && len <= 253 {
                2 + len
            } else {
                0
            }
        } else {
            SCALAR_ARG.get(usize::from(b)).copied().unwrap_or(0)
        };
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn chunk_steps(window: &[u8; STEP_CHUNK + 1], steps: &mut [u8; STEP_CHUNK], long1: bool) {
    chunk_steps_bytes(window, steps, long1)
}

/// [`scalar_run`] one opcode at a time: the opcode and the byte after it are read, and the
/// step chosen from them.
#[inline]
fn scalar_steps(
    input: &[u8],
    mut pos: usize,
    end: usize,
    limit: u64,
    long1: bool,
    counts: &mut [u64; 256],
) -> (usize, u64) {
    let end = end.min(input.len());
    let mut n = 0u64;
    while n < limit {
        // The opcode and the byte after it (LONG1's length), read together so that the step
        // is chosen without a branch on the opcode: on a list of mixed ints, which opcode
        // comes next is as random as the data. (A run never reads the input's last byte;
        // the general path does.)
        let Some(&[b, len]) = input
            .get(pos..pos.saturating_add(2))
            .and_then(|w| <&[u8; 2]>::try_from(w).ok())
        else {
            break;
        };
        let arg = SCALAR_ARG.get(usize::from(b)).copied().unwrap_or(0);
        let long = b == Opcode::Long1.byte() && long1;
        let step = if long {
            2 + usize::from(len)
        } else {
            usize::from(arg)
        };
        let next = pos + step;
        if step == 0 || next > end {
            break;
        }
        if let Some(c) = counts.get_mut(usize::from(b)) {
            *c += 1;
        }
        pos = next;
        n += 1;
    }
    (pos, n)
}

#[cfg(test)]
#[path = "run_test.rs"]
mod tests;
