//! Unit tests of the scan's scalar runs.

use super::*;

/// The SSE2 steps equal the byte loop's for every opcode byte, every length byte after
/// it and both settings of `long1`, at every lane.
#[test]
fn chunk_steps_match_the_byte_loop() {
    for long1 in [false, true] {
        for b in 0..=255u8 {
            let mut window = [0u8; STEP_CHUNK + 1];
            // Opcode b at every even offset, a length byte counting up after it.
            for (i, w) in window.iter_mut().enumerate() {
                *w = if i % 2 == 0 { b } else { (i / 2) as u8 };
            }
            let (mut simd, mut bytes) = ([0u8; STEP_CHUNK], [0u8; STEP_CHUNK]);
            chunk_steps(&window, &mut simd, long1);
            chunk_steps_bytes(&window, &mut bytes, long1);
            assert_eq!(simd, bytes, "opcode {b:#04x}, long1 {long1}");
            for len in 0..=255u8 {
                window.fill(len);
                window[0] = b;
                window[STEP_CHUNK - 1] = b;
                chunk_steps(&window, &mut simd, long1);
                chunk_steps_bytes(&window, &mut bytes, long1);
                assert_eq!(simd, bytes, "opcode {b:#04x}, length {len}, long1 {long1}");
            }
        }
    }
    // What the steps are, independently of both: BININT2 3, LONG1 2 + its length.
    let mut window = [0u8; STEP_CHUNK + 1];
    window[..6].copy_from_slice(&[b'M', 1, 2, 0x8a, 1, 7]);
    let mut steps = [0u8; STEP_CHUNK];
    chunk_steps(&window, &mut steps, true);
    assert_eq!(steps[..6], [3, 0, 0, 3, 0, 0]);
    chunk_steps(&window, &mut steps, false);
    assert_eq!(steps[..6], [3, 0, 0, 0, 0, 0]);
}

/// A long run read a chunk at a time stops where, and counts what, the one-opcode loop
/// does: random runs of the scalar opcodes with LONG1 of every length (254 and 255
/// included), a foreign opcode at a random place, frame ends cut anywhere and limits.
#[test]
fn long_runs_read_what_the_one_opcode_loop_reads() {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut rnd = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n.max(1)
    };
    let mut long = 0;
    for _ in 0..3000 {
        let mut input = vec![0x80, 0x04];
        for _ in 0..rnd(1500) {
            match rnd(14) {
                0 => input.extend_from_slice(&[b'K', rnd(256) as u8]),
                1 => input.extend_from_slice(&[b'M', 1, 2]),
                2 => input.extend_from_slice(&[b'J', 1, 2, 3, 4]),
                3 => input.extend_from_slice(&[b'G', 0, 0, 0, 0, 0, 0, 0xf0, 0x3f]),
                4 => input.push(*[b'N', 0x88, 0x89].get(rnd(3) as usize).unwrap_or(&b'N')),
                5 => {
                    let len = if rnd(30) == 0 { 250 + rnd(6) } else { rnd(9) };
                    input.extend_from_slice(&[0x8a, len as u8]);
                    input.extend((0..len).map(|_| rnd(256) as u8));
                }
                6 if rnd(60) == 0 => input.push(b'e'),
                _ => input.extend_from_slice(&[b'K', 7]),
            }
        }
        let start = 2;
        let end = if rnd(3) == 0 {
            start + rnd(input.len() as u64) as usize
        } else {
            input.len()
        };
        let limit = if rnd(3) == 0 { rnd(2000) } else { u64::MAX };
        let long1 = rnd(4) != 0;
        let (mut fast, mut slow) = ([0u64; 256], [0u64; 256]);
        let got = scalar_run(&input, start, end, limit, long1, &mut fast);
        let want = scalar_steps(&input, start, end, limit, long1, &mut slow);
        if got.1 > STEPS_AFTER + (STEP_CHUNK as u64) {
            long += 1;
        }
        // The chunked walk leaves LONG1 of 254 and 255 bytes to the general path, which
        // reads it and starts a new run after it: go on from there as the scan does.
        let (mut pos, mut n) = got;
        while (pos, n) != want && n < want.1 && input.get(pos) == Some(&0x8a) {
            let len = usize::from(*input.get(pos + 1).unwrap_or(&0));
            assert!(len >= 254, "stopped at a LONG1 of {len} bytes");
            fast[0x8a] += 1;
            pos += 2 + len;
            n += 1;
            let (p, m) = scalar_run(&input, pos, end, limit - n, long1, &mut fast);
            (pos, n) = (p, n + m);
        }
        assert_eq!((pos, n), want);
        assert_eq!(fast, slow);
    }
    assert!(long > 300, "only {long} runs went past a chunk");
}
