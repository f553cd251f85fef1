//! Event rules (issue 34): what Flow does on its own when hardware reports
//! an event — today one event type, `hardware.leak.detected`.
//!
//! This module owns the rule and binding types, their validation (the
//! reference's: a registered event type, a name without surrounding
//! whitespace of at most 128 bytes, one or more uniquely named
//! lower-snake-case actions each with exactly one typed operation), the
//! immutable built-in rule of each event type, the selection order (rack
//! binding > site binding > built-in, disabled rules skipped) and the
//! evaluation of an action's condition against an event. Storage and
//! execution live in the store and the engine.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ComponentType;

/// The one event type this version knows.
pub const LEAK_DETECTED: &str = "hardware.leak.detected";

/// Every registered event type.
pub const EVENT_TYPES: &[&str] = &[LEAK_DETECTED];

/// The stable id of the built-in leak rule (the reference's).
pub const BUILTIN_LEAK_RULE_ID: Uuid = Uuid::from_u128(0xf34b87f7_cb1b_4b08_aa51_30c0b3b58680);

/// Longest rule name, in bytes.
pub const MAX_NAME_BYTES: usize = 128;
/// Longest description, action name, alert message or noop reason, in
/// bytes (rackflow's bound; the reference stores text unbounded).
pub const MAX_TEXT_BYTES: usize = 4096;
/// Most actions of one rule (rackflow's bound).
pub const MAX_ACTIONS: usize = 32;

named_enum!(
    /// How severe an event is (and the severity of an alert).
    Severity {
        Info = 1 => "info",
        Warning = 2 => "warning",
        Critical = 3 => "critical",
    }
);

named_enum!(
    /// Which components a `submit_task` action acts on.
    TargetStrategy {
        /// The component that produced the event.
        Component = 1 => "component",
        /// Every component of the event's rack.
        Rack = 2 => "rack",
        /// What the event type's resolver says is affected (leak: the
        /// leaking component and those in lower slots of its rack).
        AffectedComponents = 3 => "affected_components",
    }
);

named_enum!(
    /// What a submitted task does when its rack is busy.
    ConflictStrategy {
        Queue = 1 => "queue",
        Reject = 2 => "reject",
    }
);

/// When an action applies: values within a list are OR'ed, the two lists
/// AND'ed, an empty list imposes nothing. A component-type condition never
/// matches a rack event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    #[serde(default)]
    pub severities: Vec<Severity>,
    #[serde(default)]
    pub component_types: Vec<ComponentType>,
}

impl Condition {
    /// Whether an event of `severity` about a component of `component_type`
    /// (`None` for a rack event) matches.
    pub fn matches(&self, severity: Severity, component_type: Option<ComponentType>) -> bool {
        let severity_ok = self.severities.is_empty() || self.severities.contains(&severity);
        let type_ok = self.component_types.is_empty()
            || component_type.is_some_and(|t| self.component_types.contains(&t));
        severity_ok && type_ok
    }
}

/// The task a `submit_task` action submits (the reference's
/// `TaskOperation`); targets come from the event, never from here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TaskOperation {
    PowerControl {
        /// A power task code (`force_power_off`, …).
        code: String,
        #[serde(default)]
        override_readiness_check: bool,
    },
    FirmwareControl {
        /// `upgrade`, `downgrade` or `rollback`.
        code: String,
        #[serde(default)]
        target_version: Option<String>,
        /// Window, unix seconds.
        #[serde(default)]
        start_time: Option<i64>,
        #[serde(default)]
        end_time: Option<i64>,
        #[serde(default)]
        sub_targets: Vec<String>,
        #[serde(default)]
        override_readiness_check: bool,
        #[serde(default)]
        override_version_check: bool,
    },
}

/// What an action does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ActionSpec {
    SubmitTask {
        operation: TaskOperation,
        target_strategy: TargetStrategy,
        conflict_strategy: ConflictStrategy,
        #[serde(default)]
        description: String,
    },
    SendAlert {
        severity: Severity,
        #[serde(default)]
        message: String,
    },
    Noop {
        #[serde(default)]
        reason: String,
    },
}

/// One named action of a rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    pub name: String,
    #[serde(default)]
    pub condition: Condition,
    pub spec: ActionSpec,
}

/// An event rule: persisted (created disabled) or built in (read-only,
/// always enabled, no timestamps).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRule {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub enabled: bool,
    pub event_type: String,
    pub actions: Vec<Action>,
    pub read_only: bool,
    pub created_at: Option<DateTime<Utc>>,
    pub updated_at: Option<DateTime<Utc>>,
}

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    Site,
    Rack(Uuid),
}

impl Scope {
    /// `site` or `rack <id>`, for messages.
    pub fn describe(self) -> String {
        match self {
            Scope::Site => "the site".to_string(),
            Scope::Rack(id) => format!("rack {id}"),
        }
    }
}

/// A persisted rule bound to a scope for its event type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub id: Uuid,
    pub rule_id: Uuid,
    pub event_type: String,
    pub scope: Scope,
}

/// A rule or request that breaks the contract (InvalidArgument).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EventRuleInvalid(pub String);

fn invalid(message: impl Into<String>) -> EventRuleInvalid {
    EventRuleInvalid(message.into())
}

/// The event type, trimmed, if it is registered.
pub fn check_event_type(event_type: &str) -> Result<&'static str, EventRuleInvalid> {
    if event_type.trim().is_empty() {
        return Err(invalid("event_type is required"));
    }
    EVENT_TYPES
        .iter()
        .copied()
        .find(|t| *t == event_type)
        .ok_or_else(|| {
            invalid(format!(
                "unsupported event type {event_type:?} (supported: {})",
                EVENT_TYPES.join(", ")
            ))
        })
}

/// A rule name: required, no surrounding whitespace, at most 128 bytes.
pub fn check_name(name: &str) -> Result<(), EventRuleInvalid> {
    if name.is_empty() {
        return Err(invalid("rule name is required"));
    }
    if name.trim() != name {
        return Err(invalid(
            "rule name must not have leading or trailing whitespace",
        ));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(invalid(format!(
            "rule name is {} bytes; at most {MAX_NAME_BYTES} are allowed",
            name.len()
        )));
    }
    Ok(())
}

pub fn check_description(description: &str) -> Result<(), EventRuleInvalid> {
    check_text("description", description)
}

fn check_text(what: &str, text: &str) -> Result<(), EventRuleInvalid> {
    if text.len() > MAX_TEXT_BYTES {
        return Err(invalid(format!(
            "{what} is {} bytes; at most {MAX_TEXT_BYTES} are allowed",
            text.len()
        )));
    }
    Ok(())
}

/// `power_off_affected_components`: a lower-case letter, then lower-case
/// letters, digits and single underscores, not ending in one.
fn is_snake_case(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes[0].is_ascii_lowercase()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
        && !name.ends_with('_')
        && !name.contains("__")
}

/// Checks a rule's action list (create and actions update).
pub fn check_actions(actions: &[Action]) -> Result<(), EventRuleInvalid> {
    if actions.is_empty() {
        return Err(invalid("at least one action is required"));
    }
    if actions.len() > MAX_ACTIONS {
        return Err(invalid(format!(
            "{} actions; at most {MAX_ACTIONS} are allowed",
            actions.len()
        )));
    }
    let mut seen = std::collections::HashSet::new();
    for action in actions {
        let name = action.name.as_str();
        if name.is_empty() {
            return Err(invalid("action name is required"));
        }
        if !is_snake_case(name) || name.len() > MAX_NAME_BYTES {
            return Err(invalid(format!(
                "action name {name:?} must be a lower_snake_case identifier of at most \
                 {MAX_NAME_BYTES} bytes"
            )));
        }
        if !seen.insert(name) {
            return Err(invalid(format!("action name {name:?} is used twice")));
        }
        if action
            .condition
            .component_types
            .contains(&ComponentType::Unknown)
        {
            return Err(invalid(format!(
                "action {name}: condition component type must be specified"
            )));
        }
        match &action.spec {
            ActionSpec::SubmitTask {
                operation,
                description,
                ..
            } => {
                check_operation(operation).map_err(|e| invalid(format!("action {name}: {e}")))?;
                check_text("task description", description)?;
            }
            ActionSpec::SendAlert { message, .. } => check_text("alert message", message)?,
            ActionSpec::Noop { reason } => check_text("noop reason", reason)?,
        }
    }
    Ok(())
}

fn check_operation(operation: &TaskOperation) -> Result<(), EventRuleInvalid> {
    use crate::task::TaskType;
    match operation {
        TaskOperation::PowerControl { code, .. } => {
            if !TaskType::PowerControl
                .valid_codes()
                .contains(&code.as_str())
            {
                return Err(invalid(format!(
                    "unsupported power control operation {code:?}"
                )));
            }
        }
        TaskOperation::FirmwareControl {
            code,
            start_time,
            end_time,
            sub_targets,
            target_version,
            ..
        } => {
            if !TaskType::FirmwareControl
                .valid_codes()
                .contains(&code.as_str())
            {
                return Err(invalid(format!(
                    "unsupported firmware control operation {code:?}"
                )));
            }
            if let (Some(start), Some(end)) = (start_time, end_time)
                && start >= end
            {
                return Err(invalid(
                    "firmware control start time must be before end time",
                ));
            }
            if target_version
                .as_deref()
                .is_some_and(|v| v.len() > MAX_NAME_BYTES)
                || sub_targets.iter().any(|s| s.len() > MAX_NAME_BYTES)
            {
                return Err(invalid(
                    "firmware control target version and sub-targets are at most 128 bytes",
                ));
            }
        }
    }
    Ok(())
}

/// A validated new rule (always disabled).
pub fn new_rule(
    id: Uuid,
    name: String,
    description: String,
    event_type: &str,
    actions: Vec<Action>,
    now: DateTime<Utc>,
) -> Result<EventRule, EventRuleInvalid> {
    check_name(&name)?;
    check_description(&description)?;
    let event_type = check_event_type(event_type)?;
    check_actions(&actions)?;
    Ok(EventRule {
        id,
        name,
        description,
        enabled: false,
        event_type: event_type.to_string(),
        actions,
        read_only: false,
        created_at: Some(now),
        updated_at: Some(now),
    })
}

/// The built-in rules, ascending id.
pub fn builtin_rules() -> Vec<EventRule> {
    vec![EventRule {
        id: BUILTIN_LEAK_RULE_ID,
        name: "Default leakage response".to_string(),
        description: "Power off components affected by a detected hardware leak.".to_string(),
        enabled: true,
        event_type: LEAK_DETECTED.to_string(),
        actions: vec![Action {
            name: "power_off_affected_components".to_string(),
            condition: Condition::default(),
            spec: ActionSpec::SubmitTask {
                operation: TaskOperation::PowerControl {
                    code: "force_power_off".to_string(),
                    override_readiness_check: false,
                },
                target_strategy: TargetStrategy::AffectedComponents,
                conflict_strategy: ConflictStrategy::Queue,
                description: "Leakage response".to_string(),
            },
        }],
        read_only: true,
        created_at: None,
        updated_at: None,
    }]
}

/// The built-in rule with this id.
pub fn builtin_rule(id: Uuid) -> Option<EventRule> {
    builtin_rules().into_iter().find(|r| r.id == id)
}

/// The built-in rule of an event type.
pub fn builtin_for(event_type: &str) -> Option<EventRule> {
    builtin_rules()
        .into_iter()
        .find(|r| r.event_type == event_type)
}

/// The effective rule: the first enabled of the rack-bound and site-bound
/// rules, else the built-in.
pub fn select(
    rack_bound: Option<EventRule>,
    site_bound: Option<EventRule>,
    builtin: EventRule,
) -> EventRule {
    rack_bound
        .filter(|r| r.enabled)
        .or(site_bound.filter(|r| r.enabled))
        .unwrap_or(builtin)
}

/// The components a leak on `source` (in `slot`) affects, as the reference
/// approximates it: the source and every component of the rack in a valid
/// slot strictly below it. `None` when the source has no valid slot.
pub fn leak_affected(source: Uuid, slots: &[(Uuid, Option<i32>)]) -> Option<Vec<Uuid>> {
    let source_slot = slots
        .iter()
        .find(|(id, _)| *id == source)
        .and_then(|(_, slot)| *slot)
        .filter(|s| *s >= 0)?;
    let mut affected: Vec<Uuid> = slots
        .iter()
        .filter(|(id, slot)| *id == source || slot.is_some_and(|s| s >= 0 && s < source_slot))
        .map(|(id, _)| *id)
        .collect();
    affected.sort();
    affected.dedup();
    Some(affected)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noop(name: &str) -> Action {
        Action {
            name: name.into(),
            condition: Condition::default(),
            spec: ActionSpec::Noop {
                reason: "audit".into(),
            },
        }
    }

    fn power(code: &str) -> Action {
        Action {
            name: "power_off".into(),
            condition: Condition::default(),
            spec: ActionSpec::SubmitTask {
                operation: TaskOperation::PowerControl {
                    code: code.into(),
                    override_readiness_check: false,
                },
                target_strategy: TargetStrategy::Rack,
                conflict_strategy: ConflictStrategy::Reject,
                description: String::new(),
            },
        }
    }

    #[test]
    fn names_and_event_types_are_checked() {
        assert!(check_name("Leak response").is_ok());
        for (bad, text) in [("", "required"), (" x", "whitespace"), ("x ", "whitespace")] {
            assert!(check_name(bad).unwrap_err().0.contains(text), "{bad:?}");
        }
        assert!(check_name(&"n".repeat(129)).is_err());
        assert!(check_name(&"n".repeat(128)).is_ok());
        assert_eq!(check_event_type(LEAK_DETECTED).unwrap(), LEAK_DETECTED);
        assert!(
            check_event_type("hardware.fire")
                .unwrap_err()
                .0
                .contains("unsupported event type")
        );
        assert!(check_event_type("").unwrap_err().0.contains("required"));
    }

    #[test]
    fn actions_need_unique_snake_case_names_and_a_valid_operation() {
        assert!(check_actions(&[power("force_power_off"), noop("audit")]).is_ok());
        assert!(check_actions(&[]).unwrap_err().0.contains("at least one"));
        assert!(
            check_actions(&[noop("audit"), noop("audit")])
                .unwrap_err()
                .0
                .contains("used twice")
        );
        for bad in ["Audit", "audit_", "a__b", "9x", "has space", ""] {
            assert!(check_actions(&[noop(bad)]).is_err(), "{bad:?}");
        }
        assert!(
            check_actions(&[power("explode")])
                .unwrap_err()
                .0
                .contains("unsupported power control operation")
        );
        let mut window = power("x");
        window.spec = ActionSpec::SubmitTask {
            operation: TaskOperation::FirmwareControl {
                code: "upgrade".into(),
                target_version: Some("2.0".into()),
                start_time: Some(10),
                end_time: Some(10),
                sub_targets: Vec::new(),
                override_readiness_check: false,
                override_version_check: false,
            },
            target_strategy: TargetStrategy::Rack,
            conflict_strategy: ConflictStrategy::Queue,
            description: String::new(),
        };
        assert!(
            check_actions(&[window])
                .unwrap_err()
                .0
                .contains("start time must be before end time")
        );
    }

    #[test]
    fn new_rules_are_disabled_and_the_builtin_is_read_only() {
        let now = Utc::now();
        let rule = new_rule(
            Uuid::from_u128(1),
            "r".into(),
            String::new(),
            LEAK_DETECTED,
            vec![noop("a")],
            now,
        )
        .unwrap();
        assert!(!rule.enabled && !rule.read_only);
        let builtin = builtin_for(LEAK_DETECTED).unwrap();
        assert!(builtin.enabled && builtin.read_only);
        assert_eq!(
            builtin.id.to_string(),
            "f34b87f7-cb1b-4b08-aa51-30c0b3b58680"
        );
        assert!(check_actions(&builtin.actions).is_ok());
        assert_eq!(builtin_rule(BUILTIN_LEAK_RULE_ID), Some(builtin));
    }

    #[test]
    fn selection_prefers_enabled_rack_then_site_then_builtin() {
        let rule = |n: u128, enabled: bool| EventRule {
            id: Uuid::from_u128(n),
            enabled,
            ..builtin_for(LEAK_DETECTED).unwrap()
        };
        let builtin = builtin_for(LEAK_DETECTED).unwrap();
        let pick = |rack, site| select(rack, site, builtin.clone()).id;
        assert_eq!(
            pick(Some(rule(1, true)), Some(rule(2, true))),
            Uuid::from_u128(1)
        );
        assert_eq!(
            pick(Some(rule(1, false)), Some(rule(2, true))),
            Uuid::from_u128(2)
        );
        assert_eq!(
            pick(Some(rule(1, false)), Some(rule(2, false))),
            BUILTIN_LEAK_RULE_ID
        );
        assert_eq!(pick(None, None), BUILTIN_LEAK_RULE_ID);
    }

    #[test]
    fn conditions_or_within_and_between() {
        let c = Condition {
            severities: vec![Severity::Critical, Severity::Warning],
            component_types: vec![ComponentType::Compute],
        };
        assert!(c.matches(Severity::Critical, Some(ComponentType::Compute)));
        assert!(c.matches(Severity::Warning, Some(ComponentType::Compute)));
        assert!(!c.matches(Severity::Info, Some(ComponentType::Compute)));
        assert!(!c.matches(Severity::Critical, Some(ComponentType::NvSwitch)));
        assert!(!c.matches(Severity::Critical, None), "a rack event");
        assert!(Condition::default().matches(Severity::Info, None));
    }

    #[test]
    fn a_leak_affects_the_source_and_lower_slots() {
        let id = Uuid::from_u128;
        let slots = [
            (id(1), Some(10)),
            (id(2), Some(3)),
            (id(3), Some(10)),
            (id(4), Some(12)),
            (id(5), None),
            (id(6), Some(-1)),
            (id(7), Some(0)),
        ];
        assert_eq!(
            leak_affected(id(1), &slots),
            Some(vec![id(1), id(2), id(7)])
        );
        assert_eq!(leak_affected(id(5), &slots), None);
        assert_eq!(leak_affected(id(99), &slots), None);
    }
}
