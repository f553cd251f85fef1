//! The `RackManager` gRPC service (decision M1): handlers of the in-scope
//! RPCs over the job tracker, the node registry and a node back end.
//!
//! Conventions (spec §2.1): business and validation failures are answered
//! in-band (`status = FAILURE` inside an `Ok` response, logged); real gRPC
//! errors only for invalid enums and malformed node descriptions
//! (`INVALID_ARGUMENT`), `GetJobStatus`'s missing or unknown id
//! (`INVALID_ARGUMENT` / `NOT_FOUND`), and out-of-scope RPCs (`UNIMPLEMENTED`,
//! answered by tonic for methods this service does not declare). This
//! module is the one place that builds those statuses.

pub mod cold_reboot;
mod firmware;
mod firmware_objects;
mod inventory;
pub mod leaks;
pub mod nodes;
pub mod switch_image;
mod switch_ops;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rackflow_api::rack_manager as pb;
use rackflow_api::rack_manager::rack_manager_server::{RackManager, RackManagerServer};
use tokio::task::JoinSet;
use tonic::{Request, Response, Status};

use crate::backend::{FirmwareComponent, NodeBackend, NodeTarget, PowerAction, PowerState};
use crate::catalog::Catalog;
use crate::config::WorkflowsConfig;
use crate::job::{JobError, JobInfo, JobState, JobTracker};
pub use firmware::{PACKAGE_DERIVED, ResolvedTarget, firmware_failure, resolve_targets};
use nodes::{NodeRegistry, RegisteredNode};

/// The version string `GetVersion` answers.
pub const VERSION: &str = concat!("rackflow-rms ", env!("CARGO_PKG_VERSION"));

/// The service state shared by every handler.
#[derive(Clone)]
pub struct RackManagerService {
    tracker: Arc<JobTracker>,
    backend: Arc<dyn NodeBackend>,
    nodes: Arc<NodeRegistry>,
    config: Arc<WorkflowsConfig>,
    /// BMC credentials may arrive on this connection: TLS, or plaintext
    /// the operator allowed (`tls.allow_insecure`).
    credentials_allowed: bool,
    /// The firmware-object catalogue (`None`: the catalogue RPCs answer
    /// FAILED_PRECONDITION).
    catalog: Option<Arc<Catalog>>,
    /// Parent jobs of firmware-object applies, by object id (a delete is
    /// refused while one runs).
    applies: Arc<Mutex<HashMap<String, Vec<String>>>>,
    /// The NVLink switch trays' back end (their OS's management API).
    switches: Arc<dyn crate::switch::SwitchBackend>,
}

impl std::fmt::Debug for RackManagerService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RackManagerService")
            .field("backend", &self.backend.kind())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl RackManagerService {
    pub fn new(
        tracker: Arc<JobTracker>,
        backend: Arc<dyn NodeBackend>,
        config: WorkflowsConfig,
    ) -> Self {
        RackManagerService {
            tracker,
            backend,
            nodes: Arc::new(NodeRegistry::default()),
            config: Arc::new(config),
            credentials_allowed: true,
            catalog: None,
            applies: Arc::default(),
            switches: Arc::new(crate::switch::sim::SwitchSim::new(
                crate::switch::sim::SwitchSimConfig::default(),
            )),
        }
    }

    /// Drives NVLink switch trays through `switches`.
    pub fn with_switch_backend(mut self, switches: Arc<dyn crate::switch::SwitchBackend>) -> Self {
        self.switches = switches;
        self
    }

    /// Serves the firmware-object RPCs from `catalog`.
    pub fn with_catalog(mut self, catalog: Arc<Catalog>) -> Self {
        self.catalog = Some(catalog);
        self
    }

    /// Whether requests may carry BMC credentials: the server passes
    /// `false` when it serves plaintext without `tls.allow_insecure`, so a
    /// password never crosses the network in clear.
    pub fn accept_credentials(mut self, allowed: bool) -> Self {
        self.credentials_allowed = allowed;
        self
    }

    /// Checks a request's node set before anything happens: every node's
    /// type, and no credentials over a connection that may not carry them.
    pub(crate) fn admit_nodes(&self, nodes: &[pb::NodeInfo]) -> Result<(), Status> {
        nodes::normalize_node_set(nodes)?;
        self.admit_credentials(nodes)
    }

    /// Refuses BMC credentials over a connection that may not carry them.
    pub(crate) fn admit_credentials(&self, nodes: &[pb::NodeInfo]) -> Result<(), Status> {
        let carries_credentials = nodes.iter().any(|n| {
            n.bmc_endpoint
                .as_ref()
                .and_then(|e| e.credentials.as_ref())
                .is_some_and(|c| c.auth.is_some())
        });
        if carries_credentials && !self.credentials_allowed {
            return Err(Status::failed_precondition(
                "BMC credentials are accepted over TLS only: serve the rack manager with \
                 tls.cert and tls.key, or set tls.allow_insecure = true",
            ));
        }
        Ok(())
    }

    /// Ephemeral targets of a batch power RPC.
    fn ephemeral_targets(&self, set: Option<&pb::NodeSet>) -> Result<Vec<EphemeralTarget>, Status> {
        let nodes = set.map(|s| s.nodes.as_slice()).unwrap_or_default();
        self.admit_nodes(nodes)?;
        Ok(nodes
            .iter()
            .map(|n| (n.node_id.clone(), nodes::target_of(n, false)))
            .collect())
    }

    /// The job tracker (tests and the server's shutdown use it).
    pub fn tracker(&self) -> &Arc<JobTracker> {
        &self.tracker
    }

    pub fn into_server(self) -> RackManagerServer<Self> {
        RackManagerServer::new(self)
    }

    fn bmc_timeout(&self) -> Duration {
        self.config.bmc_call_timeout()
    }

    async fn set_power_on(&self, node: &NodeTarget, action: PowerAction) -> Result<(), String> {
        match tokio::time::timeout(self.bmc_timeout(), self.backend.set_power(node, action)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!(
                "power operation timed out after {}s",
                self.bmc_timeout().as_secs()
            )),
        }
    }

    async fn power_state_of(&self, node: &NodeTarget) -> Result<PowerState, String> {
        match tokio::time::timeout(self.bmc_timeout(), self.backend.power_state(node)).await {
            Ok(Ok(state)) => Ok(state),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!(
                "power state read timed out after {}s",
                self.bmc_timeout().as_secs()
            )),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The wire entry of one inventoried firmware component.
pub(crate) fn firmware_inventory_info(c: FirmwareComponent) -> pb::FirmwareInventoryInfo {
    pb::FirmwareInventoryInfo {
        name: c.name,
        version: c.version,
        updateable: c.updateable,
        target: c.target,
        health: c.health,
        firmware_type: 0,
    }
}

/// Legacy `FirmwareUpdateError` of a job error (spec §1.4).
pub(crate) fn legacy_error(code: JobError) -> pb::FirmwareUpdateError {
    let name = format!(
        "FIRMWARE_UPDATE_ERROR_{}",
        code.legacy_firmware_update_error()
    );
    pb::FirmwareUpdateError::from_str_name(&name).unwrap_or(pb::FirmwareUpdateError::Unknown)
}

/// A power operation from the wire; unspecified or unknown values are an
/// `INVALID_ARGUMENT` (spec §2.1 case 1).
pub fn power_action(operation: i32) -> Result<PowerAction, Status> {
    use pb::PowerOperation as Op;
    match Op::try_from(operation) {
        Ok(Op::Off) => Ok(PowerAction::Off),
        Ok(Op::On) => Ok(PowerAction::On),
        Ok(Op::Reset) => Ok(PowerAction::Reset),
        Ok(Op::ForceOff) => Ok(PowerAction::ForceOff),
        Ok(Op::ForceOn) => Ok(PowerAction::ForceOn),
        Ok(Op::GracefulShutdown) => Ok(PowerAction::GracefulShutdown),
        Ok(Op::GracefulRestart) => Ok(PowerAction::GracefulRestart),
        Ok(Op::ForceRestart) => Ok(PowerAction::ForceRestart),
        Ok(Op::Unspecified) | Err(_) => Err(Status::invalid_argument(format!(
            "invalid operation: {operation}"
        ))),
    }
}

fn timestamp(at: chrono::DateTime<chrono::Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: at.timestamp(),
        nanos: i32::try_from(at.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

fn execution_state(state: JobState) -> pb::JobExecutionState {
    match state {
        JobState::Queued => pb::JobExecutionState::Queued,
        JobState::Running => pb::JobExecutionState::Running,
        JobState::Completed => pb::JobExecutionState::Completed,
        JobState::Failed => pb::JobExecutionState::Failed,
    }
}

/// `JobStatus` of a job (spec §2.3): `rack_id`/`node_id` always set, empty
/// for parents.
pub fn job_status(info: JobInfo) -> pb::JobStatus {
    pb::JobStatus {
        execution_state: execution_state(info.state) as i32,
        error_code: info.error_code.pb_code(),
        created_at: Some(timestamp(info.created_at)),
        updated_at: Some(timestamp(info.updated_at)),
        job_id: info.job_id,
        parent_job_id: info.parent_job_id,
        child_job_ids: info.child_job_ids,
        error_message: info.error_message,
        result_json: info.result_json,
        state_description: info.state_description,
        rack_id: Some(info.rack_id),
        node_id: Some(info.node_id),
    }
}

/// Builders of `NodeBatchResponse` (spec §2.1 rules).
pub(crate) mod batch_response {
    use super::pb;

    /// A validation failure: no job, zero stats.
    pub fn failure(message: &str) -> pb::NodeBatchResponse {
        pb::NodeBatchResponse {
            status: pb::ReturnCode::Failure as i32,
            message: message.to_owned(),
            node_results: Vec::new(),
            job_id: String::new(),
            stats: Some(pb::NodeOperationStats::default()),
        }
    }

    pub fn node_ok(node_id: &str) -> pb::NodeOperationResult {
        pb::NodeOperationResult {
            node_id: node_id.to_owned(),
            status: pb::ReturnCode::Success as i32,
            error_message: String::new(),
        }
    }

    pub fn node_failed(node_id: &str, message: &str) -> pb::NodeOperationResult {
        pb::NodeOperationResult {
            node_id: node_id.to_owned(),
            status: pb::ReturnCode::Failure as i32,
            error_message: message.to_owned(),
        }
    }

    /// SUCCESS only if every targeted node succeeded or was accepted.
    pub fn from_results(
        message: String,
        node_results: Vec<pb::NodeOperationResult>,
        total: usize,
    ) -> pb::NodeBatchResponse {
        let ok = node_results
            .iter()
            .filter(|r| r.status == pb::ReturnCode::Success as i32)
            .count();
        let failed = total.saturating_sub(ok);
        let status = if failed == 0 && ok > 0 {
            pb::ReturnCode::Success
        } else {
            pb::ReturnCode::Failure
        };
        pb::NodeBatchResponse {
            status: status as i32,
            message,
            node_results,
            job_id: String::new(),
            stats: Some(pb::NodeOperationStats {
                total_nodes: u32::try_from(total).unwrap_or(u32::MAX),
                successful_nodes: u32::try_from(ok).unwrap_or(u32::MAX),
                failed_nodes: u32::try_from(failed).unwrap_or(u32::MAX),
            }),
        }
    }
}

fn operation_response(ok: bool, message: impl Into<String>) -> pb::OperationResponse {
    pb::OperationResponse {
        status: if ok {
            pb::ReturnCode::Success
        } else {
            pb::ReturnCode::Failure
        } as i32,
        message: message.into(),
    }
}

/// One ephemeral node of a batch RPC: its id and its target, or the
/// in-band message why it has none.
type EphemeralTarget = (String, Result<NodeTarget, String>);

#[tonic::async_trait]
impl RackManager for RackManagerService {
    async fn create_nodes(
        &self,
        request: Request<pb::CreateNodesRequest>,
    ) -> Result<Response<pb::CreateNodesResponse>, Status> {
        let req = request.into_inner();
        let nodes_in = req.nodes.map(|s| s.nodes).unwrap_or_default();
        self.admit_nodes(&nodes_in)?;
        let total = nodes_in.len();
        let mut failures = Vec::new();
        // A node registered already is replaced only while no job holds it
        // (a running firmware job keeps the endpoint and credentials it
        // started with; swapping them under it would be silent), and the
        // answer says which were updated.
        let mut updated = Vec::new();
        for info in &nodes_in {
            let result = if info.rack_id.trim().is_empty() {
                Err("rack_id is required".to_owned())
            } else {
                nodes::target_of(info, false)
            };
            let target = match result {
                Ok(target) => target,
                Err(message) => {
                    failures.push(format!("{}: {message}", info.node_id));
                    continue;
                }
            };
            let node = RegisteredNode {
                info: nodes::redacted(info),
                target,
            };
            if let Ok(existing) = self.nodes.get(&node.target.rack_id, &node.target.node_id) {
                if let Some(job) = self
                    .tracker
                    .active_job_for_node(&node.target.rack_id, &node.target.node_id)
                {
                    failures.push(format!(
                        "{}: already registered and busy with job {job}; not updated",
                        info.node_id
                    ));
                    continue;
                }
                if existing.target != node.target || existing.info != node.info {
                    updated.push(info.node_id.clone());
                }
            }
            self.nodes.insert(node);
        }
        let created = total - failures.len();
        let ok = failures.is_empty() && total > 0;
        let message = if total == 0 {
            "No nodes specified in request".to_owned()
        } else if failures.is_empty() && updated.is_empty() {
            format!("Created {created} nodes")
        } else if failures.is_empty() {
            tracing::info!(updated = ?updated, "registered nodes updated");
            format!(
                "Created {created} nodes; updated existing: {}",
                updated.join(", ")
            )
        } else {
            tracing::warn!(failed = failures.len(), "node registration failed");
            format!(
                "Created {created} of {total} nodes; failed: {}",
                failures.join("; ")
            )
        };
        Ok(Response::new(pb::CreateNodesResponse {
            response: Some(operation_response(ok, message)),
            stats: Some(pb::NodeOperationStats {
                total_nodes: u32::try_from(total).unwrap_or(u32::MAX),
                successful_nodes: u32::try_from(created).unwrap_or(u32::MAX),
                failed_nodes: u32::try_from(failures.len()).unwrap_or(u32::MAX),
            }),
        }))
    }

    async fn list_node_inventory(
        &self,
        _request: Request<pb::ListNodeInventoryRequest>,
    ) -> Result<Response<pb::ListNodeInventoryResponse>, Status> {
        let nodes = self
            .nodes
            .all_nodes()
            .iter()
            .map(nodes::inventory_of)
            .collect();
        Ok(Response::new(pb::ListNodeInventoryResponse { nodes }))
    }

    async fn list_racks(
        &self,
        _request: Request<pb::ListRacksRequest>,
    ) -> Result<Response<pb::ListRacksResponse>, Status> {
        Ok(Response::new(pb::ListRacksResponse {
            rack_ids: self.nodes.rack_ids(),
        }))
    }

    async fn delete_node(
        &self,
        request: Request<pb::DeleteNodeRequest>,
    ) -> Result<Response<pb::DeleteNodeResponse>, Status> {
        let req = request.into_inner();
        let response = match self.nodes.try_power_guard(&req.rack_id) {
            None => operation_response(
                false,
                format!(
                    "power operation already in progress for rack {}",
                    req.rack_id
                ),
            ),
            Some(_guard) => match self.nodes.remove(&req.rack_id, &req.node_id) {
                Ok(()) => operation_response(true, format!("Deleted node {}", req.node_id)),
                Err(lookup) => operation_response(false, lookup.message()),
            },
        };
        Ok(Response::new(pb::DeleteNodeResponse {
            response: Some(response),
        }))
    }

    async fn set_power_state(
        &self,
        request: Request<pb::SetPowerStateRequest>,
    ) -> Result<Response<pb::SetPowerStateResponse>, Status> {
        let req = request.into_inner();
        let action = power_action(req.operation)?;
        let failure = |message: &str| {
            tracing::warn!(rack = %req.rack_id, node = %req.node_id, error = %message, "power operation failed");
            Ok(Response::new(pb::SetPowerStateResponse {
                status: pb::ReturnCode::Failure as i32,
            }))
        };
        let node = match self.nodes.get(&req.rack_id, &req.node_id) {
            Ok(node) => node,
            Err(lookup) => return failure(lookup.message()),
        };
        let Some(_guard) = self.nodes.try_power_guard(&req.rack_id) else {
            return failure("power operation already in progress for rack");
        };
        match self.set_power_on(&node.target, action).await {
            Ok(()) => {
                tracing::info!(rack = %req.rack_id, node = %req.node_id, action = action.as_str(), "power operation done");
                Ok(Response::new(pb::SetPowerStateResponse {
                    status: pb::ReturnCode::Success as i32,
                }))
            }
            Err(message) => failure(&message),
        }
    }

    async fn get_power_state(
        &self,
        request: Request<pb::GetPowerStateRequest>,
    ) -> Result<Response<pb::GetPowerStateResponse>, Status> {
        let req = request.into_inner();
        let answer = |ok: bool, state: PowerState| pb::GetPowerStateResponse {
            status: if ok {
                pb::ReturnCode::Success
            } else {
                pb::ReturnCode::Failure
            } as i32,
            node_id: req.node_id.clone(),
            pstate: state.pstate().to_owned(),
            rack_id: req.rack_id.clone(),
        };
        let node = match self.nodes.get(&req.rack_id, &req.node_id) {
            Ok(node) => node,
            Err(lookup) => {
                tracing::warn!(rack = %req.rack_id, node = %req.node_id, error = lookup.message(), "power state read failed");
                return Ok(Response::new(answer(false, PowerState::Unknown)));
            }
        };
        Ok(Response::new(
            match self.power_state_of(&node.target).await {
                Ok(state) => answer(true, state),
                Err(error) => {
                    tracing::warn!(rack = %req.rack_id, node = %req.node_id, %error, "power state read failed");
                    answer(false, PowerState::Unknown)
                }
            },
        ))
    }

    async fn batch_set_power_state(
        &self,
        request: Request<pb::BatchSetPowerStateRequest>,
    ) -> Result<Response<pb::BatchSetPowerStateResponse>, Status> {
        let req = request.into_inner();
        let action = power_action(req.operation)?;
        let targets = self.ephemeral_targets(req.nodes.as_ref())?;
        if targets.is_empty() {
            return Ok(Response::new(pb::BatchSetPowerStateResponse {
                response: Some(batch_response::failure("No nodes specified in request")),
            }));
        }
        let total = targets.len();
        let mut set = JoinSet::new();
        for (index, (node_id, target)) in targets.into_iter().enumerate() {
            let this = self.clone();
            set.spawn(async move {
                let result = match target {
                    Ok(target) => this.set_power_on(&target, action).await,
                    Err(message) => Err(message),
                };
                (index, node_id, result)
            });
        }
        let mut results = collect_indexed(set).await;
        results.sort_by_key(|(i, ..)| *i);
        let node_results = results
            .iter()
            .map(|(_, node_id, r)| match r {
                Ok(()) => batch_response::node_ok(node_id),
                Err(e) => batch_response::node_failed(node_id, e),
            })
            .collect::<Vec<_>>();
        let failed = node_results
            .iter()
            .filter(|r| r.status != pb::ReturnCode::Success as i32)
            .count();
        let message = format!(
            "Power operation {} on {} nodes: {} succeeded, {failed} failed",
            action.as_str(),
            total,
            total - failed
        );
        Ok(Response::new(pb::BatchSetPowerStateResponse {
            response: Some(batch_response::from_results(message, node_results, total)),
        }))
    }

    async fn batch_get_power_state(
        &self,
        request: Request<pb::BatchGetPowerStateRequest>,
    ) -> Result<Response<pb::BatchGetPowerStateResponse>, Status> {
        let req = request.into_inner();
        let targets = self.ephemeral_targets(req.nodes.as_ref())?;
        if targets.is_empty() {
            return Ok(Response::new(pb::BatchGetPowerStateResponse {
                response: Some(batch_response::failure("No nodes specified in request")),
                node_power_states: Vec::new(),
            }));
        }
        let total = targets.len();
        let mut set = JoinSet::new();
        for (index, (node_id, target)) in targets.into_iter().enumerate() {
            let this = self.clone();
            set.spawn(async move {
                let result = match target {
                    Ok(target) => this.power_state_of(&target).await,
                    Err(message) => Err(message),
                };
                (index, node_id, result)
            });
        }
        let mut results = collect_indexed(set).await;
        results.sort_by_key(|(i, ..)| *i);
        let mut node_results = Vec::with_capacity(total);
        let mut node_power_states = Vec::with_capacity(total);
        for (_, node_id, result) in &results {
            let state = match result {
                Ok(state) => {
                    node_results.push(batch_response::node_ok(node_id));
                    *state
                }
                Err(e) => {
                    node_results.push(batch_response::node_failed(node_id, e));
                    PowerState::Unknown
                }
            };
            node_power_states.push(pb::NodePowerState {
                node_id: node_id.clone(),
                pstate: state.pstate().to_owned(),
            });
        }
        let failed = total
            - node_results
                .iter()
                .filter(|r| r.status == pb::ReturnCode::Success as i32)
                .count();
        let message = format!(
            "Read power state of {total} nodes: {} succeeded, {failed} failed",
            total - failed
        );
        Ok(Response::new(pb::BatchGetPowerStateResponse {
            response: Some(batch_response::from_results(message, node_results, total)),
            node_power_states,
        }))
    }

    async fn update_firmware(
        &self,
        request: Request<pb::UpdateFirmwareRequest>,
    ) -> Result<Response<pb::UpdateFirmwareResponse>, Status> {
        Ok(Response::new(
            self.handle_update_firmware(request.into_inner()),
        ))
    }

    async fn batch_update_firmware_by_node_type(
        &self,
        request: Request<pb::BatchUpdateFirmwareByNodeTypeRequest>,
    ) -> Result<Response<pb::BatchUpdateFirmwareByNodeTypeResponse>, Status> {
        self.batch_update_by_node_type(request.into_inner())
            .map(Response::new)
    }

    async fn batch_update_firmware(
        &self,
        request: Request<pb::BatchUpdateFirmwareRequest>,
    ) -> Result<Response<pb::BatchUpdateFirmwareResponse>, Status> {
        self.batch_update(request.into_inner()).map(Response::new)
    }

    async fn get_node_firmware_inventory(
        &self,
        request: Request<pb::GetNodeFirmwareInventoryRequest>,
    ) -> Result<Response<pb::GetNodeFirmwareInventoryResponse>, Status> {
        let req = request.into_inner();
        let failure = |error: &str| {
            tracing::warn!(rack = %req.rack_id, node = %req.node_id, error, "firmware inventory failed");
            Ok(Response::new(pb::GetNodeFirmwareInventoryResponse {
                status: pb::ReturnCode::Failure as i32,
                firmware_list: Vec::new(),
            }))
        };
        let node = match self.nodes.get(&req.rack_id, &req.node_id) {
            Ok(node) => node,
            Err(lookup) => return failure(lookup.message()),
        };
        let result = tokio::time::timeout(
            self.bmc_timeout(),
            self.backend.firmware_inventory(&node.target),
        )
        .await;
        match result {
            Ok(Ok(components)) => Ok(Response::new(pb::GetNodeFirmwareInventoryResponse {
                status: pb::ReturnCode::Success as i32,
                firmware_list: components
                    .into_iter()
                    .map(firmware_inventory_info)
                    .collect(),
            })),
            Ok(Err(e)) => failure(&e.to_string()),
            Err(_) => failure("firmware inventory read timed out"),
        }
    }

    async fn get_job_status(
        &self,
        request: Request<pb::GetJobStatusRequest>,
    ) -> Result<Response<pb::GetJobStatusResponse>, Status> {
        let req = request.into_inner();
        let job_id = req.job_id.trim();
        if job_id.is_empty() {
            return Err(Status::invalid_argument("job_id is required"));
        }
        let Some(info) = self.tracker.get_job(job_id) else {
            return Err(Status::not_found(format!("job {job_id} not found")));
        };
        let children = if req.include_child_job_states {
            info.child_job_ids.clone()
        } else {
            Vec::new()
        };
        let mut job_states = vec![job_status(info)];
        for child in children {
            match self.tracker.get_job(&child) {
                Some(child) => job_states.push(job_status(child)),
                None => tracing::warn!(
                    job_id,
                    child_job_id = %child,
                    "child job not found while building GetJobStatus response"
                ),
            }
        }
        Ok(Response::new(pb::GetJobStatusResponse { job_states }))
    }

    async fn get_firmware_job_status(
        &self,
        request: Request<pb::GetFirmwareJobStatusRequest>,
    ) -> Result<Response<pb::GetFirmwareJobStatusResponse>, Status> {
        let req = request.into_inner();
        let job_id = req.job_id.trim().to_owned();
        let Some(info) = self.tracker.get_job(&job_id) else {
            return Ok(Response::new(pb::GetFirmwareJobStatusResponse {
                status: pb::ReturnCode::Failure as i32,
                error_message: format!("job {job_id} not found"),
                job_id,
                ..Default::default()
            }));
        };
        Ok(Response::new(pb::GetFirmwareJobStatusResponse {
            status: pb::ReturnCode::Success as i32,
            job_state: execution_state(info.state) as i32,
            error_code: legacy_error(info.error_code) as i32,
            created_at: Some(timestamp(info.created_at)),
            updated_at: Some(timestamp(info.updated_at)),
            job_id: info.job_id,
            state_description: info.state_description,
            rack_id: info.rack_id,
            node_id: info.node_id,
            error_message: info.error_message,
            result_json: info.result_json,
        }))
    }

    async fn execute_cold_reboot(
        &self,
        request: Request<pb::ExecuteColdRebootRequest>,
    ) -> Result<Response<pb::ExecuteColdRebootResponse>, Status> {
        self.execute_cold_reboot_request(request.into_inner())
            .map(Response::new)
    }

    async fn update_node(
        &self,
        request: Request<pb::UpdateNodeRequest>,
    ) -> Result<Response<pb::UpdateNodeResponse>, Status> {
        self.update_node(request.into_inner()).map(Response::new)
    }

    async fn get_node_device_info(
        &self,
        request: Request<pb::GetNodeDeviceInfoRequest>,
    ) -> Result<Response<pb::GetNodeDeviceInfoResponse>, Status> {
        Ok(Response::new(
            self.get_node_device_info(request.into_inner()).await,
        ))
    }

    async fn list_node_device_info_by_node_type(
        &self,
        request: Request<pb::ListNodeDeviceInfoByNodeTypeRequest>,
    ) -> Result<Response<pb::ListNodeDeviceInfoByNodeTypeResponse>, Status> {
        self.list_node_device_info_by_node_type(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn batch_get_node_device_info(
        &self,
        request: Request<pb::BatchGetNodeDeviceInfoRequest>,
    ) -> Result<Response<pb::BatchGetNodeDeviceInfoResponse>, Status> {
        self.batch_get_node_device_info(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn get_rack_firmware_inventory(
        &self,
        request: Request<pb::GetRackFirmwareInventoryRequest>,
    ) -> Result<Response<pb::GetRackFirmwareInventoryResponse>, Status> {
        Ok(Response::new(
            self.get_rack_firmware_inventory(request.into_inner()).await,
        ))
    }

    async fn batch_get_firmware_inventory(
        &self,
        request: Request<pb::BatchGetFirmwareInventoryRequest>,
    ) -> Result<Response<pb::BatchGetFirmwareInventoryResponse>, Status> {
        self.batch_get_firmware_inventory(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn compare_firmware_object(
        &self,
        request: Request<pb::CompareFirmwareObjectRequest>,
    ) -> Result<Response<pb::CompareFirmwareObjectResponse>, Status> {
        self.compare_firmware_object(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn add_firmware_object(
        &self,
        request: Request<pb::AddFirmwareObjectRequest>,
    ) -> Result<Response<pb::AddFirmwareObjectResponse>, Status> {
        self.add_firmware_object(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn get_firmware_object(
        &self,
        request: Request<pb::GetFirmwareObjectRequest>,
    ) -> Result<Response<pb::GetFirmwareObjectResponse>, Status> {
        self.get_firmware_object(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn list_firmware_objects(
        &self,
        request: Request<pb::ListFirmwareObjectsRequest>,
    ) -> Result<Response<pb::ListFirmwareObjectsResponse>, Status> {
        self.list_firmware_objects(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn delete_firmware_object(
        &self,
        request: Request<pb::DeleteFirmwareObjectRequest>,
    ) -> Result<Response<pb::DeleteFirmwareObjectResponse>, Status> {
        self.delete_firmware_object(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn set_default_firmware_object(
        &self,
        request: Request<pb::SetDefaultFirmwareObjectRequest>,
    ) -> Result<Response<pb::SetDefaultFirmwareObjectResponse>, Status> {
        self.set_default_firmware_object(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn apply_stored_firmware_object(
        &self,
        request: Request<pb::ApplyStoredFirmwareObjectRequest>,
    ) -> Result<Response<pb::ApplyStoredFirmwareObjectResponse>, Status> {
        self.apply_stored_firmware_object(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn apply_firmware_object(
        &self,
        request: Request<pb::ApplyFirmwareObjectRequest>,
    ) -> Result<Response<pb::ApplyFirmwareObjectResponse>, Status> {
        self.apply_firmware_object(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn get_firmware_object_history(
        &self,
        request: Request<pb::GetFirmwareObjectHistoryRequest>,
    ) -> Result<Response<pb::GetFirmwareObjectHistoryResponse>, Status> {
        self.get_firmware_object_history(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn update_switch_system_image(
        &self,
        request: Request<pb::UpdateSwitchSystemImageRequest>,
    ) -> Result<Response<pb::UpdateSwitchSystemImageResponse>, Status> {
        self.update_switch_system_image(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn apply_switch_system_image(
        &self,
        request: Request<pb::ApplySwitchSystemImageRequest>,
    ) -> Result<Response<pb::ApplySwitchSystemImageResponse>, Status> {
        self.apply_switch_system_image(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn apply_stored_switch_system_image(
        &self,
        request: Request<pb::ApplyStoredSwitchSystemImageRequest>,
    ) -> Result<Response<pb::ApplyStoredSwitchSystemImageResponse>, Status> {
        self.apply_stored_switch_system_image(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn batch_reset_switch_factory_default(
        &self,
        request: Request<pb::BatchResetSwitchFactoryDefaultRequest>,
    ) -> Result<Response<pb::BatchResetSwitchFactoryDefaultResponse>, Status> {
        let req = request.into_inner();
        self.reset_switches(req.nodes.as_ref(), crate::switch::ResetScope::Full)
            .map(|r| {
                Response::new(pb::BatchResetSwitchFactoryDefaultResponse { response: Some(r) })
            })
    }

    async fn batch_reset_switch_sdn_factory_default(
        &self,
        request: Request<pb::BatchResetSwitchSdnFactoryDefaultRequest>,
    ) -> Result<Response<pb::BatchResetSwitchSdnFactoryDefaultResponse>, Status> {
        let req = request.into_inner();
        self.reset_switches(req.nodes.as_ref(), crate::switch::ResetScope::Sdn)
            .map(|r| {
                Response::new(pb::BatchResetSwitchSdnFactoryDefaultResponse { response: Some(r) })
            })
    }

    async fn batch_disable_switch_mtls(
        &self,
        request: Request<pb::BatchDisableSwitchMtlsRequest>,
    ) -> Result<Response<pb::BatchDisableSwitchMtlsResponse>, Status> {
        self.disable_switch_mtls(request.into_inner())
            .map(|r| Response::new(pb::BatchDisableSwitchMtlsResponse { response: Some(r) }))
    }

    async fn update_switch_system_password(
        &self,
        request: Request<pb::UpdateSwitchSystemPasswordRequest>,
    ) -> Result<Response<pb::UpdateSwitchSystemPasswordResponse>, Status> {
        self.update_switch_password(request.into_inner())
            .map(|r| Response::new(pb::UpdateSwitchSystemPasswordResponse { response: Some(r) }))
    }

    async fn configure_switch_certificate(
        &self,
        request: Request<pb::ConfigureSwitchCertificateRequest>,
    ) -> Result<Response<pb::ConfigureSwitchCertificateResponse>, Status> {
        self.configure_switch_certificate(request.into_inner())
            .map(Response::new)
    }

    async fn get_configure_switch_certificate_job_status(
        &self,
        request: Request<pb::GetConfigureSwitchCertificateJobStatusRequest>,
    ) -> Result<Response<pb::GetConfigureSwitchCertificateJobStatusResponse>, Status> {
        Ok(Response::new(
            self.get_certificate_job_status(request.into_inner()),
        ))
    }

    async fn list_switch_firmware(
        &self,
        request: Request<pb::ListSwitchFirmwareRequest>,
    ) -> Result<Response<pb::ListSwitchFirmwareResponse>, Status> {
        Ok(Response::new(
            self.list_switch_firmware(request.into_inner()).await,
        ))
    }

    async fn push_switch_firmware(
        &self,
        request: Request<pb::PushSwitchFirmwareRequest>,
    ) -> Result<Response<pb::PushSwitchFirmwareResponse>, Status> {
        self.push_switch_firmware(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn batch_collect_switch_spdm_attestation_evidence(
        &self,
        request: Request<pb::BatchCollectSwitchSpdmAttestationEvidenceRequest>,
    ) -> Result<Response<pb::BatchCollectSwitchSpdmAttestationEvidenceResponse>, Status> {
        self.collect_switch_attestation(request.into_inner())
            .await
            .map(Response::new)
    }

    async fn list_switch_system_images(
        &self,
        request: Request<pb::ListSwitchSystemImagesRequest>,
    ) -> Result<Response<pb::ListSwitchSystemImagesResponse>, Status> {
        Ok(Response::new(
            self.list_switch_system_images(request.into_inner()).await,
        ))
    }

    async fn get_switch_system_image_job_status(
        &self,
        request: Request<pb::GetSwitchSystemImageJobStatusRequest>,
    ) -> Result<Response<pb::GetSwitchSystemImageJobStatusResponse>, Status> {
        Ok(Response::new(
            self.get_switch_system_image_job_status(request.into_inner()),
        ))
    }

    async fn get_version(
        &self,
        _request: Request<pb::GetVersionRequest>,
    ) -> Result<Response<pb::GetVersionResponse>, Status> {
        Ok(Response::new(pb::GetVersionResponse {
            version: VERSION.to_owned(),
        }))
    }
}

/// Results of a join set; a task that panicked is dropped from the list
/// (and logged), so the caller counts its node as failed.
async fn collect_indexed<T: 'static>(mut set: JoinSet<T>) -> Vec<T> {
    let mut out = Vec::with_capacity(set.len());
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(value) => out.push(value),
            Err(e) => tracing::error!(error = %e, "batch power task failed"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_operations_map_and_unspecified_is_invalid() {
        assert_eq!(power_action(2).unwrap(), PowerAction::On);
        assert_eq!(power_action(8).unwrap(), PowerAction::ForceRestart);
        let status = power_action(0).unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert_eq!(status.message(), "invalid operation: 0");
        assert_eq!(
            power_action(42).unwrap_err().message(),
            "invalid operation: 42"
        );
    }

    #[test]
    fn legacy_error_names_resolve() {
        for code in JobError::ALL {
            assert_ne!(
                legacy_error(code),
                pb::FirmwareUpdateError::Unknown,
                "{code:?} has no legacy value"
            );
        }
        assert_eq!(
            legacy_error(JobError::UpdateInProgress),
            pb::FirmwareUpdateError::UpdateInProgress
        );
        assert_eq!(
            legacy_error(JobError::Internal),
            pb::FirmwareUpdateError::Exception
        );
    }

    #[test]
    fn batch_status_is_success_only_when_every_node_succeeded() {
        let all = batch_response::from_results(
            "m".into(),
            vec![batch_response::node_ok("a"), batch_response::node_ok("b")],
            2,
        );
        assert_eq!(all.status, pb::ReturnCode::Success as i32);
        let some = batch_response::from_results(
            "m".into(),
            vec![
                batch_response::node_ok("a"),
                batch_response::node_failed("b", "x"),
            ],
            2,
        );
        assert_eq!(some.status, pb::ReturnCode::Failure as i32);
        assert_eq!(some.stats.unwrap().failed_nodes, 1);
    }
}
