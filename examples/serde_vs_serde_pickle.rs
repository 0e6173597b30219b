//! picklewarden's serde [`from_slice`](picklewarden::from_slice) beside the serde-pickle
//! crate's `from_slice`, deserializing the standard workloads into the same Rust types, in one
//! process, taking turns (the machine is noisy: compare the two in the same run).
//!
//! ```sh
//! python3 bench/gen_workloads.py                     # once: writes target/workloads/
//! cargo run --release --example serde_vs_serde_pickle [ROUNDS [ROW [SIDE]]]
//! ```
//!
//! ROUNDS defaults to 5. ROW keeps only the rows whose `workload type` text contains it
//! (`"small.p4 Any"`); SIDE (`pw` or `sp`) runs only that crate, for a profiler
//! (`valgrind --tool=callgrind`): one side's instruction count without the other's.
//!
//! picklewarden runs with every check and the `data` policy's limits (its default ones);
//! serde-pickle with its default `DeOptions`. Each line gives the median time of each over the
//! rounds, their throughput on the pickle's bytes, and picklewarden's speed as a multiple of
//! serde-pickle's; `decode ms` is picklewarden's decode alone (to a document, no
//! deserialization), the part of its time the walk into `T` does not account for. For a
//! list of bytes a `floor` line follows: the time of copying each payload out of the input
//! into its own `Vec<u8>` alone, which any decoder into an owned type must do, and
//! serde-pickle's time as a multiple of it (the most any decoder could reach on that row).
//! The folder can be moved with `PICKLEWARDEN_WORKLOADS=DIR`; a missing workload is skipped.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::fmt;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::de::{DeserializeOwned, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// Any value, as both crates give it through `deserialize_any`.
#[derive(Debug)]
#[allow(dead_code)]
enum Any {
    Unit,
    Bool(bool),
    I64(i64),
    U64(u64),
    F64(f64),
    Str(String),
    Bytes(Vec<u8>),
    Seq(Vec<Any>),
    Map(Vec<(Any, Any)>),
}

impl<'de> Deserialize<'de> for Any {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Any, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Any;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_unit<E>(self) -> Result<Any, E> {
                Ok(Any::Unit)
            }
            fn visit_none<E>(self) -> Result<Any, E> {
                Ok(Any::Unit)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Any, E> {
                Ok(Any::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Any, E> {
                Ok(Any::I64(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Any, E> {
                Ok(Any::U64(v))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Any, E> {
                Ok(Any::F64(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Any, E> {
                Ok(Any::Str(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Any, E> {
                Ok(Any::Str(v))
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Any, E> {
                Ok(Any::Bytes(v.to_vec()))
            }
            fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Any, E> {
                Ok(Any::Bytes(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Any, A::Error> {
                let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
                while let Some(x) = seq.next_element()? {
                    v.push(x);
                }
                Ok(Any::Seq(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Any, A::Error> {
                let mut v = Vec::with_capacity(map.size_hint().unwrap_or(0).min(4096));
                while let Some(kv) = map.next_entry()? {
                    v.push(kv);
                }
                Ok(Any::Map(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// Bytes, through `deserialize_bytes` in both crates.
struct Bytes(#[allow(dead_code)] Vec<u8>);

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Bytes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Bytes, E> {
                Ok(Bytes(v.to_vec()))
            }
            fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Bytes, E> {
                Ok(Bytes(v))
            }
        }
        d.deserialize_byte_buf(V)
    }
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(5, |a| a.parse().expect("ROUNDS is a number"));
    let dir = std::env::var_os("PICKLEWARDEN_WORKLOADS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/workloads"));
    let row = std::env::args().nth(2).unwrap_or_default();
    let side = std::env::args().nth(3).unwrap_or_default();
    let policy = picklewarden::Policy::data();
    let run = |f: fn(&std::path::Path, &str, &str, usize, &picklewarden::Policy, &str),
               name: &str,
               ty: &str| {
        if format!("{name} {ty}").contains(row.as_str()) {
            f(&dir, name, ty, rounds, &policy, &side);
        }
    };
    println!(
        "{:<12} {:<28} {:>10} {:>10} {:>10} {:>10} {:>7} {:>10}",
        "workload", "type", "pw ms", "pw MB/s", "sp ms", "sp MB/s", "ratio", "decode ms"
    );
    run(
        bench::<Vec<HashMap<String, Any>>>,
        "small.p2",
        "Vec<HashMap<String, Any>>",
    );
    run(
        bench::<Vec<HashMap<String, Any>>>,
        "small.p4",
        "Vec<HashMap<String, Any>>",
    );
    run(
        bench::<Vec<HashMap<String, Any>>>,
        "small.p5",
        "Vec<HashMap<String, Any>>",
    );
    run(bench::<Any>, "small.p4", "Any");
    run(bench::<Vec<i64>>, "ints.p4", "Vec<i64>");
    run(bench::<Vec<String>>, "longstr.p4", "Vec<String>");
    run(bench::<Vec<Bytes>>, "mitogen.p2", "Vec<Bytes>");
    run(bench::<Vec<Bytes>>, "mitogen.p4", "Vec<Bytes>");
    run(bench::<Vec<Bytes>>, "mitogen.p5", "Vec<Bytes>");
}

fn bench<T: DeserializeOwned>(
    dir: &std::path::Path,
    name: &str,
    ty: &str,
    rounds: usize,
    policy: &picklewarden::Policy,
    side: &str,
) {
    let path = dir.join(format!("{name}.pkl"));
    let Ok(input) = std::fs::read(&path) else {
        println!("{name:<12} skipped: {} missing", path.display());
        return;
    };
    let (mut ours, mut theirs, mut decode) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        if side.is_empty() {
            let t = Instant::now();
            if let Ok(doc) = picklewarden::decode(&input, policy) {
                decode.push(t.elapsed());
                drop(black_box(doc));
            }
        }
        if side != "sp" {
            let t = Instant::now();
            match picklewarden::from_slice::<T>(&input, policy) {
                Ok(v) => {
                    ours.push(t.elapsed());
                    drop(black_box(v));
                }
                Err(e) => {
                    println!("{name:<12} picklewarden refused: {e}");
                    return;
                }
            }
        }
        if side != "pw" {
            let t = Instant::now();
            match serde_pickle::from_slice::<T>(&input, serde_pickle::DeOptions::new()) {
                Ok(v) => {
                    theirs.push(t.elapsed());
                    drop(black_box(v));
                }
                Err(e) => {
                    println!("{name:<12} serde-pickle refused: {e}");
                    return;
                }
            }
        }
    }
    // For a list of bytes, the floor of any decoder into owned `Vec<u8>`s: copying each
    // payload out of the input once, timed alone (the decode before it is not timed).
    let mut floor = Vec::new();
    if side.is_empty() && ty == "Vec<Bytes>" {
        if let Ok(doc) = picklewarden::decode(&input, policy) {
            let slices: Vec<_> = doc
                .root_ref()
                .map(|r| r.items().filter_map(|b| b.as_bytes()).collect())
                .unwrap_or_default();
            for _ in 0..rounds {
                let t = Instant::now();
                let copies: Vec<Vec<u8>> = slices.iter().map(|b| b.to_vec()).collect();
                floor.push(t.elapsed());
                drop(black_box(copies));
            }
        }
    }
    let (a, b, c) = (median(&mut ours), median(&mut theirs), median(&mut decode));
    let mbs = |d: Duration| input.len() as f64 / 1e6 / d.as_secs_f64();
    println!(
        "{name:<12} {ty:<28} {:>10.1} {:>10.0} {:>10.1} {:>10.0} {:>6.2}x {:>10.1}",
        a.as_secs_f64() * 1e3,
        mbs(a),
        b.as_secs_f64() * 1e3,
        mbs(b),
        b.as_secs_f64() / a.as_secs_f64(),
        c.as_secs_f64() * 1e3
    );
    if !floor.is_empty() {
        let f = median(&mut floor);
        println!(
            "{:<12} floor: copying the payloads alone {:.1} ms; serde-pickle / floor {:.2}x",
            "",
            f.as_secs_f64() * 1e3,
            b.as_secs_f64() / f.as_secs_f64()
        );
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}
