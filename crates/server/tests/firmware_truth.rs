//! Firmware truth (issue 12) through the real gRPC API, on SQLite and
//! PostgreSQL, with the simulated fleet: the inventory records the versions
//! and power states read back from the hardware, a completed upgrade proves
//! itself (a tray that silently keeps its old image fails with expected and
//! found versions), re-running a rollout skips every component, and a
//! firmware task's maintenance window holds it or refuses it.

use rackflow_testkit as common;
use rackflow_testkit::both_stores;

use std::time::Duration;

use common::{Backend, TestServer, fixture_fleet, fixture_id, rack, uuid, whole_rack};
use rackflow_api::sim::v1 as simpb;
use rackflow_api::sim::v1::sim_admin_client::SimAdminClient;
use rackflow_api::v1 as pb;
use rackflow_engine::sim::SimConfig;
use rackflow_server::Config;
use serde_json::Value;
use tonic::Code;
use tonic::transport::Channel;
use uuid::Uuid;

both_stores!(
    a_rollout_records_versions_proves_them_and_a_rerun_skips,
    a_tray_that_keeps_its_old_firmware_fails_the_task,
    power_steps_record_power_states,
    a_maintenance_window_holds_refuses_and_closes,
    a_bundle_upgrades_a_mixed_fleet_per_model_and_refuses_what_it_does_not_cover,
    the_preview_shows_what_each_rack_runs_now,
    an_operation_run_rolls_a_bundle_out_per_rack_model,
    one_version_across_rack_models_is_refused_unless_meant,
    a_version_less_upgrade_records_the_installed_version_not_latest,
);

const DEADLINE: Duration = Duration::from_secs(30);

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
    let server = TestServer::start_with(backend, config()).await?;
    let sim = SimAdminClient::connect(format!("http://{}", server.addr))
        .await
        .expect("connect SimAdmin");
    Some((server, sim))
}

fn upgrade(version: &str) -> pb::UpgradeFirmwareRequest {
    pb::UpgradeFirmwareRequest {
        target_spec: Some(whole_rack(1)),
        target_version: Some(version.into()),
        ..Default::default()
    }
}

async fn submit_upgrade(s: &mut TestServer, req: pb::UpgradeFirmwareRequest) -> Uuid {
    let reply = s
        .client
        .upgrade_firmware(req)
        .await
        .expect("UpgradeFirmware")
        .into_inner();
    assert_eq!(reply.task_ids.len(), 1);
    Uuid::parse_str(&reply.task_ids[0].id).expect("task id")
}

async fn finished(s: &mut TestServer, id: Uuid) -> pb::Task {
    s.wait_task(id, "finished", DEADLINE, |t| t.finished_at.is_some())
        .await
}

/// The fixture rack's components, by external id.
async fn components(s: &mut TestServer) -> Vec<pb::Component> {
    s.client
        .get_components(pb::GetComponentsRequest {
            target_spec: Some(whole_rack(1)),
            ..Default::default()
        })
        .await
        .expect("GetComponents")
        .into_inner()
        .components
}

/// The components of fixture racks `ns`.
async fn components_of(s: &mut TestServer, ns: &[u32]) -> Vec<pb::Component> {
    s.client
        .get_components(pb::GetComponentsRequest {
            target_spec: Some(racks(ns)),
            ..Default::default()
        })
        .await
        .expect("GetComponents")
        .into_inner()
        .components
}

fn named<'a>(components: &'a [pb::Component], id: &str) -> &'a pb::Component {
    components
        .iter()
        .find(|c| c.component_id == id)
        .unwrap_or_else(|| panic!("component {id} in {components:#?}"))
}

/// `(component, status, found_version)` of every firmware step of the
/// task's report, in report order.
fn outcomes(t: &pb::Task) -> Vec<(String, String, String)> {
    let report: Value = serde_json::from_str(&t.report).expect("report JSON");
    let mut out = Vec::new();
    for stage in report["stages"].as_array().into_iter().flatten() {
        for step in stage["steps"].as_array().into_iter().flatten() {
            for c in step["components"].as_array().into_iter().flatten() {
                out.push((
                    c["component"].as_str().unwrap_or_default().to_string(),
                    c["status"].as_str().unwrap_or_default().to_string(),
                    c["found_version"].as_str().unwrap_or_default().to_string(),
                ));
            }
        }
    }
    out
}

async fn firmware_starts(sim: &mut SimAdminClient<Channel>) -> usize {
    sim.get_call_log(simpb::GetCallLogRequest { after_sequence: 0 })
        .await
        .expect("call log")
        .into_inner()
        .entries
        .iter()
        .filter(|e| e.call == "firmware_start")
        .count()
}

fn at(ts: &Option<prost_types::Timestamp>) -> chrono::DateTime<chrono::Utc> {
    let ts = ts.as_ref().expect("timestamp set");
    chrono::DateTime::from_timestamp(ts.seconds, u32::try_from(ts.nanos).unwrap_or(0))
        .expect("valid timestamp")
}

async fn a_rollout_records_versions_proves_them_and_a_rerun_skips(backend: Backend) {
    let Some((mut s, mut sim)) = start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    let before = components(&mut s).await;
    assert!(
        before.iter().all(|c| c.firmware_observed_at.is_none()),
        "imported versions are not observations: {before:#?}"
    );

    let id = submit_upgrade(&mut s, upgrade("2.0.0")).await;
    let t = finished(&mut s, id).await;
    assert_eq!(t.status, pb::TaskStatus::Completed as i32, "{t:#?}");
    let after = components(&mut s).await;
    let started = at(&t.started_at);
    for ext in [
        "r-0001-compute-00",
        "r-0001-compute-01",
        "r-0001-nvswitch-00",
    ] {
        let c = named(&after, ext);
        assert_eq!(c.firmware_version, "2.0.0", "{ext}");
        assert!(
            at(&c.firmware_observed_at) >= started,
            "{ext} observed during the task"
        );
    }
    // The built-in firmware rule leaves the power shelf alone.
    let shelf = named(&after, "r-0001-powershelf-00");
    assert_eq!(shelf.firmware_version, "1.0.0");
    assert!(shelf.firmware_observed_at.is_none());
    let mut completed: Vec<_> = outcomes(&t).into_iter().map(|(c, st, _)| (c, st)).collect();
    completed.sort();
    assert_eq!(
        completed,
        [
            ("r-0001-compute-00", "completed"),
            ("r-0001-compute-01", "completed"),
            ("r-0001-nvswitch-00", "completed"),
        ]
        .map(|(c, st)| (c.to_string(), st.to_string()))
    );
    let starts = firmware_starts(&mut sim).await;

    // The same rollout again: nothing is flashed, every component skipped.
    let id = submit_upgrade(&mut s, upgrade("2.0.0")).await;
    let t = finished(&mut s, id).await;
    assert_eq!(t.status, pb::TaskStatus::Completed as i32, "{t:#?}");
    assert_eq!(firmware_starts(&mut sim).await, starts, "no update sent");
    let skipped = outcomes(&t);
    assert_eq!(skipped.len(), 3, "{skipped:?}");
    assert!(
        skipped
            .iter()
            .all(|(_, st, found)| st == "skipped" && found == "2.0.0"),
        "{skipped:?}"
    );
}

async fn a_tray_that_keeps_its_old_firmware_fails_the_task(backend: Backend) {
    let Some((mut s, mut sim)) = start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    // One attempt per step: the built-in rule would retry after 30 s.
    common::create_fast_firmware_rule(&mut s.client, &["Compute", "NVSwitch"], "20ms").await;
    sim.set_faults(simpb::SetFaultsRequest {
        faults: vec![simpb::Fault {
            component: "r-0001-compute-01".into(),
            operation: "firmware".into(),
            effect: "stale".into(),
            ..Default::default()
        }],
    })
    .await
    .expect("set faults");
    let id = submit_upgrade(&mut s, upgrade("2.0.0")).await;
    let t = finished(&mut s, id).await;
    assert_eq!(t.status, pb::TaskStatus::Failed as i32, "{t:#?}");
    assert!(
        t.message.contains(
            "firmware version check failed: r-0001-compute-01: expected 2.0.0, found 1.0.0"
        ),
        "{}",
        t.message
    );
    let after = components(&mut s).await;
    assert_eq!(named(&after, "r-0001-compute-00").firmware_version, "2.0.0");
    let stale = named(&after, "r-0001-compute-01");
    assert_eq!(
        stale.firmware_version, "1.0.0",
        "the inventory has the truth"
    );
    assert!(stale.firmware_observed_at.is_some());
}

async fn power_steps_record_power_states(backend: Backend) {
    let Some((mut s, _sim)) = start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    let reply = s
        .client
        .power_off_rack(pb::PowerOffRackRequest {
            target_spec: Some(whole_rack(1)),
            ..Default::default()
        })
        .await
        .expect("PowerOffRack")
        .into_inner();
    let id = Uuid::parse_str(&reply.task_ids[0].id).expect("task id");
    let t = finished(&mut s, id).await;
    assert_eq!(t.status, pb::TaskStatus::Completed as i32, "{t:#?}");
    for c in components(&mut s).await {
        assert_eq!(c.power_state, "Off", "{c:#?}");
        assert!(at(&c.power_state_observed_at) >= at(&t.started_at));
    }
}

async fn a_maintenance_window_holds_refuses_and_closes(backend: Backend) {
    let Some((mut s, mut sim)) = start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    let now = chrono::Utc::now().timestamp();
    let ts = |seconds: i64| Some(prost_types::Timestamp { seconds, nanos: 0 });

    // A window that already closed is refused, saying so.
    let err = s
        .client
        .upgrade_firmware(pb::UpgradeFirmwareRequest {
            start_time: ts(now - 600),
            end_time: ts(now - 60),
            ..upgrade("2.0.0")
        })
        .await
        .expect_err("closed window");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().contains("maintenance window already closed"),
        "{}",
        err.message()
    );

    // A window to come holds the task, visibly, until it opens.
    let opens = now + 3;
    let id = submit_upgrade(
        &mut s,
        pb::UpgradeFirmwareRequest {
            start_time: ts(opens),
            end_time: ts(now + 3600),
            ..upgrade("2.0.0")
        },
    )
    .await;
    let held = s.task(id).await;
    assert_eq!(held.status, pb::TaskStatus::Waiting as i32, "{held:#?}");
    assert!(
        held.message.contains("waiting for its maintenance window"),
        "{}",
        held.message
    );
    assert_eq!(firmware_starts(&mut sim).await, 0, "nothing flashed yet");
    let t = finished(&mut s, id).await;
    assert_eq!(t.status, pb::TaskStatus::Completed as i32, "{t:#?}");
    assert!(
        at(&t.started_at).timestamp() >= opens,
        "started in its window"
    );

    // A task queued behind a running one whose window closes meanwhile is
    // not started late: it ends with the reason.
    sim.set_faults(simpb::SetFaultsRequest {
        faults: vec![simpb::Fault {
            component_type: "PowerShelf".into(),
            operation: "power".into(),
            effect: "hang".into(),
            ..Default::default()
        }],
    })
    .await
    .expect("set faults");
    let reply = s
        .client
        .power_on_rack(pb::PowerOnRackRequest {
            target_spec: Some(whole_rack(1)),
            ..Default::default()
        })
        .await
        .expect("PowerOnRack")
        .into_inner();
    let holder = Uuid::parse_str(&reply.task_ids[0].id).expect("task id");
    s.wait_task(holder, "running", DEADLINE, |t| {
        t.status == pb::TaskStatus::Running as i32
    })
    .await;
    let closes = chrono::Utc::now().timestamp() + 2;
    let late = submit_upgrade(
        &mut s,
        pb::UpgradeFirmwareRequest {
            end_time: ts(closes),
            queue_options: Some(pb::QueueOptions {
                conflict_strategy: pb::ConflictStrategy::Queue as i32,
                queue_timeout_seconds: 600,
            }),
            ..upgrade("3.0.0")
        },
    )
    .await;
    assert_eq!(s.task(late).await.status, pb::TaskStatus::Waiting as i32);
    let t = finished(&mut s, late).await;
    assert_eq!(t.status, pb::TaskStatus::Terminated as i32, "{t:#?}");
    assert!(
        t.message.contains("maintenance window closed at"),
        "{}",
        t.message
    );
    assert!(at(&t.finished_at).timestamp() >= closes);
}

/// Creates the run and waits until it is completed.
async fn run_to_completion(s: &mut TestServer, request: pb::CreateOperationRunRequest) {
    let id = s
        .client
        .create_operation_run(request)
        .await
        .expect("CreateOperationRun")
        .into_inner()
        .id
        .expect("run id");
    rackflow_testkit::wait::wait_run(&mut s.extensions(), &id, "completed", DEADLINE, |r| {
        r.summary
            .as_ref()
            .and_then(|s| s.state)
            .is_some_and(|st| st.status == pb::OperationRunStatus::Completed as i32)
    })
    .await;
}

/// Fixture racks `n` (two compute trays each) of the given models.
async fn create_racks(s: &mut TestServer, racks: &[(u32, &str)]) {
    for &(n, model) in racks {
        let mut r = rack(n, Some(fixture_id(n)), 2);
        if let Some(info) = r.info.as_mut() {
            info.model = Some(model.into());
        }
        s.client
            .create_expected_rack(pb::CreateExpectedRackRequest { rack: Some(r) })
            .await
            .expect("create rack");
    }
}

fn entry(model: &str, ty: pb::ComponentType, version: &str) -> pb::FirmwareBundleEntry {
    pb::FirmwareBundleEntry {
        rack_model: model.into(),
        component_type: ty as i32,
        version: version.into(),
    }
}

fn racks(ns: &[u32]) -> pb::OperationTargetSpec {
    pb::OperationTargetSpec {
        targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
            targets: ns
                .iter()
                .map(|n| pb::RackTarget {
                    identifier: Some(pb::rack_target::Identifier::Id(uuid(fixture_id(*n)))),
                    component_types: Vec::new(),
                })
                .collect(),
        })),
    }
}

async fn a_bundle_upgrades_a_mixed_fleet_per_model_and_refuses_what_it_does_not_cover(
    backend: Backend,
) {
    let Some((mut s, _sim)) = start(backend).await else {
        return;
    };
    // Rack 1 is a GB200, rack 2 a GB300, rack 3 a model the bundle lacks.
    create_racks(
        &mut s,
        &[(1, "GB200 NVL72"), (2, "GB300 NVL72"), (3, "GB100")],
    )
    .await;
    let bundle = pb::FirmwareBundle {
        name: "fleet-2026-12".into(),
        entries: vec![
            entry(
                "GB200 NVL72",
                pb::ComponentType::Compute,
                "gb200-fw-25.05.2",
            ),
            entry(
                "GB200 NVL72",
                pb::ComponentType::Nvswitch,
                "nvsw-gb200-1.14",
            ),
            entry(
                "gb300 nvl72",
                pb::ComponentType::Compute,
                "gb300-fw-26.01.0",
            ),
            entry("gb300 nvl72", pb::ComponentType::Nvswitch, "nvsw-gb300-2.0"),
        ],
    };
    let with_bundle = |spec| pb::UpgradeFirmwareRequest {
        target_spec: Some(spec),
        firmware_bundle: Some(bundle.clone()),
        ..Default::default()
    };

    // A rack the bundle does not cover is refused, naming it.
    let err = s
        .client
        .upgrade_firmware(with_bundle(racks(&[3])))
        .await
        .expect_err("uncovered model");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message()
            .contains("has no versions for rack model \"GB100\" (rack r-0003)"),
        "{}",
        err.message()
    );
    // A bundle and a target_version together are refused.
    let err = s
        .client
        .upgrade_firmware(pb::UpgradeFirmwareRequest {
            target_version: Some("1.0".into()),
            ..with_bundle(racks(&[1]))
        })
        .await
        .expect_err("both");
    assert_eq!(err.code(), Code::InvalidArgument);

    let reply = s
        .client
        .upgrade_firmware(with_bundle(racks(&[1, 2])))
        .await
        .expect("UpgradeFirmware")
        .into_inner();
    assert_eq!(reply.task_ids.len(), 2, "one task per rack");
    for t in &reply.task_ids {
        let t = finished(&mut s, Uuid::parse_str(&t.id).expect("id")).await;
        assert_eq!(t.status, pb::TaskStatus::Completed as i32, "{t:#?}");
    }
    let components = components_of(&mut s, &[1, 2]).await;
    let want = |ext: &str| match ext {
        e if e.starts_with("r-0001-compute") => "gb200-fw-25.05.2",
        e if e.starts_with("r-0001-nvswitch") => "nvsw-gb200-1.14",
        e if e.starts_with("r-0002-compute") => "gb300-fw-26.01.0",
        e if e.starts_with("r-0002-nvswitch") => "nvsw-gb300-2.0",
        _ => "1.0.0",
    };
    for c in &components {
        assert_eq!(c.firmware_version, want(&c.component_id), "{c:#?}");
        if !c.component_id.contains("powershelf") {
            assert!(c.firmware_observed_at.is_some(), "{c:#?}");
        }
    }

    // The same bundle again: every component is already there.
    let reply = s
        .client
        .upgrade_firmware(with_bundle(racks(&[1, 2])))
        .await
        .expect("UpgradeFirmware")
        .into_inner();
    for t in &reply.task_ids {
        let t = finished(&mut s, Uuid::parse_str(&t.id).expect("id")).await;
        assert_eq!(t.status, pb::TaskStatus::Completed as i32, "{t:#?}");
        let outcomes = outcomes(&t);
        assert_eq!(outcomes.len(), 3, "{outcomes:?}");
        assert!(
            outcomes.iter().all(|(_, st, _)| st == "skipped"),
            "{outcomes:?}"
        );
    }
}

/// The preview of a run shows, per planned rack, the versions its targeted
/// components run now and how many of those were read back (issue 12).
async fn the_preview_shows_what_each_rack_runs_now(backend: Backend) {
    let Some((mut s, _sim)) = start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 2).await;
    let id = submit_upgrade(&mut s, upgrade("2.0.0")).await;
    let t = finished(&mut s, id).await;
    assert_eq!(t.status, pb::TaskStatus::Completed as i32, "{t:#?}");

    let preview = s
        .extensions()
        .preview_operation_run(common::run_request("versions", 100, "s", "o", 1))
        .await
        .expect("preview")
        .into_inner();
    let versions = |ext: &str| -> Vec<(i32, String, i32, i32)> {
        preview
            .targets
            .iter()
            .find(|t| t.rack_external_id == ext)
            .unwrap_or_else(|| panic!("{ext} planned: {preview:#?}"))
            .installed_versions
            .iter()
            .map(|v| {
                (
                    v.component_type,
                    v.version.clone(),
                    v.components,
                    v.observed,
                )
            })
            .collect()
    };
    let compute = pb::ComponentType::Compute as i32;
    let switch = pb::ComponentType::Nvswitch as i32;
    let shelf = pb::ComponentType::Powershelf as i32;
    // Rack 1 was upgraded (its shelf left alone by the built-in rule).
    assert_eq!(
        versions("r-0001"),
        [
            (compute, "2.0.0".to_string(), 2, 2),
            (switch, "2.0.0".to_string(), 1, 1),
            (shelf, "1.0.0".to_string(), 1, 0),
        ]
    );
    // Rack 2 runs what was imported, never read back.
    assert_eq!(
        versions("r-0002"),
        [
            (compute, "1.0.0".to_string(), 2, 0),
            (switch, "1.0.0".to_string(), 1, 0),
            (shelf, "1.0.0".to_string(), 1, 0),
        ]
    );
}

/// A phased rollout (operation run) from a bundle: each rack's task gets
/// its model's versions, the inventory shows them observed, and a second
/// run over the same racks skips every component.
async fn an_operation_run_rolls_a_bundle_out_per_rack_model(backend: Backend) {
    let mut config = config();
    config.dispatcher.enabled = true;
    config.dispatcher.poll_interval_ms = 100;
    let Some(mut s) = TestServer::start_with(backend, config).await else {
        return;
    };
    create_racks(&mut s, &[(1, "GB200 NVL72"), (2, "GB300 NVL72")]).await;
    let bundle = pb::FirmwareBundle {
        name: "run-bundle".into(),
        entries: vec![
            entry("GB200 NVL72", pb::ComponentType::Compute, "gb200-2"),
            entry("GB200 NVL72", pb::ComponentType::Nvswitch, "nvsw-2"),
            entry("GB300 NVL72", pb::ComponentType::Compute, "gb300-3"),
            entry("GB300 NVL72", pb::ComponentType::Nvswitch, "nvsw-3"),
        ],
    };
    let run = |name: &str| {
        let mut req = common::run_request(name, 100, "s", "o", 1);
        let upgrade = common::upgrade(&mut req);
        upgrade.target_version = None;
        upgrade.firmware_bundle = Some(bundle.clone());
        req
    };
    run_to_completion(&mut s, run("bundle-1")).await;
    let components = components_of(&mut s, &[1, 2]).await;
    assert_eq!(components.len(), 8);
    let rack_one = uuid(fixture_id(1));
    for c in &components {
        let gb200 = c.rack_id.as_ref() == Some(&rack_one);
        let want = match (gb200, c.r#type) {
            (_, t) if t == pb::ComponentType::Powershelf as i32 => continue,
            (true, t) if t == pb::ComponentType::Compute as i32 => "gb200-2",
            (true, _) => "nvsw-2",
            (false, t) if t == pb::ComponentType::Compute as i32 => "gb300-3",
            (false, _) => "nvsw-3",
        };
        assert_eq!(c.firmware_version, want, "{c:#?}");
        assert!(c.firmware_observed_at.is_some(), "{c:#?}");
    }

    // The same rollout again sends nothing.
    let mut sim = SimAdminClient::connect(format!("http://{}", s.addr))
        .await
        .expect("connect SimAdmin");
    let starts = firmware_starts(&mut sim).await;
    run_to_completion(&mut s, run("bundle-2")).await;
    assert_eq!(firmware_starts(&mut sim).await, starts, "no update sent");
}

/// Issue 31 item 3: one `target_version` for racks of several models (or a
/// version of another model family) installs one model's image on the
/// others: refused at submission — tasks, runs and previews — unless the
/// request says it means it; the preview shows each rack's model and the
/// version each type gets from a bundle.
async fn one_version_across_rack_models_is_refused_unless_meant(backend: Backend) {
    let Some((mut s, _sim)) = start(backend).await else {
        return;
    };
    create_racks(&mut s, &[(1, "GB200 NVL72"), (2, "GB300 NVL72")]).await;
    let both = |version: &str| pb::UpgradeFirmwareRequest {
        target_spec: Some(racks(&[1, 2])),
        target_version: Some(version.into()),
        ..Default::default()
    };
    let err = s
        .client
        .upgrade_firmware(both("2.0.0"))
        .await
        .expect_err("one version for two models");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().contains(
            "one target_version (\"2.0.0\") for racks of 2 rack models (GB200 NVL72: 1 rack, \
             GB300 NVL72: 1 rack)"
        ) && err.message().contains("--bundle"),
        "{err:?}"
    );
    let err = s
        .client
        .upgrade_firmware(pb::UpgradeFirmwareRequest {
            target_spec: Some(racks(&[2])),
            ..upgrade("gb200-fw-25.05.2")
        })
        .await
        .expect_err("a GB200 image on a GB300 rack");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("is a GB200 image"), "{err:?}");
    let tasks = s
        .client
        .list_tasks(pb::ListTasksRequest::default())
        .await
        .expect("ListTasks")
        .into_inner();
    assert_eq!(tasks.total, 0, "nothing submitted: {tasks:#?}");

    // Meant: both racks get the one version.
    let reply = s
        .client
        .upgrade_firmware(pb::UpgradeFirmwareRequest {
            same_version_for_all_models: true,
            ..both("2.0.0")
        })
        .await
        .expect("one version, meant")
        .into_inner();
    assert_eq!(reply.task_ids.len(), 2, "{reply:?}");
    for id in &reply.task_ids {
        let t = finished(&mut s, Uuid::parse_str(&id.id).expect("uuid")).await;
        assert_eq!(t.status, pb::TaskStatus::Completed as i32, "{t:#?}");
    }

    // Runs and previews: the same rule.
    let run = |same: bool| {
        let mut req = common::run_request("one-version", 100, "s", "o", 1);
        common::upgrade(&mut req).same_version_for_all_models = same;
        req
    };
    let err = s
        .client
        .create_operation_run(run(false))
        .await
        .expect_err("run with one version for two models");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("2 rack models"), "{err:?}");
    let err = s
        .extensions()
        .preview_operation_run(run(false))
        .await
        .expect_err("preview of it");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    let preview = s
        .extensions()
        .preview_operation_run(run(true))
        .await
        .expect("meant")
        .into_inner();
    for t in &preview.targets {
        assert!(
            t.target_versions.iter().all(|v| v.version == "2.0.0") && !t.target_versions.is_empty(),
            "{t:#?}"
        );
    }

    // A bundle: each rack's model and its versions.
    let mut req = run(false);
    let upgrade = common::upgrade(&mut req);
    upgrade.target_version = None;
    upgrade.firmware_bundle = Some(pb::FirmwareBundle {
        name: "b".into(),
        entries: vec![
            entry("GB200 NVL72", pb::ComponentType::Compute, "gb200-2"),
            entry("GB300 NVL72", pb::ComponentType::Compute, "gb300-3"),
            entry("GB300 NVL72", pb::ComponentType::Nvswitch, "nvsw-3"),
        ],
    });
    let preview = s
        .extensions()
        .preview_operation_run(req)
        .await
        .expect("bundle preview")
        .into_inner();
    let planned = |n: u32| {
        let t = preview
            .targets
            .iter()
            .find(|t| t.rack_id == Some(uuid(fixture_id(n))))
            .unwrap_or_else(|| panic!("rack {n} planned: {preview:#?}"));
        let versions: Vec<(i32, String)> = t
            .target_versions
            .iter()
            .map(|v| (v.component_type, v.version.clone()))
            .collect();
        (t.rack_model.clone(), versions)
    };
    let compute = pb::ComponentType::Compute as i32;
    let switch = pb::ComponentType::Nvswitch as i32;
    assert_eq!(
        planned(1),
        (
            "GB200 NVL72".to_string(),
            vec![(compute, "gb200-2".to_string())]
        )
    );
    assert_eq!(
        planned(2),
        (
            "GB300 NVL72".to_string(),
            vec![
                (compute, "gb300-3".to_string()),
                (switch, "nvsw-3".to_string())
            ]
        )
    );
}

/// Issue 31 item 4: an upgrade that names no version (or `latest`) records
/// what the hardware reports it installed — the simulated manager's newest
/// concrete version — never the word "latest".
async fn a_version_less_upgrade_records_the_installed_version_not_latest(backend: Backend) {
    let mut config = config();
    config.sim.latest_firmware_version = "1.4.2".into();
    let Some(mut s) = TestServer::start_with(backend, config).await else {
        return;
    };
    fixture_fleet(&mut s.client, 2).await;
    for (rack_number, version) in [(1, None), (2, Some("latest"))] {
        let id = submit_upgrade(
            &mut s,
            pb::UpgradeFirmwareRequest {
                target_spec: Some(whole_rack(rack_number)),
                target_version: version.map(str::to_string),
                ..Default::default()
            },
        )
        .await;
        let t = finished(&mut s, id).await;
        assert_eq!(t.status, pb::TaskStatus::Completed as i32, "{t:#?}");
    }
    let updated: Vec<pb::Component> = components_of(&mut s, &[1, 2])
        .await
        .into_iter()
        .filter(|c| c.r#type != pb::ComponentType::Powershelf as i32)
        .collect();
    assert_eq!(updated.len(), 6, "compute and switch trays of both racks");
    for c in &updated {
        assert_eq!(c.firmware_version, "1.4.2", "{c:#?}");
        assert!(c.firmware_observed_at.is_some(), "read back: {c:#?}");
    }
}
