//! The one place where errors become gRPC statuses.

use rackflow_engine::EngineError;
use rackflow_engine::error::{LookupKind, ScheduleError, TaskError};
use rackflow_store::StoreError;
use tonic::{Code, Status};

use crate::convert::Invalid;

impl From<Invalid> for ApiError {
    fn from(e: Invalid) -> Self {
        ApiError::Invalid(e)
    }
}

/// Everything a handler can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Invalid(Invalid),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    FailedPrecondition(String),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Maps an error to its status (spec operation-runs §4.9). Internal errors
/// are logged with their chain; the client gets the message too, as the
/// reference does.
pub fn to_status(err: ApiError) -> Status {
    let code = match &err {
        ApiError::Invalid(_) => Code::InvalidArgument,
        ApiError::NotFound(_) => Code::NotFound,
        ApiError::FailedPrecondition(_) => Code::FailedPrecondition,
        ApiError::Engine(e) => match e {
            EngineError::RunNotFound(_) => Code::NotFound,
            EngineError::NoPlannedTargets | EngineError::PlanInvalid(_) => Code::InvalidArgument,
            EngineError::Plan { kind, .. } => lookup_code(*kind),
            EngineError::RackWithoutExternalId(_) => Code::FailedPrecondition,
            EngineError::StatsGap { .. } => Code::Internal,
            EngineError::Control(_) => Code::FailedPrecondition,
            EngineError::Task(t) => task_code(t),
            EngineError::Schedule(s) => match s {
                ScheduleError::Invalid(_) => Code::InvalidArgument,
                ScheduleError::NotFound(_) => Code::NotFound,
                ScheduleError::FailedPrecondition(_) => Code::FailedPrecondition,
                ScheduleError::Lookup { kind, .. } => lookup_code(*kind),
                ScheduleError::Task(t) => task_code(t),
                ScheduleError::Store(s) => store_code(s),
            },
            EngineError::Store(s) => store_code(s),
        },
        ApiError::Store(s) => store_code(s),
    };
    let message = err.to_string();
    if code == Code::Internal {
        tracing::error!(error = %message, "request failed");
    } else {
        tracing::debug!(code = ?code, error = %message, "request rejected");
    }
    Status::new(code, message)
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

fn lookup_code(kind: LookupKind) -> Code {
    match kind {
        LookupKind::NotFound => Code::NotFound,
        LookupKind::Ambiguous => Code::FailedPrecondition,
        LookupKind::Other => Code::Internal,
    }
}

fn store_code(err: &StoreError) -> Code {
    match err {
        StoreError::AlreadyExists(_) => Code::AlreadyExists,
        StoreError::NotFound(_) => Code::NotFound,
        _ => Code::Internal,
    }
}

impl From<ApiError> for Status {
    fn from(err: ApiError) -> Self {
        to_status(err)
    }
}
