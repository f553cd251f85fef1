//! Benchmarks of issue "foundation", rerun with
//! `cargo bench -p rackflow-server --bench create_run`.
//!
//! 1. The planner alone for 10,000 racks of 35 components (no candidate
//!    limit), against a baseline measured in the same run: SHA-256 of the
//!    10,000 `seed:uuid` keys twice (selection and ordering), the work the
//!    planner cannot avoid.
//! 2. CreateOperationRun through gRPC on SQLite for a 100-rack candidate scope
//!    (35 components per rack): p50 / p99, against the `Version` RPC round
//!    trip on the same connection as baseline.
//!
//! Environment: `BENCH_CREATES` (default 200), `BENCH_PLANS` (default 30).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rackflow_api::v1 as pb;
use rackflow_api::v1::flow_client::FlowClient;
use rackflow_domain::planner::{self, CandidateEntry};
use rackflow_domain::run::{OrderingPolicy, PhasePlan, Selector};
use rackflow_domain::{ComponentType, ComponentsByType};
use rackflow_store::{DbTarget, Store};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn fleet_candidates(racks: usize) -> Vec<CandidateEntry> {
    (0..racks)
        .map(|_| {
            let mut set = ComponentsByType::new();
            for (ty, n) in [
                (ComponentType::Compute, 18),
                (ComponentType::NvSwitch, 9),
                (ComponentType::PowerShelf, 8),
            ] {
                for _ in 0..n {
                    set.push(ty, Uuid::new_v4());
                }
            }
            CandidateEntry {
                rack_id: Uuid::new_v4(),
                components: set,
            }
        })
        .collect()
}

fn bench_planner() {
    let runs = env_count("BENCH_PLANS", 30);
    let candidates = fleet_candidates(10_000);
    let selector = Selector::Percentage {
        percentage: 100,
        seed: "bench-selector".into(),
    };
    let ordering = OrderingPolicy::Random {
        seed: "bench-ordering".into(),
    };
    let phases = PhasePlan::Equal { phase_count: 10 };
    let mut plan_times = Vec::with_capacity(runs);
    let mut hash_times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let input = candidates.clone();
        let start = Instant::now();
        let normalized = planner::normalize_candidates(input).expect("normalize");
        planner::check_candidate_limit(normalized.len(), 0).expect("unlimited");
        let plan = planner::plan_targets(normalized, &selector, &ordering, &phases).expect("plan");
        plan_times.push(start.elapsed());
        assert_eq!(plan.targets.len(), 10_000);

        let start = Instant::now();
        let mut acc = 0u8;
        for seed in ["bench-selector", "bench-ordering"] {
            for c in &candidates {
                let digest = Sha256::digest(format!("{seed}:{}", c.rack_id).as_bytes());
                acc ^= digest[0];
            }
        }
        std::hint::black_box(acc);
        hash_times.push(start.elapsed());
    }
    plan_times.sort();
    hash_times.sort();
    let (p50, p99) = (percentile(&plan_times, 0.5), percentile(&plan_times, 0.99));
    let base = percentile(&hash_times, 0.5);
    println!("planner, 10,000 racks x 35 components, 100%, equal 10 phases ({runs} runs)");
    println!(
        "  plan        p50 {:8.2} ms   p99 {:8.2} ms",
        ms(p50),
        ms(p99)
    );
    println!(
        "  baseline    p50 {:8.2} ms   (SHA-256 of 2 x 10,000 keys)",
        ms(base)
    );
    println!("  ratio plan/baseline p50: {:.2}", ms(p50) / ms(base));
}

async fn bench_create() {
    let creates = env_count("BENCH_CREATES", 200);
    let path = std::env::temp_dir().join(format!("rackflow-bench-{}.db", Uuid::new_v4()));
    let store: Arc<dyn Store> = rackflow_store::open_store(&DbTarget::Sqlite(path.clone()))
        .await
        .expect("store");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let shutdown = CancellationToken::new();
    // The dispatcher is off: 200 runs over the same 100 racks would
    // otherwise be executing (and blocking each other) while later creates
    // are timed; this measures CreateOperationRun itself.
    let mut config = rackflow_server::Config::default();
    config.dispatcher.enabled = false;
    let server = tokio::spawn(rackflow_server::serve_on(
        config,
        store,
        listener,
        shutdown.clone(),
    ));
    let mut client = FlowClient::connect(format!("http://{addr}"))
        .await
        .expect("connect");

    for n in 0..100u32 {
        let ext = format!("r-{n:04}");
        let mut components = Vec::new();
        for (ty, count) in [
            (pb::ComponentType::Compute, 18),
            (pb::ComponentType::Nvswitch, 9),
            (pb::ComponentType::Powershelf, 8),
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
        client
            .create_expected_rack(pb::CreateExpectedRackRequest {
                rack: Some(pb::Rack {
                    info: Some(pb::DeviceInfo {
                        name: format!("rack-{n}"),
                        ..Default::default()
                    }),
                    external_id: ext,
                    components,
                    ..Default::default()
                }),
            })
            .await
            .expect("rack");
    }

    let request = pb::CreateOperationRunRequest {
        name: "bench".into(),
        description: String::new(),
        configuration: Some(pb::OperationRunConfiguration {
            selector: Some(pb::OperationRunSelector {
                selector: Some(pb::operation_run_selector::Selector::Percentage(
                    pb::PercentageSelector {
                        percentage: 100,
                        seed: String::new(),
                    },
                )),
            }),
            options: Some(pb::OperationRunOptions {
                max_concurrent_targets: 10,
                safety_policy: Some(pb::OperationRunSafetyPolicy {
                    gates: vec![pb::OperationRunSafetyGate {
                        gate: Some(pb::operation_run_safety_gate::Gate::FailureRate(
                            pb::OperationRunFailureRateGate {
                                scope: 1,
                                failure_threshold_percent: 10,
                            },
                        )),
                    }],
                }),
                phase_policy: Some(pb::OperationRunPhasePolicy {
                    plan: Some(pb::operation_run_phase_policy::Plan::Count(
                        pb::CountOperationRunPhases {
                            phases: vec![
                                pb::OperationRunCountPhase { count: 1 },
                                pb::OperationRunCountPhase { count: 9 },
                            ],
                        },
                    )),
                    advance_policy: None,
                }),
                ..Default::default()
            }),
            operation: Some(pb::OperationRunOperation {
                operation: Some(pb::operation_run_operation::Operation::UpgradeFirmware(
                    pb::UpgradeFirmwareRequest::default(),
                )),
                target_scope: None,
            }),
        }),
    };
    // Warm up connection, statement caches and the page cache.
    for _ in 0..5 {
        client
            .create_operation_run(request.clone())
            .await
            .expect("warm-up");
        client
            .version(pb::VersionRequest {})
            .await
            .expect("version");
    }
    let mut create_times = Vec::with_capacity(creates);
    let mut version_times = Vec::with_capacity(creates);
    for _ in 0..creates {
        let start = Instant::now();
        client
            .version(pb::VersionRequest {})
            .await
            .expect("version");
        version_times.push(start.elapsed());
        let start = Instant::now();
        client
            .create_operation_run(request.clone())
            .await
            .expect("create");
        create_times.push(start.elapsed());
    }
    create_times.sort();
    version_times.sort();
    let (p50, p99) = (
        percentile(&create_times, 0.5),
        percentile(&create_times, 0.99),
    );
    let base = percentile(&version_times, 0.5);
    println!(
        "CreateOperationRun via gRPC on SQLite, 100 racks x 35 components, 100% ({creates} creates)"
    );
    println!(
        "  create      p50 {:8.2} ms   p99 {:8.2} ms",
        ms(p50),
        ms(p99)
    );
    println!(
        "  baseline    p50 {:8.3} ms   (Version RPC round trip)",
        ms(base)
    );
    println!("  ratio create/baseline p50: {:.1}", ms(p50) / ms(base));

    shutdown.cancel();
    let _ = server.await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing
    // useful either way: run both measurements unless filtered by name.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wants = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    if wants("planner") {
        bench_planner();
    }
    if wants("create") {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(bench_create());
    }
}
