//! `rackflow schedule …`: flags to requests, previews, and one end-to-end
//! pass through the built binary against an in-process server.

mod common;

use std::time::Duration;

use clap::Parser;
use common::{Server, import_fleet, rackflow};
use rackflow_api::v1;
use rackflow_cli::schedule::{Kind, ScheduleCommand, preview};
use rackflow_cli::{Cli, Command};

fn parse(args: &[&str]) -> ScheduleCommand {
    let mut argv = vec!["rackflow", "schedule"];
    argv.extend_from_slice(args);
    match Cli::try_parse_from(argv).expect("parses").command {
        Command::Schedule(c) => c,
        other => panic!("not a schedule command: {other:?}"),
    }
}

#[test]
fn create_flags_become_the_reference_request() {
    let ScheduleCommand::Create(args) = parse(&[
        "create",
        "--name",
        "nightly-cycle",
        "--cron",
        "30 2 * * *",
        "--timezone",
        "America/New_York",
        "--operation",
        "power-reset",
        "--force",
        "--overlap",
        "queue",
        "--catchup-window",
        "90s",
        "--racks",
        "rack-001",
    ]) else {
        panic!("create")
    };
    let req = args.to_request().expect("request");
    let config = req.schedule.expect("config");
    assert_eq!(config.name, "nightly-cycle");
    let spec = config.spec.expect("spec");
    assert_eq!(spec.r#type, v1::ScheduleSpecType::Cron as i32);
    assert_eq!(
        (spec.spec.as_str(), spec.timezone.as_str()),
        ("30 2 * * *", "America/New_York")
    );
    assert_eq!(config.overlap_policy, v1::OverlapPolicy::Queue as i32);
    assert_eq!(config.catchup_window.map(|d| d.seconds), Some(90));
    match req.operation.and_then(|o| o.operation) {
        Some(v1::scheduled_operation::Operation::PowerReset(r)) => {
            assert!(r.forced);
            assert!(r.target_spec.is_some());
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn create_refuses_missing_timing_and_two_timings() {
    let ScheduleCommand::Create(args) = parse(&[
        "create",
        "--name",
        "n",
        "--operation",
        "power-on",
        "--racks",
        "r",
    ]) else {
        panic!("create")
    };
    assert!(
        args.to_request()
            .unwrap_err()
            .to_string()
            .contains("--every")
    );
    let argv = [
        "rackflow",
        "schedule",
        "create",
        "--name",
        "n",
        "--operation",
        "power-on",
        "--every",
        "1s",
        "--cron",
        "@daily",
        "--racks",
        "r",
    ];
    assert!(
        Cli::try_parse_from(argv).is_err(),
        "--every and --cron conflict"
    );
    let ScheduleCommand::Create(args) = parse(&[
        "create",
        "--name",
        "n",
        "--operation",
        "power-on",
        "--force",
        "--every",
        "1s",
        "--racks",
        "r",
    ]) else {
        panic!("create")
    };
    assert!(args.to_request().is_err(), "--force on power-on");
}

#[test]
fn update_mask_names_exactly_the_flags_given() {
    let ScheduleCommand::Update(args) = parse(&[
        "update",
        "00000000-0000-0000-0000-000000000001",
        "--timezone",
        "Europe/Paris",
        "--overlap",
        "skip",
    ]) else {
        panic!("update")
    };
    let req = args.to_request().expect("request");
    assert_eq!(
        req.update_mask.expect("mask").paths,
        vec!["schedule.spec.timezone", "schedule.overlap_policy"]
    );
    let ScheduleCommand::Update(args) = parse(&[
        "update",
        "00000000-0000-0000-0000-000000000001",
        "--every",
        "10m",
        "--name",
        "x",
    ]) else {
        panic!("update")
    };
    let req = args.to_request().expect("request");
    assert_eq!(
        req.update_mask.expect("mask").paths,
        vec!["schedule.name", "schedule.spec"]
    );
    let ScheduleCommand::Update(args) = parse(&["update", "00000000-0000-0000-0000-000000000001"])
    else {
        panic!("update")
    };
    assert!(args.to_request().is_err(), "nothing to update");
}

#[test]
fn preview_gives_five_increasing_times_and_refuses_bad_specs() {
    let (_, runs) = preview(Kind::Interval, "90s", "", 5).expect("preview");
    assert_eq!(runs.len(), 5);
    for w in runs.windows(2) {
        assert_eq!((w[1] - w[0]).num_seconds(), 90);
    }
    let (spec, runs) = preview(Kind::Cron, "@daily", "", 5).expect("preview");
    assert_eq!(spec.timezone, "UTC");
    assert_eq!(runs.len(), 5);
    let (_, runs) = preview(Kind::OneTime, "2030-01-01T00:00:00Z", "", 5).expect("preview");
    assert_eq!(runs.len(), 1);
    assert!(preview(Kind::Cron, "not cron", "", 5).is_err());
    assert!(preview(Kind::Cron, "@daily", "Nowhere/Land", 5).is_err());
}

#[test]
fn schedule_commands_end_to_end() {
    // Preview needs no server.
    let out = rackflow(
        None,
        &[
            "schedule",
            "create",
            "--name",
            "p",
            "--operation",
            "power-on",
            "--every",
            "1h",
            "--racks",
            "x",
            "--preview",
            "-o",
            "json",
        ],
    )
    .ok()
    .json();
    assert_eq!(out["next_runs"].as_array().expect("runs").len(), 5);

    let server = Server::start();
    let s = Some(server.addr);
    import_fleet(s, 2);
    let racks = rackflow(s, &["rack", "list", "-o", "json"]).ok().json();
    let rack_id = racks["racks"][0]["id"]
        .as_str()
        .expect("rack id")
        .to_string();
    let created = rackflow(
        s,
        &[
            "schedule",
            "create",
            "--name",
            "every-2s",
            "--operation",
            "power-on",
            "--every",
            "2s",
            "--rack-ids",
            &rack_id,
            "--overlap",
            "queue",
            "-o",
            "json",
        ],
    )
    .ok()
    .json();
    let id = created["id"].as_str().expect("id").to_string();
    assert_eq!(created["next_runs"].as_array().expect("runs").len(), 5);
    let got = rackflow(s, &["schedule", "get", &id, "-o", "json"])
        .ok()
        .json();
    assert_eq!(got["scopes"].as_array().expect("scopes").len(), 1);
    assert_eq!(got["next_runs"].as_array().expect("runs").len(), 5);
    let table = rackflow(s, &["schedule", "get", &id]).ok();
    assert!(
        table.stdout.contains("next 5 fire times:"),
        "{}",
        table.stdout
    );
    // It fires: the scope records a task.
    let mut changes = server.waiter("the schedule to fire", Duration::from_secs(30));
    loop {
        let scopes = rackflow(s, &["schedule", "scope", "list", &id, "-o", "json"])
            .ok()
            .json();
        if scopes[0]["last_task_id"].is_string() {
            break;
        }
        changes.next_blocking(&scopes);
    }
    let paused = rackflow(s, &["schedule", "pause", &id, "-o", "json"])
        .ok()
        .json();
    assert_eq!(paused["enabled"], false);
    let triggered = rackflow(s, &["schedule", "trigger", &id, "-o", "json"])
        .ok()
        .json();
    assert_eq!(triggered["task_ids"].as_array().expect("ids").len(), 1);
    let updated = rackflow(
        s,
        &["schedule", "update", &id, "--cron", "@hourly", "-o", "json"],
    )
    .ok()
    .json();
    assert_eq!(updated["kind"], "cron");
    let list = rackflow(s, &["schedule", "list", "-o", "json"]).ok().json();
    assert_eq!(list.as_array().expect("list").len(), 1);
    let dup = rackflow(
        s,
        &[
            "schedule",
            "create",
            "--name",
            "every-2s",
            "--operation",
            "power-on",
            "--every",
            "2s",
            "--rack-ids",
            &rack_id,
        ],
    );
    assert_ne!(dup.code, Some(0), "a duplicate name fails");
    rackflow(s, &["schedule", "delete", &id]).ok();
    let list = rackflow(s, &["schedule", "list", "-o", "json"]).ok().json();
    assert!(list.as_array().expect("list").is_empty());
}
