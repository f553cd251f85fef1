//! The safety gates and their exact messages (§3.8).

use super::*;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::test_support::*;

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
}
