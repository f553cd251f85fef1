//! The rack manager's configuration file (`rackflow rms serve --config`):
//! every default in one place, unknown keys rejected, positive values typed
//! non-zero (spec §5.4). Documented in `docs/rms.md` and
//! `docs/configuration.md`.
//!
//! ```toml
//! listen = "127.0.0.1:8801"
//! [metrics]
//! listen = "127.0.0.1:8802"
//! [workflows]
//! firmware_dir = "firmware"
//! catalog_dir = "catalog"
//! max_tracked_jobs = 10000
//! terminal_job_ttl_seconds = 86400
//! [nodes]
//! backend = "sim"
//! [nodes.sim]
//! firmware_latency_ms = 500
//! [nodes.redfish]            # used when backend = "redfish"
//! verify_tls = true
//! ```

use std::net::SocketAddr;
use std::num::{NonZeroU64, NonZeroUsize};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::backend::redfish::RedfishBackendConfig;
use crate::backend::sim::SimBackendConfig;
use crate::job::JobLimits;

/// Default gRPC listen address (the reference's port 8801, on loopback).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8801";
/// Default metrics listen address (the reference's port 8802, on loopback).
pub const DEFAULT_METRICS_LISTEN: &str = "127.0.0.1:8802";
/// Default firmware directory, relative to the working directory.
pub const DEFAULT_FIRMWARE_DIR: &str = "firmware";
/// Default directory of the firmware-object catalogue file.
pub const DEFAULT_CATALOG_DIR: &str = "catalog";
/// Default number of nodes a multi-node read (device info, inventory,
/// comparison) talks to at once.
pub const DEFAULT_BATCH_READ_CONCURRENCY: usize = 16;
/// Default number of a firmware object's artifacts fetched at once.
pub const DEFAULT_ARTIFACT_DOWNLOAD_CONCURRENCY: usize = 4;
/// Default bound on one artifact's download (1 h).
pub const DEFAULT_ARTIFACT_DOWNLOAD_TIMEOUT_SECONDS: u64 = 3600;
/// Default largest artifact accepted (8 GiB: an NVOS image is ~2 GiB).
pub const DEFAULT_ARTIFACT_MAX_BYTES: u64 = 8 << 30;
/// Default bound on one firmware target's update (3 h, spec §3.3).
pub const DEFAULT_FIRMWARE_TASK_TIMEOUT_SECONDS: u64 = 3 * 3600;
/// Default bound on one synchronous BMC call (power, inventory).
pub const DEFAULT_BMC_CALL_TIMEOUT_SECONDS: u64 = 60;
/// Default wait of shutdown for in-flight RPCs.
pub const DEFAULT_SHUTDOWN_GRACE_SECONDS: u64 = 10;
/// Default wait of graceful shutdown for signalled jobs (5 min, spec §1.10).
pub const DEFAULT_SHUTDOWN_TIMEOUT_SECONDS: u64 = 300;

/// The whole rack-manager configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RmsConfig {
    /// gRPC listen address (`--listen` overrides it).
    pub listen: SocketAddr,
    /// Seconds shutdown waits for in-flight RPCs before it stops serving.
    pub shutdown_grace_seconds: u64,
    pub metrics: MetricsConfig,
    pub workflows: WorkflowsConfig,
    pub nodes: NodesConfig,
    /// TLS / mTLS of the gRPC port (`[tls]`; `/metrics` stays plain HTTP).
    pub tls: rackflow_security::TlsSection,
    /// Who may call which RPC (`[authorization]`).
    pub authorization: rackflow_security::AuthorizationSection,
}

/// `[metrics]`: the Prometheus `/metrics` endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Serve `/metrics` at all.
    pub enabled: bool,
    /// HTTP listen address of `/metrics`.
    pub listen: SocketAddr,
}

/// `[workflows]`: firmware files and the job tracker's limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkflowsConfig {
    /// Directory firmware `filename`s are resolved in; files outside it are
    /// refused.
    pub firmware_dir: PathBuf,
    /// Cap on retained job records, terminal ones included.
    pub max_tracked_jobs: NonZeroUsize,
    /// How long terminal jobs stay queryable.
    pub terminal_job_ttl_seconds: NonZeroU64,
    /// Bound on one firmware target's update, polling included.
    pub firmware_task_timeout_seconds: NonZeroU64,
    /// Bound on one synchronous BMC call (power set/get, inventory).
    pub bmc_call_timeout_seconds: NonZeroU64,
    /// How long graceful shutdown waits for signalled jobs to end.
    pub shutdown_timeout_seconds: u64,
    /// Directory of the firmware-object catalogue (`catalog.json`); the
    /// objects' files live under `firmware_dir/firmware_objects/`.
    pub catalog_dir: PathBuf,
    /// Nodes a multi-node read talks to at once.
    pub batch_read_concurrency: NonZeroUsize,
    /// Artifacts of one firmware object fetched at once.
    pub artifact_download_concurrency: NonZeroUsize,
    /// Bound on one artifact's download.
    pub artifact_download_timeout_seconds: NonZeroU64,
    /// Largest artifact accepted, in bytes.
    pub artifact_max_bytes: NonZeroU64,
}

/// `[nodes]`: which back end talks to the BMCs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodesConfig {
    pub backend: BackendKind,
    /// Settings of the `sim` back end (`[nodes.sim]`).
    pub sim: SimBackendConfig,
    /// Settings of the `redfish` back end (`[nodes.redfish]`).
    pub redfish: RedfishBackendConfig,
    /// The simulated NVLink switch trays (`[nodes.switch_sim]`), driven
    /// through their OS's API rather than their BMC.
    pub switch_sim: crate::switch::sim::SwitchSimConfig,
}

/// The node back end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendKind {
    /// In-process simulated BMCs.
    Sim,
    /// Real BMCs over Redfish.
    Redfish,
}

impl Default for RmsConfig {
    fn default() -> Self {
        RmsConfig {
            listen: parse_addr(DEFAULT_LISTEN),
            shutdown_grace_seconds: DEFAULT_SHUTDOWN_GRACE_SECONDS,
            metrics: MetricsConfig::default(),
            workflows: WorkflowsConfig::default(),
            nodes: NodesConfig::default(),
            tls: rackflow_security::TlsSection::default(),
            authorization: rackflow_security::AuthorizationSection::default(),
        }
    }
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            enabled: true,
            listen: parse_addr(DEFAULT_METRICS_LISTEN),
        }
    }
}

impl Default for WorkflowsConfig {
    fn default() -> Self {
        let limits = JobLimits::default();
        WorkflowsConfig {
            firmware_dir: PathBuf::from(DEFAULT_FIRMWARE_DIR),
            max_tracked_jobs: limits.max_tracked_jobs,
            terminal_job_ttl_seconds: limits.terminal_job_ttl_seconds,
            firmware_task_timeout_seconds: non_zero(DEFAULT_FIRMWARE_TASK_TIMEOUT_SECONDS),
            bmc_call_timeout_seconds: non_zero(DEFAULT_BMC_CALL_TIMEOUT_SECONDS),
            shutdown_timeout_seconds: DEFAULT_SHUTDOWN_TIMEOUT_SECONDS,
            catalog_dir: PathBuf::from(DEFAULT_CATALOG_DIR),
            batch_read_concurrency: non_zero_usize(DEFAULT_BATCH_READ_CONCURRENCY),
            artifact_download_concurrency: non_zero_usize(DEFAULT_ARTIFACT_DOWNLOAD_CONCURRENCY),
            artifact_download_timeout_seconds: non_zero(DEFAULT_ARTIFACT_DOWNLOAD_TIMEOUT_SECONDS),
            artifact_max_bytes: non_zero(DEFAULT_ARTIFACT_MAX_BYTES),
        }
    }
}

impl Default for NodesConfig {
    fn default() -> Self {
        NodesConfig {
            backend: BackendKind::Sim,
            sim: SimBackendConfig::default(),
            redfish: RedfishBackendConfig::default(),
            switch_sim: crate::switch::sim::SwitchSimConfig::default(),
        }
    }
}

impl WorkflowsConfig {
    /// The job tracker's limits.
    pub fn job_limits(&self) -> JobLimits {
        JobLimits {
            max_tracked_jobs: self.max_tracked_jobs,
            terminal_job_ttl_seconds: self.terminal_job_ttl_seconds,
        }
    }

    pub fn firmware_task_timeout(&self) -> Duration {
        Duration::from_secs(self.firmware_task_timeout_seconds.get())
    }

    pub fn bmc_call_timeout(&self) -> Duration {
        Duration::from_secs(self.bmc_call_timeout_seconds.get())
    }

    pub fn shutdown_timeout(&self) -> Duration {
        Duration::from_secs(self.shutdown_timeout_seconds)
    }

    /// Where the firmware-object catalogue lives and how it downloads.
    pub fn catalog_settings(&self) -> crate::catalog::CatalogSettings {
        crate::catalog::CatalogSettings {
            catalog_dir: self.catalog_dir.clone(),
            firmware_dir: self.firmware_dir.clone(),
            limits: crate::catalog::DownloadLimits {
                concurrency: self.artifact_download_concurrency.get(),
                timeout: Duration::from_secs(self.artifact_download_timeout_seconds.get()),
                max_bytes: self.artifact_max_bytes.get(),
            },
        }
    }
}

fn parse_addr(addr: &str) -> SocketAddr {
    addr.parse()
        .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8801)))
}

fn non_zero(value: u64) -> NonZeroU64 {
    NonZeroU64::new(value).unwrap_or(NonZeroU64::MIN)
}

fn non_zero_usize(value: usize) -> NonZeroUsize {
    NonZeroUsize::new(value).unwrap_or(NonZeroUsize::MIN)
}

/// A configuration file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parse config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
}

impl RmsConfig {
    /// Defaults, then the TOML file if given.
    pub fn load(file: Option<&Path>) -> Result<RmsConfig, ConfigError> {
        let Some(path) = file else {
            return Ok(RmsConfig::default());
        };
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|e: toml::de::Error| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_documented_defaults() {
        let config: RmsConfig = toml::from_str("").unwrap();
        assert_eq!(config, RmsConfig::default());
        assert_eq!(config.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(config.metrics.listen.to_string(), DEFAULT_METRICS_LISTEN);
        assert!(config.metrics.enabled);
        assert_eq!(config.shutdown_grace_seconds, 10);
        assert_eq!(config.workflows.firmware_dir, PathBuf::from("firmware"));
        assert_eq!(config.workflows.max_tracked_jobs.get(), 10_000);
        assert_eq!(config.workflows.terminal_job_ttl_seconds.get(), 86_400);
        assert_eq!(
            config.workflows.firmware_task_timeout(),
            Duration::from_secs(10_800)
        );
        assert_eq!(
            config.workflows.shutdown_timeout(),
            Duration::from_secs(300)
        );
        assert_eq!(config.nodes.backend, BackendKind::Sim);
        assert_eq!(config.nodes.redfish, RedfishBackendConfig::default());
    }

    #[test]
    fn sections_parse_and_unknown_or_zero_values_are_refused() {
        let config: RmsConfig = toml::from_str(
            r#"
            listen = "127.0.0.1:9000"
            [workflows]
            max_tracked_jobs = 5
            firmware_dir = "/srv/fw"
            [nodes]
            backend = "redfish"
            [nodes.sim]
            seed = 3
            [nodes.redfish]
            scheme = "http"
            verify_tls = false
            power_poll_interval_ms = 250
            "#,
        )
        .unwrap();
        assert_eq!(config.listen.port(), 9000);
        assert_eq!(config.workflows.job_limits().max_tracked_jobs.get(), 5);
        assert_eq!(config.nodes.backend, BackendKind::Redfish);
        assert_eq!(config.nodes.sim.seed, 3);
        assert!(!config.nodes.redfish.verify_tls);
        assert_eq!(config.nodes.redfish.power_poll_interval_ms, 250);
        assert_eq!(
            config.nodes.redfish.scheme,
            crate::backend::redfish::Scheme::Http
        );
        assert!(toml::from_str::<RmsConfig>("[nodes.redfish]\nverify = false").is_err());
        assert!(toml::from_str::<RmsConfig>("port = 1").is_err());
        assert!(toml::from_str::<RmsConfig>("[workflows]\nmax_tracked_jobs = 0").is_err());
        assert!(toml::from_str::<RmsConfig>("[nodes]\nbackend = \"ipmi\"").is_err());
    }
}
