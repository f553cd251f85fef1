//! Rule batch files (`rule load`) and definition checks: parsing, the
//! checks made before any call, and the requests created.

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

use rackflow_api::v1;
use rackflow_cli::rule::plan_load;
use rackflow_cli::rule_file::{Definition, PlannedRule, RuleType, plan_batch};
use serde_json::{Value, json};

/// The example of docs/cli.md: the three required defaults.
const BATCH: &str = r#"
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
      - component_type: nvswitch
        stage: 2
        main_operation: {name: PowerControl}
      - component_type: compute
        stage: 3
        max_parallel: 6
        main_operation: {name: PowerControl}
        post_operation:
          - {name: VerifyPowerStatus, timeout: 5m, poll_interval: 10s, parameters: {expected_status: on}}
  - name: power-off-staged
    operation_type: power_control
    operation: power_off
    steps:
      - component_type: compute
        stage: 1
        main_operation: {name: PowerControl}
        post_operation:
          - {name: Sleep, parameters: {duration: 10s}}
      - component_type: powershelf
        stage: 2
        main_operation: {name: PowerControl}
  - name: firmware-compute-first
    operation_type: firmware_control
    operation: upgrade
    steps:
      - component_type: compute
        stage: 1
        timeout: 45m
        main_operation: {name: FirmwareControl, parameters: {poll_interval: 2m}}
      - component_type: nvswitch
        stage: 2
        main_operation: {name: FirmwareControl}
"#;

fn plan(text: &str) -> Vec<PlannedRule> {
    plan_batch(text).unwrap_or_else(|e| panic!("{e:#}"))
}

fn plan_error(text: &str) -> String {
    format!("{:#}", plan_batch(text).unwrap_err())
}

#[test]
fn batch_parses_and_plans_default_rules() {
    let planned = plan(BATCH);
    assert_eq!(planned.len(), 3);
    let ops: Vec<String> = planned.iter().map(|r| r.operation()).collect();
    assert_eq!(
        ops,
        [
            "power_control/power_on",
            "power_control/power_off",
            "firmware_control/upgrade"
        ]
    );
    let on = &planned[0];
    assert_eq!(on.definition.stages(), 3);
    assert_eq!(on.definition.steps(), 3);
    assert!(
        on.definition.warnings.is_empty(),
        "{:?}",
        on.definition.warnings
    );
    let request = on.request(true);
    assert_eq!(request.name, "power-on-staged");
    assert_eq!(
        request.description,
        "shelves, then switches, then compute in batches of 6"
    );
    assert_eq!(
        request.operation_type,
        v1::OperationType::PowerControl as i32
    );
    assert_eq!(request.operation_code, "power_on");
    assert!(request.is_default);
    assert!(!on.request(false).is_default);
    // The definition sent is {version, steps} as the validator read it.
    let def: Value = serde_json::from_str(&request.rule_definition_json).unwrap();
    assert_eq!(def.as_object().unwrap().len(), 2);
    assert_eq!(def["version"], "v1");
    assert_eq!(def["steps"][0]["component_type"], "PowerShelf");
    assert_eq!(def["steps"][0]["stage"], 1);
    assert_eq!(def["steps"][0]["retry"]["max_attempts"], 3);
    assert_eq!(def["steps"][2]["max_parallel"], 6);
    assert_eq!(
        def["steps"][0]["post_operation"][0]["parameters"]["expected_status"],
        "on"
    );
    assert_eq!(planned[2].code, "upgrade");
    assert_eq!(
        planned[2].request(true).operation_type,
        v1::OperationType::FirmwareControl as i32
    );
    // What is sent reads back as the same definition.
    let again = Definition::from_value(&def).unwrap();
    assert_eq!(again.rule, on.definition.rule);
}

#[test]
fn the_same_batch_reads_from_json() {
    let value: Value = serde_yaml::from_str(BATCH).unwrap();
    assert_eq!(plan(&value.to_string()), plan(BATCH));
}

#[test]
fn coverage_is_required_per_type_present() {
    // Only power rules, without power_off.
    let text = r#"
rules:
  - name: on
    operation_type: power_control
    operation: power_on
    steps: [{component_type: compute, stage: 1, main_operation: {name: PowerControl}}]
"#;
    let err = plan_error(text);
    assert!(
        err.contains("power_off") && err.contains("power_control"),
        "{err}"
    );
    // Only firmware rules, without upgrade.
    let text = r#"
rules:
  - name: down
    operation_type: firmware_control
    operation: downgrade
    steps: [{component_type: compute, stage: 1, main_operation: {name: FirmwareControl}}]
"#;
    let err = plan_error(text);
    assert!(
        err.contains("'upgrade'") && err.contains("firmware_control"),
        "{err}"
    );
    // A complete firmware-only file needs no power rules.
    assert_eq!(plan(&text.replace("downgrade", "upgrade")).len(), 1);
}

#[test]
fn duplicate_operations_are_rejected() {
    let err = plan_error(&BATCH.replace("operation: power_off", "operation: power_on"));
    assert!(err.starts_with("rules[1] (power-off-staged): "), "{err}");
    assert!(err.contains("duplicate"), "{err}");
}

#[test]
fn names_types_and_codes_are_checked() {
    let err = plan_error(&BATCH.replace("name: power-off-staged", "name: \"\""));
    assert!(
        err.starts_with("rules[1]") && err.contains("name is required"),
        "{err}"
    );
    let long = "x".repeat(129);
    let err = plan_error(&BATCH.replace("power-off-staged", &long));
    assert!(err.contains("128"), "{err}");
    let err = plan_error(&BATCH.replace("operation_type: firmware_control", "operation_type: gpu"));
    assert!(
        err.starts_with("rules[2] (firmware-compute-first): "),
        "{err}"
    );
    assert!(err.contains("gpu"), "{err}");
    let err = plan_error(&BATCH.replace("operation: power_off", "operation: shutdown"));
    assert!(
        err.starts_with("rules[1] (power-off-staged): ") && err.contains("shutdown"),
        "{err}"
    );
    // Types the validator knows but the rule API cannot create.
    let bring_up = BATCH
        .replace(
            "operation_type: firmware_control",
            "operation_type: bring_up",
        )
        .replace("operation: upgrade", "operation: bring_up");
    let err = plan_error(&bring_up);
    assert_eq!(
        err,
        "rules[2] (firmware-compute-first): operation type bring_up cannot be created \
         through the rule API (only power_control and firmware_control)"
    );
    // Type spellings of --type and rule files.
    for t in [
        "POWER_CONTROL",
        "power-control",
        "OPERATION_TYPE_POWER_CONTROL",
    ] {
        assert_eq!(RuleType::parse(t), Ok(RuleType::PowerControl), "{t}");
    }
    assert!(
        RuleType::parse("bring_up")
            .unwrap_err()
            .contains("rule API")
    );
    assert_eq!(
        RuleType::PowerControl.check_code(" restart "),
        Ok("restart".into())
    );
    assert!(RuleType::FirmwareControl.check_code("restart").is_err());
}

#[test]
fn file_structure_errors_and_warnings() {
    assert!(plan_error("rules: []\n").contains("defines no rules"));
    assert!(plan_error("version: v1\n").contains("defines no rules"));
    let err = plan_error(&BATCH.replace("version: v1", "version: v2"));
    assert!(err.contains("v2"), "{err}");
    assert!(plan_batch("rules: [").is_err());
    // Unknown keys are refused (issue 31): a typo would leave its field at
    // its default, max_parallel's being "every component at once".
    let typo = BATCH.replacen("max_parallel: 6", "max_paralel: 6", 1);
    assert_eq!(
        plan_error(&typo),
        "rules[0] (power-on-staged): steps[2]: unknown key \"max_paralel\" (did you mean \"max_parallel\"?)"
    );
    let owner = BATCH.replacen(
        "    operation: power_off",
        "    operation: power_off\n    owner: ops",
        1,
    );
    assert_eq!(
        plan_error(&owner),
        "rules[1] (power-off-staged): unknown key \"owner\" (known keys: name, description, operation_type, operation, steps)"
    );
    let comment = BATCH.replacen("version: v1", "version: v1\ncomment: june", 1);
    assert_eq!(
        plan_error(&comment),
        "unknown key \"comment\" (known keys: version, rules)"
    );
}

#[test]
fn definition_checks_name_the_step() {
    let check = |steps: Value| Definition::from_value(&json!({ "version": "v1", "steps": steps }));
    let ok = json!({"component_type": "compute", "stage": 1, "main_operation": {"name": "PowerControl"}});
    assert!(check(json!([ok])).is_ok());
    let with = |key: &str, value: Value| {
        let mut step = ok.clone();
        step[key] = value;
        check(json!([step])).unwrap_err()
    };
    let expect = |err: String, words: &[&str]| {
        assert!(err.starts_with("steps[0]"), "{err}");
        for w in words {
            assert!(err.contains(w), "{err} should mention {w}");
        }
    };
    expect(with("stage", json!(0)), &["stage"]);
    expect(with("component_type", json!("gpu")), &["gpu"]);
    expect(with("max_parallel", json!(-1)), &["max_parallel"]);
    expect(with("timeout", json!("5x")), &["timeout", "5x"]);
    expect(
        with(
            "retry",
            json!({"max_attempts": 0, "initial_interval": "1s"}),
        ),
        &["max_attempts"],
    );
    expect(
        with(
            "retry",
            json!({"max_attempts": 2, "initial_interval": "1s", "backoff_coefficient": 0.5}),
        ),
        &["backoff_coefficient"],
    );
    expect(with("main_operation", json!(null)), &["main_operation"]);
    expect(
        with("main_operation", json!({"name": "Reboot"})),
        &["Reboot"],
    );
    expect(
        with("main_operation", json!({"name": "InjectExpectation"})),
        &["InjectExpectation"],
    );
    expect(
        with(
            "post_operation",
            json!([{"name": "VerifyPowerStatus", "timeout": "5m",
                "parameters": {"expected_status": "on"}}]),
        ),
        &["post_operation[0]", "poll_interval"],
    );
    expect(
        with("pre_operation", json!([{"name": "Sleep"}])),
        &["duration"],
    );

    // Two steps of one type in one stage.
    let err = check(json!([ok, ok])).unwrap_err();
    assert!(
        err.starts_with("steps[1]") && err.contains("stage 1"),
        "{err}"
    );
    let mut other_stage = ok.clone();
    other_stage["stage"] = json!(2);
    let d = check(json!([ok, other_stage])).unwrap();
    assert_eq!((d.stages(), d.steps()), (2, 2));

    // Versions: v1 or empty; the JSON sent always says v1.
    let empty = Definition::from_value(&json!({"version": ""})).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&empty.to_json()).unwrap(),
        json!({"version": "v1", "steps": []})
    );
    assert_eq!(empty.warnings.len(), 1);
    assert!(empty.warnings[0].contains("no steps"));
    assert!(Definition::from_value(&json!({"version": "v2", "steps": []})).is_err());
    assert!(Definition::from_value(&json!({"version": 1, "steps": []})).is_err());
    assert_eq!(
        Definition::from_value(&json!({"step": []})).unwrap_err(),
        "unknown key \"step\" (did you mean \"steps\"?)"
    );
}

#[test]
fn plan_load_reads_a_file_and_names_it_in_errors() {
    let path = std::env::temp_dir().join(format!(
        "rackflow-cli-rules-{}-{}.yaml",
        std::process::id(),
        uuid::Uuid::new_v4()
    ));
    std::fs::write(&path, BATCH).unwrap();
    let (planned, warnings) = plan_load(&path).unwrap();
    assert_eq!(planned.len(), 3);
    assert!(warnings.is_empty(), "{warnings:?}");
    std::fs::write(
        &path,
        BATCH.replacen("stage: 3", "stage: 3\n        max_paralel: 1", 1),
    )
    .unwrap();
    let err = format!("{:#}", plan_load(&path).unwrap_err());
    assert!(
        err.contains("steps[2]: unknown key \"max_paralel\" (did you mean \"max_parallel\"?)"),
        "{err}"
    );
    std::fs::write(
        &path,
        BATCH.replace("operation: power_off", "operation: nope"),
    )
    .unwrap();
    let err = format!("{:#}", plan_load(&path).unwrap_err());
    assert!(
        err.starts_with(&format!("rule file {}: rules[1]", path.display())),
        "{err}"
    );
    std::fs::remove_file(&path).ok();
    let err = format!("{:#}", plan_load(&path).unwrap_err());
    assert!(err.starts_with("read rule file"), "{err}");
}
