//! `rackflow.rms.v1.RackManagerExtensions/ListLeakDetectors` (issue 34):
//! the coolant leak detectors of registered nodes, read from their BMCs
//! through the node back end. rackflow's own RPC, on its own service: the
//! reference `RackManager` has no leak call.
//!
//! Nodes are read at once (at most [`LEAK_READ_CONCURRENCY`] BMCs at a time,
//! each bounded by the BMC call timeout); a node that cannot be read is
//! answered with its error beside the others, so one dead BMC never hides a
//! leak on its neighbours. Unregistered node ids are answered the same way;
//! an unknown rack is `NOT_FOUND`.

use std::collections::BTreeSet;
use std::sync::Arc;

use rackflow_api::rms_ext::v1 as pb;
use rackflow_api::rms_ext::v1::rack_manager_extensions_server::{
    RackManagerExtensions, RackManagerExtensionsServer,
};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tonic::{Request, Response, Status};

use super::RackManagerService;
use super::nodes::RegisteredNode;
use crate::backend::{DetectorState, LeakDetector};

/// BMCs read at the same time by one request.
pub const LEAK_READ_CONCURRENCY: usize = 32;

/// Most node ids one request may name.
pub const MAX_NODE_IDS: usize = 10_000;

/// What one node answered.
type NodeReading = Result<Option<Vec<LeakDetector>>, String>;

impl RackManagerService {
    /// The extension service over the same registry and back end.
    pub fn into_extensions_server(self) -> RackManagerExtensionsServer<Self> {
        RackManagerExtensionsServer::new(self)
    }

    /// The registered nodes a request names, and the ids it names that no
    /// rack registers.
    fn leak_nodes(
        &self,
        req: &pb::ListLeakDetectorsRequest,
    ) -> Result<(Vec<RegisteredNode>, Vec<String>), Status> {
        if req.node_ids.len() > MAX_NODE_IDS {
            return Err(Status::invalid_argument(format!(
                "at most {MAX_NODE_IDS} node_ids per request, got {}",
                req.node_ids.len()
            )));
        }
        if req.node_ids.iter().any(|n| n.trim().is_empty()) {
            return Err(Status::invalid_argument(
                "node_ids must not contain empty ids",
            ));
        }
        let candidates = if req.rack_id.is_empty() {
            self.nodes.all_nodes()
        } else {
            self.nodes
                .rack_nodes(&req.rack_id)
                .map_err(|_| Status::not_found(format!("rack {} is not registered", req.rack_id)))?
        };
        if req.node_ids.is_empty() {
            return Ok((candidates, Vec::new()));
        }
        let wanted: BTreeSet<&str> = req.node_ids.iter().map(String::as_str).collect();
        let nodes: Vec<RegisteredNode> = candidates
            .into_iter()
            .filter(|n| wanted.contains(n.target.node_id.as_str()))
            .collect();
        let found: BTreeSet<&str> = nodes.iter().map(|n| n.target.node_id.as_str()).collect();
        let missing = wanted
            .difference(&found)
            .map(|id| (*id).to_owned())
            .collect();
        Ok((nodes, missing))
    }

    async fn read_leak_detectors(&self, node: &RegisteredNode) -> NodeReading {
        match tokio::time::timeout(
            self.bmc_timeout(),
            self.backend.leak_detectors(&node.target),
        )
        .await
        {
            Ok(result) => result.map_err(|e| e.to_string()),
            Err(_) => Err(format!(
                "reading the leak detectors timed out after {} s",
                self.bmc_timeout().as_secs()
            )),
        }
    }
}

fn state_of(state: DetectorState) -> pb::LeakDetectorState {
    match state {
        DetectorState::Ok => pb::LeakDetectorState::Ok,
        DetectorState::Warning => pb::LeakDetectorState::Warning,
        DetectorState::Critical => pb::LeakDetectorState::Critical,
        DetectorState::Unknown => pb::LeakDetectorState::Unspecified,
    }
}

fn answer(rack_id: String, node_id: String, reading: NodeReading) -> pb::NodeLeakDetectors {
    let mut entry = pb::NodeLeakDetectors {
        rack_id,
        node_id,
        ..Default::default()
    };
    match reading {
        Ok(Some(detectors)) => {
            entry.supported = true;
            entry.detectors = detectors
                .into_iter()
                .map(|d| pb::LeakDetectorReading {
                    id: d.id,
                    name: d.name,
                    chassis_id: d.chassis_id,
                    state: state_of(d.state) as i32,
                    detector_type: d.detector_type,
                    uri: d.uri,
                })
                .collect();
        }
        Ok(None) => {}
        Err(error) => entry.error = error,
    }
    entry
}

#[tonic::async_trait]
impl RackManagerExtensions for RackManagerService {
    async fn list_leak_detectors(
        &self,
        request: Request<pb::ListLeakDetectorsRequest>,
    ) -> Result<Response<pb::ListLeakDetectorsResponse>, Status> {
        let req = request.into_inner();
        let (nodes, missing) = self.leak_nodes(&req)?;
        let permits = Arc::new(Semaphore::new(LEAK_READ_CONCURRENCY));
        let mut set = JoinSet::new();
        for node in nodes {
            let this = self.clone();
            let permits = Arc::clone(&permits);
            set.spawn(async move {
                // The semaphore is never closed.
                let _permit = permits.acquire_owned().await.ok();
                let reading = this.read_leak_detectors(&node).await;
                if let Err(error) = &reading {
                    tracing::warn!(rack = %node.target.rack_id, node = %node.target.node_id, %error, "leak detectors could not be read");
                }
                answer(node.target.rack_id, node.target.node_id, reading)
            });
        }
        let mut entries = super::collect_indexed(set).await;
        let rack_filter = req.rack_id.clone();
        entries.extend(missing.into_iter().map(|node_id| {
            let error = if rack_filter.is_empty() {
                format!("node {node_id} is not registered")
            } else {
                format!("node {node_id} is not registered in rack {rack_filter}")
            };
            answer(rack_filter.clone(), node_id, Err(error))
        }));
        entries.sort_by(|a, b| (&a.rack_id, &a.node_id).cmp(&(&b.rack_id, &b.node_id)));
        Ok(Response::new(pb::ListLeakDetectorsResponse {
            nodes: entries,
        }))
    }
}
