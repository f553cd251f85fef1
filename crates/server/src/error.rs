//! The one place where errors become gRPC statuses, for every RPC.
//!
//! Handlers fail with [`ApiError`], which keeps the typed error it came from
//! (request validation, the engine's errors); [`to_status`] picks the code
//! from that type (spec operation-runs §4.9, flow-core) and sends the
//! error's own text as the message, unchanged — but a database,
//! file-system or internal failure's text stays in the log, under a
//! correlation id the caller gets.

use rackflow_engine::EngineError;
use rackflow_engine::error::{EventRuleError, LookupKind, ScheduleError, TaskError};
use rackflow_engine::store::StoreError;
use tonic::{Code, Status};

use crate::convert::Invalid;

/// Everything a handler can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request does not validate (the text names the field).
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// Firmware credentials need encryption at rest, and no data encryption
    /// key is configured in this build.
    #[error("authentication_data requires a data encryption key, which is not configured")]
    CredentialsNeedKey,
    /// A server-side failure that is not the caller's (the text goes to the
    /// log; the caller gets a correlation id).
    #[error("{0}")]
    Internal(String),
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A firmware object a request names cannot be used (unknown, not
    /// available, no provider with a catalogue).
    #[error("{0}")]
    FirmwareObject(String),
    /// The rack manager holding the firmware objects did not answer.
    #[error("{0}")]
    RackManagerUnavailable(String),
}

impl ApiError {
    /// The gRPC code of this error.
    pub fn code(&self) -> Code {
        match self {
            ApiError::Invalid(_) => Code::InvalidArgument,
            ApiError::CredentialsNeedKey => Code::FailedPrecondition,
            ApiError::Internal(_) => Code::Internal,
            ApiError::Engine(e) => engine_code(e),
            ApiError::FirmwareObject(_) => Code::FailedPrecondition,
            ApiError::RackManagerUnavailable(_) => Code::Unavailable,
        }
    }
}

fn engine_code(err: &EngineError) -> Code {
    match err {
        EngineError::RunNotFound(_)
        | EngineError::RackNotFound(_)
        | EngineError::ComponentNotFound(_)
        | EngineError::RuleNotFound(_) => Code::NotFound,
        EngineError::NoPlannedTargets | EngineError::PlanInvalid(_) | EngineError::Rule(_) => {
            Code::InvalidArgument
        }
        EngineError::Plan { kind, .. } | EngineError::Lookup { kind, .. } => lookup_code(*kind),
        EngineError::RackWithoutExternalId(_)
        | EngineError::Control(_)
        | EngineError::NoDataKey
        | EngineError::NoInventorySource
        | EngineError::Drift(_)
        | EngineError::InventoryState(_) => Code::FailedPrecondition,
        EngineError::InventorySource(_) => Code::Unavailable,
        EngineError::HeldByDeleted(_) => Code::AlreadyExists,
        EngineError::StatsGap { .. } => Code::Internal,
        EngineError::Task(t) => task_code(t),
        EngineError::Schedule(s) => schedule_code(s),
        EngineError::EventRule(e) => match e {
            EventRuleError::Invalid(_) => Code::InvalidArgument,
            EventRuleError::NotFound(_) => Code::NotFound,
            EventRuleError::Precondition(_) => Code::FailedPrecondition,
        },
        EngineError::Store(s) => store_code(s),
    }
}

fn task_code(err: &TaskError) -> Code {
    match err {
        TaskError::Invalid(_) => Code::InvalidArgument,
        TaskError::Lookup { kind, .. } => lookup_code(*kind),
        TaskError::RuleNotFound(_) | TaskError::NotFound(_) => Code::NotFound,
        TaskError::RackConflict(_) | TaskError::QueueFull(_) | TaskError::Precondition(_) => {
            Code::FailedPrecondition
        }
        TaskError::Store(s) => store_code(s),
    }
}

fn schedule_code(err: &ScheduleError) -> Code {
    match err {
        ScheduleError::Invalid(_) => Code::InvalidArgument,
        ScheduleError::NotFound(_) => Code::NotFound,
        ScheduleError::FailedPrecondition(_) => Code::FailedPrecondition,
        ScheduleError::Lookup { kind, .. } => lookup_code(*kind),
        ScheduleError::Task(t) => task_code(t),
        // A duplicate schedule name is the store's AlreadyExists.
        ScheduleError::Store(s) => store_code(s),
    }
}

fn lookup_code(kind: LookupKind) -> Code {
    match kind {
        LookupKind::NotFound => Code::NotFound,
        LookupKind::Ambiguous => Code::FailedPrecondition,
        LookupKind::Unavailable => Code::Unavailable,
        LookupKind::Empty => Code::InvalidArgument,
        LookupKind::Other => Code::Internal,
    }
}

fn store_code(err: &StoreError) -> Code {
    match err {
        StoreError::AlreadyExists(_) => Code::AlreadyExists,
        StoreError::NotFound(_) => Code::NotFound,
        e if e.is_rejected_value() => Code::InvalidArgument,
        // The client may retry (gRPC's meaning of UNAVAILABLE).
        e if e.is_unavailable() => Code::Unavailable,
        _ => Code::Internal,
    }
}

/// Whether the error's text is the server's business: a database or
/// file-system failure, or an internal step. The caller gets a correlation
/// id instead; the log has the text under that id.
fn detail_is_private(err: &ApiError) -> bool {
    let store =
        |e: &StoreError| !matches!(e, StoreError::AlreadyExists(_) | StoreError::NotFound(_));
    match err {
        ApiError::Internal(_) => true,
        ApiError::Engine(EngineError::Store(e))
        | ApiError::Engine(EngineError::Task(TaskError::Store(e)))
        | ApiError::Engine(EngineError::Schedule(ScheduleError::Store(e))) => store(e),
        _ => false,
    }
}

/// Maps an error to its status. Internal errors are logged with their
/// chain; the client gets the message too, as the reference does — except
/// for database, file-system and internal failures, which it gets as a
/// correlation id.
pub fn to_status(err: ApiError) -> Status {
    let code = err.code();
    let message = err.to_string();
    if detail_is_private(&err) {
        let correlation = uuid::Uuid::new_v4();
        tracing::error!(error = %message, code = ?code, %correlation, "request failed");
        let text = if code == Code::Unavailable {
            format!("the database is unavailable; retry shortly (correlation id {correlation})")
        } else if code == Code::InvalidArgument {
            format!(
                "a value was refused by the database: a text longer than its field allows, a \
                 NUL character or an escape it cannot store (correlation id {correlation}; the \
                 server log names the column)"
            )
        } else {
            format!("internal error (correlation id {correlation}); the server log has the detail")
        };
        return Status::new(code, text);
    }
    if code == Code::Internal {
        tracing::error!(error = %message, source = std::error::Error::source(&err).map(tracing::field::display), "request failed");
    } else {
        tracing::debug!(code = ?code, error = %message, "request rejected");
    }
    Status::new(code, message)
}

impl From<ApiError> for Status {
    fn from(err: ApiError) -> Self {
        to_status(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_layer_keeps_its_message_and_gets_its_code() {
        let cases: Vec<(ApiError, Code, &str)> = vec![
            (
                Invalid("name is required".into()).into(),
                Code::InvalidArgument,
                "name is required",
            ),
            (
                ApiError::CredentialsNeedKey,
                Code::FailedPrecondition,
                "authentication_data requires a data encryption key, which is not configured",
            ),
            (
                EngineError::RackNotFound("r-1".into()).into(),
                Code::NotFound,
                "rack r-1 not found",
            ),
            (
                EngineError::Rule(rackflow_domain::rule::RuleError::NameTooLong).into(),
                Code::InvalidArgument,
                "name must be at most 128 characters",
            ),
            (
                EngineError::from(ScheduleError::Lookup {
                    kind: LookupKind::Ambiguous,
                    message: "rack name=a is ambiguous".into(),
                })
                .into(),
                Code::FailedPrecondition,
                "rack name=a is ambiguous",
            ),
            (
                EngineError::from(ScheduleError::Store(StoreError::AlreadyExists(
                    "task schedule name \"x\"".into(),
                )))
                .into(),
                Code::AlreadyExists,
                "task schedule name \"x\" already exists",
            ),
            (
                EngineError::from(TaskError::QueueFull(3)).into(),
                Code::FailedPrecondition,
                "waiting queue is full (3/5 tasks)",
            ),
        ];
        for (err, code, message) in cases {
            let status = to_status(err);
            assert_eq!((status.code(), status.message()), (code, message));
        }
    }
}
