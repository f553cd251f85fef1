//! Per-RPC metrics of a gRPC service, recorded by its edge layer once per
//! call:
//!
//! * `rackflow_rpc_requests_total{service, rpc, code}`;
//! * `rackflow_rpc_duration_seconds{service, rpc, code}` — a histogram of
//!   the time until the response's head (a stream's whole life is not in it).
//!
//! `rpc` is the gRPC method path when the service serves it and `unknown`
//! otherwise, so a caller inventing paths cannot grow the series without
//! bound; `code` is the gRPC code's name (`OK`, `NOT_FOUND`, …).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The `rpc` label of a path the service does not serve.
pub const UNKNOWN_RPC: &str = "unknown";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RpcLabels {
    service: &'static str,
    rpc: &'static str,
    code: &'static str,
}

/// Latency buckets: 0.5 ms doubling to ~16 s (16 buckets).
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// The two families; share as `Arc<RpcMetrics>`.
#[derive(Debug)]
pub struct RpcMetrics {
    requests: Family<RpcLabels, Counter>,
    latency: Family<RpcLabels, Histogram, fn() -> Histogram>,
}

impl RpcMetrics {
    /// Registers both families in `registry` (names get `rackflow_`).
    pub fn register(registry: &mut Registry) -> RpcMetrics {
        let requests = Family::<RpcLabels, Counter>::default();
        let latency = Family::<RpcLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let registry = registry.sub_registry_with_prefix("rackflow");
        registry.register(
            "rpc_requests",
            "gRPC calls answered, by method and code",
            requests.clone(),
        );
        registry.register(
            "rpc_duration_seconds",
            "Time from a gRPC call's arrival to its response head, by method and code",
            latency.clone(),
        );
        RpcMetrics { requests, latency }
    }

    /// One call of `rpc` (a served method path, or [`UNKNOWN_RPC`]) on
    /// `service` answered `code` after `elapsed`.
    pub fn observe(
        &self,
        service: &'static str,
        rpc: &'static str,
        code: &'static str,
        elapsed: Duration,
    ) {
        let labels = RpcLabels { service, rpc, code };
        self.requests.get_or_create(&labels).inc();
        self.latency
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_counts_and_lands_in_its_bucket() {
        let mut registry = Registry::default();
        let rpc = RpcMetrics::register(&mut registry);
        rpc.observe("flow", "/v1.Flow/GetRacks", "OK", Duration::from_millis(3));
        rpc.observe("flow", "/v1.Flow/GetRacks", "OK", Duration::from_millis(3));
        rpc.observe(
            "flow",
            UNKNOWN_RPC,
            "UNIMPLEMENTED",
            Duration::from_micros(10),
        );
        let text = crate::encode(&registry);
        assert!(
            text.contains(
                "rackflow_rpc_requests_total{service=\"flow\",rpc=\"/v1.Flow/GetRacks\",code=\"OK\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "rackflow_rpc_duration_seconds_bucket{le=\"0.004\",service=\"flow\",rpc=\"/v1.Flow/GetRacks\",code=\"OK\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "rackflow_rpc_requests_total{service=\"flow\",rpc=\"unknown\",code=\"UNIMPLEMENTED\"} 1"
            ),
            "{text}"
        );
    }
}
