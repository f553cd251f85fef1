//! NVLink-domain targets (issue 32 item 3) through the real gRPC API, on
//! SQLite and PostgreSQL: a task, a component listing and an operation run
//! aimed at a domain touch exactly its member racks at that moment; an
//! unknown domain is NotFound naming it; an empty one is refused as an
//! empty rack list is.

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

use rackflow_testkit as common;
use rackflow_testkit::both_stores;

use common::{Backend, TestServer, fixture_fleet, fixture_id, uuid};
use rackflow_api::v1 as pb;
use tonic::Code;

both_stores!(tasks_listings_and_runs_aimed_at_a_domain_touch_its_member_racks);

fn domain_target(name: &str, types: &[pb::ComponentType]) -> pb::OperationTargetSpec {
    pb::OperationTargetSpec {
        targets: Some(pb::operation_target_spec::Targets::NvlDomains(
            pb::NvlDomainTargets {
                targets: vec![pb::NvlDomainTarget {
                    identifier: Some(pb::nvl_domain_target::Identifier::Name(name.into())),
                    component_types: types.iter().map(|t| *t as i32).collect(),
                }],
            },
        )),
    }
}

fn identifier(id: uuid::Uuid) -> pb::Identifier {
    pb::Identifier {
        id: Some(uuid(id)),
        name: String::new(),
    }
}

async fn tasks_listings_and_runs_aimed_at_a_domain_touch_its_member_racks(backend: Backend) {
    let mut config = rackflow_server::Config::default();
    config.dispatcher.enabled = false;
    let Some(mut s) = TestServer::start_with(backend, config).await else {
        return;
    };
    fixture_fleet(&mut s.client, 3).await;
    for name in ["nvl-1", "nvl-empty"] {
        s.client
            .create_nvl_domain(pb::CreateNvlDomainRequest {
                nvl_domain: Some(pb::NvlDomain {
                    identifier: Some(pb::Identifier {
                        id: None,
                        name: name.into(),
                    }),
                    ..Default::default()
                }),
            })
            .await
            .expect("create domain");
    }
    s.client
        .attach_racks_to_nvl_domain(pb::AttachRacksToNvlDomainRequest {
            nvl_domain_identifier: Some(pb::Identifier {
                id: None,
                name: "nvl-1".into(),
            }),
            rack_identifiers: vec![identifier(fixture_id(1)), identifier(fixture_id(2))],
        })
        .await
        .expect("attach");

    // GetComponents: the members' components of the asked types.
    let listed = s
        .client
        .get_components(pb::GetComponentsRequest {
            target_spec: Some(domain_target("nvl-1", &[pb::ComponentType::Compute])),
            ..Default::default()
        })
        .await
        .expect("components of the domain")
        .into_inner();
    assert_eq!(
        listed.total, 4,
        "2 compute trays on each of 2 racks: {listed:#?}"
    );
    for c in &listed.components {
        assert_eq!(c.r#type, pb::ComponentType::Compute as i32);
        assert!(
            [uuid(fixture_id(1)), uuid(fixture_id(2))].contains(c.rack_id.as_ref().unwrap()),
            "{c:#?}"
        );
    }

    // A power task: one per member rack, none for rack 3.
    let reply = s
        .client
        .power_on_rack(pb::PowerOnRackRequest {
            target_spec: Some(domain_target("nvl-1", &[])),
            ..Default::default()
        })
        .await
        .expect("power on the domain")
        .into_inner();
    assert_eq!(reply.task_ids.len(), 2, "{reply:?}");
    let tasks = s
        .client
        .get_tasks_by_i_ds(pb::GetTasksByIDsRequest {
            task_ids: reply.task_ids.clone(),
        })
        .await
        .expect("tasks")
        .into_inner()
        .tasks;
    let mut racks: Vec<String> = tasks
        .iter()
        .map(|t| t.rack_id.as_ref().unwrap().id.clone())
        .collect();
    racks.sort();
    assert_eq!(
        racks,
        [fixture_id(1).to_string(), fixture_id(2).to_string()]
    );

    // Unknown and empty domains.
    let err = s
        .client
        .power_on_rack(pb::PowerOnRackRequest {
            target_spec: Some(domain_target("nvl-nope", &[])),
            ..Default::default()
        })
        .await
        .expect_err("unknown domain");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    assert!(err.message().contains("nvl-nope"), "{err:?}");
    let empty_racks = s
        .client
        .power_on_rack(pb::PowerOnRackRequest {
            target_spec: Some(pb::OperationTargetSpec {
                targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
                    targets: Vec::new(),
                })),
            }),
            ..Default::default()
        })
        .await
        .expect_err("empty rack list");
    let empty_domain = s
        .client
        .power_on_rack(pb::PowerOnRackRequest {
            target_spec: Some(domain_target("nvl-empty", &[])),
            ..Default::default()
        })
        .await
        .expect_err("empty domain");
    assert_eq!(empty_domain.code(), empty_racks.code(), "{empty_domain:?}");
    assert!(
        empty_domain.message().contains("nvl-empty has no racks"),
        "{empty_domain:?}"
    );

    // A run planned after rack 2 left the domain covers rack 1 only.
    s.client
        .detach_racks_from_nvl_domain(pb::DetachRacksFromNvlDomainRequest {
            rack_identifiers: vec![identifier(fixture_id(2))],
        })
        .await
        .expect("detach");
    let mut request = common::run_request("domain-run", 100, "s", "o", 1);
    common::upgrade(&mut request).target_spec = Some(domain_target("nvl-1", &[]));
    let preview = s
        .extensions()
        .preview_operation_run(request.clone())
        .await
        .expect("preview")
        .into_inner();
    let planned: Vec<_> = preview.targets.iter().map(|t| t.rack_id.clone()).collect();
    assert_eq!(planned, [Some(uuid(fixture_id(1)))], "{preview:#?}");
    let run = s
        .client
        .create_operation_run(request)
        .await
        .expect("create run")
        .into_inner()
        .id
        .expect("run id");
    let targets = s
        .client
        .list_operation_run_targets(pb::ListOperationRunTargetsRequest {
            operation_run_id: Some(run),
            ..Default::default()
        })
        .await
        .expect("targets")
        .into_inner()
        .targets;
    let racks: Vec<_> = targets.iter().map(|t| t.rack_id.clone()).collect();
    assert_eq!(racks, [Some(uuid(fixture_id(1)))]);
}
