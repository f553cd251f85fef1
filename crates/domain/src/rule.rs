//! Operation rules: staged recipes that say, per component type, which
//! actions run in which stage, with what parallelism, timeouts and retries.
//! (Validation, built-ins and resolution live in submodules.)

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ComponentType;
use crate::duration::serde_go;
use crate::task::TaskType;

/// Retry policy of a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicy {
    pub max_attempts: i32,
    #[serde(with = "serde_go")]
    pub initial_interval: Duration,
    #[serde(default = "one")]
    pub backoff_coefficient: f64,
    #[serde(
        default,
        with = "serde_go::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_interval: Option<Duration>,
}

fn one() -> f64 {
    1.0
}

/// One action of a step (`PowerControl`, `VerifyPowerStatus`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionConfig {
    pub name: String,
    #[serde(
        default,
        with = "serde_go::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout: Option<Duration>,
    #[serde(
        default,
        with = "serde_go::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub poll_interval: Option<Duration>,
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub parameters: serde_json::Map<String, serde_json::Value>,
}

/// What one component type does in one stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequenceStep {
    pub component_type: ComponentType,
    pub stage: i32,
    /// Components per batch; 0 = all at once.
    #[serde(default)]
    pub max_parallel: i32,
    #[serde(
        default,
        with = "serde_go::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicy>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pre_operation: Vec<ActionConfig>,
    pub main_operation: ActionConfig,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub post_operation: Vec<ActionConfig>,
    #[serde(
        default,
        with = "serde_go::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub delay_after: Option<Duration>,
}

/// A rule definition (schema version `v1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleDefinition {
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub steps: Vec<SequenceStep>,
}

/// A rule as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationRule {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub operation_type: TaskType,
    pub operation_code: String,
    pub definition: RuleDefinition,
    pub is_default: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A rule pinned to a rack for the rule's (type, code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RackRuleAssociation {
    pub rack_id: Uuid,
    pub operation_type: TaskType,
    pub operation_code: String,
    pub rule_id: Uuid,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}
