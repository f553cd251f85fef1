//! Coolant leak detectors (issue 34): the Redfish `LeakDetection` resource
//! under a chassis' `ThermalSubsystem`, its `LeakDetectors` collection and
//! each `LeakDetector`'s `DetectorState`.
//!
//! The walk starts at the service root's `Chassis` collection (nothing is
//! hard-coded but the root): every chassis whose `ThermalSubsystem` links a
//! `LeakDetection` counts as exposing leak detection; a BMC where none does
//! answers `None`, which is not an error (older BMCs have no detectors).
//! Parsing is pure and tested here.

use serde_json::Value;

use super::error::RedfishError;
use super::node::RedfishNode;
use super::types::member_uris;

/// A detector's `DetectorState` (Redfish `Resource.Health`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DetectorState {
    /// Dry.
    Ok,
    /// A leak the BMC rates a warning.
    Warning,
    /// A leak the BMC rates critical.
    Critical,
    /// No state, or one Redfish does not define.
    Unknown,
}

impl DetectorState {
    /// The state a `DetectorState` string names.
    pub fn parse(s: &str) -> DetectorState {
        match s {
            "OK" => DetectorState::Ok,
            "Warning" => DetectorState::Warning,
            "Critical" => DetectorState::Critical,
            _ => DetectorState::Unknown,
        }
    }

    /// Whether the detector sees a leak.
    pub fn is_leak(self) -> bool {
        matches!(self, DetectorState::Warning | DetectorState::Critical)
    }
}

/// One leak detector as its BMC reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeakDetector {
    /// `Id`, unique within the chassis.
    pub id: String,
    pub name: String,
    /// `Id` of the chassis whose thermal subsystem holds it.
    pub chassis_id: String,
    pub state: DetectorState,
    /// `LeakDetectorType` (`Moisture`, `FloatSwitch`), empty when absent.
    pub detector_type: String,
    /// The detector's resource path.
    pub uri: String,
}

impl LeakDetector {
    /// Reads a `LeakDetector` resource. `DetectorState` is the reading; a
    /// detector the BMC marks absent or disabled (`Status.State`) reads
    /// `Unknown` whatever its state says, since it is not watching.
    pub fn parse(uri: &str, chassis_id: &str, body: &Value) -> LeakDetector {
        let text = |key: &str| body.get(key).and_then(Value::as_str).unwrap_or_default();
        let watching = !matches!(
            body.pointer("/Status/State").and_then(Value::as_str),
            Some("Absent" | "Disabled" | "UnavailableOffline")
        );
        let state = if watching {
            DetectorState::parse(text("DetectorState"))
        } else {
            DetectorState::Unknown
        };
        LeakDetector {
            id: Some(text("Id"))
                .filter(|s| !s.is_empty())
                .map_or_else(|| last_segment(uri).to_string(), str::to_string),
            name: text("Name").to_string(),
            chassis_id: chassis_id.to_string(),
            state,
            detector_type: text("LeakDetectorType").to_string(),
            uri: uri.to_string(),
        }
    }
}

/// The `@odata.id` a resource links under `key`.
pub(super) fn link<'a>(body: &'a Value, key: &str) -> Option<&'a str> {
    body.get(key)?.get("@odata.id")?.as_str()
}

fn last_segment(uri: &str) -> &str {
    uri.trim_end_matches('/').rsplit('/').next().unwrap_or(uri)
}

impl RedfishNode {
    /// Every leak detector of every chassis of the BMC, in chassis then
    /// collection order; `None` when no chassis exposes leak detection. A
    /// link the BMC advertises but answers 404 for counts as not exposed.
    pub async fn leak_detectors(&self) -> Result<Option<Vec<LeakDetector>>, RedfishError> {
        let root = self.service_root().await?;
        let Some(chassis_uri) = link(&root, "Chassis") else {
            return Ok(None);
        };
        let collection = self.client.get_json(chassis_uri).await?;
        let members = member_uris(&collection).ok_or_else(|| RedfishError::InvalidResponse {
            uri: chassis_uri.to_string(),
            reason: "the Chassis collection has no Members".to_string(),
        })?;
        let mut supported = false;
        let mut detectors = Vec::new();
        for member in members {
            let Some(chassis) = self.optional(&member).await? else {
                continue;
            };
            let chassis_id = chassis
                .get("Id")
                .and_then(Value::as_str)
                .unwrap_or_else(|| last_segment(&member))
                .to_string();
            let Some(thermal) = link(&chassis, "ThermalSubsystem") else {
                continue;
            };
            let Some(thermal) = self.optional(thermal).await? else {
                continue;
            };
            let Some(detection) = link(&thermal, "LeakDetection") else {
                continue;
            };
            let Some(detection) = self.optional(detection).await? else {
                continue;
            };
            supported = true;
            let Some(list_uri) = link(&detection, "LeakDetectors") else {
                continue;
            };
            let list = self.client.get_json(list_uri).await?;
            let uris = member_uris(&list).ok_or_else(|| RedfishError::InvalidResponse {
                uri: list_uri.to_string(),
                reason: "the LeakDetectors collection has no Members".to_string(),
            })?;
            for uri in uris {
                let body = self.client.get_json(&uri).await?;
                detectors.push(LeakDetector::parse(&uri, &chassis_id, &body));
            }
        }
        Ok(supported.then_some(detectors))
    }

    /// A resource that may be missing: `None` on 404.
    pub(super) async fn optional(&self, uri: &str) -> Result<Option<Value>, RedfishError> {
        match self.client.get_json(uri).await {
            Ok(body) => Ok(Some(body)),
            Err(RedfishError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn detector_states_parse_and_only_warning_and_critical_leak() {
        let cases = [
            ("OK", DetectorState::Ok, false),
            ("Warning", DetectorState::Warning, true),
            ("Critical", DetectorState::Critical, true),
            ("", DetectorState::Unknown, false),
            ("critical", DetectorState::Unknown, false),
        ];
        for (text, state, leak) in cases {
            assert_eq!(DetectorState::parse(text), state, "{text}");
            assert_eq!(state.is_leak(), leak, "{text}");
        }
    }

    #[test]
    fn a_detector_is_read_with_its_chassis_and_type() {
        let uri =
            "/redfish/v1/Chassis/Tray0/ThermalSubsystem/LeakDetection/LeakDetectors/ColdPlate";
        let d = LeakDetector::parse(
            uri,
            "Tray0",
            &json!({"Id": "ColdPlate", "Name": "Cold plate", "DetectorState": "Critical",
                    "LeakDetectorType": "Moisture", "Status": {"State": "Enabled", "Health": "Critical"}}),
        );
        assert_eq!(
            d,
            LeakDetector {
                id: "ColdPlate".into(),
                name: "Cold plate".into(),
                chassis_id: "Tray0".into(),
                state: DetectorState::Critical,
                detector_type: "Moisture".into(),
                uri: uri.into(),
            }
        );
        // No Id: the last path segment.
        let d = LeakDetector::parse(uri, "Tray0", &json!({"DetectorState": "OK"}));
        assert_eq!((d.id.as_str(), d.state), ("ColdPlate", DetectorState::Ok));
    }

    #[test]
    fn a_detector_that_is_not_watching_reads_unknown() {
        for state in ["Absent", "Disabled", "UnavailableOffline"] {
            let d = LeakDetector::parse(
                "/x/D1",
                "C",
                &json!({"DetectorState": "Critical", "Status": {"State": state}}),
            );
            assert_eq!(d.state, DetectorState::Unknown, "{state}");
        }
    }
}
