//! The Flow server's Prometheus endpoint: `GET /metrics` on its own plain
//! HTTP listener (`[metrics]`), the engine's registry in the OpenMetrics
//! text format (see `rackflow_engine::metrics` for the families).

use std::sync::Arc;

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use rackflow_engine::metrics::Metrics;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Content type of the OpenMetrics text format.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `GET /metrics`; anything else is 404.
fn router(metrics: Arc<Metrics>) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let metrics = Arc::clone(&metrics);
            async move { ([(CONTENT_TYPE, OPENMETRICS)], metrics.encode()) }
        }),
    )
}

/// Serves `/metrics` on `listener` until `shutdown` fires.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(metrics))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}
