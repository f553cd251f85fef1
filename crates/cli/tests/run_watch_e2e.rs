//! End to end for the manual controls (`run pause|resume|advance|cancel`),
//! the live view (`run watch`) and `rackflow demo`: a real flow server
//! in-process (or the demo's own), driven by the built `rackflow` binary.

mod common;

use std::net::SocketAddr;
use std::process::{Command, Stdio};

use std::time::{Duration, Instant};

use common::{
    Server, create_fast_default_rule, import_fleet, rackflow, rackflow_within, temp_path,
};
use rackflow_testkit::wait::{Lines, wait_exit};

/// A server whose simulated firmware updates take 300 ms per component type
/// (a rack: about 0.7 s with the fast rule) and whose dispatcher polls fast.
fn fast_server() -> Server {
    Server::start_with(|config| {
        config.sim.firmware_update_ms = 300;
        config.sim.power_ms = 10;
        config.sim.jitter = 0.0;
        config.dispatcher.poll_interval_ms = 200;
    })
}

fn create_run(s: Option<SocketAddr>, name: &str, phases: &str) -> String {
    let out = rackflow(
        s,
        &[
            "run",
            "create",
            "--name",
            name,
            "--percentage",
            "100",
            "--max-concurrent",
            "2",
            "--failure-count",
            "3:cumulative",
            "--phases",
            phases,
            "--seed",
            name,
            "--ordering-seed",
            name,
        ],
    )
    .ok();
    out.stdout.trim().to_string()
}

#[test]
fn controls_and_watch_through_the_binary() {
    let server = fast_server();
    let s = Some(server.addr);
    let addr = server.addr.to_string();
    import_fleet(s, 6);
    create_fast_default_rule(s, "50ms");

    // Phases of 1, 2 and 3 racks, advanced by hand.
    let id = create_run(s, "watched", "count:1,2");

    // Pause at once, then resume.
    let paused = rackflow(s, &["run", "pause", &id]).ok();
    assert!(
        paused.stdout.starts_with(&format!(
            "run {id} paused (operator_paused): operation run paused by operator\n"
        )),
        "{}",
        paused.stdout
    );
    assert!(
        paused.stdout.contains(&format!(
            "continue with: rackflow --server {addr} run resume {id}"
        )),
        "{}",
        paused.stdout
    );
    // Pausing again changes nothing; JSON is the run.
    let again = rackflow(s, &["run", "pause", &id, "-o", "json"])
        .ok()
        .json();
    assert_eq!(again["status"], "paused");
    assert_eq!(again["reason"], "operator_paused");
    assert_eq!(again["id"], id.as_str());
    assert!(again["configuration"].is_object(), "{again:#}");
    // A paused run's watch, with --exit-on-pause: exit code 3 and the way on.
    let watch = rackflow(s, &["run", "watch", &id, "--exit-on-pause"]);
    assert_eq!(watch.code, Some(3), "{}\n{}", watch.stdout, watch.stderr);
    assert!(
        watch
            .stdout
            .contains("paused: paused by an operator (targets already submitted keep running)"),
        "{}",
        watch.stdout
    );
    let resumed = rackflow(s, &["run", "resume", &id]).ok();
    assert_eq!(
        resumed.stdout,
        format!("run {id} running: operation run resumed\n")
    );
    // Resuming a running run is refused by the server.
    let refused = rackflow(s, &["run", "resume", &id]);
    assert_eq!(refused.code, Some(1));
    assert!(
        refused
            .stderr
            .starts_with("error: FailedPrecondition: operation run is not in a valid state"),
        "{}",
        refused.stderr
    );

    // Phase 0 ends at the phase gate: watch stops there with the command.
    let watch = rackflow(s, &["run", "watch", &id, "--exit-on-pause"]);
    assert_eq!(watch.code, Some(3), "{}\n{}", watch.stdout, watch.stderr);
    let out = &watch.stdout;
    assert!(out.contains("watching run watched"), "{out}");
    assert!(
        out.contains("phase 0: 1 completed, 0 failed, 0 in flight, 0 blocked of 1"),
        "{out}"
    );
    assert!(
        out.contains("run paused (phase_gate): waiting for phase advance"),
        "{out}"
    );
    assert!(
        out.contains("paused: phase 0 is complete; phase 1 waits at the phase gate"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "continue with: rackflow --server {addr} run advance {id} --expected-phase 1"
        )),
        "{out}"
    );
    // -o json: the state it stopped at.
    let json = rackflow(s, &["run", "watch", &id, "--exit-on-pause", "-o", "json"]);
    assert_eq!(json.code, Some(3));
    let snapshot = json.json();
    assert_eq!(snapshot["status"], "paused");
    assert_eq!(snapshot["current_phase"], 0);
    assert_eq!(snapshot["phases"].as_array().unwrap().len(), 3);
    assert_eq!(snapshot["phases"][0]["completed"], 1);
    assert_eq!(snapshot["phases"][1]["selected"], 2);
    assert_eq!(snapshot["phases"][2]["selected"], 3);
    assert_eq!(snapshot["pause"]["reason"], "phase_gate");

    // Advance: a wrong expected phase is refused, the right one opens it.
    let wrong = rackflow(s, &["run", "advance", &id, "--expected-phase", "2"]);
    assert_eq!(wrong.code, Some(1));
    assert!(
        wrong.stderr.contains("expected phase 2, next phase is 1"),
        "{}",
        wrong.stderr
    );
    let advanced = rackflow(s, &["run", "advance", &id, "--expected-phase", "1"]).ok();
    assert_eq!(
        advanced.stdout,
        format!("run {id} running: advanced to phase 1\n")
    );

    // A watch that keeps watching across the next gate: once it shows the
    // command that continues, the test runs that command.
    let mut child = Command::new(env!("CARGO_BIN_EXE_rackflow"))
        .args(["--server", &addr, "run", "watch", &id])
        .env_remove("RACKFLOW_SERVER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Follow its output line by line (no polling).
    let mut lines = Lines::follow(child.stdout.take().unwrap());
    let continue_line =
        format!("continue with: rackflow --server {addr} run advance {id} --expected-phase 2");
    lines.wait_for(&continue_line, Duration::from_secs(30));
    rackflow(s, &["run", "advance", &id, "--expected-phase", "2"]).ok();
    let status = wait_exit(child, "run watch to end", Duration::from_secs(30), || {
        format!("output:\n{}", lines.seen())
    });
    let out = lines.finish();
    assert_eq!(status.code(), Some(0), "{out}");
    assert!(
        out.contains("paused: phase 1 is complete; phase 2 waits at the phase gate"),
        "{out}"
    );
    assert!(
        out.contains("phase 2: 3 completed, 0 failed, 0 in flight, 0 blocked of 3"),
        "{out}"
    );
    assert!(
        out.ends_with(&format!("run {id} completed: operation run completed\n")),
        "{out}"
    );

    // A finished run: watch answers at once; pause is refused.
    let done = rackflow(s, &["run", "watch", &id]).ok();
    assert!(
        done.stdout
            .contains("run completed: operation run completed")
    );
    let refused = rackflow(s, &["run", "pause", &id]);
    assert_eq!(refused.code, Some(1));
    assert!(
        refused.stderr.contains("is in terminal state"),
        "{}",
        refused.stderr
    );

    // Cancel with a reason; watching a cancelled run exits 1.
    let other = create_run(s, "cancelled", "count:1,2");
    let cancelled = rackflow(s, &["run", "cancel", &other, "--reason", "change freeze"]).ok();
    assert_eq!(
        cancelled.stdout,
        format!("run {other} cancelled: operation run cancelled: change freeze\n")
    );
    let watch = rackflow(s, &["run", "watch", &other]);
    assert_eq!(watch.code, Some(1), "{}", watch.stdout);
    assert!(watch.stderr.is_empty(), "{}", watch.stderr);
    assert!(
        watch.stdout.ends_with(&format!(
            "run {other} cancelled: operation run cancelled: change freeze\n"
        )),
        "{}",
        watch.stdout
    );
    // Unknown runs are the server's NotFound.
    let missing = rackflow(s, &["run", "watch", "6d5e8a28-3943-45a8-876a-e04028900cec"]);
    assert_eq!(missing.code, Some(1));
    assert!(
        missing.stderr.starts_with("error: NotFound: "),
        "{}",
        missing.stderr
    );
}

#[test]
fn demo_runs_to_the_end_as_one_process() {
    let started = Instant::now();
    let run = rackflow_within(
        Duration::from_secs(90),
        None,
        &["demo", "--racks", "6", "--speed", "20"],
    );
    let out = &run.stdout;
    assert_eq!(run.code, Some(0), "{out}\n{}", run.stderr);
    // The embedded server's logs are not on the terminal.
    assert!(!out.contains(" INFO "), "{out}");
    assert!(!run.stderr.contains(" INFO "), "{}", run.stderr);
    // The banner is wrapped at 80 columns (stdout is not a terminal here),
    // words whole (issue 31).
    let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.starts_with(
            "rackflow demo: a canary firmware rollout over 6 simulated racks, in this one process"
        ),
        "{out}"
    );
    assert!(
        flat.contains("rollout: 6 racks in 3 phases (1, 3, 2), 4 at a time"),
        "{out}"
    );
    for line in out.lines().take_while(|l| !l.starts_with("run:")) {
        assert!(
            line.chars().count() <= 80 || !line.trim().contains(' '),
            "banner line over 80 columns: {line:?}\n{out}"
        );
    }
    for phase in [1, 2] {
        assert!(
            out.contains(&format!(
                "phase gate reached: advancing to phase {phase} (as an operator would with: rackflow run advance "
            )) && out.contains(&format!("--expected-phase {phase})")),
            "phase {phase}: {out}"
        );
    }
    // The summary: one failure in phase 1 and one in phase 2, both planted.
    assert!(
        out.contains(
            "Rollout finished: completed_with_failures (operation run completed with failed targets)"
        ),
        "{out}"
    );
    let table: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("PHASE  RACKS  COMPLETED  FAILED"))
        .take(5)
        .collect();
    assert_eq!(
        table,
        [
            "PHASE  RACKS  COMPLETED  FAILED",
            "0      1      1          0",
            "1      3      2          1",
            "2      2      1          1",
            "total  6      4          2",
        ],
        "{out}"
    );
    assert!(out.contains("Wall time: "), "{out}");
    let failed: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("Failed racks:"))
        .skip(2)
        .take_while(|l| l.starts_with("r-"))
        .collect();
    assert_eq!(failed.len(), 2, "{out}");
    for line in failed {
        assert!(
            line.contains("firmware update failed for components: [r-")
                && line.contains("-compute-07]"),
            "{line}"
        );
    }
    // The log file is named at the end and holds the server's log.
    let log = out
        .lines()
        .find_map(|l| l.strip_prefix("Server log: "))
        .unwrap_or_else(|| panic!("no log path: {out}"));
    let text = std::fs::read_to_string(log).unwrap();
    assert!(text.contains("flow server listening"), "{text}");
    // The temporary database is gone.
    let dir = std::path::Path::new(log).parent().unwrap();
    assert!(!dir.join("rackflow.db").exists());
    std::fs::remove_dir_all(dir).ok();
    assert!(started.elapsed() < Duration::from_secs(60));
}

#[test]
fn demo_json_summary_and_kept_database() {
    let db = temp_path("demo.db");
    let db_str = db.to_str().unwrap();
    let run = rackflow_within(
        Duration::from_secs(90),
        None,
        &[
            "-o", "json", "demo", "--racks", "5", "--speed", "50", "--db", db_str,
        ],
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let summary = run.json();
    assert_eq!(summary["status"], "completed_with_failures");
    let phases = summary["phases"].as_array().unwrap();
    let racks: Vec<i64> = phases
        .iter()
        .map(|p| p["racks"].as_i64().unwrap())
        .collect();
    assert_eq!(racks, [1, 3, 1]);
    assert_eq!(summary["failed_racks"].as_array().unwrap().len(), 2);
    assert_eq!(summary["database"], db_str);
    assert!(db.exists());
    let log = summary["server_log"].as_str().unwrap();
    std::fs::remove_dir_all(std::path::Path::new(log).parent().unwrap()).ok();
    for suffix in ["", "-wal", "-shm"] {
        std::fs::remove_file(format!("{db_str}{suffix}")).ok();
    }
}
