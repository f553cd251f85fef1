//! `rackflow audit list`: the audit trail — who did what, when, with what
//! outcome — and the last control of a run for `run get`.

use anyhow::Context;
use clap::Args;
use rackflow_api::v1;
use serde::Serialize;

use crate::client::{self, Flow, ServerAddress};
use crate::output::{OutputFormat, Table, or_dash, print_json, timestamp};

/// Flags of `rackflow audit list`.
#[derive(Debug, Clone, Args)]
pub struct AuditListArgs {
    /// Only the events of this operation run.
    #[arg(long, value_name = "RUN_ID", value_parser = crate::args::parse_uuid)]
    pub run: Option<uuid::Uuid>,
    /// Only events at or after this time: RFC 3339 (`2026-12-01T10:00:00Z`)
    /// or an age (`30m`, `2h`, `7d`).
    #[arg(long, value_name = "TIME|AGE", value_parser = parse_since)]
    pub since: Option<chrono::DateTime<chrono::Utc>>,
    /// Only this caller's events (`rackflow` = the service itself).
    #[arg(long, value_name = "IDENTITY")]
    pub actor: Option<String>,
    /// Only run controls (pause, resume, advance, cancel, gate trips,
    /// automatic advances, a run's end).
    #[arg(long)]
    pub controls: bool,
    /// Most events to show (the newest ones with --newest-first).
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
    /// Newest first.
    #[arg(long)]
    pub newest_first: bool,
}

/// `--since`: a time or an age before now.
fn parse_since(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text.trim()) {
        return Ok(t.with_timezone(&chrono::Utc));
    }
    let age = crate::args::parse_duration(text).map_err(|_| {
        format!("{text:?} is neither an RFC 3339 time nor an age such as 30m, 2h or 7d")
    })?;
    let age = chrono::Duration::from_std(age).map_err(|e| e.to_string())?;
    Ok(chrono::Utc::now() - age)
}

/// One event as printed (JSON).
#[derive(Debug, Clone, Serialize)]
pub struct AuditEventView {
    pub seq: i64,
    pub at: Option<String>,
    pub actor: String,
    pub action: String,
    pub run_id: Option<String>,
    pub subject_ids: Vec<String>,
    pub code: String,
    pub message: String,
    pub summary: String,
}

impl AuditEventView {
    fn from_proto(e: &v1::AuditEvent) -> AuditEventView {
        AuditEventView {
            seq: e.seq,
            at: timestamp(e.at.as_ref()),
            actor: e.actor.clone(),
            action: e.action.clone(),
            run_id: e.run_id.as_ref().map(|u| u.id.clone()),
            subject_ids: e.subject_ids.clone(),
            code: e.code.clone(),
            message: e.message.clone(),
            summary: e.summary.clone(),
        }
    }
}

/// Reads the trail page by page until `limit` events or its end.
async fn fetch(
    flow: &mut Flow,
    mut request: v1::ListAuditEventsRequest,
    limit: usize,
) -> anyhow::Result<Vec<v1::AuditEvent>> {
    let mut events = Vec::new();
    loop {
        request.limit = i32::try_from(limit - events.len())
            .unwrap_or(1000)
            .min(1000);
        let page = flow
            .extensions()
            .list_audit_events(request.clone())
            .await
            .context("list audit events")?
            .into_inner();
        events.extend(page.events);
        if page.next_after_seq == 0 || events.len() >= limit {
            return Ok(events);
        }
        request.after_seq = page.next_after_seq;
    }
}

/// `rackflow audit list`.
pub async fn run_list(
    server: &ServerAddress,
    args: &AuditListArgs,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    let request = v1::ListAuditEventsRequest {
        run_id: args.run.map(|id| v1::Uuid { id: id.to_string() }),
        since: args.since.map(|t| prost_types::Timestamp {
            seconds: t.timestamp(),
            nanos: 0,
        }),
        actor: args.actor.clone().unwrap_or_default(),
        controls_only: args.controls,
        newest_first: args.newest_first,
        ..Default::default()
    };
    let limit = usize::try_from(args.limit.max(1)).unwrap_or(100);
    let events: Vec<AuditEventView> = fetch(&mut flow, request, limit)
        .await?
        .iter()
        .map(AuditEventView::from_proto)
        .collect();
    match output {
        OutputFormat::Json => print_json(&events)?,
        OutputFormat::Table => {
            let mut table = Table::new(["SEQ", "AT", "ACTOR", "ACTION", "CODE", "RUN", "MESSAGE"]);
            for e in &events {
                table.row([
                    e.seq.to_string(),
                    or_dash(e.at.as_deref().unwrap_or("")),
                    e.actor.clone(),
                    e.action.clone(),
                    e.code.clone(),
                    or_dash(e.run_id.as_deref().unwrap_or("")),
                    or_dash(&e.message),
                ]);
            }
            table.print();
            crate::outln!("{} events", events.len());
        }
    }
    Ok(())
}

/// The run's most recent control, as `run get` shows it: `ACTION by ACTOR
/// at TIME`. `None` when the trail has none (or cannot be read: `run get`
/// still shows the run).
pub async fn last_control(flow: &mut Flow, run_id: &str) -> Option<AuditEventView> {
    let page = flow
        .extensions()
        .list_audit_events(v1::ListAuditEventsRequest {
            run_id: Some(v1::Uuid {
                id: run_id.to_string(),
            }),
            controls_only: true,
            newest_first: true,
            limit: 1,
            ..Default::default()
        })
        .await
        .ok()?
        .into_inner();
    page.events.first().map(AuditEventView::from_proto)
}

impl AuditEventView {
    /// `pause by spiffe://… at 2026-…` (the RPC's short name).
    pub fn control_text(&self) -> String {
        let action = self.action.rsplit('/').next().unwrap_or(&self.action);
        format!(
            "{action} by {} at {}",
            self.actor,
            self.at.as_deref().unwrap_or("-")
        )
    }
}
