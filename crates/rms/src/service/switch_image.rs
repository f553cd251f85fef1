//! NVLink switch system images (issue 36): `UpdateSwitchSystemImage`
//! (parent + one child per switch), `ListSwitchSystemImages` and the
//! legacy poller `GetSwitchSystemImageJobStatus` (state strings
//! `queued` / `running` / `completed` / `failed`, spec §1.2).
//!
//! A switch is reached on its host endpoint (the switch OS's management
//! API): port 0 and the SSH port 22 mean 443 (spec §2.1), credentials are
//! required. The image is a file under the firmware directory
//! (`local_file_path`); `image_filename` is its name on the switch.

use std::sync::Arc;

use rackflow_api::rack_manager as pb;
use serde_json::json;
use tonic::Status;

use super::firmware::resolve_targets;
use super::switch_ops::SwitchWork;
use super::{RackManagerService, batch_response, nodes, timestamp};
use crate::backend::{BmcCredentials, NodeKind, Secret};
use crate::job::{JobState, JobType};
use crate::switch::{SwitchEndpoint, SwitchTarget};

/// The management port a switch's host endpoint means by 0 or 22.
pub const SWITCH_API_PORT: u16 = 443;

/// The wire state string of a job state (spec §1.2).
pub fn state_string(state: JobState) -> &'static str {
    match state {
        JobState::Queued => "queued",
        JobState::Running => "running",
        JobState::Completed => "completed",
        JobState::Failed => "failed",
    }
}

/// The switch target of a node of a request: its host endpoint, with
/// credentials. `Err` is the in-band reason.
pub fn switch_target(info: &pb::NodeInfo) -> Result<SwitchTarget, String> {
    switch_target_of(info, true)
}

/// [`switch_target`]; a registered switch may have been registered without
/// host credentials (the registry keeps none in its wire copy).
fn switch_target_of(
    info: &pb::NodeInfo,
    require_credentials: bool,
) -> Result<SwitchTarget, String> {
    if info.node_id.trim().is_empty() {
        return Err("node_id is required".to_owned());
    }
    if NodeKind::of(info.r#type.unwrap_or(0)) != Some(NodeKind::Switch) {
        return Err(format!("node {} is not a switch", info.node_id));
    }
    let endpoint = info
        .host_endpoint
        .as_ref()
        .ok_or_else(|| format!("host endpoint is required for switch {}", info.node_id))?;
    let port = match endpoint.port {
        0 | 22 => SWITCH_API_PORT,
        p => u16::try_from(p).map_err(|_| format!("port {p} is out of range (must be 1-65535)"))?,
    };
    let interface = endpoint.interface.clone().unwrap_or_default();
    let address = if interface.ip_address.trim().is_empty() {
        interface.host_name.clone().unwrap_or_default()
    } else {
        interface.ip_address.clone()
    };
    if address.trim().is_empty() {
        return Err(format!(
            "host endpoint of switch {} has no address",
            info.node_id
        ));
    }
    let credentials = match endpoint.credentials.as_ref().and_then(|c| c.auth.as_ref()) {
        Some(pb::credentials::Auth::UserPass(up)) => BmcCredentials {
            username: up.username.clone(),
            password: Secret::new(up.password.clone()),
        },
        Some(pb::credentials::Auth::SessionToken(_)) => {
            return Err(
                "host endpoint credentials use unsupported session_token auth; use user_pass credentials"
                    .to_owned(),
            );
        }
        None if require_credentials => {
            return Err(format!(
                "Missing host credentials for switch {}",
                info.node_id
            ));
        }
        None => BmcCredentials::default(),
    };
    Ok(SwitchTarget {
        rack_id: info.rack_id.clone(),
        node_id: info.node_id.clone(),
        node_type: info.r#type.unwrap_or(0),
        host: SwitchEndpoint {
            address,
            port,
            credentials,
        },
    })
}

/// The target of a registered switch: the registry keeps no passwords in
/// its wire copy, so the node's BMC login stands in for the host's.
pub(super) fn registered_switch_target(
    node: &super::nodes::RegisteredNode,
) -> Result<SwitchTarget, String> {
    let mut target = switch_target_of(&node.info, false)?;
    if target.host.credentials.username.is_empty() {
        target.host.credentials = node.target.bmc.credentials.clone();
    }
    Ok(target)
}

impl RackManagerService {
    /// `UpdateSwitchSystemImage`.
    pub(super) async fn update_switch_system_image(
        &self,
        req: pb::UpdateSwitchSystemImageRequest,
    ) -> Result<pb::UpdateSwitchSystemImageResponse, Status> {
        let nodes_in = req
            .nodes
            .as_ref()
            .map(|s| s.nodes.clone())
            .unwrap_or_default();
        nodes::normalize_node_set(&nodes_in)?;
        let file = if req.local_file_path.trim().is_empty() {
            req.image_filename.clone()
        } else {
            req.local_file_path.clone()
        };
        let (response, jobs) = self
            .start_switch_image_batch(nodes_in, &file, &req.image_filename)
            .await;
        Ok(pb::UpdateSwitchSystemImageResponse {
            response: Some(response),
            jobs,
        })
    }

    /// Admits one child per switch of `nodes_in` under a new parent and
    /// starts their installs of `file` (resolved inside the firmware
    /// directory), named `image_filename` on the switch (empty: the file's
    /// name). Validation failures come back in-band with no job.
    pub(super) async fn start_switch_image_batch(
        &self,
        nodes_in: Vec<pb::NodeInfo>,
        file: &str,
        image_filename: &str,
    ) -> (
        pb::NodeBatchResponse,
        Vec<pb::SwitchSystemImageUpdateJobInfo>,
    ) {
        if nodes_in.is_empty() {
            return (
                batch_response::failure("No nodes specified in request"),
                Vec::new(),
            );
        }
        let target = pb::FirmwareTarget {
            target: "nvos".to_owned(),
            filename: file.to_owned(),
        };
        let resolved = match resolve_targets(&self.config.firmware_dir, &[target], false) {
            Ok(mut r) => r.remove(0),
            Err(e) => return (batch_response::failure(&e.message), Vec::new()),
        };
        let image_filename = if image_filename.trim().is_empty() {
            resolved
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        } else {
            image_filename.to_owned()
        };
        let image = match tokio::fs::read(&resolved.path).await {
            Ok(bytes) => Arc::new(bytes),
            Err(e) => {
                tracing::warn!(path = %resolved.path.display(), error = %e, "switch image unreadable");
                return (
                    batch_response::failure(&format!(
                        "cannot read switch image {}",
                        resolved.filename
                    )),
                    Vec::new(),
                );
            }
        };
        let work: SwitchWork = Arc::new(move |switches, target, progress| {
            let image = Arc::clone(&image);
            let filename = image_filename.clone();
            Box::pin(async move {
                let build = switches
                    .install_system_image(&target, &filename, &image, &*progress)
                    .await?;
                Ok(json!({ "image_filename": filename, "active_image": build }).to_string())
            })
        });
        let (response, jobs) = self.start_switch_jobs(
            nodes_in,
            JobType::SwitchSystemImageUpdate,
            "Switch system image update completed",
            "GetSwitchSystemImageJobStatus with job_id to track overall batch status.",
            work,
        );
        let jobs = jobs
            .into_iter()
            .map(|(node_id, job_id)| pb::SwitchSystemImageUpdateJobInfo { node_id, job_id })
            .collect();
        (response, jobs)
    }

    /// `ListSwitchSystemImages` (a registered switch).
    pub(super) async fn list_switch_system_images(
        &self,
        req: pb::ListSwitchSystemImagesRequest,
    ) -> pb::ListSwitchSystemImagesResponse {
        let failure = |error_message: String| {
            tracing::warn!(rack = %req.rack_id, node = %req.node_id, error = %error_message, "switch image listing failed");
            pb::ListSwitchSystemImagesResponse {
                status: pb::ReturnCode::Failure as i32,
                images_json: String::new(),
                error_message,
            }
        };
        let node = match self.nodes.get(&req.rack_id, &req.node_id) {
            Ok(node) => node,
            Err(lookup) => return failure(lookup.message().to_owned()),
        };
        let target = registered_switch_target(&node);
        let target = match target {
            Ok(t) => t,
            Err(message) => return failure(message),
        };
        match tokio::time::timeout(self.bmc_timeout(), self.switches.system_images(&target)).await {
            Ok(Ok(images)) => pb::ListSwitchSystemImagesResponse {
                status: pb::ReturnCode::Success as i32,
                images_json: serde_json::to_string(&images).unwrap_or_default(),
                error_message: String::new(),
            },
            Ok(Err(e)) => failure(e.to_string()),
            Err(_) => failure("switch image listing timed out".to_owned()),
        }
    }

    /// `GetSwitchSystemImageJobStatus`: in-band not-found (spec §2.1).
    pub(super) fn get_switch_system_image_job_status(
        &self,
        req: pb::GetSwitchSystemImageJobStatusRequest,
    ) -> pb::GetSwitchSystemImageJobStatusResponse {
        let job_id = req.job_id.trim().to_owned();
        if job_id.is_empty() {
            return pb::GetSwitchSystemImageJobStatusResponse {
                status: pb::ReturnCode::Failure as i32,
                message: "job_id is required".to_owned(),
                ..Default::default()
            };
        }
        let Some(info) = self.tracker.get_job(&job_id) else {
            return pb::GetSwitchSystemImageJobStatusResponse {
                status: pb::ReturnCode::Failure as i32,
                message: format!("job {job_id} not found"),
                job_id,
                ..Default::default()
            };
        };
        pb::GetSwitchSystemImageJobStatusResponse {
            status: pb::ReturnCode::Success as i32,
            state: state_string(info.state).to_owned(),
            message: info.state_description,
            created_at: Some(timestamp(info.created_at)),
            updated_at: Some(timestamp(info.updated_at)),
            job_id: info.job_id,
            rack_id: info.rack_id,
            node_id: info.node_id,
            error_message: info.error_message,
            result_json: info.result_json,
        }
    }
}
