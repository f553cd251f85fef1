//! Certificates made at test time (rcgen): a CA, a server certificate for
//! `localhost` / `127.0.0.1`, and client certificates naming identities,
//! written as PEM files the services and the CLI read like real ones.

use std::path::{Path, PathBuf};

use rackflow_security::{ClientTlsFiles, TlsSection};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};
use tonic::transport::Channel;

/// A CA and the server certificate it signed, in a temporary directory.
pub struct TestPki {
    dir: tempfile::TempDir,
    ca: CertifiedIssuer<'static, KeyPair>,
    /// The CA certificate (PEM), the trust root of server and clients.
    pub ca_pem: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
}

impl TestPki {
    /// A fresh CA named `name` and a server certificate for `localhost`
    /// and `127.0.0.1`.
    pub fn new(name: &str) -> TestPki {
        let dir = tempfile::tempdir().expect("pki dir");
        let mut params = CertificateParams::default();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, format!("{name} test CA"));
        params.distinguished_name = dn;
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key"))
            .expect("CA certificate");
        let ca_pem = write(dir.path(), "ca.pem", &ca.pem());
        let (server_cert, server_key) = issue(
            &ca,
            dir.path(),
            "server",
            vec![
                SanType::DnsName("localhost".try_into().expect("dns name")),
                SanType::IpAddress([127, 0, 0, 1].into()),
            ],
        );
        TestPki {
            dir,
            ca,
            ca_pem,
            server_cert,
            server_key,
        }
    }

    /// `[tls]` for a server with this certificate; `mtls` requires client
    /// certificates signed by this CA.
    pub fn server_tls(&self, mtls: bool) -> TlsSection {
        TlsSection {
            cert: Some(self.server_cert.clone()),
            key: Some(self.server_key.clone()),
            client_ca: mtls.then(|| self.ca_pem.clone()),
            allow_insecure: false,
        }
    }

    /// Client files trusting this CA, without a client certificate.
    pub fn anonymous_client(&self) -> ClientTlsFiles {
        ClientTlsFiles {
            ca: Some(self.ca_pem.clone()),
            ..ClientTlsFiles::default()
        }
    }

    /// Client files with a certificate naming `identity` (a URI SAN when
    /// it has a scheme, else a DNS SAN), signed by this CA.
    pub fn client(&self, identity: &str) -> ClientTlsFiles {
        let san = if identity.contains("://") {
            SanType::URI(identity.try_into().expect("uri"))
        } else {
            SanType::DnsName(identity.try_into().expect("dns name"))
        };
        let file = identity.replace(|c: char| !c.is_ascii_alphanumeric(), "_");
        let (cert, key) = issue(&self.ca, self.dir.path(), &file, vec![san]);
        ClientTlsFiles {
            ca: Some(self.ca_pem.clone()),
            cert: Some(cert),
            key: Some(key),
            server_name: None,
        }
    }
}

fn issue(
    ca: &CertifiedIssuer<'static, KeyPair>,
    dir: &Path,
    name: &str,
    sans: Vec<SanType>,
) -> (PathBuf, PathBuf) {
    let mut params = CertificateParams::default();
    params.subject_alt_names = sans;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    params.distinguished_name = dn;
    let key = KeyPair::generate().expect("key");
    let cert = params.signed_by(&key, ca).expect("sign");
    (
        write(dir, &format!("{name}.pem"), &cert.pem()),
        write(dir, &format!("{name}.key"), &key.serialize_pem()),
    )
}

fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("write PEM");
    path
}

/// A channel to `https://127.0.0.1:{port}` with `files`; the error when the
/// handshake is refused.
pub async fn tls_channel(
    addr: std::net::SocketAddr,
    files: &ClientTlsFiles,
) -> Result<Channel, tonic::transport::Error> {
    files
        .endpoint(
            &format!("https://{addr}"),
            rackflow_security::tls::ClientTlsKeys::CLI,
        )
        .expect("client TLS settings")
        .connect()
        .await
}
