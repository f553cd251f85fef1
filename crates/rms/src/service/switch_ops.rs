//! Switch resets, mTLS and password (issue 36):
//! `BatchResetSwitchFactoryDefault`, `BatchResetSwitchSdnFactoryDefault`,
//! `BatchDisableSwitchMtls`, `UpdateSwitchSystemPassword` — each a parent
//! job with one child per switch (poll `GetJobStatus`); the per-node
//! results report admission only (spec §2.2). The new password is never
//! logged nor put in a job's result. Owns the batch core every switch RPC
//! runs its children on (`start_switch_jobs`), the image RPCs included.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use rackflow_api::rack_manager as pb;
use serde_json::json;
use tonic::Status;

use super::switch_image::switch_target;
use super::{RackManagerService, batch_response, nodes};
use crate::backend::Secret;
use crate::job::{JobError, JobType, job_failure};
use crate::switch::{ResetScope, SwitchBackend, SwitchError, SwitchTarget};

/// Reports a step of one switch's work as its job's description.
pub(super) type Progress = Arc<dyn Fn(&str) + Send + Sync>;

/// One switch's work: the result JSON, or the failure.
pub(super) type SwitchWork = Arc<
    dyn Fn(
            Arc<dyn SwitchBackend>,
            SwitchTarget,
            Progress,
        ) -> Pin<Box<dyn Future<Output = Result<String, SwitchError>> + Send>>
        + Send
        + Sync,
>;

/// How the answer of the parent-job RPCs tells the caller to poll.
const POLL_WITH_JOB_STATUS: &str =
    "GetJobStatus with job_id and include_child_job_states to track them.";

impl RackManagerService {
    /// Admits one child of `job_type` per switch of `set` under a new
    /// parent and runs `work` for each; validation failures in-band.
    fn start_switch_batch(
        &self,
        set: Option<&pb::NodeSet>,
        job_type: JobType,
        done: &'static str,
        work: SwitchWork,
    ) -> Result<pb::NodeBatchResponse, Status> {
        let nodes_in = set.map(|s| s.nodes.clone()).unwrap_or_default();
        nodes::normalize_node_set(&nodes_in)?;
        Ok(self
            .start_switch_jobs(nodes_in, job_type, done, POLL_WITH_JOB_STATUS, work)
            .0)
    }

    /// The one batch of every switch RPC: one child of `job_type` per
    /// switch of `nodes_in` (normalized) under a new parent, each running
    /// `work` bounded by the firmware task timeout and the job's
    /// cancellation; the answer (its message ends "Use {poll_with}") and
    /// each admitted node's child job, `(node_id, job_id)`.
    pub(super) fn start_switch_jobs(
        &self,
        nodes_in: Vec<pb::NodeInfo>,
        job_type: JobType,
        done: &'static str,
        poll_with: &str,
        work: SwitchWork,
    ) -> (pb::NodeBatchResponse, Vec<(String, String)>) {
        if nodes_in.is_empty() {
            return (
                batch_response::failure("No nodes specified in request"),
                Vec::new(),
            );
        }
        let rack_id = nodes_in
            .first()
            .map(|n| n.rack_id.clone())
            .unwrap_or_default();
        let Some(parent) = self.tracker.create_parent_job(&rack_id, job_type) else {
            return (
                batch_response::failure(&format!(
                    "failed to create parent {} job",
                    job_type.batch_noun()
                )),
                Vec::new(),
            );
        };
        let total = nodes_in.len();
        let targets = nodes_in
            .into_iter()
            .map(|n| (n.rack_id.clone(), n.node_id.clone(), n))
            .collect();
        let (admitted, rejected) =
            self.tracker
                .create_batch_jobs(&parent, job_type, targets, switch_target);
        if admitted.is_empty() {
            self.tracker.mark_failed_message(
                &parent,
                &format!("No {} jobs created", job_type.batch_noun()),
            );
        }
        let mut results = Vec::new();
        let mut jobs = Vec::new();
        for (info, job, target) in admitted {
            results.push(batch_response::node_ok(&info.node_id));
            let job_id = job.id().to_string();
            jobs.push((info.node_id.clone(), job_id.clone()));
            let switches = Arc::clone(&self.switches);
            let work = Arc::clone(&work);
            let timeout = self.config.firmware_task_timeout();
            let tracker = Arc::clone(&self.tracker);
            let progress: Progress =
                Arc::new(move |step: &str| tracker.mark_running(&job_id, step));
            self.tracker
                .spawn_job(job, move |job| async move {
                    job.progress(format!("Starting {}", job_type.batch_noun()));
                    let cancel = job.cancellation_token();
                    let node = target.node_id.clone();
                    let outcome = tokio::select! {
                        () = cancel.cancelled() => {
                            job.fail(job_failure(JobError::Other, format!("{} cancelled", job_type.batch_noun())));
                            return;
                        }
                        r = tokio::time::timeout(timeout, work(switches, target, progress)) => r,
                    };
                    match outcome {
                        Ok(Ok(result)) => job.complete(done, result),
                        Ok(Err(e)) => {
                            tracing::warn!(node = %node, error = %e, "{} failed", job_type.batch_noun());
                            job.fail(job_failure(e.job_error(), e.to_string()));
                        }
                        Err(_) => job.fail(job_failure(
                            JobError::Timeout,
                            format!("{} timed out after {}s", job_type.batch_noun(), timeout.as_secs()),
                        )),
                    }
                })
                .detach();
        }
        let created = results.len();
        results.extend(
            rejected
                .iter()
                .map(|r| batch_response::node_failed(&r.node_id, &r.error_message)),
        );
        let message = if created == 0 {
            format!("No {} jobs created", job_type.batch_noun())
        } else {
            format!(
                "Created {created} {} jobs out of {total} nodes. Use {poll_with}",
                job_type.batch_noun()
            )
        };
        let mut response = batch_response::from_results(message, results, total);
        response.job_id = parent;
        (response, jobs)
    }

    pub(super) fn reset_switches(
        &self,
        set: Option<&pb::NodeSet>,
        scope: ResetScope,
    ) -> Result<pb::NodeBatchResponse, Status> {
        let (job_type, done) = match scope {
            ResetScope::Full => (
                JobType::SwitchFactoryDefaultReset,
                "Switch factory-default reset completed",
            ),
            ResetScope::Sdn => (
                JobType::SwitchSdnFactoryDefaultReset,
                "Switch SDN factory-default reset completed",
            ),
        };
        let work: SwitchWork = Arc::new(move |switches, target, _progress| {
            Box::pin(async move {
                switches.factory_reset(&target, scope).await?;
                Ok(json!({ "reset": match scope { ResetScope::Full => "factory", ResetScope::Sdn => "sdn" } }).to_string())
            })
        });
        self.start_switch_batch(set, job_type, done, work)
    }

    /// `BatchDisableSwitchMtls`: services by wire name; none or an
    /// unspecified / unknown value is `INVALID_ARGUMENT`.
    pub(super) fn disable_switch_mtls(
        &self,
        req: pb::BatchDisableSwitchMtlsRequest,
    ) -> Result<pb::NodeBatchResponse, Status> {
        if req.services.is_empty() {
            return Err(Status::invalid_argument("services is required"));
        }
        let mut services = Vec::with_capacity(req.services.len());
        for value in &req.services {
            match pb::SwitchService::try_from(*value) {
                Ok(pb::SwitchService::Unspecified) | Err(_) => {
                    return Err(Status::invalid_argument(format!(
                        "invalid service: {value}"
                    )));
                }
                Ok(service) => services.push(service.as_str_name().to_owned()),
            }
        }
        let work: SwitchWork = Arc::new(move |switches, target, _progress| {
            let services = services.clone();
            Box::pin(async move {
                switches.disable_mtls(&target, &services).await?;
                Ok(json!({ "mtls_disabled": services }).to_string())
            })
        });
        self.start_switch_batch(
            req.nodes.as_ref(),
            JobType::SwitchMtlsDisable,
            "Switch mTLS disabled",
            work,
        )
    }

    /// `UpdateSwitchSystemPassword`: logs in with each node's current
    /// credentials and sets `username`'s password.
    pub(super) fn update_switch_password(
        &self,
        req: pb::UpdateSwitchSystemPasswordRequest,
    ) -> Result<pb::NodeBatchResponse, Status> {
        if req.username.trim().is_empty() {
            return Err(Status::invalid_argument("username is required"));
        }
        if req.password.is_empty() {
            return Err(Status::invalid_argument("password is required"));
        }
        let username = req.username.clone();
        let password = Secret::new(req.password.clone());
        let work: SwitchWork = Arc::new(move |switches, target, _progress| {
            let username = username.clone();
            let password = password.clone();
            Box::pin(async move {
                switches.set_password(&target, &username, &password).await?;
                Ok(json!({ "username": username, "password_updated": true }).to_string())
            })
        });
        self.start_switch_batch(
            req.nodes.as_ref(),
            JobType::SwitchSystemPasswordUpdate,
            "Switch system password updated",
            work,
        )
    }
}

/// The switch domain a certificate is issued for when a request names none.
pub const DEFAULT_SWITCH_DOMAIN: &str = "switch.local";

/// Wire `SwitchService` values as names; none, unspecified or unknown is
/// `INVALID_ARGUMENT`.
fn service_names(values: &[i32]) -> Result<Vec<String>, Status> {
    if values.is_empty() {
        return Err(Status::invalid_argument("services is required"));
    }
    values
        .iter()
        .map(|value| match pb::SwitchService::try_from(*value) {
            Ok(pb::SwitchService::Unspecified) | Err(_) => Err(Status::invalid_argument(format!(
                "invalid service: {value}"
            ))),
            Ok(service) => Ok(service.as_str_name().to_owned()),
        })
        .collect()
}

/// The sim's / NVUE's component name of a wire component type; `None` for
/// unspecified or unknown values.
fn component_name(value: i32) -> Option<&'static str> {
    use pb::SwitchFirmwareComponentType as C;
    match C::try_from(value).ok()? {
        C::Bmc => Some("BMC"),
        C::Fpga => Some("FPGA"),
        C::Erot => Some("EROT"),
        C::Cpld => Some("CPLD"),
        C::Bios => Some("BIOS"),
        C::Transceiver => Some("TRANSCEIVER"),
        C::Unspecified | C::Unknown => None,
    }
}

impl RackManagerService {
    /// A registered switch's target (its BMC login stands in for a host
    /// login the registry does not keep).
    fn registered_switch(&self, rack_id: &str, node_id: &str) -> Result<SwitchTarget, String> {
        let node = self
            .nodes
            .get(rack_id, node_id)
            .map_err(|lookup| lookup.message().to_owned())?;
        super::switch_image::registered_switch_target(&node)
    }

    /// `ListSwitchFirmware`: a registered switch's components (all, or the
    /// one `component_type` names).
    pub(super) async fn list_switch_firmware(
        &self,
        req: pb::ListSwitchFirmwareRequest,
    ) -> pb::ListSwitchFirmwareResponse {
        let failure = |error_message: String| pb::ListSwitchFirmwareResponse {
            status: pb::ReturnCode::Failure as i32,
            result_json: String::new(),
            error_message,
        };
        let target = match self.registered_switch(&req.rack_id, &req.node_id) {
            Ok(t) => t,
            Err(message) => return failure(message),
        };
        let wanted = component_name(req.component_type);
        match tokio::time::timeout(self.bmc_timeout(), self.switches.list_firmware(&target)).await {
            Ok(Ok(entries)) => {
                let entries: Vec<_> = entries
                    .into_iter()
                    .filter(|e| wanted.is_none_or(|w| e.component == w))
                    .collect();
                pb::ListSwitchFirmwareResponse {
                    status: pb::ReturnCode::Success as i32,
                    result_json: json!({ "components": entries }).to_string(),
                    error_message: String::new(),
                }
            }
            Ok(Err(e)) => failure(e.to_string()),
            Err(_) => failure("switch firmware listing timed out".to_owned()),
        }
    }

    /// `PushSwitchFirmware`: transfers a file from under the firmware
    /// directory to a registered switch (no install).
    pub(super) async fn push_switch_firmware(
        &self,
        req: pb::PushSwitchFirmwareRequest,
    ) -> Result<pb::PushSwitchFirmwareResponse, Status> {
        let Some(component) = component_name(req.component_type) else {
            return Err(Status::invalid_argument(format!(
                "invalid component_type: {}",
                req.component_type
            )));
        };
        let failure = |error_message: String| {
            tracing::warn!(rack = %req.rack_id, node = %req.node_id, error = %error_message, "switch firmware push failed");
            Ok(pb::PushSwitchFirmwareResponse {
                status: pb::ReturnCode::Failure as i32,
                result_json: String::new(),
                error_message,
            })
        };
        let target = match self.registered_switch(&req.rack_id, &req.node_id) {
            Ok(t) => t,
            Err(message) => return failure(message),
        };
        let file = if req.local_file_path.trim().is_empty() {
            req.filename.clone()
        } else {
            req.local_file_path.clone()
        };
        let resolved = match super::firmware::resolve_targets(
            &self.config.firmware_dir,
            &[pb::FirmwareTarget {
                target: component.to_owned(),
                filename: file,
            }],
            false,
        ) {
            Ok(mut r) => r.remove(0),
            Err(e) => return failure(e.message),
        };
        let filename = if req.filename.trim().is_empty() {
            resolved
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        } else {
            req.filename.clone()
        };
        let bytes = match tokio::fs::read(&resolved.path).await {
            Ok(b) => b,
            Err(_) => return failure(format!("cannot read {}", resolved.filename)),
        };
        match tokio::time::timeout(
            self.config.firmware_task_timeout(),
            self.switches.push_firmware(&target, component, &filename, &bytes),
        )
        .await
        {
            Ok(Ok(())) => Ok(pb::PushSwitchFirmwareResponse {
                status: pb::ReturnCode::Success as i32,
                result_json: json!({ "component": component, "filename": filename, "bytes": bytes.len(), "staged": true }).to_string(),
                error_message: String::new(),
            }),
            Ok(Err(e)) => failure(e.to_string()),
            Err(_) => failure("switch firmware push timed out".to_owned()),
        }
    }

    /// `BatchCollectSwitchSpdmAttestationEvidence`: fresh evidence of every
    /// target (a nonce of 32 bytes, or none: one is drawn), per target and
    /// component; a target that cannot be read is a failed result beside
    /// the others.
    pub(super) async fn collect_switch_attestation(
        &self,
        req: pb::BatchCollectSwitchSpdmAttestationEvidenceRequest,
    ) -> Result<pb::BatchCollectSwitchSpdmAttestationEvidenceResponse, Status> {
        nodes::normalize_node_set(&req.targets)?;
        let nonce = match req.nonce.len() {
            0 => uuid::Uuid::new_v4()
                .as_bytes()
                .iter()
                .chain(uuid::Uuid::new_v4().as_bytes())
                .copied()
                .collect::<Vec<u8>>(),
            32 => req.nonce.clone(),
            n => {
                return Err(Status::invalid_argument(format!(
                    "nonce must be 32 bytes (or empty), not {n}"
                )));
            }
        };
        if req.targets.is_empty() {
            return Ok(pb::BatchCollectSwitchSpdmAttestationEvidenceResponse {
                status: pb::ReturnCode::Failure as i32,
                message: "No nodes specified in request".to_owned(),
                results: Vec::new(),
            });
        }
        let total = req.targets.len();
        let mut results = Vec::with_capacity(total);
        for info in &req.targets {
            let outcome = match switch_target(info) {
                Err(message) => Err(message),
                Ok(target) => match tokio::time::timeout(
                    self.bmc_timeout(),
                    self.switches.attestation_evidence(&target, &nonce),
                )
                .await
                {
                    Ok(Ok(evidence)) => Ok(evidence),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err("SPDM evidence collection timed out".to_owned()),
                },
            };
            let collected_at = Some(super::timestamp(chrono::Utc::now()));
            results.push(match outcome {
                Ok(evidence) => pb::SwitchSpdmAttestationTargetResult {
                    node_id: info.node_id.clone(),
                    status: pb::ReturnCode::Success as i32,
                    error_message: None,
                    components: evidence
                        .into_iter()
                        .map(|e| pb::SwitchSpdmComponentResult {
                            component_id: e.component_id,
                            status: pb::ReturnCode::Success as i32,
                            error_message: String::new(),
                            evidence: Some(pb::SwitchSpdmComponentEvidence {
                                measurements: e.measurements,
                                certificate_chain: e.certificate_chain,
                            }),
                        })
                        .collect(),
                    collection_timestamp: collected_at,
                },
                Err(message) => pb::SwitchSpdmAttestationTargetResult {
                    node_id: info.node_id.clone(),
                    status: pb::ReturnCode::Failure as i32,
                    error_message: Some(message),
                    components: Vec::new(),
                    collection_timestamp: collected_at,
                },
            });
        }
        let ok = results
            .iter()
            .filter(|r| r.status == pb::ReturnCode::Success as i32)
            .count();
        Ok(pb::BatchCollectSwitchSpdmAttestationEvidenceResponse {
            status: if ok == total {
                pb::ReturnCode::Success
            } else {
                pb::ReturnCode::Failure
            } as i32,
            message: format!("Collected SPDM evidence of {ok} of {total} switches"),
            results,
        })
    }

    /// `ConfigureSwitchCertificate`: one child per switch installs the
    /// domain's certificate on `services` and turns their mTLS on.
    pub(super) fn configure_switch_certificate(
        &self,
        req: pb::ConfigureSwitchCertificateRequest,
    ) -> Result<pb::ConfigureSwitchCertificateResponse, Status> {
        let services = service_names(&req.services)?;
        let domain = req
            .domain
            .clone()
            .filter(|d| !d.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_SWITCH_DOMAIN.to_owned());
        let test_hello = req.test_hello;
        let work: SwitchWork = Arc::new(move |switches, target, _progress| {
            let services = services.clone();
            let domain = domain.clone();
            Box::pin(async move {
                let installed = switches
                    .install_certificate(&target, &services, &domain, test_hello)
                    .await?;
                Ok(serde_json::to_string(&installed).unwrap_or_default())
            })
        });
        let nodes_in = req
            .nodes
            .as_ref()
            .map(|s| s.nodes.clone())
            .unwrap_or_default();
        nodes::normalize_node_set(&nodes_in)?;
        let (response, jobs) = self.start_switch_jobs(
            nodes_in,
            JobType::SwitchCertificate,
            "Switch certificate installed",
            POLL_WITH_JOB_STATUS,
            work,
        );
        Ok(pb::ConfigureSwitchCertificateResponse {
            response: Some(response),
            jobs: jobs
                .into_iter()
                .map(|(node_id, job_id)| pb::ConfigureSwitchCertificateJobInfo { node_id, job_id })
                .collect(),
        })
    }

    /// `GetConfigureSwitchCertificateJobStatus`: as the image poller, in-band.
    pub(super) fn get_certificate_job_status(
        &self,
        req: pb::GetConfigureSwitchCertificateJobStatusRequest,
    ) -> pb::GetConfigureSwitchCertificateJobStatusResponse {
        let status =
            self.get_switch_system_image_job_status(pb::GetSwitchSystemImageJobStatusRequest {
                job_id: req.job_id,
            });
        pb::GetConfigureSwitchCertificateJobStatusResponse {
            status: status.status,
            job_id: status.job_id,
            state: status.state,
            message: status.message,
            rack_id: status.rack_id,
            node_id: status.node_id,
            error_message: status.error_message,
            result_json: status.result_json,
            created_at: status.created_at,
            updated_at: status.updated_at,
        }
    }
}
