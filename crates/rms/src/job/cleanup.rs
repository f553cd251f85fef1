//! Cleanup plans run by a job's supervisor after the worker exits (spec
//! §1.14), e.g. deleting a per-request artifact cache once every child job
//! that reads it has finished. A cleanup outcome never changes a job's
//! terminal state.

use std::path::PathBuf;
use std::time::Duration;

use super::domain::JobDomain;
use super::ids::JobId;
use super::registry::JobRegistry;

/// What the supervisor cleans up after the worker exits.
#[derive(Debug, Clone)]
pub enum CleanupPlan {
    /// Remove a directory tree.
    RemoveDir { path: PathBuf },
    /// Wait until every listed job is terminal or missing (bounded by
    /// `timeout`), then remove the directory tree.
    RemoveDirAfterJobsTerminate {
        child_job_ids: Vec<JobId>,
        path: PathBuf,
        timeout: Option<Duration>,
    },
    /// Panics when run (tests only: proves a cleanup panic is contained).
    #[cfg(test)]
    PanicForTest { path: PathBuf },
}

impl CleanupPlan {
    /// Removes `path` after the worker exits.
    pub fn remove_dir(path: impl Into<PathBuf>) -> Self {
        Self::RemoveDir { path: path.into() }
    }

    /// Removes `path` once every job in `child_job_ids` is terminal.
    pub fn remove_dir_after_jobs_terminate(
        child_job_ids: Vec<JobId>,
        path: impl Into<PathBuf>,
        timeout: Option<Duration>,
    ) -> Self {
        Self::RemoveDirAfterJobsTerminate {
            child_job_ids,
            path: path.into(),
            timeout,
        }
    }

    #[cfg(test)]
    pub(crate) fn panic_for_test(path: impl Into<PathBuf>) -> Self {
        Self::PanicForTest { path: path.into() }
    }

    /// Carries the plan out.
    pub async fn run<D: JobDomain>(self, registry: &JobRegistry<D>) -> CleanupReport {
        match self {
            Self::RemoveDir { path } => remove_dir(path).await,
            Self::RemoveDirAfterJobsTerminate {
                child_job_ids,
                path,
                timeout,
            } => {
                if !registry
                    .wait_for_terminal_jobs(&child_job_ids, timeout)
                    .await
                {
                    tracing::warn!(
                        child_jobs = child_job_ids.len(),
                        "cleanup timed out waiting for child jobs to become terminal"
                    );
                    return CleanupReport::Skipped;
                }
                remove_dir(path).await
            }
            #[cfg(test)]
            Self::PanicForTest { path } => panic!("simulated cleanup panic for {}", path.display()),
        }
    }
}

/// Outcome of a cleanup attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CleanupReport {
    /// No plan, the wait timed out, or the cleanup task was cancelled.
    Skipped,
    Removed,
    /// The directory did not exist.
    NotFound,
    Failed(CleanupFailure),
    /// The cleanup panicked (message captured); the resource may be leaked.
    Panicked(String),
}

/// Details of a failed cleanup step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanupFailure {
    pub operation: CleanupOperation,
    pub path: PathBuf,
    pub kind: std::io::ErrorKind,
    pub message: String,
}

/// The cleanup step that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanupOperation {
    RemoveDir,
}

/// `remove_dir_all` on the blocking pool (what `tokio::fs::remove_dir_all`
/// does, without needing tokio's `fs` feature).
async fn remove_dir(path: PathBuf) -> CleanupReport {
    let target = path.clone();
    let outcome = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(target))
        .await
        .unwrap_or_else(|join| Err(std::io::Error::other(join.to_string())));
    match outcome {
        Ok(()) => CleanupReport::Removed,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => CleanupReport::NotFound,
        Err(error) => {
            tracing::warn!(
                path = %path.display(),
                error = %error,
                "tracked job cleanup failed to remove directory"
            );
            CleanupReport::Failed(CleanupFailure {
                operation: CleanupOperation::RemoveDir,
                path,
                kind: error.kind(),
                message: error.to_string(),
            })
        }
    }
}
