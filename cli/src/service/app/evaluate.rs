//! The decode of one request's body (on a blocking thread): the verdict JSON and, for
//! `/v1/decode`, the value as typed JSON, repr or canonical pickle within `max_output`.

use std::fmt::Write as _;
use std::time::Instant;

use axum::http::StatusCode;
use base64::Engine as _;
use picklewarden::canonical::Unwritable;
use picklewarden::OutputBound;
use picklewarden::{ErrorKind, Policy};
use serde_json::{json, Value as Json};
use sha2::{Digest, Sha256};

use super::{object, Endpoint, Format, Outcome};

/// The decode itself (on a blocking thread): the verdict JSON, and the value when asked for
/// (unless its text would pass `max_output` bytes: then `output_error` says so and the verdict
/// stands).
pub(super) fn evaluate(
    input: &[u8],
    policy: &Policy,
    stream: bool,
    endpoint: Endpoint,
    max_output: usize,
    deadline: Instant,
) -> Outcome {
    let t = Instant::now();
    let sha = hex_sha256(input);
    // The request's deadline stops the decode too: answered 503 by then, it must not keep its
    // thread, its slot and its memory for as long as the limits allow (A48).
    let (result, report) = picklewarden::Decoder::new(input, policy)
        .deadline(deadline)
        .decode_and_report(if stream {
            picklewarden::Pickles::Stream
        } else {
            picklewarden::Pickles::One
        });
    let globals: Vec<Json> = report
        .globals
        .iter()
        .map(|g| json!({"module": g.module, "name": g.name, "allowed": g.allowed}))
        .collect();
    let mut body = object(json!({
        "verdict": if result.is_ok() { "accepted" } else { "refused" },
        "policy": policy.name,
        "sha256": sha,
        "size": input.len(),
        "protocol": report.protocol,
        "pickles": report.pickles,
        "globals": globals,
    }));
    let mut document = None;
    let error = match result {
        Ok(doc) => {
            // The value's text, unless it would pass `max_output`.
            let out_bound = OutputBound::bytes(max_output).deadline(Some(deadline));
            let text = match endpoint {
                Endpoint::Check => None,
                // Rendering stops at the deadline too (the client has had its 503 by then;
                // ordering sets can cost a sort key per item before `max_output` applies).
                Endpoint::Decode(Format::Json) => Some((
                    "document",
                    picklewarden::json::to_typed_json_bounded(&doc, out_bound),
                )),
                Endpoint::Decode(Format::Repr) => {
                    Some(("repr", picklewarden::repr::to_repr_bounded(&doc, out_bound)))
                }
                // Base64 is 4 bytes of text per 3 of pickle: the pickle may take 3/4 of the
                // output bound.
                Endpoint::Decode(Format::Pickle(protocol)) => {
                    let bound = max_output / 4 * 3;
                    let written = picklewarden::canonical::to_pickle_bounded(
                        &doc,
                        protocol,
                        OutputBound::bytes(bound).deadline(Some(deadline)),
                    );
                    match written {
                        Ok(p) => Some((
                            "pickle",
                            Some(base64::engine::general_purpose::STANDARD.encode(p)),
                        )),
                        Err(Unwritable::TooLarge(_) | Unwritable::Deadline) => {
                            Some(("pickle", None))
                        }
                        // Record, Stream, Protocol, and any reason a later version adds
                        // (Unwritable is non_exhaustive): no pickle, with the reason.
                        Err(e) => {
                            body.insert("output_error".to_owned(), json!("no_canonical_pickle"));
                            body.insert("output_reason".to_owned(), json!(e.to_string()));
                            None
                        }
                    }
                }
            };
            match text {
                // The typed JSON is spliced in as raw text by `finish`.
                Some(("document", Some(t))) => document = Some(t),
                Some((member, Some(t))) => {
                    body.insert(member.to_owned(), json!(t));
                }
                Some((_, None)) => {
                    body.insert("output_error".to_owned(), json!("output_too_large"));
                    body.insert("max_output_bytes".to_owned(), json!(max_output));
                }
                None => {}
            }
            None
        }
        Err(e) => {
            body.insert("kind".to_owned(), json!(e.kind().name()));
            body.insert("category".to_owned(), json!(e.category().name()));
            body.insert("offset".to_owned(), json!(e.offset()));
            body.insert("opcode".to_owned(), json!(e.opcode_name()));
            body.insert("reason".to_owned(), json!(e.to_string()));
            if let ErrorKind::LimitExceeded { limit, .. } = e.kind() {
                body.insert("limit".to_owned(), json!(limit.name()));
            }
            Some(e)
        }
    };
    body.insert(
        "decode_us".to_owned(),
        json!(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX)),
    );
    Outcome {
        status: StatusCode::OK,
        verdict: if error.is_none() {
            "accepted"
        } else {
            "refused"
        },
        policy: policy.name.clone(),
        body,
        document,
        size: Some(input.len()),
        sha256: Some(sha),
        error,
        message: None,
        hold: None,
    }
}

fn hex_sha256(input: &[u8]) -> String {
    let digest = Sha256::digest(input);
    let mut s = String::with_capacity(64);
    for b in digest.iter() {
        let _ = write!(s, "{b:02x}");
    }
    s
}
