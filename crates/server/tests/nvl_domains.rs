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

use common::{
    Backend, TestServer, attach_fixture_racks, create_nvl_domain, fixture_fleet, fixture_id,
    fixture_rack_identifier, nvl_domain_target, uuid,
};
use rackflow_api::v1 as pb;
use tonic::Code;

both_stores!(
    tasks_listings_and_runs_aimed_at_a_domain_touch_its_member_racks,
    nvlink_domain_views_show_members_phase_and_labels
);

/// `GetNVLinkDomain` / `GetListOfNVLinkDomains`: the reference's view (id
/// and rack group id = the external id, the members' shared model as
/// topology, the phase aggregated over the members' components, the
/// components when asked); racks and components name their domain.
async fn nvlink_domain_views_show_members_phase_and_labels(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 3).await;
    let a = create_nvl_domain(&mut s.client, "nvl-a", Some("group-a"), Some("cluster-1")).await;
    create_nvl_domain(&mut s.client, "nvl-b", Some("group-b"), None).await;
    let unlabelled = create_nvl_domain(&mut s.client, "nvl-c", None, None).await;
    attach_fixture_racks(&mut s.client, "nvl-a", &[1, 2]).await;
    attach_fixture_racks(&mut s.client, "nvl-b", &[3]).await;

    let reader = s.client.clone();
    let get = |id: &str, with_components: bool| {
        let mut client = reader.clone();
        let request = pb::GetNvLinkDomainRequest {
            id: id.into(),
            with_components,
        };
        async move { client.get_nv_link_domain(request).await }
    };
    let view = get("group-a", false)
        .await
        .expect("by external id")
        .into_inner();
    let domain = view.domain.expect("domain");
    assert_eq!(domain.id, "group-a");
    assert_eq!(domain.rack_group_id, "group-a");
    assert_eq!(domain.name, "nvl-a");
    assert_eq!(domain.nmxc_cluster_id.as_deref(), Some("cluster-1"));
    assert_eq!(domain.topology.as_deref(), Some("GB200 NVL72"));
    assert_eq!(
        domain.operation_status,
        pb::Phase::Unknown as i32,
        "no states set"
    );
    assert!(domain.components.is_empty(), "not asked for");

    let domain = get("group-a", true)
        .await
        .expect("with components")
        .into_inner()
        .domain
        .unwrap();
    assert_eq!(
        domain.components.len(),
        8,
        "4 components on each of 2 racks"
    );
    for c in &domain.components {
        assert_eq!(c.nvl_domain_id, Some(uuid(a)), "{c:#?}");
        assert_eq!(c.nvl_domain_external_id.as_deref(), Some("group-a"));
        assert!(
            ["r-0001", "r-0002"].contains(&c.rack_external_id.as_str()),
            "{c:#?}"
        );
        assert!(!c.bmcs.is_empty(), "shown whole: {c:#?}");
    }
    // The same domain by UUID and by name; a domain without an external id
    // is named by its UUID.
    for other in [a.to_string(), "nvl-a".to_string()] {
        let d = get(&other, false)
            .await
            .expect("other names")
            .into_inner()
            .domain
            .unwrap();
        assert_eq!(d.id, "group-a", "{other}");
    }
    let c = get("nvl-c", false)
        .await
        .unwrap()
        .into_inner()
        .domain
        .unwrap();
    assert_eq!(
        (c.id.clone(), c.rack_group_id.clone()),
        (unlabelled.to_string(), unlabelled.to_string())
    );
    assert_eq!(c.topology, None, "no racks, no topology");
    assert_eq!(c.operation_status, pb::Phase::Unknown as i32);

    let missing = get("group-zz", false).await.expect_err("unknown");
    assert_eq!(missing.code(), Code::NotFound, "{missing:?}");
    assert!(missing.message().contains("group-zz"), "{missing:?}");
    let blank = get("  ", false).await.expect_err("blank");
    assert_eq!(blank.code(), Code::InvalidArgument, "{blank:?}");
    assert!(blank.message().contains("must not be blank"), "{blank:?}");

    // Phase: every member component drained → ready; one in service → in use.
    for c in &domain.components {
        s.client
            .patch_component(pb::PatchComponentRequest {
                id: c.info.as_ref().unwrap().id.clone(),
                operational_state: Some(pb::OperationalState::Drained as i32),
                ..Default::default()
            })
            .await
            .expect("drain");
    }
    let phase = |d: pb::GetNvLinkDomainResponse| d.domain.unwrap().operation_status;
    assert_eq!(
        phase(get("group-a", false).await.unwrap().into_inner()),
        pb::Phase::Ready as i32
    );
    let first = domain.components[0].info.as_ref().unwrap().id.clone();
    let patched = s
        .client
        .patch_component(pb::PatchComponentRequest {
            id: first,
            operational_state: Some(pb::OperationalState::InService as i32),
            ..Default::default()
        })
        .await
        .expect("in service")
        .into_inner()
        .component
        .unwrap();
    assert_eq!(
        patched.nvl_domain_external_id.as_deref(),
        Some("group-a"),
        "patch answers labelled"
    );
    assert_eq!(
        phase(get("group-a", false).await.unwrap().into_inner()),
        pb::Phase::InUse as i32
    );

    // The listing: domains with an external id, by name, both directions,
    // patterns on the name or the external id, pagination with the total.
    let list = |order_by: &str, patterns: &[&str], pagination: Option<pb::Pagination>| {
        let mut client = reader.clone();
        let request = pb::GetListOfNvLinkDomainsRequest {
            info: (!patterns.is_empty()).then(|| pb::StringQueryInfo {
                patterns: patterns.iter().map(|p| p.to_string()).collect(),
                is_wildcard: true,
                use_or: true,
            }),
            with_components: false,
            pagination,
            order_by: order_by.into(),
        };
        async move { client.get_list_of_nv_link_domains(request).await }
    };
    let ids = |r: pb::GetListOfNvLinkDomainsResponse| {
        (
            r.domains.iter().map(|d| d.id.clone()).collect::<Vec<_>>(),
            r.total,
        )
    };
    assert_eq!(
        ids(list("", &[], None).await.unwrap().into_inner()),
        (vec!["group-a".into(), "group-b".into()], 2)
    );
    assert_eq!(
        ids(list("NAME_DESC", &[], None).await.unwrap().into_inner()),
        (vec!["group-b".into(), "group-a".into()], 2)
    );
    assert_eq!(
        ids(list("NAME_ASC", &["nvl-b"], None)
            .await
            .unwrap()
            .into_inner()),
        (vec!["group-b".into()], 1)
    );
    assert_eq!(
        ids(list("", &["group-a"], None).await.unwrap().into_inner()),
        (vec!["group-a".into()], 1)
    );
    let paged = list(
        "",
        &[],
        Some(pb::Pagination {
            offset: 1,
            limit: 1,
        }),
    )
    .await
    .unwrap()
    .into_inner();
    assert_eq!(ids(paged), (vec!["group-b".into()], 2));
    let listed = list("", &["nvl-b"], None).await.unwrap().into_inner();
    assert_eq!(listed.domains[0].topology.as_deref(), Some("GB200 NVL72"));
    let bad = list("OTHER_ASC", &[], None).await.expect_err("bad order");
    assert_eq!(bad.code(), Code::InvalidArgument, "{bad:?}");
    assert!(bad.message().contains("NAME_ASC or NAME_DESC"), "{bad:?}");

    // Racks and components name their domain.
    let rack = s.rack(fixture_id(3), true).await;
    assert_eq!(rack.nvl_domain_external_ids, ["group-b"]);
    for c in &rack.components {
        assert_eq!(
            c.nvl_domain_external_id.as_deref(),
            Some("group-b"),
            "{c:#?}"
        );
        assert_eq!(c.rack_external_id, "r-0003");
    }
    let listed = s
        .client
        .get_components(pb::GetComponentsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.components.len(), 12);
    for c in &listed.components {
        let expected = if c.rack_external_id == "r-0003" {
            "group-b"
        } else {
            "group-a"
        };
        assert_eq!(
            c.nvl_domain_external_id.as_deref(),
            Some(expected),
            "{c:#?}"
        );
        assert!(c.nvl_domain_id.is_some());
    }
    let racks = s
        .client
        .get_list_of_racks(pb::GetListOfRacksRequest::default())
        .await
        .unwrap()
        .into_inner()
        .racks;
    let domains: Vec<_> = racks
        .iter()
        .map(|r| r.nvl_domain_external_ids.clone())
        .collect();
    // Each rack's phase: one of the first two holds the in-service tray.
    let mut phases: Vec<i32> = racks.iter().map(|r| r.operation_status).collect();
    phases[..2].sort();
    assert_eq!(
        phases,
        [
            pb::Phase::Ready as i32,
            pb::Phase::InUse as i32,
            pb::Phase::Unknown as i32
        ],
        "{racks:#?}"
    );
    // Listed with their components, the racks' phases are the same (taken
    // from the components read with them).
    let with_components = s
        .client
        .get_list_of_racks(pb::GetListOfRacksRequest {
            with_components: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .racks;
    let same: Vec<i32> = with_components.iter().map(|r| r.operation_status).collect();
    let before: Vec<i32> = racks.iter().map(|r| r.operation_status).collect();
    assert_eq!(same, before, "{with_components:#?}");
    let rack_1 = s
        .client
        .get_rack_info_by_id(pb::GetRackInfoByIdRequest {
            id: Some(uuid(fixture_id(1))),
            with_components: true,
        })
        .await
        .unwrap()
        .into_inner()
        .rack
        .unwrap();
    assert_eq!(rack_1.operation_status, before[0], "{rack_1:#?}");
    assert_eq!(
        domains,
        [
            vec!["group-a".to_string()],
            vec!["group-a".into()],
            vec!["group-b".into()]
        ]
    );
}

async fn tasks_listings_and_runs_aimed_at_a_domain_touch_its_member_racks(backend: Backend) {
    let mut config = rackflow_server::Config::default();
    config.dispatcher.enabled = false;
    let Some(mut s) = TestServer::start_with(backend, config).await else {
        return;
    };
    fixture_fleet(&mut s.client, 3).await;
    for name in ["nvl-1", "nvl-empty"] {
        create_nvl_domain(&mut s.client, name, None, None).await;
    }
    attach_fixture_racks(&mut s.client, "nvl-1", &[1, 2]).await;

    // GetComponents: the members' components of the asked types.
    let listed = s
        .client
        .get_components(pb::GetComponentsRequest {
            target_spec: Some(nvl_domain_target("nvl-1", &[pb::ComponentType::Compute])),
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
            target_spec: Some(nvl_domain_target("nvl-1", &[])),
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
            target_spec: Some(nvl_domain_target("nvl-nope", &[])),
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
            target_spec: Some(nvl_domain_target("nvl-empty", &[])),
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
            rack_identifiers: vec![fixture_rack_identifier(2)],
        })
        .await
        .expect("detach");
    let mut request = common::run_request("domain-run", 100, "s", "o", 1);
    common::upgrade(&mut request).target_spec = Some(nvl_domain_target("nvl-1", &[]));
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
