//! Runs and replicas through the CLI, for the real-process cluster tests:
//! creating a run, reading it and its targets, waiting until it is
//! terminal, and the replicas' logs for failure messages.

// A failed command is the test's failure report.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use rackflow_testkit::wait::wait_until_blocking;
use serde_json::Value;

use super::sim_log::SimLog;
use super::{ServeProcess, rackflow};

/// The external ids of the generated fleet's components of `types` (as
/// `fleet generate` names them).
pub fn components_of(fleet: &Value, types: &[&str]) -> BTreeSet<String> {
    fleet["racks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["components"].as_array().unwrap().iter())
        .filter(|c| types.contains(&c["type"].as_str().unwrap_or("")))
        .map(|c| c["external_id"].as_str().unwrap().to_string())
        .collect()
}

pub fn create_run(s: Option<SocketAddr>, name: &str, max_concurrent: u32) -> String {
    let run = rackflow(
        s,
        &[
            "run",
            "create",
            "--name",
            name,
            "--percentage",
            "100",
            "--max-concurrent",
            &max_concurrent.to_string(),
            "--failure-rate",
            "50:cumulative",
            "--seed",
            name,
            "--ordering-seed",
            name,
        ],
    )
    .ok()
    .stdout
    .trim()
    .to_string();
    assert_eq!(run.len(), 36, "not a run id: {run:?}");
    run
}

/// The run's targets, or `None` when the command fails (a replica waiting
/// for its database).
pub fn try_targets(s: Option<SocketAddr>, run: &str) -> Option<Vec<Value>> {
    let out = rackflow(
        s,
        &[
            "run",
            "targets",
            run,
            "--phase-scope",
            "current-and-completed",
            "-o",
            "json",
        ],
    );
    if out.code != Some(0) {
        return None;
    }
    out.json()["targets"].as_array().cloned()
}

pub fn targets(s: Option<SocketAddr>, run: &str) -> Vec<Value> {
    try_targets(s, run).unwrap_or_else(|| panic!("run targets {run} failed"))
}

pub fn try_run_status(s: Option<SocketAddr>, run: &str) -> Option<Value> {
    let out = rackflow(s, &["run", "get", run, "--stats", "-o", "json"]);
    (out.code == Some(0)).then(|| out.json())
}

pub fn count(targets: &[Value], statuses: &[&str]) -> usize {
    targets
        .iter()
        .filter(|t| statuses.contains(&t["status"].as_str().unwrap_or("")))
        .count()
}

pub fn is_terminal(run: &Value) -> bool {
    matches!(
        run["status"].as_str().unwrap_or(""),
        "completed" | "completed_with_failures" | "failed" | "cancelled"
    )
}

/// A short description of the targets: status counts.
pub fn target_summary(targets: &[Value]) -> String {
    let mut by_status: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in targets {
        by_status
            .entry(t["status"].as_str().unwrap_or("?").to_string())
            .or_default()
            .push(t["rack_external_id"].as_str().unwrap_or("?").to_string());
    }
    format!("{by_status:?}")
}

/// Waits (a bounded retry: the replicas are separate processes) until the
/// run is terminal, reading the sim logs of the running replicas on every
/// probe; returns the run.
pub fn wait_run_finished(
    s: Option<SocketAddr>,
    run: &str,
    what: &str,
    deadline: Duration,
    logs: &mut [&mut SimLog],
    state: impl Fn() -> String,
) -> Value {
    wait_until_blocking(
        what,
        deadline,
        Duration::from_millis(250),
        || {
            for log in logs.iter_mut() {
                log.refresh();
            }
            try_run_status(s, run).filter(is_terminal)
        },
        || {
            format!(
                "run: {}\ntargets: {}\n{}",
                try_run_status(s, run).map_or("<unreadable>".into(), |r| format!(
                    "{} {}",
                    r["status"], r["stats"]
                )),
                try_targets(s, run).map_or("<unreadable>".into(), |t| target_summary(&t)),
                state()
            )
        },
    )
}

pub fn logs_of(servers: &[&ServeProcess]) -> String {
    let mut text = String::new();
    for (i, server) in servers.iter().enumerate() {
        let _ = write!(
            text,
            "\n--- server log of replica {} ---\n{}",
            ["A", "B"].get(i).unwrap_or(&"?"),
            tail(&server.log_text(), 60)
        );
    }
    text
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
