//! Flow → rack manager → emulated BMCs, end to end (issue 5 item 4, Redfish
//! variant of `rms_e2e.rs`).
//!
//! Every component of the fixture rack gets its own emulated BMC: a
//! sushy-tools emulator (`sushy-emulator --fake` plus our firmware
//! extension `crates/testkit/sushy_fw.py`, with basic auth) on a
//! free loopback port. A rack manager with the `redfish` back end has the
//! components registered as nodes pointing at those BMCs; a Flow server with
//! `provider = "rms"` drives it. A firmware-upgrade task and a power-on task
//! go through Flow's gRPC API and must complete, and the BMCs themselves
//! (read over Redfish, not through rackflow) must show the new firmware
//! version and power On.
//!
//! Runs on both stores. sushy applies a power change after a random 1–11 s
//! and Flow powers the rack's components on one by one, so each store's
//! run takes up to ~45 s in the worst case. Skipped with a message when
//! sushy-tools is missing, failed when `CI` is set.

use rackflow_testkit as common;
use rackflow_testkit::both_stores;
use rackflow_testkit::redfish as support;

use std::time::Duration;

use common::{Backend, TestServer, fixture_fleet, fixture_id, uuid};
use rackflow_api::rack_manager as rmpb;
use rackflow_api::v1 as pb;
use rackflow_rms::redfish::{Credentials, PowerState, RedfishNode};
use rackflow_server::Config;
use rackflow_server::config::Provider;
use rackflow_testkit::rms::TestRms;
use support::{Emulator, Flavor, Options, fast_config};
use uuid::Uuid;

both_stores!(
    firmware_upgrade_and_power_on_through_the_rack_manager_and_redfish,
    a_bundle_rolls_a_gb200_and_a_gb300_rack_out_over_redfish_and_a_rerun_skips,
);

/// Power-on of four components, each up to 11 s on sushy, plus firmware.
const DEADLINE: Duration = Duration::from_secs(120);
/// The fixture rack (`r-0001`: 2 compute trays, 1 NVSwitch, 1 power shelf).
const RACK: &str = "r-0001";
const NODES: [(&str, rmpb::NodeType); 4] = [
    ("r-0001-compute-00", rmpb::NodeType::ComputeGb200Nvidia),
    ("r-0001-compute-01", rmpb::NodeType::ComputeGb200Nvidia),
    ("r-0001-nvswitch-00", rmpb::NodeType::SwitchGb200Nvidia),
    (
        "r-0001-powershelf-00",
        rmpb::NodeType::PowershelfGb200Liteon,
    ),
];
const USER: &str = "e2e-admin";
const PASSWORD: &str = "e2e-Secret-7";

/// One emulated BMC per node (started together: each is a python process).
async fn start_bmcs() -> Option<Vec<Emulator>> {
    let start = || {
        let mut options = Options::new(Flavor::Firmware);
        options.auth = Some((USER.into(), PASSWORD.into()));
        Emulator::start(options)
    };
    let (a, b, c, d) = tokio::join!(start(), start(), start(), start());
    Some(vec![a?, b?, c?, d?])
}

fn bmc_addr(emulator: &Emulator) -> std::net::SocketAddr {
    emulator
        .base_url
        .strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .expect("emulator address")
}

/// The BMC read directly over Redfish (the check does not trust rackflow).
fn bmc_node(emulator: &Emulator) -> RedfishNode {
    RedfishNode::new(emulator.client(Some(Credentials::new(USER, PASSWORD)), fast_config()))
}

async fn start_rms(bmcs: &[Emulator]) -> TestRms {
    // Images in the extension's format: the task installs `version=` on
    // the BMC's own component (the request's target is package-derived).
    let image = &b"version=2.0.0\n"[..];
    let rms = start_redfish_rms(&[
        ("compute-2.0.0.fwpkg", image),
        ("nvswitch-2.0.0.fwpkg", image),
        ("powershelf-2.0.0.fwpkg", image),
    ])
    .await;
    let nodes: Vec<(&str, &str, rmpb::NodeType)> =
        NODES.iter().map(|(node, ty)| (RACK, *node, *ty)).collect();
    register(&rms, &nodes, bmcs).await;
    rms
}

/// A rack manager on the `redfish` back end with `images`, no node yet.
async fn start_redfish_rms(images: &[(&str, &[u8])]) -> TestRms {
    TestRms::start_redfish(images).await
}

/// Registers `(rack, node, type)` nodes, each at its emulated BMC.
async fn register(rms: &TestRms, nodes: &[(&str, &str, rmpb::NodeType)], bmcs: &[Emulator]) {
    let mut client = rms.client.clone();
    let nodes: Vec<rmpb::NodeInfo> = nodes
        .iter()
        .zip(bmcs)
        .map(|((rack, node, ty), bmc)| {
            let bmc = bmc_addr(bmc);
            rmpb::NodeInfo {
                node_id: (*node).to_owned(),
                rack_id: (*rack).to_owned(),
                r#type: Some(*ty as i32),
                bmc_endpoint: Some(rmpb::Endpoint {
                    interface: Some(rmpb::NetworkInterface {
                        ip_address: bmc.ip().to_string(),
                        ..Default::default()
                    }),
                    port: u32::from(bmc.port()),
                    credentials: Some(rmpb::Credentials {
                        auth: Some(rmpb::credentials::Auth::UserPass(rmpb::UsernamePassword {
                            username: USER.into(),
                            password: PASSWORD.into(),
                        })),
                    }),
                }),
                ..Default::default()
            }
        })
        .collect();
    let count = u32::try_from(nodes.len()).expect("few nodes");
    let created = client
        .create_nodes(rmpb::CreateNodesRequest {
            nodes: Some(rmpb::NodeSet { nodes }),
        })
        .await
        .expect("CreateNodes")
        .into_inner();
    assert_eq!(created.stats.expect("stats").successful_nodes, count);
}

/// Waits for the task to finish (re-read on each store write) and checks it
/// completed.
async fn wait_completed(flow: &mut TestServer, id: Uuid, bmcs: &[Emulator]) -> pb::Task {
    let mut changes = flow.waiter(format!("task {id} to finish"), DEADLINE);
    loop {
        let t = flow
            .client
            .get_tasks_by_i_ds(pb::GetTasksByIDsRequest {
                task_ids: vec![uuid(id)],
            })
            .await
            .expect("get task")
            .into_inner()
            .tasks
            .remove(0);
        if t.finished_at.is_some() && t.status != pb::TaskStatus::Waiting as i32 {
            assert_eq!(
                t.status,
                pb::TaskStatus::Completed as i32,
                "task {id}: {t:#?}\nfirst BMC log:\n{}",
                bmcs[0].log()
            );
            return t;
        }
        changes.next(&t).await;
    }
}

fn whole_rack() -> pb::OperationTargetSpec {
    pb::OperationTargetSpec {
        targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
            targets: vec![pb::RackTarget {
                identifier: Some(pb::rack_target::Identifier::Id(uuid(fixture_id(1)))),
                component_types: Vec::new(),
            }],
        })),
    }
}

fn task_id(reply: pb::SubmitTaskResponse) -> Uuid {
    assert_eq!(reply.task_ids.len(), 1, "one task for one rack");
    Uuid::parse_str(&reply.task_ids[0].id).expect("task id")
}

async fn bmc_version(bmc: &Emulator) -> String {
    bmc_node(bmc)
        .firmware_inventory()
        .await
        .expect("inventory")
        .into_iter()
        .find(|c| c.id == "BMC")
        .map(|c| c.version)
        .expect("BMC component")
}

async fn firmware_upgrade_and_power_on_through_the_rack_manager_and_redfish(backend: Backend) {
    let Some(bmcs) = start_bmcs().await else {
        return;
    };
    let rms = start_rms(&bmcs).await;
    let mut config = Config::default();
    config.dispatcher.enabled = false;
    config.provider = Provider::Rms;
    config.rms.address = format!("http://{}", rms.addr);
    config.rms.poll_interval_ms = 50;
    config.rms.job_timeout_secs = 60;
    let Some(mut flow) = TestServer::start_with(backend, config).await else {
        return;
    };
    fixture_fleet(&mut flow.client, 1).await;

    for bmc in &bmcs {
        assert_eq!(bmc_version(bmc).await, "1.0.0", "fresh emulator");
        assert_eq!(
            bmc_node(bmc).power_state().await.expect("power"),
            PowerState::Off
        );
    }

    // Firmware: the built-in rule updates the compute trays, then the
    // NVSwitch; each gets its type's 2.0.0 image pushed to its BMC.
    let reply = flow
        .client
        .upgrade_firmware(pb::UpgradeFirmwareRequest {
            target_spec: Some(whole_rack()),
            target_version: Some("2.0.0".into()),
            ..Default::default()
        })
        .await
        .expect("UpgradeFirmware")
        .into_inner();
    wait_completed(&mut flow, task_id(reply), &bmcs).await;
    for ((node, _), bmc) in NODES.iter().zip(&bmcs).take(3) {
        assert_eq!(bmc_version(bmc).await, "2.0.0", "{node}");
    }
    assert_eq!(
        bmc_version(&bmcs[3]).await,
        "1.0.0",
        "the firmware rule leaves the power shelf alone"
    );

    // Power on: every BMC reports On afterwards.
    let reply = flow
        .client
        .power_on_rack(pb::PowerOnRackRequest {
            target_spec: Some(whole_rack()),
            ..Default::default()
        })
        .await
        .expect("PowerOnRack")
        .into_inner();
    wait_completed(&mut flow, task_id(reply), &bmcs).await;
    for ((node, _), bmc) in NODES.iter().zip(&bmcs) {
        assert_eq!(
            bmc_node(bmc).power_state().await.expect("power"),
            PowerState::On,
            "{node}"
        );
    }

    flow.stop().await;
    rms.stop().await;
}

/// Issue 12, acceptance over Redfish: a firmware bundle gives a GB200 rack
/// and a GB300 rack each its model's compute and NVSwitch versions; the
/// rack manager pushes each image to its emulated BMC; afterwards the BMCs
/// (read over Redfish, not through rackflow) and Flow's inventory (observed
/// during the task) show those versions; the same rollout again sends
/// nothing and reports every component skipped.
async fn a_bundle_rolls_a_gb200_and_a_gb300_rack_out_over_redfish_and_a_rerun_skips(
    backend: Backend,
) {
    let Some(bmcs) = start_bmcs().await else {
        return;
    };
    let image = |v: &str| format!("version={v}\n").into_bytes();
    let (c2, s2, c3, s3) = (
        image("2.0.0"),
        image("2.1.0"),
        image("3.0.0"),
        image("3.1.0"),
    );
    let rms = start_redfish_rms(&[
        ("compute-2.0.0.fwpkg", &c2[..]),
        ("nvswitch-2.1.0.fwpkg", &s2[..]),
        ("compute-3.0.0.fwpkg", &c3[..]),
        ("nvswitch-3.1.0.fwpkg", &s3[..]),
        // A bad image: named 2.5.0, it installs 2.0.0.
        ("compute-2.5.0.fwpkg", &c2[..]),
    ])
    .await;
    // Rack 1 (GB200) and rack 2 (GB300): one compute tray and one NVSwitch
    // each on an emulated BMC; the power shelves are not flashed.
    let nodes = [
        (
            "r-0001",
            "r-0001-compute-00",
            rmpb::NodeType::ComputeGb200Nvidia,
        ),
        (
            "r-0001",
            "r-0001-nvswitch-00",
            rmpb::NodeType::SwitchGb200Nvidia,
        ),
        (
            "r-0002",
            "r-0002-compute-00",
            rmpb::NodeType::ComputeGb300Nvidia,
        ),
        (
            "r-0002",
            "r-0002-nvswitch-00",
            rmpb::NodeType::SwitchGb300Nvidia,
        ),
    ];
    register(&rms, &nodes, &bmcs).await;
    let mut config = Config::default();
    config.dispatcher.enabled = false;
    config.provider = Provider::Rms;
    config.rms.address = format!("http://{}", rms.addr);
    config.rms.poll_interval_ms = 50;
    config.rms.job_timeout_secs = 60;
    let Some(mut flow) = TestServer::start_with(backend, config).await else {
        return;
    };
    for n in [1, 2] {
        let mut rack = common::rack(n, Some(fixture_id(n)), 1);
        if n == 2
            && let Some(info) = rack.info.as_mut()
        {
            info.model = Some("GB300 NVL72".into());
        }
        flow.client
            .create_expected_rack(pb::CreateExpectedRackRequest { rack: Some(rack) })
            .await
            .expect("create rack");
    }
    let entry = |model: &str, ty: pb::ComponentType, version: &str| pb::FirmwareBundleEntry {
        rack_model: model.into(),
        component_type: ty as i32,
        version: version.into(),
    };
    let bundle = pb::FirmwareBundle {
        name: "redfish-e2e".into(),
        entries: vec![
            entry("GB200 NVL72", pb::ComponentType::Compute, "2.0.0"),
            entry("GB200 NVL72", pb::ComponentType::Nvswitch, "2.1.0"),
            entry("GB300 NVL72", pb::ComponentType::Compute, "3.0.0"),
            entry("GB300 NVL72", pb::ComponentType::Nvswitch, "3.1.0"),
        ],
    };
    let both = pb::OperationTargetSpec {
        targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
            targets: [1, 2]
                .map(|n| pb::RackTarget {
                    identifier: Some(pb::rack_target::Identifier::Id(uuid(fixture_id(n)))),
                    component_types: Vec::new(),
                })
                .to_vec(),
        })),
    };
    let rollout = |flow: &mut TestServer| {
        let request = pb::UpgradeFirmwareRequest {
            target_spec: Some(both.clone()),
            firmware_bundle: Some(bundle.clone()),
            ..Default::default()
        };
        let mut client = flow.client.clone();
        async move {
            client
                .upgrade_firmware(request)
                .await
                .expect("UpgradeFirmware")
                .into_inner()
                .task_ids
        }
    };
    let outcomes = |t: &pb::Task| -> Vec<(String, String)> {
        let report: serde_json::Value = serde_json::from_str(&t.report).expect("report");
        let mut out = Vec::new();
        for stage in report["stages"].as_array().into_iter().flatten() {
            for step in stage["steps"].as_array().into_iter().flatten() {
                for c in step["components"].as_array().into_iter().flatten() {
                    out.push((
                        c["component"].as_str().unwrap_or_default().to_string(),
                        c["status"].as_str().unwrap_or_default().to_string(),
                    ));
                }
            }
        }
        out.sort();
        out
    };

    let mut started = Vec::new();
    for id in rollout(&mut flow).await {
        let t = wait_completed(&mut flow, Uuid::parse_str(&id.id).expect("id"), &bmcs).await;
        assert!(
            outcomes(&t).iter().all(|(_, st)| st == "completed"),
            "{t:#?}"
        );
        started.push(t.started_at.expect("started"));
    }
    let want = ["2.0.0", "2.1.0", "3.0.0", "3.1.0"];
    for (((_, node, _), bmc), version) in nodes.iter().zip(&bmcs).zip(want) {
        assert_eq!(bmc_version(bmc).await, version, "{node} over Redfish");
    }
    let earliest = started.iter().map(|t| t.seconds).min().unwrap_or_default();
    for n in [1, 2] {
        let components = flow
            .client
            .get_components(pb::GetComponentsRequest {
                target_spec: Some(common::whole_rack(n)),
                ..Default::default()
            })
            .await
            .expect("GetComponents")
            .into_inner()
            .components;
        for (((_, node, _), _), version) in nodes.iter().zip(&bmcs).zip(want) {
            if let Some(c) = components.iter().find(|c| c.component_id == *node) {
                assert_eq!(c.firmware_version, version, "{node} in Flow");
                let observed = c.firmware_observed_at.as_ref().expect("observed");
                assert!(
                    observed.seconds >= earliest,
                    "{node} observed during the rollout"
                );
            }
        }
    }

    // The same rollout again: every component already runs its version.
    for id in rollout(&mut flow).await {
        let t = wait_completed(&mut flow, Uuid::parse_str(&id.id).expect("id"), &bmcs).await;
        let seen = outcomes(&t);
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(seen.iter().all(|(_, st)| st == "skipped"), "{seen:?}");
    }

    // A tray whose firmware silently stays old fails with expected and
    // found versions (one attempt: the default rule would retry).
    common::create_fast_firmware_rule(&mut flow.client, &["Compute"], "50ms").await;
    let id = flow
        .client
        .upgrade_firmware(pb::UpgradeFirmwareRequest {
            target_spec: Some(common::whole_rack(1)),
            target_version: Some("2.5.0".into()),
            ..Default::default()
        })
        .await
        .expect("UpgradeFirmware")
        .into_inner()
        .task_ids
        .remove(0);
    let id = Uuid::parse_str(&id.id).expect("id");
    let t = flow
        .wait_task(id, "finished", DEADLINE, |t| t.finished_at.is_some())
        .await;
    assert_eq!(t.status, pb::TaskStatus::Failed as i32, "{t:#?}");
    assert!(
        t.message.contains("r-0001-compute-00")
            && t.message.contains("2.5.0")
            && t.message.contains("2.0.0"),
        "{}",
        t.message
    );
    assert_eq!(bmc_version(&bmcs[0]).await, "2.0.0");
    flow.stop().await;
    rms.stop().await;
}
