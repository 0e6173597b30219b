//! Times picklewarden on one file, for `bench/compare.py`: reads the file once, decodes it
//! `RUNS` times under the built-in `data` policy, and prints one JSON line with the median and
//! minimum wall time of a run, the node count and the process's peak RSS (`VmHWM` from
//! `/proc/self/status`, in KiB; 0 where there is none).
//!
//! ```sh
//! cargo build --release --example bench_decode
//! target/release/examples/bench_decode FILE [RUNS] [--mode decode|json|scan] [--stream] [--reuse]
//!     [--frames] [--inner N] [--policy NAME]
//! ```
//!
//! `--mode decode` (default) builds the arena (dropped after the clock stops); `--mode json` also
//! writes typed JSON and times both; `--mode scan` runs scan-only ([`picklewarden::scan_with`]:
//! every check, no values built; `nodes` is then the opcode count). `--stream` reads the file as several pickles one after another
//! (`Decoder::decode_stream`); it is implied when the file name contains `_stream`. `--reuse`
//! builds each run into the arena of the run before (`Document::recycle`, `Decoder::scratch`:
//! what a process decoding one input after another does; the recycling is after the clock
//! stops, as the drop is without it).
//! `--frames` reads the file as messages, each a 4-byte little-endian length and that many bytes
//! (`bench/shapes.py` writes them), and decodes each message as a fresh [`Decoder::decode`], as
//! a bastion reading Mitogen messages one at a time does; each document is dropped before the
//! next decode, inside the clock (as `pickle.loads` in a loop drops the value before). `--inner
//! N` runs the decodes N times per timed run and reports the time of one pass (so that a run of
//! a tiny pickle lasts long enough to time). `--policy NAME` picks a built-in policy (default
//! `data`).
//! Exit status 1 if the decode is refused (the error on stderr), 2 on a usage or I/O error.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use picklewarden::{Decoder, Document, Policy, Scratch};

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Decode,
    Json,
    Scan,
}

struct Args {
    file: String,
    runs: usize,
    mode: Mode,
    stream: bool,
    reuse: bool,
    frames: bool,
    inner: usize,
    policy: String,
}

fn parse_args() -> Result<Args, String> {
    let mut file = None;
    let mut runs = 5;
    let mut mode = Mode::Decode;
    let mut stream = None;
    let mut reuse = false;
    let mut frames = false;
    let mut inner = 1usize;
    let mut policy = "data".to_string();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--mode" => match it.next().as_deref() {
                Some("decode") => mode = Mode::Decode,
                Some("json") => mode = Mode::Json,
                Some("scan") => mode = Mode::Scan,
                other => return Err(format!("unknown mode {other:?}")),
            },
            "--stream" => stream = Some(true),
            "--reuse" => reuse = true,
            "--frames" => frames = true,
            "--inner" => {
                let n = it.next().unwrap_or_default();
                inner = n.parse().map_err(|e| format!("--inner {n:?}: {e}"))?;
            }
            "--policy" => policy = it.next().unwrap_or_default(),
            _ if file.is_none() => file = Some(a),
            _ => runs = a.parse().map_err(|e| format!("RUNS {a:?}: {e}"))?,
        }
    }
    let file = file
        .ok_or("usage: bench_decode FILE [RUNS] [--mode decode|json|scan] [--stream] [--reuse]")?;
    let stream = stream.unwrap_or_else(|| file.contains("_stream"));
    Ok(Args {
        file,
        runs: runs.max(1),
        mode,
        stream,
        reuse,
        frames,
        inner: inner.max(1),
        policy,
    })
}

/// Peak resident set size of this process in KiB (`VmHWM`), or 0 if unknown.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// One scan-only run; returns the number of opcodes.
fn scan_once(input: &[u8], policy: &Policy, args: &Args) -> picklewarden::Result<u64> {
    let mut options = picklewarden::DecodeOptions::default();
    if args.stream {
        options = options.stream();
    }
    let report = picklewarden::scan_with(input, policy, &options);
    report.result?;
    Ok(report.opcode_counts.iter().sum())
}

/// Splits `input` into the messages of a `--frames` file: each a 4-byte little-endian length
/// and that many bytes.
fn split_frames(mut input: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::new();
    while !input.is_empty() {
        let (len, rest) = input
            .split_first_chunk::<4>()
            .ok_or("a frame's length is cut short")?;
        let len = u32::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return Err("a frame is cut short".into());
        }
        let (frame, rest) = rest.split_at(len);
        out.push(frame);
        input = rest;
    }
    Ok(out)
}

/// One timed run of `--frames`: each message decoded alone, `inner` times over; returns the
/// node count of the last pass.
fn frames_once(frames: &[&[u8]], policy: &Policy, inner: usize) -> picklewarden::Result<usize> {
    let mut nodes = 0;
    for _ in 0..inner {
        nodes = 0;
        for f in frames {
            let doc = Decoder::new(f, policy).decode()?;
            nodes += std::hint::black_box(doc).len();
        }
    }
    Ok(nodes)
}

/// One run: decode (and write JSON); returns the document and the JSON text, so that the
/// caller drops them after the clock stops (the Python side times `pickle.loads` without the
/// deallocation of its result too).
fn run_once<'a>(
    input: &'a [u8],
    policy: &Policy,
    args: &Args,
    scratch: Scratch,
) -> picklewarden::Result<(Document<'a>, String)> {
    let d = Decoder::new(input, policy).scratch(scratch);
    let doc = if args.stream {
        d.decode_stream()?
    } else {
        d.decode()?
    };
    let json = if args.mode == Mode::Json {
        picklewarden::json::to_typed_json(&doc)
    } else {
        String::new()
    };
    Ok((doc, json))
}

/// Runs the benchmark; `pub(crate)` so that `bench_decode_mimalloc.rs` runs the same one.
pub(crate) fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench_decode: {e}");
            return ExitCode::from(2);
        }
    };
    let input = match std::fs::read(&args.file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("bench_decode: {}: {e}", args.file);
            return ExitCode::from(2);
        }
    };
    let Some(policy) = Policy::builtin(&args.policy) else {
        eprintln!("bench_decode: no built-in policy {:?}", args.policy);
        return ExitCode::from(2);
    };
    let frames = if args.frames {
        match split_frames(&input) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("bench_decode: {}: {e}", args.file);
                return ExitCode::from(2);
            }
        }
    } else {
        Vec::new()
    };
    let mut times: Vec<Duration> = Vec::with_capacity(args.runs);
    let mut nodes = 0;
    let mut json_len = 0;
    let mut scratch = Scratch::new();
    for _ in 0..args.runs {
        if args.frames {
            let t = Instant::now();
            let out = frames_once(&frames, &policy, args.inner);
            times.push(t.elapsed() / u32::try_from(args.inner).unwrap_or(u32::MAX));
            match out {
                Ok(n) => nodes = n,
                Err(e) => {
                    eprintln!("bench_decode: {}: {e}", args.file);
                    return ExitCode::from(1);
                }
            }
            continue;
        }
        if args.mode == Mode::Scan {
            let t = Instant::now();
            let out = scan_once(&input, &policy, &args);
            times.push(t.elapsed());
            match out {
                Ok(n) => nodes = n as usize,
                Err(e) => {
                    eprintln!("bench_decode: {}: {e}", args.file);
                    return ExitCode::from(1);
                }
            }
            continue;
        }
        let t = Instant::now();
        let out = run_once(&input, &policy, &args, std::mem::take(&mut scratch));
        let elapsed = t.elapsed();
        match std::hint::black_box(out) {
            Ok((doc, json)) => {
                nodes = doc.len();
                json_len = json.len();
                if args.reuse {
                    scratch = doc.recycle();
                }
            }
            Err(e) => {
                eprintln!("bench_decode: {}: {e}", args.file);
                return ExitCode::from(1);
            }
        }
        times.push(elapsed);
    }
    times.sort();
    let median = times.get(times.len() / 2).copied().unwrap_or_default();
    let min = times.first().copied().unwrap_or_default();
    println!(
        "{{\"tool\":\"picklewarden-{}\",\"file\":{:?},\"bytes\":{},\"runs\":{},\"median_s\":{:.9},\"min_s\":{:.9},\"nodes\":{},\"json_bytes\":{},\"peak_rss_kib\":{}}}",
        match args.mode {
            Mode::Decode => "decode",
            Mode::Json => "json",
            Mode::Scan => "scan",
        },
        args.file,
        input.len(),
        args.runs,
        median.as_secs_f64(),
        min.as_secs_f64(),
        nodes,
        json_len,
        peak_rss_kib()
    );
    ExitCode::SUCCESS
}
