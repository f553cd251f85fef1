//! Dialect-neutral SQL plumbing shared by both implementations: statements
//! with their arguments ([`Sql`], [`Arg`]), reading columns of a result row
//! ([`RowReader`]), paging clauses, and classification of constraint
//! violations into [`StoreError`]s.
//!
//! Statements use `$1, $2…` placeholders, which both PostgreSQL and
//! sqlx-sqlite accept. Arguments are kept as plain Rust values until a
//! backend binds them, because the two dialects encode UUIDs, timestamps and
//! JSON differently (see `sqlite.rs` / `postgres.rs`).

use chrono::{DateTime, SubsecRound, Utc};
use rackflow_domain::run::Page;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::{StoreError, StoreResult};

/// One statement argument, before dialect encoding. `None` binds SQL NULL
/// (typed, which PostgreSQL needs).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Arg {
    Text(Option<String>),
    Bool(bool),
    I32(i32),
    I64(i64),
    Uuid(Option<Uuid>),
    /// Always microsecond precision: see [`micros`].
    Ts(Option<DateTime<Utc>>),
    Json(Option<serde_json::Value>),
}

impl From<String> for Arg {
    fn from(v: String) -> Arg {
        Arg::Text(Some(v))
    }
}

impl From<&str> for Arg {
    fn from(v: &str) -> Arg {
        Arg::Text(Some(v.to_string()))
    }
}

impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Arg {
        Arg::Text(v)
    }
}

impl From<bool> for Arg {
    fn from(v: bool) -> Arg {
        Arg::Bool(v)
    }
}

impl From<i32> for Arg {
    fn from(v: i32) -> Arg {
        Arg::I32(v)
    }
}

impl From<i64> for Arg {
    fn from(v: i64) -> Arg {
        Arg::I64(v)
    }
}

impl From<Uuid> for Arg {
    fn from(v: Uuid) -> Arg {
        Arg::Uuid(Some(v))
    }
}

impl From<Option<Uuid>> for Arg {
    fn from(v: Option<Uuid>) -> Arg {
        Arg::Uuid(v)
    }
}

impl From<DateTime<Utc>> for Arg {
    fn from(v: DateTime<Utc>) -> Arg {
        Arg::Ts(Some(micros(v)))
    }
}

impl From<Option<DateTime<Utc>>> for Arg {
    fn from(v: Option<DateTime<Utc>>) -> Arg {
        Arg::Ts(v.map(micros))
    }
}

impl From<serde_json::Value> for Arg {
    fn from(v: serde_json::Value) -> Arg {
        Arg::Json(Some(v))
    }
}

impl From<Option<serde_json::Value>> for Arg {
    fn from(v: Option<serde_json::Value>) -> Arg {
        Arg::Json(v)
    }
}

/// Id lists are bound in chunks of this size, well below both dialects'
/// parameter limits (SQLite 32766, PostgreSQL 65535).
pub(crate) const ID_CHUNK: usize = 500;

/// Truncates to microseconds, the precision both dialects store, so a value
/// written and read back compares equal in either.
pub(crate) fn micros(t: DateTime<Utc>) -> DateTime<Utc> {
    t.trunc_subsecs(6)
}

/// The store's clock: now, at stored precision.
pub(crate) fn now() -> DateTime<Utc> {
    micros(Utc::now())
}

/// Empty text is stored as NULL (the reference's convention for optional
/// text, and what keeps empty external ids out of the unique indexes).
pub(crate) fn non_empty(v: &str) -> Option<String> {
    (!v.is_empty()).then(|| v.to_string())
}

/// [`non_empty`] for optional domain fields: `Some("")` is stored as NULL.
pub(crate) fn opt_non_empty(v: &Option<String>) -> Option<String> {
    v.as_deref().and_then(non_empty)
}

/// Serialises a domain value for a JSON column.
pub(crate) fn to_json<T: serde::Serialize>(
    what: &'static str,
    value: &T,
) -> StoreResult<serde_json::Value> {
    serde_json::to_value(value).map_err(|e| StoreError::Encode {
        what,
        detail: e.to_string(),
    })
}

/// Whether a statement writes (its first keyword is INSERT, UPDATE, DELETE
/// or REPLACE): such statements outside a transaction take the SQLite
/// write gate. The store's SQL never writes through a `WITH` prefix.
pub(crate) fn is_write(text: &str) -> bool {
    let keyword = text
        .trim_start()
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("");
    ["INSERT", "UPDATE", "DELETE", "REPLACE"]
        .iter()
        .any(|w| keyword.eq_ignore_ascii_case(w))
}

#[cfg(test)]
mod write_detection_tests {
    use super::is_write;

    #[test]
    fn statements_that_write_are_recognised() {
        for text in [
            "INSERT INTO task VALUES (1)",
            "  update task SET x = 1",
            "\nDELETE FROM rack",
            "REPLACE INTO t VALUES (1)",
        ] {
            assert!(is_write(text), "{text}");
        }
        for text in ["SELECT 1", "  select * from task", "", "UPDATED"] {
            assert!(!is_write(text), "{text}");
        }
    }
}

/// A statement and its arguments.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sql {
    pub text: String,
    pub args: Vec<Arg>,
}

impl Sql {
    pub fn new(text: impl Into<String>) -> Sql {
        Sql {
            text: text.into(),
            args: Vec::new(),
        }
    }

    /// Appends an argument for the next `$N` of a fixed statement.
    pub fn arg(mut self, arg: impl Into<Arg>) -> Sql {
        self.args.push(arg.into());
        self
    }

    /// Adds an argument and returns its placeholder, for built statements.
    pub fn bind(&mut self, arg: impl Into<Arg>) -> String {
        self.args.push(arg.into());
        format!("${}", self.args.len())
    }

    /// Binds every item and returns `($a, $b, …)` for an `IN` list. An empty
    /// list gives `(NULL)`, which matches nothing; callers treat empty
    /// filters before getting here.
    pub fn bind_list<A: Into<Arg>>(&mut self, items: impl IntoIterator<Item = A>) -> String {
        let placeholders: Vec<String> = items.into_iter().map(|a| self.bind(a)).collect();
        if placeholders.is_empty() {
            "(NULL)".to_string()
        } else {
            format!("({})", placeholders.join(", "))
        }
    }

    pub fn push(&mut self, text: &str) {
        self.text.push_str(text);
    }
}

/// `parts` joined by `joiner` (`AND`, `OR`) as a balanced tree of
/// parentheses, `((a OR b) OR (c OR d))`: a flat chain of n terms is an
/// expression tree n deep, and SQLite refuses one deeper than 1,000
/// (`SQLITE_MAX_EXPR_DEPTH`); balanced, 10,000 terms are 14 deep.
pub(crate) fn balanced_join(parts: &[String], joiner: &str) -> String {
    match parts {
        [] => "1 = 1".to_string(),
        [one] => one.clone(),
        many => {
            let (left, right) = many.split_at(many.len() / 2);
            format!(
                "({} {joiner} {})",
                balanced_join(left, joiner),
                balanced_join(right, joiner)
            )
        }
    }
}

/// `WHERE` conditions collected while building a filtered listing; the
/// listing's count and page statements share them (and their arguments).
#[derive(Debug, Default)]
pub(crate) struct Conditions {
    pub sql: Sql,
    parts: Vec<String>,
}

impl Conditions {
    pub fn add(&mut self, condition: String) {
        self.parts.push(condition);
    }

    /// ` WHERE a AND b`, or nothing when there are no conditions.
    pub fn where_clause(&self) -> String {
        if self.parts.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.parts.join(" AND "))
        }
    }

    /// `SELECT COUNT(*) AS n FROM <from> WHERE …`.
    pub fn count(&self, from: &str) -> Sql {
        Sql {
            text: format!("SELECT COUNT(*) AS n FROM {from}{}", self.where_clause()),
            args: self.sql.args.clone(),
        }
    }

    /// `SELECT <columns> FROM <from> WHERE … ORDER BY <order> LIMIT … OFFSET …`.
    pub fn page(&self, columns: &str, from: &str, order: &str, page: Page) -> Sql {
        Sql {
            text: format!(
                "SELECT {columns} FROM {from}{} ORDER BY {order} {}",
                self.where_clause(),
                page_clause(page)
            ),
            args: self.sql.args.clone(),
        }
    }
}

/// `LIMIT … OFFSET …` of a page. Limit 0 means unlimited (a negative limit
/// is treated the same, a negative offset as 0). SQLite needs a LIMIT to
/// accept an OFFSET, so "unlimited" is `i64::MAX` in both dialects. The
/// numbers are formatted integers, never caller text.
pub(crate) fn page_clause(page: Page) -> String {
    let limit = if page.limit <= 0 {
        i64::MAX
    } else {
        page.limit
    };
    format!("LIMIT {limit} OFFSET {}", page.offset.max(0))
}

/// Reads the columns of one result row; implemented per dialect for its row
/// type. Column names are `'static` so decode errors can name them.
pub(crate) trait RowReader: Send + Sync {
    fn opt_text(&self, col: &'static str) -> StoreResult<Option<String>>;
    fn opt_uuid(&self, col: &'static str) -> StoreResult<Option<Uuid>>;
    fn opt_ts(&self, col: &'static str) -> StoreResult<Option<DateTime<Utc>>>;
    fn opt_json_value(&self, col: &'static str) -> StoreResult<Option<serde_json::Value>>;
    fn bool(&self, col: &'static str) -> StoreResult<bool>;
    fn i32(&self, col: &'static str) -> StoreResult<i32>;
    fn i64(&self, col: &'static str) -> StoreResult<i64>;

    fn text(&self, col: &'static str) -> StoreResult<String> {
        required(col, self.opt_text(col)?)
    }

    fn uuid(&self, col: &'static str) -> StoreResult<Uuid> {
        required(col, self.opt_uuid(col)?)
    }

    fn ts(&self, col: &'static str) -> StoreResult<DateTime<Utc>> {
        required(col, self.opt_ts(col)?)
    }

    /// A JSON column decoded into a domain type.
    fn json<T: DeserializeOwned>(&self, col: &'static str) -> StoreResult<T>
    where
        Self: Sized,
    {
        let value = required(col, self.opt_json_value(col)?)?;
        from_json(col, value)
    }

    /// A nullable JSON column decoded into a domain type.
    fn opt_json<T: DeserializeOwned>(&self, col: &'static str) -> StoreResult<Option<T>>
    where
        Self: Sized,
    {
        self.opt_json_value(col)?
            .map(|value| from_json(col, value))
            .transpose()
    }
}

fn from_json<T: DeserializeOwned>(col: &'static str, value: serde_json::Value) -> StoreResult<T> {
    serde_json::from_value(value).map_err(|e| StoreError::Decode {
        what: col,
        detail: e.to_string(),
    })
}

/// Parses a stored enum name (`named_enum!` types and the like).
pub(crate) fn parse_named<T>(
    what: &'static str,
    text: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> StoreResult<T> {
    parse(text).ok_or_else(|| StoreError::Decode {
        what,
        detail: format!("unknown value {text:?}"),
    })
}

/// The key of a transaction-scoped advisory lock (PostgreSQL
/// `pg_advisory_xact_lock(bigint)`) for `scope` + `bytes`: 64-bit FNV-1a.
/// Stable across processes, versions and replicas, which all must compute
/// the same key for the same rack.
pub(crate) fn lock_key(scope: &str, bytes: &[u8]) -> i64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    for byte in scope.as_bytes().iter().chain([0u8].iter()).chain(bytes) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(PRIME);
    }
    hash as i64
}

fn required<T>(col: &'static str, value: Option<T>) -> StoreResult<T> {
    value.ok_or_else(|| StoreError::Decode {
        what: col,
        detail: "unexpected NULL".to_string(),
    })
}

/// A unique key a write can collide with. Each is known by its PostgreSQL
/// constraint / index name and by the column list SQLite names in its
/// `UNIQUE constraint failed: …` message (SQLite reports no constraint name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UniqueKey {
    RackId,
    RackExternalId,
    RackManufacturerSerial,
    ComponentId,
    ComponentTypeExternalId,
    BmcMac,
    RunId,
    TargetId,
    TargetRunRack,
    TargetRunSequence,
    TaskId,
    TaskIdempotencyKey,
    RuleId,
    RuleDefault,
    NvlDomainName,
    NvlDomainExternalId,
}

const UNIQUE_KEYS: &[(UniqueKey, &str, &str)] = &[
    (UniqueKey::RackId, "rack_pkey", "rack.id"),
    (
        UniqueKey::RackExternalId,
        "uq_rack_external_id",
        "rack.external_id",
    ),
    (
        UniqueKey::RackManufacturerSerial,
        "uq_rack_manufacturer_serial",
        "rack.manufacturer, rack.serial_number",
    ),
    (UniqueKey::ComponentId, "component_pkey", "component.id"),
    (
        UniqueKey::ComponentTypeExternalId,
        "uq_component_type_external_id",
        "component.type, component.external_id",
    ),
    (UniqueKey::BmcMac, "bmc_pkey", "bmc.mac_address"),
    (UniqueKey::RunId, "operation_run_pkey", "operation_run.id"),
    (
        UniqueKey::TargetId,
        "operation_run_target_pkey",
        "operation_run_target.id",
    ),
    (
        UniqueKey::TargetRunRack,
        "operation_run_target_operation_run_id_rack_id_key",
        "operation_run_target.operation_run_id, operation_run_target.rack_id",
    ),
    (
        UniqueKey::TargetRunSequence,
        "operation_run_target_operation_run_id_sequence_index_key",
        "operation_run_target.operation_run_id, operation_run_target.sequence_index",
    ),
    (UniqueKey::TaskId, "task_pkey", "task.id"),
    (
        UniqueKey::TaskIdempotencyKey,
        "uq_task_idempotency_key",
        "task.idempotency_key",
    ),
    (
        UniqueKey::RuleId,
        "operation_rules_pkey",
        "operation_rules.id",
    ),
    (
        UniqueKey::RuleDefault,
        "uq_operation_rules_default",
        "operation_rules.operation_type, operation_rules.operation_code",
    ),
    (
        UniqueKey::NvlDomainName,
        "uq_nvldomain_name",
        "nvldomain.name",
    ),
    (
        UniqueKey::NvlDomainExternalId,
        "uq_nvldomain_external_id",
        "nvldomain.external_id",
    ),
];

/// A constraint violation the store turns into a domain error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Violation {
    /// `None`: a unique violation of a key not in [`UNIQUE_KEYS`].
    Unique(Option<UniqueKey>),
    ForeignKey,
}

/// Classifies a failed write; `None` for anything that is not a unique or
/// foreign-key violation.
pub(crate) fn violation(err: &sqlx::Error) -> Option<Violation> {
    let db = err.as_database_error()?;
    match db.kind() {
        sqlx::error::ErrorKind::UniqueViolation => {
            let sqlite_columns = db.message().strip_prefix("UNIQUE constraint failed: ");
            let key = UNIQUE_KEYS.iter().find_map(|(key, pg_name, sqlite_cols)| {
                (db.constraint() == Some(*pg_name) || sqlite_columns == Some(*sqlite_cols))
                    .then_some(*key)
            });
            Some(Violation::Unique(key))
        }
        sqlx::error::ErrorKind::ForeignKeyViolation => Some(Violation::ForeignKey),
        _ => None,
    }
}

/// Maps a failed write: unique violations become
/// [`StoreError::AlreadyExists`] with the text `describe` gives for the key,
/// foreign-key violations [`StoreError::NotFound`] with `missing`, anything
/// else [`StoreError::Database`].
pub(crate) fn write_error(
    err: sqlx::Error,
    describe: impl FnOnce(Option<UniqueKey>) -> String,
    missing: impl FnOnce() -> String,
) -> StoreError {
    match violation(&err) {
        Some(Violation::Unique(key)) => StoreError::AlreadyExists(describe(key)),
        Some(Violation::ForeignKey) => StoreError::NotFound(missing()),
        None => StoreError::Database(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_number_in_bind_order() {
        let mut sql = Sql::new("SELECT 1");
        assert_eq!(sql.bind("a"), "$1");
        assert_eq!(sql.bind_list([1_i32, 2, 3]), "($2, $3, $4)");
        assert_eq!(sql.bind_list(Vec::<i32>::new()), "(NULL)");
        assert_eq!(sql.args.len(), 4);
    }

    #[test]
    fn limit_zero_is_unlimited_and_negative_offset_is_zero() {
        assert_eq!(
            page_clause(Page {
                offset: 5,
                limit: 0
            }),
            format!("LIMIT {} OFFSET 5", i64::MAX)
        );
        assert_eq!(
            page_clause(Page {
                offset: -1,
                limit: 10
            }),
            "LIMIT 10 OFFSET 0"
        );
    }

    #[test]
    fn timestamps_truncate_to_microseconds() {
        let t = DateTime::parse_from_rfc3339("2024-05-01T10:00:00.123456789Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(micros(t).timestamp_subsec_nanos(), 123_456_000);
        assert_eq!(Arg::from(t), Arg::Ts(Some(micros(t))));
    }

    #[test]
    fn lock_keys_are_stable_and_scoped() {
        let rack = Uuid::from_u128(0x1234);
        // Pinned: replicas of different builds must agree on the key.
        assert_eq!(
            lock_key("rack", rack.as_bytes()),
            -4_913_006_793_069_852_680
        );
        assert_ne!(
            lock_key("rack", rack.as_bytes()),
            lock_key("rule", rack.as_bytes())
        );
    }

    #[test]
    fn empty_text_is_null() {
        assert_eq!(non_empty(""), None);
        assert_eq!(opt_non_empty(&Some(String::new())), None);
        assert_eq!(opt_non_empty(&Some("x".into())), Some("x".into()));
    }
}
