//! Issue 35 over the real gRPC API on the `sim` back end: node update,
//! device info, rack and batch firmware inventory, the firmware-object
//! catalogue (add / get / list / default / delete / history, artifacts
//! fetched from an HTTP server and verified), applying objects (stored and
//! ephemeral) and comparing nodes against them — and the catalogue across a
//! restart of the rack manager.

// Test helpers may unwrap: the panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use rackflow_api::rack_manager as pb;
use rackflow_rms::backend::sim::{SimFaultEffect, SimNodeFault, SimOperation};
use rackflow_testkit::artifacts::{ArtifactServer, manifest};
use rackflow_testkit::rms::{TestRms, node_info};
use rackflow_testkit::wait::wait_until;
use tonic::Code;

const RACK: &str = "rack-fo";
const HW: &str = "GB200-NVL72";

fn node_set(nodes: Vec<pb::NodeInfo>) -> Option<pb::NodeSet> {
    Some(pb::NodeSet { nodes })
}

/// Registered-node references: rack and node only (the rack manager uses
/// the registered endpoints).
fn registered(rack: &str, nodes: &[&str]) -> Option<pb::NodeSet> {
    node_set(
        nodes
            .iter()
            .map(|n| pb::NodeInfo {
                node_id: (*n).to_owned(),
                rack_id: rack.to_owned(),
                ..Default::default()
            })
            .collect(),
    )
}

fn ok(status: i32) -> bool {
    status == pb::ReturnCode::Success as i32
}

/// An object with BMC 2.1.0 and BIOS 0.9.5 for compute trays, served by
/// `server`; returns (id, manifest).
fn compute_object(server: &ArtifactServer, milestone: &str, bmc: &str) -> (String, String) {
    let (bmc_url, bmc_sha) = server.put(
        &format!("{milestone}/bmc.fwpkg"),
        format!("version={bmc}\ncomponent=BMC\n").as_bytes(),
    );
    let (bios_url, bios_sha) = server.put(
        &format!("{milestone}/bios.fwpkg"),
        b"version=0.9.5\ncomponent=BIOS\n",
    );
    let json = manifest(
        HW,
        milestone,
        &[(
            "Compute Node",
            &[
                ("BMC", bmc, &bmc_url, &bmc_sha),
                ("BIOS", "0.9.5", &bios_url, &bios_sha),
            ],
        )],
    );
    (format!("{HW}_{milestone}"), json)
}

async fn add(
    rms: &TestRms,
    json: &str,
    set_default: bool,
) -> Result<pb::FirmwareObject, tonic::Status> {
    rms.client
        .clone()
        .add_firmware_object(pb::AddFirmwareObjectRequest {
            config_json: json.to_owned(),
            access_token: None,
            hardware_type: HW.to_owned(),
            set_default,
        })
        .await
        .map(|r| r.into_inner().object.unwrap())
}

async fn get(rms: &TestRms, id: &str) -> pb::FirmwareObject {
    rms.client
        .clone()
        .get_firmware_object(pb::GetFirmwareObjectRequest { id: id.to_owned() })
        .await
        .unwrap()
        .into_inner()
        .object
        .unwrap()
}

/// Waits until the object's download ended (available, or a reason why not).
async fn settled(rms: &TestRms, id: &str) -> pb::FirmwareObject {
    rackflow_testkit::rms::settled_object(&rms.client, id).await
}

async fn versions(rms: &TestRms, rack: &str, node: &str) -> Vec<(String, String)> {
    let resp = rms
        .client
        .clone()
        .get_node_firmware_inventory(pb::GetNodeFirmwareInventoryRequest {
            node_id: node.to_owned(),
            rack_id: rack.to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut v: Vec<_> = resp
        .firmware_list
        .into_iter()
        .map(|f| (f.name, f.version))
        .collect();
    v.sort();
    v
}

async fn compare(
    rms: &TestRms,
    json: &str,
    nodes: Option<pb::NodeSet>,
) -> pb::CompareFirmwareObjectResponse {
    rms.client
        .clone()
        .compare_firmware_object(pb::CompareFirmwareObjectRequest {
            config_json: json.to_owned(),
            nodes,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

/// `node`'s BMC fails `operation` (in any rack).
fn failing(node: &str, operation: SimOperation) -> Vec<SimNodeFault> {
    vec![SimNodeFault {
        node_id: node.into(),
        rack_id: None,
        operation,
        effect: SimFaultEffect::Fail,
    }]
}

fn statuses(node: &pb::NodeFirmwareManifestComparison) -> Vec<(String, i32)> {
    node.components
        .iter()
        .map(|c| (c.component.clone(), c.status))
        .collect()
}

#[tokio::test]
async fn device_info_and_inventories_of_registered_and_ephemeral_nodes() {
    let rms = TestRms::start_with(|c| {
        c.nodes.sim.faults = failing("compute-09", SimOperation::Any);
    })
    .await;
    rms.register(
        RACK,
        &["compute-03", "compute-04"],
        pb::NodeType::ComputeGb200Nvidia,
    )
    .await;
    rms.register(RACK, &["switch-01"], pb::NodeType::SwitchGb200Nvidia)
        .await;
    let mut client = rms.client.clone();

    let info = client
        .get_node_device_info(pb::GetNodeDeviceInfoRequest {
            rack_id: RACK.into(),
            node_id: "compute-03".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ok(info.status), "{info:?}");
    let device = info.device_info.unwrap();
    assert_eq!(
        (
            device.node_id.as_str(),
            device.tray_index,
            device.slot_number
        ),
        ("compute-03", Some(3), Some(4))
    );
    let serial = device.chassis_sn.expect("the sim models a chassis serial");

    for (rack, node, message) in [
        (RACK, "compute-99", "node not found"),
        ("nope", "compute-03", "rack not found"),
    ] {
        let missing = client
            .get_node_device_info(pb::GetNodeDeviceInfoRequest {
                rack_id: rack.into(),
                node_id: node.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(missing.status, pb::ReturnCode::Failure as i32);
        assert_eq!(missing.message, message);
    }

    // By node type: only the compute trays, all on the rack's chassis.
    let listed = client
        .list_node_device_info_by_node_type(pb::ListNodeDeviceInfoByNodeTypeRequest {
            rack_id: RACK.into(),
            node_type: pb::NodeType::ComputeGb200Nvidia as i32,
            node_descriptor: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ok(listed.status), "{listed:?}");
    let ids: Vec<_> = listed
        .node_device_details
        .iter()
        .map(|d| (d.node_id.as_str(), d.chassis_sn))
        .collect();
    assert_eq!(
        ids,
        [("compute-03", Some(serial)), ("compute-04", Some(serial))]
    );
    assert_eq!(listed.stats.unwrap().successful_nodes, 2);
    let none = client
        .list_node_device_info_by_node_type(pb::ListNodeDeviceInfoByNodeTypeRequest {
            rack_id: RACK.into(),
            node_type: pb::NodeType::PowershelfGb200Liteon as i32,
            node_descriptor: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (none.status, none.message.as_str()),
        (pb::ReturnCode::Failure as i32, "no matching nodes found")
    );
    let invalid = client
        .list_node_device_info_by_node_type(pb::ListNodeDeviceInfoByNodeTypeRequest {
            rack_id: RACK.into(),
            node_type: 99,
            node_descriptor: None,
        })
        .await
        .unwrap_err();
    assert_eq!(invalid.code(), Code::InvalidArgument);

    // Ephemeral nodes: one without an endpoint, one whose BMC fails.
    let mut no_endpoint = node_info("other", "compute-01", pb::NodeType::ComputeGb200Nvidia);
    no_endpoint.bmc_endpoint = None;
    let batch = client
        .batch_get_node_device_info(pb::BatchGetNodeDeviceInfoRequest {
            nodes: node_set(vec![
                node_info("other", "compute-07", pb::NodeType::ComputeGb200Nvidia),
                no_endpoint,
                node_info("other", "compute-09", pb::NodeType::ComputeGb200Nvidia),
            ]),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(batch.status, pb::ReturnCode::Failure as i32);
    assert_eq!(batch.node_device_details.len(), 1);
    assert_eq!(batch.node_device_details[0].tray_index, Some(7));
    assert!(
        batch
            .message
            .contains("compute-01: BMC endpoint is required"),
        "{}",
        batch.message
    );
    assert!(batch.message.contains("compute-09:"), "{}", batch.message);
    let stats = batch.stats.unwrap();
    assert_eq!(
        (
            stats.total_nodes,
            stats.successful_nodes,
            stats.failed_nodes
        ),
        (3, 1, 2)
    );
    let empty = client
        .batch_get_node_device_info(pb::BatchGetNodeDeviceInfoRequest { nodes: None })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(empty.message, "No nodes specified in request");

    // Rack inventory: every node's list.
    let rack_inv = client
        .get_rack_firmware_inventory(pb::GetRackFirmwareInventoryRequest {
            rack_id: RACK.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ok(rack_inv.status));
    let nodes: Vec<_> = rack_inv
        .nodes
        .iter()
        .map(|n| (n.node_id.as_str(), n.firmware_list.len()))
        .collect();
    assert_eq!(
        nodes,
        [("compute-03", 2), ("compute-04", 2), ("switch-01", 2)]
    );
    let unknown = client
        .get_rack_firmware_inventory(pb::GetRackFirmwareInventoryRequest {
            rack_id: "nope".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (unknown.status, unknown.nodes.len()),
        (pb::ReturnCode::Failure as i32, 0)
    );

    // Batch inventory: the failing BMC is a node failure, not the call's.
    let inv = client
        .batch_get_firmware_inventory(pb::BatchGetFirmwareInventoryRequest {
            nodes: node_set(vec![
                node_info("other", "compute-07", pb::NodeType::ComputeGb200Nvidia),
                node_info("other", "compute-09", pb::NodeType::ComputeGb200Nvidia),
            ]),
        })
        .await
        .unwrap()
        .into_inner();
    let response = inv.response.unwrap();
    assert_eq!(response.status, pb::ReturnCode::Failure as i32);
    assert_eq!(inv.nodes.len(), 1);
    assert_eq!(inv.nodes[0].node_id, "compute-07");
    let failed: Vec<_> = response
        .node_results
        .iter()
        .filter(|r| !ok(r.status))
        .map(|r| r.node_id.as_str())
        .collect();
    assert_eq!(failed, ["compute-09"]);
    rms.stop().await;
}

#[tokio::test]
async fn update_node_changes_an_idle_nodes_endpoint_and_refuses_a_busy_one() {
    let rms = TestRms::start_with(|c| c.nodes.sim.firmware_latency_ms = 60_000).await;
    rms.register(
        RACK,
        &["compute-01", "compute-02"],
        pb::NodeType::ComputeGb200Nvidia,
    )
    .await;
    let mut client = rms.client.clone();
    let update = |node: &str, ip: Option<&str>| pb::UpdateNodeRequest {
        node_id: node.into(),
        rack_id: RACK.into(),
        update_info: Some(pb::NodeUpdateInfo {
            bmc_endpoint: ip.map(|ip| rackflow_testkit::rms::endpoint(ip, 8443, None)),
            host_endpoint: None,
        }),
    };
    let resp = client
        .update_node(update("compute-01", Some("10.1.2.3")))
        .await
        .unwrap()
        .into_inner();
    let resp = resp.response.unwrap();
    assert!(ok(resp.status), "{resp:?}");
    assert_eq!(resp.message, "Updated node compute-01: bmc_endpoint");
    let inventory = client
        .list_node_inventory(pb::ListNodeInventoryRequest {})
        .await
        .unwrap()
        .into_inner();
    let node = inventory
        .nodes
        .iter()
        .find(|n| n.node_id == "compute-01")
        .unwrap();
    assert_eq!((node.ip_address.as_str(), node.port), ("10.1.2.3", 8443));

    for (req, expected) in [
        (update("compute-99", Some("10.0.0.9")), "node not found"),
        (
            update("compute-01", None),
            "update_info names nothing to update (bmc_endpoint, host_endpoint)",
        ),
    ] {
        let resp = client
            .update_node(req)
            .await
            .unwrap()
            .into_inner()
            .response
            .unwrap();
        assert_eq!(
            (resp.status, resp.message.as_str()),
            (pb::ReturnCode::Failure as i32, expected)
        );
    }
    let out_of_range = client
        .update_node(pb::UpdateNodeRequest {
            update_info: Some(pb::NodeUpdateInfo {
                bmc_endpoint: Some(rackflow_testkit::rms::endpoint("10.0.0.1", 70_000, None)),
                host_endpoint: None,
            }),
            ..update("compute-01", None)
        })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert!(
        out_of_range.message.contains("out of range"),
        "{out_of_range:?}"
    );

    // A node flashing firmware keeps its endpoint.
    let job = client
        .update_firmware(pb::UpdateFirmwareRequest {
            node_id: "compute-02".into(),
            rack_id: RACK.into(),
            filename: "bmc-2.0.fwpkg".into(),
            target: "BMC".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    rms.wait_running(&job.job_id).await;
    let busy = client
        .update_node(update("compute-02", Some("10.9.9.9")))
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert_eq!(busy.status, pb::ReturnCode::Failure as i32);
    assert_eq!(
        busy.message,
        format!(
            "node compute-02 is busy with job {}; not updated",
            job.job_id
        )
    );
    rms.stop().await;
}

#[tokio::test]
async fn catalogue_fetches_verifies_and_keeps_one_default_per_hardware_type() {
    let server = ArtifactServer::start().await;
    let rms = TestRms::start().await;
    let (first, first_json) = compute_object(&server, "2026.10", "2.0.0");
    let (second, second_json) = compute_object(&server, "2026.11", "2.1.0");

    // The first object of a hardware type becomes its default.
    let added = add(&rms, &first_json, false).await.unwrap();
    assert_eq!(
        (
            added.id.as_str(),
            added.is_default,
            added.hardware_type.as_str()
        ),
        (first.as_str(), true, HW)
    );
    let added = settled(&rms, &first).await;
    assert!(added.available, "{added:?}");
    let meta = added.metadata.unwrap();
    let compute = meta
        .device_components
        .iter()
        .find(|d| d.node_type == pb::NodeType::ComputeGb200Nvidia as i32)
        .unwrap();
    let names: Vec<_> = compute
        .components
        .iter()
        .map(|c| (c.name.as_str(), c.version.as_str()))
        .collect();
    assert_eq!(names, [("BMC", "2.0.0"), ("BIOS", "0.9.5")]);
    assert_eq!(
        compute.components[0].artifacts[0].filename,
        format!("firmware_objects/{first}/bmc.fwpkg")
    );
    assert!(
        rms.firmware_dir
            .join("firmware_objects")
            .join(&first)
            .join("bmc.fwpkg")
            .is_file()
    );

    let second_added = add(&rms, &second_json, false).await.unwrap();
    assert!(
        !second_added.is_default,
        "a later object does not take the default unasked"
    );
    assert!(settled(&rms, &second).await.available);
    let made = rms
        .client
        .clone()
        .set_default_firmware_object(pb::SetDefaultFirmwareObjectRequest {
            object_id: second.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .object
        .unwrap();
    assert!(made.is_default);
    let listed = rms
        .client
        .clone()
        .list_firmware_objects(pb::ListFirmwareObjectsRequest {
            only_available: true,
            hardware_type: HW.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .objects;
    let defaults: Vec<_> = listed
        .iter()
        .map(|o| (o.id.as_str(), o.is_default))
        .collect();
    assert_eq!(defaults, [(first.as_str(), false), (second.as_str(), true)]);

    // Refusals, as gRPC codes (these responses carry no status).
    let again = add(&rms, &first_json, false).await.unwrap_err();
    assert_eq!(again.code(), Code::AlreadyExists);
    assert_eq!(
        again.message(),
        format!("firmware object {first} already exists")
    );
    let garbage = add(&rms, "{not json", false).await.unwrap_err();
    assert_eq!(garbage.code(), Code::InvalidArgument);
    assert!(
        garbage
            .message()
            .starts_with("invalid config_json: config_json is not valid JSON"),
        "{}",
        garbage.message()
    );
    let two_milestones = r#"{"ProductName": "P", "Milestones": [{"Name": "a"}, {"Name": "b"}]}"#;
    let refused = add(&rms, two_milestones, false).await.unwrap_err();
    assert_eq!(
        refused.message(),
        "invalid config_json: Milestones must contain exactly one milestone; found 2"
    );
    let no_hw = rms
        .client
        .clone()
        .add_firmware_object(pb::AddFirmwareObjectRequest {
            config_json: first_json.clone(),
            hardware_type: " ".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        (no_hw.code(), no_hw.message()),
        (Code::InvalidArgument, "hardware_type is required")
    );
    for status in [
        rms.client
            .clone()
            .get_firmware_object(pb::GetFirmwareObjectRequest { id: "nope".into() })
            .await
            .unwrap_err(),
        rms.client
            .clone()
            .set_default_firmware_object(pb::SetDefaultFirmwareObjectRequest {
                object_id: "nope".into(),
            })
            .await
            .unwrap_err(),
    ] {
        assert_eq!(
            (status.code(), status.message()),
            (Code::NotFound, "firmware object nope not found")
        );
    }

    let empty = rms
        .client
        .clone()
        .get_firmware_object(pb::GetFirmwareObjectRequest { id: " ".into() })
        .await
        .unwrap_err();
    assert_eq!(
        (empty.code(), empty.message()),
        (Code::InvalidArgument, "id is required")
    );

    // A missing artifact and a wrong checksum: never available, and why.
    let (missing_url, _) = server.put("gone/bmc.fwpkg", b"x");
    server.remove("gone/bmc.fwpkg");
    let missing = manifest(
        HW,
        "missing",
        &[("Compute Node", &[("BMC", "9", &missing_url, "")])],
    );
    add(&rms, &missing, false).await.unwrap();
    let missing = settled(&rms, &format!("{HW}_missing")).await;
    assert!(!missing.available);
    let reason = missing.unavailable_reason.unwrap();
    assert!(
        reason.contains("bmc.fwpkg: GET") && reason.contains("404"),
        "{reason}"
    );
    // An object that is not available is not applied.
    let refused = rms
        .client
        .clone()
        .apply_stored_firmware_object(pb::ApplyStoredFirmwareObjectRequest {
            object_id: format!("{HW}_missing"),
            nodes: registered(RACK, &["compute-01"]),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert_eq!(refused.status, pb::ReturnCode::Failure as i32);
    assert!(
        refused
            .message
            .starts_with(&format!("firmware object {HW}_missing is not available: ")),
        "{refused:?}"
    );
    let odd_type = rms
        .client
        .clone()
        .add_firmware_object(pb::AddFirmwareObjectRequest {
            config_json: first_json.clone(),
            hardware_type: "GB200\nNVL72".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(odd_type.code(), Code::InvalidArgument);
    let (bad_url, _) = server.put("bad/bmc.fwpkg", b"tampered");
    let wrong_sha = "0".repeat(64);
    let bad = manifest(
        HW,
        "bad",
        &[("Compute Node", &[("BMC", "9", &bad_url, &wrong_sha)])],
    );
    add(&rms, &bad, false).await.unwrap();
    let bad = settled(&rms, &format!("{HW}_bad")).await;
    assert!(!bad.available);
    assert!(
        bad.unavailable_reason
            .unwrap()
            .contains("checksum mismatch")
    );
    assert!(
        !rms.firmware_dir
            .join(format!("firmware_objects/{HW}_bad/bmc.fwpkg"))
            .exists(),
        "a file that failed its checksum is not kept"
    );
    let available_only: Vec<_> = rms
        .client
        .clone()
        .list_firmware_objects(pb::ListFirmwareObjectsRequest {
            only_available: true,
            hardware_type: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .objects
        .into_iter()
        .map(|o| o.id)
        .collect();
    assert_eq!(available_only, [first.clone(), second.clone()]);

    // Delete: files go with the entry; an unknown id is an in-band failure.
    let deleted = rms
        .client
        .clone()
        .delete_firmware_object(pb::DeleteFirmwareObjectRequest { id: first.clone() })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert!(ok(deleted.status), "{deleted:?}");
    assert!(
        !rms.firmware_dir
            .join("firmware_objects")
            .join(&first)
            .exists()
    );
    let unknown = rms
        .client
        .clone()
        .delete_firmware_object(pb::DeleteFirmwareObjectRequest { id: first.clone() })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert_eq!(
        (unknown.status, unknown.message),
        (
            pb::ReturnCode::Failure as i32,
            format!("firmware object {first} not found")
        )
    );
    rms.stop().await;
}

#[tokio::test]
async fn an_access_token_fetches_artifacts_and_is_never_stored() {
    let server = ArtifactServer::start().await;
    server.require_token("tok-3b1f9e");
    let rms = TestRms::start().await;
    let (id, json) = compute_object(&server, "token", "2.2.0");
    rms.client
        .clone()
        .add_firmware_object(pb::AddFirmwareObjectRequest {
            config_json: json.clone(),
            access_token: Some("tok-3b1f9e".into()),
            hardware_type: HW.into(),
            set_default: false,
        })
        .await
        .unwrap();
    assert!(settled(&rms, &id).await.available);
    assert!(server.requests().iter().all(|(_, authorized)| *authorized));
    let stored = std::fs::read_to_string(rms.catalog_dir.join("catalog.json")).unwrap();
    assert!(stored.contains(&id));
    assert!(!stored.contains("tok-3b1f9e"), "the token is not persisted");
    // Without the token the same artifacts are refused.
    let other = json.replace("\"token\"", "\"token2\"");
    add(&rms, &other, false).await.unwrap();
    let refused = settled(&rms, &format!("{HW}_token2")).await;
    assert!(refused.unavailable_reason.unwrap().contains("401"));
    rms.stop().await;
}

#[tokio::test]
async fn apply_a_stored_object_to_registered_nodes_then_compare_and_read_history() {
    let server = ArtifactServer::start().await;
    let rms = TestRms::start().await;
    let nodes = ["compute-01", "compute-02"];
    rms.register(RACK, &nodes, pb::NodeType::ComputeGb200Nvidia)
        .await;
    let (id, json) = compute_object(&server, "2026.12", "2.1.0");
    add(&rms, &json, true).await.unwrap();
    assert!(settled(&rms, &id).await.available);

    // Before: every node mismatches on both components.
    let before = compare(&rms, &json, registered(RACK, &nodes)).await;
    assert!(!before.matches_manifest);
    assert_eq!(before.object_id, id);
    let mismatched = pb::FirmwareComparisonStatus::Mismatched as i32;
    assert_eq!(
        statuses(&before.nodes[0]),
        [
            ("BIOS".to_owned(), mismatched),
            ("BMC".to_owned(), mismatched)
        ]
    );
    assert_eq!(
        before.nodes[0].components[1].reason,
        "installed 1.0.0, the firmware object has 2.1.0"
    );

    // Apply the default for the hardware type, naming nodes only.
    let applied = rms
        .client
        .clone()
        .apply_stored_firmware_object(pb::ApplyStoredFirmwareObjectRequest {
            rack_id: RACK.into(),
            hardware_type: HW.into(),
            firmware_type: "prod".into(),
            nodes: registered(RACK, &nodes),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let response = applied.response.unwrap();
    assert!(ok(response.status), "{response:?}");
    assert_eq!(applied.object_id, id);
    assert_eq!(applied.jobs.len(), 2);
    let parent = rms.wait_terminal(&response.job_id).await;
    assert_eq!(
        parent.execution_state,
        pb::JobExecutionState::Completed as i32,
        "{parent:?}"
    );
    for node in nodes {
        assert_eq!(
            versions(&rms, RACK, node).await,
            [
                ("BIOS".to_owned(), "0.9.5".to_owned()),
                ("BMC".to_owned(), "2.1.0".to_owned())
            ]
        );
    }
    let after = compare(&rms, &json, registered(RACK, &nodes)).await;
    assert!(after.matches_manifest, "{after:?}");
    assert!(ok(after.response.unwrap().status));

    let history = rms
        .client
        .clone()
        .get_firmware_object_history(pb::GetFirmwareObjectHistoryRequest {
            object_id: id.clone(),
            rack_ids: vec![RACK.into()],
        })
        .await
        .unwrap()
        .into_inner()
        .records;
    assert_eq!(history.len(), 1);
    let record = &history[0];
    assert_eq!(
        (
            record.object_id.as_str(),
            record.rack_id.as_str(),
            record.firmware_type.as_str()
        ),
        (id.as_str(), RACK, "prod")
    );
    assert_eq!(record.node_ids, nodes);
    assert!(record.firmware_available && record.applied_at.is_some());
    let other_rack = rms
        .client
        .clone()
        .get_firmware_object_history(pb::GetFirmwareObjectHistoryRequest {
            object_id: String::new(),
            rack_ids: vec!["r9".into()],
        })
        .await
        .unwrap()
        .into_inner()
        .records;
    assert!(other_rack.is_empty());

    // In-band refusals of an apply.
    let refuse = |object_id: &str| pb::ApplyStoredFirmwareObjectRequest {
        rack_id: RACK.into(),
        object_id: object_id.into(),
        nodes: registered(RACK, &nodes),
        ..Default::default()
    };
    for (req, expected) in [
        (refuse("nope"), "firmware object nope not found".to_owned()),
        (
            refuse(""),
            "object_id or hardware_type is required".to_owned(),
        ),
        (
            pb::ApplyStoredFirmwareObjectRequest {
                nodes: None,
                ..refuse(&id)
            },
            "No nodes specified in request".to_owned(),
        ),
    ] {
        let resp = rms
            .client
            .clone()
            .apply_stored_firmware_object(req)
            .await
            .unwrap()
            .into_inner();
        let resp = resp.response.unwrap();
        assert_eq!(
            (resp.status, resp.message),
            (pb::ReturnCode::Failure as i32, expected)
        );
        assert!(resp.job_id.is_empty());
    }
    // A filter naming a component the object lacks refuses that node.
    let filtered = rms
        .client
        .clone()
        .apply_stored_firmware_object(pb::ApplyStoredFirmwareObjectRequest {
            component_filters: [(
                pb::NodeType::ComputeGb200Nvidia as i32,
                pb::FirmwareObjectComponentFilter {
                    components: vec!["CPLD".into()],
                },
            )]
            .into(),
            ..refuse(&id)
        })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert_eq!(filtered.status, pb::ReturnCode::Failure as i32);
    assert!(
        filtered.node_results.iter().all(|r| r
            .error_message
            .contains("component CPLD is not in firmware object")),
        "{filtered:?}"
    );
    rms.stop().await;
}

#[tokio::test]
async fn comparison_reports_missing_and_unverified_components_and_unreachable_nodes() {
    let rms = TestRms::start_with(|c| {
        c.nodes.sim.faults = failing("compute-09", SimOperation::Inventory);
    })
    .await;
    let json = serde_json::json!({
        "ProductName": HW, "Milestones": [{ "Name": "cmp", "BoardSKUs": [{ "Type": "Compute Node",
          "Components": { "Firmware": [
            { "Component": "BMC", "Version": "1.0.0" },
            { "Component": "BIOS" },
            { "Component": "CPLD", "Version": "3" } ] } }] }]
    })
    .to_string();
    let cmp = compare(
        &rms,
        &json,
        node_set(vec![
            node_info(RACK, "compute-01", pb::NodeType::ComputeGb200Nvidia),
            node_info(RACK, "compute-09", pb::NodeType::ComputeGb200Nvidia),
            node_info(RACK, "shelf-01", pb::NodeType::PowershelfGb200Liteon),
        ]),
    )
    .await;
    assert!(!cmp.matches_manifest);
    assert_eq!(cmp.nodes.len(), 1, "{cmp:?}");
    use pb::FirmwareComparisonStatus as S;
    assert_eq!(
        statuses(&cmp.nodes[0]),
        [
            ("BIOS".to_owned(), S::Unverified as i32),
            ("BMC".to_owned(), S::Matched as i32),
            ("CPLD".to_owned(), S::Missing as i32)
        ]
    );
    let results = cmp.response.unwrap().node_results;
    let shelf = results.iter().find(|r| r.node_id == "shelf-01").unwrap();
    assert!(
        shelf
            .error_message
            .contains("has no components for PowerShelf nodes"),
        "{shelf:?}"
    );
    assert!(!ok(results
        .iter()
        .find(|r| r.node_id == "compute-09")
        .unwrap()
        .status));
    let bad = compare(&rms, "[1]", node_set(vec![])).await;
    assert_eq!(
        bad.response.unwrap().message,
        "invalid config_json: config_json must be a JSON object"
    );
    rms.stop().await;
}

#[tokio::test]
async fn an_ephemeral_apply_fetches_runs_and_removes_its_cache() {
    let server = ArtifactServer::start().await;
    let rms = TestRms::start().await;
    let (id, json) = compute_object(&server, "eph", "3.0.0");
    let resp = rms
        .client
        .clone()
        .apply_firmware_object(pb::ApplyFirmwareObjectRequest {
            rack_id: RACK.into(),
            config_json: json.clone(),
            nodes: node_set(vec![node_info(
                RACK,
                "compute-05",
                pb::NodeType::ComputeGb200Nvidia,
            )]),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let response = resp.response.unwrap();
    assert!(ok(response.status), "{response:?}");
    assert_eq!(resp.object_id, id);
    let parent = rms.wait_terminal(&response.job_id).await;
    assert_eq!(
        parent.execution_state,
        pb::JobExecutionState::Completed as i32,
        "{parent:?}"
    );
    let node = node_set(vec![node_info(
        RACK,
        "compute-05",
        pb::NodeType::ComputeGb200Nvidia,
    )]);
    assert!(compare(&rms, &json, node).await.matches_manifest);
    // Nothing was stored, and the cache goes once the children ended.
    let listed = rms
        .client
        .clone()
        .list_firmware_objects(pb::ListFirmwareObjectsRequest::default())
        .await
        .unwrap();
    assert!(listed.into_inner().objects.is_empty());
    let cache_root = rms.firmware_dir.join("firmware_objects_ephemeral");
    wait_until(
        "the ephemeral cache to be removed",
        Duration::from_secs(10),
        Duration::from_millis(20),
        || {
            let root = cache_root.clone();
            async move {
                let empty = std::fs::read_dir(&root).map_or(true, |mut d| d.next().is_none());
                empty.then_some(())
            }
        },
        String::new,
    )
    .await;

    // A missing artifact fails the node's job, in its status.
    server.remove("eph/bios.fwpkg");
    let failing = rms
        .client
        .clone()
        .apply_firmware_object(pb::ApplyFirmwareObjectRequest {
            rack_id: RACK.into(),
            config_json: json,
            nodes: node_set(vec![node_info(
                RACK,
                "compute-06",
                pb::NodeType::ComputeGb200Nvidia,
            )]),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let child = &failing.jobs[0].job_id;
    let child = rms.wait_terminal(child).await;
    assert_eq!(child.execution_state, pb::JobExecutionState::Failed as i32);
    assert!(
        child
            .error_message
            .contains("firmware object artifacts unavailable"),
        "{child:?}"
    );
    let bad = rms
        .client
        .clone()
        .apply_firmware_object(pb::ApplyFirmwareObjectRequest {
            config_json: "{}".into(),
            nodes: node_set(vec![node_info(
                RACK,
                "compute-06",
                pb::NodeType::ComputeGb200Nvidia,
            )]),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert_eq!(
        bad.message,
        "invalid config_json: config_json must contain 'ProductName'"
    );
    rms.stop().await;
}

#[tokio::test]
async fn a_delete_waits_for_the_apply_and_the_catalogue_survives_a_restart() {
    let server = ArtifactServer::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let firmware_dir = dirs.path().join("firmware");
    let catalog_dir = dirs.path().join("catalog");
    let place = |c: &mut rackflow_rms::config::RmsConfig| {
        c.workflows.firmware_dir = firmware_dir.clone();
        c.workflows.catalog_dir = catalog_dir.clone();
    };
    let slow = |c: &mut rackflow_rms::config::RmsConfig| {
        place(c);
        c.nodes.sim.firmware_latency_ms = 1_500;
    };
    let rms = TestRms::start_with(slow).await;
    rms.register(RACK, &["compute-01"], pb::NodeType::ComputeGb200Nvidia)
        .await;
    let (id, json) = compute_object(&server, "keep", "4.0.0");
    add(&rms, &json, true).await.unwrap();
    assert!(settled(&rms, &id).await.available);
    let applied = rms
        .client
        .clone()
        .apply_stored_firmware_object(pb::ApplyStoredFirmwareObjectRequest {
            rack_id: RACK.into(),
            object_id: id.clone(),
            nodes: registered(RACK, &["compute-01"]),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    let refused = rms
        .client
        .clone()
        .delete_firmware_object(pb::DeleteFirmwareObjectRequest { id: id.clone() })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert_eq!(refused.status, pb::ReturnCode::Failure as i32);
    assert!(
        refused
            .message
            .contains(&format!("is in use by apply job {}", applied.job_id)),
        "{refused:?}"
    );
    rms.wait_terminal(&applied.job_id).await;
    rms.stop().await;

    // A new process on the same directories: object, default, history.
    let rms = TestRms::start_with(place).await;
    let object = get(&rms, &id).await;
    assert!(object.available && object.is_default, "{object:?}");
    let history = rms
        .client
        .clone()
        .get_firmware_object_history(pb::GetFirmwareObjectHistoryRequest {
            object_id: id.clone(),
            rack_ids: vec![],
        })
        .await
        .unwrap()
        .into_inner()
        .records;
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].node_ids, ["compute-01"]);
    // Files lost while it was down are fetched again.
    std::fs::remove_dir_all(firmware_dir.join("firmware_objects").join(&id)).unwrap();
    rms.stop().await;
    let rms = TestRms::start_with(place).await;
    let object = settled(&rms, &id).await;
    assert!(object.available, "{object:?}");
    assert!(
        firmware_dir
            .join("firmware_objects")
            .join(&id)
            .join("bmc.fwpkg")
            .is_file()
    );
    let deleted = rms
        .client
        .clone()
        .delete_firmware_object(pb::DeleteFirmwareObjectRequest { id: id.clone() })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert!(ok(deleted.status), "{deleted:?}");
    rms.stop().await;
}
