//! What `interlock serve` is configured with, as plain options (the
//! command line parses them: `cli/args.rs`), and their defaults.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Default request body limit: two objects at etcd's 1.5 MiB limit
/// (`object` and `oldObject` of an UPDATE).
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Default connection cap. An idle TLS connection costs about 40 KiB
/// (15,000 held 612 MiB in the issue-17 probe): 4096 bound that to about
/// 170 MiB, while kube-apiserver replicas open a few connections each.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// Default cap per peer address: a kube-apiserver replica holds a handful
/// of connections to a webhook (HTTP/2 multiplexes its requests), so 256
/// leaves it ample room while one flooding client can take at most a
/// sixteenth of the default `--max-connections`.
pub const DEFAULT_MAX_CONNECTIONS_PER_SOURCE: usize = 256;

/// Default `--tls-expiry-margin`: a certificate that close to its expiry
/// means its rotation failed (cert-manager renews at two thirds of the
/// lifetime, kubelet publishes a Secret within a minute or two), and the
/// margin covers clock skew between the webhook and kube-apiserver.
pub const DEFAULT_TLS_EXPIRY_MARGIN: Duration = Duration::from_secs(3600);

/// `interlock serve`: the TLS admission webhook.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// PEM certificate chain served to clients (re-read when it changes).
    pub tls_cert: PathBuf,

    /// PEM private key of the serving certificate (re-read when it changes).
    pub tls_key: PathBuf,

    /// Address and port to listen on.
    pub listen: SocketAddr,

    /// PEM CA bundle: require client certificates signed by it.
    pub client_ca: Option<PathBuf>,

    /// Policy file or directory (repeatable). Without it the bundled library is used.
    pub policy: Vec<PathBuf>,

    /// Serve from these manifest files or directories instead of a live cluster.
    pub inventory: Vec<PathBuf>,

    /// Serve even when the policy files hold no policy (the webhook then
    /// allows everything); without it an empty set is refused at start and
    /// on reload.
    pub allow_empty: bool,

    /// Largest accepted request body in bytes; larger bodies get 413.
    pub max_body_bytes: usize,

    /// Deadline per admission request (body read, queueing and evaluation);
    /// keep it below the webhook's timeoutSeconds.
    pub request_timeout: Duration,

    /// Admission requests evaluated or queued at once; more wait for a slot
    /// (within the request deadline).
    pub max_concurrent_requests: usize,

    /// Threads that parse and evaluate admission requests (at least one;
    /// the async workers never evaluate, so /healthz answers whatever
    /// evaluation does). Default: one per CPU.
    pub eval_threads: Option<usize>,

    /// Close a connection that has had no request in flight for this long
    /// (HTTP/1.1: closed; HTTP/2: GOAWAY). Longer than the 90 s after which
    /// Go clients (kube-apiserver) drop idle connections themselves, so the
    /// apiserver's own connections are normally closed by the apiserver.
    /// A connection that has not sent its first request head, and an
    /// HTTP/1.1 connection waiting for the next one, are closed sooner,
    /// after the handshake timeout.
    pub idle_timeout: Duration,

    /// Most client connections open at once; a connection past it is closed
    /// at once (logged, counted in
    /// interlock_refused_connections_total{reason="max_connections"}).
    pub max_connections: usize,

    /// Most client connections open at once from one address; a connection
    /// past it is closed at once (logged, counted in
    /// interlock_refused_connections_total{reason="max_connections_per_source"}).
    pub max_connections_per_source: usize,

    /// Time allowed for a TLS handshake, and then for each request head
    /// (the first one on every connection, later ones on HTTP/1.1): a
    /// connection that sends nothing after its handshake is closed after it.
    pub tls_handshake_timeout: Duration,

    /// How often the certificate and key files are compared with what is served.
    pub cert_poll_interval: Duration,

    /// Report unready (/readyz 503, with the reason, and one log line) while
    /// the serving certificate is expired, not yet valid, or expires within
    /// this margin; its expiry is exported as
    /// interlock_tls_certificate_expiry_timestamp_seconds.
    pub tls_expiry_margin: Duration,

    /// After SIGTERM, keep accepting (while /readyz answers 503) for this long,
    /// so endpoints are removed before the listener closes.
    pub shutdown_delay: Duration,

    /// After the listener closes, wait at most this long for in-flight requests.
    pub shutdown_timeout: Duration,

    /// Log format: `json`, `text`, or `auto` (JSON when stderr is not a terminal).
    pub log_format: LogFormat,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// JSON when stderr is not a terminal (a container), text otherwise.
    Auto,
    /// One JSON object per line.
    Json,
    /// Human-readable text.
    Text,
}

impl LogFormat {
    /// Whether this format means JSON on the current stderr.
    pub fn is_json(self) -> bool {
        use std::io::IsTerminal;
        match self {
            LogFormat::Json => true,
            LogFormat::Text => false,
            LogFormat::Auto => !std::io::stderr().is_terminal(),
        }
    }
}
