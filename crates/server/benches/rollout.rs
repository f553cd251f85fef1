//! Rollout and task benchmarks, rerun with
//! `cargo bench -p rackflow-server --bench rollout [NAME] [--pg]`
//! (NAME filters, any number of them: makespan, first-task, concurrent, tasks,
//! task-wall).
//!
//! Store: a SQLite temp file per bench; with `--pg` (or the environment
//! variable `RACKFLOW_BENCH_DATABASE_URL`) a fresh PostgreSQL database per
//! bench instead, created on `RACKFLOW_BENCH_DATABASE_URL`, else
//! `DATABASE_URL`, else `postgres://postgres@127.0.0.1:5432/postgres`, and
//! dropped at the end. Every bench's header names its store, so both can be
//! compared in one sitting.
//!
//! Every figure is printed with the baseline it is compared to, measured in
//! the same run on the same machine:
//! - makespan: 100 racks, max_concurrent 10, one phase, sim firmware time
//!   500 ms per rack (a one-stage firmware rule: compute and NVLink switch
//!   trays in parallel), ideal = 100 / 10 × 500 ms = 5 s; reported as
//!   makespan / ideal (goal ≤ 1.05).
//! - first-task: CreateOperationRun sent → first child task `started_at`
//!   (goal ≤ 50 ms), median of 10 runs, against the Version round trip.
//! - concurrent: 20 runs of 100 racks each at once, max_concurrent 5;
//!   sampled every 50 ms from the simulated fleet: mean in-flight racks per
//!   run over its limit while it still has at least `limit` racks left
//!   (goal ≥ 0.95).
//! - tasks: firmware-upgrade tasks per second end to end on a 40-rack fleet
//!   with zero sim latency (our own overhead), against Version RPCs per
//!   second.
//! - task-wall: one firmware-upgrade task's wall time over its simulated
//!   hardware time with realistic latency (goal ≤ 1.02).
//! - observed: the makespan rollout with `/metrics` scraped every 250 ms and
//!   the console's live stream of the run attached, against the same
//!   rollout unobserved, alternated 3 × 2 in one run; medians (goal: ≤ 2 %
//!   worse).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rackflow_api::v1 as pb;
use rackflow_api::v1::flow_client::FlowClient;
use rackflow_engine::sim::{SimConfig, SimFleet};
use rackflow_store::DbTarget;
use rackflow_testkit::pg_instance::{PgDatabase, shared_server_url};
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;
use uuid::Uuid;

struct Bench {
    client: FlowClient<Channel>,
    fleet: Arc<SimFleet>,
    shutdown: CancellationToken,
    server: tokio::task::JoinHandle<()>,
    /// The SQLite file, or the PostgreSQL database (dropped on drop).
    db: BenchDb,
}

/// Where the benches store: `None` = SQLite, else the PostgreSQL server's
/// admin URL (fresh database per bench). Set once in `main`.
static POSTGRES: OnceLock<Option<String>> = OnceLock::new();

fn postgres_admin_url() -> Option<&'static str> {
    POSTGRES.get().and_then(|u| u.as_deref())
}

/// The store, as printed in each bench's header.
fn store_label() -> &'static str {
    if postgres_admin_url().is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    }
}

enum BenchDb {
    Sqlite(std::path::PathBuf),
    Postgres(PgDatabase),
}

/// The console and `/metrics` addresses of an observed bench server.
#[derive(Clone, Copy)]
struct Observed {
    console: std::net::SocketAddr,
    metrics: std::net::SocketAddr,
}

fn free_port() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
}

impl Bench {
    async fn start(sim: SimConfig) -> Bench {
        Self::start_observed(sim, None).await
    }

    async fn start_observed(sim: SimConfig, observed: Option<Observed>) -> Bench {
        let (db, target) = match postgres_admin_url() {
            None => {
                let path =
                    std::env::temp_dir().join(format!("rackflow-bench-{}.db", Uuid::new_v4()));
                (BenchDb::Sqlite(path.clone()), DbTarget::Sqlite(path))
            }
            Some(admin) => {
                // Blocks on a thread of its own (the test kit's).
                let db = PgDatabase::create(admin);
                let target = DbTarget::Postgres(db.url().to_string());
                (BenchDb::Postgres(db), target)
            }
        };
        let store = rackflow_store::open_store(&target).await.expect("store");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let fleet = SimFleet::new(sim.clone());
        let mut config = rackflow_server::Config {
            sim,
            planner: rackflow_server::config::PlannerConfig {
                max_candidate_targets: 0,
            },
            ..Default::default()
        };
        if let Some(o) = observed {
            config.console.enabled = true;
            config.console.listen = o.console;
            config.metrics.enabled = true;
            config.metrics.listen = o.metrics;
        }
        let shutdown = CancellationToken::new();
        let server = {
            let (fleet, shutdown) = (fleet.clone(), shutdown.clone());
            tokio::spawn(async move {
                rackflow_server::serve_with_fleet(config, store, fleet, listener, shutdown)
                    .await
                    .expect("server");
            })
        };
        let client = FlowClient::connect(format!("http://{addr}"))
            .await
            .expect("connect");
        Bench {
            client,
            fleet,
            shutdown,
            server,
            db,
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        let _ = self.server.await;
        match self.db {
            BenchDb::Sqlite(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
            }
            // DROP DATABASE … WITH (FORCE), on a thread of its own.
            BenchDb::Postgres(db) => drop(db),
        }
    }

    /// Racks `r-<prefix><n>` with `compute` compute trays and one switch tray.
    async fn fleet(&mut self, prefix: &str, racks: usize, compute: usize) -> Vec<String> {
        let mut names = Vec::new();
        for n in 0..racks {
            let ext = format!("r-{prefix}{n:04}");
            let mut components = Vec::new();
            for (ty, count) in [
                (pb::ComponentType::Compute, compute),
                (pb::ComponentType::Nvswitch, 1),
            ] {
                for i in 0..count {
                    components.push(pb::Component {
                        r#type: ty as i32,
                        info: Some(pb::DeviceInfo {
                            name: format!("{ext}-{}-{i}", ty as i32),
                            ..Default::default()
                        }),
                        component_id: format!("{ext}-{}-{i}", ty as i32),
                        ..Default::default()
                    });
                }
            }
            self.client
                .create_expected_rack(pb::CreateExpectedRackRequest {
                    rack: Some(pb::Rack {
                        info: Some(pb::DeviceInfo {
                            name: ext.clone(),
                            ..Default::default()
                        }),
                        external_id: ext.clone(),
                        components,
                        ..Default::default()
                    }),
                })
                .await
                .expect("rack");
            names.push(ext);
        }
        names
    }

    /// Makes firmware upgrades one stage (compute and switch trays in
    /// parallel), so a rack's hardware time is one firmware update.
    async fn one_stage_firmware_rule(&mut self) {
        rackflow_testkit::flow::create_one_stage_firmware_rule(&mut self.client).await;
    }

    async fn create_run(&mut self, racks: &[String], max_concurrent: i32) -> pb::Uuid {
        let request = rackflow_testkit::flow::rollout_request("bench", racks, max_concurrent);
        self.client
            .create_operation_run(request)
            .await
            .expect("create run")
            .into_inner()
            .id
            .expect("id")
    }

    async fn wait_run(&mut self, id: &pb::Uuid, deadline: Duration) -> pb::OperationRunSummary {
        let start = Instant::now();
        loop {
            let run = self
                .client
                .get_operation_run(pb::GetOperationRunRequest {
                    id: Some(id.clone()),
                    include_stats: false,
                })
                .await
                .expect("get run")
                .into_inner()
                .operation_run
                .and_then(|r| r.summary)
                .expect("summary");
            let status = run.state.as_ref().map_or(0, |s| s.status);
            if status != pb::OperationRunStatus::Pending as i32
                && status != pb::OperationRunStatus::Running as i32
            {
                return run;
            }
            assert!(
                start.elapsed() < deadline,
                "run did not finish within {deadline:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
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

async fn makespan() {
    let sim = SimConfig {
        firmware_update_ms: 500,
        power_ms: 0,
        jitter: 0.0,
        ..SimConfig::default()
    };
    let mut b = Bench::start(sim).await;
    b.one_stage_firmware_rule().await;
    let racks = b.fleet("m", 100, 2).await;
    let start = Instant::now();
    let id = b.create_run(&racks, 10).await;
    let run = b.wait_run(&id, Duration::from_secs(120)).await;
    let wall = start.elapsed();
    let ideal = Duration::from_millis(100 / 10 * 500);
    // Where the time goes: each slot freed by the k-th finishing task is
    // taken by the (k+10)-th created one.
    let targets = b
        .client
        .list_operation_run_targets(pb::ListOperationRunTargetsRequest {
            operation_run_id: Some(id.clone()),
            pagination: Some(pb::Pagination {
                offset: 0,
                limit: 0,
            }),
            ..Default::default()
        })
        .await
        .expect("targets")
        .into_inner()
        .targets;
    let task_ids = targets.iter().filter_map(|t| t.task_id.clone()).collect();
    let tasks = b
        .client
        .get_tasks_by_i_ds(pb::GetTasksByIDsRequest { task_ids })
        .await
        .expect("tasks")
        .into_inner()
        .tasks;
    let times = |f: fn(&pb::Task) -> Option<&prost_types::Timestamp>| {
        let mut v: Vec<f64> = tasks.iter().filter_map(f).map(ts_ms).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let created = times(|t| t.created_at.as_ref());
    let started = times(|t| t.started_at.as_ref());
    let finished = times(|t| t.finished_at.as_ref());
    let mean = |v: Vec<f64>| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let dispatch = mean(
        (10..created.len())
            .map(|k| created[k] - finished[k - 10])
            .collect(),
    );
    let start = mean(
        tasks
            .iter()
            .filter_map(|t| Some(ts_ms(t.started_at.as_ref()?) - ts_ms(t.created_at.as_ref()?)))
            .collect(),
    );
    let execute = mean(
        tasks
            .iter()
            .filter_map(|t| {
                Some(ts_ms(t.finished_at.as_ref()?) - ts_ms(t.started_at.as_ref()?) - 500.0)
            })
            .collect(),
    );
    let _ = started;
    println!(
        "makespan [{}]: 100 racks, max_concurrent 10, 500 ms per rack, one phase",
        store_label()
    );
    println!(
        "  per slot: freed -> next child created {dispatch:.1} ms, created -> started {start:.1} ms, executor overhead over 500 ms {execute:.1} ms"
    );
    println!(
        "  status {}  wall {:.3} s  ideal {:.3} s  ratio {:.3}",
        run.status_message,
        wall.as_secs_f64(),
        ideal.as_secs_f64(),
        wall.as_secs_f64() / ideal.as_secs_f64()
    );
    b.stop().await;
}

async fn first_task() {
    let sim = SimConfig {
        firmware_update_ms: 50,
        power_ms: 0,
        jitter: 0.0,
        ..SimConfig::default()
    };
    let mut b = Bench::start(sim).await;
    let racks = b.fleet("f", 10, 2).await;
    let mut latencies = Vec::new();
    let mut version = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        b.client
            .version(pb::VersionRequest {})
            .await
            .expect("version");
        version.push(t.elapsed().as_secs_f64() * 1000.0);
        let sent = now_ms();
        let id = b.create_run(&racks, 10).await;
        b.wait_run(&id, Duration::from_secs(30)).await;
        let targets = b
            .client
            .list_operation_run_targets(pb::ListOperationRunTargetsRequest {
                operation_run_id: Some(id),
                ..Default::default()
            })
            .await
            .expect("targets")
            .into_inner()
            .targets;
        let task_ids = targets.iter().filter_map(|t| t.task_id.clone()).collect();
        let tasks = b
            .client
            .get_tasks_by_i_ds(pb::GetTasksByIDsRequest { task_ids })
            .await
            .expect("tasks")
            .into_inner()
            .tasks;
        let first = tasks
            .iter()
            .filter_map(|t| t.started_at.as_ref())
            .map(ts_ms)
            .fold(f64::INFINITY, f64::min);
        latencies.push(first - sent);
    }
    latencies.sort_by(f64::total_cmp);
    version.sort_by(f64::total_cmp);
    println!(
        "first-task [{}]: CreateOperationRun sent -> first child task started (10 runs of 10 racks)",
        store_label()
    );
    println!(
        "  p50 {:.2} ms  max {:.2} ms  baseline Version RPC p50 {:.3} ms",
        latencies[5], latencies[9], version[5]
    );
    b.stop().await;
}

async fn concurrent() {
    let sim = SimConfig {
        firmware_update_ms: 500,
        power_ms: 0,
        jitter: 0.0,
        ..SimConfig::default()
    };
    let mut b = Bench::start(sim).await;
    b.one_stage_firmware_rule().await;
    const RUNS: usize = 20;
    const LIMIT: usize = 5;
    let mut rack_sets = Vec::new();
    for r in 0..RUNS {
        rack_sets.push(b.fleet(&format!("c{r:02}-"), 100, 1).await);
    }
    let run_of_rack: HashMap<String, usize> = rack_sets
        .iter()
        .enumerate()
        .flat_map(|(i, set)| set.iter().map(move |r| (r.clone(), i)))
        .collect();
    let mut ids = Vec::new();
    for set in &rack_sets {
        ids.push(b.create_run(set, LIMIT as i32).await);
    }
    let start = Instant::now();
    let mut ratios: Vec<f64> = Vec::new();
    let mut done_at = vec![None; RUNS];
    loop {
        let states = b.fleet.component_states(&[]);
        let mut updating = vec![std::collections::HashSet::new(); RUNS];
        let mut finished = vec![std::collections::HashSet::new(); RUNS];
        for s in &states {
            let Some(&run) = run_of_rack.get(&s.rack) else {
                continue;
            };
            if s.firmware_updating {
                updating[run].insert(s.rack.clone());
            } else if s.firmware_version == "2.0.0" {
                finished[run].insert(s.rack.clone());
            }
        }
        let mut all_done = true;
        for run in 0..RUNS {
            // A rack is done when both its trays run 2.0.0 (2 components).
            let racks_done = states
                .iter()
                .filter(|s| run_of_rack.get(&s.rack) == Some(&run) && s.firmware_version == "2.0.0")
                .count()
                / 2;
            let remaining = 100 - racks_done;
            if remaining >= LIMIT {
                ratios.push(updating[run].len() as f64 / LIMIT as f64);
            }
            if remaining > 0 {
                all_done = false;
            } else if done_at[run].is_none() {
                done_at[run] = Some(start.elapsed());
            }
        }
        if all_done || start.elapsed() > Duration::from_secs(180) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mean = ratios.iter().sum::<f64>() / ratios.len().max(1) as f64;
    let slowest = done_at.iter().flatten().max().copied().unwrap_or_default();
    let ideal = Duration::from_millis(100 / LIMIT as u64 * 500);
    println!(
        "concurrent [{}]: {RUNS} runs x 100 racks, max_concurrent {LIMIT}, 500 ms per rack, {} samples",
        store_label(),
        ratios.len()
    );
    println!(
        "  mean in-flight / limit {:.3}  slowest run {:.2} s (ideal {:.2} s)",
        mean,
        slowest.as_secs_f64(),
        ideal.as_secs_f64()
    );
    b.stop().await;
}

async fn tasks_per_second() {
    let mut b = Bench::start(SimConfig::instant()).await;
    let racks = b.fleet("t", 40, 18).await;
    let rounds = 5;
    let start = Instant::now();
    let mut all = Vec::new();
    for _ in 0..rounds {
        let mut ids = Vec::new();
        for rack in &racks {
            let reply = b
                .client
                .upgrade_firmware(pb::UpgradeFirmwareRequest {
                    target_spec: Some(pb::OperationTargetSpec {
                        targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
                            targets: vec![pb::RackTarget {
                                identifier: Some(pb::rack_target::Identifier::ExternalId(
                                    rack.clone(),
                                )),
                                component_types: vec![],
                            }],
                        })),
                    }),
                    target_version: Some("2.0.0".into()),
                    ..Default::default()
                })
                .await
                .expect("submit");
            ids.extend(reply.into_inner().task_ids);
        }
        // Wait for this round before the next (same racks would conflict).
        loop {
            let tasks = b
                .client
                .get_tasks_by_i_ds(pb::GetTasksByIDsRequest {
                    task_ids: ids.clone(),
                })
                .await
                .expect("tasks")
                .into_inner()
                .tasks;
            if tasks
                .iter()
                .all(|t| t.status == pb::TaskStatus::Completed as i32)
            {
                break;
            }
            assert!(
                tasks
                    .iter()
                    .all(|t| t.status != pb::TaskStatus::Failed as i32),
                "a task failed"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        all.extend(ids);
    }
    let wall = start.elapsed();
    let t = Instant::now();
    for _ in 0..200 {
        b.client
            .version(pb::VersionRequest {})
            .await
            .expect("version");
    }
    let version_rate = 200.0 / t.elapsed().as_secs_f64();
    let rate = all.len() as f64 / wall.as_secs_f64();
    println!(
        "tasks [{}]: {} firmware-upgrade tasks on 40 racks x 19 components, zero sim latency",
        store_label(),
        all.len()
    );
    println!(
        "  {:.1} tasks/s  ({:.2} ms each)  baseline Version RPC {:.0}/s  ratio {:.1} RPCs per task",
        rate,
        1000.0 / rate,
        version_rate,
        version_rate / rate
    );
    b.stop().await;
}

async fn task_wall() {
    let sim = SimConfig {
        firmware_update_ms: 2000,
        power_ms: 200,
        jitter: 0.0,
        ..SimConfig::default()
    };
    let mut b = Bench::start(sim).await;
    let racks = b.fleet("w", 1, 18).await;
    let start = Instant::now();
    let reply = b
        .client
        .upgrade_firmware(pb::UpgradeFirmwareRequest {
            target_spec: Some(pb::OperationTargetSpec {
                targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
                    targets: vec![pb::RackTarget {
                        identifier: Some(pb::rack_target::Identifier::ExternalId(racks[0].clone())),
                        component_types: vec![],
                    }],
                })),
            }),
            target_version: Some("2.0.0".into()),
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner();
    loop {
        let tasks = b
            .client
            .get_tasks_by_i_ds(pb::GetTasksByIDsRequest {
                task_ids: reply.task_ids.clone(),
            })
            .await
            .expect("tasks")
            .into_inner()
            .tasks;
        if tasks[0].status == pb::TaskStatus::Completed as i32 {
            break;
        }
        assert!(
            tasks[0].status != pb::TaskStatus::Failed as i32,
            "task failed: {}",
            tasks[0].message
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let wall = start.elapsed();
    // Built-in upgrade: compute stage then switch stage. Each stage's
    // simulated hardware time is the start call (power_ms / 10 in the sim),
    // the 2 s update, and the one status read (also power_ms / 10) that any
    // executor needs to learn the update finished.
    let hardware = Duration::from_millis(2 * (20 + 2000 + 20));
    let updates_only = Duration::from_millis(2 * 2000);
    println!(
        "task-wall [{}]: one firmware upgrade (built-in rule, 2 stages), sim 2 s per update",
        store_label()
    );
    println!(
        "  wall {:.3} s  hardware {:.3} s  ratio {:.4}  (over the bare updates alone: {:.4})",
        wall.as_secs_f64(),
        hardware.as_secs_f64(),
        wall.as_secs_f64() / hardware.as_secs_f64(),
        wall.as_secs_f64() / updates_only.as_secs_f64()
    );
    b.stop().await;
}

/// The makespan rollout's wall time over its ideal, observed or not.
async fn makespan_ratio(observe: bool) -> f64 {
    let sim = SimConfig {
        firmware_update_ms: 500,
        power_ms: 0,
        jitter: 0.0,
        ..SimConfig::default()
    };
    let observed = observe.then(|| Observed {
        console: free_port(),
        metrics: free_port(),
    });
    let mut b = Bench::start_observed(sim, observed).await;
    b.one_stage_firmware_rule().await;
    let racks = b.fleet("o", 100, 2).await;
    let start = Instant::now();
    let id = b.create_run(&racks, 10).await;
    let stop = CancellationToken::new();
    let mut watchers = Vec::new();
    if let Some(o) = observed {
        let http = reqwest::Client::new();
        // The console's live stream of the run, read to its end.
        let events = format!("http://{}/runs/{}/events", o.console, id.id);
        let (client, token) = (http.clone(), stop.clone());
        watchers.push(tokio::spawn(async move {
            let mut response = client.get(events).send().await.expect("events");
            let mut bytes = 0usize;
            loop {
                tokio::select! {
                    chunk = response.chunk() => match chunk {
                        Ok(Some(c)) => bytes += c.len(),
                        _ => break,
                    },
                    () = token.cancelled() => break,
                }
            }
            assert!(bytes > 0, "the live stream sent nothing");
        }));
        // A Prometheus scraping every 250 ms (60× the usual 15 s).
        let metrics = format!("http://{}/metrics", o.metrics);
        let token = stop.clone();
        watchers.push(tokio::spawn(async move {
            while !token.is_cancelled() {
                let body = http
                    .get(&metrics)
                    .send()
                    .await
                    .expect("scrape")
                    .text()
                    .await
                    .expect("body");
                assert!(body.ends_with("# EOF\n"));
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(250)) => {}
                    () = token.cancelled() => break,
                }
            }
        }));
    }
    b.wait_run(&id, Duration::from_secs(120)).await;
    let wall = start.elapsed();
    stop.cancel();
    for w in watchers {
        w.await.expect("watcher");
    }
    b.stop().await;
    wall.as_secs_f64() / Duration::from_millis(100 / 10 * 500).as_secs_f64()
}

async fn observed() {
    let (mut plain, mut watched) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        plain.push(makespan_ratio(false).await);
        watched.push(makespan_ratio(true).await);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (p, w) = (median(&mut plain), median(&mut watched));
    println!(
        "observed [{}]: makespan rollout, /metrics every 250 ms + the console's live stream vs none",
        store_label()
    );
    println!(
        "  makespan/ideal median of 3: plain {p:.3} {plain:.3?}  observed {w:.3} {watched:.3?}  observed/plain {:.4}",
        w / p
    );
}

fn main() {
    // RUST_LOG=warn shows what the server logs during a bench (lost claims,
    // slow writes); silent otherwise.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    // `--pg` or RACKFLOW_BENCH_DATABASE_URL: a fresh PostgreSQL database
    // per bench instead of a SQLite file.
    let env_url = std::env::var("RACKFLOW_BENCH_DATABASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty());
    let pg = std::env::args().skip(1).any(|a| a == "--pg");
    let _ = POSTGRES.set(match env_url {
        Some(url) => Some(url),
        None if pg => Some(shared_server_url()),
        None => None,
    });
    // Every non-flag argument is a name filter (`-- makespan concurrent
    // first-task`); none runs every bench.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wants =
        |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        if wants("makespan") {
            makespan().await;
        }
        if wants("first-task") {
            first_task().await;
        }
        if wants("concurrent") {
            concurrent().await;
        }
        if wants("tasks") {
            tasks_per_second().await;
        }
        if wants("task-wall") {
            task_wall().await;
        }
        if wants("observed") {
            observed().await;
        }
    });
}
