//! Clustered execution with real processes (issue 11, local executor): two
//! `rackflow serve` OS processes — replicas — on one PostgreSQL database.
//!
//! - a replica joining mid-rollout must not re-execute the running tasks of
//!   the other (every component exactly one firmware start across both);
//! - after `kill -9` of the replica executing tasks, the survivor adopts
//!   them and finishes the run within lease + 10 s;
//! - a cancel sent to the replica that does not execute the task stops the
//!   execution on the owner within 2 s;
//! - PostgreSQL (a private instance the test started itself) down for 60 s
//!   mid-rollout: the run finishes once it is back, nothing lost.
//!
//! Tests 1–3 use a fresh database on the shared PostgreSQL server
//! (`DATABASE_URL`, else `postgres://postgres@127.0.0.1:5432/postgres`);
//! the outage test a [`PgInstance`] of its own, never the shared server.
//!
//! Hardware calls are counted on each replica's simulated fleet through its
//! `SimAdmin.GetCallLog` (each process has its own fleet, so the counts are
//! summed; the log of a killed process is known up to its last read). The
//! logs are read incrementally, so the sim's bounded log cannot drop an
//! entry unnoticed.
//!
//! The tests run one at a time (a lock): two replicas each on two cores is
//! load enough for the timing assertions.
//!
//! Configuration: `[tasks] lease_secs = 3`. Run against the code before
//! leases existed (without that line), tests 1–4 all failed: 405 firmware
//! starts for 270 components (the joining replica resumed the live one's
//! five running tasks), a stalled run after the kill, the owner going on
//! with its next stage after the cancel, and a target failed at submission
//! by the outage.

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::cluster::{
    components_of, count, create_run, logs_of, tail, target_summary, targets, wait_run_finished,
};
use common::sim_log::{SimLog, rack_of};
use common::{ServeProcess, create_fast_default_rule, free_addr, import_generated_fleet, rackflow};
use rackflow_testkit::pg_instance::{PgDatabase, PgInstance, shared_server_url};
use rackflow_testkit::wait::wait_until_blocking;
use serde_json::Value;

/// `[tasks] lease_secs` of every replica.
const LEASE_SECS: u64 = 3;

/// Racks of the rollout tests.
const RACKS: u32 = 10;

/// The component types the fast firmware rule updates (compute trays in
/// stage 1, NVLink switch trays in stage 2), as `fleet generate` names them.
const UPDATED_TYPES: [&str; 2] = ["Compute", "NVSwitch"];

static SERIAL: Mutex<()> = Mutex::new(());

/// One test at a time (a failed test's poisoned lock is still a lock).
fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A replica's configuration (without `[database]`): short simulated
/// latencies without jitter, a fast dispatcher poll, a short claim lease and
/// the short task lease.
fn config(firmware_ms: u64) -> String {
    format!(
        r"shutdown_grace_secs = 1

[dispatcher]
poll_interval_ms = 200
claim_lease_secs = 2

[tasks]
lease_secs = {LEASE_SECS}

[sim]
firmware_update_ms = {firmware_ms}
power_ms = 10
jitter = 0.0
"
    )
}

/// Adds up firmware starts per component over several logs.
fn sum_starts(logs: &[&SimLog]) -> BTreeMap<String, Vec<(&'static str, usize)>> {
    let mut all: BTreeMap<String, Vec<(&'static str, usize)>> = BTreeMap::new();
    for log in logs {
        for (component, n) in log.firmware_starts() {
            all.entry(component).or_default().push((log.name, n));
        }
    }
    all
}

/// The run completed, every target completed, and every target has exactly
/// one firmware task — the target's own, completed.
fn assert_completed_with_one_task_per_target(
    s: Option<SocketAddr>,
    run: &str,
    finished: &Value,
    context: &dyn Fn() -> String,
) {
    let after = targets(s, run);
    assert_eq!(
        finished["status"],
        "completed",
        "run: {finished:#}\ntargets: {}\n{}",
        target_summary(&after),
        context()
    );
    assert_eq!(after.len(), RACKS as usize, "targets: {after:#?}");
    assert_eq!(
        count(&after, &["completed"]),
        RACKS as usize,
        "every target completed: {}\n{}",
        target_summary(&after),
        context()
    );
    let mut wrong = Vec::new();
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
        if firmware.len() != 1
            || firmware[0]["id"] != target["task_id"]
            || firmware[0]["status"] != "completed"
        {
            wrong.push(format!(
                "{rack}: target task {} — firmware tasks {:?}",
                target["task_id"],
                firmware
                    .iter()
                    .map(|t| format!("{} {}", t["id"], t["status"]))
                    .collect::<Vec<_>>()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "every target must have exactly one (completed) child task, its own:\n{}\n{}",
        wrong.join("\n"),
        context()
    );
}

/// Components started more than once in `starts`, described.
fn duplicates(starts: &BTreeMap<String, Vec<(&'static str, usize)>>) -> Vec<String> {
    starts
        .iter()
        .filter(|(_, per)| per.iter().map(|(_, n)| n).sum::<usize>() > 1)
        .map(|(c, per)| format!("{c}: {per:?}"))
        .collect()
}

/// Waits until a replica's sim log shows a firmware start (tasks in flight),
/// with the run not finished; returns the targets then.
fn wait_firmware_in_flight(
    s: Option<SocketAddr>,
    run: &str,
    logs: &mut [&mut SimLog],
    state: impl Fn() -> String,
) -> Vec<Value> {
    wait_until_blocking(
        "a firmware update in flight",
        Duration::from_secs(20),
        Duration::from_millis(20),
        || {
            for log in logs.iter_mut() {
                log.refresh();
            }
            let started = logs.iter().any(|l| l.firmware_starts_after(0).count() > 0);
            started.then(|| {
                let t = targets(s, run);
                assert!(
                    count(&t, &["completed", "failed", "terminated", "skipped"]) < RACKS as usize,
                    "the run finished before the test could act: {}",
                    target_summary(&t)
                );
                t
            })
        },
        state,
    )
}

// ---------------------------------------------------------------------------
// The tests.

#[test]
fn a_replica_joining_mid_rollout_updates_every_component_exactly_once() {
    let _serial = serial();
    let db = PgDatabase::create(&shared_server_url());
    let cfg = config(1000);
    let a = ServeProcess::start_postgres(free_addr(), db.url(), &cfg);
    let s = Some(a.addr);
    let fleet = import_generated_fleet(s, RACKS);
    let expected = components_of(&fleet, &UPDATED_TYPES);
    create_fast_default_rule(s, "100ms");
    let mut log_a = SimLog::new("A", a.addr);

    let started = Instant::now();
    let run = create_run(s, "join", 5);
    let in_flight = wait_firmware_in_flight(s, &run, &mut [&mut log_a], || logs_of(&[&a]));
    let first_update = started.elapsed();
    // B joins while A executes the first wave.
    let b = ServeProcess::start_postgres(free_addr(), db.url(), &cfg);
    let joined = started.elapsed();
    let mut log_b = SimLog::new("B", b.addr);
    let at_join = targets(s, &run);
    assert!(
        count(&at_join, &["submitted"]) > 0,
        "nothing in flight any more when B joined (at {joined:?}): {}",
        target_summary(&at_join)
    );

    let finished = wait_run_finished(
        s,
        &run,
        "the run to finish with two replicas",
        Duration::from_secs(60),
        &mut [&mut log_a, &mut log_b],
        || logs_of(&[&a, &b]),
    );
    log_a.refresh();
    log_b.refresh();
    let context = || {
        format!(
            "first firmware start on A at {first_update:?}, B up at {joined:?}; targets then: \
             {} / at the join: {}\n{}\n{}{}",
            target_summary(&in_flight),
            target_summary(&at_join),
            log_a.summary(),
            log_b.summary(),
            logs_of(&[&a, &b])
        )
    };
    assert_completed_with_one_task_per_target(s, &run, &finished, &context);

    let starts = sum_starts(&[&log_a, &log_b]);
    let total: usize = starts.values().flatten().map(|(_, n)| n).sum();
    let dup = duplicates(&starts);
    let missing: Vec<&String> = expected
        .iter()
        .filter(|c| !starts.contains_key(*c))
        .collect();
    let unexpected: Vec<&String> = starts.keys().filter(|c| !expected.contains(*c)).collect();
    let dup_racks: BTreeSet<String> = dup.iter().map(|d| rack_of(d)).collect();
    assert!(
        dup.is_empty() && missing.is_empty() && unexpected.is_empty(),
        "every component must get exactly one firmware start across both replicas: {total} \
         starts for {} components; {} components started more than once (racks {dup_racks:?}), \
         {} never, {} not in the fleet\nduplicates (first 12): {:#?}\nmissing: {missing:?}\n{}",
        expected.len(),
        dup.len(),
        missing.len(),
        unexpected.len(),
        &dup[..dup.len().min(12)],
        context()
    );
    drop((a, b));
}

#[test]
fn b_kill_9_of_the_executing_replica_the_survivor_finishes_within_lease_plus_10s() {
    let _serial = serial();
    let db = PgDatabase::create(&shared_server_url());
    let cfg = config(1000);
    let mut servers = [
        ServeProcess::start_postgres(free_addr(), db.url(), &cfg),
        ServeProcess::start_postgres(free_addr(), db.url(), &cfg),
    ];
    let mut logs = [
        SimLog::new("A", servers[0].addr),
        SimLog::new("B", servers[1].addr),
    ];
    let s = Some(servers[0].addr);
    import_generated_fleet(s, RACKS);
    create_fast_default_rule(s, "100ms");
    let run = create_run(s, "kill", 5);
    let [log_a, log_b] = &mut logs;
    let before = wait_firmware_in_flight(s, &run, &mut [log_a, log_b], || {
        logs_of(&[&servers[0], &servers[1]])
    });

    // The victim: the replica executing (more) tasks.
    let victim = usize::from(logs[1].racks_started().len() > logs[0].racks_started().len());
    let survivor = 1 - victim;
    logs[victim].freeze();
    let victim_racks = logs[victim].racks_started();
    servers[victim].kill9();
    let killed_at = Instant::now();
    let s = Some(servers[survivor].addr);

    let deadline = Duration::from_secs(LEASE_SECS + 10);
    let [log_a, log_b] = &mut logs;
    let survivor_log: &mut SimLog = if survivor == 0 { log_a } else { log_b };
    let finished = wait_run_finished(
        s,
        &run,
        &format!(
            "the survivor ({}) to finish the run after kill -9 of {} (executing racks \
             {victim_racks:?}; targets then {})",
            ["A", "B"][survivor],
            ["A", "B"][victim],
            target_summary(&before)
        ),
        deadline,
        &mut [survivor_log],
        || logs_of(&[&servers[0], &servers[1]]),
    );
    let took = killed_at.elapsed();
    logs[survivor].refresh();
    let context = || {
        format!(
            "killed {} while it executed racks {victim_racks:?}; run finished {took:?} after \
             the kill\n{}\n{}{}",
            ["A", "B"][victim],
            logs[0].summary(),
            logs[1].summary(),
            logs_of(&[&servers[0], &servers[1]])
        )
    };
    assert_completed_with_one_task_per_target(s, &run, &finished, &context);

    // The survivor's log is whole: it started no component twice. (What
    // the victim did after its last read is unknown; a component it had
    // started may be started again by the adopter.)
    let survivor_dups = duplicates(&sum_starts(&[&logs[survivor]]));
    assert!(
        survivor_dups.is_empty(),
        "the survivor started components more than once: {survivor_dups:#?}\n{}",
        context()
    );
    let across = duplicates(&sum_starts(&[&logs[0], &logs[1]]));
    eprintln!(
        "kill test: run finished {took:?} after the kill; {} components started on both \
         replicas (the adopted in-flight stage)",
        across.len()
    );
}

#[test]
fn c_a_cancel_sent_to_the_other_replica_stops_the_owner_within_2s() {
    let _serial = serial();
    let db = PgDatabase::create(&shared_server_url());
    // Slow updates: the task is still in its first stage when cancelled.
    let cfg = config(4000);
    let a = ServeProcess::start_postgres(free_addr(), db.url(), &cfg);
    let b = ServeProcess::start_postgres(free_addr(), db.url(), &cfg);
    let (sa, sb) = (Some(a.addr), Some(b.addr));
    import_generated_fleet(sa, 1);
    create_fast_default_rule(sa, "100ms");
    let mut log_a = SimLog::new("A", a.addr);
    let mut log_b = SimLog::new("B", b.addr);

    let submitted = rackflow(
        sa,
        &[
            "firmware",
            "upgrade",
            "--rack-external-ids",
            "r-0001",
            "-o",
            "json",
        ],
    )
    .ok()
    .json();
    let task = submitted["task_ids"][0].as_str().unwrap().to_string();
    wait_until_blocking(
        "the task to start firmware updates on A",
        Duration::from_secs(20),
        Duration::from_millis(20),
        || {
            log_a.refresh();
            (log_a.firmware_starts_after(0).count() > 0).then_some(())
        },
        || logs_of(&[&a, &b]),
    );
    log_b.refresh();
    assert_eq!(
        log_b.firmware_starts_after(0).count(),
        0,
        "the task runs on B too before any cancel: {}",
        log_b.summary()
    );

    let cancelled_at = Instant::now();
    let answer = rackflow(sb, &["task", "cancel", &task, "-o", "json"]).ok();
    let answered = cancelled_at.elapsed();
    let status = |s: Option<SocketAddr>| {
        let t = rackflow(s, &["task", "get", &task, "-o", "json"])
            .ok()
            .json();
        t["tasks"][0]["status"].as_str().unwrap_or("").to_string()
    };
    wait_until_blocking(
        "the task to be terminated (as read through A and B)",
        Duration::from_secs(2).saturating_sub(cancelled_at.elapsed()),
        Duration::from_millis(50),
        || (status(sa) == "terminated" && status(sb) == "terminated").then_some(()),
        || format!("A sees {:?}, B sees {:?}", status(sa), status(sb)),
    );

    // Everything A calls from cancel + 2 s on is a step that should not
    // have run; the rule polls the update every 100 ms, so an execution
    // that goes on shows within the 3 s watched.
    std::thread::sleep(Duration::from_secs(2).saturating_sub(cancelled_at.elapsed()));
    log_a.refresh();
    let mark = log_a.last;
    std::thread::sleep(Duration::from_secs(3));
    log_a.refresh();
    log_b.refresh();
    let late: Vec<String> = log_a
        .entries
        .iter()
        .filter(|e| e.sequence > mark)
        .map(|e| format!("{} {} ×{}", e.call, e.component_type, e.components.len()))
        .collect();
    let mut late_kinds: BTreeMap<&String, usize> = BTreeMap::new();
    for e in &late {
        *late_kinds.entry(e).or_insert(0) += 1;
    }
    assert!(
        late.is_empty(),
        "A went on calling the hardware after the cancel sent to B (+2 s): {} calls in the \
         3 s watched: {late_kinds:#?}\ncancel answered after {answered:?}: {}\nA's firmware \
         starts over the whole test: {} components\n{}\n{}{}",
        late.len(),
        {
            let a = answer.json();
            format!("status {} message {}", a["status"], a["message"])
        },
        log_a.firmware_starts().values().sum::<usize>(),
        log_a.summary(),
        log_b.summary(),
        logs_of(&[&a, &b])
    );
    assert_eq!(
        log_b.firmware_starts_after(0).count(),
        0,
        "B executed the cancelled task: {}",
        log_b.summary()
    );
    assert_eq!(status(sa), "terminated");
}

#[test]
fn d_postgres_down_60s_mid_rollout_the_run_finishes_after_it_returns() {
    let _serial = serial();
    let mut pg = PgInstance::start();
    let cfg = config(1500);
    let a = ServeProcess::start_postgres(free_addr(), &pg.url(), &cfg);
    let b = ServeProcess::start_postgres(free_addr(), &pg.url(), &cfg);
    let s = Some(a.addr);
    let fleet = import_generated_fleet(s, RACKS);
    let expected = components_of(&fleet, &UPDATED_TYPES);
    create_fast_default_rule(s, "100ms");
    let mut log_a = SimLog::new("A", a.addr);
    let mut log_b = SimLog::new("B", b.addr);
    let run = create_run(s, "outage", 5);
    wait_firmware_in_flight(s, &run, &mut [&mut log_a, &mut log_b], || {
        logs_of(&[&a, &b])
    });
    // Mid-rollout: some targets done (what must not be lost), others in
    // flight (what must be finished).
    let before = wait_until_blocking(
        "a target completed and another in flight",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || {
            log_a.refresh();
            log_b.refresh();
            let t = targets(s, &run);
            let done = count(&t, &["completed"]);
            assert!(
                done < RACKS as usize,
                "the run finished before the outage: {}",
                target_summary(&t)
            );
            (done >= 1 && count(&t, &["submitted"]) >= 1).then_some(t)
        },
        || logs_of(&[&a, &b]),
    );

    pg.stop();
    let stopped_at = Instant::now();
    // The deliberate outage; the sim logs are read meanwhile (they need no
    // database) so that none overflows.
    while stopped_at.elapsed() < Duration::from_secs(60) {
        log_a.refresh();
        log_b.refresh();
        std::thread::sleep(
            Duration::from_secs(1)
                .min(Duration::from_secs(60).saturating_sub(stopped_at.elapsed())),
        );
    }
    pg.start_again();
    let back_at = Instant::now();

    let finished = wait_run_finished(
        s,
        &run,
        &format!(
            "the run to finish after a 60 s PostgreSQL outage (targets when it stopped: {})",
            target_summary(&before)
        ),
        Duration::from_secs(60),
        &mut [&mut log_a, &mut log_b],
        || {
            format!(
                "{}\n--- postgres ---\n{}",
                logs_of(&[&a, &b]),
                tail(&pg.log_text(), 20)
            )
        },
    );
    let took = back_at.elapsed();
    log_a.refresh();
    log_b.refresh();
    let context = || {
        format!(
            "PostgreSQL stopped with targets {}; run finished {took:?} after it returned\n{}\n{}{}",
            target_summary(&before),
            log_a.summary(),
            log_b.summary(),
            logs_of(&[&a, &b])
        )
    };
    assert_completed_with_one_task_per_target(s, &run, &finished, &context);

    // Both logs are whole. Each replica starts a component at most once;
    // across replicas a stage whose outcome could not be written during the
    // outage may be run again by the adopter — reported, not failed.
    for log in [&log_a, &log_b] {
        let dup = duplicates(&sum_starts(&[log]));
        assert!(
            dup.is_empty(),
            "replica {} started components more than once: {dup:#?}\n{}",
            log.name,
            context()
        );
    }
    let starts = sum_starts(&[&log_a, &log_b]);
    let missing: Vec<&String> = expected
        .iter()
        .filter(|c| !starts.contains_key(*c))
        .collect();
    assert!(
        missing.is_empty(),
        "components never updated: {missing:?}\n{}",
        context()
    );
    eprintln!(
        "outage test: run finished {took:?} after PostgreSQL returned; {} components started \
         on both replicas",
        duplicates(&starts).len()
    );
    drop((a, b));
}
