//! Tests of the generic lifecycle layer: the transition table applied to
//! real records, the RAII handle on drop / panic / abort, the supervisor,
//! node exclusion, capacity, creation order of checks, and cleanup plans.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use super::cleanup::{CleanupOperation, CleanupPlan, CleanupReport};
use super::clock::{Clock, ManualClock};
use super::error::{JobError, JobFailure};
use super::ids::JobId;
use super::job_type::JobType;
use super::registry::{JobRegistry, JobSnapshot, JobSpec, MAX_TRACKED_JOBS};
use super::state::{
    JobLifecycleState, JobState, TransitionClass, TransitionError, transition_rule,
};
use super::test_support::capture;
use super::tracker::{
    ABANDONED_MESSAGE, JobInfo, JobTracker, RmsJobDomain, RmsJobHandle, default_failure_result_json,
};

type Registry = JobRegistry<RmsJobDomain>;

const TTL: Duration = Duration::from_secs(60);

fn registry_with(max: usize) -> (Arc<ManualClock>, Arc<Registry>) {
    let clock = Arc::new(ManualClock::starting_now());
    let registry = Arc::new(Registry::with_clock(TTL, max, clock.clone()));
    (clock, registry)
}

fn leaf(rack: &str, node: &str) -> JobSpec {
    JobSpec::new(rack, node, "Queued", tracing::Span::none())
}

fn state_for(to: JobState) -> JobLifecycleState {
    match to {
        JobState::Queued => JobLifecycleState::Queued {
            description: "again queued".into(),
        },
        JobState::Running => JobLifecycleState::Running {
            description: "to running".into(),
        },
        JobState::Completed => JobLifecycleState::Completed {
            description: "to completed".into(),
            result_json: "{}".into(),
        },
        JobState::Failed => {
            super::registry::failed_state(JobFailure::new(JobError::Other, "to failed"))
        }
    }
}

/// Creates a job and drives it into `state` through the public handle API.
/// Returns the handle while it is still unsealed.
fn job_in(registry: &Arc<Registry>, node: &str, state: JobState) -> (JobId, Option<RmsJobHandle>) {
    let job = registry.create_job(leaf("r", node), None, false).unwrap();
    let id = job.id().clone();
    match state {
        JobState::Queued => (id, Some(job)),
        JobState::Running => {
            job.progress("working");
            (id, Some(job))
        }
        JobState::Completed => {
            job.complete("done", "{}");
            (id, None)
        }
        JobState::Failed => {
            job.fail(JobFailure::new(JobError::Timeout, "late"));
            (id, None)
        }
    }
}

// ── the transition table on real records ──

#[test]
fn every_from_to_pair_is_applied_or_refused_exactly_per_the_table() {
    let (clock, registry) = registry_with(MAX_TRACKED_JOBS);
    let mut checked = 0;
    for from in JobState::ALL {
        for to in JobState::ALL {
            let node = format!("{from}-{to}");
            let (id, handle) = job_in(&registry, &node, from);
            let before = registry.get(&id).unwrap();
            assert_eq!(before.state.state(), from);
            clock.advance(Duration::from_secs(1));

            let outcome = registry.transition(&id, state_for(to));
            let after = registry.get(&id).unwrap();
            match transition_rule(from, to) {
                Some(rule) => {
                    assert_eq!(outcome, Ok(rule.class), "{from} -> {to} must be allowed");
                    assert_eq!(after.state.state(), to, "{from} -> {to} applied");
                    assert_eq!(
                        after.updated_at,
                        clock.now(),
                        "{from} -> {to} bumps updated_at"
                    );
                }
                None => {
                    assert_eq!(
                        outcome,
                        Err(TransitionError::NotAllowed {
                            job_id: id.clone(),
                            from,
                            to
                        }),
                        "{from} -> {to} must be refused"
                    );
                    assert_eq!(
                        after.state.state(),
                        from,
                        "{from} -> {to} left the state alone"
                    );
                    assert_eq!(after.state.description(), before.state.description());
                    assert_eq!(
                        after.updated_at, before.updated_at,
                        "refusal changes nothing"
                    );
                }
            }
            // Dropping a still-unsealed handle may seal the job as abandoned,
            // but never overwrites a terminal state set above.
            let sealed = after.state.clone();
            drop(handle);
            if sealed.is_terminal() {
                assert_eq!(
                    registry.get(&id).unwrap().state.description(),
                    sealed.description()
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 16);
    registry.assert_store_consistent_for_test();
}

#[test]
fn transition_on_unknown_job_is_refused() {
    let (_clock, registry) = registry_with(10);
    assert_eq!(
        registry.transition("nope", state_for(JobState::Running)),
        Err(TransitionError::UnknownJob(JobId::from("nope")))
    );
    assert!(!registry.mark_running("nope", "x"));
}

#[test]
fn started_is_classified_once_then_progress() {
    let (_clock, registry) = registry_with(10);
    let job = registry.create_job(leaf("r", "n"), None, false).unwrap();
    assert_eq!(
        registry.transition(job.id(), state_for(JobState::Running)),
        Ok(TransitionClass::Started)
    );
    assert_eq!(
        registry.transition(job.id(), state_for(JobState::Running)),
        Ok(TransitionClass::Progress)
    );
    assert_eq!(
        registry.transition(job.id(), state_for(JobState::Completed)),
        Ok(TransitionClass::Terminal)
    );
    drop(job);
}

#[test]
fn chokepoint_logs_each_lifecycle_event_once() {
    let (_, logs) = capture(|| {
        let (_clock, registry) = registry_with(10);
        let job = registry
            .create_job(leaf("rack-1", "node-1"), None, false)
            .unwrap();
        job.progress("step 1");
        job.progress("step 2");
        job.complete("Done", "{}");
        let job = registry
            .create_job(leaf("rack-1", "node-2"), None, false)
            .unwrap();
        job.fail(JobFailure::new(JobError::Timeout, "too slow"));
    });
    assert_eq!(logs.count("job created"), 2);
    assert_eq!(logs.count("job started"), 1);
    assert_eq!(logs.count("job progress"), 1);
    assert_eq!(logs.count("job completed"), 1);
    assert_eq!(logs.count("job failed"), 1);
    let created = logs.find("job created").unwrap();
    assert_eq!(created.field("parent_job_id"), Some("None"));
    assert_eq!(created.field("rack_id"), Some("rack-1"));
    assert_eq!(created.field("node_id"), Some("node-1"));
    assert_eq!(created.field("description"), Some("Queued"));
    assert_eq!(
        logs.find("job completed").unwrap().field("description"),
        Some("Done")
    );
    // "job failed" carries the failure message, not the generic "Failed".
    assert_eq!(
        logs.find("job failed").unwrap().field("description"),
        Some("too slow")
    );
}

#[test]
fn terminal_observer_fires_exactly_once_per_job() {
    let clock = Arc::new(ManualClock::starting_now());
    let mut registry = Registry::with_clock(TTL, 100, clock);
    let fired = Arc::new(AtomicUsize::new(0));
    let counter = fired.clone();
    registry.set_terminal_observer(Arc::new(move |_: &JobSnapshot| {
        counter.fetch_add(1, Ordering::SeqCst);
    }));
    let registry = Arc::new(registry);
    let job = registry.create_job(leaf("r", "n"), None, false).unwrap();
    let id = job.id().clone();
    job.complete("done", "");
    // Further attempts are refused and do not notify again.
    assert!(!registry.mark_failed(&id, JobFailure::new(JobError::Other, "late")));
    assert!(!registry.mark_completed(&id, "again", ""));
    assert!(!registry.mark_running(&id, "again"));
    assert_eq!(fired.load(Ordering::SeqCst), 1);
}

#[test]
fn sealing_an_already_terminal_job_logs_the_spec_errors() {
    let (_, logs) = capture(|| {
        let (_clock, registry) = registry_with(10);
        let job = registry.create_job(leaf("r", "n"), None, false).unwrap();
        let id = job.id().clone();
        job.complete("done", "");
        registry.mark_completed(&id, "x", "");
        registry.mark_failed(&id, JobFailure::new(JobError::Other, "x"));
    });
    assert_eq!(
        logs.count("Job was terminal before mark_completed or mark_failed had been called"),
        1
    );
    assert_eq!(
        logs.count("Job was terminal before mark_failed had been called"),
        1
    );
}

#[test]
fn progress_on_terminal_job_is_ignored_with_a_warning() {
    let (_, logs) = capture(|| {
        let (_clock, registry) = registry_with(10);
        let job = registry.create_job(leaf("r", "n"), None, false).unwrap();
        let id = job.id().clone();
        registry
            .transition(&id, state_for(JobState::Completed))
            .unwrap();
        job.progress("late progress");
        assert_eq!(
            registry.get(&id).unwrap().state.state(),
            JobState::Completed
        );
        job.complete("ignored", "");
        assert_eq!(
            registry.get(&id).unwrap().state.description(),
            "to completed"
        );
    });
    assert_eq!(
        logs.count("progress update ignored; job no longer active"),
        1
    );
}

#[test]
fn timestamps_equal_at_creation_and_follow_the_clock() {
    let (clock, registry) = registry_with(10);
    let job = registry.create_job(leaf("r", "n"), None, false).unwrap();
    let snap = registry.get(job.id()).unwrap();
    assert_eq!(snap.created_at, snap.updated_at);
    assert_eq!(snap.created_at, clock.now());
    clock.advance(Duration::from_secs(5));
    job.progress("p");
    let snap = registry.get(job.id()).unwrap();
    assert_eq!(snap.updated_at, clock.now());
    assert!(snap.updated_at > snap.created_at);
    drop(job);
}

// ── the RAII handle: drop, panic, abort ──

fn assert_abandoned(info: &JobInfo) {
    assert_eq!(info.state, JobState::Failed);
    assert_eq!(info.state_description, "Abandoned");
    assert_eq!(info.error_message, ABANDONED_MESSAGE);
    assert_eq!(
        info.error_message,
        "job abandoned before recording a terminal state"
    );
    assert_eq!(info.error_code, JobError::Internal);
    assert_eq!(
        info.result_json,
        r#"{"status":"failed","error_code":"Internal","error_message":"job abandoned before recording a terminal state"}"#
    );
}

#[test]
fn dropping_an_unsealed_handle_seals_it_abandoned() {
    let tracker = JobTracker::new();
    let job = tracker
        .create_job("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    let id = job.id().to_string();
    job.progress("half way");
    drop(job);
    assert_abandoned(&tracker.get_job(&id).unwrap());
}

#[test]
fn handle_api_basics() {
    let tracker = JobTracker::new();
    let a = tracker
        .create_job("r", "n1", JobType::FirmwareUpdate)
        .unwrap();
    let b = tracker
        .create_job("r", "n2", JobType::FirmwareUpdate)
        .unwrap();
    assert_ne!(a, b);
    assert_eq!(&*a, a.id().as_str());
    assert_eq!(a.to_string(), a.id().to_string());
    assert!(format!("{a:?}").contains(a.id().as_str()));
    assert!(!a.cancellation_token().is_cancelled());
    assert!(tracker.cancel(&a));
    assert!(a.cancellation_token().is_cancelled());
    let _ = a.span();
    a.complete("Completed", "");
    b.complete("Completed", "");
}

#[tokio::test]
async fn panic_inside_the_work_seals_failed_abandoned() {
    let tracker = Arc::new(JobTracker::new());
    let job = tracker
        .create_job("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    let id = job.id().to_string();
    let report = tracker
        .spawn_job(job, |job| async move {
            job.progress("about to fail hard");
            panic!("worker exploded");
        })
        .wait()
        .await
        .expect("the supervisor resolves even when the worker panics");
    assert_eq!(report, CleanupReport::Skipped);
    assert_abandoned(&tracker.get_job(&id).unwrap());
}

#[tokio::test]
async fn supervisor_warns_when_the_worker_panics() {
    let tracker = Arc::new(JobTracker::new());
    let job = tracker
        .create_job("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    let join = tracker.spawn_job(job, |_job| async move { panic!("boom") });
    // The supervisor logs inside its own task; just prove it resolves Ok.
    assert!(join.wait().await.is_ok());
}

#[tokio::test]
async fn aborting_the_task_that_owns_the_handle_seals_failed_abandoned() {
    let tracker = Arc::new(JobTracker::new());
    let job = tracker
        .create_job("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    let id = job.id().to_string();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        job.progress("running");
        let _ = started_tx.send(());
        std::future::pending::<()>().await;
        job.complete("never", "");
    });
    started_rx.await.unwrap();
    assert_eq!(tracker.get_job(&id).unwrap().state, JobState::Running);
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_abandoned(&tracker.get_job(&id).unwrap());
}

#[test]
fn runtime_shutdown_aborts_spawned_workers_and_seals_them() {
    let tracker = Arc::new(JobTracker::new());
    let job = tracker
        .create_job("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    let id = job.id().to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        tracker
            .spawn_job(job, |job| async move {
                job.progress("waiting forever");
                std::future::pending::<()>().await;
            })
            .detach();
        tokio::task::yield_now().await;
    });
    drop(runtime);
    assert_abandoned(&tracker.get_job(&id).unwrap());
}

#[tokio::test]
async fn worker_returning_without_sealing_is_abandoned() {
    let tracker = Arc::new(JobTracker::new());
    let job = tracker
        .create_job("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    let id = job.id().to_string();
    tracker
        .spawn_job(job, |job| async move {
            job.progress("forgot to seal");
        })
        .wait()
        .await
        .unwrap();
    assert_abandoned(&tracker.get_job(&id).unwrap());
}

#[tokio::test]
async fn explicit_failure_then_panic_keeps_the_recorded_failure() {
    let tracker = Arc::new(JobTracker::new());
    let job = tracker
        .create_job("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    let id = job.id().to_string();
    tracker
        .spawn_job(job, |job| async move {
            job.fail(JobFailure::new(JobError::ClientError, "bmc said no"));
            panic!("and then the worker panicked");
        })
        .wait()
        .await
        .unwrap();
    let info = tracker.get_job(&id).unwrap();
    assert_eq!(info.state, JobState::Failed);
    assert_eq!(info.error_code, JobError::ClientError);
    assert_eq!(info.error_message, "bmc said no");
    assert_eq!(info.state_description, "Failed");
}

#[tokio::test]
async fn completion_then_panic_keeps_completed() {
    let tracker = Arc::new(JobTracker::new());
    let job = tracker
        .create_job("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    let id = job.id().to_string();
    tracker
        .spawn_job(job, |job| async move {
            job.complete("Completed", r#"{"status":"ok"}"#);
            panic!("late panic");
        })
        .wait()
        .await
        .unwrap();
    let info = tracker.get_job(&id).unwrap();
    assert_eq!(info.state, JobState::Completed);
    assert_eq!(info.result_json, r#"{"status":"ok"}"#);
}

#[test]
fn drop_after_terminal_state_set_elsewhere_does_not_overwrite() {
    let (_clock, registry) = registry_with(10);
    let job = registry.create_job(leaf("r", "n"), None, false).unwrap();
    let id = job.id().clone();
    registry
        .transition(&id, state_for(JobState::Completed))
        .unwrap();
    drop(job);
    let snap = registry.get(&id).unwrap();
    assert_eq!(snap.state.state(), JobState::Completed);
    assert_eq!(snap.state.description(), "to completed");
}

#[test]
fn panicking_creation_observer_seals_the_job_and_does_not_poison_the_lock() {
    let clock = Arc::new(ManualClock::starting_now());
    let mut registry = Registry::with_clock(TTL, 10, clock);
    registry.set_created_observer(Arc::new(|snap: &JobSnapshot| {
        if snap.node_id == "bad" {
            panic!("observer failure");
        }
    }));
    let registry = Arc::new(registry);
    let created = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = registry.create_job(leaf("r", "bad"), None, false);
    }));
    assert!(created.is_err());
    let snaps = registry.snapshots();
    assert_eq!(snaps.len(), 1);
    let JobLifecycleState::Failed {
        message,
        description,
        ..
    } = &snaps[0].state
    else {
        panic!("job must be sealed failed, got {:?}", snaps[0].state);
    };
    assert_eq!(message, ABANDONED_MESSAGE);
    assert_eq!(description, "Abandoned");
    // The registry still works: the lock was never held by the observer.
    let job = registry.create_job(leaf("r", "good"), None, true).unwrap();
    job.complete("ok", "");
}

// ── node exclusion ──

#[test]
fn thirty_two_threads_racing_for_one_node_admit_exactly_one() {
    let tracker = Arc::new(JobTracker::new());
    let barrier = Arc::new(Barrier::new(32));
    let outcomes: Vec<Result<RmsJobHandle, JobFailure>> = (0..32)
        .map(|_| {
            let tracker = tracker.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                tracker.create_job_if_node_idle("rack-1", "node-1", JobType::FirmwareUpdate)
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|thread| thread.join().unwrap())
        .collect();
    let (winners, losers): (Vec<_>, Vec<_>) = outcomes.into_iter().partition(Result::is_ok);
    assert_eq!(winners.len(), 1, "exactly one admission");
    assert_eq!(losers.len(), 31);
    let winner = winners.into_iter().next().unwrap().unwrap();
    let expected = format!(
        "job already in progress for rack rack-1 node node-1 (job_id {})",
        winner.id()
    );
    for loser in losers {
        let failure = loser.unwrap_err();
        assert_eq!(failure.error_code(), JobError::UpdateInProgress);
        assert_eq!(failure.message, expected);
    }
    assert_eq!(tracker.registry().len(), 1, "refusals store nothing");
    winner.complete("Completed", "");
}

#[test]
fn node_index_rules() {
    let tracker = JobTracker::new();
    let t = JobType::FirmwareUpdate;

    // Queued and running jobs block; another rack with the same node does not.
    let queued = tracker.create_job("rack-1", "node-1", t).unwrap();
    assert!(
        tracker
            .create_job_if_node_idle("rack-1", "node-1", t)
            .is_err()
    );
    let other_rack = tracker
        .create_job_if_node_idle("rack-2", "node-1", t)
        .unwrap();
    queued.progress("running");
    assert!(
        tracker
            .create_job_if_node_idle("rack-1", "node-1", t)
            .is_err()
    );

    // Cancellation does not release the node.
    assert!(tracker.cancel(&queued));
    assert!(
        tracker
            .create_job_if_node_idle("rack-1", "node-1", t)
            .is_err()
    );

    // A terminal transition does.
    queued.complete("Completed", "");
    let next = tracker
        .create_job_if_node_idle("rack-1", "node-1", t)
        .unwrap();

    // Jobs created without the idle check are indexed too, several may share
    // a node, and the busy message names one of them.
    let unchecked_a = tracker.create_job("rack-3", "node-9", t).unwrap();
    let unchecked_b = tracker.create_job("rack-3", "node-9", t).unwrap();
    let failure = tracker
        .create_job_if_node_idle("rack-3", "node-9", t)
        .unwrap_err();
    assert!(
        failure
            .message
            .ends_with(&format!("(job_id {})", unchecked_a.id()))
            || failure
                .message
                .ends_with(&format!("(job_id {})", unchecked_b.id())),
        "{}",
        failure.message
    );
    tracker.registry().assert_store_consistent_for_test();
    for job in [other_rack, next, unchecked_a, unchecked_b] {
        job.complete("Completed", "");
    }
    tracker.registry().assert_store_consistent_for_test();
}

#[test]
fn parent_records_have_no_node_and_never_block() {
    let tracker = JobTracker::new();
    let parent = tracker
        .create_parent_job("rack-1", JobType::FirmwareUpdate)
        .unwrap();
    let info = tracker.get_job(&parent).unwrap();
    assert_eq!(info.node_id, "");
    let empty_node = tracker
        .create_job_if_node_idle("rack-1", "", JobType::FirmwareUpdate)
        .expect("a parent's empty node is never indexed");
    empty_node.complete("Completed", "");
}

#[test]
fn top_level_leaf_that_gains_children_keeps_blocking_its_node() {
    let (_clock, registry) = registry_with(100);
    let leaf_job = registry.create_job(leaf("r", "n"), None, false).unwrap();
    let child = registry
        .create_job(leaf("r", "child-node"), Some(leaf_job.id()), false)
        .unwrap();
    assert!(registry.get(leaf_job.id()).unwrap().is_parent());
    let Err(failure) = registry.create_job(leaf("r", "n"), None, true) else {
        panic!("a live leaf-turned-parent must keep blocking its node");
    };
    assert_eq!(failure.error_code(), JobError::UpdateInProgress);
    child.complete("c", "");
    leaf_job.complete("c", "");
}

#[test]
fn remove_queued_job_only_removes_unlinked_queued_leaves() {
    let tracker = JobTracker::new();
    let t = JobType::ColdRebootSequence;
    let queued = tracker.create_job_if_node_idle("r", "n1", t).unwrap();
    let queued_id = queued.id().to_string();
    assert!(tracker.remove_queued_job(&queued_id));
    assert!(tracker.get_job(&queued_id).is_none());
    // The node is free again, and the handle's later drop changes nothing.
    drop(queued);
    assert!(tracker.get_job(&queued_id).is_none());
    let again = tracker.create_job_if_node_idle("r", "n1", t).unwrap();

    let running = tracker.create_job("r", "n2", t).unwrap();
    running.progress("go");
    assert!(!tracker.remove_queued_job(&running));

    let done = tracker.create_job("r", "n3", t).unwrap();
    let done_id = done.id().to_string();
    done.complete("Completed", "");
    assert!(!tracker.remove_queued_job(&done_id));

    let parent = tracker.create_parent_job("r", t).unwrap();
    let child = tracker.create_child_job(&parent, "r", "n4", t).unwrap();
    assert!(!tracker.remove_queued_job(&child), "linked child stays");
    assert!(!tracker.remove_queued_job(&parent), "parent stays");
    assert!(!tracker.remove_queued_job("unknown"));
    tracker.registry().assert_store_consistent_for_test();
    for job in [again, running, child] {
        job.complete("Completed", "");
    }
}

// ── admission order and capacity ──

#[test]
fn admission_checks_run_in_spec_order() {
    let (_clock, registry) = registry_with(1);
    let busy = registry.create_job(leaf("r", "n"), None, false).unwrap();
    let busy_id = busy.id().clone();

    // Node busy beats capacity on a full registry, for the same node only.
    let failure = registry.create_job(leaf("r", "n"), None, true).unwrap_err();
    assert_eq!(failure.error_code(), JobError::UpdateInProgress);
    let failure = registry
        .create_job(leaf("r", "other"), None, true)
        .unwrap_err();
    assert_eq!(
        failure.message,
        "job tracker at capacity (1/1 jobs); retry after in-flight jobs finish"
    );

    // Parent availability beats node busy.
    let failure = registry
        .create_job(leaf("r", "n"), Some("missing-parent"), true)
        .unwrap_err();
    assert_eq!(
        failure.message,
        "parent job missing-parent is missing, terminal, or already a child"
    );

    // Shutdown beats everything.
    registry.begin_shutdown();
    let failure = registry
        .create_job(leaf("r", "n"), Some("missing-parent"), true)
        .unwrap_err();
    assert_eq!(
        failure.message,
        "server is shutting down; new jobs are not accepted"
    );
    assert_eq!(registry.len(), 1);
    assert_eq!(
        registry.get(&busy_id).unwrap().state.state(),
        JobState::Queued
    );
    busy.complete("c", "");
}

#[test]
fn capacity_prunes_only_under_pressure() {
    let (clock, registry) = registry_with(2);
    let done = registry.create_job(leaf("r", "a"), None, false).unwrap();
    let done_id = done.id().clone();
    done.complete("c", "");
    clock.advance(TTL);

    // Below the cap: the expired job is not swept.
    let active = registry.create_job(leaf("r", "b"), None, false).unwrap();
    assert!(registry.get(&done_id).is_some(), "no sweep below the cap");

    // Earlier refusals never sweep either.
    assert!(registry.create_job(leaf("r", "b"), None, true).is_err());
    assert!(
        registry.get(&done_id).is_some(),
        "node-busy refusal does not sweep"
    );

    // At the cap: the expired job is pruned and the new one admitted.
    let third = registry.create_job(leaf("r", "c"), None, false).unwrap();
    assert!(registry.get(&done_id).is_none(), "pruned under pressure");
    assert_eq!(registry.len(), 2);

    // Still full of live jobs: refused, nothing stored.
    let failure = registry
        .create_job(leaf("r", "d"), None, false)
        .unwrap_err();
    assert_eq!(failure.error_code(), JobError::Internal);
    assert_eq!(
        failure.message,
        "job tracker at capacity (2/2 jobs); retry after in-flight jobs finish"
    );
    assert_eq!(failure.description, "Failed");
    assert_eq!(
        failure.result_json.as_deref(),
        Some(
            r#"{"status":"failed","error_code":"Internal","error_message":"job tracker at capacity (2/2 jobs); retry after in-flight jobs finish"}"#
        )
    );
    assert_eq!(registry.len(), 2);
    active.complete("c", "");
    third.complete("c", "");
}

#[test]
fn capacity_counts_terminal_records_and_respects_child_protection() {
    let tracker = {
        let clock = Arc::new(ManualClock::starting_now());
        (
            clock.clone(),
            JobTracker::builder()
                .clock(clock)
                .terminal_job_ttl(TTL)
                .max_tracked_jobs(3)
                .build(),
        )
    };
    let (clock, tracker) = tracker;
    let t = JobType::FirmwareUpdate;
    let parent = tracker.create_parent_job("r", t).unwrap();
    let c1 = tracker.create_child_job(&parent, "r", "n1", t).unwrap();
    let c2 = tracker.create_child_job(&parent, "r", "n2", t).unwrap();
    let c1_id = c1.id().to_string();
    c1.complete("Completed", "");
    clock.advance(TTL * 2);
    // c1 is expired but protected by its live parent; terminal records count.
    let failure = tracker.create_job("r", "n3", t).unwrap_err();
    assert_eq!(
        failure.message,
        "job tracker at capacity (3/3 jobs); retry after in-flight jobs finish"
    );
    assert!(tracker.get_job(&c1_id).is_some());
    c2.complete("Completed", "");
}

#[test]
fn default_limits_are_the_spec_values() {
    let tracker = JobTracker::new();
    assert_eq!(tracker.max_tracked_jobs(), 10_000);
    assert_eq!(tracker.terminal_job_ttl(), Duration::from_secs(86_400));
    assert_eq!(MAX_TRACKED_JOBS, 10_000);
}

// ── cleanup plans ──

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rackflow-rms-{tag}-{}", JobId::new()));
    std::fs::create_dir_all(dir.join("nested")).unwrap();
    std::fs::write(dir.join("nested/file.bin"), b"data").unwrap();
    dir
}

#[tokio::test]
async fn remove_dir_plan_removes_reports_not_found_and_failure() {
    let tracker = Arc::new(JobTracker::new());
    let dir = temp_dir("remove");
    let job = tracker
        .create_job("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    let report = tracker
        .spawn_job_with_cleanup(job, CleanupPlan::remove_dir(&dir), |job| async move {
            job.complete("Completed", "");
        })
        .wait()
        .await
        .unwrap();
    assert_eq!(report, CleanupReport::Removed);
    assert!(!dir.exists());

    let job = tracker
        .create_job("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    let report = tracker
        .spawn_job_with_cleanup(job, CleanupPlan::remove_dir(&dir), |job| async move {
            job.complete("Completed", "");
        })
        .wait()
        .await
        .unwrap();
    assert_eq!(report, CleanupReport::NotFound);

    // A regular file is not a directory: removal fails with details.
    let file = std::env::temp_dir().join(format!("rackflow-rms-file-{}", JobId::new()));
    std::fs::write(&file, b"x").unwrap();
    let job = tracker
        .create_job("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    let report = tracker
        .spawn_job_with_cleanup(job, CleanupPlan::remove_dir(&file), |job| async move {
            job.complete("Completed", "");
        })
        .wait()
        .await
        .unwrap();
    let CleanupReport::Failed(failure) = report else {
        panic!("expected a failed cleanup, got {report:?}");
    };
    assert_eq!(failure.operation, CleanupOperation::RemoveDir);
    assert_eq!(failure.path, file);
    assert!(!failure.message.is_empty());
    std::fs::remove_file(&file).unwrap();
}

#[tokio::test]
async fn cleanup_runs_even_when_the_worker_panics_and_panicking_cleanup_is_contained() {
    let tracker = Arc::new(JobTracker::new());
    let dir = temp_dir("panic-worker");
    let job = tracker
        .create_job("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    let report = tracker
        .spawn_job_with_cleanup(job, CleanupPlan::remove_dir(&dir), |_job| async move {
            panic!("worker panic");
        })
        .wait()
        .await
        .unwrap();
    assert_eq!(report, CleanupReport::Removed);

    let job = tracker
        .create_job("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    let id = job.id().to_string();
    let report = tracker
        .spawn_job_with_cleanup(
            job,
            CleanupPlan::panic_for_test("/nowhere"),
            |job| async move {
                job.complete("Completed", "{}");
            },
        )
        .wait()
        .await
        .unwrap();
    let CleanupReport::Panicked(message) = report else {
        panic!("expected Panicked, got {report:?}");
    };
    assert!(message.contains("simulated cleanup panic"), "{message}");
    // A cleanup panic never changes the job's terminal state.
    assert_eq!(tracker.get_job(&id).unwrap().state, JobState::Completed);
}

#[tokio::test]
async fn remove_after_jobs_terminate_waits_for_children_or_times_out() {
    let tracker = Arc::new(JobTracker::new());
    let registry = tracker.registry();
    let dir = temp_dir("after-children");
    let child = tracker
        .create_job("r", "c", JobType::FirmwareUpdate)
        .unwrap();
    let plan = CleanupPlan::remove_dir_after_jobs_terminate(
        vec![child.id().clone(), JobId::from("already-gone")],
        &dir,
        Some(Duration::from_secs(5)),
    );
    let cleanup = tokio::spawn({
        let registry = registry.clone();
        async move { plan.run(&registry).await }
    });
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(dir.exists(), "directory kept while a child is active");
    child.complete("Completed", "");
    assert_eq!(cleanup.await.unwrap(), CleanupReport::Removed);
    assert!(!dir.exists());

    let dir = temp_dir("timeout");
    let stuck = tracker
        .create_job("r", "s", JobType::FirmwareUpdate)
        .unwrap();
    let plan = CleanupPlan::remove_dir_after_jobs_terminate(
        vec![stuck.id().clone()],
        &dir,
        Some(Duration::from_millis(40)),
    );
    assert_eq!(plan.run(&registry).await, CleanupReport::Skipped);
    assert!(dir.exists(), "a timed-out wait leaves the directory");
    std::fs::remove_dir_all(&dir).unwrap();
    stuck.complete("Completed", "");
}

#[tokio::test]
async fn ephemeral_cache_cleanup_runs_tracked_or_untracked_at_capacity() {
    let tracker = Arc::new(JobTracker::with_retention_limits(TTL, 3));
    let child = tracker
        .create_job("r", "c", JobType::FirmwareUpdate)
        .unwrap();
    let dir = temp_dir("ephemeral");
    let cleanup = tracker.spawn_ephemeral_cache_cleanup(vec![child.id().clone()], &dir);
    assert!(matches!(
        cleanup,
        super::tracker::EphemeralCleanup::Tracked(_)
    ));
    let supervisor = tracker
        .list_jobs()
        .into_iter()
        .find(|job| job.node_id == "ephemeral-object-cache-cleanup")
        .expect("a supervisor job exists");
    assert_eq!(supervisor.rack_id, "");
    child.complete("Completed", "");
    assert_eq!(cleanup.wait().await.unwrap(), CleanupReport::Removed);
    assert!(!dir.exists());
    let supervisor = tracker.get_job(&supervisor.job_id).unwrap();
    assert_eq!(supervisor.state, JobState::Completed);
    assert_eq!(supervisor.result_json, "{}");

    // Fill the registry: the cleanup still runs, untracked.
    let _a = tracker
        .create_job("r", "a", JobType::FirmwareUpdate)
        .unwrap();
    let dir = temp_dir("ephemeral-full");
    let cleanup = tracker.spawn_ephemeral_cache_cleanup(vec![], &dir);
    assert!(matches!(
        cleanup,
        super::tracker::EphemeralCleanup::Untracked(_)
    ));
    assert_eq!(cleanup.wait().await.unwrap(), CleanupReport::Removed);
    assert!(!dir.exists());
}

// ── JobInfo payload table ──

#[test]
fn job_info_payload_follows_the_state_table() {
    let tracker = JobTracker::new();
    let t = JobType::FirmwareUpdate;
    let queued = tracker.create_job("r", "q", t).unwrap();
    let info = tracker.get_job(&queued).unwrap();
    assert_eq!(
        (
            info.state,
            info.error_code,
            info.error_message.as_str(),
            info.result_json.as_str()
        ),
        (JobState::Queued, JobError::Unspecified, "", "")
    );
    queued.progress("Running now");
    let info = tracker.get_job(&queued).unwrap();
    assert_eq!(
        (
            info.state,
            info.error_code,
            info.error_message.as_str(),
            info.result_json.as_str()
        ),
        (JobState::Running, JobError::Unspecified, "", "")
    );
    assert_eq!(info.state_description, "Running now");
    let id = queued.id().to_string();
    queued.complete("Completed", r#"{"status":"ok"}"#);
    let info = tracker.get_job(&id).unwrap();
    assert_eq!(
        (
            info.state,
            info.error_code,
            info.error_message.as_str(),
            info.result_json.as_str()
        ),
        (
            JobState::Completed,
            JobError::Unspecified,
            "",
            r#"{"status":"ok"}"#
        )
    );

    // A failure without result_json reports "", with a foreign cause Internal.
    let job = tracker.create_job("r", "f", t).unwrap();
    let id = job.id().to_string();
    job.fail(JobFailure::new(
        std::io::Error::other("socket closed"),
        "io trouble",
    ));
    let info = tracker.get_job(&id).unwrap();
    assert_eq!(info.state, JobState::Failed);
    assert_eq!(info.error_code, JobError::Internal);
    assert_eq!(info.error_message, "io trouble");
    assert_eq!(info.result_json, "");
    assert_eq!(info.state_description, "Failed");

    // The default failure result_json keeps key order status, error_code, error_message.
    assert_eq!(
        default_failure_result_json(JobError::ClientError, "bad \"quote\""),
        r#"{"status":"failed","error_code":"ClientError","error_message":"bad \"quote\""}"#
    );
}
