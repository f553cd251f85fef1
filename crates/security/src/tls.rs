//! TLS settings: the `[tls]` section both services serve with, checked
//! before anything is bound, and the client side (the CLI, flow → rack
//! manager) that never downgrades an `https://` address to plaintext.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, ServerTlsConfig};

use crate::SecurityError;
use crate::authz::AuthorizationSection;
use crate::layer::EdgeLayer;

/// `[tls]` of a service. All paths are PEM files; the key is read at start
/// and never logged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSection {
    /// Certificate chain the server presents.
    pub cert: Option<PathBuf>,
    /// Private key of `cert`.
    pub key: Option<PathBuf>,
    /// CA bundle client certificates must chain to. Set, the service runs
    /// mTLS: a client without a valid certificate is refused during the
    /// handshake, and the certificate names the caller.
    pub client_ca: Option<PathBuf>,
    /// Serve plaintext on an address other than loopback. Loopback serves
    /// plaintext without it, so the embedded defaults and the demo work
    /// with no set-up.
    pub allow_insecure: bool,
}

/// What a service's connections are, once its settings are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Plaintext,
    /// TLS; `mtls` when client certificates are required.
    Tls {
        mtls: bool,
    },
}

impl Transport {
    /// Callers can carry an identity (a client certificate) only over mTLS.
    pub fn has_identities(self) -> bool {
        matches!(self, Transport::Tls { mtls: true })
    }
}

impl TlsSection {
    /// Checks the combination without touching the files: a certificate
    /// goes with its key, a client CA needs both, and plaintext off
    /// loopback needs `allow_insecure`.
    pub fn check(&self, listen: SocketAddr) -> Result<Transport, SecurityError> {
        match (&self.cert, &self.key) {
            (Some(_), None) | (None, Some(_)) => Err(SecurityError::Invalid {
                key: "tls",
                detail: "tls.cert and tls.key go together: set both, or neither for plaintext"
                    .into(),
            }),
            (None, None) if self.client_ca.is_some() => Err(SecurityError::Invalid {
                key: "tls.client_ca",
                detail: "needs tls.cert and tls.key: mTLS is TLS with client certificates".into(),
            }),
            (None, None) if !listen.ip().is_loopback() && !self.allow_insecure => {
                Err(SecurityError::Invalid {
                    key: "tls",
                    detail: format!(
                        "{listen} is not a loopback address and no certificate is configured: \
                         set tls.cert and tls.key (and tls.client_ca for mTLS), or \
                         tls.allow_insecure = true to serve plaintext anyway"
                    ),
                })
            }
            (None, None) => Ok(Transport::Plaintext),
            (Some(_), Some(_)) => Ok(Transport::Tls {
                mtls: self.client_ca.is_some(),
            }),
        }
    }

    /// Reads the files into tonic's server TLS settings; `None` = plaintext.
    pub fn server_config(&self) -> Result<Option<ServerTlsConfig>, SecurityError> {
        let (Some(cert), Some(key)) = (&self.cert, &self.key) else {
            return Ok(None);
        };
        let cert = read_pem("tls.cert", cert, PemKind::Certificate)?;
        let key = read_pem("tls.key", key, PemKind::PrivateKey)?;
        let mut config = ServerTlsConfig::new().identity(Identity::from_pem(cert, key));
        if let Some(ca) = &self.client_ca {
            let ca = read_pem("tls.client_ca", ca, PemKind::Certificate)?;
            config = config.client_ca_root(Certificate::from_pem(ca));
        }
        Ok(Some(config))
    }
}

/// Everything one service's edge needs, checked and read at start.
pub struct ServerEdge {
    /// Plaintext or TLS.
    pub transport: Transport,
    /// tonic's TLS settings, `None` for plaintext.
    pub tls: Option<ServerTlsConfig>,
    /// The access-log / panic-recovery / authorization layer.
    pub layer: EdgeLayer,
}

impl ServerEdge {
    /// Checks `[tls]` and `[authorization]` together and reads the files.
    /// `service` names the service in logs ("flow", "rms").
    pub fn new(
        service: &'static str,
        listen: SocketAddr,
        tls: &TlsSection,
        authorization: &AuthorizationSection,
    ) -> Result<ServerEdge, SecurityError> {
        let transport = tls.check(listen)?;
        let policy = authorization.policy(transport)?;
        let tls = tls.server_config()?;
        match transport {
            Transport::Plaintext => tracing::warn!(
                service,
                %listen,
                mode = policy.mode().as_str(),
                "serving plaintext gRPC: no TLS, no caller identities"
            ),
            Transport::Tls { mtls } => tracing::info!(
                service,
                %listen,
                mtls,
                mode = policy.mode().as_str(),
                identities = policy.identity_count(),
                "serving gRPC over TLS"
            ),
        }
        Ok(ServerEdge {
            transport,
            tls,
            layer: EdgeLayer::new(service, policy),
        })
    }
}

/// Which setting names a client's errors use (CLI flags or config keys).
#[derive(Debug, Clone, Copy)]
pub struct ClientTlsKeys {
    pub address: &'static str,
    pub ca: &'static str,
    pub cert: &'static str,
    pub key: &'static str,
}

impl ClientTlsKeys {
    /// The CLI's flags.
    pub const CLI: ClientTlsKeys = ClientTlsKeys {
        address: "--server",
        ca: "--tls-ca",
        cert: "--tls-cert",
        key: "--tls-key",
    };
}

/// A client's TLS files. Empty with an `https://` address: the system's
/// trust roots, no client certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClientTlsFiles {
    /// CA bundle the server's certificate must chain to.
    pub ca: Option<PathBuf>,
    /// Client certificate (mTLS), with `key`.
    pub cert: Option<PathBuf>,
    /// Private key of `cert`.
    pub key: Option<PathBuf>,
    /// Name to verify the server's certificate against, when it differs
    /// from the address's host.
    pub server_name: Option<String>,
}

impl ClientTlsFiles {
    /// No file and no server name given.
    pub fn is_empty(&self) -> bool {
        self.ca.is_none() && self.cert.is_none() && self.key.is_none() && self.server_name.is_none()
    }

    /// tonic's client TLS settings from the files.
    pub fn client_config(&self, keys: ClientTlsKeys) -> Result<ClientTlsConfig, SecurityError> {
        let mut config = ClientTlsConfig::new();
        config = match &self.ca {
            Some(ca) => config.ca_certificate(Certificate::from_pem(read_pem(
                keys.ca,
                ca,
                PemKind::Certificate,
            )?)),
            None => config.with_native_roots(),
        };
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                let cert = read_pem(keys.cert, cert, PemKind::Certificate)?;
                let key = read_pem(keys.key, key, PemKind::PrivateKey)?;
                config = config.identity(Identity::from_pem(cert, key));
            }
            (None, None) => {}
            (Some(_), None) => {
                return Err(SecurityError::Invalid {
                    key: keys.cert,
                    detail: format!("needs {} (the certificate's private key)", keys.key),
                });
            }
            (None, Some(_)) => {
                return Err(SecurityError::Invalid {
                    key: keys.key,
                    detail: format!("needs {} (the certificate it belongs to)", keys.cert),
                });
            }
        }
        if let Some(name) = &self.server_name {
            config = config.domain_name(name.clone());
        }
        Ok(config)
    }

    /// An endpoint for `address`: `https://` is TLS (with these files or
    /// the system roots); `http://` is plaintext and refuses TLS files
    /// rather than ignore them.
    pub fn endpoint(&self, address: &str, keys: ClientTlsKeys) -> Result<Endpoint, SecurityError> {
        let endpoint =
            Endpoint::from_shared(address.to_string()).map_err(|e| SecurityError::Invalid {
                key: keys.address,
                detail: format!("{address:?}: {e}"),
            })?;
        if address.starts_with("https://") {
            let config = self.client_config(keys)?;
            endpoint
                .tls_config(config)
                .map_err(|e| SecurityError::Invalid {
                    key: keys.ca,
                    detail: format!("TLS settings for {address}: {e}"),
                })
        } else if self.is_empty() {
            Ok(endpoint)
        } else {
            Err(SecurityError::Invalid {
                key: keys.ca,
                detail: format!(
                    "TLS files are given but {address} is plaintext (http://): use https:// \
                     to connect over TLS"
                ),
            })
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum PemKind {
    Certificate,
    PrivateKey,
}

/// Reads a PEM file and checks it holds a block of the expected kind, so
/// a swapped or empty file fails at start naming the setting, not at the
/// first handshake.
fn read_pem(key: &'static str, path: &Path, kind: PemKind) -> Result<Vec<u8>, SecurityError> {
    let bytes = std::fs::read(path).map_err(|source| SecurityError::Read {
        key,
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let found = match kind {
        PemKind::Certificate => text.contains("-----BEGIN CERTIFICATE-----"),
        PemKind::PrivateKey => text.contains("-----BEGIN") && text.contains("PRIVATE KEY-----"),
    };
    if !found {
        return Err(SecurityError::NotPem {
            key,
            path: path.to_path_buf(),
            kind: match kind {
                PemKind::Certificate => "certificate",
                PemKind::PrivateKey => "private key",
            },
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    fn section(cert: bool, key: bool, ca: bool, insecure: bool) -> TlsSection {
        TlsSection {
            cert: cert.then(|| PathBuf::from("c.pem")),
            key: key.then(|| PathBuf::from("k.pem")),
            client_ca: ca.then(|| PathBuf::from("ca.pem")),
            allow_insecure: insecure,
        }
    }

    #[test]
    fn every_combination_of_tls_settings_is_decided() {
        for cert in [false, true] {
            for key in [false, true] {
                for ca in [false, true] {
                    for insecure in [false, true] {
                        for listen in ["127.0.0.1:1", "[::1]:1", "0.0.0.0:1", "10.0.0.5:1"] {
                            let s = section(cert, key, ca, insecure);
                            let loopback = addr(listen).ip().is_loopback();
                            let got = s.check(addr(listen));
                            let expected = if cert != key || (!cert && ca) {
                                None
                            } else if cert {
                                Some(Transport::Tls { mtls: ca })
                            } else if loopback || insecure {
                                Some(Transport::Plaintext)
                            } else {
                                None
                            };
                            match (got, expected) {
                                (Ok(t), Some(e)) => assert_eq!(t, e, "{s:?} {listen}"),
                                (Err(e), None) => {
                                    assert!(e.to_string().starts_with("tls"), "{e}")
                                }
                                (got, expected) => {
                                    panic!("{s:?} on {listen}: got {got:?}, expected {expected:?}")
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn plaintext_off_loopback_says_what_to_set() {
        let err = TlsSection::default()
            .check(addr("0.0.0.0:50051"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("tls.allow_insecure"), "{err}");
        assert!(err.contains("tls.cert"), "{err}");
    }

    #[test]
    fn missing_and_wrong_files_name_the_setting() {
        let dir = std::env::temp_dir().join(format!("rackflow-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let not_pem = dir.join("not.pem");
        std::fs::write(&not_pem, "hello").unwrap();
        let s = TlsSection {
            cert: Some(dir.join("missing.pem")),
            key: Some(not_pem.clone()),
            ..TlsSection::default()
        };
        let err = s.server_config().unwrap_err().to_string();
        assert!(err.starts_with("tls.cert: read"), "{err}");
        let s = TlsSection {
            cert: Some(not_pem.clone()),
            key: Some(not_pem.clone()),
            ..TlsSection::default()
        };
        let err = s.server_config().unwrap_err().to_string();
        assert!(
            err.starts_with("tls.cert:") && err.contains("no PEM certificate"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_client_never_downgrades_or_ignores_tls_files() {
        let keys = ClientTlsKeys::CLI;
        let none = ClientTlsFiles::default();
        assert!(none.endpoint("http://127.0.0.1:1", keys).is_ok());
        assert!(none.endpoint("https://127.0.0.1:1", keys).is_ok());
        let with_ca = ClientTlsFiles {
            ca: Some(PathBuf::from("/nonexistent/ca.pem")),
            ..ClientTlsFiles::default()
        };
        let err = with_ca
            .endpoint("http://127.0.0.1:1", keys)
            .unwrap_err()
            .to_string();
        assert!(err.contains("https://"), "{err}");
        let err = with_ca
            .endpoint("https://127.0.0.1:1", keys)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("--tls-ca: read"), "{err}");
        let half = ClientTlsFiles {
            cert: Some(PathBuf::from("c.pem")),
            ..ClientTlsFiles::default()
        };
        let err = half.client_config(keys).unwrap_err().to_string();
        assert!(err.contains("--tls-key"), "{err}");
    }
}
