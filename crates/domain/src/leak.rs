//! Leak reports and leak events (issue 34): what a leak source (the
//! simulated fleet, a BMC's leak detectors, a facility monitor through the
//! API) says about a component, and the occurrence it opens.
//!
//! An event is one leak on one component: the first `detected` report opens
//! it, later `detected` reports while it is open count as observations of
//! the same leak (they never start a second response), a `not detected`
//! report closes it; a leak after that is a new event. A report older than
//! the component's latest observation changes nothing.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::event_rule::Severity;

/// Longest source name and message, in bytes.
pub const MAX_SOURCE_BYTES: usize = 128;
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// How the message of a task stopped for a leak response begins. The task
/// ends `terminated` (cancelled, its cleanup runs); an operation run whose
/// child it was records the target as *failed* with the message, so the
/// leak counts toward the run's safety gates ([`is_leak_preemption`]).
pub const PREEMPTED_BY_LEAK: &str = "Stopped: coolant leak";

/// The message of a task the leak response stopped: names the leaking
/// component and the event.
pub fn preemption_message(component_id: Uuid, event_id: Uuid) -> String {
    format!(
        "{PREEMPTED_BY_LEAK} on component {component_id} (leak event {event_id}); the leak response goes first"
    )
}

/// Whether a terminated task's message says a leak response stopped it
/// (only the engine writes task messages, so no caller can forge one).
pub fn is_leak_preemption(task_message: &str) -> bool {
    task_message.starts_with(PREEMPTED_BY_LEAK)
}

/// One report from a leak source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeakReport {
    pub component_id: Uuid,
    /// Who reported it (`sim`, `redfish`, `api:<caller>`, a monitor's name).
    pub source: String,
    pub severity: Severity,
    /// `true`: a leak; `false`: the source sees none (closes an open event).
    pub detected: bool,
    /// When the source observed it.
    pub observed_at: DateTime<Utc>,
    pub message: String,
}

impl LeakReport {
    /// Checks the report's text fields; the error names the field.
    pub fn check(&self) -> Result<(), String> {
        if self.source.trim().is_empty() {
            return Err("source is required".to_string());
        }
        if self.source.len() > MAX_SOURCE_BYTES {
            return Err(format!("source is at most {MAX_SOURCE_BYTES} bytes"));
        }
        if self.message.len() > MAX_MESSAGE_BYTES {
            return Err(format!("message is at most {MAX_MESSAGE_BYTES} bytes"));
        }
        Ok(())
    }
}

/// One leak occurrence on one component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeakEvent {
    pub id: Uuid,
    pub component_id: Uuid,
    pub rack_id: Option<Uuid>,
    pub source: String,
    pub severity: Severity,
    pub message: String,
    pub detected_at: DateTime<Utc>,
    pub last_reported_at: DateTime<Utc>,
    pub observations: i32,
    pub closed_at: Option<DateTime<Utc>>,
}

impl LeakEvent {
    pub fn is_open(&self) -> bool {
        self.closed_at.is_none()
    }
}

/// What a report did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeakReported {
    /// A new leak: its response is to run.
    New(LeakEvent),
    /// Another observation of an open leak: nothing more to do.
    Repeat(LeakEvent),
    /// A not-detected report; the event it closed, if one was open.
    Cleared(Option<LeakEvent>),
    /// Older than the component's latest observation: ignored.
    Stale,
    /// No such (live) component.
    ComponentNotFound,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_need_a_bounded_source_and_message() {
        let report = LeakReport {
            component_id: Uuid::nil(),
            source: "cdu-7".into(),
            severity: Severity::Critical,
            detected: true,
            observed_at: Utc::now(),
            message: String::new(),
        };
        assert!(report.check().is_ok());
        let blank = LeakReport {
            source: " ".into(),
            ..report.clone()
        };
        assert_eq!(blank.check().unwrap_err(), "source is required");
        let long = LeakReport {
            message: "m".repeat(MAX_MESSAGE_BYTES + 1),
            ..report
        };
        assert!(long.check().unwrap_err().contains("message"));
    }
}
