//! `rackflow rms serve`: the rack manager (RackManager gRPC API, node back
//! ends, `/metrics`).
//!
//! Configuration: built-in defaults → `--config` TOML file (`docs/rms.md`)
//! → flags. SIGINT or SIGTERM stops accepting RPCs, then drains the job
//! tracker (active jobs are cancelled and waited for, bounded by
//! `[workflows] shutdown_timeout_seconds`); a second signal exits at once.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use rackflow_rms::config::RmsConfig;
use tokio_util::sync::CancellationToken;

/// `rackflow rms …`.
#[derive(Debug, Subcommand)]
pub enum RmsCommand {
    /// Run the rack manager.
    Serve(RmsServeArgs),
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
pub async fn run(command: &RmsCommand) -> anyhow::Result<()> {
    match command {
        RmsCommand::Serve(args) => serve(args).await,
    }
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
