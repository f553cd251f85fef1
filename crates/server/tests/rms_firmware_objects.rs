//! Firmware objects end to end (issue 35): objects are added to the rack
//! manager's catalogue (artifacts fetched from an HTTP server), one made the
//! default; the rack manager restarts and keeps them; Flow (`provider =
//! "rms"`) runs an operation run naming `default`, which applies the object
//! to the fixture rack's trays through the rack manager; afterwards the
//! comparison shows every tray MATCHED and the history lists the apply —
//! also after a second restart. And the refusals: an unknown object, an
//! object with a version beside it, the sim provider, a schedule.

use rackflow_testkit as common;
use rackflow_testkit::both_stores;

use std::time::Duration;

use common::{Backend, TestServer, fixture_fleet, fixture_id, uuid};
use rackflow_api::rack_manager as rmpb;
use rackflow_api::v1 as pb;
use rackflow_rms::backend::sim::SimBackendConfig;
use rackflow_server::Config;
use rackflow_server::config::Provider;
use rackflow_testkit::artifacts::{ArtifactServer, manifest};
use rackflow_testkit::rms::TestRms;

both_stores!(
    an_operation_run_applies_the_default_object_across_rack_manager_restarts,
    requests_naming_objects_are_refused_with_reasons,
);

const DEADLINE: Duration = Duration::from_secs(60);
/// The fixture rack and its trays (its model is "GB200 NVL72").
const RACK: &str = "r-0001";
const MODEL: &str = "GB200 NVL72";
const COMPUTE: [&str; 2] = ["r-0001-compute-00", "r-0001-compute-01"];
const SWITCH: &str = "r-0001-nvswitch-00";
const SHELF: &str = "r-0001-powershelf-00";

async fn start_rms(dirs: &tempfile::TempDir) -> TestRms {
    let firmware_dir = dirs.path().join("firmware");
    let catalog_dir = dirs.path().join("catalog");
    let rms = TestRms::start_custom(
        &[],
        |config| {
            config.workflows.firmware_dir = firmware_dir;
            config.workflows.catalog_dir = catalog_dir;
            config.nodes.sim = SimBackendConfig {
                power_latency_ms: 5,
                read_latency_ms: 1,
                firmware_latency_ms: 40,
                jitter: 0.0,
                ..SimBackendConfig::default()
            };
        },
        None,
    )
    .await;
    register(&rms).await;
    rms
}

/// Registers the fixture rack's trays (the registry is in memory, as the
/// reference's: after a restart, `rackflow rms sync` registers them again).
async fn register(rms: &TestRms) {
    let node = |id: &str, ty: rmpb::NodeType| rmpb::NodeInfo {
        node_id: id.into(),
        rack_id: RACK.into(),
        r#type: Some(ty as i32),
        bmc_endpoint: Some(rackflow_testkit::rms::endpoint("127.0.0.1", 443, None)),
        ..Default::default()
    };
    let nodes = vec![
        node(COMPUTE[0], rmpb::NodeType::ComputeGb200Nvidia),
        node(COMPUTE[1], rmpb::NodeType::ComputeGb200Nvidia),
        node(SWITCH, rmpb::NodeType::SwitchGb200Nvidia),
        node(SHELF, rmpb::NodeType::PowershelfGb200Liteon),
    ];
    let created = rms
        .client
        .clone()
        .create_nodes(rmpb::CreateNodesRequest {
            nodes: Some(rmpb::NodeSet { nodes }),
        })
        .await
        .expect("CreateNodes")
        .into_inner();
    assert_eq!(created.stats.expect("stats").successful_nodes, 4);
}

/// An object for the fixture's model: compute BMC `bmc` + BIOS, switch BMC.
fn object(server: &ArtifactServer, milestone: &str, bmc: &str) -> (String, String) {
    let file =
        |name: &str, body: String| server.put(&format!("{milestone}/{name}"), body.as_bytes());
    let (compute_bmc, compute_bmc_sha) = file(
        "compute-bmc.fwpkg",
        format!("version={bmc}\ncomponent=BMC\n"),
    );
    let (bios, bios_sha) = file("bios.fwpkg", "version=1.5.0\ncomponent=BIOS\n".into());
    let (switch_bmc, switch_bmc_sha) =
        file("switch-bmc.fwpkg", "version=3.1.0\ncomponent=BMC\n".into());
    let json = manifest(
        "GB200-NVL72",
        milestone,
        &[
            (
                "Compute Node",
                &[
                    ("BMC", bmc, &compute_bmc, &compute_bmc_sha),
                    ("BIOS", "1.5.0", &bios, &bios_sha),
                ],
            ),
            (
                "Switch Tray",
                &[("BMC", "3.1.0", &switch_bmc, &switch_bmc_sha)],
            ),
        ],
    );
    (format!("GB200-NVL72_{milestone}"), json)
}

async fn get_object(rms: &TestRms, id: &str) -> rmpb::FirmwareObject {
    rms.client
        .clone()
        .get_firmware_object(rmpb::GetFirmwareObjectRequest { id: id.into() })
        .await
        .expect("GetFirmwareObject")
        .into_inner()
        .object
        .expect("object")
}

async fn available(rms: &TestRms, id: &str) -> rmpb::FirmwareObject {
    rackflow_testkit::rms::settled_object(&rms.client, id).await
}

fn flow_config(rms: &TestRms) -> Config {
    let mut config = Config {
        provider: Provider::Rms,
        ..Config::default()
    };
    config.rms.address = format!("http://{}", rms.addr);
    config.rms.poll_interval_ms = 20;
    config.rms.job_timeout_secs = 30;
    config
}

fn run_request(firmware_object: &str) -> pb::CreateOperationRunRequest {
    let mut req = common::run_request("objects", 100, "s", "o", 1);
    let operation = req
        .configuration
        .as_mut()
        .and_then(|c| c.operation.as_mut())
        .and_then(|o| o.operation.as_mut());
    if let Some(pb::operation_run_operation::Operation::UpgradeFirmware(fw)) = operation {
        fw.target_version = None;
        fw.firmware_object = firmware_object.into();
    }
    req
}

fn run_status(run: &pb::OperationRun) -> pb::OperationRunStatus {
    run.summary
        .as_ref()
        .and_then(|s| s.state)
        .map_or(pb::OperationRunStatus::Unknown, |s| s.status())
}

async fn compare_trays(rms: &TestRms, json: &str) -> rmpb::CompareFirmwareObjectResponse {
    let nodes = COMPUTE
        .iter()
        .chain(std::iter::once(&SWITCH))
        .map(|n| rmpb::NodeInfo {
            node_id: (*n).into(),
            rack_id: RACK.into(),
            ..Default::default()
        })
        .collect();
    rms.client
        .clone()
        .compare_firmware_object(rmpb::CompareFirmwareObjectRequest {
            config_json: json.into(),
            nodes: Some(rmpb::NodeSet { nodes }),
            ..Default::default()
        })
        .await
        .expect("CompareFirmwareObject")
        .into_inner()
}

async fn history(rms: &TestRms, id: &str) -> Vec<rmpb::FirmwareObjectHistoryRecord> {
    rms.client
        .clone()
        .get_firmware_object_history(rmpb::GetFirmwareObjectHistoryRequest {
            object_id: id.into(),
            rack_ids: vec![RACK.into()],
        })
        .await
        .expect("history")
        .into_inner()
        .records
}

async fn an_operation_run_applies_the_default_object_across_rack_manager_restarts(
    backend: Backend,
) {
    let server = ArtifactServer::start().await;
    let dirs = tempfile::tempdir().expect("temp dir");
    let mut rms = start_rms(&dirs).await;
    let add = |json: String| rmpb::AddFirmwareObjectRequest {
        config_json: json,
        access_token: None,
        hardware_type: MODEL.into(),
        set_default: false,
    };
    // Two objects; the first became the default, the second is made it.
    let (old, old_json) = object(&server, "2026.10", "2.0.5");
    let (new, new_json) = object(&server, "2026.11", "2.1.0");
    for json in [old_json, new_json.clone()] {
        rms.client
            .clone()
            .add_firmware_object(add(json))
            .await
            .expect("add");
    }
    assert!(available(&rms, &old).await.available);
    assert!(available(&rms, &new).await.available);
    rms.client
        .clone()
        .set_default_firmware_object(rmpb::SetDefaultFirmwareObjectRequest {
            object_id: new.clone(),
        })
        .await
        .expect("set default");

    // The rack manager restarts: the catalogue is as it was (the node
    // registry is not persisted: the trays are registered again).
    rms.restart().await;
    register(&rms).await;
    let kept = get_object(&rms, &new).await;
    assert!(kept.available && kept.is_default, "{kept:?}");
    assert!(!get_object(&rms, &old).await.is_default);

    let Some(mut flow) = TestServer::start_with(backend, flow_config(&rms)).await else {
        rms.stop().await;
        return;
    };
    fixture_fleet(&mut flow.client, 1).await;
    let before = compare_trays(&rms, &new_json).await;
    assert!(!before.matches_manifest);

    // Preview names the object's versions for the rack's trays.
    let preview = flow
        .extensions()
        .preview_operation_run(run_request("default"))
        .await
        .expect("preview")
        .into_inner();
    assert_eq!(preview.targets.len(), 1);
    let id = flow
        .client
        .create_operation_run(run_request("default"))
        .await
        .expect("create run")
        .into_inner()
        .id
        .expect("run id");
    let run = rackflow_testkit::wait::wait_run(
        &mut flow.extensions(),
        &id,
        "the run to end",
        DEADLINE,
        |r| {
            matches!(
                run_status(r),
                pb::OperationRunStatus::Completed
                    | pb::OperationRunStatus::CompletedWithFailures
                    | pb::OperationRunStatus::Failed
                    | pb::OperationRunStatus::Cancelled
            )
        },
    )
    .await;
    if run_status(&run) != pb::OperationRunStatus::Completed {
        // Say why: the rack's task and its report.
        let (tasks, _) = flow
            .store()
            .task_list(
                &Default::default(),
                rackflow_domain::run::Page {
                    offset: 0,
                    limit: 10,
                },
                true,
            )
            .await
            .expect("tasks");
        panic!(
            "run ended {:?}; tasks: {:#?}",
            run_status(&run),
            tasks
                .iter()
                .map(|t| (&t.status, &t.message, &t.report))
                .collect::<Vec<_>>()
        );
    }
    // The run reads back the object it applies.
    let stored = flow
        .client
        .get_operation_run(pb::GetOperationRunRequest {
            id: Some(id.clone()),
            include_stats: false,
        })
        .await
        .expect("get run")
        .into_inner()
        .operation_run
        .expect("run");
    let upgrade = stored
        .configuration
        .and_then(|c| c.operation)
        .and_then(|o| o.operation)
        .map(|pb::operation_run_operation::Operation::UpgradeFirmware(fw)| fw)
        .expect("upgrade");
    assert_eq!(upgrade.firmware_object, new);

    // Every tray matches the object, BIOS included (the whole object was
    // applied, not just the version Flow checks).
    let after = compare_trays(&rms, &new_json).await;
    assert!(after.matches_manifest, "{after:#?}");
    for node in COMPUTE {
        let firmware = rms.sim().node_firmware(RACK, node).expect("touched");
        assert_eq!(
            firmware.get("BIOS").map(String::as_str),
            Some("1.5.0"),
            "{node}"
        );
    }
    // The history lists the apply: every updated tray, under the rack.
    let records = history(&rms, &new).await;
    assert!(!records.is_empty());
    let mut applied: Vec<String> = records.iter().flat_map(|r| r.node_ids.clone()).collect();
    applied.sort();
    assert_eq!(applied, [COMPUTE[0], COMPUTE[1], SWITCH]);
    assert!(
        records
            .iter()
            .all(|r| r.rack_id == RACK && r.hardware_type == MODEL)
    );
    assert!(history(&rms, &old).await.is_empty());

    // A second restart keeps the history.
    rms.restart().await;
    assert_eq!(history(&rms, &new).await.len(), records.len());
    flow.stop().await;
    rms.stop().await;
}

async fn requests_naming_objects_are_refused_with_reasons(backend: Backend) {
    let server = ArtifactServer::start().await;
    let dirs = tempfile::tempdir().expect("temp dir");
    let rms = start_rms(&dirs).await;
    let (id, json) = object(&server, "refusals", "2.2.0");
    rms.client
        .clone()
        .add_firmware_object(rmpb::AddFirmwareObjectRequest {
            config_json: json,
            access_token: None,
            hardware_type: "GB300 NVL72".into(),
            set_default: false,
        })
        .await
        .expect("add");
    assert!(available(&rms, &id).await.available);
    let Some(mut flow) = TestServer::start_with(backend, flow_config(&rms)).await else {
        rms.stop().await;
        return;
    };
    fixture_fleet(&mut flow.client, 1).await;
    let whole_rack = pb::OperationTargetSpec {
        targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
            targets: vec![pb::RackTarget {
                identifier: Some(pb::rack_target::Identifier::Id(uuid(fixture_id(1)))),
                component_types: Vec::new(),
            }],
        })),
    };
    let upgrade = |object: &str| pb::UpgradeFirmwareRequest {
        target_spec: Some(whole_rack.clone()),
        firmware_object: object.into(),
        ..Default::default()
    };
    let unknown = flow
        .client
        .upgrade_firmware(upgrade("nope"))
        .await
        .expect_err("unknown");
    assert_eq!(unknown.code(), tonic::Code::FailedPrecondition);
    assert_eq!(unknown.message(), "firmware object nope not found");
    let both = flow
        .client
        .upgrade_firmware(pb::UpgradeFirmwareRequest {
            target_version: Some("2.0.0".into()),
            ..upgrade(&id)
        })
        .await
        .expect_err("both");
    assert_eq!(both.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        both.message(),
        "firmware_object and target_version are exclusive: set one"
    );
    // The object is for GB300 racks; the fixture rack is a GB200.
    let wrong_model = flow
        .client
        .upgrade_firmware(upgrade(&id))
        .await
        .expect_err("model");
    assert_eq!(
        wrong_model.code(),
        tonic::Code::InvalidArgument,
        "{wrong_model:?}"
    );
    assert!(
        wrong_model.message().contains("GB200 NVL72"),
        "{}",
        wrong_model.message()
    );
    // No default for any hardware type yet… the GB300 object is its type's
    // default, and no GB200 object exists.
    let no_default = flow
        .client
        .upgrade_firmware(upgrade("default"))
        .await
        .expect_err("default");
    assert!(
        no_default.message().contains("GB200 NVL72"),
        "{}",
        no_default.message()
    );
    // A schedule stores its request: it cannot name an object.
    let schedule = flow
        .client
        .create_task_schedule(pb::CreateTaskScheduleRequest {
            schedule: common::nightly_power_on("fw", 1).schedule,
            operation: Some(pb::ScheduledOperation {
                operation: Some(pb::scheduled_operation::Operation::UpgradeFirmware(
                    upgrade(&id),
                )),
            }),
        })
        .await
        .expect_err("schedule");
    assert_eq!(schedule.code(), tonic::Code::InvalidArgument);
    assert!(
        schedule.message().contains("cannot be used here"),
        "{}",
        schedule.message()
    );
    flow.stop().await;

    // The sim provider has no catalogue.
    let Some(mut sim) = TestServer::start(backend).await else {
        rms.stop().await;
        return;
    };
    fixture_fleet(&mut sim.client, 1).await;
    let refused = sim
        .client
        .upgrade_firmware(upgrade(&id))
        .await
        .expect_err("sim");
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused.message().contains("provider = \"rms\""),
        "{}",
        refused.message()
    );
    sim.stop().await;
    rms.stop().await;
}
