//! The 14 task-schedule RPCs of `v1.Flow`: convert, delegate to the
//! engine's [`ScheduleManager`], convert back. `flow.rs` forwards to these.
//!
//! The engine's errors reach the wire through [`ApiError`] and so through
//! the one mapping in `error::to_status`.

use rackflow_api::v1 as pb;
use rackflow_engine::schedules::ScheduleManager;
use rackflow_store::ScheduleFilter;
use tonic::Response;

use crate::convert::schedules as conv;
use crate::convert::{self, Invalid, pb_uuid, wire_count};
use crate::error::ApiError;

type Reply<T> = Result<Response<T>, tonic::Status>;

fn refuse_credentials(op: Option<&pb::ScheduledOperation>) -> Result<(), ApiError> {
    if convert::has_authentication_data(conv::scheduled_authentication_data(op)) {
        return Err(ApiError::FailedPrecondition(
            "authentication_data requires a data encryption key, which is not configured".into(),
        ));
    }
    Ok(())
}

pub(crate) async fn create(
    m: &ScheduleManager,
    req: pb::CreateTaskScheduleRequest,
) -> Reply<pb::TaskSchedule> {
    refuse_credentials(req.operation.as_ref())?;
    let new = conv::new_schedule(&req).map_err(ApiError::from)?;
    let s = m.create(new).await.map_err(ApiError::from)?;
    Ok(Response::new(conv::pb_schedule(&s)))
}

pub(crate) async fn get(
    m: &ScheduleManager,
    req: pb::GetTaskScheduleRequest,
) -> Reply<pb::TaskSchedule> {
    let id = conv::schedule_id(req.id.as_ref(), "id").map_err(ApiError::from)?;
    let s = m.get(id).await.map_err(ApiError::from)?;
    Ok(Response::new(conv::pb_schedule(&s)))
}

pub(crate) async fn list(
    m: &ScheduleManager,
    req: pb::ListTaskSchedulesRequest,
) -> Reply<pb::ListTaskSchedulesResponse> {
    let rack_id = match req.rack_id.as_ref().filter(|u| !u.id.trim().is_empty()) {
        None => None,
        Some(u) => Some(
            convert::parse_uuid(&u.id)
                .map_err(|e| ApiError::Invalid(Invalid(format!("invalid rack_id: {e}"))))?,
        ),
    };
    // Pagination is optional here: omitted → every schedule (spec §6.5).
    let page = match req.pagination.as_ref() {
        None => rackflow_domain::run::Page {
            offset: 0,
            limit: 0,
        },
        Some(p) => convert::page(Some(p)).map_err(ApiError::from)?,
    };
    let filter = ScheduleFilter {
        rack_id,
        enabled_only: req.enabled_only.unwrap_or(false),
    };
    let (schedules, total) = m.list(&filter, page).await.map_err(ApiError::from)?;
    Ok(Response::new(pb::ListTaskSchedulesResponse {
        task_schedules: schedules.iter().map(conv::pb_schedule).collect(),
        total: wire_count(total),
    }))
}

pub(crate) async fn update(
    m: &ScheduleManager,
    req: pb::UpdateTaskScheduleRequest,
) -> Reply<pb::TaskSchedule> {
    let id = conv::schedule_id(req.id.as_ref(), "id").map_err(ApiError::from)?;
    let update = conv::schedule_update(&req).map_err(ApiError::from)?;
    let s = m.update(id, update).await.map_err(ApiError::from)?;
    Ok(Response::new(conv::pb_schedule(&s)))
}

pub(crate) async fn pause(
    m: &ScheduleManager,
    req: pb::PauseTaskScheduleRequest,
) -> Reply<pb::TaskSchedule> {
    let id = conv::schedule_id(req.id.as_ref(), "id").map_err(ApiError::from)?;
    let s = m.pause(id).await.map_err(ApiError::from)?;
    Ok(Response::new(conv::pb_schedule(&s)))
}

pub(crate) async fn resume(
    m: &ScheduleManager,
    req: pb::ResumeTaskScheduleRequest,
) -> Reply<pb::TaskSchedule> {
    let id = conv::schedule_id(req.id.as_ref(), "id").map_err(ApiError::from)?;
    let s = m.resume(id).await.map_err(ApiError::from)?;
    Ok(Response::new(conv::pb_schedule(&s)))
}

pub(crate) async fn delete(m: &ScheduleManager, req: pb::DeleteTaskScheduleRequest) -> Reply<()> {
    let id = conv::schedule_id(req.id.as_ref(), "id").map_err(ApiError::from)?;
    m.delete(id).await.map_err(ApiError::from)?;
    Ok(Response::new(()))
}

pub(crate) async fn trigger(
    m: &ScheduleManager,
    req: pb::TriggerTaskScheduleRequest,
) -> Reply<pb::SubmitTaskResponse> {
    let id = conv::schedule_id(req.id.as_ref(), "id").map_err(ApiError::from)?;
    let ids = m.trigger(id).await.map_err(ApiError::from)?;
    Ok(Response::new(pb::SubmitTaskResponse {
        task_ids: ids.into_iter().map(pb_uuid).collect(),
    }))
}

pub(crate) async fn add_scope(
    m: &ScheduleManager,
    req: pb::AddTaskScheduleScopeRequest,
) -> Reply<pb::AddTaskScheduleScopeResponse> {
    let id = conv::schedule_id(req.schedule_id.as_ref(), "schedule_id").map_err(ApiError::from)?;
    let target =
        conv::scope_target(req.target_spec.as_ref(), "target_spec").map_err(ApiError::from)?;
    let scopes = m.add_scopes(id, &target).await.map_err(ApiError::from)?;
    Ok(Response::new(pb::AddTaskScheduleScopeResponse {
        scopes: scopes.iter().map(conv::pb_scope).collect(),
    }))
}

pub(crate) async fn remove_scope(
    m: &ScheduleManager,
    req: pb::RemoveTaskScheduleScopeRequest,
) -> Reply<()> {
    let id = conv::schedule_id(req.scope_id.as_ref(), "scope_id").map_err(ApiError::from)?;
    m.remove_scope(id).await.map_err(ApiError::from)?;
    Ok(Response::new(()))
}

pub(crate) async fn update_scope(
    m: &ScheduleManager,
    req: pb::UpdateTaskScheduleScopeRequest,
) -> Reply<pb::UpdateTaskScheduleScopeResponse> {
    let id = conv::schedule_id(req.schedule_id.as_ref(), "schedule_id").map_err(ApiError::from)?;
    let target =
        conv::scope_target(req.desired_scope.as_ref(), "desired_scope").map_err(ApiError::from)?;
    let done = m.update_scopes(id, &target).await.map_err(ApiError::from)?;
    Ok(Response::new(pb::UpdateTaskScheduleScopeResponse {
        scopes: done.scopes.iter().map(conv::pb_scope).collect(),
        added: wire_count(done.added),
        removed: wire_count(done.removed),
        updated: wire_count(done.updated),
    }))
}

pub(crate) async fn list_scopes(
    m: &ScheduleManager,
    req: pb::ListTaskScheduleScopesRequest,
) -> Reply<pb::ListTaskScheduleScopesResponse> {
    let id = conv::schedule_id(req.schedule_id.as_ref(), "schedule_id").map_err(ApiError::from)?;
    let scopes = m.scopes(id).await.map_err(ApiError::from)?;
    Ok(Response::new(pb::ListTaskScheduleScopesResponse {
        scopes: scopes.iter().map(conv::pb_scope).collect(),
    }))
}

pub(crate) async fn check_conflicts(
    m: &ScheduleManager,
    req: pb::CheckScheduleConflictsRequest,
) -> Reply<pb::CheckScheduleConflictsResponse> {
    let (template, target) =
        conv::scheduled_operation(req.operation.as_ref()).map_err(ApiError::from)?;
    let exclude = match req
        .exclude_schedule_id
        .as_ref()
        .filter(|u| !u.id.trim().is_empty())
    {
        None => None,
        Some(u) => Some(convert::parse_uuid(&u.id).map_err(|e| {
            ApiError::Invalid(Invalid(format!("invalid exclude_schedule_id: {e}")))
        })?),
    };
    let conflicts = m
        .check_conflicts(&template, &target, exclude)
        .await
        .map_err(ApiError::from)?;
    Ok(Response::new(pb::CheckScheduleConflictsResponse {
        conflicts: conflicts.iter().map(conv::pb_schedule).collect(),
    }))
}
