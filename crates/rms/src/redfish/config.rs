//! Settings of a Redfish client, with every default in one place.
//!
//! The timing defaults follow the reference worker (spec §3.3): task
//! polling every 5 s for at most 3 h, status reads allowed to fail for up to
//! 15 min while a BMC is busy flashing.

use std::time::Duration;

/// How a [`RedfishClient`](super::RedfishClient) talks to one BMC.
#[derive(Clone)]
pub struct RedfishConfig {
    /// TCP connect (and TLS handshake) limit.
    pub connect_timeout: Duration,
    /// Limit for one JSON request, answer included.
    pub request_timeout: Duration,
    /// Limit for one multipart firmware upload.
    pub upload_timeout: Duration,
    /// Verify the BMC's TLS certificate. Default true; turning it off is an
    /// explicit choice for BMCs with self-signed certificates.
    pub verify_tls: bool,
    /// Extra trusted root certificate (PEM) for a BMC with a private CA.
    pub ca_cert_pem: Option<Vec<u8>>,
    /// Refuse a reset type the system's `ResetType@Redfish.AllowableValues`
    /// does not list, before sending it. Some BMCs list too little; turning
    /// this off lets the BMC decide.
    pub check_allowable_values: bool,
    /// Pause between two reads of a firmware task.
    pub task_poll_interval: Duration,
    /// Limit for a firmware task to reach a terminal state.
    pub task_timeout: Duration,
    /// How long task-status reads may keep failing transiently (transport
    /// errors, 5xx) before the update is reported failed.
    pub task_status_error_grace: Duration,
}

impl Default for RedfishConfig {
    fn default() -> Self {
        RedfishConfig {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            upload_timeout: Duration::from_secs(30 * 60),
            verify_tls: true,
            ca_cert_pem: None,
            check_allowable_values: true,
            task_poll_interval: Duration::from_secs(5),
            task_timeout: Duration::from_secs(3 * 60 * 60),
            task_status_error_grace: Duration::from_secs(15 * 60),
        }
    }
}

impl std::fmt::Debug for RedfishConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedfishConfig")
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("upload_timeout", &self.upload_timeout)
            .field("verify_tls", &self.verify_tls)
            .field("ca_cert_pem", &self.ca_cert_pem.as_ref().map(|_| "<pem>"))
            .field("check_allowable_values", &self.check_allowable_values)
            .field("task_poll_interval", &self.task_poll_interval)
            .field("task_timeout", &self.task_timeout)
            .field("task_status_error_grace", &self.task_status_error_grace)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_verify_tls_and_follow_the_reference_timings() {
        let c = RedfishConfig::default();
        assert!(c.verify_tls);
        assert!(c.check_allowable_values);
        assert_eq!(c.task_poll_interval, Duration::from_secs(5));
        assert_eq!(c.task_timeout, Duration::from_secs(10_800));
        assert_eq!(c.task_status_error_grace, Duration::from_secs(900));
    }
}
