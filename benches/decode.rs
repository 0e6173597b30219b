//! Benchmarks over the standard workloads of issue 6 (divan).
//!
//! ```sh
//! python3 bench/gen_workloads.py      # once: writes target/workloads/ (about 700 MB)
//! cargo bench --bench decode          # all benches; or filter: cargo bench --bench decode -- small
//! ```
//!
//! The folder can be moved with `PICKLEWARDEN_WORKLOADS=DIR`. A workload whose file is missing
//! is skipped (divan prints "No benchmark function registered"), so the bench target also
//! builds and runs (`cargo test --benches`) where nothing was generated.
//!
//! - `decode`: [`Decoder::decode`] (or `decode_stream` for `*_stream` files) to the arena,
//!   under the `data` policy; the document is dropped outside the timed region.
//! - `typed_json`: decode, then [`picklewarden::json::to_typed_json`].
//!
//! - `scan`: scan-only, [`picklewarden::scan_with`] (every check, no value built).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use divan::counter::BytesCount;
use divan::Bencher;
use picklewarden::{Decoder, Document, Policy};

fn main() {
    divan::main();
}

/// The workload files (without `.pkl`), as `bench/gen_workloads.py` names them.
const WORKLOADS: &[&str] = &[
    "mitogen.p2",
    "mitogen.p4",
    "mitogen.p5",
    "mitogen_stream.p2",
    "mitogen_stream.p4",
    "mitogen_stream.p5",
    "small.p2",
    "small.p4",
    "small.p5",
    "ints.p4",
    "longstr.p4",
];

fn workload_dir() -> PathBuf {
    std::env::var_os("PICKLEWARDEN_WORKLOADS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/workloads"))
}

/// Workload bytes by name, `None` when the file is missing.
type Cache = Mutex<HashMap<String, Option<&'static [u8]>>>;

/// The bytes of a workload, read once and kept for the process (leaked: benches only).
fn load(name: &str) -> Option<&'static [u8]> {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().ok()?;
    *cache.entry(name.to_owned()).or_insert_with(|| {
        let path = workload_dir().join(format!("{name}.pkl"));
        match std::fs::read(&path) {
            Ok(b) => Some(Vec::leak(b)),
            Err(e) => {
                eprintln!("skipping {name}: {}: {e}", path.display());
                None
            }
        }
    })
}

fn decode_doc<'a>(name: &str, input: &'a [u8], policy: &Policy) -> Document<'a> {
    let d = Decoder::new(input, policy);
    let r = if name.contains("_stream") {
        d.decode_stream()
    } else {
        d.decode()
    };
    match r {
        Ok(doc) => doc,
        Err(e) => {
            eprintln!("{name}: refused: {e}");
            std::process::exit(1);
        }
    }
}

#[divan::bench(args = WORKLOADS, sample_count = 5, sample_size = 1)]
fn decode(bencher: Bencher, name: &str) {
    let Some(input) = load(name) else { return };
    let policy = Policy::data();
    bencher
        .counter(BytesCount::of_slice(input))
        .bench(|| decode_doc(name, input, &policy));
}

#[divan::bench(args = WORKLOADS, sample_count = 3, sample_size = 1)]
fn typed_json(bencher: Bencher, name: &str) {
    let Some(input) = load(name) else { return };
    let policy = Policy::data();
    bencher.counter(BytesCount::of_slice(input)).bench(|| {
        let doc = decode_doc(name, input, &policy);
        picklewarden::json::to_typed_json(&doc)
    });
}

#[divan::bench(args = WORKLOADS, sample_count = 5, sample_size = 1)]
fn scan(bencher: Bencher, name: &str) {
    let Some(input) = load(name) else { return };
    let policy = Policy::data();
    let mut options = picklewarden::DecodeOptions::default();
    if name.contains("_stream") {
        options = options.stream();
    }
    bencher.counter(BytesCount::of_slice(input)).bench(|| {
        let report = picklewarden::scan_with(input, &policy, &options);
        if let Err(e) = &report.result {
            eprintln!("{name}: refused: {e}");
            std::process::exit(1);
        }
        report
    });
}
