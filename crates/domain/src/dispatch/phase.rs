//! The phase summary of a locked run and its predicates (§3.4).

use super::*;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::test_support::*;

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
}
