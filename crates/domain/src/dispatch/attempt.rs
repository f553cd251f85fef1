//! One dispatcher attempt as a single pure step (§3.2 steps 3–8): the
//! locked run state goes in, a typed plan comes out.
//!
//! The order is business logic and lives here, not in the engine:
//! reconcile the locked targets from their child tasks (§3.3), summarise
//! the phase (§3.4), decide (§3.5), apply the decision to the run row,
//! claim within the quota (§3.6) building each claimed target's child
//! request (§3.7), and work out when time alone next changes a decision
//! (D2) and what the run is waiting on. The engine loads the
//! [`LockedRun`], calls [`attempt`], writes [`AttemptPlan::run`] and
//! [`AttemptPlan::targets`] in the same transaction, and after the commit
//! submits [`AttemptPlan::submissions`].
//!
//! [`WaitingOn`] is modelled on omicron's planner report: a typed account of
//! why an attempt did not do more, for logs and tests, never parsed.

use std::collections::HashMap;

use crate::target::{ComponentTarget, TargetSpec};
use crate::task::{DEFAULT_QUEUE_TIMEOUT_SECS, QueuePolicy, TaskInformation, TaskType};

use super::*;
use crate::run::QueueStrategy;

/// The state of one run locked for a dispatcher attempt or a manual
/// control.
#[derive(Debug, Clone, PartialEq)]
pub struct LockedRun {
    pub run: OperationRun,
    /// The *unsettled* targets of `run.current_phase_index` (every status
    /// but the terminal completed, failed, terminated and skipped), ordered
    /// by sequence_index — of the pending ones only the first
    /// [`claim_window`] (an attempt claims no more than that). Settled
    /// targets never change again and pending ones past the window cannot
    /// be claimed yet, so both are only counted (`settled`).
    pub targets: Vec<OperationRunTarget>,
    /// Aggregate of the current phase's targets that were not loaded: the
    /// settled ones, and the pending ones past the claim window (which
    /// count in `selected` only).
    pub settled: EarlierPhases,
    /// Aggregate of targets with phase_index < current.
    pub earlier: EarlierPhases,
    /// Status and message of the child task of every locked target that has
    /// one (what reconciliation needs).
    pub task_states: HashMap<Uuid, (TaskStatus, String)>,
    /// Audit events the store writes with the run, in the same
    /// transaction (a control and its record commit together).
    pub audit: Vec<crate::audit::AuditEvent>,
}

impl LockedRun {
    /// The phase summary of the locked state as it stands.
    pub fn summary(&self) -> PhaseSummary {
        PhaseSummary::for_run(&self.run, &self.targets, self.settled, self.earlier)
    }

    /// Pending targets past the claim window (counted, not loaded).
    pub fn pending_not_loaded(&self) -> usize {
        let s = self.settled;
        let terminal = i64::from(s.completed)
            + i64::from(s.failed)
            + i64::from(s.terminated)
            + i64::from(s.skipped);
        usize::try_from(i64::from(s.selected) - terminal).unwrap_or(0)
    }
}

/// Pending targets an attempt loads beyond the free slots it can count on:
/// a claimed target whose child request does not build fails without
/// using a slot, and the next pending one takes it in the same attempt.
pub const CLAIM_WINDOW_MARGIN: i64 = 8;

/// How many of a run's pending current-phase targets, in sequence order, an
/// attempt must see, given its loaded non-pending unsettled targets and
/// their child tasks' states: the slots of `max_concurrent_targets` that
/// the targets which stay active whatever reconciliation finds (a child
/// task not finished, a claim lease live at `now`) leave free, plus
/// [`CLAIM_WINDOW_MARGIN`]. No attempt claims more, so the rest need only
/// be counted: with 1,000 in flight an attempt per finished child used to
/// read a thousand pending rows to claim a handful. `None`: every pending
/// target (no concurrency limit).
///
/// `now` must not be later than the attempt's own: a lease live at `now`
/// is then live for the attempt too.
pub fn claim_window(
    run: &OperationRun,
    unsettled: &[OperationRunTarget],
    task_states: &HashMap<Uuid, (TaskStatus, String)>,
    now: DateTime<Utc>,
) -> Option<i64> {
    let max = run.configuration.options.max_concurrent_targets;
    if max <= 0 {
        return None;
    }
    let staying_active = unsettled
        .iter()
        .filter(|t| classify(t, now) == ClaimClass::Active)
        .filter(|t| match t.task_id {
            // A claim: its lease is live.
            None => true,
            Some(task_id) => task_states
                .get(&task_id)
                .is_some_and(|(status, _)| !status.is_finished()),
        })
        .count();
    let free = (i64::from(max) - i64::try_from(staying_active).unwrap_or(i64::MAX)).max(0);
    Some(free + CLAIM_WINDOW_MARGIN)
}

/// The child task of one claimed target (§3.7), as plain data: the engine
/// turns it into a task submission after the claim commits.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildRequest {
    pub task_type: TaskType,
    pub information: TaskInformation,
    pub description: String,
    /// The target's frozen components, by UUID, sorted and deduplicated.
    pub target: TargetSpec,
    /// Always REJECT (§3.7): a conflict blocks the target instead of
    /// queueing a task behind another.
    pub queue: QueuePolicy,
    pub rule_id: Option<Uuid>,
    /// `operation-run-target:<target id>`: a re-submission after a lost
    /// one (crash, expired lease) returns the same task.
    pub idempotency_key: String,
    /// The child must resolve to exactly the target's rack.
    pub required_rack_id: Uuid,
}

/// The idempotency key of a target's child task.
pub fn child_idempotency_key(target_id: Uuid) -> String {
    format!("operation-run-target:{target_id}")
}

/// The child task request of one target (§3.7): component targets by UUID
/// from the frozen set, REJECT always, idempotency key per target. An error
/// text fails the target (it has no components).
pub fn child_request(
    run: &OperationRun,
    target: &OperationRunTarget,
) -> Result<ChildRequest, String> {
    let template = &run.configuration.operation;
    let mut components = Vec::new();
    for (_, ids) in target.components_by_type.iter() {
        let mut ids = ids.to_vec();
        ids.sort();
        ids.dedup();
        components.extend(ids.into_iter().map(ComponentTarget::Id));
    }
    if components.is_empty() {
        return Err(format!(
            "operation run target {} has no components",
            target.id
        ));
    }
    let description = if template.description.is_empty() {
        match &template.payload.target_version {
            Some(v) => format!("firmware upgrade, target version {v}"),
            None => "firmware upgrade".to_string(),
        }
    } else {
        template.description.clone()
    };
    Ok(ChildRequest {
        task_type: TaskType::FirmwareControl,
        information: TaskInformation {
            code: template.code.clone(),
            override_readiness_check: template.payload.override_readiness_check,
            firmware: Some(template.payload.clone()),
        },
        description,
        target: TargetSpec::Components(components),
        queue: QueuePolicy {
            strategy: QueueStrategy::Reject,
            timeout_secs: DEFAULT_QUEUE_TIMEOUT_SECS,
        },
        rule_id: template.payload.rule_id,
        idempotency_key: child_idempotency_key(target.id),
        required_rack_id: target.rack_id,
    })
}

/// A claimed target and the child task to submit for it once the claim has
/// committed.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildSubmission {
    /// The target as claimed (status claimed, lease set).
    pub target: OperationRunTarget,
    pub request: ChildRequest,
}

/// Why an attempt did not do more than it did. An attempt that claimed up
/// to the quota and has nothing else pending reports only what its claims
/// wait for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitingOn {
    /// The run was not dispatchable when locked (terminal or paused): the
    /// dispatcher leaves it alone.
    NotDispatchable { status: RunStatus },
    /// The run reached a terminal status in this attempt.
    Finished { status: RunStatus },
    /// The run paused because a conflict streak outlasted `retry_timeout`
    /// (§3.5 #7); an operator resumes it.
    ConflictTimeout { target_id: Uuid },
    /// A safety gate tripped (§3.5 #8); an operator resumes it.
    SafetyGate,
    /// The phase is done and the next one needs an operator's advance
    /// (§3.5 #10).
    PhaseGate { next_phase_index: i32 },
    /// The run moved to this phase; the next attempt locks and claims its
    /// targets (§3.5 #9).
    NextPhase { phase_index: i32 },
    /// Claimable targets remain but every slot of the quota is taken.
    MaxConcurrency {
        max_concurrent_targets: i32,
        candidates: usize,
    },
    /// Targets blocked by a rack conflict whose backoff ends at `until`
    /// (the earliest of them).
    ConflictBackoff {
        targets: usize,
        until: DateTime<Utc>,
    },
    /// Targets claimed by an earlier attempt whose submission has not
    /// landed yet; the lease recovers them at `until` (the earliest).
    LeasedClaims {
        targets: usize,
        until: DateTime<Utc>,
    },
    /// Child tasks running (submitted targets, and the submissions this
    /// attempt makes).
    ChildTasks { active: usize },
    /// Every target of the phase settled in this attempt (failed at claim):
    /// the next attempt decides the phase.
    NextAttempt,
}

/// What one attempt decided and what the engine must do about it.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptPlan {
    pub decision: Decision,
    /// The run row to write.
    pub run: OperationRun,
    /// The locked targets to write (only changed ones differ from the
    /// loaded rows).
    pub targets: Vec<OperationRunTarget>,
    /// Claimed targets' child tasks, in sequence order, to submit after
    /// the commit.
    pub submissions: Vec<ChildSubmission>,
    /// When time alone next changes a decision for this run
    /// ([`next_due`]); claimed targets are left out, their submission
    /// decides what they wait for.
    pub next_due: Option<DateTime<Utc>>,
    pub waiting_on: Vec<WaitingOn>,
}

impl AttemptPlan {
    /// Whether the decision changed the run's status (worth an info log).
    pub fn is_transition(&self) -> bool {
        !matches!(self.decision, Decision::NoOp | Decision::Claim { .. })
    }
}

/// One dispatcher attempt over the locked state, deciding with one instant
/// `now`; claims hold their targets for `lease`.
pub fn attempt(locked: &LockedRun, now: DateTime<Utc>, lease: Duration) -> AttemptPlan {
    let mut run = locked.run.clone();
    let mut targets = locked.targets.clone();
    for target in targets.iter_mut() {
        if !needs_reconcile(target) {
            continue;
        }
        let Some(task_id) = target.task_id else {
            continue;
        };
        // A missing task row (never expected: tasks are not deleted) leaves
        // the target for the claim lease.
        if let Some((status, message)) = locked.task_states.get(&task_id) {
            reconcile_target(target, *status, message);
        }
    }
    let summary = PhaseSummary::for_run(&run, &targets, locked.settled, locked.earlier);
    let decision = decide(
        &run,
        &summary,
        Runtime::from_options(&locked.run.configuration.options),
        now,
    );
    decision.apply(&mut run, now);

    let mut submissions = Vec::new();
    let mut waiting_on = Vec::new();
    match &decision {
        Decision::Claim {
            max_concurrent_targets,
        } => {
            let outcome = claim_targets(&mut targets, *max_concurrent_targets, now, lease, |t| {
                child_request(&run, t)
            });
            if let Some(message) = &outcome.run_message {
                run.status_message.clone_from(message);
            }
            submissions = outcome
                .claimed
                .into_iter()
                .map(|(i, request)| ChildSubmission {
                    target: targets[i].clone(),
                    request,
                })
                .collect();
            waiting_on = claim_waits(
                &targets,
                &submissions,
                *max_concurrent_targets,
                locked.pending_not_loaded(),
                now,
            );
        }
        Decision::NoOp => waiting_on.push(WaitingOn::NotDispatchable {
            status: locked.run.status,
        }),
        Decision::Fail { .. } | Decision::Complete { .. } => {
            waiting_on.push(WaitingOn::Finished { status: run.status })
        }
        Decision::PauseConflictTimeout { target_id, .. } => {
            waiting_on.push(WaitingOn::ConflictTimeout {
                target_id: *target_id,
            })
        }
        Decision::PauseSafetyGate { .. } => waiting_on.push(WaitingOn::SafetyGate),
        Decision::AdvancePhase {
            next_phase_index, ..
        } => waiting_on.push(WaitingOn::NextPhase {
            phase_index: *next_phase_index,
        }),
        Decision::PausePhaseGate { .. } => waiting_on.push(WaitingOn::PhaseGate {
            next_phase_index: summary.current_phase_index() + 1,
        }),
    }

    let next_due = matches!(run.status, RunStatus::Pending | RunStatus::Running)
        .then(|| {
            let waiting: Vec<OperationRunTarget> = targets
                .iter()
                .filter(|t| !submissions.iter().any(|s| s.target.id == t.id))
                .cloned()
                .collect();
            super::next_due(&waiting, &run.configuration.options.conflict_policy, now)
        })
        .flatten();
    AttemptPlan {
        decision,
        run,
        targets,
        submissions,
        next_due,
        waiting_on,
    }
}

/// What the targets wait on after a claim step (#11).
fn claim_waits(
    targets: &[OperationRunTarget],
    submissions: &[ChildSubmission],
    max_concurrent_targets: i32,
    pending_not_loaded: usize,
    now: DateTime<Utc>,
) -> Vec<WaitingOn> {
    let just_claimed = |t: &OperationRunTarget| submissions.iter().any(|s| s.target.id == t.id);
    let mut candidates = pending_not_loaded;
    let mut children = submissions.len();
    let mut backoff: Option<(usize, DateTime<Utc>)> = None;
    let mut leased: Option<(usize, DateTime<Utc>)> = None;
    let earliest = |slot: &mut Option<(usize, DateTime<Utc>)>, at: DateTime<Utc>| {
        *slot = Some(match *slot {
            Some((n, until)) => (n + 1, until.min(at)),
            None => (1, at),
        });
    };
    for target in targets.iter().filter(|t| !just_claimed(t)) {
        match (classify(target, now), target.status) {
            (ClaimClass::Candidate, _) => candidates += 1,
            (ClaimClass::WaitingBlocked, _) => {
                if let Some(at) = target.retry_after {
                    earliest(&mut backoff, at);
                }
            }
            (ClaimClass::Active, TargetStatus::Claimed) => {
                if let Some(at) = target.retry_after {
                    earliest(&mut leased, at);
                }
            }
            (ClaimClass::Active, _) => children += 1,
            (ClaimClass::Done, _) => {}
        }
    }
    let mut waits = Vec::new();
    if candidates > 0 {
        waits.push(WaitingOn::MaxConcurrency {
            max_concurrent_targets,
            candidates,
        });
    }
    if let Some((targets, until)) = backoff {
        waits.push(WaitingOn::ConflictBackoff { targets, until });
    }
    if let Some((targets, until)) = leased {
        waits.push(WaitingOn::LeasedClaims { targets, until });
    }
    if children > 0 {
        waits.push(WaitingOn::ChildTasks { active: children });
    }
    if waits.is_empty() {
        waits.push(WaitingOn::NextAttempt);
    }
    waits
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ComponentType;
    use crate::dispatch::test_support::*;

    const TARGET_STATUSES: [TargetStatus; 8] = [
        T::Pending,
        T::Blocked,
        T::Claimed,
        T::Submitted,
        T::Completed,
        T::Failed,
        T::Terminated,
        T::Skipped,
    ];
    const TASK_STATUSES: [TaskStatus; 6] = [
        TaskStatus::Pending,
        TaskStatus::Waiting,
        TaskStatus::Running,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Terminated,
    ];
    const RUN_STATUSES: [RunStatus; 6] = [
        R::Pending,
        R::Running,
        R::Paused,
        R::Completed,
        R::Failed,
        R::Cancelled,
    ];

    fn with_components(mut t: OperationRunTarget) -> OperationRunTarget {
        t.components_by_type
            .insert(ComponentType::Compute, vec![id(9002), id(9001), id(9002)]);
        t
    }

    fn locked(run: OperationRun, targets: Vec<OperationRunTarget>) -> LockedRun {
        LockedRun {
            run,
            targets,
            settled: NONE,
            earlier: NONE,
            task_states: HashMap::new(),
            audit: Vec::new(),
        }
    }

    /// The run, targets, claims and due instant of [`reference`].
    type ReferenceOutcome = (
        OperationRun,
        Vec<OperationRunTarget>,
        Vec<(OperationRunTarget, ChildRequest)>,
        Option<DateTime<Utc>>,
    );

    /// The attempt as the engine ordered it by hand before this module
    /// existed (reconcile, summary, decide, apply, claim, next_due): the
    /// reference the pure step must reproduce exactly.
    fn reference(lock: &LockedRun, now: DateTime<Utc>, lease: Duration) -> ReferenceOutcome {
        let mut lock = lock.clone();
        let mut claimed: Vec<(OperationRunTarget, ChildRequest)> = Vec::new();
        for target in lock.targets.iter_mut() {
            if !needs_reconcile(target) {
                continue;
            }
            let Some(task_id) = target.task_id else {
                continue;
            };
            let Some((status, message)) = lock.task_states.get(&task_id) else {
                continue;
            };
            reconcile_target(target, *status, message);
        }
        let summary = PhaseSummary::for_run(&lock.run, &lock.targets, lock.settled, lock.earlier);
        let runtime = Runtime::from_options(&lock.run.configuration.options);
        let decision = decide(&lock.run, &summary, runtime, now);
        decision.apply(&mut lock.run, now);
        if let Decision::Claim {
            max_concurrent_targets,
        } = decision
        {
            let run = lock.run.clone();
            let outcome = claim_targets(
                &mut lock.targets,
                max_concurrent_targets,
                now,
                lease,
                |target| child_request(&run, target),
            );
            if let Some(message) = &outcome.run_message {
                lock.run.status_message = message.clone();
            }
            for (i, request) in outcome.claimed {
                claimed.push((lock.targets[i].clone(), request));
            }
        }
        let due = matches!(lock.run.status, RunStatus::Pending | RunStatus::Running)
            .then(|| {
                let waiting: Vec<OperationRunTarget> = lock
                    .targets
                    .iter()
                    .filter(|t| !claimed.iter().any(|c| c.0.id == t.id))
                    .cloned()
                    .collect();
                next_due(
                    &waiting,
                    &lock.run.configuration.options.conflict_policy,
                    now,
                )
            })
            .flatten();
        (lock.run, lock.targets, claimed, due)
    }

    /// One generated target: status, whether it has components, its
    /// `retry_after` and streak start relative to now, and its child task's
    /// state.
    type TargetSeed = (usize, bool, Option<i64>, Option<i64>, Option<(usize, bool)>);

    fn any_target() -> impl Strategy<Value = TargetSeed> {
        (
            0usize..8,
            any::<bool>(),
            proptest::option::of(-60i64..60),
            proptest::option::of(-400i64..0),
            proptest::option::of((0usize..6, any::<bool>())),
        )
    }

    #[allow(clippy::too_many_arguments)] // one per generated dimension
    fn build(
        run_status: usize,
        phase: (i32, i32),
        max_concurrent: i32,
        auto_advance: bool,
        gate_threshold: i32,
        seeds: &[TargetSeed],
        settled: (i32, i32),
        earlier: (i32, i32),
    ) -> LockedRun {
        let mut r = run(RUN_STATUSES[run_status], RunReason::None, phase.0, phase.1);
        r.configuration.options = options(
            vec![count(GateScope::CumulativeRun, gate_threshold)],
            auto_advance,
        );
        r.configuration.options.max_concurrent_targets = max_concurrent;
        r.configuration.options.conflict_policy = retry(10, 60, 300);
        let now = at(1000);
        let mut task_states = HashMap::new();
        let targets = seeds
            .iter()
            .enumerate()
            .map(|(i, &(status, components, retry_after, since, task))| {
                let mut t = target(i as i32, TARGET_STATUSES[status]);
                if components {
                    t = with_components(t);
                }
                t.phase_index = phase.0;
                t.retry_after = retry_after.map(|s| now + TimeDelta::seconds(s));
                t.retry_state = since.map(|s| RetryState {
                    blocked_since: now + TimeDelta::seconds(s),
                    attempts: 1,
                    last_retry_delay_seconds: 10,
                });
                if let (Some(task_id), Some((status, done))) = (t.task_id, task) {
                    let message = if done { "task done" } else { "" };
                    task_states.insert(task_id, (TASK_STATUSES[status], message.to_string()));
                }
                t
            })
            .collect();
        LockedRun {
            run: r,
            targets,
            settled: EarlierPhases {
                selected: settled.0 + settled.1,
                completed: settled.0,
                failed: settled.1,
                terminated: 0,
                skipped: 0,
            },
            earlier: EarlierPhases {
                selected: earlier.0 + earlier.1,
                completed: earlier.0,
                failed: earlier.1,
                terminated: 0,
                skipped: 0,
            },
            task_states,
            audit: Vec::new(),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// The pure step writes, claims and schedules exactly what the
        /// engine's hand-ordered attempt did, for any locked state.
        #[test]
        fn attempt_matches_the_hand_ordered_reference(
            run_status in 0usize..6,
            phase in (1i32..4).prop_flat_map(|total| (0..total, Just(total))),
            max_concurrent in 0i32..4,
            auto_advance in any::<bool>(),
            gate_threshold in 1i32..5,
            seeds in proptest::collection::vec(any_target(), 0..7),
            settled in (0i32..3, 0i32..2),
            earlier in (0i32..3, 0i32..2),
        ) {
            let lock = build(run_status, phase, max_concurrent, auto_advance, gate_threshold, &seeds, settled, earlier);
            let now = at(1000);
            let plan = attempt(&lock, now, LEASE);
            let (run, targets, claimed, due) = reference(&lock, now, LEASE);
            prop_assert_eq!(&plan.run, &run);
            prop_assert_eq!(&plan.targets, &targets);
            let submissions: Vec<(OperationRunTarget, ChildRequest)> = plan
                .submissions
                .iter()
                .map(|s| (s.target.clone(), s.request.clone()))
                .collect();
            prop_assert_eq!(submissions, claimed);
            prop_assert_eq!(plan.next_due, due);
            prop_assert!(!plan.waiting_on.is_empty());
            // Only a claim decision claims, and never past the quota.
            if let Decision::Claim { max_concurrent_targets } = plan.decision {
                let active = active_count(&plan.targets, now);
                prop_assert!(active <= usize::try_from(max_concurrent_targets).unwrap_or(0).max(active_count(&lock.targets, now)));
                // Quota left over with claimable targets would be a bug.
                let full = plan.waiting_on.iter().any(|w| matches!(w, WaitingOn::MaxConcurrency { .. }));
                if full {
                    prop_assert!(active >= usize::try_from(max_concurrent_targets).unwrap_or(0));
                }
            } else {
                prop_assert!(plan.submissions.is_empty());
                prop_assert_eq!(plan.waiting_on.len(), 1);
            }
        }

        /// What the store loads — the pending targets only up to the claim
        /// window, the rest counted — plans exactly what the whole phase
        /// does: same run, same claims, same writes to the loaded rows, same
        /// due instant and waits. (Targets whose child request cannot be
        /// built fail without using a slot, so the window could hide a later
        /// candidate; they never come out of planning, so pending ones here
        /// all have components.)
        #[test]
        fn the_claim_window_plans_what_the_whole_phase_does(
            run_status in 0usize..6,
            phase in (1i32..4).prop_flat_map(|total| (0..total, Just(total))),
            max_concurrent in 0i32..4,
            auto_advance in any::<bool>(),
            gate_threshold in 1i32..5,
            // Enough targets for pending ones past the window.
            seeds in proptest::collection::vec(any_target(), 0..24),
            settled in (0i32..3, 0i32..2),
            earlier in (0i32..3, 0i32..2),
        ) {
            let seeds: Vec<TargetSeed> = seeds
                .into_iter()
                .map(|mut seed| {
                    if TARGET_STATUSES[seed.0] == T::Pending {
                        seed.1 = true;
                    }
                    seed
                })
                .collect();
            let full = build(run_status, phase, max_concurrent, auto_advance, gate_threshold, &seeds, settled, earlier);
            let now = at(1000);
            let mut windowed = full.clone();
            // The pending targets count for nothing in the window: the
            // store computes it from the other rows, before loading them.
            if let Some(window) = claim_window(&full.run, &full.targets, &full.task_states, now) {
                let mut pending_seen = 0i64;
                windowed.targets.retain(|t| {
                    if t.status != T::Pending {
                        return true;
                    }
                    pending_seen += 1;
                    pending_seen <= window
                });
                let dropped = full.targets.len() - windowed.targets.len();
                windowed.settled.selected += i32::try_from(dropped).unwrap_or(i32::MAX);
                prop_assert_eq!(windowed.pending_not_loaded(), dropped);
            }
            let whole = attempt(&full, now, LEASE);
            let part = attempt(&windowed, now, LEASE);
            prop_assert_eq!(&part.decision, &whole.decision);
            prop_assert_eq!(&part.run, &whole.run);
            prop_assert_eq!(&part.submissions, &whole.submissions);
            prop_assert_eq!(part.next_due, whole.next_due);
            prop_assert_eq!(&part.waiting_on, &whole.waiting_on);
            for t in &part.targets {
                let same = whole.targets.iter().find(|w| w.id == t.id);
                prop_assert_eq!(Some(t), same);
            }
            // The rows left out are exactly the ones nothing changed.
            for w in &whole.targets {
                if !part.targets.iter().any(|t| t.id == w.id) {
                    let before = full.targets.iter().find(|t| t.id == w.id);
                    prop_assert_eq!(Some(w), before);
                }
            }
        }
    }

    /// Every combination of the predicates the decision table looks at
    /// (§3.5), in first-match order: the decision and what the run then
    /// waits on follow the first row that applies.
    #[test]
    fn decision_order_is_first_match_for_every_combination() {
        let now = at(1000);
        for bits in 0u32..(1 << 8) {
            let bit = |n: u32| bits & (1 << n) != 0;
            let status = if bit(0) { R::Running } else { R::Pending };
            let paused = bit(1);
            let invalid = bit(2);
            let timed_out = bit(3);
            let gate = bit(4);
            let phase_done = bit(5);
            let last_phase = bit(6);
            let auto_advance = bit(7);

            let (phase, total) = if last_phase { (1, 2) } else { (0, 2) };
            let mut r = run(
                if paused { R::Paused } else { status },
                RunReason::None,
                phase,
                total,
            );
            r.configuration.options = options(
                vec![count(GateScope::CurrentPhase, if gate { 1 } else { 100 })],
                auto_advance,
            );
            if invalid {
                r.configuration.options.max_concurrent_targets = 0;
            }
            r.configuration.options.conflict_policy = retry(10, 60, 300);
            // One failed target trips the gate when it is strict; the other
            // target is either settled or blocked (long enough to time out,
            // or not).
            let mut failed = with_components(target(0, T::Failed));
            failed.phase_index = phase;
            let mut rows = vec![failed];
            if !phase_done {
                let mut blocked = with_components(target(1, T::Blocked));
                blocked.phase_index = phase;
                blocked.retry_after = Some(now + TimeDelta::seconds(5));
                let since = if timed_out { 300 } else { 10 };
                blocked.retry_state = Some(RetryState {
                    blocked_since: now - TimeDelta::seconds(since),
                    attempts: 2,
                    last_retry_delay_seconds: 10,
                });
                rows.push(blocked);
            }
            let lock = locked(r, rows);
            let plan = attempt(&lock, now, LEASE);
            let expected = if paused {
                "noop"
            } else if invalid {
                "fail"
            } else if phase_done && last_phase {
                "complete"
            } else if timed_out && !phase_done {
                "conflict-timeout"
            } else if gate {
                "safety-gate"
            } else if phase_done && auto_advance {
                "advance"
            } else if phase_done {
                "phase-gate"
            } else {
                "claim"
            };
            let (got, waits) = match &plan.decision {
                Decision::NoOp => (
                    "noop",
                    vec![WaitingOn::NotDispatchable { status: R::Paused }],
                ),
                Decision::Fail { .. } => ("fail", vec![WaitingOn::Finished { status: R::Failed }]),
                Decision::Complete { status, .. } => {
                    ("complete", vec![WaitingOn::Finished { status: *status }])
                }
                Decision::PauseConflictTimeout { target_id, .. } => (
                    "conflict-timeout",
                    vec![WaitingOn::ConflictTimeout {
                        target_id: *target_id,
                    }],
                ),
                Decision::PauseSafetyGate { .. } => ("safety-gate", vec![WaitingOn::SafetyGate]),
                Decision::AdvancePhase { .. } => {
                    ("advance", vec![WaitingOn::NextPhase { phase_index: 1 }])
                }
                Decision::PausePhaseGate { .. } => (
                    "phase-gate",
                    vec![WaitingOn::PhaseGate {
                        next_phase_index: 1,
                    }],
                ),
                Decision::Claim { .. } => (
                    "claim",
                    vec![WaitingOn::ConflictBackoff {
                        targets: 1,
                        until: now + TimeDelta::seconds(5),
                    }],
                ),
            };
            assert_eq!(got, expected, "combination {bits:08b}: {:?}", plan.decision);
            assert_eq!(plan.waiting_on, waits, "combination {bits:08b}");
            assert!(plan.submissions.is_empty(), "combination {bits:08b}");
            assert_eq!(plan.is_transition(), !matches!(got, "noop" | "claim"));
        }
    }

    #[test]
    fn claims_up_to_the_quota_and_reports_what_remains() {
        let now = at(1000);
        let mut r = running(0, 1);
        r.configuration.options.max_concurrent_targets = 2;
        let mut leased = with_components(target(1, T::Claimed));
        leased.retry_after = Some(now + TimeDelta::seconds(20));
        let rows = vec![
            with_components(target(0, T::Pending)),
            leased,
            with_components(target(2, T::Pending)),
            with_components(target(3, T::Pending)),
        ];
        let plan = attempt(&locked(r, rows), now, LEASE);
        assert_eq!(
            plan.decision,
            Decision::Claim {
                max_concurrent_targets: 2
            }
        );
        let claimed: Vec<i32> = plan
            .submissions
            .iter()
            .map(|s| s.target.sequence_index)
            .collect();
        assert_eq!(claimed, vec![0]);
        assert_eq!(plan.run.status_message, "submitted 1 operation run target");
        assert_eq!(
            plan.waiting_on,
            vec![
                WaitingOn::MaxConcurrency {
                    max_concurrent_targets: 2,
                    candidates: 2
                },
                WaitingOn::LeasedClaims {
                    targets: 1,
                    until: now + TimeDelta::seconds(20)
                },
                WaitingOn::ChildTasks { active: 1 },
            ]
        );
        // The leased claim of the other attempt is what time next changes;
        // this attempt's own claim is left to its submission.
        assert_eq!(plan.next_due, Some(now + TimeDelta::seconds(20)));
    }

    #[test]
    fn a_child_task_that_finished_frees_its_slot_in_the_same_attempt() {
        let now = at(1000);
        let mut r = running(0, 1);
        r.configuration.options.max_concurrent_targets = 1;
        let rows = vec![
            with_components(target(0, T::Submitted)),
            with_components(target(1, T::Pending)),
        ];
        let mut lock = locked(r, rows);
        lock.task_states
            .insert(id(3000), (TaskStatus::Completed, "done".into()));
        let plan = attempt(&lock, now, LEASE);
        assert_eq!(plan.targets[0].status, T::Completed);
        assert_eq!(plan.targets[0].message, "done");
        assert_eq!(plan.submissions.len(), 1);
        let submission = &plan.submissions[0];
        assert_eq!(submission.target.status, T::Claimed);
        assert_eq!(
            submission.target.retry_after,
            Some(now + TimeDelta::seconds(30))
        );
        assert_eq!(
            submission.request.idempotency_key,
            format!("operation-run-target:{}", id(1001))
        );
        assert_eq!(submission.request.required_rack_id, id(2001));
        assert_eq!(
            submission.request.target,
            TargetSpec::Components(vec![
                ComponentTarget::Id(id(9001)),
                ComponentTarget::Id(id(9002))
            ])
        );
        assert_eq!(submission.request.description, "firmware upgrade");
        assert_eq!(submission.request.queue.strategy, QueueStrategy::Reject);
        assert_eq!(plan.waiting_on, vec![WaitingOn::ChildTasks { active: 1 }]);
    }

    #[test]
    fn a_target_without_components_fails_at_claim_and_the_next_attempt_decides() {
        let now = at(1000);
        let plan = attempt(
            &locked(running(0, 1), vec![target(0, T::Pending)]),
            now,
            LEASE,
        );
        assert!(plan.submissions.is_empty());
        assert_eq!(plan.targets[0].status, T::Failed);
        assert_eq!(
            plan.targets[0].message,
            format!("operation run target {} has no components", id(1000))
        );
        assert_eq!(plan.waiting_on, vec![WaitingOn::NextAttempt]);
    }

    #[test]
    fn child_request_describes_the_target_version() {
        let mut r = running(0, 1);
        r.configuration.operation.payload.target_version = Some("1.2".into());
        let request = child_request(&r, &with_components(target(0, T::Pending)));
        assert_eq!(
            request.map(|r| r.description),
            Ok("firmware upgrade, target version 1.2".to_string())
        );
        r.configuration.operation.description = "mine".into();
        let request = child_request(&r, &with_components(target(0, T::Pending)));
        assert_eq!(request.map(|r| r.description), Ok("mine".to_string()));
    }
}
