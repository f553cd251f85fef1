//! Task schedules (spec flow-core §6): the schedule manager and its
//! dispatcher loop.
//!
//! Owns schedule creation (scope resolution from a target spec), the
//! lifecycle controls (pause, resume, update, delete, trigger), scope
//! management, the advisory conflict check, and the loop that claims due
//! schedules and submits their tasks through the [`TaskManager`] — the same
//! path the power and firmware RPCs take.
//!
//! Exactly-once per occurrence: a due schedule is claimed in ONE store
//! transaction that locks its row (`FOR UPDATE SKIP LOCKED` on PostgreSQL,
//! the single writer on SQLite), re-checks "enabled and due", applies the
//! pure [`plan_due`] decision and advances `next_run_at` before committing.
//! A second replica either skips the locked row or, after the commit, no
//! longer sees it as due. Only the claimer submits, outside the
//! transaction, and each task carries an idempotency key naming the
//! occurrence and rack, so even a repeated submission gets the same task
//! back. A crash between the commit and the submissions loses that
//! occurrence (at-most-once, as the reference).
//!
//! The loop sleeps until the earliest `next_run_at` (or the poll interval,
//! a safety net for schedules other replicas changed), and is woken at once
//! by create / update / resume / trigger through a [`Notify`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rackflow_domain::conflict::types_may_conflict;
use rackflow_domain::run::{Page, QueueStrategy};
use rackflow_domain::schedule::{
    self, OperationTemplate, OverlapPolicy, ScheduleScope, ScheduleSpec, ScopeError, ScopeSpec,
    SpecKind, TaskSchedule, plan_due, scope_eligible,
};
use rackflow_domain::target::{ComponentFilter, TargetSpec};
use rackflow_store::{ScheduleFilter, ScheduleLock, Store};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::background::Background;
use crate::error::EngineError;
use crate::error::ScheduleError;
use crate::metrics::ScheduleSkip;
use crate::resolve;
use crate::tasks::{SubmitRequest, TaskManager, queue_policy};

/// Where the schedule loop reads the time (tests inject their own).
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock, truncated to microseconds (what the store keeps), so
/// a time compared before and after a round trip is the same instant.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        let now = Utc::now();
        DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now)
    }
}

/// Schedule dispatcher tunables; defaults documented in
/// `docs/configuration.md` (`[schedules]`).
#[derive(Debug, Clone)]
pub struct ScheduleConfig {
    /// Safety-net poll: the loop never sleeps longer than this.
    pub poll_interval: Duration,
    /// Due schedules claimed per pass.
    pub batch: i64,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        ScheduleConfig {
            poll_interval: Duration::from_secs(10),
            batch: 10,
        }
    }
}

/// How many times the task of a fired scope is recorded before giving up
/// (the reference: 3 attempts, backoff 100/200/400 ms).
const RECORD_ATTEMPTS: u32 = 3;

/// A schedule to create (validated shape; spec checked here).
#[derive(Debug, Clone)]
pub struct NewSchedule {
    pub name: String,
    pub kind: Option<SpecKind>,
    pub spec: String,
    pub timezone: String,
    pub overlap_policy: OverlapPolicy,
    pub catchup_window_secs: i64,
    pub template: OperationTemplate,
    pub target: TargetSpec,
}

/// Fields an update changes (`None`: left alone), from the field mask.
#[derive(Debug, Clone, Default)]
pub struct ScheduleUpdate {
    pub name: Option<String>,
    /// Kind and spec text (with the zone of the request, if any).
    pub spec: Option<(Option<SpecKind>, String)>,
    pub timezone: Option<String>,
    pub overlap_policy: Option<OverlapPolicy>,
    pub catchup_window_secs: Option<i64>,
}

/// What [`ScheduleManager::update_scopes`] did.
#[derive(Debug, Clone)]
pub struct ScopeUpdate {
    pub scopes: Vec<ScheduleScope>,
    pub added: usize,
    pub removed: usize,
    pub updated: usize,
}

/// One claimed occurrence, to submit outside the transaction.
struct Firing {
    schedule: TaskSchedule,
    fire_at: DateTime<Utc>,
    scopes: Vec<ScheduleScope>,
    /// Occurrence key on tasks (none for a manual trigger).
    keyed: bool,
}

/// Creates, controls and fires task schedules.
pub struct ScheduleManager {
    store: Arc<dyn Store>,
    tasks: Arc<TaskManager>,
    config: ScheduleConfig,
    clock: Arc<dyn Clock>,
    wake: Notify,
    /// The dispatcher loop.
    background: Background,
}

fn not_found(id: Uuid) -> ScheduleError {
    ScheduleError::NotFound(format!("task schedule {id} not found"))
}

fn spent(id: Uuid) -> ScheduleError {
    ScheduleError::FailedPrecondition(format!(
        "task schedule {id} is a one-time schedule that has already fired"
    ))
}

impl ScheduleManager {
    pub fn new(
        store: Arc<dyn Store>,
        tasks: Arc<TaskManager>,
        config: ScheduleConfig,
        clock: Arc<dyn Clock>,
    ) -> Arc<ScheduleManager> {
        Arc::new(ScheduleManager {
            store,
            tasks,
            config,
            clock,
            wake: Notify::new(),
            background: Background::new("schedule dispatcher"),
        })
    }

    /// Wakes the loop to recompute its sleep (a schedule changed).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    // ---- scopes from target specs ----------------------------------------------

    /// Resolves a target spec to one scope per rack (spec §6.2): rack
    /// targets give the whole rack or a type filter, NVLink domains their
    /// member racks at this moment (with the type filter), component
    /// targets are grouped per rack; a rack or component named twice is
    /// refused.
    pub async fn resolve_scopes(&self, target: &TargetSpec) -> Result<Vec<ScopeSpec>, EngineError> {
        target.validate().map_err(ScheduleError::Invalid)?;
        let mut entries = Vec::new();
        match target {
            TargetSpec::Racks(racks) => {
                for (i, t) in racks.iter().enumerate() {
                    let rack = resolve::resolve_rack(self.store.as_ref(), &t.identifier)
                        .await
                        .map_err(|e| e.wrap(&format!("rack target {i}")))?;
                    let filter = (!t.component_types.is_empty()).then(|| ComponentFilter::Types {
                        types: t.component_types.clone(),
                    });
                    entries.push(ScopeSpec {
                        rack_id: rack.id,
                        filter,
                    });
                }
            }
            TargetSpec::Components(components) => {
                for (i, t) in components.iter().enumerate() {
                    let c = resolve::resolve_component(self.store.as_ref(), t)
                        .await
                        .map_err(|e| e.wrap(&format!("component target {i}")))?;
                    let Some(rack_id) = c.rack_id else {
                        return Err(ScheduleError::FailedPrecondition(format!(
                            "component target {i}: component {} is not assigned to a rack",
                            c.id
                        ))
                        .into());
                    };
                    entries.push(ScopeSpec {
                        rack_id,
                        filter: Some(ComponentFilter::Components {
                            components: vec![c.id],
                        }),
                    });
                }
            }
            TargetSpec::NvlDomains(domains) => {
                // A domain is materialised into its member racks now: a
                // rack that joins later is not in the schedule (as the
                // reference does; `UpdateTaskScheduleScope` re-reads it).
                for (i, t) in domains.iter().enumerate() {
                    let racks = resolve::domain_racks(self.store.as_ref(), &t.identifier)
                        .await
                        .map_err(|e| e.wrap(&format!("NVL domain target {i}")))?;
                    for rack in racks {
                        let filter =
                            (!t.component_types.is_empty()).then(|| ComponentFilter::Types {
                                types: t.component_types.clone(),
                            });
                        entries.push(ScopeSpec {
                            rack_id: rack.id,
                            filter,
                        });
                    }
                }
            }
        }
        Ok(schedule::scopes_from_entries(entries)?)
    }

    fn new_scope(&self, schedule_id: Uuid, spec: ScopeSpec) -> ScheduleScope {
        ScheduleScope {
            id: Uuid::new_v4(),
            schedule_id,
            rack_id: spec.rack_id,
            filter: spec.filter,
            last_task_id: None,
            created_at: self.clock.now(),
        }
    }

    // ---- CRUD -------------------------------------------------------------------

    /// Creates an enabled schedule with its scopes (spec §6.2).
    pub async fn create(&self, req: NewSchedule) -> Result<TaskSchedule, EngineError> {
        if req.name.trim().is_empty() {
            return Err(ScheduleError::Invalid("schedule name is required".into()).into());
        }
        if req.catchup_window_secs < 0 {
            return Err(
                ScheduleError::Invalid("catchup_window must not be negative".into()).into(),
            );
        }
        let (spec, timing) = ScheduleSpec::normalize(req.kind, &req.spec, &req.timezone)?;
        if let Some(rule_id) = req.template.rule_id
            && self.store.rule_get(rule_id).await?.is_none()
        {
            return Err(
                ScheduleError::NotFound(format!("operation rule {rule_id} not found")).into(),
            );
        }
        let scopes = self.resolve_scopes(&req.target).await?;
        if scopes.is_empty() {
            return Err(ScheduleError::FailedPrecondition(ScopeError::NoScopes.to_string()).into());
        }
        let now = self.clock.now();
        let id = Uuid::new_v4();
        let schedule = TaskSchedule {
            id,
            name: req.name.trim().to_string(),
            spec,
            overlap_policy: req.overlap_policy,
            enabled: true,
            next_run_at: timing.first_run(now),
            last_run_at: None,
            template: req.template,
            catchup_window_secs: req.catchup_window_secs,
            skipped_count: 0,
            last_skip_reason: String::new(),
            created_at: now,
            updated_at: now,
        };
        let scopes: Vec<ScheduleScope> =
            scopes.into_iter().map(|s| self.new_scope(id, s)).collect();
        self.store.schedule_create(&schedule, &scopes).await?;
        tracing::info!(
            schedule_id = %id,
            name = %schedule.name,
            kind = %schedule.spec.kind,
            spec = %schedule.spec.spec,
            next_run_at = ?schedule.next_run_at,
            scopes = scopes.len(),
            "task schedule created"
        );
        self.wake();
        self.get(id).await
    }

    pub async fn get(&self, id: Uuid) -> Result<TaskSchedule, EngineError> {
        Ok(self
            .store
            .schedule_get(id)
            .await?
            .ok_or_else(|| not_found(id))?)
    }

    pub async fn list(
        &self,
        filter: &ScheduleFilter,
        page: Page,
    ) -> Result<(Vec<TaskSchedule>, i64), EngineError> {
        Ok(self.store.schedule_list(filter, page).await?)
    }

    pub async fn delete(&self, id: Uuid) -> Result<(), EngineError> {
        if !self.store.schedule_delete(id).await? {
            return Err(not_found(id).into());
        }
        tracing::info!(schedule_id = %id, "task schedule deleted");
        Ok(())
    }

    /// Runs `decide` on the locked schedule; its error aborts without
    /// writing. Returns the state as written.
    async fn locked<F>(&self, id: Uuid, mut decide: F) -> Result<ScheduleLock, ScheduleError>
    where
        F: FnMut(&mut ScheduleLock, DateTime<Utc>) -> Result<(), ScheduleError> + Send,
    {
        let mut refused: Option<ScheduleError> = None;
        let clock = self.clock.clone();
        let mut apply = |lock: &mut ScheduleLock| {
            // Decide on a copy: a refusal leaves the row unchanged, so the
            // store writes nothing.
            let mut draft = lock.clone();
            match decide(&mut draft, clock.now()) {
                Ok(()) => *lock = draft,
                Err(e) => refused = Some(e),
            }
            Ok(())
        };
        let result = self.store.schedule_lock_apply(id, None, &mut apply).await;
        if let Some(e) = refused {
            return Err(e);
        }
        result?.ok_or_else(|| not_found(id))
    }

    /// Pauses (spec §6.4): a spent one-time schedule is refused, an already
    /// paused one is left as it is.
    pub async fn pause(&self, id: Uuid) -> Result<TaskSchedule, EngineError> {
        let lock = self
            .locked(id, |lock, _| {
                if lock.schedule.is_spent_one_time() {
                    return Err(spent(id));
                }
                lock.schedule.enabled = false;
                Ok(())
            })
            .await?;
        tracing::info!(schedule_id = %id, "task schedule paused");
        Ok(lock.schedule)
    }

    /// Resumes (spec §6.4): interval and cron schedules get a next run
    /// computed from now (what was missed while paused is not replayed);
    /// a one-time schedule keeps its instant.
    pub async fn resume(&self, id: Uuid) -> Result<TaskSchedule, EngineError> {
        let lock = self
            .locked(id, |lock, now| {
                if lock.schedule.enabled {
                    return Ok(());
                }
                if lock.schedule.is_spent_one_time() {
                    return Err(spent(id));
                }
                let timing = lock.schedule.spec.timing()?;
                if lock.schedule.spec.kind != SpecKind::OneTime {
                    lock.schedule.next_run_at = timing.first_run(now);
                }
                lock.schedule.enabled = true;
                Ok(())
            })
            .await?;
        tracing::info!(schedule_id = %id, next_run_at = lock.schedule.next_run_at.map(tracing::field::display), "task schedule resumed");
        self.wake();
        Ok(lock.schedule)
    }

    /// Applies a field-mask update (spec §6.4).
    pub async fn update(
        &self,
        id: Uuid,
        update: ScheduleUpdate,
    ) -> Result<TaskSchedule, EngineError> {
        if let Some(name) = &update.name
            && name.trim().is_empty()
        {
            return Err(ScheduleError::Invalid("schedule name is required".into()).into());
        }
        if update.catchup_window_secs.is_some_and(|w| w < 0) {
            return Err(
                ScheduleError::Invalid("catchup_window must not be negative".into()).into(),
            );
        }
        let lock = self
            .locked(id, |lock, now| {
                let s = &mut lock.schedule;
                if let Some(name) = &update.name {
                    s.name = name.trim().to_string();
                }
                if let Some(policy) = update.overlap_policy {
                    s.overlap_policy = policy;
                }
                if let Some(window) = update.catchup_window_secs {
                    s.catchup_window_secs = window;
                }
                let spec_change = update.spec.is_some();
                if spec_change || update.timezone.is_some() {
                    let (kind, text) = match &update.spec {
                        Some((kind, text)) => (*kind, text.clone()),
                        None => (Some(s.spec.kind), s.spec.spec.clone()),
                    };
                    let zone = update
                        .timezone
                        .clone()
                        .unwrap_or_else(|| s.spec.timezone.clone());
                    if spec_change && s.is_spent_one_time() {
                        return Err(ScheduleError::FailedPrecondition(format!(
                            "cannot change the spec of task schedule {id}: its one-time run has already fired"
                        )));
                    }
                    let (spec, timing) = ScheduleSpec::normalize(kind, &text, &zone)?;
                    let recompute = spec_change || spec.kind == SpecKind::Cron;
                    s.spec = spec;
                    if recompute && !s.is_spent_one_time() {
                        s.next_run_at = timing.first_run(now);
                    }
                }
                Ok(())
            })
            .await?;
        tracing::info!(schedule_id = %id, next_run_at = lock.schedule.next_run_at.map(tracing::field::display), "task schedule updated");
        self.wake();
        Ok(lock.schedule)
    }

    /// Fires now (spec §6.4): ignores `enabled` and the overlap policy,
    /// applies the after-fire step and submits on every scope.
    pub async fn trigger(&self, id: Uuid) -> Result<Vec<Uuid>, EngineError> {
        let mut fire_at = None;
        let lock = self
            .locked(id, |lock, now| {
                if lock.schedule.is_spent_one_time() {
                    return Err(spent(id));
                }
                let timing = lock.schedule.spec.timing()?;
                match lock.schedule.spec.kind {
                    SpecKind::OneTime => {
                        lock.schedule.enabled = false;
                        lock.schedule.next_run_at = None;
                    }
                    _ => lock.schedule.next_run_at = timing.first_run(now),
                }
                lock.schedule.last_run_at = Some(now);
                fire_at = Some(now);
                Ok(())
            })
            .await?;
        let fire_at = fire_at.unwrap_or_else(|| self.clock.now());
        self.wake();
        let firing = Firing {
            schedule: lock.schedule,
            fire_at,
            scopes: lock.scopes,
            keyed: false,
        };
        let (ids, first_error) = self.submit(firing).await;
        match (ids.is_empty(), first_error) {
            (true, Some(e)) => Err(e),
            (true, None) => {
                Err(ScheduleError::FailedPrecondition("failed to create any tasks".into()).into())
            }
            _ => Ok(ids),
        }
    }

    // ---- scopes -----------------------------------------------------------------

    pub async fn scopes(&self, id: Uuid) -> Result<Vec<ScheduleScope>, EngineError> {
        self.get(id).await?;
        Ok(self.store.schedule_scopes(id).await?)
    }

    /// Merges a target spec into the scopes (spec §6.5 Add).
    pub async fn add_scopes(
        &self,
        id: Uuid,
        target: &TargetSpec,
    ) -> Result<Vec<ScheduleScope>, EngineError> {
        self.get(id).await?;
        let added = self.resolve_scopes(target).await?;
        let lock = self
            .locked(id, |lock, now| {
                for add in &added {
                    match lock.scopes.iter_mut().find(|s| s.rack_id == add.rack_id) {
                        Some(existing) => {
                            existing.filter =
                                schedule::merge_filter(add.rack_id, &existing.filter, &add.filter)?;
                        }
                        None => lock.scopes.push(ScheduleScope {
                            id: Uuid::new_v4(),
                            schedule_id: id,
                            rack_id: add.rack_id,
                            filter: add.filter.clone(),
                            last_task_id: None,
                            created_at: now,
                        }),
                    }
                }
                Ok(())
            })
            .await?;
        Ok(lock.scopes)
    }

    /// Reconciles the scopes to a target spec (spec §6.5 Update).
    pub async fn update_scopes(
        &self,
        id: Uuid,
        target: &TargetSpec,
    ) -> Result<ScopeUpdate, EngineError> {
        self.get(id).await?;
        let desired = self.resolve_scopes(target).await?;
        let mut counts = (0, 0, 0);
        let lock = self
            .locked(id, |lock, now| {
                let plan = schedule::reconcile(&lock.scopes, &desired)?;
                counts = (plan.add.len(), plan.remove.len(), plan.update.len());
                lock.scopes.retain(|s| !plan.remove.contains(&s.id));
                for (scope_id, filter) in &plan.update {
                    if let Some(s) = lock.scopes.iter_mut().find(|s| s.id == *scope_id) {
                        s.filter = filter.clone();
                    }
                }
                for add in &plan.add {
                    lock.scopes.push(ScheduleScope {
                        id: Uuid::new_v4(),
                        schedule_id: id,
                        rack_id: add.rack_id,
                        filter: add.filter.clone(),
                        last_task_id: None,
                        created_at: now,
                    });
                }
                Ok(())
            })
            .await?;
        Ok(ScopeUpdate {
            scopes: lock.scopes,
            added: counts.0,
            removed: counts.1,
            updated: counts.2,
        })
    }

    /// Removes one scope; the last one of a schedule stays (spec §6.5).
    pub async fn remove_scope(&self, scope_id: Uuid) -> Result<(), EngineError> {
        let scope = self
            .store
            .schedule_scope_get(scope_id)
            .await?
            .ok_or_else(|| {
                ScheduleError::NotFound(format!("task schedule scope {scope_id} not found"))
            })?;
        self.locked(scope.schedule_id, |lock, _| {
            if !lock.scopes.iter().any(|s| s.id == scope_id) {
                return Err(ScheduleError::NotFound(format!(
                    "task schedule scope {scope_id} not found"
                )));
            }
            if lock.scopes.len() <= 1 {
                return Err(ScheduleError::FailedPrecondition(
                    "cannot remove the last scope of a task schedule".into(),
                ));
            }
            lock.scopes.retain(|s| s.id != scope_id);
            Ok(())
        })
        .await?;
        Ok(())
    }

    /// Advisory conflict check (spec §6.6): enabled schedules other than
    /// `exclude` that share a rack with `target` and whose operation type
    /// may conflict with `task_type` by the conflict table (coarse: ignores
    /// component overlap).
    pub async fn check_conflicts(
        &self,
        template: &OperationTemplate,
        target: &TargetSpec,
        exclude: Option<Uuid>,
    ) -> Result<Vec<TaskSchedule>, EngineError> {
        let proposed = self.resolve_scopes(target).await?;
        let filter = ScheduleFilter {
            rack_id: None,
            enabled_only: true,
        };
        let (schedules, _) = self
            .store
            .schedule_list(
                &filter,
                Page {
                    offset: 0,
                    limit: 0,
                },
            )
            .await?;
        let mut out = Vec::new();
        for s in schedules {
            if Some(s.id) == exclude
                || !types_may_conflict(template.task_type, s.template.task_type)
            {
                continue;
            }
            let scopes = self.store.schedule_scopes(s.id).await?;
            if scopes
                .iter()
                .any(|sc| proposed.iter().any(|p| p.rack_id == sc.rack_id))
            {
                out.push(s);
            }
        }
        Ok(out)
    }

    // ---- the dispatcher -----------------------------------------------------------

    /// Starts the loop; [`ScheduleManager::shutdown`] stops it.
    pub fn spawn(self: &Arc<Self>) {
        let me = self.clone();
        let stop = self.background.token().clone();
        self.background
            .spawn("schedule dispatcher loop", async move {
                tracing::info!(
                    poll_ms = me.config.poll_interval.as_millis() as u64,
                    batch = me.config.batch,
                    "schedule dispatcher started"
                );
                loop {
                    let full = match me.tick().await {
                        Ok(claimed) => claimed >= usize::try_from(me.config.batch).unwrap_or(0),
                        Err(e) => {
                            tracing::error!(error = %e, "schedule dispatcher pass failed");
                            false
                        }
                    };
                    let wait = if full {
                        Duration::ZERO
                    } else {
                        me.sleep_for().await
                    };
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = me.wake.notified() => {}
                        () = tokio::time::sleep(wait) => {}
                    }
                }
                tracing::info!("schedule dispatcher stopped");
            });
    }

    /// Stops the loop and waits for its pass in flight.
    pub async fn shutdown(&self) {
        self.background.shutdown().await;
    }

    /// Until the earliest next run, at most the poll interval.
    async fn sleep_for(&self) -> Duration {
        let poll = self.config.poll_interval;
        match self.store.schedule_next_due().await {
            Ok(Some(at)) => (at - self.clock.now())
                .to_std()
                .unwrap_or(Duration::ZERO)
                .min(poll),
            Ok(None) => poll,
            Err(e) => {
                tracing::warn!(error = %e, "reading the next schedule due time failed");
                poll
            }
        }
    }

    /// One pass: claims up to a batch of due schedules and fires them.
    /// Returns how many were claimed.
    pub async fn tick(&self) -> Result<usize, EngineError> {
        let ids = self
            .store
            .schedule_due_ids(self.clock.now(), self.config.batch)
            .await?;
        let mut claimed = 0;
        for id in ids {
            match self.claim(id).await {
                Ok(Some(firing)) => {
                    claimed += 1;
                    if let Some(firing) = firing {
                        self.submit(firing).await;
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(schedule_id = %id, error = %e, "claiming a due schedule failed")
                }
            }
        }
        Ok(claimed)
    }

    /// Claims one due schedule: `None` when another replica has it or it is
    /// no longer due; `Some(None)` when claimed but nothing fires.
    async fn claim(&self, id: Uuid) -> Result<Option<Option<Firing>>, ScheduleError> {
        let now = self.clock.now();
        let mut fire: Option<(DateTime<Utc>, Vec<ScheduleScope>)> = None;
        let mut skips = Vec::new();
        let mut apply = |lock: &mut ScheduleLock| {
            skips.clear();
            fire = Self::plan_claim(lock, now, &mut skips);
            Ok(())
        };
        let Some(lock) = self
            .store
            .schedule_lock_apply(id, Some(now), &mut apply)
            .await?
        else {
            return Ok(None);
        };
        // Counted once the claim is written.
        for (skip, count) in skips {
            self.tasks.metrics().schedule_skipped(skip, count);
        }
        Ok(Some(fire.map(|(fire_at, scopes)| Firing {
            schedule: lock.schedule,
            fire_at,
            scopes,
            keyed: true,
        })))
    }

    /// The claim decision under the row lock: the catch-up plan, the
    /// overlap filter, the after-fire step and the skip bookkeeping.
    fn plan_claim(
        lock: &mut ScheduleLock,
        now: DateTime<Utc>,
        skips: &mut Vec<(ScheduleSkip, u64)>,
    ) -> Option<(DateTime<Utc>, Vec<ScheduleScope>)> {
        let s = &mut lock.schedule;
        let due = s.next_run_at?;
        let timing = match s.spec.timing() {
            Ok(t) => t,
            Err(e) => {
                // A stored spec that no longer parses (e.g. a zone dropped
                // from the database) would be claimed forever: disable it.
                let reason = format!("disabled: stored spec is invalid: {e}");
                tracing::error!(schedule_id = %s.id, name = %s.name, reason = %reason, "task schedule disabled");
                s.enabled = false;
                s.note_skip(1, reason);
                skips.push((ScheduleSkip::InvalidSpec, 1));
                return None;
            }
        };
        let plan = plan_due(&timing, due, now, s.catchup_window());
        s.next_run_at = plan.next_run_at;
        if plan.disable {
            s.enabled = false;
        }
        if let Some(reason) = &plan.reason {
            let count = plan.skipped + plan.coalesced;
            tracing::warn!(
                schedule_id = %s.id,
                name = %s.name,
                skipped = plan.skipped,
                coalesced = plan.coalesced,
                reason = %reason,
                "task schedule occurrences not fired individually"
            );
            s.note_skip(count, reason.clone());
            skips.push((ScheduleSkip::CatchUp, count));
        }
        let fire_at = plan.fire_at?;
        let policy = s.overlap_policy;
        let (eligible, held): (Vec<_>, Vec<_>) = lock.scopes.iter().cloned().partition(|scope| {
            let last = scope
                .last_task_id
                .and_then(|t| lock.last_task_status.get(&t).copied());
            scope_eligible(policy, last)
        });
        let s = &mut lock.schedule;
        if !held.is_empty() {
            let racks: Vec<String> = held.iter().map(|h| h.rack_id.to_string()).collect();
            let reason = format!(
                "occurrence {} skipped on {} rack(s) whose previous task is still active (overlap policy skip): {}",
                schedule::rfc3339(fire_at),
                held.len(),
                racks.join(", ")
            );
            tracing::warn!(schedule_id = %s.id, name = %s.name, racks = held.len(), reason = %reason, "task schedule overlap skip");
            s.note_skip(held.len() as u64, reason);
            skips.push((ScheduleSkip::Overlap, held.len() as u64));
        }
        if eligible.is_empty() {
            return None;
        }
        s.last_run_at = Some(now);
        Some((fire_at, eligible))
    }

    /// Submits one task per scope of a claimed occurrence and records each
    /// scope's task. Returns the created task ids and the first failure.
    async fn submit(&self, firing: Firing) -> (Vec<Uuid>, Option<EngineError>) {
        let s = &firing.schedule;
        let strategy = match s.overlap_policy {
            OverlapPolicy::Queue => QueueStrategy::Queue,
            OverlapPolicy::Skip => QueueStrategy::Reject,
        };
        let timeout = i32::try_from(s.template.queue_timeout_secs).unwrap_or(i32::MAX);
        let description = schedule::task_description(&s.name, firing.fire_at);
        let mut created = Vec::new();
        let mut failures: Vec<(Uuid, EngineError)> = Vec::new();
        let mut recorded: HashMap<Uuid, Uuid> = HashMap::new();
        for scope in &firing.scopes {
            let req = SubmitRequest {
                task_type: s.template.task_type,
                information: s.template.information.clone(),
                description: description.clone(),
                target: schedule::scope_target(scope),
                queue: queue_policy(strategy, timeout),
                rule_id: s.template.rule_id,
                idempotency_key: firing
                    .keyed
                    .then(|| schedule::occurrence_key(s.id, firing.fire_at, scope.rack_id)),
                required_rack_id: Some(scope.rack_id),
                trigger: rackflow_domain::task::TaskTrigger::Api,
            };
            match self.tasks.submit(req).await {
                Ok(ids) => {
                    if let Some(task_id) = ids.first() {
                        recorded.insert(scope.id, *task_id);
                    }
                    created.extend(ids);
                }
                Err(e) => {
                    tracing::warn!(schedule_id = %s.id, name = %s.name, rack_id = %scope.rack_id, error = %e, "scheduled task not created");
                    failures.push((scope.rack_id, e));
                }
            }
        }
        for (scope_id, task_id) in &recorded {
            self.record_last_task(*scope_id, *task_id).await;
        }
        tracing::info!(
            schedule_id = %s.id,
            name = %s.name,
            fire_at = %schedule::rfc3339(firing.fire_at),
            tasks = created.len(),
            failed = failures.len(),
            "task schedule fired"
        );
        let metrics = self.tasks.metrics();
        metrics.schedule_fired(!firing.keyed);
        if !failures.is_empty() {
            metrics.schedule_skipped(ScheduleSkip::SubmitFailed, failures.len() as u64);
        }
        if !failures.is_empty() {
            let reason = format!(
                "occurrence {} not submitted on {} rack(s): {}",
                schedule::rfc3339(firing.fire_at),
                failures.len(),
                failures
                    .iter()
                    .map(|(rack, e)| format!("{rack}: {e}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            let count = failures.len() as u64;
            let noted = self
                .locked(s.id, |lock, _| {
                    lock.schedule.note_skip(count, reason.clone());
                    Ok(())
                })
                .await;
            if let Err(e) = noted {
                tracing::warn!(schedule_id = %s.id, error = %e, "recording failed submissions on the schedule failed");
            }
        }
        (created, failures.into_iter().next().map(|(_, e)| e))
    }

    async fn record_last_task(&self, scope_id: Uuid, task_id: Uuid) {
        let mut backoff = Duration::from_millis(100);
        for attempt in 1..=RECORD_ATTEMPTS {
            match self
                .store
                .schedule_scope_set_last_task(scope_id, task_id)
                .await
            {
                Ok(()) => return,
                Err(e) if attempt == RECORD_ATTEMPTS => {
                    tracing::error!(scope_id = %scope_id, task_id = %task_id, error = %e, "recording a scope's last task failed");
                }
                Err(e) => {
                    tracing::warn!(scope_id = %scope_id, attempt, error = %e, "recording a scope's last task failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                }
            }
        }
    }

    /// The next `n` fire times of a schedule as it stands (none when
    /// paused or spent).
    pub fn upcoming(&self, schedule: &TaskSchedule, n: usize) -> Vec<DateTime<Utc>> {
        if !schedule.enabled {
            return Vec::new();
        }
        let Some(first) = schedule.next_run_at else {
            return Vec::new();
        };
        let Ok(timing) = schedule.spec.timing() else {
            return Vec::new();
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

    /// Fire times a spec would have if created now (`create --preview`).
    pub fn preview(
        &self,
        kind: Option<SpecKind>,
        spec: &str,
        timezone: &str,
        n: usize,
    ) -> Result<(ScheduleSpec, Vec<DateTime<Utc>>), ScheduleError> {
        let (spec, timing) = ScheduleSpec::normalize(kind, spec, timezone)?;
        Ok((spec, timing.upcoming(self.clock.now(), n)))
    }

    /// The clock (tests compare against it).
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
}

#[cfg(test)]
#[path = "schedules_tests.rs"]
mod tests;
