//! `rackflow leak report|list`: report a coolant leak on a component (or
//! that it is gone) as a leak source would, and list the leak events.

use anyhow::Context;
use clap::{Args, Subcommand};
use rackflow_api::v1;

use crate::args::parse_uuid;
use crate::client;
use crate::output::{OutputFormat, Table, enum_name, print_json, timestamp};

#[derive(Debug, Subcommand)]
pub enum LeakCommand {
    /// Report a leak on a component (or, with --cleared, that it is gone).
    Report(ReportArgs),
    /// Leak events, newest first.
    List(ListArgs),
}

/// Severity of a report.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SeverityArg {
    Info,
    Warning,
    Critical,
}

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// Component id.
    #[arg(long, value_name = "UUID", value_parser = parse_uuid)]
    component: uuid::Uuid,
    /// Who reports (a monitor's name).
    #[arg(long, default_value = "cli")]
    source: String,
    #[arg(long, value_enum, default_value = "critical")]
    severity: SeverityArg,
    /// The source sees no leak any more (closes the open event).
    #[arg(long)]
    cleared: bool,
    /// When the source observed it, RFC 3339 (default: now).
    #[arg(long, value_name = "TIME")]
    observed_at: Option<chrono::DateTime<chrono::Utc>>,
    #[arg(long, default_value = "")]
    message: String,
}

#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    #[arg(long, value_name = "UUID", value_parser = parse_uuid)]
    rack: Option<uuid::Uuid>,
    #[arg(long, value_name = "UUID", value_parser = parse_uuid)]
    component: Option<uuid::Uuid>,
    /// Only leaks still open.
    #[arg(long)]
    open: bool,
    #[arg(long, default_value_t = 100)]
    limit: i32,
    #[arg(long, default_value_t = 0)]
    offset: i32,
}

fn id(id: uuid::Uuid) -> v1::Uuid {
    v1::Uuid { id: id.to_string() }
}

fn event_json(e: &v1::LeakEvent) -> serde_json::Value {
    let text = |u: &Option<v1::Uuid>| u.as_ref().map(|u| u.id.clone());
    serde_json::json!({
        "id": text(&e.id),
        "component_id": text(&e.component_id),
        "rack_id": text(&e.rack_id),
        "source": e.source,
        "severity": enum_name(
            v1::EventRuleSeverity::try_from(e.severity)
                .map(|s| s.as_str_name())
                .unwrap_or(""),
            "EVENT_RULE_SEVERITY_",
        ),
        "message": e.message,
        "detected_at": timestamp(e.detected_at.as_ref()),
        "last_reported_at": timestamp(e.last_reported_at.as_ref()),
        "observations": e.observations,
        "closed_at": timestamp(e.closed_at.as_ref()),
    })
}

/// Runs one `leak` subcommand.
pub async fn run(
    server: &client::ServerAddress,
    command: &LeakCommand,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    match command {
        LeakCommand::Report(args) => {
            let severity = match args.severity {
                SeverityArg::Info => v1::EventRuleSeverity::Info,
                SeverityArg::Warning => v1::EventRuleSeverity::Warning,
                SeverityArg::Critical => v1::EventRuleSeverity::Critical,
            };
            let reply = flow
                .extensions()
                .report_leak(v1::ReportLeakRequest {
                    component_id: Some(id(args.component)),
                    source: args.source.clone(),
                    severity: severity as i32,
                    cleared: args.cleared,
                    observed_at: args.observed_at.map(|t| prost_types::Timestamp {
                        seconds: t.timestamp(),
                        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
                    }),
                    message: args.message.clone(),
                })
                .await
                .with_context(|| format!("report a leak on component {}", args.component))?
                .into_inner();
            let outcome = enum_name(
                v1::LeakReportOutcome::try_from(reply.outcome)
                    .map(|o| o.as_str_name())
                    .unwrap_or(""),
                "LEAK_REPORT_OUTCOME_",
            );
            let ids = |list: &[v1::Uuid]| list.iter().map(|u| u.id.clone()).collect::<Vec<_>>();
            let (submitted, cancelled) = (
                ids(&reply.submitted_task_ids),
                ids(&reply.cancelled_task_ids),
            );
            let rule = reply.rule_id.as_ref().map(|u| u.id.clone());
            match output {
                OutputFormat::Json => print_json(&serde_json::json!({
                    "outcome": outcome,
                    "event": reply.event.as_ref().map(event_json),
                    "rule_id": rule,
                    "submitted_task_ids": submitted,
                    "cancelled_task_ids": cancelled,
                }))?,
                OutputFormat::Table => {
                    let event = reply
                        .event
                        .as_ref()
                        .and_then(|e| e.id.as_ref())
                        .map(|u| format!(" (leak event {})", u.id))
                        .unwrap_or_default();
                    crate::outln!("{outcome}{event}");
                    if let Some(rule) = rule {
                        crate::outln!("event rule {rule} acted");
                    }
                    for task in &submitted {
                        crate::outln!("submitted task {task}");
                    }
                    for task in &cancelled {
                        crate::outln!("cancelled task {task} (the leak response goes first)");
                    }
                }
            }
            Ok(())
        }
        LeakCommand::List(args) => {
            let reply = flow
                .extensions()
                .list_leak_events(v1::ListLeakEventsRequest {
                    rack_id: args.rack.map(id),
                    component_id: args.component.map(id),
                    open_only: args.open,
                    pagination: Some(v1::Pagination {
                        offset: args.offset,
                        limit: args.limit,
                    }),
                })
                .await
                .context("list leak events")?
                .into_inner();
            match output {
                OutputFormat::Json => print_json(&serde_json::json!({
                    "total": reply.total,
                    "events": reply.events.iter().map(event_json).collect::<Vec<_>>(),
                }))?,
                OutputFormat::Table => {
                    let mut table = Table::new([
                        "ID",
                        "COMPONENT",
                        "SOURCE",
                        "SEVERITY",
                        "DETECTED",
                        "SEEN",
                        "CLOSED",
                    ]);
                    for e in reply.events.iter().map(event_json) {
                        let cell = |k: &str| e[k].as_str().unwrap_or("-").to_string();
                        table.row([
                            cell("id"),
                            cell("component_id"),
                            cell("source"),
                            cell("severity"),
                            cell("detected_at"),
                            e["observations"].to_string(),
                            cell("closed_at"),
                        ]);
                    }
                    table.print();
                    crate::outln!("{} of {} leak events", reply.events.len(), reply.total);
                }
            }
            Ok(())
        }
    }
}
