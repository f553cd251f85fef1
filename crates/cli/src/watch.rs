//! `rackflow run watch ID`: the live view of an operation run, fed by the
//! server-streaming `WatchOperationRun`.
//!
//! Every message of the stream (the run summary with its stats, sent now and
//! on every change) triggers one `ListOperationRunTargets` over the current
//! and completed phases, which gives the per-phase counts the stats do not
//! have (in flight, blocked). Requests stay bounded: at most one listing per
//! [`MIN_REFRESH_GAP`], and without a stream message at most one per
//! [`REFRESH_INTERVAL`] while the run is pending or running (claims and
//! submissions change no stats). Sizes of phases that have not started come
//! from planning the run's own configuration again (`PreviewOperationRun`,
//! once); when that plan does not match what the run materialized, they are
//! shown as unknown.
//!
//! Output: on a terminal the view is redrawn in place; otherwise one line per
//! change, prefixed with the UTC time; `-o json` prints the final state as
//! one JSON document. [`Watcher`] is shared with `rackflow demo`.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Context;
use rackflow_api::v1;
use serde::Serialize;
use tokio::time::Instant;

use crate::client::{self, Flow};
use crate::output::{
    OutputFormat, Table, output_width, print_json, wrap_command, wrap_lines, write_out,
};
use crate::run::RunSummaryView;

/// Exit code of `run watch --exit-on-pause` when the run paused (1 is a run
/// that ended badly, 2 is a usage error).
pub const EXIT_PAUSED: u8 = 3;
/// Least time between two target listings.
pub const MIN_REFRESH_GAP: Duration = Duration::from_millis(250);
/// Target listing without a stream message while the run is active.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(1);
/// Consecutive failed reconnects tolerated (server restart, network blip),
/// one second apart.
const RECONNECT_ATTEMPTS: u32 = 15;
/// Width of a progress bar, in characters.
pub const BAR_WIDTH: usize = 20;
/// Longest message shown in the terminal view.
const MESSAGE_WIDTH: usize = 120;

/// Progress of one phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PhaseProgress {
    pub phase_index: i32,
    /// Planned targets; `None` for a phase that has not started and whose
    /// size is unknown.
    pub selected: Option<i32>,
    /// Whether the phase's targets are materialized (current or earlier).
    pub started: bool,
    /// Completed (and skipped) targets.
    pub completed: i32,
    /// Failed and terminated targets.
    pub failed: i32,
    /// Claimed and submitted targets.
    pub in_flight: i32,
    /// Targets waiting on a rack conflict.
    pub blocked: i32,
    pub pending: i32,
}

impl PhaseProgress {
    fn done(&self) -> bool {
        self.started
            && self
                .selected
                .is_some_and(|s| self.completed + self.failed >= s)
    }

    /// `3 completed, 1 failed, 4 in flight, 0 blocked of 20`.
    pub fn counts_text(&self) -> String {
        format!(
            "{} completed, {} failed, {} in flight, {} blocked of {}",
            self.completed,
            self.failed,
            self.in_flight,
            self.blocked,
            self.selected
                .map_or_else(|| "?".to_string(), |s| s.to_string())
        )
    }
}

/// A target that failed (or was terminated).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailedTarget {
    pub rack_external_id: String,
    pub phase_index: i32,
    /// `failed` or `terminated`.
    pub status: String,
    pub message: String,
}

/// Why a run is paused and the command that continues it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PauseHelp {
    /// `phase_gate`, `operator_paused`, `safety_gate`, `conflict_retry_timeout`.
    pub reason: String,
    pub why: String,
    /// The exact command that continues the run.
    pub command: String,
    /// The exact command that stops it, where stopping is the likely
    /// alternative (a tripped safety gate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancel: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One state of a watched run (also the JSON of `run watch -o json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshot {
    #[serde(flatten)]
    pub run: RunSummaryView,
    pub current_phase: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<i32>,
    pub phases: Vec<PhaseProgress>,
    pub failed_targets: Vec<FailedTarget>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause: Option<PauseHelp>,
}

impl Snapshot {
    pub fn is_terminal(&self) -> bool {
        is_terminal_status(&self.run.status)
    }

    pub fn is_paused(&self) -> bool {
        self.run.status == "paused"
    }

    /// Pending or running: the dispatcher is working on it.
    pub fn is_active(&self) -> bool {
        matches!(self.run.status.as_str(), "pending" | "running")
    }

    /// `run 6d5e… completed_with_failures: operation run completed with failed targets`.
    pub fn status_line(&self) -> String {
        status_line(&self.run)
    }
}

/// Completed, completed with failures, failed or cancelled.
pub fn is_terminal_status(status: &str) -> bool {
    matches!(
        status,
        "completed" | "completed_with_failures" | "failed" | "cancelled"
    )
}

/// `run <id> <status> (<reason>): <message>`; the reason only when it is
/// not `none`, the message only when there is one.
pub fn status_line(run: &RunSummaryView) -> String {
    let mut line = format!("run {} {}", run.id, run.status);
    if !run.reason.is_empty() && run.reason != "none" && run.reason != "unknown" {
        line.push_str(&format!(" ({})", run.reason));
    }
    if !run.status_message.is_empty() {
        line.push_str(&format!(": {}", run.status_message));
    }
    line
}

/// The `rackflow` prefix of a suggested command: `rackflow`, or
/// `rackflow --server HOST:PORT` when the server is not the default one.
pub fn command_prefix(server: Option<&str>) -> String {
    match server {
        Some(s) if s != crate::DEFAULT_SERVER => {
            format!("rackflow --server {}", s.trim_start_matches("http://"))
        }
        _ => "rackflow".to_string(),
    }
}

/// Why the run is paused and what continues it; `None` unless paused.
/// `prefix` is the command prefix ([`command_prefix`]).
pub fn pause_help(run: &RunSummaryView, current_phase: i32, prefix: &str) -> Option<PauseHelp> {
    if run.status != "paused" {
        return None;
    }
    let id = &run.id;
    let resume = format!("{prefix} run resume {id}");
    let message = if run.status_message.is_empty() {
        "no message".to_string()
    } else {
        run.status_message.clone()
    };
    let help = match run.reason.as_str() {
        "phase_gate" => PauseHelp {
            reason: run.reason.clone(),
            why: format!(
                "phase {current_phase} is complete; phase {} waits at the phase gate for an operator",
                current_phase + 1
            ),
            command: format!(
                "{prefix} run advance {id} --expected-phase {}",
                current_phase + 1
            ),
            cancel: None,
            note: None,
        },
        "operator_paused" => PauseHelp {
            reason: run.reason.clone(),
            why: "paused by an operator (targets already submitted keep running)".to_string(),
            command: resume,
            cancel: None,
            note: None,
        },
        "safety_gate" => PauseHelp {
            reason: run.reason.clone(),
            why: message,
            command: resume,
            cancel: Some(format!("{prefix} run cancel {id}")),
            note: Some(
                "failed targets keep counting: the gate trips again on the next pass unless \
                 its cause is fixed, or cancel the run"
                    .to_string(),
            ),
        },
        "conflict_retry_timeout" => PauseHelp {
            reason: run.reason.clone(),
            why: message,
            command: resume,
            cancel: None,
            note: Some(
                "finish or cancel the task that holds the rack first, or the run pauses again"
                    .to_string(),
            ),
        },
        _ => PauseHelp {
            reason: run.reason.clone(),
            why: message,
            command: resume,
            cancel: None,
            note: None,
        },
    };
    Some(help)
}

/// The per-phase counts from the materialized targets (`targets`: current
/// and completed phases), with `total_phases` phases in all. `planned`
/// gives every phase's size; it is used for phases that have not started,
/// and only when it agrees with the sizes of those that have.
pub fn phase_progress(
    targets: &[v1::OperationRunTarget],
    total_phases: i32,
    current_phase: i32,
    planned: Option<&[i32]>,
) -> Vec<PhaseProgress> {
    let count = total_phases.max(current_phase + 1).max(0);
    let mut phases: Vec<PhaseProgress> = (0..count)
        .map(|i| PhaseProgress {
            phase_index: i,
            selected: None,
            started: i <= current_phase,
            completed: 0,
            failed: 0,
            in_flight: 0,
            blocked: 0,
            pending: 0,
        })
        .collect();
    for t in targets {
        let Some(p) = usize::try_from(t.phase_index)
            .ok()
            .and_then(|i| phases.get_mut(i))
        else {
            continue;
        };
        p.started = true;
        *p.selected.get_or_insert(0) += 1;
        use v1::OperationRunTargetStatus as S;
        match S::try_from(t.status).unwrap_or(S::Unknown) {
            S::Completed | S::Skipped => p.completed += 1,
            S::Failed | S::Terminated => p.failed += 1,
            S::Claimed | S::Submitted => p.in_flight += 1,
            S::Blocked => p.blocked += 1,
            S::Pending | S::Unknown => p.pending += 1,
        }
    }
    let planned = planned.filter(|sizes| {
        i32::try_from(sizes.len()).is_ok_and(|n| n == count)
            && phases
                .iter()
                .zip(sizes.iter())
                .all(|(p, s)| !p.started || p.selected.is_none_or(|n| n == *s))
    });
    for (i, p) in phases.iter_mut().enumerate() {
        if p.selected.is_none() {
            if let Some(size) = planned.and_then(|sizes| sizes.get(i)) {
                p.selected = Some(*size);
                p.pending = *size;
            } else if p.started {
                p.selected = Some(0);
            }
        }
    }
    phases
}

/// Failed and terminated targets, in phase then sequence order.
pub fn failed_targets(targets: &[v1::OperationRunTarget]) -> Vec<FailedTarget> {
    use v1::OperationRunTargetStatus as S;
    let mut failed: Vec<&v1::OperationRunTarget> = targets
        .iter()
        .filter(|t| matches!(S::try_from(t.status), Ok(S::Failed | S::Terminated)))
        .collect();
    failed.sort_by_key(|t| (t.phase_index, t.sequence_index));
    failed
        .iter()
        .map(|t| FailedTarget {
            rack_external_id: if t.rack_external_id.is_empty() {
                t.rack_id.as_ref().map(|u| u.id.clone()).unwrap_or_default()
            } else {
                t.rack_external_id.clone()
            },
            phase_index: t.phase_index,
            status: crate::output::enum_name(
                S::try_from(t.status).unwrap_or(S::Unknown).as_str_name(),
                "OPERATION_RUN_TARGET_STATUS_",
            ),
            message: t.message.clone(),
        })
        .collect()
}

/// The run's current phase as the message says (its stats), if it says.
fn message_phase(run: &v1::OperationRun) -> Option<i32> {
    run.stats
        .as_ref()
        .and_then(|s| s.current_phase_stats.as_ref())
        .map(|s| s.phase_index)
}

/// Builds the snapshot of `run` from its materialized targets.
///
/// The targets are listed after the message arrived, so they may be newer
/// than it (e.g. an advance in between): the current phase is the one the
/// message's stats name, and targets of later phases are left out until
/// the message that announces them arrives. Without stats it is the highest
/// phase listed.
pub fn build_snapshot(
    run: &v1::OperationRun,
    targets: &[v1::OperationRunTarget],
    planned: Option<&[i32]>,
    prefix: &str,
) -> Snapshot {
    let summary = RunSummaryView::from_proto(&run.summary.clone().unwrap_or_default());
    let current_phase = message_phase(run)
        .or_else(|| targets.iter().map(|t| t.phase_index).max())
        .unwrap_or(0)
        .max(0);
    let targets: Vec<v1::OperationRunTarget> = targets
        .iter()
        .filter(|t| t.phase_index <= current_phase)
        .cloned()
        .collect();
    let phases = phase_progress(&targets, summary.total_phases, current_phase, planned);
    let pause = pause_help(&summary, current_phase, prefix);
    Snapshot {
        current_phase,
        max_concurrent: run
            .configuration
            .as_ref()
            .and_then(|c| c.options.as_ref())
            .map(|o| o.max_concurrent_targets)
            .filter(|n| *n > 0),
        phases,
        failed_targets: failed_targets(&targets),
        pause,
        run: summary,
    }
}

/// `[######x>>>~........]`: completed `#`, failed `x`, in flight `>`,
/// blocked `~`, pending `.`; cumulative rounding so the parts always fill
/// the bar exactly.
pub fn bar(p: &PhaseProgress, width: usize) -> String {
    let Some(selected) = p.selected.filter(|s| *s > 0) else {
        return format!("[{}]", ".".repeat(width));
    };
    let total = usize::try_from(selected).unwrap_or(1);
    let parts = [
        ('#', p.completed),
        ('x', p.failed),
        ('>', p.in_flight),
        ('~', p.blocked),
    ];
    let mut out = String::from("[");
    let mut cumulative = 0usize;
    let mut drawn = 0usize;
    for (c, n) in parts {
        cumulative += usize::try_from(n.max(0)).unwrap_or(0);
        let end = (cumulative.min(total) * width + total / 2) / total;
        // A part with targets shows at least one character.
        let end = if n > 0 {
            end.max(drawn + 1).min(width)
        } else {
            end
        };
        if end > drawn {
            out.extend(std::iter::repeat_n(c, end - drawn));
            drawn = end;
        }
    }
    out.extend(std::iter::repeat_n('.', width.saturating_sub(drawn)));
    out.push(']');
    out
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// The terminal view of a snapshot.
pub fn render_frame(s: &Snapshot) -> String {
    let r = &s.run;
    let mut out = format!("Run {} ({})", r.name, r.id);
    if let Some(n) = s.max_concurrent {
        out.push_str(&format!("  ·  {n} at a time"));
    }
    out.push('\n');
    let mut state = r.status.clone();
    if r.reason != "none" && !r.reason.is_empty() {
        state.push_str(&format!(" ({})", r.reason));
    }
    out.push_str(&format!("Status:   {state}\n"));
    out.push_str(&format!(
        "Message:  {}\n\n",
        if r.status_message.is_empty() {
            "-".to_string()
        } else {
            shorten(&r.status_message, MESSAGE_WIDTH)
        }
    ));
    let mut table = Table::new([
        "PHASE",
        "PROGRESS",
        "SELECTED",
        "COMPLETED",
        "FAILED",
        "IN FLIGHT",
        "BLOCKED",
    ]);
    for p in &s.phases {
        let phase = if p.phase_index == s.current_phase && !s.is_terminal() {
            format!("{}*", p.phase_index)
        } else {
            p.phase_index.to_string()
        };
        let selected = p
            .selected
            .map_or_else(|| "?".to_string(), |n| n.to_string());
        if p.started {
            table.row([
                phase,
                bar(p, BAR_WIDTH),
                selected,
                p.completed.to_string(),
                p.failed.to_string(),
                p.in_flight.to_string(),
                p.blocked.to_string(),
            ]);
        } else {
            table.row([
                phase,
                bar(p, BAR_WIDTH),
                selected,
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]);
        }
    }
    out.push_str(&table.render());
    out.push_str("# completed  x failed  > in flight  ~ blocked  . pending  (* current phase)\n");
    if !s.failed_targets.is_empty() {
        out.push('\n');
        for f in &s.failed_targets {
            out.push_str(&format!(
                "{} {} (phase {}): {}\n",
                f.status,
                f.rack_external_id,
                f.phase_index,
                shorten(&f.message, MESSAGE_WIDTH)
            ));
        }
    }
    if let Some(help) = &s.pause {
        out.push('\n');
        out.push_str(&format!("Paused:   {}\n", help.why));
        out.push_str(&format!("Continue: {}\n", help.command));
        if let Some(cancel) = &help.cancel {
            out.push_str(&format!("Cancel:   {cancel}\n"));
        }
        if let Some(note) = &help.note {
            out.push_str(&format!("Note:     {note}\n"));
        }
    }
    out
}

/// Labels of the frame's lines that hold a command to copy.
const COMMAND_LABELS: [&str; 2] = ["Continue: ", "Cancel:   "];

/// [`render_frame`] for a terminal `width` columns wide: long lines wrapped
/// at blanks (the frame is drawn without the terminal's auto-wrap, which
/// would otherwise cut them), a command wrapped with shell continuations
/// so that it still pastes as one command.
pub fn render_frame_at(s: &Snapshot, width: usize) -> String {
    let mut out = String::new();
    for line in render_frame(s).lines() {
        let command = COMMAND_LABELS
            .iter()
            .find_map(|label| Some((*label, line.strip_prefix(label)?)));
        match command {
            Some((label, command)) => out.push_str(&wrap_command(label, command, width)),
            None => out.push_str(&wrap_lines(line, width)),
        }
        out.push('\n');
    }
    out
}

/// The lines that describe what changed from `prev` to `next` (everything
/// for the first snapshot), without timestamps.
pub fn change_lines(prev: Option<&Snapshot>, next: &Snapshot) -> Vec<String> {
    let mut lines = Vec::new();
    if prev.is_none() {
        let sizes: Vec<String> = next
            .phases
            .iter()
            .map(|p| {
                p.selected
                    .map_or_else(|| "?".to_string(), |n| n.to_string())
            })
            .collect();
        let mut line = format!(
            "watching run {} ({}): {} phase{} ({} targets)",
            next.run.name,
            next.run.id,
            next.phases.len(),
            if next.phases.len() == 1 { "" } else { "s" },
            sizes.join(", ")
        );
        if let Some(n) = next.max_concurrent {
            line.push_str(&format!(", {n} at a time"));
        }
        lines.push(line);
    }
    for f in &next.failed_targets {
        if prev.is_none_or(|p| !p.failed_targets.contains(f)) {
            lines.push(format!(
                "{} {} (phase {}): {}",
                f.status, f.rack_external_id, f.phase_index, f.message
            ));
        }
    }
    for p in next.phases.iter().filter(|p| p.started) {
        let before = prev.and_then(|s| s.phases.iter().find(|q| q.phase_index == p.phase_index));
        if before != Some(p) {
            let mut line = format!("phase {}: {}", p.phase_index, p.counts_text());
            if p.done() && before.is_none_or(|b| !b.done()) {
                line.push_str(" (phase done)");
            }
            lines.push(line);
        }
    }
    let state = |s: &Snapshot| {
        (
            s.run.status.clone(),
            s.run.reason.clone(),
            s.run.status_message.clone(),
        )
    };
    if prev.is_none_or(|p| state(p) != state(next)) {
        // The first line named the run: no id here.
        let line = status_line(&next.run);
        lines.push(
            line.replacen(&format!("run {} ", next.run.id), "run ", 1)
                .to_string(),
        );
    }
    if let Some(help) = &next.pause
        && prev.is_none_or(|p| p.pause.as_ref() != Some(help))
    {
        lines.push(format!("paused: {}", help.why));
        lines.push(format!("continue with: {}", help.command));
        if let Some(cancel) = &help.cancel {
            lines.push(format!("or cancel with: {cancel}"));
        }
        if let Some(note) = &help.note {
            lines.push(format!("note: {note}"));
        }
    }
    lines
}

/// Where the watcher writes.
#[derive(Debug)]
enum Display {
    /// Redraw in place; `lines` of the last frame are on screen.
    Tty { frame: String, lines: usize },
    /// One timestamped line per change.
    Plain,
    /// Nothing while watching (`-o json`).
    Quiet,
}

/// `ESC [ ?7l`: no automatic wrap, so a long line never takes two rows and
/// the frame height stays exact; `ESC [ ?7h` turns wrapping back on.
const NO_WRAP: &str = "\x1b[?7l";
const WRAP: &str = "\x1b[?7h";

/// Where run updates come from.
enum Source {
    Stream(Box<tonic::Streaming<v1::OperationRun>>),
    /// The server has no `WatchOperationRun`: poll `GetOperationRun`.
    Poll {
        next: Instant,
    },
}

/// Follows one run and draws it. Shared by `run watch` and `demo`.
pub struct Watcher {
    unary: Flow,
    streaming: Flow,
    id: uuid::Uuid,
    prefix: String,
    display: Display,
    /// Phase sizes from planning the run's configuration again: `None` =
    /// not asked yet, `Some(None)` = asked, not available.
    planned: Option<Option<Vec<i32>>>,
    last: Option<Snapshot>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("id", &self.id)
            .field("display", &self.display)
            .finish_non_exhaustive()
    }
}

impl Watcher {
    /// Connects to `server`. `prefix` starts every suggested command
    /// ([`command_prefix`]).
    pub async fn connect(
        server: &crate::client::ServerAddress,
        id: uuid::Uuid,
        output: OutputFormat,
        prefix: String,
    ) -> anyhow::Result<Watcher> {
        let unary = client::connect(server).await?;
        let streaming = client::connect_streaming(server).await?;
        let display = match output {
            OutputFormat::Json => Display::Quiet,
            OutputFormat::Table if std::io::stdout().is_terminal() => Display::Tty {
                frame: String::new(),
                lines: 0,
            },
            OutputFormat::Table => Display::Plain,
        };
        Ok(Watcher {
            unary,
            streaming,
            id,
            prefix,
            display,
            planned: None,
            last: None,
        })
    }

    /// Whether the view is redrawn in place.
    pub fn is_tty(&self) -> bool {
        matches!(self.display, Display::Tty { .. })
    }

    /// Prints a line that stays: above the frame on a terminal, timestamped
    /// otherwise, nowhere with `-o json`.
    pub fn log(&mut self, line: &str) {
        match &mut self.display {
            Display::Tty { frame, lines } => {
                let mut out = String::new();
                if *lines > 0 {
                    out.push_str(&format!("\x1b[{lines}F\x1b[J"));
                }
                out.push_str(&wrap_lines(line, output_width()));
                out.push('\n');
                out.push_str(NO_WRAP);
                out.push_str(frame);
                out.push_str(WRAP);
                *lines = frame.lines().count();
                write_out(&out);
            }
            Display::Plain => write_out(&format!("{} {line}\n", now())),
            Display::Quiet => {}
        }
    }

    /// Leaves the frame where it is: the next output starts below it.
    pub fn detach(&mut self) {
        if let Display::Tty { frame, lines } = &mut self.display {
            frame.clear();
            *lines = 0;
        }
    }

    fn show(&mut self, snapshot: &Snapshot) {
        match &mut self.display {
            Display::Tty { frame, lines } => {
                // Wrapped, not cut: the terminal draws the frame without
                // auto-wrap, and a printed command must keep its id.
                let next = render_frame_at(snapshot, output_width());
                if next != *frame {
                    let mut out = String::new();
                    if *lines > 0 {
                        out.push_str(&format!("\x1b[{lines}F\x1b[J"));
                    }
                    out.push_str(NO_WRAP);
                    out.push_str(&next);
                    out.push_str(WRAP);
                    *lines = next.lines().count();
                    *frame = next;
                    write_out(&out);
                }
            }
            Display::Plain => {
                let time = now();
                let mut out = String::new();
                for line in change_lines(self.last.as_ref(), snapshot) {
                    out.push_str(&format!("{time} {line}\n"));
                }
                if !out.is_empty() {
                    write_out(&out);
                }
            }
            Display::Quiet => {}
        }
    }

    async fn open(&mut self) -> anyhow::Result<Source> {
        let request = v1::WatchOperationRunRequest {
            id: Some(v1::Uuid {
                id: self.id.to_string(),
            }),
        };
        match self
            .streaming
            .extensions()
            .watch_operation_run(request)
            .await
        {
            Ok(response) => Ok(Source::Stream(Box::new(response.into_inner()))),
            Err(status) if status.code() == tonic::Code::Unimplemented => Ok(Source::Poll {
                next: Instant::now(),
            }),
            Err(status) => {
                Err(anyhow::Error::new(status).context(format!("watch run {}", self.id)))
            }
        }
    }

    async fn next(&mut self, source: &mut Source) -> anyhow::Result<Option<v1::OperationRun>> {
        match source {
            Source::Stream(stream) => Ok(stream
                .message()
                .await
                .with_context(|| format!("watch run {}", self.id))?),
            Source::Poll { next } => {
                tokio::time::sleep_until(*next).await;
                *next = Instant::now() + REFRESH_INTERVAL;
                let run = self
                    .unary
                    .get_operation_run(v1::GetOperationRunRequest {
                        id: Some(v1::Uuid {
                            id: self.id.to_string(),
                        }),
                        include_stats: true,
                    })
                    .await
                    .with_context(|| format!("get run {}", self.id))?
                    .into_inner()
                    .operation_run;
                Ok(run)
            }
        }
    }

    /// Every target of the current and completed phases.
    async fn targets(&mut self) -> anyhow::Result<Vec<v1::OperationRunTarget>> {
        list_targets(&mut self.unary, self.id).await
    }

    /// Phase sizes from planning the run's configuration again, asked once.
    async fn planned(&mut self, run: &v1::OperationRun) -> Option<Vec<i32>> {
        if let Some(planned) = &self.planned {
            return planned.clone();
        }
        let summary = run.summary.clone().unwrap_or_default();
        let request = v1::CreateOperationRunRequest {
            name: summary.name,
            description: summary.description,
            configuration: run.configuration.clone(),
        };
        let sizes = match self.unary.extensions().preview_operation_run(request).await {
            Ok(preview) => Some(preview.into_inner().phase_sizes),
            Err(status) => {
                tracing::debug!(error = %status, "planning the run again failed");
                None
            }
        };
        self.planned = Some(sizes.clone());
        sizes
    }

    async fn snapshot(&mut self, run: &v1::OperationRun) -> anyhow::Result<Snapshot> {
        let targets = self.targets().await?;
        let total_phases = run.summary.as_ref().map_or(0, |s| s.total_phases);
        let current = message_phase(run)
            .or_else(|| targets.iter().map(|t| t.phase_index).max())
            .unwrap_or(0);
        let planned = if current + 1 < total_phases {
            self.planned(run).await
        } else {
            None
        };
        Ok(build_snapshot(
            run,
            &targets,
            planned.as_deref(),
            &self.prefix,
        ))
    }

    /// Follows the run until it is terminal, or — with `stop_on_pause` —
    /// paused; returns the last snapshot (already drawn).
    pub async fn follow(&mut self, stop_on_pause: bool) -> anyhow::Result<Snapshot> {
        let mut source = self.open().await?;
        let mut latest: Option<v1::OperationRun> = None;
        let mut failures = 0u32;
        let mut last_fetch: Option<Instant> = None;
        loop {
            let active = self.last.as_ref().is_none_or(Snapshot::is_active);
            let tick = last_fetch.map_or_else(Instant::now, |t| t + REFRESH_INTERVAL);
            let event = tokio::select! {
                message = self.next(&mut source) => Some(message),
                () = tokio::time::sleep_until(tick), if active && latest.is_some() => None,
            };
            match event {
                None => {}
                Some(Ok(Some(run))) => {
                    failures = 0;
                    latest = Some(run);
                }
                Some(result) => {
                    // The stream ended before the run did (server restart)
                    // or broke: reconnect, a second apart, a few times.
                    let mut err = match result {
                        Err(err) if !client::transient(&err) => return Err(err),
                        Err(err) => err,
                        Ok(_) => anyhow::anyhow!(
                            "the server ended the watch of run {} before the run ended",
                            self.id
                        ),
                    };
                    loop {
                        failures += 1;
                        if failures > RECONNECT_ATTEMPTS {
                            return Err(err);
                        }
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        match self.open().await {
                            Ok(s) => {
                                source = s;
                                break;
                            }
                            Err(e) if client::transient(&e) => err = e,
                            Err(e) => return Err(e),
                        }
                    }
                    continue;
                }
            }
            let Some(run) = latest.clone() else {
                continue;
            };
            if let Some(t) = last_fetch {
                let since = t.elapsed();
                if since < MIN_REFRESH_GAP {
                    tokio::time::sleep(MIN_REFRESH_GAP - since).await;
                }
            }
            last_fetch = Some(Instant::now());
            let snapshot = match self.snapshot(&run).await {
                Ok(s) => s,
                Err(err) if client::transient(&err) && failures < RECONNECT_ATTEMPTS => {
                    failures += 1;
                    continue;
                }
                Err(err) => return Err(err),
            };
            self.show(&snapshot);
            self.last = Some(snapshot.clone());
            if snapshot.is_terminal() || (stop_on_pause && snapshot.is_paused()) {
                return Ok(snapshot);
            }
        }
    }
}

/// Lists every target of the current and completed phases, page by page.
pub async fn list_targets(
    flow: &mut Flow,
    id: uuid::Uuid,
) -> anyhow::Result<Vec<v1::OperationRunTarget>> {
    const PAGE: i32 = 500;
    let mut targets = Vec::new();
    loop {
        let response = flow
            .list_operation_run_targets(v1::ListOperationRunTargetsRequest {
                operation_run_id: Some(v1::Uuid { id: id.to_string() }),
                status: 0,
                pagination: Some(v1::Pagination {
                    offset: i32::try_from(targets.len()).unwrap_or(i32::MAX),
                    limit: PAGE,
                }),
                phase_scope: v1::OperationRunTargetPhaseScope::CurrentAndCompletedPhases as i32,
            })
            .await
            .with_context(|| format!("list targets of run {id}"))?
            .into_inner();
        let got = response.targets.len();
        targets.extend(response.targets);
        if got == 0 || targets.len() >= usize::try_from(response.total).unwrap_or(0) {
            return Ok(targets);
        }
    }
}

fn now() -> String {
    chrono::Utc::now().format("%H:%M:%S").to_string()
}

/// `rackflow run watch ID`.
pub async fn run_watch(
    server: &crate::client::ServerAddress,
    id: uuid::Uuid,
    exit_on_pause: bool,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut watcher = Watcher::connect(server, id, output, server.command_prefix()).await?;
    let snapshot = watcher.follow(exit_on_pause).await?;
    match output {
        OutputFormat::Json => print_json(&snapshot)?,
        OutputFormat::Table => {
            if snapshot.is_terminal() {
                if watcher.is_tty() {
                    crate::outln!();
                }
                crate::outln!("{}", snapshot.status_line());
            }
        }
    }
    match snapshot.run.status.as_str() {
        "completed" => Ok(()),
        "paused" => Err(client::Exit(EXIT_PAUSED).into()),
        _ => Err(client::SilentFailure.into()),
    }
}
