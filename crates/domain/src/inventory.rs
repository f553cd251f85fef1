//! Inventory: racks, their components and BMCs, as stored and served.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ComponentType;

/// Physical location of a rack.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    #[serde(default)]
    pub region: String,
    #[serde(default)]
    pub datacenter: String,
    #[serde(default)]
    pub room: String,
    #[serde(default)]
    pub position: String,
}

/// A rack as the inventory holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rack {
    pub id: Uuid,
    pub name: String,
    pub manufacturer: String,
    pub model: Option<String>,
    pub serial_number: String,
    pub description: Option<String>,
    pub location: Location,
    /// The rack's id in the external inventory (e.g. `r-0003`); unique when set.
    pub external_id: Option<String>,
    pub nvl_domain_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub deleted_at: Option<DateTime<Utc>>,
}

/// Type of a BMC. Numeric values are the wire enum values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BmcType {
    Unknown = 0,
    Host = 1,
    Dpu = 2,
}

impl BmcType {
    pub fn name(self) -> &'static str {
        match self {
            BmcType::Unknown => "Unknown",
            BmcType::Host => "Host",
            BmcType::Dpu => "DPU",
        }
    }

    pub fn parse(name: &str) -> Option<BmcType> {
        match name.to_ascii_lowercase().as_str() {
            "host" => Some(BmcType::Host),
            "dpu" => Some(BmcType::Dpu),
            "unknown" => Some(BmcType::Unknown),
            _ => None,
        }
    }
}

/// A BMC of a component, keyed by its MAC address (normalised lowercase).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bmc {
    pub bmc_type: BmcType,
    pub mac_address: String,
    pub ip_address: Option<String>,
}

/// Slot / tray / host position inside a rack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub slot_id: i32,
    pub tray_idx: i32,
    pub host_id: i32,
}

/// A device inside a rack (or unassigned when `rack_id` is `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    pub id: Uuid,
    pub rack_id: Option<Uuid>,
    pub component_type: ComponentType,
    pub name: String,
    pub manufacturer: String,
    pub model: Option<String>,
    pub serial_number: String,
    pub description: Option<String>,
    pub firmware_version: String,
    pub position: Position,
    pub bmcs: Vec<Bmc>,
    /// The component's id in its source system; a component without one is
    /// not linked to real inventory and cannot be operated on.
    pub external_id: Option<String>,
    pub power_state: Option<String>,
    /// When a component manager last read `firmware_version` back from the
    /// hardware (`None`: the version is as imported or patched, never
    /// observed).
    pub firmware_observed_at: Option<DateTime<Utc>>,
    /// When a component manager last read `power_state` back.
    pub power_observed_at: Option<DateTime<Utc>>,
    /// Whether the component may be powered or flashed now (issue 12);
    /// `None`: never set, which the readiness gate treats as ready.
    pub operational: Option<OperationalStatus>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub deleted_at: Option<DateTime<Utc>>,
}

named_enum!(
    /// A component's operational state, set through the inventory API
    /// (issue 12). Numbers are the wire `OperationalState` values.
    OperationalState {
        /// Carrying production work: power and firmware operations wait.
        InService = 1 => "in_service",
        /// Taken out of production (workloads moved off).
        Drained = 2 => "drained",
        /// Handed to operators for hardware work.
        Maintenance = 3 => "maintenance",
    }
);

named_enum!(
    /// The operations the readiness gate holds back. Numbers are the
    /// reference's `OperationType` values (its `blocked_operations`).
    GatedOperation {
        PowerControl = 1 => "power_control",
        FirmwareControl = 2 => "firmware_control",
    }
);

impl GatedOperation {
    /// Words for messages ("power control").
    pub fn words(self) -> &'static str {
        match self {
            GatedOperation::PowerControl => "power control",
            GatedOperation::FirmwareControl => "firmware control",
        }
    }
}

impl OperationalState {
    /// The operations this state holds back: an in-service component is
    /// neither powered nor flashed; drained and maintenance ones are free.
    pub fn blocked_operations(self) -> &'static [GatedOperation] {
        match self {
            OperationalState::InService => GatedOperation::ALL,
            OperationalState::Drained | OperationalState::Maintenance => &[],
        }
    }

    pub fn blocks(self, operation: GatedOperation) -> bool {
        self.blocked_operations().contains(&operation)
    }

    /// The states that hold `operation` back (what the gate queries).
    pub fn blocking(operation: GatedOperation) -> Vec<OperationalState> {
        OperationalState::ALL
            .iter()
            .copied()
            .filter(|s| s.blocks(operation))
            .collect()
    }
}

/// A component's operational state and why it is in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationalStatus {
    pub state: OperationalState,
    /// Free text from whoever set the state ("" when none was given).
    pub reason: String,
}

/// What a component manager read back from one component after an
/// operation: the facts the inventory records (issue 12).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    pub component_id: Uuid,
    /// The installed firmware version, when it was read.
    pub firmware_version: Option<String>,
    /// The power state (`On`, `Off`, …), when it was read.
    pub power_state: Option<String>,
    pub observed_at: DateTime<Utc>,
}

/// Normalises a MAC address to lowercase colon-separated form, or `None` if
/// the text is not a 48-bit MAC (`aa:bb:cc:dd:ee:ff`, `AA-BB-…`, `aabb.ccdd.eeff`).
pub fn normalize_mac(text: &str) -> Option<String> {
    let hex: String = text
        .chars()
        .filter(|c| !matches!(c, ':' | '-' | '.'))
        .collect();
    let separators = text.len() - hex.len();
    if hex.len() != 12 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    if separators != 0 && separators != 5 && separators != 2 {
        return None;
    }
    let lower = hex.to_ascii_lowercase();
    let parts: Vec<&str> = (0..6).map(|i| &lower[i * 2..i * 2 + 2]).collect();
    Some(parts.join(":"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_addresses_normalise() {
        assert_eq!(
            normalize_mac("AA:BB:CC:DD:EE:FF").as_deref(),
            Some("aa:bb:cc:dd:ee:ff")
        );
        assert_eq!(
            normalize_mac("aa-bb-cc-dd-ee-0f").as_deref(),
            Some("aa:bb:cc:dd:ee:0f")
        );
        assert_eq!(
            normalize_mac("aabb.ccdd.eeff").as_deref(),
            Some("aa:bb:cc:dd:ee:ff")
        );
        assert_eq!(normalize_mac("compute-01"), None);
        assert_eq!(normalize_mac("aa:bb:cc:dd:ee"), None);
    }

    #[test]
    fn only_in_service_components_hold_operations_back() {
        for state in OperationalState::ALL {
            for op in GatedOperation::ALL {
                assert_eq!(
                    state.blocks(*op),
                    *state == OperationalState::InService,
                    "{state} / {op}"
                );
            }
        }
        for op in GatedOperation::ALL {
            assert_eq!(
                OperationalState::blocking(*op),
                vec![OperationalState::InService]
            );
        }
    }

    #[test]
    fn gated_operations_use_the_reference_operation_type_numbers() {
        // OPERATION_TYPE_POWER_CONTROL = 1, OPERATION_TYPE_FIRMWARE_CONTROL = 2.
        assert_eq!(GatedOperation::PowerControl.to_wire(), 1);
        assert_eq!(GatedOperation::FirmwareControl.to_wire(), 2);
        assert_eq!(
            OperationalState::parse("in_service"),
            Some(OperationalState::InService)
        );
    }
}
