//! Task-schedule messages (wire-contract A.12): validation of requests and
//! conversion of schedules and scopes back to the wire.

use rackflow_api::v1 as pb;
use rackflow_domain::ComponentType;
use rackflow_domain::schedule::{
    OperationTemplate, OverlapPolicy, ScheduleScope, ScheduledOp, SpecKind, TaskSchedule,
};
use rackflow_domain::target::{ComponentFilter, TargetSpec};
use rackflow_domain::task::{TaskInformation, TaskType};
use rackflow_engine::schedules::{NewSchedule, ScheduleUpdate};
use rackflow_engine::store::ScheduleFilter;
use rackflow_engine::tasks::SubmitRequest;
use uuid::Uuid;

use super::{Checked, Invalid, invalid, parse_uuid, pb_uuid, target_spec, timestamp};

/// The update-mask paths `UpdateTaskSchedule` accepts.
pub const UPDATE_PATHS: &[&str] = &[
    "schedule.name",
    "schedule.overlap_policy",
    "schedule.spec",
    "schedule.spec.timezone",
    "schedule.catchup_window",
];

fn required_target(spec: Option<&pb::OperationTargetSpec>, field: &str) -> Checked<TargetSpec> {
    let Some(spec) = spec else {
        return invalid(format!("{field} is required"));
    };
    let converted = target_spec(spec).map_err(|e| Invalid(format!("{field}: {e}")))?;
    let Some(converted) = converted else {
        return invalid(format!(
            "{field}: target_spec must have exactly one of racks, nvl_domains, or components set"
        ));
    };
    converted
        .validate()
        .map_err(|e| Invalid(format!("{field}: {e}")))?;
    Ok(converted)
}

fn optional_rule_id(id: Option<&pb::Uuid>) -> Checked<Option<Uuid>> {
    match id.filter(|u| !u.id.trim().is_empty()) {
        None => Ok(None),
        Some(u) => match parse_uuid(&u.id) {
            Ok(id) if !id.is_nil() => Ok(Some(id)),
            Ok(_) => Ok(None),
            Err(e) => invalid(format!("invalid rule_id: {e}")),
        },
    }
}

/// The id of a request (`id is required` when missing or malformed).
pub fn schedule_id(id: Option<&pb::Uuid>, field: &str) -> Checked<Uuid> {
    super::required_id(id, &format!("{field} is required"))
}

fn template_of(op: ScheduledOp, submit: SubmitRequest) -> (OperationTemplate, TargetSpec) {
    (
        OperationTemplate {
            op,
            task_type: submit.task_type,
            information: submit.information,
            queue_timeout_secs: submit.queue.timeout_secs,
            rule_id: submit.rule_id,
        },
        submit.target,
    )
}

/// The operation a schedule submits, converted exactly as the matching
/// rack-operation RPC converts its request (the request's description is
/// ignored: scheduled tasks are described by schedule and fire time).
pub fn scheduled_operation(
    op: Option<&pb::ScheduledOperation>,
) -> Checked<(OperationTemplate, TargetSpec)> {
    use pb::scheduled_operation::Operation;
    let Some(op) = op.and_then(|o| o.operation.as_ref()) else {
        return invalid("operation is required");
    };
    Ok(match op {
        Operation::PowerOn(r) => template_of(ScheduledOp::PowerOn, super::power_on(r)?),
        Operation::PowerOff(r) => template_of(ScheduledOp::PowerOff, super::power_off(r)?),
        Operation::PowerReset(r) => template_of(ScheduledOp::PowerReset, super::power_reset(r)?),
        Operation::UpgradeFirmware(r) => {
            template_of(ScheduledOp::UpgradeFirmware, super::upgrade_firmware(r)?)
        }
        Operation::BringUp(r) => (
            OperationTemplate {
                op: ScheduledOp::BringUp,
                task_type: TaskType::BringUp,
                information: TaskInformation {
                    code: "bring_up".into(),
                    override_readiness_check: r.override_readiness_check,
                    firmware: None,
                },
                queue_timeout_secs: rackflow_domain::task::DEFAULT_QUEUE_TIMEOUT_SECS,
                rule_id: optional_rule_id(r.rule_id.as_ref())?,
            },
            required_target(r.target_spec.as_ref(), "target_spec")?,
        ),
        Operation::Ingest(r) => {
            if !r.filters.is_empty() {
                return invalid("ingest filters are not supported on schedules");
            }
            (
                OperationTemplate {
                    op: ScheduledOp::Ingest,
                    task_type: TaskType::BringUp,
                    information: TaskInformation {
                        code: "ingest".into(),
                        override_readiness_check: false,
                        firmware: None,
                    },
                    queue_timeout_secs: rackflow_domain::task::DEFAULT_QUEUE_TIMEOUT_SECS,
                    rule_id: optional_rule_id(r.rule_id.as_ref())?,
                },
                required_target(r.target_spec.as_ref(), "target_spec")?,
            )
        }
    })
}

/// Firmware credentials inside a scheduled upgrade (refused like a plain
/// upgrade's, by the caller).
pub fn scheduled_authentication_data(
    op: Option<&pb::ScheduledOperation>,
) -> Option<&pb::FirmwareAuthenticationData> {
    match op.and_then(|o| o.operation.as_ref()) {
        Some(pb::scheduled_operation::Operation::UpgradeFirmware(fw)) => {
            fw.authentication_data.as_ref()
        }
        _ => None,
    }
}

fn spec_kind(value: i32) -> Checked<Option<SpecKind>> {
    match value {
        0 => Ok(None),
        v => SpecKind::from_wire(v)
            .map(Some)
            .ok_or_else(|| Invalid(format!("unknown schedule spec type {v}"))),
    }
}

fn overlap_policy(value: i32) -> Checked<OverlapPolicy> {
    match value {
        0 => Ok(OverlapPolicy::Skip),
        v => OverlapPolicy::from_wire(v)
            .ok_or_else(|| Invalid(format!("unknown overlap policy {v}"))),
    }
}

/// Whole seconds of a catch-up window (sub-second parts round up; a
/// negative or malformed duration is refused).
fn catchup_window(d: Option<&prost_types::Duration>) -> Checked<i64> {
    let Some(d) = d else { return Ok(0) };
    if d.seconds < 0 || d.nanos < 0 || d.nanos >= 1_000_000_000 {
        return invalid("schedule.catchup_window must be a non-negative duration");
    }
    Ok(d.seconds.saturating_add(i64::from(d.nanos > 0)))
}

/// `CreateTaskScheduleRequest` → what the engine creates.
pub fn new_schedule(req: &pb::CreateTaskScheduleRequest) -> Checked<NewSchedule> {
    let Some(config) = req.schedule.as_ref() else {
        return invalid("schedule is required");
    };
    if config.name.trim().is_empty() {
        return invalid("schedule name is required");
    }
    let Some(spec) = config.spec.as_ref() else {
        return invalid("schedule spec is required");
    };
    let kind = spec_kind(spec.r#type)?;
    if kind.is_none() {
        return invalid("schedule spec type is required");
    }
    let (template, target) = scheduled_operation(req.operation.as_ref())?;
    Ok(NewSchedule {
        name: config.name.trim().to_string(),
        kind,
        spec: spec.spec.clone(),
        timezone: spec.timezone.clone(),
        overlap_policy: overlap_policy(config.overlap_policy)?,
        catchup_window_secs: catchup_window(config.catchup_window.as_ref())?,
        template,
        target,
    })
}

/// `UpdateTaskScheduleRequest` → the fields its mask names.
pub fn schedule_update(req: &pb::UpdateTaskScheduleRequest) -> Checked<ScheduleUpdate> {
    let paths: Vec<&str> = req
        .update_mask
        .as_ref()
        .map(|m| m.paths.iter().map(String::as_str).collect())
        .unwrap_or_default();
    if paths.is_empty() {
        return invalid("update_mask is required");
    }
    if let Some(bad) = paths.iter().find(|p| !UPDATE_PATHS.contains(p)) {
        return invalid(format!(
            "unsupported update_mask path {bad:?} (allowed: {})",
            UPDATE_PATHS.join(", ")
        ));
    }
    let empty = pb::ScheduleConfig::default();
    let config = req.schedule.as_ref().unwrap_or(&empty);
    let mut update = ScheduleUpdate::default();
    for path in paths {
        match path {
            "schedule.name" => {
                if config.name.trim().is_empty() {
                    return invalid("schedule name is required");
                }
                update.name = Some(config.name.trim().to_string());
            }
            "schedule.overlap_policy" => {
                update.overlap_policy = Some(overlap_policy(config.overlap_policy)?);
            }
            "schedule.spec" => {
                let Some(spec) = config.spec.as_ref() else {
                    return invalid("schedule spec is required");
                };
                let kind = spec_kind(spec.r#type)?;
                if kind.is_none() {
                    return invalid("schedule spec type is required");
                }
                if spec.spec.trim().is_empty() {
                    return invalid("schedule spec is required");
                }
                update.spec = Some((kind, spec.spec.clone()));
                update.timezone = Some(spec.timezone.clone());
            }
            "schedule.spec.timezone" => {
                update.timezone = Some(
                    config
                        .spec
                        .as_ref()
                        .map(|s| s.timezone.clone())
                        .unwrap_or_default(),
                );
            }
            "schedule.catchup_window" => {
                update.catchup_window_secs = Some(catchup_window(config.catchup_window.as_ref())?);
            }
            _ => {}
        }
    }
    Ok(update)
}

pub fn pb_spec_kind(kind: SpecKind) -> i32 {
    kind.to_wire()
}

pub fn pb_schedule(s: &TaskSchedule) -> pb::TaskSchedule {
    pb::TaskSchedule {
        id: Some(pb_uuid(s.id)),
        name: s.name.clone(),
        spec: Some(pb::ScheduleSpec {
            r#type: pb_spec_kind(s.spec.kind),
            spec: s.spec.spec.clone(),
            timezone: s.spec.timezone.clone(),
        }),
        overlap_policy: s.overlap_policy.to_wire(),
        enabled: s.enabled,
        next_run_at: s.next_run_at.map(timestamp),
        last_run_at: s.last_run_at.map(timestamp),
        created_at: Some(timestamp(s.created_at)),
        updated_at: Some(timestamp(s.updated_at)),
        operation_type: s.template.operation_type().to_string(),
        description: s.template.description(),
        catchup_window: (s.catchup_window_secs > 0).then_some(prost_types::Duration {
            seconds: s.catchup_window_secs,
            nanos: 0,
        }),
        skipped_count: s.skipped_count,
        last_skip_reason: s.last_skip_reason.clone(),
    }
}

fn pb_types(types: &[ComponentType]) -> Vec<i32> {
    types.iter().map(|t| *t as i32).collect()
}

pub fn pb_scope(s: &ScheduleScope) -> pb::TaskScheduleScope {
    use pb::task_schedule_scope::ComponentFilter as Wire;
    pb::TaskScheduleScope {
        id: Some(pb_uuid(s.id)),
        schedule_id: Some(pb_uuid(s.schedule_id)),
        rack_id: Some(pb_uuid(s.rack_id)),
        component_filter: s.filter.as_ref().map(|f| match f {
            ComponentFilter::Types { types } => Wire::Types(pb::ComponentTypes {
                types: pb_types(types),
            }),
            ComponentFilter::Components { components } => Wire::Components(pb::ComponentTargets {
                targets: components
                    .iter()
                    .map(|c| pb::ComponentTarget {
                        identifier: Some(pb::component_target::Identifier::Id(pb_uuid(*c))),
                    })
                    .collect(),
            }),
        }),
        last_task_id: s.last_task_id.map(pb_uuid),
        created_at: Some(timestamp(s.created_at)),
    }
}

/// A target spec of a scope request (`target_spec` / `desired_scope`).
pub fn scope_target(spec: Option<&pb::OperationTargetSpec>, field: &str) -> Checked<TargetSpec> {
    required_target(spec, field)
}

/// `ListTaskSchedules`: the rack and enabled filters; pagination is optional
/// here: omitted → every schedule (spec §6.5).
pub fn schedule_list_query(
    req: &pb::ListTaskSchedulesRequest,
) -> Checked<(ScheduleFilter, rackflow_domain::run::Page)> {
    let rack_id = match req.rack_id.as_ref().filter(|u| !u.id.trim().is_empty()) {
        None => None,
        Some(u) => Some(parse_uuid(&u.id).map_err(|e| Invalid(format!("invalid rack_id: {e}")))?),
    };
    let page = match req.pagination.as_ref() {
        None => rackflow_domain::run::Page {
            offset: 0,
            limit: 0,
        },
        Some(p) => super::page(Some(p))?,
    };
    let filter = ScheduleFilter {
        rack_id,
        enabled_only: req.enabled_only.unwrap_or(false),
    };
    Ok((filter, page))
}

/// `CheckScheduleConflicts`: the operation, then the schedule to leave out.
pub fn conflicts_query(
    req: &pb::CheckScheduleConflictsRequest,
) -> Checked<(OperationTemplate, TargetSpec, Option<Uuid>)> {
    let (template, target) = scheduled_operation(req.operation.as_ref())?;
    let exclude = match req
        .exclude_schedule_id
        .as_ref()
        .filter(|u| !u.id.trim().is_empty())
    {
        None => None,
        Some(u) => Some(
            parse_uuid(&u.id).map_err(|e| Invalid(format!("invalid exclude_schedule_id: {e}")))?,
        ),
    };
    Ok((template, target, exclude))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(paths: &[&str]) -> Option<prost_types::FieldMask> {
        Some(prost_types::FieldMask {
            paths: paths.iter().map(|p| p.to_string()).collect(),
        })
    }

    #[test]
    fn update_refuses_unknown_and_empty_masks() {
        let req = pb::UpdateTaskScheduleRequest {
            id: None,
            schedule: None,
            update_mask: mask(&["schedule.enabled"]),
        };
        assert!(
            schedule_update(&req)
                .unwrap_err()
                .0
                .contains("schedule.enabled")
        );
        let req = pb::UpdateTaskScheduleRequest {
            update_mask: None,
            ..req
        };
        assert!(schedule_update(&req).is_err());
    }

    #[test]
    fn update_reads_only_the_masked_fields() {
        let req = pb::UpdateTaskScheduleRequest {
            id: None,
            schedule: Some(pb::ScheduleConfig {
                name: "new".into(),
                spec: Some(pb::ScheduleSpec {
                    r#type: 2,
                    spec: "@daily".into(),
                    timezone: "Europe/Paris".into(),
                }),
                overlap_policy: 2,
                catchup_window: Some(prost_types::Duration {
                    seconds: 60,
                    nanos: 0,
                }),
            }),
            update_mask: mask(&["schedule.spec.timezone", "schedule.overlap_policy"]),
        };
        let u = schedule_update(&req).expect("valid");
        assert_eq!(u.name, None);
        assert!(u.spec.is_none());
        assert_eq!(u.timezone.as_deref(), Some("Europe/Paris"));
        assert_eq!(u.overlap_policy, Some(OverlapPolicy::Queue));
        assert_eq!(u.catchup_window_secs, None);
    }

    #[test]
    fn create_requires_name_spec_type_and_operation() {
        let mut req = pb::CreateTaskScheduleRequest {
            schedule: Some(pb::ScheduleConfig {
                name: " ".into(),
                spec: Some(pb::ScheduleSpec {
                    r#type: 1,
                    spec: "5s".into(),
                    timezone: String::new(),
                }),
                overlap_policy: 0,
                catchup_window: None,
            }),
            operation: None,
        };
        assert_eq!(
            new_schedule(&req).unwrap_err().0,
            "schedule name is required"
        );
        req.schedule.as_mut().expect("config").name = "n".into();
        assert_eq!(new_schedule(&req).unwrap_err().0, "operation is required");
        req.schedule.as_mut().expect("config").spec = Some(pb::ScheduleSpec::default());
        assert_eq!(
            new_schedule(&req).unwrap_err().0,
            "schedule spec type is required"
        );
    }

    #[test]
    fn catchup_windows_round_up_and_refuse_negatives() {
        let d = |seconds, nanos| prost_types::Duration { seconds, nanos };
        assert_eq!(catchup_window(None), Ok(0));
        assert_eq!(catchup_window(Some(&d(5, 0))), Ok(5));
        assert_eq!(catchup_window(Some(&d(5, 1))), Ok(6));
        assert!(catchup_window(Some(&d(-1, 0))).is_err());
    }
}
