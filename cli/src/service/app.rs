//! The HTTP API (axum routes) and what each request does.
//!
//! - `POST /v1/check?policy=NAME[&stream=true]`: body = pickle bytes. 200 with the verdict JSON
//!   whether the input is accepted or refused (the check itself worked); 4xx for a malformed
//!   request, 413 for a body over the bound, 503 when busy or past the deadline.
//! - `POST /v1/decode?policy=NAME&format=json|repr|pickle[&stream=true]`: as check, and when
//!   accepted the value: `"document"` holds the typed JSON document (docs/typed-json.md),
//!   `"repr"` the Python-like repr, or `"pickle"` the canonical pickle
//!   ([`picklewarden::canonical`]) as base64 text (RFC 4648, with padding).
//! - `GET /v1/policies`, `GET /healthz`, `GET /metrics`.
//!
//! Memory and time of a request (see `run`): buffer budget for its whole body (`max_buffered`
//! bytes across requests), the body within `body_timeout`, admission (at most `concurrency +
//! queue` requests with their body waiting for or holding a decode slot, 503 beyond), a decode
//! slot (`concurrency`), the decode, then
//! output budget for its response text (`max_pending_output` bytes across responses), held
//! until hyper has taken the last frame of the response. The deadline covers everything up to
//! the response; writing it is bounded by the connection's `send_timeout` (a write without
//! progress) and by `send_timeout` + its length / `min_send_rate` in all (see [`Held`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use base64::Engine as _;
use http_body_util::BodyExt;
use picklewarden::canonical::{Protocol, Unwritable};
use picklewarden::OutputBound;
use picklewarden::{Error, ErrorKind, Policy};
use serde::Deserialize;
use serde_json::{json, Map, Value as Json};
use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::metrics::{EndpointLabels, Metrics, RequestLabels};

/// Who is on the other end of a connection, for the audit log.
#[derive(Clone, Debug)]
pub(crate) enum Peer {
    /// A Unix-socket peer, from `SO_PEERCRED` (unix(7)): the credentials at `connect` time.
    Unix {
        /// Process id (absent when the peer is in another pid namespace).
        pid: Option<i32>,
        /// Effective user id.
        uid: u32,
        /// Effective group id.
        gid: u32,
    },
    /// A TCP peer address.
    Tcp(std::net::SocketAddr),
}

/// Configuration of the request path, fixed at start-up.
pub(crate) struct Config {
    /// Policies by the name requests use.
    pub(crate) policies: BTreeMap<String, Arc<Policy>>,
    /// Where each policy came from (`built-in` or its file name), for `GET /v1/policies`.
    pub(crate) sources: BTreeMap<String, String>,
    /// The policy of a request that names none.
    pub(crate) default_policy: String,
    /// Upper bound on any body, below each policy's `max_input_bytes`.
    pub(crate) max_body: u64,
    /// Upper bound on the typed JSON or repr text of `/v1/decode`.
    pub(crate) max_output: usize,
    /// Response text held in memory at once, rendered and not yet sent (at least
    /// `max_output` plus the overhead of one response).
    pub(crate) max_pending_output: usize,
    /// Requests decoded at once.
    pub(crate) concurrency: usize,
    /// Requests that may wait for a slot.
    pub(crate) queue: usize,
    /// Per-request deadline.
    pub(crate) deadline: Duration,
    /// Time allowed for a request's body to arrive.
    pub(crate) body_timeout: Duration,
    /// Time a response write may make no progress, and the base of a response's send time.
    pub(crate) send_timeout: Duration,
    /// Bytes per second a response must be taken at, beyond `send_timeout` (at least 1).
    pub(crate) min_send_rate: u64,
    /// Body bytes held in memory at once, across requests (at least the largest body bound).
    pub(crate) max_buffered: usize,
    /// Serve `GET /v1/debug/sandbox-probe` (tests only).
    pub(crate) sandbox_probe: bool,
    /// Whether the sandbox is applied (reported by /healthz).
    pub(crate) sandboxed: bool,
}

/// Shared state of every handler.
pub(crate) struct AppState {
    pub(crate) cfg: Config,
    pub(crate) metrics: Metrics,
    /// `concurrency + queue` permits: requests between admission and the end of their decode.
    admission: Arc<Semaphore>,
    /// `max_buffered` permits, one per body byte held in memory.
    buffer: Arc<Semaphore>,
    /// `concurrency` permits: decodes running.
    slots: Arc<Semaphore>,
    /// `max_pending_output` permits, one per byte of response text not yet sent.
    output: Arc<Semaphore>,
    started: Instant,
}

impl AppState {
    /// The state for `cfg`, with every metric at zero.
    pub(crate) fn new(cfg: Config) -> AppState {
        AppState {
            admission: Arc::new(Semaphore::new(cfg.concurrency.saturating_add(cfg.queue))),
            buffer: Arc::new(Semaphore::new(cfg.max_buffered.min(Semaphore::MAX_PERMITS))),
            slots: Arc::new(Semaphore::new(cfg.concurrency)),
            output: Arc::new(Semaphore::new(
                cfg.max_pending_output.min(Semaphore::MAX_PERMITS),
            )),
            metrics: Metrics::new(),
            started: Instant::now(),
            cfg,
        }
    }
}

/// The router of every endpoint.
pub(crate) fn router(state: Arc<AppState>) -> Router {
    let mut r = Router::new()
        .route("/v1/check", post(endpoint::<true>))
        .route("/v1/decode", post(endpoint::<false>))
        .route("/v1/policies", get(policies))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics));
    if state.cfg.sandbox_probe {
        r = r.route("/v1/debug/sandbox-probe", get(sandbox_probe));
    }
    r.fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

#[derive(Debug, Deserialize)]
struct Params {
    policy: Option<String>,
    format: Option<String>,
    /// The canonical pickle's protocol (`format=pickle` only): 5 (default) or 2.
    protocol: Option<u8>,
    #[serde(default)]
    stream: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Check,
    Decode(Format),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Repr,
    Pickle(Protocol),
}

impl Endpoint {
    fn name(self) -> &'static str {
        match self {
            Endpoint::Check => "check",
            Endpoint::Decode(_) => "decode",
        }
    }
}

/// What a request came to, for the response, the metrics and the audit event.
struct Outcome {
    status: StatusCode,
    verdict: &'static str,
    policy: String,
    body: Map<String, Json>,
    /// Extra raw JSON member appended to `body` (the typed JSON document, already text).
    document: Option<String>,
    size: Option<usize>,
    sha256: Option<String>,
    error: Option<Error>,
    message: Option<String>,
    /// Output budget held by the response until its body has been sent (or the connection
    /// is gone).
    hold: Option<OwnedSemaphorePermit>,
}

impl Outcome {
    fn http_error(
        status: StatusCode,
        verdict: &'static str,
        policy: &str,
        message: String,
    ) -> Outcome {
        Outcome {
            status,
            verdict,
            policy: policy.to_owned(),
            body: object(json!({"error": verdict, "message": message})),
            document: None,
            size: None,
            sha256: None,
            error: None,
            message: Some(message),
            hold: None,
        }
    }
}

/// `POST /v1/check` (`CHECK`) and `POST /v1/decode`.
async fn endpoint<const CHECK: bool>(
    State(st): State<Arc<AppState>>,
    peer: Option<Extension<Peer>>,
    params: Result<Query<Params>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    handle(st, peer.map(|p| p.0), params, headers, body, CHECK).await
}

async fn handle(
    st: Arc<AppState>,
    peer: Option<Peer>,
    params: Result<Query<Params>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
    body: Body,
    is_check: bool,
) -> Response {
    let start = Instant::now();
    let (endpoint, outcome) = match params {
        Err(e) => (
            if is_check {
                Endpoint::Check
            } else {
                Endpoint::Decode(Format::Json)
            },
            Outcome::http_error(StatusCode::BAD_REQUEST, "bad_request", "-", e.body_text()),
        ),
        Ok(Query(p)) => {
            let endpoint = if is_check {
                Endpoint::Check
            } else {
                match p.format.as_deref() {
                    None | Some("json") => Endpoint::Decode(Format::Json),
                    Some("repr") => Endpoint::Decode(Format::Repr),
                    Some("pickle") => match p.protocol {
                        None | Some(5) => Endpoint::Decode(Format::Pickle(Protocol::V5)),
                        Some(2) => Endpoint::Decode(Format::Pickle(Protocol::V2)),
                        Some(n) => {
                            let msg = format!("unknown protocol {n} (2, 5)");
                            let o = Outcome::http_error(
                                StatusCode::BAD_REQUEST,
                                "bad_request",
                                "-",
                                msg,
                            );
                            return finish(&st, peer, Endpoint::Decode(Format::Json), o, start);
                        }
                    },
                    Some(other) => {
                        let shown: String = other.chars().take(64).collect();
                        let msg = format!("unknown format {shown:?} (json, repr, pickle)");
                        let o =
                            Outcome::http_error(StatusCode::BAD_REQUEST, "bad_request", "-", msg);
                        return finish(&st, peer, Endpoint::Decode(Format::Json), o, start);
                    }
                }
            };
            if p.protocol.is_some() && !matches!(endpoint, Endpoint::Decode(Format::Pickle(_))) {
                let msg = "protocol applies to /v1/decode?format=pickle only".to_owned();
                let o = Outcome::http_error(StatusCode::BAD_REQUEST, "bad_request", "-", msg);
                return finish(&st, peer, endpoint, o, start);
            }
            if is_check && p.format.is_some() {
                let msg = "format applies to /v1/decode only".to_owned();
                let o = Outcome::http_error(StatusCode::BAD_REQUEST, "bad_request", "-", msg);
                return finish(&st, peer, endpoint, o, start);
            }
            let name = p
                .policy
                .clone()
                .unwrap_or_else(|| st.cfg.default_policy.clone());
            let Some(policy) = st.cfg.policies.get(&name).map(Arc::clone) else {
                let known: Vec<&str> = st.cfg.policies.keys().map(String::as_str).collect();
                let shown: String = name.chars().take(64).collect();
                let o = Outcome::http_error(
                    StatusCode::NOT_FOUND,
                    "unknown_policy",
                    "-",
                    format!(
                        "no policy {shown:?}: ?policy= takes the name of a built-in policy or \
                         of a NAME.toml file in --policy-dir (loaded: {})",
                        known.join(", ")
                    ),
                );
                return finish(&st, peer, endpoint, o, start);
            };
            let deadline = st.cfg.deadline;
            let outcome = match tokio::time::timeout(
                deadline,
                run(
                    Arc::clone(&st),
                    policy,
                    p.stream,
                    endpoint,
                    headers,
                    body,
                    start + deadline,
                ),
            )
            .await
            {
                Ok(o) => o,
                Err(_) => Outcome::http_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "deadline",
                    &name,
                    format!("the request did not finish within its deadline of {deadline:?}"),
                ),
            };
            (endpoint, outcome)
        }
    };
    finish(&st, peer, endpoint, outcome, start)
}

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
async fn run(
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

/// A response body of one buffer with an exact length, handed to hyper in [`HELD_FRAME`]-byte
/// frames, holding a permit (the output budget of its text) until hyper has taken the last
/// frame or dropped the body. hyper takes a frame only when its write buffer has room, so
/// the unsent text stays here, counted by the budget, until the peer reads it.
///
/// A response must be taken within `send_timeout` + its length / `min_send_rate` of its first
/// frame: a frame asked for later is refused with [`TooSlow`], which makes hyper close the
/// connection. The connection's `send_timeout` alone closes it when a write makes no progress,
/// but any progress restarts that, so without this rule a client reading slowly but steadily
/// held its response and its budget for as long as its reading took (audit/ATTACKS.md A48). The
/// time is per response, from its first frame: nothing carries over from one response to the
/// next, and a client that waits before it reads loses nothing while the response fits in
/// the socket's and hyper's buffers.
struct Held {
    data: Bytes,
    _hold: Option<OwnedSemaphorePermit>,
    /// The response's length in bytes.
    len: usize,
    /// The time it may take from its first frame to its last: `send_timeout` + `len` /
    /// `min_send_rate`.
    limit: Duration,
    /// When the last frame must have been taken by; set at the first frame.
    by: Option<Instant>,
    /// Who asked, and the input's sha256 (as in its verdict event), for the event of a cut.
    peer: Option<Peer>,
    sha256: Option<String>,
}

/// The error of a [`Held`] body taken too slowly.
#[derive(Debug, thiserror::Error)]
#[error("the response was not taken within --send-timeout + its length / --min-send-rate")]
struct TooSlow;

/// Frame size of a [`Held`] body.
const HELD_FRAME: usize = 64 * 1024;

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = TooSlow;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if this.data.is_empty() {
            return std::task::Poll::Ready(None);
        }
        let now = Instant::now();
        let limit = this.limit;
        let by = *this.by.get_or_insert_with(|| now + limit);
        if now > by {
            let sent = this.len.saturating_sub(this.data.len());
            let (peer_pid, peer_uid, peer_gid, peer_addr) = peer_fields(&this.peer);
            tracing::warn!(
                event = "response_cut",
                reason = "min_send_rate",
                peer_pid,
                peer_uid,
                peer_gid,
                peer_addr,
                sha256 = this.sha256.as_deref(),
                bytes = this.len,
                handed_out = sent,
                limit_s = this.limit.as_secs_f64(),
                "a response was not taken within --send-timeout + its length / --min-send-rate: \
                 connection closed"
            );
            this.data = Bytes::new();
            this._hold = None;
            return std::task::Poll::Ready(Some(Err(TooSlow)));
        }
        let n = this.data.len().min(HELD_FRAME);
        std::task::Poll::Ready(Some(Ok(http_body::Frame::data(this.data.split_to(n)))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(u64::try_from(self.data.len()).unwrap_or(u64::MAX))
    }
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

/// The decode itself (on a blocking thread): the verdict JSON, and the value when asked for
/// (unless its text would pass `max_output` bytes: then `output_error` says so and the verdict
/// stands).
fn evaluate(
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

/// The map of a `json!({...})` object literal.
fn object(v: Json) -> Map<String, Json> {
    match v {
        Json::Object(m) => m,
        _ => Map::new(),
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

/// Records the metrics and the audit event, and builds the response.
fn finish(
    st: &AppState,
    peer: Option<Peer>,
    endpoint: Endpoint,
    mut o: Outcome,
    start: Instant,
) -> Response {
    let elapsed = start.elapsed();
    let elapsed_us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
    let policy_label = if st.cfg.policies.contains_key(&o.policy) {
        o.policy.clone()
    } else {
        "-".to_owned()
    };
    let labels = RequestLabels {
        endpoint: endpoint.name(),
        policy: policy_label,
        verdict: o.verdict,
    };
    st.metrics.requests.get_or_create(&labels).inc();
    if let Some(n) = o.size {
        st.metrics
            .bytes
            .get_or_create(&labels)
            .inc_by(u64::try_from(n).unwrap_or(u64::MAX));
    }
    st.metrics
        .latency
        .get_or_create(&EndpointLabels {
            endpoint: endpoint.name(),
        })
        .observe(elapsed.as_secs_f64());
    audit(&peer, endpoint, &o, elapsed_us);

    if o.status == StatusCode::OK {
        o.body.insert("elapsed_us".to_owned(), json!(elapsed_us));
    }
    let mut text = Json::Object(std::mem::take(&mut o.body)).to_string();
    if let Some(mut doc) = o.document.take() {
        // `body` is a JSON object: the document goes in as its last member. The head is
        // inserted in front of the document's own buffer (usually within its spare capacity),
        // so the document is not copied into a second buffer of its size.
        if text.ends_with('}') {
            text.pop();
            text.push_str(",\"document\":");
            doc.insert_str(0, &text);
            doc.push('}');
            text = doc;
        }
    }
    // One JSON text a line, as curl and line-reading clients expect.
    text.push('\n');
    // The output budget stays with the body until hyper has sent it or dropped it.
    let share = Duration::try_from_secs_f64(text.len() as f64 / st.cfg.min_send_rate.max(1) as f64)
        .unwrap_or(Duration::MAX);
    let body = Held {
        len: text.len(),
        data: Bytes::from(text),
        _hold: o.hold.take(),
        limit: st.cfg.send_timeout.saturating_add(share),
        by: None,
        peer,
        sha256: o.sha256.take(),
    };
    let mut resp = (o.status, Body::new(body)).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if o.status == StatusCode::SERVICE_UNAVAILABLE {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    resp
}

/// A peer as the log's fields: pid, uid and gid of a Unix peer, the address of a TCP one.
pub(crate) fn peer_fields(
    peer: &Option<Peer>,
) -> (Option<i32>, Option<u32>, Option<u32>, Option<String>) {
    match peer {
        Some(Peer::Unix { pid, uid, gid }) => (*pid, Some(*uid), Some(*gid), None),
        Some(Peer::Tcp(a)) => (None, None, None, Some(a.to_string())),
        None => (None, None, None, None),
    }
}

/// The audit event of one request (target `picklewarden::audit`): accepted at INFO, everything
/// else at WARN.
fn audit(peer: &Option<Peer>, endpoint: Endpoint, o: &Outcome, elapsed_us: u64) {
    let (peer_pid, peer_uid, peer_gid, peer_addr) = peer_fields(peer);
    let e = o.error.as_ref();
    let kind = e.map(|e| e.kind().name());
    let category = e.map(|e| e.category().name());
    let offset = e.map(Error::offset);
    let opcode = e.and_then(Error::opcode_name);
    let reason = e.map(ToString::to_string).or_else(|| o.message.clone());
    macro_rules! event {
        ($level:ident) => {
            tracing::$level!(
                target: "picklewarden::audit",
                event = "verdict",
                endpoint = endpoint.name(),
                peer_pid,
                peer_uid,
                peer_gid,
                peer_addr,
                policy = %o.policy,
                sha256 = o.sha256.as_deref(),
                size = o.size,
                verdict = o.verdict,
                status = o.status.as_u16(),
                kind,
                category,
                offset,
                opcode,
                reason,
                elapsed_us,
            )
        };
    }
    if o.verdict == "accepted" {
        event!(info);
    } else {
        event!(warn);
    }
}

async fn policies(State(st): State<Arc<AppState>>) -> Response {
    let list: Vec<Json> = st
        .cfg
        .policies
        .iter()
        .map(|(name, p)| {
            let limits: serde_json::Map<String, Json> = picklewarden::LimitName::ALL
                .iter()
                .map(|l| (l.name().to_owned(), json!(p.limits.get(*l))))
                .collect();
            json!({
                "name": name,
                "description": p.description,
                "source": st.cfg.sources.get(name),
                "default": *name == st.cfg.default_policy,
                "globals": p.rules().len(),
                "max_body_bytes": p.limits.max_input_bytes.min(st.cfg.max_body),
                "limits": limits,
            })
        })
        .collect();
    json_response(StatusCode::OK, &json!({ "policies": list }))
}

async fn healthz(State(st): State<Arc<AppState>>) -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "status": "ok",
            "version": env!("CARGO_PKG_VERSION"),
            "sandboxed": st.cfg.sandboxed,
            "uptime_s": st.started.elapsed().as_secs(),
            "concurrency": st.cfg.concurrency,
            "queue": st.cfg.queue,
        }),
    )
}

async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    let mut resp = (StatusCode::OK, st.metrics.encode()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    resp
}

/// Runs the sandbox's probes inside the serving process (only with the hidden
/// `--enable-sandbox-probe`, for the tests that show the sandbox holds while serving goes on).
async fn sandbox_probe() -> Response {
    match tokio::task::spawn_blocking(super::sandbox::probes).await {
        Ok(probes) => {
            let list: Vec<Json> = probes
                .iter()
                .map(|p| json!({"operation": p.operation, "denied": p.denied, "detail": p.detail}))
                .collect();
            let all = probes.iter().all(|p| p.denied);
            json_response(StatusCode::OK, &json!({"all_denied": all, "probes": list}))
        }
        Err(e) => json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({"error": "internal_error", "message": e.to_string()}),
        ),
    }
}

async fn not_found() -> Response {
    json_response(
        StatusCode::NOT_FOUND,
        &json!({"error": "not_found", "message": "endpoints: POST /v1/check, POST /v1/decode, GET /v1/policies, GET /healthz, GET /metrics"}),
    )
}

async fn method_not_allowed() -> Response {
    json_response(
        StatusCode::METHOD_NOT_ALLOWED,
        &json!({"error": "method_not_allowed", "message": "POST /v1/check and /v1/decode; GET /v1/policies, /healthz and /metrics"}),
    )
}

fn json_response(status: StatusCode, body: &Json) -> Response {
    let mut text = body.to_string();
    text.push('\n');
    let mut resp = (status, Bytes::from(text)).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
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
