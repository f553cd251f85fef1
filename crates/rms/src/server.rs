//! Startup and shutdown of the rack manager: the node back end chosen by
//! configuration, the job tracker and its reaper, the gRPC service and the
//! `/metrics` endpoint.
//!
//! Shutdown order (spec §1.10): stop accepting RPCs and let in-flight ones
//! finish → `shutdown_and_await_terminal` (refuse new jobs, cancel active
//! leaves, wait up to `shutdown_timeout_seconds` for them to seal) → stop
//! the reaper and the metrics endpoint.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::backend::NodeBackend;
use crate::backend::redfish::{RedfishBackend, RedfishBackendError};
use crate::backend::sim::SimBackend;
use crate::config::{BackendKind, NodesConfig, RmsConfig};
use crate::job::JobTracker;
use crate::service::RackManagerService;

/// Startup or serving failure of the rack manager.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("bind {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("metrics endpoint: {0}")]
    Metrics(std::io::Error),
    #[error("node back end `redfish`: {0}")]
    Redfish(#[from] RedfishBackendError),
    /// `[tls]` / `[authorization]` that cannot be served.
    #[error(transparent)]
    Security(#[from] rackflow_security::SecurityError),
    /// The firmware-object catalogue cannot be opened.
    #[error(transparent)]
    Catalog(#[from] crate::catalog::CatalogError),
    /// The compiled descriptors do not load (a build defect, never input).
    #[error("gRPC reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
}

/// The services the rack manager answers: what reflection lists.
pub const SERVICES: [&str; 4] = [
    "rack_manager.RackManager",
    "rackflow.rms.v1.RackManagerExtensions",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
];

/// The back end the `[nodes]` section selects.
pub fn build_backend(config: &NodesConfig) -> Result<Arc<dyn NodeBackend>, ServerError> {
    match config.backend {
        BackendKind::Sim => Ok(Arc::new(SimBackend::new(config.sim.clone()))),
        BackendKind::Redfish => Ok(Arc::new(RedfishBackend::new(config.redfish.clone())?)),
    }
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, ServerError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })
}

/// Binds the configured addresses and serves until `shutdown` fires.
pub async fn serve(config: RmsConfig, shutdown: CancellationToken) -> Result<(), ServerError> {
    // Refuse unusable TLS / authorization settings before binding anything.
    let transport = config.tls.check(config.listen)?;
    config.authorization.policy(transport)?;
    let backend = build_backend(&config.nodes)?;
    let listener = bind(config.listen).await?;
    let metrics = if config.metrics.enabled {
        Some(bind(config.metrics.listen).await?)
    } else {
        None
    };
    serve_on(config, backend, listener, metrics, shutdown).await
}

/// Serves on already-bound listeners with a given back end (tests bind
/// port 0 and keep a handle on the sim).
pub async fn serve_on(
    config: RmsConfig,
    backend: Arc<dyn NodeBackend>,
    listener: TcpListener,
    metrics_listener: Option<TcpListener>,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    let edge = rackflow_security::ServerEdge::new(
        "rms",
        listener.local_addr().unwrap_or(config.listen),
        &config.tls,
        &config.authorization,
    )?;
    let metrics = Arc::new(crate::metrics::RmsMetrics::default());
    let tracker = Arc::new(
        JobTracker::builder()
            .limits(&config.workflows.job_limits())
            .metrics(Arc::clone(&metrics.workflows))
            .build(),
    );
    let reaper_stop = CancellationToken::new();
    let reaper = tracker.spawn_reaper(reaper_stop.clone());
    let metrics_stop = CancellationToken::new();
    let metrics_task = metrics_listener.map(|l| {
        let addr = l.local_addr().unwrap_or(config.metrics.listen);
        tracing::info!(%addr, "rack manager metrics listening");
        tokio::spawn(rackflow_telemetry::http::serve(
            l,
            metrics.clone(),
            metrics_stop.clone(),
        ))
    });
    let shutdown_timeout = config.workflows.shutdown_timeout();
    // Passwords travel only over TLS, unless the operator allowed plaintext.
    let credentials_allowed =
        edge.transport != rackflow_security::tls::Transport::Plaintext || config.tls.allow_insecure;
    let catalog = crate::catalog::Catalog::open(config.workflows.catalog_settings()).await?;
    let service = RackManagerService::new(Arc::clone(&tracker), backend.clone(), config.workflows)
        .accept_credentials(credentials_allowed)
        .with_catalog(Arc::clone(&catalog))
        .with_switch_backend(Arc::new(crate::switch::sim::SwitchSim::new(
            config.nodes.switch_sim.clone(),
        )));
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    set_health(&health_reporter, true).await;
    let mut reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(rackflow_api::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET);
    for name in SERVICES {
        reflection = reflection.with_service_name(name);
    }
    let reflection = reflection.build_v1()?;
    let addr = listener.local_addr().unwrap_or(config.listen);
    tracing::info!(%addr, backend = backend.kind(), "rack manager listening");
    let stop = shutdown.clone();
    let grace = std::time::Duration::from_secs(config.shutdown_grace_seconds);
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = edge.tls {
        builder = builder.tls_config(tls)?;
    }
    let server = builder
        .layer(edge.layer.with_metrics(Arc::clone(&metrics.rpc)))
        .add_service(health_service)
        .add_service(reflection)
        .add_service(service.clone().into_extensions_server())
        .add_service(service.into_server())
        .serve_with_incoming_shutdown(
            // TCP_NODELAY: without it every small unary response waits out
            // Nagle + delayed ACK (~40 ms per call on loopback).
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            async move { stop.cancelled().await },
        );
    tokio::pin!(server);
    // Idle client connections can hold a graceful stop open: bound it.
    let served = tokio::select! {
        result = &mut server => result,
        () = async { shutdown.cancelled().await; tokio::time::sleep(grace).await } => {
            tracing::warn!(grace_secs = grace.as_secs(), "in-flight RPCs did not finish in time; stopping");
            Ok(())
        }
    };
    set_health(&health_reporter, false).await;
    catalog.shutdown();
    let signalled = tracker.shutdown_and_await_terminal(shutdown_timeout).await;
    tracing::info!(signalled, "rack manager drained jobs");
    reaper_stop.cancel();
    if let Err(e) = reaper.await {
        tracing::warn!(error = %e, "job reaper ended abnormally");
    }
    metrics_stop.cancel();
    let metrics_result = match metrics_task {
        Some(task) => task.await.unwrap_or(Ok(())),
        None => Ok(()),
    };
    tracing::info!("rack manager stopped");
    served?;
    metrics_result.map_err(ServerError::Metrics)
}

/// Marks both of the rack manager's own services serving (or not).
async fn set_health(reporter: &tonic_health::server::HealthReporter, serving: bool) {
    use rackflow_api::rack_manager::rack_manager_server::RackManagerServer;
    use rackflow_api::rms_ext::v1::rack_manager_extensions_server::RackManagerExtensionsServer;
    if serving {
        reporter
            .set_serving::<RackManagerServer<RackManagerService>>()
            .await;
        reporter
            .set_serving::<RackManagerExtensionsServer<RackManagerService>>()
            .await;
    } else {
        reporter
            .set_not_serving::<RackManagerServer<RackManagerService>>()
            .await;
        reporter
            .set_not_serving::<RackManagerExtensionsServer<RackManagerService>>()
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_back_ends_build_and_a_bad_redfish_setting_is_reported() {
        let mut nodes = NodesConfig::default();
        assert_eq!(build_backend(&nodes).map(|b| b.kind()).ok(), Some("sim"));
        nodes.backend = BackendKind::Redfish;
        assert_eq!(
            build_backend(&nodes).map(|b| b.kind()).ok(),
            Some("redfish")
        );
        nodes.redfish.ca_cert_file = Some("/nonexistent/ca.pem".into());
        let err = build_backend(&nodes).err().map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e
                .starts_with("node back end `redfish`: read CA certificate /nonexistent/ca.pem")),
            "{err:?}"
        );
    }

    /// A redfish-backed server starts from its TOML, answers on its port,
    /// and stops on shutdown.
    #[tokio::test]
    async fn a_redfish_backed_server_starts_and_stops() {
        let free = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port");
        let config: RmsConfig = toml::from_str(&format!(
            "listen = \"{free}\"\nshutdown_grace_seconds = 1\n\
             [metrics]\nenabled = false\n\
             [workflows]\nshutdown_timeout_seconds = 1\n\
             [nodes]\nbackend = \"redfish\"\n\
             [nodes.redfish]\nscheme = \"http\"\npower_poll_interval_ms = 100\n"
        ))
        .expect("config");
        let stop = CancellationToken::new();
        let server = tokio::spawn(serve(config, stop.clone()));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while tokio::net::TcpStream::connect(free).await.is_err() {
            assert!(!server.is_finished(), "server exited early: {server:?}");
            assert!(std::time::Instant::now() < deadline, "never listened");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        stop.cancel();
        let served = server.await.expect("join");
        assert!(served.is_ok(), "{served:?}");
    }
}
