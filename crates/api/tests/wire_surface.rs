//! The wire surface against the reference's contract
//! (`shared/spec/wire-contract.md` part A and `shared/spec/operation-runs.md`
//! §1): `v1.Flow` carries exactly the reference's RPCs that rackflow
//! implements, every reference message keeps the reference's field numbers
//! and names, and every field rackflow adds to a reference message is
//! numbered >= 1000. The rules are in `proto/README.md`.

use std::collections::{BTreeMap, BTreeSet};

use prost::Message;
use prost_types::{DescriptorProto, FileDescriptorSet, ServiceDescriptorProto};

/// The reference's `v1.Flow` RPCs: name, request, response (all unary).
/// From the tables of wire-contract.md §A.1 (the 68 RPCs besides operation
/// runs; its prose counts 14 task-schedule RPCs where the table lists 13)
/// and operation-runs.md §1.2 (8).
const REFERENCE_FLOW_RPCS: &[(&str, &str, &str)] = &[
    ("Version", "VersionRequest", "BuildInfo"),
    (
        "CreateTaskSchedule",
        "CreateTaskScheduleRequest",
        "TaskSchedule",
    ),
    ("GetTaskSchedule", "GetTaskScheduleRequest", "TaskSchedule"),
    (
        "ListTaskSchedules",
        "ListTaskSchedulesRequest",
        "ListTaskSchedulesResponse",
    ),
    (
        "UpdateTaskSchedule",
        "UpdateTaskScheduleRequest",
        "TaskSchedule",
    ),
    (
        "PauseTaskSchedule",
        "PauseTaskScheduleRequest",
        "TaskSchedule",
    ),
    (
        "ResumeTaskSchedule",
        "ResumeTaskScheduleRequest",
        "TaskSchedule",
    ),
    (
        "DeleteTaskSchedule",
        "DeleteTaskScheduleRequest",
        "google.protobuf.Empty",
    ),
    (
        "TriggerTaskSchedule",
        "TriggerTaskScheduleRequest",
        "SubmitTaskResponse",
    ),
    (
        "AddTaskScheduleScope",
        "AddTaskScheduleScopeRequest",
        "AddTaskScheduleScopeResponse",
    ),
    (
        "RemoveTaskScheduleScope",
        "RemoveTaskScheduleScopeRequest",
        "google.protobuf.Empty",
    ),
    (
        "UpdateTaskScheduleScope",
        "UpdateTaskScheduleScopeRequest",
        "UpdateTaskScheduleScopeResponse",
    ),
    (
        "ListTaskScheduleScopes",
        "ListTaskScheduleScopesRequest",
        "ListTaskScheduleScopesResponse",
    ),
    (
        "CheckScheduleConflicts",
        "CheckScheduleConflictsRequest",
        "CheckScheduleConflictsResponse",
    ),
    (
        "CreateExpectedRack",
        "CreateExpectedRackRequest",
        "CreateExpectedRackResponse",
    ),
    (
        "GetRackInfoByID",
        "GetRackInfoByIDRequest",
        "GetRackInfoResponse",
    ),
    (
        "GetRackInfoBySerial",
        "GetRackInfoBySerialRequest",
        "GetRackInfoResponse",
    ),
    (
        "GetListOfRacks",
        "GetListOfRacksRequest",
        "GetListOfRacksResponse",
    ),
    ("PatchRack", "PatchRackRequest", "PatchRackResponse"),
    ("DeleteRack", "DeleteRackRequest", "DeleteRackResponse"),
    ("PurgeRack", "PurgeRackRequest", "PurgeRackResponse"),
    (
        "UpgradeFirmware",
        "UpgradeFirmwareRequest",
        "SubmitTaskResponse",
    ),
    ("BringUpRack", "BringUpRackRequest", "SubmitTaskResponse"),
    ("IngestRack", "IngestRackRequest", "SubmitTaskResponse"),
    (
        "DecommissionRack",
        "DecommissionRackRequest",
        "SubmitTaskResponse",
    ),
    ("PowerOnRack", "PowerOnRackRequest", "SubmitTaskResponse"),
    ("PowerOffRack", "PowerOffRackRequest", "SubmitTaskResponse"),
    (
        "PowerResetRack",
        "PowerResetRackRequest",
        "SubmitTaskResponse",
    ),
    (
        "ACPowerCycleRack",
        "ACPowerCycleRackRequest",
        "SubmitTaskResponse",
    ),
    (
        "GetComponentInfoByID",
        "GetComponentInfoByIDRequest",
        "GetComponentInfoResponse",
    ),
    (
        "GetComponentInfoBySerial",
        "GetComponentInfoBySerialRequest",
        "GetComponentInfoResponse",
    ),
    (
        "GetComponents",
        "GetComponentsRequest",
        "GetComponentsResponse",
    ),
    (
        "ValidateComponents",
        "ValidateComponentsRequest",
        "ValidateComponentsResponse",
    ),
    (
        "AddComponent",
        "AddComponentRequest",
        "AddComponentResponse",
    ),
    (
        "PatchComponent",
        "PatchComponentRequest",
        "PatchComponentResponse",
    ),
    (
        "DeleteComponent",
        "DeleteComponentRequest",
        "DeleteComponentResponse",
    ),
    (
        "PurgeComponent",
        "PurgeComponentRequest",
        "PurgeComponentResponse",
    ),
    (
        "CreateNVLDomain",
        "CreateNVLDomainRequest",
        "CreateNVLDomainResponse",
    ),
    (
        "AttachRacksToNVLDomain",
        "AttachRacksToNVLDomainRequest",
        "google.protobuf.Empty",
    ),
    (
        "DetachRacksFromNVLDomain",
        "DetachRacksFromNVLDomainRequest",
        "google.protobuf.Empty",
    ),
    (
        "GetListOfNVLDomains",
        "GetListOfNVLDomainsRequest",
        "GetListOfNVLDomainsResponse",
    ),
    (
        "GetRacksForNVLDomain",
        "GetRacksForNVLDomainRequest",
        "GetRacksForNVLDomainResponse",
    ),
    (
        "GetNVLinkDomain",
        "GetNVLinkDomainRequest",
        "GetNVLinkDomainResponse",
    ),
    (
        "GetListOfNVLinkDomains",
        "GetListOfNVLinkDomainsRequest",
        "GetListOfNVLinkDomainsResponse",
    ),
    ("ListTasks", "ListTasksRequest", "ListTasksResponse"),
    (
        "GetTasksByIDs",
        "GetTasksByIDsRequest",
        "GetTasksByIDsResponse",
    ),
    ("CancelTask", "CancelTaskRequest", "CancelTaskResponse"),
    (
        "CreateOperationRule",
        "CreateOperationRuleRequest",
        "CreateOperationRuleResponse",
    ),
    (
        "UpdateOperationRule",
        "UpdateOperationRuleRequest",
        "google.protobuf.Empty",
    ),
    (
        "DeleteOperationRule",
        "DeleteOperationRuleRequest",
        "google.protobuf.Empty",
    ),
    (
        "GetOperationRule",
        "GetOperationRuleRequest",
        "OperationRule",
    ),
    (
        "ListOperationRules",
        "ListOperationRulesRequest",
        "ListOperationRulesResponse",
    ),
    (
        "SetRuleAsDefault",
        "SetRuleAsDefaultRequest",
        "google.protobuf.Empty",
    ),
    (
        "AssociateRuleWithRack",
        "AssociateRuleWithRackRequest",
        "google.protobuf.Empty",
    ),
    (
        "DisassociateRuleFromRack",
        "DisassociateRuleFromRackRequest",
        "google.protobuf.Empty",
    ),
    (
        "GetRackRuleAssociation",
        "GetRackRuleAssociationRequest",
        "GetRackRuleAssociationResponse",
    ),
    (
        "ListRackRuleAssociations",
        "ListRackRuleAssociationsRequest",
        "ListRackRuleAssociationsResponse",
    ),
    ("CreateEventRule", "CreateEventRuleRequest", "EventRule"),
    ("GetEventRule", "GetEventRuleRequest", "EventRule"),
    (
        "GetEffectiveEventRule",
        "GetEffectiveEventRuleRequest",
        "EventRule",
    ),
    (
        "ListEventRules",
        "ListEventRulesRequest",
        "ListEventRulesResponse",
    ),
    ("UpdateEventRule", "UpdateEventRuleRequest", "EventRule"),
    ("EnableEventRule", "EnableEventRuleRequest", "EventRule"),
    ("DisableEventRule", "DisableEventRuleRequest", "EventRule"),
    (
        "DeleteEventRule",
        "DeleteEventRuleRequest",
        "google.protobuf.Empty",
    ),
    (
        "CreateEventRuleBinding",
        "CreateEventRuleBindingRequest",
        "EventRuleBinding",
    ),
    (
        "GetEventRuleBinding",
        "GetEventRuleBindingRequest",
        "EventRuleBinding",
    ),
    (
        "DeleteEventRuleBinding",
        "DeleteEventRuleBindingRequest",
        "google.protobuf.Empty",
    ),
    (
        "CreateOperationRun",
        "CreateOperationRunRequest",
        "CreateOperationRunResponse",
    ),
    (
        "GetOperationRun",
        "GetOperationRunRequest",
        "GetOperationRunResponse",
    ),
    (
        "ListOperationRuns",
        "ListOperationRunsRequest",
        "ListOperationRunsResponse",
    ),
    (
        "ListOperationRunTargets",
        "ListOperationRunTargetsRequest",
        "ListOperationRunTargetsResponse",
    ),
    (
        "PauseOperationRun",
        "PauseOperationRunRequest",
        "OperationRun",
    ),
    (
        "ResumeOperationRun",
        "ResumeOperationRunRequest",
        "OperationRun",
    ),
    (
        "AdvanceOperationRunPhase",
        "AdvanceOperationRunPhaseRequest",
        "OperationRun",
    ),
    (
        "CancelOperationRun",
        "CancelOperationRunRequest",
        "OperationRun",
    ),
];

/// Reference RPCs rackflow does not implement yet: absent from `v1.Flow`
/// (a client gets UNIMPLEMENTED) until the issue that adds them.
const NOT_YET_IMPLEMENTED: &[&str] = &[];

/// rackflow's own RPCs, on `v1.FlowExtensions`: name, request, response,
/// (client-streaming, server-streaming).
const FLOW_EXTENSIONS_RPCS: &[(&str, &str, &str, (bool, bool))] = &[
    (
        "PreviewOperationRun",
        "CreateOperationRunRequest",
        "PreviewOperationRunResponse",
        (false, false),
    ),
    (
        "WatchOperationRun",
        "WatchOperationRunRequest",
        "OperationRun",
        (false, true),
    ),
    (
        "ImportRacks",
        "ImportRacksRequest",
        "ImportRacksResponse",
        (true, false),
    ),
    (
        "ListAuditEvents",
        "ListAuditEventsRequest",
        "ListAuditEventsResponse",
        (false, false),
    ),
    (
        "RotateSecrets",
        "RotateSecretsRequest",
        "RotateSecretsResponse",
        (false, false),
    ),
    (
        "ReportLeak",
        "ReportLeakRequest",
        "ReportLeakResponse",
        (false, false),
    ),
    (
        "ListLeakEvents",
        "ListLeakEventsRequest",
        "ListLeakEventsResponse",
        (false, false),
    ),
];

/// Messages of `package v1` the reference does not have (used only by
/// rackflow's own RPCs).
const OUR_MESSAGES: &[&str] = &[
    "ReportLeakRequest",
    "ReportLeakResponse",
    "LeakEvent",
    "ListLeakEventsRequest",
    "ListLeakEventsResponse",
    "PreviewOperationRunResponse",
    "PlannedOperationRunTarget",
    "WatchOperationRunRequest",
    "ImportRacksRequest",
    "ImportedRack",
    "ImportRacksResponse",
    "ListAuditEventsRequest",
    "AuditEvent",
    "ListAuditEventsResponse",
    "RotateSecretsRequest",
    "RotateSecretsResponse",
    "FirmwareBundle",
    "FirmwareBundleEntry",
    "InstalledVersion",
    "TargetVersion",
];

/// The first number rackflow may give a field it adds to a reference message.
const FIRST_OWN_FIELD_NUMBER: i32 = 1000;

/// rackflow's fields in reference messages (message, field, number): the
/// list of `proto/README.md`.
const OUR_FIELDS_IN_REFERENCE_MESSAGES: &[(&str, &str, i32)] = &[
    ("ScheduleConfig", "catchup_window", 1000),
    ("TaskSchedule", "catchup_window", 1000),
    ("TaskSchedule", "skipped_count", 1001),
    ("TaskSchedule", "last_skip_reason", 1002),
    ("Component", "firmware_observed_at", 1000),
    ("Component", "power_state_observed_at", 1001),
    ("Component", "operational_state", 1002),
    ("Component", "operational_reason", 1003),
    ("Component", "leak_observed_at", 1004),
    ("PatchComponentRequest", "operational_state", 1000),
    ("PatchComponentRequest", "operational_reason", 1001),
    ("GetComponentsRequest", "leak_statuses", 1000),
    ("Task", "trigger_type", 1000),
    ("Task", "trigger_id", 1001),
    ("Rack", "lifecycle_status", 1000),
    ("Rack", "ingested_at", 1001),
    ("Rack", "decommissioned_at", 1002),
    ("GetListOfRacksRequest", "lifecycle_statuses", 1000),
    ("UpgradeFirmwareRequest", "firmware_bundle", 1000),
    (
        "UpgradeFirmwareRequest",
        "same_version_for_all_models",
        1001,
    ),
    ("UpgradeFirmwareRequest", "firmware_object", 1002),
];

/// Every reference message of `package v1` with its fields ("number name;
/// …"), from the same spec sections (§A.3–§A.13 and operation-runs §1.3–1.5).
const REFERENCE_MESSAGES: &[(&str, &str)] = &[
    // Event rules (A.13).
    (
        "EventRule",
        "1 id; 2 read_only; 3 name; 4 description; 5 enabled; 6 event_type; 7 actions; \
         8 created_at; 9 updated_at",
    ),
    (
        "EventRuleAction",
        "1 name; 2 condition; 3 submit_task; 4 send_alert; 5 noop",
    ),
    (
        "EventRuleActionCondition",
        "1 severities; 2 component_types",
    ),
    (
        "EventRuleSubmitTaskAction",
        "4 target_strategy; 5 conflict_strategy; 6 description; 7 operation",
    ),
    ("EventRuleSendAlertAction", "1 severity; 2 message"),
    ("EventRuleNoopAction", "1 reason"),
    ("TaskOperation", "1 power_control; 2 firmware_control"),
    (
        "PowerControlTaskOperation",
        "1 operation; 2 override_readiness_check",
    ),
    (
        "FirmwareControlTaskOperation",
        "1 operation; 2 target_version; 3 start_time; 4 end_time; 5 sub_targets; \
         6 override_readiness_check; 7 override_version_check",
    ),
    (
        "CreateEventRuleRequest",
        "1 name; 2 description; 3 event_type; 4 actions",
    ),
    ("GetEventRuleRequest", "1 rule_id"),
    (
        "GetEffectiveEventRuleRequest",
        "1 event_type; 2 rack_id; 3 component_id",
    ),
    (
        "ListEventRulesRequest",
        "1 event_type; 2 enabled; 3 pagination",
    ),
    ("ListEventRulesResponse", "1 rules; 2 total"),
    ("UpdateEventRuleRequest", "1 rule_id; 2 metadata; 3 actions"),
    ("EventRuleMetadataUpdate", "1 name; 2 description"),
    ("EventRuleActionsUpdate", "1 actions"),
    ("EnableEventRuleRequest", "1 rule_id"),
    ("DisableEventRuleRequest", "1 rule_id"),
    ("DeleteEventRuleRequest", "1 rule_id"),
    ("EventRuleScope", "1 type; 2 id"),
    ("EventRuleBinding", "1 id; 2 rule_id; 3 event_type; 4 scope"),
    ("CreateEventRuleBindingRequest", "1 rule_id; 2 scope"),
    ("GetEventRuleBindingRequest", "1 event_type; 2 scope"),
    ("DeleteEventRuleBindingRequest", "1 event_type; 2 scope"),
    (
        "ACPowerCycleRackRequest",
        "1 target_spec; 2 description; 3 queue_options; 4 rule_id; 5 override_readiness_check",
    ),
    ("AddComponentRequest", "1 component"),
    ("AddComponentResponse", "1 component"),
    (
        "AddTaskScheduleScopeRequest",
        "1 schedule_id; 2 target_spec",
    ),
    ("AddTaskScheduleScopeResponse", "1 scopes"),
    (
        "AdvanceOperationRunPhaseRequest",
        "1 id; 2 expected_phase_index",
    ),
    ("AssociateRuleWithRackRequest", "1 rack_id; 2 rule_id"),
    (
        "AttachRacksToNVLDomainRequest",
        "1 nvl_domain_identifier; 2 rack_identifiers",
    ),
    ("BMCInfo", "1 type; 2 mac_address; 3 ip_address"),
    (
        "BringUpRackRequest",
        "1 target_spec; 2 description; 3 rule_id; 4 override_readiness_check",
    ),
    ("BuildInfo", "1 version; 2 build_time; 3 git_commit"),
    ("CancelOperationRunRequest", "1 id; 2 reason"),
    ("CancelTaskRequest", "1 task_id"),
    ("CancelTaskResponse", "1 task"),
    (
        "CheckScheduleConflictsRequest",
        "1 operation; 2 exclude_schedule_id",
    ),
    ("CheckScheduleConflictsResponse", "1 conflicts"),
    (
        "Component",
        "1 type; 2 info; 3 firmware_version; 4 position; 5 bmcs; 6 component_id; 7 rack_id; 8 power_state; 9 status; 10 leak_status; 11 nvl_domain_id; 12 task_stats; 13 rack_external_id; 14 leak_handling_status; 15 health; 16 nvl_domain_external_id",
    ),
    (
        "ComponentDiff",
        "1 type; 2 component_id; 3 expected; 4 actual; 5 field_diffs; 6 id; 7 component_mac_address",
    ),
    ("ComponentFilter", "1 types; 2 components"),
    (
        "ComponentOperationStatus",
        "1 phase; 2 reason; 3 blocked_operations",
    ),
    ("ComponentTarget", "1 id; 2 external"),
    ("ComponentTargets", "1 targets"),
    ("ComponentTypes", "1 types"),
    ("ComponentsByType", "1 groups"),
    ("ComponentsForType", "1 type; 2 component_ids"),
    ("CountOperationRunPhases", "1 phases"),
    ("CreateEventRuleBindingRequest", "1 rule_id; 2 scope"),
    (
        "CreateEventRuleRequest",
        "1 name; 2 description; 3 event_type; 4 actions",
    ),
    ("CreateExpectedRackRequest", "1 rack"),
    ("CreateExpectedRackResponse", "1 id"),
    ("CreateNVLDomainRequest", "1 nvl_domain"),
    ("CreateNVLDomainResponse", "1 id"),
    (
        "CreateOperationRuleRequest",
        "1 name; 2 description; 3 operation_type; 4 operation_code; 5 rule_definition_json; 6 is_default",
    ),
    ("CreateOperationRuleResponse", "1 id"),
    (
        "CreateOperationRunRequest",
        "1 name; 2 description; 3 configuration",
    ),
    ("CreateOperationRunResponse", "1 id"),
    ("CreateTaskScheduleRequest", "1 schedule; 2 operation"),
    (
        "DecommissionRackRequest",
        "1 target_spec; 2 description; 3 queue_options; 4 rule_id",
    ),
    ("DeleteComponentRequest", "1 id"),
    ("DeleteComponentResponse", ""),
    ("DeleteEventRuleBindingRequest", "1 event_type; 2 scope"),
    ("DeleteEventRuleRequest", "1 rule_id"),
    ("DeleteOperationRuleRequest", "1 rule_id"),
    ("DeleteRackRequest", "1 id"),
    ("DeleteRackResponse", ""),
    ("DeleteTaskScheduleRequest", "1 id"),
    ("DetachRacksFromNVLDomainRequest", "1 rack_identifiers"),
    (
        "DeviceInfo",
        "1 id; 2 name; 3 manufacturer; 4 model; 5 serial_number; 6 description",
    ),
    ("DeviceSerialInfo", "1 manufacturer; 2 serial_number"),
    ("DisableEventRuleRequest", "1 rule_id"),
    (
        "DisassociateRuleFromRackRequest",
        "1 rack_id; 2 operation_type; 3 operation_code",
    ),
    ("EnableEventRuleRequest", "1 rule_id"),
    ("EqualOperationRunPhases", "1 phase_count"),
    (
        "EventRule",
        "1 id; 2 read_only; 3 name; 4 description; 5 enabled; 6 event_type; 7 actions; 8 created_at; 9 updated_at",
    ),
    (
        "EventRuleAction",
        "1 name; 2 condition; 3 submit_task; 4 send_alert; 5 noop",
    ),
    (
        "EventRuleActionCondition",
        "1 severities; 2 component_types",
    ),
    ("EventRuleActionsUpdate", "1 actions"),
    ("EventRuleBinding", "1 id; 2 rule_id; 3 event_type; 4 scope"),
    ("EventRuleMetadataUpdate", "1 name; 2 description"),
    ("EventRuleNoopAction", "1 reason"),
    ("EventRuleScope", "1 type; 2 id"),
    ("EventRuleSendAlertAction", "1 severity; 2 message"),
    (
        "EventRuleSubmitTaskAction",
        "4 target_strategy; 5 conflict_strategy; 6 description; 7 operation",
    ),
    ("ExternalRef", "1 type; 2 id"),
    (
        "FieldDiff",
        "1 field_name; 2 expected_value; 3 actual_value",
    ),
    ("Filter", "1 rack_field; 2 component_field; 3 query_info"),
    ("FirmwareAuthenticationData", "1 shared; 2 per_component"),
    (
        "FirmwareControlTaskOperation",
        "1 operation; 2 target_version; 3 start_time; 4 end_time; 5 sub_targets; 6 override_readiness_check; 7 override_version_check",
    ),
    ("GetComponentInfoByIDRequest", "1 id; 2 with_rack"),
    (
        "GetComponentInfoBySerialRequest",
        "1 serial_info; 2 with_rack",
    ),
    ("GetComponentInfoResponse", "1 component; 2 rack"),
    (
        "GetComponentsRequest",
        "1 target_spec; 2 filters; 3 pagination; 4 order_by",
    ),
    ("GetComponentsResponse", "1 components; 2 total"),
    (
        "GetEffectiveEventRuleRequest",
        "1 event_type; 2 rack_id; 3 component_id",
    ),
    ("GetEventRuleBindingRequest", "1 event_type; 2 scope"),
    ("GetEventRuleRequest", "1 rule_id"),
    ("GetListOfNVLDomainsRequest", "1 info; 2 pagination"),
    ("GetListOfNVLDomainsResponse", "1 nvl_domains; 2 total"),
    (
        "GetListOfNVLinkDomainsRequest",
        "1 info; 2 with_components; 3 pagination; 4 order_by",
    ),
    ("GetListOfNVLinkDomainsResponse", "1 domains; 2 total"),
    (
        "GetListOfRacksRequest",
        "1 filters; 2 with_components; 3 pagination; 4 order_by; 5 with_external_id_only",
    ),
    ("GetListOfRacksResponse", "1 racks; 2 total"),
    ("GetNVLinkDomainRequest", "1 id; 2 with_components"),
    ("GetNVLinkDomainResponse", "1 domain"),
    ("GetOperationRuleRequest", "1 rule_id"),
    ("GetOperationRunRequest", "1 id; 2 include_stats"),
    ("GetOperationRunResponse", "1 operation_run"),
    ("GetRackInfoByIDRequest", "1 id; 2 with_components"),
    (
        "GetRackInfoBySerialRequest",
        "1 serial_info; 2 with_components",
    ),
    ("GetRackInfoResponse", "1 rack"),
    (
        "GetRackRuleAssociationRequest",
        "1 rack_id; 2 operation_type; 3 operation_code",
    ),
    ("GetRackRuleAssociationResponse", "1 rule_id"),
    ("GetRacksForNVLDomainRequest", "1 nvl_domain_identifier"),
    ("GetRacksForNVLDomainResponse", "1 racks"),
    ("GetTaskScheduleRequest", "1 id"),
    ("GetTasksByIDsRequest", "1 task_ids"),
    ("GetTasksByIDsResponse", "1 tasks"),
    (
        "HealthProbeAlert",
        "1 id; 2 target; 3 in_alert_since; 4 message; 5 tenant_message; 6 classifications",
    ),
    ("HealthProbeSuccess", "1 id; 2 target"),
    (
        "HealthReport",
        "1 source; 2 triggered_by; 3 observed_at; 4 successes; 5 alerts",
    ),
    ("Identifier", "1 id; 2 name"),
    (
        "IngestRackRequest",
        "1 target_spec; 2 filters; 3 description; 4 rule_id",
    ),
    (
        "ListEventRulesRequest",
        "1 event_type; 2 enabled; 3 pagination",
    ),
    ("ListEventRulesResponse", "1 rules; 2 total"),
    (
        "ListOperationRulesRequest",
        "1 operation_type; 2 is_default; 3 offset; 4 limit",
    ),
    ("ListOperationRulesResponse", "1 rules; 2 total_count"),
    (
        "ListOperationRunTargetsRequest",
        "1 operation_run_id; 2 status; 3 pagination; 4 phase_scope",
    ),
    ("ListOperationRunTargetsResponse", "1 targets; 2 total"),
    ("ListOperationRunsRequest", "1 filter; 2 pagination"),
    ("ListOperationRunsResponse", "1 operation_runs; 2 total"),
    ("ListRackRuleAssociationsRequest", "1 rack_id"),
    ("ListRackRuleAssociationsResponse", "1 associations"),
    ("ListTaskScheduleScopesRequest", "1 schedule_id"),
    ("ListTaskScheduleScopesResponse", "1 scopes"),
    (
        "ListTaskSchedulesRequest",
        "1 rack_id; 2 pagination; 3 enabled_only",
    ),
    ("ListTaskSchedulesResponse", "1 task_schedules; 2 total"),
    (
        "ListTasksRequest",
        "1 rack_id; 2 active_only; 3 pagination; 4 component_id; 5 with_report",
    ),
    ("ListTasksResponse", "1 tasks; 2 total"),
    ("Location", "1 region; 2 datacenter; 3 room; 4 position"),
    (
        "NVLDomain",
        "1 identifier; 2 external_id; 3 nmxc_cluster_id",
    ),
    (
        "NVLDomainTarget",
        "1 id; 2 name; 3 component_types; 4 external_id",
    ),
    ("NVLDomainTargets", "1 targets"),
    (
        "NVLinkDomain",
        "1 id; 2 name; 3 topology; 4 operation_status; 5 components; 6 nmxc_cluster_id; 7 rack_group_id",
    ),
    ("OperationKind", "1 type; 2 code"),
    (
        "OperationRule",
        "1 id; 2 name; 3 description; 4 operation_type; 5 operation_code; 6 rule_definition_json; 7 is_default; 8 created_at; 9 updated_at",
    ),
    ("OperationRun", "1 summary; 2 configuration; 3 stats"),
    (
        "OperationRunConfiguration",
        "1 selector; 2 options; 3 operation",
    ),
    ("OperationRunConflictPolicy", "1 retry"),
    (
        "OperationRunConflictRetryPolicy",
        "1 retry_timeout; 2 initial_retry_delay; 3 max_retry_delay",
    ),
    ("OperationRunCountPhase", "1 count"),
    (
        "OperationRunFailureCountGate",
        "1 scope; 2 failure_threshold_count",
    ),
    (
        "OperationRunFailureRateGate",
        "1 scope; 2 failure_threshold_percent",
    ),
    ("OperationRunFilter", "1 name; 2 states; 3 operation_kinds"),
    (
        "OperationRunOperation",
        "1 upgrade_firmware; 2 target_scope",
    ),
    (
        "OperationRunOptions",
        "1 max_concurrent_targets; 2 safety_policy; 3 conflict_policy; 4 ordering_policy; 5 phase_policy",
    ),
    (
        "OperationRunOrderingPolicy",
        "1 random; 3 physical_location",
    ),
    ("OperationRunPercentagePhase", "1 percentage"),
    ("OperationRunPhaseAdvancePolicy", "1 auto_advance"),
    (
        "OperationRunPhasePolicy",
        "1 equal; 2 percentage; 3 count; 4 advance_policy",
    ),
    (
        "OperationRunPhaseStats",
        "1 phase_index; 2 selected_targets; 3 outcome_counts",
    ),
    ("OperationRunPhysicalLocationOrdering", "1 strategy"),
    ("OperationRunRandomOrdering", "1 seed"),
    ("OperationRunSafetyGate", "1 failure_rate; 2 failure_count"),
    ("OperationRunSafetyPolicy", "1 gates"),
    ("OperationRunSelector", "1 percentage"),
    ("OperationRunState", "1 status; 2 reason"),
    ("OperationRunStateFilter", "1 status; 2 reason"),
    (
        "OperationRunStats",
        "1 current_phase_stats; 2 cumulative_phase_stats",
    ),
    (
        "OperationRunSummary",
        "1 id; 2 name; 3 description; 4 operation_kind; 5 state; 6 status_message; 7 total_phases; 8 created_at; 9 updated_at; 10 started_at; 11 finished_at",
    ),
    (
        "OperationRunTarget",
        "1 id; 2 operation_run_id; 3 rack_id; 4 sequence_index; 5 phase_index; 6 task_id; 7 status; 8 message; 9 components_by_type; 10 created_at; 11 updated_at; 12 rack_external_id",
    ),
    (
        "OperationRunTargetOutcomeCounts",
        "1 completed; 2 failed; 3 terminated; 4 skipped",
    ),
    (
        "OperationRunTargetScope",
        "1 exclude_operation_run_ids; 2 default_scope_component_filter",
    ),
    (
        "OperationTargetSpec",
        "1 racks; 2 components; 3 nvl_domains",
    ),
    ("OrderBy", "1 rack_field; 2 component_field; 3 direction"),
    ("Pagination", "1 offset; 2 limit"),
    (
        "PatchComponentRequest",
        "1 id; 2 firmware_version; 3 position; 4 description; 5 rack_id; 6 bmcs; 7 update_mask",
    ),
    ("PatchComponentResponse", "1 component"),
    ("PatchRackRequest", "1 rack"),
    ("PatchRackResponse", "1 report"),
    ("PauseOperationRunRequest", "1 id"),
    ("PauseTaskScheduleRequest", "1 id"),
    (
        "PerComponentFirmwareAuthenticationData",
        "1 compute; 2 nvswitch; 3 powershelf",
    ),
    ("PercentageOperationRunPhases", "1 phases"),
    ("PercentageSelector", "1 percentage; 2 seed"),
    (
        "PowerControlTaskOperation",
        "1 operation; 2 override_readiness_check",
    ),
    (
        "PowerOffRackRequest",
        "1 target_spec; 2 forced; 3 description; 4 queue_options; 5 rule_id; 6 override_readiness_check",
    ),
    (
        "PowerOnRackRequest",
        "1 target_spec; 2 description; 3 queue_options; 4 rule_id; 5 override_readiness_check",
    ),
    (
        "PowerResetRackRequest",
        "1 target_spec; 2 forced; 3 description; 4 queue_options; 5 rule_id; 6 override_readiness_check",
    ),
    ("PurgeComponentRequest", "1 id"),
    ("PurgeComponentResponse", ""),
    ("PurgeRackRequest", "1 id"),
    ("PurgeRackResponse", ""),
    (
        "QueueOptions",
        "1 conflict_strategy; 2 queue_timeout_seconds",
    ),
    (
        "Rack",
        "1 info; 2 location; 3 components; 4 nvl_domain_ids; 5 task_stats; 6 external_id; 7 operation_status; 8 health; 9 rack_profile_id; 10 nvl_domain_external_ids",
    ),
    ("RackPosition", "1 slot_id; 2 tray_idx; 3 host_id"),
    (
        "RackRuleAssociation",
        "1 rack_id; 2 operation_type; 3 operation_code; 4 rule_id; 5 created_at; 6 updated_at",
    ),
    (
        "RackTarget",
        "1 id; 2 name; 3 component_types; 4 external_id",
    ),
    ("RackTargets", "1 targets"),
    ("RemoveTaskScheduleScopeRequest", "1 scope_id"),
    ("ResumeOperationRunRequest", "1 id"),
    ("ResumeTaskScheduleRequest", "1 id"),
    ("ScheduleConfig", "1 name; 2 spec; 3 overlap_policy"),
    ("ScheduleSpec", "1 type; 2 spec; 3 timezone"),
    (
        "ScheduledOperation",
        "1 power_on; 2 power_off; 3 power_reset; 4 bring_up; 5 upgrade_firmware; 6 ingest",
    ),
    ("SetRuleAsDefaultRequest", "1 rule_id"),
    ("StringQueryInfo", "1 patterns; 2 is_wildcard; 3 use_or"),
    ("SubmitTaskResponse", "1 task_ids"),
    (
        "Task",
        "1 id; 2 operation; 3 rack_id; 4 component_uuids; 5 description; 6 executor_type; 7 execution_id; 8 status; 9 message; 10 queue_expires_at; 11 created_at; 12 finished_at; 13 applied_rule_id; 14 updated_at; 15 started_at; 16 report",
    ),
    ("TaskOperation", "1 power_control; 2 firmware_control"),
    (
        "TaskSchedule",
        "1 id; 2 name; 3 spec; 4 overlap_policy; 5 enabled; 6 next_run_at; 7 last_run_at; 8 created_at; 9 updated_at; 10 operation_type; 11 description",
    ),
    (
        "TaskScheduleScope",
        "1 id; 2 schedule_id; 3 rack_id; 4 types; 5 components; 6 last_task_id; 7 created_at",
    ),
    (
        "TaskStats",
        "1 waiting_task_count; 2 pending_task_count; 3 running_task_count",
    ),
    ("TriggerTaskScheduleRequest", "1 id"),
    ("UUID", "1 id"),
    ("UpdateEventRuleRequest", "1 rule_id; 2 metadata; 3 actions"),
    (
        "UpdateOperationRuleRequest",
        "1 rule_id; 2 name; 3 description; 4 rule_definition_json",
    ),
    (
        "UpdateTaskScheduleRequest",
        "1 id; 2 schedule; 3 update_mask",
    ),
    (
        "UpdateTaskScheduleScopeRequest",
        "1 schedule_id; 2 desired_scope",
    ),
    (
        "UpdateTaskScheduleScopeResponse",
        "1 scopes; 2 added; 3 removed; 4 updated",
    ),
    (
        "UpgradeFirmwareRequest",
        "1 target_spec; 2 target_version; 3 start_time; 4 end_time; 5 description; 6 queue_options; 7 rule_id; 8 sub_targets; 9 override_readiness_check; 10 authentication_data; 11 override_version_check",
    ),
    (
        "ValidateComponentsRequest",
        "1 target_spec; 2 filters; 3 pagination; 4 order_by",
    ),
    (
        "ValidateComponentsResponse",
        "1 diffs; 2 total_diffs; 3 missing_count; 4 unexpected_count; 5 mismatch_count; 6 match_count",
    ),
    ("VersionRequest", ""),
];

fn descriptor_set() -> FileDescriptorSet {
    FileDescriptorSet::decode(rackflow_api::FILE_DESCRIPTOR_SET).expect("decode descriptor set")
}

fn service(set: &FileDescriptorSet, package: &str, name: &str) -> ServiceDescriptorProto {
    set.file
        .iter()
        .filter(|f| f.package() == package)
        .flat_map(|f| f.service.iter())
        .find(|s| s.name() == name)
        .unwrap_or_else(|| panic!("service {package}.{name} is not in the descriptor set"))
        .clone()
}

/// Top-level messages of `package v1` by name.
fn v1_messages(set: &FileDescriptorSet) -> BTreeMap<String, DescriptorProto> {
    set.file
        .iter()
        .filter(|f| f.package() == "v1")
        .flat_map(|f| f.message_type.iter())
        .map(|m| (m.name().to_string(), m.clone()))
        .collect()
}

fn short_type(full: &str) -> &str {
    full.strip_prefix(".v1.")
        .or_else(|| full.strip_prefix('.'))
        .unwrap_or(full)
}

fn reference_fields(fields: &str) -> BTreeMap<i32, String> {
    fields
        .split(';')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(|f| {
            let (number, name) = f.split_once(' ').expect("\"number name\"");
            (number.parse().expect("field number"), name.to_string())
        })
        .collect()
}

#[test]
fn flow_is_exactly_the_implemented_reference_rpcs() {
    let reference: BTreeSet<&str> = REFERENCE_FLOW_RPCS.iter().map(|r| r.0).collect();
    assert_eq!(reference.len(), REFERENCE_FLOW_RPCS.len(), "duplicate rows");
    for name in NOT_YET_IMPLEMENTED {
        assert!(reference.contains(name), "{name} is not a reference RPC");
    }
    let expected: BTreeSet<(String, String, String)> = REFERENCE_FLOW_RPCS
        .iter()
        .filter(|(name, _, _)| !NOT_YET_IMPLEMENTED.contains(name))
        .map(|(n, i, o)| (n.to_string(), i.to_string(), o.to_string()))
        .collect();

    let flow = service(&descriptor_set(), "v1", "Flow");
    let mut actual = BTreeSet::new();
    for method in &flow.method {
        assert!(
            !method.client_streaming() && !method.server_streaming(),
            "v1.Flow/{} streams; the reference's RPCs are all unary",
            method.name()
        );
        actual.insert((
            method.name().to_string(),
            short_type(method.input_type()).to_string(),
            short_type(method.output_type()).to_string(),
        ));
    }
    assert_eq!(actual.len(), flow.method.len(), "duplicate methods");
    let added: Vec<_> = actual.difference(&expected).collect();
    let missing: Vec<_> = expected.difference(&actual).collect();
    assert!(
        added.is_empty() && missing.is_empty(),
        "v1.Flow differs from the reference: not the reference's {added:?}; missing {missing:?} \
         (rackflow's own RPCs belong on v1.FlowExtensions)"
    );
}

#[test]
fn our_rpcs_are_on_flow_extensions_in_package_v1() {
    let ext = service(&descriptor_set(), "v1", "FlowExtensions");
    let actual: BTreeSet<(String, String, String, (bool, bool))> = ext
        .method
        .iter()
        .map(|m| {
            (
                m.name().to_string(),
                short_type(m.input_type()).to_string(),
                short_type(m.output_type()).to_string(),
                (m.client_streaming(), m.server_streaming()),
            )
        })
        .collect();
    let expected: BTreeSet<(String, String, String, (bool, bool))> = FLOW_EXTENSIONS_RPCS
        .iter()
        .map(|(n, i, o, s)| (n.to_string(), i.to_string(), o.to_string(), *s))
        .collect();
    assert_eq!(actual, expected);
    let reference: BTreeSet<&str> = REFERENCE_FLOW_RPCS.iter().map(|r| r.0).collect();
    for (name, ..) in FLOW_EXTENSIONS_RPCS {
        assert!(
            !reference.contains(name),
            "{name} is the reference's; it belongs on v1.Flow"
        );
    }
}

#[test]
fn reference_messages_keep_their_numbers_and_ours_are_at_least_1000() {
    let messages = v1_messages(&descriptor_set());
    let reference: BTreeMap<&str, BTreeMap<i32, String>> = REFERENCE_MESSAGES
        .iter()
        .map(|(name, fields)| (*name, reference_fields(fields)))
        .collect();
    let ours: BTreeSet<(&str, &str, i32)> =
        OUR_FIELDS_IN_REFERENCE_MESSAGES.iter().copied().collect();
    let mut seen_ours = BTreeSet::new();
    for (name, message) in &messages {
        let Some(reference_fields) = reference.get(name.as_str()) else {
            assert!(
                OUR_MESSAGES.contains(&name.as_str()),
                "v1.{name} is neither the reference's nor in OUR_MESSAGES"
            );
            continue;
        };
        let max_reference = reference_fields.keys().copied().max().unwrap_or(0);
        for field in &message.field {
            let number = field.number();
            match reference_fields.get(&number) {
                Some(reference_name) => assert_eq!(
                    field.name(),
                    reference_name,
                    "v1.{name} field {number} is named differently from the reference"
                ),
                None => {
                    assert!(
                        number >= FIRST_OWN_FIELD_NUMBER,
                        "v1.{name}.{} = {number}: a field added to a reference message must be \
                         numbered >= {FIRST_OWN_FIELD_NUMBER} (the reference's highest is {max_reference})",
                        field.name()
                    );
                    assert!(
                        ours.contains(&(name.as_str(), field.name(), number)),
                        "v1.{name}.{} = {number} is not listed in OUR_FIELDS_IN_REFERENCE_MESSAGES \
                         (and proto/README.md)",
                        field.name()
                    );
                    seen_ours.insert((name.as_str(), field.name(), number));
                }
            }
        }
    }
    let listed_but_absent: Vec<_> = ours.difference(&seen_ours).collect();
    assert!(
        listed_but_absent.is_empty(),
        "listed additions not in the descriptor: {listed_but_absent:?}"
    );
}

#[test]
fn sim_admin_is_our_own_package() {
    let set = descriptor_set();
    let sim = service(&set, "rackflow.sim.v1", "SimAdmin");
    assert!(!sim.method.is_empty());
    for file in set.file.iter().filter(|f| f.package() == "v1") {
        assert!(
            file.service.iter().all(|s| s.name() != "SimAdmin"),
            "SimAdmin must not be in package v1"
        );
    }
}

/// The rack manager's own RPCs live in our own package, never beside the
/// reference's `RackManager` in `rack_manager`.
#[test]
fn rack_manager_extensions_are_our_own_package() {
    let set = descriptor_set();
    let ext = service(&set, "rackflow.rms.v1", "RackManagerExtensions");
    let methods: Vec<&str> = ext.method.iter().map(|m| m.name()).collect();
    assert_eq!(methods, ["ListLeakDetectors"]);
    for file in set.file.iter().filter(|f| f.package() == "rack_manager") {
        assert!(
            file.service.iter().all(|s| s.name() == "RackManager"),
            "package rack_manager holds only the reference's RackManager"
        );
    }
}

/// The reference `RackManager` RPCs rackflow's rack manager serves (wire-
/// contract part B); each takes `<Rpc>Request` and answers `<Rpc>Response`.
const RACK_MANAGER_SERVED: [&str; 45] = [
    "CreateNodes",
    "ListNodeInventory",
    "ListRacks",
    "DeleteNode",
    "SetPowerState",
    "GetPowerState",
    "BatchSetPowerState",
    "BatchGetPowerState",
    "UpdateFirmware",
    "BatchUpdateFirmwareByNodeType",
    "BatchUpdateFirmware",
    "GetNodeFirmwareInventory",
    "GetJobStatus",
    "GetFirmwareJobStatus",
    "GetVersion",
    "ExecuteColdReboot",
    "UpdateNode",
    "GetNodeDeviceInfo",
    "ListNodeDeviceInfoByNodeType",
    "BatchGetNodeDeviceInfo",
    "BatchGetFirmwareInventory",
    "CompareFirmwareObject",
    "GetRackFirmwareInventory",
    "AddFirmwareObject",
    "GetFirmwareObject",
    "ListFirmwareObjects",
    "DeleteFirmwareObject",
    "SetDefaultFirmwareObject",
    "ApplyStoredFirmwareObject",
    "ApplyFirmwareObject",
    "GetFirmwareObjectHistory",
    "UpdateSwitchSystemImage",
    "ListSwitchSystemImages",
    "GetSwitchSystemImageJobStatus",
    "ApplySwitchSystemImage",
    "ApplyStoredSwitchSystemImage",
    "BatchResetSwitchFactoryDefault",
    "BatchResetSwitchSdnFactoryDefault",
    "BatchDisableSwitchMtls",
    "UpdateSwitchSystemPassword",
    "ListSwitchFirmware",
    "PushSwitchFirmware",
    "BatchCollectSwitchSpdmAttestationEvidence",
    "ConfigureSwitchCertificate",
    "GetConfigureSwitchCertificateJobStatus",
];

/// The reference's other `RackManager` RPCs (§B.10): not declared yet (a
/// client gets UNIMPLEMENTED); later issues move them to the list above.
/// Together the two lists are the reference's 52.
const RACK_MANAGER_NOT_YET: [&str; 7] = [
    "ConfigureScaleUpFabricManager",
    "GetScaleUpFabricStatus",
    "InspectScaleUpFabrics",
    "BatchSetScaleUpFabricState",
    "BatchGetScaleUpFabricServiceStatus",
    "GetScaleUpFabricState",
    "SetScaleUpFabricTelemetryInterfaceState",
];

/// The §B.10 messages of the served RPCs, field by field as the reference
/// has them: `number name type`, `opt` / `rep` before the type for proto3
/// `optional` / `repeated`, `map<K, V>` for maps. Enum and message types are
/// named without their package.
const RACK_MANAGER_B10_MESSAGES: &[(&str, &str)] = &[
    (
        "NodeUpdateInfo",
        "1 bmc_endpoint opt Endpoint; 2 host_endpoint opt Endpoint",
    ),
    (
        "UpdateNodeRequest",
        "2 node_id string; 3 update_info NodeUpdateInfo; 4 rack_id string",
    ),
    ("UpdateNodeResponse", "1 response OperationResponse"),
    (
        "GetNodeDeviceInfoRequest",
        "2 rack_id string; 3 node_id string",
    ),
    (
        "GetNodeDeviceInfoResponse",
        "2 status ReturnCode; 3 message string; 4 device_info NodeDeviceInfo",
    ),
    (
        "NodeDeviceInfo",
        "1 node_id string; 2 chassis_sn opt int64; 3 slot_number opt uint32; 4 tray_index opt uint32",
    ),
    (
        "ListNodeDeviceInfoByNodeTypeRequest",
        "2 rack_id string; 3 node_type NodeType; 4 node_descriptor opt NodeDescriptor",
    ),
    (
        "ListNodeDeviceInfoByNodeTypeResponse",
        "2 status ReturnCode; 3 message string; 4 node_device_details rep NodeDeviceInfo; 5 stats NodeOperationStats",
    ),
    ("BatchGetNodeDeviceInfoRequest", "2 nodes NodeSet"),
    (
        "BatchGetNodeDeviceInfoResponse",
        "2 status ReturnCode; 3 message string; 4 node_device_details rep NodeDeviceInfo; 5 stats NodeOperationStats",
    ),
    ("BatchGetFirmwareInventoryRequest", "2 nodes NodeSet"),
    (
        "BatchGetFirmwareInventoryResponse",
        "1 response NodeBatchResponse; 2 nodes rep NodeFirmwareInventory",
    ),
    (
        "NodeFirmwareInventory",
        "1 node_id string; 2 firmware_list rep FirmwareInventoryInfo",
    ),
    (
        "CompareFirmwareObjectRequest",
        "1 config_json string; 2 firmware_type string; 3 nodes NodeSet; 4 component_filters map<int32, FirmwareObjectComponentFilter>; 5 node_descriptor_component_filters rep NodeDescriptorFirmwareObjectComponentFilter",
    ),
    ("FirmwareObjectComponentFilter", "1 components rep string"),
    (
        "NodeDescriptorFirmwareObjectComponentFilter",
        "1 node_descriptor NodeDescriptor; 2 component_filter FirmwareObjectComponentFilter",
    ),
    (
        "CompareFirmwareObjectResponse",
        "1 response NodeBatchResponse; 2 object_id string; 3 matches_manifest bool; 4 nodes rep NodeFirmwareManifestComparison",
    ),
    (
        "NodeFirmwareManifestComparison",
        "1 node_id string; 2 matches_manifest bool; 3 components rep FirmwareManifestComponentComparison",
    ),
    (
        "FirmwareManifestComponentComparison",
        "1 component string; 2 installed_component string; 3 installed_version string; 4 proposed_version string; 5 status FirmwareComparisonStatus; 6 target string; 7 reason string; 8 sku_id string",
    ),
    ("GetRackFirmwareInventoryRequest", "2 rack_id string"),
    (
        "GetRackFirmwareInventoryResponse",
        "2 status ReturnCode; 3 nodes rep NodeFirmwareInventory",
    ),
    (
        "AddFirmwareObjectRequest",
        "2 config_json string; 3 access_token opt string; 4 hardware_type string; 5 set_default bool",
    ),
    ("AddFirmwareObjectResponse", "1 object FirmwareObject"),
    (
        "FirmwareObject",
        "1 id string; 2 config_json string; 3 available bool; 4 created Timestamp; 5 updated Timestamp; 6 metadata FirmwareObjectMetadata; 7 hardware_type string; 8 is_default bool",
    ),
    (
        "FirmwareObjectMetadata",
        "1 device_components rep FirmwareObjectDeviceComponents; 2 switch_system_images rep FirmwareObjectSwitchSystemImage",
    ),
    (
        "FirmwareObjectDeviceComponents",
        "1 node_type NodeType; 2 device_type string; 3 components rep FirmwareObjectComponent; 4 node_descriptor opt NodeDescriptor",
    ),
    (
        "FirmwareObjectComponent",
        "1 name string; 2 version string; 3 bundle string; 4 source_component string; 5 subcomponents rep FirmwareObjectSubcomponent; 6 artifacts rep FirmwareObjectArtifact",
    ),
    (
        "FirmwareObjectSubcomponent",
        "1 name string; 2 version string; 3 sku_id string",
    ),
    (
        "FirmwareObjectArtifact",
        "1 firmware_type string; 2 filename string; 3 target string; 4 bundle string",
    ),
    (
        "FirmwareObjectSwitchSystemImage",
        "1 software_type string; 2 version string; 3 package_name string; 4 image_filename string; 5 required bool",
    ),
    ("GetFirmwareObjectRequest", "2 id string"),
    ("GetFirmwareObjectResponse", "1 object FirmwareObject"),
    (
        "ListFirmwareObjectsRequest",
        "2 only_available bool; 3 hardware_type string",
    ),
    (
        "ListFirmwareObjectsResponse",
        "1 objects rep FirmwareObject",
    ),
    ("DeleteFirmwareObjectRequest", "2 id string"),
    (
        "DeleteFirmwareObjectResponse",
        "1 response OperationResponse",
    ),
    ("SetDefaultFirmwareObjectRequest", "2 object_id string"),
    (
        "SetDefaultFirmwareObjectResponse",
        "1 object FirmwareObject",
    ),
    (
        "ApplyStoredFirmwareObjectRequest",
        "2 rack_id string; 3 object_id string; 4 firmware_type string; 5 hardware_type string; 6 components rep string; 7 nodes NodeSet; 8 force_update bool; 9 component_filters map<int32, FirmwareObjectComponentFilter>; 10 node_descriptor_component_filters rep NodeDescriptorFirmwareObjectComponentFilter",
    ),
    (
        "ApplyStoredFirmwareObjectResponse",
        "1 response NodeBatchResponse; 2 object_id string; 3 jobs rep NodeFirmwareJobInfo",
    ),
    (
        "ApplyFirmwareObjectRequest",
        "2 rack_id string; 3 config_json string; 4 access_token opt string; 5 firmware_type string; 6 hardware_type string; 7 nodes NodeSet; 8 force_update bool; 9 component_filters map<int32, FirmwareObjectComponentFilter>; 10 node_descriptor_component_filters rep NodeDescriptorFirmwareObjectComponentFilter",
    ),
    (
        "ApplyFirmwareObjectResponse",
        "1 response NodeBatchResponse; 2 object_id string; 3 jobs rep NodeFirmwareJobInfo",
    ),
    (
        "GetFirmwareObjectHistoryRequest",
        "2 object_id string; 3 rack_ids rep string",
    ),
    (
        "GetFirmwareObjectHistoryResponse",
        "1 records rep FirmwareObjectHistoryRecord",
    ),
    (
        "FirmwareObjectHistoryRecord",
        "1 object_id string; 2 rack_id string; 3 firmware_type string; 4 applied_at Timestamp; 5 firmware_available bool; 6 hardware_type string; 7 node_ids rep string",
    ),
];

/// Fields rackflow adds to reference `rack_manager` messages (numbers ≥
/// 1000, listed in proto/README.md).
const RACK_MANAGER_OUR_FIELDS: &[(&str, i32, &str)] =
    &[("FirmwareObject", 1000, "unavailable_reason opt string")];

/// A field as `rack_manager_b10_messages_are_the_references` compares it:
/// `opt T`, `rep T`, `map<K, V>` or `T`.
fn field_shape(set: &FileDescriptorSet, field: &prost_types::FieldDescriptorProto) -> String {
    use prost_types::field_descriptor_proto::{Label, Type};
    let short = |type_name: &str| type_name.rsplit('.').next().unwrap_or_default().to_string();
    let scalar = |field: &prost_types::FieldDescriptorProto| match field.r#type() {
        Type::String => "string".to_string(),
        Type::Bool => "bool".to_string(),
        Type::Int32 => "int32".to_string(),
        Type::Int64 => "int64".to_string(),
        Type::Uint32 => "uint32".to_string(),
        Type::Uint64 => "uint64".to_string(),
        Type::Bytes => "bytes".to_string(),
        Type::Message | Type::Enum => short(field.type_name()),
        other => format!("{other:?}"),
    };
    if field.label() == Label::Repeated && field.r#type() == Type::Message {
        // A map is a repeated nested `<Name>Entry` with `map_entry` set.
        let entry = set
            .file
            .iter()
            .flat_map(|f| f.message_type.iter())
            .flat_map(|m| m.nested_type.iter())
            .find(|n| {
                n.name() == short(field.type_name())
                    && n.options.as_ref().is_some_and(|o| o.map_entry())
            });
        if let Some(entry) = entry {
            return format!(
                "map<{}, {}>",
                scalar(&entry.field[0]),
                scalar(&entry.field[1])
            );
        }
    }
    if field.label() == Label::Repeated {
        format!("rep {}", scalar(field))
    } else if field.proto3_optional() {
        format!("opt {}", scalar(field))
    } else {
        scalar(field)
    }
}

#[test]
fn rack_manager_b10_messages_are_the_references() {
    let set = descriptor_set();
    for (name, fields) in RACK_MANAGER_B10_MESSAGES {
        let message = set
            .file
            .iter()
            .filter(|f| f.package() == "rack_manager")
            .flat_map(|f| f.message_type.iter())
            .find(|m| m.name() == *name)
            .unwrap_or_else(|| panic!("rack_manager.{name} is missing"));
        let actual: BTreeMap<i32, String> = message
            .field
            .iter()
            .map(|f| (f.number(), format!("{} {}", f.name(), field_shape(&set, f))))
            .collect();
        let ours: BTreeMap<i32, String> = RACK_MANAGER_OUR_FIELDS
            .iter()
            .filter(|(m, ..)| m == name)
            .map(|(_, number, field)| (*number, (*field).to_string()))
            .collect();
        let (actual_ours, actual): (BTreeMap<i32, String>, BTreeMap<i32, String>) =
            actual.into_iter().partition(|(number, _)| *number >= 1000);
        assert_eq!(
            actual_ours, ours,
            "rackflow's fields of rack_manager.{name}"
        );
        let expected: BTreeMap<i32, String> = fields
            .split("; ")
            .map(|f| {
                let (number, rest) = f.split_once(' ').expect("\"number name type\"");
                (number.parse().expect("field number"), rest.to_string())
            })
            .collect();
        assert_eq!(actual, expected, "rack_manager.{name}");
    }
    let comparison = set
        .file
        .iter()
        .filter(|f| f.package() == "rack_manager")
        .flat_map(|f| f.enum_type.iter())
        .find(|e| e.name() == "FirmwareComparisonStatus")
        .expect("FirmwareComparisonStatus");
    let values: Vec<(i32, &str)> = comparison
        .value
        .iter()
        .map(|v| (v.number(), v.name()))
        .collect();
    assert_eq!(
        values,
        [
            (0, "FIRMWARE_COMPARISON_STATUS_UNSPECIFIED"),
            (1, "FIRMWARE_COMPARISON_STATUS_MATCHED"),
            (2, "FIRMWARE_COMPARISON_STATUS_MISMATCHED"),
            (3, "FIRMWARE_COMPARISON_STATUS_MISSING"),
            (4, "FIRMWARE_COMPARISON_STATUS_UNVERIFIED"),
        ]
    );
}

/// `ExecuteColdRebootRequest` as the reference numbers it (§B.10).
const EXECUTE_COLD_REBOOT_REQUEST: &str = "1 nodes; 2 domain; 3 prestage_shutdown_floor_seconds; \
     4 prestage_shutdown_poll_max_seconds; 5 discharge_floor_seconds; 6 discharge_poll_max_seconds; \
     7 bmc_up_floor_seconds; 8 bmc_up_poll_max_seconds; 9 nvos_hello_backoff_seconds; \
     10 compute_boot_wait_seconds; 11 poll_interval_seconds";

#[test]
fn rack_manager_declares_only_reference_rpcs_with_their_messages() {
    let reference: BTreeSet<&str> = RACK_MANAGER_SERVED
        .iter()
        .chain(&RACK_MANAGER_NOT_YET)
        .copied()
        .collect();
    assert_eq!(reference.len(), 52, "the reference's 52, each once");
    let set = descriptor_set();
    let rm = service(&set, "rack_manager", "RackManager");
    let mut declared = BTreeSet::new();
    for method in &rm.method {
        let name = method.name();
        assert!(
            reference.contains(name),
            "RackManager/{name} is not a reference RPC"
        );
        assert_eq!(method.input_type(), format!(".rack_manager.{name}Request"));
        assert_eq!(
            method.output_type(),
            format!(".rack_manager.{name}Response")
        );
        assert!(!method.client_streaming() && !method.server_streaming());
        declared.insert(name);
    }
    let expected: BTreeSet<&str> = RACK_MANAGER_SERVED.iter().copied().collect();
    assert_eq!(declared, expected);

    let request = set
        .file
        .iter()
        .filter(|f| f.package() == "rack_manager")
        .flat_map(|f| f.message_type.iter())
        .find(|m| m.name() == "ExecuteColdRebootRequest")
        .expect("ExecuteColdRebootRequest");
    let actual: BTreeMap<i32, String> = request
        .field
        .iter()
        .map(|f| (f.number(), f.name().to_string()))
        .collect();
    assert_eq!(actual, reference_fields(EXECUTE_COLD_REBOOT_REQUEST));
    for field in request.field.iter().filter(|f| f.number() >= 2) {
        assert!(
            field.proto3_optional(),
            "{} is optional in the reference",
            field.name()
        );
    }
}
