//! The Flow server's Prometheus registry: the engine's families
//! (`rackflow_engine::metrics`) and the gRPC edge's per-RPC families, served
//! on `/metrics` (`[metrics]`) by `rackflow_telemetry::http`. A scrape first
//! reads the run and task gauges from the database.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use prometheus_client::registry::Registry;
use rackflow_engine::metrics::Metrics;
use rackflow_engine::store::Store;
use rackflow_telemetry::{Exposition, RpcMetrics};

/// Every family the Flow server exposes.
pub struct FlowMetrics {
    registry: Registry,
    store: Arc<dyn Store>,
    /// What the engine counts into.
    pub engine: Arc<Metrics>,
    /// What the gRPC edge counts into.
    pub rpc: Arc<RpcMetrics>,
}

impl FlowMetrics {
    pub fn new(store: Arc<dyn Store>) -> FlowMetrics {
        let mut registry = Registry::default();
        let engine = Arc::new(Metrics::register(&mut registry));
        let rpc = Arc::new(RpcMetrics::register(&mut registry));
        FlowMetrics {
            registry,
            store,
            engine,
            rpc,
        }
    }
}

impl Exposition for FlowMetrics {
    fn render(&self) -> BoxFuture<'_, String> {
        Box::pin(async move {
            self.engine.refresh(self.store.as_ref()).await;
            rackflow_telemetry::encode(&self.registry)
        })
    }
}
