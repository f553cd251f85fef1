//! `JobTracker`: the RMS facade over the generic registry (spec §1.1).
//!
//! It adds the RMS domain (`RmsJobDomain`, which words every failure), the
//! tracker entry points handlers call, tracker-owned parent handles and
//! parent aggregation, workflow metrics, the TTL reaper, shutdown draining,
//! batch admission, ephemeral cache cleanup, and the flat [`JobInfo`] view.
//!
//! Locking: the parent-handle map is a `std::sync::Mutex`. Lock order is
//! always parent-handle map → registry lock (never the reverse), and no lock
//! is ever held across an `.await`.

use std::collections::{HashMap, HashSet};
use std::fmt::Display;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::aggregate::{self, ParentOutcome, serialize_result_json};
use super::cleanup::{CleanupPlan, CleanupReport};
use super::clock::{Clock, SystemClock};
use super::config::JobLimits;
use super::domain::JobDomain;
use super::error::{JobError, JobFailure, job_error_of};
use super::handle::{JobHandle, JobJoinHandle, ParentSeal, panic_message, run_cleanup_supervised};
use super::ids::JobId;
use super::job_type::JobType;
use super::metrics::WorkflowMetrics;
use super::registry::{JobRegistry, JobSnapshot, JobSpec, MAX_TRACKED_JOBS};
use super::state::{JobLifecycleState, JobState};

/// Message recorded for a job whose handle was dropped unsealed.
pub const ABANDONED_MESSAGE: &str = "job abandoned before recording a terminal state";
/// Description recorded for a job whose handle was dropped unsealed.
pub const ABANDONED_DESCRIPTION: &str = "Abandoned";
/// Message returned for creations after shutdown began.
pub const SHUTTING_DOWN_MESSAGE: &str = "server is shutting down; new jobs are not accepted";

/// Default retention of terminal jobs: 24 h.
pub const DEFAULT_TTL_MS: u64 = 86_400_000;
/// Default retention of terminal jobs as a `Duration`.
pub const DEFAULT_TERMINAL_JOB_TTL: Duration = Duration::from_millis(DEFAULT_TTL_MS);
/// Upper bound on the reaper cadence, so eviction never waits on a creation.
pub const REAPER_INTERVAL: Duration = Duration::from_secs(300);
/// Lower bound on the reaper cadence, so a tiny TTL cannot spin the sweep.
pub const MIN_REAPER_INTERVAL: Duration = Duration::from_secs(1);
/// How long the server's graceful stop waits for signalled jobs.
pub const SHUTDOWN_AWAIT_TERMINAL_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// How long an ephemeral cache cleanup waits for its child jobs.
pub const EPHEMERAL_CLEANUP_TIMEOUT: Duration = Duration::from_secs(3600);
/// Synthetic node of the ephemeral cache cleanup supervisor job.
pub const EPHEMERAL_CLEANUP_NODE_ID: &str = "ephemeral-object-cache-cleanup";

/// The reaper cadence for a TTL: `clamp(ttl, 1 s, 300 s)`.
pub fn reaper_interval(ttl: Duration) -> Duration {
    ttl.clamp(MIN_REAPER_INTERVAL, REAPER_INTERVAL)
}

/// The single RMS job domain: supplies every failure the registry records or
/// returns, worded job-type-neutrally because all job types share it.
#[derive(Debug, Clone, Copy, Default)]
pub struct RmsJobDomain;

/// The handle type RMS workers own.
pub type RmsJobHandle = JobHandle<RmsJobDomain>;

impl JobDomain for RmsJobDomain {
    fn dropped_failure() -> JobFailure {
        job_failure(JobError::Internal, ABANDONED_MESSAGE).with_description(ABANDONED_DESCRIPTION)
    }

    fn at_capacity_failure(current: usize, max: usize) -> JobFailure {
        job_failure(
            JobError::Internal,
            format!(
                "job tracker at capacity ({current}/{max} jobs); retry after in-flight jobs finish"
            ),
        )
    }

    fn node_busy_failure(rack_id: &str, node_id: &str, active_job_id: &JobId) -> JobFailure {
        job_failure(
            JobError::UpdateInProgress,
            format!(
                "job already in progress for rack {rack_id} node {node_id} (job_id {active_job_id})"
            ),
        )
    }

    fn shutting_down_failure() -> JobFailure {
        job_failure(JobError::Internal, SHUTTING_DOWN_MESSAGE)
    }

    fn parent_unavailable_failure(parent_job_id: &JobId) -> JobFailure {
        job_failure(
            JobError::Internal,
            format!("parent job {parent_job_id} is missing, terminal, or already a child"),
        )
    }
}

#[derive(Serialize)]
struct DefaultFailureResult<'a> {
    // Field order is the JSON key order the spec requires.
    status: &'static str,
    error_code: String,
    error_message: &'a str,
}

/// The default failure `result_json`:
/// `{"status":"failed","error_code":"<Debug name>","error_message":"<msg>"}`.
pub fn default_failure_result_json(error_code: JobError, error_message: &str) -> String {
    serialize_result_json(&DefaultFailureResult {
        status: "failed",
        error_code: format!("{error_code:?}"),
        error_message,
    })
}

/// A failure carrying `error_code` with the default failure `result_json`.
pub fn job_failure(error_code: JobError, error_message: impl Display) -> JobFailure {
    let error_message = error_message.to_string();
    let result_json = default_failure_result_json(error_code, &error_message);
    JobFailure::new(error_code, error_message).with_result_json(result_json)
}

/// The flat job view used by the status RPCs (spec §1.2).
#[derive(Debug, Clone)]
pub struct JobInfo {
    pub job_id: String,
    pub span: tracing::Span,
    pub state: JobState,
    pub state_description: String,
    pub rack_id: String,
    pub node_id: String,
    /// Recovered from the failure's root cause (`Internal` if none);
    /// `Unspecified` unless failed.
    pub error_code: JobError,
    /// The failure message; empty unless failed.
    pub error_message: String,
    /// Empty unless completed or failed.
    pub result_json: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub child_job_ids: Vec<String>,
    pub parent_job_id: Option<String>,
}

impl JobInfo {
    /// True when the job has children.
    pub fn is_parent(&self) -> bool {
        !self.child_job_ids.is_empty()
    }
}

impl From<JobSnapshot> for JobInfo {
    fn from(snapshot: JobSnapshot) -> Self {
        let state = snapshot.state.state();
        let state_description = snapshot.state.description().to_owned();
        let (error_code, error_message, result_json) = match snapshot.state {
            JobLifecycleState::Failed {
                failure,
                message,
                result_json,
                ..
            } => (job_error_of(failure.as_ref()), message, result_json),
            JobLifecycleState::Completed { result_json, .. } => {
                (JobError::Unspecified, String::new(), result_json)
            }
            JobLifecycleState::Queued { .. } | JobLifecycleState::Running { .. } => {
                (JobError::Unspecified, String::new(), String::new())
            }
        };
        JobInfo {
            job_id: snapshot.job_id.into(),
            span: snapshot.span,
            state,
            state_description,
            rack_id: snapshot.rack_id,
            node_id: snapshot.node_id,
            error_code,
            error_message,
            result_json,
            created_at: snapshot.created_at,
            updated_at: snapshot.updated_at,
            child_job_ids: snapshot
                .child_job_ids
                .into_iter()
                .map(String::from)
                .collect(),
            parent_job_id: snapshot.parent_job_id.map(String::from),
        }
    }
}

/// A batch target refused by [`JobTracker::create_batch_jobs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedBatchTarget {
    pub rack_id: String,
    pub node_id: String,
    pub error_message: String,
}

/// Targets admitted by [`JobTracker::create_batch_jobs`]: the payload, the
/// child's handle, and what the check returned for it.
pub type AdmittedBatchJob<P, S> = (P, RmsJobHandle, S);

/// How an ephemeral cache cleanup is being run.
#[must_use = "wait on or drop the cleanup handle"]
pub enum EphemeralCleanup {
    /// Under a tracked supervisor job.
    Tracked(JobJoinHandle),
    /// In a detached task, because no supervisor job could be created.
    Untracked(tokio::task::JoinHandle<CleanupReport>),
}

impl EphemeralCleanup {
    /// Waits for the cleanup and returns its report.
    pub async fn wait(self) -> Result<CleanupReport, tokio::task::JoinError> {
        match self {
            EphemeralCleanup::Tracked(handle) => handle.wait().await,
            EphemeralCleanup::Untracked(handle) => handle.await,
        }
    }
}

/// Configures a [`JobTracker`].
pub struct JobTrackerBuilder {
    terminal_job_ttl: Duration,
    max_tracked_jobs: usize,
    clock: Arc<dyn Clock>,
    metrics: Option<Arc<WorkflowMetrics>>,
}

impl JobTrackerBuilder {
    /// How long terminal jobs stay queryable (default 24 h).
    pub fn terminal_job_ttl(mut self, ttl: Duration) -> Self {
        self.terminal_job_ttl = ttl;
        self
    }

    /// Cap on retained records (default 10,000).
    pub fn max_tracked_jobs(mut self, max: usize) -> Self {
        self.max_tracked_jobs = max;
        self
    }

    /// Both limits from configuration.
    pub fn limits(self, limits: &JobLimits) -> Self {
        self.terminal_job_ttl(limits.terminal_job_ttl())
            .max_tracked_jobs(limits.max_tracked_jobs.get())
    }

    /// The clock for timestamps and expiry (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Shares an existing metrics sink (default: a new one).
    pub fn metrics(mut self, metrics: Arc<WorkflowMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    pub fn build(self) -> JobTracker {
        let metrics = self.metrics.unwrap_or_default();
        let mut registry =
            JobRegistry::with_clock(self.terminal_job_ttl, self.max_tracked_jobs, self.clock);
        // Both observers capture the metrics sink, not the tracker, so there
        // is no reference cycle; both run after the registry lock is released.
        let created = Arc::clone(&metrics);
        registry.set_created_observer(Arc::new(move |snapshot: &JobSnapshot| {
            created.record_created(snapshot);
        }));
        let terminal = Arc::clone(&metrics);
        registry.set_terminal_observer(Arc::new(move |snapshot: &JobSnapshot| {
            terminal.record_terminal(snapshot);
        }));
        JobTracker {
            registry: Arc::new(registry),
            parent_job_handles: Mutex::new(HashMap::new()),
            terminal_job_ttl: self.terminal_job_ttl,
            metrics,
        }
    }
}

/// Thread-safe tracker of RMS asynchronous jobs.
pub struct JobTracker {
    registry: Arc<JobRegistry<RmsJobDomain>>,
    /// Owned handles of aggregate parents, which have no worker of their own.
    /// Aggregation or an explicit `mark_*` consumes the handle to seal.
    parent_job_handles: Mutex<HashMap<JobId, RmsJobHandle>>,
    terminal_job_ttl: Duration,
    metrics: Arc<WorkflowMetrics>,
}

impl Default for JobTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl JobTracker {
    /// A builder with the spec's defaults (24 h TTL, 10,000 records).
    pub fn builder() -> JobTrackerBuilder {
        JobTrackerBuilder {
            terminal_job_ttl: DEFAULT_TERMINAL_JOB_TTL,
            max_tracked_jobs: MAX_TRACKED_JOBS,
            clock: Arc::new(SystemClock),
            metrics: None,
        }
    }

    /// A tracker with the defaults.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A tracker with explicit retention limits.
    pub fn with_retention_limits(terminal_job_ttl: Duration, max_tracked_jobs: usize) -> Self {
        Self::builder()
            .terminal_job_ttl(terminal_job_ttl)
            .max_tracked_jobs(max_tracked_jobs)
            .build()
    }

    /// The underlying registry (for generic utilities such as cleanup plans).
    pub fn registry(&self) -> Arc<JobRegistry<RmsJobDomain>> {
        Arc::clone(&self.registry)
    }

    /// The workflow metrics sink.
    pub fn metrics(&self) -> &Arc<WorkflowMetrics> {
        &self.metrics
    }

    /// The retention period of terminal jobs.
    pub fn terminal_job_ttl(&self) -> Duration {
        self.terminal_job_ttl
    }

    /// The record cap.
    pub fn max_tracked_jobs(&self) -> usize {
        self.registry.max_jobs()
    }

    // ── creation ──

    /// A leaf with no idle check and no metrics (tests and internal jobs).
    pub fn create_job(
        &self,
        rack_id: &str,
        node_id: &str,
        job_type: JobType,
    ) -> Result<RmsJobHandle, JobFailure> {
        self.registry
            .create_job(leaf_spec(rack_id, node_id, job_type, ""), None, false)
    }

    /// The non-terminal job holding `(rack_id, node_id)`, if any.
    pub fn active_job_for_node(&self, rack_id: &str, node_id: &str) -> Option<String> {
        self.registry
            .active_job_for_node(rack_id, node_id)
            .map(|id| id.to_string())
    }

    /// A leaf, refused with node-busy while another non-terminal job holds
    /// `(rack_id, node_id)`. Not a visible workflow.
    pub fn create_job_if_node_idle(
        &self,
        rack_id: &str,
        node_id: &str,
        job_type: JobType,
    ) -> Result<RmsJobHandle, JobFailure> {
        self.registry
            .create_job(leaf_spec(rack_id, node_id, job_type, ""), None, true)
    }

    /// Like [`Self::create_job_if_node_idle`], registered as an externally
    /// visible workflow (counts in metrics).
    pub fn create_visible_workflow_job_if_node_idle(
        &self,
        rack_id: &str,
        node_id: &str,
        job_type: JobType,
    ) -> Result<RmsJobHandle, JobFailure> {
        self.registry.create_job(
            leaf_spec(rack_id, node_id, job_type, "").with_workflow_type(job_type),
            None,
            true,
        )
    }

    /// A child of `parent_job_id` (node must be idle), then refreshes the
    /// parent.
    pub fn create_child_job(
        &self,
        parent_job_id: &str,
        rack_id: &str,
        node_id: &str,
        job_type: JobType,
    ) -> Result<RmsJobHandle, JobFailure> {
        let job = self.registry.create_job(
            leaf_spec(rack_id, node_id, job_type, parent_job_id),
            Some(parent_job_id),
            true,
        )?;
        self.refresh_parent_state(parent_job_id);
        Ok(job)
    }

    /// A `Running` parent record with description "Batch {noun} accepting
    /// child jobs"; `None` on any refusal. The tracker keeps its handle.
    pub fn create_parent_job(&self, rack_id: &str, job_type: JobType) -> Option<String> {
        let spec = JobSpec::new_parent(
            rack_id,
            format!("Batch {} accepting child jobs", job_type.batch_noun()),
            job_type.span(""),
        )
        .with_workflow_type(job_type);
        let handle = match self.registry.create_job(spec, None, false) {
            Ok(handle) => handle,
            Err(failure) => {
                tracing::warn!(rack_id, error = %failure, "parent job rejected");
                return None;
            }
        };
        let job_id = handle.id().clone();
        self.parent_handles().insert(job_id.clone(), handle);
        Some(job_id.into())
    }

    /// Reserves child jobs for `targets` in request order. A target repeating
    /// an earlier `(rack_id, node_id)` of this batch is rejected before
    /// `check` runs; otherwise `check(payload)` runs, then
    /// [`Self::create_child_job`]. Rejections carry the check's or the
    /// creation failure's message.
    pub fn create_batch_jobs<P, S>(
        &self,
        parent_job_id: &str,
        job_type: JobType,
        targets: Vec<(String, String, P)>,
        mut check: impl FnMut(&P) -> Result<S, String>,
    ) -> (Vec<AdmittedBatchJob<P, S>>, Vec<RejectedBatchTarget>) {
        let mut seen: HashSet<(String, String)> = HashSet::new();
        let mut admitted = Vec::new();
        let mut rejected = Vec::new();
        for (rack_id, node_id, payload) in targets {
            let outcome = if !seen.insert((rack_id.clone(), node_id.clone())) {
                Err(format!(
                    "duplicate target rack_id/node_id: {rack_id}/{node_id}"
                ))
            } else {
                check(&payload).and_then(|state| {
                    self.create_child_job(parent_job_id, &rack_id, &node_id, job_type)
                        .map(|handle| (handle, state))
                        .map_err(|failure| failure.message)
                })
            };
            match outcome {
                Ok((handle, state)) => admitted.push((payload, handle, state)),
                Err(error_message) => {
                    tracing::warn!(
                        parent_job_id,
                        rack_id = %rack_id,
                        node_id = %node_id,
                        error = %error_message,
                        "batch job rejected"
                    );
                    rejected.push(RejectedBatchTarget {
                        rack_id,
                        node_id,
                        error_message,
                    });
                }
            }
        }
        (admitted, rejected)
    }

    /// Pre-spawn rollback: removes a `Queued` job that is neither a parent nor
    /// linked to one.
    pub fn remove_queued_job(&self, job_id: &str) -> bool {
        self.registry.remove_queued_leaf(job_id)
    }

    // ── reads ──

    /// The job, with a parent re-aggregated first so the first poll after
    /// its last child finishes already shows the terminal parent.
    pub fn get_job(&self, job_id: &str) -> Option<JobInfo> {
        if self.registry.is_parent(job_id)? {
            self.refresh_parent_state(job_id);
        }
        self.registry.get(job_id).map(JobInfo::from)
    }

    /// Every tracked job (parents re-aggregated first), oldest first.
    pub fn list_jobs(&self) -> Vec<JobInfo> {
        self.refresh_all_parents();
        let mut jobs = self.registry.snapshots();
        jobs.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then_with(|| a.job_id.cmp(&b.job_id))
        });
        jobs.into_iter().map(JobInfo::from).collect()
    }

    /// The job's tracing span.
    pub fn span_for_job(&self, job_id: &str) -> Option<tracing::Span> {
        self.registry.span_for_job(job_id)
    }

    /// The job's cooperative cancellation token.
    pub fn cancellation_token_for(&self, job_id: &str) -> Option<CancellationToken> {
        self.registry.cancellation_token_for(job_id)
    }

    /// Signals the job's cancellation token (cooperative; the node stays busy
    /// until the worker records a terminal state).
    pub fn cancel(&self, job_id: &str) -> bool {
        self.registry.cancel(job_id)
    }

    // ── state changes ──

    /// Moves a job to `Running`; logs an error if it is terminal or unknown.
    pub fn mark_running(&self, job_id: &str, description: &str) {
        if !self.registry.mark_running(job_id, description) {
            if self.registry.state_of(job_id).is_some() {
                tracing::error!(job_id, "mark_running called for job in terminal state");
            } else {
                tracing::error!(job_id, "mark_running called for unknown job");
            }
        }
    }

    /// Completes a tracker-owned parent (description "Completed"). Leaf
    /// workers complete their own handle instead.
    pub fn mark_completed(&self, job_id: &str, result_json: Option<String>) {
        let mut handles = self.parent_handles();
        match handles.remove(job_id) {
            Some(handle) => {
                handle.complete("Completed", result_json.unwrap_or_default());
                drop(handles);
            }
            None => {
                drop(handles);
                tracing::error!(job_id, "mark_completed called for unknown or terminal job");
            }
        }
    }

    /// Fails a tracker-owned parent with the default failure `result_json`.
    pub fn mark_failed(&self, job_id: &str, error_code: JobError, error_message: &str) {
        self.mark_failed_with_result(job_id, error_code, error_message, None);
    }

    /// Fails a tracker-owned parent; `result_json` overrides the default
    /// failure payload when given.
    pub fn mark_failed_with_result(
        &self,
        job_id: &str,
        error_code: JobError,
        error_message: &str,
        result_json: Option<String>,
    ) {
        let result_json =
            result_json.unwrap_or_else(|| default_failure_result_json(error_code, error_message));
        let failure = JobFailure::new(error_code, error_message).with_result_json(result_json);
        let mut handles = self.parent_handles();
        match handles.remove(job_id) {
            Some(handle) => {
                handle.fail(failure);
                drop(handles);
            }
            None => {
                drop(handles);
                tracing::error!(job_id, "mark_failed called for unknown or terminal job");
            }
        }
    }

    /// Fails a tracker-owned parent with `JobError::Other` and an empty
    /// `result_json` (e.g. "no matching nodes found").
    pub fn mark_failed_message(&self, job_id: &str, error_message: &str) {
        self.mark_failed_message_with_result(job_id, error_message, None);
    }

    /// Like [`Self::mark_failed_message`] with an explicit payload.
    pub fn mark_failed_message_with_result(
        &self,
        job_id: &str,
        error_message: &str,
        result_json: Option<String>,
    ) {
        self.mark_failed_with_result(
            job_id,
            JobError::Other,
            error_message,
            Some(result_json.unwrap_or_default()),
        );
    }

    // ── aggregation ──

    /// Re-aggregates a child's parent. Handlers that seal an admitted child
    /// without spawning a worker must call this; the spawn path does it.
    pub fn refresh_parent_for_child(&self, child_job_id: &str) {
        if let Some(parent) = self.registry.parent_for_job(child_job_id) {
            self.refresh_parent_state(&parent);
        }
    }

    /// Aggregates a parent's state from its children (spec §1.12). Does
    /// nothing for a missing, childless, terminal or untyped parent.
    pub fn refresh_parent_state(&self, parent_job_id: &str) {
        let counted = self.registry.with_jobs(|jobs| {
            let parent = jobs.get(parent_job_id)?;
            if !parent.is_parent() || parent.state.is_terminal() {
                return None;
            }
            let job_type = parent.workflow_type?;
            Some((job_type, aggregate::count_children(jobs, parent)))
        });
        let Some((job_type, counts)) = counted else {
            return;
        };
        if counts.total == 0 {
            return;
        }
        let expected_children = counts.total;
        let failing = counts.failed > 0 || counts.missing > 0;
        match aggregate::parent_outcome(job_type, counts) {
            ParentOutcome::Running(description) => {
                // A refusal here means another thread sealed the parent
                // meanwhile, which is fine.
                self.registry.mark_running(parent_job_id, description);
            }
            ParentOutcome::Terminal(state) => {
                self.seal_parent(parent_job_id, expected_children, state, failing);
            }
        }
    }

    /// Seals a parent through its owned handle. The handle map stays locked
    /// for the whole seal so two refreshes cannot both find it missing.
    fn seal_parent(
        &self,
        parent_job_id: &str,
        expected_children: usize,
        state: JobLifecycleState,
        failing: bool,
    ) {
        let mut handles = self.parent_handles();
        match handles.remove(parent_job_id) {
            Some(handle) => {
                if let ParentSeal::ChildrenChanged(handle) =
                    handle.seal_parent_if_children(expected_children, state)
                {
                    // A child attached after counting; its creator refreshes
                    // the parent again once it returns.
                    handles.insert(handle.id().clone(), handle);
                }
            }
            None => {
                // Logged only when the parent is not already terminal, so
                // polling a sealed parent again stays quiet.
                let terminal = self
                    .registry
                    .state_of(parent_job_id)
                    .is_none_or(JobState::is_terminal);
                if !terminal {
                    if failing {
                        tracing::error!(
                            parent_job_id,
                            "parent job handle missing during failure aggregation"
                        );
                    } else {
                        tracing::error!(
                            parent_job_id,
                            "parent job handle missing during completion aggregation"
                        );
                    }
                }
            }
        }
    }

    /// Aggregates every parent, so a batch nobody polls still ends.
    pub fn refresh_all_parents(&self) {
        for parent in self.registry.parent_job_ids() {
            self.refresh_parent_state(&parent);
        }
    }

    // ── retention ──

    /// Evicts expired terminal jobs (child-protected); returns how many.
    pub fn cleanup_expired(&self) -> usize {
        self.registry.cleanup_expired()
    }

    /// One reaper pass: aggregate every parent, then evict. Refreshing first
    /// lets an unpolled batch reach a terminal state and later be evicted
    /// instead of leaking capacity.
    pub fn reaper_sweep(&self) -> usize {
        self.refresh_all_parents();
        self.cleanup_expired()
    }

    /// Starts the reaper at `reaper_interval(ttl)`; it stops when `stop` is
    /// cancelled (the server's shutdown order) or once the tracker is
    /// dropped (the task holds only a `Weak` reference).
    pub fn spawn_reaper(self: &Arc<Self>, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        self.spawn_reaper_with_interval(reaper_interval(self.terminal_job_ttl), stop)
    }

    /// Starts the reaper with an explicit interval (a test seam).
    pub fn spawn_reaper_with_interval(
        self: &Arc<Self>,
        interval: Duration,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let weak: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    _ = tick.tick() => {}
                }
                let Some(tracker) = weak.upgrade() else {
                    break;
                };
                tracker.reaper_sweep();
            }
        })
    }

    // ── workers ──

    /// Spawns `run(job)` under the registry's supervisor, re-aggregating the
    /// job's parent whenever the worker exits: normal return, unsealed
    /// return, panic or abort.
    pub fn spawn_job<F, Fut>(self: &Arc<Self>, job: RmsJobHandle, run: F) -> JobJoinHandle
    where
        F: FnOnce(RmsJobHandle) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let guard = self.refresh_guard(&job);
        self.registry.spawn_job(job, move |job| async move {
            // Bound before the worker future, so on every exit path it drops
            // after the handle (which seals the job first).
            let _guard = guard;
            run(job).await;
        })
    }

    /// Like [`Self::spawn_job`], then runs `cleanup_plan`.
    pub fn spawn_job_with_cleanup<F, Fut>(
        self: &Arc<Self>,
        job: RmsJobHandle,
        cleanup_plan: CleanupPlan,
        run: F,
    ) -> JobJoinHandle
    where
        F: FnOnce(RmsJobHandle) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let guard = self.refresh_guard(&job);
        self.registry
            .spawn_job_with_cleanup(job, cleanup_plan, move |job| async move {
                let _guard = guard;
                run(job).await;
            })
    }

    fn refresh_guard(self: &Arc<Self>, job: &RmsJobHandle) -> RefreshParentOnWorkerExit {
        RefreshParentOnWorkerExit {
            tracker: Arc::downgrade(self),
            job_id: job.id().clone(),
        }
    }

    /// Deletes an ephemeral artifact cache once `child_job_ids` are all
    /// terminal, under a dedicated supervisor job (rack "", node
    /// "ephemeral-object-cache-cleanup"). If that job cannot be created the
    /// plan still runs, in a detached task, rather than leaking the directory.
    pub fn spawn_ephemeral_cache_cleanup(
        self: &Arc<Self>,
        child_job_ids: Vec<JobId>,
        cache_dir: impl Into<PathBuf>,
    ) -> EphemeralCleanup {
        let plan = CleanupPlan::remove_dir_after_jobs_terminate(
            child_job_ids,
            cache_dir,
            Some(EPHEMERAL_CLEANUP_TIMEOUT),
        );
        let span = tracing::info_span!(
            "ephemeral_object_cache_cleanup",
            job_id = tracing::field::Empty,
            parent_job_id = tracing::field::Empty,
            rack_id = tracing::field::Empty,
            node_id = tracing::field::Empty
        );
        let spec = JobSpec::new(
            "",
            EPHEMERAL_CLEANUP_NODE_ID,
            "Cleaning up ephemeral object cache",
            span.clone(),
        );
        match self.registry.create_job(spec, None, false) {
            Ok(job) => EphemeralCleanup::Tracked(self.registry.spawn_job_with_cleanup(
                job,
                plan,
                |job| async move { job.complete("Completed", "{}") },
            )),
            Err(failure) => {
                if failure.message.starts_with("job tracker at capacity") {
                    tracing::warn!(
                        "job registry at capacity; running ephemeral object cache cleanup without a tracked supervisor"
                    );
                } else {
                    tracing::warn!(
                        error = %failure,
                        "running ephemeral object cache cleanup without a tracked supervisor"
                    );
                }
                let registry = self.registry();
                EphemeralCleanup::Untracked(tokio::spawn(run_cleanup_supervised(
                    plan, registry, span,
                )))
            }
        }
    }

    // ── shutdown ──

    /// Begins shutdown (irreversible: every later creation is refused),
    /// cancels every non-terminal non-parent job, and returns how many were
    /// signalled.
    pub fn shutdown(&self) -> usize {
        self.registry.begin_shutdown();
        self.registry.cancel_active_leaves().len()
    }

    /// Like [`Self::shutdown`], then waits up to `timeout` for the signalled
    /// jobs to become terminal (or be evicted). Returns the number signalled,
    /// not the number that finished.
    pub async fn shutdown_and_await_terminal(&self, timeout: Duration) -> usize {
        self.registry.begin_shutdown();
        let job_ids = self.registry.cancel_active_leaves();
        if job_ids.is_empty() {
            return 0;
        }
        if !self
            .registry
            .wait_for_terminal_jobs(&job_ids, Some(timeout))
            .await
        {
            tracing::warn!(
                jobs_cancelled = job_ids.len(),
                timeout_secs = timeout.as_secs(),
                "graceful shutdown wait timed out; some jobs did not reach a terminal state before the deadline"
            );
        }
        job_ids.len()
    }

    fn parent_handles(&self) -> MutexGuard<'_, HashMap<JobId, RmsJobHandle>> {
        // Map operations cannot be left half-applied; a poisoned lock is safe.
        self.parent_job_handles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

fn leaf_spec(rack_id: &str, node_id: &str, job_type: JobType, parent_job_id: &str) -> JobSpec {
    JobSpec::new(rack_id, node_id, "Queued", job_type.span(parent_job_id))
}

/// Re-aggregates a worker's parent when the worker future is dropped, on any
/// exit. The refresh runs under `catch_unwind`: a second panic while a
/// panicking worker unwinds would abort the process.
struct RefreshParentOnWorkerExit {
    tracker: Weak<JobTracker>,
    job_id: JobId,
}

impl Drop for RefreshParentOnWorkerExit {
    fn drop(&mut self) {
        let Some(tracker) = self.tracker.upgrade() else {
            return;
        };
        let refreshed = std::panic::catch_unwind(AssertUnwindSafe(|| {
            tracker.refresh_parent_for_child(&self.job_id);
        }));
        if let Err(payload) = refreshed {
            tracing::error!(
                job_id = %self.job_id,
                panic_message = %panic_message(payload),
                "parent refresh panicked after worker exit"
            );
        }
    }
}
