//! `rackflow.rms.v1.RackManagerExtensions/ListLeakDetectors` through a real
//! rack manager: on the sim back end (request shapes, errors beside
//! readings) and on the `redfish` back end against emulated BMCs whose
//! chassis expose `ThermalSubsystem/LeakDetection/LeakDetectors` (our
//! extension `crates/testkit/sushy_fw.py`). The Redfish test is skipped with
//! a message when sushy-tools is missing, failed when `CI` is set.

use rackflow_api::rack_manager::NodeType;
use rackflow_api::rms_ext::v1 as ext;
use rackflow_rms::backend::DetectorState;
use rackflow_rms::backend::sim::{SimFaultEffect, SimNodeFault, SimOperation};
use rackflow_testkit::redfish::{Emulator, Flavor, Options};
use rackflow_testkit::rms::TestRms;

const RACK: &str = "rack-leak";

async fn list(rms: &TestRms, rack_id: &str, node_ids: &[&str]) -> Vec<ext::NodeLeakDetectors> {
    rms.extensions
        .clone()
        .list_leak_detectors(ext::ListLeakDetectorsRequest {
            rack_id: rack_id.to_owned(),
            node_ids: node_ids.iter().map(|n| (*n).to_owned()).collect(),
        })
        .await
        .expect("ListLeakDetectors")
        .into_inner()
        .nodes
}

fn states(node: &ext::NodeLeakDetectors) -> Vec<(String, i32)> {
    node.detectors
        .iter()
        .map(|d| (d.id.clone(), d.state))
        .collect()
}

const OK: i32 = ext::LeakDetectorState::Ok as i32;
const CRITICAL: i32 = ext::LeakDetectorState::Critical as i32;
const WARNING: i32 = ext::LeakDetectorState::Warning as i32;

#[tokio::test]
async fn the_sim_answers_every_registered_node_and_errors_beside_readings() {
    let rms = TestRms::start().await;
    rms.register(RACK, &["c-0", "c-1"], NodeType::ComputeGb200Nvidia)
        .await;
    rms.register(RACK, &["ps-0"], NodeType::PowershelfGb200Liteon)
        .await;
    rms.register("rack-other", &["c-9"], NodeType::ComputeGb300Nvidia)
        .await;
    rms.sim().set_leak("c-1", DetectorState::Critical);

    // Every node of every rack, in rack then node order.
    let all = list(&rms, "", &[]).await;
    let ids: Vec<(&str, &str)> = all
        .iter()
        .map(|n| (n.rack_id.as_str(), n.node_id.as_str()))
        .collect();
    assert_eq!(
        ids,
        [
            (RACK, "c-0"),
            (RACK, "c-1"),
            (RACK, "ps-0"),
            ("rack-other", "c-9")
        ]
    );
    assert!(all[0].supported && all[0].error.is_empty(), "{:?}", all[0]);
    assert_eq!(states(&all[0]), [("ColdPlate".to_owned(), OK)]);
    assert_eq!(states(&all[1]), [("ColdPlate".to_owned(), CRITICAL)]);
    assert_eq!(all[1].detectors[0].chassis_id, "Tray");
    // A power shelf exposes no leak detection: not an error.
    assert!(!all[2].supported && all[2].detectors.is_empty() && all[2].error.is_empty());

    // Filters: a rack; nodes of it, one unregistered.
    let rack = list(&rms, RACK, &[]).await;
    assert_eq!(rack.len(), 3);
    let some = list(&rms, RACK, &["c-1", "c-9", "c-1"]).await;
    assert_eq!(some.len(), 2, "{some:?}");
    assert_eq!(some[0].node_id, "c-1");
    assert_eq!(states(&some[0]), [("ColdPlate".to_owned(), CRITICAL)]);
    assert_eq!(some[1].node_id, "c-9");
    assert_eq!(
        some[1].error,
        format!("node c-9 is not registered in rack {RACK}")
    );
    let anywhere = list(&rms, "", &["c-9"]).await;
    assert!(anywhere[0].error.is_empty() && anywhere[0].supported);

    // One unreadable BMC does not hide its neighbour's leak.
    rms.sim().set_faults(vec![SimNodeFault {
        node_id: "c-0".into(),
        rack_id: None,
        operation: SimOperation::Leak,
        effect: SimFaultEffect::Fail,
    }]);
    let faulty = list(&rms, RACK, &[]).await;
    assert!(
        faulty[0]
            .error
            .contains("sim fault: leak_detectors failed on node c-0"),
        "{:?}",
        faulty[0]
    );
    assert!(!faulty[0].supported);
    assert_eq!(states(&faulty[1]), [("ColdPlate".to_owned(), CRITICAL)]);
    rms.sim().set_faults(Vec::new());
    rms.sim().set_leak("c-1", DetectorState::Ok);
    assert_eq!(states(&list(&rms, RACK, &["c-1"]).await[0])[0].1, OK);

    // Refusals.
    let mut client = rms.extensions.clone();
    let unknown_rack = client
        .list_leak_detectors(ext::ListLeakDetectorsRequest {
            rack_id: "rack-nope".into(),
            node_ids: Vec::new(),
        })
        .await
        .expect_err("unknown rack");
    assert_eq!(unknown_rack.code(), tonic::Code::NotFound);
    assert_eq!(unknown_rack.message(), "rack rack-nope is not registered");
    let empty_id = client
        .list_leak_detectors(ext::ListLeakDetectorsRequest {
            rack_id: String::new(),
            node_ids: vec!["c-0".into(), " ".into()],
        })
        .await
        .expect_err("empty id");
    assert_eq!(empty_id.code(), tonic::Code::InvalidArgument);
    rms.stop().await;
}

#[tokio::test]
async fn the_redfish_back_end_reads_the_bmcs_leak_detectors() {
    let Some(wet) = Emulator::start(Options::new(Flavor::Firmware)).await else {
        return;
    };
    let mut options = Options::new(Flavor::Firmware);
    options.env = vec![("RACKFLOW_LEAK_DETECTORS".into(), String::new())];
    let Some(without) = Emulator::start(options).await else {
        return;
    };
    let rms = TestRms::start_redfish(&[]).await;
    let mut nodes = vec![
        wet.node_info(RACK, "c-0", NodeType::ComputeGb200Nvidia),
        without.node_info(RACK, "c-1", NodeType::ComputeGb200Nvidia),
    ];
    // A BMC nobody answers for.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let dead_port = dead.local_addr().expect("addr").port();
    drop(dead);
    let mut unreachable = wet.node_info(RACK, "c-2", NodeType::ComputeGb200Nvidia);
    if let Some(endpoint) = unreachable.bmc_endpoint.as_mut() {
        endpoint.port = u32::from(dead_port);
    }
    nodes.push(unreachable);
    let created = rms
        .client
        .clone()
        .create_nodes(rackflow_api::rack_manager::CreateNodesRequest {
            nodes: Some(rackflow_api::rack_manager::NodeSet { nodes }),
        })
        .await
        .expect("CreateNodes")
        .into_inner();
    assert_eq!(
        created.response.expect("response").status,
        rackflow_api::rack_manager::ReturnCode::Success as i32
    );

    let dry = list(&rms, RACK, &[]).await;
    assert_eq!(dry.len(), 3, "{dry:?}");
    assert!(dry[0].supported && dry[0].error.is_empty(), "{:?}", dry[0]);
    assert_eq!(
        states(&dry[0]),
        [("ColdPlate".to_owned(), OK), ("Manifold".to_owned(), OK)]
    );
    let detector = &dry[0].detectors[0];
    assert_eq!(detector.detector_type, "Moisture");
    assert!(
        detector.uri.starts_with("/redfish/v1/Chassis/")
            && detector
                .uri
                .ends_with("/ThermalSubsystem/LeakDetection/LeakDetectors/ColdPlate"),
        "{detector:?}"
    );
    assert!(!detector.chassis_id.is_empty());
    // A BMC without leak detection, and one that does not answer.
    assert!(!dry[1].supported && dry[1].error.is_empty(), "{:?}", dry[1]);
    assert!(!dry[2].error.is_empty(), "{:?}", dry[2]);

    wet.set_leak("Manifold", "Critical").await;
    wet.set_leak("ColdPlate", "Warning").await;
    let leaking = list(&rms, RACK, &["c-0"]).await;
    assert_eq!(
        states(&leaking[0]),
        [
            ("ColdPlate".to_owned(), WARNING),
            ("Manifold".to_owned(), CRITICAL)
        ]
    );
    wet.set_leak("Manifold", "OK").await;
    wet.set_leak("ColdPlate", "OK").await;
    let dried = list(&rms, RACK, &["c-0"]).await;
    assert!(
        dried[0].detectors.iter().all(|d| d.state == OK),
        "{dried:?}"
    );
    rms.stop().await;
}
