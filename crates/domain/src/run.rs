//! Operation runs: configuration (as validated and persisted), run and target
//! records, their statuses, list filters and stats.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ComponentsByType;
use crate::target::{ComponentFilter, TargetSpec};

named_enum!(
    /// Lifecycle status of an operation run.
    RunStatus {
        Pending = 1 => "pending",
        Running = 2 => "running",
        Paused = 3 => "paused",
        Completed = 4 => "completed",
        Cancelled = 5 => "cancelled",
        Failed = 6 => "failed",
        CompletedWithFailures = 7 => "completed_with_failures",
    }
);

impl RunStatus {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Completed
                | RunStatus::Cancelled
                | RunStatus::Failed
                | RunStatus::CompletedWithFailures
        )
    }
}

named_enum!(
    /// Why a run is in its status (mostly: why it is paused).
    RunReason {
        None = 1 => "none",
        OperatorPaused = 2 => "operator_paused",
        PhaseGate = 3 => "phase_gate",
        SafetyGate = 4 => "safety_gate",
        ConflictRetryTimeout = 5 => "conflict_retry_timeout",
    }
);

named_enum!(
    /// Status of one rack target of a run.
    TargetStatus {
        Pending = 1 => "pending",
        Blocked = 2 => "blocked",
        Submitted = 3 => "submitted",
        Completed = 4 => "completed",
        Failed = 5 => "failed",
        Terminated = 6 => "terminated",
        Skipped = 7 => "skipped",
        Claimed = 8 => "claimed",
    }
);

impl TargetStatus {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TargetStatus::Completed
                | TargetStatus::Failed
                | TargetStatus::Terminated
                | TargetStatus::Skipped
        )
    }
}

named_enum!(
    /// Which phases a safety gate counts.
    GateScope {
        CurrentPhase = 1 => "current_phase",
        CumulativeRun = 2 => "cumulative_run",
    }
);

/// Which phases `ListOperationRunTargets` returns, relative to the persisted
/// current phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseScope {
    Current,
    Completed,
    CurrentAndCompleted,
    /// Every materialised phase (used for exclusions).
    All,
}

/// The only operation type a run supports, and its code.
pub const OPERATION_TYPE_FIRMWARE_CONTROL: &str = "firmware_control";
pub const OPERATION_CODE_UPGRADE: &str = "upgrade";

/// Default conflict-retry durations (spec §5.4).
pub const DEFAULT_RETRY_TIMEOUT: Duration = Duration::from_secs(3600);
pub const DEFAULT_INITIAL_RETRY_DELAY: Duration = Duration::from_secs(30);
pub const DEFAULT_MAX_RETRY_DELAY: Duration = Duration::from_secs(300);

/// Durations persist as integer nanoseconds, like the reference's Go encoding.
mod nanos {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_nanos(u64::deserialize(d)?))
    }
}

/// Which share of the candidates a run selects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "payload", rename_all = "snake_case")]
pub enum Selector {
    Percentage { percentage: i32, seed: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "payload", rename_all = "snake_case")]
pub enum SafetyGate {
    FailureRate {
        scope: GateScope,
        failure_threshold_percent: i32,
    },
    FailureCount {
        scope: GateScope,
        failure_threshold_count: i32,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SafetyPolicy {
    pub gates: Vec<SafetyGate>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "payload", rename_all = "snake_case")]
pub enum ConflictPolicy {
    Retry {
        #[serde(with = "nanos")]
        retry_timeout: Duration,
        #[serde(with = "nanos")]
        initial_retry_delay: Duration,
        #[serde(with = "nanos")]
        max_retry_delay: Duration,
    },
}

impl Default for ConflictPolicy {
    fn default() -> Self {
        ConflictPolicy::Retry {
            retry_timeout: DEFAULT_RETRY_TIMEOUT,
            initial_retry_delay: DEFAULT_INITIAL_RETRY_DELAY,
            max_retry_delay: DEFAULT_MAX_RETRY_DELAY,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LocationStrategy {
    Unknown,
    RowByRow,
    OnePerRowRoundRobin,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "payload", rename_all = "snake_case")]
pub enum OrderingPolicy {
    Random { seed: String },
    PhysicalLocation { strategy: LocationStrategy },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PercentagePhase {
    pub percentage: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountPhase {
    pub count: i32,
}

/// How the ordered selection is cut into phases.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "plan", rename_all = "snake_case")]
pub enum PhasePlan {
    Equal { phase_count: i32 },
    Percentage { phases: Vec<PercentagePhase> },
    Count { phases: Vec<CountPhase> },
}

impl PhasePlan {
    /// The kind name used in messages (`equal`, `percentage`, `count`).
    pub fn kind(&self) -> &'static str {
        match self {
            PhasePlan::Equal { .. } => "equal",
            PhasePlan::Percentage { .. } => "percentage",
            PhasePlan::Count { .. } => "count",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdvancePolicy {
    pub auto_advance: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhasePolicy {
    #[serde(flatten)]
    pub plan: PhasePlan,
    pub advance_policy: AdvancePolicy,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunOptions {
    pub max_concurrent_targets: i32,
    pub safety_policy: SafetyPolicy,
    pub conflict_policy: ConflictPolicy,
    pub ordering_policy: OrderingPolicy,
    pub phase_policy: PhasePolicy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueStrategy {
    Queue,
    Reject,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueOptions {
    pub conflict_strategy: QueueStrategy,
    pub queue_timeout_seconds: i32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetScope {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded_operation_run_ids: Vec<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_scope_component_filter: Option<ComponentFilter>,
}

/// Firmware credentials as persisted: only ever the encrypted envelope.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncryptedSecret(pub String);

impl std::fmt::Debug for EncryptedSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EncryptedSecret(<redacted>)")
    }
}

/// Firmware credentials as the client sent them (`authentication_data`):
/// plaintext, so only ever in memory — sealed into an [`EncryptedSecret`]
/// before anything is stored, opened only to hand the step's part to its
/// component manager. `Debug` is redacted.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FirmwareCredentials {
    /// One credential for every component type.
    Shared(String),
    /// A credential per component type.
    PerComponent {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        compute: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nvswitch: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        powershelf: Option<String>,
    },
}

impl std::fmt::Debug for FirmwareCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FirmwareCredentials(<redacted>)")
    }
}

impl FirmwareCredentials {
    /// The credential of `component_type`, if any (empty counts as none).
    pub fn for_type(&self, component_type: crate::ComponentType) -> Option<SecretText> {
        let value = match self {
            FirmwareCredentials::Shared(value) => Some(value),
            FirmwareCredentials::PerComponent {
                compute,
                nvswitch,
                powershelf,
            } => match component_type {
                crate::ComponentType::Compute => compute.as_ref(),
                crate::ComponentType::NvSwitch => nvswitch.as_ref(),
                crate::ComponentType::PowerShelf => powershelf.as_ref(),
                _ => None,
            },
        };
        value
            .filter(|v| !v.is_empty())
            .map(|v| SecretText(v.clone()))
    }
}

/// A secret's plaintext in memory: `Debug` is redacted; read it with
/// [`SecretText::expose`] where it is handed to hardware.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretText(String);

impl SecretText {
    pub fn new(text: impl Into<String>) -> SecretText {
        SecretText(text.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Parameters of the firmware upgrade each target's child task performs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirmwarePayload {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_version: Option<String>,
    /// Maintenance window start, Unix seconds (0 = unset).
    #[serde(default)]
    pub start_time: i64,
    /// Maintenance window end, Unix seconds (0 = unset).
    #[serde(default)]
    pub end_time: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sub_targets: Vec<String>,
    #[serde(default)]
    pub override_readiness_check: bool,
    #[serde(default)]
    pub override_version_check: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication_data: Option<EncryptedSecret>,
    /// Versions per rack model and component type (issue 12), instead of
    /// one `target_version`: each rack's task gets its model's versions as
    /// a layered target version at submission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<crate::bundle::FirmwareBundle>,
    /// The caller means `target_version` for racks of every model (issue
    /// 31); without it one version across models is refused at submission.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub same_version_for_all_models: bool,
    /// Firmware objects of the rack manager's catalogue (issue 35): rack
    /// model → object id, the bundle's models. Set at submission from the
    /// request's `firmware_object`; each rack's task keeps its model's.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub firmware_objects: std::collections::BTreeMap<String, String>,
}

impl FirmwarePayload {
    /// The single version that has to pass
    /// [`crate::bundle::check_one_version`]: a `target_version` sent without
    /// a bundle and without `same_version_for_all_models`.
    pub fn unchecked_single_version(&self) -> Option<&str> {
        if self.bundle.is_some() || self.same_version_for_all_models {
            return None;
        }
        self.target_version
            .as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
    }
}

/// The operation every target of a run performs, plus the run's scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationTemplate {
    #[serde(rename = "type")]
    pub operation_type: String,
    pub code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_spec: Option<TargetSpec>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_options: Option<QueueOptions>,
    #[serde(default)]
    pub target_scope: TargetScope,
    pub payload: FirmwarePayload,
}

/// A run's whole effective configuration: seeds generated and defaults filled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunConfiguration {
    pub selector: Selector,
    pub options: RunOptions,
    pub operation: OperationTemplate,
}

/// An operation run as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationRun {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub status: RunStatus,
    pub reason: RunReason,
    pub status_message: String,
    pub current_phase_index: i32,
    pub total_phases: i32,
    pub configuration: RunConfiguration,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// Conflict-retry bookkeeping of a blocked target (decision D1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryState {
    pub blocked_since: DateTime<Utc>,
    pub attempts: i32,
    pub last_retry_delay_seconds: i64,
}

/// One rack of a run, frozen at creation.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationRunTarget {
    pub id: Uuid,
    pub operation_run_id: Uuid,
    pub rack_id: Uuid,
    pub sequence_index: i32,
    pub phase_index: i32,
    pub components_by_type: ComponentsByType,
    pub task_id: Option<Uuid>,
    pub status: TargetStatus,
    pub message: String,
    pub retry_after: Option<DateTime<Utc>>,
    pub retry_state: Option<RetryState>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Offset / limit of a list; `limit == 0` means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub offset: i64,
    pub limit: i64,
}

impl Page {
    /// The reference's default page: offset 0, limit 100.
    pub const DEFAULT: Page = Page {
        offset: 0,
        limit: 100,
    };
}

/// Name query of `ListOperationRuns` (reference `StringQueryInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameQuery {
    pub patterns: Vec<String>,
    pub is_wildcard: bool,
    pub use_or: bool,
}

impl NameQuery {
    /// A wildcard pattern as a LIKE pattern: wrapped as `%p%` unless it already
    /// starts or ends with `%`.
    pub fn like_pattern(pattern: &str) -> String {
        if pattern.starts_with('%') || pattern.ends_with('%') {
            pattern.to_string()
        } else {
            format!("%{pattern}%")
        }
    }
}

/// One `states` entry: the set fields are AND'ed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateFilter {
    pub status: Option<RunStatus>,
    pub reason: Option<RunReason>,
}

/// One `operation_kinds` entry: a type, and a code when given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindFilter {
    pub operation_type: String,
    pub code: Option<String>,
}

/// Validated filter of `ListOperationRuns`; all parts are AND'ed, entries of
/// `states` and `kinds` are OR'ed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunListFilter {
    pub name: NameQuery,
    pub states: Vec<StateFilter>,
    pub kinds: Vec<KindFilter>,
}

/// Query of `ListOperationRunTargets`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetQuery {
    pub operation_run_id: Uuid,
    pub status: Option<TargetStatus>,
    pub phase_scope: PhaseScope,
    /// The run's persisted current phase, which the scope is relative to.
    pub current_phase_index: i32,
    pub page: Page,
}

/// Outcome counts of terminal targets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutcomeCounts {
    pub completed: i32,
    pub failed: i32,
    pub terminated: i32,
    pub skipped: i32,
}

impl OutcomeCounts {
    pub fn add(&mut self, status: TargetStatus) {
        match status {
            TargetStatus::Completed => self.completed += 1,
            TargetStatus::Failed => self.failed += 1,
            TargetStatus::Terminated => self.terminated += 1,
            TargetStatus::Skipped => self.skipped += 1,
            _ => {}
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PhaseStats {
    pub phase_index: i32,
    pub selected_targets: i32,
    pub outcome_counts: OutcomeCounts,
}

/// Stats of `GetOperationRun` with `include_stats` (spec §4.8).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    pub current: PhaseStats,
    pub cumulative: PhaseStats,
}

impl RunStats {
    /// Folds one target (of the current-and-completed scope) into the stats:
    /// cumulative counts every row; current keeps only the highest phase seen,
    /// resetting whenever a higher phase appears, so the result does not
    /// depend on row order.
    pub fn add(&mut self, phase_index: i32, status: TargetStatus) {
        let first = self.cumulative.selected_targets == 0;
        self.cumulative.selected_targets += 1;
        self.cumulative.outcome_counts.add(status);
        if first || phase_index > self.cumulative.phase_index {
            self.cumulative.phase_index = phase_index;
        }
        if first || phase_index > self.current.phase_index {
            self.current = PhaseStats {
                phase_index,
                ..PhaseStats::default()
            };
        }
        if phase_index == self.current.phase_index {
            self.current.selected_targets += 1;
            self.current.outcome_counts.add(status);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_and_wire_numbers_round_trip() {
        for s in RunStatus::ALL {
            assert_eq!(RunStatus::parse(s.as_str()), Some(*s));
            assert_eq!(RunStatus::from_wire(s.to_wire()), Some(*s));
        }
        for s in TargetStatus::ALL {
            assert_eq!(TargetStatus::parse(s.as_str()), Some(*s));
            assert_eq!(TargetStatus::from_wire(s.to_wire()), Some(*s));
        }
        for r in RunReason::ALL {
            assert_eq!(RunReason::from_wire(r.to_wire()), Some(*r));
        }
        assert_eq!(RunStatus::from_wire(0), None);
        assert_eq!(RunStatus::CompletedWithFailures.to_wire(), 7);
        assert_eq!(TargetStatus::Claimed.to_wire(), 8);
        assert_eq!(RunReason::from_wire(9), None);
    }

    #[test]
    fn stats_follow_the_reference_example() {
        // phase 0 {completed, failed}, phase 1 {98 submitted, 1 terminated}
        let mut rows = vec![(0, TargetStatus::Completed), (0, TargetStatus::Failed)];
        rows.extend(std::iter::repeat_n((1, TargetStatus::Submitted), 98));
        rows.push((1, TargetStatus::Terminated));
        for order in [rows.clone(), rows.iter().rev().copied().collect()] {
            let mut stats = RunStats::default();
            for (phase, status) in order {
                stats.add(phase, status);
            }
            assert_eq!(stats.current.phase_index, 1);
            assert_eq!(stats.current.selected_targets, 99);
            assert_eq!(stats.current.outcome_counts.terminated, 1);
            assert_eq!(stats.current.outcome_counts.completed, 0);
            assert_eq!(stats.cumulative.phase_index, 1);
            assert_eq!(stats.cumulative.selected_targets, 101);
            assert_eq!(
                stats.cumulative.outcome_counts,
                OutcomeCounts {
                    completed: 1,
                    failed: 1,
                    terminated: 1,
                    skipped: 0
                }
            );
        }
    }

    #[test]
    fn configuration_json_has_the_reference_shape() {
        let config = RunConfiguration {
            selector: Selector::Percentage {
                percentage: 25,
                seed: "s".into(),
            },
            options: RunOptions {
                max_concurrent_targets: 4,
                safety_policy: SafetyPolicy {
                    gates: vec![SafetyGate::FailureRate {
                        scope: GateScope::CurrentPhase,
                        failure_threshold_percent: 10,
                    }],
                },
                conflict_policy: ConflictPolicy::default(),
                ordering_policy: OrderingPolicy::Random { seed: "o".into() },
                phase_policy: PhasePolicy {
                    plan: PhasePlan::Equal { phase_count: 2 },
                    advance_policy: AdvancePolicy { auto_advance: true },
                },
            },
            operation: OperationTemplate {
                operation_type: OPERATION_TYPE_FIRMWARE_CONTROL.into(),
                code: OPERATION_CODE_UPGRADE.into(),
                target_spec: None,
                description: String::new(),
                queue_options: None,
                target_scope: TargetScope::default(),
                payload: FirmwarePayload::default(),
            },
        };
        let selector = serde_json::to_value(&config.selector).unwrap();
        assert_eq!(
            selector,
            serde_json::json!({"kind":"percentage","payload":{"percentage":25,"seed":"s"}})
        );
        let options = serde_json::to_value(&config.options).unwrap();
        assert_eq!(
            options["conflict_policy"],
            serde_json::json!({"kind":"retry","payload":{"retry_timeout":3_600_000_000_000u64,"initial_retry_delay":30_000_000_000u64,"max_retry_delay":300_000_000_000u64}})
        );
        assert_eq!(
            options["phase_policy"],
            serde_json::json!({"kind":"equal","plan":{"phase_count":2},"advance_policy":{"auto_advance":true}})
        );
        assert_eq!(
            options["safety_policy"]["gates"][0],
            serde_json::json!({"kind":"failure_rate","payload":{"scope":"current_phase","failure_threshold_percent":10}})
        );
        let back: RunConfiguration =
            serde_json::from_str(&serde_json::to_string(&config).unwrap()).unwrap();
        assert_eq!(back, config);
    }
}
