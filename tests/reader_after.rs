//! The reader after picklewarden: what picklewarden accepts must be safe to hand to CPython's
//! own `pickle.loads` (src/build/keys/reader.rs, the limits `max_key_steps`,
//! `max_key_steps_per_byte` and `max_key_collisions`).
//!
//! - Each attack class on the reader's key work, from recipes written here, at several sizes:
//!   refused with its limit's name under every built-in policy that can express it (the time
//!   picklewarden takes is printed, never asserted).
//! - `datetime`-family keys of `mitogen-plus` compare by value, as CPython's do.
//! - The differential check: CPython's `pickle.loads` of every file of the repository's
//!   corpora (and of the fuzz corpora, when a campaign has filled them) that picklewarden
//!   accepts under `data` stays within a fixed multiple of picklewarden's own time (CPython
//!   runs in a child process that is killed past a timeout).

// Test code: a failed check is a panic, by design.
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::long1;
use picklewarden::{Decoder, ErrorKind, LimitName, Policy, Value};

/// `k * MODULUS` hashes to 0 in CPython for every int k: a dict of such keys is one long
/// collision chain there.
const MODULUS: u128 = common::CPYTHON_HASH_MODULUS;

/// A tuple DAG on the stack: `(1, 1, 1)`, then each level the one below three times.
fn dag(levels: u32) -> Vec<u8> {
    let mut p = b"K\x01".to_vec();
    for _ in 0..levels {
        p.extend_from_slice(b"22\x87");
    }
    p
}

/// The attacks: label, the bytes, the policies that can express them, the limit expected.
fn attacks() -> Vec<(String, Vec<u8>, Vec<&'static str>, LimitName)> {
    let all = vec!["data", "strict", "mitogen", "mitogen-plus"];
    let with_set = vec!["data", "mitogen-plus"];
    let mut out = Vec::new();
    for levels in [14u32, 20, 40] {
        // As a dict key (protocol 2: every policy), a set item (EMPTY_SET, ADDITEMS), a
        // frozenset item (FROZENSET), and set()'s and frozenset()'s argument (REDUCE).
        let mut key = b"\x80\x02}".to_vec();
        key.extend(dag(levels));
        key.extend_from_slice(b"Ns.");
        out.push((
            format!("dag {levels} dict key"),
            key,
            all.clone(),
            LimitName::MaxKeySteps,
        ));
        let mut item = b"\x80\x04\x8f(".to_vec();
        item.extend(dag(levels));
        item.extend_from_slice(b"\x90.");
        out.push((
            format!("dag {levels} set item"),
            item,
            all.clone(),
            LimitName::MaxKeySteps,
        ));
        let mut frozen = b"\x80\x04(".to_vec();
        frozen.extend(dag(levels));
        frozen.extend_from_slice(b"\x91.");
        out.push((
            format!("dag {levels} frozenset item"),
            frozen,
            all.clone(),
            LimitName::MaxKeySteps,
        ));
        for ctor in ["set", "frozenset"] {
            let mut call = b"\x80\x02c__builtin__\n".to_vec();
            call.extend_from_slice(ctor.as_bytes());
            call.extend_from_slice(b"\n(");
            call.extend(dag(levels));
            call.extend_from_slice(b"l\x85R.");
            out.push((
                format!("dag {levels} {ctor}() argument"),
                call,
                with_set.clone(),
                LimitName::MaxKeySteps,
            ));
        }
    }
    for n in [100usize, 10_000, 40_000] {
        // Int keys k * (2**61 - 1), all CPython hash 0: a dict (SETITEMS) and a set.
        let mut d = b"\x80\x02}(".to_vec();
        for k in 1..=n {
            d.extend(long1(k as u128 * MODULUS));
            d.push(b'N');
        }
        d.extend_from_slice(b"u.");
        out.push((
            format!("{n} colliding int keys"),
            d,
            all.clone(),
            LimitName::MaxKeyCollisions,
        ));
        // The same as 1-tuples (one lane of hash 0 each: one tuple hash for all).
        let mut t = b"\x80\x04\x8f(".to_vec();
        for k in 1..=n {
            t.extend(long1(k as u128 * MODULUS));
            t.push(0x85);
        }
        t.extend_from_slice(b"\x90.");
        out.push((
            format!("{n} colliding 1-tuples in a set"),
            t,
            all.clone(),
            LimitName::MaxKeyCollisions,
        ));
    }
    // frozenset() of one memoized list of n small ints (cheap keys, five bytes each), called
    // again and again (six bytes a call): CPython inserts the n items at every call (2 s for
    // 64 KB of such calls before they were counted).
    for n in [2_000u32, 8_000] {
        let mut p = b"\x80\x02c__builtin__\nfrozenset\nq\x000]".to_vec();
        p.push(b'(');
        for i in 0..n {
            p.push(b'J');
            p.extend_from_slice(&((i % 254) << 22).to_le_bytes());
        }
        p.extend_from_slice(b"eq\x010(");
        for _ in 0..64_000usize.saturating_sub(p.len()) / 6 {
            p.extend_from_slice(b"h\x00h\x01\x85R0");
        }
        p.extend_from_slice(b"1N.");
        // Each call also builds a new n-item table (32 bytes an item), which passes
        // `max_copy_bytes_per_byte` (16 an input byte) before its steps (one an item) pass
        // `max_key_steps_per_byte` (64 an input byte).
        out.push((
            format!("frozenset() of a memoized {n}-item list, called again and again"),
            p,
            vec!["data", "mitogen-plus"],
            LimitName::MaxCopyBytesPerByte,
        ));
    }
    // Floats m * 2**(61 j): 2**61 is 1 modulo 2**61 - 1, so they all hash as m; as many
    // floats of one hash as the exponent range allows (16), then ints of the same hash
    // (3 + k * (2**61 - 1)) past `max_key_collisions`.
    let mut f = b"\x80\x04\x8f(".to_vec();
    for j in 0..16 {
        f.push(b'G');
        f.extend_from_slice(&(3.0f64 * 2f64.powi(61 * j)).to_be_bytes());
    }
    for k in 1..=24u128 {
        f.extend(long1(3 + k * MODULUS));
    }
    f.extend_from_slice(b"\x90.");
    out.push((
        "16 colliding floats and 24 ints".into(),
        f,
        all.clone(),
        LimitName::MaxKeyCollisions,
    ));
    for n in [2_000u32, 10_000, 40_000] {
        // One n-item tuple (memoized) used as the key of n dicts: n * (n + 1) steps.
        let mut p = b"\x80\x04(".to_vec();
        for i in 0..n {
            p.push(b'J');
            p.extend_from_slice(&i.to_le_bytes());
        }
        p.extend_from_slice(b"t\x940(");
        for _ in 0..n {
            p.extend_from_slice(b"}h\x00Ns");
        }
        p.extend_from_slice(b"l.");
        out.push((
            format!("one {n}-item tuple as the key of {n} dicts"),
            p,
            all.clone(),
            LimitName::MaxKeyStepsPerByte,
        ));
        // A set meets a distinct but equal key n times: each ADDITEMS inserts a new 1-tuple
        // around one memoized n-item tuple, equal to the one before, hashed (n + 2 steps)
        // and compared with it.
        let mut q = b"\x80\x04\x8f(".to_vec();
        for i in 0..n {
            q.push(b'J');
            q.extend_from_slice(&i.to_le_bytes());
        }
        q.extend_from_slice(b"t\x940");
        for _ in 0..n {
            q.extend_from_slice(b"(h\x00\x85\x90");
        }
        q.push(b'.');
        out.push((
            format!("a set meets {n} equal 1-tuples around one {n}-item tuple"),
            q,
            all.clone(),
            LimitName::MaxKeyStepsPerByte,
        ));
    }
    out
}

#[test]
fn attacks_on_the_readers_key_work_are_refused_with_their_limit() {
    for (label, bytes, policies, limit) in attacks() {
        for name in policies {
            let policy = Policy::builtin(name).unwrap();
            let start = Instant::now();
            let e = Decoder::new(&bytes, &policy)
                .decode()
                .err()
                .unwrap_or_else(|| panic!("{label} under {name}: accepted"));
            let took = start.elapsed();
            match e.kind() {
                ErrorKind::LimitExceeded {
                    limit: got,
                    seen,
                    max,
                } => {
                    assert_eq!(*got, limit, "{label} under {name}: {e}");
                    assert!(seen > max, "{label}: {e}");
                }
                other => panic!("{label} under {name}: {other:?} ({e})"),
            }
            eprintln!(
                "{label} ({} bytes) under {name}: {} in {:.2} ms",
                bytes.len(),
                limit.name(),
                took.as_secs_f64() * 1e3
            );
        }
    }
}

/// Equal datetime-family values that are distinct objects are one set item, as in CPython;
/// naive and aware, or date and datetime, are not. Each pickle is CPython's, of a list of the
/// values given to `set()` by a `__reduce__`, so each value arrives as its own object.
#[test]
fn datetime_keys_compare_by_value_under_mitogen_plus() {
    let cases = [
        "[d.date(2020, 1, 1), d.date(2020, 1, 1), d.date(2020, 1, 2)]",
        "[d.datetime(2020, 1, 1, 12), d.datetime(2020, 1, 1, 12), d.date(2020, 1, 1)]",
        "[d.datetime(2020, 1, 1, 12, tzinfo=d.timezone(d.timedelta(hours=1))), \
          d.datetime(2020, 1, 1, 11, tzinfo=d.timezone.utc), d.datetime(2020, 1, 1, 11)]",
        "[d.timedelta(days=1), d.timedelta(hours=24), d.timedelta(seconds=1)]",
        "[d.timezone(d.timedelta(hours=1), 'A'), d.timezone(d.timedelta(hours=1)), d.timezone.utc]",
        "[d.time(1, 2, 3), d.time(1, 2, 3), d.time(1, 2, 3, tzinfo=d.timezone.utc), \
          d.time(2, 2, 3, tzinfo=d.timezone(d.timedelta(hours=1)))]",
    ];
    let policy = Policy::builtin("mitogen-plus").unwrap();
    for case in cases {
        let out = common::python(
            &format!(
                "import pickle, datetime as d\n\
                 class S(list):\n    def __reduce__(self): return (set, (list(self),))\n\
                 p = pickle.dumps(S({case}), 2)\n\
                 print(p.hex(), len(pickle.loads(p)))"
            ),
            &[],
        );
        let (hex, n) = out.trim().split_once(' ').unwrap();
        let p = common::hex_decode(hex);
        let doc = Decoder::new(&p, &policy)
            .decode()
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        let Some(Value::Set(items)) = doc.get(doc.root().unwrap()) else {
            panic!("{case}: not a set");
        };
        assert_eq!(items.len().to_string(), n, "{case}");
    }
}

/// The files of the repository's corpora that `data` accepts as one pickle.
fn accepted_files() -> Vec<PathBuf> {
    let repo = common::repo();
    let mut files = Vec::new();
    for dir in [
        "tests/corpus/good",
        "tests/corpus/hostile",
        "audit/vectors",
        "tests/regression",
    ] {
        let Ok(entries) = std::fs::read_dir(repo.join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().is_some_and(|x| x == "pkl") {
                files.push(path);
            }
        }
    }
    // The committed fuzz seeds, and the libFuzzer corpora when a campaign has run here
    // (`fuzz/seed.sh` and `cargo fuzz run` fill them; git-ignored).
    let mut stack = vec![
        repo.join("fuzz/seeds"),
        repo.join("fuzz/corpus/decode"),
        repo.join("fuzz/corpus/scan_build_agree"),
    ];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    let policy = Policy::data();
    files
        .into_iter()
        .filter(|p| {
            let data = std::fs::read(p).unwrap();
            Decoder::new(&data, &policy).decode().is_ok()
        })
        .collect()
}

/// The Python side of the differential check: reads file paths on stdin, prints
/// "start PATH" before and "done SECONDS" after each `pickle.loads` (the best of 3), so that a
/// file that freezes CPython is named by the last "start" when the child is killed.
const CPYTHON_TIMER: &str = r#"
import pickle, sys, time
for line in sys.stdin:
    path = line.rstrip("\n")
    data = open(path, "rb").read()
    print("start", path, flush=True)
    best = None
    for _ in range(3):
        t = time.perf_counter()
        try:
            pickle.loads(data)
        except Exception:
            pass
        d = time.perf_counter() - t
        best = d if best is None else min(best, d)
    print("done", best, flush=True)
"#;

/// CPython's `pickle.loads` of everything `data` accepts from the corpora takes at most
/// `FACTOR` times picklewarden's decode of it plus `SLACK` (the timer's and the machine's
/// noise), file by file, and never freezes: the child running it is killed after `TIMEOUT`.
#[test]
fn cpython_reads_what_picklewarden_accepts_in_proportionate_time() {
    const FACTOR: f64 = 100.0;
    const SLACK: f64 = 0.05;
    const TIMEOUT: Duration = Duration::from_secs(300);
    let files = accepted_files();
    assert!(files.len() > 1000, "only {} files accepted", files.len());
    let policy = Policy::data();
    let ours: Vec<f64> = files
        .iter()
        .map(|p| {
            let data = std::fs::read(p).unwrap();
            (0..3)
                .map(|_| {
                    let t = Instant::now();
                    let _ = Decoder::new(&data, &policy).decode();
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::MAX, f64::min)
        })
        .collect();
    let mut child = Command::new("python3")
        .args(["-c", CPYTHON_TIMER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut stdin = child.stdin.take().unwrap();
    let list: String = files.iter().map(|p| format!("{}\n", p.display())).collect();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(list.as_bytes());
    });
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + TIMEOUT;
    let mut current = String::new();
    let mut theirs = Vec::new();
    while theirs.len() < files.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                if let Some(path) = line.strip_prefix("start ") {
                    current = path.to_owned();
                } else if let Some(secs) = line.strip_prefix("done ") {
                    theirs.push(secs.parse::<f64>().unwrap());
                }
            }
            Err(_) => {
                let _ = child.kill();
                panic!("CPython did not finish within {TIMEOUT:?}; it was loading {current}");
            }
        }
    }
    let _ = child.wait();
    let _ = writer.join();
    let mut worst = (0.0f64, 0usize);
    for (i, (&c, &p)) in theirs.iter().zip(&ours).enumerate() {
        assert!(
            c <= FACTOR * p + SLACK,
            "{}: CPython took {:.3} s, picklewarden {:.6} s",
            files[i].display(),
            c,
            p
        );
        if c / p.max(1e-9) > worst.0 {
            worst = (c / p.max(1e-9), i);
        }
    }
    eprintln!(
        "{} files; the largest ratio CPython / picklewarden: {:.1} ({})",
        files.len(),
        worst.0,
        files[worst.1].display()
    );
}

/// `n` distinct 2-tuples of ints that share one hash under CPython 3.7 and before (and 2.7),
/// whose `tuplehash` is `x = (x ^ hash(item)) * mult` with a fixed `mult` schedule: after
/// the first item `x1(a) = (0x345678 ^ hash(a)) * 1000003`, so `(a', b')` collides with
/// `(a, b)` when `hash(b') = x1(a) ^ x1(a') ^ hash(b)`, an int below 2**61 - 1 in magnitude
/// for about half of the `a'` tried. CPython 3.8+ (xxHash) spreads them.
fn old_tuple_hash_collisions(n: usize) -> Vec<(i64, i64)> {
    let p = (1i64 << 61) - 1;
    let h = |i: i64| (if i == -1 { -2 } else { i }) as u64;
    let x1 = |a: i64| (0x0034_5678 ^ h(a)).wrapping_mul(1_000_003);
    let (a0, b0) = (1i64, 7i64);
    let target = x1(a0) ^ h(b0);
    let mut out = vec![(a0, b0)];
    let mut state = 0x1234_5678_9abc_def0u64;
    while out.len() < n {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        let a = (state >> 4) as i64 | 2;
        let s = (target ^ x1(a)) as i64;
        if s.abs() < p - 1 && s != -1 && s != -2 {
            out.push((a, s));
        }
    }
    out
}

fn int_arg(i: i64) -> Vec<u8> {
    let mut out = vec![0x8a, 8];
    out.extend_from_slice(&i.to_le_bytes());
    out
}

/// The colliding keys of [`old_tuple_hash_collisions`] as a dict's keys, a set's items, a
/// frozenset's items and `(a, b, None)` dict keys (a `None` after the colliding items keeps
/// them colliding, whatever CPython before 3.12 hashes it as: its address), with the
/// policies that can write each.
fn old_hash_attacks(n: usize) -> Vec<(&'static str, Vec<u8>, Vec<&'static str>)> {
    let keys = old_tuple_hash_collisions(n);
    let mut dict = b"\x80\x02}(".to_vec();
    let mut set = b"\x80\x04\x8f(".to_vec();
    let mut frozen = b"\x80\x04(".to_vec();
    let mut with_none = b"\x80\x02}(".to_vec();
    for &(a, b) in &keys {
        let t = [int_arg(a), int_arg(b), b"\x86".to_vec()].concat();
        dict.extend_from_slice(&t);
        dict.extend_from_slice(b"N");
        set.extend_from_slice(&t);
        frozen.extend_from_slice(&t);
        with_none.extend([int_arg(a), int_arg(b), b"N\x87N".to_vec()].concat());
    }
    dict.extend_from_slice(b"u.");
    set.extend_from_slice(b"\x90.");
    frozen.extend_from_slice(b"\x91.");
    with_none.extend_from_slice(b"u.");
    vec![
        (
            "dict",
            dict,
            vec!["data", "strict", "mitogen", "mitogen-plus"],
        ),
        ("set", set, vec!["data", "strict", "mitogen-plus"]),
        ("frozenset", frozen, vec!["data", "strict", "mitogen-plus"]),
        ("(a, b, None)", with_none, vec!["data"]),
    ]
}

/// A Mitogen parent on CPython 3.6 (RHEL 8's) hashes tuples as CPython 3.7 and before did,
/// where colliding keys are easy to choose: 5,000 such 2-tuples of ints as set items (110 KB)
/// take CPython 3.6 and 3.7 2.3 s (quadratic: about 150 s for 40,000) and 3.11 0.1 s. The
/// model counts the comparisons they cost there: 2,000 of them are refused by
/// `max_key_steps_per_byte` (and accepted with that limit lifted), as a dict key, a set item
/// and a frozenset item, under every policy that can write them. Plain data that collides
/// under that hash (points of small ints, positive and negative) is still accepted: the
/// class of a hash there is not held to `max_key_collisions`. CPython 3.6, 3.7 and 2.7 (when
/// installed) confirm that the keys share one hash.
#[test]
fn tuples_colliding_under_cpython_3_7s_hash_are_refused() {
    for (label, p, policies) in old_hash_attacks(2000) {
        for name in policies {
            let policy = Policy::builtin(name).unwrap();
            let err = Decoder::new(&p, &policy).decode().map(|_| ()).unwrap_err();
            assert!(
                matches!(
                    err.kind(),
                    ErrorKind::LimitExceeded {
                        limit: LimitName::MaxKeyStepsPerByte,
                        ..
                    }
                ),
                "{label} {name}: {err}"
            );
            let mut limits = policy.limits;
            limits.max_key_steps_per_byte = u64::MAX;
            let doc = Decoder::new(&p, &policy).limits(limits).decode();
            assert!(doc.is_ok(), "{label} {name} with the limit lifted");
        }
    }
    // Plain data: 64,000 points of range(-20, 20) cubed, as set items: 13 share one hash
    // under CPython 3.7 (8 under 3.8+, from hash(-1) == hash(-2)).
    let mut p = b"\x80\x04\x8f(".to_vec();
    for x in -20i32..20 {
        for y in -20i32..20 {
            for z in -20i32..20 {
                for c in [x, y, z] {
                    p.push(b'J');
                    p.extend_from_slice(&c.to_le_bytes());
                }
                p.push(0x87); // TUPLE3
            }
        }
    }
    p.extend_from_slice(b"\x90.");
    let doc = Decoder::new(&p, &Policy::data()).decode();
    assert!(doc.is_ok(), "points: {:?}", doc.err());
    let olds = old_pythons();
    if olds.is_empty() {
        eprintln!(
            "SKIPPED: no CPython 3.6, 3.7 or 2.7 (pyenv or PATH) to confirm that the keys collide"
        );
    }
    for py in olds {
        for (label, p, _) in old_hash_attacks(9) {
            if label == "set" || label == "frozenset" {
                continue; // protocol 4: not for CPython 2.7
            }
            let hex: String = p.iter().map(|b| format!("{b:02x}")).collect();
            let out = Command::new(&py)
                .arg("-c")
                .arg(format!(
                    "import pickle, binascii; print(len(set(hash(k) for k in pickle.loads(binascii.unhexlify('{hex}')))))"
                ))
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).trim(),
                "1",
                "{label} {}: {}",
                py.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// The CPython 3.6, 3.7 and 2.7 interpreters of pyenv (`$PYENV_ROOT`, `~/.pyenv` by default)
/// and on PATH that run (a pyenv shim that is not enabled does not, and is passed over).
fn old_pythons() -> Vec<PathBuf> {
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
    let mut candidates: Vec<PathBuf> = pyenv
        .and_then(|root| std::fs::read_dir(root.join("versions")).ok())
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    ["2.7", "3.6", "3.7"]
                        .iter()
                        .any(|v| n.starts_with(&format!("{v}.")))
                })
                .map(|e| e.path().join("bin/python"))
                .collect()
        })
        .unwrap_or_default();
    candidates.extend(["python3.6", "python3.7", "python2.7"].map(PathBuf::from));
    candidates
        .into_iter()
        .filter(|p| {
            Command::new(p)
                .args(["-c", "1"])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .collect()
}

/// Two equal 1 MiB texts (or bytes), the second met again and again through the memo: CPython
/// keeps the first as the key and compares the second with it, whole, at every insertion
/// (`unicode_eq` after the hashes match): 10,000 SETITEMs (2.1 MB) took CPython 3.11 2.0 s,
/// linear in the insertions times the text (about 200 s for 6 MB); picklewarden, which keeps
/// equal pairs, took 0.01 s and accepted it. The model counts such a comparison as the
/// text's length in steps (one per 256 bytes): refused by `max_key_steps_per_byte`, as a dict
/// key, a set item, a `frozenset()` argument and inside a tuple key; accepted with the limit
/// lifted.
#[test]
fn equal_long_texts_met_again_are_counted() {
    let text = vec![b'a'; 1 << 20];
    let x = [
        b"X".to_vec(),
        (text.len() as u32).to_le_bytes().to_vec(),
        text.clone(),
    ]
    .concat();
    let c = [
        b"B".to_vec(),
        (text.len() as u32).to_le_bytes().to_vec(),
        text,
    ]
    .concat();
    let n = 50_000;
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    for (kind, v) in [("str", &x), ("bytes", &c)] {
        let dict = [
            b"\x80\x04}".to_vec(),
            v.clone(),
            b"\x94Ns".to_vec(),
            v.clone(),
            b"\x94Ns".to_vec(),
            b"h\x01Ns".repeat(n),
            b".".to_vec(),
        ]
        .concat();
        cases.push((
            if kind == "str" {
                "dict str"
            } else {
                "dict bytes"
            },
            dict,
        ));
        if kind == "bytes" {
            continue;
        }
        let set = [
            b"\x80\x04\x8f(".to_vec(),
            v.clone(),
            b"\x94".to_vec(),
            v.clone(),
            b"\x94".to_vec(),
            b"h\x01".repeat(n),
            b"\x90.".to_vec(),
        ]
        .concat();
        cases.push(("set", set));
        let call = [
            b"\x80\x04\x8c\x08builtins\x8c\x09frozenset\x93](".to_vec(),
            v.clone(),
            b"\x94".to_vec(),
            v.clone(),
            b"\x94".to_vec(),
            b"h\x01".repeat(n),
            b"e\x85R.".to_vec(),
        ]
        .concat();
        cases.push(("frozenset()", call));
        let tuple = [
            b"\x80\x04}".to_vec(),
            v.clone(),
            b"\x85\x94Ns".to_vec(),
            v.clone(),
            b"\x85\x94Ns".to_vec(),
            b"h\x01Ns".repeat(n),
            b".".to_vec(),
        ]
        .concat();
        cases.push(("tuple key", tuple));
    }
    for (label, p) in cases {
        let policy = Policy::data();
        let err = Decoder::new(&p, &policy).decode().map(|_| ()).unwrap_err();
        assert!(
            matches!(
                err.kind(),
                ErrorKind::LimitExceeded {
                    limit: LimitName::MaxKeyStepsPerByte,
                    ..
                }
            ),
            "{label}: {err}"
        );
        let mut limits = policy.limits;
        limits.max_key_steps_per_byte = u64::MAX;
        let doc = Decoder::new(&p, &policy).limits(limits).decode();
        assert!(
            doc.is_ok(),
            "{label} with the limit lifted: {:?}",
            doc.err()
        );
    }
}

/// SETITEMS into a record that takes items (`collections.OrderedDict` under `torch`, as torch
/// pickles a state dict): the reader after inserts each key into a dict. 20,000 int keys
/// `k * (2**61 - 1)` (259 KB) took CPython 3.11 23 s and were accepted; the model now counts
/// them as a dict's keys: refused by `max_key_collisions` at the ninth, as into a dict; and
/// so are the pairs `OrderedDict` is called with. A state dict of text keys is still
/// accepted.
#[test]
fn keys_set_into_a_record_are_counted() {
    let policy = Policy::builtin("torch").unwrap();
    let od = |body: &[u8]| {
        [
            b"\x80\x02ccollections\nOrderedDict\n)R(".to_vec(),
            body.to_vec(),
            b"u.".to_vec(),
        ]
        .concat()
    };
    let mut colliding = Vec::new();
    for k in 1..=9u128 {
        colliding.extend(long1(k * MODULUS));
        colliding.push(b'N');
    }
    let p = od(&colliding);
    let at = |max: u64| {
        let mut limits = policy.limits;
        limits.max_key_collisions = max;
        Decoder::new(&p, &policy)
            .limits(limits)
            .decode()
            .map(|_| ())
    };
    match at(8).unwrap_err().kind() {
        ErrorKind::LimitExceeded { limit, seen, max } => {
            assert_eq!((*limit, *seen, *max), (LimitName::MaxKeyCollisions, 9, 8));
        }
        other => panic!("{other:?}"),
    }
    assert!(at(9).is_ok() && at(10).is_ok());
    // The same keys as the pairs of `OrderedDict([(k, None), ...])` (20,000 of them: CPython
    // 14.9 s), and of `OrderedDict({k: None, ...})` (the dict was counted when it was built;
    // the call inserts its keys again).
    let mut pairs = b"\x80\x02ccollections\nOrderedDict\n](".to_vec();
    for k in 1..=9u128 {
        pairs.extend(long1(k * MODULUS));
        pairs.extend_from_slice(b"N\x86");
    }
    pairs.extend_from_slice(b"e\x85R.");
    let at = |max: u64| {
        let mut limits = policy.limits;
        limits.max_key_collisions = max;
        Decoder::new(&pairs, &policy)
            .limits(limits)
            .decode()
            .map(|_| ())
    };
    match at(8).unwrap_err().kind() {
        ErrorKind::LimitExceeded { limit, seen, max } => {
            assert_eq!((*limit, *seen, *max), (LimitName::MaxKeyCollisions, 9, 8));
        }
        other => panic!("{other:?}"),
    }
    assert!(at(9).is_ok() && at(10).is_ok());
    let mut texts = Vec::new();
    for i in 0..2000 {
        let k = format!("layer{i}.weight");
        texts.push(b'X');
        texts.extend((k.len() as u32).to_le_bytes());
        texts.extend(k.as_bytes());
        texts.push(b'N');
    }
    let state_dict = od(&texts);
    let doc = Decoder::new(&state_dict, &policy).decode();
    assert!(doc.is_ok(), "{:?}", doc.err());
    // A 512 KiB text set as a key, then an equal text (another object, memoized) set again
    // 40,000 times through BINGET (1.2 MB): CPython compares the two whole at each insertion
    // (A72 through a record). Refused by max_key_steps_per_byte; set 20 times, accepted.
    let long = vec![b'a'; 512 * 1024];
    let equal_again = |times: usize| {
        let mut body = Vec::new();
        for _ in 0..2 {
            body.push(b'X');
            body.extend((long.len() as u32).to_le_bytes());
            body.extend(&long);
            body.push(b'N');
        }
        body.truncate(body.len() - 1);
        body.extend_from_slice(b"q\x00N");
        for _ in 0..times {
            body.extend_from_slice(b"h\x00N");
        }
        od(&body)
    };
    let many = equal_again(40_000);
    let Err(e) = Decoder::new(&many, &policy).decode() else {
        panic!("a long text set again 40,000 times was accepted");
    };
    assert!(
        matches!(
            e.kind(),
            ErrorKind::LimitExceeded {
                limit: LimitName::MaxKeyStepsPerByte,
                ..
            }
        ),
        "{e}"
    );
    let few = equal_again(20);
    let doc = Decoder::new(&few, &policy).decode();
    assert!(doc.is_ok(), "{:?}", doc.err());
}
