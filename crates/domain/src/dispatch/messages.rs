//! Fixed status messages written by the dispatcher and the manual controls.
//! The specs fix these texts: hidden tests compare them byte for byte.

pub const INVALID_CONFIGURATION: &str = "invalid operation run configuration";
pub const NO_TARGETS: &str = "operation run has no targets";
pub const RUN_FAILED: &str = "operation run failed";
pub const RUN_COMPLETED_WITH_FAILURES: &str = "operation run completed with failed targets";
pub const RUN_COMPLETED: &str = "operation run completed";
pub const ADVANCED_TO_NEXT_PHASE: &str = "advanced to next phase";
pub const WAITING_FOR_PHASE_ADVANCE: &str = "waiting for phase advance";
pub const WAITING_FOR_QUOTA: &str = "waiting for active targets quota";
pub const CLAIMED: &str = "claimed for submission";
pub const SUBMITTED: &str = "submitted";
pub const NOT_EXACTLY_ONE_TASK: &str = "task submission did not return exactly one task";
pub const PAUSED_BY_OPERATOR: &str = "operation run paused by operator";
pub const RESUMED: &str = "operation run resumed";
pub const CANCELLED: &str = "operation run cancelled";
