//! Number text that CPython's releases read differently (`src/input/text.rs`
//! `version_dependent_int_text`): refused as `version_dependent_number`, with its offset and
//! opcode, alike by the decode, its careful path and the scan, under every built-in policy;
//! and the survey of how CPython 2.7 and 3.6-3.13 read protocol 0's number texts
//! (`tests/python/number_text_survey.py`, recorded in `tests/python/number_text_survey.tsv`)
//! held against picklewarden: every text picklewarden accepts is read as the same value and
//! type by every CPython 3 surveyed (the C and the Python unpickler), and every text it
//! refuses as version-dependent is one they do not all read as one value.

// Test code: a failed invariant is a panic, by design (clippy.toml's allow-*-in-tests covers
// #[test] fns only, not the helpers and the shared module).
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

mod common;

use std::collections::BTreeMap;
use std::process::Command;

use picklewarden::num_bigint::BigInt;
use picklewarden::{Decoder, LimitName, Limits, Policy, Scanner, Value};

const SURVEY: &str = "tests/python/number_text_survey.py";

/// What a pickle gives: the root's reading, or the refusal as (kind, offset, opcode).
type Outcome = Result<String, (String, u64, u8)>;

/// The built-in policies: the rule holds under every one.
fn policies() -> Vec<Policy> {
    ["data", "strict", "mitogen", "mitogen-plus"]
        .iter()
        .map(|n| Policy::builtin(n).unwrap_or_else(|| panic!("no policy {n}")))
        .collect()
}

/// What the decode, its careful path and the scan make of `data` under `policy` with
/// `limits`: the root's reading, or the refusal as (kind, offset, opcode). Panics when the
/// three disagree.
fn outcome(data: &[u8], policy: &Policy, limits: Limits) -> Outcome {
    let fast = Decoder::new(data, policy).limits(limits).decode();
    let careful = Decoder::new(data, policy)
        .limits(limits)
        .careful_only()
        .decode();
    let scan = Scanner::new(data, policy).limits(limits).run().result;
    let refusal = |e: &picklewarden::Error| {
        (
            e.kind().name().to_owned(),
            e.offset(),
            e.opcode().unwrap_or(0),
        )
    };
    let shown = String::from_utf8_lossy(&data[..data.len().min(40)]).into_owned();
    match (&fast, &careful) {
        (Ok(a), Ok(b)) => {
            let (ra, rb) = (reading(a), reading(b));
            assert_eq!(ra, rb, "{shown:?}: fast and careful paths");
            // The scan accepts what the decode accepts.
            assert!(scan.is_ok(), "{shown:?}: scan {scan:?}");
            Ok(ra)
        }
        (Err(a), Err(b)) => {
            let (ra, rb) = (refusal(a), refusal(b));
            assert_eq!(ra, rb, "{shown:?}: fast and careful paths");
            // Every refusal here is one the scan makes, at the same place.
            let s = scan
                .as_ref()
                .expect_err("the scan accepted what the decode refused");
            assert_eq!(refusal(s), ra, "{shown:?}: scan and decode");
            Err(ra)
        }
        _ => panic!("{shown:?}: fast {fast:?}, careful {careful:?}"),
    }
}

/// The root of a decoded document as the survey writes a reading (`int 10`, `bool True`,
/// `float 1.5`, `int #N:R` for an int of 40 digits or more: N hex digits, R its residue
/// modulo 2**61 - 1).
fn reading(doc: &picklewarden::Document<'_>) -> String {
    let id = doc.root().expect("a root");
    match doc.get(id).expect("the root's value") {
        Value::Bool(b) => format!("bool {}", if b { "True" } else { "False" }),
        Value::Int(i) => format!("int {i}"),
        Value::BigInt(b) => big_reading(b),
        Value::Float(x) => format!("float {}", picklewarden::float_repr(x)),
        other => format!("other {}", other.type_name()),
    }
}

fn big_reading(b: &BigInt) -> String {
    let limit = BigInt::from(10u8).pow(40);
    if b.magnitude() < limit.magnitude() {
        return format!("int {b}");
    }
    let m = BigInt::from((1u64 << 61) - 1);
    let r = ((b % &m) + &m) % &m;
    format!("int #{}:{r}", b.magnitude().to_str_radix(16).len())
}

fn kind(name: &str, offset: u64, opcode: u8) -> Outcome {
    Err((name.to_owned(), offset, opcode))
}

fn ok(reading: &str) -> Outcome {
    Ok(reading.to_owned())
}

fn pickle(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Each refused text with its exact kind, offset and opcode, and each accepted one with its
/// value, under every built-in policy.
#[test]
fn version_dependent_texts_are_refused_where_they_are() {
    const VDN: &str = "version_dependent_number";
    let zeros_4301 = "0".repeat(4301);
    let one_4301 = format!("{}1", "0".repeat(4300));
    let ten_4300 = format!("1{}", "0".repeat(4299));
    let zeros_4300 = "0".repeat(4300);
    let cases: Vec<(Vec<u8>, Outcome)> = vec![
        // INT with a leading zero: 8 to CPython <= 3.13's C unpickler, refused by its Python one.
        (b"I010\n.".to_vec(), kind(VDN, 0, b'I')),
        (b"I001\n.".to_vec(), kind(VDN, 0, b'I')),
        (b"I007\n.".to_vec(), kind(VDN, 0, b'I')),
        (b"I08\n.".to_vec(), kind(VDN, 0, b'I')),
        (b"I-01\n.".to_vec(), kind(VDN, 0, b'I')),
        (b"I+010\n.".to_vec(), kind(VDN, 0, b'I')),
        (b"I0000000000000000000010\n.".to_vec(), kind(VDN, 0, b'I')),
        // INT bools by length in CPython <= 3.13's C unpickler.
        (b"I+1\n.".to_vec(), kind(VDN, 0, b'I')),
        (b"I-0\n.".to_vec(), kind(VDN, 0, b'I')),
        (b"I+0\n.".to_vec(), kind(VDN, 0, b'I')),
        // LONG with a leading zero: refused by CPython <= 3.13 (int(text, 0)).
        (b"L010L\n.".to_vec(), kind(VDN, 0, b'L')),
        (b"L01\n.".to_vec(), kind(VDN, 0, b'L')),
        (b"L-01L\n.".to_vec(), kind(VDN, 0, b'L')),
        // Deeper in a pickle: the opcode's own offset.
        (b"(lp0\nI1\naI010\na.".to_vec(), kind(VDN, 9, b'I')),
        (b"\x80\x02I+1\n.".to_vec(), kind(VDN, 2, b'I')),
        (b"\x80\x02]q\x00L00010L\na.".to_vec(), kind(VDN, 5, b'L')),
        // PUT and GET of more than 4300 digits: read by CPython 3.6, refused by later ones.
        (
            pickle(&[b"I7\np", one_4301.as_bytes(), b"\n."]),
            kind(VDN, 3, b'p'),
        ),
        (
            pickle(&[b"I7\np1\ng", one_4301.as_bytes(), b"\n."]),
            kind(VDN, 6, b'g'),
        ),
        // INT and LONG of more than 4300 digits: the limit's refusal at its default.
        (
            pickle(&[b"I", zeros_4301.as_bytes(), b"\n."]),
            kind("limit_exceeded", 0, b'I'),
        ),
        // Not plain decimal: invalid_number as before, whatever CPython makes of it.
        (b"I0x10\n.".to_vec(), kind("invalid_number", 0, b'I')),
        (b"I 1\n.".to_vec(), kind("invalid_number", 0, b'I')),
        (b"I1_0\n.".to_vec(), kind("invalid_number", 0, b'I')),
        (b"L0o7L\n.".to_vec(), kind("invalid_number", 0, b'L')),
        (b"F1_0\n.".to_vec(), kind("invalid_number", 0, b'F')),
        (b"F1e999\n.".to_vec(), kind("invalid_number", 0, b'F')),
        (b"I7\np1\x00\n.".to_vec(), kind("invalid_number", 3, b'p')),
        // Read alike by every CPython 3 (and by Python 2, which writes I00/I01).
        (b"I00\n.".to_vec(), ok("bool False")),
        (b"I01\n.".to_vec(), ok("bool True")),
        (b"I0\n.".to_vec(), ok("int 0")),
        (b"I000\n.".to_vec(), ok("int 0")),
        (b"I-00\n.".to_vec(), ok("int 0")),
        (b"I+00\n.".to_vec(), ok("int 0")),
        (b"I-1\n.".to_vec(), ok("int -1")),
        (b"I+10\n.".to_vec(), ok("int 10")),
        (b"I10\n.".to_vec(), ok("int 10")),
        (
            b"I9223372036854775808\n.".to_vec(),
            ok("int 9223372036854775808"),
        ),
        (pickle(&[b"I", zeros_4300.as_bytes(), b"\n."]), ok("int 0")),
        (b"L00L\n.".to_vec(), ok("int 0")),
        (b"L0\n.".to_vec(), ok("int 0")),
        (b"L+1L\n.".to_vec(), ok("int 1")),
        (b"L-0\n.".to_vec(), ok("int 0")),
        (b"L10\n.".to_vec(), ok("int 10")),
        (
            pickle(&[b"L", ten_4300.as_bytes(), b"L\n."]),
            ok("int #3571:1543283363480467471"),
        ),
        // PUT and GET: base 10 with sign and leading zeros in every CPython 3.
        (b"I7\np007\n0g7\n.".to_vec(), ok("int 7")),
        (b"I7\np+1\n0g01\n.".to_vec(), ok("int 7")),
        (b"I7\np-0\n0g00\n.".to_vec(), ok("int 7")),
        // FLOAT text: leading zeros and signs are read alike.
        (b"F010\n.".to_vec(), ok("float 10.0")),
        (b"F-0\n.".to_vec(), ok("float -0.0")),
        (b"F00.5\n.".to_vec(), ok("float 0.5")),
        (b"F+inf\n.".to_vec(), ok("float inf")),
    ];
    for policy in policies() {
        for (data, want) in &cases {
            let got = outcome(data, &policy, policy.limits);
            let shown = String::from_utf8_lossy(&data[..data.len().min(40)]).into_owned();
            assert_eq!(&got, want, "{shown:?} under {}", policy.name);
        }
    }
}

/// With `max_long_text_digits` raised past CPython's 4300, INT and LONG text of more digits is
/// still refused: CPython 3.6 reads it, later releases refuse it.
#[test]
fn long_texts_past_4300_digits_are_refused_whatever_the_limit() {
    let mut limits = Limits::default();
    limits.set(LimitName::MaxLongTextDigits, 100_000);
    let policy = Policy::data();
    let ten_4301 = format!("1{}", "0".repeat(4300));
    let zeros_4301 = "0".repeat(4301);
    for (data, offset) in [
        (pickle(&[b"I", zeros_4301.as_bytes(), b"\n."]), 0),
        (pickle(&[b"L", ten_4301.as_bytes(), b"L\n."]), 0),
        (pickle(&[b"I", b"-", ten_4301.as_bytes(), b"\n."]), 0),
        (pickle(&[b"\x80\x02L", ten_4301.as_bytes(), b"\n."]), 2),
    ] {
        assert_eq!(
            outcome(&data, &policy, limits),
            kind("version_dependent_number", offset, data[offset as usize]),
        );
    }
    // 4300 digits are read by every CPython 3.
    let ten_4300 = format!("-1{}", "0".repeat(4299));
    let data = pickle(&[b"L", ten_4300.as_bytes(), b"L\n."]);
    assert!(outcome(&data, &policy, limits).is_ok());
}

/// The error's message says why, and its category is malformed.
#[test]
fn the_refusal_says_why() {
    let e = Decoder::new(b"I010\n.", &Policy::data())
        .decode()
        .expect_err("refused");
    assert_eq!(e.category(), picklewarden::Category::Malformed);
    assert_eq!(
        e.to_string(),
        "number text read differently by CPython versions: a leading zero: octal to the C \
         unpickler of CPython <= 3.13 (strtol base 0), refused by its Python unpickler \
         (int(text, 0)), decimal to newer CPython (gh-126992) at offset 0 (0x0, opcode 0x49 INT)"
    );
}

// ------------------------------------------------------------------------------ the survey

/// One case of the survey: its opcode, its key in the table, its text.
struct Case {
    op: String,
    key: String,
    text: Vec<u8>,
}

fn survey_cases() -> Vec<Case> {
    common::python(
        &format!("import runpy, sys; sys.argv = ['x', 'cases']; runpy.run_path('{SURVEY}', run_name='__main__')"),
        &[],
    )
    .lines()
    .map(|line| {
        let mut f = line.split('\t');
        let (op, key, hex) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap_or(""));
        Case {
            op: op.to_owned(),
            key: key.to_owned(),
            text: common::hex_decode(hex),
        }
    })
    .collect()
}

/// The recorded table: its versions (full, `3.6.15`) and each (op, key)'s cells (C reading,
/// Python reading) by version.
type Table = (
    Vec<String>,
    BTreeMap<(String, String), Vec<(String, String)>>,
);

fn recorded() -> Table {
    let text = std::fs::read_to_string(common::repo().join("tests/python/number_text_survey.tsv"))
        .expect("the recorded survey");
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<String> = lines
        .next()
        .unwrap()
        .split('\t')
        .map(str::to_owned)
        .collect();
    assert_eq!(&header[..2], ["op", "text"]);
    let versions = header[2..].to_vec();
    let mut rows = BTreeMap::new();
    for line in lines {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), header.len(), "{line}");
        let cells = f[2..]
            .iter()
            .map(|c| {
                let (a, b) = c.split_once('|').unwrap_or_else(|| panic!("cell {c:?}"));
                (a.to_owned(), b.to_owned())
            })
            .collect();
        rows.insert((f[0].to_owned(), f[1].to_owned()), cells);
    }
    (versions, rows)
}

/// The pickle the survey reads a case's text in (`pickle_of` in the script).
fn pickle_of(op: &str, text: &[u8]) -> Vec<u8> {
    match op {
        "INT" => pickle(&[b"I", text, b"\n."]),
        "LONG" => pickle(&[b"L", text, b"\n."]),
        "FLOAT" => pickle(&[b"F", text, b"\n."]),
        "PUT" => pickle(&[b"I7\np", text, b"\n."]),
        "GET" => {
            let mut p = Vec::new();
            for k in GET_KEYS {
                p.extend_from_slice(format!("I{}\nq", 1000 + u32::from(k)).as_bytes());
                p.push(k);
                p.push(b'0');
            }
            p.extend_from_slice(b"g");
            p.extend_from_slice(text);
            p.extend_from_slice(b"\n.");
            p
        }
        _ => panic!("op {op}"),
    }
}

const GET_KEYS: [u8; 7] = [0, 1, 2, 7, 8, 10, 16];

/// picklewarden's reading of a case in the survey's terms, or its refusal's kind.
fn our_reading(op: &str, text: &[u8], policy: &Policy) -> Result<String, String> {
    let data = pickle_of(op, text);
    let got = outcome(&data, policy, policy.limits).map_err(|(k, _, _)| k)?;
    match op {
        "PUT" => {
            // The slot PUT stored to: the text's value, as a GET of it finds the 7 again.
            let digits = std::str::from_utf8(text).unwrap();
            let index: u64 = digits.trim_start_matches(['+', '-']).parse().unwrap();
            let check = pickle(&[
                b"I7\np",
                text,
                b"\n0g",
                index.to_string().as_bytes(),
                b"\n.",
            ]);
            assert_eq!(outcome(&check, policy, policy.limits), ok("int 7"));
            Ok(format!("memo {index}"))
        }
        "GET" => {
            let v: i64 = got.strip_prefix("int ").unwrap().parse().unwrap();
            Ok(format!("memo {}", v - 1000))
        }
        _ => Ok(got),
    }
}

/// The survey's recorded readings against every interpreter present (the same readings
/// when it is the version recorded; the rule below in any case), and picklewarden against
/// the recorded ones: a text picklewarden accepts is read as the same value and type by the
/// C and the Python unpickler of every CPython 3 surveyed; a text it refuses as
/// version-dependent is not read as one value by all of them.
#[test]
fn survey_readings_hold_against_picklewarden() {
    let (versions, rows) = recorded();
    let cases = survey_cases();
    assert_eq!(cases.len(), rows.len(), "the recorded table is out of date");
    let policy = Policy::data();
    let ours: Vec<Result<String, String>> = cases
        .iter()
        .map(|c| our_reading(&c.op, &c.text, &policy))
        .collect();
    let row = |c: &Case| {
        rows.get(&(c.op.clone(), c.key.clone()))
            .unwrap_or_else(|| panic!("{} {} not recorded: run the survey", c.op, c.key))
    };
    let python3 = |v: &str| !v.starts_with("2.");
    let (mut accepted, mut dependent) = (0, 0);
    for (c, our) in cases.iter().zip(&ours) {
        let cells = row(c);
        let readings: Vec<&String> = versions
            .iter()
            .zip(cells)
            .filter(|(v, _)| python3(v))
            .flat_map(|(_, (a, b))| [a, b])
            .collect();
        match our {
            Ok(r) => {
                accepted += 1;
                for x in &readings {
                    assert_eq!(*x, r, "{} {}: read as {x} by a CPython 3", c.op, c.key);
                }
            }
            Err(k) if k == "version_dependent_number" => {
                dependent += 1;
                let first = readings[0];
                let one_value = !first.starts_with("err") && readings.iter().all(|x| *x == first);
                assert!(
                    !one_value,
                    "{} {}: every CPython 3 reads {first}",
                    c.op, c.key
                );
            }
            Err(_) => {}
        }
    }
    eprintln!(
        "{} cases: {accepted} accepted, {dependent} version-dependent",
        cases.len()
    );
    assert!(
        accepted >= 150 && dependent >= 40,
        "{accepted} accepted, {dependent} dependent"
    );

    // Every interpreter present, against the table (and the rule).
    for (i, recorded_version) in versions.iter().enumerate() {
        let short: String = recorded_version
            .split('.')
            .take(2)
            .collect::<Vec<_>>()
            .join(".");
        let found = common::python(
            &format!("import runpy, sys; sys.argv = ['x', 'find', '{short}']; runpy.run_path('{SURVEY}', run_name='__main__')"),
            &[],
        );
        let Some((path, version)) = found.trim().split_once('\t') else {
            eprintln!(
                "SKIPPED: python{short} not found: its readings of the survey are not checked"
            );
            continue;
        };
        let out = Command::new(path)
            .arg(common::repo().join(SURVEY))
            .arg("probe")
            .output()
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(
            out.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let same = version == recorded_version;
        if !same {
            eprintln!(
                "python{short} is {version}, the table has {recorded_version}: checking the rule only"
            );
        }
        let mut n = 0;
        for ((line, c), our) in text.lines().zip(&cases).zip(&ours) {
            let f: Vec<&str> = line.split('\t').collect();
            assert_eq!(
                (f[0], f[1]),
                (c.op.as_str(), c.key.as_str()),
                "{path}: case order"
            );
            let (cr, pr) = (f[2], f[3]);
            if same {
                let want = &row(c)[i];
                assert_eq!(
                    (cr, pr),
                    (want.0.as_str(), want.1.as_str()),
                    "{version} {} {}",
                    c.op,
                    c.key
                );
            }
            if let (Ok(r), true) = (our, python3(version)) {
                assert_eq!(
                    (cr, pr),
                    (r.as_str(), r.as_str()),
                    "{version} {} {}",
                    c.op,
                    c.key
                );
            }
            n += 1;
        }
        assert_eq!(n, cases.len(), "{path}: cases probed");
        eprintln!("python{short} ({version}): {n} readings checked");
    }
}
