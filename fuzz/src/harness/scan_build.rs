//! The `scan_build_agree` target: the scan, the build and the one-pass decode agree, and the
//! build refuses after the scan accepted only on grounds the scan cannot see.

use picklewarden::limits::LimitName;
use picklewarden::{Decoder, ErrorKind};

use super::invariants::check_error;
use super::{may_be_tuple_dag, policies, tight_limits, KNOWN_OPEN_TUPLE_DAG_HASH};

/// The limits only the build pass can see (it needs the values); every other limit is the
/// scan's to enforce.
pub const BUILD_ONLY_LIMITS: [LimitName; 8] = [
    LimitName::MaxNestingDepth,
    LimitName::MaxContainerItems,
    LimitName::MaxNodes,
    LimitName::MaxAllocBytes,
    LimitName::MaxKeySteps,
    LimitName::MaxKeyStepsPerByte,
    LimitName::MaxCopyBytesPerByte,
    LimitName::MaxKeyCollisions,
];

/// Whether the build pass may refuse with `kind` after the scan accepted: the limits above,
/// and what `src/scan/` documents it cannot check (a constructor's argument contents, what a
/// policy rule's check compares with its writer's form, and the hashability of keys). A memo, stack, MARK, frame, type or policy refusal from the build
/// after the scan accepted means the two passes disagree.
pub fn build_may_refuse_after_scan(kind: &ErrorKind) -> bool {
    match kind {
        ErrorKind::LimitExceeded { limit, .. } => BUILD_ONLY_LIMITS.contains(limit),
        ErrorKind::ConstructorRejected(_)
        | ErrorKind::NonCanonical(_)
        | ErrorKind::UnhashableKey => true,
        _ => false,
    }
}

/// The `scan_build_agree` target: under every policy, default and tight limits, one pickle and
/// a stream, (a) a scan refusal is exactly the decoder's refusal (the decoder runs in one pass
/// and reports the scan's refusal when there is one), (b) whenever the scan accepts, the build
/// refuses only on grounds the scan cannot see, and (c) the one-pass decode gives what the
/// scan followed by the build gives ([`Decoder::decode_and_report`]), and what the machine's
/// careful path alone gives ([`Decoder::careful_only`], every opcode one at a time): the same
/// typed JSON, or the same refusal at the same offset.
pub fn check_scan_build_agree(data: &[u8]) {
    if KNOWN_OPEN_TUPLE_DAG_HASH && may_be_tuple_dag(data) {
        return;
    }
    for policy in policies() {
        let default = policy.limits;
        for limits in [default, tight_limits(&default)] {
            for stream in [false, true] {
                let pickles = if stream {
                    picklewarden::Pickles::Stream
                } else {
                    picklewarden::Pickles::One
                };
                let report = picklewarden::scan_with(
                    data,
                    policy,
                    &picklewarden::DecodeOptions::default()
                        .limits(limits)
                        .pickles(pickles),
                );
                let d = Decoder::new(data, policy).limits(limits);
                let built = if stream {
                    d.decode_stream()
                } else {
                    d.decode()
                };
                let (two_pass, _) = Decoder::new(data, policy)
                    .limits(limits)
                    .careful_only()
                    .decode_and_report(pickles);
                match (&built, &two_pass) {
                    (Ok(one), Ok(two)) => assert_eq!(
                        picklewarden::json::to_typed_json(one),
                        picklewarden::json::to_typed_json(two),
                        "policy {} stream {stream}: one pass and two passes decode differently",
                        policy.name
                    ),
                    (Err(one), Err(two)) => assert_eq!(
                        (one.kind(), one.offset()),
                        (two.kind(), two.offset()),
                        "policy {} stream {stream}: one pass refused with {one}, two with {two}",
                        policy.name
                    ),
                    (one, two) => panic!(
                        "policy {} stream {stream}: one pass {:?}, two passes {:?}: {data:?}",
                        policy.name,
                        one.as_ref().err(),
                        two.as_ref().err()
                    ),
                }
                match (&report.result, &built) {
                    (Err(s), Err(b)) => {
                        check_error(data, &limits, s);
                        assert_eq!(
                            (s.kind(), s.offset()),
                            (b.kind(), b.offset()),
                            "policy {} stream {stream}: scan refused with {s} but decode with {b}",
                            policy.name
                        );
                    }
                    (Err(s), Ok(_)) => panic!(
                        "policy {} stream {stream}: scan refused ({s}) but decode accepted",
                        policy.name
                    ),
                    (Ok(()), Err(b)) => {
                        check_error(data, &limits, b);
                        assert!(
                            build_may_refuse_after_scan(b.kind()),
                            "policy {} stream {stream}: scan accepted but build refused with {b} \
                             (kind {}): {data:?}",
                            policy.name,
                            b.kind().name()
                        );
                    }
                    (Ok(()), Ok(doc)) => {
                        let n = if stream { doc.roots().len() } else { 1 };
                        assert_eq!(
                            report.pickles, n,
                            "policy {}: scan counted {} pickles, build {n}",
                            policy.name, report.pickles
                        );
                    }
                }
            }
        }
    }
}
