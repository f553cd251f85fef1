//! The flow server's configuration: every default in one place.
//!
//! Layers, later wins: built-in defaults → TOML file (`--config`) → environment
//! (`RACKFLOW_LISTEN`, `RACKFLOW_DB`, `DATABASE_URL`, `RACKFLOW_MAX_CANDIDATE_TARGETS`,
//! `RACKFLOW_EXECUTOR`, `TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `RACKFLOW_TLS_CERT`,
//! `RACKFLOW_TLS_KEY`, `RACKFLOW_TLS_CLIENT_CA`, `RACKFLOW_ALLOW_INSECURE`,
//! `RACKFLOW_AUTHORIZATION_MODE`, `RACKFLOW_DATA_KEY_FILE` or the reference's
//! `FLOW_DATA_ENCRYPTION_KEY_PATH`, `RACKFLOW_METRICS_LISTEN` (also enables
//! `/metrics`), `RACKFLOW_HTTP_LISTEN` (also enables the web console))
//! → command-line flags (applied by the binary on the loaded struct).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Default gRPC listen address (the reference's port).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:50051";
/// Default SQLite database file, relative to the working directory.
pub const DEFAULT_SQLITE_PATH: &str = "./rackflow.db";
/// How long graceful shutdown waits for in-flight RPCs before giving up.
pub const DEFAULT_SHUTDOWN_GRACE_SECS: u64 = 10;

/// Whole server configuration. Field docs are the documentation of the TOML
/// file (see `docs/configuration.md`).
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// gRPC listen address.
    pub listen: SocketAddr,
    pub database: DatabaseConfig,
    pub planner: PlannerConfig,
    /// Seconds graceful shutdown waits for in-flight RPCs.
    pub shutdown_grace_secs: u64,
    pub dispatcher: DispatcherSection,
    pub tasks: TasksSection,
    /// The task-schedule dispatcher (`[schedules]`).
    pub schedules: SchedulesSection,
    /// The simulated fleet the `sim` provider drives (`[sim]`, `[[sim.faults]]`).
    pub sim: rackflow_engine::sim::SimConfig,
    /// Which component-manager provider drives hardware: `sim` (default)
    /// or `rms` (a rack manager, configured under `[rms]`).
    pub provider: Provider,
    /// The `rms` provider's rack manager (`[rms]`).
    pub rms: rackflow_engine::manager::rms::RmsProviderConfig,
    /// The Temporal cluster of `tasks.executor = "temporal"` (`[temporal]`).
    pub temporal: TemporalSection,
    /// TLS / mTLS of the gRPC port (`[tls]`).
    pub tls: rackflow_security::TlsSection,
    /// Who may call which RPC (`[authorization]`).
    pub authorization: rackflow_security::AuthorizationSection,
    /// The audit trail (`[audit]`).
    pub audit: AuditSection,
    /// Data keys of secrets at rest (`[secrets]`).
    pub secrets: rackflow_security::secrets::SecretsSection,
    /// Leak detection (`[leaks]`).
    pub leaks: LeaksSection,
    /// The Prometheus `/metrics` endpoint (`[metrics]`).
    pub metrics: MetricsSection,
    /// The operator web console (`[console]`).
    pub console: ConsoleSection,
}

/// The operator web console (`[console]`): plain HTTP on its own listener.
/// Off unless enabled here, by `RACKFLOW_HTTP_LISTEN` or by
/// `rackflow serve --http-listen` (several servers on one host would
/// otherwise fight over the port). It has no login of its own: keep it on
/// loopback (the default address) or behind an authenticating proxy; its
/// controls are audited as `console@<peer>`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsoleSection {
    /// Serve the console.
    pub enabled: bool,
    /// HTTP listen address of the console.
    pub listen: std::net::SocketAddr,
}

/// Default `console.listen`.
pub const DEFAULT_CONSOLE_LISTEN: &str = "127.0.0.1:8480";

impl Default for ConsoleSection {
    fn default() -> Self {
        ConsoleSection {
            enabled: false,
            listen: DEFAULT_CONSOLE_LISTEN
                .parse()
                .expect("DEFAULT_CONSOLE_LISTEN is a valid address"),
        }
    }
}

/// The Prometheus `/metrics` endpoint (`[metrics]`): plain HTTP on its own
/// listener, off unless enabled (several servers on one host would
/// otherwise fight over the port).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSection {
    /// Serve `/metrics`.
    pub enabled: bool,
    /// HTTP listen address of `/metrics`.
    pub listen: std::net::SocketAddr,
}

/// Default `metrics.listen`.
pub const DEFAULT_METRICS_LISTEN: &str = "127.0.0.1:9464";

impl Default for MetricsSection {
    fn default() -> Self {
        MetricsSection {
            enabled: false,
            listen: DEFAULT_METRICS_LISTEN
                .parse()
                .expect("DEFAULT_METRICS_LISTEN is a valid address"),
        }
    }
}

/// Leak detection (`[leaks]`): how often the leak sources of the provider
/// (the simulated fleet's leak detectors) are read. Leaks reported through
/// the API (`ReportLeak`) act at once whatever this says.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeaksSection {
    /// Read the leak sources (the reference's `disable_leak_detection`,
    /// inverted).
    pub detection: bool,
    /// Milliseconds between two reads (the reference's
    /// `leak_detection_interval`, default 1 minute); at least 100.
    pub interval_ms: u64,
    /// Milliseconds a new leak's response may stay undone (its process died
    /// after storing the event) before the loop runs it.
    pub redrive_after_ms: u64,
}

/// Default `leaks.interval_ms`: the reference's one minute.
pub const DEFAULT_LEAK_INTERVAL_MS: u64 = 60_000;

impl Default for LeaksSection {
    fn default() -> Self {
        LeaksSection {
            detection: true,
            interval_ms: DEFAULT_LEAK_INTERVAL_MS,
            redrive_after_ms: u64::try_from(
                rackflow_engine::leaks::DEFAULT_REDRIVE_AFTER.as_millis(),
            )
            .unwrap_or(30_000),
        }
    }
}

impl LeaksSection {
    /// The interval, at least 100 ms.
    pub fn interval(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.interval_ms.max(100))
    }
}

/// The audit trail (`[audit]`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditSection {
    /// Days events are kept; older ones are pruned hourly. 0 keeps them
    /// forever.
    pub retention_days: u64,
}

/// Default `audit.retention_days`.
pub const DEFAULT_AUDIT_RETENTION_DAYS: u64 = 90;

impl Default for AuditSection {
    fn default() -> Self {
        AuditSection {
            retention_days: DEFAULT_AUDIT_RETENTION_DAYS,
        }
    }
}

impl AuditSection {
    pub fn engine(&self) -> rackflow_engine::audit::AuditConfig {
        rackflow_engine::audit::AuditConfig {
            retention: (self.retention_days > 0).then(|| {
                std::time::Duration::from_secs(self.retention_days.saturating_mul(86_400))
            }),
            ..rackflow_engine::audit::AuditConfig::default()
        }
    }
}

/// Which executor runs tasks (decision C2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorKind {
    /// In-process on tokio; several replicas on one PostgreSQL share tasks
    /// through leases.
    #[default]
    Local,
    /// Each task a Temporal workflow, every replica a worker (needs a
    /// binary built with the `temporal` feature).
    Temporal,
}

/// Default Temporal frontend.
pub const DEFAULT_TEMPORAL_ADDRESS: &str = "http://127.0.0.1:7233";
/// Default Temporal task queue of the task workflows (the reference's).
pub const DEFAULT_TEMPORAL_TASK_QUEUE: &str = "flow-tasks";

/// The Temporal cluster (`[temporal]`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TemporalSection {
    /// Frontend address, `http://host:port` (env `TEMPORAL_ADDRESS`).
    pub address: String,
    /// Namespace (env `TEMPORAL_NAMESPACE`).
    pub namespace: String,
    /// Task queue of the task workflows and their activities; every
    /// replica of one deployment polls the same one.
    pub task_queue: String,
    /// Seconds a worker may go without heartbeating a running action
    /// attempt before Temporal gives the attempt to another worker.
    pub heartbeat_timeout_secs: u64,
    /// Seconds a workflow task waits for the worker that last ran the
    /// workflow before any worker may take it (after a worker crash).
    pub sticky_timeout_secs: u64,
    /// Action attempts this replica's worker runs at once (each mostly
    /// waits on hardware).
    pub max_concurrent_activities: usize,
}

impl Default for TemporalSection {
    fn default() -> Self {
        TemporalSection {
            address: DEFAULT_TEMPORAL_ADDRESS.into(),
            namespace: "default".into(),
            task_queue: DEFAULT_TEMPORAL_TASK_QUEUE.into(),
            heartbeat_timeout_secs: 10,
            sticky_timeout_secs: 3,
            max_concurrent_activities: 1000,
        }
    }
}

/// The component-manager provider of every component type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// The in-process simulated fleet.
    #[default]
    Sim,
    /// A rack manager over its RackManager gRPC API.
    Rms,
}

/// The operation-run dispatcher (`[dispatcher]`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DispatcherSection {
    /// Drive operation runs. `false` serves the API only (runs stay as they
    /// are), e.g. for a read-only replica or to inspect a plan.
    pub enabled: bool,
    /// Safety-net poll in milliseconds; events wake the loop at once.
    pub poll_interval_ms: u64,
    /// Runs handled per pass.
    pub batch: i64,
    /// Seconds a claim holds a target before it may be re-claimed.
    pub claim_lease_secs: u64,
}

/// Tasks (`[tasks]`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TasksSection {
    /// Seconds between full sweeps of the waiting queue (expiry and
    /// promotions a missed notification left behind).
    pub promoter_sweep_secs: u64,
    /// Seconds a running task stays this server's without a lease renewal
    /// (renewed every third of it). Another replica on the same PostgreSQL
    /// database adopts the task once it expires.
    pub lease_secs: u64,
    /// `local` (default) or `temporal`.
    pub executor: ExecutorKind,
    /// Seconds a power or firmware action waits for its components to
    /// leave the `in_service` operational state before the task fails (the
    /// reference's readiness gate: 1800).
    pub readiness_timeout_secs: u64,
    /// Milliseconds between the readiness gate's checks (reference: 5000).
    pub readiness_poll_ms: u64,
}

impl Default for DispatcherSection {
    fn default() -> Self {
        let d = rackflow_engine::dispatcher::DispatcherConfig::default();
        DispatcherSection {
            enabled: true,
            poll_interval_ms: u64::try_from(d.poll_interval.as_millis()).unwrap_or(10_000),
            batch: d.batch,
            claim_lease_secs: d.claim_lease.as_secs(),
        }
    }
}

impl Default for TasksSection {
    fn default() -> Self {
        TasksSection {
            promoter_sweep_secs: rackflow_engine::tasks::TaskConfig::default()
                .promoter_sweep
                .as_secs(),
            lease_secs: rackflow_engine::tasks::TaskConfig::default()
                .lease
                .as_secs(),
            executor: ExecutorKind::default(),
            readiness_timeout_secs: rackflow_engine::executor::DEFAULT_READINESS_TIMEOUT.as_secs(),
            readiness_poll_ms: u64::try_from(
                rackflow_engine::executor::DEFAULT_READINESS_POLL.as_millis(),
            )
            .unwrap_or(5_000),
        }
    }
}

impl DispatcherSection {
    /// Engine settings; non-positive values fall back to the defaults.
    pub fn engine(&self) -> rackflow_engine::dispatcher::DispatcherConfig {
        let mut d = rackflow_engine::dispatcher::DispatcherConfig::default();
        if self.poll_interval_ms > 0 {
            d.poll_interval = std::time::Duration::from_millis(self.poll_interval_ms);
        }
        if self.batch > 0 {
            d.batch = self.batch;
        }
        if self.claim_lease_secs > 0 {
            d.claim_lease = std::time::Duration::from_secs(self.claim_lease_secs);
        }
        d
    }
}

impl TasksSection {
    pub fn engine(&self) -> rackflow_engine::tasks::TaskConfig {
        let mut t = rackflow_engine::tasks::TaskConfig::default();
        if self.promoter_sweep_secs > 0 {
            t.promoter_sweep = std::time::Duration::from_secs(self.promoter_sweep_secs);
        }
        if self.lease_secs > 0 {
            t.lease = std::time::Duration::from_secs(self.lease_secs);
        }
        t
    }

    /// The executor's settings; zero values fall back to the defaults.
    pub fn executor(&self) -> rackflow_engine::executor::ExecutorConfig {
        let mut e = rackflow_engine::executor::ExecutorConfig::default();
        if self.readiness_timeout_secs > 0 {
            e.readiness_timeout = std::time::Duration::from_secs(self.readiness_timeout_secs);
        }
        if self.readiness_poll_ms > 0 {
            e.readiness_poll = std::time::Duration::from_millis(self.readiness_poll_ms);
        }
        e
    }
}

/// The task-schedule dispatcher (`[schedules]`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulesSection {
    /// Fire due schedules from this server. Any number of replicas may:
    /// each occurrence is claimed by exactly one.
    pub enabled: bool,
    /// Safety-net poll in milliseconds; the loop otherwise sleeps until the
    /// earliest next run and is woken by create / update / resume / trigger.
    pub poll_interval_ms: u64,
    /// Due schedules claimed per pass.
    pub batch: i64,
}

impl Default for SchedulesSection {
    fn default() -> Self {
        let d = rackflow_engine::schedules::ScheduleConfig::default();
        SchedulesSection {
            enabled: true,
            poll_interval_ms: u64::try_from(d.poll_interval.as_millis()).unwrap_or(10_000),
            batch: d.batch,
        }
    }
}

impl SchedulesSection {
    /// Engine settings; non-positive values fall back to the defaults.
    pub fn engine(&self) -> rackflow_engine::schedules::ScheduleConfig {
        let mut d = rackflow_engine::schedules::ScheduleConfig::default();
        if self.poll_interval_ms > 0 {
            d.poll_interval = std::time::Duration::from_millis(self.poll_interval_ms);
        }
        if self.batch > 0 {
            d.batch = self.batch;
        }
        d
    }
}

/// Where runs and inventory are stored. `url` (PostgreSQL) wins over
/// `sqlite_path` when set.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// SQLite file (embedded default), created if missing, WAL mode.
    pub sqlite_path: PathBuf,
    /// PostgreSQL URL, e.g. `postgres://user:pass@host:5432/db`. May hold a
    /// password: never logged, redacted in `Debug`.
    pub url: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlannerConfig {
    /// Most rack targets one run may consider before selection (decision D5:
    /// counted per rack after merging). 0 = unlimited.
    pub max_candidate_targets: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: DEFAULT_LISTEN
                .parse()
                .expect("DEFAULT_LISTEN is a valid address"),
            database: DatabaseConfig::default(),
            planner: PlannerConfig::default(),
            shutdown_grace_secs: DEFAULT_SHUTDOWN_GRACE_SECS,
            dispatcher: DispatcherSection::default(),
            tasks: TasksSection::default(),
            schedules: SchedulesSection::default(),
            sim: rackflow_engine::sim::SimConfig::default(),
            provider: Provider::default(),
            rms: rackflow_engine::manager::rms::RmsProviderConfig::default(),
            temporal: TemporalSection::default(),
            tls: rackflow_security::TlsSection::default(),
            authorization: rackflow_security::AuthorizationSection::default(),
            audit: AuditSection::default(),
            secrets: rackflow_security::secrets::SecretsSection::default(),
            leaks: LeaksSection::default(),
            metrics: MetricsSection::default(),
            console: ConsoleSection::default(),
        }
    }
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            sqlite_path: PathBuf::from(DEFAULT_SQLITE_PATH),
            url: None,
        }
    }
}

impl Default for PlannerConfig {
    fn default() -> Self {
        PlannerConfig {
            max_candidate_targets: rackflow_domain::planner::DEFAULT_MAX_CANDIDATE_TARGETS,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("database", &self.database)
            .field("planner", &self.planner)
            .field("shutdown_grace_secs", &self.shutdown_grace_secs)
            .field("dispatcher", &self.dispatcher)
            .field("tasks", &self.tasks)
            .field("schedules", &self.schedules)
            .field("sim", &self.sim)
            .field("provider", &self.provider)
            .field("rms", &self.rms)
            .field("temporal", &self.temporal)
            .field("tls", &self.tls)
            .field("authorization", &self.authorization)
            .field("audit", &self.audit)
            .field("secrets", &self.secrets)
            .finish()
    }
}

impl std::fmt::Debug for DatabaseConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseConfig")
            .field("sqlite_path", &self.sqlite_path)
            .field("url", &self.url.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// A configuration file or environment value that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Only the parser's message and the line: the offending line itself may
    /// hold a database password, so it is never quoted.
    #[error("parse config file {path}: line {line}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("environment variable {name}: {detail}")]
    Env { name: &'static str, detail: String },
    /// A value that parses but cannot be used; `key` as written in TOML.
    #[error("{key}: {detail}")]
    Invalid { key: &'static str, detail: String },
    /// `[tls]` / `[authorization]` settings that cannot work together.
    #[error(transparent)]
    Security(#[from] rackflow_security::SecurityError),
}

/// Bounds of `tasks.lease_secs` (0 = the default). Shorter, and a pause of
/// the process or the database hands its tasks to another replica; longer,
/// and a dead replica's tasks wait that long.
const LEASE_SECS: std::ops::RangeInclusive<u64> = 3..=86_400;

/// Longest readiness wait accepted: a day (the reference waits 30 m).
const READINESS_TIMEOUT_MAX_SECS: u64 = 86_400;

impl Config {
    /// Defaults, then the TOML file if given, then the environment.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let mut config = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                })?;
                toml::from_str(&text).map_err(|e: toml::de::Error| ConfigError::Parse {
                    path: path.to_path_buf(),
                    line: e
                        .span()
                        .map_or(0, |span| text[..span.start].matches('\n').count() + 1),
                    message: e.message().to_string(),
                })?
            }
            None => Config::default(),
        };
        config.apply_env(|name| std::env::var(name).ok())?;
        config.validate()?;
        Ok(config)
    }

    /// Values the types admit but the server cannot use.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let transport = self.tls.check(self.listen)?;
        self.authorization.policy(transport)?;
        let lease = self.tasks.lease_secs;
        if lease != 0 && !LEASE_SECS.contains(&lease) {
            return Err(ConfigError::Invalid {
                key: "tasks.lease_secs",
                detail: format!(
                    "{lease} is out of range: between {} and {} seconds, or 0 for the default",
                    LEASE_SECS.start(),
                    LEASE_SECS.end()
                ),
            });
        }
        if self.rms.bmc_port > u32::from(u16::MAX) {
            return Err(ConfigError::Invalid {
                key: "rms.bmc_port",
                detail: format!(
                    "{} is out of range: 1 to 65535, or 0 for the rack manager's default",
                    self.rms.bmc_port
                ),
            });
        }
        let t = &self.tasks;
        if t.readiness_timeout_secs > READINESS_TIMEOUT_MAX_SECS {
            return Err(ConfigError::Invalid {
                key: "tasks.readiness_timeout_secs",
                detail: format!(
                    "{} is out of range: at most {READINESS_TIMEOUT_MAX_SECS} seconds, or 0 for the default",
                    t.readiness_timeout_secs
                ),
            });
        }
        if t.readiness_poll_ms > 0
            && (t.readiness_poll_ms < 10
                || (t.readiness_timeout_secs > 0
                    && t.readiness_poll_ms > t.readiness_timeout_secs.saturating_mul(1000)))
        {
            return Err(ConfigError::Invalid {
                key: "tasks.readiness_poll_ms",
                detail: format!(
                    "{} is out of range: at least 10 ms and no longer than the readiness timeout, or 0 for the default",
                    t.readiness_poll_ms
                ),
            });
        }
        if self.tasks.executor == ExecutorKind::Temporal {
            let t = &self.temporal;
            if !(t.address.starts_with("http://") || t.address.starts_with("https://")) {
                return Err(ConfigError::Invalid {
                    key: "temporal.address",
                    detail: format!("{:?} is not an http:// or https:// address", t.address),
                });
            }
            for (key, value) in [
                ("temporal.namespace", &t.namespace),
                ("temporal.task_queue", &t.task_queue),
            ] {
                if value.trim().is_empty() {
                    return Err(ConfigError::Invalid {
                        key,
                        detail: "must not be empty".into(),
                    });
                }
            }
            if !(1..=3600).contains(&t.heartbeat_timeout_secs) {
                return Err(ConfigError::Invalid {
                    key: "temporal.heartbeat_timeout_secs",
                    detail: format!(
                        "{} is out of range: between 1 and 3600 seconds",
                        t.heartbeat_timeout_secs
                    ),
                });
            }
            if !(1..=100_000).contains(&t.max_concurrent_activities) {
                return Err(ConfigError::Invalid {
                    key: "temporal.max_concurrent_activities",
                    detail: format!(
                        "{} is out of range: between 1 and 100000",
                        t.max_concurrent_activities
                    ),
                });
            }
            if !(1..=600).contains(&t.sticky_timeout_secs) {
                return Err(ConfigError::Invalid {
                    key: "temporal.sticky_timeout_secs",
                    detail: format!(
                        "{} is out of range: between 1 and 600 seconds",
                        t.sticky_timeout_secs
                    ),
                });
            }
        }
        Ok(())
    }

    /// Applies environment overrides read through `get` (injectable for tests).
    pub fn apply_env(
        &mut self,
        get: impl Fn(&'static str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        if let Some(listen) = get("RACKFLOW_LISTEN") {
            self.listen = listen.parse().map_err(|e| ConfigError::Env {
                name: "RACKFLOW_LISTEN",
                detail: format!("{e}"),
            })?;
        }
        if let Some(listen) = get("RACKFLOW_METRICS_LISTEN") {
            self.metrics.listen = listen.parse().map_err(|e| ConfigError::Env {
                name: "RACKFLOW_METRICS_LISTEN",
                detail: format!("{e}"),
            })?;
            self.metrics.enabled = true;
        }
        if let Some(listen) = get("RACKFLOW_HTTP_LISTEN") {
            self.console.listen = listen.parse().map_err(|e| ConfigError::Env {
                name: "RACKFLOW_HTTP_LISTEN",
                detail: format!("{e}"),
            })?;
            self.console.enabled = true;
        }
        if let Some(path) = get("RACKFLOW_DB") {
            self.database.sqlite_path = PathBuf::from(path);
        }
        if let Some(url) = get("DATABASE_URL").filter(|u| !u.trim().is_empty()) {
            self.database.url = Some(url);
        }
        if let Some(executor) = get("RACKFLOW_EXECUTOR") {
            self.tasks.executor = match executor.trim() {
                "local" => ExecutorKind::Local,
                "temporal" => ExecutorKind::Temporal,
                other => {
                    return Err(ConfigError::Env {
                        name: "RACKFLOW_EXECUTOR",
                        detail: format!("{other:?} is not an executor (local, temporal)"),
                    });
                }
            };
        }
        if let Some(address) = get("TEMPORAL_ADDRESS").filter(|a| !a.trim().is_empty()) {
            self.temporal.address = address;
        }
        if let Some(namespace) = get("TEMPORAL_NAMESPACE").filter(|n| !n.trim().is_empty()) {
            self.temporal.namespace = namespace;
        }
        for (name, slot) in [
            ("RACKFLOW_TLS_CERT", &mut self.tls.cert),
            ("RACKFLOW_TLS_KEY", &mut self.tls.key),
            ("RACKFLOW_TLS_CLIENT_CA", &mut self.tls.client_ca),
        ] {
            if let Some(path) = get(name).filter(|p| !p.trim().is_empty()) {
                *slot = Some(PathBuf::from(path));
            }
        }
        if let Some(value) = get("RACKFLOW_ALLOW_INSECURE") {
            self.tls.allow_insecure = match value.trim() {
                "1" | "true" => true,
                "0" | "false" | "" => false,
                other => {
                    return Err(ConfigError::Env {
                        name: "RACKFLOW_ALLOW_INSECURE",
                        detail: format!("{other:?} is not a boolean (true, false, 1, 0)"),
                    });
                }
            };
        }
        // The reference's name first, ours wins.
        for name in ["FLOW_DATA_ENCRYPTION_KEY_PATH", "RACKFLOW_DATA_KEY_FILE"] {
            if let Some(path) = get(name).filter(|p| !p.trim().is_empty()) {
                self.secrets.key_file = Some(PathBuf::from(path));
            }
        }
        if let Some(mode) = get("RACKFLOW_AUTHORIZATION_MODE") {
            self.authorization.mode = Some(match mode.trim() {
                "enforce" => rackflow_security::Mode::Enforce,
                "audit" => rackflow_security::Mode::Audit,
                other => {
                    return Err(ConfigError::Env {
                        name: "RACKFLOW_AUTHORIZATION_MODE",
                        detail: format!("{other:?} is not a mode (enforce, audit)"),
                    });
                }
            });
        }
        if let Some(limit) = get("RACKFLOW_MAX_CANDIDATE_TARGETS") {
            self.planner.max_candidate_targets = limit.parse().map_err(|e| ConfigError::Env {
                name: "RACKFLOW_MAX_CANDIDATE_TARGETS",
                detail: format!("{e}"),
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_documented_values() {
        let c = Config::default();
        assert_eq!(c.listen.to_string(), "127.0.0.1:50051");
        assert_eq!(c.database.sqlite_path, PathBuf::from("./rackflow.db"));
        assert!(c.database.url.is_none());
        assert_eq!(c.planner.max_candidate_targets, 100);
    }

    #[test]
    fn file_then_env_override() {
        let mut c: Config =
            toml::from_str("listen = \"127.0.0.1:6000\"\n[planner]\nmax_candidate_targets = 0\n")
                .unwrap();
        assert_eq!(c.listen.port(), 6000);
        assert_eq!(c.planner.max_candidate_targets, 0);
        c.apply_env(|name| match name {
            "DATABASE_URL" => Some("postgres://u:pw-hunter2@h/db".into()),
            "RACKFLOW_LISTEN" => Some("127.0.0.1:7000".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.listen.port(), 7000);
        // The password, not the word "secrets" of the [secrets] section.
        assert!(!format!("{c:?}").contains("pw-hunter2"));
    }

    #[test]
    fn parse_errors_never_quote_the_file() {
        let dir = std::env::temp_dir().join(format!("rackflow-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.toml");
        std::fs::write(&path, "[database]\nurl = postgres://u:hunter2@h/db\n").unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("line 2"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_task_lease_out_of_range_is_refused_naming_the_key() {
        for (lease, ok) in [
            (0, true),
            (2, false),
            (3, true),
            (86_400, true),
            (86_401, false),
        ] {
            let c: Config = toml::from_str(&format!("[tasks]\nlease_secs = {lease}\n")).unwrap();
            let result = c.validate();
            assert_eq!(result.is_ok(), ok, "lease_secs = {lease}: {result:?}");
            if let Err(e) = result {
                assert!(e.to_string().contains("tasks.lease_secs"), "{e}");
            }
        }
    }

    #[test]
    fn readiness_settings_and_the_bmc_port_out_of_range_are_refused_naming_the_key() {
        for (text, key) in [
            (
                "[tasks]\nreadiness_timeout_secs = 86401\n",
                Some("tasks.readiness_timeout_secs"),
            ),
            ("[tasks]\nreadiness_timeout_secs = 86400\n", None),
            (
                "[tasks]\nreadiness_poll_ms = 9\n",
                Some("tasks.readiness_poll_ms"),
            ),
            (
                "[tasks]\nreadiness_timeout_secs = 1\nreadiness_poll_ms = 1001\n",
                Some("tasks.readiness_poll_ms"),
            ),
            (
                "[tasks]\nreadiness_timeout_secs = 1\nreadiness_poll_ms = 1000\n",
                None,
            ),
            ("[rms]\nbmc_port = 65536\n", Some("rms.bmc_port")),
            ("[rms]\nbmc_port = 65535\n", None),
            ("[rms]\nbmc_port = 0\n", None),
        ] {
            let c: Config = toml::from_str(text).unwrap();
            match (c.validate(), key) {
                (Ok(()), None) => {}
                (Err(e), Some(key)) => assert!(e.to_string().starts_with(key), "{text}: {e}"),
                (result, key) => panic!("{text}: {result:?}, expected an error on {key:?}"),
            }
        }
        let executor = Config::default().tasks.executor();
        assert_eq!(
            executor.readiness_timeout,
            std::time::Duration::from_secs(1800)
        );
        assert_eq!(executor.readiness_poll, std::time::Duration::from_secs(5));
    }

    #[test]
    fn the_temporal_executor_is_configured_and_checked() {
        let c = Config::default();
        assert_eq!(c.tasks.executor, ExecutorKind::Local);
        assert_eq!(c.temporal.address, "http://127.0.0.1:7233");
        assert_eq!(c.temporal.task_queue, "flow-tasks");
        let mut c: Config = toml::from_str(
            "[tasks]\nexecutor = \"temporal\"\n[temporal]\naddress = \"http://t:7233\"\ntask_queue = \"q\"\n",
        )
        .unwrap();
        assert_eq!(c.tasks.executor, ExecutorKind::Temporal);
        c.validate().unwrap();
        c.apply_env(|name| match name {
            "TEMPORAL_ADDRESS" => Some("https://other:7233".into()),
            "TEMPORAL_NAMESPACE" => Some("prod".into()),
            "RACKFLOW_EXECUTOR" => Some("local".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.temporal.address, "https://other:7233");
        assert_eq!(c.temporal.namespace, "prod");
        assert_eq!(c.tasks.executor, ExecutorKind::Local);
        // Only checked when the executor is used.
        c.temporal.address = "nope".into();
        c.validate().unwrap();
        c.tasks.executor = ExecutorKind::Temporal;
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("temporal.address"), "{err}");
        c.temporal.address = "http://t:7233".into();
        for (key, change) in [
            (
                "temporal.task_queue",
                (|c: &mut Config| c.temporal.task_queue = " ".into()) as fn(&mut Config),
            ),
            ("temporal.heartbeat_timeout_secs", |c| {
                c.temporal.heartbeat_timeout_secs = 0
            }),
            ("temporal.sticky_timeout_secs", |c| {
                c.temporal.sticky_timeout_secs = 601
            }),
        ] {
            let mut bad = c.clone();
            change(&mut bad);
            let err = bad.validate().unwrap_err().to_string();
            assert!(err.contains(key), "{err}");
        }
        let err = Config::default()
            .apply_env(|name| (name == "RACKFLOW_EXECUTOR").then(|| "remote".to_string()))
            .unwrap_err();
        assert!(err.to_string().contains("RACKFLOW_EXECUTOR"), "{err}");
        assert!(toml::from_str::<Config>("[tasks]\nexecutor = \"remote\"\n").is_err());
    }

    #[test]
    fn tls_and_authorization_come_from_the_file_and_the_environment() {
        let mut c: Config = toml::from_str(
            "listen = \"0.0.0.0:50051\"\n[tls]\ncert = \"s.pem\"\nkey = \"s.key\"\n",
        )
        .unwrap();
        c.validate().unwrap();
        c.apply_env(|name| match name {
            "RACKFLOW_TLS_CLIENT_CA" => Some("ca.pem".into()),
            "RACKFLOW_AUTHORIZATION_MODE" => Some("enforce".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.tls.client_ca, Some(PathBuf::from("ca.pem")));
        // Enforce with mTLS and nobody on the allowlist denies everything.
        let err = c.validate().unwrap_err().to_string();
        assert!(err.starts_with("authorization.identities"), "{err}");
        c.authorization
            .identities
            .insert("spiffe://t/ops".into(), rackflow_security::Role::Operator);
        c.validate().unwrap();
        // Plaintext off loopback needs an explicit allow.
        let mut plain: Config = toml::from_str("listen = \"0.0.0.0:50051\"\n").unwrap();
        let err = plain.validate().unwrap_err().to_string();
        assert!(err.contains("tls.allow_insecure"), "{err}");
        plain
            .apply_env(|name| (name == "RACKFLOW_ALLOW_INSECURE").then(|| "true".into()))
            .unwrap();
        plain.validate().unwrap();
        let err = Config::default()
            .apply_env(|name| (name == "RACKFLOW_ALLOW_INSECURE").then(|| "yes".into()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("RACKFLOW_ALLOW_INSECURE"), "{err}");
        // The loopback default still serves plaintext in audit mode.
        Config::default().validate().unwrap();
    }

    #[test]
    fn unknown_keys_and_bad_env_are_rejected() {
        assert!(toml::from_str::<Config>("lisen = \"x\"").is_err());
        let mut c = Config::default();
        let err = c
            .apply_env(|name| (name == "RACKFLOW_LISTEN").then(|| "nope".to_string()))
            .unwrap_err();
        assert!(err.to_string().contains("RACKFLOW_LISTEN"));
    }
}
