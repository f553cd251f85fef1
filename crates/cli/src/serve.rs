//! `rackflow serve`: the flow server.
//!
//! Configuration layers, later wins: built-in defaults → `--config` TOML file
//! → environment (`RACKFLOW_LISTEN`, `RACKFLOW_DB`, `DATABASE_URL`, …) →
//! flags. The database URL may hold a password: it is never printed.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use rackflow_server::Config;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

/// Flags of `rackflow serve`.
#[derive(Debug, Clone, Default, Args)]
pub struct ServeArgs {
    /// gRPC listen address [default: 127.0.0.1:50051].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// SQLite database file (created if missing) [default: ./rackflow.db].
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// PostgreSQL URL; wins over --db (and so does DATABASE_URL in the
    /// environment). Never printed.
    #[arg(long, value_name = "URL", env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// TOML configuration file (see docs/configuration.md).
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// Serve the web console on this HTTP address (e.g. 127.0.0.1:8480);
    /// it has no login: keep it on loopback or behind a proxy.
    #[arg(long, value_name = "ADDR")]
    pub http_listen: Option<SocketAddr>,
}

impl ServeArgs {
    /// The loaded configuration with the flags applied on top.
    pub fn config(&self) -> anyhow::Result<Config> {
        let mut config = Config::load(self.config.as_deref()).context("load configuration")?;
        if let Some(listen) = self.listen {
            config.listen = listen;
        }
        if let Some(listen) = self.http_listen {
            config.console.listen = listen;
            config.console.enabled = true;
        }
        if let Some(db) = &self.db {
            config.database.sqlite_path.clone_from(db);
        }
        if let Some(url) = self.database_url.as_ref().filter(|u| !u.trim().is_empty()) {
            config.database.url = Some(url.clone());
        }
        Ok(config)
    }
}

/// How the long-running commands write their log lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (coloured on a terminal).
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`, the
    /// event's fields flattened, `message`), for log pipelines.
    Json,
}

static LOG_FORMAT: std::sync::OnceLock<LogFormat> = std::sync::OnceLock::new();

/// Sets the format [`init_tracing`] uses (the global `--log-format`); the
/// first call wins.
pub fn set_log_format(format: LogFormat) {
    let _ = LOG_FORMAT.set(format);
}

/// Logs to stderr, filtered by `RUST_LOG` (default `info`), as text or JSON
/// (`--log-format`). Shared by the long-running commands (`serve`,
/// `rms serve`).
///
/// A log line that cannot be written (the reader of a `serve | tee log`
/// pipe went away, a full disk behind a redirect) is dropped: the fmt layer
/// would otherwise report its own write error with `eprintln!`, which panics
/// on a closed stderr — inside whatever task logged, h2's connection tasks
/// and the signal handler included — and leaves a server that answers
/// nothing and ignores SIGTERM.
pub(crate) fn init_tracing() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| LossyStderr)
        .log_internal_errors(false);
    // A second initialisation (tests) is harmless; ignore it.
    let _ = match LOG_FORMAT.get().copied().unwrap_or_default() {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
}

/// Standard error whose write errors are swallowed (see [`init_tracing`]):
/// a log line is worth less than the server that writes it.
struct LossyStderr;

impl std::io::Write for LossyStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // One write per event keeps concurrent lines whole; on error the
        // line is reported written so that `write_all` stops here.
        Ok(std::io::stderr().lock().write(buf).unwrap_or(buf.len()))
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let _ = std::io::stderr().lock().write_all(buf);
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

/// Cancels `token` on SIGINT or SIGTERM. A second signal exits at once.
/// `what` names the server in the log line.
pub(crate) fn spawn_signal_handler(
    token: CancellationToken,
    what: &'static str,
) -> anyhow::Result<()> {
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
                    "{what} shutting down (send again to stop at once)"
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

/// `rackflow serve`.
pub async fn run(args: &ServeArgs) -> anyhow::Result<()> {
    init_tracing();
    let config = args.config()?;
    match &config.database.url {
        Some(_) => {
            tracing::info!(listen = %config.listen, store = "postgres", "starting flow server")
        }
        None => tracing::info!(
            listen = %config.listen,
            store = "sqlite",
            path = %config.database.sqlite_path.display(),
            "starting flow server"
        ),
    }
    let shutdown = CancellationToken::new();
    spawn_signal_handler(shutdown.clone(), "flow server")?;
    let url = config.database.url.clone();
    rackflow_server::serve(config, shutdown)
        .await
        .map_err(|err| {
            // Driver errors may echo their connection string; never print it.
            let mut text = format!("flow server: {err}");
            if let Some(url) = url.as_deref().filter(|u| !u.is_empty()) {
                text = text.replace(url, "<database url>");
            }
            anyhow::anyhow!(text)
        })
}
