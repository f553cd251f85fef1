//! rackflow's gRPC edge, shared by the flow server and the rack manager:
//! what stands between a TCP connection and a handler.
//!
//! - [`tls`]: the `[tls]` section (server certificate, key, client CA for
//!   mTLS, `allow_insecure`) checked at start, and client TLS settings for
//!   the CLI and for flow → rack manager.
//! - [`identity`]: who the caller is, from its client certificate (SPIFFE
//!   URI SAN, else DNS SAN, else CN).
//! - [`authz`]: roles, the one table of which role each RPC needs, the
//!   `[authorization]` section and the pure allow / deny decision.
//! - [`secrets`]: secrets at rest — AES-256-GCM envelopes under rotating
//!   data keys read from files.
//! - [`layer`]: the tower layer every request passes: access log → panic
//!   recovery → authorization → handler (the reference's interceptor order).

pub mod authz;
pub mod identity;
pub mod layer;
pub mod secrets;
pub mod tls;

pub use authz::{AuthorizationSection, Mode, Policy, Role};
pub use identity::Caller;
pub use layer::{DenialRecorder, EdgeLayer, code_name};
pub use tls::{ClientTlsFiles, ServerEdge, TlsSection};

/// A security setting that cannot be used; every variant names the setting.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    /// A combination of settings the server refuses to start with.
    #[error("{key}: {detail}")]
    Invalid { key: &'static str, detail: String },
    /// A certificate, key or CA file that cannot be read.
    #[error("{key}: read {path}: {source}")]
    Read {
        key: &'static str,
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// A file that holds no PEM block of the expected kind.
    #[error("{key}: {path} holds no PEM {kind}")]
    NotPem {
        key: &'static str,
        path: std::path::PathBuf,
        kind: &'static str,
    },
}
