//! Redfish values the back end reads and writes, and their parsing from
//! resource JSON: reset types, power states, task states and status, and
//! firmware inventory entries. Pure: no I/O, tested exhaustively here.

use std::fmt;

use serde_json::Value;

/// `ComputerSystem.Reset` `ResetType` (Redfish `Resource.ResetType`).
/// `Other` carries a value this enum does not name, as the BMC spelled it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ResetType {
    On,
    ForceOff,
    GracefulShutdown,
    GracefulRestart,
    ForceRestart,
    Nmi,
    ForceOn,
    PushPowerButton,
    PowerCycle,
    Suspend,
    Pause,
    Resume,
    Other(String),
}

impl ResetType {
    const NAMED: [ResetType; 12] = [
        ResetType::On,
        ResetType::ForceOff,
        ResetType::GracefulShutdown,
        ResetType::GracefulRestart,
        ResetType::ForceRestart,
        ResetType::Nmi,
        ResetType::ForceOn,
        ResetType::PushPowerButton,
        ResetType::PowerCycle,
        ResetType::Suspend,
        ResetType::Pause,
        ResetType::Resume,
    ];

    /// The wire string.
    pub fn as_str(&self) -> &str {
        match self {
            ResetType::On => "On",
            ResetType::ForceOff => "ForceOff",
            ResetType::GracefulShutdown => "GracefulShutdown",
            ResetType::GracefulRestart => "GracefulRestart",
            ResetType::ForceRestart => "ForceRestart",
            ResetType::Nmi => "Nmi",
            ResetType::ForceOn => "ForceOn",
            ResetType::PushPowerButton => "PushPowerButton",
            ResetType::PowerCycle => "PowerCycle",
            ResetType::Suspend => "Suspend",
            ResetType::Pause => "Pause",
            ResetType::Resume => "Resume",
            ResetType::Other(s) => s,
        }
    }

    /// Parses a wire string; unknown values become `Other`.
    pub fn parse(s: &str) -> ResetType {
        ResetType::NAMED
            .iter()
            .find(|t| t.as_str() == s)
            .cloned()
            .unwrap_or_else(|| ResetType::Other(s.to_string()))
    }

    /// The power state a system settles in after this reset, when there is
    /// one to wait for. A restart settles `On` (it may pass through `Off`,
    /// or be too quick to see); a button press toggles, an NMI changes
    /// nothing, and suspend/pause states are not power states we wait on.
    pub fn settles_in(&self) -> Option<PowerState> {
        match self {
            ResetType::On
            | ResetType::ForceOn
            | ResetType::GracefulRestart
            | ResetType::ForceRestart
            | ResetType::PowerCycle
            | ResetType::Resume => Some(PowerState::On),
            ResetType::ForceOff | ResetType::GracefulShutdown => Some(PowerState::Off),
            ResetType::Nmi
            | ResetType::PushPowerButton
            | ResetType::Suspend
            | ResetType::Pause
            | ResetType::Other(_) => None,
        }
    }

    /// Whether the reset is a no-op when the system is already in the state
    /// it settles in (so it need not be sent). Restarts are never no-ops.
    pub fn idempotent(&self) -> bool {
        matches!(
            self,
            ResetType::On | ResetType::ForceOn | ResetType::ForceOff | ResetType::GracefulShutdown
        )
    }
}

impl fmt::Display for ResetType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `ComputerSystem.PowerState`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PowerState {
    On,
    Off,
    PoweringOn,
    PoweringOff,
    Paused,
    /// Missing, null, or a value this enum does not name (kept verbatim).
    Unknown(String),
}

impl PowerState {
    pub fn parse(s: &str) -> PowerState {
        match s {
            "On" => PowerState::On,
            "Off" => PowerState::Off,
            "PoweringOn" => PowerState::PoweringOn,
            "PoweringOff" => PowerState::PoweringOff,
            "Paused" => PowerState::Paused,
            other => PowerState::Unknown(other.to_string()),
        }
    }

    /// Reads `PowerState` from a ComputerSystem resource.
    pub fn of_system(system: &Value) -> PowerState {
        match system.get("PowerState").and_then(Value::as_str) {
            Some(s) => PowerState::parse(s),
            None => PowerState::Unknown(String::new()),
        }
    }
}

impl fmt::Display for PowerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PowerState::On => f.write_str("On"),
            PowerState::Off => f.write_str("Off"),
            PowerState::PoweringOn => f.write_str("PoweringOn"),
            PowerState::PoweringOff => f.write_str("PoweringOff"),
            PowerState::Paused => f.write_str("Paused"),
            PowerState::Unknown(s) if s.is_empty() => f.write_str("(none)"),
            PowerState::Unknown(s) => f.write_str(s),
        }
    }
}

/// `Task.TaskState`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TaskState {
    New,
    Starting,
    Running,
    Suspended,
    Interrupted,
    Pending,
    Stopping,
    Completed,
    Killed,
    Exception,
    Service,
    Cancelling,
    Cancelled,
    /// Missing or not a value this enum names (kept verbatim).
    Unknown(String),
}

impl TaskState {
    pub fn parse(s: &str) -> TaskState {
        match s {
            "New" => TaskState::New,
            "Starting" => TaskState::Starting,
            "Running" => TaskState::Running,
            "Suspended" => TaskState::Suspended,
            "Interrupted" => TaskState::Interrupted,
            "Pending" => TaskState::Pending,
            "Stopping" => TaskState::Stopping,
            "Completed" => TaskState::Completed,
            "Killed" => TaskState::Killed,
            "Exception" => TaskState::Exception,
            "Service" => TaskState::Service,
            "Cancelling" => TaskState::Cancelling,
            "Cancelled" => TaskState::Cancelled,
            other => TaskState::Unknown(other.to_string()),
        }
    }

    /// The task will not change any more.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Killed | TaskState::Exception | TaskState::Cancelled
        )
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            TaskState::New => "New",
            TaskState::Starting => "Starting",
            TaskState::Running => "Running",
            TaskState::Suspended => "Suspended",
            TaskState::Interrupted => "Interrupted",
            TaskState::Pending => "Pending",
            TaskState::Stopping => "Stopping",
            TaskState::Completed => "Completed",
            TaskState::Killed => "Killed",
            TaskState::Exception => "Exception",
            TaskState::Service => "Service",
            TaskState::Cancelling => "Cancelling",
            TaskState::Cancelled => "Cancelled",
            TaskState::Unknown(s) if s.is_empty() => "(none)",
            TaskState::Unknown(s) => s,
        };
        f.write_str(s)
    }
}

/// One reading of a Redfish Task (or of a task monitor that answered with
/// one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskStatus {
    /// The URI that was read.
    pub uri: String,
    /// `Id`, else the URI's last segment.
    pub id: String,
    pub state: TaskState,
    /// `PercentComplete`, clamped to 0..=100, when the BMC reports it.
    pub percent: Option<u8>,
    /// `TaskStatus` health: "OK", "Warning", "Critical".
    pub health: Option<String>,
    /// `Messages[].Message`, in order.
    pub messages: Vec<String>,
}

impl TaskStatus {
    /// Whether a JSON body is a Task resource (it carries `TaskState`).
    pub fn is_task(body: &Value) -> bool {
        body.get("TaskState").is_some()
    }

    pub fn parse(uri: &str, body: &Value) -> TaskStatus {
        let id = body
            .get("Id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| last_segment(uri).to_string());
        let state = match body.get("TaskState").and_then(Value::as_str) {
            Some(s) => TaskState::parse(s),
            None => TaskState::Unknown(String::new()),
        };
        let percent = body
            .get("PercentComplete")
            .and_then(Value::as_u64)
            .map(|p| p.min(100) as u8);
        let health = body
            .get("TaskStatus")
            .and_then(Value::as_str)
            .map(str::to_string);
        let messages = body
            .get("Messages")
            .and_then(Value::as_array)
            .map(|ms| {
                ms.iter()
                    .filter_map(|m| m.get("Message").and_then(Value::as_str))
                    .filter(|m| !m.trim().is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        TaskStatus {
            uri: uri.to_string(),
            id,
            state,
            percent,
            health,
            messages,
        }
    }

    /// Finished, successfully or not.
    pub fn is_terminal(&self) -> bool {
        self.state.is_terminal()
    }

    /// Finished and failed: Killed, Exception, Cancelled, or Completed with
    /// a `Critical` health (some BMCs end a failed update that way).
    pub fn is_failure(&self) -> bool {
        match self.state {
            TaskState::Killed | TaskState::Exception | TaskState::Cancelled => true,
            TaskState::Completed => self.health.as_deref() == Some("Critical"),
            _ => false,
        }
    }

    /// The task's messages as one line.
    pub fn message(&self) -> String {
        self.messages.join("; ")
    }
}

/// One `SoftwareInventory` member of `UpdateService.FirmwareInventory`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirmwareComponent {
    /// `@odata.id`; a valid `Targets` entry for an update.
    pub uri: String,
    pub id: String,
    pub name: String,
    /// `Version`; empty when the BMC does not report one.
    pub version: String,
    /// `Updateable`, when reported.
    pub updateable: Option<bool>,
}

impl FirmwareComponent {
    pub fn parse(uri: &str, body: &Value) -> FirmwareComponent {
        let text = |key: &str| body.get(key).and_then(Value::as_str).map(str::to_string);
        let id = text("Id").unwrap_or_else(|| last_segment(uri).to_string());
        FirmwareComponent {
            uri: text("@odata.id").unwrap_or_else(|| uri.to_string()),
            name: text("Name").unwrap_or_else(|| id.clone()),
            id,
            version: text("Version").unwrap_or_default(),
            updateable: body.get("Updateable").and_then(Value::as_bool),
        }
    }
}

/// `Members[].@odata.id` of a Redfish collection.
pub fn member_uris(collection: &Value) -> Option<Vec<String>> {
    let members = collection.get("Members")?.as_array()?;
    Some(
        members
            .iter()
            .filter_map(|m| m.get("@odata.id").and_then(Value::as_str))
            .map(str::to_string)
            .collect(),
    )
}

fn last_segment(uri: &str) -> &str {
    uri.trim_end_matches('/').rsplit('/').next().unwrap_or(uri)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reset_types_round_trip_and_unknown_is_kept() {
        for t in ResetType::NAMED {
            assert_eq!(ResetType::parse(t.as_str()), t);
            assert_eq!(t.to_string(), t.as_str());
        }
        assert_eq!(
            ResetType::parse("Bogus"),
            ResetType::Other("Bogus".to_string())
        );
        assert_eq!(ResetType::parse("on"), ResetType::Other("on".to_string()));
    }

    #[test]
    fn reset_types_settle_in_the_expected_power_state() {
        for t in ResetType::NAMED {
            let expected = match t {
                ResetType::On
                | ResetType::ForceOn
                | ResetType::GracefulRestart
                | ResetType::ForceRestart
                | ResetType::PowerCycle
                | ResetType::Resume => Some(PowerState::On),
                ResetType::ForceOff | ResetType::GracefulShutdown => Some(PowerState::Off),
                _ => None,
            };
            assert_eq!(t.settles_in(), expected, "{t}");
            // Only resets with a settled state can be skipped as no-ops,
            // and never a restart.
            if t.idempotent() {
                assert!(t.settles_in().is_some());
                assert!(!t.as_str().contains("Restart"));
            }
        }
        assert_eq!(ResetType::Other("X".into()).settles_in(), None);
    }

    #[test]
    fn power_state_parsing() {
        for (s, p) in [
            ("On", PowerState::On),
            ("Off", PowerState::Off),
            ("PoweringOn", PowerState::PoweringOn),
            ("PoweringOff", PowerState::PoweringOff),
            ("Paused", PowerState::Paused),
        ] {
            assert_eq!(PowerState::parse(s), p);
            assert_eq!(p.to_string(), s);
        }
        assert_eq!(
            PowerState::of_system(&json!({"PowerState": null})),
            PowerState::Unknown(String::new())
        );
        assert_eq!(PowerState::of_system(&json!({})).to_string(), "(none)");
        assert_eq!(
            PowerState::of_system(&json!({"PowerState": "Standby"})),
            PowerState::Unknown("Standby".into())
        );
    }

    #[test]
    fn task_states_terminal_and_failure() {
        let all = [
            "New",
            "Starting",
            "Running",
            "Suspended",
            "Interrupted",
            "Pending",
            "Stopping",
            "Completed",
            "Killed",
            "Exception",
            "Service",
            "Cancelling",
            "Cancelled",
        ];
        for s in all {
            let state = TaskState::parse(s);
            assert_eq!(state.to_string(), s);
            let terminal = matches!(s, "Completed" | "Killed" | "Exception" | "Cancelled");
            assert_eq!(state.is_terminal(), terminal, "{s}");
            let status = TaskStatus::parse("/t/1", &json!({"TaskState": s, "TaskStatus": "OK"}));
            let failed = matches!(s, "Killed" | "Exception" | "Cancelled");
            assert_eq!(status.is_failure(), failed, "{s}");
        }
        assert!(!TaskState::parse("Weird").is_terminal());
        let critical = TaskStatus::parse(
            "/t/1",
            &json!({"TaskState": "Completed", "TaskStatus": "Critical"}),
        );
        assert!(critical.is_terminal() && critical.is_failure());
    }

    #[test]
    fn task_status_parsing() {
        let body = json!({
            "@odata.id": "/redfish/v1/TaskService/Tasks/7",
            "Id": "7",
            "TaskState": "Running",
            "PercentComplete": 140,
            "TaskStatus": "OK",
            "Messages": [{"Message": "flashing"}, {"MessageId": "x"}, {"Message": " "}]
        });
        assert!(TaskStatus::is_task(&body));
        let t = TaskStatus::parse("/redfish/v1/TaskService/Tasks/7", &body);
        assert_eq!(t.id, "7");
        assert_eq!(t.state, TaskState::Running);
        assert_eq!(t.percent, Some(100));
        assert_eq!(t.health.as_deref(), Some("OK"));
        assert_eq!(t.messages, vec!["flashing".to_string()]);
        assert!(!t.is_terminal());

        let bare = TaskStatus::parse("/taskmon/abc/", &json!({"TaskState": "New"}));
        assert_eq!(bare.id, "abc");
        assert_eq!(bare.percent, None);
        assert_eq!(bare.message(), "");
        assert!(!TaskStatus::is_task(&json!({"Id": "x"})));
    }

    #[test]
    fn firmware_component_parsing() {
        let c = FirmwareComponent::parse(
            "/redfish/v1/UpdateService/FirmwareInventory/BMC",
            &json!({"@odata.id": "/redfish/v1/UpdateService/FirmwareInventory/BMC",
                    "Id": "BMC", "Name": "BMC firmware", "Version": "1.0.0", "Updateable": true}),
        );
        assert_eq!(c.id, "BMC");
        assert_eq!(c.name, "BMC firmware");
        assert_eq!(c.version, "1.0.0");
        assert_eq!(c.updateable, Some(true));
        let bare = FirmwareComponent::parse("/fw/Nic0", &json!({}));
        assert_eq!(
            (bare.uri.as_str(), bare.id.as_str(), bare.name.as_str()),
            ("/fw/Nic0", "Nic0", "Nic0")
        );
        assert_eq!(bare.version, "");
    }

    #[test]
    fn collection_members() {
        let c = json!({"Members": [{"@odata.id": "/a"}, {"x": 1}, {"@odata.id": "/b"}]});
        assert_eq!(member_uris(&c), Some(vec!["/a".into(), "/b".into()]));
        assert_eq!(member_uris(&json!({"Members": []})), Some(vec![]));
        assert_eq!(member_uris(&json!({})), None);
    }
}
