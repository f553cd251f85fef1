//! `JobRegistry<D>`: the generic, domain-agnostic job registry (spec §1.1).
//!
//! It owns admission (shutdown, parent, node-idle and capacity checks in one
//! write-locked section), the single chokepoint for state changes (which logs
//! "job started" / "job progress" / "job completed" / "job failed" and fires
//! the terminal observer exactly once), cooperative cancellation, waiting for
//! jobs to finish, and TTL eviction.
//!
//! Locking: one `std::sync::RwLock<JobStore>`, held only for short sections
//! and never across an `.await`; observers and log events run after the lock
//! is released so a panicking callback cannot poison it. A poisoned lock is
//! still recovered, because every mutation under it completes or does
//! nothing before anything that can panic runs.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::clock::{Clock, SystemClock};
use super::domain::JobDomain;
use super::error::JobFailure;
use super::handle::JobHandle;
use super::ids::JobId;
use super::job_type::JobType;
use super::state::{
    CreationKind, JobLifecycleState, JobState, TransitionClass, TransitionError, initial_state,
};
use super::store::{JobStore, TransitionEvent};

/// Default cap on retained records (all records, terminal ones included).
pub const MAX_TRACKED_JOBS: usize = 10_000;

/// How often `wait_for_terminal_jobs` re-checks its jobs.
#[cfg(not(test))]
pub const TERMINAL_WAIT_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// How often `wait_for_terminal_jobs` re-checks its jobs (fast in tests).
#[cfg(test)]
pub const TERMINAL_WAIT_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Creation input (spec §1.2).
pub struct JobSpec {
    pub rack_id: String,
    pub node_id: String,
    pub span: tracing::Span,
    /// Set for externally visible workflows; drives workflow metrics.
    pub workflow_type: Option<JobType>,
    pub initial_state: JobLifecycleState,
}

impl JobSpec {
    /// A leaf that starts `Queued` with `queued_description` (RMS passes
    /// "Queued").
    pub fn new(
        rack_id: impl Into<String>,
        node_id: impl Into<String>,
        queued_description: impl Into<String>,
        span: tracing::Span,
    ) -> Self {
        debug_assert_eq!(initial_state(CreationKind::Leaf), JobState::Queued);
        Self {
            rack_id: rack_id.into(),
            node_id: node_id.into(),
            span,
            workflow_type: None,
            initial_state: JobLifecycleState::Queued {
                description: queued_description.into(),
            },
        }
    }

    /// A top-level aggregate with an empty `node_id` that starts `Running`.
    /// It is not a parent until its first child attaches.
    pub fn new_parent(
        rack_id: impl Into<String>,
        running_description: impl Into<String>,
        span: tracing::Span,
    ) -> Self {
        debug_assert_eq!(initial_state(CreationKind::Parent), JobState::Running);
        Self {
            rack_id: rack_id.into(),
            node_id: String::new(),
            span,
            workflow_type: None,
            initial_state: JobLifecycleState::Running {
                description: running_description.into(),
            },
        }
    }

    /// Marks the job as an externally visible workflow (metrics).
    pub fn with_workflow_type(mut self, workflow_type: JobType) -> Self {
        self.workflow_type = Some(workflow_type);
        self
    }
}

/// A point-in-time job record (spec §1.2).
#[derive(Debug, Clone)]
pub struct JobSnapshot {
    pub job_id: JobId,
    pub span: tracing::Span,
    pub state: JobLifecycleState,
    pub rack_id: String,
    pub node_id: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Children in attachment order.
    pub child_job_ids: Vec<JobId>,
    /// Fixed when the child is created.
    pub parent_job_id: Option<JobId>,
    pub cancellation_token: CancellationToken,
    pub workflow_type: Option<JobType>,
}

impl JobSnapshot {
    /// True once at least one child is attached.
    pub fn is_parent(&self) -> bool {
        !self.child_job_ids.is_empty()
    }

    fn new(spec: JobSpec, parent_job_id: Option<JobId>, now: DateTime<Utc>) -> Self {
        Self {
            job_id: JobId::new(),
            span: spec.span,
            state: spec.initial_state,
            rack_id: spec.rack_id,
            node_id: spec.node_id,
            created_at: now,
            updated_at: now,
            child_job_ids: Vec::new(),
            parent_job_id,
            cancellation_token: CancellationToken::new(),
            workflow_type: spec.workflow_type,
        }
    }
}

/// Callback fired with a snapshot on creation or on the terminal transition.
/// It runs outside the registry lock and must not assume it can re-enter the
/// registry from inside a write section (it never runs inside one).
pub type JobObserver = Arc<dyn Fn(&JobSnapshot) + Send + Sync>;

/// Shared in-memory registry for asynchronous jobs.
pub struct JobRegistry<D: JobDomain> {
    jobs: RwLock<JobStore>,
    ttl: Duration,
    max_jobs: usize,
    clock: Arc<dyn Clock>,
    shutting_down: AtomicBool,
    created_observer: Option<JobObserver>,
    terminal_observer: Option<JobObserver>,
    _domain: PhantomData<fn() -> D>,
}

impl<D: JobDomain> JobRegistry<D> {
    /// A registry keeping terminal jobs for `ttl`, capped at
    /// [`MAX_TRACKED_JOBS`].
    pub fn new(ttl: Duration) -> Self {
        Self::with_capacity(ttl, MAX_TRACKED_JOBS)
    }

    /// A registry keeping terminal jobs for `ttl` and at most `max_jobs`
    /// records.
    pub fn with_capacity(ttl: Duration, max_jobs: usize) -> Self {
        Self::with_clock(ttl, max_jobs, Arc::new(SystemClock))
    }

    /// Like [`Self::with_capacity`] with an injected clock.
    pub fn with_clock(ttl: Duration, max_jobs: usize, clock: Arc<dyn Clock>) -> Self {
        Self {
            jobs: RwLock::new(JobStore::default()),
            ttl,
            max_jobs,
            clock,
            shutting_down: AtomicBool::new(false),
            created_observer: None,
            terminal_observer: None,
            _domain: PhantomData,
        }
    }

    /// Sets the creation observer (configure before sharing the registry).
    pub fn set_created_observer(&mut self, observer: JobObserver) {
        self.created_observer = Some(observer);
    }

    /// Sets the terminal observer, fired exactly once per job on its first
    /// terminal transition (configure before sharing the registry).
    pub fn set_terminal_observer(&mut self, observer: JobObserver) {
        self.terminal_observer = Some(observer);
    }

    /// Retention period for terminal jobs.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The record cap.
    pub fn max_jobs(&self) -> usize {
        self.max_jobs
    }

    /// The clock used for timestamps and expiry.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Admits a job (spec §1.6). In one write-locked section, in this order:
    /// shutdown → parent availability → node idle (if `require_node_idle`) →
    /// capacity (pruning expired jobs only when at the cap). Refusals store
    /// nothing. On success a child is attached to its parent in the same
    /// section; "job created" is logged and the creation observer fires after
    /// the lock is released.
    pub fn create_job(
        self: &Arc<Self>,
        spec: JobSpec,
        parent_job_id: Option<&str>,
        require_node_idle: bool,
    ) -> Result<JobHandle<D>, JobFailure> {
        let now = self.clock.now();
        let record = JobSnapshot::new(spec, parent_job_id.map(JobId::from), now);
        let record = {
            let mut jobs = self.write();
            if self.shutting_down.load(Ordering::SeqCst) {
                return Err(D::shutting_down_failure());
            }
            if let Some(parent) = parent_job_id
                && !jobs.can_accept_child(parent)
            {
                return Err(D::parent_unavailable_failure(&JobId::from(parent)));
            }
            if require_node_idle
                && let Some(active) = jobs.active_job_for_node(&record.rack_id, &record.node_id)
            {
                return Err(D::node_busy_failure(
                    &record.rack_id,
                    &record.node_id,
                    &active,
                ));
            }
            if jobs.len() >= self.max_jobs {
                // Pruning happens only here, under capacity pressure.
                jobs.cleanup_expired(now, self.ttl);
                let current = jobs.len();
                if current >= self.max_jobs {
                    return Err(D::at_capacity_failure(current, self.max_jobs));
                }
            }
            let mut record = record;
            record.job_id = jobs.insert(record.clone());
            if let Some(parent) = parent_job_id {
                // Checked above under this same lock, so failure here is a bug.
                assert!(
                    jobs.attach_child(parent, &record.job_id, now),
                    "validated parent must accept child under the same write lock"
                );
            }
            record
        };
        // Displayed, not `Debug`-quoted: `job_id=…` as the other ids are.
        record
            .span
            .record("job_id", tracing::field::display(&record.job_id));
        // Every line the job logs names its rack and node too.
        if !record.rack_id.is_empty() {
            record
                .span
                .record("rack_id", tracing::field::display(&record.rack_id));
        }
        if !record.node_id.is_empty() {
            record
                .span
                .record("node_id", tracing::field::display(&record.node_id));
        }
        let handle = JobHandle::new(
            Arc::clone(self),
            record.job_id.clone(),
            record.span.clone(),
            record.cancellation_token.clone(),
        );
        // The handle exists before the observer runs: if the observer panics,
        // unwinding drops the handle and the job is sealed as abandoned.
        log_created(&record);
        if let Some(observer) = &self.created_observer {
            observer(&record);
        }
        Ok(handle)
    }

    /// A point-in-time snapshot.
    pub fn get(&self, job_id: &str) -> Option<JobSnapshot> {
        self.read().get(job_id).cloned()
    }

    /// Whether the job exists and has children (without cloning it).
    pub fn is_parent(&self, job_id: &str) -> Option<bool> {
        self.read().get(job_id).map(JobSnapshot::is_parent)
    }

    /// The public state of a job.
    pub fn state_of(&self, job_id: &str) -> Option<JobState> {
        self.read().get(job_id).map(|job| job.state.state())
    }

    /// Snapshots of every record (unordered).
    pub fn snapshots(&self) -> Vec<JobSnapshot> {
        self.read().snapshots().cloned().collect()
    }

    /// Number of records, terminal ones included.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// True when no record is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The parent of a child job.
    pub fn parent_for_job(&self, job_id: &str) -> Option<JobId> {
        self.read()
            .get(job_id)
            .and_then(|job| job.parent_job_id.clone())
    }

    /// IDs of every record that currently has children.
    pub fn parent_job_ids(&self) -> Vec<JobId> {
        self.read()
            .snapshots()
            .filter(|job| job.is_parent())
            .map(|job| job.job_id.clone())
            .collect()
    }

    /// The job's tracing span.
    pub fn span_for_job(&self, job_id: &str) -> Option<tracing::Span> {
        self.read().get(job_id).map(|job| job.span.clone())
    }

    /// Moves a non-terminal job to `Running` with `description`. False (and
    /// nothing changes) when the job is terminal or unknown.
    pub fn mark_running(&self, job_id: &str, description: impl Into<String>) -> bool {
        self.transition(
            job_id,
            JobLifecycleState::Running {
                description: description.into(),
            },
        )
        .is_ok()
    }

    /// Completes a job on behalf of its handle; logs an error if it was
    /// already terminal (nothing is overwritten).
    pub(crate) fn mark_completed(
        &self,
        job_id: &str,
        description: impl Into<String>,
        result_json: impl Into<String>,
    ) -> bool {
        let outcome = self.transition(
            job_id,
            JobLifecycleState::Completed {
                description: description.into(),
                result_json: result_json.into(),
            },
        );
        if let Err(TransitionError::NotAllowed { from, .. }) = &outcome
            && from.is_terminal()
        {
            tracing::error!(
                job_id,
                "Job was terminal before mark_completed or mark_failed had been called"
            );
        }
        outcome.is_ok()
    }

    /// Fails a job on behalf of its handle; logs an error if it was already
    /// terminal (nothing is overwritten).
    pub(crate) fn mark_failed(&self, job_id: &str, failure: JobFailure) -> bool {
        let outcome = self.transition(job_id, failed_state(failure));
        if let Err(TransitionError::NotAllowed { from, .. }) = &outcome
            && from.is_terminal()
        {
            tracing::error!(
                job_id,
                "Job was terminal before mark_failed had been called"
            );
        }
        outcome.is_ok()
    }

    /// Removes a `Queued` job that is not a parent and not linked to one
    /// (pre-spawn rollback). False otherwise.
    pub fn remove_queued_leaf(&self, job_id: &str) -> bool {
        self.write().remove_queued_leaf(job_id)
    }

    /// The job's cooperative cancellation token.
    pub fn cancellation_token_for(&self, job_id: &str) -> Option<CancellationToken> {
        self.read()
            .get(job_id)
            .map(|job| job.cancellation_token.clone())
    }

    /// Signals the job's token. The job stays non-terminal (and keeps its
    /// node busy) until its worker records a terminal state.
    pub fn cancel(&self, job_id: &str) -> bool {
        match self.cancellation_token_for(job_id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Refuses every later creation. Cannot be undone.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// Cancels the token of every non-terminal, non-parent job and returns
    /// their IDs. Tokens are signalled after the lock is released.
    /// The non-terminal job holding `(rack_id, node_id)`, if any.
    pub fn active_job_for_node(&self, rack_id: &str, node_id: &str) -> Option<JobId> {
        self.read().active_job_for_node(rack_id, node_id)
    }

    pub fn cancel_active_leaves(&self) -> Vec<JobId> {
        let active: Vec<(JobId, CancellationToken)> = self
            .read()
            .snapshots()
            .filter(|job| !job.is_parent() && !job.state.is_terminal())
            .map(|job| (job.job_id.clone(), job.cancellation_token.clone()))
            .collect();
        active
            .into_iter()
            .map(|(job_id, token)| {
                token.cancel();
                job_id
            })
            .collect()
    }

    /// Waits until every job in `job_ids` is terminal or missing (TTL eviction
    /// may have removed it), polling every [`TERMINAL_WAIT_POLL_INTERVAL`].
    /// Returns false if `timeout` ran out first.
    pub async fn wait_for_terminal_jobs(
        &self,
        job_ids: &[JobId],
        timeout: Option<Duration>,
    ) -> bool {
        let mut remaining: Vec<JobId> = job_ids.to_vec();
        let wait = async move {
            loop {
                {
                    let jobs = self.read();
                    remaining.retain(|id| jobs.get(id).is_some_and(|job| !job.state.is_terminal()));
                }
                if remaining.is_empty() {
                    return;
                }
                tokio::time::sleep(TERMINAL_WAIT_POLL_INTERVAL).await;
            }
        };
        match timeout {
            Some(timeout) => tokio::time::timeout(timeout, wait).await.is_ok(),
            None => {
                wait.await;
                true
            }
        }
    }

    /// Evicts expired terminal jobs (child-protected, spec §1.13); returns
    /// how many were removed.
    pub fn cleanup_expired(&self) -> usize {
        let now = self.clock.now();
        self.write().cleanup_expired(now, self.ttl)
    }

    /// Applies one state change through the transition table: the single
    /// chokepoint that logs and notifies the terminal observer.
    pub(crate) fn transition(
        &self,
        job_id: &str,
        next: JobLifecycleState,
    ) -> Result<TransitionClass, TransitionError> {
        self.apply(job_id, next, None)
    }

    /// Seals a parent only if it still has exactly `expected_children`
    /// children, so an aggregate computed from a stale child list is never
    /// recorded.
    pub(crate) fn seal_parent_if_children(
        &self,
        job_id: &str,
        expected_children: usize,
        next: JobLifecycleState,
    ) -> Result<TransitionClass, TransitionError> {
        self.apply(job_id, next, Some(expected_children))
    }

    /// Runs `f` with read access to the store. `f` must not call back into
    /// the registry.
    pub(crate) fn with_jobs<R>(&self, f: impl FnOnce(&JobStore) -> R) -> R {
        f(&self.read())
    }

    fn apply(
        &self,
        job_id: &str,
        next: JobLifecycleState,
        expected_children: Option<usize>,
    ) -> Result<TransitionClass, TransitionError> {
        let now = self.clock.now();
        let event = self
            .write()
            .transition_state(job_id, next, now, expected_children)?;
        let class = event.class();
        match event {
            TransitionEvent::Running {
                class,
                job_id,
                rack_id,
                node_id,
                description,
                span,
            } => {
                let _entered = span.enter();
                if class == TransitionClass::Started {
                    tracing::info!(job_id = %job_id, rack_id, node_id, description, "job started");
                } else {
                    tracing::info!(job_id = %job_id, rack_id, node_id, description, "job progress");
                }
            }
            TransitionEvent::Terminal(snapshot) => {
                log_terminal(&snapshot);
                if let Some(observer) = &self.terminal_observer {
                    observer(&snapshot);
                }
            }
        }
        Ok(class)
    }

    fn read(&self) -> RwLockReadGuard<'_, JobStore> {
        self.jobs.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, JobStore> {
        self.jobs.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Shifts a job's timestamps into the past.
    #[cfg(test)]
    pub(crate) fn age_job_for_test(&self, job_id: &str, age: Duration) {
        self.write().age_job_for_test(job_id, age);
    }

    /// Removes a record outright, bypassing every rule.
    #[cfg(test)]
    pub(crate) fn remove_for_test(&self, job_id: &str) -> bool {
        self.write().remove_for_test(job_id)
    }

    /// Asserts that the node index matches the records.
    #[cfg(test)]
    pub(crate) fn assert_store_consistent_for_test(&self) {
        self.read().assert_consistent();
    }
}

pub(crate) fn failed_state(failure: JobFailure) -> JobLifecycleState {
    JobLifecycleState::Failed {
        description: failure.description,
        failure: Arc::from(failure.error),
        message: failure.message,
        result_json: failure.result_json.unwrap_or_default(),
    }
}

/// "job created", inside the job's span, with a uniform field set
/// (`parent_job_id` is the literal "None" when absent).
fn log_created(snapshot: &JobSnapshot) {
    let _entered = snapshot.span.enter();
    let parent_job_id = snapshot
        .parent_job_id
        .as_ref()
        .map_or("None", |id| id.as_str());
    tracing::info!(
        job_id = %snapshot.job_id,
        parent_job_id,
        rack_id = %snapshot.rack_id,
        node_id = %snapshot.node_id,
        description = snapshot.state.description(),
        "job created"
    );
}

/// "job completed" carries the description; "job failed" carries the
/// failure message in its `description` field (the description is usually the
/// generic "Failed").
fn log_terminal(snapshot: &JobSnapshot) {
    let _entered = snapshot.span.enter();
    match &snapshot.state {
        JobLifecycleState::Completed { description, .. } => tracing::info!(
            job_id = %snapshot.job_id,
            rack_id = %snapshot.rack_id,
            node_id = %snapshot.node_id,
            description = description.as_str(),
            "job completed"
        ),
        JobLifecycleState::Failed { message, .. } => tracing::info!(
            job_id = %snapshot.job_id,
            rack_id = %snapshot.rack_id,
            node_id = %snapshot.node_id,
            description = message.as_str(),
            "job failed"
        ),
        JobLifecycleState::Queued { .. } | JobLifecycleState::Running { .. } => {}
    }
}
