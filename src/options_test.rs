//! Unit tests of the options and of the entry points that take them.

use std::time::{Duration, Instant};

use super::*;

/// pickle.dumps([1, "a"], protocol=2)
const LIST: &[u8] = b"\x80\x02]q\x00(K\x01X\x01\x00\x00\x00aq\x01e.";

/// NONE POP 100,000 times, then NONE STOP: past the 65,536 opcodes after which a decode or a
/// scan first looks at the clock.
fn long_pickle() -> Vec<u8> {
    let mut p = b"\x80\x04".to_vec();
    for _ in 0..100_000 {
        p.extend_from_slice(b"N0");
    }
    p.extend_from_slice(b"N.");
    p
}

/// Every builder that takes a deadline takes an `Instant`, `Some(instant)` and `None`.
#[test]
fn every_deadline_takes_an_instant_or_an_option() {
    let policy = Policy::data();
    let p = long_pickle();
    let past = Instant::now();
    let later = past + Duration::from_secs(3600);
    let kind = |e: Option<crate::Error>| e.map(|e| e.kind().name());
    let expired = Some("deadline_exceeded");

    assert_eq!(
        kind(Decoder::new(&p, &policy).deadline(past).decode().err()),
        expired
    );
    assert_eq!(
        kind(
            Decoder::new(&p, &policy)
                .deadline(Some(past))
                .decode()
                .err()
        ),
        expired
    );
    assert!(Decoder::new(&p, &policy).deadline(None).decode().is_ok());
    assert!(Decoder::new(&p, &policy).deadline(later).decode().is_ok());

    assert_eq!(
        kind(Scanner::new(&p, &policy).deadline(past).run().result.err()),
        expired
    );
    assert!(Scanner::new(&p, &policy)
        .deadline(None)
        .run()
        .result
        .is_ok());
    let options = DecodeOptions::new().deadline(past);
    assert_eq!(kind(scan_with(&p, &policy, &options).result.err()), expired);
    assert_eq!(kind(decode_with(&p, &policy, &options).err()), expired);

    assert_eq!(DecodeOptions::new().deadline(later).deadline, Some(later));
    assert_eq!(
        DecodeOptions::new()
            .deadline(Some(later))
            .deadline(None)
            .deadline,
        None
    );
    assert_eq!(OutputBound::bytes(9).deadline(later).deadline, Some(later));
    assert_eq!(OutputBound::bytes(9).deadline(None), OutputBound::bytes(9));
}

/// `scan(input, policy)` is `scan_with` with the default options, and `Scanner::options`
/// applies each option.
#[test]
fn scan_takes_two_arguments_and_the_options() {
    let policy = Policy::data();
    let two = crate::scan(LIST, &policy);
    let with = scan_with(LIST, &policy, &DecodeOptions::default());
    assert!(two.result.is_ok() && with.result.is_ok());
    assert_eq!((two.protocol, two.pickles), (with.protocol, with.pickles));
    assert_eq!(two.opcode_counts, with.opcode_counts);

    // Two pickles one after another: one pickle with trailing bytes is refused, a stream
    // reads both.
    let twice = [LIST, LIST].concat();
    let one = crate::scan(&twice, &policy);
    assert_eq!(one.result.unwrap_err().kind().name(), "trailing_data");
    let stream = scan_with(&twice, &policy, &DecodeOptions::new().stream());
    assert!(stream.result.is_ok());
    assert_eq!(stream.pickles, 2);
    let stream = Scanner::new(&twice, &policy).pickles(Pickles::Stream).run();
    assert_eq!(stream.pickles, 2);

    // Limits through the options: a list in a list past a depth of 1.
    let mut limits = policy.limits;
    limits.max_nesting_depth = 1;
    let nested = b"\x80\x02]q\x00]q\x01a.";
    let d = decode_with(nested, &policy, &DecodeOptions::new().limits(limits));
    assert_eq!(d.unwrap_err().kind().name(), "limit_exceeded");
    // Trailing bytes allowed through the options.
    let trailing = Scanner::new(&twice, &policy)
        .options(&DecodeOptions::new().allow_trailing(true))
        .run();
    assert!(trailing.result.is_ok());
    assert_eq!(trailing.trailing.map(|t| t.len), Some(LIST.len() as u64));
}

/// `decode_and_report` decodes and reports the scan, for one pickle and a stream.
#[test]
fn decode_and_report_follows_the_pickles_chosen() {
    let policy = Policy::data();
    let twice = [LIST, LIST].concat();
    let (doc, report) = Decoder::new(&twice, &policy).decode_and_report(Pickles::Stream);
    assert_eq!(doc.unwrap().roots().len(), 2);
    assert_eq!(report.pickles, 2);
    let (doc, report) = Decoder::new(&twice, &policy).decode_and_report(Pickles::One);
    assert_eq!(doc.unwrap_err().kind().name(), "trailing_data");
    assert_eq!(report.result.unwrap_err().kind().name(), "trailing_data");
}
