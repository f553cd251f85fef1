//! The 11 event-rule RPCs (issue 34) through the real gRPC API, on SQLite
//! and PostgreSQL: creation (always disabled) with the reference's
//! validation, listing (persisted, then the built-in, ascending id, paged),
//! updates, enable / disable, bindings to the site and to racks with their
//! conflicts, the effective rule of a rack or component (rack binding >
//! site binding > built-in, disabled rules skipped), deletion, and the
//! built-in's immutability.

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

use rackflow_testkit as common;
use rackflow_testkit::both_stores;

use common::{Backend, TestServer, fixture_fleet, fixture_id, uuid};
use rackflow_api::v1 as pb;
use tonic::Code;

both_stores!(
    rules_are_created_disabled_validated_listed_and_updated,
    bindings_decide_the_effective_rule,
    leak_reports_set_the_leak_status_and_open_one_event,
    a_leak_preempts_a_rollout_and_powers_the_tray_off,
    a_leak_injected_in_the_sim_is_detected_and_answered,
    a_response_a_crash_left_undone_is_run_by_the_loop,
    a_rollout_counts_a_target_the_leak_stopped_as_failed,
    alerts_and_leak_reports_are_counted_in_the_metrics,
    a_dry_detector_does_not_close_a_monitors_leak,
);

const LEAK: &str = "hardware.leak.detected";
const BUILTIN: &str = "f34b87f7-cb1b-4b08-aa51-30c0b3b58680";

fn noop(name: &str) -> pb::EventRuleAction {
    pb::EventRuleAction {
        name: name.into(),
        condition: Some(pb::EventRuleActionCondition {
            severities: vec![pb::EventRuleSeverity::Critical as i32],
            component_types: Vec::new(),
        }),
        spec: Some(pb::event_rule_action::Spec::Noop(pb::EventRuleNoopAction {
            reason: "audit only".into(),
        })),
    }
}

/// A force power-off action (with the empty condition the server echoes).
fn power_off(name: &str, strategy: pb::EventRuleTargetStrategy) -> pb::EventRuleAction {
    pb::EventRuleAction {
        name: name.into(),
        condition: Some(pb::EventRuleActionCondition::default()),
        spec: Some(pb::event_rule_action::Spec::SubmitTask(
            pb::EventRuleSubmitTaskAction {
                target_strategy: strategy as i32,
                conflict_strategy: pb::EventRuleConflictStrategy::Queue as i32,
                description: "Leakage response".into(),
                operation: Some(pb::TaskOperation {
                    operation: Some(pb::task_operation::Operation::PowerControl(
                        pb::PowerControlTaskOperation {
                            operation: pb::PowerControlOperation::ForcePowerOff as i32,
                            override_readiness_check: false,
                        },
                    )),
                }),
            },
        )),
    }
}

fn create(name: &str, actions: Vec<pb::EventRuleAction>) -> pb::CreateEventRuleRequest {
    pb::CreateEventRuleRequest {
        name: name.into(),
        description: format!("{name} rule"),
        event_type: LEAK.into(),
        actions,
    }
}

fn rule_id(rule: &pb::EventRule) -> Option<pb::Uuid> {
    rule.id.clone()
}

fn rack_scope(n: u32) -> pb::EventRuleScope {
    pb::EventRuleScope {
        r#type: pb::EventRuleScopeType::Rack as i32,
        id: Some(uuid(fixture_id(n))),
    }
}

fn site_scope() -> pb::EventRuleScope {
    pb::EventRuleScope {
        r#type: pb::EventRuleScopeType::Site as i32,
        id: None,
    }
}

async fn effective_for_rack(s: &TestServer, n: u32) -> pb::EventRule {
    s.client
        .clone()
        .get_effective_event_rule(pb::GetEffectiveEventRuleRequest {
            event_type: LEAK.into(),
            target: Some(pb::get_effective_event_rule_request::Target::RackId(uuid(
                fixture_id(n),
            ))),
        })
        .await
        .expect("effective rule")
        .into_inner()
}

async fn rules_are_created_disabled_validated_listed_and_updated(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    // Created disabled, not read-only, with its actions as given.
    let created = s
        .client
        .create_event_rule(create(
            "Leak audit",
            vec![
                noop("record_leak"),
                power_off("power_off_rack", pb::EventRuleTargetStrategy::Rack),
            ],
        ))
        .await
        .expect("create")
        .into_inner();
    assert!(!created.enabled && !created.read_only);
    assert_eq!(created.event_type, LEAK);
    assert_eq!(created.actions.len(), 2);
    assert_eq!(
        created.actions[1],
        power_off("power_off_rack", pb::EventRuleTargetStrategy::Rack)
    );
    assert!(created.created_at.is_some() && created.updated_at.is_some());

    // The reference's validation, as InvalidArgument naming the problem.
    let refused = |req: pb::CreateEventRuleRequest| {
        let mut client = s.client.clone();
        async move { client.create_event_rule(req).await.expect_err("refused") }
    };
    for (req, text) in [
        (
            pb::CreateEventRuleRequest {
                event_type: "hardware.fire.detected".into(),
                ..create("x", vec![noop("a")])
            },
            "unsupported event type",
        ),
        (create(" x", vec![noop("a")]), "whitespace"),
        (create("x", Vec::new()), "at least one action"),
        (create("x", vec![noop("a"), noop("a")]), "used twice"),
        (create("x", vec![noop("Not_Snake")]), "lower_snake_case"),
        (
            create(
                "x",
                vec![pb::EventRuleAction {
                    spec: None,
                    ..noop("a")
                }],
            ),
            "action spec is required",
        ),
        (
            create(
                "x",
                vec![power_off("a", pb::EventRuleTargetStrategy::Unspecified)],
            ),
            "unknown event rule target strategy",
        ),
    ] {
        let err = refused(req).await;
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert!(err.message().contains(text), "{text}: {err:?}");
    }

    // Listing: persisted rules first, then the built-in; filters and pages.
    let second = s
        .client
        .create_event_rule(create("Second", vec![noop("record")]))
        .await
        .unwrap()
        .into_inner();
    let list = |event_type: Option<&str>, enabled: Option<bool>, page: Option<(i32, i32)>| {
        let mut client = s.client.clone();
        let req = pb::ListEventRulesRequest {
            event_type: event_type.map(str::to_string),
            enabled,
            pagination: page.map(|(offset, limit)| pb::Pagination { offset, limit }),
        };
        async move { client.list_event_rules(req).await }
    };
    let all = list(None, None, None).await.unwrap().into_inner();
    assert_eq!(all.total, 3);
    let ids: Vec<String> = all.rules.iter().map(|r| r.id.clone().unwrap().id).collect();
    let mut persisted = [
        created.id.clone().unwrap().id,
        second.id.clone().unwrap().id,
    ];
    persisted.sort();
    assert_eq!(
        ids,
        [persisted[0].clone(), persisted[1].clone(), BUILTIN.into()]
    );
    assert!(all.rules[2].read_only && all.rules[2].enabled);
    let enabled_only = list(Some(LEAK), Some(true), None)
        .await
        .unwrap()
        .into_inner();
    assert_eq!((enabled_only.total, enabled_only.rules.len()), (1, 1));
    let page = list(None, None, Some((1, 1))).await.unwrap().into_inner();
    assert_eq!(page.total, 3);
    assert_eq!(page.rules[0].id.clone().unwrap().id, persisted[1]);
    let err = list(None, None, Some((0, 0))).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("limit must be positive"), "{err:?}");
    let err = list(Some("nope"), None, None).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);

    // Updates: metadata replaces name and description; actions the list.
    let updated = s
        .client
        .update_event_rule(pb::UpdateEventRuleRequest {
            rule_id: rule_id(&second),
            update: Some(pb::update_event_rule_request::Update::Metadata(
                pb::EventRuleMetadataUpdate {
                    name: "Renamed".into(),
                    description: String::new(),
                },
            )),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (updated.name.as_str(), updated.description.as_str()),
        ("Renamed", "")
    );
    let updated = s
        .client
        .update_event_rule(pb::UpdateEventRuleRequest {
            rule_id: rule_id(&second),
            update: Some(pb::update_event_rule_request::Update::Actions(
                pb::EventRuleActionsUpdate {
                    actions: vec![noop("first"), noop("second")],
                },
            )),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(updated.actions.len(), 2);
    let enabled = s
        .client
        .enable_event_rule(pb::EnableEventRuleRequest {
            rule_id: rule_id(&second),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(enabled.enabled);
    let disabled = s
        .client
        .disable_event_rule(pb::DisableEventRuleRequest {
            rule_id: rule_id(&second),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!disabled.enabled);

    // The built-in: readable, immutable (FailedPrecondition).
    let builtin_id = Some(pb::Uuid { id: BUILTIN.into() });
    let builtin = s
        .client
        .get_event_rule(pb::GetEventRuleRequest {
            rule_id: builtin_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(builtin.name, "Default leakage response");
    assert!(builtin.created_at.is_none());
    assert_eq!(
        builtin.actions,
        [power_off(
            "power_off_affected_components",
            pb::EventRuleTargetStrategy::AffectedComponents
        )]
    );
    let err = s
        .client
        .disable_event_rule(pb::DisableEventRuleRequest {
            rule_id: builtin_id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    let err = s
        .client
        .delete_event_rule(pb::DeleteEventRuleRequest {
            rule_id: builtin_id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");

    // Delete; then it is gone.
    s.client
        .delete_event_rule(pb::DeleteEventRuleRequest {
            rule_id: rule_id(&second),
        })
        .await
        .expect("delete");
    let err = s
        .client
        .get_event_rule(pb::GetEventRuleRequest {
            rule_id: rule_id(&second),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    let err = s
        .client
        .get_event_rule(pb::GetEventRuleRequest { rule_id: None })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");

    // Mutations are in the audit trail.
    let events = s
        .extensions()
        .list_audit_events(pb::ListAuditEventsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .events;
    for action in [
        "v1.Flow/CreateEventRule",
        "v1.Flow/UpdateEventRule",
        "v1.Flow/EnableEventRule",
        "v1.Flow/DeleteEventRule",
    ] {
        assert!(
            events.iter().any(|e| e.action == action),
            "{action} not audited: {events:#?}"
        );
    }
    s.stop().await;
}

async fn bindings_decide_the_effective_rule(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 2).await;
    // No rule of ours: the built-in acts.
    assert_eq!(effective_for_rack(&s, 1).await.id.unwrap().id, BUILTIN);

    let rack_rule = s
        .client
        .create_event_rule(create("Rack rule", vec![noop("a")]))
        .await
        .unwrap()
        .into_inner();
    let site_rule = s
        .client
        .create_event_rule(create("Site rule", vec![noop("a")]))
        .await
        .unwrap()
        .into_inner();
    let bind = |rule: &pb::EventRule, scope: pb::EventRuleScope| {
        let mut client = s.client.clone();
        let req = pb::CreateEventRuleBindingRequest {
            rule_id: rule_id(rule),
            scope: Some(scope),
        };
        async move { client.create_event_rule_binding(req).await }
    };
    let binding = bind(&rack_rule, rack_scope(1)).await.unwrap().into_inner();
    assert_eq!(binding.event_type, LEAK);
    assert_eq!(binding.scope, Some(rack_scope(1)));
    bind(&site_rule, site_scope()).await.unwrap();

    // Conflicts and bad scopes.
    // A taken scope names the rule that holds it.
    let err = bind(&site_rule, rack_scope(1)).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().contains(&rack_rule.id.clone().unwrap().id),
        "{err:?}"
    );
    let err = bind(&rack_rule, site_scope()).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("already has"), "{err:?}");
    // A site-bound rule is not bound to a free rack as well.
    let err = bind(&site_rule, rack_scope(2)).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("not both"), "{err:?}");
    let err = bind(&rack_rule, rack_scope(99)).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    let builtin = pb::EventRule {
        id: Some(pb::Uuid { id: BUILTIN.into() }),
        ..Default::default()
    };
    let err = bind(&builtin, rack_scope(2)).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    let err = bind(
        &rack_rule,
        pb::EventRuleScope {
            id: Some(uuid(fixture_id(2))),
            ..site_scope()
        },
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");

    // Both bound but disabled: the built-in still acts.
    assert_eq!(effective_for_rack(&s, 1).await.id.unwrap().id, BUILTIN);
    // The site rule enabled: it acts for every rack...
    let enable = |rule: &pb::EventRule| {
        let mut client = s.client.clone();
        let req = pb::EnableEventRuleRequest {
            rule_id: rule_id(rule),
        };
        async move { client.enable_event_rule(req).await.unwrap() }
    };
    enable(&site_rule).await;
    assert_eq!(effective_for_rack(&s, 1).await.id, site_rule.id);
    assert_eq!(effective_for_rack(&s, 2).await.id, site_rule.id);
    // ...until the rack rule is enabled, which wins on its rack.
    enable(&rack_rule).await;
    assert_eq!(effective_for_rack(&s, 1).await.id, rack_rule.id);
    assert_eq!(effective_for_rack(&s, 2).await.id, site_rule.id);
    // A component resolves to its rack.
    let component = s
        .rack(fixture_id(1), true)
        .await
        .components
        .remove(0)
        .info
        .unwrap()
        .id;
    let by_component = s
        .client
        .get_effective_event_rule(pb::GetEffectiveEventRuleRequest {
            event_type: LEAK.into(),
            target: Some(pb::get_effective_event_rule_request::Target::ComponentId(
                component.unwrap(),
            )),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(by_component.id, rack_rule.id);
    let err = s
        .client
        .get_effective_event_rule(pb::GetEffectiveEventRuleRequest {
            event_type: LEAK.into(),
            target: Some(pb::get_effective_event_rule_request::Target::RackId(uuid(
                fixture_id(99),
            ))),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");

    // Get and delete bindings by (event type, scope); a bound rule is not
    // deleted.
    let got = s
        .client
        .get_event_rule_binding(pb::GetEventRuleBindingRequest {
            event_type: LEAK.into(),
            scope: Some(rack_scope(1)),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.rule_id, rack_rule.id);
    let err = s
        .client
        .delete_event_rule(pb::DeleteEventRuleRequest {
            rule_id: rule_id(&rack_rule),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("bindings first"), "{err:?}");
    s.client
        .delete_event_rule_binding(pb::DeleteEventRuleBindingRequest {
            event_type: LEAK.into(),
            scope: Some(rack_scope(1)),
        })
        .await
        .expect("unbind");
    let err = s
        .client
        .get_event_rule_binding(pb::GetEventRuleBindingRequest {
            event_type: LEAK.into(),
            scope: Some(rack_scope(1)),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    assert_eq!(effective_for_rack(&s, 1).await.id, site_rule.id);
    s.client
        .delete_event_rule(pb::DeleteEventRuleRequest {
            rule_id: rule_id(&rack_rule),
        })
        .await
        .expect("delete the unbound rule");
    s.stop().await;
}

async fn leak_reports_set_the_leak_status_and_open_one_event(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    let tray = s.rack(fixture_id(1), true).await.components.remove(0);
    assert_eq!(tray.leak_status, pb::LeakStatus::Unknown as i32);
    assert!(tray.leak_observed_at.is_none());
    let tray_id = tray.info.unwrap().id;
    let report = |cleared: bool| pb::ReportLeakRequest {
        component_id: tray_id.clone(),
        source: "cdu-7".into(),
        severity: pb::EventRuleSeverity::Critical as i32,
        cleared,
        observed_at: None,
        message: "coolant on the drip tray".into(),
    };
    let mut ext = s.extensions();
    let first = ext.report_leak(report(false)).await.unwrap().into_inner();
    assert_eq!(first.outcome, pb::LeakReportOutcome::New as i32);
    let event = first.event.unwrap();
    assert_eq!(event.rack_id, Some(uuid(fixture_id(1))));
    let again = ext.report_leak(report(false)).await.unwrap().into_inner();
    assert_eq!(again.outcome, pb::LeakReportOutcome::Repeat as i32);
    assert_eq!(again.event.as_ref().unwrap().id, event.id);
    assert_eq!(again.event.unwrap().observations, 2);

    // The component shows it, observed.
    let tray = s.rack(fixture_id(1), true).await.components.remove(0);
    assert_eq!(tray.leak_status, pb::LeakStatus::Detected as i32);
    assert!(tray.leak_observed_at.is_some());
    let listed = ext
        .list_leak_events(pb::ListLeakEventsRequest {
            open_only: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.total, 1);
    assert_eq!(listed.events[0].id, event.id);

    // Listings filter by leak status: the leaking tray, the unreported rest.
    let by_leak = |statuses: Vec<pb::LeakStatus>| pb::GetComponentsRequest {
        leak_statuses: statuses.into_iter().map(|s| s as i32).collect(),
        ..Default::default()
    };
    let leaking = s
        .client
        .get_components(by_leak(vec![pb::LeakStatus::Detected]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(leaking.total, 1);
    assert_eq!(leaking.components[0].info.as_ref().unwrap().id, tray_id);
    let all = s
        .client
        .get_components(by_leak(Vec::new()))
        .await
        .unwrap()
        .into_inner()
        .total;
    let unreported = s
        .client
        .get_components(by_leak(vec![
            pb::LeakStatus::Unknown,
            pb::LeakStatus::NotDetected,
        ]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(unreported.total, all - 1);
    assert!(
        unreported
            .components
            .iter()
            .all(|c| c.leak_status == pb::LeakStatus::Unknown as i32)
    );
    let err = s
        .client
        .get_components(pb::GetComponentsRequest {
            leak_statuses: vec![7],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("leak_statuses[0]: 7"), "{err:?}");

    // Cleared: the event closes and the tray reads not detected.
    let cleared = ext.report_leak(report(true)).await.unwrap().into_inner();
    assert_eq!(cleared.outcome, pb::LeakReportOutcome::Cleared as i32);
    assert!(cleared.event.unwrap().closed_at.is_some());
    let tray = s.rack(fixture_id(1), true).await.components.remove(0);
    assert_eq!(tray.leak_status, pb::LeakStatus::NotDetected as i32);

    // Refusals: an unknown component, no source, a report from the future.
    let err = ext
        .report_leak(pb::ReportLeakRequest {
            component_id: Some(uuid(fixture_id(404))),
            ..report(false)
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    let err = ext
        .report_leak(pb::ReportLeakRequest {
            source: String::new(),
            ..report(false)
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    let err = ext
        .report_leak(pb::ReportLeakRequest {
            observed_at: Some(prost_types::Timestamp {
                seconds: chrono::Utc::now().timestamp() + 3600,
                nanos: 0,
            }),
            ..report(false)
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    let events = ext
        .list_audit_events(pb::ListAuditEventsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .events;
    assert!(
        events
            .iter()
            .any(|e| e.action == "v1.FlowExtensions/ReportLeak"),
        "{events:#?}"
    );
    s.stop().await;
}

/// Rack `n`'s tasks, newest first.
async fn rack_tasks(client: &FlowClient, n: u32) -> Vec<pb::Task> {
    client
        .clone()
        .list_tasks(pb::ListTasksRequest {
            rack_id: Some(uuid(fixture_id(n))),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .tasks
}

/// Starts a firmware upgrade of rack 1 and waits until it is flashing.
async fn flashing(s: &mut TestServer, deadline: std::time::Duration) -> uuid::Uuid {
    let ids = s
        .client
        .upgrade_firmware(pb::UpgradeFirmwareRequest {
            target_spec: Some(common::whole_rack(1)),
            target_version: Some("2.0.0".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .task_ids;
    let id: uuid::Uuid = ids[0].id.parse().unwrap();
    s.wait_task(id, "running", deadline, |t| {
        t.status == pb::TaskStatus::Running as i32
    })
    .await;
    id
}

/// The leak response's force power-off task on rack 1, once it exists.
async fn response_task(s: &TestServer, deadline: std::time::Duration) -> uuid::Uuid {
    let mut changes = s.waiter("the leak response task", deadline);
    loop {
        let tasks = rack_tasks(&s.client, 1).await;
        let responses: Vec<_> = tasks
            .iter()
            .filter(|t| t.operation == "power_control/force_power_off")
            .collect();
        assert!(responses.len() <= 1, "{tasks:#?}");
        if let Some(t) = responses.first() {
            return t.id.as_ref().unwrap().id.parse().unwrap();
        }
        changes.next(&tasks.len()).await;
    }
}

async fn sim_admin(
    s: &TestServer,
) -> rackflow_api::sim::v1::sim_admin_client::SimAdminClient<tonic::transport::Channel> {
    rackflow_api::sim::v1::sim_admin_client::SimAdminClient::connect(format!("http://{}", s.addr))
        .await
        .unwrap()
}

type FlowClient = rackflow_api::v1::flow_client::FlowClient<tonic::transport::Channel>;

/// A server whose simulated firmware updates take long enough to be
/// running when the leak is reported.
async fn slow_flashing(backend: Backend) -> Option<TestServer> {
    slow_flashing_with(backend, |_| {}).await
}

async fn slow_flashing_with(
    backend: Backend,
    adjust: impl FnOnce(&mut rackflow_server::Config),
) -> Option<TestServer> {
    let mut config = rackflow_server::Config {
        sim: rackflow_engine::sim::SimConfig {
            power_ms: 20,
            firmware_update_ms: 60_000,
            jitter: 0.0,
            ..rackflow_engine::sim::SimConfig::default()
        },
        ..rackflow_server::Config::default()
    };
    config.dispatcher.enabled = false;
    adjust(&mut config);
    TestServer::start_with(backend, config).await
}

async fn a_leak_preempts_a_rollout_and_powers_the_tray_off(backend: Backend) {
    let Some(mut s) = slow_flashing(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 2).await;
    let deadline = std::time::Duration::from_secs(60);
    // A firmware rollout is flashing rack 1.
    let upgrade = flashing(&mut s, deadline).await;
    let components = s.rack(fixture_id(1), true).await.components;
    let tray = components
        .iter()
        .find(|c| c.r#type == pb::ComponentType::Compute as i32)
        .unwrap()
        .clone();
    let tray_id = tray.info.clone().unwrap().id;

    // The leak: the built-in rule acts (no rule of ours is bound).
    let reply = s
        .extensions()
        .report_leak(pb::ReportLeakRequest {
            component_id: tray_id.clone(),
            source: "cdu-1".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.outcome, pb::LeakReportOutcome::New as i32);
    assert_eq!(reply.rule_id.as_ref().unwrap().id, BUILTIN);
    assert_eq!(reply.cancelled_task_ids.len(), 1, "{reply:?}");
    assert_eq!(reply.cancelled_task_ids[0].id, upgrade.to_string());
    assert_eq!(reply.submitted_task_ids.len(), 1, "{reply:?}");
    let response: uuid::Uuid = reply.submitted_task_ids[0].id.parse().unwrap();

    // The rollout's task ends cancelled, naming the leak.
    let cancelled = s.task(upgrade).await;
    assert_eq!(cancelled.status, pb::TaskStatus::Terminated as i32);
    assert!(
        cancelled.message.contains("coolant leak")
            && cancelled.message.contains(&tray_id.clone().unwrap().id),
        "{}",
        cancelled.message
    );
    // The response force-powers the tray off.
    let done = s
        .wait_task(response, "finished", deadline, |t| t.finished_at.is_some())
        .await;
    assert_eq!(done.status, pb::TaskStatus::Completed as i32, "{done:#?}");
    assert_eq!(done.trigger_type, "event_rule_execution");
    assert_eq!(done.trigger_id.as_ref().unwrap().id, BUILTIN);
    assert_eq!(cancelled.trigger_type, "api");
    assert_eq!(cancelled.trigger_id, None);
    assert_eq!(done.operation, "power_control/force_power_off");
    assert!(
        done.description.contains("Leakage response"),
        "{}",
        done.description
    );
    let tray_ext = tray.component_id.clone();
    let mut sim = sim_admin(&s).await;
    let states = sim
        .get_component_states(rackflow_api::sim::v1::GetComponentStatesRequest::default())
        .await
        .unwrap()
        .into_inner()
        .states;
    let state = states.iter().find(|c| c.component == tray_ext).unwrap();
    assert_eq!(state.power_state, "Off", "{state:?}");
    // The tray reads DETECTED and DOWN (its response completed); a tray
    // nobody reported on is UNKNOWN / UNKNOWN.
    let components = s.rack(fixture_id(1), true).await.components;
    let leaking = components
        .iter()
        .find(|c| c.component_id == tray_ext)
        .unwrap();
    assert_eq!(leaking.leak_status, pb::LeakStatus::Detected as i32);
    assert_eq!(
        leaking.leak_handling_status,
        pb::LeakHandlingStatus::Down as i32
    );
    let other = components
        .iter()
        .find(|c| c.component_id != tray_ext)
        .unwrap();
    assert_eq!(
        (other.leak_status, other.leak_handling_status),
        (0, 0),
        "{other:?}"
    );

    // The same leak again: no second response.
    let again = s
        .extensions()
        .report_leak(pb::ReportLeakRequest {
            component_id: tray_id.clone(),
            source: "cdu-1".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.outcome, pb::LeakReportOutcome::Repeat as i32);
    assert!(again.submitted_task_ids.is_empty());

    // The audit trail names the rule that acted.
    let events = s
        .extensions()
        .list_audit_events(pb::ListAuditEventsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .events;
    let acted = events
        .iter()
        .find(|e| e.action == "event_rule/hardware.leak.detected")
        .expect("the response is audited");
    assert!(
        acted.subject_ids.iter().any(|id| id == BUILTIN),
        "{acted:?}"
    );
    assert!(
        acted.subject_ids.contains(&response.to_string()),
        "{acted:?}"
    );

    // On rack 2 an enabled rack-bound noop rule wins: nothing is powered.
    let noop_rule = s
        .client
        .create_event_rule(create("Audit only", vec![noop("record")]))
        .await
        .unwrap()
        .into_inner();
    s.client
        .create_event_rule_binding(pb::CreateEventRuleBindingRequest {
            rule_id: rule_id(&noop_rule),
            scope: Some(rack_scope(2)),
        })
        .await
        .unwrap();
    s.client
        .enable_event_rule(pb::EnableEventRuleRequest {
            rule_id: rule_id(&noop_rule),
        })
        .await
        .unwrap();
    let tray_2 = s.rack(fixture_id(2), true).await.components.remove(0);
    let reply = s
        .extensions()
        .report_leak(pb::ReportLeakRequest {
            component_id: tray_2.info.unwrap().id,
            source: "cdu-2".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.rule_id, noop_rule.id);
    assert!(reply.submitted_task_ids.is_empty() && reply.cancelled_task_ids.is_empty());
    s.stop().await;
}

/// The acceptance path: a leak injected on one compute tray of the
/// simulated fleet is read by the detection loop (every 200 ms here), the
/// running firmware task is cancelled naming the leak, a force power-off
/// with the built-in rule powers the tray off, the tray reads DETECTED; a
/// dry detector then reads NOT_DETECTED and closes the event.
async fn a_leak_injected_in_the_sim_is_detected_and_answered(backend: Backend) {
    let Some(mut s) = slow_flashing_with(backend, |config| config.leaks.interval_ms = 200).await
    else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    let deadline = std::time::Duration::from_secs(60);
    let upgrade = flashing(&mut s, deadline).await;
    let tray = s
        .rack(fixture_id(1), true)
        .await
        .components
        .into_iter()
        .find(|c| c.r#type == pb::ComponentType::Compute as i32)
        .unwrap();
    let mut sim = sim_admin(&s).await;
    sim.set_leak(rackflow_api::sim::v1::SetLeakRequest {
        component: tray.component_id.clone(),
        leaking: true,
    })
    .await
    .unwrap();

    // The detector reads it, the rollout's task is cancelled naming it.
    let cancelled = s
        .wait_task(upgrade, "cancelled by the leak response", deadline, |t| {
            t.finished_at.is_some()
        })
        .await;
    assert_eq!(cancelled.status, pb::TaskStatus::Terminated as i32);
    assert!(
        cancelled.message.contains("coolant leak"),
        "{}",
        cancelled.message
    );
    let events = s
        .extensions()
        .list_leak_events(pb::ListLeakEventsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .events;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0].source, "sim");
    // The response: a force power-off from the built-in rule (submitted
    // right after the rollout's task was stopped).
    let response = response_task(&s, deadline).await;
    let done = s
        .wait_task(response, "finished", deadline, |t| t.finished_at.is_some())
        .await;
    assert_eq!(done.status, pb::TaskStatus::Completed as i32, "{done:#?}");
    let tray_now = s
        .rack(fixture_id(1), true)
        .await
        .components
        .into_iter()
        .find(|c| c.component_id == tray.component_id)
        .unwrap();
    assert_eq!(tray_now.leak_status, pb::LeakStatus::Detected as i32);
    let state = sim
        .get_component_states(rackflow_api::sim::v1::GetComponentStatesRequest {
            components: vec![tray.component_id.clone()],
        })
        .await
        .unwrap()
        .into_inner()
        .states
        .remove(0);
    assert_eq!(state.power_state, "Off");
    assert!(state.leaking);

    // Dry again: the next pass clears it.
    sim.set_leak(rackflow_api::sim::v1::SetLeakRequest {
        component: tray.component_id.clone(),
        leaking: false,
    })
    .await
    .unwrap();
    let mut changes = s.waiter("the leak to clear", deadline);
    loop {
        let open = s
            .extensions()
            .list_leak_events(pb::ListLeakEventsRequest {
                open_only: true,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        if open.total == 0 {
            break;
        }
        changes.next(&open.total).await;
    }
    let tray_now = s
        .rack(fixture_id(1), true)
        .await
        .components
        .into_iter()
        .find(|c| c.component_id == tray.component_id)
        .unwrap();
    assert_eq!(tray_now.leak_status, pb::LeakStatus::NotDetected as i32);
    // Still one response task: repeats never started another.
    let tasks = rack_tasks(&s.client, 1).await;
    assert_eq!(
        tasks
            .iter()
            .filter(|t| t.operation == "power_control/force_power_off")
            .count(),
        1
    );
    s.stop().await;
}

/// A leak event stored without its response (the process died right after
/// storing it) is answered by the detection loop, once.
async fn a_response_a_crash_left_undone_is_run_by_the_loop(backend: Backend) {
    let Some(mut s) = slow_flashing_with(backend, |config| {
        config.leaks.interval_ms = 200;
        config.leaks.redrive_after_ms = 0;
    })
    .await
    else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    let tray = s.rack(fixture_id(1), true).await.components.remove(0);
    let tray_id: uuid::Uuid = tray.info.unwrap().id.unwrap().id.parse().unwrap();
    // Stored as a report would store it, no response run.
    let stored = s
        .store()
        .leak_report(&rackflow_domain::leak::LeakReport {
            component_id: tray_id,
            source: "cdu-9".into(),
            severity: rackflow_domain::event_rule::Severity::Critical,
            detected: true,
            observed_at: chrono::Utc::now(),
            message: String::new(),
        })
        .await
        .unwrap();
    assert!(matches!(
        stored,
        rackflow_domain::leak::LeakReported::New(_)
    ));
    let deadline = std::time::Duration::from_secs(60);
    let response = response_task(&s, deadline).await;
    let done = s
        .wait_task(response, "finished", deadline, |t| t.finished_at.is_some())
        .await;
    assert_eq!(done.status, pb::TaskStatus::Completed as i32, "{done:#?}");
    // Handled: later passes run nothing more.
    assert!(
        s.store()
            .leak_events_unhandled(chrono::Utc::now())
            .await
            .unwrap()
            .is_empty()
    );
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let tasks = rack_tasks(&s.client, 1).await;
    assert_eq!(tasks.len(), 1, "{tasks:#?}");
    s.stop().await;
}

/// Replicas share a PostgreSQL database (SQLite admits one process).
mod postgres_replicas {
    #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_replicas_answer_one_leak_with_one_shutdown() {
        super::two_replicas_answer_one_leak_with_one_shutdown(super::common::Backend::Postgres)
            .await;
    }
}

/// Two replicas on one database, each reading its own copy of the leak
/// (each runs its simulated fleet with the tray leaking) and each also told
/// through the API: one leak event, one shutdown task.
async fn two_replicas_answer_one_leak_with_one_shutdown(backend: Backend) {
    use rackflow_testkit::changes::Changes;
    use rackflow_testkit::db::TestDatabase;
    use rackflow_testkit::flow::Replica;
    let Some(db) = TestDatabase::create(backend).await else {
        return;
    };
    drop(
        rackflow_store::open_store(db.target())
            .await
            .expect("migrate"),
    );
    let changes = Changes::new();
    let mut config = rackflow_server::Config::default();
    config.dispatcher.enabled = false;
    config.sim.power_ms = 20;
    config.sim.jitter = 0.0;
    config.leaks.interval_ms = 100;
    let mut a = Replica::start(&db, &changes, config.clone()).await;
    fixture_fleet(&mut a.client, 1).await;
    let tray = a
        .client
        .get_rack_info_by_id(pb::GetRackInfoByIdRequest {
            id: Some(uuid(fixture_id(1))),
            with_components: true,
        })
        .await
        .unwrap()
        .into_inner()
        .rack
        .unwrap()
        .components
        .into_iter()
        .find(|c| c.r#type == pb::ComponentType::Compute as i32)
        .unwrap();
    config.sim.leaks = vec![tray.component_id.clone()];
    let b = Replica::start(&db, &changes, config.clone()).await;
    let c = Replica::start(&db, &changes, config).await;
    // And through the API, on both at once.
    let report = pb::ReportLeakRequest {
        component_id: tray.info.clone().unwrap().id,
        source: "bms".into(),
        ..Default::default()
    };
    let ext = |r: &Replica| {
        rackflow_api::v1::flow_extensions_client::FlowExtensionsClient::new(
            tonic::transport::Channel::from_shared(format!("http://{}", r.addr))
                .unwrap()
                .connect_lazy(),
        )
    };
    let (mut eb, mut ec) = (ext(&b), ext(&c));
    let (rb, rc) = tokio::join!(
        eb.report_leak(report.clone()),
        ec.report_leak(report.clone())
    );
    rb.unwrap();
    rc.unwrap();
    // Several passes of both detection loops.
    let deadline = std::time::Duration::from_secs(30);
    let mut waiter = changes.waiter("the leak response", deadline);
    loop {
        let tasks = rack_tasks(&a.client, 1).await;
        let done = tasks
            .iter()
            .any(|t| t.operation == "power_control/force_power_off" && t.finished_at.is_some());
        if done {
            break;
        }
        waiter.next(&tasks.len()).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    b.stop().await;
    c.stop().await;
    let tasks = rack_tasks(&a.client, 1).await;
    let shutdowns = tasks
        .iter()
        .filter(|t| t.operation == "power_control/force_power_off")
        .count();
    assert_eq!(shutdowns, 1, "{tasks:#?}");
    let events = rackflow_api::v1::flow_extensions_client::FlowExtensionsClient::new(
        tonic::transport::Channel::from_shared(format!("http://{}", a.addr))
            .unwrap()
            .connect_lazy(),
    )
    .list_leak_events(pb::ListLeakEventsRequest::default())
    .await
    .unwrap()
    .into_inner();
    assert_eq!(events.total, 1, "{events:#?}");
    assert!(events.events[0].observations >= 3, "{events:#?}");
    a.stop().await;
}

/// A rollout over two racks with a 50% failure-rate gate: the leak on rack
/// 1 stops its target's child task, the target fails with the leak's
/// message, and the gate trips (1 of 2 failed) — the run pauses instead of
/// going on.
async fn a_rollout_counts_a_target_the_leak_stopped_as_failed(backend: Backend) {
    let Some(mut s) = slow_flashing_with(backend, |config| {
        config.dispatcher.enabled = true;
        config.dispatcher.poll_interval_ms = 50;
    })
    .await
    else {
        return;
    };
    fixture_fleet(&mut s.client, 2).await;
    let deadline = std::time::Duration::from_secs(60);
    let run = s
        .client
        .create_operation_run(common::run_request("leak-run", 100, "s", "o", 1))
        .await
        .unwrap()
        .into_inner()
        .id
        .unwrap();
    let targets = |s: &TestServer| {
        let mut client = s.client.clone();
        let run = run.clone();
        async move {
            client
                .list_operation_run_targets(pb::ListOperationRunTargetsRequest {
                    operation_run_id: Some(run),
                    status: 0,
                    pagination: None,
                    phase_scope: pb::OperationRunTargetPhaseScope::CurrentAndCompletedPhases as i32,
                })
                .await
                .unwrap()
                .into_inner()
                .targets
        }
    };
    // Both racks flashing.
    let mut changes = s.waiter("both targets submitted", deadline);
    loop {
        let ts = targets(&s).await;
        let running = ts.iter().filter(|t| t.task_id.is_some()).count();
        if ts.len() == 2 && running == 2 {
            break;
        }
        changes.next(&running).await;
    }
    let on_rack_1 = targets(&s)
        .await
        .into_iter()
        .find(|t| t.rack_id == Some(uuid(fixture_id(1))))
        .unwrap();
    let child: uuid::Uuid = on_rack_1.task_id.unwrap().id.parse().unwrap();
    s.wait_task(child, "running", deadline, |t| {
        t.status == pb::TaskStatus::Running as i32
    })
    .await;
    let tray = s
        .rack(fixture_id(1), true)
        .await
        .components
        .into_iter()
        .find(|c| c.r#type == pb::ComponentType::Compute as i32)
        .unwrap();
    s.extensions()
        .report_leak(pb::ReportLeakRequest {
            component_id: tray.info.unwrap().id,
            source: "cdu-1".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    // The target fails with the leak's message; the gate pauses the run.
    let mut changes = s.waiter("the target to fail and the run to pause", deadline);
    loop {
        let ts = targets(&s).await;
        let failed = ts.iter().find(|t| {
            t.rack_id == Some(uuid(fixture_id(1)))
                && t.status == pb::OperationRunTargetStatus::Failed as i32
        });
        let run_now = s
            .client
            .get_operation_run(pb::GetOperationRunRequest {
                id: Some(run.clone()),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .operation_run
            .unwrap()
            .summary
            .unwrap();
        let state = run_now.state.unwrap_or_default();
        if let Some(failed) = failed
            && state.status == pb::OperationRunStatus::Paused as i32
            && state.reason == pb::OperationRunStatusReason::SafetyGate as i32
        {
            assert!(failed.message.contains("coolant leak"), "{failed:?}");
            break;
        }
        changes
            .next(&(ts.iter().map(|t| t.status).collect::<Vec<_>>(), state))
            .await;
    }
    s.stop().await;
}

/// A site rule that alerts: the alert is in the metrics with its rule and
/// severity, beside the leak reports by outcome and the response's tasks.
async fn alerts_and_leak_reports_are_counted_in_the_metrics(backend: Backend) {
    let mut config = rackflow_server::Config::default();
    let metrics_addr = rackflow_testkit::metrics::enable(&mut config);
    let Some(mut s) = TestServer::start_with(backend, config).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    let before = rackflow_testkit::metrics::scrape(metrics_addr).await;
    // Nothing counted yet: the closed label sets at 0, no alert series.
    assert!(!before.has("rackflow_event_rule_alerts"), "{before:?}");
    assert_eq!(
        before.value("rackflow_leak_reports", &[("outcome", "new")]),
        0.0
    );
    let alert = pb::EventRuleAction {
        name: "page_the_noc".into(),
        condition: Some(pb::EventRuleActionCondition::default()),
        spec: Some(pb::event_rule_action::Spec::SendAlert(
            pb::EventRuleSendAlertAction {
                severity: pb::EventRuleSeverity::Critical as i32,
                message: "coolant leak: page the NOC".into(),
            },
        )),
    };
    let rule = s
        .client
        .create_event_rule(create(
            "alert_and_power_off",
            vec![
                alert,
                power_off("off", pb::EventRuleTargetStrategy::Component),
            ],
        ))
        .await
        .unwrap()
        .into_inner();
    s.client
        .create_event_rule_binding(pb::CreateEventRuleBindingRequest {
            rule_id: rule_id(&rule),
            scope: Some(site_scope()),
        })
        .await
        .unwrap();
    s.client
        .enable_event_rule(pb::EnableEventRuleRequest {
            rule_id: rule_id(&rule),
        })
        .await
        .unwrap();
    let tray = s.rack(fixture_id(1), true).await.components.remove(0);
    let report = pb::ReportLeakRequest {
        component_id: tray.info.unwrap().id,
        source: "cdu-9".into(),
        ..Default::default()
    };
    let mut ext = s.extensions();
    let reply = ext.report_leak(report.clone()).await.unwrap().into_inner();
    assert_eq!(reply.rule_id, rule.id);
    ext.report_leak(report).await.unwrap();

    let after = rackflow_testkit::metrics::scrape(metrics_addr).await;
    let rule_label = rule.id.unwrap().id;
    assert_eq!(
        after.value(
            "rackflow_event_rule_alerts",
            &[("rule", rule_label.as_str()), ("severity", "critical")]
        ),
        1.0
    );
    assert_eq!(
        after.value("rackflow_leak_reports", &[("outcome", "new")]),
        1.0
    );
    assert_eq!(
        after.value("rackflow_leak_reports", &[("outcome", "repeat")]),
        1.0
    );
    assert_eq!(
        after.value("rackflow_leak_response_tasks", &[("effect", "submitted")]),
        1.0
    );
    s.stop().await;
}

/// The open leak event of `component`, if any.
async fn open_event(s: &TestServer, component: &Option<pb::Uuid>) -> Option<pb::LeakEvent> {
    s.extensions()
        .list_leak_events(pb::ListLeakEventsRequest {
            component_id: component.clone(),
            open_only: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .events
        .pop()
}

/// A facility monitor's leak stays open while the tray's own (simulated)
/// detector reads dry: the detection loop closes only the leaks its source
/// opened; the monitor's all-clear closes it.
async fn a_dry_detector_does_not_close_a_monitors_leak(backend: Backend) {
    let mut config = rackflow_server::Config::default();
    config.leaks.interval_ms = 100;
    let Some(mut s) = TestServer::start_with(backend, config).await else {
        return;
    };
    fixture_fleet(&mut s.client, 1).await;
    let trays: Vec<pb::Component> = s
        .rack(fixture_id(1), true)
        .await
        .components
        .into_iter()
        .filter(|c| c.r#type == pb::ComponentType::Compute as i32)
        .collect();
    let (monitored, detected) = (&trays[0], &trays[1]);
    let monitored_id = monitored.info.as_ref().unwrap().id.clone();
    let detected_id = detected.info.as_ref().unwrap().id.clone();
    let deadline = std::time::Duration::from_secs(30);
    let mut sim = sim_admin(&s).await;
    // The tray's detector leaks and dries (its leak opens and closes): it
    // is read, dry, from now on.
    for leaking in [true, false] {
        sim.set_leak(rackflow_api::sim::v1::SetLeakRequest {
            component: monitored.component_id.clone(),
            leaking,
        })
        .await
        .unwrap();
        let mut changes = s.waiter("the tray's leak to follow its detector", deadline);
        while open_event(&s, &monitored_id).await.is_some() != leaking {
            changes.next(&()).await;
        }
    }
    // A monitor reports a leak on it.
    s.extensions()
        .report_leak(pb::ReportLeakRequest {
            component_id: monitored_id.clone(),
            source: "cdu-4".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    // Two later passes (one opens a leak on another tray, a later one
    // closes it) read the monitored tray's detector dry meanwhile.
    for leaking in [true, false] {
        sim.set_leak(rackflow_api::sim::v1::SetLeakRequest {
            component: detected.component_id.clone(),
            leaking,
        })
        .await
        .unwrap();
        let mut changes = s.waiter("the other tray's leak to follow its detector", deadline);
        while open_event(&s, &detected_id).await.is_some() != leaking {
            changes.next(&()).await;
        }
    }
    let still = open_event(&s, &monitored_id)
        .await
        .expect("the monitor's leak stays open");
    assert_eq!(still.source, "cdu-4");
    let tray = s
        .rack(fixture_id(1), true)
        .await
        .components
        .into_iter()
        .find(|c| c.component_id == monitored.component_id)
        .unwrap();
    assert_eq!(tray.leak_status, pb::LeakStatus::Detected as i32);
    // The monitor's all-clear closes it.
    s.extensions()
        .report_leak(pb::ReportLeakRequest {
            component_id: monitored_id.clone(),
            source: "cdu-4".into(),
            cleared: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(open_event(&s, &monitored_id).await.is_none());
    s.stop().await;
}
