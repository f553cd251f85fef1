//! Fixtures shared by the dispatch tests.

pub(crate) use std::time::Duration;

pub(crate) use chrono::{DateTime, TimeDelta, Utc};
pub(crate) use uuid::Uuid;

pub(crate) use crate::ComponentsByType;
pub(crate) use crate::dispatch::*;
pub(crate) use crate::run::{
    AdvancePolicy, ConflictPolicy, FirmwarePayload, GateScope, OPERATION_CODE_UPGRADE,
    OPERATION_TYPE_FIRMWARE_CONTROL, OperationRun, OperationRunTarget, OperationTemplate,
    OrderingPolicy, PhasePlan, PhasePolicy, RetryState, RunConfiguration, RunOptions, RunReason,
    RunStatus, SafetyGate, SafetyPolicy, Selector, TargetScope, TargetStatus,
};

pub(crate) use RunStatus as R;
pub(crate) use TargetStatus as T;

pub(crate) fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_700_000_000, 0).unwrap()
}

pub(crate) fn at(seconds: i64) -> DateTime<Utc> {
    t0() + TimeDelta::seconds(seconds)
}

pub(crate) fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

pub(crate) fn target(sequence: i32, status: TargetStatus) -> OperationRunTarget {
    OperationRunTarget {
        id: id(1000 + sequence as u128),
        operation_run_id: id(1),
        rack_id: id(2000 + sequence as u128),
        sequence_index: sequence,
        phase_index: 0,
        components_by_type: ComponentsByType::new(),
        task_id: matches!(
            status,
            T::Submitted | T::Completed | T::Failed | T::Terminated
        )
        .then(|| id(3000 + sequence as u128)),
        status,
        message: String::new(),
        retry_after: None,
        retry_state: None,
        created_at: t0(),
        updated_at: t0(),
    }
}

pub(crate) fn targets(statuses: &[TargetStatus]) -> Vec<OperationRunTarget> {
    statuses
        .iter()
        .enumerate()
        .map(|(i, s)| target(i as i32, *s))
        .collect()
}

pub(crate) fn retry(initial: u64, max: u64, timeout: u64) -> ConflictPolicy {
    ConflictPolicy::Retry {
        retry_timeout: Duration::from_secs(timeout),
        initial_retry_delay: Duration::from_secs(initial),
        max_retry_delay: Duration::from_secs(max),
    }
}

pub(crate) fn options(gates: Vec<SafetyGate>, auto_advance: bool) -> RunOptions {
    RunOptions {
        max_concurrent_targets: 2,
        safety_policy: SafetyPolicy { gates },
        conflict_policy: ConflictPolicy::default(),
        ordering_policy: OrderingPolicy::Random { seed: "o".into() },
        phase_policy: PhasePolicy {
            plan: PhasePlan::Equal { phase_count: 2 },
            advance_policy: AdvancePolicy { auto_advance },
        },
    }
}

/// A gate that never trips in these fixtures.
pub(crate) fn lenient() -> Vec<SafetyGate> {
    vec![SafetyGate::FailureCount {
        scope: GateScope::CumulativeRun,
        failure_threshold_count: 1000,
    }]
}

pub(crate) fn run(status: RunStatus, reason: RunReason, phase: i32, total: i32) -> OperationRun {
    OperationRun {
        id: id(1),
        name: "rollout".into(),
        description: String::new(),
        status,
        reason,
        status_message: "before".into(),
        current_phase_index: phase,
        total_phases: total,
        configuration: RunConfiguration {
            selector: Selector::Percentage {
                percentage: 100,
                seed: "s".into(),
            },
            options: options(lenient(), false),
            operation: OperationTemplate {
                operation_type: OPERATION_TYPE_FIRMWARE_CONTROL.into(),
                code: OPERATION_CODE_UPGRADE.into(),
                target_spec: None,
                description: String::new(),
                queue_options: None,
                target_scope: TargetScope::default(),
                payload: FirmwarePayload::default(),
            },
        },
        created_at: t0(),
        updated_at: t0(),
        started_at: None,
        finished_at: None,
    }
}

pub(crate) fn running(phase: i32, total: i32) -> OperationRun {
    let mut r = run(R::Running, RunReason::None, phase, total);
    r.started_at = Some(t0());
    r
}

pub(crate) fn summary(
    phase: i32,
    total: i32,
    current: &[TargetStatus],
    earlier: EarlierPhases,
) -> PhaseSummary {
    PhaseSummary::new(phase, total, &targets(current), earlier)
}

/// Counting the settled rows instead of loading them gives the summary
pub(crate) fn earlier(
    selected: i32,
    completed: i32,
    failed: i32,
    terminated: i32,
) -> EarlierPhases {
    EarlierPhases {
        selected,
        completed,
        failed,
        terminated,
        skipped: 0,
    }
}

pub(crate) const NONE: EarlierPhases = EarlierPhases {
    selected: 0,
    completed: 0,
    failed: 0,
    terminated: 0,
    skipped: 0,
};
pub(crate) fn rate(scope: GateScope, t: i32) -> SafetyGate {
    SafetyGate::FailureRate {
        scope,
        failure_threshold_percent: t,
    }
}

pub(crate) fn count(scope: GateScope, t: i32) -> SafetyGate {
    SafetyGate::FailureCount {
        scope,
        failure_threshold_count: t,
    }
}

/// `n` current rows of which `failed` failed, the rest pending.
pub(crate) fn with_failures(n: usize, failed: usize, before: EarlierPhases) -> PhaseSummary {
    let mut rows = vec![T::Pending; n];
    rows[..failed].fill(T::Failed);
    let phase = i32::from(before.selected > 0);
    summary(phase, phase + 1, &rows, before)
}

pub(crate) fn ready(o: &RunOptions) -> Runtime<'_> {
    Runtime::Ready(o)
}

pub(crate) fn blocked_since(sequence: i32, since: DateTime<Utc>) -> OperationRunTarget {
    let mut t = target(sequence, T::Blocked);
    t.retry_after = Some(since + TimeDelta::seconds(30));
    t.retry_state = Some(RetryState {
        blocked_since: since,
        attempts: 1,
        last_retry_delay_seconds: 30,
    });
    t
}

pub(crate) const LEASE: Duration = Duration::from_secs(30);
