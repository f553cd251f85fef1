//! The console's HTML: every page built with `maud` (escaped by default,
//! checked at compile time), one layout, no script needed to read a page —
//! `console.js` only adds the live stream and the controls.

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};
use rackflow_domain::inventory::Rack;
use rackflow_domain::report::Report;
use rackflow_domain::run::{
    GateScope, OperationRun, OperationRunTarget, Page, PhaseScope, RunReason, RunStats, RunStatus,
    SafetyGate, TargetStatus,
};
use rackflow_domain::task::Task;
use serde::Deserialize;
use uuid::Uuid;

use rackflow_domain::audit::AuditEvent;
use rackflow_domain::component::ComponentType;
use rackflow_domain::schedule::TaskSchedule;
use rackflow_domain::task::{TaskStatus, TaskType};
use rackflow_engine::EngineError;
use rackflow_engine::store::{AuditFilter, RackFilter};
use std::collections::{BTreeMap, HashMap};

use super::{Console, PageError};

/// Events a run page's timeline shows (newest first).
const TIMELINE_EVENTS: i64 = 50;

/// Everything a run page shows, read at one moment.
pub(super) struct RunView {
    pub(super) run: OperationRun,
    stats: Option<RunStats>,
    /// Every materialised target with its rack's external id, by sequence.
    targets: Vec<(OperationRunTarget, String)>,
    /// The run's audit trail, newest first.
    timeline: Vec<AuditEvent>,
    now: DateTime<Utc>,
}

impl RunView {
    pub(super) async fn read(console: &Console, id: Uuid) -> Result<RunView, PageError> {
        let (run, _) = console.runs.get(id, false).await?;
        let page = console
            .runs
            .list_targets(
                id,
                None,
                PhaseScope::All,
                Page {
                    offset: 0,
                    limit: 0,
                },
            )
            .await?;
        let mut targets = page.targets;
        targets.sort_by_key(|(t, _)| t.sequence_index);
        // The gates' stats from the targets read (the current and completed
        // phases), as GetOperationRun computes them: one query less.
        let mut stats = RunStats::default();
        for (t, _) in targets
            .iter()
            .filter(|(t, _)| t.phase_index <= run.current_phase_index)
        {
            stats.add(t.phase_index, t.status);
        }
        let stats = Some(stats);
        let timeline = console
            .audit
            .list(
                &AuditFilter {
                    run_id: Some(id),
                    newest_first: true,
                    ..Default::default()
                },
                TIMELINE_EVENTS,
            )
            .await?;
        Ok(RunView {
            run,
            stats,
            targets,
            timeline,
            now: Utc::now(),
        })
    }

    /// Per phase: (done, total) — done is any finished target.
    fn phases(&self) -> Vec<(usize, usize)> {
        let count = usize::try_from(self.run.total_phases.max(0)).unwrap_or(0);
        let mut phases = vec![(0, 0); count];
        for (t, _) in &self.targets {
            let Ok(i) = usize::try_from(t.phase_index) else {
                continue;
            };
            if let Some(p) = phases.get_mut(i) {
                p.1 += 1;
                if t.status.is_terminal() {
                    p.0 += 1;
                }
            }
        }
        phases
    }

    fn finished_targets(&self) -> usize {
        self.targets
            .iter()
            .filter(|(t, _)| t.status.is_terminal())
            .count()
    }
}

fn layout(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · rackflow" }
                link rel="stylesheet" href="/assets/console.css";
                script src="/assets/console.js" defer {}
            }
            body {
                a class="skip" href="#main" { "Skip to content" }
                header class="top" {
                    nav aria-label="Main" {
                        a class="brand" href="/runs" { "rackflow" }
                        a href="/fleet" { "Fleet" }
                        a href="/runs" { "Runs" }
                        a href="/tasks" { "Tasks" }
                        a href="/schedules" { "Schedules" }
                    }
                }
                main id="main" { (body) }
            }
        }
    }
}

pub(super) fn error_page(status: StatusCode, message: &str) -> Markup {
    layout(
        status.canonical_reason().unwrap_or("Error"),
        html! {
            h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) }
            p role="alert" { (message) }
            p { a href="/runs" { "Back to the runs" } }
        },
    )
}

fn status_badge(status: RunStatus) -> Markup {
    html! { span class={ "badge run-" (status.as_str()) } { (status.as_str().replace('_', " ")) } }
}

fn progress(done: usize, total: usize, label: &str) -> Markup {
    let pct = (done * 100).checked_div(total).unwrap_or(0);
    html! {
        div class="progress" role="progressbar" aria-label=(label)
            aria-valuemin="0" aria-valuemax=(total) aria-valuenow=(done) {
            div class="fill" style={ "width:" (pct) "%" } {}
            span class="progress-text" { (done) " / " (total) }
        }
    }
}

fn duration_text(seconds: i64) -> String {
    let s = seconds.max(0);
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, min, sec) => format!("{min}m {sec:02}s"),
        (h, min, _) => format!("{h}h {min:02}m"),
    }
}

fn time_tag(at: DateTime<Utc>) -> Markup {
    // The script shows it in the viewer's zone; without it, UTC.
    html! { time datetime=(at.to_rfc3339()) { (at.format("%Y-%m-%d %H:%M:%S UTC")) } }
}

pub(super) fn runs_page(rows: &[(OperationRun, Option<RunStats>)], total: i64) -> Markup {
    layout(
        "Runs",
        html! {
            h1 { "Operation runs" }
            p class="muted" { (total) " run(s), newest first" }
            @if rows.is_empty() {
                p { "No operation runs yet. Create one with " code { "rackflow run create" } "." }
            } @else {
                table class="runs" {
                    caption class="sr-only" { "Operation runs" }
                    thead { (header_row(&["Name", "Status", "Phase", "Progress", "Created"])) }
                    tbody {
                        @for (run, stats) in rows {
                            @let selected = stats.map_or(0, |s| s.cumulative.selected_targets);
                            @let c = stats.map(|s| s.cumulative.outcome_counts).unwrap_or_default();
                            @let done = c.completed + c.failed + c.terminated + c.skipped;
                            tr {
                                td { a href={ "/runs/" (run.id) } { (run.name) } }
                                td { (status_badge(run.status)) }
                                td { "phase " (run.current_phase_index + 1) " / " (run.total_phases) }
                                td { (progress(usize::try_from(done).unwrap_or(0), usize::try_from(selected).unwrap_or(0), "targets finished in the phases reached")) }
                                td { (time_tag(run.created_at)) }
                            }
                        }
                    }
                }
            }
        },
    )
}

pub(super) fn run_page(view: &RunView) -> Markup {
    let run = &view.run;
    layout(
        &run.name,
        html! {
            p class="crumbs" { a href="/runs" { "Runs" } " / " (run.name) }
            h1 { (run.name) }
            @if !run.description.is_empty() { p class="muted" { (run.description) } }
            div id="live" data-run=(run.id) data-events={ "/runs/" (run.id) "/events" } aria-live="polite" {
                (run_live(view))
            }
            div id="control-error" role="alert" class="error" hidden {}
        },
    )
}

/// The part of a run page that changes; pushed whole on every change.
pub(super) fn run_live(view: &RunView) -> Markup {
    let run = &view.run;
    let phases = view.phases();
    let total_targets = view.targets.len();
    let finished = view.finished_targets();
    let elapsed = run
        .started_at
        .map(|s| (run.finished_at.unwrap_or(view.now) - s).num_seconds());
    // A straight-line estimate from the pace so far.
    let eta = match (elapsed, run.status.is_terminal()) {
        (Some(e), false) if finished > 0 && total_targets > finished => {
            let per = e as f64 / finished as f64;
            Some((per * (total_targets - finished) as f64) as i64)
        }
        _ => None,
    };
    let next_phase = run.current_phase_index + 1;
    html! {
        div class="summary" data-status=(run.status.as_str()) data-phase=(run.current_phase_index) {
            (status_badge(run.status))
            span class="phase-label" { "Phase " strong { (run.current_phase_index + 1) } " of " (run.total_phases) }
            @if let Some(e) = elapsed { span { "Elapsed " (duration_text(e)) } }
            @if let Some(e) = eta { span { "ETA ~" (duration_text(e)) } }
        }
        @if run.reason != RunReason::None || !run.status_message.is_empty() {
            p class="reason" {
                @if run.reason != RunReason::None { strong { (reason_text(run.reason)) } }
                @if !run.status_message.is_empty() { " " span class="status-message" { (run.status_message) } }
            }
        }
        section aria-labelledby="controls-h" class="controls" {
            h2 id="controls-h" class="sr-only" { "Controls" }
            @let paused = run.status == RunStatus::Paused;
            @let active = matches!(run.status, RunStatus::Pending | RunStatus::Running | RunStatus::Paused);
            @let can_advance = paused && next_phase < run.total_phases;
            @let can_pause = active && !paused;
            @if next_phase < run.total_phases {
                button type="button" data-action="advance" data-expected-phase=(next_phase)
                    data-confirm={ "Advance to phase " (next_phase + 1) " of " (run.total_phases) "?" }
                    disabled[!can_advance] { "Advance to phase " (next_phase + 1) }
            }
            button type="button" data-action="resume" data-confirm="Resume this run?"
                disabled[!paused] { "Resume" }
            button type="button" data-action="pause" data-confirm="Pause this run?"
                disabled[!can_pause] { "Pause" }
            button type="button" class="danger" data-action="cancel" data-confirm="Cancel this run? Its running tasks are cancelled."
                disabled[!active] { "Cancel" }
        }
        section aria-labelledby="phases-h" {
            h2 id="phases-h" { "Phases" }
            ol class="phases" {
                @for (i, (done, total)) in phases.iter().enumerate() {
                    @let current = i32::try_from(i).ok() == Some(run.current_phase_index);
                    li class={ "phase" @if current { " current" } } {
                        span class="phase-name" { "Phase " (i + 1) @if current { " (current)" } }
                        (progress(*done, *total, &format!("phase {} targets finished", i + 1)))
                    }
                }
            }
        }
        section aria-labelledby="gates-h" {
            h2 id="gates-h" { "Safety gates" }
            @let gates = &run.configuration.options.safety_policy.gates;
            @if gates.is_empty() {
                p class="muted" { "No safety gates." }
            } @else {
                ul class="gates" {
                    @for gate in gates { li { (gate_text(gate, view.stats.as_ref())) } }
                }
            }
        }
        section aria-labelledby="racks-h" {
            h2 id="racks-h" { "Racks" }
            ul class="legend" aria-label="Legend" {
                @for s in TargetStatus::ALL {
                    li { span class={ "swatch t-" (s.as_str()) } {} (s.as_str()) }
                }
            }
            @for (i, _) in phases.iter().enumerate() {
                h3 class="grid-phase" { "Phase " (i + 1) }
                ul class="grid" {
                    @for (t, rack) in view.targets.iter().filter(|(t, _)| usize::try_from(t.phase_index).ok() == Some(i)) {
                        @let label = if rack.is_empty() { t.rack_id.to_string() } else { rack.clone() };
                        @let title = if t.message.is_empty() { format!("{label}: {}", t.status.as_str()) } else { format!("{label}: {} — {}", t.status.as_str(), t.message) };
                        li class={ "cell t-" (t.status.as_str()) } data-rack=(label) data-status=(t.status.as_str()) title=(title) {
                            @if let Some(task) = t.task_id {
                                a href={ "/tasks/" (task) } aria-label=(title) { (label) }
                            } @else {
                                span aria-label=(title) { (label) }
                            }
                        }
                    }
                }
            }
        }
        section aria-labelledby="timeline-h" {
            h2 id="timeline-h" { "Timeline" }
            @let entries = view.timeline_entries();
            @if entries.is_empty() {
                p class="muted" { "No events yet." }
            } @else {
                ol class="timeline" reversed {
                    @for e in &entries {
                        li class={ "event" @if e.alarm { " refused" } } {
                            (time_tag(e.at)) " "
                            strong { (e.title) }
                            @if let Some(actor) = &e.actor { " by " span class="actor" { (actor) } }
                            @if !e.message.is_empty() { ": " (e.message) }
                        }
                    }
                }
            }
        }
    }
}

/// One line of a run's timeline.
struct TimelineEntry {
    at: DateTime<Utc>,
    title: String,
    actor: Option<String>,
    message: String,
    /// A refusal or a failure (shown as such).
    alarm: bool,
}

impl RunView {
    /// The audit trail (controls with who sent them and refusals, gate
    /// trips, phase changes, the end) and the failed or terminated racks,
    /// newest first.
    fn timeline_entries(&self) -> Vec<TimelineEntry> {
        let mut entries: Vec<TimelineEntry> = self
            .timeline
            .iter()
            .map(|e| TimelineEntry {
                at: e.at,
                title: if e.code == "OK" {
                    e.action.clone()
                } else {
                    format!("{} refused ({})", e.action, e.code)
                },
                actor: Some(e.actor.clone()),
                message: e.message.clone(),
                alarm: e.code != "OK",
            })
            .collect();
        for (t, rack) in &self.targets {
            if matches!(t.status, TargetStatus::Failed | TargetStatus::Terminated) {
                let label = if rack.is_empty() {
                    t.rack_id.to_string()
                } else {
                    rack.clone()
                };
                entries.push(TimelineEntry {
                    at: t.updated_at,
                    title: format!("rack {label} {}", t.status.as_str()),
                    actor: None,
                    message: t.message.clone(),
                    alarm: true,
                });
            }
        }
        entries.sort_by_key(|e| std::cmp::Reverse(e.at));
        entries.truncate(usize::try_from(TIMELINE_EVENTS).unwrap_or(50));
        entries
    }
}

fn reason_text(reason: RunReason) -> &'static str {
    match reason {
        RunReason::None => "",
        RunReason::OperatorPaused => "Paused by an operator.",
        RunReason::PhaseGate => "Waiting at the phase gate: advance to go on.",
        RunReason::SafetyGate => "Stopped by a safety gate.",
        RunReason::ConflictRetryTimeout => {
            "Stopped: a conflicting task outlasted the retry timeout."
        }
    }
}

fn gate_text(gate: &SafetyGate, stats: Option<&RunStats>) -> Markup {
    let scope_stats = |scope: GateScope| {
        stats.map(|s| match scope {
            GateScope::CurrentPhase => s.current,
            GateScope::CumulativeRun => s.cumulative,
        })
    };
    match *gate {
        SafetyGate::FailureRate {
            scope,
            failure_threshold_percent,
        } => {
            let s = scope_stats(scope).unwrap_or_default();
            let (failed, selected) = (s.outcome_counts.failed, s.selected_targets);
            let pct = if selected > 0 {
                failed * 100 / selected
            } else {
                0
            };
            html! {
                "Failure rate (" (scope.as_str().replace('_', " ")) "): "
                strong { (pct) "%" } " (" (failed) "/" (selected) " failed) — trips at "
                (failure_threshold_percent) "%"
            }
        }
        SafetyGate::FailureCount {
            scope,
            failure_threshold_count,
        } => {
            let s = scope_stats(scope).unwrap_or_default();
            html! {
                "Failure count (" (scope.as_str().replace('_', " ")) "): "
                strong { (s.outcome_counts.failed) } " failed — trips at "
                (failure_threshold_count)
            }
        }
    }
}

pub(super) fn task_page(task: &Task, rack: Option<&Rack>) -> Markup {
    let report: Option<Report> = task
        .report
        .as_ref()
        .and_then(|r| Report::deserialize(r).ok());
    let rack_label = rack.map_or_else(
        || task.rack_id.to_string(),
        |r| r.external_id.clone().unwrap_or_else(|| r.name.clone()),
    );
    layout(
        &format!("Task {}", task.id),
        html! {
            p class="crumbs" { a href="/runs" { "Runs" } " / task " (task.id) }
            h1 { (task.operation()) " on " (rack_label) }
            dl class="facts" {
                dt { "Status" } dd { span class={ "badge task-" (task.status.as_str()) } data-status=(task.status.as_str()) { (task.status.as_str()) } }
                dt { "Message" } dd class="task-message" { (task.message) }
                @if !task.description.is_empty() { dt { "Description" } dd { (task.description) } }
                dt { "Created" } dd { (time_tag(task.created_at)) }
                @if let Some(s) = task.started_at { dt { "Started" } dd { (time_tag(s)) } }
                @if let Some(f) = task.finished_at { dt { "Finished" } dd { (time_tag(f)) } }
            }
            h2 { "Report" }
            @match &report {
                None => p class="muted" { "No report yet." },
                Some(report) => {
                    @if let Some(e) = &report.error { p class="error" role="alert" { (e) } }
                    ol class="stages" {
                        @for stage in &report.stages {
                            li class={ "stage r-" (stage.status.as_str()) } {
                                h3 { "Stage " (stage.number) " — " (stage.status.as_str()) }
                                @if let Some(e) = &stage.error { p class="error" { (e) } }
                                table {
                                    thead { (header_row(&["Component type", "Status", "Done / failed / total", "Error"])) }
                                    tbody {
                                        @for step in &stage.steps {
                                            tr class={ "r-" (step.status.as_str()) } {
                                                td { (step.component_type) }
                                                td { (step.status.as_str()) }
                                                td { (step.completed_components) " / " (step.failed_components) " / " (step.total_components) }
                                                td { (step.error.as_deref().unwrap_or("")) }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// Rack labels (external id, else name) by id.
pub(super) async fn rack_labels(
    console: &Console,
    ids: impl Iterator<Item = Uuid>,
) -> Result<HashMap<Uuid, String>, PageError> {
    let mut wanted: Vec<Uuid> = ids.collect();
    wanted.sort();
    wanted.dedup();
    let racks = console
        .store
        .racks_get_many(&wanted)
        .await
        .map_err(EngineError::from)?;
    Ok(racks
        .into_iter()
        .map(|rack| (rack.id, rack.external_id.unwrap_or(rack.name)))
        .collect())
}

/// The fleet as the fleet page shows it.
pub(super) struct FleetView {
    racks: Vec<Rack>,
    /// NVLink domain id → its name (or external id).
    domains: HashMap<Uuid, String>,
    /// Component type → firmware version → how many components.
    versions: BTreeMap<ComponentType, BTreeMap<String, usize>>,
    models: Vec<String>,
    datacenters: Vec<String>,
    filter: (Option<String>, Option<String>, Option<String>),
}

impl FleetView {
    pub(super) async fn read(
        console: &Console,
        model: &Option<String>,
        datacenter: &Option<String>,
        domain: &Option<String>,
    ) -> Result<FleetView, PageError> {
        let blank = |v: &Option<String>| {
            v.as_deref()
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
        };
        let (model, datacenter, domain) = (blank(model), blank(datacenter), blank(domain));
        let domain_id = match &domain {
            Some(text) => Some(Uuid::parse_str(text).map_err(|_| {
                PageError(
                    StatusCode::BAD_REQUEST,
                    format!("domain {text:?} is not a UUID"),
                )
            })?),
            None => None,
        };
        let (all, _) = console
            .store
            .rack_list(
                &RackFilter::default(),
                Page {
                    offset: 0,
                    limit: 0,
                },
            )
            .await
            .map_err(EngineError::from)?;
        let mut models: Vec<String> = all.iter().filter_map(|r| r.model.clone()).collect();
        models.sort();
        models.dedup();
        let mut datacenters: Vec<String> = all
            .iter()
            .map(|r| r.location.datacenter.clone())
            .filter(|d| !d.is_empty())
            .collect();
        datacenters.sort();
        datacenters.dedup();
        let racks: Vec<Rack> = all
            .into_iter()
            .filter(|r| model.as_ref().is_none_or(|m| r.model.as_ref() == Some(m)))
            .filter(|r| {
                datacenter
                    .as_ref()
                    .is_none_or(|d| r.location.datacenter == *d)
            })
            .filter(|r| domain_id.is_none_or(|d| r.nvl_domain_id == Some(d)))
            .collect();
        let mut domain_ids: Vec<Uuid> = racks.iter().filter_map(|r| r.nvl_domain_id).collect();
        domain_ids.sort();
        domain_ids.dedup();
        let domains = console
            .store
            .nvl_domains_get_many(&domain_ids)
            .await
            .map_err(EngineError::from)?
            .into_iter()
            .map(|d| {
                let label = d
                    .name
                    .clone()
                    .or_else(|| d.external_id.clone())
                    .unwrap_or_else(|| d.id.to_string());
                (d.id, label)
            })
            .collect();
        let ids: Vec<Uuid> = racks.iter().map(|r| r.id).collect();
        let components = console
            .store
            .components_of_racks(&ids)
            .await
            .map_err(EngineError::from)?;
        let mut versions: BTreeMap<ComponentType, BTreeMap<String, usize>> = BTreeMap::new();
        for c in &components {
            let version = if c.firmware_version.is_empty() {
                "(unknown)".to_string()
            } else {
                c.firmware_version.clone()
            };
            *versions
                .entry(c.component_type)
                .or_default()
                .entry(version)
                .or_default() += 1;
        }
        Ok(FleetView {
            racks,
            domains,
            versions,
            models,
            datacenters,
            filter: (model, datacenter, domain),
        })
    }
}

pub(super) fn fleet_page(view: &FleetView) -> Markup {
    let (model, datacenter, domain) = &view.filter;
    layout(
        "Fleet",
        html! {
            h1 { "Fleet" }
            form class="filters" method="get" action="/fleet" {
                label { "Model "
                    select name="model" {
                        option value="" { "any" }
                        @for m in &view.models { option value=(m) selected[model.as_ref() == Some(m)] { (m) } }
                    }
                }
                label { "Datacenter "
                    select name="datacenter" {
                        option value="" { "any" }
                        @for d in &view.datacenters { option value=(d) selected[datacenter.as_ref() == Some(d)] { (d) } }
                    }
                }
                @if let Some(d) = domain { input type="hidden" name="domain" value=(d); }
                button type="submit" { "Filter" }
                @if model.is_some() || datacenter.is_some() || domain.is_some() { " " a href="/fleet" { "clear" } }
            }
            p class="muted" { (view.racks.len()) " rack(s)" }
            section aria-labelledby="fw-h" {
                h2 id="fw-h" { "Firmware versions" }
                @for (ctype, versions) in &view.versions {
                    @let total: usize = versions.values().sum();
                    h3 { (ctype) " " span class="muted" { "(" (total) ")" } }
                    ul class="versions" {
                        @for (version, n) in versions {
                            li {
                                span class="version" { (version) }
                                (progress(*n, total, &format!("{ctype} at {version}")))
                            }
                        }
                    }
                }
            }
            section aria-labelledby="racks-h" {
                h2 id="racks-h" { "Racks" }
                table class="racks" {
                    thead { (header_row(&["Rack", "Model", "Location", "NVLink domain", "Lifecycle", "Tasks"])) }
                    tbody {
                        @for r in &view.racks {
                            @let label = r.external_id.clone().unwrap_or_else(|| r.name.clone());
                            tr {
                                td { (label) }
                                td { (r.model.as_deref().unwrap_or("")) }
                                td { (r.location.datacenter) " " (r.location.room) " " (r.location.position) }
                                td {
                                    @if let Some(d) = r.nvl_domain_id {
                                        a href={ "/fleet?domain=" (d) } { (view.domains.get(&d).cloned().unwrap_or_else(|| d.to_string())) }
                                    }
                                }
                                td { (r.lifecycle.status.as_str()) }
                                td { a href={ "/tasks?rack=" (r.id) } { "tasks" } }
                            }
                        }
                    }
                }
            }
        },
    )
}

pub(super) fn tasks_page(
    tasks: &[Task],
    total: i64,
    racks: &HashMap<Uuid, String>,
    rack: &Option<String>,
    status: Option<TaskStatus>,
    task_type: Option<TaskType>,
) -> Markup {
    layout(
        "Tasks",
        html! {
            h1 { "Tasks" }
            form class="filters" method="get" action="/tasks" {
                label { "Rack " input type="text" name="rack" value=(rack.clone().unwrap_or_default()) placeholder="r-0001 or a UUID"; }
                label { "Status "
                    select name="status" {
                        option value="" { "any" }
                        @for s in TaskStatus::ALL { option value=(s.as_str()) selected[status == Some(*s)] { (s.as_str()) } }
                    }
                }
                label { "Type "
                    select name="type" {
                        option value="" { "any" }
                        @for t in TaskType::ALL { option value=(t.as_str()) selected[task_type == Some(*t)] { (t.as_str()) } }
                    }
                }
                button type="submit" { "Filter" }
            }
            p class="muted" { (tasks.len()) " shown of " (total) ", newest first" }
            table class="tasks" {
                thead { (header_row(&["Task", "Operation", "Rack", "Status", "Message", "Created"])) }
                tbody {
                    @for t in tasks {
                        tr {
                            td { a href={ "/tasks/" (t.id) } { (t.id.to_string().get(..8).unwrap_or_default()) } }
                            td { (t.operation()) }
                            td { (racks.get(&t.rack_id).cloned().unwrap_or_else(|| t.rack_id.to_string())) }
                            td { span class={ "badge task-" (t.status.as_str()) } { (t.status.as_str()) } }
                            td { (t.message) }
                            td { (time_tag(t.created_at)) }
                        }
                    }
                }
            }
        },
    )
}

pub(super) fn schedules_page(rows: &[(TaskSchedule, Vec<DateTime<Utc>>)], total: i64) -> Markup {
    layout(
        "Schedules",
        html! {
            h1 { "Task schedules" }
            p class="muted" { (total) " schedule(s); times in your time zone" }
            div id="control-error" role="alert" class="error" hidden {}
            p id="control-status" role="status" {}
            table class="schedules" {
                thead { tr {
                    (header_cells(&["Name", "Spec", "State", "Next fire times", "Last fired", "Skipped"]))
                    th scope="col" { span class="sr-only" { "Controls" } }
                } }
                tbody {
                    @for (s, next) in rows {
                        tr data-schedule=(s.id) {
                            td { (s.name) }
                            td { code { (s.spec.spec) } @if !s.spec.timezone.is_empty() { " (" (s.spec.timezone) ")" } }
                            td { @if s.enabled { "enabled" } @else { "paused" } }
                            td { @if next.is_empty() { span class="muted" { "—" } } @else { ul class="plain" { @for t in next { li { (time_tag(*t)) } } } } }
                            td { @if let Some(t) = s.last_run_at { (time_tag(t)) } }
                            td title=(s.last_skip_reason) { (s.skipped_count) }
                            td class="controls" {
                                @if s.enabled {
                                    button type="button" data-schedule-action="pause" data-confirm={ "Pause " (s.name) "?" } { "Pause" }
                                } @else {
                                    button type="button" data-schedule-action="resume" data-confirm={ "Resume " (s.name) "?" } disabled[s.is_spent_one_time()] { "Resume" }
                                }
                                button type="button" data-schedule-action="trigger" data-confirm={ "Fire " (s.name) " now on every scope?" } disabled[s.is_spent_one_time()] { "Trigger now" }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// A table's header row, one column header per name.
fn header_row(names: &[&str]) -> Markup {
    html! { tr { (header_cells(names)) } }
}

/// Column header cells, one per name.
fn header_cells(names: &[&str]) -> Markup {
    html! { @for name in names { th scope="col" { (name) } } }
}
