//! The RackManager gRPC API end to end: a real server with the `sim` back
//! end on a free loopback port, driven only through gRPC (and `/metrics`
//! over HTTP).

use rackflow_testkit::rms as common;

use common::{RACK, TestRms, fw, node_info};
use rackflow_api::rack_manager as pb;
use rackflow_rms::backend::sim::{SimFaultEffect, SimNodeFault, SimOperation};
use tonic::Code;

const COMPUTE: pb::NodeType = pb::NodeType::ComputeGb200Nvidia;

fn fault(node: &str, operation: SimOperation, effect: SimFaultEffect) -> SimNodeFault {
    SimNodeFault {
        node_id: node.to_owned(),
        rack_id: None,
        operation,
        effect,
    }
}

fn update(node: &str, targets: Vec<pb::FirmwareTarget>) -> pb::UpdateFirmwareRequest {
    pb::UpdateFirmwareRequest {
        node_id: node.to_owned(),
        rack_id: RACK.to_owned(),
        firmware_targets: targets,
        ..Default::default()
    }
}

#[tokio::test]
async fn version_and_out_of_scope_rpcs() {
    let rms = TestRms::start().await;
    let version = rms
        .client
        .clone()
        .get_version(pb::GetVersionRequest {})
        .await
        .unwrap()
        .into_inner()
        .version;
    assert!(version.starts_with("rackflow-rms "), "{version}");

    // An RPC of the reference not served yet answers UNIMPLEMENTED.
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", rms.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<pb::GetVersionRequest, pb::GetVersionResponse>::default();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/rack_manager.RackManager/InspectScaleUpFabrics",
    );
    let err = grpc
        .unary(tonic::Request::new(pb::GetVersionRequest {}), path, codec)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    rms.stop().await;
}

#[tokio::test]
async fn inventory_registration_listing_and_delete() {
    let rms = TestRms::start().await;
    let mut client = rms.client.clone();
    let mut bad_port = node_info(RACK, "n-bad", COMPUTE);
    bad_port.bmc_endpoint.as_mut().unwrap().port = 70_000;
    let resp = client
        .create_nodes(pb::CreateNodesRequest {
            nodes: Some(pb::NodeSet {
                nodes: vec![
                    node_info(RACK, "n1", COMPUTE),
                    node_info("rack-2", "n2", pb::NodeType::SwitchGb200Nvidia),
                    bad_port,
                ],
            }),
        })
        .await
        .unwrap()
        .into_inner();
    let op = resp.response.unwrap();
    assert_eq!(op.status, pb::ReturnCode::Failure as i32, "one node failed");
    assert!(
        op.message
            .contains("port 70000 is out of range (must be 1-65535)"),
        "{}",
        op.message
    );
    let stats = resp.stats.unwrap();
    assert_eq!(
        (
            stats.total_nodes,
            stats.successful_nodes,
            stats.failed_nodes
        ),
        (3, 2, 1)
    );

    let racks = client
        .list_racks(pb::ListRacksRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(racks.rack_ids, [RACK, "rack-2"]);
    let inventory = client
        .list_node_inventory(pb::ListNodeInventoryRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(inventory.nodes.len(), 2);
    let n1 = &inventory.nodes[0];
    assert_eq!((n1.node_id.as_str(), n1.rack_id.as_str()), ("n1", RACK));
    assert_eq!(n1.port, 443, "port 0 means 443");
    assert_eq!(n1.r#type, COMPUTE as i32);
    assert!(!format!("{inventory:?}").contains("super-secret"));

    // An unknown node type is a malformed request: a real gRPC error.
    let mut bad_type = node_info(RACK, "n3", COMPUTE);
    bad_type.r#type = Some(99);
    let err = client
        .create_nodes(pb::CreateNodesRequest {
            nodes: Some(pb::NodeSet {
                nodes: vec![bad_type],
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);

    let delete = |rack: &str, node: &str| pb::DeleteNodeRequest {
        node_id: node.to_owned(),
        rack_id: rack.to_owned(),
    };
    let gone = client
        .delete_node(delete("rack-9", "n1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(gone.response.as_ref().unwrap().message, "rack not found");
    let gone = client
        .delete_node(delete(RACK, "n9"))
        .await
        .unwrap()
        .into_inner();
    let gone = gone.response.unwrap();
    assert_eq!(
        (gone.status, gone.message.as_str()),
        (pb::ReturnCode::Failure as i32, "node not found")
    );
    let ok = client
        .delete_node(delete("rack-2", "n2"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ok.response.unwrap().status, pb::ReturnCode::Success as i32);
    let racks = client
        .list_racks(pb::ListRacksRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(racks.rack_ids, [RACK]);
    rms.stop().await;
}

#[tokio::test]
async fn power_set_get_in_band_failures_and_invalid_operation() {
    let rms = TestRms::start().await;
    rms.register(RACK, &["n1", "n2"], COMPUTE).await;
    let mut client = rms.client.clone();
    let set = |node: &str, op: pb::PowerOperation| pb::SetPowerStateRequest {
        node_id: node.to_owned(),
        operation: op as i32,
        rack_id: RACK.to_owned(),
    };
    let get = |node: &str| pb::GetPowerStateRequest {
        node_id: node.to_owned(),
        rack_id: RACK.to_owned(),
    };
    let resp = client
        .set_power_state(set("n1", pb::PowerOperation::On))
        .await
        .unwrap();
    assert_eq!(resp.into_inner().status, pb::ReturnCode::Success as i32);
    let state = client
        .get_power_state(get("n1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (state.status, state.pstate.as_str()),
        (pb::ReturnCode::Success as i32, "ON")
    );
    let state = client
        .get_power_state(get("n2"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state.pstate, "OFF");

    // Unknown node and a failing BMC: in-band failures.
    let resp = client
        .set_power_state(set("n9", pb::PowerOperation::On))
        .await
        .unwrap();
    assert_eq!(resp.into_inner().status, pb::ReturnCode::Failure as i32);
    let state = client
        .get_power_state(get("n9"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (state.status, state.pstate.as_str()),
        (pb::ReturnCode::Failure as i32, "UNKNOWN")
    );
    rms.sim()
        .set_faults(vec![fault("n2", SimOperation::Power, SimFaultEffect::Fail)]);
    let resp = client
        .set_power_state(set("n2", pb::PowerOperation::On))
        .await
        .unwrap();
    assert_eq!(resp.into_inner().status, pb::ReturnCode::Failure as i32);

    // An unspecified operation is the one real error.
    let err = client
        .set_power_state(set("n1", pb::PowerOperation::Unspecified))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(err.message(), "invalid operation: 0");
    assert_eq!(
        rms.sim().node_power(RACK, "n1"),
        Some(rackflow_rms::backend::PowerState::On)
    );
    rms.stop().await;
}

#[tokio::test]
async fn batch_power_on_ephemeral_nodes_reports_per_node() {
    let rms = TestRms::start().await;
    let mut client = rms.client.clone();
    let mut token = node_info("rack-e", "e3", COMPUTE);
    token.bmc_endpoint.as_mut().unwrap().credentials = Some(pb::Credentials {
        auth: Some(pb::credentials::Auth::SessionToken("t".into())),
    });
    let nodes = pb::NodeSet {
        nodes: vec![
            node_info("rack-e", "e1", COMPUTE),
            node_info("rack-e", "e2", COMPUTE),
            token,
        ],
    };
    let resp = client
        .batch_set_power_state(pb::BatchSetPowerStateRequest {
            nodes: Some(nodes.clone()),
            operation: pb::PowerOperation::On as i32,
        })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert_eq!(
        resp.status,
        pb::ReturnCode::Failure as i32,
        "one node failed"
    );
    assert!(resp.job_id.is_empty(), "sync batches have no job");
    let stats = resp.stats.unwrap();
    assert_eq!(
        (
            stats.total_nodes,
            stats.successful_nodes,
            stats.failed_nodes
        ),
        (3, 2, 1)
    );
    assert_eq!(resp.node_results[2].node_id, "e3");
    assert!(resp.node_results[2].error_message.contains("session_token"));

    let states = client
        .batch_get_power_state(pb::BatchGetPowerStateRequest { nodes: Some(nodes) })
        .await
        .unwrap()
        .into_inner();
    let pstates: Vec<_> = states
        .node_power_states
        .iter()
        .map(|s| (s.node_id.as_str(), s.pstate.as_str()))
        .collect();
    assert_eq!(pstates, [("e1", "ON"), ("e2", "ON"), ("e3", "UNKNOWN")]);
    // Ephemeral nodes are never registered.
    let racks = client
        .list_racks(pb::ListRacksRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(racks.rack_ids.is_empty());

    let empty = client
        .batch_set_power_state(pb::BatchSetPowerStateRequest {
            nodes: None,
            operation: pb::PowerOperation::On as i32,
        })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert_eq!(empty.message, "No nodes specified in request");
    rms.stop().await;
}

#[tokio::test]
async fn update_firmware_runs_a_job_to_completion() {
    let rms = TestRms::start().await;
    rms.register(RACK, &["n1"], COMPUTE).await;
    let mut client = rms.client.clone();
    let resp = client
        .update_firmware(update(
            "n1",
            vec![fw("BMC", "bmc-2.0.fwpkg"), fw("BIOS", "bios-3.1.fwpkg")],
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resp.status, pb::ReturnCode::Success as i32, "{resp:?}");
    assert_eq!(resp.message, "Firmware update job created for n1");
    assert_eq!(resp.error_code, pb::FirmwareUpdateError::Success as i32);

    let done = rms.wait_terminal(&resp.job_id).await;
    assert_eq!(
        done.execution_state,
        pb::JobExecutionState::Completed as i32,
        "{done:?}"
    );
    assert_eq!(
        (done.rack_id.as_deref(), done.node_id.as_deref()),
        (Some(RACK), Some("n1"))
    );
    let result: serde_json::Value = serde_json::from_str(&done.result_json).unwrap();
    assert_eq!(result["status"], "completed");
    assert_eq!(result["targets_completed"], 2);

    let legacy = client
        .get_firmware_job_status(pb::GetFirmwareJobStatusRequest {
            job_id: resp.job_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(legacy.status, pb::ReturnCode::Success as i32);
    assert_eq!(legacy.job_state, pb::FirmwareJobState::Completed as i32);
    assert_eq!(legacy.error_code, pb::FirmwareUpdateError::Success as i32);

    let inventory = client
        .get_node_firmware_inventory(pb::GetNodeFirmwareInventoryRequest {
            node_id: "n1".into(),
            rack_id: RACK.into(),
        })
        .await
        .unwrap()
        .into_inner();
    let versions: Vec<_> = inventory
        .firmware_list
        .iter()
        .map(|f| (f.name.as_str(), f.version.as_str()))
        .collect();
    assert_eq!(versions, [("BIOS", "bios-3.1"), ("BMC", "bmc-2.0")]);

    // The same images again are skipped: the job says already up to date.
    let again = client
        .update_firmware(update("n1", vec![fw("BMC", "bmc-2.0.fwpkg")]))
        .await
        .unwrap()
        .into_inner();
    let done = rms.wait_terminal(&again.job_id).await;
    let result: serde_json::Value = serde_json::from_str(&done.result_json).unwrap();
    assert_eq!(result["status"], "already_up_to_date");
    rms.stop().await;
}

#[tokio::test]
async fn update_firmware_in_band_failures() {
    let rms = TestRms::start().await;
    rms.register(RACK, &["n1"], COMPUTE).await;
    let mut client = rms.client.clone();

    let resp = client
        .update_firmware(update("n9", vec![fw("BMC", "bmc-2.0.fwpkg")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (resp.status, resp.message.as_str()),
        (pb::ReturnCode::Failure as i32, "node not found")
    );

    let resp = client
        .update_firmware(update("n1", vec![]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (resp.status, resp.message.as_str()),
        (
            pb::ReturnCode::Failure as i32,
            "no firmware targets specified"
        )
    );

    let resp = client
        .update_firmware(update("n1", vec![fw("BMC", "missing.fwpkg")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resp.status, pb::ReturnCode::Failure as i32);
    assert_eq!(
        resp.error_code,
        pb::FirmwareUpdateError::FileNotFound as i32
    );
    assert!(
        resp.message.starts_with("firmware file not found: "),
        "{}",
        resp.message
    );
    assert!(
        resp.message.ends_with(" (component: BMC)"),
        "{}",
        resp.message
    );

    // The sealed planning failures released the node: a real update runs.
    let ok = client
        .update_firmware(update("n1", vec![fw("BMC", "bmc-2.0.fwpkg")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ok.status, pb::ReturnCode::Success as i32, "{ok:?}");

    // A BMC that fails the task: the job fails with phase poll.
    rms.wait_terminal(&ok.job_id).await;
    rms.sim().set_faults(vec![fault(
        "n1",
        SimOperation::Firmware,
        SimFaultEffect::Fail,
    )]);
    let failing = client
        .update_firmware(update("n1", vec![fw("BIOS", "bios-3.1.fwpkg")]))
        .await
        .unwrap()
        .into_inner();
    let done = rms.wait_terminal(&failing.job_id).await;
    assert_eq!(done.execution_state, pb::JobExecutionState::Failed as i32);
    assert!(
        done.error_message
            .starts_with("Poll failed for target BIOS: "),
        "{}",
        done.error_message
    );
    let result: serde_json::Value = serde_json::from_str(&done.result_json).unwrap();
    assert_eq!(result["phase"], "poll");
    assert_eq!(result["target"]["component"], "BIOS");
    rms.stop().await;
}

#[tokio::test]
async fn a_hanging_firmware_poll_fails_as_other_naming_the_task() {
    let rms = TestRms::start_with(|c| {
        c.workflows.firmware_task_timeout_seconds = std::num::NonZeroU64::new(1).unwrap();
    })
    .await;
    rms.register(RACK, &["n1"], COMPUTE).await;
    rms.sim().set_faults(vec![fault(
        "n1",
        SimOperation::Firmware,
        SimFaultEffect::Hang,
    )]);
    let mut client = rms.client.clone();
    let started = client
        .update_firmware(update("n1", vec![fw("BIOS", "bios-3.1.fwpkg")]))
        .await
        .unwrap()
        .into_inner();
    let done = rms.wait_terminal(&started.job_id).await;
    assert_eq!(done.execution_state, pb::JobExecutionState::Failed as i32);
    assert_eq!(done.error_code, pb::JobError::Other as i32, "{done:?}");
    let message = &done.error_message;
    assert!(
        message.starts_with("Poll failed for target BIOS: polling firmware task sim-task-")
            && message.ends_with(" exceeded timeout of 1s"),
        "{message}"
    );
    let result: serde_json::Value = serde_json::from_str(&done.result_json).unwrap();
    assert_eq!(result["phase"], "poll");
    assert_eq!(result["error_code"], "Other");
    rms.stop().await;
}

#[tokio::test]
async fn create_nodes_updates_an_idle_node_and_refuses_a_busy_one() {
    let rms = TestRms::start().await;
    rms.register(RACK, &["n1", "n2"], COMPUTE).await;
    let mut client = rms.client.clone();
    let create = |nodes: Vec<pb::NodeInfo>| pb::CreateNodesRequest {
        nodes: Some(pb::NodeSet { nodes }),
    };
    let moved = |node: &str| {
        let mut info = node_info(RACK, node, COMPUTE);
        if let Some(bmc) = info.bmc_endpoint.as_mut() {
            bmc.port = 8443;
        }
        info
    };
    // Idle and changed: updated, and said so; the same again: no change.
    let resp = client
        .create_nodes(create(vec![moved("n1")]))
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert_eq!(resp.status, pb::ReturnCode::Success as i32);
    assert_eq!(resp.message, "Created 1 nodes; updated existing: n1");
    let resp = client
        .create_nodes(create(vec![moved("n1")]))
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert_eq!(resp.message, "Created 1 nodes");

    // Busy: a firmware job holds n2; its registration is left alone.
    rms.sim().set_faults(vec![fault(
        "n2",
        SimOperation::Firmware,
        SimFaultEffect::Hang,
    )]);
    let job = client
        .update_firmware(update("n2", vec![fw("BMC", "bmc-2.0.fwpkg")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(job.status, pb::ReturnCode::Success as i32);
    let resp = client
        .create_nodes(create(vec![moved("n2")]))
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert_eq!(resp.status, pb::ReturnCode::Failure as i32);
    assert_eq!(
        resp.message,
        format!(
            "Created 0 of 1 nodes; failed: n2: already registered and busy with job {}; not updated",
            job.job_id
        )
    );
    let inventory = client
        .list_node_inventory(pb::ListNodeInventoryRequest {})
        .await
        .unwrap()
        .into_inner()
        .nodes;
    let port = |node: &str| {
        inventory
            .iter()
            .find(|n| n.node_id == node)
            .map(|n| n.port)
            .unwrap_or_else(|| panic!("{node} in {inventory:?}"))
    };
    assert_eq!(port("n1"), 8443, "the idle node moved");
    assert_eq!(port("n2"), 443, "the busy node kept its endpoint");
    rms.stop().await;
}

#[tokio::test]
async fn node_busy_is_refused_through_the_api() {
    let rms = TestRms::start().await;
    rms.register(RACK, &["n1", "n2"], COMPUTE).await;
    rms.sim().set_faults(vec![fault(
        "n1",
        SimOperation::Firmware,
        SimFaultEffect::Hang,
    )]);
    let mut client = rms.client.clone();
    let first = client
        .update_firmware(update("n1", vec![fw("BMC", "bmc-2.0.fwpkg")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.status, pb::ReturnCode::Success as i32);
    let second = client
        .update_firmware(update("n1", vec![fw("BIOS", "bios-3.1.fwpkg")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(second.status, pb::ReturnCode::Failure as i32);
    assert_eq!(
        second.error_code,
        pb::FirmwareUpdateError::UpdateInProgress as i32
    );
    assert_eq!(
        second.message,
        format!(
            "job already in progress for rack {RACK} node n1 (job_id {})",
            first.job_id
        )
    );
    assert!(second.job_id.is_empty());
    // Another node is not blocked.
    let other = client
        .update_firmware(update("n2", vec![fw("BMC", "bmc-2.0.fwpkg")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(other.status, pb::ReturnCode::Success as i32);
    let status = rms.job(&first.job_id, false).await.remove(0);
    assert_ne!(
        status.execution_state,
        pb::JobExecutionState::Completed as i32
    );
    rms.stop().await;
}

#[tokio::test]
async fn worker_panic_seals_the_job_as_abandoned() {
    let rms = TestRms::start().await;
    rms.register(RACK, &["n1"], COMPUTE).await;
    rms.sim().set_faults(vec![fault(
        "n1",
        SimOperation::Firmware,
        SimFaultEffect::Panic,
    )]);
    let resp = rms
        .client
        .clone()
        .update_firmware(update("n1", vec![fw("BMC", "bmc-2.0.fwpkg")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resp.status, pb::ReturnCode::Success as i32);
    let done = rms.wait_terminal(&resp.job_id).await;
    assert_eq!(done.execution_state, pb::JobExecutionState::Failed as i32);
    assert_eq!(
        done.error_message,
        "job abandoned before recording a terminal state"
    );
    assert_eq!(done.state_description, "Abandoned");
    assert_eq!(done.error_code, pb::JobError::Internal as i32);
    // The node is free again.
    rms.sim().set_faults(vec![]);
    let again = rms
        .client
        .clone()
        .update_firmware(update("n1", vec![fw("BMC", "bmc-2.0.fwpkg")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.status, pb::ReturnCode::Success as i32);
    rms.stop().await;
}

#[tokio::test]
async fn at_capacity_is_answered_in_band() {
    let rms = TestRms::start_with(|c| {
        c.workflows.max_tracked_jobs = std::num::NonZeroUsize::new(1).unwrap();
    })
    .await;
    rms.register(RACK, &["n1", "n2"], COMPUTE).await;
    rms.sim().set_faults(vec![fault(
        "n1",
        SimOperation::Firmware,
        SimFaultEffect::Hang,
    )]);
    let mut client = rms.client.clone();
    let first = client
        .update_firmware(update("n1", vec![fw("BMC", "bmc-2.0.fwpkg")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.status, pb::ReturnCode::Success as i32);
    let full = client
        .update_firmware(update("n2", vec![fw("BMC", "bmc-2.0.fwpkg")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(full.status, pb::ReturnCode::Failure as i32);
    assert_eq!(
        full.message,
        "job tracker at capacity (1/1 jobs); retry after in-flight jobs finish"
    );
    assert_eq!(full.error_code, pb::FirmwareUpdateError::Exception as i32);
    // Node busy wins over capacity for the same node.
    let busy = client
        .update_firmware(update("n1", vec![fw("BMC", "bmc-2.0.fwpkg")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        busy.error_code,
        pb::FirmwareUpdateError::UpdateInProgress as i32
    );
    rms.stop().await;
}

#[tokio::test]
async fn job_status_errors_follow_the_spec() {
    let rms = TestRms::start().await;
    let mut client = rms.client.clone();
    let err = client
        .get_job_status(pb::GetJobStatusRequest {
            job_id: "  ".into(),
            include_child_job_states: false,
        })
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (Code::InvalidArgument, "job_id is required")
    );
    let err = client
        .get_job_status(pb::GetJobStatusRequest {
            job_id: "nope".into(),
            include_child_job_states: true,
        })
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (Code::NotFound, "job nope not found")
    );
    let legacy = client
        .get_firmware_job_status(pb::GetFirmwareJobStatusRequest {
            job_id: "nope".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(legacy.status, pb::ReturnCode::Failure as i32);
    assert_eq!(legacy.error_message, "job nope not found");
    rms.stop().await;
}

#[tokio::test]
async fn batch_by_node_type_aggregates_children() {
    let rms = TestRms::start().await;
    rms.register(RACK, &["c1", "c2", "c3"], COMPUTE).await;
    rms.register(RACK, &["s1"], pb::NodeType::SwitchGb200Nvidia)
        .await;
    rms.sim().set_faults(vec![fault(
        "c2",
        SimOperation::Firmware,
        SimFaultEffect::Fail,
    )]);
    let resp = rms
        .client
        .clone()
        .batch_update_firmware_by_node_type(pb::BatchUpdateFirmwareByNodeTypeRequest {
            node_type: COMPUTE as i32,
            rack_id: RACK.into(),
            firmware_targets: vec![fw("BMC", "bmc-2.0.fwpkg")],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let batch = resp.response.unwrap();
    assert_eq!(batch.status, pb::ReturnCode::Success as i32, "{batch:?}");
    assert_eq!(
        batch.message,
        format!("Created 3 firmware update jobs for rack {RACK}")
    );
    assert_eq!(resp.jobs.len(), 3, "the switch is not matched");
    let parent = batch.job_id;

    let done = rms.wait_terminal(&parent).await;
    assert_eq!(done.execution_state, pb::JobExecutionState::Failed as i32);
    assert_eq!(
        done.state_description,
        "Batch complete: 2/3 succeeded, 1 failed"
    );
    assert_eq!(done.error_message, "1 of 3 firmware updates failed");
    assert_eq!(done.error_code, pb::JobError::Other as i32);
    assert_eq!(
        (done.rack_id.as_deref(), done.node_id.as_deref()),
        (Some(RACK), Some(""))
    );
    let failed: serde_json::Value = serde_json::from_str(&done.result_json).unwrap();
    assert_eq!(failed["failed_jobs"][0]["node_id"], "c2");

    let states = rms.job(&parent, true).await;
    assert_eq!(states.len(), 4, "parent then its three children");
    assert_eq!(states[0].job_id, parent);
    assert_eq!(states[0].child_job_ids.len(), 3);
    for (child, id) in states[1..].iter().zip(&states[0].child_job_ids) {
        assert_eq!(&child.job_id, id);
        assert_eq!(child.parent_job_id.as_deref(), Some(parent.as_str()));
    }
    let without = rms.job(&parent, false).await;
    assert_eq!(without.len(), 1);
    rms.stop().await;
}

#[tokio::test]
async fn batch_by_node_type_without_matching_nodes_fails_the_parent() {
    let rms = TestRms::start().await;
    rms.register(RACK, &["c1"], COMPUTE).await;
    let resp = rms
        .client
        .clone()
        .batch_update_firmware_by_node_type(pb::BatchUpdateFirmwareByNodeTypeRequest {
            node_type: pb::NodeType::PowershelfGb200Liteon as i32,
            rack_id: RACK.into(),
            filename: "psu-1.5.fwpkg".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert_eq!(
        (resp.status, resp.message.as_str()),
        (pb::ReturnCode::Failure as i32, "no matching nodes found")
    );
    let parent = rms.job(&resp.job_id, false).await.remove(0);
    assert_eq!(parent.execution_state, pb::JobExecutionState::Failed as i32);
    assert_eq!(parent.error_message, "no matching nodes found");
    assert_eq!(parent.result_json, "");
    rms.stop().await;
}

#[tokio::test]
async fn batch_update_ephemeral_nodes() {
    let rms = TestRms::start().await;
    let mut no_creds = node_info("rack-e", "e3", COMPUTE);
    no_creds.bmc_endpoint.as_mut().unwrap().credentials = None;
    let mut targets = std::collections::HashMap::new();
    targets.insert(
        COMPUTE as i32,
        pb::FirmwareTargetList {
            targets: vec![fw("BMC", "bmc-2.0.fwpkg")],
        },
    );
    let resp = rms
        .client
        .clone()
        .batch_update_firmware(pb::BatchUpdateFirmwareRequest {
            nodes: Some(pb::NodeSet {
                nodes: vec![
                    node_info("rack-e", "e1", COMPUTE),
                    node_info("rack-e", "e2", COMPUTE),
                    no_creds,
                    node_info("rack-e", "e4", pb::NodeType::SwitchGb200Nvidia),
                ],
            }),
            firmware_targets: targets,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let batch = resp.response.unwrap();
    assert_eq!(
        batch.status,
        pb::ReturnCode::Failure as i32,
        "two nodes were refused"
    );
    assert_eq!(
        batch.message,
        "Created 2 firmware update jobs out of 4 nodes. Use GetFirmwareJobStatus with job_id to track overall batch status."
    );
    let errors: Vec<_> = batch
        .node_results
        .iter()
        .filter(|r| r.status != pb::ReturnCode::Success as i32)
        .map(|r| r.error_message.as_str())
        .collect();
    assert_eq!(
        errors,
        [
            "Missing BMC credentials for node e3",
            "No firmware targets provided for node type SWITCH_GB200_NVIDIA"
        ]
    );
    let done = rms.wait_terminal(&batch.job_id).await;
    assert_eq!(
        done.execution_state,
        pb::JobExecutionState::Completed as i32,
        "{done:?}"
    );
    assert_eq!(
        done.state_description,
        "All 2 firmware updates completed successfully"
    );
    let legacy = rms
        .client
        .clone()
        .get_firmware_job_status(pb::GetFirmwareJobStatusRequest {
            job_id: batch.job_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(legacy.job_state, pb::FirmwareJobState::Completed as i32);

    let empty = rms
        .client
        .clone()
        .batch_update_firmware(pb::BatchUpdateFirmwareRequest {
            nodes: Some(pb::NodeSet {
                nodes: vec![node_info("rack-e", "e1", COMPUTE)],
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert_eq!(empty.message, "No firmware targets specified in request");
    assert!(empty.job_id.is_empty());
    rms.stop().await;
}

#[tokio::test]
async fn metrics_endpoint_serves_workflow_counters() {
    let rms = TestRms::start().await;
    rms.register(RACK, &["n1"], COMPUTE).await;
    let resp = rms
        .client
        .clone()
        .update_firmware(update("n1", vec![fw("BMC", "bmc-2.0.fwpkg")]))
        .await
        .unwrap()
        .into_inner();
    rms.wait_terminal(&resp.job_id).await;
    let (status, body) = rms.scrape("/metrics").await;
    assert!(status.contains("200"), "{status}");
    let scrape = rackflow_testkit::metrics::parse(&body);
    let firmware = [("workflow_type", "firmware_update"), ("is_leaf", "true")];
    assert_eq!(
        scrape.value(
            "rms_workflows_counts",
            &[
                firmware[0],
                firmware[1],
                ("workflow_state", "completed"),
                ("error_code", "none")
            ]
        ),
        1.0
    );
    assert_eq!(scrape.value("rms_workflows_in_flight", &firmware), 0.0);
    // Types never used are there at 0 (a dashboard needs the zero).
    assert_eq!(
        scrape.value(
            "rms_workflows_in_flight",
            &[
                ("workflow_type", "cold_reboot_sequence"),
                ("is_leaf", "false")
            ]
        ),
        0.0
    );
    // The gRPC edge counted the calls, by method and code.
    let update = [
        ("service", "rms"),
        ("rpc", "/rack_manager.RackManager/UpdateFirmware"),
        ("code", "OK"),
    ];
    assert_eq!(scrape.value("rackflow_rpc_requests", &update), 1.0);
    assert_eq!(scrape.value("rackflow_rpc_duration_seconds", &update), 1.0);
    assert!(scrape.sum("rackflow_rpc_requests", &[("service", "rms")]) >= 2.0);
    let (status, _) = rms.scrape("/nope").await;
    assert!(status.contains("404"), "{status}");
    rms.stop().await;
}

/// A plaintext rack manager without `tls.allow_insecure` refuses BMC
/// passwords (registration, batch power and batch firmware alike) and
/// registers nothing; nodes without credentials still register.
#[tokio::test]
async fn credentials_over_plaintext_are_refused_unless_allowed() {
    let rms = TestRms::start_with(|c| c.tls.allow_insecure = false).await;
    let mut client = rms.client.clone();
    let mut with_password = node_info("rack-p", "p1", COMPUTE);
    with_password.bmc_endpoint.as_mut().unwrap().credentials = Some(pb::Credentials {
        auth: Some(pb::credentials::Auth::UserPass(pb::UsernamePassword {
            username: "root".into(),
            password: "hunter2".into(),
        })),
    });
    let set = pb::NodeSet {
        nodes: vec![with_password],
    };
    let err = client
        .create_nodes(pb::CreateNodesRequest {
            nodes: Some(set.clone()),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().contains("TLS") && !err.message().contains("hunter2"),
        "{err:?}"
    );
    let err = client
        .batch_set_power_state(pb::BatchSetPowerStateRequest {
            nodes: Some(set.clone()),
            operation: pb::PowerOperation::On as i32,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    let err = client
        .batch_update_firmware(pb::BatchUpdateFirmwareRequest {
            nodes: Some(set),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    let racks = client
        .list_racks(pb::ListRacksRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(
        !format!("{racks:?}").contains("rack-p"),
        "nothing registered: {racks:?}"
    );
    // Without credentials, registration works as before.
    let mut bare = node_info("rack-q", "q1", COMPUTE);
    bare.bmc_endpoint.as_mut().unwrap().credentials = None;
    let created = client
        .create_nodes(pb::CreateNodesRequest {
            nodes: Some(pb::NodeSet { nodes: vec![bare] }),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(created.stats.unwrap().successful_nodes, 1);
    rms.stop().await;
}

/// gRPC health answers for both of the rack manager's services, and
/// reflection lists exactly the services it serves.
#[tokio::test]
async fn health_and_reflection() {
    use rackflow_testkit::grpc::{health, reflected_services};
    use tonic_health::pb::health_check_response::ServingStatus;

    let rms = TestRms::start().await;
    for service in [
        "rack_manager.RackManager",
        "rackflow.rms.v1.RackManagerExtensions",
    ] {
        let status = health(rms.addr, service)
            .await
            .unwrap_or_else(|e| panic!("health of {service}: {e}"));
        assert_eq!(status, ServingStatus::Serving, "{service}");
    }
    let unknown = health(rms.addr, "v1.Flow").await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    let mut expected: Vec<String> = rackflow_rms::server::SERVICES
        .iter()
        .map(ToString::to_string)
        .collect();
    expected.sort();
    assert_eq!(reflected_services(rms.addr).await, expected);
    rms.stop().await;
}
