//! The one error type of operation rules: parsing, validation, the YAML
//! batch loader and capability derivation all report a [`RuleError`].
//!
//! Messages follow the reference service (spec flow-core §4) where it fixes
//! a text (`name is required`, `unknown action: X`, …). Errors found inside a
//! definition carry the place they were found as a dotted path
//! (`steps[2].retry: max_attempts must be >= 1`), so an operator can find the
//! field without reading the whole document.

use crate::ComponentType;
use crate::task::TaskType;

/// Why a rule, a rule definition or a rule batch was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// The problem `source`, found at `path` (`steps[2]`,
    /// `steps[0].post_operation[1]`, …).
    #[error("{path}: {source}")]
    At {
        path: String,
        source: Box<RuleError>,
    },
    /// The problem `source`, found in rule number `index` (named `name`,
    /// possibly empty) of a YAML batch.
    #[error("rules[{index}]{}: {source}", named(.name))]
    InRule {
        index: usize,
        name: String,
        source: Box<RuleError>,
    },

    // ---- document shape --------------------------------------------------
    /// Not JSON, or JSON of the wrong shape.
    #[error("invalid rule definition JSON: {0}")]
    Json(String),
    /// Not YAML, or YAML of the wrong shape.
    #[error("failed to parse YAML: {0}")]
    Yaml(String),
    /// A field of the wrong type or a missing field (serde's text).
    #[error("{0}")]
    Malformed(String),
    #[error("unsupported rule definition version: {0} (current version: v1)")]
    UnsupportedVersion(String),
    /// A duration field that does not parse.
    #[error("invalid {field} ({value}): {reason}")]
    InvalidDuration {
        field: String,
        value: String,
        reason: String,
    },
    #[error("{0} must be non-negative")]
    NegativeDuration(String),
    /// A key the rule model does not have (a typo would otherwise be
    /// ignored, and its field left at its default). `hint` suggests the key
    /// meant or lists the known ones.
    #[error("unknown key {key:?} ({hint})")]
    UnknownKey { key: String, hint: String },

    // ---- rule record -----------------------------------------------------
    #[error("name is required")]
    NameRequired,
    #[error("name must be at most 128 characters")]
    NameTooLong,
    #[error("invalid operation type: {0}")]
    InvalidOperationType(String),
    #[error("invalid operation code '{code}' for operation type '{operation_type}'")]
    InvalidOperationCode {
        operation_type: String,
        code: String,
    },

    // ---- steps -----------------------------------------------------------
    #[error("component_type {0} is unknown or invalid")]
    UnknownComponentType(String),
    #[error("stage must be >= 1")]
    StageTooLow,
    #[error("max_parallel must be >= 0")]
    NegativeMaxParallel,
    #[error("max_attempts must be >= 1")]
    MaxAttemptsTooLow,
    #[error("initial_interval is required and must be positive")]
    InitialIntervalRequired,
    #[error("backoff_coefficient must be >= 1.0")]
    BackoffTooLow,
    #[error("main_operation is required")]
    MainOperationRequired,
    #[error("duplicate component type {component_type} in stage {stage}")]
    DuplicateComponentType {
        component_type: ComponentType,
        stage: i32,
    },

    // ---- actions ---------------------------------------------------------
    #[error("unknown action: {0}")]
    UnknownAction(String),
    #[error("action {0} is reserved for built-in rules")]
    ExecutorOnlyAction(String),
    #[error("action {action} missing required parameter: {param}")]
    MissingParameter { action: String, param: String },
    #[error("action {0} requires timeout")]
    TimeoutRequired(String),
    #[error("action {0} requires poll_interval")]
    PollIntervalRequired(String),
    #[error("expected_status must be 'on' or 'off', got '{0}'")]
    ExpectedStatus(String),
    #[error("action {action}: invalid {param}: {reason}")]
    InvalidParameter {
        action: String,
        param: String,
        reason: String,
    },

    // ---- YAML batch ------------------------------------------------------
    #[error("duplicate rule {name} for operation type {operation_type} and operation {code}")]
    DuplicateRule {
        name: String,
        operation_type: TaskType,
        code: String,
    },
    #[error("required operation '{code}' missing for operation type {operation_type}")]
    MissingRequiredOperation {
        operation_type: TaskType,
        code: String,
    },
}

/// ` (name)`, or nothing for a rule without a name.
fn named(name: &str) -> String {
    if name.is_empty() {
        String::new()
    } else {
        format!(" ({name})")
    }
}

impl RuleError {
    /// Places this error under `segment` (`steps[2]`, `retry`, …); nested
    /// places join with dots, outermost first.
    pub(crate) fn at(self, segment: &str) -> RuleError {
        match self {
            RuleError::At { path, source } => RuleError::At {
                path: format!("{segment}.{path}"),
                source,
            },
            other => RuleError::At {
                path: segment.to_string(),
                source: Box::new(other),
            },
        }
    }

    /// The innermost error, without its location (for matching on the kind).
    pub fn root(&self) -> &RuleError {
        match self {
            RuleError::At { source, .. } | RuleError::InRule { source, .. } => source.root(),
            other => other,
        }
    }

    /// Where the innermost error was found inside its definition
    /// (`steps[2].retry`), if anywhere.
    pub fn path(&self) -> Option<&str> {
        match self {
            RuleError::At { path, .. } => Some(path),
            RuleError::InRule { source, .. } => source.path(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_join_outermost_first() {
        let e = RuleError::MaxAttemptsTooLow.at("retry").at("steps[2]");
        assert_eq!(e.to_string(), "steps[2].retry: max_attempts must be >= 1");
        assert_eq!(e.root(), &RuleError::MaxAttemptsTooLow);
        assert_eq!(e.path(), Some("steps[2].retry"));
        let in_rule = RuleError::InRule {
            index: 1,
            name: "x".into(),
            source: Box::new(e),
        };
        assert_eq!(
            in_rule.to_string(),
            "rules[1] (x): steps[2].retry: max_attempts must be >= 1"
        );
        assert_eq!(in_rule.path(), Some("steps[2].retry"));
        let unnamed = RuleError::InRule {
            index: 0,
            name: String::new(),
            source: Box::new(RuleError::NameRequired),
        };
        assert_eq!(unnamed.to_string(), "rules[0]: name is required");
    }
}
