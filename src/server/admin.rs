//! A plain-HTTP admin endpoint (`/metrics`, `/healthz`, `/readyz`) that any
//! long-running process can serve, with or without the TLS webhook: the
//! controller runs it alone. Nothing here reads a request body, so it needs
//! no TLS and no limits beyond the connection's.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;

/// What the admin endpoint asks of its process.
pub trait Health: Send + Sync {
    /// `/readyz`: whether the process does its job now.
    fn ready(&self) -> bool;
}

#[derive(Clone)]
struct AdminState {
    registry: Arc<Registry>,
    health: Arc<dyn Health>,
}

/// The admin routes over `registry` (encoded on each scrape).
pub fn router(registry: Arc<Registry>, health: Arc<dyn Health>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(AdminState { registry, health })
}

/// Binds the admin endpoint's address. Separate from [`serve`] so that a
/// process can fail at start on an address it cannot bind, instead of
/// running on without probes or metrics.
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, super::ServerError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| super::ServerError::Bind { addr, source })
}

/// Serves the admin routes on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    registry: Arc<Registry>,
    health: Arc<dyn Health>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    tracing::info!(addr = %listener.local_addr()?, "admin endpoint listening (/metrics, /healthz, /readyz)");
    axum::serve(listener, router(registry, health))
        .with_graceful_shutdown(shutdown)
        .await
}

async fn metrics(State(s): State<AdminState>) -> impl IntoResponse {
    let mut out = String::new();
    match prometheus_client::encoding::text::encode(&mut out, &s.registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            out,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn readyz(State(s): State<AdminState>) -> impl IntoResponse {
    if s.health.ready() {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}
