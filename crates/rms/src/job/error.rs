//! Typed error kinds (`JobError`) and the failure payload (`JobFailure`).
//!
//! `JobError` is a domain-neutral classification (spec §1.4). It travels as
//! the root cause of a failure's boxed error and is recovered by downcasting,
//! so a worker may wrap it in richer errors without losing the code.
//! Its `Display` text, metrics label and wire codes are fixed by the spec.

use std::error::Error as StdError;
use std::fmt;

/// The boxed error carried inside a [`JobFailure`]. The spec's reference
/// uses `anyhow::Error`; a boxed `std::error::Error` gives the same
/// root-cause carrier and `downcast_ref` recovery without another crate.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// Classification of why a job failed (spec §1.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, thiserror::Error)]
pub enum JobError {
    #[error("unspecified")]
    Unspecified,
    #[error("internal")]
    Internal,
    #[error("other")]
    Other,
    #[error("invalid argument")]
    InvalidArgument,
    #[error("failed precondition")]
    FailedPrecondition,
    #[error("client error")]
    ClientError,
    #[error("server error")]
    ServerError,
    #[error("timeout")]
    Timeout,
    #[error("invalid response")]
    InvalidResponse,
    #[error("unauthenticated")]
    Unauthenticated,
    #[error("target not found")]
    TargetNotFound,
    #[error("file not found")]
    FileNotFound,
    #[error("update in progress")]
    UpdateInProgress,
}

impl JobError {
    /// Every variant, in the spec's table order.
    pub const ALL: [JobError; 13] = [
        JobError::Unspecified,
        JobError::Internal,
        JobError::Other,
        JobError::InvalidArgument,
        JobError::FailedPrecondition,
        JobError::ClientError,
        JobError::ServerError,
        JobError::Timeout,
        JobError::InvalidResponse,
        JobError::Unauthenticated,
        JobError::TargetNotFound,
        JobError::FileNotFound,
        JobError::UpdateInProgress,
    ];

    /// The `error_code` label used by the workflow metrics.
    pub fn metrics_label(self) -> &'static str {
        match self {
            JobError::Unspecified => "unspecified",
            JobError::Internal => "internal",
            JobError::Other => "other",
            JobError::InvalidArgument => "invalid_argument",
            JobError::FailedPrecondition => "failed_precondition",
            JobError::ClientError => "client_error",
            JobError::ServerError => "server_error",
            JobError::Timeout => "timeout",
            JobError::InvalidResponse => "invalid_response",
            JobError::Unauthenticated => "unauthenticated",
            JobError::TargetNotFound => "target_not_found",
            JobError::FileNotFound => "file_not_found",
            JobError::UpdateInProgress => "update_in_progress",
        }
    }

    /// The numeric `pb::JobError` value. `FailedPrecondition` maps to
    /// `CLIENT_ERROR` (11) because the proto predates that variant.
    pub fn pb_code(self) -> i32 {
        match self {
            JobError::Unspecified => 0,
            JobError::Internal => 1,
            JobError::Other => 2,
            JobError::InvalidArgument => 3,
            JobError::FailedPrecondition | JobError::ClientError => 11,
            JobError::ServerError => 12,
            JobError::Timeout => 13,
            JobError::InvalidResponse => 14,
            JobError::Unauthenticated => 15,
            JobError::TargetNotFound => 21,
            JobError::FileNotFound => 22,
            JobError::UpdateInProgress => 23,
        }
    }

    /// The name of the legacy `pb::FirmwareUpdateError` value this maps to.
    pub fn legacy_firmware_update_error(self) -> &'static str {
        match self {
            JobError::Unspecified => "SUCCESS",
            JobError::Internal => "EXCEPTION",
            JobError::Other => "TASK_FAILED",
            JobError::InvalidArgument
            | JobError::FailedPrecondition
            | JobError::ClientError
            | JobError::Unauthenticated => "CLIENT_FAILURE",
            JobError::ServerError => "SERVER_ERROR",
            JobError::Timeout => "MONITORING_TIMEOUT",
            JobError::InvalidResponse => "INVALID_RESPONSE",
            JobError::TargetNotFound => "TARGET_NOT_FOUND",
            JobError::FileNotFound => "FILE_NOT_FOUND",
            JobError::UpdateInProgress => "UPDATE_IN_PROGRESS",
        }
    }
}

/// Recovers the [`JobError`] carried in `error`'s cause chain (the error
/// itself first, then each `source()`); `Internal` when there is none, as the
/// spec's status view requires.
pub fn job_error_of(error: &(dyn StdError + 'static)) -> JobError {
    let mut current: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(err) = current {
        if let Some(code) = err.downcast_ref::<JobError>() {
            return *code;
        }
        current = err.source();
    }
    JobError::Internal
}

/// The failure payload a worker records (spec §1.4).
pub struct JobFailure {
    /// The cause; its root carries the [`JobError`] code.
    pub error: BoxError,
    /// The user-visible state description ("Failed" unless overridden).
    pub description: String,
    /// The failure message (`error_message` in status views).
    pub message: String,
    /// Optional result payload; a stored job without one reports `""`.
    pub result_json: Option<String>,
}

impl JobFailure {
    /// A failure with description "Failed" and no `result_json`.
    pub fn new(error: impl Into<BoxError>, message: impl Into<String>) -> Self {
        Self {
            error: error.into(),
            description: "Failed".to_owned(),
            message: message.into(),
            result_json: None,
        }
    }

    /// Replaces the state description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Attaches a result payload.
    pub fn with_result_json(mut self, result_json: impl Into<String>) -> Self {
        self.result_json = Some(result_json.into());
        self
    }

    /// The typed error code recovered from the cause.
    pub fn error_code(&self) -> JobError {
        job_error_of(self.error.as_ref())
    }
}

impl fmt::Debug for JobFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobFailure")
            .field("error_code", &self.error_code())
            .field("error", &self.error.to_string())
            .field("description", &self.description)
            .field("message", &self.message)
            .field("result_json", &self.result_json)
            .finish()
    }
}

/// Displays the message, so a creation refusal reads naturally in logs.
impl fmt::Display for JobFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl StdError for JobFailure {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self.error.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Display, metrics label, pb code and legacy name, row by row from the
    /// spec's §1.4 table.
    const TABLE: [(JobError, &str, &str, i32, &str); 13] = [
        (
            JobError::Unspecified,
            "unspecified",
            "unspecified",
            0,
            "SUCCESS",
        ),
        (JobError::Internal, "internal", "internal", 1, "EXCEPTION"),
        (JobError::Other, "other", "other", 2, "TASK_FAILED"),
        (
            JobError::InvalidArgument,
            "invalid argument",
            "invalid_argument",
            3,
            "CLIENT_FAILURE",
        ),
        (
            JobError::FailedPrecondition,
            "failed precondition",
            "failed_precondition",
            11,
            "CLIENT_FAILURE",
        ),
        (
            JobError::ClientError,
            "client error",
            "client_error",
            11,
            "CLIENT_FAILURE",
        ),
        (
            JobError::ServerError,
            "server error",
            "server_error",
            12,
            "SERVER_ERROR",
        ),
        (
            JobError::Timeout,
            "timeout",
            "timeout",
            13,
            "MONITORING_TIMEOUT",
        ),
        (
            JobError::InvalidResponse,
            "invalid response",
            "invalid_response",
            14,
            "INVALID_RESPONSE",
        ),
        (
            JobError::Unauthenticated,
            "unauthenticated",
            "unauthenticated",
            15,
            "CLIENT_FAILURE",
        ),
        (
            JobError::TargetNotFound,
            "target not found",
            "target_not_found",
            21,
            "TARGET_NOT_FOUND",
        ),
        (
            JobError::FileNotFound,
            "file not found",
            "file_not_found",
            22,
            "FILE_NOT_FOUND",
        ),
        (
            JobError::UpdateInProgress,
            "update in progress",
            "update_in_progress",
            23,
            "UPDATE_IN_PROGRESS",
        ),
    ];

    #[test]
    fn every_variant_matches_the_spec_table() {
        assert_eq!(JobError::ALL.len(), TABLE.len());
        for (variant, (expected, display, label, pb, legacy)) in JobError::ALL.iter().zip(TABLE) {
            assert_eq!(*variant, expected, "ALL must follow the table order");
            assert_eq!(variant.to_string(), display, "{variant:?} display");
            assert_eq!(variant.metrics_label(), label, "{variant:?} label");
            assert_eq!(variant.pb_code(), pb, "{variant:?} pb code");
            assert_eq!(
                variant.legacy_firmware_update_error(),
                legacy,
                "{variant:?} legacy code"
            );
        }
    }

    #[test]
    fn failure_defaults_description_and_leaves_result_unset() {
        let failure = JobFailure::new(JobError::Timeout, "took too long");
        assert_eq!(failure.description, "Failed");
        assert_eq!(failure.message, "took too long");
        assert_eq!(failure.result_json, None);
        assert_eq!(failure.error_code(), JobError::Timeout);
        assert_eq!(failure.to_string(), "took too long");
    }

    #[test]
    fn builders_set_description_and_result() {
        let failure = JobFailure::new(JobError::Other, "m")
            .with_description("Abandoned")
            .with_result_json("{}");
        assert_eq!(failure.description, "Abandoned");
        assert_eq!(failure.result_json.as_deref(), Some("{}"));
    }

    #[derive(Debug, thiserror::Error)]
    #[error("wrapped: {inner}")]
    struct Wrapper {
        #[source]
        inner: JobError,
    }

    #[test]
    fn code_is_recovered_from_the_root_cause() {
        let failure = JobFailure::new(
            Wrapper {
                inner: JobError::FileNotFound,
            },
            "missing file",
        );
        assert_eq!(failure.error_code(), JobError::FileNotFound);
    }

    #[test]
    fn foreign_cause_falls_back_to_internal() {
        let failure = JobFailure::new("plain string cause", "m");
        assert_eq!(failure.error_code(), JobError::Internal);
        let io = std::io::Error::other("disk");
        assert_eq!(job_error_of(&io), JobError::Internal);
    }
}
