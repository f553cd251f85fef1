//! The readiness gate (issue 12) through the real gRPC API, on SQLite and
//! PostgreSQL: an operator marks components in service with
//! `PatchComponent`; a power or firmware task on them waits, visibly, until
//! they are drained (or times out naming them); `override_readiness_check`
//! goes ahead at once; the state shows in `GetComponents` with the
//! reference's `status`.

use rackflow_testkit as common;
use rackflow_testkit::both_stores;

use std::time::Duration;

use common::{Backend, TestServer, fixture_fleet, whole_rack};
use rackflow_api::v1 as pb;
use rackflow_engine::sim::SimConfig;
use rackflow_server::Config;
use serde_json::Value;
use tonic::Code;
use uuid::Uuid;

both_stores!(
    a_power_task_waits_for_in_service_components_until_they_are_drained,
    the_gate_times_out_naming_the_components_and_override_skips_it,
    operational_states_are_validated_and_shown_with_the_reference_status,
    bring_up_is_held_by_in_service_components_like_power,
);

const DEADLINE: Duration = Duration::from_secs(30);

fn config(readiness_timeout_secs: u64) -> Config {
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
    config.tasks.readiness_timeout_secs = readiness_timeout_secs;
    config.tasks.readiness_poll_ms = 50;
    config
}

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

fn id_of(c: &pb::Component) -> String {
    c.info
        .as_ref()
        .and_then(|i| i.id.as_ref())
        .map(|u| u.id.clone())
        .expect("component id")
}

async fn named(s: &mut TestServer, external_id: &str) -> pb::Component {
    components(s)
        .await
        .into_iter()
        .find(|c| c.component_id == external_id)
        .unwrap_or_else(|| panic!("component {external_id}"))
}

async fn set_state(
    s: &mut TestServer,
    external_id: &str,
    state: pb::OperationalState,
    reason: Option<&str>,
) -> Result<pb::Component, tonic::Status> {
    let c = named(s, external_id).await;
    s.client
        .patch_component(pb::PatchComponentRequest {
            id: Some(pb::Uuid { id: id_of(&c) }),
            operational_state: Some(state as i32),
            operational_reason: reason.map(str::to_string),
            ..Default::default()
        })
        .await
        .map(|r| r.into_inner().component.expect("component"))
}

async fn power_off(s: &mut TestServer, override_readiness_check: bool) -> Uuid {
    let reply = s
        .client
        .power_off_rack(pb::PowerOffRackRequest {
            target_spec: Some(whole_rack(1)),
            override_readiness_check,
            ..Default::default()
        })
        .await
        .expect("PowerOffRack")
        .into_inner();
    Uuid::parse_str(&reply.task_ids[0].id).expect("task id")
}

/// Every step's `waiting_for` in the task's report.
fn waiting(t: &pb::Task) -> Vec<String> {
    let report: Value = serde_json::from_str(&t.report).unwrap_or(Value::Null);
    let mut out = Vec::new();
    for stage in report["stages"].as_array().into_iter().flatten() {
        for step in stage["steps"].as_array().into_iter().flatten() {
            if let Some(w) = step["waiting_for"].as_str() {
                out.push(w.to_string());
            }
        }
    }
    out
}

async fn a_power_task_waits_for_in_service_components_until_they_are_drained(backend: Backend) {
    let Some(mut s) = TestServer::start_with(backend, config(600)).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    set_state(
        &mut s,
        "r-0001-compute-01",
        pb::OperationalState::InService,
        Some("tenant job 42"),
    )
    .await
    .expect("mark in service");

    let id = power_off(&mut s, false).await;
    let t = s
        .wait_task(id, "waiting for readiness", DEADLINE, |t| {
            !waiting(t).is_empty()
        })
        .await;
    assert_eq!(t.status, pb::TaskStatus::Running as i32, "{t:#?}");
    assert_eq!(
        waiting(&t),
        ["readiness: 1 component held back from power control (in service): r-0001-compute-01"]
    );
    // Held: the in-service tray keeps its power.
    let tray = named(&mut s, "r-0001-compute-01").await;
    assert_ne!(tray.power_state, "Off", "{tray:#?}");

    set_state(
        &mut s,
        "r-0001-compute-01",
        pb::OperationalState::Drained,
        None,
    )
    .await
    .expect("drain");
    let t = s
        .wait_task(id, "finished", DEADLINE, |t| t.finished_at.is_some())
        .await;
    assert_eq!(t.status, pb::TaskStatus::Completed as i32, "{t:#?}");
    assert!(waiting(&t).is_empty(), "{:?}", waiting(&t));
    for c in components(&mut s).await {
        assert_eq!(c.power_state, "Off", "{c:#?}");
    }
}

async fn the_gate_times_out_naming_the_components_and_override_skips_it(backend: Backend) {
    let Some(mut s) = TestServer::start_with(backend, config(1)).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    for tray in ["r-0001-compute-00", "r-0001-compute-01"] {
        set_state(&mut s, tray, pb::OperationalState::InService, None)
            .await
            .expect("mark in service");
    }
    let id = power_off(&mut s, false).await;
    let t = s
        .wait_task(id, "finished", DEADLINE, |t| t.finished_at.is_some())
        .await;
    assert_eq!(t.status, pb::TaskStatus::Failed as i32, "{t:#?}");
    assert!(
        t.message.contains(
            "readiness check timed out after 1s: 2 components are not ready for power control: \
             r-0001-compute-00, r-0001-compute-01"
        ),
        "{}",
        t.message
    );
    let tray = named(&mut s, "r-0001-compute-00").await;
    assert_ne!(tray.power_state, "Off", "held trays were not powered off");

    // The operator's override goes ahead at once.
    let id = power_off(&mut s, true).await;
    let t = s
        .wait_task(id, "finished", DEADLINE, |t| t.finished_at.is_some())
        .await;
    assert_eq!(t.status, pb::TaskStatus::Completed as i32, "{t:#?}");
    assert_eq!(named(&mut s, "r-0001-compute-00").await.power_state, "Off");
}

async fn operational_states_are_validated_and_shown_with_the_reference_status(backend: Backend) {
    let Some(mut s) = TestServer::start_with(backend, config(600)).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    let before = named(&mut s, "r-0001-compute-00").await;
    assert_eq!(before.operational_state, 0);
    assert!(before.status.is_none(), "never set: no status");

    let c = set_state(
        &mut s,
        "r-0001-compute-00",
        pb::OperationalState::InService,
        Some("tenant job 42"),
    )
    .await
    .expect("set");
    assert_eq!(c.operational_state, pb::OperationalState::InService as i32);
    assert_eq!(c.operational_reason, "tenant job 42");
    let status = c.status.expect("status");
    assert_eq!(status.phase, pb::Phase::InUse as i32);
    assert_eq!(status.reason, "tenant job 42");
    assert_eq!(
        status.blocked_operations,
        [
            pb::OperationType::PowerControl as i32,
            pb::OperationType::FirmwareControl as i32
        ]
    );
    // Read back through GetComponents, too.
    let read = named(&mut s, "r-0001-compute-00").await;
    assert_eq!(
        read.operational_state,
        pb::OperationalState::InService as i32
    );

    let c = set_state(
        &mut s,
        "r-0001-compute-00",
        pb::OperationalState::Maintenance,
        None,
    )
    .await
    .expect("maintenance");
    let status = c.status.expect("status");
    assert_eq!(status.phase, pb::Phase::Ready as i32);
    assert!(status.blocked_operations.is_empty());

    // UNSPECIFIED clears it.
    let c = set_state(
        &mut s,
        "r-0001-compute-00",
        pb::OperationalState::Unspecified,
        None,
    )
    .await
    .expect("clear");
    assert_eq!(c.operational_state, 0);
    assert!(c.status.is_none());

    // Hostile input: an unknown number, a reason without a state.
    let id = id_of(&c);
    let err = s
        .client
        .patch_component(pb::PatchComponentRequest {
            id: Some(pb::Uuid { id: id.clone() }),
            operational_state: Some(77),
            ..Default::default()
        })
        .await
        .expect_err("unknown state");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(
        err.message(),
        "operational_state 77 is unknown (in service 1, drained 2, maintenance 3)"
    );
    let err = s
        .client
        .patch_component(pb::PatchComponentRequest {
            id: Some(pb::Uuid { id }),
            operational_reason: Some("why".into()),
            ..Default::default()
        })
        .await
        .expect_err("reason alone");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(
        err.message(),
        "operational_reason needs an operational_state"
    );
    // Nothing was written by the refused patches.
    let after = named(&mut s, "r-0001-compute-00").await;
    assert_eq!(after.operational_state, 0);
}

/// Issue 33 item 4: bring-up powers trays, so the gate holds it as it holds
/// a power task: an in-service shelf stops it at its first stage, naming
/// the shelf, before anything is powered.
async fn bring_up_is_held_by_in_service_components_like_power(backend: Backend) {
    let Some(mut s) = TestServer::start_with(backend, config(1)).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    set_state(
        &mut s,
        "r-0001-powershelf-00",
        pb::OperationalState::InService,
        None,
    )
    .await
    .expect("mark in service");
    let ids = s
        .client
        .bring_up_rack(pb::BringUpRackRequest {
            target_spec: Some(whole_rack(1)),
            ..Default::default()
        })
        .await
        .expect("bring up")
        .into_inner()
        .task_ids;
    let id = ids[0].id.parse().expect("task id");
    let t = s
        .wait_task(id, "finished", DEADLINE, |t| t.finished_at.is_some())
        .await;
    assert_eq!(t.status, pb::TaskStatus::Failed as i32, "{t:#?}");
    assert!(
        t.message.contains(
            "readiness check timed out after 1s: 1 component is not ready for power control: \
             r-0001-powershelf-00"
        ),
        "{}",
        t.message
    );
}
