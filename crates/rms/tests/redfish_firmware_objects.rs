//! Issue 35 over the `redfish` back end, against the Redfish emulator (our
//! extension of sushy-tools, `crates/testkit/sushy_fw.py`, which serves
//! NVIDIA's tray-topology chassis block and a firmware inventory): device
//! info read from chassis resources, rack and batch inventories, and a
//! stored firmware object applied to a BMC, then compared.

// Test helpers may unwrap: the panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use rackflow_api::rack_manager as pb;
use rackflow_testkit::artifacts::{ArtifactServer, manifest};
use rackflow_testkit::redfish::{Emulator, Flavor, Options};
use rackflow_testkit::rms::TestRms;

const RACK: &str = "rack-rf";
const HW: &str = "GB200-NVL72";

fn ok(status: i32) -> bool {
    status == pb::ReturnCode::Success as i32
}

#[tokio::test]
async fn device_info_inventory_apply_and_compare_against_the_emulator() {
    let Some(tray) = Emulator::start(Options::new(Flavor::Firmware)).await else {
        return;
    };
    let mut plain = Options::new(Flavor::Firmware);
    plain.env = vec![("RACKFLOW_SLOT_NUMBER".into(), String::new())];
    let Some(plain) = Emulator::start(plain).await else {
        return;
    };
    let server = ArtifactServer::start().await;
    let rms = TestRms::start_redfish(&[]).await;
    let mut client = rms.client.clone();
    let nodes = vec![
        tray.node_info(RACK, "compute-03", pb::NodeType::ComputeGb200Nvidia),
        plain.node_info(RACK, "compute-04", pb::NodeType::ComputeGb200Nvidia),
    ];
    let created = client
        .create_nodes(pb::CreateNodesRequest {
            nodes: Some(pb::NodeSet {
                nodes: nodes.clone(),
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ok(created.response.unwrap().status));

    // The NVIDIA block on one BMC, nothing on the other.
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
    let details: Vec<_> = listed
        .node_device_details
        .iter()
        .map(|d| {
            (
                d.node_id.as_str(),
                d.chassis_sn,
                d.slot_number,
                d.tray_index,
            )
        })
        .collect();
    assert_eq!(
        details,
        [
            ("compute-03", Some(1_821_220_000_000), Some(7), Some(3)),
            ("compute-04", None, None, None)
        ]
    );
    let batch = client
        .batch_get_node_device_info(pb::BatchGetNodeDeviceInfoRequest {
            nodes: Some(pb::NodeSet {
                nodes: nodes[..1].to_vec(),
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(batch.node_device_details[0].tray_index, Some(3));

    // Inventories: the emulator starts at BMC 1.0.0, BIOS 0.9.0.
    let inventory = client
        .batch_get_firmware_inventory(pb::BatchGetFirmwareInventoryRequest {
            nodes: Some(pb::NodeSet {
                nodes: nodes.clone(),
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ok(inventory.response.unwrap().status));
    let bmc: Vec<_> = inventory
        .nodes
        .iter()
        .map(|n| {
            n.firmware_list
                .iter()
                .find(|f| f.name.contains("BMC") || f.target.ends_with("/BMC"))
                .map(|f| f.version.clone())
                .unwrap()
        })
        .collect();
    assert_eq!(bmc, ["1.0.0", "1.0.0"]);

    // A stored object with BMC 2.5.0, applied to the first tray.
    let image = b"version=2.5.0\ncomponent=BMC\n";
    let (url, sha) = server.put("rf/bmc-2.5.0.fwpkg", image);
    let json = manifest(
        HW,
        "rf",
        &[("Compute Node", &[("BMC", "2.5.0", &url, &sha)])],
    );
    let id = format!("{HW}_rf");
    client
        .add_firmware_object(pb::AddFirmwareObjectRequest {
            config_json: json.clone(),
            access_token: None,
            hardware_type: HW.into(),
            set_default: true,
        })
        .await
        .unwrap();
    let object = rackflow_testkit::rms::settled_object(&client, &id).await;
    assert!(object.available, "{object:?}");
    let only_first = Some(pb::NodeSet {
        nodes: vec![pb::NodeInfo {
            node_id: "compute-03".into(),
            rack_id: RACK.into(),
            ..Default::default()
        }],
    });
    let applied = client
        .apply_stored_firmware_object(pb::ApplyStoredFirmwareObjectRequest {
            rack_id: RACK.into(),
            object_id: id.clone(),
            nodes: only_first,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let response = applied.response.unwrap();
    assert!(ok(response.status), "{response:?}");
    let done = rackflow_testkit::rms::wait_job_terminal(
        &mut client,
        &response.job_id,
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        done.execution_state,
        pb::JobExecutionState::Completed as i32,
        "{done:?}"
    );

    let compared = client
        .compare_firmware_object(pb::CompareFirmwareObjectRequest {
            config_json: json.clone(),
            nodes: Some(pb::NodeSet {
                nodes: nodes.clone(),
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let by_node: Vec<_> = compared
        .nodes
        .iter()
        .map(|n| {
            (
                n.node_id.as_str(),
                n.matches_manifest,
                n.components[0].installed_version.as_str(),
            )
        })
        .collect();
    assert_eq!(
        by_node,
        [
            ("compute-03", true, "2.5.0"),
            ("compute-04", false, "1.0.0")
        ]
    );
    assert!(!compared.matches_manifest);

    // An ephemeral apply of the same manifest to the other BMC (named by
    // its registration: these emulators take no credentials, which an
    // ephemeral node would need).
    let ephemeral = client
        .apply_firmware_object(pb::ApplyFirmwareObjectRequest {
            rack_id: RACK.into(),
            config_json: json.clone(),
            nodes: Some(pb::NodeSet {
                nodes: vec![pb::NodeInfo {
                    node_id: "compute-04".into(),
                    rack_id: RACK.into(),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert!(ok(ephemeral.status), "{ephemeral:?}");
    let done = rackflow_testkit::rms::wait_job_terminal(
        &mut client,
        &ephemeral.job_id,
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        done.execution_state,
        pb::JobExecutionState::Completed as i32,
        "{done:?}"
    );
    let compared = client
        .compare_firmware_object(pb::CompareFirmwareObjectRequest {
            config_json: json.clone(),
            nodes: Some(pb::NodeSet {
                nodes: nodes.clone(),
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(compared.matches_manifest, "{compared:?}");

    // UpdateNode points compute-04 at the other BMC: its device info follows.
    let moved = client
        .update_node(pb::UpdateNodeRequest {
            node_id: "compute-04".into(),
            rack_id: RACK.into(),
            update_info: Some(pb::NodeUpdateInfo {
                bmc_endpoint: nodes[0].bmc_endpoint.clone(),
                host_endpoint: None,
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert!(ok(moved.status), "{moved:?}");
    let info = client
        .get_node_device_info(pb::GetNodeDeviceInfoRequest {
            rack_id: RACK.into(),
            node_id: "compute-04".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ok(info.status), "{info:?}");
    assert_eq!(info.device_info.unwrap().slot_number, Some(7));

    let rack = client
        .get_rack_firmware_inventory(pb::GetRackFirmwareInventoryRequest {
            rack_id: RACK.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ok(rack.status));
    assert_eq!(rack.nodes.len(), 2);
    rms.stop().await;
}
