//! Which executor runs this server's tasks (`tasks.executor`): the local
//! one, or Temporal when the binary is built with the `temporal` feature.
//! Owns the Temporal worker's lifetime: started after the task manager,
//! stopped beside it.

use std::sync::Arc;
use std::time::Duration;

use rackflow_engine::executor::ExecutorConfig;
use rackflow_engine::tasks::{DurableExecutor, TaskManager};

use crate::ServerError;
use crate::config::{Config, ExecutorKind};

/// The durable executor the task manager hands tasks to, if any.
pub(crate) fn durable(
    config: &Config,
    executor: &ExecutorConfig,
) -> Result<Option<Arc<dyn DurableExecutor>>, ServerError> {
    match config.tasks.executor {
        ExecutorKind::Local => Ok(None),
        ExecutorKind::Temporal => temporal::executor(config, executor),
    }
}

/// This replica's worker, when tasks run on Temporal.
pub(crate) struct Worker(Option<temporal::Worker>);

impl Worker {
    pub(crate) fn start(config: &Config, tasks: &Arc<TaskManager>) -> Result<Worker, ServerError> {
        match config.tasks.executor {
            ExecutorKind::Local => Ok(Worker(None)),
            ExecutorKind::Temporal => Ok(Worker(Some(temporal::worker(config, tasks)?))),
        }
    }

    pub(crate) async fn shutdown(self) {
        if let Some(worker) = self.0 {
            temporal::shutdown(worker).await;
        }
    }
}

fn settings(config: &Config) -> TemporalSettings {
    let t = &config.temporal;
    TemporalSettings {
        address: t.address.clone(),
        namespace: t.namespace.clone(),
        task_queue: t.task_queue.clone(),
        heartbeat_timeout: Duration::from_secs(t.heartbeat_timeout_secs),
        sticky_timeout: Duration::from_secs(t.sticky_timeout_secs),
        max_concurrent_activities: t.max_concurrent_activities,
    }
}

#[cfg(feature = "temporal")]
use rackflow_temporal::TemporalSettings;

#[cfg(feature = "temporal")]
mod temporal {
    use super::*;

    pub(super) use rackflow_temporal::Worker;

    pub(super) fn executor(
        config: &Config,
        executor: &ExecutorConfig,
    ) -> Result<Option<Arc<dyn DurableExecutor>>, ServerError> {
        let settings = settings(config);
        tracing::info!(address = %settings.address, namespace = %settings.namespace, task_queue = %settings.task_queue, "tasks run as Temporal workflows");
        let durable = rackflow_temporal::TemporalExecutor::new(settings, executor)
            .map_err(|e| ServerError::Executor(e.to_string()))?;
        Ok(Some(Arc::new(durable)))
    }

    pub(super) fn worker(config: &Config, tasks: &Arc<TaskManager>) -> Result<Worker, ServerError> {
        Worker::spawn(settings(config), Arc::clone(tasks))
            .map_err(|e| ServerError::Executor(e.to_string()))
    }

    pub(super) async fn shutdown(worker: Worker) {
        worker.shutdown().await;
    }
}

/// What a binary built without the feature answers.
#[cfg(not(feature = "temporal"))]
mod temporal {
    use super::*;

    pub(super) enum Worker {}

    const MISSING: &str = "tasks.executor = \"temporal\" needs a rackflow built with the `temporal` feature (cargo build --release --features temporal); use tasks.executor = \"local\" otherwise";

    pub(super) fn executor(
        config: &Config,
        _executor: &ExecutorConfig,
    ) -> Result<Option<Arc<dyn DurableExecutor>>, ServerError> {
        let _ = settings(config);
        Err(ServerError::Executor(MISSING.into()))
    }

    pub(super) fn worker(
        _config: &Config,
        _tasks: &Arc<TaskManager>,
    ) -> Result<Worker, ServerError> {
        Err(ServerError::Executor(MISSING.into()))
    }

    pub(super) async fn shutdown(worker: Worker) {
        match worker {}
    }
}

/// The settings' shape without the feature (never used to connect).
#[cfg(not(feature = "temporal"))]
#[allow(dead_code)]
struct TemporalSettings {
    address: String,
    namespace: String,
    task_queue: String,
    heartbeat_timeout: Duration,
    sticky_timeout: Duration,
    max_concurrent_activities: usize,
}
