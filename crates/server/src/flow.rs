//! The `v1.Flow` service: thin handlers that convert, delegate and convert back.

use std::sync::Arc;

use rackflow_api::v1 as pb;
use rackflow_api::v1::flow_extensions_server::FlowExtensions;
use rackflow_api::v1::flow_server::Flow;
use rackflow_domain::inventory::Rack;
use rackflow_domain::run::Page;
use rackflow_engine::dispatcher::Dispatcher;
use rackflow_engine::runs::RunManager;
use rackflow_engine::schedules::ScheduleManager;
use rackflow_engine::tasks::{SubmitRequest, TaskManager};
use rackflow_store::{ComponentFilterQuery, Store};
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::convert::{self, RandomSeeds, parse_uuid, pb_uuid, wire_count};
use crate::error::ApiError;

type Reply<T> = Result<Response<T>, Status>;

pub struct FlowService {
    store: Arc<dyn Store>,
    runs: RunManager,
    tasks: Arc<TaskManager>,
    dispatcher: Arc<Dispatcher>,
    schedules: Arc<ScheduleManager>,
}

impl FlowService {
    pub fn new(
        store: Arc<dyn Store>,
        runs: RunManager,
        tasks: Arc<TaskManager>,
        dispatcher: Arc<Dispatcher>,
        schedules: Arc<ScheduleManager>,
    ) -> Self {
        FlowService {
            store,
            runs,
            tasks,
            dispatcher,
            schedules,
        }
    }

    fn control_reply(run: &rackflow_domain::run::OperationRun) -> Reply<pb::OperationRun> {
        Ok(Response::new(convert::operation_run(run, None)))
    }

    async fn submit(&self, req: SubmitRequest) -> Reply<pb::SubmitTaskResponse> {
        let ids = self.tasks.submit(req).await.map_err(ApiError::from)?;
        Ok(Response::new(pb::SubmitTaskResponse {
            task_ids: ids.into_iter().map(pb_uuid).collect(),
        }))
    }

    fn rule_id(id: Option<&pb::Uuid>) -> Result<Uuid, ApiError> {
        Ok(convert::required_id(id, "rule_id is required")?)
    }

    fn rack_id(id: Option<&pb::Uuid>) -> Result<Uuid, ApiError> {
        Ok(convert::required_id(id, "rack_id is required")?)
    }

    /// A rack by UUID, or — when the id is not a UUID — by external id.
    async fn find_rack(&self, id: Option<&pb::Uuid>) -> Result<Rack, ApiError> {
        let text = id.map(|u| u.id.trim()).unwrap_or_default();
        if text.is_empty() {
            return Err(convert::Invalid("rack id is required".into()).into());
        }
        let found = match parse_uuid(text) {
            Ok(uuid) => self.store.rack_get(uuid, false).await?,
            Err(_) => self.store.rack_get_by_external_id(text).await?,
        };
        found.ok_or_else(|| ApiError::NotFound(format!("rack {text} not found")))
    }

    fn run_id(id: Option<&pb::Uuid>) -> Result<Uuid, ApiError> {
        Ok(convert::required_id(id, "operation run ID is required")?)
    }

    /// The run's firmware credentials, refused like a plain upgrade's.
    fn check_authentication_data(req: &pb::CreateOperationRunRequest) -> Result<(), ApiError> {
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
        refuse_authentication_data(data)
    }
}

/// Firmware credentials need encryption at rest, which needs a key; none is
/// configured in this build, so non-empty credentials are refused rather
/// than stored in clear (operation runs and plain firmware tasks alike).
fn refuse_authentication_data(
    data: Option<&pb::FirmwareAuthenticationData>,
) -> Result<(), ApiError> {
    if convert::has_authentication_data(data) {
        return Err(ApiError::FailedPrecondition(
            "authentication_data requires a data encryption key, which is not configured".into(),
        ));
    }
    Ok(())
}

#[tonic::async_trait]
impl Flow for FlowService {
    async fn version(&self, _: Request<pb::VersionRequest>) -> Reply<pb::BuildInfo> {
        Ok(Response::new(pb::BuildInfo {
            version: env!("CARGO_PKG_VERSION").to_string(),
            build_time: option_env!("RACKFLOW_BUILD_TIME").unwrap_or("").to_string(),
            git_commit: option_env!("RACKFLOW_GIT_COMMIT").unwrap_or("").to_string(),
        }))
    }

    async fn create_expected_rack(
        &self,
        req: Request<pb::CreateExpectedRackRequest>,
    ) -> Reply<pb::CreateExpectedRackResponse> {
        let (rack, components) =
            convert::new_rack(req.get_ref().rack.as_ref()).map_err(ApiError::from)?;
        self.store
            .rack_create(&rack, &components)
            .await
            .map_err(ApiError::from)?;
        tracing::info!(rack_id = %rack.id, name = %rack.name, components = components.len(), "rack created");
        Ok(Response::new(pb::CreateExpectedRackResponse {
            id: Some(pb_uuid(rack.id)),
        }))
    }

    async fn get_rack_info_by_id(
        &self,
        req: Request<pb::GetRackInfoByIdRequest>,
    ) -> Reply<pb::GetRackInfoResponse> {
        let req = req.into_inner();
        let rack = self.find_rack(req.id.as_ref()).await?;
        let components = if req.with_components {
            self.store
                .components_of_racks(&[rack.id])
                .await
                .map_err(ApiError::from)?
        } else {
            Vec::new()
        };
        Ok(Response::new(pb::GetRackInfoResponse {
            rack: Some(convert::pb_rack(&rack, &components)),
        }))
    }

    async fn get_list_of_racks(
        &self,
        req: Request<pb::GetListOfRacksRequest>,
    ) -> Reply<pb::GetListOfRacksResponse> {
        let req = req.into_inner();
        let filter = convert::rack_filter(&req.filters, req.with_external_id_only)
            .map_err(ApiError::from)?;
        let page = convert::page(req.pagination.as_ref()).map_err(ApiError::from)?;
        let (racks, total) = self
            .store
            .rack_list(&filter, page)
            .await
            .map_err(ApiError::from)?;
        let mut components_by_rack: std::collections::HashMap<Uuid, Vec<_>> = Default::default();
        if req.with_components && !racks.is_empty() {
            let ids: Vec<Uuid> = racks.iter().map(|r| r.id).collect();
            for c in self
                .store
                .components_of_racks(&ids)
                .await
                .map_err(ApiError::from)?
            {
                if let Some(rack_id) = c.rack_id {
                    components_by_rack.entry(rack_id).or_default().push(c);
                }
            }
        }
        Ok(Response::new(pb::GetListOfRacksResponse {
            racks: racks
                .iter()
                .map(|r| {
                    convert::pb_rack(
                        r,
                        components_by_rack
                            .get(&r.id)
                            .map(Vec::as_slice)
                            .unwrap_or(&[]),
                    )
                })
                .collect(),
            total: wire_count(total),
        }))
    }

    async fn delete_rack(
        &self,
        req: Request<pb::DeleteRackRequest>,
    ) -> Reply<pb::DeleteRackResponse> {
        let id = convert::required_id(req.get_ref().id.as_ref(), "rack id is required")
            .map_err(ApiError::from)?;
        if !self
            .store
            .rack_soft_delete(id)
            .await
            .map_err(ApiError::from)?
        {
            return Err(ApiError::NotFound(format!("rack {id} not found")).into());
        }
        tracing::info!(rack_id = %id, "rack deleted");
        Ok(Response::new(pb::DeleteRackResponse {}))
    }

    async fn get_components(
        &self,
        req: Request<pb::GetComponentsRequest>,
    ) -> Reply<pb::GetComponentsResponse> {
        let req = req.into_inner();
        let mut query = ComponentFilterQuery::default();
        convert::component_filter(&req.filters, &mut query).map_err(ApiError::from)?;
        if let Some(spec) = &req.target_spec {
            use rackflow_domain::target::{ComponentTarget, RackIdentifier, TargetSpec};
            match convert::target_spec(spec)
                .map_err(|e| ApiError::Invalid(convert::Invalid(format!("target_spec: {e}"))))?
            {
                None => {}
                Some(TargetSpec::Racks(racks)) => {
                    for rack in racks {
                        let found = match &rack.identifier {
                            RackIdentifier::Id(id) => self
                                .store
                                .rack_get(*id, false)
                                .await
                                .map_err(ApiError::from)?,
                            RackIdentifier::ExternalId(e) => self
                                .store
                                .rack_get_by_external_id(e)
                                .await
                                .map_err(ApiError::from)?,
                            RackIdentifier::Name(n) => self
                                .store
                                .rack_get_by_name(n)
                                .await
                                .map_err(ApiError::from)?
                                .into_iter()
                                .next(),
                        };
                        let found = found.ok_or_else(|| {
                            ApiError::NotFound(format!("rack {:?} not found", rack.identifier))
                        })?;
                        query.rack_ids.push(found.id);
                        query.types.extend(rack.component_types);
                    }
                }
                Some(TargetSpec::Components(components)) => {
                    for c in components {
                        match c {
                            ComponentTarget::Id(id) => query.ids.push(id),
                            ComponentTarget::External { id, .. } => query.external_ids.push(id),
                        }
                    }
                }
                Some(TargetSpec::NvlDomains(_)) => {
                    return Err(ApiError::NotFound(
                        "NVLink domains are not in this inventory".into(),
                    )
                    .into());
                }
            }
        }
        let page = convert::page(req.pagination.as_ref()).map_err(ApiError::from)?;
        let (components, total) = self
            .store
            .component_list(&query, page)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::GetComponentsResponse {
            components: components
                .iter()
                .map(|c| convert::pb_component(c, None))
                .collect(),
            total: wire_count(total),
        }))
    }

    async fn add_component(
        &self,
        req: Request<pb::AddComponentRequest>,
    ) -> Reply<pb::AddComponentResponse> {
        let Some(component) = req.get_ref().component.as_ref() else {
            return Err(ApiError::Invalid(convert::Invalid("component is required".into())).into());
        };
        let rack_id = match component
            .rack_id
            .as_ref()
            .filter(|u| !u.id.trim().is_empty())
        {
            None => None,
            Some(u) => {
                let id = parse_uuid(&u.id).map_err(|e| {
                    ApiError::Invalid(convert::Invalid(format!("component.rack_id: {e}")))
                })?;
                if self
                    .store
                    .rack_get(id, false)
                    .await
                    .map_err(ApiError::from)?
                    .is_none()
                {
                    return Err(ApiError::NotFound(format!("rack {id} not found")).into());
                }
                Some(id)
            }
        };
        let record =
            convert::new_component("component", component, rack_id).map_err(ApiError::from)?;
        self.store
            .component_create(&record)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::AddComponentResponse {
            component: Some(convert::pb_component(&record, None)),
        }))
    }

    async fn patch_component(
        &self,
        req: Request<pb::PatchComponentRequest>,
    ) -> Reply<pb::PatchComponentResponse> {
        let req = req.into_inner();
        let id = convert::required_id(req.id.as_ref(), "component id is required")
            .map_err(ApiError::from)?;
        let patch = convert::component_patch(&req).map_err(ApiError::from)?;
        // The store refuses a patch to a missing rack with NotFound.
        let updated = self
            .store
            .component_patch(id, &patch)
            .await
            .map_err(ApiError::from)?
            .ok_or_else(|| ApiError::NotFound(format!("component {id} not found")))?;
        Ok(Response::new(pb::PatchComponentResponse {
            component: Some(convert::pb_component(&updated, None)),
        }))
    }

    async fn create_operation_run(
        &self,
        req: Request<pb::CreateOperationRunRequest>,
    ) -> Reply<pb::CreateOperationRunResponse> {
        let req = req.into_inner();
        Self::check_authentication_data(&req)?;
        let run = convert::new_run(&req, &mut RandomSeeds).map_err(ApiError::from)?;
        let id = self.runs.create(&run).await.map_err(ApiError::from)?;
        self.dispatcher.wake_run(id);
        Ok(Response::new(pb::CreateOperationRunResponse {
            id: Some(pb_uuid(id)),
        }))
    }

    async fn get_operation_run(
        &self,
        req: Request<pb::GetOperationRunRequest>,
    ) -> Reply<pb::GetOperationRunResponse> {
        let req = req.into_inner();
        let id = Self::run_id(req.id.as_ref())?;
        let (run, stats) = self
            .runs
            .get(id, req.include_stats)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::GetOperationRunResponse {
            operation_run: Some(convert::operation_run(&run, stats.as_ref())),
        }))
    }

    async fn list_operation_runs(
        &self,
        req: Request<pb::ListOperationRunsRequest>,
    ) -> Reply<pb::ListOperationRunsResponse> {
        let req = req.into_inner();
        let filter = convert::run_list_filter(req.filter.as_ref()).map_err(ApiError::from)?;
        let page = convert::page(req.pagination.as_ref()).map_err(ApiError::from)?;
        let (runs, total) = self
            .runs
            .list(&filter, page)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ListOperationRunsResponse {
            operation_runs: runs.iter().map(convert::run_summary).collect(),
            total: wire_count(total),
        }))
    }

    async fn list_operation_run_targets(
        &self,
        req: Request<pb::ListOperationRunTargetsRequest>,
    ) -> Reply<pb::ListOperationRunTargetsResponse> {
        let req = req.into_inner();
        let id = Self::run_id(req.operation_run_id.as_ref())?;
        let status = convert::target_status_filter(req.status).map_err(ApiError::from)?;
        let scope = convert::phase_scope(req.phase_scope).map_err(ApiError::from)?;
        let page: Page = convert::page(req.pagination.as_ref()).map_err(ApiError::from)?;
        let result = self
            .runs
            .list_targets(id, status, scope, page)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ListOperationRunTargetsResponse {
            targets: result
                .targets
                .iter()
                .map(|(t, ext)| convert::run_target(t, ext))
                .collect(),
            total: wire_count(result.total),
        }))
    }

    async fn pause_operation_run(
        &self,
        req: Request<pb::PauseOperationRunRequest>,
    ) -> Reply<pb::OperationRun> {
        let id = Self::run_id(req.get_ref().id.as_ref())?;
        let run = self.dispatcher.pause(id).await.map_err(ApiError::from)?;
        Self::control_reply(&run)
    }

    async fn resume_operation_run(
        &self,
        req: Request<pb::ResumeOperationRunRequest>,
    ) -> Reply<pb::OperationRun> {
        let id = Self::run_id(req.get_ref().id.as_ref())?;
        let run = self.dispatcher.resume(id).await.map_err(ApiError::from)?;
        Self::control_reply(&run)
    }

    async fn advance_operation_run_phase(
        &self,
        req: Request<pb::AdvanceOperationRunPhaseRequest>,
    ) -> Reply<pb::OperationRun> {
        let id = Self::run_id(req.get_ref().id.as_ref())?;
        let run = self
            .dispatcher
            .advance(id, req.get_ref().expected_phase_index)
            .await
            .map_err(ApiError::from)?;
        Self::control_reply(&run)
    }

    async fn cancel_operation_run(
        &self,
        req: Request<pb::CancelOperationRunRequest>,
    ) -> Reply<pb::OperationRun> {
        let id = Self::run_id(req.get_ref().id.as_ref())?;
        let run = self
            .dispatcher
            .cancel(id, req.get_ref().reason.trim())
            .await
            .map_err(ApiError::from)?;
        Self::control_reply(&run)
    }

    async fn upgrade_firmware(
        &self,
        req: Request<pb::UpgradeFirmwareRequest>,
    ) -> Reply<pb::SubmitTaskResponse> {
        let req = req.into_inner();
        refuse_authentication_data(req.authentication_data.as_ref())?;
        let submit = convert::upgrade_firmware(&req).map_err(ApiError::from)?;
        self.submit(submit).await
    }

    async fn power_on_rack(
        &self,
        req: Request<pb::PowerOnRackRequest>,
    ) -> Reply<pb::SubmitTaskResponse> {
        let submit = convert::power_on(req.get_ref()).map_err(ApiError::from)?;
        self.submit(submit).await
    }

    async fn power_off_rack(
        &self,
        req: Request<pb::PowerOffRackRequest>,
    ) -> Reply<pb::SubmitTaskResponse> {
        let submit = convert::power_off(req.get_ref()).map_err(ApiError::from)?;
        self.submit(submit).await
    }

    async fn power_reset_rack(
        &self,
        req: Request<pb::PowerResetRackRequest>,
    ) -> Reply<pb::SubmitTaskResponse> {
        let submit = convert::power_reset(req.get_ref()).map_err(ApiError::from)?;
        self.submit(submit).await
    }

    async fn list_tasks(&self, req: Request<pb::ListTasksRequest>) -> Reply<pb::ListTasksResponse> {
        let req = req.into_inner();
        let rack_id = match req.rack_id.as_ref().filter(|u| !u.id.trim().is_empty()) {
            None => None,
            Some(u) => Some(self.find_rack(Some(u)).await?.id),
        };
        let component_id =
            match req
                .component_id
                .as_ref()
                .filter(|u| !u.id.trim().is_empty())
            {
                None => None,
                Some(u) => Some(parse_uuid(&u.id).map_err(|e| {
                    ApiError::Invalid(convert::Invalid(format!("component_id: {e}")))
                })?),
            };
        let filter = rackflow_store::TaskFilter {
            rack_id,
            component_id,
            active_only: req.active_only,
            statuses: Vec::new(),
        };
        let page = convert::page(req.pagination.as_ref()).map_err(ApiError::from)?;
        let (tasks, total) = self
            .store
            .task_list(&filter, page, req.with_report)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ListTasksResponse {
            tasks: tasks
                .iter()
                .map(|t| convert::pb_task(t, req.with_report))
                .collect(),
            total: wire_count(total),
        }))
    }

    async fn get_tasks_by_i_ds(
        &self,
        req: Request<pb::GetTasksByIDsRequest>,
    ) -> Reply<pb::GetTasksByIDsResponse> {
        let mut ids = Vec::new();
        for (i, id) in req.get_ref().task_ids.iter().enumerate() {
            ids.push(
                parse_uuid(&id.id).map_err(|e| {
                    ApiError::Invalid(convert::Invalid(format!("task_ids[{i}]: {e}")))
                })?,
            );
        }
        let tasks = self
            .store
            .tasks_get_many(&ids)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::GetTasksByIDsResponse {
            tasks: tasks.iter().map(|t| convert::pb_task(t, true)).collect(),
        }))
    }

    async fn cancel_task(
        &self,
        req: Request<pb::CancelTaskRequest>,
    ) -> Reply<pb::CancelTaskResponse> {
        let id = convert::required_id(req.get_ref().task_id.as_ref(), "task_id is required")
            .map_err(ApiError::from)?;
        let task = self.tasks.cancel(id).await.map_err(ApiError::from)?;
        Ok(Response::new(pb::CancelTaskResponse {
            task: Some(convert::pb_task(&task, true)),
        }))
    }

    async fn create_operation_rule(
        &self,
        req: Request<pb::CreateOperationRuleRequest>,
    ) -> Reply<pb::CreateOperationRuleResponse> {
        let req = req.into_inner();
        let task_type =
            convert::rule_type(req.operation_type, "operation_type").map_err(ApiError::from)?;
        let invalid = |e: rackflow_domain::rule::RuleError| {
            ApiError::Invalid(convert::Invalid(e.to_string()))
        };
        rackflow_domain::rule::validate_rule_record(&req.name, task_type, &req.operation_code)
            .map_err(invalid)?;
        let definition = rackflow_domain::rule::parse_rule_definition(&req.rule_definition_json)
            .map_err(invalid)?;
        let now = chrono::Utc::now();
        let rule = rackflow_domain::rule::OperationRule {
            id: Uuid::new_v4(),
            name: req.name.trim().to_string(),
            description: req.description.clone(),
            operation_type: task_type,
            operation_code: req.operation_code.clone(),
            definition,
            is_default: req.is_default,
            created_at: now,
            updated_at: now,
        };
        self.store
            .rule_create(&rule)
            .await
            .map_err(ApiError::from)?;
        tracing::info!(rule_id = %rule.id, name = %rule.name, operation_code = %rule.operation_code, is_default = rule.is_default, "operation rule created");
        Ok(Response::new(pb::CreateOperationRuleResponse {
            id: Some(pb_uuid(rule.id)),
        }))
    }

    async fn update_operation_rule(
        &self,
        req: Request<pb::UpdateOperationRuleRequest>,
    ) -> Reply<()> {
        let req = req.into_inner();
        let id = Self::rule_id(req.rule_id.as_ref())?;
        if req.name.as_ref().is_some_and(|n| n.trim().is_empty()) {
            return Err(ApiError::Invalid(convert::Invalid("name is required".into())).into());
        }
        // The length rule of create applies to a renamed rule too; unchecked,
        // the database refused it and the caller got an Internal error.
        if req.name.as_ref().is_some_and(|n| {
            n.trim().chars().count() > rackflow_domain::rule::validate::MAX_RULE_NAME_LEN
        }) {
            return Err(ApiError::Invalid(convert::Invalid(
                rackflow_domain::rule::RuleError::NameTooLong.to_string(),
            ))
            .into());
        }
        let definition = match &req.rule_definition_json {
            Some(json) => Some(
                rackflow_domain::rule::parse_rule_definition(json)
                    .map_err(|e| ApiError::Invalid(convert::Invalid(e.to_string())))?,
            ),
            None => None,
        };
        self.store
            .rule_update(
                id,
                req.name.as_deref().map(str::trim),
                req.description.as_deref(),
                definition.as_ref(),
            )
            .await
            .map_err(ApiError::from)?
            .ok_or_else(|| ApiError::NotFound(format!("operation rule {id} not found")))?;
        Ok(Response::new(()))
    }

    async fn delete_operation_rule(
        &self,
        req: Request<pb::DeleteOperationRuleRequest>,
    ) -> Reply<()> {
        let id = Self::rule_id(req.get_ref().rule_id.as_ref())?;
        if !self.store.rule_delete(id).await.map_err(ApiError::from)? {
            return Err(ApiError::NotFound(format!("operation rule {id} not found")).into());
        }
        Ok(Response::new(()))
    }

    async fn get_operation_rule(
        &self,
        req: Request<pb::GetOperationRuleRequest>,
    ) -> Reply<pb::OperationRule> {
        let id = Self::rule_id(req.get_ref().rule_id.as_ref())?;
        let rule = self
            .store
            .rule_get(id)
            .await
            .map_err(ApiError::from)?
            .ok_or_else(|| ApiError::NotFound(format!("operation rule {id} not found")))?;
        Ok(Response::new(convert::pb_rule(&rule)))
    }

    async fn list_operation_rules(
        &self,
        req: Request<pb::ListOperationRulesRequest>,
    ) -> Reply<pb::ListOperationRulesResponse> {
        let req = req.into_inner();
        let task_type = match req.operation_type {
            None | Some(0) => None,
            Some(v) => Some(convert::rule_type(v, "operation_type").map_err(ApiError::from)?),
        };
        let offset = req.offset.unwrap_or(0);
        let limit = req.limit.unwrap_or(100);
        if offset < 0 || limit < 0 {
            return Err(ApiError::Invalid(convert::Invalid(
                "offset and limit must not be negative".into(),
            ))
            .into());
        }
        let page = Page {
            offset: i64::from(offset),
            limit: i64::from(limit),
        };
        let (rules, total) = self
            .store
            .rule_list(task_type, req.is_default, page)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ListOperationRulesResponse {
            rules: rules.iter().map(convert::pb_rule).collect(),
            total_count: wire_count(total),
        }))
    }

    async fn set_rule_as_default(&self, req: Request<pb::SetRuleAsDefaultRequest>) -> Reply<()> {
        let id = Self::rule_id(req.get_ref().rule_id.as_ref())?;
        if !self
            .store
            .rule_set_default(id)
            .await
            .map_err(ApiError::from)?
        {
            return Err(ApiError::NotFound(format!("operation rule {id} not found")).into());
        }
        Ok(Response::new(()))
    }

    async fn associate_rule_with_rack(
        &self,
        req: Request<pb::AssociateRuleWithRackRequest>,
    ) -> Reply<()> {
        let rack_id = Self::rack_id(req.get_ref().rack_id.as_ref())?;
        let rule_id = Self::rule_id(req.get_ref().rule_id.as_ref())?;
        self.store
            .rule_associate(rack_id, rule_id)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(()))
    }

    async fn disassociate_rule_from_rack(
        &self,
        req: Request<pb::DisassociateRuleFromRackRequest>,
    ) -> Reply<()> {
        let req = req.into_inner();
        let rack_id = Self::rack_id(req.rack_id.as_ref())?;
        let task_type =
            convert::rule_type(req.operation_type, "operation_type").map_err(ApiError::from)?;
        self.store
            .rule_disassociate(rack_id, task_type, &req.operation_code)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(()))
    }

    async fn get_rack_rule_association(
        &self,
        req: Request<pb::GetRackRuleAssociationRequest>,
    ) -> Reply<pb::GetRackRuleAssociationResponse> {
        let req = req.into_inner();
        let rack_id = Self::rack_id(req.rack_id.as_ref())?;
        let task_type =
            convert::rule_type(req.operation_type, "operation_type").map_err(ApiError::from)?;
        let association = self
            .store
            .rule_association_get(rack_id, task_type, &req.operation_code)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::GetRackRuleAssociationResponse {
            rule_id: Some(pb_uuid(association.map_or(Uuid::nil(), |a| a.rule_id))),
        }))
    }

    async fn list_rack_rule_associations(
        &self,
        req: Request<pb::ListRackRuleAssociationsRequest>,
    ) -> Reply<pb::ListRackRuleAssociationsResponse> {
        let rack_id = Self::rack_id(req.get_ref().rack_id.as_ref())?;
        let associations = self
            .store
            .rule_associations_list(rack_id)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ListRackRuleAssociationsResponse {
            associations: associations.iter().map(convert::pb_association).collect(),
        }))
    }

    // ---- task schedules (crate::schedules) ----

    async fn create_task_schedule(
        &self,
        req: Request<pb::CreateTaskScheduleRequest>,
    ) -> Reply<pb::TaskSchedule> {
        crate::schedules::create(&self.schedules, req.into_inner()).await
    }

    async fn get_task_schedule(
        &self,
        req: Request<pb::GetTaskScheduleRequest>,
    ) -> Reply<pb::TaskSchedule> {
        crate::schedules::get(&self.schedules, req.into_inner()).await
    }

    async fn list_task_schedules(
        &self,
        req: Request<pb::ListTaskSchedulesRequest>,
    ) -> Reply<pb::ListTaskSchedulesResponse> {
        crate::schedules::list(&self.schedules, req.into_inner()).await
    }

    async fn update_task_schedule(
        &self,
        req: Request<pb::UpdateTaskScheduleRequest>,
    ) -> Reply<pb::TaskSchedule> {
        crate::schedules::update(&self.schedules, req.into_inner()).await
    }

    async fn pause_task_schedule(
        &self,
        req: Request<pb::PauseTaskScheduleRequest>,
    ) -> Reply<pb::TaskSchedule> {
        crate::schedules::pause(&self.schedules, req.into_inner()).await
    }

    async fn resume_task_schedule(
        &self,
        req: Request<pb::ResumeTaskScheduleRequest>,
    ) -> Reply<pb::TaskSchedule> {
        crate::schedules::resume(&self.schedules, req.into_inner()).await
    }

    async fn delete_task_schedule(&self, req: Request<pb::DeleteTaskScheduleRequest>) -> Reply<()> {
        crate::schedules::delete(&self.schedules, req.into_inner()).await
    }

    async fn trigger_task_schedule(
        &self,
        req: Request<pb::TriggerTaskScheduleRequest>,
    ) -> Reply<pb::SubmitTaskResponse> {
        crate::schedules::trigger(&self.schedules, req.into_inner()).await
    }

    async fn add_task_schedule_scope(
        &self,
        req: Request<pb::AddTaskScheduleScopeRequest>,
    ) -> Reply<pb::AddTaskScheduleScopeResponse> {
        crate::schedules::add_scope(&self.schedules, req.into_inner()).await
    }

    async fn remove_task_schedule_scope(
        &self,
        req: Request<pb::RemoveTaskScheduleScopeRequest>,
    ) -> Reply<()> {
        crate::schedules::remove_scope(&self.schedules, req.into_inner()).await
    }

    async fn update_task_schedule_scope(
        &self,
        req: Request<pb::UpdateTaskScheduleScopeRequest>,
    ) -> Reply<pb::UpdateTaskScheduleScopeResponse> {
        crate::schedules::update_scope(&self.schedules, req.into_inner()).await
    }

    async fn list_task_schedule_scopes(
        &self,
        req: Request<pb::ListTaskScheduleScopesRequest>,
    ) -> Reply<pb::ListTaskScheduleScopesResponse> {
        crate::schedules::list_scopes(&self.schedules, req.into_inner()).await
    }

    async fn check_schedule_conflicts(
        &self,
        req: Request<pb::CheckScheduleConflictsRequest>,
    ) -> Reply<pb::CheckScheduleConflictsResponse> {
        crate::schedules::check_conflicts(&self.schedules, req.into_inner()).await
    }
}

/// rackflow's own RPCs (`v1.FlowExtensions`), served beside `v1.Flow`.
#[tonic::async_trait]
impl FlowExtensions for FlowService {
    async fn preview_operation_run(
        &self,
        req: Request<pb::CreateOperationRunRequest>,
    ) -> Reply<pb::PreviewOperationRunResponse> {
        let req = req.into_inner();
        Self::check_authentication_data(&req)?;
        let run = convert::new_run(&req, &mut RandomSeeds).map_err(ApiError::from)?;
        let preview = self.runs.preview(&run).await.map_err(ApiError::from)?;
        let targets = preview
            .plan
            .targets
            .iter()
            .map(|t| {
                let rack = preview.racks.get(&t.rack_id);
                pb::PlannedOperationRunTarget {
                    rack_id: Some(pb_uuid(t.rack_id)),
                    rack_external_id: rack.and_then(|r| r.external_id.clone()).unwrap_or_default(),
                    rack_name: rack.map(|r| r.name.clone()).unwrap_or_default(),
                    sequence_index: t.sequence_index,
                    phase_index: t.phase_index,
                    components_by_type: Some(convert::components_by_type(&t.components_by_type)),
                }
            })
            .collect();
        Ok(Response::new(pb::PreviewOperationRunResponse {
            configuration: Some(convert::configuration(&run.configuration)),
            targets,
            total_phases: preview.plan.total_phases(),
            phase_sizes: convert::phase_sizes(&preview.plan.phase_sizes),
            candidate_count: wire_count(preview.plan.candidate_count),
        }))
    }

    type WatchOperationRunStream = std::pin::Pin<
        Box<dyn tokio_stream::Stream<Item = Result<pb::OperationRun, Status>> + Send>,
    >;

    async fn watch_operation_run(
        &self,
        req: Request<pb::WatchOperationRunRequest>,
    ) -> Reply<Self::WatchOperationRunStream> {
        let id = Self::run_id(req.get_ref().id.as_ref())?;
        // Fail fast on an unknown run.
        self.runs.get(id, false).await.map_err(ApiError::from)?;
        let runs = self.runs.clone();
        let mut changes = self.dispatcher.subscribe();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            let mut last: Option<pb::OperationRun> = None;
            loop {
                match runs.get(id, true).await {
                    Ok((run, stats)) => {
                        let terminal = run.status.is_terminal();
                        let message = convert::operation_run(&run, stats.as_ref());
                        if last.as_ref() != Some(&message) {
                            if tx.send(Ok(message.clone())).await.is_err() {
                                return;
                            }
                            last = Some(message);
                        }
                        if terminal {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx
                            .send(Err(crate::error::to_status(ApiError::from(e))))
                            .await;
                        return;
                    }
                }
                // Wake on this run's changes; re-read at least every second
                // (child tasks progress without touching the run row).
                let wait = async {
                    loop {
                        match changes.recv().await {
                            Ok(changed) if changed == id => return,
                            Ok(_) => {}
                            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                                std::future::pending::<()>().await;
                            }
                        }
                    }
                };
                tokio::select! {
                    () = wait => {}
                    () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                    () = tx.closed() => return,
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}
