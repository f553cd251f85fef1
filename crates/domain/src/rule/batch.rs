//! The YAML batch loader (spec flow-core §4.6, `rule create --from-yaml`):
//! a document of rules that all become defaults for their (type, code).
//!
//! ```yaml
//! version: v1
//! rules:
//!   - name: "Power on"
//!     description: "..."
//!     operation_type: power_control
//!     operation: power_on
//!     steps: [ ... same shape as a JSON rule definition's steps ... ]
//! ```
//!
//! The whole file is checked before anything is written: each rule's record
//! and definition (as a user rule), no two rules for one (type, code), and
//! the required operations of every type the file covers.

use std::collections::HashMap;

use serde_json::Value;

use super::keys::{BATCH_KEYS, BATCH_RULE_KEYS, check_keys, check_steps_keys};
use super::validate::{parse_operation_type, parse_steps, validate_rule_record};
use super::{CURRENT_VERSION, RuleDefinition, RuleError};
use crate::task::TaskType;

/// A rule to create (no id or timestamps yet).
#[derive(Debug, Clone, PartialEq)]
pub struct NewRule {
    pub name: String,
    pub description: String,
    pub operation_type: TaskType,
    pub operation_code: String,
    pub definition: RuleDefinition,
    pub is_default: bool,
}

impl NewRule {
    /// Record rules, then the definition's (as a user rule).
    pub fn validate(&self) -> Result<(), RuleError> {
        validate_rule_record(&self.name, self.operation_type, &self.operation_code)?;
        self.definition.validate()
    }
}

/// Operations a batch must define for each type it has rules of: without
/// them the type's most common tasks would fall back to built-ins while
/// the rest use the file's rules.
pub fn required_operations(operation_type: TaskType) -> &'static [&'static str] {
    match operation_type {
        TaskType::PowerControl => &["power_on", "power_off"],
        TaskType::FirmwareControl => &["upgrade"],
        _ => &[],
    }
}

/// Parses and checks a YAML rule batch; every rule comes back with
/// `is_default = true`, in file order.
pub fn parse_rule_batch(yaml: &str) -> Result<Vec<NewRule>, RuleError> {
    let doc: Value = serde_yaml::from_str(yaml).map_err(|e| RuleError::Yaml(e.to_string()))?;
    check_keys(&doc, BATCH_KEYS)?;
    let Value::Object(doc) = doc else {
        return Err(RuleError::Yaml(
            "expected a mapping with `version` and `rules`".into(),
        ));
    };
    match doc.get("version") {
        None | Some(Value::Null) => {}
        Some(Value::String(v)) if v.is_empty() || v == CURRENT_VERSION => {}
        Some(Value::String(v)) => return Err(RuleError::UnsupportedVersion(v.clone())),
        Some(other) => return Err(RuleError::UnsupportedVersion(other.to_string())),
    }
    let items = match doc.get("rules") {
        None | Some(Value::Null) => &Vec::new(),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(RuleError::Yaml("`rules` must be a list".into())),
    };

    let mut rules = Vec::with_capacity(items.len());
    // (type, code) → name of the rule that defines it.
    let mut defined: HashMap<(TaskType, String), String> = HashMap::new();
    for (index, item) in items.iter().enumerate() {
        let name = item.get("name").and_then(Value::as_str).unwrap_or_default();
        let in_rule = |source: RuleError| RuleError::InRule {
            index,
            name: name.to_string(),
            source: Box::new(source),
        };
        let rule = parse_rule(item).map_err(in_rule)?;
        let key = (rule.operation_type, rule.operation_code.clone());
        if defined.insert(key, rule.name.clone()).is_some() {
            return Err(in_rule(RuleError::DuplicateRule {
                name: rule.name,
                operation_type: rule.operation_type,
                code: rule.operation_code,
            }));
        }
        rules.push(rule);
    }

    let types: Vec<TaskType> = rules.iter().map(|r| r.operation_type).collect();
    for operation_type in TaskType::ALL.iter().filter(|t| types.contains(t)) {
        for code in required_operations(*operation_type) {
            if !defined.contains_key(&(*operation_type, (*code).to_string())) {
                return Err(RuleError::MissingRequiredOperation {
                    operation_type: *operation_type,
                    code: (*code).to_string(),
                });
            }
        }
    }
    Ok(rules)
}

/// One rule of the batch: record fields first (as the reference checks
/// them), then the definition.
fn parse_rule(item: &Value) -> Result<NewRule, RuleError> {
    let Value::Object(obj) = item else {
        return Err(RuleError::Yaml("a rule must be a mapping".into()));
    };
    check_keys(item, BATCH_RULE_KEYS)?;
    check_steps_keys(obj.get("steps"))?;
    let text = |key: &str| -> Result<String, RuleError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(RuleError::Yaml(format!(
                "`{key}` must be a string, got {other}"
            ))),
        }
    };
    let name = text("name")?;
    let operation_type = parse_operation_type(&text("operation_type")?)?;
    let operation_code = text("operation")?;
    validate_rule_record(&name, operation_type, &operation_code)?;
    let definition = RuleDefinition {
        version: CURRENT_VERSION.to_string(),
        steps: parse_steps(obj.get("steps"))?,
    };
    definition.validate()?;
    Ok(NewRule {
        name,
        description: text("description")?,
        operation_type,
        operation_code,
        definition,
        is_default: true,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::ComponentType;
    use crate::rule::{Action, PowerState};

    const POWER_ON: &str = r#"
  - name: "Power on"
    description: "shelves first"
    operation_type: power_control
    operation: power_on
    steps:
      - component_type: powershelf
        stage: 1
        max_parallel: 1
        timeout: 15m
        retry:
          max_attempts: 3
          initial_interval: 5s
          backoff_coefficient: 2.0
        main_operation:
          name: PowerControl
        post_operation:
          - name: VerifyPowerStatus
            timeout: 30s
            poll_interval: 5s
            parameters:
              expected_status: on
      - component_type: Compute
        stage: 2
        main_operation:
          name: PowerControl
        post_operation:
          - name: Sleep
            parameters:
              duration: 10s
"#;

    const POWER_OFF: &str = r#"
  - name: "Power off"
    operation_type: power_control
    operation: power_off
    steps:
      - component_type: compute
        stage: 1
        main_operation:
          name: PowerControl
"#;

    const UPGRADE: &str = r#"
  - name: "Upgrade"
    operation_type: firmware_control
    operation: upgrade
    steps:
      - component_type: compute
        stage: 1
        timeout: 45m
        main_operation:
          name: FirmwareControl
          parameters:
            poll_interval: 1m
            poll_timeout: 40m
"#;

    fn batch(rules: &[&str]) -> String {
        format!("version: v1\nrules:{}", rules.concat())
    }

    fn err(rules: &[&str]) -> String {
        parse_rule_batch(&batch(rules)).unwrap_err().to_string()
    }

    #[test]
    fn loads_rules_as_defaults_in_file_order() {
        let rules = parse_rule_batch(&batch(&[POWER_ON, POWER_OFF, UPGRADE])).unwrap();
        let keys: Vec<_> = rules
            .iter()
            .map(|r| {
                (
                    r.name.as_str(),
                    r.operation_type,
                    r.operation_code.as_str(),
                    r.is_default,
                )
            })
            .collect();
        assert_eq!(
            keys,
            [
                ("Power on", TaskType::PowerControl, "power_on", true),
                ("Power off", TaskType::PowerControl, "power_off", true),
                ("Upgrade", TaskType::FirmwareControl, "upgrade", true),
            ]
        );
        let on = &rules[0];
        assert_eq!(on.description, "shelves first");
        assert_eq!(on.definition.version, "v1");
        let shelf = &on.definition.steps[0];
        assert_eq!(shelf.component_type, ComponentType::PowerShelf);
        assert_eq!(shelf.max_parallel, 1);
        assert_eq!(shelf.timeout, Some(Duration::from_secs(900)));
        assert_eq!(
            shelf.retry.as_ref().unwrap().initial_interval,
            Duration::from_secs(5)
        );
        // YAML 1.2: a bare `on` is the string "on".
        assert_eq!(
            shelf.post_operation[0].action().unwrap(),
            Action::VerifyPowerStatus {
                expected: PowerState::On,
                timeout: Duration::from_secs(30),
                poll_interval: Duration::from_secs(5)
            }
        );
        assert_eq!(
            on.definition.steps[1].post_operation[0].action().unwrap(),
            Action::Sleep {
                duration: Duration::from_secs(10)
            }
        );
        assert_eq!(
            rules[2].definition.steps[0]
                .main_operation
                .action()
                .unwrap(),
            Action::FirmwareControl {
                operation: None,
                poll_interval: Duration::from_secs(60),
                poll_timeout: Duration::from_secs(2400)
            }
        );
        for r in &rules {
            r.validate().unwrap();
        }
    }

    #[test]
    fn empty_batch_is_empty() {
        assert!(
            parse_rule_batch("version: v1\nrules: []\n")
                .unwrap()
                .is_empty()
        );
        assert!(parse_rule_batch("version: v1\n").unwrap().is_empty());
    }

    #[test]
    fn duplicate_type_and_code_is_refused() {
        let again = POWER_OFF.replace("Power off", "Power off again");
        assert_eq!(
            err(&[POWER_ON, POWER_OFF, &again]),
            "rules[2] (Power off again): duplicate rule Power off again for operation type power_control and operation power_off"
        );
    }

    #[test]
    fn coverage_is_required_per_type_present() {
        assert_eq!(
            err(&[POWER_ON]),
            "required operation 'power_off' missing for operation type power_control"
        );
        assert_eq!(
            err(&[POWER_OFF]),
            "required operation 'power_on' missing for operation type power_control"
        );
        let downgrade = UPGRADE.replace("operation: upgrade", "operation: downgrade");
        assert_eq!(
            err(&[POWER_ON, POWER_OFF, &downgrade]),
            "required operation 'upgrade' missing for operation type firmware_control"
        );
        // A file of firmware rules only needs no power rules.
        assert_eq!(parse_rule_batch(&batch(&[UPGRADE])).unwrap().len(), 1);
        // Bring-up and decommission have no required operations.
        let decommission = r#"
  - name: "Decommission"
    operation_type: decommission
    operation: decommission
    steps:
      - component_type: compute
        stage: 1
        main_operation:
          name: DecommissionControl
"#;
        assert_eq!(parse_rule_batch(&batch(&[decommission])).unwrap().len(), 1);
    }

    #[test]
    fn record_errors_come_before_definition_errors() {
        // The steps lack main_operation, but the bad code is reported first.
        let bad = r#"
  - name: "Bad"
    operation_type: power_control
    operation: invalid_operation_xyz
    steps:
      - component_type: compute
        stage: 1
"#;
        assert_eq!(
            err(&[bad]),
            "rules[0] (Bad): invalid operation code 'invalid_operation_xyz' for operation type 'power_control'"
        );
        assert_eq!(
            err(&[&POWER_ON.replace("Power on", "")]),
            "rules[0]: name is required"
        );
        assert_eq!(
            err(&[&POWER_OFF.replace("power_control", "inject_expectation")]),
            "rules[0] (Power off): invalid operation type: inject_expectation"
        );
    }

    #[test]
    fn definition_errors_name_the_rule_and_the_field() {
        assert_eq!(
            err(&[POWER_ON, &POWER_OFF.replace("stage: 1", "stage: 0")]),
            "rules[1] (Power off): steps[0]: stage must be >= 1"
        );
        assert_eq!(
            err(&[
                &POWER_ON.replace("initial_interval: 5s", "initial_interval: 5x"),
                POWER_OFF
            ]),
            "rules[0] (Power on): steps[0].retry: invalid initial_interval ('5x'): invalid duration \"5x\": unknown unit \"x\""
        );
        assert_eq!(
            err(&[&POWER_ON.replace("name: Sleep", "name: Nap"), POWER_OFF]),
            "rules[0] (Power on): steps[1].post_operation[0]: unknown action: Nap"
        );
        assert_eq!(
            err(&[
                POWER_ON,
                &POWER_OFF.replace("name: PowerControl", "name: BringUpControl")
            ]),
            "rules[1] (Power off): steps[0].main_operation: action BringUpControl is reserved for built-in rules"
        );
    }

    #[test]
    fn document_errors() {
        assert!(
            parse_rule_batch("rules: [")
                .unwrap_err()
                .to_string()
                .starts_with("failed to parse YAML: ")
        );
        assert_eq!(
            parse_rule_batch("- a\n- b\n").unwrap_err().to_string(),
            "failed to parse YAML: expected a mapping with `version` and `rules`"
        );
        assert_eq!(
            parse_rule_batch("version: v2\nrules: []\n")
                .unwrap_err()
                .to_string(),
            "unsupported rule definition version: v2 (current version: v1)"
        );
        assert_eq!(
            parse_rule_batch("rules: {}\n").unwrap_err().to_string(),
            "failed to parse YAML: `rules` must be a list"
        );
    }
}
