//! Operation rules (spec flow-core §4): staged recipes that say, per
//! component type, which actions run in which stage, with what parallelism,
//! timeouts and retries.
//!
//! This module owns the rule model (the types below, whose JSON shape is the
//! stored `rule_definition`), the stage/step execution model the executors
//! share (stage order, per-step activity timeouts and retries, batching,
//! child budgets — §5.2–5.3), and what a definition asks of the component
//! managers. Submodules own the rest:
//!
//! * [`action`] — the typed actions, their parameters and capabilities;
//! * [`validate`] — parsing and validation with the reference's messages;
//! * [`builtin`] — the hard-coded default rules of §4.5;
//! * [`resolve`] — which rule a task runs (§4.4);
//! * [`batch`] — the YAML batch loader (§4.6);
//! * [`keys`] — the keys a user's document may have (unknown ones refused);
//! * [`error`] — [`RuleError`].

pub mod action;
pub mod batch;
pub mod builtin;
pub mod error;
pub mod keys;
pub mod resolve;
pub mod validate;

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ComponentType;
use crate::duration::serde_go;
use crate::task::TaskType;

pub use action::{Action, ActionKind, Capability, PowerState};
pub use batch::{NewRule, parse_rule_batch};
pub use builtin::{builtin_rule, has_builtin_rule};
pub use error::RuleError;
pub use resolve::{ResolvedRule, RuleSource, resolve_rule};
pub use validate::{parse_operation_type, parse_rule_definition, validate_rule_record};

/// The only rule definition schema version.
pub const CURRENT_VERSION: &str = "v1";
/// Activity (StartToClose) timeout of a step that sets none (spec §5.3).
pub const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(20 * 60);
/// Per-attempt base of a child budget when the step sets no timeout (§5.2).
pub const CHILD_TIMEOUT_BASE: Duration = Duration::from_secs(30 * 60);
/// Scheduling slack added to every child budget (§5.2).
pub const CHILD_TIMEOUT_SLACK: Duration = Duration::from_secs(2 * 60);

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

impl RetryPolicy {
    /// The activity retry policy of a step without one (spec §5.3):
    /// 3 attempts, 1 s initial interval, ×2.0, at most 1 min apart.
    pub fn activity_default() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 3,
            initial_interval: Duration::from_secs(1),
            backoff_coefficient: 2.0,
            max_interval: Some(Duration::from_secs(60)),
        }
    }
}

/// How many sequential dispatches `action` needs for `component_count`
/// components of a step with `max_parallel` (spec §5.3): ⌈n / max_parallel⌉
/// for component-scoped actions, otherwise (and for max_parallel 0 or an
/// unknown action) one.
pub fn batch_count(action: &ActionConfig, max_parallel: i32, component_count: usize) -> usize {
    let batched = ActionKind::parse(&action.name).is_some_and(ActionKind::is_batched);
    let Ok(per_batch) = usize::try_from(max_parallel) else {
        return 1;
    };
    if !batched || per_batch == 0 || component_count <= per_batch {
        1
    } else {
        component_count.div_ceil(per_batch)
    }
}

impl SequenceStep {
    /// Pre actions, the main action, then post actions: execution order.
    pub fn actions(&self) -> impl Iterator<Item = &ActionConfig> {
        self.pre_operation
            .iter()
            .chain(std::iter::once(&self.main_operation))
            .chain(self.post_operation.iter())
    }

    /// StartToClose timeout of each activity of the step (0 or unset →
    /// [`DEFAULT_STEP_TIMEOUT`]).
    pub fn activity_timeout(&self) -> Duration {
        self.timeout
            .filter(|t| !t.is_zero())
            .unwrap_or(DEFAULT_STEP_TIMEOUT)
    }

    /// The activity retry policy: the step's (a zero initial interval
    /// becomes 1 s, a zero max interval means none), else
    /// [`RetryPolicy::activity_default`].
    pub fn activity_retry(&self) -> RetryPolicy {
        match &self.retry {
            None => RetryPolicy::activity_default(),
            Some(r) => RetryPolicy {
                max_attempts: r.max_attempts,
                initial_interval: if r.initial_interval.is_zero() {
                    Duration::from_secs(1)
                } else {
                    r.initial_interval
                },
                backoff_coefficient: r.backoff_coefficient,
                max_interval: r.max_interval.filter(|d| !d.is_zero()),
            },
        }
    }

    /// Execution budget of the child that runs this step over
    /// `component_count` components (spec §5.2): every attempt of every
    /// main-action batch with the back-off between attempts, plus the
    /// pre/post action timeouts per batch, plus [`CHILD_TIMEOUT_SLACK`].
    pub fn child_execution_timeout(&self, component_count: usize) -> Duration {
        let base = self
            .timeout
            .filter(|t| !t.is_zero())
            .unwrap_or(CHILD_TIMEOUT_BASE);
        let (attempts, backoff) = match &self.retry {
            Some(r) if r.max_attempts > 1 => (
                r.max_attempts as u32,
                r.max_interval
                    .filter(|d| !d.is_zero())
                    .unwrap_or(r.initial_interval),
            ),
            _ => (1, Duration::ZERO),
        };
        let main_batches = batch_count(&self.main_operation, self.max_parallel, component_count);
        let main = (base.saturating_mul(attempts) + backoff.saturating_mul(attempts - 1))
            .saturating_mul(main_batches as u32);
        let side: Duration = self
            .pre_operation
            .iter()
            .chain(&self.post_operation)
            .map(|a| {
                a.timeout.unwrap_or_default().saturating_mul(batch_count(
                    a,
                    self.max_parallel,
                    component_count,
                ) as u32)
            })
            .sum();
        main + side + CHILD_TIMEOUT_SLACK
    }
}

/// The steps of one stage (they run in parallel, one child per step).
#[derive(Debug, Clone, PartialEq)]
pub struct Stage<'a> {
    pub number: i32,
    /// In definition order.
    pub steps: Vec<&'a SequenceStep>,
}

impl RuleDefinition {
    /// A definition with no steps (what resolution falls back to last).
    pub fn empty() -> RuleDefinition {
        RuleDefinition {
            version: CURRENT_VERSION.to_string(),
            steps: Vec::new(),
        }
    }

    /// Stages in ascending number, each with its steps in definition order.
    pub fn stages(&self) -> Vec<Stage<'_>> {
        let numbers: BTreeSet<i32> = self.steps.iter().map(|s| s.stage).collect();
        numbers
            .into_iter()
            .map(|number| Stage {
                number,
                steps: self.steps.iter().filter(|s| s.stage == number).collect(),
            })
            .collect()
    }

    /// Whether the rule has a step for at least one targeted type (a rule
    /// that does not is refused at submission, spec §3.3 step 5).
    pub fn applies_to(&self, targeted: &[ComponentType]) -> bool {
        self.steps
            .iter()
            .any(|s| targeted.contains(&s.component_type))
    }

    /// The component types the rule has steps for, in wire order without
    /// repeats (what a "not applicable" refusal names).
    pub fn step_types(&self) -> Vec<ComponentType> {
        let mut types: Vec<ComponentType> = self.steps.iter().map(|s| s.component_type).collect();
        types.sort();
        types.dedup();
        types
    }

    /// The (component type, capability) pairs the task's managers must
    /// offer, only for targeted types (spec §4.3), sorted and without
    /// repeats. An action applies to its step's type and to the types it
    /// names in `component_types` (VerifyReachability). Actions with an
    /// unknown name are skipped here: validation refuses them; use
    /// [`Self::checked_required_capabilities`] to have them reported.
    pub fn required_capabilities(
        &self,
        targeted: &[ComponentType],
    ) -> Vec<(ComponentType, Capability)> {
        self.collect_capabilities(targeted, false)
            .unwrap_or_default()
    }

    /// As [`Self::required_capabilities`], but an action name outside the
    /// capability table is an error (`unknown action: X`).
    pub fn checked_required_capabilities(
        &self,
        targeted: &[ComponentType],
    ) -> Result<Vec<(ComponentType, Capability)>, RuleError> {
        self.collect_capabilities(targeted, true)
    }

    fn collect_capabilities(
        &self,
        targeted: &[ComponentType],
        strict: bool,
    ) -> Result<Vec<(ComponentType, Capability)>, RuleError> {
        let mut out = BTreeSet::new();
        for step in self
            .steps
            .iter()
            .filter(|s| targeted.contains(&s.component_type))
        {
            for action in step.actions() {
                let Some(kind) = ActionKind::parse(&action.name) else {
                    if strict {
                        return Err(RuleError::UnknownAction(action.name.clone()));
                    }
                    continue;
                };
                let mut types = action.parameter_component_types();
                types.push(step.component_type);
                for ty in types.into_iter().filter(|t| targeted.contains(t)) {
                    for cap in kind.required_capabilities() {
                        out.insert((ty, *cap));
                    }
                }
            }
        }
        Ok(out.into_iter().collect())
    }

    /// Workflow timeout estimate (spec §4.6): over the stages, the sum of
    /// each stage's longest step timeout (unset or 0 →
    /// [`DEFAULT_STEP_TIMEOUT`]), plus 10 %.
    pub fn timeout_estimate(&self) -> Duration {
        let total: Duration = self
            .stages()
            .iter()
            .map(|stage| {
                stage
                    .steps
                    .iter()
                    .map(|s| s.activity_timeout())
                    .max()
                    .unwrap_or_default()
            })
            .sum();
        total + total / 10
    }

    /// Whether the rule's actions talk to managers about specific
    /// components, so every targeted component must be linked (have an
    /// external id). Rules of only InjectExpectation / Sleep actions
    /// (ingest) register components that are not linked yet (spec §3.3
    /// step 5).
    pub fn requires_linked_targets(&self) -> bool {
        self.steps.iter().flat_map(SequenceStep::actions).any(|a| {
            !matches!(
                ActionKind::parse(&a.name),
                Some(ActionKind::InjectExpectation | ActionKind::Sleep)
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const fn mins(m: u64) -> Duration {
        Duration::from_secs(m * 60)
    }

    fn action(name: &str) -> ActionConfig {
        ActionConfig {
            name: name.into(),
            timeout: None,
            poll_interval: None,
            parameters: Default::default(),
        }
    }

    fn step(ty: ComponentType, stage: i32, timeout: Option<Duration>) -> SequenceStep {
        SequenceStep {
            component_type: ty,
            stage,
            max_parallel: 0,
            timeout,
            retry: None,
            pre_operation: vec![],
            main_operation: action("PowerControl"),
            post_operation: vec![],
            delay_after: None,
        }
    }

    fn definition(steps: Vec<SequenceStep>) -> RuleDefinition {
        RuleDefinition {
            version: CURRENT_VERSION.into(),
            steps,
        }
    }

    use ComponentType::{Compute, NvSwitch, PowerShelf, TorSwitch};

    #[test]
    fn serde_shape_is_unchanged() {
        let d = definition(vec![step(Compute, 1, Some(mins(15)))]);
        assert_eq!(
            serde_json::to_value(&d).unwrap(),
            json!({"version": "v1", "steps": [{
                "component_type": "Compute", "stage": 1, "max_parallel": 0,
                "timeout": "15m0s", "main_operation": {"name": "PowerControl"}
            }]})
        );
    }

    #[test]
    fn stages_sort_by_number_and_keep_step_order() {
        let d = definition(vec![
            step(Compute, 3, None),
            step(PowerShelf, 1, None),
            step(NvSwitch, 3, None),
            step(NvSwitch, 2, None),
        ]);
        let stages = d.stages();
        let shape: Vec<(i32, Vec<ComponentType>)> = stages
            .iter()
            .map(|s| (s.number, s.steps.iter().map(|x| x.component_type).collect()))
            .collect();
        assert_eq!(
            shape,
            [
                (1, vec![PowerShelf]),
                (2, vec![NvSwitch]),
                (3, vec![Compute, NvSwitch])
            ]
        );
    }

    #[test]
    fn applies_to_needs_a_step_for_a_targeted_type() {
        let d = definition(vec![step(Compute, 1, None), step(NvSwitch, 2, None)]);
        assert!(d.applies_to(&[Compute]));
        assert!(d.applies_to(&[PowerShelf, NvSwitch]));
        assert!(!d.applies_to(&[PowerShelf, TorSwitch]));
        assert!(!d.applies_to(&[]));
        assert!(!RuleDefinition::empty().applies_to(&[Compute]));
        assert_eq!(d.step_types(), [Compute, NvSwitch]);
        let repeated = definition(vec![
            step(PowerShelf, 1, None),
            step(Compute, 2, None),
            step(PowerShelf, 3, None),
        ]);
        assert_eq!(
            repeated.step_types(),
            [Compute, PowerShelf],
            "wire order, once"
        );
        assert!(RuleDefinition::empty().step_types().is_empty());
    }

    #[test]
    fn required_capabilities_only_for_targeted_types() {
        let mut fw = step(Compute, 1, None);
        fw.main_operation = action("FirmwareControl");
        fw.post_operation = vec![action("Sleep")];
        let mut reach = step(PowerShelf, 2, None);
        reach.pre_operation = vec![ActionConfig {
            parameters: json!({"component_types": ["compute", "torswitch"]})
                .as_object()
                .unwrap()
                .clone(),
            ..action("VerifyReachability")
        }];
        let d = definition(vec![fw, reach, step(NvSwitch, 3, None)]);
        assert_eq!(
            d.required_capabilities(&[Compute]),
            [
                (Compute, Capability::FirmwareControl),
                (Compute, Capability::FirmwareStatus)
            ]
        );
        // The PowerShelf step's reachability check also needs PowerStatus of
        // the compute managers, but only when compute is targeted too.
        assert_eq!(
            d.required_capabilities(&[PowerShelf, Compute]),
            [
                (Compute, Capability::PowerStatus),
                (Compute, Capability::FirmwareControl),
                (Compute, Capability::FirmwareStatus),
                (PowerShelf, Capability::PowerControl),
                (PowerShelf, Capability::PowerStatus),
            ]
        );
        assert_eq!(
            d.required_capabilities(&[PowerShelf]),
            [
                (PowerShelf, Capability::PowerControl),
                (PowerShelf, Capability::PowerStatus)
            ]
        );
        assert!(d.required_capabilities(&[TorSwitch]).is_empty());
    }

    #[test]
    fn unknown_actions_in_capability_derivation() {
        let mut s = step(Compute, 1, None);
        s.post_operation = vec![action("Teleport")];
        let d = definition(vec![s]);
        assert_eq!(
            d.required_capabilities(&[Compute]),
            [(Compute, Capability::PowerControl)]
        );
        assert_eq!(
            d.checked_required_capabilities(&[Compute])
                .unwrap_err()
                .to_string(),
            "unknown action: Teleport"
        );
        // Untargeted steps are not looked at.
        assert!(
            d.checked_required_capabilities(&[NvSwitch])
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn timeout_estimate_sums_stage_maxima_plus_ten_percent() {
        let d = definition(vec![
            step(PowerShelf, 1, Some(mins(15))),
            step(NvSwitch, 1, Some(mins(40))),
            step(Compute, 2, None),                 // default 20m
            step(Compute, 3, Some(Duration::ZERO)), // default 20m
        ]);
        assert_eq!(d.timeout_estimate(), mins(80) + mins(8));
        assert_eq!(RuleDefinition::empty().timeout_estimate(), Duration::ZERO);
    }

    #[test]
    fn activity_timeout_and_retry_defaults() {
        let mut s = step(Compute, 1, None);
        assert_eq!(s.activity_timeout(), DEFAULT_STEP_TIMEOUT);
        assert_eq!(s.activity_retry(), RetryPolicy::activity_default());
        s.timeout = Some(mins(5));
        s.retry = Some(RetryPolicy {
            max_attempts: 2,
            initial_interval: Duration::ZERO,
            backoff_coefficient: 1.5,
            max_interval: Some(Duration::ZERO),
        });
        assert_eq!(s.activity_timeout(), mins(5));
        assert_eq!(
            s.activity_retry(),
            RetryPolicy {
                max_attempts: 2,
                initial_interval: Duration::from_secs(1),
                backoff_coefficient: 1.5,
                max_interval: None,
            }
        );
    }

    #[test]
    fn batching_by_max_parallel() {
        let power = action("PowerControl");
        let sleep = action("Sleep");
        assert_eq!(batch_count(&power, 0, 10), 1);
        assert_eq!(batch_count(&power, 3, 10), 4);
        assert_eq!(batch_count(&power, 5, 10), 2);
        assert_eq!(batch_count(&power, 10, 3), 1);
        assert_eq!(batch_count(&sleep, 3, 10), 1);
        assert_eq!(batch_count(&action("VerifyReachability"), 3, 10), 1);
        assert_eq!(batch_count(&action("Teleport"), 3, 10), 1);
    }

    #[test]
    fn child_budget_covers_retries_batches_and_side_actions() {
        let mut s = step(Compute, 1, Some(mins(10)));
        // No retry: one attempt of one batch plus slack.
        assert_eq!(s.child_execution_timeout(4), mins(12));
        s.retry = Some(RetryPolicy {
            max_attempts: 3,
            initial_interval: Duration::from_secs(5),
            backoff_coefficient: 2.0,
            max_interval: None,
        });
        s.max_parallel = 2;
        s.post_operation = vec![
            ActionConfig {
                timeout: Some(mins(5)),
                ..action("VerifyPowerStatus")
            },
            ActionConfig {
                timeout: Some(mins(1)),
                ..action("VerifyReachability")
            },
        ];
        // main: (3×10m + 2×5s) × 2 batches; post: 5m × 2 batches + 1m × 1.
        let expected = (mins(30) + Duration::from_secs(10)) * 2 + mins(10) + mins(1) + mins(2);
        assert_eq!(s.child_execution_timeout(4), expected);
        // No step timeout: 30 min base.
        assert_eq!(step(Compute, 1, None).child_execution_timeout(1), mins(32));
    }

    #[test]
    fn linked_targets_needed_unless_only_inject_or_sleep() {
        let mut ingest = step(Compute, 1, None);
        ingest.main_operation = action("InjectExpectation");
        ingest.post_operation = vec![action("Sleep")];
        assert!(!definition(vec![ingest.clone()]).requires_linked_targets());
        assert!(definition(vec![ingest, step(NvSwitch, 2, None)]).requires_linked_targets());
    }
}
