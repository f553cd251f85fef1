//! End to end: a real flow server in-process on a free loopback port with a
//! temporary SQLite file, driven by the built `rackflow` binary.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{SERVE_LISTENING, Server, path_str, rackflow, temp_path};
use rackflow_testkit::wait::{Lines, wait_exit};

#[test]
fn fleet_import_racks_and_runs_through_the_binary() {
    let server = Server::start();
    let s = Some(server.addr);

    // version: client and server.
    let version = rackflow(s, &["version"]).ok();
    assert!(
        version.stdout.contains("client: rackflow"),
        "{}",
        version.stdout
    );
    assert!(
        version.stdout.contains("server: rackflow"),
        "{}",
        version.stdout
    );

    // fleet generate: deterministic JSON.
    let generated = rackflow(None, &["fleet", "generate", "--racks", "6", "--seed", "42"]).ok();
    let again = rackflow(None, &["fleet", "generate", "--racks", "6", "--seed", "42"]).ok();
    assert_eq!(generated.stdout, again.stdout);
    let fleet = generated.json();
    assert_eq!(fleet["racks"].as_array().unwrap().len(), 6);
    let fleet_file = temp_path("fleet.json");
    std::fs::write(&fleet_file, &generated.stdout).unwrap();

    // fleet import, twice: the second run creates nothing.
    let first = rackflow(s, &["fleet", "import", path_str(&fleet_file)]).ok();
    assert!(
        first.stdout.contains("created 6, skipped 0"),
        "{}",
        first.stdout
    );
    let second = rackflow(s, &["-o", "json", "fleet", "import", path_str(&fleet_file)]).ok();
    let summary = second.json();
    assert_eq!(summary["created"].as_array().unwrap().len(), 0);
    assert_eq!(summary["skipped"].as_array().unwrap().len(), 6);

    // rack list / get.
    let racks = rackflow(s, &["rack", "list", "-o", "json"]).ok().json();
    assert_eq!(racks["total"], 6);
    let mut external: Vec<&str> = racks["racks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["external_id"].as_str().unwrap())
        .collect();
    external.sort_unstable();
    assert_eq!(
        external,
        ["r-0001", "r-0002", "r-0003", "r-0004", "r-0005", "r-0006"]
    );
    let table = rackflow(s, &["rack", "list", "--with-components"]).ok();
    assert!(table.stdout.starts_with("EXTERNAL ID"), "{}", table.stdout);
    assert!(
        table
            .stdout
            .contains("18 Compute, 9 NVSwitch, 8 PowerShelf"),
        "{}",
        table.stdout
    );
    assert!(table.stdout.contains("6 of 6 racks"), "{}", table.stdout);
    let page = rackflow(
        s,
        &[
            "rack", "list", "-o", "json", "--limit", "2", "--offset", "1",
        ],
    )
    .ok();
    assert_eq!(page.json()["racks"].as_array().unwrap().len(), 2);
    let rack = rackflow(
        s,
        &["rack", "get", "r-0002", "--with-components", "-o", "json"],
    )
    .ok()
    .json();
    assert_eq!(rack["name"], fleet["racks"][1]["name"]);
    assert_eq!(rack["components"].as_array().unwrap().len(), 35);
    let missing = rackflow(s, &["rack", "get", "r-9999"]);
    assert_eq!(missing.code, Some(1));
    assert!(
        missing.stderr.starts_with("error: NotFound: "),
        "{}",
        missing.stderr
    );

    // run create --preview: the plan, nothing created.
    let create = [
        "run",
        "create",
        "--name",
        "canary",
        "--percentage",
        "50",
        "--max-concurrent",
        "2",
        "--failure-rate",
        "10",
        "--phases",
        "count:1",
        "--seed",
        "s1",
        "--ordering-seed",
        "o1",
        "--component-types",
        "compute",
    ];
    let mut preview_args = create.to_vec();
    preview_args.extend(["--preview", "-o", "json"]);
    let preview = rackflow(s, &preview_args).ok().json();
    assert_eq!(preview["candidate_count"], 6);
    assert_eq!(preview["phase_sizes"], serde_json::json!([1, 2]));
    assert_eq!(preview["configuration"]["selector"]["seed"], "s1");
    assert_eq!(preview["configuration"]["options"]["ordering_seed"], "o1");
    let planned = preview["targets"].as_array().unwrap();
    assert_eq!(planned.len(), 3);
    assert_eq!(planned[0]["components"], serde_json::json!({"Compute": 18}));
    let mut table_args = create.to_vec();
    table_args.push("--preview");
    let preview_table = rackflow(s, &table_args).ok();
    assert!(
        preview_table.stdout.contains("nothing was created"),
        "{}",
        preview_table.stdout
    );
    assert!(
        preview_table
            .stdout
            .contains("PHASE  SEQ  RACK EXTERNAL ID"),
        "{}",
        preview_table.stdout
    );
    let none = rackflow(s, &["run", "list", "-o", "json"]).ok().json();
    assert_eq!(none["total"], 0);

    // run create: prints the id.
    let created = rackflow(s, &create).ok();
    let run_id = created.stdout.trim().to_string();
    uuid::Uuid::parse_str(&run_id).unwrap_or_else(|_| panic!("not a run id: {run_id:?}"));

    // run get: summary, effective configuration, stats.
    let run = rackflow(s, &["run", "get", &run_id, "--stats", "-o", "json"])
        .ok()
        .json();
    assert_eq!(run["id"], run_id.as_str());
    assert_eq!(run["name"], "canary");
    assert_eq!(run["total_phases"], 2);
    assert_eq!(run["configuration"]["selector"]["percentage"], 50);
    assert_eq!(run["configuration"]["selector"]["seed"], "s1");
    assert_eq!(run["configuration"]["options"]["max_concurrent_targets"], 2);
    assert_eq!(
        run["configuration"]["options"]["conflict_retry"]["retry_timeout"],
        "1h"
    );
    assert_eq!(run["stats"]["cumulative"]["selected_targets"], 1);
    let run_table = rackflow(s, &["run", "get", &run_id]).ok();
    assert!(run_table.stdout.contains("seed s1"), "{}", run_table.stdout);

    // run list: the new run, by name too.
    let runs = rackflow(s, &["run", "list", "-o", "json"]).ok().json();
    assert_eq!(runs["total"], 1);
    assert_eq!(runs["runs"][0]["id"], run_id.as_str());
    let by_name = rackflow(
        s,
        &["run", "list", "--name", "can", "--wildcard", "-o", "json"],
    )
    .ok()
    .json();
    assert_eq!(by_name["total"], 1);
    let other = rackflow(s, &["run", "list", "--name", "can", "-o", "json"])
        .ok()
        .json();
    assert_eq!(other["total"], 0);
    let list_table = rackflow(s, &["run", "list"]).ok();
    assert!(
        list_table.stdout.contains("canary"),
        "{}",
        list_table.stdout
    );

    // run targets: phase 0 is what the preview planned.
    let targets = rackflow(s, &["run", "targets", &run_id, "-o", "json"])
        .ok()
        .json();
    assert_eq!(targets["total"], 1);
    let target = &targets["targets"][0];
    assert_eq!(target["phase_index"], 0);
    assert_eq!(target["rack_external_id"], planned[0]["rack_external_id"]);
    assert_eq!(target["components"], serde_json::json!({"Compute": 18}));
    let targets_table = rackflow(
        s,
        &[
            "run",
            "targets",
            &run_id,
            "--phase-scope",
            "current-and-completed",
        ],
    )
    .ok();
    assert!(
        targets_table.stdout.contains("18 Compute"),
        "{}",
        targets_table.stdout
    );

    // A server error: code and message on stderr, exit code 1.
    let unknown = uuid::Uuid::new_v4().to_string();
    let missing = rackflow(s, &["run", "get", &unknown]);
    assert_eq!(missing.code, Some(1));
    assert!(
        missing.stderr.starts_with("error: NotFound: "),
        "{}",
        missing.stderr
    );
    let invalid = rackflow(
        s,
        &[
            "run",
            "create",
            "--name",
            "big",
            "--failure-rate",
            "5",
            "--phases",
            "count:50",
        ],
    );
    assert_eq!(invalid.code, Some(1));
    assert!(
        invalid.stderr.starts_with("error: InvalidArgument: "),
        "{}",
        invalid.stderr
    );

    // A client-side parsing error names the flag and exits with 2.
    let bad = rackflow(s, &["run", "create", "--name", "x", "--phases", "equal:0"]);
    assert_eq!(bad.code, Some(2));
    assert!(bad.stderr.contains("--phases"), "{}", bad.stderr);

    std::fs::remove_file(&fleet_file).ok();
}

#[test]
fn unreachable_server_is_a_clear_error() {
    // Bind and drop to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let start = Instant::now();
    let run = rackflow(Some(port), &["run", "list"]);
    assert_eq!(run.code, Some(1));
    assert!(
        run.stderr.contains("cannot connect to the flow server"),
        "{}",
        run.stderr
    );
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[cfg(unix)]
#[test]
fn serve_stops_on_sigterm() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let db = temp_path("serve.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rackflow"))
        .args([
            "serve",
            "--listen",
            &port.to_string(),
            "--db",
            path_str(&db),
        ])
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn serve");
    // Follow its log until it listens, then check that it answers.
    let mut log = Lines::follow(child.stderr.take().expect("piped stderr"));
    log.wait_for(SERVE_LISTENING, Duration::from_secs(20));
    rackflow(Some(port), &["version"]).ok();
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let exit = wait_exit(
        child,
        "serve to stop on SIGTERM",
        Duration::from_secs(15),
        || format!("log:\n{}", log.seen()),
    );
    assert!(exit.success(), "serve exited with {exit:?}");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
}
