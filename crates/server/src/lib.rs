//! rackflow's flow server: gRPC handlers, wire ⇄ domain conversion, health,
//! reflection, configuration, startup and shutdown order.
//!
//! Handlers are thin: they convert the request (all validation lives in
//! [`convert`]), call the engine, and convert the answer. Every error reaches
//! the wire through one mapping ([`error::to_status`]).

pub mod config;
pub mod convert;
pub mod error;
mod flow;

use std::sync::Arc;
use std::time::Duration;

use rackflow_api::v1::flow_server::FlowServer;
use rackflow_engine::runs::RunManager;
use rackflow_store::{DbTarget, Store};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use config::Config;

/// Startup or serving failure of the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("open database: {0}")]
    Store(#[from] rackflow_store::StoreError),
    #[error("bind {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
}

/// Which database the configuration points at.
pub fn db_target(config: &Config) -> DbTarget {
    match &config.database.url {
        Some(url) => DbTarget::Postgres(url.clone()),
        None => DbTarget::Sqlite(config.database.sqlite_path.clone()),
    }
}

/// Opens the store, binds `config.listen` and serves until `shutdown` fires.
pub async fn serve(config: Config, shutdown: CancellationToken) -> Result<(), ServerError> {
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServerError::Bind {
            addr: config.listen,
            source,
        })?;
    let store = rackflow_store::open_store(&db_target(&config)).await?;
    serve_on(config, store, listener, shutdown).await
}

/// Serves on an already-bound listener with an opened store (tests bind port 0).
///
/// Shutdown order: stop accepting, let in-flight RPCs finish (bounded by
/// `shutdown_grace_secs`), then drop the store.
pub async fn serve_on(
    config: Config,
    store: Arc<dyn Store>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    let addr = listener.local_addr().ok();
    let runs = RunManager::new(store.clone(), config.planner.max_candidate_targets);
    let flow = flow::FlowService::new(store.clone(), runs);

    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<FlowServer<flow::FlowService>>()
        .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(rackflow_api::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;

    tracing::info!(?addr, store = store.dialect(), "flow server listening");
    let grace = Duration::from_secs(config.shutdown_grace_secs);
    let stop = shutdown.clone();
    let server = tonic::transport::Server::builder()
        .add_service(health_service)
        .add_service(reflection)
        .add_service(FlowServer::new(flow))
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            async move { stop.cancelled().await },
        );
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => result?,
        () = async { shutdown.cancelled().await; tokio::time::sleep(grace).await } => {
            tracing::warn!(grace_secs = grace.as_secs(), "in-flight RPCs did not finish in time; stopping");
        }
    }
    health_reporter
        .set_not_serving::<FlowServer<flow::FlowService>>()
        .await;
    tracing::info!("flow server stopped");
    Ok(())
}
