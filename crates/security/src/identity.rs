//! Who is calling: the identity a client certificate names, and the
//! [`Caller`] every request carries to its handler (the audit trail reads
//! it there).

use std::net::SocketAddr;

use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
use x509_cert::Certificate;
use x509_cert::der::Decode;
use x509_cert::der::asn1::{Ia5StringRef, PrintableStringRef, Utf8StringRef};
use x509_cert::ext::pkix::SubjectAltName;
use x509_cert::ext::pkix::name::GeneralName;

/// The caller of one request, as the edge established it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// From the verified client certificate; `None` without mTLS.
    pub identity: Option<String>,
    /// The TCP peer.
    pub peer: Option<SocketAddr>,
}

impl Caller {
    /// The caller of a request, read from the connection info tonic puts
    /// in its extensions.
    pub fn from_extensions(extensions: &http::Extensions) -> Caller {
        let tls = extensions.get::<TlsConnectInfo<TcpConnectInfo>>();
        let peer = tls
            .map(|tls| tls.get_ref())
            .or_else(|| extensions.get::<TcpConnectInfo>())
            .and_then(TcpConnectInfo::remote_addr);
        let identity = tls
            .and_then(TlsConnectInfo::peer_certs)
            .and_then(|certs| certs.first().and_then(|leaf| identity_of(leaf.as_ref())));
        Caller { identity, peer }
    }

    /// The identity, or `anonymous` (what logs and the audit trail show).
    pub fn name(&self) -> &str {
        self.identity.as_deref().unwrap_or("anonymous")
    }

    /// The peer for a log field: its address, or `unknown` (never Rust's
    /// `Some(…)`).
    pub fn peer_display(&self) -> impl std::fmt::Display + '_ {
        struct Peer(Option<SocketAddr>);
        impl std::fmt::Display for Peer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self.0 {
                    Some(addr) => addr.fmt(f),
                    None => f.write_str("unknown"),
                }
            }
        }
        Peer(self.peer)
    }
}

/// The identity a DER certificate names: its first URI SAN (a SPIFFE ID
/// such as `spiffe://example.org/ns/ops/sa/rollouts`), else its first DNS
/// SAN, else its subject's common name. `None` for a certificate that
/// does not parse or names nothing.
pub fn identity_of(der: &[u8]) -> Option<String> {
    let cert = Certificate::from_der(der).ok()?;
    let tbs = &cert.tbs_certificate;
    let mut dns = None;
    for ext in tbs.extensions.iter().flatten() {
        if ext.extn_id != x509_cert::der::oid::db::rfc5280::ID_CE_SUBJECT_ALT_NAME {
            continue;
        }
        let Ok(san) = SubjectAltName::from_der(ext.extn_value.as_bytes()) else {
            continue;
        };
        for name in &san.0 {
            match name {
                GeneralName::UniformResourceIdentifier(uri) => return Some(uri.to_string()),
                GeneralName::DnsName(name) if dns.is_none() => dns = Some(name.to_string()),
                _ => {}
            }
        }
    }
    if dns.is_some() {
        return dns;
    }
    tbs.subject
        .0
        .iter()
        .flat_map(|rdn| rdn.0.iter())
        .find_map(|atv| {
            if atv.oid != x509_cert::der::oid::db::rfc4519::CN {
                return None;
            }
            Utf8StringRef::try_from(&atv.value)
                .map(|s| s.to_string())
                .or_else(|_| PrintableStringRef::try_from(&atv.value).map(|s| s.to_string()))
                .or_else(|_| Ia5StringRef::try_from(&atv.value).map(|s| s.to_string()))
                .ok()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};

    fn cert(sans: Vec<SanType>, cn: Option<&str>) -> Vec<u8> {
        let mut params = CertificateParams::default();
        params.subject_alt_names = sans;
        let mut dn = DistinguishedName::new();
        if let Some(cn) = cn {
            dn.push(DnType::CommonName, cn);
        }
        params.distinguished_name = dn;
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn the_uri_san_wins_then_dns_then_cn() {
        let uri = SanType::URI("spiffe://example.org/ops/rollouts".try_into().unwrap());
        let dns = SanType::DnsName("flow.example.org".try_into().unwrap());
        assert_eq!(
            identity_of(&cert(vec![dns.clone(), uri.clone()], Some("cn"))).as_deref(),
            Some("spiffe://example.org/ops/rollouts")
        );
        assert_eq!(
            identity_of(&cert(vec![dns], Some("cn"))).as_deref(),
            Some("flow.example.org")
        );
        assert_eq!(
            identity_of(&cert(vec![], Some("operator-7"))).as_deref(),
            Some("operator-7")
        );
        assert_eq!(identity_of(&cert(vec![], None)), None);
        assert_eq!(identity_of(b"not a certificate"), None);
    }
}
