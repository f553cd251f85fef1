//! Actions of a rule step (spec flow-core §4.3): the typed view of an
//! [`ActionConfig`], which actions a user rule may use, the parameters each
//! one needs, and the component-manager capabilities each one calls on.
//!
//! [`ActionKind`] is the single table of per-action facts (name, who may use
//! it, capabilities, batching); [`ActionConfig::action`] checks an action's
//! parameters and returns the typed [`Action`] the executor runs.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use super::{ActionConfig, RuleError};
use crate::ComponentType;
use crate::duration::parse_go_duration;
use crate::task::TaskType;

/// A component-manager capability, by the PascalCase name managers declare
/// in their descriptors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    InjectExpectation,
    PowerControl,
    PowerStatus,
    FirmwareControl,
    FirmwareStatus,
    BringUpControl,
    BringUpStatus,
    FirmwareConsistencyCheck,
    DecommissionControl,
    DecommissionStatus,
}

impl Capability {
    pub const ALL: [Capability; 10] = [
        Capability::InjectExpectation,
        Capability::PowerControl,
        Capability::PowerStatus,
        Capability::FirmwareControl,
        Capability::FirmwareStatus,
        Capability::BringUpControl,
        Capability::BringUpStatus,
        Capability::FirmwareConsistencyCheck,
        Capability::DecommissionControl,
        Capability::DecommissionStatus,
    ];

    /// The descriptor name (`PowerControl`, `FirmwareConsistencyCheck`, …).
    pub fn name(self) -> &'static str {
        match self {
            Capability::InjectExpectation => "InjectExpectation",
            Capability::PowerControl => "PowerControl",
            Capability::PowerStatus => "PowerStatus",
            Capability::FirmwareControl => "FirmwareControl",
            Capability::FirmwareStatus => "FirmwareStatus",
            Capability::BringUpControl => "BringUpControl",
            Capability::BringUpStatus => "BringUpStatus",
            Capability::FirmwareConsistencyCheck => "FirmwareConsistencyCheck",
            Capability::DecommissionControl => "DecommissionControl",
            Capability::DecommissionStatus => "DecommissionStatus",
        }
    }

    /// Exact (case-sensitive) descriptor name.
    pub fn parse(name: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The power state a `VerifyPowerStatus` action waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PowerState {
    On,
    Off,
}

impl PowerState {
    /// The parameter value (`on` / `off`).
    pub fn as_str(self) -> &'static str {
        match self {
            PowerState::On => "on",
            PowerState::Off => "off",
        }
    }
}

impl fmt::Display for PowerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every action name the executor knows, with the facts the rest of the
/// system needs about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ActionKind {
    Sleep,
    PowerControl,
    VerifyPowerStatus,
    VerifyReachability,
    GetPowerStatus,
    FirmwareControl,
    DecommissionControl,
    WaitDecommissioned,
    BringUpControl,
    WaitBringUp,
    InjectExpectation,
    VerifyFirmwareConsistency,
}

/// Parameter keys of `ActionConfig.parameters`.
pub mod params {
    pub const DURATION: &str = "duration";
    pub const EXPECTED_STATUS: &str = "expected_status";
    pub const COMPONENT_TYPES: &str = "component_types";
    pub const REQUIRE_ALL: &str = "require_all";
    pub const OPERATION: &str = "operation";
    pub const POLL_INTERVAL: &str = "poll_interval";
    pub const POLL_TIMEOUT: &str = "poll_timeout";
}

/// FirmwareControl polls the update status this often unless told otherwise.
pub const DEFAULT_FIRMWARE_POLL_INTERVAL: Duration = Duration::from_secs(2 * 60);
/// FirmwareControl gives up polling after this long unless told otherwise.
pub const DEFAULT_FIRMWARE_POLL_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// WaitBringUp defaults (spec §4.3).
pub const DEFAULT_BRING_UP_TIMEOUT: Duration = Duration::from_secs(15 * 60);
pub const DEFAULT_BRING_UP_POLL_INTERVAL: Duration = Duration::from_secs(30);
/// DecommissionControl is a fire-once request with this budget.
pub const DECOMMISSION_CONTROL_TIMEOUT: Duration = Duration::from_secs(5 * 60);

impl ActionKind {
    pub const ALL: [ActionKind; 12] = [
        ActionKind::Sleep,
        ActionKind::PowerControl,
        ActionKind::VerifyPowerStatus,
        ActionKind::VerifyReachability,
        ActionKind::GetPowerStatus,
        ActionKind::FirmwareControl,
        ActionKind::DecommissionControl,
        ActionKind::WaitDecommissioned,
        ActionKind::BringUpControl,
        ActionKind::WaitBringUp,
        ActionKind::InjectExpectation,
        ActionKind::VerifyFirmwareConsistency,
    ];

    /// The name rules write (`PowerControl`, …).
    pub fn name(self) -> &'static str {
        match self {
            ActionKind::Sleep => "Sleep",
            ActionKind::PowerControl => "PowerControl",
            ActionKind::VerifyPowerStatus => "VerifyPowerStatus",
            ActionKind::VerifyReachability => "VerifyReachability",
            ActionKind::GetPowerStatus => "GetPowerStatus",
            ActionKind::FirmwareControl => "FirmwareControl",
            ActionKind::DecommissionControl => "DecommissionControl",
            ActionKind::WaitDecommissioned => "WaitDecommissioned",
            ActionKind::BringUpControl => "BringUpControl",
            ActionKind::WaitBringUp => "WaitBringUp",
            ActionKind::InjectExpectation => "InjectExpectation",
            ActionKind::VerifyFirmwareConsistency => "VerifyFirmwareConsistency",
        }
    }

    /// Exact (case-sensitive) name, as the reference looks actions up.
    pub fn parse(name: &str) -> Option<ActionKind> {
        ActionKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether a user rule may use this action. The others drive bring-up
    /// and ingestion internals and appear only in built-in rules.
    pub fn is_user_allowed(self) -> bool {
        !matches!(
            self,
            ActionKind::BringUpControl
                | ActionKind::WaitBringUp
                | ActionKind::InjectExpectation
                | ActionKind::VerifyFirmwareConsistency
        )
    }

    /// The manager capabilities the action calls on (spec §4.3).
    pub fn required_capabilities(self) -> &'static [Capability] {
        match self {
            ActionKind::Sleep => &[],
            ActionKind::PowerControl => &[Capability::PowerControl],
            ActionKind::VerifyPowerStatus
            | ActionKind::GetPowerStatus
            | ActionKind::VerifyReachability => &[Capability::PowerStatus],
            ActionKind::FirmwareControl => {
                &[Capability::FirmwareControl, Capability::FirmwareStatus]
            }
            ActionKind::BringUpControl => &[Capability::BringUpControl],
            ActionKind::WaitBringUp => &[Capability::BringUpStatus],
            ActionKind::InjectExpectation => &[Capability::InjectExpectation],
            ActionKind::VerifyFirmwareConsistency => &[Capability::FirmwareConsistencyCheck],
            ActionKind::DecommissionControl => &[Capability::DecommissionControl],
            ActionKind::WaitDecommissioned => &[Capability::DecommissionStatus],
        }
    }

    /// Component-scoped actions run in ⌈n / max_parallel⌉ sequential
    /// batches; the others (timers and step-wide checks) run once per step
    /// (spec §5.3).
    pub fn is_batched(self) -> bool {
        !matches!(
            self,
            ActionKind::Sleep
                | ActionKind::VerifyReachability
                | ActionKind::VerifyFirmwareConsistency
        )
    }

    /// Parameters that must be present (checked before anything else).
    fn required_params(self) -> &'static [&'static str] {
        match self {
            ActionKind::Sleep => &[params::DURATION],
            ActionKind::VerifyPowerStatus => &[params::EXPECTED_STATUS],
            ActionKind::VerifyReachability => &[params::COMPONENT_TYPES],
            _ => &[],
        }
    }

    /// Whether the action's own `timeout` must be set (non-zero).
    fn requires_timeout(self) -> bool {
        matches!(
            self,
            ActionKind::VerifyPowerStatus
                | ActionKind::VerifyReachability
                | ActionKind::GetPowerStatus
                | ActionKind::WaitDecommissioned
        )
    }

    /// Whether the action's own `poll_interval` must be set (non-zero).
    fn requires_poll_interval(self) -> bool {
        matches!(
            self,
            ActionKind::VerifyPowerStatus
                | ActionKind::VerifyReachability
                | ActionKind::WaitDecommissioned
        )
    }
}

impl fmt::Display for ActionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An action with its parameters checked and defaults applied: what the
/// executor runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A workflow timer, once per step.
    Sleep {
        duration: Duration,
    },
    /// Power control; `operation` (a power code) overrides the task's own.
    PowerControl {
        operation: Option<String>,
    },
    /// Polls power status until every component reports `expected`.
    VerifyPowerStatus {
        expected: PowerState,
        timeout: Duration,
        poll_interval: Duration,
    },
    /// One power-status read.
    GetPowerStatus {
        timeout: Duration,
    },
    /// Polls until each listed type is reachable (≥1 component, or all of
    /// them with `require_all`).
    VerifyReachability {
        component_types: Vec<ComponentType>,
        require_all: bool,
        timeout: Duration,
        poll_interval: Duration,
    },
    /// Starts a firmware update, then polls it.
    FirmwareControl {
        operation: Option<String>,
        poll_interval: Duration,
        poll_timeout: Duration,
    },
    /// Fire-once decommission request.
    DecommissionControl,
    /// Polls decommission status.
    WaitDecommissioned {
        timeout: Duration,
        poll_interval: Duration,
    },
    BringUpControl,
    WaitBringUp {
        timeout: Duration,
        poll_interval: Duration,
    },
    InjectExpectation,
    VerifyFirmwareConsistency,
}

impl Action {
    pub fn kind(&self) -> ActionKind {
        match self {
            Action::Sleep { .. } => ActionKind::Sleep,
            Action::PowerControl { .. } => ActionKind::PowerControl,
            Action::VerifyPowerStatus { .. } => ActionKind::VerifyPowerStatus,
            Action::GetPowerStatus { .. } => ActionKind::GetPowerStatus,
            Action::VerifyReachability { .. } => ActionKind::VerifyReachability,
            Action::FirmwareControl { .. } => ActionKind::FirmwareControl,
            Action::DecommissionControl => ActionKind::DecommissionControl,
            Action::WaitDecommissioned { .. } => ActionKind::WaitDecommissioned,
            Action::BringUpControl => ActionKind::BringUpControl,
            Action::WaitBringUp { .. } => ActionKind::WaitBringUp,
            Action::InjectExpectation => ActionKind::InjectExpectation,
            Action::VerifyFirmwareConsistency => ActionKind::VerifyFirmwareConsistency,
        }
    }

    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// The manager capabilities this action calls on (spec §4.3).
    pub fn required_capabilities(&self) -> &'static [Capability] {
        self.kind().required_capabilities()
    }

    pub fn is_batched(&self) -> bool {
        self.kind().is_batched()
    }
}

impl ActionConfig {
    /// The typed action, with every parameter rule of spec §4.3 checked and
    /// defaults applied. Accepts executor-only actions too: use
    /// [`ActionConfig::validate`] for actions in user rules.
    ///
    /// Checks run in the reference's order: known name, required
    /// parameters present, `timeout`, `poll_interval`, then parameter
    /// values. Duration parameters are Go duration strings or numbers of
    /// nanoseconds (the reference's `time.Duration` encoding).
    pub fn action(&self) -> Result<Action, RuleError> {
        let kind = ActionKind::parse(&self.name)
            .ok_or_else(|| RuleError::UnknownAction(self.name.clone()))?;
        let name = kind.name();
        for param in kind.required_params() {
            if !self.parameters.contains_key(*param) {
                return Err(RuleError::MissingParameter {
                    action: name.to_string(),
                    param: (*param).to_string(),
                });
            }
        }
        let timeout = self.timeout.unwrap_or_default();
        let poll_interval = self.poll_interval.unwrap_or_default();
        if kind.requires_timeout() && timeout.is_zero() {
            return Err(RuleError::TimeoutRequired(name.to_string()));
        }
        if kind.requires_poll_interval() && poll_interval.is_zero() {
            return Err(RuleError::PollIntervalRequired(name.to_string()));
        }
        let param = |key: &str| self.parameters.get(key).filter(|v| !v.is_null());
        let invalid = |param: &str, reason: String| RuleError::InvalidParameter {
            action: name.to_string(),
            param: param.to_string(),
            reason,
        };
        Ok(match kind {
            ActionKind::Sleep => {
                let value = self
                    .parameters
                    .get(params::DURATION)
                    .unwrap_or(&Value::Null);
                Action::Sleep {
                    duration: duration_param(value).map_err(|r| invalid(params::DURATION, r))?,
                }
            }
            ActionKind::PowerControl => Action::PowerControl {
                operation: operation_param(param(params::OPERATION), TaskType::PowerControl)
                    .map_err(|r| invalid(params::OPERATION, r))?,
            },
            ActionKind::VerifyPowerStatus => {
                let expected = match self.parameters.get(params::EXPECTED_STATUS) {
                    Some(Value::String(s)) if s == "on" => PowerState::On,
                    Some(Value::String(s)) if s == "off" => PowerState::Off,
                    Some(Value::String(s)) => return Err(RuleError::ExpectedStatus(s.clone())),
                    Some(other) => return Err(RuleError::ExpectedStatus(other.to_string())),
                    None => unreachable!("required parameter checked above"),
                };
                Action::VerifyPowerStatus {
                    expected,
                    timeout,
                    poll_interval,
                }
            }
            ActionKind::GetPowerStatus => Action::GetPowerStatus { timeout },
            ActionKind::VerifyReachability => Action::VerifyReachability {
                component_types: component_types_param(
                    self.parameters
                        .get(params::COMPONENT_TYPES)
                        .unwrap_or(&Value::Null),
                )
                .map_err(|r| invalid(params::COMPONENT_TYPES, r))?,
                require_all: match param(params::REQUIRE_ALL) {
                    None => false,
                    Some(Value::Bool(b)) => *b,
                    Some(other) => {
                        return Err(invalid(
                            params::REQUIRE_ALL,
                            format!("must be a boolean, got {other}"),
                        ));
                    }
                },
                timeout,
                poll_interval,
            },
            ActionKind::FirmwareControl => {
                // Zero means "not set", as in the reference.
                let poll = |key: &str, default: Duration| match param(key) {
                    None => Ok(default),
                    Some(v) => duration_param(v)
                        .map(|d| if d.is_zero() { default } else { d })
                        .map_err(|r| invalid(key, r)),
                };
                Action::FirmwareControl {
                    operation: operation_param(param(params::OPERATION), TaskType::FirmwareControl)
                        .map_err(|r| invalid(params::OPERATION, r))?,
                    poll_interval: poll(params::POLL_INTERVAL, DEFAULT_FIRMWARE_POLL_INTERVAL)?,
                    poll_timeout: poll(params::POLL_TIMEOUT, DEFAULT_FIRMWARE_POLL_TIMEOUT)?,
                }
            }
            ActionKind::DecommissionControl => Action::DecommissionControl,
            ActionKind::WaitDecommissioned => Action::WaitDecommissioned {
                timeout,
                poll_interval,
            },
            ActionKind::BringUpControl => Action::BringUpControl,
            ActionKind::WaitBringUp => Action::WaitBringUp {
                timeout: non_zero_or(timeout, DEFAULT_BRING_UP_TIMEOUT),
                poll_interval: non_zero_or(poll_interval, DEFAULT_BRING_UP_POLL_INTERVAL),
            },
            ActionKind::InjectExpectation => Action::InjectExpectation,
            ActionKind::VerifyFirmwareConsistency => Action::VerifyFirmwareConsistency,
        })
    }

    /// Checks the action as a user rule may write it: a known, user-allowed
    /// action with valid parameters.
    pub fn validate(&self) -> Result<(), RuleError> {
        self.validate_in(Scope::User)
    }

    pub(crate) fn validate_in(&self, scope: Scope) -> Result<(), RuleError> {
        let action = self.action()?;
        if scope == Scope::User && !action.kind().is_user_allowed() {
            return Err(RuleError::ExecutorOnlyAction(self.name.clone()));
        }
        Ok(())
    }

    /// The component types this action names in its parameters
    /// (VerifyReachability's `component_types`); unparsable entries are
    /// left out.
    pub(crate) fn parameter_component_types(&self) -> Vec<ComponentType> {
        match self.parameters.get(params::COMPONENT_TYPES) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .filter_map(ComponentType::parse)
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// Who wrote the definition being validated: users may not use the
/// executor-only actions that built-ins use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    User,
    BuiltIn,
}

fn non_zero_or(d: Duration, default: Duration) -> Duration {
    if d.is_zero() { default } else { d }
}

/// A duration parameter: a Go duration string, or a number of nanoseconds
/// (how the reference's `time.Duration` values serialise).
fn duration_param(value: &Value) -> Result<Duration, String> {
    match value {
        Value::String(s) => parse_go_duration(s),
        Value::Number(n) => match (n.as_u64(), n.as_f64()) {
            (Some(nanos), _) => Ok(Duration::from_nanos(nanos)),
            (None, Some(f)) if f >= 0.0 && f.is_finite() && f <= u64::MAX as f64 => {
                Ok(Duration::from_nanos(f as u64))
            }
            _ => Err(format!("duration must be non-negative, got {n}")),
        },
        other => Err(format!(
            "invalid duration type: {} (expected string or number)",
            json_type(other)
        )),
    }
}

fn operation_param(value: Option<&Value>, task_type: TaskType) -> Result<Option<String>, String> {
    match value {
        None => Ok(None),
        Some(Value::String(code)) if task_type.valid_codes().contains(&code.as_str()) => {
            Ok(Some(code.clone()))
        }
        Some(Value::String(code)) => Err(format!(
            "unrecognized {} operation \"{code}\" (expected one of: {})",
            task_type,
            task_type.valid_codes().join(", ")
        )),
        Some(other) => Err(format!("must be a string, got {}", json_type(other))),
    }
}

fn component_types_param(value: &Value) -> Result<Vec<ComponentType>, String> {
    let Value::Array(items) = value else {
        return Err(format!(
            "component_types must be array, got {}",
            json_type(value)
        ));
    };
    items
        .iter()
        .map(|item| {
            let name = item
                .as_str()
                .ok_or_else(|| "component_types must be string array".to_string())?;
            ComponentType::parse(name).ok_or_else(|| format!("invalid component type: {name}"))
        })
        .collect()
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config(value: Value) -> ActionConfig {
        serde_json::from_value(value).unwrap()
    }

    fn err(value: Value) -> String {
        config(value).validate().unwrap_err().to_string()
    }

    const fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn capability_names_are_pascal_case_and_round_trip() {
        for c in Capability::ALL {
            assert_eq!(Capability::parse(c.name()), Some(c));
            assert_eq!(c.to_string(), c.name());
            assert!(c.name().chars().next().unwrap().is_ascii_uppercase());
        }
        assert_eq!(Capability::parse("powercontrol"), None);
    }

    #[test]
    fn capability_map_matches_spec() {
        use ActionKind as K;
        use Capability as C;
        let expected: [(K, &[C]); 12] = [
            (K::Sleep, &[]),
            (K::PowerControl, &[C::PowerControl]),
            (K::VerifyPowerStatus, &[C::PowerStatus]),
            (K::GetPowerStatus, &[C::PowerStatus]),
            (K::VerifyReachability, &[C::PowerStatus]),
            (K::FirmwareControl, &[C::FirmwareControl, C::FirmwareStatus]),
            (K::BringUpControl, &[C::BringUpControl]),
            (K::WaitBringUp, &[C::BringUpStatus]),
            (K::InjectExpectation, &[C::InjectExpectation]),
            (K::VerifyFirmwareConsistency, &[C::FirmwareConsistencyCheck]),
            (K::DecommissionControl, &[C::DecommissionControl]),
            (K::WaitDecommissioned, &[C::DecommissionStatus]),
        ];
        for (kind, caps) in expected {
            assert_eq!(kind.required_capabilities(), caps, "{kind}");
            assert_eq!(ActionKind::parse(kind.name()), Some(kind));
        }
    }

    #[test]
    fn user_allowed_and_batched_sets() {
        let user: Vec<_> = ActionKind::ALL
            .into_iter()
            .filter(|k| k.is_user_allowed())
            .map(ActionKind::name)
            .collect();
        assert_eq!(
            user,
            [
                "Sleep",
                "PowerControl",
                "VerifyPowerStatus",
                "VerifyReachability",
                "GetPowerStatus",
                "FirmwareControl",
                "DecommissionControl",
                "WaitDecommissioned"
            ]
        );
        let once: Vec<_> = ActionKind::ALL
            .into_iter()
            .filter(|k| !k.is_batched())
            .map(ActionKind::name)
            .collect();
        assert_eq!(
            once,
            ["Sleep", "VerifyReachability", "VerifyFirmwareConsistency"]
        );
    }

    #[test]
    fn unknown_and_executor_only_names() {
        assert_eq!(err(json!({"name": "Reboot"})), "unknown action: Reboot");
        // Names are case-sensitive, as in the reference.
        assert_eq!(err(json!({"name": "sleep"})), "unknown action: sleep");
        for name in [
            "BringUpControl",
            "WaitBringUp",
            "InjectExpectation",
            "VerifyFirmwareConsistency",
        ] {
            assert_eq!(
                err(json!({ "name": name })),
                format!("action {name} is reserved for built-in rules")
            );
            assert!(config(json!({ "name": name })).action().is_ok());
            assert!(
                config(json!({ "name": name }))
                    .validate_in(Scope::BuiltIn)
                    .is_ok()
            );
        }
    }

    #[test]
    fn sleep_needs_a_duration() {
        assert_eq!(
            err(json!({"name": "Sleep"})),
            "action Sleep missing required parameter: duration"
        );
        assert_eq!(
            config(json!({"name": "Sleep", "parameters": {"duration": "30s"}}))
                .action()
                .unwrap(),
            Action::Sleep { duration: secs(30) }
        );
        // Numbers are nanoseconds, like a serialised Go time.Duration.
        assert_eq!(
            config(json!({"name": "Sleep", "parameters": {"duration": 10_000_000_000u64}}))
                .action()
                .unwrap(),
            Action::Sleep { duration: secs(10) }
        );
        assert_eq!(
            err(json!({"name": "Sleep", "parameters": {"duration": true}})),
            "action Sleep: invalid duration: invalid duration type: boolean (expected string or number)"
        );
        assert!(
            err(json!({"name": "Sleep", "parameters": {"duration": "soon"}}))
                .starts_with("action Sleep: invalid duration: invalid duration \"soon\"")
        );
        assert!(
            err(json!({"name": "Sleep", "parameters": {"duration": -1}}))
                .starts_with("action Sleep: invalid duration: duration must be non-negative")
        );
    }

    #[test]
    fn power_control_operation_must_be_a_power_code() {
        assert_eq!(
            config(json!({"name": "PowerControl"})).action().unwrap(),
            Action::PowerControl { operation: None }
        );
        assert_eq!(
            config(json!({"name": "PowerControl", "parameters": {"operation": "force_power_off"}}))
                .action()
                .unwrap(),
            Action::PowerControl {
                operation: Some("force_power_off".into())
            }
        );
        assert!(
            err(json!({"name": "PowerControl", "parameters": {"operation": "upgrade"}}))
                .starts_with(
                    "action PowerControl: invalid operation: unrecognized power_control operation \"upgrade\""
                )
        );
        assert_eq!(
            err(json!({"name": "PowerControl", "parameters": {"operation": 3}})),
            "action PowerControl: invalid operation: must be a string, got number"
        );
    }

    #[test]
    fn verify_power_status_requirements_in_reference_order() {
        assert_eq!(
            err(json!({"name": "VerifyPowerStatus", "timeout": "5m", "poll_interval": "10s"})),
            "action VerifyPowerStatus missing required parameter: expected_status"
        );
        assert_eq!(
            err(json!({"name": "VerifyPowerStatus", "parameters": {"expected_status": "on"}})),
            "action VerifyPowerStatus requires timeout"
        );
        assert_eq!(
            err(json!({"name": "VerifyPowerStatus", "timeout": "5m",
                       "parameters": {"expected_status": "on"}})),
            "action VerifyPowerStatus requires poll_interval"
        );
        assert_eq!(
            err(
                json!({"name": "VerifyPowerStatus", "timeout": "5m", "poll_interval": "10s",
                       "parameters": {"expected_status": "ON"}})
            ),
            "expected_status must be 'on' or 'off', got 'ON'"
        );
        assert_eq!(
            config(
                json!({"name": "VerifyPowerStatus", "timeout": "5m", "poll_interval": "10s",
                          "parameters": {"expected_status": "off"}})
            )
            .action()
            .unwrap(),
            Action::VerifyPowerStatus {
                expected: PowerState::Off,
                timeout: secs(300),
                poll_interval: secs(10)
            }
        );
    }

    #[test]
    fn get_power_status_needs_timeout() {
        assert_eq!(
            err(json!({"name": "GetPowerStatus"})),
            "action GetPowerStatus requires timeout"
        );
        assert_eq!(
            config(json!({"name": "GetPowerStatus", "timeout": "1m"}))
                .action()
                .unwrap(),
            Action::GetPowerStatus { timeout: secs(60) }
        );
    }

    #[test]
    fn verify_reachability_parameters() {
        let base = |params: Value| {
            json!({"name": "VerifyReachability", "timeout": "3m", "poll_interval": "10s",
                   "parameters": params})
        };
        assert_eq!(
            err(json!({"name": "VerifyReachability", "timeout": "3m", "poll_interval": "10s"})),
            "action VerifyReachability missing required parameter: component_types"
        );
        assert_eq!(
            err(base(json!({"component_types": "compute"}))),
            "action VerifyReachability: invalid component_types: component_types must be array, got string"
        );
        assert_eq!(
            err(base(json!({"component_types": [1]}))),
            "action VerifyReachability: invalid component_types: component_types must be string array"
        );
        assert_eq!(
            err(base(json!({"component_types": ["gpu"]}))),
            "action VerifyReachability: invalid component_types: invalid component type: gpu"
        );
        assert_eq!(
            err(base(
                json!({"component_types": ["compute"], "require_all": "yes"})
            )),
            "action VerifyReachability: invalid require_all: must be a boolean, got \"yes\""
        );
        assert_eq!(
            config(base(
                json!({"component_types": ["Compute", "nvswitch"], "require_all": true})
            ))
            .action()
            .unwrap(),
            Action::VerifyReachability {
                component_types: vec![ComponentType::Compute, ComponentType::NvSwitch],
                require_all: true,
                timeout: secs(180),
                poll_interval: secs(10)
            }
        );
    }

    #[test]
    fn firmware_control_defaults_and_overrides() {
        assert_eq!(
            config(json!({"name": "FirmwareControl"})).action().unwrap(),
            Action::FirmwareControl {
                operation: None,
                poll_interval: secs(120),
                poll_timeout: secs(1800)
            }
        );
        assert_eq!(
            config(json!({"name": "FirmwareControl", "parameters":
                {"operation": "downgrade", "poll_interval": "1m", "poll_timeout": "45m"}}))
            .action()
            .unwrap(),
            Action::FirmwareControl {
                operation: Some("downgrade".into()),
                poll_interval: secs(60),
                poll_timeout: secs(2700)
            }
        );
        assert!(
            err(json!({"name": "FirmwareControl", "parameters": {"operation": "power_on"}}))
                .starts_with("action FirmwareControl: invalid operation: unrecognized firmware_control operation")
        );
        assert!(
            err(json!({"name": "FirmwareControl", "parameters": {"poll_timeout": "later"}}))
                .starts_with("action FirmwareControl: invalid poll_timeout: invalid duration")
        );
    }

    #[test]
    fn decommission_and_bring_up_actions() {
        assert_eq!(
            config(json!({"name": "DecommissionControl"}))
                .action()
                .unwrap(),
            Action::DecommissionControl
        );
        assert_eq!(
            err(json!({"name": "WaitDecommissioned", "poll_interval": "30s"})),
            "action WaitDecommissioned requires timeout"
        );
        assert_eq!(
            err(json!({"name": "WaitDecommissioned", "timeout": "4h"})),
            "action WaitDecommissioned requires poll_interval"
        );
        assert_eq!(
            config(json!({"name": "WaitBringUp"})).action().unwrap(),
            Action::WaitBringUp {
                timeout: secs(900),
                poll_interval: secs(30)
            }
        );
    }
}
