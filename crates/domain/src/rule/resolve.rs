//! Which rule a task runs (spec flow-core §4.4), as a pure choice over the
//! candidates the caller has looked up: explicit > rack association >
//! database default > built-in > empty.
//!
//! Looking the candidates up (and logging lookup failures, which fall
//! through) is the caller's job; this only decides.

use uuid::Uuid;

use super::{OperationRule, RuleDefinition, builtin_rule};
use crate::task::TaskType;

/// Where a resolved rule came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleSource {
    /// The request named the rule (`rule_id`).
    Explicit,
    /// The rule associated with the rack for the (type, code).
    Association,
    /// The database default rule for the (type, code).
    Default,
    /// The hard-coded built-in rule.
    BuiltIn,
    /// Nothing matched: a definition with no steps, which fails the
    /// applicability check.
    Empty,
}

impl RuleSource {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleSource::Explicit => "explicit",
            RuleSource::Association => "association",
            RuleSource::Default => "default",
            RuleSource::BuiltIn => "built_in",
            RuleSource::Empty => "empty",
        }
    }
}

impl std::fmt::Display for RuleSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The rule a task will run.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedRule {
    pub definition: RuleDefinition,
    /// The database rule used; `None` for built-in and empty rules.
    pub applied_rule_id: Option<Uuid>,
    pub source: RuleSource,
}

/// Picks the first candidate present: `explicit`, then `association`, then
/// `default`, then the built-in for `(task_type, code)`, then an empty
/// definition. The candidates are taken as given (the caller looked them
/// up for this task's type and code).
pub fn resolve_rule(
    explicit: Option<&OperationRule>,
    association: Option<&OperationRule>,
    default: Option<&OperationRule>,
    task_type: TaskType,
    code: &str,
) -> ResolvedRule {
    let from_db = [
        (explicit, RuleSource::Explicit),
        (association, RuleSource::Association),
        (default, RuleSource::Default),
    ];
    if let Some((rule, source)) = from_db
        .into_iter()
        .find_map(|(rule, source)| rule.map(|r| (r, source)))
    {
        return ResolvedRule {
            definition: rule.definition.clone(),
            applied_rule_id: Some(rule.id),
            source,
        };
    }
    let definition = builtin_rule(task_type, code);
    let source = if definition.steps.is_empty() {
        RuleSource::Empty
    } else {
        RuleSource::BuiltIn
    };
    ResolvedRule {
        definition,
        applied_rule_id: None,
        source,
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::ComponentType;
    use crate::rule::SequenceStep;

    fn rule(n: u128, stage: i32) -> OperationRule {
        let mut definition = builtin_rule(TaskType::PowerControl, "cold_reset");
        definition.steps[0].stage = stage;
        OperationRule {
            id: Uuid::from_u128(n),
            name: format!("rule {n}"),
            description: String::new(),
            operation_type: TaskType::PowerControl,
            operation_code: "power_on".into(),
            definition,
            is_default: false,
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            updated_at: DateTime::<Utc>::UNIX_EPOCH,
        }
    }

    fn first_stage(r: &ResolvedRule) -> i32 {
        r.definition
            .steps
            .first()
            .map_or(0, |s: &SequenceStep| s.stage)
    }

    #[test]
    fn explicit_beats_association_beats_default() {
        let (e, a, d) = (rule(1, 11), rule(2, 12), rule(3, 13));
        let pc = TaskType::PowerControl;
        let r = resolve_rule(Some(&e), Some(&a), Some(&d), pc, "power_on");
        assert_eq!(
            (r.source, r.applied_rule_id, first_stage(&r)),
            (RuleSource::Explicit, Some(e.id), 11)
        );
        let r = resolve_rule(None, Some(&a), Some(&d), pc, "power_on");
        assert_eq!(
            (r.source, r.applied_rule_id, first_stage(&r)),
            (RuleSource::Association, Some(a.id), 12)
        );
        let r = resolve_rule(None, None, Some(&d), pc, "power_on");
        assert_eq!(
            (r.source, r.applied_rule_id, first_stage(&r)),
            (RuleSource::Default, Some(d.id), 13)
        );
        let r = resolve_rule(Some(&e), None, None, pc, "power_on");
        assert_eq!(r.source, RuleSource::Explicit);
    }

    #[test]
    fn builtin_then_empty() {
        let r = resolve_rule(None, None, None, TaskType::PowerControl, "power_on");
        assert_eq!(r.source, RuleSource::BuiltIn);
        assert_eq!(r.applied_rule_id, None);
        assert_eq!(
            r.definition,
            builtin_rule(TaskType::PowerControl, "power_on")
        );
        assert!(r.definition.applies_to(&[ComponentType::Compute]));

        let r = resolve_rule(None, None, None, TaskType::PowerControl, "warm_reset");
        assert_eq!(r.source, RuleSource::Empty);
        assert_eq!(r.applied_rule_id, None);
        assert_eq!(r.definition, RuleDefinition::empty());
        assert!(!r.definition.applies_to(&ComponentType::KNOWN));
    }
}
