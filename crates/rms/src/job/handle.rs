//! The RAII job handle, the supervisor, and panic/abort handling (spec §1.7).
//!
//! A [`JobHandle`] is owned by the worker doing the job. Sealing it
//! (`complete`/`fail`) consumes it. If it is dropped unsealed — the worker
//! returned early, panicked (unwinding drops it) or its task was aborted (the
//! future is dropped) — `Drop` records the domain's `dropped_failure`. Since
//! the registry refuses any transition out of a terminal state, a terminal
//! state the worker recorded is never overwritten by that fallback.
//!
//! `spawn_job` runs the worker as its own Tokio task and a supervisor task
//! that awaits it, then runs the optional cleanup plan in a further task so a
//! cleanup panic is contained and reported rather than propagated.

use std::fmt;
use std::future::Future;
use std::ops::Deref;
use std::sync::Arc;

use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::cleanup::{CleanupPlan, CleanupReport};
use super::domain::JobDomain;
use super::error::JobFailure;
use super::ids::JobId;
use super::registry::JobRegistry;
use super::state::{JobLifecycleState, TransitionError};

/// Owned handle of one created job; seal it or it seals itself as abandoned.
#[must_use = "move job handles into their worker and complete or fail them"]
pub struct JobHandle<D: JobDomain> {
    registry: Arc<JobRegistry<D>>,
    job_id: JobId,
    span: tracing::Span,
    cancellation_token: CancellationToken,
    finished: bool,
}

/// Result of a conditional parent seal (tracker-internal).
pub(crate) enum ParentSeal<D: JobDomain> {
    /// The parent is now terminal (sealed here, or it already was).
    Done,
    /// A child attached after the aggregate was computed; the handle comes
    /// back unsealed.
    ChildrenChanged(JobHandle<D>),
}

impl<D: JobDomain> JobHandle<D> {
    pub(crate) fn new(
        registry: Arc<JobRegistry<D>>,
        job_id: JobId,
        span: tracing::Span,
        cancellation_token: CancellationToken,
    ) -> Self {
        Self {
            registry,
            job_id,
            span,
            cancellation_token,
            finished: false,
        }
    }

    /// The job's ID.
    pub fn id(&self) -> &JobId {
        &self.job_id
    }

    /// The job's tracing span.
    pub fn span(&self) -> tracing::Span {
        self.span.clone()
    }

    /// The job's cooperative cancellation token.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancellation_token.clone()
    }

    /// Moves the job to `Running` with `description` (first call: "job
    /// started"; later: "job progress"). Ignored with a warning once the job
    /// is no longer active.
    pub fn progress(&self, description: impl Into<String>) {
        if !self.registry.mark_running(&self.job_id, description) {
            tracing::warn!(
                job_id = %self.job_id,
                "progress update ignored; job no longer active"
            );
        }
    }

    /// Seals the job `Completed`.
    pub fn complete(mut self, description: impl Into<String>, result_json: impl Into<String>) {
        self.finished = true;
        self.registry
            .mark_completed(&self.job_id, description, result_json);
    }

    /// Seals the job `Failed`.
    pub fn fail(mut self, failure: JobFailure) {
        self.finished = true;
        self.registry.mark_failed(&self.job_id, failure);
    }

    /// Seals a parent with an aggregate computed for `expected_children`
    /// children; hands the handle back if a child attached meanwhile.
    pub(crate) fn seal_parent_if_children(
        mut self,
        expected_children: usize,
        next: JobLifecycleState,
    ) -> ParentSeal<D> {
        match self
            .registry
            .seal_parent_if_children(&self.job_id, expected_children, next)
        {
            Err(TransitionError::ChildrenChanged { .. }) => ParentSeal::ChildrenChanged(self),
            // Sealed now, or already terminal / gone: either way nothing is
            // left for this handle to do.
            Ok(_) | Err(TransitionError::NotAllowed { .. } | TransitionError::UnknownJob(_)) => {
                self.finished = true;
                ParentSeal::Done
            }
        }
    }
}

impl<D: JobDomain> Deref for JobHandle<D> {
    type Target = str;

    fn deref(&self) -> &str {
        self.job_id.as_str()
    }
}

impl<D: JobDomain> fmt::Display for JobHandle<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.job_id, f)
    }
}

impl<D: JobDomain> fmt::Debug for JobHandle<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobHandle")
            .field("job_id", &self.job_id)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl<D: JobDomain> PartialEq for JobHandle<D> {
    fn eq(&self, other: &Self) -> bool {
        self.job_id == other.job_id
    }
}

impl<D: JobDomain> Eq for JobHandle<D> {}

impl<D: JobDomain> Drop for JobHandle<D> {
    fn drop(&mut self) {
        if !self.finished {
            self.finished = true;
            // Runs during unwinding too; `mark_failed` only takes the registry
            // lock briefly and never calls user code under it.
            self.registry
                .mark_failed(&self.job_id, D::dropped_failure());
        }
    }
}

/// Join handle of a supervised job; wait on it or detach it.
#[must_use = "call wait or detach on job join handles"]
pub struct JobJoinHandle {
    job_id: JobId,
    supervisor: JoinHandle<CleanupReport>,
}

impl JobJoinHandle {
    /// The supervised job's ID.
    pub fn job_id(&self) -> &JobId {
        &self.job_id
    }

    /// Lets the supervisor run on (cleanup still happens) without waiting.
    pub fn detach(self) {
        drop(self.supervisor);
    }

    /// Waits for the worker and its cleanup. Resolves `Ok` even when the
    /// worker panicked or was aborted; the report says what cleanup did.
    pub async fn wait(self) -> Result<CleanupReport, JoinError> {
        self.supervisor.await
    }
}

impl<D: JobDomain> JobRegistry<D> {
    /// Spawns `run(job)` under a supervisor, with no cleanup plan.
    pub fn spawn_job<F, Fut>(self: &Arc<Self>, job: JobHandle<D>, run: F) -> JobJoinHandle
    where
        F: FnOnce(JobHandle<D>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.spawn_supervised(job, None, run)
    }

    /// Spawns `run(job)` under a supervisor that runs `cleanup_plan` after the
    /// worker exits, however it exits.
    pub fn spawn_job_with_cleanup<F, Fut>(
        self: &Arc<Self>,
        job: JobHandle<D>,
        cleanup_plan: CleanupPlan,
        run: F,
    ) -> JobJoinHandle
    where
        F: FnOnce(JobHandle<D>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.spawn_supervised(job, Some(cleanup_plan), run)
    }

    fn spawn_supervised<F, Fut>(
        self: &Arc<Self>,
        job: JobHandle<D>,
        cleanup_plan: Option<CleanupPlan>,
        run: F,
    ) -> JobJoinHandle
    where
        F: FnOnce(JobHandle<D>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let job_id = job.id().clone();
        let span = job.span();
        let worker = tokio::spawn(run(job).instrument(span.clone()));
        let registry = Arc::clone(self);
        let cleanup_span = span.clone();
        let supervisor = tokio::spawn(
            async move {
                if let Err(error) = worker.await {
                    // The handle was dropped with the worker, so the job is
                    // already sealed; the panic is reported, not propagated.
                    tracing::warn!(%error, "job worker task exited unsuccessfully");
                }
                match cleanup_plan {
                    Some(plan) => run_cleanup_supervised(plan, registry, cleanup_span).await,
                    None => CleanupReport::Skipped,
                }
            }
            .instrument(span),
        );
        JobJoinHandle { job_id, supervisor }
    }
}

/// Runs a cleanup plan in its own task so its panic becomes a `JoinError`
/// (reported as `Panicked`) instead of tearing down the supervisor.
pub(crate) async fn run_cleanup_supervised<D: JobDomain>(
    plan: CleanupPlan,
    registry: Arc<JobRegistry<D>>,
    span: tracing::Span,
) -> CleanupReport {
    let cleanup = tokio::spawn(async move { plan.run(&registry).await }.instrument(span));
    match cleanup.await {
        Ok(report) => report,
        Err(error) if error.is_panic() => {
            let message = panic_message(error.into_panic());
            tracing::error!(
                panic_message = %message,
                "job cleanup panicked; resource may be leaked"
            );
            CleanupReport::Panicked(message)
        }
        Err(error) if error.is_cancelled() => CleanupReport::Skipped,
        Err(error) => {
            tracing::warn!(%error, "job cleanup exited with an unknown join error");
            CleanupReport::Skipped
        }
    }
}

/// The text of a panic payload (`&str` or `String`), or a placeholder.
pub(crate) fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(message) => *message,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(message) => (*message).to_owned(),
            Err(_) => "unknown panic payload".to_owned(),
        },
    }
}
