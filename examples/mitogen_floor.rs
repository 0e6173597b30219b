//! The memory-and-validation floor of a Mitogen protocol-2 file transfer (issue 3's 10x
//! target), for bench/NOTES.md: what any decoder that checks the text and hands out the bytes
//! must spend, whatever its transcoding costs.
//!
//! ```sh
//! cargo run --release --example mitogen_floor [CHUNKS] [CHUNK_BYTES]   # default 512 x 128 KiB
//! ```
//!
//! Times, in one process (median of 9 runs each, milliseconds):
//! - `fresh_output`: allocating CHUNKS buffers of CHUNK_BYTES and writing every byte once (the
//!   output of the transfer in fresh memory: allocation, page faults, stores), all kept alive
//!   until the clock stops, as a decoded document keeps them;
//! - `validate`: `simdutf8::basic::from_utf8` over the text as protocol 2 carries it (each
//!   chunk's random bytes as Latin-1 code points in UTF-8, about 1.5 bytes per byte).
//!
//! Their sum, against `pickle.loads`' time on the same transfer, bounds the ratio any such
//! decoder can reach on this machine.

use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let chunks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(512);
    let chunk_bytes: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(128 * 1024);

    // The chunks' text as protocol 2 writes it: random bytes (xorshift) as Latin-1 code points.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let texts: Vec<String> = (0..chunks)
        .map(|_| {
            (0..chunk_bytes)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    char::from(x as u8)
                })
                .collect()
        })
        .collect();
    let text_bytes: usize = texts.iter().map(String::len).sum();

    let mut fresh = Vec::new();
    let mut validate = Vec::new();
    for _ in 0..9 {
        let t = Instant::now();
        let outs: Vec<Vec<u8>> = (0..chunks)
            // One write per byte: `vec![b; n]` with b != 0 allocates and fills once.
            .map(|i| vec![i as u8 | 1; chunk_bytes])
            .collect();
        fresh.push(t.elapsed().as_secs_f64() * 1e3);
        drop(std::hint::black_box(outs));

        let t = Instant::now();
        let ok = texts
            .iter()
            .all(|s| simdutf8::basic::from_utf8(s.as_bytes()).is_ok());
        validate.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(std::hint::black_box(ok));
    }
    let (f, v) = (median(fresh), median(validate));
    println!(
        "{{\"chunks\":{chunks},\"chunk_bytes\":{chunk_bytes},\"text_bytes\":{text_bytes},\
         \"fresh_output_ms\":{f:.2},\"validate_ms\":{v:.2},\"floor_ms\":{:.2}}}",
        f + v
    );
}
