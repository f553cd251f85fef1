//! What the Flow server and the rack manager share for being observed:
//!
//! * [`http`]: the `GET /metrics` endpoint (OpenMetrics text), serving
//!   whatever a service renders through [`Exposition`];
//! * [`rpc`]: per-RPC request counts and latency by gRPC code, recorded by
//!   the gRPC edge of both services (`rackflow-security`).
//!
//! Both services encode with the official `prometheus-client`; no service
//! writes exposition text by hand.

pub mod http;
pub mod rpc;

pub use http::{Exposition, OPENMETRICS, encode};
pub use rpc::RpcMetrics;
