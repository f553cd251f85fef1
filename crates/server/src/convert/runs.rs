//! Operation-run messages: request validation (spec §5) and responses (§4.8).

use std::time::Duration;

use rackflow_api::v1 as pb;
use rackflow_domain::ComponentType;
use rackflow_domain::run::{
    AdvancePolicy, ConflictPolicy, CountPhase, DEFAULT_INITIAL_RETRY_DELAY,
    DEFAULT_MAX_RETRY_DELAY, DEFAULT_RETRY_TIMEOUT, FirmwarePayload, GateScope, KindFilter,
    NameQuery, OPERATION_CODE_UPGRADE, OPERATION_TYPE_FIRMWARE_CONTROL, OperationRun,
    OperationRunTarget, OperationTemplate, OrderingPolicy, PercentagePhase, PhasePlan, PhasePolicy,
    PhaseScope, QueueOptions, QueueStrategy, RunConfiguration, RunListFilter, RunOptions,
    RunReason, RunStats, RunStatus, SafetyGate, SafetyPolicy, Selector, StateFilter, TargetScope,
    TargetStatus,
};
use rackflow_domain::target::{
    ComponentFilter, ComponentTarget, NvlDomainIdentifier, NvlDomainTarget, RackIdentifier,
    RackTarget, TargetSpec,
};
use rackflow_engine::runs::NewRun;
use uuid::Uuid;

use super::{Checked, invalid, parse_uuid, pb_uuid, timestamp, unix_timestamp, wire_count};

/// Supplies seeds the client left empty (random UUIDv4 strings in the
/// server; fixed values in tests).
pub trait SeedSource {
    fn seed(&mut self) -> String;
}

/// Random UUIDv4 seeds, like the reference.
pub struct RandomSeeds;

impl SeedSource for RandomSeeds {
    fn seed(&mut self) -> String {
        Uuid::new_v4().to_string()
    }
}

/// Validates a create (or preview) request in the reference's order and
/// returns the effective run.
pub fn new_run(req: &pb::CreateOperationRunRequest, seeds: &mut dyn SeedSource) -> Checked<NewRun> {
    let name = req.name.trim();
    if name.is_empty() {
        return invalid("name is required");
    }
    let Some(config) = &req.configuration else {
        return invalid("configuration is required");
    };
    let operation = operation_template(config.operation.as_ref())?;
    let selector = selector(config.selector.as_ref(), seeds)?;
    let options = options(config.options.as_ref(), seeds)?;
    Ok(NewRun {
        name: name.to_string(),
        description: req.description.clone(),
        configuration: RunConfiguration {
            selector,
            options,
            operation,
        },
    })
}

fn operation_template(op: Option<&pb::OperationRunOperation>) -> Checked<OperationTemplate> {
    let Some(op) = op else {
        return invalid("operation is required");
    };
    let Some(pb::operation_run_operation::Operation::UpgradeFirmware(fw)) = &op.operation else {
        return invalid("operation is required");
    };
    super::tasks::unresolved_firmware_object(fw)?;
    let target_scope = target_scope(op.target_scope.as_ref())?;
    let rule_id = match &fw.rule_id {
        Some(u) if !u.id.trim().is_empty() => {
            let id = parse_uuid(&u.id)
                .map_err(|e| super::Invalid(format!("invalid upgrade_firmware.rule_id: {e}")))?;
            (!id.is_nil()).then_some(id)
        }
        _ => None,
    };
    let target_spec = match &fw.target_spec {
        // The planner merges repeated racks anyway; naming each once
        // keeps a list of copies from costing a lookup per copy.
        Some(spec) => Some(
            target_spec(spec)
                .map_err(|e| super::Invalid(format!("invalid upgrade_firmware.target_spec: {e}")))?
                .map(TargetSpec::without_repeats),
        ),
        None => None,
    };
    // Full template validation, prefixed like the reference.
    let validate = |detail: String| super::Invalid(format!("validate operation: {detail}"));
    if let Some(spec) = &target_spec {
        match spec {
            Some(spec) => spec
                .validate()
                .map_err(|e| validate(format!("target_spec: {e}")))?,
            None => {
                return Err(validate(
                    "target_spec: target_spec must have exactly one of racks, nvl_domains, or components set"
                        .to_string(),
                ));
            }
        }
    }
    if let Some(filter) = &target_scope.default_scope_component_filter {
        if target_spec.is_some() {
            return Err(validate(
                "target_scope.default_scope_component_filter requires target_spec to be omitted"
                    .to_string(),
            ));
        }
        filter
            .validate()
            .map_err(|e| validate(format!("target_scope: default_scope_component_filter: {e}")))?;
    }
    let queue_options = fw.queue_options.as_ref().map(|q| QueueOptions {
        conflict_strategy: if q.conflict_strategy == pb::ConflictStrategy::Queue as i32 {
            QueueStrategy::Queue
        } else {
            QueueStrategy::Reject
        },
        queue_timeout_seconds: q.queue_timeout_seconds,
    });
    Ok(OperationTemplate {
        operation_type: OPERATION_TYPE_FIRMWARE_CONTROL.to_string(),
        code: OPERATION_CODE_UPGRADE.to_string(),
        target_spec: target_spec.flatten(),
        description: fw.description.clone(),
        queue_options,
        target_scope,
        payload: FirmwarePayload {
            bundle: super::tasks::firmware_bundle(fw)?,
            target_version: fw.target_version.clone().filter(|v| !v.is_empty()),
            start_time: fw.start_time.as_ref().map_or(0, |t| t.seconds),
            end_time: fw.end_time.as_ref().map_or(0, |t| t.seconds),
            rule_id,
            sub_targets: fw.sub_targets.clone(),
            override_readiness_check: fw.override_readiness_check,
            override_version_check: fw.override_version_check,
            authentication_data: None,
            same_version_for_all_models: fw.same_version_for_all_models,
            firmware_objects: std::collections::BTreeMap::new(),
        },
    })
}

fn target_scope(scope: Option<&pb::OperationRunTargetScope>) -> Checked<TargetScope> {
    let Some(scope) = scope else {
        return Ok(TargetScope::default());
    };
    let mut excluded = Vec::with_capacity(scope.exclude_operation_run_ids.len());
    for (i, id) in scope.exclude_operation_run_ids.iter().enumerate() {
        match parse_uuid(&id.id) {
            Ok(id) if !id.is_nil() => excluded.push(id),
            _ => {
                return invalid(format!(
                    "target_scope.exclude_operation_run_ids[{i}] must be a valid UUID"
                ));
            }
        }
    }
    let filter = match scope
        .default_scope_component_filter
        .as_ref()
        .and_then(|f| f.filter.as_ref())
    {
        None => None,
        Some(pb::component_filter::Filter::Types(types)) => {
            let mut out = Vec::with_capacity(types.types.len());
            for (i, t) in types.types.iter().enumerate() {
                match ComponentType::from_i32(*t) {
                    Some(ty) if ty != ComponentType::Unknown => out.push(ty),
                    _ => {
                        return invalid(format!(
                            "target_scope.default_scope_component_filter.types[{i}] is unknown"
                        ));
                    }
                }
            }
            Some(ComponentFilter::Types { types: out })
        }
        Some(pb::component_filter::Filter::Components(components)) => {
            let mut out = Vec::with_capacity(components.targets.len());
            for (i, target) in components.targets.iter().enumerate() {
                let field = format!("target_scope.default_scope_component_filter.components[{i}]");
                match &target.identifier {
                    Some(pb::component_target::Identifier::Id(id)) => match parse_uuid(&id.id) {
                        Ok(id) if !id.is_nil() => out.push(id),
                        _ => return invalid(format!("{field} must be a valid UUID")),
                    },
                    Some(pb::component_target::Identifier::External(_)) => {
                        return invalid(format!("{field} must use component UUID"));
                    }
                    None => return invalid(format!("{field} must be a valid UUID")),
                }
            }
            Some(ComponentFilter::Components { components: out })
        }
    };
    Ok(TargetScope {
        excluded_operation_run_ids: excluded,
        default_scope_component_filter: filter,
    })
}

/// Converts a wire target spec. `Ok(None)` is a spec with no kind set or an
/// empty list (rejected later by template validation, like the reference).
pub fn target_spec(spec: &pb::OperationTargetSpec) -> Result<Option<TargetSpec>, String> {
    use pb::operation_target_spec::Targets;
    let types = |values: &[i32]| -> Result<Vec<ComponentType>, String> {
        values
            .iter()
            .map(|v| {
                ComponentType::from_i32(*v).ok_or_else(|| "unknown component type".to_string())
            })
            .collect()
    };
    Ok(match &spec.targets {
        None => None,
        Some(Targets::Racks(racks)) if racks.targets.is_empty() => None,
        Some(Targets::Components(c)) if c.targets.is_empty() => None,
        Some(Targets::NvlDomains(d)) if d.targets.is_empty() => None,
        Some(Targets::Racks(racks)) => {
            let mut out = Vec::with_capacity(racks.targets.len());
            for (i, rack) in racks.targets.iter().enumerate() {
                use pb::rack_target::Identifier;
                let identifier = match &rack.identifier {
                    Some(Identifier::Id(id)) => RackIdentifier::Id(
                        parse_uuid(&id.id).map_err(|e| format!("rack target {i} id: {e}"))?,
                    ),
                    Some(Identifier::Name(name)) => RackIdentifier::Name(name.clone()),
                    Some(Identifier::ExternalId(ext)) => RackIdentifier::ExternalId(ext.clone()),
                    None => RackIdentifier::Name(String::new()),
                };
                out.push(RackTarget {
                    identifier,
                    component_types: types(&rack.component_types)?,
                });
            }
            Some(TargetSpec::Racks(out))
        }
        Some(Targets::Components(components)) => {
            let mut out = Vec::with_capacity(components.targets.len());
            for (i, target) in components.targets.iter().enumerate() {
                use pb::component_target::Identifier;
                out.push(match &target.identifier {
                    Some(Identifier::Id(id)) => ComponentTarget::Id(
                        parse_uuid(&id.id).map_err(|e| format!("component target {i} id: {e}"))?,
                    ),
                    Some(Identifier::External(ext)) => ComponentTarget::External {
                        component_type: ComponentType::from_i32(ext.r#type)
                            .ok_or_else(|| "unknown component type".to_string())?,
                        id: ext.id.clone(),
                    },
                    None => ComponentTarget::Id(Uuid::nil()),
                });
            }
            Some(TargetSpec::Components(out))
        }
        Some(Targets::NvlDomains(domains)) => {
            let mut out = Vec::with_capacity(domains.targets.len());
            for (i, domain) in domains.targets.iter().enumerate() {
                use pb::nvl_domain_target::Identifier;
                let identifier = match &domain.identifier {
                    Some(Identifier::Id(id)) => NvlDomainIdentifier::Id(
                        parse_uuid(&id.id)
                            .map_err(|e| format!("NVLink domain target {i} id: {e}"))?,
                    ),
                    Some(Identifier::Name(name)) => NvlDomainIdentifier::Name(name.clone()),
                    Some(Identifier::ExternalId(ext)) => {
                        NvlDomainIdentifier::ExternalId(ext.clone())
                    }
                    None => NvlDomainIdentifier::Name(String::new()),
                };
                out.push(NvlDomainTarget {
                    identifier,
                    component_types: types(&domain.component_types)?,
                });
            }
            Some(TargetSpec::NvlDomains(out))
        }
    })
}

fn selector(
    sel: Option<&pb::OperationRunSelector>,
    seeds: &mut dyn SeedSource,
) -> Checked<Selector> {
    let Some(pb::operation_run_selector::Selector::Percentage(p)) =
        sel.and_then(|s| s.selector.as_ref())
    else {
        return invalid("selector is required");
    };
    if !(1..=100).contains(&p.percentage) {
        return invalid("percentage selector must be between 1 and 100");
    }
    let seed = if p.seed.is_empty() {
        seeds.seed()
    } else {
        p.seed.clone()
    };
    Ok(Selector::Percentage {
        percentage: p.percentage,
        seed,
    })
}

fn options(
    opts: Option<&pb::OperationRunOptions>,
    seeds: &mut dyn SeedSource,
) -> Checked<RunOptions> {
    let Some(opts) = opts else {
        return invalid("options are required");
    };
    if opts.max_concurrent_targets <= 0 {
        return invalid("options.max_concurrent_targets must be greater than 0");
    }
    let safety_policy = safety_policy(opts.safety_policy.as_ref())?;
    let conflict_policy = conflict_policy(opts.conflict_policy.as_ref())?;
    let ordering_policy = ordering_policy(opts.ordering_policy.as_ref(), seeds)?;
    let phase_policy = phase_policy(opts.phase_policy.as_ref())?;
    Ok(RunOptions {
        max_concurrent_targets: opts.max_concurrent_targets,
        safety_policy,
        conflict_policy,
        ordering_policy,
        phase_policy,
    })
}

fn gate_scope(value: i32, field: &str, i: usize) -> Checked<GateScope> {
    match value {
        0 | 1 => Ok(GateScope::CurrentPhase),
        2 => Ok(GateScope::CumulativeRun),
        _ => invalid(format!(
            "safety_policy.gates[{i}]: {field}.scope is unsupported"
        )),
    }
}

fn safety_policy(policy: Option<&pb::OperationRunSafetyPolicy>) -> Checked<SafetyPolicy> {
    use pb::operation_run_safety_gate::Gate;
    let Some(policy) = policy else {
        return invalid("options.safety_policy is required");
    };
    if policy.gates.is_empty() {
        return invalid("safety_policy must contain at least one gate");
    }
    let mut gates = Vec::with_capacity(policy.gates.len());
    for (i, gate) in policy.gates.iter().enumerate() {
        gates.push(match &gate.gate {
            None => return invalid(format!("safety_policy.gates[{i}]: unsupported safety gate")),
            Some(Gate::FailureRate(rate)) => {
                let scope = gate_scope(rate.scope, "failure_rate", i)?;
                if !(1..=100).contains(&rate.failure_threshold_percent) {
                    return invalid(format!(
                        "safety_policy.gates[{i}]: failure_rate.failure_threshold_percent must be between 1 and 100"
                    ));
                }
                SafetyGate::FailureRate {
                    scope,
                    failure_threshold_percent: rate.failure_threshold_percent,
                }
            }
            Some(Gate::FailureCount(count)) => {
                let scope = gate_scope(count.scope, "failure_count", i)?;
                if count.failure_threshold_count <= 0 {
                    return invalid(format!(
                        "safety_policy.gates[{i}]: failure_count.failure_threshold_count must be greater than 0"
                    ));
                }
                SafetyGate::FailureCount {
                    scope,
                    failure_threshold_count: count.failure_threshold_count,
                }
            }
        });
    }
    Ok(SafetyPolicy { gates })
}

/// Proto `Duration` validity, worded like Go's `durationpb.CheckValid`.
fn duration_validity(d: &prost_types::Duration) -> Result<(), String> {
    const MAX_SECONDS: i64 = 315_576_000_000;
    let text = format!("seconds:{} nanos:{}", d.seconds, d.nanos);
    if d.seconds < -MAX_SECONDS {
        return Err(format!("duration ({text}) exceeds -10000 years"));
    }
    if d.seconds > MAX_SECONDS {
        return Err(format!("duration ({text}) exceeds +10000 years"));
    }
    if d.nanos <= -1_000_000_000 || d.nanos >= 1_000_000_000 {
        return Err(format!("duration ({text}) has out-of-range nanos"));
    }
    if (d.seconds > 0 && d.nanos < 0) || (d.seconds < 0 && d.nanos > 0) {
        return Err(format!(
            "duration ({text}) has seconds and nanos with different signs"
        ));
    }
    Ok(())
}

fn retry_duration(
    value: Option<&prost_types::Duration>,
    field: &str,
    default: Duration,
) -> Checked<Duration> {
    let Some(d) = value else {
        return Ok(default);
    };
    duration_validity(d)
        .map_err(|e| super::Invalid(format!("conflict_policy.retry.{field} is invalid: {e}")))?;
    if d.seconds < 0 || (d.seconds == 0 && d.nanos <= 0) {
        return invalid(format!(
            "conflict_policy.retry: {field} must be greater than 0"
        ));
    }
    Ok(Duration::new(
        u64::try_from(d.seconds).unwrap_or(0),
        u32::try_from(d.nanos).unwrap_or(0),
    ))
}

fn conflict_policy(policy: Option<&pb::OperationRunConflictPolicy>) -> Checked<ConflictPolicy> {
    let Some(pb::operation_run_conflict_policy::Strategy::Retry(retry)) =
        policy.and_then(|p| p.strategy.as_ref())
    else {
        return Ok(ConflictPolicy::default());
    };
    let retry_timeout = retry_duration(
        retry.retry_timeout.as_ref(),
        "retry_timeout",
        DEFAULT_RETRY_TIMEOUT,
    )?;
    let initial_retry_delay = retry_duration(
        retry.initial_retry_delay.as_ref(),
        "initial_retry_delay",
        DEFAULT_INITIAL_RETRY_DELAY,
    )?;
    let max_retry_delay = retry_duration(
        retry.max_retry_delay.as_ref(),
        "max_retry_delay",
        DEFAULT_MAX_RETRY_DELAY,
    )?;
    if max_retry_delay < initial_retry_delay {
        return invalid(
            "conflict_policy.retry: max_retry_delay must be greater than or equal to initial_retry_delay",
        );
    }
    Ok(ConflictPolicy::Retry {
        retry_timeout,
        initial_retry_delay,
        max_retry_delay,
    })
}

fn ordering_policy(
    policy: Option<&pb::OperationRunOrderingPolicy>,
    seeds: &mut dyn SeedSource,
) -> Checked<OrderingPolicy> {
    use pb::operation_run_ordering_policy::Ordering;
    match policy.and_then(|p| p.ordering.as_ref()) {
        None => Ok(OrderingPolicy::Random { seed: seeds.seed() }),
        Some(Ordering::Random(random)) => Ok(OrderingPolicy::Random {
            seed: if random.seed.is_empty() {
                seeds.seed()
            } else {
                random.seed.clone()
            },
        }),
        Some(Ordering::PhysicalLocation(_)) => {
            invalid("physical_location ordering is not supported yet")
        }
    }
}

fn phase_policy(policy: Option<&pb::OperationRunPhasePolicy>) -> Checked<PhasePolicy> {
    use pb::operation_run_phase_policy::Plan;
    let advance_policy = AdvancePolicy {
        auto_advance: policy
            .and_then(|p| p.advance_policy.as_ref())
            .is_some_and(|a| a.auto_advance),
    };
    let plan = match policy.and_then(|p| p.plan.as_ref()) {
        None => PhasePlan::Equal { phase_count: 1 },
        Some(Plan::Equal(equal)) => {
            if equal.phase_count <= 0 {
                return invalid("equal phase_count must be greater than 0");
            }
            PhasePlan::Equal {
                phase_count: equal.phase_count,
            }
        }
        Some(Plan::Percentage(pct)) => {
            if pct.phases.is_empty() {
                return invalid("percentage phase policy must include at least one phase");
            }
            if pct
                .phases
                .iter()
                .any(|p| !(1..=100).contains(&p.percentage))
            {
                return invalid("percentage phase percentages must be between 1 and 100");
            }
            if pct
                .phases
                .iter()
                .map(|p| i64::from(p.percentage))
                .sum::<i64>()
                != 100
            {
                return invalid("percentage phase percentages must sum to 100");
            }
            PhasePlan::Percentage {
                phases: pct
                    .phases
                    .iter()
                    .map(|p| PercentagePhase {
                        percentage: p.percentage,
                    })
                    .collect(),
            }
        }
        Some(Plan::Count(count)) => {
            if count.phases.is_empty() {
                return invalid("count phase policy must include at least one phase");
            }
            if count.phases.iter().any(|p| p.count <= 0) {
                return invalid("count phase counts must be greater than 0");
            }
            PhasePlan::Count {
                phases: count
                    .phases
                    .iter()
                    .map(|p| CountPhase { count: p.count })
                    .collect(),
            }
        }
    };
    Ok(PhasePolicy {
        plan,
        advance_policy,
    })
}

// ---------------------------------------------------------------------------
// Filters
// ---------------------------------------------------------------------------

/// Validates the `ListOperationRuns` filter (spec §4.6).
pub fn run_list_filter(filter: Option<&pb::OperationRunFilter>) -> Checked<RunListFilter> {
    let Some(filter) = filter else {
        return Ok(RunListFilter::default());
    };
    let name = filter
        .name
        .as_ref()
        .map(|q| NameQuery {
            patterns: q.patterns.clone(),
            is_wildcard: q.is_wildcard,
            use_or: q.use_or,
        })
        .unwrap_or_default();
    let mut states = Vec::with_capacity(filter.states.len());
    for entry in &filter.states {
        if entry.status.is_none() && entry.reason.is_none() {
            return invalid("operation run state filter must set status, reason, or both");
        }
        let status =
            match entry.status {
                None => None,
                Some(v) => Some(RunStatus::from_wire(v).ok_or_else(|| {
                    super::Invalid("unknown operation run status in filter".into())
                })?),
            };
        let reason = match entry.reason {
            None => None,
            Some(v) => Some(RunReason::from_wire(v).ok_or_else(|| {
                super::Invalid("unknown operation run status reason in filter".into())
            })?),
        };
        states.push(StateFilter { status, reason });
    }
    let mut kinds = Vec::with_capacity(filter.operation_kinds.len());
    for kind in &filter.operation_kinds {
        let operation_type = match pb::OperationType::try_from(kind.r#type) {
            Ok(pb::OperationType::FirmwareControl) => OPERATION_TYPE_FIRMWARE_CONTROL,
            Ok(pb::OperationType::PowerControl) => "power_control",
            _ => return invalid("operation kind filter must set operation type"),
        };
        if kind.code.as_deref() == Some("") {
            return invalid("operation kind filter code must not be empty");
        }
        kinds.push(KindFilter {
            operation_type: operation_type.to_string(),
            code: kind.code.clone(),
        });
    }
    Ok(RunListFilter {
        name,
        states,
        kinds,
    })
}

/// Target status filter: UNKNOWN = none; unrecognised numbers are rejected.
pub fn target_status_filter(value: i32) -> Checked<Option<TargetStatus>> {
    if value == 0 {
        return Ok(None);
    }
    TargetStatus::from_wire(value)
        .map(Some)
        .ok_or_else(|| super::Invalid("unknown operation run target status in filter".into()))
}

pub fn phase_scope(value: i32) -> Checked<PhaseScope> {
    match value {
        0 | 1 => Ok(PhaseScope::Current),
        2 => Ok(PhaseScope::Completed),
        3 => Ok(PhaseScope::CurrentAndCompleted),
        _ => invalid("unsupported operation run target phase scope"),
    }
}

// ---------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------

pub fn run_summary(run: &OperationRun) -> pb::OperationRunSummary {
    pb::OperationRunSummary {
        id: Some(pb_uuid(run.id)),
        name: run.name.clone(),
        description: run.description.clone(),
        operation_kind: Some(operation_kind(&run.configuration.operation)),
        state: Some(pb::OperationRunState {
            status: run.status.to_wire(),
            reason: run.reason.to_wire(),
        }),
        status_message: run.status_message.clone(),
        total_phases: run.total_phases,
        created_at: Some(timestamp(run.created_at)),
        updated_at: Some(timestamp(run.updated_at)),
        started_at: run.started_at.map(timestamp),
        finished_at: run.finished_at.map(timestamp),
    }
}

fn operation_kind(template: &OperationTemplate) -> pb::OperationKind {
    let r#type = match template.operation_type.as_str() {
        OPERATION_TYPE_FIRMWARE_CONTROL => pb::OperationType::FirmwareControl as i32,
        "power_control" => pb::OperationType::PowerControl as i32,
        _ => pb::OperationType::Unknown as i32,
    };
    pb::OperationKind {
        r#type,
        code: (!template.code.is_empty()).then(|| template.code.clone()),
    }
}

pub fn operation_run(run: &OperationRun, stats: Option<&RunStats>) -> pb::OperationRun {
    pb::OperationRun {
        summary: Some(run_summary(run)),
        configuration: Some(configuration(&run.configuration)),
        stats: stats.map(run_stats),
    }
}

fn run_stats(stats: &RunStats) -> pb::OperationRunStats {
    let phase = |p: &rackflow_domain::run::PhaseStats| pb::OperationRunPhaseStats {
        phase_index: p.phase_index,
        selected_targets: p.selected_targets,
        outcome_counts: Some(pb::OperationRunTargetOutcomeCounts {
            completed: p.outcome_counts.completed,
            failed: p.outcome_counts.failed,
            terminated: p.outcome_counts.terminated,
            skipped: p.outcome_counts.skipped,
        }),
    };
    pb::OperationRunStats {
        current_phase_stats: Some(phase(&stats.current)),
        cumulative_phase_stats: Some(phase(&stats.cumulative)),
    }
}

fn pb_duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

fn pb_types(types: &[ComponentType]) -> Vec<i32> {
    types.iter().map(|t| *t as i32).collect()
}

fn pb_target_spec(spec: &TargetSpec) -> pb::OperationTargetSpec {
    use pb::operation_target_spec::Targets;
    let targets = match spec {
        TargetSpec::Racks(racks) => Targets::Racks(pb::RackTargets {
            targets: racks
                .iter()
                .map(|r| pb::RackTarget {
                    identifier: Some(match &r.identifier {
                        RackIdentifier::Id(id) => pb::rack_target::Identifier::Id(pb_uuid(*id)),
                        RackIdentifier::Name(n) => pb::rack_target::Identifier::Name(n.clone()),
                        RackIdentifier::ExternalId(e) => {
                            pb::rack_target::Identifier::ExternalId(e.clone())
                        }
                    }),
                    component_types: pb_types(&r.component_types),
                })
                .collect(),
        }),
        TargetSpec::Components(components) => Targets::Components(pb::ComponentTargets {
            targets: components.iter().map(pb_component_target).collect(),
        }),
        TargetSpec::NvlDomains(domains) => Targets::NvlDomains(pb::NvlDomainTargets {
            targets: domains
                .iter()
                .map(|d| pb::NvlDomainTarget {
                    identifier: Some(match &d.identifier {
                        NvlDomainIdentifier::Id(id) => {
                            pb::nvl_domain_target::Identifier::Id(pb_uuid(*id))
                        }
                        NvlDomainIdentifier::Name(n) => {
                            pb::nvl_domain_target::Identifier::Name(n.clone())
                        }
                        NvlDomainIdentifier::ExternalId(e) => {
                            pb::nvl_domain_target::Identifier::ExternalId(e.clone())
                        }
                    }),
                    component_types: pb_types(&d.component_types),
                })
                .collect(),
        }),
    };
    pb::OperationTargetSpec {
        targets: Some(targets),
    }
}

fn pb_component_target(target: &ComponentTarget) -> pb::ComponentTarget {
    pb::ComponentTarget {
        identifier: Some(match target {
            ComponentTarget::Id(id) => pb::component_target::Identifier::Id(pb_uuid(*id)),
            ComponentTarget::External { component_type, id } => {
                pb::component_target::Identifier::External(pb::ExternalRef {
                    r#type: *component_type as i32,
                    id: id.clone(),
                })
            }
        }),
    }
}

/// The effective configuration as GetOperationRun renders it (spec §4.8).
pub fn configuration(config: &RunConfiguration) -> pb::OperationRunConfiguration {
    let Selector::Percentage { percentage, seed } = &config.selector;
    let selector = pb::OperationRunSelector {
        selector: Some(pb::operation_run_selector::Selector::Percentage(
            pb::PercentageSelector {
                percentage: *percentage,
                seed: seed.clone(),
            },
        )),
    };
    let o = &config.options;
    let gates = o
        .safety_policy
        .gates
        .iter()
        .map(|g| pb::OperationRunSafetyGate {
            gate: Some(match g {
                SafetyGate::FailureRate {
                    scope,
                    failure_threshold_percent,
                } => pb::operation_run_safety_gate::Gate::FailureRate(
                    pb::OperationRunFailureRateGate {
                        scope: pb_gate_scope(*scope),
                        failure_threshold_percent: *failure_threshold_percent,
                    },
                ),
                SafetyGate::FailureCount {
                    scope,
                    failure_threshold_count,
                } => pb::operation_run_safety_gate::Gate::FailureCount(
                    pb::OperationRunFailureCountGate {
                        scope: pb_gate_scope(*scope),
                        failure_threshold_count: *failure_threshold_count,
                    },
                ),
            }),
        })
        .collect();
    let ConflictPolicy::Retry {
        retry_timeout,
        initial_retry_delay,
        max_retry_delay,
    } = &o.conflict_policy;
    let ordering =
        match &o.ordering_policy {
            OrderingPolicy::Random { seed } => pb::operation_run_ordering_policy::Ordering::Random(
                pb::OperationRunRandomOrdering { seed: seed.clone() },
            ),
            OrderingPolicy::PhysicalLocation { strategy } => {
                use pb::operation_run_physical_location_ordering::Strategy;
                use rackflow_domain::run::LocationStrategy;
                let strategy = match strategy {
                    LocationStrategy::RowByRow => Strategy::RowByRow,
                    LocationStrategy::OnePerRowRoundRobin => Strategy::OnePerRowRoundRobin,
                    LocationStrategy::Unknown => Strategy::Unknown,
                };
                pb::operation_run_ordering_policy::Ordering::PhysicalLocation(
                    pb::OperationRunPhysicalLocationOrdering {
                        strategy: strategy as i32,
                    },
                )
            }
        };
    let plan = match &o.phase_policy.plan {
        PhasePlan::Equal { phase_count } => {
            pb::operation_run_phase_policy::Plan::Equal(pb::EqualOperationRunPhases {
                phase_count: *phase_count,
            })
        }
        PhasePlan::Percentage { phases } => {
            pb::operation_run_phase_policy::Plan::Percentage(pb::PercentageOperationRunPhases {
                phases: phases
                    .iter()
                    .map(|p| pb::OperationRunPercentagePhase {
                        percentage: p.percentage,
                    })
                    .collect(),
            })
        }
        PhasePlan::Count { phases } => {
            pb::operation_run_phase_policy::Plan::Count(pb::CountOperationRunPhases {
                phases: phases
                    .iter()
                    .map(|p| pb::OperationRunCountPhase { count: p.count })
                    .collect(),
            })
        }
    };
    let options = pb::OperationRunOptions {
        max_concurrent_targets: o.max_concurrent_targets,
        safety_policy: Some(pb::OperationRunSafetyPolicy { gates }),
        conflict_policy: Some(pb::OperationRunConflictPolicy {
            strategy: Some(pb::operation_run_conflict_policy::Strategy::Retry(
                pb::OperationRunConflictRetryPolicy {
                    retry_timeout: Some(pb_duration(*retry_timeout)),
                    initial_retry_delay: Some(pb_duration(*initial_retry_delay)),
                    max_retry_delay: Some(pb_duration(*max_retry_delay)),
                },
            )),
        }),
        ordering_policy: Some(pb::OperationRunOrderingPolicy {
            ordering: Some(ordering),
        }),
        phase_policy: Some(pb::OperationRunPhasePolicy {
            plan: Some(plan),
            advance_policy: Some(pb::OperationRunPhaseAdvancePolicy {
                auto_advance: o.phase_policy.advance_policy.auto_advance,
            }),
        }),
    };
    let t = &config.operation;
    let upgrade = pb::UpgradeFirmwareRequest {
        target_spec: t.target_spec.as_ref().map(pb_target_spec),
        target_version: t.payload.target_version.clone().filter(|v| !v.is_empty()),
        start_time: unix_timestamp(t.payload.start_time),
        end_time: unix_timestamp(t.payload.end_time),
        description: t.description.clone(),
        queue_options: t.queue_options.as_ref().map(|q| pb::QueueOptions {
            conflict_strategy: match q.conflict_strategy {
                QueueStrategy::Queue => pb::ConflictStrategy::Queue as i32,
                QueueStrategy::Reject => pb::ConflictStrategy::Reject as i32,
            },
            queue_timeout_seconds: q.queue_timeout_seconds,
        }),
        rule_id: t.payload.rule_id.filter(|id| !id.is_nil()).map(pb_uuid),
        sub_targets: t.payload.sub_targets.clone(),
        override_readiness_check: t.payload.override_readiness_check,
        // Write-only: never returned.
        authentication_data: None,
        override_version_check: t.payload.override_version_check,
        firmware_bundle: t
            .payload
            .bundle
            .as_ref()
            .map(super::tasks::pb_firmware_bundle),
        same_version_for_all_models: t.payload.same_version_for_all_models,
        // The object the run applies: its id, or `default` when it applies
        // several hardware types' defaults.
        firmware_object: match t.payload.firmware_objects.len() {
            0 => String::new(),
            1 => t
                .payload
                .firmware_objects
                .values()
                .next()
                .cloned()
                .unwrap_or_default(),
            _ => rackflow_engine::manager::rms_objects::DEFAULT_OBJECT.to_owned(),
        },
    };
    let filter = t
        .target_scope
        .default_scope_component_filter
        .as_ref()
        .map(|f| pb::ComponentFilter {
            filter: Some(match f {
                ComponentFilter::Types { types } => {
                    pb::component_filter::Filter::Types(pb::ComponentTypes {
                        types: pb_types(types),
                    })
                }
                ComponentFilter::Components { components } => {
                    pb::component_filter::Filter::Components(pb::ComponentTargets {
                        targets: components
                            .iter()
                            .map(|id| pb_component_target(&ComponentTarget::Id(*id)))
                            .collect(),
                    })
                }
            }),
        });
    let operation = pb::OperationRunOperation {
        operation: Some(pb::operation_run_operation::Operation::UpgradeFirmware(
            upgrade,
        )),
        target_scope: Some(pb::OperationRunTargetScope {
            exclude_operation_run_ids: t
                .target_scope
                .excluded_operation_run_ids
                .iter()
                .map(|id| pb_uuid(*id))
                .collect(),
            default_scope_component_filter: filter,
        }),
    };
    pb::OperationRunConfiguration {
        selector: Some(selector),
        options: Some(options),
        operation: Some(operation),
    }
}

fn pb_gate_scope(scope: GateScope) -> i32 {
    match scope {
        GateScope::CumulativeRun => pb::OperationRunSafetyGateScope::CumulativeRun as i32,
        GateScope::CurrentPhase => pb::OperationRunSafetyGateScope::CurrentPhase as i32,
    }
}

pub fn components_by_type(set: &rackflow_domain::ComponentsByType) -> pb::ComponentsByType {
    pb::ComponentsByType {
        groups: set
            .iter()
            .map(|(ty, ids)| {
                let mut ids = ids.to_vec();
                ids.sort();
                pb::ComponentsForType {
                    r#type: ty as i32,
                    component_ids: ids.into_iter().map(pb_uuid).collect(),
                }
            })
            .collect(),
    }
}

pub fn run_target(target: &OperationRunTarget, rack_external_id: &str) -> pb::OperationRunTarget {
    pb::OperationRunTarget {
        id: Some(pb_uuid(target.id)),
        operation_run_id: Some(pb_uuid(target.operation_run_id)),
        rack_id: Some(pb_uuid(target.rack_id)),
        sequence_index: target.sequence_index,
        phase_index: target.phase_index,
        task_id: target.task_id.map(pb_uuid),
        status: target.status.to_wire(),
        message: target.message.clone(),
        components_by_type: Some(components_by_type(&target.components_by_type)),
        created_at: Some(timestamp(target.created_at)),
        updated_at: Some(timestamp(target.updated_at)),
        rack_external_id: rack_external_id.to_string(),
    }
}

/// Count of planned targets per phase, for previews.
pub fn phase_sizes(sizes: &[usize]) -> Vec<i32> {
    sizes.iter().map(|n| wire_count(*n)).collect()
}
