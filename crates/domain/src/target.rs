//! Target specifications: which racks / components / NVLink domains an
//! operation addresses, and the component filter of an operation run's
//! default scope.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ComponentType;

/// How a rack is named in a target.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RackIdentifier {
    Id(Uuid),
    Name(String),
    ExternalId(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RackTarget {
    pub identifier: RackIdentifier,
    /// Empty = every component type of the rack.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub component_types: Vec<ComponentType>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComponentTarget {
    Id(Uuid),
    External {
        component_type: ComponentType,
        id: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NvlDomainIdentifier {
    Id(Uuid),
    Name(String),
    ExternalId(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NvlDomainTarget {
    pub identifier: NvlDomainIdentifier,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub component_types: Vec<ComponentType>,
}

/// Exactly one kind of target list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetSpec {
    Racks(Vec<RackTarget>),
    Components(Vec<ComponentTarget>),
    NvlDomains(Vec<NvlDomainTarget>),
}

impl TargetSpec {
    /// The spec narrowed to component types `types`: each rack or domain
    /// target keeps the types of its own list that are in `types` (all of
    /// `types` when its list is empty). A target left with none, and
    /// component targets (which name components, not types), are refused.
    pub fn restricted_to_types(self, types: &[ComponentType]) -> Result<TargetSpec, String> {
        fn narrow(own: &[ComponentType], types: &[ComponentType]) -> Vec<ComponentType> {
            if own.is_empty() {
                types.to_vec()
            } else {
                own.iter().copied().filter(|t| types.contains(t)).collect()
            }
        }
        let none_left = |kind: &str, i: usize| {
            format!("{kind} target {i} names none of the filtered component types")
        };
        match self {
            TargetSpec::Racks(racks) => racks
                .into_iter()
                .enumerate()
                .map(|(i, mut r)| {
                    r.component_types = narrow(&r.component_types, types);
                    if r.component_types.is_empty() {
                        Err(none_left("rack", i))
                    } else {
                        Ok(r)
                    }
                })
                .collect::<Result<_, _>>()
                .map(TargetSpec::Racks),
            TargetSpec::NvlDomains(domains) => domains
                .into_iter()
                .enumerate()
                .map(|(i, mut d)| {
                    d.component_types = narrow(&d.component_types, types);
                    if d.component_types.is_empty() {
                        Err(none_left("NVL domain", i))
                    } else {
                        Ok(d)
                    }
                })
                .collect::<Result<_, _>>()
                .map(TargetSpec::NvlDomains),
            TargetSpec::Components(_) => Err(
                "component-type filters apply to rack and NVLink-domain targets; component \
                 targets name their components exactly"
                    .to_string(),
            ),
        }
    }

    /// The same spec with repeated targets named once (the first time):
    /// a target listed twice is one target, and a list of 10,000 copies
    /// costs what one does.
    pub fn without_repeats(self) -> TargetSpec {
        fn once<T: std::hash::Hash + Eq + Clone>(items: Vec<T>) -> Vec<T> {
            let mut seen = std::collections::HashSet::new();
            items
                .into_iter()
                .filter(|t| seen.insert(t.clone()))
                .collect()
        }
        match self {
            TargetSpec::Racks(r) => TargetSpec::Racks(once(r)),
            TargetSpec::Components(c) => TargetSpec::Components(once(c)),
            TargetSpec::NvlDomains(d) => TargetSpec::NvlDomains(once(d)),
        }
    }
}

/// Restricts the components of an operation run's default scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ComponentFilter {
    Types { types: Vec<ComponentType> },
    Components { components: Vec<Uuid> },
}

impl ComponentFilter {
    /// Whether a component of `ty` with `id` passes the filter.
    pub fn matches(&self, ty: ComponentType, id: Uuid) -> bool {
        match self {
            ComponentFilter::Types { types } => types.contains(&ty),
            ComponentFilter::Components { components } => components.contains(&id),
        }
    }

    /// Shape checks of the reference (`component filter kind "types" requires
    /// at least one type`, …).
    pub fn validate(&self) -> Result<(), String> {
        match self {
            ComponentFilter::Types { types } => {
                if types.is_empty() {
                    return Err(
                        "component filter kind \"types\" requires at least one type".to_string()
                    );
                }
                if let Some(bad) = types.iter().find(|t| **t == ComponentType::Unknown) {
                    return Err(format!(
                        "component filter kind \"types\" contains unknown type \"{}\"",
                        bad.name()
                    ));
                }
            }
            ComponentFilter::Components { components } => {
                if components.is_empty() {
                    return Err(
                        "component filter kind \"components\" requires at least one component"
                            .to_string(),
                    );
                }
                if let Some(i) = components.iter().position(Uuid::is_nil) {
                    return Err(format!("component filter components[{i}] is required"));
                }
            }
        }
        Ok(())
    }
}

impl TargetSpec {
    /// Shape validation of the reference (`validate operation: target_spec: …`
    /// is added by the caller).
    pub fn validate(&self) -> Result<(), String> {
        let empty = match self {
            TargetSpec::Racks(v) => v.is_empty(),
            TargetSpec::Components(v) => v.is_empty(),
            TargetSpec::NvlDomains(v) => v.is_empty(),
        };
        if empty {
            return Err(
                "target_spec must have exactly one of racks, nvl_domains, or components set"
                    .to_string(),
            );
        }
        match self {
            TargetSpec::Racks(racks) => {
                for rack in racks {
                    let blank = match &rack.identifier {
                        RackIdentifier::Id(id) => id.is_nil(),
                        RackIdentifier::Name(n) | RackIdentifier::ExternalId(n) => {
                            n.trim().is_empty()
                        }
                    };
                    if blank {
                        return Err(
                            "invalid rack target: rack target must have either id or name set"
                                .to_string(),
                        );
                    }
                    if rack.component_types.contains(&ComponentType::Unknown) {
                        return Err("invalid rack target: unknown component type".to_string());
                    }
                }
            }
            TargetSpec::NvlDomains(domains) => {
                for domain in domains {
                    let blank = match &domain.identifier {
                        NvlDomainIdentifier::Id(id) => id.is_nil(),
                        NvlDomainIdentifier::Name(n) | NvlDomainIdentifier::ExternalId(n) => {
                            n.trim().is_empty()
                        }
                    };
                    if blank {
                        return Err("invalid NVLink domain target: NVLink domain target must have either id or name set".to_string());
                    }
                    if domain.component_types.contains(&ComponentType::Unknown) {
                        return Err(
                            "invalid NVLink domain target: unknown component type".to_string()
                        );
                    }
                }
            }
            TargetSpec::Components(components) => {
                for component in components {
                    match component {
                        ComponentTarget::Id(id) if id.is_nil() => {
                            return Err(
                                "invalid component target: component target must have either uuid or external set"
                                    .to_string(),
                            );
                        }
                        ComponentTarget::External { id, .. } if id.trim().is_empty() => {
                            return Err("invalid component target: invalid external ref: external ref must have an id".to_string());
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod repeat_tests {
    use super::*;

    #[test]
    fn repeated_targets_are_named_once_in_first_order() {
        let a = ComponentTarget::Id(uuid::Uuid::from_u128(1));
        let b = ComponentTarget::External {
            component_type: crate::ComponentType::Compute,
            id: "c-1".into(),
        };
        let spec =
            TargetSpec::Components(vec![b.clone(), a.clone(), b.clone(), a.clone(), b.clone()]);
        assert_eq!(spec.without_repeats(), TargetSpec::Components(vec![b, a]));
        let many = TargetSpec::Racks(vec![
            RackTarget {
                identifier: RackIdentifier::Name("r".into()),
                component_types: vec![],
            };
            10_000
        ]);
        let TargetSpec::Racks(once) = many.without_repeats() else {
            unreachable!()
        };
        assert_eq!(once.len(), 1);
    }

    #[test]
    fn type_restriction_narrows_each_rack_or_domain_target() {
        use ComponentType::{Compute, NvSwitch, PowerShelf};
        let rack = |types: Vec<ComponentType>| RackTarget {
            identifier: RackIdentifier::Name("r".into()),
            component_types: types,
        };
        let spec = TargetSpec::Racks(vec![rack(vec![]), rack(vec![Compute, PowerShelf])]);
        assert_eq!(
            spec.restricted_to_types(&[Compute, NvSwitch]),
            Ok(TargetSpec::Racks(vec![
                rack(vec![Compute, NvSwitch]),
                rack(vec![Compute])
            ]))
        );
        let err = TargetSpec::Racks(vec![rack(vec![PowerShelf])])
            .restricted_to_types(&[Compute])
            .unwrap_err();
        assert!(err.contains("rack target 0 names none"), "{err}");
        let domain = TargetSpec::NvlDomains(vec![NvlDomainTarget {
            identifier: NvlDomainIdentifier::Name("d".into()),
            component_types: vec![],
        }]);
        assert!(matches!(
            domain.restricted_to_types(&[NvSwitch]),
            Ok(TargetSpec::NvlDomains(d)) if d[0].component_types == [NvSwitch]
        ));
        assert!(
            TargetSpec::Components(vec![ComponentTarget::Id(Uuid::nil())])
                .restricted_to_types(&[Compute])
                .is_err()
        );
    }
}
