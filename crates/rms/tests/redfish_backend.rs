//! The rack manager with the `redfish` back end, driven only through its
//! gRPC API, against an emulated BMC: our firmware extension of sushy-tools
//! (`tests/support/sushy_fw.py`, which serves sushy's systems, power and
//! basic auth unchanged) with HTTP basic auth on.
//!
//! One node is registered through `CreateNodes` with the emulator's address,
//! port and credentials; then firmware (a job that completes and shows in
//! the inventory, a job whose BMC task fails with the BMC's message) and
//! power (one Off → On round trip: sushy applies it after 1–11 s, so this
//! is the slow part and there is only one).
//!
//! Skipped with a message when sushy-tools is not installed, failed when
//! `CI` is set (see `support::sushy`).

use rackflow_testkit::redfish as support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use rackflow_api::rack_manager as pb;
use rackflow_api::rack_manager::rack_manager_client::RackManagerClient;
use rackflow_rms::config::{BackendKind, RmsConfig};
use support::{Emulator, Flavor, Options};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

const RACK: &str = "rack-rf";
const NODE: &str = "node-rf-1";
const USER: &str = "rf-admin";
const PASSWORD: &str = "rf-Secret-9";

struct Rms {
    client: RackManagerClient<Channel>,
    firmware_dir: PathBuf,
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<()>,
}

/// A rack manager with the redfish back end (plain HTTP, fast polling) on a
/// free loopback port, built the way `rms serve` builds it.
async fn start_rms() -> Rms {
    let firmware_dir = std::env::temp_dir().join(format!("rms-rf-fw-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&firmware_dir).expect("firmware dir");
    // Images for the extension: `version=` is what the task installs,
    // `fail=` makes the task end in Exception with that message.
    std::fs::write(firmware_dir.join("bmc-2.5.0.fwpkg"), "version=2.5.0\n").expect("image");
    std::fs::write(
        firmware_dir.join("bios-broken.fwpkg"),
        "version=9.9.9\ncomponent=BIOS\nfail=Image signature verification failed\n",
    )
    .expect("image");
    let mut config = RmsConfig::default();
    config.workflows.firmware_dir = firmware_dir.clone();
    config.workflows.shutdown_timeout_seconds = 1;
    config.workflows.bmc_call_timeout_seconds = 30.try_into().expect("non-zero");
    config.shutdown_grace_seconds = 1;
    // Credentials over plaintext loopback, allowed explicitly.
    config.tls.allow_insecure = true;
    config.nodes.backend = BackendKind::Redfish;
    config.nodes.redfish = toml::from_str(
        r#"
        scheme = "http"
        request_timeout_seconds = 15
        task_poll_interval_ms = 50
        task_timeout_seconds = 20
        task_status_error_grace_seconds = 2
        power_poll_interval_ms = 100
        power_wait_timeout_seconds = 25
        "#,
    )
    .expect("[nodes.redfish]");
    let backend = rackflow_rms::server::build_backend(&config.nodes).expect("redfish back end");
    assert_eq!(backend.kind(), "redfish");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = CancellationToken::new();
    let token = stop.clone();
    let handle = tokio::spawn(async move {
        rackflow_rms::server::serve_on(config, backend, listener, None, token)
            .await
            .expect("rack manager runs");
    });
    let client = RackManagerClient::connect(format!("http://{addr}"))
        .await
        .expect("connect rack manager");
    Rms {
        client,
        firmware_dir,
        stop,
        handle,
    }
}

fn bmc_of(emulator: &Emulator) -> SocketAddr {
    emulator
        .base_url
        .strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .expect("emulator address")
}

async fn wait_terminal(client: &mut RackManagerClient<Channel>, job_id: &str) -> pb::JobStatus {
    rackflow_testkit::rms::wait_job_terminal(client, job_id, Duration::from_secs(30)).await
}

async fn update(client: &mut RackManagerClient<Channel>, target: &str, file: &str) -> String {
    let resp = client
        .update_firmware(pb::UpdateFirmwareRequest {
            node_id: NODE.into(),
            rack_id: RACK.into(),
            firmware_targets: vec![pb::FirmwareTarget {
                target: target.into(),
                filename: file.into(),
            }],
            ..Default::default()
        })
        .await
        .expect("UpdateFirmware")
        .into_inner();
    assert_eq!(resp.status, pb::ReturnCode::Success as i32, "{resp:?}");
    resp.job_id
}

async fn versions(client: &mut RackManagerClient<Channel>) -> Vec<(String, String)> {
    let inventory = client
        .get_node_firmware_inventory(pb::GetNodeFirmwareInventoryRequest {
            node_id: NODE.into(),
            rack_id: RACK.into(),
        })
        .await
        .expect("GetNodeFirmwareInventory")
        .into_inner();
    assert_eq!(
        inventory.status,
        pb::ReturnCode::Success as i32,
        "{inventory:?}"
    );
    let mut v: Vec<_> = inventory
        .firmware_list
        .into_iter()
        .map(|f| (f.name, f.version))
        .collect();
    v.sort();
    v
}

async fn power_state(client: &mut RackManagerClient<Channel>) -> String {
    let resp = client
        .get_power_state(pb::GetPowerStateRequest {
            node_id: NODE.into(),
            rack_id: RACK.into(),
        })
        .await
        .expect("GetPowerState")
        .into_inner();
    assert_eq!(resp.status, pb::ReturnCode::Success as i32, "{resp:?}");
    resp.pstate
}

#[tokio::test]
async fn power_and_firmware_through_the_grpc_api_against_an_emulated_bmc() {
    let mut options = Options::new(Flavor::Firmware);
    options.auth = Some((USER.into(), PASSWORD.into()));
    let Some(emulator) = Emulator::start(options).await else {
        return;
    };
    let bmc = bmc_of(&emulator);
    let mut rms = start_rms().await;

    let created = rms
        .client
        .create_nodes(pb::CreateNodesRequest {
            nodes: Some(pb::NodeSet {
                nodes: vec![pb::NodeInfo {
                    node_id: NODE.into(),
                    rack_id: RACK.into(),
                    r#type: Some(pb::NodeType::ComputeGb200Nvidia as i32),
                    bmc_endpoint: Some(pb::Endpoint {
                        interface: Some(pb::NetworkInterface {
                            ip_address: bmc.ip().to_string(),
                            ..Default::default()
                        }),
                        port: u32::from(bmc.port()),
                        credentials: Some(pb::Credentials {
                            auth: Some(pb::credentials::Auth::UserPass(pb::UsernamePassword {
                                username: USER.into(),
                                password: PASSWORD.into(),
                            })),
                        }),
                    }),
                    ..Default::default()
                }],
            }),
        })
        .await
        .expect("CreateNodes")
        .into_inner();
    assert_eq!(created.stats.expect("stats").successful_nodes, 1);

    // Inventory as the extension starts it, read through the BMC's auth.
    assert_eq!(
        versions(&mut rms.client).await,
        [
            ("BIOS".to_owned(), "0.9.0".to_owned()),
            ("BMC".to_owned(), "1.0.0".to_owned())
        ]
    );

    // Firmware: a multipart push to the BMC component, its task followed
    // to Completed, the new version in the inventory.
    let job = update(&mut rms.client, "BMC", "bmc-2.5.0.fwpkg").await;
    let done = wait_terminal(&mut rms.client, &job).await;
    assert_eq!(
        done.execution_state,
        pb::JobExecutionState::Completed as i32,
        "{done:?}\n{}",
        emulator.log()
    );
    let result: serde_json::Value = serde_json::from_str(&done.result_json).expect("result");
    assert_eq!(result["targets_completed"], 1, "{result}");
    assert_eq!(
        result["targets"][0]["nvfwupd_summary"]["message"], "BMC updated to 2.5.0",
        "{result}"
    );
    assert_eq!(
        versions(&mut rms.client).await,
        [
            ("BIOS".to_owned(), "0.9.0".to_owned()),
            ("BMC".to_owned(), "2.5.0".to_owned())
        ]
    );

    // A task the BMC fails: the job fails with the BMC's words, and the
    // inventory is unchanged.
    let job = update(&mut rms.client, "BIOS", "bios-broken.fwpkg").await;
    let failed = wait_terminal(&mut rms.client, &job).await;
    assert_eq!(
        failed.execution_state,
        pb::JobExecutionState::Failed as i32,
        "{failed:?}"
    );
    assert!(
        failed
            .error_message
            .contains("Image signature verification failed"),
        "{failed:?}"
    );
    assert_eq!(
        versions(&mut rms.client).await,
        [
            ("BIOS".to_owned(), "0.9.0".to_owned()),
            ("BMC".to_owned(), "2.5.0".to_owned())
        ]
    );

    // Power: the fake system starts Off; SetPowerState On answers once the
    // BMC reports On (the back end polls PowerState), so the very next read
    // says ON.
    assert_eq!(power_state(&mut rms.client).await, "OFF");
    let set = rms
        .client
        .set_power_state(pb::SetPowerStateRequest {
            node_id: NODE.into(),
            rack_id: RACK.into(),
            operation: pb::PowerOperation::On as i32,
        })
        .await
        .expect("SetPowerState")
        .into_inner();
    assert_eq!(
        set.status,
        pb::ReturnCode::Success as i32,
        "{}",
        emulator.log()
    );
    assert_eq!(power_state(&mut rms.client).await, "ON");

    // The credentials travelled only in the Authorization header: the
    // emulator never logged the password.
    assert!(!emulator.log().contains(PASSWORD), "{}", emulator.log());

    rms.stop.cancel();
    let _ = rms.handle.await;
    let _ = std::fs::remove_dir_all(&rms.firmware_dir);
}

#[tokio::test]
async fn wrong_credentials_fail_in_band_with_unauthenticated() {
    let mut options = Options::new(Flavor::Sushy);
    options.auth = Some((USER.into(), PASSWORD.into()));
    let Some(emulator) = Emulator::start(options).await else {
        return;
    };
    let bmc = bmc_of(&emulator);
    let mut rms = start_rms().await;
    // Ephemeral node with the wrong password, through the batch API.
    let resp = rms
        .client
        .batch_get_power_state(pb::BatchGetPowerStateRequest {
            nodes: Some(pb::NodeSet {
                nodes: vec![pb::NodeInfo {
                    node_id: NODE.into(),
                    rack_id: RACK.into(),
                    r#type: Some(pb::NodeType::ComputeGb200Nvidia as i32),
                    bmc_endpoint: Some(pb::Endpoint {
                        interface: Some(pb::NetworkInterface {
                            ip_address: bmc.ip().to_string(),
                            ..Default::default()
                        }),
                        port: u32::from(bmc.port()),
                        credentials: Some(pb::Credentials {
                            auth: Some(pb::credentials::Auth::UserPass(pb::UsernamePassword {
                                username: USER.into(),
                                password: "wrong-password".into(),
                            })),
                        }),
                    }),
                    ..Default::default()
                }],
            }),
        })
        .await
        .expect("BatchGetPowerState")
        .into_inner();
    let states = format!("{resp:?}");
    assert!(states.contains("BMC rejected the credentials"), "{states}");
    assert!(!states.contains("wrong-password"), "{states}");
    rms.stop.cancel();
    let _ = rms.handle.await;
    let _ = std::fs::remove_dir_all(&rms.firmware_dir);
}
