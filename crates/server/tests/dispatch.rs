//! The operation-run dispatcher and the manual controls, black-box through
//! the real gRPC API (Flow + SimAdmin on one port), on SQLite and
//! PostgreSQL (spec operation-runs §3, §4.1–4.5, decisions D1–D3).
//!
//! Every test drives a real server whose dispatcher is enabled, over a
//! simulated fleet with small latencies and no jitter, and a default
//! firmware rule that polls every 20 ms (the built-in one polls every two
//! minutes). Waits follow events under a deadline — a run through its
//! `WatchOperationRun` stream, targets and tasks re-read after each store
//! write — and the few sleeps are parts of a scenario (a window in which
//! nothing may happen). Most use a one-minute dispatcher poll interval so that they only
//! pass if events wake the loop (D2).

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

use rackflow_testkit as common;
use rackflow_testkit::both_stores;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use common::{Backend, TestServer, fixture_fleet, fixture_id, options, run_request, upgrade, uuid};
use rackflow_api::sim::v1 as sim;
use rackflow_api::sim::v1::sim_admin_client::SimAdminClient;
use rackflow_api::v1 as pb;
use rackflow_server::Config;
use tonic::Code;
use tonic::transport::Channel;
use uuid::Uuid;

both_stores!(
    run_completes_within_the_concurrency_limit,
    phase_gate_waits_for_advance,
    auto_advance_runs_every_phase,
    failure_count_gate_trips_at_its_threshold,
    failure_rate_gate_trips_at_its_exact_threshold,
    cumulative_gate_counts_earlier_phases,
    failures_below_every_gate_complete_with_failures,
    all_targets_failed_fails_the_run,
    conflict_backs_off_then_times_out,
    released_conflict_lets_the_target_proceed,
    pause_and_resume_mid_phase,
    cancel_mid_phase_terminates_children,
    cancel_during_submission_leaves_no_child_running,
    controls_on_terminal_runs,
    started_at_is_set_when_a_run_paused_while_pending_resumes,
    watch_streams_until_terminal,
    restart_mid_run_submits_each_target_once,
);

/// Upper bound of every wait; runs here take well under a few seconds.
const DEADLINE: Duration = Duration::from_secs(30);
/// A dispatcher poll interval no test may depend on: runs must be driven by
/// events (D2).
const EVENT_DRIVEN_POLL_MS: u64 = 60_000;
/// Firmware update time in the simulated fleet for most tests.
const FIRMWARE_MS: u64 = 60;

fn dispatch_config(poll_interval_ms: u64, firmware_update_ms: u64) -> Config {
    let mut config = Config::default();
    config.dispatcher.enabled = true;
    config.dispatcher.poll_interval_ms = poll_interval_ms;
    config.sim.firmware_update_ms = firmware_update_ms;
    config.sim.power_ms = 10;
    config.sim.jitter = 0.0;
    config
}

/// A firmware `upgrade` rule for the Compute trays only, polling every
/// 20 ms, one attempt (a failed update fails the task at once).
const FAST_FIRMWARE_RULE: &str = r#"{
  "version": "v1",
  "steps": [
    { "component_type": "Compute", "stage": 1,
      "retry": { "max_attempts": 1, "initial_interval": "1s" },
      "main_operation": { "name": "FirmwareControl",
                          "parameters": { "poll_interval": "20ms", "poll_timeout": "60s" } } }
  ]
}"#;

struct Env {
    s: TestServer,
    sim: SimAdminClient<Channel>,
    racks: Vec<Uuid>,
}

/// A server with the dispatcher on, `racks` fixture racks and the fast
/// firmware rule as the default; `None` when the backend is unavailable.
async fn start(backend: Backend, config: Config, racks: u32) -> Option<Env> {
    let mut s = TestServer::start_with(backend, config).await?;
    let racks = fixture_fleet(&mut s.client, racks).await;
    s.client
        .create_operation_rule(pb::CreateOperationRuleRequest {
            name: "fast firmware".into(),
            description: "test rule: polls every 20ms".into(),
            operation_type: pb::OperationType::FirmwareControl as i32,
            operation_code: "upgrade".into(),
            rule_definition_json: FAST_FIRMWARE_RULE.into(),
            is_default: true,
        })
        .await
        .expect("create default firmware rule");
    let sim = sim_client(&s).await;
    Some(Env { s, sim, racks })
}

async fn sim_client(s: &TestServer) -> SimAdminClient<Channel> {
    SimAdminClient::connect(format!("http://{}", s.addr))
        .await
        .expect("connect SimAdmin")
}

/// The external id of fixture rack `fixture_id(n)` (`r-000n`), which is
/// also the rack name the simulated fleet matches faults on.
fn ext(rack: Uuid) -> String {
    let n = (1..=100)
        .find(|n| fixture_id(*n) == rack)
        .expect("fixture rack");
    format!("r-{n:04}")
}

fn firmware_fault(rack: Uuid, effect: &str) -> sim::Fault {
    sim::Fault {
        rack: ext(rack),
        operation: "firmware".into(),
        effect: effect.into(),
        ..Default::default()
    }
}

async fn set_faults(sim: &mut SimAdminClient<Channel>, faults: Vec<sim::Fault>) {
    sim.set_faults(sim::SetFaultsRequest { faults })
        .await
        .expect("set faults");
}

fn parse(id: &Option<pb::Uuid>) -> Uuid {
    Uuid::parse_str(&id.as_ref().expect("uuid").id).expect("valid uuid")
}

fn gate_count(
    scope: pb::OperationRunSafetyGateScope,
    threshold: i32,
) -> pb::OperationRunSafetyGate {
    pb::OperationRunSafetyGate {
        gate: Some(pb::operation_run_safety_gate::Gate::FailureCount(
            pb::OperationRunFailureCountGate {
                scope: scope as i32,
                failure_threshold_count: threshold,
            },
        )),
    }
}

fn gate_rate(scope: pb::OperationRunSafetyGateScope, percent: i32) -> pb::OperationRunSafetyGate {
    pb::OperationRunSafetyGate {
        gate: Some(pb::operation_run_safety_gate::Gate::FailureRate(
            pb::OperationRunFailureRateGate {
                scope: scope as i32,
                failure_threshold_percent: percent,
            },
        )),
    }
}

/// 100 % of the fleet in `phases` equal phases, `concurrency` at a time,
/// with `gates`.
fn request(
    name: &str,
    phases: i32,
    concurrency: i32,
    gates: Vec<pb::OperationRunSafetyGate>,
) -> pb::CreateOperationRunRequest {
    let mut req = run_request(name, 100, "selector-seed", "ordering-seed", phases);
    let o = options(&mut req);
    o.max_concurrent_targets = concurrency;
    o.safety_policy = Some(pb::OperationRunSafetyPolicy { gates });
    req
}

fn lenient() -> Vec<pb::OperationRunSafetyGate> {
    vec![gate_rate(
        pb::OperationRunSafetyGateScope::CurrentPhase,
        100,
    )]
}

fn count_phases(req: &mut pb::CreateOperationRunRequest, counts: &[i32], auto_advance: bool) {
    options(req).phase_policy = Some(pb::OperationRunPhasePolicy {
        plan: Some(pb::operation_run_phase_policy::Plan::Count(
            pb::CountOperationRunPhases {
                phases: counts
                    .iter()
                    .map(|&count| pb::OperationRunCountPhase { count })
                    .collect(),
            },
        )),
        advance_policy: Some(pb::OperationRunPhaseAdvancePolicy { auto_advance }),
    });
}

fn set_auto_advance(req: &mut pb::CreateOperationRunRequest, auto_advance: bool) {
    options(req)
        .phase_policy
        .as_mut()
        .expect("phase policy")
        .advance_policy = Some(pb::OperationRunPhaseAdvancePolicy { auto_advance });
}

/// The planned order of a request: rack ids by sequence index.
async fn planned_order(s: &mut TestServer, req: &pb::CreateOperationRunRequest) -> Vec<Uuid> {
    let preview = s
        .extensions()
        .preview_operation_run(req.clone())
        .await
        .expect("preview")
        .into_inner();
    let mut targets = preview.targets;
    targets.sort_by_key(|t| t.sequence_index);
    targets.iter().map(|t| parse(&t.rack_id)).collect()
}

async fn create(s: &mut TestServer, req: pb::CreateOperationRunRequest) -> pb::Uuid {
    s.client
        .create_operation_run(req)
        .await
        .expect("create run")
        .into_inner()
        .id
        .expect("run id")
}

async fn get(s: &mut TestServer, id: &pb::Uuid) -> pb::OperationRun {
    s.client
        .get_operation_run(pb::GetOperationRunRequest {
            id: Some(id.clone()),
            include_stats: true,
        })
        .await
        .expect("get run")
        .into_inner()
        .operation_run
        .expect("run")
}

fn summary(run: &pb::OperationRun) -> &pb::OperationRunSummary {
    run.summary.as_ref().expect("summary")
}

fn status(run: &pb::OperationRun) -> pb::OperationRunStatus {
    let state = summary(run).state.expect("state");
    pb::OperationRunStatus::try_from(state.status).expect("known status")
}

fn reason(run: &pb::OperationRun) -> pb::OperationRunStatusReason {
    let state = summary(run).state.expect("state");
    pb::OperationRunStatusReason::try_from(state.reason).expect("known reason")
}

fn message(run: &pb::OperationRun) -> &str {
    &summary(run).status_message
}

fn is_terminal(run: &pb::OperationRun) -> bool {
    use pb::OperationRunStatus as S;
    matches!(
        status(run),
        S::Completed | S::CompletedWithFailures | S::Failed | S::Cancelled
    )
}

fn describe(run: &pb::OperationRun) -> String {
    format!(
        "{:?}/{:?} {:?} phase stats {:?}",
        status(run),
        reason(run),
        message(run),
        run.stats
    )
}

/// Follows the run's `WatchOperationRun` stream until `done` holds; panics
/// with its state at the deadline.
async fn wait_run(
    s: &mut TestServer,
    id: &pb::Uuid,
    what: &str,
    done: impl FnMut(&pb::OperationRun) -> bool,
) -> pb::OperationRun {
    rackflow_testkit::wait::wait_run(&mut s.extensions(), id, what, DEADLINE, done).await
}

async fn wait_status(
    s: &mut TestServer,
    id: &pb::Uuid,
    want: pb::OperationRunStatus,
) -> pb::OperationRun {
    wait_run(s, id, &format!("{want:?}"), |r| status(r) == want).await
}

/// Waits for a terminal status; on timeout the panic shows the targets and
/// their tasks too.
async fn wait_terminal(s: &mut TestServer, id: &pb::Uuid) -> pb::OperationRun {
    let give_up = Instant::now() + DEADLINE;
    let mut changes = s.waiter("a terminal status", DEADLINE);
    loop {
        let run = get(s, id).await;
        if is_terminal(&run) {
            return run;
        }
        if !changes.next_within(give_up).await {
            let ts = targets(s, id).await;
            let task_ids: Vec<Uuid> = ts
                .iter()
                .filter(|t| t.task_id.is_some())
                .map(|t| parse(&t.task_id))
                .collect();
            let tasks = tasks_by_id(s, &task_ids).await;
            let rows: Vec<String> = ts
                .iter()
                .map(|t| {
                    let task = t
                        .task_id
                        .as_ref()
                        .map(|id| &tasks[&parse(&Some(id.clone()))]);
                    format!(
                        "#{} {:?} {:?} task {:?}",
                        t.sequence_index,
                        target_status(t),
                        t.message,
                        task.map(|k| (task_status(k), k.message.clone()))
                    )
                })
                .collect();
            panic!(
                "timed out waiting for a terminal status; run is {}; targets {rows:#?}",
                describe(&run)
            );
        }
    }
}

/// Targets of every phase up to the current one, in sequence order.
async fn targets(s: &mut TestServer, id: &pb::Uuid) -> Vec<pb::OperationRunTarget> {
    s.client
        .list_operation_run_targets(pb::ListOperationRunTargetsRequest {
            operation_run_id: Some(id.clone()),
            status: 0,
            pagination: Some(pb::Pagination {
                offset: 0,
                limit: 1000,
            }),
            phase_scope: pb::OperationRunTargetPhaseScope::CurrentAndCompletedPhases as i32,
        })
        .await
        .expect("list targets")
        .into_inner()
        .targets
}

fn target_status(t: &pb::OperationRunTarget) -> pb::OperationRunTargetStatus {
    pb::OperationRunTargetStatus::try_from(t.status).expect("known target status")
}

async fn wait_targets(
    s: &mut TestServer,
    id: &pb::Uuid,
    what: &str,
    mut done: impl FnMut(&[pb::OperationRunTarget]) -> bool,
) -> Vec<pb::OperationRunTarget> {
    let mut changes = s.waiter(what, DEADLINE);
    loop {
        let ts = targets(s, id).await;
        if done(&ts) {
            return ts;
        }
        changes
            .next(
                ts.iter()
                    .map(|t| (t.sequence_index, target_status(t), t.message.clone()))
                    .collect::<Vec<_>>(),
            )
            .await;
    }
}

/// Every task of a rack (any type, any status).
async fn rack_tasks(s: &mut TestServer, rack: Uuid) -> Vec<pb::Task> {
    let resp = s
        .client
        .list_tasks(pb::ListTasksRequest {
            rack_id: Some(uuid(rack)),
            active_only: false,
            pagination: Some(pb::Pagination {
                offset: 0,
                limit: 1000,
            }),
            component_id: None,
            with_report: false,
        })
        .await
        .expect("list tasks")
        .into_inner();
    assert_eq!(resp.total as usize, resp.tasks.len());
    resp.tasks
}

/// Waiting, pending and running tasks of the whole fleet.
async fn active_tasks(s: &mut TestServer) -> Vec<pb::Task> {
    s.client
        .list_tasks(pb::ListTasksRequest {
            rack_id: None,
            active_only: true,
            pagination: Some(pb::Pagination {
                offset: 0,
                limit: 1000,
            }),
            component_id: None,
            with_report: false,
        })
        .await
        .expect("list active tasks")
        .into_inner()
        .tasks
}

async fn all_tasks(s: &mut TestServer) -> Vec<pb::Task> {
    s.client
        .list_tasks(pb::ListTasksRequest {
            pagination: Some(pb::Pagination {
                offset: 0,
                limit: 1000,
            }),
            ..Default::default()
        })
        .await
        .expect("list tasks")
        .into_inner()
        .tasks
}

async fn tasks_by_id(s: &mut TestServer, ids: &[Uuid]) -> HashMap<Uuid, pb::Task> {
    s.client
        .get_tasks_by_i_ds(pb::GetTasksByIDsRequest {
            task_ids: ids.iter().map(|id| uuid(*id)).collect(),
        })
        .await
        .expect("get tasks")
        .into_inner()
        .tasks
        .into_iter()
        .map(|t| (parse(&t.id), t))
        .collect()
}

fn task_status(t: &pb::Task) -> pb::TaskStatus {
    pb::TaskStatus::try_from(t.status).expect("known task status")
}

fn seconds(ts: &Option<prost_types::Timestamp>) -> f64 {
    let ts = ts.as_ref().expect("timestamp");
    ts.seconds as f64 + f64::from(ts.nanos) / 1e9
}

fn control_error(status: &tonic::Status, detail: &str) {
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert_eq!(
        status.message(),
        format!("operation run is not in a valid state for the requested operation: {detail}")
    );
}

fn outcome_counts(stats: &pb::OperationRunPhaseStats) -> (i32, i32, i32, i32) {
    let c = stats.outcome_counts.expect("outcome counts");
    (c.completed, c.failed, c.terminated, c.skipped)
}

fn current_stats(run: &pb::OperationRun) -> pb::OperationRunPhaseStats {
    run.stats
        .as_ref()
        .expect("stats")
        .current_phase_stats
        .expect("current stats")
}

fn cumulative_stats(run: &pb::OperationRun) -> pb::OperationRunPhaseStats {
    run.stats
        .as_ref()
        .expect("stats")
        .cumulative_phase_stats
        .expect("cumulative stats")
}

// ---------------------------------------------------------------------------
// 1. A run completes
// ---------------------------------------------------------------------------

async fn run_completes_within_the_concurrency_limit(backend: Backend) {
    let Some(Env {
        mut s,
        mut sim,
        racks,
    }) = start(
        backend,
        dispatch_config(EVENT_DRIVEN_POLL_MS, FIRMWARE_MS),
        6,
    )
    .await
    else {
        return;
    };
    let id = create(&mut s, request("complete", 1, 2, lenient())).await;

    // Check after every store write while it runs: never more than two
    // child tasks active, and never more than two targets holding a slot.
    let mut changes = s.waiter("the run to finish", DEADLINE);
    let mut max_active = 0;
    let mut seen_running = false;
    let run = loop {
        let active = active_tasks(&mut s).await.len();
        max_active = max_active.max(active);
        let ts = targets(&mut s, &id).await;
        let holding = ts
            .iter()
            .filter(|t| {
                matches!(
                    target_status(t),
                    pb::OperationRunTargetStatus::Claimed | pb::OperationRunTargetStatus::Submitted
                )
            })
            .count();
        assert!(holding <= 2, "{holding} targets hold a slot");
        let run = get(&mut s, &id).await;
        seen_running |= status(&run) == pb::OperationRunStatus::Running;
        if is_terminal(&run) {
            break run;
        }
        changes.next(describe(&run)).await;
    };
    assert!(
        max_active <= 2,
        "{max_active} child tasks were active at once"
    );
    assert!(seen_running, "the run was seen running");

    assert_eq!(
        status(&run),
        pb::OperationRunStatus::Completed,
        "{}",
        describe(&run)
    );
    assert_eq!(reason(&run), pb::OperationRunStatusReason::None);
    assert_eq!(message(&run), "operation run completed");
    let sum = summary(&run);
    assert!(sum.started_at.is_some(), "D3: started_at is set");
    assert!(sum.finished_at.is_some(), "finished_at is set");
    assert!(seconds(&sum.finished_at) >= seconds(&sum.started_at));
    assert!(seconds(&sum.started_at) >= seconds(&sum.created_at));
    let current = current_stats(&run);
    assert_eq!((current.phase_index, current.selected_targets), (0, 6));
    assert_eq!(outcome_counts(&current), (6, 0, 0, 0));
    let cumulative = cumulative_stats(&run);
    assert_eq!(
        (cumulative.phase_index, cumulative.selected_targets),
        (0, 6)
    );
    assert_eq!(outcome_counts(&cumulative), (6, 0, 0, 0));

    // Every target completed with its own child task on its own rack.
    let ts = targets(&mut s, &id).await;
    assert_eq!(ts.len(), 6);
    let task_ids: Vec<Uuid> = ts.iter().map(|t| parse(&t.task_id)).collect();
    let tasks = tasks_by_id(&mut s, &task_ids).await;
    for t in &ts {
        assert_eq!(target_status(t), pb::OperationRunTargetStatus::Completed);
        let task = &tasks[&parse(&t.task_id)];
        assert_eq!(task_status(task), pb::TaskStatus::Completed);
        assert_eq!(task.operation, "firmware_control/upgrade");
        assert_eq!(parse(&task.rack_id), parse(&t.rack_id));
        assert_eq!(t.message, task.message, "target carries its task's message");
        // Every component of the frozen set is targeted (by UUID).
        let frozen: usize = t
            .components_by_type
            .as_ref()
            .expect("components")
            .groups
            .iter()
            .map(|g| g.component_ids.len())
            .sum();
        assert_eq!(task.component_uuids.len(), frozen);
    }
    for rack in &racks {
        assert_eq!(
            rack_tasks(&mut s, *rack).await.len(),
            1,
            "one task per rack"
        );
    }

    // The simulated hardware agrees: every compute tray is on 2.0.0, and at
    // most two racks' updates overlapped. An update lasts FIRMWARE_MS and a
    // rack's next update can only start after a slot frees, i.e. after an
    // update ended.
    let states = sim
        .get_component_states(sim::GetComponentStatesRequest::default())
        .await
        .expect("component states")
        .into_inner()
        .states;
    let computes: Vec<_> = states
        .iter()
        .filter(|c| c.component_type == "Compute")
        .collect();
    assert_eq!(computes.len(), 12);
    assert!(computes.iter().all(|c| c.firmware_version == "2.0.0"));
    let log = sim
        .get_call_log(sim::GetCallLogRequest { after_sequence: 0 })
        .await
        .expect("call log")
        .into_inner()
        .entries;
    let starts: Vec<i64> = log
        .iter()
        .filter(|e| e.call == "firmware_start")
        .map(|e| e.at_unix_ms)
        .collect();
    assert_eq!(starts.len(), 6, "one firmware start per rack");
    let span = FIRMWARE_MS as i64 - 1;
    for &t in &starts {
        let overlapping = starts.iter().filter(|&&u| u <= t && t < u + span).count();
        assert!(overlapping <= 2, "{overlapping} updates overlapped at {t}");
    }
    s.stop().await;
}

// ---------------------------------------------------------------------------
// 2. Phase gates
// ---------------------------------------------------------------------------

async fn phase_gate_waits_for_advance(backend: Backend) {
    let Some(Env { mut s, .. }) = start(
        backend,
        dispatch_config(EVENT_DRIVEN_POLL_MS, FIRMWARE_MS),
        3,
    )
    .await
    else {
        return;
    };
    let mut req = request("gated", 1, 2, lenient());
    count_phases(&mut req, &[1, 2], false);
    let id = create(&mut s, req).await;
    let run_id = parse(&Some(id.clone()));

    let run = wait_status(&mut s, &id, pb::OperationRunStatus::Paused).await;
    assert_eq!(reason(&run), pb::OperationRunStatusReason::PhaseGate);
    assert_eq!(message(&run), "waiting for phase advance");
    assert_eq!(summary(&run).total_phases, 2);
    assert!(summary(&run).started_at.is_some());
    assert!(summary(&run).finished_at.is_none());
    let current = current_stats(&run);
    assert_eq!((current.phase_index, current.selected_targets), (0, 1));
    assert_eq!(outcome_counts(&current), (1, 0, 0, 0));
    // Nothing of phase 1 was submitted.
    assert_eq!(all_tasks(&mut s).await.len(), 1);
    // Pausing a gated run keeps its reason.
    let still = s
        .client
        .pause_operation_run(pb::PauseOperationRunRequest {
            id: Some(id.clone()),
        })
        .await
        .expect("pause at a phase gate")
        .into_inner();
    assert_eq!(reason(&still), pb::OperationRunStatusReason::PhaseGate);
    assert_eq!(summary(&still), summary(&run));

    let err = s
        .client
        .resume_operation_run(pb::ResumeOperationRunRequest {
            id: Some(id.clone()),
        })
        .await
        .unwrap_err();
    control_error(
        &err,
        &format!("{run_id} is paused at a phase gate; use AdvanceOperationRunPhase"),
    );
    let err = s
        .client
        .advance_operation_run_phase(pb::AdvanceOperationRunPhaseRequest {
            id: Some(id.clone()),
            expected_phase_index: Some(2),
        })
        .await
        .unwrap_err();
    control_error(&err, "expected phase 2, next phase is 1");
    assert_eq!(
        status(&get(&mut s, &id).await),
        pb::OperationRunStatus::Paused,
        "a rejected advance changes nothing"
    );

    let advanced = s
        .client
        .advance_operation_run_phase(pb::AdvanceOperationRunPhaseRequest {
            id: Some(id.clone()),
            expected_phase_index: Some(1),
        })
        .await
        .expect("advance")
        .into_inner();
    assert!(advanced.stats.is_none(), "control replies carry no stats");
    assert_eq!(message(&advanced), "advanced to phase 1");
    assert_eq!(reason(&advanced), pb::OperationRunStatusReason::None);
    assert!(matches!(
        status(&advanced),
        pb::OperationRunStatus::Running | pb::OperationRunStatus::Completed
    ));

    let run = wait_terminal(&mut s, &id).await;
    assert_eq!(
        status(&run),
        pb::OperationRunStatus::Completed,
        "{}",
        describe(&run)
    );
    assert_eq!(message(&run), "operation run completed");
    let current = current_stats(&run);
    assert_eq!((current.phase_index, current.selected_targets), (1, 2));
    let cumulative = cumulative_stats(&run);
    assert_eq!(cumulative.selected_targets, 3);
    assert_eq!(outcome_counts(&cumulative), (3, 0, 0, 0));
    assert_eq!(all_tasks(&mut s).await.len(), 3);
    s.stop().await;
}

async fn auto_advance_runs_every_phase(backend: Backend) {
    let Some(Env { mut s, .. }) = start(
        backend,
        dispatch_config(EVENT_DRIVEN_POLL_MS, FIRMWARE_MS),
        4,
    )
    .await
    else {
        return;
    };
    // count [1, 1] plus the remainder phase of 2.
    let mut req = request("auto", 1, 2, lenient());
    count_phases(&mut req, &[1, 1], true);
    let id = create(&mut s, req).await;
    let run = wait_run(&mut s, &id, "completion without a pause", |r| {
        assert_ne!(
            status(r),
            pb::OperationRunStatus::Paused,
            "an auto-advance run never stops: {}",
            describe(r)
        );
        is_terminal(r)
    })
    .await;
    assert_eq!(
        status(&run),
        pb::OperationRunStatus::Completed,
        "{}",
        describe(&run)
    );
    assert_eq!(summary(&run).total_phases, 3);
    assert_eq!(current_stats(&run).phase_index, 2);
    let ts = targets(&mut s, &id).await;
    assert_eq!(
        ts.iter().map(|t| t.phase_index).collect::<Vec<_>>(),
        [0, 1, 2, 2]
    );
    assert!(
        ts.iter()
            .all(|t| target_status(t) == pb::OperationRunTargetStatus::Completed)
    );
    s.stop().await;
}

// ---------------------------------------------------------------------------
// 3. Safety gates
// ---------------------------------------------------------------------------

/// Creates `req` after making the firmware of the racks at `failing`
/// positions of its planned order fail; returns the run id and the order.
async fn create_with_failures(
    env: &mut Env,
    req: pb::CreateOperationRunRequest,
    failing: &[usize],
) -> (pb::Uuid, Vec<Uuid>) {
    let order = planned_order(&mut env.s, &req).await;
    let faults = failing
        .iter()
        .map(|&i| firmware_fault(order[i], "fail"))
        .collect();
    set_faults(&mut env.sim, faults).await;
    (create(&mut env.s, req).await, order)
}

async fn assert_untouched_after(s: &mut TestServer, id: &pb::Uuid, from_sequence: i32) {
    let ts = targets(s, id).await;
    for t in ts.iter().filter(|t| t.sequence_index >= from_sequence) {
        assert_eq!(
            target_status(t),
            pb::OperationRunTargetStatus::Pending,
            "target {} was not claimed",
            t.sequence_index
        );
        assert!(t.task_id.is_none());
    }
}

async fn failure_count_gate_trips_at_its_threshold(backend: Backend) {
    let Some(mut env) = start(
        backend,
        dispatch_config(EVENT_DRIVEN_POLL_MS, FIRMWARE_MS),
        5,
    )
    .await
    else {
        return;
    };
    let req = request(
        "count gate",
        1,
        1,
        vec![gate_count(pb::OperationRunSafetyGateScope::CurrentPhase, 2)],
    );
    let (id, _) = create_with_failures(&mut env, req, &[0, 1]).await;
    let s = &mut env.s;
    let run = wait_status(s, &id, pb::OperationRunStatus::Paused).await;
    assert_eq!(reason(&run), pb::OperationRunStatusReason::SafetyGate);
    assert_eq!(
        message(&run),
        "failure_count safety gate tripped for current_phase: 2/5 targets failed (threshold 2)"
    );
    let ts = targets(s, &id).await;
    assert_eq!(target_status(&ts[0]), pb::OperationRunTargetStatus::Failed);
    assert_eq!(target_status(&ts[1]), pb::OperationRunTargetStatus::Failed);
    assert_untouched_after(s, &id, 2).await;

    // Resume does not check gates, but the next pass trips it again.
    let resumed = s
        .client
        .resume_operation_run(pb::ResumeOperationRunRequest {
            id: Some(id.clone()),
        })
        .await
        .expect("resume")
        .into_inner();
    assert_eq!(message(&resumed), "operation run resumed");
    let run = wait_run(s, &id, "the gate to trip again", |r| {
        reason(r) == pb::OperationRunStatusReason::SafetyGate
    })
    .await;
    assert_eq!(status(&run), pb::OperationRunStatus::Paused);
    assert_untouched_after(s, &id, 2).await;
    assert_eq!(all_tasks(s).await.len(), 2);
    env.s.stop().await;
}

async fn failure_rate_gate_trips_at_its_exact_threshold(backend: Backend) {
    let Some(mut env) = start(
        backend,
        dispatch_config(EVENT_DRIVEN_POLL_MS, FIRMWARE_MS),
        4,
    )
    .await
    else {
        return;
    };
    // 1 of 4 failed is exactly 25 %.
    let req = request(
        "rate gate",
        1,
        1,
        vec![gate_rate(pb::OperationRunSafetyGateScope::CurrentPhase, 25)],
    );
    let (id, _) = create_with_failures(&mut env, req, &[0]).await;
    let run = wait_status(&mut env.s, &id, pb::OperationRunStatus::Paused).await;
    assert_eq!(reason(&run), pb::OperationRunStatusReason::SafetyGate);
    assert_eq!(
        message(&run),
        "failure_rate safety gate tripped for current_phase: 1/4 targets failed (25%, threshold 25%)"
    );
    assert_untouched_after(&mut env.s, &id, 1).await;
    env.s.stop().await;
}

async fn cumulative_gate_counts_earlier_phases(backend: Backend) {
    let Some(mut env) = start(
        backend,
        dispatch_config(EVENT_DRIVEN_POLL_MS, FIRMWARE_MS),
        4,
    )
    .await
    else {
        return;
    };
    // Two phases of two; one failure in each. The current-phase gate (first
    // in order) never trips; the cumulative one trips in phase 1.
    let mut req = request(
        "cumulative gate",
        2,
        1,
        vec![
            gate_count(pb::OperationRunSafetyGateScope::CurrentPhase, 2),
            gate_count(pb::OperationRunSafetyGateScope::CumulativeRun, 2),
        ],
    );
    set_auto_advance(&mut req, true);
    let (id, _) = create_with_failures(&mut env, req, &[0, 2]).await;
    let run = wait_status(&mut env.s, &id, pb::OperationRunStatus::Paused).await;
    assert_eq!(reason(&run), pb::OperationRunStatusReason::SafetyGate);
    assert_eq!(
        message(&run),
        "failure_count safety gate tripped for cumulative_run: 2/4 targets failed (threshold 2)"
    );
    assert_eq!(current_stats(&run).phase_index, 1);
    let ts = targets(&mut env.s, &id).await;
    let statuses: Vec<_> = ts.iter().map(target_status).collect();
    use pb::OperationRunTargetStatus as T;
    assert_eq!(statuses, [T::Failed, T::Completed, T::Failed, T::Pending]);
    env.s.stop().await;
}

async fn failures_below_every_gate_complete_with_failures(backend: Backend) {
    let Some(mut env) = start(
        backend,
        dispatch_config(EVENT_DRIVEN_POLL_MS, FIRMWARE_MS),
        4,
    )
    .await
    else {
        return;
    };
    // 1 of 4 is 25 %: just below 26 %, and below a count of 2.
    let req = request(
        "below gates",
        1,
        1,
        vec![
            gate_rate(pb::OperationRunSafetyGateScope::CurrentPhase, 26),
            gate_count(pb::OperationRunSafetyGateScope::CumulativeRun, 2),
        ],
    );
    let (id, order) = create_with_failures(&mut env, req, &[0]).await;
    let run = wait_terminal(&mut env.s, &id).await;
    assert_eq!(
        status(&run),
        pb::OperationRunStatus::CompletedWithFailures,
        "{}",
        describe(&run)
    );
    assert_eq!(message(&run), "operation run completed with failed targets");
    assert_eq!(reason(&run), pb::OperationRunStatusReason::None);
    assert!(summary(&run).finished_at.is_some());
    assert_eq!(outcome_counts(&current_stats(&run)), (3, 1, 0, 0));
    let ts = targets(&mut env.s, &id).await;
    assert_eq!(parse(&ts[0].rack_id), order[0]);
    assert_eq!(target_status(&ts[0]), pb::OperationRunTargetStatus::Failed);
    assert!(ts[0].task_id.is_some(), "a failed target keeps its task");
    env.s.stop().await;
}

async fn all_targets_failed_fails_the_run(backend: Backend) {
    let Some(mut env) = start(
        backend,
        dispatch_config(EVENT_DRIVEN_POLL_MS, FIRMWARE_MS),
        2,
    )
    .await
    else {
        return;
    };
    let req = request(
        "all fail",
        1,
        2,
        vec![gate_rate(
            pb::OperationRunSafetyGateScope::CurrentPhase,
            100,
        )],
    );
    let (id, _) = create_with_failures(&mut env, req, &[0, 1]).await;
    let run = wait_terminal(&mut env.s, &id).await;
    assert_eq!(
        status(&run),
        pb::OperationRunStatus::Failed,
        "{}",
        describe(&run)
    );
    assert_eq!(message(&run), "operation run failed");
    assert_eq!(outcome_counts(&current_stats(&run)), (0, 2, 0, 0));
    env.s.stop().await;
}

// ---------------------------------------------------------------------------
// 4. Conflict retry (D1)
// ---------------------------------------------------------------------------

fn retry_policy(req: &mut pb::CreateOperationRunRequest, initial: i64, max: i64, timeout: i64) {
    let d = |seconds| Some(prost_types::Duration { seconds, nanos: 0 });
    options(req).conflict_policy = Some(pb::OperationRunConflictPolicy {
        strategy: Some(pb::operation_run_conflict_policy::Strategy::Retry(
            pb::OperationRunConflictRetryPolicy {
                retry_timeout: d(timeout),
                initial_retry_delay: d(initial),
                max_retry_delay: d(max),
            },
        )),
    });
}

/// Holds the rack with a power-on task that hangs (its shelf's power call
/// never returns); returns the task id once it runs.
async fn hold_rack(env: &mut Env, rack: Uuid) -> Uuid {
    set_faults(
        &mut env.sim,
        vec![sim::Fault {
            rack: ext(rack),
            operation: "power".into(),
            effect: "hang".into(),
            ..Default::default()
        }],
    )
    .await;
    let resp = env
        .s
        .client
        .power_on_rack(pb::PowerOnRackRequest {
            target_spec: Some(pb::OperationTargetSpec {
                targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
                    targets: vec![pb::RackTarget {
                        identifier: Some(pb::rack_target::Identifier::Id(uuid(rack))),
                        component_types: Vec::new(),
                    }],
                })),
            }),
            description: "holds the rack".into(),
            ..Default::default()
        })
        .await
        .expect("power on")
        .into_inner();
    let task = parse(&resp.task_ids.first().cloned());
    let mut changes = env.s.waiter("the power task to run", DEADLINE);
    loop {
        let t = &tasks_by_id(&mut env.s, &[task]).await[&task];
        if task_status(t) == pb::TaskStatus::Running {
            return task;
        }
        changes.next(t).await;
    }
}

async fn conflict_backs_off_then_times_out(backend: Backend) {
    // The poll interval is long: re-claims at each backoff's end must come
    // from the dispatcher's own timer, not from polling.
    let Some(mut env) = start(
        backend,
        dispatch_config(EVENT_DRIVEN_POLL_MS, FIRMWARE_MS),
        1,
    )
    .await
    else {
        return;
    };
    let rack = env.racks[0];
    let holder = hold_rack(&mut env, rack).await;
    let mut req = request("conflict", 1, 1, lenient());
    retry_policy(&mut req, 1, 2, 6);
    let s = &mut env.s;
    let id = create(s, req).await;

    // Record every distinct blocked write (its updated_at) until the pause,
    // re-reading after each store write.
    let mut changes = s.waiter("the timeout pause", Duration::from_secs(15));
    let mut blocks: Vec<f64> = Vec::new();
    let mut target_id = String::new();
    let run = loop {
        let ts = targets(s, &id).await;
        let t = &ts[0];
        if target_status(t) == pb::OperationRunTargetStatus::Blocked {
            assert_eq!(
                t.message,
                format!("rack {rack} already has a conflicting task")
            );
            assert!(t.task_id.is_none());
            let at = seconds(&t.updated_at);
            if blocks.last() != Some(&at) {
                blocks.push(at);
            }
            target_id = t.id.as_ref().expect("target id").id.clone();
        }
        let run = get(s, &id).await;
        if status(&run) == pb::OperationRunStatus::Paused {
            break run;
        }
        changes
            .next(format!("{}; blocks at {blocks:?}", describe(&run)))
            .await;
    };
    assert_eq!(
        reason(&run),
        pb::OperationRunStatusReason::ConflictRetryTimeout,
        "{}",
        describe(&run)
    );
    assert_eq!(
        message(&run),
        format!("target {target_id} blocked by rack conflict for 6s")
    );
    // Blocked at 0, re-blocked after 1 s, after 2 s (doubled), after 2 s
    // again (capped at max_retry_delay); the streak began at the first
    // block, so the pause comes 6 s after it — before the next retry (due
    // at 7 s), on the dispatcher's own timer.
    let gaps: Vec<f64> = blocks.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps.len(), 3, "blocks at {blocks:?}");
    assert!((0.95..1.5).contains(&gaps[0]), "first backoff 1s: {gaps:?}");
    assert!(
        (1.95..2.5).contains(&gaps[1]),
        "second backoff 2s: {gaps:?}"
    );
    assert!(
        (1.95..2.5).contains(&gaps[2]),
        "third backoff capped at 2s: {gaps:?}"
    );
    let paused_at = seconds(&summary(&run).updated_at);
    let streak = paused_at - blocks[0];
    assert!(
        (5.9..6.8).contains(&streak),
        "paused {streak}s into the streak"
    );
    // Still no child task: the firmware was never submitted.
    let tasks = rack_tasks(s, rack).await;
    assert_eq!(tasks.len(), 1);
    assert_eq!(parse(&tasks[0].id), holder);
    env.s.stop().await;
}

async fn released_conflict_lets_the_target_proceed(backend: Backend) {
    let Some(mut env) = start(
        backend,
        dispatch_config(EVENT_DRIVEN_POLL_MS, FIRMWARE_MS),
        2,
    )
    .await
    else {
        return;
    };
    let rack = env.racks[0];
    let holder = hold_rack(&mut env, rack).await;
    let mut req = request("conflict released", 1, 2, lenient());
    retry_policy(&mut req, 1, 4, 30);
    let s = &mut env.s;
    let id = create(s, req).await;
    let blocked = wait_targets(s, &id, "a blocked target", |ts| {
        ts.iter()
            .any(|t| target_status(t) == pb::OperationRunTargetStatus::Blocked)
    })
    .await;
    let blocked = blocked
        .iter()
        .find(|t| target_status(t) == pb::OperationRunTargetStatus::Blocked)
        .expect("blocked")
        .clone();
    assert_eq!(parse(&blocked.rack_id), rack);
    // The other target is not held up; the run says what it waits for.
    let run = wait_run(s, &id, "the conflict message", |r| {
        message(r) == "1 target waiting on rack conflicts"
    })
    .await;
    assert_eq!(status(&run), pb::OperationRunStatus::Running);

    s.client
        .cancel_task(pb::CancelTaskRequest {
            task_id: Some(uuid(holder)),
        })
        .await
        .expect("cancel the holder");
    let run = wait_terminal(s, &id).await;
    assert_eq!(
        status(&run),
        pb::OperationRunStatus::Completed,
        "{}",
        describe(&run)
    );
    let ts = targets(s, &id).await;
    assert!(
        ts.iter()
            .all(|t| target_status(t) == pb::OperationRunTargetStatus::Completed)
    );
    let firmware: Vec<_> = rack_tasks(s, rack)
        .await
        .into_iter()
        .filter(|t| t.operation == "firmware_control/upgrade")
        .collect();
    assert_eq!(firmware.len(), 1, "one child task after the conflict");
    env.s.stop().await;
}

// ---------------------------------------------------------------------------
// 5. Pause, resume, cancel
// ---------------------------------------------------------------------------

async fn pause_and_resume_mid_phase(backend: Backend) {
    let Some(Env { mut s, .. }) =
        start(backend, dispatch_config(EVENT_DRIVEN_POLL_MS, 300), 6).await
    else {
        return;
    };
    let id = create(&mut s, request("pause", 1, 2, lenient())).await;
    let run_id = parse(&Some(id.clone()));
    wait_targets(&mut s, &id, "a submitted target", |ts| {
        ts.iter()
            .any(|t| target_status(t) == pb::OperationRunTargetStatus::Submitted)
    })
    .await;
    let paused = s
        .client
        .pause_operation_run(pb::PauseOperationRunRequest {
            id: Some(id.clone()),
        })
        .await
        .expect("pause")
        .into_inner();
    assert_eq!(status(&paused), pb::OperationRunStatus::Paused);
    assert_eq!(
        reason(&paused),
        pb::OperationRunStatusReason::OperatorPaused
    );
    assert_eq!(message(&paused), "operation run paused by operator");
    assert!(paused.stats.is_none());
    assert!(summary(&paused).started_at.is_some());

    // Pausing again keeps it as it is.
    let again = s
        .client
        .pause_operation_run(pb::PauseOperationRunRequest {
            id: Some(id.clone()),
        })
        .await
        .expect("pause again")
        .into_inner();
    assert_eq!(summary(&again), summary(&paused));

    // In-flight children finish; nothing new is submitted while paused.
    let mut changes = s.waiter("the children to finish", DEADLINE);
    loop {
        let active = active_tasks(&mut s).await;
        if active.is_empty() {
            break;
        }
        changes.next(active).await;
    }
    let submitted = all_tasks(&mut s).await.len();
    assert!((1..=2).contains(&submitted), "{submitted} tasks at pause");
    // Scenario, not polling: several dispatcher polls pass while paused
    // (the absence of a submission is no event to wait for).
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        all_tasks(&mut s).await.len(),
        submitted,
        "no new child while paused"
    );
    let run = get(&mut s, &id).await;
    assert_eq!(status(&run), pb::OperationRunStatus::Paused);
    assert_eq!(message(&run), "operation run paused by operator");
    let ts = targets(&mut s, &id).await;
    assert_eq!(
        ts.iter().filter(|t| t.task_id.is_some()).count(),
        submitted,
        "targets are not touched while paused"
    );

    // Advance is for phase gates only.
    let err = s
        .client
        .advance_operation_run_phase(pb::AdvanceOperationRunPhaseRequest {
            id: Some(id.clone()),
            expected_phase_index: None,
        })
        .await
        .unwrap_err();
    control_error(&err, &format!("{run_id} is not paused at a phase gate"));

    let resumed = s
        .client
        .resume_operation_run(pb::ResumeOperationRunRequest {
            id: Some(id.clone()),
        })
        .await
        .expect("resume")
        .into_inner();
    assert_eq!(status(&resumed), pb::OperationRunStatus::Running);
    assert_eq!(reason(&resumed), pb::OperationRunStatusReason::None);
    assert_eq!(message(&resumed), "operation run resumed");
    assert_eq!(summary(&resumed).started_at, summary(&paused).started_at);

    let err = s
        .client
        .resume_operation_run(pb::ResumeOperationRunRequest {
            id: Some(id.clone()),
        })
        .await
        .unwrap_err();
    control_error(&err, &format!("{run_id} is not paused"));

    let run = wait_terminal(&mut s, &id).await;
    assert_eq!(
        status(&run),
        pb::OperationRunStatus::Completed,
        "{}",
        describe(&run)
    );
    assert_eq!(all_tasks(&mut s).await.len(), 6);
    s.stop().await;
}

async fn cancel_mid_phase_terminates_children(backend: Backend) {
    let Some(mut env) = start(
        backend,
        dispatch_config(EVENT_DRIVEN_POLL_MS, FIRMWARE_MS),
        5,
    )
    .await
    else {
        return;
    };
    // Every update hangs: children stay running until cancelled.
    let faults = env
        .racks
        .iter()
        .map(|r| firmware_fault(*r, "hang"))
        .collect();
    set_faults(&mut env.sim, faults).await;
    let s = &mut env.s;
    let id = create(s, request("cancel", 1, 2, lenient())).await;
    let before = wait_targets(s, &id, "two submitted targets", |ts| {
        ts.iter()
            .filter(|t| {
                target_status(t) == pb::OperationRunTargetStatus::Submitted && t.task_id.is_some()
            })
            .count()
            == 2
    })
    .await;
    let children: Vec<Uuid> = before
        .iter()
        .filter_map(|t| t.task_id.as_ref())
        .map(|t| parse(&Some(t.clone())))
        .collect();

    let cancelled = s
        .client
        .cancel_operation_run(pb::CancelOperationRunRequest {
            id: Some(id.clone()),
            reason: "  operator abort  ".into(),
        })
        .await
        .expect("cancel")
        .into_inner();
    // The dispatcher never writes a cancelled run's targets again, so this
    // snapshot must hold from now on (reconciliation may have updated the
    // targets' messages between the wait above and the cancel).
    let before = targets(s, &id).await;
    assert_eq!(status(&cancelled), pb::OperationRunStatus::Cancelled);
    assert_eq!(reason(&cancelled), pb::OperationRunStatusReason::None);
    assert_eq!(
        message(&cancelled),
        "operation run cancelled: operator abort"
    );
    assert!(summary(&cancelled).finished_at.is_some());
    assert!(cancelled.stats.is_none());

    // The children are terminated…
    let mut changes = s.waiter("the children to be terminated", DEADLINE);
    loop {
        let tasks = tasks_by_id(s, &children).await;
        if tasks
            .values()
            .all(|t| task_status(t) == pb::TaskStatus::Terminated)
        {
            break;
        }
        changes.next(tasks).await;
    }
    // …the targets are left as they were, and nothing else is submitted.
    // Scenario, not polling: dispatcher polls pass after the cancel (the
    // absence of a submission is no event to wait for).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = targets(s, &id).await;
    assert_eq!(
        after
            .iter()
            .map(|t| (target_status(t), t.task_id.clone(), t.message.clone()))
            .collect::<Vec<_>>(),
        before
            .iter()
            .map(|t| (target_status(t), t.task_id.clone(), t.message.clone()))
            .collect::<Vec<_>>()
    );
    assert_eq!(all_tasks(s).await.len(), 2);
    let run = get(s, &id).await;
    assert_eq!(status(&run), pb::OperationRunStatus::Cancelled);
    assert_eq!(message(&run), "operation run cancelled: operator abort");
    env.s.stop().await;
}

/// A cancel that lands while the dispatcher is still submitting the
/// children it claimed: those children did not have a task id when the
/// cancel listed the targets, and must not be left running.
async fn cancel_during_submission_leaves_no_child_running(backend: Backend) {
    let Some(mut env) = start(
        backend,
        dispatch_config(EVENT_DRIVEN_POLL_MS, FIRMWARE_MS),
        8,
    )
    .await
    else {
        return;
    };
    let faults = env
        .racks
        .iter()
        .map(|r| firmware_fault(*r, "hang"))
        .collect();
    set_faults(&mut env.sim, faults).await;
    let s = &mut env.s;
    let id = create(s, request("cancel early", 1, 8, lenient())).await;
    // Cancel as soon as the first child exists: the others are being
    // submitted right now.
    let mut changes = s.waiter("a first child", DEADLINE);
    while all_tasks(s).await.is_empty() {
        changes.next("no task").await;
    }
    s.client
        .cancel_operation_run(pb::CancelOperationRunRequest {
            id: Some(id.clone()),
            reason: String::new(),
        })
        .await
        .expect("cancel");
    // Every child that exists — now or after the dispatcher's in-flight
    // submissions — ends terminated.
    let mut changes = s.waiter(
        "every child terminated after the cancel",
        Duration::from_secs(10),
    );
    loop {
        let tasks = all_tasks(s).await;
        let active: Vec<_> = tasks
            .iter()
            .filter(|t| task_status(t) != pb::TaskStatus::Terminated)
            .map(|t| (t.id.clone(), task_status(t)))
            .collect();
        if active.is_empty() {
            // Scenario, not polling: hold a moment to see that nothing new
            // appears (an absence is no event to wait for). A submission
            // already in flight at the cancel may still land (seen once in
            // CI under load, 6 → 8 children): it must end terminated too,
            // so look again rather than stop at the count.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let later = all_tasks(s).await;
            if later.len() == tasks.len()
                && later
                    .iter()
                    .all(|t| task_status(t) == pb::TaskStatus::Terminated)
            {
                break;
            }
            continue;
        }
        changes
            .next(format!(
                "children left running after the cancel: {active:?}"
            ))
            .await;
    }
    let run = get(s, &id).await;
    assert_eq!(status(&run), pb::OperationRunStatus::Cancelled);
    assert_eq!(message(&run), "operation run cancelled");
    env.s.stop().await;
}

/// D3: a run paused while still pending gets `started_at` when it is
/// resumed (the reference never sets it on that path).
async fn started_at_is_set_when_a_run_paused_while_pending_resumes(backend: Backend) {
    let mut idle = dispatch_config(EVENT_DRIVEN_POLL_MS, FIRMWARE_MS);
    idle.dispatcher.enabled = false;
    let Some(Env { mut s, .. }) = start(backend, idle, 2).await else {
        return;
    };
    let id = create(&mut s, request("pending pause", 1, 2, lenient())).await;
    let run = get(&mut s, &id).await;
    assert_eq!(status(&run), pb::OperationRunStatus::Pending);
    let paused = s
        .client
        .pause_operation_run(pb::PauseOperationRunRequest {
            id: Some(id.clone()),
        })
        .await
        .expect("pause a pending run")
        .into_inner();
    assert_eq!(status(&paused), pb::OperationRunStatus::Paused);
    assert_eq!(
        reason(&paused),
        pb::OperationRunStatusReason::OperatorPaused
    );
    assert!(summary(&paused).started_at.is_none());

    // A driving server leaves the paused run alone…
    s.restart_with(dispatch_config(EVENT_DRIVEN_POLL_MS, FIRMWARE_MS))
        .await;
    // Scenario, not polling: the new server's dispatcher polls a few times
    // (leaving the run alone is no event to wait for).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let run = get(&mut s, &id).await;
    assert_eq!(summary(&run), summary(&paused));
    assert!(all_tasks(&mut s).await.is_empty());

    // …until it is resumed, which starts it.
    let resumed = s
        .client
        .resume_operation_run(pb::ResumeOperationRunRequest {
            id: Some(id.clone()),
        })
        .await
        .expect("resume")
        .into_inner();
    assert_eq!(status(&resumed), pb::OperationRunStatus::Running);
    assert!(summary(&resumed).started_at.is_some(), "D3");
    let run = wait_terminal(&mut s, &id).await;
    assert_eq!(status(&run), pb::OperationRunStatus::Completed);
    assert_eq!(summary(&run).started_at, summary(&resumed).started_at);
    s.stop().await;
}

async fn controls_on_terminal_runs(backend: Backend) {
    let Some(Env { mut s, .. }) = start(
        backend,
        dispatch_config(EVENT_DRIVEN_POLL_MS, FIRMWARE_MS),
        2,
    )
    .await
    else {
        return;
    };
    let id = create(&mut s, request("terminal", 1, 2, lenient())).await;
    let run_id = parse(&Some(id.clone()));
    let done = wait_terminal(&mut s, &id).await;
    assert_eq!(status(&done), pb::OperationRunStatus::Completed);

    let err = s
        .client
        .pause_operation_run(pb::PauseOperationRunRequest {
            id: Some(id.clone()),
        })
        .await
        .unwrap_err();
    control_error(&err, &format!("{run_id} is in terminal state completed"));
    let err = s
        .client
        .resume_operation_run(pb::ResumeOperationRunRequest {
            id: Some(id.clone()),
        })
        .await
        .unwrap_err();
    control_error(&err, &format!("{run_id} is not paused"));

    let unchanged = s
        .client
        .cancel_operation_run(pb::CancelOperationRunRequest {
            id: Some(id.clone()),
            reason: "too late".into(),
        })
        .await
        .expect("cancel of a terminal run")
        .into_inner();
    assert_eq!(summary(&unchanged), summary(&done), "returned unchanged");
    let again = get(&mut s, &id).await;
    assert_eq!(summary(&again), summary(&done), "nothing written");

    let missing = Uuid::new_v4();
    let err = s
        .client
        .pause_operation_run(pb::PauseOperationRunRequest {
            id: Some(uuid(missing)),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(err.message(), format!("operation run not found: {missing}"));
    s.stop().await;
}

// ---------------------------------------------------------------------------
// 6. WatchOperationRun
// ---------------------------------------------------------------------------

/// The next streamed message (`None` at the end), within the deadline.
async fn next(stream: &mut tonic::Streaming<pb::OperationRun>) -> Option<pb::OperationRun> {
    tokio::time::timeout(DEADLINE, stream.message())
        .await
        .expect("watch answers in time")
        .expect("watch message")
}

async fn watch_streams_until_terminal(backend: Backend) {
    let Some(Env { mut s, .. }) = start(
        backend,
        dispatch_config(EVENT_DRIVEN_POLL_MS, FIRMWARE_MS),
        4,
    )
    .await
    else {
        return;
    };
    let mut req = request("watched", 1, 1, lenient());
    count_phases(&mut req, &[2], false);
    let id = create(&mut s, req).await;

    let mut stream = s
        .extensions()
        .watch_operation_run(pb::WatchOperationRunRequest {
            id: Some(id.clone()),
        })
        .await
        .expect("watch")
        .into_inner();
    // The current state at once, with stats.
    let first = next(&mut stream).await.expect("a first message");
    assert_eq!(summary(&first).id, Some(id.clone()));
    assert!(first.stats.is_some());
    assert!(first.configuration.is_some());

    // Then changes, up to the phase gate.
    let mut seen = vec![first];
    while status(seen.last().expect("seen")) != pb::OperationRunStatus::Paused {
        let m = next(&mut stream)
            .await
            .expect("the stream stays open while the run lives");
        assert_ne!(Some(&m), seen.last(), "only changes are streamed");
        seen.push(m);
    }
    assert_eq!(
        message(seen.last().expect("seen")),
        "waiting for phase advance"
    );
    assert!(
        seen.iter()
            .any(|m| status(m) == pb::OperationRunStatus::Running),
        "the running state was streamed"
    );

    s.client
        .advance_operation_run_phase(pb::AdvanceOperationRunPhaseRequest {
            id: Some(id.clone()),
            expected_phase_index: Some(1),
        })
        .await
        .expect("advance");
    let last = loop {
        match next(&mut stream).await {
            Some(m) => seen.push(m),
            None => break seen.last().expect("seen").clone(),
        }
    };
    assert_eq!(status(&last), pb::OperationRunStatus::Completed);
    let stats = cumulative_stats(&last);
    assert_eq!(stats.selected_targets, 4);
    assert_eq!(outcome_counts(&stats), (4, 0, 0, 0));
    // Watch coalesces: it streams the state it reads after each change, so
    // a short-lived state (like "advanced to phase 1", overwritten by the
    // next claim at once) may be skipped. Consecutive messages differ.
    assert!(seen.windows(2).all(|w| w[0] != w[1]));
    assert_eq!(current_stats(&last).phase_index, 1);

    // A terminal run: its state once, then the end.
    let mut stream = s
        .extensions()
        .watch_operation_run(pb::WatchOperationRunRequest {
            id: Some(id.clone()),
        })
        .await
        .expect("watch a terminal run")
        .into_inner();
    let only = next(&mut stream).await.expect("the terminal state");
    assert_eq!(summary(&only), summary(&last));
    assert!(next(&mut stream).await.is_none(), "then the stream ends");

    let err = s
        .extensions()
        .watch_operation_run(pb::WatchOperationRunRequest {
            id: Some(uuid(Uuid::new_v4())),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    s.stop().await;
}

// ---------------------------------------------------------------------------
// 7. One child per target, across a restart
// ---------------------------------------------------------------------------

async fn restart_mid_run_submits_each_target_once(backend: Backend) {
    let config = dispatch_config(EVENT_DRIVEN_POLL_MS, 300);
    let Some(Env { mut s, racks, .. }) = start(backend, config.clone(), 6).await else {
        return;
    };
    let mut req = request("restart", 1, 2, lenient());
    upgrade(&mut req).description = "restartable upgrade".into();
    let id = create(&mut s, req).await;
    // Stop while one target is done and others are in flight.
    wait_targets(&mut s, &id, "progress", |ts| {
        let count = |st| ts.iter().filter(|t| target_status(t) == st).count();
        count(pb::OperationRunTargetStatus::Completed) >= 1
            && count(pb::OperationRunTargetStatus::Submitted) >= 1
    })
    .await;
    s.restart_with(config).await;

    let run = wait_terminal(&mut s, &id).await;
    assert_eq!(
        status(&run),
        pb::OperationRunStatus::Completed,
        "{}",
        describe(&run)
    );
    let ts = targets(&mut s, &id).await;
    let mut by_rack: BTreeMap<Uuid, Uuid> = BTreeMap::new();
    for t in &ts {
        assert_eq!(target_status(t), pb::OperationRunTargetStatus::Completed);
        by_rack.insert(parse(&t.rack_id), parse(&t.task_id));
    }
    for rack in &racks {
        let tasks = rack_tasks(&mut s, *rack).await;
        assert_eq!(tasks.len(), 1, "exactly one child task on {}", ext(*rack));
        assert_eq!(parse(&tasks[0].id), by_rack[rack]);
        assert_eq!(tasks[0].description, "restartable upgrade");
        assert_eq!(task_status(&tasks[0]), pb::TaskStatus::Completed);
    }
    s.stop().await;
}
