//! The audit trail through the API (issue 14), on both stores: over mTLS,
//! every control of a run — an operator's pause, resume and advance, an
//! admin's cancel, and the service's own phase gate — is recorded with its
//! identity, in order; creation and refused calls are recorded too.

use std::time::Duration;

use rackflow_api::v1 as pb;
use rackflow_security::Role;
use rackflow_server::Config;
use rackflow_testkit::both_stores;
use rackflow_testkit::pki::{TestPki, tls_channel};
use rackflow_testkit::wait::wait_run;
use rackflow_testkit::{
    Backend, FlowClient, TestServer, create_fast_firmware_rule, fixture_fleet, flow_extensions,
    run_request,
};

both_stores!(the_trail_of_a_run_shows_every_control_with_its_identity_in_order);

const VIEWER: &str = "spiffe://rackflow.test/sre/viewer";
const OPERATOR: &str = "spiffe://rackflow.test/sre/operator";
const ADMIN: &str = "spiffe://rackflow.test/sre/admin";
const DEADLINE: Duration = Duration::from_secs(60);

fn uuid_of(id: &pb::Uuid) -> pb::Uuid {
    id.clone()
}

async fn the_trail_of_a_run_shows_every_control_with_its_identity_in_order(backend: Backend) {
    let pki = TestPki::new("audit");
    let mut config = Config::default();
    config.dispatcher.poll_interval_ms = 100;
    config.sim.firmware_update_ms = 40;
    config.sim.power_ms = 10;
    config.sim.jitter = 0.0;
    config.tls = pki.server_tls(true);
    config.authorization.identities = [
        (VIEWER.to_string(), Role::Viewer),
        (OPERATOR.to_string(), Role::Operator),
        (ADMIN.to_string(), Role::Admin),
    ]
    .into();
    let Some(server) = TestServer::start_with(backend, config).await else {
        return;
    };
    let connect = |identity: &'static str| {
        let files = pki.client(identity);
        let addr = server.addr;
        async move { tls_channel(addr, &files).await.expect("mTLS connect") }
    };
    let (viewer, operator, admin) = (
        connect(VIEWER).await,
        connect(OPERATOR).await,
        connect(ADMIN).await,
    );
    let mut as_admin = FlowClient::new(admin.clone());
    fixture_fleet(&mut as_admin, 4).await;
    create_fast_firmware_rule(&mut as_admin, &["Compute"], "20ms").await;

    let mut as_operator = FlowClient::new(operator.clone());
    let id = as_operator
        .create_operation_run(run_request("audited", 100, "s", "o", 2))
        .await
        .expect("create")
        .into_inner()
        .id
        .expect("id");
    as_operator
        .pause_operation_run(pb::PauseOperationRunRequest {
            id: Some(uuid_of(&id)),
        })
        .await
        .expect("pause");
    // A viewer may not resume: refused and recorded.
    let refused = FlowClient::new(viewer.clone())
        .resume_operation_run(pb::ResumeOperationRunRequest {
            id: Some(uuid_of(&id)),
        })
        .await
        .expect_err("a viewer may not resume");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    as_operator
        .resume_operation_run(pb::ResumeOperationRunRequest {
            id: Some(uuid_of(&id)),
        })
        .await
        .expect("resume");
    // Phase 0 ends at the phase gate: the service pauses the run itself.
    let mut watch = flow_extensions(viewer.clone());
    wait_run(&mut watch, &id, "the phase gate", DEADLINE, |run| {
        run.summary
            .as_ref()
            .and_then(|s| s.state)
            .is_some_and(|s| s.reason() == pb::OperationRunStatusReason::PhaseGate)
    })
    .await;
    as_operator
        .advance_operation_run_phase(pb::AdvanceOperationRunPhaseRequest {
            id: Some(uuid_of(&id)),
            expected_phase_index: Some(1),
        })
        .await
        .expect("advance");
    FlowClient::new(admin.clone())
        .cancel_operation_run(pb::CancelOperationRunRequest {
            id: Some(uuid_of(&id)),
            reason: "enough".into(),
        })
        .await
        .expect("cancel");

    // The run's trail, oldest first: its creation, then every control with
    // who did it.
    let mut ext = flow_extensions(viewer.clone());
    let trail = ext
        .list_audit_events(pb::ListAuditEventsRequest {
            run_id: Some(uuid_of(&id)),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .events;
    let seen: Vec<(&str, &str, &str)> = trail
        .iter()
        .map(|e| (e.action.as_str(), e.actor.as_str(), e.code.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("v1.Flow/CreateOperationRun", OPERATOR, "OK"),
            ("v1.Flow/PauseOperationRun", OPERATOR, "OK"),
            ("v1.Flow/ResumeOperationRun", OPERATOR, "OK"),
            ("run/phase_gate", "rackflow", "OK"),
            ("v1.Flow/AdvanceOperationRunPhase", OPERATOR, "OK"),
            ("v1.Flow/CancelOperationRun", ADMIN, "OK"),
        ],
        "{trail:#?}"
    );
    let at = |e: &pb::AuditEvent| e.at.map(|t| (t.seconds, t.nanos));
    assert!(
        trail
            .windows(2)
            .all(|w| w[0].seq < w[1].seq && at(&w[0]) <= at(&w[1]))
    );
    assert!(trail[4].message.contains("phase 0 → 1"), "{:?}", trail[4]);
    // The last control, as `run get` asks for it.
    let last = ext
        .list_audit_events(pb::ListAuditEventsRequest {
            run_id: Some(uuid_of(&id)),
            controls_only: true,
            newest_first: true,
            limit: 1,
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .events;
    assert_eq!(last[0].action, "v1.Flow/CancelOperationRun");
    assert_eq!(last[0].actor, ADMIN);
    // The refused resume is in the trail under the viewer's name.
    let viewer_events = ext
        .list_audit_events(pb::ListAuditEventsRequest {
            actor: VIEWER.into(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .events;
    assert_eq!(viewer_events.len(), 1, "{viewer_events:#?}");
    assert_eq!(viewer_events[0].action, "v1.Flow/ResumeOperationRun");
    assert_eq!(viewer_events[0].code, "PermissionDenied");
    // Inventory and rule writes are recorded as the admin's.
    let admin_actions: Vec<String> = ext
        .list_audit_events(pb::ListAuditEventsRequest {
            actor: ADMIN.into(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .events
        .into_iter()
        .map(|e| e.action)
        .collect();
    assert_eq!(
        admin_actions
            .iter()
            .filter(|a| *a == "v1.Flow/CreateExpectedRack")
            .count(),
        4
    );
    assert!(admin_actions.contains(&"v1.Flow/CreateOperationRule".to_string()));
    // Bad filters are the caller's error.
    let bad = ext
        .list_audit_events(pb::ListAuditEventsRequest {
            run_id: Some(pb::Uuid { id: "nope".into() }),
            ..Default::default()
        })
        .await
        .expect_err("bad run id");
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    server.stop().await;
}
