//! The manual controls: pause, resume, advance and cancel (§4.2–4.5).

use super::*;

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
    use super::*;
    use crate::dispatch::test_support::*;

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
