//! `rackflow rms sync` end to end (issue 12): a flow server in-process with
//! a generated fleet, a rack manager (sim back end) in-process, and the
//! built binary registering Flow's inventory with it.

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use common::{Server, import_generated_fleet, rackflow};
use rackflow_api::rack_manager as rmpb;
use rackflow_testkit::rms::TestRms;
use serde_json::Value;

/// `(rack id, node id) → node type` of every node the rack manager has.
fn registered(runtime: &tokio::runtime::Runtime, rms: &TestRms) -> BTreeMap<(String, String), i32> {
    let mut client = rms.client.clone();
    runtime
        .block_on(client.list_node_inventory(rmpb::ListNodeInventoryRequest {}))
        .unwrap()
        .into_inner()
        .nodes
        .into_iter()
        .map(|n| ((n.rack_id, n.node_id), n.r#type))
        .collect()
}

#[test]
fn rms_sync_registers_every_component_with_its_node_type_and_is_idempotent() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let rms = runtime.block_on(TestRms::start_custom(&[], |_| {}, None));
    let rack_manager = format!("http://{}", rms.addr);
    let address = rack_manager.clone();
    let server = Server::start_with(move |config| {
        config.provider = rackflow_server::config::Provider::Rms;
        config.rms.address = address;
    });
    let s = Some(server.addr);
    let fleet = import_generated_fleet(s, 2);

    // What the fleet says each node must be.
    let mut expected = BTreeMap::new();
    for rack in fleet["racks"].as_array().unwrap() {
        let gb300 = rack["model"].as_str().unwrap().contains("GB300");
        for c in rack["components"].as_array().unwrap() {
            let maker = c["manufacturer"].as_str().unwrap().to_ascii_lowercase();
            let ty = match (c["type"].as_str().unwrap(), gb300) {
                ("Compute", false) => rmpb::NodeType::ComputeGb200Nvidia,
                ("Compute", true) => rmpb::NodeType::ComputeGb300Nvidia,
                ("NVSwitch", false) => rmpb::NodeType::SwitchGb200Nvidia,
                ("NVSwitch", true) => rmpb::NodeType::SwitchGb300Nvidia,
                ("PowerShelf", false) if maker.contains("delta") => {
                    rmpb::NodeType::PowershelfGb200Delta
                }
                ("PowerShelf", false) => rmpb::NodeType::PowershelfGb200Liteon,
                ("PowerShelf", true) if maker.contains("delta") => {
                    rmpb::NodeType::PowershelfGb300Delta
                }
                ("PowerShelf", true) => rmpb::NodeType::PowershelfGb300Liteon,
                (other, _) => panic!("unexpected type {other}"),
            };
            expected.insert(
                (
                    rack["external_id"].as_str().unwrap().to_string(),
                    c["external_id"].as_str().unwrap().to_string(),
                ),
                ty as i32,
            );
        }
    }
    assert_eq!(expected.len(), 70);

    // A dry run lists every node and registers none.
    let dry = rackflow(
        s,
        &[
            "rms",
            "sync",
            "--rack-manager",
            &rack_manager,
            "--dry-run",
            "-o",
            "json",
        ],
    )
    .ok()
    .json();
    assert_eq!(dry["messages"].as_array().unwrap().len(), 70, "{dry}");
    assert_eq!(dry["sent"], 0);
    assert!(registered(&runtime, &rms).is_empty());
    // Nothing registered yet: every component is missing from the rack
    // manager (`fleet drift` without a bundle is ValidateComponents).
    let drift = rackflow(s, &["fleet", "drift", "-o", "json"]).ok().json();
    assert_eq!(
        (
            &drift["missing"],
            &drift["unexpected"],
            &drift["mismatch"],
            &drift["matching"]
        ),
        (
            &Value::from(70),
            &Value::from(0),
            &Value::from(0),
            &Value::from(0)
        ),
        "{drift}"
    );
    assert_eq!(drift["diffs"].as_array().unwrap().len(), 70);

    let synced: Value = rackflow(
        s,
        &["rms", "sync", "--rack-manager", &rack_manager, "-o", "json"],
    )
    .ok()
    .json();
    assert_eq!(synced["sent"], 70, "{synced}");
    assert_eq!(synced["registered"], 70, "{synced}");
    assert_eq!(synced["refused"], 0, "{synced}");
    assert_eq!(synced["skipped"], Value::Array(Vec::new()), "{synced}");
    assert_eq!(registered(&runtime, &rms), expected);
    let drift = rackflow(s, &["fleet", "drift", "-o", "json"]).ok().json();
    assert_eq!(drift["total_diffs"], 0, "{drift}");
    assert_eq!(drift["matching"], 70, "{drift}");
    let table = rackflow(s, &["fleet", "drift"]).ok();
    assert!(
        table
            .stdout
            .contains("0 missing, 0 unexpected, 0 mismatched, 70 matching"),
        "{}",
        table.stdout
    );

    // Again: nothing changes, and the rack manager says no node was updated.
    let again = rackflow(
        s,
        &["rms", "sync", "--rack-manager", &rack_manager, "-o", "json"],
    )
    .ok()
    .json();
    assert_eq!(
        again["messages"],
        serde_json::json!(["Created 70 nodes"]),
        "{again}"
    );
    assert_eq!(registered(&runtime, &rms), expected);

    // A rack manager that is not there: a clear error, non-zero exit.
    let down = rackflow(s, &["rms", "sync", "--rack-manager", "http://127.0.0.1:1"]);
    assert_ne!(down.code, Some(0), "{}", down.stdout);
    assert!(
        down.stderr
            .contains("register nodes with the rack manager at http://127.0.0.1:1"),
        "{}",
        down.stderr
    );
    drop(server);
    runtime.block_on(rms.stop());
}
