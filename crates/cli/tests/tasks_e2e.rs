//! End to end for the task-submitting commands, tasks and operation rules:
//! a real flow server in-process, driven by the built `rackflow` binary.

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Run, Server, path_str, rackflow, rackflow_within, temp_path};
use serde_json::Value;

/// Longest a `task watch` may take.
const WATCH_TIMEOUT: Duration = Duration::from_secs(180);

/// Generates and imports a fleet of `racks` racks; returns the racks as
/// `rack list -o json` shows them, sorted by external id.
fn import_fleet(s: Option<SocketAddr>, racks: u32) -> Vec<Value> {
    let generated = rackflow(
        None,
        &[
            "fleet",
            "generate",
            "--racks",
            &racks.to_string(),
            "--seed",
            "9",
        ],
    )
    .ok();
    let file = temp_path("fleet.json");
    std::fs::write(&file, &generated.stdout).unwrap();
    rackflow(s, &["fleet", "import", path_str(&file)]).ok();
    std::fs::remove_file(&file).ok();
    let list = rackflow(s, &["rack", "list", "-o", "json"]).ok().json();
    let mut racks: Vec<Value> = list["racks"].as_array().unwrap().clone();
    racks.sort_by_key(|r| r["external_id"].as_str().unwrap().to_string());
    racks
}

fn task_ids(run: &Run) -> Vec<String> {
    run.json()["task_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

fn get_task(s: Option<SocketAddr>, id: &str) -> Value {
    let tasks = rackflow(s, &["task", "get", id, "-o", "json"]).ok().json();
    tasks["tasks"][0].clone()
}

/// Waits until the task has the status, re-reading it (`task get`) after
/// each write to the server's store.
fn wait_status(server: &Server, id: &str, status: &str) -> Value {
    let s = Some(server.addr);
    let mut changes = server.waiter(format!("task {id} to become {status}"), WATCH_TIMEOUT);
    loop {
        let task = get_task(s, id);
        if task["status"] == status {
            return task;
        }
        changes.next_blocking(&task);
    }
}

/// Creates a rule from an inline YAML definition; returns its id.
fn create_rule(s: Option<SocketAddr>, name: &str, code: &str, definition: &str) -> String {
    let file = temp_path(&format!("{name}.yaml"));
    std::fs::write(&file, definition).unwrap();
    let created = rackflow(
        s,
        &[
            "rule",
            "create",
            "--name",
            name,
            "--type",
            "power_control",
            "--code",
            code,
            "--definition",
            path_str(&file),
        ],
    )
    .ok();
    std::fs::remove_file(&file).ok();
    let id = created.stdout.trim().to_string();
    uuid::Uuid::parse_str(&id).unwrap_or_else(|_| panic!("not a rule id: {id:?}"));
    id
}

/// Every step of a power rule sleeps: the task runs about `secs` seconds
/// whatever the simulated hardware does.
fn sleep_rule(secs: u32) -> String {
    format!(
        "steps:\n  - component_type: powershelf\n    stage: 1\n    main_operation:\n      name: Sleep\n      parameters: {{duration: {secs}s}}\n"
    )
}

#[test]
fn power_on_a_generated_fleet() {
    let server = Server::start();
    let s = Some(server.addr);
    let racks = import_fleet(s, 3);

    // One task per rack, ids one per line (table) or in JSON.
    let on = rackflow(
        s,
        &[
            "power",
            "on",
            "--rack-external-ids",
            "r-0001,r-0002",
            "--description",
            "e2e power on",
            "-o",
            "json",
        ],
    )
    .ok();
    let ids = task_ids(&on);
    assert_eq!(ids.len(), 2, "{}", on.stdout);

    let tasks = rackflow(s, &["task", "get", &ids[0], &ids[1], "-o", "json"])
        .ok()
        .json();
    let tasks = tasks["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    for t in tasks {
        assert_eq!(t["operation"], "power_control/power_on");
        assert_eq!(t["description"], "e2e power on");
        assert_eq!(t["component_ids"].as_array().unwrap().len(), 35);
    }
    let table = rackflow(s, &["task", "get", &ids[0]]).ok();
    assert!(table.stdout.contains("Operation:"), "{}", table.stdout);

    // Forced power off of the third rack by name, compute only.
    let off = rackflow(
        s,
        &[
            "power",
            "off",
            "--racks",
            racks[2]["name"].as_str().unwrap(),
            "--component-types",
            "compute",
            "--force",
        ],
    )
    .ok();
    let off_id = off.stdout.trim().to_string();
    uuid::Uuid::parse_str(&off_id).unwrap_or_else(|_| panic!("not a task id: {off_id:?}"));
    let off_task = get_task(s, &off_id);
    assert_eq!(off_task["operation"], "power_control/force_power_off");
    assert_eq!(off_task["component_ids"].as_array().unwrap().len(), 18);

    // task list: all, by rack, with reports.
    let all = rackflow(s, &["task", "list", "-o", "json"]).ok().json();
    assert_eq!(all["total"], 3);
    let rack_id = racks[0]["id"].as_str().unwrap();
    let by_rack = rackflow(s, &["task", "list", "--rack-id", rack_id, "-o", "json"])
        .ok()
        .json();
    assert_eq!(by_rack["total"], 1);
    // Task ids come in rack-id order, not in flag order.
    let task = &by_rack["tasks"][0];
    assert_eq!(task["rack_id"], rack_id);
    assert!(
        ids.contains(&task["id"].as_str().unwrap().to_string()),
        "{task}"
    );
    let by_external = rackflow(s, &["task", "list", "--rack-id", "r-0001", "-o", "json"])
        .ok()
        .json();
    assert_eq!(by_external["tasks"][0]["id"], task["id"]);
    let listed = rackflow(s, &["task", "list", "--with-report"]).ok();
    assert!(listed.stdout.contains("PROGRESS"), "{}", listed.stdout);
    assert!(listed.stdout.contains("3 of 3 tasks"), "{}", listed.stdout);

    // A rack operation the server refuses: error line and exit 1.
    let missing = rackflow(s, &["power", "on", "--rack-external-ids", "r-9999"]);
    assert_eq!(missing.code, Some(1));
    assert!(missing.stderr.starts_with("error: "), "{}", missing.stderr);

    // firmware upgrade of one rack's compute trays.
    let fw = rackflow(
        s,
        &[
            "firmware",
            "upgrade",
            "--rack-external-ids",
            "r-0002",
            "--component-types",
            "compute",
            "--target-version",
            "gb200-fw-24.11.1",
            "--queue",
            "-o",
            "json",
        ],
    )
    .ok();
    let fw_ids = task_ids(&fw);
    assert_eq!(fw_ids.len(), 1);
    assert_eq!(
        get_task(s, &fw_ids[0])["operation"],
        "firmware_control/upgrade"
    );
}

#[test]
fn ingest_then_decommission_a_rack() {
    let server = Server::start_with(|config| config.sim.decommission_ms = 50);
    let s = Some(server.addr);
    import_fleet(s, 1);
    let ingest = rackflow(s, &["rack", "ingest", "--rack-external-ids", "r-0001"]).ok();
    let id = ingest.stdout.trim().to_string();
    let task = wait_status(&server, &id, "completed");
    assert_eq!(task["operation"], "bring_up/ingest", "{task}");
    // Retired: compute, switches, shelves in turn (the order and the
    // power-off are checked in the server's lifecycle test).
    let retire = rackflow(
        s,
        &[
            "rack",
            "decommission",
            "--rack-external-ids",
            "r-0001",
            "-o",
            "json",
        ],
    )
    .ok()
    .json();
    let id = retire["task_ids"][0].as_str().unwrap().to_string();
    let task = wait_status(&server, &id, "completed");
    assert_eq!(task["operation"], "decommission/decommission", "{task}");
    let rack = rackflow(s, &["rack", "get", "r-0001", "-o", "json"])
        .ok()
        .json();
    assert_eq!(rack["lifecycle_status"], "decommissioned", "{rack}");
    assert!(rack["ingested_at"].is_string(), "{rack}");
    let table = rackflow(s, &["rack", "get", "r-0001"]).ok();
    assert!(table.stdout.contains("decommissioned"), "{}", table.stdout);
    let listed = rackflow(
        s,
        &["rack", "list", "--status", "decommissioned", "-o", "json"],
    )
    .ok()
    .json();
    assert_eq!(listed["total"], 1, "{listed}");
    let refused = rackflow(s, &["power", "on", "--rack-external-ids", "r-0001"]);
    assert_eq!(refused.code, Some(1));
    assert!(
        refused
            .stderr
            .contains("only IngestRack may target a decommissioned rack"),
        "{}",
        refused.stderr
    );
    // Bring-up takes no queue options: --queue is refused before any call.
    let queued = rackflow(
        s,
        &[
            "rack",
            "bring-up",
            "--rack-external-ids",
            "r-0001",
            "--queue",
        ],
    );
    assert_eq!(queued.code, Some(1));
    assert!(
        queued.stderr.contains("--queue does not apply"),
        "{}",
        queued.stderr
    );
}

#[test]
fn task_watch_follows_a_task_to_completion() {
    let server = Server::start();
    let s = Some(server.addr);
    import_fleet(s, 1);
    let id = rackflow(s, &["power", "on", "--rack-external-ids", "r-0001"])
        .ok()
        .stdout
        .trim()
        .to_string();

    // Not a terminal: change lines with a time prefix, then the final line.
    let watch = rackflow_within(
        WATCH_TIMEOUT,
        s,
        &["task", "watch", &id, "--interval", "200ms"],
    )
    .ok();
    let lines: Vec<&str> = watch.stdout.lines().collect();
    assert!(lines.len() >= 2, "{}", watch.stdout);
    assert!(
        lines.iter().any(|l| l.contains(" stage 1 ")),
        "{}",
        watch.stdout
    );
    assert!(
        !watch.stdout.contains('\x1b'),
        "no ANSI codes into a pipe:\n{}",
        watch.stdout
    );
    assert_eq!(
        *lines.last().unwrap(),
        format!("task {id} completed: Succeeded"),
        "{}",
        watch.stdout
    );

    // Watching a finished task returns at once; JSON gives the task.
    let json = rackflow(s, &["task", "watch", &id, "-o", "json"])
        .ok()
        .json();
    assert_eq!(json["status"], "completed");
    assert!(!json["report"]["stages"].as_array().unwrap().is_empty());

    // The report table of task get.
    let table = rackflow(s, &["task", "get", &id]).ok();
    assert!(
        table.stdout.contains("STAGE  STAGE STATUS  COMPONENT TYPE"),
        "{}",
        table.stdout
    );
    assert!(table.stdout.contains("completed"), "{}", table.stdout);

    // An unknown task.
    let unknown = uuid::Uuid::new_v4().to_string();
    let missing = rackflow(s, &["task", "watch", &unknown]);
    assert_eq!(missing.code, Some(1));
    assert!(missing.stderr.starts_with("error: "), "{}", missing.stderr);
}

#[test]
fn cancel_queued_and_running_tasks() {
    let server = Server::start();
    let s = Some(server.addr);
    import_fleet(s, 2);
    let slow = create_rule(s, "slow-on", "power_on", &sleep_rule(60));
    let quick = create_rule(s, "quick-off", "power_off", &sleep_rule(1));

    // A long task holds rack r-0001 ...
    let running = rackflow(
        s,
        &[
            "power",
            "on",
            "--rack-external-ids",
            "r-0001",
            "--rule-id",
            &slow,
        ],
    )
    .ok()
    .stdout
    .trim()
    .to_string();
    wait_status(&server, &running, "running");

    // ... so a conflicting one is rejected, or queued with --queue.
    let rejected = rackflow(s, &["power", "off", "--rack-external-ids", "r-0001"]);
    assert_eq!(rejected.code, Some(1));
    assert!(
        rejected.stderr.starts_with("error: FailedPrecondition: "),
        "{}",
        rejected.stderr
    );
    let queued = rackflow(
        s,
        &[
            "power",
            "off",
            "--rack-external-ids",
            "r-0001",
            "--queue",
            "--queue-timeout",
            "10m",
        ],
    )
    .ok()
    .stdout
    .trim()
    .to_string();
    let waiting = get_task(s, &queued);
    assert_eq!(waiting["status"], "waiting");
    assert!(waiting["queue_expires_at"].is_string(), "{waiting}");
    let active = rackflow(s, &["task", "list", "--active", "-o", "json"])
        .ok()
        .json();
    assert_eq!(active["total"], 2);

    // Cancel the queued task, twice (idempotent).
    let cancelled = rackflow(s, &["task", "cancel", &queued, "-o", "json"])
        .ok()
        .json();
    assert_eq!(cancelled["status"], "terminated");
    assert_eq!(cancelled["message"], "Cancelled by user");
    let again = rackflow(s, &["task", "cancel", &queued]).ok();
    assert_eq!(
        again.stdout.trim(),
        format!("task {queued} terminated: Cancelled by user")
    );

    // Cancel the running task; watching it then exits 1 with its status.
    rackflow(s, &["task", "cancel", &running]).ok();
    let watch = rackflow_within(WATCH_TIMEOUT, s, &["task", "watch", &running]);
    assert_eq!(watch.code, Some(1), "{}", watch.stdout);
    assert!(watch.stderr.is_empty(), "{}", watch.stderr);
    assert!(
        watch
            .stdout
            .trim_end()
            .ends_with(&format!("task {running} terminated: Cancelled by user")),
        "{}",
        watch.stdout
    );

    // A completed task cannot be cancelled.
    let done = rackflow(
        s,
        &[
            "power",
            "off",
            "--rack-external-ids",
            "r-0002",
            "--rule-id",
            &quick,
        ],
    )
    .ok()
    .stdout
    .trim()
    .to_string();
    rackflow_within(
        WATCH_TIMEOUT,
        s,
        &["task", "watch", &done, "--interval", "200ms"],
    )
    .ok();
    let refused = rackflow(s, &["task", "cancel", &done]);
    assert_eq!(refused.code, Some(1));
    assert!(
        refused.stderr.starts_with("error: FailedPrecondition: "),
        "{}",
        refused.stderr
    );
}

const RULES: &str = r#"
version: v1
rules:
  - name: power-on-staged
    description: shelves, then switches, then compute in batches of 6
    operation_type: power_control
    operation: power_on
    steps:
      - component_type: powershelf
        stage: 1
        timeout: 15m
        retry: {max_attempts: 3, initial_interval: 5s, backoff_coefficient: 2.0}
        main_operation: {name: PowerControl}
        post_operation:
          - {name: VerifyPowerStatus, timeout: 5m, poll_interval: 10s, parameters: {expected_status: on}}
      - component_type: compute
        stage: 2
        max_parallel: 6
        main_operation: {name: PowerControl}
  - name: power-off-staged
    operation_type: power_control
    operation: power_off
    steps:
      - component_type: compute
        stage: 1
        main_operation: {name: PowerControl}
      - component_type: powershelf
        stage: 2
        main_operation: {name: PowerControl}
  - name: firmware-compute-first
    operation_type: firmware_control
    operation: upgrade
    steps:
      - component_type: compute
        stage: 1
        main_operation: {name: FirmwareControl}
"#;

fn rules(s: Option<SocketAddr>, extra: &[&str]) -> Value {
    let mut args = vec!["rule", "list", "-o", "json"];
    args.extend_from_slice(extra);
    rackflow(s, &args).ok().json()
}

#[test]
fn rule_load_then_rule_list() {
    let server = Server::start();
    let s = Some(server.addr);
    let file = temp_path("rules.yaml");
    std::fs::write(&file, RULES).unwrap();
    let f = path_str(&file);
    let before = rules(s, &[])["total"].as_i64().unwrap();

    // Dry run: checked and listed, nothing created.
    let dry = rackflow(s, &["rule", "load", f, "--dry-run"]).ok();
    assert!(dry.stdout.contains("nothing was created"), "{}", dry.stdout);
    assert_eq!(rules(s, &[])["total"].as_i64().unwrap(), before);

    // Load: three defaults.
    let loaded = rackflow(s, &["rule", "load", f, "-o", "json"]).ok().json();
    let first: Vec<String> = loaded["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["outcome"], "created");
            r["id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(first.len(), 3);
    let defaults = rules(s, &["--default", "true"]);
    assert_eq!(defaults["total"], 3);
    let mut names: Vec<&str> = defaults["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "firmware-compute-first",
            "power-off-staged",
            "power-on-staged"
        ]
    );
    let power = rules(s, &["--type", "power_control"]);
    assert_eq!(power["total"], 2);
    let table = rackflow(s, &["rule", "list"]).ok();
    assert!(table.stdout.starts_with("ID "), "{}", table.stdout);
    assert!(table.stdout.contains("power-on-staged"), "{}", table.stdout);

    // rule get: the definition as sent.
    let rule = rackflow(s, &["rule", "get", &first[0], "-o", "json"])
        .ok()
        .json();
    assert_eq!(rule["name"], "power-on-staged");
    assert_eq!(rule["is_default"], true);
    assert_eq!(rule["definition"]["steps"][1]["max_parallel"], 6);
    let shown = rackflow(s, &["rule", "get", &first[0]]).ok();
    assert!(shown.stdout.contains("Definition:"), "{}", shown.stdout);
    assert!(
        shown.stdout.contains("VerifyPowerStatus(on)"),
        "{}",
        shown.stdout
    );

    // Loading again: defaults exist; reported, exit 1, nothing created.
    let again = rackflow(s, &["rule", "load", f]);
    assert_eq!(again.code, Some(1));
    assert!(again.stdout.contains("skipped 3"), "{}", again.stdout);
    assert!(again.stderr.contains("--overwrite"), "{}", again.stderr);
    assert_eq!(rules(s, &[])["total"].as_i64().unwrap(), before + 3);

    // --overwrite: new rules become the defaults, the old ones stay.
    let replaced = rackflow(s, &["rule", "load", f, "--overwrite", "-o", "json"])
        .ok()
        .json();
    assert!(
        replaced["rules"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["outcome"] == "replaced_default")
    );
    assert_eq!(rules(s, &[])["total"].as_i64().unwrap(), before + 6);
    let defaults = rules(s, &["--default", "true"]);
    assert_eq!(defaults["total"], 3);
    assert!(
        defaults["rules"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| !first.contains(&r["id"].as_str().unwrap().to_string()))
    );

    // set-default back to the first power-on rule.
    rackflow(s, &["rule", "set-default", &first[0]]).ok();
    let on = rackflow(s, &["rule", "get", &first[0], "-o", "json"])
        .ok()
        .json();
    assert_eq!(on["is_default"], true);

    // Associations with a rack.
    let racks = import_fleet(s, 1);
    let rack = racks[0]["id"].as_str().unwrap();
    rackflow(
        s,
        &[
            "rule",
            "associate",
            "--rack-id",
            rack,
            "--rule-id",
            &first[1],
        ],
    )
    .ok();
    let assoc = rackflow(
        s,
        &["rule", "associations", "--rack-id", rack, "-o", "json"],
    )
    .ok()
    .json();
    assert_eq!(assoc["associations"].as_array().unwrap().len(), 1);
    assert_eq!(assoc["associations"][0]["rule_id"], first[1].as_str());
    assert_eq!(assoc["associations"][0]["operation_code"], "power_off");
    let one = rackflow(
        s,
        &[
            "rule",
            "associations",
            "--rack-id",
            rack,
            "--type",
            "power_control",
            "--code",
            "power_off",
            "-o",
            "json",
        ],
    )
    .ok()
    .json();
    assert_eq!(one["associations"][0]["rule_id"], first[1].as_str());
    rackflow(
        s,
        &[
            "rule",
            "disassociate",
            "--rack-id",
            rack,
            "--type",
            "power_control",
            "--code",
            "power_off",
        ],
    )
    .ok();
    let none = rackflow(
        s,
        &["rule", "associations", "--rack-id", rack, "-o", "json"],
    )
    .ok()
    .json();
    assert_eq!(none["associations"].as_array().unwrap().len(), 0);

    // Delete.
    rackflow(s, &["rule", "delete", &first[2]]).ok();
    let gone = rackflow(s, &["rule", "get", &first[2]]);
    assert_eq!(gone.code, Some(1));
    assert!(
        gone.stderr.starts_with("error: NotFound: "),
        "{}",
        gone.stderr
    );

    // A file that fails the local checks never reaches the server.
    let bad = temp_path("bad.yaml");
    std::fs::write(
        &bad,
        RULES.replace("operation: power_off", "operation: power_on"),
    )
    .unwrap();
    let refused = rackflow(s, &["rule", "load", path_str(&bad)]);
    assert_eq!(refused.code, Some(1));
    assert!(
        refused.stderr.contains("rules[1] (power-off-staged)")
            && refused.stderr.contains("duplicate"),
        "{}",
        refused.stderr
    );
    std::fs::remove_file(&bad).ok();
    std::fs::remove_file(&file).ok();
}

/// `rackflow event-rule …`: create from an actions file (disabled), bind to
/// a rack, enable, see it effective there (and the built-in elsewhere),
/// list, unbind, delete.
#[test]
fn event_rules_from_create_to_delete() {
    let server = Server::start();
    let s = Some(server.addr);
    let racks = import_fleet(s, 2);
    let rack_1 = racks[0]["id"].as_str().unwrap().to_string();
    let rack_2 = racks[1]["id"].as_str().unwrap().to_string();
    let actions = temp_path("actions.yaml");
    std::fs::write(
        &actions,
        "- name: power_off_rack\n  spec:\n    kind: submit_task\n    operation: {type: power_control, code: force_power_off}\n    target_strategy: rack\n    conflict_strategy: queue\n    description: leak on this rack\n",
    )
    .unwrap();
    let created = rackflow(
        s,
        &[
            "event-rule",
            "create",
            "--name",
            "Rack leak response",
            "--actions",
            path_str(&actions),
            "-o",
            "json",
        ],
    )
    .ok()
    .json();
    assert_eq!(created["enabled"], false);
    assert_eq!(created["actions"][0]["spec"]["target_strategy"], "rack");
    let id = created["id"].as_str().unwrap().to_string();
    rackflow(s, &["event-rule", "bind", &id, "--rack", &rack_1]).ok();
    rackflow(s, &["event-rule", "enable", &id]).ok();
    let effective = |rack: &str| {
        rackflow(
            s,
            &["event-rule", "effective", "--rack", rack, "-o", "json"],
        )
        .ok()
        .json()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(effective(&rack_1), id);
    assert_eq!(effective(&rack_2), "f34b87f7-cb1b-4b08-aa51-30c0b3b58680");
    let list = rackflow(s, &["event-rule", "list"]).ok();
    assert!(
        list.stdout.contains("Rack leak response"),
        "{}",
        list.stdout
    );
    assert!(
        list.stdout.contains("Default leakage response"),
        "{}",
        list.stdout
    );
    // A bound rule is not deleted; unbound, it is.
    let refused = rackflow(s, &["event-rule", "delete", &id]);
    assert_ne!(refused.code, Some(0));
    assert!(
        refused.stderr.contains("bindings first"),
        "{}",
        refused.stderr
    );
    rackflow(s, &["event-rule", "unbind", "--rack", &rack_1]).ok();
    rackflow(s, &["event-rule", "delete", &id]).ok();
    let missing = rackflow(s, &["event-rule", "get", &id]);
    assert_ne!(missing.code, Some(0));
    // Neither or both scopes: refused by the command line.
    assert_ne!(rackflow(s, &["event-rule", "bind", &id]).code, Some(0));
    std::fs::remove_file(&actions).ok();
}

/// `rackflow leak report|list`: a report opens a leak event, a repeat counts
/// as an observation, `rack get --with-components` shows the tray leaking,
/// `--cleared` closes the event.
#[test]
fn leak_report_list_and_the_rack_view() {
    let server = Server::start();
    let s = Some(server.addr);
    let racks = import_fleet(s, 1);
    let rack = racks[0]["external_id"].as_str().unwrap().to_string();
    let view = rackflow(
        s,
        &["rack", "get", &rack, "--with-components", "-o", "json"],
    )
    .ok()
    .json();
    let tray = view["components"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(view["components"][0]["leak_status"], "");
    let first = rackflow(
        s,
        &[
            "leak",
            "report",
            "--component",
            &tray,
            "--source",
            "cdu-2",
            "-o",
            "json",
        ],
    )
    .ok()
    .json();
    assert_eq!(first["outcome"], "new", "{first}");
    // The built-in rule acted: its force power-off names the rule as its
    // trigger.
    assert_eq!(
        first["rule_id"], "f34b87f7-cb1b-4b08-aa51-30c0b3b58680",
        "{first}"
    );
    let response = first["submitted_task_ids"][0].as_str().unwrap().to_string();
    let task = rackflow(s, &["task", "get", &response, "-o", "json"])
        .ok()
        .json()["tasks"][0]
        .clone();
    assert_eq!(task["trigger"], "event_rule_execution", "{task}");
    assert_eq!(task["trigger_id"], "f34b87f7-cb1b-4b08-aa51-30c0b3b58680");
    let table = rackflow(s, &["task", "get", &response]).ok();
    assert!(
        table
            .stdout
            .contains("event_rule_execution (event rule f34b87f7-cb1b-4b08-aa51-30c0b3b58680)"),
        "{}",
        table.stdout
    );
    let again = rackflow(s, &["leak", "report", "--component", &tray]).ok();
    assert!(again.stdout.starts_with("repeat"), "{}", again.stdout);
    let view = rackflow(
        s,
        &["rack", "get", &rack, "--with-components", "-o", "json"],
    )
    .ok()
    .json();
    let leaking = view["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == tray.as_str())
        .unwrap();
    assert_eq!(leaking["leak_status"], "detected");
    let listed = rackflow(
        s,
        &["component", "list", "--leak", "detected", "-o", "json"],
    )
    .ok()
    .json();
    assert_eq!(listed["total"], 1, "{listed}");
    assert_eq!(listed["components"][0]["id"], tray.as_str());
    let dry = rackflow(
        s,
        &[
            "component",
            "list",
            "--leak",
            "unknown,not-detected",
            "-o",
            "json",
        ],
    )
    .ok()
    .json();
    assert!(dry["total"].as_i64().unwrap() > 1, "{dry}");
    assert!(
        dry["components"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["id"] != tray.as_str())
    );
    let table = rackflow(s, &["rack", "get", &rack, "--with-components"]).ok();
    assert!(table.stdout.contains("LEAK"), "{}", table.stdout);
    let listed = rackflow(s, &["leak", "list", "--open", "-o", "json"])
        .ok()
        .json();
    assert_eq!(listed["total"], 1);
    assert_eq!(listed["events"][0]["observations"], 2);
    let cleared = rackflow(s, &["leak", "report", "--component", &tray, "--cleared"]).ok();
    assert!(cleared.stdout.starts_with("cleared"), "{}", cleared.stdout);
    let open = rackflow(s, &["leak", "list", "--open", "-o", "json"])
        .ok()
        .json();
    assert_eq!(open["total"], 0);
}
