//! The Flow server's Prometheus metrics: the families the engine's parts
//! count into, registered in the server's registry (beside the gRPC edge's
//! `rackflow_rpc_*`) and encoded by its `/metrics` endpoint.
//!
//! Families (labels are closed sets or ids the operator created, never
//! free text a caller sends, so their cardinality stays bounded):
//! * `rackflow_operation_runs{status}`, `rackflow_operation_run_targets{status}`
//!   (targets of pending, running and paused runs), `rackflow_tasks{task_type,
//!   status}` (waiting, pending, running) and `rackflow_task_queue_waiting`:
//!   gauges read from the database at each scrape ([`Metrics::refresh`]), so
//!   every replica shows the same truth and nothing drifts after a crash;
//! * `rackflow_tasks_finished_total{task_type, status}`,
//!   `rackflow_task_duration_seconds{task_type, status}` (start to end) and
//!   `rackflow_stage_duration_seconds{task_type, status}` (per stage of the
//!   task's report) — counted by the process that ran the task;
//! * `rackflow_dispatch_attempt_duration_seconds`: one dispatcher attempt
//!   (the locked read-plan-write of a run);
//! * `rackflow_gate_trips_total{reason}`: runs paused or failed by a gate
//!   (`phase_gate`, `safety_gate`, `conflict_retry_timeout`);
//! * `rackflow_schedule_firings_total{trigger}` (`automatic`, `manual`) and
//!   `rackflow_schedule_skipped_occurrences_total{reason}` (`catch_up`,
//!   `overlap`, `submit_failed`, `invalid_spec`);
//! * `rackflow_event_rule_alerts_total{rule, severity}`,
//!   `rackflow_leak_reports_total{outcome}`,
//!   `rackflow_leak_response_tasks_total{effect}`.
//!
//! Every closed label set's series exist at 0 from the start.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use rackflow_domain::report::Report;
use rackflow_domain::run::{OperationRun, RunReason, RunStatus, TargetStatus};
use rackflow_domain::task::{TaskStatus, TaskType};
use rackflow_store::Store;
use serde::Deserialize;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabels {
    task_type: &'static str,
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TriggerLabels {
    trigger: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AlertLabels {
    rule: String,
    severity: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EffectLabels {
    effect: String,
}

/// Why a schedule's occurrences did not fire one by one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScheduleSkip {
    /// Missed occurrences beyond the catch-up window (or coalesced).
    CatchUp,
    /// Racks whose previous task was still active (overlap policy skip).
    Overlap,
    /// Racks whose task could not be submitted.
    SubmitFailed,
    /// A stored spec that no longer parses (the schedule is disabled).
    InvalidSpec,
}

impl ScheduleSkip {
    const ALL: [ScheduleSkip; 4] = [
        ScheduleSkip::CatchUp,
        ScheduleSkip::Overlap,
        ScheduleSkip::SubmitFailed,
        ScheduleSkip::InvalidSpec,
    ];

    fn as_str(self) -> &'static str {
        match self {
            ScheduleSkip::CatchUp => "catch_up",
            ScheduleSkip::Overlap => "overlap",
            ScheduleSkip::SubmitFailed => "submit_failed",
            ScheduleSkip::InvalidSpec => "invalid_spec",
        }
    }
}

/// Finished statuses a task's end is counted under.
const FINISHED: [TaskStatus; 3] = [
    TaskStatus::Completed,
    TaskStatus::Failed,
    TaskStatus::Terminated,
];

/// Unfinished statuses the `rackflow_tasks` gauge shows.
const UNFINISHED: [TaskStatus; 3] = [
    TaskStatus::Waiting,
    TaskStatus::Pending,
    TaskStatus::Running,
];

/// Run reasons that are a gate's doing.
const GATE_REASONS: [RunReason; 3] = [
    RunReason::PhaseGate,
    RunReason::SafetyGate,
    RunReason::ConflictRetryTimeout,
];

/// Task durations: 50 ms doubling to ~7 h (18 buckets).
fn task_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.05, 2.0, 19))
}

/// Dispatcher attempts: 0.25 ms doubling to ~8 s (16 buckets).
fn attempt_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.00025, 2.0, 16))
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// The families the engine counts into. Share as `Arc<Metrics>`; counting
/// is lock-free apart from a series' first use.
#[derive(Debug)]
pub struct Metrics {
    runs: Family<StatusLabels, Gauge>,
    targets: Family<StatusLabels, Gauge>,
    tasks: Family<TaskLabels, Gauge>,
    waiting: Gauge,
    tasks_finished: Family<TaskLabels, Counter>,
    task_duration: HistogramFamily<TaskLabels>,
    stage_duration: HistogramFamily<TaskLabels>,
    dispatch_attempt: Histogram,
    gate_trips: Family<ReasonLabels, Counter>,
    schedule_firings: Family<TriggerLabels, Counter>,
    schedule_skips: Family<ReasonLabels, Counter>,
    alerts: Family<AlertLabels, Counter>,
    leak_reports: Family<OutcomeLabels, Counter>,
    leak_response_tasks: Family<EffectLabels, Counter>,
}

impl Default for Metrics {
    /// Families in a registry of their own (an engine nobody scrapes).
    fn default() -> Self {
        Self::register(&mut Registry::default())
    }
}

impl Metrics {
    /// Every family, registered in `registry` under `rackflow_`, the closed
    /// label sets' series at 0.
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics {
            runs: Family::default(),
            targets: Family::default(),
            tasks: Family::default(),
            waiting: Gauge::default(),
            tasks_finished: Family::default(),
            task_duration: Family::new_with_constructor(task_histogram),
            stage_duration: Family::new_with_constructor(task_histogram),
            dispatch_attempt: attempt_histogram(),
            gate_trips: Family::default(),
            schedule_firings: Family::default(),
            schedule_skips: Family::default(),
            alerts: Family::default(),
            leak_reports: Family::default(),
            leak_response_tasks: Family::default(),
        };
        let r = registry.sub_registry_with_prefix("rackflow");
        r.register("operation_runs", "Operation runs by status", m.runs.clone());
        r.register(
            "operation_run_targets",
            "Targets of pending, running and paused operation runs, by status",
            m.targets.clone(),
        );
        r.register(
            "tasks",
            "Waiting, pending and running tasks, by type and status",
            m.tasks.clone(),
        );
        r.register(
            "task_queue_waiting",
            "Tasks waiting in a rack's queue (conflict or maintenance window)",
            m.waiting.clone(),
        );
        r.register(
            "tasks_finished",
            "Tasks this process ran to an end, by type and status",
            m.tasks_finished.clone(),
        );
        r.register(
            "task_duration_seconds",
            "Task run time from start to end, by type and status",
            m.task_duration.clone(),
        );
        r.register(
            "stage_duration_seconds",
            "Run time of a task's stages, by task type and stage status",
            m.stage_duration.clone(),
        );
        r.register(
            "dispatch_attempt_duration_seconds",
            "One dispatcher attempt: the locked read, plan and write of a run",
            m.dispatch_attempt.clone(),
        );
        r.register(
            "gate_trips",
            "Operation runs paused or failed by a gate, by reason",
            m.gate_trips.clone(),
        );
        r.register(
            "schedule_firings",
            "Task schedule occurrences fired, by trigger",
            m.schedule_firings.clone(),
        );
        r.register(
            "schedule_skipped_occurrences",
            "Task schedule occurrences (or racks of one) not fired, by reason",
            m.schedule_skips.clone(),
        );
        r.register(
            "event_rule_alerts",
            "Alerts event rules sent (send_alert actions)",
            m.alerts.clone(),
        );
        r.register(
            "leak_reports",
            "Leak reports taken, by what they did to the leak events",
            m.leak_reports.clone(),
        );
        r.register(
            "leak_response_tasks",
            "Tasks leak responses submitted or cancelled to go first",
            m.leak_response_tasks.clone(),
        );
        m.create_zero_series();
        m
    }

    fn create_zero_series(&self) {
        for status in RunStatus::ALL {
            let _ = self.runs.get_or_create_owned(&StatusLabels {
                status: status.as_str(),
            });
        }
        for status in TargetStatus::ALL {
            let _ = self.targets.get_or_create_owned(&StatusLabels {
                status: status.as_str(),
            });
        }
        for task_type in TaskType::ALL {
            for status in UNFINISHED {
                let _ = self
                    .tasks
                    .get_or_create_owned(&task_labels(*task_type, status));
            }
            for status in FINISHED {
                let _ = self
                    .tasks_finished
                    .get_or_create_owned(&task_labels(*task_type, status));
            }
        }
        for reason in GATE_REASONS {
            let _ = self.gate_trips.get_or_create_owned(&ReasonLabels {
                reason: reason.as_str(),
            });
        }
        for trigger in ["automatic", "manual"] {
            let _ = self
                .schedule_firings
                .get_or_create_owned(&TriggerLabels { trigger });
        }
        for skip in ScheduleSkip::ALL {
            let _ = self.schedule_skips.get_or_create_owned(&ReasonLabels {
                reason: skip.as_str(),
            });
        }
        for outcome in ["new", "repeat", "cleared", "stale"] {
            let _ = self.leak_reports.get_or_create_owned(&OutcomeLabels {
                outcome: outcome.to_string(),
            });
        }
        for effect in ["submitted", "cancelled"] {
            let _ = self.leak_response_tasks.get_or_create_owned(&EffectLabels {
                effect: effect.to_string(),
            });
        }
    }

    /// Sets the database gauges from one grouped read per table. On a read
    /// error the gauges keep their last values (logged).
    pub async fn refresh(&self, store: &dyn Store) {
        let counts = match store.status_counts().await {
            Ok(counts) => counts,
            Err(e) => {
                tracing::warn!(error = %e, "metrics: counting runs and tasks failed; gauges keep their last values");
                return;
            }
        };
        for status in RunStatus::ALL {
            let n = counts
                .runs
                .iter()
                .find(|(s, _)| s == status)
                .map_or(0, |(_, n)| *n);
            self.runs
                .get_or_create(&StatusLabels {
                    status: status.as_str(),
                })
                .set(n);
        }
        for status in TargetStatus::ALL {
            let n = counts
                .targets
                .iter()
                .find(|(s, _)| s == status)
                .map_or(0, |(_, n)| *n);
            self.targets
                .get_or_create(&StatusLabels {
                    status: status.as_str(),
                })
                .set(n);
        }
        let mut waiting = 0;
        for task_type in TaskType::ALL {
            for status in UNFINISHED {
                let n = counts
                    .tasks
                    .iter()
                    .find(|(t, s, _)| t == task_type && *s == status)
                    .map_or(0, |(_, _, n)| *n);
                if status == TaskStatus::Waiting {
                    waiting += n;
                }
                self.tasks
                    .get_or_create(&task_labels(*task_type, status))
                    .set(n);
            }
        }
        self.waiting.set(waiting);
    }

    /// A task this process ran ended with `status` after `elapsed`; its
    /// report's stages that ran are timed too.
    pub fn task_finished(
        &self,
        task_type: TaskType,
        status: TaskStatus,
        elapsed: Option<Duration>,
        report: Option<&serde_json::Value>,
    ) {
        let labels = task_labels(task_type, status);
        self.tasks_finished.get_or_create(&labels).inc();
        if let Some(elapsed) = elapsed {
            self.task_duration
                .get_or_create(&labels)
                .observe(elapsed.as_secs_f64());
        }
        let Some(report) = report.and_then(|r| Report::deserialize(r).ok()) else {
            return;
        };
        for stage in &report.stages {
            let (Some(start), Some(end)) = (stage.started_at, stage.finished_at) else {
                continue;
            };
            let seconds = (end - start).num_milliseconds().max(0) as f64 / 1e3;
            self.stage_duration
                .get_or_create(&TaskLabels {
                    task_type: task_type.as_str(),
                    status: stage.status.as_str(),
                })
                .observe(seconds);
        }
    }

    /// One dispatcher attempt took `elapsed`.
    pub fn dispatch_attempt(&self, elapsed: Duration) {
        self.dispatch_attempt.observe(elapsed.as_secs_f64());
    }

    /// A run was paused or failed by the gate `reason` ([`gate_trip`]).
    pub fn gate_tripped(&self, reason: RunReason) {
        self.gate_trips
            .get_or_create(&ReasonLabels {
                reason: reason.as_str(),
            })
            .inc();
    }

    /// A schedule fired (`manual`: TriggerTaskSchedule).
    pub fn schedule_fired(&self, manual: bool) {
        let trigger = if manual { "manual" } else { "automatic" };
        self.schedule_firings
            .get_or_create(&TriggerLabels { trigger })
            .inc();
    }

    /// `count` occurrences (or racks of one) did not fire for `skip`.
    pub fn schedule_skipped(&self, skip: ScheduleSkip, count: u64) {
        self.schedule_skips
            .get_or_create(&ReasonLabels {
                reason: skip.as_str(),
            })
            .inc_by(count);
    }
    /// An event rule's `send_alert` ran.
    pub fn alert_sent(&self, rule: uuid::Uuid, severity: &str) {
        self.alerts
            .get_or_create(&AlertLabels {
                rule: rule.to_string(),
                severity: severity.to_string(),
            })
            .inc();
    }

    /// A leak report was taken with this outcome.
    pub fn leak_reported(&self, outcome: &str) {
        self.leak_reports
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_string(),
            })
            .inc();
    }

    /// A leak response submitted `submitted` and cancelled `cancelled`
    /// tasks.
    pub fn leak_response(&self, submitted: usize, cancelled: usize) {
        for (effect, n) in [("submitted", submitted), ("cancelled", cancelled)] {
            self.leak_response_tasks
                .get_or_create(&EffectLabels {
                    effect: effect.to_string(),
                })
                .inc_by(u64::try_from(n).unwrap_or(u64::MAX));
        }
    }
}

fn task_labels(task_type: TaskType, status: TaskStatus) -> TaskLabels {
    TaskLabels {
        task_type: task_type.as_str(),
        status: status.as_str(),
    }
}

/// The gate reason a transition newly paused or failed a run with.
pub fn gate_trip(before: &OperationRun, after: &OperationRun) -> Option<RunReason> {
    let stopped = matches!(after.status, RunStatus::Paused | RunStatus::Failed);
    let changed = before.status != after.status || before.reason != after.reason;
    (stopped && changed && GATE_REASONS.contains(&after.reason)).then_some(after.reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_show_in_the_text_with_their_labels() {
        let mut registry = Registry::default();
        let m = Metrics::register(&mut registry);
        let rule = uuid::Uuid::nil();
        m.alert_sent(rule, "critical");
        m.alert_sent(rule, "critical");
        m.leak_reported("new");
        m.leak_response(1, 2);
        let text = rackflow_telemetry::encode(&registry);
        assert!(
            text.contains(&format!(
                "rackflow_event_rule_alerts_total{{rule=\"{rule}\",severity=\"critical\"}} 2"
            )),
            "{text}"
        );
        assert!(
            text.contains("rackflow_leak_reports_total{outcome=\"new\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("rackflow_leak_response_tasks_total{effect=\"cancelled\"} 2"),
            "{text}"
        );
        assert!(text.contains("# HELP rackflow_event_rule_alerts"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
