//! Event rules on the wire: the reference's messages (wire-contract A.13)
//! to and from `rackflow_domain::event_rule`, with the reference's request
//! validation (an action needs exactly one typed spec; a submit-task action
//! one typed operation with a specified power or firmware operation and a
//! specified target and conflict strategy; a site scope has no id, a rack
//! scope one).

use rackflow_api::v1 as pb;
use rackflow_domain::ComponentType;
use rackflow_domain::event_rule::{
    Action, ActionSpec, Binding, Condition, ConflictStrategy, EventRule, Scope, Severity,
    TargetStrategy, TaskOperation,
};
use rackflow_domain::task::TaskType;
use rackflow_engine::event_rules::{EventTarget, RuleChange};
use uuid::Uuid;

use super::{Checked, invalid, parse_uuid, pb_uuid, timestamp};

/// A required rule id (`rule_id is required` when missing or unparseable).
pub fn event_rule_id(id: Option<&pb::Uuid>) -> Checked<Uuid> {
    match id.map(|u| parse_uuid(&u.id)) {
        Some(Ok(id)) if !id.is_nil() => Ok(id),
        Some(Err(e)) => invalid(format!("rule_id: {e}")),
        _ => invalid("rule_id is required"),
    }
}

/// Wire operation numbers count the task codes from 1, in the order the
/// task type lists them (`POWER_CONTROL_OPERATION_POWER_ON = 1` is
/// `power_on`, …; `FIRMWARE_CONTROL_OPERATION_UPGRADE = 1` is `upgrade`).
fn codes(task_type: TaskType) -> &'static [&'static str] {
    task_type.valid_codes()
}

fn severity(value: i32, what: &str) -> Checked<Severity> {
    Severity::from_wire(value).map_or_else(
        || invalid(format!("{what}: unknown event rule severity {value}")),
        Ok,
    )
}

fn operation(op: Option<&pb::TaskOperation>, action: &str) -> Checked<TaskOperation> {
    use pb::task_operation::Operation;
    match op.and_then(|o| o.operation.as_ref()) {
        None => invalid(format!("action {action}: task operation is required")),
        Some(Operation::PowerControl(p)) => {
            let code = usize::try_from(p.operation)
                .ok()
                .and_then(|n| n.checked_sub(1))
                .and_then(|i| codes(TaskType::PowerControl).get(i));
            match code {
                Some(code) => Ok(TaskOperation::PowerControl {
                    code: (*code).to_string(),
                    override_readiness_check: p.override_readiness_check,
                }),
                None => invalid(format!(
                    "action {action}: unsupported power control operation {}",
                    p.operation
                )),
            }
        }
        Some(Operation::FirmwareControl(f)) => {
            let code = usize::try_from(f.operation)
                .ok()
                .and_then(|n| n.checked_sub(1))
                .and_then(|i| codes(TaskType::FirmwareControl).get(i));
            let Some(code) = code else {
                return invalid(format!(
                    "action {action}: unsupported firmware control operation {}",
                    f.operation
                ));
            };
            let seconds = |t: Option<&prost_types::Timestamp>, which: &str| match t {
                None => Ok(None),
                Some(t) if t.seconds <= 0 => invalid(format!(
                    "action {action}: firmware control {which} time must be after the Unix epoch"
                )),
                Some(t) => Ok(Some(t.seconds)),
            };
            Ok(TaskOperation::FirmwareControl {
                code: (*code).to_string(),
                target_version: f.target_version.clone(),
                start_time: seconds(f.start_time.as_ref(), "start")?,
                end_time: seconds(f.end_time.as_ref(), "end")?,
                sub_targets: f.sub_targets.clone(),
                override_readiness_check: f.override_readiness_check,
                override_version_check: f.override_version_check,
            })
        }
    }
}

fn action(a: &pb::EventRuleAction) -> Checked<Action> {
    use pb::event_rule_action::Spec;
    let name = a.name.clone();
    let condition = match &a.condition {
        None => Condition::default(),
        Some(c) => Condition {
            severities: c
                .severities
                .iter()
                .map(|s| severity(*s, &format!("action {name}: condition")))
                .collect::<Checked<_>>()?,
            component_types: c
                .component_types
                .iter()
                .map(|t| match ComponentType::from_i32(*t) {
                    Some(ty) if ty != ComponentType::Unknown => Ok(ty),
                    _ => invalid(format!(
                        "action {name}: condition component type {t} is not a component type"
                    )),
                })
                .collect::<Checked<_>>()?,
        },
    };
    let spec = match &a.spec {
        None => return invalid(format!("action {name}: action spec is required")),
        Some(Spec::SubmitTask(t)) => ActionSpec::SubmitTask {
            operation: operation(t.operation.as_ref(), &name)?,
            target_strategy: TargetStrategy::from_wire(t.target_strategy).map_or_else(
                || {
                    invalid(format!(
                        "action {name}: unknown event rule target strategy {}",
                        t.target_strategy
                    ))
                },
                Ok,
            )?,
            conflict_strategy: ConflictStrategy::from_wire(t.conflict_strategy).map_or_else(
                || {
                    invalid(format!(
                        "action {name}: unknown event rule conflict strategy {}",
                        t.conflict_strategy
                    ))
                },
                Ok,
            )?,
            description: t.description.clone(),
        },
        Some(Spec::SendAlert(s)) => ActionSpec::SendAlert {
            severity: severity(s.severity, &format!("action {name}: alert"))?,
            message: s.message.clone(),
        },
        Some(Spec::Noop(n)) => ActionSpec::Noop {
            reason: n.reason.clone(),
        },
    };
    Ok(Action {
        name,
        condition,
        spec,
    })
}

pub fn event_rule_actions(actions: &[pb::EventRuleAction]) -> Checked<Vec<Action>> {
    actions.iter().map(action).collect()
}

/// `UpdateEventRuleRequest` → the change (exactly one section).
pub fn event_rule_change(req: &pb::UpdateEventRuleRequest) -> Checked<(Uuid, RuleChange)> {
    use pb::update_event_rule_request::Update;
    let id = event_rule_id(req.rule_id.as_ref())?;
    let change = match &req.update {
        None => return invalid("update must set metadata or actions"),
        Some(Update::Metadata(m)) => RuleChange::Metadata {
            name: m.name.clone(),
            description: m.description.clone(),
        },
        Some(Update::Actions(a)) => RuleChange::Actions(event_rule_actions(&a.actions)?),
    };
    Ok((id, change))
}

pub fn event_rule_scope(scope: Option<&pb::EventRuleScope>) -> Checked<Scope> {
    let Some(scope) = scope else {
        return invalid("scope is required");
    };
    match pb::EventRuleScopeType::try_from(scope.r#type) {
        Ok(pb::EventRuleScopeType::Site) => match &scope.id {
            Some(id) if !id.id.is_empty() => invalid("site scope must not have an id"),
            _ => Ok(Scope::Site),
        },
        Ok(pb::EventRuleScopeType::Rack) => match scope.id.as_ref().map(|u| parse_uuid(&u.id)) {
            Some(Ok(id)) if !id.is_nil() => Ok(Scope::Rack(id)),
            _ => invalid("rack scope requires a valid non-zero UUID"),
        },
        _ => invalid(format!("unknown event rule scope type {}", scope.r#type)),
    }
}

pub fn event_target(req: &pb::GetEffectiveEventRuleRequest) -> Checked<EventTarget> {
    use pb::get_effective_event_rule_request::Target;
    let id = |u: &pb::Uuid, what: &str| match parse_uuid(&u.id) {
        Ok(id) if !id.is_nil() => Ok(id),
        _ => invalid(format!("{what} must be a valid non-zero UUID")),
    };
    match &req.target {
        Some(Target::RackId(u)) => Ok(EventTarget::Rack(id(u, "rack_id")?)),
        Some(Target::ComponentId(u)) => Ok(EventTarget::Component(id(u, "component_id")?)),
        None => invalid("rack_id or component_id is required"),
    }
}

fn pb_operation(op: &TaskOperation) -> pb::TaskOperation {
    use pb::task_operation::Operation;
    let number = |codes: &[&str], code: &str| {
        codes
            .iter()
            .position(|c| *c == code)
            .and_then(|i| i32::try_from(i + 1).ok())
            .unwrap_or(0)
    };
    let operation = match op {
        TaskOperation::PowerControl {
            code,
            override_readiness_check,
        } => Operation::PowerControl(pb::PowerControlTaskOperation {
            operation: number(codes(TaskType::PowerControl), code),
            override_readiness_check: *override_readiness_check,
        }),
        TaskOperation::FirmwareControl {
            code,
            target_version,
            start_time,
            end_time,
            sub_targets,
            override_readiness_check,
            override_version_check,
        } => Operation::FirmwareControl(pb::FirmwareControlTaskOperation {
            operation: number(codes(TaskType::FirmwareControl), code),
            target_version: target_version.clone(),
            start_time: start_time.map(|seconds| prost_types::Timestamp { seconds, nanos: 0 }),
            end_time: end_time.map(|seconds| prost_types::Timestamp { seconds, nanos: 0 }),
            sub_targets: sub_targets.clone(),
            override_readiness_check: *override_readiness_check,
            override_version_check: *override_version_check,
        }),
    };
    pb::TaskOperation {
        operation: Some(operation),
    }
}

/// One action on the wire.
pub fn pb_event_rule_action(a: &Action) -> pb::EventRuleAction {
    use pb::event_rule_action::Spec;
    let spec = match &a.spec {
        ActionSpec::SubmitTask {
            operation,
            target_strategy,
            conflict_strategy,
            description,
        } => Spec::SubmitTask(pb::EventRuleSubmitTaskAction {
            target_strategy: target_strategy.to_wire(),
            conflict_strategy: conflict_strategy.to_wire(),
            description: description.clone(),
            operation: Some(pb_operation(operation)),
        }),
        ActionSpec::SendAlert { severity, message } => {
            Spec::SendAlert(pb::EventRuleSendAlertAction {
                severity: severity.to_wire(),
                message: message.clone(),
            })
        }
        ActionSpec::Noop { reason } => Spec::Noop(pb::EventRuleNoopAction {
            reason: reason.clone(),
        }),
    };
    pb::EventRuleAction {
        name: a.name.clone(),
        condition: Some(pb::EventRuleActionCondition {
            severities: a.condition.severities.iter().map(|s| s.to_wire()).collect(),
            component_types: a
                .condition
                .component_types
                .iter()
                .map(|t| *t as i32)
                .collect(),
        }),
        spec: Some(spec),
    }
}

pub fn pb_event_rule(rule: &EventRule) -> pb::EventRule {
    pb::EventRule {
        id: Some(pb_uuid(rule.id)),
        read_only: rule.read_only,
        name: rule.name.clone(),
        description: rule.description.clone(),
        enabled: rule.enabled,
        event_type: rule.event_type.clone(),
        actions: rule.actions.iter().map(pb_event_rule_action).collect(),
        created_at: rule.created_at.map(timestamp),
        updated_at: rule.updated_at.map(timestamp),
    }
}

pub fn pb_event_rule_scope(scope: Scope) -> pb::EventRuleScope {
    match scope {
        Scope::Site => pb::EventRuleScope {
            r#type: pb::EventRuleScopeType::Site as i32,
            id: None,
        },
        Scope::Rack(id) => pb::EventRuleScope {
            r#type: pb::EventRuleScopeType::Rack as i32,
            id: Some(pb_uuid(id)),
        },
    }
}

pub fn pb_event_rule_binding(binding: &Binding) -> pb::EventRuleBinding {
    pb::EventRuleBinding {
        id: Some(pb_uuid(binding.id)),
        rule_id: Some(pb_uuid(binding.rule_id)),
        event_type: binding.event_type.clone(),
        scope: Some(pb_event_rule_scope(binding.scope)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn power(op: i32) -> pb::EventRuleAction {
        pb::EventRuleAction {
            name: "power_off".into(),
            condition: Some(pb::EventRuleActionCondition {
                severities: vec![pb::EventRuleSeverity::Critical as i32],
                component_types: vec![pb::ComponentType::Compute as i32],
            }),
            spec: Some(pb::event_rule_action::Spec::SubmitTask(
                pb::EventRuleSubmitTaskAction {
                    target_strategy: pb::EventRuleTargetStrategy::AffectedComponents as i32,
                    conflict_strategy: pb::EventRuleConflictStrategy::Queue as i32,
                    description: "d".into(),
                    operation: Some(pb::TaskOperation {
                        operation: Some(pb::task_operation::Operation::PowerControl(
                            pb::PowerControlTaskOperation {
                                operation: op,
                                override_readiness_check: false,
                            },
                        )),
                    }),
                },
            )),
        }
    }

    #[test]
    fn actions_round_trip_and_bad_ones_name_the_problem() {
        let force_off = pb::PowerControlOperation::ForcePowerOff as i32;
        let actions = event_rule_actions(&[power(force_off)]).unwrap();
        match &actions[0].spec {
            ActionSpec::SubmitTask { operation, .. } => assert_eq!(
                operation,
                &TaskOperation::PowerControl {
                    code: "force_power_off".into(),
                    override_readiness_check: false
                }
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(pb_event_rule_action(&actions[0]), power(force_off));
        // Every power operation maps to its task code and back.
        for n in 1..=8 {
            let a = event_rule_actions(&[power(n)]).unwrap();
            assert_eq!(pb_event_rule_action(&a[0]), power(n));
        }
        let err = |a: pb::EventRuleAction| event_rule_actions(&[a]).unwrap_err().0;
        assert!(err(power(0)).contains("unsupported power control operation"));
        let mut no_spec = power(force_off);
        no_spec.spec = None;
        assert!(err(no_spec).contains("action spec is required"));
        let mut no_op = power(force_off);
        if let Some(pb::event_rule_action::Spec::SubmitTask(t)) = no_op.spec.as_mut() {
            t.operation = None;
        }
        assert!(err(no_op).contains("task operation is required"));
        let mut no_strategy = power(force_off);
        if let Some(pb::event_rule_action::Spec::SubmitTask(t)) = no_strategy.spec.as_mut() {
            t.target_strategy = 0;
        }
        assert!(err(no_strategy).contains("unknown event rule target strategy"));
    }

    #[test]
    fn scopes_are_site_without_id_or_rack_with_one() {
        let rack = Uuid::from_u128(7);
        let scope = |t: pb::EventRuleScopeType, id: Option<Uuid>| pb::EventRuleScope {
            r#type: t as i32,
            id: id.map(pb_uuid),
        };
        assert_eq!(
            event_rule_scope(Some(&scope(pb::EventRuleScopeType::Site, None))).unwrap(),
            Scope::Site
        );
        assert_eq!(
            event_rule_scope(Some(&scope(pb::EventRuleScopeType::Rack, Some(rack)))).unwrap(),
            Scope::Rack(rack)
        );
        assert!(
            event_rule_scope(Some(&scope(pb::EventRuleScopeType::Site, Some(rack))))
                .unwrap_err()
                .0
                .contains("must not have an id")
        );
        assert!(
            event_rule_scope(Some(&scope(pb::EventRuleScopeType::Rack, None)))
                .unwrap_err()
                .0
                .contains("valid non-zero UUID")
        );
        assert!(event_rule_scope(Some(&scope(pb::EventRuleScopeType::Unspecified, None))).is_err());
        assert_eq!(
            pb_event_rule_scope(Scope::Rack(rack)),
            scope(pb::EventRuleScopeType::Rack, Some(rack))
        );
    }
}
