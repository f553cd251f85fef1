//! `rackflow secrets …`: data keys for firmware credentials at rest.
//! `generate-key` makes a key file locally; `rotate` asks the server to
//! re-seal every stored secret under its active key.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use rackflow_api::v1;
use serde::Serialize;

use crate::client::{self, ServerAddress};
use crate::output::{OutputFormat, print_json};

#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// Write a new random data key (32 bytes, base64) to FILE, readable by
    /// its owner only; use it as `secrets.key_file`.
    GenerateKey {
        /// Where to write the key; refuses to overwrite a file.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Re-seal every stored secret under the server's active data key
    /// (after moving the old key to `secrets.previous_key_files` and
    /// restarting with the new one as `secrets.key_file`).
    Rotate,
}

#[derive(Debug, Serialize)]
struct RotationView {
    active_key_id: String,
    resealed: i64,
    already_current: i64,
    failures: Vec<String>,
}

pub async fn run(
    server: &ServerAddress,
    command: &SecretsCommand,
    output: OutputFormat,
) -> anyhow::Result<()> {
    match command {
        SecretsCommand::GenerateKey { out } => generate_key(out),
        SecretsCommand::Rotate => rotate(server, output).await,
    }
}

fn generate_key(out: &PathBuf) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(out)
        .with_context(|| format!("create key file {} (it must not exist yet)", out.display()))?;
    writeln!(file, "{}", rackflow_security::secrets::generate_key())
        .with_context(|| format!("write key file {}", out.display()))?;
    crate::outln!("data key written to {} (mode 600)", out.display());
    Ok(())
}

async fn rotate(server: &ServerAddress, output: OutputFormat) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    let reply = flow
        .extensions()
        .rotate_secrets(v1::RotateSecretsRequest {})
        .await
        .context("rotate secrets")?
        .into_inner();
    let view = RotationView {
        active_key_id: reply.active_key_id,
        resealed: reply.resealed,
        already_current: reply.already_current,
        failures: reply.failures,
    };
    match output {
        OutputFormat::Json => print_json(&view)?,
        OutputFormat::Table => {
            crate::outln!(
                "sealed under key {}: {} re-sealed, {} already current, {} not re-sealed",
                view.active_key_id,
                view.resealed,
                view.already_current,
                view.failures.len()
            );
            for failure in &view.failures {
                crate::outln!("  {failure}");
            }
        }
    }
    if view.failures.is_empty() {
        Ok(())
    } else {
        Err(anyhow::anyhow!(
            "{} secrets were not re-sealed; keep the old key configured until they are",
            view.failures.len()
        ))
    }
}
