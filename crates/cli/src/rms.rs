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
use tracing_subscriber::EnvFilter;

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
    init_tracing();
    let config = args.config()?;
    tracing::info!(
        listen = %config.listen,
        backend = ?config.nodes.backend,
        firmware_dir = %config.workflows.firmware_dir.display(),
        "starting rack manager"
    );
    let shutdown = CancellationToken::new();
    spawn_signal_handler(shutdown.clone())?;
    rackflow_rms::server::serve(config, shutdown)
        .await
        .context("rack manager")
}

/// Logs to stderr, filtered by `RUST_LOG` (default `info`).
fn init_tracing() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // A second initialisation (tests) is harmless; ignore it.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// Cancels `token` on SIGINT or SIGTERM; a second signal exits at once.
fn spawn_signal_handler(token: CancellationToken) -> anyhow::Result<()> {
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("install SIGTERM handler")?;
    tokio::spawn(async move {
        for attempt in 0.. {
            #[cfg(unix)]
            let name = tokio::select! {
                r = tokio::signal::ctrl_c() => { if r.is_err() { return; } "SIGINT" }
                _ = term.recv() => "SIGTERM",
            };
            #[cfg(not(unix))]
            let name = {
                if tokio::signal::ctrl_c().await.is_err() {
                    return;
                }
                "ctrl-c"
            };
            if attempt == 0 {
                tracing::info!(
                    signal = name,
                    "rack manager shutting down (send again to stop at once)"
                );
                token.cancel();
            } else {
                tracing::warn!(signal = name, "second signal: exiting now");
                std::process::exit(130);
            }
        }
    });
    Ok(())
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
