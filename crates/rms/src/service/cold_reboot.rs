//! `ExecuteColdReboot`: an AC power cycle of one whole rack, as the rack
//! reboot runbook of a GB200 NVL72 rack does it (spec `rms-job-model.md`,
//! reservation pattern; wire-contract §B.10).
//!
//! This module owns admission (validation, the rack's power guard, the
//! all-or-nothing reservation of every node, the coordinator job keyed
//! `{rack_id}:cold-reboot`), the staged worker, the timings a request may
//! override ([`ColdRebootTimings`], defaults here and in `docs/rms.md`) and
//! the stage timeline written to the job's `result_json`.
//!
//! Stages, in order (runbook step numbers in the job's description, e.g.
//! "Rack reboot step 2-3: Waiting for capacitor discharge ..."):
//!
//! | step | stage | what |
//! |---|---|---|
//! | 0 | `prestage_shutdown_compute` | graceful shutdown of every compute tray |
//! | 0 | `prestage_verify_compute_down` | floor, then poll until every compute tray reads Off |
//! | 1 | `power_off_shelves` | every power shelf Off |
//! | 2-3 | `verify_discharged` | discharge floor, then poll until no tray BMC answers |
//! | 4 | `power_on_shelves` | every power shelf On |
//! | 5-6 | `verify_bmc_up` | floor, then poll until every tray BMC answers |
//! | 7-8 | `verify_nvos_ready` | every switch tray ready (see below), attempts with doubling backoff |
//! | 10 | `power_on_compute` | every compute tray On |
//! | 11-12 | `wait_compute_boot` | fixed wait for the compute OS |
//!
//! The switches' readiness is the reference's NVUE "hello" on the switch OS.
//! rackflow's rack manager has no switch back end yet (a later issue adds
//! it), so until then the stage waits for the switch trays' BMCs to answer
//! with a definite power state — weaker than an NVOS hello, and said so in
//! the stage's details (`probe: "switch_bmc"`).
//!
//! The sequence is fail-fast with no rollback: the first failing stage
//! fails the job with a message naming the stage and the nodes, the
//! timeline marks it failed and the rest skipped. Reservations are released
//! when the worker ends, whatever way it ends.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::future::join_all;
use rackflow_api::rack_manager as pb;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::nodes::{self, PowerGuard};
use super::{RackManagerService, batch_response};
use crate::backend::{NodeBackend, NodeKind, NodeTarget, PowerAction, PowerState};
use crate::job::{JobError, JobType, RmsJobHandle, job_failure};

/// Prestage: minimum wait after the graceful shutdown before probing.
pub const PRESTAGE_SHUTDOWN_FLOOR_SECONDS: u32 = 0;
/// Prestage: longest wait for the compute trays to read Off.
pub const PRESTAGE_SHUTDOWN_POLL_MAX_SECONDS: u32 = 300;
/// Steps 2-3: capacitor discharge floor after the shelves are off.
pub const DISCHARGE_FLOOR_SECONDS: u32 = 180;
/// Steps 2-3: longest wait for every tray BMC to stop answering.
pub const DISCHARGE_POLL_MAX_SECONDS: u32 = 600;
/// Steps 5-6: minimum wait after the shelves are back on.
pub const BMC_UP_FLOOR_SECONDS: u32 = 120;
/// Steps 5-6: longest wait for every tray BMC to answer.
pub const BMC_UP_POLL_MAX_SECONDS: u32 = 600;
/// Steps 7-8: attempts at the switches' readiness before the stage fails.
pub const NVOS_HELLO_ATTEMPTS: u32 = 5;
/// Steps 7-8: first backoff between attempts (doubles each time).
pub const NVOS_HELLO_BACKOFF_SECONDS: u32 = 30;
/// Steps 11-12: fixed wait for the compute OS after power-on.
pub const COMPUTE_BOOT_WAIT_SECONDS: u32 = 300;
/// Pause between two probes of a gated stage.
pub const POLL_INTERVAL_SECONDS: u32 = 15;

/// A gated stage's budget: an unconditional floor, then polling up to
/// `poll_max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageTiming {
    pub floor: Duration,
    pub poll_max: Duration,
}

/// The timings of one cold reboot: the request's value where it sets one
/// above zero, else the default (zero cannot mean "no wait": a discharge
/// floor of nothing would power a rack back on charged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColdRebootTimings {
    pub prestage_shutdown: StageTiming,
    pub discharge: StageTiming,
    pub bmc_up: StageTiming,
    pub nvos_hello_backoff: Duration,
    pub compute_boot_wait: Duration,
    pub poll_interval: Duration,
}

impl ColdRebootTimings {
    pub fn from_request(req: &pb::ExecuteColdRebootRequest) -> Self {
        let stage = |floor, floor_default, max, max_default| StageTiming {
            floor: seconds(floor, floor_default),
            poll_max: seconds(max, max_default),
        };
        ColdRebootTimings {
            prestage_shutdown: stage(
                req.prestage_shutdown_floor_seconds,
                PRESTAGE_SHUTDOWN_FLOOR_SECONDS,
                req.prestage_shutdown_poll_max_seconds,
                PRESTAGE_SHUTDOWN_POLL_MAX_SECONDS,
            ),
            discharge: stage(
                req.discharge_floor_seconds,
                DISCHARGE_FLOOR_SECONDS,
                req.discharge_poll_max_seconds,
                DISCHARGE_POLL_MAX_SECONDS,
            ),
            bmc_up: stage(
                req.bmc_up_floor_seconds,
                BMC_UP_FLOOR_SECONDS,
                req.bmc_up_poll_max_seconds,
                BMC_UP_POLL_MAX_SECONDS,
            ),
            nvos_hello_backoff: seconds(req.nvos_hello_backoff_seconds, NVOS_HELLO_BACKOFF_SECONDS),
            compute_boot_wait: seconds(req.compute_boot_wait_seconds, COMPUTE_BOOT_WAIT_SECONDS),
            poll_interval: seconds(req.poll_interval_seconds, POLL_INTERVAL_SECONDS),
        }
    }
}

fn seconds(value: Option<u32>, default: u32) -> Duration {
    Duration::from_secs(u64::from(value.filter(|v| *v > 0).unwrap_or(default)))
}

/// The planned stages: (runbook step, name, description).
const STAGES: [(&str, &str, &str); 9] = [
    (
        "0",
        "prestage_shutdown_compute",
        "Gracefully shutting down compute trays",
    ),
    (
        "0",
        "prestage_verify_compute_down",
        "Waiting for compute trays to power down",
    ),
    ("1", "power_off_shelves", "Powering off power shelves"),
    (
        "2-3",
        "verify_discharged",
        "Waiting for capacitor discharge (tray BMCs unreachable)",
    ),
    ("4", "power_on_shelves", "Powering on power shelves"),
    (
        "5-6",
        "verify_bmc_up",
        "Waiting for tray BMCs to become reachable",
    ),
    (
        "7-8",
        "verify_nvos_ready",
        "Waiting for switch readiness (switch tray BMCs answering)",
    ),
    ("10", "power_on_compute", "Powering on compute nodes"),
    ("11-12", "wait_compute_boot", "Waiting for compute OS boot"),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StageStatus {
    Queued,
    Running,
    Completed,
    Failed,
    Skipped,
}

impl StageStatus {
    fn as_str(self) -> &'static str {
        match self {
            StageStatus::Queued => "queued",
            StageStatus::Running => "running",
            StageStatus::Completed => "completed",
            StageStatus::Failed => "failed",
            StageStatus::Skipped => "skipped",
        }
    }
}

#[derive(Debug, Clone)]
struct StageRecord {
    step: &'static str,
    name: &'static str,
    description: &'static str,
    status: StageStatus,
    message: String,
    started: Option<Instant>,
    finished: Option<Instant>,
    details: Value,
}

/// The stages of one cold reboot with their times: the whole plan from the
/// start, each stage queued → running → completed / failed, the unreached
/// ones skipped after a failure. Times are monotonic offsets projected on
/// the wall clock read once at creation, so a clock step cannot make a
/// duration negative.
#[derive(Debug, Clone)]
pub struct StageTimeline {
    job_id: String,
    rack_id: String,
    stages: Vec<StageRecord>,
    current: usize,
    wall: DateTime<Utc>,
    started: Instant,
}

impl StageTimeline {
    fn new(job_id: &str, rack_id: &str) -> Self {
        StageTimeline {
            job_id: job_id.to_owned(),
            rack_id: rack_id.to_owned(),
            stages: STAGES
                .iter()
                .map(|&(step, name, description)| StageRecord {
                    step,
                    name,
                    description,
                    status: StageStatus::Queued,
                    message: String::new(),
                    started: None,
                    finished: None,
                    details: json!({}),
                })
                .collect(),
            current: 0,
            wall: Utc::now(),
            started: Instant::now(),
        }
    }

    fn current(&mut self) -> Option<&mut StageRecord> {
        self.stages.get_mut(self.current)
    }

    /// Starts the next stage; returns the job description for it.
    fn start(&mut self) -> String {
        let Some(stage) = self.current() else {
            return String::new();
        };
        stage.status = StageStatus::Running;
        stage.started = Some(Instant::now());
        stage.message = stage.description.to_owned();
        format!("Rack reboot step {}: {}", stage.step, stage.description)
    }

    fn finish(&mut self, status: StageStatus, message: Option<String>, details: Value) {
        let Some(stage) = self.current() else {
            return;
        };
        stage.status = status;
        stage.finished = Some(Instant::now());
        if let Some(message) = message {
            stage.message = message;
        }
        stage.details = details;
        self.current += 1;
        if status == StageStatus::Failed {
            for stage in &mut self.stages[self.current..] {
                stage.status = StageStatus::Skipped;
            }
            self.current = self.stages.len();
        }
    }

    fn current_name(&self) -> &'static str {
        self.stages.get(self.current).map_or("", |s| s.name)
    }

    fn ms(&self, at: Instant) -> i64 {
        let offset = i64::try_from(at.duration_since(self.started).as_millis()).unwrap_or(i64::MAX);
        self.wall.timestamp_millis().saturating_add(offset)
    }

    /// The timeline as the job's `result_json`.
    pub fn to_json(&self) -> Value {
        let stages: Vec<Value> = self
            .stages
            .iter()
            .map(|s| {
                let started = s.started.map_or(0, |t| self.ms(t));
                let finished = s.finished.map_or(0, |t| self.ms(t));
                json!({
                    "name": s.name,
                    "step": s.step,
                    "status": s.status.as_str(),
                    "message": s.message,
                    "started_at_ms": started,
                    "finished_at_ms": finished,
                    "duration_ms": if s.started.is_some() && s.finished.is_some() { finished - started } else { 0 },
                    "details": s.details,
                })
            })
            .collect();
        let current = self
            .stages
            .iter()
            .find(|s| s.status == StageStatus::Running)
            .map_or("", |s| s.name);
        json!({
            "job_id": self.job_id,
            "node_id": format!("{}:cold-reboot", self.rack_id),
            "rack_id": self.rack_id,
            "started_at_ms": self.wall.timestamp_millis(),
            "updated_at_ms": self.ms(Instant::now()),
            "total_duration_ms": i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX),
            "current_stage": current,
            "stages": stages,
        })
    }
}

/// One node of the reboot.
#[derive(Debug, Clone)]
struct Node {
    id: String,
    target: NodeTarget,
}

/// The nodes of the reboot by kind.
#[derive(Debug, Default)]
struct Targets {
    shelves: Vec<Node>,
    computes: Vec<Node>,
    switches: Vec<Node>,
}

impl Targets {
    /// The trays whose BMCs the shelves feed (compute and switch).
    fn trays(&self) -> impl Iterator<Item = &Node> {
        self.computes.iter().chain(self.switches.iter())
    }
}

fn response(
    mut batch: pb::NodeBatchResponse,
    total: usize,
    ok: usize,
) -> pb::ExecuteColdRebootResponse {
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    batch.stats = Some(pb::NodeOperationStats {
        total_nodes: count(total),
        successful_nodes: count(ok),
        failed_nodes: count(total - ok),
    });
    pb::ExecuteColdRebootResponse {
        response: Some(batch),
    }
}

fn refused(message: impl Into<String>, total: usize) -> pb::ExecuteColdRebootResponse {
    let message = message.into();
    tracing::warn!(error = %message, "cold reboot refused");
    response(batch_response::failure(&message), total, 0)
}

impl RackManagerService {
    /// Admission of a cold reboot: everything is checked and every node
    /// reserved before the worker starts; any refusal is in band.
    pub(crate) fn execute_cold_reboot_request(
        &self,
        req: pb::ExecuteColdRebootRequest,
    ) -> Result<pb::ExecuteColdRebootResponse, tonic::Status> {
        let timings = ColdRebootTimings::from_request(&req);
        let raw = req.nodes.map(|s| s.nodes).unwrap_or_default();
        // As the reference: a node type this service does not know (an
        // unknown enum number included) is a per-node failure in band.
        self.admit_credentials(&raw)?;
        let mut seen = HashSet::new();
        let devices: Vec<pb::NodeInfo> = raw
            .into_iter()
            .filter(|n| seen.insert((n.rack_id.clone(), n.node_id.clone())))
            .collect();
        let total = devices.len();
        let Some(first) = devices.first() else {
            return Ok(refused(
                "nodes is required and must contain at least one device",
                0,
            ));
        };
        let rack_id = first.rack_id.clone();
        let mut racks: Vec<&str> = devices.iter().map(|d| d.rack_id.as_str()).collect();
        racks.sort_unstable();
        racks.dedup();
        if racks.len() > 1 {
            return Ok(refused(
                format!(
                    "cold reboot must target a single rack, but devices span {} racks: {}",
                    racks.len(),
                    racks.join(", ")
                ),
                total,
            ));
        }
        if rack_id.trim().is_empty() {
            return Ok(refused("rack_id is required", total));
        }

        // Classify and build every target before anything is reserved.
        let mut targets = Targets::default();
        let mut node_failures = Vec::new();
        for device in &devices {
            let built = NodeKind::of(device.r#type.unwrap_or(0))
                .ok_or_else(|| "unknown or unsupported node type".to_owned())
                .and_then(|kind| nodes::target_of(device, false).map(|target| (kind, target)));
            match built {
                Ok((kind, target)) => {
                    let node = Node {
                        id: device.node_id.clone(),
                        target,
                    };
                    match kind {
                        NodeKind::PowerShelf => targets.shelves.push(node),
                        NodeKind::Compute => targets.computes.push(node),
                        NodeKind::Switch => targets.switches.push(node),
                    }
                }
                Err(message) => {
                    node_failures.push(batch_response::node_failed(&device.node_id, &message));
                }
            }
        }
        if !node_failures.is_empty() {
            let mut batch = batch_response::failure(
                "one or more devices could not be prepared for cold reboot",
            );
            batch.node_results = node_failures;
            tracing::warn!(rack = %rack_id, "cold reboot refused: devices could not be prepared");
            return Ok(response(batch, total, 0));
        }
        if targets.shelves.is_empty() {
            return Ok(refused(
                "cold reboot requires at least one power shelf in the device list",
                total,
            ));
        }
        if targets.computes.is_empty() {
            return Ok(refused(
                "cold reboot requires at least one compute node in the device list",
                total,
            ));
        }
        // The shelves cycle the switch trays whether listed or not; without
        // them the switch gates could not see those trays come back.
        if targets.switches.is_empty() {
            return Ok(refused(
                "cold reboot requires at least one switch in the device list",
                total,
            ));
        }

        let Some(guard) = self.nodes.try_power_guard(&rack_id) else {
            return Ok(refused(
                format!("rack {rack_id} is busy with another power operation"),
                total,
            ));
        };

        // Every node reserved, all or nothing.
        let mut holds = Vec::with_capacity(total);
        for device in &devices {
            match self.tracker.create_job_if_node_idle(
                &device.rack_id,
                &device.node_id,
                JobType::ColdRebootSequence,
            ) {
                Ok(handle) => holds.push(handle),
                Err(failure) => {
                    for taken in &holds {
                        self.tracker.remove_queued_job(taken.id().as_ref());
                    }
                    return Ok(refused(failure.message, total));
                }
            }
        }
        let release = CancellationToken::new();
        for hold in holds {
            let released = release.clone();
            self.tracker
                .spawn_job(hold, move |job| async move {
                    released.cancelled().await;
                    job.complete("cold reboot reservation released", "");
                })
                .detach();
        }
        // The coordinator's synthetic node makes a second cold reboot of
        // the same rack busy even with a disjoint device list.
        let coordinator = match self.tracker.create_visible_workflow_job_if_node_idle(
            &rack_id,
            &format!("{rack_id}:cold-reboot"),
            JobType::ColdRebootSequence,
        ) {
            Ok(job) => job,
            Err(failure) => {
                release.cancel();
                return Ok(refused(failure.message, total));
            }
        };
        let job_id = coordinator.id().to_string();
        let worker = Worker {
            backend: Arc::clone(&self.backend),
            bmc_timeout: self.bmc_timeout(),
            timings,
            targets,
        };
        let rack = rack_id.clone();
        let release_on_end = release.clone();
        let handle = self.tracker.spawn_job(coordinator, move |job| async move {
            worker.run(job, rack, guard).await;
            release_on_end.cancel();
        });
        // Whatever ends the worker (a panic included), the holds go.
        tokio::spawn(async move {
            let _ = handle.wait().await;
            release.cancel();
        });
        tracing::info!(job_id = %job_id, rack = %rack_id, nodes = total, "cold reboot started");
        let mut batch = batch_response::failure("");
        batch.status = pb::ReturnCode::Success as i32;
        batch.job_id = job_id;
        batch.message = format!(
            "Cold reboot started for {total} nodes. Use GetJobStatus with response.job_id to \
             track per-stage progress."
        );
        Ok(response(batch, total, total))
    }
}

/// What a probe round saw.
enum Probe {
    /// Every compute tray reads Off.
    ComputeDown,
    /// No tray BMC answers.
    TraysUnreachable,
    /// Every tray BMC answers.
    TraysReachable,
}

struct Worker {
    backend: Arc<dyn NodeBackend>,
    bmc_timeout: Duration,
    timings: ColdRebootTimings,
    targets: Targets,
}

/// A stage's failure: the job's message.
type StageResult = Result<(), String>;

impl Worker {
    async fn run(self, job: RmsJobHandle, rack: String, _guard: PowerGuard) {
        let mut timeline = StageTimeline::new(job.id().as_ref(), &rack);
        let outcome = self.stages(&job, &mut timeline).await;
        let result = timeline.to_json().to_string();
        match outcome {
            Ok(()) => {
                tracing::info!(job_id = %job.id(), rack = %rack, "cold reboot completed");
                job.complete("Cold reboot completed", result);
            }
            Err(message) => {
                tracing::error!(job_id = %job.id(), rack = %rack, error = %message, "cold reboot failed");
                let code = if message.contains("timed out") {
                    JobError::Timeout
                } else {
                    JobError::Other
                };
                job.fail(job_failure(code, message).with_result_json(result));
            }
        }
    }

    async fn stages(&self, job: &RmsJobHandle, timeline: &mut StageTimeline) -> StageResult {
        let t = &self.timings;
        let cancel = job.cancellation_token();
        self.power(
            job,
            timeline,
            &self.targets.computes,
            PowerAction::GracefulShutdown,
        )
        .await?;
        self.gate(job, timeline, t.prestage_shutdown, Probe::ComputeDown)
            .await?;
        self.power(job, timeline, &self.targets.shelves, PowerAction::Off)
            .await?;
        self.gate(job, timeline, t.discharge, Probe::TraysUnreachable)
            .await?;
        self.power(job, timeline, &self.targets.shelves, PowerAction::On)
            .await?;
        self.gate(job, timeline, t.bmc_up, Probe::TraysReachable)
            .await?;
        self.switches_ready(job, timeline).await?;
        self.power(job, timeline, &self.targets.computes, PowerAction::On)
            .await?;
        begin(job, timeline, &cancel)?;
        if sleep_or_cancel(t.compute_boot_wait, &cancel).await {
            return Err(cancelled(timeline));
        }
        timeline.finish(
            StageStatus::Completed,
            None,
            json!({ "waited_seconds": t.compute_boot_wait.as_secs() }),
        );
        Ok(())
    }

    /// One power action on every node of a stage, concurrently; the stage
    /// fails if any node fails, naming each.
    async fn power(
        &self,
        job: &RmsJobHandle,
        timeline: &mut StageTimeline,
        nodes: &[Node],
        action: PowerAction,
    ) -> StageResult {
        begin(job, timeline, &job.cancellation_token())?;
        let results = join_all(nodes.iter().map(|n| async move {
            let outcome =
                tokio::time::timeout(self.bmc_timeout, self.backend.set_power(&n.target, action))
                    .await;
            match outcome {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(format!("{}: {e}", n.id)),
                Err(_) => Err(format!(
                    "{}: power operation timed out after {}s",
                    n.id,
                    self.bmc_timeout.as_secs()
                )),
            }
        }))
        .await;
        let failures: Vec<String> = results.into_iter().filter_map(Result::err).collect();
        if failures.is_empty() {
            timeline.finish(
                StageStatus::Completed,
                None,
                json!({ "nodes": nodes.len(), "action": action.as_str() }),
            );
            Ok(())
        } else {
            Err(fail(
                timeline,
                format!(
                    "{} failed: {}",
                    timeline.current_name(),
                    failures.join("; ")
                ),
                json!({ "failures": failures }),
            ))
        }
    }

    /// A floor, then probes every `poll_interval` until `probe` holds or
    /// `poll_max` passed (one last probe at the deadline).
    async fn gate(
        &self,
        job: &RmsJobHandle,
        timeline: &mut StageTimeline,
        timing: StageTiming,
        probe: Probe,
    ) -> StageResult {
        let cancel = job.cancellation_token();
        begin(job, timeline, &cancel)?;
        if sleep_or_cancel(timing.floor, &cancel).await {
            return Err(cancelled(timeline));
        }
        let deadline = Instant::now() + timing.poll_max;
        let mut probes = 0u32;
        loop {
            probes += 1;
            let pending = self.pending(&probe).await;
            if pending.is_empty() {
                timeline.finish(
                    StageStatus::Completed,
                    None,
                    json!({ "probes": probes, "floor_seconds": timing.floor.as_secs() }),
                );
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                let what = match probe {
                    Probe::ComputeDown => "compute trays not powered off",
                    Probe::TraysUnreachable => "tray BMCs still answering",
                    Probe::TraysReachable => "tray BMCs not answering",
                };
                return Err(fail(
                    timeline,
                    format!(
                        "{} timed out after {}s: {what}: {}",
                        timeline.current_name(),
                        timing.poll_max.as_secs(),
                        pending.join(", ")
                    ),
                    json!({ "timeout_seconds": timing.poll_max.as_secs(), "pending": pending }),
                ));
            }
            let pause = self.timings.poll_interval.min(deadline - now);
            if sleep_or_cancel(pause, &cancel).await {
                return Err(cancelled(timeline));
            }
        }
    }

    /// Steps 7-8: every switch tray answers, tried `NVOS_HELLO_ATTEMPTS`
    /// times with a doubling backoff between attempts.
    async fn switches_ready(
        &self,
        job: &RmsJobHandle,
        timeline: &mut StageTimeline,
    ) -> StageResult {
        let cancel = job.cancellation_token();
        begin(job, timeline, &cancel)?;
        let mut waiting = Vec::new();
        for attempt in 0..NVOS_HELLO_ATTEMPTS {
            waiting = self
                .not_yet(self.targets.switches.iter(), |s| s.is_some())
                .await;
            if waiting.is_empty() {
                timeline.finish(
                    StageStatus::Completed,
                    None,
                    json!({ "attempts": attempt + 1, "probe": "switch_bmc" }),
                );
                return Ok(());
            }
            if attempt + 1 < NVOS_HELLO_ATTEMPTS {
                let backoff = self.timings.nvos_hello_backoff * 2u32.pow(attempt);
                if sleep_or_cancel(backoff, &cancel).await {
                    return Err(cancelled(timeline));
                }
            }
        }
        Err(fail(
            timeline,
            format!(
                "switches not ready after {NVOS_HELLO_ATTEMPTS} attempts; unresponsive switches: {}",
                waiting.join(", ")
            ),
            json!({ "attempts": NVOS_HELLO_ATTEMPTS, "unresponsive_switches": waiting, "probe": "switch_bmc" }),
        ))
    }

    /// The nodes that do not yet satisfy `probe`.
    async fn pending(&self, probe: &Probe) -> Vec<String> {
        match probe {
            Probe::ComputeDown => {
                self.not_yet(self.targets.computes.iter(), |s| s == Some(PowerState::Off))
                    .await
            }
            Probe::TraysUnreachable => self.not_yet(self.targets.trays(), |s| s.is_none()).await,
            Probe::TraysReachable => self.not_yet(self.targets.trays(), |s| s.is_some()).await,
        }
    }

    /// Reads every node's state concurrently; the ids of those whose state
    /// does not satisfy `settled` (`None` = the BMC does not answer).
    async fn not_yet<'a>(
        &self,
        nodes: impl Iterator<Item = &'a Node>,
        settled: impl Fn(Option<PowerState>) -> bool,
    ) -> Vec<String> {
        let states = join_all(nodes.map(|n| async move { (n, self.read(&n.target).await) })).await;
        states
            .into_iter()
            .filter(|(_, state)| !settled(*state))
            .map(|(n, _)| n.id.clone())
            .collect()
    }

    /// A node's power state when its BMC answers with a definite one;
    /// `None` (unreachable) for an error, a timeout or `Unknown`.
    async fn read(&self, node: &NodeTarget) -> Option<PowerState> {
        match tokio::time::timeout(self.bmc_timeout, self.backend.power_state(node)).await {
            Ok(Ok(state @ (PowerState::On | PowerState::Off))) => Some(state),
            _ => None,
        }
    }
}

/// Starts the timeline's next stage and shows it in the job, unless the
/// job was cancelled.
fn begin(
    job: &RmsJobHandle,
    timeline: &mut StageTimeline,
    cancel: &CancellationToken,
) -> StageResult {
    if cancel.is_cancelled() {
        let message = format!("cold reboot cancelled before {}", timeline.current_name());
        return Err(fail(timeline, message, json!({ "cancelled": true })));
    }
    let description = timeline.start();
    tracing::info!(job_id = %job.id(), stage = timeline.current_name(), "cold reboot stage starting");
    job.progress(description);
    Ok(())
}

fn fail(timeline: &mut StageTimeline, message: String, details: Value) -> String {
    timeline.finish(StageStatus::Failed, Some(message.clone()), details);
    message
}

fn cancelled(timeline: &mut StageTimeline) -> String {
    let message = format!("cold reboot cancelled during {}", timeline.current_name());
    fail(timeline, message, json!({ "cancelled": true }))
}

/// Sleeps `duration`; true when `cancel` fired first.
async fn sleep_or_cancel(duration: Duration, cancel: &CancellationToken) -> bool {
    if duration.is_zero() {
        return cancel.is_cancelled();
    }
    tokio::select! {
        () = tokio::time::sleep(duration) => cancel.is_cancelled(),
        () = cancel.cancelled() => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_and_zero_timings_take_the_defaults() {
        let t = ColdRebootTimings::from_request(&pb::ExecuteColdRebootRequest::default());
        assert_eq!(t.prestage_shutdown.floor, Duration::ZERO);
        assert_eq!(t.prestage_shutdown.poll_max, Duration::from_secs(300));
        assert_eq!(t.discharge.floor, Duration::from_secs(180));
        assert_eq!(t.discharge.poll_max, Duration::from_secs(600));
        assert_eq!(t.bmc_up.floor, Duration::from_secs(120));
        assert_eq!(t.bmc_up.poll_max, Duration::from_secs(600));
        assert_eq!(t.nvos_hello_backoff, Duration::from_secs(30));
        assert_eq!(t.compute_boot_wait, Duration::from_secs(300));
        assert_eq!(t.poll_interval, Duration::from_secs(15));
        let zero = ColdRebootTimings::from_request(&pb::ExecuteColdRebootRequest {
            discharge_floor_seconds: Some(0),
            poll_interval_seconds: Some(0),
            ..Default::default()
        });
        assert_eq!(zero, t);
        let set = ColdRebootTimings::from_request(&pb::ExecuteColdRebootRequest {
            prestage_shutdown_floor_seconds: Some(6),
            prestage_shutdown_poll_max_seconds: Some(10),
            discharge_floor_seconds: Some(1),
            discharge_poll_max_seconds: Some(2),
            bmc_up_floor_seconds: Some(3),
            bmc_up_poll_max_seconds: Some(4),
            nvos_hello_backoff_seconds: Some(5),
            compute_boot_wait_seconds: Some(7),
            poll_interval_seconds: Some(9),
            ..Default::default()
        });
        assert_eq!(set.prestage_shutdown.floor, Duration::from_secs(6));
        assert_eq!(set.prestage_shutdown.poll_max, Duration::from_secs(10));
        assert_eq!(set.discharge.floor, Duration::from_secs(1));
        assert_eq!(set.discharge.poll_max, Duration::from_secs(2));
        assert_eq!(set.bmc_up.floor, Duration::from_secs(3));
        assert_eq!(set.bmc_up.poll_max, Duration::from_secs(4));
        assert_eq!(set.nvos_hello_backoff, Duration::from_secs(5));
        assert_eq!(set.compute_boot_wait, Duration::from_secs(7));
        assert_eq!(set.poll_interval, Duration::from_secs(9));
    }

    #[test]
    fn the_timeline_runs_in_order_and_skips_after_a_failure() {
        let mut timeline = StageTimeline::new("job-1", "rack-1");
        let first = timeline.start();
        assert_eq!(
            first,
            "Rack reboot step 0: Gracefully shutting down compute trays"
        );
        let running = timeline.to_json();
        assert_eq!(running["current_stage"], "prestage_shutdown_compute");
        assert_eq!(running["node_id"], "rack-1:cold-reboot");
        timeline.finish(StageStatus::Completed, None, json!({ "nodes": 2 }));
        timeline.start();
        timeline.finish(StageStatus::Completed, None, json!({}));
        assert_eq!(
            timeline.start(),
            "Rack reboot step 1: Powering off power shelves"
        );
        fail(
            &mut timeline,
            "power_off_shelves failed: ps1: x".into(),
            json!({}),
        );
        let done = timeline.to_json();
        let statuses: Vec<&str> = done["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["status"].as_str().unwrap())
            .collect();
        assert_eq!(
            statuses,
            [
                "completed",
                "completed",
                "failed",
                "skipped",
                "skipped",
                "skipped",
                "skipped",
                "skipped",
                "skipped"
            ]
        );
        assert_eq!(done["current_stage"], "");
        assert_eq!(
            done["stages"][2]["message"],
            "power_off_shelves failed: ps1: x"
        );
        assert_eq!(done["stages"][0]["details"]["nodes"], 2);
        assert_eq!(done["stages"][3]["step"], "2-3");
    }
}
