//! Log setup shared by every subcommand.

use tracing_subscriber::EnvFilter;

/// Install the global tracing subscriber: logs go to stderr, filtered by
/// `RUST_LOG` (default `info`), as one JSON object per line when `json`
/// (structured fields become JSON keys) or as text otherwise. Use
/// [`LogFormat::is_json`](super::cli::LogFormat::is_json) to decide `json`.
/// A second call is a no-op.
pub fn init_tracing(json: bool) {
    init_tracing_at(json, "info");
}

/// Logs to stderr at `default_level` unless `RUST_LOG` says otherwise: the
/// offline commands use `warn`, so the engine's warnings reach the user
/// without burying the report.
pub fn init_tracing_at(json: bool, default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init()
    } else {
        builder.try_init()
    };
}
