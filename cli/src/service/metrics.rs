//! `GET /metrics`: the service's counters in the Prometheus text exposition format (OpenMetrics
//! text, as the `prometheus-client` crate writes it).
//!
//! Label values come from a closed set (endpoint names, verdict names, and policy names the
//! server loaded at start-up; a request naming an unknown policy counts as policy `-`), so no
//! request can grow the number of series.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Labels of a finished request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RequestLabels {
    /// `check` or `decode`.
    pub(crate) endpoint: &'static str,
    /// The policy name, or `-` when the request named no loaded policy.
    pub(crate) policy: String,
    /// `accepted`, `refused`, or the HTTP-level outcome (`bad_request`, `too_large`, `busy`,
    /// `deadline`, `unknown_policy`).
    pub(crate) verdict: &'static str,
}

/// Labels of the per-endpoint series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct EndpointLabels {
    /// `check` or `decode`.
    pub(crate) endpoint: &'static str,
}

/// Every metric the service exports, registered in one registry.
pub(crate) struct Metrics {
    registry: Registry,
    /// `picklewarden_requests_total{endpoint,policy,verdict}`.
    pub(crate) requests: Family<RequestLabels, Counter>,
    /// `picklewarden_request_bytes_total{endpoint,policy,verdict}`: body bytes of the requests
    /// whose body was read.
    pub(crate) bytes: Family<RequestLabels, Counter>,
    /// `picklewarden_request_duration_seconds{endpoint}`: from the handler's start to the
    /// response (queueing included).
    pub(crate) latency: Family<EndpointLabels, Histogram>,
    /// `picklewarden_in_flight_requests`: requests holding a decode slot.
    pub(crate) in_flight: Gauge<i64, AtomicI64Wrapper>,
    /// `picklewarden_queued_requests`: requests waiting for a decode slot.
    pub(crate) queued: Gauge<i64, AtomicI64Wrapper>,
    /// `picklewarden_connections_total`: connections accepted.
    pub(crate) connections: Counter<u64, AtomicU64>,
}

/// The atomic behind the gauges (`prometheus-client`'s default for `i64`).
pub(crate) type AtomicI64Wrapper = std::sync::atomic::AtomicI64;

impl Metrics {
    /// A registry with every metric at zero.
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::with_prefix("picklewarden");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests answered, by endpoint, policy and verdict",
            requests.clone(),
        );
        let bytes = Family::<RequestLabels, Counter>::default();
        registry.register(
            "request_bytes",
            "Request body bytes read, by endpoint, policy and verdict",
            bytes.clone(),
        );
        // 50 us to ~26 s.
        let latency = Family::<EndpointLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
        });
        registry.register(
            "request_duration_seconds",
            "Time from the start of handling to the response, queueing included",
            latency.clone(),
        );
        let in_flight = Gauge::<i64, AtomicI64Wrapper>::default();
        registry.register(
            "in_flight_requests",
            "Requests holding a decode slot",
            in_flight.clone(),
        );
        let queued = Gauge::<i64, AtomicI64Wrapper>::default();
        registry.register(
            "queued_requests",
            "Requests waiting for a decode slot",
            queued.clone(),
        );
        let connections = Counter::<u64, AtomicU64>::default();
        registry.register("connections", "Connections accepted", connections.clone());
        Metrics {
            registry,
            requests,
            bytes,
            latency,
            in_flight,
            queued,
            connections,
        }
    }

    /// The exposition text (`# HELP`, `# TYPE` and samples, ending in `# EOF`).
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}
