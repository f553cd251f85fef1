//! Resolution of target specifications against the inventory: racks by id,
//! name or external id; components by UUID, external id or BMC MAC. Shared by
//! operation-run planning and task submission.

use rackflow_domain::inventory::{Component, NvlDomain, Rack};
use rackflow_domain::planner::{CandidateEntry, PlanError};
use rackflow_domain::run::Page;
use rackflow_domain::target::{ComponentTarget, NvlDomainIdentifier, RackIdentifier, TargetSpec};
use rackflow_domain::{ComponentType, ComponentsByType};
use rackflow_store::{ComponentFilterQuery, Store};

use uuid::Uuid;

use crate::error::LookupKind;

/// A planning failure before it is wrapped with its pipeline step.
pub struct LookupError {
    pub kind: LookupKind,
    pub message: String,
}

impl LookupError {
    pub fn other(message: impl Into<String>) -> Self {
        LookupError {
            kind: LookupKind::Other,
            message: message.into(),
        }
    }

    pub fn wrap(self, context: &str) -> Self {
        LookupError {
            kind: self.kind,
            message: format!("{context}: {}", self.message),
        }
    }
}

impl From<rackflow_store::StoreError> for LookupError {
    /// The database's own text goes to the log under a correlation id; the
    /// caller's answer (this message) names the id only.
    fn from(e: rackflow_store::StoreError) -> Self {
        let correlation = Uuid::new_v4();
        tracing::error!(error = %e, %correlation, "inventory lookup failed in the database");
        LookupError {
            kind: if e.is_unavailable() {
                LookupKind::Unavailable
            } else {
                LookupKind::Other
            },
            message: format!(
                "the database failed (correlation id {correlation}); the server log has the detail"
            ),
        }
    }
}

impl From<PlanError> for LookupError {
    fn from(e: PlanError) -> Self {
        LookupError::other(e.to_string())
    }
}

pub async fn resolve_spec(
    store: &dyn Store,
    spec: &TargetSpec,
) -> Result<Vec<CandidateEntry>, LookupError> {
    match spec {
        TargetSpec::Racks(targets) => {
            let mut out = Vec::new();
            for (i, target) in targets.iter().enumerate() {
                let wrap = |e: LookupError| e.wrap(&format!("rack target {i}"));
                let rack = resolve_rack(store, &target.identifier)
                    .await
                    .map_err(wrap)?;
                out.extend(
                    rack_entries(store, &[rack.id], &target.component_types)
                        .await
                        .map_err(|e| wrap(e.into()))?,
                );
            }
            Ok(out)
        }
        TargetSpec::Components(targets) => {
            // Targets by UUID are read in one query (a child task of a run
            // names every component of its rack this way); external refs
            // one by one.
            let ids: Vec<Uuid> = targets
                .iter()
                .filter_map(|t| match t {
                    ComponentTarget::Id(id) => Some(*id),
                    ComponentTarget::External { .. } => None,
                })
                .collect();
            let by_id: std::collections::HashMap<Uuid, Component> = if ids.is_empty() {
                Default::default()
            } else {
                let query = ComponentFilterQuery {
                    ids: ids.clone(),
                    ..Default::default()
                };
                store
                    .component_list(
                        &query,
                        Page {
                            offset: 0,
                            limit: 0,
                        },
                    )
                    .await?
                    .0
                    .into_iter()
                    .map(|c| (c.id, c))
                    .collect()
            };
            let mut out = Vec::new();
            for (i, target) in targets.iter().enumerate() {
                let component = match target {
                    ComponentTarget::Id(id) => by_id.get(id).cloned().ok_or_else(|| LookupError {
                        kind: LookupKind::NotFound,
                        message: format!("component {id} not found"),
                    }),
                    ComponentTarget::External { .. } => resolve_component(store, target).await,
                }
                .map_err(|e| e.wrap(&format!("component target {i}")))?;
                let Some(rack_id) = component.rack_id else {
                    return Err(LookupError::other(format!(
                        "component target {i} component {} is not assigned to a rack",
                        component.id
                    )));
                };
                let mut set = ComponentsByType::new();
                set.push(component.component_type, component.id);
                out.push(CandidateEntry {
                    rack_id,
                    components: set,
                });
            }
            Ok(out)
        }
        TargetSpec::NvlDomains(targets) => {
            // A domain stands for its member racks now (with the target's
            // type filter); a domain without racks is refused, as an empty
            // rack list is (INVALID_ARGUMENT).
            let mut out = Vec::new();
            for (i, target) in targets.iter().enumerate() {
                let wrap = |e: LookupError| e.wrap(&format!("NVLink domain target {i}"));
                let racks = domain_racks(store, &target.identifier)
                    .await
                    .map_err(wrap)?;
                let ids: Vec<Uuid> = racks.iter().map(|r| r.id).collect();
                out.extend(
                    rack_entries(store, &ids, &target.component_types)
                        .await
                        .map_err(|e| wrap(e.into()))?,
                );
            }
            Ok(out)
        }
    }
}

/// The candidate entry of each of `rack_ids` (in that order) with its
/// components of `types` (all types when empty), from one read; racks
/// left with no component are left out.
async fn rack_entries(
    store: &dyn Store,
    rack_ids: &[Uuid],
    types: &[ComponentType],
) -> rackflow_store::StoreResult<Vec<CandidateEntry>> {
    let mut by_rack: std::collections::HashMap<Uuid, Vec<Component>> =
        std::collections::HashMap::new();
    for c in store.components_of_racks(rack_ids).await? {
        if let Some(rack_id) = c.rack_id {
            by_rack.entry(rack_id).or_default().push(c);
        }
    }
    Ok(rack_ids
        .iter()
        .filter_map(|id| {
            let components = by_rack.remove(id).unwrap_or_default();
            let set = filter_by_types(&components, types);
            (!set.is_empty()).then_some(CandidateEntry {
                rack_id: *id,
                components: set,
            })
        })
        .collect())
}

/// A domain's member racks (by name); a domain without racks is refused
/// as an empty rack list is ([`LookupKind::Empty`]).
pub async fn domain_racks(
    store: &dyn Store,
    identifier: &NvlDomainIdentifier,
) -> Result<Vec<Rack>, LookupError> {
    let domain = resolve_nvl_domain(store, identifier).await?;
    let racks = store.racks_of_nvl_domains(&[domain.id]).await?;
    if racks.is_empty() {
        return Err(LookupError {
            kind: LookupKind::Empty,
            message: format!("NVLink domain {} has no racks", domain.label()),
        });
    }
    Ok(racks)
}

/// The NVLink domain an identifier names (deleted ones are gone).
pub async fn resolve_nvl_domain(
    store: &dyn Store,
    identifier: &NvlDomainIdentifier,
) -> Result<NvlDomain, LookupError> {
    let (found, what) = match identifier {
        NvlDomainIdentifier::Id(id) => (store.nvl_domain_get(*id).await?, id.to_string()),
        NvlDomainIdentifier::Name(name) => (
            store.nvl_domain_get_by_name(name).await?,
            format!("name={name}"),
        ),
        NvlDomainIdentifier::ExternalId(ext) => (
            store.nvl_domain_get_by_external_id(ext).await?,
            format!("external_id={ext}"),
        ),
    };
    found.ok_or_else(|| LookupError {
        kind: LookupKind::NotFound,
        message: format!("NVLink domain {what} not found"),
    })
}

/// [`resolve_spec`] without a read, for a target naming components by id
/// when the components of the one rack they must be on are at hand (a
/// run's child task): the same entries, or `None` when the target is of
/// another kind or names a component not among `components` (the general
/// lookup then answers, with its errors).
pub fn ids_on_rack(
    spec: &TargetSpec,
    rack_id: Uuid,
    components: &[Component],
) -> Option<Vec<CandidateEntry>> {
    let TargetSpec::Components(targets) = spec else {
        return None;
    };
    let by_id: std::collections::HashMap<Uuid, &Component> =
        components.iter().map(|c| (c.id, c)).collect();
    targets
        .iter()
        .map(|target| {
            let ComponentTarget::Id(id) = target else {
                return None;
            };
            let component = by_id.get(id)?;
            let mut set = ComponentsByType::new();
            set.push(component.component_type, component.id);
            Some(CandidateEntry {
                rack_id,
                components: set,
            })
        })
        .collect()
}

pub async fn resolve_rack(
    store: &dyn Store,
    identifier: &RackIdentifier,
) -> Result<Rack, LookupError> {
    let not_found = |what: String| LookupError {
        kind: LookupKind::NotFound,
        message: format!("rack {what} not found"),
    };
    match identifier {
        RackIdentifier::Id(id) => store
            .rack_get(*id, false)
            .await?
            .ok_or_else(|| not_found(id.to_string())),
        RackIdentifier::ExternalId(ext) => store
            .rack_get_by_external_id(ext)
            .await?
            .ok_or_else(|| not_found(format!("external_id={ext}"))),
        RackIdentifier::Name(name) => {
            let mut racks = store.rack_get_by_name(name).await?;
            match racks.len() {
                0 => Err(not_found(format!("name={name}"))),
                1 => Ok(racks.remove(0)),
                _ => Err(LookupError {
                    kind: LookupKind::Ambiguous,
                    message: format!("rack name={name} is ambiguous"),
                }),
            }
        }
    }
}

pub async fn resolve_component(
    store: &dyn Store,
    target: &ComponentTarget,
) -> Result<Component, LookupError> {
    match target {
        ComponentTarget::Id(id) => store.component_get(*id).await?.ok_or_else(|| LookupError {
            kind: LookupKind::NotFound,
            message: format!("component {id} not found"),
        }),
        ComponentTarget::External { component_type, id } => {
            let found = match rackflow_domain::inventory::normalize_mac(id) {
                Some(mac) => store.components_by_bmc_mac(&mac).await?,
                None => {
                    let query = ComponentFilterQuery {
                        external_ids: vec![id.clone()],
                        ..Default::default()
                    };
                    store
                        .component_list(
                            &query,
                            Page {
                                offset: 0,
                                limit: 0,
                            },
                        )
                        .await?
                        .0
                }
            };
            let mut matches: Vec<Component> = found
                .into_iter()
                .filter(|c| {
                    *component_type == ComponentType::Unknown || c.component_type == *component_type
                })
                .collect();
            match matches.len() {
                0 => Err(LookupError {
                    kind: LookupKind::NotFound,
                    message: format!("component external_id={id} not found"),
                }),
                1 => Ok(matches.remove(0)),
                _ => Err(LookupError {
                    kind: LookupKind::Ambiguous,
                    message: format!("component external_id={id} is ambiguous"),
                }),
            }
        }
    }
}

/// The components of one rack whose type is in `types` (all when empty).
fn filter_by_types(components: &[Component], types: &[ComponentType]) -> ComponentsByType {
    let mut set = ComponentsByType::new();
    for c in components {
        if types.is_empty() || types.contains(&c.component_type) {
            set.push(c.component_type, c.id);
        }
    }
    set
}
