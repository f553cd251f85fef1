//! `rackflow rms serve`: the rack manager (RackManager gRPC API, node back
//! ends, `/metrics`); `rackflow rms sync`: registers Flow's inventory with a
//! rack manager (the nodes the `rms` provider addresses).
//!
//! Configuration: built-in defaults → `--config` TOML file (`docs/rms.md`)
//! → flags. SIGINT or SIGTERM stops accepting RPCs, then drains the job
//! tracker (active jobs are cancelled and waited for, bounded by
//! `[workflows] shutdown_timeout_seconds`); a second signal exits at once.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use rackflow_engine::manager::rms::{RmsManager, RmsProviderConfig};
use rackflow_rms::config::RmsConfig;
use tokio_util::sync::CancellationToken;

/// `rackflow rms …`.
#[derive(Debug, Subcommand)]
pub enum RmsCommand {
    /// Run the rack manager.
    Serve(RmsServeArgs),
    /// Register Flow's inventory with a rack manager: every component with
    /// an external id and a BMC address becomes node `external id` in the
    /// rack of the rack's external id (its name when it has none).
    /// Registered nodes are updated only while idle; nodes busy with a job
    /// are refused and reported.
    Sync(RmsSyncArgs),
    /// The rack manager's firmware-object catalogue: add, list, get,
    /// set-default, delete, history, compare.
    #[command(subcommand)]
    FirmwareObject(crate::firmware_object::FirmwareObjectCommand),
}

/// Flags of `rackflow rms sync`.
#[derive(Debug, Clone, Default, Args)]
pub struct RmsSyncArgs {
    /// The rack manager: `--config` (Flow's file; its `[rms]` section also
    /// gives the BMC login) and `--rack-manager`.
    #[command(flatten)]
    pub rack_manager: crate::firmware_object::RackManagerArgs,
    /// BMC user name the nodes are registered with [default:
    /// rms.bmc_username]; none: no credentials.
    #[arg(long, value_name = "USER")]
    pub bmc_username: Option<String>,
    /// File whose first line is the BMC password [default:
    /// rms.bmc_password_file].
    #[arg(long, value_name = "FILE")]
    pub bmc_password_file: Option<PathBuf>,
    /// BMC port of the nodes [default: rms.bmc_port; 0 = 443].
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u32).range(0..=65_535))]
    pub bmc_port: Option<u32>,
    /// Print the nodes that would be registered; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Flags of `rackflow rms serve`.
#[derive(Debug, Clone, Default, Args)]
pub struct RmsServeArgs {
    /// gRPC listen address [default: 127.0.0.1:8801].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// `/metrics` listen address [default: 127.0.0.1:8802].
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// TOML configuration file (see docs/rms.md).
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
}

impl RmsServeArgs {
    /// The loaded configuration with the flags applied on top.
    pub fn config(&self) -> anyhow::Result<RmsConfig> {
        let mut config =
            RmsConfig::load(self.config.as_deref()).context("load rack manager configuration")?;
        if let Some(listen) = self.listen {
            config.listen = listen;
        }
        if let Some(listen) = self.metrics_listen {
            config.metrics.listen = listen;
        }
        Ok(config)
    }
}

/// Runs one `rackflow rms` command.
pub async fn run(
    command: &RmsCommand,
    server: &crate::client::ServerAddress,
    output: crate::output::OutputFormat,
) -> anyhow::Result<()> {
    match command {
        RmsCommand::Serve(args) => serve(args).await,
        RmsCommand::Sync(args) => sync(args, server, output).await,
        RmsCommand::FirmwareObject(command) => crate::firmware_object::run(command, output).await,
    }
}

/// The `[rms]` settings of `rms sync`: the file's, then the flags.
fn sync_settings(args: &RmsSyncArgs) -> anyhow::Result<RmsProviderConfig> {
    let mut rms = args.rack_manager.settings()?;
    if let Some(user) = &args.bmc_username {
        rms.bmc_username = user.clone();
    }
    if let Some(file) = &args.bmc_password_file {
        rms.bmc_password_file = Some(file.clone());
    }
    if let Some(port) = args.bmc_port {
        rms.bmc_port = port;
    }
    Ok(rms)
}

/// `rackflow rms sync`.
async fn sync(
    args: &RmsSyncArgs,
    server: &crate::client::ServerAddress,
    output: crate::output::OutputFormat,
) -> anyhow::Result<()> {
    use rackflow_engine::manager::rms_sync::{self, NodeSource, SyncOutcome};
    let settings = sync_settings(args)?;
    let login = settings.bmc_login()?;
    let mut flow = crate::client::connect(server).await?;
    let racks = crate::rack::all_racks(&mut flow, true).await?;
    let sources: Vec<NodeSource> = racks.iter().flat_map(node_sources).collect();
    let outcome = if args.dry_run {
        let (nodes, skipped) = rms_sync::nodes_of(&sources, &login);
        SyncOutcome {
            messages: nodes
                .iter()
                .map(|n| format!("would register {} in rack {}", n.node_id, n.rack_id))
                .collect(),
            skipped,
            ..SyncOutcome::default()
        }
    } else {
        let manager = RmsManager::new(settings.clone())?;
        let mut client = manager.client();
        rms_sync::register(&mut client, &sources, &login)
            .await
            .map_err(|status| {
                anyhow::anyhow!(
                    "register nodes with the rack manager at {}: {} ({:?})",
                    settings.address,
                    status.message(),
                    status.code()
                )
            })?
    };
    match output {
        crate::output::OutputFormat::Json => crate::output::print_json(&outcome)?,
        crate::output::OutputFormat::Table => {
            for message in &outcome.messages {
                crate::outln!("{message}");
            }
            for reason in &outcome.skipped {
                crate::outln!("skipped {reason}");
            }
            if !args.dry_run {
                crate::outln!(
                    "{} nodes sent: {} registered, {} refused; {} components skipped",
                    outcome.sent,
                    outcome.registered,
                    outcome.refused,
                    outcome.skipped.len()
                );
            }
        }
    }
    anyhow::ensure!(
        outcome.refused == 0,
        "the rack manager refused {} nodes (see above)",
        outcome.refused
    );
    Ok(())
}

/// The node sources of one rack read from Flow.
fn node_sources(
    rack: &rackflow_api::v1::Rack,
) -> Vec<rackflow_engine::manager::rms_sync::NodeSource> {
    let info = rack.info.clone().unwrap_or_default();
    rack.components
        .iter()
        .filter_map(|c| {
            let component_type = rackflow_domain::ComponentType::from_i32(c.r#type)?;
            let ci = c.info.clone().unwrap_or_default();
            let bmc = c.bmcs.first();
            Some(rackflow_engine::manager::rms_sync::NodeSource {
                rack_id: if rack.external_id.is_empty() {
                    info.name.clone()
                } else {
                    rack.external_id.clone()
                },
                rack_model: info.model.clone(),
                component_type,
                name: ci.name,
                manufacturer: ci.manufacturer,
                external_id: Some(c.component_id.clone()).filter(|s| !s.is_empty()),
                bmc_ip: bmc
                    .and_then(|b| b.ip_address.clone())
                    .filter(|s| !s.is_empty()),
                bmc_mac: bmc.map(|b| b.mac_address.clone()),
            })
        })
        .collect()
}

async fn serve(args: &RmsServeArgs) -> anyhow::Result<()> {
    crate::serve::init_tracing();
    let config = args.config()?;
    tracing::info!(
        listen = %config.listen,
        backend = ?config.nodes.backend,
        firmware_dir = %config.workflows.firmware_dir.display(),
        "starting rack manager"
    );
    let shutdown = CancellationToken::new();
    crate::serve::spawn_signal_handler(shutdown.clone(), "rack manager")?;
    rackflow_rms::server::serve(config, shutdown)
        .await
        .context("rack manager")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn flags_override_the_file() {
        let dir = std::env::temp_dir().join(format!("rms-cli-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("rms.toml");
        std::fs::write(
            &file,
            "listen = \"127.0.0.1:9001\"\n[workflows]\nmax_tracked_jobs = 7\n",
        )
        .unwrap();
        let cli = crate::Cli::try_parse_from([
            "rackflow",
            "rms",
            "serve",
            "--listen",
            "127.0.0.1:9100",
            "--config",
            file.to_str().unwrap(),
        ])
        .unwrap();
        let crate::Command::Rms(RmsCommand::Serve(args)) = cli.command else {
            panic!("not rms serve");
        };
        let config = args.config().unwrap();
        assert_eq!(config.listen.port(), 9100);
        assert_eq!(config.workflows.max_tracked_jobs.get(), 7);
        std::fs::write(&file, "bogus = 1\n").unwrap();
        assert!(args.config().is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
