//! The task-schedule RPCs of `v1.Flow` over the engine's
//! [`ScheduleManager`]. Their errors reach the wire through the one mapping
//! in `error.rs`.

use rackflow_api::v1 as pb;
use rackflow_engine::schedules::ScheduleManager;

use super::ApiResult;
use crate::convert::schedules as conv;
use crate::convert::{pb_uuid, wire_count};

pub(crate) async fn create(
    schedules: &ScheduleManager,
    keys: Option<&rackflow_security::secrets::DataKeys>,
    req: pb::CreateTaskScheduleRequest,
) -> ApiResult<pb::TaskSchedule> {
    let sealed = super::seal_authentication_data(
        keys,
        conv::scheduled_authentication_data(req.operation.as_ref()),
    )?;
    let mut new = conv::new_schedule(&req)?;
    if let Some(firmware) = new.template.information.firmware.as_mut() {
        firmware.authentication_data = sealed;
    }
    let schedule = schedules.create(new).await?;
    Ok(conv::pb_schedule(&schedule))
}

pub(crate) async fn get(
    schedules: &ScheduleManager,
    req: pb::GetTaskScheduleRequest,
) -> ApiResult<pb::TaskSchedule> {
    let id = conv::schedule_id(req.id.as_ref(), "id")?;
    let schedule = schedules.get(id).await?;
    Ok(conv::pb_schedule(&schedule))
}

pub(crate) async fn list(
    schedules: &ScheduleManager,
    req: pb::ListTaskSchedulesRequest,
) -> ApiResult<pb::ListTaskSchedulesResponse> {
    let (filter, page) = conv::schedule_list_query(&req)?;
    let (found, total) = schedules.list(&filter, page).await?;
    Ok(pb::ListTaskSchedulesResponse {
        task_schedules: super::fit_reply(found.iter().map(conv::pb_schedule).collect()),
        total: wire_count(total),
    })
}

pub(crate) async fn update(
    schedules: &ScheduleManager,
    req: pb::UpdateTaskScheduleRequest,
) -> ApiResult<pb::TaskSchedule> {
    let id = conv::schedule_id(req.id.as_ref(), "id")?;
    let update = conv::schedule_update(&req)?;
    let schedule = schedules.update(id, update).await?;
    Ok(conv::pb_schedule(&schedule))
}

pub(crate) async fn pause(
    schedules: &ScheduleManager,
    req: pb::PauseTaskScheduleRequest,
) -> ApiResult<pb::TaskSchedule> {
    let id = conv::schedule_id(req.id.as_ref(), "id")?;
    let schedule = schedules.pause(id).await?;
    Ok(conv::pb_schedule(&schedule))
}

pub(crate) async fn resume(
    schedules: &ScheduleManager,
    req: pb::ResumeTaskScheduleRequest,
) -> ApiResult<pb::TaskSchedule> {
    let id = conv::schedule_id(req.id.as_ref(), "id")?;
    let schedule = schedules.resume(id).await?;
    Ok(conv::pb_schedule(&schedule))
}

pub(crate) async fn delete(
    schedules: &ScheduleManager,
    req: pb::DeleteTaskScheduleRequest,
) -> ApiResult<()> {
    let id = conv::schedule_id(req.id.as_ref(), "id")?;
    schedules.delete(id).await?;
    Ok(())
}

pub(crate) async fn trigger(
    schedules: &ScheduleManager,
    req: pb::TriggerTaskScheduleRequest,
) -> ApiResult<pb::SubmitTaskResponse> {
    let id = conv::schedule_id(req.id.as_ref(), "id")?;
    let ids = schedules.trigger(id).await?;
    Ok(pb::SubmitTaskResponse {
        task_ids: ids.into_iter().map(pb_uuid).collect(),
    })
}

pub(crate) async fn add_scope(
    schedules: &ScheduleManager,
    req: pb::AddTaskScheduleScopeRequest,
) -> ApiResult<pb::AddTaskScheduleScopeResponse> {
    let id = conv::schedule_id(req.schedule_id.as_ref(), "schedule_id")?;
    let target = conv::scope_target(req.target_spec.as_ref(), "target_spec")?;
    let scopes = schedules.add_scopes(id, &target).await?;
    Ok(pb::AddTaskScheduleScopeResponse {
        scopes: scopes.iter().map(conv::pb_scope).collect(),
    })
}

pub(crate) async fn remove_scope(
    schedules: &ScheduleManager,
    req: pb::RemoveTaskScheduleScopeRequest,
) -> ApiResult<()> {
    let id = conv::schedule_id(req.scope_id.as_ref(), "scope_id")?;
    schedules.remove_scope(id).await?;
    Ok(())
}

pub(crate) async fn update_scope(
    schedules: &ScheduleManager,
    req: pb::UpdateTaskScheduleScopeRequest,
) -> ApiResult<pb::UpdateTaskScheduleScopeResponse> {
    let id = conv::schedule_id(req.schedule_id.as_ref(), "schedule_id")?;
    let target = conv::scope_target(req.desired_scope.as_ref(), "desired_scope")?;
    let done = schedules.update_scopes(id, &target).await?;
    Ok(pb::UpdateTaskScheduleScopeResponse {
        scopes: done.scopes.iter().map(conv::pb_scope).collect(),
        added: wire_count(done.added),
        removed: wire_count(done.removed),
        updated: wire_count(done.updated),
    })
}

pub(crate) async fn list_scopes(
    schedules: &ScheduleManager,
    req: pb::ListTaskScheduleScopesRequest,
) -> ApiResult<pb::ListTaskScheduleScopesResponse> {
    let id = conv::schedule_id(req.schedule_id.as_ref(), "schedule_id")?;
    let scopes = schedules.scopes(id).await?;
    Ok(pb::ListTaskScheduleScopesResponse {
        scopes: scopes.iter().map(conv::pb_scope).collect(),
    })
}

pub(crate) async fn check_conflicts(
    schedules: &ScheduleManager,
    req: pb::CheckScheduleConflictsRequest,
) -> ApiResult<pb::CheckScheduleConflictsResponse> {
    let (template, target, exclude) = conv::conflicts_query(&req)?;
    let conflicts = schedules
        .check_conflicts(&template, &target, exclude)
        .await?;
    Ok(pb::CheckScheduleConflictsResponse {
        conflicts: conflicts.iter().map(conv::pb_schedule).collect(),
    })
}
