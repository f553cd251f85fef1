//! `rackflow rule create|list|get|delete|set-default|associate|disassociate|
//! associations|load`: operation rules and their rack associations.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use rackflow_api::v1;
use serde::Serialize;
use serde_json::Value;

use crate::args::parse_uuid;
use crate::client::{self, Flow};
use crate::output::{Fields, OutputFormat, Table, or_dash, print_json, timestamp};
use crate::rule_file::{
    DefinitionFile, PlannedRule, RuleType, check_name, operation_type_name, plan_batch,
};

#[derive(Debug, Subcommand)]
pub enum RuleCommand {
    /// Create a rule from a definition file.
    Create(CreateRuleArgs),
    /// List rules, newest first.
    List(ListRulesArgs),
    /// Show one rule with its definition.
    Get {
        /// Rule id.
        #[arg(value_parser = parse_uuid)]
        id: uuid::Uuid,
    },
    /// Delete a rule (its rack associations go with it; running tasks keep it).
    Delete {
        /// Rule id.
        #[arg(value_parser = parse_uuid)]
        id: uuid::Uuid,
    },
    /// Make a rule the default for its operation type and code.
    SetDefault {
        /// Rule id.
        #[arg(value_parser = parse_uuid)]
        id: uuid::Uuid,
    },
    /// Pin a rule to a rack for the rule's operation type and code.
    Associate {
        /// Rack id.
        #[arg(long, value_name = "UUID", value_parser = parse_uuid)]
        rack_id: uuid::Uuid,
        /// Rule id.
        #[arg(long, value_name = "UUID", value_parser = parse_uuid)]
        rule_id: uuid::Uuid,
    },
    /// Remove a rack's rule pin for an operation type and code.
    Disassociate {
        /// Rack id.
        #[arg(long, value_name = "UUID", value_parser = parse_uuid)]
        rack_id: uuid::Uuid,
        /// Operation type.
        #[arg(long = "type", value_name = "TYPE", value_enum)]
        rule_type: RuleType,
        /// Operation code, e.g. power_on.
        #[arg(long, value_name = "CODE")]
        code: String,
    },
    /// A rack's rule pins (all, or the one for --type and --code).
    Associations {
        /// Rack id.
        #[arg(long, value_name = "UUID", value_parser = parse_uuid)]
        rack_id: uuid::Uuid,
        /// Only the pin of this operation type (needs --code).
        #[arg(long = "type", value_name = "TYPE", value_enum, requires = "code")]
        rule_type: Option<RuleType>,
        /// Only the pin of this operation code (needs --type).
        #[arg(long, value_name = "CODE", requires = "rule_type")]
        code: Option<String>,
    },
    /// Create the rules of a batch file (YAML or JSON) as the defaults.
    Load(LoadArgs),
}

/// Flags of `rule create`.
#[derive(Debug, Clone, Args)]
pub struct CreateRuleArgs {
    /// Rule name (at most 128 characters).
    #[arg(long)]
    pub name: String,
    /// Operation type.
    #[arg(long = "type", value_name = "TYPE", value_enum)]
    pub rule_type: RuleType,
    /// Operation code: power_on, power_off, force_power_off, restart, … or
    /// upgrade, downgrade, rollback.
    #[arg(long, value_name = "CODE")]
    pub code: String,
    /// Definition file {version, steps}, JSON or YAML.
    #[arg(long, value_name = "FILE")]
    pub definition: PathBuf,
    /// Rule description.
    #[arg(long)]
    pub description: Option<String>,
    /// Make it the default rule for its type and code (fails if one exists).
    #[arg(long)]
    pub default: bool,
}

impl CreateRuleArgs {
    /// The request, and the definition's warnings.
    pub fn to_request(&self) -> anyhow::Result<(v1::CreateOperationRuleRequest, Vec<String>)> {
        let name = check_name(&self.name).map_err(|e| anyhow::anyhow!("--name: {e}"))?;
        let code = self
            .rule_type
            .check_code(&self.code)
            .map_err(|e| anyhow::anyhow!("--code: {e}"))?;
        let definition = DefinitionFile::load(&self.definition)?;
        let warnings = definition.warnings.clone();
        Ok((
            v1::CreateOperationRuleRequest {
                name,
                description: self.description.clone().unwrap_or_default(),
                operation_type: self.rule_type.to_proto(),
                operation_code: code,
                rule_definition_json: definition.to_json(),
                is_default: self.default,
            },
            warnings,
        ))
    }
}

/// Flags of `rule list`.
#[derive(Debug, Clone, Default, Args)]
pub struct ListRulesArgs {
    /// Only rules of this operation type.
    #[arg(long = "type", value_name = "TYPE", value_enum)]
    pub rule_type: Option<RuleType>,
    /// Only default rules (true) or only the others (false).
    #[arg(long, value_name = "true|false")]
    pub default: Option<bool>,
    /// Page size [server default: 100].
    #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
    pub limit: Option<i32>,
    /// Rules to skip.
    #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
    pub offset: Option<i32>,
}

impl ListRulesArgs {
    pub fn to_request(&self) -> v1::ListOperationRulesRequest {
        v1::ListOperationRulesRequest {
            operation_type: self.rule_type.map(RuleType::to_proto),
            is_default: self.default,
            offset: self.offset,
            limit: self.limit,
        }
    }
}

/// Flags of `rule load`.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Batch file: {version, rules: [{name, description, operation_type, operation, steps}]}.
    pub file: PathBuf,
    /// Check the file and print what would be created; talk to no server.
    #[arg(long, conflicts_with = "overwrite")]
    pub dry_run: bool,
    /// Where a default already exists, create the rule and make it the
    /// default in its place (the old rule stays, as a non-default rule).
    #[arg(long)]
    pub overwrite: bool,
}

// ---------------------------------------------------------------------------
// Views
// ---------------------------------------------------------------------------

/// JSON view of a rule.
#[derive(Debug, Clone, Serialize)]
pub struct RuleView {
    pub id: String,
    pub name: String,
    pub description: String,
    pub operation_type: String,
    pub operation_code: String,
    pub is_default: bool,
    /// The definition `{version, steps}` (a string if it is not JSON).
    pub definition: Value,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
}

impl RuleView {
    pub fn from_proto(rule: &v1::OperationRule) -> RuleView {
        RuleView {
            id: rule.id.as_ref().map(|u| u.id.clone()).unwrap_or_default(),
            name: rule.name.clone(),
            description: rule.description.clone(),
            operation_type: operation_type_name(rule.operation_type),
            operation_code: rule.operation_code.clone(),
            is_default: rule.is_default,
            definition: serde_json::from_str(&rule.rule_definition_json)
                .unwrap_or_else(|_| Value::String(rule.rule_definition_json.clone())),
            created_at: timestamp(rule.created_at.as_ref()),
            updated_at: timestamp(rule.updated_at.as_ref()),
        }
    }
}

/// An action as a table cell: `PowerControl(power_off)`,
/// `VerifyPowerStatus(on)`, `Sleep(10s)`.
fn action_text(action: &Value) -> String {
    let name = action.get("name").and_then(Value::as_str).unwrap_or("?");
    let params = action.get("parameters");
    let arg = ["operation", "expected_status", "duration"]
        .iter()
        .find_map(|k| params.and_then(|p| p.get(*k)))
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
    match arg {
        Some(a) => format!("{name}({a})"),
        None => name.to_string(),
    }
}

fn actions_text(list: Option<&Value>) -> String {
    let items: Vec<String> = list
        .and_then(Value::as_array)
        .map(|a| a.iter().map(action_text).collect())
        .unwrap_or_default();
    or_dash(&items.join(", "))
}

fn value_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "-".to_string(),
        Some(Value::String(s)) => or_dash(s),
        Some(other) => other.to_string(),
    }
}

/// The steps of a definition as a table, in stage order: stage, component
/// type, pre/main/post actions, max parallel, timeout and retry.
pub fn render_steps(definition: &Value) -> String {
    let Some(steps) = definition.get("steps").and_then(Value::as_array) else {
        return "(no steps)\n".to_string();
    };
    if steps.is_empty() {
        return "(no steps)\n".to_string();
    }
    let mut sorted: Vec<&Value> = steps.iter().collect();
    sorted.sort_by_key(|s| s.get("stage").and_then(Value::as_i64).unwrap_or(0));
    let mut table = Table::new([
        "STAGE",
        "COMPONENT TYPE",
        "PRE",
        "MAIN",
        "POST",
        "MAX PARALLEL",
        "TIMEOUT",
        "RETRY",
    ]);
    for s in sorted {
        let retry = s
            .get("retry")
            .filter(|r| r.is_object())
            .map(|r| {
                format!(
                    "{} attempts, {} x{}",
                    value_text(r.get("max_attempts")),
                    value_text(r.get("initial_interval")),
                    r.get("backoff_coefficient")
                        .map(|v| value_text(Some(v)))
                        .unwrap_or_else(|| "1".to_string())
                )
            })
            .unwrap_or_else(|| "-".to_string());
        let max_parallel = match s.get("max_parallel").and_then(Value::as_i64) {
            None | Some(0) => "all".to_string(),
            Some(n) => n.to_string(),
        };
        table.row([
            value_text(s.get("stage")),
            value_text(s.get("component_type")),
            actions_text(s.get("pre_operation")),
            s.get("main_operation")
                .map(action_text)
                .unwrap_or_else(|| "-".to_string()),
            actions_text(s.get("post_operation")),
            max_parallel,
            value_text(s.get("timeout")),
            retry,
        ]);
    }
    table.render()
}

fn render_rule(rule: &RuleView) -> String {
    let mut fields = Fields::new();
    fields
        .add("ID", &rule.id)
        .add("Name", &rule.name)
        .add("Description", or_dash(&rule.description))
        .add(
            "Operation",
            format!("{}/{}", rule.operation_type, rule.operation_code),
        )
        .add("Default", if rule.is_default { "yes" } else { "no" })
        .add("Created", or_dash(rule.created_at.as_deref().unwrap_or("")))
        .add("Updated", or_dash(rule.updated_at.as_deref().unwrap_or("")));
    let mut out = fields.render();
    out.push('\n');
    out.push_str(&render_steps(&rule.definition));
    out.push_str("\nDefinition:\n");
    let pretty = serde_json::to_string_pretty(&rule.definition).unwrap_or_default();
    for line in pretty.lines() {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// JSON of `rule list`.
#[derive(Debug, Clone, Serialize)]
pub struct RuleListView {
    pub total: i32,
    pub rules: Vec<RuleView>,
}

/// JSON view of a rack's rule association.
#[derive(Debug, Clone, Serialize)]
pub struct AssociationView {
    pub rack_id: String,
    pub operation_type: String,
    pub operation_code: String,
    pub rule_id: Option<String>,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
}

fn warn(warnings: &[String]) {
    for w in warnings {
        eprintln!("warning: {w}");
    }
}

fn uuid_msg(id: uuid::Uuid) -> Option<v1::Uuid> {
    Some(v1::Uuid { id: id.to_string() })
}

// ---------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------

/// Runs one `rule` subcommand.
pub async fn run(
    server: &crate::client::ServerAddress,
    command: &RuleCommand,
    output: OutputFormat,
) -> anyhow::Result<()> {
    match command {
        RuleCommand::Create(args) => run_create(server, args, output).await,
        RuleCommand::List(args) => run_list(server, args, output).await,
        RuleCommand::Get { id } => run_get(server, *id, output).await,
        RuleCommand::Delete { id } => {
            let mut flow = client::connect(server).await?;
            flow.delete_operation_rule(v1::DeleteOperationRuleRequest {
                rule_id: uuid_msg(*id),
            })
            .await
            .with_context(|| format!("delete rule {id}"))?;
            match output {
                OutputFormat::Json => {
                    print_json(&serde_json::json!({ "id": id.to_string(), "deleted": true }))?
                }
                OutputFormat::Table => crate::outln!("deleted rule {id}"),
            }
            Ok(())
        }
        RuleCommand::SetDefault { id } => {
            let mut flow = client::connect(server).await?;
            flow.set_rule_as_default(v1::SetRuleAsDefaultRequest {
                rule_id: uuid_msg(*id),
            })
            .await
            .with_context(|| format!("set rule {id} as default"))?;
            match output {
                OutputFormat::Json => {
                    print_json(&serde_json::json!({ "id": id.to_string(), "is_default": true }))?
                }
                OutputFormat::Table => {
                    crate::outln!("rule {id} is now the default for its operation")
                }
            }
            Ok(())
        }
        RuleCommand::Associate { rack_id, rule_id } => {
            let mut flow = client::connect(server).await?;
            flow.associate_rule_with_rack(v1::AssociateRuleWithRackRequest {
                rack_id: uuid_msg(*rack_id),
                rule_id: uuid_msg(*rule_id),
            })
            .await
            .with_context(|| format!("associate rule {rule_id} with rack {rack_id}"))?;
            match output {
                OutputFormat::Json => print_json(&serde_json::json!({
                    "rack_id": rack_id.to_string(),
                    "rule_id": rule_id.to_string(),
                }))?,
                OutputFormat::Table => {
                    crate::outln!("rack {rack_id} now uses rule {rule_id} for the rule's operation")
                }
            }
            Ok(())
        }
        RuleCommand::Disassociate {
            rack_id,
            rule_type,
            code,
        } => {
            let request = disassociate_request(*rack_id, *rule_type, code)?;
            let mut flow = client::connect(server).await?;
            flow.disassociate_rule_from_rack(request)
                .await
                .with_context(|| format!("disassociate rule from rack {rack_id}"))?;
            let op = format!("{}/{}", rule_type.as_str(), code.trim());
            match output {
                OutputFormat::Json => print_json(&serde_json::json!({
                    "rack_id": rack_id.to_string(),
                    "operation_type": rule_type.as_str(),
                    "operation_code": code.trim(),
                }))?,
                OutputFormat::Table => crate::outln!("rack {rack_id} has no rule pinned for {op}"),
            }
            Ok(())
        }
        RuleCommand::Associations {
            rack_id,
            rule_type,
            code,
        } => run_associations(server, *rack_id, *rule_type, code.as_deref(), output).await,
        RuleCommand::Load(args) => run_load(server, args, output).await,
    }
}

/// The `DisassociateRuleFromRack` request (the code checked against the type).
pub fn disassociate_request(
    rack_id: uuid::Uuid,
    rule_type: RuleType,
    code: &str,
) -> anyhow::Result<v1::DisassociateRuleFromRackRequest> {
    let code = rule_type
        .check_code(code)
        .map_err(|e| anyhow::anyhow!("--code: {e}"))?;
    Ok(v1::DisassociateRuleFromRackRequest {
        rack_id: uuid_msg(rack_id),
        operation_type: rule_type.to_proto(),
        operation_code: code,
    })
}

async fn run_create(
    server: &crate::client::ServerAddress,
    args: &CreateRuleArgs,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let (request, warnings) = args.to_request()?;
    warn(&warnings);
    let mut flow = client::connect(server).await?;
    let id = create(&mut flow, request)
        .await
        .with_context(|| format!("create rule {:?}", args.name.trim()))?;
    match output {
        OutputFormat::Json => print_json(&serde_json::json!({ "id": id }))?,
        OutputFormat::Table => crate::outln!("{id}"),
    }
    Ok(())
}

async fn create(
    flow: &mut Flow,
    request: v1::CreateOperationRuleRequest,
) -> anyhow::Result<String> {
    let response = flow.create_operation_rule(request).await?.into_inner();
    response
        .id
        .map(|u| u.id)
        .context("the server answered without a rule id")
}

async fn run_list(
    server: &crate::client::ServerAddress,
    args: &ListRulesArgs,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    let response = flow
        .list_operation_rules(args.to_request())
        .await
        .context("list rules")?
        .into_inner();
    let view = RuleListView {
        total: response.total_count,
        rules: response.rules.iter().map(RuleView::from_proto).collect(),
    };
    match output {
        OutputFormat::Json => print_json(&view)?,
        OutputFormat::Table => {
            let mut table = Table::new([
                "ID",
                "NAME",
                "OPERATION TYPE",
                "OPERATION CODE",
                "DEFAULT",
                "CREATED AT",
            ]);
            for r in &view.rules {
                table.row([
                    r.id.clone(),
                    r.name.clone(),
                    r.operation_type.clone(),
                    r.operation_code.clone(),
                    if r.is_default { "yes" } else { "no" }.to_string(),
                    or_dash(r.created_at.as_deref().unwrap_or("")),
                ]);
            }
            table.print();
            crate::outln!("{} of {} rules", view.rules.len(), view.total);
        }
    }
    Ok(())
}

async fn run_get(
    server: &crate::client::ServerAddress,
    id: uuid::Uuid,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    let rule = flow
        .get_operation_rule(v1::GetOperationRuleRequest {
            rule_id: uuid_msg(id),
        })
        .await
        .with_context(|| format!("get rule {id}"))?
        .into_inner();
    let view = RuleView::from_proto(&rule);
    match output {
        OutputFormat::Json => print_json(&view)?,
        OutputFormat::Table => crate::output::write_out(&render_rule(&view)),
    }
    Ok(())
}

async fn run_associations(
    server: &crate::client::ServerAddress,
    rack_id: uuid::Uuid,
    rule_type: Option<RuleType>,
    code: Option<&str>,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    let views: Vec<AssociationView> = match (rule_type, code) {
        (Some(t), Some(code)) => {
            let code = t
                .check_code(code)
                .map_err(|e| anyhow::anyhow!("--code: {e}"))?;
            let rule_id = flow
                .get_rack_rule_association(v1::GetRackRuleAssociationRequest {
                    rack_id: uuid_msg(rack_id),
                    operation_type: t.to_proto(),
                    operation_code: code.clone(),
                })
                .await
                .with_context(|| format!("get rule association of rack {rack_id}"))?
                .into_inner()
                .rule_id
                .map(|u| u.id)
                .filter(|id| uuid::Uuid::parse_str(id).is_ok_and(|u| !u.is_nil()));
            vec![AssociationView {
                rack_id: rack_id.to_string(),
                operation_type: t.as_str().to_string(),
                operation_code: code,
                rule_id,
                created_at: None,
                updated_at: None,
            }]
        }
        _ => flow
            .list_rack_rule_associations(v1::ListRackRuleAssociationsRequest {
                rack_id: uuid_msg(rack_id),
            })
            .await
            .with_context(|| format!("list rule associations of rack {rack_id}"))?
            .into_inner()
            .associations
            .iter()
            .map(|a| AssociationView {
                rack_id: a.rack_id.as_ref().map(|u| u.id.clone()).unwrap_or_default(),
                operation_type: operation_type_name(a.operation_type),
                operation_code: a.operation_code.clone(),
                rule_id: a.rule_id.as_ref().map(|u| u.id.clone()),
                created_at: timestamp(a.created_at.as_ref()),
                updated_at: timestamp(a.updated_at.as_ref()),
            })
            .collect(),
    };
    match output {
        OutputFormat::Json => print_json(&serde_json::json!({ "associations": views }))?,
        OutputFormat::Table => {
            let mut table = Table::new(["OPERATION TYPE", "OPERATION CODE", "RULE ID", "UPDATED"]);
            for a in &views {
                table.row([
                    a.operation_type.clone(),
                    a.operation_code.clone(),
                    a.rule_id
                        .clone()
                        .unwrap_or_else(|| "none (default rule applies)".to_string()),
                    or_dash(a.updated_at.as_deref().unwrap_or("")),
                ]);
            }
            table.print();
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// rule load
// ---------------------------------------------------------------------------

/// What `rule load` did (or would do) with one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadOutcome {
    /// `--dry-run`: would be created as the default.
    WouldCreate,
    /// Created as the default.
    Created,
    /// A default existed; created and made the default (`--overwrite`).
    ReplacedDefault,
    /// A default existed; nothing created (no `--overwrite`).
    SkippedDefaultExists,
}

/// JSON of one rule of `rule load`.
#[derive(Debug, Clone, Serialize)]
pub struct LoadedRuleView {
    pub name: String,
    pub operation_type: String,
    pub operation_code: String,
    pub stages: usize,
    pub steps: usize,
    pub outcome: LoadOutcome,
    pub id: Option<String>,
}

/// JSON of `rule load`.
#[derive(Debug, Clone, Serialize)]
pub struct LoadView {
    pub dry_run: bool,
    pub rules: Vec<LoadedRuleView>,
}

fn loaded(rule: &PlannedRule, outcome: LoadOutcome, id: Option<String>) -> LoadedRuleView {
    LoadedRuleView {
        name: rule.name.clone(),
        operation_type: rule.rule_type.as_str().to_string(),
        operation_code: rule.code.clone(),
        stages: rule.definition.stages(),
        steps: rule.definition.steps(),
        outcome,
        id,
    }
}

/// Reads and checks a batch file: the rules to create, with warnings
/// prefixed by the rule they concern.
pub fn plan_load(path: &Path) -> anyhow::Result<(Vec<PlannedRule>, Vec<String>)> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("read rule file {}", path.display()))?;
    let planned = plan_batch(&text).with_context(|| format!("rule file {}", path.display()))?;
    let warnings = planned
        .iter()
        .flat_map(|r| {
            r.definition
                .warnings
                .iter()
                .map(move |w| format!("rule {:?}: {w}", r.name))
        })
        .collect();
    Ok((planned, warnings))
}

fn line(rule: &PlannedRule, text: &str) -> String {
    format!("{} {:?}: {text}", rule.operation(), rule.name)
}

/// `rackflow rule load FILE`.
pub async fn run_load(
    server: &crate::client::ServerAddress,
    args: &LoadArgs,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let (planned, warnings) = plan_load(&args.file)?;
    warn(&warnings);
    let table = output == OutputFormat::Table;
    if args.dry_run {
        let rules: Vec<LoadedRuleView> = planned
            .iter()
            .map(|r| loaded(r, LoadOutcome::WouldCreate, None))
            .collect();
        match output {
            OutputFormat::Json => print_json(&LoadView {
                dry_run: true,
                rules,
            })?,
            OutputFormat::Table => {
                let mut t = Table::new(["OPERATION", "NAME", "STAGES", "STEPS", "WOULD"]);
                for r in &planned {
                    t.row([
                        r.operation(),
                        r.name.clone(),
                        r.definition.stages().to_string(),
                        r.definition.steps().to_string(),
                        "create as default".to_string(),
                    ]);
                }
                t.print();
                crate::outln!(
                    "{} rules checked; nothing was created (dry run)",
                    planned.len()
                );
            }
        }
        return Ok(());
    }

    let mut flow = client::connect(server).await?;
    let mut results = Vec::new();
    for rule in &planned {
        let outcome = match create(&mut flow, rule.request(true)).await {
            Ok(id) => {
                if table {
                    crate::outln!("{}", line(rule, &format!("created as default {id}")));
                }
                loaded(rule, LoadOutcome::Created, Some(id))
            }
            Err(err) if already_exists(&err) && args.overwrite => {
                let id = create(&mut flow, rule.request(false))
                    .await
                    .with_context(|| format!("create rule {:?}", rule.name))?;
                flow.set_rule_as_default(v1::SetRuleAsDefaultRequest {
                    rule_id: Some(v1::Uuid { id: id.clone() }),
                })
                .await
                .with_context(|| format!("make rule {:?} ({id}) the default", rule.name))?;
                if table {
                    crate::outln!(
                        "{}",
                        line(rule, &format!("created {id} and made it the default"))
                    );
                }
                loaded(rule, LoadOutcome::ReplacedDefault, Some(id))
            }
            Err(err) if already_exists(&err) => {
                if table {
                    crate::outln!(
                        "{}",
                        line(
                            rule,
                            "skipped: a default rule already exists (--overwrite replaces it)"
                        )
                    );
                }
                loaded(rule, LoadOutcome::SkippedDefaultExists, None)
            }
            Err(err) => {
                if output == OutputFormat::Json {
                    print_json(&LoadView {
                        dry_run: false,
                        rules: results,
                    })?;
                }
                return Err(err.context(format!("create rule {:?}", rule.name)));
            }
        };
        results.push(outcome);
    }
    let count = |o: LoadOutcome| results.iter().filter(|r| r.outcome == o).count();
    let skipped = count(LoadOutcome::SkippedDefaultExists);
    match output {
        OutputFormat::Json => print_json(&LoadView {
            dry_run: false,
            rules: results.clone(),
        })?,
        OutputFormat::Table => crate::outln!(
            "created {}, replaced default {}, skipped {skipped}",
            count(LoadOutcome::Created),
            count(LoadOutcome::ReplacedDefault),
        ),
    }
    if skipped > 0 {
        let ops: Vec<String> = results
            .iter()
            .filter(|r| r.outcome == LoadOutcome::SkippedDefaultExists)
            .map(|r| format!("{}/{}", r.operation_type, r.operation_code))
            .collect();
        bail!(
            "{skipped} of {} rules not loaded: a default rule already exists for {}; \
             re-run with --overwrite to make the file's rules the defaults",
            results.len(),
            ops.join(", ")
        );
    }
    Ok(())
}

fn already_exists(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<tonic::Status>()
            .is_some_and(|s| s.code() == tonic::Code::AlreadyExists)
    })
}
