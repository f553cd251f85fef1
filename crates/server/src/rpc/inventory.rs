//! Racks and components (`v1.Flow` inventory RPCs) over the engine's
//! [`InventoryManager`].

use rackflow_api::v1 as pb;
use rackflow_domain::drift::DiffType;
use rackflow_domain::inventory::{Component, Rack};
use rackflow_domain::run::NameQuery;
use rackflow_engine::inventory::{InventoryManager, Phases, RackWithComponents};
use rackflow_engine::store::{NvlDomainQuery, RackImport};
use uuid::Uuid;

use super::ApiResult;
use crate::convert::{self, pb_uuid, wire_count};

pub(crate) async fn create_expected_rack(
    inventory: &InventoryManager,
    req: pb::CreateExpectedRackRequest,
) -> ApiResult<pb::CreateExpectedRackResponse> {
    let (rack, components) = convert::new_rack(req.rack.as_ref())?;
    inventory.create_rack(&rack, &components).await?;
    Ok(pb::CreateExpectedRackResponse {
        id: Some(pb_uuid(rack.id)),
    })
}

/// Racks per `ImportRacks` message at most.
pub(crate) const MAX_IMPORT_BATCH: usize = 1000;

/// One `ImportRacks` batch: every rack validated first (the error names it
/// by its place in the stream), then written in one transaction.
pub(crate) async fn import_racks_batch(
    inventory: &InventoryManager,
    req: pb::ImportRacksRequest,
    offset: usize,
    answer: &mut pb::ImportRacksResponse,
) -> ApiResult<()> {
    if req.racks.len() > MAX_IMPORT_BATCH {
        return Err(convert::Invalid(format!(
            "an ImportRacks message holds at most {MAX_IMPORT_BATCH} racks, got {}",
            req.racks.len()
        ))
        .into());
    }
    let racks = req
        .racks
        .iter()
        .enumerate()
        .map(|(i, rack)| {
            convert::new_rack(Some(rack)).map_err(|e| {
                convert::Invalid(format!(
                    "racks[{}] (external id {:?}): {e}",
                    offset + i,
                    rack.external_id
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let outcome = inventory.import_racks(&racks).await?;
    for ((rack, _), done) in racks.iter().zip(outcome) {
        let (id, created) = match done {
            RackImport::Created(id) => (id, true),
            RackImport::Existing(id) => (id, false),
        };
        if created {
            answer.created += 1;
        } else {
            answer.skipped += 1;
        }
        answer.racks.push(pb::ImportedRack {
            external_id: rack.external_id.clone().unwrap_or_default(),
            name: rack.name.clone(),
            id: Some(pb_uuid(id)),
            created,
        });
    }
    Ok(())
}

pub(crate) async fn get_rack_info_by_id(
    inventory: &InventoryManager,
    req: pb::GetRackInfoByIdRequest,
) -> ApiResult<pb::GetRackInfoResponse> {
    let rack = convert::rack_ref(req.id.as_ref())?;
    let found = inventory.rack(&rack, req.with_components).await?;
    rack_info(inventory, &found).await
}

/// `serial_info` of a lookup by serial: required, with a serial number.
fn serial_info(info: Option<&pb::DeviceSerialInfo>) -> ApiResult<(String, String)> {
    let Some(info) = info else {
        return Err(convert::Invalid("serial_info is required".into()).into());
    };
    let serial = info.serial_number.trim();
    if serial.is_empty() {
        return Err(convert::Invalid("serial_info.serial_number is required".into()).into());
    }
    Ok((info.manufacturer.trim().to_string(), serial.to_string()))
}

pub(crate) async fn get_rack_info_by_serial(
    inventory: &InventoryManager,
    req: pb::GetRackInfoBySerialRequest,
) -> ApiResult<pb::GetRackInfoResponse> {
    let (manufacturer, serial) = serial_info(req.serial_info.as_ref())?;
    let found = inventory
        .rack_by_serial(&manufacturer, &serial, req.with_components)
        .await?;
    rack_info(inventory, &found).await
}

async fn rack_info(
    inventory: &InventoryManager,
    found: &RackWithComponents,
) -> ApiResult<pb::GetRackInfoResponse> {
    // Components read with the rack give its phase without another read.
    let phases = if found.components.is_empty() {
        Phases::Read
    } else {
        Phases::From(&found.components)
    };
    let labels = inventory.rack_labels(&[&found.rack], &[], phases).await?;
    Ok(pb::GetRackInfoResponse {
        rack: Some(convert::pb_rack(&found.rack, &found.components, &labels)),
    })
}

/// A component (and its rack when asked for), labelled with its rack's
/// external id and NVLink domain either way.
async fn component_info(
    inventory: &InventoryManager,
    component: &Component,
    rack: Option<&Rack>,
) -> ApiResult<pb::GetComponentInfoResponse> {
    let labels = inventory
        .rack_labels(
            &rack.into_iter().collect::<Vec<_>>(),
            &component.rack_id.into_iter().collect::<Vec<_>>(),
            Phases::Read,
        )
        .await?;
    Ok(pb::GetComponentInfoResponse {
        component: Some(convert::pb_component(component, &labels)),
        rack: rack.map(|r| convert::pb_rack(r, &[], &labels)),
    })
}

/// Components on the wire, labelled with their racks' external ids and
/// NVLink domains (one read of the racks, one of the domains).
async fn labelled_components(
    inventory: &InventoryManager,
    components: &[Component],
) -> ApiResult<Vec<pb::Component>> {
    let rack_ids: Vec<Uuid> = components.iter().filter_map(|c| c.rack_id).collect();
    let labels = inventory.rack_labels(&[], &rack_ids, Phases::Skip).await?;
    Ok(components
        .iter()
        .map(|c| convert::pb_component(c, &labels))
        .collect())
}

pub(crate) async fn get_component_info_by_id(
    inventory: &InventoryManager,
    req: pb::GetComponentInfoByIdRequest,
) -> ApiResult<pb::GetComponentInfoResponse> {
    let id = convert::required_id(req.id.as_ref(), "component id is required")?;
    let (component, rack) = inventory.component_by_id(id, req.with_rack).await?;
    component_info(inventory, &component, rack.as_ref()).await
}

pub(crate) async fn get_component_info_by_serial(
    inventory: &InventoryManager,
    req: pb::GetComponentInfoBySerialRequest,
) -> ApiResult<pb::GetComponentInfoResponse> {
    let (manufacturer, serial) = serial_info(req.serial_info.as_ref())?;
    let (component, rack) = inventory
        .component_by_serial(&manufacturer, &serial, req.with_rack)
        .await?;
    component_info(inventory, &component, rack.as_ref()).await
}

pub(crate) async fn get_list_of_racks(
    inventory: &InventoryManager,
    req: pb::GetListOfRacksRequest,
) -> ApiResult<pb::GetListOfRacksResponse> {
    let mut filter = convert::rack_filter(
        &req.filters,
        req.with_external_id_only,
        req.order_by.as_ref(),
    )?;
    filter.lifecycle = convert::lifecycle_statuses(&req.lifecycle_statuses)?;
    let page = convert::page(req.pagination.as_ref())?;
    let (racks, total) = inventory.racks(&filter, page, req.with_components).await?;
    // With components the page already holds them: the phases come from
    // those instead of a second read.
    let phases = if req.with_components {
        Phases::Skip
    } else {
        Phases::Read
    };
    let mut labels = inventory
        .rack_labels(
            &racks.iter().map(|r| &r.rack).collect::<Vec<_>>(),
            &[],
            phases,
        )
        .await?;
    if req.with_components {
        labels = labels.with_phases(racks.iter().flat_map(|r| &r.components));
    }
    Ok(pb::GetListOfRacksResponse {
        racks: super::fit_reply(
            racks
                .iter()
                .map(|r| convert::pb_rack(&r.rack, &r.components, &labels))
                .collect(),
        ),
        total: wire_count(total),
    })
}

pub(crate) async fn delete_rack(
    inventory: &InventoryManager,
    req: pb::DeleteRackRequest,
) -> ApiResult<pb::DeleteRackResponse> {
    let id = convert::required_id(req.id.as_ref(), "rack id is required")?;
    inventory.delete_rack(id).await?;
    Ok(pb::DeleteRackResponse {})
}

pub(crate) async fn patch_rack(
    inventory: &InventoryManager,
    req: pb::PatchRackRequest,
) -> ApiResult<pb::PatchRackResponse> {
    let (id, patch) = convert::rack_patch(req.rack.as_ref())?;
    let report = inventory.patch_rack(id, &patch).await?;
    Ok(pb::PatchRackResponse { report })
}

pub(crate) async fn purge_rack(
    inventory: &InventoryManager,
    req: pb::PurgeRackRequest,
) -> ApiResult<pb::PurgeRackResponse> {
    let id = convert::required_id(req.id.as_ref(), "rack id is required")?;
    inventory.purge_rack(id).await?;
    Ok(pb::PurgeRackResponse {})
}

pub(crate) async fn delete_component(
    inventory: &InventoryManager,
    req: pb::DeleteComponentRequest,
) -> ApiResult<pb::DeleteComponentResponse> {
    let id = convert::required_id(req.id.as_ref(), "component id is required")?;
    inventory.delete_component(id).await?;
    Ok(pb::DeleteComponentResponse {})
}

pub(crate) async fn purge_component(
    inventory: &InventoryManager,
    req: pb::PurgeComponentRequest,
) -> ApiResult<pb::PurgeComponentResponse> {
    let id = convert::required_id(req.id.as_ref(), "component id is required")?;
    inventory.purge_component(id).await?;
    Ok(pb::PurgeComponentResponse {})
}

pub(crate) async fn create_nvl_domain(
    inventory: &InventoryManager,
    req: pb::CreateNvlDomainRequest,
) -> ApiResult<pb::CreateNvlDomainResponse> {
    let domain = convert::new_nvl_domain(req.nvl_domain.as_ref())?;
    let id = inventory.create_nvl_domain(&domain).await?;
    Ok(pb::CreateNvlDomainResponse {
        id: Some(convert::pb_uuid(id)),
    })
}

pub(crate) async fn attach_racks_to_nvl_domain(
    inventory: &InventoryManager,
    req: pb::AttachRacksToNvlDomainRequest,
) -> ApiResult<()> {
    let domain = convert::identifier(req.nvl_domain_identifier.as_ref(), "nvl_domain_identifier")?;
    let racks = convert::identifiers(&req.rack_identifiers, "rack_identifiers")?;
    inventory
        .attach_racks_to_nvl_domain(&domain, &racks)
        .await?;
    Ok(())
}

pub(crate) async fn detach_racks_from_nvl_domain(
    inventory: &InventoryManager,
    req: pb::DetachRacksFromNvlDomainRequest,
) -> ApiResult<()> {
    let racks = convert::identifiers(&req.rack_identifiers, "rack_identifiers")?;
    inventory.detach_racks_from_nvl_domain(&racks).await?;
    Ok(())
}

pub(crate) async fn get_list_of_nvl_domains(
    inventory: &InventoryManager,
    req: pb::GetListOfNvlDomainsRequest,
) -> ApiResult<pb::GetListOfNvlDomainsResponse> {
    let page = convert::page(req.pagination.as_ref())?;
    let (domains, total) = inventory.nvl_domains(&name_query(req.info), page).await?;
    Ok(pb::GetListOfNvlDomainsResponse {
        nvl_domains: domains.iter().map(convert::pb_nvl_domain).collect(),
        total: wire_count(total),
    })
}

pub(crate) async fn get_racks_for_nvl_domain(
    inventory: &InventoryManager,
    req: pb::GetRacksForNvlDomainRequest,
) -> ApiResult<pb::GetRacksForNvlDomainResponse> {
    let domain = convert::identifier(req.nvl_domain_identifier.as_ref(), "nvl_domain_identifier")?;
    let (_, racks) = inventory.racks_of_nvl_domain(&domain).await?;
    let labels = inventory
        .rack_labels(&racks.iter().collect::<Vec<_>>(), &[], Phases::Read)
        .await?;
    Ok(pb::GetRacksForNvlDomainResponse {
        racks: super::fit_reply(
            racks
                .iter()
                .map(|r| convert::pb_rack(r, &[], &labels))
                .collect(),
        ),
    })
}

/// The id of `GetNVLinkDomain`: required, not blank.
fn nvlink_domain_id(id: &str) -> ApiResult<&str> {
    let id = id.trim();
    if id.is_empty() {
        return Err(convert::Invalid("id: NVLink domain id must not be blank".into()).into());
    }
    Ok(id)
}

pub(crate) async fn get_nvlink_domain(
    inventory: &InventoryManager,
    req: pb::GetNvLinkDomainRequest,
) -> ApiResult<pb::GetNvLinkDomainResponse> {
    let id = nvlink_domain_id(&req.id)?;
    let view = inventory.nvlink_domain(id, req.with_components).await?;
    Ok(pb::GetNvLinkDomainResponse {
        domain: Some(convert::pb_nvlink_domain(&view)),
    })
}

/// `order_by` of `GetListOfNVLinkDomains`: `NAME_ASC` (the default, also
/// when empty) or `NAME_DESC`, in any case; anything else is refused
/// before anything is read.
fn nvlink_domain_order(order_by: &str) -> ApiResult<bool> {
    match order_by.trim().to_ascii_uppercase().as_str() {
        "" | "NAME_ASC" => Ok(false),
        "NAME_DESC" => Ok(true),
        _ => Err(convert::Invalid(format!(
            "order_by: {order_by:?} is not an order (NAME_ASC or NAME_DESC)"
        ))
        .into()),
    }
}

pub(crate) async fn get_list_of_nvlink_domains(
    inventory: &InventoryManager,
    req: pb::GetListOfNvLinkDomainsRequest,
) -> ApiResult<pb::GetListOfNvLinkDomainsResponse> {
    let descending = nvlink_domain_order(&req.order_by)?;
    let page = convert::page(req.pagination.as_ref())?;
    let query = NvlDomainQuery {
        name: name_query(req.info),
        external_only: true,
        descending,
    };
    let (views, total) = inventory
        .nvlink_domains(&query, page, req.with_components)
        .await?;
    Ok(pb::GetListOfNvLinkDomainsResponse {
        domains: super::fit_reply(views.iter().map(convert::pb_nvlink_domain).collect()),
        total: wire_count(total),
    })
}

/// A `StringQueryInfo` as a name query (none: every name).
fn name_query(info: Option<pb::StringQueryInfo>) -> NameQuery {
    info.map(|q| NameQuery {
        patterns: q.patterns,
        is_wildcard: q.is_wildcard,
        use_or: q.use_or,
    })
    .unwrap_or_default()
}

/// `ValidateComponents`: expected (the inventory) vs actual (the component
/// manager's own inventory), a page of the differences and the counts.
pub(crate) async fn validate_components(
    inventory: &InventoryManager,
    req: pb::ValidateComponentsRequest,
) -> ApiResult<pb::ValidateComponentsResponse> {
    let query = convert::component_query(&pb::GetComponentsRequest {
        target_spec: req.target_spec,
        filters: req.filters,
        pagination: None,
        order_by: req.order_by,
        leak_statuses: Vec::new(),
    })?;
    let page = convert::page(req.pagination.as_ref())?;
    let report = inventory.validate(query).await?;
    let count = |t| convert::wire_count(report.count(t));
    let offset = usize::try_from(page.offset).unwrap_or(usize::MAX);
    let limit = usize::try_from(page.limit).unwrap_or(usize::MAX);
    let limit = if limit == 0 { usize::MAX } else { limit };
    Ok(pb::ValidateComponentsResponse {
        diffs: super::fit_reply(
            report
                .diffs
                .iter()
                .skip(offset)
                .take(limit)
                .map(convert::pb_component_diff)
                .collect(),
        ),
        total_diffs: convert::wire_count(report.diffs.len()),
        missing_count: count(DiffType::Missing),
        unexpected_count: count(DiffType::Unexpected),
        mismatch_count: count(DiffType::Mismatch),
        match_count: convert::wire_count(report.matches),
    })
}

pub(crate) async fn get_components(
    inventory: &InventoryManager,
    req: pb::GetComponentsRequest,
) -> ApiResult<pb::GetComponentsResponse> {
    let query = convert::component_query(&req)?;
    let page = convert::page(req.pagination.as_ref())?;
    let (components, total) = inventory.components(query, page).await?;
    Ok(pb::GetComponentsResponse {
        components: super::fit_reply(labelled_components(inventory, &components).await?),
        total: wire_count(total),
    })
}

pub(crate) async fn add_component(
    inventory: &InventoryManager,
    req: pb::AddComponentRequest,
) -> ApiResult<pb::AddComponentResponse> {
    let component = convert::added_component(&req)?;
    inventory.add_component(&component).await?;
    let mut labelled = labelled_components(inventory, std::slice::from_ref(&component)).await?;
    Ok(pb::AddComponentResponse {
        component: labelled.pop(),
    })
}

pub(crate) async fn patch_component(
    inventory: &InventoryManager,
    req: pb::PatchComponentRequest,
) -> ApiResult<pb::PatchComponentResponse> {
    let id = convert::required_id(req.id.as_ref(), "component id is required")?;
    let patch = convert::component_patch(&req)?;
    let updated = inventory.patch_component(id, &patch).await?;
    let mut labelled = labelled_components(inventory, std::slice::from_ref(&updated)).await?;
    Ok(pb::PatchComponentResponse {
        component: labelled.pop(),
    })
}
