//! rackflow's `temporal` executor (decision C2): every task is a Temporal
//! workflow ([`workflow::TaskWorkflow`]) whose activities call the
//! component managers ([`activities::TaskActivities`]), and every rackflow
//! replica is a Temporal worker on one task queue.
//!
//! Two halves, wired by the server when `tasks.executor = "temporal"`:
//! - [`TemporalExecutor`], the task manager's [`DurableExecutor`]: starts a
//!   task's workflow (workflow id = the task id, so a second start is a
//!   no-op) and cancels it;
//! - [`Worker`], this replica's worker, on a thread of its own (workflow
//!   code is not `Send`), whose activities work on the server's runtime.
//!
//! Operation runs and schedules keep their row-locked loops in the store;
//! only task execution moves to Temporal.

pub mod activities;
pub mod floor;
pub mod workflow;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rackflow_engine::executor::{ExecutorConfig, TaskJob};
use rackflow_engine::tasks::{DurableError, DurableExecutor, TaskManager};
use temporalio_client::errors::{WorkflowInteractionError, WorkflowStartError};
use temporalio_client::{
    Client, ClientOptions, Connection, ConnectionOptions, WorkflowCancelOptions,
    WorkflowIdReusePolicy, WorkflowStartOptions,
};
use temporalio_sdk::runtime::worker_tuner::{FixedSizeSlotSupplier, TunerHolder};
use temporalio_sdk::{Runtime, WorkerOptions};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::activities::TaskActivities;
use crate::workflow::{TaskInput, TaskWorkflow, WorkflowSettings};

/// The executor name written on the tasks it runs.
pub const EXECUTOR_KIND: &str = "temporal";

/// Where the Temporal cluster is and how this replica uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct TemporalSettings {
    /// The frontend, e.g. `http://127.0.0.1:7233`.
    pub address: String,
    pub namespace: String,
    /// The task queue of the task workflows and their activities.
    pub task_queue: String,
    /// A worker that stops heartbeating an attempt for this long loses it
    /// to another worker.
    pub heartbeat_timeout: Duration,
    /// A workflow task sent to a worker that died is given to another
    /// after this long.
    pub sticky_timeout: Duration,
    /// Action attempts (and local activities) this worker runs at once.
    /// An attempt mostly waits on hardware (a firmware update takes
    /// minutes), so this is far above the SDK's default of 100 — which
    /// would cap one worker at 100 concurrent steps.
    pub max_concurrent_activities: usize,
}

/// Why the Temporal executor could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TemporalError {
    #[error("temporal address {address:?}: {message}")]
    Address { address: String, message: String },
    #[error("temporal worker: {0}")]
    Worker(String),
}

/// The settings the workflow carries in its input.
fn workflow_settings(settings: &TemporalSettings, config: &ExecutorConfig) -> WorkflowSettings {
    WorkflowSettings {
        heartbeat_timeout: settings.heartbeat_timeout,
        default_step_timeout: config.default_step_timeout,
        default_retry: config.default_retry.clone(),
    }
}

fn connection_options(settings: &TemporalSettings) -> Result<ConnectionOptions, TemporalError> {
    let url = url::Url::from_str(&settings.address).map_err(|e| TemporalError::Address {
        address: settings.address.clone(),
        message: e.to_string(),
    })?;
    Ok(ConnectionOptions::new(url)
        .identity(format!("rackflow/{}", std::process::id()))
        .build())
}

/// Connects a client (fails at once when the cluster does not answer).
async fn connect(settings: &TemporalSettings) -> Result<Client, DurableError> {
    let options = connection_options(settings).map_err(|e| DurableError::Refused(e.to_string()))?;
    let connection = Connection::connect(options)
        .await
        .map_err(|e| DurableError::Unavailable(format!("connect {}: {e}", settings.address)))?;
    Client::new(
        connection,
        ClientOptions::new(settings.namespace.clone()).build(),
    )
    .map_err(|e| DurableError::Refused(e.to_string()))
}

/// The task manager's handle on Temporal: starts and cancels workflows.
/// Connects on first use and again after the cluster was unreachable.
pub struct TemporalExecutor {
    settings: TemporalSettings,
    workflow: WorkflowSettings,
    client: OnceCell<Client>,
}

impl TemporalExecutor {
    pub fn new(settings: TemporalSettings, config: &ExecutorConfig) -> Result<Self, TemporalError> {
        connection_options(&settings)?;
        Ok(TemporalExecutor {
            workflow: workflow_settings(&settings, config),
            settings,
            client: OnceCell::new(),
        })
    }

    async fn client(&self) -> Result<&Client, DurableError> {
        self.client
            .get_or_try_init(|| connect(&self.settings))
            .await
    }
}

/// The workflow id of a task: its id, as in the reference.
pub fn workflow_id(task_id: Uuid) -> String {
    task_id.to_string()
}

#[async_trait]
impl DurableExecutor for TemporalExecutor {
    fn kind(&self) -> &'static str {
        EXECUTOR_KIND
    }

    fn execution_id(&self, task_id: Uuid) -> String {
        workflow_id(task_id)
    }

    async fn start(&self, job: &TaskJob) -> Result<(), DurableError> {
        let client = self.client().await?;
        let input = TaskInput::from_job(job, self.workflow.clone());
        // A closed workflow of the task may run again only if it did not
        // complete: the row says running, so its last run was lost.
        let options =
            WorkflowStartOptions::new(self.settings.task_queue.clone(), workflow_id(job.task_id))
                .id_reuse_policy(WorkflowIdReusePolicy::AllowDuplicateFailedOnly)
                .build();
        match client
            .start_workflow(TaskWorkflow::run, input, options)
            .await
        {
            Ok(_) => {
                tracing::info!(task_id = %job.task_id, task_queue = %self.settings.task_queue, "task workflow started");
                Ok(())
            }
            Err(WorkflowStartError::AlreadyStarted { .. }) => Ok(()),
            Err(WorkflowStartError::Rpc(status)) => Err(rpc_error(&status)),
            Err(e) => Err(DurableError::Refused(e.to_string())),
        }
    }

    async fn cancel(&self, task_id: Uuid) -> Result<(), DurableError> {
        let client = self.client().await?;
        let handle = client.get_workflow_handle::<TaskWorkflow>(workflow_id(task_id));
        let options = WorkflowCancelOptions::builder()
            .reason("Cancelled by user".to_string())
            .build();
        match handle.cancel(options).await {
            Ok(()) | Err(WorkflowInteractionError::NotFound(_)) => Ok(()),
            Err(WorkflowInteractionError::Rpc(status)) => Err(rpc_error(&status)),
            Err(e) => Err(DurableError::Refused(e.to_string())),
        }
    }
}

fn rpc_error(status: &tonic::Status) -> DurableError {
    use tonic::Code;
    match status.code() {
        Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown => {
            DurableError::Unavailable(status.message().to_string())
        }
        _ => DurableError::Refused(status.message().to_string()),
    }
}

/// The worker's shutdown trigger, set by the worker thread once it exists.
type Slot<T> = std::sync::Mutex<Option<T>>;

/// This replica's Temporal worker, on its own thread.
pub struct Worker {
    stop: CancellationToken,
    shutdown: Arc<Slot<Box<dyn Fn() + Send + Sync>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Worker {
    /// Starts the worker: it connects (retrying until the cluster answers
    /// or [`Worker::shutdown`]) and polls `settings.task_queue` for task
    /// workflows and their activities, which run on `manager`'s runtime.
    pub fn spawn(
        settings: TemporalSettings,
        manager: Arc<TaskManager>,
    ) -> Result<Worker, TemporalError> {
        let server = tokio::runtime::Handle::current();
        let (queue, heartbeat, sticky, slots) = (
            settings.task_queue.clone(),
            settings.heartbeat_timeout,
            settings.sticky_timeout,
            settings.max_concurrent_activities,
        );
        Worker::spawn_with(settings, move || {
            let options = WorkerOptions::new(queue)
                .register_workflow::<TaskWorkflow>()
                .map_err(|e| format!("task workflow not registered: {e}"))?;
            Ok(options
                .register_activities(TaskActivities::new(manager, server, heartbeat))
                .sticky_queue_schedule_to_start_timeout(sticky)
                .tuner(tuner(slots))
                .build())
        })
    }

    /// A worker on its own thread and runtime (the SDK's workflows are not
    /// `Send`) with the options `build` makes there; connects with retry.
    pub(crate) fn spawn_with(
        settings: TemporalSettings,
        build: impl FnOnce() -> Result<WorkerOptions, String> + Send + 'static,
    ) -> Result<Worker, TemporalError> {
        connection_options(&settings)?;
        let stop = CancellationToken::new();
        let shutdown: Arc<Slot<Box<dyn Fn() + Send + Sync>>> = Arc::new(Slot::new(None));
        let (thread_stop, thread_shutdown) = (stop.clone(), Arc::clone(&shutdown));
        let thread = std::thread::Builder::new()
            .name("temporal-worker".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!(error = %e, "temporal worker runtime not started");
                        return;
                    }
                };
                runtime.block_on(run_worker(settings, build, thread_stop, thread_shutdown));
            })
            .map_err(|e| TemporalError::Worker(e.to_string()))?;
        Ok(Worker {
            stop,
            shutdown,
            thread: Some(thread),
        })
    }

    /// Stops polling, lets running activities end, and waits for the
    /// worker thread.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        if let Ok(slot) = self.shutdown.lock()
            && let Some(initiate) = slot.as_ref()
        {
            initiate();
        }
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

/// Slots of a worker: the SDK's 100 workflow tasks, `activities` action
/// attempts and as many local activities (report saves, outcomes).
fn tuner(activities: usize) -> TunerHolder {
    TunerHolder::builder()
        .workflow_task_slot_supplier(FixedSizeSlotSupplier::new(WORKFLOW_TASK_SLOTS))
        .activity_task_slot_supplier(FixedSizeSlotSupplier::new(activities.max(1)))
        .local_activity_task_slot_supplier(FixedSizeSlotSupplier::new(activities.max(1)))
        .nexus_task_slot_supplier(FixedSizeSlotSupplier::new(1))
        .build()
}

/// The SDK's default.
const WORKFLOW_TASK_SLOTS: usize = 100;

async fn run_worker(
    settings: TemporalSettings,
    build: impl FnOnce() -> Result<WorkerOptions, String>,
    stop: CancellationToken,
    shutdown: Arc<Slot<Box<dyn Fn() + Send + Sync>>>,
) {
    let runtime = match Runtime::from_current_tokio(Default::default()) {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!(error = %e, "temporal runtime not started");
            return;
        }
    };
    let mut pause = Duration::from_millis(200);
    let client = loop {
        match connect(&settings).await {
            Ok(client) => break client,
            Err(e) => {
                tracing::warn!(error = %e, "temporal worker cannot connect; retrying");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(pause) => {}
                }
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        }
    };
    let options = match build() {
        Ok(options) => options,
        Err(e) => {
            tracing::error!(error = %e, "temporal worker not configured");
            return;
        }
    };
    let mut worker = match temporalio_sdk::Worker::new(&runtime, client, options) {
        Ok(worker) => worker,
        Err(e) => {
            tracing::error!(error = %e, "temporal worker not created");
            return;
        }
    };
    let initiate = worker.shutdown_handle();
    if let Ok(mut slot) = shutdown.lock() {
        *slot = Some(Box::new(initiate));
    }
    if stop.is_cancelled() {
        return;
    }
    tracing::info!(task_queue = %settings.task_queue, address = %settings.address, "temporal worker polling");
    if let Err(e) = worker.run().await {
        tracing::error!(error = %e, "temporal worker stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(address: &str) -> TemporalSettings {
        TemporalSettings {
            address: address.into(),
            namespace: "default".into(),
            task_queue: "q".into(),
            heartbeat_timeout: Duration::from_secs(10),
            sticky_timeout: Duration::from_secs(3),
            max_concurrent_activities: 1000,
        }
    }

    #[test]
    fn a_bad_address_is_refused_at_start_naming_it() {
        let err = TemporalExecutor::new(settings("not a url"), &ExecutorConfig::default())
            .err()
            .expect("refused");
        assert!(err.to_string().contains("not a url"), "{err}");
        assert!(
            TemporalExecutor::new(
                settings("http://127.0.0.1:7233"),
                &ExecutorConfig::default()
            )
            .is_ok()
        );
    }

    #[test]
    fn the_workflow_id_is_the_task_id() {
        let id = Uuid::from_u128(42);
        assert_eq!(workflow_id(id), id.to_string());
    }

    #[tokio::test]
    async fn an_unreachable_cluster_is_unavailable_not_refused() {
        // A port nothing listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        let executor = TemporalExecutor::new(
            settings(&format!("http://127.0.0.1:{port}")),
            &ExecutorConfig::default(),
        )
        .expect("executor");
        match executor.cancel(Uuid::from_u128(1)).await {
            Err(DurableError::Unavailable(message)) => {
                assert!(message.contains(&port.to_string()), "{message}")
            }
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }
}
