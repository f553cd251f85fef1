//! The `redfish` node back end (spec decision M2, §3.4): a Redfish client
//! for one BMC and the operations a rack manager needs on one node.
//!
//! - [`RedfishClient`] (`client.rs`): endpoint, basic-auth [`Credentials`]
//!   (`credentials.rs`, never printed), timeouts, TLS verification (on by
//!   default; off only by an explicit [`RedfishConfig::verify_tls`]), and
//!   the mapping of HTTP answers to [`RedfishError`] (`error.rs`).
//! - [`RedfishNode`] (`node.rs`): the computer system, discovered from the
//!   service root's `Systems` collection; power (`power.rs`):
//!   `ComputerSystem.Reset` through the advertised action target, checked
//!   against `ResetType@Redfish.AllowableValues`, `PowerState`, and
//!   [`RedfishNode::set_power_and_wait`]; firmware (`firmware.rs`):
//!   `UpdateService` inventory, SimpleUpdate or multipart push, and Task
//!   following through the `TaskService` with progress callbacks; coolant
//!   leak detectors (`leak.rs`): each chassis' `ThermalSubsystem`
//!   `LeakDetection`.
//! - Redfish values and their parsing (`types.rs`), pure.
//!
//! Nodes know nothing about jobs (spec §3.4); [`RedfishError::job_error`]
//! classifies failures for the job layer. Every method is async on `&self`
//! and the types are `Send + Sync`, so a node back-end trait can wrap them.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rackflow_rms::redfish::RedfishError> {
//! use std::time::Duration;
//! use rackflow_rms::redfish::{Credentials, RedfishClient, RedfishConfig, RedfishNode, ResetType};
//!
//! let client = RedfishClient::new(
//!     "https://10.0.0.5",
//!     Some(Credentials::new("admin", "secret")),
//!     RedfishConfig::default(),
//! )?;
//! let node = RedfishNode::new(client);
//! node.set_power_and_wait(&ResetType::On, Duration::from_secs(120), Duration::from_secs(2))
//!     .await?;
//! # Ok(())
//! # }
//! ```

mod client;
mod config;
mod credentials;
mod device;
mod error;
mod firmware;
mod leak;
mod node;
mod power;
mod types;

pub use client::{Answer, RedfishClient};
pub use config::RedfishConfig;
pub use credentials::Credentials;
pub use device::DeviceInfo;
pub use error::{RedfishError, TransportKind, bmc_message};
pub use firmware::{
    FirmwareImage, FirmwareUpdateOutcome, UpdateMethod, UpdateServiceInfo, UpdateStarted,
};
pub use leak::{DetectorState, LeakDetector};
pub use node::{RedfishNode, SERVICE_ROOT};
pub use power::PowerWait;
pub use types::{FirmwareComponent, PowerState, ResetType, TaskState, TaskStatus};
