//! Task, rack-operation and rule messages.

use rackflow_api::v1 as pb;
use rackflow_domain::ComponentType;
use rackflow_domain::bundle::FirmwareBundle;
use rackflow_domain::rule::{OperationRule, RackRuleAssociation};
use rackflow_domain::run::Page;
use rackflow_domain::run::{FirmwarePayload, QueueStrategy};
use rackflow_domain::target::TargetSpec;
use rackflow_domain::task::{Task, TaskInformation, TaskType};
use rackflow_engine::inventory::TaskQuery;
use rackflow_engine::rules::{RuleDraft, RuleUpdate};
use rackflow_engine::tasks::{SubmitRequest, queue_policy};
use uuid::Uuid;

use super::{Checked, Invalid, invalid, parse_uuid, pb_uuid, target_spec, timestamp};

fn required_target(spec: Option<&pb::OperationTargetSpec>) -> Checked<TargetSpec> {
    let Some(spec) = spec else {
        return invalid("target_spec is required");
    };
    let converted = target_spec(spec).map_err(|e| Invalid(format!("target_spec: {e}")))?;
    let Some(converted) = converted else {
        return invalid(
            "target_spec: target_spec must have exactly one of racks, nvl_domains, or components set",
        );
    };
    converted
        .validate()
        .map_err(|e| Invalid(format!("target_spec: {e}")))?;
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

fn queue(options: Option<&pb::QueueOptions>) -> Checked<rackflow_domain::task::QueuePolicy> {
    let (strategy, timeout) = match options {
        None => (QueueStrategy::Reject, 0),
        Some(q) => {
            if q.queue_timeout_seconds < 0 {
                return invalid("queue_options.queue_timeout_seconds must not be negative");
            }
            let strategy = match pb::ConflictStrategy::try_from(q.conflict_strategy) {
                Ok(pb::ConflictStrategy::Queue) => QueueStrategy::Queue,
                Ok(_) => QueueStrategy::Reject,
                Err(_) => return invalid("queue_options.conflict_strategy is unknown"),
            };
            (strategy, q.queue_timeout_seconds)
        }
    };
    Ok(queue_policy(strategy, timeout))
}

/// The fields every rack-operation request shares.
struct Common<'a> {
    spec: Option<&'a pb::OperationTargetSpec>,
    description: &'a str,
    queue_options: Option<&'a pb::QueueOptions>,
    rule_id: Option<&'a pb::Uuid>,
    override_readiness_check: bool,
}

fn request(
    task_type: TaskType,
    code: &str,
    common: Common<'_>,
    firmware: Option<FirmwarePayload>,
) -> Checked<SubmitRequest> {
    Ok(SubmitRequest {
        task_type,
        information: TaskInformation {
            code: code.to_string(),
            override_readiness_check: common.override_readiness_check,
            firmware,
        },
        description: common.description.to_string(),
        target: required_target(common.spec)?,
        queue: queue(common.queue_options)?,
        rule_id: optional_rule_id(common.rule_id)?,
        idempotency_key: None,
        required_rack_id: None,
        trigger: rackflow_domain::task::TaskTrigger::Api,
    })
}

macro_rules! common {
    ($req:expr) => {
        Common {
            spec: $req.target_spec.as_ref(),
            description: &$req.description,
            queue_options: $req.queue_options.as_ref(),
            rule_id: $req.rule_id.as_ref(),
            override_readiness_check: $req.override_readiness_check,
        }
    };
}

pub fn power_on(req: &pb::PowerOnRackRequest) -> Checked<SubmitRequest> {
    request(TaskType::PowerControl, "power_on", common!(req), None)
}

pub fn power_off(req: &pb::PowerOffRackRequest) -> Checked<SubmitRequest> {
    let code = if req.forced {
        "force_power_off"
    } else {
        "power_off"
    };
    request(TaskType::PowerControl, code, common!(req), None)
}

pub fn power_reset(req: &pb::PowerResetRackRequest) -> Checked<SubmitRequest> {
    let code = if req.forced {
        "force_restart"
    } else {
        "restart"
    };
    request(TaskType::PowerControl, code, common!(req), None)
}

/// `BringUpRack`: bring_up / bring_up. The request has no queue options:
/// a conflict rejects.
pub fn bring_up(req: &pb::BringUpRackRequest) -> Checked<SubmitRequest> {
    let common = Common {
        spec: req.target_spec.as_ref(),
        description: &req.description,
        queue_options: None,
        rule_id: req.rule_id.as_ref(),
        override_readiness_check: req.override_readiness_check,
    };
    request(TaskType::BringUp, "bring_up", common, None)
}

/// `IngestRack`: bring_up / ingest. `filters` narrow the targeted
/// components by type (`COMPONENT_FILTER_FIELD_TYPE`, type names as
/// values); the other fields are refused by name.
pub fn ingest(req: &pb::IngestRackRequest) -> Checked<SubmitRequest> {
    let common = Common {
        spec: req.target_spec.as_ref(),
        description: &req.description,
        queue_options: None,
        rule_id: req.rule_id.as_ref(),
        override_readiness_check: false,
    };
    let mut submit = request(TaskType::BringUp, "ingest", common, None)?;
    let mut types: Option<Vec<ComponentType>> = None;
    for (i, filter) in req.filters.iter().enumerate() {
        let field = match filter.field {
            Some(pb::filter::Field::ComponentField(f)) => {
                pb::ComponentFilterField::try_from(f).ok()
            }
            _ => None,
        };
        if field != Some(pb::ComponentFilterField::Type) {
            return invalid(format!(
                "filters[{i}]: ingest filters by component type only \
                 (component_field COMPONENT_FILTER_FIELD_TYPE)"
            ));
        }
        let patterns = filter
            .query_info
            .as_ref()
            .map(|q| q.patterns.as_slice())
            .unwrap_or_default();
        let mut wanted = Vec::with_capacity(patterns.len());
        for p in patterns {
            let ty = ComponentType::parse(p.trim_start_matches("COMPONENT_TYPE_"))
                .filter(|t| *t != ComponentType::Unknown)
                .ok_or_else(|| Invalid(format!("filters[{i}]: unknown component type {p:?}")))?;
            wanted.push(ty);
        }
        // Several filters AND: keep the types every one names.
        types = Some(match types {
            None => wanted,
            Some(kept) => kept.into_iter().filter(|t| wanted.contains(t)).collect(),
        });
    }
    if let Some(types) = types {
        if types.is_empty() {
            return invalid("filters: no component type is left to ingest");
        }
        submit.target = submit
            .target
            .restricted_to_types(&types)
            .map_err(|e| Invalid(format!("filters: {e}")))?;
    }
    Ok(submit)
}

/// `DecommissionRack`: decommission / decommission.
pub fn decommission(req: &pb::DecommissionRackRequest) -> Checked<SubmitRequest> {
    let common = Common {
        spec: req.target_spec.as_ref(),
        description: &req.description,
        queue_options: req.queue_options.as_ref(),
        rule_id: req.rule_id.as_ref(),
        override_readiness_check: false,
    };
    request(TaskType::Decommission, "decommission", common, None)
}

/// `ACPowerCycleRack`: power_control / cold_reset.
pub fn ac_power_cycle(req: &pb::AcPowerCycleRackRequest) -> Checked<SubmitRequest> {
    request(TaskType::PowerControl, "cold_reset", common!(req), None)
}

pub fn upgrade_firmware(req: &pb::UpgradeFirmwareRequest) -> Checked<SubmitRequest> {
    unresolved_firmware_object(req)?;
    let start = req.start_time.as_ref().map_or(0, |t| t.seconds);
    let end = req.end_time.as_ref().map_or(0, |t| t.seconds);
    if start != 0 && end != 0 && end < start {
        return invalid("end_time must not be before start_time");
    }
    let bundle = firmware_bundle(req)?;
    let payload = FirmwarePayload {
        bundle,
        target_version: req.target_version.clone().filter(|v| !v.is_empty()),
        start_time: start,
        end_time: end,
        rule_id: None,
        sub_targets: req.sub_targets.iter().map(|s| s.to_lowercase()).collect(),
        override_readiness_check: req.override_readiness_check,
        override_version_check: req.override_version_check,
        authentication_data: None,
        same_version_for_all_models: req.same_version_for_all_models,
        firmware_objects: std::collections::BTreeMap::new(),
    };
    request(
        TaskType::FirmwareControl,
        "upgrade",
        common!(req),
        Some(payload),
    )
}

/// A `firmware_object` the handler did not resolve (`rpc::firmware_objects`
/// clears it): only `UpgradeFirmware` and operation runs resolve one; a
/// schedule stores its request and cannot name one yet.
pub fn unresolved_firmware_object(req: &pb::UpgradeFirmwareRequest) -> Checked<()> {
    if req.firmware_object.trim().is_empty() {
        return Ok(());
    }
    invalid(format!(
        "firmware_object {:?} cannot be used here: only UpgradeFirmware and operation runs \
         apply firmware objects (a schedule names a target_version or a firmware_bundle)",
        req.firmware_object.trim()
    ))
}

/// The request's firmware bundle (issue 12), validated; `None` when it
/// sends none. A bundle and a `target_version` together are refused: which
/// one wins would be a guess.
pub fn firmware_bundle(req: &pb::UpgradeFirmwareRequest) -> Checked<Option<FirmwareBundle>> {
    let Some(bundle) = &req.firmware_bundle else {
        return Ok(None);
    };
    if req.target_version.as_deref().is_some_and(|v| !v.is_empty()) {
        return invalid("target_version and firmware_bundle are exclusive: set one");
    }
    let mut entries = Vec::with_capacity(bundle.entries.len());
    for (i, entry) in bundle.entries.iter().enumerate() {
        let Some(component_type) = ComponentType::from_i32(entry.component_type) else {
            return invalid(format!(
                "firmware_bundle.entries[{i}].component_type: unknown value {}",
                entry.component_type
            ));
        };
        entries.push((
            entry.rack_model.clone(),
            component_type,
            entry.version.clone(),
        ));
    }
    FirmwareBundle::from_entries(bundle.name.clone(), entries)
        .map(Some)
        .map_err(|e| Invalid(e.to_string()))
}

/// The wire form of a stored bundle.
pub fn pb_firmware_bundle(bundle: &FirmwareBundle) -> pb::FirmwareBundle {
    pb::FirmwareBundle {
        name: bundle.name.clone(),
        entries: bundle
            .models
            .iter()
            .flat_map(|(model, types)| {
                types.iter().map(|(ty, version)| pb::FirmwareBundleEntry {
                    rack_model: model.clone(),
                    component_type: *ty as i32,
                    version: version.clone(),
                })
            })
            .collect(),
    }
}

/// Whether firmware credentials were sent (refused until encryption at rest
/// is configured).
/// Longest firmware credential accepted, per value.
pub const MAX_CREDENTIAL_LEN: usize = 4096;

/// The credentials a request carries (`None` when it sends none or only
/// empty ones), checked: at most [`MAX_CREDENTIAL_LEN`] bytes each, no NUL.
pub fn firmware_credentials(
    data: Option<&pb::FirmwareAuthenticationData>,
) -> Checked<Option<rackflow_domain::run::FirmwareCredentials>> {
    use pb::firmware_authentication_data::Value;
    use rackflow_domain::run::FirmwareCredentials;
    if !has_authentication_data(data) {
        return Ok(None);
    }
    let check = |field: &str, value: &Option<String>| -> Checked<Option<String>> {
        match value.as_deref() {
            None | Some("") => Ok(None),
            Some(v) if v.len() > MAX_CREDENTIAL_LEN || v.contains('\0') => invalid(format!(
                "authentication_data.{field}: at most {MAX_CREDENTIAL_LEN} bytes, no NUL"
            )),
            Some(v) => Ok(Some(v.to_string())),
        }
    };
    Ok(match data.and_then(|d| d.value.as_ref()) {
        Some(Value::Shared(shared)) => {
            check("shared", &Some(shared.clone()))?.map(FirmwareCredentials::Shared)
        }
        Some(Value::PerComponent(p)) => Some(FirmwareCredentials::PerComponent {
            compute: check("per_component.compute", &p.compute)?,
            nvswitch: check("per_component.nvswitch", &p.nvswitch)?,
            powershelf: check("per_component.powershelf", &p.powershelf)?,
        }),
        None => None,
    })
}

pub fn has_authentication_data(data: Option<&pb::FirmwareAuthenticationData>) -> bool {
    use pb::firmware_authentication_data::Value;
    data.and_then(|a| a.value.as_ref())
        .is_some_and(|v| match v {
            Value::Shared(s) => !s.is_empty(),
            Value::PerComponent(p) => [&p.compute, &p.nvswitch, &p.powershelf]
                .iter()
                .any(|s| s.as_deref().is_some_and(|s| !s.is_empty())),
        })
}

pub fn pb_task(task: &Task, with_report: bool) -> pb::Task {
    let report = match (&task.report, with_report) {
        (Some(report), true) => report.to_string(),
        _ => String::new(),
    };
    pb::Task {
        id: Some(pb_uuid(task.id)),
        operation: task.operation(),
        rack_id: Some(pb_uuid(task.rack_id)),
        component_uuids: task
            .components_by_type
            .iter()
            .flat_map(|(_, ids)| ids.iter().map(|id| pb_uuid(*id)))
            .collect(),
        description: task.description.clone(),
        executor_type: if task.executor_type == "temporal" {
            pb::TaskExecutorType::Temporal as i32
        } else {
            pb::TaskExecutorType::Unknown as i32
        },
        execution_id: task.execution_id.clone(),
        status: task.status.to_wire(),
        message: task.message.clone(),
        queue_expires_at: task.queue_expires_at.map(timestamp),
        created_at: Some(timestamp(task.created_at)),
        finished_at: task.finished_at.map(timestamp),
        applied_rule_id: task.applied_rule_id.map(pb_uuid),
        updated_at: Some(timestamp(task.updated_at)),
        started_at: task.started_at.map(timestamp),
        report,
        trigger_type: task.trigger.type_name().to_string(),
        trigger_id: task.trigger.id().map(pb_uuid),
    }
}

/// Wire operation type of a rule (power and firmware only are public).
pub fn rule_type(value: i32, field: &str) -> Checked<TaskType> {
    TaskType::from_operation_type_wire(value).ok_or_else(|| {
        Invalid(format!(
            "{field} must be OPERATION_TYPE_POWER_CONTROL or OPERATION_TYPE_FIRMWARE_CONTROL"
        ))
    })
}

pub fn pb_rule(rule: &OperationRule) -> pb::OperationRule {
    pb::OperationRule {
        id: Some(pb_uuid(rule.id)),
        name: rule.name.clone(),
        description: rule.description.clone(),
        operation_type: rule.operation_type.operation_type_wire(),
        operation_code: rule.operation_code.clone(),
        rule_definition_json: serde_json::to_string(&rule.definition).unwrap_or_default(),
        is_default: rule.is_default,
        created_at: Some(timestamp(rule.created_at)),
        updated_at: Some(timestamp(rule.updated_at)),
    }
}

pub fn pb_association(a: &RackRuleAssociation) -> pb::RackRuleAssociation {
    pb::RackRuleAssociation {
        rack_id: Some(pb_uuid(a.rack_id)),
        operation_type: a.operation_type.operation_type_wire(),
        operation_code: a.operation_code.clone(),
        rule_id: Some(pb_uuid(a.rule_id)),
        created_at: Some(timestamp(a.created_at)),
        updated_at: Some(timestamp(a.updated_at)),
    }
}

/// `ListTasks`: rack (UUID or external id) and component filters.
pub fn task_query(req: &pb::ListTasksRequest) -> Checked<TaskQuery> {
    let rack = match req.rack_id.as_ref().filter(|u| !u.id.trim().is_empty()) {
        None => None,
        Some(u) => Some(super::rack_ref(Some(u))?),
    };
    let component_id = match req
        .component_id
        .as_ref()
        .filter(|u| !u.id.trim().is_empty())
    {
        None => None,
        Some(u) => Some(parse_uuid(&u.id).map_err(|e| Invalid(format!("component_id: {e}")))?),
    };
    Ok(TaskQuery {
        rack,
        component_id,
        active_only: req.active_only,
        with_report: req.with_report,
    })
}

/// `GetTasksByIDs`: every id must parse.
pub fn task_ids(req: &pb::GetTasksByIDsRequest) -> Checked<Vec<Uuid>> {
    req.task_ids
        .iter()
        .enumerate()
        .map(|(i, id)| parse_uuid(&id.id).map_err(|e| Invalid(format!("task_ids[{i}]: {e}"))))
        .collect()
}

pub fn rule_id(id: Option<&pb::Uuid>) -> Checked<Uuid> {
    super::required_id(id, "rule_id is required")
}

pub fn rack_id(id: Option<&pb::Uuid>) -> Checked<Uuid> {
    super::required_id(id, "rack_id is required")
}

/// `CreateOperationRule`: the operation type here; the record and the
/// definition are the rule manager's to validate.
pub fn rule_draft(req: pb::CreateOperationRuleRequest) -> Checked<RuleDraft> {
    Ok(RuleDraft {
        operation_type: rule_type(req.operation_type, "operation_type")?,
        name: req.name,
        description: req.description,
        operation_code: req.operation_code,
        definition_json: req.rule_definition_json,
        is_default: req.is_default,
    })
}

/// `UpdateOperationRule`: the rule id and the changes.
pub fn rule_update(req: pb::UpdateOperationRuleRequest) -> Checked<(Uuid, RuleUpdate)> {
    let id = rule_id(req.rule_id.as_ref())?;
    Ok((
        id,
        RuleUpdate {
            name: req.name,
            description: req.description,
            definition_json: req.rule_definition_json,
        },
    ))
}

/// `ListOperationRules`: type filter (0 = any), default filter, and the
/// offset / limit pair (default 0 / 100).
pub fn rule_list_query(
    req: &pb::ListOperationRulesRequest,
) -> Checked<(Option<TaskType>, Option<bool>, Page)> {
    let task_type = match req.operation_type {
        None | Some(0) => None,
        Some(v) => Some(rule_type(v, "operation_type")?),
    };
    let offset = req.offset.unwrap_or(0);
    let limit = req.limit.unwrap_or(100);
    if offset < 0 || limit < 0 {
        return invalid("offset and limit must not be negative");
    }
    Ok((
        task_type,
        req.is_default,
        Page {
            offset: i64::from(offset),
            limit: i64::from(limit),
        },
    ))
}
