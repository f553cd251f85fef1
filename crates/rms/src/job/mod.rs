//! The async job model (spec §1): a generic lifecycle layer and the RMS
//! tracker on top of it.
//!
//! - Generic layer: [`JobRegistry`] (store, node index, admission, the
//!   state-change chokepoint, TTL eviction), [`JobHandle`] and its supervisor
//!   ([`JobJoinHandle`]), [`CleanupPlan`], [`JobError`]/[`JobFailure`],
//!   [`JobType`], the state enums and the transition table in [`state`]. It is
//!   parameterized by a [`JobDomain`] that words every failure.
//! - RMS layer: [`JobTracker`] with [`RmsJobDomain`], parent aggregation,
//!   workflow metrics, the reaper, shutdown draining and the [`JobInfo`] view.
//!
//! ```
//! use rackflow_rms::job::{JobState, JobTracker, JobType};
//!
//! let tracker = JobTracker::new();
//! let job = tracker
//!     .create_job_if_node_idle("rack-1", "node-1", JobType::FirmwareUpdate)
//!     .expect("node is idle");
//! let id = job.id().to_string();
//! job.progress("Uploading firmware");
//! job.complete("Completed", r#"{"status":"ok"}"#);
//! assert_eq!(tracker.get_job(&id).unwrap().state, JobState::Completed);
//! ```

mod aggregate;
pub mod cleanup;
pub mod clock;
pub mod config;
pub mod domain;
pub mod error;
pub mod handle;
pub mod ids;
pub mod job_type;
pub mod metrics;
pub mod registry;
pub mod state;
mod store;
pub mod tracker;

#[cfg(test)]
mod lifecycle_tests;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tracker_tests;

pub use aggregate::{
    FirmwareChildResult, FirmwareChildResultRedfish, FirmwareChildResultTarget,
    FirmwareFailedChildDetail, FirmwareParentFailureResult, SwitchFailedChildDetail,
    SwitchParentFailureResult,
};
pub use cleanup::{CleanupFailure, CleanupOperation, CleanupPlan, CleanupReport};
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::JobLimits;
pub use domain::JobDomain;
pub use error::{BoxError, JobError, JobFailure, job_error_of};
pub use handle::{JobHandle, JobJoinHandle};
pub use ids::JobId;
pub use job_type::JobType;
pub use metrics::WorkflowMetrics;
pub use registry::{JobObserver, JobRegistry, JobSnapshot, JobSpec, MAX_TRACKED_JOBS};
pub use state::{JobLifecycleState, JobState, TransitionClass, TransitionError};
pub use tracker::{
    EphemeralCleanup, JobInfo, JobTracker, JobTrackerBuilder, RejectedBatchTarget, RmsJobDomain,
    RmsJobHandle, default_failure_result_json, job_failure, reaper_interval,
};
