//! Store writes as events: [`ObservedStore`] wraps the store a test server
//! runs on and bumps a counter after every write, so a test that waits for
//! some state re-reads it when something was written, never on a timer.
//!
//! Everything the flow server answers is read from its store, so "the state
//! may have changed" is exactly "the store was written". Reads do not
//! count (a waiter re-reading would wake itself).

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rackflow_domain::ComponentType;
use rackflow_domain::inventory::{Component, NvlDomain, Rack};
use rackflow_domain::rule::{OperationRule, RackRuleAssociation, RuleDefinition};
use rackflow_domain::run::{OperationRun, OperationRunTarget, Page, RunListFilter, TargetQuery};
use rackflow_domain::task::{Task, TaskStatus, TaskType};
use rackflow_store::{
    ComponentFilterQuery, ComponentPatch, LockMode, NvlDomainQuery, PurgeOutcome, RackFilter,
    RackImport, RackPatch, RunLock, ScheduleFilter, ScheduleLock, Store, StoreResult,
    SubmitDecision, SubmitOutcome, TaskFilter, TaskTransition, TaskUpdate,
};
use tokio::sync::watch;
use uuid::Uuid;

/// The count of store writes, observable from async code (a `watch`) and
/// from plain threads (a condvar).
#[derive(Clone)]
pub struct Changes {
    inner: Arc<ChangesInner>,
}

struct ChangesInner {
    tx: watch::Sender<u64>,
    count: Mutex<u64>,
    bumped: Condvar,
}

impl Default for Changes {
    fn default() -> Self {
        Changes::new()
    }
}

impl Changes {
    pub fn new() -> Changes {
        Changes {
            inner: Arc::new(ChangesInner {
                tx: watch::channel(0).0,
                count: Mutex::new(0),
                bumped: Condvar::new(),
            }),
        }
    }

    /// Records one write and wakes every waiter.
    pub fn bump(&self) {
        self.inner.tx.send_modify(|n| *n += 1);
        let mut count = self
            .inner
            .count
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *count += 1;
        self.inner.bumped.notify_all();
    }

    /// A waiter that sees the writes made from now on, giving up at
    /// `deadline` from now with a panic naming `what`.
    pub fn waiter(&self, what: impl Into<String>, deadline: Duration) -> Waiter {
        let rx = self.inner.tx.subscribe();
        let seen = *rx.borrow();
        Waiter {
            changes: self.clone(),
            rx,
            seen,
            what: what.into(),
            deadline: Instant::now() + deadline,
        }
    }
}

/// Follows the writes after its creation (see [`Changes::waiter`]). The
/// loop that uses it reads the state, returns if it holds, and otherwise
/// calls [`Waiter::next`]: a write made between the read and the call is
/// not missed.
pub struct Waiter {
    changes: Changes,
    rx: watch::Receiver<u64>,
    seen: u64,
    what: String,
    deadline: Instant,
}

impl Waiter {
    /// Returns after the next write (at once if one happened since the last
    /// call); at the deadline, panics naming what was awaited and `state`
    /// (what the test saw last).
    pub async fn next(&mut self, state: impl std::fmt::Debug) {
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(remaining, self.rx.changed()).await {
            Ok(Ok(())) => self.seen = *self.rx.borrow_and_update(),
            Ok(Err(_)) => panic!("store dropped while waiting for {}", self.what),
            Err(_) => panic!("timed out waiting for {}; last seen: {state:?}", self.what),
        }
    }

    /// For a check that must hold throughout a window of the scenario:
    /// returns true after the next write, false once `until` has passed
    /// with no write (then the window is over).
    pub async fn next_within(&mut self, until: Instant) -> bool {
        let remaining = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(remaining, self.rx.changed()).await {
            Ok(Ok(())) => {
                self.seen = *self.rx.borrow_and_update();
                Instant::now() < until
            }
            Ok(Err(_)) => panic!("store dropped while checking {}", self.what),
            Err(_) => false,
        }
    }

    /// [`Waiter::next`] for a plain thread (the CLI tests).
    pub fn next_blocking(&mut self, state: impl std::fmt::Debug) {
        let count = self
            .changes
            .inner
            .count
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        let seen = self.seen;
        let (count, timeout) = self
            .changes
            .inner
            .bumped
            .wait_timeout_while(count, remaining, |n| *n == seen)
            .unwrap_or_else(PoisonError::into_inner);
        if timeout.timed_out() && *count == seen {
            panic!("timed out waiting for {}; last seen: {state:?}", self.what);
        }
        self.seen = *count;
        // Keep the async side in step with what this waiter has seen.
        self.rx.borrow_and_update();
    }

    /// What this waiter waits for.
    pub fn what(&self) -> &str {
        &self.what
    }
}

/// A store that reports its writes to [`Changes`].
pub struct ObservedStore {
    inner: Arc<dyn Store>,
    changes: Changes,
}

impl ObservedStore {
    pub fn wrap(inner: Arc<dyn Store>, changes: Changes) -> Arc<dyn Store> {
        Arc::new(ObservedStore { inner, changes })
    }

    fn changed(&self) {
        self.changes.bump();
    }
}

#[async_trait]
impl Store for ObservedStore {
    fn dialect(&self) -> &'static str {
        self.inner.dialect()
    }

    async fn rack_create(&self, rack: &Rack, components: &[Component]) -> StoreResult<()> {
        let result = self.inner.rack_create(rack, components).await;
        self.changed();
        result
    }

    async fn racks_import(&self, racks: &[(Rack, Vec<Component>)]) -> StoreResult<Vec<RackImport>> {
        let result = self.inner.racks_import(racks).await;
        self.changed();
        result
    }

    async fn rack_get(&self, id: Uuid, include_deleted: bool) -> StoreResult<Option<Rack>> {
        self.inner.rack_get(id, include_deleted).await
    }

    async fn rack_get_by_name(&self, name: &str) -> StoreResult<Vec<Rack>> {
        self.inner.rack_get_by_name(name).await
    }

    async fn rack_get_by_external_id(&self, external_id: &str) -> StoreResult<Option<Rack>> {
        self.inner.rack_get_by_external_id(external_id).await
    }

    async fn rack_get_by_serial(
        &self,
        manufacturer: &str,
        serial_number: &str,
    ) -> StoreResult<Option<rackflow_domain::inventory::Rack>> {
        self.inner
            .rack_get_by_serial(manufacturer, serial_number)
            .await
    }

    async fn component_get_by_serial(
        &self,
        manufacturer: &str,
        serial_number: &str,
    ) -> StoreResult<Option<rackflow_domain::inventory::Component>> {
        self.inner
            .component_get_by_serial(manufacturer, serial_number)
            .await
    }

    async fn racks_get_many(&self, ids: &[Uuid]) -> StoreResult<Vec<Rack>> {
        self.inner.racks_get_many(ids).await
    }

    async fn rack_list(&self, filter: &RackFilter, page: Page) -> StoreResult<(Vec<Rack>, i64)> {
        self.inner.rack_list(filter, page).await
    }

    async fn rack_soft_delete(&self, id: Uuid) -> StoreResult<bool> {
        let result = self.inner.rack_soft_delete(id).await;
        self.changed();
        result
    }

    async fn rack_patch(&self, id: Uuid, patch: &RackPatch) -> StoreResult<Option<(Rack, Rack)>> {
        let result = self.inner.rack_patch(id, patch).await;
        self.changed();
        result
    }

    async fn rack_purge(&self, id: Uuid) -> StoreResult<PurgeOutcome> {
        let result = self.inner.rack_purge(id).await;
        self.changed();
        result
    }

    async fn racks_of_nvl_domains(&self, domain_ids: &[Uuid]) -> StoreResult<Vec<Rack>> {
        self.inner.racks_of_nvl_domains(domain_ids).await
    }

    async fn racks_set_nvl_domain(
        &self,
        rack_ids: &[Uuid],
        domain_id: Option<Uuid>,
    ) -> StoreResult<u64> {
        let result = self.inner.racks_set_nvl_domain(rack_ids, domain_id).await;
        self.changed();
        result
    }

    async fn nvl_domain_create(&self, domain: &NvlDomain) -> StoreResult<()> {
        let result = self.inner.nvl_domain_create(domain).await;
        self.changed();
        result
    }

    async fn nvl_domain_get(&self, id: Uuid) -> StoreResult<Option<NvlDomain>> {
        self.inner.nvl_domain_get(id).await
    }

    async fn nvl_domain_get_by_name(&self, name: &str) -> StoreResult<Option<NvlDomain>> {
        self.inner.nvl_domain_get_by_name(name).await
    }

    async fn nvl_domain_get_by_external_id(
        &self,
        external_id: &str,
    ) -> StoreResult<Option<NvlDomain>> {
        self.inner.nvl_domain_get_by_external_id(external_id).await
    }

    async fn nvl_domains_get_many(&self, ids: &[Uuid]) -> StoreResult<Vec<NvlDomain>> {
        self.inner.nvl_domains_get_many(ids).await
    }

    async fn nvl_domain_list(
        &self,
        query: &NvlDomainQuery,
        page: Page,
    ) -> StoreResult<(Vec<NvlDomain>, i64)> {
        self.inner.nvl_domain_list(query, page).await
    }

    async fn component_soft_delete(&self, id: Uuid) -> StoreResult<bool> {
        let result = self.inner.component_soft_delete(id).await;
        self.changed();
        result
    }

    async fn component_purge(&self, id: Uuid) -> StoreResult<PurgeOutcome> {
        let result = self.inner.component_purge(id).await;
        self.changed();
        result
    }

    async fn component_create(&self, component: &Component) -> StoreResult<()> {
        let result = self.inner.component_create(component).await;
        self.changed();
        result
    }

    async fn component_get(&self, id: Uuid) -> StoreResult<Option<Component>> {
        self.inner.component_get(id).await
    }

    async fn component_list(
        &self,
        filter: &ComponentFilterQuery,
        page: Page,
    ) -> StoreResult<(Vec<Component>, i64)> {
        self.inner.component_list(filter, page).await
    }

    async fn components_of_racks(&self, rack_ids: &[Uuid]) -> StoreResult<Vec<Component>> {
        self.inner.components_of_racks(rack_ids).await
    }

    async fn components_of_racks_without_bmcs(
        &self,
        rack_ids: &[Uuid],
    ) -> StoreResult<Vec<Component>> {
        self.inner.components_of_racks_without_bmcs(rack_ids).await
    }

    async fn component_keys_of_racks(
        &self,
        rack_ids: &[Uuid],
    ) -> StoreResult<Vec<(Uuid, ComponentType, Uuid)>> {
        self.inner.component_keys_of_racks(rack_ids).await
    }

    async fn components_by_bmc_mac(&self, mac: &str) -> StoreResult<Vec<Component>> {
        self.inner.components_by_bmc_mac(mac).await
    }

    async fn component_patch(
        &self,
        id: Uuid,
        patch: &ComponentPatch,
    ) -> StoreResult<Option<Component>> {
        let result = self.inner.component_patch(id, patch).await;
        self.changed();
        result
    }

    async fn components_observe(
        &self,
        observations: &[rackflow_domain::inventory::Observation],
    ) -> StoreResult<()> {
        let result = self.inner.components_observe(observations).await;
        self.changed();
        result
    }

    async fn components_in_states(
        &self,
        ids: &[Uuid],
        states: &[rackflow_domain::inventory::OperationalState],
    ) -> StoreResult<Vec<Uuid>> {
        self.inner.components_in_states(ids, states).await
    }

    async fn run_create(
        &self,
        run: &OperationRun,
        targets: &[OperationRunTarget],
    ) -> StoreResult<()> {
        let result = self.inner.run_create(run, targets).await;
        self.changed();
        result
    }

    async fn run_get(&self, id: Uuid) -> StoreResult<Option<OperationRun>> {
        self.inner.run_get(id).await
    }

    async fn run_list(
        &self,
        filter: &RunListFilter,
        page: Page,
    ) -> StoreResult<(Vec<OperationRun>, i64)> {
        self.inner.run_list(filter, page).await
    }

    async fn run_targets_list(
        &self,
        query: &TargetQuery,
    ) -> StoreResult<(Vec<OperationRunTarget>, i64)> {
        self.inner.run_targets_list(query).await
    }

    async fn run_target_update(&self, target: &OperationRunTarget) -> StoreResult<()> {
        let result = self.inner.run_target_update(target).await;
        self.changed();
        result
    }

    async fn run_ids_runnable(&self, limit: i64) -> StoreResult<Vec<Uuid>> {
        self.inner.run_ids_runnable(limit).await
    }

    async fn run_lock_apply(
        &self,
        run_id: Uuid,
        mode: LockMode,
        apply: &mut (dyn for<'l> FnMut(&'l mut RunLock) -> StoreResult<()> + Send),
    ) -> StoreResult<Option<()>> {
        let result = self.inner.run_lock_apply(run_id, mode, apply).await;
        self.changed();
        result
    }

    async fn run_current_targets(&self, run_id: Uuid) -> StoreResult<Vec<OperationRunTarget>> {
        self.inner.run_current_targets(run_id).await
    }

    async fn task_submit(
        &self,
        task: &Task,
        decide: &(dyn for<'t> Fn(&'t [Task]) -> SubmitDecision + Send + Sync),
    ) -> StoreResult<SubmitOutcome> {
        let result = self.inner.task_submit(task, decide).await;
        self.changed();
        result
    }

    async fn task_submit_for_target(
        &self,
        task: &Task,
        decide: &(dyn for<'t> Fn(&'t [Task]) -> SubmitDecision + Send + Sync),
        target: &OperationRunTarget,
    ) -> StoreResult<SubmitOutcome> {
        let result = self
            .inner
            .task_submit_for_target(task, decide, target)
            .await;
        self.changed();
        result
    }

    async fn task_promote(
        &self,
        rack_id: Uuid,
        decide: &(dyn for<'t> Fn(&'t [Task]) -> Vec<TaskTransition> + Send + Sync),
    ) -> StoreResult<Vec<Task>> {
        let result = self.inner.task_promote(rack_id, decide).await;
        self.changed();
        result
    }

    async fn racks_with_waiting_tasks(&self) -> StoreResult<Vec<Uuid>> {
        self.inner.racks_with_waiting_tasks().await
    }

    async fn status_counts(&self) -> StoreResult<rackflow_store::StatusCounts> {
        self.inner.status_counts().await
    }

    async fn task_update(&self, id: Uuid, update: &TaskUpdate) -> StoreResult<Option<Task>> {
        let result = self.inner.task_update(id, update).await;
        self.changed();
        result
    }

    async fn task_update_quiet(&self, id: Uuid, update: &TaskUpdate) -> StoreResult<bool> {
        let result = self.inner.task_update_quiet(id, update).await;
        self.changed();
        result
    }

    async fn task_updates_quiet(&self, updates: &[(Uuid, TaskUpdate)]) -> StoreResult<Vec<bool>> {
        let result = self.inner.task_updates_quiet(updates).await;
        self.changed();
        result
    }

    async fn task_get(&self, id: Uuid) -> StoreResult<Option<Task>> {
        self.inner.task_get(id).await
    }

    async fn tasks_get_many(&self, ids: &[Uuid]) -> StoreResult<Vec<Task>> {
        self.inner.tasks_get_many(ids).await
    }

    async fn task_states(&self, ids: &[Uuid]) -> StoreResult<Vec<(Uuid, TaskStatus, String)>> {
        self.inner.task_states(ids).await
    }

    async fn task_list(
        &self,
        filter: &TaskFilter,
        page: Page,
        with_report: bool,
    ) -> StoreResult<(Vec<Task>, i64)> {
        self.inner.task_list(filter, page, with_report).await
    }

    async fn tasks_with_status(&self, statuses: &[TaskStatus]) -> StoreResult<Vec<Task>> {
        self.inner.tasks_with_status(statuses).await
    }

    fn exclusive(&self) -> bool {
        self.inner.exclusive()
    }

    async fn task_leases_renew(
        &self,
        owner: &str,
        ids: &[Uuid],
        expires_at: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<Vec<Uuid>> {
        // A renewal changes nothing a reader sees.
        self.inner.task_leases_renew(owner, ids, expires_at).await
    }

    async fn task_adopt(
        &self,
        lease: &rackflow_store::TaskLease,
        now: chrono::DateTime<chrono::Utc>,
        any_lease: bool,
        limit: i64,
    ) -> StoreResult<Vec<Task>> {
        let result = self.inner.task_adopt(lease, now, any_lease, limit).await;
        self.changed();
        result
    }

    async fn task_cancel_announce(&self, id: Uuid) -> StoreResult<()> {
        self.inner.task_cancel_announce(id).await
    }

    async fn task_cancel_feed(&self) -> StoreResult<Option<Box<dyn rackflow_store::CancelFeed>>> {
        self.inner.task_cancel_feed().await
    }

    async fn rule_create(&self, rule: &OperationRule) -> StoreResult<()> {
        let result = self.inner.rule_create(rule).await;
        self.changed();
        result
    }

    async fn rule_update(
        &self,
        id: Uuid,
        name: Option<&str>,
        description: Option<&str>,
        definition: Option<&RuleDefinition>,
    ) -> StoreResult<Option<OperationRule>> {
        let result = self
            .inner
            .rule_update(id, name, description, definition)
            .await;
        self.changed();
        result
    }

    async fn rule_delete(&self, id: Uuid) -> StoreResult<bool> {
        let result = self.inner.rule_delete(id).await;
        self.changed();
        result
    }

    async fn rule_get(&self, id: Uuid) -> StoreResult<Option<OperationRule>> {
        self.inner.rule_get(id).await
    }

    async fn rule_list(
        &self,
        task_type: Option<TaskType>,
        is_default: Option<bool>,
        page: Page,
    ) -> StoreResult<(Vec<OperationRule>, i64)> {
        self.inner.rule_list(task_type, is_default, page).await
    }

    async fn rule_set_default(&self, id: Uuid) -> StoreResult<bool> {
        let result = self.inner.rule_set_default(id).await;
        self.changed();
        result
    }

    async fn rule_default_for(
        &self,
        task_type: TaskType,
        code: &str,
    ) -> StoreResult<Option<OperationRule>> {
        self.inner.rule_default_for(task_type, code).await
    }

    async fn rule_associate(&self, rack_id: Uuid, rule_id: Uuid) -> StoreResult<()> {
        let result = self.inner.rule_associate(rack_id, rule_id).await;
        self.changed();
        result
    }

    async fn rule_disassociate(
        &self,
        rack_id: Uuid,
        task_type: TaskType,
        code: &str,
    ) -> StoreResult<()> {
        let result = self.inner.rule_disassociate(rack_id, task_type, code).await;
        self.changed();
        result
    }

    async fn rule_associations_for_racks(
        &self,
        rack_ids: &[Uuid],
        task_type: TaskType,
        code: &str,
    ) -> StoreResult<Vec<RackRuleAssociation>> {
        self.inner
            .rule_associations_for_racks(rack_ids, task_type, code)
            .await
    }

    async fn rule_association_get(
        &self,
        rack_id: Uuid,
        task_type: TaskType,
        code: &str,
    ) -> StoreResult<Option<RackRuleAssociation>> {
        self.inner
            .rule_association_get(rack_id, task_type, code)
            .await
    }

    async fn rule_associations_list(&self, rack_id: Uuid) -> StoreResult<Vec<RackRuleAssociation>> {
        self.inner.rule_associations_list(rack_id).await
    }

    async fn leak_report(
        &self,
        report: &rackflow_domain::leak::LeakReport,
    ) -> StoreResult<rackflow_domain::leak::LeakReported> {
        let result = self.inner.leak_report(report).await;
        self.changed();
        result
    }

    async fn leak_event_handled(&self, id: Uuid) -> StoreResult<bool> {
        let result = self.inner.leak_event_handled(id).await;
        self.changed();
        result
    }

    async fn leak_events_unhandled(
        &self,
        before: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<Vec<rackflow_domain::leak::LeakEvent>> {
        self.inner.leak_events_unhandled(before).await
    }

    async fn leak_events_list(
        &self,
        filter: &rackflow_engine::store::LeakEventFilter,
        page: Page,
    ) -> StoreResult<(Vec<rackflow_domain::leak::LeakEvent>, i64)> {
        self.inner.leak_events_list(filter, page).await
    }

    async fn event_rule_create(
        &self,
        rule: &rackflow_domain::event_rule::EventRule,
    ) -> StoreResult<()> {
        let result = self.inner.event_rule_create(rule).await;
        self.changed();
        result
    }

    async fn event_rule_get(
        &self,
        id: Uuid,
    ) -> StoreResult<Option<rackflow_domain::event_rule::EventRule>> {
        self.inner.event_rule_get(id).await
    }

    async fn event_rule_list(
        &self,
        event_type: Option<&str>,
        enabled: Option<bool>,
    ) -> StoreResult<Vec<rackflow_domain::event_rule::EventRule>> {
        self.inner.event_rule_list(event_type, enabled).await
    }

    async fn event_rule_update(
        &self,
        id: Uuid,
        update: &rackflow_engine::store::EventRuleUpdate,
    ) -> StoreResult<Option<rackflow_domain::event_rule::EventRule>> {
        let result = self.inner.event_rule_update(id, update).await;
        self.changed();
        result
    }

    async fn event_rule_delete(
        &self,
        id: Uuid,
    ) -> StoreResult<rackflow_engine::store::EventRuleDeleted> {
        let result = self.inner.event_rule_delete(id).await;
        self.changed();
        result
    }

    async fn event_rule_bind(
        &self,
        binding: &rackflow_domain::event_rule::Binding,
    ) -> StoreResult<rackflow_engine::store::BindOutcome> {
        let result = self.inner.event_rule_bind(binding).await;
        self.changed();
        result
    }

    async fn event_rule_binding_get(
        &self,
        event_type: &str,
        scope: rackflow_domain::event_rule::Scope,
    ) -> StoreResult<Option<rackflow_domain::event_rule::Binding>> {
        self.inner.event_rule_binding_get(event_type, scope).await
    }

    async fn event_rule_unbind(
        &self,
        event_type: &str,
        scope: rackflow_domain::event_rule::Scope,
    ) -> StoreResult<bool> {
        let result = self.inner.event_rule_unbind(event_type, scope).await;
        self.changed();
        result
    }

    async fn event_rules_bound(
        &self,
        event_type: &str,
        rack: Uuid,
    ) -> StoreResult<(
        Option<rackflow_domain::event_rule::EventRule>,
        Option<rackflow_domain::event_rule::EventRule>,
    )> {
        self.inner.event_rules_bound(event_type, rack).await
    }

    async fn schedule_create(
        &self,
        schedule: &rackflow_domain::schedule::TaskSchedule,
        scopes: &[rackflow_domain::schedule::ScheduleScope],
    ) -> StoreResult<()> {
        let result = self.inner.schedule_create(schedule, scopes).await;
        self.changed();
        result
    }

    async fn schedule_get(
        &self,
        id: Uuid,
    ) -> StoreResult<Option<rackflow_domain::schedule::TaskSchedule>> {
        self.inner.schedule_get(id).await
    }

    async fn schedule_list(
        &self,
        filter: &ScheduleFilter,
        page: Page,
    ) -> StoreResult<(Vec<rackflow_domain::schedule::TaskSchedule>, i64)> {
        self.inner.schedule_list(filter, page).await
    }

    async fn schedule_delete(&self, id: Uuid) -> StoreResult<bool> {
        let result = self.inner.schedule_delete(id).await;
        self.changed();
        result
    }

    async fn schedule_scopes(
        &self,
        schedule_id: Uuid,
    ) -> StoreResult<Vec<rackflow_domain::schedule::ScheduleScope>> {
        self.inner.schedule_scopes(schedule_id).await
    }

    async fn schedule_scope_get(
        &self,
        scope_id: Uuid,
    ) -> StoreResult<Option<rackflow_domain::schedule::ScheduleScope>> {
        self.inner.schedule_scope_get(scope_id).await
    }

    async fn schedule_due_ids(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Uuid>> {
        self.inner.schedule_due_ids(now, limit).await
    }

    async fn schedule_next_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        self.inner.schedule_next_due().await
    }

    async fn schedule_scope_set_last_task(&self, scope_id: Uuid, task_id: Uuid) -> StoreResult<()> {
        let result = self
            .inner
            .schedule_scope_set_last_task(scope_id, task_id)
            .await;
        self.changed();
        result
    }

    async fn schedule_lock_apply(
        &self,
        id: Uuid,
        claim_due: Option<DateTime<Utc>>,
        apply: &mut (dyn for<'l> FnMut(&'l mut ScheduleLock) -> StoreResult<()> + Send),
    ) -> StoreResult<Option<ScheduleLock>> {
        let result = self.inner.schedule_lock_apply(id, claim_due, apply).await;
        self.changed();
        result
    }

    async fn audit_append(&self, events: &[rackflow_domain::audit::AuditEvent]) -> StoreResult<()> {
        let result = self.inner.audit_append(events).await;
        self.changed();
        result
    }

    async fn audit_list(
        &self,
        filter: &rackflow_store::AuditFilter,
        limit: i64,
    ) -> StoreResult<Vec<rackflow_domain::audit::AuditEvent>> {
        self.inner.audit_list(filter, limit).await
    }

    async fn audit_prune(&self, before: DateTime<Utc>) -> StoreResult<u64> {
        let result = self.inner.audit_prune(before).await;
        self.changed();
        result
    }

    async fn secrets_reseal(
        &self,
        reseal: &(dyn for<'s> Fn(&'s str) -> Result<Option<String>, String> + Send + Sync),
    ) -> StoreResult<rackflow_store::ResealOutcome> {
        let result = self.inner.secrets_reseal(reseal).await;
        self.changed();
        result
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::Changes;

    #[tokio::test]
    async fn a_write_between_the_read_and_the_wait_is_not_missed() {
        let changes = Changes::new();
        let mut waiter = changes.waiter("a write", Duration::from_secs(5));
        changes.bump();
        // Returns at once: the write came after the waiter was made.
        tokio::time::timeout(Duration::from_secs(1), waiter.next("-"))
            .await
            .expect("the earlier write wakes the waiter");
    }

    #[tokio::test]
    #[should_panic(expected = "timed out waiting for the answer; last seen: 41")]
    async fn the_deadline_names_what_was_awaited_and_the_last_state() {
        let changes = Changes::new();
        let mut waiter = changes.waiter("the answer", Duration::from_millis(20));
        waiter.next(41).await;
    }

    #[tokio::test]
    async fn a_window_ends_without_a_write_and_continues_after_one() {
        let changes = Changes::new();
        let mut waiter = changes.waiter("writes", Duration::from_secs(5));
        changes.bump();
        assert!(
            waiter
                .next_within(Instant::now() + Duration::from_secs(1))
                .await
        );
        assert!(
            !waiter
                .next_within(Instant::now() + Duration::from_millis(20))
                .await
        );
    }

    #[test]
    fn a_blocking_waiter_wakes_on_a_write_from_another_thread() {
        let changes = Changes::new();
        let mut waiter = changes.waiter("a write", Duration::from_secs(5));
        let writer = changes.clone();
        let started = Instant::now();
        let thread = std::thread::spawn(move || writer.bump());
        waiter.next_blocking("-");
        assert!(started.elapsed() < Duration::from_secs(5));
        thread.join().expect("writer");
    }
}
