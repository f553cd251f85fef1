//! Issue 12, acceptance: kill -9 of Flow while the rack manager is
//! flashing. A real `rackflow serve` process (provider `rms`,
//! `sync_on_start`) drives an in-process rack manager (sim back end, 4 s
//! per flash); it is killed with SIGKILL once every compute tray of the
//! rack is flashing and started again on the same database. The restarted
//! Flow re-registers its inventory (the busy nodes are refused and left
//! alone), polls the same rack-manager jobs to completion and goes on with
//! the switches: the rack manager saw exactly one update per tray, and the
//! inventory records the new versions as observed.

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{
    ServeProcess, create_fast_default_rule, free_addr, import_generated_fleet, path_str, rackflow,
    temp_path,
};
use rackflow_rms::backend::sim::SimBackendConfig;
use rackflow_testkit::rms::TestRms;
use rackflow_testkit::wait::wait_until_blocking;
use serde_json::Value;

const VERSION: &str = "fw-26.01.0";

/// Update calls the rack manager's BMCs saw, per node.
fn updates(rms: &TestRms) -> BTreeMap<String, usize> {
    let mut per_node = BTreeMap::new();
    for call in rms.sim().calls() {
        if call.call == "update_firmware" {
            *per_node.entry(call.node_id).or_default() += 1;
        }
    }
    per_node
}

#[test]
fn kill_9_mid_flash_the_restarted_flow_polls_the_same_jobs_one_update_per_tray() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let image = format!("version={VERSION}\n");
    let rms = runtime.block_on(TestRms::start_custom(
        &[
            (&format!("compute-{VERSION}.fwpkg"), image.as_bytes()),
            (&format!("nvswitch-{VERSION}.fwpkg"), image.as_bytes()),
        ],
        |config| {
            config.nodes.sim = SimBackendConfig {
                power_latency_ms: 10,
                read_latency_ms: 1,
                firmware_latency_ms: 4_000,
                jitter: 0.0,
                ..SimBackendConfig::default()
            };
        },
        None,
    ));
    let db = temp_path("rms-kill9.db");
    let config = temp_path("rms-kill9.toml");
    std::fs::write(
        &config,
        format!(
            r#"
shutdown_grace_secs = 1
provider = "rms"

[dispatcher]
enabled = false

[rms]
address = "http://{}"
poll_interval_ms = 50
job_timeout_secs = 120
sync_on_start = true
"#,
            rms.addr
        ),
    )
    .unwrap();
    let addr = free_addr();
    let mut server = ServeProcess::start(addr, &db, &config);
    let s = Some(addr);
    let fleet = import_generated_fleet(s, 1);
    let rack = &fleet["racks"][0];
    let rack_id = rack["external_id"].as_str().unwrap().to_string();
    let trays = |ty: &str| -> Vec<String> {
        rack["components"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["type"] == ty)
            .map(|c| c["external_id"].as_str().unwrap().to_string())
            .collect()
    };
    let (compute, switches) = (trays("Compute"), trays("NVSwitch"));
    create_fast_default_rule(s, "100ms");
    let synced = rackflow(
        s,
        &["rms", "sync", "--config", path_str(&config), "-o", "json"],
    )
    .ok()
    .json();
    assert_eq!(synced["registered"], 35, "{synced}");

    let submitted = rackflow(
        s,
        &[
            "firmware",
            "upgrade",
            "--rack-external-ids",
            &rack_id,
            "--target-version",
            VERSION,
            "-o",
            "json",
        ],
    )
    .ok()
    .json();
    let task = submitted["task_ids"][0].as_str().unwrap().to_string();

    // Every compute tray is flashing (4 s each): kill -9 now.
    wait_until_blocking(
        "every compute tray to be flashing",
        Duration::from_secs(30),
        Duration::from_millis(20),
        || (updates(&rms).len() == compute.len()).then_some(()),
        || format!("{:?}\n{}", updates(&rms), server.log_text()),
    );
    server.kill9();
    server.restart();

    let done = wait_until_blocking(
        "the task to finish after the restart",
        Duration::from_secs(90),
        Duration::from_millis(200),
        || {
            let t = rackflow(s, &["task", "get", &task, "-o", "json"])
                .ok()
                .json()["tasks"][0]
                .clone();
            (t["status"] != "running" && t["status"] != "pending").then_some(t)
        },
        || server.log_text(),
    );
    assert_eq!(
        done["status"],
        "completed",
        "{done:#}\n{}",
        server.log_text()
    );
    // The restart's sync found the flashing trays busy and left them alone.
    let log = server.log_text();
    assert!(
        log.contains("inventory partly registered with the rack manager")
            && log.contains("already registered and busy with job"),
        "{log}"
    );
    let mut expected: BTreeMap<String, usize> = BTreeMap::new();
    for tray in compute.iter().chain(&switches) {
        expected.insert(tray.clone(), 1);
    }
    assert_eq!(
        updates(&rms),
        expected,
        "exactly one update per tray, none sent again after the kill"
    );
    let rack_view: Value = rackflow(
        s,
        &["rack", "get", &rack_id, "--with-components", "-o", "json"],
    )
    .ok()
    .json();
    for c in rack_view["components"].as_array().unwrap() {
        if c["type"] == "Compute" || c["type"] == "NVSwitch" {
            assert_eq!(c["firmware_version"], VERSION, "{c:#}");
            assert!(c["firmware_observed_at"].is_string(), "{c:#}");
        }
    }
    drop(server);
    runtime.block_on(rms.stop());
    let _ = std::fs::remove_file(&config);
}
