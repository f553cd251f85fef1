//! Workflow metrics (spec §1.15), fed by the registry's creation and
//! terminal observers, kept in `prometheus-client` families.
//!
//! Only jobs with a `workflow_type` count (visible leaves and parents; batch
//! children do not). On creation the `queued`/`none` counter and the in-flight
//! gauge go up; on the single terminal transition the `completed`/`none` or
//! `failed`/`<error label>` counter goes up and the gauge goes down.
//!
//! Every workflow type's in-flight gauge and its `queued`/`completed`
//! counters exist at 0 from the start, so a scrape before the first job
//! already shows both families (a dashboard's `rate()` needs the zero).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::error::job_error_of;
use super::job_type::JobType;
use super::registry::JobSnapshot;
use super::state::{JobLifecycleState, JobState};

/// `error_code` label of successful (and freshly queued) workflows.
pub const WORKFLOW_SUCCESS_ERROR_CODE: &str = "none";

/// Full name of the lifecycle-event counter.
pub const WORKFLOWS_COUNTS_TOTAL: &str = "rms_workflows_counts_total";

/// Full name of the in-flight gauge.
pub const WORKFLOWS_IN_FLIGHT: &str = "rms_workflows_in_flight";

// Label fields in alphabetical order: the order they are printed in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CountLabels {
    error_code: String,
    is_leaf: String,
    workflow_state: String,
    workflow_type: String,
}

impl CountLabels {
    fn new(error_code: &str, is_leaf: bool, workflow_state: &str, workflow_type: &str) -> Self {
        CountLabels {
            error_code: error_code.to_owned(),
            is_leaf: is_leaf.to_string(),
            workflow_state: workflow_state.to_owned(),
            workflow_type: workflow_type.to_owned(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct GaugeLabels {
    is_leaf: String,
    workflow_type: String,
}

impl GaugeLabels {
    fn new(is_leaf: bool, workflow_type: &str) -> Self {
        GaugeLabels {
            is_leaf: is_leaf.to_string(),
            workflow_type: workflow_type.to_owned(),
        }
    }
}

/// Workflow counters and gauges.
#[derive(Debug, Clone)]
pub struct WorkflowMetrics {
    counts: Family<CountLabels, Counter>,
    in_flight: Family<GaugeLabels, Gauge>,
}

impl Default for WorkflowMetrics {
    /// Families in a registry of their own (a tracker nobody scrapes).
    fn default() -> Self {
        Self::register(&mut Registry::default())
    }
}

impl WorkflowMetrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// Both families, registered in `registry`, every workflow type's
    /// series present at 0.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = WorkflowMetrics {
            counts: Family::default(),
            in_flight: Family::default(),
        };
        registry.register(
            "rms_workflows_counts",
            "Total count of externally visible async workflow lifecycle events",
            metrics.counts.clone(),
        );
        registry.register(
            "rms_workflows_in_flight",
            "Number of externally visible async workflows currently in flight",
            metrics.in_flight.clone(),
        );
        for job_type in JobType::ALL {
            for is_leaf in [true, false] {
                let workflow_type = job_type.span_name();
                let _ = metrics
                    .in_flight
                    .get_or_create_owned(&GaugeLabels::new(is_leaf, workflow_type));
                for state in [JobState::Queued, JobState::Completed] {
                    let _ = metrics.counts.get_or_create_owned(&CountLabels::new(
                        WORKFLOW_SUCCESS_ERROR_CODE,
                        is_leaf,
                        state.as_str(),
                        workflow_type,
                    ));
                }
            }
        }
        metrics
    }

    /// Creation observer: `queued`/`none` counter +1, in-flight +1.
    pub fn record_created(&self, snapshot: &JobSnapshot) {
        let Some(workflow_type) = snapshot.workflow_type else {
            return;
        };
        let workflow_type = workflow_type.span_name();
        let is_leaf = !snapshot.node_id.is_empty();
        self.counts
            .get_or_create(&CountLabels::new(
                WORKFLOW_SUCCESS_ERROR_CODE,
                is_leaf,
                JobState::Queued.as_str(),
                workflow_type,
            ))
            .inc();
        self.in_flight
            .get_or_create(&GaugeLabels::new(is_leaf, workflow_type))
            .inc();
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
        self.counts
            .get_or_create(&CountLabels::new(
                error_code,
                is_leaf,
                workflow_state,
                workflow_type,
            ))
            .inc();
        self.in_flight
            .get_or_create(&GaugeLabels::new(is_leaf, workflow_type))
            .dec();
    }

    /// Current value of `rms_workflows_counts_total{…}` (0 if never seen).
    pub fn count(
        &self,
        workflow_type: &str,
        is_leaf: bool,
        workflow_state: &str,
        error_code: &str,
    ) -> u64 {
        let labels = CountLabels::new(error_code, is_leaf, workflow_state, workflow_type);
        self.counts.get(&labels).map_or(0, |c| c.get())
    }

    /// Current value of `rms_workflows_in_flight{…}` (0 if never seen).
    pub fn in_flight(&self, workflow_type: &str, is_leaf: bool) -> i64 {
        let labels = GaugeLabels::new(is_leaf, workflow_type);
        self.in_flight.get(&labels).map_or(0, |g| g.get())
    }
}
