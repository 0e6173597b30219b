//! The canonical pickle of an accepted document, at protocols 5 and 2: it decodes under the
//! same policy to the same typed JSON and is its own canonical form.

use picklewarden::limits::LimitName;
use picklewarden::{canonical, json, Decoder, Document, ErrorKind, Policy};
use picklewarden::{OutputBound, Value};

use super::invariants::{has_set_and_record, KNOWN_OPEN_JSON_SET_CYCLE};

/// The canonical pickle of an accepted document (src/output/canonical/), at protocols 5 and 2,
/// decodes under the same policy to the same typed JSON and is its own canonical form. Allowed
/// to differ: a global written under another name than it was read (a global read at
/// protocol 0-2 that has another Python 3 name, and at protocol 2 one with another Python 2
/// name), which the policy may not allow, a complex (written with `builtins.complex`, which the
/// policy may not list beside `__builtin__.complex`), and the memo and input limits (sharing
/// made with DUP takes a memo entry in the canonical form, and the form may be a few bytes a
/// value longer; and a shorter form allows fewer key steps per byte). At protocol 2 also the globals and limits of the calls that make bytes,
/// bytearrays, sets and frozensets there (`_codecs.encode`, `__builtin__.set`: a node each
/// more), and what protocol 2 cannot name.
pub(super) fn check_canonical(data: &[u8], policy: &Policy, doc: &Document<'_>, stream: bool) {
    if KNOWN_OPEN_JSON_SET_CYCLE && has_set_and_record(doc) {
        return;
    }
    for protocol in [canonical::Protocol::V5, canonical::Protocol::V2] {
        check_canonical_at(data, policy, doc, stream, protocol);
    }
}

fn check_canonical_at(
    data: &[u8],
    policy: &Policy,
    doc: &Document<'_>,
    stream: bool,
    protocol: canonical::Protocol,
) {
    let v2 = protocol == canonical::Protocol::V2;
    let renamed = doc.nodes().any(|v| {
        matches!(v, Value::Global(g) if {
            let to = g.python3_name();
            let to = if v2 { canonical::python2_name(to.0, to.1) } else { to };
            to != (&*g.module, &*g.name)
        })
    });
    let needs_call = |v: Option<Value<'_>>| {
        matches!(
            v,
            Some(Value::Bytes(_) | Value::ByteArray(_) | Value::Set(_) | Value::FrozenSet(_))
        )
    };
    // Every value, the shared ones (`b''` is one, not an arena node) as their containers'
    // children and as roots.
    let called = v2
        && (doc.nodes().any(|v| {
            let mut hit = needs_call(Some(v));
            v.for_each_child(|c| hit |= needs_call(doc.get(c)));
            hit
        }) || doc.roots().iter().any(|&r| needs_call(doc.get(r))));
    let out = match canonical::to_pickle_bounded(doc, protocol, OutputBound::NONE) {
        Ok(out) => out,
        Err(canonical::Unwritable::Stream) => {
            assert!(
                doc.roots().len() > 1 && doc.changed_earlier(),
                "refused as a changed stream: {data:?}"
            );
            return;
        }
        Err(canonical::Unwritable::Record) => {
            let record = doc.nodes().any(|v| matches!(v, Value::Object(_)));
            assert!(record, "refused as holding a record, with none: {data:?}");
            return;
        }
        Err(canonical::Unwritable::Protocol { protocol: 2, .. }) if v2 => return,
        Err(e) => panic!(
            "{}: canonical pickle without bounds: {e}: {data:?}",
            policy.name
        ),
    };
    let d = Decoder::new(&out, policy);
    let r = if stream {
        d.decode_stream()
    } else {
        d.decode()
    };
    match r {
        Ok(again) => {
            if !renamed {
                assert_eq!(
                    json::to_typed_json(&again),
                    json::to_typed_json(doc),
                    "{}: canonical pickle {out:?} decodes to other typed JSON: {data:?}",
                    policy.name
                );
            }
            assert_eq!(
                canonical::to_pickle_bounded(&again, protocol, OutputBound::NONE).as_ref(),
                Ok(&out),
                "{}: canonical pickle is not a fixed point: {data:?}",
                policy.name
            );
        }
        Err(e) => {
            let allowed = match e.kind() {
                ErrorKind::GlobalNotAllowed { .. } => {
                    renamed || called || doc.nodes().any(|v| matches!(v, Value::Complex(..)))
                }
                ErrorKind::LimitExceeded { limit, .. } => {
                    called
                        || matches!(
                            limit,
                            LimitName::MaxMemoEntries
                                | LimitName::MaxInputBytes
                                | LimitName::MaxKeyStepsPerByte
                        )
                }
                _ => false,
            };
            assert!(
                allowed,
                "{}: canonical pickle ({protocol:?}) {out:?} refused: {e}: {data:?}",
                policy.name
            );
        }
    }
}
