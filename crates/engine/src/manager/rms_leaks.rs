//! Flow's leak source on the rack manager (issue 34): every detection pass
//! asks the rack manager for the leak detectors of every node it knows
//! (`rackflow.rms.v1.RackManagerExtensions/ListLeakDetectors`, which reads
//! the BMCs' Redfish `LeakDetection`), and turns each node's detectors into
//! one sighting of the component whose external id is the node id (the
//! provider's mapping, see [`super::rms`]).
//!
//! A node is *leaking* when any detector reads `WARNING` or `CRITICAL`
//! (severity: the worst), *dry* when none does and at least one reads `OK`.
//! A node the rack manager could not read, whose BMC exposes no leak
//! detection, or whose detectors all read no state gives no sighting: an
//! unreachable BMC must never close an open leak.

use rackflow_api::rms_ext::v1 as pb;
use rackflow_api::rms_ext::v1::rack_manager_extensions_client::RackManagerExtensionsClient;
use rackflow_domain::event_rule::Severity;
use rackflow_domain::leak::MAX_MESSAGE_BYTES;
use tonic::transport::Channel;

use crate::leaks::{LeakSource, Sighting};

/// The `source` of the reports this source makes.
pub const SOURCE: &str = "rack-manager";

/// Reads the BMCs' leak detectors through the rack manager.
#[derive(Clone)]
pub struct RmsLeakSource {
    client: RackManagerExtensionsClient<Channel>,
    address: String,
}

impl RmsLeakSource {
    pub(crate) fn new(channel: Channel, address: String) -> Self {
        RmsLeakSource {
            client: RackManagerExtensionsClient::new(channel),
            address,
        }
    }
}

#[async_trait::async_trait]
impl LeakSource for RmsLeakSource {
    fn name(&self) -> &str {
        SOURCE
    }

    async fn sightings(&self) -> Result<Vec<Sighting>, String> {
        let nodes = self
            .client
            .clone()
            .list_leak_detectors(pb::ListLeakDetectorsRequest::default())
            .await
            .map_err(|status| {
                format!(
                    "ListLeakDetectors at {}: {}",
                    self.address,
                    status.message()
                )
            })?
            .into_inner()
            .nodes;
        for node in nodes.iter().filter(|n| !n.error.is_empty()) {
            tracing::warn!(rack = %node.rack_id, node = %node.node_id, error = %node.error, "the rack manager could not read a node's leak detectors");
        }
        Ok(nodes.iter().filter_map(sighting_of).collect())
    }
}

/// The sighting one node's detectors make, if they make one.
pub fn sighting_of(node: &pb::NodeLeakDetectors) -> Option<Sighting> {
    if !node.error.is_empty() || !node.supported {
        return None;
    }
    let state = |d: &pb::LeakDetectorReading| {
        pb::LeakDetectorState::try_from(d.state).unwrap_or(pb::LeakDetectorState::Unspecified)
    };
    let wet: Vec<&pb::LeakDetectorReading> = node
        .detectors
        .iter()
        .filter(|d| {
            matches!(
                state(d),
                pb::LeakDetectorState::Warning | pb::LeakDetectorState::Critical
            )
        })
        .collect();
    if wet.is_empty() {
        let any_dry = node
            .detectors
            .iter()
            .any(|d| state(d) == pb::LeakDetectorState::Ok);
        return any_dry.then(|| Sighting {
            external_id: node.node_id.clone(),
            leaking: false,
            severity: Severity::Info,
            message: String::new(),
        });
    }
    let critical = wet
        .iter()
        .any(|d| state(d) == pb::LeakDetectorState::Critical);
    let readings: Vec<String> = wet
        .iter()
        .map(|d| {
            let level = if state(d) == pb::LeakDetectorState::Critical {
                "Critical"
            } else {
                "Warning"
            };
            format!("{} (chassis {}) {level}", d.id, d.chassis_id)
        })
        .collect();
    Some(Sighting {
        external_id: node.node_id.clone(),
        leaking: true,
        severity: if critical {
            Severity::Critical
        } else {
            Severity::Warning
        },
        message: rackflow_domain::prefix_within(
            &format!(
                "BMC leak detectors of node {} in rack {}: {}",
                node.node_id,
                node.rack_id,
                readings.join(", ")
            ),
            MAX_MESSAGE_BYTES,
        )
        .to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detector(id: &str, state: pb::LeakDetectorState) -> pb::LeakDetectorReading {
        pb::LeakDetectorReading {
            id: id.into(),
            chassis_id: "Tray".into(),
            state: state as i32,
            ..Default::default()
        }
    }

    fn node(detectors: Vec<pb::LeakDetectorReading>) -> pb::NodeLeakDetectors {
        pb::NodeLeakDetectors {
            rack_id: "r1".into(),
            node_id: "c-0".into(),
            supported: true,
            detectors,
            error: String::new(),
        }
    }

    use pb::LeakDetectorState::{Critical, Ok as Dry, Unspecified, Warning};

    #[test]
    fn the_worst_wet_detector_sets_the_severity_and_all_are_named() {
        let s = sighting_of(&node(vec![
            detector("A", Dry),
            detector("B", Warning),
            detector("C", Critical),
        ]))
        .unwrap();
        assert!(s.leaking);
        assert_eq!(s.external_id, "c-0");
        assert_eq!(s.severity, Severity::Critical);
        assert_eq!(
            s.message,
            "BMC leak detectors of node c-0 in rack r1: B (chassis Tray) Warning, C (chassis Tray) Critical"
        );
        let warning = sighting_of(&node(vec![detector("B", Warning)])).unwrap();
        assert_eq!(warning.severity, Severity::Warning);
    }

    #[test]
    fn dry_needs_a_detector_that_reads_ok() {
        let dry = sighting_of(&node(vec![detector("A", Dry), detector("B", Unspecified)]));
        assert!(dry.is_some_and(|s| !s.leaking));
        assert_eq!(sighting_of(&node(vec![detector("A", Unspecified)])), None);
        assert_eq!(sighting_of(&node(Vec::new())), None);
        let mut unknown_state = detector("A", Dry);
        unknown_state.state = 77;
        assert_eq!(sighting_of(&node(vec![unknown_state])), None);
    }

    #[test]
    fn an_unread_or_unsupported_node_never_closes_a_leak() {
        let mut failed = node(vec![detector("A", Dry)]);
        failed.error = "BMC unreachable".into();
        assert_eq!(sighting_of(&failed), None);
        let mut unsupported = node(vec![detector("A", Dry)]);
        unsupported.supported = false;
        assert_eq!(sighting_of(&unsupported), None);
    }

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let many: Vec<_> = (0..200)
            .map(|i| detector(&format!("détecteur-{i}"), Critical))
            .collect();
        let s = sighting_of(&node(many)).unwrap();
        assert!(s.message.len() <= MAX_MESSAGE_BYTES);
        assert!(s.message.starts_with("BMC leak detectors of node c-0"));
    }
}
