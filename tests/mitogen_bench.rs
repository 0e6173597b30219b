//! Benchmark (not a timed test: it asserts nothing about time): a Mitogen-like file transfer,
//! 512 chunks of 128 KiB random bytes pickled by Python 3 with protocol 2, decoded by
//! picklewarden under the `mitogen` policy and by CPython's `pickle.loads` in the same run.
//!
//! ```sh
//! cargo test --release --test mitogen_bench -- --ignored --nocapture
//! ```
//! Prints MB/s of both (MB = 10^6 bytes of chunk data) and the ratio; also the throughput of
//! the `_codecs.encode` step alone (UTF-8 -> latin-1) measured on the largest payload.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use picklewarden::mitogen::{Content, FrameReader};
use picklewarden::{Policy, Value};

#[test]
#[ignore = "benchmark: run with --ignored --nocapture, preferably with --release"]
fn transfer_512_chunks_of_128k() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("mitogen-bench-frames.bin");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/mitogen_bench.py");
    let out = Command::new("timeout")
        .args(["300", "python3", script])
        .arg(&file)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let py: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let data_bytes = py["data_bytes"].as_u64().unwrap();

    let stream = std::fs::read(&file).unwrap();
    let mut reader = FrameReader::new();
    reader.push(&stream);
    let mut frames = Vec::new();
    while let Some(f) = reader.next_frame().unwrap() {
        frames.push(f);
    }
    reader.finish().unwrap();
    let policy = Policy::builtin("mitogen").unwrap();

    let mut best = Duration::MAX;
    for _ in 0..5 {
        let t0 = Instant::now();
        let mut total = 0usize;
        for f in &frames {
            match f.decode(&policy, policy.limits).unwrap() {
                Content::Values(doc) => {
                    let root = doc.roots()[0];
                    match doc.get(root).unwrap() {
                        Value::Bytes(b) => total += b.len(),
                        other => panic!("not bytes: {other:?}"),
                    }
                }
                other => panic!("{other:?}"),
            }
        }
        best = best.min(t0.elapsed());
        assert_eq!(total as u64, data_bytes);
    }
    let pw = data_bytes as f64 / best.as_secs_f64() / 1e6;
    let cp = py["cpython_mb_s"].as_f64().unwrap();

    // The UTF-8 -> latin-1 step alone: a pickle of one 8 MiB random chunk, minus the cost of
    // decoding the same text as a plain str (the UTF-8 check).
    let probe = Command::new("timeout")
        .args([
            "60",
            "python3",
            "-c",
            "import pickle,random,sys;b=random.Random(1).randbytes(8<<20);\
             sys.stdout.buffer.write(pickle.dumps(b,2))",
        ])
        .output()
        .unwrap();
    let big = probe.stdout;
    let time_of = |bytes: &[u8]| {
        let mut best = Duration::MAX;
        for _ in 0..10 {
            let t0 = Instant::now();
            let d = picklewarden::Decoder::new(bytes, &policy).decode().unwrap();
            std::hint::black_box(&d);
            best = best.min(t0.elapsed());
        }
        best
    };
    let with_encode = time_of(&big);
    // Same text as a plain str: drop the `_codecs.encode(` wrapper by re-pickling the str.
    let start = big.windows(1).position(|w| w == b"X").unwrap();
    let len = u32::from_le_bytes(big[start + 1..start + 5].try_into().unwrap()) as usize;
    let mut plain = b"\x80\x02".to_vec();
    plain.extend_from_slice(&big[start..start + 5 + len]);
    plain.push(b'.');
    let text_only = time_of(&plain);
    let step = with_encode
        .saturating_sub(text_only)
        .max(Duration::from_nanos(1));

    println!(
        "mitogen transfer: {} chunks x {} bytes ({} wire bytes), python {}",
        py["chunks"], py["chunk_bytes"], py["wire_bytes"], py["python"]
    );
    println!("  picklewarden: {pw:.0} MB/s ({best:?})");
    println!("  CPython pickle.loads: {cp:.0} MB/s");
    println!("  ratio: {:.1}x", pw / cp);
    println!(
        "  8 MiB chunk: whole decode {:.0} MB/s, str only {:.0} MB/s, latin-1 step {:.0} MB/s",
        (8 << 20) as f64 / with_encode.as_secs_f64() / 1e6,
        (8 << 20) as f64 / text_only.as_secs_f64() / 1e6,
        (8 << 20) as f64 / step.as_secs_f64() / 1e6,
    );
}
