//! Log setup shared by every subcommand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tracing_subscriber::EnvFilter;

/// Install the global tracing subscriber: logs go to stderr, filtered by
/// `RUST_LOG` (default `info`), as one JSON object per line when `json`
/// (structured fields become JSON keys) or as text otherwise. Use
/// [`LogFormat::is_json`](super::options::LogFormat::is_json) to decide `json`.
/// rustls logs a warning per failed handshake (through the `log` crate):
/// those pass at most once per [`RateLimit::INTERVAL`], the server's own
/// rate-limited "TLS handshake failed" line counting the rest. A second
/// call is a no-op.
pub fn init_tracing(json: bool) {
    init_tracing_at(json, "info");
}

/// Logs to stderr at `default_level` unless `RUST_LOG` says otherwise: the
/// offline commands use `warn`, so the engine's warnings reach the user
/// without burying the report. rustls's warnings are rate-limited as in
/// [`init_tracing`].
pub fn init_tracing_at(json: bool, default_level: &str) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    static RUSTLS: RateLimit = RateLimit::new();
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    // Consulted after the level filter, so debug lines that would not be
    // written do not use up the allowance.
    let rustls = tracing_subscriber::filter::filter_fn(|meta| {
        !meta.target().starts_with("rustls") || RUSTLS.allow().is_some()
    });
    let registry = tracing_subscriber::registry().with(rustls).with(filter);
    let _ = if json {
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_writer(std::io::stderr),
            )
            .try_init()
    } else {
        registry
            .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
            .try_init()
    };
}

/// At most one log line per [`RateLimit::INTERVAL`] from one call site,
/// with the count of lines it held back: for warnings a client can trigger
/// thousands of times a second (failed handshakes, runaway expressions,
/// `accept` failing while file descriptors are exhausted).
pub(crate) struct RateLimit {
    /// Milliseconds since [`epoch`] before which lines are held back.
    next_ms: AtomicU64,
    suppressed: AtomicU64,
}

impl RateLimit {
    pub(crate) const INTERVAL: Duration = Duration::from_secs(10);

    pub(crate) const fn new() -> Self {
        RateLimit {
            next_ms: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// `Some(lines held back since the last one)` when a line may be logged now.
    pub(crate) fn allow(&self) -> Option<u64> {
        let now = epoch().elapsed().as_millis() as u64;
        let next = self.next_ms.load(Ordering::Relaxed);
        if now >= next
            && self
                .next_ms
                .compare_exchange(
                    next,
                    now + Self::INTERVAL.as_millis() as u64,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            Some(self.suppressed.swap(0, Ordering::Relaxed))
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

#[cfg(test)]
#[path = "logging_tests.rs"]
mod tests;
