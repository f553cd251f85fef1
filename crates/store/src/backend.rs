//! The seam between the store logic, written once, and the two dialects.
//!
//! [`Backend`] is what a dialect provides: run a [`Sql`] statement on the
//! pool or in a transaction, and the few SQL fragments that differ. Every
//! type implementing it is a [`Store`] through the blanket impl below, whose
//! bodies live in `inventory.rs` and `runs.rs`. The sqlx plumbing that is the
//! same for both pool types is stamped out by [`sqlx_backend!`].

use async_trait::async_trait;
use rackflow_domain::inventory::{Component, Rack};
use rackflow_domain::run::{OperationRun, OperationRunTarget, Page, RunListFilter, TargetQuery};
use uuid::Uuid;

use crate::sql::{RowReader, Sql};
use crate::{
    ComponentFilterQuery, ComponentPatch, RackFilter, Store, StoreResult, inventory, runs,
};

/// An open transaction; dropping it without [`Txn::commit`] rolls back.
#[async_trait]
pub(crate) trait Txn: Send {
    /// Runs a write; returns the number of rows it affected.
    async fn execute(&mut self, sql: Sql) -> Result<u64, sqlx::Error>;

    async fn commit(self) -> Result<(), sqlx::Error>;
}

/// A database dialect the store logic runs on.
#[async_trait]
pub(crate) trait Backend: Send + Sync + 'static {
    /// `sqlite` or `postgres`.
    const DIALECT: &'static str;

    type Row: RowReader;
    type Tx: Txn;

    async fn fetch_all(&self, sql: Sql) -> Result<Vec<Self::Row>, sqlx::Error>;

    /// Begins a write transaction.
    async fn begin(&self) -> Result<Self::Tx, sqlx::Error>;

    /// A case-sensitive match of `column` against `like_pattern` (LIKE
    /// syntax: `%`, `_`, backslash escapes), binding the pattern into `sql`.
    fn like(sql: &mut Sql, column: &str, like_pattern: &str) -> String;
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
/// plus the transaction type `$tx` for it. `$bind` binds a `Vec<Arg>` to a
/// query in the dialect's encoding, `$begin` is the statement that opens a
/// write transaction, `$like` builds a case-sensitive match.
macro_rules! sqlx_backend {
    (
        store: $store:ty,
        db: $db:ty,
        row: $row:ty,
        tx: $tx:ident,
        dialect: $dialect:literal,
        bind: $bind:path,
        begin: $begin:literal,
        like: $like:path $(,)?
    ) => {
        /// An open transaction of this dialect.
        pub(crate) struct $tx(sqlx::Transaction<'static, $db>);

        #[async_trait::async_trait]
        impl $crate::backend::Txn for $tx {
            async fn execute(&mut self, sql: $crate::sql::Sql) -> Result<u64, sqlx::Error> {
                let $crate::sql::Sql { text, args } = sql;
                Ok($bind(sqlx::query(&text), args)
                    .execute(&mut *self.0)
                    .await?
                    .rows_affected())
            }

            async fn commit(self) -> Result<(), sqlx::Error> {
                self.0.commit().await
            }
        }

        #[async_trait::async_trait]
        impl $crate::backend::Backend for $store {
            const DIALECT: &'static str = $dialect;

            type Row = $row;
            type Tx = $tx;

            async fn fetch_all(&self, sql: $crate::sql::Sql) -> Result<Vec<$row>, sqlx::Error> {
                let $crate::sql::Sql { text, args } = sql;
                $bind(sqlx::query(&text), args).fetch_all(&self.pool).await
            }

            async fn begin(&self) -> Result<$tx, sqlx::Error> {
                Ok($tx(self.pool.begin_with($begin).await?))
            }

            fn like(sql: &mut $crate::sql::Sql, column: &str, like_pattern: &str) -> String {
                $like(sql, column, like_pattern)
            }
        }
    };
}

pub(crate) use sqlx_backend;

#[async_trait]
impl<B: Backend> Store for B {
    fn dialect(&self) -> &'static str {
        B::DIALECT
    }

    async fn rack_create(&self, rack: &Rack, components: &[Component]) -> StoreResult<()> {
        inventory::rack_create(self, rack, components).await
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

    async fn racks_get_many(&self, ids: &[Uuid]) -> StoreResult<Vec<Rack>> {
        inventory::racks_get_many(self, ids).await
    }

    async fn rack_list(&self, filter: &RackFilter, page: Page) -> StoreResult<(Vec<Rack>, i64)> {
        inventory::rack_list(self, filter, page).await
    }

    async fn rack_soft_delete(&self, id: Uuid) -> StoreResult<bool> {
        inventory::rack_soft_delete(self, id).await
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
        inventory::components_of_racks(self, rack_ids).await
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
}
