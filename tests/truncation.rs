//! Every proper prefix of every good corpus file is refused as `truncated`: never decoded,
//! never a panic, never another kind. (All but the empty one, which is no pickle at all:
//! `not_a_pickle`, tests/hostile.rs.)
//!
//! Why this holds for a single pickle: the decoder runs the opcodes of the prefix exactly as it
//! runs those of the whole file (which decodes), so the only new event is running out of input
//! inside an opcode, its argument, a line or a frame (a FRAME whose length runs past the end of
//! the input is itself refused as truncated, so a short input never turns into a frame
//! straddle). A prefix can never be a complete smaller pickle, because the only STOP of the
//! file is its last byte.
//!
//! Streams (`stream_*`, several pickles sharing one memo) are different: a prefix that ends
//! exactly after the STOP of an inner pickle IS a valid stream. So for those files, with the
//! STOP positions found by `pickletools.genops`, a prefix ending at the k-th STOP must decode
//! with `decode_stream()` to k roots, and every other prefix must be refused as truncated; with
//! `decode()`, a prefix shorter than the first pickle is truncated, the first pickle alone
//! decodes, and anything longer is trailing_data.
//!
//! Files over 64 KiB are skipped; for files over 4 KiB only the first 512 prefixes and 512
//! spread through the file (deterministic pseudo-random) are tried.

// Test code: a failed invariant is a panic, by design (clippy.toml's allow-*-in-tests covers
// #[test] fns only, not the helpers and the shared module).
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

mod common;

use std::collections::BTreeSet;

use common::{decode_outcome, good_corpus, good_policies, stop_ends, Outcome};

const MAX_FILE: usize = 64 * 1024;
const ALL_PREFIXES_UP_TO: usize = 4 * 1024;
const HEAD: usize = 512;
const SPREAD: usize = 512;

/// The prefix lengths tried for a file of `len` bytes (all < len, none empty).
fn prefix_lengths(len: usize, seed: u64) -> Vec<usize> {
    if len <= ALL_PREFIXES_UP_TO {
        return (1..len).collect();
    }
    let mut set: BTreeSet<usize> = (1..HEAD).collect();
    // one pseudo-random point in each of SPREAD equal slices of the file
    let mut x = seed | 1;
    for i in 0..SPREAD {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let lo = i * len / SPREAD;
        let hi = ((i + 1) * len / SPREAD).max(lo + 1);
        set.insert(lo + (x as usize) % (hi - lo));
    }
    set.insert(len - 1);
    set.into_iter().filter(|&l| l > 0 && l < len).collect()
}

fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[test]
fn every_proper_prefix_is_truncated() {
    let files = good_corpus();
    let (data, records) = good_policies(&files);
    let mut problems = Vec::new();
    let mut covered = 0usize;
    let mut streams_covered = 0usize;
    let mut prefixes = 0usize;
    let mut not_decoding = Vec::new();
    for f in &files {
        let bytes =
            std::fs::read(&f.path).unwrap_or_else(|e| panic!("read {}: {e}", f.path.display()));
        if bytes.len() > MAX_FILE {
            continue;
        }
        let policy = if f.records { &records } else { &data };
        // Only files that decode whole can say anything about their prefixes (the records
        // model cannot express a few record files; good_corpus.rs checks those with the oracle).
        match decode_outcome(&bytes, policy, None, f.stream, false) {
            Outcome::Ok { .. } => {}
            other => {
                not_decoding.push(format!("{}: {}", f.name, other.label()));
                continue;
            }
        }
        covered += 1;
        let lengths = prefix_lengths(bytes.len(), seed_of(&f.name));
        prefixes += lengths.len();
        if f.stream {
            streams_covered += 1;
            let ends = stop_ends(&f.path);
            assert!(
                ends.len() >= 2,
                "{}: a stream of {} pickle(s)",
                f.name,
                ends.len()
            );
            assert_eq!(
                ends.last().copied(),
                Some(bytes.len()),
                "{}: the last STOP ends the file",
                f.name
            );
            for &l in &lengths {
                let prefix = &bytes[..l];
                let got = decode_outcome(prefix, policy, None, true, false);
                match ends.iter().position(|&e| e == l) {
                    Some(k) => match got {
                        Outcome::Ok { roots, .. } if roots == k + 1 => {}
                        other => problems.push(format!(
                            "{} stream prefix {l} (ends after pickle {}): expected {} root(s), got {}: {}",
                            f.name,
                            k + 1,
                            k + 1,
                            other.label(),
                            other.detail()
                        )),
                    },
                    None => {
                        if got.label() != "truncated" {
                            problems.push(format!(
                                "{} stream prefix {l}: expected truncated, got {}: {}",
                                f.name,
                                got.label(),
                                got.detail()
                            ));
                        }
                    }
                }
                // decode(): one pickle only
                let single = decode_outcome(prefix, policy, None, false, false);
                let want = match l.cmp(&ends[0]) {
                    std::cmp::Ordering::Less => "truncated",
                    std::cmp::Ordering::Equal => "OK (decoded)",
                    std::cmp::Ordering::Greater => "trailing_data",
                };
                if single.label() != want {
                    problems.push(format!(
                        "{} prefix {l} with decode(): expected {want}, got {}: {}",
                        f.name,
                        single.label(),
                        single.detail()
                    ));
                }
            }
        } else {
            for &l in &lengths {
                let got = decode_outcome(&bytes[..l], policy, None, false, false);
                let bad = match &got {
                    Outcome::Err {
                        kind: "truncated",
                        offset,
                        ..
                    } => *offset > l as u64,
                    _ => true,
                };
                if bad {
                    problems.push(format!(
                        "{} prefix {l}/{}: expected truncated (offset <= {l}), got {}: {}",
                        f.name,
                        bytes.len(),
                        got.label(),
                        got.detail()
                    ));
                }
            }
        }
    }
    eprintln!(
        "truncation: {covered} files ({streams_covered} streams), {prefixes} prefixes; files that do not decode whole: {not_decoding:?}"
    );
    assert!(covered >= 300, "only {covered} files covered");
    assert!(streams_covered >= 1, "no stream file covered");
    assert!(
        not_decoding.len() <= 8,
        "too many good files do not decode: {not_decoding:?}"
    );
    let shown: Vec<&String> = problems.iter().take(60).collect();
    assert!(
        problems.is_empty(),
        "{} prefix problem(s) (first {}):\n{}",
        problems.len(),
        shown.len(),
        shown
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn prefix_lengths_are_proper_and_spread() {
    assert_eq!(prefix_lengths(3, 1), vec![1, 2]);
    let l = prefix_lengths(60_000, 7);
    assert!(
        l.len() >= HEAD + SPREAD / 2 && l.len() <= HEAD + SPREAD + 1,
        "{}",
        l.len()
    );
    assert!(l.iter().all(|&x| x > 0 && x < 60_000));
    assert_eq!(l.last().copied(), Some(59_999));
    assert!(l.iter().filter(|&&x| x > 30_000).count() >= SPREAD / 2 - 2);
}
