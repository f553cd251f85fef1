//! The database a test runs on: a SQLite file under the temp dir, or a fresh
//! PostgreSQL database on the server of `DATABASE_URL`, each removed when
//! its guard drops (also when the test panics).
//!
//! Without `DATABASE_URL` the PostgreSQL variant prints a loud "skipped" line
//! and passes, unless `CI` is set: then it fails, so CI cannot go green
//! without PostgreSQL.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use rackflow_store::DbTarget;
use sqlx::{Connection, Executor, PgConnection};
use uuid::Uuid;

/// Which store a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// `DATABASE_URL`, or `None` to skip; panics when `CI` is set without it.
pub fn database_url() -> Option<String> {
    match std::env::var("DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("DATABASE_URL is unset but CI is set: the PostgreSQL tests may not be skipped")
        }
        _ => {
            // Straight to stderr: libtest captures `eprintln!`, and a skip
            // must be seen.
            let _ = writeln!(
                std::io::stderr(),
                "=== skipped: DATABASE_URL unset — PostgreSQL variant NOT run ==="
            );
            None
        }
    }
}

/// Replaces the database name of a PostgreSQL URL (keeping its query).
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..].find('/').map(|i| i + scheme_end);
    let host = match path_start {
        Some(i) => &base[..i],
        None => base,
    };
    match query {
        Some(q) => format!("{host}/{name}?{q}"),
        None => format!("{host}/{name}"),
    }
}

/// A database for one test, removed on drop.
pub struct TestDatabase {
    target: DbTarget,
    cleanup: Option<Cleanup>,
}

enum Cleanup {
    SqliteFile(PathBuf),
    PgDatabase { admin_url: String, name: String },
}

impl TestDatabase {
    /// A fresh database of `backend`; `None` when the PostgreSQL variant is
    /// skipped (see [`database_url`]).
    pub async fn create(backend: Backend) -> Option<TestDatabase> {
        match backend {
            Backend::Sqlite => Some(TestDatabase::sqlite()),
            Backend::Postgres => TestDatabase::postgres().await,
        }
    }

    /// A path under the temp dir; the file is created by whoever opens it.
    pub fn sqlite() -> TestDatabase {
        let path = std::env::temp_dir().join(format!("rackflow-test-{}.db", Uuid::new_v4()));
        TestDatabase {
            target: DbTarget::Sqlite(path.clone()),
            cleanup: Some(Cleanup::SqliteFile(path)),
        }
    }

    /// `CREATE DATABASE rackflow_t_<uuid>` on the server of `DATABASE_URL`.
    pub async fn postgres() -> Option<TestDatabase> {
        let admin_url = database_url()?;
        let name = format!("rackflow_t_{}", Uuid::new_v4().simple());
        let mut conn = PgConnection::connect(&admin_url)
            .await
            .expect("connect to DATABASE_URL");
        conn.execute(format!("CREATE DATABASE \"{name}\"").as_str())
            .await
            .expect("create test database");
        conn.close().await.ok();
        Some(TestDatabase {
            target: DbTarget::Postgres(with_database(&admin_url, &name)),
            cleanup: Some(Cleanup::PgDatabase { admin_url, name }),
        })
    }

    pub fn target(&self) -> &DbTarget {
        &self.target
    }

    /// The SQLite file, if this is one.
    pub fn sqlite_path(&self) -> Option<&Path> {
        match &self.target {
            DbTarget::Sqlite(path) => Some(path),
            DbTarget::Postgres(_) => None,
        }
    }

    /// The PostgreSQL URL of the test database, if this is one.
    pub fn postgres_url(&self) -> Option<&str> {
        match &self.target {
            DbTarget::Postgres(url) => Some(url),
            DbTarget::Sqlite(_) => None,
        }
    }

    /// Removes the database now (close the pools on it first).
    pub async fn remove(mut self) {
        if let Some(cleanup) = self.cleanup.take() {
            cleanup.run().await;
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let Some(cleanup) = self.cleanup.take() {
            cleanup.run_blocking();
        }
    }
}

impl Cleanup {
    async fn run(self) {
        match self {
            Cleanup::SqliteFile(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let mut file = path.clone().into_os_string();
                    file.push(suffix);
                    std::fs::remove_file(file).ok();
                }
            }
            Cleanup::PgDatabase { admin_url, name } => {
                // FORCE ends connections a panicking test left open.
                let drop_db = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
                match PgConnection::connect(&admin_url).await {
                    Ok(mut conn) => {
                        if let Err(e) = conn.execute(drop_db.as_str()).await {
                            eprintln!("could not drop test database {name}: {e}");
                        }
                        conn.close().await.ok();
                    }
                    Err(e) => eprintln!("could not drop test database {name}: {e}"),
                }
            }
        }
    }

    /// Cleanup from `Drop`: on a thread with its own runtime, since the
    /// test's runtime (if any) cannot be blocked on from here.
    fn run_blocking(self) {
        let worker = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("cleanup runtime");
            runtime.block_on(self.run());
        });
        worker.join().ok();
    }
}

/// Runs async test bodies `async fn name(backend: Backend)` once per store:
/// `sqlite::name` and `postgres::name`, on a two-thread runtime.
#[macro_export]
macro_rules! both_stores {
    ($($name:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::Backend::Sqlite).await;
                }
            )+
        }
        mod postgres {
            $(
                #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::Backend::Postgres).await;
                }
            )+
        }
    };
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn with_database_replaces_only_the_path() {
        assert_eq!(
            with_database("postgres://u@h:5432/postgres?sslmode=disable", "t1"),
            "postgres://u@h:5432/t1?sslmode=disable"
        );
        assert_eq!(with_database("postgres://u@h", "t2"), "postgres://u@h/t2");
    }
}
