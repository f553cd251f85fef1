//! Parsing and validation of rule definitions and rule records (spec
//! flow-core §4.1–4.2).
//!
//! Parsing walks the JSON value first so that a bad duration or a missing
//! `main_operation` is reported with the field it is in
//! (`steps[1].retry: invalid initial_interval ("5x"): …`) rather than as a
//! serde line/column; only then is each step deserialised into the typed
//! model. Validation then applies the reference's rules to the typed model,
//! in the reference's order, so the first error reported is the one the
//! reference would report.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::action::Scope;
use super::{
    ActionConfig, CURRENT_VERSION, OperationRule, RetryPolicy, RuleDefinition, RuleError,
    SequenceStep,
};
use crate::ComponentType;
use crate::duration::parse_go_duration;
use crate::task::TaskType;

/// Longest rule name accepted (characters).
pub const MAX_RULE_NAME_LEN: usize = 128;

/// Operation types a rule can be written for. `inject_expectation` tasks are
/// not rule-driven (spec §5.6), so no rule may target them.
pub const RULE_OPERATION_TYPES: [TaskType; 4] = [
    TaskType::PowerControl,
    TaskType::FirmwareControl,
    TaskType::BringUp,
    TaskType::Decommission,
];

/// Parses a rule definition written by a user (JSON) and validates it as a
/// user rule. An empty `version` becomes `v1`; any other version than `v1`
/// is refused, and so is a key the model does not have (checked first: a
/// misspelt `main_operation` is reported as the typo it is).
pub fn parse_rule_definition(json: &str) -> Result<RuleDefinition, RuleError> {
    let value: Value = serde_json::from_str(json).map_err(|e| RuleError::Json(e.to_string()))?;
    super::keys::check_definition_keys(&value)?;
    let definition = parse_definition_value(&value)?;
    definition.validate()?;
    Ok(definition)
}

impl RuleDefinition {
    /// Parses a definition without validating its rules (for definitions
    /// already stored, which may be built-ins using executor-only actions).
    /// The version is still checked, and structural errors name their field.
    pub fn from_json(json: &str) -> Result<RuleDefinition, RuleError> {
        let value: Value =
            serde_json::from_str(json).map_err(|e| RuleError::Json(e.to_string()))?;
        parse_definition_value(&value)
    }

    /// The JSON form, with the version filled in.
    pub fn to_json(&self) -> String {
        let mut out = self.clone();
        if out.version.is_empty() {
            out.version = CURRENT_VERSION.to_string();
        }
        serde_json::to_string(&out).expect("rule definitions always serialise")
    }

    /// Validates a user rule: every rule of spec §4.2 and only the actions
    /// users may write (§4.3).
    pub fn validate(&self) -> Result<(), RuleError> {
        self.validate_in(Scope::User)
    }

    /// Validates a built-in rule: as [`Self::validate`], but executor-only
    /// actions (BringUpControl, WaitBringUp, InjectExpectation,
    /// VerifyFirmwareConsistency) are allowed.
    pub fn validate_builtin(&self) -> Result<(), RuleError> {
        self.validate_in(Scope::BuiltIn)
    }

    fn validate_in(&self, scope: Scope) -> Result<(), RuleError> {
        check_version(&self.version)?;
        let mut seen: HashSet<(i32, ComponentType)> = HashSet::new();
        for (i, step) in self.steps.iter().enumerate() {
            let here = |e: RuleError| e.at(&format!("steps[{i}]"));
            step.validate_in(scope).map_err(here)?;
            if !seen.insert((step.stage, step.component_type)) {
                return Err(here(RuleError::DuplicateComponentType {
                    component_type: step.component_type,
                    stage: step.stage,
                }));
            }
        }
        Ok(())
    }
}

impl SequenceStep {
    /// Validates one step of a user rule (the step's own rules; duplicate
    /// types within a stage are a definition-level check).
    pub fn validate(&self) -> Result<(), RuleError> {
        self.validate_in(Scope::User)
    }

    fn validate_in(&self, scope: Scope) -> Result<(), RuleError> {
        if self.component_type == ComponentType::Unknown {
            return Err(RuleError::UnknownComponentType(
                self.component_type.name().to_string(),
            ));
        }
        if self.stage < 1 {
            return Err(RuleError::StageTooLow);
        }
        if self.max_parallel < 0 {
            return Err(RuleError::NegativeMaxParallel);
        }
        // Durations are unsigned here: negative ones were refused when parsed.
        if let Some(retry) = &self.retry {
            retry.validate().map_err(|e| e.at("retry"))?;
        }
        for (i, action) in self.pre_operation.iter().enumerate() {
            action
                .validate_in(scope)
                .map_err(|e| e.at(&format!("pre_operation[{i}]")))?;
        }
        if self.main_operation.name.is_empty() {
            return Err(RuleError::MainOperationRequired);
        }
        self.main_operation
            .validate_in(scope)
            .map_err(|e| e.at("main_operation"))?;
        for (i, action) in self.post_operation.iter().enumerate() {
            action
                .validate_in(scope)
                .map_err(|e| e.at(&format!("post_operation[{i}]")))?;
        }
        Ok(())
    }
}

impl RetryPolicy {
    pub fn validate(&self) -> Result<(), RuleError> {
        if self.max_attempts < 1 {
            return Err(RuleError::MaxAttemptsTooLow);
        }
        if self.initial_interval.is_zero() {
            return Err(RuleError::InitialIntervalRequired);
        }
        if self.backoff_coefficient.is_nan() || self.backoff_coefficient < 1.0 {
            return Err(RuleError::BackoffTooLow);
        }
        Ok(())
    }
}

/// The record rules of spec §4.1: a name (≤ 128 characters), a rule-driven
/// operation type and an operation code valid for it.
pub fn validate_rule_record(
    name: &str,
    operation_type: TaskType,
    code: &str,
) -> Result<(), RuleError> {
    if name.trim().is_empty() {
        return Err(RuleError::NameRequired);
    }
    if name.chars().count() > MAX_RULE_NAME_LEN {
        return Err(RuleError::NameTooLong);
    }
    if !RULE_OPERATION_TYPES.contains(&operation_type) {
        return Err(RuleError::InvalidOperationType(operation_type.to_string()));
    }
    if !operation_type.valid_codes().contains(&code) {
        return Err(RuleError::InvalidOperationCode {
            operation_type: operation_type.to_string(),
            code: code.to_string(),
        });
    }
    Ok(())
}

/// Parses a rule operation type (`power_control`, …) as written in a rule
/// record or a YAML batch.
pub fn parse_operation_type(text: &str) -> Result<TaskType, RuleError> {
    TaskType::parse(text)
        .filter(|t| RULE_OPERATION_TYPES.contains(t))
        .ok_or_else(|| RuleError::InvalidOperationType(text.to_string()))
}

impl OperationRule {
    /// Record rules, then the definition's (as a user rule).
    pub fn validate(&self) -> Result<(), RuleError> {
        validate_rule_record(&self.name, self.operation_type, &self.operation_code)?;
        self.definition.validate()
    }
}

fn check_version(version: &str) -> Result<(), RuleError> {
    if version.is_empty() || version == CURRENT_VERSION {
        Ok(())
    } else {
        Err(RuleError::UnsupportedVersion(version.to_string()))
    }
}

/// A definition from an already-decoded JSON (or YAML) value.
pub(crate) fn parse_definition_value(value: &Value) -> Result<RuleDefinition, RuleError> {
    let Value::Object(obj) = value else {
        return Err(RuleError::Json("expected a JSON object".into()));
    };
    match obj.get("version") {
        None | Some(Value::Null) => {}
        Some(Value::String(v)) => check_version(v)?,
        Some(other) => return Err(RuleError::UnsupportedVersion(other.to_string())),
    }
    let steps = parse_steps(obj.get("steps"))?;
    Ok(RuleDefinition {
        version: CURRENT_VERSION.to_string(),
        steps,
    })
}

/// A `steps` array (absent or null = no steps).
pub(crate) fn parse_steps(value: Option<&Value>) -> Result<Vec<SequenceStep>, RuleError> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(RuleError::Malformed("steps must be an array".into())),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| parse_step(item).map_err(|e| e.at(&format!("steps[{i}]"))))
        .collect()
}

/// One step: the fields serde cannot name in its errors are checked first.
fn parse_step(value: &Value) -> Result<SequenceStep, RuleError> {
    let Value::Object(obj) = value else {
        return Err(RuleError::Malformed("step must be an object".into()));
    };
    match obj.get("component_type") {
        Some(Value::String(name)) if ComponentType::parse(name).is_some() => {}
        Some(Value::String(name)) => return Err(RuleError::UnknownComponentType(name.clone())),
        None | Some(Value::Null) => {
            return Err(RuleError::UnknownComponentType("(missing)".into()));
        }
        Some(other) => return Err(RuleError::UnknownComponentType(other.to_string())),
    }
    check_duration(obj, "timeout")?;
    check_duration(obj, "delay_after")?;
    match obj.get("retry") {
        None | Some(Value::Null) => {}
        Some(Value::Object(retry)) => {
            if matches!(retry.get("initial_interval"), None | Some(Value::Null)) {
                return Err(RuleError::InitialIntervalRequired.at("retry"));
            }
            check_duration(retry, "initial_interval").map_err(|e| e.at("retry"))?;
            check_duration(retry, "max_interval").map_err(|e| e.at("retry"))?;
        }
        Some(_) => return Err(RuleError::Malformed("retry must be an object".into())),
    }
    for list in ["pre_operation", "post_operation"] {
        match obj.get(list) {
            None | Some(Value::Null) => {}
            Some(Value::Array(actions)) => {
                for (i, action) in actions.iter().enumerate() {
                    check_action(action).map_err(|e| e.at(&format!("{list}[{i}]")))?;
                }
            }
            Some(_) => return Err(RuleError::Malformed(format!("{list} must be an array"))),
        }
    }
    match obj.get("main_operation") {
        None | Some(Value::Null) => return Err(RuleError::MainOperationRequired),
        Some(Value::Object(main)) if matches!(main.get("name"), None | Some(Value::Null)) => {
            return Err(RuleError::MainOperationRequired);
        }
        Some(action) => check_action(action).map_err(|e| e.at("main_operation"))?,
    }
    serde_json::from_value(value.clone()).map_err(|e| RuleError::Malformed(e.to_string()))
}

fn check_action(value: &Value) -> Result<(), RuleError> {
    let Value::Object(obj) = value else {
        return Err(RuleError::Malformed("action must be an object".into()));
    };
    check_duration(obj, "timeout")?;
    check_duration(obj, "poll_interval")?;
    // Typed deserialisation here gives serde errors (e.g. a missing `name`)
    // this action's path.
    serde_json::from_value::<ActionConfig>(value.clone())
        .map(drop)
        .map_err(|e| RuleError::Malformed(e.to_string()))
}

/// A duration field written as a Go duration string or a number of seconds
/// (the crate's `serde_go` encoding). Absent, null or empty = not set.
fn check_duration(obj: &Map<String, Value>, field: &str) -> Result<(), RuleError> {
    let invalid = |value: String, reason: String| RuleError::InvalidDuration {
        field: field.to_string(),
        value,
        reason,
    };
    match obj.get(field) {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(s)) if s.trim().starts_with('-') => {
            Err(RuleError::NegativeDuration(field.to_string()))
        }
        Some(Value::String(s)) => parse_go_duration(s)
            .map(drop)
            .map_err(|reason| invalid(format!("'{s}'"), reason)),
        Some(Value::Number(n)) if n.as_f64().is_some_and(|f| f < 0.0) => {
            Err(RuleError::NegativeDuration(field.to_string()))
        }
        Some(Value::Number(_)) => Ok(()),
        Some(other) => Err(invalid(
            other.to_string(),
            "expected a duration string such as \"15m\"".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn step(extra: Value) -> Value {
        let mut base = json!({
            "component_type": "compute",
            "stage": 1,
            "main_operation": {"name": "PowerControl"}
        });
        base.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        base
    }

    fn parse(steps: Vec<Value>) -> Result<RuleDefinition, RuleError> {
        parse_rule_definition(&json!({ "version": "v1", "steps": steps }).to_string())
    }

    fn parse_err(steps: Vec<Value>) -> String {
        parse(steps).unwrap_err().to_string()
    }

    #[test]
    fn version_empty_is_v1_others_rejected() {
        let d = parse_rule_definition(r#"{"steps": []}"#).unwrap();
        assert_eq!(d.version, "v1");
        let d = parse_rule_definition(r#"{"version": "", "steps": []}"#).unwrap();
        assert_eq!(d.version, "v1");
        assert_eq!(
            parse_rule_definition(r#"{"version": "v2", "steps": []}"#)
                .unwrap_err()
                .to_string(),
            "unsupported rule definition version: v2 (current version: v1)"
        );
        let typed = RuleDefinition {
            version: "v9".into(),
            steps: vec![],
        };
        assert_eq!(
            typed.validate().unwrap_err(),
            RuleError::UnsupportedVersion("v9".into())
        );
    }

    #[test]
    fn empty_steps_are_valid() {
        assert!(parse_rule_definition("{}").unwrap().steps.is_empty());
    }

    #[test]
    fn not_json_or_wrong_shape() {
        assert!(
            parse_rule_definition("{")
                .unwrap_err()
                .to_string()
                .starts_with("invalid rule definition JSON: ")
        );
        assert_eq!(
            parse_rule_definition("[]").unwrap_err().to_string(),
            "invalid rule definition JSON: expected a JSON object"
        );
        assert_eq!(
            parse_rule_definition(r#"{"steps": {}}"#)
                .unwrap_err()
                .to_string(),
            "steps must be an array"
        );
    }

    #[test]
    fn parses_a_full_step() {
        let d = parse(vec![step(json!({
            "component_type": "NVSwitch",
            "stage": 2,
            "max_parallel": 4,
            "timeout": "15m",
            "retry": {"max_attempts": 3, "initial_interval": "5s", "backoff_coefficient": 2.0,
                      "max_interval": "1m"},
            "pre_operation": [{"name": "Sleep", "parameters": {"duration": "5s"}}],
            "post_operation": [{"name": "VerifyPowerStatus", "timeout": "5m",
                                "poll_interval": "10s", "parameters": {"expected_status": "on"}}],
            "delay_after": "1s"
        }))])
        .unwrap();
        let s = &d.steps[0];
        assert_eq!(s.component_type, ComponentType::NvSwitch);
        assert_eq!(s.stage, 2);
        assert_eq!(s.max_parallel, 4);
        assert_eq!(s.timeout, Some(Duration::from_secs(900)));
        let retry = s.retry.as_ref().unwrap();
        assert_eq!(retry.max_attempts, 3);
        assert_eq!(retry.initial_interval, Duration::from_secs(5));
        assert_eq!(retry.max_interval, Some(Duration::from_secs(60)));
        assert_eq!(s.pre_operation.len(), 1);
        assert_eq!(s.post_operation[0].timeout, Some(Duration::from_secs(300)));
        assert_eq!(s.delay_after, Some(Duration::from_secs(1)));
    }

    #[test]
    fn step_errors_name_index_and_field() {
        assert_eq!(
            parse_err(vec![
                step(json!({})),
                step(json!({"component_type": "nvswitch"})),
                step(json!({"stage": 0}))
            ]),
            "steps[2]: stage must be >= 1"
        );
        assert_eq!(
            parse_err(vec![step(json!({"max_parallel": -1}))]),
            "steps[0]: max_parallel must be >= 0"
        );
        assert_eq!(
            parse_err(vec![step(json!({"component_type": "gpu"}))]),
            "steps[0]: component_type gpu is unknown or invalid"
        );
        assert_eq!(
            parse_err(vec![step(json!({"component_type": null}))]),
            "steps[0]: component_type (missing) is unknown or invalid"
        );
        assert_eq!(
            parse_err(vec![step(json!({"timeout": "-5m"}))]),
            "steps[0]: timeout must be non-negative"
        );
        assert_eq!(
            parse_err(vec![step(json!({"delay_after": -1}))]),
            "steps[0]: delay_after must be non-negative"
        );
        assert_eq!(
            parse_err(vec![step(json!({"timeout": "15 minutes"}))]),
            "steps[0]: invalid timeout ('15 minutes'): invalid duration \"15 minutes\": unknown unit \" minutes\""
        );
        assert_eq!(
            parse_err(vec![step(json!({"timeout": true}))]),
            "steps[0]: invalid timeout (true): expected a duration string such as \"15m\""
        );
        assert_eq!(
            parse_err(vec![step(json!({"stage": "one"}))]),
            "steps[0]: invalid type: string \"one\", expected i32"
        );
    }

    #[test]
    fn component_type_is_case_insensitive() {
        for name in [
            "compute",
            "COMPUTE",
            "Compute",
            "powershelf",
            "PowerShelf",
            "torswitch",
            "ums",
            "cdu",
        ] {
            assert!(
                parse(vec![step(json!({ "component_type": name }))]).is_ok(),
                "{name}"
            );
        }
    }

    #[test]
    fn retry_rules() {
        let with_retry = |retry: Value| parse_err(vec![step(json!({ "retry": retry }))]);
        assert_eq!(
            with_retry(json!({"max_attempts": 0, "initial_interval": "1s"})),
            "steps[0].retry: max_attempts must be >= 1"
        );
        assert_eq!(
            with_retry(json!({"max_attempts": 3})),
            "steps[0].retry: initial_interval is required and must be positive"
        );
        assert_eq!(
            with_retry(json!({"max_attempts": 3, "initial_interval": "0s"})),
            "steps[0].retry: initial_interval is required and must be positive"
        );
        assert_eq!(
            with_retry(
                json!({"max_attempts": 3, "initial_interval": "1s", "backoff_coefficient": 0.5})
            ),
            "steps[0].retry: backoff_coefficient must be >= 1.0"
        );
        assert_eq!(
            with_retry(json!({"max_attempts": 3, "initial_interval": "1s", "max_interval": "-1s"})),
            "steps[0].retry: max_interval must be non-negative"
        );
        assert_eq!(
            with_retry(json!({"max_attempts": 3, "initial_interval": "5x"})),
            "steps[0].retry: invalid initial_interval ('5x'): invalid duration \"5x\": unknown unit \"x\""
        );
        // backoff_coefficient defaults to 1.0 when omitted.
        assert!(
            parse(vec![step(
                json!({"retry": {"max_attempts": 1, "initial_interval": "1s"}})
            )])
            .is_ok()
        );
    }

    #[test]
    fn main_operation_is_required() {
        let mut no_main = step(json!({}));
        no_main.as_object_mut().unwrap().remove("main_operation");
        assert_eq!(
            parse_err(vec![no_main]),
            "steps[0]: main_operation is required"
        );
        assert_eq!(
            parse_err(vec![step(json!({"main_operation": {"name": ""}}))]),
            "steps[0]: main_operation is required"
        );
        assert_eq!(
            parse_err(vec![step(json!({"main_operation": {"timeout": "1m"}}))]),
            "steps[0]: main_operation is required"
        );
    }

    #[test]
    fn action_errors_carry_their_place() {
        assert_eq!(
            parse_err(vec![step(json!({"main_operation": {"name": "Reboot"}}))]),
            "steps[0].main_operation: unknown action: Reboot"
        );
        assert_eq!(
            parse_err(vec![step(json!({"pre_operation": [
                {"name": "Sleep", "parameters": {"duration": "1s"}},
                {"name": "Sleep"}
            ]}))]),
            "steps[0].pre_operation[1]: action Sleep missing required parameter: duration"
        );
        assert_eq!(
            parse_err(vec![step(json!({"post_operation": [
                {"name": "VerifyPowerStatus", "parameters": {"expected_status": "on"}}
            ]}))]),
            "steps[0].post_operation[0]: action VerifyPowerStatus requires timeout"
        );
        assert_eq!(
            parse_err(vec![step(json!({"post_operation": [
                {"name": "GetPowerStatus", "timeout": "soon"}
            ]}))]),
            "steps[0].post_operation[0]: invalid timeout ('soon'): invalid duration \"soon\""
        );
        assert_eq!(
            parse_err(vec![step(json!({"post_operation": [{"timeout": "1m"}]}))]),
            "steps[0].post_operation[0]: missing field `name`"
        );
        assert_eq!(
            parse_err(vec![step(
                json!({"main_operation": {"name": "InjectExpectation"}})
            )]),
            "steps[0].main_operation: action InjectExpectation is reserved for built-in rules"
        );
    }

    #[test]
    fn duplicate_component_type_in_a_stage() {
        let a = step(json!({}));
        let b = step(json!({"component_type": "COMPUTE"}));
        assert_eq!(
            parse_err(vec![a.clone(), step(json!({"stage": 2})), b]),
            "steps[2]: duplicate component type Compute in stage 1"
        );
        // The same type in another stage is fine.
        assert!(parse(vec![a, step(json!({"stage": 2}))]).is_ok());
    }

    #[test]
    fn builtin_scope_allows_executor_only_actions() {
        let d = RuleDefinition::from_json(
            &json!({"steps": [step(json!({"main_operation": {"name": "BringUpControl"}}))]})
                .to_string(),
        )
        .unwrap();
        assert!(d.validate().is_err());
        assert!(d.validate_builtin().is_ok());
    }

    #[test]
    fn rule_record_rules() {
        let ok = |name: &str, t: TaskType, code: &str| validate_rule_record(name, t, code);
        assert!(ok("r", TaskType::PowerControl, "power_on").is_ok());
        assert_eq!(
            ok("", TaskType::PowerControl, "power_on")
                .unwrap_err()
                .to_string(),
            "name is required"
        );
        assert_eq!(
            ok("  ", TaskType::PowerControl, "power_on").unwrap_err(),
            RuleError::NameRequired
        );
        assert!(ok(&"é".repeat(128), TaskType::PowerControl, "power_on").is_ok());
        assert_eq!(
            ok(&"n".repeat(129), TaskType::PowerControl, "power_on")
                .unwrap_err()
                .to_string(),
            "name must be at most 128 characters"
        );
        assert_eq!(
            ok("r", TaskType::PowerControl, "upgrade")
                .unwrap_err()
                .to_string(),
            "invalid operation code 'upgrade' for operation type 'power_control'"
        );
        assert_eq!(
            ok("r", TaskType::InjectExpectation, "inject_expectation")
                .unwrap_err()
                .to_string(),
            "invalid operation type: inject_expectation"
        );
        for t in RULE_OPERATION_TYPES {
            for code in t.valid_codes() {
                assert!(ok("r", t, code).is_ok(), "{t}/{code}");
            }
        }
        assert_eq!(parse_operation_type("bring_up").unwrap(), TaskType::BringUp);
        assert_eq!(
            parse_operation_type("power").unwrap_err().to_string(),
            "invalid operation type: power"
        );
    }

    #[test]
    fn operation_rule_validates_record_then_definition() {
        let now = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
        let mut rule = OperationRule {
            id: uuid::Uuid::nil(),
            name: "r".into(),
            description: String::new(),
            operation_type: TaskType::PowerControl,
            operation_code: "power_on".into(),
            definition: RuleDefinition::from_json(
                &json!({"steps": [step(json!({"stage": 0}))]}).to_string(),
            )
            .unwrap(),
            is_default: false,
            created_at: now,
            updated_at: now,
        };
        assert_eq!(
            rule.validate().unwrap_err().to_string(),
            "steps[0]: stage must be >= 1"
        );
        rule.name.clear();
        assert_eq!(rule.validate().unwrap_err(), RuleError::NameRequired);
    }

    #[test]
    fn typed_definition_round_trips_through_json() {
        let d = parse(vec![step(json!({"timeout": "1h30m", "retry":
            {"max_attempts": 2, "initial_interval": "500ms"}}))])
        .unwrap();
        let again = parse_rule_definition(&d.to_json()).unwrap();
        assert_eq!(again, d);
    }

    #[test]
    fn unknown_type_in_typed_model_is_refused() {
        let mut d = parse(vec![step(json!({}))]).unwrap();
        d.steps[0].component_type = ComponentType::Unknown;
        assert_eq!(
            d.validate().unwrap_err().to_string(),
            "steps[0]: component_type Unknown is unknown or invalid"
        );
    }
}
