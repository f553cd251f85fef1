//! In-process workflow metrics (spec §1.15), fed by the registry's creation
//! and terminal observers.
//!
//! Only jobs with a `workflow_type` count (visible leaves and parents; batch
//! children do not). On creation the `queued`/`none` counter and the in-flight
//! gauge go up; on the single terminal transition the `completed`/`none` or
//! `failed`/`<error label>` counter goes up and the gauge goes down. The
//! values are kept here without a Prometheus dependency; [`WorkflowMetrics::encode_text`]
//! renders them in the Prometheus text format under the `rms` namespace for a
//! later `/metrics` endpoint.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::error::job_error_of;
use super::registry::JobSnapshot;
use super::state::{JobLifecycleState, JobState};

/// `error_code` label of successful (and freshly queued) workflows.
pub const WORKFLOW_SUCCESS_ERROR_CODE: &str = "none";

/// Full name of the lifecycle-event counter.
pub const WORKFLOWS_COUNTS_TOTAL: &str = "rms_workflows_counts_total";

/// Full name of the in-flight gauge.
pub const WORKFLOWS_IN_FLIGHT: &str = "rms_workflows_in_flight";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct CountKey {
    // Field order = alphabetical label order, so the map iterates in the
    // order the text format prints labels.
    error_code: &'static str,
    is_leaf: bool,
    workflow_state: &'static str,
    workflow_type: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct GaugeKey {
    is_leaf: bool,
    workflow_type: &'static str,
}

#[derive(Debug, Default)]
struct Values {
    counts: BTreeMap<CountKey, u64>,
    in_flight: BTreeMap<GaugeKey, i64>,
}

/// Workflow counters and gauges.
#[derive(Debug, Default)]
pub struct WorkflowMetrics {
    values: Mutex<Values>,
}

impl WorkflowMetrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// Creation observer: `queued`/`none` counter +1, in-flight +1.
    pub fn record_created(&self, snapshot: &JobSnapshot) {
        let Some(workflow_type) = snapshot.workflow_type else {
            return;
        };
        let workflow_type = workflow_type.span_name();
        let is_leaf = !snapshot.node_id.is_empty();
        let mut values = self.lock();
        *values
            .counts
            .entry(CountKey {
                error_code: WORKFLOW_SUCCESS_ERROR_CODE,
                is_leaf,
                workflow_state: JobState::Queued.as_str(),
                workflow_type,
            })
            .or_default() += 1;
        *values
            .in_flight
            .entry(GaugeKey {
                is_leaf,
                workflow_type,
            })
            .or_default() += 1;
    }

    /// Terminal observer: `completed`/`none` or `failed`/`<label>` +1,
    /// in-flight −1.
    pub fn record_terminal(&self, snapshot: &JobSnapshot) {
        let Some(workflow_type) = snapshot.workflow_type else {
            return;
        };
        let (workflow_state, error_code) = match &snapshot.state {
            JobLifecycleState::Completed { .. } => {
                (JobState::Completed.as_str(), WORKFLOW_SUCCESS_ERROR_CODE)
            }
            JobLifecycleState::Failed { failure, .. } => (
                JobState::Failed.as_str(),
                job_error_of(failure.as_ref()).metrics_label(),
            ),
            JobLifecycleState::Queued { .. } | JobLifecycleState::Running { .. } => return,
        };
        let workflow_type = workflow_type.span_name();
        let is_leaf = !snapshot.node_id.is_empty();
        let mut values = self.lock();
        *values
            .counts
            .entry(CountKey {
                error_code,
                is_leaf,
                workflow_state,
                workflow_type,
            })
            .or_default() += 1;
        *values
            .in_flight
            .entry(GaugeKey {
                is_leaf,
                workflow_type,
            })
            .or_default() -= 1;
    }

    /// Current value of `rms_workflows_counts_total{…}` (0 if never seen).
    pub fn count(
        &self,
        workflow_type: &str,
        is_leaf: bool,
        workflow_state: &str,
        error_code: &str,
    ) -> u64 {
        self.lock()
            .counts
            .iter()
            .find(|(key, _)| {
                key.workflow_type == workflow_type
                    && key.is_leaf == is_leaf
                    && key.workflow_state == workflow_state
                    && key.error_code == error_code
            })
            .map_or(0, |(_, value)| *value)
    }

    /// Current value of `rms_workflows_in_flight{…}` (0 if never seen).
    pub fn in_flight(&self, workflow_type: &str, is_leaf: bool) -> i64 {
        self.lock()
            .in_flight
            .iter()
            .find(|(key, _)| key.workflow_type == workflow_type && key.is_leaf == is_leaf)
            .map_or(0, |(_, value)| *value)
    }

    /// Renders both metrics in the Prometheus text exposition format.
    pub fn encode_text(&self) -> String {
        let values = self.lock();
        let mut out = String::new();
        if !values.counts.is_empty() {
            let _ = writeln!(
                out,
                "# HELP {WORKFLOWS_COUNTS_TOTAL} Total count of externally visible async workflow lifecycle events"
            );
            let _ = writeln!(out, "# TYPE {WORKFLOWS_COUNTS_TOTAL} counter");
            for (key, value) in &values.counts {
                let _ = writeln!(
                    out,
                    "{WORKFLOWS_COUNTS_TOTAL}{{error_code=\"{}\",is_leaf=\"{}\",workflow_state=\"{}\",workflow_type=\"{}\"}} {value}",
                    key.error_code, key.is_leaf, key.workflow_state, key.workflow_type
                );
            }
        }
        if !values.in_flight.is_empty() {
            let _ = writeln!(
                out,
                "# HELP {WORKFLOWS_IN_FLIGHT} Number of externally visible async workflows currently in flight"
            );
            let _ = writeln!(out, "# TYPE {WORKFLOWS_IN_FLIGHT} gauge");
            for (key, value) in &values.in_flight {
                let _ = writeln!(
                    out,
                    "{WORKFLOWS_IN_FLIGHT}{{is_leaf=\"{}\",workflow_type=\"{}\"}} {value}",
                    key.is_leaf, key.workflow_type
                );
            }
        }
        out
    }

    fn lock(&self) -> MutexGuard<'_, Values> {
        // Counter updates cannot be left half-applied; a poisoned lock is safe.
        self.values.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
