//! Operation runs (`v1.Flow`) and their preview (`v1.FlowExtensions`) over
//! the engine's [`RunManager`] (plan, create, reads) and [`Dispatcher`]
//! (manual controls, wake-ups).

use rackflow_api::v1 as pb;
use rackflow_domain::run::OperationRun;
use rackflow_engine::dispatcher::Dispatcher;
use rackflow_engine::runs::RunManager;
use uuid::Uuid;

use rackflow_security::secrets::DataKeys;

use super::{ApiResult, seal_authentication_data};
use crate::convert::{self, RandomSeeds, pb_uuid, wire_count};

pub(crate) fn run_id(id: Option<&pb::Uuid>) -> ApiResult<Uuid> {
    Ok(convert::required_id(id, "operation run ID is required")?)
}

/// The run's firmware credentials, sealed like a plain upgrade's.
fn sealed_authentication_data(
    keys: Option<&DataKeys>,
    req: &pb::CreateOperationRunRequest,
) -> ApiResult<Option<rackflow_domain::run::EncryptedSecret>> {
    let data = req
        .configuration
        .as_ref()
        .and_then(|c| c.operation.as_ref())
        .and_then(|o| match &o.operation {
            Some(pb::operation_run_operation::Operation::UpgradeFirmware(fw)) => {
                fw.authentication_data.as_ref()
            }
            None => None,
        });
    seal_authentication_data(keys, data)
}

/// Pause, resume, advance and cancel answer the run without stats.
fn control_reply(run: &OperationRun) -> pb::OperationRun {
    convert::operation_run(run, None)
}

pub(crate) async fn create(
    runs: &RunManager,
    dispatcher: &Dispatcher,
    keys: Option<&DataKeys>,
    objects: Option<&super::firmware_objects::FirmwareObjects>,
    mut req: pb::CreateOperationRunRequest,
) -> ApiResult<pb::CreateOperationRunResponse> {
    let sealed = sealed_authentication_data(keys, &req)?;
    let firmware_objects = resolve_run_objects(objects, &mut req).await?;
    let mut run = convert::new_run(&req, &mut RandomSeeds)?;
    run.configuration.operation.payload.authentication_data = sealed;
    run.configuration.operation.payload.firmware_objects = firmware_objects;
    let id = runs.create(&run).await?;
    dispatcher.wake_run(id);
    Ok(pb::CreateOperationRunResponse {
        id: Some(pb_uuid(id)),
    })
}

/// The firmware objects a run's firmware upgrade names, resolved in place
/// (`rpc::firmware_objects`).
async fn resolve_run_objects(
    objects: Option<&super::firmware_objects::FirmwareObjects>,
    req: &mut pb::CreateOperationRunRequest,
) -> ApiResult<std::collections::BTreeMap<String, String>> {
    let firmware = req
        .configuration
        .as_mut()
        .and_then(|c| c.operation.as_mut())
        .and_then(|op| op.operation.as_mut())
        .map(|op| match op {
            pb::operation_run_operation::Operation::UpgradeFirmware(fw) => fw,
        });
    match firmware {
        Some(fw) => super::firmware_objects::resolve(objects, fw).await,
        None => Ok(std::collections::BTreeMap::new()),
    }
}

pub(crate) async fn preview(
    runs: &RunManager,
    keys: Option<&DataKeys>,
    objects: Option<&super::firmware_objects::FirmwareObjects>,
    mut req: pb::CreateOperationRunRequest,
) -> ApiResult<pb::PreviewOperationRunResponse> {
    // Checked as a create would be; nothing is stored.
    sealed_authentication_data(keys, &req)?;
    let firmware_objects = resolve_run_objects(objects, &mut req).await?;
    let mut run = convert::new_run(&req, &mut RandomSeeds)?;
    run.configuration.operation.payload.firmware_objects = firmware_objects;
    let preview = runs.preview(&run).await?;
    let targets = preview
        .plan
        .targets
        .iter()
        .map(|t| -> pb::PlannedOperationRunTarget {
            let rack = preview.racks.get(&t.rack_id);
            pb::PlannedOperationRunTarget {
                rack_id: Some(pb_uuid(t.rack_id)),
                rack_external_id: rack.and_then(|r| r.external_id.clone()).unwrap_or_default(),
                rack_name: rack.map(|r| r.name.clone()).unwrap_or_default(),
                sequence_index: t.sequence_index,
                phase_index: t.phase_index,
                components_by_type: Some(convert::components_by_type(&t.components_by_type)),
                installed_versions: preview
                    .components
                    .get(&t.rack_id)
                    .map(|inventory| {
                        rackflow_domain::inventory::installed_versions(
                            inventory,
                            &t.components_by_type,
                        )
                        .into_iter()
                        .map(|v| pb::InstalledVersion {
                            component_type: v.component_type as i32,
                            version: v.version,
                            components: wire_count(v.components),
                            observed: wire_count(v.observed),
                        })
                        .collect()
                    })
                    .unwrap_or_default(),
                rack_model: rack.and_then(|r| r.model.clone()).unwrap_or_default(),
                target_versions: rackflow_domain::bundle::versions_for_rack(
                    &run.configuration.operation.payload,
                    rack.and_then(|r| r.model.as_deref()),
                    t.components_by_type.iter().map(|(ty, _)| ty),
                )
                .into_iter()
                .map(|(ty, version)| pb::TargetVersion {
                    component_type: ty as i32,
                    version,
                })
                .collect(),
            }
        })
        .collect();
    Ok(pb::PreviewOperationRunResponse {
        configuration: Some(convert::configuration(&run.configuration)),
        // Cut to one reply's size (a 10,000-rack plan with its components
        // is ~14 MB); `phase_sizes` keeps the whole plan's counts.
        targets: super::fit_reply(targets),
        total_phases: preview.plan.total_phases(),
        phase_sizes: convert::phase_sizes(&preview.plan.phase_sizes),
        candidate_count: wire_count(preview.plan.candidate_count),
    })
}

pub(crate) async fn get(
    runs: &RunManager,
    req: pb::GetOperationRunRequest,
) -> ApiResult<pb::GetOperationRunResponse> {
    let id = run_id(req.id.as_ref())?;
    let (run, stats) = runs.get(id, req.include_stats).await?;
    Ok(pb::GetOperationRunResponse {
        operation_run: Some(convert::operation_run(&run, stats.as_ref())),
    })
}

pub(crate) async fn list(
    runs: &RunManager,
    req: pb::ListOperationRunsRequest,
) -> ApiResult<pb::ListOperationRunsResponse> {
    let filter = convert::run_list_filter(req.filter.as_ref())?;
    let page = convert::page(req.pagination.as_ref())?;
    let (found, total) = runs.list(&filter, page).await?;
    Ok(pb::ListOperationRunsResponse {
        operation_runs: super::fit_reply(found.iter().map(convert::run_summary).collect()),
        total: wire_count(total),
    })
}

pub(crate) async fn list_targets(
    runs: &RunManager,
    req: pb::ListOperationRunTargetsRequest,
) -> ApiResult<pb::ListOperationRunTargetsResponse> {
    let id = run_id(req.operation_run_id.as_ref())?;
    let status = convert::target_status_filter(req.status)?;
    let scope = convert::phase_scope(req.phase_scope)?;
    let page = convert::page(req.pagination.as_ref())?;
    let result = runs.list_targets(id, status, scope, page).await?;
    Ok(pb::ListOperationRunTargetsResponse {
        targets: super::fit_reply(
            result
                .targets
                .iter()
                .map(|(t, ext)| convert::run_target(t, ext))
                .collect(),
        ),
        total: wire_count(result.total),
    })
}

pub(crate) async fn pause(
    dispatcher: &Dispatcher,
    req: pb::PauseOperationRunRequest,
    actor: &str,
    action: &str,
) -> ApiResult<pb::OperationRun> {
    let id = run_id(req.id.as_ref())?;
    Ok(control_reply(&dispatcher.pause(id, actor, action).await?))
}

pub(crate) async fn resume(
    dispatcher: &Dispatcher,
    req: pb::ResumeOperationRunRequest,
    actor: &str,
    action: &str,
) -> ApiResult<pb::OperationRun> {
    let id = run_id(req.id.as_ref())?;
    Ok(control_reply(&dispatcher.resume(id, actor, action).await?))
}

pub(crate) async fn advance(
    dispatcher: &Dispatcher,
    req: pb::AdvanceOperationRunPhaseRequest,
    actor: &str,
    action: &str,
) -> ApiResult<pb::OperationRun> {
    let id = run_id(req.id.as_ref())?;
    Ok(control_reply(
        &dispatcher
            .advance(id, req.expected_phase_index, actor, action)
            .await?,
    ))
}

pub(crate) async fn cancel(
    dispatcher: &Dispatcher,
    req: pb::CancelOperationRunRequest,
    actor: &str,
    action: &str,
) -> ApiResult<pb::OperationRun> {
    let id = run_id(req.id.as_ref())?;
    Ok(control_reply(
        &dispatcher
            .cancel(id, req.reason.trim(), actor, action)
            .await?,
    ))
}
