//! The `redfish` node back end (decision M2): [`NodeBackend`] over the
//! Redfish client of `crate::redfish`.
//!
//! Owns the adapter only — the `[nodes.redfish]` settings
//! ([`RedfishBackendConfig`]), one cached [`RedfishNode`] per registered
//! node, and the translations between the two vocabularies: power actions
//! to Redfish `ResetType`s, Redfish power states and inventory entries to
//! the back-end types, firmware progress to [`FirmwareProgress`], and
//! [`RedfishError`] to [`BackendError`] (keeping the BMC's own message).
//! Everything that speaks HTTP lives in `crate::redfish`.
//!
//! Per node, the BMC is `{scheme}://{address}:{port}` with the node's
//! registered address and port (port 0 was already normalised to 443) and
//! its registered user/password as HTTP basic auth (none when the node was
//! registered without credentials).
//!
//! Behaviour worth knowing:
//! * `set_power` sends `ComputerSystem.Reset` and then polls `PowerState`
//!   until the node settled (`power_poll_interval_ms`, at most
//!   `power_wait_timeout_seconds`): BMCs apply resets asynchronously, and
//!   `SetPowerState` answering SUCCESS must mean the node is in that state.
//! * Firmware is pushed as a multipart upload of the local image file (the
//!   rack manager holds images on disk; it serves no URL a BMC could fetch
//!   for a SimpleUpdate). A request target names a firmware-inventory entry
//!   by `Id` or `Name` (or is an inventory URI); `package-derived` lets the
//!   BMC decide from the image. `force` is not sent: Redfish has no generic
//!   downgrade guard, the BMC's own policy applies, and no update is ever
//!   reported `Skipped`.
//! * Clients are cached per (rack, node) and rebuilt when the node's
//!   endpoint or credentials change, so the connection pool and the
//!   discovered system URI are reused across calls. Building a client does
//!   no I/O; the cache is a std mutex held only to look up or insert.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{
    BackendError, BmcEndpoint, DeviceInfo, FirmwareComponent, FirmwareImage, FirmwareOutcome,
    FirmwareProgress, LeakDetector, NodeBackend, NodeTarget, PowerAction, PowerState, ProgressSink,
};
use crate::redfish::{
    self, Credentials, RedfishClient, RedfishConfig, RedfishError, RedfishNode, ResetType,
    TaskStatus, TransportKind,
};

// The request target that lets the BMC pick components from the image
// (the service's label for a target-less request).
use super::PACKAGE_DERIVED;
/// Cached clients beyond which the cache starts over (ephemeral nodes of
/// batch requests would otherwise grow it without bound).
const CACHE_CAPACITY: usize = 4096;

/// How BMCs are addressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scheme {
    Https,
    /// Plain HTTP: emulators and lab BMCs only.
    Http,
}

impl Scheme {
    fn as_str(self) -> &'static str {
        match self {
            Scheme::Https => "https",
            Scheme::Http => "http",
        }
    }
}

/// Settings of the `redfish` back end (`[nodes.redfish]`). Every default is
/// here (and in `docs/rms.md`, `docs/configuration.md`); the client-level
/// ones are those of [`RedfishConfig::default`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedfishBackendConfig {
    /// `https` (default) or `http`.
    pub scheme: Scheme,
    /// Verify the BMC's TLS certificate. Turning it off is an explicit
    /// choice for BMCs with self-signed certificates.
    pub verify_tls: bool,
    /// Extra trusted root certificate (PEM file) for BMCs with a private CA.
    pub ca_cert_file: Option<PathBuf>,
    /// Refuse a reset type the system does not list as allowable.
    pub check_allowable_values: bool,
    pub connect_timeout_seconds: u64,
    /// Limit for one JSON request.
    pub request_timeout_seconds: u64,
    /// Limit for one multipart firmware upload.
    pub upload_timeout_seconds: u64,
    /// Pause between two reads of a firmware task.
    pub task_poll_interval_ms: u64,
    /// Limit for a firmware task to finish (the job's
    /// `workflows.firmware_task_timeout_seconds` also bounds it).
    pub task_timeout_seconds: u64,
    /// How long task-status reads may fail transiently while a BMC flashes.
    pub task_status_error_grace_seconds: u64,
    /// Pause between two `PowerState` reads after a reset.
    pub power_poll_interval_ms: u64,
    /// Limit for a node to settle after a reset. Keep it below
    /// `workflows.bmc_call_timeout_seconds` so the error names the state
    /// last seen instead of a bare call timeout.
    pub power_wait_timeout_seconds: u64,
}

impl Default for RedfishBackendConfig {
    fn default() -> Self {
        let client = RedfishConfig::default();
        RedfishBackendConfig {
            scheme: Scheme::Https,
            verify_tls: client.verify_tls,
            ca_cert_file: None,
            check_allowable_values: client.check_allowable_values,
            connect_timeout_seconds: client.connect_timeout.as_secs(),
            request_timeout_seconds: client.request_timeout.as_secs(),
            upload_timeout_seconds: client.upload_timeout.as_secs(),
            task_poll_interval_ms: millis(client.task_poll_interval),
            task_timeout_seconds: client.task_timeout.as_secs(),
            task_status_error_grace_seconds: client.task_status_error_grace.as_secs(),
            power_poll_interval_ms: 2000,
            power_wait_timeout_seconds: 50,
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The back end could not be built from its settings.
#[derive(Debug, thiserror::Error)]
pub enum RedfishBackendError {
    #[error("read CA certificate {path}: {source}")]
    CaCert {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Client(#[from] RedfishError),
}

/// One cached node client and the endpoint it was built for.
struct Cached {
    endpoint: BmcEndpoint,
    node: Arc<RedfishNode>,
}

/// [`NodeBackend`] over Redfish.
pub struct RedfishBackend {
    config: RedfishBackendConfig,
    client_config: RedfishConfig,
    nodes: Mutex<HashMap<(String, String), Cached>>,
}

impl fmt::Debug for RedfishBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cached = self
            .nodes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        f.debug_struct("RedfishBackend")
            .field("config", &self.config)
            .field("cached_nodes", &cached)
            .finish()
    }
}

impl RedfishBackend {
    /// Reads the CA file (if any) and checks that a client can be built.
    pub fn new(config: RedfishBackendConfig) -> Result<Self, RedfishBackendError> {
        let ca_cert_pem = match &config.ca_cert_file {
            Some(path) => {
                Some(
                    std::fs::read(path).map_err(|source| RedfishBackendError::CaCert {
                        path: path.clone(),
                        source,
                    })?,
                )
            }
            None => None,
        };
        let client_config = RedfishConfig {
            connect_timeout: Duration::from_secs(config.connect_timeout_seconds),
            request_timeout: Duration::from_secs(config.request_timeout_seconds),
            upload_timeout: Duration::from_secs(config.upload_timeout_seconds),
            verify_tls: config.verify_tls,
            ca_cert_pem,
            check_allowable_values: config.check_allowable_values,
            task_poll_interval: Duration::from_millis(config.task_poll_interval_ms),
            task_timeout: Duration::from_secs(config.task_timeout_seconds),
            task_status_error_grace: Duration::from_secs(config.task_status_error_grace_seconds),
        };
        // Fail at startup, not on the first job, on a bad CA certificate.
        RedfishClient::new("https://127.0.0.1", None, client_config.clone())?;
        Ok(RedfishBackend {
            config,
            client_config,
            nodes: Mutex::new(HashMap::new()),
        })
    }

    /// The node's client, from the cache when its endpoint is unchanged.
    fn node(&self, target: &NodeTarget) -> Result<Arc<RedfishNode>, BackendError> {
        let key = (target.rack_id.clone(), target.node_id.clone());
        let mut nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(cached) = nodes.get(&key)
            && cached.endpoint == target.bmc
        {
            return Ok(Arc::clone(&cached.node));
        }
        let client = RedfishClient::new(
            &base_url(self.config.scheme, &target.bmc),
            credentials_of(&target.bmc),
            self.client_config.clone(),
        )
        .map_err(backend_error)?;
        let node = Arc::new(RedfishNode::new(client));
        if nodes.len() >= CACHE_CAPACITY && !nodes.contains_key(&key) {
            nodes.clear();
        }
        nodes.insert(
            key,
            Cached {
                endpoint: target.bmc.clone(),
                node: Arc::clone(&node),
            },
        );
        Ok(node)
    }

    /// The `Targets` of an update: none for a package-derived image, the
    /// URI itself, else the inventory entry whose `Id` or `Name` matches.
    async fn update_targets(
        &self,
        node: &RedfishNode,
        target: &str,
    ) -> Result<Vec<String>, BackendError> {
        if target.is_empty() || target == PACKAGE_DERIVED {
            return Ok(Vec::new());
        }
        if target.starts_with('/') {
            return Ok(vec![target.to_owned()]);
        }
        let inventory = node.firmware_inventory().await.map_err(backend_error)?;
        resolve_target(&inventory, target).map(|uri| vec![uri])
    }
}

/// `{scheme}://{address}:{port}`, bracketing an IPv6 address.
pub fn base_url(scheme: Scheme, bmc: &BmcEndpoint) -> String {
    let host = bmc.address.trim();
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    format!("{}://{host}:{}", scheme.as_str(), bmc.port)
}

fn credentials_of(bmc: &BmcEndpoint) -> Option<Credentials> {
    let c = &bmc.credentials;
    if c.username.is_empty() && c.password.expose().is_empty() {
        None
    } else {
        Some(Credentials::new(
            c.username.clone(),
            c.password.expose().to_owned(),
        ))
    }
}

/// The inventory URI a named target stands for.
fn resolve_target(
    inventory: &[redfish::FirmwareComponent],
    target: &str,
) -> Result<String, BackendError> {
    inventory
        .iter()
        .find(|c| c.id == target || c.name == target)
        .or_else(|| {
            inventory
                .iter()
                .find(|c| c.id.eq_ignore_ascii_case(target) || c.name.eq_ignore_ascii_case(target))
        })
        .map(|c| c.uri.clone())
        .ok_or_else(|| {
            let known: Vec<&str> = inventory.iter().map(|c| c.id.as_str()).collect();
            BackendError::TargetNotFound(format!(
                "firmware component {target} is not in the BMC's inventory [{}]",
                known.join(", ")
            ))
        })
}

/// The Redfish reset that carries out a power action. `Off` is a
/// `ForceOff` (a rack manager's "off" must not depend on the host OS) and
/// `Reset` a `ForceRestart`.
pub fn reset_type_of(action: PowerAction) -> ResetType {
    match action {
        PowerAction::On => ResetType::On,
        PowerAction::ForceOn => ResetType::ForceOn,
        PowerAction::Off | PowerAction::ForceOff => ResetType::ForceOff,
        PowerAction::GracefulShutdown => ResetType::GracefulShutdown,
        PowerAction::GracefulRestart => ResetType::GracefulRestart,
        PowerAction::Reset | PowerAction::ForceRestart => ResetType::ForceRestart,
    }
}

/// A Redfish `PowerState` as the rack manager reports it: transitions and
/// anything else are `Unknown`.
pub fn power_state_of(state: &redfish::PowerState) -> PowerState {
    match state {
        redfish::PowerState::On => PowerState::On,
        redfish::PowerState::Off => PowerState::Off,
        _ => PowerState::Unknown,
    }
}

fn component_of(c: redfish::FirmwareComponent) -> FirmwareComponent {
    FirmwareComponent {
        name: c.id,
        version: c.version,
        updateable: c.updateable.unwrap_or(false),
        target: c.uri,
        health: String::new(),
    }
}

fn progress_of(status: &TaskStatus) -> FirmwareProgress {
    let message = status.message();
    FirmwareProgress {
        task_id: Some(status.id.clone()),
        percent: status.percent,
        message: if message.is_empty() {
            status.state.to_string()
        } else {
            format!("{}: {message}", status.state)
        },
    }
}

/// The back-end error of a Redfish failure. The text is the client's, which
/// carries the BMC's own message and never credentials (URLs with userinfo
/// are refused by the client).
pub fn backend_error(e: RedfishError) -> BackendError {
    let text = e.to_string();
    match &e {
        RedfishError::Transport {
            kind: TransportKind::Timeout,
            ..
        }
        | RedfishError::PowerTimeout { .. }
        | RedfishError::TaskTimeout { .. } => BackendError::Timeout(text),
        RedfishError::Transport { .. } => BackendError::Unreachable(text),
        RedfishError::Unauthorized { .. } => {
            // The variant has no room for it: keep the BMC's words in the log.
            tracing::warn!(error = %text, "BMC refused the credentials");
            BackendError::Unauthenticated
        }
        RedfishError::SystemNotFound { .. } | RedfishError::NotFound { .. } => {
            BackendError::TargetNotFound(text)
        }
        RedfishError::Http { .. } => BackendError::Rejected(text),
        RedfishError::InvalidResponse { .. }
        | RedfishError::NoSystem { .. }
        | RedfishError::AmbiguousSystem { .. } => BackendError::InvalidResponse(text),
        RedfishError::TaskFailed { .. } => BackendError::TaskFailed(text),
        RedfishError::InvalidEndpoint { .. }
        | RedfishError::ClientBuild(_)
        | RedfishError::ResetTypeUnsupported { .. }
        | RedfishError::ResetTypeNotAllowed { .. }
        | RedfishError::NotAdvertised { .. }
        | RedfishError::NoPowerTarget(_)
        | RedfishError::UpdateUnsupported(_)
        | RedfishError::ImageRead { .. } => BackendError::Precondition(text),
    }
}

#[async_trait]
impl NodeBackend for RedfishBackend {
    fn kind(&self) -> &'static str {
        "redfish"
    }

    async fn set_power(&self, node: &NodeTarget, action: PowerAction) -> Result<(), BackendError> {
        let bmc = self.node(node)?;
        let reset = reset_type_of(action);
        let wait = bmc
            .set_power_and_wait(
                &reset,
                Duration::from_secs(self.config.power_wait_timeout_seconds),
                Duration::from_millis(self.config.power_poll_interval_ms),
            )
            .await
            .map_err(backend_error)?;
        tracing::info!(
            rack = %node.rack_id,
            node = %node.node_id,
            reset_type = %reset,
            reset_sent = wait.reset_sent,
            polls = wait.polls,
            elapsed_ms = millis(wait.elapsed),
            "redfish power settled"
        );
        Ok(())
    }

    async fn power_state(&self, node: &NodeTarget) -> Result<PowerState, BackendError> {
        let state = self
            .node(node)?
            .power_state()
            .await
            .map_err(backend_error)?;
        Ok(power_state_of(&state))
    }

    async fn firmware_inventory(
        &self,
        node: &NodeTarget,
    ) -> Result<Vec<FirmwareComponent>, BackendError> {
        let inventory = self
            .node(node)?
            .firmware_inventory()
            .await
            .map_err(backend_error)?;
        Ok(inventory.into_iter().map(component_of).collect())
    }

    async fn device_info(&self, node: &NodeTarget) -> Result<DeviceInfo, BackendError> {
        self.node(node)?.device_info().await.map_err(backend_error)
    }

    async fn leak_detectors(
        &self,
        node: &NodeTarget,
    ) -> Result<Option<Vec<LeakDetector>>, BackendError> {
        self.node(node)?
            .leak_detectors()
            .await
            .map_err(backend_error)
    }

    async fn update_firmware(
        &self,
        node: &NodeTarget,
        image: &FirmwareImage,
        progress: ProgressSink<'_>,
    ) -> Result<FirmwareOutcome, BackendError> {
        let bmc = self.node(node)?;
        let targets = self.update_targets(&bmc, &image.target).await?;
        let request = redfish::FirmwareImage {
            file: Some(image.path.clone()),
            targets,
            ..redfish::FirmwareImage::default()
        };
        let report = |status: &TaskStatus| progress(progress_of(status));
        let outcome = bmc
            .update_firmware(&request, &report)
            .await
            .map_err(backend_error)?;
        let (task_id, summary) = match outcome.task {
            Some(task) => {
                let message = task.message();
                let summary = if message.is_empty() {
                    format!("task {} {}", task.id, task.state)
                } else {
                    message
                };
                (Some(task.id), summary)
            }
            None => (None, "the BMC applied the update synchronously".to_owned()),
        };
        Ok(FirmwareOutcome::Completed { task_id, summary })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{BmcCredentials, Secret};
    use crate::job::JobError;
    use crate::redfish::TaskState;

    fn endpoint(address: &str, user: &str, password: &str) -> BmcEndpoint {
        BmcEndpoint {
            address: address.into(),
            port: 8443,
            mac_address: String::new(),
            credentials: BmcCredentials {
                username: user.into(),
                password: Secret::new(password),
            },
        }
    }

    fn target(password: &str) -> NodeTarget {
        NodeTarget {
            rack_id: "r1".into(),
            node_id: "n1".into(),
            node_type: 0,
            bmc: endpoint("10.0.0.7", "admin", password),
        }
    }

    #[test]
    fn defaults_follow_the_client_and_verify_tls() {
        let c = RedfishBackendConfig::default();
        assert_eq!(c.scheme, Scheme::Https);
        assert!(c.verify_tls && c.check_allowable_values);
        assert_eq!(c.task_poll_interval_ms, 5000);
        assert_eq!(c.task_timeout_seconds, 10_800);
        assert_eq!(c.task_status_error_grace_seconds, 900);
        assert_eq!(c.connect_timeout_seconds, 10);
        assert_eq!(c.request_timeout_seconds, 60);
        assert_eq!(c.upload_timeout_seconds, 1800);
        assert_eq!(c.power_poll_interval_ms, 2000);
        assert_eq!(c.power_wait_timeout_seconds, 50);
        assert!(
            toml::from_str::<RedfishBackendConfig>("verfy_tls = false").is_err(),
            "unknown keys are refused"
        );
        let parsed: RedfishBackendConfig =
            toml::from_str("scheme = \"http\"\npower_poll_interval_ms = 100").unwrap();
        assert_eq!(parsed.scheme, Scheme::Http);
        assert_eq!(parsed.power_poll_interval_ms, 100);
    }

    #[test]
    fn base_urls_use_scheme_address_and_port() {
        assert_eq!(
            base_url(Scheme::Https, &endpoint("10.0.0.7", "", "")),
            "https://10.0.0.7:8443"
        );
        assert_eq!(
            base_url(Scheme::Http, &endpoint("bmc-1.lab", "", "")),
            "http://bmc-1.lab:8443"
        );
        assert_eq!(
            base_url(Scheme::Https, &endpoint("fd00::7", "", "")),
            "https://[fd00::7]:8443"
        );
    }

    #[test]
    fn credentials_only_when_registered() {
        assert!(credentials_of(&endpoint("h", "", "")).is_none());
        let c = credentials_of(&endpoint("h", "admin", "pw")).unwrap();
        assert_eq!(c.username(), "admin");
    }

    #[test]
    fn clients_are_cached_per_node_and_rebuilt_on_new_credentials() {
        let backend = RedfishBackend::new(RedfishBackendConfig::default()).unwrap();
        let a = backend.node(&target("pw-Alpha-1")).unwrap();
        let b = backend.node(&target("pw-Alpha-1")).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "same endpoint: cached client");
        let c = backend.node(&target("pw-Bravo-2")).unwrap();
        assert!(!Arc::ptr_eq(&a, &c), "new password: new client");
        let shown = format!("{backend:?} {c:?}");
        assert!(
            !shown.contains("pw-Bravo-2") && !shown.contains("pw-Alpha-1"),
            "{shown}"
        );
        assert!(shown.contains("cached_nodes: 1"), "{shown}");
    }

    #[test]
    fn a_missing_ca_file_fails_at_startup() {
        let config = RedfishBackendConfig {
            ca_cert_file: Some("/nonexistent/ca.pem".into()),
            ..RedfishBackendConfig::default()
        };
        let err = RedfishBackend::new(config).err().map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.starts_with("read CA certificate /nonexistent/ca.pem")),
            "{err:?}"
        );
    }

    #[test]
    fn every_power_action_maps_to_a_reset_that_settles_where_the_action_does() {
        use PowerAction::*;
        for action in [
            Off,
            On,
            Reset,
            ForceOff,
            ForceOn,
            GracefulShutdown,
            GracefulRestart,
            ForceRestart,
        ] {
            let settles = reset_type_of(action)
                .settles_in()
                .map(|s| power_state_of(&s));
            assert_eq!(settles, Some(action.resulting_state()), "{action:?}");
        }
        assert_eq!(reset_type_of(Off), ResetType::ForceOff);
        assert_eq!(reset_type_of(Reset), ResetType::ForceRestart);
    }

    #[test]
    fn only_on_and_off_are_known_power_states() {
        assert_eq!(power_state_of(&redfish::PowerState::On), PowerState::On);
        assert_eq!(power_state_of(&redfish::PowerState::Off), PowerState::Off);
        for s in [
            redfish::PowerState::PoweringOn,
            redfish::PowerState::PoweringOff,
            redfish::PowerState::Paused,
            redfish::PowerState::Unknown("Weird".into()),
        ] {
            assert_eq!(power_state_of(&s), PowerState::Unknown, "{s:?}");
        }
    }

    fn inventory() -> Vec<redfish::FirmwareComponent> {
        ["BMC", "BIOS"]
            .into_iter()
            .map(|id| redfish::FirmwareComponent {
                uri: format!("/redfish/v1/UpdateService/FirmwareInventory/{id}"),
                id: id.into(),
                name: format!("{id} firmware"),
                version: "1.0.0".into(),
                updateable: Some(true),
            })
            .collect()
    }

    #[test]
    fn targets_resolve_by_id_or_name_and_unknown_ones_are_not_found() {
        let inv = inventory();
        assert_eq!(
            resolve_target(&inv, "BIOS").unwrap(),
            "/redfish/v1/UpdateService/FirmwareInventory/BIOS"
        );
        assert_eq!(
            resolve_target(&inv, "bmc firmware").unwrap(),
            "/redfish/v1/UpdateService/FirmwareInventory/BMC"
        );
        let err = resolve_target(&inv, "CPLD").unwrap_err();
        assert_eq!(
            err,
            BackendError::TargetNotFound(
                "firmware component CPLD is not in the BMC's inventory [BMC, BIOS]".into()
            )
        );
    }

    #[test]
    fn inventory_and_progress_translate() {
        let c = component_of(inventory().remove(0));
        assert_eq!((c.name.as_str(), c.version.as_str()), ("BMC", "1.0.0"));
        assert!(c.updateable);
        assert_eq!(c.target, "/redfish/v1/UpdateService/FirmwareInventory/BMC");
        let status = TaskStatus {
            uri: "/t/3".into(),
            id: "3".into(),
            state: TaskState::Running,
            percent: Some(40),
            health: Some("OK".into()),
            messages: vec!["flashing".into()],
        };
        let p = progress_of(&status);
        assert_eq!(p.task_id.as_deref(), Some("3"));
        assert_eq!(p.percent, Some(40));
        assert_eq!(p.message, "Running: flashing");
    }

    #[test]
    fn errors_keep_the_bmc_message_and_their_job_class() {
        let failed = backend_error(RedfishError::TaskFailed {
            task: "/redfish/v1/TaskService/Tasks/1".into(),
            state: TaskState::Exception,
            message: "flash chip on fire".into(),
        });
        assert!(matches!(&failed, BackendError::TaskFailed(m) if m.contains("flash chip on fire")));
        assert!(failed.is_poll_failure());
        let cases = [
            (
                RedfishError::Http {
                    method: "POST",
                    uri: "/x".into(),
                    status: 400,
                    message: "bad image".into(),
                },
                JobError::ClientError,
                "bad image",
            ),
            (
                RedfishError::Transport {
                    method: "GET",
                    uri: "/".into(),
                    kind: TransportKind::Connect,
                    message: "connection refused".into(),
                },
                JobError::ClientError,
                "connection refused",
            ),
            (
                RedfishError::Transport {
                    method: "GET",
                    uri: "/".into(),
                    kind: TransportKind::Timeout,
                    message: "timed out".into(),
                },
                JobError::Timeout,
                "timed out",
            ),
            (
                RedfishError::NotFound {
                    method: "GET",
                    uri: "/redfish/v1/Systems/9".into(),
                    message: "no such system".into(),
                },
                JobError::TargetNotFound,
                "no such system",
            ),
            (
                RedfishError::UpdateUnsupported("no multipart push".into()),
                JobError::FailedPrecondition,
                "no multipart push",
            ),
            (
                RedfishError::NoSystem { uri: "/s".into() },
                JobError::InvalidResponse,
                "no computer system",
            ),
        ];
        for (error, job_error, words) in cases {
            let mapped = backend_error(error);
            assert_eq!(mapped.job_error(), job_error, "{mapped:?}");
            assert!(mapped.to_string().contains(words), "{mapped}");
        }
        assert_eq!(
            backend_error(RedfishError::Unauthorized {
                method: "GET",
                uri: "/".into(),
                status: 401,
                message: String::new(),
            }),
            BackendError::Unauthenticated
        );
    }
}
