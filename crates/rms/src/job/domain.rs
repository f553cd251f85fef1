//! The `JobDomain` trait: the wording policy of the generic job layer.
//!
//! The registry never invents a failure message of its own. Whenever it must
//! refuse a creation or seal an abandoned job it asks the domain for the
//! failure, so every user-visible message lives with the domain (spec §1.1,
//! §1.5). RMS has one domain, `RmsJobDomain` in the tracker module.

use super::error::JobFailure;
use super::ids::JobId;

/// Supplies the failures the generic registry records or returns.
pub trait JobDomain: Send + Sync + 'static {
    /// Recorded when a handle is dropped before its job reached a terminal
    /// state (early return, panic unwind, task abort).
    fn dropped_failure() -> JobFailure;

    /// Returned when the registry holds `current` records and its cap is `max`.
    fn at_capacity_failure(current: usize, max: usize) -> JobFailure;

    /// Returned when `(rack_id, node_id)` already has the active job
    /// `active_job_id` and the caller asked for an idle node.
    fn node_busy_failure(rack_id: &str, node_id: &str, active_job_id: &JobId) -> JobFailure;

    /// Returned for every creation after shutdown began.
    fn shutting_down_failure() -> JobFailure;

    /// Returned when the requested parent is missing, terminal, or itself a
    /// child.
    fn parent_unavailable_failure(parent_job_id: &JobId) -> JobFailure;
}
