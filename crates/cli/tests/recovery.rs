//! Crash recovery with a real process: `rackflow serve` is killed with
//! SIGKILL in the middle of a rollout and started again on the same SQLite
//! file and port; the run must complete with exactly one child task per
//! target (nothing lost, nothing done twice).

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{
    ServeProcess, create_fast_default_rule, free_addr, import_fleet, rackflow, temp_path,
};
use rackflow_testkit::wait::wait_until_blocking;
use serde_json::Value;

const RACKS: usize = 8;

/// Small simulated latencies, a fast dispatcher poll and a short claim lease
/// so that a claim orphaned by the kill expires quickly.
const CONFIG: &str = r#"
shutdown_grace_secs = 1

[dispatcher]
poll_interval_ms = 200
claim_lease_secs = 2

[sim]
firmware_update_ms = 300
power_ms = 10
jitter = 0.0
"#;

fn targets(s: Option<SocketAddr>, run: &str) -> Vec<Value> {
    let list = rackflow(
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
    )
    .ok()
    .json();
    list["targets"].as_array().unwrap().clone()
}

fn count(targets: &[Value], statuses: &[&str]) -> usize {
    targets
        .iter()
        .filter(|t| statuses.contains(&t["status"].as_str().unwrap_or("")))
        .count()
}

fn run_status(s: Option<SocketAddr>, run: &str) -> Value {
    rackflow(s, &["run", "get", run, "--stats", "-o", "json"])
        .ok()
        .json()
}

#[test]
fn kill_9_mid_rollout_then_restart_completes_with_one_task_per_target() {
    let started = Instant::now();
    let db = temp_path("recovery.db");
    let config = temp_path("recovery.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let addr = free_addr();
    let mut server = ServeProcess::start(addr, &db, &config);
    let s = Some(addr);

    import_fleet(s, RACKS as u32);
    create_fast_default_rule(s, "50ms");
    let run = rackflow(
        s,
        &[
            "run",
            "create",
            "--name",
            "recovery",
            "--percentage",
            "100",
            "--max-concurrent",
            "2",
            "--failure-rate",
            "50:cumulative",
            "--seed",
            "recovery",
            "--ordering-seed",
            "recovery",
        ],
    )
    .ok()
    .stdout
    .trim()
    .to_string();
    assert_eq!(run.len(), 36, "not a run id: {run:?}");

    // Mid-rollout: a child task in flight, not every target done.
    // The server is a separate process (it is killed with SIGKILL): nothing
    // to follow but its answers, so these waits are bounded retries.
    let seen = wait_until_blocking(
        "a target to be submitted",
        Duration::from_secs(15),
        Duration::from_millis(20),
        || {
            let t = targets(s, &run);
            let submitted = count(&t, &["submitted"]);
            let terminal = count(&t, &["completed", "failed", "terminated", "skipped"]);
            assert!(terminal < RACKS, "the run finished before the kill: {t:#?}");
            (submitted >= 1).then_some(t)
        },
        || {
            format!(
                "targets: {:#?}\nserver log:\n{}",
                targets(s, &run),
                server.log_text()
            )
        },
    );
    server.kill9();
    let done_before = count(&seen, &["completed"]);

    server.restart();
    let finished = wait_until_blocking(
        "the run to finish after the restart",
        Duration::from_secs(20),
        Duration::from_millis(100),
        || {
            let view = run_status(s, &run);
            let status = view["status"].as_str().unwrap_or("").to_string();
            matches!(
                status.as_str(),
                "completed" | "completed_with_failures" | "failed" | "cancelled"
            )
            .then_some(view)
        },
        || {
            format!(
                "run: {:#}\ntargets: {:#?}\nserver log:\n{}",
                run_status(s, &run),
                targets(s, &run),
                server.log_text()
            )
        },
    );
    let after = targets(s, &run);
    assert_eq!(
        finished["status"],
        "completed",
        "run after the restart: {finished:#}\ntargets: {after:#?}\nserver log:\n{}",
        server.log_text()
    );
    assert_eq!(after.len(), RACKS);
    assert_eq!(
        count(&after, &["completed"]),
        RACKS,
        "every target completed: {after:#?}"
    );

    // Exactly one child task per target, and it is the target's task.
    for target in &after {
        let rack = target["rack_external_id"].as_str().unwrap();
        let tasks = rackflow(s, &["task", "list", "--rack-id", rack, "-o", "json"])
            .ok()
            .json();
        let firmware: Vec<&Value> = tasks["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| {
                t["operation"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("firmware_control")
            })
            .collect();
        assert_eq!(
            firmware.len(),
            1,
            "rack {rack} has {} firmware tasks (killed with {done_before} of {RACKS} targets \
             done): {tasks:#}\ntargets before the kill: {seen:#?}\ntargets after: \
             {after:#?}\nserver log:\n{}",
            firmware.len(),
            server.log_text()
        );
        assert_eq!(firmware[0]["id"], target["task_id"], "rack {rack}");
        assert_eq!(firmware[0]["status"], "completed", "rack {rack}");
    }
    drop(server);
    std::fs::remove_file(&config).ok();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
}
