//! Waits that follow events, each with a deadline and a panic that names
//! what it waited for and the state last seen:
//!
//! - [`wait_run`]: an operation run, through its `WatchOperationRun`
//!   stream (the server sends the run on every change);
//! - [`Waiter`](crate::changes::Waiter): anything the flow server reads
//!   from its store, re-read after each store write;
//! - [`Lines`] and [`wait_exit`]: a child process's output lines and its
//!   exit, each followed by a reader thread;
//! - [`wait_until`] / [`wait_until_blocking`]: a bounded retry, for what
//!   offers no event at all (a separate process's state, an emulator
//!   coming up, the rack manager's job status, the sim's call log).

use std::path::Path;
use std::time::{Duration, Instant};

use rackflow_api::v1 as pb;
use tokio_stream::StreamExt as _;

use crate::flow::ExtensionsClient;

/// Follows `WatchOperationRun` until `done` holds for the run, and returns
/// that run. Panics at `deadline`, or when the stream ends (the run became
/// terminal) without `done` holding, naming `what` and the run last seen.
pub async fn wait_run(
    client: &mut ExtensionsClient,
    id: &pb::Uuid,
    what: &str,
    deadline: Duration,
    mut done: impl FnMut(&pb::OperationRun) -> bool,
) -> pb::OperationRun {
    let give_up = tokio::time::Instant::now() + deadline;
    let mut stream = client
        .watch_operation_run(pb::WatchOperationRunRequest {
            id: Some(id.clone()),
        })
        .await
        .unwrap_or_else(|e| panic!("WatchOperationRun while waiting for {what}: {e}"))
        .into_inner();
    let mut last: Option<pb::OperationRun> = None;
    loop {
        match tokio::time::timeout_at(give_up, stream.next()).await {
            Ok(Some(Ok(run))) => {
                if done(&run) {
                    return run;
                }
                last = Some(run);
            }
            Ok(Some(Err(status))) => {
                panic!("WatchOperationRun failed while waiting for {what}: {status}")
            }
            Ok(None) => panic!(
                "run became terminal without {what}; run is {}",
                describe_run(last.as_ref())
            ),
            Err(_) => panic!(
                "timed out after {deadline:?} waiting for {what}; run is {}",
                describe_run(last.as_ref())
            ),
        }
    }
}

fn describe_run(run: Option<&pb::OperationRun>) -> String {
    match run {
        None => "not seen".to_owned(),
        Some(run) => {
            let summary = run.summary.as_ref();
            let state = summary.and_then(|s| s.state);
            format!(
                "{:?}/{:?} {:?} stats {:?}",
                state.map(|s| s.status()),
                state.map(|s| s.reason()),
                summary.map(|s| s.status_message.as_str()),
                run.stats
            )
        }
    }
}

/// Retries `probe` every `every` until it gives `Some`, for a separate
/// process that offers nothing to follow; panics at `deadline` naming
/// `what` and what `state` says.
pub fn wait_until_blocking<T>(
    what: &str,
    deadline: Duration,
    every: Duration,
    mut probe: impl FnMut() -> Option<T>,
    state: impl Fn() -> String,
) -> T {
    let give_up = Instant::now() + deadline;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(
            Instant::now() < give_up,
            "timed out after {deadline:?} waiting for {what}; {}",
            state()
        );
        std::thread::sleep(every);
    }
}

/// [`wait_until_blocking`] for async probes (an emulator answering HTTP).
pub async fn wait_until<T, F: Future<Output = Option<T>>>(
    what: &str,
    deadline: Duration,
    every: Duration,
    mut probe: impl FnMut() -> F,
    state: impl Fn() -> String,
) -> T {
    let give_up = tokio::time::Instant::now() + deadline;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "timed out after {deadline:?} waiting for {what}; {}",
            state()
        );
        tokio::time::sleep(every).await;
    }
}

/// Waits for `child` to exit — a thread blocked in `wait` reports it, so
/// nothing polls — and returns its status; at `deadline` kills it (SIGKILL)
/// and panics naming `what` and what `state` says.
pub fn wait_exit(
    child: std::process::Child,
    what: &str,
    deadline: Duration,
    state: impl Fn() -> String,
) -> std::process::ExitStatus {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut child = child;
        let _ = tx.send(child.wait());
    });
    match rx.recv_timeout(deadline) {
        Ok(status) => status.unwrap_or_else(|e| panic!("waiting for {what}: {e}")),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!(
                "timed out after {deadline:?} waiting for {what}; {}",
                state()
            )
        }
    }
}

/// The lines a child process writes, as they come: a reader thread
/// forwards each line, and [`Lines::wait_for`] follows them.
pub struct Lines {
    rx: std::sync::mpsc::Receiver<String>,
    seen: String,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Lines {
    /// Starts reading `source` (a child's piped stdout or stderr).
    pub fn follow(source: impl std::io::Read + Send + 'static) -> Lines {
        Lines::start(source, None)
    }

    /// [`Lines::follow`] that also appends every line to `log`. The reader
    /// drains `source` to its end even after this `Lines` is dropped, so a
    /// long-lived child never blocks on a full pipe.
    pub fn follow_into(source: impl std::io::Read + Send + 'static, log: &Path) -> Lines {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("open {}: {e}", log.display()));
        Lines::start(source, Some(file))
    }

    fn start(source: impl std::io::Read + Send + 'static, mut log: Option<std::fs::File>) -> Lines {
        use std::io::{BufRead as _, Write as _};
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(source).lines() {
                let Ok(line) = line else { break };
                if let Some(file) = log.as_mut() {
                    let _ = writeln!(file, "{line}");
                }
                // Nobody listening any more: keep draining into the log.
                if tx.send(line).is_err() && log.is_none() {
                    break;
                }
            }
        });
        Lines {
            rx,
            seen: String::new(),
            reader: Some(reader),
        }
    }

    /// Waits until the output so far contains `text`. Panics at `deadline`,
    /// or when the output ends first, with the output so far.
    pub fn wait_for(&mut self, text: &str, deadline: Duration) {
        let give_up = Instant::now() + deadline;
        while !self.seen.contains(text) {
            let remaining = give_up.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(remaining) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    self.seen.push('\n');
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!(
                    "timed out after {deadline:?} waiting for {text:?} in:\n{}",
                    self.seen
                ),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("output ended without {text:?}:\n{}", self.seen)
                }
            }
        }
    }

    /// The output so far.
    pub fn seen(&self) -> &str {
        &self.seen
    }

    /// Reads to the end (the writer has exited) and returns all output.
    /// (Not for [`Lines::follow_into`] on a child that keeps running.)
    pub fn finish(mut self) -> String {
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        while let Ok(line) = self.rx.try_recv() {
            self.seen.push_str(&line);
            self.seen.push('\n');
        }
        self.seen
    }
}
