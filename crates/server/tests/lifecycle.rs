//! Rack lifecycle operations (issue 33) through the real gRPC API on the
//! simulated fleet, on SQLite and PostgreSQL: `IngestRack` registers the
//! compute trays and switches with their manager, `BringUpRack` runs the
//! built-in bring-up in its stage order, `DecommissionRack` retires every
//! tray and shelf and leaves them powered off; a fault fails the task naming
//! the component and the stage; bring-up conflicts with anything.

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use rackflow_testkit as common;
use rackflow_testkit::both_stores;

use common::{Backend, TestServer, fixture_fleet, whole_rack};
use rackflow_api::sim::v1 as simpb;
use rackflow_api::sim::v1::sim_admin_client::SimAdminClient;
use rackflow_api::v1 as pb;
use rackflow_engine::sim::SimConfig;
use rackflow_server::Config;
use tonic::Code;
use tonic::transport::Channel;
use uuid::Uuid;

both_stores!(
    ingest_and_decommission_run_their_built_in_rules,
    bring_up_runs_its_stages_in_order_and_conflicts_with_anything,
    ingest_filters_and_refusals,
);

/// Longest wait: the built-in bring-up sleeps 30 s before its last stage.
const DEADLINE: Duration = Duration::from_secs(90);

fn config() -> Config {
    let mut config = Config {
        sim: SimConfig {
            power_ms: 20,
            firmware_update_ms: 50,
            decommission_ms: 100,
            jitter: 0.0,
            ..SimConfig::default()
        },
        ..Config::default()
    };
    config.dispatcher.enabled = false;
    config
}

async fn start(backend: Backend) -> Option<(TestServer, SimAdminClient<Channel>)> {
    let mut server = TestServer::start_with(backend, config()).await?;
    fixture_fleet(&mut server.client, 2).await;
    let sim = SimAdminClient::connect(format!("http://{}", server.addr))
        .await
        .expect("connect SimAdmin");
    Some((server, sim))
}

async fn lifecycle(s: &mut TestServer, n: u32) -> pb::Rack {
    s.client
        .get_rack_info_by_id(pb::GetRackInfoByIdRequest {
            id: Some(common::uuid(common::fixture_id(n))),
            with_components: false,
        })
        .await
        .unwrap()
        .into_inner()
        .rack
        .unwrap()
}

/// Decommissions fixture rack `n`; returns the finished task.
async fn decommission(s: &mut TestServer, n: u32) -> pb::Task {
    let ids = s
        .client
        .decommission_rack(pb::DecommissionRackRequest {
            target_spec: Some(whole_rack(n)),
            ..Default::default()
        })
        .await
        .expect("decommission")
        .into_inner()
        .task_ids;
    finished(s, one(ids)).await
}

fn one(ids: Vec<pb::Uuid>) -> Uuid {
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids[0].id.parse().unwrap()
}

/// Waits until the task is finished; returns it.
async fn finished(s: &mut TestServer, id: Uuid) -> pb::Task {
    s.wait_task(id, "finished", DEADLINE, |t| t.finished_at.is_some())
        .await
}

async fn calls_after(sim: &mut SimAdminClient<Channel>, after: u64) -> Vec<simpb::CallLogEntry> {
    sim.get_call_log(simpb::GetCallLogRequest {
        after_sequence: after,
    })
    .await
    .unwrap()
    .into_inner()
    .entries
}

async fn mark(sim: &mut SimAdminClient<Channel>) -> u64 {
    calls_after(sim, 0).await.last().map_or(0, |e| e.sequence)
}

/// `(call, type)` of the calls, repeats of the same pair collapsed.
fn sequence(calls: &[simpb::CallLogEntry], kinds: &[&str]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for c in calls.iter().filter(|c| kinds.contains(&c.call.as_str())) {
        let pair = (
            format!("{} {}", c.call, c.detail).trim().to_string(),
            c.component_type.clone(),
        );
        if out.last() != Some(&pair) {
            out.push(pair);
        }
    }
    out
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

async fn ingest_and_decommission_run_their_built_in_rules(backend: Backend) {
    let Some((mut s, mut sim)) = start(backend).await else {
        return;
    };
    let rack = lifecycle(&mut s, 1).await;
    assert_eq!(
        rack.lifecycle_status,
        pb::RackLifecycleStatus::New as i32,
        "imported as new"
    );
    // Ingest: the compute trays and switches are registered, in one stage.
    let before = mark(&mut sim).await;
    let id = one(s
        .client
        .ingest_rack(pb::IngestRackRequest {
            target_spec: Some(whole_rack(1)),
            description: "new rack".into(),
            ..Default::default()
        })
        .await
        .expect("ingest")
        .into_inner()
        .task_ids);
    let task = finished(&mut s, id).await;
    assert_eq!(task.status, pb::TaskStatus::Completed as i32, "{task:#?}");
    assert_eq!(task.operation, "bring_up/ingest");
    let calls = calls_after(&mut sim, before).await;
    let mut injected: Vec<String> = calls
        .iter()
        .filter(|c| c.call == "inject_expectation")
        .map(|c| c.component_type.clone())
        .collect();
    injected.sort();
    assert_eq!(injected, ["Compute", "NVSwitch"], "{calls:#?}");
    let rack = lifecycle(&mut s, 1).await;
    assert_eq!(
        rack.lifecycle_status,
        pb::RackLifecycleStatus::Ingested as i32
    );
    assert!(rack.ingested_at.is_some());

    // Decommission: compute, then switches, then shelves, each waited for.
    let before = mark(&mut sim).await;
    let task = decommission(&mut s, 1).await;
    assert_eq!(task.status, pb::TaskStatus::Completed as i32, "{task:#?}");
    assert_eq!(task.operation, "decommission/decommission");
    let calls = calls_after(&mut sim, before).await;
    assert_eq!(
        sequence(&calls, &["decommission"]),
        pairs(&[
            ("decommission", "Compute"),
            ("decommission", "NVSwitch"),
            ("decommission", "PowerShelf")
        ]),
        "{calls:#?}"
    );
    // Every decommissioned component is powered off.
    let states = sim
        .get_component_states(simpb::GetComponentStatesRequest::default())
        .await
        .unwrap()
        .into_inner()
        .states;
    let rack_1: Vec<_> = states
        .iter()
        .filter(|c| c.component.starts_with("r-0001-"))
        .collect();
    assert_eq!(rack_1.len(), 4, "{states:#?}");
    assert!(rack_1.iter().all(|c| c.power_state == "Off"), "{rack_1:#?}");
    let rack = lifecycle(&mut s, 1).await;
    assert_eq!(
        rack.lifecycle_status,
        pb::RackLifecycleStatus::Decommissioned as i32
    );
    assert!(rack.decommissioned_at.is_some());
    // A decommissioned rack takes no task but an ingest; listings filter.
    let err = s
        .client
        .power_on_rack(pb::PowerOnRackRequest {
            target_spec: Some(whole_rack(1)),
            ..Default::default()
        })
        .await
        .expect_err("decommissioned");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().contains(
            "rack r-0001 is decommissioned: only IngestRack may target a decommissioned rack"
        ),
        "{err:?}"
    );
    let listed = s
        .client
        .get_list_of_racks(pb::GetListOfRacksRequest {
            lifecycle_statuses: vec![pb::RackLifecycleStatus::Decommissioned as i32],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.total, 1);
    assert_eq!(listed.racks[0].external_id, "r-0001");
    let bad = s
        .client
        .get_list_of_racks(pb::GetListOfRacksRequest {
            lifecycle_statuses: vec![0],
            ..Default::default()
        })
        .await
        .expect_err("unspecified");
    assert_eq!(bad.code(), Code::InvalidArgument, "{bad:?}");

    // A decommission fault fails the task naming the component and stage.
    sim.set_faults(simpb::SetFaultsRequest {
        faults: vec![simpb::Fault {
            component: "r-0002-nvswitch-00".into(),
            operation: "decommission".into(),
            effect: "fail".into(),
            ..Default::default()
        }],
    })
    .await
    .unwrap();
    let task = decommission(&mut s, 2).await;
    assert_eq!(task.status, pb::TaskStatus::Failed as i32, "{task:#?}");
    assert!(
        task.message.contains("r-0002-nvswitch-00")
            && task.message.contains("Error(simulated decommission fault)")
            && task.message.contains("stage 2"),
        "{task:#?}"
    );
    s.stop().await;
}

async fn bring_up_runs_its_stages_in_order_and_conflicts_with_anything(backend: Backend) {
    let Some((mut s, mut sim)) = start(backend).await else {
        return;
    };
    let before = mark(&mut sim).await;
    let id = one(s
        .client
        .bring_up_rack(pb::BringUpRackRequest {
            target_spec: Some(whole_rack(1)),
            ..Default::default()
        })
        .await
        .expect("bring up")
        .into_inner()
        .task_ids);
    // While it runs, a firmware task on the rack is refused (bring-up
    // conflicts with anything) and a bring-up elsewhere is not.
    let err = s
        .client
        .upgrade_firmware(pb::UpgradeFirmwareRequest {
            target_spec: Some(whole_rack(1)),
            target_version: Some("2.0.0".into()),
            ..Default::default()
        })
        .await
        .expect_err("conflict");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("conflicting task"), "{err:?}");
    let task = finished(&mut s, id).await;
    assert_eq!(task.status, pb::TaskStatus::Completed as i32, "{task:#?}");
    assert_eq!(task.operation, "bring_up/bring_up");
    let calls = calls_after(&mut sim, before).await;
    let rack_1: Vec<simpb::CallLogEntry> = calls
        .into_iter()
        .filter(|c| c.components.iter().all(|x| x.starts_with("r-0001-")))
        .collect();
    assert_eq!(
        sequence(
            &rack_1,
            &["power_control", "firmware_start", "firmware_consistency"]
        ),
        pairs(&[
            ("power_control power_on", "PowerShelf"),
            ("power_control power_on", "Compute"),
            // No version named: the manager's latest (the sim's 1.1.0).
            ("firmware_start 1.1.0", "Compute"),
            ("power_control power_on", "NVSwitch"),
            ("firmware_consistency", "NVSwitch"),
            ("power_control power_off", "Compute"),
            ("power_control power_on", "Compute"),
        ]),
        "{rack_1:#?}"
    );
    s.stop().await;
}

async fn ingest_filters_and_refusals(backend: Backend) {
    let Some((mut s, mut sim)) = start(backend).await else {
        return;
    };
    let type_filter = |values: &[&str]| pb::Filter {
        field: Some(pb::filter::Field::ComponentField(
            pb::ComponentFilterField::Type as i32,
        )),
        query_info: Some(pb::StringQueryInfo {
            patterns: values.iter().map(|v| v.to_string()).collect(),
            ..Default::default()
        }),
    };
    let before = mark(&mut sim).await;
    let id = one(s
        .client
        .ingest_rack(pb::IngestRackRequest {
            target_spec: Some(whole_rack(1)),
            filters: vec![type_filter(&["COMPUTE"])],
            ..Default::default()
        })
        .await
        .expect("ingest compute")
        .into_inner()
        .task_ids);
    assert_eq!(
        finished(&mut s, id).await.status,
        pb::TaskStatus::Completed as i32
    );
    let calls = calls_after(&mut sim, before).await;
    let injected: Vec<&str> = calls
        .iter()
        .filter(|c| c.call == "inject_expectation")
        .map(|c| c.component_type.as_str())
        .collect();
    assert_eq!(injected, ["Compute"], "{calls:#?}");

    for (filters, text) in [
        (
            vec![pb::Filter {
                field: Some(pb::filter::Field::ComponentField(
                    pb::ComponentFilterField::Name as i32,
                )),
                query_info: None,
            }],
            "ingest filters by component type only",
        ),
        (vec![type_filter(&["toaster"])], "unknown component type"),
        (
            vec![type_filter(&["compute"]), type_filter(&["nvswitch"])],
            "no component type is left",
        ),
    ] {
        let err = s
            .client
            .ingest_rack(pb::IngestRackRequest {
                target_spec: Some(whole_rack(2)),
                filters,
                ..Default::default()
            })
            .await
            .expect_err("refused");
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert!(err.message().contains(text), "{err:?}");
    }
    // Power shelves alone: no ingest step covers them.
    let err = s
        .client
        .ingest_rack(pb::IngestRackRequest {
            target_spec: Some(whole_rack(2)),
            filters: vec![type_filter(&["PowerShelf"])],
            ..Default::default()
        })
        .await
        .expect_err("no step");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    let err = s
        .client
        .bring_up_rack(pb::BringUpRackRequest::default())
        .await
        .expect_err("no target");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(err.message(), "target_spec is required");

    // A rack whose compute tray is not linked yet (no external id): an
    // ingest takes it, anything else is refused for it.
    let mut unlinked = common::rack(3, Some(common::fixture_id(3)), 2);
    unlinked.components[0].component_id = String::new();
    s.client
        .create_expected_rack(pb::CreateExpectedRackRequest {
            rack: Some(unlinked),
        })
        .await
        .unwrap();
    let id = one(s
        .client
        .ingest_rack(pb::IngestRackRequest {
            target_spec: Some(whole_rack(3)),
            ..Default::default()
        })
        .await
        .expect("an ingest takes unlinked components")
        .into_inner()
        .task_ids);
    let task = finished(&mut s, id).await;
    assert_eq!(task.status, pb::TaskStatus::Completed as i32, "{task:#?}");
    let err = s
        .client
        .power_on_rack(pb::PowerOnRackRequest {
            target_spec: Some(whole_rack(3)),
            ..Default::default()
        })
        .await
        .expect_err("unlinked");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().contains("is not linked to actual inventory"),
        "{err:?}"
    );
    s.stop().await;
}
