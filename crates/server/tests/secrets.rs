//! Firmware credentials at rest (issue 14, decision C5), on both stores:
//! `authentication_data` is sealed before it is stored (the stored text
//! is not the plaintext, and opens with the key), the component manager of
//! each step receives its plaintext, no RPC returns it, and a key rotation
//! re-seals what is stored so that work created before it still runs on
//! the new key alone.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rackflow_api::v1 as pb;
use rackflow_engine::sim::SimFleet;
use rackflow_security::secrets::{DataKeys, generate_key};
use rackflow_server::Config;
use rackflow_testkit::both_stores;
use rackflow_testkit::wait::wait_run;
use rackflow_testkit::{
    Backend, TestServer, create_fast_firmware_rule, fixture_fleet, fixture_id, run_request,
    upgrade, uuid,
};
use uuid::Uuid;

both_stores!(credentials_are_sealed_delivered_never_returned_and_survive_a_rotation);

const DEADLINE: Duration = Duration::from_secs(60);
const SHARED: &str = "root:first-secret-0x5eed";
const COMPUTE: &str = "compute-secret-0xc0de";
const NVSWITCH: &str = "switch-secret-0x5w17";

fn write_key(dir: &Path, name: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, generate_key()).expect("key file");
    path
}

fn config(key: &Path, previous: Option<&Path>, dispatcher: bool) -> Config {
    let mut config = Config::default();
    config.dispatcher.enabled = dispatcher;
    config.dispatcher.poll_interval_ms = 100;
    config.sim.firmware_update_ms = 40;
    config.sim.power_ms = 10;
    config.sim.jitter = 0.0;
    config.secrets.key_file = Some(key.to_path_buf());
    config.secrets.previous_key_files = previous.into_iter().map(Path::to_path_buf).collect();
    config
}

fn rack_one() -> pb::OperationTargetSpec {
    pb::OperationTargetSpec {
        targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
            targets: vec![pb::RackTarget {
                identifier: Some(pb::rack_target::Identifier::Id(uuid(fixture_id(1)))),
                component_types: vec![],
            }],
        })),
    }
}

async fn wait_task(server: &mut TestServer, id: &str) -> pb::Task {
    let mut changes = server.waiter(format!("task {id}"), DEADLINE);
    loop {
        let task = server
            .client
            .get_tasks_by_i_ds(pb::GetTasksByIDsRequest {
                task_ids: vec![pb::Uuid { id: id.into() }],
            })
            .await
            .expect("get task")
            .into_inner()
            .tasks
            .remove(0);
        if task.finished_at.is_some() && task.status != pb::TaskStatus::Waiting as i32 {
            return task;
        }
        changes.next(&task).await;
    }
}

async fn stored_envelope(server: &TestServer, task_id: &str) -> String {
    let task = server
        .store()
        .task_get(Uuid::parse_str(task_id).expect("uuid"))
        .await
        .expect("read task")
        .expect("task stored");
    let sealed = task
        .information
        .firmware
        .and_then(|f| f.authentication_data)
        .expect("sealed credentials stored with the task");
    sealed.0
}

async fn credentials_are_sealed_delivered_never_returned_and_survive_a_rotation(backend: Backend) {
    let dir = tempfile::tempdir().expect("dir");
    let key_a = write_key(dir.path(), "a.key");
    let key_b = write_key(dir.path(), "b.key");
    let fleet = SimFleet::new(config(&key_a, None, true).sim);
    let Some(mut server) =
        TestServer::start_with_fleet(backend, config(&key_a, None, true), Arc::clone(&fleet)).await
    else {
        return;
    };
    fixture_fleet(&mut server.client, 2).await;
    create_fast_firmware_rule(&mut server.client, &["Compute", "NvSwitch"], "20ms").await;

    // A plain upgrade with one shared credential.
    let submitted = server
        .client
        .upgrade_firmware(pb::UpgradeFirmwareRequest {
            target_spec: Some(rack_one()),
            target_version: Some("2.0.0".into()),
            authentication_data: Some(pb::FirmwareAuthenticationData {
                value: Some(pb::firmware_authentication_data::Value::Shared(
                    SHARED.into(),
                )),
            }),
            ..Default::default()
        })
        .await
        .expect("upgrade with credentials")
        .into_inner();
    let task_id = submitted.task_ids[0].id.clone();
    let task = wait_task(&mut server, &task_id).await;
    assert_eq!(task.status, pb::TaskStatus::Completed as i32, "{task:#?}");
    // The hardware got the plaintext...
    for component in ["r-0001-compute-00", "r-0001-nvswitch-00"] {
        assert_eq!(
            fleet
                .firmware_credentials(component)
                .map(|s| s.expose().to_string())
                .as_deref(),
            Some(SHARED),
            "{component}"
        );
    }
    // ...the store holds only an envelope that opens with the key...
    let envelope = stored_envelope(&server, &task_id).await;
    assert!(!envelope.contains(SHARED) && !envelope.contains("first-secret"));
    let keys_a = rackflow_security::secrets::SecretsSection {
        key_file: Some(key_a.clone()),
        previous_key_files: vec![],
    }
    .keys()
    .expect("key")
    .expect("key");
    assert!(envelope.starts_with(&format!("rfs1:{}:", keys_a.active_id())));
    let opened = keys_a.open(&envelope).expect("opens");
    assert!(String::from_utf8_lossy(&opened).contains(SHARED));
    // ...and no RPC answers with it.
    let read = server
        .client
        .get_tasks_by_i_ds(pb::GetTasksByIDsRequest {
            task_ids: vec![pb::Uuid {
                id: task_id.clone(),
            }],
        })
        .await
        .expect("read")
        .into_inner();
    assert!(!format!("{read:?}").contains("first-secret"));

    // A run with one credential per component type, created before the
    // rotation but run after it.
    server
        .restart_with_fleet(config(&key_a, None, false), Arc::clone(&fleet))
        .await;
    let mut request = run_request("sealed", 100, "s", "o", 1);
    upgrade(&mut request).target_spec = Some(rack_one());
    // Rack one runs 2.0.0 already (the upgrade above): a newer version, so
    // the trays are flashed (and handed their credentials) rather than
    // skipped as already there.
    upgrade(&mut request).target_version = Some("3.0.0".into());
    upgrade(&mut request).authentication_data = Some(pb::FirmwareAuthenticationData {
        value: Some(pb::firmware_authentication_data::Value::PerComponent(
            pb::PerComponentFirmwareAuthenticationData {
                compute: Some(COMPUTE.into()),
                nvswitch: Some(NVSWITCH.into()),
                powershelf: None,
            },
        )),
    });
    let run_id = server
        .client
        .create_operation_run(request)
        .await
        .expect("create run with credentials")
        .into_inner()
        .id
        .expect("id");
    let run = server
        .client
        .get_operation_run(pb::GetOperationRunRequest {
            id: Some(run_id.clone()),
            include_stats: false,
        })
        .await
        .expect("get run")
        .into_inner();
    assert!(
        !format!("{run:?}").contains(COMPUTE),
        "no RPC returns credentials"
    );

    // Rotation: key B active, key A still known; everything re-sealed.
    server
        .restart_with_fleet(config(&key_b, Some(&key_a), false), Arc::clone(&fleet))
        .await;
    let rotated = server
        .extensions()
        .rotate_secrets(pb::RotateSecretsRequest {})
        .await
        .expect("rotate")
        .into_inner();
    assert_eq!(rotated.failures, Vec::<String>::new());
    assert_eq!(rotated.resealed, 2, "the task and the run: {rotated:?}");
    let again = server
        .extensions()
        .rotate_secrets(pb::RotateSecretsRequest {})
        .await
        .expect("rotate again")
        .into_inner();
    assert_eq!((again.resealed, again.already_current), (0, 2));
    let envelope = stored_envelope(&server, &task_id).await;
    assert!(envelope.starts_with(&format!("rfs1:{}:", rotated.active_key_id)));

    // Key A gone: the run created before the rotation still runs, and each
    // step's hardware gets its own credential.
    server
        .restart_with_fleet(config(&key_b, None, true), Arc::clone(&fleet))
        .await;
    let mut watch = server.extensions();
    let done = wait_run(&mut watch, &run_id, "the run to finish", DEADLINE, |run| {
        run.summary
            .as_ref()
            .and_then(|s| s.state)
            .is_some_and(|s| s.status() == pb::OperationRunStatus::Completed)
    })
    .await;
    assert!(done.summary.is_some());
    assert_eq!(
        fleet
            .firmware_credentials("r-0001-compute-00")
            .map(|s| s.expose().to_string())
            .as_deref(),
        Some(COMPUTE)
    );
    assert_eq!(
        fleet
            .firmware_credentials("r-0001-nvswitch-00")
            .map(|s| s.expose().to_string())
            .as_deref(),
        Some(NVSWITCH)
    );
    // Without any key, sealed work cannot be read, and new credentials are
    // refused as the reference does.
    let no_key = DataKeys::new([0; 32], vec![]);
    assert!(no_key.open(&envelope).is_err());
    let mut plain = Config::default();
    plain.dispatcher.enabled = false;
    server.restart_with_fleet(plain, Arc::clone(&fleet)).await;
    let refused = server
        .client
        .upgrade_firmware(pb::UpgradeFirmwareRequest {
            target_spec: Some(rack_one()),
            authentication_data: Some(pb::FirmwareAuthenticationData {
                value: Some(pb::firmware_authentication_data::Value::Shared("x".into())),
            }),
            ..Default::default()
        })
        .await
        .expect_err("no key, no credentials");
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    server.stop().await;
}
