//! Task submission, execution and cancellation (spec flow-core §3).
//!
//! Owns the submission pipeline (target resolution, rule resolution and
//! applicability, capability checks, per-rack conflict detection with the
//! waiting queue), the runner that hands pending tasks to the local executor
//! and records their outcome, the promoter that moves waiting tasks forward
//! in strict FIFO order, cancellation, and recovery after a restart.
//!
//! Durability: every state change is a committed store write before it is
//! acted on. A task that was `running` when the process died still has its
//! frozen rule definition and its last report; [`TaskManager::recover`]
//! resumes it from the first unfinished stage. Graceful shutdown stops the
//! executors without touching task rows, so they resume the same way.
//!
//! Clustering (several processes on one PostgreSQL database): every running
//! task has an owner — the process executing it — and a lease the owner
//! renews; the `leases` submodule renews them, adopts tasks whose lease
//! expired, and delivers cancels announced by other processes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use parking_lot::Mutex;
use rackflow_domain::conflict::{self, Promotion, PromotionInput, Submission, TaskShape};
use rackflow_domain::dispatch;
use rackflow_domain::inventory::{LifecycleChange, LifecycleStatus, Rack};
use rackflow_domain::planner;
use rackflow_domain::report::Report;
use rackflow_domain::rule::{self, OperationRule};
use rackflow_domain::run::{OperationRunTarget, QueueStrategy};
use rackflow_domain::target::TargetSpec;
use rackflow_domain::task::{
    QueuePolicy, Task, TaskInformation, TaskStatus, TaskType, Window, messages, status_message,
};
use rackflow_domain::{ComponentType, ComponentsByType};
use rackflow_store::{
    Store, SubmitDecision, SubmitOutcome, SubmitReject, TaskStart, TaskTransition, TaskUpdate,
};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::background::Background;
use crate::error::TaskError;
use crate::error::{EngineError, LookupKind};
use crate::executor::{LocalExecutor, ReportSink, TaskJob, TaskOutcome};
use crate::manager::{ComponentRef, ManagerRegistry};
use crate::resolve;

#[path = "task_leases.rs"]
mod leases;

#[path = "task_writes.rs"]
mod writes;
use writes::TaskWrites;

#[path = "task_durable.rs"]
mod durable;

pub use durable::{AttemptGuard, DurableError, DurableExecutor};

/// Executor name recorded on tasks run in-process.
pub const LOCAL_EXECUTOR: &str = "local";

/// Task-layer tunables; defaults documented in `docs/configuration.md`.
#[derive(Debug, Clone)]
pub struct TaskConfig {
    /// Full promoter sweep (expiry and missed notifications).
    pub promoter_sweep: Duration,
    /// How long a running task stays this process's without a renewal;
    /// renewed and swept for expired leases every third of it.
    pub lease: Duration,
}

impl Default for TaskConfig {
    fn default() -> Self {
        TaskConfig {
            promoter_sweep: Duration::from_secs(30),
            lease: Duration::from_secs(15),
        }
    }
}

/// A request to run one operation on every rack its target resolves to.
#[derive(Debug, Clone)]
pub struct SubmitRequest {
    pub task_type: TaskType,
    pub information: TaskInformation,
    pub description: String,
    pub target: TargetSpec,
    pub queue: QueuePolicy,
    pub rule_id: Option<Uuid>,
    /// Idempotency key; only together with `required_rack_id`.
    pub idempotency_key: Option<String>,
    /// When set, the target must resolve to exactly this rack.
    pub required_rack_id: Option<Uuid>,
    /// What asks for it (an event rule, for a leak response).
    pub trigger: rackflow_domain::task::TaskTrigger,
}

impl From<rackflow_domain::dispatch::ChildRequest> for SubmitRequest {
    /// An operation run target's child task (§3.7).
    fn from(child: rackflow_domain::dispatch::ChildRequest) -> SubmitRequest {
        SubmitRequest {
            task_type: child.task_type,
            information: child.information,
            description: child.description,
            target: child.target,
            queue: child.queue,
            rule_id: child.rule_id,
            idempotency_key: Some(child.idempotency_key),
            required_rack_id: Some(child.required_rack_id),
            trigger: rackflow_domain::task::TaskTrigger::Api,
        }
    }
}

/// What submitting to one rack reads before its transaction, read ahead
/// when the rack is known from the request. Components come without their
/// BMCs: nothing a submission checks or an executor gets uses them.
pub(crate) struct RackReads {
    components: rackflow_store::StoreResult<Vec<rackflow_domain::inventory::Component>>,
    /// For the name the managers know the rack by.
    rack: rackflow_store::StoreResult<Option<rackflow_domain::inventory::Rack>>,
    rule: rule::ResolvedRule,
}

/// [`RackReads`] of many run children read together
/// ([`TaskManager::read_children_racks`]), by rack.
pub(crate) type ChildReads = HashMap<Uuid, RackReads>;

/// A task built and checked, ready for its submission transaction.
struct PreparedTask {
    task: Task,
    /// Its columns if it may start at once.
    start: TaskStart,
    /// The executor's view of its components, when the submission read the
    /// rack anyway: a task that starts at once does not read them again.
    components: Option<Vec<ComponentRef>>,
}

impl PreparedTask {
    /// The conflict decision (§3.3, decision C3) against the rack's
    /// unfinished tasks, taken inside the submission transaction: a task
    /// that may run now is inserted as running with its rule frozen (one
    /// write instead of two); a queued one resolves its rule when the
    /// promoter starts it (§4.4).
    fn decide(&self, unfinished: &[Task]) -> SubmitDecision {
        let candidate = TaskShape {
            task_type: self.task.task_type,
            components: &self.task.components_by_type,
        };
        let others: Vec<(TaskShape, TaskStatus)> = unfinished
            .iter()
            .map(|t| {
                (
                    TaskShape {
                        task_type: t.task_type,
                        components: &t.components_by_type,
                    },
                    t.status,
                )
            })
            .collect();
        let waiting = unfinished
            .iter()
            .filter(|t| t.status == TaskStatus::Waiting)
            .count();
        let queue = self.task.queue_policy;
        let now = Utc::now();
        let window = Window::of(&self.task.information);
        let decision = conflict::decide_submission(
            &candidate,
            queue.strategy,
            &others,
            waiting,
            now,
            queue.timeout_secs,
        );
        match conflict::hold_for_window(decision, window, waiting, now, queue.timeout_secs) {
            Submission::Pending => SubmitDecision::Insert {
                status: TaskStatus::Running,
                message: messages::RUNNING.into(),
                queue_expires_at: None,
                start: Some(self.start.clone()),
            },
            Submission::Waiting { expires_at } => SubmitDecision::Insert {
                status: TaskStatus::Waiting,
                message: match window.opens_after(now) {
                    Some(opens) => messages::waiting_for_window(opens),
                    None => messages::WAITING.into(),
                },
                queue_expires_at: Some(expires_at),
                start: None,
            },
            Submission::RejectConflict => SubmitDecision::Reject(SubmitReject::RackConflict),
            Submission::RejectQueueFull { waiting } => {
                SubmitDecision::Reject(SubmitReject::QueueFull { waiting })
            }
        }
    }
}

/// The claimed target as stored once its child `task_id` exists.
fn linked_target(claimed: &OperationRunTarget, task_id: Uuid) -> OperationRunTarget {
    let mut linked = claimed.clone();
    dispatch::on_submitted(&mut linked, task_id, Utc::now());
    linked
}

/// A task changed status (for the operation-run dispatcher and watchers).
#[derive(Debug, Clone)]
pub struct TaskEvent {
    pub task_id: Uuid,
    pub rack_id: Uuid,
    pub status: TaskStatus,
}

/// A task this process starts or executes.
struct Running {
    /// Fired by a user cancel, a lost lease, or shutdown (its parent).
    cancel: CancellationToken,
    /// When its executor started: only then does the row say this process
    /// owns it, and only then may a lease renewal that misses it stop it.
    executing_since: Option<std::time::Instant>,
    /// Action attempts of a durable execution running here
    /// ([`TaskManager::attempt_guard`]).
    attempts: usize,
}

/// Submits, runs, cancels and recovers tasks.
pub struct TaskManager {
    store: Arc<dyn Store>,
    /// Report snapshots and outcomes of running tasks, committed together.
    writes: Arc<TaskWrites>,
    executor: Arc<LocalExecutor>,
    /// Runs the tasks instead of `executor` when set (Temporal).
    durable: Option<Arc<dyn DurableExecutor>>,
    registry: Arc<ManagerRegistry>,
    config: TaskConfig,
    /// This process as the owner of the tasks it executes.
    owner: String,
    /// Per running task: the token a user cancel fires.
    running: Mutex<HashMap<Uuid, Running>>,
    /// The promoter, every executor and their report writers. Its token
    /// stops every executor without touching task rows (shutdown).
    background: Background,
    promote_tx: mpsc::Sender<Uuid>,
    promote_rx: Mutex<Option<mpsc::Receiver<Uuid>>>,
    events: broadcast::Sender<TaskEvent>,
    /// Where task ends and durations are counted (the server's registry).
    metrics: Arc<crate::metrics::Metrics>,
}

impl TaskManager {
    pub fn new(
        store: Arc<dyn Store>,
        executor: Arc<LocalExecutor>,
        registry: Arc<ManagerRegistry>,
        config: TaskConfig,
    ) -> Arc<TaskManager> {
        Self::with_durable(store, executor, None, registry, config, Arc::default())
    }

    /// A task manager whose tasks run on `durable` when given (the local
    /// executor then only checks capabilities and runs the action attempts
    /// the durable executor's workers hand this process).
    pub fn with_durable(
        store: Arc<dyn Store>,
        executor: Arc<LocalExecutor>,
        durable: Option<Arc<dyn DurableExecutor>>,
        registry: Arc<ManagerRegistry>,
        config: TaskConfig,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Arc<TaskManager> {
        // Notifications beyond the buffer are dropped; the sweep catches up.
        let (promote_tx, promote_rx) = mpsc::channel(256);
        let (events, _) = broadcast::channel(1024);
        Arc::new(TaskManager {
            writes: TaskWrites::new(Arc::clone(&store)),
            store,
            executor,
            durable,
            registry,
            config,
            owner: leases::process_owner(),
            running: Mutex::new(HashMap::new()),
            background: Background::new("task manager"),
            promote_tx,
            promote_rx: Mutex::new(Some(promote_rx)),
            events,
            metrics,
        })
    }

    /// The metrics this manager and the loops built on it (dispatcher,
    /// schedules) count into.
    pub fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        &self.metrics
    }

    /// Counts a task's end (this process recorded it) with its run time
    /// and its report's stage times.
    pub(crate) fn count_finished(
        &self,
        task: &Task,
        status: TaskStatus,
        report: Option<&serde_json::Value>,
    ) {
        let elapsed = task
            .started_at
            .and_then(|started| (Utc::now() - started).to_std().ok());
        self.metrics
            .task_finished(task.task_type, status, elapsed, report);
    }

    /// The in-process executor (a durable executor's workers run action
    /// attempts on it).
    pub fn local_executor(&self) -> &Arc<LocalExecutor> {
        &self.executor
    }

    /// The executor name written on the tasks this process starts.
    pub fn executor_kind(&self) -> &str {
        self.durable.as_ref().map_or(LOCAL_EXECUTOR, |d| d.kind())
    }

    fn execution_id(&self, task_id: Uuid) -> String {
        match &self.durable {
            Some(d) => d.execution_id(task_id),
            None => format!("{LOCAL_EXECUTOR}:{task_id}"),
        }
    }

    /// The lease a task this process starts gets: none when a durable
    /// executor owns the execution.
    fn start_lease(&self) -> Option<rackflow_store::TaskLease> {
        self.durable.is_none().then(|| self.lease())
    }

    /// Subscribes to task status changes made by this process.
    pub fn subscribe(&self) -> broadcast::Receiver<TaskEvent> {
        self.events.subscribe()
    }

    fn emit(&self, task: &Task) {
        let _ = self.events.send(TaskEvent {
            task_id: task.id,
            rack_id: task.rack_id,
            status: task.status,
        });
    }

    // ---- submission -------------------------------------------------------

    /// The submission pipeline of spec §3.3; returns the created (or, for an
    /// idempotency key, the existing) task ids.
    pub async fn submit(self: &Arc<Self>, req: SubmitRequest) -> Result<Vec<Uuid>, EngineError> {
        Ok(self.submit_to_racks(req).await?)
    }

    /// Validates a request and resolves its target to candidate racks
    /// (sorted by id); with a required rack, that rack's components and
    /// rule are read at the same time.
    async fn resolve_request(
        &self,
        req: &SubmitRequest,
        read_ahead: Option<RackReads>,
    ) -> Result<
        (
            Option<OperationRule>,
            Vec<planner::CandidateEntry>,
            Option<RackReads>,
        ),
        TaskError,
    > {
        if req.idempotency_key.is_some() && req.required_rack_id.is_none() {
            return Err(TaskError::Invalid(
                "idempotency key requires a required rack id".into(),
            ));
        }
        if !req
            .task_type
            .valid_codes()
            .contains(&req.information.code.as_str())
        {
            return Err(TaskError::Invalid(format!(
                "invalid operation code {:?} for {}",
                req.information.code, req.task_type
            )));
        }
        // A window that closed refuses the task outright (issue 12).
        Window::of(&req.information)
            .check(Utc::now())
            .map_err(TaskError::Invalid)?;
        let explicit = match req.rule_id {
            Some(id) => Some(
                self.store
                    .rule_get(id)
                    .await?
                    .ok_or(TaskError::RuleNotFound(id))?,
            ),
            None => None,
        };

        let resolve = resolve::resolve_spec(self.store.as_ref(), &req.target);
        let (resolved, known_rack) = match req.required_rack_id {
            // The rack is known before the target resolves (an operation run
            // target's child, a schedule scope's task): its components,
            // record and rule are read at the same time, not one after the
            // other — a freed dispatcher slot waited for these reads.
            Some(rack_id) => {
                let rack_ids = [rack_id];
                let (components, rack, rule) = match read_ahead {
                    Some(RackReads {
                        components,
                        rack,
                        rule,
                    }) => (components, rack, rule),
                    None => tokio::join!(
                        self.store.components_of_racks_without_bmcs(&rack_ids),
                        self.store.rack_get(rack_id, false),
                        self.resolve_rule(
                            req.task_type,
                            &req.information.code,
                            rack_id,
                            explicit.as_ref()
                        ),
                    ),
                };
                // A run's child names its rack's components by id: they
                // resolve against the rack just read. Anything else (or an
                // id not on this rack) takes the general lookup, whose
                // errors name the target.
                let resolved = match components
                    .as_ref()
                    .ok()
                    .and_then(|c| resolve::ids_on_rack(&req.target, rack_id, c))
                {
                    Some(entries) => Ok(entries),
                    None => resolve.await,
                };
                (
                    resolved,
                    Some(RackReads {
                        components,
                        rack,
                        rule,
                    }),
                )
            }
            None => (resolve.await, None),
        };
        let resolved = resolved.map_err(|e| TaskError::Lookup {
            kind: e.kind,
            message: e.message,
        })?;
        let mut racks = planner::normalize_candidates(resolved)
            .map_err(|e| TaskError::Invalid(e.to_string()))?;
        if racks.is_empty() {
            return Err(TaskError::Lookup {
                kind: LookupKind::NotFound,
                message: "no valid racks found".into(),
            });
        }
        if let Some(required) = req.required_rack_id
            && (racks.len() != 1 || racks[0].rack_id != required)
        {
            return Err(TaskError::Invalid(format!(
                "target must resolve to exactly rack {required}"
            )));
        }
        racks.sort_by_key(|r| r.rack_id);

        Ok((explicit, racks, known_rack))
    }

    /// A task on every rack the request's target resolves to.
    async fn submit_to_racks(self: &Arc<Self>, req: SubmitRequest) -> Result<Vec<Uuid>, TaskError> {
        let (explicit, racks, mut known_rack) = self.resolve_request(&req, None).await?;
        let rack_ids: Vec<Uuid> = racks.iter().map(|r| r.rack_id).collect();
        let records = self.store.racks_get_many(&rack_ids).await?;
        check_not_decommissioned(&req, &records)?;
        check_one_version(&req, &records)?;
        let mut created = Vec::new();
        let mut first_error = None;
        for rack in racks {
            match self
                .submit_rack(
                    &req,
                    explicit.as_ref(),
                    rack.rack_id,
                    rack.components,
                    known_rack.take(),
                )
                .await
            {
                Ok(id) => created.push(id),
                Err(e) => {
                    tracing::warn!(rack_id = %rack.rack_id, error = %e, "task not created for rack");
                    if req.required_rack_id.is_some() {
                        return Err(e);
                    }
                    first_error.get_or_insert(e);
                }
            }
        }
        match (created.is_empty(), first_error) {
            (true, Some(e)) => Err(e),
            _ => Ok(created),
        }
    }

    async fn submit_rack(
        self: &Arc<Self>,
        req: &SubmitRequest,
        explicit: Option<&OperationRule>,
        rack_id: Uuid,
        components: ComponentsByType,
        read: Option<RackReads>,
    ) -> Result<Uuid, TaskError> {
        let prepared = self
            .prepare_rack(req, explicit, rack_id, components, read)
            .await?;
        // The cancel token exists before the row says `running` (see
        // `start`): a cancel landing between the insert and `spawn_run` then
        // stops the executor before its first call.
        self.cancel_token(prepared.task.id);
        let decide = |unfinished: &[Task]| prepared.decide(unfinished);
        let submitted = self.store.task_submit(&prepared.task, &decide).await;
        Ok(self.submitted(prepared, submitted, false)?.0)
    }

    /// An operation run target's child task (§3.7): prepared (target, rule,
    /// applicability, capabilities), then inserted with `claimed` written as
    /// submitted in the same transaction
    /// ([`Store::task_submit_for_target`]). Returns the task id and whether
    /// the target was written (not when the idempotency key found an
    /// existing task).
    pub(crate) async fn submit_child(
        self: &Arc<Self>,
        req: SubmitRequest,
        claimed: &OperationRunTarget,
        read_ahead: Option<RackReads>,
    ) -> Result<(Uuid, bool), EngineError> {
        let prepared = self.prepare_child(&req, read_ahead).await?;
        self.cancel_token(prepared.task.id);
        let linked = linked_target(claimed, prepared.task.id);
        let decide = |unfinished: &[Task]| prepared.decide(unfinished);
        let submitted = self
            .store
            .task_submit_for_target(&prepared.task, &decide, &linked)
            .await;
        Ok(self.submitted(prepared, submitted, true)?)
    }

    /// A run target's child up to its submission transaction: the request
    /// must resolve to exactly its required rack.
    async fn prepare_child(
        &self,
        req: &SubmitRequest,
        read_ahead: Option<RackReads>,
    ) -> Result<PreparedTask, TaskError> {
        let Some(required) = req.required_rack_id else {
            return Err(TaskError::Invalid(
                "a child task needs its required rack id".into(),
            ));
        };
        let (explicit, mut racks, mut known_rack) = self.resolve_request(req, read_ahead).await?;
        let Some(rack) = racks
            .pop()
            .filter(|r| r.rack_id == required && racks.is_empty())
        else {
            return Err(TaskError::Invalid(format!(
                "target must resolve to exactly rack {required}"
            )));
        };
        self.prepare_rack(
            req,
            explicit.as_ref(),
            rack.rack_id,
            rack.components,
            known_rack.take(),
        )
        .await
    }

    /// Everything of one rack's submission before its transaction: the rule
    /// resolved (or the explicit one), components linked, the rule
    /// applicable, capabilities there; the task built.
    async fn prepare_rack(
        &self,
        req: &SubmitRequest,
        explicit: Option<&OperationRule>,
        rack_id: Uuid,
        components: ComponentsByType,
        read: Option<RackReads>,
    ) -> Result<PreparedTask, TaskError> {
        let (rack_components, rack, resolved) = match read {
            Some(read) => (read.components?, Some(read.rack?), read.rule),
            None => (
                self.store.components_of_racks(&[rack_id]).await?,
                None,
                self.resolve_rule(req.task_type, &req.information.code, rack_id, explicit)
                    .await,
            ),
        };
        if let Some(Some(record)) = &rack {
            check_not_decommissioned(req, std::slice::from_ref(record))?;
        }
        // Only a rule that talks to managers about specific components needs
        // them linked; an ingest registers components not linked yet.
        let linkage = resolved.definition.requires_linked_targets();
        for (_, ids) in components.iter().filter(|_| linkage) {
            for id in ids {
                let linked = rack_components
                    .iter()
                    .find(|c| c.id == *id)
                    .is_some_and(|c| c.external_id.is_some());
                if !linked {
                    return Err(TaskError::Precondition(format!(
                        "component {id} of rack {rack_id} is not linked to actual inventory"
                    )));
                }
            }
        }
        let targeted: Vec<ComponentType> = components.iter().map(|(t, _)| t).collect();
        if !resolved.definition.applies_to(&targeted) {
            let names = |types: &[ComponentType]| {
                types
                    .iter()
                    .map(|t| t.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let covered = resolved.definition.step_types();
            let covered = if covered.is_empty() {
                "it has no steps".to_string()
            } else {
                format!("its steps cover {}", names(&covered))
            };
            return Err(TaskError::Precondition(format!(
                "rule for {}/{} has no step for the targeted component types of rack {rack_id} \
                 (targeted: {}; the {} rule: {covered})",
                req.task_type,
                req.information.code,
                names(&targeted),
                resolved.source,
            )));
        }
        for (ty, capability) in resolved.definition.required_capabilities(&targeted) {
            self.registry
                .check(ty, capability)
                .map_err(|e| TaskError::Precondition(e.to_string()))?;
        }
        let information = match req
            .information
            .firmware
            .as_ref()
            .and_then(|f| f.bundle.as_ref())
        {
            None => req.information.clone(),
            Some(bundle) => {
                let record = match &rack {
                    Some(record) => record.clone(),
                    None => self.store.rack_get(rack_id, false).await?,
                };
                let steps = resolved
                    .definition
                    .steps
                    .iter()
                    .filter(|s| targeted.contains(&s.component_type))
                    .filter(|s| s.actions().any(|a| a.name == "FirmwareControl"))
                    .map(|s| s.component_type);
                with_bundle_versions(&req.information, bundle, rack_id, record.as_ref(), steps)?
            }
        };

        let now = Utc::now();
        let task = Task {
            id: Uuid::new_v4(),
            task_type: req.task_type,
            information,
            description: req.description.clone(),
            rack_id,
            components_by_type: components,
            executor_type: self.executor_kind().into(),
            execution_id: String::new(),
            status: TaskStatus::Pending,
            message: messages::PENDING.into(),
            report: None,
            // An explicit rule is frozen onto the task now: a task that
            // waits in the queue is started later by the promoter, which has
            // no request to take the rule from, and would otherwise fall
            // back to the association / default / built-in rule.
            applied_rule_id: explicit.map(|r| r.id),
            rule_definition: explicit.map(|r| r.definition.clone()),
            queue_policy: req.queue,
            queue_expires_at: None,
            idempotency_key: req.idempotency_key.clone(),
            trigger: req.trigger,
            created_at: now,
            updated_at: now,
            started_at: None,
            finished_at: None,
        };
        // A task that may run now is inserted as running, with the rule
        // just resolved frozen onto it: one write instead of two. A queued
        // one resolves its rule when the promoter starts it (§4.4).
        let start = TaskStart {
            applied_rule_id: resolved.applied_rule_id,
            rule_definition: resolved.definition.clone(),
            executor_type: self.executor_kind().into(),
            execution_id: self.execution_id(task.id),
            lease: self.start_lease(),
        };
        let components = rack.flatten().and_then(|rack| {
            component_refs(
                &task.components_by_type,
                &rack_components,
                &rack_label(&rack),
            )
            .ok()
        });
        Ok(PreparedTask {
            task,
            start,
            components,
        })
    }

    /// What a submission transaction answered, turned into the task id and
    /// whether a linked target was written; a running task starts here.
    fn submitted(
        self: &Arc<Self>,
        prepared: PreparedTask,
        submitted: rackflow_store::StoreResult<SubmitOutcome>,
        linked: bool,
    ) -> Result<(Uuid, bool), TaskError> {
        let task = &prepared.task;
        if !matches!(&submitted, Ok(SubmitOutcome::Inserted(stored)) if stored.status == TaskStatus::Running)
        {
            self.forget_cancel_token(task.id);
        }
        match submitted? {
            SubmitOutcome::Existing(existing) => Ok((existing.id, false)),
            SubmitOutcome::Rejected(SubmitReject::QueueFull { waiting }) => {
                Err(TaskError::QueueFull(waiting))
            }
            SubmitOutcome::Rejected(SubmitReject::RackConflict) => {
                Err(TaskError::RackConflict(task.rack_id))
            }
            SubmitOutcome::Inserted(stored) => {
                tracing::debug!(task_id = %stored.id, rack_id = %stored.rack_id, operation = %stored.operation(), status = %stored.status, "task submitted");
                self.emit(&stored);
                let id = stored.id;
                if stored.status == TaskStatus::Waiting {
                    // Promote at the window's opening and end the task at its
                    // close, not a sweep later (the sweep still covers a
                    // restart in between).
                    let window = Window::of(&stored.information);
                    for at in [window.opens_after(Utc::now()), window.closes]
                        .into_iter()
                        .flatten()
                    {
                        self.wake_rack_at(stored.rack_id, at);
                    }
                }
                if stored.status == TaskStatus::Running {
                    self.spawn_run(stored, None, prepared.components);
                }
                Ok((id, linked))
            }
        }
    }

    /// What the children of one dispatcher attempt read before their
    /// submissions, for all of their racks at once: components (without
    /// BMCs) and rack records in a query each, the racks' rule associations
    /// for the operation in one, the default rule once. A rack a read
    /// failed for is left out, and its child reads on its own (so do
    /// children with an explicit rule, which is read per child).
    pub(crate) async fn read_children_racks(
        &self,
        task_type: TaskType,
        code: &str,
        rack_ids: &[Uuid],
    ) -> ChildReads {
        let mut reads = ChildReads::new();
        if rack_ids.is_empty() {
            return reads;
        }
        let (components, racks, associations, default) = tokio::join!(
            self.store.components_of_racks_without_bmcs(rack_ids),
            self.store.racks_get_many(rack_ids),
            self.store
                .rule_associations_for_racks(rack_ids, task_type, code),
            self.store.rule_default_for(task_type, code),
        );
        let (Ok(components), Ok(racks), Ok(associations), Ok(default)) =
            (components, racks, associations, default)
        else {
            tracing::debug!("batched child reads failed; each child reads its own rack");
            return reads;
        };
        // Each associated rule once; by rack, the rule its association names.
        let mut rules: HashMap<Uuid, Option<OperationRule>> = HashMap::new();
        let mut associated: HashMap<Uuid, Uuid> = HashMap::new();
        for association in &associations {
            if let std::collections::hash_map::Entry::Vacant(entry) =
                rules.entry(association.rule_id)
            {
                let Ok(rule) = self.store.rule_get(association.rule_id).await else {
                    return ChildReads::new();
                };
                entry.insert(rule);
            }
            associated.insert(association.rack_id, association.rule_id);
        }
        let mut components_by_rack: HashMap<Uuid, Vec<rackflow_domain::inventory::Component>> =
            HashMap::new();
        for component in components {
            if let Some(rack_id) = component.rack_id {
                components_by_rack
                    .entry(rack_id)
                    .or_default()
                    .push(component);
            }
        }
        let mut racks: HashMap<Uuid, rackflow_domain::inventory::Rack> = racks
            .into_iter()
            // As `rack_get(id, false)`: a soft-deleted rack is not there.
            .filter(|r| r.deleted_at.is_none())
            .map(|r| (r.id, r))
            .collect();
        for &rack_id in rack_ids {
            let association = associated
                .get(&rack_id)
                .and_then(|rule_id| rules.get(rule_id))
                .and_then(Option::as_ref);
            let rule = rule::resolve_rule(None, association, default.as_ref(), task_type, code);
            reads.insert(
                rack_id,
                RackReads {
                    components: Ok(components_by_rack.remove(&rack_id).unwrap_or_default()),
                    rack: Ok(racks.remove(&rack_id)),
                    rule,
                },
            );
        }
        reads
    }

    /// Rule resolution order of spec §4.4; lookup errors fall through.
    async fn resolve_rule(
        &self,
        task_type: TaskType,
        code: &str,
        rack_id: Uuid,
        explicit: Option<&OperationRule>,
    ) -> rule::ResolvedRule {
        let association = match self
            .store
            .rule_association_get(rack_id, task_type, code)
            .await
        {
            Ok(Some(a)) => self.store.rule_get(a.rule_id).await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "rule association lookup failed");
                None
            }),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(error = %e, "rule association lookup failed");
                None
            }
        };
        let default = self
            .store
            .rule_default_for(task_type, code)
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "default rule lookup failed");
                None
            });
        rule::resolve_rule(
            explicit,
            association.as_ref(),
            default.as_ref(),
            task_type,
            code,
        )
    }

    // ---- execution --------------------------------------------------------

    /// Freezes the rule onto a pending task (one the promoter let out of
    /// the queue, or one a restart found pending), marks it running and
    /// hands it to the executor in the background. A fresh submission that
    /// may run at once is inserted as running instead (`submit_rack`).
    async fn start(self: &Arc<Self>, task: Task) {
        let resolved = match &task.rule_definition {
            // The explicit rule frozen at submission (see `submit_rack`):
            // a promoted or recovered task keeps the rule it was asked for.
            Some(definition) => rule::ResolvedRule {
                definition: definition.clone(),
                applied_rule_id: task.applied_rule_id,
                source: rule::RuleSource::Explicit,
            },
            None => {
                self.resolve_rule(task.task_type, &task.information.code, task.rack_id, None)
                    .await
            }
        };
        let update = TaskUpdate {
            expected: vec![TaskStatus::Pending],
            status: Some(TaskStatus::Running),
            message: Some(messages::RUNNING.into()),
            applied_rule_id: Some(resolved.applied_rule_id),
            rule_definition: Some(resolved.definition.clone()),
            executor_type: Some(self.executor_kind().into()),
            execution_id: Some(self.execution_id(task.id)),
            lease: self.start_lease(),
            ..Default::default()
        };
        // The cancel token exists before the row says `running`: a cancel
        // landing between this update and `spawn_run` would otherwise find
        // no token, mark the task terminated, and the executor would then
        // run it to the end anyway. With the token in place such a cancel
        // fires it and the executor stops before its first call.
        self.cancel_token(task.id);
        match self.store.task_update(task.id, &update).await {
            Ok(Some(running)) => {
                self.emit(&running);
                self.spawn_run(running, None, None);
            }
            Ok(None) => {
                self.forget_cancel_token(task.id);
                tracing::info!(task_id = %task.id, "task left pending before it started (cancelled?)")
            }
            Err(e) => {
                self.forget_cancel_token(task.id);
                tracing::error!(task_id = %task.id, error = %e, "could not mark task running; the recovery pass will retry")
            }
        }
    }

    /// A task's entry before anything runs: its token is a child of the
    /// manager's, so shutdown fires it too.
    fn new_running(&self) -> Running {
        Running {
            cancel: self.background.token().child_token(),
            executing_since: None,
            attempts: 0,
        }
    }

    /// The token a user cancel of task `id` fires; created on first use.
    fn cancel_token(&self, id: Uuid) -> CancellationToken {
        self.running
            .lock()
            .entry(id)
            .or_insert_with(|| self.new_running())
            .cancel
            .clone()
    }

    /// The token of a task whose row now says this process runs it.
    fn executing_token(&self, id: Uuid) -> CancellationToken {
        let mut running = self.running.lock();
        let entry = running.entry(id).or_insert_with(|| self.new_running());
        entry
            .executing_since
            .get_or_insert_with(std::time::Instant::now);
        entry.cancel.clone()
    }

    /// Forgets the token of a task this process no longer starts or runs
    /// (kept while action attempts of a durable execution use it).
    fn forget_cancel_token(&self, id: Uuid) {
        let mut running = self.running.lock();
        match running.get_mut(&id) {
            Some(entry) if entry.attempts > 0 => entry.executing_since = None,
            Some(_) => {
                running.remove(&id);
            }
            None => {}
        }
    }

    fn spawn_run(
        self: &Arc<Self>,
        task: Task,
        resume_from: Option<Report>,
        components: Option<Vec<ComponentRef>>,
    ) {
        if self.is_durable(&task) {
            self.spawn_durable(task);
            return;
        }
        let user_cancel = self.executing_token(task.id);
        let manager = Arc::clone(self);
        let task_id = task.id;
        // Every line the run logs (executor, component managers) carries
        // the task, its rack and operation.
        let span = tracing::info_span!(
            "task",
            task_id = %task.id,
            rack_id = %task.rack_id,
            operation = %task.operation()
        );
        let run = self.background.spawn(
            "task run",
            tracing::Instrument::instrument(
                async move {
                    let (outcome, reports) = manager
                        .execute(&task, resume_from, components, user_cancel.clone())
                        .await;
                    // Forgotten only once the outcome is written: until then the
                    // lease renewal keeps the task this process's (an outcome
                    // waiting for the database must not be adopted and run again).
                    manager.finish(&task, outcome, reports).await;
                    manager.forget_cancel_token(task.id);
                },
                span,
            ),
        );
        if run.is_none() {
            self.forget_cancel_token(task_id);
            tracing::info!(task_id = %task_id, "task not started: shutting down; it resumes on the next start");
        }
    }

    /// Runs the task; returns the outcome and its report snapshots.
    async fn execute(
        self: &Arc<Self>,
        task: &Task,
        resume_from: Option<Report>,
        components: Option<Vec<ComponentRef>>,
        cancel: CancellationToken,
    ) -> (Result<TaskOutcome, TaskError>, FinalReports) {
        let prepared = match components {
            Some(components) => Ok(Ok(self.job(task, components, resume_from))),
            None => self.prepare(task, resume_from).await,
        };
        match prepared {
            Ok(Ok(job)) => {
                let (sink, writer) = StoreSink::start(
                    Arc::clone(&self.writes),
                    task.id,
                    self.owner.clone(),
                    &self.background,
                );
                let outcome = self.executor.run(job, sink.clone(), cancel).await;
                let unwritten = sink.finish(writer).await;
                let last = sink.latest.borrow().clone();
                (Ok(outcome), FinalReports { unwritten, last })
            }
            Ok(Err(failed)) => (Ok(failed), FinalReports::default()),
            Err(e) => (Err(e), FinalReports::default()),
        }
    }

    /// The executor's job for `task`, or the outcome of a task that cannot
    /// run (a component left the inventory).
    async fn prepare(
        &self,
        task: &Task,
        resume_from: Option<Report>,
    ) -> Result<Result<TaskJob, TaskOutcome>, TaskError> {
        let components = self.store.components_of_racks(&[task.rack_id]).await?;
        let rack = self.store.rack_get(task.rack_id, true).await?;
        let rack_name = rack.as_ref().map(rack_label).unwrap_or_default();
        Ok(
            component_refs(&task.components_by_type, &components, &rack_name)
                .map(|refs| self.job(task, refs, resume_from)),
        )
    }

    /// The executor's job for `task` on `components`.
    fn job(
        &self,
        task: &Task,
        components: Vec<ComponentRef>,
        resume_from: Option<Report>,
    ) -> TaskJob {
        let definition = task
            .rule_definition
            .clone()
            .unwrap_or_else(|| rule::builtin_rule(task.task_type, &task.information.code));
        TaskJob {
            task_id: task.id,
            information: task.information.clone(),
            definition,
            components,
            resume_from,
        }
    }

    /// Records the outcome. A cancel by shutdown leaves the row untouched so
    /// the next start resumes it; a user cancel was recorded by `cancel`.
    async fn finish(
        self: &Arc<Self>,
        task: &Task,
        outcome: Result<TaskOutcome, TaskError>,
        reports: FinalReports,
    ) {
        let FinalReports {
            unwritten: last_report,
            last: final_report,
        } = reports;
        let (status, message) = match outcome {
            Ok(TaskOutcome::Completed) => (TaskStatus::Completed, messages::COMPLETED.to_string()),
            Ok(TaskOutcome::Failed(message)) => {
                let text = status_message(&message);
                (
                    TaskStatus::Failed,
                    if text.is_empty() {
                        messages::FAILED.into()
                    } else {
                        text
                    },
                )
            }
            Ok(TaskOutcome::Cancelled) => {
                // No outcome to record (a user cancel recorded `terminated`
                // already; a shutdown leaves the row to the next start), but
                // the last snapshot — stages failed with `cancelled` — is.
                if let Some(report) = last_report {
                    persist_report(&self.writes, task.id, &self.owner, report).await;
                }
                if self.background.is_stopping() {
                    tracing::info!(task_id = %task.id, "task interrupted by shutdown; it resumes on the next start");
                }
                self.notify_rack(task.rack_id);
                return;
            }
            Err(e) => (TaskStatus::Failed, status_message(&e.to_string())),
        };
        // The last report snapshot and the outcome in one write, only while
        // this process still owns the task (an adopter's writes win).
        let update = TaskUpdate {
            expected: vec![TaskStatus::Running],
            status: Some(status),
            message: Some(message.clone()),
            report: last_report.clone(),
            expected_owner: Some(self.owner.clone()),
            rack_lifecycle: LifecycleChange::of(task.task_type, &task.information.code, status),
            ..Default::default()
        };
        match self.record_outcome(task.id, &update).await {
            Ok(true) => {
                self.count_finished(task, status, final_report.as_ref());
                // One line per task is noise at fleet scale: completions
                // at debug, the failures an operator looks for at info.
                if status == TaskStatus::Completed {
                    tracing::debug!(task_id = %task.id, status = %status, "task finished");
                } else {
                    tracing::info!(task_id = %task.id, status = %status, message = %message, "task finished");
                }
                let _ = self.events.send(TaskEvent {
                    task_id: task.id,
                    rack_id: task.rack_id,
                    status,
                });
            }
            Ok(false) => {
                // Cancelled meanwhile: the row is `terminated`; its report
                // still gets the final snapshot. (Or another process adopted
                // it: then the owner check keeps this snapshot out.)
                if let Some(report) = last_report {
                    persist_report(&self.writes, task.id, &self.owner, report).await;
                }
                tracing::info!(task_id = %task.id, "task was no longer this process's running task when it finished (cancelled or adopted)")
            }
            Err(e) => {
                tracing::error!(task_id = %task.id, error = %e, "could not record task outcome before shutdown; it resumes where it is adopted")
            }
        }
        self.notify_rack(task.rack_id);
    }

    // ---- cancellation -----------------------------------------------------

    /// Cancels a task in any state (spec §3.6).
    pub async fn cancel(self: &Arc<Self>, id: Uuid) -> Result<Task, EngineError> {
        self.stop(id, messages::CANCELLED).await
    }

    /// Cancels a task as [`Self::cancel`] does (it ends `terminated`, its
    /// cleanup runs) with `message` saying why: a leak response preempting
    /// it names the leak.
    pub async fn stop(self: &Arc<Self>, id: Uuid, message: &str) -> Result<Task, EngineError> {
        let status = TaskStatus::Terminated;
        let task = self
            .store
            .task_get(id)
            .await?
            .ok_or(TaskError::NotFound(id))?;
        match task.status {
            TaskStatus::Terminated => return Ok(task),
            TaskStatus::Completed | TaskStatus::Failed => {
                return Err(TaskError::Precondition(format!(
                    "task {id} is not cancellable: it is {}",
                    task.status
                ))
                .into());
            }
            _ => {}
        }
        // Record first, then stop the work: a crash in between leaves a
        // terminated row whose executor simply never resumes.
        let update = TaskUpdate {
            expected: vec![
                TaskStatus::Waiting,
                TaskStatus::Pending,
                TaskStatus::Running,
            ],
            status: Some(status),
            message: Some(message.into()),
            rack_lifecycle: LifecycleChange::of(task.task_type, &task.information.code, status),
            ..Default::default()
        };
        let updated = self.store.task_update(id, &update).await?;
        let token = self.running.lock().get(&id).map(|r| r.cancel.clone());
        if let Some(token) = &token {
            token.cancel();
        }
        match token {
            // Its execution is the durable executor's, and its action
            // attempts may run on any replica.
            _ if self.is_durable(&task) => self.cancel_durable(id).await,
            Some(_) => {}
            // Another process may be executing it, or starting it right now
            // (a pending task read above may be running there already):
            // tell them all. The owner's lease renewal, which no longer
            // finds the task running, is the backstop.
            None => {
                if let Err(e) = self.store.task_cancel_announce(id).await {
                    tracing::warn!(task_id = %id, error = %e, "cancel not announced to other processes; the owner stops at its next lease renewal");
                }
            }
        }
        let updated_here = updated.is_some();
        let current = match updated {
            Some(t) => t,
            // It finished in between: answer its real state.
            None => self
                .store
                .task_get(id)
                .await?
                .ok_or(TaskError::NotFound(id))?,
        };
        if current.status == status {
            if updated_here {
                self.count_finished(&current, status, current.report.as_ref());
            }
            tracing::info!(task_id = %id, status = %status, "task stopped");
            self.emit(&current);
            self.notify_rack(current.rack_id);
            Ok(current)
        } else {
            Err(TaskError::Precondition(format!(
                "task {id} is not cancellable: it is {}",
                current.status
            ))
            .into())
        }
    }

    // ---- promoter ---------------------------------------------------------

    fn notify_rack(&self, rack_id: Uuid) {
        // Dropped when full: the periodic sweep compensates.
        let _ = self.promote_tx.try_send(rack_id);
    }

    /// Runs the promoter for `rack_id` at `at` (a maintenance window's
    /// opening or close), unless the manager stops first.
    fn wake_rack_at(self: &Arc<Self>, rack_id: Uuid, at: chrono::DateTime<Utc>) {
        let Ok(wait) = (at - Utc::now()).to_std() else {
            return self.notify_rack(rack_id);
        };
        let manager = Arc::clone(self);
        let shutdown = self.background.token().clone();
        self.background
            .spawn("maintenance window timer", async move {
                tokio::select! {
                    () = shutdown.cancelled() => {}
                    () = tokio::time::sleep(wait) => manager.notify_rack(rack_id),
                }
            });
    }

    /// Expires and promotes the waiting tasks of one rack; starts promoted ones.
    pub async fn promote_rack(self: &Arc<Self>, rack_id: Uuid) -> Result<(), EngineError> {
        let decide = |tasks: &[Task]| -> Vec<TaskTransition> {
            let inputs: Vec<PromotionInput> = tasks
                .iter()
                .map(|t| PromotionInput {
                    id: t.id,
                    shape: TaskShape {
                        task_type: t.task_type,
                        components: &t.components_by_type,
                    },
                    status: t.status,
                    created_at: t.created_at,
                    queue_expires_at: t.queue_expires_at,
                    window: Window::of(&t.information),
                })
                .collect();
            conflict::plan_promotions(&inputs, Utc::now())
                .into_iter()
                .map(|(id, p)| match p {
                    Promotion::Expire => TaskTransition {
                        id,
                        status: TaskStatus::Terminated,
                        message: messages::EXPIRED.into(),
                    },
                    Promotion::WindowClosed(closed) => TaskTransition {
                        id,
                        status: TaskStatus::Terminated,
                        message: messages::window_closed(closed),
                    },
                    Promotion::Promote => TaskTransition {
                        id,
                        status: TaskStatus::Pending,
                        message: messages::PROMOTED.into(),
                    },
                })
                .collect()
        };
        let changed = self.store.task_promote(rack_id, &decide).await?;
        for task in changed {
            self.emit(&task);
            if task.status == TaskStatus::Pending {
                tracing::info!(task_id = %task.id, rack_id = %rack_id, "task promoted");
                self.start(task).await;
            } else {
                tracing::info!(task_id = %task.id, rack_id = %rack_id, status = %task.status, message = %task.message, "waiting task ended");
            }
        }
        Ok(())
    }

    async fn sweep(self: &Arc<Self>) {
        match self.store.racks_with_waiting_tasks().await {
            Ok(racks) => {
                for rack in racks {
                    if let Err(e) = self.promote_rack(rack).await {
                        tracing::warn!(rack_id = %rack, error = %e, "promotion failed");
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "promoter sweep failed"),
        }
    }

    /// Runs the promoter until shutdown: on every finished task of a rack,
    /// and a full sweep every `promoter_sweep`.
    pub fn spawn_promoter(self: &Arc<Self>) {
        let Some(mut rx) = self.promote_rx.lock().take() else {
            return;
        };
        let manager = Arc::clone(self);
        let shutdown = self.background.token().clone();
        self.background.spawn("promoter", async move {
            let mut tick = tokio::time::interval(manager.config.promoter_sweep);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    Some(rack) = rx.recv() => {
                        if let Err(e) = manager.promote_rack(rack).await {
                            tracing::warn!(rack_id = %rack, error = %e, "promotion failed");
                        }
                    }
                    _ = tick.tick() => manager.sweep().await,
                }
            }
            tracing::debug!("promoter stopped");
        });
    }

    // ---- recovery and shutdown -------------------------------------------

    /// Resumes what a previous process left: running tasks continue from
    /// their first unfinished stage, pending tasks start. Only the running
    /// tasks whose owner's lease expired are taken — unless this process is
    /// the only one the database admits ([`Store::exclusive`]), when every
    /// running task is an orphan of the previous process.
    pub async fn recover(self: &Arc<Self>) -> Result<usize, EngineError> {
        let adopted = self.adopt(self.store.exclusive()).await?;
        let handed = self.ensure_durable_started(Duration::ZERO).await?;
        let pending = self.store.tasks_with_status(&[TaskStatus::Pending]).await?;
        let count = adopted + handed + pending.len();
        for task in pending {
            self.start(task).await;
        }
        Ok(count)
    }

    /// Resumes a running task this process just adopted.
    async fn resume(self: &Arc<Self>, task: Task) {
        if task.rule_definition.is_some() {
            let report = task
                .report
                .clone()
                .and_then(|r| serde_json::from_value::<Report>(r).ok());
            tracing::info!(task_id = %task.id, "resuming running task");
            self.spawn_run(task, report, None);
            return;
        }
        // Marked running but never frozen: start over from pending.
        let back = TaskUpdate {
            expected: vec![TaskStatus::Running],
            status: Some(TaskStatus::Pending),
            message: Some(messages::PENDING.into()),
            expected_owner: Some(self.owner.clone()),
            ..Default::default()
        };
        if let Ok(Some(pending)) = self.store.task_update(task.id, &back).await {
            self.start(pending).await;
        }
    }

    /// Stops the promoter and every executor (task rows are left as they
    /// are, so the next start resumes them) and waits for them.
    pub async fn shutdown(&self) {
        self.background.shutdown().await;
    }
}

/// Writes a report snapshot of a running or terminated task. Terminated
/// too: a user cancel records `terminated` before it stops the executor,
/// whose last snapshot (the running stage and steps failed with
/// `cancelled`) would otherwise be dropped and leave the report of a
/// terminated task saying "running". Only the cancelled executor of this
/// process writes after that. Best effort: a failure is logged.
async fn persist_report(
    writes: &Arc<TaskWrites>,
    task_id: Uuid,
    owner: &str,
    report: serde_json::Value,
) {
    let update = TaskUpdate {
        expected: vec![TaskStatus::Running, TaskStatus::Terminated],
        report: Some(report),
        expected_owner: Some(owner.to_string()),
        ..Default::default()
    };
    if let Err(e) = writes.update_quiet(task_id, update).await {
        tracing::warn!(task_id = %task_id, error = %e, "report not persisted");
    }
}

/// The name the managers know a rack by: its external id, else its name.
/// The task information of one rack's firmware task from a bundle (issue
/// 12): the rack model's versions become the task's layered target
/// version. Refused when the bundle does not cover the rack's model, or
/// lacks a version for a type a firmware step of the rule updates.
fn with_bundle_versions(
    information: &TaskInformation,
    bundle: &rackflow_domain::bundle::FirmwareBundle,
    rack_id: Uuid,
    rack: Option<&rackflow_domain::inventory::Rack>,
    firmware_steps: impl Iterator<Item = ComponentType>,
) -> Result<TaskInformation, TaskError> {
    let label = rack.map_or_else(|| rack_id.to_string(), rack_label);
    let model = rack.and_then(|r| r.model.as_deref());
    let versions = bundle.for_rack(&label, model).map_err(TaskError::Invalid)?;
    for ty in firmware_steps {
        if !versions.contains_key(&ty) {
            return Err(TaskError::Invalid(format!(
                "firmware bundle {} has no {ty} version for rack model {:?} (rack {label}), \
                 and the rule updates {ty}",
                bundle.label(),
                model.unwrap_or_default()
            )));
        }
    }
    let mut information = information.clone();
    if let Some(firmware) = information.firmware.as_mut() {
        firmware.target_version = Some(rackflow_domain::bundle::FirmwareBundle::layered(versions));
        // The firmware object of this rack's model, the only one its task
        // applies.
        let key = model.map(rackflow_domain::bundle::model_key);
        firmware
            .firmware_objects
            .retain(|m, _| Some(rackflow_domain::bundle::model_key(m)) == key);
    }
    Ok(information)
}

fn rack_label(rack: &rackflow_domain::inventory::Rack) -> String {
    rack.manager_id().to_string()
}

/// The executor's view of a task's components, read from its rack's
/// inventory; a component no longer there fails the task.
fn component_refs(
    targeted: &ComponentsByType,
    inventory: &[rackflow_domain::inventory::Component],
    rack: &str,
) -> Result<Vec<ComponentRef>, TaskOutcome> {
    let by_id: HashMap<Uuid, &rackflow_domain::inventory::Component> =
        inventory.iter().map(|c| (c.id, c)).collect();
    let mut refs = Vec::new();
    for (ty, ids) in targeted.iter() {
        for id in ids {
            let Some(component) = by_id.get(id) else {
                return Err(TaskOutcome::Failed(format!(
                    "component {id} is no longer in the inventory"
                )));
            };
            refs.push(ComponentRef {
                id: *id,
                component_type: ty,
                external_id: component.external_id.clone().unwrap_or_default(),
                rack: rack.to_string(),
            });
        }
    }
    Ok(refs)
}

/// Persists every report change of a running task.
/// A finished run's report snapshots.
#[derive(Default)]
struct FinalReports {
    /// The newest snapshot the background writer had not written yet: it
    /// goes into the same write as the outcome.
    unwritten: Option<serde_json::Value>,
    /// The newest snapshot of all (the stage timings of the metrics).
    last: Option<serde_json::Value>,
}

struct StoreSink {
    task_id: Uuid,
    /// Latest snapshot not yet written; the writer task drains it.
    latest: tokio::sync::watch::Sender<Option<serde_json::Value>>,
    /// Tells the writer to stop and hand back what it has not written.
    stop: CancellationToken,
}

impl StoreSink {
    /// A sink whose writes happen on a background task, newest snapshot
    /// first-come: the executor never waits for the database between steps
    /// (a snapshot write per counter change used to add ~15 ms per task),
    /// and intermediate snapshots that were superseded before they could be
    /// written are skipped. [`StoreSink::finish`] stops the writer and
    /// returns the snapshot it had not written yet.
    fn start(
        writes: Arc<TaskWrites>,
        task_id: Uuid,
        owner: String,
        background: &Background,
    ) -> (
        Arc<StoreSink>,
        Option<tokio::task::JoinHandle<Option<serde_json::Value>>>,
    ) {
        let (latest, mut rx) = tokio::sync::watch::channel(None::<serde_json::Value>);
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        // No writer once shutdown started: the outcome write then carries
        // the last snapshot (`finish`).
        let writer = background.spawn("report writer", async move {
            loop {
                tokio::select! {
                    // Stop wins over a pending change: the caller writes that
                    // snapshot together with the outcome.
                    biased;
                    () = stopped.cancelled() => {
                        return if rx.has_changed().unwrap_or(false) {
                            rx.borrow_and_update().clone()
                        } else {
                            None
                        };
                    }
                    changed = rx.changed() => {
                        if changed.is_err() {
                            return None;
                        }
                    }
                }
                let Some(value) = rx.borrow_and_update().clone() else {
                    continue;
                };
                persist_report(&writes, task_id, &owner, value).await;
            }
        });
        (
            Arc::new(StoreSink {
                task_id,
                latest,
                stop,
            }),
            writer,
        )
    }

    /// Stops the writer once its write in flight (if any) is done, and
    /// returns the newest snapshot it had not written. The bound only
    /// guards against a stuck database write.
    async fn finish(
        &self,
        writer: Option<tokio::task::JoinHandle<Option<serde_json::Value>>>,
    ) -> Option<serde_json::Value> {
        self.stop.cancel();
        let Some(writer) = writer else {
            return self.latest.borrow().clone();
        };
        match tokio::time::timeout(Duration::from_secs(10), writer).await {
            Ok(Ok(pending)) => pending,
            Ok(Err(e)) => {
                tracing::warn!(task_id = %self.task_id, error = %e, "report writer stopped early");
                self.latest.borrow().clone()
            }
            Err(_) => {
                tracing::warn!(task_id = %self.task_id, "report writer still busy; recording the outcome anyway");
                self.latest.borrow().clone()
            }
        }
    }
}

#[async_trait::async_trait]
impl ReportSink for StoreSink {
    async fn report(&self, task_id: Uuid, report: &Report) {
        debug_assert_eq!(task_id, self.task_id);
        match serde_json::to_value(report) {
            Ok(value) => {
                self.latest.send_replace(Some(value));
            }
            Err(e) => tracing::warn!(task_id = %task_id, error = %e, "report not serialisable"),
        }
    }
}

/// Queue policy from a request's strategy and timeout (0 → default).
pub fn queue_policy(strategy: QueueStrategy, timeout_secs: i32) -> QueuePolicy {
    QueuePolicy {
        strategy,
        timeout_secs: if timeout_secs > 0 {
            i64::from(timeout_secs)
        } else {
            rackflow_domain::task::DEFAULT_QUEUE_TIMEOUT_SECS
        },
    }
}

/// Issue 33: a decommissioned rack takes no task but an ingest (which
/// brings it back); the refusal names the racks and says how.
fn check_not_decommissioned(req: &SubmitRequest, racks: &[Rack]) -> Result<(), TaskError> {
    if req.task_type == TaskType::BringUp && req.information.code == "ingest" {
        return Ok(());
    }
    let retired: Vec<String> = racks
        .iter()
        .filter(|r| r.lifecycle.status == LifecycleStatus::Decommissioned)
        .map(|r| r.external_id.clone().unwrap_or_else(|| r.id.to_string()))
        .collect();
    if retired.is_empty() {
        return Ok(());
    }
    Err(TaskError::Precondition(format!(
        "rack{} {} {} decommissioned: only IngestRack may target a decommissioned rack",
        if retired.len() == 1 { "" } else { "s" },
        crate::manager::first_listed(&retired, ", ", ", and"),
        if retired.len() == 1 { "is" } else { "are" },
    )))
}

/// Issue 31: a single `target_version` (no bundle, not
/// `same_version_for_all_models`) on racks of several models, or one naming
/// another model family, is refused before any task is written.
fn check_one_version(req: &SubmitRequest, racks: &[Rack]) -> Result<(), TaskError> {
    let Some(version) = req
        .information
        .firmware
        .as_ref()
        .and_then(rackflow_domain::run::FirmwarePayload::unchecked_single_version)
    else {
        return Ok(());
    };
    rackflow_domain::bundle::check_one_version(version, racks.iter().map(|r| r.model.as_deref()))
        .map_err(TaskError::Invalid)
}
