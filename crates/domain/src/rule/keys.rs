//! The keys a rule document written by a user may have, and the check that
//! refuses any other (issue 31): the reference ignores unknown keys, so a
//! typo such as `max_paralel` silently became "all components at once".
//!
//! Only documents from users are checked (`parse_rule_definition`, the YAML
//! batch): definitions already stored are read leniently, so a rule stored
//! before this check still runs.

use serde_json::Value;

use super::RuleError;
use super::action::{ActionKind, params};

/// Keys of a definition document.
pub const DEFINITION_KEYS: &[&str] = &["version", "steps"];
/// Keys of one step.
pub const STEP_KEYS: &[&str] = &[
    "component_type",
    "stage",
    "max_parallel",
    "timeout",
    "retry",
    "pre_operation",
    "main_operation",
    "post_operation",
    "delay_after",
];
/// Keys of a step's `retry`.
pub const RETRY_KEYS: &[&str] = &[
    "max_attempts",
    "initial_interval",
    "backoff_coefficient",
    "max_interval",
];
/// Keys of one action.
pub const ACTION_KEYS: &[&str] = &["name", "timeout", "poll_interval", "parameters"];
/// Keys of a YAML rule batch.
pub const BATCH_KEYS: &[&str] = &["version", "rules"];
/// Keys of one rule of a YAML batch.
pub const BATCH_RULE_KEYS: &[&str] = &[
    "name",
    "description",
    "operation_type",
    "operation",
    "steps",
];

impl ActionKind {
    /// The `parameters` keys this action reads (spec flow-core §4.3).
    pub fn parameter_keys(self) -> &'static [&'static str] {
        match self {
            ActionKind::Sleep => &[params::DURATION],
            ActionKind::PowerControl => &[params::OPERATION],
            ActionKind::VerifyPowerStatus => &[params::EXPECTED_STATUS],
            ActionKind::VerifyReachability => &[params::COMPONENT_TYPES, params::REQUIRE_ALL],
            ActionKind::FirmwareControl => &[
                params::OPERATION,
                params::POLL_INTERVAL,
                params::POLL_TIMEOUT,
            ],
            ActionKind::GetPowerStatus
            | ActionKind::DecommissionControl
            | ActionKind::WaitDecommissioned
            | ActionKind::BringUpControl
            | ActionKind::WaitBringUp
            | ActionKind::InjectExpectation
            | ActionKind::VerifyFirmwareConsistency => &[],
        }
    }
}

/// Refuses a key of `value` (when it is a mapping) that is not in `known`;
/// the error names the key and suggests the closest known one, or lists
/// the known ones. serde_json keeps keys sorted, so the key reported first
/// does not depend on the document's formatting.
pub fn check_keys(value: &Value, known: &[&str]) -> Result<(), RuleError> {
    check_keys_or(value, known, "no keys are allowed here")
}

/// [`check_keys`] with the hint given when `known` is empty.
fn check_keys_or(value: &Value, known: &[&str], nothing_known: &str) -> Result<(), RuleError> {
    let Some(map) = value.as_object() else {
        return Ok(());
    };
    let Some(key) = map.keys().find(|k| !known.contains(&k.as_str())) else {
        return Ok(());
    };
    let hint = match crate::suggest::closest(key, known.iter().copied()) {
        Some(meant) => format!("did you mean {meant:?}?"),
        None if known.is_empty() => nothing_known.to_string(),
        None => format!("known keys: {}", known.join(", ")),
    };
    Err(RuleError::UnknownKey {
        key: key.clone(),
        hint,
    })
}

/// Every key of a definition document `{version, steps}`.
pub fn check_definition_keys(value: &Value) -> Result<(), RuleError> {
    check_keys(value, DEFINITION_KEYS)?;
    check_steps_keys(value.get("steps"))
}

/// Every key of a `steps` list (anything but a list is left to the parser).
pub fn check_steps_keys(steps: Option<&Value>) -> Result<(), RuleError> {
    let Some(steps) = steps.and_then(Value::as_array) else {
        return Ok(());
    };
    for (i, step) in steps.iter().enumerate() {
        check_step_keys(step).map_err(|e| e.at(&format!("steps[{i}]")))?;
    }
    Ok(())
}

fn check_step_keys(step: &Value) -> Result<(), RuleError> {
    check_keys(step, STEP_KEYS)?;
    if let Some(retry) = step.get("retry") {
        check_keys(retry, RETRY_KEYS).map_err(|e| e.at("retry"))?;
    }
    for list in ["pre_operation", "post_operation"] {
        if let Some(actions) = step.get(list).and_then(Value::as_array) {
            for (i, action) in actions.iter().enumerate() {
                check_action_keys(action).map_err(|e| e.at(&format!("{list}[{i}]")))?;
            }
        }
    }
    if let Some(main) = step.get("main_operation") {
        check_action_keys(main).map_err(|e| e.at("main_operation"))?;
    }
    Ok(())
}

/// An action's own keys, and its parameters' when the action is known (an
/// unknown action is the parser's error, with its own message).
fn check_action_keys(action: &Value) -> Result<(), RuleError> {
    check_keys(action, ACTION_KEYS)?;
    let kind = action
        .get("name")
        .and_then(Value::as_str)
        .and_then(ActionKind::parse);
    if let (Some(kind), Some(parameters)) = (kind, action.get("parameters")) {
        check_keys_or(
            parameters,
            kind.parameter_keys(),
            &format!("{kind} takes no parameters"),
        )
        .map_err(|e| e.at("parameters"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn err(value: Value) -> String {
        check_definition_keys(&value).unwrap_err().to_string()
    }

    fn step(extra: Value) -> Value {
        let mut base = json!({
            "component_type": "compute",
            "stage": 1,
            "main_operation": {"name": "PowerControl"},
        });
        for (k, v) in extra.as_object().unwrap() {
            base[k] = v.clone();
        }
        base
    }

    #[test]
    fn a_typo_names_key_path_and_the_key_meant() {
        assert_eq!(
            err(json!({"steps": [step(json!({})), step(json!({"max_paralel": 2}))]})),
            "steps[1]: unknown key \"max_paralel\" (did you mean \"max_parallel\"?)"
        );
        assert_eq!(
            err(json!({"version": "v1", "step": []})),
            "unknown key \"step\" (did you mean \"steps\"?)"
        );
        assert_eq!(
            err(json!({"steps": [step(json!({"retry": {"max_attempt": 3}}))]})),
            "steps[0].retry: unknown key \"max_attempt\" (did you mean \"max_attempts\"?)"
        );
    }

    #[test]
    fn actions_and_their_parameters_are_checked() {
        assert_eq!(
            err(json!({"steps": [step(json!({"post_operation": [
                {"name": "Sleep", "parameters": {"duration": "1s"}},
                {"name": "VerifyPowerStatus", "timeout": "1m", "pollinterval": "5s"},
            ]}))]})),
            "steps[0].post_operation[1]: unknown key \"pollinterval\" (did you mean \"poll_interval\"?)"
        );
        assert_eq!(
            err(json!({"steps": [step(json!({"main_operation": {
                "name": "PowerControl", "parameters": {"operaton": "force_power_off"}
            }}))]})),
            "steps[0].main_operation.parameters: unknown key \"operaton\" (did you mean \"operation\"?)"
        );
    }

    #[test]
    fn no_close_key_lists_the_known_ones() {
        assert_eq!(
            err(json!({"owner": "me"})),
            "unknown key \"owner\" (known keys: version, steps)"
        );
        assert_eq!(
            err(json!({"steps": [step(json!({"main_operation": {
                "name": "GetPowerStatus", "timeout": "1m", "parameters": {"x": 1}
            }}))]})),
            "steps[0].main_operation.parameters: unknown key \"x\" (GetPowerStatus takes no parameters)"
        );
    }

    #[test]
    fn every_known_key_passes_and_odd_shapes_are_left_to_the_parser() {
        let full = json!({"version": "v1", "steps": [{
            "component_type": "compute", "stage": 1, "max_parallel": 2, "timeout": "5m",
            "retry": {"max_attempts": 2, "initial_interval": "1s",
                      "backoff_coefficient": 2.0, "max_interval": "1m"},
            "pre_operation": [{"name": "Sleep", "parameters": {"duration": "1s"}}],
            "main_operation": {"name": "FirmwareControl", "timeout": "1m", "poll_interval": "1s",
                "parameters": {"operation": "upgrade", "poll_interval": "1s", "poll_timeout": "5m"}},
            "post_operation": [{"name": "VerifyReachability", "timeout": "1m", "poll_interval": "1s",
                "parameters": {"component_types": ["compute"], "require_all": true}}],
            "delay_after": "1s",
        }]});
        check_definition_keys(&full).unwrap();
        check_definition_keys(&json!({"steps": "no"})).unwrap();
        check_definition_keys(&json!([1, 2])).unwrap();
        check_definition_keys(&json!({"steps": [1, {"main_operation": "x"}]})).unwrap();
        // An unknown action's parameters are not judged: the parser reports the action.
        check_definition_keys(&json!({"steps": [step(json!({"main_operation": {
            "name": "Teleport", "parameters": {"where": "mars"}
        }}))]}))
        .unwrap();
    }
}
