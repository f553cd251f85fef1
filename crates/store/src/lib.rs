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
//! `inventory` and `runs` hold the store logic, written once; `sqlite` and
//! `postgres` hold only what differs (connecting, value encodings, LIKE).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use rackflow_domain::ComponentType;
use rackflow_domain::inventory::{Component, Rack};
use rackflow_domain::run::{OperationRun, OperationRunTarget, Page, RunListFilter, TargetQuery};
use uuid::Uuid;

mod backend;
mod error;
mod inventory;
mod postgres;
mod runs;
mod sql;
mod sqlite;

pub use error::StoreError;
pub use postgres::PgStore;
pub use sqlite::SqliteStore;

/// Result of store operations.
pub type StoreResult<T> = Result<T, StoreError>;

/// Filter of rack listings. Empty fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RackFilter {
    /// Exact names (OR'ed).
    pub names: Vec<String>,
    pub manufacturers: Vec<String>,
    pub models: Vec<String>,
    /// Only racks that have an external id.
    pub with_external_id_only: bool,
    /// Include soft-deleted racks.
    pub include_deleted: bool,
}

/// Filter of component listings. Empty fields do not filter; set fields AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ComponentFilterQuery {
    pub rack_ids: Vec<Uuid>,
    pub ids: Vec<Uuid>,
    pub types: Vec<ComponentType>,
    pub external_ids: Vec<String>,
    pub names: Vec<String>,
    pub include_deleted: bool,
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

    /// A rack by id (soft-deleted ones only when `include_deleted`).
    async fn rack_get(&self, id: Uuid, include_deleted: bool) -> StoreResult<Option<Rack>>;

    /// Non-deleted racks with this exact name (names are not unique),
    /// ordered by id.
    async fn rack_get_by_name(&self, name: &str) -> StoreResult<Vec<Rack>>;

    /// The non-deleted rack with this external id.
    async fn rack_get_by_external_id(&self, external_id: &str) -> StoreResult<Option<Rack>>;

    /// Racks by ids, including soft-deleted ones (for enrichment of targets),
    /// ordered by id; unknown ids are skipped.
    async fn racks_get_many(&self, ids: &[Uuid]) -> StoreResult<Vec<Rack>>;

    /// Page of racks ordered by name ASC, id ASC, plus the total before paging.
    async fn rack_list(&self, filter: &RackFilter, page: Page) -> StoreResult<(Vec<Rack>, i64)>;

    /// Soft-deletes a rack and its components. Returns false if no such
    /// non-deleted rack.
    async fn rack_soft_delete(&self, id: Uuid) -> StoreResult<bool>;

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

    // ---- operation runs ---------------------------------------------------

    /// Inserts a run and all its targets in one transaction; a failure
    /// writes nothing. Unique violations (run id, target id, a run's rack or
    /// sequence index twice) answer [`StoreError::AlreadyExists`]. Targets
    /// are stored under `run.id` whatever their `operation_run_id` says.
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
