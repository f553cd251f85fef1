//! Secrets at rest (decision C5): AES-256-GCM envelopes under a data key
//! read from a file, each with its own random nonce and the id of the key
//! that sealed it, so keys can rotate — the active key seals, the active
//! and previous keys open, and a rotation re-seals everything under the
//! active one.
//!
//! Envelope: `rfs1:<key id>:<base64 of nonce ‖ ciphertext ‖ tag>`; the key
//! id is the first 8 bytes of the key's SHA-256, in hex (names the key, says
//! nothing about it).

use std::path::{Path, PathBuf};

use aes_gcm::aead::{Aead, KeyInit, OsRng, Payload, rand_core::RngCore};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::SecurityError;

const PREFIX: &str = "rfs1";
const NONCE_LEN: usize = 12;
/// Binds every envelope to its purpose: a ciphertext of another use of the
/// same key does not open as firmware credentials.
const ASSOCIATED_DATA: &[u8] = b"rackflow/secret/v1";

/// `[secrets]` of the flow server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecretsSection {
    /// The data key that seals new secrets: a file holding 32 random bytes
    /// in base64 (`rackflow secrets generate-key`). Unset: firmware
    /// credentials are refused.
    pub key_file: Option<PathBuf>,
    /// Keys that still open what they sealed (after a rotation, until
    /// `rackflow secrets rotate` has re-sealed everything).
    pub previous_key_files: Vec<PathBuf>,
}

impl SecretsSection {
    /// The keys, read and checked; `None` without `key_file`.
    pub fn keys(&self) -> Result<Option<DataKeys>, SecurityError> {
        let Some(active) = &self.key_file else {
            if !self.previous_key_files.is_empty() {
                return Err(SecurityError::Invalid {
                    key: "secrets.previous_key_files",
                    detail: "needs secrets.key_file (the key new secrets are sealed with)".into(),
                });
            }
            return Ok(None);
        };
        let active = read_key("secrets.key_file", active)?;
        let previous = self
            .previous_key_files
            .iter()
            .map(|path| read_key("secrets.previous_key_files", path))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(DataKeys::new(active, previous)))
    }
}

/// Why an envelope does not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("not a sealed secret (expected rfs1:<key id>:<data>)")]
    Malformed,
    #[error("sealed with key {0}, which is not configured (secrets.key_file / previous_key_files)")]
    UnknownKey(String),
    #[error("does not open under key {0}: altered, or sealed for another purpose")]
    Corrupt(String),
    #[error("too large to seal")]
    TooLarge,
}

struct DataKey {
    id: String,
    cipher: Aes256Gcm,
}

impl DataKey {
    fn new(bytes: &[u8; 32]) -> DataKey {
        let digest = Sha256::digest(bytes);
        let id = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        DataKey {
            id,
            cipher: Aes256Gcm::new(bytes.into()),
        }
    }
}

/// The active key and the previous ones. `Debug` shows key ids only.
pub struct DataKeys {
    active: DataKey,
    previous: Vec<DataKey>,
}

impl std::fmt::Debug for DataKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataKeys")
            .field("active", &self.active.id)
            .field(
                "previous",
                &self.previous.iter().map(|k| &k.id).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl DataKeys {
    pub fn new(active: [u8; 32], previous: Vec<[u8; 32]>) -> DataKeys {
        DataKeys {
            active: DataKey::new(&active),
            previous: previous.iter().map(DataKey::new).collect(),
        }
    }

    /// Id of the key new secrets are sealed with.
    pub fn active_id(&self) -> &str {
        &self.active.id
    }

    /// Seals `plaintext` under the active key with a fresh nonce.
    pub fn seal(&self, plaintext: &[u8]) -> Result<String, SecretError> {
        let mut nonce = [0u8; NONCE_LEN];
        OsRng.fill_bytes(&mut nonce);
        let sealed = self
            .active
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: ASSOCIATED_DATA,
                },
            )
            // AES-GCM refuses only inputs of 64 GiB and more.
            .map_err(|_| SecretError::TooLarge)?;
        let mut data = nonce.to_vec();
        data.extend_from_slice(&sealed);
        Ok(format!(
            "{PREFIX}:{}:{}",
            self.active.id,
            BASE64.encode(data)
        ))
    }

    /// Opens an envelope sealed under any configured key.
    pub fn open(&self, envelope: &str) -> Result<Vec<u8>, SecretError> {
        let (id, data) = split(envelope)?;
        let key = std::iter::once(&self.active)
            .chain(&self.previous)
            .find(|k| k.id == id)
            .ok_or_else(|| SecretError::UnknownKey(id.to_string()))?;
        if data.len() <= NONCE_LEN {
            return Err(SecretError::Malformed);
        }
        let (nonce, sealed) = data.split_at(NONCE_LEN);
        key.cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: sealed,
                    aad: ASSOCIATED_DATA,
                },
            )
            .map_err(|_| SecretError::Corrupt(id.to_string()))
    }

    /// The envelope sealed under the active key, or `None` when it already
    /// is (a rotation's step).
    pub fn reseal(&self, envelope: &str) -> Result<Option<String>, SecretError> {
        let (id, _) = split(envelope)?;
        if id == self.active.id {
            return Ok(None);
        }
        Ok(Some(self.seal(&self.open(envelope)?)?))
    }
}

/// The key id and the decoded data of an envelope.
fn split(envelope: &str) -> Result<(&str, Vec<u8>), SecretError> {
    let mut parts = envelope.splitn(3, ':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(PREFIX), Some(id), Some(data)) if !id.is_empty() => BASE64
            .decode(data)
            .map(|data| (id, data))
            .map_err(|_| SecretError::Malformed),
        _ => Err(SecretError::Malformed),
    }
}

/// A new random data key, base64 (the key file's contents).
pub fn generate_key() -> String {
    let mut key = [0u8; 32];
    OsRng.fill_bytes(&mut key);
    BASE64.encode(key)
}

/// Reads a key file: base64 of exactly 32 bytes. The key is never echoed.
fn read_key(key: &'static str, path: &Path) -> Result<[u8; 32], SecurityError> {
    let text = std::fs::read_to_string(path).map_err(|source| SecurityError::Read {
        key,
        path: path.to_path_buf(),
        source,
    })?;
    let bytes = BASE64
        .decode(text.trim())
        .map_err(|_| SecurityError::Invalid {
            key,
            detail: format!("{} is not base64", path.display()),
        })?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|b: Vec<u8>| SecurityError::Invalid {
            key,
            detail: format!(
                "{} holds {} bytes; a data key is 32 (rackflow secrets generate-key)",
                path.display(),
                b.len()
            ),
        })?;
    warn_if_readable_by_others(key, path);
    Ok(bytes)
}

#[cfg(unix)]
fn warn_if_readable_by_others(key: &'static str, path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            setting = key, path = %path.display(),
            "data key file is readable by group or others; chmod 600 it"
        );
    }
}

#[cfg(not(unix))]
fn warn_if_readable_by_others(_: &'static str, _: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_and_differs_from_its_plaintext() {
        let keys = DataKeys::new([7; 32], vec![]);
        let a = keys.seal(b"root:hunter2").unwrap();
        let b = keys.seal(b"root:hunter2").unwrap();
        assert_ne!(a, b, "a fresh nonce per secret");
        assert!(!a.contains("hunter2"));
        assert!(a.starts_with(&format!("rfs1:{}:", keys.active_id())));
        assert_eq!(keys.open(&a).unwrap(), b"root:hunter2");
        assert!(!format!("{keys:?}").contains("7, 7"));
    }

    #[test]
    fn altered_foreign_and_malformed_envelopes_are_refused() {
        let keys = DataKeys::new([7; 32], vec![]);
        let sealed = keys.seal(b"secret").unwrap();
        let mut altered: Vec<char> = sealed.chars().collect();
        let last = altered.len() - 3;
        altered[last] = if altered[last] == 'A' { 'B' } else { 'A' };
        let altered: String = altered.into_iter().collect();
        assert!(matches!(
            keys.open(&altered),
            Err(SecretError::Corrupt(_) | SecretError::Malformed)
        ));
        let other = DataKeys::new([9; 32], vec![]);
        assert_eq!(
            other.open(&sealed),
            Err(SecretError::UnknownKey(keys.active_id().to_string()))
        );
        for bad in ["", "rfs1", "rfs1::AAAA", "rfs2:abc:AAAA", "rfs1:abc:!!!"] {
            assert!(keys.open(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rotation_reseals_under_the_new_key_and_old_envelopes_still_open() {
        let old = DataKeys::new([1; 32], vec![]);
        let sealed = old.seal(b"secret").unwrap();
        let rotated = DataKeys::new([2; 32], vec![[1; 32]]);
        assert_eq!(rotated.open(&sealed).unwrap(), b"secret");
        let resealed = rotated.reseal(&sealed).unwrap().expect("re-sealed");
        assert!(resealed.starts_with(&format!("rfs1:{}:", rotated.active_id())));
        assert_eq!(rotated.reseal(&resealed).unwrap(), None);
        // Without the old key, only the new envelope opens.
        let new_only = DataKeys::new([2; 32], vec![]);
        assert_eq!(new_only.open(&resealed).unwrap(), b"secret");
        assert!(new_only.open(&sealed).is_err());
    }

    #[test]
    fn key_files_are_checked() {
        let dir = std::env::temp_dir().join(format!("rackflow-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.key");
        std::fs::write(&good, format!("{}\n", generate_key())).unwrap();
        let short = dir.join("short.key");
        std::fs::write(&short, BASE64.encode([1u8; 16])).unwrap();
        let section = |key: &Path| SecretsSection {
            key_file: Some(key.to_path_buf()),
            previous_key_files: vec![],
        };
        assert!(section(&good).keys().unwrap().is_some());
        let err = section(&short).keys().unwrap_err().to_string();
        assert!(
            err.starts_with("secrets.key_file") && err.contains("16 bytes"),
            "{err}"
        );
        let err = section(&dir.join("missing"))
            .keys()
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("secrets.key_file: read"), "{err}");
        assert!(SecretsSection::default().keys().unwrap().is_none());
        let err = SecretsSection {
            key_file: None,
            previous_key_files: vec![good],
        }
        .keys()
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("secrets.previous_key_files"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
