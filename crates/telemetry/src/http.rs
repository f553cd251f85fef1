//! The `/metrics` endpoint both services serve on their own plain HTTP
//! listener: `GET /metrics` answers the service's [`Exposition`]; anything
//! else is 404.

use std::sync::Arc;

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use futures_util::future::BoxFuture;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Content type of the OpenMetrics text format.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What a service exposes: the text of every family, after whatever
/// refresh a scrape needs (e.g. gauges read from the database).
pub trait Exposition: Send + Sync + 'static {
    fn render(&self) -> BoxFuture<'_, String>;
}

/// A registry as it stands is an exposition.
impl Exposition for Registry {
    fn render(&self) -> BoxFuture<'_, String> {
        Box::pin(async move { encode(self) })
    }
}

/// The OpenMetrics text of `registry`.
pub fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, registry);
    text
}

/// `GET /metrics`; anything else is 404.
pub fn router(exposition: Arc<dyn Exposition>) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let exposition = Arc::clone(&exposition);
            async move { ([(CONTENT_TYPE, OPENMETRICS)], exposition.render().await) }
        }),
    )
}

/// Serves `/metrics` on `listener` until `shutdown` fires.
pub async fn serve(
    listener: TcpListener,
    exposition: Arc<dyn Exposition>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(exposition))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}
