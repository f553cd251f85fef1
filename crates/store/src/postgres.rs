//! The PostgreSQL store (clustered deployments): connecting, migrations, and
//! PostgreSQL's native encodings of the shared statement arguments and
//! columns (UUID, TIMESTAMPTZ, JSONB).
//!
//! Connection URLs may carry passwords: they are never logged, and the
//! store's errors never include them.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgArguments, PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, Row};
use uuid::Uuid;

use crate::StoreResult;
use crate::backend::sqlx_backend;
use crate::sql::{Arg, RowReader, Sql};

/// Pool size per replica.
const MAX_CONNECTIONS: u32 = 10;

/// [`crate::Store`] on PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects with a `postgres://` URL and applies the migrations (under
    /// sqlx's advisory lock, so replicas starting together migrate once).
    pub async fn connect(url: &str) -> StoreResult<PgStore> {
        PgStore::connect_with(PgConnectOptions::from_str(url)?).await
    }

    /// [`PgStore::connect`] with options built in code (e.g. a database name
    /// or search path set programmatically).
    pub async fn connect_with(options: PgConnectOptions) -> StoreResult<PgStore> {
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        tracing::info!("connected PostgreSQL store");
        Ok(PgStore { pool })
    }

    /// The connection pool, for callers that need SQL the store does not
    /// offer (schema checks in tests, diagnostics).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes the pool, waiting for connections to finish.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

sqlx_backend! {
    store: PgStore,
    db: Postgres,
    row: PgRow,
    tx: PgTx,
    dialect: "postgres",
    prepare: std::convert::identity,
    bind: bind_all,
    begin: "BEGIN",
    like: like_match,
    xact_lock: advisory_xact_lock,
    task_has_component: task_has_component,
    for_update: row_lock,
    count_where: count_filter,
    ordered_text_agg: string_agg,
    write_gate: no_write_gate,
    exclusive: shared,
    announce_cancel: notify_cancel,
    cancel_feed: listen_cancels,
    refresh_statistics: analyze_grown,
}

/// A table is analyzed once this many rows changed since its last
/// statistics, and more rows than it had then: after a bulk write the
/// statistics are never more than twice off, at a handful of `ANALYZE`s
/// for a fleet imported in thousands of batches.
const ANALYZE_MIN_CHANGED_ROWS: i64 = 1000;

/// `ANALYZE`s those of `tables` that grew past their statistics.
///
/// Autovacuum analyzes a table only a minute or more after it changed, and
/// until then the planner guesses. Right after a fleet import it guessed
/// that a component-id list matched 0.5 % of 350,000 BMC rows and read
/// every one of them in a parallel sequential scan, once per task: a
/// 10,000-rack run took six times its ideal on PostgreSQL. The counters
/// read here are the statistics collector's, a second or so behind.
async fn analyze_grown(store: &PgStore, tables: &[&'static str]) -> StoreResult<()> {
    let names: Vec<String> = tables.iter().map(|t| (*t).to_string()).collect();
    let grown: Vec<String> = sqlx::query_scalar(
        "SELECT s.relname::text FROM pg_stat_user_tables s \
         JOIN pg_class c ON c.oid = s.relid \
         WHERE s.schemaname = current_schema() AND s.relname = ANY($1) \
           AND s.n_mod_since_analyze >= $2 \
           AND s.n_mod_since_analyze > GREATEST(c.reltuples, 0)",
    )
    .bind(&names)
    .bind(ANALYZE_MIN_CHANGED_ROWS)
    .fetch_all(&store.pool)
    .await?;
    for table in tables.iter().filter(|t| grown.iter().any(|g| g == *t)) {
        let started = std::time::Instant::now();
        // The name is one of the store's own table names, never input.
        sqlx::query(&format!("ANALYZE {table}"))
            .execute(&store.pool)
            .await?;
        tracing::debug!(
            table,
            elapsed_ms = started.elapsed().as_millis(),
            "analyzed after a bulk write"
        );
    }
    Ok(())
}

/// The `NOTIFY` channel of task cancels.
const CANCEL_CHANNEL: &str = "rackflow_task_cancel";

/// Several replicas may share a PostgreSQL database.
fn shared(_: &PgStore) -> bool {
    false
}

/// `NOTIFY rackflow_task_cancel, '<task id>'`.
async fn notify_cancel(store: &PgStore, id: Uuid) -> StoreResult<()> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CANCEL_CHANNEL)
        .bind(id.to_string())
        .execute(&store.pool)
        .await?;
    Ok(())
}

/// A dedicated connection `LISTEN`ing on the cancel channel.
async fn listen_cancels(store: &PgStore) -> StoreResult<Option<Box<dyn crate::CancelFeed>>> {
    let mut listener = sqlx::postgres::PgListener::connect_with(&store.pool).await?;
    listener.listen(CANCEL_CHANNEL).await?;
    Ok(Some(Box::new(PgCancelFeed { listener })))
}

struct PgCancelFeed {
    listener: sqlx::postgres::PgListener,
}

#[async_trait::async_trait]
impl crate::CancelFeed for PgCancelFeed {
    async fn next(&mut self) -> StoreResult<Uuid> {
        loop {
            // `recv` reconnects (and listens again) after a lost connection.
            let notification = self.listener.recv().await?;
            match Uuid::parse_str(notification.payload()) {
                Ok(id) => return Ok(id),
                Err(_) => tracing::warn!(
                    channel = CANCEL_CHANNEL,
                    "ignored a cancel announcement that is not a task id"
                ),
            }
        }
    }
}

/// PostgreSQL writers run side by side; row and advisory locks order them.
fn no_write_gate(_: &PgStore) -> Option<&std::sync::Arc<tokio::sync::Mutex<()>>> {
    None
}

type Query<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

fn bind_all(mut query: Query<'_>, args: Vec<Arg>) -> Query<'_> {
    for arg in args {
        query = match arg {
            Arg::Text(v) => query.bind(v),
            Arg::Bool(v) => query.bind(v),
            Arg::I32(v) => query.bind(v),
            Arg::I64(v) => query.bind(v),
            Arg::Uuid(v) => query.bind(v),
            Arg::Ts(v) => query.bind(v),
            Arg::Json(v) => query.bind(v),
        };
    }
    query
}

/// PostgreSQL's LIKE is case-sensitive already.
fn like_match(sql: &mut Sql, column: &str, like_pattern: &str) -> String {
    format!("{column} LIKE {}", sql.bind(like_pattern))
}

/// A transaction-scoped advisory lock, released at commit or rollback.
fn advisory_xact_lock(key: i64) -> Option<Sql> {
    Some(Sql::new("SELECT pg_advisory_xact_lock($1)").arg(key))
}

/// Row locks held to the end of the transaction.
fn row_lock(skip_locked: bool) -> &'static str {
    if skip_locked {
        " FOR UPDATE SKIP LOCKED"
    } else {
        " FOR UPDATE"
    }
}

/// A FILTERed COUNT (0 over no rows).
fn string_agg(expression: &str, order_by: &str) -> String {
    format!("string_agg({expression}, ',' ORDER BY {order_by})")
}

fn count_filter(condition: &str) -> String {
    format!("COUNT(*) FILTER (WHERE {condition})")
}

/// A jsonpath test the GIN index on `attributes` (jsonb_ops) can serve.
/// The id is formatted into the path (a UUID is only hex digits and
/// hyphens); the path itself is bound.
fn task_has_component(sql: &mut Sql, component_id: Uuid) -> String {
    let path = format!("$.components_by_type.*[*] ? (@ == \"{component_id}\")");
    format!("task.attributes @? CAST({} AS jsonpath)", sql.bind(path))
}

impl RowReader for PgRow {
    fn opt_text(&self, col: &'static str) -> StoreResult<Option<String>> {
        Ok(self.try_get(col)?)
    }

    fn opt_uuid(&self, col: &'static str) -> StoreResult<Option<Uuid>> {
        Ok(self.try_get(col)?)
    }

    fn opt_ts(&self, col: &'static str) -> StoreResult<Option<DateTime<Utc>>> {
        Ok(self.try_get(col)?)
    }

    fn opt_json_value(&self, col: &'static str) -> StoreResult<Option<serde_json::Value>> {
        Ok(self.try_get(col)?)
    }

    fn bool(&self, col: &'static str) -> StoreResult<bool> {
        Ok(self.try_get(col)?)
    }

    fn i32(&self, col: &'static str) -> StoreResult<i32> {
        Ok(self.try_get(col)?)
    }

    fn i64(&self, col: &'static str) -> StoreResult<i64> {
        Ok(self.try_get(col)?)
    }
}
