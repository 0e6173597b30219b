//! numpy's own pickles under the `numpy` policy, and variants numpy never writes
//! (tests/corpus/numpy/*.tsv, written by tests/python/gen_numpy.py with real numpy): every
//! dtype numpy pickles, at protocols 0, 2 and 4, arrays of them (0-d, empty, Fortran order,
//! big-endian, structured, datetime, objects) and scalars are accepted; each hand-made variant
//! is refused with the kind its line names, at a BUILD or REDUCE opcode.

#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use std::path::Path;

use picklewarden::{Decoder, Opcode, Policy};

struct Row {
    name: String,
    expect: String,
    kind: String,
    protocol: String,
    bytes: Vec<u8>,
}

fn rows(file: &str) -> Vec<Row> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus/numpy")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let hex = f[7];
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            Row {
                name: f[0].to_owned(),
                expect: f[1].to_owned(),
                kind: f[2].to_owned(),
                protocol: f[6].to_owned(),
                bytes,
            }
        })
        .collect()
}

fn check_file(file: &str, min_rows: usize) {
    let policy = Policy::builtin("numpy").unwrap();
    let rows = rows(file);
    assert!(rows.len() >= min_rows, "{file}: {} rows", rows.len());
    let mut wrong = Vec::new();
    for r in &rows {
        let got = Decoder::new(&r.bytes, &policy).decode();
        let what = format!("{file} {} (protocol {})", r.name, r.protocol);
        match (r.expect.as_str(), got) {
            ("accept", Ok(_)) => {}
            ("refuse", Err(e)) => {
                let at = r.bytes[e.offset() as usize];
                let opcode_ok = [Opcode::Build, Opcode::Reduce, Opcode::Setitem]
                    .iter()
                    .any(|o| o.byte() == at);
                if e.kind().name() != r.kind || !opcode_ok {
                    wrong.push(format!("{what}: refused as {e}, want {}", r.kind));
                }
            }
            ("accept", Err(e)) => wrong.push(format!("{what}: refused: {e}")),
            (_, Ok(_)) => wrong.push(format!("{what}: accepted")),
            _ => wrong.push(format!("{what}: bad row")),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn every_dtype_numpy_pickles_is_accepted_and_the_others_refused() {
    check_file("dtypes.tsv", 300);
}

#[test]
fn arrays_numpy_pickles_are_accepted() {
    check_file("arrays.tsv", 60);
}

#[test]
fn scalars_numpy_pickles_are_accepted() {
    check_file("scalars.tsv", 25);
}

#[test]
fn variants_numpy_never_writes_are_refused() {
    check_file("hostile.tsv", 30);
}

/// The refusal names the global and says why, at the offset of the BUILD whose state
/// disagrees.
#[test]
fn an_object_dtype_without_its_flags_is_refused_at_its_build() {
    let policy = Policy::builtin("numpy").unwrap();
    let row = rows("hostile.tsv")
        .into_iter()
        .find(|r| r.name == "object_flags_zero")
        .unwrap();
    let e = Decoder::new(&row.bytes, &policy).decode().unwrap_err();
    assert_eq!(e.kind().name(), "non_canonical");
    assert_eq!(e.opcode_name(), Some("BUILD"));
    let text = e.to_string();
    assert!(
        text.starts_with(
            "not the form its writer produces: numpy.dtype: the flags of numpy.dtype 'O8' are \
             not numpy's (63): numpy takes them from the state at offset"
        ),
        "{text}"
    );
}

/// The same pickles under a policy without the checks are records like any other: the checks
/// are the policy's.
#[test]
fn without_the_checks_a_record_is_kept_as_it_is() {
    let toml = picklewarden::policy::builtin_toml("numpy")
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("check = "))
        .collect::<Vec<_>>()
        .join("\n");
    let loose = Policy::from_toml_str(&toml).unwrap();
    let row = rows("hostile.tsv")
        .into_iter()
        .find(|r| r.name == "object_flags_zero")
        .unwrap();
    assert!(Decoder::new(&row.bytes, &loose).decode().is_ok());
}

/// numpy's own pickles have a canonical pickle once the checks found every dtype's and
/// array's BUILD to be numpy's: each record written again as its call and that BUILD, at
/// protocol 5 and 2. It decodes under `numpy` to the same typed JSON (names as written), and
/// is its own canonical form. (CPython with numpy loads it to an equal array: checked by
/// `picklewarden decode --policy numpy --format pickle` on these rows with numpy 2.4.6.)
#[test]
fn numpy_records_are_written_back_as_numpy_writes_them() {
    use picklewarden::canonical::{to_pickle_bounded, Protocol};
    use picklewarden::json::to_typed_json;
    use picklewarden::OutputBound;
    let policy = Policy::builtin("numpy").unwrap();
    let mut n = 0;
    for file in ["dtypes.tsv", "arrays.tsv", "scalars.tsv"] {
        for r in rows(file).into_iter().filter(|r| r.expect == "accept") {
            let what = format!("{file} {} (protocol {})", r.name, r.protocol);
            let doc = Decoder::new(&r.bytes, &policy).decode().unwrap();
            let json = to_typed_json(&doc);
            for protocol in [Protocol::V5, Protocol::V2] {
                let out = to_pickle_bounded(&doc, protocol, OutputBound::default())
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let again = Decoder::new(&out, &policy)
                    .decode()
                    .unwrap_or_else(|e| panic!("{what}: the canonical pickle: {e}"));
                assert_eq!(to_typed_json(&again), json, "{what}");
                let twice = to_pickle_bounded(&again, protocol, OutputBound::default()).unwrap();
                assert_eq!(twice, out, "{what}: not its own canonical form");
            }
            n += 1;
        }
    }
    assert!(n > 300, "{n} rows");
}
