//! One step of a stage — one component type — and the actions it runs
//! (spec §5.3, §5.5, §5.6): batching, per-attempt timeout, retries with
//! backoff, and the polling actions with their reference error texts.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use rackflow_domain::ComponentType;
use rackflow_domain::duration::format_go_duration;
use rackflow_domain::rule::PowerState as ExpectedPower;
use rackflow_domain::rule::{Action, ActionConfig, RetryPolicy, SequenceStep};
use tokio::time::Instant;

use rackflow_domain::inventory::{GatedOperation, Observation};
use rackflow_domain::report::{ComponentOutcome, ComponentStatus};

use super::RunContext;
use crate::manager::{
    ComponentRef, FirmwareRequest, FirmwareState, ManagerError, PowerOp, PowerState, first_listed,
};

/// Bound of a `DecommissionControl` call without its own timeout (the
/// reference's fire-once 5 minutes).
const DECOMMISSION_CALL_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// How long `WaitDecommissioned` tolerates failing status reads in a row.
const DECOMMISSION_STATUS_ERRORS_FOR: Duration = Duration::from_secs(5 * 60);

/// Why an attempt failed, and whether another attempt may help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ActionError {
    pub message: String,
    /// False for a configuration problem: the same attempt would fail the
    /// same way.
    pub retryable: bool,
}

impl ActionError {
    fn retryable(message: impl Into<String>) -> Self {
        ActionError {
            message: message.into(),
            retryable: true,
        }
    }

    /// A configuration problem: the same attempt would fail the same way.
    fn permanent(message: impl Into<String>) -> Self {
        ActionError {
            message: message.into(),
            retryable: false,
        }
    }
}

impl From<ManagerError> for ActionError {
    fn from(e: ManagerError) -> Self {
        match e {
            ManagerError::CallFailed { .. } => ActionError::retryable(e.to_string()),
            _ => ActionError::permanent(e.to_string()),
        }
    }
}

/// The step's retry policy with the reference's defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Retry {
    pub max_attempts: u32,
    pub initial: Duration,
    pub coefficient: f64,
    pub max_interval: Duration,
}

impl Retry {
    pub fn new(policy: Option<&RetryPolicy>, default: &RetryPolicy) -> Retry {
        let policy = policy.unwrap_or(default);
        let initial = if policy.initial_interval.is_zero() {
            Duration::from_secs(1)
        } else {
            policy.initial_interval
        };
        Retry {
            // Validation requires ≥ 1; never read 0 as "unlimited" here.
            max_attempts: u32::try_from(policy.max_attempts.max(1)).unwrap_or(1),
            initial,
            coefficient: policy.backoff_coefficient.max(1.0),
            // Temporal's default maximum is 100 × the initial interval.
            max_interval: policy
                .max_interval
                .filter(|d| !d.is_zero())
                .unwrap_or(initial * 100),
        }
    }

    /// Wait before attempt `attempt + 1`.
    fn backoff(&self, attempt: u32) -> Duration {
        let factor = self
            .coefficient
            .powi(i32::try_from(attempt).unwrap_or(i32::MAX) - 1);
        let secs = (self.initial.as_secs_f64() * factor).min(self.max_interval.as_secs_f64());
        Duration::from_secs_f64(secs.max(0.0))
    }
}

/// Where a step reports, and what it runs on.
struct StepRun<'a, 'c> {
    ctx: &'a RunContext<'c>,
    stage: i32,
    step: &'a SequenceStep,
    components: &'a [ComponentRef],
    retry: Retry,
    step_timeout: Duration,
}

/// Runs one step; `Err` is the cause for the stage's error.
pub(super) async fn run_step(
    ctx: &RunContext<'_>,
    stage: i32,
    step: &SequenceStep,
    resuming: bool,
) -> Result<(), String> {
    let ty = step.component_type;
    let run = StepRun::new(ctx, stage, step);
    run.update(|s, now| s.start(now)).await;
    let result = run.actions(resuming).await;
    match &result {
        Ok(()) => run.update(|s, now| s.complete(now)).await,
        Err(cause) => {
            tracing::warn!(stage, component_type = %ty, error = %cause, "step failed");
            run.update(|s, now| s.fail(cause, now)).await
        }
    }
    result
}

/// One attempt of action `action_index` (pre actions, then main, then
/// post) of `step` on `batch`, bound by the step's timeout with the local
/// executor's error text: what a durable executor's activity runs. The
/// caller owns retries and reporting.
pub(super) async fn run_attempt(
    ctx: &RunContext<'_>,
    stage: i32,
    step: &SequenceStep,
    action_index: usize,
    batch: &[ComponentRef],
    resume: bool,
) -> Result<(), ActionError> {
    let ty = step.component_type;
    let Some(config) = step.actions().nth(action_index) else {
        return Err(ActionError::permanent(format!(
            "stage {stage} component type {ty} has no action {action_index}"
        )));
    };
    let action = config
        .action()
        .map_err(|e| ActionError::permanent(e.to_string()))?;
    let run = StepRun::new(ctx, stage, step);
    let batch = if action.is_batched() {
        batch
    } else {
        run.components
    };
    // The wait for readiness is not bound by the step timeout (the
    // reference gates before the activity's own work starts).
    run.ready(&action, batch).await?;
    tokio::time::timeout(
        run.step_timeout,
        run.attempt(&action, config, batch, resume),
    )
    .await
    .unwrap_or_else(|_| Err(run.timed_out()))
}

impl<'a, 'c> StepRun<'a, 'c> {
    /// `step` of `stage` on its type's targets, with the step's retry
    /// policy and timeout (defaults applied).
    fn new(ctx: &'a RunContext<'c>, stage: i32, step: &'a SequenceStep) -> Self {
        let components = ctx
            .targets
            .get(&step.component_type)
            .map_or(&[][..], Vec::as_slice);
        StepRun {
            ctx,
            stage,
            step,
            components,
            retry: ctx.config.retry(step),
            step_timeout: ctx.config.step_timeout(step),
        }
    }
}

impl StepRun<'_, '_> {
    fn timed_out(&self) -> ActionError {
        ActionError::retryable(format!(
            "{} step timed out after {}",
            self.step.component_type,
            format_go_duration(self.step_timeout)
        ))
    }

    async fn update(
        &self,
        change: impl FnOnce(&mut rackflow_domain::report::StepReport, DateTime<Utc>),
    ) {
        let (stage, ty) = (self.stage, self.step.component_type);
        self.ctx
            .reporter
            .update(|r| {
                if let Some(step) = r.step_mut(stage, ty) {
                    change(step, Utc::now());
                }
            })
            .await;
    }

    async fn progress(&self, completed: usize, failed: usize) {
        let completed = u32::try_from(completed).unwrap_or(u32::MAX);
        let failed = u32::try_from(failed).unwrap_or(u32::MAX);
        self.update(|s, _| s.set_progress(completed, failed)).await;
    }

    fn batches(&self) -> Vec<&[ComponentRef]> {
        match usize::try_from(self.step.max_parallel) {
            Ok(size) if size > 0 => self.components.chunks(size).collect(),
            _ => vec![self.components],
        }
    }

    async fn actions(&self, resuming: bool) -> Result<(), String> {
        let step = self.step;
        for (index, config) in step.actions().enumerate() {
            let is_main = index == step.pre_operation.len();
            // Parsed and checked before dispatch; parsing again is cheap and
            // keeps the step self-contained.
            let action = config.action().map_err(|e| e.to_string())?;
            if let Action::Sleep { duration } = action {
                sleep(duration).await;
                continue;
            }
            if !action.is_batched() {
                self.attempts(&action, config, self.components, false)
                    .await?;
                continue;
            }
            let mut done = 0;
            for batch in self.batches() {
                self.attempts(&action, config, batch, resuming).await?;
                done += batch.len();
                if is_main {
                    self.progress(done, 0).await;
                }
            }
        }
        if let Some(delay) = step.delay_after {
            sleep(delay).await;
        }
        Ok(())
    }

    /// Runs `action` on `batch` until an attempt succeeds, the error is
    /// permanent, or the attempts are used up.
    async fn attempts(
        &self,
        action: &Action,
        config: &ActionConfig,
        batch: &[ComponentRef],
        resuming: bool,
    ) -> Result<(), String> {
        self.ready(action, batch).await.map_err(|e| e.message)?;
        let mut attempt = 1;
        loop {
            // After a restart or a failed attempt, work may be in flight or
            // already done: it is polled, not sent again.
            let check_in_flight = resuming || attempt > 1;
            let result = tokio::time::timeout(
                self.step_timeout,
                self.attempt(action, config, batch, check_in_flight),
            )
            .await
            .unwrap_or_else(|_| Err(self.timed_out()));
            match result {
                Ok(()) => return Ok(()),
                Err(e) if !e.retryable || attempt >= self.retry.max_attempts => {
                    return Err(e.message);
                }
                Err(e) => {
                    let wait = self.retry.backoff(attempt);
                    tracing::info!(
                        stage = self.stage,
                        component_type = %self.step.component_type,
                        attempt,
                        error = %e.message,
                        retry_in = ?wait,
                        "action attempt failed; retrying"
                    );
                    sleep(wait).await;
                    attempt += 1;
                }
            }
        }
    }

    async fn attempt(
        &self,
        action: &Action,
        config: &ActionConfig,
        batch: &[ComponentRef],
        check_in_flight: bool,
    ) -> Result<(), ActionError> {
        let ty = self.step.component_type;
        let registry = self.ctx.registry;
        match action {
            Action::Sleep { duration } => {
                sleep(*duration).await;
                Ok(())
            }
            Action::PowerControl { operation } => {
                let code = operation
                    .as_deref()
                    .unwrap_or(self.ctx.information.code.as_str());
                let op = PowerOp::parse(code).ok_or_else(|| {
                    ActionError::permanent(format!("unrecognized power operation \"{code}\""))
                })?;
                let call = registry.power_control(ty)?.power_control(batch, op);
                // The action's own timeout, when set, bounds the call.
                let timeout = config.timeout.filter(|t| !t.is_zero());
                bounded(timeout, "PowerControl", call).await?;
                self.read_back_power(batch).await;
                Ok(())
            }
            Action::GetPowerStatus { timeout } => {
                let call = registry.power_status(ty)?.power_status(batch);
                let states = bounded(Some(*timeout), "GetPowerStatus", call).await?;
                self.observe_power(batch, &states).await;
                Ok(())
            }
            Action::VerifyPowerStatus {
                expected,
                timeout,
                poll_interval,
            } => {
                let expected = match expected {
                    ExpectedPower::On => PowerState::On,
                    ExpectedPower::Off => PowerState::Off,
                };
                self.verify_power(batch, expected, *timeout, *poll_interval)
                    .await
            }
            Action::VerifyReachability {
                component_types,
                require_all,
                timeout,
                poll_interval,
            } => {
                self.verify_reachability(component_types, *require_all, *timeout, *poll_interval)
                    .await
            }
            Action::FirmwareControl {
                operation,
                poll_interval,
                poll_timeout,
            } => {
                self.firmware(
                    batch,
                    operation.as_deref(),
                    *poll_interval,
                    *poll_timeout,
                    check_in_flight,
                )
                .await
            }
            Action::InjectExpectation => {
                let call = registry.expectation_injector(ty)?.inject_expectation(batch);
                let timeout = config.timeout.filter(|t| !t.is_zero());
                bounded(timeout, "InjectExpectation", call).await
            }
            Action::VerifyFirmwareConsistency => {
                let call = registry
                    .firmware_consistency(ty)?
                    .check_firmware_consistency(batch);
                let timeout = config.timeout.filter(|t| !t.is_zero());
                bounded(timeout, "VerifyFirmwareConsistency", call).await
            }
            Action::DecommissionControl => {
                // Fire once: bounded by the action's timeout, else the
                // reference's 5 minutes.
                let call = registry.decommissioner(ty)?.decommission(batch);
                let timeout = config
                    .timeout
                    .filter(|t| !t.is_zero())
                    .unwrap_or(DECOMMISSION_CALL_TIMEOUT);
                bounded(Some(timeout), "DecommissionControl", call).await
            }
            Action::WaitDecommissioned {
                timeout,
                poll_interval,
            } => {
                self.wait_decommissioned(batch, *timeout, *poll_interval)
                    .await
            }
            // Bring-up control and its waiter are in no built-in rule and no
            // provider offers them; the capability check stops a rule that
            // names them before dispatch.
            Action::BringUpControl | Action::WaitBringUp { .. } => {
                Err(ActionError::permanent(format!(
                    "action {} is not supported by the local executor",
                    action.name()
                )))
            }
        }
    }

    /// The readiness gate (spec flow-core §5.7, issue 12): before a power or
    /// firmware action, waits while any component of `batch` has an
    /// operational status that holds the operation back, asking every
    /// `readiness_poll` for up to `readiness_timeout`, then fails naming the
    /// components. `override_readiness_check` skips it (logged). The wait is
    /// shown in the step report's `waiting_for`.
    async fn ready(&self, action: &Action, batch: &[ComponentRef]) -> Result<(), ActionError> {
        let operation = match action {
            Action::PowerControl { .. } => GatedOperation::PowerControl,
            Action::FirmwareControl { .. } => GatedOperation::FirmwareControl,
            _ => return Ok(()),
        };
        let Some(readiness) = self.ctx.readiness else {
            return Ok(());
        };
        let info = self.ctx.information;
        let overridden = info.override_readiness_check
            || info
                .firmware
                .as_ref()
                .is_some_and(|f| f.override_readiness_check);
        if overridden {
            tracing::info!(
                stage = self.stage,
                component_type = %self.step.component_type,
                operation = %operation,
                "readiness check overridden"
            );
            return Ok(());
        }
        let ids: Vec<uuid::Uuid> = batch.iter().map(|c| c.id).collect();
        let config = self.ctx.config;
        let deadline = Instant::now() + config.readiness_timeout;
        let mut waiting = false;
        loop {
            let holding = match readiness.holding(&ids, operation).await {
                Ok(holding) => holding,
                Err(error) => {
                    tracing::warn!(error = %error, "readiness check failed; asking again");
                    ids.clone()
                }
            };
            if holding.is_empty() {
                if waiting {
                    self.update(|s, _| s.waiting_for = None).await;
                }
                return Ok(());
            }
            let named = self.named(&holding);
            if Instant::now() >= deadline {
                return Err(ActionError::permanent(format!(
                    "readiness check timed out after {}: {} not ready for {}: {}",
                    format_go_duration(config.readiness_timeout),
                    count_noun(holding.len(), "component is", "components are"),
                    operation.words(),
                    named
                )));
            }
            let message = format!(
                "readiness: {} held back from {} (in service): {}",
                count_noun(holding.len(), "component", "components"),
                operation.words(),
                named
            );
            if !waiting {
                tracing::info!(
                    stage = self.stage,
                    component_type = %self.step.component_type,
                    operation = %operation,
                    held = holding.len(),
                    "waiting for components to be released"
                );
                waiting = true;
            }
            self.update(|s, _| s.waiting_for = Some(message)).await;
            let left = deadline.saturating_duration_since(Instant::now());
            sleep(config.readiness_poll.min(left)).await;
        }
    }

    /// External ids of the step's components among `ids`, sorted (at most
    /// five, then "and N more"), for messages.
    fn named(&self, ids: &[uuid::Uuid]) -> String {
        let mut names: Vec<&str> = self
            .components
            .iter()
            .filter(|c| ids.contains(&c.id))
            .map(|c| c.external_id.as_str())
            .collect();
        names.sort_unstable();
        first_listed(&names, ", ", " and")
    }

    /// Polls until every component reports `expected` (spec §5.6); read
    /// errors and missing entries count as "not yet".
    async fn verify_power(
        &self,
        batch: &[ComponentRef],
        expected: PowerState,
        timeout: Duration,
        poll_interval: Duration,
    ) -> Result<(), ActionError> {
        let reader = self.ctx.registry.power_status(self.step.component_type)?;
        let mut feed = reader.change_feed(batch);
        let poll = async {
            loop {
                mark_seen(&mut feed);
                match reader.power_status(batch).await {
                    Ok(states) if all_in(batch, &states, |s| *s == expected) => {
                        self.observe_power(batch, &states).await;
                        return;
                    }
                    Ok(_) => {}
                    Err(e) => tracing::debug!(error = %e, "power status read failed; polling on"),
                }
                wait_change_or(&mut feed, poll_interval).await;
            }
        };
        tokio::time::timeout(timeout, poll).await.map_err(|_| {
            ActionError::retryable(format!(
                "timeout after {} waiting for power status",
                format_go_duration(timeout)
            ))
        })
    }

    /// Polls decommission states until every component of `batch` is done
    /// (spec §5.6): the first read at once, then every `poll_interval`;
    /// `Ready`, `Maintenance(…)` and `Decommissioning/…` are pending, any
    /// other state fails naming the component and its state, as does a
    /// component the manager does not know; read errors are tolerated for
    /// [`DECOMMISSION_STATUS_ERRORS_FOR`] in a row.
    async fn wait_decommissioned(
        &self,
        batch: &[ComponentRef],
        timeout: Duration,
        poll_interval: Duration,
    ) -> Result<(), ActionError> {
        let reader = self
            .ctx
            .registry
            .decommission_status(self.step.component_type)?;
        let mut feed = reader.change_feed(batch);
        let poll = async {
            let mut failing_since: Option<Instant> = None;
            loop {
                mark_seen(&mut feed);
                match reader.decommission_status(batch).await {
                    Ok(states) => {
                        failing_since = None;
                        let mut pending = false;
                        for c in batch {
                            match states.get(&c.external_id) {
                                None => {
                                    return Err(ActionError::permanent(format!(
                                        "{} {} is not known to its component manager",
                                        c.component_type, c.external_id
                                    )));
                                }
                                Some(state) if state.is_done() => {}
                                Some(state) if state.is_pending() => pending = true,
                                Some(state) => {
                                    return Err(ActionError::permanent(format!(
                                        "{} {} did not decommission: state {}",
                                        c.component_type,
                                        c.external_id,
                                        state.text()
                                    )));
                                }
                            }
                        }
                        if !pending {
                            return Ok(());
                        }
                    }
                    Err(e) => {
                        let since = *failing_since.get_or_insert_with(Instant::now);
                        if since.elapsed() >= DECOMMISSION_STATUS_ERRORS_FOR {
                            return Err(ActionError::retryable(format!(
                                "decommission status unreadable for {}: {e}",
                                format_go_duration(DECOMMISSION_STATUS_ERRORS_FOR)
                            )));
                        }
                        tracing::debug!(error = %e, "decommission status read failed; polling on");
                    }
                }
                wait_change_or(&mut feed, poll_interval).await;
            }
        };
        tokio::time::timeout(timeout, poll)
            .await
            .unwrap_or_else(|_| {
                Err(ActionError::retryable(format!(
                    "timeout after {} waiting for decommission",
                    format_go_duration(timeout)
                )))
            })
    }

    /// Polls each listed type until it is reachable: at least one component
    /// (all with `require_all`) answers with a known power state. A type
    /// without targets counts as reachable; reachable types are not polled
    /// again.
    async fn verify_reachability(
        &self,
        types: &[ComponentType],
        require_all: bool,
        timeout: Duration,
        poll_interval: Duration,
    ) -> Result<(), ActionError> {
        let deadline = Instant::now() + timeout;
        let mut reachable: BTreeSet<ComponentType> = BTreeSet::new();
        loop {
            for ty in types {
                if reachable.contains(ty) {
                    continue;
                }
                let components = self.ctx.targets.get(ty).map_or(&[][..], Vec::as_slice);
                let round = self.responding(*ty, components);
                let Ok(responding) = tokio::time::timeout_at(deadline, round).await else {
                    break;
                };
                let enough = if require_all {
                    responding? == components.len()
                } else {
                    components.is_empty() || responding? > 0
                };
                if enough {
                    reachable.insert(*ty);
                }
            }
            let unreachable: Vec<&str> = types
                .iter()
                .filter(|t| !reachable.contains(t))
                .map(|t| t.name())
                .collect();
            if unreachable.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(ActionError::retryable(format!(
                    "timeout after {} waiting for reachability of component types: [{}]",
                    format_go_duration(timeout),
                    unreachable.join(" ")
                )));
            }
            tokio::time::sleep_until((Instant::now() + poll_interval).min(deadline)).await;
        }
    }

    /// Components of `ty` answering a power-status read, batch by batch.
    async fn responding(
        &self,
        ty: ComponentType,
        components: &[ComponentRef],
    ) -> Result<usize, ActionError> {
        let reader = self.ctx.registry.power_status(ty)?;
        let size = usize::try_from(self.step.max_parallel)
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or(components.len().max(1));
        let mut count = 0;
        for batch in components.chunks(size) {
            if let Ok(states) = reader.power_status(batch).await {
                count += batch
                    .iter()
                    .filter(|c| {
                        states
                            .get(&c.external_id)
                            .is_some_and(|s| *s != PowerState::Unknown)
                    })
                    .count();
            }
        }
        Ok(count)
    }

    /// Starts an update on the batch, then polls until every started
    /// component has ended (spec §5.5, issue 12): one failed tray does not
    /// abandon the others mid-flash. When the request names a version,
    /// components already at it are skipped, and a completed update must
    /// prove itself: the version read back afterwards is the requested one
    /// (unless `override_version_check`). Versions read back are recorded
    /// in the inventory. With `check_in_flight` (a resume or a retry), the
    /// firmware status is read first: updates still in flight are polled,
    /// not restarted, and completed ones are not sent again — a retry
    /// touches only the components that failed.
    async fn firmware(
        &self,
        batch: &[ComponentRef],
        operation: Option<&str>,
        poll_interval: Duration,
        poll_timeout: Duration,
        check_in_flight: bool,
    ) -> Result<(), ActionError> {
        let ty = self.step.component_type;
        let control = self.ctx.registry.firmware_control(ty)?;
        let status = self.ctx.registry.firmware_status(ty)?;
        let request = self
            .firmware_request(operation)
            .map_err(ActionError::permanent)?;
        let expected = named_version(&request.target_version);
        let verify = expected.is_some() && !request.override_version_check;
        if check_in_flight {
            self.adopt_jobs(status, batch);
        }
        let installed = if verify {
            self.read_versions(status, batch, &request.sub_targets)
                .await
        } else {
            HashMap::new()
        };
        let states = if check_in_flight {
            status.firmware_status(batch).await.unwrap_or_else(|e| {
                tracing::debug!(error = %e, "firmware status read before starting failed; starting all");
                HashMap::new()
            })
        } else {
            HashMap::new()
        };
        let mut plan = FirmwarePlan::default();
        for c in batch {
            let at_target = verify && installed.get(&c.external_id).map(String::as_str) == expected;
            match states.get(&c.external_id) {
                Some(FirmwareState::Queued | FirmwareState::Verifying) => plan.polled.push(c),
                // Our own earlier attempt finished it: not sent again.
                Some(FirmwareState::Completed) if !verify || at_target => plan.polled.push(c),
                _ if at_target => plan.skipped.push(c),
                _ => plan.started.push(c),
            }
        }
        let outcome = |component: &str, status: ComponentStatus| ComponentOutcome {
            component: component.to_string(),
            status,
            expected_version: expected.map(str::to_string),
            found_version: None,
            job_id: None,
            error: None,
        };
        let skipped_outcomes = || -> Vec<ComponentOutcome> {
            plan.skipped
                .iter()
                .map(|c| ComponentOutcome {
                    found_version: installed.get(&c.external_id).cloned(),
                    ..outcome(&c.external_id, ComponentStatus::Skipped)
                })
                .collect()
        };
        if !plan.skipped.is_empty() {
            tracing::info!(
                component_type = %ty,
                skipped = plan.skipped.len(),
                version = expected.unwrap_or_default(),
                "components already at the requested firmware version: skipped"
            );
        }
        if !plan.started.is_empty() {
            let started: Vec<ComponentRef> = plan.started.iter().map(|c| (*c).clone()).collect();
            if let Err(e) = control.firmware_start(&started, &request).await {
                self.record(skipped_outcomes(), None).await;
                return Err(e.into());
            }
        } else if !plan.polled.is_empty() {
            tracing::info!(component_type = %ty, "firmware updates in flight: polling, not restarting");
        }
        let waiting: Vec<ComponentRef> = plan
            .started
            .iter()
            .chain(&plan.polled)
            .map(|c| (*c).clone())
            .collect();
        let jobs = status.firmware_jobs(&waiting);
        // Skipped and started components in one report change (each change
        // is a write of the task's report).
        let mut outcomes = skipped_outcomes();
        outcomes.extend(waiting.iter().map(|c| ComponentOutcome {
            job_id: jobs.get(&c.external_id).map(|j| j.job_id.clone()),
            ..outcome(&c.external_id, ComponentStatus::Running)
        }));
        self.record(outcomes, None).await;
        let done_before = self.done_before(batch) + plan.skipped.len();
        let mut feed = status.change_feed(&waiting);
        let mut last: HashMap<String, FirmwareState> = HashMap::new();
        let poll = async {
            if waiting.is_empty() {
                return;
            }
            loop {
                mark_seen(&mut feed);
                match status.firmware_status(&waiting).await {
                    Ok(states) => {
                        let ended = |s: &FirmwareState| {
                            matches!(s, FirmwareState::Completed | FirmwareState::Failed)
                        };
                        let completed = count_in(&waiting, &states, FirmwareState::Completed);
                        let failed = count_in(&waiting, &states, FirmwareState::Failed);
                        self.progress(done_before + completed, failed).await;
                        let all_ended = all_in(&waiting, &states, ended);
                        last = states;
                        if all_ended {
                            return;
                        }
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "firmware status read failed; polling on")
                    }
                }
                wait_change_or(&mut feed, poll_interval).await;
            }
        };
        let timed_out = tokio::time::timeout(poll_timeout, poll).await.is_err();
        // What is installed now, for the inventory and the proof (a batch
        // skipped whole was read just before).
        let found = if waiting.is_empty() {
            installed
        } else {
            self.read_versions(status, batch, &request.sub_targets)
                .await
        };
        let jobs = status.firmware_jobs(&waiting);
        let mut failures = FirmwareFailures::default();
        let mut ended = Vec::with_capacity(waiting.len());
        for c in &waiting {
            let id = c.external_id.as_str();
            let found_version = found.get(id).cloned();
            let job = jobs.get(id);
            let (status, error) = match last.get(id) {
                Some(FirmwareState::Completed)
                    if verify && found.get(id).map(String::as_str) != expected =>
                {
                    let shown = found_version.as_deref().unwrap_or("unknown (no answer)");
                    failures.mismatched.push(format!(
                        "{id}: expected {}, found {shown}",
                        expected.unwrap_or_default()
                    ));
                    (
                        ComponentStatus::Failed,
                        Some(format!(
                            "version check failed: expected {}, found {shown}",
                            expected.unwrap_or_default()
                        )),
                    )
                }
                Some(FirmwareState::Completed) => (ComponentStatus::Completed, None),
                Some(FirmwareState::Failed) => {
                    failures.failed.push(id.to_string());
                    (
                        ComponentStatus::Failed,
                        Some(
                            job.and_then(|j| j.error.clone())
                                .unwrap_or_else(|| "firmware update failed".to_string()),
                        ),
                    )
                }
                _ => {
                    failures.unfinished.push(id.to_string());
                    (
                        ComponentStatus::Failed,
                        Some(format!(
                            "update not finished after {}",
                            format_go_duration(poll_timeout)
                        )),
                    )
                }
            };
            ended.push(ComponentOutcome {
                found_version,
                job_id: job.map(|j| j.job_id.clone()),
                error,
                ..outcome(id, status)
            });
        }
        let proven = ended
            .iter()
            .filter(|o| o.status == ComponentStatus::Completed)
            .count();
        let unproven = ended.len() - proven;
        // The counters follow the proof, not the provider's "Completed";
        // outcomes and counters are one report change.
        self.record(ended, Some((done_before + proven, unproven)))
            .await;
        if timed_out {
            return Err(ActionError::retryable(format!(
                "{ty} firmware update timed out after {}",
                format_go_duration(poll_timeout)
            )));
        }
        failures.into_result()
    }

    /// Reads installed versions of `batch` and records them in the
    /// inventory; a failed read is logged and gives an empty map (every
    /// component "did not answer").
    async fn read_versions(
        &self,
        status: &dyn crate::manager::FirmwareStatus,
        batch: &[ComponentRef],
        sub_targets: &[String],
    ) -> HashMap<String, String> {
        let versions = match status.installed_versions(batch, sub_targets).await {
            Ok(versions) => versions,
            Err(e) => {
                tracing::warn!(component_type = %self.step.component_type, error = %e, "firmware version read-back failed");
                return HashMap::new();
            }
        };
        let now = Utc::now();
        let observations: Vec<Observation> = batch
            .iter()
            .filter_map(|c| {
                Some(Observation {
                    component_id: c.id,
                    firmware_version: Some(versions.get(&c.external_id)?.clone()),
                    power_state: None,
                    observed_at: now,
                })
            })
            .collect();
        self.observe(&observations).await;
        versions
    }

    /// After a power operation: reads the batch's power states back for
    /// the inventory, when the type's manager can and an observer listens.
    /// A failed read only logs: the operation itself succeeded.
    async fn read_back_power(&self, batch: &[ComponentRef]) {
        // A later status action of the step reads (and records) the state
        // anyway: no extra hardware call for it.
        let later_read = self
            .step
            .post_operation
            .iter()
            .any(|a| matches!(a.name.as_str(), "VerifyPowerStatus" | "GetPowerStatus"));
        if self.ctx.observer.is_none() || later_read {
            return;
        }
        let Ok(reader) = self.ctx.registry.power_status(self.step.component_type) else {
            return;
        };
        match reader.power_status(batch).await {
            Ok(states) => self.observe_power(batch, &states).await,
            Err(e) => tracing::debug!(error = %e, "power state read-back failed"),
        }
    }

    /// Records power states read from `batch` in the inventory.
    async fn observe_power(&self, batch: &[ComponentRef], states: &HashMap<String, PowerState>) {
        let now = Utc::now();
        let observations: Vec<Observation> = batch
            .iter()
            .filter_map(|c| {
                let state = states.get(&c.external_id)?;
                Some(Observation {
                    component_id: c.id,
                    firmware_version: None,
                    power_state: Some(state.name().to_string()),
                    observed_at: now,
                })
            })
            .collect();
        self.observe(&observations).await;
    }

    async fn observe(&self, observations: &[Observation]) {
        if let (Some(observer), false) = (self.ctx.observer, observations.is_empty()) {
            let ticket = observer.observed(observations).await;
            self.ctx
                .ticket
                .fetch_max(ticket, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Hands the provider the jobs a previous process started for `batch`
    /// (the persisted report's running components with a job id).
    fn adopt_jobs(&self, status: &dyn crate::manager::FirmwareStatus, batch: &[ComponentRef]) {
        let report = self.ctx.reporter.snapshot();
        let Some(step) = report.stage(self.stage).and_then(|s| {
            s.steps
                .iter()
                .find(|s| s.component_type == self.step.component_type)
        }) else {
            return;
        };
        let jobs: Vec<(ComponentRef, String)> = batch
            .iter()
            .filter_map(|c| {
                let outcome = step
                    .components
                    .iter()
                    .find(|o| o.component == c.external_id)?;
                let job_id = outcome.job_id.clone()?;
                (outcome.status == ComponentStatus::Running).then(|| (c.clone(), job_id))
            })
            .collect();
        if !jobs.is_empty() {
            status.adopt_firmware_jobs(&jobs);
        }
    }

    /// Records outcomes in one report change (one snapshot pushed).
    /// Records `outcomes` and, with `progress`, the completed / failed
    /// counters, as one report change.
    async fn record(&self, outcomes: Vec<ComponentOutcome>, progress: Option<(usize, usize)>) {
        if outcomes.is_empty() && progress.is_none() {
            return;
        }
        let progress = progress.map(|(completed, failed)| {
            (
                u32::try_from(completed).unwrap_or(u32::MAX),
                u32::try_from(failed).unwrap_or(u32::MAX),
            )
        });
        self.update(|s, _| {
            for outcome in outcomes {
                s.record(outcome);
            }
            if let Some((completed, failed)) = progress {
                s.set_progress(completed, failed);
            }
        })
        .await;
    }

    /// Components of earlier batches (already done) for progress counts.
    fn done_before(&self, batch: &[ComponentRef]) -> usize {
        let Some(first) = batch.first() else {
            return 0;
        };
        self.components.iter().position(|c| c == first).unwrap_or(0)
    }

    /// The update request from the task's firmware payload (spec §5.5).
    fn firmware_request(&self, operation: Option<&str>) -> Result<FirmwareRequest, String> {
        let info = self.ctx.information;
        let operation = operation.unwrap_or(info.code.as_str()).to_string();
        let Some(payload) = &info.firmware else {
            return Ok(FirmwareRequest {
                operation,
                override_readiness_check: info.override_readiness_check,
                ..FirmwareRequest::default()
            });
        };
        let credentials = match &payload.authentication_data {
            None => None,
            Some(sealed) => self.open_credentials(sealed)?,
        };
        let window = rackflow_domain::task::Window::of(info);
        let target_version = layered_version(
            payload.target_version.as_deref().unwrap_or(""),
            self.step.component_type,
        );
        if let Some(bundle) = &payload.bundle
            && target_version.is_empty()
        {
            // Never "the manager's default" by omission.
            return Err(format!(
                "firmware bundle {} has no {} version for this rack's model",
                bundle.label(),
                self.step.component_type
            ));
        }
        Ok(FirmwareRequest {
            operation,
            target_version,
            window_start: window.opens,
            window_end: window.closes,
            sub_targets: payload.sub_targets.clone(),
            override_readiness_check: payload.override_readiness_check
                || info.override_readiness_check,
            override_version_check: payload.override_version_check,
            credentials,
            firmware_object: payload.firmware_objects.values().next().cloned(),
        })
    }

    /// This step's component type's credential from the task's sealed
    /// `authentication_data`. The error names the key, never the secret.
    fn open_credentials(
        &self,
        sealed: &rackflow_domain::run::EncryptedSecret,
    ) -> Result<Option<rackflow_domain::run::SecretText>, String> {
        let keys = self.ctx.keys.ok_or(
            "the task's firmware credentials are sealed, but this server has no data key \
             (secrets.key_file)",
        )?;
        let plaintext = keys
            .open(&sealed.0)
            .map_err(|e| format!("firmware credentials: {e}"))?;
        let credentials: rackflow_domain::run::FirmwareCredentials =
            serde_json::from_slice(&plaintext)
                .map_err(|_| "firmware credentials: not in the expected form".to_string())?;
        Ok(credentials.for_type(self.step.component_type))
    }
}

/// How a firmware attempt treats each component of its batch.
#[derive(Default)]
struct FirmwarePlan<'a> {
    /// Not sent: already at the requested version.
    skipped: Vec<&'a ComponentRef>,
    /// Sent an update now.
    started: Vec<&'a ComponentRef>,
    /// In flight or finished by an earlier attempt: only polled.
    polled: Vec<&'a ComponentRef>,
}

/// What went wrong with a batch's updates, once every one has ended.
#[derive(Default)]
struct FirmwareFailures {
    failed: Vec<String>,
    mismatched: Vec<String>,
    unfinished: Vec<String>,
}

impl FirmwareFailures {
    fn into_result(self) -> Result<(), ActionError> {
        let mut parts = Vec::new();
        if !self.failed.is_empty() {
            parts.push(format!(
                "firmware update failed for components: [{}]",
                self.failed.join(" ")
            ));
        }
        if !self.unfinished.is_empty() {
            parts.push(format!(
                "firmware update did not finish for components: [{}]",
                self.unfinished.join(" ")
            ));
        }
        if !self.mismatched.is_empty() {
            let listed = first_listed(&self.mismatched, "; ", "; and");
            parts.push(format!("firmware version check failed: {listed}"));
        }
        if parts.is_empty() {
            Ok(())
        } else {
            Err(ActionError::retryable(parts.join("; ")))
        }
    }
}

/// The version an update installs, when its target names one: not empty
/// or `latest` (the manager's default, whose concrete version only the
/// read-back tells) and not a JSON document (a per-type section that is
/// itself an object describes more than one version).
fn named_version(target: &str) -> Option<&str> {
    let target = target.trim();
    if target.is_empty()
        || target.eq_ignore_ascii_case("latest")
        || target.starts_with('{')
        || target.starts_with('[')
    {
        None
    } else {
        Some(target)
    }
}

fn count_in(
    batch: &[ComponentRef],
    states: &HashMap<String, FirmwareState>,
    wanted: FirmwareState,
) -> usize {
    batch
        .iter()
        .filter(|c| states.get(&c.external_id) == Some(&wanted))
        .count()
}

/// A layered target version (a JSON object keyed `compute`, `nvswitch`,
/// `powershelf`) gives each type its own section: strings unquoted, other
/// values as raw JSON, a missing key as "" (the manager's default). Any
/// other text is the version of every type.
fn layered_version(target: &str, ty: ComponentType) -> String {
    let Ok(serde_json::Value::Object(layers)) = serde_json::from_str::<serde_json::Value>(target)
    else {
        return target.to_string();
    };
    const KEYS: [&str; 3] = ["compute", "nvswitch", "powershelf"];
    if !layers.keys().all(|k| KEYS.contains(&k.as_str())) {
        return target.to_string();
    }
    match layers.get(&ty.name().to_ascii_lowercase()) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

fn all_in<S>(batch: &[ComponentRef], states: &HashMap<String, S>, ok: impl Fn(&S) -> bool) -> bool {
    batch
        .iter()
        .all(|c| states.get(&c.external_id).is_some_and(&ok))
}

/// Bounds a manager call by the action's own timeout, when it has one.
async fn bounded<T>(
    timeout: Option<Duration>,
    action: &str,
    call: impl Future<Output = Result<T, ManagerError>>,
) -> Result<T, ActionError> {
    match timeout {
        Some(limit) => tokio::time::timeout(limit, call)
            .await
            .map_err(|_| {
                ActionError::retryable(format!(
                    "{action} timed out after {}",
                    format_go_duration(limit)
                ))
            })?
            .map_err(ActionError::from),
        None => call.await.map_err(ActionError::from),
    }
}

/// A zero duration does not touch the timer.
async fn sleep(duration: Duration) {
    if !duration.is_zero() {
        tokio::time::sleep(duration).await;
    }
}

/// Marks the provider's current change count as seen, before a status read,
/// so a change that lands during the read still wakes the next wait.
fn mark_seen(feed: &mut Option<tokio::sync::watch::Receiver<u64>>) {
    if let Some(rx) = feed {
        rx.borrow_and_update();
    }
}

/// Waits for the provider's next change notification or `poll_interval`,
/// whichever comes first; without a feed (or once it closed) it just polls.
async fn wait_change_or(
    feed: &mut Option<tokio::sync::watch::Receiver<u64>>,
    poll_interval: Duration,
) {
    match feed {
        Some(rx) => {
            tokio::select! {
                changed = rx.changed() => {
                    if changed.is_err() {
                        *feed = None;
                    }
                }
                () = sleep(poll_interval) => {}
            }
        }
        None => sleep(poll_interval).await,
    }
}

/// "1 component" / "3 components".
fn count_noun(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        let policy = RetryPolicy {
            max_attempts: 5,
            initial_interval: Duration::from_secs(1),
            backoff_coefficient: 2.0,
            max_interval: Some(Duration::from_secs(3)),
        };
        let retry = Retry::new(Some(&policy), &policy);
        let waits: Vec<_> = (1..5).map(|a| retry.backoff(a).as_secs()).collect();
        assert_eq!(waits, [1, 2, 3, 3]);
        let zero = RetryPolicy {
            max_attempts: 0,
            initial_interval: Duration::ZERO,
            backoff_coefficient: 0.5,
            max_interval: None,
        };
        let retry = Retry::new(Some(&zero), &policy);
        assert_eq!(retry.max_attempts, 1);
        assert_eq!(retry.initial, Duration::from_secs(1));
        assert_eq!(retry.max_interval, Duration::from_secs(100));
        assert_eq!(retry.backoff(3), Duration::from_secs(1));
    }

    #[test]
    fn layered_versions() {
        let layered = r#"{"compute": "2.1", "nvswitch": {"bundle": "x"}}"#;
        assert_eq!(layered_version(layered, ComponentType::Compute), "2.1");
        assert_eq!(
            layered_version(layered, ComponentType::NvSwitch),
            r#"{"bundle":"x"}"#
        );
        assert_eq!(layered_version(layered, ComponentType::PowerShelf), "");
        assert_eq!(layered_version("3.0.0", ComponentType::Compute), "3.0.0");
        assert_eq!(
            layered_version(r#"{"other": 1}"#, ComponentType::Compute),
            r#"{"other": 1}"#
        );
    }
}
