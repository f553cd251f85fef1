//! Rack operations that submit tasks: `rackflow power on|off|reset`,
//! `rackflow rack ac-power-cycle` and `rackflow firmware upgrade`. Each prints the ids of the tasks the server
//! created, one per resolved rack.

use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use rackflow_api::v1;
use serde::Serialize;

use crate::args::{parse_duration, parse_uuid};
use crate::client;
use crate::output::{OutputFormat, print_json};
use crate::targets::TargetArgs;

// ---------------------------------------------------------------------------
// Flags shared by every task-submitting command
// ---------------------------------------------------------------------------

/// Parses `--queue-timeout`: a duration of whole seconds, 1s..=i32::MAX s.
pub fn parse_queue_timeout(text: &str) -> Result<i32, String> {
    let d = parse_duration(text)?;
    if d.subsec_nanos() != 0 {
        return Err(format!(
            "queue timeout {text:?} must be whole seconds (e.g. 90s, 30m)"
        ));
    }
    if d < Duration::from_secs(1) {
        return Err("queue timeout must be at least 1s".to_string());
    }
    i32::try_from(d.as_secs()).map_err(|_| format!("queue timeout {text:?} is too large"))
}

/// Queueing, rule and description flags of the task-submitting commands.
#[derive(Debug, Clone, Default, Args)]
pub struct SubmitArgs {
    /// On a rack conflict, wait in the rack's queue instead of failing.
    #[arg(long)]
    pub queue: bool,
    /// How long a queued task may wait before it expires [server default: 1h].
    #[arg(long, value_name = "DURATION", requires = "queue", value_parser = parse_queue_timeout)]
    pub queue_timeout: Option<i32>,
    /// Operation rule to run instead of the rack's associated or default one.
    #[arg(long, value_name = "UUID", value_parser = parse_uuid)]
    pub rule_id: Option<uuid::Uuid>,
    /// Description of each task.
    #[arg(long, value_name = "TEXT")]
    pub description: Option<String>,
    /// Do not wait for blocked components to become ready.
    #[arg(long)]
    pub override_readiness_check: bool,
}

impl SubmitArgs {
    /// `QueueOptions` of `--queue [--queue-timeout]`; none without `--queue`
    /// (the server then rejects a conflicting task).
    pub fn queue_options(&self) -> Option<v1::QueueOptions> {
        self.queue.then(|| v1::QueueOptions {
            conflict_strategy: v1::ConflictStrategy::Queue as i32,
            queue_timeout_seconds: self.queue_timeout.unwrap_or(0),
        })
    }

    pub fn rule_id(&self) -> Option<v1::Uuid> {
        self.rule_id.map(|id| v1::Uuid { id: id.to_string() })
    }

    pub fn description(&self) -> String {
        self.description.clone().unwrap_or_default()
    }
}

/// JSON of the task-submitting commands.
#[derive(Debug, Clone, Serialize)]
pub struct SubmittedView {
    pub task_ids: Vec<String>,
}

/// Prints the created task ids: one per line, or `{"task_ids": […]}`.
fn print_task_ids(response: v1::SubmitTaskResponse, output: OutputFormat) -> anyhow::Result<()> {
    let view = SubmittedView {
        task_ids: response.task_ids.into_iter().map(|u| u.id).collect(),
    };
    match output {
        OutputFormat::Json => print_json(&view)?,
        OutputFormat::Table => {
            for id in &view.task_ids {
                crate::outln!("{id}");
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// power on|off|reset
// ---------------------------------------------------------------------------

#[derive(Debug, Subcommand)]
pub enum PowerCommand {
    /// Power on (task power_control/power_on).
    On(PowerArgs),
    /// Power off (power_off; with --force, force_power_off).
    Off(PowerArgs),
    /// Power cycle (restart; with --force, force_restart).
    Reset(PowerArgs),
}

/// Flags of `power on|off|reset`.
#[derive(Debug, Clone, Default, Args)]
pub struct PowerArgs {
    #[command(flatten)]
    pub targets: TargetArgs,
    /// Forced variant (off and reset only): no graceful shutdown.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub submit: SubmitArgs,
}

/// The request one `power` command sends.
#[derive(Debug, Clone, PartialEq)]
pub enum PowerRequest {
    On(v1::PowerOnRackRequest),
    Off(v1::PowerOffRackRequest),
    Reset(v1::PowerResetRackRequest),
}

impl PowerCommand {
    /// The request of these flags, checked as far as the client can.
    pub fn to_request(&self) -> anyhow::Result<PowerRequest> {
        let (PowerCommand::On(args) | PowerCommand::Off(args) | PowerCommand::Reset(args)) = self;
        if args.force && matches!(self, PowerCommand::On(_)) {
            bail!(
                "--force applies to `power off` and `power reset` only: PowerOnRack has no \
                 forced variant (to change how racks power on, use an operation rule: --rule-id)"
            );
        }
        let target_spec = Some(args.targets.to_proto()?);
        let s = &args.submit;
        Ok(match self {
            PowerCommand::On(_) => PowerRequest::On(v1::PowerOnRackRequest {
                target_spec,
                description: s.description(),
                queue_options: s.queue_options(),
                rule_id: s.rule_id(),
                override_readiness_check: s.override_readiness_check,
            }),
            PowerCommand::Off(_) => PowerRequest::Off(v1::PowerOffRackRequest {
                target_spec,
                forced: args.force,
                description: s.description(),
                queue_options: s.queue_options(),
                rule_id: s.rule_id(),
                override_readiness_check: s.override_readiness_check,
            }),
            PowerCommand::Reset(_) => PowerRequest::Reset(v1::PowerResetRackRequest {
                target_spec,
                forced: args.force,
                description: s.description(),
                queue_options: s.queue_options(),
                rule_id: s.rule_id(),
                override_readiness_check: s.override_readiness_check,
            }),
        })
    }
}

/// `rackflow power on|off|reset`.
pub async fn run_power(
    server: &crate::client::ServerAddress,
    command: &PowerCommand,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let request = command.to_request()?;
    let mut flow = client::connect(server).await?;
    let response = match request {
        PowerRequest::On(r) => flow.power_on_rack(r).await.context("power on")?,
        PowerRequest::Off(r) => flow.power_off_rack(r).await.context("power off")?,
        PowerRequest::Reset(r) => flow.power_reset_rack(r).await.context("power reset")?,
    };
    print_task_ids(response.into_inner(), output)
}

// ---------------------------------------------------------------------------
// rack ac-power-cycle|bring-up|ingest|decommission
// ---------------------------------------------------------------------------

/// Flags of the rack lifecycle operations (`rack ac-power-cycle`,
/// `bring-up`, `ingest`, `decommission`).
#[derive(Debug, Clone, Default, Args)]
pub struct RackOperationArgs {
    #[command(flatten)]
    pub targets: TargetArgs,
    #[command(flatten)]
    pub submit: SubmitArgs,
}

impl RackOperationArgs {
    /// `ACPowerCycleRack` of these flags.
    pub fn ac_power_cycle_request(&self) -> anyhow::Result<v1::AcPowerCycleRackRequest> {
        let s = &self.submit;
        Ok(v1::AcPowerCycleRackRequest {
            target_spec: Some(self.targets.to_proto()?),
            description: s.description(),
            queue_options: s.queue_options(),
            rule_id: s.rule_id(),
            override_readiness_check: s.override_readiness_check,
        })
    }
}

/// A rack lifecycle operation of the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RackOperation {
    AcPowerCycle,
    BringUp,
    Ingest,
    Decommission,
}

impl RackOperationArgs {
    /// `BringUpRack`: no queue options in the reference's request (a
    /// conflict rejects), so `--queue` is refused.
    pub fn bring_up_request(&self) -> anyhow::Result<v1::BringUpRackRequest> {
        self.refuse_queue("bring-up")?;
        let s = &self.submit;
        Ok(v1::BringUpRackRequest {
            target_spec: Some(self.targets.to_proto()?),
            description: s.description(),
            rule_id: s.rule_id(),
            override_readiness_check: s.override_readiness_check,
        })
    }

    /// `IngestRack`: `--component-types` narrows the targets as for every
    /// task; no queue options, no readiness override.
    pub fn ingest_request(&self) -> anyhow::Result<v1::IngestRackRequest> {
        self.refuse_queue("ingest")?;
        if self.submit.override_readiness_check {
            bail!("--override-readiness-check does not apply to ingest (it touches no power)");
        }
        let s = &self.submit;
        Ok(v1::IngestRackRequest {
            target_spec: Some(self.targets.to_proto()?),
            filters: Vec::new(),
            description: s.description(),
            rule_id: s.rule_id(),
        })
    }

    pub fn decommission_request(&self) -> anyhow::Result<v1::DecommissionRackRequest> {
        if self.submit.override_readiness_check {
            bail!("--override-readiness-check does not apply to decommission");
        }
        let s = &self.submit;
        Ok(v1::DecommissionRackRequest {
            target_spec: Some(self.targets.to_proto()?),
            description: s.description(),
            queue_options: s.queue_options(),
            rule_id: s.rule_id(),
        })
    }

    fn refuse_queue(&self, what: &str) -> anyhow::Result<()> {
        if self.submit.queue {
            bail!(
                "--queue does not apply to {what}: the request has no queue options (a conflicting task rejects it)"
            );
        }
        Ok(())
    }
}

/// `rackflow rack ac-power-cycle|bring-up|ingest|decommission`: one task
/// per rack; prints the task ids.
pub async fn run_rack_operation(
    server: &crate::client::ServerAddress,
    operation: RackOperation,
    args: &RackOperationArgs,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let response = match operation {
        RackOperation::AcPowerCycle => return run_ac_power_cycle(server, args, output).await,
        RackOperation::BringUp => {
            let request = args.bring_up_request()?;
            let mut flow = client::connect(server).await?;
            flow.bring_up_rack(request).await.context("bring up")?
        }
        RackOperation::Ingest => {
            let request = args.ingest_request()?;
            let mut flow = client::connect(server).await?;
            flow.ingest_rack(request).await.context("ingest")?
        }
        RackOperation::Decommission => {
            let request = args.decommission_request()?;
            let mut flow = client::connect(server).await?;
            flow.decommission_rack(request)
                .await
                .context("decommission")?
        }
    };
    print_task_ids(response.into_inner(), output)
}

/// `rackflow rack ac-power-cycle`: one power_control/cold_reset task per
/// rack.
pub async fn run_ac_power_cycle(
    server: &crate::client::ServerAddress,
    args: &RackOperationArgs,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let request = args.ac_power_cycle_request()?;
    let mut flow = client::connect(server).await?;
    let response = flow
        .ac_power_cycle_rack(request)
        .await
        .context("AC power cycle")?;
    print_task_ids(response.into_inner(), output)
}

// ---------------------------------------------------------------------------
// firmware upgrade
// ---------------------------------------------------------------------------

#[derive(Debug, Subcommand)]
pub enum FirmwareCommand {
    /// Upgrade firmware (task firmware_control/upgrade).
    Upgrade(FirmwareArgs),
}

/// Parses an RFC 3339 timestamp (`2026-06-01T22:00:00Z`,
/// `2026-06-01T22:00:00+02:00`).
pub fn parse_rfc3339(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|e| {
            format!("invalid timestamp {text:?}: {e} (use RFC 3339, e.g. 2026-06-01T22:00:00Z)")
        })
}

/// Parses one `--sub-targets` entry: lower-cased, non-empty.
pub fn parse_sub_target(text: &str) -> Result<String, String> {
    let t = text.trim().to_ascii_lowercase();
    if t.is_empty() {
        return Err("empty sub-target (use e.g. bmc, nvos, psu, dpu)".to_string());
    }
    Ok(t)
}

/// Flags of `firmware upgrade`.
#[derive(Debug, Clone, Default, Args)]
pub struct FirmwareArgs {
    #[command(flatten)]
    pub targets: TargetArgs,
    /// Version to install: a string for every type, or a JSON object with
    /// per-type sections ({"compute": "…", "nvswitch": "…"}) [default: the
    /// component manager's default].
    #[arg(long, value_name = "VERSION", conflicts_with = "bundle")]
    pub target_version: Option<String>,
    /// Versions per rack model and component type from a YAML bundle file
    /// (`models: {"GB200 NVL72": {compute: …, nvswitch: …}, …}`): each rack
    /// gets its model's versions; a rack whose model it does not cover is
    /// refused.
    #[arg(long, value_name = "FILE.yaml", conflicts_with = "firmware_object")]
    pub bundle: Option<std::path::PathBuf>,
    /// Apply a firmware object of the rack manager's catalogue (provider
    /// rms): its id, or `default` for each rack model's default object.
    /// Exclusive with --target-version and --bundle.
    #[arg(long, value_name = "ID", conflicts_with = "target_version")]
    pub firmware_object: Option<String>,
    /// Install --target-version on racks of every model the target spans.
    /// Without it, one version for racks of several models (or a version
    /// named for another model family, gb200-… on GB300 racks) is refused:
    /// one model's image must not reach another's trays.
    #[arg(long, requires = "target_version")]
    pub same_version_for_all_models: bool,
    /// Start of the maintenance window (RFC 3339); needs --end.
    #[arg(long, value_name = "RFC3339", requires = "end", value_parser = parse_rfc3339)]
    pub start: Option<chrono::DateTime<chrono::Utc>>,
    /// End of the maintenance window (RFC 3339); needs --start.
    #[arg(long, value_name = "RFC3339", requires = "start", value_parser = parse_rfc3339)]
    pub end: Option<chrono::DateTime<chrono::Utc>>,
    /// Parts to update, e.g. bmc,nvos,psu,dpu [default: the manager's choice].
    #[arg(long, value_name = "NAMES", value_delimiter = ',', value_parser = parse_sub_target)]
    pub sub_targets: Vec<String>,
    /// Install even when the component already runs the target version.
    #[arg(long)]
    pub override_version_check: bool,
    /// Firmware credentials from a JSON file: {"shared": "…"} or
    /// {"per_component": {"compute": "…", "nvswitch": "…", "powershelf":
    /// "…"}}. The server seals them at rest (it needs a data key) and never
    /// returns them; a file, not a flag, so they stay out of shell history.
    #[arg(long, value_name = "FILE.json")]
    pub authentication_data_file: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub submit: SubmitArgs,
}

/// The credentials of `--authentication-data-file`.
fn read_authentication_data(
    path: &std::path::Path,
) -> anyhow::Result<v1::FirmwareAuthenticationData> {
    use v1::firmware_authentication_data::Value;
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("read --authentication-data-file {}", path.display()))?;
    // The parser's message could quote the file: never shown.
    let credentials: rackflow_domain::run::FirmwareCredentials = serde_json::from_str(&text)
        .map_err(|_| {
            anyhow::anyhow!(
                "--authentication-data-file {}: not {{\"shared\": \"…\"}} or \
                 {{\"per_component\": {{\"compute\": \"…\", …}}}}",
                path.display()
            )
        })?;
    let value = match credentials {
        rackflow_domain::run::FirmwareCredentials::Shared(shared) => Value::Shared(shared),
        rackflow_domain::run::FirmwareCredentials::PerComponent {
            compute,
            nvswitch,
            powershelf,
        } => Value::PerComponent(v1::PerComponentFirmwareAuthenticationData {
            compute,
            nvswitch,
            powershelf,
        }),
    };
    Ok(v1::FirmwareAuthenticationData { value: Some(value) })
}

fn timestamp_to_proto(t: chrono::DateTime<chrono::Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

impl FirmwareArgs {
    pub fn to_request(&self) -> anyhow::Result<v1::UpgradeFirmwareRequest> {
        if let (Some(start), Some(end)) = (self.start, self.end)
            && end <= start
        {
            bail!("--end ({end}) must be after --start ({start})");
        }
        let target_version = self
            .target_version
            .as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string);
        Ok(v1::UpgradeFirmwareRequest {
            target_spec: Some(self.targets.to_proto()?),
            target_version,
            start_time: self.start.map(timestamp_to_proto),
            end_time: self.end.map(timestamp_to_proto),
            description: self.submit.description(),
            queue_options: self.submit.queue_options(),
            rule_id: self.submit.rule_id(),
            sub_targets: self.sub_targets.clone(),
            override_readiness_check: self.submit.override_readiness_check,
            authentication_data: self
                .authentication_data_file
                .as_deref()
                .map(read_authentication_data)
                .transpose()?,
            override_version_check: self.override_version_check,
            firmware_bundle: self.bundle.as_deref().map(read_bundle).transpose()?,
            same_version_for_all_models: self.same_version_for_all_models,
            firmware_object: self.firmware_object.clone().unwrap_or_default(),
        })
    }
}

/// A bundle file (`--bundle`), validated here so a mistake is named before
/// anything is sent, in the wire form.
pub fn read_bundle(path: &std::path::Path) -> anyhow::Result<v1::FirmwareBundle> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("read --bundle {}", path.display()))?;
    bundle_from_text(&text).map_err(|e| anyhow::anyhow!("--bundle {}: {e}", path.display()))
}

/// A bundle document (YAML, or JSON), validated, in the wire form.
pub fn bundle_from_text(text: &str) -> anyhow::Result<v1::FirmwareBundle> {
    let bundle = rackflow_domain::bundle::FirmwareBundle::from_yaml(text)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(v1::FirmwareBundle {
        name: bundle.name.clone(),
        entries: bundle
            .models
            .iter()
            .flat_map(|(model, types)| {
                types.iter().map(|(ty, version)| v1::FirmwareBundleEntry {
                    rack_model: model.clone(),
                    component_type: *ty as i32,
                    version: version.clone(),
                })
            })
            .collect(),
    })
}

/// `rackflow firmware upgrade`.
pub async fn run_firmware(
    server: &crate::client::ServerAddress,
    command: &FirmwareCommand,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let FirmwareCommand::Upgrade(args) = command;
    let request = args.to_request()?;
    let mut flow = client::connect(server).await?;
    let response = flow
        .upgrade_firmware(request)
        .await
        .context("firmware upgrade")?;
    print_task_ids(response.into_inner(), output)
}
