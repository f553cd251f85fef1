//! Switch resets, mTLS and password (issue 36):
//! `BatchResetSwitchFactoryDefault`, `BatchResetSwitchSdnFactoryDefault`,
//! `BatchDisableSwitchMtls`, `UpdateSwitchSystemPassword` — each a parent
//! job with one child per switch (poll `GetJobStatus`); the per-node
//! results report admission only (spec §2.2). The new password is never
//! logged nor put in a job's result.

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

/// One switch's work: the result JSON, or the failure.
type SwitchWork = Arc<
    dyn Fn(
            Arc<dyn SwitchBackend>,
            SwitchTarget,
        ) -> Pin<Box<dyn Future<Output = Result<String, SwitchError>> + Send>>
        + Send
        + Sync,
>;

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
        if nodes_in.is_empty() {
            return Ok(batch_response::failure("No nodes specified in request"));
        }
        let rack_id = nodes_in
            .first()
            .map(|n| n.rack_id.clone())
            .unwrap_or_default();
        let Some(parent) = self.tracker.create_parent_job(&rack_id, job_type) else {
            return Ok(batch_response::failure(&format!(
                "failed to create parent {} job",
                job_type.batch_noun()
            )));
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
        for (info, job, target) in admitted {
            results.push(batch_response::node_ok(&info.node_id));
            let switches = Arc::clone(&self.switches);
            let work = Arc::clone(&work);
            let timeout = self.config.firmware_task_timeout();
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
                        r = tokio::time::timeout(timeout, work(switches, target)) => r,
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
                "Created {created} {} jobs out of {total} nodes. Use GetJobStatus with job_id and include_child_job_states to track them.",
                job_type.batch_noun()
            )
        };
        let mut response = batch_response::from_results(message, results, total);
        response.job_id = parent;
        Ok(response)
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
        let work: SwitchWork = Arc::new(move |switches, target| {
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
        let work: SwitchWork = Arc::new(move |switches, target| {
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
        let work: SwitchWork = Arc::new(move |switches, target| {
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
