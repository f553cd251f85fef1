//! The Prometheus `/metrics` endpoint (spec §1.15): serves the tracker's
//! workflow metrics (`rms_workflows_counts_total`, `rms_workflows_in_flight`)
//! in the text exposition format over plain HTTP.
//!
//! Built on `axum`, which tonic already brings into the dependency tree, so
//! the endpoint adds no new crate to the build.

use std::sync::Arc;

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::job::WorkflowMetrics;

/// Content type of the Prometheus text format.
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The metrics router: `GET /metrics`; anything else is 404.
pub fn router(metrics: Arc<WorkflowMetrics>) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let metrics = Arc::clone(&metrics);
            async move { ([(CONTENT_TYPE, TEXT_FORMAT)], metrics.encode_text()) }
        }),
    )
}

/// Serves `/metrics` on `listener` until `shutdown` fires.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<WorkflowMetrics>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(metrics))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}
