//! `rackflow demo`: one process, nothing to set up.
//!
//! A temporary SQLite file (or `--db`), the flow server started in-process
//! on a free loopback port over a simulated fleet with realistic latencies,
//! a generated 24-rack fleet imported over gRPC, a firmware rule that polls
//! the simulated hardware often, and a canary rollout (phases of 1, 3 and the
//! rest; 4 racks at a time; safety gates the planted failures stay under; no
//! auto-advance) shown live through the `run watch` view. The demo advances
//! each phase gate itself, as an operator would, and ends with a summary.
//!
//! Two racks fail: before the run is created, the demo plans it
//! (`PreviewOperationRun`) and plants a firmware fault on one compute tray
//! of a rack in phase 1 and of a rack in the last phase. Rack UUIDs are
//! assigned by the server, so the seeded order — and with it which racks
//! fail — differs from one demo to the next; where they are (never in the
//! one-rack canary phase, whose failure would trip the gate) does not.
//!
//! The embedded server logs to a file in the demo's temporary directory, never
//! to the terminal. Ctrl-C stops the server cleanly.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use rackflow_api::v1;
use rackflow_domain::ComponentType;
use rackflow_engine::sim::{FaultEffect, FaultOperation, SimConfig, SimFault, SimFleet};
use serde::Serialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::args::{Gate, GateScope, PhasePlan};
use crate::client::{self, Flow};
use crate::control::{self, Control};
use crate::fleet;
use crate::output::{OutputFormat, Table, print_json};
use crate::rule_file::Definition;
use crate::run::CreateArgs;
use crate::watch::{Snapshot, Watcher, list_targets};

/// Flags of `rackflow demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// SQLite database file to use and keep [default: a temporary file,
    /// removed at the end].
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Racks of the simulated fleet (5..=1000).
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u32).range(5..=1000))]
    pub racks: u32,
    /// Seed of the fleet, of the run's selection and order, and of the
    /// simulated latencies.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Time factor: 2 runs twice as fast, 0.5 half as fast (0 < F <= 1000).
    #[arg(long, value_name = "F", default_value_t = 1.0, value_parser = parse_speed)]
    pub speed: f64,
    /// After the rollout, keep the embedded server (console, /metrics,
    /// gRPC) up until Ctrl-C, to look around.
    #[arg(long)]
    pub stay: bool,
}

/// Parses `--speed`: a number above 0, at most 1000.
pub fn parse_speed(text: &str) -> Result<f64, String> {
    let speed: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("invalid speed {text:?}: expected a number such as 2 or 0.5"))?;
    if !(speed.is_finite() && speed > 0.0 && speed <= 1000.0) {
        return Err(format!(
            "invalid speed {text:?}: must be above 0 and at most 1000"
        ));
    }
    Ok(speed)
}

/// Simulated latencies and demo pauses for a `--speed`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timings {
    /// One firmware update of one component type (a rack runs two in a
    /// row: compute trays, then NVLink switch trays).
    pub firmware_update_ms: u64,
    pub power_ms: u64,
    /// How often the rule polls the update status.
    pub poll_interval: Duration,
    /// How long the demo waits at a phase gate before advancing.
    pub gate_pause: Duration,
}

impl Timings {
    pub fn for_speed(speed: f64) -> Timings {
        let scale = |ms: f64, min: f64| (ms / speed).max(min).round();
        // Values are bounded by the parser (speed >= 0.001): no overflow.
        Timings {
            firmware_update_ms: scale(2000.0, 1.0) as u64,
            power_ms: scale(200.0, 1.0) as u64,
            poll_interval: Duration::from_millis(scale(250.0, 10.0) as u64),
            gate_pause: Duration::from_millis(scale(1500.0, 50.0) as u64),
        }
    }
}

/// Name of the demo's run.
pub const RUN_NAME: &str = "demo-canary";
/// Simulation jitter: each latency is `base × (1 ± 0.2)`.
const JITTER: f64 = 0.2;
/// Racks worked on at once.
const MAX_CONCURRENT: i32 = 4;
/// Early phase sizes; a last phase takes the rest.
const PHASES: [i32; 2] = [1, 3];
/// The failure-rate gate: pause when half of the run's targets so far
/// failed. The planted failures stay far below it.
const GATE_RATE: i32 = 50;
/// The failure-count gate: pause at the third failure (two are planted).
const GATE_COUNT: i32 = 3;
/// The compute tray whose firmware the simulator fails on a faulty rack.
const FAULTY_TRAY: u32 = 7;

/// The demo's firmware rule: compute trays, then NVLink switch trays (the
/// built-in order), with the status polled every `poll` instead of the
/// built-in two minutes, and no retry so a failure shows at once.
pub fn rule_definition(poll: Duration) -> anyhow::Result<Definition> {
    let poll = format!("{}ms", poll.as_millis().max(1));
    let step = |component_type: &str, stage: u32| {
        serde_json::json!({
            "component_type": component_type,
            "stage": stage,
            "timeout": "10m",
            "retry": {"max_attempts": 1, "initial_interval": "1s"},
            "main_operation": {
                "name": "FirmwareControl",
                "parameters": {"poll_interval": poll, "poll_timeout": "10m"}
            }
        })
    };
    let value = serde_json::json!({
        "version": "v1",
        "steps": [step("compute", 1), step("nvswitch", 2)]
    });
    Definition::from_value(&value).map_err(|e| anyhow::anyhow!("demo rule: {e}"))
}

/// The run's flags, as `rackflow run create` would take them.
pub fn create_args(racks: &[String], seed: u64, rule_id: Option<uuid::Uuid>) -> CreateArgs {
    CreateArgs {
        name: Some(RUN_NAME.to_string()),
        description: Some("rackflow demo: canary firmware rollout".to_string()),
        percentage: Some(100),
        seed: Some(format!("demo-{seed}")),
        ordering_seed: Some(format!("demo-order-{seed}")),
        max_concurrent: Some(MAX_CONCURRENT),
        failure_rate: vec![Gate::FailureRate {
            percent: GATE_RATE,
            scope: GateScope::Cumulative,
        }],
        failure_count: vec![Gate::FailureCount {
            count: GATE_COUNT,
            scope: GateScope::Cumulative,
        }],
        phases: Some(PhasePlan::Count(PHASES.to_vec())),
        auto_advance: false,
        rack_external_ids: racks.to_vec(),
        component_types: vec![ComponentType::Compute, ComponentType::NvSwitch],
        rule_id,
        ..CreateArgs::default()
    }
}

/// The racks the simulator fails, from the plan: the middle rack of phase 1
/// and the middle rack of the last phase (never the one-rack canary phase,
/// whose failure alone would trip the failure-rate gate). Returns
/// `(rack external id, phase index)`.
pub fn faulty_racks(targets: &[v1::PlannedOperationRunTarget]) -> Vec<(String, i32)> {
    let last = targets.iter().map(|t| t.phase_index).max().unwrap_or(0);
    let mut picks = Vec::new();
    for phase in [1, last] {
        if phase < 1 || picks.iter().any(|(_, p)| *p == phase) {
            continue;
        }
        let mut in_phase: Vec<&v1::PlannedOperationRunTarget> =
            targets.iter().filter(|t| t.phase_index == phase).collect();
        in_phase.sort_by_key(|t| t.sequence_index);
        if let Some(t) = in_phase.get(in_phase.len() / 2) {
            picks.push((t.rack_external_id.clone(), phase));
        }
    }
    picks
}

fn fault_for(rack: &str) -> SimFault {
    SimFault {
        rack: Some(rack.to_string()),
        component_type: Some(ComponentType::Compute),
        component: Some(format!("{rack}-compute-{FAULTY_TRAY:02}")),
        operation: FaultOperation::Firmware,
        effect: FaultEffect::Fail,
    }
}

/// One phase of the summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PhaseSummary {
    pub phase_index: i32,
    pub racks: i32,
    pub completed: i32,
    pub failed: i32,
}

/// A failed rack of the summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailedRack {
    pub rack_external_id: String,
    pub phase_index: i32,
    pub message: String,
}

/// What the demo did (`-o json`).
#[derive(Debug, Clone, Serialize)]
pub struct DemoSummary {
    pub run_id: String,
    pub status: String,
    pub status_message: String,
    /// From creating the run to seeing it end.
    pub wall_time_secs: f64,
    pub phases: Vec<PhaseSummary>,
    pub failed_racks: Vec<FailedRack>,
    pub server_log: String,
    /// The database file, or `null` when it was temporary (and is removed).
    pub database: Option<String>,
}

/// Per-phase totals and failed racks of a finished run.
pub fn summarize(targets: &[v1::OperationRunTarget]) -> (Vec<PhaseSummary>, Vec<FailedRack>) {
    use v1::OperationRunTargetStatus as S;
    let phases = targets
        .iter()
        .map(|t| t.phase_index)
        .max()
        .map_or(0, |m| m + 1);
    let mut out: Vec<PhaseSummary> = (0..phases)
        .map(|i| PhaseSummary {
            phase_index: i,
            racks: 0,
            completed: 0,
            failed: 0,
        })
        .collect();
    for t in targets {
        let Some(p) = usize::try_from(t.phase_index)
            .ok()
            .and_then(|i| out.get_mut(i))
        else {
            continue;
        };
        p.racks += 1;
        match S::try_from(t.status) {
            Ok(S::Completed | S::Skipped) => p.completed += 1,
            Ok(S::Failed | S::Terminated) => p.failed += 1,
            _ => {}
        }
    }
    let failed = crate::watch::failed_targets(targets)
        .into_iter()
        .map(|f| FailedRack {
            rack_external_id: f.rack_external_id,
            phase_index: f.phase_index,
            message: f.message,
        })
        .collect();
    (out, failed)
}

/// The summary table of a finished demo.
pub fn render_summary(summary: &DemoSummary) -> String {
    let mut out = format!(
        "Rollout finished: {} ({}) in {:.1}s\n\n",
        summary.status,
        if summary.status_message.is_empty() {
            "-"
        } else {
            &summary.status_message
        },
        summary.wall_time_secs
    );
    let mut table = Table::new(["PHASE", "RACKS", "COMPLETED", "FAILED"]);
    let (mut racks, mut completed, mut failed) = (0, 0, 0);
    for p in &summary.phases {
        table.row([
            p.phase_index.to_string(),
            p.racks.to_string(),
            p.completed.to_string(),
            p.failed.to_string(),
        ]);
        racks += p.racks;
        completed += p.completed;
        failed += p.failed;
    }
    table.row([
        "total".to_string(),
        racks.to_string(),
        completed.to_string(),
        failed.to_string(),
    ]);
    out.push_str(&table.render());
    out.push_str(&format!("Wall time: {:.1}s\n", summary.wall_time_secs));
    if !summary.failed_racks.is_empty() {
        out.push_str("\nFailed racks:\n");
        let mut table = Table::new(["RACK", "PHASE", "MESSAGE"]);
        for f in &summary.failed_racks {
            table.row([
                f.rack_external_id.clone(),
                f.phase_index.to_string(),
                f.message.clone(),
            ]);
        }
        out.push_str(&table.render());
    }
    out
}

/// Sends the embedded server's logs to `path` (filtered by `RUST_LOG`,
/// default `info`).
fn log_to_file(path: &Path) -> anyhow::Result<()> {
    let file = std::fs::File::create(path)
        .with_context(|| format!("create log file {}", path.display()))?;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::sync::Mutex::new(file))
        // A full disk must not panic the demo's server (see serve::init_tracing).
        .log_internal_errors(false)
        .with_ansi(false)
        .try_init();
    Ok(())
}

fn remove_sqlite(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// Ctrl-C during the demo.
#[derive(Debug)]
struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// `rackflow demo`.
pub async fn run(args: &DemoArgs, output: OutputFormat) -> anyhow::Result<()> {
    let work = std::env::temp_dir().join(format!(
        "rackflow-demo-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&work)
        .with_context(|| format!("create temporary directory {}", work.display()))?;
    let log = work.join("server.log");
    log_to_file(&log)?;
    let (db, temporary) = match &args.db {
        Some(path) => (path.clone(), false),
        None => (work.join("rackflow.db"), true),
    };
    let timings = Timings::for_speed(args.speed);
    let sim = SimConfig {
        seed: args.seed,
        firmware_update_ms: timings.firmware_update_ms,
        power_ms: timings.power_ms,
        jitter: JITTER,
        ..SimConfig::default()
    };
    let fleet_sim = SimFleet::new(sim.clone());

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("bind a loopback port")?;
    let addr = listener.local_addr().context("local address")?;
    let store = rackflow_store::open_store(&rackflow_store::DbTarget::Sqlite(db.clone()))
        .await
        .with_context(|| format!("open database {}", db.display()))?;
    let mut config = rackflow_server::Config {
        listen: addr,
        shutdown_grace_secs: 1,
        sim,
        ..Default::default()
    };
    config.database.sqlite_path.clone_from(&db);
    config.planner.max_candidate_targets = 0;
    // The console and /metrics on free loopback ports, up while the
    // rollout runs.
    config.console.enabled = true;
    config.console.listen = free_loopback_port()?;
    config.metrics.enabled = true;
    config.metrics.listen = free_loopback_port()?;
    let console_url = format!("http://{}/runs", config.console.listen);
    let metrics_url = format!("http://{}/metrics", config.metrics.listen);
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(rackflow_server::serve_with_fleet(
        config,
        store,
        fleet_sim.clone(),
        listener,
        shutdown.clone(),
    ));

    let table = output == OutputFormat::Table;
    if table {
        crate::outln_wrapped!(
            "rackflow demo: a canary firmware rollout over {} simulated racks, in this one process",
            args.racks
        );
        crate::outln!();
        crate::outln_wrapped!(
            "server:    {addr} (in-process; logs go to {})",
            log.display()
        );
        crate::outln_wrapped!("console:   {console_url} (open it to watch and steer the rollout)");
        crate::outln_wrapped!("metrics:   {metrics_url}");
        crate::outln_wrapped!(
            "database:  {}{}",
            db.display(),
            if temporary {
                " (temporary, removed at the end)"
            } else {
                ""
            }
        );
    }
    let server_url = format!("http://{addr}");
    let address = client::ServerAddress::plain(server_url.clone());
    let body = demo(args, output, &address, &fleet_sim, timings);
    let result = tokio::select! {
        r = body => r,
        r = tokio::signal::ctrl_c() => match r {
            Ok(()) => Err(Interrupted.into()),
            Err(e) => Err(anyhow::Error::new(e).context("wait for Ctrl-C")),
        },
    };
    if args.stay && result.is_ok() {
        if table {
            crate::outln!();
            crate::outln_wrapped!(
                "the rollout is over; the server stays up (console {console_url}, metrics {metrics_url}, gRPC {addr}): Ctrl-C to stop"
            );
        }
        if let Err(e) = tokio::signal::ctrl_c().await {
            eprintln!("warning: waiting for Ctrl-C failed: {e}");
        }
    }

    shutdown.cancel();
    match tokio::time::timeout(Duration::from_secs(10), server).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => {
            if table {
                eprintln!("warning: the embedded server stopped with an error: {e}");
            }
        }
        Ok(Err(e)) => eprintln!("warning: the embedded server task failed: {e}"),
        Err(_) => eprintln!("warning: the embedded server did not stop within 10s"),
    }
    if temporary {
        remove_sqlite(&db);
    }
    match result {
        Ok(mut summary) => {
            summary.server_log = log.display().to_string();
            summary.database = (!temporary).then(|| db.display().to_string());
            match output {
                OutputFormat::Json => print_json(&summary)?,
                OutputFormat::Table => {
                    crate::outln!();
                    crate::output::write_out(&render_summary(&summary));
                    crate::outln!();
                    crate::outln!("Server log: {}", log.display());
                    if !temporary {
                        crate::outln!(
                            "Database:   {} (kept: `rackflow serve --db {}` serves it)",
                            db.display(),
                            db.display()
                        );
                    }
                }
            }
            Ok(())
        }
        Err(err) if err.downcast_ref::<Interrupted>().is_some() => {
            crate::outln!();
            crate::outln!("interrupted: the embedded server stopped");
            crate::outln!("Server log: {}", log.display());
            if !temporary {
                crate::outln!(
                    "Database:   {} (the run resumes under `rackflow serve --db {}`)",
                    db.display(),
                    db.display()
                );
            }
            Err(client::Exit(130).into())
        }
        Err(err) => {
            eprintln!("server log: {}", log.display());
            Err(err)
        }
    }
}

/// A loopback address with a port free right now (the embedded server
/// binds it a moment later).
fn free_loopback_port() -> anyhow::Result<std::net::SocketAddr> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .context("find a free loopback port")
}

/// Connects to the in-process server; it is bound already, so this only
/// waits for it to serve.
async fn connect(server: &crate::client::ServerAddress) -> anyhow::Result<Flow> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match client::connect(server).await {
            Ok(flow) => return Ok(flow),
            Err(err) if Instant::now() < deadline => {
                tracing::debug!(error = %err, "embedded server not ready yet");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(err) => return Err(err),
        }
    }
}

/// The demo proper: import, rule, plan, faults, run, watch and advance,
/// summary data. Returns the summary (log and database paths unset).
async fn demo(
    args: &DemoArgs,
    output: OutputFormat,
    server: &crate::client::ServerAddress,
    fleet_sim: &SimFleet,
    timings: Timings,
) -> anyhow::Result<DemoSummary> {
    let table = output == OutputFormat::Table;
    let mut flow = connect(server).await?;

    // The fleet.
    let fleet = fleet::generate(args.racks, args.seed)?;
    let imported = fleet::import_fleet(&mut flow, &fleet, false)
        .await
        .context("import the demo fleet")?;
    if table {
        let mut line = format!(
            "fleet:     {} GB200/GB300 NVL72 racks generated with seed {} ({} components each), imported over gRPC",
            fleet.racks.len(),
            args.seed,
            fleet::COMPONENTS_PER_RACK
        );
        if !imported.skipped.is_empty() {
            line.push_str(&format!(" ({} already there)", imported.skipped.len()));
        }
        crate::outln_wrapped!("{line}");
    }

    // The rule the children run.
    let definition = rule_definition(timings.poll_interval)?;
    let rule = flow
        .create_operation_rule(v1::CreateOperationRuleRequest {
            name: "demo-firmware-upgrade".to_string(),
            description:
                "rackflow demo: compute trays, then NVLink switch trays; fast status polls"
                    .to_string(),
            operation_type: v1::OperationType::FirmwareControl as i32,
            operation_code: "upgrade".to_string(),
            rule_definition_json: definition.to_json(),
            is_default: false,
        })
        .await
        .context("create the demo firmware rule")?
        .into_inner();
    let rule_id = rule
        .id
        .and_then(|u| uuid::Uuid::parse_str(&u.id).ok())
        .context("the server answered without a rule id")?;
    if table {
        crate::outln_wrapped!(
            "rule:      firmware upgrade, compute trays then NVLink switch trays, status polled every {}ms",
            timings.poll_interval.as_millis()
        );
    }

    // The plan, then the faults, then the run.
    let racks: Vec<String> = fleet.racks.iter().map(|r| r.external_id.clone()).collect();
    let request = create_args(&racks, args.seed, Some(rule_id))
        .to_spec()?
        .to_request()?;
    let preview = flow
        .extensions()
        .preview_operation_run(request.clone())
        .await
        .context("plan the demo run")?
        .into_inner();
    let faulty = faulty_racks(&preview.targets);
    fleet_sim.set_faults(faulty.iter().map(|(rack, _)| fault_for(rack)).collect());
    if table {
        let sizes: Vec<String> = preview.phase_sizes.iter().map(i32::to_string).collect();
        crate::outln_wrapped!(
            "hardware:  simulated; a firmware update takes ~{:.1}s per component type (±20%), seed {}",
            timings.firmware_update_ms as f64 / 1000.0,
            args.seed
        );
        crate::outln_wrapped!(
            "faults:    compute tray {FAULTY_TRAY:02} fails its update on {}",
            faulty
                .iter()
                .map(|(rack, phase)| format!("{rack} (phase {phase})"))
                .collect::<Vec<_>>()
                .join(" and ")
        );
        crate::outln_wrapped!(
            "rollout:   {} racks in {} phases ({}), {MAX_CONCURRENT} at a time; pauses if {GATE_RATE}% \
             of the racks so far or {GATE_COUNT} racks fail; phase gates advanced by this demo",
            preview.targets.len(),
            preview.total_phases,
            sizes.join(", ")
        );
    }
    let started = Instant::now();
    let id = flow
        .create_operation_run(request)
        .await
        .context("create the demo run")?
        .into_inner()
        .id
        .and_then(|u| uuid::Uuid::parse_str(&u.id).ok())
        .context("the server answered without a run id")?;
    if table {
        crate::outln_wrapped!("run:       {id}");
        crate::outln!();
    }

    // Watch, advancing every phase gate.
    let mut watcher = Watcher::connect(server, id, output, "rackflow".to_string()).await?;
    let last: Snapshot = loop {
        let snapshot = watcher.follow(true).await?;
        if snapshot.is_terminal() {
            break snapshot;
        }
        if snapshot.run.reason != "phase_gate" {
            let why = snapshot
                .pause
                .as_ref()
                .map_or_else(|| snapshot.run.status_message.clone(), |p| p.why.clone());
            watcher.detach();
            anyhow::bail!(
                "the demo run {id} paused ({}): {why}; the demo stops here",
                snapshot.run.reason
            );
        }
        tokio::time::sleep(timings.gate_pause).await;
        let next = snapshot.current_phase + 1;
        watcher.log(&format!(
            "phase gate reached: advancing to phase {next} (as an operator would with: \
             rackflow run advance {id} --expected-phase {next})"
        ));
        control::send(
            &mut flow,
            id,
            &Control::Advance {
                expected_phase: Some(next),
            },
        )
        .await?;
    };
    let wall = started.elapsed();
    watcher.detach();
    let targets = list_targets(&mut flow, id).await?;
    let (phases, failed_racks) = summarize(&targets);
    Ok(DemoSummary {
        run_id: id.to_string(),
        status: last.run.status.clone(),
        status_message: last.run.status_message.clone(),
        wall_time_secs: wall.as_secs_f64(),
        phases,
        failed_racks,
        server_log: String::new(),
        database: None,
    })
}
