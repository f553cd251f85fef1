//! The wire layer: generated code for the Flow API (`package v1`).
//!
//! Holds no logic. The `.proto` sources live in the workspace's `proto/`
//! folder; field numbers and enum values match the reference Flow service.

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod v1 {
    tonic::include_proto!("v1");
}

/// The simulated fleet's admin API (`package rackflow.sim.v1`), a rackflow
/// addition for tests and the demo.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod sim {
    pub mod v1 {
        tonic::include_proto!("rackflow.sim.v1");
    }
}

/// The rack manager's API (`package rack_manager`, service `RackManager`):
/// the reference contract's M1 subset, served by `rackflow rms serve` and
/// called by Flow's `rms` provider.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod rack_manager {
    tonic::include_proto!("rack_manager");
}

/// The rack manager's own RPCs (`package rackflow.rms.v1`, service
/// `RackManagerExtensions`): what rackflow's rack manager serves beyond the
/// reference's contract (the BMCs' leak detectors).
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod rms_ext {
    pub mod v1 {
        tonic::include_proto!("rackflow.rms.v1");
    }
}

/// Encoded file descriptor set of the Flow API, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("flow_descriptor");
