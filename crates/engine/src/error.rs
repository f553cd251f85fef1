//! The engine's one error type, [`EngineError`], which every public engine
//! operation returns; the server maps it to gRPC codes in one place. The
//! task and schedule failures stay typed inside it ([`TaskError`],
//! [`ScheduleError`]) rather than being flattened to text, and every
//! variant's text is what the reference answers.

use rackflow_domain::schedule::{ScopeError, SpecError};
use rackflow_store::StoreError;

use crate::resolve;
use uuid::Uuid;

/// gRPC-relevant class of a lookup failure during planning (the reference
/// lets inventory NotFound / FailedPrecondition statuses through unchanged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupKind {
    NotFound,
    Ambiguous,
    /// The database could not be reached ([`StoreError::is_unavailable`]).
    Unavailable,
    /// The target names nothing to act on (an NVLink domain without
    /// racks): refused as an empty rack list is.
    Empty,
    Other,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("operation run not found: {0}")]
    RunNotFound(Uuid),
    #[error("operation run has no planned targets")]
    NoPlannedTargets,
    /// A zero-target phase or a count overflow (decision D4): bad input.
    #[error("operation run plan is invalid: {0}")]
    PlanInvalid(String),
    /// Planning failed for another reason; the text is the full chain,
    /// starting `plan operation run targets: `.
    #[error("{message}")]
    Plan { kind: LookupKind, message: String },
    #[error("rack \"{0}\" has no external ID")]
    RackWithoutExternalId(Uuid),
    #[error(
        "operation run target stats query returned 0 targets at offset {offset} before total {total}"
    )]
    StatsGap { offset: i64, total: i64 },
    /// Submitting, cancelling or recovering a task.
    #[error(transparent)]
    Task(#[from] TaskError),
    /// Managing or firing a task schedule.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// A manual control that does not apply to the run's state.
    #[error(transparent)]
    Control(#[from] rackflow_domain::dispatch::ControlError),
    /// A rack named by UUID or external id (the text as given) does not exist.
    #[error("rack {0} not found")]
    RackNotFound(String),
    #[error("component {0} not found")]
    ComponentNotFound(Uuid),
    #[error("operation rule {0} not found")]
    RuleNotFound(Uuid),
    /// An inventory lookup by target spec failed (spec resolution's kind
    /// decides the code: not found, ambiguous, other).
    #[error("{message}")]
    Lookup { kind: LookupKind, message: String },
    /// A rule record or definition that does not validate.
    #[error(transparent)]
    Rule(#[from] rackflow_domain::rule::RuleError),
    /// Sealing, opening or rotating secrets needs a data key.
    #[error("no data encryption key is configured (secrets.key_file)")]
    NoDataKey,
    /// `ValidateComponents` needs a component manager that reports its own
    /// inventory.
    #[error(
        "component validation needs a component manager that reports its inventory (provider = \"rms\"); the simulated fleet has no inventory of its own"
    )]
    NoInventorySource,
    /// The comparison cannot be reported (e.g. a missing component without
    /// a BMC MAC).
    #[error(transparent)]
    Drift(#[from] rackflow_domain::drift::DriftError),
    /// The component manager's inventory could not be read.
    #[error("read the component manager's inventory: {0}")]
    InventorySource(String),
    /// A unique inventory key (a rack's external id) that a deleted rack
    /// still holds: freed by its purge.
    #[error("{0} is held by a deleted rack: purge it (PurgeRack) to use it again")]
    HeldByDeleted(String),
    /// An inventory change the row's state does not allow (a purge before
    /// the delete, a purge while tasks run).
    #[error("{0}")]
    InventoryState(String),
    /// Managing event rules and bindings.
    #[error(transparent)]
    EventRule(#[from] EventRuleError),
    #[error(transparent)]
    Store(#[from] rackflow_store::StoreError),
}

/// Why an event-rule operation failed (the reference's codes: invalid
/// input, not found, and a built-in mutation or binding conflict as a
/// failed precondition).
#[derive(Debug, thiserror::Error)]
pub enum EventRuleError {
    #[error(transparent)]
    Invalid(#[from] rackflow_domain::event_rule::EventRuleInvalid),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Precondition(String),
}

/// Why a task operation failed. The server maps these to gRPC codes.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("{0}")]
    Invalid(String),
    #[error("{message}")]
    Lookup { kind: LookupKind, message: String },
    #[error("operation rule {0} not found")]
    RuleNotFound(Uuid),
    #[error("task {0} not found")]
    NotFound(Uuid),
    /// Rack conflict under the REJECT strategy (decision C3).
    #[error("rack {0} already has a conflicting task")]
    RackConflict(Uuid),
    #[error("waiting queue is full ({0}/{max} tasks)", max = rackflow_domain::task::MAX_WAITING_PER_RACK)]
    QueueFull(usize),
    /// The task cannot run as asked (rule not applicable, component not
    /// linked, capability missing, not cancellable).
    #[error("{0}")]
    Precondition(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl TaskError {
    /// The database could not be reached: the same request may succeed
    /// later, and whether a write was applied is unknown.
    pub fn is_unavailable(&self) -> bool {
        match self {
            TaskError::Store(e) => e.is_unavailable(),
            TaskError::Lookup { kind, .. } => *kind == LookupKind::Unavailable,
            _ => false,
        }
    }
}

/// Why a schedule operation failed. The server maps these to gRPC codes.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    FailedPrecondition(String),
    #[error("{message}")]
    Lookup { kind: LookupKind, message: String },
    #[error(transparent)]
    Task(#[from] TaskError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<SpecError> for ScheduleError {
    fn from(e: SpecError) -> Self {
        ScheduleError::Invalid(e.to_string())
    }
}

impl From<ScopeError> for ScheduleError {
    fn from(e: ScopeError) -> Self {
        match e {
            ScopeError::NoScopes => ScheduleError::FailedPrecondition(e.to_string()),
            _ => ScheduleError::Invalid(e.to_string()),
        }
    }
}

impl From<resolve::LookupError> for ScheduleError {
    fn from(e: resolve::LookupError) -> Self {
        ScheduleError::Lookup {
            kind: e.kind,
            message: e.message,
        }
    }
}

impl From<SpecError> for EngineError {
    fn from(e: SpecError) -> Self {
        EngineError::Schedule(e.into())
    }
}

impl From<ScopeError> for EngineError {
    fn from(e: ScopeError) -> Self {
        EngineError::Schedule(e.into())
    }
}

impl From<resolve::LookupError> for EngineError {
    fn from(e: resolve::LookupError) -> Self {
        EngineError::Schedule(e.into())
    }
}
