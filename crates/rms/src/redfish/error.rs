//! `RedfishError`, the one error type of the Redfish back end, and the
//! extraction of a BMC's own message from a Redfish error body.
//!
//! Every variant that comes from an HTTP answer carries the status and the
//! BMC's message (`error.@Message.ExtendedInfo[].Message`, else
//! `error.message`), because an operator reading a failed job needs the
//! BMC's words, not ours. [`RedfishError::job_error`] classifies a failure
//! for the job model (spec §1.4) so a worker can seal a job with it.

use std::time::Duration;

use serde_json::Value;

use crate::job::JobError;

use super::types::{PowerState, ResetType, TaskState};

/// What failed at the transport level, for classification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// Connecting to the BMC failed (refused, unreachable, TLS handshake).
    Connect,
    /// The request or the connection timed out.
    Timeout,
    /// Anything else while sending or receiving.
    Other,
}

/// Errors of the Redfish client and node.
#[derive(Debug, thiserror::Error)]
pub enum RedfishError {
    #[error("invalid Redfish endpoint {url:?}: {reason}")]
    InvalidEndpoint { url: String, reason: String },

    #[error("cannot build the HTTP client: {0}")]
    ClientBuild(String),

    #[error("{method} {uri}: {message}")]
    Transport {
        method: &'static str,
        uri: String,
        kind: TransportKind,
        message: String,
    },

    #[error(
        "{method} {uri}: the BMC refused the credentials (HTTP {status}){}",
        suffix(message)
    )]
    Unauthorized {
        method: &'static str,
        uri: String,
        status: u16,
        message: String,
    },

    #[error("system {uri} not found on the BMC (HTTP 404){}", suffix(message))]
    SystemNotFound { uri: String, message: String },

    #[error("{method} {uri}: not found (HTTP 404){}", suffix(message))]
    NotFound {
        method: &'static str,
        uri: String,
        message: String,
    },

    #[error(
        "the BMC does not implement reset type {reset_type} (HTTP 501){}",
        suffix(message)
    )]
    ResetTypeUnsupported {
        reset_type: ResetType,
        message: String,
    },

    #[error("reset type {reset_type} is not among the BMC's allowable values [{}]", allowed.join(", "))]
    ResetTypeNotAllowed {
        reset_type: ResetType,
        allowed: Vec<String>,
    },

    #[error("{method} {uri}: HTTP {status}{}", suffix(message))]
    Http {
        method: &'static str,
        uri: String,
        status: u16,
        message: String,
    },

    #[error("{uri}: invalid Redfish response: {reason}")]
    InvalidResponse { uri: String, reason: String },

    #[error("the BMC lists no computer system under {uri}")]
    NoSystem { uri: String },

    #[error("the BMC lists {count} computer systems under {uri}; configure which one this node is")]
    AmbiguousSystem { uri: String, count: usize },

    #[error("{resource} does not advertise {what}")]
    NotAdvertised { resource: String, what: String },

    #[error("reset type {0} has no power state to wait for")]
    NoPowerTarget(ResetType),

    #[error("power state did not reach {target} within {waited:?} (last seen: {last})")]
    PowerTimeout {
        target: PowerState,
        last: PowerState,
        waited: Duration,
    },

    #[error("cannot update firmware: {0}")]
    UpdateUnsupported(String),

    #[error("cannot read firmware image {path}: {message}")]
    ImageRead { path: String, message: String },

    #[error("firmware task {task} ended {state}{}", suffix(message))]
    TaskFailed {
        task: String,
        state: TaskState,
        message: String,
    },

    #[error("firmware task {task} did not finish within {waited:?} (last state: {state})")]
    TaskTimeout {
        task: String,
        state: TaskState,
        waited: Duration,
    },
}

fn suffix(message: &str) -> String {
    if message.is_empty() {
        String::new()
    } else {
        format!(": {message}")
    }
}

impl RedfishError {
    /// The job model's classification of this failure (spec §1.4), so a
    /// worker seals a job with the right code.
    pub fn job_error(&self) -> JobError {
        match self {
            RedfishError::InvalidEndpoint { .. } | RedfishError::ResetTypeNotAllowed { .. } => {
                JobError::InvalidArgument
            }
            RedfishError::ClientBuild(_) => JobError::Internal,
            RedfishError::Transport { kind, .. } => match kind {
                TransportKind::Timeout => JobError::Timeout,
                TransportKind::Connect | TransportKind::Other => JobError::ClientError,
            },
            RedfishError::Unauthorized { .. } => JobError::Unauthenticated,
            RedfishError::SystemNotFound { .. } | RedfishError::NotFound { .. } => {
                JobError::TargetNotFound
            }
            RedfishError::ResetTypeUnsupported { .. }
            | RedfishError::NotAdvertised { .. }
            | RedfishError::NoPowerTarget(_)
            | RedfishError::UpdateUnsupported(_) => JobError::FailedPrecondition,
            RedfishError::Http { status, .. } => {
                if *status >= 500 {
                    JobError::ServerError
                } else {
                    JobError::ClientError
                }
            }
            RedfishError::InvalidResponse { .. }
            | RedfishError::NoSystem { .. }
            | RedfishError::AmbiguousSystem { .. } => JobError::InvalidResponse,
            RedfishError::PowerTimeout { .. } | RedfishError::TaskTimeout { .. } => {
                JobError::Timeout
            }
            RedfishError::ImageRead { .. } => JobError::FileNotFound,
            RedfishError::TaskFailed { .. } => JobError::Other,
        }
    }

    /// Whether a task-status read that failed this way may succeed if
    /// retried: transport trouble and server-side errors while a BMC is busy
    /// flashing (spec §3.3 tolerates such reads for a while).
    pub fn is_transient(&self) -> bool {
        match self {
            RedfishError::Transport { .. } => true,
            RedfishError::Http { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }
}

/// The BMC's message in a Redfish error body: every
/// `error.@Message.ExtendedInfo[].Message` joined with "; ", else
/// `error.message`, else the start of the raw body when it is not JSON.
/// Empty when there is nothing useful.
pub fn bmc_message(body: &[u8]) -> String {
    const RAW_LIMIT: usize = 200;
    match serde_json::from_slice::<Value>(body) {
        Ok(json) => message_of_json(&json),
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            if text.starts_with('<') {
                // An HTML error page says nothing a person can act on.
                return String::new();
            }
            let mut cut: String = text.chars().take(RAW_LIMIT).collect();
            if text.chars().count() > RAW_LIMIT {
                cut.push('…');
            }
            cut
        }
    }
}

fn message_of_json(json: &Value) -> String {
    let Some(error) = json.get("error") else {
        return String::new();
    };
    let extended: Vec<&str> = error
        .get("@Message.ExtendedInfo")
        .and_then(Value::as_array)
        .map(|infos| {
            infos
                .iter()
                .filter_map(|info| info.get("Message").and_then(Value::as_str))
                .filter(|m| !m.trim().is_empty())
                .collect()
        })
        .unwrap_or_default();
    if !extended.is_empty() {
        return extended.join("; ");
    }
    error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_info_messages_win_and_are_joined() {
        let body = br#"{"error":{"code":"Base.1.0.GeneralError","message":"general",
            "@Message.ExtendedInfo":[{"Message":"first"},{"MessageId":"x"},{"Message":"second"}]}}"#;
        assert_eq!(bmc_message(body), "first; second");
    }

    #[test]
    fn error_message_is_the_fallback() {
        // sushy-tools' own error shape: ExtendedInfo without a Message.
        let body = br#"{"error":{"code":"Base.1.0.GeneralError","message":"Power state Nmi is not supported",
            "@Message.ExtendedInfo":[{"MessageId":"Base.1.0.GeneralError"}]}}"#;
        assert_eq!(bmc_message(body), "Power state Nmi is not supported");
    }

    #[test]
    fn json_without_error_and_empty_body_give_nothing() {
        assert_eq!(bmc_message(br#"{"Id":"1"}"#), "");
        assert_eq!(bmc_message(b""), "");
        assert_eq!(bmc_message(b"<html><body>500</body></html>"), "");
    }

    #[test]
    fn raw_text_is_kept_but_cut() {
        assert_eq!(bmc_message(b"  service busy \n"), "service busy");
        let long = "x".repeat(500);
        let got = bmc_message(long.as_bytes());
        assert_eq!(got.chars().count(), 201);
        assert!(got.ends_with('…'));
    }

    #[test]
    fn display_carries_status_and_message() {
        let e = RedfishError::Http {
            method: "POST",
            uri: "http://bmc/redfish/v1/x".into(),
            status: 500,
            message: "boom".into(),
        };
        assert_eq!(
            e.to_string(),
            "POST http://bmc/redfish/v1/x: HTTP 500: boom"
        );
        let e = RedfishError::ResetTypeUnsupported {
            reset_type: ResetType::Nmi,
            message: String::new(),
        };
        assert_eq!(
            e.to_string(),
            "the BMC does not implement reset type Nmi (HTTP 501)"
        );
    }

    #[test]
    fn job_error_classification() {
        let http = |status| RedfishError::Http {
            method: "GET",
            uri: "u".into(),
            status,
            message: String::new(),
        };
        assert_eq!(http(500).job_error(), JobError::ServerError);
        assert_eq!(http(400).job_error(), JobError::ClientError);
        assert!(http(503).is_transient());
        assert!(http(429).is_transient());
        assert!(!http(400).is_transient());
        let unauthorized = RedfishError::Unauthorized {
            method: "GET",
            uri: "u".into(),
            status: 401,
            message: String::new(),
        };
        assert_eq!(unauthorized.job_error(), JobError::Unauthenticated);
        assert!(!unauthorized.is_transient());
        let missing = RedfishError::SystemNotFound {
            uri: "u".into(),
            message: String::new(),
        };
        assert_eq!(missing.job_error(), JobError::TargetNotFound);
        let timeout = RedfishError::Transport {
            method: "GET",
            uri: "u".into(),
            kind: TransportKind::Timeout,
            message: "timed out".into(),
        };
        assert_eq!(timeout.job_error(), JobError::Timeout);
        assert!(timeout.is_transient());
        let image = RedfishError::ImageRead {
            path: "/x".into(),
            message: "gone".into(),
        };
        assert_eq!(image.job_error(), JobError::FileNotFound);
    }
}
