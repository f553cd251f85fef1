//! A rack's life through the rack manager (issue 33 acceptance, `rms`
//! provider), on SQLite and PostgreSQL: a rack created in Flow as `new` is
//! ingested (the rack manager then lists its nodes), brought up (power
//! sequence in the rule's stage order, in the sim BMCs' call log), takes a
//! firmware rollout, is AC power cycled by the rack manager's cold reboot
//! (runbook order in the call log), and is decommissioned (powered off, its
//! nodes gone from the rack manager). Faults fail the tasks naming the
//! component and the stage.

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use rackflow_testkit as common;
use rackflow_testkit::both_stores;

use common::{Backend, TestServer, fixture_id, whole_rack};
use rackflow_api::rack_manager as rmpb;
use rackflow_api::v1 as pb;
use rackflow_engine::manager::rms_lifecycle::ColdRebootSettings;
use rackflow_rms::backend::PowerState;
use rackflow_rms::backend::sim::{
    SimBackendConfig, SimFaultEffect, SimNodeCall, SimNodeFault, SimOperation,
};
use rackflow_server::Config;
use rackflow_server::config::Provider;
use rackflow_testkit::rms::TestRms;
use uuid::Uuid;

both_stores!(
    a_rack_lives_from_ingest_to_decommission_through_the_rack_manager,
    lifecycle_faults_fail_the_task_naming_component_and_stage,
);

/// Bring-up sleeps 30 s before its last stage (the built-in rule).
const DEADLINE: Duration = Duration::from_secs(120);
const RACK: &str = "r-0001";
const SHELF: &str = "r-0001-powershelf-00";
const COMPUTES: [&str; 2] = ["r-0001-compute-00", "r-0001-compute-01"];
const SWITCH: &str = "r-0001-nvswitch-00";

async fn start_rms() -> TestRms {
    TestRms::start_custom(
        &[
            // Bring-up flashes the compute trays with the manager's default
            // image ("latest"), a rollout then takes them to 2.0.0.
            ("compute-latest.fwpkg", b"version=1.5.0\n"),
            ("compute-2.0.0.fwpkg", b"version=2.0.0\n"),
            ("nvswitch-2.0.0.fwpkg", b"version=2.0.0\n"),
        ],
        |config| {
            config.nodes.sim = SimBackendConfig {
                power_latency_ms: 10,
                read_latency_ms: 1,
                firmware_latency_ms: 40,
                jitter: 0.0,
                ..SimBackendConfig::default()
            };
        },
        None,
    )
    .await
}

fn flow_config(rms: &TestRms) -> Config {
    let mut config = Config::default();
    config.dispatcher.enabled = false;
    config.provider = Provider::Rms;
    config.rms.address = format!("http://{}", rms.addr);
    config.rms.poll_interval_ms = 20;
    config.rms.job_timeout_secs = 60;
    // The cold reboot's shortest timings (1 s each; 0 means the default).
    config.rms.cold_reboot = ColdRebootSettings {
        prestage_shutdown_poll_max_seconds: Some(10),
        discharge_floor_seconds: Some(1),
        discharge_poll_max_seconds: Some(10),
        bmc_up_floor_seconds: Some(1),
        bmc_up_poll_max_seconds: Some(10),
        nvos_hello_backoff_seconds: Some(1),
        compute_boot_wait_seconds: Some(1),
        poll_interval_seconds: Some(1),
        ..ColdRebootSettings::default()
    };
    config
}

/// The fixture rack (2 compute trays, 1 NVSwitch, 1 power shelf) created in
/// Flow with a BMC address per component; `without_bmc` names one left
/// without.
async fn create_rack(flow: &mut TestServer, without_bmc: Option<&str>) {
    let mut rack = common::rack(1, Some(fixture_id(1)), 2);
    for (i, c) in rack.components.iter_mut().enumerate() {
        if Some(c.component_id.as_str()) != without_bmc {
            c.bmcs[0].ip_address = Some(format!("127.0.0.{}", i + 2));
        }
    }
    flow.client
        .create_expected_rack(pb::CreateExpectedRackRequest { rack: Some(rack) })
        .await
        .expect("create rack");
}

async fn rack(flow: &mut TestServer) -> pb::Rack {
    flow.rack(fixture_id(1), false).await
}

fn one(ids: Vec<pb::Uuid>) -> Uuid {
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids[0].id.parse().unwrap()
}

async fn finished(flow: &mut TestServer, ids: Vec<pb::Uuid>) -> pb::Task {
    flow.wait_task(one(ids), "finished", DEADLINE, |t| t.finished_at.is_some())
        .await
}

fn assert_completed(task: &pb::Task) {
    assert_eq!(task.status, pb::TaskStatus::Completed as i32, "{task:#?}");
}

async fn ingest(flow: &mut TestServer) -> pb::Task {
    let ids = flow
        .client
        .ingest_rack(pb::IngestRackRequest {
            target_spec: Some(whole_rack(1)),
            ..Default::default()
        })
        .await
        .expect("IngestRack")
        .into_inner()
        .task_ids;
    finished(flow, ids).await
}

async fn ac_power_cycle(flow: &mut TestServer) -> pb::Task {
    let ids = flow
        .client
        .ac_power_cycle_rack(pb::AcPowerCycleRackRequest {
            target_spec: Some(whole_rack(1)),
            ..Default::default()
        })
        .await
        .expect("ACPowerCycleRack")
        .into_inner()
        .task_ids;
    finished(flow, ids).await
}

async fn decommission(flow: &mut TestServer) -> pb::Task {
    let ids = flow
        .client
        .decommission_rack(pb::DecommissionRackRequest {
            target_spec: Some(whole_rack(1)),
            ..Default::default()
        })
        .await
        .expect("DecommissionRack")
        .into_inner()
        .task_ids;
    finished(flow, ids).await
}

async fn listed(rms: &TestRms) -> Vec<String> {
    let mut nodes: Vec<String> = rms
        .client
        .clone()
        .list_node_inventory(rmpb::ListNodeInventoryRequest {})
        .await
        .unwrap()
        .into_inner()
        .nodes
        .into_iter()
        .filter(|n| n.rack_id == RACK)
        .map(|n| n.node_id)
        .collect();
    nodes.sort();
    nodes
}

/// Index of the first `set_power` call with `detail` on `node` after `from`.
fn first(calls: &[SimNodeCall], from: usize, node: &str, detail: &str) -> usize {
    from + calls[from..]
        .iter()
        .position(|c| c.node_id == node && c.call == "set_power" && c.detail == detail)
        .unwrap_or_else(|| panic!("no set_power {detail} on {node} after #{from}: {calls:#?}"))
}

async fn a_rack_lives_from_ingest_to_decommission_through_the_rack_manager(backend: Backend) {
    let rms = start_rms().await;
    let Some(mut flow) = TestServer::start_with(backend, flow_config(&rms)).await else {
        return;
    };
    create_rack(&mut flow, None).await;
    assert_eq!(
        rack(&mut flow).await.lifecycle_status,
        pb::RackLifecycleStatus::New as i32
    );
    assert!(listed(&rms).await.is_empty());

    // Ingest: the rack manager lists every node of the rack.
    let task = ingest(&mut flow).await;
    assert_completed(&task);
    let mut expected: Vec<String> = COMPUTES
        .iter()
        .chain([&SWITCH, &SHELF])
        .map(ToString::to_string)
        .collect();
    expected.sort();
    assert_eq!(listed(&rms).await, expected);
    assert_eq!(
        rack(&mut flow).await.lifecycle_status,
        pb::RackLifecycleStatus::Ingested as i32
    );

    // Bring-up: shelf on, compute on, compute flashed, switch on, the
    // switches' firmware agrees, compute power cycled — through the rack
    // manager, in that order.
    let mark = rms.sim().calls().len();
    let ids = flow
        .client
        .bring_up_rack(pb::BringUpRackRequest {
            target_spec: Some(whole_rack(1)),
            ..Default::default()
        })
        .await
        .expect("BringUpRack")
        .into_inner()
        .task_ids;
    let task = finished(&mut flow, ids).await;
    assert_completed(&task);
    let calls = rms.sim().calls();
    let shelf_on = first(&calls, mark, SHELF, "on");
    let compute_on = first(&calls, mark, COMPUTES[0], "on");
    let flashed = mark
        + calls[mark..]
            .iter()
            .position(|c| c.call == "update_firmware" && c.node_id == COMPUTES[0])
            .expect("compute flashed");
    let switch_on = first(&calls, mark, SWITCH, "on");
    let compute_off = first(&calls, mark, COMPUTES[0], "off");
    assert!(
        shelf_on < compute_on && compute_on < flashed && flashed < switch_on,
        "{calls:#?}"
    );
    assert!(switch_on < compute_off, "the power cycle comes last");
    assert!(
        calls[mark..]
            .iter()
            .any(|c| c.node_id == SWITCH && c.call == "firmware_inventory"),
        "the switches' firmware consistency is read"
    );
    assert_eq!(
        rms.sim().node_firmware(RACK, COMPUTES[0]).unwrap()["BMC"],
        "1.5.0"
    );

    // Usable for a rollout.
    let ids = flow
        .client
        .upgrade_firmware(pb::UpgradeFirmwareRequest {
            target_spec: Some(whole_rack(1)),
            target_version: Some("2.0.0".into()),
            ..Default::default()
        })
        .await
        .expect("UpgradeFirmware")
        .into_inner()
        .task_ids;
    assert_completed(&finished(&mut flow, ids).await);
    assert_eq!(
        rms.sim().node_firmware(RACK, COMPUTES[1]).unwrap()["BMC"],
        "2.0.0"
    );

    // AC power cycle: the rack manager's cold reboot, in runbook order.
    let mark = rms.sim().calls().len();
    let task = ac_power_cycle(&mut flow).await;
    assert_completed(&task);
    let calls = rms.sim().calls();
    let shutdown = first(&calls, mark, COMPUTES[1], "graceful_shutdown");
    let shelf_off = first(&calls, mark, SHELF, "off");
    let shelf_on = first(&calls, shelf_off, SHELF, "on");
    let compute_on = first(&calls, shelf_on, COMPUTES[1], "on");
    assert!(shutdown < shelf_off && shelf_off < shelf_on && shelf_on < compute_on);
    assert!(
        calls[shelf_off..shelf_on]
            .iter()
            .any(|c| c.outcome == "unpowered"),
        "the trays were without power between the shelf stages"
    );
    assert_eq!(
        rms.sim().node_power(RACK, COMPUTES[0]),
        Some(PowerState::On)
    );

    // Decommission: powered off, deregistered, the rack decommissioned.
    let mark = rms.sim().calls().len();
    let task = decommission(&mut flow).await;
    assert_completed(&task);
    assert!(listed(&rms).await.is_empty(), "nodes still registered");
    let calls = rms.sim().calls();
    let compute_off = first(&calls, mark, COMPUTES[0], "off");
    let switch_off = first(&calls, mark, SWITCH, "off");
    let shelf_off = first(&calls, mark, SHELF, "off");
    assert!(compute_off < switch_off && switch_off < shelf_off);
    let rack = rack(&mut flow).await;
    assert_eq!(
        rack.lifecycle_status,
        pb::RackLifecycleStatus::Decommissioned as i32
    );
    flow.stop().await;
    rms.stop().await;
}

async fn lifecycle_faults_fail_the_task_naming_component_and_stage(backend: Backend) {
    let rms = start_rms().await;
    let Some(mut flow) = TestServer::start_with(backend, flow_config(&rms)).await else {
        return;
    };
    // Ingest of a rack with a compute tray without a BMC address: refused,
    // naming the tray.
    create_rack(&mut flow, Some(COMPUTES[1])).await;
    let task = ingest(&mut flow).await;
    assert_eq!(task.status, pb::TaskStatus::Failed as i32, "{task:#?}");
    assert!(
        task.message.contains(COMPUTES[1])
            && task.message.contains("no BMC address")
            && task.message.contains("stage 1"),
        "{}",
        task.message
    );
    // Give the tray its address.
    let components = flow.rack(fixture_id(1), true).await.components;
    let tray = components
        .iter()
        .find(|c| c.component_id == COMPUTES[1])
        .expect("tray")
        .clone();
    let mut bmc = tray.bmcs[0].clone();
    bmc.ip_address = Some("127.0.0.9".into());
    flow.client
        .patch_component(pb::PatchComponentRequest {
            id: tray.info.as_ref().and_then(|i| i.id.clone()),
            bmcs: vec![bmc],
            ..Default::default()
        })
        .await
        .expect("PatchComponent");
    assert_completed(&ingest(&mut flow).await);

    // The cold reboot fails at the shelf: the task names the stage and the
    // shelf.
    rms.sim().set_faults(vec![SimNodeFault {
        node_id: SHELF.into(),
        rack_id: None,
        operation: SimOperation::Power,
        effect: SimFaultEffect::Fail,
    }]);
    let task = ac_power_cycle(&mut flow).await;
    assert_eq!(task.status, pb::TaskStatus::Failed as i32, "{task:#?}");
    assert!(
        task.message
            .contains(&format!("power_off_shelves failed: {SHELF}"))
            && task.message.contains("stage 1"),
        "{}",
        task.message
    );

    flow.stop().await;
    rms.stop().await;
}

/// Decommission fails while a compute tray cannot be powered off (after the
/// built-in rule's retries, ~90 s: SQLite only, the store plays no part in
/// the message); the tray stays registered and the rack is not
/// decommissioned.
#[tokio::test]
async fn a_decommission_fault_fails_the_task_naming_the_tray() {
    let rms = start_rms().await;
    let Some(mut flow) = TestServer::start_with(Backend::Sqlite, flow_config(&rms)).await else {
        return;
    };
    create_rack(&mut flow, None).await;
    assert_completed(&ingest(&mut flow).await);
    rms.sim().set_faults(vec![SimNodeFault {
        node_id: COMPUTES[0].into(),
        rack_id: None,
        operation: SimOperation::Power,
        effect: SimFaultEffect::Fail,
    }]);
    let task = decommission(&mut flow).await;
    assert_eq!(task.status, pb::TaskStatus::Failed as i32, "{task:#?}");
    assert!(
        task.message.contains(COMPUTES[0])
            && task.message.contains("power off")
            && task.message.contains("stage 1"),
        "{}",
        task.message
    );
    assert!(listed(&rms).await.contains(&COMPUTES[0].to_string()));
    assert_ne!(
        rack(&mut flow).await.lifecycle_status,
        pb::RackLifecycleStatus::Decommissioned as i32
    );
    flow.stop().await;
    rms.stop().await;
}
