//! rackflow's rack manager service (RMS).
//!
//! - [`job`]: the async job model of the spec
//!   (`shared/spec/rms-job-model.md` §1): job states and transitions, typed
//!   error kinds, the RAII job handle, per-node exclusion, capacity, shutdown
//!   draining, parent/child batch aggregation, TTL retention with a reaper,
//!   and cleanup plans.
//! - [`backend`]: the node back-end trait and the `sim` back end.
//! - [`catalog`]: the firmware-object catalogue and its artifact store.
//! - [`service`]: the `RackManager` gRPC handlers; [`server`]: startup and
//!   shutdown; [`config`]: the TOML file; [`metrics`]: `/metrics`.

pub mod job;
pub mod redfish;

pub mod backend;
pub mod catalog;
pub mod config;
pub mod metrics;
pub mod server;
pub mod service;
pub mod switch;
