//! The sim provider's configuration (`[sim]` in the server's TOML) and its
//! fault plan (`[[sim.faults]]`).

use rackflow_domain::ComponentType;
use serde::{Deserialize, Serialize};

use crate::manager::ComponentRef;

/// Latency, jitter, seed and injected faults of the simulated fleet.
/// Every field is optional in TOML.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimConfig {
    /// Seed of the latency jitter: the same seed and the same calls give the
    /// same latencies.
    pub seed: u64,
    /// Time from starting a firmware update to its end.
    pub firmware_update_ms: u64,
    /// Time a power operation takes. Status reads and firmware starts take a
    /// tenth of it (a short call), so a zero here means no sleeping at all.
    pub power_ms: u64,
    /// Relative latency spread: each latency is `base × (1 ± jitter)`.
    pub jitter: f64,
    /// Time from a decommission request to the component reporting
    /// `Decommissioned` (it passes through `Decommissioning/Draining`).
    pub decommission_ms: u64,
    /// The newest firmware the simulated manager has: what an update that
    /// names no version (or `latest`) installs, and what it then reads
    /// back — a concrete version, never the word "latest".
    pub latest_firmware_version: String,
    pub faults: Vec<SimFault>,
    /// Components (external ids) whose leak detector reports a coolant leak
    /// from the start (`SimAdmin.SetLeak` changes it at run time).
    pub leaks: Vec<String>,
}

/// Default of [`SimConfig::latest_firmware_version`]: one step above the
/// version every simulated component starts at (1.0.0).
pub const DEFAULT_LATEST_FIRMWARE_VERSION: &str = "1.1.0";

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 7,
            firmware_update_ms: 2000,
            power_ms: 200,
            jitter: 0.2,
            decommission_ms: 3000,
            latest_firmware_version: DEFAULT_LATEST_FIRMWARE_VERSION.to_string(),
            faults: Vec::new(),
            leaks: Vec::new(),
        }
    }
}

impl SimConfig {
    /// No latency at all: for tests that only care about outcomes.
    pub fn instant() -> Self {
        SimConfig {
            firmware_update_ms: 0,
            power_ms: 0,
            jitter: 0.0,
            decommission_ms: 0,
            ..SimConfig::default()
        }
    }
}

/// Which calls a fault applies to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultOperation {
    Firmware,
    Power,
    /// Expectation injection (ingest).
    Ingest,
    Decommission,
    #[default]
    Any,
}

impl FaultOperation {
    pub fn as_str(self) -> &'static str {
        match self {
            FaultOperation::Firmware => "firmware",
            FaultOperation::Power => "power",
            FaultOperation::Ingest => "ingest",
            FaultOperation::Decommission => "decommission",
            FaultOperation::Any => "any",
        }
    }

    /// `firmware`, `power`, `ingest`, `decommission`, `any`; empty = any.
    pub fn parse(text: &str) -> Option<FaultOperation> {
        match text.trim().to_ascii_lowercase().as_str() {
            "firmware" => Some(FaultOperation::Firmware),
            "power" => Some(FaultOperation::Power),
            "ingest" => Some(FaultOperation::Ingest),
            "decommission" => Some(FaultOperation::Decommission),
            "any" | "" => Some(FaultOperation::Any),
            _ => None,
        }
    }
}

/// What a matching fault does to a call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultEffect {
    /// Power calls return an error; firmware updates end `Failed`.
    #[default]
    Fail,
    /// Power calls never return (until cancelled); firmware updates stay
    /// `Verifying` for ever.
    Hang,
    /// Ten times the latency.
    Slow,
    /// Firmware updates report `Completed` but the installed version stays
    /// the old one (a tray that silently ignores its image); power calls are
    /// unaffected.
    Stale,
}

impl FaultEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            FaultEffect::Fail => "fail",
            FaultEffect::Hang => "hang",
            FaultEffect::Slow => "slow",
            FaultEffect::Stale => "stale",
        }
    }

    /// `fail`, `hang`, `slow`, `stale`; empty = fail.
    pub fn parse(text: &str) -> Option<FaultEffect> {
        match text.trim().to_ascii_lowercase().as_str() {
            "fail" | "" => Some(FaultEffect::Fail),
            "hang" => Some(FaultEffect::Hang),
            "slow" => Some(FaultEffect::Slow),
            "stale" => Some(FaultEffect::Stale),
            _ => None,
        }
    }
}

/// One injected fault. A fault matches a call on a component when every
/// field it sets matches; unset fields match anything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimFault {
    /// The component's rack, compared with [`ComponentRef::rack`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub component_type: Option<ComponentType>,
    /// A component external id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
    pub operation: FaultOperation,
    pub effect: FaultEffect,
}

/// Kind of simulated call, for fault matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallKind {
    Power,
    Firmware,
    Ingest,
    Decommission,
}

impl SimFault {
    pub(crate) fn matches(&self, component: &ComponentRef, kind: CallKind) -> bool {
        let operation_matches = match self.operation {
            FaultOperation::Any => true,
            FaultOperation::Power => kind == CallKind::Power,
            FaultOperation::Firmware => kind == CallKind::Firmware,
            FaultOperation::Ingest => kind == CallKind::Ingest,
            FaultOperation::Decommission => kind == CallKind::Decommission,
        };
        operation_matches
            && self.rack.as_ref().is_none_or(|r| *r == component.rack)
            && self
                .component_type
                .is_none_or(|t| t == component.component_type)
            && self
                .component
                .as_ref()
                .is_none_or(|c| *c == component.external_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_section_with_defaults() {
        #[derive(Deserialize)]
        struct File {
            sim: SimConfig,
        }
        let file: File = toml::from_str(
            r#"
            [sim]
            power_ms = 50

            [[sim.faults]]
            component_type = "compute"
            operation = "firmware"
            effect = "hang"

            [[sim.faults]]
            rack = "rack-7"
            "#,
        )
        .unwrap();
        let config = file.sim;
        assert_eq!(config.seed, 7);
        assert_eq!(config.power_ms, 50);
        assert_eq!(config.firmware_update_ms, 2000);
        assert_eq!(config.faults.len(), 2);
        assert_eq!(
            config.faults[0].component_type,
            Some(ComponentType::Compute)
        );
        assert_eq!(config.faults[0].effect, FaultEffect::Hang);
        assert_eq!(config.faults[1].operation, FaultOperation::Any);
        assert_eq!(config.faults[1].effect, FaultEffect::Fail);
        let empty: File = toml::from_str("[sim]").unwrap();
        assert_eq!(empty.sim, SimConfig::default());
        assert!(toml::from_str::<File>("[sim]\nbogus = 1").is_err());
    }
}
