//! The store's one error type.

/// What can go wrong in the store. Messages are operator-readable and never
/// contain connection secrets.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A unique constraint refused the write; the text names the field.
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// A row that must exist does not.
    #[error("{0} not found")]
    NotFound(String),
    /// Stored data could not be decoded (corrupt JSON, unknown enum text…).
    #[error("decode {what}: {detail}")]
    Decode { what: &'static str, detail: String },
    /// A domain value could not be encoded for storage (JSON columns).
    #[error("encode {what}: {detail}")]
    Encode { what: &'static str, detail: String },
    /// The database cannot be opened by this process (SQLite: another
    /// process holds the file).
    #[error("database locked: {0}")]
    Locked(String),
    #[error("migrate database: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// A write handed to a shared writer (a group commit) got no answer:
    /// like a lost connection, it may or may not have been applied.
    #[error("write interrupted: {0}")]
    Interrupted(String),
}

impl StoreError {
    /// The database could not be reached or is shutting down (connection
    /// lost or refused, pool timed out, PostgreSQL's connection-exception
    /// and shutdown codes, SQLite still busy after its timeout): the same
    /// request may succeed later, and a write may or may not have been
    /// applied.
    pub fn is_unavailable(&self) -> bool {
        let e = match self {
            StoreError::Database(e) => e,
            StoreError::Interrupted(_) => return true,
            _ => return false,
        };
        match e {
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::WorkerCrashed => true,
            sqlx::Error::Database(db) => db.code().is_some_and(|code| {
                code.starts_with("08")
                    || matches!(
                        code.as_ref(),
                        // admin_shutdown, crash_shutdown, cannot_connect_now;
                        // SQLITE_BUSY and its extended codes.
                        "57P01" | "57P02" | "57P03" | "5" | "261" | "517"
                    )
            }),
            _ => false,
        }
    }
}

impl StoreError {
    /// The database refused a value the caller sent: a text longer than
    /// its column allows, a NUL character or an escape PostgreSQL cannot
    /// store, an index entry over its size limit, a CHECK constraint
    /// (SQLite's length checks). The caller's error, not the server's.
    pub fn is_rejected_value(&self) -> bool {
        let StoreError::Database(sqlx::Error::Database(db)) = self else {
            return false;
        };
        db.code().is_some_and(|code| {
            // PostgreSQL: data exceptions (22xxx), check_violation,
            // program_limit_exceeded (index row too large); SQLite:
            // SQLITE_CONSTRAINT_CHECK, SQLITE_TOOBIG.
            code.starts_with("22") || matches!(code.as_ref(), "23514" | "54000" | "275" | "18")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::StoreError;

    #[test]
    fn lost_connections_are_unavailable_and_bad_data_is_not() {
        assert!(StoreError::Database(sqlx::Error::PoolTimedOut).is_unavailable());
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert!(StoreError::Database(sqlx::Error::Io(io)).is_unavailable());
        assert!(!StoreError::Database(sqlx::Error::RowNotFound).is_unavailable());
        assert!(!StoreError::NotFound("rack 1".into()).is_unavailable());
        assert!(
            !StoreError::Decode {
                what: "task",
                detail: "bad".into()
            }
            .is_unavailable()
        );
    }
}
