//! Node update, device info and rack / batch firmware inventory (issue 35):
//! `UpdateNode`, `GetNodeDeviceInfo`, `ListNodeDeviceInfoByNodeType`,
//! `BatchGetNodeDeviceInfo`, `GetRackFirmwareInventory`,
//! `BatchGetFirmwareInventory`.
//!
//! `UpdateNode` differs from the reference on purpose: the reference always
//! answers Failure ("not implemented"); rackflow replaces the BMC and/or
//! host endpoint of a registered node that is idle — no job holds it and no
//! power operation runs on its rack — and refuses a busy one in-band. A new
//! BMC endpoint without credentials keeps the node's current ones (an
//! address change needs no password). Reads of many nodes run at most
//! `workflows.batch_read_concurrency` at a time and answer in request order.

use std::future::Future;

use futures_util::StreamExt as _;
use rackflow_api::rack_manager as pb;
use tonic::Status;

use super::{RackManagerService, batch_response, nodes, operation_response};
use crate::backend::{BackendError, DeviceInfo, FirmwareComponent, NodeTarget};
use nodes::RegisteredNode;

impl RackManagerService {
    /// `UpdateNode`.
    pub(super) fn update_node(
        &self,
        req: pb::UpdateNodeRequest,
    ) -> Result<pb::UpdateNodeResponse, Status> {
        let answer = |ok: bool, message: String| {
            if !ok {
                tracing::warn!(rack = %req.rack_id, node = %req.node_id, error = %message, "node update refused");
            }
            Ok(pb::UpdateNodeResponse {
                response: Some(operation_response(ok, message)),
            })
        };
        let update = req.update_info.clone().unwrap_or_default();
        let carried: Vec<pb::NodeInfo> = [update.bmc_endpoint.clone()]
            .into_iter()
            .map(|bmc| pb::NodeInfo {
                bmc_endpoint: bmc,
                ..Default::default()
            })
            .collect();
        self.admit_credentials(&carried)?;
        if update.bmc_endpoint.is_none() && update.host_endpoint.is_none() {
            return answer(
                false,
                "update_info names nothing to update (bmc_endpoint, host_endpoint)".to_owned(),
            );
        }
        let existing = match self.nodes.get(&req.rack_id, &req.node_id) {
            Ok(node) => node,
            Err(lookup) => return answer(false, lookup.message().to_owned()),
        };
        let Some(_guard) = self.nodes.try_power_guard(&req.rack_id) else {
            return answer(
                false,
                format!(
                    "power operation already in progress for rack {}",
                    req.rack_id
                ),
            );
        };
        if let Some(job) = self.tracker.active_job_for_node(&req.rack_id, &req.node_id) {
            return answer(
                false,
                format!("node {} is busy with job {job}; not updated", req.node_id),
            );
        }
        let mut info = existing.info.clone();
        let mut changed = Vec::new();
        if let Some(bmc) = update.bmc_endpoint.clone() {
            info.bmc_endpoint = Some(bmc);
            changed.push("bmc_endpoint");
        }
        if let Some(host) = update.host_endpoint.clone() {
            info.host_endpoint = Some(host);
            changed.push("host_endpoint");
        }
        let mut target = match nodes::target_of(&info, false) {
            Ok(target) => target,
            Err(message) => return answer(false, message),
        };
        let new_credentials = update
            .bmc_endpoint
            .as_ref()
            .and_then(|e| e.credentials.as_ref())
            .is_some_and(|c| c.auth.is_some());
        if !new_credentials {
            target.bmc.credentials = existing.target.bmc.credentials.clone();
        }
        self.nodes.insert(RegisteredNode {
            info: nodes::redacted(&info),
            target,
        });
        tracing::info!(rack = %req.rack_id, node = %req.node_id, fields = ?changed, "node updated");
        answer(
            true,
            format!("Updated node {}: {}", req.node_id, changed.join(", ")),
        )
    }

    /// Runs `read` on every target, at most `batch_read_concurrency` at a
    /// time, each bounded by the BMC call timeout; results in input order.
    async fn read_each<T, F, Fut>(
        &self,
        targets: Vec<(String, Result<NodeTarget, String>)>,
        what: &'static str,
        read: F,
    ) -> Vec<(String, Result<T, String>)>
    where
        F: Fn(NodeTarget) -> Fut,
        Fut: Future<Output = Result<T, BackendError>>,
    {
        let timeout = self.bmc_timeout();
        futures_util::stream::iter(targets.into_iter().map(|(node_id, target)| {
            let read = &read;
            async move {
                let result = match target {
                    Err(message) => Err(message),
                    Ok(target) => match tokio::time::timeout(timeout, read(target)).await {
                        Ok(Ok(value)) => Ok(value),
                        Ok(Err(e)) => Err(e.to_string()),
                        Err(_) => Err(format!("{what} timed out after {}s", timeout.as_secs())),
                    },
                };
                (node_id, result)
            }
        }))
        .buffered(self.config.batch_read_concurrency.get())
        .collect()
        .await
    }

    async fn device_infos(
        &self,
        targets: Vec<(String, Result<NodeTarget, String>)>,
    ) -> Vec<(String, Result<DeviceInfo, String>)> {
        let backend = &self.backend;
        self.read_each(targets, "device info read", |t| async move {
            backend.device_info(&t).await
        })
        .await
    }

    async fn firmware_inventories(
        &self,
        targets: Vec<(String, Result<NodeTarget, String>)>,
    ) -> Vec<(String, Result<Vec<FirmwareComponent>, String>)> {
        let backend = &self.backend;
        self.read_each(targets, "firmware inventory read", |t| async move {
            backend.firmware_inventory(&t).await
        })
        .await
    }

    /// `GetNodeDeviceInfo`.
    pub(super) async fn get_node_device_info(
        &self,
        req: pb::GetNodeDeviceInfoRequest,
    ) -> pb::GetNodeDeviceInfoResponse {
        let failure = |message: String| {
            tracing::warn!(rack = %req.rack_id, node = %req.node_id, error = %message, "device info read failed");
            pb::GetNodeDeviceInfoResponse {
                status: pb::ReturnCode::Failure as i32,
                message,
                device_info: None,
            }
        };
        let node = match self.nodes.get(&req.rack_id, &req.node_id) {
            Ok(node) => node,
            Err(lookup) => return failure(lookup.message().to_owned()),
        };
        let mut results = self
            .device_infos(vec![(req.node_id.clone(), Ok(node.target))])
            .await;
        match results.pop().map(|(_, r)| r) {
            Some(Ok(info)) => pb::GetNodeDeviceInfoResponse {
                status: pb::ReturnCode::Success as i32,
                message: format!("Read device info of node {}", req.node_id),
                device_info: Some(device_info(&req.node_id, info)),
            },
            Some(Err(message)) => failure(message),
            None => failure("device info read produced no result".to_owned()),
        }
    }

    /// `ListNodeDeviceInfoByNodeType`.
    pub(super) async fn list_node_device_info_by_node_type(
        &self,
        req: pb::ListNodeDeviceInfoByNodeTypeRequest,
    ) -> Result<pb::ListNodeDeviceInfoByNodeTypeResponse, Status> {
        let matching =
            match self.nodes_of_type(&req.rack_id, req.node_type, req.node_descriptor.as_ref())? {
                Ok(nodes) => nodes,
                Err(message) => {
                    return Ok(pb::ListNodeDeviceInfoByNodeTypeResponse {
                        status: pb::ReturnCode::Failure as i32,
                        message,
                        node_device_details: Vec::new(),
                        stats: Some(pb::NodeOperationStats::default()),
                    });
                }
            };
        let targets = matching
            .into_iter()
            .map(|n| (n.target.node_id.clone(), Ok(n.target)))
            .collect();
        let results = self.device_infos(targets).await;
        let (status, message, node_device_details, stats) = device_info_summary(results);
        Ok(pb::ListNodeDeviceInfoByNodeTypeResponse {
            status,
            message,
            node_device_details,
            stats: Some(stats),
        })
    }

    /// `BatchGetNodeDeviceInfo`.
    pub(super) async fn batch_get_node_device_info(
        &self,
        req: pb::BatchGetNodeDeviceInfoRequest,
    ) -> Result<pb::BatchGetNodeDeviceInfoResponse, Status> {
        let targets = self.ephemeral_targets(req.nodes.as_ref())?;
        if targets.is_empty() {
            return Ok(pb::BatchGetNodeDeviceInfoResponse {
                status: pb::ReturnCode::Failure as i32,
                message: "No nodes specified in request".to_owned(),
                node_device_details: Vec::new(),
                stats: Some(pb::NodeOperationStats::default()),
            });
        }
        let results = self.device_infos(targets).await;
        let (status, message, node_device_details, stats) = device_info_summary(results);
        Ok(pb::BatchGetNodeDeviceInfoResponse {
            status,
            message,
            node_device_details,
            stats: Some(stats),
        })
    }

    /// `GetRackFirmwareInventory`: every registered node of the rack;
    /// SUCCESS only when every node answered (the ones that did are listed
    /// either way).
    pub(super) async fn get_rack_firmware_inventory(
        &self,
        req: pb::GetRackFirmwareInventoryRequest,
    ) -> pb::GetRackFirmwareInventoryResponse {
        let rack_nodes = match self.nodes.rack_nodes(&req.rack_id) {
            Ok(nodes) => nodes,
            Err(lookup) => {
                tracing::warn!(rack = %req.rack_id, error = lookup.message(), "rack firmware inventory failed");
                return pb::GetRackFirmwareInventoryResponse {
                    status: pb::ReturnCode::Failure as i32,
                    nodes: Vec::new(),
                };
            }
        };
        let targets = rack_nodes
            .into_iter()
            .map(|n| (n.target.node_id.clone(), Ok(n.target)))
            .collect();
        let results = self.firmware_inventories(targets).await;
        let mut all_ok = true;
        let mut nodes = Vec::new();
        for (node_id, result) in results {
            match result {
                Ok(list) => nodes.push(node_firmware(&node_id, list)),
                Err(error) => {
                    all_ok = false;
                    tracing::warn!(rack = %req.rack_id, node = %node_id, %error, "firmware inventory read failed");
                }
            }
        }
        pb::GetRackFirmwareInventoryResponse {
            status: if all_ok {
                pb::ReturnCode::Success
            } else {
                pb::ReturnCode::Failure
            } as i32,
            nodes,
        }
    }

    /// `BatchGetFirmwareInventory`.
    pub(super) async fn batch_get_firmware_inventory(
        &self,
        req: pb::BatchGetFirmwareInventoryRequest,
    ) -> Result<pb::BatchGetFirmwareInventoryResponse, Status> {
        let targets = self.ephemeral_targets(req.nodes.as_ref())?;
        if targets.is_empty() {
            return Ok(pb::BatchGetFirmwareInventoryResponse {
                response: Some(batch_response::failure("No nodes specified in request")),
                nodes: Vec::new(),
            });
        }
        let total = targets.len();
        let results = self.firmware_inventories(targets).await;
        let mut node_results = Vec::with_capacity(total);
        let mut nodes = Vec::new();
        for (node_id, result) in results {
            match result {
                Ok(list) => {
                    node_results.push(batch_response::node_ok(&node_id));
                    nodes.push(node_firmware(&node_id, list));
                }
                Err(error) => node_results.push(batch_response::node_failed(&node_id, &error)),
            }
        }
        let ok = nodes.len();
        let message = format!(
            "Read firmware inventory of {total} nodes: {ok} succeeded, {} failed",
            total - ok
        );
        Ok(pb::BatchGetFirmwareInventoryResponse {
            response: Some(batch_response::from_results(message, node_results, total)),
            nodes,
        })
    }

    /// Registered nodes of a rack with a node type (or, for an unspecified
    /// type, a descriptor). `Err` is a malformed request; `Ok(Err)` an
    /// in-band failure.
    pub(super) fn nodes_of_type(
        &self,
        rack_id: &str,
        node_type: i32,
        descriptor: Option<&pb::NodeDescriptor>,
    ) -> Result<Result<Vec<RegisteredNode>, String>, Status> {
        let selector = nodes::NodeSelector::parse(node_type, descriptor)?;
        let rack_nodes = match self.nodes.rack_nodes(rack_id) {
            Ok(nodes) => nodes,
            Err(lookup) => return Ok(Err(lookup.message().to_owned())),
        };
        let matching: Vec<RegisteredNode> = rack_nodes
            .into_iter()
            .filter(|n| selector.matches(n))
            .collect();
        if matching.is_empty() {
            return Ok(Err("no matching nodes found".to_owned()));
        }
        Ok(Ok(matching))
    }
}

fn device_info(node_id: &str, info: DeviceInfo) -> pb::NodeDeviceInfo {
    pb::NodeDeviceInfo {
        node_id: node_id.to_owned(),
        chassis_sn: info.chassis_serial,
        slot_number: info.slot_number,
        tray_index: info.tray_index,
    }
}

fn node_firmware(node_id: &str, list: Vec<FirmwareComponent>) -> pb::NodeFirmwareInventory {
    pb::NodeFirmwareInventory {
        node_id: node_id.to_owned(),
        firmware_list: list
            .into_iter()
            .map(super::firmware_inventory_info)
            .collect(),
    }
}

/// Status, message (with every failure's detail), successes and counts of
/// a multi-node device-info read.
fn device_info_summary(
    results: Vec<(String, Result<DeviceInfo, String>)>,
) -> (i32, String, Vec<pb::NodeDeviceInfo>, pb::NodeOperationStats) {
    let total = results.len();
    let mut details = Vec::new();
    let mut failures = Vec::new();
    for (node_id, result) in results {
        match result {
            Ok(info) => details.push(device_info(&node_id, info)),
            Err(error) => failures.push(format!("{node_id}: {error}")),
        }
    }
    let ok = details.len();
    let message = if failures.is_empty() {
        format!("Read device info of {ok} nodes")
    } else {
        tracing::warn!(failed = failures.len(), "device info reads failed");
        format!(
            "Read device info of {ok} of {total} nodes; failed: {}",
            failures.join("; ")
        )
    };
    let status = if failures.is_empty() && ok > 0 {
        pb::ReturnCode::Success
    } else {
        pb::ReturnCode::Failure
    };
    (
        status as i32,
        message,
        details,
        pb::NodeOperationStats {
            total_nodes: u32::try_from(total).unwrap_or(u32::MAX),
            successful_nodes: u32::try_from(ok).unwrap_or(u32::MAX),
            failed_nodes: u32::try_from(total - ok).unwrap_or(u32::MAX),
        },
    )
}
