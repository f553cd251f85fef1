//! Shared by the end-to-end test files: `rackflow serve` as a child process
//! (for kill -9) and a runner for the built `rackflow` binary — both need
//! this crate's binary. The in-process flow server is the test kit's.

#![allow(dead_code)]

pub mod cluster;
pub mod doc_script;
pub mod sim_log;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rackflow_testkit::wait::Lines;
use serde_json::Value;

/// What `rackflow serve` logs (at info) once it accepts connections.
pub const SERVE_LISTENING: &str = "flow server listening";

/// Longest any one CLI invocation may take.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

pub fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "rackflow-cli-e2e-{}-{}-{name}",
        std::process::id(),
        uuid::Uuid::new_v4()
    ))
}

/// A flow server in-process on its own runtime thread (the test kit's).
// Not every test file that includes this module starts one.
#[allow(unused_imports)]
pub use rackflow_testkit::flow::ThreadServer as Server;

pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn ok(self) -> Run {
        assert_eq!(
            self.code,
            Some(0),
            "command failed\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", self.stdout))
    }
}

/// Runs the binary with a deadline; `RACKFLOW_SERVER` and `DATABASE_URL` of
/// the environment are not passed on.
pub fn rackflow(server: Option<SocketAddr>, args: &[&str]) -> Run {
    rackflow_within(COMMAND_TIMEOUT, server, args)
}

/// [`rackflow`] with another deadline (for `task watch`).
pub fn rackflow_within(timeout: Duration, server: Option<SocketAddr>, args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rackflow"));
    if let Some(addr) = server {
        cmd.arg("--server").arg(addr.to_string());
    }
    cmd.args(args)
        .env_remove("RACKFLOW_SERVER")
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawn rackflow");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output: Output = rx
        .recv_timeout(timeout)
        .unwrap_or_else(|_| panic!("rackflow {args:?} did not finish in {timeout:?}"))
        .expect("wait rackflow");
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// A free loopback address (bound, then released: a tiny race with other
/// processes, fine for tests).
pub fn free_addr() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr")
}

/// `rackflow serve` as a child process, so that it can be killed with
/// SIGKILL and started again on the same database and port. Its stderr (the
/// logs) goes to a file; killed on drop.
pub struct ServeProcess {
    pub addr: SocketAddr,
    /// The SQLite file (`--db`); `None` when the configuration file names
    /// a PostgreSQL URL ([`ServeProcess::start_postgres`]).
    pub db: Option<PathBuf>,
    pub config: PathBuf,
    pub log: PathBuf,
    /// The configuration file was written here (and is removed on drop).
    owns_config: bool,
    child: Option<ServeChild>,
}

impl ServeProcess {
    /// Starts `rackflow serve --listen ADDR --db DB --config CONFIG` and
    /// waits until it answers `rackflow version`.
    pub fn start(addr: SocketAddr, db: &Path, config: &Path) -> ServeProcess {
        let mut server = ServeProcess {
            addr,
            db: Some(db.to_path_buf()),
            config: config.to_path_buf(),
            log: temp_path("serve.log"),
            owns_config: false,
            child: None,
        };
        server.spawn();
        server
    }

    /// Starts `rackflow serve --listen ADDR --config CONFIG` on PostgreSQL:
    /// CONFIG is `config` (TOML without a `[database]` table) followed by
    /// `[database] url = "URL"` — in the file, not in the environment
    /// (`DATABASE_URL` is removed on purpose). Waits until it answers.
    pub fn start_postgres(addr: SocketAddr, url: &str, config: &str) -> ServeProcess {
        let file = temp_path("serve-pg.toml");
        std::fs::write(&file, postgres_config(config, url)).expect("write serve config");
        let mut server = ServeProcess {
            addr,
            db: None,
            config: file,
            log: temp_path("serve.log"),
            owns_config: true,
            child: None,
        };
        server.spawn();
        server
    }

    /// The process id (0 once killed).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, ServeChild::id)
    }

    /// Whether the process is running (not killed).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    fn spawn(&mut self) {
        self.child = Some(ServeChild::start(
            self.addr,
            self.db.as_deref(),
            &self.config,
            "info",
            &self.log,
        ));
        rackflow_within(Duration::from_secs(10), Some(self.addr), &["version"]).ok();
    }

    /// SIGKILL (no shutdown at all), and wait for the process to be gone.
    pub fn kill9(&mut self) {
        if let Some(child) = self.child.take() {
            child.kill();
        }
    }

    /// Starts the server again on the same database, configuration and port.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "kill the server first");
        self.spawn();
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        self.kill9();
        if let Some(db) = &self.db {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
            }
        }
        if self.owns_config {
            let _ = std::fs::remove_file(&self.config);
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

/// `rackflow serve --listen ADDR [--db DB] --config CONFIG` as a child
/// process, started once its log says it listens (an exit before that
/// fails the wait with the log). It may serve TLS: it does not probe with a
/// plaintext call (see [`ServeProcess`] for that). Its log (at `rust_log`)
/// is appended to `log`; killed on drop, also when the start fails.
pub struct ServeChild {
    child: Child,
}

impl ServeChild {
    pub fn start(
        addr: SocketAddr,
        db: Option<&Path>,
        config: &Path,
        rust_log: &str,
        log: &Path,
    ) -> ServeChild {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rackflow"));
        cmd.args(["serve", "--listen", &addr.to_string()]);
        if let Some(db) = db {
            cmd.arg("--db").arg(db);
        }
        let mut child = cmd
            .arg("--config")
            .arg(config)
            .env_remove("RACKFLOW_SERVER")
            .env_remove("DATABASE_URL")
            .env_remove("RACKFLOW_LISTEN")
            .env_remove("RACKFLOW_DB")
            .env("RUST_LOG", rust_log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn rackflow serve");
        let stderr = child.stderr.take().expect("piped stderr");
        // Owned before the wait: a start that fails still kills the process.
        let served = ServeChild { child };
        Lines::follow_into(stderr, log).wait_for(SERVE_LISTENING, Duration::from_secs(20));
        served
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill(mut self) {
        self.child.kill().expect("kill -9 rackflow serve");
        let _ = self.child.wait();
    }
}

impl Drop for ServeChild {
    fn drop(&mut self) {
        // Already gone after `kill`: the error is expected and ignored.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `config` (TOML without a `[database]` table) with `[database] url`
/// appended (a TOML basic string: `\\` and `"` escaped).
pub fn postgres_config(config: &str, url: &str) -> String {
    let quoted = url.replace('\\', "\\\\").replace('"', "\\\"");
    format!("{config}\n[database]\nurl = \"{quoted}\"\n")
}

/// A firmware-upgrade rule definition (YAML) like the built-in one —
/// compute trays, then NVLink switch trays — but polling the simulated
/// update every `poll` instead of every two minutes, with `attempts`
/// attempts per step.
pub fn fast_firmware_rule(poll: &str, attempts: u32) -> String {
    r"version: v1
steps:
  - component_type: compute
    stage: 1
    timeout: 5m
    retry: {max_attempts: ATTEMPTS, initial_interval: 1s}
    main_operation: {name: FirmwareControl, parameters: {poll_interval: POLL, poll_timeout: 5m}}
  - component_type: nvswitch
    stage: 2
    timeout: 5m
    retry: {max_attempts: ATTEMPTS, initial_interval: 1s}
    main_operation: {name: FirmwareControl, parameters: {poll_interval: POLL, poll_timeout: 5m}}
"
    .replace("POLL", poll)
    .replace("ATTEMPTS", &attempts.to_string())
}

/// Generates a fleet of `racks` racks and imports it through the binary.
pub fn import_fleet(server: Option<SocketAddr>, racks: u32) {
    import_generated_fleet(server, racks);
}

/// [`import_fleet`] that returns the generated fleet (`fleet generate`'s
/// JSON: `racks[].components[]` with `type` and `external_id`).
pub fn import_generated_fleet(server: Option<SocketAddr>, racks: u32) -> Value {
    let generated = rackflow(
        None,
        &[
            "fleet",
            "generate",
            "--racks",
            &racks.to_string(),
            "--seed",
            "5",
        ],
    )
    .ok();
    let file = temp_path("fleet.json");
    std::fs::write(&file, &generated.stdout).expect("write fleet file");
    rackflow(server, &["fleet", "import", path_str(&file)]).ok();
    std::fs::remove_file(&file).ok();
    generated.json()
}

/// Makes [`fast_firmware_rule`] without retries the default
/// firmware-upgrade rule.
pub fn create_fast_default_rule(server: Option<SocketAddr>, poll: &str) {
    create_fast_default_rule_with(server, poll, 1);
}

/// Makes [`fast_firmware_rule`] with `attempts` per step the default
/// firmware-upgrade rule.
pub fn create_fast_default_rule_with(server: Option<SocketAddr>, poll: &str, attempts: u32) {
    let file = temp_path("rule.yaml");
    std::fs::write(&file, fast_firmware_rule(poll, attempts)).expect("write rule file");
    rackflow(
        server,
        &[
            "rule",
            "create",
            "--name",
            "fast-firmware",
            "--type",
            "firmware_control",
            "--code",
            "upgrade",
            "--definition",
            path_str(&file),
            "--default",
        ],
    )
    .ok();
    std::fs::remove_file(&file).ok();
}
