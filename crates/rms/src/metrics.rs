//! The rack manager's Prometheus registry (spec §1.15): the tracker's
//! workflow families (`rms_workflows_counts_total`, `rms_workflows_in_flight`)
//! and the gRPC edge's per-RPC families (`rackflow_rpc_*`), served on
//! `/metrics` by `rackflow_telemetry::http`.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use prometheus_client::registry::Registry;
use rackflow_telemetry::{Exposition, RpcMetrics};

use crate::job::WorkflowMetrics;

/// Every family the rack manager exposes.
#[derive(Debug)]
pub struct RmsMetrics {
    registry: Registry,
    /// What the job tracker counts into.
    pub workflows: Arc<WorkflowMetrics>,
    /// What the gRPC edge counts into.
    pub rpc: Arc<RpcMetrics>,
}

impl Default for RmsMetrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let workflows = Arc::new(WorkflowMetrics::register(&mut registry));
        let rpc = Arc::new(RpcMetrics::register(&mut registry));
        RmsMetrics {
            registry,
            workflows,
            rpc,
        }
    }
}

impl Exposition for RmsMetrics {
    fn render(&self) -> BoxFuture<'_, String> {
        Box::pin(async move { rackflow_telemetry::encode(&self.registry) })
    }
}
