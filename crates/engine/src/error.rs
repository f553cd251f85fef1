//! The engine's one error type. The server maps it to gRPC codes in one place.

use uuid::Uuid;

/// gRPC-relevant class of a lookup failure during planning (the reference
/// lets inventory NotFound / FailedPrecondition statuses through unchanged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupKind {
    NotFound,
    Ambiguous,
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
    /// The inventory holds no NVLink domains, so a domain target names none.
    #[error("NVLink domains are not in this inventory")]
    NvlDomainsUnsupported,
    /// A rule record or definition that does not validate.
    #[error(transparent)]
    Rule(#[from] rackflow_domain::rule::RuleError),
    #[error(transparent)]
    Store(#[from] rackflow_store::StoreError),
}
