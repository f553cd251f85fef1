//! The task workflow: one Temporal workflow per task, running the rule the
//! way the local executor does (spec flow-core §5.2–5.6) — stages in
//! ascending order, the steps of a stage side by side, pre → main → post
//! actions, batches of `max_parallel`, `delay_after` — with every action
//! attempt on a batch an activity ([`TaskActivities::attempt`]) whose
//! options carry the step's timeout and retry policy, and every sleep a
//! durable timer.
//!
//! Workflow code must replay deterministically: it reads no clock but the
//! workflow's, does no I/O, and keeps the report in workflow state. A saver
//! running beside the stages persists each new report version with a local
//! activity, one at a time and newest first; a save that finds the task no
//! longer running stops the workflow as cancelled (the backstop of a cancel
//! Temporal never delivered). The outcome and the last report are recorded
//! by [`TaskActivities::finish`], a local activity retried until the
//! database answers.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use futures::future::{self, Either};
use rackflow_domain::report::{Report, StageReport};
use rackflow_domain::rule::{Action, RetryPolicy as RuleRetry, RuleDefinition, SequenceStep};
use rackflow_domain::task::TaskInformation;
use rackflow_engine::executor::{self, CANCELLED, ExecutorConfig, NO_STEPS, Targets, TaskJob};
use rackflow_engine::manager::ComponentRef;
use serde::{Deserialize, Serialize};
use temporalio_common::RetryPolicy;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ActivityExecutionError, ActivityOptions, LocalActivityOptions, TimerResult,
    WorkflowCancellationToken, WorkflowContext, WorkflowResult, WorkflowTermination,
};
use uuid::Uuid;

use crate::activities::{AttemptInput, FinishInput, Outcome, SaveInput, TaskActivities};

/// The workflow's input: everything it needs, fixed when the task started
/// (later rule edits do not reach a running task).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskInput {
    pub task_id: Uuid,
    pub information: TaskInformation,
    pub definition: RuleDefinition,
    pub components: Vec<ComponentRef>,
    /// The last persisted report when the task resumes.
    pub resume_from: Option<Report>,
    pub settings: WorkflowSettings,
}

/// Executor settings carried in the input so a replay sees the values the
/// run started with.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkflowSettings {
    /// An attempt whose worker stops heartbeating for this long is retried
    /// elsewhere (the bound on how long a dead worker stalls a step).
    pub heartbeat_timeout: Duration,
    pub default_step_timeout: Duration,
    pub default_retry: RuleRetry,
}

impl TaskInput {
    pub fn from_job(job: &TaskJob, settings: WorkflowSettings) -> TaskInput {
        TaskInput {
            task_id: job.task_id,
            information: job.information.clone(),
            definition: job.definition.clone(),
            components: job.components.clone(),
            resume_from: job.resume_from.clone(),
            settings,
        }
    }

    fn job(&self) -> TaskJob {
        TaskJob {
            task_id: self.task_id,
            information: self.information.clone(),
            definition: self.definition.clone(),
            components: self.components.clone(),
            resume_from: self.resume_from.clone(),
        }
    }
}

/// How the workflow ended (its result; the task row has it already).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskResult {
    pub outcome: Outcome,
    pub message: String,
}

/// Why the stages stopped early.
enum Stop {
    Failed(String),
    Cancelled,
}

/// The workflow's state: the report and which version of it was saved.
#[workflow]
#[derive(Default)]
pub struct TaskWorkflow {
    report: Option<Report>,
    version: u64,
    saved: u64,
}

#[workflow_methods]
impl TaskWorkflow {
    #[run]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        input: TaskInput,
    ) -> WorkflowResult<TaskResult> {
        let targets = executor::group(&input.components);
        let (report, resumed) = executor::starting_report(&input.job(), &targets);
        ctx.state_mut(|s| {
            s.report = Some(report);
            s.version += 1;
        });
        let run = Run {
            ctx: ctx.clone(),
            input: &input,
            targets: &targets,
            config: ExecutorConfig {
                default_step_timeout: input.settings.default_step_timeout,
                default_retry: input.settings.default_retry.clone(),
                // The readiness gate runs in the activities, with the
                // worker's own settings.
                ..ExecutorConfig::default()
            },
        };
        let stages = Box::pin(run.execute(resumed));
        let saver = Box::pin(run.save_reports());
        let result = match future::select(stages, saver).await {
            Either::Left((result, _)) => result,
            // The saver ends only when the task is no longer running or
            // the workflow was cancelled.
            Either::Right(((), _)) => Err(Stop::Cancelled),
        };
        let (outcome, message) = match result {
            Ok(()) => (Outcome::Completed, String::new()),
            Err(Stop::Failed(message)) => {
                run.update(|r, _| r.set_error(&message));
                (Outcome::Failed, message)
            }
            Err(Stop::Cancelled) => {
                run.update(mark_cancelled);
                (Outcome::Cancelled, CANCELLED.to_string())
            }
        };
        run.finish(outcome, &message).await?;
        if outcome == Outcome::Cancelled {
            // A cancel records the task terminated before it asks Temporal
            // to cancel the workflow, so the saver can see the first before
            // the second arrives. Wait for the request a little (a durable
            // timer, ended by the cancellation) so the workflow ends
            // CANCELED as its task did; Temporal accepts a cancelled end
            // only once one was requested.
            if !ctx.cancellation_token().is_cancelled() {
                let _ = ctx.timer(CANCEL_REQUEST_WAIT).await;
            }
            if ctx.cancellation_token().is_cancelled() {
                return Err(WorkflowTermination::cancelled());
            }
        }
        Ok(TaskResult { outcome, message })
    }
}

/// The running stages' view of the workflow.
struct Run<'a> {
    ctx: WorkflowContext<TaskWorkflow>,
    input: &'a TaskInput,
    targets: &'a Targets,
    config: ExecutorConfig,
}

impl Run<'_> {
    /// The workflow's clock (deterministic on replay).
    fn now(&self) -> DateTime<Utc> {
        DateTime::<Utc>::from(self.ctx.workflow_time().unwrap_or(SystemTime::UNIX_EPOCH))
    }

    fn report(&self) -> Report {
        self.ctx
            .state(|s| s.report.clone())
            .unwrap_or_else(|| Report::initial_for(&self.input.definition, &Default::default()))
    }

    /// Applies `change` to the report; a new version when it changed.
    fn update(&self, change: impl FnOnce(&mut Report, DateTime<Utc>)) {
        let now = self.now();
        self.ctx.state_mut(|s| {
            if let Some(report) = s.report.as_mut() {
                let before = report.clone();
                change(report, now);
                if *report != before {
                    s.version += 1;
                }
            }
        });
    }

    /// Persists new report versions one at a time until the task is no
    /// longer running (or the workflow is cancelled); never returns
    /// otherwise.
    async fn save_reports(&self) {
        loop {
            if self
                .ctx
                .wait_condition(|s| s.version > s.saved)
                .await
                .is_err()
            {
                return;
            }
            let (version, report) = self.ctx.state(|s| (s.version, s.report.clone()));
            let Some(report) = report else { return };
            let saved = self
                .ctx
                .execute_local_activity(
                    TaskActivities::save_report,
                    SaveInput {
                        task_id: self.input.task_id,
                        report,
                    },
                    save_options(),
                )
                .await;
            match saved {
                Ok(true) => {}
                Ok(false) => return,
                Err(ActivityExecutionError::Cancelled(_)) => return,
                // Snapshots are best effort (spec §5.4); the next one, or
                // the outcome, carries the report.
                Err(_) => {}
            }
            self.ctx.state_mut(|s| s.saved = s.saved.max(version));
        }
    }

    /// Records the outcome with the last report: a local activity (no
    /// server round trip of its own — it runs in the workflow task that
    /// ends the stages), not cancellable, retried until the database
    /// answers.
    async fn finish(&self, outcome: Outcome, message: &str) -> Result<(), ActivityExecutionError> {
        let options = LocalActivityOptions::builder()
            .start_to_close_timeout(Duration::from_secs(30))
            .retry_policy(
                RetryPolicy::builder()
                    .initial_interval(Duration::from_secs(1))
                    .backoff_coefficient(2.0)
                    .maximum_interval(Duration::from_secs(10))
                    .build(),
            )
            .cancellation_token(WorkflowCancellationToken::new())
            .build();
        self.ctx
            .execute_local_activity(
                TaskActivities::finish,
                FinishInput {
                    task_id: self.input.task_id,
                    outcome,
                    message: message.to_string(),
                    report: self.report(),
                },
                options,
            )
            .await
    }

    /// The stages (port of the local executor's `execute`).
    async fn execute(&self, resumed: Option<i32>) -> Result<(), Stop> {
        let definition = &self.input.definition;
        if definition.steps.is_empty() {
            return Err(Stop::Failed(NO_STEPS.to_string()));
        }
        let mut stages: BTreeMap<i32, Vec<&SequenceStep>> = BTreeMap::new();
        for step in &definition.steps {
            stages.entry(step.stage).or_default().push(step);
        }
        for (number, steps) in stages {
            let Some(stage) = self.report().stage(number).cloned() else {
                continue;
            };
            if stage.status.is_done() {
                continue;
            }
            if stage.all_skipped() {
                self.update(|r, now| {
                    if let Some(s) = r.stage_mut(number) {
                        s.skip(now);
                    }
                });
                continue;
            }
            let resuming = resumed == Some(number);
            let runnable: Vec<&SequenceStep> = steps
                .into_iter()
                .filter(|step| step_pending(&stage, step))
                .collect();
            self.update(|r, now| {
                if let Some(s) = r.stage_mut(number) {
                    s.start(now);
                }
            });
            let results = temporalio_workflow::join_all(
                runnable
                    .iter()
                    .map(|step| Box::pin(self.run_step(number, step, resuming))),
            )
            .await;
            let mut failure = None;
            for (step, result) in runnable.iter().zip(results) {
                match result {
                    Ok(()) => {}
                    Err(Stop::Cancelled) => return Err(Stop::Cancelled),
                    Err(Stop::Failed(cause)) => {
                        failure.get_or_insert((step.component_type, cause));
                    }
                }
            }
            if let Some((ty, cause)) = failure {
                let stage_error = format!("component type {ty} failed: {cause}");
                self.update(|r, now| {
                    if let Some(s) = r.stage_mut(number) {
                        s.fail(&stage_error, now);
                    }
                });
                return Err(Stop::Failed(format!(
                    "stage {number} failed: {stage_error}"
                )));
            }
            self.update(|r, now| {
                if let Some(s) = r.stage_mut(number) {
                    s.complete(now);
                }
            });
        }
        Ok(())
    }

    /// One step (port of the local executor's `run_step`).
    async fn run_step(&self, stage: i32, step: &SequenceStep, resuming: bool) -> Result<(), Stop> {
        let ty = step.component_type;
        self.update(|r, now| {
            if let Some(s) = r.step_mut(stage, ty) {
                s.start(now);
            }
        });
        let result = self.actions(stage, step, resuming).await;
        match &result {
            Ok(()) => self.update(|r, now| {
                if let Some(s) = r.step_mut(stage, ty) {
                    s.complete(now);
                }
            }),
            Err(Stop::Failed(cause)) => self.update(|r, now| {
                if let Some(s) = r.step_mut(stage, ty) {
                    s.fail(cause, now);
                }
            }),
            // Marked when the workflow stops.
            Err(Stop::Cancelled) => {}
        }
        result
    }

    async fn actions(&self, stage: i32, step: &SequenceStep, resuming: bool) -> Result<(), Stop> {
        let ty = step.component_type;
        let components = self.targets.get(&ty).map_or(&[][..], Vec::as_slice);
        for (index, config) in step.actions().enumerate() {
            let is_main = index == step.pre_operation.len();
            let action = config.action().map_err(|e| Stop::Failed(e.to_string()))?;
            if let Action::Sleep { duration } = action {
                self.sleep(duration).await?;
                continue;
            }
            if !action.is_batched() {
                self.attempt(stage, step, index, components, false).await?;
                continue;
            }
            let mut done = 0usize;
            for batch in batches(step, components) {
                self.attempt(stage, step, index, batch, resuming).await?;
                done += batch.len();
                if is_main {
                    let completed = u32::try_from(done).unwrap_or(u32::MAX);
                    self.update(|r, _| {
                        if let Some(s) = r.step_mut(stage, ty) {
                            s.set_progress(completed, 0);
                        }
                    });
                }
            }
        }
        if let Some(delay) = step.delay_after {
            self.sleep(delay).await?;
        }
        Ok(())
    }

    /// A durable timer; a zero duration sets none.
    async fn sleep(&self, duration: Duration) -> Result<(), Stop> {
        if duration.is_zero() {
            return Ok(());
        }
        match self.ctx.timer(duration).await {
            TimerResult::Cancelled => Err(Stop::Cancelled),
            _ => Ok(()),
        }
    }

    /// One action on one batch as an activity: the step's timeout bounds
    /// each attempt, its retry policy drives Temporal's retries, and a
    /// worker that stops heartbeating loses the attempt to another.
    async fn attempt(
        &self,
        stage: i32,
        step: &SequenceStep,
        action_index: usize,
        batch: &[ComponentRef],
        resume: bool,
    ) -> Result<(), Stop> {
        let retry = self.config.retry(step);
        let timeout = self.config.step_timeout(step);
        let options = ActivityOptions::with_start_to_close_timeout(timeout + ATTEMPT_SLACK)
            .heartbeat_timeout(self.input.settings.heartbeat_timeout)
            .retry_policy(
                RetryPolicy::builder()
                    .initial_interval(retry.initial)
                    .backoff_coefficient(retry.coefficient)
                    .maximum_interval(retry.max_interval)
                    .maximum_attempts(retry.max_attempts)
                    .build(),
            )
            .build();
        let input = AttemptInput {
            task_id: self.input.task_id,
            information: self.input.information.clone(),
            components: self.input.components.clone(),
            stage,
            step: step.clone(),
            action_index,
            batch: batch.to_vec(),
            resume,
        };
        match self
            .ctx
            .execute_activity(TaskActivities::attempt, input, options)
            .await
        {
            Ok(()) => Ok(()),
            Err(ActivityExecutionError::Cancelled(_)) => Err(Stop::Cancelled),
            Err(e) => {
                let message = failure_message(&e);
                if message == CANCELLED {
                    Err(Stop::Cancelled)
                } else {
                    Err(Stop::Failed(message))
                }
            }
        }
    }
}

/// Temporal's bound on an attempt lies past the attempt's own timeout, so
/// the attempt's timeout error (with the local executor's text) wins; only
/// a lost worker meets Temporal's.
const ATTEMPT_SLACK: Duration = Duration::from_secs(30);

/// How long a workflow whose task was found terminated waits for the
/// cancel request that follows (a user's cancel sends it milliseconds
/// after recording the task terminated).
const CANCEL_REQUEST_WAIT: Duration = Duration::from_secs(10);

fn save_options() -> LocalActivityOptions {
    LocalActivityOptions::builder()
        .start_to_close_timeout(Duration::from_secs(30))
        .retry_policy(RetryPolicy::builder().maximum_attempts(1).build())
        .build()
}

fn step_pending(stage: &StageReport, step: &SequenceStep) -> bool {
    stage
        .steps
        .iter()
        .find(|s| s.component_type == step.component_type)
        .is_some_and(|s| !s.status.is_done())
}

fn batches<'c>(step: &SequenceStep, components: &'c [ComponentRef]) -> Vec<&'c [ComponentRef]> {
    match usize::try_from(step.max_parallel) {
        Ok(size) if size > 0 => components.chunks(size).collect(),
        _ => vec![components],
    }
}

/// The innermost message of an activity failure: the attempt's own error
/// text (or Temporal's timeout when a worker was lost on the last attempt).
fn failure_message(error: &ActivityExecutionError) -> String {
    let mut message = String::new();
    let mut failure = error.failure();
    while let Some(f) = failure {
        if !f.message.is_empty() {
            message = f.message.clone();
        }
        failure = f.cause.as_deref();
    }
    if message.is_empty() {
        error.to_string()
    } else {
        message
    }
}

/// The running stage and steps fail with `cancelled`, as in the local
/// executor.
fn mark_cancelled(report: &mut Report, now: DateTime<Utc>) {
    report.interrupt(CANCELLED, now);
}

#[cfg(test)]
mod tests {
    use rackflow_domain::ComponentType;
    use rackflow_domain::rule::ActionConfig;

    use super::*;

    fn component(n: usize) -> ComponentRef {
        ComponentRef {
            id: Uuid::from_u128(n as u128),
            component_type: ComponentType::Compute,
            external_id: format!("c-{n}"),
            rack: "r".into(),
        }
    }

    fn step(max_parallel: i32) -> SequenceStep {
        SequenceStep {
            component_type: ComponentType::Compute,
            stage: 1,
            max_parallel,
            timeout: None,
            retry: None,
            pre_operation: Vec::new(),
            main_operation: ActionConfig {
                name: "PowerControl".into(),
                timeout: None,
                poll_interval: None,
                parameters: Default::default(),
            },
            post_operation: Vec::new(),
            delay_after: None,
        }
    }

    #[test]
    fn batches_follow_max_parallel() {
        let components: Vec<ComponentRef> = (0..5).map(component).collect();
        let sizes = |p| {
            batches(&step(p), &components)
                .iter()
                .map(|b| b.len())
                .collect::<Vec<_>>()
        };
        assert_eq!(sizes(0), [5]);
        assert_eq!(sizes(-1), [5]);
        assert_eq!(sizes(2), [2, 2, 1]);
        assert_eq!(sizes(5), [5]);
        assert_eq!(sizes(9), [5]);
    }

    #[test]
    fn a_workflow_input_round_trips_through_json() {
        let input = TaskInput {
            task_id: Uuid::from_u128(7),
            information: TaskInformation {
                code: "upgrade".into(),
                override_readiness_check: false,
                firmware: None,
            },
            definition: RuleDefinition {
                version: "v1".into(),
                steps: vec![step(2)],
            },
            components: (0..2).map(component).collect(),
            resume_from: None,
            settings: WorkflowSettings {
                heartbeat_timeout: Duration::from_secs(10),
                default_step_timeout: Duration::from_secs(1200),
                default_retry: RuleRetry::activity_default(),
            },
        };
        let json = serde_json::to_string(&input).expect("serialise");
        let back: TaskInput = serde_json::from_str(&json).expect("deserialise");
        assert_eq!(back.job().definition, input.definition);
        assert_eq!(back.components, input.components);
        assert_eq!(back.settings.default_retry, input.settings.default_retry);
    }
}
