//! The `sim` node back end: in-process simulated BMCs (decision M2).
//!
//! Owns the simulated node state (power, firmware versions), the latency
//! model, fault injection by node and operation, and the call log tests and
//! the e2e check read.
//!
//! Behaviour:
//! * Nodes appear on first touch: any target is reachable, powered off, with
//!   components `BMC` and `BIOS` at `initial_firmware_version`.
//! * Latency: power actions take `power_latency_ms`, reads
//!   `read_latency_ms`, a firmware update `firmware_latency_ms` (split in two
//!   halves around a 50 % progress report); each is scaled by `1 ± jitter`
//!   drawn from a PRNG seeded by `seed ^ hash(node, that node's call
//!   counter)`, so the same seed and the same calls on a node give the same
//!   latencies whatever the interleaving. Time is `tokio::time`.
//! * A firmware update installs the image's version (its `version=` line,
//!   else its file stem) on the component the request's target names; a
//!   package-derived image (no target) on the component its `component=`
//!   line names, else `BMC` (as the Redfish emulator). An image whose
//!   version is already installed is skipped unless forced.
//! * Faults (first match wins; `node_id = "*"` matches every node):
//!   `fail` → the call returns an error (`Rejected`, or `TaskFailed` for a
//!   firmware update, after the latency); `hang` → the call never returns
//!   (callers' cancellation and timeouts get tested); `slow` → ×10 latency;
//!   `panic` → the call panics (tests the job model's abandoned-worker path).
//! * Rack power: power shelves feed their rack. Once a power action left
//!   every power shelf the sim knows in a rack off (at least one of them
//!   turned off by an action, not just never powered), the rack's other
//!   nodes lose power: their host power drops to off and their BMCs stop
//!   answering (`Unreachable`, call-log outcome `unpowered`) until a shelf
//!   of the rack is powered on again. A shelf's own BMC stays reachable (it
//!   runs on standby power). This is what the rack manager's cold reboot
//!   observes between its shelf-off and shelf-on stages.
//! * Device info: the rack's chassis serial is `1821220000000` plus a hash
//!   of the rack id below one million (every tray of a rack shares it); a
//!   node's tray index is the number its id ends with (`compute-07` → 7,
//!   none without digits) and its slot that index plus one.
//! * Leak detectors: every compute and switch tray has one (`ColdPlate` in
//!   chassis `Tray`), dry until [`SimBackend::set_leak`] (or the config's
//!   `leaking_nodes`) wets it; power shelves and untyped nodes expose none.
//! * Cancel safety: the state lock is a std mutex held only in short
//!   synchronous sections; state changes happen after the simulated latency,
//!   so a dropped call leaves nothing behind but its call-log entry.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{
    BackendError, DetectorState, DeviceInfo, FirmwareComponent, FirmwareImage, FirmwareOutcome,
    FirmwareProgress, LeakDetector, NodeBackend, NodeKind, NodeTarget, PowerAction, PowerState,
    ProgressSink,
};

/// Call-log entries kept; older ones are dropped.
const CALL_LOG_CAPACITY: usize = 10_000;
/// Factor a `slow` fault applies to latencies.
const SLOW_FACTOR: u32 = 10;

/// Configuration of the simulated BMCs (`[nodes.sim]`). Every default is
/// here (and in `docs/rms.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimBackendConfig {
    /// PRNG seed of the latency jitter.
    pub seed: u64,
    /// Milliseconds a power action takes.
    pub power_latency_ms: u64,
    /// Milliseconds a power-state or inventory read takes.
    pub read_latency_ms: u64,
    /// Milliseconds a firmware update takes.
    pub firmware_latency_ms: u64,
    /// Relative jitter applied to each latency, in `[0, 1]`.
    pub jitter: f64,
    /// Version of every component of a node on first touch.
    pub initial_firmware_version: String,
    /// Injected faults (`[[nodes.sim.faults]]`).
    pub faults: Vec<SimNodeFault>,
    /// Node ids whose leak detector reads `Critical` from the start.
    pub leaking_nodes: Vec<String>,
}

impl Default for SimBackendConfig {
    fn default() -> Self {
        SimBackendConfig {
            seed: 0,
            power_latency_ms: 50,
            read_latency_ms: 5,
            firmware_latency_ms: 500,
            jitter: 0.2,
            initial_firmware_version: "1.0.0".to_owned(),
            faults: Vec::new(),
            leaking_nodes: Vec::new(),
        }
    }
}

/// Which back-end call a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SimOperation {
    Power,
    PowerState,
    Inventory,
    Firmware,
    /// Reading the leak detectors.
    Leak,
    Any,
}

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SimFaultEffect {
    Fail,
    Hang,
    Slow,
    Panic,
}

impl SimFaultEffect {
    fn as_str(self) -> &'static str {
        match self {
            SimFaultEffect::Fail => "fail",
            SimFaultEffect::Hang => "hang",
            SimFaultEffect::Slow => "slow",
            SimFaultEffect::Panic => "panic",
        }
    }
}

/// One injected fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimNodeFault {
    /// Node id, or `*` for every node.
    pub node_id: String,
    /// Limits the fault to one rack; unset = any rack.
    #[serde(default)]
    pub rack_id: Option<String>,
    #[serde(default = "any_operation")]
    pub operation: SimOperation,
    pub effect: SimFaultEffect,
}

fn any_operation() -> SimOperation {
    SimOperation::Any
}

impl SimNodeFault {
    fn matches(&self, node: &NodeTarget, operation: SimOperation) -> bool {
        (self.node_id == "*" || self.node_id == node.node_id)
            && self.rack_id.as_ref().is_none_or(|r| *r == node.rack_id)
            && (self.operation == SimOperation::Any || self.operation == operation)
    }
}

/// One call the simulated BMCs received.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SimNodeCall {
    pub sequence: u64,
    pub rack_id: String,
    pub node_id: String,
    /// `set_power`, `power_state`, `firmware_inventory`, `update_firmware`,
    /// `leak_detectors`.
    pub call: &'static str,
    /// The power action, or `target=file` of a firmware update.
    pub detail: String,
    /// `ok`, the fault effect, or `unpowered` (the rack's power shelves
    /// are off).
    pub outcome: &'static str,
}

/// The simulated BMCs. Share as `Arc<SimBackend>`.
#[derive(Debug)]
pub struct SimBackend {
    config: SimBackendConfig,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    faults: Vec<SimNodeFault>,
    nodes: BTreeMap<(String, String), SimNode>,
    log: VecDeque<SimNodeCall>,
    /// Wet detectors by node id (set by `set_leak`); absent = dry.
    leaks: BTreeMap<String, DetectorState>,
    next_sequence: u64,
    next_task: u64,
}

#[derive(Debug)]
struct SimNode {
    power: PowerState,
    firmware: BTreeMap<String, String>,
    calls: u64,
    /// From the node type of the latest call.
    kind: Option<NodeKind>,
    /// A power shelf turned off by an action (not merely never powered).
    cut: bool,
}

/// What [`SimBackend::begin`] decided about one call.
struct Call {
    effect: Option<SimFaultEffect>,
    latency: Duration,
    /// The node's rack has no power: the call fails as unreachable.
    unpowered: bool,
}

impl Inner {
    /// Whether `rack`'s power shelves are all off, one of them by an action.
    fn rack_unfed(&self, rack: &str) -> bool {
        let (mut any_cut, mut all_off) = (false, true);
        for node in self.rack_nodes(rack) {
            if node.kind == Some(NodeKind::PowerShelf) {
                any_cut |= node.cut;
                all_off &= node.power == PowerState::Off;
            }
        }
        any_cut && all_off
    }

    /// The nodes of one rack (a range of the map, not a scan of it).
    fn rack_nodes<'a>(&'a self, rack: &'a str) -> impl Iterator<Item = &'a SimNode> + 'a {
        self.nodes
            .range((rack.to_owned(), String::new())..)
            .take_while(move |((r, _), _)| r == rack)
            .map(|(_, n)| n)
    }
}

impl SimBackend {
    pub fn new(config: SimBackendConfig) -> Self {
        let faults = config.faults.clone();
        let leaks = config
            .leaking_nodes
            .iter()
            .map(|n| (n.clone(), DetectorState::Critical))
            .collect();
        SimBackend {
            config,
            inner: Mutex::new(Inner {
                faults,
                leaks,
                ..Inner::default()
            }),
        }
    }

    /// Sets what the leak detector of node `node_id` reads (any rack):
    /// `Warning` or `Critical` wets it, `Ok` dries it.
    pub fn set_leak(&self, node_id: &str, state: DetectorState) {
        let mut inner = self.lock();
        if state == DetectorState::Ok {
            inner.leaks.remove(node_id);
        } else {
            inner.leaks.insert(node_id.to_owned(), state);
        }
    }

    /// Replaces the injected faults (tests flip faults between calls).
    pub fn set_faults(&self, faults: Vec<SimNodeFault>) {
        self.lock().faults = faults;
    }

    /// The calls received so far, oldest first.
    pub fn calls(&self) -> Vec<SimNodeCall> {
        self.lock().log.iter().cloned().collect()
    }

    /// A node's current power state (`None` if never touched).
    pub fn node_power(&self, rack_id: &str, node_id: &str) -> Option<PowerState> {
        self.lock()
            .nodes
            .get(&(rack_id.to_owned(), node_id.to_owned()))
            .map(|n| n.power)
    }

    /// A node's installed firmware, component → version (`None` if never
    /// touched).
    pub fn node_firmware(&self, rack_id: &str, node_id: &str) -> Option<BTreeMap<String, String>> {
        self.lock()
            .nodes
            .get(&(rack_id.to_owned(), node_id.to_owned()))
            .map(|n| n.firmware.clone())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every critical section leaves the state consistent.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Logs the call, bumps the node's counter and returns the fault effect,
    /// the latency to simulate and whether the node has power.
    fn begin(
        &self,
        node: &NodeTarget,
        call: &'static str,
        operation: SimOperation,
        detail: String,
        base_ms: u64,
    ) -> Call {
        let mut inner = self.lock();
        let kind = NodeKind::of(node.node_type);
        let unpowered = kind != Some(NodeKind::PowerShelf) && inner.rack_unfed(&node.rack_id);
        let effect = inner
            .faults
            .iter()
            .find(|f| f.matches(node, operation))
            .map(|f| f.effect);
        let initial = self.config.initial_firmware_version.clone();
        let sim = inner
            .nodes
            .entry((node.rack_id.clone(), node.node_id.clone()))
            .or_insert_with(|| SimNode {
                power: PowerState::Off,
                firmware: [("BMC", &initial), ("BIOS", &initial)]
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.clone()))
                    .collect(),
                calls: 0,
                kind,
                cut: false,
            });
        sim.calls += 1;
        sim.kind = kind;
        let draw = splitmix(self.config.seed ^ fnv(&node.rack_id, &node.node_id, sim.calls));
        inner.next_sequence += 1;
        let sequence = inner.next_sequence;
        if inner.log.len() >= CALL_LOG_CAPACITY {
            inner.log.pop_front();
        }
        inner.log.push_back(SimNodeCall {
            sequence,
            rack_id: node.rack_id.clone(),
            node_id: node.node_id.clone(),
            call,
            detail,
            outcome: match effect {
                Some(effect) => effect.as_str(),
                None if unpowered => "unpowered",
                None => "ok",
            },
        });
        drop(inner);
        let latency = jittered(base_ms, self.config.jitter, draw);
        let latency = if effect == Some(SimFaultEffect::Slow) {
            latency * SLOW_FACTOR
        } else {
            latency
        };
        Call {
            effect,
            latency,
            unpowered,
        }
    }

    /// Applies a power action that completed: the node's new state, and for
    /// a power shelf, what it does to its rack's power.
    fn apply_power(&self, node: &NodeTarget, action: PowerAction) {
        let mut inner = self.lock();
        let state = action.resulting_state();
        let Some(sim) = inner
            .nodes
            .get_mut(&(node.rack_id.clone(), node.node_id.clone()))
        else {
            return;
        };
        sim.power = state;
        if sim.kind != Some(NodeKind::PowerShelf) {
            return;
        }
        sim.cut = state == PowerState::Off;
        if inner.rack_unfed(&node.rack_id) {
            let rack = node.rack_id.as_str();
            for (_, n) in inner
                .nodes
                .range_mut((rack.to_owned(), String::new())..)
                .take_while(|((r, _), _)| r == rack)
            {
                if n.kind != Some(NodeKind::PowerShelf) {
                    n.power = PowerState::Off;
                }
            }
        }
    }

    fn with_node<T>(&self, node: &NodeTarget, f: impl FnOnce(&mut SimNode) -> T) -> Option<T> {
        self.lock()
            .nodes
            .get_mut(&(node.rack_id.clone(), node.node_id.clone()))
            .map(f)
    }
}

/// Applies the fault effects shared by every call: hang never returns,
/// panic panics, fail returns `Some(error)` after the latency; a node
/// without power is unreachable after the latency.
async fn simulate(call_state: &Call, node: &NodeTarget, call: &str) -> Option<BackendError> {
    let Call {
        effect,
        latency,
        unpowered,
    } = *call_state;
    match effect {
        Some(SimFaultEffect::Hang) => std::future::pending::<()>().await,
        Some(SimFaultEffect::Panic) => {
            panic!("sim fault: injected panic in {call} on {}", node.node_id)
        }
        _ => {}
    }
    sleep(latency).await;
    if effect == Some(SimFaultEffect::Fail) {
        return Some(BackendError::Rejected(format!(
            "sim fault: {call} failed on node {} of rack {}",
            node.node_id, node.rack_id
        )));
    }
    unpowered.then(|| unpowered_error(node))
}

fn unpowered_error(node: &NodeTarget) -> BackendError {
    BackendError::Unreachable(format!(
        "sim: node {} of rack {} has no power (the rack's power shelves are off)",
        node.node_id, node.rack_id
    ))
}

async fn sleep(latency: Duration) {
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
}

#[async_trait]
impl NodeBackend for SimBackend {
    fn kind(&self) -> &'static str {
        "sim"
    }

    async fn set_power(&self, node: &NodeTarget, action: PowerAction) -> Result<(), BackendError> {
        let call = self.begin(
            node,
            "set_power",
            SimOperation::Power,
            action.as_str().to_owned(),
            self.config.power_latency_ms,
        );
        if let Some(error) = simulate(&call, node, "set_power").await {
            return Err(error);
        }
        self.apply_power(node, action);
        Ok(())
    }

    async fn power_state(&self, node: &NodeTarget) -> Result<PowerState, BackendError> {
        let call = self.begin(
            node,
            "power_state",
            SimOperation::PowerState,
            String::new(),
            self.config.read_latency_ms,
        );
        if let Some(error) = simulate(&call, node, "power_state").await {
            return Err(error);
        }
        Ok(self
            .with_node(node, |n| n.power)
            .unwrap_or(PowerState::Unknown))
    }

    async fn firmware_inventory(
        &self,
        node: &NodeTarget,
    ) -> Result<Vec<FirmwareComponent>, BackendError> {
        let call = self.begin(
            node,
            "firmware_inventory",
            SimOperation::Inventory,
            String::new(),
            self.config.read_latency_ms,
        );
        if let Some(error) = simulate(&call, node, "firmware_inventory").await {
            return Err(error);
        }
        Ok(self
            .with_node(node, |n| {
                n.firmware
                    .iter()
                    .map(|(name, version)| FirmwareComponent {
                        name: name.clone(),
                        version: version.clone(),
                        updateable: true,
                        target: format!("/redfish/v1/UpdateService/FirmwareInventory/{name}"),
                        health: "OK".to_owned(),
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn device_info(&self, node: &NodeTarget) -> Result<DeviceInfo, BackendError> {
        let call = self.begin(
            node,
            "device_info",
            SimOperation::Inventory,
            String::new(),
            self.config.read_latency_ms,
        );
        if let Some(error) = simulate(&call, node, "device_info").await {
            return Err(error);
        }
        Ok(sim_device_info(&node.rack_id, &node.node_id))
    }

    async fn leak_detectors(
        &self,
        node: &NodeTarget,
    ) -> Result<Option<Vec<LeakDetector>>, BackendError> {
        let call = self.begin(
            node,
            "leak_detectors",
            SimOperation::Leak,
            String::new(),
            self.config.read_latency_ms,
        );
        if let Some(error) = simulate(&call, node, "leak_detectors").await {
            return Err(error);
        }
        if !matches!(
            NodeKind::of(node.node_type),
            Some(NodeKind::Compute | NodeKind::Switch)
        ) {
            return Ok(None);
        }
        let state = self
            .lock()
            .leaks
            .get(&node.node_id)
            .copied()
            .unwrap_or(DetectorState::Ok);
        Ok(Some(vec![LeakDetector {
            id: "ColdPlate".to_owned(),
            name: "Cold plate leak detector".to_owned(),
            chassis_id: "Tray".to_owned(),
            state,
            detector_type: "Moisture".to_owned(),
            uri: "/redfish/v1/Chassis/Tray/ThermalSubsystem/LeakDetection/LeakDetectors/ColdPlate"
                .to_owned(),
        }]))
    }

    async fn update_firmware(
        &self,
        node: &NodeTarget,
        image: &FirmwareImage,
        progress: ProgressSink<'_>,
    ) -> Result<FirmwareOutcome, BackendError> {
        let file = image
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Call {
            effect,
            latency,
            unpowered,
        } = self.begin(
            node,
            "update_firmware",
            SimOperation::Firmware,
            format!("{}={file}", image.target),
            self.config.firmware_latency_ms,
        );
        if unpowered {
            sleep(latency / 2).await;
            return Err(unpowered_error(node));
        }
        let declared = ImageFields::read(&image.path);
        let version = declared.version;
        // A package-derived image updates what the package is for: the
        // component its `component=` line names, the BMC without one — as
        // the Redfish emulator does, so that Flow's default version entry
        // (BMC) reads back what was installed.
        let component = if image.target.is_empty() || image.target == super::PACKAGE_DERIVED {
            declared.component
        } else {
            image.target.clone()
        };
        let current = self.with_node(node, |n| n.firmware.get(&component).cloned());
        if !image.force && current.flatten().as_deref() == Some(version.as_str()) {
            return Ok(FirmwareOutcome::Skipped {
                reason: format!("{component} already at version {version}"),
            });
        }
        let task_id = {
            let mut inner = self.lock();
            inner.next_task += 1;
            format!("sim-task-{}", inner.next_task)
        };
        progress(FirmwareProgress {
            task_id: Some(task_id.clone()),
            percent: Some(0),
            message: "update accepted".to_owned(),
        });
        match effect {
            Some(SimFaultEffect::Hang) => std::future::pending::<()>().await,
            Some(SimFaultEffect::Panic) => {
                panic!(
                    "sim fault: injected panic in update_firmware on {}",
                    node.node_id
                )
            }
            _ => {}
        }
        sleep(latency / 2).await;
        progress(FirmwareProgress {
            task_id: Some(task_id.clone()),
            percent: Some(50),
            message: "image transferred".to_owned(),
        });
        sleep(latency - latency / 2).await;
        if effect == Some(SimFaultEffect::Fail) {
            return Err(BackendError::TaskFailed(format!(
                "sim fault: task {task_id} failed applying {file} to {component} on node {}",
                node.node_id
            )));
        }
        self.with_node(node, |n| {
            n.firmware.insert(component.clone(), version.clone());
        });
        progress(FirmwareProgress {
            task_id: Some(task_id.clone()),
            percent: Some(100),
            message: "update completed".to_owned(),
        });
        Ok(FirmwareOutcome::Completed {
            task_id: Some(task_id),
            summary: format!("{component} updated to {version}"),
        })
    }
}

/// The component a package-derived image without a `component=` line
/// updates.
const DEFAULT_PACKAGE_COMPONENT: &str = "BMC";

/// What an image declares in its first 4 KiB, in the format of the Redfish
/// emulator's firmware extension (`crates/testkit/sushy_fw.py`): a
/// `version=` line (else the file stem is the version: `bmc-2.1.0.fwpkg` →
/// `bmc-2.1.0`) and a `component=` line (else BMC), which a
/// package-derived update installs on.
struct ImageFields {
    version: String,
    component: String,
}

impl ImageFields {
    fn read(path: &Path) -> ImageFields {
        use std::io::Read;
        let mut head = Vec::new();
        let text = std::fs::File::open(path)
            .and_then(|f| f.take(4096).read_to_end(&mut head))
            .map(|_| String::from_utf8_lossy(&head).into_owned())
            .unwrap_or_default();
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_owned()))
                .filter(|v| !v.is_empty())
        };
        ImageFields {
            version: field("version=").unwrap_or_else(|| {
                path.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            }),
            component: field("component=").unwrap_or_else(|| DEFAULT_PACKAGE_COMPONENT.to_owned()),
        }
    }
}

/// `base_ms × (1 ± jitter)` with the sign and size taken from `draw`.
fn jittered(base_ms: u64, jitter: f64, draw: u64) -> Duration {
    if base_ms == 0 {
        return Duration::ZERO;
    }
    let jitter = jitter.clamp(0.0, 1.0);
    if jitter == 0.0 {
        return Duration::from_millis(base_ms);
    }
    // Map the draw to [-1, 1).
    let unit = (draw >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
    let factor = 1.0 + jitter * unit;
    Duration::from_secs_f64(base_ms as f64 * factor.max(0.0) / 1000.0)
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// FNV-1a over the node key and counter: stable across builds, unlike
/// `DefaultHasher`.
fn fnv(rack: &str, node: &str, counter: u64) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in rack
        .bytes()
        .chain([0u8])
        .chain(node.bytes())
        .chain(counter.to_le_bytes())
    {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The sim's rack layout (module docs): chassis serial from the rack id,
/// tray index from the node id's trailing number, slot = index + 1.
pub fn sim_device_info(rack_id: &str, node_id: &str) -> DeviceInfo {
    // FNV-1a: stable across runs and platforms (std's hasher is not).
    let hash = rack_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let digits: String = node_id
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let tray_index = digits.parse::<u32>().ok();
    DeviceInfo {
        chassis_serial: i64::try_from(1_821_220_000_000 + hash % 1_000_000).ok(),
        slot_number: tray_index.and_then(|t| t.checked_add(1)),
        tray_index,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::backend::{BmcCredentials, BmcEndpoint};

    fn target(node: &str) -> NodeTarget {
        NodeTarget {
            rack_id: "rack-1".into(),
            node_id: node.into(),
            node_type: 1,
            bmc: BmcEndpoint {
                address: "127.0.0.1".into(),
                port: 443,
                mac_address: String::new(),
                credentials: BmcCredentials::default(),
            },
        }
    }

    fn fault(node: &str, operation: SimOperation, effect: SimFaultEffect) -> SimNodeFault {
        SimNodeFault {
            node_id: node.into(),
            rack_id: None,
            operation,
            effect,
        }
    }

    fn image(target: &str, file: &str) -> FirmwareImage {
        FirmwareImage {
            target: target.into(),
            path: format!("/fw/{file}").into(),
            force: false,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn power_round_trip_and_call_log() {
        let sim = SimBackend::new(SimBackendConfig::default());
        let n = target("n1");
        assert_eq!(sim.power_state(&n).await.unwrap(), PowerState::Off);
        sim.set_power(&n, PowerAction::On).await.unwrap();
        assert_eq!(sim.power_state(&n).await.unwrap(), PowerState::On);
        sim.set_power(&n, PowerAction::ForceOff).await.unwrap();
        assert_eq!(sim.node_power("rack-1", "n1"), Some(PowerState::Off));
        let calls: Vec<_> = sim.calls().iter().map(|c| c.call).collect();
        assert_eq!(
            calls,
            ["power_state", "set_power", "power_state", "set_power"]
        );
        assert_eq!(sim.calls()[1].detail, "on");
    }

    fn typed(node: &str, node_type: i32) -> NodeTarget {
        NodeTarget {
            node_type,
            ..target(node)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn power_shelves_feed_their_rack() {
        let sim = SimBackend::new(SimBackendConfig::default());
        let (ps1, ps2) = (typed("ps1", 2), typed("ps2", 2));
        let (compute, switch) = (typed("c1", 1), typed("sw1", 3));
        // Never-powered shelves read Off but cut nothing.
        assert_eq!(sim.power_state(&ps1).await.unwrap(), PowerState::Off);
        assert_eq!(sim.power_state(&ps2).await.unwrap(), PowerState::Off);
        sim.set_power(&compute, PowerAction::On).await.unwrap();
        assert_eq!(sim.power_state(&switch).await.unwrap(), PowerState::Off);
        sim.set_power(&ps1, PowerAction::On).await.unwrap();
        sim.set_power(&ps2, PowerAction::On).await.unwrap();

        // One shelf off: the other still feeds the rack.
        sim.set_power(&ps1, PowerAction::Off).await.unwrap();
        assert_eq!(sim.power_state(&compute).await.unwrap(), PowerState::On);
        // Both off: trays lose host power and their BMCs stop answering;
        // the shelves' own BMCs still answer.
        sim.set_power(&ps2, PowerAction::Off).await.unwrap();
        for tray in [&compute, &switch] {
            let err = sim.power_state(tray).await.unwrap_err();
            assert!(matches!(err, BackendError::Unreachable(_)), "{err}");
            assert!(sim.set_power(tray, PowerAction::On).await.is_err());
        }
        assert_eq!(sim.node_power("rack-1", "c1"), Some(PowerState::Off));
        assert_eq!(sim.power_state(&ps1).await.unwrap(), PowerState::Off);
        assert_eq!(sim.calls().last().unwrap().outcome, "ok");
        assert!(sim.calls().iter().any(|c| c.outcome == "unpowered"));
        // Another rack is not affected.
        let other = NodeTarget {
            rack_id: "rack-2".into(),
            ..typed("c9", 1)
        };
        assert!(sim.power_state(&other).await.is_ok());

        // A shelf back on: the trays answer again, host power off.
        sim.set_power(&ps2, PowerAction::On).await.unwrap();
        assert_eq!(sim.power_state(&compute).await.unwrap(), PowerState::Off);
        sim.set_power(&compute, PowerAction::On).await.unwrap();
        assert_eq!(sim.power_state(&compute).await.unwrap(), PowerState::On);
    }

    #[tokio::test(start_paused = true)]
    async fn firmware_update_installs_stem_reports_progress_and_skips_current() {
        let sim = SimBackend::new(SimBackendConfig::default());
        let n = target("n1");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = {
            let seen = seen.clone();
            move |p: FirmwareProgress| seen.lock().unwrap().push(p.percent)
        };
        let outcome = sim
            .update_firmware(&n, &image("BMC", "bmc-2.0.fwpkg"), &sink)
            .await
            .unwrap();
        assert!(matches!(outcome, FirmwareOutcome::Completed { .. }));
        assert_eq!(*seen.lock().unwrap(), [Some(0), Some(50), Some(100)]);
        let inv = sim.firmware_inventory(&n).await.unwrap();
        let bmc = inv.iter().find(|c| c.name == "BMC").unwrap();
        assert_eq!(bmc.version, "bmc-2.0");
        let again = sim
            .update_firmware(&n, &image("BMC", "bmc-2.0.fwpkg"), &sink)
            .await
            .unwrap();
        assert!(
            matches!(again, FirmwareOutcome::Skipped { .. }),
            "{again:?}"
        );
        let mut forced = image("BMC", "bmc-2.0.fwpkg");
        forced.force = true;
        assert!(matches!(
            sim.update_firmware(&n, &forced, &sink).await.unwrap(),
            FirmwareOutcome::Completed { .. }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn faults_apply_by_node_and_operation() {
        let sim = SimBackend::new(SimBackendConfig::default());
        sim.set_faults(vec![
            fault("bad", SimOperation::Power, SimFaultEffect::Fail),
            fault("*", SimOperation::Firmware, SimFaultEffect::Fail),
        ]);
        let bad = target("bad");
        let good = target("good");
        assert!(matches!(
            sim.set_power(&bad, PowerAction::On).await,
            Err(BackendError::Rejected(_))
        ));
        // A power fault does not touch reads.
        assert_eq!(sim.power_state(&bad).await.unwrap(), PowerState::Off);
        sim.set_power(&good, PowerAction::On).await.unwrap();
        let err = sim
            .update_firmware(&good, &image("BIOS", "bios-9.fwpkg"), &|_| {})
            .await
            .unwrap_err();
        assert!(err.is_poll_failure(), "{err:?}");
        assert_eq!(
            sim.node_firmware("rack-1", "good").unwrap()["BIOS"],
            "1.0.0"
        );
        let outcomes: Vec<_> = sim.calls().iter().map(|c| c.outcome).collect();
        assert_eq!(outcomes, ["fail", "ok", "ok", "fail"]);
    }

    #[tokio::test(start_paused = true)]
    async fn hang_never_returns_and_slow_is_ten_times_slower() {
        let sim = SimBackend::new(SimBackendConfig {
            jitter: 0.0,
            ..SimBackendConfig::default()
        });
        sim.set_faults(vec![
            fault("stuck", SimOperation::Any, SimFaultEffect::Hang),
            fault("slow", SimOperation::Power, SimFaultEffect::Slow),
        ]);
        let hung = tokio::time::timeout(
            Duration::from_secs(3600),
            sim.set_power(&target("stuck"), PowerAction::On),
        )
        .await;
        assert!(hung.is_err(), "a hang fault must never return");
        let start = tokio::time::Instant::now();
        sim.set_power(&target("slow"), PowerAction::On)
            .await
            .unwrap();
        assert_eq!(start.elapsed(), Duration::from_millis(500));
    }

    #[test]
    fn jitter_is_seeded_and_bounded() {
        for draw in [0, 1, u64::MAX, 12345, splitmix(7)] {
            let d = jittered(100, 0.2, draw);
            assert!(d >= Duration::from_millis(80) && d <= Duration::from_millis(120));
        }
        assert_eq!(jittered(0, 0.5, 99), Duration::ZERO);
        assert_eq!(fnv("r", "n", 1), fnv("r", "n", 1));
        assert_ne!(fnv("r", "n", 1), fnv("r", "n", 2));
        assert_ne!(fnv("ra", "n", 1), fnv("r", "an", 1));
    }

    #[test]
    fn config_parses_faults_and_defaults() {
        let config: SimBackendConfig = toml::from_str(
            r#"
            seed = 7
            [[faults]]
            node_id = "n1"
            operation = "firmware"
            effect = "hang"
            "#,
        )
        .unwrap();
        assert_eq!(config.seed, 7);
        assert_eq!(config.firmware_latency_ms, 500);
        assert_eq!(
            config.faults,
            [fault("n1", SimOperation::Firmware, SimFaultEffect::Hang)]
        );
        assert!(toml::from_str::<SimBackendConfig>("bogus = 1").is_err());
    }
}
