//! Component managers (decision C1): the only way the engine talks to
//! hardware.
//!
//! This module owns the capability traits ([`PowerControl`], [`PowerStatus`],
//! [`FirmwareControl`], [`FirmwareStatus`]), the [`ComponentManager`] trait
//! object that exposes whichever of them a provider implements, the
//! [`ManagerRegistry`] mapping each component type to its manager, and the
//! one error type [`ManagerError`]. Providers (`sim`, [`rms`]) live in
//! their own modules and only implement these traits.
//!
//! Capabilities are separate traits rather than one big trait with
//! "unsupported" defaults so that the executor can check, before a task
//! starts, that every action of its rule is backed by the targeted types'
//! managers (spec §4.3) — and name the missing capability in the error.

pub mod rms;
pub mod rms_leaks;
pub mod rms_lifecycle;
pub mod rms_objects;
pub mod rms_sync;

/// A component manager's own inventory (`ValidateComponents`): the nodes
/// it knows, as the drift comparison reads them.
#[async_trait::async_trait]
pub trait InventorySource: Send + Sync {
    /// Every node; `Err` says why the inventory could not be read.
    async fn nodes(&self) -> Result<Vec<rackflow_domain::drift::ActualNode>, String>;
}

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rackflow_domain::ComponentType;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// One component as managers see it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ComponentRef {
    /// The inventory id.
    pub id: Uuid,
    pub component_type: ComponentType,
    /// The id the manager knows the component by; results are keyed by it.
    pub external_id: String,
    /// The rack's name (the sim's faults match on it).
    pub rack: String,
}

/// What a manager can do (spec §4.3): the domain's capability names, so
/// rule validation and the registry check speak of the same set.
pub use rackflow_domain::rule::Capability;

/// A power operation (the power task codes of spec §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PowerOp {
    PowerOn,
    ForcePowerOn,
    PowerOff,
    ForcePowerOff,
    Restart,
    ForceRestart,
    WarmReset,
    ColdReset,
}

impl PowerOp {
    pub const ALL: [PowerOp; 8] = [
        PowerOp::PowerOn,
        PowerOp::ForcePowerOn,
        PowerOp::PowerOff,
        PowerOp::ForcePowerOff,
        PowerOp::Restart,
        PowerOp::ForceRestart,
        PowerOp::WarmReset,
        PowerOp::ColdReset,
    ];

    /// The operation code (`power_on`, `force_power_off`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            PowerOp::PowerOn => "power_on",
            PowerOp::ForcePowerOn => "force_power_on",
            PowerOp::PowerOff => "power_off",
            PowerOp::ForcePowerOff => "force_power_off",
            PowerOp::Restart => "restart",
            PowerOp::ForceRestart => "force_restart",
            PowerOp::WarmReset => "warm_reset",
            PowerOp::ColdReset => "cold_reset",
        }
    }

    /// From an operation code; other codes give `None`.
    pub fn parse(code: &str) -> Option<PowerOp> {
        PowerOp::ALL.into_iter().find(|op| op.as_str() == code)
    }

    /// The power state a component settles in after the operation.
    pub fn resulting_state(self) -> PowerState {
        match self {
            PowerOp::PowerOff | PowerOp::ForcePowerOff => PowerState::Off,
            _ => PowerState::On,
        }
    }
}

impl fmt::Display for PowerOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Power state of one component as a manager reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PowerState {
    On,
    Off,
    Unknown,
    Rebooting,
}

impl PowerState {
    pub fn name(self) -> &'static str {
        match self {
            PowerState::On => "On",
            PowerState::Off => "Off",
            PowerState::Unknown => "Unknown",
            PowerState::Rebooting => "Rebooting",
        }
    }
}

impl fmt::Display for PowerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// State of one component's firmware update (spec §5.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FirmwareState {
    Queued,
    Verifying,
    Completed,
    Failed,
    Unknown,
}

impl FirmwareState {
    pub fn name(self) -> &'static str {
        match self {
            FirmwareState::Queued => "Queued",
            FirmwareState::Verifying => "Verifying",
            FirmwareState::Completed => "Completed",
            FirmwareState::Failed => "Failed",
            FirmwareState::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for FirmwareState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What to install. Starting an update only queues it; progress is read
/// through [`FirmwareStatus`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FirmwareRequest {
    /// The firmware operation code (`upgrade`, `downgrade`, `rollback`).
    pub operation: String,
    /// Version for this component type; empty = the manager's default.
    pub target_version: String,
    /// Maintenance window; managers that cannot honour it ignore it.
    pub window_start: Option<DateTime<Utc>>,
    pub window_end: Option<DateTime<Utc>>,
    pub sub_targets: Vec<String>,
    pub override_readiness_check: bool,
    pub override_version_check: bool,
    /// The component type's firmware credential (`authentication_data`),
    /// opened for this call only; `Debug` is redacted.
    pub credentials: Option<rackflow_domain::run::SecretText>,
    /// A firmware object of the rack manager's catalogue to apply instead
    /// of an image named after `target_version` (issue 35); only the `rms`
    /// provider serves it.
    pub firmware_object: Option<String>,
}

/// A provider's job for one component's update.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FirmwareJob {
    pub job_id: String,
    /// The job's error code and message once it failed.
    pub error: Option<String>,
}

/// Everything a manager call or a registry lookup can fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManagerError {
    #[error("no component manager is configured for component type {0}")]
    NoManager(ComponentType),
    #[error("component manager for {component_type} lacks capability {capability}")]
    MissingCapability {
        component_type: ComponentType,
        capability: Capability,
    },
    /// The manager tried and the hardware (or the provider) said no.
    #[error("{call} failed for components [{}]: {message}", components.join(" "))]
    CallFailed {
        call: String,
        components: Vec<String>,
        message: String,
    },
    /// The provider refused for a reason a retry cannot fix (a firmware
    /// image missing from the rack manager): the step fails at once.
    #[error("{call} refused: {message}")]
    Refused { call: String, message: String },
}

/// Items an error lists before "and N more" (version mismatches, held
/// components, trays without their firmware image; the rack manager's
/// post-activation check lists as many).
pub(crate) const LISTED_IN_ERRORS: usize = 5;

/// The first [`LISTED_IN_ERRORS`] of `items` joined with `separator`,
/// then `{more} N more` for the rest (the rack manager's style).
pub(crate) fn first_listed<S: AsRef<str>>(items: &[S], separator: &str, more: &str) -> String {
    let shown: Vec<&str> = items
        .iter()
        .take(LISTED_IN_ERRORS)
        .map(AsRef::as_ref)
        .collect();
    let mut listed = shown.join(separator);
    if items.len() > LISTED_IN_ERRORS {
        listed.push_str(&format!("{more} {} more", items.len() - LISTED_IN_ERRORS));
    }
    listed
}

/// Turns components on, off or over.
#[async_trait]
pub trait PowerControl: Send + Sync {
    async fn power_control(
        &self,
        components: &[ComponentRef],
        op: PowerOp,
    ) -> Result<(), ManagerError>;
}

/// Reads power states, keyed by external id. A component missing from the
/// map did not answer.
#[async_trait]
pub trait PowerStatus: Send + Sync {
    async fn power_status(
        &self,
        components: &[ComponentRef],
    ) -> Result<HashMap<String, PowerState>, ManagerError>;

    /// Like [`FirmwareStatus::change_feed`], for power states.
    fn change_feed(
        &self,
        _components: &[ComponentRef],
    ) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }
}

/// Starts an asynchronous firmware update and returns once it is accepted.
#[async_trait]
pub trait FirmwareControl: Send + Sync {
    async fn firmware_start(
        &self,
        components: &[ComponentRef],
        request: &FirmwareRequest,
    ) -> Result<(), ManagerError>;
}

/// Reads firmware update states, keyed by external id.
#[async_trait]
pub trait FirmwareStatus: Send + Sync {
    async fn firmware_status(
        &self,
        components: &[ComponentRef],
    ) -> Result<HashMap<String, FirmwareState>, ManagerError>;

    /// The firmware version installed on each component, read back from
    /// the hardware now (not remembered from an update), keyed by external
    /// id; a component missing from the map did not answer. `sub_targets`
    /// are the update's sub-targets: a provider whose hardware reports one
    /// version per sub-component reads the one the update addressed.
    async fn installed_versions(
        &self,
        components: &[ComponentRef],
        sub_targets: &[String],
    ) -> Result<HashMap<String, String>, ManagerError>;

    /// The provider's own record of each component's update (the rack
    /// manager's job id and, once failed, its error), keyed by external id,
    /// for the task report. Default: the provider keeps none.
    fn firmware_jobs(&self, _components: &[ComponentRef]) -> HashMap<String, FirmwareJob> {
        HashMap::new()
    }

    /// Takes over updates a previous process started (job ids from the
    /// persisted task report), so that after a restart their status is
    /// polled instead of an update being started again. Default: the
    /// provider has nothing to adopt (its status survives on its own).
    fn adopt_firmware_jobs(&self, _jobs: &[(ComponentRef, String)]) {}

    /// A counter bumped whenever the state of one of `components` may have
    /// changed, for providers that can push: pollers wait on it *or* their
    /// poll interval, so a finished update is seen at once instead of up to
    /// one interval late. `None` (the default): poll only. Providers scope
    /// it with [`ChangeFeeds`]: a change must not wake the pollers of every
    /// other rack.
    fn change_feed(
        &self,
        _components: &[ComponentRef],
    ) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }
}

/// Registers components with their manager as expected inventory (the
/// ingest step): afterwards the manager knows them and can act on them.
#[async_trait]
pub trait ExpectationInjector: Send + Sync {
    async fn inject_expectation(&self, components: &[ComponentRef]) -> Result<(), ManagerError>;
}

/// Checks that the firmware of a set of components agrees (the bring-up's
/// check on a rack's NVLink switches: one fabric, one version). `Err`
/// names what disagrees.
#[async_trait]
pub trait FirmwareConsistency: Send + Sync {
    async fn check_firmware_consistency(
        &self,
        components: &[ComponentRef],
    ) -> Result<(), ManagerError>;
}

/// Where a component is in its decommissioning (spec §5.6): the reference's
/// state strings, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecommissionState {
    /// In service, not yet asked (still pending for the waiter).
    Ready,
    /// `Maintenance(...)`: pending.
    Maintenance(String),
    /// `Decommissioning/<sub-state>`: pending, unless the sub-state is
    /// `Decommissioned`.
    Decommissioning(String),
    /// Done.
    Decommissioned,
    /// Anything else (an error state): the waiter fails.
    Other(String),
}

impl DecommissionState {
    /// The state as the reference writes it.
    pub fn text(&self) -> String {
        match self {
            DecommissionState::Ready => "Ready".to_string(),
            DecommissionState::Maintenance(m) => format!("Maintenance({m})"),
            DecommissionState::Decommissioning(sub) => format!("Decommissioning/{sub}"),
            DecommissionState::Decommissioned => "Decommissioned".to_string(),
            DecommissionState::Other(s) => s.clone(),
        }
    }

    /// Done: `Decommissioned`, or `Decommissioning/Decommissioned`.
    pub fn is_done(&self) -> bool {
        match self {
            DecommissionState::Decommissioned => true,
            DecommissionState::Decommissioning(sub) => sub == "Decommissioned",
            _ => false,
        }
    }

    /// Still on its way (the waiter polls on).
    pub fn is_pending(&self) -> bool {
        !self.is_done() && !matches!(self, DecommissionState::Other(_))
    }
}

/// Asks components to decommission (fire once; the status tells the rest).
#[async_trait]
pub trait Decommissioner: Send + Sync {
    async fn decommission(&self, components: &[ComponentRef]) -> Result<(), ManagerError>;
}

/// Reads decommission states, keyed by external id. A component missing
/// from the map is unknown to the manager.
#[async_trait]
pub trait DecommissionStatus: Send + Sync {
    async fn decommission_status(
        &self,
        components: &[ComponentRef],
    ) -> Result<HashMap<String, DecommissionState>, ManagerError>;

    /// Like [`FirmwareStatus::change_feed`], for decommission states.
    fn change_feed(
        &self,
        _components: &[ComponentRef],
    ) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }
}

/// Change notifications per rack, for providers' `change_feed`: a poller
/// waits on the feed of its own batch's rack, so a change wakes the pollers
/// of that rack only. (One fleet-wide counter woke every poller of every
/// task in flight on each tray's change: with 1,000 racks in flight the
/// executor spent its time re-reading unchanged batches.)
#[derive(Debug, Default)]
pub struct ChangeFeeds {
    racks: parking_lot::Mutex<HashMap<String, tokio::sync::watch::Sender<u64>>>,
}

impl ChangeFeeds {
    /// The feed of the rack of `components`; `None` when they span racks or
    /// there are none (the caller then polls only).
    pub fn subscribe(
        &self,
        components: &[ComponentRef],
    ) -> Option<tokio::sync::watch::Receiver<u64>> {
        let rack = &components.first()?.rack;
        if components.iter().any(|c| &c.rack != rack) {
            return None;
        }
        let mut racks = self.racks.lock();
        Some(
            racks
                .entry(rack.clone())
                .or_insert_with(|| tokio::sync::watch::Sender::new(0))
                .subscribe(),
        )
    }

    /// Something on `rack` may have changed: wakes its pollers. A feed
    /// nobody listens to any more is dropped here.
    pub fn changed(&self, rack: &str) {
        let mut racks = self.racks.lock();
        if let Some(feed) = racks.get(rack) {
            if feed.receiver_count() == 0 {
                racks.remove(rack);
            } else {
                feed.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }

    /// Something on any rack may have changed (a whole-fleet fault change).
    pub fn changed_all(&self) {
        let mut racks = self.racks.lock();
        racks.retain(|_, feed| feed.receiver_count() > 0);
        for feed in racks.values() {
            feed.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

/// A provider's manager for one or more component types: a set of
/// capabilities. Accessors return `None` for capabilities it lacks.
pub trait ComponentManager: Send + Sync {
    /// Implementation name, for logs (`sim`, `rms`).
    fn name(&self) -> &str;

    fn as_power_control(&self) -> Option<&dyn PowerControl> {
        None
    }
    fn as_power_status(&self) -> Option<&dyn PowerStatus> {
        None
    }
    fn as_firmware_control(&self) -> Option<&dyn FirmwareControl> {
        None
    }
    fn as_firmware_status(&self) -> Option<&dyn FirmwareStatus> {
        None
    }
    fn as_expectation_injector(&self) -> Option<&dyn ExpectationInjector> {
        None
    }
    fn as_firmware_consistency(&self) -> Option<&dyn FirmwareConsistency> {
        None
    }
    fn as_decommissioner(&self) -> Option<&dyn Decommissioner> {
        None
    }
    fn as_decommission_status(&self) -> Option<&dyn DecommissionStatus> {
        None
    }

    /// The declared capability set. The default derives it from the
    /// accessors so the two cannot disagree.
    fn capabilities(&self) -> Vec<Capability> {
        let mut caps = Vec::new();
        if self.as_power_control().is_some() {
            caps.push(Capability::PowerControl);
        }
        if self.as_power_status().is_some() {
            caps.push(Capability::PowerStatus);
        }
        if self.as_firmware_control().is_some() {
            caps.push(Capability::FirmwareControl);
        }
        if self.as_firmware_status().is_some() {
            caps.push(Capability::FirmwareStatus);
        }
        if self.as_expectation_injector().is_some() {
            caps.push(Capability::InjectExpectation);
        }
        if self.as_firmware_consistency().is_some() {
            caps.push(Capability::FirmwareConsistencyCheck);
        }
        if self.as_decommissioner().is_some() {
            caps.push(Capability::DecommissionControl);
        }
        if self.as_decommission_status().is_some() {
            caps.push(Capability::DecommissionStatus);
        }
        caps
    }
}

/// Component type → manager.
#[derive(Clone, Default)]
pub struct ManagerRegistry {
    managers: HashMap<ComponentType, Arc<dyn ComponentManager>>,
}

impl fmt::Debug for ManagerRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        let mut types: Vec<_> = self.managers.keys().copied().collect();
        types.sort();
        for ty in types {
            if let Some(m) = self.managers.get(&ty) {
                map.entry(&ty, &m.name());
            }
        }
        map.finish()
    }
}

impl ManagerRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the manager of one type, replacing any previous one.
    pub fn register(&mut self, component_type: ComponentType, manager: Arc<dyn ComponentManager>) {
        self.managers.insert(component_type, manager);
    }

    /// A registry with `manager` for every known component type (the sim).
    pub fn for_all_types(manager: Arc<dyn ComponentManager>) -> Self {
        let mut registry = Self::new();
        for ty in ComponentType::KNOWN {
            registry.register(ty, manager.clone());
        }
        registry
    }

    pub fn get(
        &self,
        component_type: ComponentType,
    ) -> Result<&dyn ComponentManager, ManagerError> {
        self.managers
            .get(&component_type)
            .map(|m| m.as_ref())
            .ok_or(ManagerError::NoManager(component_type))
    }

    /// Ok when the type's manager has `capability`; the error names both.
    pub fn check(
        &self,
        component_type: ComponentType,
        capability: Capability,
    ) -> Result<(), ManagerError> {
        if self
            .get(component_type)?
            .capabilities()
            .contains(&capability)
        {
            Ok(())
        } else {
            Err(missing(component_type, capability))
        }
    }

    pub fn power_control(
        &self,
        component_type: ComponentType,
    ) -> Result<&dyn PowerControl, ManagerError> {
        self.get(component_type)?
            .as_power_control()
            .ok_or_else(|| missing(component_type, Capability::PowerControl))
    }

    pub fn power_status(
        &self,
        component_type: ComponentType,
    ) -> Result<&dyn PowerStatus, ManagerError> {
        self.get(component_type)?
            .as_power_status()
            .ok_or_else(|| missing(component_type, Capability::PowerStatus))
    }

    pub fn firmware_control(
        &self,
        component_type: ComponentType,
    ) -> Result<&dyn FirmwareControl, ManagerError> {
        self.get(component_type)?
            .as_firmware_control()
            .ok_or_else(|| missing(component_type, Capability::FirmwareControl))
    }

    pub fn firmware_status(
        &self,
        component_type: ComponentType,
    ) -> Result<&dyn FirmwareStatus, ManagerError> {
        self.get(component_type)?
            .as_firmware_status()
            .ok_or_else(|| missing(component_type, Capability::FirmwareStatus))
    }
}

impl ManagerRegistry {
    pub fn expectation_injector(
        &self,
        component_type: ComponentType,
    ) -> Result<&dyn ExpectationInjector, ManagerError> {
        self.get(component_type)?
            .as_expectation_injector()
            .ok_or_else(|| missing(component_type, Capability::InjectExpectation))
    }

    pub fn firmware_consistency(
        &self,
        component_type: ComponentType,
    ) -> Result<&dyn FirmwareConsistency, ManagerError> {
        self.get(component_type)?
            .as_firmware_consistency()
            .ok_or_else(|| missing(component_type, Capability::FirmwareConsistencyCheck))
    }

    pub fn decommissioner(
        &self,
        component_type: ComponentType,
    ) -> Result<&dyn Decommissioner, ManagerError> {
        self.get(component_type)?
            .as_decommissioner()
            .ok_or_else(|| missing(component_type, Capability::DecommissionControl))
    }

    pub fn decommission_status(
        &self,
        component_type: ComponentType,
    ) -> Result<&dyn DecommissionStatus, ManagerError> {
        self.get(component_type)?
            .as_decommission_status()
            .ok_or_else(|| missing(component_type, Capability::DecommissionStatus))
    }
}

fn missing(component_type: ComponentType, capability: Capability) -> ManagerError {
    ManagerError::MissingCapability {
        component_type,
        capability,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct PowerOnly;

    #[async_trait]
    impl PowerControl for PowerOnly {
        async fn power_control(&self, _: &[ComponentRef], _: PowerOp) -> Result<(), ManagerError> {
            Ok(())
        }
    }

    impl ComponentManager for PowerOnly {
        fn name(&self) -> &str {
            "power-only"
        }
        fn as_power_control(&self) -> Option<&dyn PowerControl> {
            Some(self)
        }
    }

    #[test]
    fn check_names_type_and_capability() {
        let mut registry = ManagerRegistry::new();
        registry.register(ComponentType::Compute, Arc::new(PowerOnly));
        assert!(
            registry
                .check(ComponentType::Compute, Capability::PowerControl)
                .is_ok()
        );
        let err = registry
            .check(ComponentType::Compute, Capability::FirmwareStatus)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "component manager for Compute lacks capability FirmwareStatus"
        );
        let err = registry
            .check(ComponentType::NvSwitch, Capability::PowerControl)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no component manager is configured for component type NVSwitch"
        );
        assert!(registry.firmware_control(ComponentType::Compute).is_err());
        assert!(registry.power_control(ComponentType::Compute).is_ok());
    }

    #[test]
    fn power_codes_round_trip() {
        for op in PowerOp::ALL {
            assert_eq!(PowerOp::parse(op.as_str()), Some(op));
        }
        assert_eq!(PowerOp::parse("upgrade"), None);
        assert_eq!(PowerOp::ForcePowerOff.resulting_state(), PowerState::Off);
        assert_eq!(PowerOp::ColdReset.resulting_state(), PowerState::On);
    }

    fn on(rack: &str, id: &str) -> ComponentRef {
        ComponentRef {
            id: Uuid::new_v4(),
            component_type: ComponentType::Compute,
            external_id: id.into(),
            rack: rack.into(),
        }
    }

    #[test]
    fn change_feeds_wake_only_the_changed_rack() {
        let feeds = ChangeFeeds::default();
        let mut a = feeds.subscribe(&[on("a", "a-1"), on("a", "a-2")]).unwrap();
        let b = feeds.subscribe(&[on("b", "b-1")]).unwrap();
        feeds.changed("a");
        assert!(a.has_changed().unwrap());
        assert!(!b.has_changed().unwrap());
        a.borrow_and_update();
        feeds.changed_all();
        assert!(a.has_changed().unwrap() && b.has_changed().unwrap());
        // A rack nobody polls: nothing to wake, nothing kept.
        feeds.changed("c");
        assert_eq!(feeds.racks.lock().len(), 2);
        drop(b);
        feeds.changed("b");
        assert_eq!(feeds.racks.lock().len(), 1);
    }

    #[test]
    fn change_feeds_need_one_rack() {
        let feeds = ChangeFeeds::default();
        assert!(feeds.subscribe(&[]).is_none());
        assert!(feeds.subscribe(&[on("a", "a-1"), on("b", "b-1")]).is_none());
    }
}
