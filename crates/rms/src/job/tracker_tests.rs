//! Tests of the RMS tracker: domain messages, batches and parent aggregation
//! (on read, on child exit and on reaper passes), batch admission, parent
//! sealing APIs, shutdown draining, TTL retention and the reaper, metrics.

use std::sync::{Arc, Barrier};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use super::aggregate::{FirmwareParentFailureResult, SwitchParentFailureResult};
use super::clock::ManualClock;
use super::domain::JobDomain;
use super::error::{JobError, JobFailure};
use super::ids::JobId;
use super::job_type::JobType;
use super::metrics::WorkflowMetrics;
use super::state::JobState;
use super::test_support::capture;
use super::tracker::{
    JobInfo, JobTracker, RejectedBatchTarget, RmsJobDomain, RmsJobHandle, job_failure,
    reaper_interval,
};

const TTL: Duration = Duration::from_secs(3600);

fn manual_tracker(max: usize) -> (Arc<ManualClock>, Arc<JobTracker>) {
    let clock = Arc::new(ManualClock::starting_now());
    let tracker = JobTracker::builder()
        .clock(clock.clone())
        .terminal_job_ttl(TTL)
        .max_tracked_jobs(max)
        .build();
    (clock, Arc::new(tracker))
}

fn batch(tracker: &JobTracker, job_type: JobType, nodes: &[&str]) -> (String, Vec<RmsJobHandle>) {
    let parent = tracker.create_parent_job("rack-01", job_type).unwrap();
    let children = nodes
        .iter()
        .map(|node| {
            tracker
                .create_child_job(&parent, "rack-01", node, job_type)
                .unwrap()
        })
        .collect();
    (parent, children)
}

fn two<T>(items: Vec<T>) -> [T; 2] {
    items
        .try_into()
        .unwrap_or_else(|_| panic!("expected two children"))
}

fn raw_state(tracker: &JobTracker, id: &str) -> JobState {
    tracker.registry().state_of(id).expect("job exists")
}

fn info(tracker: &JobTracker, id: &str) -> JobInfo {
    tracker.get_job(id).expect("job exists")
}

// ── domain failures: exact messages ──

#[test]
fn domain_failures_have_the_exact_spec_wording() {
    let id = JobId::from("job-7");
    let cases = [
        (
            RmsJobDomain::dropped_failure(),
            JobError::Internal,
            "job abandoned before recording a terminal state",
            "Abandoned",
        ),
        (
            RmsJobDomain::at_capacity_failure(1, 1),
            JobError::Internal,
            "job tracker at capacity (1/1 jobs); retry after in-flight jobs finish",
            "Failed",
        ),
        (
            RmsJobDomain::node_busy_failure("r1", "n1", &id),
            JobError::UpdateInProgress,
            "job already in progress for rack r1 node n1 (job_id job-7)",
            "Failed",
        ),
        (
            RmsJobDomain::shutting_down_failure(),
            JobError::Internal,
            "server is shutting down; new jobs are not accepted",
            "Failed",
        ),
        (
            RmsJobDomain::parent_unavailable_failure(&id),
            JobError::Internal,
            "parent job job-7 is missing, terminal, or already a child",
            "Failed",
        ),
    ];
    for (failure, code, message, description) in cases {
        assert_eq!(failure.error_code(), code, "{message}");
        assert_eq!(failure.message, message);
        assert_eq!(failure.description, description, "{message}");
        let expected_json =
            format!(r#"{{"status":"failed","error_code":"{code:?}","error_message":"{message}"}}"#);
        assert_eq!(failure.result_json.as_deref(), Some(expected_json.as_str()));
    }
    let helper = job_failure(JobError::Timeout, 42);
    assert_eq!(helper.message, "42");
    assert_eq!(
        helper.result_json.as_deref(),
        Some(r#"{"status":"failed","error_code":"Timeout","error_message":"42"}"#)
    );
}

#[test]
fn parent_unavailable_for_missing_terminal_or_child_parents() {
    let tracker = JobTracker::new();
    let t = JobType::FirmwareUpdate;
    let missing = tracker
        .create_child_job("nonexistent-job-id", "r", "n", t)
        .unwrap_err();
    assert_eq!(
        missing.message,
        "parent job nonexistent-job-id is missing, terminal, or already a child"
    );

    let (parent, children) = batch(&tracker, t, &["n-01"]);
    let child_id = children[0].id().to_string();
    let nested = tracker
        .create_child_job(&child_id, "r", "n-02", t)
        .unwrap_err();
    assert_eq!(
        nested.message,
        format!("parent job {child_id} is missing, terminal, or already a child")
    );
    for child in children {
        child.complete("Completed", "");
    }
    assert_eq!(info(&tracker, &parent).state, JobState::Completed);
    let sealed = tracker
        .create_child_job(&parent, "r", "n-03", t)
        .unwrap_err();
    assert_eq!(sealed.error_code(), JobError::Internal);
    assert_eq!(
        sealed.message,
        format!("parent job {parent} is missing, terminal, or already a child")
    );
    assert_eq!(
        info(&tracker, &parent).child_job_ids.len(),
        1,
        "nothing attached"
    );
}

// ── parents and children ──

#[test]
fn parent_starts_running_and_becomes_a_parent_on_first_child() {
    let tracker = JobTracker::new();
    let parent = tracker
        .create_parent_job("rack-01", JobType::FirmwareUpdate)
        .unwrap();
    let job = info(&tracker, &parent);
    assert_eq!(job.state, JobState::Running);
    assert_eq!(
        job.state_description,
        "Batch firmware update accepting child jobs"
    );
    assert!(!job.is_parent());
    assert_eq!(job.node_id, "");

    let child = tracker
        .create_child_job(&parent, "rack-01", "n-01", JobType::FirmwareUpdate)
        .unwrap();
    let job = info(&tracker, &parent);
    assert!(job.is_parent());
    assert_eq!(job.child_job_ids, vec![child.id().to_string()]);
    // Creating a child refreshes the parent immediately.
    assert_eq!(
        job.state_description,
        "Batch firmware update in progress (0/1 complete, 1 queued)"
    );
    let child_info = info(&tracker, &child);
    assert_eq!(child_info.parent_job_id.as_deref(), Some(parent.as_str()));
    assert_eq!(
        tracker
            .registry()
            .parent_for_job(child.id())
            .map(String::from),
        Some(parent.clone())
    );
    child.complete("Completed", "");
}

#[test]
fn children_are_listed_in_creation_order_and_attachment_bumps_parent() {
    let (clock, tracker) = manual_tracker(100);
    let parent = tracker
        .create_parent_job("r", JobType::SwitchCertificate)
        .unwrap();
    let created = info(&tracker, &parent).updated_at;
    clock.advance(Duration::from_secs(3));
    let kids: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|n| {
            tracker
                .create_child_job(&parent, "r", n, JobType::SwitchCertificate)
                .unwrap()
        })
        .collect();
    let job = tracker.registry().get(&parent).unwrap();
    assert_eq!(
        job.child_job_ids,
        kids.iter().map(|k| k.id().clone()).collect::<Vec<_>>()
    );
    assert!(job.updated_at > created);
    for kid in kids {
        kid.complete("Completed", "");
    }
}

#[test]
fn running_parent_shows_progress_fragments() {
    let tracker = JobTracker::new();
    let (parent, children) = batch(&tracker, JobType::FirmwareUpdate, &["n-01", "n-02", "n-03"]);
    let [c1, c2, c3]: [RmsJobHandle; 3] = children.try_into().unwrap_or_else(|_| panic!("three"));
    c1.complete("Completed", "");
    c2.progress("Uploading");
    let job = info(&tracker, &parent);
    assert_eq!(job.state, JobState::Running);
    assert_eq!(
        job.state_description,
        "Batch firmware update in progress (1/3 complete, 1 running, 1 queued)"
    );
    c2.complete("Completed", "");
    c3.progress("Flashing");
    assert_eq!(
        info(&tracker, &parent).state_description,
        "Batch firmware update in progress (2/3 complete, 1 running)"
    );
    c3.complete("Completed", "");
}

#[test]
fn all_children_completed_completes_the_parent_on_first_read() {
    let tracker = JobTracker::new();
    let (parent, children) = batch(&tracker, JobType::FirmwareUpdate, &["n-01", "n-02"]);
    for child in children {
        // Sealed directly, without refresh_parent_for_child: the read aggregates.
        child.complete("Completed", r#"{"status":"ok"}"#);
    }
    assert_eq!(
        raw_state(&tracker, &parent),
        JobState::Running,
        "not yet aggregated"
    );
    let job = info(&tracker, &parent);
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(
        job.state_description,
        "All 2 firmware updates completed successfully"
    );
    assert_eq!(job.result_json, "");
    assert_eq!(job.error_code, JobError::Unspecified);
}

#[test]
fn skipped_children_change_the_completed_wording() {
    let tracker = JobTracker::new();
    let (parent, children) = batch(&tracker, JobType::FirmwareUpdate, &["n-01", "n-02"]);
    for child in children {
        child.complete("Completed", r#"{"status":"already_up_to_date"}"#);
    }
    assert_eq!(
        info(&tracker, &parent).state_description,
        "All 2 nodes already up to date"
    );

    let (parent, children) = batch(&tracker, JobType::FirmwareUpdate, &["n-03", "n-04"]);
    let [c1, c2] = two(children);
    c1.complete("Completed", r#"{"status":"already_up_to_date"}"#);
    c2.complete("Completed", r#"{"status":"ok"}"#);
    let job = info(&tracker, &parent);
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(
        job.state_description,
        "1/2 firmware updates applied, 1 already up to date"
    );
}

#[test]
fn firmware_parent_failure_has_the_exact_shape() {
    let tracker = JobTracker::new();
    let (parent, children) = batch(&tracker, JobType::FirmwareUpdate, &["n-01", "n-02"]);
    let [c1, c2] = two(children);
    let c2_id = c2.id().to_string();
    c1.complete("Completed", "");
    c2.fail(job_failure(JobError::ClientError, "connection lost"));

    let job = info(&tracker, &parent);
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.error_code, JobError::Other);
    assert_eq!(job.error_message, "1 of 2 firmware updates failed");
    assert_eq!(
        job.state_description,
        "Batch complete: 1/2 succeeded, 1 failed"
    );
    assert_eq!(
        job.result_json,
        format!(
            r#"{{"completed":1,"failed":1,"missing":0,"total":2,"failed_jobs":[{{"job_id":"{c2_id}","node_id":"n-02","error_code":"ClientError","error":"connection lost","summary":"connection lost","result":{{"status":"failed","error_code":"ClientError","error_message":"connection lost"}}}}]}}"#
        )
    );
    let parsed: FirmwareParentFailureResult = serde_json::from_str(&job.result_json).unwrap();
    assert_eq!(parsed.failed_jobs.len(), 1);
}

#[test]
fn firmware_failure_detail_uses_child_summary_and_raw_json() {
    let tracker = JobTracker::new();
    let (parent, children) = batch(&tracker, JobType::FirmwareUpdate, &["n-01", "n-02", "n-03"]);
    let [c1, c2, c3]: [RmsJobHandle; 3] = children.try_into().unwrap_or_else(|_| panic!("three"));
    let summary = "PSU update failed on powerdevice0: LiteOn PSU update timed out";
    c1.fail(
        JobFailure::new(JobError::ClientError, summary).with_result_json(format!(
            r#"{{"status":"failed","summary":"{summary}","raw_error":"raw NVFWUPD detail"}}"#
        )),
    );
    c2.fail(JobFailure::new(JobError::Timeout, "t/o").with_result_json("not json"));
    c3.fail(JobFailure::new(JobError::Other, "no payload"));
    let job = info(&tracker, &parent);
    let parsed: FirmwareParentFailureResult = serde_json::from_str(&job.result_json).unwrap();
    assert_eq!(job.error_message, "3 of 3 firmware updates failed");
    assert_eq!(
        job.state_description,
        "Batch complete: 0/3 succeeded, 3 failed"
    );
    let by_node = |node: &str| {
        parsed
            .failed_jobs
            .iter()
            .find(|detail| detail.node_id == node)
            .unwrap()
            .clone()
    };
    let first = by_node("n-01");
    assert_eq!(first.summary.as_deref(), Some(summary));
    assert_eq!(
        first.result.unwrap().raw_error.as_deref(),
        Some("raw NVFWUPD detail")
    );
    let second = by_node("n-02");
    assert_eq!(second.error_code, "Timeout");
    assert_eq!(second.raw_result_json.as_deref(), Some("not json"));
    assert!(second.result.is_none());
    let third = by_node("n-03");
    assert!(third.summary.is_none() && third.result.is_none() && third.raw_result_json.is_none());
}

#[test]
fn switch_shaped_failure_has_no_error_code_and_no_parsing() {
    let tracker = JobTracker::new();
    let (parent, children) = batch(
        &tracker,
        JobType::SwitchSystemImageUpdate,
        &["sw-01", "sw-02"],
    );
    let [c1, c2] = two(children);
    let c2_id = c2.id().to_string();
    c1.complete("Completed", "");
    c2.fail(
        JobFailure::new(JobError::Other, "SSH timeout")
            .with_result_json(r#"{"status":"failed","node_id":"sw-02"}"#),
    );
    let job = info(&tracker, &parent);
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(
        job.error_message,
        "1 of 2 switch system image updates failed"
    );
    assert_eq!(
        job.result_json,
        format!(
            r#"{{"completed":1,"failed":1,"missing":0,"total":2,"failed_jobs":[{{"job_id":"{c2_id}","node_id":"sw-02","error":"SSH timeout"}}]}}"#
        )
    );
    assert!(!job.result_json.contains("error_code"));
    let parsed: SwitchParentFailureResult = serde_json::from_str(&job.result_json).unwrap();
    assert_eq!(parsed.failed_jobs[0].error_message, "SSH timeout");
}

#[test]
fn switch_wording_while_running_and_completed() {
    let tracker = JobTracker::new();
    let (parent, children) = batch(
        &tracker,
        JobType::SwitchSystemImageUpdate,
        &["sw-01", "sw-02"],
    );
    let [c1, c2] = two(children);
    c1.complete("Completed", "");
    let job = info(&tracker, &parent);
    assert_eq!(
        job.state_description,
        "Batch switch system image update in progress (1/2 complete, 1 queued)"
    );
    c2.complete("Completed", "");
    assert_eq!(
        info(&tracker, &parent).state_description,
        "All 2 switch system image updates completed successfully"
    );
}

#[test]
fn missing_children_fail_the_parent_with_missing_wording() {
    let tracker = JobTracker::new();
    let (parent, children) = batch(&tracker, JobType::FirmwareUpdate, &["n-01", "n-02", "n-03"]);
    let [c1, c2, c3]: [RmsJobHandle; 3] = children.try_into().unwrap_or_else(|_| panic!("three"));
    c1.complete("Completed", "");
    c2.complete("Completed", "");
    let c3_id = c3.id().clone();
    c3.complete("Completed", "");
    assert!(tracker.registry().remove_for_test(&c3_id));
    let job = info(&tracker, &parent);
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(
        job.error_message,
        "1 of 3 firmware updates failed (1 jobs missing)"
    );
    assert_eq!(
        job.state_description,
        "Batch complete: 2/3 succeeded, 0 failed, 1 missing"
    );
    assert_eq!(
        job.result_json,
        r#"{"completed":2,"failed":0,"missing":1,"total":3,"failed_jobs":[]}"#
    );
}

#[test]
fn parent_without_workflow_type_is_not_aggregated() {
    let tracker = JobTracker::new();
    // A plain leaf that gains a child has no workflow type: never aggregated.
    let top = tracker
        .create_job("r", "top", JobType::FirmwareUpdate)
        .unwrap();
    let child = tracker
        .create_child_job(&top, "r", "kid", JobType::FirmwareUpdate)
        .unwrap();
    child.complete("Completed", "");
    assert_eq!(info(&tracker, &top).state, JobState::Queued);
    top.complete("Completed", "");
}

#[test]
fn polling_a_sealed_parent_is_quiet_and_counts_terminal_metrics_once() {
    let tracker = JobTracker::new();
    let (parent, children) = batch(&tracker, JobType::FirmwareUpdate, &["n-01"]);
    for child in children {
        child.complete("Completed", "");
    }
    let ((), logs) = capture(|| {
        for _ in 0..5 {
            assert_eq!(info(&tracker, &parent).state, JobState::Completed);
        }
        tracker.reaper_sweep();
    });
    assert_eq!(logs.count("job completed"), 1, "sealed once");
    assert!(
        logs.events()
            .iter()
            .all(|e| !e.message.contains("handle missing")),
        "no missing-handle error for a sealed parent"
    );
    assert_eq!(
        tracker
            .metrics()
            .count("firmware_update", false, "completed", "none"),
        1
    );
}

#[tokio::test]
async fn spawned_child_exit_refreshes_the_parent_without_polling() {
    let tracker = Arc::new(JobTracker::new());
    let (parent, mut children) = batch(&tracker, JobType::SwitchCertificate, &["n-01"]);
    let child = children.pop().unwrap();
    tracker
        .spawn_job(child, |job| async move { job.complete("Completed", "{}") })
        .wait()
        .await
        .unwrap();
    assert_eq!(raw_state(&tracker, &parent), JobState::Completed);
}

#[tokio::test]
async fn panicking_or_aborted_child_still_refreshes_its_parent() {
    let tracker = Arc::new(JobTracker::new());
    let (parent, children) = batch(&tracker, JobType::FirmwareUpdate, &["n-01", "n-02"]);
    let [c1, c2] = two(children);
    tracker
        .spawn_job(c1, |_job| async move { panic!("child panic") })
        .wait()
        .await
        .unwrap();
    assert_eq!(
        raw_state(&tracker, &parent),
        JobState::Running,
        "one child left"
    );

    let runtime_tracker = tracker.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            runtime_tracker
                .spawn_job(c2, |_job| std::future::pending::<()>())
                .detach();
            tokio::task::yield_now().await;
        });
        // Dropping the runtime aborts the pending worker.
    })
    .join()
    .unwrap();

    let raw = tracker.registry().get(&parent).unwrap();
    assert_eq!(
        raw.state.state(),
        JobState::Failed,
        "aggregated on worker exit"
    );
    let job = info(&tracker, &parent);
    assert_eq!(job.error_message, "2 of 2 firmware updates failed");
    let parsed: FirmwareParentFailureResult = serde_json::from_str(&job.result_json).unwrap();
    assert!(
        parsed
            .failed_jobs
            .iter()
            .all(|d| d.error_message == "job abandoned before recording a terminal state")
    );
}

#[test]
fn concurrent_children_and_pollers_seal_the_parent_exactly_once() {
    let tracker = Arc::new(JobTracker::new());
    let nodes: Vec<String> = (0..16).map(|i| format!("n-{i:02}")).collect();
    let node_refs: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let (parent, children) = batch(&tracker, JobType::FirmwareUpdate, &node_refs);
    let barrier = Arc::new(Barrier::new(children.len() * 2));
    let threads: Vec<_> = children
        .into_iter()
        .flat_map(|child| {
            let completer = {
                let (tracker, barrier) = (tracker.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let id = child.id().clone();
                    child.complete("Completed", "");
                    tracker.refresh_parent_for_child(&id);
                })
            };
            let poller = {
                let (tracker, barrier, parent) = (tracker.clone(), barrier.clone(), parent.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    for _ in 0..20 {
                        let _ = tracker.get_job(&parent);
                    }
                })
            };
            [completer, poller]
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(info(&tracker, &parent).state, JobState::Completed);
    assert_eq!(
        tracker
            .metrics()
            .count("firmware_update", false, "completed", "none"),
        1
    );
    assert_eq!(tracker.metrics().in_flight("firmware_update", false), 0);
}

#[test]
fn conditional_seal_refuses_a_stale_child_count() {
    let tracker = JobTracker::new();
    let (parent, children) = batch(&tracker, JobType::FirmwareUpdate, &["n-01"]);
    let registry = tracker.registry();
    let stale = registry.seal_parent_if_children(
        &parent,
        0,
        super::state::JobLifecycleState::Completed {
            description: "stale".into(),
            result_json: String::new(),
        },
    );
    assert!(matches!(
        stale,
        Err(super::state::TransitionError::ChildrenChanged { .. })
    ));
    assert_eq!(raw_state(&tracker, &parent), JobState::Running);
    for child in children {
        child.complete("Completed", "");
    }
}

// ── parent sealing APIs ──

#[test]
fn explicit_parent_sealing_apis() {
    let tracker = JobTracker::new();
    let t = JobType::FirmwareUpdate;

    let p = tracker.create_parent_job("r", t).unwrap();
    tracker.mark_completed(&p, None);
    let job = info(&tracker, &p);
    assert_eq!(
        (
            job.state,
            job.state_description.as_str(),
            job.result_json.as_str()
        ),
        (JobState::Completed, "Completed", "")
    );

    let p = tracker.create_parent_job("r", t).unwrap();
    tracker.mark_completed(&p, Some(r#"{"x":1}"#.into()));
    assert_eq!(info(&tracker, &p).result_json, r#"{"x":1}"#);

    let p = tracker.create_parent_job("r", t).unwrap();
    tracker.mark_failed(&p, JobError::ServerError, "bmc 500");
    let job = info(&tracker, &p);
    assert_eq!(job.error_code, JobError::ServerError);
    assert_eq!(job.error_message, "bmc 500");
    assert_eq!(
        job.result_json,
        r#"{"status":"failed","error_code":"ServerError","error_message":"bmc 500"}"#
    );

    let p = tracker.create_parent_job("r", t).unwrap();
    tracker.mark_failed_with_result(&p, JobError::Timeout, "slow", Some("{}".into()));
    assert_eq!(info(&tracker, &p).result_json, "{}");

    let p = tracker.create_parent_job("r", t).unwrap();
    tracker.mark_failed_message(&p, "no matching nodes found");
    let job = info(&tracker, &p);
    assert_eq!(job.error_code, JobError::Other);
    assert_eq!(job.error_message, "no matching nodes found");
    assert_eq!(job.result_json, "");

    let p = tracker.create_parent_job("r", t).unwrap();
    tracker.mark_failed_message_with_result(
        &p,
        "stage failed",
        Some(r#"{"timing_summary":{}}"#.into()),
    );
    assert_eq!(info(&tracker, &p).result_json, r#"{"timing_summary":{}}"#);
}

#[test]
fn sealing_apis_ignore_non_parent_or_sealed_jobs_with_errors() {
    let ((), logs) = capture(|| {
        let tracker = JobTracker::new();
        let leaf = tracker
            .create_job("r", "n", JobType::FirmwareUpdate)
            .unwrap();
        tracker.mark_completed(&leaf, None);
        tracker.mark_failed(&leaf, JobError::Other, "x");
        assert_eq!(info(&tracker, &leaf).state, JobState::Queued);
        let p = tracker
            .create_parent_job("r", JobType::FirmwareUpdate)
            .unwrap();
        tracker.mark_completed(&p, None);
        tracker.mark_failed_message(&p, "again");
        assert_eq!(info(&tracker, &p).state, JobState::Completed);

        tracker.mark_running(&p, "again");
        tracker.mark_running("unknown-id", "x");
        leaf.complete("Completed", "");
    });
    assert_eq!(
        logs.count("mark_completed called for unknown or terminal job"),
        1
    );
    assert_eq!(
        logs.count("mark_failed called for unknown or terminal job"),
        2
    );
    assert_eq!(
        logs.count("mark_running called for job in terminal state"),
        1
    );
    assert_eq!(logs.count("mark_running called for unknown job"), 1);
}

#[test]
fn tracker_mark_running_moves_leaves() {
    let tracker = JobTracker::new();
    let job = tracker
        .create_job("r", "n", JobType::SwitchSystemImageUpdate)
        .unwrap();
    tracker.mark_running(&job, "Inspecting current switch system image state");
    let view = info(&tracker, &job);
    assert_eq!(view.state, JobState::Running);
    assert_eq!(
        view.state_description,
        "Inspecting current switch system image state"
    );
    job.complete("Completed", "");
}

// ── batch admission ──

#[test]
fn create_batch_jobs_admits_in_order_and_rejects_with_messages() {
    let tracker = JobTracker::new();
    let t = JobType::FirmwareUpdate;
    let busy = tracker.create_job("rack-1", "busy", t).unwrap();
    let parent = tracker.create_parent_job("rack-1", t).unwrap();
    let targets = vec![
        ("rack-1".to_owned(), "n1".to_owned(), 1),
        ("rack-1".to_owned(), "n1".to_owned(), 2),
        ("rack-1".to_owned(), "bad".to_owned(), 3),
        ("rack-1".to_owned(), "busy".to_owned(), 4),
        ("rack-2".to_owned(), "n1".to_owned(), 5),
    ];
    let mut checked = Vec::new();
    let (admitted, rejected) = tracker.create_batch_jobs(&parent, t, targets, |payload: &i32| {
        checked.push(*payload);
        if *payload == 3 {
            Err("firmware file missing".to_owned())
        } else {
            Ok(payload * 10)
        }
    });
    assert_eq!(
        checked,
        vec![1, 3, 4, 5],
        "duplicates are rejected before the check"
    );
    assert_eq!(
        admitted
            .iter()
            .map(|(p, _, s)| (*p, *s))
            .collect::<Vec<_>>(),
        vec![(1, 10), (5, 50)]
    );
    assert_eq!(
        rejected,
        vec![
            RejectedBatchTarget {
                rack_id: "rack-1".into(),
                node_id: "n1".into(),
                error_message: "duplicate target rack_id/node_id: rack-1/n1".into(),
            },
            RejectedBatchTarget {
                rack_id: "rack-1".into(),
                node_id: "bad".into(),
                error_message: "firmware file missing".into(),
            },
            RejectedBatchTarget {
                rack_id: "rack-1".into(),
                node_id: "busy".into(),
                error_message: format!(
                    "job already in progress for rack rack-1 node busy (job_id {})",
                    busy.id()
                ),
            },
        ]
    );
    assert_eq!(info(&tracker, &parent).child_job_ids.len(), 2);
    for (_, handle, _) in admitted {
        handle.complete("Completed", "");
    }
    busy.complete("Completed", "");
    assert_eq!(info(&tracker, &parent).state, JobState::Completed);
}

#[test]
fn batch_rejections_are_logged() {
    let ((), logs) = capture(|| {
        let tracker = JobTracker::new();
        let parent = tracker
            .create_parent_job("r", JobType::FirmwareUpdate)
            .unwrap();
        let (_admitted, rejected) = tracker.create_batch_jobs(
            &parent,
            JobType::FirmwareUpdate,
            vec![("r".to_owned(), "n".to_owned(), ())],
            |_| Err::<(), _>("nope".to_owned()),
        );
        assert_eq!(rejected.len(), 1);
    });
    assert_eq!(logs.count("batch job rejected"), 1);
}

// ── shutdown draining ──

#[test]
fn shutdown_signals_active_leaves_and_refuses_everything_after() {
    let tracker = JobTracker::new();
    let t = JobType::SwitchSystemImageUpdate;
    let running = tracker.create_job("r", "sw-01", t).unwrap();
    running.progress("uploading");
    let done = tracker.create_job("r", "sw-02", t).unwrap();
    let done_token = done.cancellation_token();
    done.complete("Completed", "");
    let (parent, children) = batch(&tracker, t, &["sw-03"]);
    let parent_token = tracker.cancellation_token_for(&parent).unwrap();

    let signalled = tracker.shutdown();
    assert_eq!(signalled, 2, "the running leaf and the queued child");
    assert!(running.cancellation_token().is_cancelled());
    assert!(children[0].cancellation_token().is_cancelled());
    assert!(!done_token.is_cancelled());
    assert!(!parent_token.is_cancelled(), "parents are not signalled");
    // Cancellation is cooperative: the job is still running.
    assert_eq!(info(&tracker, &running).state, JobState::Running);

    let message = "server is shutting down; new jobs are not accepted";
    assert_eq!(
        tracker.create_job("r", "x", t).unwrap_err().message,
        message
    );
    assert_eq!(
        tracker
            .create_job_if_node_idle("r", "x", t)
            .unwrap_err()
            .message,
        message
    );
    assert_eq!(
        tracker
            .create_visible_workflow_job_if_node_idle("r", "x", t)
            .unwrap_err()
            .message,
        message
    );
    assert_eq!(
        tracker
            .create_child_job(&parent, "r", "x", t)
            .unwrap_err()
            .message,
        message
    );
    assert!(tracker.create_parent_job("r", t).is_none());
    let (admitted, rejected) = tracker.create_batch_jobs(
        &parent,
        t,
        vec![("r".to_owned(), "y".to_owned(), ())],
        |_| Ok(()),
    );
    assert!(admitted.is_empty());
    assert_eq!(rejected[0].error_message, message);
    assert_eq!(tracker.shutdown(), 2, "still refusing; still two active");
    running.complete("Completed", "");
    for child in children {
        child.complete("Completed", "");
    }
}

#[tokio::test(start_paused = true)]
async fn shutdown_and_await_returns_once_signalled_jobs_finish() {
    let tracker = Arc::new(JobTracker::new());
    let running = tracker
        .create_job("r", "sw-01", JobType::FirmwareUpdate)
        .unwrap();
    running.progress("uploading");
    let id = running.id().to_string();
    let token = running.cancellation_token();
    tokio::spawn(async move {
        token.cancelled().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        running.complete("Completed", "{}");
    });
    let started = tokio::time::Instant::now();
    let signalled = tracker
        .shutdown_and_await_terminal(Duration::from_secs(5))
        .await;
    assert_eq!(signalled, 1);
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(info(&tracker, &id).state, JobState::Completed);
}

#[tokio::test(start_paused = true)]
async fn shutdown_and_await_times_out_with_a_warning() {
    let tracker = JobTracker::new();
    let stuck = tracker
        .create_job("r", "sw-01", JobType::FirmwareUpdate)
        .unwrap();
    stuck.progress("ignoring cancellation");
    let started = tokio::time::Instant::now();
    let signalled = tracker
        .shutdown_and_await_terminal(Duration::from_millis(50))
        .await;
    assert_eq!(signalled, 1, "the number signalled, not finished");
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert_eq!(info(&tracker, &stuck).state, JobState::Running);
    stuck.complete("Completed", "");
}

#[tokio::test(start_paused = true)]
async fn shutdown_and_await_returns_zero_at_once_without_active_jobs() {
    let tracker = JobTracker::new();
    let started = tokio::time::Instant::now();
    assert_eq!(
        tracker
            .shutdown_and_await_terminal(Duration::from_secs(60))
            .await,
        0
    );
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert!(
        tracker
            .create_job("r", "n", JobType::FirmwareUpdate)
            .is_err()
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_wait_counts_missing_jobs_as_done() {
    let tracker = JobTracker::new();
    let registry = tracker.registry();
    let job = tracker
        .create_job("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    let id = job.id().clone();
    assert!(
        registry
            .wait_for_terminal_jobs(
                &[JobId::from("never-existed")],
                Some(Duration::from_secs(1))
            )
            .await
    );
    registry.remove_for_test(&id);
    assert!(registry.wait_for_terminal_jobs(&[id], None).await);
    drop(job);
}

#[test]
fn shutdown_wait_timeout_warning_text() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let tracker = JobTracker::new();
    let stuck = tracker
        .create_job("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    let ((), logs) = capture(|| {
        runtime.block_on(async {
            tracker
                .shutdown_and_await_terminal(Duration::from_millis(10))
                .await;
        });
    });
    assert_eq!(
        logs.count(
            "graceful shutdown wait timed out; some jobs did not reach a terminal state before the deadline"
        ),
        1
    );
    stuck.complete("Completed", "");
}

// ── TTL retention and the reaper ──

#[test]
fn reaper_interval_is_clamped_to_one_to_three_hundred_seconds() {
    assert_eq!(
        reaper_interval(Duration::from_secs(86_400)),
        Duration::from_secs(300)
    );
    assert_eq!(
        reaper_interval(Duration::from_secs(301)),
        Duration::from_secs(300)
    );
    assert_eq!(
        reaper_interval(Duration::from_secs(300)),
        Duration::from_secs(300)
    );
    assert_eq!(
        reaper_interval(Duration::from_secs(60)),
        Duration::from_secs(60)
    );
    assert_eq!(
        reaper_interval(Duration::from_secs(1)),
        Duration::from_secs(1)
    );
    assert_eq!(
        reaper_interval(Duration::from_millis(1)),
        Duration::from_secs(1)
    );
    assert_eq!(reaper_interval(Duration::ZERO), Duration::from_secs(1));
}

#[test]
fn expiry_is_terminal_and_at_least_ttl_old() {
    let (clock, tracker) = manual_tracker(100);
    let done = tracker
        .create_job("r", "a", JobType::FirmwareUpdate)
        .unwrap();
    let done_id = done.id().to_string();
    done.complete("Completed", "");
    let active = tracker
        .create_job("r", "b", JobType::FirmwareUpdate)
        .unwrap();

    clock.advance(TTL - Duration::from_millis(1));
    assert_eq!(
        tracker.cleanup_expired(),
        0,
        "one millisecond short of the TTL"
    );
    clock.advance(Duration::from_millis(1));
    assert_eq!(tracker.cleanup_expired(), 1, "exactly the TTL expires");
    assert!(tracker.get_job(&done_id).is_none());

    clock.advance(TTL * 10);
    assert_eq!(
        tracker.cleanup_expired(),
        0,
        "non-terminal jobs never expire"
    );
    assert!(tracker.get_job(&active).is_some());
    active.complete("Completed", "");
}

#[test]
fn backwards_clock_step_does_not_expire() {
    let (clock, tracker) = manual_tracker(100);
    let done = tracker
        .create_job("r", "a", JobType::FirmwareUpdate)
        .unwrap();
    let id = done.id().to_string();
    done.complete("Completed", "");
    clock.rewind(TTL * 2);
    assert_eq!(tracker.cleanup_expired(), 0);
    assert!(tracker.get_job(&id).is_some());
}

#[test]
fn live_parent_protects_its_expired_children() {
    let (clock, tracker) = manual_tracker(100);
    let (parent, children) = batch(&tracker, JobType::FirmwareUpdate, &["n-01", "n-02"]);
    let [c1, c2] = two(children);
    let c1_id = c1.id().to_string();
    c1.complete("Completed", "");
    clock.advance(TTL * 2);
    assert_eq!(tracker.cleanup_expired(), 0);
    assert!(
        tracker.get_job(&c1_id).is_some(),
        "protected by the running parent"
    );
    assert!(tracker.get_job(&parent).is_some());
    c2.complete("Completed", "");
}

#[test]
fn expired_parent_and_children_need_two_passes() {
    let (clock, tracker) = manual_tracker(100);
    let (parent, children) = batch(&tracker, JobType::FirmwareUpdate, &["n-01"]);
    let child_id = children[0].id().to_string();
    for child in children {
        child.complete("Completed", "");
    }
    assert_eq!(info(&tracker, &parent).state, JobState::Completed);
    clock.advance(TTL);

    assert_eq!(tracker.cleanup_expired(), 1, "first pass: the child only");
    assert!(tracker.registry().get(&child_id).is_none());
    assert_eq!(raw_state(&tracker, &parent), JobState::Completed);
    assert_eq!(tracker.cleanup_expired(), 1, "second pass: the parent");
    assert!(tracker.registry().get(&parent).is_none());
}

#[test]
fn expired_parent_waits_for_unexpired_children() {
    let (clock, tracker) = manual_tracker(100);
    let (parent, children) = batch(&tracker, JobType::FirmwareUpdate, &["n-01"]);
    for child in children {
        child.complete("Completed", "");
    }
    assert_eq!(info(&tracker, &parent).state, JobState::Completed);
    // Make the parent look old but keep the child fresh.
    tracker.registry().age_job_for_test(&parent, TTL * 2);
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        tracker.cleanup_expired(),
        0,
        "parent kept while a child is present"
    );
    assert!(tracker.registry().get(&parent).is_some());
}

#[test]
fn reaper_pass_aggregates_an_unpolled_batch_then_evicts_it() {
    let (clock, tracker) = manual_tracker(100);
    let (parent, children) = batch(&tracker, JobType::FirmwareUpdate, &["n-01"]);
    let child_id = children[0].id().to_string();
    for child in children {
        child.complete("Completed", "");
    }
    assert_eq!(raw_state(&tracker, &parent), JobState::Running);
    tracker.reaper_sweep();
    assert_eq!(
        raw_state(&tracker, &parent),
        JobState::Completed,
        "the reaper seals an unpolled parent"
    );
    clock.advance(TTL);
    tracker.reaper_sweep();
    tracker.reaper_sweep();
    assert!(tracker.registry().get(&child_id).is_none());
    assert!(tracker.registry().get(&parent).is_none());
}

#[tokio::test(start_paused = true)]
async fn spawned_reaper_evicts_without_creations_and_stops_with_the_tracker() {
    let (clock, tracker) = manual_tracker(100);
    let job = tracker
        .create_job("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    let id = job.id().to_string();
    job.complete("Completed", "");
    let (parent, children) = batch(&tracker, JobType::FirmwareUpdate, &["n-02"]);
    for child in children {
        child.complete("Completed", "");
    }
    clock.advance(TTL);

    let reaper = tracker.spawn_reaper(CancellationToken::new());
    // TTL 1 h → the reaper ticks every 300 s; virtual time advances instantly.
    tokio::time::sleep(Duration::from_secs(301)).await;
    assert!(
        tracker.registry().get(&id).is_none(),
        "evicted by the reaper"
    );
    assert_eq!(
        raw_state(&tracker, &parent),
        JobState::Completed,
        "aggregated by the reaper"
    );
    clock.advance(TTL);
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert!(
        tracker.registry().get(&parent).is_none(),
        "parent evicted on a later pass"
    );

    drop(tracker);
    tokio::time::sleep(Duration::from_secs(301)).await;
    assert!(
        reaper.is_finished(),
        "the reaper exits once the tracker is gone"
    );
}

// ── metrics ──

#[test]
fn visible_leaf_emits_started_finished_and_in_flight() {
    let tracker = JobTracker::new();
    let metrics = tracker.metrics().clone();
    let job = tracker
        .create_visible_workflow_job_if_node_idle("rack-01", "node-01", JobType::FirmwareUpdate)
        .unwrap();
    assert_eq!(metrics.count("firmware_update", true, "queued", "none"), 1);
    assert_eq!(metrics.in_flight("firmware_update", true), 1);
    job.complete("Completed", "");
    assert_eq!(
        metrics.count("firmware_update", true, "completed", "none"),
        1
    );
    assert_eq!(metrics.in_flight("firmware_update", true), 0);

    let job = tracker
        .create_visible_workflow_job_if_node_idle("rack-01", "node-01", JobType::FirmwareUpdate)
        .unwrap();
    job.fail(JobFailure::new(JobError::ClientError, "connection lost"));
    assert_eq!(
        metrics.count("firmware_update", true, "failed", "client_error"),
        1
    );

    let job = tracker
        .create_visible_workflow_job_if_node_idle("rack-01", "node-01", JobType::FirmwareUpdate)
        .unwrap();
    drop(job);
    assert_eq!(
        metrics.count("firmware_update", true, "failed", "internal"),
        1,
        "drop path records internal"
    );
    assert_eq!(metrics.in_flight("firmware_update", true), 0);
}

#[test]
fn children_and_plain_leaves_emit_no_workflow_metrics() {
    let shared = Arc::new(WorkflowMetrics::new());
    let tracker = JobTracker::builder().metrics(shared.clone()).build();
    let leaf = tracker
        .create_job("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    leaf.complete("Completed", "");
    assert_eq!(shared.count("firmware_update", true, "queued", "none"), 0);
    let (parent, children) = batch(&tracker, JobType::FirmwareUpdate, &["n-01", "n-02"]);
    assert_eq!(shared.count("firmware_update", true, "queued", "none"), 0);
    assert_eq!(shared.count("firmware_update", false, "queued", "none"), 1);
    assert_eq!(shared.in_flight("firmware_update", false), 1);
    let [c1, c2] = two(children);
    c1.complete("Completed", "");
    c2.fail(JobFailure::new(JobError::Timeout, "t/o"));
    assert_eq!(info(&tracker, &parent).state, JobState::Failed);
    assert_eq!(
        shared.count("firmware_update", true, "completed", "none"),
        0
    );
    assert_eq!(shared.count("firmware_update", false, "failed", "other"), 1);
    assert_eq!(shared.in_flight("firmware_update", false), 0);
}

#[test]
fn metrics_render_in_prometheus_text_format() {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Arc::new(WorkflowMetrics::register(&mut registry));
    // Both families and every type's zero series exist before any job.
    let before = rackflow_telemetry::encode(&registry);
    assert!(
        before.contains("# TYPE rms_workflows_counts counter\n"),
        "{before}"
    );
    assert!(before.contains(
        "rms_workflows_counts_total{error_code=\"none\",is_leaf=\"false\",workflow_state=\"queued\",workflow_type=\"cold_reboot_sequence\"} 0\n"
    ), "{before}");
    assert!(
        before.contains(
            "rms_workflows_in_flight{is_leaf=\"true\",workflow_type=\"firmware_update\"} 0\n"
        ),
        "{before}"
    );
    let tracker = JobTracker::builder().metrics(metrics).build();
    let job = tracker
        .create_visible_workflow_job_if_node_idle("r", "n", JobType::FirmwareUpdate)
        .unwrap();
    job.complete("Completed", "");
    let text = rackflow_telemetry::encode(&registry);
    assert!(
        text.contains("# TYPE rms_workflows_in_flight gauge\n"),
        "{text}"
    );
    assert!(text.contains(
        "rms_workflows_counts_total{error_code=\"none\",is_leaf=\"true\",workflow_state=\"queued\",workflow_type=\"firmware_update\"} 1\n"
    ), "{text}");
    assert!(text.contains(
        "rms_workflows_counts_total{error_code=\"none\",is_leaf=\"true\",workflow_state=\"completed\",workflow_type=\"firmware_update\"} 1\n"
    ), "{text}");
    assert!(
        text.contains(
            "rms_workflows_in_flight{is_leaf=\"true\",workflow_type=\"firmware_update\"} 0\n"
        ),
        "{text}"
    );
}

// ── reads ──

#[test]
fn list_jobs_is_oldest_first_and_aggregates_parents() {
    let (clock, tracker) = manual_tracker(100);
    let first = tracker
        .create_job("r", "a", JobType::FirmwareUpdate)
        .unwrap();
    clock.advance(Duration::from_secs(1));
    let parent = tracker
        .create_parent_job("rack-01", JobType::FirmwareUpdate)
        .unwrap();
    clock.advance(Duration::from_secs(1));
    let children = vec![
        tracker
            .create_child_job(&parent, "rack-01", "b", JobType::FirmwareUpdate)
            .unwrap(),
    ];
    let ids: Vec<String> = tracker.list_jobs().into_iter().map(|j| j.job_id).collect();
    assert_eq!(
        ids,
        vec![
            first.id().to_string(),
            parent.clone(),
            children[0].id().to_string()
        ]
    );
    for child in children {
        child.complete("Completed", "");
    }
    let listed = tracker.list_jobs();
    let parent_view = listed.iter().find(|j| j.job_id == parent).unwrap();
    assert_eq!(parent_view.state, JobState::Completed);
    first.complete("Completed", "");
}

#[test]
fn unknown_job_reads_as_none() {
    let tracker = JobTracker::new();
    assert!(tracker.get_job("nonexistent").is_none());
    assert!(tracker.span_for_job("nonexistent").is_none());
    assert!(tracker.cancellation_token_for("nonexistent").is_none());
    assert!(!tracker.cancel("nonexistent"));
}

#[test]
fn concurrent_create_progress_complete_across_threads() {
    let tracker = Arc::new(JobTracker::new());
    let threads: Vec<_> = (0..10)
        .map(|i| {
            let tracker = tracker.clone();
            std::thread::spawn(move || {
                let job = tracker
                    .create_job("rack-01", &format!("node-{i:02}"), JobType::FirmwareUpdate)
                    .unwrap();
                let id = job.id().to_string();
                job.progress("running");
                job.complete("Completed", "");
                tracker.get_job(&id).unwrap()
            })
        })
        .collect();
    for thread in threads {
        assert_eq!(thread.join().unwrap().state, JobState::Completed);
    }
    tracker.registry().assert_store_consistent_for_test();
}

// ── log lines of the supervisor, cleanup and aggregation paths ──

/// Runs `f` on a current-thread runtime on this thread, so every task's log
/// lines land in this thread's capture buffer.
fn capture_async<F: std::future::Future<Output = ()>>(f: F) -> super::test_support::Capture {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ((), logs) = capture(|| runtime.block_on(f));
    logs
}

#[test]
fn supervisor_and_cleanup_log_lines() {
    use super::cleanup::{CleanupPlan, CleanupReport};
    let file = std::env::temp_dir().join(format!("rackflow-rms-logfile-{}", JobId::new()));
    std::fs::write(&file, b"x").unwrap();
    let file_for_plan = file.clone();
    let logs = capture_async(async move {
        let tracker = Arc::new(JobTracker::new());
        let job = tracker
            .create_job("r", "a", JobType::FirmwareUpdate)
            .unwrap();
        let join = tracker.spawn_job(job, |_job| async move { panic!("worker boom") });
        assert_eq!(join.wait().await.unwrap(), CleanupReport::Skipped);

        let job = tracker
            .create_job("r", "b", JobType::FirmwareUpdate)
            .unwrap();
        let join = tracker.spawn_job_with_cleanup(
            job,
            CleanupPlan::panic_for_test("/x"),
            |job| async move { job.complete("Completed", "") },
        );
        assert!(matches!(
            join.wait().await.unwrap(),
            CleanupReport::Panicked(_)
        ));

        let job = tracker
            .create_job("r", "c", JobType::FirmwareUpdate)
            .unwrap();
        let join = tracker.spawn_job_with_cleanup(
            job,
            CleanupPlan::remove_dir(file_for_plan),
            |job| async move { job.complete("Completed", "") },
        );
        assert!(matches!(
            join.wait().await.unwrap(),
            CleanupReport::Failed(_)
        ));

        let stuck = tracker
            .create_job("r", "d", JobType::FirmwareUpdate)
            .unwrap();
        let plan = CleanupPlan::remove_dir_after_jobs_terminate(
            vec![stuck.id().clone()],
            "/nonexistent-dir",
            Some(Duration::from_millis(20)),
        );
        assert_eq!(plan.run(&tracker.registry()).await, CleanupReport::Skipped);
        stuck.complete("Completed", "");

        let full = Arc::new(JobTracker::with_retention_limits(TTL, 1));
        let _only = full.create_job("r", "e", JobType::FirmwareUpdate).unwrap();
        let cleanup = full.spawn_ephemeral_cache_cleanup(vec![], "/nonexistent-dir-2");
        assert_eq!(cleanup.wait().await.unwrap(), CleanupReport::NotFound);
    });
    std::fs::remove_file(&file).unwrap();
    assert_eq!(logs.count("job worker task exited unsuccessfully"), 1);
    assert_eq!(
        logs.count("job cleanup panicked; resource may be leaked"),
        1
    );
    let panicked = logs
        .find("job cleanup panicked; resource may be leaked")
        .unwrap();
    assert!(
        panicked
            .field("panic_message")
            .unwrap()
            .contains("simulated cleanup panic")
    );
    assert_eq!(
        logs.count("tracked job cleanup failed to remove directory"),
        1
    );
    assert_eq!(
        logs.count("cleanup timed out waiting for child jobs to become terminal"),
        1
    );
    assert_eq!(
        logs.count(
            "job registry at capacity; running ephemeral object cache cleanup without a tracked supervisor"
        ),
        1
    );
}

#[test]
fn aggregating_a_parent_without_a_tracker_handle_logs_and_leaves_it() {
    use super::registry::JobSpec;
    let tracker = JobTracker::new();
    let t = JobType::FirmwareUpdate;
    // A typed parent created behind the tracker's back: no owned handle.
    let parent = tracker
        .registry()
        .create_job(
            JobSpec::new_parent(
                "r",
                "Batch firmware update accepting child jobs",
                t.span(""),
            )
            .with_workflow_type(t),
            None,
            false,
        )
        .unwrap();
    let parent_id = parent.id().to_string();
    let ((), logs) = capture(|| {
        let ok = tracker.create_child_job(&parent_id, "r", "n1", t).unwrap();
        let bad = tracker.create_child_job(&parent_id, "r", "n2", t).unwrap();
        ok.complete("Completed", "");
        let bad_id = bad.id().clone();
        bad.fail(JobFailure::new(JobError::Other, "x"));
        tracker.refresh_parent_for_child(&bad_id);
        tracker.get_job(&parent_id);
    });
    assert!(logs.count("parent job handle missing during failure aggregation") >= 1);
    assert_eq!(raw_state(&tracker, &parent_id), JobState::Running);

    let (parent2, logs) = capture(|| {
        let p = tracker
            .registry()
            .create_job(
                JobSpec::new_parent("r", "p2", t.span("")).with_workflow_type(t),
                None,
                false,
            )
            .unwrap();
        let child = tracker.create_child_job(p.id(), "r", "n3", t).unwrap();
        child.complete("Completed", "");
        tracker.get_job(p.id());
        p
    });
    assert_eq!(
        logs.count("parent job handle missing during completion aggregation"),
        1
    );
    drop(parent2);
    drop(parent);
    assert_eq!(raw_state(&tracker, &parent_id), JobState::Failed);
}

#[test]
fn transition_error_messages() {
    use super::state::TransitionError;
    assert_eq!(
        TransitionError::UnknownJob(JobId::from("j")).to_string(),
        "job j is not tracked"
    );
    assert_eq!(
        TransitionError::NotAllowed {
            job_id: JobId::from("j"),
            from: JobState::Completed,
            to: JobState::Running
        }
        .to_string(),
        "job j: transition from completed to running is not allowed"
    );
    assert_eq!(
        TransitionError::ChildrenChanged {
            job_id: JobId::from("j")
        }
        .to_string(),
        "job j: children changed while aggregating"
    );
}

#[tokio::test(start_paused = true)]
async fn spawned_reaper_stops_when_its_token_is_cancelled() {
    let (_clock, tracker) = manual_tracker(100);
    let stop = CancellationToken::new();
    let reaper = tracker.spawn_reaper(stop.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!reaper.is_finished(), "the reaper runs until stopped");
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(1), reaper)
        .await
        .expect("the reaper ends once its token is cancelled, with the tracker still alive")
        .expect("reaper task");
}

// ── log fields ──

#[derive(Clone, Default)]
struct CapturedLog(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_jobs_log_lines_name_the_job_its_rack_and_its_node() {
    let captured = CapturedLog::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let tracker = JobTracker::new();
    let job = tracker
        .create_job("rack-7", "node-3", JobType::FirmwareUpdate)
        .unwrap();
    job.span().in_scope(|| tracing::info!("flashing"));
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let line = text.lines().find(|l| l.contains("flashing")).unwrap();
    for field in [
        format!("job_id={}", job.id()),
        "rack_id=rack-7".to_string(),
        "node_id=node-3".to_string(),
    ] {
        assert!(line.contains(&field), "{field} not in {line}");
    }
    assert!(!line.contains("parent_job_id"), "{line}");
}
