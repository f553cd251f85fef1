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
use rackflow_rms::config::{BackendKind, RmsConfig};
use rackflow_rms::redfish::{Credentials, PowerState, RedfishNode};
use rackflow_server::Config;
use rackflow_server::config::Provider;
use rackflow_testkit::rms::TestRms;
use support::{Emulator, Flavor, Options, fast_config};
use uuid::Uuid;

both_stores!(firmware_upgrade_and_power_on_through_the_rack_manager_and_redfish);

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
    let build = |config: &RmsConfig| {
        rackflow_rms::server::build_backend(&config.nodes).expect("redfish back end")
    };
    let rms = TestRms::start_custom(
        &[
            ("compute-2.0.0.fwpkg", image),
            ("nvswitch-2.0.0.fwpkg", image),
            ("powershelf-2.0.0.fwpkg", image),
        ],
        |config| {
            config.workflows.bmc_call_timeout_seconds = 30.try_into().expect("non-zero");
            config.nodes.backend = BackendKind::Redfish;
            config.nodes.redfish = toml::from_str(
                r#"
        scheme = "http"
        request_timeout_seconds = 15
        task_poll_interval_ms = 50
        task_timeout_seconds = 20
        power_poll_interval_ms = 100
        power_wait_timeout_seconds = 25
        "#,
            )
            .expect("[nodes.redfish]");
        },
        Some(&build),
    )
    .await;
    let mut client = rms.client.clone();
    let nodes = NODES
        .iter()
        .zip(bmcs)
        .map(|((node, ty), bmc)| {
            let bmc = bmc_addr(bmc);
            rmpb::NodeInfo {
                node_id: (*node).to_owned(),
                rack_id: RACK.to_owned(),
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
    let created = client
        .create_nodes(rmpb::CreateNodesRequest {
            nodes: Some(rmpb::NodeSet { nodes }),
        })
        .await
        .expect("CreateNodes")
        .into_inner();
    assert_eq!(created.stats.expect("stats").successful_nodes, 4);
    rms
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
