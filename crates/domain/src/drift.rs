//! Expected-vs-actual drift of components (`ValidateComponents`, issue 12
//! item 4): Flow's inventory is what is expected; what the component
//! manager's own inventory reports (a rack manager's nodes) is what is
//! actual. A linked component (one with an external id) the manager does
//! not have is MISSING, a node Flow does not know is UNEXPECTED, and a pair
//! whose type, rack or BMC differ is a MISMATCH with field-level diffs.

use std::collections::{HashMap, HashSet};

use uuid::Uuid;

use crate::ComponentType;
use crate::inventory::Component;

named_enum!(
    /// Kind of a difference. Numbers are the wire `DiffType` values.
    DiffType {
        Missing = 1 => "missing",
        Unexpected = 2 => "unexpected",
        Mismatch = 3 => "mismatch",
    }
);

/// One node as the component manager reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActualNode {
    /// The manager's rack id (Flow's rack external id, else its name).
    pub rack: String,
    /// The manager's node id (Flow's component external id).
    pub node_id: String,
    /// The component type its node type implies, when it implies one.
    pub component_type: Option<ComponentType>,
    pub bmc_ip: Option<String>,
    pub bmc_mac: Option<String>,
}

/// One component as Flow's inventory has it, with its rack's manager id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedComponent {
    pub rack: String,
    pub component: Component,
}

/// One field that differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDiff {
    pub field: &'static str,
    pub expected: String,
    pub actual: String,
}

/// One difference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentDiff {
    pub diff_type: DiffType,
    /// The external id / node id it is about.
    pub component_id: String,
    pub expected: Option<ExpectedComponent>,
    pub actual: Option<ActualNode>,
    pub field_diffs: Vec<FieldDiff>,
    /// Flow's id of the component (unset for an unexpected node).
    pub id: Option<Uuid>,
    /// The BMC MAC the difference is reported by.
    pub mac_address: String,
}

/// The whole comparison.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriftReport {
    /// Missing, then unexpected, then mismatched, each in id order.
    pub diffs: Vec<ComponentDiff>,
    /// Linked components that match their node.
    pub matches: usize,
}

impl DriftReport {
    pub fn count(&self, diff_type: DiffType) -> usize {
        self.diffs
            .iter()
            .filter(|d| d.diff_type == diff_type)
            .count()
    }
}

/// Why a comparison cannot be reported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriftError {
    /// The reference reports a missing component by its BMC MAC.
    #[error(
        "component {component} is missing from the component manager's inventory and has no BMC MAC address to report it by"
    )]
    MissingWithoutMac { component: String },
}

fn first_mac(c: &Component) -> Option<&str> {
    c.bmcs
        .first()
        .map(|b| b.mac_address.as_str())
        .filter(|m| !m.is_empty())
}

fn first_ip(c: &Component) -> Option<&str> {
    c.bmcs
        .first()
        .and_then(|b| b.ip_address.as_deref())
        .filter(|ip| !ip.is_empty())
}

/// Compares `expected` with `actual`. Components without an external id
/// are not linked to any real inventory and are left out. A node is
/// unexpected only when `scope` (the manager rack ids asked about) contains
/// its rack, or when there is no scope. Nodes are matched to components by
/// node id = external id.
pub fn compare(
    expected: &[ExpectedComponent],
    actual: &[ActualNode],
    scope: Option<&HashSet<String>>,
) -> Result<DriftReport, DriftError> {
    let nodes: HashMap<&str, &ActualNode> =
        actual.iter().map(|n| (n.node_id.as_str(), n)).collect();
    let mut known: HashSet<&str> = HashSet::new();
    let mut missing = Vec::new();
    let mut mismatched = Vec::new();
    let mut matches = 0;
    for e in expected {
        let c = &e.component;
        let Some(external_id) = c.external_id.as_deref().filter(|s| !s.is_empty()) else {
            continue;
        };
        known.insert(external_id);
        let Some(node) = nodes.get(external_id) else {
            let Some(mac) = first_mac(c) else {
                return Err(DriftError::MissingWithoutMac {
                    component: external_id.to_string(),
                });
            };
            missing.push(ComponentDiff {
                diff_type: DiffType::Missing,
                component_id: external_id.to_string(),
                expected: Some(e.clone()),
                actual: None,
                field_diffs: Vec::new(),
                id: Some(c.id),
                mac_address: mac.to_string(),
            });
            continue;
        };
        let mut fields = Vec::new();
        let mut differ = |field: &'static str, expected: &str, actual: &str| {
            if expected != actual {
                fields.push(FieldDiff {
                    field,
                    expected: expected.to_string(),
                    actual: actual.to_string(),
                });
            }
        };
        if let Some(ty) = node.component_type {
            differ("type", c.component_type.name(), ty.name());
        }
        differ("rack_id", &e.rack, &node.rack);
        if let Some(ip) = node.bmc_ip.as_deref().filter(|s| !s.is_empty()) {
            differ("bmcs.ip_address", first_ip(c).unwrap_or_default(), ip);
        }
        if let Some(mac) = node.bmc_mac.as_deref().filter(|s| !s.is_empty()) {
            let normalized =
                crate::inventory::normalize_mac(mac).unwrap_or_else(|| mac.to_string());
            differ(
                "bmcs.mac_address",
                first_mac(c).unwrap_or_default(),
                &normalized,
            );
        }
        if fields.is_empty() {
            matches += 1;
        } else {
            mismatched.push(ComponentDiff {
                diff_type: DiffType::Mismatch,
                component_id: external_id.to_string(),
                expected: Some(e.clone()),
                actual: Some((*node).clone()),
                field_diffs: fields,
                id: Some(c.id),
                mac_address: first_mac(c).unwrap_or_default().to_string(),
            });
        }
    }
    let mut unexpected: Vec<ComponentDiff> = actual
        .iter()
        .filter(|n| !known.contains(n.node_id.as_str()))
        .filter(|n| scope.is_none_or(|racks| racks.contains(&n.rack)))
        .map(|n| ComponentDiff {
            diff_type: DiffType::Unexpected,
            component_id: n.node_id.clone(),
            expected: None,
            actual: Some(n.clone()),
            field_diffs: Vec::new(),
            id: None,
            mac_address: n.bmc_mac.clone().unwrap_or_default(),
        })
        .collect();
    for list in [&mut missing, &mut unexpected, &mut mismatched] {
        list.sort_by(|a, b| a.component_id.cmp(&b.component_id));
    }
    let mut diffs = missing;
    diffs.extend(unexpected);
    diffs.extend(mismatched);
    Ok(DriftReport { diffs, matches })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::{Bmc, BmcType, Position};

    fn component(
        ext: Option<&str>,
        ty: ComponentType,
        mac: Option<&str>,
        ip: Option<&str>,
    ) -> ExpectedComponent {
        let now = chrono::Utc::now();
        ExpectedComponent {
            rack: "r-1".into(),
            component: Component {
                id: Uuid::new_v4(),
                rack_id: None,
                component_type: ty,
                name: String::new(),
                manufacturer: String::new(),
                model: None,
                serial_number: String::new(),
                description: None,
                firmware_version: String::new(),
                position: Position::default(),
                bmcs: mac
                    .map(|m| Bmc {
                        bmc_type: BmcType::Host,
                        mac_address: m.into(),
                        ip_address: ip.map(str::to_string),
                    })
                    .into_iter()
                    .collect(),
                external_id: ext.map(str::to_string),
                power_state: None,
                firmware_observed_at: None,
                power_observed_at: None,
                operational: None,
                leak: None,
                leak_handling: None,
                created_at: now,
                updated_at: now,
                deleted_at: None,
            },
        }
    }

    fn node(rack: &str, id: &str, ty: ComponentType, ip: &str, mac: &str) -> ActualNode {
        ActualNode {
            rack: rack.into(),
            node_id: id.into(),
            component_type: Some(ty),
            bmc_ip: Some(ip.into()),
            bmc_mac: Some(mac.into()),
        }
    }

    #[test]
    fn missing_unexpected_mismatched_and_matching_components() {
        use ComponentType::*;
        let expected = vec![
            component(
                Some("c0"),
                Compute,
                Some("02:00:00:00:00:01"),
                Some("10.0.0.1"),
            ),
            component(
                Some("c1"),
                Compute,
                Some("02:00:00:00:00:02"),
                Some("10.0.0.2"),
            ),
            component(
                Some("s0"),
                NvSwitch,
                Some("02:00:00:00:00:03"),
                Some("10.0.0.3"),
            ),
            // Not linked: never compared.
            component(None, PowerShelf, None, None),
        ];
        let actual = vec![
            node("r-1", "c0", Compute, "10.0.0.1", "02:00:00:00:00:01"),
            // Another IP and the wrong type.
            node("r-1", "c1", NvSwitch, "10.0.0.99", "02-00-00-00-00-02"),
            node("r-1", "x9", Compute, "10.0.0.9", "02:00:00:00:00:09"),
            // Outside the scope asked about: not unexpected.
            node("r-2", "y1", Compute, "10.0.1.1", "02:00:00:00:01:01"),
        ];
        let scope: HashSet<String> = ["r-1".to_string()].into();
        let report = compare(&expected, &actual, Some(&scope)).unwrap();
        assert_eq!(report.matches, 1);
        let kinds: Vec<(DiffType, &str)> = report
            .diffs
            .iter()
            .map(|d| (d.diff_type, d.component_id.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                (DiffType::Missing, "s0"),
                (DiffType::Unexpected, "x9"),
                (DiffType::Mismatch, "c1"),
            ]
        );
        assert_eq!(report.diffs[0].mac_address, "02:00:00:00:00:03");
        assert_eq!(report.diffs[1].mac_address, "02:00:00:00:00:09");
        assert_eq!(
            report.diffs[2].field_diffs,
            [
                FieldDiff {
                    field: "type",
                    expected: "Compute".into(),
                    actual: "NVSwitch".into()
                },
                FieldDiff {
                    field: "bmcs.ip_address",
                    expected: "10.0.0.2".into(),
                    actual: "10.0.0.99".into()
                },
            ],
            "the MAC differs only in notation"
        );
        // Without a scope every unknown node is unexpected.
        let all = compare(&expected, &actual, None).unwrap();
        assert_eq!(all.count(DiffType::Unexpected), 2);
    }

    #[test]
    fn a_missing_component_without_a_mac_cannot_be_reported() {
        let expected = vec![component(Some("c0"), ComponentType::Compute, None, None)];
        assert_eq!(
            compare(&expected, &[], None),
            Err(DriftError::MissingWithoutMac {
                component: "c0".into()
            })
        );
    }

    #[test]
    fn a_node_in_another_rack_is_a_rack_mismatch() {
        let expected = vec![component(
            Some("c0"),
            ComponentType::Compute,
            Some("02:00:00:00:00:01"),
            None,
        )];
        let actual = vec![ActualNode {
            rack: "r-7".into(),
            node_id: "c0".into(),
            component_type: None,
            bmc_ip: None,
            bmc_mac: None,
        }];
        let report = compare(&expected, &actual, None).unwrap();
        assert_eq!(report.count(DiffType::Mismatch), 1);
        assert_eq!(
            report.diffs[0].field_diffs,
            [FieldDiff {
                field: "rack_id",
                expected: "r-1".into(),
                actual: "r-7".into()
            }]
        );
    }
}
