//! The decision order of one dispatcher attempt (§3.5), the run options
//! check, and how a decision changes the run row (decision D3).

use super::*;

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
pub(super) fn finish(run: &mut OperationRun, status: RunStatus, message: &str, now: DateTime<Utc>) {
    run.status = status;
    run.reason = RunReason::None;
    run.status_message = message.to_string();
    run.finished_at = Some(now);
}

/// Pausing keeps started_at (§3.5).
pub(super) fn pause_with(run: &mut OperationRun, reason: RunReason, message: &str) {
    run.status = RunStatus::Paused;
    run.reason = reason;
    run.status_message = message.to_string();
}

/// → running, reason none. D3: `started_at` is set on the first entry into
/// running whatever the path (dispatcher, resume, advance), not only from
/// pending as the reference does, so a run paused while pending still gets
/// a start time.
pub(super) fn enter_running(run: &mut OperationRun, now: DateTime<Utc>) {
    run.status = RunStatus::Running;
    run.reason = RunReason::None;
    if run.started_at.is_none() {
        run.started_at = Some(now);
    }
}

pub(super) fn stamp(run: &mut OperationRun, before: &OperationRun, now: DateTime<Utc>) -> bool {
    let changed = run != before;
    if changed {
        run.updated_at = now;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::test_support::*;

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
}
