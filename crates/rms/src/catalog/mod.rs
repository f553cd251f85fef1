//! The firmware-object catalogue: named, versioned firmware sets the rack
//! manager keeps, fetches, applies and compares against (issue 35).
//!
//! Owns the catalogue's state — objects (their manifest, hardware type,
//! availability, whether they are their hardware type's default) and the
//! apply history — its persistence, and the background download of each
//! object's artifacts into `{firmware_dir}/firmware_objects/{id}/`.
//!
//! Persistence: one JSON document, `{catalog_dir}/catalog.json`, rewritten
//! whole on every change (written to a temporary file, synced, renamed over
//! the old one, directory synced). A catalogue holds tens of objects and
//! changes a few times a day, so a whole-file rewrite costs nothing, and one
//! rename makes every change atomic — including "one default per hardware
//! type", which moves the flag between two objects in one write. The job
//! tracker stays in memory, as the reference's.
//!
//! Restart: objects whose download had not finished are fetched again (no
//! access token: tokens are never stored), and an available object whose
//! cached files have gone is marked unavailable and fetched again.

pub mod download;
pub mod manifest;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::backend::Secret;
pub use download::DownloadLimits;
pub use manifest::{Manifest, ManifestError};

/// Sub-directory of the firmware directory holding stored objects' files.
pub const OBJECT_CACHE_SUBDIR: &str = "firmware_objects";
/// Sub-directory of the firmware directory holding ephemeral objects' files.
pub const EPHEMERAL_CACHE_SUBDIR: &str = "firmware_objects_ephemeral";
/// History records kept; the oldest are dropped beyond it.
pub const HISTORY_CAPACITY: usize = 10_000;
const DOCUMENT_VERSION: u32 = 1;
/// Longest hardware type accepted (a rack model name).
pub const MAX_HARDWARE_TYPE_LEN: usize = 256;

/// Everything the catalogue refuses or fails with (mapped to gRPC codes in
/// `crate::service`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    AlreadyExists(String),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    FailedPrecondition(String),
    /// The catalogue file could not be written or read.
    #[error("firmware object catalogue: {0}")]
    Storage(String),
}

/// Where the catalogue lives and how it downloads.
#[derive(Debug, Clone)]
pub struct CatalogSettings {
    pub catalog_dir: PathBuf,
    pub firmware_dir: PathBuf,
    pub limits: DownloadLimits,
}

/// One object as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredObject {
    pub id: String,
    pub hardware_type: String,
    pub config_json: String,
    pub available: bool,
    pub is_default: bool,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
    /// Why the object is not available (a failed download); `None` while
    /// its download runs or once it is available.
    #[serde(default)]
    pub unavailable_reason: Option<String>,
}

/// One apply of an object to a rack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRecord {
    pub object_id: String,
    pub rack_id: String,
    pub firmware_type: String,
    pub applied_at: DateTime<Utc>,
    pub firmware_available: bool,
    pub hardware_type: String,
    pub node_ids: Vec<String>,
    /// The apply's parent job.
    #[serde(default)]
    pub job_id: String,
}

/// A stored object with its parsed manifest.
#[derive(Debug, Clone)]
pub struct CatalogObject {
    pub stored: StoredObject,
    pub manifest: Manifest,
}

impl CatalogObject {
    /// Path of the object's files, relative to the firmware directory (what
    /// firmware targets name).
    pub fn cache_prefix(&self) -> String {
        format!("{OBJECT_CACHE_SUBDIR}/{}", self.stored.id)
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Document {
    version: u32,
    objects: BTreeMap<String, StoredObject>,
    history: Vec<HistoryRecord>,
}

/// The catalogue. Cheap to share (`Arc`); every change is persisted before
/// it is answered.
pub struct Catalog {
    settings: CatalogSettings,
    /// The document; a tokio mutex because changes await the file write
    /// (local disk, never the network).
    state: tokio::sync::Mutex<Document>,
    /// Downloads in flight, by object id: (generation, stop token).
    downloads: Mutex<HashMap<String, (u64, CancellationToken)>>,
    generations: std::sync::atomic::AtomicU64,
    http: reqwest::Client,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("catalog_dir", &self.settings.catalog_dir)
            .finish_non_exhaustive()
    }
}

impl Catalog {
    /// Opens (or creates) the catalogue and resumes unfinished downloads.
    pub async fn open(settings: CatalogSettings) -> Result<Arc<Catalog>, CatalogError> {
        // Fail at startup, not at the first add, when the directory cannot
        // be made.
        tokio::fs::create_dir_all(&settings.catalog_dir)
            .await
            .map_err(|e| {
                CatalogError::Storage(format!(
                    "cannot create the catalogue directory {} (workflows.catalog_dir): {e}",
                    settings.catalog_dir.display()
                ))
            })?;
        let path = settings.catalog_dir.join("catalog.json");
        let document = match tokio::fs::read(&path).await {
            Ok(bytes) => {
                let document: Document = serde_json::from_slice(&bytes).map_err(|e| {
                    CatalogError::Storage(format!("{} is not a catalogue: {e}", path.display()))
                })?;
                if document.version != DOCUMENT_VERSION {
                    return Err(CatalogError::Storage(format!(
                        "{} has version {}; this rack manager reads version {DOCUMENT_VERSION}",
                        path.display(),
                        document.version
                    )));
                }
                document
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Document {
                version: DOCUMENT_VERSION,
                ..Document::default()
            },
            Err(e) => {
                return Err(CatalogError::Storage(format!(
                    "cannot read {}: {e}",
                    path.display()
                )));
            }
        };
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| CatalogError::Storage(format!("HTTP client: {e}")))?;
        let catalog = Arc::new(Catalog {
            settings,
            state: tokio::sync::Mutex::new(document),
            downloads: Mutex::new(HashMap::new()),
            generations: std::sync::atomic::AtomicU64::new(0),
            http,
            shutdown: CancellationToken::new(),
        });
        catalog.resume().await?;
        Ok(catalog)
    }

    /// Stops every download (server shutdown).
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// The firmware directory objects' files live under.
    pub fn firmware_dir(&self) -> &Path {
        &self.settings.firmware_dir
    }

    fn object_dir(&self, id: &str) -> PathBuf {
        self.settings
            .firmware_dir
            .join(OBJECT_CACHE_SUBDIR)
            .join(id)
    }

    /// Re-fetches what a restart interrupted; marks available objects whose
    /// files are gone unavailable and fetches them again.
    async fn resume(self: &Arc<Self>) -> Result<(), CatalogError> {
        let mut to_fetch = Vec::new();
        {
            let mut state = self.state.lock().await;
            let mut changed = false;
            for object in state.objects.values_mut() {
                let manifest = match Manifest::parse(&object.config_json) {
                    Ok(m) => m,
                    Err(e) => {
                        tracing::error!(object_id = %object.id, error = %e, "stored firmware object no longer parses");
                        continue;
                    }
                };
                let artifacts: Vec<_> = manifest.artifacts().into_iter().cloned().collect();
                if object.available {
                    if !download::all_present(&artifacts, &self.object_dir(&object.id)).await {
                        tracing::warn!(object_id = %object.id, "firmware object files missing; fetching again");
                        object.available = false;
                        object.updated = Utc::now();
                        changed = true;
                        to_fetch.push((object.id.clone(), artifacts));
                    }
                } else if object.unavailable_reason.is_none() {
                    tracing::info!(object_id = %object.id, "resuming firmware object download");
                    to_fetch.push((object.id.clone(), artifacts));
                }
            }
            if changed {
                self.persist(&state).await?;
            }
        }
        for (id, artifacts) in to_fetch {
            self.spawn_download(id, artifacts, None);
        }
        Ok(())
    }

    /// Adds an object; its artifacts are fetched in the background and it is
    /// available once all required ones are present and verified.
    pub async fn add(
        self: &Arc<Self>,
        config_json: &str,
        access_token: Option<Secret>,
        hardware_type: &str,
        set_default: bool,
    ) -> Result<CatalogObject, CatalogError> {
        let manifest = Manifest::parse(config_json)
            .map_err(|e| CatalogError::InvalidArgument(format!("invalid config_json: {e}")))?;
        let hardware_type = hardware_type.trim();
        if hardware_type.is_empty() {
            return Err(CatalogError::InvalidArgument(
                "hardware_type is required".to_owned(),
            ));
        }
        if hardware_type.len() > MAX_HARDWARE_TYPE_LEN
            || hardware_type.chars().any(char::is_control)
        {
            return Err(CatalogError::InvalidArgument(format!(
                "hardware_type must be at most {MAX_HARDWARE_TYPE_LEN} bytes of printable text"
            )));
        }
        let artifacts: Vec<_> = manifest.artifacts().into_iter().cloned().collect();
        let now = Utc::now();
        let stored = {
            let mut state = self.state.lock().await;
            if state.objects.contains_key(&manifest.id) {
                return Err(CatalogError::AlreadyExists(format!(
                    "firmware object {} already exists",
                    manifest.id
                )));
            }
            let mut next = state.clone();
            // The first object of a hardware type becomes its default.
            let make_default = set_default
                || !next
                    .objects
                    .values()
                    .any(|o| o.hardware_type == hardware_type && o.is_default);
            if make_default {
                for other in next.objects.values_mut() {
                    if other.hardware_type == hardware_type && other.is_default {
                        other.is_default = false;
                        other.updated = now;
                    }
                }
            }
            let stored = StoredObject {
                id: manifest.id.clone(),
                hardware_type: hardware_type.to_owned(),
                config_json: config_json.to_owned(),
                available: artifacts.is_empty(),
                is_default: make_default,
                created: now,
                updated: now,
                unavailable_reason: None,
            };
            next.objects.insert(stored.id.clone(), stored.clone());
            self.commit(&mut state, next).await?;
            stored
        };
        tracing::info!(object_id = %stored.id, hardware_type = %stored.hardware_type, artifacts = artifacts.len(), is_default = stored.is_default, "firmware object added");
        if !artifacts.is_empty() {
            self.spawn_download(stored.id.clone(), artifacts, access_token);
        }
        Ok(CatalogObject { stored, manifest })
    }

    pub async fn get(&self, id: &str) -> Result<CatalogObject, CatalogError> {
        let state = self.state.lock().await;
        let stored = state
            .objects
            .get(id)
            .cloned()
            .ok_or_else(|| not_found(id))?;
        drop(state);
        with_manifest(stored)
    }

    /// Objects by id, optionally only available ones and one hardware type.
    pub async fn list(&self, only_available: bool, hardware_type: &str) -> Vec<CatalogObject> {
        let state = self.state.lock().await;
        let stored: Vec<StoredObject> = state
            .objects
            .values()
            .filter(|o| !only_available || o.available)
            .filter(|o| hardware_type.is_empty() || o.hardware_type == hardware_type)
            .cloned()
            .collect();
        drop(state);
        stored
            .into_iter()
            .filter_map(|o| with_manifest(o).ok())
            .collect()
    }

    /// The default object of a hardware type.
    pub async fn default_for(&self, hardware_type: &str) -> Result<CatalogObject, CatalogError> {
        let state = self.state.lock().await;
        let stored = state
            .objects
            .values()
            .find(|o| o.hardware_type == hardware_type && o.is_default)
            .cloned()
            .ok_or_else(|| {
                CatalogError::NotFound(format!(
                    "no default firmware object for hardware type {hardware_type}"
                ))
            })?;
        drop(state);
        with_manifest(stored)
    }

    /// Makes an object its hardware type's default (the previous default
    /// loses the flag in the same write).
    pub async fn set_default(&self, id: &str) -> Result<CatalogObject, CatalogError> {
        let mut state = self.state.lock().await;
        let hardware_type = state
            .objects
            .get(id)
            .map(|o| o.hardware_type.clone())
            .ok_or_else(|| not_found(id))?;
        let now = Utc::now();
        let mut next = state.clone();
        for object in next.objects.values_mut() {
            if object.hardware_type != hardware_type {
                continue;
            }
            let default = object.id == id;
            if object.is_default != default {
                object.is_default = default;
                object.updated = now;
            }
        }
        let stored = next.objects.get(id).cloned().ok_or_else(|| not_found(id))?;
        self.commit(&mut state, next).await?;
        drop(state);
        tracing::info!(object_id = %id, %hardware_type, "firmware object is now the default");
        with_manifest(stored)
    }

    /// Deletes an object and its files, unless `in_use` names an apply that
    /// still runs on it.
    pub async fn delete(
        &self,
        id: &str,
        in_use: impl FnOnce(&str) -> Option<String>,
    ) -> Result<(), CatalogError> {
        let mut state = self.state.lock().await;
        if !state.objects.contains_key(id) {
            return Err(not_found(id));
        }
        if let Some(job) = in_use(id) {
            return Err(CatalogError::FailedPrecondition(format!(
                "firmware object {id} is in use by apply job {job}; delete it once the job ended"
            )));
        }
        let mut next = state.clone();
        next.objects.remove(id);
        self.commit(&mut state, next).await?;
        drop(state);
        if let Some((_, cancel)) = lock(&self.downloads).remove(id) {
            cancel.cancel();
        }
        let dir = self.object_dir(id);
        if let Err(e) = tokio::fs::remove_dir_all(&dir).await
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(object_id = %id, path = %dir.display(), error = %e, "failed to remove firmware object files");
        }
        tracing::info!(object_id = %id, "firmware object deleted");
        Ok(())
    }

    /// Records an apply.
    pub async fn record_apply(&self, record: HistoryRecord) -> Result<(), CatalogError> {
        let mut state = self.state.lock().await;
        let mut next = state.clone();
        next.history.push(record);
        if next.history.len() > HISTORY_CAPACITY {
            let excess = next.history.len() - HISTORY_CAPACITY;
            next.history.drain(..excess);
        }
        self.commit(&mut state, next).await
    }

    /// Apply history, newest first, filtered by object (empty: any) and
    /// racks (empty: all).
    pub async fn history(&self, object_id: &str, rack_ids: &[String]) -> Vec<HistoryRecord> {
        let state = self.state.lock().await;
        state
            .history
            .iter()
            .rev()
            .filter(|r| object_id.is_empty() || r.object_id == object_id)
            .filter(|r| rack_ids.is_empty() || rack_ids.contains(&r.rack_id))
            .cloned()
            .collect()
    }

    /// Fetches an ephemeral object's artifacts into `dir` (the apply waits
    /// for it; nothing is stored).
    pub async fn fetch_ephemeral(
        &self,
        manifest: &Manifest,
        token: Option<&Secret>,
        dir: &Path,
    ) -> Result<(), String> {
        let artifacts: Vec<_> = manifest.artifacts().into_iter().cloned().collect();
        download::fetch_all(
            &self.http,
            artifacts,
            dir,
            token,
            &self.settings.limits,
            &self.shutdown,
        )
        .await
    }

    fn spawn_download(
        self: &Arc<Self>,
        id: String,
        artifacts: Vec<manifest::Artifact>,
        token: Option<Secret>,
    ) {
        let cancel = self.shutdown.child_token();
        let generation = self
            .generations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some((_, previous)) =
            lock(&self.downloads).insert(id.clone(), (generation, cancel.clone()))
        {
            previous.cancel();
        }
        let catalog = Arc::clone(self);
        tokio::spawn(async move {
            let dir = catalog.object_dir(&id);
            let result = download::fetch_all(
                &catalog.http,
                artifacts,
                &dir,
                token.as_ref(),
                &catalog.settings.limits,
                &cancel,
            )
            .await;
            drop(token);
            {
                let mut downloads = lock(&catalog.downloads);
                // Only this download's own entry (a delete or a newer
                // download may have replaced it).
                if downloads.get(&id).is_some_and(|(g, _)| *g == generation) {
                    downloads.remove(&id);
                }
            }
            if cancel.is_cancelled() {
                tracing::info!(object_id = %id, "firmware object download stopped");
                return;
            }
            if let Err(e) = catalog.finish_download(&id, result).await {
                tracing::error!(object_id = %id, error = %e, "cannot record firmware object availability");
            }
        });
    }

    async fn finish_download(
        &self,
        id: &str,
        result: Result<(), String>,
    ) -> Result<(), CatalogError> {
        let mut state = self.state.lock().await;
        let Some(mut object) = state.objects.get(id).cloned() else {
            return Ok(()); // deleted meanwhile
        };
        match &result {
            Ok(()) => {
                object.available = true;
                object.unavailable_reason = None;
                tracing::info!(object_id = %id, "firmware object available");
            }
            Err(reason) => {
                object.available = false;
                object.unavailable_reason = Some(reason.clone());
                tracing::warn!(object_id = %id, %reason, "firmware object not available");
            }
        }
        object.updated = Utc::now();
        let mut next = state.clone();
        next.objects.insert(id.to_owned(), object);
        self.commit(&mut state, next).await
    }

    /// Persists `next` (a changed copy of `state`), then installs it: a
    /// failed write leaves memory as the file is.
    async fn commit(&self, state: &mut Document, next: Document) -> Result<(), CatalogError> {
        self.persist(&next).await?;
        *state = next;
        Ok(())
    }

    async fn persist(&self, document: &Document) -> Result<(), CatalogError> {
        let bytes = serde_json::to_vec_pretty(document)
            .map_err(|e| CatalogError::Storage(format!("cannot encode the catalogue: {e}")))?;
        let dir = self.settings.catalog_dir.clone();
        tokio::task::spawn_blocking(move || write_atomically(&dir, "catalog.json", &bytes))
            .await
            .map_err(|e| CatalogError::Storage(format!("catalogue write task failed: {e}")))?
            .map_err(|e| CatalogError::Storage(e.to_string()))
    }
}

/// Writes `dir/name` so that a crash leaves either the old or the new file:
/// temporary file, fsync, rename, fsync of the directory.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{name}.tmp"));
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}

fn with_manifest(stored: StoredObject) -> Result<CatalogObject, CatalogError> {
    let manifest = Manifest::parse(&stored.config_json).map_err(|e| {
        CatalogError::Storage(format!(
            "stored firmware object {} does not parse: {e}",
            stored.id
        ))
    })?;
    Ok(CatalogObject { stored, manifest })
}

fn not_found(id: &str) -> CatalogError {
    CatalogError::NotFound(format!("firmware object {id} not found"))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
