//! Tasks, operation rules and the waiting queue through the real gRPC API,
//! on SQLite and PostgreSQL (spec flow-core §3, §4, §5.2–5.5).
//!
//! Every server here drives the in-process simulated fleet with short
//! latencies; what the "hardware" was asked to do is read back through the
//! SimAdmin service on the same port (call log, component states), and
//! tasks are held running with `hang` faults. Firmware updates take 50 ms:
//! the built-in firmware rule polls only every 2 minutes, so a built-in
//! firmware task ends quickly only because the sim notifies pollers the
//! moment an update ends (docs/tasks.md) — these tests rely on that.

use rackflow_testkit as common;
use rackflow_testkit::both_stores;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{Backend, TestServer, fixture_fleet, fixture_id, uuid};
use rackflow_api::sim::v1 as simpb;
use rackflow_api::sim::v1::sim_admin_client::SimAdminClient;
use rackflow_api::v1 as pb;
use rackflow_api::v1::flow_client::FlowClient;
use rackflow_engine::sim::{SimConfig, SimFleet};
use rackflow_server::Config;
use serde_json::{Value, json};
use tonic::Code;
use tonic::transport::Channel;
use uuid::Uuid;

both_stores!(
    rack_operations_complete_with_task_fields_and_reports,
    multi_rack_targets_fan_out_and_empty_resolutions_fail,
    builtin_rules_run_stages_in_order,
    conflict_matrix_through_the_api,
    queue_waits_with_deadline_and_caps_at_five_then_runs_fifo,
    queue_promotion_never_overtakes,
    queue_timeout_expires_waiting_tasks,
    cancel_in_every_state,
    rule_validation_errors_write_nothing,
    rule_crud_defaults_and_associations,
    rule_resolution_order,
    rule_steps_run_in_parallel_and_in_batches,
    queued_task_keeps_its_explicit_rule,
    fault_plan_fails_the_task_with_its_stage,
    restart_resumes_a_running_task,
);

// ---- harness -------------------------------------------------------------------

/// How long any wait may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(30);
/// Poll interval of the waits.
const POLL: Duration = Duration::from_millis(20);

fn config() -> Config {
    let mut config = Config {
        sim: SimConfig {
            power_ms: 20,
            firmware_update_ms: 50,
            jitter: 0.0,
            ..SimConfig::default()
        },
        ..Config::default()
    };
    config.dispatcher.enabled = false;
    config
}

async fn start(backend: Backend) -> Option<(TestServer, SimAdminClient<Channel>)> {
    start_with(backend, config()).await
}

async fn start_with(
    backend: Backend,
    config: Config,
) -> Option<(TestServer, SimAdminClient<Channel>)> {
    let server = TestServer::start_with(backend, config).await?;
    let sim = sim_client(&server).await;
    Some((server, sim))
}

async fn sim_client(server: &TestServer) -> SimAdminClient<Channel> {
    SimAdminClient::connect(format!("http://{}", server.addr))
        .await
        .expect("connect SimAdmin")
}

type Client = FlowClient<Channel>;

// ---- targets ---------------------------------------------------------------------

/// External id of a fixture component: `r-0001-compute-00`.
fn ext(rack: u32, kind: &str, i: usize) -> String {
    format!("r-{rack:04}-{kind}-{i:02}")
}

/// External id of fixture rack `n` (the sim's rack name for its components).
fn rack_ext(rack: u32) -> String {
    format!("r-{rack:04}")
}

fn racks_spec(targets: Vec<pb::RackTarget>) -> pb::OperationTargetSpec {
    pb::OperationTargetSpec {
        targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
            targets,
        })),
    }
}

fn rack_by_id(n: u32, types: &[pb::ComponentType]) -> pb::RackTarget {
    pb::RackTarget {
        identifier: Some(pb::rack_target::Identifier::Id(uuid(fixture_id(n)))),
        component_types: types.iter().map(|t| *t as i32).collect(),
    }
}

/// The whole fixture rack `n`.
fn whole(n: u32) -> pb::OperationTargetSpec {
    racks_spec(vec![rack_by_id(n, &[])])
}

/// The components of fixture rack `n` of these types.
fn typed(n: u32, types: &[pb::ComponentType]) -> pb::OperationTargetSpec {
    racks_spec(vec![rack_by_id(n, types)])
}

/// Components by external id (`kind` is `compute`, `nvswitch`, `powershelf`).
fn components(rack: u32, items: &[(&str, usize)]) -> pb::OperationTargetSpec {
    let targets = items
        .iter()
        .map(|(kind, i)| pb::ComponentTarget {
            identifier: Some(pb::component_target::Identifier::External(
                pb::ExternalRef {
                    r#type: match *kind {
                        "compute" => pb::ComponentType::Compute,
                        "nvswitch" => pb::ComponentType::Nvswitch,
                        _ => pb::ComponentType::Powershelf,
                    } as i32,
                    id: ext(rack, kind, *i),
                },
            )),
        })
        .collect();
    pb::OperationTargetSpec {
        targets: Some(pb::operation_target_spec::Targets::Components(
            pb::ComponentTargets { targets },
        )),
    }
}

// ---- submitting ------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    PowerOn,
    PowerOff,
    Reset,
    AcPowerCycle,
    Firmware,
}

/// How a submission treats a conflict.
#[derive(Debug, Clone, Copy)]
enum Conflict {
    /// No queue options at all (treated as reject).
    Unset,
    Reject,
    /// Queue, with this timeout in seconds (0 = server default).
    Queue(i32),
}

#[derive(Debug, Clone)]
struct Submit {
    op: Op,
    spec: pb::OperationTargetSpec,
    queue: Conflict,
    rule_id: Option<Uuid>,
    forced: bool,
    description: String,
}

fn submit(op: Op, spec: pb::OperationTargetSpec) -> Submit {
    Submit {
        op,
        spec,
        queue: Conflict::Reject,
        rule_id: None,
        forced: false,
        description: String::new(),
    }
}

impl Submit {
    fn queue(mut self, queue: Conflict) -> Self {
        self.queue = queue;
        self
    }

    fn rule(mut self, rule_id: Uuid) -> Self {
        self.rule_id = Some(rule_id);
        self
    }

    fn forced(mut self) -> Self {
        self.forced = true;
        self
    }

    fn described(mut self, description: &str) -> Self {
        self.description = description.into();
        self
    }

    async fn send(self, client: &mut Client) -> Result<Vec<Uuid>, tonic::Status> {
        let queue_options = match self.queue {
            Conflict::Unset => None,
            Conflict::Reject => Some(pb::QueueOptions {
                conflict_strategy: pb::ConflictStrategy::Reject as i32,
                queue_timeout_seconds: 0,
            }),
            Conflict::Queue(timeout) => Some(pb::QueueOptions {
                conflict_strategy: pb::ConflictStrategy::Queue as i32,
                queue_timeout_seconds: timeout,
            }),
        };
        let rule_id = self.rule_id.map(uuid);
        let spec = Some(self.spec);
        let description = self.description;
        let reply = match self.op {
            Op::PowerOn => {
                client
                    .power_on_rack(pb::PowerOnRackRequest {
                        target_spec: spec,
                        description,
                        queue_options,
                        rule_id,
                        override_readiness_check: false,
                    })
                    .await
            }
            Op::PowerOff => {
                client
                    .power_off_rack(pb::PowerOffRackRequest {
                        target_spec: spec,
                        forced: self.forced,
                        description,
                        queue_options,
                        rule_id,
                        override_readiness_check: false,
                    })
                    .await
            }
            Op::AcPowerCycle => {
                client
                    .ac_power_cycle_rack(pb::AcPowerCycleRackRequest {
                        target_spec: spec,
                        description,
                        queue_options,
                        rule_id,
                        override_readiness_check: false,
                    })
                    .await
            }
            Op::Reset => {
                client
                    .power_reset_rack(pb::PowerResetRackRequest {
                        target_spec: spec,
                        forced: self.forced,
                        description,
                        queue_options,
                        rule_id,
                        override_readiness_check: false,
                    })
                    .await
            }
            Op::Firmware => {
                client
                    .upgrade_firmware(pb::UpgradeFirmwareRequest {
                        target_spec: spec,
                        target_version: Some("2.0.0".into()),
                        description,
                        queue_options,
                        rule_id,
                        ..Default::default()
                    })
                    .await
            }
        }?;
        Ok(reply
            .into_inner()
            .task_ids
            .iter()
            .map(|id| Uuid::parse_str(&id.id).expect("task id"))
            .collect())
    }

    /// Sends and expects exactly one task.
    async fn one(self, client: &mut Client) -> Uuid {
        let what = format!("{:?}", self.op);
        let ids = self
            .send(client)
            .await
            .unwrap_or_else(|e| panic!("submit {what}: {e:?}"));
        assert_eq!(ids.len(), 1, "one task for one rack");
        ids[0]
    }

    /// Sends and expects the rack-conflict rejection for fixture rack `rack`.
    async fn conflicts(self, client: &mut Client, rack: u32) {
        let what = format!("{:?} on {:?}", self.op, self.spec);
        let err = self
            .send(client)
            .await
            .expect_err(&format!("{what} must conflict"));
        assert_eq!(err.code(), Code::FailedPrecondition, "{what}: {err:?}");
        assert_eq!(
            err.message(),
            format!("rack {} already has a conflicting task", fixture_id(rack)),
            "{what}"
        );
    }
}

// ---- reading tasks ---------------------------------------------------------------

async fn task(client: &mut Client, id: Uuid) -> pb::Task {
    let mut tasks = client
        .get_tasks_by_i_ds(pb::GetTasksByIDsRequest {
            task_ids: vec![uuid(id)],
        })
        .await
        .expect("get tasks")
        .into_inner()
        .tasks;
    assert_eq!(tasks.len(), 1, "task {id} exists");
    tasks.remove(0)
}

/// Waits until `done` holds for the task, re-reading it after each store
/// write; fails after [`DEADLINE`].
async fn wait_task(
    s: &mut TestServer,
    id: Uuid,
    what: &str,
    done: impl Fn(&pb::Task) -> bool,
) -> pb::Task {
    let mut changes = s.waiter(format!("task {id} to become {what}"), DEADLINE);
    loop {
        let t = task(&mut s.client, id).await;
        if done(&t) {
            return t;
        }
        changes.next(&t).await;
    }
}

async fn wait_status(s: &mut TestServer, id: Uuid, status: pb::TaskStatus) -> pb::Task {
    wait_task(s, id, &format!("{status:?}"), |t| t.status == status as i32).await
}

async fn completed(s: &mut TestServer, id: Uuid) -> pb::Task {
    let t = wait_task(s, id, "finished", |t| {
        t.finished_at.is_some() && t.status != pb::TaskStatus::Waiting as i32
    })
    .await;
    assert_eq!(
        t.status,
        pb::TaskStatus::Completed as i32,
        "task {id} completed: {t:#?}"
    );
    t
}

async fn cancel(client: &mut Client, id: Uuid) -> Result<pb::Task, tonic::Status> {
    client
        .cancel_task(pb::CancelTaskRequest {
            task_id: Some(uuid(id)),
        })
        .await
        .map(|r| r.into_inner().task.expect("task in cancel response"))
}

fn status(t: &pb::Task) -> pb::TaskStatus {
    pb::TaskStatus::try_from(t.status).expect("known status")
}

fn report(t: &pb::Task) -> Value {
    serde_json::from_str(&t.report).unwrap_or_else(|e| panic!("report JSON ({e}): {t:#?}"))
}

/// `(seconds, nanos)`: ordered like the instant.
fn at(ts: &Option<prost_types::Timestamp>) -> (i64, i32) {
    let ts = ts.as_ref().expect("timestamp set");
    (ts.seconds, ts.nanos)
}

/// Asserts a finished task's report: version 1, these stages in order, each
/// completed with completed steps of the given types and totals.
fn assert_completed_report(t: &pb::Task, stages: &[&[(&str, u64)]]) {
    let r = report(t);
    assert_eq!(r["version"], 1, "{r:#}");
    assert!(r.get("error").is_none(), "no report error: {r:#}");
    let got = r["stages"].as_array().expect("stages");
    assert_eq!(got.len(), stages.len(), "stage count: {r:#}");
    for (i, (stage, want)) in got.iter().zip(stages).enumerate() {
        assert_eq!(stage["number"], i as u64 + 1, "{r:#}");
        assert_eq!(stage["status"], "completed", "{r:#}");
        assert!(stage["started_at"].is_string() && stage["finished_at"].is_string());
        let steps = stage["steps"].as_array().expect("steps");
        let types: Vec<(&str, u64)> = steps
            .iter()
            .map(|s| {
                (
                    s["component_type"].as_str().expect("type"),
                    s["total_components"].as_u64().expect("total"),
                )
            })
            .collect();
        assert_eq!(types, *want, "stage {} steps: {r:#}", i + 1);
        for step in steps {
            assert_eq!(step["status"], "completed", "{r:#}");
            assert_eq!(step["completed_components"], step["total_components"]);
            assert_eq!(step["failed_components"], 0);
            assert!(step["started_at"].is_string() && step["finished_at"].is_string());
        }
    }
}

// ---- the simulated fleet ---------------------------------------------------------

fn fault(
    rack: u32,
    component_type: &str,
    component: &str,
    operation: &str,
    effect: &str,
) -> simpb::Fault {
    simpb::Fault {
        rack: rack_ext(rack),
        component_type: component_type.into(),
        component: component.into(),
        operation: operation.into(),
        effect: effect.into(),
    }
}

async fn set_faults(sim: &mut SimAdminClient<Channel>, faults: Vec<simpb::Fault>) {
    sim.set_faults(simpb::SetFaultsRequest { faults })
        .await
        .expect("set faults");
}

async fn call_log(sim: &mut SimAdminClient<Channel>, after: u64) -> Vec<simpb::CallLogEntry> {
    sim.get_call_log(simpb::GetCallLogRequest {
        after_sequence: after,
    })
    .await
    .expect("call log")
    .into_inner()
    .entries
}

/// The sequence number of the last call so far (0 when none).
async fn log_mark(sim: &mut SimAdminClient<Channel>) -> u64 {
    call_log(sim, 0).await.last().map_or(0, |e| e.sequence)
}

/// Calls after `after` on components of fixture rack `rack`.
async fn rack_calls(
    sim: &mut SimAdminClient<Channel>,
    after: u64,
    rack: u32,
) -> Vec<simpb::CallLogEntry> {
    let prefix = format!("{}-", rack_ext(rack));
    call_log(sim, after)
        .await
        .into_iter()
        .filter(|e| e.components.iter().all(|c| c.starts_with(&prefix)))
        .collect()
}

/// Waits until `done` holds for the calls after `after`. The simulated
/// fleet publishes no event when a call is logged (a hanging call changes
/// nothing else), so this is a bounded poll of the call log.
async fn wait_log(
    sim: &mut SimAdminClient<Channel>,
    after: u64,
    what: &str,
    done: impl Fn(&[simpb::CallLogEntry]) -> bool,
) {
    let last = std::sync::Mutex::new(Vec::new());
    rackflow_testkit::wait::wait_until(
        what,
        DEADLINE,
        POLL,
        || {
            let mut sim = sim.clone();
            let (done, last) = (&done, &last);
            async move {
                let log = call_log(&mut sim, after).await;
                let reached = done(&log);
                *last.lock().expect("log") = log;
                reached.then_some(())
            }
        },
        || format!("call log: {:#?}", last.lock().expect("log")),
    )
    .await;
}

/// Component types in the order their calls happened, asserting that the
/// calls of one type never interleave with another's (stages in order).
fn type_order(calls: &[simpb::CallLogEntry]) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    for c in calls {
        if order.last() != Some(&c.component_type) {
            assert!(
                !order.contains(&c.component_type),
                "calls of {} interleave with another type: {calls:#?}",
                c.component_type
            );
            order.push(c.component_type.clone());
        }
    }
    order
}

fn types_called(calls: &[simpb::CallLogEntry], call: &str) -> BTreeSet<String> {
    calls
        .iter()
        .filter(|c| c.call == call)
        .map(|c| c.component_type.clone())
        .collect()
}

// ---- rules -----------------------------------------------------------------------

/// A rule definition: one PowerControl step per type, stage `i + 1`.
fn staged_power_rule(types: &[&str]) -> String {
    let steps: Vec<Value> = types
        .iter()
        .zip(1..)
        .map(|(t, stage)| {
            json!({
                "component_type": t,
                "stage": stage,
                "main_operation": {"name": "PowerControl"},
            })
        })
        .collect();
    json!({"version": "v1", "steps": steps}).to_string()
}

fn rule_request(
    name: &str,
    operation_type: pb::OperationType,
    code: &str,
    definition: &str,
    is_default: bool,
) -> pb::CreateOperationRuleRequest {
    pb::CreateOperationRuleRequest {
        name: name.into(),
        description: format!("{name} description"),
        operation_type: operation_type as i32,
        operation_code: code.into(),
        rule_definition_json: definition.into(),
        is_default,
    }
}

async fn create_rule(client: &mut Client, req: pb::CreateOperationRuleRequest) -> Uuid {
    let id = client
        .create_operation_rule(req)
        .await
        .expect("create rule")
        .into_inner()
        .id
        .expect("rule id");
    Uuid::parse_str(&id.id).expect("rule uuid")
}

async fn get_rule(client: &mut Client, id: Uuid) -> Result<pb::OperationRule, tonic::Status> {
    client
        .get_operation_rule(pb::GetOperationRuleRequest {
            rule_id: Some(uuid(id)),
        })
        .await
        .map(|r| r.into_inner())
}

fn applied_rule(t: &pb::Task) -> Option<Uuid> {
    t.applied_rule_id
        .as_ref()
        .map(|u| Uuid::parse_str(&u.id).expect("applied rule uuid"))
}

// ---- 1. rack operations ----------------------------------------------------------

async fn rack_operations_complete_with_task_fields_and_reports(backend: Backend) {
    let Some((mut s, mut sim)) = start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    let rack = fixture_id(1);

    // Power on: every field of a finished task.
    let id = submit(Op::PowerOn, whole(1))
        .described("morning power on")
        .one(&mut s.client)
        .await;
    let t = completed(&mut s, id).await;
    assert_eq!(t.id, Some(uuid(id)));
    assert_eq!(t.operation, "power_control/power_on");
    assert_eq!(t.rack_id, Some(uuid(rack)));
    assert_eq!(t.component_uuids.len(), 4, "2 compute, 1 switch, 1 shelf");
    assert_eq!(t.description, "morning power on");
    assert_eq!(t.message, "Succeeded");
    assert_eq!(t.execution_id, format!("local:{id}"));
    assert_eq!(t.applied_rule_id, None, "built-in rule: no applied rule");
    assert_eq!(t.queue_expires_at, None);
    assert!(at(&t.created_at) <= at(&t.started_at));
    assert!(at(&t.started_at) <= at(&t.finished_at));
    assert!(at(&t.finished_at) <= at(&t.updated_at));
    assert_completed_report(
        &t,
        &[&[("PowerShelf", 1)], &[("NVSwitch", 1)], &[("Compute", 2)]],
    );

    // Power off, then reset (restart: off in three stages, on in three).
    let id = submit(Op::PowerOff, whole(1)).one(&mut s.client).await;
    let t = completed(&mut s, id).await;
    assert_eq!(t.operation, "power_control/power_off");
    assert_eq!(t.message, "Succeeded");
    assert_completed_report(
        &t,
        &[&[("Compute", 2)], &[("NVSwitch", 1)], &[("PowerShelf", 1)]],
    );
    let states = sim
        .get_component_states(simpb::GetComponentStatesRequest {
            components: vec![ext(1, "compute", 0), ext(1, "powershelf", 0)],
        })
        .await
        .expect("states")
        .into_inner()
        .states;
    assert_eq!(states.len(), 2);
    assert!(states.iter().all(|c| c.power_state == "Off"), "{states:#?}");

    let id = submit(Op::Reset, whole(1)).one(&mut s.client).await;
    let t = completed(&mut s, id).await;
    assert_eq!(t.operation, "power_control/restart");
    assert_completed_report(
        &t,
        &[
            &[("Compute", 2)],
            &[("NVSwitch", 1)],
            &[("PowerShelf", 1)],
            &[("PowerShelf", 1)],
            &[("NVSwitch", 1)],
            &[("Compute", 2)],
        ],
    );

    // Firmware: compute then switches; the shelf is not part of the rule.
    let id = submit(Op::Firmware, whole(1)).one(&mut s.client).await;
    let t = completed(&mut s, id).await;
    assert_eq!(t.operation, "firmware_control/upgrade");
    assert_eq!(t.message, "Succeeded");
    assert_completed_report(&t, &[&[("Compute", 2)], &[("NVSwitch", 1)]]);
    let states = sim
        .get_component_states(simpb::GetComponentStatesRequest { components: vec![] })
        .await
        .expect("states")
        .into_inner()
        .states;
    for c in &states {
        let want = if c.component_type == "PowerShelf" {
            "1.0.0"
        } else {
            "2.0.0"
        };
        assert_eq!(c.firmware_version, want, "{c:?}");
        assert!(!c.firmware_updating);
    }

    // The forced variants map to their own codes (their built-ins sleep for
    // many seconds, so they are cancelled once seen running).
    for (req, operation) in [
        (
            submit(Op::PowerOff, whole(1)).forced(),
            "power_control/force_power_off",
        ),
        (
            submit(Op::Reset, whole(1)).forced(),
            "power_control/force_restart",
        ),
    ] {
        let id = req.one(&mut s.client).await;
        let t = wait_status(&mut s, id, pb::TaskStatus::Running).await;
        assert_eq!(t.operation, operation);
        let t = cancel(&mut s.client, id).await.expect("cancel");
        assert_eq!(status(&t), pb::TaskStatus::Terminated);
        // Cancel answers once `terminated` is recorded; the executor writes
        // its last report snapshot (stages cancelled) when it has stopped,
        // which may come after the answer. The listing below expects it.
        let t = wait_task(&mut s, id, "its last report snapshot", |t| {
            !t.report.is_empty()
        })
        .await;
        assert_eq!(status(&t), pb::TaskStatus::Terminated);
    }

    // Listing: newest first, reports only on request, the rack filter.
    let list = s
        .client
        .list_tasks(pb::ListTasksRequest {
            rack_id: Some(uuid(rack)),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(list.total, 6);
    let ops: Vec<&str> = list.tasks.iter().map(|t| t.operation.as_str()).collect();
    assert_eq!(
        ops,
        [
            "power_control/force_restart",
            "power_control/force_power_off",
            "firmware_control/upgrade",
            "power_control/restart",
            "power_control/power_off",
            "power_control/power_on",
        ]
    );
    assert!(list.tasks.iter().all(|t| t.report.is_empty()));
    let with_report = s
        .client
        .list_tasks(pb::ListTasksRequest {
            rack_id: Some(pb::Uuid { id: rack_ext(1) }),
            with_report: true,
            ..Default::default()
        })
        .await
        .expect("list by external id")
        .into_inner();
    assert_eq!(with_report.total, 6);
    assert!(with_report.tasks.iter().all(|t| !t.report.is_empty()));
    let active = s
        .client
        .list_tasks(pb::ListTasksRequest {
            active_only: true,
            ..Default::default()
        })
        .await
        .expect("list active")
        .into_inner();
    assert_eq!(active.total, 0, "{active:#?}");
    s.stop().await;
}

async fn multi_rack_targets_fan_out_and_empty_resolutions_fail(backend: Backend) {
    let Some((mut s, _sim)) = start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 3).await;

    // Three racks named three ways: one task each, sorted by rack id.
    let spec = racks_spec(vec![
        pb::RackTarget {
            identifier: Some(pb::rack_target::Identifier::ExternalId(rack_ext(3))),
            component_types: vec![],
        },
        rack_by_id(1, &[]),
        pb::RackTarget {
            identifier: Some(pb::rack_target::Identifier::Name("rack-002".into())),
            component_types: vec![pb::ComponentType::Compute as i32],
        },
    ]);
    let ids = submit(Op::PowerOn, spec)
        .send(&mut s.client)
        .await
        .expect("submit");
    assert_eq!(ids.len(), 3);
    let mut racks = Vec::new();
    for id in &ids {
        let t = completed(&mut s, *id).await;
        racks.push(t.rack_id.clone().expect("rack"));
        let expected = if t.rack_id == Some(uuid(fixture_id(2))) {
            2
        } else {
            4
        };
        assert_eq!(t.component_uuids.len(), expected, "{t:#?}");
        if expected == 2 {
            // Trays only: the shelf and switch stages have nothing to do.
            let r = report(&t);
            let statuses: Vec<&str> = r["stages"]
                .as_array()
                .expect("stages")
                .iter()
                .map(|st| st["status"].as_str().expect("status"))
                .collect();
            assert_eq!(statuses, ["skipped", "skipped", "completed"], "{r:#}");
            assert_eq!(r["stages"][0]["steps"][0]["status"], "skipped");
            assert_eq!(r["stages"][0]["steps"][0]["total_components"], 0);
        }
    }
    assert_eq!(
        racks,
        [1, 2, 3].map(|n| uuid(fixture_id(n))),
        "one task per rack, in rack order"
    );

    // Two targets on one rack merge into one task.
    let spec = racks_spec(vec![
        rack_by_id(1, &[pb::ComponentType::Compute]),
        rack_by_id(1, &[pb::ComponentType::Nvswitch]),
    ]);
    let id = submit(Op::Firmware, spec).one(&mut s.client).await;
    let t = completed(&mut s, id).await;
    assert_eq!(t.component_uuids.len(), 3);
    assert_completed_report(&t, &[&[("Compute", 2)], &[("NVSwitch", 1)]]);

    // Nothing resolved: a type filter matching no component.
    let err = submit(Op::PowerOn, typed(1, &[pb::ComponentType::Torswitch]))
        .send(&mut s.client)
        .await
        .expect_err("empty resolution");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    assert_eq!(err.message(), "no valid racks found");

    // One rack of two conflicts: the other still gets its task, and the
    // request succeeds (per-rack failures are skipped).
    let mut sim = sim_client(&s).await;
    let blocker = hold_rack(&mut s, &mut sim, 2).await;
    let ids = submit(
        Op::PowerOff,
        racks_spec(vec![rack_by_id(2, &[]), rack_by_id(3, &[])]),
    )
    .send(&mut s.client)
    .await
    .expect("partial submit");
    assert_eq!(ids.len(), 1);
    let t = completed(&mut s, ids[0]).await;
    assert_eq!(t.rack_id, Some(uuid(fixture_id(3))));
    // Only the conflicting rack: its error.
    submit(Op::PowerOff, whole(2))
        .conflicts(&mut s.client, 2)
        .await;
    cancel(&mut s.client, blocker).await.expect("cancel");

    // An unknown rack.
    let err = submit(
        Op::PowerOn,
        racks_spec(vec![pb::RackTarget {
            identifier: Some(pb::rack_target::Identifier::ExternalId("nope".into())),
            component_types: vec![],
        }]),
    )
    .send(&mut s.client)
    .await
    .expect_err("unknown rack");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    assert!(
        err.message().contains("rack external_id=nope not found"),
        "{err:?}"
    );

    // The rule has no step for the only targeted type (firmware on shelves).
    let err = submit(Op::Firmware, typed(1, &[pb::ComponentType::Powershelf]))
        .send(&mut s.client)
        .await
        .expect_err("not applicable");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().contains(
            "(targeted: PowerShelf; the built_in rule: its steps cover Compute, NVSwitch)"
        ),
        "{err:?}"
    );
    // No built-in rule acts on a ToR switch, a UMS or a CDU (as the
    // reference's): a power task on them alone is refused, naming them.
    for (n, ty) in [
        (0, pb::ComponentType::Torswitch),
        (1, pb::ComponentType::Ums),
        (2, pb::ComponentType::Cdu),
    ] {
        s.client
            .add_component(pb::AddComponentRequest {
                component: Some(pb::Component {
                    r#type: ty as i32,
                    info: Some(pb::DeviceInfo {
                        name: format!("rack-1-{}", ty.as_str_name()),
                        manufacturer: "NVIDIA".into(),
                        serial_number: format!("FAC-{n}"),
                        ..Default::default()
                    }),
                    component_id: format!("r-0001-facility-{n}"),
                    rack_id: Some(uuid(fixture_id(1))),
                    ..Default::default()
                }),
            })
            .await
            .expect("add a facility component");
        let err = submit(Op::PowerOn, typed(1, &[ty]))
            .send(&mut s.client)
            .await
            .expect_err("no built-in step");
        assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
        let name = rackflow_domain::ComponentType::from_i32(ty as i32)
            .expect("a wire type")
            .name();
        assert!(
            err.message().contains(&format!("(targeted: {name}; the built_in rule: its steps cover Compute, NVSwitch, PowerShelf)")),
            "{err:?}"
        );
    }

    // Request validation.
    let err = s
        .client
        .power_on_rack(pb::PowerOnRackRequest::default())
        .await
        .expect_err("no target");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(err.message(), "target_spec is required");
    for (options, message) in [
        (
            pb::QueueOptions {
                conflict_strategy: pb::ConflictStrategy::Queue as i32,
                queue_timeout_seconds: -1,
            },
            "queue_options.queue_timeout_seconds must not be negative",
        ),
        (
            pb::QueueOptions {
                conflict_strategy: 9,
                queue_timeout_seconds: 0,
            },
            "queue_options.conflict_strategy is unknown",
        ),
    ] {
        let err = s
            .client
            .power_off_rack(pb::PowerOffRackRequest {
                target_spec: Some(whole(1)),
                queue_options: Some(options),
                ..Default::default()
            })
            .await
            .expect_err(message);
        assert_eq!(err.code(), Code::InvalidArgument);
        assert_eq!(err.message(), message);
    }
    let err = s
        .client
        .power_on_rack(pb::PowerOnRackRequest {
            target_spec: Some(whole(1)),
            rule_id: Some(pb::Uuid {
                id: "not-a-uuid".into(),
            }),
            ..Default::default()
        })
        .await
        .expect_err("bad rule id");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("invalid rule_id: "), "{err:?}");
    let err = s
        .client
        .upgrade_firmware(pb::UpgradeFirmwareRequest {
            target_spec: Some(whole(1)),
            start_time: Some(prost_types::Timestamp {
                seconds: 2_000,
                nanos: 0,
            }),
            end_time: Some(prost_types::Timestamp {
                seconds: 1_000,
                nanos: 0,
            }),
            ..Default::default()
        })
        .await
        .expect_err("window backwards");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(err.message(), "end_time must not be before start_time");
    let err = s
        .client
        .upgrade_firmware(pb::UpgradeFirmwareRequest {
            target_spec: Some(whole(1)),
            authentication_data: Some(pb::FirmwareAuthenticationData {
                value: Some(pb::firmware_authentication_data::Value::Shared(
                    "secret".into(),
                )),
            }),
            ..Default::default()
        })
        .await
        .expect_err("credentials without a key");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(!err.message().contains("secret"));

    // Reading tasks: unknown ids are left out, malformed ones refused.
    let found = s
        .client
        .get_tasks_by_i_ds(pb::GetTasksByIDsRequest {
            task_ids: vec![uuid(Uuid::new_v4())],
        })
        .await
        .expect("get unknown")
        .into_inner()
        .tasks;
    assert!(found.is_empty());
    let err = s
        .client
        .get_tasks_by_i_ds(pb::GetTasksByIDsRequest {
            task_ids: vec![pb::Uuid { id: "x".into() }],
        })
        .await
        .expect_err("malformed id");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("task_ids[0]: "), "{err:?}");

    // Tasks of one component: the rack-wide power-on and the merged
    // firmware task of rack 1 hold its first tray.
    let rack_1 = s
        .client
        .get_rack_info_by_id(pb::GetRackInfoByIdRequest {
            id: Some(uuid(fixture_id(1))),
            with_components: true,
        })
        .await
        .expect("rack")
        .into_inner()
        .rack
        .expect("rack");
    let tray = rack_1
        .components
        .iter()
        .find(|c| c.component_id == ext(1, "compute", 0))
        .and_then(|c| c.info.as_ref())
        .and_then(|i| i.id.clone())
        .expect("tray id");
    let of_tray = s
        .client
        .list_tasks(pb::ListTasksRequest {
            component_id: Some(tray),
            ..Default::default()
        })
        .await
        .expect("list by component")
        .into_inner();
    let ops: Vec<&str> = of_tray.tasks.iter().map(|t| t.operation.as_str()).collect();
    assert_eq!(ops, ["firmware_control/upgrade", "power_control/power_on"]);

    let total = s
        .client
        .list_tasks(pb::ListTasksRequest::default())
        .await
        .expect("list")
        .into_inner()
        .total;
    assert_eq!(total, 6, "rejected submissions create no task");
    // A whole rack that holds them powers on as before: its trays and
    // shelves run, the ToR switch, UMS and CDU are carried along untouched.
    let ids = submit(Op::PowerOn, typed(1, &[]))
        .send(&mut s.client)
        .await
        .expect("whole rack with facility components");
    let t = completed(&mut s, ids[0]).await;
    assert_eq!(
        t.component_uuids.len(),
        7,
        "4 fixture components and 3 more: {t:#?}"
    );
    s.stop().await;
}

// ---- 2. built-in stage order -----------------------------------------------------

async fn builtin_rules_run_stages_in_order(backend: Backend) {
    let Some((mut s, mut sim)) = start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;

    let cases = [
        (Op::PowerOn, vec!["PowerShelf", "NVSwitch", "Compute"]),
        (Op::PowerOff, vec!["Compute", "NVSwitch", "PowerShelf"]),
        (Op::Firmware, vec!["Compute", "NVSwitch"]),
        // ACPowerCycleRack: cold_reset, the compute trays only.
        (Op::AcPowerCycle, vec!["Compute"]),
    ];
    for (op, order) in cases {
        let mark = log_mark(&mut sim).await;
        let id = submit(op, whole(1)).one(&mut s.client).await;
        completed(&mut s, id).await;
        let calls = rack_calls(&mut sim, mark, 1).await;
        assert_eq!(type_order(&calls), order, "{op:?}: {calls:#?}");
        let kinds: BTreeSet<&str> = calls.iter().map(|c| c.call.as_str()).collect();
        let expected: BTreeSet<&str> = if op == Op::Firmware {
            // firmware_inventory: the versions read back (issue 12).
            ["firmware_inventory", "firmware_start", "firmware_status"].into()
        } else {
            // power_status: the states read back after the power step.
            ["power_control", "power_status"].into()
        };
        assert_eq!(kinds, expected, "{op:?}");
        let detail = match op {
            Op::PowerOn => "power_on",
            Op::PowerOff => "power_off",
            Op::AcPowerCycle => "cold_reset",
            _ => "2.0.0",
        };
        assert!(
            calls
                .iter()
                .filter(|c| c.call.ends_with("_control") || c.call == "firmware_start")
                .all(|c| c.detail == detail),
            "{calls:#?}"
        );
    }
    s.stop().await;
}

// ---- 3. the conflict matrix ------------------------------------------------------

/// One held task and what else may run beside it on its rack.
struct Scenario {
    rack: u32,
    /// The fault that keeps the held task running.
    fault: simpb::Fault,
    held: (Op, pb::OperationTargetSpec),
    /// Candidates with whether they conflict with the held task.
    candidates: Vec<(Op, pb::OperationTargetSpec, bool)>,
}

async fn conflict_matrix_through_the_api(backend: Backend) {
    let Some((mut s, mut sim)) = start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 5).await;
    use pb::ComponentType::{Nvswitch, Powershelf};
    let c0 = |r| components(r, &[("compute", 0)]);
    let c1 = |r| components(r, &[("compute", 1)]);
    let nv = |r| components(r, &[("nvswitch", 0)]);
    let shelf = |r| typed(r, &[Powershelf]);
    let scenarios = vec![
        // Power on a shelf: rack-wide against any power or firmware task.
        Scenario {
            rack: 1,
            fault: fault(1, "PowerShelf", "", "power", "hang"),
            held: (Op::PowerOn, shelf(1)),
            candidates: vec![
                (Op::PowerOff, c0(1), true),
                (Op::PowerOn, nv(1), true),
                (Op::Reset, shelf(1), true),
                (Op::Firmware, c1(1), true),
                (Op::Firmware, typed(1, &[Nvswitch]), true),
            ],
        },
        // Power on one compute tray: only overlapping power/firmware work,
        // and shelf power.
        Scenario {
            rack: 2,
            fault: fault(2, "", &ext(2, "compute", 0), "power", "hang"),
            held: (Op::PowerOn, c0(2)),
            candidates: vec![
                (Op::PowerOff, c0(2), true),
                (Op::Firmware, c0(2), true),
                (Op::PowerOn, shelf(2), true),
                (Op::PowerOff, whole(2), true),
                (Op::PowerOff, c1(2), false),
                (Op::Firmware, c1(2), false),
                (Op::PowerOn, nv(2), false),
                (Op::Firmware, nv(2), false),
            ],
        },
        // Power on the switch: firmware on compute is disjoint (spec's
        // example), switch power and switch firmware are not.
        Scenario {
            rack: 3,
            fault: fault(3, "NVSwitch", "", "power", "hang"),
            held: (Op::PowerOn, nv(3)),
            candidates: vec![
                (Op::PowerOff, nv(3), true),
                (Op::Firmware, nv(3), true),
                (Op::Firmware, c0(3), false),
                (Op::PowerOn, c0(3), false),
            ],
        },
        // Firmware on one compute tray: overlapping firmware or power, and
        // shelf power.
        Scenario {
            rack: 4,
            fault: fault(4, "", &ext(4, "compute", 0), "firmware", "hang"),
            held: (Op::Firmware, c0(4)),
            candidates: vec![
                (Op::Firmware, c0(4), true),
                (Op::Firmware, whole(4), true),
                (Op::PowerOn, c0(4), true),
                (Op::PowerOn, shelf(4), true),
                (Op::Firmware, c1(4), false),
                (Op::Firmware, nv(4), false),
                (Op::PowerOn, c1(4), false),
                (Op::PowerOn, nv(4), false),
            ],
        },
        // Firmware on the switch.
        Scenario {
            rack: 5,
            fault: fault(5, "NVSwitch", "", "firmware", "hang"),
            held: (Op::Firmware, nv(5)),
            candidates: vec![
                (Op::PowerOn, nv(5), true),
                (Op::Firmware, nv(5), true),
                (Op::Firmware, c0(5), false),
                (Op::PowerOn, c0(5), false),
            ],
        },
    ];
    set_faults(
        &mut sim,
        scenarios.iter().map(|sc| sc.fault.clone()).collect(),
    )
    .await;

    for sc in scenarios {
        let (op, spec) = sc.held;
        let held = submit(op, spec).one(&mut s.client).await;
        wait_status(&mut s, held, pb::TaskStatus::Running).await;
        for (op, spec, conflicting) in sc.candidates {
            let req = submit(op, spec.clone());
            if conflicting {
                req.conflicts(&mut s.client, sc.rack).await;
                // No queue options at all means reject, too.
                submit(op, spec)
                    .queue(Conflict::Unset)
                    .conflicts(&mut s.client, sc.rack)
                    .await;
            } else {
                let id = req.one(&mut s.client).await;
                // Let it finish so it cannot block the next candidate.
                completed(&mut s, id).await;
            }
        }
        let t = task(&mut s.client, held).await;
        assert_eq!(status(&t), pb::TaskStatus::Running, "held task still runs");
        cancel(&mut s.client, held).await.expect("cancel held");
    }
    s.stop().await;
}

// ---- 4. the waiting queue --------------------------------------------------------

/// Holds rack `rack` with a power-on whose shelf never answers; returns the
/// task id.
async fn hold_rack(s: &mut TestServer, sim: &mut SimAdminClient<Channel>, rack: u32) -> Uuid {
    let mut faults = sim
        .list_faults(simpb::ListFaultsRequest {})
        .await
        .expect("faults")
        .into_inner()
        .faults;
    faults.push(fault(rack, "PowerShelf", "", "power", "hang"));
    set_faults(sim, faults).await;
    let id = submit(Op::PowerOn, whole(rack)).one(&mut s.client).await;
    wait_status(s, id, pb::TaskStatus::Running).await;
    id
}

async fn queue_waits_with_deadline_and_caps_at_five_then_runs_fifo(backend: Backend) {
    let Some((mut s, mut sim)) = start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    let blocker = hold_rack(&mut s, &mut sim, 1).await;

    // Five firmware updates of the same tray queue behind it; they also
    // conflict with each other, so they must run one at a time.
    let mut queued = Vec::new();
    for i in 0..5 {
        let timeout = if i == 0 { 0 } else { 600 };
        let id = submit(Op::Firmware, components(1, &[("compute", 0)]))
            .queue(Conflict::Queue(timeout))
            .one(&mut s.client)
            .await;
        let t = task(&mut s.client, id).await;
        assert_eq!(status(&t), pb::TaskStatus::Waiting, "{t:#?}");
        assert_eq!(t.message, "Queued: waiting for rack to become available");
        assert_eq!(t.started_at, None);
        assert_eq!(t.finished_at, None);
        let expires = at(&t.queue_expires_at).0 - at(&t.created_at).0;
        let want = if timeout == 0 { 3600 } else { 600 };
        assert!(
            (want - 2..=want + 2).contains(&expires),
            "queue_expires_at = created_at + {want}s, got +{expires}s"
        );
        queued.push(id);
    }

    // The sixth is refused whatever it targets; rejecting still rejects.
    let err = submit(Op::Firmware, components(1, &[("compute", 1)]))
        .queue(Conflict::Queue(600))
        .send(&mut s.client)
        .await
        .expect_err("queue full");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert_eq!(err.message(), "waiting queue is full (5/5 tasks)");
    submit(Op::Firmware, components(1, &[("compute", 1)]))
        .conflicts(&mut s.client, 1)
        .await;
    let active = s
        .client
        .list_tasks(pb::ListTasksRequest {
            active_only: true,
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(active.total, 6, "the blocker and five waiting");

    // Freeing the rack runs them in submission order, never two at once.
    cancel(&mut s.client, blocker)
        .await
        .expect("cancel blocker");
    let mut previous: Option<pb::Task> = None;
    for id in queued {
        let t = completed(&mut s, id).await;
        assert_eq!(t.queue_expires_at, None, "deadline cleared: {t:#?}");
        if let Some(p) = &previous {
            assert!(
                at(&t.started_at) >= at(&p.finished_at),
                "FIFO, one at a time: {p:#?} then {t:#?}"
            );
        }
        previous = Some(t);
    }
    s.stop().await;
}

async fn queue_promotion_never_overtakes(backend: Backend) {
    let Some((mut s, mut sim)) = start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    // Two disjoint power-ons hold one tray each.
    set_faults(
        &mut sim,
        vec![
            fault(1, "", &ext(1, "compute", 0), "power", "hang"),
            fault(1, "", &ext(1, "compute", 1), "power", "hang"),
        ],
    )
    .await;
    let on_c0 = submit(Op::PowerOn, components(1, &[("compute", 0)]))
        .one(&mut s.client)
        .await;
    let on_c1 = submit(Op::PowerOn, components(1, &[("compute", 1)]))
        .one(&mut s.client)
        .await;
    for id in [on_c0, on_c1] {
        wait_status(&mut s, id, pb::TaskStatus::Running).await;
    }
    // First in the queue: firmware on both trays (blocked by both).
    // Second: firmware on tray 0 only (blocked by the first power-on only).
    let first = submit(
        Op::Firmware,
        components(1, &[("compute", 0), ("compute", 1)]),
    )
    .queue(Conflict::Queue(600))
    .one(&mut s.client)
    .await;
    let second = submit(Op::Firmware, components(1, &[("compute", 0)]))
        .queue(Conflict::Queue(600))
        .one(&mut s.client)
        .await;
    for id in [first, second] {
        assert_eq!(
            status(&task(&mut s.client, id).await),
            pb::TaskStatus::Waiting
        );
    }

    // Tray 0 is free: the second could run, but the first still waits for
    // tray 1, and nothing overtakes it. Check after every store write
    // (each promoter pass writes) for a window past a promoter pass.
    cancel(&mut s.client, on_c0).await.expect("cancel");
    let until = Instant::now() + Duration::from_millis(500);
    let mut changes = s.waiter("no overtaking", DEADLINE);
    loop {
        for id in [first, second] {
            let t = task(&mut s.client, id).await;
            assert_eq!(status(&t), pb::TaskStatus::Waiting, "no overtaking: {t:#?}");
        }
        if !changes.next_within(until).await {
            break;
        }
    }

    // Both trays free: first runs, then the second (they overlap on tray 0).
    cancel(&mut s.client, on_c1).await.expect("cancel");
    let first = completed(&mut s, first).await;
    let second = completed(&mut s, second).await;
    assert!(
        at(&second.started_at) >= at(&first.finished_at),
        "strict FIFO: {first:#?} then {second:#?}"
    );
    s.stop().await;
}

async fn queue_timeout_expires_waiting_tasks(backend: Backend) {
    let mut config = config();
    config.tasks.promoter_sweep_secs = 1;
    let Some((mut s, mut sim)) = start_with(backend, config).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    let blocker = hold_rack(&mut s, &mut sim, 1).await;
    let id = submit(Op::PowerOff, whole(1))
        .queue(Conflict::Queue(1))
        .one(&mut s.client)
        .await;
    let t = task(&mut s.client, id).await;
    assert_eq!(status(&t), pb::TaskStatus::Waiting);
    assert!(t.queue_expires_at.is_some());
    let t = wait_status(&mut s, id, pb::TaskStatus::Terminated).await;
    assert_eq!(t.message, "Expired: queue timeout reached");
    assert_eq!(t.queue_expires_at, None, "deadline cleared");
    assert_eq!(t.started_at, None, "never ran");
    assert!(t.finished_at.is_some());
    let b = task(&mut s.client, blocker).await;
    assert_eq!(status(&b), pb::TaskStatus::Running, "blocker unaffected");
    cancel(&mut s.client, blocker).await.expect("cancel");
    s.stop().await;
}

// ---- 5. cancellation -------------------------------------------------------------

async fn cancel_in_every_state(backend: Backend) {
    let Some((mut s, mut sim)) = start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 3).await;
    let running = hold_rack(&mut s, &mut sim, 1).await;

    // Waiting → terminated, deadline cleared.
    let waiting = submit(Op::PowerOff, whole(1))
        .queue(Conflict::Queue(600))
        .one(&mut s.client)
        .await;
    let t = cancel(&mut s.client, waiting)
        .await
        .expect("cancel waiting");
    assert_eq!(status(&t), pb::TaskStatus::Terminated);
    assert_eq!(t.message, "Cancelled by user");
    assert_eq!(t.queue_expires_at, None);
    assert_eq!(t.started_at, None);
    assert!(t.finished_at.is_some());

    // Running → terminated at once, and the simulated hardware hears
    // nothing more from it.
    wait_log(&mut sim, 0, "the shelf power call hanging", |log| {
        log.iter()
            .any(|c| c.component_type == "PowerShelf" && c.outcome == "hang")
    })
    .await;
    let asked = Instant::now();
    let t = cancel(&mut s.client, running)
        .await
        .expect("cancel running");
    assert!(asked.elapsed() < Duration::from_secs(2), "prompt cancel");
    assert_eq!(status(&t), pb::TaskStatus::Terminated);
    assert_eq!(t.message, "Cancelled by user");
    assert!(t.started_at.is_some() && t.finished_at.is_some());
    let mark = log_mark(&mut sim).await;
    // Scenario, not polling: the sim must hear nothing more for a while
    // (the absence of a call is no event to wait for).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = rack_calls(&mut sim, mark, 1).await;
    assert!(after.is_empty(), "the sim stopped: {after:#?}");
    let t = task(&mut s.client, running).await;
    assert_eq!(status(&t), pb::TaskStatus::Terminated, "stays terminated");
    assert_eq!(t.message, "Cancelled by user");
    // The report says where it stopped.
    let r = report(&t);
    assert_eq!(r["error"], "cancelled", "{r:#}");
    assert_eq!(r["stages"][0]["status"], "failed", "{r:#}");
    assert_eq!(r["stages"][0]["error"], "cancelled", "{r:#}");
    assert_eq!(r["stages"][0]["steps"][0]["status"], "failed", "{r:#}");
    assert_eq!(r["stages"][1]["status"], "pending", "{r:#}");

    // Terminated → idempotent success, unchanged.
    let again = cancel(&mut s.client, running).await.expect("cancel again");
    assert_eq!(status(&again), pb::TaskStatus::Terminated);
    assert_eq!(again.message, "Cancelled by user");
    assert_eq!(again.finished_at, t.finished_at);

    // Completed → FailedPrecondition.
    let done = submit(Op::PowerOn, whole(2)).one(&mut s.client).await;
    completed(&mut s, done).await;
    let err = cancel(&mut s.client, done).await.expect_err("completed");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert_eq!(
        err.message(),
        format!("task {done} is not cancellable: it is completed")
    );

    // Failed → FailedPrecondition (one attempt, a failing tray).
    set_faults(&mut sim, vec![fault(3, "Compute", "", "power", "fail")]).await;
    let once = create_rule(
        &mut s.client,
        rule_request(
            "one attempt",
            pb::OperationType::PowerControl,
            "power_on",
            &json!({"steps": [{"component_type": "compute", "stage": 1,
                "retry": {"max_attempts": 1, "initial_interval": "1s"},
                "main_operation": {"name": "PowerControl"}}]})
            .to_string(),
            false,
        ),
    )
    .await;
    let failed = submit(Op::PowerOn, whole(3))
        .rule(once)
        .one(&mut s.client)
        .await;
    let t = wait_status(&mut s, failed, pb::TaskStatus::Failed).await;
    assert!(t.finished_at.is_some());
    let err = cancel(&mut s.client, failed).await.expect_err("failed");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert_eq!(
        err.message(),
        format!("task {failed} is not cancellable: it is failed")
    );

    // Unknown and missing ids.
    let unknown = Uuid::new_v4();
    let err = cancel(&mut s.client, unknown).await.expect_err("unknown");
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(err.message(), format!("task {unknown} not found"));
    let err = s
        .client
        .cancel_task(pb::CancelTaskRequest { task_id: None })
        .await
        .expect_err("missing id");
    assert_eq!(err.code(), Code::InvalidArgument);
    s.stop().await;
}

// ---- 6. rules --------------------------------------------------------------------

async fn rule_validation_errors_write_nothing(backend: Backend) {
    let Some((mut s, _sim)) = start(backend).await else {
        return;
    };
    use pb::OperationType::{FirmwareControl, PowerControl, Unknown};
    let good = staged_power_rule(&["compute"]);
    let step = |extra: Value| {
        let mut step = json!({"component_type": "compute", "stage": 1,
            "main_operation": {"name": "PowerControl"}});
        step.as_object_mut()
            .expect("object")
            .extend(extra.as_object().expect("object").clone());
        json!({"version": "v1", "steps": [step]}).to_string()
    };
    let cases: Vec<(pb::CreateOperationRuleRequest, &str)> = vec![
        (
            rule_request("  ", PowerControl, "power_on", &good, false),
            "name is required",
        ),
        (
            rule_request(&"n".repeat(129), PowerControl, "power_on", &good, false),
            "name must be at most 128 characters",
        ),
        (
            rule_request("r", Unknown, "power_on", &good, false),
            "operation_type must be OPERATION_TYPE_POWER_CONTROL or OPERATION_TYPE_FIRMWARE_CONTROL",
        ),
        (
            rule_request("r", PowerControl, "upgrade", &good, false),
            "invalid operation code 'upgrade' for operation type 'power_control'",
        ),
        (
            rule_request("r", FirmwareControl, "power_on", &good, false),
            "invalid operation code 'power_on' for operation type 'firmware_control'",
        ),
        (
            rule_request("r", PowerControl, "power_on", r#"{"version": "v2"}"#, false),
            "unsupported rule definition version: v2 (current version: v1)",
        ),
        (
            rule_request(
                "r",
                PowerControl,
                "power_on",
                &step(json!({"main_operation": {"name": "Explode"}})),
                false,
            ),
            "steps[0].main_operation: unknown action: Explode",
        ),
        (
            rule_request("r", PowerControl, "power_on", &step(json!({"stage": 0})), false),
            "steps[0]: stage must be >= 1",
        ),
        (
            rule_request(
                "r",
                PowerControl,
                "power_on",
                &step(json!({"max_parallel": -1})),
                false,
            ),
            "steps[0]: max_parallel must be >= 0",
        ),
        (
            rule_request(
                "r",
                PowerControl,
                "power_on",
                &step(json!({"component_type": "toaster"})),
                false,
            ),
            "steps[0]: component_type toaster is unknown or invalid",
        ),
        (
            rule_request(
                "r",
                PowerControl,
                "power_on",
                &step(json!({"retry": {"max_attempts": 0, "initial_interval": "1s"}})),
                false,
            ),
            "steps[0].retry: max_attempts must be >= 1",
        ),
        (
            rule_request(
                "r",
                PowerControl,
                "power_on",
                &step(json!({"main_operation": {"name": "InjectExpectation"}})),
                false,
            ),
            "steps[0].main_operation: action InjectExpectation is reserved for built-in rules",
        ),
        (
            rule_request(
                "r",
                PowerControl,
                "power_on",
                &step(json!({"post_operation": [{"name": "VerifyPowerStatus",
                    "parameters": {"expected_status": "on"}}]})),
                false,
            ),
            "steps[0].post_operation[0]: action VerifyPowerStatus requires timeout",
        ),
        (
            rule_request(
                "r",
                PowerControl,
                "power_on",
                &json!({"steps": [
                    {"component_type": "compute", "stage": 1, "main_operation": {"name": "PowerControl"}},
                    {"component_type": "Compute", "stage": 1, "main_operation": {"name": "PowerControl"}},
                ]})
                .to_string(),
                false,
            ),
            "steps[1]: duplicate component type Compute in stage 1",
        ),
        // Issue 31: a typo is refused, never read as "field not set" (an
        // unset max_parallel acts on every component at once).
        (
            rule_request(
                "r",
                PowerControl,
                "power_on",
                &step(json!({"max_paralel": 2})),
                false,
            ),
            "steps[0]: unknown key \"max_paralel\" (did you mean \"max_parallel\"?)",
        ),
        (
            rule_request(
                "r",
                PowerControl,
                "power_on",
                &step(json!({"main_operation": {"name": "PowerControl",
                    "parameters": {"operaton": "force_power_off"}}})),
                false,
            ),
            "steps[0].main_operation.parameters: unknown key \"operaton\" (did you mean \"operation\"?)",
        ),
    ];
    for (req, message) in cases {
        let err = s
            .client
            .create_operation_rule(req.clone())
            .await
            .expect_err(message);
        assert_eq!(err.code(), Code::InvalidArgument, "{req:?}: {err:?}");
        assert_eq!(err.message(), message, "{req:?}");
    }
    let err = s
        .client
        .create_operation_rule(rule_request("r", PowerControl, "power_on", "{", false))
        .await
        .expect_err("not JSON");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().starts_with("invalid rule definition JSON: "),
        "{err:?}"
    );

    let list = s
        .client
        .list_operation_rules(pb::ListOperationRulesRequest::default())
        .await
        .expect("list")
        .into_inner();
    assert_eq!(list.total_count, 0, "nothing written: {list:#?}");
    s.stop().await;
}

async fn rule_crud_defaults_and_associations(backend: Backend) {
    let Some((mut s, _sim)) = start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    let rack = fixture_id(1);
    use pb::OperationType::{FirmwareControl, PowerControl};

    // Create and read back.
    let definition = staged_power_rule(&["powershelf", "compute"]);
    let a = create_rule(
        &mut s.client,
        rule_request(
            "  shelf first  ",
            PowerControl,
            "power_on",
            &definition,
            true,
        ),
    )
    .await;
    let rule = get_rule(&mut s.client, a).await.expect("get");
    assert_eq!(rule.id, Some(uuid(a)));
    assert_eq!(rule.name, "shelf first", "stored trimmed");
    assert_eq!(rule.description, "  shelf first   description");
    assert_eq!(rule.operation_type, PowerControl as i32);
    assert_eq!(rule.operation_code, "power_on");
    assert!(rule.is_default);
    assert!(rule.created_at.is_some() && rule.updated_at.is_some());
    let stored: Value = serde_json::from_str(&rule.rule_definition_json).expect("json");
    assert_eq!(stored["version"], "v1");
    assert_eq!(stored["steps"][0]["component_type"], "PowerShelf");
    assert_eq!(stored["steps"][1]["stage"], 2);

    // A second default for the same (type, code) is refused …
    let err = s
        .client
        .create_operation_rule(rule_request(
            "another default",
            PowerControl,
            "power_on",
            &definition,
            true,
        ))
        .await
        .expect_err("second default");
    assert_eq!(err.code(), Code::AlreadyExists, "{err:?}");
    // … but a default for another code, and non-defaults, are fine.
    let off = create_rule(
        &mut s.client,
        rule_request("off", PowerControl, "power_off", &definition, true),
    )
    .await;
    let b = create_rule(
        &mut s.client,
        rule_request("b", PowerControl, "power_on", &definition, false),
    )
    .await;
    let fw_def = json!({"steps": [{"component_type": "compute", "stage": 1,
        "main_operation": {"name": "FirmwareControl"}}]})
    .to_string();
    let fw = create_rule(
        &mut s.client,
        rule_request("fw", FirmwareControl, "upgrade", &fw_def, false),
    )
    .await;

    // List: newest first, filters, pagination.
    let list = |operation_type: Option<pb::OperationType>,
                is_default: Option<bool>,
                offset: Option<i32>,
                limit: Option<i32>| pb::ListOperationRulesRequest {
        operation_type: operation_type.map(|t| t as i32),
        is_default,
        offset,
        limit,
    };
    let ids = |rules: &[pb::OperationRule]| -> Vec<Uuid> {
        rules
            .iter()
            .map(|r| Uuid::parse_str(&r.id.as_ref().expect("id").id).expect("uuid"))
            .collect()
    };
    let all = s
        .client
        .list_operation_rules(list(None, None, None, None))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(all.total_count, 4);
    assert_eq!(ids(&all.rules), [fw, b, off, a]);
    let power_defaults = s
        .client
        .list_operation_rules(list(Some(PowerControl), Some(true), None, None))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(ids(&power_defaults.rules), [off, a]);
    let page = s
        .client
        .list_operation_rules(list(Some(PowerControl), None, Some(1), Some(1)))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(page.total_count, 3);
    assert_eq!(ids(&page.rules), [off]);

    // SetRuleAsDefault swaps the default of (power_control, power_on).
    s.client
        .set_rule_as_default(pb::SetRuleAsDefaultRequest {
            rule_id: Some(uuid(b)),
        })
        .await
        .expect("set default");
    assert!(get_rule(&mut s.client, b).await.expect("b").is_default);
    assert!(!get_rule(&mut s.client, a).await.expect("a").is_default);
    assert!(
        get_rule(&mut s.client, off).await.expect("off").is_default,
        "other codes keep their default"
    );
    let err = s
        .client
        .set_rule_as_default(pb::SetRuleAsDefaultRequest {
            rule_id: Some(uuid(Uuid::new_v4())),
        })
        .await
        .expect_err("unknown rule");
    assert_eq!(err.code(), Code::NotFound);

    // Update: name, description and definition (validated); not found.
    let before = get_rule(&mut s.client, a).await.expect("a");
    s.client
        .update_operation_rule(pb::UpdateOperationRuleRequest {
            rule_id: Some(uuid(a)),
            name: Some("renamed".into()),
            description: Some("new text".into()),
            rule_definition_json: Some(staged_power_rule(&["compute"])),
        })
        .await
        .expect("update");
    let after = get_rule(&mut s.client, a).await.expect("a");
    assert_eq!(after.name, "renamed");
    assert_eq!(after.description, "new text");
    assert_eq!(
        serde_json::from_str::<Value>(&after.rule_definition_json).expect("json")["steps"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    assert_eq!(after.created_at, before.created_at);
    assert!(at(&after.updated_at) >= at(&before.updated_at));
    let err = s
        .client
        .update_operation_rule(pb::UpdateOperationRuleRequest {
            rule_id: Some(uuid(a)),
            name: Some(" ".into()),
            ..Default::default()
        })
        .await
        .expect_err("empty name");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(err.message(), "name is required");
    let err = s
        .client
        .update_operation_rule(pb::UpdateOperationRuleRequest {
            rule_id: Some(uuid(a)),
            name: Some("n".repeat(129)),
            ..Default::default()
        })
        .await
        .expect_err("long name");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert_eq!(err.message(), "name must be at most 128 characters");
    let err = s
        .client
        .update_operation_rule(pb::UpdateOperationRuleRequest {
            rule_id: Some(uuid(a)),
            rule_definition_json: Some(
                json!({"steps": [{"component_type": "compute", "stage": 0,
                    "main_operation": {"name": "PowerControl"}}]})
                .to_string(),
            ),
            ..Default::default()
        })
        .await
        .expect_err("invalid definition");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(err.message(), "steps[0]: stage must be >= 1");
    let err = s
        .client
        .update_operation_rule(pb::UpdateOperationRuleRequest {
            rule_id: Some(uuid(a)),
            rule_definition_json: Some(
                json!({"steps": [{"component_type": "compute", "stage": 1, "max_paralel": 1,
                    "main_operation": {"name": "PowerControl"}}]})
                .to_string(),
            ),
            ..Default::default()
        })
        .await
        .expect_err("a typo in the definition");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(
        err.message(),
        "steps[0]: unknown key \"max_paralel\" (did you mean \"max_parallel\"?)"
    );
    assert_eq!(
        get_rule(&mut s.client, a)
            .await
            .expect("a")
            .rule_definition_json,
        after.rule_definition_json,
        "a refused update changes nothing"
    );
    let unknown = Uuid::new_v4();
    let err = s
        .client
        .update_operation_rule(pb::UpdateOperationRuleRequest {
            rule_id: Some(uuid(unknown)),
            name: Some("x".into()),
            ..Default::default()
        })
        .await
        .expect_err("unknown");
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(err.message(), format!("operation rule {unknown} not found"));

    // Associations: upsert per (rack, type, code), get, list, disassociate.
    let association =
        |operation_type: pb::OperationType, code: &str| pb::GetRackRuleAssociationRequest {
            rack_id: Some(uuid(rack)),
            operation_type: operation_type as i32,
            operation_code: code.into(),
        };
    let associated = |reply: pb::GetRackRuleAssociationResponse| {
        Uuid::parse_str(&reply.rule_id.expect("rule id").id).expect("uuid")
    };
    let got = s
        .client
        .get_rack_rule_association(association(PowerControl, "power_on"))
        .await
        .expect("get association")
        .into_inner();
    assert_eq!(associated(got), Uuid::nil(), "none yet: the nil UUID");
    for rule in [a, b, fw] {
        s.client
            .associate_rule_with_rack(pb::AssociateRuleWithRackRequest {
                rack_id: Some(uuid(rack)),
                rule_id: Some(uuid(rule)),
            })
            .await
            .expect("associate");
    }
    let got = s
        .client
        .get_rack_rule_association(association(PowerControl, "power_on"))
        .await
        .expect("get association")
        .into_inner();
    assert_eq!(associated(got), b, "the later association replaced a's");
    let listed = s
        .client
        .list_rack_rule_associations(pb::ListRackRuleAssociationsRequest {
            rack_id: Some(uuid(rack)),
        })
        .await
        .expect("list associations")
        .into_inner()
        .associations;
    let mut pairs: Vec<(String, Uuid)> = listed
        .iter()
        .map(|a| {
            assert_eq!(a.rack_id, Some(uuid(rack)));
            (
                a.operation_code.clone(),
                Uuid::parse_str(&a.rule_id.as_ref().expect("rule").id).expect("uuid"),
            )
        })
        .collect();
    pairs.sort();
    assert_eq!(
        pairs,
        [("power_on".to_string(), b), ("upgrade".to_string(), fw)]
    );
    let err = s
        .client
        .associate_rule_with_rack(pb::AssociateRuleWithRackRequest {
            rack_id: Some(uuid(rack)),
            rule_id: Some(uuid(Uuid::new_v4())),
        })
        .await
        .expect_err("unknown rule");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    let err = s
        .client
        .associate_rule_with_rack(pb::AssociateRuleWithRackRequest {
            rack_id: Some(uuid(Uuid::new_v4())),
            rule_id: Some(uuid(a)),
        })
        .await
        .expect_err("unknown rack");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    for _ in 0..2 {
        // The second time there is nothing to remove: a no-op.
        s.client
            .disassociate_rule_from_rack(pb::DisassociateRuleFromRackRequest {
                rack_id: Some(uuid(rack)),
                operation_type: FirmwareControl as i32,
                operation_code: "upgrade".into(),
            })
            .await
            .expect("disassociate");
    }
    let got = s
        .client
        .get_rack_rule_association(association(FirmwareControl, "upgrade"))
        .await
        .expect("get association")
        .into_inner();
    assert_eq!(associated(got), Uuid::nil());

    // Delete: gone, its associations with it; deleting again is NotFound.
    s.client
        .delete_operation_rule(pb::DeleteOperationRuleRequest {
            rule_id: Some(uuid(b)),
        })
        .await
        .expect("delete");
    let err = get_rule(&mut s.client, b).await.expect_err("deleted");
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(err.message(), format!("operation rule {b} not found"));
    let got = s
        .client
        .get_rack_rule_association(association(PowerControl, "power_on"))
        .await
        .expect("get association")
        .into_inner();
    assert_eq!(associated(got), Uuid::nil(), "association cascaded");
    let err = s
        .client
        .delete_operation_rule(pb::DeleteOperationRuleRequest {
            rule_id: Some(uuid(b)),
        })
        .await
        .expect_err("deleted twice");
    assert_eq!(err.code(), Code::NotFound);
    let err = s
        .client
        .get_operation_rule(pb::GetOperationRuleRequest { rule_id: None })
        .await
        .expect_err("no id");
    assert_eq!(err.code(), Code::InvalidArgument);
    s.stop().await;
}

/// Power-on rules that each touch one type only, so the call log shows
/// which one ran.
async fn rule_resolution_order(backend: Backend) {
    let Some((mut s, mut sim)) = start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 2).await;
    use pb::OperationType::PowerControl;

    /// Runs a power-on of fixture rack `rack` (optionally with an explicit
    /// rule) and returns its applied rule and the types it powered.
    async fn run(
        s: &mut TestServer,
        sim: &mut SimAdminClient<Channel>,
        rack: u32,
        rule: Option<Uuid>,
    ) -> (Option<Uuid>, BTreeSet<String>, Uuid) {
        let mark = log_mark(sim).await;
        let mut req = submit(Op::PowerOn, whole(rack));
        if let Some(rule) = rule {
            req = req.rule(rule);
        }
        let id = req.one(&mut s.client).await;
        let t = completed(s, id).await;
        let calls = rack_calls(sim, mark, rack).await;
        (applied_rule(&t), types_called(&calls, "power_control"), id)
    }
    let set =
        |types: &[&str]| -> BTreeSet<String> { types.iter().map(|t| t.to_string()).collect() };

    // Nothing in the database: the built-in (no applied rule).
    let (applied, powered, _) = run(&mut s, &mut sim, 1, None).await;
    assert_eq!(applied, None);
    assert_eq!(powered, set(&["Compute", "NVSwitch", "PowerShelf"]));

    // A default rule.
    let default = create_rule(
        &mut s.client,
        rule_request(
            "default",
            PowerControl,
            "power_on",
            &staged_power_rule(&["compute"]),
            true,
        ),
    )
    .await;
    let (applied, powered, _) = run(&mut s, &mut sim, 1, None).await;
    assert_eq!(applied, Some(default));
    assert_eq!(powered, set(&["Compute"]));

    // A rack association beats the default, on that rack only.
    let pinned = create_rule(
        &mut s.client,
        rule_request(
            "pinned",
            PowerControl,
            "power_on",
            &staged_power_rule(&["nvswitch"]),
            false,
        ),
    )
    .await;
    s.client
        .associate_rule_with_rack(pb::AssociateRuleWithRackRequest {
            rack_id: Some(uuid(fixture_id(1))),
            rule_id: Some(uuid(pinned)),
        })
        .await
        .expect("associate");
    let (applied, powered, pinned_task) = run(&mut s, &mut sim, 1, None).await;
    assert_eq!(applied, Some(pinned));
    assert_eq!(powered, set(&["NVSwitch"]));
    let (applied, powered, _) = run(&mut s, &mut sim, 2, None).await;
    assert_eq!(applied, Some(default), "rack 2 has no association");
    assert_eq!(powered, set(&["Compute"]));

    // An explicit rule beats the association.
    let explicit = create_rule(
        &mut s.client,
        rule_request(
            "explicit",
            PowerControl,
            "power_on",
            &staged_power_rule(&["powershelf"]),
            false,
        ),
    )
    .await;
    let (applied, powered, _) = run(&mut s, &mut sim, 1, Some(explicit)).await;
    assert_eq!(applied, Some(explicit));
    assert_eq!(powered, set(&["PowerShelf"]));

    // An unknown explicit rule is an error, not a fall-through.
    let unknown = Uuid::new_v4();
    let err = submit(Op::PowerOn, whole(1))
        .rule(unknown)
        .send(&mut s.client)
        .await
        .expect_err("unknown rule");
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(err.message(), format!("operation rule {unknown} not found"));

    // Deleting the pinned rule drops the association (back to the default)
    // and clears applied_rule_id of the task that used it.
    s.client
        .delete_operation_rule(pb::DeleteOperationRuleRequest {
            rule_id: Some(uuid(pinned)),
        })
        .await
        .expect("delete");
    assert_eq!(applied_rule(&task(&mut s.client, pinned_task).await), None);
    let (applied, powered, _) = run(&mut s, &mut sim, 1, None).await;
    assert_eq!(applied, Some(default));
    assert_eq!(powered, set(&["Compute"]));

    // A rule without a step for the targeted types is not applicable.
    let err = submit(Op::PowerOn, typed(1, &[pb::ComponentType::Nvswitch]))
        .send(&mut s.client)
        .await
        .expect_err("not applicable");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    s.stop().await;
}

/// Steps of one stage run side by side; `max_parallel` splits a step's
/// components into batches run one after another.
async fn rule_steps_run_in_parallel_and_in_batches(backend: Backend) {
    let Some((mut s, mut sim)) = start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    let verify = json!({"name": "VerifyPowerStatus", "timeout": "10s",
        "poll_interval": "1s", "parameters": {"expected_status": "off"}});
    let definition = json!({"steps": [
        {"component_type": "compute", "stage": 1, "max_parallel": 1,
         "main_operation": {"name": "PowerControl"}},
        {"component_type": "nvswitch", "stage": 1,
         "main_operation": {"name": "PowerControl"}, "post_operation": [verify]},
        {"component_type": "powershelf", "stage": 2,
         "main_operation": {"name": "PowerControl"}},
    ]})
    .to_string();
    let rule = create_rule(
        &mut s.client,
        rule_request(
            "parallel",
            pb::OperationType::PowerControl,
            "power_off",
            &definition,
            false,
        ),
    )
    .await;
    let mark = log_mark(&mut sim).await;
    let id = submit(Op::PowerOff, whole(1))
        .rule(rule)
        .one(&mut s.client)
        .await;
    let t = completed(&mut s, id).await;
    assert_eq!(applied_rule(&t), Some(rule));
    let calls: Vec<(String, String, Vec<String>)> = rack_calls(&mut sim, mark, 1)
        .await
        .into_iter()
        .map(|c| (c.call, c.component_type, c.components))
        .collect();
    let call = |call: &str, ty: &str, components: &[String]| {
        (call.to_string(), ty.to_string(), components.to_vec())
    };
    let position = |wanted: &(String, String, Vec<String>)| {
        calls
            .iter()
            .position(|c| c == wanted)
            .unwrap_or_else(|| panic!("{wanted:?} not called: {calls:#?}"))
    };
    // One batch per tray (in the task's component order, by inventory id).
    let trays: Vec<usize> = calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.0 == "power_control" && c.1 == "Compute")
        .map(|(i, c)| {
            assert_eq!(c.2.len(), 1, "one tray per batch: {calls:#?}");
            i
        })
        .collect();
    assert_eq!(trays.len(), 2, "{calls:#?}");
    assert_ne!(calls[trays[0]].2, calls[trays[1]].2);
    let (tray_0, tray_1) = (trays[0], trays[1]);
    let switch = position(&call("power_control", "NVSwitch", &[ext(1, "nvswitch", 0)]));
    let switch_verified = position(&call("power_status", "NVSwitch", &[ext(1, "nvswitch", 0)]));
    let shelf = position(&call(
        "power_control",
        "PowerShelf",
        &[ext(1, "powershelf", 0)],
    ));
    // One power call per batch, the switch's verification, and a power
    // read-back after each batch of the steps without a verification (the
    // inventory records the state: two trays and the shelf).
    let read_backs = calls
        .iter()
        .filter(|c| c.0 == "power_status" && c.1 != "NVSwitch")
        .count();
    assert_eq!(read_backs, 3, "{calls:#?}");
    assert_eq!(
        calls.len(),
        5 + read_backs,
        "one call per batch: {calls:#?}"
    );
    // The switch step started beside the first tray batch, before its own
    // verification; the second tray batch only after the first returned
    // (one power latency later, after the switch's call); the shelf last.
    assert!(tray_0 < switch_verified && switch < tray_1, "{calls:#?}");
    assert!(tray_0 < tray_1, "batches in order: {calls:#?}");
    assert!(
        [tray_0, tray_1, switch, switch_verified]
            .iter()
            .all(|p| *p < shelf),
        "stage 2 after stage 1: {calls:#?}"
    );
    s.stop().await;
}

/// A task queued with an explicit rule must run that rule once promoted,
/// not whatever the association / default / built-in resolution gives.
async fn queued_task_keeps_its_explicit_rule(backend: Backend) {
    let Some((mut s, mut sim)) = start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    let explicit = create_rule(
        &mut s.client,
        rule_request(
            "compute only",
            pb::OperationType::PowerControl,
            "power_off",
            &staged_power_rule(&["compute"]),
            false,
        ),
    )
    .await;
    let blocker = hold_rack(&mut s, &mut sim, 1).await;
    let id = submit(Op::PowerOff, whole(1))
        .rule(explicit)
        .queue(Conflict::Queue(600))
        .one(&mut s.client)
        .await;
    assert_eq!(
        status(&task(&mut s.client, id).await),
        pb::TaskStatus::Waiting
    );
    // Without the shelf fault a wrongly resolved rule would still finish,
    // and be caught by the assertions below rather than by a timeout.
    set_faults(&mut sim, vec![]).await;
    let mark = log_mark(&mut sim).await;
    cancel(&mut s.client, blocker).await.expect("cancel");
    let t = completed(&mut s, id).await;
    assert_eq!(applied_rule(&t), Some(explicit), "{t:#?}");
    let calls = rack_calls(&mut sim, mark, 1).await;
    assert_eq!(
        types_called(&calls, "power_control"),
        BTreeSet::from(["Compute".to_string()]),
        "{calls:#?}"
    );
    assert_completed_report(&t, &[&[("Compute", 2)]]);
    s.stop().await;
}

// ---- 7. faults -------------------------------------------------------------------

async fn fault_plan_fails_the_task_with_its_stage(backend: Backend) {
    let Some((mut s, mut sim)) = start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 2).await;
    set_faults(&mut sim, vec![fault(1, "Compute", "", "power", "fail")]).await;
    let ids = submit(
        Op::PowerOn,
        racks_spec(vec![rack_by_id(1, &[]), rack_by_id(2, &[])]),
    )
    .send(&mut s.client)
    .await
    .expect("submit");
    assert_eq!(ids.len(), 2);

    // Rack 2 has no fault.
    completed(&mut s, ids[1]).await;

    // Rack 1: shelves and switches power on, the trays fail (after the
    // built-in's three attempts).
    let t = wait_status(&mut s, ids[0], pb::TaskStatus::Failed).await;
    assert!(
        t.message
            .starts_with("stage 3 failed: component type Compute failed: "),
        "{}",
        t.message
    );
    assert!(t.message.contains(&ext(1, "compute", 0)), "{}", t.message);
    assert!(t.finished_at.is_some());
    let r = report(&t);
    assert_eq!(r["error"], t.message.as_str(), "{r:#}");
    let stages = r["stages"].as_array().expect("stages");
    assert_eq!(stages.len(), 3);
    assert_eq!(stages[0]["status"], "completed");
    assert_eq!(stages[1]["status"], "completed");
    let failed = &stages[2];
    assert_eq!(failed["number"], 3);
    assert_eq!(failed["status"], "failed", "{r:#}");
    assert!(
        failed["error"]
            .as_str()
            .expect("stage error")
            .starts_with("component type Compute failed: "),
        "{r:#}"
    );
    let step = &failed["steps"][0];
    assert_eq!(step["component_type"], "Compute");
    assert_eq!(step["status"], "failed");
    assert_eq!(step["failed_components"], 2);
    assert_eq!(step["completed_components"], 0);
    assert!(step["error"].is_string());

    let calls = rack_calls(&mut sim, 0, 1).await;
    let attempts = calls
        .iter()
        .filter(|c| c.call == "power_control" && c.component_type == "Compute")
        .inspect(|c| assert_eq!(c.outcome, "fail"))
        .count();
    assert_eq!(attempts, 3, "the built-in's three attempts: {calls:#?}");
    s.stop().await;
}

// ---- 8. restart ------------------------------------------------------------------

/// What is honest to assert: the simulated fleet lives in the server
/// process, so a naive restart would also "power-cycle the hardware" and
/// forget the update in flight. Real hardware outlives the flow server, so
/// both servers here drive one fleet ([`TestServer::start_with_fleet`]):
/// the update started by the first server keeps going while no server runs.
/// The resumed task must then (a) not run its completed stage again (no new
/// shelf power call, stage 1 timestamps unchanged), (b) poll the compute
/// update already in flight rather than start it again (no new
/// `firmware_start` for compute), and (c) complete.
async fn restart_resumes_a_running_task(backend: Backend) {
    let mut config = config();
    config.sim.firmware_update_ms = 1500;
    let fleet = SimFleet::new(config.sim.clone());
    let Some(mut s) = TestServer::start_with_fleet(backend, config.clone(), fleet.clone()).await
    else {
        return;
    };
    let mut sim = sim_client(&s).await;
    fixture_fleet(&mut s.client, 1).await;
    let firmware = |ty: &str, stage: i32| {
        json!({"component_type": ty, "stage": stage,
            "main_operation": {"name": "FirmwareControl",
                "parameters": {"poll_interval": "50ms", "poll_timeout": "1m"}}})
    };
    let definition = json!({"steps": [
        {"component_type": "powershelf", "stage": 1,
         "main_operation": {"name": "PowerControl", "parameters": {"operation": "power_on"}}},
        firmware("compute", 2),
        firmware("nvswitch", 3),
    ]})
    .to_string();
    let rule = create_rule(
        &mut s.client,
        rule_request(
            "shelf, then flash",
            pb::OperationType::FirmwareControl,
            "upgrade",
            &definition,
            false,
        ),
    )
    .await;
    let id = submit(Op::Firmware, whole(1))
        .rule(rule)
        .one(&mut s.client)
        .await;
    // A second upgrade of the same rack waits behind it, across the restart.
    let queued = submit(Op::Firmware, whole(1))
        .rule(rule)
        .queue(Conflict::Queue(600))
        .one(&mut s.client)
        .await;
    let waiting = task(&mut s.client, queued).await;
    assert_eq!(status(&waiting), pb::TaskStatus::Waiting);

    // Stop while the compute update runs (stage 1 done, stage 2 started).
    wait_log(&mut sim, 0, "the compute update starting", |log| {
        log.iter()
            .any(|c| c.call == "firmware_start" && c.component_type == "Compute")
    })
    .await;
    let before = wait_task(&mut s, id, "in stage 2", |t| {
        !t.report.is_empty() && report(t)["stages"][1]["status"] == "running"
    })
    .await;
    let stage_1 = report(&before)["stages"][0].clone();
    assert_eq!(stage_1["status"], "completed");
    let mark = log_mark(&mut sim).await;
    s.restart_with_fleet(config, fleet.clone()).await;
    let mut sim = sim_client(&s).await;
    let t = task(&mut s.client, id).await;
    assert!(
        matches!(
            status(&t),
            pb::TaskStatus::Running | pb::TaskStatus::Completed
        ),
        "still running after the restart: {t:#?}"
    );

    let t = completed(&mut s, id).await;
    assert_eq!(t.started_at, before.started_at, "started once");
    let r = report(&t);
    assert_eq!(r["stages"][0], stage_1, "stage 1 not run again: {r:#}");
    assert_completed_report(
        &t,
        &[&[("PowerShelf", 1)], &[("Compute", 2)], &[("NVSwitch", 1)]],
    );
    // The queued upgrade is promoted once the resumed one finished, keeps
    // its explicit rule, and runs in full. It starts the moment the first
    // ends, so the calls after the restart are told apart by time.
    let second = completed(&mut s, queued).await;
    assert_eq!(second.created_at, waiting.created_at);
    assert!(
        at(&second.started_at) >= at(&t.finished_at),
        "after the first"
    );
    assert_eq!(applied_rule(&second), Some(rule));
    let second_started_ms = {
        let (secs, nanos) = at(&second.started_at);
        secs * 1000 + i64::from(nanos) / 1_000_000
    };
    let (calls, second_calls): (Vec<_>, Vec<_>) = rack_calls(&mut sim, mark, 1)
        .await
        .into_iter()
        .partition(|c| c.at_unix_ms < second_started_ms);
    assert_eq!(
        type_order(&second_calls),
        ["PowerShelf", "Compute", "NVSwitch"],
        "{second_calls:#?}"
    );
    assert!(
        !calls.iter().any(|c| c.component_type == "PowerShelf"),
        "no shelf call after the restart: {calls:#?}"
    );
    assert!(
        !calls
            .iter()
            .any(|c| c.call == "firmware_start" && c.component_type == "Compute"),
        "the compute update is polled, not restarted: {calls:#?}"
    );
    assert!(
        calls
            .iter()
            .any(|c| c.call == "firmware_status" && c.component_type == "Compute")
    );
    assert!(
        calls
            .iter()
            .any(|c| c.call == "firmware_start" && c.component_type == "NVSwitch")
    );
    for c in fleet.component_states(&[]) {
        if c.component_type != rackflow_domain::ComponentType::PowerShelf {
            assert_eq!(c.firmware_version, "2.0.0", "{c:?}");
        }
    }
    s.stop().await;
}
