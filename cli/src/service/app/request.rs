//! One request's way from its body to its [`Outcome`]: buffer budget, the body within its
//! timeout, admission, a decode slot, the decode on a blocking thread, then output budget for
//! the response text.

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, StatusCode};
use http_body_util::BodyExt;
use picklewarden::Policy;
use serde_json::{json, Value as Json};

use super::evaluate::evaluate;
use super::{AppState, Endpoint, Outcome};

/// Body, admission, decode slot, decode.
///
/// 1. Buffer budget for the whole body (declared length, or the bound when chunked), then the
///    body within `body_timeout`: a slow upload holds budget until that timeout, never an
///    admission place or a decode slot. (The budget is taken for the whole body before it is
///    read, so that a body never waits for budget half-read: bodies holding part of the
///    budget and each waiting for more would all wait until their body timeout.)
/// 2. Admission, once the body is in: at most `concurrency + queue` requests between here and
///    the end of their decode; beyond them, 503 at once.
/// 3. A decode slot (waiting for one counts as queued).
/// 4. The decode on a blocking thread, which keeps the admission and the buffer budget until
///    it ends, even when the deadline has answered the client already; the decode itself
///    stops within milliseconds of the deadline ([`picklewarden::Decoder::deadline`]).
/// 5. Output budget for the response text, taken while still holding the slot, and handed to
///    the response body.
pub(super) async fn run(
    st: Arc<AppState>,
    policy: Arc<Policy>,
    stream: bool,
    endpoint: Endpoint,
    headers: HeaderMap,
    body: Body,
    deadline: Instant,
) -> Outcome {
    let name = policy.name.clone();
    let (bound, limit) = if st.cfg.max_body < policy.limits.max_input_bytes {
        (st.cfg.max_body, "max_body")
    } else {
        (policy.limits.max_input_bytes, "max_input_bytes")
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > bound) {
        return too_large(&name, bound, limit);
    }
    // Buffer budget for the whole body (waiting for it is bounded by the deadline, not by the
    // body timeout: a wait caused by other requests is not the client's delay).
    let want = declared.unwrap_or(bound).min(bound);
    let Ok(budget) = Arc::clone(&st.buffer)
        .acquire_many_owned(u32::try_from(want).unwrap_or(u32::MAX))
        .await
    else {
        return internal(&name, "buffer budget closed");
    };
    let bytes =
        match tokio::time::timeout(st.cfg.body_timeout, read_body(body, bound, &name, limit)).await
        {
            Ok(Ok(b)) => b,
            Ok(Err(o)) => return o,
            Err(_) => {
                return Outcome::http_error(
                    StatusCode::REQUEST_TIMEOUT,
                    "body_timeout",
                    &name,
                    format!(
                        "the body did not arrive within {:?} (--body-timeout)",
                        st.cfg.body_timeout
                    ),
                )
            }
        };
    let Ok(admitted) = Arc::clone(&st.admission).try_acquire_owned() else {
        return Outcome::http_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            &name,
            format!(
                "all {} places are taken by requests being decoded or waiting ({} slots, queue \
                 of {}); try again later",
                st.cfg.concurrency + st.cfg.queue,
                st.cfg.concurrency,
                st.cfg.queue
            ),
        );
    };
    let slot = {
        let _queued = Queued::new(&st);
        match Arc::clone(&st.slots).acquire_owned().await {
            Ok(s) => s,
            Err(_) => return internal(&name, "decode slots closed"),
        }
    };
    let max_output = st.cfg.max_output;
    let in_flight = st.metrics.in_flight.clone();
    let job = tokio::task::spawn_blocking(move || {
        in_flight.inc();
        let out = evaluate(&bytes, &policy, stream, endpoint, max_output, deadline);
        in_flight.dec();
        drop((budget, admitted));
        (out, slot)
    })
    .await;
    let (mut out, slot) = match job {
        Ok(x) => x,
        Err(e) => return internal(&name, &format!("the decode task failed: {e}")),
    };
    // Output budget for the response text, held until it has been sent: a client that does
    // not read its responses holds budget, not unbounded memory. The decode slot is kept
    // while waiting for it, so at most `concurrency` rendered outputs wait unbudgeted.
    // Small answers (every /v1/check, and decodes of little text) take none, so that clients
    // holding the budget with large responses they read slowly never hold up a check.
    let text_len = out.document.as_ref().map_or(0, String::len)
        + out
            .body
            .get("repr")
            .and_then(Json::as_str)
            .map_or(0, json_string_len)
        + out
            .body
            .get("pickle")
            .and_then(Json::as_str)
            .map_or(0, str::len);
    if text_len > UNBUDGETED_TEXT {
        let need = u32::try_from(text_len.saturating_add(OUTPUT_OVERHEAD)).unwrap_or(u32::MAX);
        match Arc::clone(&st.output).acquire_many_owned(need).await {
            Ok(p) => out.hold = Some(p),
            Err(_) => return internal(&name, "output budget closed"),
        }
    }
    drop(slot);
    out
}

/// Bytes of output budget charged for a response beyond its document or repr text (the
/// verdict's own fields; its list of globals holds at most one more than the policy's rules).
const OUTPUT_OVERHEAD: usize = 4096;

/// Document or repr text up to this many bytes takes no output budget: such a response is at
/// most this plus [`OUTPUT_OVERHEAD`] in memory, one per connection (`--max-connections`).
const UNBUDGETED_TEXT: usize = 64 * 1024;

fn internal(policy: &str, message: &str) -> Outcome {
    Outcome::http_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal_error",
        policy,
        message.to_owned(),
    )
}

/// Counts a request in `queued_requests` while it waits for a decode slot.
struct Queued<'a>(&'a AppState);

impl<'a> Queued<'a> {
    fn new(st: &'a AppState) -> Queued<'a> {
        st.metrics.queued.inc();
        Queued(st)
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.metrics.queued.dec();
    }
}

/// Reads the body, up to `bound` bytes (its buffer budget was taken by the caller).
async fn read_body(
    mut body: Body,
    bound: u64,
    name: &str,
    limit: &'static str,
) -> Result<Bytes, Outcome> {
    let mut parts: Vec<Bytes> = Vec::new();
    let mut total = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            Outcome::http_error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                name,
                format!("cannot read the request body: {e}"),
            )
        })?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        total = total.saturating_add(u64::try_from(data.len()).unwrap_or(u64::MAX));
        if total > bound {
            return Err(too_large(name, bound, limit));
        }
        parts.push(data);
    }
    let bytes = if parts.len() == 1 {
        parts.pop().unwrap_or_default()
    } else {
        // Every byte counted here has arrived: the buffer is sized by received data only.
        let mut all = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
        for p in &parts {
            all.extend_from_slice(p);
        }
        Bytes::from(all)
    };
    Ok(bytes)
}

fn too_large(policy: &str, bound: u64, limit: &'static str) -> Outcome {
    let what = if limit == "max_body" {
        "--max-body".to_owned()
    } else {
        format!("max_input_bytes of policy {policy:?}")
    };
    let mut o = Outcome::http_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        policy,
        format!("the body is over {bound} bytes ({what})"),
    );
    o.body.insert("limit".to_owned(), json!(limit));
    o.body.insert("max_bytes".to_owned(), json!(bound));
    o
}

/// The bytes `s` takes inside a JSON string as the response writes it: each `"` and `\`
/// one more, each control character five more (`\u00XX`; an upper bound for `\n`, `\r` and
/// `\t`). The repr text is charged at this size, not its own: a repr that shows escaped bytes
/// is mostly backslashes, and would otherwise take half the budget it needs.
fn json_string_len(s: &str) -> usize {
    s.bytes().fold(s.len(), |n, b| match b {
        b'"' | b'\\' => n.saturating_add(1),
        0..=0x1f => n.saturating_add(5),
        _ => n,
    })
}

#[cfg(test)]
mod tests {
    use super::json_string_len;

    /// The charge is what serde_json writes (less the quotes), or more only for `\n`, `\r`,
    /// `\t`, `\u{8}` and `\u{c}`, which it writes in two bytes.
    #[test]
    fn repr_charge_covers_its_json_escaping() {
        for s in [
            "",
            "plain",
            r"b'\x00\x01\\'",
            "\"quoted\" \\ back",
            "\u{1}\u{1f}\u{7f}é\u{10ffff}",
            "\n\r\t\u{8}\u{c}",
        ] {
            let written = serde_json::to_string(s).unwrap().len() - 2;
            let short = s.bytes().filter(|b| b"\n\r\t\x08\x0c".contains(b)).count();
            assert_eq!(json_string_len(s), written + 4 * short, "{s:?}");
        }
        // A repr of escaped bytes is charged about twice its length.
        let r = r"b'\x01\x01\x01'";
        assert_eq!(json_string_len(r), r.len() + 3);
    }
}
