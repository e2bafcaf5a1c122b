//! Command-line arguments of `interlock serve` and `interlock certs`, as
//! clap `Args` structs that `main.rs` mounts as subcommands.

use crate::k8s::duration::parse as parse_duration;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

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
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// PEM certificate chain served to clients (re-read when it changes).
    #[arg(long, value_name = "FILE", env = "INTERLOCK_TLS_CERT")]
    pub tls_cert: PathBuf,

    /// PEM private key of the serving certificate (re-read when it changes).
    #[arg(long, value_name = "FILE", env = "INTERLOCK_TLS_KEY")]
    pub tls_key: PathBuf,

    /// Address and port to listen on.
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "0.0.0.0:8443",
        env = "INTERLOCK_LISTEN"
    )]
    pub listen: SocketAddr,

    /// PEM CA bundle: require client certificates signed by it.
    #[arg(long, value_name = "FILE", env = "INTERLOCK_CLIENT_CA")]
    pub client_ca: Option<PathBuf>,

    /// Policy file or directory (repeatable). Without it the bundled library is used.
    #[arg(short = 'p', long = "policy", value_name = "PATH")]
    pub policy: Vec<PathBuf>,

    /// Serve from these manifest files or directories instead of a live cluster.
    #[arg(long, value_name = "PATH")]
    pub inventory: Vec<PathBuf>,

    /// Serve even when the policy files hold no policy (the webhook then
    /// allows everything); without it an empty set is refused at start and
    /// on reload.
    #[arg(long)]
    pub allow_empty: bool,

    /// Largest accepted request body in bytes; larger bodies get 413.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,

    /// Deadline per admission request (body read, queueing and evaluation);
    /// keep it below the webhook's timeoutSeconds.
    #[arg(long, value_name = "DURATION", default_value = "4s", value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// Admission requests evaluated or queued at once; more wait for a slot
    /// (within the request deadline).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_concurrent_requests: usize,

    /// Threads that parse and evaluate admission requests (at least one;
    /// the async workers never evaluate, so /healthz answers whatever
    /// evaluation does). Default: one per CPU.
    #[arg(long, value_name = "N")]
    pub eval_threads: Option<usize>,

    /// Close a connection that has had no request in flight for this long
    /// (HTTP/1.1: closed; HTTP/2: GOAWAY). Longer than the 90 s after which
    /// Go clients (kube-apiserver) drop idle connections themselves, so the
    /// apiserver's own connections are normally closed by the apiserver.
    /// A connection that has not sent its first request head, and an
    /// HTTP/1.1 connection waiting for the next one, are closed sooner,
    /// after the handshake timeout.
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = parse_duration)]
    pub idle_timeout: Duration,

    /// Most client connections open at once; a connection past it is closed
    /// at once (logged, counted in
    /// interlock_refused_connections_total{reason="max_connections"}).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,

    /// Most client connections open at once from one address; a connection
    /// past it is closed at once (logged, counted in
    /// interlock_refused_connections_total{reason="max_connections_per_source"}).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS_PER_SOURCE)]
    pub max_connections_per_source: usize,

    /// Time allowed for a TLS handshake, and then for each request head
    /// (the first one on every connection, later ones on HTTP/1.1): a
    /// connection that sends nothing after its handshake is closed after it.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub tls_handshake_timeout: Duration,

    /// How often the certificate and key files are compared with what is served.
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = parse_duration)]
    pub cert_poll_interval: Duration,

    /// Report unready (/readyz 503, with the reason, and one log line) while
    /// the serving certificate is expired, not yet valid, or expires within
    /// this margin; its expiry is exported as
    /// interlock_tls_certificate_expiry_timestamp_seconds.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = parse_duration)]
    pub tls_expiry_margin: Duration,

    /// After SIGTERM, keep accepting (while /readyz answers 503) for this long,
    /// so endpoints are removed before the listener closes.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse_duration)]
    pub shutdown_delay: Duration,

    /// After the listener closes, wait at most this long for in-flight requests.
    #[arg(long, value_name = "DURATION", default_value = "20s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,

    /// Log format: `json`, `text`, or `auto` (JSON when stderr is not a terminal).
    #[arg(long, value_enum, default_value_t = LogFormat::Auto, env = "INTERLOCK_LOG_FORMAT")]
    pub log_format: LogFormat,
}

/// `interlock certs`: a CA and a serving certificate for the webhook.
#[derive(Debug, Clone, Args)]
pub struct CertsArgs {
    /// Directory to write ca.crt, tls.crt and tls.key into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// DNS name or IP address the serving certificate is valid for (repeatable;
    /// IPs become IP SANs, names DNS SANs).
    #[arg(long = "host", value_name = "NAME_OR_IP", required = true, num_args = 1..)]
    pub hosts: Vec<String>,

    /// Validity of the serving certificate, in days.
    #[arg(long, value_name = "DAYS", default_value_t = 365)]
    pub days: u32,

    /// Validity of the CA certificate, in days.
    #[arg(long, value_name = "DAYS", default_value_t = 3650)]
    pub ca_days: u32,

    /// Overwrite existing files in DIR (each file is replaced atomically).
    #[arg(long)]
    pub force: bool,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: Cmd,
    }
    #[derive(clap::Subcommand)]
    enum Cmd {
        Serve(Box<ServeArgs>),
        Certs(CertsArgs),
    }

    #[test]
    fn serve_defaults() {
        let cli = Cli::try_parse_from([
            "interlock",
            "serve",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
            "-p",
            "a",
            "-p",
            "b",
        ])
        .expect("parses");
        let Cmd::Serve(a) = cli.cmd else {
            panic!("not serve")
        };
        assert_eq!(a.listen, "0.0.0.0:8443".parse().expect("addr"));
        assert_eq!(a.max_body_bytes, 3 * 1024 * 1024);
        assert_eq!(a.policy.len(), 2);
        assert_eq!(a.request_timeout, Duration::from_secs(4));
        assert!(a.client_ca.is_none());
    }

    #[test]
    fn duration_flags_take_go_syntax_and_name_the_flag_when_wrong() {
        let serve = |timeout: &str| {
            let args = ["interlock", "serve", "--tls-cert", "c", "--tls-key", "k"];
            Cli::try_parse_from(args.into_iter().chain(["--request-timeout", timeout]))
        };
        let Cmd::Serve(a) = serve("1m30s").expect("parses").cmd else {
            panic!("not serve")
        };
        assert_eq!(a.request_timeout, Duration::from_secs(90));
        let err = serve("4parsecs").err().expect("refused").to_string();
        assert!(err.contains("--request-timeout"), "{err}");
        assert!(err.contains("\"4parsecs\""), "{err}");
    }

    #[test]
    fn certs_hosts() {
        let cli = Cli::try_parse_from([
            "interlock",
            "certs",
            "--out",
            "d",
            "--host",
            "a.svc",
            "127.0.0.1",
            "--host",
            "b",
        ])
        .expect("parses");
        let Cmd::Certs(a) = cli.cmd else {
            panic!("not certs")
        };
        assert_eq!(a.hosts, ["a.svc", "127.0.0.1", "b"]);
        assert!(Cli::try_parse_from(["interlock", "certs", "--out", "d"]).is_err());
    }
}
