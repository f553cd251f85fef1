//! rackflow's persistence layer.
//!
//! One interface ([`Store`]) with two implementations: SQLite (the embedded
//! default, WAL mode) and PostgreSQL (several replicas). Each dialect has its
//! own migrations, applied at start. The store makes no decisions: it reads
//! and writes what the engine tells it, atomically where the engine needs it
//! (a run and all its targets are one transaction).
//!
//! Layout: `sql` (statements, arguments, row reading, constraint errors) and
//! `backend` (the dialect seam and the one generic [`Store`] impl) are shared;
//! `inventory`, `runs`, `tasks` and `rules` hold the store logic, written
//! once; `sqlite` and `postgres` hold only what differs (connecting, value
//! encodings, LIKE, the per-rack lock, JSON search).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rackflow_domain::ComponentType;
use rackflow_domain::audit::AuditEvent;
use rackflow_domain::dispatch::LockedRun;
use rackflow_domain::inventory::{Component, NvlDomain, Observation, Rack};
use rackflow_domain::rule::{OperationRule, RackRuleAssociation, RuleDefinition};
use rackflow_domain::run::{OperationRun, OperationRunTarget, Page, RunListFilter, TargetQuery};
use rackflow_domain::task::{Task, TaskStatus, TaskType};
use uuid::Uuid;

mod audit;
mod backend;
mod error;
mod event_rules;
mod inventory;
mod leaks;
mod postgres;
mod rules;
mod runs;
mod schedules;
mod secrets;
mod sql;
mod sqlite;
mod stats;
mod tasks;

pub use error::StoreError;
pub use event_rules::{BindOutcome, EventRuleDeleted, EventRuleUpdate};
pub use leaks::LeakEventFilter;
pub use postgres::PgStore;
pub use sqlite::SqliteStore;
pub use stats::StatusCounts;

/// Result of store operations.
pub type StoreResult<T> = Result<T, StoreError>;

/// A text column of the inventory a listing filters or orders on (the
/// reference's `RackFilterField` / `ComponentFilterField` /
/// `*OrderByField`; a component's type is filtered through
/// [`ComponentFilterQuery::types`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InventoryColumn {
    Name,
    Manufacturer,
    Model,
    /// Components only: the type's storage name.
    Type,
}

impl InventoryColumn {
    pub(crate) fn column(self) -> &'static str {
        match self {
            InventoryColumn::Name => "name",
            InventoryColumn::Manufacturer => "manufacturer",
            InventoryColumn::Model => "model",
            InventoryColumn::Type => "type",
        }
    }
}

/// One listing filter: `column` matched by `query` (exact values, or LIKE
/// patterns when wildcard). Several filters AND.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextFilter {
    pub column: InventoryColumn,
    pub query: rackflow_domain::run::NameQuery,
}

/// A listing's order: `column`, then id, ascending unless `descending`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListOrder {
    pub column: InventoryColumn,
    pub descending: bool,
}

/// Filter of rack listings. Empty fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RackFilter {
    /// Exact names (OR'ed).
    pub names: Vec<String>,
    pub manufacturers: Vec<String>,
    pub models: Vec<String>,
    /// The wire's `filters` (AND'ed with each other and the above).
    pub text: Vec<TextFilter>,
    /// Only racks that have an external id.
    pub with_external_id_only: bool,
    /// Only racks of this NVLink domain.
    pub nvl_domain_id: Option<Uuid>,
    /// Only racks in one of these lifecycle statuses (empty: any).
    pub lifecycle: Vec<rackflow_domain::inventory::LifecycleStatus>,
    /// Include soft-deleted racks.
    pub include_deleted: bool,
    /// `None`: name, then id, ascending.
    pub order: Option<ListOrder>,
}

/// Filter and order of NVLink domain listings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvlDomainQuery {
    /// Patterns on the name (no pattern: all); with `external_only`, a
    /// domain matches when its name or its external id does.
    pub name: rackflow_domain::run::NameQuery,
    /// Only domains that have an external id (the reference's
    /// `NVLinkDomain` view: a domain is known by its rack group id).
    pub external_only: bool,
    /// Name descending (then id descending) instead of ascending.
    pub descending: bool,
}

/// Filter of component listings. Empty fields do not filter; set fields AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ComponentFilterQuery {
    pub rack_ids: Vec<Uuid>,
    pub ids: Vec<Uuid>,
    pub types: Vec<ComponentType>,
    pub external_ids: Vec<String>,
    pub names: Vec<String>,
    /// The wire's `filters` on name, manufacturer and model.
    pub text: Vec<TextFilter>,
    /// Only components whose leak status is one of these; `None` stands for
    /// no report yet (the wire's UNKNOWN). Empty: any.
    pub leak_statuses: Vec<Option<rackflow_domain::inventory::LeakStatus>>,
    pub include_deleted: bool,
    /// `None`: rack, type, slot, tray, name, id.
    pub order: Option<ListOrder>,
}

/// Fields `PatchRack` may change; `None` leaves the field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RackPatch {
    pub name: Option<String>,
    /// An empty text clears it.
    pub description: Option<String>,
    pub location: Option<rackflow_domain::inventory::Location>,
}

/// What [`Store::rack_purge`] / [`Store::component_purge`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PurgeOutcome {
    /// Deleted for good.
    Purged,
    /// No such row.
    NotFound,
    /// The row is not soft-deleted: purge only follows a delete.
    NotDeleted,
    /// A soft-deleted rack still has `n` unfinished tasks.
    Busy(usize),
}

/// Fields `PatchComponent` may change; `None` leaves the field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ComponentPatch {
    pub firmware_version: Option<String>,
    pub slot_id: Option<i32>,
    pub tray_idx: Option<i32>,
    pub host_id: Option<i32>,
    pub description: Option<String>,
    /// `Some(None)` unassigns the component from its rack.
    pub rack_id: Option<Option<Uuid>>,
    /// BMCs matched by MAC: existing rows are updated, new ones added.
    pub bmcs: Vec<rackflow_domain::inventory::Bmc>,
    /// `Some(None)` clears the operational state (ready again).
    pub operational: Option<Option<rackflow_domain::inventory::OperationalStatus>>,
}

/// What the submitter decided after seeing the rack's unfinished tasks
/// (the `decide` callback of [`Store::task_submit`]).
#[derive(Debug, Clone, PartialEq)]
pub enum SubmitDecision {
    /// Insert the task with this status, message and queue deadline; with
    /// `start`, as already started (see [`TaskStart`]).
    Insert {
        status: TaskStatus,
        message: String,
        queue_expires_at: Option<DateTime<Utc>>,
        start: Option<TaskStart>,
    },
    /// Write nothing; the reason comes back in [`SubmitOutcome::Rejected`].
    Reject(SubmitReject),
}

/// Why a submitter rejected a task after seeing the rack's unfinished ones.
/// Typed across the seam so that the engine maps it to its error without
/// parsing text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitReject {
    /// The task conflicts with an unfinished one and may not queue.
    RackConflict,
    /// The rack's waiting queue holds `waiting` tasks already.
    QueueFull { waiting: usize },
}

/// The columns of a task inserted straight into `running` because its
/// submitter starts it at once: the rule frozen onto it and the execution it
/// runs as (`started_at` is stamped too). One write instead of an insert as
/// `pending` followed by an update to `running`.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskStart {
    pub applied_rule_id: Option<Uuid>,
    pub rule_definition: RuleDefinition,
    pub executor_type: String,
    pub execution_id: String,
    /// The executing replica's claim on the task; none for a task run by a
    /// durable executor (Temporal), which owns its execution itself.
    pub lease: Option<TaskLease>,
}

/// A replica's claim on a running task: who executes it, and until when the
/// claim holds unless the owner renews it. Another replica adopts the task
/// only once `expires_at` has passed (clustered execution, issue 11).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskLease {
    pub owner: String,
    pub expires_at: DateTime<Utc>,
}

/// Cancels announced by other processes sharing the database (PostgreSQL
/// `LISTEN`/`NOTIFY`).
#[async_trait]
pub trait CancelFeed: Send {
    /// The next task whose cancel was announced. An error means the feed
    /// was interrupted; the next call reconnects. Announcements made in
    /// between are lost: the owner's lease renewal, which no longer finds a
    /// cancelled task running, is the backstop.
    async fn next(&mut self) -> StoreResult<Uuid>;
}

/// What [`Store::racks_import`] did with one rack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RackImport {
    /// Created with this id (the one the caller gave it).
    Created(Uuid),
    /// A rack with the same external id exists (or came earlier in the
    /// batch); nothing was written for this one.
    Existing(Uuid),
}

/// What [`Store::task_submit`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum SubmitOutcome {
    /// The task as stored.
    Inserted(Task),
    /// A task with the same idempotency key already exists, in any status
    /// (possibly on another rack: the caller checks); nothing was written.
    Existing(Task),
    /// `decide` rejected; nothing was written.
    Rejected(SubmitReject),
}

/// A status change the promoter / canceller wants applied by
/// [`Store::task_promote`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskTransition {
    pub id: Uuid,
    pub status: TaskStatus,
    pub message: String,
}

/// Conditional update of one task ([`Store::task_update`]); `None` fields
/// are left alone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskUpdate {
    /// The statuses the task must be in for the update to apply; empty =
    /// any current status.
    pub expected: Vec<TaskStatus>,
    pub status: Option<TaskStatus>,
    pub message: Option<String>,
    pub report: Option<serde_json::Value>,
    /// `Some(None)` clears the applied rule (a built-in rule was used).
    pub applied_rule_id: Option<Option<Uuid>>,
    pub rule_definition: Option<RuleDefinition>,
    pub executor_type: Option<String>,
    pub execution_id: Option<String>,
    /// Sets (`Some(Some(t))`) or clears the queue deadline, e.g. for a task
    /// parked as waiting for target linkage. When `None`, a `status` other
    /// than waiting clears it.
    pub queue_expires_at: Option<Option<DateTime<Utc>>>,
    /// Gives the task to this owner with this lease (a replica starting it).
    pub lease: Option<TaskLease>,
    /// Applies only while this replica owns the task: an executor that lost
    /// its task to an adopter must not overwrite what the adopter writes.
    pub expected_owner: Option<String>,
    /// Moves the task's rack in its lifecycle, in the same transaction, when
    /// the update applies (an ingest or decommission task's outcome).
    pub rack_lifecycle: Option<rackflow_domain::inventory::LifecycleChange>,
}

/// Filter of task listings. Set fields AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskFilter {
    pub rack_id: Option<Uuid>,
    /// Tasks whose `components_by_type` lists this component.
    pub component_id: Option<Uuid>,
    /// Only waiting, pending and running tasks.
    pub active_only: bool,
    /// Any of these statuses (empty: any status).
    pub statuses: Vec<TaskStatus>,
}

/// The locked state of one run for a dispatcher attempt or a manual control
/// ([`Store::run_lock_apply`]): the domain's [`LockedRun`]. The targets are
/// the current phase's unsettled ones, locked, with their child tasks'
/// states read in the same statement (the task rows are not locked).
pub type RunLock = LockedRun;

/// How [`Store::run_lock_apply`] takes the run's row lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Dispatcher: only if the run is pending or running, and skip it (return
    /// None) if another transaction holds it (`FOR UPDATE SKIP LOCKED` on
    /// PostgreSQL).
    ///
    /// SQLite has no row locks: its write transaction (`BEGIN IMMEDIATE`)
    /// serialises all writers, so "skip if locked" degrades to "wait for
    /// the other writer" (up to the busy timeout) there. That is the same
    /// guarantee on the single node SQLite serves.
    Runnable,
    /// Manual controls: wait for the lock; any status.
    Wait,
}

/// Filter of schedule listings (spec §6.5). Set fields AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScheduleFilter {
    /// Schedules with a scope on this rack.
    pub rack_id: Option<Uuid>,
    pub enabled_only: bool,
}

/// A locked schedule handed to [`Store::schedule_lock_apply`]'s `apply`:
/// change `schedule` and `scopes` in place (add a scope with a fresh id,
/// drop one by removing it).
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleLock {
    pub schedule: rackflow_domain::schedule::TaskSchedule,
    pub scopes: Vec<rackflow_domain::schedule::ScheduleScope>,
    /// Status of each scope's `last_task_id` that still exists.
    pub last_task_status: std::collections::HashMap<Uuid, TaskStatus>,
}

/// The persistence interface, implemented for SQLite and PostgreSQL.
///
/// Method names are `resource_verb`. Timestamps (`created_at`, `updated_at`)
/// are set by the store; callers' values are ignored on insert. All stored
/// timestamps have microsecond precision (finer input is truncated), so what
/// is read back compares equal in both dialects.
///
/// Conventions of both implementations: `Page.limit == 0` is unlimited;
/// empty optional text (`Some("")`, or an empty run description / status
/// message) is stored as NULL; BMC MACs are stored and looked up normalised
/// (`normalize_mac`); a component's BMCs come back ordered by MAC.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Which dialect this is (`sqlite` or `postgres`), for logs.
    fn dialect(&self) -> &'static str;

    // ---- inventory: racks ------------------------------------------------

    /// Inserts a rack and its components (and their BMCs) in one transaction.
    /// Unique violations (external id, manufacturer+serial, component
    /// type+external id, BMC MAC) answer [`StoreError::AlreadyExists`] naming
    /// the field; nothing is written then. The components are stored with
    /// `rack_id = rack.id` whatever their own `rack_id` says.
    async fn rack_create(&self, rack: &Rack, components: &[Component]) -> StoreResult<()>;

    /// Creates the racks (with components and BMCs) whose external id names
    /// no rack yet, in one transaction with multi-row inserts, and answers
    /// per rack, in order, whether it was created or found. A rack without
    /// an external id is always created. A unique violation names the rack
    /// that caused it ([`Store::rack_create`]'s error); the racks before it
    /// in the batch are then created, the rest not.
    async fn racks_import(&self, racks: &[(Rack, Vec<Component>)]) -> StoreResult<Vec<RackImport>>;

    /// A rack by id (soft-deleted ones only when `include_deleted`).
    async fn rack_get(&self, id: Uuid, include_deleted: bool) -> StoreResult<Option<Rack>>;

    /// Non-deleted racks with this exact name (names are not unique),
    /// ordered by id.
    async fn rack_get_by_name(&self, name: &str) -> StoreResult<Vec<Rack>>;

    /// The non-deleted rack with this external id.
    async fn rack_get_by_external_id(&self, external_id: &str) -> StoreResult<Option<Rack>>;

    /// The non-deleted rack with this (manufacturer, serial number).
    async fn rack_get_by_serial(
        &self,
        manufacturer: &str,
        serial_number: &str,
    ) -> StoreResult<Option<Rack>>;

    /// The non-deleted component with this (manufacturer, serial number),
    /// with its BMCs.
    async fn component_get_by_serial(
        &self,
        manufacturer: &str,
        serial_number: &str,
    ) -> StoreResult<Option<Component>>;

    /// Racks by ids, including soft-deleted ones (for enrichment of targets),
    /// ordered by id; unknown ids are skipped.
    async fn racks_get_many(&self, ids: &[Uuid]) -> StoreResult<Vec<Rack>>;

    /// Page of racks ordered by name ASC, id ASC, plus the total before paging.
    async fn rack_list(&self, filter: &RackFilter, page: Page) -> StoreResult<(Vec<Rack>, i64)>;

    /// Soft-deletes a rack and its components. Returns false if no such
    /// non-deleted rack.
    async fn rack_soft_delete(&self, id: Uuid) -> StoreResult<bool>;

    /// Applies a patch to a non-deleted rack in one transaction; returns
    /// the rack before and after, `None` if not found.
    async fn rack_patch(&self, id: Uuid, patch: &RackPatch) -> StoreResult<Option<(Rack, Rack)>>;

    /// Deletes a soft-deleted rack for good, with its components, their
    /// BMCs, its tasks, rule associations and schedule scopes, in one
    /// transaction; refused while the rack has unfinished tasks. Its
    /// external id can be used again afterwards.
    async fn rack_purge(&self, id: Uuid) -> StoreResult<PurgeOutcome>;

    /// Non-deleted racks that belong to any of these NVLink domains, by
    /// name then id.
    async fn racks_of_nvl_domains(&self, domain_ids: &[Uuid]) -> StoreResult<Vec<Rack>>;

    /// Sets (or, with `None`, clears) the NVLink domain of the non-deleted
    /// racks `rack_ids`, in one statement; returns how many changed.
    async fn racks_set_nvl_domain(
        &self,
        rack_ids: &[Uuid],
        domain_id: Option<Uuid>,
    ) -> StoreResult<u64>;

    // ---- inventory: NVLink domains ----------------------------------------

    /// Inserts a domain. A name or external id in use answers
    /// [`StoreError::AlreadyExists`] naming it.
    async fn nvl_domain_create(&self, domain: &NvlDomain) -> StoreResult<()>;

    /// A non-deleted domain by id.
    async fn nvl_domain_get(&self, id: Uuid) -> StoreResult<Option<NvlDomain>>;

    /// The non-deleted domain with this name.
    async fn nvl_domain_get_by_name(&self, name: &str) -> StoreResult<Option<NvlDomain>>;

    /// The non-deleted domain with this external id.
    async fn nvl_domain_get_by_external_id(
        &self,
        external_id: &str,
    ) -> StoreResult<Option<NvlDomain>>;

    /// Non-deleted domains by ids, ordered by id; unknown ids are skipped.
    async fn nvl_domains_get_many(&self, ids: &[Uuid]) -> StoreResult<Vec<NvlDomain>>;

    /// A page of non-deleted domains matching `query`, ordered by name
    /// (`descending` reverses it) then id, and the total before paging.
    async fn nvl_domain_list(
        &self,
        query: &NvlDomainQuery,
        page: Page,
    ) -> StoreResult<(Vec<NvlDomain>, i64)>;

    // ---- inventory: components ------------------------------------------

    /// Inserts one component (rack optional) with its BMCs. A `rack_id` that
    /// names no rack answers [`StoreError::NotFound`].
    async fn component_create(&self, component: &Component) -> StoreResult<()>;

    /// A component by id, soft-deleted ones included (`deleted_at` tells).
    async fn component_get(&self, id: Uuid) -> StoreResult<Option<Component>>;

    /// Page of components ordered by rack, type name, slot, tray, name, id
    /// (components without a rack last), plus the total before paging. BMCs
    /// included.
    async fn component_list(
        &self,
        filter: &ComponentFilterQuery,
        page: Page,
    ) -> StoreResult<(Vec<Component>, i64)>;

    /// Components (non-deleted) of many racks at once, for planning; in the
    /// `component_list` order.
    async fn components_of_racks(&self, rack_ids: &[Uuid]) -> StoreResult<Vec<Component>>;

    /// [`Store::components_of_racks`] with their BMCs left empty: what the
    /// submission of tasks on those racks needs (ids, types, external ids),
    /// without reading 35 BMC rows per rack.
    async fn components_of_racks_without_bmcs(
        &self,
        rack_ids: &[Uuid],
    ) -> StoreResult<Vec<Component>>;

    /// `(rack id, type, component id)` of the non-deleted components of many
    /// racks, in the `component_list` order: what planning needs, cheaply.
    async fn component_keys_of_racks(
        &self,
        rack_ids: &[Uuid],
    ) -> StoreResult<Vec<(Uuid, ComponentType, Uuid)>>;

    /// Non-deleted components whose BMC has this MAC (normalised first).
    async fn components_by_bmc_mac(&self, mac: &str) -> StoreResult<Vec<Component>>;

    /// Applies a patch to a non-deleted component in one transaction;
    /// returns the updated component, `None` if not found. An empty
    /// `description` clears it. A BMC whose MAC belongs to another component
    /// answers [`StoreError::AlreadyExists`] (nothing is written); a
    /// `rack_id` naming no rack answers [`StoreError::NotFound`].
    async fn component_patch(
        &self,
        id: Uuid,
        patch: &ComponentPatch,
    ) -> StoreResult<Option<Component>>;

    /// Soft-deletes a component. Returns false if no such non-deleted
    /// component.
    async fn component_soft_delete(&self, id: Uuid) -> StoreResult<bool>;

    /// Deletes a soft-deleted component (and its BMCs) for good.
    async fn component_purge(&self, id: Uuid) -> StoreResult<PurgeOutcome>;

    /// Records versions and power states read back from the hardware, with
    /// their observation times (an older observation never overwrites a
    /// newer one). Unknown or deleted components are skipped.
    async fn components_observe(&self, observations: &[Observation]) -> StoreResult<()>;

    /// Of `ids`, the non-deleted components whose operational state is one
    /// of `states`, in no particular order (the readiness gate's question).
    async fn components_in_states(
        &self,
        ids: &[Uuid],
        states: &[rackflow_domain::inventory::OperationalState],
    ) -> StoreResult<Vec<Uuid>>;

    // ---- operation runs ---------------------------------------------------

    /// Inserts a run and all its targets in one transaction; a failure
    /// writes nothing. Unique violations (run id, target id, a run's rack or
    /// sequence index twice) answer [`StoreError::AlreadyExists`]; a target
    /// `task_id` naming no task [`StoreError::NotFound`] (`task <id>`).
    /// Targets are stored under `run.id` whatever their `operation_run_id`
    /// says.
    async fn run_create(
        &self,
        run: &OperationRun,
        targets: &[OperationRunTarget],
    ) -> StoreResult<()>;

    async fn run_get(&self, id: Uuid) -> StoreResult<Option<OperationRun>>;

    /// Page of runs ordered by created_at DESC, id DESC, plus the filtered
    /// total before paging. Filter semantics of operation-runs §4.6: name
    /// patterns match case-sensitively (one: `=` or LIKE; several: IN, or
    /// all/any LIKEs per `use_or`, decision D6), `states` and `kinds`
    /// entries are OR'ed, the parts AND'ed.
    async fn run_list(
        &self,
        filter: &RunListFilter,
        page: Page,
    ) -> StoreResult<(Vec<OperationRun>, i64)>;

    /// Page of targets (phase ASC, sequence ASC) plus the total after the
    /// status and phase filters, before paging. The phase scope is relative
    /// to `query.current_phase_index`: Current `=`, Completed `<`,
    /// CurrentAndCompleted `<=`, All unrestricted. An unknown run gives an
    /// empty page (the caller checks existence).
    async fn run_targets_list(
        &self,
        query: &TargetQuery,
    ) -> StoreResult<(Vec<OperationRunTarget>, i64)>;

    /// Writes a target's dispatch state: `task_id`, `status`, `message`,
    /// `retry_after`, `retry_state` (and stamps `updated_at`). An unknown
    /// target answers [`StoreError::NotFound`] (`operation run target
    /// <id>`); a `task_id` naming no task `NotFound` (`task <id>`).
    async fn run_target_update(&self, target: &OperationRunTarget) -> StoreResult<()>;

    /// Ids of runs with status pending or running, ordered by updated_at
    /// ASC (then id), at most `limit` (not locked). A non-positive `limit`
    /// gives no ids.
    async fn run_ids_runnable(&self, limit: i64) -> StoreResult<Vec<Uuid>>;

    /// One dispatcher attempt or manual control (operation-runs §3.2, §4.1),
    /// in ONE transaction:
    ///
    /// 1. lock the run row per `mode` (PostgreSQL: `FOR UPDATE SKIP LOCKED`
    ///    and only pending / running for [`LockMode::Runnable`], `FOR
    ///    UPDATE` for [`LockMode::Wait`]; SQLite: the write transaction);
    /// 2. lock its unsettled current-phase target rows (`FOR UPDATE`,
    ///    ordered by phase_index, sequence_index), with their child task's
    ///    status and message;
    /// 3. aggregate the earlier phases (phase_index < current) and the
    ///    current phase's settled targets (one row of counts, not locked);
    /// 4. call `apply(&mut lock)`;
    /// 5. write every target of `lock.targets` whose dispatch state
    ///    (`task_id`, `status`, `message`, `retry_after`, `retry_state`)
    ///    differs from the loaded copy, stamping `updated_at`; unchanged
    ///    rows are not written. A target that is not one of the loaded
    ///    (locked) rows answers [`StoreError::NotFound`] and rolls back;
    /// 6. write the run (`status`, `status_reason`, `status_message`,
    ///    `current_phase_index`, `started_at`, `finished_at`, stamping
    ///    `updated_at`) if any of those changed — and in
    ///    [`LockMode::Runnable`] always, so every dispatcher attempt moves
    ///    the run to the back of the [`Store::run_ids_runnable`] order
    ///    (§3.1 fairness; the reference rewrites the run row on every
    ///    attempt);
    /// 7. commit.
    ///
    /// `updated_at` comes from the store's clock (microseconds), strictly
    /// after the row's previous value, in both dialects.
    ///
    /// Returns `Ok(None)` when the run does not exist (Wait) or was not
    /// obtained (Runnable: missing, not pending / running, or locked
    /// elsewhere), after rolling back; `Ok(Some(()))` after the commit. If
    /// `apply` (or a write) returns `Err`, the transaction is rolled back
    /// and that error returned. `apply` is synchronous and runs while the
    /// locks are held: keep it short.
    async fn run_lock_apply(
        &self,
        run_id: Uuid,
        mode: LockMode,
        apply: &mut (dyn for<'l> FnMut(&'l mut RunLock) -> StoreResult<()> + Send),
    ) -> StoreResult<Option<()>>;

    /// Current-phase targets of a run (no lock), ordered by sequence_index,
    /// for cancellation after commit. An unknown run gives none.
    async fn run_current_targets(&self, run_id: Uuid) -> StoreResult<Vec<OperationRunTarget>>;

    // ---- tasks ------------------------------------------------------------

    /// Submits a task to its rack in one transaction serialised per rack
    /// (PostgreSQL: a transaction-scoped advisory lock on the rack id;
    /// SQLite: the write transaction):
    ///
    /// 1. a non-empty `idempotency_key` with a task under it, in any status
    ///    → [`SubmitOutcome::Existing`], no write;
    /// 2. the rack's unfinished tasks, oldest first (created_at, id), go to
    ///    `decide`;
    /// 3. [`SubmitDecision::Insert`] stores the task with the decided
    ///    status, message and queue deadline (`created_at` = `updated_at` =
    ///    now, `started_at` / `finished_at` none; the other fields as given;
    ///    with a [`TaskStart`], its columns instead of the task's and
    ///    `started_at` = now) and returns it as stored;
    ///    [`SubmitDecision::Reject`] writes nothing.
    ///
    /// A rack that does not exist answers [`StoreError::NotFound`] (`rack
    /// <id>`); an `applied_rule_id` naming no rule `NotFound` (`operation
    /// rule <id>`); a task id in use [`StoreError::AlreadyExists`] (`task
    /// id "<id>"`).
    async fn task_submit(
        &self,
        task: &Task,
        decide: &(dyn for<'t> Fn(&'t [Task]) -> SubmitDecision + Send + Sync),
    ) -> StoreResult<SubmitOutcome>;

    /// [`Store::task_submit`] of an operation run target's child task: when
    /// the task is inserted, `target` (as the dispatcher wants it once its
    /// child exists) is written in the same transaction, `updated_at`
    /// stamped by the store. Nothing else differs; an existing or rejected
    /// task leaves the target alone.
    async fn task_submit_for_target(
        &self,
        task: &Task,
        decide: &(dyn for<'t> Fn(&'t [Task]) -> SubmitDecision + Send + Sync),
        target: &OperationRunTarget,
    ) -> StoreResult<SubmitOutcome>;

    /// Under the same per-rack serialisation as [`Store::task_submit`]:
    /// gives the rack's unfinished tasks (oldest first) to `decide` and
    /// applies the transitions it returns. Each sets status and message
    /// (and `updated_at`); entering running stamps `started_at` once,
    /// entering completed / failed / terminated stamps `finished_at`, and
    /// any status but waiting clears `queue_expires_at`. A transition
    /// applies only to a task `decide` was shown and only if that task is
    /// still in the status it was shown with; others are skipped. Returns
    /// the updated tasks in transition order.
    async fn task_promote(
        &self,
        rack_id: Uuid,
        decide: &(dyn for<'t> Fn(&'t [Task]) -> Vec<TaskTransition> + Send + Sync),
    ) -> StoreResult<Vec<Task>>;

    /// Racks having at least one waiting task, ordered by id.
    async fn racks_with_waiting_tasks(&self) -> StoreResult<Vec<Uuid>>;

    /// Runs, active runs' targets and unfinished tasks counted by status
    /// (the metrics endpoint's gauges).
    async fn status_counts(&self) -> StoreResult<StatusCounts>;

    /// Applies `update` to the task if its status is in `update.expected`
    /// (or `expected` is empty) and returns the updated task; `None` when
    /// there is no such task or its status is not expected. Stamps
    /// `updated_at`; a status of running stamps `started_at` unless set, a
    /// finished status stamps `finished_at` unless set; `queue_expires_at`
    /// as [`TaskUpdate::queue_expires_at`] says; [`TaskUpdate::lease`] sets
    /// the owner and its lease, [`TaskUpdate::expected_owner`] fences. A `Some("")` text clears
    /// the field.
    async fn task_update(&self, id: Uuid, update: &TaskUpdate) -> StoreResult<Option<Task>>;

    /// [`Store::task_update`] without reading the row back: true when the
    /// task existed with an expected status and was updated. For writers
    /// that do not need the row (report snapshots, several per task).
    async fn task_update_quiet(&self, id: Uuid, update: &TaskUpdate) -> StoreResult<bool>;

    /// [`Store::task_update_quiet`] of each `(id, update)`, in order, in one
    /// transaction: one commit for the snapshots and outcomes of many
    /// running tasks. All or nothing: an error rolls every update back.
    async fn task_updates_quiet(&self, updates: &[(Uuid, TaskUpdate)]) -> StoreResult<Vec<bool>>;

    async fn task_get(&self, id: Uuid) -> StoreResult<Option<Task>>;

    /// Tasks by id, in the order of `ids`; unknown ids are skipped.
    async fn tasks_get_many(&self, ids: &[Uuid]) -> StoreResult<Vec<Task>>;

    /// `(id, status, message)` of the tasks that exist among `ids`, without
    /// their reports and rules (dispatcher reconciliation reads this often).
    async fn task_states(&self, ids: &[Uuid]) -> StoreResult<Vec<(Uuid, TaskStatus, String)>>;

    /// Page of tasks ordered by created_at DESC, id DESC, plus the filtered
    /// total before paging. `report` is `None` unless `with_report`.
    async fn task_list(
        &self,
        filter: &TaskFilter,
        page: Page,
        with_report: bool,
    ) -> StoreResult<(Vec<Task>, i64)>;

    /// All tasks in any of `statuses`, created_at ASC, id ASC (recovery
    /// after a restart).
    async fn tasks_with_status(&self, statuses: &[TaskStatus]) -> StoreResult<Vec<Task>>;

    // ---- clustered execution ------------------------------------------

    /// Whether this process is the only one that can use the database
    /// (SQLite: the file is locked at open), so that every running task is
    /// this process's to resume at start, whatever its lease says.
    fn exclusive(&self) -> bool;

    /// Extends to `expires_at` the lease of those of `ids` that are
    /// running and held by `owner`; returns their ids. One that is missing
    /// was cancelled, finished or adopted: the owner must stop it. Tasks
    /// the owner holds but no longer executes are left to expire.
    async fn task_leases_renew(
        &self,
        owner: &str,
        ids: &[Uuid],
        expires_at: DateTime<Utc>,
    ) -> StoreResult<Vec<Uuid>>;

    /// Takes over up to `limit` running tasks whose lease expired before
    /// `now` (or that have none; with `any_lease`, every running task not
    /// held by `lease.owner`), oldest first, giving them `lease`. Rows
    /// another adopter has locked are skipped. Returns the adopted tasks.
    async fn task_adopt(
        &self,
        lease: &TaskLease,
        now: DateTime<Utc>,
        any_lease: bool,
        limit: i64,
    ) -> StoreResult<Vec<Task>>;

    /// Tells the other processes sharing the database that task `id` was
    /// cancelled (a no-op where there are none).
    async fn task_cancel_announce(&self, id: Uuid) -> StoreResult<()>;

    /// The cancels other processes announce, or `None` where no other
    /// process can share the database.
    async fn task_cancel_feed(&self) -> StoreResult<Option<Box<dyn CancelFeed>>>;

    // ---- operation rules --------------------------------------------------

    /// Inserts a rule. A second default for the rule's (type, code) answers
    /// [`StoreError::AlreadyExists`] (`a default rule for (<type>,
    /// <code>)`), a rule id in use `AlreadyExists` (`operation rule id
    /// "<id>"`); nothing is written then.
    async fn rule_create(&self, rule: &OperationRule) -> StoreResult<()>;

    /// Changes name, description (`Some("")` clears it) and / or
    /// definition; returns the updated rule, `None` if no such rule.
    async fn rule_update(
        &self,
        id: Uuid,
        name: Option<&str>,
        description: Option<&str>,
        definition: Option<&RuleDefinition>,
    ) -> StoreResult<Option<OperationRule>>;

    /// Deletes a rule: its rack associations go with it, tasks that applied
    /// it keep running with `applied_rule_id` NULL. False if no such rule.
    async fn rule_delete(&self, id: Uuid) -> StoreResult<bool>;

    async fn rule_get(&self, id: Uuid) -> StoreResult<Option<OperationRule>>;

    /// Page of rules ordered by created_at DESC, id DESC, plus the filtered
    /// total before paging.
    async fn rule_list(
        &self,
        task_type: Option<TaskType>,
        is_default: Option<bool>,
        page: Page,
    ) -> StoreResult<(Vec<OperationRule>, i64)>;

    /// Makes the rule the default of its (type, code) in one transaction,
    /// unsetting the current default. False if no such rule.
    async fn rule_set_default(&self, id: Uuid) -> StoreResult<bool>;

    /// The default rule of (type, code).
    async fn rule_default_for(
        &self,
        task_type: TaskType,
        code: &str,
    ) -> StoreResult<Option<OperationRule>>;

    /// Pins the rule to the rack for the rule's (type, code), replacing the
    /// rule pinned there before. A missing or soft-deleted rack answers
    /// [`StoreError::NotFound`] (`rack <id>`), a missing rule `NotFound`
    /// (`operation rule <id>`).
    async fn rule_associate(&self, rack_id: Uuid, rule_id: Uuid) -> StoreResult<()>;

    /// Unpins the rack's rule for (type, code); missing is a no-op.
    async fn rule_disassociate(
        &self,
        rack_id: Uuid,
        task_type: TaskType,
        code: &str,
    ) -> StoreResult<()>;

    async fn rule_association_get(
        &self,
        rack_id: Uuid,
        task_type: TaskType,
        code: &str,
    ) -> StoreResult<Option<RackRuleAssociation>>;

    /// The associations of many racks for one operation, in no order.
    async fn rule_associations_for_racks(
        &self,
        rack_ids: &[Uuid],
        task_type: TaskType,
        code: &str,
    ) -> StoreResult<Vec<RackRuleAssociation>>;

    /// The rack's associations ordered by type, code.
    async fn rule_associations_list(&self, rack_id: Uuid) -> StoreResult<Vec<RackRuleAssociation>>;

    // ---- leaks ------------------------------------------------------------

    /// Applies a leak report: the component's leak status, then its event
    /// (opened, observed again, or closed), in one transaction.
    async fn leak_report(
        &self,
        report: &rackflow_domain::leak::LeakReport,
    ) -> StoreResult<rackflow_domain::leak::LeakReported>;

    /// Marks a leak event's response as run (false: it already was).
    async fn leak_event_handled(&self, id: Uuid) -> StoreResult<bool>;

    /// Open leak events stored at or before `before` whose response has not
    /// run, oldest first (at most 1,000).
    async fn leak_events_unhandled(
        &self,
        before: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<Vec<rackflow_domain::leak::LeakEvent>>;

    /// Leak events, newest first, with the matching count.
    async fn leak_events_list(
        &self,
        filter: &LeakEventFilter,
        page: Page,
    ) -> StoreResult<(Vec<rackflow_domain::leak::LeakEvent>, i64)>;

    // ---- event rules ------------------------------------------------------

    /// Inserts a persisted event rule.
    async fn event_rule_create(
        &self,
        rule: &rackflow_domain::event_rule::EventRule,
    ) -> StoreResult<()>;

    async fn event_rule_get(
        &self,
        id: Uuid,
    ) -> StoreResult<Option<rackflow_domain::event_rule::EventRule>>;

    /// Persisted rules matching the filters, ascending id.
    async fn event_rule_list(
        &self,
        event_type: Option<&str>,
        enabled: Option<bool>,
    ) -> StoreResult<Vec<rackflow_domain::event_rule::EventRule>>;

    /// Applies `update`; `None` when there is no such rule.
    async fn event_rule_update(
        &self,
        id: Uuid,
        update: &EventRuleUpdate,
    ) -> StoreResult<Option<rackflow_domain::event_rule::EventRule>>;

    /// Deletes an unbound rule; a bound one is refused with its bindings.
    async fn event_rule_delete(&self, id: Uuid) -> StoreResult<EventRuleDeleted>;

    /// Binds a rule to a scope (the binding's event type is the rule's).
    async fn event_rule_bind(
        &self,
        binding: &rackflow_domain::event_rule::Binding,
    ) -> StoreResult<BindOutcome>;

    async fn event_rule_binding_get(
        &self,
        event_type: &str,
        scope: rackflow_domain::event_rule::Scope,
    ) -> StoreResult<Option<rackflow_domain::event_rule::Binding>>;

    /// Removes the binding at the scope; false when there was none.
    async fn event_rule_unbind(
        &self,
        event_type: &str,
        scope: rackflow_domain::event_rule::Scope,
    ) -> StoreResult<bool>;

    /// The rules bound to `rack` and to the site for `event_type`.
    async fn event_rules_bound(
        &self,
        event_type: &str,
        rack: Uuid,
    ) -> StoreResult<(
        Option<rackflow_domain::event_rule::EventRule>,
        Option<rackflow_domain::event_rule::EventRule>,
    )>;

    // ---- task schedules ---------------------------------------------------

    /// Inserts a schedule and its scopes in one transaction. A name in use
    /// answers [`StoreError::AlreadyExists`] (`task schedule name "<name>"`),
    /// a scope rack that does not exist [`StoreError::NotFound`] (`rack
    /// <id>`); nothing is written then.
    async fn schedule_create(
        &self,
        schedule: &rackflow_domain::schedule::TaskSchedule,
        scopes: &[rackflow_domain::schedule::ScheduleScope],
    ) -> StoreResult<()>;

    async fn schedule_get(
        &self,
        id: Uuid,
    ) -> StoreResult<Option<rackflow_domain::schedule::TaskSchedule>>;

    /// Page of schedules ordered by created_at ASC, id ASC, plus the
    /// filtered total before paging (`Page.limit == 0`: all).
    async fn schedule_list(
        &self,
        filter: &ScheduleFilter,
        page: Page,
    ) -> StoreResult<(Vec<rackflow_domain::schedule::TaskSchedule>, i64)>;

    /// Deletes a schedule and its scopes (tasks it created stay). False if
    /// no such schedule.
    async fn schedule_delete(&self, id: Uuid) -> StoreResult<bool>;

    /// A schedule's scopes ordered by created_at, id.
    async fn schedule_scopes(
        &self,
        schedule_id: Uuid,
    ) -> StoreResult<Vec<rackflow_domain::schedule::ScheduleScope>>;

    /// One scope by id.
    async fn schedule_scope_get(
        &self,
        scope_id: Uuid,
    ) -> StoreResult<Option<rackflow_domain::schedule::ScheduleScope>>;

    /// Ids of enabled schedules whose `next_run_at <= now`, oldest due
    /// first, at most `limit` (not locked).
    async fn schedule_due_ids(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Uuid>>;

    /// The earliest `next_run_at` of any enabled schedule (the dispatcher
    /// sleeps until then).
    async fn schedule_next_due(&self) -> StoreResult<Option<DateTime<Utc>>>;

    /// Records the task a scope's occurrence submitted (no lock: only the
    /// claimer of that occurrence writes it).
    async fn schedule_scope_set_last_task(&self, scope_id: Uuid, task_id: Uuid) -> StoreResult<()>;

    /// Every change to a schedule and its scopes, in ONE transaction:
    ///
    /// 1. lock the schedule row — with `claim_due = Some(now)` only if it is
    ///    enabled and `next_run_at <= now`, skipping it if another
    ///    transaction holds it (`FOR UPDATE SKIP LOCKED` on PostgreSQL;
    ///    SQLite's write transaction serialises all writers instead);
    ///    with `None` waiting for the lock (`FOR UPDATE`);
    /// 2. load its scopes (created_at order) and the status of each scope's
    ///    `last_task_id`;
    /// 3. call `apply`;
    /// 4. delete the scopes `apply` removed, update those whose filter or
    ///    last task changed, insert new ones, and write the schedule row if
    ///    it (or a scope) changed, stamping `updated_at`;
    /// 5. commit and return the state as written.
    ///
    /// `Ok(None)` when the schedule does not exist or was not obtained
    /// (claim: not due, disabled, or locked elsewhere). An error from
    /// `apply` or a write rolls back; a name in use answers
    /// [`StoreError::AlreadyExists`].
    async fn schedule_lock_apply(
        &self,
        id: Uuid,
        claim_due: Option<DateTime<Utc>>,
        apply: &mut (dyn for<'l> FnMut(&'l mut ScheduleLock) -> StoreResult<()> + Send),
    ) -> StoreResult<Option<ScheduleLock>>;

    // ---- the audit trail ----------------------------------------------------

    /// Appends events in one transaction (their `seq` is assigned here).
    async fn audit_append(&self, events: &[AuditEvent]) -> StoreResult<()>;

    /// At most `limit` events matching `filter`, by sequence number
    /// (oldest first unless `filter.newest_first`).
    async fn audit_list(&self, filter: &AuditFilter, limit: i64) -> StoreResult<Vec<AuditEvent>>;

    /// Removes the events older than `before`; how many.
    async fn audit_prune(&self, before: DateTime<Utc>) -> StoreResult<u64>;

    // ---- secrets at rest ------------------------------------------------------

    /// Hands every sealed secret stored (tasks, runs, schedules) to
    /// `reseal` and writes back what it returns: `Ok(Some(new))` replaces
    /// the envelope, `Ok(None)` keeps it (already under the active key),
    /// `Err(why)` keeps it and reports the row. Pages of rows, one
    /// transaction per page.
    async fn secrets_reseal(
        &self,
        reseal: &(dyn for<'s> Fn(&'s str) -> Result<Option<String>, String> + Send + Sync),
    ) -> StoreResult<ResealOutcome>;
}

/// What [`Store::secrets_reseal`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResealOutcome {
    /// Envelopes replaced.
    pub resealed: u64,
    /// Envelopes already under the active key.
    pub already_current: u64,
    /// Rows left as they were, and why (no secret text).
    pub failures: Vec<String>,
}

/// Which part of the audit trail [`Store::audit_list`] reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Events of this operation run.
    pub run_id: Option<Uuid>,
    /// Events at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Events of this actor.
    pub actor: Option<String>,
    /// Run controls only (an operator's or the system's).
    pub controls_only: bool,
    /// Events after this sequence number (before it when `newest_first`):
    /// the next page.
    pub after_seq: Option<i64>,
    /// Newest first.
    pub newest_first: bool,
}

/// Which database to open.
#[derive(Clone, PartialEq, Eq)]
pub enum DbTarget {
    /// A SQLite database file (created if missing).
    Sqlite(PathBuf),
    /// A `postgres://` connection URL.
    Postgres(String),
}

/// Redacts the PostgreSQL URL, which may carry a password.
impl fmt::Debug for DbTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbTarget::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            DbTarget::Postgres(_) => f.write_str("Postgres(<redacted>)"),
        }
    }
}

/// Opens the store `target` names, migrated and ready.
pub async fn open_store(target: &DbTarget) -> StoreResult<Arc<dyn Store>> {
    Ok(match target {
        DbTarget::Sqlite(path) => Arc::new(SqliteStore::open(path).await?),
        DbTarget::Postgres(url) => Arc::new(PgStore::connect(url).await?),
    })
}
