//! Rack operations and task reads (`v1.Flow`) over the engine's
//! [`TaskManager`] (submission, cancel) and [`InventoryManager`] (reads).

use std::sync::Arc;

use rackflow_api::v1 as pb;
use rackflow_engine::inventory::InventoryManager;
use rackflow_engine::tasks::{SubmitRequest, TaskManager};

use rackflow_security::secrets::DataKeys;

use super::{ApiResult, seal_authentication_data};
use crate::convert::{self, pb_uuid, wire_count};

async fn submit(
    tasks: &Arc<TaskManager>,
    mut req: SubmitRequest,
) -> ApiResult<pb::SubmitTaskResponse> {
    // A task merges repeated targets (the reference's rule): name each
    // once, so a list of copies costs one lookup. (Schedules, which share
    // the conversion, refuse repeats instead.)
    req.target = req.target.without_repeats();
    let ids = tasks.submit(req).await?;
    Ok(pb::SubmitTaskResponse {
        task_ids: ids.into_iter().map(pb_uuid).collect(),
    })
}

pub(crate) async fn upgrade_firmware(
    tasks: &Arc<TaskManager>,
    keys: Option<&DataKeys>,
    objects: Option<&super::firmware_objects::FirmwareObjects>,
    mut req: pb::UpgradeFirmwareRequest,
) -> ApiResult<pb::SubmitTaskResponse> {
    let sealed = seal_authentication_data(keys, req.authentication_data.as_ref())?;
    let firmware_objects = super::firmware_objects::resolve(objects, &mut req).await?;
    let mut submit_request = convert::upgrade_firmware(&req)?;
    if let Some(firmware) = submit_request.information.firmware.as_mut() {
        firmware.authentication_data = sealed;
        firmware.firmware_objects = firmware_objects;
    }
    submit(tasks, submit_request).await
}

pub(crate) async fn power_on_rack(
    tasks: &Arc<TaskManager>,
    req: pb::PowerOnRackRequest,
) -> ApiResult<pb::SubmitTaskResponse> {
    submit(tasks, convert::power_on(&req)?).await
}

pub(crate) async fn power_off_rack(
    tasks: &Arc<TaskManager>,
    req: pb::PowerOffRackRequest,
) -> ApiResult<pb::SubmitTaskResponse> {
    submit(tasks, convert::power_off(&req)?).await
}

pub(crate) async fn power_reset_rack(
    tasks: &Arc<TaskManager>,
    req: pb::PowerResetRackRequest,
) -> ApiResult<pb::SubmitTaskResponse> {
    submit(tasks, convert::power_reset(&req)?).await
}

pub(crate) async fn bring_up_rack(
    tasks: &Arc<TaskManager>,
    req: pb::BringUpRackRequest,
) -> ApiResult<pb::SubmitTaskResponse> {
    submit(tasks, convert::bring_up(&req)?).await
}

pub(crate) async fn ingest_rack(
    tasks: &Arc<TaskManager>,
    req: pb::IngestRackRequest,
) -> ApiResult<pb::SubmitTaskResponse> {
    submit(tasks, convert::ingest(&req)?).await
}

pub(crate) async fn decommission_rack(
    tasks: &Arc<TaskManager>,
    req: pb::DecommissionRackRequest,
) -> ApiResult<pb::SubmitTaskResponse> {
    submit(tasks, convert::decommission(&req)?).await
}

pub(crate) async fn ac_power_cycle_rack(
    tasks: &Arc<TaskManager>,
    req: pb::AcPowerCycleRackRequest,
) -> ApiResult<pb::SubmitTaskResponse> {
    submit(tasks, convert::ac_power_cycle(&req)?).await
}

pub(crate) async fn list_tasks(
    inventory: &InventoryManager,
    req: pb::ListTasksRequest,
) -> ApiResult<pb::ListTasksResponse> {
    let query = convert::task_query(&req)?;
    let page = convert::page(req.pagination.as_ref())?;
    let (tasks, total) = inventory.tasks(&query, page).await?;
    Ok(pb::ListTasksResponse {
        tasks: super::fit_reply(
            tasks
                .iter()
                .map(|t| convert::pb_task(t, req.with_report))
                .collect(),
        ),
        total: wire_count(total),
    })
}

pub(crate) async fn get_tasks_by_ids(
    inventory: &InventoryManager,
    req: pb::GetTasksByIDsRequest,
) -> ApiResult<pb::GetTasksByIDsResponse> {
    let ids = convert::task_ids(&req)?;
    let tasks = inventory.tasks_by_ids(&ids).await?;
    // Cut to one reply's size: a client asks again for the ids it did not
    // get (an id missing from a reply that was not cut is not found).
    Ok(pb::GetTasksByIDsResponse {
        tasks: super::fit_reply(tasks.iter().map(|t| convert::pb_task(t, true)).collect()),
    })
}

pub(crate) async fn cancel_task(
    tasks: &Arc<TaskManager>,
    req: pb::CancelTaskRequest,
) -> ApiResult<pb::CancelTaskResponse> {
    let id = convert::required_id(req.task_id.as_ref(), "task_id is required")?;
    let task = tasks.cancel(id).await?;
    Ok(pb::CancelTaskResponse {
        task: Some(convert::pb_task(&task, true)),
    })
}
