//! The audit trail: who did what, when, to which run or object, and with
//! what outcome. An event is written by the API for every mutating call
//! (and every refused one), and by the run's own transaction for every
//! control — an operator's pause / resume / advance / cancel, and the
//! system's gate trips, automatic advances and endings — so a control and
//! its record commit together.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::run::{OperationRun, RunReason, RunStatus};

/// The actor of what the service did by itself (the dispatcher).
pub const SYSTEM_ACTOR: &str = "rackflow";

/// The run controls an operator sends, by their full RPC names (the trail's
/// `action`).
pub const PAUSE_RUN: &str = "v1.Flow/PauseOperationRun";
pub const RESUME_RUN: &str = "v1.Flow/ResumeOperationRun";
pub const ADVANCE_RUN: &str = "v1.Flow/AdvanceOperationRunPhase";
pub const CANCEL_RUN: &str = "v1.Flow/CancelOperationRun";
pub const CONTROL_RPCS: [&str; 4] = [PAUSE_RUN, RESUME_RUN, ADVANCE_RUN, CANCEL_RUN];

/// Prefix of the actions the service takes on a run by itself
/// (`run/gate_tripped`, …).
pub const SYSTEM_RUN_ACTION_PREFIX: &str = "run/";

/// Longest summary kept; a longer one is cut at a character boundary and
/// marked.
pub const MAX_SUMMARY_LEN: usize = 4096;

/// One entry of the audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    /// Order of the trail, assigned by the store (0 before it is written).
    pub seq: i64,
    pub at: DateTime<Utc>,
    /// The caller's identity (client certificate), `anonymous` without
    /// one, or [`SYSTEM_ACTOR`].
    pub actor: String,
    /// The RPC (`v1.Flow/PauseOperationRun`) or the system's action
    /// (`run/gate_tripped`, `run/phase_advanced`, `run/finished`).
    pub action: String,
    /// The operation run concerned, if any.
    pub run_id: Option<Uuid>,
    /// Other ids the call named or created (tasks, racks, rules, schedules).
    pub subject_ids: Vec<String>,
    /// What was asked, without secrets.
    pub summary: String,
    /// gRPC code name of the outcome (`OK`, `FailedPrecondition`, …).
    pub code: String,
    /// The outcome's message (an error's text, or what changed).
    pub message: String,
}

impl AuditEvent {
    /// An event at `at` with the fields every event has.
    pub fn new(at: DateTime<Utc>, actor: &str, action: &str) -> AuditEvent {
        AuditEvent {
            seq: 0,
            at,
            actor: actor.to_string(),
            action: action.to_string(),
            run_id: None,
            subject_ids: Vec::new(),
            summary: String::new(),
            code: "OK".to_string(),
            message: String::new(),
        }
    }

    /// Whether the event records a run control (by an operator or the
    /// system) rather than another call.
    pub fn is_control(&self) -> bool {
        self.action.starts_with(SYSTEM_RUN_ACTION_PREFIX)
            || CONTROL_RPCS.contains(&self.action.as_str())
    }
}

/// `text` cut to [`MAX_SUMMARY_LEN`] bytes at a character boundary.
pub fn bounded_summary(text: &str) -> String {
    if text.len() <= MAX_SUMMARY_LEN {
        return text.to_string();
    }
    format!(
        "{}… (cut at {MAX_SUMMARY_LEN} bytes)",
        crate::prefix_within(text, MAX_SUMMARY_LEN)
    )
}

/// The event of an operator's control that changed the run: `before` →
/// `after`.
pub fn control_event(
    at: DateTime<Utc>,
    actor: &str,
    action: &str,
    before: &OperationRun,
    after: &OperationRun,
) -> AuditEvent {
    AuditEvent {
        run_id: Some(after.id),
        message: transition_text(before, after),
        ..AuditEvent::new(at, actor, action)
    }
}

/// The event of what a dispatcher attempt did to the run by itself, if it
/// is one the trail records: a safety gate (or the conflict-retry timeout)
/// pausing it, a phase gate stopping it, the next phase opening without
/// an operator, and its end.
pub fn system_event(
    at: DateTime<Utc>,
    before: &OperationRun,
    after: &OperationRun,
) -> Option<AuditEvent> {
    let action = if after.status != before.status && after.status.is_terminal() {
        "run/finished"
    } else if after.status == RunStatus::Paused && before.status != RunStatus::Paused {
        match after.reason {
            RunReason::PhaseGate => "run/phase_gate",
            RunReason::OperatorPaused | RunReason::None => return None,
            RunReason::SafetyGate | RunReason::ConflictRetryTimeout => "run/gate_tripped",
        }
    } else if after.current_phase_index > before.current_phase_index {
        "run/phase_advanced"
    } else {
        return None;
    };
    Some(AuditEvent {
        run_id: Some(after.id),
        message: transition_text(before, after),
        ..AuditEvent::new(at, SYSTEM_ACTOR, action)
    })
}

fn transition_text(before: &OperationRun, after: &OperationRun) -> String {
    let mut text = if before.status == after.status {
        format!("status {}", after.status)
    } else {
        format!("status {} → {}", before.status, after.status)
    };
    if after.reason != RunReason::None {
        text.push_str(&format!(" ({})", after.reason));
    }
    if before.current_phase_index != after.current_phase_index {
        text.push_str(&format!(
            ", phase {} → {}",
            before.current_phase_index, after.current_phase_index
        ));
    }
    if !after.status_message.is_empty() {
        text.push_str(&format!(": {}", after.status_message));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(status: RunStatus, reason: RunReason, phase: i32) -> OperationRun {
        crate::dispatch::test_support::run(status, reason, phase, 3)
    }

    #[test]
    fn the_system_events_the_trail_records() {
        use RunReason as R;
        use RunStatus as S;
        let at = Utc::now();
        let running = run(S::Running, R::None, 0);
        let cases = [
            (run(S::Paused, R::SafetyGate, 0), Some("run/gate_tripped")),
            (
                run(S::Paused, R::ConflictRetryTimeout, 0),
                Some("run/gate_tripped"),
            ),
            (run(S::Paused, R::PhaseGate, 0), Some("run/phase_gate")),
            (run(S::Paused, R::OperatorPaused, 0), None),
            (run(S::Running, R::None, 1), Some("run/phase_advanced")),
            (run(S::Completed, R::None, 0), Some("run/finished")),
            (run(S::Failed, R::SafetyGate, 0), Some("run/finished")),
            (run(S::Running, R::None, 0), None),
        ];
        for (after, expected) in cases {
            let event = system_event(at, &running, &after);
            assert_eq!(
                event.as_ref().map(|e| e.action.as_str()),
                expected,
                "{after:?}"
            );
            if let Some(e) = event {
                assert_eq!(e.actor, SYSTEM_ACTOR);
                assert_eq!(e.run_id, Some(after.id));
                assert!(e.is_control());
            }
        }
        // A paused run staying paused records nothing again.
        let paused = run(S::Paused, R::SafetyGate, 0);
        assert_eq!(system_event(at, &paused, &paused), None);
    }

    #[test]
    fn a_control_event_says_what_changed() {
        let before = run(RunStatus::Paused, RunReason::PhaseGate, 0);
        let mut after = run(RunStatus::Running, RunReason::None, 1);
        after.status_message = "operation run advanced".into();
        let e = control_event(
            Utc::now(),
            "spiffe://t/op",
            "v1.Flow/AdvanceOperationRunPhase",
            &before,
            &after,
        );
        assert_eq!(
            e.message,
            "status paused → running, phase 0 → 1: operation run advanced"
        );
        assert!(e.is_control());
        assert!(!AuditEvent::new(Utc::now(), "a", "v1.Flow/CreateOperationRule").is_control());
    }

    #[test]
    fn summaries_are_bounded_at_a_character_boundary() {
        assert_eq!(bounded_summary("short"), "short");
        let long = "é".repeat(MAX_SUMMARY_LEN);
        let cut = bounded_summary(&long);
        assert!(cut.len() < MAX_SUMMARY_LEN + 40, "{}", cut.len());
        assert!(cut.ends_with("(cut at 4096 bytes)"));
    }
}
