//! Switch back ends (issue 36): the device boundary for NVLink switch trays,
//! beside the BMC one ([`crate::backend`]). A switch tray is managed
//! through its OS's REST API (NVUE) on its host endpoint, not through its
//! BMC: system images (NVOS) are installed and activated there.
//!
//! This module owns the [`SwitchBackend`] trait, the target a call acts on
//! ([`SwitchTarget`], credentials never in `Debug` or logs) and the one
//! error type of the layer ([`SwitchError`]). Implementations: [`sim`]
//! (in-process simulated switches, latencies and faults injectable).

pub mod sim;

use std::fmt;

use async_trait::async_trait;
use serde::Serialize;

use crate::backend::BmcCredentials;
pub use crate::backend::Secret;
use crate::job::JobError;

/// Where a switch's management API answers (its host endpoint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchEndpoint {
    pub address: String,
    pub port: u16,
    pub credentials: BmcCredentials,
}

/// The switch a call acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchTarget {
    pub rack_id: String,
    pub node_id: String,
    /// The reference's `NodeType` number.
    pub node_type: i32,
    pub host: SwitchEndpoint,
}

/// The system images of a switch: what runs, what boots next, what is
/// staged (the shape `ListSwitchSystemImages` answers in `images_json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SystemImages {
    /// Build running now.
    pub current: String,
    /// Build that boots next.
    pub next: String,
    /// Build per partition (`partition1`, `partition2`).
    pub partitions: std::collections::BTreeMap<String, String>,
    /// Image files staged on the switch.
    pub files: Vec<String>,
}

/// Everything a switch call can fail with; messages never carry secrets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SwitchError {
    #[error("switch unreachable: {0}")]
    Unreachable(String),
    #[error("switch rejected the credentials")]
    Unauthenticated,
    #[error("switch error: {0}")]
    Rejected(String),
    #[error("invalid switch response: {0}")]
    InvalidResponse(String),
    #[error("switch action failed: {0}")]
    ActionFailed(String),
    #[error("timed out: {0}")]
    Timeout(String),
}

impl SwitchError {
    /// The job error a failed job records.
    pub fn job_error(&self) -> JobError {
        match self {
            SwitchError::Unreachable(_) | SwitchError::Rejected(_) => JobError::ClientError,
            SwitchError::Unauthenticated => JobError::Unauthenticated,
            SwitchError::InvalidResponse(_) => JobError::InvalidResponse,
            SwitchError::ActionFailed(_) => JobError::Other,
            SwitchError::Timeout(_) => JobError::Timeout,
        }
    }
}

/// A switch back end. Object-safe; every call gets the full target.
#[async_trait]
pub trait SwitchBackend: Send + Sync + fmt::Debug {
    /// Back-end name for logs (`sim`, `nvue`).
    fn kind(&self) -> &'static str;

    /// The switch's system images.
    async fn system_images(&self, switch: &SwitchTarget) -> Result<SystemImages, SwitchError>;

    /// Stages `image` (bytes of the file named `filename`), installs it on
    /// the standby partition, reboots into it and waits for the API to come
    /// back; returns the build now running. `progress` gets each step.
    async fn install_system_image(
        &self,
        switch: &SwitchTarget,
        filename: &str,
        image: &[u8],
        progress: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<String, SwitchError>;

    /// Sets `username`'s password (logging in with the target's current
    /// credentials).
    async fn set_password(
        &self,
        switch: &SwitchTarget,
        username: &str,
        password: &Secret,
    ) -> Result<(), SwitchError>;

    /// Turns mTLS off for `services` (the wire `SwitchService` names).
    async fn disable_mtls(
        &self,
        switch: &SwitchTarget,
        services: &[String],
    ) -> Result<(), SwitchError>;

    /// Installs a certificate for `domain` on `services` and turns their
    /// mTLS on; with `test_hello`, checks each service answers with it.
    async fn install_certificate(
        &self,
        switch: &SwitchTarget,
        services: &[String],
        domain: &str,
        test_hello: bool,
    ) -> Result<InstalledCertificate, SwitchError>;

    /// The switch's firmware components.
    async fn list_firmware(
        &self,
        switch: &SwitchTarget,
    ) -> Result<Vec<SwitchFirmwareEntry>, SwitchError>;

    /// Transfers a firmware file for `component` to the switch (staged,
    /// not installed).
    async fn push_firmware(
        &self,
        switch: &SwitchTarget,
        component: &str,
        filename: &str,
        file: &[u8],
    ) -> Result<(), SwitchError>;

    /// Fresh SPDM evidence of the switch's components for `nonce`.
    async fn attestation_evidence(
        &self,
        switch: &SwitchTarget,
        nonce: &[u8],
    ) -> Result<Vec<ComponentEvidence>, SwitchError>;

    /// Resets the switch to factory defaults (`Full`) or its SDN
    /// configuration only (`Sdn`), and waits until it answers again.
    async fn factory_reset(
        &self,
        switch: &SwitchTarget,
        scope: ResetScope,
    ) -> Result<(), SwitchError>;
}

/// One firmware component of a switch (BMC, FPGA, EROT, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SwitchFirmwareEntry {
    /// Wire name (`SWITCH_FIRMWARE_COMPONENT_TYPE_*` without the prefix).
    pub component: String,
    pub version: String,
    /// Files pushed for it and not installed yet.
    pub staged_files: Vec<String>,
}

/// SPDM evidence of one component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentEvidence {
    pub component_id: String,
    pub measurements: Vec<u8>,
    pub certificate_chain: Vec<u8>,
}

/// The certificate a switch's services present after an install.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstalledCertificate {
    pub subject: String,
    /// SHA-256 of the certificate, lower-case hex.
    pub fingerprint: String,
    /// Services now presenting it with mTLS on.
    pub services: Vec<String>,
}

/// What a factory reset wipes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetScope {
    /// The whole switch OS configuration, back to factory defaults (the
    /// factory login included).
    Full,
    /// Only the SDN (scale-up fabric) configuration.
    Sdn,
}
