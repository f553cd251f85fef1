//! The seam between the store logic, written once, and the two dialects.
//!
//! [`Backend`] is what a dialect provides: run a [`Sql`] statement on the
//! pool or in a transaction, and the few SQL fragments that differ. Every
//! type implementing it is a [`Store`] through the blanket impl below, whose
//! bodies live in `inventory.rs`, `runs.rs`, `tasks.rs` and `rules.rs`. The
//! sqlx plumbing that is the same for both pool types is stamped out by
//! [`sqlx_backend!`].

use async_trait::async_trait;
use rackflow_domain::event_rule::{Binding, EventRule, Scope};
use rackflow_domain::inventory::{Component, NvlDomain, Observation, OperationalState, Rack};
use rackflow_domain::rule::{OperationRule, RackRuleAssociation, RuleDefinition};
use rackflow_domain::run::{
    NameQuery, OperationRun, OperationRunTarget, Page, RunListFilter, TargetQuery,
};
use rackflow_domain::task::{Task, TaskStatus, TaskType};
use uuid::Uuid;

use crate::sql::{RowReader, Sql};
use crate::{
    AuditFilter, CancelFeed, ComponentFilterQuery, ComponentPatch, LockMode, NvlDomainQuery,
    PurgeOutcome, RackFilter, RackImport, RackPatch, RunLock, ScheduleFilter, ScheduleLock, Store,
    StoreResult, SubmitDecision, SubmitOutcome, TaskFilter, TaskLease, TaskTransition, TaskUpdate,
    audit, event_rules, inventory, leaks, rules, runs, schedules, secrets, tasks,
};

/// An open transaction; dropping it without [`Txn::commit`] rolls back
/// (when the connection is next used or returned to the pool; call
/// [`Txn::rollback`] to release locks at once).
#[async_trait]
pub(crate) trait Txn: Send {
    type Row: RowReader;

    /// Runs a write; returns the number of rows it affected.
    async fn execute(&mut self, sql: Sql) -> Result<u64, sqlx::Error>;

    /// Runs a query (or a write with `RETURNING`) inside the transaction.
    async fn fetch_all(&mut self, sql: Sql) -> Result<Vec<Self::Row>, sqlx::Error>;

    async fn commit(self) -> Result<(), sqlx::Error>;

    async fn rollback(self) -> Result<(), sqlx::Error>;
}

/// A database dialect the store logic runs on.
#[async_trait]
pub(crate) trait Backend: Send + Sync + 'static {
    /// `sqlite` or `postgres`.
    const DIALECT: &'static str;

    type Row: RowReader;
    type Tx: Txn<Row = Self::Row>;

    async fn fetch_all(&self, sql: Sql) -> Result<Vec<Self::Row>, sqlx::Error>;

    /// Begins a write transaction.
    async fn begin(&self) -> Result<Self::Tx, sqlx::Error>;

    /// A case-sensitive match of `column` against `like_pattern` (LIKE
    /// syntax: `%`, `_`, backslash escapes), binding the pattern into `sql`.
    fn like(sql: &mut Sql, column: &str, like_pattern: &str) -> String;

    /// The statement that takes a transaction-scoped exclusive lock on
    /// `key` (see [`crate::sql::lock_key`]), or `None` where
    /// [`Backend::begin`] already serialises all writers.
    fn xact_lock(key: i64) -> Option<Sql>;

    /// A condition on the `task` row: its `attributes.components_by_type`
    /// lists `component_id` under any type; binds into `sql`.
    fn task_has_component(sql: &mut Sql, component_id: Uuid) -> String;

    /// The row-lock clause appended to a `SELECT` inside a write
    /// transaction (` FOR UPDATE`, or ` FOR UPDATE SKIP LOCKED` when
    /// `skip_locked`), or `""` where [`Backend::begin`] already serialises
    /// all writers.
    fn for_update(skip_locked: bool) -> &'static str;

    /// An aggregate counting the rows that satisfy `condition` (a fixed SQL
    /// condition, never caller text); 0 over no rows.
    fn count_where(condition: &str) -> String;

    /// An aggregate joining the text `expression` of a group's rows with
    /// commas, in the order `order_by` (fixed SQL, never caller text).
    fn ordered_text_agg(expression: &str, order_by: &str) -> String;

    /// See [`Store::exclusive`].
    fn exclusive(&self) -> bool;

    /// See [`Store::task_cancel_announce`].
    async fn announce_cancel(&self, id: Uuid) -> StoreResult<()>;

    /// See [`Store::task_cancel_feed`].
    async fn cancel_feed(&self) -> StoreResult<Option<Box<dyn CancelFeed>>>;

    /// Brings the planner's statistics of `tables` up to date where a bulk
    /// write changed them a lot (a fleet import, a large run's targets).
    async fn refresh_statistics(&self, tables: &[&'static str]) -> StoreResult<()>;
}

/// Takes the transaction-scoped lock on `key` inside `tx` (a no-op where
/// the write transaction serialises already).
pub(crate) async fn xact_lock<B: Backend>(tx: &mut B::Tx, key: i64) -> Result<(), sqlx::Error> {
    if let Some(sql) = B::xact_lock(key) {
        tx.fetch_all(sql).await?;
    }
    Ok(())
}

/// Runs a `SELECT COUNT(*) AS n …` statement.
pub(crate) async fn fetch_count<B: Backend>(backend: &B, sql: Sql) -> StoreResult<i64> {
    let rows = backend.fetch_all(sql).await?;
    match rows.first() {
        Some(row) => row.i64("n"),
        None => Ok(0),
    }
}

/// Implements [`Backend`] for a store type holding `pool: sqlx::Pool<$db>`,
/// plus the transaction type `$tx` for it. `$prepare` rewrites a statement
/// for the dialect (its placeholders), `$bind` binds a `Vec<Arg>` to a
/// query in the dialect's encoding, `$begin` is the statement that opens a
/// write transaction, `$like` builds a case-sensitive match.
macro_rules! sqlx_backend {
    (
        store: $store:ty,
        db: $db:ty,
        row: $row:ty,
        tx: $tx:ident,
        dialect: $dialect:literal,
        prepare: $prepare:path,
        bind: $bind:path,
        begin: $begin:literal,
        like: $like:path,
        xact_lock: $xact_lock:path,
        task_has_component: $task_has_component:path,
        for_update: $for_update:path,
        count_where: $count_where:path,
        ordered_text_agg: $ordered_text_agg:path,
        write_gate: $write_gate:path,
        exclusive: $exclusive:path,
        announce_cancel: $announce_cancel:path,
        cancel_feed: $cancel_feed:path,
        refresh_statistics: $refresh_statistics:path $(,)?
    ) => {
        /// An open transaction of this dialect, holding the in-process
        /// write gate where the dialect has one (see [`$write_gate`]).
        pub(crate) struct $tx {
            tx: sqlx::Transaction<'static, $db>,
            // Declared after `tx`: released only once the transaction is.
            _gate: Option<tokio::sync::OwnedMutexGuard<()>>,
        }

        #[async_trait::async_trait]
        impl $crate::backend::Txn for $tx {
            type Row = $row;

            async fn execute(&mut self, sql: $crate::sql::Sql) -> Result<u64, sqlx::Error> {
                let $crate::sql::Sql { text, args } = $prepare(sql);
                Ok($bind(sqlx::query(&text), args)
                    .execute(&mut *self.tx)
                    .await?
                    .rows_affected())
            }

            async fn fetch_all(&mut self, sql: $crate::sql::Sql) -> Result<Vec<$row>, sqlx::Error> {
                let $crate::sql::Sql { text, args } = $prepare(sql);
                $bind(sqlx::query(&text), args)
                    .fetch_all(&mut *self.tx)
                    .await
            }

            async fn commit(self) -> Result<(), sqlx::Error> {
                self.tx.commit().await
            }

            async fn rollback(self) -> Result<(), sqlx::Error> {
                self.tx.rollback().await
            }
        }

        #[async_trait::async_trait]
        impl $crate::backend::Backend for $store {
            const DIALECT: &'static str = $dialect;

            type Row = $row;
            type Tx = $tx;

            async fn fetch_all(&self, sql: $crate::sql::Sql) -> Result<Vec<$row>, sqlx::Error> {
                let $crate::sql::Sql { text, args } = $prepare(sql);
                let _gate = match $write_gate(self) {
                    Some(gate) if $crate::sql::is_write(&text) => Some(gate.lock().await),
                    _ => None,
                };
                $bind(sqlx::query(&text), args).fetch_all(&self.pool).await
            }

            async fn begin(&self) -> Result<$tx, sqlx::Error> {
                let gate = match $write_gate(self) {
                    Some(gate) => Some(std::sync::Arc::clone(gate).lock_owned().await),
                    None => None,
                };
                Ok($tx {
                    tx: self.pool.begin_with($begin).await?,
                    _gate: gate,
                })
            }

            fn like(sql: &mut $crate::sql::Sql, column: &str, like_pattern: &str) -> String {
                $like(sql, column, like_pattern)
            }

            fn xact_lock(key: i64) -> Option<$crate::sql::Sql> {
                $xact_lock(key)
            }

            fn task_has_component(sql: &mut $crate::sql::Sql, component_id: uuid::Uuid) -> String {
                $task_has_component(sql, component_id)
            }

            fn for_update(skip_locked: bool) -> &'static str {
                $for_update(skip_locked)
            }

            fn count_where(condition: &str) -> String {
                $count_where(condition)
            }

            fn ordered_text_agg(expression: &str, order_by: &str) -> String {
                $ordered_text_agg(expression, order_by)
            }

            fn exclusive(&self) -> bool {
                $exclusive(self)
            }

            async fn announce_cancel(&self, id: uuid::Uuid) -> $crate::StoreResult<()> {
                $announce_cancel(self, id).await
            }

            async fn cancel_feed(
                &self,
            ) -> $crate::StoreResult<Option<Box<dyn $crate::CancelFeed>>> {
                $cancel_feed(self).await
            }

            async fn refresh_statistics(&self, tables: &[&'static str]) -> $crate::StoreResult<()> {
                $refresh_statistics(self, tables).await
            }
        }
    };
}

pub(crate) use sqlx_backend;

/// The condition of a `StringQueryInfo` on `column` (operation-runs §4.6,
/// with decision D6: several wildcard patterns with `use_or` mean "any
/// pattern matches", so the OR group is parenthesised): none without a
/// pattern; one pattern is equality, or LIKE when wildcard; several are IN,
/// or LIKEs joined by AND (OR with `use_or`). Patterns are deduplicated,
/// and many LIKEs join as a balanced tree ([`crate::sql::balanced_join`]:
/// SQLite refuses an expression deeper than 1,000). `column` is a constant
/// of the caller, never request text.
pub(crate) fn text_condition<B: Backend>(
    sql: &mut Sql,
    column: &str,
    query: &NameQuery,
) -> Option<String> {
    let patterns: Vec<&str> = query
        .patterns
        .iter()
        .map(String::as_str)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    match patterns.as_slice() {
        [] => None,
        [one] if query.is_wildcard => Some(B::like(sql, column, &NameQuery::like_pattern(one))),
        [one] => Some(format!("{column} = {}", sql.bind(*one))),
        many if !query.is_wildcard => Some(format!(
            "{column} IN {}",
            sql.bind_list(many.iter().copied())
        )),
        many => {
            let likes: Vec<String> = many
                .iter()
                .map(|p| B::like(sql, column, &NameQuery::like_pattern(p)))
                .collect();
            let joiner = if query.use_or { "OR" } else { "AND" };
            Some(crate::sql::balanced_join(&likes, joiner))
        }
    }
}

#[async_trait]
impl<B: Backend> Store for B {
    fn dialect(&self) -> &'static str {
        B::DIALECT
    }

    async fn rack_create(&self, rack: &Rack, components: &[Component]) -> StoreResult<()> {
        inventory::rack_create(self, rack, components).await
    }

    async fn racks_import(&self, racks: &[(Rack, Vec<Component>)]) -> StoreResult<Vec<RackImport>> {
        inventory::racks_import(self, racks).await
    }

    async fn rack_get(&self, id: Uuid, include_deleted: bool) -> StoreResult<Option<Rack>> {
        inventory::rack_get(self, id, include_deleted).await
    }

    async fn rack_get_by_name(&self, name: &str) -> StoreResult<Vec<Rack>> {
        inventory::rack_get_by_name(self, name).await
    }

    async fn rack_get_by_external_id(&self, external_id: &str) -> StoreResult<Option<Rack>> {
        inventory::rack_get_by_external_id(self, external_id).await
    }

    async fn rack_get_by_serial(
        &self,
        manufacturer: &str,
        serial_number: &str,
    ) -> StoreResult<Option<Rack>> {
        inventory::rack_get_by_serial(self, manufacturer, serial_number).await
    }

    async fn component_get_by_serial(
        &self,
        manufacturer: &str,
        serial_number: &str,
    ) -> StoreResult<Option<Component>> {
        inventory::component_get_by_serial(self, manufacturer, serial_number).await
    }

    async fn racks_get_many(&self, ids: &[Uuid]) -> StoreResult<Vec<Rack>> {
        inventory::racks_get_many(self, ids).await
    }

    async fn rack_list(&self, filter: &RackFilter, page: Page) -> StoreResult<(Vec<Rack>, i64)> {
        inventory::rack_list(self, filter, page).await
    }

    async fn rack_soft_delete(&self, id: Uuid) -> StoreResult<bool> {
        inventory::rack_soft_delete(self, id).await
    }

    async fn rack_patch(&self, id: Uuid, patch: &RackPatch) -> StoreResult<Option<(Rack, Rack)>> {
        inventory::rack_patch(self, id, patch).await
    }

    async fn rack_purge(&self, id: Uuid) -> StoreResult<PurgeOutcome> {
        inventory::rack_purge(self, id).await
    }

    async fn racks_of_nvl_domains(&self, domain_ids: &[Uuid]) -> StoreResult<Vec<Rack>> {
        inventory::racks_of_nvl_domains(self, domain_ids).await
    }

    async fn racks_set_nvl_domain(
        &self,
        rack_ids: &[Uuid],
        domain_id: Option<Uuid>,
    ) -> StoreResult<u64> {
        inventory::racks_set_nvl_domain(self, rack_ids, domain_id).await
    }

    async fn nvl_domain_create(&self, domain: &NvlDomain) -> StoreResult<()> {
        inventory::nvl_domain_create(self, domain).await
    }

    async fn nvl_domain_get(&self, id: Uuid) -> StoreResult<Option<NvlDomain>> {
        inventory::nvl_domain_get(self, "id", id).await
    }

    async fn nvl_domain_get_by_name(&self, name: &str) -> StoreResult<Option<NvlDomain>> {
        inventory::nvl_domain_get(self, "name", name).await
    }

    async fn nvl_domain_get_by_external_id(
        &self,
        external_id: &str,
    ) -> StoreResult<Option<NvlDomain>> {
        inventory::nvl_domain_get(self, "external_id", external_id).await
    }

    async fn nvl_domains_get_many(&self, ids: &[Uuid]) -> StoreResult<Vec<NvlDomain>> {
        inventory::nvl_domains_get_many(self, ids).await
    }

    async fn nvl_domain_list(
        &self,
        query: &NvlDomainQuery,
        page: Page,
    ) -> StoreResult<(Vec<NvlDomain>, i64)> {
        inventory::nvl_domain_list(self, query, page).await
    }

    async fn component_soft_delete(&self, id: Uuid) -> StoreResult<bool> {
        inventory::component_soft_delete(self, id).await
    }

    async fn component_purge(&self, id: Uuid) -> StoreResult<PurgeOutcome> {
        inventory::component_purge(self, id).await
    }

    async fn component_create(&self, component: &Component) -> StoreResult<()> {
        inventory::component_create(self, component).await
    }

    async fn component_get(&self, id: Uuid) -> StoreResult<Option<Component>> {
        inventory::component_get(self, id).await
    }

    async fn component_list(
        &self,
        filter: &ComponentFilterQuery,
        page: Page,
    ) -> StoreResult<(Vec<Component>, i64)> {
        inventory::component_list(self, filter, page).await
    }

    async fn components_of_racks(&self, rack_ids: &[Uuid]) -> StoreResult<Vec<Component>> {
        inventory::components_of_racks(self, rack_ids, true).await
    }

    async fn components_of_racks_without_bmcs(
        &self,
        rack_ids: &[Uuid],
    ) -> StoreResult<Vec<Component>> {
        inventory::components_of_racks(self, rack_ids, false).await
    }

    async fn component_keys_of_racks(
        &self,
        rack_ids: &[Uuid],
    ) -> StoreResult<Vec<(Uuid, rackflow_domain::ComponentType, Uuid)>> {
        inventory::component_keys_of_racks(self, rack_ids).await
    }

    async fn components_by_bmc_mac(&self, mac: &str) -> StoreResult<Vec<Component>> {
        inventory::components_by_bmc_mac(self, mac).await
    }

    async fn component_patch(
        &self,
        id: Uuid,
        patch: &ComponentPatch,
    ) -> StoreResult<Option<Component>> {
        inventory::component_patch(self, id, patch).await
    }

    async fn components_observe(&self, observations: &[Observation]) -> StoreResult<()> {
        inventory::components_observe(self, observations).await
    }

    async fn components_in_states(
        &self,
        ids: &[Uuid],
        states: &[OperationalState],
    ) -> StoreResult<Vec<Uuid>> {
        inventory::components_in_states(self, ids, states).await
    }

    async fn run_create(
        &self,
        run: &OperationRun,
        targets: &[OperationRunTarget],
    ) -> StoreResult<()> {
        runs::run_create(self, run, targets).await
    }

    async fn run_get(&self, id: Uuid) -> StoreResult<Option<OperationRun>> {
        runs::run_get(self, id).await
    }

    async fn run_list(
        &self,
        filter: &RunListFilter,
        page: Page,
    ) -> StoreResult<(Vec<OperationRun>, i64)> {
        runs::run_list(self, filter, page).await
    }

    async fn run_targets_list(
        &self,
        query: &TargetQuery,
    ) -> StoreResult<(Vec<OperationRunTarget>, i64)> {
        runs::run_targets_list(self, query).await
    }

    async fn run_target_update(&self, target: &OperationRunTarget) -> StoreResult<()> {
        runs::run_target_update(self, target).await
    }

    async fn run_ids_runnable(&self, limit: i64) -> StoreResult<Vec<Uuid>> {
        runs::run_ids_runnable(self, limit).await
    }

    async fn run_lock_apply(
        &self,
        run_id: Uuid,
        mode: LockMode,
        apply: &mut (dyn for<'l> FnMut(&'l mut RunLock) -> StoreResult<()> + Send),
    ) -> StoreResult<Option<()>> {
        runs::run_lock_apply(self, run_id, mode, apply).await
    }

    async fn run_current_targets(&self, run_id: Uuid) -> StoreResult<Vec<OperationRunTarget>> {
        runs::run_current_targets(self, run_id).await
    }

    async fn task_submit(
        &self,
        task: &Task,
        decide: &(dyn for<'t> Fn(&'t [Task]) -> SubmitDecision + Send + Sync),
    ) -> StoreResult<SubmitOutcome> {
        tasks::task_submit(self, task, decide, None).await
    }

    async fn task_submit_for_target(
        &self,
        task: &Task,
        decide: &(dyn for<'t> Fn(&'t [Task]) -> SubmitDecision + Send + Sync),
        target: &OperationRunTarget,
    ) -> StoreResult<SubmitOutcome> {
        tasks::task_submit(self, task, decide, Some(target)).await
    }

    async fn task_promote(
        &self,
        rack_id: Uuid,
        decide: &(dyn for<'t> Fn(&'t [Task]) -> Vec<TaskTransition> + Send + Sync),
    ) -> StoreResult<Vec<Task>> {
        tasks::task_promote(self, rack_id, decide).await
    }

    async fn racks_with_waiting_tasks(&self) -> StoreResult<Vec<Uuid>> {
        tasks::racks_with_waiting_tasks(self).await
    }

    async fn status_counts(&self) -> StoreResult<crate::StatusCounts> {
        crate::stats::status_counts(self).await
    }

    async fn task_update(&self, id: Uuid, update: &TaskUpdate) -> StoreResult<Option<Task>> {
        tasks::task_update(self, id, update).await
    }

    async fn task_update_quiet(&self, id: Uuid, update: &TaskUpdate) -> StoreResult<bool> {
        tasks::task_update_quiet(self, id, update).await
    }

    async fn task_updates_quiet(&self, updates: &[(Uuid, TaskUpdate)]) -> StoreResult<Vec<bool>> {
        tasks::task_updates_quiet(self, updates).await
    }

    async fn task_get(&self, id: Uuid) -> StoreResult<Option<Task>> {
        tasks::task_get(self, id).await
    }

    async fn tasks_get_many(&self, ids: &[Uuid]) -> StoreResult<Vec<Task>> {
        tasks::tasks_get_many(self, ids).await
    }

    async fn task_states(
        &self,
        ids: &[Uuid],
    ) -> StoreResult<Vec<(Uuid, rackflow_domain::task::TaskStatus, String)>> {
        tasks::task_states(self, ids).await
    }

    async fn task_list(
        &self,
        filter: &TaskFilter,
        page: Page,
        with_report: bool,
    ) -> StoreResult<(Vec<Task>, i64)> {
        tasks::task_list(self, filter, page, with_report).await
    }

    async fn tasks_with_status(&self, statuses: &[TaskStatus]) -> StoreResult<Vec<Task>> {
        tasks::tasks_with_status(self, statuses).await
    }

    fn exclusive(&self) -> bool {
        Backend::exclusive(self)
    }

    async fn task_leases_renew(
        &self,
        owner: &str,
        ids: &[Uuid],
        expires_at: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<Vec<Uuid>> {
        tasks::task_leases_renew(self, owner, ids, expires_at).await
    }

    async fn task_adopt(
        &self,
        lease: &TaskLease,
        now: chrono::DateTime<chrono::Utc>,
        any_lease: bool,
        limit: i64,
    ) -> StoreResult<Vec<Task>> {
        tasks::task_adopt(self, lease, now, any_lease, limit).await
    }

    async fn task_cancel_announce(&self, id: Uuid) -> StoreResult<()> {
        Backend::announce_cancel(self, id).await
    }

    async fn task_cancel_feed(&self) -> StoreResult<Option<Box<dyn CancelFeed>>> {
        Backend::cancel_feed(self).await
    }

    async fn rule_create(&self, rule: &OperationRule) -> StoreResult<()> {
        rules::rule_create(self, rule).await
    }

    async fn rule_update(
        &self,
        id: Uuid,
        name: Option<&str>,
        description: Option<&str>,
        definition: Option<&RuleDefinition>,
    ) -> StoreResult<Option<OperationRule>> {
        rules::rule_update(self, id, name, description, definition).await
    }

    async fn rule_delete(&self, id: Uuid) -> StoreResult<bool> {
        rules::rule_delete(self, id).await
    }

    async fn rule_get(&self, id: Uuid) -> StoreResult<Option<OperationRule>> {
        rules::rule_get(self, id).await
    }

    async fn rule_list(
        &self,
        task_type: Option<TaskType>,
        is_default: Option<bool>,
        page: Page,
    ) -> StoreResult<(Vec<OperationRule>, i64)> {
        rules::rule_list(self, task_type, is_default, page).await
    }

    async fn rule_set_default(&self, id: Uuid) -> StoreResult<bool> {
        rules::rule_set_default(self, id).await
    }

    async fn rule_default_for(
        &self,
        task_type: TaskType,
        code: &str,
    ) -> StoreResult<Option<OperationRule>> {
        rules::rule_default_for(self, task_type, code).await
    }

    async fn rule_associate(&self, rack_id: Uuid, rule_id: Uuid) -> StoreResult<()> {
        rules::rule_associate(self, rack_id, rule_id).await
    }

    async fn rule_disassociate(
        &self,
        rack_id: Uuid,
        task_type: TaskType,
        code: &str,
    ) -> StoreResult<()> {
        rules::rule_disassociate(self, rack_id, task_type, code).await
    }

    async fn rule_associations_for_racks(
        &self,
        rack_ids: &[Uuid],
        task_type: TaskType,
        code: &str,
    ) -> StoreResult<Vec<RackRuleAssociation>> {
        rules::rule_associations_for_racks(self, rack_ids, task_type, code).await
    }

    async fn rule_association_get(
        &self,
        rack_id: Uuid,
        task_type: TaskType,
        code: &str,
    ) -> StoreResult<Option<RackRuleAssociation>> {
        rules::rule_association_get(self, rack_id, task_type, code).await
    }

    async fn rule_associations_list(&self, rack_id: Uuid) -> StoreResult<Vec<RackRuleAssociation>> {
        rules::rule_associations_list(self, rack_id).await
    }

    async fn leak_report(
        &self,
        report: &rackflow_domain::leak::LeakReport,
    ) -> StoreResult<rackflow_domain::leak::LeakReported> {
        leaks::leak_report(self, report).await
    }

    async fn leak_event_handled(&self, id: Uuid) -> StoreResult<bool> {
        leaks::leak_event_handled(self, id).await
    }

    async fn leak_events_unhandled(
        &self,
        before: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<Vec<rackflow_domain::leak::LeakEvent>> {
        leaks::leak_events_unhandled(self, before).await
    }

    async fn leak_events_list(
        &self,
        filter: &crate::LeakEventFilter,
        page: Page,
    ) -> StoreResult<(Vec<rackflow_domain::leak::LeakEvent>, i64)> {
        leaks::leak_events_list(self, filter, page).await
    }

    async fn event_rule_create(&self, rule: &EventRule) -> StoreResult<()> {
        event_rules::event_rule_create(self, rule).await
    }

    async fn event_rule_get(&self, id: Uuid) -> StoreResult<Option<EventRule>> {
        event_rules::event_rule_get(self, id).await
    }

    async fn event_rule_list(
        &self,
        event_type: Option<&str>,
        enabled: Option<bool>,
    ) -> StoreResult<Vec<EventRule>> {
        event_rules::event_rule_list(self, event_type, enabled).await
    }

    async fn event_rule_update(
        &self,
        id: Uuid,
        update: &crate::EventRuleUpdate,
    ) -> StoreResult<Option<EventRule>> {
        event_rules::event_rule_update(self, id, update).await
    }

    async fn event_rule_delete(&self, id: Uuid) -> StoreResult<crate::EventRuleDeleted> {
        event_rules::event_rule_delete(self, id).await
    }

    async fn event_rule_bind(&self, binding: &Binding) -> StoreResult<crate::BindOutcome> {
        event_rules::event_rule_bind(self, binding).await
    }

    async fn event_rule_binding_get(
        &self,
        event_type: &str,
        scope: Scope,
    ) -> StoreResult<Option<Binding>> {
        event_rules::event_rule_binding_get(self, event_type, scope).await
    }

    async fn event_rule_unbind(&self, event_type: &str, scope: Scope) -> StoreResult<bool> {
        event_rules::event_rule_unbind(self, event_type, scope).await
    }

    async fn event_rules_bound(
        &self,
        event_type: &str,
        rack: Uuid,
    ) -> StoreResult<(Option<EventRule>, Option<EventRule>)> {
        event_rules::event_rules_bound(self, event_type, rack).await
    }

    async fn schedule_create(
        &self,
        schedule: &rackflow_domain::schedule::TaskSchedule,
        scopes: &[rackflow_domain::schedule::ScheduleScope],
    ) -> StoreResult<()> {
        schedules::schedule_create(self, schedule, scopes).await
    }

    async fn schedule_get(
        &self,
        id: Uuid,
    ) -> StoreResult<Option<rackflow_domain::schedule::TaskSchedule>> {
        schedules::schedule_get(self, id).await
    }

    async fn schedule_list(
        &self,
        filter: &ScheduleFilter,
        page: Page,
    ) -> StoreResult<(Vec<rackflow_domain::schedule::TaskSchedule>, i64)> {
        schedules::schedule_list(self, filter, page).await
    }

    async fn schedule_delete(&self, id: Uuid) -> StoreResult<bool> {
        schedules::schedule_delete(self, id).await
    }

    async fn schedule_scopes(
        &self,
        schedule_id: Uuid,
    ) -> StoreResult<Vec<rackflow_domain::schedule::ScheduleScope>> {
        schedules::schedule_scopes(self, schedule_id).await
    }

    async fn schedule_scope_get(
        &self,
        scope_id: Uuid,
    ) -> StoreResult<Option<rackflow_domain::schedule::ScheduleScope>> {
        schedules::schedule_scope_get(self, scope_id).await
    }

    async fn schedule_due_ids(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        limit: i64,
    ) -> StoreResult<Vec<Uuid>> {
        schedules::schedule_due_ids(self, now, limit).await
    }

    async fn schedule_next_due(&self) -> StoreResult<Option<chrono::DateTime<chrono::Utc>>> {
        schedules::schedule_next_due(self).await
    }

    async fn schedule_scope_set_last_task(&self, scope_id: Uuid, task_id: Uuid) -> StoreResult<()> {
        schedules::schedule_scope_set_last_task(self, scope_id, task_id).await
    }

    async fn schedule_lock_apply(
        &self,
        id: Uuid,
        claim_due: Option<chrono::DateTime<chrono::Utc>>,
        apply: &mut (dyn for<'l> FnMut(&'l mut ScheduleLock) -> StoreResult<()> + Send),
    ) -> StoreResult<Option<ScheduleLock>> {
        schedules::schedule_lock_apply(self, id, claim_due, apply).await
    }

    async fn audit_append(&self, events: &[rackflow_domain::audit::AuditEvent]) -> StoreResult<()> {
        audit::audit_append(self, events).await
    }

    async fn audit_list(
        &self,
        filter: &AuditFilter,
        limit: i64,
    ) -> StoreResult<Vec<rackflow_domain::audit::AuditEvent>> {
        audit::audit_list(self, filter, limit).await
    }

    async fn audit_prune(&self, before: chrono::DateTime<chrono::Utc>) -> StoreResult<u64> {
        audit::audit_prune(self, before).await
    }

    async fn secrets_reseal(
        &self,
        reseal: &(dyn for<'s> Fn(&'s str) -> Result<Option<String>, String> + Send + Sync),
    ) -> StoreResult<crate::ResealOutcome> {
        secrets::secrets_reseal(self, reseal).await
    }
}
