//! `rackflow rms firmware-object …` and `rackflow fleet drift
//! --firmware-object` end to end (issue 35): the built binary against a
//! rack manager (sim back end) in-process whose artifacts come from an HTTP
//! server of the test, and a flow server with a generated fleet.

// Test helpers may unwrap: the panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Server, import_generated_fleet, path_str, rackflow, temp_path};
use rackflow_testkit::artifacts::{ArtifactServer, manifest};
use rackflow_testkit::rms::TestRms;
use serde_json::Value;

const MODEL: &str = "GB200 NVL72";

#[test]
fn the_catalogue_through_the_cli() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let rms = runtime.block_on(TestRms::start_custom(&[], |_| {}, None));
    let artifacts = runtime.block_on(ArtifactServer::start());
    let rack_manager = format!("http://{}", rms.addr);
    let address = rack_manager.clone();
    let server = Server::start_with(move |config| {
        config.provider = rackflow_server::config::Provider::Rms;
        config.rms.address = address;
    });
    let s = Some(server.addr);
    let fleet = import_generated_fleet(s, 2);
    let rm = ["--rack-manager", rack_manager.as_str()];

    let (url, sha) = artifacts.put("cli/bmc.fwpkg", b"version=9.9.9\ncomponent=BMC\n");
    let manifest_file = temp_path("manifest.json");
    std::fs::write(
        &manifest_file,
        manifest(
            "GB200-NVL72",
            "cli",
            &[("Compute Node", &[("BMC", "9.9.9", &url, &sha)])],
        ),
    )
    .unwrap();
    let id = "GB200-NVL72_cli";

    // Add and wait: available, its hardware type's first object → default.
    let added = rackflow(
        None,
        &[
            &[
                "rms",
                "firmware-object",
                "add",
                path_str(&manifest_file),
                "--hardware-type",
                MODEL,
                "--wait",
                "20",
                "-o",
                "json",
            ][..],
            &rm[..],
        ]
        .concat(),
    )
    .ok()
    .json();
    assert_eq!(
        (
            added["id"].as_str(),
            added["available"].as_bool(),
            added["is_default"].as_bool()
        ),
        (Some(id), Some(true), Some(true)),
        "{added}"
    );
    assert_eq!(added["components"][0]["version"], "9.9.9");
    let table = rackflow(
        None,
        &[&["rms", "firmware-object", "list"][..], &rm[..]].concat(),
    )
    .ok();
    assert!(
        table.stdout.contains(id) && table.stdout.contains("available"),
        "{}",
        table.stdout
    );
    let shown = rackflow(
        None,
        &[&["rms", "firmware-object", "get", id][..], &rm[..]].concat(),
    )
    .ok();
    assert!(
        shown.stdout.contains("Compute Node") && shown.stdout.contains("9.9.9"),
        "{}",
        shown.stdout
    );

    // A manifest that does not parse is refused with the reason.
    let bad = temp_path("bad.json");
    std::fs::write(&bad, "{\"ProductName\": \"P\"}").unwrap();
    let refused = rackflow(
        None,
        &[
            &[
                "rms",
                "firmware-object",
                "add",
                path_str(&bad),
                "--hardware-type",
                MODEL,
            ][..],
            &rm[..],
        ]
        .concat(),
    );
    assert_ne!(refused.code, Some(0));
    assert!(
        refused.stderr.contains("invalid config_json") && refused.stderr.contains("'Milestones'"),
        "{}",
        refused.stderr
    );

    // Drift against the object: the GB200 racks' compute trays run
    // something else; racks of another model are not covered.
    let drift = rackflow(
        s,
        &[
            &["fleet", "drift", "--firmware-object", id, "-o", "json"][..],
            &rm[..],
        ]
        .concat(),
    )
    .ok()
    .json();
    assert_eq!(drift["bundle"], format!("firmware object {id}"));
    let gb200_racks: Vec<&Value> = fleet["racks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["model"] == MODEL)
        .collect();
    let differing: Vec<&Value> = drift["components"].as_array().unwrap().iter().collect();
    assert!(!differing.is_empty(), "{drift}");
    assert!(
        differing
            .iter()
            .all(|c| c["type"] == "Compute" && c["expected"] == "9.9.9"),
        "{drift}"
    );
    let compute_trays: usize = gb200_racks
        .iter()
        .map(|r| {
            r["components"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["type"] == "Compute")
                .count()
        })
        .sum();
    assert_eq!(differing.len(), compute_trays, "{drift}");
    let unknown = rackflow(
        s,
        &[
            &["fleet", "drift", "--firmware-object", "nope"][..],
            &rm[..],
        ]
        .concat(),
    );
    assert_ne!(unknown.code, Some(0));
    assert!(
        unknown.stderr.contains("firmware object nope not found"),
        "{}",
        unknown.stderr
    );

    // Compare a registered rack: mismatched before any apply.
    rackflow(s, &[&["rms", "sync"][..], &rm[..]].concat()).ok();
    let rack = gb200_racks[0]["external_id"].as_str().unwrap();
    let compared = rackflow(
        None,
        &[
            &[
                "rms",
                "firmware-object",
                "compare",
                id,
                "--rack",
                rack,
                "-o",
                "json",
            ][..],
            &rm[..],
        ]
        .concat(),
    );
    assert_ne!(
        compared.code,
        Some(0),
        "a mismatching rack fails the command"
    );
    let compared = compared.json();
    assert_eq!(compared["matches"], false);
    let statuses: Vec<&str> = compared["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert!(
        !statuses.is_empty() && statuses.iter().all(|s| *s == "MISMATCHED"),
        "{compared}"
    );

    // History (none yet), default, delete.
    let history = rackflow(
        None,
        &[
            &[
                "rms",
                "firmware-object",
                "history",
                "--object",
                id,
                "-o",
                "json",
            ][..],
            &rm[..],
        ]
        .concat(),
    )
    .ok()
    .json();
    assert_eq!(history, Value::Array(Vec::new()));
    rackflow(
        None,
        &[&["rms", "firmware-object", "set-default", id][..], &rm[..]].concat(),
    )
    .ok();
    let deleted = rackflow(
        None,
        &[&["rms", "firmware-object", "delete", id][..], &rm[..]].concat(),
    )
    .ok();
    assert!(
        deleted
            .stdout
            .contains(&format!("deleted firmware object {id}")),
        "{}",
        deleted.stdout
    );
    let again = rackflow(
        None,
        &[&["rms", "firmware-object", "delete", id][..], &rm[..]].concat(),
    );
    assert_ne!(again.code, Some(0));
    assert!(again.stderr.contains("not found"), "{}", again.stderr);
    std::fs::remove_file(&manifest_file).ok();
    std::fs::remove_file(&bad).ok();
    drop(server);
    runtime.block_on(rms.stop());
}
