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
    /// Where the rack is in its life (set by ingest and decommission tasks).
    pub lifecycle: RackLifecycle,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub deleted_at: Option<DateTime<Utc>>,
}

named_enum!(
    /// A rack's lifecycle status (flow-core §2.2 `rack.status`, with
    /// rackflow's `decommissioned`). Numbers are the wire
    /// `RackLifecycleStatus` values.
    LifecycleStatus {
        /// Imported, never ingested.
        New = 1 => "new",
        /// An ingest task is queued or running.
        Ingesting = 2 => "ingesting",
        /// Registered with its managers by a completed ingest.
        Ingested = 3 => "ingested",
        /// Retired by a completed decommission: only an ingest may target
        /// it.
        Decommissioned = 4 => "decommissioned",
    }
);

/// A rack's lifecycle status and when it last reached the milestones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RackLifecycle {
    pub status: LifecycleStatus,
    pub ingested_at: Option<DateTime<Utc>>,
    pub decommissioned_at: Option<DateTime<Utc>>,
}

/// How a task moves its rack's lifecycle: the one rule, applied by the
/// store in the transaction that writes the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleChange {
    /// An ingest was accepted (queued or started): `ingesting`.
    IngestStarted,
    /// An ingest completed: `ingested`, stamped.
    Ingested,
    /// An ingest failed, was cancelled or expired: back to what the rack
    /// was before it (`decommissioned` or `ingested` when it last was, else
    /// `new`).
    IngestAbandoned,
    /// A decommission completed: `decommissioned`, stamped.
    Decommissioned,
}

impl LifecycleChange {
    /// What a task of `task_type`/`code` entering `status` does to its
    /// rack (`None`: nothing).
    pub fn of(
        task_type: crate::task::TaskType,
        code: &str,
        status: crate::task::TaskStatus,
    ) -> Option<LifecycleChange> {
        use crate::task::{TaskStatus as S, TaskType as T};
        match (task_type, code, status) {
            (T::BringUp, "ingest", S::Waiting | S::Pending | S::Running) => {
                Some(LifecycleChange::IngestStarted)
            }
            (T::BringUp, "ingest", S::Completed) => Some(LifecycleChange::Ingested),
            (T::BringUp, "ingest", S::Failed | S::Terminated) => {
                Some(LifecycleChange::IngestAbandoned)
            }
            (T::Decommission, _, S::Completed) => Some(LifecycleChange::Decommissioned),
            _ => None,
        }
    }
}

impl Default for RackLifecycle {
    fn default() -> Self {
        RackLifecycle {
            status: LifecycleStatus::New,
            ingested_at: None,
            decommissioned_at: None,
        }
    }
}

impl Rack {
    /// The id component managers know the rack by (a rack manager's
    /// `rack_id`, the sim's fault key): its external id, else its name.
    pub fn manager_id(&self) -> &str {
        self.external_id.as_deref().unwrap_or(&self.name)
    }
}

/// An NVLink domain: racks sharing one NVLink fabric, named as a target
/// kind of operations (its member racks are the racks whose
/// `nvl_domain_id` names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvlDomain {
    pub id: Uuid,
    /// Unique when set.
    pub name: Option<String>,
    /// The domain's id in the external inventory; unique when set.
    pub external_id: Option<String>,
    /// The NMX-C cluster managing the fabric, when known.
    pub nmxc_cluster_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub deleted_at: Option<DateTime<Utc>>,
}

impl NvlDomain {
    /// How messages name the domain: its name, else its id.
    pub fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.id.to_string())
    }
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
    /// The latest leak report about the component (issue 34); `None`: no
    /// source has reported on it (the reference's `UNKNOWN`).
    pub leak: Option<LeakObservation>,
    /// How the response to its leak stands, derived from the leak
    /// response's task when the component is read (not stored); `None`
    /// when it was not derived.
    pub leak_handling: Option<LeakHandling>,
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
    /// What a leak source last said about a component (issue 34). Numbers
    /// are the wire `LeakStatus` values; the reference's `UNKNOWN` (0) is
    /// the absence of any report.
    LeakStatus {
        Detected = 1 => "detected",
        NotDetected = 2 => "not_detected",
    }
);

named_enum!(
    /// How a leak's response stands (the reference's `LeakHandlingStatus`;
    /// numbers are its wire values).
    LeakHandling {
        /// No response is needed or none was submitted.
        Nothing = 1 => "none",
        /// The response task is queued or running.
        ShuttingDown = 2 => "shutting_down",
        /// The response task completed.
        Down = 3 => "down",
        /// The response task failed or was cancelled.
        Failed = 4 => "failed",
    }
);

impl LeakHandling {
    /// The handling a response task in `status` means.
    pub fn of(status: crate::task::TaskStatus) -> LeakHandling {
        use crate::task::TaskStatus as S;
        match status {
            S::Waiting | S::Pending | S::Running => LeakHandling::ShuttingDown,
            S::Completed => LeakHandling::Down,
            S::Failed | S::Terminated => LeakHandling::Failed,
        }
    }
}

/// A leak report as the component carries it: the status and when the
/// source observed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeakObservation {
    pub status: LeakStatus,
    pub observed_at: DateTime<Utc>,
}

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

/// How many of a rack's targeted components run one version: what a
/// rollout starts from (issue 12, the preview's installed versions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionCount {
    pub component_type: ComponentType,
    /// The inventory's version ("" when none is recorded).
    pub version: String,
    pub components: u32,
    /// Of those, how many had the version read back from the hardware
    /// (the rest are as imported or patched).
    pub observed: u32,
}

/// The versions of the components of `inventory` that `targeted` names,
/// counted per type and version, in type then version order. Targeted ids
/// missing from `inventory` are not counted.
pub fn installed_versions(
    inventory: &[Component],
    targeted: &crate::ComponentsByType,
) -> Vec<VersionCount> {
    use std::collections::{BTreeMap, HashSet};
    let wanted: HashSet<Uuid> = targeted
        .iter()
        .flat_map(|(_, ids)| ids.iter().copied())
        .collect();
    let mut counts: BTreeMap<(&'static str, &str), VersionCount> = BTreeMap::new();
    for c in inventory.iter().filter(|c| wanted.contains(&c.id)) {
        let entry = counts
            .entry((c.component_type.name(), c.firmware_version.as_str()))
            .or_insert_with(|| VersionCount {
                component_type: c.component_type,
                version: c.firmware_version.clone(),
                components: 0,
                observed: 0,
            });
        entry.components += 1;
        if c.firmware_observed_at.is_some() {
            entry.observed += 1;
        }
    }
    counts.into_values().collect()
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

/// The reference's coarse operability bucket of a component, a rack or an
/// NVLink domain. Numbers are the wire `Phase` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Unknown = 0,
    Initializing = 1,
    Ready = 2,
    InUse = 3,
    Error = 4,
    Deleting = 5,
}

impl Phase {
    /// A component's phase from its operational state: an in-service one
    /// is in use, a drained or maintenance one ready, one without a state
    /// unknown.
    pub fn of(status: Option<&OperationalStatus>) -> Phase {
        match status.map(|s| s.state) {
            None => Phase::Unknown,
            Some(OperationalState::InService) => Phase::InUse,
            Some(OperationalState::Drained | OperationalState::Maintenance) => Phase::Ready,
        }
    }

    /// Rank when phases aggregate (higher wins): the reference's
    /// `Unknown > Error > Initializing > Deleting > InUse > Ready`.
    fn strictness(self) -> u8 {
        match self {
            Phase::Ready => 0,
            Phase::InUse => 1,
            Phase::Deleting => 2,
            Phase::Initializing => 3,
            Phase::Error => 4,
            Phase::Unknown => 5,
        }
    }

    /// The phase of a rack or a domain: the strictest phase of its compute
    /// trays, NVLink switches and power shelves (the types the reference
    /// aggregates); none of them → unknown.
    pub fn aggregate<'a>(components: impl IntoIterator<Item = &'a Component>) -> Phase {
        components
            .into_iter()
            .filter(|c| {
                matches!(
                    c.component_type,
                    ComponentType::Compute | ComponentType::NvSwitch | ComponentType::PowerShelf
                )
            })
            .map(|c| Phase::of(c.operational.as_ref()))
            .max_by_key(|p| p.strictness())
            .unwrap_or(Phase::Unknown)
    }
}

/// What the wire form of a rack or a component names besides its own row:
/// the rack's external id and the NVLink domain it belongs to, by rack id.
#[derive(Debug, Clone, Default)]
pub struct RackLabels {
    by_rack: std::collections::HashMap<Uuid, RackLabel>,
}

/// [`RackLabels`] of one rack.
#[derive(Debug, Clone)]
pub struct RackLabel {
    pub external_id: Option<String>,
    /// The rack's domain: its id and external id (when it has one).
    pub nvl_domain: Option<(Uuid, Option<String>)>,
    /// The rack's phase ([`Phase::aggregate`] of its components; unknown
    /// when they were not read).
    pub operation_status: Phase,
}

impl RackLabels {
    /// Labels from racks and the domains they belong to (a domain missing
    /// from `domains` is named by its id alone).
    pub fn new<'a>(racks: impl IntoIterator<Item = &'a Rack>, domains: &[NvlDomain]) -> RackLabels {
        let by_rack = racks
            .into_iter()
            .map(|r| {
                let nvl_domain = r.nvl_domain_id.map(|d| {
                    let external = domains
                        .iter()
                        .find(|x| x.id == d)
                        .and_then(|x| x.external_id.clone());
                    (d, external)
                });
                let label = RackLabel {
                    external_id: r.external_id.clone(),
                    nvl_domain,
                    operation_status: Phase::Unknown,
                };
                (r.id, label)
            })
            .collect();
        RackLabels { by_rack }
    }

    /// Sets each rack's phase from its components (`components` of any
    /// racks; those of racks without labels are ignored).
    pub fn with_phases<'a>(
        mut self,
        components: impl IntoIterator<Item = &'a Component>,
    ) -> RackLabels {
        let mut of_rack: std::collections::HashMap<Uuid, Vec<&Component>> =
            std::collections::HashMap::new();
        for c in components {
            if let Some(rack) = c.rack_id {
                of_rack.entry(rack).or_default().push(c);
            }
        }
        for (rack, label) in &mut self.by_rack {
            let members = of_rack.remove(rack).unwrap_or_default();
            label.operation_status = Phase::aggregate(members);
        }
        self
    }

    /// The labels of a rack (`None` for a rack not read).
    pub fn of(&self, rack_id: Option<Uuid>) -> Option<&RackLabel> {
        rack_id.and_then(|id| self.by_rack.get(&id))
    }
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

    fn tray(ty: ComponentType, version: &str, observed: bool) -> Component {
        let now = chrono::Utc::now();
        Component {
            id: Uuid::new_v4(),
            rack_id: None,
            component_type: ty,
            name: String::new(),
            manufacturer: String::new(),
            model: None,
            serial_number: String::new(),
            description: None,
            firmware_version: version.to_string(),
            position: Position::default(),
            bmcs: Vec::new(),
            external_id: None,
            power_state: None,
            firmware_observed_at: observed.then_some(now),
            power_observed_at: None,
            operational: None,
            leak: None,
            leak_handling: None,
            created_at: now,
            updated_at: now,
            deleted_at: None,
        }
    }

    #[test]
    fn installed_versions_count_the_targeted_components_per_type_and_version() {
        let inventory = vec![
            tray(ComponentType::Compute, "2.0", true),
            tray(ComponentType::Compute, "1.0", false),
            tray(ComponentType::Compute, "2.0", false),
            tray(ComponentType::NvSwitch, "nvos-1", true),
            // Not targeted: not counted.
            tray(ComponentType::PowerShelf, "pmc-1", true),
        ];
        let mut targeted = crate::ComponentsByType::new();
        for c in &inventory[..4] {
            targeted.push(c.component_type, c.id);
        }
        // A targeted id the inventory no longer has is not counted either.
        targeted.push(ComponentType::Compute, Uuid::new_v4());
        let count = |ty, version: &str, components, observed| VersionCount {
            component_type: ty,
            version: version.to_string(),
            components,
            observed,
        };
        assert_eq!(
            installed_versions(&inventory, &targeted),
            vec![
                count(ComponentType::Compute, "1.0", 1, 0),
                count(ComponentType::Compute, "2.0", 2, 1),
                count(ComponentType::NvSwitch, "nvos-1", 1, 1),
            ]
        );
        assert!(installed_versions(&inventory, &crate::ComponentsByType::new()).is_empty());
    }

    fn in_state(ty: ComponentType, state: Option<OperationalState>) -> Component {
        Component {
            operational: state.map(|state| OperationalStatus {
                state,
                reason: String::new(),
            }),
            ..tray(ty, "1", false)
        }
    }

    #[test]
    fn phases_aggregate_to_the_strictest_of_the_aggregated_types() {
        use OperationalState::*;
        let c = |state| in_state(ComponentType::Compute, state);
        assert_eq!(Phase::aggregate(&[]), Phase::Unknown, "no components");
        assert_eq!(Phase::aggregate(&[c(Some(Drained))]), Phase::Ready);
        assert_eq!(
            Phase::aggregate(&[c(Some(Drained)), c(Some(Maintenance))]),
            Phase::Ready
        );
        assert_eq!(
            Phase::aggregate(&[c(Some(Drained)), c(Some(InService))]),
            Phase::InUse
        );
        assert_eq!(
            Phase::aggregate(&[c(Some(InService)), c(None)]),
            Phase::Unknown,
            "a component without a state makes the whole unknown"
        );
        // Only compute trays, NVLink switches and power shelves count.
        let others = [
            in_state(ComponentType::TorSwitch, None),
            in_state(ComponentType::Ums, None),
            in_state(ComponentType::Cdu, None),
        ];
        assert_eq!(Phase::aggregate(&others), Phase::Unknown, "none counted");
        let mut mixed = others.to_vec();
        mixed.push(in_state(ComponentType::PowerShelf, Some(Drained)));
        mixed.push(in_state(ComponentType::NvSwitch, Some(InService)));
        assert_eq!(Phase::aggregate(&mixed), Phase::InUse);
    }

    #[test]
    fn phase_strictness_is_the_reference_order() {
        let order = [
            Phase::Ready,
            Phase::InUse,
            Phase::Deleting,
            Phase::Initializing,
            Phase::Error,
            Phase::Unknown,
        ];
        for pair in order.windows(2) {
            assert!(pair[0].strictness() < pair[1].strictness(), "{pair:?}");
        }
    }

    #[test]
    fn rack_labels_name_the_rack_and_its_domain() {
        let now = chrono::Utc::now();
        let domain = NvlDomain {
            id: Uuid::from_u128(7),
            name: Some("d".into()),
            external_id: Some("group-7".into()),
            nmxc_cluster_id: None,
            created_at: now,
            updated_at: now,
            deleted_at: None,
        };
        let rack = |n: u128, ext: Option<&str>, d: Option<u128>| Rack {
            id: Uuid::from_u128(n),
            name: format!("r{n}"),
            manufacturer: String::new(),
            model: None,
            serial_number: String::new(),
            description: None,
            location: Location::default(),
            external_id: ext.map(str::to_string),
            nvl_domain_id: d.map(Uuid::from_u128),
            lifecycle: Default::default(),
            created_at: now,
            updated_at: now,
            deleted_at: None,
        };
        let racks = [
            rack(1, Some("a1"), Some(7)),
            rack(2, None, Some(8)),
            rack(3, None, None),
        ];
        let labels = RackLabels::new(&racks, &[domain]);
        let of = |n| labels.of(Some(Uuid::from_u128(n))).unwrap();
        assert_eq!(of(1).external_id.as_deref(), Some("a1"));
        assert_eq!(
            of(1).nvl_domain,
            Some((Uuid::from_u128(7), Some("group-7".to_string())))
        );
        assert_eq!(of(2).nvl_domain, Some((Uuid::from_u128(8), None)));
        assert_eq!(of(3).nvl_domain, None);
        assert!(labels.of(Some(Uuid::from_u128(4))).is_none());
        assert!(labels.of(None).is_none());
        assert_eq!(of(1).operation_status, Phase::Unknown, "not read");

        let on = |rack: u128, state| Component {
            rack_id: Some(Uuid::from_u128(rack)),
            ..in_state(ComponentType::Compute, Some(state))
        };
        let labels = labels.with_phases(&[
            on(1, OperationalState::Drained),
            on(2, OperationalState::InService),
            on(2, OperationalState::Drained),
            on(9, OperationalState::Drained),
        ]);
        let of = |n| labels.of(Some(Uuid::from_u128(n))).unwrap();
        assert_eq!(of(1).operation_status, Phase::Ready);
        assert_eq!(of(2).operation_status, Phase::InUse);
        assert_eq!(of(3).operation_status, Phase::Unknown, "no components");
    }

    #[test]
    fn lifecycle_changes_follow_ingest_and_decommission_tasks() {
        use crate::task::{TaskStatus as S, TaskType as T};
        use LifecycleChange as C;
        for status in [S::Waiting, S::Pending, S::Running] {
            assert_eq!(C::of(T::BringUp, "ingest", status), Some(C::IngestStarted));
        }
        assert_eq!(C::of(T::BringUp, "ingest", S::Completed), Some(C::Ingested));
        for status in [S::Failed, S::Terminated] {
            assert_eq!(
                C::of(T::BringUp, "ingest", status),
                Some(C::IngestAbandoned)
            );
        }
        assert_eq!(
            C::of(T::Decommission, "decommission", S::Completed),
            Some(C::Decommissioned)
        );
        for status in [S::Running, S::Failed, S::Terminated] {
            assert_eq!(C::of(T::Decommission, "decommission", status), None);
        }
        for (ty, code) in [
            (T::BringUp, "bring_up"),
            (T::PowerControl, "power_on"),
            (T::FirmwareControl, "upgrade"),
        ] {
            for status in S::ALL {
                assert_eq!(C::of(ty, code, *status), None, "{ty}/{code} {status}");
            }
        }
    }
}
