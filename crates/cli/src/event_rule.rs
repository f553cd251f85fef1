//! `rackflow event-rule create|get|list|update|enable|disable|delete|bind|
//! unbind|binding|effective`: event rules (leak handling) and their site and
//! rack bindings.
//!
//! Actions are given as a YAML or JSON file: a list of
//! `{name, condition?, spec}` with `spec.kind` one of `submit_task`,
//! `send_alert`, `noop` — the shape `rackflow event-rule get -o json`
//! prints, so a rule's actions can be read, edited and written back.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use rackflow_api::v1;
use rackflow_domain::event_rule::{Action, LEAK_DETECTED};
use rackflow_server::convert;
use serde::Serialize;

use crate::args::parse_uuid;
use crate::client;
use crate::output::{Fields, OutputFormat, Table, print_json, timestamp};

#[derive(Debug, Subcommand)]
pub enum EventRuleCommand {
    /// Create a rule (always disabled) from an actions file.
    Create(CreateArgs),
    /// Show one rule (persisted or built-in) with its actions.
    Get {
        /// Rule id.
        #[arg(value_parser = parse_uuid)]
        id: uuid::Uuid,
    },
    /// List rules: persisted ones, then the built-ins, ascending id.
    List(ListArgs),
    /// Replace a rule's name and description, or its whole action list.
    Update(UpdateArgs),
    /// Let a rule act where it is bound.
    Enable {
        #[arg(value_parser = parse_uuid)]
        id: uuid::Uuid,
    },
    /// Take a rule out of selection (its bindings stay).
    Disable {
        #[arg(value_parser = parse_uuid)]
        id: uuid::Uuid,
    },
    /// Delete an unbound rule.
    Delete {
        #[arg(value_parser = parse_uuid)]
        id: uuid::Uuid,
    },
    /// Bind a rule to the site or to a rack.
    Bind {
        /// Rule id.
        #[arg(value_parser = parse_uuid)]
        id: uuid::Uuid,
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Remove the binding of the site or of a rack.
    Unbind {
        #[command(flatten)]
        scope: ScopeArgs,
        #[arg(long, default_value = LEAK_DETECTED)]
        event_type: String,
    },
    /// Show the binding of the site or of a rack.
    Binding {
        #[command(flatten)]
        scope: ScopeArgs,
        #[arg(long, default_value = LEAK_DETECTED)]
        event_type: String,
    },
    /// The rule that would act on an event of a rack or component.
    Effective {
        /// Rack id.
        #[arg(long, value_name = "UUID", value_parser = parse_uuid, conflicts_with = "component")]
        rack: Option<uuid::Uuid>,
        /// Component id (resolved to its rack).
        #[arg(long, value_name = "UUID", value_parser = parse_uuid)]
        component: Option<uuid::Uuid>,
        #[arg(long, default_value = LEAK_DETECTED)]
        event_type: String,
    },
}

/// `--site` or `--rack UUID`.
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = false)]
pub struct ScopeArgs {
    /// The whole site.
    #[arg(long)]
    site: bool,
    /// One rack.
    #[arg(long, value_name = "UUID", value_parser = parse_uuid)]
    rack: Option<uuid::Uuid>,
}

impl ScopeArgs {
    fn to_proto(&self) -> v1::EventRuleScope {
        match self.rack {
            Some(rack) => v1::EventRuleScope {
                r#type: v1::EventRuleScopeType::Rack as i32,
                id: Some(v1::Uuid {
                    id: rack.to_string(),
                }),
            },
            None => v1::EventRuleScope {
                r#type: v1::EventRuleScopeType::Site as i32,
                id: None,
            },
        }
    }

    fn describe(&self) -> String {
        self.rack
            .map_or_else(|| "the site".to_string(), |rack| format!("rack {rack}"))
    }
}

#[derive(Debug, Clone, Args)]
pub struct CreateArgs {
    /// Rule name (at most 128 bytes, no surrounding whitespace).
    #[arg(long)]
    name: String,
    #[arg(long, default_value = "")]
    description: String,
    #[arg(long, default_value = LEAK_DETECTED)]
    event_type: String,
    /// Actions file (YAML or JSON list).
    #[arg(long, value_name = "FILE")]
    actions: PathBuf,
}

#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    #[arg(long)]
    event_type: Option<String>,
    /// Only enabled (true) or disabled (false) rules.
    #[arg(long)]
    enabled: Option<bool>,
    #[arg(long, default_value_t = 0)]
    offset: i32,
    #[arg(long, default_value_t = 100)]
    limit: i32,
}

#[derive(Debug, Clone, Args)]
pub struct UpdateArgs {
    /// Rule id.
    #[arg(value_parser = parse_uuid)]
    id: uuid::Uuid,
    /// New name (replaces name and description together).
    #[arg(long, conflicts_with = "actions", required_unless_present = "actions")]
    name: Option<String>,
    /// New description (with --name; empty when not given).
    #[arg(long, requires = "name")]
    description: Option<String>,
    /// New actions file (replaces the whole list).
    #[arg(long, value_name = "FILE")]
    actions: Option<PathBuf>,
}

/// Reads an actions file and turns it into the wire actions; the file is
/// checked against the same rules the server applies.
pub fn load_actions(path: &Path) -> anyhow::Result<Vec<v1::EventRuleAction>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("read actions file {}", path.display()))?;
    let actions: Vec<Action> = serde_yaml::from_str(&text)
        .with_context(|| format!("parse actions file {}", path.display()))?;
    rackflow_domain::event_rule::check_actions(&actions)
        .map_err(|e| anyhow::anyhow!("actions file {}: {e}", path.display()))?;
    Ok(actions.iter().map(convert::pb_event_rule_action).collect())
}

/// A rule as the CLI shows it.
#[derive(Debug, Serialize)]
struct RuleView {
    id: String,
    name: String,
    description: String,
    event_type: String,
    enabled: bool,
    read_only: bool,
    created_at: Option<String>,
    updated_at: Option<String>,
    actions: Vec<Action>,
}

impl RuleView {
    fn from_proto(rule: &v1::EventRule) -> anyhow::Result<RuleView> {
        Ok(RuleView {
            id: rule.id.as_ref().map(|u| u.id.clone()).unwrap_or_default(),
            name: rule.name.clone(),
            description: rule.description.clone(),
            event_type: rule.event_type.clone(),
            enabled: rule.enabled,
            read_only: rule.read_only,
            created_at: timestamp(rule.created_at.as_ref()),
            updated_at: timestamp(rule.updated_at.as_ref()),
            actions: convert::event_rule_actions(&rule.actions)
                .map_err(|e| anyhow::anyhow!("the server answered an unreadable rule: {e}"))?,
        })
    }

    fn action_names(&self) -> String {
        self.actions
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn print(&self) -> anyhow::Result<()> {
        let mut fields = Fields::new();
        fields
            .add("ID", &self.id)
            .add("Name", &self.name)
            .add("Description", &self.description)
            .add("Event type", &self.event_type)
            .add("Enabled", self.enabled.to_string())
            .add(
                "Read-only",
                if self.read_only {
                    "yes (built-in)"
                } else {
                    "no"
                },
            );
        if let Some(created) = &self.created_at {
            fields.add("Created", created);
        }
        fields.print();
        crate::outln!("Actions:");
        crate::outln!("{}", serde_yaml::to_string(&self.actions)?.trim_end());
        Ok(())
    }
}

#[derive(Debug, Serialize)]
struct BindingView {
    id: String,
    rule_id: String,
    event_type: String,
    scope: String,
    rack_id: Option<String>,
}

impl BindingView {
    fn from_proto(binding: &v1::EventRuleBinding) -> BindingView {
        let rack_id = binding
            .scope
            .as_ref()
            .and_then(|s| s.id.as_ref())
            .map(|u| u.id.clone());
        BindingView {
            id: binding
                .id
                .as_ref()
                .map(|u| u.id.clone())
                .unwrap_or_default(),
            rule_id: binding
                .rule_id
                .as_ref()
                .map(|u| u.id.clone())
                .unwrap_or_default(),
            event_type: binding.event_type.clone(),
            scope: if rack_id.is_some() { "rack" } else { "site" }.to_string(),
            rack_id,
        }
    }
}

fn rule_id(id: uuid::Uuid) -> Option<v1::Uuid> {
    Some(v1::Uuid { id: id.to_string() })
}

fn show_rule(rule: &v1::EventRule, output: OutputFormat) -> anyhow::Result<()> {
    let view = RuleView::from_proto(rule)?;
    match output {
        OutputFormat::Json => print_json(&view),
        OutputFormat::Table => view.print(),
    }
}

fn show_binding(binding: &v1::EventRuleBinding, output: OutputFormat) -> anyhow::Result<()> {
    let view = BindingView::from_proto(binding);
    match output {
        OutputFormat::Json => print_json(&view)?,
        OutputFormat::Table => {
            let scope = view
                .rack_id
                .as_ref()
                .map_or_else(|| "the site".to_string(), |r| format!("rack {r}"));
            crate::outln!(
                "rule {} is bound to {scope} for {} (binding {})",
                view.rule_id,
                view.event_type,
                view.id
            );
        }
    }
    Ok(())
}

/// Runs one `event-rule` subcommand.
pub async fn run(
    server: &client::ServerAddress,
    command: &EventRuleCommand,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    match command {
        EventRuleCommand::Create(args) => {
            let actions = load_actions(&args.actions)?;
            let rule = flow
                .create_event_rule(v1::CreateEventRuleRequest {
                    name: args.name.clone(),
                    description: args.description.clone(),
                    event_type: args.event_type.clone(),
                    actions,
                })
                .await
                .with_context(|| format!("create event rule {:?}", args.name))?
                .into_inner();
            show_rule(&rule, output)
        }
        EventRuleCommand::Get { id } => {
            let rule = flow
                .get_event_rule(v1::GetEventRuleRequest {
                    rule_id: rule_id(*id),
                })
                .await
                .with_context(|| format!("get event rule {id}"))?
                .into_inner();
            show_rule(&rule, output)
        }
        EventRuleCommand::List(args) => {
            let reply = flow
                .list_event_rules(v1::ListEventRulesRequest {
                    event_type: args.event_type.clone(),
                    enabled: args.enabled,
                    pagination: Some(v1::Pagination {
                        offset: args.offset,
                        limit: args.limit,
                    }),
                })
                .await
                .context("list event rules")?
                .into_inner();
            let views = reply
                .rules
                .iter()
                .map(RuleView::from_proto)
                .collect::<anyhow::Result<Vec<_>>>()?;
            match output {
                OutputFormat::Json => print_json(&serde_json::json!({
                    "total": reply.total,
                    "rules": views,
                }))?,
                OutputFormat::Table => {
                    let mut table =
                        Table::new(["ID", "NAME", "EVENT TYPE", "ENABLED", "BUILT-IN", "ACTIONS"]);
                    for v in &views {
                        table.row([
                            v.id.clone(),
                            v.name.clone(),
                            v.event_type.clone(),
                            v.enabled.to_string(),
                            if v.read_only { "yes" } else { "no" }.to_string(),
                            v.action_names(),
                        ]);
                    }
                    table.print();
                    crate::outln!("{} of {} rules", views.len(), reply.total);
                }
            }
            Ok(())
        }
        EventRuleCommand::Update(args) => {
            use v1::update_event_rule_request::Update;
            let update = match (&args.name, &args.actions) {
                (Some(name), None) => Update::Metadata(v1::EventRuleMetadataUpdate {
                    name: name.clone(),
                    description: args.description.clone().unwrap_or_default(),
                }),
                (None, Some(path)) => Update::Actions(v1::EventRuleActionsUpdate {
                    actions: load_actions(path)?,
                }),
                _ => bail!("give --name (and --description) or --actions"),
            };
            let rule = flow
                .update_event_rule(v1::UpdateEventRuleRequest {
                    rule_id: rule_id(args.id),
                    update: Some(update),
                })
                .await
                .with_context(|| format!("update event rule {}", args.id))?
                .into_inner();
            show_rule(&rule, output)
        }
        EventRuleCommand::Enable { id } => {
            let rule = flow
                .enable_event_rule(v1::EnableEventRuleRequest {
                    rule_id: rule_id(*id),
                })
                .await
                .with_context(|| format!("enable event rule {id}"))?
                .into_inner();
            show_rule(&rule, output)
        }
        EventRuleCommand::Disable { id } => {
            let rule = flow
                .disable_event_rule(v1::DisableEventRuleRequest {
                    rule_id: rule_id(*id),
                })
                .await
                .with_context(|| format!("disable event rule {id}"))?
                .into_inner();
            show_rule(&rule, output)
        }
        EventRuleCommand::Delete { id } => {
            flow.delete_event_rule(v1::DeleteEventRuleRequest {
                rule_id: rule_id(*id),
            })
            .await
            .with_context(|| format!("delete event rule {id}"))?;
            match output {
                OutputFormat::Json => {
                    print_json(&serde_json::json!({ "id": id.to_string(), "deleted": true }))?
                }
                OutputFormat::Table => crate::outln!("deleted event rule {id}"),
            }
            Ok(())
        }
        EventRuleCommand::Bind { id, scope } => {
            let binding = flow
                .create_event_rule_binding(v1::CreateEventRuleBindingRequest {
                    rule_id: rule_id(*id),
                    scope: Some(scope.to_proto()),
                })
                .await
                .with_context(|| format!("bind event rule {id} to {}", scope.describe()))?
                .into_inner();
            show_binding(&binding, output)
        }
        EventRuleCommand::Binding { scope, event_type } => {
            let binding = flow
                .get_event_rule_binding(v1::GetEventRuleBindingRequest {
                    event_type: event_type.clone(),
                    scope: Some(scope.to_proto()),
                })
                .await
                .with_context(|| format!("get the binding of {}", scope.describe()))?
                .into_inner();
            show_binding(&binding, output)
        }
        EventRuleCommand::Unbind { scope, event_type } => {
            flow.delete_event_rule_binding(v1::DeleteEventRuleBindingRequest {
                event_type: event_type.clone(),
                scope: Some(scope.to_proto()),
            })
            .await
            .with_context(|| format!("unbind {}", scope.describe()))?;
            match output {
                OutputFormat::Json => print_json(&serde_json::json!({
                    "scope": scope.describe(),
                    "event_type": event_type,
                    "unbound": true,
                }))?,
                OutputFormat::Table => {
                    crate::outln!(
                        "{} has no event rule bound for {event_type}",
                        scope.describe()
                    )
                }
            }
            Ok(())
        }
        EventRuleCommand::Effective {
            rack,
            component,
            event_type,
        } => {
            use v1::get_effective_event_rule_request::Target;
            let target = match (rack, component) {
                (Some(rack), _) => Target::RackId(v1::Uuid {
                    id: rack.to_string(),
                }),
                (None, Some(component)) => Target::ComponentId(v1::Uuid {
                    id: component.to_string(),
                }),
                (None, None) => bail!("give --rack or --component"),
            };
            let rule = flow
                .get_effective_event_rule(v1::GetEffectiveEventRuleRequest {
                    event_type: event_type.clone(),
                    target: Some(target),
                })
                .await
                .context("get the effective event rule")?
                .into_inner();
            show_rule(&rule, output)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_actions_file_in_yaml_becomes_wire_actions() {
        let dir = std::env::temp_dir().join(format!("event-rule-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("actions.yaml");
        std::fs::write(
            &file,
            "- name: power_off_rack\n  condition:\n    severities: [critical]\n    component_types: [Compute]\n  spec:\n    kind: submit_task\n    operation: {type: power_control, code: force_power_off}\n    target_strategy: rack\n    conflict_strategy: reject\n- name: tell_someone\n  spec: {kind: send_alert, severity: warning, message: leak}\n",
        )
        .unwrap();
        let actions = load_actions(&file).unwrap();
        assert_eq!(actions.len(), 2);
        assert_eq!(actions[0].name, "power_off_rack");
        assert_eq!(
            actions[0].condition.as_ref().unwrap().severities,
            [v1::EventRuleSeverity::Critical as i32]
        );
        std::fs::write(&file, "- name: Bad Name\n  spec: {kind: noop}\n").unwrap();
        assert!(
            load_actions(&file)
                .unwrap_err()
                .to_string()
                .contains("lower_snake_case")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
