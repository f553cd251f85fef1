//! Flow → rack manager → simulated BMCs, end to end (issue 5 item 4).
//!
//! A rack manager with the `sim` back end runs on a free loopback port with
//! the fixture rack's components registered as nodes; a Flow server
//! configured with the `rms` provider drives it. A firmware-upgrade task
//! and a power-on task go through Flow's gRPC API and must complete, with
//! the rack manager's simulated BMCs showing the work.

use rackflow_testkit as common;
use rackflow_testkit::both_stores;

use std::time::Duration;

use common::{Backend, TestServer, fixture_fleet, fixture_id, uuid};
use rackflow_api::rack_manager as rmpb;
use rackflow_api::v1 as pb;
use rackflow_rms::backend::PowerState;
use rackflow_rms::backend::sim::SimBackendConfig;
use rackflow_security::Role;
use rackflow_server::Config;
use rackflow_server::config::Provider;
use rackflow_testkit::pki::{TestPki, tls_channel};
use rackflow_testkit::rms::TestRms;
use uuid::Uuid;

/// Flow's identity towards the rack manager in the mTLS test.
const FLOW: &str = "spiffe://rackflow.test/flow";
/// Who registers the rack manager's nodes in the mTLS test.
const RMS_ADMIN: &str = "spiffe://rackflow.test/sre/admin";

both_stores!(
    firmware_upgrade_and_power_on_through_the_rack_manager,
    flow_drives_the_rack_manager_over_mtls,
    a_flow_restart_mid_flash_polls_the_same_rack_manager_jobs,
    sync_on_start_registers_the_inventory_with_the_rack_manager,
    validate_components_compares_the_inventory_with_the_rack_manager,
    a_missing_firmware_image_fails_the_trays_at_once,
);

const DEADLINE: Duration = Duration::from_secs(60);
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

/// A rack manager on the sim back end with the fixture rack's components
/// registered as nodes and each type's 2.0.0 image.
async fn start_rms() -> TestRms {
    start_rms_with(None).await
}

/// [`start_rms`]; with `pki`, the rack manager runs mTLS with [`FLOW`] as an
/// operator and [`RMS_ADMIN`] (who registers the nodes) as an admin.
async fn start_rms_with(pki: Option<&TestPki>) -> TestRms {
    start_rms_flashing_for(pki, 60).await
}

/// [`start_rms_with`], each firmware update taking `firmware_ms`.
async fn start_rms_flashing_for(pki: Option<&TestPki>, firmware_ms: u64) -> TestRms {
    let rms = start_unregistered_rms(pki, firmware_ms).await;
    register_fixture_nodes(&rms, pki).await;
    rms
}

/// The rack manager of [`start_rms_flashing_for`] without any node.
async fn start_unregistered_rms(pki: Option<&TestPki>, firmware_ms: u64) -> TestRms {
    TestRms::start_custom(
        // Each image declares the version it installs (as on the Redfish
        // emulator), so Flow's read-back can prove the update.
        &[
            ("compute-2.0.0.fwpkg", b"version=2.0.0\n"),
            ("nvswitch-2.0.0.fwpkg", b"version=2.0.0\n"),
            ("powershelf-2.0.0.fwpkg", b"version=2.0.0\n"),
        ],
        |config| {
            config.nodes.sim = SimBackendConfig {
                power_latency_ms: 10,
                read_latency_ms: 1,
                firmware_latency_ms: firmware_ms,
                jitter: 0.0,
                ..SimBackendConfig::default()
            };
            if let Some(pki) = pki {
                config.tls = pki.server_tls(true);
                config.authorization.identities = [
                    (FLOW.to_string(), Role::Operator),
                    (RMS_ADMIN.to_string(), Role::Admin),
                ]
                .into();
            }
        },
        None,
    )
    .await
}

/// Registers the fixture rack's components as nodes (as an admin with
/// `pki`).
async fn register_fixture_nodes(rms: &TestRms, pki: Option<&TestPki>) {
    let mut client = match pki {
        Some(pki) => rmpb::rack_manager_client::RackManagerClient::new(
            tls_channel(rms.addr, &pki.client(RMS_ADMIN))
                .await
                .expect("mTLS connect"),
        ),
        None => rms.client.clone(),
    };
    let nodes = NODES
        .iter()
        .map(|(node, ty)| rmpb::NodeInfo {
            node_id: (*node).to_owned(),
            rack_id: RACK.to_owned(),
            r#type: Some(*ty as i32),
            bmc_endpoint: Some(rmpb::Endpoint {
                interface: Some(rmpb::NetworkInterface {
                    ip_address: "127.0.0.1".into(),
                    ..Default::default()
                }),
                port: 443,
                credentials: None,
            }),
            ..Default::default()
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
}

/// Flow on the `rms` provider driving `rms` over plain HTTP/2 (the
/// dispatcher off: the tests submit tasks themselves), polling jobs every
/// 20 ms for at most `job_timeout_secs`.
fn flow_config(rms: &TestRms, job_timeout_secs: u64) -> Config {
    let mut config = Config::default();
    config.dispatcher.enabled = false;
    config.provider = Provider::Rms;
    config.rms.address = format!("http://{}", rms.addr);
    config.rms.poll_interval_ms = 20;
    config.rms.job_timeout_secs = job_timeout_secs;
    config
}

/// Waits for the task to finish (re-read on each store write) and checks it
/// completed.
async fn wait_completed(flow: &mut TestServer, id: Uuid) -> pb::Task {
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
                "task {id}: {t:#?}"
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

/// PowerOnRack of the fixture rack through Flow: the task completes and
/// every node of the rack manager is on.
async fn power_on_the_rack(flow: &mut TestServer, rms: &TestRms) {
    let reply = flow
        .client
        .power_on_rack(pb::PowerOnRackRequest {
            target_spec: Some(whole_rack()),
            ..Default::default()
        })
        .await
        .expect("PowerOnRack")
        .into_inner();
    wait_completed(flow, task_id(reply)).await;
    for (node, _) in NODES {
        assert_eq!(
            rms.sim().node_power(RACK, node),
            Some(PowerState::On),
            "{node}"
        );
    }
}

fn task_id(reply: pb::SubmitTaskResponse) -> Uuid {
    assert_eq!(reply.task_ids.len(), 1, "one task for one rack");
    Uuid::parse_str(&reply.task_ids[0].id).expect("task id")
}

async fn firmware_upgrade_and_power_on_through_the_rack_manager(backend: Backend) {
    let rms = start_rms().await;
    // Defaults only (issue 31 item 5): a package-derived update lands on
    // the BMC entry, which Flow's default version_entry reads back.
    let config = flow_config(&rms, 30);
    let Some(mut flow) = TestServer::start_with(backend, config).await else {
        return;
    };
    fixture_fleet(&mut flow.client, 1).await;

    // Firmware: every component the built-in rule updates gets its type's
    // 2.0.0 image through a rack-manager job.
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
    wait_completed(&mut flow, task_id(reply)).await;
    // The built-in firmware rule updates compute trays, then NVSwitches.
    for (node, _) in &NODES[..3] {
        let firmware = rms.sim().node_firmware(RACK, node).expect("node touched");
        assert_eq!(
            firmware.get("BMC").map(String::as_str),
            Some("2.0.0"),
            "{node}: {firmware:?}"
        );
    }
    let mut updates: Vec<_> = rms
        .sim()
        .calls()
        .into_iter()
        .filter(|c| c.call == "update_firmware")
        .map(|c| c.node_id)
        .collect();
    assert_eq!(
        updates.pop().as_deref(),
        Some("r-0001-nvswitch-00"),
        "the switch stage runs after the compute stage"
    );
    updates.sort();
    assert_eq!(
        updates,
        ["r-0001-compute-00", "r-0001-compute-01"],
        "one update per compute tray"
    );

    // Power on: every node is on afterwards.
    power_on_the_rack(&mut flow, &rms).await;
    assert!(
        rms.sim()
            .calls()
            .iter()
            .any(|c| c.call == "set_power" && c.detail == "on"),
        "the rack manager carried out power-on"
    );

    flow.stop().await;
    rms.stop().await;
}

/// The same power-on with the rack manager on mTLS: Flow presents its own
/// certificate (`[rms.tls]`, an `https://` address) and holds the operator
/// role there; the rack manager refuses Flow's node registration, which
/// only an admin may do.
async fn flow_drives_the_rack_manager_over_mtls(backend: Backend) {
    let pki = TestPki::new("rms-e2e");
    let rms = start_rms_with(Some(&pki)).await;
    let mut config = flow_config(&rms, 30);
    config.rms.address = format!("https://{}", rms.addr);
    config.rms.tls = pki.client(FLOW);
    let Some(mut flow) = TestServer::start_with(backend, config).await else {
        return;
    };
    fixture_fleet(&mut flow.client, 1).await;
    power_on_the_rack(&mut flow, &rms).await;
    // Flow's certificate is an operator's: registering nodes is refused.
    let mut as_flow = rmpb::rack_manager_client::RackManagerClient::new(
        tls_channel(rms.addr, &pki.client(FLOW))
            .await
            .expect("mTLS connect"),
    );
    let refused = as_flow
        .create_nodes(rmpb::CreateNodesRequest::default())
        .await
        .expect_err("an operator may not register nodes");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    flow.stop().await;
    rms.stop().await;
}

/// Issue 12: Flow stops while the rack manager is flashing (its executor
/// and job pollers gone, the task row left running) and a new Flow starts
/// on the same database. The new process takes the rack manager's job ids
/// from the persisted task report and polls those jobs to completion: each
/// tray is sent exactly one update, and the task completes with the job ids
/// and the versions read back.
async fn a_flow_restart_mid_flash_polls_the_same_rack_manager_jobs(backend: Backend) {
    let rms = start_rms_flashing_for(None, 3_000).await;
    let config = flow_config(&rms, 60);
    let Some(mut flow) = TestServer::start_with(backend, config.clone()).await else {
        return;
    };
    fixture_fleet(&mut flow.client, 1).await;
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
    let id = task_id(reply);

    // Both compute trays are flashing, their job ids persisted.
    let mut changes = flow.waiter("compute jobs in the report", DEADLINE);
    let jobs = loop {
        let t = get_task(&mut flow, id).await;
        let running = job_ids(&t);
        if running.len() == 2 {
            break running;
        }
        changes.next(&t).await;
    };
    flow.restart_with(config).await;
    let t = wait_completed(&mut flow, id).await;
    let mut updates: Vec<_> = rms
        .sim()
        .calls()
        .into_iter()
        .filter(|c| c.call == "update_firmware")
        .map(|c| c.node_id)
        .collect();
    updates.sort();
    assert_eq!(
        updates,
        [
            "r-0001-compute-00",
            "r-0001-compute-01",
            "r-0001-nvswitch-00"
        ],
        "one update per tray, none sent again after the restart"
    );
    let after = job_ids(&t);
    for (component, job) in &jobs {
        assert_eq!(after.get(component), Some(job), "{component}: the same job");
    }
    flow.stop().await;
    rms.stop().await;
}

async fn get_task(flow: &mut TestServer, id: Uuid) -> pb::Task {
    flow.client
        .get_tasks_by_i_ds(pb::GetTasksByIDsRequest {
            task_ids: vec![uuid(id)],
        })
        .await
        .expect("get task")
        .into_inner()
        .tasks
        .remove(0)
}

/// Compute components of the report with a job id: component → job.
fn job_ids(t: &pb::Task) -> std::collections::BTreeMap<String, String> {
    let report: serde_json::Value = serde_json::from_str(&t.report).unwrap_or_default();
    let mut jobs = std::collections::BTreeMap::new();
    for stage in report["stages"].as_array().into_iter().flatten() {
        for step in stage["steps"].as_array().into_iter().flatten() {
            if step["component_type"] != "Compute" {
                continue;
            }
            for c in step["components"].as_array().into_iter().flatten() {
                if let (Some(component), Some(job)) =
                    (c["component"].as_str(), c["job_id"].as_str())
                {
                    jobs.insert(component.to_string(), job.to_string());
                }
            }
        }
    }
    jobs
}

/// Issue 12: with `rms.sync_on_start`, Flow registers its inventory with the
/// rack manager when it starts — every component with an external id and a
/// BMC address, in the rack of the rack's external id, with the node type
/// of the rack's model and the configured BMC login — so a power task
/// reaches nodes nobody registered by hand. A component without a BMC
/// address is skipped.
async fn sync_on_start_registers_the_inventory_with_the_rack_manager(backend: Backend) {
    let rms = start_unregistered_rms(None, 60).await;
    let mut config = flow_config(&rms, 30);
    let Some(mut flow) = TestServer::start_with(backend, config.clone()).await else {
        return;
    };
    // The fixture rack, its BMCs with addresses (the last one without).
    let mut rack = common::rack(1, Some(fixture_id(1)), 2);
    let last = rack.components.len() - 1;
    for (i, c) in rack.components.iter_mut().enumerate() {
        if i != last {
            c.bmcs[0].ip_address = Some(format!("127.0.0.{}", i + 2));
        }
    }
    flow.client
        .create_expected_rack(pb::CreateExpectedRackRequest { rack: Some(rack) })
        .await
        .expect("create rack");
    let mut inventory = rms.client.clone();
    let nodes = |inventory: rmpb::ListNodeInventoryResponse| {
        let mut nodes: Vec<(String, String, i32, String)> = inventory
            .nodes
            .into_iter()
            .map(|n| (n.rack_id, n.node_id, n.r#type, n.ip_address))
            .collect();
        nodes.sort();
        nodes
    };
    let before = inventory
        .list_node_inventory(rmpb::ListNodeInventoryRequest {})
        .await
        .expect("ListNodeInventory")
        .into_inner();
    assert!(before.nodes.is_empty(), "{before:?}");

    config.rms.sync_on_start = true;
    flow.restart_with(config).await;
    // The sync runs before Flow serves: once it answers, it is done.
    flow.client
        .version(pb::VersionRequest {})
        .await
        .expect("Flow answers");
    let after = nodes(
        inventory
            .list_node_inventory(rmpb::ListNodeInventoryRequest {})
            .await
            .expect("ListNodeInventory")
            .into_inner(),
    );
    let gb200 = |t: rmpb::NodeType| t as i32;
    assert_eq!(
        after,
        [
            (
                RACK,
                "r-0001-compute-00",
                gb200(rmpb::NodeType::ComputeGb200Nvidia),
                "127.0.0.2"
            ),
            (
                RACK,
                "r-0001-compute-01",
                gb200(rmpb::NodeType::ComputeGb200Nvidia),
                "127.0.0.3"
            ),
            (
                RACK,
                "r-0001-nvswitch-00",
                gb200(rmpb::NodeType::SwitchGb200Nvidia),
                "127.0.0.4"
            ),
        ]
        .map(|(r, n, t, ip)| (r.to_string(), n.to_string(), t, ip.to_string()))
        .to_vec(),
        "the power shelf has no BMC address and is skipped"
    );

    // Flow reaches the registered nodes: a power-on of the compute trays.
    let reply = flow
        .client
        .power_on_rack(pb::PowerOnRackRequest {
            target_spec: Some(pb::OperationTargetSpec {
                targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
                    targets: vec![pb::RackTarget {
                        identifier: Some(pb::rack_target::Identifier::Id(uuid(fixture_id(1)))),
                        component_types: vec![pb::ComponentType::Compute as i32],
                    }],
                })),
            }),
            ..Default::default()
        })
        .await
        .expect("PowerOnRack")
        .into_inner();
    wait_completed(&mut flow, task_id(reply)).await;
    for node in ["r-0001-compute-00", "r-0001-compute-01"] {
        assert_eq!(
            rms.sim().node_power(RACK, node),
            Some(PowerState::On),
            "{node}"
        );
    }
    flow.stop().await;
    rms.stop().await;
}

/// Issue 12 item 4: `ValidateComponents` compares Flow's inventory with the
/// rack manager's nodes — a component the rack manager lacks is MISSING
/// (reported by its BMC MAC), a node Flow lacks UNEXPECTED, a node whose
/// BMC address differs a MISMATCH naming the field — with the reference's
/// counts, pagination and target scoping; a missing component without a
/// MAC and the simulated fleet (no inventory of its own) are
/// FailedPrecondition.
async fn validate_components_compares_the_inventory_with_the_rack_manager(backend: Backend) {
    let rms = start_unregistered_rms(None, 60).await;
    let config = flow_config(&rms, 30);
    let Some(mut flow) = TestServer::start_with(backend, config).await else {
        return;
    };
    let mut rack = common::rack(1, Some(fixture_id(1)), 2);
    for (i, c) in rack.components.iter_mut().enumerate() {
        c.bmcs[0].ip_address = Some(format!("127.0.0.{}", i + 2));
    }
    let mac = |ext: &str| -> String {
        rack.components
            .iter()
            .find(|c| c.component_id == ext)
            .map(|c| c.bmcs[0].mac_address.clone())
            .unwrap_or_default()
    };
    let node = |id: &str, ty: rmpb::NodeType, ip: &str, mac: String| rmpb::NodeInfo {
        node_id: id.to_owned(),
        rack_id: RACK.to_owned(),
        r#type: Some(ty as i32),
        bmc_endpoint: Some(rmpb::Endpoint {
            interface: Some(rmpb::NetworkInterface {
                ip_address: ip.into(),
                mac_address: mac,
                host_name: None,
            }),
            port: 443,
            credentials: None,
        }),
        ..Default::default()
    };
    let nodes = vec![
        node(
            "r-0001-compute-00",
            rmpb::NodeType::ComputeGb200Nvidia,
            "127.0.0.2",
            mac("r-0001-compute-00"),
        ),
        // Flow has 127.0.0.3.
        node(
            "r-0001-compute-01",
            rmpb::NodeType::ComputeGb200Nvidia,
            "127.0.0.99",
            mac("r-0001-compute-01"),
        ),
        node(
            "r-0001-powershelf-00",
            rmpb::NodeType::PowershelfGb200Liteon,
            "127.0.0.5",
            mac("r-0001-powershelf-00"),
        ),
        // Flow does not know it.
        node(
            "r-0001-compute-99",
            rmpb::NodeType::ComputeGb200Nvidia,
            "127.0.0.50",
            "02:00:00:00:00:99".into(),
        ),
        // r-0001-nvswitch-00 is not registered: missing.
    ];
    let mut admin = rms.client.clone();
    admin
        .create_nodes(rmpb::CreateNodesRequest {
            nodes: Some(rmpb::NodeSet { nodes }),
        })
        .await
        .expect("CreateNodes");
    flow.client
        .create_expected_rack(pb::CreateExpectedRackRequest {
            rack: Some(rack.clone()),
        })
        .await
        .expect("create rack");

    let validate = |target: Option<pb::OperationTargetSpec>, pagination: Option<pb::Pagination>| {
        pb::ValidateComponentsRequest {
            target_spec: target,
            pagination,
            ..Default::default()
        }
    };
    let all = flow
        .client
        .validate_components(validate(Some(whole_rack()), None))
        .await
        .expect("ValidateComponents")
        .into_inner();
    assert_eq!(
        (
            all.total_diffs,
            all.missing_count,
            all.unexpected_count,
            all.mismatch_count,
            all.match_count
        ),
        (3, 1, 1, 1, 2),
        "{all:#?}"
    );
    let kinds: Vec<(i32, &str)> = all
        .diffs
        .iter()
        .map(|d| (d.r#type, d.component_id.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (pb::DiffType::Missing as i32, "r-0001-nvswitch-00"),
            (pb::DiffType::Unexpected as i32, "r-0001-compute-99"),
            (pb::DiffType::Mismatch as i32, "r-0001-compute-01"),
        ]
    );
    let missing = &all.diffs[0];
    assert_eq!(missing.component_mac_address, mac("r-0001-nvswitch-00"));
    assert!(missing.expected.is_some() && missing.actual.is_none());
    assert!(missing.id.is_some());
    let unexpected = &all.diffs[1];
    assert!(unexpected.expected.is_none() && unexpected.id.is_none());
    assert_eq!(unexpected.component_mac_address, "02:00:00:00:00:99");
    let mismatch = &all.diffs[2];
    assert_eq!(
        mismatch
            .field_diffs
            .iter()
            .map(|f| (
                f.field_name.as_str(),
                f.expected_value.as_str(),
                f.actual_value.as_str()
            ))
            .collect::<Vec<_>>(),
        [("bmcs.ip_address", "127.0.0.3", "127.0.0.99")]
    );

    // A page: the counts stay the whole comparison's.
    let page = flow
        .client
        .validate_components(validate(
            Some(whole_rack()),
            Some(pb::Pagination {
                offset: 1,
                limit: 1,
            }),
        ))
        .await
        .expect("page")
        .into_inner();
    assert_eq!(page.total_diffs, 3);
    assert_eq!(page.diffs.len(), 1);
    assert_eq!(page.diffs[0].component_id, "r-0001-compute-99");

    // A component target: only that component, no unexpected nodes.
    let one = flow
        .client
        .validate_components(validate(
            Some(pb::OperationTargetSpec {
                targets: Some(pb::operation_target_spec::Targets::Components(
                    pb::ComponentTargets {
                        targets: vec![pb::ComponentTarget {
                            identifier: Some(pb::component_target::Identifier::External(
                                pb::ExternalRef {
                                    r#type: pb::ComponentType::Compute as i32,
                                    id: "r-0001-compute-01".into(),
                                },
                            )),
                        }],
                    },
                )),
            }),
            None,
        ))
        .await
        .expect("one component")
        .into_inner();
    assert_eq!(
        (
            one.total_diffs,
            one.mismatch_count,
            one.unexpected_count,
            one.match_count
        ),
        (1, 1, 0, 0),
        "{one:#?}"
    );

    // A linked component without a BMC MAC cannot be reported missing.
    flow.client
        .add_component(pb::AddComponentRequest {
            component: Some(pb::Component {
                r#type: pb::ComponentType::Compute as i32,
                info: Some(pb::DeviceInfo {
                    name: "r-0001-compute-77".into(),
                    serial_number: "SN-77".into(),
                    ..Default::default()
                }),
                component_id: "r-0001-compute-77".into(),
                rack_id: Some(uuid(fixture_id(1))),
                ..Default::default()
            }),
        })
        .await
        .expect("add component");
    let err = flow
        .client
        .validate_components(validate(None, None))
        .await
        .expect_err("missing without a MAC");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    assert_eq!(
        err.message(),
        "component r-0001-compute-77 is missing from the component manager's inventory and has no BMC MAC address to report it by"
    );
    flow.stop().await;
    rms.stop().await;

    // The simulated fleet has no inventory of its own to compare with.
    let mut sim_config = Config::default();
    sim_config.dispatcher.enabled = false;
    let Some(mut sim_flow) = TestServer::start_with(backend, sim_config).await else {
        return;
    };
    let err = sim_flow
        .client
        .validate_components(validate(None, None))
        .await
        .expect_err("sim provider");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().contains("provider = \"rms\""),
        "{}",
        err.message()
    );
    sim_flow.stop().await;
}

/// Issue 12 item 7, for any executor: a Flow process that does not know
/// the job running on a node (its starter died before the job id was
/// persisted, or an executor that keeps none) asks for the update again;
/// the rack manager refuses with "job already in progress … (job_id J)",
/// and the provider polls job J to its end instead of failing the tray.
/// The node is flashed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_this_process_did_not_start_is_polled_not_failed() {
    use rackflow_engine::manager::rms::{RmsManager, RmsProviderConfig};
    use rackflow_engine::manager::{
        ComponentRef, FirmwareControl, FirmwareRequest, FirmwareState, FirmwareStatus,
    };
    let rms = start_rms_flashing_for(None, 1_500).await;
    let config = RmsProviderConfig {
        address: format!("http://{}", rms.addr),
        poll_interval_ms: 20,
        job_timeout_secs: 30,
        ..RmsProviderConfig::default()
    };
    let tray = ComponentRef {
        id: Uuid::new_v4(),
        component_type: rackflow_domain::ComponentType::Compute,
        external_id: "r-0001-compute-00".into(),
        rack: RACK.into(),
    };
    let request = FirmwareRequest {
        operation: "upgrade".into(),
        target_version: "2.0.0".into(),
        ..FirmwareRequest::default()
    };
    let first = RmsManager::new(config.clone()).expect("provider");
    first
        .firmware_start(std::slice::from_ref(&tray), &request)
        .await
        .expect("start");
    let job = first.firmware_job_id(&tray).expect("job id");
    // The first process is gone; a new one knows nothing of the job.
    drop(first);
    let second = RmsManager::new(config).expect("provider");
    second
        .firmware_start(std::slice::from_ref(&tray), &request)
        .await
        .expect("the running job is taken over, not a failure");
    assert_eq!(second.firmware_job_id(&tray), Some(job.clone()));
    let mut feed = second
        .change_feed(std::slice::from_ref(&tray))
        .expect("the provider has a change feed");
    let state = tokio::time::timeout(DEADLINE, async {
        loop {
            let states = second
                .firmware_status(std::slice::from_ref(&tray))
                .await
                .expect("status");
            match states.get("r-0001-compute-00") {
                Some(s @ (FirmwareState::Completed | FirmwareState::Failed)) => return *s,
                _ => {
                    let _ = feed.changed().await;
                }
            }
        }
    })
    .await
    .expect("the job ends");
    assert_eq!(state, FirmwareState::Completed);
    let updates = rms
        .sim()
        .calls()
        .into_iter()
        .filter(|c| c.call == "update_firmware")
        .count();
    assert_eq!(updates, 1, "the node was flashed once");
    rms.stop().await;
}

/// Issue 31 item 5: the rack manager has no image for the version asked:
/// the tray fails at once (no rounds of retries: a retry cannot make the
/// file appear), and the task's message names the file and the rack
/// manager's setting it belongs in.
async fn a_missing_firmware_image_fails_the_trays_at_once(backend: Backend) {
    let rms = start_rms().await;
    let Some(mut flow) = TestServer::start_with(backend, flow_config(&rms, 30)).await else {
        return;
    };
    fixture_fleet(&mut flow.client, 1).await;
    let started = std::time::Instant::now();
    let reply = flow
        .client
        .upgrade_firmware(pb::UpgradeFirmwareRequest {
            target_spec: Some(whole_rack()),
            target_version: Some("9.9.9".into()),
            ..Default::default()
        })
        .await
        .expect("UpgradeFirmware")
        .into_inner();
    let id = task_id(reply);
    let t = flow
        .wait_task(id, "finished", DEADLINE, |t| t.finished_at.is_some())
        .await;
    let took = started.elapsed();
    assert_eq!(t.status, pb::TaskStatus::Failed as i32, "{t:#?}");
    for text in [
        "firmware image compute-9.9.9.fwpkg is not in the rack manager's firmware directory",
        "workflows.firmware_dir",
        "r-0001-compute-00, r-0001-compute-01",
    ] {
        assert!(t.message.contains(text), "{text:?} not in {:?}", t.message);
    }
    assert!(
        took < Duration::from_secs(8),
        "a missing image must fail without retries; took {took:?}"
    );
    flow.stop().await;
    rms.stop().await;
}
