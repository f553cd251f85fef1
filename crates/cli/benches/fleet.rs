//! The fleet-scale benchmark (issue 18), rerun with
//! `cargo bench -p rackflow --bench fleet [-- NAME ...] [--pg]`
//! (NAME filters, any number of them: `tasks`, `r1000`, `r10000`; none runs
//! all three).
//!
//! Black box, as an operator of a large site would try it: one
//! `rackflow serve` OS process (this crate's release binary, logging at
//! info, `planner.max_candidate_targets = 0`) on a SQLite file, or with
//! `--pg` on a fresh PostgreSQL database (created on `DATABASE_URL`, else
//! `postgres://postgres@127.0.0.1:5432/postgres`, dropped at the end). The
//! fleet is `rackflow fleet generate` (GB200 racks: 18 compute and 9 NVLink
//! switch trays among 35 components) imported with `rackflow fleet
//! import`; the default firmware rule is the built-in order (compute trays,
//! then NVLink switch trays) polling every second; a run is one phase over
//! every rack, created and polled over gRPC (every 100 ms).
//!
//! - tasks: the simulated hardware answers at once (zero latency): 2,000
//!   racks at 1,000 in flight, firmware tasks per second end to end
//!   (CreateOperationRun sent → the run's `finished_at`), against the
//!   Version RPC rate measured on the same server just before.
//! - r1000: 1,000 racks at 100 in flight, 1 s per firmware update:
//!   makespan / ideal, ideal = 1,000 / 100 × 2 s.
//! - r10000: 10,000 racks at 1,000 in flight, 1 s per update: the fleet
//!   import's time, CreateOperationRun's time, makespan / ideal (ideal =
//!   10,000 / 1,000 × 2 s) and the server's peak RSS (`VmHWM`).
//!
//! Each run is checked before its figures are printed: finished
//! `completed`, every target `completed` with its own child task.

// A bench: a panic is the failure report.
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{
    ServeProcess, create_fast_default_rule, free_addr, path_str, rackflow, rackflow_within,
    temp_path,
};
use rackflow_api::v1 as pb;
use rackflow_api::v1::flow_client::FlowClient;
use rackflow_testkit::pg_instance::{PgDatabase, shared_server_url};
use tonic::transport::Channel;

/// The server's configuration (without `[database]`).
fn config(firmware_ms: u64) -> String {
    format!(
        r"shutdown_grace_secs = 1

[planner]
max_candidate_targets = 0

[sim]
firmware_update_ms = {firmware_ms}
power_ms = 0
jitter = 0.0
"
    )
}

/// One server under test and what it stores in.
struct Bench {
    server: ServeProcess,
    /// Dropped (the database with it) after the server.
    _db: Option<PgDatabase>,
    _config: Option<std::path::PathBuf>,
    client: FlowClient<Channel>,
}

impl Bench {
    async fn start(pg: bool, firmware_ms: u64) -> Bench {
        let cfg = config(firmware_ms);
        let addr = free_addr();
        let (server, db, file) = if pg {
            let db = PgDatabase::create(&shared_server_url());
            let server = ServeProcess::start_postgres(addr, db.url(), &cfg);
            (server, Some(db), None)
        } else {
            let file = temp_path("fleet-bench.toml");
            std::fs::write(&file, cfg).unwrap();
            let server = ServeProcess::start(addr, &temp_path("fleet-bench.db"), &file);
            (server, None, Some(file))
        };
        let client = FlowClient::connect(format!("http://{addr}"))
            .await
            .unwrap()
            .max_decoding_message_size(256 << 20);
        Bench {
            server,
            _db: db,
            _config: file,
            client,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.server.addr
    }

    /// Generates and imports `racks` racks; returns the import's time.
    fn import(&self, racks: u32) -> Duration {
        let generated = rackflow(
            None,
            &[
                "fleet",
                "generate",
                "--racks",
                &racks.to_string(),
                "--seed",
                "18",
            ],
        )
        .ok();
        let file = temp_path("fleet.json");
        std::fs::write(&file, &generated.stdout).unwrap();
        let t = Instant::now();
        rackflow_within(
            Duration::from_secs(1800),
            Some(self.addr()),
            &["fleet", "import", "--output", "json", path_str(&file)],
        )
        .ok();
        let took = t.elapsed();
        std::fs::remove_file(&file).ok();
        create_fast_default_rule(Some(self.addr()), "1s");
        took
    }

    /// Version round trips per second on this server.
    async fn version_rate(&mut self) -> f64 {
        let n = 500;
        let t = Instant::now();
        for _ in 0..n {
            self.client.version(pb::VersionRequest {}).await.unwrap();
        }
        f64::from(n) / t.elapsed().as_secs_f64()
    }

    /// One run over every rack to `version`; returns the time
    /// CreateOperationRun took and the makespan (sent → `finished_at`).
    async fn run(&mut self, version: &str, max_concurrent: i32) -> (Duration, Duration) {
        let mut request = rackflow_testkit::flow::rollout_request("fleet", &[], max_concurrent);
        if let Some(pb::operation_run_operation::Operation::UpgradeFirmware(op)) = request
            .configuration
            .as_mut()
            .and_then(|c| c.operation.as_mut())
            .and_then(|o| o.operation.as_mut())
        {
            // Every rack of the fleet.
            op.target_spec = None;
            op.target_version = Some(version.into());
        }
        let sent = now_ms();
        let t = Instant::now();
        let id = self
            .client
            .create_operation_run(request)
            .await
            .unwrap()
            .into_inner()
            .id
            .unwrap();
        let create = t.elapsed();
        let deadline = Instant::now() + Duration::from_secs(1800);
        let summary = loop {
            let run = self
                .client
                .get_operation_run(pb::GetOperationRunRequest {
                    id: Some(id.clone()),
                    include_stats: false,
                })
                .await
                .unwrap()
                .into_inner()
                .operation_run
                .and_then(|r| r.summary)
                .unwrap();
            let status = run.state.as_ref().map_or(0, |s| s.status);
            if status != pb::OperationRunStatus::Pending as i32
                && status != pb::OperationRunStatus::Running as i32
            {
                break run;
            }
            assert!(Instant::now() < deadline, "run not finished in time");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let state = summary.state.unwrap();
        assert_eq!(
            state.status,
            pb::OperationRunStatus::Completed as i32,
            "run did not complete: {state:?}"
        );
        self.check_targets(&id).await;
        let finished = ts_ms(summary.finished_at.as_ref().unwrap());
        (create, Duration::from_secs_f64((finished - sent) / 1000.0))
    }

    /// Every target completed with a child task of its own.
    async fn check_targets(&mut self, id: &pb::Uuid) {
        let mut seen = std::collections::HashSet::new();
        let mut offset = 0;
        loop {
            let reply = self
                .client
                .list_operation_run_targets(pb::ListOperationRunTargetsRequest {
                    operation_run_id: Some(id.clone()),
                    pagination: Some(pb::Pagination {
                        offset,
                        limit: 1000,
                    }),
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner();
            for t in &reply.targets {
                assert_eq!(
                    t.status,
                    pb::OperationRunTargetStatus::Completed as i32,
                    "target not completed: {t:?}"
                );
                let task = t.task_id.as_ref().map(|u| u.id.clone()).unwrap_or_default();
                assert!(
                    !task.is_empty() && seen.insert(task),
                    "target without a task of its own: {t:?}"
                );
            }
            offset += i32::try_from(reply.targets.len()).unwrap();
            if reply.targets.is_empty() || offset >= reply.total {
                assert_eq!(seen.len(), usize::try_from(reply.total).unwrap());
                break;
            }
        }
    }

    /// The server's peak resident set size, in MiB.
    fn peak_rss_mib(&self) -> f64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.server.pid())).unwrap();
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap();
        kib / 1024.0
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

fn store(pg: bool) -> &'static str {
    if pg { "PostgreSQL" } else { "SQLite" }
}

async fn tasks(pg: bool) {
    let (racks, limit) = (2000, 1000);
    let mut b = Bench::start(pg, 0).await;
    let import = b.import(racks);
    let version = b.version_rate().await;
    let (create, makespan) = b.run("2.0.0", limit).await;
    let rate = f64::from(racks) / makespan.as_secs_f64();
    println!(
        "tasks [{}]: {racks} racks at {limit} in flight, zero sim latency (import {:.1} s, create {} ms)",
        store(pg),
        import.as_secs_f64(),
        create.as_millis()
    );
    println!(
        "  {rate:.0} firmware tasks/s ({:.2} ms each, makespan {:.2} s)  baseline Version RPC {version:.0}/s  ratio {:.3}",
        1000.0 / rate,
        makespan.as_secs_f64(),
        rate / version
    );
}

async fn rollout(pg: bool, racks: u32, limit: i32) {
    let mut b = Bench::start(pg, 1000).await;
    let import = b.import(racks);
    let (create, makespan) = b.run("2.0.0", limit).await;
    let ideal = f64::from(racks) / f64::from(limit) * 2.0;
    println!(
        "r{racks} [{}]: {racks} racks at {limit} in flight, 1 s per firmware update",
        store(pg)
    );
    println!(
        "  fleet import {:.1} s ({:.2} ms per rack)  CreateOperationRun {} ms",
        import.as_secs_f64(),
        import.as_secs_f64() * 1000.0 / f64::from(racks),
        create.as_millis()
    );
    println!(
        "  makespan {:.2} s  ideal {ideal:.0} s  ratio {:.3}  server peak RSS {:.0} MiB",
        makespan.as_secs_f64(),
        makespan.as_secs_f64() / ideal,
        b.peak_rss_mib()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let pg = args.iter().any(|a| a == "--pg");
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let wants = |name: &str| filters.is_empty() || filters.iter().any(|f| f.as_str() == name);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        if wants("tasks") {
            tasks(pg).await;
        }
        if wants("r1000") {
            rollout(pg, 1000, 100).await;
        }
        if wants("r10000") {
            rollout(pg, 10_000, 1000).await;
        }
    });
}
