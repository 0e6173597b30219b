//! Runs of int opcodes (src/build/ints.rs: `int_run`, `int_blocks`) against the careful path
//! (`Decoder::careful_only`) on generated pickles built to hit the blocks' edges: runs that
//! end exactly at a frame's end, at the input's end or at a 640-byte chunk's end, LONG1 of 0
//! to 12 bytes, FRAMEs that cut an int, input cut mid-int, memo PUT/GET between ints, and
//! every limit the run checks set so that it runs out in the middle of a block.
//!
//! Both paths must decode to the same typed JSON, or refuse with the same error kind at the
//! same offset.

// Test code: a failed invariant is a panic, by design.
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use picklewarden::{Decoder, Error, LimitName, Limits, Policy};

/// xorshift64*: a fixed sequence, so a failure names its case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One int opcode with a random argument; LONG1 of 0 to 12 bytes.
fn int_op(rng: &mut Rng, out: &mut Vec<u8>) {
    match rng.below(5) {
        0 => out.extend([b'K', rng.next() as u8]),
        1 => {
            out.push(b'M');
            out.extend((rng.next() as u16).to_le_bytes());
        }
        2 => {
            out.push(b'J');
            let v = match rng.below(3) {
                0 => rng.next() as i32,
                1 => (rng.next() as i32) >> 20,
                _ => i32::MIN + rng.below(3) as i32,
            };
            out.extend(v.to_le_bytes());
        }
        _ => {
            let len = match rng.below(6) {
                0 => 0,
                1 => 8,
                2 => 9 + rng.below(4) as usize,
                _ => rng.below(9) as usize,
            };
            out.extend([0x8a, len as u8]);
            for _ in 0..len {
                out.push(rng.next() as u8);
            }
        }
    }
}

/// The body of a list of ints (after EMPTY_LIST): MARK, a run of ints with now and then a
/// memo PUT/GET, APPENDS; several such runs.
fn body(rng: &mut Rng, cuts: &mut Vec<usize>) -> Vec<u8> {
    let mut out = vec![b']', b'q', 0];
    let runs = 1 + rng.below(3);
    for _ in 0..runs {
        out.push(b'(');
        let n = match rng.below(4) {
            0 => rng.below(20),
            1 => 60 + rng.below(10),
            _ => rng.below(300),
        };
        for _ in 0..n {
            cuts.push(out.len());
            match rng.below(60) {
                0 => out.extend([b'q', 1]),
                1 => out.extend([b'h', 0]),
                2 => out.extend([b'h', 1]),
                _ => int_op(rng, &mut out),
            }
        }
        out.push(b'e');
    }
    out.push(b'.');
    out
}

/// A protocol 4 pickle of `body`, cut in frames at random points (a frame may end inside an
/// int), or unframed; sometimes cut short.
fn pickle(rng: &mut Rng) -> Vec<u8> {
    let mut cuts = Vec::new();
    let body = body(rng, &mut cuts);
    let mut out = vec![0x80, 4];
    if rng.below(3) == 0 {
        out.extend(&body);
    } else {
        let mut at = 0;
        while at < body.len() {
            let len = match rng.below(6) {
                0 => body.len() - at,
                // Frames that end between two opcodes (the run stops at the frame's end).
                1 | 2 => cuts
                    .get(rng.below(cuts.len() as u64) as usize)
                    .map_or(1, |&c| c.saturating_sub(at).max(1)),
                3 => rng.below(12) as usize + 1,
                _ => rng.below(800) as usize + 1,
            }
            .min(body.len() - at);
            out.push(0x95);
            out.extend((len as u64).to_le_bytes());
            out.extend(&body[at..at + len]);
            at += len;
        }
    }
    if rng.below(5) == 0 {
        let cut = rng.below(out.len() as u64) as usize;
        out.truncate(cut);
    }
    out
}

fn decode(data: &[u8], policy: &Policy, limits: Limits, careful: bool) -> Result<String, Error> {
    let mut d = Decoder::new(data, policy).limits(limits);
    if careful {
        d = d.careful_only();
    }
    Ok(picklewarden::json::to_typed_json(&d.decode()?))
}

fn agree(case: u64, data: &[u8], policy: &Policy, limits: Limits) -> bool {
    let fast = decode(data, policy, limits, false);
    let careful = decode(data, policy, limits, true);
    match (&fast, &careful) {
        (Ok(a), Ok(b)) => {
            assert!(a == b, "case {case}: the two paths decode differently");
            true
        }
        (Err(a), Err(b)) => {
            assert_eq!(
                (a.kind(), a.offset()),
                (b.kind(), b.offset()),
                "case {case}: fast refused with {a}, careful with {b}; {}",
                hex(data)
            );
            false
        }
        _ => panic!(
            "case {case}: fast {:?}, careful {:?}; {}",
            fast.as_ref().err(),
            careful.as_ref().err(),
            hex(data)
        ),
    }
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn int_runs_decode_count_and_charge_as_the_careful_path() {
    let policy = Policy::data();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut accepted = 0;
    for case in 0..20000 {
        let data = pickle(&mut rng);
        let mut limits = policy.limits;
        let ok = agree(case, &data, &policy, limits);
        accepted += u64::from(ok);
        // Every limit the run checks, at random values around what this pickle needs.
        for limit in [
            LimitName::MaxOpcodes,
            LimitName::MaxNodes,
            LimitName::MaxAllocBytes,
            LimitName::MaxStackLen,
            LimitName::MaxLongBytes,
        ] {
            let scale = match limit {
                LimitName::MaxAllocBytes => 64 * data.len() as u64,
                LimitName::MaxLongBytes => 12,
                _ => data.len() as u64 / 2 + 2,
            };
            for _ in 0..3 {
                limits = policy.limits;
                limits.set(limit, rng.below(scale));
                agree(case, &data, &policy, limits);
            }
        }
    }
    assert!(accepted > 5000, "only {accepted} pickles decoded");
}
