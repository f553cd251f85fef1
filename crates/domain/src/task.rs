//! Tasks: one operation on one rack, executed by an operation rule.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ComponentsByType;
use crate::rule::RuleDefinition;
use crate::run::{FirmwarePayload, QueueStrategy};

named_enum!(
    /// Lifecycle status of a task. Numbers are the wire `TaskStatus` values.
    TaskStatus {
        Pending = 1 => "pending",
        Running = 2 => "running",
        Completed = 3 => "completed",
        Failed = 4 => "failed",
        Terminated = 5 => "terminated",
        Waiting = 6 => "waiting",
    }
);

impl TaskStatus {
    /// Completed, failed or terminated.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Terminated
        )
    }

    /// Pending or running: the tasks conflict detection looks at.
    pub fn is_active(self) -> bool {
        matches!(self, TaskStatus::Pending | TaskStatus::Running)
    }
}

named_enum!(
    /// Kind of task (the rule's operation type). Numbers are the wire
    /// `OperationType` values where one exists (0 otherwise).
    TaskType {
        PowerControl = 1 => "power_control",
        FirmwareControl = 2 => "firmware_control",
        BringUp = 3 => "bring_up",
        Decommission = 4 => "decommission",
        InjectExpectation = 5 => "inject_expectation",
    }
);

impl TaskType {
    /// The wire `OperationType` number (only power and firmware have one).
    pub fn operation_type_wire(self) -> i32 {
        match self {
            TaskType::PowerControl => 1,
            TaskType::FirmwareControl => 2,
            _ => 0,
        }
    }

    /// From the wire `OperationType` number.
    pub fn from_operation_type_wire(value: i32) -> Option<TaskType> {
        match value {
            1 => Some(TaskType::PowerControl),
            2 => Some(TaskType::FirmwareControl),
            _ => None,
        }
    }

    /// Operation codes valid for this type.
    pub fn valid_codes(self) -> &'static [&'static str] {
        match self {
            TaskType::PowerControl => &[
                "power_on",
                "force_power_on",
                "power_off",
                "force_power_off",
                "restart",
                "force_restart",
                "warm_reset",
                "cold_reset",
            ],
            TaskType::FirmwareControl => &["upgrade", "downgrade", "rollback"],
            TaskType::BringUp => &["bring_up", "ingest"],
            TaskType::Decommission => &["decommission"],
            TaskType::InjectExpectation => &["inject_expectation"],
        }
    }
}

/// Standard task messages (spec flow-core §3.2).
pub mod messages {
    pub const WAITING: &str = "Queued: waiting for rack to become available";
    pub const PENDING: &str = "Pending";
    pub const RUNNING: &str = "Running";
    pub const COMPLETED: &str = "Succeeded";
    pub const FAILED: &str = "Failed";
    pub const TERMINATED: &str = "Terminated";
    pub const CANCELLED: &str = "Cancelled by user";
    pub const EXPIRED: &str = "Expired: queue timeout reached";
    pub const PROMOTED: &str = "Promoted: no conflicting active tasks";

    /// A task held until its maintenance window opens.
    pub fn waiting_for_window(opens: chrono::DateTime<chrono::Utc>) -> String {
        format!(
            "Queued: waiting for its maintenance window (opens {})",
            opens.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    }

    /// A waiting task whose maintenance window closed before it could start.
    pub fn window_closed(closed: chrono::DateTime<chrono::Utc>) -> String {
        format!(
            "Terminated: maintenance window closed at {} before the task could start",
            closed.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    }
    /// Longest status message kept (longer errors are cut).
    pub const MAX_MESSAGE_LEN: usize = 512;
}

/// Operation payload of a task (`information`): the code and its parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskInformation {
    pub code: String,
    #[serde(default)]
    pub override_readiness_check: bool,
    /// Firmware parameters, for firmware_control tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<FirmwarePayload>,
}

/// A firmware task's maintenance window (issue 12): it starts no earlier
/// than `opens` and is not started after `closes`; one already running is
/// never cut off. Either end may be unset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    pub opens: Option<chrono::DateTime<chrono::Utc>>,
    pub closes: Option<chrono::DateTime<chrono::Utc>>,
}

impl Window {
    /// The window of a task's payload (`start_time` / `end_time`, Unix
    /// seconds, 0 = unset); tasks without a firmware payload have none.
    pub fn of(information: &TaskInformation) -> Window {
        let at = |secs: i64| {
            (secs != 0)
                .then(|| chrono::DateTime::from_timestamp(secs, 0))
                .flatten()
        };
        match &information.firmware {
            Some(f) => Window {
                opens: at(f.start_time),
                closes: at(f.end_time),
            },
            None => Window::default(),
        }
    }

    /// When the window opens, if that is still to come.
    pub fn opens_after(
        &self,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Option<chrono::DateTime<chrono::Utc>> {
        self.opens.filter(|opens| *opens > now)
    }

    /// When the window closed, if it has.
    pub fn closed_by(
        &self,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Option<chrono::DateTime<chrono::Utc>> {
        self.closes.filter(|closes| *closes <= now)
    }

    /// Why a new task with this window cannot be accepted at `now`.
    pub fn check(&self, now: chrono::DateTime<chrono::Utc>) -> Result<(), String> {
        if let (Some(opens), Some(closes)) = (self.opens, self.closes)
            && closes <= opens
        {
            return Err("maintenance window: end_time must be after start_time".to_string());
        }
        if let Some(closed) = self.closed_by(now) {
            return Err(format!(
                "maintenance window already closed: end_time {} is in the past",
                closed.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ));
        }
        Ok(())
    }
}

/// What a task submitter chose to do on a rack conflict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuePolicy {
    pub strategy: QueueStrategy,
    /// How long a task may wait in the queue.
    pub timeout_secs: i64,
}

/// Default time a queued task may wait (spec §3.5).
pub const DEFAULT_QUEUE_TIMEOUT_SECS: i64 = 3600;
/// Most tasks waiting on one rack (spec §3.3).
pub const MAX_WAITING_PER_RACK: usize = 5;

/// What started a task (the reference's `trigger_type` / `trigger_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskTrigger {
    /// A request through the API, a schedule or an operation run.
    #[default]
    Api,
    /// An event rule acting on an event (a leak response); the rule's id.
    EventRuleExecution { rule_id: Uuid },
}

impl TaskTrigger {
    /// The stored and wire name: `api` or `event_rule_execution`.
    pub fn type_name(self) -> &'static str {
        match self {
            TaskTrigger::Api => "api",
            TaskTrigger::EventRuleExecution { .. } => "event_rule_execution",
        }
    }

    /// The trigger's id: the event rule, for an event-rule execution.
    pub fn id(self) -> Option<Uuid> {
        match self {
            TaskTrigger::Api => None,
            TaskTrigger::EventRuleExecution { rule_id } => Some(rule_id),
        }
    }

    /// The trigger a stored `(type, id)` pair names; `None` when the pair
    /// is not one (unknown type, or an id where none belongs).
    pub fn from_parts(type_name: &str, id: Option<Uuid>) -> Option<TaskTrigger> {
        match (type_name, id) {
            ("api", None) => Some(TaskTrigger::Api),
            ("event_rule_execution", Some(rule_id)) => {
                Some(TaskTrigger::EventRuleExecution { rule_id })
            }
            _ => None,
        }
    }
}

/// A task as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub id: Uuid,
    pub task_type: TaskType,
    pub information: TaskInformation,
    pub description: String,
    pub rack_id: Uuid,
    pub components_by_type: ComponentsByType,
    /// `local` (in-process executor) or `temporal`.
    pub executor_type: String,
    pub execution_id: String,
    pub status: TaskStatus,
    pub message: String,
    /// Report JSON (version 1), absent until execution starts.
    pub report: Option<serde_json::Value>,
    /// The database rule used; `None` for a built-in rule.
    pub applied_rule_id: Option<Uuid>,
    /// The rule definition fixed when the task became pending, so later rule
    /// edits do not change an in-flight task.
    pub rule_definition: Option<RuleDefinition>,
    pub queue_policy: QueuePolicy,
    pub queue_expires_at: Option<DateTime<Utc>>,
    pub idempotency_key: Option<String>,
    /// What started it.
    pub trigger: TaskTrigger,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl Task {
    /// `"<type>/<code>"`, the wire `Task.operation`.
    pub fn operation(&self) -> String {
        format!("{}/{}", self.task_type, self.information.code)
    }
}

/// Cuts a message to [`messages::MAX_MESSAGE_LEN`] bytes on a char boundary,
/// keeping only its first line.
pub fn status_message(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    crate::prefix_within(line, messages::MAX_MESSAGE_LEN).to_string()
}
