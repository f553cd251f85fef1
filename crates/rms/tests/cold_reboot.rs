//! `ExecuteColdReboot` end to end: a real rack manager with the `sim` back
//! end (whose power shelves feed their rack) on a free loopback port,
//! driven through gRPC only. Timings are the request's 1-second minimums,
//! so one reboot takes ~4 s.

use std::time::Duration;

use rackflow_testkit::rms as common;

use common::{TestRms, node_info, wait_job_terminal};
use rackflow_api::rack_manager as pb;
use rackflow_rms::backend::PowerState;
use rackflow_rms::backend::sim::{SimFaultEffect, SimNodeFault, SimOperation};

const RACK: &str = "rack-cr";
const SHELVES: [&str; 2] = ["ps-00", "ps-01"];
const COMPUTES: [&str; 2] = ["c-00", "c-01"];
const SWITCH: &str = "sw-00";

fn rack_nodes(rack: &str) -> Vec<pb::NodeInfo> {
    let mut nodes: Vec<pb::NodeInfo> = SHELVES
        .iter()
        .map(|n| node_info(rack, n, pb::NodeType::PowershelfGb200Liteon))
        .collect();
    nodes.extend(
        COMPUTES
            .iter()
            .map(|n| node_info(rack, n, pb::NodeType::ComputeGb200Nvidia)),
    );
    nodes.push(node_info(rack, SWITCH, pb::NodeType::SwitchGb200Nvidia));
    nodes
}

fn request(nodes: Vec<pb::NodeInfo>) -> pb::ExecuteColdRebootRequest {
    pb::ExecuteColdRebootRequest {
        nodes: Some(pb::NodeSet { nodes }),
        domain: None,
        prestage_shutdown_floor_seconds: None,
        prestage_shutdown_poll_max_seconds: Some(5),
        discharge_floor_seconds: Some(1),
        discharge_poll_max_seconds: Some(5),
        bmc_up_floor_seconds: Some(1),
        bmc_up_poll_max_seconds: Some(5),
        nvos_hello_backoff_seconds: Some(1),
        compute_boot_wait_seconds: Some(1),
        poll_interval_seconds: Some(1),
    }
}

async fn reboot(rms: &TestRms, req: pb::ExecuteColdRebootRequest) -> pb::NodeBatchResponse {
    rms.client
        .clone()
        .execute_cold_reboot(req)
        .await
        .expect("ExecuteColdReboot")
        .into_inner()
        .response
        .expect("response")
}

/// Powers the whole rack on (shelves first), as it is before a reboot.
async fn power_on(rms: &TestRms, rack: &str) {
    let resp = rms
        .client
        .clone()
        .batch_set_power_state(pb::BatchSetPowerStateRequest {
            nodes: Some(pb::NodeSet {
                nodes: rack_nodes(rack)[..2].to_vec(),
            }),
            operation: pb::PowerOperation::On as i32,
        })
        .await
        .expect("BatchSetPowerState")
        .into_inner()
        .response
        .expect("response");
    assert_eq!(resp.status, pb::ReturnCode::Success as i32, "{resp:?}");
    let resp = rms
        .client
        .clone()
        .batch_set_power_state(pb::BatchSetPowerStateRequest {
            nodes: Some(pb::NodeSet {
                nodes: rack_nodes(rack)[2..].to_vec(),
            }),
            operation: pb::PowerOperation::On as i32,
        })
        .await
        .expect("BatchSetPowerState")
        .into_inner()
        .response
        .expect("response");
    assert_eq!(resp.status, pb::ReturnCode::Success as i32, "{resp:?}");
}

fn stages(status: &pb::JobStatus) -> Vec<(String, String)> {
    let timeline: serde_json::Value =
        serde_json::from_str(&status.result_json).expect("result_json is the timeline");
    timeline["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().expect("name").to_owned(),
                s["status"].as_str().expect("status").to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_rack_is_power_cycled_in_runbook_order_and_the_timeline_is_the_result() {
    let rms = TestRms::start().await;
    power_on(&rms, RACK).await;
    let mut client = rms.client.clone();

    let resp = reboot(&rms, request(rack_nodes(RACK))).await;
    assert_eq!(resp.status, pb::ReturnCode::Success as i32, "{resp:?}");
    assert!(!resp.job_id.is_empty());
    assert!(
        resp.message.starts_with("Cold reboot started for 5 nodes"),
        "{}",
        resp.message
    );
    let stats = resp.stats.unwrap();
    assert_eq!((stats.total_nodes, stats.successful_nodes), (5, 5));

    // While it runs: the stage shows in the description, the coordinator
    // holds the rack's synthetic node, and a second reboot is busy even
    // with a disjoint device list (the synthetic node is the same).
    let running = common::wait_job(
        &mut client,
        &resp.job_id,
        "running",
        Duration::from_secs(10),
        |s| s == pb::JobExecutionState::Running as i32,
    )
    .await;
    assert!(
        running.state_description.starts_with("Rack reboot step "),
        "{}",
        running.state_description
    );
    assert_eq!(running.node_id.as_deref(), Some("rack-cr:cold-reboot"));
    assert_eq!(running.rack_id.as_deref(), Some(RACK));
    let second = reboot(&rms, request(rack_nodes(RACK))).await;
    assert_eq!(second.status, pb::ReturnCode::Failure as i32);
    assert!(second.job_id.is_empty());
    assert!(
        second.message.contains("busy") || second.message.contains("in progress"),
        "{}",
        second.message
    );
    // A registered node's power operation waits for the rack's guard.
    rms.register(RACK, &["c-00"], pb::NodeType::ComputeGb200Nvidia)
        .await;
    let refused = client
        .set_power_state(pb::SetPowerStateRequest {
            node_id: "c-00".into(),
            operation: pb::PowerOperation::Off as i32,
            rack_id: RACK.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(refused.status, pb::ReturnCode::Failure as i32);

    let done = wait_job_terminal(&mut client, &resp.job_id, Duration::from_secs(30)).await;
    assert_eq!(
        done.execution_state,
        pb::JobExecutionState::Completed as i32,
        "{done:?}"
    );
    assert_eq!(done.state_description, "Cold reboot completed");
    let stages = stages(&done);
    let names: Vec<&str> = stages.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "prestage_shutdown_compute",
            "prestage_verify_compute_down",
            "power_off_shelves",
            "verify_discharged",
            "power_on_shelves",
            "verify_bmc_up",
            "verify_nvos_ready",
            "power_on_compute",
            "wait_compute_boot"
        ]
    );
    assert!(stages.iter().all(|(_, s)| s == "completed"), "{stages:?}");

    // The BMCs saw the runbook's order: compute shut down, shelves off,
    // trays without power, shelves on, compute on last.
    let calls = rms.sim().calls();
    let position = |node: &str, detail: &str| {
        calls
            .iter()
            .position(|c| c.node_id == node && c.call == "set_power" && c.detail == detail)
            .unwrap_or_else(|| panic!("{node} {detail} not in the call log"))
    };
    let last_position = |node: &str, detail: &str| {
        calls
            .iter()
            .rposition(|c| c.node_id == node && c.call == "set_power" && c.detail == detail)
            .unwrap()
    };
    for compute in COMPUTES {
        assert!(position(compute, "graceful_shutdown") < position("ps-00", "off"));
        assert!(last_position(compute, "on") > last_position("ps-01", "on"));
    }
    let unpowered = calls
        .iter()
        .position(|c| c.outcome == "unpowered")
        .expect("the trays were seen without power");
    assert!(unpowered > position("ps-01", "off"));
    assert!(unpowered < last_position("ps-00", "on"));
    for compute in COMPUTES {
        assert_eq!(rms.sim().node_power(RACK, compute), Some(PowerState::On));
    }

    // The reservations are released: the rack can be rebooted again.
    let again = reboot(&rms, request(rack_nodes(RACK))).await;
    assert_eq!(again.status, pb::ReturnCode::Success as i32, "{again:?}");
    wait_job_terminal(&mut client, &again.job_id, Duration::from_secs(30)).await;
    rms.stop().await;
}

#[tokio::test]
async fn a_failing_stage_fails_the_job_naming_the_stage_and_the_node() {
    let rms = TestRms::start().await;
    power_on(&rms, RACK).await;
    rms.sim().set_faults(vec![SimNodeFault {
        node_id: "ps-01".into(),
        rack_id: Some(RACK.into()),
        operation: SimOperation::Power,
        effect: SimFaultEffect::Fail,
    }]);
    let mut client = rms.client.clone();
    let resp = reboot(&rms, request(rack_nodes(RACK))).await;
    assert_eq!(resp.status, pb::ReturnCode::Success as i32, "{resp:?}");
    let done = wait_job_terminal(&mut client, &resp.job_id, Duration::from_secs(30)).await;
    assert_eq!(
        done.execution_state,
        pb::JobExecutionState::Failed as i32,
        "{done:?}"
    );
    assert!(
        done.error_message
            .starts_with("power_off_shelves failed: ps-01: "),
        "{}",
        done.error_message
    );
    let stages = stages(&done);
    assert_eq!(stages[2], ("power_off_shelves".into(), "failed".into()));
    assert!(
        stages[3..].iter().all(|(_, s)| s == "skipped"),
        "{stages:?}"
    );
    // Fail-fast: nothing was powered on after the failure.
    let failed_at = rms
        .sim()
        .calls()
        .iter()
        .position(|c| c.node_id == "ps-01" && c.outcome == "fail")
        .unwrap();
    assert!(
        rms.sim().calls()[failed_at + 1..]
            .iter()
            .all(|c| c.detail != "on"),
        "power-on after the failure"
    );

    // Released on failure too.
    rms.sim().set_faults(Vec::new());
    let again = reboot(&rms, request(rack_nodes(RACK))).await;
    assert_eq!(again.status, pb::ReturnCode::Success as i32, "{again:?}");
    let done = wait_job_terminal(&mut client, &again.job_id, Duration::from_secs(30)).await;
    assert_eq!(
        done.execution_state,
        pb::JobExecutionState::Completed as i32
    );
    rms.stop().await;
}

#[tokio::test]
async fn refusals_are_in_band_and_reserve_nothing() {
    let rms = TestRms::start().await;
    let refused = |resp: &pb::NodeBatchResponse, needle: &str| {
        assert_eq!(resp.status, pb::ReturnCode::Failure as i32, "{resp:?}");
        assert!(resp.job_id.is_empty());
        assert!(resp.message.contains(needle), "{needle}: {}", resp.message);
    };
    refused(
        &reboot(&rms, request(Vec::new())).await,
        "nodes is required",
    );

    let mut mixed = rack_nodes(RACK);
    mixed[0].rack_id = "rack-other".into();
    let resp = reboot(&rms, request(mixed)).await;
    refused(&resp, "must target a single rack");
    assert_eq!(resp.stats.unwrap().failed_nodes, 5);

    let without = |kind: &str| {
        rack_nodes(RACK)
            .into_iter()
            .filter(|n| !n.node_id.starts_with(kind))
            .collect::<Vec<_>>()
    };
    refused(&reboot(&rms, request(without("ps"))).await, "power shelf");
    refused(&reboot(&rms, request(without("c-"))).await, "compute node");
    refused(&reboot(&rms, request(without("sw"))).await, "switch");

    let mut untyped = rack_nodes(RACK);
    untyped[2].r#type = None;
    untyped[3].bmc_endpoint = None;
    let resp = reboot(&rms, request(untyped)).await;
    refused(&resp, "could not be prepared");
    let failed: Vec<(&str, &str)> = resp
        .node_results
        .iter()
        .map(|r| (r.node_id.as_str(), r.error_message.as_str()))
        .collect();
    assert_eq!(failed[0], ("c-00", "unknown or unsupported node type"));
    assert_eq!(failed[1].0, "c-01");
    assert!(
        failed[1].1.contains("BMC endpoint is required"),
        "{failed:?}"
    );

    // An enum number the service does not know: in band too, as the
    // reference answers it.
    let mut invalid = rack_nodes(RACK);
    invalid[0].r#type = Some(77);
    let resp = reboot(&rms, request(invalid)).await;
    refused(&resp, "could not be prepared");
    assert_eq!(resp.node_results[0].node_id, "ps-00");
    assert_eq!(
        resp.node_results[0].error_message,
        "unknown or unsupported node type"
    );

    // A node busy with another job: refused, and the nodes reserved before
    // it are released (a reboot without the busy node's job is admitted).
    rms.sim().set_faults(vec![SimNodeFault {
        node_id: "c-01".into(),
        rack_id: None,
        operation: SimOperation::Firmware,
        effect: SimFaultEffect::Hang,
    }]);
    rms.register(RACK, &["c-01"], pb::NodeType::ComputeGb200Nvidia)
        .await;
    let update = rms
        .client
        .clone()
        .update_firmware(pb::UpdateFirmwareRequest {
            node_id: "c-01".into(),
            rack_id: RACK.into(),
            firmware_targets: vec![common::fw("BMC", common::IMAGES[0])],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(update.status, pb::ReturnCode::Success as i32, "{update:?}");
    rms.wait_running(&update.job_id).await;
    let resp = reboot(&rms, request(rack_nodes(RACK))).await;
    refused(&resp, "c-01");
    let mut others = rack_nodes(RACK);
    others.retain(|n| n.node_id != "c-01");
    let resp = reboot(&rms, request(others)).await;
    assert_eq!(resp.status, pb::ReturnCode::Success as i32, "{resp:?}");
    rms.stop().await;
}
