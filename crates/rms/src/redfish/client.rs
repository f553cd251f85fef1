//! The HTTP side of the Redfish back end: one BMC endpoint, basic-auth
//! credentials, timeouts and TLS settings, and the mapping of HTTP answers
//! and transport failures onto [`RedfishError`].
//!
//! Built on `reqwest` with rustls (ring provider) and no system proxy: BMC
//! traffic goes straight to the management network. Credentials go only
//! into the `Authorization` header; request logs carry method, URI and
//! status, never headers.

use std::error::Error as StdError;
use std::fmt;

use reqwest::header::{ACCEPT, HeaderValue, LOCATION};
use reqwest::{Method, RequestBuilder, StatusCode, Url};
use serde_json::Value;

use super::config::RedfishConfig;
use super::credentials::Credentials;
use super::error::{RedfishError, TransportKind, bmc_message};

/// A 2xx answer from the BMC.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The absolute URI that answered (after redirects).
    pub uri: String,
    pub status: u16,
    /// The `Location` header, when present.
    pub location: Option<String>,
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as JSON; `None` when it is empty.
    pub fn json(&self) -> Result<Option<Value>, RedfishError> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        serde_json::from_slice(&self.body)
            .map(Some)
            .map_err(|e| RedfishError::InvalidResponse {
                uri: self.uri.clone(),
                reason: format!("body is not JSON: {e}"),
            })
    }

    /// The body as JSON, which must be present.
    pub fn require_json(&self) -> Result<Value, RedfishError> {
        self.json()?.ok_or_else(|| RedfishError::InvalidResponse {
            uri: self.uri.clone(),
            reason: "empty body where a resource was expected".to_string(),
        })
    }
}

/// A Redfish HTTP client for one BMC. Cheap to clone (the connection pool
/// is shared); `Send + Sync`, no global state.
#[derive(Clone)]
pub struct RedfishClient {
    http: reqwest::Client,
    base: Url,
    credentials: Option<Credentials>,
    config: RedfishConfig,
}

impl fmt::Debug for RedfishClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedfishClient")
            .field("base", &self.base.as_str())
            .field("credentials", &self.credentials)
            .field("config", &self.config)
            .finish()
    }
}

impl RedfishClient {
    /// A client for the BMC at `base_url` (`http://host:port` or
    /// `https://host`). Only the origin is used: the Redfish service root is
    /// always `/redfish/v1/`. A URL with a user or password in it is
    /// refused, so credentials never travel inside URIs or error texts.
    pub fn new(
        base_url: &str,
        credentials: Option<Credentials>,
        config: RedfishConfig,
    ) -> Result<Self, RedfishError> {
        let base = parse_base_url(base_url)?;
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .no_proxy()
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .danger_accept_invalid_certs(!config.verify_tls);
        if let Some(pem) = &config.ca_cert_pem {
            let cert = reqwest::Certificate::from_pem(pem)
                .map_err(|e| RedfishError::ClientBuild(format!("CA certificate: {e}")))?;
            builder = builder.add_root_certificate(cert);
        }
        let http = builder
            .build()
            .map_err(|e| RedfishError::ClientBuild(error_chain(&e)))?;
        Ok(RedfishClient {
            http,
            base,
            credentials,
            config,
        })
    }

    pub fn config(&self) -> &RedfishConfig {
        &self.config
    }

    /// The BMC origin, e.g. `https://10.0.0.5/`.
    pub fn base_url(&self) -> &str {
        self.base.as_str()
    }

    /// Resolves a Redfish path (`/redfish/v1/...`) or an absolute URI
    /// against the BMC origin.
    pub fn resolve(&self, path_or_uri: &str) -> Result<Url, RedfishError> {
        self.base
            .join(path_or_uri)
            .map_err(|e| RedfishError::InvalidResponse {
                uri: path_or_uri.to_string(),
                reason: format!("not a usable URI: {e}"),
            })
    }

    /// `GET` a resource; any 2xx is an answer.
    pub async fn get(&self, path: &str) -> Result<Answer, RedfishError> {
        let url = self.resolve(path)?;
        let request = self.http.get(url.clone());
        self.send(Method::GET, url, request).await
    }

    /// `GET` a resource that must have a JSON body.
    pub async fn get_json(&self, path: &str) -> Result<Value, RedfishError> {
        self.get(path).await?.require_json()
    }

    /// `POST` a JSON body.
    pub async fn post_json(&self, path: &str, body: &Value) -> Result<Answer, RedfishError> {
        let url = self.resolve(path)?;
        let request = self.http.post(url.clone()).json(body);
        self.send(Method::POST, url, request).await
    }

    /// `POST` a multipart form (firmware push), with the upload timeout.
    pub async fn post_multipart(
        &self,
        path: &str,
        form: reqwest::multipart::Form,
    ) -> Result<Answer, RedfishError> {
        let url = self.resolve(path)?;
        let request = self
            .http
            .post(url.clone())
            .multipart(form)
            .timeout(self.config.upload_timeout);
        self.send(Method::POST, url, request).await
    }

    async fn send(
        &self,
        method: Method,
        url: Url,
        request: RequestBuilder,
    ) -> Result<Answer, RedfishError> {
        let method_name = method_name(&method);
        let mut request = request
            .header(ACCEPT, HeaderValue::from_static("application/json"))
            .header("OData-Version", HeaderValue::from_static("4.0"));
        if let Some(creds) = &self.credentials {
            request = request.basic_auth(creds.username(), Some(creds.password()));
        }
        let transport = |e: reqwest::Error| RedfishError::Transport {
            method: method_name,
            uri: url.to_string(),
            kind: if e.is_timeout() {
                TransportKind::Timeout
            } else if e.is_connect() {
                TransportKind::Connect
            } else {
                TransportKind::Other
            },
            message: error_chain(&e),
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let uri = response.url().to_string();
        let location = response
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = response.bytes().await.map_err(transport)?.to_vec();
        tracing::debug!(method = method_name, uri = %uri, status = status.as_u16(), "redfish request");
        if status.is_success() {
            return Ok(Answer {
                uri,
                status: status.as_u16(),
                location,
                body,
            });
        }
        Err(status_error(method_name, uri, status, &body))
    }
}

/// Maps a non-2xx answer to an error carrying the BMC's message.
fn status_error(
    method: &'static str,
    uri: String,
    status: StatusCode,
    body: &[u8],
) -> RedfishError {
    let message = bmc_message(body);
    match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => RedfishError::Unauthorized {
            method,
            uri,
            status: status.as_u16(),
            message,
        },
        StatusCode::NOT_FOUND => RedfishError::NotFound {
            method,
            uri,
            message,
        },
        _ => RedfishError::Http {
            method,
            uri,
            status: status.as_u16(),
            message,
        },
    }
}

fn method_name(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        _ => "HTTP",
    }
}

/// An error and its sources on one line: reqwest's own text ("error sending
/// request") hides the useful part (connection refused, certificate).
fn error_chain(e: &dyn StdError) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

fn parse_base_url(base_url: &str) -> Result<Url, RedfishError> {
    let invalid = |reason: &str| RedfishError::InvalidEndpoint {
        url: redact_userinfo(base_url),
        reason: reason.to_string(),
    };
    let url = Url::parse(base_url).map_err(|e| invalid(&e.to_string()))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(invalid("the scheme must be http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(
            "credentials belong in the credentials setting, not in the URL",
        ));
    }
    let mut origin = url;
    origin.set_path("/");
    origin.set_query(None);
    origin.set_fragment(None);
    Ok(origin)
}

/// The URL with anything between `://` and `@` replaced, for error texts.
fn redact_userinfo(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}://***@{}", &url[..scheme_end], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_keeps_only_the_origin() {
        let u = parse_base_url("https://10.0.0.5:8443/redfish/v1?x=1#f").unwrap();
        assert_eq!(u.as_str(), "https://10.0.0.5:8443/");
        let u = parse_base_url("http://127.0.0.1:8000").unwrap();
        assert_eq!(
            u.join("/redfish/v1/Systems").unwrap().as_str(),
            "http://127.0.0.1:8000/redfish/v1/Systems"
        );
    }

    #[test]
    fn base_url_refusals_never_echo_a_password() {
        for bad in ["ftp://bmc", "not a url", "http://"] {
            assert!(
                matches!(
                    parse_base_url(bad),
                    Err(RedfishError::InvalidEndpoint { .. })
                ),
                "{bad}"
            );
        }
        let err = parse_base_url("https://root:hunter2@bmc/").unwrap_err();
        let text = err.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("***@bmc"), "{text}");
        assert_eq!(redact_userinfo("http://bmc/x"), "http://bmc/x");
    }

    #[test]
    fn status_errors_are_classified() {
        let body = br#"{"error":{"message":"nope"}}"#;
        assert!(matches!(
            status_error("GET", "u".into(), StatusCode::UNAUTHORIZED, body),
            RedfishError::Unauthorized { status: 401, ref message, .. } if message == "nope"
        ));
        assert!(matches!(
            status_error("GET", "u".into(), StatusCode::FORBIDDEN, b""),
            RedfishError::Unauthorized { status: 403, .. }
        ));
        assert!(matches!(
            status_error("GET", "u".into(), StatusCode::NOT_FOUND, body),
            RedfishError::NotFound { .. }
        ));
        assert!(matches!(
            status_error("POST", "u".into(), StatusCode::NOT_IMPLEMENTED, body),
            RedfishError::Http { status: 501, .. }
        ));
    }

    #[test]
    fn answers_parse_json_or_report_it() {
        let a = |body: &[u8]| Answer {
            uri: "http://bmc/x".into(),
            status: 200,
            location: None,
            body: body.to_vec(),
        };
        assert_eq!(a(b"").json().unwrap(), None);
        assert_eq!(a(b" \n").json().unwrap(), None);
        assert!(a(b"{}").require_json().is_ok());
        assert!(matches!(
            a(b"").require_json(),
            Err(RedfishError::InvalidResponse { .. })
        ));
        assert!(matches!(
            a(b"<html>").json(),
            Err(RedfishError::InvalidResponse { .. })
        ));
    }
}
