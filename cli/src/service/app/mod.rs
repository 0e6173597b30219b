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
//! Memory and time of a request (see `request::run`): buffer budget for its whole body
//! (`max_buffered` bytes across requests), the body within `body_timeout`, admission (at most
//! `concurrency + queue` requests with their body waiting for or holding a decode slot, 503
//! beyond), a decode slot (`concurrency`), the decode, then output budget for its response
//! text (`max_pending_output` bytes across responses), held until hyper has taken the last
//! frame of the response. The deadline covers everything up to the response; writing it is
//! bounded by the connection's `send_timeout` (a write without progress) and by
//! `send_timeout` + its length / `min_send_rate` in all (see [`Held`](response::Held)).
//!
//! This file holds the state, the router, the parsing of a request's parameters and the small
//! endpoints; [`request`] takes a body through its budgets and slots, [`evaluate`] decodes it
//! into the verdict JSON and [`response`] records the request and sends the answer.

mod evaluate;
mod request;
mod response;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use picklewarden::canonical::Protocol;
use picklewarden::{Error, Policy};
use serde::Deserialize;
use serde_json::{json, Map, Value as Json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use self::request::run;
use self::response::finish;
pub(crate) use self::response::peer_fields;
use super::metrics::Metrics;

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

/// The map of a `json!({...})` object literal.
fn object(v: Json) -> Map<String, Json> {
    match v {
        Json::Object(m) => m,
        _ => Map::new(),
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
