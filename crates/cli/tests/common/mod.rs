//! Shared by the end-to-end test files: a real flow server in-process on a
//! free loopback port with a temporary SQLite file, and a runner for the
//! built `rackflow` binary.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rackflow_store::DbTarget;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Longest any one CLI invocation may take.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

pub fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "rackflow-cli-e2e-{}-{}-{name}",
        std::process::id(),
        uuid::Uuid::new_v4()
    ))
}

/// A flow server on its own runtime thread; stopped on drop.
pub struct Server {
    pub addr: SocketAddr,
    shutdown: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
    db: PathBuf,
}

impl Server {
    pub fn start() -> Server {
        let db = temp_path("flow.db");
        let shutdown = CancellationToken::new();
        let (tx, rx) = mpsc::channel();
        let token = shutdown.clone();
        let db_path = db.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind");
                let addr = listener.local_addr().expect("addr");
                let store = rackflow_store::open_store(&DbTarget::Sqlite(db_path))
                    .await
                    .expect("open store");
                let config = rackflow_server::Config {
                    listen: addr,
                    shutdown_grace_secs: 1,
                    ..Default::default()
                };
                tx.send(addr).expect("send addr");
                rackflow_server::serve_on(config, store, listener, token)
                    .await
                    .expect("serve");
            });
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("server did not start");
        Server {
            addr,
            shutdown,
            thread: Some(thread),
            db,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.db.display()));
        }
    }
}

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
