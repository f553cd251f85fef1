//! Secrets at rest, the engine's side: the data keys this server seals
//! and opens firmware credentials with, and the rotation that re-seals
//! every stored envelope under the active key.

use std::sync::Arc;

use rackflow_security::secrets::DataKeys;
use rackflow_store::{ResealOutcome, Store};

use crate::error::EngineError;

/// The data keys and the store their envelopes live in.
pub struct SecretKeeper {
    store: Arc<dyn Store>,
    keys: Option<Arc<DataKeys>>,
}

impl SecretKeeper {
    pub fn new(store: Arc<dyn Store>, keys: Option<Arc<DataKeys>>) -> SecretKeeper {
        SecretKeeper { store, keys }
    }

    /// The keys; `None` when no data key is configured.
    pub fn keys(&self) -> Option<&DataKeys> {
        self.keys.as_deref()
    }

    /// Re-seals every stored secret (tasks, runs, schedules) under the
    /// active key. Envelopes of an unknown key are reported, not touched.
    pub async fn rotate(&self) -> Result<(String, ResealOutcome), EngineError> {
        let keys = self.keys.clone().ok_or(EngineError::NoDataKey)?;
        let reseal = |envelope: &str| keys.reseal(envelope).map_err(|e| e.to_string());
        let outcome = self.store.secrets_reseal(&reseal).await?;
        tracing::info!(
            key = keys.active_id(),
            resealed = outcome.resealed,
            already_current = outcome.already_current,
            failed = outcome.failures.len(),
            "secrets re-sealed under the active data key"
        );
        for failure in &outcome.failures {
            tracing::warn!(%failure, "secret not re-sealed");
        }
        Ok((keys.active_id().to_string(), outcome))
    }
}
