//! Tasks run by a durable executor outside this process (decision C2's
//! `temporal` executor): the seam the task manager hands jobs through, and
//! the calls the executor's workers make back into the task manager.
//!
//! The rules (docs/clustering.md):
//! - a task is written `running` with the executor's name and execution id
//!   and no lease: the executor, not a replica, owns its execution, so
//!   lease adoption never touches it;
//! - starting is idempotent (the execution id is derived from the task id)
//!   and retried until the executor answers; recovery and a slow sweep
//!   start again any running task whose execution may never have started;
//! - a cancel records `terminated` first, then asks the executor to stop
//!   the execution and announces the cancel to every replica, so an action
//!   attempt in flight on any worker stops at once;
//! - the execution reports snapshots and its outcome through
//!   [`TaskManager::durable_report`] and [`TaskManager::durable_finish`] on
//!   whichever replica runs it; a snapshot that finds the task no longer
//!   running tells the execution to stop (the backstop of a cancel the
//!   executor never received).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rackflow_domain::inventory::LifecycleChange;
use rackflow_domain::report::Report;
use rackflow_domain::task::{Task, TaskStatus, messages, status_message};
use rackflow_store::TaskUpdate;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::TaskManager;
use crate::error::TaskError;
use crate::executor::{TaskJob, TaskOutcome};

/// Longest pause between two tries of starting an execution.
const START_RETRY_MAX: Duration = Duration::from_secs(5);

/// Why a durable executor did not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum DurableError {
    /// The executor could not be reached; the same call may work later.
    #[error("executor unavailable: {0}")]
    Unavailable(String),
    /// The executor refused the call.
    #[error("executor refused: {0}")]
    Refused(String),
}

/// An executor that runs tasks durably outside this process.
#[async_trait]
pub trait DurableExecutor: Send + Sync {
    /// The executor name written on the task row (`executor_type`).
    fn kind(&self) -> &'static str;
    /// The execution id written on the task row.
    fn execution_id(&self, task_id: Uuid) -> String;
    /// Starts executing `job`, unless an execution of the task is running
    /// already (then nothing happens and the answer is `Ok`).
    async fn start(&self, job: &TaskJob) -> Result<(), DurableError>;
    /// Asks the task's execution to stop; an execution that is not running
    /// is not an error.
    async fn cancel(&self, task_id: Uuid) -> Result<(), DurableError>;
}

/// Keeps an action attempt's cancel token registered while it runs, so a
/// cancel (through this process or announced by another) stops it.
pub struct AttemptGuard {
    manager: Arc<TaskManager>,
    task_id: Uuid,
    token: CancellationToken,
}

impl AttemptGuard {
    /// Fires when the task is cancelled or this process shuts down.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }
}

impl Drop for AttemptGuard {
    fn drop(&mut self) {
        let mut running = self.manager.running.lock();
        if let Some(entry) = running.get_mut(&self.task_id) {
            entry.attempts = entry.attempts.saturating_sub(1);
            if entry.attempts == 0 && entry.executing_since.is_none() {
                running.remove(&self.task_id);
            }
        }
    }
}

impl TaskManager {
    /// True once shutdown started (attempts stopped by it are not cancels).
    pub fn is_stopping(&self) -> bool {
        self.background.is_stopping()
    }

    /// Whether `task` is run by this process's durable executor.
    pub(super) fn is_durable(&self, task: &Task) -> bool {
        self.durable
            .as_ref()
            .is_some_and(|d| d.kind() == task.executor_type)
    }

    /// Hands a running task to the durable executor in the background.
    pub(super) fn spawn_durable(self: &Arc<Self>, task: Task) {
        self.forget_cancel_token(task.id);
        let manager = Arc::clone(self);
        let task_id = task.id;
        let started = self.background.spawn("durable start", async move {
            manager.start_durable(task).await;
        });
        if started.is_none() {
            tracing::info!(task_id = %task_id, "task not handed to the executor: shutting down; it starts on the next start");
        }
    }

    /// Prepares the job (a task whose components left the inventory, or
    /// whose actions the managers cannot run, fails here) and starts it,
    /// retrying until the executor answers or the task stops running.
    async fn start_durable(self: &Arc<Self>, task: Task) {
        let Some(durable) = self.durable.clone() else {
            return;
        };
        let resume_from = task
            .report
            .clone()
            .and_then(|r| serde_json::from_value::<Report>(r).ok());
        let job = match self.prepare(&task, resume_from).await {
            Ok(Ok(job)) => job,
            Ok(Err(outcome)) => {
                self.finish_durable_quietly(task.id, outcome).await;
                return;
            }
            Err(e) => {
                tracing::warn!(task_id = %task.id, error = %e, "could not prepare the task for its executor; the durable sweep retries");
                return;
            }
        };
        if let Err(message) = self.executor.check(&job.definition, &job.components) {
            self.finish_durable_quietly(task.id, TaskOutcome::Failed(message))
                .await;
            return;
        }
        let mut pause = Duration::from_millis(100);
        let mut tries = 1u32;
        loop {
            match durable.start(&job).await {
                Ok(()) => {
                    if tries > 1 {
                        tracing::info!(task_id = %task.id, tries, "task handed to its executor after it came back");
                    }
                    return;
                }
                Err(e) => {
                    if self.background.is_stopping() {
                        return;
                    }
                    tracing::warn!(task_id = %task.id, tries, error = %e, "could not start the task's execution; retrying");
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        () = self.background.token().cancelled() => return,
                    }
                    pause = (pause * 2).min(START_RETRY_MAX);
                    tries += 1;
                    // A cancel meanwhile ends the attempt to start it.
                    match self.store.task_get(task.id).await {
                        Ok(Some(t)) if t.status != TaskStatus::Running => return,
                        _ => {}
                    }
                }
            }
        }
    }

    async fn finish_durable_quietly(self: &Arc<Self>, task_id: Uuid, outcome: TaskOutcome) {
        if let Err(e) = self.durable_finish(task_id, outcome, None).await {
            tracing::error!(task_id = %task_id, error = %e, "could not record the outcome of a task that cannot run; the durable sweep retries");
        }
    }

    /// Starts again every running task of the durable executor whose
    /// report has not moved for `stale` (all of them with `Duration::ZERO`):
    /// its execution may never have started (the process that wrote it
    /// `running` died first). Starting is idempotent, so a live execution
    /// is left alone.
    pub(super) async fn ensure_durable_started(
        self: &Arc<Self>,
        stale: Duration,
    ) -> Result<usize, TaskError> {
        let Some(durable) = self.durable.clone() else {
            return Ok(0);
        };
        let before = chrono::Utc::now() - chrono::TimeDelta::from_std(stale).unwrap_or_default();
        let running = self.store.tasks_with_status(&[TaskStatus::Running]).await?;
        let mut count = 0;
        for task in running {
            if task.executor_type == durable.kind() && task.updated_at <= before {
                count += 1;
                self.spawn_durable(task);
            }
        }
        Ok(count)
    }

    /// Whether the task is still running: an action attempt checks before
    /// touching hardware (a cancel whose workflow cancellation has not
    /// arrived yet must not let a new attempt start).
    pub async fn durable_still_running(&self, task_id: Uuid) -> Result<bool, TaskError> {
        Ok(self
            .store
            .task_get(task_id)
            .await?
            .is_some_and(|t| t.status == TaskStatus::Running))
    }

    /// Persists a report snapshot of a durable execution. `Ok(false)`: the
    /// task is no longer running (cancelled) and the execution should stop.
    pub async fn durable_report(&self, task_id: Uuid, report: &Report) -> Result<bool, TaskError> {
        let value = serde_json::to_value(report)
            .map_err(|e| TaskError::Invalid(format!("report not serialisable: {e}")))?;
        let update = TaskUpdate {
            expected: vec![TaskStatus::Running],
            report: Some(value),
            ..Default::default()
        };
        Ok(self.store.task_update_quiet(task_id, &update).await?)
    }

    /// Records the outcome of a durable execution with its last report:
    /// completed, failed, or (a cancel the executor received while the row
    /// still says running, e.g. from the executor's own tools) terminated.
    /// A task that is no longer running keeps its status and gets the
    /// report only. Idempotent: the executor may retry it.
    pub async fn durable_finish(
        self: &Arc<Self>,
        task_id: Uuid,
        outcome: TaskOutcome,
        report: Option<&Report>,
    ) -> Result<(), TaskError> {
        let report = report
            .map(serde_json::to_value)
            .transpose()
            .map_err(|e| TaskError::Invalid(format!("report not serialisable: {e}")))?;
        let (status, message) = match outcome {
            TaskOutcome::Completed => (TaskStatus::Completed, messages::COMPLETED.to_string()),
            TaskOutcome::Failed(message) => {
                let text = status_message(&message);
                let text = if text.is_empty() {
                    messages::FAILED.into()
                } else {
                    text
                };
                (TaskStatus::Failed, text)
            }
            TaskOutcome::Cancelled => (TaskStatus::Terminated, messages::CANCELLED.to_string()),
        };
        // An ingest's or a decommission's outcome moves its rack too, in
        // the same write: the task's kind decides.
        let rack_lifecycle = self
            .store
            .task_get(task_id)
            .await?
            .and_then(|t| LifecycleChange::of(t.task_type, &t.information.code, status));
        let update = TaskUpdate {
            expected: vec![TaskStatus::Running],
            status: Some(status),
            message: Some(message.clone()),
            report: report.clone(),
            rack_lifecycle,
            ..Default::default()
        };
        let task = match self.store.task_update(task_id, &update).await? {
            Some(task) => {
                tracing::info!(task_id = %task_id, status = %status, message = %message, "task finished");
                self.count_finished(&task, status, report.as_ref());
                self.emit(&task);
                task
            }
            None => {
                let Some(task) = self.store.task_get(task_id).await? else {
                    return Err(TaskError::NotFound(task_id));
                };
                if let Some(report) = report {
                    let late = TaskUpdate {
                        expected: vec![task.status],
                        report: Some(report),
                        ..Default::default()
                    };
                    self.store.task_update_quiet(task_id, &late).await?;
                }
                task
            }
        };
        self.notify_rack(task.rack_id);
        Ok(())
    }

    /// Registers an action attempt of task `task_id` run on this process
    /// for a durable executor: the guard's token fires on a cancel of the
    /// task (through this process or announced by another) and on
    /// shutdown.
    pub fn attempt_guard(self: &Arc<Self>, task_id: Uuid) -> AttemptGuard {
        let token = {
            let mut running = self.running.lock();
            let entry = running.entry(task_id).or_insert_with(|| self.new_running());
            entry.attempts += 1;
            entry.cancel.clone()
        };
        AttemptGuard {
            manager: Arc::clone(self),
            task_id,
            token,
        }
    }

    /// Asks the durable executor to stop a cancelled task's execution and
    /// tells every replica (an attempt may be running on any of them).
    pub(super) async fn cancel_durable(&self, task_id: Uuid) {
        if let Err(e) = self.store.task_cancel_announce(task_id).await {
            tracing::warn!(task_id = %task_id, error = %e, "cancel not announced to other processes; the execution stops at its next report");
        }
        if let Some(durable) = &self.durable
            && let Err(e) = durable.cancel(task_id).await
        {
            tracing::warn!(task_id = %task_id, error = %e, "executor did not take the cancel; the execution stops at its next report");
        }
    }
}
