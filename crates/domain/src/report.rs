//! The task report (`task.report`, version 1, spec flow-core §5.4): per
//! stage and per step status, component counters, timestamps and errors.
//!
//! This module owns the report's JSON shape, its initial form for a rule
//! definition and a task's targets, the transitions the executor makes, and
//! [`Report::first_unfinished_stage`], which a resumed execution starts
//! from. It is plain data: the executor decides when a transition happens
//! and stamps the time.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::rule::RuleDefinition;
use crate::{ComponentType, ComponentsByType};

/// The report schema version this module writes.
pub const REPORT_VERSION: u32 = 1;
/// Longest error text kept in a report (longer ones are cut).
pub const MAX_REPORT_ERROR_CHARS: usize = 512;

/// Status of a stage or a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportStatus {
    Pending,
    Running,
    Completed,
    Failed,
    Skipped,
}

impl ReportStatus {
    /// The report's (and the metrics label's) spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ReportStatus::Pending => "pending",
            ReportStatus::Running => "running",
            ReportStatus::Completed => "completed",
            ReportStatus::Failed => "failed",
            ReportStatus::Skipped => "skipped",
        }
    }

    /// Completed or skipped: nothing left to do.
    pub fn is_done(self) -> bool {
        matches!(self, ReportStatus::Completed | ReportStatus::Skipped)
    }
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub version: u32,
    pub stages: Vec<StageReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One stage: its steps run in parallel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageReport {
    pub number: i32,
    pub status: ReportStatus,
    pub steps: Vec<StepReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One step: one component type within a stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    pub component_type: ComponentType,
    pub status: ReportStatus,
    pub total_components: u32,
    pub completed_components: u32,
    pub failed_components: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Per component of a firmware step (issue 12): what happened to each,
    /// in the order they were first reported. Empty for other steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<ComponentOutcome>,
    /// What the running step waits for before it acts, e.g. components
    /// still in service (the readiness gate); unset once it goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
}

/// What a firmware step did to one component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentOutcome {
    /// The component's external id.
    pub component: String,
    pub status: ComponentStatus,
    /// The version the update was to install, when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_version: Option<String>,
    /// The version read back from the hardware afterwards (or before, for
    /// a skipped component).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found_version: Option<String>,
    /// The provider's job for the update (the rack manager's job id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// State of one component within a firmware step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComponentStatus {
    /// The update was started (or adopted after a restart) and runs.
    Running,
    /// Updated, and (when a version was named) proven by a read-back.
    Completed,
    /// Already at the requested version: nothing was sent.
    Skipped,
    Failed,
}

/// Cuts an error to [`MAX_REPORT_ERROR_CHARS`] characters.
pub fn truncate_error(text: &str) -> String {
    match text.char_indices().nth(MAX_REPORT_ERROR_CHARS) {
        Some((end, _)) => text[..end].to_string(),
        None => text.to_string(),
    }
}

impl Report {
    /// Every stage and step pending, in ascending stage order (steps keep
    /// their definition order); a step whose type has no targeted
    /// components is `skipped` from the start.
    pub fn initial(
        definition: &RuleDefinition,
        targets: &BTreeMap<ComponentType, usize>,
    ) -> Report {
        let mut stages: BTreeMap<i32, Vec<StepReport>> = BTreeMap::new();
        for step in &definition.steps {
            let total = targets.get(&step.component_type).copied().unwrap_or(0);
            stages.entry(step.stage).or_default().push(StepReport {
                component_type: step.component_type,
                status: if total == 0 {
                    ReportStatus::Skipped
                } else {
                    ReportStatus::Pending
                },
                total_components: u32::try_from(total).unwrap_or(u32::MAX),
                completed_components: 0,
                failed_components: 0,
                started_at: None,
                finished_at: None,
                error: None,
                components: Vec::new(),
                waiting_for: None,
            });
        }
        Report {
            version: REPORT_VERSION,
            stages: stages
                .into_iter()
                .map(|(number, steps)| StageReport {
                    number,
                    status: ReportStatus::Pending,
                    steps,
                    started_at: None,
                    finished_at: None,
                    error: None,
                })
                .collect(),
            error: None,
        }
    }

    /// [`Report::initial`] with the counts of a task's frozen component set.
    pub fn initial_for(definition: &RuleDefinition, components: &ComponentsByType) -> Report {
        let targets = components.iter().map(|(ty, ids)| (ty, ids.len())).collect();
        Report::initial(definition, &targets)
    }

    /// Whether this report describes `definition`: same stages with the
    /// same step types in the same order. A resumed execution only trusts a
    /// report that matches the definition it runs.
    pub fn matches(&self, definition: &RuleDefinition) -> bool {
        let shape = Report::initial(definition, &BTreeMap::new());
        self.version == REPORT_VERSION
            && self.stages.len() == shape.stages.len()
            && self.stages.iter().zip(&shape.stages).all(|(a, b)| {
                a.number == b.number
                    && a.steps.len() == b.steps.len()
                    && a.steps
                        .iter()
                        .zip(&b.steps)
                        .all(|(x, y)| x.component_type == y.component_type)
            })
    }

    /// Number of the first stage that is neither completed nor skipped
    /// (where a resumed execution starts); `None` when all are done.
    pub fn first_unfinished_stage(&self) -> Option<i32> {
        self.stages
            .iter()
            .find(|s| !s.status.is_done())
            .map(|s| s.number)
    }

    pub fn stage(&self, number: i32) -> Option<&StageReport> {
        self.stages.iter().find(|s| s.number == number)
    }

    pub fn stage_mut(&mut self, number: i32) -> Option<&mut StageReport> {
        self.stages.iter_mut().find(|s| s.number == number)
    }

    pub fn step(&self, stage: i32, component_type: ComponentType) -> Option<&StepReport> {
        self.stage(stage)?
            .steps
            .iter()
            .find(|s| s.component_type == component_type)
    }

    pub fn step_mut(
        &mut self,
        stage: i32,
        component_type: ComponentType,
    ) -> Option<&mut StepReport> {
        self.stage_mut(stage)?
            .steps
            .iter_mut()
            .find(|s| s.component_type == component_type)
    }

    /// Sets the task-level error (cut to the report limit).
    pub fn set_error(&mut self, error: &str) {
        self.error = Some(truncate_error(error));
    }

    /// An execution stopped from outside (a cancel): the running stage and
    /// its running steps fail with `error`, which becomes the task's error;
    /// pending stages stay pending.
    pub fn interrupt(&mut self, error: &str, now: DateTime<Utc>) {
        for stage in &mut self.stages {
            if stage.status != ReportStatus::Running {
                continue;
            }
            for step in &mut stage.steps {
                if step.status == ReportStatus::Running {
                    step.fail(error, now);
                }
            }
            stage.fail(error, now);
        }
        self.set_error(error);
    }
}

impl StageReport {
    /// pending → running.
    pub fn start(&mut self, now: DateTime<Utc>) {
        self.status = ReportStatus::Running;
        self.started_at.get_or_insert(now);
        self.finished_at = None;
        self.error = None;
    }

    pub fn complete(&mut self, now: DateTime<Utc>) {
        self.status = ReportStatus::Completed;
        self.finished_at = Some(now);
        self.error = None;
    }

    /// A stage with nothing to run (every step skipped).
    pub fn skip(&mut self, now: DateTime<Utc>) {
        self.status = ReportStatus::Skipped;
        self.finished_at = Some(now);
    }

    pub fn fail(&mut self, error: &str, now: DateTime<Utc>) {
        self.status = ReportStatus::Failed;
        self.finished_at = Some(now);
        self.error = Some(truncate_error(error));
    }

    /// Whether every step is skipped (nothing to run in this stage).
    pub fn all_skipped(&self) -> bool {
        self.steps.iter().all(|s| s.status == ReportStatus::Skipped)
    }
}

impl StepReport {
    /// pending → running (also a retry of a failed or interrupted step).
    pub fn start(&mut self, now: DateTime<Utc>) {
        self.status = ReportStatus::Running;
        self.started_at.get_or_insert(now);
        self.finished_at = None;
        self.error = None;
    }

    /// Sets the component counters (capped at the total).
    pub fn set_progress(&mut self, completed: u32, failed: u32) {
        self.completed_components = completed.min(self.total_components);
        self.failed_components = failed.min(self.total_components - self.completed_components);
    }

    /// Every component done.
    pub fn complete(&mut self, now: DateTime<Utc>) {
        self.status = ReportStatus::Completed;
        self.completed_components = self.total_components;
        self.failed_components = 0;
        self.finished_at = Some(now);
        self.error = None;
        self.waiting_for = None;
    }

    /// Records `outcome`, replacing the component's earlier one.
    pub fn record(&mut self, outcome: ComponentOutcome) {
        match self
            .components
            .iter_mut()
            .find(|c| c.component == outcome.component)
        {
            Some(existing) => *existing = outcome,
            None => self.components.push(outcome),
        }
    }

    /// Failed: components not completed count as failed.
    pub fn fail(&mut self, error: &str, now: DateTime<Utc>) {
        self.status = ReportStatus::Failed;
        self.failed_components =
            self.total_components - self.completed_components.min(self.total_components);
        self.finished_at = Some(now);
        self.error = Some(truncate_error(error));
        self.waiting_for = None;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::rule::{ActionConfig, SequenceStep};

    fn step(ty: ComponentType, stage: i32) -> SequenceStep {
        SequenceStep {
            component_type: ty,
            stage,
            max_parallel: 0,
            timeout: None,
            retry: None,
            pre_operation: Vec::new(),
            main_operation: ActionConfig {
                name: "PowerControl".into(),
                timeout: Some(Duration::from_secs(60)),
                poll_interval: None,
                parameters: Default::default(),
            },
            post_operation: Vec::new(),
            delay_after: None,
        }
    }

    fn definition() -> RuleDefinition {
        RuleDefinition {
            version: "v1".into(),
            steps: vec![
                step(ComponentType::Compute, 2),
                step(ComponentType::PowerShelf, 1),
                step(ComponentType::NvSwitch, 2),
            ],
        }
    }

    #[test]
    fn an_interrupt_fails_only_what_was_running() {
        let now = Utc::now();
        let targets = BTreeMap::from([(ComponentType::Compute, 4), (ComponentType::PowerShelf, 2)]);
        let mut report = Report::initial(&definition(), &targets);
        report.stages[0].complete(now);
        report.stages[1].start(now);
        report.stages[1].steps[0].start(now);
        report.interrupt("cancelled", now);
        assert_eq!(report.error.as_deref(), Some("cancelled"));
        assert_eq!(report.stages[0].status, ReportStatus::Completed);
        assert_eq!(report.stages[1].status, ReportStatus::Failed);
        assert_eq!(report.stages[1].error.as_deref(), Some("cancelled"));
        assert_eq!(report.stages[1].steps[0].status, ReportStatus::Failed);
        assert_eq!(
            report.stages[1].steps[0].error.as_deref(),
            Some("cancelled")
        );
        // The untargeted step stays skipped.
        assert_eq!(report.stages[1].steps[1].status, ReportStatus::Skipped);
    }

    #[test]
    fn initial_orders_stages_and_skips_untargeted_types() {
        let targets = BTreeMap::from([(ComponentType::Compute, 4), (ComponentType::PowerShelf, 2)]);
        let report = Report::initial(&definition(), &targets);
        assert_eq!(report.stages.len(), 2);
        assert_eq!(report.stages[0].number, 1);
        assert_eq!(
            report.stages[1].steps[0].component_type,
            ComponentType::Compute
        );
        assert_eq!(report.stages[1].steps[0].total_components, 4);
        assert_eq!(report.stages[1].steps[1].status, ReportStatus::Skipped);
        assert_eq!(report.first_unfinished_stage(), Some(1));
        assert!(report.matches(&definition()));
        let mut other = definition();
        other.steps.pop();
        assert!(!report.matches(&other));
    }

    #[test]
    fn json_shape_and_transitions() {
        let targets = BTreeMap::from([(ComponentType::PowerShelf, 2)]);
        let mut report = Report::initial(&definition(), &targets);
        let now: DateTime<Utc> = "2024-05-01T10:00:00Z".parse().unwrap();
        report.stage_mut(1).unwrap().start(now);
        report
            .step_mut(1, ComponentType::PowerShelf)
            .unwrap()
            .start(now);
        report
            .step_mut(1, ComponentType::PowerShelf)
            .unwrap()
            .set_progress(1, 0);
        report
            .step_mut(1, ComponentType::PowerShelf)
            .unwrap()
            .complete(now);
        report.stage_mut(1).unwrap().complete(now);
        assert_eq!(report.first_unfinished_stage(), Some(2));
        assert!(report.stage(2).unwrap().all_skipped());
        report.stage_mut(2).unwrap().skip(now);
        assert_eq!(report.first_unfinished_stage(), None);
        let value = serde_json::to_value(&report).unwrap();
        assert_eq!(
            value["stages"][0],
            json!({
                "number": 1,
                "status": "completed",
                "started_at": "2024-05-01T10:00:00Z",
                "finished_at": "2024-05-01T10:00:00Z",
                "steps": [{
                    "component_type": "PowerShelf",
                    "status": "completed",
                    "total_components": 2,
                    "completed_components": 2,
                    "failed_components": 0,
                    "started_at": "2024-05-01T10:00:00Z",
                    "finished_at": "2024-05-01T10:00:00Z",
                }],
            })
        );
        assert_eq!(value["version"], 1);
        let back: Report = serde_json::from_value(value).unwrap();
        assert_eq!(back, report);
    }

    #[test]
    fn failure_counts_and_truncates() {
        let targets = BTreeMap::from([(ComponentType::Compute, 5)]);
        let mut report = Report::initial(&definition(), &targets);
        let now = Utc::now();
        let step = report.step_mut(2, ComponentType::Compute).unwrap();
        step.start(now);
        step.set_progress(2, 0);
        let long = "é".repeat(600);
        step.fail(&long, now);
        assert_eq!(step.failed_components, 3);
        assert_eq!(step.error.as_ref().unwrap().chars().count(), 512);
        report.set_error("x");
        assert_eq!(report.error.as_deref(), Some("x"));
    }
}
