//! Times picklewarden on one file, for `bench/compare.py`: reads the file once, decodes it
//! `RUNS` times under the built-in `data` policy, and prints one JSON line with the median and
//! minimum wall time of a run, the node count and the process's peak RSS (`VmHWM` from
//! `/proc/self/status`, in KiB; 0 where there is none).
//!
//! ```sh
//! cargo build --release --example bench_decode
//! target/release/examples/bench_decode FILE [RUNS] [--mode decode|json] [--stream]
//! ```
//!
//! `--mode decode` (default) builds the arena (dropped after the clock stops); `--mode json` also writes typed
//! JSON and times both. `--stream` reads the file as several pickles one after another
//! (`Decoder::decode_stream`); it is implied when the file name contains `_stream`.
//! Exit status 1 if the decode is refused (the error on stderr), 2 on a usage or I/O error.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use picklewarden::{Decoder, Document, Policy};

struct Args {
    file: String,
    runs: usize,
    json: bool,
    stream: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut file = None;
    let mut runs = 5;
    let mut json = false;
    let mut stream = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--mode" => match it.next().as_deref() {
                Some("decode") => json = false,
                Some("json") => json = true,
                other => return Err(format!("unknown mode {other:?}")),
            },
            "--stream" => stream = Some(true),
            _ if file.is_none() => file = Some(a),
            _ => runs = a.parse().map_err(|e| format!("RUNS {a:?}: {e}"))?,
        }
    }
    let file = file.ok_or("usage: bench_decode FILE [RUNS] [--mode decode|json] [--stream]")?;
    let stream = stream.unwrap_or_else(|| file.contains("_stream"));
    Ok(Args {
        file,
        runs: runs.max(1),
        json,
        stream,
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

/// One run: decode (and write JSON); returns the document and the JSON text, so that the
/// caller drops them after the clock stops (the Python side times `pickle.loads` without the
/// deallocation of its result too).
fn run_once<'a>(
    input: &'a [u8],
    policy: &Policy,
    args: &Args,
) -> picklewarden::Result<(Document<'a>, String)> {
    let d = Decoder::new(input, policy);
    let doc = if args.stream {
        d.decode_stream()?
    } else {
        d.decode()?
    };
    let json = if args.json {
        picklewarden::json::to_typed_json(&doc)
    } else {
        String::new()
    };
    Ok((doc, json))
}

fn main() -> ExitCode {
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
    let policy = Policy::data();
    let mut times: Vec<Duration> = Vec::with_capacity(args.runs);
    let mut nodes = 0;
    let mut json_len = 0;
    for _ in 0..args.runs {
        let t = Instant::now();
        let out = run_once(&input, &policy, &args);
        let elapsed = t.elapsed();
        match std::hint::black_box(out) {
            Ok((doc, json)) => {
                nodes = doc.nodes().len();
                json_len = json.len();
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
        "{{\"tool\":\"picklewarden-{}\",\"file\":{:?},\"bytes\":{},\"runs\":{},\"median_s\":{:.6},\"min_s\":{:.6},\"nodes\":{},\"json_bytes\":{},\"peak_rss_kib\":{}}}",
        if args.json { "json" } else { "decode" },
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
