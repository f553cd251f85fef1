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
}
