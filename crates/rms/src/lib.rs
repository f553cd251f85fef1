//! rackflow's rack manager service (RMS).
//!
//! For now this crate holds only the async job model of the spec
//! (`shared/spec/rms-job-model.md` §1): job states and transitions, typed
//! error kinds, the RAII job handle, per-node exclusion, capacity, shutdown
//! draining, parent/child batch aggregation, TTL retention with a reaper, and
//! cleanup plans. The gRPC API and node back ends build on it later.

pub mod job;
pub mod redfish;
