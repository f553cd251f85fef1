//! The `sim` component-manager provider (decision C1): an in-process
//! simulated fleet, the embedded default and the base of tests and demos.
//!
//! This module owns [`SimFleet`] — per-component power state and firmware
//! version, registered lazily on first touch — its latency model, its fault
//! injection ([`SimFault`]) and its call log. The fleet implements every
//! capability (power, firmware, expectation injection, the firmware
//! consistency check, decommission) for every component type;
//! [`SimFleet::registry`] builds the matching [`ManagerRegistry`].
//!
//! Behaviour:
//! * Latency: a power operation takes `power_ms`, a status read or a
//!   firmware start a tenth of it, a firmware update `firmware_update_ms`;
//!   each is scaled by `1 ± jitter` from a small PRNG seeded by
//!   `seed ^ hash(component, that component's call counter)`, so the same
//!   seed and the same calls on a component give the same latencies however
//!   calls on other components interleave. A zero latency never sleeps.
//! * Time is `tokio::time`, so tests run on a paused clock.
//! * Firmware updates are asynchronous and need no background task: an
//!   update records its start instant and duration and its state is computed
//!   when read (`Queued` for the first tenth, then `Verifying`, then
//!   `Completed` with the new version, or `Failed`).
//! * Faults apply per component (first matching fault wins). Power calls:
//!   `fail` → error naming the failing components (the others still change
//!   state), `hang` → the call never returns, `slow` → ×10 latency; power
//!   status reads obey power faults too. Firmware: the fault is fixed when
//!   the update starts — `fail` → ends `Failed`, `hang` → `Verifying` for
//!   ever, `slow` → ×10 duration; firmware calls themselves always answer.
//! * Cancel safety: the state lock is a std mutex taken only in short
//!   synchronous sections, never across an await, and state changes happen
//!   after the simulated latency, so a dropped call leaves no trace but its
//!   call-log entry.

mod config;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rackflow_domain::ComponentType;
use serde::Serialize;
use tokio::time::Instant;

pub use config::{FaultEffect, FaultOperation, SimConfig, SimFault};

use crate::manager::{
    ChangeFeeds, ComponentManager, ComponentRef, DecommissionState, DecommissionStatus,
    Decommissioner, ExpectationInjector, FirmwareConsistency, FirmwareControl, FirmwareRequest,
    FirmwareState, FirmwareStatus, ManagerError, ManagerRegistry, PowerControl, PowerOp,
    PowerState, PowerStatus,
};
use config::CallKind;

/// Firmware version of a component the seed map does not name.
pub const DEFAULT_FIRMWARE_VERSION: &str = "1.0.0";
pub use config::DEFAULT_LATEST_FIRMWARE_VERSION;
/// Call-log entries kept; older ones are dropped so a long demo stays small.
const CALL_LOG_CAPACITY: usize = 10_000;
/// Mixed into the PRNG counter for update durations.
const UPDATE_DRAW_SALT: u64 = 0x5eed_f1a5_0000_0000;
/// Factor a `slow` fault applies to latencies.
const SLOW_FACTOR: u64 = 10;

/// One call the simulated hardware received.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimCall {
    /// 1, 2, 3, … in call order.
    pub sequence: u64,
    /// `power_control`, `power_status`, `firmware_start`, `firmware_status`,
    /// `firmware_inventory`.
    pub call: String,
    pub component_type: ComponentType,
    /// External ids, in call order.
    pub components: Vec<String>,
    /// The power operation or the firmware target version.
    pub detail: String,
    /// `ok`, `fail`, `hang` or `slow` (the worst effect over the components).
    pub outcome: String,
    pub at: DateTime<Utc>,
}

/// One simulated component as it is now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SimComponentState {
    pub component: String,
    pub component_type: ComponentType,
    pub rack: String,
    pub power_state: PowerState,
    pub firmware_version: String,
    pub firmware_updating: bool,
    /// Its leak detector reports a leak.
    pub leaking: bool,
}

/// The simulated fleet. Share it as `Arc<SimFleet>`.
#[derive(Debug)]
pub struct SimFleet {
    config: SimConfig,
    inner: Mutex<Inner>,
    /// Bumped per rack on every simulated state change (see `change_feed`).
    changes: Arc<ChangeFeeds>,
}

#[derive(Debug, Default)]
struct Inner {
    faults: Vec<SimFault>,
    firmware_seed: HashMap<String, String>,
    components: BTreeMap<String, SimComponent>,
    log: VecDeque<SimCall>,
    next_sequence: u64,
    /// Firmware credentials the starts received, per component (the last
    /// one): what real hardware would have been handed. Read in-process
    /// only ([`SimFleet::firmware_credentials`]); never in the call log,
    /// which `SimAdmin` serves.
    credentials: BTreeMap<String, rackflow_domain::run::SecretText>,
    /// Leak detectors that were set (external id → leaking); the others
    /// report nothing.
    leaks: BTreeMap<String, bool>,
}

#[derive(Debug)]
struct SimComponent {
    component_type: ComponentType,
    rack: String,
    power: PowerState,
    firmware_version: String,
    update: Option<Update>,
    /// A decommission in progress or done.
    decommission: Option<Decommission>,
    /// Calls that touched this component: the jitter PRNG's counter.
    calls: u64,
}

/// A decommission: `Decommissioning/Draining` until `duration` passed,
/// then `Decommissioned` (powered off), or the fault's end.
#[derive(Debug, Clone)]
struct Decommission {
    started: Instant,
    duration: Duration,
    fate: Option<FaultEffect>,
}

impl Decommission {
    fn state_at(&self, now: Instant) -> DecommissionState {
        let done = now.saturating_duration_since(self.started) >= self.duration;
        match self.fate {
            Some(FaultEffect::Hang) => DecommissionState::Decommissioning("Draining".into()),
            _ if !done => DecommissionState::Decommissioning("Draining".into()),
            Some(FaultEffect::Fail) => {
                DecommissionState::Other("Error(simulated decommission fault)".into())
            }
            _ => DecommissionState::Decommissioned,
        }
    }
}

#[derive(Debug, Clone)]
struct Update {
    target: String,
    started: Instant,
    duration: Duration,
    fate: Option<FaultEffect>,
    /// Set once the update ended (and the version was applied).
    ended: Option<FirmwareState>,
}

impl Update {
    /// The update's state at `now`, as the status call reports it.
    fn state_at(&self, now: Instant) -> FirmwareState {
        if let Some(ended) = self.ended {
            return ended;
        }
        let elapsed = now.saturating_duration_since(self.started);
        if self.fate != Some(FaultEffect::Hang) && elapsed >= self.duration {
            return match self.fate {
                Some(FaultEffect::Fail) => FirmwareState::Failed,
                _ => FirmwareState::Completed,
            };
        }
        if elapsed < self.duration / 10 {
            FirmwareState::Queued
        } else {
            FirmwareState::Verifying
        }
    }
}

impl SimComponent {
    /// Ends a finished update: applies the version on success.
    fn settle(&mut self, now: Instant) {
        let Some(update) = &mut self.update else {
            return;
        };
        if update.ended.is_some() {
            return;
        }
        let state = update.state_at(now);
        match state {
            FirmwareState::Completed => {
                if update.fate != Some(FaultEffect::Stale) {
                    self.firmware_version = update.target.clone();
                }
                update.ended = Some(state);
            }
            FirmwareState::Failed => update.ended = Some(state),
            _ => {}
        }
    }
}

/// What one call does, decided under the lock before any waiting.
struct Plan {
    latency: Duration,
    hang: bool,
    failed: Vec<String>,
    effects: Vec<Option<FaultEffect>>,
}

impl SimFleet {
    pub fn new(config: SimConfig) -> Arc<SimFleet> {
        Self::with_firmware(config, HashMap::new())
    }

    /// A fleet whose components start with the given firmware versions
    /// (external id → version); others start at [`DEFAULT_FIRMWARE_VERSION`].
    pub fn with_firmware(config: SimConfig, firmware: HashMap<String, String>) -> Arc<SimFleet> {
        let inner = Inner {
            faults: config.faults.clone(),
            firmware_seed: firmware,
            next_sequence: 1,
            leaks: config.leaks.iter().map(|c| (c.clone(), true)).collect(),
            ..Inner::default()
        };
        Arc::new(SimFleet {
            config,
            inner: Mutex::new(inner),
            changes: Arc::default(),
        })
    }

    /// A registry with this fleet as the manager of every component type.
    pub fn registry(self: &Arc<Self>) -> ManagerRegistry {
        ManagerRegistry::for_all_types(self.clone())
    }

    /// The configuration, with the current fault plan.
    pub fn config(&self) -> SimConfig {
        SimConfig {
            faults: self.faults(),
            ..self.config.clone()
        }
    }

    /// Replaces the whole fault plan.
    pub fn set_faults(&self, faults: Vec<SimFault>) {
        self.lock().faults = faults;
    }

    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    pub fn faults(&self) -> Vec<SimFault> {
        self.lock().faults.clone()
    }

    /// Sets a component's leak detector (external id): leaking or dry.
    pub fn set_leak(&self, external_id: &str, leaking: bool) {
        self.lock().leaks.insert(external_id.to_string(), leaking);
    }

    /// What the set leak detectors report, by external id.
    pub fn leak_detectors(&self) -> Vec<(String, bool)> {
        self.lock()
            .leaks
            .iter()
            .map(|(id, leaking)| (id.clone(), *leaking))
            .collect()
    }

    /// Log entries with a sequence above `after_sequence`, oldest first.
    /// The firmware credential the last update of `external_id` was given.
    pub fn firmware_credentials(
        &self,
        external_id: &str,
    ) -> Option<rackflow_domain::run::SecretText> {
        self.lock().credentials.get(external_id).cloned()
    }

    pub fn call_log(&self, after_sequence: u64) -> Vec<SimCall> {
        self.lock()
            .log
            .iter()
            .filter(|e| e.sequence > after_sequence)
            .cloned()
            .collect()
    }

    /// States of the named components (all known ones when `components` is
    /// empty), by external id. Unknown names are left out: a component
    /// exists only once a call touched it.
    pub fn component_states(&self, components: &[String]) -> Vec<SimComponentState> {
        let now = Instant::now();
        let mut inner = self.lock();
        let wanted = |id: &String| components.is_empty() || components.contains(id);
        let Inner {
            components: sims,
            leaks,
            ..
        } = &mut *inner;
        sims.iter_mut()
            .filter(|(id, _)| wanted(id))
            .map(|(id, c)| {
                c.settle(now);
                SimComponentState {
                    leaking: leaks.get(id).copied().unwrap_or(false),
                    component: id.clone(),
                    component_type: c.component_type,
                    rack: c.rack.clone(),
                    power_state: c.power,
                    firmware_version: c.firmware_version.clone(),
                    firmware_updating: c.update.as_ref().is_some_and(|u| u.ended.is_none()),
                }
            })
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps half-updated
        // in a way that matters to a simulation, so poisoning is ignored.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers the components, decides per-component effects and the
    /// call's latency, and writes the call-log entry. `base_ms` is the
    /// latency before jitter and faults.
    fn plan(
        &self,
        call: &str,
        detail: String,
        components: &[ComponentRef],
        kind: Option<CallKind>,
        base_ms: u64,
    ) -> Plan {
        let mut inner = self.lock();
        let mut plan = Plan {
            latency: Duration::ZERO,
            hang: false,
            failed: Vec::new(),
            effects: Vec::with_capacity(components.len()),
        };
        for component in components {
            let effect = kind.and_then(|kind| {
                inner
                    .faults
                    .iter()
                    .find(|f| f.matches(component, kind))
                    .map(|f| f.effect)
            });
            let counter = inner.touch(component);
            let mut latency = jittered(&self.config, base_ms, &component.external_id, counter);
            match effect {
                // For firmware, `slow` stretches the update, not the call.
                Some(FaultEffect::Slow) if kind == Some(CallKind::Power) => {
                    latency *= SLOW_FACTOR as u32
                }
                Some(FaultEffect::Hang) => plan.hang = true,
                Some(FaultEffect::Fail) => plan.failed.push(component.external_id.clone()),
                Some(FaultEffect::Slow | FaultEffect::Stale) | None => {}
            }
            plan.latency = plan.latency.max(latency);
            plan.effects.push(effect);
        }
        let outcome = [
            FaultEffect::Hang,
            FaultEffect::Fail,
            FaultEffect::Slow,
            FaultEffect::Stale,
        ]
        .into_iter()
        .find(|e| plan.effects.contains(&Some(*e)))
        .map_or("ok", FaultEffect::as_str);
        let sequence = inner.next_sequence;
        inner.next_sequence += 1;
        if inner.log.len() >= CALL_LOG_CAPACITY {
            inner.log.pop_front();
        }
        inner.log.push_back(SimCall {
            sequence,
            call: call.to_string(),
            component_type: components
                .first()
                .map_or(ComponentType::Unknown, |c| c.component_type),
            components: components.iter().map(|c| c.external_id.clone()).collect(),
            detail,
            outcome: outcome.to_string(),
            at: Utc::now(),
        });
        plan
    }

    fn call_ms(&self) -> u64 {
        self.config.power_ms / 10
    }

    /// [`Self::plan`], then the call's simulated time; a call a `hang`
    /// fault holds never returns (until dropped).
    async fn simulate(
        &self,
        call: &str,
        detail: String,
        components: &[ComponentRef],
        kind: Option<CallKind>,
        base_ms: u64,
    ) -> Plan {
        let plan = self.plan(call, detail, components, kind, base_ms);
        if plan.hang {
            std::future::pending::<()>().await;
        }
        wait(plan.latency).await;
        plan
    }

    /// Wakes each rack's waiters when something on it ends by itself (an
    /// update or a decommission: its state is computed when read, so
    /// nothing else would tell them).
    fn wake_at(&self, mut ends: Vec<(Instant, String)>) {
        ends.sort_unstable();
        ends.dedup();
        if ends.is_empty() {
            return;
        }
        let changes = Arc::clone(&self.changes);
        tokio::spawn(async move {
            for (end, rack) in ends {
                tokio::time::sleep_until(end).await;
                changes.changed(&rack);
            }
        });
    }
}

impl Inner {
    /// Registers a component on first touch and bumps its call counter;
    /// returns the counter value for this call.
    fn touch(&mut self, component: &ComponentRef) -> u64 {
        let seed_version = self.firmware_seed.get(&component.external_id).cloned();
        let entry = self
            .components
            .entry(component.external_id.clone())
            .or_insert_with(|| SimComponent {
                component_type: component.component_type,
                rack: component.rack.clone(),
                power: PowerState::On,
                firmware_version: seed_version
                    .unwrap_or_else(|| DEFAULT_FIRMWARE_VERSION.to_string()),
                update: None,
                decommission: None,
                calls: 0,
            });
        entry.calls += 1;
        entry.calls
    }
}

/// Sleeps unless the duration is zero (a zero-latency fleet must not yield
/// to the timer at all).
async fn wait(latency: Duration) {
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
}

/// `base_ms × (1 ± jitter)`, drawn from the seeded PRNG.
fn jittered(config: &SimConfig, base_ms: u64, key: &str, counter: u64) -> Duration {
    if base_ms == 0 {
        return Duration::ZERO;
    }
    let jitter = config.jitter.clamp(0.0, 1.0);
    let draw = splitmix64(config.seed ^ fnv1a(key.as_bytes()) ^ splitmix64(counter));
    // 53 high bits → uniform in [0, 1).
    let unit = (draw >> 11) as f64 / (1u64 << 53) as f64;
    let factor = 1.0 + jitter * (2.0 * unit - 1.0);
    Duration::from_secs_f64((base_ms as f64 * factor).max(0.0) / 1000.0)
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a: a stable string hash (std's hasher is not promised stable).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[async_trait]
impl PowerControl for SimFleet {
    async fn power_control(
        &self,
        components: &[ComponentRef],
        op: PowerOp,
    ) -> Result<(), ManagerError> {
        if components.is_empty() {
            return Ok(());
        }
        let plan = self
            .simulate(
                "power_control",
                op.as_str().to_string(),
                components,
                Some(CallKind::Power),
                self.config.power_ms,
            )
            .await;
        {
            let mut inner = self.lock();
            for component in components {
                if plan.failed.contains(&component.external_id) {
                    continue;
                }
                if let Some(c) = inner.components.get_mut(&component.external_id) {
                    c.power = op.resulting_state();
                }
            }
        }
        for rack in racks_of(components) {
            self.changes.changed(rack);
        }
        failed_call(op.as_str(), plan.failed, "simulated power fault")
    }
}

#[async_trait]
impl PowerStatus for SimFleet {
    fn change_feed(
        &self,
        components: &[ComponentRef],
    ) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.changes.subscribe(components)
    }

    async fn power_status(
        &self,
        components: &[ComponentRef],
    ) -> Result<HashMap<String, PowerState>, ManagerError> {
        if components.is_empty() {
            return Ok(HashMap::new());
        }
        let plan = self
            .simulate(
                "power_status",
                String::new(),
                components,
                Some(CallKind::Power),
                self.call_ms(),
            )
            .await;
        if !plan.failed.is_empty() {
            return Err(ManagerError::CallFailed {
                call: "power_status".to_string(),
                components: plan.failed,
                message: "simulated power fault".to_string(),
            });
        }
        let inner = self.lock();
        Ok(components
            .iter()
            .filter_map(|c| {
                let state = inner.components.get(&c.external_id)?.power;
                Some((c.external_id.clone(), state))
            })
            .collect())
    }
}

#[async_trait]
impl FirmwareControl for SimFleet {
    async fn firmware_start(
        &self,
        components: &[ComponentRef],
        request: &FirmwareRequest,
    ) -> Result<(), ManagerError> {
        if components.is_empty() {
            return Ok(());
        }
        if let Some(object) = &request.firmware_object {
            // Never apply "its version" and call the object applied.
            return Err(ManagerError::Refused {
                call: "firmware_start".to_owned(),
                message: format!(
                    "firmware object {object} lives in a rack manager's catalogue;                      the sim provider has none (use provider = \"rms\")"
                ),
            });
        }
        // No version (or "latest"): the newest image this manager has, as
        // the concrete version it is — what the read-back then reports.
        let requested = request.target_version.trim();
        let target = if requested.is_empty() || requested.eq_ignore_ascii_case("latest") {
            self.config.latest_firmware_version.clone()
        } else {
            requested.to_string()
        };
        let plan = self.plan(
            "firmware_start",
            target.clone(),
            components,
            Some(CallKind::Firmware),
            self.call_ms(),
        );
        // The start call itself always succeeds: a fault shapes the update.
        wait(plan.latency).await;
        let now = Instant::now();
        // When each update ends, per rack: one timer task per call (not per
        // component) tells that rack's pollers at each distinct end.
        let mut ends: Vec<(Instant, String)> = Vec::new();
        let mut inner = self.lock();
        if let Some(credentials) = &request.credentials {
            for component in components {
                inner
                    .credentials
                    .insert(component.external_id.clone(), credentials.clone());
            }
        }
        for (component, effect) in components.iter().zip(&plan.effects) {
            let Some(c) = inner.components.get_mut(&component.external_id) else {
                continue;
            };
            let mut duration = jittered(
                &self.config,
                self.config.firmware_update_ms,
                &component.external_id,
                // Salted so the update's draw is not the start call's draw.
                c.calls ^ UPDATE_DRAW_SALT,
            );
            if *effect == Some(FaultEffect::Slow) {
                duration *= SLOW_FACTOR as u32;
            }
            c.update = Some(Update {
                target: target.clone(),
                started: now,
                duration,
                fate: *effect,
                ended: None,
            });
            if *effect != Some(FaultEffect::Hang) {
                ends.push((now + duration, component.rack.clone()));
            }
        }
        drop(inner);
        self.wake_at(ends);
        Ok(())
    }
}

#[async_trait]
impl FirmwareStatus for SimFleet {
    fn change_feed(
        &self,
        components: &[ComponentRef],
    ) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.changes.subscribe(components)
    }

    async fn firmware_status(
        &self,
        components: &[ComponentRef],
    ) -> Result<HashMap<String, FirmwareState>, ManagerError> {
        if components.is_empty() {
            return Ok(HashMap::new());
        }
        // Faults show in the update states, not in the status call.
        let plan = self.plan(
            "firmware_status",
            String::new(),
            components,
            None,
            self.call_ms(),
        );
        wait(plan.latency).await;
        let now = Instant::now();
        let mut inner = self.lock();
        Ok(components
            .iter()
            .filter_map(|c| {
                let sim = inner.components.get_mut(&c.external_id)?;
                sim.settle(now);
                let state = sim
                    .update
                    .as_ref()
                    .map_or(FirmwareState::Unknown, |u| u.state_at(now));
                Some((c.external_id.clone(), state))
            })
            .collect())
    }

    async fn installed_versions(
        &self,
        components: &[ComponentRef],
        _sub_targets: &[String],
    ) -> Result<HashMap<String, String>, ManagerError> {
        if components.is_empty() {
            return Ok(HashMap::new());
        }
        let plan = self.plan(
            "firmware_inventory",
            String::new(),
            components,
            None,
            self.call_ms(),
        );
        wait(plan.latency).await;
        let now = Instant::now();
        let mut inner = self.lock();
        Ok(components
            .iter()
            .filter_map(|c| {
                let sim = inner.components.get_mut(&c.external_id)?;
                sim.settle(now);
                Some((c.external_id.clone(), sim.firmware_version.clone()))
            })
            .collect())
    }
}

#[async_trait]
impl ExpectationInjector for SimFleet {
    async fn inject_expectation(&self, components: &[ComponentRef]) -> Result<(), ManagerError> {
        if components.is_empty() {
            return Ok(());
        }
        let plan = self
            .simulate(
                "inject_expectation",
                String::new(),
                components,
                Some(CallKind::Ingest),
                self.call_ms(),
            )
            .await;
        // The simulated manager knows every component already: an ingest
        // is its call (in the log) and its fault, nothing more.
        failed_call("inject_expectation", plan.failed, "simulated ingest fault")
    }
}

#[async_trait]
impl FirmwareConsistency for SimFleet {
    async fn check_firmware_consistency(
        &self,
        components: &[ComponentRef],
    ) -> Result<(), ManagerError> {
        if components.is_empty() {
            return Ok(());
        }
        let plan = self
            .simulate(
                "firmware_consistency",
                String::new(),
                components,
                Some(CallKind::Firmware),
                self.call_ms(),
            )
            .await;
        failed_call(
            "firmware_consistency",
            plan.failed,
            "simulated consistency-check fault",
        )?;
        let now = Instant::now();
        let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
        {
            let mut inner = self.lock();
            for component in components {
                if let Some(c) = inner.components.get_mut(&component.external_id) {
                    c.settle(now);
                    versions
                        .entry(c.firmware_version.clone())
                        .or_default()
                        .push(component.external_id.clone());
                }
            }
        }
        if versions.len() <= 1 {
            return Ok(());
        }
        let listed: Vec<String> = versions
            .iter()
            .map(|(version, ids)| {
                format!(
                    "{version} on {}",
                    crate::manager::first_listed(ids, ", ", ", and")
                )
            })
            .collect();
        Err(ManagerError::CallFailed {
            call: "firmware_consistency".to_string(),
            components: components.iter().map(|c| c.external_id.clone()).collect(),
            message: format!("firmware versions differ: {}", listed.join("; ")),
        })
    }
}

#[async_trait]
impl Decommissioner for SimFleet {
    async fn decommission(&self, components: &[ComponentRef]) -> Result<(), ManagerError> {
        if components.is_empty() {
            return Ok(());
        }
        let plan = self.plan(
            "decommission",
            String::new(),
            components,
            Some(CallKind::Decommission),
            self.call_ms(),
        );
        wait(plan.latency).await;
        let now = Instant::now();
        let mut ends = Vec::new();
        {
            let mut inner = self.lock();
            for (component, effect) in components.iter().zip(&plan.effects) {
                let duration = jittered(
                    &self.config,
                    self.config.decommission_ms,
                    &component.external_id,
                    UPDATE_DRAW_SALT,
                );
                let duration = match effect {
                    Some(FaultEffect::Slow) => duration * SLOW_FACTOR as u32,
                    _ => duration,
                };
                if let Some(c) = inner.components.get_mut(&component.external_id)
                    && c.decommission.is_none()
                {
                    c.decommission = Some(Decommission {
                        started: now,
                        duration,
                        fate: *effect,
                    });
                    if *effect != Some(FaultEffect::Hang) {
                        ends.push((now + duration, component.rack.clone()));
                    }
                }
            }
        }
        for rack in racks_of(components) {
            self.changes.changed(rack);
        }
        self.wake_at(ends);
        Ok(())
    }
}

#[async_trait]
impl DecommissionStatus for SimFleet {
    fn change_feed(
        &self,
        components: &[ComponentRef],
    ) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.changes.subscribe(components)
    }

    async fn decommission_status(
        &self,
        components: &[ComponentRef],
    ) -> Result<HashMap<String, DecommissionState>, ManagerError> {
        let plan = self.plan(
            "decommission_status",
            String::new(),
            components,
            None,
            self.call_ms(),
        );
        wait(plan.latency).await;
        let now = Instant::now();
        let mut inner = self.lock();
        let mut states = HashMap::with_capacity(components.len());
        for component in components {
            let Some(c) = inner.components.get_mut(&component.external_id) else {
                continue;
            };
            let state = c
                .decommission
                .as_ref()
                .map_or(DecommissionState::Ready, |d| d.state_at(now));
            if state.is_done() {
                // A decommissioned component is powered off.
                c.power = PowerState::Off;
            }
            states.insert(component.external_id.clone(), state);
        }
        Ok(states)
    }
}

/// The distinct racks of `components`.
fn racks_of(components: &[ComponentRef]) -> Vec<&str> {
    let mut racks: Vec<&str> = components.iter().map(|c| c.rack.as_str()).collect();
    racks.sort_unstable();
    racks.dedup();
    racks
}

/// `Ok` when no component failed, else the call's error naming them.
fn failed_call(call: &str, failed: Vec<String>, message: &str) -> Result<(), ManagerError> {
    if failed.is_empty() {
        Ok(())
    } else {
        Err(ManagerError::CallFailed {
            call: call.to_string(),
            components: failed,
            message: message.to_string(),
        })
    }
}

impl ComponentManager for SimFleet {
    fn name(&self) -> &str {
        "sim"
    }
    fn as_expectation_injector(&self) -> Option<&dyn ExpectationInjector> {
        Some(self)
    }
    fn as_firmware_consistency(&self) -> Option<&dyn FirmwareConsistency> {
        Some(self)
    }
    fn as_decommissioner(&self) -> Option<&dyn Decommissioner> {
        Some(self)
    }
    fn as_decommission_status(&self) -> Option<&dyn DecommissionStatus> {
        Some(self)
    }
    fn as_power_control(&self) -> Option<&dyn PowerControl> {
        Some(self)
    }
    fn as_power_status(&self) -> Option<&dyn PowerStatus> {
        Some(self)
    }
    fn as_firmware_control(&self) -> Option<&dyn FirmwareControl> {
        Some(self)
    }
    fn as_firmware_status(&self) -> Option<&dyn FirmwareStatus> {
        Some(self)
    }
}

#[cfg(test)]
mod tests;
