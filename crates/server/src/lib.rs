//! rackflow's flow server: gRPC handlers, wire ⇄ domain conversion, health,
//! reflection, configuration, startup and shutdown order.
//!
//! Handlers are thin: `flow.rs` forwards each RPC to its handler in
//! [`rpc`], which converts the request (all validation lives in [`convert`]),
//! calls one engine method and converts the answer. Every error reaches the
//! wire through one mapping ([`error::to_status`]). The server never touches
//! the store: it opens it only to hand it to the engine.

mod audit;
pub mod config;
pub mod console;
pub mod convert;
pub mod error;
mod executor;
mod flow;
pub mod guard;
mod metrics;
mod rpc;
mod sim_admin;

use std::sync::Arc;
use std::time::Duration;

use rackflow_api::v1::flow_extensions_server::FlowExtensionsServer;
use rackflow_api::v1::flow_server::FlowServer;
use rackflow_engine::dispatcher::Dispatcher;
use rackflow_engine::executor::LocalExecutor;
use rackflow_engine::inventory::InventoryManager;
use rackflow_engine::rules::RuleManager;
use rackflow_engine::runs::RunManager;
use rackflow_engine::schedules::{ScheduleManager, SystemClock};
use rackflow_engine::sim::SimFleet;
use rackflow_engine::store::{DbTarget, Store};
use rackflow_engine::tasks::TaskManager;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use config::Config;

/// Startup or serving failure of the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("open database: {0}")]
    Store(#[from] rackflow_engine::store::StoreError),
    #[error("bind {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("rms provider: {0}")]
    RmsProvider(#[from] rackflow_engine::manager::rms::RmsProviderError),
    /// The configured task executor cannot be set up.
    #[error("task executor: {0}")]
    Executor(String),
    /// `[tls]` / `[authorization]` that cannot be served.
    #[error(transparent)]
    Security(#[from] rackflow_security::SecurityError),
    /// The compiled descriptors the request guard reads do not load (a
    /// build defect, never input).
    #[error("request guard: {0}")]
    Guard(#[from] prost_reflect::DescriptorError),
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
    let store = rackflow_engine::store::open_store(&db_target(&config)).await?;
    serve_on(config, store, listener, shutdown).await
}

/// Serves on an already-bound listener with an opened store (tests bind port 0).
pub async fn serve_on(
    config: Config,
    store: Arc<dyn Store>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    let fleet = SimFleet::new(config.sim.clone());
    serve_with_fleet(config, store, fleet, listener, shutdown).await
}

/// [`serve_on`] with a given simulated fleet (the demo and tests keep a
/// handle on it).
///
/// Startup order: task manager (recovery of interrupted tasks, promoter) →
/// dispatcher → schedule dispatcher → gRPC. Shutdown order: end open watch
/// streams, stop accepting and let in-flight RPCs finish (bounded by
/// `shutdown_grace_secs`) → watch loops → dispatcher → schedule
/// dispatcher → promoter and
/// executors (task rows are left as they are, so the next start resumes
/// them) → store.
pub async fn serve_with_fleet(
    config: Config,
    store: Arc<dyn Store>,
    fleet: Arc<SimFleet>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    let addr = listener.local_addr().ok();
    // Checked against the address actually bound (tests bind port 0).
    let edge = rackflow_security::ServerEdge::new(
        "flow",
        addr.unwrap_or(config.listen),
        &config.tls,
        &config.authorization,
    )?;
    // Everything that can refuse the start comes before any loop starts.
    let guard = Arc::new(guard::RequestGuard::new(&["v1.Flow", "v1.FlowExtensions"])?);
    let metrics_listener = bind_if(config.metrics.enabled, config.metrics.listen).await?;
    let console_listener = bind_if(config.console.enabled, config.console.listen).await?;
    let metrics = Arc::new(metrics::FlowMetrics::new(store.clone()));
    let keys = config.secrets.keys()?.map(Arc::new);
    let rack_manager = match config.provider {
        config::Provider::Sim => None,
        // The store and the BMC login serve ingest, decommission and the
        // AC power cycle, which register, deregister or reboot whole racks.
        config::Provider::Rms => Some(Arc::new(
            rackflow_engine::manager::rms::RmsManager::new(config.rms.clone())?
                .with_inventory(store.clone(), config.rms.bmc_login()?),
        )),
    };
    let bmc_login = match &rack_manager {
        Some(_) if config.rms.sync_on_start => Some(config.rms.bmc_login()?),
        _ => None,
    };
    let registry = Arc::new(match &rack_manager {
        None => fleet.registry(),
        Some(manager) => {
            tracing::info!(address = %config.rms.address, "component managers: rack manager (rms provider)");
            rackflow_engine::manager::ManagerRegistry::for_all_types(manager.clone())
        }
    });
    // Firmware credentials: sealed with the active data key, opened with
    // any configured one (a bad key file stopped the start above).
    match &keys {
        Some(keys) => tracing::info!(
            key = keys.active_id(),
            "firmware credentials are sealed at rest"
        ),
        None => tracing::warn!(
            "no data key (secrets.key_file): firmware authentication_data is refused"
        ),
    }
    let executor_config = config.tasks.executor();
    let durable = executor::durable(&config, &executor_config)?;
    let observer = rackflow_engine::inventory::StoreObserver::start(store.clone());
    let executor = Arc::new(
        LocalExecutor::new(registry.clone(), executor_config)
            .with_keys(keys.clone())
            .with_observer(Some(observer.clone()))
            .with_readiness(Some(Arc::new(
                rackflow_engine::inventory::StoreReadiness::new(store.clone()),
            ))),
    );
    let tasks = TaskManager::with_durable(
        store.clone(),
        executor,
        durable,
        registry,
        config.tasks.engine(),
        metrics.engine.clone(),
    );
    // The worker runs the activities of any replica's task workflows: it
    // polls before recovery hands this replica's tasks to Temporal.
    let worker = executor::Worker::start(&config, &tasks)?;
    // The rack manager knows the nodes before any task (a resumed one
    // included) addresses them. A failed sync does not stop the start.
    if let (Some(manager), Some(login)) = (&rack_manager, &bmc_login) {
        sync_rack_manager(store.as_ref(), manager, login).await;
    }
    tasks.spawn_promoter();
    match tasks.recover().await {
        Ok(0) => {}
        Ok(n) => tracing::info!(tasks = n, "resumed interrupted tasks"),
        Err(e) => {
            tracing::error!(error = %e, "task recovery failed; the lease loop adopts them later")
        }
    }
    tasks.spawn_leases();
    tracing::info!(owner = %tasks.owner(), "executing tasks as this owner");
    let dispatcher = Dispatcher::new(store.clone(), tasks.clone(), config.dispatcher.engine());
    if config.dispatcher.enabled {
        dispatcher.spawn();
    } else {
        tracing::warn!("dispatcher disabled: operation runs are not driven by this server");
    }

    let schedules = ScheduleManager::new(
        store.clone(),
        tasks.clone(),
        config.schedules.engine(),
        Arc::new(SystemClock),
    );
    if config.schedules.enabled {
        schedules.spawn();
    } else {
        tracing::warn!("schedule dispatcher disabled: task schedules do not fire on this server");
    }

    let audit = rackflow_engine::audit::AuditTrail::new(store.clone(), config.audit.engine());
    audit.spawn_pruner();
    let leaks =
        rackflow_engine::leaks::LeakManager::new(store.clone(), tasks.clone(), audit.clone())
            .with_metrics(metrics.engine.clone());
    // The provider's leak sources: the simulated fleet's detectors, or the
    // BMCs' through the rack manager.
    let leak_sources: Vec<Arc<dyn rackflow_engine::leaks::LeakSource>> = match &rack_manager {
        None => vec![fleet.clone()],
        Some(manager) => vec![Arc::new(manager.leak_source())],
    };
    // Even without sources: the loop also runs responses a crash left
    // undone.
    if config.leaks.detection {
        leaks.spawn_detector(
            leak_sources,
            config.leaks.interval(),
            std::time::Duration::from_millis(config.leaks.redrive_after_ms),
        );
    }
    let engine = rackflow_engine::Engine {
        tasks: tasks.clone(),
        dispatcher: dispatcher.clone(),
        schedules: schedules.clone(),
        audit: audit.clone(),
        leaks: leaks.clone(),
    };

    let runs = RunManager::new(store.clone(), config.planner.max_candidate_targets);
    // The console's live streams end as soon as shutdown starts.
    let console_stop = CancellationToken::new();
    let console_task = console_listener.map(|l| {
        let at = l.local_addr().unwrap_or(config.console.listen);
        tracing::info!(addr = %at, url = %format!("http://{at}/"), "web console listening");
        let console = console::Console {
            store: store.clone(),
            runs: runs.clone(),
            dispatcher: dispatcher.clone(),
            audit: engine.audit.clone(),
            schedules: schedules.clone(),
            stop: shutdown.child_token(),
        };
        tokio::spawn(console::serve(l, console, console_stop.clone()))
    });
    // Open watch streams end as soon as shutdown starts (else they would
    // hold the graceful stop up until the grace period runs out).
    let watches = rpc::watch::Watches::new(shutdown.child_token());
    let flow = Arc::new(flow::FlowService {
        guard: guard.clone(),
        audit,
        secrets: rackflow_engine::secrets::SecretKeeper::new(store.clone(), keys),
        inventory: InventoryManager::new(store.clone()).with_source(
            rack_manager
                .clone()
                .map(|m| m as Arc<dyn rackflow_engine::manager::InventorySource>),
        ),
        rules: RuleManager::new(store.clone()),
        event_rules: rackflow_engine::event_rules::EventRuleManager::new(store.clone()),
        leaks,
        runs,
        tasks: tasks.clone(),
        dispatcher: dispatcher.clone(),
        schedules,
        watches: watches.clone(),
        firmware_objects: rack_manager
            .as_ref()
            .map(|m| rpc::firmware_objects::FirmwareObjects {
                client: m.client(),
                version_entry: config.rms.version_entry.clone(),
            }),
    });
    // Fault injection exists only for the simulated fleet.
    let sim_admin = matches!(config.provider, config::Provider::Sim)
        .then(|| sim_admin::SimAdminService::new(fleet).into_server());

    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<FlowServer<flow::FlowService>>()
        .await;
    health_reporter
        .set_serving::<FlowExtensionsServer<flow::FlowService>>()
        .await;
    // Reflection lists exactly the services this server answers (the
    // descriptor set also holds the rack manager's).
    let mut reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(rackflow_api::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET);
    for service in [
        "v1.Flow",
        "v1.FlowExtensions",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
    ] {
        reflection = reflection.with_service_name(service);
    }
    if sim_admin.is_some() {
        reflection = reflection.with_service_name("rackflow.sim.v1.SimAdmin");
    }
    let reflection = reflection.build_v1()?;

    let metrics_stop = CancellationToken::new();
    let metrics_task = metrics_listener.map(|l| {
        let at = l.local_addr().unwrap_or(config.metrics.listen);
        tracing::info!(addr = %at, "flow metrics listening");
        tokio::spawn(rackflow_telemetry::http::serve(
            l,
            metrics.clone(),
            metrics_stop.clone(),
        ))
    });
    tracing::info!(addr = %addr.unwrap_or(config.listen), store = store.dialect(), "flow server listening");
    let grace = Duration::from_secs(config.shutdown_grace_secs);
    let stop = shutdown.clone();
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = edge.tls {
        builder = builder.tls_config(tls)?;
    }
    let server = builder
        .layer(
            edge.layer
                .with_denials(Arc::new(audit::Denials(engine.audit.clone())))
                .with_metrics(metrics.rpc.clone()),
        )
        .layer(guard::GuardLayer(guard))
        .add_service(health_service)
        .add_service(reflection)
        .add_service(FlowServer::from_arc(flow.clone()))
        .add_service(FlowExtensionsServer::from_arc(flow))
        .add_optional_service(sim_admin)
        .serve_with_incoming_shutdown(
            // TCP_NODELAY: a small unary reply must not wait for Nagle and
            // the peer's delayed ACK (up to ~40 ms per call).
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            async move { stop.cancelled().await },
        );
    tokio::pin!(server);
    let served = tokio::select! {
        result = &mut server => result,
        () = async { shutdown.cancelled().await; tokio::time::sleep(grace).await } => {
            tracing::warn!(grace_secs = grace.as_secs(), "in-flight RPCs did not finish in time; stopping");
            Ok(())
        }
    };
    health_reporter
        .set_not_serving::<FlowServer<flow::FlowService>>()
        .await;
    health_reporter
        .set_not_serving::<FlowExtensionsServer<flow::FlowService>>()
        .await;
    // Watch streams first: they only read, and end with UNAVAILABLE.
    watches.stop().await;
    // The worker stops polling while the task manager stops the attempts
    // it runs (they fail as "worker shutting down" and another worker
    // retries them).
    tokio::join!(worker.shutdown(), engine.shutdown());
    // After the executors: what they read back is written, then the writer
    // ends (before the store goes).
    observer.shutdown().await;
    console_stop.cancel();
    if let Some(task) = console_task {
        match task.await {
            Ok(Err(e)) => tracing::warn!(error = %e, "web console ended with an error"),
            Err(e) => tracing::warn!(error = %e, "web console ended abnormally"),
            Ok(Ok(())) => {}
        }
    }
    metrics_stop.cancel();
    if let Some(task) = metrics_task {
        match task.await {
            Ok(Err(e)) => tracing::warn!(error = %e, "metrics endpoint ended with an error"),
            Err(e) => tracing::warn!(error = %e, "metrics endpoint ended abnormally"),
            Ok(Ok(())) => {}
        }
    }
    tracing::info!("flow server stopped");
    served?;
    Ok(())
}

/// A listener on `at` when `enabled` (the `/metrics` and console ports,
/// bound before any loop starts so that a taken port refuses the start).
async fn bind_if(
    enabled: bool,
    at: std::net::SocketAddr,
) -> Result<Option<TcpListener>, ServerError> {
    if !enabled {
        return Ok(None);
    }
    TcpListener::bind(at)
        .await
        .map(Some)
        .map_err(|source| ServerError::Bind { addr: at, source })
}

/// `rms.sync_on_start`: registers the inventory with the rack manager and
/// logs what happened.
async fn sync_rack_manager(
    store: &dyn rackflow_engine::store::Store,
    manager: &rackflow_engine::manager::rms::RmsManager,
    login: &rackflow_engine::manager::rms_sync::BmcLogin,
) {
    let mut client = manager.client();
    match rackflow_engine::manager::rms_sync::sync_from_store(store, &mut client, login).await {
        Ok(outcome) => {
            if outcome.refused > 0 {
                tracing::warn!(sent = outcome.sent, registered = outcome.registered, refused = outcome.refused, skipped = outcome.skipped.len(), answers = ?outcome.messages, "inventory partly registered with the rack manager");
            } else {
                tracing::info!(
                    sent = outcome.sent,
                    registered = outcome.registered,
                    skipped = outcome.skipped.len(),
                    "inventory registered with the rack manager"
                );
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "registering the inventory with the rack manager failed; run `rackflow rms sync` once it answers")
        }
    }
}
