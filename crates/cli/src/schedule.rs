//! `rackflow schedule create|list|get|update|pause|resume|delete|trigger|
//! scope …`: task schedules (when to submit tasks on persistent rack
//! scopes).
//!
//! `get` and `create --preview` show the next fire times, computed here with
//! the same pure functions the server uses (`rackflow_domain::schedule`), so
//! a preview needs no server and writes nothing.

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand, ValueEnum};
use rackflow_api::v1;
use rackflow_domain::schedule::{ScheduleSpec, SpecKind};
use serde::Serialize;

use crate::args::{parse_duration, parse_uuid};
use crate::client;
use crate::ops::SubmitArgs;
use crate::output::{Fields, OutputFormat, Table, or_dash, print_json, timestamp};
use crate::targets::TargetArgs;

/// How many fire times `get` and `create --preview` show.
pub const PREVIEW_RUNS: usize = 5;

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Create a schedule (or, with --preview, only show its next fire times).
    Create(Box<CreateArgs>),
    /// List schedules, oldest first.
    List {
        /// Only schedules with a scope on this rack.
        #[arg(long, value_name = "UUID", value_parser = parse_uuid)]
        rack_id: Option<uuid::Uuid>,
        /// Only enabled schedules.
        #[arg(long)]
        enabled_only: bool,
    },
    /// Show one schedule, its scopes and its next five fire times.
    Get {
        #[arg(value_parser = parse_uuid)]
        id: uuid::Uuid,
    },
    /// Change name, spec, zone, overlap policy or catch-up window.
    Update(UpdateArgs),
    /// Stop firing (tasks already submitted go on).
    Pause {
        #[arg(value_parser = parse_uuid)]
        id: uuid::Uuid,
    },
    /// Fire again; the next run is computed from now.
    Resume {
        #[arg(value_parser = parse_uuid)]
        id: uuid::Uuid,
    },
    /// Delete a schedule and its scopes (its tasks stay).
    Delete {
        #[arg(value_parser = parse_uuid)]
        id: uuid::Uuid,
    },
    /// Fire now on every scope, paused or not; prints the task ids.
    Trigger {
        #[arg(value_parser = parse_uuid)]
        id: uuid::Uuid,
    },
    /// Manage the racks a schedule covers.
    #[command(subcommand)]
    Scope(ScopeCommand),
}

#[derive(Debug, Subcommand)]
pub enum ScopeCommand {
    /// List a schedule's scopes.
    List {
        #[arg(value_parser = parse_uuid)]
        schedule_id: uuid::Uuid,
    },
    /// Merge targets into the scopes (whole rack absorbs filters).
    Add {
        #[arg(value_parser = parse_uuid)]
        schedule_id: uuid::Uuid,
        #[command(flatten)]
        targets: TargetArgs,
    },
    /// Make the scopes exactly these targets.
    Set {
        #[arg(value_parser = parse_uuid)]
        schedule_id: uuid::Uuid,
        #[command(flatten)]
        targets: TargetArgs,
    },
    /// Remove one scope (not the last).
    Remove {
        #[arg(value_parser = parse_uuid)]
        scope_id: uuid::Uuid,
    },
}

/// Schedule kinds on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    Interval,
    Cron,
    OneTime,
}

impl Kind {
    fn domain(self) -> SpecKind {
        match self {
            Kind::Interval => SpecKind::Interval,
            Kind::Cron => SpecKind::Cron,
            Kind::OneTime => SpecKind::OneTime,
        }
    }
}

/// Overlap policies on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Overlap {
    Skip,
    Queue,
}

impl Overlap {
    fn wire(self) -> i32 {
        match self {
            Overlap::Skip => v1::OverlapPolicy::Skip as i32,
            Overlap::Queue => v1::OverlapPolicy::Queue as i32,
        }
    }
}

/// The operation a schedule submits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Operation {
    PowerOn,
    PowerOff,
    PowerReset,
    FirmwareUpgrade,
    BringUp,
}

/// Timing flags shared by `create` and `update`.
#[derive(Debug, Clone, Default, Args)]
pub struct TimingArgs {
    /// Every DURATION (Go syntax: 90s, 15m, 6h).
    #[arg(long, value_name = "DURATION", group = "timing")]
    pub every: Option<String>,
    /// Standard 5-field cron or a descriptor (@daily), in --timezone.
    #[arg(long, value_name = "EXPR", group = "timing")]
    pub cron: Option<String>,
    /// Once, at an RFC 3339 instant (2026-06-07T22:00:00+02:00).
    #[arg(long, value_name = "TIME", group = "timing")]
    pub at: Option<String>,
    /// IANA zone of a cron schedule [default: UTC].
    #[arg(long, value_name = "ZONE")]
    pub timezone: Option<String>,
}

impl TimingArgs {
    fn spec(&self) -> Option<(Kind, String)> {
        if let Some(d) = &self.every {
            return Some((Kind::Interval, d.clone()));
        }
        if let Some(c) = &self.cron {
            return Some((Kind::Cron, c.clone()));
        }
        self.at.as_ref().map(|a| (Kind::OneTime, a.clone()))
    }
}

fn parse_window(text: &str) -> Result<i64, String> {
    let d = parse_duration(text)?;
    i64::try_from(d.as_secs() + u64::from(d.subsec_nanos() > 0))
        .map_err(|_| format!("catch-up window {text:?} is too large"))
}

/// Flags of `schedule create`.
#[derive(Debug, Clone, Args)]
pub struct CreateArgs {
    /// Unique schedule name.
    #[arg(long)]
    pub name: String,
    #[command(flatten)]
    pub timing: TimingArgs,
    /// What each occurrence submits.
    #[arg(long, value_enum)]
    pub operation: Operation,
    /// Forced variant of power off / reset.
    #[arg(long)]
    pub force: bool,
    /// Firmware version (firmware-upgrade).
    #[arg(long, value_name = "VERSION")]
    pub target_version: Option<String>,
    /// Install --target-version on racks of every model the scope spans
    /// (see `firmware upgrade --same-version-for-all-models`).
    #[arg(long, requires = "target_version")]
    pub same_version_for_all_models: bool,
    /// A scope whose previous task is still active: skip it, or queue.
    #[arg(long, value_enum, default_value_t = Overlap::Skip)]
    pub overlap: Overlap,
    /// How late a missed occurrence may still fire, coalesced [default: 0 =
    /// fire once late, replay nothing].
    #[arg(long, value_name = "DURATION", value_parser = parse_window)]
    pub catchup_window: Option<i64>,
    /// Show the next five fire times and create nothing.
    #[arg(long)]
    pub preview: bool,
    #[command(flatten)]
    pub targets: TargetArgs,
    #[command(flatten)]
    pub submit: SubmitArgs,
}

/// Flags of `schedule update`.
#[derive(Debug, Clone, Args)]
pub struct UpdateArgs {
    #[arg(value_parser = parse_uuid)]
    pub id: uuid::Uuid,
    #[arg(long)]
    pub name: Option<String>,
    #[command(flatten)]
    pub timing: TimingArgs,
    #[arg(long, value_enum)]
    pub overlap: Option<Overlap>,
    #[arg(long, value_name = "DURATION", value_parser = parse_window)]
    pub catchup_window: Option<i64>,
}

fn wire_kind(kind: Kind) -> i32 {
    match kind {
        Kind::Interval => v1::ScheduleSpecType::Interval as i32,
        Kind::Cron => v1::ScheduleSpecType::Cron as i32,
        Kind::OneTime => v1::ScheduleSpecType::OneTime as i32,
    }
}

fn window(secs: Option<i64>) -> Option<prost_types::Duration> {
    secs.map(|seconds| prost_types::Duration { seconds, nanos: 0 })
}

/// The fire times a spec would have from now.
pub fn preview(
    kind: Kind,
    spec: &str,
    timezone: &str,
    n: usize,
) -> anyhow::Result<(ScheduleSpec, Vec<DateTime<Utc>>)> {
    let (spec, timing) = ScheduleSpec::normalize(Some(kind.domain()), spec, timezone)?;
    Ok((spec, timing.upcoming(Utc::now(), n)))
}

impl CreateArgs {
    /// The create request of these flags.
    pub fn to_request(&self) -> anyhow::Result<v1::CreateTaskScheduleRequest> {
        let Some((kind, text)) = self.timing.spec() else {
            bail!("no timing: pass --every, --cron or --at");
        };
        let target_spec = Some(self.targets.to_proto()?);
        let s = &self.submit;
        use v1::scheduled_operation::Operation as Op;
        if self.force && !matches!(self.operation, Operation::PowerOff | Operation::PowerReset) {
            bail!("--force applies to power-off and power-reset only");
        }
        let operation = match self.operation {
            Operation::PowerOn => Op::PowerOn(v1::PowerOnRackRequest {
                target_spec,
                description: String::new(),
                queue_options: s.queue_options(),
                rule_id: s.rule_id(),
                override_readiness_check: s.override_readiness_check,
            }),
            Operation::PowerOff => Op::PowerOff(v1::PowerOffRackRequest {
                target_spec,
                forced: self.force,
                description: String::new(),
                queue_options: s.queue_options(),
                rule_id: s.rule_id(),
                override_readiness_check: s.override_readiness_check,
            }),
            Operation::PowerReset => Op::PowerReset(v1::PowerResetRackRequest {
                target_spec,
                forced: self.force,
                description: String::new(),
                queue_options: s.queue_options(),
                rule_id: s.rule_id(),
                override_readiness_check: s.override_readiness_check,
            }),
            Operation::FirmwareUpgrade => Op::UpgradeFirmware(v1::UpgradeFirmwareRequest {
                target_spec,
                target_version: self.target_version.clone(),
                same_version_for_all_models: self.same_version_for_all_models,
                queue_options: s.queue_options(),
                rule_id: s.rule_id(),
                override_readiness_check: s.override_readiness_check,
                ..Default::default()
            }),
            Operation::BringUp => Op::BringUp(v1::BringUpRackRequest {
                target_spec,
                description: String::new(),
                rule_id: s.rule_id(),
                override_readiness_check: s.override_readiness_check,
            }),
        };
        Ok(v1::CreateTaskScheduleRequest {
            schedule: Some(v1::ScheduleConfig {
                name: self.name.clone(),
                spec: Some(v1::ScheduleSpec {
                    r#type: wire_kind(kind),
                    spec: text,
                    timezone: self.timing.timezone.clone().unwrap_or_default(),
                }),
                overlap_policy: self.overlap.wire(),
                catchup_window: window(self.catchup_window),
            }),
            operation: Some(v1::ScheduledOperation {
                operation: Some(operation),
            }),
        })
    }
}

impl UpdateArgs {
    /// The update request: the mask names exactly the flags given.
    pub fn to_request(&self) -> anyhow::Result<v1::UpdateTaskScheduleRequest> {
        let mut paths = Vec::new();
        let mut config = v1::ScheduleConfig::default();
        if let Some(name) = &self.name {
            paths.push("schedule.name".to_string());
            config.name = name.clone();
        }
        match self.timing.spec() {
            Some((kind, text)) => {
                paths.push("schedule.spec".to_string());
                config.spec = Some(v1::ScheduleSpec {
                    r#type: wire_kind(kind),
                    spec: text,
                    timezone: self.timing.timezone.clone().unwrap_or_default(),
                });
            }
            None => {
                if let Some(zone) = &self.timing.timezone {
                    paths.push("schedule.spec.timezone".to_string());
                    config.spec = Some(v1::ScheduleSpec {
                        timezone: zone.clone(),
                        ..Default::default()
                    });
                }
            }
        }
        if let Some(policy) = self.overlap {
            paths.push("schedule.overlap_policy".to_string());
            config.overlap_policy = policy.wire();
        }
        if self.catchup_window.is_some() {
            paths.push("schedule.catchup_window".to_string());
            config.catchup_window = window(self.catchup_window);
        }
        if paths.is_empty() {
            bail!(
                "nothing to update: pass --name, --every/--cron/--at, --timezone, --overlap or --catchup-window"
            );
        }
        Ok(v1::UpdateTaskScheduleRequest {
            id: Some(v1::Uuid {
                id: self.id.to_string(),
            }),
            schedule: Some(config),
            update_mask: Some(prost_types::FieldMask { paths }),
        })
    }
}

// ---- views ---------------------------------------------------------------------

/// JSON of a schedule.
#[derive(Debug, Clone, Serialize)]
pub struct ScheduleView {
    pub id: String,
    pub name: String,
    pub kind: String,
    pub spec: String,
    pub timezone: String,
    pub overlap_policy: String,
    pub enabled: bool,
    pub next_run_at: Option<String>,
    pub last_run_at: Option<String>,
    pub operation_type: String,
    pub description: String,
    pub catchup_window_secs: i64,
    pub skipped_count: i64,
    pub last_skip_reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_runs: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<ScopeView>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScopeView {
    pub id: String,
    pub rack_id: String,
    pub filter: String,
    pub last_task_id: Option<String>,
}

fn kind_name(value: i32) -> String {
    SpecKind::from_wire(value).map_or("unspecified".to_string(), |k| k.as_str().to_string())
}

fn policy_name(value: i32) -> String {
    match v1::OverlapPolicy::try_from(value) {
        Ok(v1::OverlapPolicy::Queue) => "queue".into(),
        _ => "skip".into(),
    }
}

fn uuid_text(u: &Option<v1::Uuid>) -> String {
    u.as_ref().map(|u| u.id.clone()).unwrap_or_default()
}

/// The next `n` fire times of a schedule as the server returned it: its
/// `next_run_at`, then the spec's occurrences after it.
pub fn next_runs(s: &v1::TaskSchedule, n: usize) -> Vec<DateTime<Utc>> {
    if !s.enabled {
        return Vec::new();
    }
    let Some(first) = s
        .next_run_at
        .as_ref()
        .and_then(|t| DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).unwrap_or(0)))
    else {
        return Vec::new();
    };
    let Some(spec) = s.spec.as_ref() else {
        return vec![first];
    };
    let Some(kind) = SpecKind::from_wire(spec.r#type) else {
        return vec![first];
    };
    let stored = ScheduleSpec {
        kind,
        spec: spec.spec.clone(),
        timezone: spec.timezone.clone(),
    };
    let Ok(timing) = stored.timing() else {
        return vec![first];
    };
    let mut out = vec![first];
    while out.len() < n {
        match out.last().and_then(|t| timing.next_after(*t)) {
            Some(next) => out.push(next),
            None => break,
        }
    }
    out
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub fn schedule_view(s: &v1::TaskSchedule) -> ScheduleView {
    let spec = s.spec.clone().unwrap_or_default();
    ScheduleView {
        id: uuid_text(&s.id),
        name: s.name.clone(),
        kind: kind_name(spec.r#type),
        spec: spec.spec,
        timezone: spec.timezone,
        overlap_policy: policy_name(s.overlap_policy),
        enabled: s.enabled,
        next_run_at: timestamp(s.next_run_at.as_ref()),
        last_run_at: timestamp(s.last_run_at.as_ref()),
        operation_type: s.operation_type.clone(),
        description: s.description.clone(),
        catchup_window_secs: s.catchup_window.as_ref().map_or(0, |d| d.seconds),
        skipped_count: s.skipped_count,
        last_skip_reason: s.last_skip_reason.clone(),
        next_runs: None,
        scopes: None,
    }
}

pub fn scope_view(s: &v1::TaskScheduleScope) -> ScopeView {
    use v1::task_schedule_scope::ComponentFilter;
    let filter = match &s.component_filter {
        None => "whole rack".to_string(),
        Some(ComponentFilter::Types(t)) => format!(
            "types: {}",
            t.types
                .iter()
                .map(|v| v1::ComponentType::try_from(*v)
                    .map(|t| t
                        .as_str_name()
                        .trim_start_matches("COMPONENT_TYPE_")
                        .to_lowercase())
                    .unwrap_or_else(|_| v.to_string()))
                .collect::<Vec<_>>()
                .join(",")
        ),
        Some(ComponentFilter::Components(c)) => format!(
            "components: {}",
            c.targets
                .iter()
                .filter_map(|t| match &t.identifier {
                    Some(v1::component_target::Identifier::Id(u)) => Some(u.id.clone()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(",")
        ),
    };
    ScopeView {
        id: uuid_text(&s.id),
        rack_id: uuid_text(&s.rack_id),
        filter,
        last_task_id: s.last_task_id.as_ref().map(|u| u.id.clone()),
    }
}

fn print_schedule(view: &ScheduleView, output: OutputFormat) -> anyhow::Result<()> {
    if output == OutputFormat::Json {
        return print_json(view);
    }
    let mut f = Fields::new();
    f.add("id", &view.id)
        .add("name", &view.name)
        .add(
            "operation",
            format!("{} ({})", view.description, view.operation_type),
        )
        .add("kind", &view.kind)
        .add("spec", &view.spec);
    if !view.timezone.is_empty() {
        f.add("timezone", &view.timezone);
    }
    f.add("overlap", &view.overlap_policy)
        .add("catch-up window", format!("{}s", view.catchup_window_secs))
        .add("enabled", view.enabled.to_string())
        .add(
            "next run",
            view.next_run_at.clone().unwrap_or_else(|| "-".into()),
        )
        .add(
            "last run",
            view.last_run_at.clone().unwrap_or_else(|| "-".into()),
        )
        .add("skipped", view.skipped_count.to_string())
        .add("last skip reason", or_dash(&view.last_skip_reason));
    f.print();
    if let Some(runs) = &view.next_runs {
        crate::outln!();
        crate::outln!("next {} fire times:", runs.len());
        for r in runs {
            crate::outln!("  {r}");
        }
    }
    if let Some(scopes) = &view.scopes {
        crate::outln!();
        print_scopes(scopes);
    }
    Ok(())
}

fn print_scopes(scopes: &[ScopeView]) {
    let mut t = Table::new(["SCOPE", "RACK", "FILTER", "LAST TASK"]);
    for s in scopes {
        t.row([
            s.id.clone(),
            s.rack_id.clone(),
            s.filter.clone(),
            s.last_task_id.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    t.print();
}

fn scopes_out(scopes: &[v1::TaskScheduleScope], output: OutputFormat) -> anyhow::Result<()> {
    let views: Vec<ScopeView> = scopes.iter().map(scope_view).collect();
    match output {
        OutputFormat::Json => print_json(&views),
        OutputFormat::Table => {
            print_scopes(&views);
            Ok(())
        }
    }
}

fn id(u: uuid::Uuid) -> Option<v1::Uuid> {
    Some(v1::Uuid { id: u.to_string() })
}

/// Runs one `schedule` command.
pub async fn run(
    server: &crate::client::ServerAddress,
    command: &ScheduleCommand,
    output: OutputFormat,
) -> anyhow::Result<()> {
    match command {
        ScheduleCommand::Create(args) => {
            if args.preview {
                let Some((kind, text)) = args.timing.spec() else {
                    bail!("no timing: pass --every, --cron or --at");
                };
                let zone = args.timing.timezone.clone().unwrap_or_default();
                let (_, runs) = preview(kind, &text, &zone, PREVIEW_RUNS)?;
                let runs: Vec<String> = runs.into_iter().map(rfc3339).collect();
                match output {
                    OutputFormat::Json => print_json(&serde_json::json!({ "next_runs": runs }))?,
                    OutputFormat::Table => {
                        for r in &runs {
                            crate::outln!("{r}");
                        }
                    }
                }
                return Ok(());
            }
            let request = args.to_request()?;
            let mut flow = client::connect(server).await?;
            let s = flow
                .create_task_schedule(request)
                .await
                .context("create schedule")?
                .into_inner();
            let mut view = schedule_view(&s);
            view.next_runs = Some(
                next_runs(&s, PREVIEW_RUNS)
                    .into_iter()
                    .map(rfc3339)
                    .collect(),
            );
            print_schedule(&view, output)
        }
        ScheduleCommand::List {
            rack_id,
            enabled_only,
        } => {
            let mut flow = client::connect(server).await?;
            let list = flow
                .list_task_schedules(v1::ListTaskSchedulesRequest {
                    rack_id: rack_id.and_then(id),
                    pagination: None,
                    enabled_only: Some(*enabled_only),
                })
                .await
                .context("list schedules")?
                .into_inner();
            let views: Vec<ScheduleView> = list.task_schedules.iter().map(schedule_view).collect();
            match output {
                OutputFormat::Json => print_json(&views),
                OutputFormat::Table => {
                    let mut t = Table::new([
                        "ID",
                        "NAME",
                        "KIND",
                        "SPEC",
                        "OPERATION",
                        "ENABLED",
                        "NEXT RUN",
                        "SKIPPED",
                    ]);
                    for v in &views {
                        t.row([
                            v.id.clone(),
                            v.name.clone(),
                            v.kind.clone(),
                            v.spec.clone(),
                            v.operation_type.clone(),
                            v.enabled.to_string(),
                            v.next_run_at.clone().unwrap_or_else(|| "-".into()),
                            v.skipped_count.to_string(),
                        ]);
                    }
                    t.print();
                    Ok(())
                }
            }
        }
        ScheduleCommand::Get { id: sid } => {
            let mut flow = client::connect(server).await?;
            let s = flow
                .get_task_schedule(v1::GetTaskScheduleRequest { id: id(*sid) })
                .await
                .context("get schedule")?
                .into_inner();
            let scopes = flow
                .list_task_schedule_scopes(v1::ListTaskScheduleScopesRequest {
                    schedule_id: id(*sid),
                })
                .await
                .context("list scopes")?
                .into_inner()
                .scopes;
            let mut view = schedule_view(&s);
            view.next_runs = Some(
                next_runs(&s, PREVIEW_RUNS)
                    .into_iter()
                    .map(rfc3339)
                    .collect(),
            );
            view.scopes = Some(scopes.iter().map(scope_view).collect());
            print_schedule(&view, output)
        }
        ScheduleCommand::Update(args) => {
            let request = args.to_request()?;
            let mut flow = client::connect(server).await?;
            let s = flow
                .update_task_schedule(request)
                .await
                .context("update schedule")?
                .into_inner();
            print_schedule(&schedule_view(&s), output)
        }
        ScheduleCommand::Pause { id: sid } => {
            let mut flow = client::connect(server).await?;
            let s = flow
                .pause_task_schedule(v1::PauseTaskScheduleRequest { id: id(*sid) })
                .await
                .context("pause schedule")?
                .into_inner();
            print_schedule(&schedule_view(&s), output)
        }
        ScheduleCommand::Resume { id: sid } => {
            let mut flow = client::connect(server).await?;
            let s = flow
                .resume_task_schedule(v1::ResumeTaskScheduleRequest { id: id(*sid) })
                .await
                .context("resume schedule")?
                .into_inner();
            print_schedule(&schedule_view(&s), output)
        }
        ScheduleCommand::Delete { id: sid } => {
            let mut flow = client::connect(server).await?;
            flow.delete_task_schedule(v1::DeleteTaskScheduleRequest { id: id(*sid) })
                .await
                .context("delete schedule")?;
            if output == OutputFormat::Json {
                print_json(&serde_json::json!({ "deleted": sid.to_string() }))?;
            } else {
                crate::outln!("deleted {sid}");
            }
            Ok(())
        }
        ScheduleCommand::Trigger { id: sid } => {
            let mut flow = client::connect(server).await?;
            let r = flow
                .trigger_task_schedule(v1::TriggerTaskScheduleRequest { id: id(*sid) })
                .await
                .context("trigger schedule")?
                .into_inner();
            let ids: Vec<String> = r.task_ids.into_iter().map(|u| u.id).collect();
            match output {
                OutputFormat::Json => print_json(&serde_json::json!({ "task_ids": ids })),
                OutputFormat::Table => {
                    for i in &ids {
                        crate::outln!("{i}");
                    }
                    Ok(())
                }
            }
        }
        ScheduleCommand::Scope(scope) => run_scope(server, scope, output).await,
    }
}

async fn run_scope(
    server: &crate::client::ServerAddress,
    command: &ScopeCommand,
    output: OutputFormat,
) -> anyhow::Result<()> {
    match command {
        ScopeCommand::List { schedule_id } => {
            let mut flow = client::connect(server).await?;
            let scopes = flow
                .list_task_schedule_scopes(v1::ListTaskScheduleScopesRequest {
                    schedule_id: id(*schedule_id),
                })
                .await
                .context("list scopes")?
                .into_inner()
                .scopes;
            scopes_out(&scopes, output)
        }
        ScopeCommand::Add {
            schedule_id,
            targets,
        } => {
            let spec = targets.to_proto()?;
            let mut flow = client::connect(server).await?;
            let scopes = flow
                .add_task_schedule_scope(v1::AddTaskScheduleScopeRequest {
                    schedule_id: id(*schedule_id),
                    target_spec: Some(spec),
                })
                .await
                .context("add scope")?
                .into_inner()
                .scopes;
            scopes_out(&scopes, output)
        }
        ScopeCommand::Set {
            schedule_id,
            targets,
        } => {
            let spec = targets.to_proto()?;
            let mut flow = client::connect(server).await?;
            let r = flow
                .update_task_schedule_scope(v1::UpdateTaskScheduleScopeRequest {
                    schedule_id: id(*schedule_id),
                    desired_scope: Some(spec),
                })
                .await
                .context("update scopes")?
                .into_inner();
            if output == OutputFormat::Table {
                crate::outln!(
                    "added {}, removed {}, updated {}",
                    r.added,
                    r.removed,
                    r.updated
                );
            }
            scopes_out(&r.scopes, output)
        }
        ScopeCommand::Remove { scope_id } => {
            let mut flow = client::connect(server).await?;
            flow.remove_task_schedule_scope(v1::RemoveTaskScheduleScopeRequest {
                scope_id: id(*scope_id),
            })
            .await
            .context("remove scope")?;
            if output == OutputFormat::Json {
                print_json(&serde_json::json!({ "removed": scope_id.to_string() }))?;
            } else {
                crate::outln!("removed {scope_id}");
            }
            Ok(())
        }
    }
}
