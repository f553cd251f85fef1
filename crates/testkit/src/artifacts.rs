//! An HTTP artifact server on a free loopback port: the firmware store a
//! firmware object's manifest points at. Files are set and removed while
//! it runs; a bearer token can be required; every request is recorded
//! (path and whether it carried the token — never the token itself).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use sha2::{Digest as _, Sha256};
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct Files {
    files: HashMap<String, Vec<u8>>,
    token: Option<String>,
    requests: Vec<(String, bool)>,
}

type Shared = Arc<Mutex<Files>>;

pub struct ArtifactServer {
    pub base_url: String,
    pub addr: SocketAddr,
    state: Shared,
    stop: CancellationToken,
}

impl ArtifactServer {
    pub async fn start() -> ArtifactServer {
        let state: Shared = Arc::default();
        let app = axum::Router::new()
            .route("/{*path}", axum::routing::get(serve))
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind artifact server");
        let addr = listener.local_addr().expect("addr");
        let stop = CancellationToken::new();
        let until = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { until.cancelled().await })
                .await;
        });
        ArtifactServer {
            base_url: format!("http://{addr}"),
            addr,
            state,
            stop,
        }
    }

    fn files(&self) -> std::sync::MutexGuard<'_, Files> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Serves `contents` at `/{path}`; returns its URL and SHA-256.
    pub fn put(&self, path: &str, contents: &[u8]) -> (String, String) {
        self.files()
            .files
            .insert(path.to_owned(), contents.to_vec());
        (format!("{}/{path}", self.base_url), sha256_hex(contents))
    }

    pub fn remove(&self, path: &str) {
        self.files().files.remove(path);
    }

    /// Requires `Authorization: Bearer {token}` from now on.
    pub fn require_token(&self, token: &str) {
        self.files().token = Some(token.to_owned());
    }

    /// Requests so far: (path, carried the right token).
    pub fn requests(&self) -> Vec<(String, bool)> {
        self.files().requests.clone()
    }
}

impl Drop for ArtifactServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

async fn serve(
    State(state): State<Shared>,
    Path(path): Path<String>,
    headers: HeaderMap,
) -> impl IntoResponse {
    let mut files = state.lock().unwrap_or_else(PoisonError::into_inner);
    let authorized = match &files.token {
        None => true,
        Some(token) => headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == format!("Bearer {token}")),
    };
    files.requests.push((path.clone(), authorized));
    if !authorized {
        return (StatusCode::UNAUTHORIZED, Vec::new());
    }
    match files.files.get(&path) {
        Some(bytes) => (StatusCode::OK, bytes.clone()),
        None => (StatusCode::NOT_FOUND, Vec::new()),
    }
}

/// One firmware component of a test manifest: name, version, artifact URL
/// and its SHA-256 (empty: none stated).
pub type ManifestComponent<'a> = (&'a str, &'a str, &'a str, &'a str);

/// A firmware-object manifest (the reference's catalogue shape) with one
/// board SKU per `(device type, components)`: id `{product}_{milestone}`.
pub fn manifest(
    product: &str,
    milestone: &str,
    boards: &[(&str, &[ManifestComponent<'_>])],
) -> String {
    let boards: Vec<serde_json::Value> = boards
        .iter()
        .map(|(device_type, components)| {
            let firmware: Vec<serde_json::Value> = components
                .iter()
                .map(|(name, version, url, sha)| {
                    let mut location = serde_json::json!({
                        "Location": url, "LocationType": "HTTP", "Type": "Firmware"
                    });
                    if !sha.is_empty() {
                        location["SHA256"] = serde_json::json!(sha);
                    }
                    serde_json::json!({
                        "Component": name, "Version": version, "Type": "Prod",
                        "Locations": [location]
                    })
                })
                .collect();
            serde_json::json!({
                "SKUID": "699-test", "Name": device_type, "Type": device_type,
                "Components": { "Firmware": firmware }
            })
        })
        .collect();
    serde_json::json!({
        "ProductName": product,
        "Milestones": [ { "Name": milestone, "BoardSKUs": boards } ]
    })
    .to_string()
}
