//! The `local` executor (decision C2): runs a task's rule definition
//! in-process on tokio (spec flow-core §5.2–5.6).
//!
//! This module owns the rule-engine semantics shared with any other
//! executor: capability check before dispatch, stages in ascending order,
//! the steps of a stage in parallel, batches by `max_parallel`, retries with
//! backoff, step and action timeouts, report snapshots pushed to a
//! [`ReportSink`] on every change, cancellation and resume. It does not
//! persist anything or change task statuses: the caller (the task manager)
//! owns the task row, persists the snapshots it is handed and maps the
//! [`TaskOutcome`] to a status.
//!
//! Semantics in brief:
//! * Before anything runs, every action of every step whose component type
//!   has targets is parsed and its capabilities checked against the
//!   [`ManagerRegistry`]; a failure names the type and the capability.
//! * Within a step: pre actions in order → main → post → `delay_after`.
//!   Component-scoped actions run once per batch of `max_parallel`
//!   components (0 = one batch), batches one after another; `Sleep` and
//!   `VerifyReachability` run once per step. Every run of an action on a
//!   batch is one *attempt* bound by the step timeout (default 20 m) and is
//!   retried per the step's retry policy (default 3 attempts, 1 s, ×2.0,
//!   max 1 m) — the reference runs each as a Temporal activity with these
//!   options. Sleeps are timers: never retried, not bound by the timeout.
//! * The first failing step (in definition order, once all steps of the
//!   stage have ended) fails the stage and the task:
//!   `stage N failed: component type X failed: <cause>`.
//! * Cancellation drops the in-flight futures at once (the sim and any
//!   manager must be cancel-safe), marks the running stage and steps failed
//!   with error `cancelled` and returns [`TaskOutcome::Cancelled`].
//! * Resume: given the persisted report (`TaskJob::resume_from`) of the same
//!   definition, completed and skipped stages are not run again and the
//!   first unfinished stage starts over, except its already completed
//!   steps. A `FirmwareControl` action in a resumed step first reads the
//!   firmware status: components already `Queued`, `Verifying` or
//!   `Completed` are polled again, not restarted — restarting would abort
//!   an update that survived the restart of this process — and only the
//!   others (`Unknown`, `Failed`, no answer) are started. A report of a
//!   different definition is ignored and the task starts from scratch.

mod step;

pub use step::{ActionError, Retry};

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use rackflow_domain::ComponentType;
use rackflow_domain::inventory::{GatedOperation, Observation};
use rackflow_domain::report::{Report, ReportStatus};
use rackflow_domain::rule::{RetryPolicy, RuleDefinition, SequenceStep};
use rackflow_domain::task::TaskInformation;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::manager::{ComponentRef, ManagerRegistry};

/// Error text of a cancelled stage, step and report.
pub const CANCELLED: &str = "cancelled";
/// Workflow error of a definition without steps (spec §4.2).
pub const NO_STEPS: &str = "rule definition has no steps";

/// Receives a report snapshot on every change. Implementations persist it
/// (best effort: a slow sink slows the task, a failing one should only log).
#[async_trait]
pub trait ReportSink: Send + Sync {
    async fn report(&self, task_id: Uuid, report: &Report);
}

/// Receives what component managers read back from the hardware during a
/// run — installed firmware versions, power states — for the inventory
/// (issue 12). Best effort like [`ReportSink`]: a failing write logs.
#[async_trait]
pub trait InventoryObserver: Send + Sync {
    /// Takes `observations`; the answer is a ticket for [`Self::flush`].
    async fn observed(&self, observations: &[Observation]) -> u64;

    /// Returns once everything observed up to ticket `upto` is recorded
    /// (or given up on): a task calls it with its last ticket before it
    /// ends. Default: recorded at once.
    async fn flush(&self, _upto: u64) {}
}

/// Answers the readiness gate (spec flow-core §5.7, issue 12): which of
/// `components` have an operational status that holds `operation` back.
/// An error is logged and asked again at the next poll.
#[async_trait]
pub trait Readiness: Send + Sync {
    async fn holding(
        &self,
        components: &[Uuid],
        operation: GatedOperation,
    ) -> Result<Vec<Uuid>, String>;
}

/// One task to execute.
#[derive(Debug, Clone)]
pub struct TaskJob {
    pub task_id: Uuid,
    /// The task's operation (code, firmware payload, overrides).
    pub information: TaskInformation,
    /// The resolved rule definition, fixed when the task was created.
    pub definition: RuleDefinition,
    /// The targeted components; steps of types without any are skipped.
    pub components: Vec<ComponentRef>,
    /// The last persisted report when resuming after a restart.
    pub resume_from: Option<Report>,
}

/// One attempt of one action of a task on one batch, run outside a local
/// execution: a durable executor's activity (the Temporal executor runs the
/// stages and steps as workflow code and each such attempt as an activity).
#[derive(Debug, Clone, Copy)]
pub struct AttemptSpec<'a> {
    pub task_id: Uuid,
    pub information: &'a TaskInformation,
    /// Every targeted component of the task (VerifyReachability polls
    /// other types than the step's).
    pub components: &'a [ComponentRef],
    pub stage: i32,
    pub step: &'a SequenceStep,
    /// Index into the step's actions: pre actions, main, post actions.
    pub action_index: usize,
    /// The batch of the step's components (ignored by actions that run
    /// once per step).
    pub batch: &'a [ComponentRef],
    /// Read the firmware status first and only poll components whose
    /// update is already accepted (a retry after a lost attempt).
    pub resume: bool,
}

/// Discards report snapshots: an attempt run for a durable executor
/// reports through its workflow, not through a sink.
struct NoReport;

#[async_trait]
impl ReportSink for NoReport {
    async fn report(&self, _task_id: Uuid, _report: &Report) {}
}

/// How an execution ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskOutcome {
    Completed,
    /// The full error (`stage N failed: …`); cut it for the status message.
    Failed(String),
    Cancelled,
}

/// Defaults of the executor. Production uses [`ExecutorConfig::default`]
/// (the reference's values); tests may shrink them. (FirmwareControl's
/// polling defaults, 2 m / 30 m, are applied by the domain's action parser.)
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutorConfig {
    /// Per-attempt bound when a step sets no timeout.
    pub default_step_timeout: Duration,
    /// Retry policy of steps that set none.
    pub default_retry: RetryPolicy,
    /// How long a power or firmware action waits for its components to be
    /// released (not in service) before it fails (reference: 30 m).
    pub readiness_timeout: Duration,
    /// How often the readiness gate asks again (reference: 5 s).
    pub readiness_poll: Duration,
}

/// The reference's readiness wait (flow-core §8).
pub const DEFAULT_READINESS_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// The reference's readiness poll interval.
pub const DEFAULT_READINESS_POLL: Duration = Duration::from_secs(5);

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig {
            default_step_timeout: rackflow_domain::rule::DEFAULT_STEP_TIMEOUT,
            default_retry: RetryPolicy::activity_default(),
            readiness_timeout: DEFAULT_READINESS_TIMEOUT,
            readiness_poll: DEFAULT_READINESS_POLL,
        }
    }
}

impl ExecutorConfig {
    /// The per-attempt bound of `step`: its timeout, else the default.
    pub fn step_timeout(&self, step: &SequenceStep) -> Duration {
        step.timeout
            .filter(|d| !d.is_zero())
            .unwrap_or(self.default_step_timeout)
    }

    /// The retry policy of `step` with the defaults applied.
    pub fn retry(&self, step: &SequenceStep) -> Retry {
        Retry::new(step.retry.as_ref(), &self.default_retry)
    }
}

/// Runs tasks in-process. Cheap to share (`Arc`); runs are independent.
#[derive(Debug, Clone)]
pub struct LocalExecutor {
    registry: Arc<ManagerRegistry>,
    config: ExecutorConfig,
    /// Opens sealed firmware credentials (`None`: none configured).
    keys: Option<Arc<rackflow_security::secrets::DataKeys>>,
    /// Where read-back versions and power states go (`None`: nowhere).
    observer: Option<Arc<dyn InventoryObserver>>,
    /// The readiness gate's source (`None`: every component is ready).
    readiness: Option<Arc<dyn Readiness>>,
}

impl std::fmt::Debug for dyn InventoryObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InventoryObserver")
    }
}

impl std::fmt::Debug for dyn Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Readiness")
    }
}

/// Targeted components by type, in the job's order.
pub type Targets = BTreeMap<ComponentType, Vec<ComponentRef>>;

/// The report and the sink it is pushed to. Snapshots are published in
/// change order: the async lock serialises "change, clone, push" so a slow
/// push of an older snapshot never lands after a newer one.
struct Reporter {
    task_id: Uuid,
    sink: Arc<dyn ReportSink>,
    report: Mutex<Report>,
    publish: tokio::sync::Mutex<()>,
}

impl Reporter {
    /// Applies `change` and pushes the result, unless nothing changed.
    async fn update(&self, change: impl FnOnce(&mut Report)) {
        let _order = self.publish.lock().await;
        let snapshot = {
            let mut report = self.lock();
            let before = report.clone();
            change(&mut report);
            if *report == before {
                return;
            }
            report.clone()
        };
        self.sink.report(self.task_id, &snapshot).await;
    }

    /// Pushes the current report as it is.
    async fn publish(&self) {
        let _order = self.publish.lock().await;
        let snapshot = self.snapshot();
        self.sink.report(self.task_id, &snapshot).await;
    }

    fn snapshot(&self) -> Report {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Report> {
        // Report mutations are plain field writes; a poisoned lock still
        // holds a usable report.
        self.report.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What every step of one run shares.
struct RunContext<'a> {
    registry: &'a ManagerRegistry,
    keys: Option<&'a rackflow_security::secrets::DataKeys>,
    observer: Option<&'a dyn InventoryObserver>,
    /// The highest ticket the observer gave this run (0: nothing observed).
    ticket: &'a std::sync::atomic::AtomicU64,
    readiness: Option<&'a dyn Readiness>,
    config: &'a ExecutorConfig,
    information: &'a TaskInformation,
    targets: &'a Targets,
    reporter: &'a Reporter,
}

impl LocalExecutor {
    pub fn new(registry: Arc<ManagerRegistry>, config: ExecutorConfig) -> Self {
        LocalExecutor {
            registry,
            config,
            keys: None,
            observer: None,
            readiness: None,
        }
    }

    /// Power and firmware actions wait until `readiness` says none of their
    /// components is held back (the reference's readiness gate).
    pub fn with_readiness(mut self, readiness: Option<Arc<dyn Readiness>>) -> Self {
        self.readiness = readiness;
        self
    }

    /// Versions and power states read back during runs go to `observer`.
    pub fn with_observer(mut self, observer: Option<Arc<dyn InventoryObserver>>) -> Self {
        self.observer = observer;
        self
    }

    /// Firmware credentials sealed under `keys` are opened for the
    /// component managers.
    pub fn with_keys(mut self, keys: Option<Arc<rackflow_security::secrets::DataKeys>>) -> Self {
        self.keys = keys;
        self
    }

    pub fn registry(&self) -> &Arc<ManagerRegistry> {
        &self.registry
    }

    pub fn config(&self) -> &ExecutorConfig {
        &self.config
    }

    /// The pre-dispatch check (spec §4.3, §5.1): every action of every step
    /// whose type has targets parses and is backed by that type's manager
    /// (VerifyReachability also by the managers of the targeted types it
    /// polls). Usable before submitting a task, too.
    pub fn check(
        &self,
        definition: &RuleDefinition,
        components: &[ComponentRef],
    ) -> Result<(), String> {
        check_definition(&self.registry, definition, &group(components))
    }

    /// Executes `job` to the end, pushing every report change to `sink`.
    pub async fn run(
        &self,
        job: TaskJob,
        sink: Arc<dyn ReportSink>,
        cancel: CancellationToken,
    ) -> TaskOutcome {
        let targets = group(&job.components);
        let (report, resumed) = starting_report(&job, &targets);
        let reporter = Reporter {
            task_id: job.task_id,
            sink,
            report: Mutex::new(report),
            publish: tokio::sync::Mutex::new(()),
        };
        if cancel.is_cancelled() {
            return cancelled(&reporter).await;
        }
        reporter.publish().await;
        if let Err(message) = check_definition(&self.registry, &job.definition, &targets) {
            return failed(&reporter, message).await;
        }
        let ticket = std::sync::atomic::AtomicU64::new(0);
        let ctx = RunContext {
            registry: &self.registry,
            keys: self.keys.as_deref(),
            observer: self.observer.as_deref(),
            ticket: &ticket,
            readiness: self.readiness.as_deref(),
            config: &self.config,
            information: &job.information,
            targets: &targets,
            reporter: &reporter,
        };
        let execution = execute(&ctx, &job.definition, resumed);
        // Biased: a cancellation that raced the last step still wins, and
        // dropping `execution` drops every in-flight manager call.
        let result = tokio::select! {
            biased;
            _ = cancel.cancelled() => None,
            result = execution => Some(result),
        };
        // What the run read back is in the inventory before its end is
        // (its own observations: other tasks' later ones are not waited for).
        if let Some(observer) = &self.observer {
            let upto = ticket.load(std::sync::atomic::Ordering::SeqCst);
            if upto > 0 {
                observer.flush(upto).await;
            }
        }
        match result {
            None => cancelled(&reporter).await,
            Some(Ok(())) => TaskOutcome::Completed,
            Some(Err(message)) => failed(&reporter, message).await,
        }
    }
}

impl LocalExecutor {
    /// Runs one attempt (see [`AttemptSpec`]) with the local executor's
    /// semantics and error texts; retries are the caller's.
    pub async fn attempt(&self, spec: AttemptSpec<'_>) -> Result<(), ActionError> {
        let targets = group(spec.components);
        let reporter = Reporter {
            task_id: spec.task_id,
            sink: Arc::new(NoReport),
            // No stages: progress updates of the attempt change nothing.
            report: Mutex::new(Report {
                version: 1,
                stages: Vec::new(),
                error: None,
            }),
            publish: tokio::sync::Mutex::new(()),
        };
        let ticket = std::sync::atomic::AtomicU64::new(0);
        let ctx = RunContext {
            registry: &self.registry,
            keys: self.keys.as_deref(),
            observer: self.observer.as_deref(),
            ticket: &ticket,
            readiness: self.readiness.as_deref(),
            config: &self.config,
            information: spec.information,
            targets: &targets,
            reporter: &reporter,
        };
        step::run_attempt(
            &ctx,
            spec.stage,
            spec.step,
            spec.action_index,
            spec.batch,
            spec.resume,
        )
        .await
    }
}

/// The report to start from, and the stage being resumed (if any): a
/// persisted report of the same definition keeps its finished stages and
/// steps; anything else starts fresh.
pub fn starting_report(job: &TaskJob, targets: &Targets) -> (Report, Option<i32>) {
    let counts = targets.iter().map(|(ty, c)| (*ty, c.len())).collect();
    let fresh = Report::initial(&job.definition, &counts);
    let Some(previous) = &job.resume_from else {
        return (fresh, None);
    };
    if !previous.matches(&job.definition) {
        tracing::warn!(task = %job.task_id, "persisted report does not match the rule definition; starting over");
        return (fresh, None);
    }
    let mut report = previous.clone();
    report.error = None;
    // Totals follow the job; steps already completed keep their counts.
    for (stage, fresh_stage) in report.stages.iter_mut().zip(&fresh.stages) {
        for (step, fresh_step) in stage.steps.iter_mut().zip(&fresh_stage.steps) {
            if step.status != ReportStatus::Completed {
                step.total_components = fresh_step.total_components;
                if fresh_step.status == ReportStatus::Skipped {
                    step.status = ReportStatus::Skipped;
                }
            }
        }
    }
    let resumed = report.first_unfinished_stage();
    (report, resumed)
}

/// Groups components by type, keeping the job's order within a type.
pub fn group(components: &[ComponentRef]) -> Targets {
    let mut targets = Targets::new();
    for c in components {
        targets.entry(c.component_type).or_default().push(c.clone());
    }
    targets
}

fn check_definition(
    registry: &ManagerRegistry,
    definition: &RuleDefinition,
    targets: &Targets,
) -> Result<(), String> {
    let targeted: Vec<ComponentType> = targets
        .iter()
        .filter(|(_, c)| !c.is_empty())
        .map(|(ty, _)| *ty)
        .collect();
    // Parameters first, so a broken action is reported as such rather than
    // as a capability problem.
    for step in definition
        .steps
        .iter()
        .filter(|s| targeted.contains(&s.component_type))
    {
        for config in step.actions() {
            config.action().map_err(|e| {
                format!(
                    "stage {} component type {}: {e}",
                    step.stage, step.component_type
                )
            })?;
        }
    }
    let required = definition
        .checked_required_capabilities(&targeted)
        .map_err(|e| e.to_string())?;
    for (ty, capability) in required {
        registry.check(ty, capability).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Runs the stages; `Err` is the task's failure message.
async fn execute(
    ctx: &RunContext<'_>,
    definition: &RuleDefinition,
    resumed: Option<i32>,
) -> Result<(), String> {
    if definition.steps.is_empty() {
        return Err(NO_STEPS.to_string());
    }
    let mut stages: BTreeMap<i32, Vec<&SequenceStep>> = BTreeMap::new();
    for step in &definition.steps {
        stages.entry(step.stage).or_default().push(step);
    }
    for (number, steps) in stages {
        let Some(stage) = ctx.reporter.snapshot().stage(number).cloned() else {
            continue;
        };
        if stage.status.is_done() {
            // Finished before a restart.
            continue;
        }
        if stage.all_skipped() {
            ctx.reporter
                .update(|r| {
                    if let Some(s) = r.stage_mut(number) {
                        s.skip(Utc::now());
                    }
                })
                .await;
            continue;
        }
        let resuming = resumed == Some(number);
        let runnable: Vec<&SequenceStep> = steps
            .into_iter()
            .filter(|step| {
                stage
                    .steps
                    .iter()
                    .find(|s| s.component_type == step.component_type)
                    .is_some_and(|s| !s.status.is_done())
            })
            .collect();
        tracing::debug!(
            stage = number,
            steps = runnable.len(),
            resuming,
            "stage started"
        );
        ctx.reporter
            .update(|r| {
                if let Some(s) = r.stage_mut(number) {
                    s.start(Utc::now());
                }
            })
            .await;
        let results = join_all(
            runnable
                .iter()
                .map(|step| step::run_step(ctx, number, step, resuming))
                .collect(),
        )
        .await;
        let failure = runnable
            .iter()
            .zip(results)
            .find_map(|(step, result)| result.err().map(|cause| (step.component_type, cause)));
        if let Some((ty, cause)) = failure {
            let stage_error = format!("component type {ty} failed: {cause}");
            tracing::warn!(stage = number, error = %stage_error, "stage failed");
            ctx.reporter
                .update(|r| {
                    if let Some(s) = r.stage_mut(number) {
                        s.fail(&stage_error, Utc::now());
                    }
                })
                .await;
            return Err(format!("stage {number} failed: {stage_error}"));
        }
        ctx.reporter
            .update(|r| {
                if let Some(s) = r.stage_mut(number) {
                    s.complete(Utc::now());
                }
            })
            .await;
        tracing::debug!(stage = number, "stage completed");
    }
    Ok(())
}

async fn failed(reporter: &Reporter, message: String) -> TaskOutcome {
    reporter.update(|r| r.set_error(&message)).await;
    TaskOutcome::Failed(message)
}

async fn cancelled(reporter: &Reporter) -> TaskOutcome {
    reporter
        .update(|r| r.interrupt(CANCELLED, Utc::now()))
        .await;
    TaskOutcome::Cancelled
}

/// Polls every future on the current task until all are ready; outputs in
/// input order. (The steps of a stage borrow the run's context, so they run
/// as concurrent futures of one task rather than spawned tasks; dropping
/// this future drops them all, which is how cancellation stops them.)
pub(crate) async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_some() {
                continue;
            }
            match future.as_mut().poll(cx) {
                Poll::Ready(value) => *output = Some(value),
                Poll::Pending => pending = true,
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests;
