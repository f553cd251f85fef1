//! Operation rule definitions as the CLI reads them: single definition files
//! (`rule create --definition`) and batch files (`rule load`), with the
//! checks the client can make before calling the server (spec flow-core
//! §4.2, §4.3, §4.6).
//!
//! The checks are the ones the server makes: parsing and validation come
//! from `rackflow_domain::rule` (the same code, the same messages), so a file
//! that passes here is refused by the server only for what depends on its
//! state (an existing default). The definition sent is `{"version": "v1",
//! "steps": [...]}` as the validator read it. A key the rule model does not
//! have is an error here as on the server (a typo such as `max_paralel`
//! would otherwise leave its field at the default).

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Context;
use clap::ValueEnum;
use rackflow_api::v1;
use rackflow_domain::rule::validate::MAX_RULE_NAME_LEN;
use rackflow_domain::rule::{RuleDefinition, parse_rule_batch, parse_rule_definition};
use rackflow_domain::task::TaskType;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Operation types the rule API creates (`--type`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum RuleType {
    #[value(name = "power_control", alias = "power-control")]
    PowerControl,
    #[value(name = "firmware_control", alias = "firmware-control")]
    FirmwareControl,
}

impl RuleType {
    pub fn as_str(self) -> &'static str {
        self.task_type().as_str()
    }

    pub fn task_type(self) -> TaskType {
        match self {
            RuleType::PowerControl => TaskType::PowerControl,
            RuleType::FirmwareControl => TaskType::FirmwareControl,
        }
    }

    /// The wire `OperationType` number.
    pub fn to_proto(self) -> i32 {
        match self {
            RuleType::PowerControl => v1::OperationType::PowerControl as i32,
            RuleType::FirmwareControl => v1::OperationType::FirmwareControl as i32,
        }
    }

    /// Reads `power_control`, `POWER_CONTROL`, `power-control` or
    /// `OPERATION_TYPE_POWER_CONTROL`. Other task types (`bring_up`, …) are
    /// errors saying the rule API does not create them.
    pub fn parse(text: &str) -> Result<RuleType, String> {
        let norm = text.trim().to_ascii_lowercase().replace('-', "_");
        let norm = norm.strip_prefix("operation_type_").unwrap_or(&norm);
        match norm {
            "power_control" => Ok(RuleType::PowerControl),
            "firmware_control" => Ok(RuleType::FirmwareControl),
            other if TaskType::parse(other).is_some() => Err(format!(
                "operation type {other:?} cannot be created through the rule API \
                 (only power_control and firmware_control)"
            )),
            _ => Err(format!(
                "unknown operation type {text:?} (use power_control or firmware_control)"
            )),
        }
    }

    /// The rule type of a task type; the others cannot be created through
    /// the rule API.
    pub fn from_task_type(t: TaskType) -> Result<RuleType, String> {
        match t {
            TaskType::PowerControl => Ok(RuleType::PowerControl),
            TaskType::FirmwareControl => Ok(RuleType::FirmwareControl),
            other => Err(format!(
                "operation type {other} cannot be created through the rule API \
                 (only power_control and firmware_control)"
            )),
        }
    }

    /// Operation codes of this type (`power_on`, …; `upgrade`, …).
    pub fn codes(self) -> &'static [&'static str] {
        self.task_type().valid_codes()
    }

    /// Checks an operation code for this type; returns it trimmed.
    pub fn check_code(self, code: &str) -> Result<String, String> {
        let code = code.trim();
        if self.codes().contains(&code) {
            Ok(code.to_string())
        } else {
            Err(format!(
                "invalid operation code {code:?} for {} (use {})",
                self.as_str(),
                self.codes().join(", ")
            ))
        }
    }
}

/// Operation-type name of a wire `OperationType` (`power_control`, …).
pub fn operation_type_name(value: i32) -> String {
    match v1::OperationType::try_from(value) {
        Ok(v1::OperationType::PowerControl) => "power_control".to_string(),
        Ok(v1::OperationType::FirmwareControl) => "firmware_control".to_string(),
        _ => format!("unknown ({value})"),
    }
}

/// Longest rule name the server accepts.
pub const MAX_NAME_LEN: usize = MAX_RULE_NAME_LEN;

/// A checked rule definition, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    /// The definition as the server's validator reads it.
    pub rule: RuleDefinition,
    /// Non-fatal findings (no steps).
    pub warnings: Vec<String>,
}

impl Definition {
    /// Checks a definition document `{version, steps}` with the rule
    /// validator the server runs (`rackflow_domain::rule`), as a user rule.
    pub fn from_value(value: &Value) -> Result<Definition, String> {
        let rule = parse_rule_definition(&value.to_string()).map_err(|e| e.to_string())?;
        Ok(Definition::new(rule, Vec::new()))
    }

    fn new(rule: RuleDefinition, mut warnings: Vec<String>) -> Definition {
        if rule.steps.is_empty() {
            warnings.push(
                "the rule has no steps: every task that uses it fails (FailedPrecondition)"
                    .to_string(),
            );
        }
        Definition { rule, warnings }
    }

    /// Number of distinct stages.
    pub fn stages(&self) -> usize {
        self.rule
            .steps
            .iter()
            .map(|s| s.stage)
            .collect::<BTreeSet<_>>()
            .len()
    }

    /// Number of steps.
    pub fn steps(&self) -> usize {
        self.rule.steps.len()
    }

    /// The `rule_definition_json` sent: `{"version": "v1", "steps": […]}`.
    pub fn to_json(&self) -> String {
        self.rule.to_json()
    }
}

// ---------------------------------------------------------------------------
// Single definition file (`rule create --definition`)
// ---------------------------------------------------------------------------

/// A definition file: `{version, steps}` (JSON or YAML).
pub struct DefinitionFile;

impl DefinitionFile {
    /// Reads and checks a definition file.
    pub fn load(path: &Path) -> anyhow::Result<Definition> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("read rule definition file {}", path.display()))?;
        let value: Value = crate::fleet::parse_by_format(path, &text)
            .with_context(|| format!("parse rule definition file {}", path.display()))?;
        Definition::from_value(&value)
            .map_err(|e| anyhow::anyhow!("rule definition file {}: {e}", path.display()))
    }
}

// ---------------------------------------------------------------------------
// Batch file (`rule load`)
// ---------------------------------------------------------------------------

/// A rule of a batch file after the checks: what `rule load` creates.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRule {
    pub name: String,
    pub description: String,
    pub rule_type: RuleType,
    pub code: String,
    pub definition: Definition,
}

impl PlannedRule {
    /// `power_control/power_on`.
    pub fn operation(&self) -> String {
        format!("{}/{}", self.rule_type.as_str(), self.code)
    }

    pub fn request(&self, is_default: bool) -> v1::CreateOperationRuleRequest {
        v1::CreateOperationRuleRequest {
            name: self.name.clone(),
            description: self.description.clone(),
            operation_type: self.rule_type.to_proto(),
            operation_code: self.code.clone(),
            rule_definition_json: self.definition.to_json(),
            is_default,
        }
    }
}

/// Checks a rule name: required, at most [`MAX_NAME_LEN`] characters.
pub fn check_name(name: &str) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty() {
        return Err("name is required".to_string());
    }
    if name.chars().count() > MAX_NAME_LEN {
        return Err(format!("name is longer than {MAX_NAME_LEN} characters"));
    }
    Ok(name.to_string())
}

/// Reads a batch file `{version, rules: [{name, description,
/// operation_type, operation, steps}]}` (YAML, or JSON which is YAML too)
/// and checks it with the loader the server side shares
/// (`rackflow_domain::rule::parse_rule_batch`): every rule's record and
/// definition, no two rules for one (type, code), and coverage
/// (power_control rules define power_on and power_off, firmware_control
/// rules define upgrade). The first problem found is the error. Rules of
/// other types than power_control and firmware_control are refused: the
/// rule API cannot create them.
pub fn plan_batch(text: &str) -> anyhow::Result<Vec<PlannedRule>> {
    let rules = parse_rule_batch(text).map_err(|e| anyhow::anyhow!("{e}"))?;
    if rules.is_empty() {
        anyhow::bail!("the file defines no rules (expected `rules: [...]`)");
    }
    let mut planned = Vec::with_capacity(rules.len());
    for (i, rule) in rules.into_iter().enumerate() {
        let label = format!("rules[{i}] ({})", rule.name);
        let rule_type = RuleType::from_task_type(rule.operation_type)
            .map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
        planned.push(PlannedRule {
            name: rule.name.trim().to_string(),
            description: rule.description.trim().to_string(),
            rule_type,
            code: rule.operation_code,
            definition: Definition::new(rule.definition, Vec::new()),
        });
    }
    Ok(planned)
}
