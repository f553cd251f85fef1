//! Firmware through the Redfish back end.
//!
//! Against sushy-tools as shipped, only what it really offers: its
//! UpdateService exists, but with the fake driver `FirmwareInventory` is
//! absent (404) and `SimpleUpdate` answers 500 — the tests pin that our
//! errors carry it. Everything else runs against `Flavor::Firmware`: OUR
//! extension of sushy-tools' Flask app (`tests/support/sushy_fw.py`), which
//! adds an UpdateService with SimpleUpdate and a multipart push, a
//! FirmwareInventory and a TaskService whose tasks progress over ~1 s.

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

use rackflow_testkit::redfish as support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rackflow_rms::job::JobError;
use rackflow_rms::redfish::{
    FirmwareImage, RedfishError, RedfishNode, TaskState, TaskStatus, UpdateMethod,
};
use support::{Emulator, FileServer, Flavor, Options, fast_config};

/// Records every progress reading.
#[derive(Clone, Default)]
struct Progress(Arc<Mutex<Vec<TaskStatus>>>);

impl Progress {
    fn callback(&self) -> impl Fn(&TaskStatus) + Send + Sync + 'static {
        let seen = self.0.clone();
        move |status: &TaskStatus| seen.lock().unwrap().push(status.clone())
    }
    fn seen(&self) -> Vec<TaskStatus> {
        self.0.lock().unwrap().clone()
    }
}

async fn versions(node: &RedfishNode) -> Vec<(String, String)> {
    node.firmware_inventory()
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.id, c.version))
        .collect()
}

fn pair(id: &str, version: &str) -> (String, String) {
    (id.to_string(), version.to_string())
}

fn image_file(emu: &Emulator, name: &str, contents: &str) -> std::path::PathBuf {
    let path = emu.dir().join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

#[tokio::test]
async fn inventory_lists_components_with_versions() {
    let Some(emu) = Emulator::start(Options::new(Flavor::Firmware)).await else {
        return;
    };
    let node = emu.node();
    let inventory = node.firmware_inventory().await.unwrap();
    assert_eq!(inventory.len(), 2);
    assert_eq!(inventory[0].id, "BIOS");
    assert_eq!(inventory[0].version, "0.9.0");
    assert_eq!(inventory[0].updateable, Some(true));
    assert_eq!(
        inventory[1].uri,
        "/redfish/v1/UpdateService/FirmwareInventory/BMC"
    );
    assert_eq!(inventory[1].version, "1.0.0");
    // Power still comes from sushy's own code underneath.
    assert!(node.power_state().await.is_ok());
}

#[tokio::test]
async fn multipart_push_reports_progress_and_changes_the_version() {
    let Some(emu) = Emulator::start(Options::new(Flavor::Firmware)).await else {
        return;
    };
    let node = emu.node();
    let file = image_file(&emu, "bmc-2.5.1.bin", "component=BMC\nversion=2.5.1\n");
    let image = FirmwareImage {
        file: Some(file),
        ..FirmwareImage::default()
    };
    let progress = Progress::default();
    let outcome = node
        .update_firmware(&image, &progress.callback())
        .await
        .unwrap();

    assert_eq!(outcome.method, UpdateMethod::MultipartPush);
    let last = outcome.task.expect("a task was followed");
    assert_eq!(last.state, TaskState::Completed);
    assert_eq!(last.percent, Some(100));
    assert_eq!(last.messages, vec!["BMC updated to 2.5.1".to_string()]);
    let seen = progress.seen();
    assert!(
        seen.iter()
            .any(|s| s.state == TaskState::Running && s.percent.is_some_and(|p| p > 0 && p < 100)),
        "no running progress seen: {seen:?}"
    );
    // Readings are reported on change only, and percent never goes back.
    assert!(seen.windows(2).all(|w| w[0] != w[1]), "{seen:?}");
    let percents: Vec<u8> = seen.iter().filter_map(|s| s.percent).collect();
    assert!(percents.windows(2).all(|w| w[0] <= w[1]), "{percents:?}");
    assert_eq!(seen.last(), Some(&last));
    assert!(
        last.uri.starts_with("/redfish/v1/TaskService/Tasks/"),
        "{}",
        last.uri
    );

    assert_eq!(
        versions(&node).await,
        vec![pair("BIOS", "0.9.0"), pair("BMC", "2.5.1")]
    );
}

#[tokio::test]
async fn simple_update_is_preferred_and_the_bmc_fetches_the_image() {
    let Some(emu) = Emulator::start(Options::new(Flavor::Firmware)).await else {
        return;
    };
    let server = FileServer::start(&emu.sushy.python).await;
    let uri = server.put("bios.bin", "version=1.4.0\n");
    let node = emu.node();
    let bios = node
        .firmware_inventory()
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.id == "BIOS")
        .unwrap();
    // A file is given too: SimpleUpdate still wins when advertised.
    let image = FirmwareImage {
        image_uri: Some(uri),
        transfer_protocol: Some("HTTP".into()),
        file: Some(image_file(&emu, "unused.bin", "version=9.9.9\n")),
        targets: vec![bios.uri],
    };
    let progress = Progress::default();
    let outcome = node
        .update_firmware(&image, &progress.callback())
        .await
        .unwrap();
    assert_eq!(outcome.method, UpdateMethod::SimpleUpdate);
    assert_eq!(outcome.task.unwrap().state, TaskState::Completed);
    assert!(!progress.seen().is_empty());
    assert_eq!(
        versions(&node).await,
        vec![pair("BIOS", "1.4.0"), pair("BMC", "1.0.0")]
    );
}

#[tokio::test]
async fn a_failing_task_is_an_error_with_the_bmc_message() {
    let Some(emu) = Emulator::start(Options::new(Flavor::Firmware)).await else {
        return;
    };
    let node = emu.node();
    let file = image_file(
        &emu,
        "bad.bin",
        "version=3.0.0\nfail=Signature verification failed for component BMC\n",
    );
    let image = FirmwareImage {
        file: Some(file),
        ..FirmwareImage::default()
    };
    let progress = Progress::default();
    let err = node
        .update_firmware(&image, &progress.callback())
        .await
        .unwrap_err();
    match &err {
        RedfishError::TaskFailed {
            task,
            state,
            message,
        } => {
            assert!(task.starts_with("/redfish/v1/TaskService/Tasks/"), "{task}");
            assert_eq!(*state, TaskState::Exception);
            assert_eq!(message, "Signature verification failed for component BMC");
        }
        other => panic!("expected TaskFailed, got {other:?}"),
    }
    assert!(
        err.to_string()
            .ends_with("ended Exception: Signature verification failed for component BMC"),
        "{err}"
    );
    assert_eq!(err.job_error(), JobError::Other);
    assert_eq!(
        progress.seen().last().map(|s| s.state.clone()),
        Some(TaskState::Exception)
    );
    // Nothing was flashed.
    assert_eq!(
        versions(&node).await,
        vec![pair("BIOS", "0.9.0"), pair("BMC", "1.0.0")]
    );
}

#[tokio::test]
async fn a_bare_task_monitor_is_followed_to_the_end() {
    let Some(emu) = Emulator::start(Options::new(Flavor::Firmware)).await else {
        return;
    };
    let node = emu.node();
    let file = image_file(&emu, "bmc.bin", "version=2.6.0\naccept=monitor\n");
    let image = FirmwareImage {
        file: Some(file),
        ..FirmwareImage::default()
    };
    let started = node.start_firmware_update(&image).await.unwrap();
    let monitor = started.task_uri.clone().unwrap();
    assert!(
        monitor.starts_with("/redfish/v1/TaskService/TaskMonitors/"),
        "{monitor}"
    );
    let last = node.wait_task(&monitor, &|_| {}).await.unwrap();
    assert_eq!(last.state, TaskState::Completed);
    assert_eq!(
        versions(&node).await,
        vec![pair("BIOS", "0.9.0"), pair("BMC", "2.6.0")]
    );
}

#[tokio::test]
async fn without_simple_update_the_push_is_used_and_without_push_a_file_is_refused() {
    let mut push_only = Options::new(Flavor::Firmware);
    push_only.env = vec![("RACKFLOW_FW_SIMPLE_UPDATE".into(), "0".into())];
    let Some(emu) = Emulator::start(push_only).await else {
        return;
    };
    let node = emu.node();
    let image = FirmwareImage {
        image_uri: Some("http://127.0.0.1:9/never-fetched.bin".into()),
        file: Some(image_file(&emu, "bmc.bin", "version=2.7.0\n")),
        ..FirmwareImage::default()
    };
    let outcome = node.update_firmware(&image, &|_| {}).await.unwrap();
    assert_eq!(outcome.method, UpdateMethod::MultipartPush);
    assert_eq!(
        versions(&node).await,
        vec![pair("BIOS", "0.9.0"), pair("BMC", "2.7.0")]
    );

    let mut simple_only = Options::new(Flavor::Firmware);
    simple_only.env = vec![("RACKFLOW_FW_MULTIPART".into(), "0".into())];
    let Some(emu) = Emulator::start(simple_only).await else {
        return;
    };
    let node = emu.node();
    let image = FirmwareImage {
        file: Some(image_file(&emu, "bmc.bin", "version=2.7.0\n")),
        ..FirmwareImage::default()
    };
    let err = node.update_firmware(&image, &|_| {}).await.unwrap_err();
    match &err {
        RedfishError::UpdateUnsupported(why) => assert_eq!(
            why,
            "/redfish/v1/UpdateService offers only SimpleUpdate, and the image has an image file only"
        ),
        other => panic!("expected UpdateUnsupported, got {other:?}"),
    }
}

#[tokio::test]
async fn bmc_refusals_of_an_update_carry_its_message() {
    let Some(emu) = Emulator::start(Options::new(Flavor::Firmware)).await else {
        return;
    };
    let node = emu.node();
    // The BMC cannot download the image: 400 with its ExtendedInfo message.
    let image = FirmwareImage {
        image_uri: Some("http://127.0.0.1:9/missing.bin".into()),
        ..FirmwareImage::default()
    };
    match node.update_firmware(&image, &|_| {}).await.unwrap_err() {
        RedfishError::Http {
            status, message, ..
        } => {
            assert_eq!(status, 400);
            assert!(
                message.starts_with(
                    "Unable to download the image from http://127.0.0.1:9/missing.bin"
                ),
                "{message}"
            );
        }
        other => panic!("expected Http 400, got {other:?}"),
    }
    // A missing local file is ours, not the BMC's.
    let image = FirmwareImage {
        file: Some(emu.dir().join("does-not-exist.bin")),
        ..FirmwareImage::default()
    };
    let err = node.update_firmware(&image, &|_| {}).await.unwrap_err();
    assert!(matches!(err, RedfishError::ImageRead { .. }), "{err:?}");
    assert_eq!(err.job_error(), JobError::FileNotFound);
}

#[tokio::test]
async fn sushy_as_shipped_has_no_firmware_inventory_and_fails_simple_update() {
    let Some(emu) = Emulator::start(Options::new(Flavor::Sushy)).await else {
        return;
    };
    let node = emu.node();
    let service = node.update_service().await.unwrap();
    assert!(service.simple_update.is_some());
    assert_eq!(service.multipart_push_uri, None);
    match node.firmware_inventory().await.unwrap_err() {
        RedfishError::NotFound { uri, .. } => {
            assert!(
                uri.ends_with("/redfish/v1/UpdateService/FirmwareInventory"),
                "{uri}"
            )
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
    let system = node.system_uri().await.unwrap();
    let image = FirmwareImage {
        image_uri: Some("http://127.0.0.1:9/bios.bin".into()),
        targets: vec![system],
        ..FirmwareImage::default()
    };
    match node.update_firmware(&image, &|_| {}).await.unwrap_err() {
        RedfishError::Http {
            status, message, ..
        } => {
            assert_eq!(status, 500);
            assert_eq!(message, "Failed fetching BIOS information");
        }
        other => panic!("expected Http 500, got {other:?}"),
    }
}

#[tokio::test]
async fn busy_task_reads_are_tolerated_for_the_grace_period_only() {
    let Some(emu) = Emulator::start(Options::new(Flavor::Firmware)).await else {
        return;
    };
    // Three 503s in a row, 50 ms apart: within a 2 s grace.
    let node = emu.node();
    let image = FirmwareImage {
        file: Some(image_file(&emu, "busy.bin", "version=2.8.0\nflaky=3\n")),
        ..FirmwareImage::default()
    };
    let outcome = node.update_firmware(&image, &|_| {}).await.unwrap();
    assert_eq!(outcome.task.unwrap().state, TaskState::Completed);
    assert_eq!(
        versions(&node).await,
        vec![pair("BIOS", "0.9.0"), pair("BMC", "2.8.0")]
    );

    // Without a grace the first 503 ends the wait, with the BMC's message.
    let mut config = fast_config();
    config.task_status_error_grace = Duration::ZERO;
    let impatient = RedfishNode::new(emu.client(None, config));
    let image = FirmwareImage {
        file: Some(image_file(&emu, "busy2.bin", "version=2.9.0\nflaky=3\n")),
        ..FirmwareImage::default()
    };
    match impatient
        .update_firmware(&image, &|_| {})
        .await
        .unwrap_err()
    {
        RedfishError::Http {
            status, message, ..
        } => {
            assert_eq!(status, 503);
            assert_eq!(message, "The BMC is busy");
        }
        other => panic!("expected Http 503, got {other:?}"),
    }
}

#[tokio::test]
async fn a_task_that_outlives_the_timeout_is_a_timeout() {
    let mut slow = Options::new(Flavor::Firmware);
    slow.env = vec![("RACKFLOW_FW_TASK_SECONDS".into(), "60".into())];
    let Some(emu) = Emulator::start(slow).await else {
        return;
    };
    let mut config = fast_config();
    config.task_timeout = Duration::from_millis(300);
    let node = RedfishNode::new(emu.client(None, config));
    let image = FirmwareImage {
        file: Some(image_file(&emu, "slow.bin", "version=3.1.0\n")),
        ..FirmwareImage::default()
    };
    let err = node.update_firmware(&image, &|_| {}).await.unwrap_err();
    match &err {
        RedfishError::TaskTimeout { state, waited, .. } => {
            assert_eq!(*state, TaskState::Running);
            assert!(*waited >= Duration::from_millis(300), "{waited:?}");
        }
        other => panic!("expected TaskTimeout, got {other:?}"),
    }
    assert_eq!(err.job_error(), JobError::Timeout);
}
