//! The firmware update flow (spec §3): target resolution inside the
//! firmware directory, the admission order of `UpdateFirmware` and the two
//! batch RPCs, and the per-node worker that drives a back end and records
//! the job's result.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rackflow_api::rack_manager as pb;
use serde::Serialize;
use serde_json::{Value, json};
use tonic::Status;

use super::nodes::{self, RegisteredNode};
use super::{RackManagerService, batch_response, legacy_error};
use crate::backend::{
    BackendError, FirmwareImage, FirmwareOutcome, FirmwareProgress, NodeBackend, NodeTarget,
    PowerAction,
};
use crate::job::{JobError, JobFailure, JobTracker, JobType, RmsJobHandle};

pub use crate::backend::PACKAGE_DERIVED;
/// Most characters of a failure summary (spec §3.3).
const SUMMARY_LIMIT: usize = 1200;

/// One resolved firmware target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedTarget {
    /// The request's `target` (may be empty).
    pub target: String,
    /// The request's `filename`.
    pub filename: String,
    /// The canonical file inside the firmware directory.
    pub path: PathBuf,
}

impl ResolvedTarget {
    fn label(&self) -> &str {
        if self.target.is_empty() {
            PACKAGE_DERIVED
        } else {
            &self.target
        }
    }
}

/// A resolution failure: the message and the job error it records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveError {
    pub code: JobError,
    pub message: String,
}

impl ResolveError {
    fn response_code(&self) -> pb::FirmwareUpdateError {
        match self.code {
            JobError::FileNotFound => pb::FirmwareUpdateError::FileNotFound,
            _ => pb::FirmwareUpdateError::Unspecified,
        }
    }
}

/// The request's targets: the list wins when non-empty, else the single
/// `filename`/`target` pair (spec §3.1).
pub fn requested_targets(
    list: &[pb::FirmwareTarget],
    filename: &str,
    target: &str,
) -> (Vec<pb::FirmwareTarget>, bool) {
    if !list.is_empty() {
        (list.to_vec(), true)
    } else if filename.is_empty() && target.is_empty() {
        (Vec::new(), false)
    } else {
        (
            vec![pb::FirmwareTarget {
                target: target.to_owned(),
                filename: filename.to_owned(),
            }],
            false,
        )
    }
}

/// Resolves every target inside `firmware_dir` (spec §3.2 step 4). Files
/// are checked, not hashed.
pub fn resolve_targets(
    firmware_dir: &Path,
    targets: &[pb::FirmwareTarget],
    from_list: bool,
) -> Result<Vec<ResolvedTarget>, ResolveError> {
    if targets.is_empty() {
        return Err(ResolveError {
            code: JobError::InvalidArgument,
            message: "no firmware targets specified".to_owned(),
        });
    }
    targets
        .iter()
        .map(|t| {
            resolve_one(firmware_dir, t, from_list).map_err(|message| {
                let message = if from_list {
                    format!("{message} (component: {})", t.target)
                } else {
                    message
                };
                ResolveError {
                    code: JobError::FileNotFound,
                    message,
                }
            })
        })
        .collect()
}

fn resolve_one(
    firmware_dir: &Path,
    target: &pb::FirmwareTarget,
    from_list: bool,
) -> Result<ResolvedTarget, String> {
    if target.filename.trim().is_empty() {
        return Err(if from_list {
            "firmware_targets entry has empty filename".to_owned()
        } else {
            format!("firmware file not found: {}", target.filename)
        });
    }
    let requested = Path::new(&target.filename);
    let joined = if requested.is_absolute() {
        requested.to_path_buf()
    } else {
        firmware_dir.join(requested)
    };
    // In-band messages name the file as the caller sent it: the server's
    // own paths (its firmware directory, where a link leads) stay in its
    // log.
    let path = joined.canonicalize().map_err(|e| {
        tracing::debug!(path = %joined.display(), error = %e, "firmware file not found");
        format!("firmware file not found: {}", target.filename)
    })?;
    let dir = firmware_dir.canonicalize().map_err(|e| {
        tracing::warn!(dir = %firmware_dir.display(), error = %e, "firmware directory unreadable");
        format!("firmware file not found: {}", target.filename)
    })?;
    if !path.starts_with(&dir) || !path.is_file() {
        tracing::warn!(
            requested = %target.filename, resolved = %path.display(), dir = %dir.display(),
            "firmware file outside the firmware directory refused"
        );
        return Err(format!(
            "firmware file {} is outside firmware directory",
            target.filename
        ));
    }
    Ok(ResolvedTarget {
        target: target.target.clone(),
        filename: target.filename.clone(),
        path,
    })
}

/// Failure `result_json` of a firmware job (spec §3.3 step 6).
#[derive(Debug, Serialize)]
struct FailureResult<'a> {
    status: &'static str,
    phase: &'a str,
    error_code: String,
    error_message: &'a str,
    summary: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<FailureTarget<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    raw_error: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct FailureTarget<'a> {
    component: &'a str,
    firmware_file: &'a str,
}

/// A firmware job failure with the §3.3 result payload.
pub fn firmware_failure(
    phase: &str,
    code: JobError,
    message: &str,
    target: Option<&ResolvedTarget>,
    raw_error: Option<&str>,
) -> JobFailure {
    let summary = summarize(message);
    let result = FailureResult {
        status: "failed",
        phase,
        error_code: format!("{code:?}"),
        error_message: message,
        summary: summary.clone(),
        target: target.map(|t| FailureTarget {
            component: t.label(),
            firmware_file: &t.filename,
        }),
        raw_error: raw_error.filter(|raw| *raw != summary),
    };
    let result_json = serde_json::to_string(&result).unwrap_or_default();
    JobFailure::new(code, summary).with_result_json(result_json)
}

/// Whitespace-normalised, truncated to 1200 characters with "...".
fn summarize(message: &str) -> String {
    let normalized = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if normalized.chars().count() <= SUMMARY_LIMIT {
        normalized
    } else {
        let cut: String = normalized.chars().take(SUMMARY_LIMIT - 3).collect();
        format!("{cut}...")
    }
}

/// What a worker needs besides its handle.
pub struct WorkerContext {
    pub backend: Arc<dyn NodeBackend>,
    pub tracker: Arc<JobTracker>,
    pub node: NodeTarget,
    pub targets: Vec<ResolvedTarget>,
    pub activate: bool,
    pub force: bool,
    pub task_timeout: Duration,
}

/// Spawns the worker of one admitted job (detached: the tracker seals it on
/// every exit path).
pub fn spawn_worker(tracker: &Arc<JobTracker>, job: RmsJobHandle, ctx: WorkerContext) {
    tracker
        .spawn_job(job, move |job| run_worker(job, ctx))
        .detach();
}

/// The per-node worker (spec §3.3), without the vendor-specific stages and
/// the post-activation version check.
async fn run_worker(job: RmsJobHandle, ctx: WorkerContext) {
    job.progress("Starting firmware update");
    let cancel = job.cancellation_token();
    let total = ctx.targets.len();
    let mut entries = Vec::with_capacity(total);
    let (mut completed, mut skipped) = (0usize, 0usize);
    for (i, target) in ctx.targets.iter().enumerate() {
        if cancel.is_cancelled() {
            let message = "firmware update job cancelled before starting the next target group";
            job.fail(firmware_failure(
                "cancelled",
                JobError::Other,
                message,
                Some(target),
                None,
            ));
            return;
        }
        let label = target.label().to_owned();
        job.progress(format!("Uploading target {}/{total}: {label}", i + 1));
        job.progress(format!("Running firmware workflow for target {label}"));
        let image = FirmwareImage {
            target: label.clone(),
            path: target.path.clone(),
            force: ctx.force,
        };
        let tracker = Arc::clone(&ctx.tracker);
        let job_id = job.id().to_string();
        let progress_label = label.clone();
        // The BMC task being polled, for a poll timeout's message.
        let polled_task = Arc::new(std::sync::Mutex::new(None::<String>));
        let seen_task = Arc::clone(&polled_task);
        let sink = move |p: FirmwareProgress| {
            if let Some(task) = &p.task_id {
                *seen_task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task.clone());
                tracker.mark_running(
                    &job_id,
                    &format!("Polling firmware task {task} for target {progress_label}"),
                );
            }
        };
        let outcome = tokio::select! {
            () = cancel.cancelled() => {
                let message = "firmware update job cancelled while updating target";
                job.fail(firmware_failure("cancelled", JobError::Other, message, Some(target), None));
                return;
            }
            r = tokio::time::timeout(ctx.task_timeout, ctx.backend.update_firmware(&ctx.node, &image, &sink)) => r,
        };
        let outcome = match outcome {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(error)) => {
                job.fail(update_failure(&label, target, &error));
                return;
            }
            Err(_) => {
                let task = polled_task
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                job.fail(timeout_failure(
                    &label,
                    target,
                    task.as_deref(),
                    ctx.task_timeout,
                ));
                return;
            }
        };
        entries.push(match outcome {
            FirmwareOutcome::Completed { task_id, summary } => {
                completed += 1;
                json!({
                    "component": target.target,
                    "firmware_file": target.filename,
                    "target": label,
                    "status": "completed",
                    "nvfwupd_summary": {
                        "message": summary,
                        "task_ids": task_id.into_iter().collect::<Vec<_>>(),
                        "details": Value::Null,
                    },
                })
            }
            FirmwareOutcome::Skipped { reason } => {
                skipped += 1;
                json!({
                    "component": target.target,
                    "firmware_file": target.filename,
                    "target": label,
                    "status": "skipped",
                    "reason": reason,
                })
            }
        });
    }
    let activated = ctx.activate && completed > 0;
    if activated {
        if cancel.is_cancelled() {
            job.fail(firmware_failure(
                "cancelled",
                JobError::Other,
                "firmware update job cancelled before activation",
                None,
                None,
            ));
            return;
        }
        job.progress("Activating firmware");
        let result = tokio::time::timeout(
            ctx.task_timeout,
            ctx.backend.set_power(&ctx.node, PowerAction::ForceRestart),
        )
        .await;
        let error = match result {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some("activation timed out".to_owned()),
        };
        if let Some(error) = error {
            let message = format!("Firmware flashed but activation failed: {error}");
            job.fail(firmware_failure(
                "activation",
                JobError::ClientError,
                &message,
                None,
                Some(&error),
            ));
            return;
        }
    }
    let status = if completed == 0 && skipped == total {
        "already_up_to_date"
    } else {
        "completed"
    };
    let result = json!({
        "rack_id": ctx.node.rack_id,
        "node_id": ctx.node.node_id,
        "targets_completed": completed,
        "targets_skipped": skipped,
        "targets": entries,
        "activated": activated,
        "post_activation_version_check": Value::Null,
        "status": status,
    });
    job.complete("Completed", result.to_string());
}

/// The update of `target` ran past the task timeout. Accepted by the BMC
/// (its task seen): a poll failure of kind `Other`, as the reference words
/// it; never accepted: the upload hung.
fn timeout_failure(
    label: &str,
    target: &ResolvedTarget,
    task: Option<&str>,
    timeout: Duration,
) -> JobFailure {
    let secs = timeout.as_secs();
    match task {
        Some(task) => {
            let raw = format!("polling firmware task {task} exceeded timeout of {secs}s");
            let message = format!("Poll failed for target {label}: {raw}");
            firmware_failure("poll", JobError::Other, &message, Some(target), Some(&raw))
        }
        None => {
            let raw = format!("update request exceeded timeout of {secs}s");
            let message = format!("Upload failed for target {label}: {raw}");
            firmware_failure(
                "update",
                JobError::Timeout,
                &message,
                Some(target),
                Some(&raw),
            )
        }
    }
}

fn update_failure(label: &str, target: &ResolvedTarget, error: &BackendError) -> JobFailure {
    let raw = error.to_string();
    if error.is_poll_failure() {
        let message = format!("Poll failed for target {label}: {raw}");
        let code = if matches!(error, BackendError::Timeout(_)) {
            JobError::Timeout
        } else {
            JobError::Other
        };
        firmware_failure("poll", code, &message, Some(target), Some(&raw))
    } else {
        let message = format!("Upload failed for target {label}: {raw}");
        let code = match error {
            BackendError::Precondition(_) => JobError::FailedPrecondition,
            BackendError::Unauthenticated => JobError::Unauthenticated,
            BackendError::TargetNotFound(_) => JobError::TargetNotFound,
            _ => JobError::ClientError,
        };
        firmware_failure("update", code, &message, Some(target), Some(&raw))
    }
}

/// The answer of a firmware batch over ephemeral nodes (`BatchUpdateFirmware`
/// and the firmware-object applies): admitted nodes' results, then the
/// rejected ones; the parent job's id.
pub(super) fn ephemeral_batch_response(
    mut results: Vec<pb::NodeOperationResult>,
    rejected: &[crate::job::RejectedBatchTarget],
    created: usize,
    total: usize,
    parent: String,
) -> pb::NodeBatchResponse {
    results.extend(
        rejected
            .iter()
            .map(|r| batch_response::node_failed(&r.node_id, &r.error_message)),
    );
    let message = if created == 0 {
        "No firmware update jobs created".to_owned()
    } else {
        format!(
            "Created {created} firmware update jobs out of {total} nodes. Use GetFirmwareJobStatus with job_id to track overall batch status."
        )
    };
    let mut response = batch_response::from_results(message, results, total);
    response.job_id = parent;
    response
}

impl RackManagerService {
    pub(super) fn worker(
        &self,
        node: NodeTarget,
        targets: Vec<ResolvedTarget>,
        activate: bool,
        force: bool,
    ) -> WorkerContext {
        WorkerContext {
            backend: Arc::clone(&self.backend),
            tracker: Arc::clone(&self.tracker),
            node,
            targets,
            activate,
            force,
            task_timeout: self.config.firmware_task_timeout(),
        }
    }

    /// `UpdateFirmware` (spec §3.2).
    pub(super) fn handle_update_firmware(
        &self,
        req: pb::UpdateFirmwareRequest,
    ) -> pb::UpdateFirmwareResponse {
        let failure = |message: String, code: pb::FirmwareUpdateError| {
            tracing::warn!(rack = %req.rack_id, node = %req.node_id, error = %message, "firmware job rejected");
            pb::UpdateFirmwareResponse {
                status: pb::ReturnCode::Failure as i32,
                message,
                error_code: code as i32,
                job_id: String::new(),
            }
        };
        let node = match self.nodes.get(&req.rack_id, &req.node_id) {
            Ok(node) => node,
            Err(lookup) => {
                return failure(
                    lookup.message().to_owned(),
                    pb::FirmwareUpdateError::Unspecified,
                );
            }
        };
        // Claim the node first: from here every early return seals the job.
        let job = match self.tracker.create_visible_workflow_job_if_node_idle(
            &req.rack_id,
            &req.node_id,
            JobType::FirmwareUpdate,
        ) {
            Ok(job) => job,
            Err(refusal) => {
                let code = legacy_error(refusal.error_code());
                return failure(refusal.message, code);
            }
        };
        let (targets, from_list) =
            requested_targets(&req.firmware_targets, &req.filename, &req.target);
        let resolved = match resolve_targets(&self.config.firmware_dir, &targets, from_list) {
            Ok(resolved) => resolved,
            Err(e) => {
                job.fail(firmware_failure("planning", e.code, &e.message, None, None));
                return failure(e.message.clone(), e.response_code());
            }
        };
        let job_id = job.id().to_string();
        spawn_worker(
            &self.tracker,
            job,
            self.worker(node.target, resolved, req.activate, req.force_update),
        );
        pb::UpdateFirmwareResponse {
            status: pb::ReturnCode::Success as i32,
            message: format!("Firmware update job created for {}", req.node_id),
            error_code: pb::FirmwareUpdateError::Success as i32,
            job_id,
        }
    }

    /// `BatchUpdateFirmwareByNodeType` (registered nodes).
    pub(super) fn batch_update_by_node_type(
        &self,
        req: pb::BatchUpdateFirmwareByNodeTypeRequest,
    ) -> Result<pb::BatchUpdateFirmwareByNodeTypeResponse, Status> {
        let respond =
            |response: pb::NodeBatchResponse, jobs| pb::BatchUpdateFirmwareByNodeTypeResponse {
                response: Some(response),
                jobs,
            };
        let selector = nodes::NodeSelector::parse(req.node_type, req.node_descriptor.as_ref())?;
        let rack_nodes = match self.nodes.rack_nodes(&req.rack_id) {
            Ok(nodes) => nodes,
            Err(lookup) => {
                return Ok(respond(
                    batch_response::failure(lookup.message()),
                    Vec::new(),
                ));
            }
        };
        let (targets, from_list) =
            requested_targets(&req.firmware_targets, &req.filename, &req.target);
        let resolved = match resolve_targets(&self.config.firmware_dir, &targets, from_list) {
            Ok(resolved) => resolved,
            Err(e) => return Ok(respond(batch_response::failure(&e.message), Vec::new())),
        };
        let Some(parent) = self
            .tracker
            .create_parent_job(&req.rack_id, JobType::FirmwareUpdate)
        else {
            return Ok(respond(
                batch_response::failure("failed to create parent firmware update job"),
                Vec::new(),
            ));
        };
        let matching: Vec<RegisteredNode> = rack_nodes
            .into_iter()
            .filter(|n| selector.matches(n))
            .collect();
        if matching.is_empty() {
            self.tracker
                .mark_failed_message(&parent, "no matching nodes found");
            let mut response = batch_response::failure("no matching nodes found");
            response.job_id = parent;
            return Ok(respond(response, Vec::new()));
        }
        let matched = matching.len();
        let targets = matching
            .into_iter()
            .map(|n| (n.target.rack_id.clone(), n.target.node_id.clone(), n))
            .collect();
        // Admit the whole batch before any node is touched (spec §1.11).
        let (admitted, rejected) =
            self.tracker
                .create_batch_jobs(&parent, JobType::FirmwareUpdate, targets, |_| Ok(()));
        if admitted.is_empty() {
            self.tracker
                .mark_failed_message(&parent, "no firmware update jobs created");
        }
        let mut results = Vec::new();
        let mut jobs = Vec::new();
        for (node, job, ()) in admitted {
            jobs.push(pb::NodeFirmwareJobInfo {
                node_id: node.target.node_id.clone(),
                job_id: job.id().to_string(),
            });
            results.push(batch_response::node_ok(&node.target.node_id));
            spawn_worker(
                &self.tracker,
                job,
                self.worker(
                    node.target,
                    resolved.clone(),
                    req.activate,
                    req.force_update,
                ),
            );
        }
        results.extend(
            rejected
                .iter()
                .map(|r| batch_response::node_failed(&r.node_id, &r.error_message)),
        );
        let created = jobs.len();
        let message = if created == 0 {
            "no firmware update jobs created".to_owned()
        } else {
            format!(
                "Created {created} firmware update jobs for rack {}",
                req.rack_id
            )
        };
        let mut response = batch_response::from_results(message, results, matched);
        response.job_id = parent;
        Ok(respond(response, jobs))
    }

    /// `BatchUpdateFirmware` (ephemeral nodes).
    pub(super) fn batch_update(
        &self,
        req: pb::BatchUpdateFirmwareRequest,
    ) -> Result<pb::BatchUpdateFirmwareResponse, Status> {
        let respond = |response: pb::NodeBatchResponse, jobs| pb::BatchUpdateFirmwareResponse {
            response: Some(response),
            jobs,
        };
        let nodes_in = req
            .nodes
            .as_ref()
            .map(|s| s.nodes.clone())
            .unwrap_or_default();
        self.admit_nodes(&nodes_in)?;
        if nodes_in.is_empty() {
            return Ok(respond(
                batch_response::failure("No nodes specified in request"),
                Vec::new(),
            ));
        }
        if req.firmware_targets.is_empty() && req.node_descriptor_firmware_targets.is_empty() {
            return Ok(respond(
                batch_response::failure("No firmware targets specified in request"),
                Vec::new(),
            ));
        }
        // Resolve every list up front: a bad file fails the whole request.
        let mut by_type = std::collections::HashMap::new();
        for (node_type, list) in &req.firmware_targets {
            let name = pb::NodeType::try_from(*node_type)
                .map(|t| t.as_str_name().to_owned())
                .unwrap_or_else(|_| node_type.to_string());
            let resolved = self.resolve_list(list, &name)?;
            match resolved {
                Ok(resolved) => {
                    by_type.insert(*node_type, resolved);
                }
                Err(message) => return Ok(respond(batch_response::failure(&message), Vec::new())),
            }
        }
        let mut by_descriptor = Vec::new();
        for entry in &req.node_descriptor_firmware_targets {
            let list = entry.firmware_targets.clone().unwrap_or_default();
            let descriptor = entry.node_descriptor.clone().unwrap_or_default();
            let name = format!("{:?}", descriptor.attributes);
            match self.resolve_list(&list, &name)? {
                Ok(resolved) => by_descriptor.push((descriptor, resolved)),
                Err(message) => return Ok(respond(batch_response::failure(&message), Vec::new())),
            }
        }
        let rack_id = nodes_in
            .first()
            .map(|n| n.rack_id.clone())
            .unwrap_or_default();
        let Some(parent) = self
            .tracker
            .create_parent_job(&rack_id, JobType::FirmwareUpdate)
        else {
            return Ok(respond(
                batch_response::failure("failed to create parent firmware update job"),
                Vec::new(),
            ));
        };
        let total = nodes_in.len();
        let targets = nodes_in
            .into_iter()
            .map(|n| (n.rack_id.clone(), n.node_id.clone(), n))
            .collect();
        let (admitted, rejected) = self.tracker.create_batch_jobs(
            &parent,
            JobType::FirmwareUpdate,
            targets,
            |info: &pb::NodeInfo| {
                let node_type = info.r#type.unwrap_or(0);
                let resolved = by_type
                    .get(&node_type)
                    .filter(|_| node_type != 0)
                    .or_else(|| {
                        by_descriptor
                            .iter()
                            .find(|(d, _)| {
                                nodes::descriptor_matches(info.node_descriptor.as_ref(), d)
                            })
                            .map(|(_, r)| r)
                    })
                    .cloned()
                    .ok_or_else(|| {
                        let name = pb::NodeType::try_from(node_type)
                            .map(|t| t.as_str_name().to_owned())
                            .unwrap_or_else(|_| node_type.to_string());
                        format!("No firmware targets provided for node type {name}")
                    })?;
                let target = nodes::target_of(info, true)?;
                Ok((target, resolved))
            },
        );
        if admitted.is_empty() {
            self.tracker
                .mark_failed_message(&parent, "No firmware update jobs created");
        }
        let mut results = Vec::new();
        let mut jobs = Vec::new();
        for (info, job, (target, resolved)) in admitted {
            jobs.push(pb::NodeFirmwareJobInfo {
                node_id: info.node_id.clone(),
                job_id: job.id().to_string(),
            });
            results.push(batch_response::node_ok(&info.node_id));
            spawn_worker(
                &self.tracker,
                job,
                self.worker(target, resolved, req.activate, req.force_update),
            );
        }
        let response = ephemeral_batch_response(results, &rejected, jobs.len(), total, parent);
        Ok(respond(response, jobs))
    }

    /// Resolves one target list of a batch; `Ok(Err(msg))` is an in-band
    /// failure.
    fn resolve_list(
        &self,
        list: &pb::FirmwareTargetList,
        node_type: &str,
    ) -> Result<Result<Vec<ResolvedTarget>, String>, Status> {
        if list.targets.is_empty() {
            return Ok(Err(format!(
                "Failed to resolve firmware targets for node type {node_type}: empty list"
            )));
        }
        Ok(
            resolve_targets(&self.config.firmware_dir, &list.targets, true)
                .map_err(|e| format!("Failed to resolve firmware targets: {}", e.message)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fw(target: &str, filename: &str) -> pb::FirmwareTarget {
        pb::FirmwareTarget {
            target: target.into(),
            filename: filename.into(),
        }
    }

    #[test]
    fn list_wins_over_single_target() {
        let (t, from_list) = requested_targets(&[fw("BMC", "a.bin")], "b.bin", "BIOS");
        assert!(from_list);
        assert_eq!(t, [fw("BMC", "a.bin")]);
        let (t, from_list) = requested_targets(&[], "b.bin", "BIOS");
        assert!(!from_list);
        assert_eq!(t, [fw("BIOS", "b.bin")]);
        assert!(requested_targets(&[], "", "").0.is_empty());
    }

    #[test]
    fn resolution_messages() {
        let dir = std::env::temp_dir().join(format!("rms-fw-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("bmc.bin"), b"x").unwrap();
        let outside =
            std::env::temp_dir().join(format!("rms-outside-{}.bin", uuid::Uuid::new_v4()));
        std::fs::write(&outside, b"x").unwrap();

        let ok = resolve_targets(&dir, &[fw("BMC", "bmc.bin")], false).unwrap();
        assert_eq!(ok[0].path, dir.canonicalize().unwrap().join("bmc.bin"));

        let e = resolve_targets(&dir, &[], false).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (JobError::InvalidArgument, "no firmware targets specified")
        );

        let e = resolve_targets(&dir, &[fw("BMC", "nope.bin")], false).unwrap_err();
        assert_eq!(e.code, JobError::FileNotFound);
        assert_eq!(e.message, "firmware file not found: nope.bin");
        // The server's own paths never reach the caller.
        let e = resolve_targets(&dir, &[fw("BMC", "../../etc/passwd")], false).unwrap_err();
        assert!(
            !e.message.contains(&*dir.to_string_lossy()) && !e.message.contains("/tmp"),
            "{}",
            e.message
        );

        let e = resolve_targets(&dir, &[fw("BIOS", outside.to_str().unwrap())], true).unwrap_err();
        assert!(
            e.message.contains("is outside firmware directory"),
            "{}",
            e.message
        );
        assert!(e.message.ends_with(" (component: BIOS)"), "{}", e.message);

        let e = resolve_targets(&dir, &[fw("BMC", "")], true).unwrap_err();
        assert_eq!(
            e.message,
            "firmware_targets entry has empty filename (component: BMC)"
        );
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_file(&outside);
    }

    #[test]
    fn failure_payload_shape() {
        let target = ResolvedTarget {
            target: String::new(),
            filename: "pkg.fwpkg".into(),
            path: "/fw/pkg.fwpkg".into(),
        };
        let f = firmware_failure(
            "update",
            JobError::ClientError,
            "Upload   failed\n x",
            Some(&target),
            Some("raw"),
        );
        assert_eq!(f.message, "Upload failed x");
        let v: Value = serde_json::from_str(f.result_json.as_deref().unwrap()).unwrap();
        assert_eq!(v["status"], "failed");
        assert_eq!(v["phase"], "update");
        assert_eq!(v["error_code"], "ClientError");
        assert_eq!(v["target"]["component"], PACKAGE_DERIVED);
        assert_eq!(v["raw_error"], "raw");
        let long = "y".repeat(2000);
        assert_eq!(summarize(&long).chars().count(), SUMMARY_LIMIT);
        assert!(summarize(&long).ends_with("..."));
    }
}
