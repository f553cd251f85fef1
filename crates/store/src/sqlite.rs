//! The SQLite store (the embedded default): opening the database file with
//! the connection settings the store relies on, migrations, and SQLite's
//! encodings of the shared statement arguments and columns.
//!
//! Encodings (see migrations/sqlite/0001_inventory.sql): UUIDs are
//! lowercase hyphenated TEXT, timestamps RFC 3339 UTC TEXT with exactly six
//! fractional digits, JSON is TEXT. Write transactions start with
//! `BEGIN IMMEDIATE`, so two writers queue on the busy timeout instead of
//! one failing when it upgrades a read lock; that write lock is also what
//! stands in for PostgreSQL's row locks (`FOR UPDATE`, advisory locks).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteRow, SqliteSynchronous,
};
use sqlx::{Row, Sqlite};
use uuid::Uuid;

use crate::backend::sqlx_backend;
use crate::sql::{Arg, RowReader, Sql};
use crate::{StoreError, StoreResult};

/// How long a connection waits for another writer before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections of a file database: WAL lets readers run beside the writer.
const MAX_CONNECTIONS: u32 = 8;

/// The timestamp text format: fixed width, so text order is time order.
const TS_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.6fZ";

/// [`crate::Store`] on SQLite.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// One writer at a time in this process (see [`write_gate`]).
    write_gate: Arc<tokio::sync::Mutex<()>>,
    /// The database file, locked (`flock`) for as long as any clone of the
    /// store lives: SQLite serves one rackflow process, and a second one
    /// would resume the first one's running tasks as its own.
    _process_lock: Option<Arc<std::fs::File>>,
}

impl SqliteStore {
    /// Opens (creating if missing) the database file at `path`, in WAL
    /// journal mode with foreign keys on and a 5 s busy timeout, and applies
    /// the migrations.
    pub async fn open(path: &Path) -> StoreResult<SqliteStore> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // In WAL mode NORMAL syncs the log at checkpoints, not at every
            // commit: a committed transaction survives the process dying
            // (kill -9, panic), and the file never corrupts; only an OS crash
            // or power loss can drop the last commits. FULL costs an fsync
            // per commit, which caps a rollout at the disk's fsync rate.
            .synchronous(SqliteSynchronous::Normal)
            // A multi-row insert inside a transaction keeps a statement
            // journal (to undo just that statement); on disk it was a fifth
            // of a fleet import's time.
            .pragma("temp_store", "memory")
            // 32 MiB of page cache per connection (the default is 2 MiB,
            // which a 10,000-rack inventory outgrows: each child task's
            // rack read went to the file), and up to 256 MiB of the file
            // mapped so that reads share the OS page cache instead of
            // copying it. Measured with `cargo bench -p rackflow --bench
            // fleet -- r10000`: without the mapping and with 16 MiB, the
            // import took 52 s instead of 41 s, CreateOperationRun 5.6 s
            // instead of 3.6 s, the makespan 3.95 instead of 3.06 × ideal
            // (peak RSS 416 MiB instead of 925 MiB: mapped pages count).
            .pragma("cache_size", "-32768")
            .pragma("mmap_size", "268435456")
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options)
            .await?;
        let lock = match lock_for_this_process(path) {
            Ok(lock) => lock,
            Err(e) => {
                pool.close().await;
                return Err(e);
            }
        };
        tracing::info!(path = %path.display(), "opened SQLite store");
        let mut store = SqliteStore::migrated(pool).await?;
        store._process_lock = Some(Arc::new(lock));
        Ok(store)
    }

    /// A private in-memory database (for tests and throwaway use). It lives
    /// on a single connection that is never closed, since every connection
    /// to `:memory:` is a database of its own.
    pub async fn open_in_memory() -> StoreResult<SqliteStore> {
        let options = SqliteConnectOptions::new()
            .in_memory(true)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await?;
        SqliteStore::migrated(pool).await
    }

    async fn migrated(pool: SqlitePool) -> StoreResult<SqliteStore> {
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        Ok(SqliteStore {
            pool,
            write_gate: Arc::new(tokio::sync::Mutex::new(())),
            _process_lock: None,
        })
    }

    /// The connection pool, for callers that need SQL the store does not
    /// offer (schema checks in tests, diagnostics).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Closes the pool, waiting for connections to finish (checkpoints the
    /// WAL when the last connection closes).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Locks the database file for this process (an advisory `flock`, which
/// SQLite's own `fcntl` locks do not interact with on Linux); released when
/// the file is closed, so also when the process dies.
fn lock_for_this_process(path: &Path) -> StoreResult<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| StoreError::Locked(format!("{}: {e}", path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(StoreError::Locked(format!(
            "{} is in use by another rackflow process; SQLite serves one process \
             (run several replicas on PostgreSQL)",
            path.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(StoreError::Locked(format!(
            "{}: cannot lock the database file: {e}",
            path.display()
        ))),
    }
}

sqlx_backend! {
    store: SqliteStore,
    db: Sqlite,
    row: SqliteRow,
    tx: SqliteTx,
    dialect: "sqlite",
    prepare: positional,
    bind: bind_all,
    begin: "BEGIN IMMEDIATE",
    like: glob_match,
    xact_lock: no_lock,
    task_has_component: task_has_component,
    for_update: no_row_lock,
    count_where: sum_case,
    ordered_text_agg: group_concat,
    write_gate: write_gate,
    exclusive: only_process,
    announce_cancel: no_other_process,
    cancel_feed: no_cancel_feed,
    refresh_statistics: no_statistics,
}

/// Nothing to refresh: without `sqlite_stat1` SQLite's planner takes every
/// index as selective, which is right for each of the store's queries
/// (PostgreSQL's guesses without statistics are not; see its store).
async fn no_statistics(_: &SqliteStore, _: &[&'static str]) -> StoreResult<()> {
    Ok(())
}

/// The database file is locked to this process ([`SqliteStore::open`]); an
/// in-memory database is private to it anyway.
fn only_process(_: &SqliteStore) -> bool {
    true
}

async fn no_other_process(_: &SqliteStore, _: Uuid) -> StoreResult<()> {
    Ok(())
}

async fn no_cancel_feed(_: &SqliteStore) -> StoreResult<Option<Box<dyn crate::CancelFeed>>> {
    Ok(None)
}

/// SQLite admits one writer at a time, and a connection that finds the
/// write lock taken waits in SQLite's busy handler, which sleeps 1, 2, 5,
/// 10, … ms between tries. With the dispatcher, the executors' report
/// writes and the task updates all writing at once, those sleeps added
/// milliseconds to every slot turnover of a rollout. Writers of this
/// process therefore queue on an async mutex (FIFO) before they begin, so
/// each gets the lock the moment the previous one commits; readers never
/// take it (WAL lets them run beside the writer). Another process on the
/// same file still meets the busy timeout, as before.
fn write_gate(store: &SqliteStore) -> Option<&Arc<tokio::sync::Mutex<()>>> {
    Some(&store.write_gate)
}

type Query<'q> = sqlx::query::Query<'q, Sqlite, SqliteArguments<'q>>;

fn bind_all(mut query: Query<'_>, args: Vec<Arg>) -> Query<'_> {
    for arg in args {
        query = match arg {
            Arg::Text(v) => query.bind(v),
            Arg::Bool(v) => query.bind(v),
            Arg::I32(v) => query.bind(v),
            Arg::I64(v) => query.bind(v),
            Arg::Uuid(v) => query.bind(v.map(|id| id.hyphenated().to_string())),
            Arg::Ts(v) => query.bind(v.map(format_ts)),
            Arg::Json(v) => query.bind(v.map(|json| json.to_string())),
        };
    }
    query
}

/// `$N` placeholders as plain `?`s, with the arguments in the order of
/// their occurrences (an argument used twice is bound twice). sqlx binds a
/// SQLite statement's named or numbered parameters by looking each one up
/// among all of the statement's names, which costs the square of the
/// argument count: a 15,000-argument multi-row insert spent 1.5 s binding.
/// Plain `?`s have no names, so binding is linear. Quoted text (`'$1'`,
/// JSON paths like `'$.a'`) is left alone.
fn positional(sql: Sql) -> Sql {
    let Sql { text, args } = sql;
    if !text.contains('$') {
        return Sql { text, args };
    }
    let mut out = String::with_capacity(text.len());
    let mut ordered = Vec::with_capacity(args.len());
    let mut chars = text.char_indices().peekable();
    let mut quoted = false;
    while let Some((_, c)) = chars.next() {
        if c == '\'' {
            quoted = !quoted;
        }
        if c != '$' || quoted {
            out.push(c);
            continue;
        }
        let mut number = 0usize;
        let mut digits = 0;
        while let Some((_, d)) = chars.peek().copied().filter(|(_, d)| d.is_ascii_digit()) {
            number = number
                .saturating_mul(10)
                .saturating_add(d as usize - '0' as usize);
            digits += 1;
            chars.next();
        }
        match args.get(number.wrapping_sub(1)).filter(|_| digits > 0) {
            Some(arg) => {
                out.push('?');
                ordered.push(arg.clone());
            }
            // Not a placeholder of ours: kept as written (SQLite then
            // reports it, as it would have).
            None => {
                out.push('$');
                if digits > 0 {
                    out.push_str(&number.to_string());
                }
            }
        }
    }
    Sql {
        text: out,
        args: ordered,
    }
}

fn format_ts(t: DateTime<Utc>) -> String {
    t.format(TS_FORMAT).to_string()
}

/// `BEGIN IMMEDIATE` takes the database's write lock when a write
/// transaction starts, so writers are serialised already: there is no
/// finer lock to take.
fn no_lock(_key: i64) -> Option<Sql> {
    None
}

/// SQLite has no row locks: `BEGIN IMMEDIATE` holds the database's write
/// lock for the whole transaction, which covers every row a `FOR UPDATE`
/// would lock (and "skip locked" becomes "wait for the writer").
fn no_row_lock(_skip_locked: bool) -> &'static str {
    ""
}

/// SUM of a CASE (COALESCEd: SUM over no rows is NULL).
fn group_concat(expression: &str, order_by: &str) -> String {
    format!("group_concat({expression}, ',' ORDER BY {order_by})")
}

fn sum_case(condition: &str) -> String {
    format!("COALESCE(SUM(CASE WHEN {condition} THEN 1 ELSE 0 END), 0)")
}

/// Walks the groups of `components_by_type` with `json_each`.
fn task_has_component(sql: &mut Sql, component_id: Uuid) -> String {
    format!(
        "EXISTS (SELECT 1 FROM json_each(task.attributes, '$.components_by_type') AS g, \
         json_each(g.value) AS c WHERE c.value = {})",
        sql.bind(component_id)
    )
}

/// SQLite's LIKE ignores ASCII case; GLOB is case-sensitive, so a LIKE
/// pattern is translated to the equivalent GLOB pattern.
fn glob_match(sql: &mut Sql, column: &str, like_pattern: &str) -> String {
    format!("{column} GLOB {}", sql.bind(like_to_glob(like_pattern)))
}

/// Translates a LIKE pattern with PostgreSQL's semantics (`%` any run, `_`
/// one character, backslash escapes the next character) to GLOB (`*`, `?`;
/// GLOB's own metacharacters in literal text are bracketed).
pub(crate) fn like_to_glob(pattern: &str) -> String {
    fn literal(out: &mut String, c: char) {
        match c {
            '*' | '?' | '[' => {
                out.push('[');
                out.push(c);
                out.push(']');
            }
            _ => out.push(c),
        }
    }
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '%' => out.push('*'),
            '_' => out.push('?'),
            '\\' => literal(&mut out, chars.next().unwrap_or('\\')),
            other => literal(&mut out, other),
        }
    }
    out
}

fn decode_error(what: &'static str, detail: impl ToString) -> StoreError {
    StoreError::Decode {
        what,
        detail: detail.to_string(),
    }
}

impl RowReader for SqliteRow {
    fn opt_text(&self, col: &'static str) -> StoreResult<Option<String>> {
        Ok(self.try_get(col)?)
    }

    fn opt_uuid(&self, col: &'static str) -> StoreResult<Option<Uuid>> {
        self.opt_text(col)?
            .map(|text| Uuid::parse_str(&text).map_err(|e| decode_error(col, e)))
            .transpose()
    }

    fn opt_ts(&self, col: &'static str) -> StoreResult<Option<DateTime<Utc>>> {
        self.opt_text(col)?
            .map(|text| {
                DateTime::parse_from_rfc3339(&text)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|e| decode_error(col, format!("{e}: {text:?}")))
            })
            .transpose()
    }

    fn opt_json_value(&self, col: &'static str) -> StoreResult<Option<serde_json::Value>> {
        self.opt_text(col)?
            .map(|text| serde_json::from_str(&text).map_err(|e| decode_error(col, e)))
            .transpose()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns_become_equivalent_globs() {
        assert_eq!(like_to_glob("%rack%"), "*rack*");
        assert_eq!(like_to_glob("a_b"), "a?b");
        assert_eq!(like_to_glob("x*y?[z]"), "x[*]y[?][[]z]");
        assert_eq!(like_to_glob(r"100\%\_\\"), r"100%_\");
        assert_eq!(like_to_glob(r"trailing\"), r"trailing\");
    }

    #[test]
    fn timestamps_have_fixed_width_text() {
        let t = DateTime::parse_from_rfc3339("2024-05-01T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(format_ts(t), "2024-05-01T10:00:00.000000Z");
        let later = t + chrono::Duration::microseconds(7);
        assert_eq!(format_ts(later), "2024-05-01T10:00:00.000007Z");
        assert!(format_ts(t) < format_ts(later));
    }
}

#[cfg(test)]
mod placeholder_tests {
    use super::*;

    fn text(sql: &Sql) -> &str {
        &sql.text
    }

    #[test]
    fn placeholders_become_positional_in_occurrence_order() {
        let sql = Sql::new("INSERT INTO t VALUES ($1, $2, $10, $2), ($11, '$1', '$.a')")
            .arg(1)
            .arg(2)
            .arg(3)
            .arg(4)
            .arg(5)
            .arg(6)
            .arg(7)
            .arg(8)
            .arg(9)
            .arg(10)
            .arg(11);
        let out = positional(sql);
        assert_eq!(
            text(&out),
            "INSERT INTO t VALUES (?, ?, ?, ?), (?, '$1', '$.a')"
        );
        assert_eq!(
            out.args,
            [
                Arg::I32(1),
                Arg::I32(2),
                Arg::I32(10),
                Arg::I32(2),
                Arg::I32(11)
            ]
        );
    }

    #[test]
    fn text_without_placeholders_is_untouched() {
        let out = positional(Sql::new("SELECT json_extract(a, '$.b') FROM t WHERE x = $9").arg(1));
        assert_eq!(
            text(&out),
            "SELECT json_extract(a, '$.b') FROM t WHERE x = $9"
        );
        assert!(out.args.is_empty());
        let out = positional(Sql::new("SELECT 1"));
        assert_eq!(text(&out), "SELECT 1");
    }
}
