//! What the audit trail records of each mutating call: who (the caller's
//! identity from the edge), what (the RPC and a summary of the request
//! without secrets), which run and which objects it named or created, and
//! the outcome. Run controls that changed a run are recorded by the
//! dispatcher in the run's own transaction; the rest is appended here
//! after the call.

use std::fmt::Debug;

use rackflow_api::v1 as pb;
use rackflow_domain::audit::{AuditEvent, bounded_summary};
use rackflow_security::Caller;
use uuid::Uuid;

/// Records refused mutating calls in the trail (refused reads are only
/// logged: nothing happened).
pub(crate) struct Denials(pub(crate) std::sync::Arc<rackflow_engine::audit::AuditTrail>);

impl rackflow_security::DenialRecorder for Denials {
    fn record<'a>(
        &'a self,
        caller: &'a Caller,
        rpc: &'a str,
        status: &'a tonic::Status,
    ) -> futures_util::future::BoxFuture<'a, ()> {
        Box::pin(async move {
            if rackflow_security::authz::required_role(rpc) == rackflow_security::Role::Viewer {
                return;
            }
            let mut event = AuditEvent::new(
                chrono::Utc::now(),
                caller.name(),
                rpc.trim_start_matches('/'),
            );
            event.code = format!("{:?}", status.code());
            event.message = bounded_summary(status.message());
            self.0.record(event).await;
        })
    }
}

/// The caller's name for the trail: its identity, or `anonymous`.
pub(crate) fn actor_of<T>(request: &tonic::Request<T>) -> String {
    request
        .extensions()
        .get::<Caller>()
        .map_or("anonymous", Caller::name)
        .to_string()
}

/// A request the trail records.
pub(crate) trait AuditedRequest: Debug {
    /// The request as recorded: secrets removed.
    fn redacted(&self) -> String {
        format!("{self:?}")
    }

    /// The operation run the request names.
    fn run_id(&self) -> Option<Uuid> {
        None
    }

    /// Other objects the request names.
    fn subject_ids(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A reply whose created objects the trail records.
pub(crate) trait AuditedReply {
    fn run_id(&self) -> Option<Uuid> {
        None
    }

    fn created_ids(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The event of a call by `actor` to `action` with `request`, before its
/// outcome is known.
pub(crate) fn event_for(actor: &str, action: &str, request: &impl AuditedRequest) -> AuditEvent {
    AuditEvent {
        run_id: request.run_id(),
        subject_ids: request.subject_ids(),
        summary: bounded_summary(&request.redacted()),
        ..AuditEvent::new(chrono::Utc::now(), actor, action)
    }
}

/// Completes `event` with the call's outcome.
pub(crate) fn with_outcome<R: AuditedReply>(
    mut event: AuditEvent,
    outcome: &Result<R, tonic::Status>,
) -> AuditEvent {
    match outcome {
        Ok(reply) => {
            event.run_id = event.run_id.or(reply.run_id());
            event.subject_ids.extend(reply.created_ids());
        }
        Err(status) => {
            event.code = format!("{:?}", status.code());
            event.message = bounded_summary(status.message());
        }
    }
    event
}

fn id_text(id: Option<&pb::Uuid>) -> Vec<String> {
    id.map(|u| u.id.clone()).into_iter().collect()
}

fn parse(id: Option<&pb::Uuid>) -> Option<Uuid> {
    id.and_then(|u| Uuid::parse_str(&u.id).ok())
}

/// Requests without secrets, recorded as they are; `$ids` lists the
/// fields naming other objects.
macro_rules! audited_plain {
    ($($t:ty => [$($field:ident),*]),+ $(,)?) => {$(
        impl AuditedRequest for $t {
            fn subject_ids(&self) -> Vec<String> {
                std::iter::empty::<String>()
                    $(.chain(id_text(self.$field.as_ref())))*
                    .collect()
            }
        }
    )+};
}

audited_plain!(
    pb::CreateExpectedRackRequest => [],
    pb::DeleteRackRequest => [id],
    pb::PurgeRackRequest => [id],
    pb::DeleteComponentRequest => [id],
    pb::PurgeComponentRequest => [id],
    pb::AddComponentRequest => [],
    pb::PatchComponentRequest => [id],
    pb::PowerOnRackRequest => [rule_id],
    pb::PowerOffRackRequest => [rule_id],
    pb::PowerResetRackRequest => [rule_id],
    pb::AcPowerCycleRackRequest => [rule_id],
    pb::BringUpRackRequest => [rule_id],
    pb::IngestRackRequest => [rule_id],
    pb::DecommissionRackRequest => [rule_id],
    pb::CancelTaskRequest => [task_id],
    pb::CreateOperationRuleRequest => [],
    pb::UpdateOperationRuleRequest => [rule_id],
    pb::DeleteOperationRuleRequest => [rule_id],
    pb::SetRuleAsDefaultRequest => [rule_id],
    pb::AssociateRuleWithRackRequest => [rack_id, rule_id],
    pb::DisassociateRuleFromRackRequest => [rack_id],
    pb::UpdateTaskScheduleRequest => [id],
    pb::PauseTaskScheduleRequest => [id],
    pb::ResumeTaskScheduleRequest => [id],
    pb::DeleteTaskScheduleRequest => [id],
    pb::TriggerTaskScheduleRequest => [id],
    pb::AddTaskScheduleScopeRequest => [schedule_id],
    pb::RemoveTaskScheduleScopeRequest => [scope_id],
    pb::UpdateTaskScheduleScopeRequest => [schedule_id],
    pb::CreateEventRuleRequest => [],
    pb::UpdateEventRuleRequest => [rule_id],
    pb::EnableEventRuleRequest => [rule_id],
    pb::DisableEventRuleRequest => [rule_id],
    pb::DeleteEventRuleRequest => [rule_id],
    pb::CreateEventRuleBindingRequest => [rule_id],
    pb::DeleteEventRuleBindingRequest => [],
    pb::ReportLeakRequest => [component_id],
);

impl AuditedRequest for pb::PatchRackRequest {
    fn subject_ids(&self) -> Vec<String> {
        id_text(
            self.rack
                .as_ref()
                .and_then(|r| r.info.as_ref())
                .and_then(|i| i.id.as_ref()),
        )
    }
}

impl AuditedRequest for pb::CreateNvlDomainRequest {}

impl AuditedRequest for pb::AttachRacksToNvlDomainRequest {
    fn subject_ids(&self) -> Vec<String> {
        self.nvl_domain_identifier
            .iter()
            .chain(&self.rack_identifiers)
            .flat_map(identifier_text)
            .collect()
    }
}

impl AuditedRequest for pb::DetachRacksFromNvlDomainRequest {
    fn subject_ids(&self) -> Vec<String> {
        self.rack_identifiers
            .iter()
            .flat_map(identifier_text)
            .collect()
    }
}

/// An `Identifier`'s id, else its name.
fn identifier_text(identifier: &pb::Identifier) -> Option<String> {
    match &identifier.id {
        Some(id) if !id.id.is_empty() => Some(id.id.clone()),
        _ => Some(identifier.name.clone()).filter(|n| !n.is_empty()),
    }
}

/// Run controls: the run they name.
macro_rules! audited_control {
    ($($t:ty),+ $(,)?) => {$(
        impl AuditedRequest for $t {
            fn run_id(&self) -> Option<Uuid> {
                parse(self.id.as_ref())
            }
        }
    )+};
}

audited_control!(
    pb::PauseOperationRunRequest,
    pb::ResumeOperationRunRequest,
    pb::AdvanceOperationRunPhaseRequest,
    pb::CancelOperationRunRequest,
);

/// An upgrade without its credentials (replaced by a marker saying they
/// were given).
fn redact_upgrade(upgrade: &mut pb::UpgradeFirmwareRequest) -> bool {
    upgrade.authentication_data.take().is_some()
}

fn with_marker(text: String, redacted: bool) -> String {
    if redacted {
        format!("{text} (authentication_data: <redacted>)")
    } else {
        text
    }
}

impl AuditedRequest for pb::UpgradeFirmwareRequest {
    fn redacted(&self) -> String {
        let mut copy = self.clone();
        let redacted = redact_upgrade(&mut copy);
        with_marker(format!("{copy:?}"), redacted)
    }

    fn subject_ids(&self) -> Vec<String> {
        id_text(self.rule_id.as_ref())
    }
}

impl AuditedRequest for pb::CreateOperationRunRequest {
    fn redacted(&self) -> String {
        let mut copy = self.clone();
        let redacted = copy
            .configuration
            .as_mut()
            .and_then(|c| c.operation.as_mut())
            .and_then(|o| o.operation.as_mut())
            .map(|op| match op {
                pb::operation_run_operation::Operation::UpgradeFirmware(fw) => redact_upgrade(fw),
            })
            .unwrap_or(false);
        with_marker(format!("{copy:?}"), redacted)
    }
}

impl AuditedRequest for pb::CreateTaskScheduleRequest {
    fn redacted(&self) -> String {
        let mut copy = self.clone();
        let redacted = match copy.operation.as_mut().and_then(|o| o.operation.as_mut()) {
            Some(pb::scheduled_operation::Operation::UpgradeFirmware(fw)) => redact_upgrade(fw),
            _ => false,
        };
        with_marker(format!("{copy:?}"), redacted)
    }
}

impl AuditedReply for () {}
impl AuditedReply for pb::OperationRun {}
impl AuditedReply for pb::DeleteRackResponse {}
impl AuditedReply for pb::PatchRackResponse {}
impl AuditedReply for pb::PurgeRackResponse {}
impl AuditedReply for pb::DeleteComponentResponse {}
impl AuditedReply for pb::PurgeComponentResponse {}
impl AuditedReply for pb::CreateNvlDomainResponse {}
impl AuditedReply for pb::PatchComponentResponse {}
impl AuditedReply for pb::CancelTaskResponse {}
impl AuditedReply for pb::UpdateTaskScheduleScopeResponse {}

impl AuditedReply for pb::EventRule {
    fn created_ids(&self) -> Vec<String> {
        id_text(self.id.as_ref())
    }
}

impl AuditedReply for pb::ReportLeakResponse {
    fn created_ids(&self) -> Vec<String> {
        match pb::LeakReportOutcome::try_from(self.outcome) {
            Ok(pb::LeakReportOutcome::New) => {
                id_text(self.event.as_ref().and_then(|e| e.id.as_ref()))
            }
            _ => Vec::new(),
        }
    }
}

impl AuditedReply for pb::EventRuleBinding {
    fn created_ids(&self) -> Vec<String> {
        id_text(self.id.as_ref())
    }
}

impl AuditedReply for pb::CreateOperationRunResponse {
    fn run_id(&self) -> Option<Uuid> {
        parse(self.id.as_ref())
    }
}

impl AuditedReply for pb::SubmitTaskResponse {
    fn created_ids(&self) -> Vec<String> {
        self.task_ids.iter().map(|id| id.id.clone()).collect()
    }
}

impl AuditedReply for pb::CreateExpectedRackResponse {
    fn created_ids(&self) -> Vec<String> {
        id_text(self.id.as_ref())
    }
}

impl AuditedReply for pb::AddComponentResponse {
    fn created_ids(&self) -> Vec<String> {
        self.component
            .iter()
            .map(|c| c.component_id.clone())
            .filter(|id| !id.is_empty())
            .collect()
    }
}

impl AuditedReply for pb::CreateOperationRuleResponse {
    fn created_ids(&self) -> Vec<String> {
        id_text(self.id.as_ref())
    }
}

impl AuditedReply for pb::TaskSchedule {
    fn created_ids(&self) -> Vec<String> {
        id_text(self.id.as_ref())
    }
}

impl AuditedReply for pb::AddTaskScheduleScopeResponse {}

impl AuditedRequest for pb::RotateSecretsRequest {}

impl AuditedReply for pb::RotateSecretsResponse {}

/// An import is recorded by its size (its racks are not listed).
impl AuditedReply for pb::ImportRacksResponse {}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials() -> pb::FirmwareAuthenticationData {
        pb::FirmwareAuthenticationData {
            value: Some(pb::firmware_authentication_data::Value::Shared(
                "root:hunter2-secret".into(),
            )),
        }
    }

    #[test]
    fn credentials_never_reach_the_trail() {
        let upgrade = pb::UpgradeFirmwareRequest {
            target_version: Some("2.0.0".into()),
            authentication_data: Some(credentials()),
            ..Default::default()
        };
        let event = event_for("spiffe://t/op", "v1.Flow/UpgradeFirmware", &upgrade);
        assert!(!event.summary.contains("hunter2"), "{}", event.summary);
        assert!(event.summary.contains("2.0.0") && event.summary.contains("<redacted>"));
        let run = pb::CreateOperationRunRequest {
            configuration: Some(pb::OperationRunConfiguration {
                operation: Some(pb::OperationRunOperation {
                    operation: Some(pb::operation_run_operation::Operation::UpgradeFirmware(
                        upgrade.clone(),
                    )),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let summary = run.redacted();
        assert!(
            !summary.contains("hunter2") && summary.contains("<redacted>"),
            "{summary}"
        );
        let schedule = pb::CreateTaskScheduleRequest {
            operation: Some(pb::ScheduledOperation {
                operation: Some(pb::scheduled_operation::Operation::UpgradeFirmware(upgrade)),
            }),
            ..Default::default()
        };
        let summary = schedule.redacted();
        assert!(
            !summary.contains("hunter2") && summary.contains("<redacted>"),
            "{summary}"
        );
    }

    #[test]
    fn the_outcome_and_the_created_objects_complete_the_event() {
        let pause = pb::PauseOperationRunRequest {
            id: Some(pb::Uuid {
                id: "0b8f7f4e-4a53-4a3b-9f57-5d1f3c0c2a11".into(),
            }),
        };
        let event = event_for("a", "v1.Flow/PauseOperationRun", &pause);
        assert_eq!(
            event.run_id.map(|u| u.to_string()).as_deref(),
            Some("0b8f7f4e-4a53-4a3b-9f57-5d1f3c0c2a11")
        );
        let failed = with_outcome::<pb::OperationRun>(
            event,
            &Err(tonic::Status::failed_precondition("not running")),
        );
        assert_eq!(failed.code, "FailedPrecondition");
        assert_eq!(failed.message, "not running");
        let submitted = with_outcome(
            event_for(
                "a",
                "v1.Flow/PowerOnRack",
                &pb::PowerOnRackRequest::default(),
            ),
            &Ok(pb::SubmitTaskResponse {
                task_ids: vec![pb::Uuid { id: "t1".into() }],
            }),
        );
        assert_eq!(submitted.code, "OK");
        assert_eq!(submitted.subject_ids, ["t1"]);
    }
}
