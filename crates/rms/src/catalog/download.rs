//! Fetching a manifest's artifacts into a directory of the firmware store.
//!
//! Each file is streamed to `<name>.part` while its SHA-256 is computed, and
//! renamed to `<name>` only when the digest matches the manifest's, so a
//! file under its final name is always complete and verified (a file already
//! there with the right digest is kept, which is how a restart resumes). An
//! access token is sent as `Authorization: Bearer` and never logged; URLs
//! are logged without their query string.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::StreamExt as _;
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncWriteExt as _;
use tokio_util::sync::CancellationToken;

use super::manifest::{Artifact, redact_url};
use crate::backend::Secret;

/// Limits of one object's download.
#[derive(Debug, Clone)]
pub struct DownloadLimits {
    /// Files fetched at once.
    pub concurrency: usize,
    /// Bound on one file's transfer.
    pub timeout: Duration,
    /// Largest file accepted.
    pub max_bytes: u64,
}

/// Fetches every artifact into `dir`. `Err` summarises the required
/// artifacts that could not be fetched and verified (optional ones only log).
pub async fn fetch_all(
    http: &reqwest::Client,
    artifacts: Vec<Artifact>,
    dir: &Path,
    token: Option<&Secret>,
    limits: &DownloadLimits,
    cancel: &CancellationToken,
) -> Result<(), String> {
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let results: Vec<(Artifact, Result<(), String>)> =
        futures_util::stream::iter(artifacts.into_iter().map(|artifact| async move {
            let result = tokio::select! {
                result = fetch_one(http, &artifact, dir, token, limits) => result,
                () = cancel.cancelled() => Err("download cancelled".to_owned()),
            };
            if result.is_err() {
                // Never leave a partial file behind.
                let _ = tokio::fs::remove_file(part_path(dir, &artifact.filename)).await;
            }
            (artifact, result)
        }))
        .buffer_unordered(limits.concurrency.max(1))
        .collect()
        .await;
    let mut failures = Vec::new();
    for (artifact, result) in results {
        match result {
            Ok(()) => tracing::debug!(file = %artifact.filename, "firmware artifact ready"),
            Err(error) if artifact.required => {
                tracing::warn!(file = %artifact.filename, url = %redact_url(&artifact.url), %error, "firmware artifact download failed");
                failures.push(format!("{}: {error}", artifact.filename));
            }
            Err(error) => {
                tracing::warn!(file = %artifact.filename, url = %redact_url(&artifact.url), %error, "optional firmware artifact download failed");
            }
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        failures.sort();
        Err(format!(
            "{} required firmware artifact download(s) failed: {}",
            failures.len(),
            failures.join("; ")
        ))
    }
}

/// Whether `dir` holds every required artifact under its final name.
pub async fn all_present(artifacts: &[Artifact], dir: &Path) -> bool {
    for artifact in artifacts.iter().filter(|a| a.required) {
        if tokio::fs::metadata(dir.join(&artifact.filename))
            .await
            .is_err()
        {
            return false;
        }
    }
    true
}

fn part_path(dir: &Path, filename: &str) -> PathBuf {
    dir.join(format!("{filename}.part"))
}

async fn fetch_one(
    http: &reqwest::Client,
    artifact: &Artifact,
    dir: &Path,
    token: Option<&Secret>,
    limits: &DownloadLimits,
) -> Result<(), String> {
    let final_path = dir.join(&artifact.filename);
    if let Some(expected) = &artifact.sha256
        && let Ok(existing) = file_sha256(&final_path).await
        && &existing == expected
    {
        return Ok(());
    }
    let mut request = http.get(&artifact.url).timeout(limits.timeout);
    if let Some(token) = token {
        request = request.bearer_auth(token.expose());
    }
    let response = request.send().await.map_err(|e| {
        // reqwest's message carries the URL; say it without the query.
        format!(
            "GET {} failed: {}",
            redact_url(&artifact.url),
            e.without_url()
        )
    })?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!(
            "GET {} answered HTTP {status}",
            redact_url(&artifact.url)
        ));
    }
    if response
        .content_length()
        .is_some_and(|len| len > limits.max_bytes)
    {
        return Err(format!(
            "larger than the limit of {} bytes",
            limits.max_bytes
        ));
    }
    let part = part_path(dir, &artifact.filename);
    let mut file = tokio::fs::File::create(&part)
        .await
        .map_err(|e| format!("cannot write {}: {e}", part.display()))?;
    let mut hasher = Sha256::new();
    let mut written: u64 = 0;
    let mut response = response;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("transfer failed: {}", e.without_url()))?
    {
        written += chunk.len() as u64;
        if written > limits.max_bytes {
            return Err(format!(
                "larger than the limit of {} bytes",
                limits.max_bytes
            ));
        }
        hasher.update(&chunk);
        file.write_all(&chunk)
            .await
            .map_err(|e| format!("cannot write {}: {e}", part.display()))?;
    }
    file.sync_all()
        .await
        .map_err(|e| format!("cannot write {}: {e}", part.display()))?;
    drop(file);
    let actual = hex(&hasher.finalize());
    if let Some(expected) = &artifact.sha256
        && &actual != expected
    {
        return Err(format!(
            "checksum mismatch: the manifest says sha256 {expected}, the file has {actual}"
        ));
    }
    tokio::fs::rename(&part, &final_path)
        .await
        .map_err(|e| format!("cannot move {} into place: {e}", part.display()))?;
    Ok(())
}

/// SHA-256 of a file, lower-case hex.
pub async fn file_sha256(path: &Path) -> std::io::Result<String> {
    use tokio::io::AsyncReadExt as _;
    let mut file = tokio::fs::File::open(path).await?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buffer).await?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
