//! The operation-run dispatcher's decisions and the manual controls, as pure
//! functions over the rows the engine has locked (spec operation-runs §3,
//! §4.2–4.5, decisions D1 and D3).
//!
//! This module owns:
//! - reconciliation of a target from its child task (§3.3);
//! - the phase summary and its predicates (§3.4);
//! - the safety gates and their exact messages (§3.8);
//! - the decision order of one dispatcher attempt (§3.5) and how a decision
//!   changes the run row;
//! - claiming under the concurrency quota (§3.6);
//! - what a submission outcome does to a target, including the conflict
//!   backoff that keeps its retry state across claims (§3.7, §3.9, D1);
//! - pause, resume, advance and cancel (§4.2–4.5).
//!
//! Nothing here reads a clock, does I/O or is async: `now` is always a
//! parameter, so that one attempt decides with one instant and the engine's
//! transaction writes exactly what these functions computed.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

use crate::duration::format_go_duration;
use crate::run::{
    ConflictPolicy, GateScope, OperationRun, OperationRunTarget, OutcomeCounts, PhaseStats,
    RetryState, RunOptions, RunReason, RunStatus, SafetyGate, TargetStatus,
};
use crate::task::TaskStatus;

/// How long a claim holds a target before another pass may re-claim it
/// (spec §3.1 "claim lease").
pub const DEFAULT_CLAIM_LEASE: Duration = Duration::from_secs(30);

/// Fixed status messages written by the dispatcher and the manual controls.
pub mod messages {
    pub const INVALID_CONFIGURATION: &str = "invalid operation run configuration";
    pub const NO_TARGETS: &str = "operation run has no targets";
    pub const RUN_FAILED: &str = "operation run failed";
    pub const RUN_COMPLETED_WITH_FAILURES: &str = "operation run completed with failed targets";
    pub const RUN_COMPLETED: &str = "operation run completed";
    pub const ADVANCED_TO_NEXT_PHASE: &str = "advanced to next phase";
    pub const WAITING_FOR_PHASE_ADVANCE: &str = "waiting for phase advance";
    pub const WAITING_FOR_QUOTA: &str = "waiting for active targets quota";
    pub const CLAIMED: &str = "claimed for submission";
    pub const SUBMITTED: &str = "submitted";
    pub const NOT_EXACTLY_ONE_TASK: &str = "task submission did not return exactly one task";
    pub const PAUSED_BY_OPERATOR: &str = "operation run paused by operator";
    pub const RESUMED: &str = "operation run resumed";
    pub const CANCELLED: &str = "operation run cancelled";
}

// ---------------------------------------------------------------------------
// Time arithmetic
// ---------------------------------------------------------------------------

/// `now + d`, saturating: a configured duration too large for chrono must not
/// panic the dispatcher, and "practically never" is the right meaning.
fn add(now: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|delta| now.checked_add_signed(delta))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

// ---------------------------------------------------------------------------
// §3.3 Reconciliation
// ---------------------------------------------------------------------------

/// The target status a child task's status implies (§3.3): finished tasks
/// map to their outcome, everything else (pending, running, waiting) means
/// the target is still `submitted`.
pub fn target_status_for_task(status: TaskStatus) -> TargetStatus {
    match status {
        TaskStatus::Completed => TargetStatus::Completed,
        TaskStatus::Failed => TargetStatus::Failed,
        TaskStatus::Terminated => TargetStatus::Terminated,
        TaskStatus::Pending | TaskStatus::Running | TaskStatus::Waiting => TargetStatus::Submitted,
    }
}

/// Whether a locked current-phase target must be reconciled from its task:
/// it has a task and is not terminal yet. The engine reads exactly these
/// tasks; a missing one aborts the attempt (§3.3).
pub fn needs_reconcile(target: &OperationRunTarget) -> bool {
    target.task_id.is_some() && !target.status.is_terminal()
}

/// Copies the child task's outcome onto the target (§3.3). Returns whether
/// the row changed (status or message), i.e. whether it must be written.
/// Targets without a task or already terminal are left alone: a terminal
/// target's outcome is final even if its task is later edited.
pub fn reconcile_target(
    target: &mut OperationRunTarget,
    task_status: TaskStatus,
    task_message: &str,
) -> bool {
    if !needs_reconcile(target) {
        return false;
    }
    let status = target_status_for_task(task_status);
    if target.status == status && target.message == task_message {
        return false;
    }
    target.status = status;
    target.message = task_message.to_string();
    true
}

// ---------------------------------------------------------------------------
// §3.4 Phase summary
// ---------------------------------------------------------------------------

/// The SQL aggregate over the run's targets with `phase_index` below the
/// current phase (§7.3 "phase aggregate").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EarlierPhases {
    pub selected: i32,
    pub completed: i32,
    pub failed: i32,
    pub terminated: i32,
    pub skipped: i32,
}

/// A current-phase target that is `blocked` with a conflict streak, for the
/// conflict-timeout check (§3.5 #7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockedTarget {
    pub target_id: Uuid,
    pub blocked_since: DateTime<Utc>,
}

/// Everything the decisions and the manual controls need to know about the
/// run's targets (§3.4), built after reconciliation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseSummary {
    /// The locked current-phase rows: phase index = the run's current index.
    pub current: PhaseStats,
    /// Every earlier phase; phase index = max(current − 1, 0).
    pub completed: PhaseStats,
    /// The run's persisted `total_phases` (never re-derived).
    pub total_phases: i32,
    /// Current-phase `blocked` targets with a retry state, in sequence order,
    /// so the timeout names the first one that tripped like the reference.
    pub blocked: Vec<BlockedTarget>,
}

impl PhaseSummary {
    /// Builds the summary from the locked rows of the current phase (all of
    /// them, and only them: the engine's lock query selects exactly these)
    /// and the aggregate of the earlier phases.
    pub fn new(
        current_phase_index: i32,
        total_phases: i32,
        current_targets: &[OperationRunTarget],
        earlier: EarlierPhases,
    ) -> PhaseSummary {
        PhaseSummary::with_settled(
            current_phase_index,
            total_phases,
            current_targets,
            EarlierPhases::default(),
            earlier,
        )
    }

    /// [`PhaseSummary::new`] when the current phase's settled (terminal)
    /// targets are not among `current_targets` but counted in `settled`
    /// (the store does not load rows that can no longer change).
    pub fn with_settled(
        current_phase_index: i32,
        total_phases: i32,
        current_targets: &[OperationRunTarget],
        settled: EarlierPhases,
        earlier: EarlierPhases,
    ) -> PhaseSummary {
        let mut outcome_counts = OutcomeCounts {
            completed: settled.completed,
            failed: settled.failed,
            terminated: settled.terminated,
            skipped: settled.skipped,
        };
        let mut blocked: Vec<(i32, BlockedTarget)> = Vec::new();
        for target in current_targets {
            outcome_counts.add(target.status);
            if target.status == TargetStatus::Blocked
                && let Some(state) = &target.retry_state
            {
                blocked.push((
                    target.sequence_index,
                    BlockedTarget {
                        target_id: target.id,
                        blocked_since: state.blocked_since,
                    },
                ));
            }
        }
        blocked.sort_by_key(|(sequence, _)| *sequence);
        PhaseSummary {
            current: PhaseStats {
                phase_index: current_phase_index,
                selected_targets: i32::try_from(current_targets.len())
                    .unwrap_or(i32::MAX)
                    .saturating_add(settled.selected),
                outcome_counts,
            },
            completed: PhaseStats {
                phase_index: (current_phase_index - 1).max(0),
                selected_targets: earlier.selected,
                outcome_counts: OutcomeCounts {
                    completed: earlier.completed,
                    failed: earlier.failed,
                    terminated: earlier.terminated,
                    skipped: earlier.skipped,
                },
            },
            total_phases,
            blocked: blocked.into_iter().map(|(_, b)| b).collect(),
        }
    }

    /// [`PhaseSummary::new`] with the run's current phase and total phases.
    pub fn for_run(
        run: &OperationRun,
        current_targets: &[OperationRunTarget],
        settled: EarlierPhases,
        earlier: EarlierPhases,
    ) -> PhaseSummary {
        PhaseSummary::with_settled(
            run.current_phase_index,
            run.total_phases,
            current_targets,
            settled,
            earlier,
        )
    }

    pub fn current_phase_index(&self) -> i32 {
        self.current.phase_index
    }

    /// Current phase has rows and every one is terminal. The terminal
    /// statuses are exactly the four outcome counts, so "all terminal" is
    /// "outcomes add up to the row count".
    pub fn current_phase_terminal(&self) -> bool {
        let c = &self.current.outcome_counts;
        let terminal = i64::from(c.completed)
            + i64::from(c.failed)
            + i64::from(c.terminated)
            + i64::from(c.skipped);
        self.current.selected_targets > 0 && terminal == i64::from(self.current.selected_targets)
    }

    pub fn has_next_phase(&self) -> bool {
        self.total_phases > 0
            && i64::from(self.current.phase_index) + 1 < i64::from(self.total_phases)
    }

    /// The current phase is the last one and it is terminal.
    pub fn all_terminal(&self) -> bool {
        self.total_phases > 0
            && i64::from(self.current.phase_index) + 1 >= i64::from(self.total_phases)
            && self.current_phase_terminal()
    }

    pub fn selected_total(&self) -> i64 {
        i64::from(self.completed.selected_targets) + i64::from(self.current.selected_targets)
    }

    pub fn failed_or_terminated_total(&self) -> i64 {
        let (c, e) = (&self.current.outcome_counts, &self.completed.outcome_counts);
        i64::from(c.failed)
            + i64::from(c.terminated)
            + i64::from(e.failed)
            + i64::from(e.terminated)
    }

    /// The terminal status the targets imply, if they imply one: only when
    /// there are targets and the final phase is terminal. Skipped counts as
    /// success here (§3.4).
    pub fn terminal_run_status(&self) -> Option<RunStatus> {
        let selected = self.selected_total();
        if selected <= 0 || !self.all_terminal() {
            return None;
        }
        let bad = self.failed_or_terminated_total();
        Some(if bad == selected {
            RunStatus::Failed
        } else if bad > 0 {
            RunStatus::CompletedWithFailures
        } else {
            RunStatus::Completed
        })
    }

    /// The current phase has no rows at all (a broken persisted plan).
    pub fn current_phase_empty(&self) -> bool {
        self.current.selected_targets == 0
    }

    /// Current plus every earlier phase, as the `cumulative_run` gate scope
    /// counts it; phase index = the current index.
    pub fn cumulative(&self) -> PhaseStats {
        let (c, e) = (&self.current.outcome_counts, &self.completed.outcome_counts);
        PhaseStats {
            phase_index: self.current.phase_index,
            selected_targets: self
                .current
                .selected_targets
                .saturating_add(self.completed.selected_targets),
            outcome_counts: OutcomeCounts {
                completed: c.completed.saturating_add(e.completed),
                failed: c.failed.saturating_add(e.failed),
                terminated: c.terminated.saturating_add(e.terminated),
                skipped: c.skipped.saturating_add(e.skipped),
            },
        }
    }

    /// The stats a gate of this scope looks at.
    pub fn scope_stats(&self, scope: GateScope) -> PhaseStats {
        match scope {
            GateScope::CurrentPhase => self.current,
            GateScope::CumulativeRun => self.cumulative(),
        }
    }
}

/// The message of a terminal run status (§3.5 #6), `None` for the others.
pub fn terminal_message(status: RunStatus) -> Option<&'static str> {
    match status {
        RunStatus::Failed => Some(messages::RUN_FAILED),
        RunStatus::CompletedWithFailures => Some(messages::RUN_COMPLETED_WITH_FAILURES),
        RunStatus::Completed => Some(messages::RUN_COMPLETED),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// §3.8 Safety gates
// ---------------------------------------------------------------------------

/// The message of one gate if it trips on this summary (§3.8). Only failed
/// targets count (terminated and skipped do not); `selected` is every row in
/// scope whatever its status. Both thresholds are inclusive.
pub fn gate_trip(gate: &SafetyGate, summary: &PhaseSummary) -> Option<String> {
    match *gate {
        SafetyGate::FailureRate {
            scope,
            failure_threshold_percent: threshold,
        } => {
            let stats = summary.scope_stats(scope);
            let (failed, selected) = (
                i64::from(stats.outcome_counts.failed),
                i64::from(stats.selected_targets),
            );
            // Integer cross-multiplication: no float rounding at the edge.
            if selected > 0 && failed * 100 >= i64::from(threshold) * selected {
                let pct = failed * 100 / selected;
                Some(format!(
                    "failure_rate safety gate tripped for {scope}: {failed}/{selected} targets failed ({pct}%, threshold {threshold}%)"
                ))
            } else {
                None
            }
        }
        SafetyGate::FailureCount {
            scope,
            failure_threshold_count: threshold,
        } => {
            let stats = summary.scope_stats(scope);
            let (failed, selected) = (stats.outcome_counts.failed, stats.selected_targets);
            (failed >= threshold).then(|| {
                format!(
                    "failure_count safety gate tripped for {scope}: {failed}/{selected} targets failed (threshold {threshold})"
                )
            })
        }
    }
}

/// The first tripped gate's message, in configured order (OR semantics).
pub fn evaluate_gates(gates: &[SafetyGate], summary: &PhaseSummary) -> Option<String> {
    gates.iter().find_map(|gate| gate_trip(gate, summary))
}

// ---------------------------------------------------------------------------
// §3.5 Decisions
// ---------------------------------------------------------------------------

/// The run's dispatch configuration after step 2 of an attempt (§3.2):
/// decoded and validated, or why not. The decision table fails the run on
/// the last two (§3.5 #1, #2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runtime<'a> {
    Ready(&'a RunOptions),
    /// Decoding or validation failed with this error.
    Invalid(String),
    /// No error, but a piece the dispatcher needs is absent.
    Missing,
}

/// Re-validates the options the dispatcher relies on, with the §5.4
/// messages. Create validates them already; this guards rows written by
/// other means (older versions, manual edits) so that a bad row fails the
/// run loudly instead of, say, never claiming with a quota of zero.
pub fn check_options(options: &RunOptions) -> Result<(), String> {
    if options.max_concurrent_targets <= 0 {
        return Err("options.max_concurrent_targets must be greater than 0".into());
    }
    if options.safety_policy.gates.is_empty() {
        return Err("safety_policy must contain at least one gate".into());
    }
    for (i, gate) in options.safety_policy.gates.iter().enumerate() {
        match *gate {
            SafetyGate::FailureRate {
                failure_threshold_percent: t,
                ..
            } if !(1..=100).contains(&t) => {
                return Err(format!(
                    "safety_policy.gates[{i}]: failure_rate.failure_threshold_percent must be between 1 and 100"
                ));
            }
            SafetyGate::FailureCount {
                failure_threshold_count: t,
                ..
            } if t <= 0 => {
                return Err(format!(
                    "safety_policy.gates[{i}]: failure_count.failure_threshold_count must be greater than 0"
                ));
            }
            _ => {}
        }
    }
    let ConflictPolicy::Retry {
        retry_timeout,
        initial_retry_delay,
        max_retry_delay,
    } = &options.conflict_policy;
    for (name, d) in [
        ("retry_timeout", retry_timeout),
        ("initial_retry_delay", initial_retry_delay),
        ("max_retry_delay", max_retry_delay),
    ] {
        if d.is_zero() {
            return Err(format!(
                "conflict_policy.retry: {name} must be greater than 0"
            ));
        }
    }
    if max_retry_delay < initial_retry_delay {
        return Err(
            "conflict_policy.retry: max_retry_delay must be greater than or equal to initial_retry_delay"
                .into(),
        );
    }
    Ok(())
}

impl<'a> Runtime<'a> {
    /// The run's stored options, checked with [`check_options`]; for an
    /// engine whose store already decoded the JSON.
    pub fn from_options(options: &'a RunOptions) -> Runtime<'a> {
        match check_options(options) {
            Ok(()) => Runtime::Ready(options),
            Err(error) => Runtime::Invalid(error),
        }
    }
}

/// What one dispatcher attempt does to the run (§3.5), first match wins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Leave the run alone: it is terminal (#3), or paused (the dispatcher
    /// never touches paused runs, §3.1).
    NoOp,
    /// #1, #2, #4, #5: → failed, reason none, finished_at = now.
    Fail { message: String },
    /// #6: → the terminal status the targets imply, reason none,
    /// finished_at = now.
    Complete { status: RunStatus, message: String },
    /// #7: → paused / conflict_retry_timeout.
    PauseConflictTimeout { target_id: Uuid, message: String },
    /// #8: → paused / safety_gate.
    PauseSafetyGate { message: String },
    /// #9: current_phase_index = `next_phase_index`, → running; nothing is
    /// claimed in this attempt (the next pass locks the new phase's rows).
    AdvancePhase {
        next_phase_index: i32,
        message: String,
    },
    /// #10: → paused / phase_gate.
    PausePhaseGate { message: String },
    /// #11: → running (message kept), then claim up to the quota (§3.6).
    Claim { max_concurrent_targets: i32 },
}

/// The first current-phase blocked target whose streak has lasted at least
/// `retry_timeout`, with the #7 message. `None` when the policy's timeout
/// does not fit a time delta (it cannot have elapsed).
pub fn conflict_timeout(
    summary: &PhaseSummary,
    policy: &ConflictPolicy,
    now: DateTime<Utc>,
) -> Option<(Uuid, String)> {
    let ConflictPolicy::Retry { retry_timeout, .. } = policy;
    let timeout = TimeDelta::from_std(*retry_timeout).ok()?;
    summary
        .blocked
        .iter()
        .find(|b| now.signed_duration_since(b.blocked_since) >= timeout)
        .map(|b| {
            (
                b.target_id,
                format!(
                    "target {} blocked by rack conflict for {}",
                    b.target_id,
                    format_go_duration(*retry_timeout)
                ),
            )
        })
}

/// Decides one attempt (§3.5). `summary` is built after reconciliation;
/// `runtime` is the outcome of decoding the run's configuration.
pub fn decide(
    run: &OperationRun,
    summary: &PhaseSummary,
    runtime: Runtime<'_>,
    now: DateTime<Utc>,
) -> Decision {
    // Outside the table: the lock only yields pending/running runs, so a
    // paused run here is a caller mistake; never resume or fail it behind
    // the operator's back.
    if run.status == RunStatus::Paused {
        return Decision::NoOp;
    }
    let options = match runtime {
        Runtime::Invalid(error) => {
            return Decision::Fail {
                message: format!("{}: {error}", messages::INVALID_CONFIGURATION),
            };
        }
        Runtime::Missing => {
            return Decision::Fail {
                message: messages::INVALID_CONFIGURATION.into(),
            };
        }
        Runtime::Ready(options) => options,
    };
    if run.status.is_terminal() {
        return Decision::NoOp;
    }
    if summary.current_phase_empty() && summary.total_phases > 0 {
        return Decision::Fail {
            message: format!(
                "operation run phase {} has no targets; persisted phase plan is invalid",
                summary.current_phase_index()
            ),
        };
    }
    if summary.selected_total() == 0 {
        return Decision::Fail {
            message: messages::NO_TARGETS.into(),
        };
    }
    if let Some(status) = summary.terminal_run_status() {
        return Decision::Complete {
            status,
            message: terminal_message(status).unwrap_or_default().into(),
        };
    }
    if let Some((target_id, message)) = conflict_timeout(summary, &options.conflict_policy, now) {
        return Decision::PauseConflictTimeout { target_id, message };
    }
    if let Some(message) = evaluate_gates(&options.safety_policy.gates, summary) {
        return Decision::PauseSafetyGate { message };
    }
    if summary.current_phase_terminal() && summary.has_next_phase() {
        return if options.phase_policy.advance_policy.auto_advance {
            Decision::AdvancePhase {
                next_phase_index: summary.current_phase_index() + 1,
                message: messages::ADVANCED_TO_NEXT_PHASE.into(),
            }
        } else {
            Decision::PausePhaseGate {
                message: messages::WAITING_FOR_PHASE_ADVANCE.into(),
            }
        };
    }
    Decision::Claim {
        max_concurrent_targets: options.max_concurrent_targets,
    }
}

impl Decision {
    /// The status message the decision writes, if it writes one (`Claim`
    /// leaves it to the claim step).
    pub fn message(&self) -> Option<&str> {
        match self {
            Decision::NoOp | Decision::Claim { .. } => None,
            Decision::Fail { message }
            | Decision::Complete { message, .. }
            | Decision::PauseConflictTimeout { message, .. }
            | Decision::PauseSafetyGate { message }
            | Decision::AdvancePhase { message, .. }
            | Decision::PausePhaseGate { message } => Some(message),
        }
    }

    /// Applies the decision to the run row. Returns whether anything
    /// changed (`updated_at` is stamped only then).
    pub fn apply(&self, run: &mut OperationRun, now: DateTime<Utc>) -> bool {
        let before = run.clone();
        match self {
            Decision::NoOp => {}
            Decision::Fail { message } => finish(run, RunStatus::Failed, message, now),
            Decision::Complete { status, message } => finish(run, *status, message, now),
            Decision::PauseConflictTimeout { message, .. } => {
                pause_with(run, RunReason::ConflictRetryTimeout, message)
            }
            Decision::PauseSafetyGate { message } => {
                pause_with(run, RunReason::SafetyGate, message)
            }
            Decision::AdvancePhase {
                next_phase_index,
                message,
            } => {
                run.current_phase_index = *next_phase_index;
                enter_running(run, now);
                run.status_message.clone_from(message);
            }
            Decision::PausePhaseGate { message } => pause_with(run, RunReason::PhaseGate, message),
            Decision::Claim { .. } => enter_running(run, now),
        }
        stamp(run, &before, now)
    }
}

/// Terminal transition: reason none, finished_at = now (§3.5).
fn finish(run: &mut OperationRun, status: RunStatus, message: &str, now: DateTime<Utc>) {
    run.status = status;
    run.reason = RunReason::None;
    run.status_message = message.to_string();
    run.finished_at = Some(now);
}

/// Pausing keeps started_at (§3.5).
fn pause_with(run: &mut OperationRun, reason: RunReason, message: &str) {
    run.status = RunStatus::Paused;
    run.reason = reason;
    run.status_message = message.to_string();
}

/// → running, reason none. D3: `started_at` is set on the first entry into
/// running whatever the path (dispatcher, resume, advance), not only from
/// pending as the reference does, so a run paused while pending still gets
/// a start time.
fn enter_running(run: &mut OperationRun, now: DateTime<Utc>) {
    run.status = RunStatus::Running;
    run.reason = RunReason::None;
    if run.started_at.is_none() {
        run.started_at = Some(now);
    }
}

fn stamp(run: &mut OperationRun, before: &OperationRun, now: DateTime<Utc>) -> bool {
    let changed = run != before;
    if changed {
        run.updated_at = now;
    }
    changed
}

// ---------------------------------------------------------------------------
// §3.6 Claiming
// ---------------------------------------------------------------------------

/// How a current-phase target stands with respect to claiming (§3.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimClass {
    /// Consumes quota: submitted with a task, or claimed with a live lease.
    Active,
    /// May be claimed now: pending; blocked or claimed whose `retry_after`
    /// is absent or due (expired backoff / lease); legacy submitted without
    /// a task id.
    Candidate,
    /// Blocked with a backoff not yet due; counted only for the message.
    WaitingBlocked,
    /// Terminal.
    Done,
}

pub fn classify(target: &OperationRunTarget, now: DateTime<Utc>) -> ClaimClass {
    let due = target.retry_after.is_none_or(|at| at <= now);
    match target.status {
        TargetStatus::Submitted if target.task_id.is_some() => ClaimClass::Active,
        TargetStatus::Submitted | TargetStatus::Pending => ClaimClass::Candidate,
        // A lease is live only while strictly in the future, so the instant
        // it expires the row is both not active and claimable.
        TargetStatus::Claimed if !due => ClaimClass::Active,
        TargetStatus::Claimed => ClaimClass::Candidate,
        TargetStatus::Blocked if due => ClaimClass::Candidate,
        TargetStatus::Blocked => ClaimClass::WaitingBlocked,
        TargetStatus::Completed
        | TargetStatus::Failed
        | TargetStatus::Terminated
        | TargetStatus::Skipped => ClaimClass::Done,
    }
}

/// Targets consuming quota right now.
pub fn active_count(targets: &[OperationRunTarget], now: DateTime<Utc>) -> usize {
    targets
        .iter()
        .filter(|t| classify(t, now) == ClaimClass::Active)
        .count()
}

/// Claims one target (§3.6): status claimed, task id cleared, lease until
/// `now + lease`. D1: `retry_state` is deliberately kept (the reference
/// clears it, which is why its backoff never grows), so a re-block after
/// this claim continues the streak.
pub fn claim_target(target: &mut OperationRunTarget, now: DateTime<Utc>, lease: Duration) {
    target.status = TargetStatus::Claimed;
    target.task_id = None;
    target.message = messages::CLAIMED.into();
    target.retry_after = Some(add(now, lease));
    target.updated_at = now;
}

/// Marks a target failed with an error text (child request could not be
/// built, hard submission error). Retry bookkeeping goes with it: the
/// target is terminal.
pub fn fail_target(target: &mut OperationRunTarget, error: &str, now: DateTime<Utc>) {
    target.status = TargetStatus::Failed;
    target.task_id = None;
    target.message = error.to_string();
    target.retry_after = None;
    target.retry_state = None;
    target.updated_at = now;
}

/// The run message after a claim step with free quota (§3.6): `None` when
/// there is nothing to say (the run message is then left as it was).
pub fn claim_message(claimed: usize, waiting_blocked: usize) -> Option<String> {
    let mut parts = Vec::new();
    match claimed {
        0 => {}
        1 => parts.push("submitted 1 operation run target".to_string()),
        n => parts.push(format!("submitted {n} operation run targets")),
    }
    match waiting_blocked {
        0 => {}
        1 => parts.push("1 target waiting on rack conflicts".to_string()),
        n => parts.push(format!("{n} targets waiting on rack conflicts")),
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// What a claim step did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimOutcome<R> {
    /// Claimed targets (indexes into the slice, sequence order) with the
    /// child request built for each, to submit after commit.
    pub claimed: Vec<(usize, R)>,
    /// Targets failed because their child request could not be built.
    pub failed: Vec<usize>,
    /// Quota consumers before claiming.
    pub active: usize,
    /// Blocked targets whose backoff is not due.
    pub waiting_blocked: usize,
    /// The run's new status message, if the step sets one.
    pub run_message: Option<String>,
}

impl<R> ClaimOutcome<R> {
    /// Indexes of every target row the step changed (to persist).
    pub fn changed(&self) -> Vec<usize> {
        let mut all: Vec<usize> = self.claimed.iter().map(|(i, _)| *i).collect();
        all.extend(&self.failed);
        all.sort_unstable();
        all
    }
}

/// The claim step of decision #11 (§3.6) over the locked current-phase
/// rows. Candidates are taken in sequence order; `build` makes the child
/// request for one (§3.7) — a build error fails that target and does not
/// use a slot. Stops once `max_concurrent_targets − active` are claimed.
pub fn claim_targets<R>(
    targets: &mut [OperationRunTarget],
    max_concurrent_targets: i32,
    now: DateTime<Utc>,
    lease: Duration,
    mut build: impl FnMut(&OperationRunTarget) -> Result<R, String>,
) -> ClaimOutcome<R> {
    let active = active_count(targets, now);
    let waiting_blocked = targets
        .iter()
        .filter(|t| classify(t, now) == ClaimClass::WaitingBlocked)
        .count();
    let available = i64::from(max_concurrent_targets) - i64::try_from(active).unwrap_or(i64::MAX);
    let mut outcome = ClaimOutcome {
        claimed: Vec::new(),
        failed: Vec::new(),
        active,
        waiting_blocked,
        run_message: None,
    };
    if available <= 0 {
        outcome.run_message = Some(messages::WAITING_FOR_QUOTA.into());
        return outcome;
    }
    let available = usize::try_from(available).unwrap_or(usize::MAX);
    let mut order: Vec<usize> = (0..targets.len())
        .filter(|&i| classify(&targets[i], now) == ClaimClass::Candidate)
        .collect();
    order.sort_by_key(|&i| targets[i].sequence_index);
    for i in order {
        if outcome.claimed.len() >= available {
            break;
        }
        match build(&targets[i]) {
            Ok(request) => {
                claim_target(&mut targets[i], now, lease);
                outcome.claimed.push((i, request));
            }
            Err(error) => {
                fail_target(&mut targets[i], &error, now);
                outcome.failed.push(i);
            }
        }
    }
    outcome.run_message = claim_message(outcome.claimed.len(), waiting_blocked);
    outcome
}

/// [`claim_targets`] when every child request builds: claims up to the free
/// slots and returns the claimed indexes in sequence order.
pub fn plan_claims(
    targets: &mut [OperationRunTarget],
    max_concurrent_targets: i32,
    now: DateTime<Utc>,
    lease: Duration,
) -> Vec<usize> {
    claim_targets(targets, max_concurrent_targets, now, lease, |_| {
        Ok::<(), String>(())
    })
    .claimed
    .into_iter()
    .map(|(i, ())| i)
    .collect()
}

// ---------------------------------------------------------------------------
// §3.7 / §3.9 Submission outcomes and conflict retry (D1)
// ---------------------------------------------------------------------------

/// The next backoff in whole seconds: the initial delay on the first block
/// of a streak, else the previous delay doubled, capped at the max (§3.9).
/// Delays are floored at 1 s because a sub-second policy truncates to 0 s,
/// and 0 doubled never grows.
pub fn next_retry_delay_secs(previous: Option<&RetryState>, policy: &ConflictPolicy) -> i64 {
    let ConflictPolicy::Retry {
        initial_retry_delay,
        max_retry_delay,
        ..
    } = policy;
    let secs = |d: &Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX).max(1);
    let (initial, max) = (secs(initial_retry_delay), secs(max_retry_delay));
    match previous.map(|s| s.last_retry_delay_seconds) {
        // Missing or nonsensical state counts as a first block (§5.6).
        Some(last) if last > 0 => last.saturating_mul(2).min(max),
        _ => initial,
    }
}

/// Whether a streak that began at `blocked_since` has lasted the policy's
/// retry timeout (inclusive, §3.5 #7).
pub fn conflict_timed_out(
    blocked_since: DateTime<Utc>,
    policy: &ConflictPolicy,
    now: DateTime<Utc>,
) -> bool {
    let ConflictPolicy::Retry { retry_timeout, .. } = policy;
    TimeDelta::from_std(*retry_timeout)
        .is_ok_and(|timeout| now.signed_duration_since(blocked_since) >= timeout)
}

/// The earliest instant after `now` at which time alone changes what a pass
/// would decide for these current-phase targets: a blocked target's backoff
/// ends (it becomes claimable), its streak reaches `retry_timeout` (§3.5
/// #7), or a claim lease expires (§3.11). `None` when nothing is pending on
/// the clock.
///
/// Why (D2): events wake the dispatcher for state changes, but nothing
/// happens when a backoff simply runs out; without a timer a blocked target
/// was only retried — and a conflict timeout only noticed — at the next
/// safety-net poll (10 s by default, far later than a 1 s backoff). Instants
/// at or before `now` are ignored: such a target is due already and waits
/// for a free slot, which a task event announces, so it must not make the
/// loop spin.
pub fn next_due(
    targets: &[OperationRunTarget],
    policy: &ConflictPolicy,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let ConflictPolicy::Retry { retry_timeout, .. } = policy;
    let mut due: Option<DateTime<Utc>> = None;
    let mut consider = |at: DateTime<Utc>| {
        if at > now && due.is_none_or(|d| at < d) {
            due = Some(at);
        }
    };
    for target in targets {
        match target.status {
            TargetStatus::Blocked => {
                if let Some(at) = target.retry_after {
                    consider(at);
                }
                if let Some(state) = &target.retry_state {
                    consider(add(state.blocked_since, *retry_timeout));
                }
            }
            TargetStatus::Claimed => {
                if let Some(at) = target.retry_after {
                    consider(at);
                }
            }
            _ => {}
        }
    }
    due
}

/// What a rack conflict did to a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflictOutcome {
    pub delay: Duration,
    pub retry_after: DateTime<Utc>,
    pub retry_state: RetryState,
    /// The streak has already lasted `retry_timeout`: the next pass will
    /// pause the run (the run row is not locked after commit, so this only
    /// tells the engine to wake the dispatcher).
    pub timed_out: bool,
}

/// A submission was rejected by a rack conflict (§3.9 with D1): the target
/// is blocked with the error text, backing off from its *current* retry
/// state — which claiming kept — so the delay doubles across claims and
/// `blocked_since` stays the first conflict of the streak.
pub fn on_conflict(
    target: &mut OperationRunTarget,
    policy: &ConflictPolicy,
    error: &str,
    now: DateTime<Utc>,
) -> ConflictOutcome {
    let previous = target.retry_state.as_ref();
    let delay_secs = next_retry_delay_secs(previous, policy);
    let retry_state = RetryState {
        blocked_since: previous.map_or(now, |s| s.blocked_since),
        attempts: previous.map_or(0, |s| s.attempts.max(0)).saturating_add(1),
        last_retry_delay_seconds: delay_secs,
    };
    let delay = Duration::from_secs(u64::try_from(delay_secs).unwrap_or(1));
    let retry_after = add(now, delay);
    target.status = TargetStatus::Blocked;
    target.task_id = None;
    target.message = error.to_string();
    target.retry_after = Some(retry_after);
    target.retry_state = Some(retry_state.clone());
    target.updated_at = now;
    ConflictOutcome {
        delay,
        retry_after,
        timed_out: conflict_timed_out(retry_state.blocked_since, policy, now),
        retry_state,
    }
}

/// The child task was created (§3.7): the target is submitted with it and
/// its conflict streak is over (D1), so retry fields are cleared.
pub fn on_submitted(target: &mut OperationRunTarget, task_id: Uuid, now: DateTime<Utc>) {
    target.status = TargetStatus::Submitted;
    target.task_id = Some(task_id);
    target.message = messages::SUBMITTED.into();
    target.retry_after = None;
    target.retry_state = None;
    target.updated_at = now;
}

/// A submission error that is not a rack conflict: the target fails with
/// the error text (§3.7).
pub fn on_submit_failed(target: &mut OperationRunTarget, error: &str, now: DateTime<Utc>) {
    fail_target(target, error, now);
}

/// What the task manager answered to one submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitResult<'a> {
    /// Success, with the ids it returned (expected: exactly one, non-nil).
    Tasks(&'a [Uuid]),
    /// The task manager's rack-conflict error, with its text.
    Conflict(&'a str),
    /// Any other error, with its text.
    Error(&'a str),
}

/// Where a submission left the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmitEffect {
    /// Submitted with an active task.
    Active(Uuid),
    Blocked(ConflictOutcome),
    Failed,
}

impl SubmitEffect {
    /// Anything but an active task frees a slot, which is what triggers the
    /// second attempt of a pass (§3.2 step 8).
    pub fn started_active_task(&self) -> bool {
        matches!(self, SubmitEffect::Active(_))
    }
}

/// Applies one submission's result to its claimed target (§3.7).
pub fn on_submit_result(
    target: &mut OperationRunTarget,
    result: SubmitResult<'_>,
    policy: &ConflictPolicy,
    now: DateTime<Utc>,
) -> SubmitEffect {
    match result {
        SubmitResult::Tasks([id]) if !id.is_nil() => {
            on_submitted(target, *id, now);
            SubmitEffect::Active(*id)
        }
        SubmitResult::Tasks(_) => {
            fail_target(target, messages::NOT_EXACTLY_ONE_TASK, now);
            SubmitEffect::Failed
        }
        SubmitResult::Conflict(error) => {
            SubmitEffect::Blocked(on_conflict(target, policy, error, now))
        }
        SubmitResult::Error(error) => {
            fail_target(target, error, now);
            SubmitEffect::Failed
        }
    }
}

// ---------------------------------------------------------------------------
// §4.2–4.5 Manual controls
// ---------------------------------------------------------------------------

/// Why a manual control does not apply; the text after the common prefix
/// is the reference's detail (§4.1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("operation run is not in a valid state for the requested operation: {}", self.detail())]
pub enum ControlError {
    Terminal { id: Uuid, status: RunStatus },
    NotPaused { id: Uuid },
    PausedAtPhaseGate { id: Uuid },
    NotAtPhaseGate { id: Uuid },
    PhaseNotComplete { phase_index: i32 },
    FinalPhase { phase_index: i32 },
    ExpectedPhaseMismatch { expected: i32, next: i32 },
}

impl ControlError {
    pub fn detail(&self) -> String {
        match self {
            ControlError::Terminal { id, status } => format!("{id} is in terminal state {status}"),
            ControlError::NotPaused { id } => format!("{id} is not paused"),
            ControlError::PausedAtPhaseGate { id } => {
                format!("{id} is paused at a phase gate; use AdvanceOperationRunPhase")
            }
            ControlError::NotAtPhaseGate { id } => format!("{id} is not paused at a phase gate"),
            ControlError::PhaseNotComplete { phase_index } => {
                format!("phase {phase_index} is not complete")
            }
            ControlError::FinalPhase { phase_index } => {
                format!("phase {phase_index} is the final phase")
            }
            ControlError::ExpectedPhaseMismatch { expected, next } => {
                format!("expected phase {expected}, next phase is {next}")
            }
        }
    }
}

/// The run after a manual control. `changed == false` means no write: the
/// run is returned exactly as given.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlOutcome {
    pub run: OperationRun,
    pub changed: bool,
}

impl ControlOutcome {
    fn unchanged(run: &OperationRun) -> ControlOutcome {
        ControlOutcome {
            run: run.clone(),
            changed: false,
        }
    }

    fn edit(
        run: &OperationRun,
        now: DateTime<Utc>,
        f: impl FnOnce(&mut OperationRun),
    ) -> ControlOutcome {
        let mut next = run.clone();
        f(&mut next);
        let changed = stamp(&mut next, run, now);
        ControlOutcome { run: next, changed }
    }
}

/// PauseOperationRun (§4.2): terminal → error; already paused (any reason)
/// → unchanged, so a gate's reason is not overwritten by the operator's;
/// pending/running → paused by operator. Targets are never touched.
pub fn pause(run: &OperationRun, now: DateTime<Utc>) -> Result<ControlOutcome, ControlError> {
    if run.status.is_terminal() {
        return Err(ControlError::Terminal {
            id: run.id,
            status: run.status,
        });
    }
    if run.status == RunStatus::Paused {
        return Ok(ControlOutcome::unchanged(run));
    }
    Ok(ControlOutcome::edit(run, now, |r| {
        pause_with(r, RunReason::OperatorPaused, messages::PAUSED_BY_OPERATOR)
    }))
}

/// Records the terminal status the targets imply, if any (§4.3, §4.4): a
/// run whose last phase finished while paused must not go back to running
/// just to be completed by the next pass.
fn implied_terminal(
    run: &OperationRun,
    summary: &PhaseSummary,
    now: DateTime<Utc>,
) -> Option<ControlOutcome> {
    let status = summary.terminal_run_status()?;
    let message = terminal_message(status).unwrap_or_default();
    Some(ControlOutcome::edit(run, now, |r| {
        finish(r, status, message, now)
    }))
}

/// ResumeOperationRun (§4.3). Safety gates are not checked here: the next
/// dispatcher pass re-evaluates them (and may pause again).
pub fn resume(
    run: &OperationRun,
    summary: &PhaseSummary,
    now: DateTime<Utc>,
) -> Result<ControlOutcome, ControlError> {
    if run.status != RunStatus::Paused {
        return Err(ControlError::NotPaused { id: run.id });
    }
    if run.reason == RunReason::PhaseGate {
        return Err(ControlError::PausedAtPhaseGate { id: run.id });
    }
    if let Some(outcome) = implied_terminal(run, summary, now) {
        return Ok(outcome);
    }
    Ok(ControlOutcome::edit(run, now, |r| {
        enter_running(r, now);
        r.status_message = messages::RESUMED.into();
    }))
}

/// AdvanceOperationRunPhase (§4.4). `expected_phase_index` absent, 0 or
/// negative means "no check" (0 cannot be a next phase, and proto3 cannot
/// tell an explicit 0 from unset on older clients). An implied terminal
/// status wins over every other check, including the expected index.
pub fn advance(
    run: &OperationRun,
    summary: &PhaseSummary,
    expected_phase_index: Option<i32>,
    now: DateTime<Utc>,
) -> Result<ControlOutcome, ControlError> {
    if run.status != RunStatus::Paused || run.reason != RunReason::PhaseGate {
        return Err(ControlError::NotAtPhaseGate { id: run.id });
    }
    if let Some(outcome) = implied_terminal(run, summary, now) {
        return Ok(outcome);
    }
    let current = summary.current_phase_index();
    if !summary.current_phase_terminal() {
        return Err(ControlError::PhaseNotComplete {
            phase_index: current,
        });
    }
    if !summary.has_next_phase() {
        return Err(ControlError::FinalPhase {
            phase_index: current,
        });
    }
    let next = current + 1;
    if let Some(expected) = expected_phase_index.filter(|e| *e > 0)
        && expected != next
    {
        return Err(ControlError::ExpectedPhaseMismatch { expected, next });
    }
    Ok(ControlOutcome::edit(run, now, |r| {
        r.current_phase_index = next;
        enter_running(r, now);
        r.status_message = format!("advanced to phase {next}");
    }))
}

/// CancelOperationRun (§4.5). It cannot fail: a terminal run (including an
/// already cancelled one) is returned unchanged, anything else is cancelled.
/// Targets are not modified; see [`tasks_to_cancel`] for the best-effort
/// child cancellation after commit.
pub fn cancel(run: &OperationRun, reason: &str, now: DateTime<Utc>) -> ControlOutcome {
    if run.status.is_terminal() {
        return ControlOutcome::unchanged(run);
    }
    let reason = reason.trim();
    let message = if reason.is_empty() {
        messages::CANCELLED.to_string()
    } else {
        format!("{}: {reason}", messages::CANCELLED)
    };
    ControlOutcome::edit(run, now, |r| finish(r, RunStatus::Cancelled, &message, now))
}

/// The child tasks a committed cancel asks to stop: those of non-terminal
/// current-phase targets that have one, in the given (sequence) order.
pub fn tasks_to_cancel(current_targets: &[OperationRunTarget]) -> Vec<Uuid> {
    current_targets
        .iter()
        .filter(|t| !t.status.is_terminal())
        .filter_map(|t| t.task_id)
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ComponentsByType;
    use crate::run::{
        AdvancePolicy, FirmwarePayload, OPERATION_CODE_UPGRADE, OPERATION_TYPE_FIRMWARE_CONTROL,
        OperationTemplate, OrderingPolicy, PhasePlan, PhasePolicy, RunConfiguration, SafetyPolicy,
        Selector, TargetScope,
    };

    use RunStatus as R;
    use TargetStatus as T;

    fn t0() -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000, 0).unwrap()
    }

    fn at(seconds: i64) -> DateTime<Utc> {
        t0() + TimeDelta::seconds(seconds)
    }

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn target(sequence: i32, status: TargetStatus) -> OperationRunTarget {
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

    fn targets(statuses: &[TargetStatus]) -> Vec<OperationRunTarget> {
        statuses
            .iter()
            .enumerate()
            .map(|(i, s)| target(i as i32, *s))
            .collect()
    }

    fn retry(initial: u64, max: u64, timeout: u64) -> ConflictPolicy {
        ConflictPolicy::Retry {
            retry_timeout: Duration::from_secs(timeout),
            initial_retry_delay: Duration::from_secs(initial),
            max_retry_delay: Duration::from_secs(max),
        }
    }

    fn options(gates: Vec<SafetyGate>, auto_advance: bool) -> RunOptions {
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
    fn lenient() -> Vec<SafetyGate> {
        vec![SafetyGate::FailureCount {
            scope: GateScope::CumulativeRun,
            failure_threshold_count: 1000,
        }]
    }

    fn run(status: RunStatus, reason: RunReason, phase: i32, total: i32) -> OperationRun {
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

    fn running(phase: i32, total: i32) -> OperationRun {
        let mut r = run(R::Running, RunReason::None, phase, total);
        r.started_at = Some(t0());
        r
    }

    fn summary(
        phase: i32,
        total: i32,
        current: &[TargetStatus],
        earlier: EarlierPhases,
    ) -> PhaseSummary {
        PhaseSummary::new(phase, total, &targets(current), earlier)
    }

    /// Counting the settled rows instead of loading them gives the summary
    /// of the whole phase, for every phase of up to four rows (8^4 lists).
    #[test]
    fn summary_with_settled_counts_equals_summary_of_all_rows() {
        let statuses = [
            TargetStatus::Pending,
            TargetStatus::Blocked,
            TargetStatus::Submitted,
            TargetStatus::Completed,
            TargetStatus::Failed,
            TargetStatus::Terminated,
            TargetStatus::Skipped,
            TargetStatus::Claimed,
        ];
        let prior = earlier(6, 2, 1, 1);
        for len in 0..=4u32 {
            for code in 0..8usize.pow(len) {
                let list: Vec<TargetStatus> = (0..len)
                    .map(|i| statuses[(code / 8usize.pow(i)) % 8])
                    .collect();
                let rows = targets(&list);
                let (settled_rows, live): (Vec<_>, Vec<_>) =
                    rows.iter().cloned().partition(|t| t.status.is_terminal());
                let mut settled = EarlierPhases::default();
                for t in &settled_rows {
                    settled.selected += 1;
                    match t.status {
                        TargetStatus::Completed => settled.completed += 1,
                        TargetStatus::Failed => settled.failed += 1,
                        TargetStatus::Terminated => settled.terminated += 1,
                        _ => settled.skipped += 1,
                    }
                }
                assert_eq!(
                    PhaseSummary::with_settled(1, 3, &live, settled, prior),
                    PhaseSummary::new(1, 3, &rows, prior),
                    "{list:?}"
                );
            }
        }
    }

    fn earlier(selected: i32, completed: i32, failed: i32, terminated: i32) -> EarlierPhases {
        EarlierPhases {
            selected,
            completed,
            failed,
            terminated,
            skipped: 0,
        }
    }

    const NONE: EarlierPhases = EarlierPhases {
        selected: 0,
        completed: 0,
        failed: 0,
        terminated: 0,
        skipped: 0,
    };

    // ---- §3.3 reconciliation ------------------------------------------------

    #[test]
    fn task_status_maps_to_target_status() {
        let expected = [
            (TaskStatus::Pending, T::Submitted),
            (TaskStatus::Running, T::Submitted),
            (TaskStatus::Waiting, T::Submitted),
            (TaskStatus::Completed, T::Completed),
            (TaskStatus::Failed, T::Failed),
            (TaskStatus::Terminated, T::Terminated),
        ];
        assert_eq!(expected.len(), TaskStatus::ALL.len());
        for (task, want) in expected {
            assert_eq!(target_status_for_task(task), want);
            let mut t = target(0, T::Submitted);
            t.message = "submitted".into();
            let changed = reconcile_target(&mut t, task, "Running");
            assert!(changed, "{task}");
            assert_eq!((t.status, t.message.as_str()), (want, "Running"));
        }
    }

    #[test]
    fn reconcile_reports_change_only_when_status_or_message_differ() {
        let mut t = target(0, T::Submitted);
        t.message = "Running".into();
        assert!(!reconcile_target(&mut t, TaskStatus::Running, "Running"));
        assert!(reconcile_target(&mut t, TaskStatus::Running, "Pending"));
        assert_eq!(t.message, "Pending");
        assert!(reconcile_target(&mut t, TaskStatus::Completed, "Pending"));
        assert_eq!(t.status, T::Completed);
    }

    #[test]
    fn reconcile_skips_targets_without_task_or_already_terminal() {
        for status in [T::Pending, T::Claimed, T::Blocked, T::Submitted] {
            let mut t = target(0, status);
            t.task_id = None;
            assert!(!needs_reconcile(&t));
            let before = t.clone();
            assert!(!reconcile_target(&mut t, TaskStatus::Failed, "x"));
            assert_eq!(t, before);
        }
        for status in [T::Completed, T::Failed, T::Terminated, T::Skipped] {
            let mut t = target(0, status);
            t.task_id = Some(id(9));
            let before = t.clone();
            assert!(!reconcile_target(&mut t, TaskStatus::Running, "again"));
            assert_eq!(t, before);
        }
        assert!(needs_reconcile(&target(0, T::Submitted)));
    }

    // ---- §3.4 summary -----------------------------------------------------

    #[test]
    fn summary_counts_current_rows_and_earlier_aggregate() {
        let s = summary(
            2,
            3,
            &[
                T::Completed,
                T::Failed,
                T::Submitted,
                T::Skipped,
                T::Terminated,
            ],
            EarlierPhases {
                selected: 6,
                completed: 3,
                failed: 1,
                terminated: 1,
                skipped: 1,
            },
        );
        assert_eq!(s.current.phase_index, 2);
        assert_eq!(s.current.selected_targets, 5);
        assert_eq!(
            s.current.outcome_counts,
            OutcomeCounts {
                completed: 1,
                failed: 1,
                terminated: 1,
                skipped: 1
            }
        );
        assert_eq!(s.completed.phase_index, 1);
        assert_eq!(s.completed.selected_targets, 6);
        assert_eq!(s.selected_total(), 11);
        assert_eq!(s.failed_or_terminated_total(), 4);
        let c = s.cumulative();
        assert_eq!((c.phase_index, c.selected_targets), (2, 11));
        assert_eq!(c.outcome_counts.failed, 2);
        assert!(!s.current_phase_terminal());
        assert!(!s.has_next_phase());
        assert!(!s.all_terminal());
        assert_eq!(s.terminal_run_status(), None);
        // Earlier phase index never goes below 0.
        assert_eq!(summary(0, 1, &[T::Pending], NONE).completed.phase_index, 0);
    }

    #[test]
    fn summary_predicates() {
        // (phase, total, current rows) -> (terminal, has next, all terminal, empty)
        let cases: &[(i32, i32, &[TargetStatus], [bool; 4])] = &[
            (
                0,
                2,
                &[T::Completed, T::Skipped],
                [true, true, false, false],
            ),
            (
                0,
                2,
                &[T::Completed, T::Blocked],
                [false, true, false, false],
            ),
            (
                1,
                2,
                &[T::Failed, T::Terminated],
                [true, false, true, false],
            ),
            (1, 2, &[T::Failed, T::Claimed], [false, false, false, false]),
            (0, 1, &[], [false, false, false, true]),
            (0, 0, &[T::Completed], [true, false, false, false]),
            (3, 2, &[T::Completed], [true, false, true, false]),
        ];
        for (phase, total, rows, want) in cases {
            let s = summary(*phase, *total, rows, NONE);
            let got = [
                s.current_phase_terminal(),
                s.has_next_phase(),
                s.all_terminal(),
                s.current_phase_empty(),
            ];
            assert_eq!(got, *want, "phase {phase} of {total}: {rows:?}");
        }
    }

    #[test]
    fn terminal_run_status_from_outcomes() {
        let cases: &[(&[TargetStatus], EarlierPhases, Option<RunStatus>)] = &[
            (&[T::Completed, T::Completed], NONE, Some(R::Completed)),
            // Skipped is a success for this purpose.
            (&[T::Skipped, T::Completed], NONE, Some(R::Completed)),
            (&[T::Skipped], NONE, Some(R::Completed)),
            (
                &[T::Completed, T::Failed],
                NONE,
                Some(R::CompletedWithFailures),
            ),
            (
                &[T::Skipped, T::Terminated],
                NONE,
                Some(R::CompletedWithFailures),
            ),
            (&[T::Failed, T::Terminated], NONE, Some(R::Failed)),
            // Earlier phases count too.
            (
                &[T::Completed],
                earlier(2, 1, 1, 0),
                Some(R::CompletedWithFailures),
            ),
            (&[T::Failed], earlier(2, 0, 1, 1), Some(R::Failed)),
            (
                &[T::Failed],
                earlier(2, 2, 0, 0),
                Some(R::CompletedWithFailures),
            ),
            // Not terminal while a row is live.
            (&[T::Completed, T::Submitted], NONE, None),
        ];
        for (rows, before, want) in cases {
            let phase = i32::from(before.selected > 0);
            let s = summary(phase, phase + 1, rows, *before);
            assert_eq!(s.terminal_run_status(), *want, "{rows:?} {before:?}");
        }
        // Not the final phase: nothing implied yet.
        assert_eq!(
            summary(0, 2, &[T::Completed], NONE).terminal_run_status(),
            None
        );
    }

    #[test]
    fn summary_lists_blocked_streaks_in_sequence_order() {
        let mut rows = targets(&[T::Blocked, T::Blocked, T::Blocked, T::Claimed]);
        rows[0].retry_state = None; // legacy blocked row without state
        rows[1].retry_state = Some(RetryState {
            blocked_since: at(5),
            attempts: 1,
            last_retry_delay_seconds: 30,
        });
        rows[2].retry_state = Some(RetryState {
            blocked_since: at(1),
            attempts: 3,
            last_retry_delay_seconds: 120,
        });
        // A claimed row keeps its state (D1) but is not blocked right now.
        rows[3].retry_state = rows[2].retry_state.clone();
        rows.reverse();
        let s = PhaseSummary::new(0, 1, &rows, NONE);
        assert_eq!(
            s.blocked,
            vec![
                BlockedTarget {
                    target_id: id(1001),
                    blocked_since: at(5)
                },
                BlockedTarget {
                    target_id: id(1002),
                    blocked_since: at(1)
                },
            ]
        );
    }

    // ---- §3.8 gates --------------------------------------------------------

    fn rate(scope: GateScope, t: i32) -> SafetyGate {
        SafetyGate::FailureRate {
            scope,
            failure_threshold_percent: t,
        }
    }

    fn count(scope: GateScope, t: i32) -> SafetyGate {
        SafetyGate::FailureCount {
            scope,
            failure_threshold_count: t,
        }
    }

    /// `n` current rows of which `failed` failed, the rest pending.
    fn with_failures(n: usize, failed: usize, before: EarlierPhases) -> PhaseSummary {
        let mut rows = vec![T::Pending; n];
        rows[..failed].fill(T::Failed);
        let phase = i32::from(before.selected > 0);
        summary(phase, phase + 1, &rows, before)
    }

    #[test]
    fn failure_rate_current_phase_threshold_is_inclusive() {
        let gate = rate(GateScope::CurrentPhase, 20);
        assert_eq!(gate_trip(&gate, &with_failures(10, 1, NONE)), None);
        assert_eq!(
            gate_trip(&gate, &with_failures(10, 2, NONE)).unwrap(),
            "failure_rate safety gate tripped for current_phase: 2/10 targets failed (20%, threshold 20%)"
        );
        assert_eq!(
            gate_trip(&gate, &with_failures(10, 3, NONE)).unwrap(),
            "failure_rate safety gate tripped for current_phase: 3/10 targets failed (30%, threshold 20%)"
        );
    }

    #[test]
    fn failure_rate_compares_exactly_and_floors_the_percentage() {
        // 1/3 = 33.3%: trips at 33, not at 34; the text shows 33%.
        assert_eq!(
            gate_trip(
                &rate(GateScope::CurrentPhase, 33),
                &with_failures(3, 1, NONE)
            )
            .unwrap(),
            "failure_rate safety gate tripped for current_phase: 1/3 targets failed (33%, threshold 33%)"
        );
        assert_eq!(
            gate_trip(
                &rate(GateScope::CurrentPhase, 34),
                &with_failures(3, 1, NONE)
            ),
            None
        );
        // 2/3 = 66.7% floors to 66 but still trips at 67? No: 200 < 201.
        assert_eq!(
            gate_trip(
                &rate(GateScope::CurrentPhase, 67),
                &with_failures(3, 2, NONE)
            ),
            None
        );
        assert_eq!(
            gate_trip(
                &rate(GateScope::CurrentPhase, 66),
                &with_failures(3, 2, NONE)
            )
            .unwrap(),
            "failure_rate safety gate tripped for current_phase: 2/3 targets failed (66%, threshold 66%)"
        );
        assert_eq!(
            gate_trip(
                &rate(GateScope::CurrentPhase, 100),
                &with_failures(4, 4, NONE)
            )
            .unwrap(),
            "failure_rate safety gate tripped for current_phase: 4/4 targets failed (100%, threshold 100%)"
        );
    }

    #[test]
    fn failure_rate_needs_selected_targets() {
        let s = summary(0, 1, &[], NONE);
        assert_eq!(gate_trip(&rate(GateScope::CurrentPhase, 1), &s), None);
        assert_eq!(gate_trip(&rate(GateScope::CumulativeRun, 1), &s), None);
    }

    #[test]
    fn failure_count_threshold_is_inclusive() {
        let gate = count(GateScope::CurrentPhase, 2);
        assert_eq!(gate_trip(&gate, &with_failures(5, 1, NONE)), None);
        assert_eq!(
            gate_trip(&gate, &with_failures(5, 2, NONE)).unwrap(),
            "failure_count safety gate tripped for current_phase: 2/5 targets failed (threshold 2)"
        );
        assert_eq!(
            gate_trip(&gate, &with_failures(5, 3, NONE)).unwrap(),
            "failure_count safety gate tripped for current_phase: 3/5 targets failed (threshold 2)"
        );
    }

    #[test]
    fn cumulative_scope_adds_earlier_phases() {
        // Earlier: 2 of 5 failed; current: 1 of 5 failed → 3/10 cumulative.
        let s = with_failures(5, 1, earlier(5, 3, 2, 0));
        for (threshold, trips) in [(2, true), (3, true), (4, false)] {
            let got = gate_trip(&count(GateScope::CumulativeRun, threshold), &s);
            assert_eq!(got.is_some(), trips, "count {threshold}");
        }
        assert_eq!(
            gate_trip(&count(GateScope::CumulativeRun, 3), &s).unwrap(),
            "failure_count safety gate tripped for cumulative_run: 3/10 targets failed (threshold 3)"
        );
        assert_eq!(gate_trip(&count(GateScope::CurrentPhase, 2), &s), None);
        for (threshold, trips) in [(29, true), (30, true), (31, false)] {
            let got = gate_trip(&rate(GateScope::CumulativeRun, threshold), &s);
            assert_eq!(got.is_some(), trips, "rate {threshold}");
        }
        assert_eq!(
            gate_trip(&rate(GateScope::CumulativeRun, 30), &s).unwrap(),
            "failure_rate safety gate tripped for cumulative_run: 3/10 targets failed (30%, threshold 30%)"
        );
        // Current phase alone is 20%.
        assert_eq!(gate_trip(&rate(GateScope::CurrentPhase, 21), &s), None);
        assert!(gate_trip(&rate(GateScope::CurrentPhase, 20), &s).is_some());
    }

    #[test]
    fn only_failed_targets_count_toward_gates() {
        let s = summary(
            0,
            1,
            &[T::Terminated, T::Terminated, T::Skipped, T::Completed],
            earlier(3, 0, 0, 3),
        );
        assert_eq!(gate_trip(&count(GateScope::CumulativeRun, 1), &s), None);
        assert_eq!(gate_trip(&rate(GateScope::CumulativeRun, 1), &s), None);
    }

    #[test]
    fn first_tripped_gate_in_configured_order_wins() {
        let s = with_failures(4, 2, NONE);
        let gates = vec![
            count(GateScope::CurrentPhase, 3),
            rate(GateScope::CurrentPhase, 50),
            count(GateScope::CurrentPhase, 1),
        ];
        assert!(
            evaluate_gates(&gates, &s)
                .unwrap()
                .starts_with("failure_rate")
        );
        assert!(
            evaluate_gates(&gates[2..], &s)
                .unwrap()
                .starts_with("failure_count")
        );
        assert_eq!(evaluate_gates(&gates[..1], &s), None);
        assert_eq!(evaluate_gates(&[], &s), None);
    }

    // ---- §3.5 decisions ------------------------------------------------------

    fn ready(o: &RunOptions) -> Runtime<'_> {
        Runtime::Ready(o)
    }

    #[test]
    fn row1_invalid_configuration_fails_the_run() {
        let o = options(lenient(), false);
        let s = summary(0, 1, &[T::Pending], NONE);
        let d = decide(
            &running(0, 1),
            &s,
            Runtime::Invalid("options.max_concurrent_targets must be greater than 0".into()),
            t0(),
        );
        assert_eq!(
            d,
            Decision::Fail {
                message: "invalid operation run configuration: options.max_concurrent_targets must be greater than 0".into()
            }
        );
        // Rows 1 and 2 precede the terminal check of row 3.
        let done = run(R::Completed, RunReason::None, 0, 1);
        assert!(matches!(
            decide(&done, &s, Runtime::Invalid("x".into()), t0()),
            Decision::Fail { .. }
        ));
        assert_eq!(decide(&done, &s, ready(&o), t0()), Decision::NoOp);
    }

    #[test]
    fn row2_missing_runtime_fails_the_run() {
        let s = summary(0, 1, &[T::Pending], NONE);
        assert_eq!(
            decide(&running(0, 1), &s, Runtime::Missing, t0()),
            Decision::Fail {
                message: "invalid operation run configuration".into()
            }
        );
    }

    #[test]
    fn row3_terminal_runs_are_left_alone() {
        let o = options(lenient(), false);
        let s = summary(0, 1, &[T::Pending], NONE);
        for status in [
            R::Completed,
            R::CompletedWithFailures,
            R::Failed,
            R::Cancelled,
        ] {
            let r = run(status, RunReason::None, 0, 1);
            let d = decide(&r, &s, ready(&o), t0());
            assert_eq!(d, Decision::NoOp);
            let mut after = r.clone();
            assert!(!d.apply(&mut after, at(9)));
            assert_eq!(after, r);
        }
    }

    #[test]
    fn paused_runs_are_never_touched_by_the_dispatcher() {
        let o = options(lenient(), true);
        let s = summary(0, 2, &[T::Completed], NONE);
        for reason in [
            RunReason::OperatorPaused,
            RunReason::PhaseGate,
            RunReason::SafetyGate,
            RunReason::ConflictRetryTimeout,
        ] {
            let r = run(R::Paused, reason, 0, 2);
            assert_eq!(decide(&r, &s, ready(&o), t0()), Decision::NoOp);
            assert_eq!(decide(&r, &s, Runtime::Missing, t0()), Decision::NoOp);
        }
    }

    #[test]
    fn row4_empty_current_phase_fails_without_moving_the_pointer() {
        let o = options(lenient(), true);
        let s = summary(1, 3, &[], earlier(2, 2, 0, 0));
        let mut r = running(1, 3);
        let d = decide(&r, &s, ready(&o), t0());
        assert_eq!(
            d,
            Decision::Fail {
                message: "operation run phase 1 has no targets; persisted phase plan is invalid"
                    .into()
            }
        );
        assert!(d.apply(&mut r, at(5)));
        assert_eq!(r.current_phase_index, 1);
        assert_eq!((r.status, r.reason), (R::Failed, RunReason::None));
        assert_eq!(r.finished_at, Some(at(5)));
        // Row 4 precedes row 5 (also no targets at all).
        let s = summary(0, 1, &[], NONE);
        assert!(matches!(
            decide(&running(0, 1), &s, ready(&o), t0()),
            Decision::Fail { message } if message.starts_with("operation run phase 0 has no targets")
        ));
    }

    #[test]
    fn row5_no_targets_fails() {
        let o = options(lenient(), false);
        let s = summary(0, 0, &[], NONE);
        assert_eq!(
            decide(&run(R::Pending, RunReason::None, 0, 0), &s, ready(&o), t0()),
            Decision::Fail {
                message: "operation run has no targets".into()
            }
        );
    }

    #[test]
    fn row6_final_phase_terminal_records_the_outcome() {
        let o = options(lenient(), false);
        let cases: &[(&[TargetStatus], EarlierPhases, RunStatus, &str)] = &[
            (
                &[T::Completed, T::Skipped],
                earlier(1, 1, 0, 0),
                R::Completed,
                "operation run completed",
            ),
            (
                &[T::Completed, T::Failed],
                earlier(1, 1, 0, 0),
                R::CompletedWithFailures,
                "operation run completed with failed targets",
            ),
            (
                &[T::Failed, T::Terminated],
                earlier(1, 0, 0, 1),
                R::Failed,
                "operation run failed",
            ),
        ];
        for (rows, before, status, message) in cases {
            let s = summary(1, 2, rows, *before);
            let mut r = running(1, 2);
            let d = decide(&r, &s, ready(&o), at(7));
            assert_eq!(
                d,
                Decision::Complete {
                    status: *status,
                    message: (*message).into()
                }
            );
            assert!(d.apply(&mut r, at(7)));
            assert_eq!((r.status, r.reason), (*status, RunReason::None));
            assert_eq!(r.status_message, *message);
            assert_eq!(r.finished_at, Some(at(7)));
            assert_eq!(r.started_at, Some(t0()));
            assert_eq!(r.updated_at, at(7));
        }
    }

    #[test]
    fn row6_completion_precedes_gates_and_conflict_timeout() {
        // Every target failed: the gates would trip, but the run is over.
        let o = options(vec![count(GateScope::CurrentPhase, 1)], false);
        let s = summary(0, 1, &[T::Failed, T::Failed], NONE);
        assert!(matches!(
            decide(&running(0, 1), &s, ready(&o), t0()),
            Decision::Complete {
                status: R::Failed,
                ..
            }
        ));
    }

    fn blocked_since(sequence: i32, since: DateTime<Utc>) -> OperationRunTarget {
        let mut t = target(sequence, T::Blocked);
        t.retry_after = Some(since + TimeDelta::seconds(30));
        t.retry_state = Some(RetryState {
            blocked_since: since,
            attempts: 1,
            last_retry_delay_seconds: 30,
        });
        t
    }

    #[test]
    fn row7_conflict_timeout_pauses_exactly_at_retry_timeout() {
        let mut o = options(lenient(), false);
        o.conflict_policy = retry(30, 300, 3600);
        let rows = vec![
            target(0, T::Submitted),
            blocked_since(1, at(100)),
            blocked_since(2, t0()),
        ];
        let s = PhaseSummary::new(0, 1, &rows, NONE);
        // 1 s short of the timeout for the older streak: keep going.
        let d = decide(&running(0, 1), &s, ready(&o), at(3599));
        assert_eq!(
            d,
            Decision::Claim {
                max_concurrent_targets: 2
            }
        );
        let d = decide(&running(0, 1), &s, ready(&o), at(3600));
        let message = format!("target {} blocked by rack conflict for 1h0m0s", id(1002));
        assert_eq!(
            d,
            Decision::PauseConflictTimeout {
                target_id: id(1002),
                message: message.clone()
            }
        );
        // Both streaks over the timeout: the first in sequence order is named.
        let d = decide(&running(0, 1), &s, ready(&o), at(3700));
        assert!(
            matches!(d, Decision::PauseConflictTimeout { target_id, .. } if target_id == id(1001))
        );

        let mut r = running(0, 1);
        let d = decide(&r, &s, ready(&o), at(3600));
        assert!(d.apply(&mut r, at(3600)));
        assert_eq!(
            (r.status, r.reason),
            (R::Paused, RunReason::ConflictRetryTimeout)
        );
        assert_eq!(r.status_message, message);
        assert_eq!(r.started_at, Some(t0()));
        assert_eq!(r.finished_at, None);
    }

    #[test]
    fn row7_timeout_text_is_a_go_duration_and_precedes_gates() {
        let mut o = options(vec![count(GateScope::CurrentPhase, 1)], false);
        o.conflict_policy = retry(1, 8, 90);
        let rows = vec![target(0, T::Failed), blocked_since(1, t0())];
        let s = PhaseSummary::new(0, 1, &rows, NONE);
        assert_eq!(
            decide(&running(0, 1), &s, ready(&o), at(90)),
            Decision::PauseConflictTimeout {
                target_id: id(1001),
                message: format!("target {} blocked by rack conflict for 1m30s", id(1001))
            }
        );
        // Before the timeout the gate (row 8) answers.
        assert!(matches!(
            decide(&running(0, 1), &s, ready(&o), at(89)),
            Decision::PauseSafetyGate { .. }
        ));
    }

    #[test]
    fn row8_tripped_gate_pauses_before_phase_logic() {
        let o = options(vec![rate(GateScope::CurrentPhase, 50)], true);
        // Phase 0 of 2 terminal with half failed: gate beats auto-advance.
        let s = summary(0, 2, &[T::Completed, T::Failed], NONE);
        let mut r = running(0, 2);
        let d = decide(&r, &s, ready(&o), at(3));
        let message = "failure_rate safety gate tripped for current_phase: 1/2 targets failed (50%, threshold 50%)";
        assert_eq!(
            d,
            Decision::PauseSafetyGate {
                message: message.into()
            }
        );
        assert!(d.apply(&mut r, at(3)));
        assert_eq!((r.status, r.reason), (R::Paused, RunReason::SafetyGate));
        assert_eq!(r.status_message, message);
        assert_eq!(r.current_phase_index, 0);
        // Also mid-phase.
        let s = summary(0, 1, &[T::Failed, T::Submitted], NONE);
        assert!(matches!(
            decide(&running(0, 1), &s, ready(&o), t0()),
            Decision::PauseSafetyGate { .. }
        ));
    }

    #[test]
    fn row9_auto_advance_moves_the_pointer_without_claiming() {
        let o = options(lenient(), true);
        let s = summary(0, 3, &[T::Completed, T::Skipped], NONE);
        let mut r = running(0, 3);
        let d = decide(&r, &s, ready(&o), at(4));
        assert_eq!(
            d,
            Decision::AdvancePhase {
                next_phase_index: 1,
                message: "advanced to next phase".into()
            }
        );
        assert!(d.apply(&mut r, at(4)));
        assert_eq!(r.current_phase_index, 1);
        assert_eq!((r.status, r.reason), (R::Running, RunReason::None));
        assert_eq!(r.status_message, "advanced to next phase");
        assert_eq!(r.started_at, Some(t0()));
    }

    #[test]
    fn row10_manual_phase_gate_pauses() {
        let o = options(lenient(), false);
        let s = summary(1, 3, &[T::Completed, T::Failed], earlier(2, 2, 0, 0));
        let mut r = running(1, 3);
        let d = decide(&r, &s, ready(&o), at(4));
        assert_eq!(
            d,
            Decision::PausePhaseGate {
                message: "waiting for phase advance".into()
            }
        );
        assert!(d.apply(&mut r, at(4)));
        assert_eq!((r.status, r.reason), (R::Paused, RunReason::PhaseGate));
        assert_eq!(r.current_phase_index, 1);
        assert_eq!(r.status_message, "waiting for phase advance");
    }

    #[test]
    fn row11_otherwise_runs_and_claims() {
        let mut o = options(lenient(), false);
        o.max_concurrent_targets = 7;
        for rows in [
            &[T::Pending, T::Completed][..],
            &[T::Submitted][..],
            &[T::Blocked, T::Claimed][..],
        ] {
            let s = summary(0, 2, rows, NONE);
            let d = decide(&running(0, 2), &s, ready(&o), t0());
            assert_eq!(
                d,
                Decision::Claim {
                    max_concurrent_targets: 7
                }
            );
            assert_eq!(d.message(), None);
        }
        // Running with nothing to change: message kept, no write needed.
        let mut r = running(0, 2);
        assert!(
            !Decision::Claim {
                max_concurrent_targets: 7
            }
            .apply(&mut r, at(1))
        );
        assert_eq!(r.status_message, "before");
        assert_eq!(r.updated_at, t0());
    }

    #[test]
    fn d3_started_at_is_set_on_the_first_entry_into_running() {
        let o = options(lenient(), true);
        let claim = Decision::Claim {
            max_concurrent_targets: 2,
        };
        // pending → running by a claim pass.
        let mut r = run(R::Pending, RunReason::None, 0, 2);
        assert!(claim.apply(&mut r, at(1)));
        assert_eq!((r.status, r.started_at), (R::Running, Some(at(1))));
        // Later passes keep the first start.
        assert!(!claim.apply(&mut r, at(2)));
        assert_eq!(r.started_at, Some(at(1)));
        // pending → running by auto-advance.
        let s = summary(0, 2, &[T::Failed], NONE);
        let mut r = run(R::Pending, RunReason::None, 0, 2);
        let d = decide(&r, &s, ready(&o), at(3));
        assert!(matches!(d, Decision::AdvancePhase { .. }));
        d.apply(&mut r, at(3));
        assert_eq!(r.started_at, Some(at(3)));
        // pending → paused (operator) → resumed: the reference never stamps
        // this path; D3 does.
        let r = run(R::Pending, RunReason::None, 0, 1);
        let paused = pause(&r, at(4)).unwrap().run;
        assert_eq!(paused.started_at, None);
        let s = summary(0, 1, &[T::Pending], NONE);
        let resumed = resume(&paused, &s, at(5)).unwrap().run;
        assert_eq!(resumed.started_at, Some(at(5)));
        // pending → paused at a phase gate → advanced.
        let mut r = run(R::Pending, RunReason::None, 0, 2);
        let s = summary(0, 2, &[T::Completed], NONE);
        let gate = decide(&r, &s, ready(&options(lenient(), false)), at(6));
        gate.apply(&mut r, at(6));
        assert_eq!((r.reason, r.started_at), (RunReason::PhaseGate, None));
        let advanced = advance(&r, &s, None, at(7)).unwrap().run;
        assert_eq!(advanced.started_at, Some(at(7)));
        // Terminal and pause transitions never stamp it.
        let mut r = run(R::Pending, RunReason::None, 0, 1);
        Decision::Fail {
            message: "x".into(),
        }
        .apply(&mut r, at(8));
        assert_eq!(r.started_at, None);
    }

    #[test]
    fn decision_messages() {
        let d = Decision::PauseSafetyGate {
            message: "m".into(),
        };
        assert_eq!(d.message(), Some("m"));
        assert_eq!(Decision::NoOp.message(), None);
    }

    // ---- options check -------------------------------------------------------

    #[test]
    fn check_options_reports_the_create_messages() {
        let good = options(lenient(), false);
        assert_eq!(check_options(&good), Ok(()));
        assert_eq!(Runtime::from_options(&good), Runtime::Ready(&good));
        type Edit = Box<dyn Fn(&mut RunOptions)>;
        let cases: Vec<(Edit, &str)> = vec![
            (
                Box::new(|o| o.max_concurrent_targets = 0),
                "options.max_concurrent_targets must be greater than 0",
            ),
            (
                Box::new(|o| o.safety_policy.gates.clear()),
                "safety_policy must contain at least one gate",
            ),
            (
                Box::new(|o| {
                    o.safety_policy
                        .gates
                        .push(rate(GateScope::CurrentPhase, 101))
                }),
                "safety_policy.gates[1]: failure_rate.failure_threshold_percent must be between 1 and 100",
            ),
            (
                Box::new(|o| o.safety_policy.gates = vec![count(GateScope::CurrentPhase, 0)]),
                "safety_policy.gates[0]: failure_count.failure_threshold_count must be greater than 0",
            ),
            (
                Box::new(|o| {
                    o.conflict_policy = ConflictPolicy::Retry {
                        retry_timeout: Duration::ZERO,
                        initial_retry_delay: Duration::from_secs(1),
                        max_retry_delay: Duration::from_secs(1),
                    }
                }),
                "conflict_policy.retry: retry_timeout must be greater than 0",
            ),
            (
                Box::new(|o| o.conflict_policy = retry(0, 1, 1)),
                "conflict_policy.retry: initial_retry_delay must be greater than 0",
            ),
            (
                Box::new(|o| o.conflict_policy = retry(30, 10, 3600)),
                "conflict_policy.retry: max_retry_delay must be greater than or equal to initial_retry_delay",
            ),
        ];
        for (edit, message) in cases {
            let mut o = good.clone();
            edit(&mut o);
            assert_eq!(check_options(&o), Err(message.to_string()));
            let d = decide(
                &running(0, 1),
                &summary(0, 1, &[T::Pending], NONE),
                Runtime::from_options(&o),
                t0(),
            );
            assert_eq!(
                d,
                Decision::Fail {
                    message: format!("invalid operation run configuration: {message}")
                }
            );
        }
    }

    // ---- §3.6 claiming -------------------------------------------------------

    const LEASE: Duration = Duration::from_secs(30);

    #[test]
    fn classification_of_every_status() {
        let now = at(100);
        let with = |status: TargetStatus, task: bool, after: Option<i64>| {
            let mut t = target(0, status);
            t.task_id = task.then(|| id(5));
            t.retry_after = after.map(at);
            classify(&t, now)
        };
        use ClaimClass::*;
        assert_eq!(with(T::Pending, false, None), Candidate);
        assert_eq!(with(T::Submitted, true, None), Active);
        assert_eq!(with(T::Submitted, false, None), Candidate);
        assert_eq!(with(T::Claimed, false, Some(101)), Active);
        assert_eq!(with(T::Claimed, false, Some(100)), Candidate);
        assert_eq!(with(T::Claimed, false, Some(99)), Candidate);
        assert_eq!(with(T::Claimed, false, None), Candidate);
        assert_eq!(with(T::Blocked, false, Some(101)), WaitingBlocked);
        assert_eq!(with(T::Blocked, false, Some(100)), Candidate);
        assert_eq!(with(T::Blocked, false, None), Candidate);
        for s in [T::Completed, T::Failed, T::Terminated, T::Skipped] {
            assert_eq!(with(s, true, None), Done);
        }
    }

    #[test]
    fn claims_fill_free_slots_in_sequence_order() {
        let now = at(100);
        let mut rows = targets(&[
            T::Completed, // 0
            T::Submitted, // 1 active
            T::Claimed,   // 2 active (lease until 130)
            T::Pending,   // 3
            T::Pending,   // 4
            T::Pending,   // 5
        ]);
        rows[2].retry_after = Some(at(130));
        // Scrambled input order: sequence decides, not position.
        rows.reverse();
        let outcome = claim_targets(&mut rows, 4, now, LEASE, |t| Ok::<_, String>(t.id));
        assert_eq!(outcome.active, 2);
        let claimed: Vec<i32> = outcome
            .claimed
            .iter()
            .map(|(i, req)| {
                assert_eq!(*req, rows[*i].id);
                rows[*i].sequence_index
            })
            .collect();
        assert_eq!(claimed, vec![3, 4]);
        assert_eq!(
            outcome.run_message.as_deref(),
            Some("submitted 2 operation run targets")
        );
        let fifth = rows.iter().find(|t| t.sequence_index == 5).unwrap();
        assert_eq!(fifth.status, T::Pending);
        assert_eq!(active_count(&rows, now), 4);
        assert_eq!(outcome.changed(), {
            let mut v: Vec<usize> = outcome.claimed.iter().map(|(i, _)| *i).collect();
            v.sort_unstable();
            v
        });
    }

    #[test]
    fn claim_sets_lease_and_keeps_retry_state() {
        let now = at(100);
        let mut rows = vec![blocked_since(0, t0())];
        rows[0].retry_after = Some(now);
        rows[0].message = "rack busy".into();
        let state = rows[0].retry_state.clone();
        assert_eq!(plan_claims(&mut rows, 1, now, LEASE), vec![0]);
        let t = &rows[0];
        assert_eq!(t.status, T::Claimed);
        assert_eq!(t.task_id, None);
        assert_eq!(t.message, "claimed for submission");
        assert_eq!(t.retry_after, Some(at(130)));
        assert_eq!(t.retry_state, state, "D1: claims keep the streak");
        assert_eq!(t.updated_at, now);
    }

    #[test]
    fn expired_leases_are_reclaimed_and_unexpired_ones_hold_quota() {
        let mut rows = targets(&[T::Claimed, T::Claimed, T::Pending]);
        rows[0].retry_after = Some(at(100)); // expires exactly now
        rows[1].retry_after = Some(at(101)); // still held
        assert_eq!(plan_claims(&mut rows, 2, at(100), LEASE), vec![0]);
        assert_eq!(rows[0].retry_after, Some(at(130)));
        assert_eq!(rows[2].status, T::Pending);
        // Nothing free now: both leases live.
        let out = claim_targets(&mut rows, 2, at(100), LEASE, |_| Ok::<_, String>(()));
        assert!(out.claimed.is_empty());
        assert_eq!(
            out.run_message.as_deref(),
            Some("waiting for active targets quota")
        );
    }

    #[test]
    fn blocked_targets_wait_for_their_backoff() {
        let now = at(100);
        let mut rows = vec![
            blocked_since(0, t0()),
            blocked_since(1, t0()),
            target(2, T::Pending),
        ];
        rows[0].retry_after = Some(at(101)); // not due
        rows[1].retry_after = Some(at(100)); // due
        let out = claim_targets(&mut rows, 5, now, LEASE, |_| Ok::<_, String>(()));
        let claimed: Vec<usize> = out.claimed.iter().map(|(i, _)| *i).collect();
        assert_eq!(claimed, vec![1, 2]);
        assert_eq!(out.waiting_blocked, 1);
        assert_eq!(rows[0].status, T::Blocked);
        assert_eq!(
            out.run_message.as_deref(),
            Some("submitted 2 operation run targets; 1 target waiting on rack conflicts")
        );
    }

    #[test]
    fn legacy_submitted_without_task_is_reclaimed() {
        let mut rows = targets(&[T::Submitted]);
        rows[0].task_id = None;
        assert_eq!(plan_claims(&mut rows, 1, t0(), LEASE), vec![0]);
        assert_eq!(rows[0].status, T::Claimed);
    }

    #[test]
    fn quota_exhausted_claims_nothing_and_says_so() {
        for max in [0, 1, 2] {
            let mut rows = targets(&[T::Submitted, T::Submitted, T::Pending]);
            let before = rows.clone();
            let out = claim_targets(&mut rows, max, t0(), LEASE, |_| Ok::<_, String>(()));
            assert!(out.claimed.is_empty() && out.failed.is_empty());
            assert_eq!(
                out.run_message.as_deref(),
                Some("waiting for active targets quota")
            );
            assert_eq!(rows, before);
        }
    }

    #[test]
    fn build_failures_fail_the_target_without_using_a_slot() {
        let mut rows = targets(&[T::Pending, T::Pending, T::Pending, T::Pending]);
        let out = claim_targets(&mut rows, 2, t0(), LEASE, |t| {
            if t.sequence_index == 1 {
                Err("no components to target".to_string())
            } else {
                Ok(t.sequence_index)
            }
        });
        assert_eq!(out.claimed, vec![(0, 0), (2, 2)]);
        assert_eq!(out.failed, vec![1]);
        assert_eq!(out.changed(), vec![0, 1, 2]);
        assert_eq!(rows[1].status, T::Failed);
        assert_eq!(rows[1].message, "no components to target");
        assert_eq!(rows[3].status, T::Pending);
        assert_eq!(
            out.run_message.as_deref(),
            Some("submitted 2 operation run targets")
        );
    }

    #[test]
    fn claim_messages() {
        assert_eq!(claim_message(0, 0), None);
        assert_eq!(
            claim_message(1, 0).as_deref(),
            Some("submitted 1 operation run target")
        );
        assert_eq!(
            claim_message(3, 0).as_deref(),
            Some("submitted 3 operation run targets")
        );
        assert_eq!(
            claim_message(0, 1).as_deref(),
            Some("1 target waiting on rack conflicts")
        );
        assert_eq!(
            claim_message(0, 2).as_deref(),
            Some("2 targets waiting on rack conflicts")
        );
        assert_eq!(
            claim_message(1, 1).as_deref(),
            Some("submitted 1 operation run target; 1 target waiting on rack conflicts")
        );
        // Free quota but nothing to claim and nothing waiting: message kept.
        let mut rows = targets(&[T::Completed]);
        let out = claim_targets(&mut rows, 1, t0(), LEASE, |_| Ok::<_, String>(()));
        assert_eq!(out.run_message, None);
    }

    fn any_target() -> impl Strategy<Value = (u8, bool, Option<i64>)> {
        (0u8..8, any::<bool>(), proptest::option::of(-60i64..60))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn quota_is_never_exceeded(
            rows in proptest::collection::vec(any_target(), 0..24),
            max in -1i32..8,
            failing in proptest::collection::vec(any::<bool>(), 24),
        ) {
            let now = at(1000);
            let mut targets: Vec<OperationRunTarget> = rows
                .iter()
                .enumerate()
                .map(|(i, (s, task, after))| {
                    let mut t = target(i as i32, T::ALL[*s as usize]);
                    t.task_id = task.then(|| id(7000 + i as u128));
                    t.retry_after = after.map(|d| now + TimeDelta::seconds(d));
                    t
                })
                .collect();
            let before = targets.clone();
            let active_before = active_count(&targets, now);
            let out = claim_targets(&mut targets, max, now, LEASE, |t| {
                if failing[t.sequence_index as usize] { Err("bad".to_string()) } else { Ok(()) }
            });
            let free = (i64::from(max) - active_before as i64).max(0) as usize;
            prop_assert!(out.claimed.len() <= free);
            let active_after = active_count(&targets, now);
            prop_assert_eq!(active_after, active_before + out.claimed.len());
            if active_before <= max.max(0) as usize {
                prop_assert!(active_after <= max.max(0) as usize);
            }
            // Only candidates were touched, in sequence order; any candidate
            // left unclaimed means the quota is full.
            let mut touched: Vec<usize> = out.changed();
            touched.dedup();
            for &i in &touched {
                prop_assert_eq!(classify(&before[i], now), ClaimClass::Candidate);
            }
            let claimed: Vec<usize> = out.claimed.iter().map(|(i, _)| *i).collect();
            prop_assert!(claimed.windows(2).all(|w| w[0] < w[1]));
            let untouched_candidates = (0..before.len())
                .filter(|i| !touched.contains(i))
                .filter(|&i| classify(&before[i], now) == ClaimClass::Candidate)
                .count();
            if untouched_candidates > 0 {
                prop_assert!(free == 0 || out.claimed.len() == free);
            }
            for (i, t) in targets.iter().enumerate() {
                if !touched.contains(&i) {
                    prop_assert_eq!(t, &before[i]);
                }
            }
        }
    }

    // ---- §3.7 / §3.9 submission outcomes and backoff (D1) -------------------------

    /// Conflict → claim → conflict … with the dispatcher claiming as soon as
    /// each backoff is due.
    #[test]
    fn backoff_doubles_to_the_cap_across_claims() {
        let policy = retry(1, 8, 3600);
        let mut t = target(0, T::Pending);
        let mut now = t0();
        let mut delays = Vec::new();
        for attempt in 1..=5 {
            assert_eq!(
                plan_claims(std::slice::from_mut(&mut t), 1, now, LEASE),
                vec![0]
            );
            let out = on_conflict(&mut t, &policy, "rack has an active conflicting task", now);
            delays.push(out.delay.as_secs());
            assert_eq!(t.status, T::Blocked);
            assert_eq!(t.task_id, None);
            assert_eq!(t.message, "rack has an active conflicting task");
            assert_eq!(
                t.retry_after,
                Some(now + TimeDelta::seconds(out.delay.as_secs() as i64))
            );
            assert_eq!(out.retry_after, t.retry_after.unwrap());
            let state = t.retry_state.clone().unwrap();
            assert_eq!(state, out.retry_state);
            assert_eq!(
                state.blocked_since,
                t0(),
                "streak starts at the first conflict"
            );
            assert_eq!(state.attempts, attempt);
            assert_eq!(state.last_retry_delay_seconds, out.delay.as_secs() as i64);
            assert!(!out.timed_out);
            // Not claimable a moment before the backoff is due.
            let early = out.retry_after - TimeDelta::milliseconds(1);
            assert_eq!(classify(&t, early), ClaimClass::WaitingBlocked);
            now = out.retry_after;
        }
        assert_eq!(delays, vec![1, 2, 4, 8, 8]);
    }

    #[test]
    fn backoff_with_default_policy() {
        let policy = ConflictPolicy::default();
        let mut t = target(0, T::Claimed);
        let delays: Vec<u64> = (0..7)
            .map(|_| {
                on_conflict(&mut t, &policy, "conflict", t0())
                    .delay
                    .as_secs()
            })
            .collect();
        assert_eq!(delays, vec![30, 60, 120, 240, 300, 300, 300]);
    }

    #[test]
    fn a_successful_submission_ends_the_streak() {
        let policy = retry(1, 8, 3600);
        let mut t = target(0, T::Claimed);
        on_conflict(&mut t, &policy, "conflict", t0());
        on_conflict(&mut t, &policy, "conflict", at(1));
        assert_eq!(t.retry_state.as_ref().unwrap().attempts, 2);
        on_submitted(&mut t, id(42), at(5));
        assert_eq!(t.status, T::Submitted);
        assert_eq!(t.task_id, Some(id(42)));
        assert_eq!(t.message, "submitted");
        assert_eq!((t.retry_after, t.retry_state.clone()), (None, None));
        assert_eq!(t.updated_at, at(5));
        // A later conflict starts a new streak.
        let out = on_conflict(&mut t, &policy, "conflict", at(10));
        assert_eq!(out.delay, Duration::from_secs(1));
        assert_eq!(out.retry_state.blocked_since, at(10));
        assert_eq!(out.retry_state.attempts, 1);
    }

    #[test]
    fn streak_times_out_exactly_at_retry_timeout() {
        let policy = retry(30, 300, 600);
        let mut o = options(lenient(), false);
        o.conflict_policy = policy.clone();
        let mut rows = targets(&[T::Pending, T::Pending]);
        let mut now = t0();
        // Keep re-blocking target 0 whenever it is due.
        loop {
            let out = claim_targets(&mut rows, 1, now, LEASE, |_| Ok::<_, String>(()));
            if let Some((i, ())) = out.claimed.first() {
                let c = on_conflict(&mut rows[*i], &policy, "conflict", now);
                assert_eq!(c.timed_out, now - t0() >= TimeDelta::seconds(600));
            }
            now = rows[0].retry_after.unwrap();
            let s = PhaseSummary::new(0, 1, &rows, NONE);
            let d = decide(&running(0, 1), &s, ready(&o), now);
            if now - t0() >= TimeDelta::seconds(600) {
                assert_eq!(
                    d,
                    Decision::PauseConflictTimeout {
                        target_id: id(1000),
                        message: format!("target {} blocked by rack conflict for 10m0s", id(1000))
                    }
                );
                break;
            }
            assert!(matches!(d, Decision::Claim { .. }), "{now}");
        }
        // Backoff 30, 60, 120, 240 → blocked at 0, 30, 90, 210, due at 450,
        // then 300 → due at 750: the first pass at or after 600.
        assert_eq!(now, at(750));
        assert_eq!(rows[0].retry_state.as_ref().unwrap().attempts, 5);
        // Exactly at the timeout, directly.
        let s = PhaseSummary::new(0, 1, &rows, NONE);
        assert!(conflict_timeout(&s, &policy, at(599)).is_none());
        assert!(conflict_timeout(&s, &policy, at(600)).is_some());
        assert!(conflict_timed_out(t0(), &policy, at(600)));
        assert!(!conflict_timed_out(
            t0(),
            &policy,
            at(600) - TimeDelta::nanoseconds(1)
        ));
    }

    #[test]
    fn next_due_is_the_earliest_future_backoff_timeout_or_lease() {
        let policy = retry(1, 8, 5);
        let mut rows = targets(&[T::Pending, T::Submitted, T::Completed]);
        assert_eq!(next_due(&rows, &policy, t0()), None, "nothing on the clock");

        // A blocked target: its backoff end, or its streak's timeout if sooner.
        let mut blocked = target(3, T::Claimed);
        on_conflict(&mut blocked, &policy, "conflict", t0());
        rows.push(blocked);
        assert_eq!(next_due(&rows, &policy, t0()), Some(at(1)));
        rows[3].retry_after = Some(at(8));
        assert_eq!(next_due(&rows, &policy, t0()), Some(at(5)), "timeout first");
        // Instants not after `now` are ignored (due already: no spinning).
        assert_eq!(next_due(&rows, &policy, at(5)), Some(at(8)));
        assert_eq!(next_due(&rows, &policy, at(8)), None);

        // A live claim lease counts; an expired one does not.
        let mut claimed = target(4, T::Pending);
        claim_target(&mut claimed, t0(), Duration::from_secs(3));
        rows.push(claimed);
        assert_eq!(next_due(&rows, &policy, at(2)), Some(at(3)));
        assert_eq!(next_due(&rows, &policy, at(3)), Some(at(5)));
    }

    #[test]
    fn backoff_edge_cases() {
        // Sub-second policies still back off by whole, growing seconds.
        let sub = ConflictPolicy::Retry {
            retry_timeout: Duration::from_secs(60),
            initial_retry_delay: Duration::from_millis(200),
            max_retry_delay: Duration::from_millis(900),
        };
        assert_eq!(next_retry_delay_secs(None, &sub), 1);
        // Legacy state without a usable delay counts as the first block,
        // but keeps its start.
        let legacy = RetryState {
            blocked_since: t0(),
            attempts: 4,
            last_retry_delay_seconds: 0,
        };
        let policy = retry(5, 40, 3600);
        assert_eq!(next_retry_delay_secs(Some(&legacy), &policy), 5);
        let mut t = target(0, T::Claimed);
        t.retry_state = Some(legacy);
        let out = on_conflict(&mut t, &policy, "c", at(50));
        assert_eq!(out.retry_state.blocked_since, t0());
        assert_eq!(out.retry_state.attempts, 5);
        // A previous delay above a since-lowered cap is capped.
        let big = RetryState {
            blocked_since: t0(),
            attempts: 1,
            last_retry_delay_seconds: 1000,
        };
        assert_eq!(next_retry_delay_secs(Some(&big), &policy), 40);
        // The timed_out flag follows the streak, not this block.
        let policy = retry(5, 40, 60);
        let out = on_conflict(&mut t, &policy, "c", at(60));
        assert!(out.timed_out);
    }

    #[test]
    fn submission_results() {
        let policy = retry(1, 8, 60);
        let claimed = || {
            let mut t = target(0, T::Claimed);
            t.retry_after = Some(at(30));
            t
        };
        let mut t = claimed();
        let e = on_submit_result(&mut t, SubmitResult::Tasks(&[id(9)]), &policy, at(1));
        assert_eq!(e, SubmitEffect::Active(id(9)));
        assert!(e.started_active_task());
        assert_eq!(
            (t.status, t.task_id, t.message.as_str()),
            (T::Submitted, Some(id(9)), "submitted")
        );
        assert_eq!(t.retry_after, None);

        for ids in [&[][..], &[id(1), id(2)][..], &[Uuid::nil()][..]] {
            let mut t = claimed();
            let e = on_submit_result(&mut t, SubmitResult::Tasks(ids), &policy, at(1));
            assert_eq!(e, SubmitEffect::Failed);
            assert!(!e.started_active_task());
            assert_eq!(t.status, T::Failed);
            assert_eq!(t.message, "task submission did not return exactly one task");
            assert_eq!(t.task_id, None);
        }

        let mut t = claimed();
        let e = on_submit_result(&mut t, SubmitResult::Conflict("rack busy"), &policy, at(1));
        assert!(matches!(&e, SubmitEffect::Blocked(c) if c.delay == Duration::from_secs(1)));
        assert!(!e.started_active_task());
        assert_eq!((t.status, t.message.as_str()), (T::Blocked, "rack busy"));

        let mut t = claimed();
        t.retry_state = Some(RetryState {
            blocked_since: t0(),
            attempts: 2,
            last_retry_delay_seconds: 2,
        });
        let e = on_submit_result(
            &mut t,
            SubmitResult::Error("rule not found"),
            &policy,
            at(1),
        );
        assert_eq!(e, SubmitEffect::Failed);
        assert_eq!(
            (t.status, t.message.as_str()),
            (T::Failed, "rule not found")
        );
        assert_eq!((t.retry_after, t.retry_state), (None, None));

        let mut t = claimed();
        on_submit_failed(&mut t, "boom", at(2));
        assert_eq!((t.status, t.message.as_str()), (T::Failed, "boom"));
    }

    // ---- §4 manual controls ----------------------------------------------------

    const TERMINAL: [RunStatus; 4] = [
        R::Completed,
        R::CompletedWithFailures,
        R::Failed,
        R::Cancelled,
    ];
    const PAUSE_REASONS: [RunReason; 4] = [
        RunReason::OperatorPaused,
        RunReason::PhaseGate,
        RunReason::SafetyGate,
        RunReason::ConflictRetryTimeout,
    ];
    const PREFIX: &str = "operation run is not in a valid state for the requested operation: ";

    #[test]
    fn pause_rejects_terminal_runs() {
        for status in TERMINAL {
            let err = pause(&run(status, RunReason::None, 0, 1), t0()).unwrap_err();
            assert_eq!(err, ControlError::Terminal { id: id(1), status });
            assert_eq!(
                err.to_string(),
                format!("{PREFIX}{} is in terminal state {}", id(1), status.as_str())
            );
        }
        assert_eq!(
            ControlError::Terminal {
                id: id(1),
                status: R::CompletedWithFailures
            }
            .detail(),
            "00000000-0000-0000-0000-000000000001 is in terminal state completed_with_failures"
        );
    }

    #[test]
    fn pause_of_a_paused_run_keeps_its_reason() {
        for reason in PAUSE_REASONS {
            let mut r = run(R::Paused, reason, 0, 1);
            r.status_message = "why".into();
            let out = pause(&r, at(5)).unwrap();
            assert!(!out.changed);
            assert_eq!(out.run, r);
        }
    }

    #[test]
    fn pause_of_pending_or_running_is_an_operator_pause() {
        for r in [run(R::Pending, RunReason::None, 0, 1), running(0, 1)] {
            let out = pause(&r, at(5)).unwrap();
            assert!(out.changed);
            assert_eq!(
                (out.run.status, out.run.reason),
                (R::Paused, RunReason::OperatorPaused)
            );
            assert_eq!(out.run.status_message, "operation run paused by operator");
            assert_eq!(out.run.started_at, r.started_at);
            assert_eq!(out.run.finished_at, None);
            assert_eq!(out.run.updated_at, at(5));
        }
    }

    #[test]
    fn resume_preconditions() {
        let s = summary(0, 1, &[T::Pending], NONE);
        for r in [
            run(R::Pending, RunReason::None, 0, 1),
            running(0, 1),
            run(R::Completed, RunReason::None, 0, 1),
            run(R::Cancelled, RunReason::None, 0, 1),
        ] {
            let err = resume(&r, &s, t0()).unwrap_err();
            assert_eq!(err, ControlError::NotPaused { id: id(1) });
            assert_eq!(err.to_string(), format!("{PREFIX}{} is not paused", id(1)));
        }
        let err = resume(&run(R::Paused, RunReason::PhaseGate, 0, 1), &s, t0()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{PREFIX}{} is paused at a phase gate; use AdvanceOperationRunPhase",
                id(1)
            )
        );
    }

    #[test]
    fn resume_reopens_without_checking_gates() {
        // A failed target is present; gates are the dispatcher's business.
        let s = summary(0, 1, &[T::Failed, T::Pending], NONE);
        for reason in [
            RunReason::OperatorPaused,
            RunReason::SafetyGate,
            RunReason::ConflictRetryTimeout,
        ] {
            let mut r = run(R::Paused, reason, 0, 1);
            r.started_at = Some(t0());
            let out = resume(&r, &s, at(9)).unwrap();
            assert!(out.changed);
            assert_eq!(
                (out.run.status, out.run.reason),
                (R::Running, RunReason::None)
            );
            assert_eq!(out.run.status_message, "operation run resumed");
            assert_eq!(out.run.started_at, Some(t0()));
            assert_eq!(out.run.current_phase_index, 0);
            assert_eq!(out.run.finished_at, None);
        }
    }

    #[test]
    fn resume_records_an_implied_terminal_status() {
        let cases: &[(&[TargetStatus], RunStatus, &str)] = &[
            (&[T::Completed], R::Completed, "operation run completed"),
            (
                &[T::Completed, T::Terminated],
                R::CompletedWithFailures,
                "operation run completed with failed targets",
            ),
            (&[T::Failed], R::Failed, "operation run failed"),
        ];
        for (rows, status, message) in cases {
            let s = summary(0, 1, rows, NONE);
            let r = run(R::Paused, RunReason::SafetyGate, 0, 1);
            let out = resume(&r, &s, at(9)).unwrap();
            assert!(out.changed);
            assert_eq!((out.run.status, out.run.reason), (*status, RunReason::None));
            assert_eq!(out.run.status_message, *message);
            assert_eq!(out.run.finished_at, Some(at(9)));
        }
    }

    #[test]
    fn advance_requires_a_phase_gate() {
        let s = summary(0, 2, &[T::Completed], NONE);
        let mut cases = vec![
            run(R::Pending, RunReason::None, 0, 2),
            running(0, 2),
            run(R::Completed, RunReason::None, 0, 2),
        ];
        for reason in [
            RunReason::OperatorPaused,
            RunReason::SafetyGate,
            RunReason::ConflictRetryTimeout,
        ] {
            cases.push(run(R::Paused, reason, 0, 2));
        }
        for r in cases {
            let err = advance(&r, &s, None, t0()).unwrap_err();
            assert_eq!(err, ControlError::NotAtPhaseGate { id: id(1) });
            assert_eq!(
                err.to_string(),
                format!("{PREFIX}{} is not paused at a phase gate", id(1))
            );
        }
    }

    fn gated(phase: i32, total: i32) -> OperationRun {
        let mut r = run(R::Paused, RunReason::PhaseGate, phase, total);
        r.started_at = Some(t0());
        r
    }

    #[test]
    fn advance_opens_the_next_phase() {
        // A failed target does not matter: gates are not checked here.
        let s = summary(0, 3, &[T::Completed, T::Failed], NONE);
        for expected in [None, Some(0), Some(-1), Some(1)] {
            let out = advance(&gated(0, 3), &s, expected, at(9)).unwrap();
            assert!(out.changed);
            assert_eq!(out.run.current_phase_index, 1);
            assert_eq!(
                (out.run.status, out.run.reason),
                (R::Running, RunReason::None)
            );
            assert_eq!(out.run.status_message, "advanced to phase 1");
            assert_eq!(out.run.started_at, Some(t0()));
            assert_eq!(out.run.updated_at, at(9));
        }
        let s = summary(1, 3, &[T::Completed], earlier(2, 2, 0, 0));
        let out = advance(&gated(1, 3), &s, Some(2), at(9)).unwrap();
        assert_eq!(out.run.status_message, "advanced to phase 2");
    }

    #[test]
    fn advance_records_an_implied_terminal_status_before_other_checks() {
        // current = 1 of 2, all completed, expected 2 (would mismatch).
        let s = summary(1, 2, &[T::Completed], earlier(1, 1, 0, 0));
        let out = advance(&gated(1, 2), &s, Some(2), at(9)).unwrap();
        assert!(out.changed);
        assert_eq!(
            (out.run.status, out.run.reason),
            (R::Completed, RunReason::None)
        );
        assert_eq!(out.run.status_message, "operation run completed");
        assert_eq!(out.run.current_phase_index, 1);
        assert_eq!(out.run.finished_at, Some(at(9)));
    }

    #[test]
    fn advance_rejects_incomplete_final_and_mismatched_phases() {
        let s = summary(0, 2, &[T::Completed, T::Pending], NONE);
        let err = advance(&gated(0, 2), &s, Some(5), t0()).unwrap_err();
        assert_eq!(err.to_string(), format!("{PREFIX}phase 0 is not complete"));
        // "final phase" needs a terminal current phase without a next one
        // that implies no outcome: only a run without a persisted total.
        let s = summary(2, 0, &[T::Completed], earlier(4, 4, 0, 0));
        let err = advance(&gated(2, 0), &s, None, t0()).unwrap_err();
        assert_eq!(err, ControlError::FinalPhase { phase_index: 2 });
        assert_eq!(
            err.to_string(),
            format!("{PREFIX}phase 2 is the final phase")
        );
        // Expected index mismatches.
        let s = summary(0, 2, &[T::Completed], NONE);
        let err = advance(&gated(0, 2), &s, Some(2), t0()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{PREFIX}expected phase 2, next phase is 1")
        );
        // Phases 1–2 empty legacy phases: still "next phase is 1".
        let s = summary(0, 4, &[T::Completed], NONE);
        let err = advance(&gated(0, 4), &s, Some(3), t0()).unwrap_err();
        assert_eq!(
            err,
            ControlError::ExpectedPhaseMismatch {
                expected: 3,
                next: 1
            }
        );
    }

    #[test]
    fn cancel_leaves_terminal_runs_alone() {
        for status in TERMINAL {
            let r = run(status, RunReason::None, 0, 1);
            let out = cancel(&r, "stop", at(9));
            assert!(!out.changed);
            assert_eq!(out.run, r);
        }
    }

    #[test]
    fn cancel_with_and_without_a_reason() {
        let mut cases = vec![run(R::Pending, RunReason::None, 0, 1), running(0, 1)];
        cases.extend(PAUSE_REASONS.map(|reason| run(R::Paused, reason, 0, 1)));
        for r in cases {
            for (reason, message) in [
                ("", "operation run cancelled"),
                ("   ", "operation run cancelled"),
                ("  bad firmware \n", "operation run cancelled: bad firmware"),
            ] {
                let out = cancel(&r, reason, at(9));
                assert!(out.changed);
                assert_eq!(
                    (out.run.status, out.run.reason),
                    (R::Cancelled, RunReason::None)
                );
                assert_eq!(out.run.status_message, message);
                assert_eq!(out.run.finished_at, Some(at(9)));
                assert_eq!(out.run.started_at, r.started_at);
                assert_eq!(out.run.current_phase_index, r.current_phase_index);
            }
        }
    }

    #[test]
    fn cancel_asks_to_stop_live_current_phase_tasks() {
        let mut rows = targets(&[
            T::Submitted,
            T::Completed,
            T::Pending,
            T::Claimed,
            T::Submitted,
            T::Failed,
        ]);
        rows[3].task_id = None;
        assert_eq!(tasks_to_cancel(&rows), vec![id(3000), id(3004)]);
    }
}
