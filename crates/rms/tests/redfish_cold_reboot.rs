//! `ExecuteColdReboot` over the `redfish` back end against emulated BMCs: a
//! power shelf, a compute tray and a switch tray, each a sushy-tools
//! emulator (our extension `crates/testkit/sushy_fw.py`) on its own loopback
//! port. The extension's rack power (a shared file) makes the shelf feed
//! the trays: while the shelf is off the trays' BMCs answer 503, and they
//! come back with their host off. The reboot must complete in runbook
//! order, read from the emulators' own reset logs.
//!
//! sushy applies each power change 1–11 s after the request, so one reboot
//! takes up to ~60 s. Skipped with a message when sushy-tools is missing,
//! failed when `CI` is set.

use std::net::SocketAddr;
use std::time::Duration;

use rackflow_api::rack_manager as pb;
use rackflow_testkit::redfish::{Emulator, Flavor, Options};
use rackflow_testkit::rms::{TestRms, wait_job_terminal};

const RACK: &str = "rack-rf-cr";

/// The three BMCs sharing the rack-power file `power`; `None` when skipped.
async fn start_bmcs(power: &std::path::Path) -> Option<[Emulator; 3]> {
    let start = |role: &str| {
        let mut options = Options::new(Flavor::Firmware);
        options.env = vec![
            (
                "RACKFLOW_RACK_POWER".to_owned(),
                power.to_str().expect("utf-8 path").to_owned(),
            ),
            ("RACKFLOW_RACK_ROLE".to_owned(), role.to_owned()),
        ];
        Emulator::start(options)
    };
    let (shelf, compute, switch) = tokio::join!(start("shelf"), start("tray"), start("tray"));
    Some([shelf?, compute?, switch?])
}

fn addr(emulator: &Emulator) -> SocketAddr {
    emulator
        .base_url
        .strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .expect("emulator address")
}

fn node(id: &str, node_type: pb::NodeType, bmc: &Emulator) -> pb::NodeInfo {
    let bmc = addr(bmc);
    pb::NodeInfo {
        node_id: id.to_owned(),
        rack_id: RACK.to_owned(),
        r#type: Some(node_type as i32),
        bmc_endpoint: Some(pb::Endpoint {
            interface: Some(pb::NetworkInterface {
                ip_address: bmc.ip().to_string(),
                mac_address: "aa:bb:cc:dd:ee:01".to_owned(),
                host_name: None,
            }),
            port: u32::from(bmc.port()),
            credentials: None,
        }),
        ..Default::default()
    }
}

async fn resets(emulator: &Emulator) -> Vec<(f64, String)> {
    emulator.resets().await
}

async fn refused_unpowered(emulator: &Emulator) -> u64 {
    let body: serde_json::Value = reqwest::get(format!("{}/rackflow/power", emulator.base_url))
        .await
        .expect("power log")
        .json()
        .await
        .expect("power log JSON");
    body["refused"].as_u64().expect("refused")
}

#[tokio::test]
async fn a_cold_reboot_power_cycles_emulated_bmcs_in_runbook_order() {
    let power = std::env::temp_dir().join(format!("rack-power-{}", uuid::Uuid::new_v4()));
    let Some([shelf, compute, switch]) = start_bmcs(&power).await else {
        return;
    };
    let rms = TestRms::start_redfish(&[]).await;
    let mut client = rms.client.clone();
    let nodes = vec![
        node("ps-0", pb::NodeType::PowershelfGb200Liteon, &shelf),
        node("c-0", pb::NodeType::ComputeGb200Nvidia, &compute),
        node("sw-0", pb::NodeType::SwitchGb200Nvidia, &switch),
    ];
    // The rack runs before the reboot: the shelf, then the compute tray on.
    for node in &nodes[..2] {
        let on = client
            .batch_set_power_state(pb::BatchSetPowerStateRequest {
                nodes: Some(pb::NodeSet {
                    nodes: vec![node.clone()],
                }),
                operation: pb::PowerOperation::On as i32,
            })
            .await
            .expect("power on")
            .into_inner()
            .response
            .expect("response");
        assert_eq!(on.status, pb::ReturnCode::Success as i32, "{on:?}");
    }

    let started = client
        .execute_cold_reboot(pb::ExecuteColdRebootRequest {
            nodes: Some(pb::NodeSet { nodes }),
            domain: None,
            prestage_shutdown_floor_seconds: None,
            prestage_shutdown_poll_max_seconds: Some(40),
            discharge_floor_seconds: Some(1),
            discharge_poll_max_seconds: Some(40),
            bmc_up_floor_seconds: Some(1),
            bmc_up_poll_max_seconds: Some(40),
            nvos_hello_backoff_seconds: Some(1),
            compute_boot_wait_seconds: Some(1),
            poll_interval_seconds: Some(1),
        })
        .await
        .expect("ExecuteColdReboot")
        .into_inner()
        .response
        .expect("response");
    assert_eq!(
        started.status,
        pb::ReturnCode::Success as i32,
        "{started:?}"
    );
    let done = wait_job_terminal(&mut client, &started.job_id, Duration::from_secs(150)).await;
    assert_eq!(
        done.execution_state,
        pb::JobExecutionState::Completed as i32,
        "{done:?}\nshelf: {}\ncompute: {}",
        shelf.log(),
        compute.log()
    );

    // The BMCs' own logs: compute shut down, shelf off, shelf on, compute on.
    let compute_resets = resets(&compute).await;
    let shelf_resets = resets(&shelf).await;
    let types = |r: &[(f64, String)]| r.iter().map(|(_, t)| t.clone()).collect::<Vec<_>>();
    assert_eq!(
        types(&compute_resets),
        ["On", "GracefulShutdown", "On"],
        "{compute_resets:?}"
    );
    assert_eq!(
        types(&shelf_resets),
        ["On", "ForceOff", "On"],
        "{shelf_resets:?}"
    );
    assert!(compute_resets[1].0 < shelf_resets[1].0);
    assert!(shelf_resets[1].0 < shelf_resets[2].0);
    assert!(shelf_resets[2].0 < compute_resets[2].0);
    assert!(resets(&switch).await.is_empty(), "switches are not reset");
    // Both trays were seen without power, and came back.
    assert!(refused_unpowered(&compute).await > 0);
    assert!(refused_unpowered(&switch).await > 0);
    let timeline: serde_json::Value = serde_json::from_str(&done.result_json).expect("timeline");
    assert!(
        timeline["stages"]
            .as_array()
            .expect("stages")
            .iter()
            .all(|s| s["status"] == "completed"),
        "{timeline:#}"
    );
    rms.stop().await;
    let _ = std::fs::remove_file(&power);
}
