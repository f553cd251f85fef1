//! `power`, `firmware`, `task` and `rule` flags → the requests they send,
//! and the errors that stop them before any call.

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

use clap::Parser;
use rackflow_api::v1;
use rackflow_cli::ops::{FirmwareCommand, PowerCommand, PowerRequest, parse_queue_timeout};
use rackflow_cli::rule::{RuleCommand, disassociate_request};
use rackflow_cli::rule_file::RuleType;
use rackflow_cli::targets::parse_component_external_id;
use rackflow_cli::task::TaskCommand;
use rackflow_cli::{Cli, Command, RackCommand};
use rackflow_domain::ComponentType;

const RACK: &str = "7b1e2c1a-9a55-4bde-9e0f-0a4c1b9b7d10";
const COMPONENT: &str = "0f5c3f1e-3c38-4c39-8a39-0b7e7f7a0d11";
const RULE: &str = "5f0e2a55-6d0b-4b8f-9d5e-3b1f3a0c2e77";

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("rackflow").chain(args.iter().copied()))
}

fn command(args: &[&str]) -> Command {
    parse(args)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
        .command
}

fn power(args: &[&str]) -> anyhow::Result<PowerRequest> {
    match command(args) {
        Command::Power(p) => p.to_request(),
        other => panic!("unexpected {other:?}"),
    }
}

fn power_command(args: &[&str]) -> PowerCommand {
    match command(args) {
        Command::Power(p) => p,
        other => panic!("unexpected {other:?}"),
    }
}

fn firmware(args: &[&str]) -> anyhow::Result<v1::UpgradeFirmwareRequest> {
    match command(args) {
        Command::Firmware(FirmwareCommand::Upgrade(a)) => a.to_request(),
        other => panic!("unexpected {other:?}"),
    }
}

fn rack_targets(spec: &Option<v1::OperationTargetSpec>) -> Vec<v1::RackTarget> {
    match spec.as_ref().and_then(|s| s.targets.clone()) {
        Some(v1::operation_target_spec::Targets::Racks(r)) => r.targets,
        other => panic!("expected rack targets, got {other:?}"),
    }
}

fn component_targets(spec: &Option<v1::OperationTargetSpec>) -> Vec<v1::ComponentTarget> {
    match spec.as_ref().and_then(|s| s.targets.clone()) {
        Some(v1::operation_target_spec::Targets::Components(c)) => c.targets,
        other => panic!("expected component targets, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// power
// ---------------------------------------------------------------------------

#[test]
fn power_on_builds_rack_targets_from_every_rack_flag() {
    let PowerRequest::On(r) = power(&[
        "power",
        "on",
        "--racks",
        &format!("rack-a01,{RACK}"),
        "--rack-ids",
        RACK,
        "--rack-external-ids",
        "r-0003",
        "--rack-external-ids",
        "r-0004",
        "--component-types",
        "compute,NVSwitch",
        "--description",
        "morning power on",
        "--rule-id",
        RULE,
        "--override-readiness-check",
    ])
    .unwrap() else {
        panic!("power on")
    };
    use v1::rack_target::Identifier;
    let targets = rack_targets(&r.target_spec);
    let ids: Vec<_> = targets
        .iter()
        .map(|t| t.identifier.clone().unwrap())
        .collect();
    let uuid = || Identifier::Id(v1::Uuid { id: RACK.into() });
    assert_eq!(
        ids,
        vec![
            Identifier::Name("rack-a01".into()),
            uuid(),
            uuid(),
            Identifier::ExternalId("r-0003".into()),
            Identifier::ExternalId("r-0004".into()),
        ]
    );
    assert!(targets.iter().all(|t| t.component_types == vec![1, 2]));
    assert_eq!(r.description, "morning power on");
    assert_eq!(r.rule_id, Some(v1::Uuid { id: RULE.into() }));
    assert!(r.override_readiness_check);
    assert_eq!(r.queue_options, None);
}

#[test]
fn nvl_domain_flags_aim_at_domains_and_do_not_mix_with_racks() {
    let PowerRequest::On(r) = power(&[
        "power",
        "on",
        "--nvl-domain",
        &format!("nvl-a,{RACK}"),
        "--component-types",
        "compute",
    ])
    .unwrap() else {
        panic!("power on")
    };
    use v1::nvl_domain_target::Identifier;
    let Some(v1::operation_target_spec::Targets::NvlDomains(domains)) =
        r.target_spec.and_then(|s| s.targets)
    else {
        panic!("expected NVL-domain targets")
    };
    let ids: Vec<_> = domains
        .targets
        .iter()
        .map(|t| t.identifier.clone().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            Identifier::Name("nvl-a".into()),
            Identifier::Id(v1::Uuid { id: RACK.into() })
        ]
    );
    assert!(domains.targets.iter().all(|t| t.component_types == [1]));
    let mixed = power(&["power", "on", "--nvl-domain", "nvl-a", "--racks", "r"]).unwrap_err();
    assert!(
        mixed
            .to_string()
            .contains("--nvl-domain cannot be combined"),
        "{mixed}"
    );
    let firmware = firmware(&[
        "firmware",
        "upgrade",
        "--nvl-domains",
        "nvl-b",
        "--target-version",
        "2.0",
    ])
    .unwrap();
    assert!(matches!(
        firmware.target_spec.and_then(|s| s.targets),
        Some(v1::operation_target_spec::Targets::NvlDomains(_))
    ));
}

#[test]
fn rack_ac_power_cycle_takes_the_task_flags() {
    let Command::Rack(RackCommand::AcPowerCycle(args)) = command(&[
        "rack",
        "ac-power-cycle",
        "--rack-external-ids",
        "r-0001",
        "--queue",
        "--queue-timeout",
        "10m",
        "--override-readiness-check",
        "--description",
        "cycle",
    ]) else {
        panic!("rack ac-power-cycle")
    };
    let r = args.ac_power_cycle_request().unwrap();
    let targets = rack_targets(&r.target_spec);
    assert_eq!(
        targets[0].identifier,
        Some(v1::rack_target::Identifier::ExternalId("r-0001".into()))
    );
    assert_eq!(
        r.queue_options,
        Some(v1::QueueOptions {
            conflict_strategy: v1::ConflictStrategy::Queue as i32,
            queue_timeout_seconds: 600,
        })
    );
    assert!(r.override_readiness_check);
    assert_eq!(r.description, "cycle");
    let Command::Rack(RackCommand::AcPowerCycle(none)) = command(&["rack", "ac-power-cycle"])
    else {
        panic!("parsed")
    };
    assert!(none.ac_power_cycle_request().is_err(), "no targets");
}

#[test]
fn rack_lifecycle_commands_build_their_requests() {
    let args = |argv: &[&str]| match command(argv) {
        Command::Rack(
            RackCommand::BringUp(a) | RackCommand::Ingest(a) | RackCommand::Decommission(a),
        ) => a,
        other => panic!("unexpected {other:?}"),
    };
    let up = args(&[
        "rack",
        "bring-up",
        "--nvl-domain",
        "nvl-a",
        "--override-readiness-check",
    ])
    .bring_up_request()
    .unwrap();
    assert!(up.override_readiness_check);
    assert!(matches!(
        up.target_spec.and_then(|t| t.targets),
        Some(v1::operation_target_spec::Targets::NvlDomains(_))
    ));
    let queued = args(&["rack", "bring-up", "--racks", "a", "--queue"]).bring_up_request();
    assert!(
        queued
            .unwrap_err()
            .to_string()
            .contains("--queue does not apply to bring-up"),
    );
    let ingest = args(&[
        "rack",
        "ingest",
        "--racks",
        "a",
        "--component-types",
        "compute",
    ])
    .ingest_request()
    .unwrap();
    assert_eq!(rack_targets(&ingest.target_spec)[0].component_types, [1]);
    let retire = args(&["rack", "decommission", "--racks", "a", "--queue"])
        .decommission_request()
        .unwrap();
    assert!(retire.queue_options.is_some());
    assert!(
        args(&[
            "rack",
            "decommission",
            "--racks",
            "a",
            "--override-readiness-check"
        ])
        .decommission_request()
        .is_err()
    );
}

#[test]
fn power_off_and_reset_map_force_to_forced() {
    let PowerRequest::Off(off) = power(&["power", "off", "--racks", "rack-a01"]).unwrap() else {
        panic!("off")
    };
    assert!(!off.forced);
    assert!(rack_targets(&off.target_spec)[0].component_types.is_empty());
    let PowerRequest::Off(off) =
        power(&["power", "off", "--racks", "rack-a01", "--force"]).unwrap()
    else {
        panic!("off")
    };
    assert!(off.forced);
    let PowerRequest::Reset(reset) =
        power(&["power", "reset", "--rack-external-ids", "r-0001", "--force"]).unwrap()
    else {
        panic!("reset")
    };
    assert!(reset.forced);
    let PowerRequest::Reset(reset) =
        power(&["power", "reset", "--rack-external-ids", "r-0001"]).unwrap()
    else {
        panic!("reset")
    };
    assert!(!reset.forced);
}

#[test]
fn power_on_rejects_force_naming_the_flag() {
    let err = power(&["power", "on", "--racks", "rack-a01", "--force"]).unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("--force applies to `power off` and `power reset` only"),
        "{text}"
    );
}

#[test]
fn queue_flags_build_queue_options() {
    let PowerRequest::Off(r) = power(&[
        "power",
        "off",
        "--racks",
        "rack-a01",
        "--queue",
        "--queue-timeout",
        "30m",
    ])
    .unwrap() else {
        panic!("off")
    };
    assert_eq!(
        r.queue_options,
        Some(v1::QueueOptions {
            conflict_strategy: v1::ConflictStrategy::Queue as i32,
            queue_timeout_seconds: 1800,
        })
    );
    // --queue alone: the server default timeout (0 on the wire).
    let PowerRequest::On(r) = power(&["power", "on", "--racks", "rack-a01", "--queue"]).unwrap()
    else {
        panic!("on")
    };
    assert_eq!(r.queue_options.unwrap().queue_timeout_seconds, 0);
    // --queue-timeout needs --queue.
    let err = parse(&["power", "on", "--racks", "a", "--queue-timeout", "5m"]).unwrap_err();
    assert!(err.to_string().contains("--queue"), "{err}");
    assert_eq!(parse_queue_timeout("1h30m"), Ok(5400));
    for bad in ["0s", "500ms", "1500ms", "30", "100000d"] {
        assert!(parse_queue_timeout(bad).is_err(), "{bad}");
    }
}

#[test]
fn component_targets_by_uuid_and_external_id() {
    let PowerRequest::Off(r) = power(&[
        "power",
        "off",
        "--components",
        COMPONENT,
        "--component-external-ids",
        "compute:r-0001-compute-01,nvswitch:r-0001-nvswitch-02",
    ])
    .unwrap() else {
        panic!("off")
    };
    use v1::component_target::Identifier;
    let ids: Vec<_> = component_targets(&r.target_spec)
        .into_iter()
        .map(|t| t.identifier.unwrap())
        .collect();
    assert_eq!(
        ids,
        vec![
            Identifier::Id(v1::Uuid {
                id: COMPONENT.into()
            }),
            Identifier::External(v1::ExternalRef {
                r#type: 1,
                id: "r-0001-compute-01".into()
            }),
            Identifier::External(v1::ExternalRef {
                r#type: 2,
                id: "r-0001-nvswitch-02".into()
            }),
        ]
    );
    assert_eq!(
        parse_component_external_id("PowerShelf:ps:7"),
        Ok((ComponentType::PowerShelf, "ps:7".into()))
    );
    for bad in ["compute", "gpu:x", "compute:", ":x"] {
        assert!(parse_component_external_id(bad).is_err(), "{bad}");
    }
}

#[test]
fn target_mistakes_are_client_errors() {
    let no_target = power(&["power", "on"]).unwrap_err().to_string();
    assert!(
        no_target.contains("--racks") && no_target.contains("--components"),
        "{no_target}"
    );
    let mixed = power(&["power", "on", "--racks", "a", "--components", COMPONENT])
        .unwrap_err()
        .to_string();
    assert!(mixed.contains("cannot be combined"), "{mixed}");
    let types = power(&[
        "power",
        "on",
        "--components",
        COMPONENT,
        "--component-types",
        "compute",
    ])
    .unwrap_err()
    .to_string();
    assert!(types.contains("--component-types"), "{types}");
}

#[test]
fn malformed_values_are_usage_errors_naming_the_flag() {
    for (args, flag) in [
        (vec!["power", "on", "--rack-ids", "rack-a01"], "--rack-ids"),
        (vec!["power", "on", "--components", "nope"], "--components"),
        (
            vec!["power", "on", "--component-external-ids", "gpu:1"],
            "--component-external-ids",
        ),
        (
            vec!["power", "off", "--component-types", "gpu"],
            "--component-types",
        ),
        (vec!["power", "reset", "--rule-id", "x"], "--rule-id"),
        (
            vec!["power", "on", "--queue", "--queue-timeout", "soon"],
            "--queue-timeout",
        ),
        (
            vec!["firmware", "upgrade", "--start", "tomorrow", "--end", "x"],
            "--start",
        ),
        (
            vec!["firmware", "upgrade", "--sub-targets", "bmc,,nvos"],
            "--sub-targets",
        ),
        (vec!["task", "get", "nope"], "<IDS>"),
        (
            vec!["task", "watch", RULE, "--interval", "10ms"],
            "--interval",
        ),
        (
            vec!["task", "list", "--component-id", "x"],
            "--component-id",
        ),
        (vec!["rule", "list", "--type", "bring_up"], "--type"),
        (vec!["rule", "list", "--default", "maybe"], "--default"),
        (vec!["rule", "get", "x"], "<ID>"),
        (
            vec!["rule", "associate", "--rack-id", "x", "--rule-id", RULE],
            "--rack-id",
        ),
    ] {
        let err = parse(&args).unwrap_err().to_string();
        assert!(err.contains(flag), "{args:?}: {err}");
    }
    // `power` without on/off/reset and `power on --force` never reach a server.
    assert!(parse(&["power"]).is_err());
    assert!(matches!(
        power_command(&["power", "on", "--racks", "a", "--force"]),
        PowerCommand::On(_)
    ));
}

// ---------------------------------------------------------------------------
// firmware upgrade
// ---------------------------------------------------------------------------

#[test]
fn firmware_upgrade_builds_the_request() {
    let r = firmware(&[
        "firmware",
        "upgrade",
        "--rack-external-ids",
        "r-0001,r-0002",
        "--component-types",
        "compute",
        "--target-version",
        "gb200-fw-24.11.1",
        "--start",
        "2026-06-01T22:00:00Z",
        "--end",
        "2026-06-02T04:00:00+02:00",
        "--sub-targets",
        "BMC,nvos",
        "--sub-targets",
        "dpu",
        "--override-version-check",
        "--queue",
        "--queue-timeout",
        "2h",
        "--rule-id",
        RULE,
        "--description",
        "June bundle",
    ])
    .unwrap();
    let targets = rack_targets(&r.target_spec);
    assert_eq!(targets.len(), 2);
    assert!(targets.iter().all(|t| t.component_types == vec![1]));
    assert_eq!(r.target_version.as_deref(), Some("gb200-fw-24.11.1"));
    assert_eq!(r.start_time.unwrap().seconds, 1_780_351_200);
    // 04:00+02:00 is 02:00Z.
    assert_eq!(r.end_time.unwrap().seconds, 1_780_351_200 + 4 * 3600);
    assert_eq!(r.sub_targets, vec!["bmc", "nvos", "dpu"]);
    assert!(r.override_version_check);
    assert!(!r.override_readiness_check);
    assert_eq!(r.queue_options.unwrap().queue_timeout_seconds, 7200);
    assert_eq!(r.rule_id.unwrap().id, RULE);
    assert_eq!(r.description, "June bundle");
    assert!(r.authentication_data.is_none());
}

#[test]
fn firmware_window_and_defaults() {
    let r = firmware(&["firmware", "upgrade", "--racks", "rack-a01"]).unwrap();
    assert_eq!(r.target_version, None);
    assert_eq!(r.start_time, None);
    assert_eq!(r.end_time, None);
    assert!(r.sub_targets.is_empty());
    assert!(!r.override_version_check);
    let err = firmware(&[
        "firmware",
        "upgrade",
        "--racks",
        "rack-a01",
        "--start",
        "2026-06-02T00:00:00Z",
        "--end",
        "2026-06-01T00:00:00Z",
    ])
    .unwrap_err()
    .to_string();
    assert!(err.contains("--end") && err.contains("--start"), "{err}");
    // --start and --end come together.
    let err = parse(&[
        "firmware",
        "upgrade",
        "--racks",
        "a",
        "--start",
        "2026-06-01T00:00:00Z",
    ])
    .unwrap_err()
    .to_string();
    assert!(err.contains("--end"), "{err}");
    // Layered versions are passed verbatim.
    let layered = r#"{"compute":"gb200-fw-24.11.1","nvswitch":"nvos-25.05"}"#;
    let r = firmware(&[
        "firmware",
        "upgrade",
        "--racks",
        "a",
        "--target-version",
        layered,
    ])
    .unwrap();
    assert_eq!(r.target_version.as_deref(), Some(layered));
}

// ---------------------------------------------------------------------------
// task
// ---------------------------------------------------------------------------

#[test]
fn task_list_flags_build_the_request() {
    let Command::Task(TaskCommand::List(args)) = command(&[
        "task",
        "list",
        "--rack-id",
        "r-0001",
        "--component-id",
        COMPONENT,
        "--active",
        "--limit",
        "10",
        "--offset",
        "20",
        "--with-report",
    ]) else {
        panic!("task list")
    };
    let r = args.to_request().unwrap();
    assert_eq!(r.rack_id.unwrap().id, "r-0001");
    assert_eq!(r.component_id.unwrap().id, COMPONENT);
    assert!(r.active_only);
    assert!(r.with_report);
    assert_eq!(
        r.pagination,
        Some(v1::Pagination {
            offset: 20,
            limit: 10
        })
    );
    let Command::Task(TaskCommand::List(args)) = command(&["task", "list"]) else {
        panic!("task list")
    };
    assert_eq!(args.to_request().unwrap(), v1::ListTasksRequest::default());
}

#[test]
fn task_get_cancel_and_watch_parse() {
    let Command::Task(TaskCommand::Get { ids }) = command(&["task", "get", RULE, COMPONENT]) else {
        panic!("get")
    };
    assert_eq!(ids.len(), 2);
    assert!(parse(&["task", "get"]).is_err());
    let Command::Task(TaskCommand::Cancel { id }) = command(&["task", "cancel", RULE]) else {
        panic!("cancel")
    };
    assert_eq!(id.to_string(), RULE);
    let Command::Task(TaskCommand::Watch { interval, .. }) = command(&["task", "watch", RULE])
    else {
        panic!("watch")
    };
    assert_eq!(interval, std::time::Duration::from_secs(1));
    let Command::Task(TaskCommand::Watch { interval, .. }) =
        command(&["task", "watch", RULE, "--interval", "250ms"])
    else {
        panic!("watch")
    };
    assert_eq!(interval, std::time::Duration::from_millis(250));
}

// ---------------------------------------------------------------------------
// rule
// ---------------------------------------------------------------------------

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "rackflow-cli-commands-{}-{}-{name}",
        std::process::id(),
        uuid::Uuid::new_v4()
    ));
    std::fs::write(&path, text).unwrap();
    path
}

const POWER_ON_DEFINITION: &str = r#"
version: v1
steps:
  - component_type: powershelf
    stage: 1
    timeout: 15m
    retry: {max_attempts: 3, initial_interval: 5s, backoff_coefficient: 2.0}
    main_operation: {name: PowerControl}
    post_operation:
      - name: VerifyPowerStatus
        timeout: 5m
        poll_interval: 10s
        parameters: {expected_status: on}
  - component_type: compute
    stage: 2
    max_parallel: 4
    main_operation: {name: PowerControl}
"#;

#[test]
fn rule_create_reads_the_definition_and_builds_the_request() {
    let def = temp_file("power-on.yaml", POWER_ON_DEFINITION);
    let Command::Rule(RuleCommand::Create(args)) = command(&[
        "rule",
        "create",
        "--name",
        " power-on-fast ",
        "--type",
        "power_control",
        "--code",
        "power_on",
        "--definition",
        def.to_str().unwrap(),
        "--description",
        "shelves then trays",
        "--default",
    ]) else {
        panic!("rule create")
    };
    let (r, warnings) = args.to_request().unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(r.name, "power-on-fast");
    assert_eq!(r.description, "shelves then trays");
    assert_eq!(r.operation_type, v1::OperationType::PowerControl as i32);
    assert_eq!(r.operation_code, "power_on");
    assert!(r.is_default);
    let json: serde_json::Value = serde_json::from_str(&r.rule_definition_json).unwrap();
    assert_eq!(json["version"], "v1");
    assert_eq!(json["steps"].as_array().unwrap().len(), 2);
    // YAML `on` stays the string "on" (YAML 1.2); durations are Go durations.
    assert_eq!(
        json["steps"][0]["post_operation"][0]["parameters"]["expected_status"],
        "on"
    );
    assert_eq!(json["steps"][0]["component_type"], "PowerShelf");
    assert_eq!(
        rackflow_domain::duration::parse_go_duration(json["steps"][0]["timeout"].as_str().unwrap()),
        Ok(std::time::Duration::from_secs(900))
    );
    assert_eq!(json["steps"][1]["max_parallel"], 4);

    // A JSON definition works the same; the code must fit the type.
    let json_def = temp_file(
        "def.json",
        &serde_json::json!({"steps": [{"component_type": "Compute", "stage": 1,
            "main_operation": {"name": "FirmwareControl"}}]})
        .to_string(),
    );
    let Command::Rule(RuleCommand::Create(args)) = command(&[
        "rule",
        "create",
        "--name",
        "fw",
        "--type",
        "firmware-control",
        "--code",
        "power_on",
        "--definition",
        json_def.to_str().unwrap(),
    ]) else {
        panic!("rule create")
    };
    let err = args.to_request().unwrap_err().to_string();
    assert!(
        err.starts_with("--code: invalid operation code \"power_on\" for firmware_control"),
        "{err}"
    );
    let Command::Rule(RuleCommand::Create(mut args)) = command(&[
        "rule",
        "create",
        "--name",
        "fw",
        "--type",
        "firmware_control",
        "--code",
        "upgrade",
        "--definition",
        json_def.to_str().unwrap(),
    ]) else {
        panic!("rule create")
    };
    let (r, _) = args.to_request().unwrap();
    assert!(!r.is_default);
    assert_eq!(r.operation_type, v1::OperationType::FirmwareControl as i32);
    args.name = "  ".into();
    assert!(
        args.to_request()
            .unwrap_err()
            .to_string()
            .contains("--name")
    );
    std::fs::remove_file(def).ok();
    std::fs::remove_file(json_def).ok();
}

#[test]
fn rule_list_and_association_flags() {
    let Command::Rule(RuleCommand::List(args)) = command(&[
        "rule",
        "list",
        "--type",
        "firmware_control",
        "--default",
        "false",
        "--limit",
        "5",
        "--offset",
        "10",
    ]) else {
        panic!("rule list")
    };
    assert_eq!(
        args.to_request(),
        v1::ListOperationRulesRequest {
            operation_type: Some(2),
            is_default: Some(false),
            offset: Some(10),
            limit: Some(5),
        }
    );
    let Command::Rule(RuleCommand::List(args)) = command(&["rule", "list"]) else {
        panic!("rule list")
    };
    assert_eq!(args.to_request(), v1::ListOperationRulesRequest::default());

    let Command::Rule(RuleCommand::Disassociate {
        rack_id,
        rule_type,
        code,
    }) = command(&[
        "rule",
        "disassociate",
        "--rack-id",
        RACK,
        "--type",
        "power_control",
        "--code",
        "force_power_off",
    ])
    else {
        panic!("disassociate")
    };
    let r = disassociate_request(rack_id, rule_type, &code).unwrap();
    assert_eq!(r.rack_id.unwrap().id, RACK);
    assert_eq!(r.operation_type, 1);
    assert_eq!(r.operation_code, "force_power_off");
    assert!(disassociate_request(rack_id, RuleType::FirmwareControl, "power_on").is_err());

    assert!(matches!(
        command(&["rule", "associate", "--rack-id", RACK, "--rule-id", RULE]),
        Command::Rule(RuleCommand::Associate { .. })
    ));
    assert!(matches!(
        command(&["rule", "associations", "--rack-id", RACK]),
        Command::Rule(RuleCommand::Associations {
            rule_type: None,
            code: None,
            ..
        })
    ));
    // --type and --code go together.
    assert!(
        parse(&[
            "rule",
            "associations",
            "--rack-id",
            RACK,
            "--type",
            "power_control"
        ])
        .is_err()
    );
    assert!(matches!(
        command(&["rule", "set-default", RULE]),
        Command::Rule(RuleCommand::SetDefault { .. })
    ));
    assert!(matches!(
        command(&["rule", "delete", RULE]),
        Command::Rule(RuleCommand::Delete { .. })
    ));
}

#[test]
fn rule_load_flags() {
    let Command::Rule(RuleCommand::Load(args)) =
        command(&["rule", "load", "rules.yaml", "--dry-run"])
    else {
        panic!("load")
    };
    assert!(args.dry_run && !args.overwrite);
    let Command::Rule(RuleCommand::Load(args)) =
        command(&["rule", "load", "rules.yaml", "--overwrite"])
    else {
        panic!("load")
    };
    assert!(args.overwrite);
    let err = parse(&["rule", "load", "r.yaml", "--dry-run", "--overwrite"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("--overwrite"), "{err}");
}
