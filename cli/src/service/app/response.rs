//! The answer to a request: its metrics and audit event ([`finish`]), and the [`Held`] body that
//! keeps the output budget until hyper has sent it and cuts a response taken too slowly.

use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use picklewarden::Error;
use serde_json::{json, Value as Json};
use tokio::sync::OwnedSemaphorePermit;

use super::{AppState, Endpoint, Outcome, Peer};
use crate::service::metrics::{EndpointLabels, RequestLabels};

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

/// Records the metrics and the audit event, and builds the response.
pub(super) fn finish(
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
