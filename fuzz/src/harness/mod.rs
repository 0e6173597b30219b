//! The bodies of the fuzz targets: decode an input under every policy, with default and tight
//! limits, as one pickle and as a stream, and check invariants on every result (not only "no
//! panic"). The `decode` and `structured` fuzz targets call [`check_decode`] and
//! [`check_program`]; the main crate's `tests/fuzz_smoke.rs` compiles this folder through
//! `#[path]` and calls the same functions, so the harness cannot rot.
//!
//! Invariants checked:
//! - an accepted document has the right number of roots, every child id is in the arena, no
//!   container holds more than `max_container_items`, the arena holds at most `max_nodes`
//!   values, and a lower bound of the bytes the decoder must have charged (node slots, item
//!   slots, keyed entries, bytearray bytes) is within `max_alloc_bytes`;
//! - its nesting depth, the values on the longest path from a root (counted here apart from
//!   the library's own check), is within `max_nesting_depth`, and so is the nesting of node
//!   objects in its typed JSON (a shared value is a `ref` leaf there); a `max_nesting_depth`
//!   refusal names `max + 1`, and the same input decoded without the limit is deeper than
//!   `max`;
//! - its typed JSON parses as JSON (serde_json; past serde_json's recursion limit of 128 an
//!   iterative bracket/string check), its bracket depth is bounded by `max_nesting_depth`, and
//!   the repr writer terminates;
//! - a refusal has `offset <= input length`; when it names an opcode byte, that byte is at that
//!   offset; a limit refusal names the configured maximum and a value past it; its message is
//!   bounded (attacker text is truncated);
//! - limits only ever add `limit_exceeded` refusals: if tight limits accept, default limits
//!   accept with the same typed JSON, and if tight limits refuse for another reason, default
//!   limits refuse with the same kind at the same offset;
//! - `strict` accepting means `data` accepts with the same typed JSON;
//! - one pickle accepted means the same bytes as a stream are accepted with one root and the
//!   same value, and a decode into a recycled arena (`Document::recycle`, `Decoder::scratch`)
//!   gives the same value.
//!
//! This file holds the policies, the limits and the `decode` / `structured` body
//! ([`check_input`]); [`invariants`] checks one decode's result, [`canonical_pickle`] the
//! canonical pickle of an accepted document, [`scan_build`] is the `scan_build_agree` target
//! and [`mitogen`] the `mitogen_frames` target.

mod canonical_pickle;
mod invariants;
mod mitogen;
mod scan_build;

use std::sync::OnceLock;

use picklewarden::limits::LimitName;
use picklewarden::policy::BUILTIN_POLICIES;
use picklewarden::{Decoder, Document, ErrorKind, Limits, Policy};

use self::canonical_pickle::check_canonical;
use self::invariants::check_result;
pub use self::invariants::{nesting_depth, KNOWN_OPEN_JSON_SET_CYCLE};
pub use self::mitogen::check_mitogen_frames;
pub use self::scan_build::{
    build_may_refuse_after_scan, check_scan_build_agree, BUILD_ONLY_LIMITS,
};

/// A policy used only by the fuzz harness: record constructors in every form (with and without
/// an argument schema, and with each way of being a key), an extension code mapped to a
/// record, and Python 2 strings as UTF-8 text, so the fuzzer reaches the record, BUILD, items,
/// schema, record-key and EXT paths that the shipped policies refuse early.
pub const FUZZ_POLICY_TOML: &str = r#"
name = "fuzz-records"
description = "fuzz harness only: records in every form"
python2_str = "str"
python2_str_encoding = "utf-8"

[[global]]
module = "fuzz"
name = "Rec"
constructor = "record"

[[global]]
module = "fuzz"
name = "Schema"
constructor = "record"
forms = ["reduce", "newobj", "build"]
min_args = 1
args = [
  { type = "int", min = 0, max = 1000 },
  { type = "str", max_len = 8, nullable = true },
  { type = "dict", keys = "str" },
]

[[global]]
module = "fuzz"
name = "Plain"
constructor = "record"
forms = []

[[global]]
module = "fuzz"
name = "AsArg"
constructor = "record"
key = "first_argument"

[[global]]
module = "fuzz"
name = "OnePer"
constructor = "record"
key = "one_per_first_argument"

[[global]]
module = "fuzz"
name = "NoHash"
constructor = "record"
key = "unhashable"

[[global]]
module = "builtins"
name = "set"
constructor = "set"

[[global]]
module = "_codecs"
name = "encode"
constructor = "latin1_bytes"

[[extension]]
code = 1
module = "fuzz"
name = "Rec"
"#;

/// The shipped policies (in [`BUILTIN_POLICIES`] order), then the fuzz policy.
pub fn policies() -> &'static [Policy] {
    static POLICIES: OnceLock<Vec<Policy>> = OnceLock::new();
    POLICIES.get_or_init(|| {
        let mut v: Vec<Policy> = BUILTIN_POLICIES
            .iter()
            .map(|name| {
                Policy::builtin(name)
                    .unwrap_or_else(|| panic!("built-in policy {name} does not load"))
            })
            .collect();
        let mut fuzz = Policy::from_toml_str(FUZZ_POLICY_TOML)
            .unwrap_or_else(|e| panic!("fuzz policy does not load: {e}"));
        // An extension code mapped to a global the policy does not allow: the TOML loader
        // refuses such a mapping, the Rust API does not, and the decoder must still refuse
        // the global when a pickle uses the code.
        fuzz.extensions
            .insert(2, ("os".to_string(), "system".to_string()));
        v.push(fuzz);
        v
    })
}

/// Small limits that fuzz inputs (a few KiB) actually reach.
pub fn tight_limits(base: &Limits) -> Limits {
    let mut tight = Limits::default();
    for (name, max) in [
        (LimitName::MaxInputBytes, 4096),
        (LimitName::MaxNestingDepth, 12),
        (LimitName::MaxStackLen, 64),
        (LimitName::MaxMemoEntries, 16),
        (LimitName::MaxContainerItems, 32),
        (LimitName::MaxNodes, 256),
        (LimitName::MaxAllocBytes, 16 * 1024),
        (LimitName::MaxLongTextDigits, 40),
        (LimitName::MaxLongBytes, 16),
        (LimitName::MaxOpcodes, 2048),
        (LimitName::MaxKeySteps, 4096),
        (LimitName::MaxKeyStepsPerByte, 8),
        (LimitName::MaxKeyCollisions, 4),
    ] {
        tight.set(name, max);
    }
    let mut out = *base;
    for name in LimitName::ALL {
        out.set(name, base.get(name).min(tight.get(name)));
    }
    out
}

/// The outcome of one decode, reduced to what the cross-checks compare.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Accepted: the typed JSON of each root.
    Ok(Vec<String>),
    /// Refused: kind name, offset.
    Err(&'static str, u64),
}

impl Outcome {
    fn is_limit(&self) -> bool {
        matches!(self, Outcome::Err("limit_exceeded", _))
    }
}

/// Decodes `data` as raw bytes with no out-of-band buffers: the `decode` target.
pub fn check_decode(data: &[u8]) {
    check_input(data, None);
}

/// Serialises a generated program and decodes it: the `structured` target.
pub fn check_program(program: &crate::gen::Program) {
    let bytes = crate::gen::serialise(program);
    let buffers: Option<Vec<&[u8]>> = program
        .buffers
        .as_ref()
        .map(|b| b.iter().map(Vec::as_slice).collect());
    check_input(&bytes, buffers.as_deref());
}

/// Known open bug (tests/regression/EXPECTED.tsv, status `open`): hashing (and comparing) a
/// dict key or set item that is a DAG of tuples, each level holding the level below several
/// times (DUP DUP TUPLE3, 40 times: 128 bytes), walks it as a tree: 3**40 visits. While it is
/// open, the harness skips inputs that have the bytes for it (at least 16 DUP/GET bytes and
/// 14 tuple-building bytes), so fuzzing can look for other bugs. Set to `false` once fixed.
pub const KNOWN_OPEN_TUPLE_DAG_HASH: bool = false;

fn may_be_tuple_dag(data: &[u8]) -> bool {
    let sharing = data
        .iter()
        .filter(|&&b| matches!(b, b'2' | b'h' | b'j' | b'g'))
        .count();
    let tuples = data
        .iter()
        .filter(|&&b| matches!(b, 0x85 | 0x86 | 0x87 | b't' | 0x91))
        .count();
    sharing >= 16 && tuples >= 14
}

/// Decodes `data` under every policy, default and tight limits, single and stream, checking
/// every result and the cross-invariants in the module docs.
pub fn check_input(data: &[u8], buffers: Option<&[&[u8]]>) {
    if KNOWN_OPEN_TUPLE_DAG_HASH && may_be_tuple_dag(data) {
        return;
    }
    let mut by_policy: Vec<[Outcome; 4]> = Vec::new();
    for policy in policies() {
        let default = policy.limits;
        let tight = tight_limits(&default);
        let decode = |limits: Limits, stream: bool| {
            let mut d = Decoder::new(data, policy).limits(limits);
            if let Some(b) = buffers {
                d = d.buffers(b.to_vec());
            }
            if stream {
                d.decode_stream()
            } else {
                d.decode()
            }
        };
        let run = |limits: Limits, stream: bool| -> Outcome {
            let r = decode(limits, stream);
            if let Err(e) = &r {
                if let ErrorKind::LimitExceeded {
                    limit: LimitName::MaxNestingDepth,
                    seen,
                    max,
                } = e.kind()
                {
                    // The refusal is right: without the limit the document is deeper.
                    assert_eq!(*seen, max.saturating_add(1), "depth refusal at {seen}");
                    let mut unlimited = limits;
                    unlimited.max_nesting_depth = u64::MAX;
                    if let Ok(doc) = decode(unlimited, stream) {
                        let depth = nesting_depth(&doc);
                        assert!(
                            depth > *max,
                            "{}: refused as deeper than {max} but {depth} deep: {data:?}",
                            policy.name
                        );
                    }
                }
            }
            check_result(data, &limits, stream, &r)
        };
        let outcomes = [
            run(default, false),
            run(tight, false),
            run(default, true),
            run(tight, true),
        ];
        let [d1, t1, ds, ts] = &outcomes;
        tight_implies_default(data, &policy.name, t1, d1);
        tight_implies_default(data, &policy.name, ts, ds);
        if let Outcome::Ok(single) = d1 {
            assert_eq!(
                ds,
                &Outcome::Ok(single.clone()),
                "{}: accepted as one pickle but not as a stream of one: {data:?}",
                policy.name
            );
            // A decode into the arena a decode of the same bytes left (Scratch) gives the
            // same document.
            let decoder = || {
                let d = Decoder::new(data, policy);
                match buffers {
                    Some(b) => d.buffers(b.to_vec()),
                    None => d,
                }
            };
            let scratch = decoder()
                .decode()
                .map(Document::recycle)
                .unwrap_or_default();
            let again = check_result(data, &default, false, &decoder().scratch(scratch).decode());
            assert_eq!(
                &again, d1,
                "{}: a decode into a recycled arena differs: {data:?}",
                policy.name
            );
            if let Ok(doc) = decoder().decode() {
                check_canonical(data, policy, &doc, false);
            }
            let streamed = match buffers {
                Some(b) => Decoder::new(data, policy).buffers(b.to_vec()),
                None => Decoder::new(data, policy),
            };
            if let Ok(doc) = streamed.decode_stream() {
                check_canonical(data, policy, &doc, true);
            }
        }
        by_policy.push(outcomes);
    }
    // strict accepting implies data accepting the same value.
    let names: Vec<&str> = policies().iter().map(|p| p.name.as_str()).collect();
    let strict = names.iter().position(|&n| n == "strict");
    let data_p = names.iter().position(|&n| n == "data");
    if let (Some(s), Some(d)) = (strict, data_p) {
        if let (Some(so), Some(dp)) = (by_policy.get(s), by_policy.get(d)) {
            for (a, b) in so.iter().zip(dp.iter()) {
                if let Outcome::Ok(v) = a {
                    assert_eq!(
                        b,
                        &Outcome::Ok(v.clone()),
                        "strict accepts but data does not: {data:?}"
                    );
                }
            }
        }
    }
}

fn tight_implies_default(data: &[u8], policy: &str, tight: &Outcome, default: &Outcome) {
    if tight.is_limit() {
        return;
    }
    assert_eq!(
        tight, default,
        "policy {policy}: tight limits gave {tight:?}, default limits {default:?}, so a limit \
         changed more than the limit refusal: {data:?}"
    );
}
