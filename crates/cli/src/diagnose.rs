//! What a failed connection to the flow server means, in words an operator
//! can act on (issue 31): plaintext against a TLS server, TLS against a
//! plaintext one, no client certificate where mTLS requires one, a server
//! certificate from a CA the client does not trust — and "is `rackflow
//! serve` running?" only when nothing accepted the TCP connection.
//!
//! Runs once, after a command failed with a connection-level error: it
//! reads the error chain and, where the chain cannot tell, probes the
//! address (one TCP connection, for a plaintext address one HTTP/2 preface
//! whose answer shows whether TLS is spoken there).

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::client::{ConnectError, ServerAddress};

/// How long each probe step may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// The HTTP/2 client preface: a TLS server answers it with an alert record.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The error a failed command ends with once diagnosed: what to do, then
/// what the transport said.
#[derive(Debug)]
pub struct Diagnosed {
    pub advice: String,
    pub detail: String,
}

impl std::fmt::Display for Diagnosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.advice, self.detail)
    }
}

impl std::error::Error for Diagnosed {}

/// Whether `err` is a failure to talk to the server at all (as opposed to
/// an answer of the server's).
pub fn is_connection_failure(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<ConnectError>().is_some()
            || e.downcast_ref::<tonic::Status>().is_some_and(|s| {
                let message = s.message().to_ascii_lowercase();
                match s.code() {
                    tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled => {
                        transport_text(&message)
                    }
                    // A server's own INTERNAL never speaks of h2 frames.
                    tonic::Code::Internal => message.contains("h2 protocol"),
                    _ => false,
                }
            })
    })
}

fn transport_text(message: &str) -> bool {
    [
        "transport",
        "h2 protocol",
        "connection",
        "tls",
        "alert",
        "broken pipe",
        "reset",
        // hyper's words for a request whose connection went away.
        "operation was canceled",
    ]
    .iter()
    .any(|w| message.contains(w))
}

/// `err` with advice, when the failure can be explained; else `err`.
pub async fn diagnose(server: &ServerAddress, err: anyhow::Error) -> anyhow::Error {
    if !is_connection_failure(&err) {
        return err;
    }
    let chain = chain_text(&err);
    match advice(server, &chain).await {
        Some(advice) => anyhow::Error::new(Diagnosed {
            advice,
            detail: chain,
        }),
        None => err,
    }
}

/// Every error of the chain, joined (tonic's status, then its transport
/// sources: where rustls' alerts are named).
fn chain_text(err: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for e in err.chain() {
        let text = if let Some(status) = e.downcast_ref::<tonic::Status>() {
            format!("{:?}: {}", status.code(), status.message())
        } else if let Some(connect) = e.downcast_ref::<ConnectError>() {
            // Without its "is `rackflow serve` running?": it is, or the
            // advice would not be given.
            format!("connect to {}: {}", connect.server, connect.detail)
        } else {
            e.to_string()
        };
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ")
}

async fn advice(server: &ServerAddress, chain: &str) -> Option<String> {
    let (tls, authority) = split_url(server)?;
    let tcp = tokio::time::timeout(
        PROBE_TIMEOUT,
        tokio::net::TcpStream::connect(authority.as_str()),
    )
    .await;
    let Ok(Ok(mut stream)) = tcp else {
        // Nothing listens (or the network drops us): the original message
        // already says to check the server and the address.
        return None;
    };
    let here = format!("the server at {authority}");
    if !tls {
        // Anything else keeps the transport's own words.
        return speaks_tls(&mut stream).await.then(|| {
            format!(
                "{here} speaks TLS: use https://{authority} (with --tls-ca CA.pem unless its \
                 certificate is from a public CA; --tls-cert and --tls-key if it requires a \
                 client certificate)"
            )
        });
    }
    drop(stream);
    let mut lower = chain.to_ascii_lowercase();
    if !TLS_WORDS.iter().any(|w| lower.contains(w)) {
        // The session ended without the reason reaching the failed call (a
        // TLS alert that arrives after the request was sent surfaces as
        // "operation was canceled"): ask once more, on a new connection.
        lower.push(' ');
        lower.push_str(&second_opinion(server).await.to_ascii_lowercase());
    }
    let has_cert = server.tls().cert.is_some();
    if lower.contains("certificaterequired") || (lower.contains("handshakefailure") && !has_cert) {
        return Some(format!(
            "{here} requires a client certificate: pass --tls-cert CLIENT.pem --tls-key \
             CLIENT.key (a certificate signed by the server's client_ca; see docs/security.md)"
        ));
    }
    if lower.contains("unknownca")
        || lower.contains("badcertificate")
        || lower.contains("certificateunknown")
        || lower.contains("handshakefailure")
    {
        return Some(format!(
            "{here} did not accept the client certificate: it must be signed by the CA in the \
             server's tls.client_ca, with the clientAuth extended key usage"
        ));
    }
    if lower.contains("unknownissuer") || lower.contains("invalid peer certificate") {
        return Some(format!(
            "the certificate of {here} is not signed by a CA this client trusts: pass the \
             server's CA with --tls-ca CA.pem"
        ));
    }
    if lower.contains("notvalidforname") || lower.contains("not valid for name") {
        return Some(format!(
            "the certificate of {here} does not name this address: connect by a name in its \
             subject alternative names, or pass --tls-server-name NAME"
        ));
    }
    if lower.contains("invalidcontenttype")
        || lower.contains("corrupt message")
        || lower.contains("invalidmessage")
    {
        return Some(format!("{here} does not speak TLS: use http://{authority}"));
    }
    if !has_cert {
        // Nothing named, no certificate sent, and the session ended before
        // an answer: what an mTLS server does to a client without one.
        return Some(format!(
            "{here} ended the TLS session before answering, as a server that requires a \
             client certificate does: pass --tls-cert CLIENT.pem --tls-key CLIENT.key (a \
             certificate signed by the server's client_ca; see docs/security.md)"
        ));
    }
    (lower.contains("tls") || lower.contains("alert") || lower.contains("certificate"))
        .then(|| format!("{here} accepted the connection, but the TLS session failed"))
}

/// Words of the transport's error that say what went wrong with TLS.
const TLS_WORDS: [&str; 9] = [
    "certificaterequired",
    "handshakefailure",
    "unknownca",
    "badcertificate",
    "certificateunknown",
    "unknownissuer",
    "invalid peer certificate",
    "invalidcontenttype",
    "corrupt message",
];

/// The error of one `Version` call on a new connection (empty when it
/// succeeds or takes too long).
async fn second_opinion(server: &ServerAddress) -> String {
    let call = async {
        let mut flow = crate::client::connect(server).await?;
        flow.version(rackflow_api::v1::VersionRequest {}).await?;
        anyhow::Ok(())
    };
    match tokio::time::timeout(PROBE_TIMEOUT, call).await {
        Ok(Err(err)) => chain_text(&err),
        _ => String::new(),
    }
}

/// `(is https, host:port)` of the server's address.
fn split_url(server: &ServerAddress) -> Option<(bool, String)> {
    let url: &str = server;
    let (tls, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else {
        return None;
    };
    let authority = rest.split('/').next().filter(|a| !a.is_empty())?;
    let authority = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        && !authority.ends_with(']')
    {
        authority.to_string()
    } else {
        format!("{authority}:{}", if tls { 443 } else { 80 })
    };
    Some((tls, authority))
}

/// Sends the HTTP/2 preface and reads the answer: a TLS server answers a
/// plaintext client with an alert record (content type 21, version 3.x)
/// before it closes.
async fn speaks_tls(stream: &mut tokio::net::TcpStream) -> bool {
    let probe = async {
        stream.write_all(H2_PREFACE).await.ok()?;
        let mut answer = [0u8; 8];
        let n = stream.read(&mut answer).await.ok()?;
        Some(n >= 2 && answer[0] == 0x15 && answer[1] == 0x03)
    };
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT, probe).await,
        Ok(Some(true))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_split_into_scheme_and_authority() {
        let at = |url: &str| split_url(&ServerAddress::plain(url));
        assert_eq!(
            at("http://127.0.0.1:50051"),
            Some((false, "127.0.0.1:50051".into()))
        );
        assert_eq!(
            at("https://flow.example:8443/"),
            Some((true, "flow.example:8443".into()))
        );
        assert_eq!(
            at("https://flow.example"),
            Some((true, "flow.example:443".into()))
        );
        assert_eq!(at("https://[::1]:9"), Some((true, "[::1]:9".into())));
        assert_eq!(at("unix:///x"), None);
    }

    #[test]
    fn only_transport_failures_are_diagnosed() {
        let status = |code, text: &str| anyhow::Error::new(tonic::Status::new(code, text));
        assert!(is_connection_failure(&status(
            tonic::Code::Unavailable,
            "transport error"
        )));
        assert!(is_connection_failure(&status(
            tonic::Code::Cancelled,
            "h2 protocol error: error reading a body from connection"
        )));
        assert!(!is_connection_failure(&status(
            tonic::Code::Unavailable,
            "the rack manager is unavailable"
        )));
        assert!(is_connection_failure(&status(
            tonic::Code::Internal,
            "h2 protocol error: http2 error"
        )));
        assert!(!is_connection_failure(&status(
            tonic::Code::NotFound,
            "connection not found"
        )));
    }
}
