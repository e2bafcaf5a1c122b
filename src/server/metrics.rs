//! The server's own Prometheus metrics (prometheus-client).
//!
//! Everything is registered under the `interlock_` prefix in one
//! [`Registry`]; the [`Reviewer`](super::Reviewer) registers its metrics in
//! the same registry through
//! [`Reviewer::register_metrics`](super::Reviewer::register_metrics).

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Which admission endpoint answered.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /validate`
    Validate,
    /// `POST /mutate`
    Mutate,
}

impl Endpoint {
    /// The label value (`validate` / `mutate`).
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::Validate => "validate",
            Endpoint::Mutate => "mutate",
        }
    }
}

impl Decision {
    /// The label value (`allowed`, `patched`, `denied`, `invalid`,
    /// `too_large`, `error`, `timeout`).
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allowed => "allowed",
            Decision::Patched => "patched",
            Decision::Denied => "denied",
            Decision::Invalid => "invalid",
            Decision::TooLarge => "too_large",
            Decision::Error => "error",
            Decision::Timeout => "timeout",
        }
    }
}

impl HandshakeFailure {
    /// The label value (`timeout` / `error`).
    pub fn as_str(self) -> &'static str {
        match self {
            HandshakeFailure::Timeout => "timeout",
            HandshakeFailure::Error => "error",
        }
    }
}

macro_rules! label_value {
    ($($t:ty),*) => {$(
        impl EncodeLabelValue for $t {
            fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
                EncodeLabelValue::encode(&self.as_str(), encoder)
            }
        }
    )*};
}
impl Refusal {
    /// The label value (`max_connections` / `max_connections_per_source`).
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::MaxConnections => "max_connections",
            Refusal::PerSource => "max_connections_per_source",
        }
    }
}

impl Closed {
    /// The label value (`header_timeout` / `idle`).
    pub fn as_str(self) -> &'static str {
        match self {
            Closed::HeaderTimeout => "header_timeout",
            Closed::Idle => "idle",
        }
    }
}

label_value!(Endpoint, Decision, HandshakeFailure, Refusal, Closed);

/// Which cap refused a connection as it was accepted.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Refusal {
    /// `--max-connections` were open.
    MaxConnections,
    /// `--max-connections-per-source` were open from the peer's address.
    PerSource,
}

/// Why the server closed an established connection.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Closed {
    /// No complete request head within the header timeout (the first
    /// request's, or on HTTP/1.1 the next one's).
    HeaderTimeout,
    /// No request in flight for `--idle-timeout`.
    Idle,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    reason: Refusal,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClosedLabels {
    reason: Closed,
}

/// How an admission request ended.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Decision {
    /// 200, `allowed: true`, no patch.
    Allowed,
    /// 200, `allowed: true` with a JSON patch (mutate only).
    Patched,
    /// 200, `allowed: false`.
    Denied,
    /// 400: the body was not an AdmissionReview with a request.
    Invalid,
    /// 413: the body was larger than the limit.
    TooLarge,
    /// 500: the reviewer panicked or the answer could not be encoded.
    Error,
    /// 503: the per-request deadline passed (queueing included).
    Timeout,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    endpoint: Endpoint,
    decision: Decision,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabels {
    endpoint: Endpoint,
}

/// Why a TLS handshake did not complete.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum HandshakeFailure {
    /// The peer did not finish within the handshake timeout.
    Timeout,
    /// Protocol error, refused version, bad or missing client certificate...
    Error,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HandshakeLabels {
    reason: HandshakeFailure,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 50 µs .. ~1.6 s, doubling.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

/// Handles to the server's metrics. Cheap to share (`Arc`), lock-free to update.
#[derive(Debug)]
pub struct ServerMetrics {
    requests: Family<RequestLabels, Counter>,
    latency: HistogramFamily<EndpointLabels>,
    in_flight: Gauge,
    cert_reloads: Counter,
    cert_reload_failures: Counter,
    handshake_failures: Family<HandshakeLabels, Counter>,
    expression_errors: Counter,
    cost_limit_exceeded: Counter,
    evaluations_interrupted: Counter,
    open_connections: Gauge,
    refused_connections: Family<RefusalLabels, Counter>,
    connections_closed: Family<ClosedLabels, Counter>,
    accept_errors: Counter,
    cert_expiry: Gauge,
    heavy_lane_requests: Counter,
}

impl ServerMetrics {
    /// Create the metrics and register them in `registry` (which should be
    /// the `interlock`-prefixed sub-registry).
    pub fn register(registry: &mut Registry) -> Self {
        let m = ServerMetrics {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            in_flight: Gauge::default(),
            cert_reloads: Counter::default(),
            cert_reload_failures: Counter::default(),
            handshake_failures: Family::default(),
            expression_errors: Counter::default(),
            cost_limit_exceeded: Counter::default(),
            evaluations_interrupted: Counter::default(),
            open_connections: Gauge::default(),
            refused_connections: Family::default(),
            connections_closed: Family::default(),
            accept_errors: Counter::default(),
            cert_expiry: Gauge::default(),
            heavy_lane_requests: Counter::default(),
        };
        registry.register(
            "admission_requests",
            "Admission requests answered, by endpoint and decision",
            m.requests.clone(),
        );
        registry.register(
            "admission_request_duration_seconds",
            "Time from request start to answer, body read and queueing included",
            m.latency.clone(),
        );
        registry.register(
            "admission_in_flight_requests",
            "Admission requests being read, queued or evaluated",
            m.in_flight.clone(),
        );
        registry.register(
            "tls_certificate_reloads",
            "Serving certificates loaded after a change on disk",
            m.cert_reloads.clone(),
        );
        registry.register(
            "tls_certificate_reload_failures",
            "Changed certificate/key files that could not be loaded (the previous pair kept serving)",
            m.cert_reload_failures.clone(),
        );
        registry.register(
            "tls_handshake_failures",
            "TLS handshakes that did not complete, by reason",
            m.handshake_failures.clone(),
        );
        registry.register(
            "expression_errors",
            "CEL evaluations of admission requests that ended in an error (cost limit and deadline included)",
            m.expression_errors.clone(),
        );
        registry.register(
            "expression_cost_limit_exceeded",
            "CEL evaluations stopped by their cost or memory budget",
            m.cost_limit_exceeded.clone(),
        );
        registry.register(
            "expression_deadline_interrupted",
            "CEL evaluations stopped because their request's deadline passed",
            m.evaluations_interrupted.clone(),
        );
        registry.register(
            "open_connections",
            "Client connections open (TLS handshake included)",
            m.open_connections.clone(),
        );
        registry.register(
            "refused_connections",
            "Connections closed as they were accepted, by the cap that was reached",
            m.refused_connections.clone(),
        );
        registry.register(
            "connections_closed",
            "Connections closed by the server: no request head within the header timeout, or no request in flight for --idle-timeout",
            m.connections_closed.clone(),
        );
        registry.register(
            "tls_certificate_expiry_timestamp_seconds",
            "When the served certificate expires (its notAfter), in seconds since the Unix epoch",
            m.cert_expiry.clone(),
        );
        registry.register(
            "heavy_lane_requests",
            "Admission requests evaluated in the heavy lane (estimated cost over that of 128 KiB of plain body)",
            m.heavy_lane_requests.clone(),
        );
        registry.register(
            "accept_errors",
            "Failed accept calls (file descriptors exhausted and the like)",
            m.accept_errors.clone(),
        );
        m
    }

    /// Count what one request's evaluations ran into.
    pub fn observe_evaluation(&self, stats: &crate::cel::interrupt::Stats) {
        self.expression_errors.inc_by(stats.expression_errors);
        self.cost_limit_exceeded.inc_by(stats.cost_limit_exceeded);
        self.evaluations_interrupted.inc_by(stats.interrupted);
    }

    /// Count a request sent to the executor's heavy lane.
    pub(crate) fn heavy_lane_request(&self) {
        self.heavy_lane_requests.inc();
    }

    /// Count a connection refused by one of the connection caps.
    pub(crate) fn connection_refused(&self, reason: Refusal) {
        self.refused_connections
            .get_or_create(&RefusalLabels { reason })
            .inc();
    }

    /// Count a connection the server closed.
    pub(crate) fn connection_closed(&self, reason: Closed) {
        self.connections_closed
            .get_or_create(&ClosedLabels { reason })
            .inc();
    }

    /// Record the served certificate's notAfter.
    pub(crate) fn set_cert_expiry(&self, unix_seconds: i64) {
        self.cert_expiry.set(unix_seconds);
    }

    /// Count a failed `accept`.
    pub(crate) fn accept_failed(&self) {
        self.accept_errors.inc();
    }

    /// Count one answered admission request and its latency.
    pub fn observe_request(&self, endpoint: Endpoint, decision: Decision, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels { endpoint, decision })
            .inc();
        self.latency
            .get_or_create(&EndpointLabels { endpoint })
            .observe(seconds);
    }

    /// The in-flight gauge (the server holds a guard per request).
    pub(crate) fn in_flight(&self) -> &Gauge {
        &self.in_flight
    }

    /// Count a successful certificate reload.
    pub fn cert_reloaded(&self) {
        self.cert_reloads.inc();
    }

    /// Count a failed certificate reload.
    pub fn cert_reload_failed(&self) {
        self.cert_reload_failures.inc();
    }

    /// Count a TLS handshake that did not complete.
    pub fn handshake_failed(&self, reason: HandshakeFailure) {
        self.handshake_failures
            .get_or_create(&HandshakeLabels { reason })
            .inc();
    }

    /// Successful reloads so far.
    pub fn cert_reloads(&self) -> u64 {
        self.cert_reloads.get()
    }

    /// Failed reloads so far.
    pub fn cert_reload_failures(&self) -> u64 {
        self.cert_reload_failures.get()
    }
}

/// Decrements the in-flight gauge when dropped (also when the request future
/// is cancelled by the deadline or a closed connection).
pub(crate) struct InFlight<'a>(&'a Gauge);

impl<'a> InFlight<'a> {
    pub(crate) fn enter(gauge: &'a Gauge) -> Self {
        gauge.inc();
        InFlight(gauge)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// An open connection: counted in the open-connections gauge until dropped.
pub(crate) struct Open(std::sync::Arc<ServerMetrics>);

impl Open {
    pub(crate) fn enter(metrics: std::sync::Arc<ServerMetrics>) -> Self {
        metrics.open_connections.inc();
        Open(metrics)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open_connections.dec();
    }
}
