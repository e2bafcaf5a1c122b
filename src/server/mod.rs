//! `interlock serve`: the TLS admission webhook.
//!
//! The policy engine plugs in through [`Reviewer`]; this module owns the
//! rest: a tokio-rustls accept loop (TLS 1.2/1.3, ALPN h2 and http/1.1,
//! optional client certificates), the axum routes (`POST /validate`,
//! `POST /mutate`, `GET /healthz`, `GET /readyz`, `GET /metrics`), limits
//! (body size, per-request deadline, bounded concurrency, handshake
//! timeout), certificate reload without restart, Prometheus metrics and
//! graceful shutdown.
//!
//! ## Design decisions
//! - **Where evaluation runs.** Each body is read on the async side, then
//!   parsed (once, straight into JSON) and evaluated on a dedicated
//!   fixed set of threads behind one queue ([`executor`]; default: one
//!   thread per CPU; `--eval-threads`), never on a tokio worker. Requests
//!   whose estimated cost is over that of 128 KiB of plain body ([`cost`]:
//!   size, containers, and references where a policy looks them up) may
//!   occupy all threads but one, so a few near-limit, costly or
//!   adversarial bodies cannot make ordinary requests queue behind them.
//!   Until issue 17, bodies up
//!   to 64 KiB were evaluated inline on the worker that read them (12%
//!   less CPU per request at saturation, docs/PERFORMANCE.md), but an
//!   evaluation can block: on the engine's `RwLock` behind a waiting
//!   writer (one long evaluation plus one admitted ConfigMap froze every
//!   request, `/healthz` included, for a minute), or simply run until its
//!   deadline. A blocked worker stops every connection it owns; a blocked
//!   pool thread only delays admission requests, which the deadline
//!   bounds. Not `spawn_blocking`: its pool grows to 512 threads, which
//!   for CPU-bound work on 2 cores means oversubscription and unbounded
//!   queueing.
//! - **The deadline cancels.** Each evaluation runs under a
//!   [`crate::cel::Interrupt`] that is set when the request's future ends
//!   (answered, or dropped by the deadline or a closed connection). Every
//!   charge of CEL cost checks it, so an evaluation stops within one
//!   builtin call of its deadline, with "operation interrupted", and frees
//!   what it built; a request whose deadline passed while it waited for a
//!   thread is not evaluated at all. What the evaluations ran into (errors,
//!   spent budgets, interruptions) is counted and logged per request.
//! - **Connections.** At most `--max-connections` at once, and at most
//!   `--max-connections-per-source` from one peer address (`sources.rs`):
//!   past either a new connection is closed as it is accepted (logged at
//!   most once per 10 s per cap, `interlock_refused_connections_total` by
//!   reason), not left in the backlog. A connection that has not sent a
//!   complete first request head within the handshake timeout after its
//!   handshake is closed, whatever its protocol (timed here: hyper's auto
//!   builder reads the HTTP/2 preface without a timer, and HTTP/2 has no
//!   header timeout); an HTTP/1.1 connection is closed the same way while
//!   it waits for a later request's head (hyper's header read timeout),
//!   and clients reopen idle connections as Go's transport does. Both count
//!   in `interlock_connections_closed_total{reason="header_timeout"}`. A
//!   connection with no request in flight for `--idle-timeout` is closed
//!   (HTTP/1.1) or sent a GOAWAY (HTTP/2); the timer counts requests, not
//!   bytes, so HTTP/2 PINGs do not keep a connection alive. An HTTP/2
//!   connection that has served a request may idle that long: it is how
//!   kube-apiserver holds its few long-lived connections, and the
//!   per-source cap bounds how many one client holds that way. The
//!   server's own PINGs (every idle timeout, answered within the handshake
//!   timeout) close connections to peers that vanished. `accept` errors
//!   (file descriptors exhausted) back off up to a second instead of
//!   spinning.
//! - **Limits.** A semaphore of `max_concurrent_requests` slots; a slot is
//!   held until the evaluation finishes (even when the deadline has already
//!   answered; the interrupt makes that soon), so the pool never queues
//!   more than that. The per-request
//!   deadline (tower `Timeout`) covers body read, waiting for a slot and
//!   evaluation.
//! - **Error answers.** Every answer of `/validate` and `/mutate` is an
//!   AdmissionReview JSON. A body that is not an AdmissionReview with a
//!   request gets HTTP 400 with `AdmissionResponse::invalid` (status code
//!   400); too large gets 413; a passed deadline 503; a panicking reviewer
//!   500 carrying the request uid. Any non-200 makes the kube-apiserver
//!   apply the webhook's failurePolicy, which is right for requests we could
//!   not judge (kube-rs's examples answer 200 with `invalid`, which the
//!   apiserver rejects anyway for the missing uid, with a less clear error).
//! - **Certificate reload**: see [`tls`].
//!
//! ```no_run
//! # use std::sync::Arc;
//! # async fn demo(args: interlock::server::ServeOptions, engine: Arc<dyn interlock::server::Reviewer>) -> anyhow::Result<()> {
//! interlock::server::init_tracing(args.log_format.is_json());
//! interlock::server::run(args, engine).await
//! # }
//! ```

pub mod admin;
mod cost;
mod executor;
mod logging;
pub mod metrics;
pub mod options;
mod routes;
mod sources;
pub mod tls;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::DynamicObject;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use logging::RateLimit;
pub use logging::{init_tracing, init_tracing_at};
pub use metrics::ServerMetrics;
pub use options::{LogFormat, ServeOptions};

/// The policy engine as the server sees it.
///
/// The server parses each body once into an `AdmissionRequest` and calls
/// `validate` or `mutate` on a dedicated evaluation thread pool, so these
/// methods may do CPU work and wait on locks, but should not block on I/O.
/// They run under the request's [`crate::cel::Interrupt`]: CEL evaluations
/// stop once the deadline passes, and other long work can poll
/// [`crate::cel::interrupt::cancelled`]. Whatever `uid` the response
/// carries, the server answers with the request's uid. A panic is caught
/// and answered as HTTP 500, which makes the apiserver apply the webhook's
/// failurePolicy.
pub trait Reviewer: Send + Sync + 'static {
    /// Answer a validating AdmissionReview request.
    fn validate(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse;
    /// Answer a mutating one (JSON patch in the response).
    fn mutate(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse;
    /// Ready to answer (policies loaded, inventory synced). `/readyz` answers
    /// 503 until this is true. Called per probe: keep it cheap (an atomic).
    fn ready(&self) -> bool;
    /// Could a policy that looks objects up (in the inventory, the
    /// cluster) match a review of this kind (`api_version` as in an
    /// object, `namespaced`: the review names a namespace)? Read before the
    /// request is queued, to weigh the references its object makes
    /// ([`cost`]); called per request, keep it cheap. The default, for a
    /// reviewer that cannot tell, is yes.
    fn reads_inventory(&self, api_version: &str, kind: &str, namespaced: bool) -> bool {
        let _ = (api_version, kind, namespaced);
        true
    }
    /// Register this component's Prometheus metrics. Called once, before the
    /// server accepts connections, with the server's registry (already
    /// prefixed `interlock_`). Metric handles are `Arc`s inside, so keep
    /// clones in the engine and register them here; values computed at
    /// scrape time (inventory sizes...) can be added with
    /// `Registry::register_collector`.
    fn register_metrics(&self, registry: &mut Registry) {
        let _ = registry;
    }
    /// [`Reviewer::validate`] on the request as the server parsed it: the
    /// objects as JSON, not yet turned into `DynamicObject`s. A reviewer
    /// that works on JSON (the policy engine) overrides this to skip
    /// building `DynamicObject`s and serialising them back. The default
    /// builds them and calls `validate`.
    fn validate_parsed(&self, review: ParsedReview) -> AdmissionResponse {
        let req = review.into_request();
        self.validate(&req)
    }
    /// [`Reviewer::mutate`] on the request as the server parsed it (see
    /// [`Reviewer::validate_parsed`]).
    fn mutate_parsed(&self, review: ParsedReview) -> AdmissionResponse {
        let req = review.into_request();
        self.mutate(&req)
    }
}

/// What the server answers to `body` POSTed on `/mutate` (`mutate` true)
/// or `/validate`: the HTTP status and the JSON body, from the same
/// function the routes call (after the body is read). For fuzz targets,
/// tests and benchmarks; not a stable API.
#[doc(hidden)]
pub fn answer_body(reviewer: &dyn Reviewer, mutate: bool, body: &[u8]) -> (u16, Vec<u8>) {
    let endpoint = if mutate {
        metrics::Endpoint::Mutate
    } else {
        metrics::Endpoint::Validate
    };
    let a = routes::review(reviewer, endpoint, bytes::Bytes::copy_from_slice(body));
    (a.status.as_u16(), a.body)
}

/// An admission request as the server parsed it: kube's `AdmissionRequest`
/// with `object` and `old_object` left `None`, `object` as JSON and
/// `oldObject` as its text. The server has checked that `object` is a valid
/// `DynamicObject` (what kube's `AdmissionReview` parser requires), and that
/// `oldObject` is a JSON map: it is parsed only when something reads it
/// (most policies do not, and it is as large as `object`).
#[derive(Debug, Clone)]
pub struct ParsedReview {
    /// The request without its objects.
    pub request: AdmissionRequest<DynamicObject>,
    /// `request.object`, if present and not null.
    pub object: Option<serde_json::Value>,
    /// `request.oldObject` as sent, if present and not null.
    pub old_object: Option<Box<serde_json::value::RawValue>>,
}

impl ParsedReview {
    /// The request with its objects as `DynamicObject`s (an object that
    /// does not convert, which the server's checks rule out, is left out).
    pub fn into_request(self) -> AdmissionRequest<DynamicObject> {
        let mut req = self.request;
        req.object = self.object.and_then(|o| serde_json::from_value(o).ok());
        req.old_object = self
            .old_object
            .and_then(|o| serde_json::from_str(o.get()).ok());
        req
    }
}

/// Errors that stop the server from starting or running.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A certificate, key or CA file could not be read or parsed.
    #[error("{}: {reason}", path.display())]
    Certificate {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// The TLS configuration was refused.
    #[error("TLS configuration: {0}")]
    Tls(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The evaluation thread pool could not be started.
    #[error("evaluation threads could not be started: {0}")]
    Pool(#[source] std::io::Error),
}

/// Everything the server needs; [`From<&ServeOptions>`] fills it from the CLI.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on (port 0 picks a free port; see [`Server::local_addr`]).
    pub listen: SocketAddr,
    /// PEM certificate chain file.
    pub tls_cert: PathBuf,
    /// PEM private key file.
    pub tls_key: PathBuf,
    /// Require client certificates signed by this PEM CA bundle.
    pub client_ca: Option<PathBuf>,
    /// Largest request body; larger gets 413.
    pub max_body_bytes: usize,
    /// Deadline per admission request (read, queue, evaluate); past it, 503.
    pub request_timeout: Duration,
    /// Admission requests evaluated at once (queued or running on the pool);
    /// more wait for a slot within their deadline.
    pub max_concurrent_requests: usize,
    /// Evaluation threads (at least one); `None` uses one thread per CPU.
    pub eval_threads: Option<usize>,
    /// Close a connection with no request in flight for this long.
    pub idle_timeout: Duration,
    /// Most connections open at once; more are closed as they are accepted.
    pub max_connections: usize,
    /// Most connections open at once from one peer address; more from it
    /// are closed as they are accepted.
    pub max_connections_per_source: usize,
    /// Time allowed for the TLS handshake and for reading request headers.
    pub tls_handshake_timeout: Duration,
    /// How often the certificate files are re-read (and their validity
    /// judged against the clock).
    pub cert_poll_interval: Duration,
    /// A certificate this close to its expiry already makes the server
    /// unready.
    pub tls_expiry_margin: Duration,
    /// After the shutdown signal, keep accepting this long (readyz 503).
    pub shutdown_delay: Duration,
    /// After the listener closes, wait at most this long for in-flight requests.
    pub shutdown_timeout: Duration,
}

impl ServerConfig {
    /// Defaults for everything but the certificate files.
    pub fn new(tls_cert: impl Into<PathBuf>, tls_key: impl Into<PathBuf>) -> Self {
        ServerConfig {
            listen: SocketAddr::from(([0, 0, 0, 0], 8443)),
            tls_cert: tls_cert.into(),
            tls_key: tls_key.into(),
            client_ca: None,
            max_body_bytes: options::DEFAULT_MAX_BODY_BYTES,
            request_timeout: Duration::from_secs(4),
            max_concurrent_requests: 1024,
            eval_threads: None,
            idle_timeout: Duration::from_secs(120),
            max_connections: options::DEFAULT_MAX_CONNECTIONS,
            max_connections_per_source: options::DEFAULT_MAX_CONNECTIONS_PER_SOURCE,
            tls_handshake_timeout: Duration::from_secs(10),
            cert_poll_interval: Duration::from_secs(3),
            tls_expiry_margin: options::DEFAULT_TLS_EXPIRY_MARGIN,
            shutdown_delay: Duration::ZERO,
            shutdown_timeout: Duration::from_secs(20),
        }
    }
}

impl From<&ServeOptions> for ServerConfig {
    fn from(a: &ServeOptions) -> Self {
        ServerConfig {
            listen: a.listen,
            tls_cert: a.tls_cert.clone(),
            tls_key: a.tls_key.clone(),
            client_ca: a.client_ca.clone(),
            max_body_bytes: a.max_body_bytes,
            request_timeout: a.request_timeout,
            max_concurrent_requests: a.max_concurrent_requests,
            eval_threads: a.eval_threads,
            idle_timeout: a.idle_timeout,
            max_connections: a.max_connections,
            max_connections_per_source: a.max_connections_per_source,
            tls_handshake_timeout: a.tls_handshake_timeout,
            cert_poll_interval: a.cert_poll_interval,
            tls_expiry_margin: a.tls_expiry_margin,
            shutdown_delay: a.shutdown_delay,
            shutdown_timeout: a.shutdown_timeout,
        }
    }
}

/// A bound, not yet serving webhook server.
pub struct Server {
    config: ServerConfig,
    listener: TcpListener,
    local_addr: SocketAddr,
    acceptor: TlsAcceptor,
    router: axum::Router,
    reloader: Arc<tls::CertReloader>,
    metrics: Arc<ServerMetrics>,
    shutting_down: Arc<AtomicBool>,
}

impl Server {
    /// Load the certificate, build TLS and routes, register metrics (the
    /// reviewer's too) and bind the listener. Must run inside a tokio
    /// multi-thread runtime.
    pub async fn bind(
        config: ServerConfig,
        reviewer: Arc<dyn Reviewer>,
    ) -> Result<Self, ServerError> {
        let provider = tls::provider();
        let mut registry = Registry::default();
        let sub = registry.sub_registry_with_prefix("interlock");
        let metrics = Arc::new(ServerMetrics::register(sub));
        reviewer.register_metrics(sub);

        let reloader = Arc::new(tls::CertReloader::load(
            &config.tls_cert,
            &config.tls_key,
            provider.clone(),
            metrics.clone(),
            config.tls_expiry_margin,
        )?);
        let tls_config =
            tls::server_config(reloader.clone(), config.client_ca.as_deref(), provider)?;
        let acceptor = TlsAcceptor::from(Arc::new(tls_config));

        let shutting_down = Arc::new(AtomicBool::new(false));
        let state = routes::AppState {
            reviewer,
            metrics: metrics.clone(),
            registry: Arc::new(registry),
            executor: executor::Executor::new(config.eval_threads).map_err(ServerError::Pool)?,
            max_body_bytes: config.max_body_bytes,
            shutting_down: shutting_down.clone(),
            certificate: reloader.clone(),
            slots: Arc::new(tokio::sync::Semaphore::new(
                config.max_concurrent_requests.max(1),
            )),
        };
        let router = routes::router(
            state,
            &routes::RouterConfig {
                request_timeout: config.request_timeout,
            },
        );

        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| ServerError::Bind {
                    addr: config.listen,
                    source,
                })?;
        let local_addr = listener.local_addr().map_err(|source| ServerError::Bind {
            addr: config.listen,
            source,
        })?;
        Ok(Server {
            config,
            listener,
            local_addr,
            acceptor,
            router,
            reloader,
            metrics,
            shutting_down,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The server's metric handles.
    pub fn metrics(&self) -> Arc<ServerMetrics> {
        self.metrics.clone()
    }

    /// Serve until `shutdown` resolves, then: mark not ready, keep accepting
    /// for `shutdown_delay`, close the listener, let in-flight requests
    /// finish (at most `shutdown_timeout`), and return.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), ServerError> {
        let Server {
            config,
            listener,
            local_addr,
            acceptor,
            router,
            reloader,
            metrics,
            shutting_down,
        } = self;

        let poller = tokio::spawn(poll_certificates(reloader, config.cert_poll_interval));

        let mut http = auto::Builder::new(TokioExecutor::new());
        http.http1()
            .timer(TokioTimer::new())
            .header_read_timeout(config.tls_handshake_timeout);
        // PINGs find peers that vanished without closing (no ACK): their
        // connections would otherwise wait forever, GOAWAY included.
        http.http2()
            .timer(TokioTimer::new())
            .keep_alive_interval(Some(config.idle_timeout.max(Duration::from_secs(1))))
            .keep_alive_timeout(config.tls_handshake_timeout);
        // Each connection holds a permit; at shutdown, taking them all back
        // is waiting for every connection to finish.
        let max_connections = config.max_connections.clamp(1, u32::MAX as usize);
        let connections = Arc::new(tokio::sync::Semaphore::new(max_connections));
        let sources = sources::SourceCap::new(config.max_connections_per_source);
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(());
        let limits = ConnLimits {
            handshake_timeout: config.tls_handshake_timeout,
            idle_timeout: config.idle_timeout,
            shutdown_timeout: config.shutdown_timeout,
        };

        tracing::info!(
            addr = %local_addr,
            max_connections,
            max_connections_per_source = sources.limit(),
            "serving admission webhook"
        );
        let stop = async {
            shutdown.await;
            shutting_down.store(true, Ordering::SeqCst);
            tracing::info!(
                delay_ms = config.shutdown_delay.as_millis() as u64,
                "shutdown requested; not ready"
            );
            tokio::time::sleep(config.shutdown_delay).await;
        };
        tokio::pin!(stop);
        let mut backoff = Duration::ZERO;
        loop {
            let accepted = tokio::select! {
                biased;
                () = &mut stop => break,
                accepted = listener.accept() => accepted,
            };
            let (tcp, peer) = match accepted {
                Ok(a) => {
                    backoff = Duration::ZERO;
                    a
                }
                Err(e) => {
                    // EMFILE and friends: the error repeats until
                    // connections close, so back off (doubling, up to a
                    // second) and log once per interval, not per failure.
                    metrics.accept_failed();
                    backoff =
                        (backoff * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                    static ACCEPT: RateLimit = RateLimit::new();
                    if let Some(suppressed) = ACCEPT.allow() {
                        tracing::warn!(
                            error = %e,
                            backoff_ms = backoff.as_millis() as u64,
                            suppressed,
                            "accept failed; backing off"
                        );
                    }
                    tokio::select! {
                        biased;
                        () = &mut stop => break,
                        () = tokio::time::sleep(backoff) => continue,
                    }
                }
            };
            // Refused rather than left in the backlog: the peer learns at
            // once, and a flood of idle connections cannot queue the
            // apiserver's behind them.
            let Some(source) = sources.try_enter(peer.ip()) else {
                refuse(&metrics, peer, metrics::Refusal::PerSource, sources.limit());
                continue;
            };
            let Ok(permit) = connections.clone().try_acquire_owned() else {
                refuse(
                    &metrics,
                    peer,
                    metrics::Refusal::MaxConnections,
                    max_connections,
                );
                continue;
            };
            let _ = tcp.set_nodelay(true);
            tokio::spawn(serve_connection(
                tcp,
                peer,
                acceptor.clone(),
                router.clone(),
                http.clone(),
                metrics.clone(),
                stop_rx.clone(),
                limits,
                (permit, source),
            ));
        }
        drop(listener);
        tracing::info!("listener closed; finishing in-flight requests");
        drop(stop_rx);
        let _ = stop_tx.send(());
        let drained = tokio::time::timeout(
            config.shutdown_timeout,
            connections.acquire_many(max_connections as u32),
        )
        .await;
        if drained.is_err() {
            tracing::warn!(
                timeout_ms = config.shutdown_timeout.as_millis() as u64,
                "in-flight requests did not finish before the shutdown timeout"
            );
        }
        poller.abort();
        tracing::info!("server stopped");
        Ok(())
    }
}

/// Count and log (once per interval and cap) a connection closed as it
/// was accepted; the caller drops it.
fn refuse(metrics: &ServerMetrics, peer: SocketAddr, reason: metrics::Refusal, limit: usize) {
    metrics.connection_refused(reason);
    static GLOBAL: RateLimit = RateLimit::new();
    static PER_SOURCE: RateLimit = RateLimit::new();
    let (rate, message) = match reason {
        metrics::Refusal::MaxConnections => (
            &GLOBAL,
            "connection refused: --max-connections connections are open",
        ),
        metrics::Refusal::PerSource => (
            &PER_SOURCE,
            "connection refused: --max-connections-per-source connections are open from this address",
        ),
    };
    if let Some(suppressed) = rate.allow() {
        tracing::warn!(%peer, limit, reason = reason.as_str(), suppressed, "{message}");
    }
}

/// The timeouts one connection lives by.
#[derive(Clone, Copy)]
struct ConnLimits {
    /// For the TLS handshake, then for each request head (the first one
    /// here, later ones on HTTP/1.1 by hyper's header read timeout).
    handshake_timeout: Duration,
    idle_timeout: Duration,
    shutdown_timeout: Duration,
}

/// One connection: TLS handshake, then HTTP until the peer closes, the
/// connection idles for `idle_timeout`, or the server stops.
#[allow(clippy::too_many_arguments)]
async fn serve_connection(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    router: axum::Router,
    http: auto::Builder<TokioExecutor>,
    metrics: Arc<ServerMetrics>,
    mut stop: tokio::sync::watch::Receiver<()>,
    limits: ConnLimits,
    slots: (tokio::sync::OwnedSemaphorePermit, sources::SourceSlot),
) {
    let _slots = slots;
    let _open = metrics::Open::enter(metrics.clone());
    let tls = match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            metrics.handshake_failed(metrics::HandshakeFailure::Error);
            // One line per interval: scanners and misconfigured clients
            // can fail thousands of handshakes a second (rustls's own
            // per-handshake warnings are rate-limited in `init_tracing`).
            static FAILED: RateLimit = RateLimit::new();
            if let Some(suppressed) = FAILED.allow() {
                tracing::warn!(%peer, error = %e, suppressed, "TLS handshake failed");
            }
            return;
        }
        Err(_) => {
            metrics.handshake_failed(metrics::HandshakeFailure::Timeout);
            tracing::debug!(%peer, "TLS handshake timed out");
            return;
        }
    };
    let activity = Arc::new(Activity::new());
    let service = {
        let activity = activity.clone();
        hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let busy = activity.begin();
            let answer = tower::ServiceExt::oneshot(router.clone(), req);
            async move {
                let resp = answer.await;
                drop(busy);
                resp
            }
        })
    };
    let conn = http
        .serve_connection(TokioIo::new(tls), service)
        .into_owned();
    tokio::pin!(conn);
    // Once a graceful shutdown of the connection began: when to give up
    // on it (a peer that never acknowledges the GOAWAY).
    let mut closing: Option<tokio::time::Instant> = None;
    loop {
        let idle_check = match activity.check(&limits) {
            Err(metrics::Closed::HeaderTimeout) => {
                // Nothing was asked: there is nothing to finish gracefully.
                metrics.connection_closed(metrics::Closed::HeaderTimeout);
                tracing::debug!(%peer, "no request head within the header timeout; closed");
                return;
            }
            Err(metrics::Closed::Idle) if closing.is_none() => {
                metrics.connection_closed(metrics::Closed::Idle);
                tracing::debug!(%peer, "closing idle connection");
                conn.as_mut().graceful_shutdown();
                closing = Some(tokio::time::Instant::now() + limits.handshake_timeout);
                continue;
            }
            Err(metrics::Closed::Idle) => tokio::time::Instant::now() + limits.idle_timeout,
            Ok(at) => at,
        };
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    if is_header_timeout(&*e) {
                        metrics.connection_closed(metrics::Closed::HeaderTimeout);
                    }
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                return;
            }
            changed = stop.changed(), if closing.is_none() => {
                let _ = changed;
                conn.as_mut().graceful_shutdown();
                closing = Some(tokio::time::Instant::now() + limits.shutdown_timeout);
            }
            () = tokio::time::sleep_until(idle_check), if closing.is_none() => {}
            () = tokio::time::sleep_until(closing.unwrap_or(idle_check)), if closing.is_some() => {
                tracing::debug!(%peer, "connection did not close after its shutdown; dropped");
                return;
            }
        }
    }
}

/// hyper's HTTP/1.1 header read timeout (a later request's head, or the
/// first one's when hyper's timer fires before ours).
fn is_header_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    e.downcast_ref::<hyper::Error>()
        .is_some_and(hyper::Error::is_timeout)
}

/// Requests in flight on one connection and when the last one ended.
struct Activity {
    /// The end of the TLS handshake.
    born: tokio::time::Instant,
    /// Whether a request head ever arrived.
    asked: AtomicBool,
    in_flight: std::sync::atomic::AtomicUsize,
    /// Milliseconds after `born` when the last request ended.
    last_ms: std::sync::atomic::AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Activity {
            born: tokio::time::Instant::now(),
            asked: AtomicBool::new(false),
            in_flight: Default::default(),
            last_ms: Default::default(),
        }
    }

    fn begin(self: &Arc<Self>) -> Busy {
        self.asked.store(true, Ordering::SeqCst);
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        Busy(self.clone())
    }

    /// Why the connection should be closed now, or when to look again.
    ///
    /// The first request head is timed here for every protocol: before it,
    /// hyper's auto builder reads the HTTP/2 preface without a timer, and
    /// HTTP/2 has no header timeout at all, so a silent connection was held
    /// for the whole idle timeout.
    fn check(&self, limits: &ConnLimits) -> Result<tokio::time::Instant, metrics::Closed> {
        let now = tokio::time::Instant::now();
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return Ok(now + limits.idle_timeout);
        }
        let since = self.born + Duration::from_millis(self.last_ms.load(Ordering::SeqCst));
        let idle_at = since + limits.idle_timeout;
        let head_at =
            (!self.asked.load(Ordering::SeqCst)).then(|| self.born + limits.handshake_timeout);
        if head_at.is_some_and(|at| now >= at) {
            return Err(metrics::Closed::HeaderTimeout);
        }
        if now >= idle_at {
            return Err(metrics::Closed::Idle);
        }
        Ok(head_at.map_or(idle_at, |at| at.min(idle_at)))
    }
}

/// A request in flight; when it ends (answered or dropped), the idle clock restarts.
struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        let a = &self.0;
        a.last_ms
            .store(a.born.elapsed().as_millis() as u64, Ordering::SeqCst);
        a.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn poll_certificates(reloader: Arc<tls::CertReloader>, every: Duration) {
    let mut ticker = tokio::time::interval(every.max(Duration::from_millis(10)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await; // the first tick is immediate; the pair was just loaded
    loop {
        ticker.tick().await;
        let r = reloader.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || r.poll()).await {
            tracing::error!(error = %e, "certificate poll task failed");
        }
    }
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => tracing::info!(signal = "SIGTERM", "signal received"),
                    _ = tokio::signal::ctrl_c() => tracing::info!(signal = "SIGINT", "signal received"),
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; only SIGINT stops the server");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// `interlock serve`: bind with `args`, serve `reviewer` until SIGTERM or
/// SIGINT, then shut down gracefully. The caller builds the reviewer from
/// `args.policy` and `args.inventory` and initialises logging
/// ([`init_tracing`]).
pub async fn run(args: ServeOptions, reviewer: Arc<dyn Reviewer>) -> anyhow::Result<()> {
    // kube's client needs a process-wide provider; the server passes its own
    // explicitly. Installing twice is harmless (the error is ignored).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = Server::bind(ServerConfig::from(&args), reviewer).await?;
    server.serve(shutdown_signal()).await?;
    Ok(())
}
