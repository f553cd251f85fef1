//! `v1.Flow` and `v1.FlowExtensions`: a forwarding table from each RPC to
//! its handler in [`crate::rpc`], and from the handler's error to a status
//! (through `error.rs`).

use std::sync::Arc;

use rackflow_api::v1 as pb;
use rackflow_api::v1::flow_extensions_server::FlowExtensions;
use rackflow_api::v1::flow_server::Flow;
use rackflow_engine::audit::AuditTrail;
use rackflow_engine::dispatcher::Dispatcher;
use rackflow_engine::event_rules::EventRuleManager;
use rackflow_engine::inventory::InventoryManager;
use rackflow_engine::leaks::LeakManager;
use rackflow_engine::rules::RuleManager;
use rackflow_engine::runs::RunManager;
use rackflow_engine::schedules::ScheduleManager;
use rackflow_engine::tasks::TaskManager;
use tonic::{Request, Response, Status};

use crate::audit::{self, AuditedReply, AuditedRequest};
use crate::rpc::watch::{RunStream, Watches};
use crate::rpc::{self, ApiResult};
use rackflow_domain::audit as audit_actions;

type Reply<T> = Result<Response<T>, Status>;

fn reply<T>(result: ApiResult<T>) -> Reply<T> {
    result.map(Response::new).map_err(Status::from)
}

/// The engine parts the handlers call.
pub struct FlowService {
    pub(crate) audit: Arc<AuditTrail>,
    /// Seals firmware credentials (no data key: credentials refused) and
    /// rotates them.
    pub(crate) secrets: rackflow_engine::secrets::SecretKeeper,
    /// The request limits, for the messages of client streams.
    pub(crate) guard: Arc<crate::guard::RequestGuard>,
    pub(crate) inventory: InventoryManager,
    pub(crate) rules: RuleManager,
    pub(crate) event_rules: EventRuleManager,
    pub(crate) leaks: LeakManager,
    pub(crate) runs: RunManager,
    pub(crate) tasks: Arc<TaskManager>,
    pub(crate) dispatcher: Arc<Dispatcher>,
    pub(crate) schedules: Arc<ScheduleManager>,
    pub(crate) watches: Watches,
    /// The `rms` provider's rack manager, where firmware objects are read
    /// (`None` on the sim provider).
    pub(crate) firmware_objects: Option<crate::rpc::firmware_objects::FirmwareObjects>,
}

impl FlowService {
    /// Runs a mutating call (`action`, its full RPC name) and records it in
    /// the audit trail with its caller and outcome. `handle` gets the
    /// request and the caller's name. A run control that changed its run
    /// was recorded with the change, in the run's transaction.
    async fn audited<Q, R, F, Fut>(
        &self,
        action: &'static str,
        req: Request<Q>,
        handle: F,
    ) -> Reply<R>
    where
        Q: AuditedRequest,
        R: AuditedReply,
        F: FnOnce(Q, String) -> Fut,
        Fut: std::future::Future<Output = ApiResult<R>>,
    {
        let actor = audit::actor_of(&req);
        let request = req.into_inner();
        let event = audit::event_for(&actor, action, &request);
        let outcome = handle(request, actor).await.map_err(Status::from);
        if !(outcome.is_ok() && event.is_control()) {
            self.audit
                .record(audit::with_outcome(event, &outcome))
                .await;
        }
        outcome.map(Response::new)
    }
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

    // ---- inventory (rpc::inventory) ----

    async fn create_expected_rack(
        &self,
        req: Request<pb::CreateExpectedRackRequest>,
    ) -> Reply<pb::CreateExpectedRackResponse> {
        self.audited("v1.Flow/CreateExpectedRack", req, |q, _| {
            rpc::inventory::create_expected_rack(&self.inventory, q)
        })
        .await
    }

    async fn get_rack_info_by_id(
        &self,
        req: Request<pb::GetRackInfoByIdRequest>,
    ) -> Reply<pb::GetRackInfoResponse> {
        reply(rpc::inventory::get_rack_info_by_id(&self.inventory, req.into_inner()).await)
    }

    async fn get_rack_info_by_serial(
        &self,
        req: Request<pb::GetRackInfoBySerialRequest>,
    ) -> Reply<pb::GetRackInfoResponse> {
        reply(rpc::inventory::get_rack_info_by_serial(&self.inventory, req.into_inner()).await)
    }

    async fn get_component_info_by_id(
        &self,
        req: Request<pb::GetComponentInfoByIdRequest>,
    ) -> Reply<pb::GetComponentInfoResponse> {
        reply(rpc::inventory::get_component_info_by_id(&self.inventory, req.into_inner()).await)
    }

    async fn get_component_info_by_serial(
        &self,
        req: Request<pb::GetComponentInfoBySerialRequest>,
    ) -> Reply<pb::GetComponentInfoResponse> {
        reply(rpc::inventory::get_component_info_by_serial(&self.inventory, req.into_inner()).await)
    }

    async fn get_list_of_racks(
        &self,
        req: Request<pb::GetListOfRacksRequest>,
    ) -> Reply<pb::GetListOfRacksResponse> {
        reply(rpc::inventory::get_list_of_racks(&self.inventory, req.into_inner()).await)
    }

    async fn delete_rack(
        &self,
        req: Request<pb::DeleteRackRequest>,
    ) -> Reply<pb::DeleteRackResponse> {
        self.audited("v1.Flow/DeleteRack", req, |q, _| {
            rpc::inventory::delete_rack(&self.inventory, q)
        })
        .await
    }

    async fn patch_rack(&self, req: Request<pb::PatchRackRequest>) -> Reply<pb::PatchRackResponse> {
        self.audited("v1.Flow/PatchRack", req, |q, _| {
            rpc::inventory::patch_rack(&self.inventory, q)
        })
        .await
    }

    async fn purge_rack(&self, req: Request<pb::PurgeRackRequest>) -> Reply<pb::PurgeRackResponse> {
        self.audited("v1.Flow/PurgeRack", req, |q, _| {
            rpc::inventory::purge_rack(&self.inventory, q)
        })
        .await
    }

    async fn delete_component(
        &self,
        req: Request<pb::DeleteComponentRequest>,
    ) -> Reply<pb::DeleteComponentResponse> {
        self.audited("v1.Flow/DeleteComponent", req, |q, _| {
            rpc::inventory::delete_component(&self.inventory, q)
        })
        .await
    }

    async fn purge_component(
        &self,
        req: Request<pb::PurgeComponentRequest>,
    ) -> Reply<pb::PurgeComponentResponse> {
        self.audited("v1.Flow/PurgeComponent", req, |q, _| {
            rpc::inventory::purge_component(&self.inventory, q)
        })
        .await
    }

    async fn create_nvl_domain(
        &self,
        req: Request<pb::CreateNvlDomainRequest>,
    ) -> Reply<pb::CreateNvlDomainResponse> {
        self.audited("v1.Flow/CreateNVLDomain", req, |q, _| {
            rpc::inventory::create_nvl_domain(&self.inventory, q)
        })
        .await
    }

    async fn attach_racks_to_nvl_domain(
        &self,
        req: Request<pb::AttachRacksToNvlDomainRequest>,
    ) -> Reply<()> {
        self.audited("v1.Flow/AttachRacksToNVLDomain", req, |q, _| {
            rpc::inventory::attach_racks_to_nvl_domain(&self.inventory, q)
        })
        .await
    }

    async fn detach_racks_from_nvl_domain(
        &self,
        req: Request<pb::DetachRacksFromNvlDomainRequest>,
    ) -> Reply<()> {
        self.audited("v1.Flow/DetachRacksFromNVLDomain", req, |q, _| {
            rpc::inventory::detach_racks_from_nvl_domain(&self.inventory, q)
        })
        .await
    }

    async fn get_list_of_nvl_domains(
        &self,
        req: Request<pb::GetListOfNvlDomainsRequest>,
    ) -> Reply<pb::GetListOfNvlDomainsResponse> {
        reply(rpc::inventory::get_list_of_nvl_domains(&self.inventory, req.into_inner()).await)
    }

    async fn get_racks_for_nvl_domain(
        &self,
        req: Request<pb::GetRacksForNvlDomainRequest>,
    ) -> Reply<pb::GetRacksForNvlDomainResponse> {
        reply(rpc::inventory::get_racks_for_nvl_domain(&self.inventory, req.into_inner()).await)
    }

    async fn get_nv_link_domain(
        &self,
        req: Request<pb::GetNvLinkDomainRequest>,
    ) -> Reply<pb::GetNvLinkDomainResponse> {
        reply(rpc::inventory::get_nvlink_domain(&self.inventory, req.into_inner()).await)
    }

    async fn get_list_of_nv_link_domains(
        &self,
        req: Request<pb::GetListOfNvLinkDomainsRequest>,
    ) -> Reply<pb::GetListOfNvLinkDomainsResponse> {
        reply(rpc::inventory::get_list_of_nvlink_domains(&self.inventory, req.into_inner()).await)
    }

    async fn get_components(
        &self,
        req: Request<pb::GetComponentsRequest>,
    ) -> Reply<pb::GetComponentsResponse> {
        reply(rpc::inventory::get_components(&self.inventory, req.into_inner()).await)
    }

    async fn validate_components(
        &self,
        req: Request<pb::ValidateComponentsRequest>,
    ) -> Reply<pb::ValidateComponentsResponse> {
        reply(rpc::inventory::validate_components(&self.inventory, req.into_inner()).await)
    }

    async fn add_component(
        &self,
        req: Request<pb::AddComponentRequest>,
    ) -> Reply<pb::AddComponentResponse> {
        self.audited("v1.Flow/AddComponent", req, |q, _| {
            rpc::inventory::add_component(&self.inventory, q)
        })
        .await
    }

    async fn patch_component(
        &self,
        req: Request<pb::PatchComponentRequest>,
    ) -> Reply<pb::PatchComponentResponse> {
        self.audited("v1.Flow/PatchComponent", req, |q, _| {
            rpc::inventory::patch_component(&self.inventory, q)
        })
        .await
    }

    // ---- operation runs (rpc::runs) ----

    async fn create_operation_run(
        &self,
        req: Request<pb::CreateOperationRunRequest>,
    ) -> Reply<pb::CreateOperationRunResponse> {
        self.audited("v1.Flow/CreateOperationRun", req, |q, _| {
            rpc::runs::create(
                &self.runs,
                &self.dispatcher,
                self.secrets.keys(),
                self.firmware_objects.as_ref(),
                q,
            )
        })
        .await
    }

    async fn get_operation_run(
        &self,
        req: Request<pb::GetOperationRunRequest>,
    ) -> Reply<pb::GetOperationRunResponse> {
        reply(rpc::runs::get(&self.runs, req.into_inner()).await)
    }

    async fn list_operation_runs(
        &self,
        req: Request<pb::ListOperationRunsRequest>,
    ) -> Reply<pb::ListOperationRunsResponse> {
        reply(rpc::runs::list(&self.runs, req.into_inner()).await)
    }

    async fn list_operation_run_targets(
        &self,
        req: Request<pb::ListOperationRunTargetsRequest>,
    ) -> Reply<pb::ListOperationRunTargetsResponse> {
        reply(rpc::runs::list_targets(&self.runs, req.into_inner()).await)
    }

    async fn pause_operation_run(
        &self,
        req: Request<pb::PauseOperationRunRequest>,
    ) -> Reply<pb::OperationRun> {
        self.audited(audit_actions::PAUSE_RUN, req, |q, actor| async move {
            rpc::runs::pause(&self.dispatcher, q, &actor, audit_actions::PAUSE_RUN).await
        })
        .await
    }

    async fn resume_operation_run(
        &self,
        req: Request<pb::ResumeOperationRunRequest>,
    ) -> Reply<pb::OperationRun> {
        self.audited(audit_actions::RESUME_RUN, req, |q, actor| async move {
            rpc::runs::resume(&self.dispatcher, q, &actor, audit_actions::RESUME_RUN).await
        })
        .await
    }

    async fn advance_operation_run_phase(
        &self,
        req: Request<pb::AdvanceOperationRunPhaseRequest>,
    ) -> Reply<pb::OperationRun> {
        self.audited(audit_actions::ADVANCE_RUN, req, |q, actor| async move {
            rpc::runs::advance(&self.dispatcher, q, &actor, audit_actions::ADVANCE_RUN).await
        })
        .await
    }

    async fn cancel_operation_run(
        &self,
        req: Request<pb::CancelOperationRunRequest>,
    ) -> Reply<pb::OperationRun> {
        self.audited(audit_actions::CANCEL_RUN, req, |q, actor| async move {
            rpc::runs::cancel(&self.dispatcher, q, &actor, audit_actions::CANCEL_RUN).await
        })
        .await
    }

    // ---- rack operations and tasks (rpc::tasks) ----

    async fn upgrade_firmware(
        &self,
        req: Request<pb::UpgradeFirmwareRequest>,
    ) -> Reply<pb::SubmitTaskResponse> {
        self.audited("v1.Flow/UpgradeFirmware", req, |q, _| {
            rpc::tasks::upgrade_firmware(
                &self.tasks,
                self.secrets.keys(),
                self.firmware_objects.as_ref(),
                q,
            )
        })
        .await
    }

    async fn power_on_rack(
        &self,
        req: Request<pb::PowerOnRackRequest>,
    ) -> Reply<pb::SubmitTaskResponse> {
        self.audited("v1.Flow/PowerOnRack", req, |q, _| {
            rpc::tasks::power_on_rack(&self.tasks, q)
        })
        .await
    }

    async fn power_off_rack(
        &self,
        req: Request<pb::PowerOffRackRequest>,
    ) -> Reply<pb::SubmitTaskResponse> {
        self.audited("v1.Flow/PowerOffRack", req, |q, _| {
            rpc::tasks::power_off_rack(&self.tasks, q)
        })
        .await
    }

    async fn power_reset_rack(
        &self,
        req: Request<pb::PowerResetRackRequest>,
    ) -> Reply<pb::SubmitTaskResponse> {
        self.audited("v1.Flow/PowerResetRack", req, |q, _| {
            rpc::tasks::power_reset_rack(&self.tasks, q)
        })
        .await
    }

    async fn bring_up_rack(
        &self,
        req: Request<pb::BringUpRackRequest>,
    ) -> Reply<pb::SubmitTaskResponse> {
        self.audited("v1.Flow/BringUpRack", req, |q, _| {
            rpc::tasks::bring_up_rack(&self.tasks, q)
        })
        .await
    }

    async fn ingest_rack(
        &self,
        req: Request<pb::IngestRackRequest>,
    ) -> Reply<pb::SubmitTaskResponse> {
        self.audited("v1.Flow/IngestRack", req, |q, _| {
            rpc::tasks::ingest_rack(&self.tasks, q)
        })
        .await
    }

    async fn decommission_rack(
        &self,
        req: Request<pb::DecommissionRackRequest>,
    ) -> Reply<pb::SubmitTaskResponse> {
        self.audited("v1.Flow/DecommissionRack", req, |q, _| {
            rpc::tasks::decommission_rack(&self.tasks, q)
        })
        .await
    }

    async fn ac_power_cycle_rack(
        &self,
        req: Request<pb::AcPowerCycleRackRequest>,
    ) -> Reply<pb::SubmitTaskResponse> {
        self.audited("v1.Flow/ACPowerCycleRack", req, |q, _| {
            rpc::tasks::ac_power_cycle_rack(&self.tasks, q)
        })
        .await
    }

    async fn list_tasks(&self, req: Request<pb::ListTasksRequest>) -> Reply<pb::ListTasksResponse> {
        reply(rpc::tasks::list_tasks(&self.inventory, req.into_inner()).await)
    }

    async fn get_tasks_by_i_ds(
        &self,
        req: Request<pb::GetTasksByIDsRequest>,
    ) -> Reply<pb::GetTasksByIDsResponse> {
        reply(rpc::tasks::get_tasks_by_ids(&self.inventory, req.into_inner()).await)
    }

    async fn cancel_task(
        &self,
        req: Request<pb::CancelTaskRequest>,
    ) -> Reply<pb::CancelTaskResponse> {
        self.audited("v1.Flow/CancelTask", req, |q, _| {
            rpc::tasks::cancel_task(&self.tasks, q)
        })
        .await
    }

    // ---- event rules and bindings (rpc::event_rules) ----

    async fn create_event_rule(
        &self,
        req: Request<pb::CreateEventRuleRequest>,
    ) -> Reply<pb::EventRule> {
        self.audited("v1.Flow/CreateEventRule", req, |q, _| {
            rpc::event_rules::create(&self.event_rules, q)
        })
        .await
    }

    async fn get_event_rule(&self, req: Request<pb::GetEventRuleRequest>) -> Reply<pb::EventRule> {
        reply(rpc::event_rules::get(&self.event_rules, req.into_inner()).await)
    }

    async fn get_effective_event_rule(
        &self,
        req: Request<pb::GetEffectiveEventRuleRequest>,
    ) -> Reply<pb::EventRule> {
        reply(rpc::event_rules::effective(&self.event_rules, req.into_inner()).await)
    }

    async fn list_event_rules(
        &self,
        req: Request<pb::ListEventRulesRequest>,
    ) -> Reply<pb::ListEventRulesResponse> {
        reply(rpc::event_rules::list(&self.event_rules, req.into_inner()).await)
    }

    async fn update_event_rule(
        &self,
        req: Request<pb::UpdateEventRuleRequest>,
    ) -> Reply<pb::EventRule> {
        self.audited("v1.Flow/UpdateEventRule", req, |q, _| {
            rpc::event_rules::update(&self.event_rules, q)
        })
        .await
    }

    async fn enable_event_rule(
        &self,
        req: Request<pb::EnableEventRuleRequest>,
    ) -> Reply<pb::EventRule> {
        self.audited("v1.Flow/EnableEventRule", req, |q, _| async move {
            rpc::event_rules::set_enabled(&self.event_rules, q.rule_id.as_ref(), true).await
        })
        .await
    }

    async fn disable_event_rule(
        &self,
        req: Request<pb::DisableEventRuleRequest>,
    ) -> Reply<pb::EventRule> {
        self.audited("v1.Flow/DisableEventRule", req, |q, _| async move {
            rpc::event_rules::set_enabled(&self.event_rules, q.rule_id.as_ref(), false).await
        })
        .await
    }

    async fn delete_event_rule(&self, req: Request<pb::DeleteEventRuleRequest>) -> Reply<()> {
        self.audited("v1.Flow/DeleteEventRule", req, |q, _| {
            rpc::event_rules::delete(&self.event_rules, q)
        })
        .await
    }

    async fn create_event_rule_binding(
        &self,
        req: Request<pb::CreateEventRuleBindingRequest>,
    ) -> Reply<pb::EventRuleBinding> {
        self.audited("v1.Flow/CreateEventRuleBinding", req, |q, _| {
            rpc::event_rules::bind(&self.event_rules, q)
        })
        .await
    }

    async fn get_event_rule_binding(
        &self,
        req: Request<pb::GetEventRuleBindingRequest>,
    ) -> Reply<pb::EventRuleBinding> {
        reply(rpc::event_rules::binding(&self.event_rules, req.into_inner()).await)
    }

    async fn delete_event_rule_binding(
        &self,
        req: Request<pb::DeleteEventRuleBindingRequest>,
    ) -> Reply<()> {
        self.audited("v1.Flow/DeleteEventRuleBinding", req, |q, _| {
            rpc::event_rules::unbind(&self.event_rules, q)
        })
        .await
    }

    // ---- operation rules and associations (rpc::rules) ----

    async fn create_operation_rule(
        &self,
        req: Request<pb::CreateOperationRuleRequest>,
    ) -> Reply<pb::CreateOperationRuleResponse> {
        self.audited("v1.Flow/CreateOperationRule", req, |q, _| {
            rpc::rules::create(&self.rules, q)
        })
        .await
    }

    async fn update_operation_rule(
        &self,
        req: Request<pb::UpdateOperationRuleRequest>,
    ) -> Reply<()> {
        self.audited("v1.Flow/UpdateOperationRule", req, |q, _| {
            rpc::rules::update(&self.rules, q)
        })
        .await
    }

    async fn delete_operation_rule(
        &self,
        req: Request<pb::DeleteOperationRuleRequest>,
    ) -> Reply<()> {
        self.audited("v1.Flow/DeleteOperationRule", req, |q, _| {
            rpc::rules::delete(&self.rules, q)
        })
        .await
    }

    async fn get_operation_rule(
        &self,
        req: Request<pb::GetOperationRuleRequest>,
    ) -> Reply<pb::OperationRule> {
        reply(rpc::rules::get(&self.rules, req.into_inner()).await)
    }

    async fn list_operation_rules(
        &self,
        req: Request<pb::ListOperationRulesRequest>,
    ) -> Reply<pb::ListOperationRulesResponse> {
        reply(rpc::rules::list(&self.rules, req.into_inner()).await)
    }

    async fn set_rule_as_default(&self, req: Request<pb::SetRuleAsDefaultRequest>) -> Reply<()> {
        self.audited("v1.Flow/SetRuleAsDefault", req, |q, _| {
            rpc::rules::set_default(&self.rules, q)
        })
        .await
    }

    async fn associate_rule_with_rack(
        &self,
        req: Request<pb::AssociateRuleWithRackRequest>,
    ) -> Reply<()> {
        self.audited("v1.Flow/AssociateRuleWithRack", req, |q, _| {
            rpc::rules::associate(&self.rules, q)
        })
        .await
    }

    async fn disassociate_rule_from_rack(
        &self,
        req: Request<pb::DisassociateRuleFromRackRequest>,
    ) -> Reply<()> {
        self.audited("v1.Flow/DisassociateRuleFromRack", req, |q, _| {
            rpc::rules::disassociate(&self.rules, q)
        })
        .await
    }

    async fn get_rack_rule_association(
        &self,
        req: Request<pb::GetRackRuleAssociationRequest>,
    ) -> Reply<pb::GetRackRuleAssociationResponse> {
        reply(rpc::rules::association(&self.rules, req.into_inner()).await)
    }

    async fn list_rack_rule_associations(
        &self,
        req: Request<pb::ListRackRuleAssociationsRequest>,
    ) -> Reply<pb::ListRackRuleAssociationsResponse> {
        reply(rpc::rules::associations(&self.rules, req.into_inner()).await)
    }

    // ---- task schedules (rpc::schedules) ----

    async fn create_task_schedule(
        &self,
        req: Request<pb::CreateTaskScheduleRequest>,
    ) -> Reply<pb::TaskSchedule> {
        self.audited("v1.Flow/CreateTaskSchedule", req, |q, _| {
            rpc::schedules::create(&self.schedules, self.secrets.keys(), q)
        })
        .await
    }

    async fn get_task_schedule(
        &self,
        req: Request<pb::GetTaskScheduleRequest>,
    ) -> Reply<pb::TaskSchedule> {
        reply(rpc::schedules::get(&self.schedules, req.into_inner()).await)
    }

    async fn list_task_schedules(
        &self,
        req: Request<pb::ListTaskSchedulesRequest>,
    ) -> Reply<pb::ListTaskSchedulesResponse> {
        reply(rpc::schedules::list(&self.schedules, req.into_inner()).await)
    }

    async fn update_task_schedule(
        &self,
        req: Request<pb::UpdateTaskScheduleRequest>,
    ) -> Reply<pb::TaskSchedule> {
        self.audited("v1.Flow/UpdateTaskSchedule", req, |q, _| {
            rpc::schedules::update(&self.schedules, q)
        })
        .await
    }

    async fn pause_task_schedule(
        &self,
        req: Request<pb::PauseTaskScheduleRequest>,
    ) -> Reply<pb::TaskSchedule> {
        self.audited("v1.Flow/PauseTaskSchedule", req, |q, _| {
            rpc::schedules::pause(&self.schedules, q)
        })
        .await
    }

    async fn resume_task_schedule(
        &self,
        req: Request<pb::ResumeTaskScheduleRequest>,
    ) -> Reply<pb::TaskSchedule> {
        self.audited("v1.Flow/ResumeTaskSchedule", req, |q, _| {
            rpc::schedules::resume(&self.schedules, q)
        })
        .await
    }

    async fn delete_task_schedule(&self, req: Request<pb::DeleteTaskScheduleRequest>) -> Reply<()> {
        self.audited("v1.Flow/DeleteTaskSchedule", req, |q, _| {
            rpc::schedules::delete(&self.schedules, q)
        })
        .await
    }

    async fn trigger_task_schedule(
        &self,
        req: Request<pb::TriggerTaskScheduleRequest>,
    ) -> Reply<pb::SubmitTaskResponse> {
        self.audited("v1.Flow/TriggerTaskSchedule", req, |q, _| {
            rpc::schedules::trigger(&self.schedules, q)
        })
        .await
    }

    async fn add_task_schedule_scope(
        &self,
        req: Request<pb::AddTaskScheduleScopeRequest>,
    ) -> Reply<pb::AddTaskScheduleScopeResponse> {
        self.audited("v1.Flow/AddTaskScheduleScope", req, |q, _| {
            rpc::schedules::add_scope(&self.schedules, q)
        })
        .await
    }

    async fn remove_task_schedule_scope(
        &self,
        req: Request<pb::RemoveTaskScheduleScopeRequest>,
    ) -> Reply<()> {
        self.audited("v1.Flow/RemoveTaskScheduleScope", req, |q, _| {
            rpc::schedules::remove_scope(&self.schedules, q)
        })
        .await
    }

    async fn update_task_schedule_scope(
        &self,
        req: Request<pb::UpdateTaskScheduleScopeRequest>,
    ) -> Reply<pb::UpdateTaskScheduleScopeResponse> {
        self.audited("v1.Flow/UpdateTaskScheduleScope", req, |q, _| {
            rpc::schedules::update_scope(&self.schedules, q)
        })
        .await
    }

    async fn list_task_schedule_scopes(
        &self,
        req: Request<pb::ListTaskScheduleScopesRequest>,
    ) -> Reply<pb::ListTaskScheduleScopesResponse> {
        reply(rpc::schedules::list_scopes(&self.schedules, req.into_inner()).await)
    }

    async fn check_schedule_conflicts(
        &self,
        req: Request<pb::CheckScheduleConflictsRequest>,
    ) -> Reply<pb::CheckScheduleConflictsResponse> {
        reply(rpc::schedules::check_conflicts(&self.schedules, req.into_inner()).await)
    }
}

/// rackflow's own RPCs (`v1.FlowExtensions`), served beside `v1.Flow`.
#[tonic::async_trait]
impl FlowExtensions for FlowService {
    async fn preview_operation_run(
        &self,
        req: Request<pb::CreateOperationRunRequest>,
    ) -> Reply<pb::PreviewOperationRunResponse> {
        reply(
            rpc::runs::preview(
                &self.runs,
                self.secrets.keys(),
                self.firmware_objects.as_ref(),
                req.into_inner(),
            )
            .await,
        )
    }

    type WatchOperationRunStream = RunStream;

    async fn watch_operation_run(
        &self,
        req: Request<pb::WatchOperationRunRequest>,
    ) -> Reply<Self::WatchOperationRunStream> {
        let req = req.into_inner();
        reply(rpc::watch::watch(&self.watches, &self.runs, &self.dispatcher, req).await)
    }

    async fn import_racks(
        &self,
        req: Request<tonic::Streaming<pb::ImportRacksRequest>>,
    ) -> Reply<pb::ImportRacksResponse> {
        let actor = audit::actor_of(&req);
        let mut stream = req.into_inner();
        let mut answer = pb::ImportRacksResponse::default();
        let mut batches = 0usize;
        let outcome = async {
            while let Some(batch) = stream.message().await? {
                batches += 1;
                self.guard
                    .check_streamed("/v1.FlowExtensions/ImportRacks", &batch)
                    .map_err(|why| Status::invalid_argument(format!("batch {batches}: {why}")))?;
                let offset = answer.racks.len();
                rpc::inventory::import_racks_batch(&self.inventory, batch, offset, &mut answer)
                    .await
                    .map_err(Status::from)?;
            }
            Ok::<(), Status>(())
        }
        .await;
        // The stream is recorded by its size, not its contents.
        let created = answer.racks.iter().filter(|r| r.created).count();
        let mut event = rackflow_domain::audit::AuditEvent::new(
            chrono::Utc::now(),
            &actor,
            "v1.FlowExtensions/ImportRacks",
        );
        event.summary = format!(
            "{batches} batches, {} racks read, {created} created",
            answer.racks.len()
        );
        let outcome = outcome.map(|()| answer);
        self.audit
            .record(audit::with_outcome(event, &outcome))
            .await;
        outcome.map(Response::new)
    }

    async fn list_audit_events(
        &self,
        req: Request<pb::ListAuditEventsRequest>,
    ) -> Reply<pb::ListAuditEventsResponse> {
        reply(rpc::audit::list(&self.audit, req.into_inner()).await)
    }

    async fn report_leak(
        &self,
        req: Request<pb::ReportLeakRequest>,
    ) -> Reply<pb::ReportLeakResponse> {
        self.audited("v1.FlowExtensions/ReportLeak", req, |q, _| {
            rpc::leaks::report(&self.leaks, q)
        })
        .await
    }

    async fn list_leak_events(
        &self,
        req: Request<pb::ListLeakEventsRequest>,
    ) -> Reply<pb::ListLeakEventsResponse> {
        reply(rpc::leaks::list(&self.leaks, req.into_inner()).await)
    }

    async fn rotate_secrets(
        &self,
        req: Request<pb::RotateSecretsRequest>,
    ) -> Reply<pb::RotateSecretsResponse> {
        self.audited("v1.FlowExtensions/RotateSecrets", req, |_, _| async {
            let (active_key_id, outcome) = self.secrets.rotate().await?;
            Ok(pb::RotateSecretsResponse {
                active_key_id,
                resealed: i64::try_from(outcome.resealed).unwrap_or(i64::MAX),
                already_current: i64::try_from(outcome.already_current).unwrap_or(i64::MAX),
                failures: outcome.failures,
            })
        })
        .await
    }
}
