//! The `rms` component-manager provider: Flow drives racks through a rack
//! manager's `RackManager` gRPC API (decision C1, issue 5 item 4).
//!
//! This module owns [`RmsManager`] — power control and status, firmware
//! control and status for every component type — its settings
//! ([`RmsProviderConfig`]) and the background pollers of the firmware jobs
//! it started.
//!
//! Mapping of Flow's inventory to rack-manager nodes: a component is the
//! node `node_id = component external id` in rack `rack_id = rack external id` (else its name)
//! (the nodes must be registered with the rack manager under those ids:
//! `rackflow rms sync` / `sync_on_start`, see [`super::rms_sync`]).
//!
//! Calls:
//! * power: `SetPowerState` per component, one at a time (synchronous in
//!   the rack manager, which refuses a second power operation on a rack
//!   while one runs), bounded by `rpc_timeout`; status: `GetPowerState`.
//! * firmware: `UpdateFirmware` per component — `filename` from
//!   `firmware_file` with `{version}`, `{component_type}` and `{operation}`
//!   filled in, one target per sub-target (or the configured target) — then
//!   a background poller per job calls `GetJobStatus` every `poll_interval`
//!   until the job is terminal or `job_timeout` passed (then the update
//!   counts as failed). Job states map Queued → Queued, Running → Verifying,
//!   Completed → Completed, Failed → Failed; each change wakes the
//!   executor through [`FirmwareStatus::change_feed`]. A failed job's error
//!   code and message, and every job id, reach the task report through
//!   [`FirmwareStatus::firmware_jobs`]. The executor persists the job ids in
//!   the report; after a Flow restart it hands them back
//!   ([`FirmwareStatus::adopt_firmware_jobs`]) and the same jobs are polled
//!   to completion instead of an update being started again.
//! * installed versions: `GetNodeFirmwareInventory`, the entry of the
//!   update's single sub-target or else `version_entry` (default `BMC`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use rackflow_api::rack_manager as pb;
use rackflow_api::rack_manager::rack_manager_client::RackManagerClient;
use rackflow_domain::ComponentType;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tonic::transport::Channel;

use super::{
    ChangeFeeds, ComponentManager, ComponentRef, FirmwareControl, FirmwareJob, FirmwareRequest,
    FirmwareState, FirmwareStatus, ManagerError, PowerControl, PowerOp, PowerState, PowerStatus,
};
use crate::background::Background;

/// Settings of the provider (Flow's `[rms]` section; defaults documented in
/// `docs/configuration.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RmsProviderConfig {
    /// Rack manager gRPC address (`http://host:port`).
    pub address: String,
    /// Milliseconds to establish the connection.
    pub connect_timeout_ms: u64,
    /// Milliseconds one RPC may take (power operations included).
    pub rpc_timeout_ms: u64,
    /// Milliseconds between `GetJobStatus` polls of a firmware job.
    pub poll_interval_ms: u64,
    /// Seconds a firmware job may stay non-terminal before Flow counts it
    /// as failed.
    pub job_timeout_secs: u64,
    /// Image file name sent as `filename`, relative to the rack manager's
    /// firmware directory; `{version}`, `{component_type}` (lower case) and
    /// `{operation}` are filled in.
    pub firmware_file: String,
    /// `target` of each update when the task names no sub-targets (empty:
    /// package-derived).
    pub firmware_target: String,
    /// Ask the rack manager to activate firmware after flashing.
    pub activate: bool,
    /// The firmware-inventory entry whose version is the component's
    /// installed version when an update names no single sub-target.
    pub version_entry: String,
    /// TLS to the rack manager (`[rms.tls]`: `ca`, `cert`, `key`,
    /// `server_name`); used when `address` is `https://`.
    pub tls: rackflow_security::ClientTlsFiles,
    /// Register Flow's inventory with the rack manager when the server
    /// starts (before interrupted tasks resume); `rackflow rms sync` does
    /// the same on demand.
    pub sync_on_start: bool,
    /// BMC user name the sync registers nodes with (empty: no credentials).
    pub bmc_username: String,
    /// File whose first line is the BMC password (with `bmc_username`).
    pub bmc_password_file: Option<std::path::PathBuf>,
    /// BMC port of the registered nodes (0: the rack manager's default).
    pub bmc_port: u32,
    /// Timings of the rack manager's cold reboot (`[rms.cold_reboot]`),
    /// the AC power cycle of a rack.
    pub cold_reboot: super::rms_lifecycle::ColdRebootSettings,
}

/// Names of the settings in errors.
const TLS_KEYS: rackflow_security::tls::ClientTlsKeys = rackflow_security::tls::ClientTlsKeys {
    address: "rms.address",
    ca: "rms.tls.ca",
    cert: "rms.tls.cert",
    key: "rms.tls.key",
};

impl Default for RmsProviderConfig {
    fn default() -> Self {
        RmsProviderConfig {
            address: "http://127.0.0.1:8801".to_owned(),
            connect_timeout_ms: 5_000,
            rpc_timeout_ms: 120_000,
            poll_interval_ms: 2_000,
            job_timeout_secs: 3 * 3600,
            firmware_file: "{component_type}-{version}.fwpkg".to_owned(),
            firmware_target: String::new(),
            activate: false,
            version_entry: "BMC".to_owned(),
            tls: rackflow_security::ClientTlsFiles::default(),
            sync_on_start: false,
            bmc_username: String::new(),
            bmc_password_file: None,
            bmc_port: 0,
            cold_reboot: super::rms_lifecycle::ColdRebootSettings::default(),
        }
    }
}

/// The provider could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum RmsProviderError {
    /// The address or its TLS files cannot be used.
    #[error(transparent)]
    Endpoint(#[from] rackflow_security::SecurityError),
    /// `rms.bmc_password_file` cannot be read.
    #[error("rms.bmc_password_file {path}: {source}")]
    PasswordFile {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

impl RmsProviderConfig {
    /// The BMC login of `rackflow rms sync` / `sync_on_start`.
    pub fn bmc_login(&self) -> Result<super::rms_sync::BmcLogin, RmsProviderError> {
        let password = match &self.bmc_password_file {
            None => None,
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| {
                    RmsProviderError::PasswordFile {
                        path: path.clone(),
                        source,
                    }
                })?;
                Some(rackflow_domain::run::SecretText::new(
                    text.lines().next().unwrap_or_default().to_owned(),
                ))
            }
        };
        Ok(super::rms_sync::BmcLogin {
            username: self.bmc_username.clone(),
            password,
            port: self.bmc_port,
        })
    }
}

#[derive(Debug, Clone)]
struct TrackedJob {
    job_id: String,
    state: FirmwareState,
    /// The job's error code and message once it failed.
    error: Option<String>,
}

/// Flow's manager backed by a rack manager. Share as `Arc<RmsManager>`.
#[derive(Debug)]
pub struct RmsManager {
    client: RackManagerClient<Channel>,
    /// The connection, shared by the extension service's client.
    channel: Channel,
    config: RmsProviderConfig,
    jobs: Arc<Mutex<HashMap<(String, String), TrackedJob>>>,
    changes: Arc<ChangeFeeds>,
    /// The job pollers; cancelled when the manager is dropped (it lives
    /// behind the registry's trait objects, which have no async stop).
    pollers: Background,
    /// Flow's store and BMC login, for the rack-lifecycle capabilities.
    inventory: Option<super::rms_lifecycle::RmsInventory>,
}

impl Drop for RmsManager {
    fn drop(&mut self) {
        self.pollers.token().cancel();
    }
}

impl RmsManager {
    /// A manager for `config.address`; connects lazily on the first call.
    pub fn new(config: RmsProviderConfig) -> Result<Self, RmsProviderError> {
        let endpoint = config
            .tls
            .endpoint(&config.address, TLS_KEYS)?
            .connect_timeout(Duration::from_millis(config.connect_timeout_ms.max(1)))
            .timeout(Duration::from_millis(config.rpc_timeout_ms.max(1)));
        let channel = endpoint.connect_lazy();
        Ok(RmsManager {
            client: RackManagerClient::new(channel.clone()),
            channel,
            config,
            jobs: Arc::default(),
            changes: Arc::default(),
            pollers: Background::new("rack-manager job pollers"),
            inventory: None,
        })
    }

    /// Gives the manager Flow's store and the BMC login: ingest,
    /// decommission and the AC power cycle read the racks' nodes from it
    /// (see [`super::rms_lifecycle`]).
    pub fn with_inventory(
        mut self,
        store: Arc<dyn rackflow_store::Store>,
        login: super::rms_sync::BmcLogin,
    ) -> Self {
        self.inventory = Some(super::rms_lifecycle::RmsInventory { store, login });
        self
    }

    pub(crate) fn inventory_source(&self) -> Option<&super::rms_lifecycle::RmsInventory> {
        self.inventory.as_ref()
    }

    /// The provider's settings.
    pub fn config(&self) -> &RmsProviderConfig {
        &self.config
    }

    /// A client of the rack manager (shares the connection).
    pub fn client(&self) -> RackManagerClient<Channel> {
        self.client.clone()
    }

    /// The BMCs' leak detectors through this rack manager, as a leak
    /// source of Flow's detection loop (shares the connection).
    pub fn leak_source(&self) -> super::rms_leaks::RmsLeakSource {
        super::rms_leaks::RmsLeakSource::new(self.channel.clone(), self.config.address.clone())
    }

    /// The rack-manager job tracking a component's current update, if this
    /// process started one.
    pub fn firmware_job_id(&self, component: &ComponentRef) -> Option<String> {
        lock(&self.jobs)
            .get(&key(component))
            .map(|j| j.job_id.clone())
    }

    fn firmware_targets(
        &self,
        request: &FirmwareRequest,
        component: &ComponentRef,
    ) -> Vec<pb::FirmwareTarget> {
        let version = if request.target_version.is_empty() {
            "latest"
        } else {
            request.target_version.as_str()
        };
        let filename = self
            .config
            .firmware_file
            .replace("{version}", version)
            .replace(
                "{component_type}",
                &component.component_type.to_string().to_lowercase(),
            )
            .replace("{operation}", &request.operation);
        let targets: Vec<&str> = if component.component_type == ComponentType::PowerShelf {
            // As the reference: a power shelf's package decides its target.
            vec![""]
        } else if request.sub_targets.is_empty() {
            vec![self.config.firmware_target.as_str()]
        } else {
            request.sub_targets.iter().map(String::as_str).collect()
        };
        targets
            .into_iter()
            .map(|target| pb::FirmwareTarget {
                target: target.to_owned(),
                filename: filename.clone(),
            })
            .collect()
    }

    fn spawn_poller(&self, component: (String, String), job_id: String) {
        let mut client = self.client.clone();
        let jobs = Arc::clone(&self.jobs);
        let changes = Arc::clone(&self.changes);
        let stop = self.pollers.token().clone();
        let interval = Duration::from_millis(self.config.poll_interval_ms.max(1));
        let timeout_secs = self.config.job_timeout_secs;
        let deadline = Instant::now() + Duration::from_secs(timeout_secs);
        self.pollers.spawn("rack-manager job poller", async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(interval) => {}
                }
                let mut error = None;
                let state = match client
                    .get_job_status(pb::GetJobStatusRequest {
                        job_id: job_id.clone(),
                        include_child_job_states: false,
                    })
                    .await
                {
                    Ok(resp) => resp.into_inner().job_states.first().map(|s| {
                        let state = firmware_state(s.execution_state);
                        if state == FirmwareState::Failed {
                            error = Some(job_error(s));
                        }
                        state
                    }),
                    Err(status) if status.code() == tonic::Code::NotFound => {
                        // Evicted or lost by a restarted rack manager.
                        error = Some(format!("job {job_id} not found: {}", status.message()));
                        Some(FirmwareState::Failed)
                    }
                    Err(status) => {
                        tracing::debug!(job_id, error = %status, "job status poll failed; polling on");
                        None
                    }
                };
                let state = match state {
                    Some(state) => state,
                    None if Instant::now() >= deadline => FirmwareState::Unknown,
                    None => continue,
                };
                let state = if Instant::now() >= deadline
                    && !matches!(state, FirmwareState::Completed | FirmwareState::Failed)
                {
                    tracing::warn!(job_id, "rack manager firmware job timed out");
                    error = Some(format!(
                        "polling firmware job {job_id} exceeded timeout of {}s",
                        timeout_secs
                    ));
                    FirmwareState::Failed
                } else {
                    state
                };
                let changed = {
                    let mut jobs = lock(&jobs);
                    match jobs.get_mut(&component) {
                        // A newer update replaced this job: stop polling it.
                        Some(tracked) if tracked.job_id != job_id => return,
                        Some(tracked) if tracked.state != state => {
                            tracked.state = state;
                            tracked.error = error;
                            true
                        }
                        Some(_) => false,
                        None => return,
                    }
                };
                if changed {
                    changes.changed(&component.0);
                }
                if matches!(state, FirmwareState::Completed | FirmwareState::Failed) {
                    return;
                }
            }
        });
    }
}

/// The running job of the rack manager's refusal "job already in progress
/// for rack R node N (job_id J)", if that is what `message` says.
fn job_in_progress(message: &str) -> Option<&str> {
    if !message.starts_with("job already in progress for rack ") {
        return None;
    }
    let start = message.rfind("(job_id ")? + "(job_id ".len();
    let id = message[start..].strip_suffix(')')?.trim();
    (!id.is_empty() && !id.contains(char::is_whitespace)).then_some(id)
}

/// A failed job's error for the task report: code and message.
pub(crate) fn job_error(status: &pb::JobStatus) -> String {
    let code = pb::JobError::try_from(status.error_code)
        .map(|c| c.as_str_name().to_owned())
        .unwrap_or_else(|_| status.error_code.to_string());
    if status.error_message.is_empty() {
        format!("job {} failed ({code})", status.job_id)
    } else {
        format!(
            "job {} failed ({code}): {}",
            status.job_id, status.error_message
        )
    }
}

fn key(component: &ComponentRef) -> (String, String) {
    (component.rack.clone(), component.external_id.clone())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section is a single map update.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn firmware_state(execution_state: i32) -> FirmwareState {
    match pb::JobExecutionState::try_from(execution_state) {
        Ok(pb::JobExecutionState::Queued) => FirmwareState::Queued,
        Ok(pb::JobExecutionState::Running) => FirmwareState::Verifying,
        Ok(pb::JobExecutionState::Completed) => FirmwareState::Completed,
        Ok(pb::JobExecutionState::Failed) => FirmwareState::Failed,
        Ok(pb::JobExecutionState::Unspecified) | Err(_) => FirmwareState::Unknown,
    }
}

/// The rack manager's operation for a Flow power operation.
pub fn power_operation(op: PowerOp) -> pb::PowerOperation {
    match op {
        PowerOp::PowerOn => pb::PowerOperation::On,
        PowerOp::ForcePowerOn => pb::PowerOperation::ForceOn,
        PowerOp::PowerOff => pb::PowerOperation::Off,
        PowerOp::ForcePowerOff => pb::PowerOperation::ForceOff,
        PowerOp::Restart => pb::PowerOperation::GracefulRestart,
        PowerOp::ForceRestart => pb::PowerOperation::ForceRestart,
        PowerOp::WarmReset => pb::PowerOperation::Reset,
        PowerOp::ColdReset => pb::PowerOperation::ForceRestart,
    }
}

fn failed(call: &str, components: Vec<String>, message: String) -> ManagerError {
    ManagerError::CallFailed {
        call: call.to_owned(),
        components,
        message,
    }
}

#[async_trait]
impl PowerControl for RmsManager {
    async fn power_control(
        &self,
        components: &[ComponentRef],
        op: PowerOp,
    ) -> Result<(), ManagerError> {
        // An AC power cycle is the rack manager's cold reboot of the whole
        // rack, when the rack's nodes can be read from the store.
        if op == PowerOp::ColdReset
            && let Some(result) = self.cold_reboot(components).await
        {
            return result;
        }
        // One at a time: the rack manager holds a per-rack power guard for
        // the length of a SetPowerState and refuses a second one on the same
        // rack in-band (spec §2.2), so concurrent calls would fail.
        let mut failures = Vec::new();
        let mut messages = Vec::new();
        for component in components {
            let request = pb::SetPowerStateRequest {
                node_id: component.external_id.clone(),
                operation: power_operation(op) as i32,
                rack_id: component.rack.clone(),
            };
            let outcome = match self.client.clone().set_power_state(request).await {
                Ok(resp) if resp.get_ref().status == pb::ReturnCode::Success as i32 => Ok(()),
                Ok(_) => Err("rack manager reported failure".to_owned()),
                Err(status) => Err(status.message().to_owned()),
            };
            if let Err(message) = outcome {
                messages.push(format!("{}: {message}", component.external_id));
                failures.push(component.external_id.clone());
            }
        }
        if messages.is_empty() {
            Ok(())
        } else {
            Err(failed("SetPowerState", failures, messages.join("; ")))
        }
    }
}

#[async_trait]
impl PowerStatus for RmsManager {
    async fn power_status(
        &self,
        components: &[ComponentRef],
    ) -> Result<HashMap<String, PowerState>, ManagerError> {
        let mut states = HashMap::new();
        for component in components {
            let resp = self
                .client
                .clone()
                .get_power_state(pb::GetPowerStateRequest {
                    node_id: component.external_id.clone(),
                    rack_id: component.rack.clone(),
                })
                .await;
            // A failed read leaves the component out: it did not answer.
            if let Ok(resp) = resp {
                let resp = resp.into_inner();
                if resp.status == pb::ReturnCode::Success as i32 {
                    let state = match resp.pstate.as_str() {
                        "ON" => PowerState::On,
                        "OFF" => PowerState::Off,
                        _ => PowerState::Unknown,
                    };
                    states.insert(component.external_id.clone(), state);
                }
            }
        }
        Ok(states)
    }
}

#[async_trait]
impl FirmwareControl for RmsManager {
    async fn firmware_start(
        &self,
        components: &[ComponentRef],
        request: &FirmwareRequest,
    ) -> Result<(), ManagerError> {
        if let Some(object_id) = &request.firmware_object {
            return self.apply_object(components, request, object_id).await;
        }
        let mut failures = Vec::new();
        let mut messages = Vec::new();
        // Image file → trays the rack manager has no such file for.
        let mut missing: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for component in components {
            let targets = self.firmware_targets(request, component);
            let files: Vec<String> = targets.iter().map(|t| t.filename.clone()).collect();
            let resp = self
                .client
                .clone()
                .update_firmware(pb::UpdateFirmwareRequest {
                    node_id: component.external_id.clone(),
                    rack_id: component.rack.clone(),
                    firmware_targets: targets,
                    activate: self.config.activate,
                    force_update: request.override_version_check,
                    ..Default::default()
                })
                .await;
            match resp.map(tonic::Response::into_inner) {
                Ok(resp) if resp.status == pb::ReturnCode::Success as i32 => {
                    tracing::info!(
                        component = %component.external_id,
                        rack = %component.rack,
                        job_id = %resp.job_id,
                        "rack manager firmware job started"
                    );
                    lock(&self.jobs).insert(
                        key(component),
                        TrackedJob {
                            job_id: resp.job_id.clone(),
                            state: FirmwareState::Queued,
                            error: None,
                        },
                    );
                    self.spawn_poller(key(component), resp.job_id);
                }
                Ok(resp) => match job_in_progress(&resp.message) {
                    // The node is flashing under a job this process does
                    // not know (its starter died, e.g. a Flow restart whose
                    // job ids were not persisted): poll that job instead of
                    // failing. Its result still has to pass the version
                    // check before the component counts as done.
                    Some(job_id) => {
                        tracing::warn!(
                            component = %component.external_id,
                            rack = %component.rack,
                            job_id,
                            "a firmware job is already running on the node: polling it"
                        );
                        lock(&self.jobs).insert(
                            key(component),
                            TrackedJob {
                                job_id: job_id.to_owned(),
                                state: FirmwareState::Queued,
                                error: None,
                            },
                        );
                        self.spawn_poller(key(component), job_id.to_owned());
                    }
                    None if resp.error_code == pb::FirmwareUpdateError::FileNotFound as i32 => {
                        let file = files
                            .into_iter()
                            .find(|f| resp.message.contains(f.as_str()))
                            .unwrap_or_else(|| resp.message.clone());
                        missing
                            .entry(file)
                            .or_default()
                            .push(component.external_id.clone());
                    }
                    None => {
                        messages.push(format!("{}: {}", component.external_id, resp.message));
                        failures.push(component.external_id.clone());
                    }
                },
                Err(status) => {
                    messages.push(format!("{}: {}", component.external_id, status.message()));
                    failures.push(component.external_id.clone());
                }
            }
        }
        if !missing.is_empty() {
            // Retrying cannot make a file appear: fail now, saying which
            // file, where it belongs and which trays wait for it.
            let mut message = missing_images(&missing);
            if !messages.is_empty() {
                message.push_str(&format!("; also: {}", messages.join("; ")));
            }
            return Err(ManagerError::Refused {
                call: "UpdateFirmware".to_owned(),
                message,
            });
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failed("UpdateFirmware", failures, messages.join("; ")))
        }
    }
}

impl RmsManager {
    /// Applies a catalogue firmware object to `components` (one rack's
    /// trays of one type): one `ApplyStoredFirmwareObject` naming the
    /// registered nodes, then each node's child job is polled as an
    /// `UpdateFirmware` job would be. The rack manager records the apply in
    /// the object's history.
    async fn apply_object(
        &self,
        components: &[ComponentRef],
        request: &FirmwareRequest,
        object_id: &str,
    ) -> Result<(), ManagerError> {
        let Some(rack) = components.first().map(|c| c.rack.clone()) else {
            return Ok(());
        };
        let nodes = components
            .iter()
            .map(|c| pb::NodeInfo {
                node_id: c.external_id.clone(),
                rack_id: c.rack.clone(),
                ..Default::default()
            })
            .collect();
        // The deprecated global filter is the one that needs no node type:
        // Flow's sub-targets name components of whatever trays it updates.
        #[allow(deprecated)]
        let apply = pb::ApplyStoredFirmwareObjectRequest {
            rack_id: rack.clone(),
            object_id: object_id.to_owned(),
            nodes: Some(pb::NodeSet { nodes }),
            force_update: request.override_version_check,
            components: request.sub_targets.clone(),
            ..Default::default()
        };
        let resp = self
            .client
            .clone()
            .apply_stored_firmware_object(apply)
            .await
            .map_err(|status| ManagerError::Refused {
                call: "ApplyStoredFirmwareObject".to_owned(),
                message: status.message().to_owned(),
            })?
            .into_inner();
        let response = resp.response.unwrap_or_default();
        let mut failures = Vec::new();
        let mut messages = Vec::new();
        for result in &response.node_results {
            if result.status != pb::ReturnCode::Success as i32 {
                failures.push(result.node_id.clone());
                messages.push(format!("{}: {}", result.node_id, result.error_message));
            }
        }
        for job in &resp.jobs {
            let Some(component) = components.iter().find(|c| c.external_id == job.node_id) else {
                continue;
            };
            tracing::info!(
                component = %component.external_id,
                rack = %component.rack,
                job_id = %job.job_id,
                object_id,
                "rack manager firmware object job started"
            );
            lock(&self.jobs).insert(
                key(component),
                TrackedJob {
                    job_id: job.job_id.clone(),
                    state: FirmwareState::Queued,
                    error: None,
                },
            );
            self.spawn_poller(key(component), job.job_id.clone());
        }
        if resp.jobs.is_empty() && failures.is_empty() {
            // Refused as a whole (unknown or unavailable object, …).
            return Err(ManagerError::Refused {
                call: "ApplyStoredFirmwareObject".to_owned(),
                message: response.message,
            });
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failed(
                "ApplyStoredFirmwareObject",
                failures,
                messages.join("; "),
            ))
        }
    }
}

/// `firmware image compute-2.0.0.fwpkg is not in the rack manager's
/// firmware directory (workflows.firmware_dir of its rms.toml), needed by
/// trays a, b, c, d, e and 3 more` — one clause per missing file.
fn missing_images(missing: &BTreeMap<String, Vec<String>>) -> String {
    missing
        .iter()
        .map(|(file, trays)| {
            let mut trays = trays.clone();
            trays.sort_unstable();
            trays.dedup();
            format!(
                "firmware image {file} is not in the rack manager's firmware directory \
                 (workflows.firmware_dir of its rms.toml), needed by {} {}",
                if trays.len() == 1 { "tray" } else { "trays" },
                super::first_listed(&trays, ", ", " and")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[async_trait]
impl FirmwareStatus for RmsManager {
    async fn firmware_status(
        &self,
        components: &[ComponentRef],
    ) -> Result<HashMap<String, FirmwareState>, ManagerError> {
        let jobs = lock(&self.jobs);
        Ok(components
            .iter()
            .filter_map(|c| jobs.get(&key(c)).map(|j| (c.external_id.clone(), j.state)))
            .collect())
    }

    fn firmware_jobs(&self, components: &[ComponentRef]) -> HashMap<String, FirmwareJob> {
        let jobs = lock(&self.jobs);
        components
            .iter()
            .filter_map(|c| {
                let tracked = jobs.get(&key(c))?;
                Some((
                    c.external_id.clone(),
                    FirmwareJob {
                        job_id: tracked.job_id.clone(),
                        error: tracked.error.clone(),
                    },
                ))
            })
            .collect()
    }

    /// Tracks and polls jobs a previous Flow process started; a component
    /// already tracked keeps its job.
    fn adopt_firmware_jobs(&self, jobs: &[(ComponentRef, String)]) {
        for (component, job_id) in jobs {
            let adopted = match lock(&self.jobs).entry(key(component)) {
                std::collections::hash_map::Entry::Occupied(_) => false,
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(TrackedJob {
                        job_id: job_id.clone(),
                        state: FirmwareState::Queued,
                        error: None,
                    });
                    true
                }
            };
            if adopted {
                tracing::info!(
                    component = %component.external_id,
                    rack = %component.rack,
                    job_id = %job_id,
                    "adopted a rack manager firmware job started before a restart"
                );
                self.spawn_poller(key(component), job_id.clone());
            }
        }
    }

    /// `GetNodeFirmwareInventory` per component; the entry read is the
    /// one the update addressed (its single sub-target) or else
    /// `version_entry` (names compared without case). A component whose
    /// read fails or lacks that entry is left out: it did not answer.
    async fn installed_versions(
        &self,
        components: &[ComponentRef],
        sub_targets: &[String],
    ) -> Result<HashMap<String, String>, ManagerError> {
        let entry = match sub_targets {
            [one] => one.as_str(),
            _ => self.config.version_entry.as_str(),
        };
        let mut versions = HashMap::new();
        for component in components {
            let resp = self
                .client
                .clone()
                .get_node_firmware_inventory(pb::GetNodeFirmwareInventoryRequest {
                    node_id: component.external_id.clone(),
                    rack_id: component.rack.clone(),
                })
                .await;
            let Ok(resp) = resp.map(tonic::Response::into_inner) else {
                continue;
            };
            if resp.status != pb::ReturnCode::Success as i32 {
                continue;
            }
            if let Some(found) = inventory_version(&resp.firmware_list, entry) {
                versions.insert(component.external_id.clone(), found);
            }
        }
        Ok(versions)
    }

    fn change_feed(
        &self,
        components: &[ComponentRef],
    ) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.changes.subscribe(components)
    }
}

/// The version of inventory entry `entry`: matched by name, or by the last
/// segment of its Redfish URI, without case.
fn inventory_version(list: &[pb::FirmwareInventoryInfo], entry: &str) -> Option<String> {
    list.iter()
        .find(|info| {
            info.name.eq_ignore_ascii_case(entry)
                || info
                    .target
                    .rsplit('/')
                    .next()
                    .is_some_and(|last| last.eq_ignore_ascii_case(entry))
        })
        .map(|info| info.version.clone())
}

impl ComponentManager for RmsManager {
    fn name(&self) -> &str {
        "rms"
    }
    fn as_power_control(&self) -> Option<&dyn PowerControl> {
        Some(self)
    }
    fn as_power_status(&self) -> Option<&dyn PowerStatus> {
        Some(self)
    }
    fn as_firmware_control(&self) -> Option<&dyn FirmwareControl> {
        Some(self)
    }
    fn as_firmware_status(&self) -> Option<&dyn FirmwareStatus> {
        Some(self)
    }
    fn as_firmware_consistency(&self) -> Option<&dyn super::FirmwareConsistency> {
        Some(self)
    }
    fn as_expectation_injector(&self) -> Option<&dyn super::ExpectationInjector> {
        self.inventory.as_ref().map(|_| self as _)
    }
    fn as_decommissioner(&self) -> Option<&dyn super::Decommissioner> {
        self.inventory.as_ref().map(|_| self as _)
    }
    fn as_decommission_status(&self) -> Option<&dyn super::DecommissionStatus> {
        self.inventory.as_ref().map(|_| self as _)
    }
}

/// The component type a rack-manager node type implies.
pub fn component_type_of(node_type: i32) -> Option<ComponentType> {
    use pb::NodeType as T;
    match T::try_from(node_type).ok()? {
        T::ComputeGb200Nvidia
        | T::ComputeGb300Nvidia
        | T::ComputeGb300Lenovo
        | T::ComputeVrnvl72Nvidia => Some(ComponentType::Compute),
        T::SwitchGb200Nvidia | T::SwitchGb300Nvidia | T::SwitchVrnvl72Nvidia => {
            Some(ComponentType::NvSwitch)
        }
        T::PowershelfGb200Liteon
        | T::PowershelfGb200Delta
        | T::PowershelfGb300Liteon
        | T::PowershelfGb300Delta => Some(ComponentType::PowerShelf),
        T::Unspecified => None,
    }
}

#[async_trait]
impl super::InventorySource for RmsManager {
    async fn nodes(&self) -> Result<Vec<rackflow_domain::drift::ActualNode>, String> {
        let reply = self
            .client
            .clone()
            .list_node_inventory(pb::ListNodeInventoryRequest {})
            .await
            .map_err(|status| {
                format!(
                    "ListNodeInventory at {}: {}",
                    self.config.address,
                    status.message()
                )
            })?
            .into_inner();
        Ok(reply
            .nodes
            .into_iter()
            .map(|n| rackflow_domain::drift::ActualNode {
                rack: n.rack_id,
                node_id: n.node_id,
                component_type: component_type_of(n.r#type),
                bmc_ip: Some(n.ip_address).filter(|s| !s.is_empty()),
                bmc_mac: Some(n.mac_address).filter(|s| !s.is_empty()),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use rackflow_domain::ComponentType;

    use super::*;

    #[test]
    fn the_rack_managers_in_progress_refusal_names_the_running_job() {
        assert_eq!(
            job_in_progress("job already in progress for rack r-1 node n-1 (job_id 7f3a-1)"),
            Some("7f3a-1")
        );
        assert_eq!(
            job_in_progress("job already in progress for rack r-1 node n-1"),
            None
        );
        assert_eq!(
            job_in_progress("job already in progress for rack r-1 node n-1 (job_id )"),
            None
        );
        assert_eq!(job_in_progress("firmware file not found (job_id x)"), None);
    }

    #[test]
    fn node_types_map_to_component_types() {
        use pb::NodeType as T;
        for t in [
            T::ComputeGb200Nvidia,
            T::ComputeGb300Nvidia,
            T::ComputeGb300Lenovo,
            T::ComputeVrnvl72Nvidia,
        ] {
            assert_eq!(
                component_type_of(t as i32),
                Some(ComponentType::Compute),
                "{t:?}"
            );
        }
        for t in [
            T::SwitchGb200Nvidia,
            T::SwitchGb300Nvidia,
            T::SwitchVrnvl72Nvidia,
        ] {
            assert_eq!(
                component_type_of(t as i32),
                Some(ComponentType::NvSwitch),
                "{t:?}"
            );
        }
        for t in [
            T::PowershelfGb200Liteon,
            T::PowershelfGb200Delta,
            T::PowershelfGb300Liteon,
            T::PowershelfGb300Delta,
        ] {
            assert_eq!(
                component_type_of(t as i32),
                Some(ComponentType::PowerShelf),
                "{t:?}"
            );
        }
        assert_eq!(component_type_of(0), None);
        assert_eq!(component_type_of(999), None);
    }

    fn component() -> ComponentRef {
        ComponentRef {
            id: uuid::Uuid::nil(),
            component_type: ComponentType::Compute,
            external_id: "node-7".into(),
            rack: "rack-a".into(),
        }
    }

    #[test]
    fn a_missing_image_names_the_file_the_setting_and_five_trays() {
        let trays: Vec<String> = (0..8).map(|i| format!("r-0001-compute-{i:02}")).collect();
        let missing = BTreeMap::from([
            ("compute-9.0.fwpkg".to_string(), trays),
            (
                "nvswitch-9.0.fwpkg".to_string(),
                vec!["r-0001-nvswitch-00".to_string()],
            ),
        ]);
        assert_eq!(
            missing_images(&missing),
            "firmware image compute-9.0.fwpkg is not in the rack manager's firmware directory \
             (workflows.firmware_dir of its rms.toml), needed by trays r-0001-compute-00, \
             r-0001-compute-01, r-0001-compute-02, r-0001-compute-03, r-0001-compute-04 and 3 \
             more; firmware image nvswitch-9.0.fwpkg is not in the rack manager's firmware \
             directory (workflows.firmware_dir of its rms.toml), needed by tray \
             r-0001-nvswitch-00"
        );
    }

    #[tokio::test]
    async fn firmware_targets_fill_the_template() {
        let manager = RmsManager::new(RmsProviderConfig::default()).unwrap();
        let request = FirmwareRequest {
            operation: "upgrade".into(),
            target_version: "2.1.0".into(),
            ..Default::default()
        };
        let targets = manager.firmware_targets(&request, &component());
        assert_eq!(targets.len(), 1);
        assert_eq!(targets[0].filename, "compute-2.1.0.fwpkg");
        assert_eq!(targets[0].target, "");
        let request = FirmwareRequest {
            sub_targets: vec!["BMC".into(), "BIOS".into()],
            ..Default::default()
        };
        let targets = manager.firmware_targets(&request, &component());
        let names: Vec<_> = targets
            .iter()
            .map(|t| (t.target.as_str(), t.filename.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("BMC", "compute-latest.fwpkg"),
                ("BIOS", "compute-latest.fwpkg")
            ]
        );
        // A power shelf's target is blanked (package-derived), sub-targets
        // or not.
        let shelf = ComponentRef {
            component_type: ComponentType::PowerShelf,
            ..component()
        };
        let targets = manager.firmware_targets(&request, &shelf);
        let names: Vec<_> = targets
            .iter()
            .map(|t| (t.target.as_str(), t.filename.as_str()))
            .collect();
        assert_eq!(names, [("", "powershelf-latest.fwpkg")]);
    }

    #[test]
    fn inventory_entries_match_by_name_or_uri() {
        let entry = |name: &str, version: &str| pb::FirmwareInventoryInfo {
            name: name.into(),
            version: version.into(),
            target: format!("/redfish/v1/UpdateService/FirmwareInventory/{name}"),
            ..Default::default()
        };
        let list = [entry("BIOS", "1.1"), entry("BMC", "2.0.0")];
        assert_eq!(inventory_version(&list, "bmc").as_deref(), Some("2.0.0"));
        assert_eq!(inventory_version(&list, "BIOS").as_deref(), Some("1.1"));
        assert_eq!(inventory_version(&list, "nvos"), None);
        let by_uri = [pb::FirmwareInventoryInfo {
            name: "Baseboard firmware".into(),
            version: "7".into(),
            target: "/redfish/v1/UpdateService/FirmwareInventory/PSU".into(),
            ..Default::default()
        }];
        assert_eq!(inventory_version(&by_uri, "psu").as_deref(), Some("7"));
    }

    #[test]
    fn states_and_operations_map() {
        assert_eq!(
            firmware_state(pb::JobExecutionState::Running as i32),
            FirmwareState::Verifying
        );
        assert_eq!(
            firmware_state(pb::JobExecutionState::Failed as i32),
            FirmwareState::Failed
        );
        assert_eq!(firmware_state(99), FirmwareState::Unknown);
        assert_eq!(power_operation(PowerOp::PowerOn), pb::PowerOperation::On);
        assert_eq!(
            power_operation(PowerOp::ForcePowerOff),
            pb::PowerOperation::ForceOff
        );
        for op in PowerOp::ALL {
            assert_ne!(power_operation(op), pb::PowerOperation::Unspecified);
        }
    }

    #[test]
    fn bad_address_is_refused() {
        let config = RmsProviderConfig {
            address: "not a uri".into(),
            ..Default::default()
        };
        assert!(RmsManager::new(config).is_err());
    }
}
