//! PostgreSQL for tests that need more than a database on the shared
//! server:
//!
//! - [`PgInstance`]: a private PostgreSQL server (`initdb` + `pg_ctl` from
//!   the machine's binaries, the highest version under
//!   `/usr/lib/postgresql/*/bin`) in a fresh temp dir on a free loopback
//!   port, with trust auth and a database `rackflow` — one a test may stop
//!   and start again (an outage) without disturbing the shared server other
//!   tests use. Missing binaries fail the test (never a silent skip).
//! - [`PgDatabase`]: a fresh database with a unique name on a given server
//!   (e.g. the shared one), dropped `WITH (FORCE)` on drop.
//!
//! Run as root (as in the CI containers), `initdb` refuses to work: the
//! server binaries then run as user `postgres` (`runuser -u postgres --`)
//! on a temp dir chowned to it.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sqlx::{Connection, Executor, PgConnection};
use uuid::Uuid;

/// Where Debian/Ubuntu's `postgresql` package puts the server binaries.
const PG_LIB: &str = "/usr/lib/postgresql";

/// The system user the server runs as when the tests run as root.
const PG_OS_USER: &str = "postgres";

/// Longest `pg_ctl` waits for a start or a stop.
const PG_CTL_WAIT_SECS: &str = "60";

/// A private PostgreSQL server for one test; stopped (immediately) and its
/// directory removed on drop.
pub struct PgInstance {
    /// The temp dir: `data/` (the cluster), `socket/`, `server.log`.
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    /// Run the server binaries as [`PG_OS_USER`] (we are root).
    as_postgres: bool,
    running: bool,
}

impl PgInstance {
    /// `initdb` into a fresh temp dir, `pg_ctl start` on a free
    /// 127.0.0.1 port (unix socket inside the temp dir, `fsync=off`), trust
    /// auth, and `CREATE DATABASE rackflow`. Panics (also outside CI) when
    /// the PostgreSQL server binaries are not installed.
    pub fn start() -> PgInstance {
        let bin = server_bin_dir();
        let as_postgres = effective_uid_is_root();
        let dir = std::env::temp_dir().join(format!("rackflow-pg-{}", Uuid::new_v4().simple()));
        std::fs::create_dir_all(dir.join("socket"))
            .unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let mut instance = PgInstance {
            dir,
            bin,
            port: free_port(),
            as_postgres,
            running: false,
        };
        if as_postgres {
            let dir = instance.dir.display().to_string();
            checked(
                Command::new("chown").args(["-R", &format!("{PG_OS_USER}:"), &dir]),
                "chown the PostgreSQL temp dir",
            );
        }
        let data = instance.data_dir().display().to_string();
        checked(
            &mut instance.server_command(
                "initdb",
                &[
                    "-D",
                    &data,
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ],
            ),
            "initdb",
        );
        // Settings in the cluster's own file, so that a start again after
        // a stop uses the same port and socket.
        let settings = format!(
            "\n# rackflow test instance\nport = {}\nlisten_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{}'\nfsync = off\nsynchronous_commit = off\n\
             full_page_writes = off\nmax_connections = 200\n",
            instance.port,
            instance.dir.join("socket").display()
        );
        let conf = instance.data_dir().join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf)
            .unwrap_or_else(|e| panic!("read {}: {e}", conf.display()));
        text.push_str(&settings);
        std::fs::write(&conf, text).unwrap_or_else(|e| panic!("write {}: {e}", conf.display()));

        instance.pg_ctl_start();
        let admin = instance.admin_url();
        block_on(async move {
            let mut conn = PgConnection::connect(&admin)
                .await
                .unwrap_or_else(|e| panic!("connect to the test PostgreSQL instance: {e}"));
            conn.execute("CREATE DATABASE rackflow")
                .await
                .expect("create database rackflow");
            conn.close().await.ok();
        });
        instance
    }

    /// `postgres://postgres@127.0.0.1:PORT/rackflow`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/rackflow", self.port)
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's log (for failure messages).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.log_file()).unwrap_or_default()
    }

    /// `pg_ctl stop -m fast`, waiting until the server is down.
    pub fn stop(&mut self) {
        assert!(self.running, "the PostgreSQL instance is not running");
        let data = self.data_dir().display().to_string();
        checked(
            &mut self.server_command(
                "pg_ctl",
                &[
                    "stop",
                    "-D",
                    &data,
                    "-m",
                    "fast",
                    "-w",
                    "-t",
                    PG_CTL_WAIT_SECS,
                ],
            ),
            "pg_ctl stop",
        );
        self.running = false;
    }

    /// Starts the stopped server again: same directory, same port.
    pub fn start_again(&mut self) {
        assert!(!self.running, "the PostgreSQL instance is already running");
        self.pg_ctl_start();
    }

    fn pg_ctl_start(&mut self) {
        let data = self.data_dir().display().to_string();
        let log = self.log_file().display().to_string();
        let started = Instant::now();
        checked(
            &mut self.server_command(
                "pg_ctl",
                &[
                    "start",
                    "-D",
                    &data,
                    "-l",
                    &log,
                    "-w",
                    "-t",
                    PG_CTL_WAIT_SECS,
                ],
            ),
            "pg_ctl start",
        );
        self.running = true;
        // `-w` waited for the server to accept connections on its socket;
        // make sure TCP answers too.
        let admin = self.admin_url();
        block_on(async move {
            loop {
                match PgConnection::connect(&admin).await {
                    Ok(conn) => {
                        conn.close().await.ok();
                        return;
                    }
                    Err(e) => {
                        assert!(
                            started.elapsed() < Duration::from_secs(30),
                            "the test PostgreSQL instance does not accept connections: {e}"
                        );
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        });
    }

    fn admin_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log_file(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// A server binary (`initdb`, `pg_ctl`), as [`PG_OS_USER`] when we are
    /// root.
    fn server_command(&self, program: &str, args: &[&str]) -> Command {
        let program = self.bin.join(program);
        let mut cmd = if self.as_postgres {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", PG_OS_USER, "--"]).arg(&program);
            cmd
        } else {
            Command::new(&program)
        };
        cmd.args(args)
            // A server started by pg_ctl inherits these pipes: never let
            // it hold ours open.
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .current_dir(&self.dir);
        cmd
    }
}

impl Drop for PgInstance {
    fn drop(&mut self) {
        if self.running {
            let data = self.data_dir().display().to_string();
            let _ = self
                .server_command(
                    "pg_ctl",
                    &[
                        "stop",
                        "-D",
                        &data,
                        "-m",
                        "immediate",
                        "-w",
                        "-t",
                        PG_CTL_WAIT_SECS,
                    ],
                )
                .output();
            self.running = false;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh database `rackflow_c_<uuid>` on the server of `admin_url` (any
/// database of it), dropped `WITH (FORCE)` on drop.
pub struct PgDatabase {
    admin_url: String,
    name: String,
    url: String,
}

impl PgDatabase {
    /// Creates the database; panics naming the server when it cannot.
    pub fn create(admin_url: &str) -> PgDatabase {
        let name = format!("rackflow_c_{}", Uuid::new_v4().simple());
        let admin = admin_url.to_string();
        let create = format!("CREATE DATABASE \"{name}\"");
        block_on(async move {
            let mut conn = PgConnection::connect(&admin).await.unwrap_or_else(|e| {
                panic!(
                    "connect to PostgreSQL for a test database ({}): {e} — is a PostgreSQL \
                     server running there (trust auth for user postgres)?",
                    redact(&admin)
                )
            });
            conn.execute(create.as_str())
                .await
                .expect("create test database");
            conn.close().await.ok();
        });
        PgDatabase {
            url: crate::db::with_database(admin_url, &name),
            admin_url: admin_url.to_string(),
            name,
        }
    }

    /// The URL of the test database.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let admin = self.admin_url.clone();
        let drop_db = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        let name = self.name.clone();
        block_on(async move {
            match PgConnection::connect(&admin).await {
                Ok(mut conn) => {
                    if let Err(e) = conn.execute(drop_db.as_str()).await {
                        eprintln!("could not drop test database {name}: {e}");
                    }
                    conn.close().await.ok();
                }
                Err(e) => eprintln!("could not drop test database {name}: {e}"),
            }
        });
    }
}

/// The shared PostgreSQL server's admin URL: `DATABASE_URL` when set, else
/// `postgres://postgres@127.0.0.1:5432/postgres`.
pub fn shared_server_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_string())
}

/// The URL without its password (for messages).
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}<credentials>{}", &url[..s + 3], &url[at..]),
        _ => url.to_string(),
    }
}

/// The `bin` dir of the highest PostgreSQL version installed under
/// `/usr/lib/postgresql`; panics with how to install it when there is none.
pub fn server_bin_dir() -> PathBuf {
    let mut versions: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir(PG_LIB)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let version: Option<Vec<u32>> = name.split('.').map(|p| p.parse().ok()).collect();
            let bin = entry.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("pg_ctl").is_file())
                .then_some(())
                .and(version.map(|v| (v, bin)))
        })
        .collect();
    versions.sort();
    match versions.pop() {
        Some((_, bin)) => bin,
        None => {
            let why = if std::env::var_os("CI").is_some() {
                "CI is set: this test may not be skipped"
            } else {
                "this test is never skipped silently"
            };
            panic!(
                "PostgreSQL server binaries (initdb, pg_ctl) not found under \
                 {PG_LIB}/*/bin — {why}. Install them: `apt-get install postgresql`"
            )
        }
    }
}

/// Whether we run as root (the effective uid in `/proc/self/status`).
fn effective_uid_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

/// A free loopback port (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a free port")
}

/// Runs `cmd`; panics with its output unless it succeeded.
fn checked(cmd: &mut Command, what: &str) -> Output {
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: could not run {cmd:?}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}): {cmd:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Runs `future` on a runtime of its own on another thread: callable from
/// synchronous tests, from `Drop`, and from inside a test's runtime.
fn block_on<T: Send + 'static>(future: impl Future<Output = T> + Send + 'static) -> T {
    let worker = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(future)
    });
    match worker.join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
