//! Inventory messages: racks, components and BMCs.

use chrono::Utc;
use rackflow_api::v1 as pb;
use rackflow_domain::ComponentType;
use rackflow_domain::inventory::{
    Bmc, BmcType, Component, LeakStatus, LifecycleStatus, Location, NvlDomain, OperationalState,
    OperationalStatus, Phase, Position, Rack, RackLabels, normalize_mac,
};
use rackflow_engine::inventory::{ComponentQuery, NvlinkDomainView, RackRef};
use rackflow_engine::store::{
    ComponentFilterQuery, ComponentPatch, InventoryColumn, ListOrder, RackFilter, RackPatch,
    TextFilter,
};
use uuid::Uuid;

use super::{Checked, Invalid, invalid, parse_uuid, pb_uuid};

fn non_empty(s: &str) -> Option<String> {
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

fn bmcs(field: &str, list: &[pb::BmcInfo]) -> Checked<Vec<Bmc>> {
    let mut out = Vec::with_capacity(list.len());
    for (i, b) in list.iter().enumerate() {
        let mac = normalize_mac(&b.mac_address).ok_or_else(|| {
            Invalid(format!(
                "{field}.bmcs[{i}].mac_address {:?} is not a MAC address",
                b.mac_address
            ))
        })?;
        let bmc_type = match pb::BmcType::try_from(b.r#type) {
            Ok(pb::BmcType::Host) => BmcType::Host,
            Ok(pb::BmcType::Dpu) => BmcType::Dpu,
            Ok(pb::BmcType::Unknown) => BmcType::Unknown,
            Err(_) => return invalid(format!("{field}.bmcs[{i}].type is unknown")),
        };
        out.push(Bmc {
            bmc_type,
            mac_address: mac,
            ip_address: b.ip_address.clone().filter(|ip| !ip.is_empty()),
        });
    }
    Ok(out)
}

/// A new component from the wire; `field` names it in errors.
pub fn new_component(field: &str, c: &pb::Component, rack_id: Option<Uuid>) -> Checked<Component> {
    let component_type = match ComponentType::from_i32(c.r#type) {
        Some(t) if t != ComponentType::Unknown => t,
        _ => return invalid(format!("{field}.type is required (a known component type)")),
    };
    let info = c.info.clone().unwrap_or_default();
    let position = c.position.unwrap_or_default();
    let now = Utc::now();
    Ok(Component {
        id: Uuid::new_v4(),
        rack_id,
        component_type,
        name: info.name.trim().to_string(),
        manufacturer: info.manufacturer.trim().to_string(),
        model: info.model.as_deref().and_then(non_empty),
        serial_number: info.serial_number.trim().to_string(),
        description: info.description.as_deref().and_then(non_empty),
        firmware_version: c.firmware_version.trim().to_string(),
        position: Position {
            slot_id: position.slot_id,
            tray_idx: position.tray_idx,
            host_id: position.host_id,
        },
        bmcs: bmcs(field, &c.bmcs)?,
        external_id: non_empty(&c.component_id),
        power_state: non_empty(&c.power_state),
        // What a client sends is a claim; only a component manager observes.
        firmware_observed_at: None,
        power_observed_at: None,
        operational: operational(
            &format!("{field}."),
            Some(c.operational_state),
            Some(c.operational_reason.as_str()),
        )?
        .flatten(),
        // Leaks are reported by sources, not imported.
        leak: None,
        leak_handling: None,
        created_at: now,
        updated_at: now,
        deleted_at: None,
    })
}

/// `PatchRack`'s rack id and patch: `rack.info.id` names the rack; a
/// non-empty `info.name`, a set `info.description` (empty clears it) and a
/// set `location` (replaced whole) are the changes. The other fields of the
/// message are not patchable here and are left as they are (a client may
/// send back a rack it read).
pub fn rack_patch(rack: Option<&pb::Rack>) -> Checked<(Uuid, RackPatch)> {
    let Some(rack) = rack else {
        return invalid("rack is required");
    };
    let info = rack.info.clone().unwrap_or_default();
    let id = super::required_id(info.id.as_ref(), "rack.info.id is required")?;
    let patch = RackPatch {
        name: non_empty(&info.name),
        description: info.description.map(|d| d.trim().to_string()),
        location: rack.location.clone().map(|l| Location {
            region: l.region,
            datacenter: l.datacenter,
            room: l.room,
            position: l.position,
        }),
    };
    Ok((id, patch))
}

/// A rack or NVL domain `Identifier`: its id when set (a valid UUID), else
/// its name.
pub fn identifier(
    identifier: Option<&pb::Identifier>,
    field: &str,
) -> Checked<rackflow_engine::inventory::Identifier> {
    use rackflow_engine::inventory::Identifier;
    let Some(identifier) = identifier else {
        return invalid(format!("{field} is required"));
    };
    match identifier.id.as_ref().filter(|u| !u.id.trim().is_empty()) {
        Some(u) => match parse_uuid(&u.id) {
            Ok(id) if !id.is_nil() => Ok(Identifier::Id(id)),
            _ => invalid(format!("{field}.id must be a valid UUID")),
        },
        None => match non_empty(&identifier.name) {
            Some(name) => Ok(Identifier::Name(name)),
            None => invalid(format!("{field} must give an id or a name")),
        },
    }
}

/// Every identifier of a list (at least one), each named by its index.
pub fn identifiers(
    list: &[pb::Identifier],
    field: &str,
) -> Checked<Vec<rackflow_engine::inventory::Identifier>> {
    if list.is_empty() {
        return invalid(format!("{field} must name at least one rack"));
    }
    list.iter()
        .enumerate()
        .map(|(i, id)| identifier(Some(id), &format!("{field}[{i}]")))
        .collect()
}

/// The domain of `CreateNVLDomain`: a name (required), an id when the
/// request gives one, the optional external and NMX-C cluster ids.
pub fn new_nvl_domain(domain: Option<&pb::NvlDomain>) -> Checked<NvlDomain> {
    let Some(domain) = domain else {
        return invalid("nvl_domain is required");
    };
    let identifier = domain.identifier.clone().unwrap_or_default();
    let Some(name) = non_empty(&identifier.name) else {
        return invalid("nvl_domain.identifier.name is required");
    };
    let id = match identifier.id.as_ref().filter(|u| !u.id.trim().is_empty()) {
        Some(u) => match parse_uuid(&u.id) {
            Ok(id) if !id.is_nil() => id,
            _ => return invalid("nvl_domain.identifier.id must be a valid UUID"),
        },
        None => Uuid::new_v4(),
    };
    let now = Utc::now();
    Ok(NvlDomain {
        id,
        name: Some(name),
        external_id: domain.external_id.as_deref().and_then(non_empty),
        nmxc_cluster_id: domain.nmxc_cluster_id.as_deref().and_then(non_empty),
        created_at: now,
        updated_at: now,
        deleted_at: None,
    })
}

/// The wire form of a domain.
pub fn pb_nvl_domain(d: &NvlDomain) -> pb::NvlDomain {
    pb::NvlDomain {
        identifier: Some(pb::Identifier {
            id: Some(pb_uuid(d.id)),
            name: d.name.clone().unwrap_or_default(),
        }),
        external_id: d.external_id.clone(),
        nmxc_cluster_id: d.nmxc_cluster_id.clone(),
    }
}

/// The reference's `NVLinkDomain` view on the wire: `id` and
/// `rack_group_id` are the domain's external id (its UUID for a domain
/// without one), `name` its name.
pub fn pb_nvlink_domain(view: &NvlinkDomainView) -> pb::NvLinkDomain {
    let domain = &view.domain;
    let id = domain
        .external_id
        .clone()
        .unwrap_or_else(|| domain.id.to_string());
    let labels = RackLabels::new(&view.racks, std::slice::from_ref(domain));
    pb::NvLinkDomain {
        id: id.clone(),
        name: domain.name.clone().unwrap_or_default(),
        topology: view.topology.clone(),
        operation_status: view.operation_status as i32,
        components: view
            .components
            .iter()
            .map(|c| pb_component(c, &labels))
            .collect(),
        nmxc_cluster_id: domain.nmxc_cluster_id.clone(),
        rack_group_id: id,
    }
}

/// A new rack with its components from `CreateExpectedRack`.
pub fn new_rack(rack: Option<&pb::Rack>) -> Checked<(Rack, Vec<Component>)> {
    let Some(rack) = rack else {
        return invalid("rack is required");
    };
    let info = rack.info.clone().unwrap_or_default();
    let Some(name) = non_empty(&info.name) else {
        return invalid("rack.info.name is required");
    };
    let id = match info.id.as_ref().filter(|u| !u.id.trim().is_empty()) {
        Some(u) => match parse_uuid(&u.id) {
            Ok(id) if !id.is_nil() => id,
            _ => return invalid("rack.info.id must be a valid UUID"),
        },
        None => Uuid::new_v4(),
    };
    let location = rack.location.clone().unwrap_or_default();
    let now = Utc::now();
    let record = Rack {
        id,
        name,
        manufacturer: info.manufacturer.trim().to_string(),
        model: info.model.as_deref().and_then(non_empty),
        serial_number: info.serial_number.trim().to_string(),
        description: info.description.as_deref().and_then(non_empty),
        location: Location {
            region: location.region,
            datacenter: location.datacenter,
            room: location.room,
            position: location.position,
        },
        external_id: non_empty(&rack.external_id),
        nvl_domain_id: None,
        lifecycle: Default::default(),
        created_at: now,
        updated_at: now,
        deleted_at: None,
    };
    let mut components = Vec::with_capacity(rack.components.len());
    for (i, c) in rack.components.iter().enumerate() {
        components.push(new_component(
            &format!("rack.components[{i}]"),
            c,
            Some(id),
        )?);
    }
    Ok((record, components))
}

fn device_info(
    id: Uuid,
    name: &str,
    manufacturer: &str,
    model: &Option<String>,
    serial: &str,
    description: &Option<String>,
) -> pb::DeviceInfo {
    pb::DeviceInfo {
        id: Some(pb_uuid(id)),
        name: name.to_string(),
        manufacturer: manufacturer.to_string(),
        model: model.clone(),
        serial_number: serial.to_string(),
        description: description.clone(),
    }
}

/// An operational state from the wire: `None` = not given, `Some(None)` =
/// cleared (UNSPECIFIED), else the state with its reason. `field` prefixes
/// the field names in errors ("" or "component.").
fn operational(
    field: &str,
    state: Option<i32>,
    reason: Option<&str>,
) -> Checked<Option<Option<OperationalStatus>>> {
    let given = state.is_some();
    let state = state.filter(|s| *s != pb::OperationalState::Unspecified as i32);
    if state.is_none() && reason.is_some_and(|r| !r.trim().is_empty()) {
        return invalid(format!(
            "{field}operational_reason needs an operational_state"
        ));
    }
    let Some(state) = state else {
        // Not given: left as it is; UNSPECIFIED: cleared.
        return Ok(given.then_some(None));
    };
    let Some(state) = OperationalState::from_wire(state) else {
        return invalid(format!(
            "{field}operational_state {state} is unknown (in service 1, drained 2, maintenance 3)"
        ));
    };
    let reason = reason.unwrap_or_default().trim();
    if reason.chars().count() > MAX_OPERATIONAL_REASON {
        return invalid(format!(
            "{field}operational_reason is longer than {MAX_OPERATIONAL_REASON} characters"
        ));
    }
    Ok(Some(Some(OperationalStatus {
        state,
        reason: reason.to_string(),
    })))
}

/// Longest operational reason accepted (a sentence, not a document).
const MAX_OPERATIONAL_REASON: usize = 512;

/// The reference's `status` for an operational state: an in-service
/// component is in use and blocks what the readiness gate holds back.
fn pb_status(operational: &OperationalStatus) -> pb::ComponentOperationStatus {
    pb::ComponentOperationStatus {
        phase: Phase::of(Some(operational)) as i32,
        reason: operational.reason.clone(),
        blocked_operations: operational
            .state
            .blocked_operations()
            .iter()
            .map(|op| op.to_wire())
            .collect(),
    }
}

/// The wire form of a component; `labels` name its rack's external id and
/// NVLink domain (a rack missing from them: those fields stay empty).
pub fn pb_component(c: &Component, labels: &RackLabels) -> pb::Component {
    let rack = labels.of(c.rack_id);
    let domain = rack.and_then(|r| r.nvl_domain.as_ref());
    pb::Component {
        r#type: c.component_type as i32,
        info: Some(device_info(
            c.id,
            &c.name,
            &c.manufacturer,
            &c.model,
            &c.serial_number,
            &c.description,
        )),
        firmware_version: c.firmware_version.clone(),
        position: Some(pb::RackPosition {
            slot_id: c.position.slot_id,
            tray_idx: c.position.tray_idx,
            host_id: c.position.host_id,
        }),
        bmcs: c
            .bmcs
            .iter()
            .map(|b| pb::BmcInfo {
                r#type: b.bmc_type as i32,
                mac_address: b.mac_address.clone(),
                ip_address: b.ip_address.clone(),
            })
            .collect(),
        component_id: c.external_id.clone().unwrap_or_default(),
        rack_id: c.rack_id.map(pb_uuid),
        power_state: c.power_state.clone().unwrap_or_default(),
        rack_external_id: rack.and_then(|r| r.external_id.clone()).unwrap_or_default(),
        nvl_domain_id: domain.map(|(id, _)| pb_uuid(*id)),
        nvl_domain_external_id: domain.and_then(|(_, external)| external.clone()),
        firmware_observed_at: c.firmware_observed_at.map(super::timestamp),
        power_state_observed_at: c.power_observed_at.map(super::timestamp),
        status: c.operational.as_ref().map(pb_status),
        operational_state: c.operational.as_ref().map_or(0, |o| o.state.to_wire()),
        operational_reason: c
            .operational
            .as_ref()
            .map(|o| o.reason.clone())
            .unwrap_or_default(),
        leak_status: c.leak.map_or(0, |l| l.status.to_wire()),
        leak_observed_at: c.leak.map(|l| super::timestamp(l.observed_at)),
        leak_handling_status: c.leak_handling.map_or(0, |h| h.to_wire()),
        ..Default::default()
    }
}

/// The wire form of a rack; `labels` (which must hold the rack) name its
/// NVLink domain's external id.
pub fn pb_rack(r: &Rack, components: &[Component], labels: &RackLabels) -> pb::Rack {
    pb::Rack {
        info: Some(device_info(
            r.id,
            &r.name,
            &r.manufacturer,
            &r.model,
            &r.serial_number,
            &r.description,
        )),
        location: Some(pb::Location {
            region: r.location.region.clone(),
            datacenter: r.location.datacenter.clone(),
            room: r.location.room.clone(),
            position: r.location.position.clone(),
        }),
        components: components.iter().map(|c| pb_component(c, labels)).collect(),
        nvl_domain_ids: r.nvl_domain_id.map(pb_uuid).into_iter().collect(),
        nvl_domain_external_ids: labels
            .of(Some(r.id))
            .and_then(|l| l.nvl_domain.as_ref())
            .and_then(|(_, external)| external.clone())
            .into_iter()
            .collect(),
        task_stats: Some(pb::TaskStats::default()),
        external_id: r.external_id.clone().unwrap_or_default(),
        operation_status: labels
            .of(Some(r.id))
            .map_or(Phase::Unknown, |l| l.operation_status) as i32,
        lifecycle_status: r.lifecycle.status.to_wire(),
        ingested_at: r.lifecycle.ingested_at.map(super::timestamp),
        decommissioned_at: r.lifecycle.decommissioned_at.map(super::timestamp),
        ..Default::default()
    }
}

/// `GetListOfRacksRequest.lifecycle_statuses`: known statuses, repeats
/// dropped; UNSPECIFIED and unknown numbers are refused by index.
pub fn lifecycle_statuses(values: &[i32]) -> Checked<Vec<LifecycleStatus>> {
    let mut out = Vec::with_capacity(values.len());
    for (i, v) in values.iter().enumerate() {
        let Some(status) = LifecycleStatus::from_wire(*v) else {
            return invalid(format!(
                "lifecycle_statuses[{i}]: {v} is not a lifecycle status (new, ingesting, \
                 ingested or decommissioned)"
            ));
        };
        if !out.contains(&status) {
            out.push(status);
        }
    }
    Ok(out)
}

/// `GetComponentsRequest.leak_statuses`: `None` for UNKNOWN (no report),
/// repeats dropped; unknown numbers are refused by index.
pub fn leak_statuses(values: &[i32]) -> Checked<Vec<Option<LeakStatus>>> {
    let mut out = Vec::with_capacity(values.len());
    for (i, v) in values.iter().enumerate() {
        let status = match *v {
            0 => None,
            _ => match LeakStatus::from_wire(*v) {
                Some(status) => Some(status),
                None => {
                    return invalid(format!(
                        "leak_statuses[{i}]: {v} is not a leak status (unknown, detected or \
                         not detected)"
                    ));
                }
            },
        };
        if !out.contains(&status) {
            out.push(status);
        }
    }
    Ok(out)
}

/// Rack listing filters (`Filter` with a rack field; patterns are exact values).
pub fn rack_filter(
    filters: &[pb::Filter],
    with_external_id_only: bool,
    order_by: Option<&pb::OrderBy>,
) -> Checked<RackFilter> {
    let mut out = RackFilter {
        with_external_id_only,
        ..Default::default()
    };
    for (i, f) in filters.iter().enumerate() {
        let column = match f.field {
            Some(pb::filter::Field::RackField(v)) => match pb::RackFilterField::try_from(v) {
                Ok(pb::RackFilterField::Name) => InventoryColumn::Name,
                Ok(pb::RackFilterField::Manufacturer) => InventoryColumn::Manufacturer,
                Ok(pb::RackFilterField::Model) => InventoryColumn::Model,
                _ => return invalid(format!("filters[{i}].rack_field is unsupported")),
            },
            _ => return invalid(format!("filters[{i}] must set a rack_field")),
        };
        out.text.push(text_filter(column, f.query_info.as_ref()));
    }
    out.order = match order_by {
        None => None,
        Some(o) => {
            let column = match o.field {
                Some(pb::order_by::Field::RackField(v)) => {
                    match pb::RackOrderByField::try_from(v) {
                        Ok(pb::RackOrderByField::Name) => InventoryColumn::Name,
                        Ok(pb::RackOrderByField::Manufacturer) => InventoryColumn::Manufacturer,
                        Ok(pb::RackOrderByField::Model) => InventoryColumn::Model,
                        _ => return invalid("order_by.rack_field is unsupported"),
                    }
                }
                _ => return invalid("order_by must set a rack_field"),
            };
            Some(ListOrder {
                column,
                descending: descending(&o.direction)?,
            })
        }
    };
    Ok(out)
}

/// One `Filter`'s `StringQueryInfo` on `column` (exact values, or LIKE
/// patterns when wildcard; several AND'ed, OR'ed with `use_or`).
fn text_filter(column: InventoryColumn, query: Option<&pb::StringQueryInfo>) -> TextFilter {
    let query = query.cloned().unwrap_or_default();
    TextFilter {
        column,
        query: rackflow_domain::run::NameQuery {
            patterns: query.patterns,
            is_wildcard: query.is_wildcard,
            use_or: query.use_or,
        },
    }
}

/// `OrderBy.direction`: `ASC` (or empty) or `DESC`, any case.
fn descending(direction: &str) -> Checked<bool> {
    match direction.trim().to_ascii_uppercase().as_str() {
        "" | "ASC" => Ok(false),
        "DESC" => Ok(true),
        _ => invalid(format!(
            "order_by.direction must be ASC or DESC, got {direction:?}"
        )),
    }
}

/// Component listing filters (`Filter` with a component field) and order.
pub fn component_filter(
    filters: &[pb::Filter],
    order_by: Option<&pb::OrderBy>,
    query: &mut ComponentFilterQuery,
) -> Checked<()> {
    for (i, f) in filters.iter().enumerate() {
        let column = match f.field {
            Some(pb::filter::Field::ComponentField(v)) => {
                match pb::ComponentFilterField::try_from(v) {
                    Ok(pb::ComponentFilterField::Name) => InventoryColumn::Name,
                    Ok(pb::ComponentFilterField::Manufacturer) => InventoryColumn::Manufacturer,
                    Ok(pb::ComponentFilterField::Model) => InventoryColumn::Model,
                    Ok(pb::ComponentFilterField::Type) => {
                        let patterns = f
                            .query_info
                            .as_ref()
                            .map(|q| q.patterns.clone())
                            .unwrap_or_default();
                        for p in patterns {
                            let ty = ComponentType::parse(&p).ok_or_else(|| {
                                Invalid(format!("filters[{i}]: unknown component type {p:?}"))
                            })?;
                            query.types.push(ty);
                        }
                        continue;
                    }
                    _ => return invalid(format!("filters[{i}].component_field is unsupported")),
                }
            }
            _ => return invalid(format!("filters[{i}] must set a component_field")),
        };
        query.text.push(text_filter(column, f.query_info.as_ref()));
    }
    query.order = match order_by {
        None => None,
        Some(o) => {
            let column = match o.field {
                Some(pb::order_by::Field::ComponentField(v)) => {
                    match pb::ComponentOrderByField::try_from(v) {
                        Ok(pb::ComponentOrderByField::Name) => InventoryColumn::Name,
                        Ok(pb::ComponentOrderByField::Manufacturer) => {
                            InventoryColumn::Manufacturer
                        }
                        Ok(pb::ComponentOrderByField::Model) => InventoryColumn::Model,
                        Ok(pb::ComponentOrderByField::Type) => InventoryColumn::Type,
                        _ => return invalid("order_by.component_field is unsupported"),
                    }
                }
                _ => return invalid("order_by must set a component_field"),
            };
            Some(ListOrder {
                column,
                descending: descending(&o.direction)?,
            })
        }
    };
    Ok(())
}

/// `PatchComponent` fields. Position fields are patched when `update_mask`
/// names them, or all three when `position` is given without a mask.
pub fn component_patch(req: &pb::PatchComponentRequest) -> Checked<ComponentPatch> {
    let mut patch = ComponentPatch {
        firmware_version: req.firmware_version.clone(),
        description: req.description.clone(),
        bmcs: bmcs("patch", &req.bmcs)?,
        operational: operational("", req.operational_state, req.operational_reason.as_deref())?,
        ..Default::default()
    };
    if let Some(rack) = &req.rack_id {
        patch.rack_id = Some(if rack.id.trim().is_empty() {
            None
        } else {
            Some(parse_uuid(&rack.id).map_err(|e| Invalid(format!("rack_id: {e}")))?)
        });
    }
    if let Some(pos) = req.position {
        let paths: Vec<&str> = req
            .update_mask
            .as_ref()
            .map(|m| m.paths.iter().map(String::as_str).collect())
            .unwrap_or_default();
        if paths.is_empty() {
            patch.slot_id = Some(pos.slot_id);
            patch.tray_idx = Some(pos.tray_idx);
            patch.host_id = Some(pos.host_id);
        }
        for path in paths {
            match path {
                "position.slot_id" => patch.slot_id = Some(pos.slot_id),
                "position.tray_idx" => patch.tray_idx = Some(pos.tray_idx),
                "position.host_id" => patch.host_id = Some(pos.host_id),
                other => return invalid(format!("update_mask path {other:?} is not supported")),
            }
        }
    }
    Ok(patch)
}

/// A rack named by UUID, or — when the text is not a UUID — by external id.
pub fn rack_ref(id: Option<&pb::Uuid>) -> Checked<RackRef> {
    let text = id.map(|u| u.id.trim()).unwrap_or_default();
    if text.is_empty() {
        return invalid("rack id is required");
    }
    Ok(match parse_uuid(text) {
        Ok(id) => RackRef::Id {
            id,
            text: text.to_string(),
        },
        Err(_) => RackRef::ExternalId(text.to_string()),
    })
}

/// `GetComponents`: the filters, then the target spec.
pub fn component_query(req: &pb::GetComponentsRequest) -> Checked<ComponentQuery> {
    let mut filter = ComponentFilterQuery::default();
    component_filter(&req.filters, req.order_by.as_ref(), &mut filter)?;
    filter.leak_statuses = leak_statuses(&req.leak_statuses)?;
    let target = match &req.target_spec {
        None => None,
        Some(spec) => super::target_spec(spec).map_err(|e| Invalid(format!("target_spec: {e}")))?,
    };
    Ok(ComponentQuery { filter, target })
}

/// `AddComponent`: the component with its optional rack.
pub fn added_component(req: &pb::AddComponentRequest) -> Checked<Component> {
    let Some(component) = req.component.as_ref() else {
        return invalid("component is required");
    };
    let rack_id = match component
        .rack_id
        .as_ref()
        .filter(|u| !u.id.trim().is_empty())
    {
        None => None,
        Some(u) => Some(parse_uuid(&u.id).map_err(|e| Invalid(format!("component.rack_id: {e}")))?),
    };
    new_component("component", component, rack_id)
}

/// One drift difference on the wire: `expected` is the inventory's
/// component, `actual` what the component manager reports (its type, node
/// id, BMC and rack id).
pub fn pb_component_diff(d: &rackflow_domain::drift::ComponentDiff) -> pb::ComponentDiff {
    pb::ComponentDiff {
        r#type: d.diff_type.to_wire(),
        component_id: d.component_id.clone(),
        expected: d.expected.as_ref().map(|e| pb::Component {
            rack_external_id: e.rack.clone(),
            ..pb_component(&e.component, &RackLabels::default())
        }),
        actual: d.actual.as_ref().map(|n| pb::Component {
            r#type: n.component_type.map_or(0, |t| t as i32),
            component_id: n.node_id.clone(),
            rack_external_id: n.rack.clone(),
            bmcs: vec![pb::BmcInfo {
                r#type: pb::BmcType::Host as i32,
                mac_address: n.bmc_mac.clone().unwrap_or_default(),
                ip_address: n.bmc_ip.clone(),
            }],
            ..Default::default()
        }),
        field_diffs: d
            .field_diffs
            .iter()
            .map(|f| pb::FieldDiff {
                field_name: f.field.to_string(),
                expected_value: f.expected.clone(),
                actual_value: f.actual.clone(),
            })
            .collect(),
        id: d.id.map(pb_uuid),
        component_mac_address: d.mac_address.clone(),
    }
}
