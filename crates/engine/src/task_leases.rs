//! Task ownership when several processes share one database (issue 11):
//! the lease of every task this process executes, adoption of tasks whose
//! owner stopped renewing, cancels announced by other processes, and the
//! outcome write that waits for the database instead of dropping the
//! outcome.
//!
//! The rules (docs/clustering.md):
//! - a task this process starts is written `running` with this process as
//!   owner and a lease of `lease` from now, renewed every `lease / 3`;
//! - a renewal that no longer finds a task this process executes (it was
//!   cancelled through another process, or adopted after a lost lease) stops
//!   its executor at once;
//! - a process that cannot renew for `lease - lease / 3` stops its executors
//!   itself, before anyone may adopt their tasks;
//! - every `lease / 3` each process adopts the running tasks whose lease
//!   expired and resumes them from their last report, as recovery does —
//!   but not within one lease of its own last database error: after an
//!   outage every owner gets a renewal in before anyone adopts;
//! - an outcome write is retried until the database answers, and applies
//!   only while this process still owns the task.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use rackflow_domain::task::TaskStatus;
use rackflow_store::{StoreError, TaskLease, TaskUpdate};
use uuid::Uuid;

use super::TaskManager;
use crate::error::EngineError;

/// Tasks adopted per statement.
const ADOPT_BATCH: i64 = 200;

/// Every this many lease ticks (4 leases), running tasks of a durable
/// executor whose report did not move for a lease are started again (a
/// no-op for a live execution): one executor call per such task.
const DURABLE_SWEEP_TICKS: u64 = 12;

/// Longest pause between two tries of an outcome write.
const OUTCOME_RETRY_MAX: Duration = Duration::from_secs(5);

/// This process as a task owner: host, pid and a random part (a restarted
/// process is a new owner; its predecessor's tasks are adopted once their
/// lease expires, or at once on SQLite, which admits one process).
pub(super) fn process_owner() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    let random = Uuid::new_v4().simple().to_string();
    format!("{host}/{}/{}", std::process::id(), &random[..8])
}

/// What the lease loop remembers between ticks.
struct LeaseClock {
    /// The last renewal that reached the database.
    renewed: Instant,
    /// The last database error of the loop, if any.
    failed: Option<Instant>,
}

impl TaskManager {
    /// This process's owner name, as written on the tasks it executes.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// A lease from now for a task this process starts.
    pub(super) fn lease(&self) -> TaskLease {
        TaskLease {
            owner: self.owner.clone(),
            expires_at: Utc::now()
                + chrono::TimeDelta::from_std(self.config.lease)
                    .unwrap_or(chrono::TimeDelta::seconds(15)),
        }
    }

    fn renew_every(&self) -> Duration {
        (self.config.lease / 3).max(Duration::from_millis(100))
    }

    /// Writes a task's outcome, trying again until the database answers
    /// (a dead database must not turn a finished task into a stuck
    /// `running` row). Gives up only when shutdown starts: the row then
    /// stays `running` and is adopted where it can resume.
    pub(super) async fn record_outcome(
        &self,
        task_id: Uuid,
        update: &TaskUpdate,
    ) -> Result<bool, StoreError> {
        let mut pause = Duration::from_millis(100);
        let mut tries = 1u32;
        loop {
            match self.writes.update_quiet(task_id, update.clone()).await {
                Ok(written) => {
                    if tries > 1 {
                        tracing::info!(task_id = %task_id, tries, "task outcome recorded after the database came back");
                    }
                    return Ok(written);
                }
                Err(e) if self.background.is_stopping() => return Err(e),
                Err(e) => {
                    tracing::warn!(task_id = %task_id, tries, error = %e, "could not record task outcome; retrying until the database answers");
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        () = self.background.token().cancelled() => {}
                    }
                    pause = (pause * 2).min(OUTCOME_RETRY_MAX);
                    tries += 1;
                }
            }
        }
    }

    /// Takes over running tasks whose lease expired (all running tasks of
    /// other owners with `any_lease`) and resumes them; returns how many.
    pub(super) async fn adopt(self: &Arc<Self>, any_lease: bool) -> Result<usize, EngineError> {
        let mut count = 0;
        loop {
            let lease = self.lease();
            let adopted = self
                .store
                .task_adopt(&lease, Utc::now(), any_lease, ADOPT_BATCH)
                .await?;
            let full = adopted.len() as i64 == ADOPT_BATCH;
            for task in adopted {
                // Our own task, whose renewal came late: it is executing
                // here already and now holds the new lease.
                if self.running.lock().contains_key(&task.id) {
                    continue;
                }
                tracing::info!(task_id = %task.id, owner = %self.owner, "adopted running task whose lease expired");
                count += 1;
                self.resume(task).await;
            }
            if !full {
                return Ok(count);
            }
        }
    }

    /// Starts pending tasks that have been pending for a whole lease: the
    /// process that let them out of the queue died before starting them.
    /// (Starting is a conditional write, so a race with a live starter
    /// starts the task once.)
    async fn start_stale_pending(self: &Arc<Self>) -> Result<(), EngineError> {
        let stale_before = Utc::now()
            - chrono::TimeDelta::from_std(self.config.lease)
                .unwrap_or(chrono::TimeDelta::seconds(15));
        for task in self.store.tasks_with_status(&[TaskStatus::Pending]).await? {
            if task.updated_at < stale_before && !self.running.lock().contains_key(&task.id) {
                tracing::info!(task_id = %task.id, "starting a task left pending by another process");
                self.start(task).await;
            }
        }
        Ok(())
    }

    /// Renews the leases of the tasks this process executes and stops the
    /// ones it no longer owns; stops them all when the database has been
    /// unreachable for too long to be sure nobody adopted them.
    async fn renew(&self, clock: &mut LeaseClock) {
        let began = Instant::now();
        let executing: Vec<Uuid> = self
            .running
            .lock()
            .iter()
            .filter(|(_, r)| r.executing_since.is_some_and(|since| since <= began))
            .map(|(id, _)| *id)
            .collect();
        if executing.is_empty() {
            clock.renewed = began;
            return;
        }
        let expires_at = self.lease().expires_at;
        match self
            .store
            .task_leases_renew(&self.owner, &executing, expires_at)
            .await
        {
            Ok(renewed) => {
                clock.renewed = began;
                let renewed: HashSet<Uuid> = renewed.into_iter().collect();
                for id in executing.iter().filter(|id| !renewed.contains(id)) {
                    if self.stop_local(*id) {
                        tracing::warn!(task_id = %id, owner = %self.owner, "stopped a task this process no longer runs (cancelled through another process, or adopted after a lost lease)");
                    }
                }
            }
            Err(e) => {
                clock.failed = Some(began);
                let silent = began.duration_since(clock.renewed);
                if silent + self.renew_every() >= self.config.lease {
                    let stopped = executing.iter().filter(|id| self.stop_local(**id)).count();
                    tracing::error!(error = %e, silent_secs = silent.as_secs(), stopped, "task leases not renewed for most of a lease: stopped this process's executors before another process may adopt their tasks");
                } else {
                    tracing::warn!(error = %e, "task leases not renewed; retrying");
                }
            }
        }
    }

    /// Fires the cancel token of a task this process runs; true if it did.
    fn stop_local(&self, id: Uuid) -> bool {
        let token = self.running.lock().get(&id).map(|r| r.cancel.clone());
        match token {
            Some(token) if !token.is_cancelled() => {
                token.cancel();
                true
            }
            _ => false,
        }
    }

    /// Starts the lease loop (renewal, adoption, stale pending tasks) and
    /// the cancel feed; both stop with the task manager.
    pub fn spawn_leases(self: &Arc<Self>) {
        let manager = Arc::clone(self);
        let shutdown = self.background.token().clone();
        self.background.spawn("task leases", async move {
            let mut tick = tokio::time::interval(manager.renew_every());
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // The first tick fires at once; recovery has just run.
            tick.tick().await;
            let mut clock = LeaseClock {
                renewed: Instant::now(),
                failed: None,
            };
            let mut ticks: u64 = 0;
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    _ = tick.tick() => {}
                }
                manager.renew(&mut clock).await;
                // After a database outage every owner renews first.
                if clock
                    .failed
                    .is_some_and(|at| at.elapsed() < manager.config.lease)
                {
                    continue;
                }
                if let Err(e) = manager.adopt(false).await {
                    clock.failed = Some(Instant::now());
                    tracing::warn!(error = %e, "adoption of expired task leases failed; retrying");
                    continue;
                }
                if let Err(e) = manager.start_stale_pending().await {
                    tracing::warn!(error = %e, "could not look for stale pending tasks");
                }
                ticks += 1;
                if manager.durable.is_some()
                    && ticks.is_multiple_of(DURABLE_SWEEP_TICKS)
                    && let Err(e) = manager.ensure_durable_started(manager.config.lease).await
                {
                    tracing::warn!(error = %e, "could not look for durable tasks without an execution");
                }
            }
            tracing::debug!("task lease loop stopped");
        });

        let manager = Arc::clone(self);
        let shutdown = self.background.token().clone();
        self.background.spawn("task cancel feed", async move {
            let mut feed = None;
            loop {
                if feed.is_none() {
                    match manager.store.task_cancel_feed().await {
                        Ok(Some(f)) => feed = Some(f),
                        // No other process can share the database.
                        Ok(None) => return,
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot listen for cancels of other processes; retrying (lease renewal stops cancelled tasks meanwhile)");
                            tokio::select! {
                                () = shutdown.cancelled() => break,
                                () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                            }
                        }
                    }
                }
                let Some(listening) = feed.as_mut() else {
                    continue;
                };
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    next = listening.next() => match next {
                        Ok(id) => {
                            if manager.stop_local(id) {
                                tracing::info!(task_id = %id, "task cancelled through another process");
                            }
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "cancel feed interrupted; reconnecting");
                            feed = None;
                            tokio::select! {
                                () = shutdown.cancelled() => break,
                                () = tokio::time::sleep(Duration::from_secs(1)) => {}
                            }
                        }
                    },
                }
            }
            tracing::debug!("task cancel feed stopped");
        });
    }
}
