//! The operation-run dispatcher loop and the manual controls (spec
//! operation-runs §3, §4).
//!
//! One pass takes up to `batch` runnable runs, oldest `updated_at` first (a
//! processed run moves to the back, which keeps many concurrent runs fair).
//! Each run gets up to two attempts: one transaction that locks the run and
//! its current-phase targets, reconciles child tasks, decides (pure domain
//! code), claims within the quota and commits; then, after the commit, the
//! claimed targets' child tasks are submitted and each target row written.
//! A claimed target whose submission was lost (crash) keeps its lease and
//! is re-claimed once it expires; the idempotency key
//! `operation-run-target:<id>` makes the re-submission return the same task.
//!
//! Decision D2: the loop passes at start, is woken at once by create,
//! resume, advance, cancel and every child-task status change, and polls
//! every `poll_interval` as the safety net.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rackflow_domain::dispatch::{
    self, ControlError, Decision, PhaseSummary, Runtime, SubmitEffect, SubmitResult,
};
use rackflow_domain::run::{OperationRun, OperationRunTarget};
use rackflow_domain::target::{ComponentTarget, TargetSpec};
use rackflow_domain::task::{Task, TaskInformation, TaskType};
use rackflow_store::{LockMode, RunLock, Store, StoreError};
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::error::EngineError;
use crate::tasks::{SubmitRequest, TaskError, TaskManager, queue_policy};

/// Dispatcher tunables; defaults are the reference's (documented in
/// `docs/configuration.md`).
#[derive(Debug, Clone)]
pub struct DispatcherConfig {
    /// Safety-net poll; events wake the loop earlier.
    pub poll_interval: Duration,
    /// Runs per pass.
    pub batch: i64,
    /// How long a claim holds a target before another pass may re-claim it.
    pub claim_lease: Duration,
    /// Bound on the post-submission target write.
    pub submit_persist_timeout: Duration,
    /// Shared budget for cancelling child tasks after CancelOperationRun.
    pub cancel_budget: Duration,
}

impl Default for DispatcherConfig {
    fn default() -> Self {
        DispatcherConfig {
            poll_interval: Duration::from_secs(10),
            batch: 10,
            claim_lease: dispatch::DEFAULT_CLAIM_LEASE,
            submit_persist_timeout: Duration::from_secs(5),
            cancel_budget: Duration::from_secs(5),
        }
    }
}

/// A claimed target's child request, built inside the transaction and
/// submitted after the commit.
struct Claimed {
    target: OperationRunTarget,
    request: SubmitRequest,
}

/// What one attempt left to do after its commit.
struct Attempt {
    claimed: Vec<Claimed>,
}

/// Drives operation runs and applies manual controls.
pub struct Dispatcher {
    store: Arc<dyn Store>,
    tasks: Arc<TaskManager>,
    config: DispatcherConfig,
    wake: Notify,
    /// Run ids whose row was written (for watchers).
    changes: broadcast::Sender<Uuid>,
}

impl Dispatcher {
    pub fn new(
        store: Arc<dyn Store>,
        tasks: Arc<TaskManager>,
        config: DispatcherConfig,
    ) -> Arc<Dispatcher> {
        let (changes, _) = broadcast::channel(1024);
        Arc::new(Dispatcher {
            store,
            tasks,
            config,
            wake: Notify::new(),
            changes,
        })
    }

    /// Asks for a pass as soon as possible.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Run ids whose state was written, as they happen.
    pub fn subscribe(&self) -> broadcast::Receiver<Uuid> {
        self.changes.subscribe()
    }

    fn changed(&self, run_id: Uuid) {
        let _ = self.changes.send(run_id);
    }

    /// Runs the loop until `shutdown`; returns its join handle.
    pub fn spawn(self: &Arc<Self>, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
        let dispatcher = Arc::clone(self);
        let mut task_events = self.tasks.subscribe();
        tokio::spawn(async move {
            loop {
                dispatcher.pass().await;
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = dispatcher.wake.notified() => {}
                    event = task_events.recv() => {
                        if let Err(broadcast::error::RecvError::Closed) = event {
                            // Task manager gone: keep polling only.
                            task_events = dispatcher.tasks.subscribe();
                        }
                    }
                    () = tokio::time::sleep(dispatcher.config.poll_interval) => {}
                }
            }
            tracing::debug!("dispatcher stopped");
        })
    }

    /// One pass over up to `batch` runnable runs; errors are logged per run.
    pub async fn pass(&self) {
        let ids = match self.store.run_ids_runnable(self.config.batch).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e, "dispatcher could not list runnable runs");
                return;
            }
        };
        for id in ids {
            if let Err(e) = self.dispatch_run(id).await {
                tracing::warn!(run_id = %id, error = %e, "dispatch operation run {id}: {e}");
            }
        }
    }

    /// Up to two attempts for one run (§3.2 step 8), with the same `now`.
    pub async fn dispatch_run(&self, id: Uuid) -> Result<(), EngineError> {
        let now = Utc::now();
        for _ in 0..2 {
            let Some(attempt) = self.attempt(id, now).await? else {
                return Ok(());
            };
            self.changed(id);
            if !self.submit_claimed(id, attempt.claimed).await {
                return Ok(());
            }
        }
        Ok(())
    }

    /// One locked transaction; `None` when the run was not obtained.
    async fn attempt(&self, id: Uuid, now: DateTime<Utc>) -> Result<Option<Attempt>, EngineError> {
        // Child tasks are read before the lock (reading them inside would
        // hold the run's rows across more round trips); a task that moves in
        // between is reconciled by the next pass.
        let current = self.store.run_current_targets(id).await?;
        let task_ids: Vec<Uuid> = current
            .iter()
            .filter(|t| dispatch::needs_reconcile(t))
            .filter_map(|t| t.task_id)
            .collect();
        let tasks: HashMap<Uuid, Task> = self
            .store
            .tasks_get_many(&task_ids)
            .await?
            .into_iter()
            .map(|t| (t.id, t))
            .collect();

        let lease = self.config.claim_lease;
        let mut claimed: Vec<Claimed> = Vec::new();
        let mut apply = |lock: &mut RunLock| -> Result<(), StoreError> {
            claimed.clear();
            for target in lock.targets.iter_mut() {
                if !dispatch::needs_reconcile(target) {
                    continue;
                }
                let Some(task_id) = target.task_id else {
                    continue;
                };
                let Some(task) = tasks.get(&task_id) else {
                    return Err(StoreError::NotFound(format!("get child task {task_id}")));
                };
                dispatch::reconcile_target(target, task.status, &task.message);
            }
            let summary = PhaseSummary::for_run(&lock.run, &lock.targets, lock.earlier);
            let runtime = Runtime::from_options(&lock.run.configuration.options);
            let decision = dispatch::decide(&lock.run, &summary, runtime, now);
            decision.apply(&mut lock.run, now);
            if let Decision::Claim {
                max_concurrent_targets,
            } = decision
            {
                let run = lock.run.clone();
                let outcome = dispatch::claim_targets(
                    &mut lock.targets,
                    max_concurrent_targets,
                    now,
                    lease,
                    |target| child_request(&run, target),
                );
                if let Some(message) = &outcome.run_message {
                    lock.run.status_message = message.clone();
                }
                for (i, request) in outcome.claimed {
                    claimed.push(Claimed {
                        target: lock.targets[i].clone(),
                        request,
                    });
                }
            }
            if !matches!(decision, Decision::NoOp | Decision::Claim { .. }) {
                tracing::info!(run_id = %lock.run.id, status = %lock.run.status, reason = %lock.run.reason, message = %lock.run.status_message, "operation run transition");
            }
            Ok(())
        };
        let obtained = self
            .store
            .run_lock_apply(id, LockMode::Runnable, &mut apply)
            .await?;
        Ok(obtained.map(|()| Attempt { claimed }))
    }

    /// Submits claimed targets' child tasks; true when a slot was freed (a
    /// conflict or a failure), which earns the run a second attempt.
    async fn submit_claimed(&self, run_id: Uuid, claimed: Vec<Claimed>) -> bool {
        let mut freed = false;
        let policy = match self.store.run_get(run_id).await {
            Ok(Some(run)) => run.configuration.options.conflict_policy,
            _ => Default::default(),
        };
        for Claimed {
            mut target,
            request,
        } in claimed
        {
            let result = self.tasks.submit(request).await;
            let now = Utc::now();
            let effect = match &result {
                Ok(ids) => {
                    dispatch::on_submit_result(&mut target, SubmitResult::Tasks(ids), &policy, now)
                }
                Err(TaskError::RackConflict(_)) => {
                    let text = result
                        .as_ref()
                        .err()
                        .map(ToString::to_string)
                        .unwrap_or_default();
                    dispatch::on_submit_result(
                        &mut target,
                        SubmitResult::Conflict(&text),
                        &policy,
                        now,
                    )
                }
                Err(e) => {
                    let text = e.to_string();
                    dispatch::on_submit_result(
                        &mut target,
                        SubmitResult::Error(&text),
                        &policy,
                        now,
                    )
                }
            };
            match &effect {
                SubmitEffect::Active(task_id) => {
                    tracing::info!(run_id = %run_id, target_id = %target.id, task_id = %task_id, "operation run target submitted");
                }
                SubmitEffect::Blocked(outcome) => {
                    tracing::info!(run_id = %run_id, target_id = %target.id, retry_in_secs = outcome.delay.as_secs(), "operation run target blocked by a rack conflict");
                }
                SubmitEffect::Failed => {
                    tracing::warn!(run_id = %run_id, target_id = %target.id, message = %target.message, "operation run target failed at submission");
                }
            }
            freed |= !effect.started_active_task();
            let write = self.store.run_target_update(&target);
            match tokio::time::timeout(self.config.submit_persist_timeout, write).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(target_id = %target.id, error = %e, "target write after submission failed; the claim lease recovers it")
                }
                Err(_) => {
                    tracing::warn!(target_id = %target.id, "target write after submission timed out; the claim lease recovers it")
                }
            }
        }
        self.changed(run_id);
        freed
    }

    // ---- manual controls (§4) ---------------------------------------------

    async fn control(
        &self,
        id: Uuid,
        mut f: impl FnMut(
            &OperationRun,
            &PhaseSummary,
        ) -> Result<dispatch::ControlOutcome, ControlError>
        + Send,
    ) -> Result<OperationRun, EngineError> {
        let mut result: Option<Result<OperationRun, ControlError>> = None;
        let mut apply = |lock: &mut RunLock| -> Result<(), StoreError> {
            let summary = PhaseSummary::for_run(&lock.run, &lock.targets, lock.earlier);
            match f(&lock.run, &summary) {
                Ok(outcome) => {
                    lock.run = outcome.run.clone();
                    result = Some(Ok(outcome.run));
                }
                Err(e) => result = Some(Err(e)),
            }
            Ok(())
        };
        let found = self
            .store
            .run_lock_apply(id, LockMode::Wait, &mut apply)
            .await?;
        if found.is_none() {
            return Err(EngineError::RunNotFound(id));
        }
        match result {
            Some(Ok(run)) => {
                self.changed(id);
                Ok(run)
            }
            Some(Err(e)) => Err(EngineError::Control(e)),
            None => Err(EngineError::RunNotFound(id)),
        }
    }

    pub async fn pause(&self, id: Uuid) -> Result<OperationRun, EngineError> {
        let run = self
            .control(id, |run, _| dispatch::pause(run, Utc::now()))
            .await?;
        tracing::info!(run_id = %id, status = %run.status, "pause requested");
        Ok(run)
    }

    pub async fn resume(&self, id: Uuid) -> Result<OperationRun, EngineError> {
        let run = self
            .control(id, |run, summary| {
                dispatch::resume(run, summary, Utc::now())
            })
            .await?;
        tracing::info!(run_id = %id, status = %run.status, "resume requested");
        self.wake();
        Ok(run)
    }

    pub async fn advance(
        &self,
        id: Uuid,
        expected_phase_index: Option<i32>,
    ) -> Result<OperationRun, EngineError> {
        let run = self
            .control(id, |run, summary| {
                dispatch::advance(run, summary, expected_phase_index, Utc::now())
            })
            .await?;
        tracing::info!(run_id = %id, phase = run.current_phase_index, status = %run.status, "advance requested");
        self.wake();
        Ok(run)
    }

    /// Cancels the run, then — only after the commit — its current phase's
    /// child tasks within one shared budget. Failures there are logged; the
    /// run stays cancelled and its targets are not modified.
    pub async fn cancel(&self, id: Uuid, reason: &str) -> Result<OperationRun, EngineError> {
        let mut was_terminal = false;
        let run = self
            .control(id, |run, _| {
                was_terminal = run.status.is_terminal();
                Ok(dispatch::cancel(run, reason, Utc::now()))
            })
            .await?;
        if was_terminal {
            return Ok(run);
        }
        tracing::info!(run_id = %id, "operation run cancelled");
        let tasks = Arc::clone(&self.tasks);
        let store = Arc::clone(&self.store);
        let budget = self.config.cancel_budget;
        let cancel_children = async move {
            let targets = match store.run_current_targets(id).await {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(run_id = %id, error = %e, "could not list targets to cancel");
                    return;
                }
            };
            for task_id in dispatch::tasks_to_cancel(&targets) {
                if let Err(e) = tasks.cancel(task_id).await {
                    tracing::warn!(run_id = %id, task_id = %task_id, error = %e, "child task not cancelled");
                }
            }
        };
        // Detached from the caller's cancellation, bounded by the budget.
        let handle = tokio::spawn(async move {
            if tokio::time::timeout(budget, cancel_children).await.is_err() {
                tracing::warn!(run_id = %id, "cancelling child tasks ran out of its budget");
            }
        });
        let _ = handle.await;
        self.wake();
        Ok(run)
    }
}

/// The child task request of one target (§3.7): component targets by UUID
/// from the frozen set, REJECT always, idempotency key per target.
fn child_request(run: &OperationRun, target: &OperationRunTarget) -> Result<SubmitRequest, String> {
    let template = &run.configuration.operation;
    let mut components = Vec::new();
    for (_, ids) in target.components_by_type.iter() {
        let mut ids = ids.to_vec();
        ids.sort();
        ids.dedup();
        components.extend(ids.into_iter().map(ComponentTarget::Id));
    }
    if components.is_empty() {
        return Err(format!(
            "operation run target {} has no components",
            target.id
        ));
    }
    let description = if template.description.is_empty() {
        match &template.payload.target_version {
            Some(v) => format!("firmware upgrade, target version {v}"),
            None => "firmware upgrade".to_string(),
        }
    } else {
        template.description.clone()
    };
    Ok(SubmitRequest {
        task_type: TaskType::FirmwareControl,
        information: TaskInformation {
            code: template.code.clone(),
            override_readiness_check: template.payload.override_readiness_check,
            firmware: Some(template.payload.clone()),
        },
        description,
        target: TargetSpec::Components(components),
        queue: queue_policy(rackflow_domain::run::QueueStrategy::Reject, 0),
        rule_id: template.payload.rule_id,
        idempotency_key: Some(format!("operation-run-target:{}", target.id)),
        required_rack_id: Some(target.rack_id),
    })
}
