//! The task workflow's activities, run by every rackflow replica's worker:
//! an action attempt on a batch (the component-manager calls), a report
//! snapshot (a local activity) and the outcome.
//!
//! The worker runs on its own thread and runtime (the SDK's workflows are
//! not `Send`); each activity does its work on the server's runtime, where
//! the store and the managers live, through the runtime handle it holds.

use std::sync::Arc;
use std::time::Duration;

use rackflow_domain::report::Report;
use rackflow_domain::rule::SequenceStep;
use rackflow_domain::task::TaskInformation;
use rackflow_engine::error::TaskError;
use rackflow_engine::executor::{AttemptSpec, CANCELLED, TaskOutcome};
use rackflow_engine::manager::ComponentRef;
use rackflow_engine::tasks::TaskManager;
use serde::{Deserialize, Serialize};
use temporalio_macros::activities;
use temporalio_sdk::ApplicationFailure;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use uuid::Uuid;

/// One action attempt (see [`AttemptSpec`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AttemptInput {
    pub task_id: Uuid,
    pub information: TaskInformation,
    pub components: Vec<ComponentRef>,
    pub stage: i32,
    pub step: SequenceStep,
    pub action_index: usize,
    pub batch: Vec<ComponentRef>,
    pub resume: bool,
}

/// A report snapshot to persist.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SaveInput {
    pub task_id: Uuid,
    pub report: Report,
}

/// How a task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Completed,
    Failed,
    Cancelled,
}

/// The outcome to record, with the last report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FinishInput {
    pub task_id: Uuid,
    pub outcome: Outcome,
    /// The failure message (`stage N failed: …`) of a failed task.
    pub message: String,
    pub report: Report,
}

/// The activities of this replica's worker.
pub struct TaskActivities {
    manager: Arc<TaskManager>,
    /// The server's runtime: the store and the managers are driven there.
    server: tokio::runtime::Handle,
    /// How often a running attempt heartbeats.
    heartbeat_every: Duration,
}

impl TaskActivities {
    pub fn new(
        manager: Arc<TaskManager>,
        server: tokio::runtime::Handle,
        heartbeat_timeout: Duration,
    ) -> TaskActivities {
        TaskActivities {
            manager,
            server,
            heartbeat_every: (heartbeat_timeout / 3).max(Duration::from_millis(200)),
        }
    }
}

impl TaskActivities {
    /// Runs a task-manager call on the server's runtime; any error is a
    /// retryable activity failure.
    async fn on_server<T: Send + 'static>(
        &self,
        call: impl Future<Output = Result<T, TaskError>> + Send + 'static,
    ) -> Result<T, ActivityError> {
        let retryable = |e: String| ActivityError::application(ApplicationFailure::new(e));
        self.server
            .spawn(call)
            .await
            .map_err(|e| retryable(e.to_string()))?
            .map_err(|e| retryable(e.to_string()))
    }
}

#[activities]
impl TaskActivities {
    /// Runs one attempt of an action on a batch with the local executor's
    /// semantics. A retry (attempt > 1) resumes: components whose firmware
    /// update is already accepted are polled, not started again — the
    /// attempt before may have died with its worker mid-update.
    #[activity]
    pub async fn attempt(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: AttemptInput,
    ) -> Result<(), ActivityError> {
        let resume = input.resume || ctx.info().attempt > 1;
        let manager = Arc::clone(&self.manager);
        let guard = manager.attempt_guard(input.task_id);
        let stop = guard.token().clone();
        let work = self.server.spawn(async move {
            let _guard = guard;
            let spec = AttemptSpec {
                task_id: input.task_id,
                information: &input.information,
                components: &input.components,
                stage: input.stage,
                step: &input.step,
                action_index: input.action_index,
                batch: &input.batch,
                resume,
            };
            // A cancelled task starts no new attempt; an unreachable
            // database does not stop one the workflow scheduled.
            if let Ok(false) = manager.durable_still_running(spec.task_id).await {
                return None;
            }
            let executor = Arc::clone(manager.local_executor());
            tokio::select! {
                biased;
                () = stop.cancelled() => None,
                result = executor.attempt(spec) => Some(result),
            }
        });
        let abort = work.abort_handle();
        let mut work = std::pin::pin!(work);
        let mut beat = tokio::time::interval(self.heartbeat_every);
        let result = loop {
            tokio::select! {
                joined = &mut work => break joined,
                () = ctx.cancelled() => {
                    abort.abort();
                    return Err(ActivityError::cancelled());
                }
                _ = beat.tick() => {
                    // Only a payload conversion can fail here.
                    let _ = ctx.record_heartbeat(()).await;
                }
            }
        };
        match result {
            Ok(Some(Ok(()))) => Ok(()),
            Ok(Some(Err(e))) if e.retryable => Err(ActivityError::application(
                ApplicationFailure::new(e.message),
            )),
            Ok(Some(Err(e))) => Err(ActivityError::application(
                ApplicationFailure::non_retryable(e.message),
            )),
            // Stopped by this replica: a cancel of the task, or shutdown
            // (then another worker takes the attempt over).
            Ok(None) if self.manager.is_stopping() => Err(ActivityError::application(
                ApplicationFailure::new("worker shutting down".to_string()),
            )),
            Ok(None) => Err(ActivityError::application(
                ApplicationFailure::non_retryable(CANCELLED.to_string()),
            )),
            Err(e) => Err(ActivityError::application(ApplicationFailure::new(
                format!("attempt stopped: {e}"),
            ))),
        }
    }

    /// Persists a report snapshot; `false` when the task is no longer
    /// running (the workflow then stops).
    #[activity]
    pub async fn save_report(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: SaveInput,
    ) -> Result<bool, ActivityError> {
        let manager = Arc::clone(&self.manager);
        self.on_server(async move { manager.durable_report(input.task_id, &input.report).await })
            .await
    }

    /// Records the task's outcome and last report.
    #[activity]
    pub async fn finish(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: FinishInput,
    ) -> Result<(), ActivityError> {
        let manager = Arc::clone(&self.manager);
        let outcome = match input.outcome {
            Outcome::Completed => TaskOutcome::Completed,
            Outcome::Failed => TaskOutcome::Failed(input.message),
            Outcome::Cancelled => TaskOutcome::Cancelled,
        };
        self.on_server(async move {
            manager
                .durable_finish(input.task_id, outcome, Some(&input.report))
                .await
        })
        .await
    }
}
