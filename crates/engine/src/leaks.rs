//! The leak manager (issue 34): takes leak reports from every source, keeps
//! the components' leak state and the leak events (see
//! `rackflow_domain::leak`), and runs the response to a new leak — the
//! actions of the effective event rule of its rack (rack binding > site
//! binding > built-in).
//!
//! Response, per action whose condition matches the leak (its severity and
//! the leaking component's type):
//! * `submit_task`: the task's components by target strategy (the leaking
//!   component; its rack; or, for `affected_components`, the leaking
//!   component and those in lower slots of its rack — the component alone
//!   when it has no valid slot). Running and pending tasks on the rack that
//!   conflict with it are **cancelled first** (they end terminated, their
//!   cleanup runs) with a message naming the leak — a rollout records such
//!   a child's target as failed, so it counts toward its gates; waiting
//!   tasks stay waiting; then the task is submitted with the
//!   rule's conflict strategy and the idempotency key
//!   `leak:{event}:{action}`, so a response driven twice (two replicas, a
//!   retry) submits one task.
//! * `send_alert`: an error-level log line and an audit event.
//! * `noop`: an audit event with its reason.
//!
//! Every response is one audit event (actor `event-rule`, action
//! `event_rule/hardware.leak.detected`) naming the rule, the leak event and
//! the tasks.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use rackflow_domain::audit::AuditEvent;
use rackflow_domain::conflict::{TaskShape, conflicts};
use rackflow_domain::event_rule::{
    self, ActionSpec, ConflictStrategy, EventRule, EventRuleInvalid, TargetStrategy, TaskOperation,
};
use rackflow_domain::leak::{LeakEvent, LeakReport, LeakReported};
use rackflow_domain::run::{FirmwarePayload, Page, QueueStrategy};
use rackflow_domain::target::{ComponentTarget, TargetSpec};
use rackflow_domain::task::{QueuePolicy, TaskInformation, TaskStatus, TaskType};
use rackflow_store::{LeakEventFilter, Store, TaskFilter};
use uuid::Uuid;

use crate::audit::AuditTrail;
use crate::background::Background;
use crate::error::{EngineError, EventRuleError};
use crate::event_rules::EventRuleManager;
use crate::tasks::{SubmitRequest, TaskManager};

/// What a leak source says about one component at one reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    /// The component's external id.
    pub external_id: String,
    pub leaking: bool,
    /// How bad the source rates it (meaningful when leaking).
    pub severity: event_rule::Severity,
    /// What the source saw (the detectors that read a leak), for the
    /// report's message.
    pub message: String,
}

/// A source of leak sightings the detector reads every interval: the
/// simulated fleet's leak detectors, or the BMCs' leak detectors through
/// the rack manager (`manager::rms_leaks`).
#[async_trait::async_trait]
pub trait LeakSource: Send + Sync {
    /// The reports' `source`.
    fn name(&self) -> &str;
    /// One sighting per component it can read.
    async fn sightings(&self) -> Result<Vec<Sighting>, String>;
}

#[async_trait::async_trait]
impl LeakSource for crate::sim::SimFleet {
    fn name(&self) -> &str {
        "sim"
    }

    async fn sightings(&self) -> Result<Vec<Sighting>, String> {
        Ok(self
            .leak_detectors()
            .into_iter()
            .map(|(external_id, leaking)| Sighting {
                external_id,
                leaking,
                severity: event_rule::Severity::Critical,
                message: String::new(),
            })
            .collect())
    }
}

/// Default of how long a leak event may stay without its response before
/// the detection loop runs it (longer than a response takes, so the process
/// that stored the event is not raced).
pub const DEFAULT_REDRIVE_AFTER: Duration = Duration::from_secs(30);

/// The actor of the audit events a response writes.
pub const RESPONSE_ACTOR: &str = "event-rule";

/// Records leak reports, lists leak events and runs leak responses.
#[derive(Clone)]
pub struct LeakManager {
    store: Arc<dyn Store>,
    rules: EventRuleManager,
    tasks: Arc<TaskManager>,
    audit: Arc<AuditTrail>,
    metrics: Arc<crate::metrics::Metrics>,
    /// The detection loop.
    background: Background,
}

/// What one response did, for the audit trail and the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Response {
    pub rule_id: Option<Uuid>,
    pub submitted: Vec<Uuid>,
    pub cancelled: Vec<Uuid>,
    pub notes: Vec<String>,
}

impl LeakManager {
    pub fn new(store: Arc<dyn Store>, tasks: Arc<TaskManager>, audit: Arc<AuditTrail>) -> Self {
        LeakManager {
            rules: EventRuleManager::new(store.clone()),
            store,
            tasks,
            audit,
            metrics: Arc::default(),
            background: Background::new("leak detection"),
        }
    }

    /// Counts into `metrics` (the server's registry) instead of a registry
    /// of its own.
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Runs the responses that did not run (the process that stored the
    /// event died before): open events unhandled for at least `after`.
    /// Their task submissions carry the same idempotency keys, so a
    /// response that did half its work does not submit twice. Returns the
    /// responses run.
    pub async fn redrive(&self, after: Duration) -> Result<usize, EngineError> {
        let before = Utc::now()
            - chrono::TimeDelta::from_std(after).unwrap_or(chrono::TimeDelta::seconds(30));
        let mut ran = 0;
        for event in self.store.leak_events_unhandled(before).await? {
            tracing::warn!(event_id = %event.id, component = %event.component_id, "running a leak response that did not run");
            self.respond(&event).await?;
            self.store.leak_event_handled(event.id).await?;
            ran += 1;
        }
        Ok(ran)
    }

    /// Reads `sources` every `interval` and reports what they see, and runs
    /// responses that did not run, until [`Self::shutdown`].
    pub fn spawn_detector(
        &self,
        sources: Vec<Arc<dyn LeakSource>>,
        interval: Duration,
        redrive_after: Duration,
    ) {
        let this = self.clone();
        let stop = self.background.token().clone();
        self.background.spawn("leak detector", async move {
            tracing::info!(interval_ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX), sources = sources.len(), "leak detection started");
            loop {
                if let Err(e) = this.detect_once(&sources).await {
                    tracing::warn!(error = %e, "leak detection pass failed; trying again next interval");
                }
                if let Err(e) = this.redrive(redrive_after).await {
                    tracing::warn!(error = %e, "re-running leak responses failed; trying again next interval");
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(interval) => {}
                }
            }
        });
    }

    /// Whether a dry reading from `source` may close `component`'s leak:
    /// its open event is that source's (or there is none, and the reading
    /// only corrects the component's status).
    async fn closes(&self, component: Uuid, source: &str) -> Result<bool, EngineError> {
        let filter = LeakEventFilter {
            component_id: Some(component),
            open_only: true,
            ..LeakEventFilter::default()
        };
        let (open, _) = self
            .store
            .leak_events_list(
                &filter,
                Page {
                    offset: 0,
                    limit: 1,
                },
            )
            .await?;
        Ok(open.first().is_none_or(|event| event.source == source))
    }

    /// Stops the detection loop and waits for a pass in flight.
    pub async fn shutdown(&self) {
        self.background.shutdown().await;
    }

    /// One pass: every source's sightings as reports. A leaking detector is
    /// reported every pass (an observation of the open leak after the
    /// first); a dry one only when its component was leaking, and only to
    /// close a leak this source opened — a facility monitor's alarm stays
    /// open until that monitor (or an operator, through the API) clears it,
    /// whatever the BMC's detectors read. Returns the reports made.
    pub async fn detect_once(&self, sources: &[Arc<dyn LeakSource>]) -> Result<usize, EngineError> {
        let mut made = 0;
        for source in sources {
            let sightings = match source.sightings().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(source = source.name(), error = %e, "leak source could not be read");
                    continue;
                }
            };
            if sightings.is_empty() {
                continue;
            }
            let query = rackflow_store::ComponentFilterQuery {
                external_ids: sightings.iter().map(|s| s.external_id.clone()).collect(),
                ..Default::default()
            };
            let (components, _) = self
                .store
                .component_list(
                    &query,
                    Page {
                        offset: 0,
                        limit: 0,
                    },
                )
                .await?;
            let now = Utc::now();
            for sighting in &sightings {
                let leaking = sighting.leaking;
                for component in components
                    .iter()
                    .filter(|c| c.external_id.as_deref() == Some(sighting.external_id.as_str()))
                {
                    let was_leaking = component.leak.is_some_and(|l| {
                        l.status == rackflow_domain::inventory::LeakStatus::Detected
                    });
                    if !leaking
                        && (!was_leaking || !self.closes(component.id, source.name()).await?)
                    {
                        continue;
                    }
                    let report = LeakReport {
                        component_id: component.id,
                        source: source.name().to_string(),
                        severity: sighting.severity,
                        detected: leaking,
                        observed_at: now,
                        message: sighting.message.clone(),
                    };
                    match self.report(report).await {
                        Ok(_) => made += 1,
                        Err(e) => {
                            tracing::warn!(component = %component.id, error = %e, "leak report from a source failed")
                        }
                    }
                }
            }
        }
        Ok(made)
    }

    /// Applies one report; a new leak runs its response. An unknown
    /// component is not found.
    pub async fn report(
        &self,
        report: LeakReport,
    ) -> Result<(LeakReported, Option<Response>), EngineError> {
        report
            .check()
            .map_err(|m| EngineError::EventRule(EventRuleError::Invalid(EventRuleInvalid(m))))?;
        let outcome = self.store.leak_report(&report).await?;
        self.metrics.leak_reported(match &outcome {
            LeakReported::New(_) => "new",
            LeakReported::Repeat(_) => "repeat",
            LeakReported::Cleared(_) => "cleared",
            LeakReported::Stale => "stale",
            LeakReported::ComponentNotFound => "component_not_found",
        });
        let component = report.component_id;
        let response = match &outcome {
            LeakReported::ComponentNotFound => {
                return Err(EngineError::ComponentNotFound(component));
            }
            LeakReported::New(event) => {
                tracing::warn!(
                    %component,
                    rack = event.rack_id.map(tracing::field::display),
                    event_id = %event.id,
                    source = %event.source,
                    severity = %event.severity,
                    "coolant leak detected"
                );
                let response = self.respond(event).await?;
                self.store.leak_event_handled(event.id).await?;
                Some(response)
            }
            LeakReported::Repeat(event) => {
                tracing::debug!(%component, event_id = %event.id, observations = event.observations, "leak reported again");
                None
            }
            LeakReported::Cleared(Some(event)) => {
                tracing::info!(%component, event_id = %event.id, source = %report.source, "leak cleared");
                None
            }
            LeakReported::Cleared(None) | LeakReported::Stale => None,
        };
        Ok((outcome, response))
    }

    pub async fn list(
        &self,
        filter: &LeakEventFilter,
        page: Page,
    ) -> Result<(Vec<LeakEvent>, i64), EngineError> {
        Ok(self.store.leak_events_list(filter, page).await?)
    }

    /// Runs the effective rule's matching actions for a new leak.
    pub async fn respond(&self, event: &LeakEvent) -> Result<Response, EngineError> {
        let mut response = Response::default();
        let Some(rack) = event.rack_id else {
            response
                .notes
                .push("the leaking component is in no rack: nothing to act on".into());
            self.record(event, None, &response).await;
            return Ok(response);
        };
        let rule = self
            .rules
            .effective_for_rack(event_rule::LEAK_DETECTED, rack)
            .await?;
        response.rule_id = Some(rule.id);
        let components = self.store.components_of_racks(&[rack]).await?;
        let source_type = components
            .iter()
            .find(|c| c.id == event.component_id)
            .map(|c| c.component_type);
        for action in &rule.actions {
            if !action.condition.matches(event.severity, source_type) {
                response
                    .notes
                    .push(format!("{}: condition not met", action.name));
                continue;
            }
            match &action.spec {
                ActionSpec::SubmitTask {
                    operation,
                    target_strategy,
                    conflict_strategy,
                    description,
                } => {
                    let targets = targets(*target_strategy, event, &components);
                    if targets.is_empty() {
                        response
                            .notes
                            .push(format!("{}: no components to act on", action.name));
                        continue;
                    }
                    let request = submit_request(
                        &rule,
                        &action.name,
                        operation,
                        *conflict_strategy,
                        description,
                        event,
                        rack,
                        &targets,
                    );
                    let mut ours = rackflow_domain::ComponentsByType::new();
                    for id in &targets {
                        if let Some(c) = components.iter().find(|c| c.id == *id) {
                            ours.push(c.component_type, *id);
                        }
                    }
                    let cancelled = self.preempt(request.task_type, &ours, rack, event).await?;
                    response.cancelled.extend(cancelled);
                    match self.tasks.submit(request).await {
                        Ok(ids) => {
                            tracing::warn!(event_id = %event.id, rule_id = %rule.id, action = %action.name, tasks = ?ids, "leak response submitted");
                            response.submitted.extend(ids);
                        }
                        Err(e) => {
                            tracing::error!(event_id = %event.id, rule_id = %rule.id, action = %action.name, error = %e, "leak response task refused");
                            response
                                .notes
                                .push(format!("{}: task refused: {e}", action.name));
                        }
                    }
                }
                ActionSpec::SendAlert { severity, message } => {
                    tracing::error!(
                        alert = %message,
                        severity = %severity,
                        event_id = %event.id,
                        component = %event.component_id,
                        %rack,
                        rule_id = %rule.id,
                        "event-rule alert: coolant leak"
                    );
                    self.metrics.alert_sent(rule.id, severity.as_str());
                    response
                        .notes
                        .push(format!("{}: alert ({severity}) {message}", action.name));
                }
                ActionSpec::Noop { reason } => {
                    response
                        .notes
                        .push(format!("{}: no action ({reason})", action.name));
                }
            }
        }
        self.metrics
            .leak_response(response.submitted.len(), response.cancelled.len());
        self.record(event, Some(&rule), &response).await;
        Ok(response)
    }

    /// Cancels the rack's running and pending tasks that conflict with the
    /// response (`task_type` on `ours`), but not another leak response: the
    /// leak goes first. Waiting tasks stay waiting.
    async fn preempt(
        &self,
        task_type: TaskType,
        ours: &rackflow_domain::ComponentsByType,
        rack: Uuid,
        event: &LeakEvent,
    ) -> Result<Vec<Uuid>, EngineError> {
        let filter = TaskFilter {
            rack_id: Some(rack),
            statuses: vec![TaskStatus::Running, TaskStatus::Pending],
            ..TaskFilter::default()
        };
        let (active, _) = self
            .store
            .task_list(
                &filter,
                Page {
                    offset: 0,
                    limit: 1000,
                },
                false,
            )
            .await?;
        let ours = TaskShape {
            task_type,
            components: ours,
        };
        let message = rackflow_domain::leak::preemption_message(event.component_id, event.id);
        let mut cancelled = Vec::new();
        for task in &active {
            let is_leak_response = task
                .idempotency_key
                .as_deref()
                .is_some_and(|k| k.starts_with("leak:"));
            let theirs = TaskShape {
                task_type: task.task_type,
                components: &task.components_by_type,
            };
            if is_leak_response || !conflicts(&ours, &theirs) {
                continue;
            }
            match self.tasks.stop(task.id, &message).await {
                Ok(_) => {
                    tracing::warn!(task_id = %task.id, event_id = %event.id, "task cancelled for a leak response");
                    cancelled.push(task.id);
                }
                Err(e) => {
                    tracing::warn!(task_id = %task.id, error = %e, "task not cancelled for the leak response (it ended meanwhile?)")
                }
            }
        }
        Ok(cancelled)
    }

    async fn record(&self, event: &LeakEvent, rule: Option<&EventRule>, response: &Response) {
        let mut audit = AuditEvent::new(
            Utc::now(),
            RESPONSE_ACTOR,
            &format!("event_rule/{}", event_rule::LEAK_DETECTED),
        );
        audit.subject_ids = rule
            .map(|r| r.id.to_string())
            .into_iter()
            .chain([event.id.to_string(), event.component_id.to_string()])
            .chain(response.submitted.iter().map(Uuid::to_string))
            .chain(response.cancelled.iter().map(Uuid::to_string))
            .collect();
        audit.summary = format!(
            "leak on component {} ({}, {}): rule {}",
            event.component_id,
            event.source,
            event.severity,
            rule.map_or_else(|| "none".to_string(), |r| format!("{} ({})", r.id, r.name)),
        );
        audit.message = format!(
            "submitted {:?}; cancelled {:?}; {}",
            response.submitted,
            response.cancelled,
            response.notes.join("; ")
        );
        self.audit.record(audit).await;
    }
}

/// The components a `submit_task` action acts on.
fn targets(
    strategy: TargetStrategy,
    event: &LeakEvent,
    components: &[rackflow_domain::inventory::Component],
) -> Vec<Uuid> {
    match strategy {
        TargetStrategy::Component => vec![event.component_id],
        TargetStrategy::Rack => components.iter().map(|c| c.id).collect(),
        TargetStrategy::AffectedComponents => {
            let slots: Vec<(Uuid, Option<i32>)> = components
                .iter()
                .map(|c| (c.id, Some(c.position.slot_id)))
                .collect();
            event_rule::leak_affected(event.component_id, &slots).unwrap_or_else(|| {
                tracing::warn!(component = %event.component_id, "leaking component has no valid slot: acting on it alone");
                vec![event.component_id]
            })
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn submit_request(
    rule: &EventRule,
    action: &str,
    operation: &TaskOperation,
    conflict: ConflictStrategy,
    description: &str,
    event: &LeakEvent,
    rack: Uuid,
    targets: &[Uuid],
) -> SubmitRequest {
    let (task_type, information) = match operation {
        TaskOperation::PowerControl {
            code,
            override_readiness_check: _,
        } => (
            TaskType::PowerControl,
            TaskInformation {
                code: code.clone(),
                // A leaking tray is powered off even while in service: the
                // readiness gate would hold the response for 30 minutes.
                override_readiness_check: true,
                firmware: None,
            },
        ),
        TaskOperation::FirmwareControl {
            code,
            target_version,
            start_time,
            end_time,
            sub_targets,
            override_readiness_check,
            override_version_check,
        } => (
            TaskType::FirmwareControl,
            TaskInformation {
                code: code.clone(),
                override_readiness_check: *override_readiness_check,
                firmware: Some(FirmwarePayload {
                    target_version: target_version.clone(),
                    start_time: start_time.unwrap_or(0),
                    end_time: end_time.unwrap_or(0),
                    sub_targets: sub_targets.clone(),
                    override_readiness_check: *override_readiness_check,
                    override_version_check: *override_version_check,
                    ..FirmwarePayload::default()
                }),
            },
        ),
    };
    let target =
        TargetSpec::Components(targets.iter().map(|id| ComponentTarget::Id(*id)).collect());
    let description = if description.is_empty() {
        "Leakage response".to_string()
    } else {
        description.to_string()
    };
    SubmitRequest {
        task_type,
        information,
        description: format!(
            "{description}: leak event {} on component {} (event rule {} action {action})",
            event.id, event.component_id, rule.id
        ),
        target,
        queue: QueuePolicy {
            strategy: match conflict {
                ConflictStrategy::Queue => QueueStrategy::Queue,
                ConflictStrategy::Reject => QueueStrategy::Reject,
            },
            timeout_secs: rackflow_domain::task::DEFAULT_QUEUE_TIMEOUT_SECS,
        },
        rule_id: None,
        idempotency_key: Some(format!("leak:{}:{action}", event.id)),
        required_rack_id: Some(rack),
        trigger: rackflow_domain::task::TaskTrigger::EventRuleExecution { rule_id: rule.id },
    }
}
