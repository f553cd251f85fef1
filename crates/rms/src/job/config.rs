//! Job limits as configured under `[workflows]` (spec §1.9, §1.13, §5.4):
//! serde defaults are the single source of the default values, unknown keys
//! are rejected, and non-zero types keep both limits positive.

use std::num::{NonZeroU64, NonZeroUsize};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::registry::MAX_TRACKED_JOBS;

/// Default `terminal_job_ttl_seconds` (24 h).
pub const DEFAULT_TERMINAL_JOB_TTL_SECONDS: u64 = 86_400;

/// The job-tracker limits of the `[workflows]` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobLimits {
    /// Cap on retained records, terminal ones included (default 10,000).
    #[serde(default = "default_max_tracked_jobs")]
    pub max_tracked_jobs: NonZeroUsize,
    /// How long terminal jobs stay queryable (default 86,400 s).
    #[serde(default = "default_terminal_job_ttl_seconds")]
    pub terminal_job_ttl_seconds: NonZeroU64,
}

impl JobLimits {
    /// The retention period as a `Duration`.
    pub fn terminal_job_ttl(&self) -> Duration {
        Duration::from_secs(self.terminal_job_ttl_seconds.get())
    }
}

impl Default for JobLimits {
    fn default() -> Self {
        Self {
            max_tracked_jobs: default_max_tracked_jobs(),
            terminal_job_ttl_seconds: default_terminal_job_ttl_seconds(),
        }
    }
}

fn default_max_tracked_jobs() -> NonZeroUsize {
    NonZeroUsize::new(MAX_TRACKED_JOBS).unwrap_or(NonZeroUsize::MIN)
}

fn default_terminal_job_ttl_seconds() -> NonZeroU64 {
    NonZeroU64::new(DEFAULT_TERMINAL_JOB_TTL_SECONDS).unwrap_or(NonZeroU64::MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_section_gives_spec_defaults() {
        let limits: JobLimits = serde_json::from_str("{}").unwrap();
        assert_eq!(limits, JobLimits::default());
        assert_eq!(limits.max_tracked_jobs.get(), 10_000);
        assert_eq!(limits.terminal_job_ttl_seconds.get(), 86_400);
        assert_eq!(limits.terminal_job_ttl(), Duration::from_secs(24 * 3600));
    }

    #[test]
    fn zero_and_unknown_keys_are_rejected() {
        assert!(serde_json::from_str::<JobLimits>(r#"{"max_tracked_jobs":0}"#).is_err());
        assert!(serde_json::from_str::<JobLimits>(r#"{"terminal_job_ttl_seconds":0}"#).is_err());
        assert!(serde_json::from_str::<JobLimits>(r#"{"max_jobs":5}"#).is_err());
        let limits: JobLimits =
            serde_json::from_str(r#"{"max_tracked_jobs":5,"terminal_job_ttl_seconds":60}"#)
                .unwrap();
        assert_eq!(limits.max_tracked_jobs.get(), 5);
        assert_eq!(limits.terminal_job_ttl(), Duration::from_secs(60));
    }
}
