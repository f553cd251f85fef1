//! Issue 34 acceptance over the rack manager, on SQLite and PostgreSQL: a
//! compute tray whose BMC is a Redfish emulator (our `sushy_fw.py`, leak
//! detectors under its chassis' `ThermalSubsystem`) is registered with a
//! rack manager on the `redfish` back end; Flow (`rms` provider, detection
//! every 300 ms) reads the detectors through
//! `RackManagerExtensions/ListLeakDetectors`. When the emulated BMC reports
//! a leak, the built-in rule's force power-off reaches the BMC through the
//! rack manager (`ForceOff` in the emulator's reset log, the system reads
//! Off), the tray reads DETECTED / DOWN, and a dry detector closes the leak.
//!
//! sushy applies a power change 1–11 s after the request. Skipped with a
//! message when sushy-tools is missing, failed when `CI` is set.

// Test helpers may unwrap: the panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use rackflow_testkit as common;
use rackflow_testkit::both_stores;

use common::{Backend, TestServer, fixture_id};
use rackflow_api::rack_manager as rmpb;
use rackflow_api::v1 as pb;
use rackflow_server::Config;
use rackflow_server::config::Provider;
use rackflow_testkit::redfish::{Emulator, Flavor, Options};
use rackflow_testkit::rms::TestRms;

both_stores!(a_leak_a_bmc_reports_powers_its_tray_off_through_the_rack_manager,);

const DEADLINE: Duration = Duration::from_secs(90);
const RACK: &str = "r-0001";
/// Slot 0: the built-in rule's affected components are the tray alone.
const TRAY: &str = "r-0001-compute-00";

async fn tray(flow: &TestServer) -> pb::Component {
    flow.rack(fixture_id(1), true)
        .await
        .components
        .into_iter()
        .find(|c| c.component_id == TRAY)
        .unwrap()
}

async fn resets(bmc: &Emulator) -> Vec<String> {
    bmc.resets().await.into_iter().map(|(_, t)| t).collect()
}

async fn leak_events(flow: &TestServer, open_only: bool) -> pb::ListLeakEventsResponse {
    flow.extensions()
        .list_leak_events(pb::ListLeakEventsRequest {
            open_only,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

async fn a_leak_a_bmc_reports_powers_its_tray_off_through_the_rack_manager(backend: Backend) {
    let Some(bmc) = Emulator::start(Options::new(Flavor::Firmware)).await else {
        return;
    };
    let rms = TestRms::start_redfish(&[]).await;
    let mut config = Config::default();
    config.dispatcher.enabled = false;
    config.provider = Provider::Rms;
    config.rms.address = format!("http://{}", rms.addr);
    config.leaks.interval_ms = 300;
    let Some(flow) = TestServer::start_with(backend, config).await else {
        return;
    };
    flow.client
        .clone()
        .create_expected_rack(pb::CreateExpectedRackRequest {
            rack: Some(common::rack(1, Some(fixture_id(1)), 2)),
        })
        .await
        .unwrap();
    // The tray's node on the emulated BMC; the rack's other components are
    // not registered (the rack manager reads no detectors for them).
    let node = bmc.node_info(RACK, TRAY, rmpb::NodeType::ComputeGb200Nvidia);
    let mut rm = rms.client.clone();
    let created = rm
        .create_nodes(rmpb::CreateNodesRequest {
            nodes: Some(rmpb::NodeSet { nodes: vec![node] }),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        created.response.unwrap().status,
        rmpb::ReturnCode::Success as i32
    );
    // The tray runs.
    let on = rm
        .set_power_state(rmpb::SetPowerStateRequest {
            rack_id: RACK.into(),
            node_id: TRAY.into(),
            operation: rmpb::PowerOperation::On as i32,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(on.status, rmpb::ReturnCode::Success as i32, "{on:?}");

    // Dry detectors: the tray reads NOT_DETECTED only once it had leaked,
    // so nothing is reported yet.
    assert_eq!(
        tray(&flow).await.leak_status,
        pb::LeakStatus::Unknown as i32
    );

    // The BMC's manifold detector reports a critical leak.
    bmc.set_leak("Manifold", "Critical").await;
    let mut changes = flow.waiter("the leak event", DEADLINE);
    let event = loop {
        let events = leak_events(&flow, true).await;
        if let Some(event) = events.events.into_iter().next() {
            break event;
        }
        changes.next(&0).await;
    };
    assert_eq!(event.source, "rack-manager");
    assert_eq!(event.severity, pb::EventRuleSeverity::Critical as i32);
    assert!(
        event.message.contains("Manifold") && event.message.contains("Critical"),
        "{event:?}"
    );

    // The built-in rule's force power-off, through the rack manager.
    let mut changes = flow.waiter("the power-off to finish", DEADLINE);
    let response = loop {
        let tasks = flow
            .client
            .clone()
            .list_tasks(pb::ListTasksRequest {
                rack_id: Some(common::uuid(fixture_id(1))),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .tasks;
        assert!(tasks.len() <= 1, "one response: {tasks:#?}");
        if let Some(task) = tasks.into_iter().find(|t| t.finished_at.is_some()) {
            break task;
        }
        changes.next(&()).await;
    };
    assert_eq!(response.operation, "power_control/force_power_off");
    assert_eq!(response.trigger_type, "event_rule_execution");
    assert_eq!(
        response.trigger_id.as_ref().unwrap().id,
        "f34b87f7-cb1b-4b08-aa51-30c0b3b58680",
        "the built-in rule acted"
    );
    assert_eq!(
        response.status,
        pb::TaskStatus::Completed as i32,
        "{response:#?}"
    );
    assert_eq!(resets(&bmc).await, ["On", "ForceOff"]);
    let state = rm
        .get_power_state(rmpb::GetPowerStateRequest {
            rack_id: RACK.into(),
            node_id: TRAY.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state.pstate, "OFF");
    let now = tray(&flow).await;
    assert_eq!(now.leak_status, pb::LeakStatus::Detected as i32);
    assert_eq!(
        now.leak_handling_status,
        pb::LeakHandlingStatus::Down as i32
    );

    // Dry again: the next pass closes the leak; no second response.
    bmc.set_leak("Manifold", "OK").await;
    let mut changes = flow.waiter("the leak to close", DEADLINE);
    while leak_events(&flow, true).await.total > 0 {
        changes.next(&()).await;
    }
    assert_eq!(
        tray(&flow).await.leak_status,
        pb::LeakStatus::NotDetected as i32
    );
    assert_eq!(resets(&bmc).await, ["On", "ForceOff"]);
    flow.stop().await;
    rms.stop().await;
}
