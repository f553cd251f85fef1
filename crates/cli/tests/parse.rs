//! Flag value parsing: durations, phase plans, gates, run spec files and how
//! flags override them; clap errors name the flag.

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use clap::Parser;
use rackflow_api::v1;
use rackflow_cli::args::{
    Gate, GateScope, PhasePlan, format_duration, normalize_server, parse_duration,
    parse_failure_count, parse_failure_rate, parse_phases,
};
use rackflow_cli::run::parse_state_filter;
use rackflow_cli::spec::RunSpec;
use rackflow_cli::{Cli, Command, RunCommand};

#[test]
fn durations_parse_with_units() {
    assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
    assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
    assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
    assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
    assert_eq!(parse_duration(" 45s "), Ok(Duration::from_secs(45)));
    for bad in ["", "30", "5x", "h", "1h30", "-5s", "1.5h", "s30"] {
        assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
    }
    assert!(parse_duration("30").unwrap_err().contains("missing unit"));
}

#[test]
fn durations_format_back() {
    assert_eq!(format_duration(Duration::from_secs(3600)), "1h");
    assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
    assert_eq!(format_duration(Duration::from_secs(30)), "30s");
    assert_eq!(format_duration(Duration::from_millis(1500)), "1s500ms");
    assert_eq!(format_duration(Duration::ZERO), "0s");
}

#[test]
fn phase_plans_parse() {
    assert_eq!(parse_phases("equal:3"), Ok(PhasePlan::Equal(3)));
    assert_eq!(
        parse_phases("percentage:10,30,60"),
        Ok(PhasePlan::Percentage(vec![10, 30, 60]))
    );
    assert_eq!(parse_phases("count:1,3"), Ok(PhasePlan::Count(vec![1, 3])));
    assert_eq!(parse_phases("count:5"), Ok(PhasePlan::Count(vec![5])));
    assert_eq!(parse_phases("EQUAL: 2"), Ok(PhasePlan::Equal(2)));
    for bad in [
        "equal",
        "equal:0",
        "equal:-1",
        "equal:1,2",
        "percentage:10,30",
        "percentage:0,100",
        "percentage:50,x",
        "count:0,2",
        "count:",
        "thirds:3",
        "",
    ] {
        assert!(parse_phases(bad).is_err(), "{bad:?} should be rejected");
    }
    assert!(
        parse_phases("percentage:10,30")
            .unwrap_err()
            .contains("sum to 100")
    );
    for text in ["equal:3", "percentage:10,30,60", "count:1,3"] {
        assert_eq!(parse_phases(text).unwrap().to_string(), text);
    }
}

#[test]
fn gates_parse_with_scopes() {
    assert_eq!(
        parse_failure_rate("10"),
        Ok(Gate::FailureRate {
            percent: 10,
            scope: GateScope::Current
        })
    );
    assert_eq!(
        parse_failure_rate("25%:cumulative"),
        Ok(Gate::FailureRate {
            percent: 25,
            scope: GateScope::Cumulative
        })
    );
    assert_eq!(
        parse_failure_count("3:current"),
        Ok(Gate::FailureCount {
            count: 3,
            scope: GateScope::Current
        })
    );
    for bad in ["0", "101", "x", "10:forever"] {
        assert!(parse_failure_rate(bad).is_err(), "{bad:?}");
    }
    for bad in ["0", "-2", "two", "1:phase"] {
        assert!(parse_failure_count(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn state_filters_and_server_addresses_parse() {
    let f = parse_state_filter("paused:phase_gate").unwrap();
    assert_eq!(f.status, Some(v1::OperationRunStatus::Paused));
    assert_eq!(f.reason, Some(v1::OperationRunStatusReason::PhaseGate));
    let f = parse_state_filter("completed-with-failures").unwrap();
    assert_eq!(
        f.status,
        Some(v1::OperationRunStatus::CompletedWithFailures)
    );
    assert_eq!(f.reason, None);
    assert!(parse_state_filter(":safety_gate").unwrap().status.is_none());
    assert!(parse_state_filter("done").is_err());
    assert!(parse_state_filter(":").is_err());

    assert_eq!(
        normalize_server("127.0.0.1:50051").unwrap(),
        "http://127.0.0.1:50051"
    );
    assert_eq!(
        normalize_server("https://flow.example:443").unwrap(),
        "https://flow.example:443"
    );
    assert!(normalize_server("").is_err());
}

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("rackflow").chain(args.iter().copied()))
}

#[test]
fn clap_errors_name_the_flag() {
    for (args, flag) in [
        (vec!["run", "create", "--phases", "equal:0"], "--phases"),
        (
            vec!["run", "create", "--retry-timeout", "30"],
            "--retry-timeout",
        ),
        (
            vec!["run", "create", "--failure-rate", "150"],
            "--failure-rate",
        ),
        (
            vec!["run", "create", "--failure-count", "1:sometimes"],
            "--failure-count",
        ),
        (vec!["run", "create", "--percentage", "0"], "--percentage"),
        (
            vec!["run", "create", "--max-concurrent", "0"],
            "--max-concurrent",
        ),
        (
            vec!["run", "create", "--component-types", "gpu"],
            "--component-types",
        ),
        (
            vec!["run", "create", "--exclude-run", "nope"],
            "--exclude-run",
        ),
        (vec!["run", "create", "--rule-id", "nope"], "--rule-id"),
        (vec!["run", "list", "--status", "done"], "--status"),
        (vec!["run", "targets", "nope"], "<ID>"),
        (vec!["fleet", "generate", "--racks", "0"], "--racks"),
    ] {
        let err = parse(&args).unwrap_err().to_string();
        assert!(err.contains(flag), "{args:?}: {err}");
    }
}

#[test]
fn global_flags_and_server_normalisation() {
    let cli = parse(&["--server", "10.0.0.5:6000", "-o", "json", "run", "list"]).unwrap();
    assert_eq!(cli.server, "http://10.0.0.5:6000");
    let cli = parse(&["rack", "list", "--server", "localhost:1"]).unwrap();
    assert_eq!(cli.server, "http://localhost:1");
}

fn create_args(args: &[&str]) -> rackflow_cli::run::CreateArgs {
    let mut full = vec!["run", "create"];
    full.extend_from_slice(args);
    match parse(&full).unwrap().command {
        Command::Run(RunCommand::Create(args)) => *args,
        other => panic!("unexpected command {other:?}"),
    }
}

fn configuration(request: &v1::CreateOperationRunRequest) -> &v1::OperationRunConfiguration {
    request.configuration.as_ref().unwrap()
}

#[test]
fn flags_build_the_request() {
    let args = create_args(&[
        "--name",
        "canary",
        "--percentage",
        "50",
        "--seed",
        "s1",
        "--max-concurrent",
        "4",
        "--failure-rate",
        "10",
        "--failure-count",
        "2:cumulative",
        "--phases",
        "count:1,3",
        "--auto-advance",
        "--ordering-seed",
        "o1",
        "--retry-timeout",
        "2h",
        "--max-retry-delay",
        "10m",
        "--target-version",
        "24.11.1",
        "--racks",
        "rack-a01,7b1e2c1a-9a55-4bde-9e0f-0a4c1b9b7d10",
        "--rack-external-ids",
        "r-0003",
        "--component-types",
        "compute,nvswitch",
    ]);
    let request = args.to_spec().unwrap().to_request().unwrap();
    assert_eq!(request.name, "canary");
    let c = configuration(&request);
    let Some(v1::operation_run_selector::Selector::Percentage(p)) =
        c.selector.as_ref().unwrap().selector.clone()
    else {
        panic!("percentage selector")
    };
    assert_eq!((p.percentage, p.seed.as_str()), (50, "s1"));
    let o = c.options.as_ref().unwrap();
    assert_eq!(o.max_concurrent_targets, 4);
    assert_eq!(o.safety_policy.as_ref().unwrap().gates.len(), 2);
    let phases = o.phase_policy.as_ref().unwrap();
    assert!(phases.advance_policy.unwrap().auto_advance);
    assert!(matches!(
        &phases.plan,
        Some(v1::operation_run_phase_policy::Plan::Count(c)) if c.phases.len() == 2
    ));
    let Some(v1::operation_run_conflict_policy::Strategy::Retry(retry)) =
        o.conflict_policy.as_ref().unwrap().strategy
    else {
        panic!("retry policy")
    };
    assert_eq!(retry.retry_timeout.unwrap().seconds, 7200);
    assert!(retry.initial_retry_delay.is_none());
    assert_eq!(retry.max_retry_delay.unwrap().seconds, 600);
    let op = c.operation.as_ref().unwrap();
    let Some(v1::operation_run_operation::Operation::UpgradeFirmware(fw)) = &op.operation else {
        panic!("upgrade")
    };
    assert_eq!(fw.target_version.as_deref(), Some("24.11.1"));
    let Some(v1::operation_target_spec::Targets::Racks(racks)) =
        fw.target_spec.as_ref().unwrap().targets.clone()
    else {
        panic!("rack targets")
    };
    use v1::rack_target::Identifier;
    let ids: Vec<_> = racks
        .targets
        .iter()
        .map(|t| t.identifier.clone().unwrap())
        .collect();
    assert_eq!(
        ids,
        vec![
            Identifier::Name("rack-a01".into()),
            Identifier::Id(v1::Uuid {
                id: "7b1e2c1a-9a55-4bde-9e0f-0a4c1b9b7d10".into()
            }),
            Identifier::ExternalId("r-0003".into()),
        ]
    );
    assert!(
        racks
            .targets
            .iter()
            .all(|t| t.component_types == vec![1, 2])
    );
    // With explicit racks the types go on the racks, not the default scope.
    assert!(
        op.target_scope
            .as_ref()
            .unwrap()
            .default_scope_component_filter
            .is_none()
    );
}

#[test]
fn missing_name_or_gate_is_a_client_error_naming_the_flag() {
    let err = create_args(&["--failure-rate", "10"])
        .to_spec()
        .unwrap()
        .to_request();
    assert!(err.unwrap_err().to_string().contains("--name"));
    let err = create_args(&["--name", "x"])
        .to_spec()
        .unwrap()
        .to_request();
    let text = err.unwrap_err().to_string();
    assert!(
        text.contains("--failure-rate") && text.contains("--failure-count"),
        "{text}"
    );
}

#[test]
fn defaults_leave_server_defaults_alone() {
    let request = create_args(&["--name", "x", "--failure-count", "1"])
        .to_spec()
        .unwrap()
        .to_request()
        .unwrap();
    let c = configuration(&request);
    let o = c.options.as_ref().unwrap();
    assert_eq!(o.max_concurrent_targets, 1);
    assert!(o.conflict_policy.is_none());
    assert!(o.ordering_policy.is_none());
    assert!(o.phase_policy.is_none());
    let Some(v1::operation_run_selector::Selector::Percentage(p)) =
        c.selector.as_ref().unwrap().selector.clone()
    else {
        panic!()
    };
    assert_eq!((p.percentage, p.seed.as_str()), (100, ""));
}

const SPEC_YAML: &str = r#"
name: june-firmware
description: June bundle
selector:
  percentage: 25
  seed: cohort-a
options:
  max_concurrent_targets: 3
  safety_gates:
    - failure_rate: 10
    - failure_count: 2
      scope: cumulative
  conflict_retry:
    retry_timeout: 2h
    initial_retry_delay: 10s
  ordering_seed: order-a
  phases:
    percentage: [10, 30, 60]
  auto_advance: true
operation:
  target_version: gb200-fw-24.11.1
  description: June firmware
  component_types: [compute]
  exclude_runs: [0f5c3f1e-3c38-4c39-8a39-0b7e7f7a0d11]
"#;

fn spec_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("rackflow-cli-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn spec_file_builds_the_request_and_flags_override_it() {
    let path = spec_file("spec.yaml", SPEC_YAML);
    let file = path.to_str().unwrap();
    let spec = create_args(&["--file", file]).to_spec().unwrap();
    assert_eq!(
        spec.options.phases,
        Some(PhasePlan::Percentage(vec![10, 30, 60]))
    );
    let request = spec.to_request().unwrap();
    assert_eq!(request.name, "june-firmware");
    let c = configuration(&request);
    let op = c.operation.as_ref().unwrap();
    let scope = op.target_scope.as_ref().unwrap();
    assert_eq!(scope.exclude_operation_run_ids.len(), 1);
    assert!(matches!(
        &scope.default_scope_component_filter.as_ref().unwrap().filter,
        Some(v1::component_filter::Filter::Types(t)) if t.types == vec![1]
    ));

    // Flags win over the file; list flags replace the file's list.
    let spec = create_args(&[
        "--file",
        file,
        "--name",
        "override",
        "--percentage",
        "75",
        "--phases",
        "equal:2",
        "--failure-count",
        "5",
    ])
    .to_spec()
    .unwrap();
    assert_eq!(spec.name.as_deref(), Some("override"));
    assert_eq!(spec.selector.percentage, Some(75));
    assert_eq!(spec.selector.seed.as_deref(), Some("cohort-a"));
    assert_eq!(spec.options.phases, Some(PhasePlan::Equal(2)));
    assert_eq!(spec.options.safety_gates.len(), 1);
    assert_eq!(spec.options.safety_gates[0].failure_count, Some(5));
    assert_eq!(spec.options.max_concurrent_targets, Some(3));
    std::fs::remove_file(&path).ok();
}

#[test]
fn spec_round_trips_through_the_wire_configuration() {
    let spec: RunSpec =
        rackflow_cli::fleet::parse_by_format(Path::new("s.yaml"), SPEC_YAML).unwrap();
    let request = spec.to_request().unwrap();
    let back = RunSpec::from_proto(request.configuration.as_ref().unwrap());
    assert_eq!(back.selector, spec.selector);
    assert_eq!(back.options, spec.options);
    assert_eq!(back.operation, spec.operation);
    // And the JSON form reads back as a spec.
    let json = serde_json::to_string(&back).unwrap();
    let again: RunSpec = rackflow_cli::fleet::parse_by_format(Path::new("s.json"), &json).unwrap();
    assert_eq!(again, back);
}

#[test]
fn spec_file_errors_name_the_key() {
    let bad_phases = SPEC_YAML.replace("percentage: [10, 30, 60]", "percentage: [10, 30]");
    let spec: RunSpec =
        rackflow_cli::fleet::parse_by_format(Path::new("s.yaml"), &bad_phases).unwrap();
    let err = spec.to_request().unwrap_err().to_string();
    assert!(
        err.contains("options.phases") && err.contains("sum to 100"),
        "{err}"
    );
    let text_form = SPEC_YAML.replace(
        "phases:\n    percentage: [10, 30, 60]",
        "phases: \"percentage:10,30\"",
    );
    let err = rackflow_cli::fleet::parse_by_format::<RunSpec>(Path::new("s.yaml"), &text_form)
        .unwrap_err();
    assert!(format!("{err:#}").contains("sum to 100"), "{err:#}");

    let two_kinds = SPEC_YAML.replace(
        "- failure_rate: 10",
        "- failure_rate: 10\n      failure_count: 1",
    );
    let spec: RunSpec =
        rackflow_cli::fleet::parse_by_format(Path::new("s.yaml"), &two_kinds).unwrap();
    let err = spec.to_request().unwrap_err().to_string();
    assert!(err.contains("options.safety_gates[0]"), "{err}");

    let bad_duration = SPEC_YAML.replace("retry_timeout: 2h", "retry_timeout: 2");
    let err = rackflow_cli::fleet::parse_by_format::<RunSpec>(Path::new("s.yaml"), &bad_duration)
        .unwrap_err();
    assert!(format!("{err:#}").contains("missing unit"), "{err:#}");

    let unknown = SPEC_YAML.replace("ordering_seed", "order_seed");
    assert!(
        rackflow_cli::fleet::parse_by_format::<RunSpec>(Path::new("s.yaml"), &unknown).is_err()
    );
}
