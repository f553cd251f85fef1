//! Node back ends (decision M2): the device boundary of the rack manager.
//!
//! This module owns the [`NodeBackend`] trait — power set/get, firmware
//! inventory and firmware update with progress — the target description a
//! back end is called with ([`NodeTarget`], whose credentials never show in
//! `Debug` or logs), and the one error type of the layer ([`BackendError`]).
//! Back ends know nothing about jobs: the firmware worker in
//! `crate::service` turns their outcomes and errors into job states.
//!
//! Implementations: [`sim::SimBackend`] (in-process simulated BMCs with
//! seeded latency and fault injection) and [`redfish::RedfishBackend`]
//! (real BMCs through the Redfish client of `crate::redfish`); the trait is
//! shaped after that client (reset, power state, inventory, update with task
//! polling, leak detectors) so that adapter stays small.

pub mod redfish;
pub mod sim;

use std::fmt;

use async_trait::async_trait;

use crate::job::JobError;
pub use crate::redfish::{DetectorState, DeviceInfo, LeakDetector};

/// A power action a back end carries out (the reference's `PowerOperation`
/// without `UNSPECIFIED`, and Redfish `ResetType`'s vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PowerAction {
    Off,
    On,
    Reset,
    ForceOff,
    ForceOn,
    GracefulShutdown,
    GracefulRestart,
    ForceRestart,
}

impl PowerAction {
    /// The power state a node settles in after the action.
    pub fn resulting_state(self) -> PowerState {
        match self {
            PowerAction::Off | PowerAction::ForceOff | PowerAction::GracefulShutdown => {
                PowerState::Off
            }
            PowerAction::On
            | PowerAction::ForceOn
            | PowerAction::Reset
            | PowerAction::GracefulRestart
            | PowerAction::ForceRestart => PowerState::On,
        }
    }

    /// Lower-case name for logs and the sim call log.
    pub fn as_str(self) -> &'static str {
        match self {
            PowerAction::Off => "off",
            PowerAction::On => "on",
            PowerAction::Reset => "reset",
            PowerAction::ForceOff => "force_off",
            PowerAction::ForceOn => "force_on",
            PowerAction::GracefulShutdown => "graceful_shutdown",
            PowerAction::GracefulRestart => "graceful_restart",
            PowerAction::ForceRestart => "force_restart",
        }
    }
}

/// What a node is in its rack, from its reference `NodeType` number: the
/// cold reboot and the sim's rack power model treat the kinds differently
/// (power shelves feed the rack; compute and switch trays are fed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeKind {
    Compute,
    PowerShelf,
    Switch,
}

impl NodeKind {
    /// The kind of a `NodeType` number; `None` for unspecified or unknown.
    pub fn of(node_type: i32) -> Option<NodeKind> {
        use rackflow_api::rack_manager::NodeType as T;
        match T::try_from(node_type).ok()? {
            T::ComputeGb200Nvidia
            | T::ComputeGb300Nvidia
            | T::ComputeGb300Lenovo
            | T::ComputeVrnvl72Nvidia => Some(NodeKind::Compute),
            T::PowershelfGb200Liteon
            | T::PowershelfGb200Delta
            | T::PowershelfGb300Liteon
            | T::PowershelfGb300Delta => Some(NodeKind::PowerShelf),
            T::SwitchGb200Nvidia | T::SwitchGb300Nvidia | T::SwitchVrnvl72Nvidia => {
                Some(NodeKind::Switch)
            }
            T::Unspecified => None,
        }
    }
}

/// A node's power state as its BMC reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PowerState {
    On,
    Off,
    Unknown,
}

impl PowerState {
    /// The wire string of `GetPowerStateResponse.pstate` (spec §2.2).
    pub fn pstate(self) -> &'static str {
        match self {
            PowerState::On => "ON",
            PowerState::Off => "OFF",
            PowerState::Unknown => "UNKNOWN",
        }
    }
}

/// A secret string: shown as `[REDACTED]` by `Debug` and `Display`, so it
/// cannot reach a log line by accident.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The plain value, for the one place that sends it to a BMC.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[REDACTED]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[REDACTED]")
    }
}

/// Username and password of a BMC.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BmcCredentials {
    pub username: String,
    pub password: Secret,
}

/// Where a node's BMC answers. A port of 0 on the wire is normalised to 443
/// before it gets here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BmcEndpoint {
    pub address: String,
    pub port: u16,
    pub mac_address: String,
    pub credentials: BmcCredentials,
}

/// The node a back-end call acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTarget {
    pub rack_id: String,
    pub node_id: String,
    /// The reference's `NodeType` number (0 = unspecified).
    pub node_type: i32,
    pub bmc: BmcEndpoint,
}

/// One firmware component as the BMC inventories it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirmwareComponent {
    pub name: String,
    pub version: String,
    pub updateable: bool,
    /// The UpdateService target URI (or logical name) that updates it.
    pub target: String,
    pub health: String,
}

/// Label of a firmware image target that names no component: the package
/// decides what it updates.
pub const PACKAGE_DERIVED: &str = "package-derived";

/// One firmware image to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirmwareImage {
    /// The component label (`target` of the request, or "package-derived").
    pub target: String,
    /// The resolved image file, inside the configured firmware directory.
    pub path: std::path::PathBuf,
    /// Allow a downgrade.
    pub force: bool,
}

/// Progress of a firmware update, reported while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirmwareProgress {
    /// The BMC's task id, once the update was accepted as a task.
    pub task_id: Option<String>,
    pub percent: Option<u8>,
    pub message: String,
}

/// How a firmware update ended when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FirmwareOutcome {
    /// Applied; `summary` is the BMC's closing message.
    Completed {
        task_id: Option<String>,
        summary: String,
    },
    /// Not applied because it was not needed (e.g. already current).
    Skipped { reason: String },
}

/// Receives progress reports of one update.
pub type ProgressSink<'a> = &'a (dyn Fn(FirmwareProgress) + Send + Sync);

/// Everything a back-end call can fail with. Messages never contain
/// credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The BMC could not be reached (connection refused, DNS, TLS).
    #[error("BMC unreachable: {0}")]
    Unreachable(String),
    #[error("BMC rejected the credentials")]
    Unauthenticated,
    /// The target (component, system, URI) does not exist on the BMC.
    #[error("target not found: {0}")]
    TargetNotFound(String),
    /// The BMC answered with an error.
    #[error("BMC error: {0}")]
    Rejected(String),
    /// The BMC answered with something that is not what the API promises.
    #[error("invalid BMC response: {0}")]
    InvalidResponse(String),
    /// A firmware task ended in a failed state.
    #[error("firmware task failed: {0}")]
    TaskFailed(String),
    #[error("timed out: {0}")]
    Timeout(String),
    /// A precondition of the operation does not hold (e.g. a downgrade
    /// without force).
    #[error("precondition failed: {0}")]
    Precondition(String),
    /// This back end does not implement the operation.
    #[error("{0} is not supported by this back end")]
    Unsupported(&'static str),
}

impl BackendError {
    /// The job error a failed job records for this cause (spec §1.4, §3.3).
    pub fn job_error(&self) -> JobError {
        match self {
            BackendError::Unreachable(_) | BackendError::Rejected(_) => JobError::ClientError,
            BackendError::Unauthenticated => JobError::Unauthenticated,
            BackendError::TargetNotFound(_) => JobError::TargetNotFound,
            BackendError::InvalidResponse(_) => JobError::InvalidResponse,
            BackendError::TaskFailed(_) => JobError::Other,
            BackendError::Timeout(_) => JobError::Timeout,
            BackendError::Precondition(_) => JobError::FailedPrecondition,
            BackendError::Unsupported(_) => JobError::Internal,
        }
    }

    /// True when the update was accepted and then failed while being
    /// polled (phase `poll` rather than `update`, spec §3.3).
    pub fn is_poll_failure(&self) -> bool {
        matches!(self, BackendError::TaskFailed(_) | BackendError::Timeout(_))
    }
}

/// A node back end: the only way the rack manager touches hardware.
///
/// Object-safe (`Arc<dyn NodeBackend>`); every call gets the full target so a
/// back end may keep no per-node state (the reference is stateless with
/// respect to inventory). Calls may take long: callers bound them with
/// timeouts and cancellation, so implementations must be cancel-safe (a
/// dropped call leaves no half-applied state behind that a retry trips on).
#[async_trait]
pub trait NodeBackend: Send + Sync + fmt::Debug {
    /// Back-end name for logs (`sim`, `redfish`).
    fn kind(&self) -> &'static str;

    /// Carries out a power action (Redfish `ComputerSystem.Reset`).
    async fn set_power(&self, node: &NodeTarget, action: PowerAction) -> Result<(), BackendError>;

    /// Reads the power state (Redfish `ComputerSystem.PowerState`).
    async fn power_state(&self, node: &NodeTarget) -> Result<PowerState, BackendError>;

    /// Lists the node's firmware components (Redfish `FirmwareInventory`).
    async fn firmware_inventory(
        &self,
        node: &NodeTarget,
    ) -> Result<Vec<FirmwareComponent>, BackendError>;

    /// Applies one image and returns once the update ended (Redfish
    /// `UpdateService` push, then `TaskService` polling), reporting progress
    /// through `progress` while it runs.
    async fn update_firmware(
        &self,
        node: &NodeTarget,
        image: &FirmwareImage,
        progress: ProgressSink<'_>,
    ) -> Result<FirmwareOutcome, BackendError>;

    /// Reads the node's place in its rack: chassis serial, slot and tray
    /// index (Redfish chassis resources).
    async fn device_info(&self, node: &NodeTarget) -> Result<DeviceInfo, BackendError>;

    /// Reads the node's coolant leak detectors (Redfish `LeakDetection`
    /// under each chassis' `ThermalSubsystem`); `None` when the BMC exposes
    /// no leak detection.
    async fn leak_detectors(
        &self,
        node: &NodeTarget,
    ) -> Result<Option<Vec<LeakDetector>>, BackendError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_show_in_debug_or_display() {
        let target = NodeTarget {
            rack_id: "r1".into(),
            node_id: "n1".into(),
            node_type: 1,
            bmc: BmcEndpoint {
                address: "10.0.0.1".into(),
                port: 443,
                mac_address: String::new(),
                credentials: BmcCredentials {
                    username: "admin".into(),
                    password: Secret::new("hunter2"),
                },
            },
        };
        let debug = format!("{target:?}");
        assert!(!debug.contains("hunter2"), "{debug}");
        assert!(debug.contains("[REDACTED]"), "{debug}");
        assert_eq!(Secret::new("x").to_string(), "[REDACTED]");
        assert_eq!(target.bmc.credentials.password.expose(), "hunter2");
    }

    #[test]
    fn every_node_type_has_a_kind_but_unspecified() {
        use rackflow_api::rack_manager::NodeType;
        assert_eq!(NodeKind::of(0), None);
        assert_eq!(NodeKind::of(99), None);
        for n in 1..=11 {
            let ty = NodeType::try_from(n).unwrap();
            let kind = NodeKind::of(n).unwrap();
            let name = ty.as_str_name();
            let expected = if name.starts_with("COMPUTE") {
                NodeKind::Compute
            } else if name.starts_with("POWERSHELF") {
                NodeKind::PowerShelf
            } else {
                NodeKind::Switch
            };
            assert_eq!(kind, expected, "{name}");
        }
    }

    #[test]
    fn actions_settle_in_the_expected_state() {
        use PowerAction::*;
        for action in [Off, ForceOff, GracefulShutdown] {
            assert_eq!(action.resulting_state(), PowerState::Off);
        }
        for action in [On, ForceOn, Reset, GracefulRestart, ForceRestart] {
            assert_eq!(action.resulting_state(), PowerState::On);
        }
        assert_eq!(PowerState::Unknown.pstate(), "UNKNOWN");
    }

    #[test]
    fn errors_map_to_job_errors_and_phases() {
        assert_eq!(
            BackendError::Unauthenticated.job_error(),
            JobError::Unauthenticated
        );
        assert_eq!(
            BackendError::Precondition("downgrade".into()).job_error(),
            JobError::FailedPrecondition
        );
        assert!(BackendError::TaskFailed("x".into()).is_poll_failure());
        assert!(!BackendError::Rejected("x".into()).is_poll_failure());
        assert_eq!(
            BackendError::TargetNotFound("/x".into()).job_error(),
            JobError::TargetNotFound
        );
    }
}
