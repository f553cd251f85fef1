//! The clustered scale benchmark (issue 11), rerun with
//! `cargo bench -p rackflow --features temporal --bench scale [NAME]` (NAME
//! filters, any number of them: `one`, `two`, `temporal`).
//!
//! On PostgreSQL (`DATABASE_URL`, else
//! `postgres://postgres@127.0.0.1:5432/postgres`; every bench on a fresh
//! database of its own, dropped at the end), `rackflow serve` OS processes
//! (this crate's binary) with `planner.max_candidate_targets = 0`
//! (unlimited) and the simulated fleet at 2 s per firmware update, no
//! jitter, instant status reads (`power_ms = 0`):
//! - one: one process;
//! - two: two processes on the same database; the run is created through the
//!   first, both dispatch and execute (default configuration otherwise);
//! - two-poll200: `two` with `[dispatcher] poll_interval_ms = 200` on both
//!   (the default is 10 s; see `main`). `-- two` runs it too.
//! - temporal: two processes with `tasks.executor = "temporal"` (each a
//!   Temporal worker) against a `temporal server start-dev` (in memory) the
//!   bench starts on free ports (`$TEMPORAL_CLI`, see
//!   scripts/temporal-cli.sh); then Temporal's own floor on the same
//!   server: 1,000 trivial workflows (one no-op activity), at most 100 at a
//!   time, on two workers — rackflow's workflow rate (1,000 / makespan) is
//!   printed as a ratio to it; and where a task workflow's time goes, from
//!   the histories of every tenth task (`temporal workflow show`).
//!
//! Each: 1,000 racks (2 compute trays + 1 NVLink switch tray each, imported
//! over gRPC — not measured, its time is printed), a one-stage firmware rule
//! (compute and switch trays in parallel, as rollout.rs), one run of one
//! phase over every rack with max_concurrent 100. Ideal = 1000 / 100 × 2 s =
//! 20 s; printed beside the makespan.
//!
//! Makespan = CreateOperationRun sent (bench clock) → the run's `finished_at`
//! (server clock; same machine). The time the bench's 20 ms poll of
//! GetOperationRun first saw the run terminal is printed too.
//!
//! Checks after each run (printed, and failing the bench when broken): every
//! target completed with exactly one firmware task (its own, completed), and
//! every updated component got exactly one firmware start summed over the
//! processes' sim call logs (`SimAdmin.GetCallLog`, read incrementally every
//! 200 ms, a gap in the sequence fails). Tasks executed per process are the
//! racks with a firmware start in that process's log.
//!
//! Where the time goes, per slot (as rollout.rs's makespan): a slot freed by
//! the k-th finishing task is taken by the (k+100)-th created child; mean
//! freed → next child created, created → started, and the executor's time
//! over the 2 s update; plus utilisation = Σ task (finished − started) /
//! (100 × makespan); and how long CreateOperationRun took, beside a
//! PreviewOperationRun of the same request sent just before (planning
//! only, nothing written; not part of the makespan).
//!
//! The servers log at info (common::ServeProcess); with `RUST_LOG` set in
//! the bench's environment their logs are copied to the temp dir and the
//! paths printed.

// A bench: a panic is the failure report.
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{ServeProcess, free_addr};
use rackflow_api::sim::v1::sim_admin_client::SimAdminClient;
use rackflow_api::sim::v1::{CallLogEntry, GetCallLogRequest};
use rackflow_api::v1 as pb;
use rackflow_api::v1::flow_client::FlowClient;
use rackflow_testkit::pg_instance::{PgDatabase, shared_server_url};
use tonic::transport::Channel;

const RACKS: usize = 1000;
const LIMIT: usize = 100;
const FIRMWARE_MS: u64 = 2000;
/// Compute trays per rack (plus one NVLink switch tray).
const COMPUTE: usize = 2;
/// Racks imported concurrently.
const IMPORT_CONCURRENCY: usize = 16;

/// A replica's configuration (without `[database]`); `extra` is appended
/// before the tables.
fn config(extra: &str) -> String {
    format!(
        r"shutdown_grace_secs = 1
{extra}

[planner]
max_candidate_targets = 0

[sim]
firmware_update_ms = {FIRMWARE_MS}
power_ms = 0
jitter = 0.0
"
    )
}

fn ts_ms(t: &prost_types::Timestamp) -> f64 {
    t.seconds as f64 * 1000.0 + f64::from(t.nanos) / 1e6
}

fn now_ms() -> f64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    d.as_secs_f64() * 1000.0
}

/// `r-0003` of `r-0003-1-0`.
fn rack_of(component: &str) -> String {
    component.get(..6).unwrap_or(component).to_string()
}

/// One replica's sim call log, read incrementally in the background.
struct CallLog {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<Vec<CallLogEntry>>,
}

impl CallLog {
    fn follow(name: &'static str, addr: SocketAddr) -> CallLog {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let mut client = SimAdminClient::connect(format!("http://{addr}"))
                .await
                .unwrap_or_else(|e| panic!("connect to SimAdmin of {name}: {e}"));
            let mut entries: Vec<CallLogEntry> = Vec::new();
            let mut last = 0;
            loop {
                let done = *stopped.borrow();
                let new = client
                    .get_call_log(GetCallLogRequest {
                        after_sequence: last,
                    })
                    .await
                    .unwrap_or_else(|e| panic!("GetCallLog of {name}: {e}"))
                    .into_inner()
                    .entries;
                if let Some(first) = new.first() {
                    assert_eq!(
                        first.sequence,
                        last + 1,
                        "the sim call log of {name} dropped entries between two reads"
                    );
                    last = new.last().unwrap().sequence;
                }
                entries.extend(new);
                if done {
                    return entries;
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                    _ = stopped.changed() => {}
                }
            }
        });
        CallLog { stop, task }
    }

    /// A last read, then the whole log.
    async fn finish(self) -> Vec<CallLogEntry> {
        let _ = self.stop.send(true);
        self.task.await.expect("call log reader")
    }
}

async fn connect(addr: SocketAddr) -> FlowClient<Channel> {
    FlowClient::connect(format!("http://{addr}"))
        .await
        .expect("connect")
        .max_decoding_message_size(256 << 20)
}

/// Racks `r-NNNN` with [`COMPUTE`] compute trays and one switch tray;
/// returns the rack names and the component ids the rule updates.
async fn import_fleet(client: &FlowClient<Channel>) -> (Vec<String>, BTreeSet<String>) {
    let mut names = Vec::new();
    let mut components_all = BTreeSet::new();
    let mut requests = Vec::new();
    for n in 0..RACKS {
        let ext = format!("r-{n:04}");
        let mut components = Vec::new();
        for (ty, count) in [
            (pb::ComponentType::Compute, COMPUTE),
            (pb::ComponentType::Nvswitch, 1),
        ] {
            for i in 0..count {
                let id = format!("{ext}-{}-{i}", ty as i32);
                components_all.insert(id.clone());
                components.push(pb::Component {
                    r#type: ty as i32,
                    info: Some(pb::DeviceInfo {
                        name: id.clone(),
                        ..Default::default()
                    }),
                    component_id: id,
                    ..Default::default()
                });
            }
        }
        requests.push(pb::CreateExpectedRackRequest {
            rack: Some(pb::Rack {
                info: Some(pb::DeviceInfo {
                    name: ext.clone(),
                    ..Default::default()
                }),
                external_id: ext.clone(),
                components,
                ..Default::default()
            }),
        });
        names.push(ext);
    }
    let queue = std::sync::Arc::new(std::sync::Mutex::new(requests));
    let mut workers = Vec::new();
    for _ in 0..IMPORT_CONCURRENCY {
        let queue = queue.clone();
        let mut client = client.clone();
        workers.push(tokio::spawn(async move {
            loop {
                let next = queue.lock().unwrap().pop();
                let Some(request) = next else { break };
                client.create_expected_rack(request).await.expect("rack");
            }
        }));
    }
    for w in workers {
        w.await.expect("import worker");
    }
    (names, components_all)
}

fn run_request(racks: &[String], max_concurrent: i32) -> pb::CreateOperationRunRequest {
    rackflow_testkit::flow::rollout_request("scale", racks, max_concurrent)
}

async fn get_run(client: &mut FlowClient<Channel>, id: &pb::Uuid) -> pb::OperationRunSummary {
    client
        .get_operation_run(pb::GetOperationRunRequest {
            id: Some(id.clone()),
            include_stats: false,
        })
        .await
        .expect("get run")
        .into_inner()
        .operation_run
        .and_then(|r| r.summary)
        .expect("summary")
}

fn is_terminal(run: &pb::OperationRunSummary) -> bool {
    let status = run.state.as_ref().map_or(0, |s| s.status);
    status != pb::OperationRunStatus::Pending as i32
        && status != pb::OperationRunStatus::Running as i32
}

/// One scale bench with `replicas` `rackflow serve` processes.
/// Runs one scenario; returns its makespan and its targets' task ids.
fn scale(name: &str, replicas: usize, extra_config: &str) -> (Duration, Vec<String>) {
    let names: [&'static str; 2] = ["A", "B"];
    let db = PgDatabase::create(&shared_server_url());
    let cfg = config(extra_config);
    let t = Instant::now();
    let servers: Vec<ServeProcess> = (0..replicas)
        .map(|_| ServeProcess::start_postgres(free_addr(), db.url(), &cfg))
        .collect();
    let started = t.elapsed();
    println!(
        "scale {name}: {RACKS} racks, max_concurrent {LIMIT}, {FIRMWARE_MS} ms per rack, one phase; \
         {replicas} rackflow serve process{} on PostgreSQL (fresh database {}){}",
        if replicas == 1 { "" } else { "es" },
        db.name(),
        if extra_config.is_empty() {
            String::new()
        } else {
            format!("; config {}", extra_config.trim().replace('\n', " "))
        }
    );
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (problems, makespan, task_ids) = runtime.block_on(async {
        let mut client = connect(addrs[0]).await;
        rackflow_testkit::flow::create_one_stage_firmware_rule(&mut client).await;
        let t = Instant::now();
        let (racks, components) = import_fleet(&client).await;
        let import = t.elapsed();
        println!(
            "  setup: processes up in {:.1} s; fleet import {:.1} s ({} racks, {} components, \
             {IMPORT_CONCURRENCY} concurrent CreateExpectedRack through A; not measured)",
            started.as_secs_f64(),
            import.as_secs_f64(),
            racks.len(),
            racks.len() * (COMPUTE + 1)
        );
        let logs: Vec<CallLog> = addrs
            .iter()
            .enumerate()
            .map(|(i, a)| CallLog::follow(names[i], *a))
            .collect();

        let request = run_request(&racks, LIMIT as i32);
        // The same plan without writing it (not part of the makespan): how
        // much of CreateOperationRun is planning.
        let t = Instant::now();
        rackflow_api::v1::flow_extensions_client::FlowExtensionsClient::connect(format!(
            "http://{}",
            addrs[0]
        ))
        .await
        .expect("connect")
        .max_decoding_message_size(256 << 20)
        .preview_operation_run(request.clone())
        .await
        .expect("preview run");
        let preview = t.elapsed().as_secs_f64() * 1000.0;
        let sent_ms = now_ms();
        let sent = Instant::now();
        let id = client
            .create_operation_run(request)
            .await
            .expect("create run")
            .into_inner()
            .id
            .expect("id");
        let create_rpc = sent.elapsed().as_secs_f64() * 1000.0;
        let run = loop {
            let run = get_run(&mut client, &id).await;
            if is_terminal(&run) {
                break run;
            }
            assert!(
                sent.elapsed() < Duration::from_secs(600),
                "the run did not finish within 10 minutes"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let polled = sent.elapsed().as_secs_f64();
        let finished_ms = run.finished_at.as_ref().map(ts_ms).expect("finished_at");
        let makespan = (finished_ms - sent_ms) / 1000.0;
        let ideal = (RACKS / LIMIT) as f64 * FIRMWARE_MS as f64 / 1000.0;
        let mut entries = Vec::new();
        for log in logs {
            entries.push(log.finish().await);
        }

        // Targets and their tasks.
        let targets = client
            .list_operation_run_targets(pb::ListOperationRunTargetsRequest {
                operation_run_id: Some(id.clone()),
                pagination: Some(pb::Pagination {
                    offset: 0,
                    limit: 0,
                }),
                phase_scope: pb::OperationRunTargetPhaseScope::CurrentAndCompletedPhases as i32,
                ..Default::default()
            })
            .await
            .expect("targets")
            .into_inner()
            .targets;
        let listed = client
            .list_tasks(pb::ListTasksRequest {
                pagination: Some(pb::Pagination {
                    offset: 0,
                    limit: 0,
                }),
                ..Default::default()
            })
            .await
            .expect("list tasks")
            .into_inner();
        let mut tasks_of_rack: HashMap<String, Vec<&pb::Task>> = HashMap::new();
        for t in &listed.tasks {
            if t.operation.starts_with("firmware_control") {
                let rack = t.rack_id.as_ref().map(|u| u.id.clone()).unwrap_or_default();
                tasks_of_rack.entry(rack).or_default().push(t);
            }
        }
        let mut problems = Vec::new();
        if listed.tasks.len() != listed.total as usize {
            problems.push(format!(
                "ListTasks returned {} of {} tasks",
                listed.tasks.len(),
                listed.total
            ));
        }
        let completed = pb::OperationRunTargetStatus::Completed as i32;
        let not_completed = targets.iter().filter(|t| t.status != completed).count();
        let mut wrong_tasks = 0;
        for target in &targets {
            let rack = target
                .rack_id
                .as_ref()
                .map(|u| u.id.clone())
                .unwrap_or_default();
            let tasks = tasks_of_rack.get(&rack).map_or(&[][..], |v| &v[..]);
            if tasks.len() != 1
                || tasks[0].id != target.task_id
                || tasks[0].status != pb::TaskStatus::Completed as i32
            {
                wrong_tasks += 1;
            }
        }
        if targets.len() != RACKS || not_completed > 0 || wrong_tasks > 0 {
            problems.push(format!(
                "{} targets, {not_completed} not completed, {wrong_tasks} without exactly one \
                 completed firmware task of their own",
                targets.len()
            ));
        }
        println!(
            "  run {}: {} targets, {} completed, {} firmware tasks on {} racks, \
             {wrong_tasks} targets without exactly one task of their own",
            run.status_message,
            targets.len(),
            targets.len() - not_completed,
            tasks_of_rack.values().map(Vec::len).sum::<usize>(),
            tasks_of_rack.len()
        );

        // Firmware starts per component over every process's sim.
        let mut starts: BTreeMap<String, usize> = BTreeMap::new();
        let mut per_process = Vec::new();
        for (i, log) in entries.iter().enumerate() {
            let mut racks_here = BTreeSet::new();
            let mut n = 0;
            for e in log.iter().filter(|e| e.call == "firmware_start") {
                for c in &e.components {
                    *starts.entry(c.clone()).or_insert(0) += 1;
                    racks_here.insert(rack_of(c));
                    n += 1;
                }
            }
            per_process.push(format!(
                "{}: {} tasks (racks with a firmware start), {n} component starts, {} sim calls",
                names[i],
                racks_here.len(),
                log.len()
            ));
        }
        let twice = starts.values().filter(|&&n| n > 1).count();
        let never = components
            .iter()
            .filter(|c| !starts.contains_key(*c))
            .count();
        let total: usize = starts.values().sum();
        println!("  executed per process: {}", per_process.join("; "));
        println!(
            "  firmware starts: {total} for {} components; {twice} components started more than \
             once, {never} never",
            components.len()
        );
        if twice > 0 || never > 0 || total != components.len() {
            problems.push(format!(
                "firmware starts: {total} for {} components, {twice} twice or more, {never} never",
                components.len()
            ));
        }

        // Where the time goes.
        let task_ids: Vec<pb::Uuid> = targets.iter().filter_map(|t| t.task_id.clone()).collect();
        let all: Vec<&pb::Task> = listed
            .tasks
            .iter()
            .filter(|t| t.id.as_ref().is_some_and(|id| task_ids.contains(id)))
            .collect();
        let times = |f: fn(&pb::Task) -> Option<&prost_types::Timestamp>| {
            let mut v: Vec<f64> = all.iter().filter_map(|t| f(t)).map(ts_ms).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let created = times(|t| t.created_at.as_ref());
        let finished = times(|t| t.finished_at.as_ref());
        let mean = |v: Vec<f64>| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let dispatch = mean(
            (LIMIT..created.len().min(finished.len() + LIMIT))
                .map(|k| created[k] - finished[k - LIMIT])
                .collect(),
        );
        let spans = |from: fn(&pb::Task) -> Option<&prost_types::Timestamp>,
                     to: fn(&pb::Task) -> Option<&prost_types::Timestamp>| {
            all.iter()
                .filter_map(|t| Some(ts_ms(to(t)?) - ts_ms(from(t)?)))
                .collect::<Vec<f64>>()
        };
        let start = mean(spans(|t| t.created_at.as_ref(), |t| t.started_at.as_ref()));
        let busy = spans(|t| t.started_at.as_ref(), |t| t.finished_at.as_ref());
        let execute = mean(busy.iter().map(|b| b - FIRMWARE_MS as f64).collect());
        let first_created = created.first().copied().unwrap_or(sent_ms) - sent_ms;
        let last_finished = finished.last().copied().unwrap_or(finished_ms);
        let utilisation = busy.iter().sum::<f64>() / (LIMIT as f64 * (finished_ms - sent_ms));
        println!(
            "  per slot: freed -> next child created {dispatch:.1} ms, created -> started \
             {start:.1} ms, executor over {FIRMWARE_MS} ms {execute:.1} ms; first child created \
             {first_created:.0} ms after the request, last task finished -> run finished {:.0} ms; \
             utilisation {utilisation:.3}",
            finished_ms - last_finished
        );
        // Waves: the children in creation order, LIMIT at a time.
        let spreads: Vec<f64> = created
            .chunks(LIMIT)
            .filter(|w| w.len() == LIMIT)
            .map(|w| w[LIMIT - 1] - w[0])
            .collect();
        let since = |t: Option<&prost_types::Timestamp>| t.map_or(f64::NAN, |t| ts_ms(t) - sent_ms);
        println!(
            "  start: CreateOperationRun RPC {create_rpc:.0} ms (PreviewOperationRun of the same \
             request before it, plan only: {preview:.0} ms); run created_at +{:.0} ms, \
             started_at +{:.0} ms; wave spread (1st -> {LIMIT}th child created) mean {:.0} ms, \
             max {:.0} ms over {} waves",
            since(run.created_at.as_ref()),
            since(run.started_at.as_ref()),
            mean(spreads.clone()),
            spreads.iter().copied().fold(0.0, f64::max),
            spreads.len()
        );
        println!(
            "  makespan {makespan:.3} s (CreateOperationRun sent -> run finished_at; poll saw it \
             at {polled:.3} s)  ideal {ideal:.3} s  ratio {:.3}",
            makespan / ideal
        );
        let task_ids: Vec<String> = targets
            .iter()
            .filter_map(|t| t.task_id.as_ref().map(|u| u.id.clone()))
            .collect();
        (problems, makespan, task_ids)
    });
    for server in &servers {
        if std::env::var_os("RUST_LOG").is_some() {
            let keep = std::env::temp_dir()
                .join(format!("rackflow-scale-{name}-{}.log", server.addr.port()));
            let _ = std::fs::copy(&server.log, &keep);
            println!("  server log kept: {}", keep.display());
        }
    }
    drop(servers);
    drop(db);
    assert!(problems.is_empty(), "scale {name}: {}", problems.join("; "));
    (Duration::from_secs_f64(makespan), task_ids)
}

fn main() {
    // Every non-flag argument is a name filter (`-- one two`); none runs
    // every bench.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wants =
        |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()));
    if wants("one") {
        scale("one", 1, "");
    }
    if wants("two") {
        scale("two", 2, "");
    }
    // Diagnosis of `two`: a replica's dispatcher is woken by its own events
    // only (its children finishing) and otherwise polls every
    // `dispatcher.poll_interval_ms` (default 10 s), so the replica that did
    // not receive CreateOperationRun rarely gets a slot. The same with a
    // 200 ms poll (as the cluster tests use).
    if wants("two-poll200") {
        scale("two-poll200", 2, "[dispatcher]\npoll_interval_ms = 200\n");
    }
    if wants("temporal") {
        temporal();
    }
}

/// Where a task workflow's time goes, from the histories of every tenth
/// task: mean per workflow of the waits for a worker (workflow tasks and
/// activities scheduled -> started), the workflow tasks' own time, the
/// attempts' time over the 2 s update, and start -> close.
fn workflow_timeline(server: &rackflow_testkit::temporal::TemporalDevServer, task_ids: &[String]) {
    fn ms(event: &serde_json::Value) -> f64 {
        let text = event["eventTime"].as_str().unwrap_or("");
        chrono::DateTime::parse_from_rfc3339(text)
            .map(|t| t.timestamp_micros() as f64 / 1000.0)
            .unwrap_or(f64::NAN)
    }
    let (mut total, mut wft_wait, mut wft_run, mut act_wait, mut act_over, mut wfts, mut acts) =
        (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    let sample: Vec<&String> = task_ids.iter().step_by(10).collect();
    for id in &sample {
        let out = server.cli_output(&["workflow", "show", "-w", id, "-o", "json"]);
        let history: serde_json::Value = serde_json::from_str(&out).expect("history json");
        let events = history["events"].as_array().expect("events");
        let mut scheduled: HashMap<String, f64> = HashMap::new();
        let mut started: HashMap<String, f64> = HashMap::new();
        let (mut first, mut last) = (f64::NAN, f64::NAN);
        for e in events {
            let t = ms(e);
            let id = e["eventId"].as_str().unwrap_or("").to_string();
            match e["eventType"].as_str().unwrap_or("") {
                "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED" => first = t,
                "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED" => last = t,
                "EVENT_TYPE_WORKFLOW_TASK_SCHEDULED" | "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED" => {
                    scheduled.insert(id, t);
                }
                "EVENT_TYPE_WORKFLOW_TASK_STARTED" => {
                    let from = e["workflowTaskStartedEventAttributes"]["scheduledEventId"]
                        .as_str()
                        .unwrap_or("");
                    wft_wait += t - scheduled.get(from).copied().unwrap_or(t);
                    started.insert(id, t);
                    wfts += 1.0;
                }
                "EVENT_TYPE_WORKFLOW_TASK_COMPLETED" => {
                    let from = e["workflowTaskCompletedEventAttributes"]["startedEventId"]
                        .as_str()
                        .unwrap_or("");
                    wft_run += t - started.get(from).copied().unwrap_or(t);
                }
                "EVENT_TYPE_ACTIVITY_TASK_STARTED" => {
                    let from = e["activityTaskStartedEventAttributes"]["scheduledEventId"]
                        .as_str()
                        .unwrap_or("");
                    act_wait += t - scheduled.get(from).copied().unwrap_or(t);
                    started.insert(id, t);
                    acts += 1.0;
                }
                "EVENT_TYPE_ACTIVITY_TASK_COMPLETED" => {
                    let from = e["activityTaskCompletedEventAttributes"]["startedEventId"]
                        .as_str()
                        .unwrap_or("");
                    act_over += t - started.get(from).copied().unwrap_or(t) - FIRMWARE_MS as f64;
                }
                _ => {}
            }
        }
        total += last - first;
    }
    let n = sample.len().max(1) as f64;
    println!(
        "  where a task workflow's time goes ({} histories, means per workflow): start -> close \
         {:.0} ms; {:.1} workflow tasks waiting {:.0} ms for a worker and running {:.0} ms \
         (report saves and the outcome, local activities, included); {:.1} attempts waiting \
         {:.0} ms for a worker, each running {:.0} ms over the {FIRMWARE_MS} ms update",
        sample.len(),
        total / n,
        wfts / n,
        wft_wait / n,
        wft_run / n,
        acts / n,
        act_wait / n,
        act_over / acts.max(1.0)
    );
}

/// Scenario `temporal`, then the floor on the same server.
fn temporal() {
    let server = rackflow_testkit::temporal::TemporalDevServer::start_in_memory();
    let extra = format!(
        "\n[tasks]\nexecutor = \"temporal\"\n\n[temporal]\naddress = \"{}\"\n",
        server.address()
    );
    let (makespan, task_ids) = scale("temporal", 2, &extra);
    workflow_timeline(&server, &task_ids);
    let settings = rackflow_temporal::TemporalSettings {
        address: server.address(),
        namespace: "default".into(),
        task_queue: String::new(),
        heartbeat_timeout: Duration::from_secs(10),
        sticky_timeout: Duration::from_secs(3),
        max_concurrent_activities: 1000,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let floor = runtime
        .block_on(rackflow_temporal::floor::measure(
            &settings, 2, RACKS, LIMIT,
        ))
        .expect("the trivial-workflow floor");
    let ours = RACKS as f64 / makespan.as_secs_f64();
    println!(
        "  temporal floor: {} trivial workflows (one no-op activity each, at most {LIMIT} at a \
         time, 2 workers) in {:.1} s = {:.1} workflows/s; rackflow's task workflows {:.1}/s \
         (1000 / makespan) = {:.3} × the floor",
        floor.workflows,
        floor.elapsed.as_secs_f64(),
        floor.rate(),
        ours,
        ours / floor.rate()
    );
}
