//! A task's report (the `Task.report` JSON, version 1) and how the CLI shows
//! it: a stages/steps table for `task get` and `task watch` on a terminal,
//! and change lines for `task watch` into a pipe or file.
//!
//! Report shape (spec flow-core §5.4): `{version: 1, stages: [{number,
//! status, steps: [{component_type, status, total_components,
//! completed_components, failed_components, started_at, finished_at,
//! error}], started_at, finished_at, error}], error}`. Reading is lenient:
//! every key is optional and `null` counts as absent, so a report written
//! by a newer server still shows.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::output::{Table, or_dash};

/// Task report, version 1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Report {
    pub version: Option<serde_json::Value>,
    pub stages: Vec<StageReport>,
    pub error: Option<String>,
}

/// One stage: its steps run in parallel.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StageReport {
    pub number: Option<i64>,
    pub status: Option<String>,
    pub steps: Vec<StepReport>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub error: Option<String>,
}

/// One component type's step within a stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StepReport {
    pub component_type: Option<String>,
    pub status: Option<String>,
    pub total_components: Option<i64>,
    pub completed_components: Option<i64>,
    pub failed_components: Option<i64>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub error: Option<String>,
    /// Per component of a firmware step.
    pub components: Vec<ComponentOutcome>,
    /// What a running step waits for (e.g. components still in service).
    pub waiting_for: Option<String>,
}

/// What a firmware step did to one component.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ComponentOutcome {
    pub component: Option<String>,
    pub status: Option<String>,
    pub expected_version: Option<String>,
    pub found_version: Option<String>,
    pub job_id: Option<String>,
    pub error: Option<String>,
}

fn text(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or("")
}

impl Report {
    /// Parses the report JSON; an empty string is no report.
    pub fn parse(json: &str) -> Result<Option<Report>, serde_json::Error> {
        if json.trim().is_empty() {
            return Ok(None);
        }
        serde_json::from_str(json).map(Some)
    }

    /// From an already parsed JSON value (`None` if it is not a report).
    pub fn from_value(value: &serde_json::Value) -> Option<Report> {
        serde_json::from_value(value.clone()).ok()
    }

    /// `2/3 stages completed`, `stage 2 failed`, `stage 1 running`, … for
    /// the PROGRESS column of `task list --with-report`.
    pub fn summary(&self) -> String {
        let total = self.stages.len();
        if total == 0 {
            return "no stages".to_string();
        }
        let completed = self
            .stages
            .iter()
            .filter(|s| matches!(text(&s.status), "completed" | "skipped"))
            .count();
        if let Some((i, stage)) = self
            .stages
            .iter()
            .enumerate()
            .find(|(_, s)| matches!(text(&s.status), "failed" | "running"))
        {
            return format!(
                "stage {} {} ({completed}/{total} completed)",
                stage_number(i, stage),
                text(&stage.status)
            );
        }
        format!("{completed}/{total} stages completed")
    }
}

/// A stage's number, or its position (from 1) when the report has none.
fn stage_number(index: usize, stage: &StageReport) -> String {
    stage
        .number
        .map(|n| n.to_string())
        .unwrap_or_else(|| (index + 1).to_string())
}

fn count(value: Option<i64>) -> String {
    value.unwrap_or(0).to_string()
}

/// The stages and steps as a table, one row per step (the stage number and
/// status only on a stage's first row), then stage and report errors:
///
/// ```text
/// STAGE  STAGE STATUS  COMPONENT TYPE  STATUS     COMPLETED  FAILED  TOTAL  ERROR
/// 1      completed     PowerShelf      completed  8          0       8
/// 2      running       NVSwitch        running    3          0       9
/// 3      pending       Compute         pending    0          0       18
/// ```
pub fn render_report(report: &Report) -> String {
    if report.stages.is_empty() {
        let mut out = "(the report has no stages)\n".to_string();
        if let Some(e) = report.error.as_deref().filter(|e| !e.is_empty()) {
            out.push_str(&format!("error: {e}\n"));
        }
        return out;
    }
    let mut table = Table::new([
        "STAGE",
        "STAGE STATUS",
        "COMPONENT TYPE",
        "STATUS",
        "COMPLETED",
        "FAILED",
        "TOTAL",
        "ERROR",
    ]);
    let mut stage_errors = Vec::new();
    for (i, stage) in report.stages.iter().enumerate() {
        let number = stage_number(i, stage);
        let status = or_dash(text(&stage.status));
        if let Some(e) = stage.error.as_deref().filter(|e| !e.is_empty()) {
            stage_errors.push(format!("stage {number}: {e}"));
        }
        if stage.steps.is_empty() {
            table.row([number, status, "-".to_string()]);
            continue;
        }
        for (j, step) in stage.steps.iter().enumerate() {
            let (n, s) = if j == 0 {
                (number.clone(), status.clone())
            } else {
                (String::new(), String::new())
            };
            table.row([
                n,
                s,
                or_dash(text(&step.component_type)),
                or_dash(text(&step.status)),
                count(step.completed_components),
                count(step.failed_components),
                count(step.total_components),
                match step.waiting_for.as_deref().filter(|w| !w.is_empty()) {
                    Some(waiting) if text(&step.error).is_empty() => format!("waiting: {waiting}"),
                    _ => text(&step.error).to_string(),
                },
            ]);
        }
    }
    let mut out = table.render();
    let outcomes: Vec<(&StepReport, &ComponentOutcome)> = report
        .stages
        .iter()
        .flat_map(|stage| &stage.steps)
        .flat_map(|step| step.components.iter().map(move |c| (step, c)))
        .collect();
    if !outcomes.is_empty() {
        let mut components = Table::new([
            "COMPONENT TYPE",
            "COMPONENT",
            "STATUS",
            "EXPECTED",
            "FOUND",
            "JOB",
            "ERROR",
        ]);
        for (step, c) in outcomes {
            components.row([
                or_dash(text(&step.component_type)),
                or_dash(text(&c.component)),
                or_dash(text(&c.status)),
                or_dash(text(&c.expected_version)),
                or_dash(text(&c.found_version)),
                or_dash(text(&c.job_id)),
                text(&c.error).to_string(),
            ]);
        }
        out.push('\n');
        out.push_str(&components.render());
    }
    for line in stage_errors {
        out.push_str(&line);
        out.push('\n');
    }
    if let Some(e) = report.error.as_deref().filter(|e| !e.is_empty()) {
        out.push_str(&format!("error: {e}\n"));
    }
    out
}

/// What `task watch` prints when stdout is not a terminal: one line per
/// change since the previous poll (stage status, step progress, report
/// error, then task status), nothing when nothing changed. The first poll
/// prints the whole state.
#[derive(Debug, Clone, Default)]
pub struct ChangeLog {
    task: Option<String>,
    stages: HashMap<String, String>,
    steps: HashMap<(String, String), String>,
    error: Option<String>,
}

impl ChangeLog {
    pub fn new() -> ChangeLog {
        ChangeLog::default()
    }

    /// The lines that differ from the last call.
    pub fn changes(&mut self, status: &str, message: &str, report: Option<&Report>) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(report) = report {
            self.report_changes(report, &mut lines);
        }
        // The task's own line last: a finished task is the consequence of
        // its last stage finishing.
        let task_line = if message.is_empty() {
            format!("task {status}")
        } else {
            format!("task {status}: {message}")
        };
        if self.task.as_deref() != Some(task_line.as_str()) {
            lines.push(task_line.clone());
            self.task = Some(task_line);
        }
        lines
    }

    fn report_changes(&mut self, report: &Report, lines: &mut Vec<String>) {
        for (i, stage) in report.stages.iter().enumerate() {
            let number = stage_number(i, stage);
            let mut stage_line = format!("stage {number} {}", or_dash(text(&stage.status)));
            if let Some(e) = stage.error.as_deref().filter(|e| !e.is_empty()) {
                stage_line.push_str(&format!(": {e}"));
            }
            if self.stages.get(&number) != Some(&stage_line) {
                lines.push(stage_line.clone());
                self.stages.insert(number.clone(), stage_line);
            }
            for (j, step) in stage.steps.iter().enumerate() {
                let ty = or_dash(text(&step.component_type));
                let mut step_line = format!(
                    "stage {number} {ty} {} ({}/{} completed, {} failed)",
                    or_dash(text(&step.status)),
                    count(step.completed_components),
                    count(step.total_components),
                    count(step.failed_components),
                );
                if let Some(e) = step.error.as_deref().filter(|e| !e.is_empty()) {
                    step_line.push_str(&format!(": {e}"));
                }
                let key = (number.clone(), format!("{j}:{ty}"));
                if self.steps.get(&key) != Some(&step_line) {
                    lines.push(step_line.clone());
                    self.steps.insert(key, step_line);
                }
            }
        }
        let error = report.error.clone().filter(|e| !e.is_empty());
        if error.is_some() && error != self.error {
            lines.push(format!("error: {}", error.as_deref().unwrap_or("")));
        }
        self.error = error;
    }
}
