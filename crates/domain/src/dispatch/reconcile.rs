//! Reconciliation of a target from its child task (spec operation-runs §3.3).

use super::*;

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
    let status = match target_status_for_task(task_status) {
        // A child cancelled by a leak response failed as far as the run is
        // concerned: the leak counts toward its gates.
        TargetStatus::Terminated if crate::leak::is_leak_preemption(task_message) => {
            TargetStatus::Failed
        }
        status => status,
    };
    if target.status == status && target.message == task_message {
        return false;
    }
    target.status = status;
    target.message = task_message.to_string();
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::test_support::*;

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
    fn a_child_cancelled_by_a_leak_response_fails_its_target() {
        let leak = crate::leak::preemption_message(id(1), id(2));
        let mut t = target(0, T::Submitted);
        assert!(reconcile_target(&mut t, TaskStatus::Terminated, &leak));
        assert_eq!((t.status, t.message.as_str()), (T::Failed, leak.as_str()));
        // An operator's cancel stays a terminated target.
        let mut t = target(0, T::Submitted);
        assert!(reconcile_target(
            &mut t,
            TaskStatus::Terminated,
            "Cancelled by user"
        ));
        assert_eq!(t.status, T::Terminated);
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
}
