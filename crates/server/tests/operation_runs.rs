//! Operation-run RPCs through the real gRPC API, on SQLite and PostgreSQL.

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

use rackflow_testkit as common;
use rackflow_testkit::both_stores;

use common::{
    Backend, TestServer, fixture_fleet, fixture_id, options, run_request, target_scope, upgrade,
    uuid,
};
use rackflow_api::v1 as pb;
use tonic::Code;
use uuid::Uuid;

both_stores!(
    create_then_read_back_the_reference_plan,
    preview_matches_create_and_persists_nothing,
    validation_errors_have_reference_messages_and_write_nothing,
    planner_errors_map_to_reference_codes,
    candidate_limit_is_internal,
    exclusions_and_component_filter_shape_the_scope,
    list_runs_filters_order_and_paginate,
    list_targets_scopes_filters_and_enrichment,
    stats_and_not_found,
    firmware_credentials_are_refused_without_a_key,
);

async fn total_runs(s: &mut TestServer) -> i32 {
    s.client
        .list_operation_runs(pb::ListOperationRunsRequest::default())
        .await
        .expect("list runs")
        .into_inner()
        .total
}

fn rack_index(id: &Option<pb::Uuid>) -> u32 {
    let id = Uuid::parse_str(&id.as_ref().expect("rack id").id).expect("uuid");
    (1..=20)
        .find(|n| fixture_id(*n) == id)
        .expect("fixture rack")
}

async fn create_then_read_back_the_reference_plan(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 10).await;
    let req = run_request("  canary  ", 100, "selector-seed", "ordering-seed", 3);
    let id = s
        .client
        .create_operation_run(req)
        .await
        .expect("create")
        .into_inner()
        .id
        .expect("id");

    let run = s
        .client
        .get_operation_run(pb::GetOperationRunRequest {
            id: Some(id.clone()),
            include_stats: false,
        })
        .await
        .expect("get")
        .into_inner()
        .operation_run
        .expect("run");
    let summary = run.summary.expect("summary");
    assert_eq!(summary.name, "canary", "name is stored trimmed");
    assert_eq!(summary.total_phases, 3);
    assert_eq!(
        summary.state.expect("state").status,
        pb::OperationRunStatus::Pending as i32
    );
    assert_eq!(
        summary.operation_kind,
        Some(pb::OperationKind {
            r#type: pb::OperationType::FirmwareControl as i32,
            code: Some("upgrade".into())
        })
    );
    assert!(summary.started_at.is_none() && summary.finished_at.is_none());
    assert!(run.stats.is_none());
    let config = run.configuration.expect("configuration");
    let opts = config.options.expect("options");
    let retry = match opts.conflict_policy.and_then(|c| c.strategy) {
        Some(pb::operation_run_conflict_policy::Strategy::Retry(r)) => r,
        None => panic!("conflict policy defaults are returned"),
    };
    assert_eq!(retry.retry_timeout.map(|d| d.seconds), Some(3600));
    assert_eq!(retry.initial_retry_delay.map(|d| d.seconds), Some(30));
    assert_eq!(retry.max_retry_delay.map(|d| d.seconds), Some(300));
    assert_eq!(
        opts.phase_policy.and_then(|p| p.advance_policy),
        Some(pb::OperationRunPhaseAdvancePolicy {
            auto_advance: false
        })
    );

    // Spec §2.6 derived example: phase 0 = 7,9,4,3; phase 1 = 10,6,1; phase 2 = 5,2,8.
    let targets = s
        .client
        .list_operation_run_targets(pb::ListOperationRunTargetsRequest {
            operation_run_id: Some(id.clone()),
            phase_scope: pb::OperationRunTargetPhaseScope::CurrentAndCompletedPhases as i32,
            ..Default::default()
        })
        .await
        .expect("targets")
        .into_inner();
    assert_eq!(targets.total, 4, "only phase 0 is current or completed");
    let got: Vec<(u32, i32, i32)> = targets
        .targets
        .iter()
        .map(|t| (rack_index(&t.rack_id), t.phase_index, t.sequence_index))
        .collect();
    assert_eq!(got, vec![(7, 0, 0), (9, 0, 1), (4, 0, 2), (3, 0, 3)]);
    let first = &targets.targets[0];
    assert_eq!(first.rack_external_id, "r-0007");
    assert_eq!(first.status, pb::OperationRunTargetStatus::Pending as i32);
    let groups = &first
        .components_by_type
        .as_ref()
        .expect("components")
        .groups;
    let names: Vec<i32> = groups.iter().map(|g| g.r#type).collect();
    assert_eq!(
        names,
        vec![
            pb::ComponentType::Compute as i32,
            pb::ComponentType::Nvswitch as i32,
            pb::ComponentType::Powershelf as i32
        ],
        "groups sorted by type name"
    );
    assert_eq!(groups[0].component_ids.len(), 2);
    let mut sorted = groups[0].component_ids.clone();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(groups[0].component_ids, sorted, "ids sorted");
    s.stop().await;
}

async fn preview_matches_create_and_persists_nothing(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 10).await;
    let mut req = run_request("preview", 50, "", "", 2);
    // Empty seeds are generated and reported.
    let preview = s
        .extensions()
        .preview_operation_run(req.clone())
        .await
        .expect("preview")
        .into_inner();
    assert_eq!(total_runs(&mut s).await, 0, "preview writes nothing");
    assert_eq!(preview.targets.len(), 5);
    assert_eq!(preview.phase_sizes, vec![3, 2]);
    assert_eq!(preview.total_phases, 2);
    assert_eq!(preview.candidate_count, 10);
    let config = preview.configuration.expect("configuration");
    let selector_seed = match config.selector.and_then(|s| s.selector) {
        Some(pb::operation_run_selector::Selector::Percentage(p)) => p.seed,
        None => panic!("selector"),
    };
    let ordering_seed = match config
        .options
        .and_then(|o| o.ordering_policy)
        .and_then(|o| o.ordering)
    {
        Some(pb::operation_run_ordering_policy::Ordering::Random(r)) => r.seed,
        _ => panic!("ordering"),
    };
    assert!(Uuid::parse_str(&selector_seed).is_ok() && Uuid::parse_str(&ordering_seed).is_ok());
    assert_ne!(
        selector_seed, ordering_seed,
        "seeds are generated independently"
    );

    // The same seeds on Create give the same plan.
    req = run_request("preview", 50, &selector_seed, &ordering_seed, 2);
    let id = s
        .client
        .create_operation_run(req)
        .await
        .expect("create")
        .into_inner()
        .id;
    let mut planned: Vec<(String, i32, i32)> = Vec::new();
    for scope in [pb::OperationRunTargetPhaseScope::CurrentPhase] {
        let t = s
            .client
            .list_operation_run_targets(pb::ListOperationRunTargetsRequest {
                operation_run_id: id.clone(),
                phase_scope: scope as i32,
                ..Default::default()
            })
            .await
            .expect("targets")
            .into_inner();
        planned.extend(
            t.targets
                .into_iter()
                .map(|t| (t.rack_external_id, t.phase_index, t.sequence_index)),
        );
    }
    let previewed: Vec<(String, i32, i32)> = preview
        .targets
        .iter()
        .filter(|t| t.phase_index == 0)
        .map(|t| (t.rack_external_id.clone(), t.phase_index, t.sequence_index))
        .collect();
    assert_eq!(planned, previewed);
    s.stop().await;
}

async fn validation_errors_have_reference_messages_and_write_nothing(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 3).await;
    type Mutate = Box<dyn Fn(&mut pb::CreateOperationRunRequest)>;
    let rate_gate = |scope: i32, pct: i32| pb::OperationRunSafetyGate {
        gate: Some(pb::operation_run_safety_gate::Gate::FailureRate(
            pb::OperationRunFailureRateGate {
                scope,
                failure_threshold_percent: pct,
            },
        )),
    };
    let retry = |t: Option<i64>, i: Option<i64>, m: Option<i64>| {
        Some(pb::OperationRunConflictPolicy {
            strategy: Some(pb::operation_run_conflict_policy::Strategy::Retry(
                pb::OperationRunConflictRetryPolicy {
                    retry_timeout: t.map(|s| prost_types::Duration {
                        seconds: s,
                        nanos: 0,
                    }),
                    initial_retry_delay: i.map(|s| prost_types::Duration {
                        seconds: s,
                        nanos: 0,
                    }),
                    max_retry_delay: m.map(|s| prost_types::Duration {
                        seconds: s,
                        nanos: 0,
                    }),
                },
            )),
        })
    };
    let cases: Vec<(Mutate, &str)> = vec![
        (Box::new(|r| r.name = "   ".into()), "name is required"),
        (
            Box::new(|r| r.configuration = None),
            "configuration is required",
        ),
        (
            Box::new(|r| r.configuration.as_mut().unwrap().operation = None),
            "operation is required",
        ),
        (
            Box::new(|r| {
                target_scope(r).exclude_operation_run_ids = vec![pb::Uuid { id: "nope".into() }]
            }),
            "target_scope.exclude_operation_run_ids[0] must be a valid UUID",
        ),
        (
            Box::new(|r| {
                target_scope(r).default_scope_component_filter = Some(pb::ComponentFilter {
                    filter: Some(pb::component_filter::Filter::Types(pb::ComponentTypes {
                        types: vec![1, 0],
                    })),
                })
            }),
            "target_scope.default_scope_component_filter.types[1] is unknown",
        ),
        (
            Box::new(|r| {
                target_scope(r).default_scope_component_filter = Some(pb::ComponentFilter {
                    filter: Some(pb::component_filter::Filter::Components(
                        pb::ComponentTargets {
                            targets: vec![pb::ComponentTarget {
                                identifier: Some(pb::component_target::Identifier::External(
                                    pb::ExternalRef {
                                        r#type: 1,
                                        id: "x".into(),
                                    },
                                )),
                            }],
                        },
                    )),
                })
            }),
            "target_scope.default_scope_component_filter.components[0] must use component UUID",
        ),
        (
            Box::new(|r| {
                target_scope(r).default_scope_component_filter = Some(pb::ComponentFilter {
                    filter: Some(pb::component_filter::Filter::Types(pb::ComponentTypes {
                        types: vec![],
                    })),
                })
            }),
            "validate operation: target_scope: default_scope_component_filter: component filter kind \"types\" requires at least one type",
        ),
        (
            Box::new(|r| {
                upgrade(r).target_spec = Some(pb::OperationTargetSpec {
                    targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
                        targets: vec![pb::RackTarget {
                            identifier: Some(pb::rack_target::Identifier::ExternalId(
                                "r-0001".into(),
                            )),
                            component_types: vec![],
                        }],
                    })),
                });
                target_scope(r).default_scope_component_filter = Some(pb::ComponentFilter {
                    filter: Some(pb::component_filter::Filter::Types(pb::ComponentTypes {
                        types: vec![1],
                    })),
                });
            }),
            "validate operation: target_scope.default_scope_component_filter requires target_spec to be omitted",
        ),
        (
            Box::new(|r| upgrade(r).target_spec = Some(pb::OperationTargetSpec { targets: None })),
            "validate operation: target_spec: target_spec must have exactly one of racks, nvl_domains, or components set",
        ),
        (
            Box::new(|r| upgrade(r).rule_id = Some(pb::Uuid { id: "abc".into() })),
            "invalid upgrade_firmware.rule_id: invalid UUID length: 3",
        ),
        (
            Box::new(|r| r.configuration.as_mut().unwrap().selector = None),
            "selector is required",
        ),
        (
            Box::new(|r| {
                r.configuration.as_mut().unwrap().selector = Some(pb::OperationRunSelector {
                    selector: Some(pb::operation_run_selector::Selector::Percentage(
                        pb::PercentageSelector {
                            percentage: 101,
                            seed: String::new(),
                        },
                    )),
                })
            }),
            "percentage selector must be between 1 and 100",
        ),
        (
            Box::new(|r| r.configuration.as_mut().unwrap().options = None),
            "options are required",
        ),
        (
            Box::new(|r| options(r).max_concurrent_targets = 0),
            "options.max_concurrent_targets must be greater than 0",
        ),
        (
            Box::new(|r| options(r).safety_policy = None),
            "options.safety_policy is required",
        ),
        (
            Box::new(|r| {
                options(r).safety_policy = Some(pb::OperationRunSafetyPolicy { gates: vec![] })
            }),
            "safety_policy must contain at least one gate",
        ),
        (
            Box::new(|r| {
                options(r).safety_policy = Some(pb::OperationRunSafetyPolicy {
                    gates: vec![pb::OperationRunSafetyGate { gate: None }],
                })
            }),
            "safety_policy.gates[0]: unsupported safety gate",
        ),
        (
            Box::new(move |r| {
                options(r).safety_policy = Some(pb::OperationRunSafetyPolicy {
                    gates: vec![rate_gate(1, 10), rate_gate(7, 10)],
                })
            }),
            "safety_policy.gates[1]: failure_rate.scope is unsupported",
        ),
        (
            Box::new(move |r| {
                options(r).safety_policy = Some(pb::OperationRunSafetyPolicy {
                    gates: vec![rate_gate(2, 0)],
                })
            }),
            "safety_policy.gates[0]: failure_rate.failure_threshold_percent must be between 1 and 100",
        ),
        (
            Box::new(|r| {
                options(r).safety_policy = Some(pb::OperationRunSafetyPolicy {
                    gates: vec![pb::OperationRunSafetyGate {
                        gate: Some(pb::operation_run_safety_gate::Gate::FailureCount(
                            pb::OperationRunFailureCountGate {
                                scope: 0,
                                failure_threshold_count: 0,
                            },
                        )),
                    }],
                })
            }),
            "safety_policy.gates[0]: failure_count.failure_threshold_count must be greater than 0",
        ),
        (
            Box::new(move |r| options(r).conflict_policy = retry(Some(0), None, None)),
            "conflict_policy.retry: retry_timeout must be greater than 0",
        ),
        (
            Box::new(move |r| options(r).conflict_policy = retry(None, Some(-5), None)),
            "conflict_policy.retry: initial_retry_delay must be greater than 0",
        ),
        (
            Box::new(move |r| options(r).conflict_policy = retry(None, None, Some(10))),
            "conflict_policy.retry: max_retry_delay must be greater than or equal to initial_retry_delay",
        ),
        (
            Box::new(|r| {
                options(r).conflict_policy = Some(pb::OperationRunConflictPolicy {
                    strategy: Some(pb::operation_run_conflict_policy::Strategy::Retry(
                        pb::OperationRunConflictRetryPolicy {
                            retry_timeout: Some(prost_types::Duration {
                                seconds: 5,
                                nanos: -1,
                            }),
                            ..Default::default()
                        },
                    )),
                })
            }),
            "conflict_policy.retry.retry_timeout is invalid: duration (seconds:5 nanos:-1) has seconds and nanos with different signs",
        ),
        (
            Box::new(|r| {
                options(r).ordering_policy = Some(pb::OperationRunOrderingPolicy {
                    ordering: Some(
                        pb::operation_run_ordering_policy::Ordering::PhysicalLocation(
                            pb::OperationRunPhysicalLocationOrdering { strategy: 1 },
                        ),
                    ),
                })
            }),
            "physical_location ordering is not supported yet",
        ),
        (
            Box::new(|r| {
                options(r).phase_policy = Some(pb::OperationRunPhasePolicy {
                    plan: Some(pb::operation_run_phase_policy::Plan::Equal(
                        pb::EqualOperationRunPhases { phase_count: 0 },
                    )),
                    advance_policy: None,
                })
            }),
            "equal phase_count must be greater than 0",
        ),
        (
            Box::new(|r| {
                options(r).phase_policy = Some(pb::OperationRunPhasePolicy {
                    plan: Some(pb::operation_run_phase_policy::Plan::Percentage(
                        pb::PercentageOperationRunPhases { phases: vec![] },
                    )),
                    advance_policy: None,
                })
            }),
            "percentage phase policy must include at least one phase",
        ),
        (
            Box::new(|r| {
                options(r).phase_policy = Some(pb::OperationRunPhasePolicy {
                    plan: Some(pb::operation_run_phase_policy::Plan::Percentage(
                        pb::PercentageOperationRunPhases {
                            phases: vec![
                                pb::OperationRunPercentagePhase { percentage: 50 },
                                pb::OperationRunPercentagePhase { percentage: 40 },
                            ],
                        },
                    )),
                    advance_policy: None,
                })
            }),
            "percentage phase percentages must sum to 100",
        ),
        (
            Box::new(|r| {
                options(r).phase_policy = Some(pb::OperationRunPhasePolicy {
                    plan: Some(pb::operation_run_phase_policy::Plan::Percentage(
                        pb::PercentageOperationRunPhases {
                            phases: vec![
                                pb::OperationRunPercentagePhase { percentage: 0 },
                                pb::OperationRunPercentagePhase { percentage: 100 },
                            ],
                        },
                    )),
                    advance_policy: None,
                })
            }),
            "percentage phase percentages must be between 1 and 100",
        ),
        (
            Box::new(|r| {
                options(r).phase_policy = Some(pb::OperationRunPhasePolicy {
                    plan: Some(pb::operation_run_phase_policy::Plan::Count(
                        pb::CountOperationRunPhases {
                            phases: vec![
                                pb::OperationRunCountPhase { count: 1 },
                                pb::OperationRunCountPhase { count: 0 },
                            ],
                        },
                    )),
                    advance_policy: None,
                })
            }),
            "count phase counts must be greater than 0",
        ),
    ];
    for (i, (mutate, message)) in cases.iter().enumerate() {
        let mut req = run_request("bad", 50, "s", "o", 1);
        mutate(&mut req);
        for preview in [false, true] {
            let err = if preview {
                s.extensions()
                    .preview_operation_run(req.clone())
                    .await
                    .expect_err("preview must fail")
            } else {
                s.client
                    .create_operation_run(req.clone())
                    .await
                    .expect_err("create must fail")
            };
            assert_eq!(
                err.code(),
                Code::InvalidArgument,
                "case {i} ({message}): {err:?}"
            );
            assert_eq!(err.message(), *message, "case {i}");
        }
    }
    assert_eq!(total_runs(&mut s).await, 0, "bad input writes nothing");
    s.stop().await;
}

async fn planner_errors_map_to_reference_codes(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 2).await;
    let err = s
        .client
        .create_operation_run(run_request("zero", 100, "s", "o", 10))
        .await
        .expect_err("zero phase");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(
        err.message(),
        "operation run plan is invalid: configured operation run phase has no targets: equal phase 2 resolves to zero targets for 2 selected targets"
    );
    // Decision D4: count overflow is InvalidArgument too.
    let mut req = run_request("count", 100, "s", "o", 1);
    options(&mut req).phase_policy = Some(pb::OperationRunPhasePolicy {
        plan: Some(pb::operation_run_phase_policy::Plan::Count(
            pb::CountOperationRunPhases {
                phases: vec![pb::OperationRunCountPhase { count: 3 }],
            },
        )),
        advance_policy: None,
    });
    let err = s
        .client
        .create_operation_run(req)
        .await
        .expect_err("count overflow");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(
        err.message(),
        "operation run plan is invalid: count phase counts exceed selected target count"
    );

    // A component that does not exist: NotFound with the chain.
    let mut req = run_request("missing", 100, "s", "o", 1);
    upgrade(&mut req).target_spec = Some(pb::OperationTargetSpec {
        targets: Some(pb::operation_target_spec::Targets::Components(
            pb::ComponentTargets {
                targets: vec![pb::ComponentTarget {
                    identifier: Some(pb::component_target::Identifier::External(
                        pb::ExternalRef {
                            r#type: 0,
                            id: "no-such".into(),
                        },
                    )),
                }],
            },
        )),
    });
    let err = s
        .client
        .create_operation_run(req)
        .await
        .expect_err("missing component");
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(
        err.message(),
        "plan operation run targets: build target_spec scope: component target 0: component external_id=no-such not found"
    );

    // Explicit spec resolving to components of one rack: merged into one target.
    let mut req = run_request("components", 100, "s", "o", 1);
    upgrade(&mut req).target_spec = Some(pb::OperationTargetSpec {
        targets: Some(pb::operation_target_spec::Targets::Components(
            pb::ComponentTargets {
                targets: [
                    "r-0001-compute-00",
                    "r-0001-compute-01",
                    "r-0001-powershelf-00",
                ]
                .iter()
                .map(|ext| pb::ComponentTarget {
                    identifier: Some(pb::component_target::Identifier::External(
                        pb::ExternalRef {
                            r#type: 0,
                            id: ext.to_string(),
                        },
                    )),
                })
                .collect(),
            },
        )),
    });
    let preview = s
        .extensions()
        .preview_operation_run(req)
        .await
        .expect("preview")
        .into_inner();
    assert_eq!(preview.targets.len(), 1);
    let groups = &preview.targets[0]
        .components_by_type
        .as_ref()
        .unwrap()
        .groups;
    assert_eq!(
        groups
            .iter()
            .map(|g| g.component_ids.len())
            .collect::<Vec<_>>(),
        vec![2, 1]
    );

    // An explicit spec that resolves to nothing: no fallback to the default scope.
    let mut req = run_request("empty", 100, "s", "o", 1);
    upgrade(&mut req).target_spec = Some(pb::OperationTargetSpec {
        targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
            targets: vec![pb::RackTarget {
                identifier: Some(pb::rack_target::Identifier::ExternalId("r-0001".into())),
                component_types: vec![pb::ComponentType::Cdu as i32],
            }],
        })),
    });
    let err = s
        .client
        .create_operation_run(req)
        .await
        .expect_err("empty plan");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(err.message(), "operation run has no planned targets");
    assert_eq!(total_runs(&mut s).await, 0);
    s.stop().await;
}

async fn candidate_limit_is_internal(backend: Backend) {
    let mut config = rackflow_server::Config::default();
    config.dispatcher.enabled = false;
    config.planner.max_candidate_targets = 2;
    let Some(mut s) = TestServer::start_with(backend, config).await else {
        return;
    };
    fixture_fleet(&mut s.client, 3).await;
    let err = s
        .client
        .create_operation_run(run_request("big", 1, "s", "o", 1))
        .await
        .expect_err("limit");
    assert_eq!(err.code(), Code::Internal);
    // The reference's text, then which setting raises the limit (issue 31).
    assert_eq!(
        err.message(),
        "plan operation run targets: build default scope: operation run candidate scope exceeds \
         target limit 2 (the server's planner.max_candidate_targets, or \
         RACKFLOW_MAX_CANDIDATE_TARGETS in its environment, raises the limit; 0 = unlimited)"
    );
    // With a component filter that matches two racks only, the limit holds.
    let mut req = run_request("filtered", 100, "s", "o", 1);
    let racks = s
        .client
        .get_list_of_racks(pb::GetListOfRacksRequest {
            with_components: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let ids: Vec<pb::ComponentTarget> = racks.racks[..2]
        .iter()
        .map(|r| pb::ComponentTarget {
            identifier: Some(pb::component_target::Identifier::Id(
                r.components[0].info.as_ref().unwrap().id.clone().unwrap(),
            )),
        })
        .collect();
    target_scope(&mut req).default_scope_component_filter = Some(pb::ComponentFilter {
        filter: Some(pb::component_filter::Filter::Components(
            pb::ComponentTargets { targets: ids },
        )),
    });
    let preview = s
        .extensions()
        .preview_operation_run(req)
        .await
        .expect("within limit")
        .into_inner();
    assert_eq!(preview.targets.len(), 2);
    assert!(
        preview
            .targets
            .iter()
            .all(|t| t.components_by_type.as_ref().unwrap().groups.len() == 1)
    );
    s.stop().await;
}

async fn exclusions_and_component_filter_shape_the_scope(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 10).await;
    // Run A takes 30% (3 racks) with compute only.
    let mut a = run_request("a", 30, "sa", "oa", 1);
    target_scope(&mut a).default_scope_component_filter = Some(pb::ComponentFilter {
        filter: Some(pb::component_filter::Filter::Types(pb::ComponentTypes {
            types: vec![pb::ComponentType::Compute as i32],
        })),
    });
    let a_id = s
        .client
        .create_operation_run(a)
        .await
        .expect("a")
        .into_inner()
        .id
        .unwrap();
    let a_targets = s
        .client
        .list_operation_run_targets(pb::ListOperationRunTargetsRequest {
            operation_run_id: Some(a_id.clone()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(a_targets.total, 3);
    for t in &a_targets.targets {
        let groups = &t.components_by_type.as_ref().unwrap().groups;
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].r#type, pb::ComponentType::Compute as i32);
    }
    // Run B excludes A over the whole fleet: A's racks keep only their
    // non-compute components (partial exclusion); others are whole.
    let mut b = run_request("b", 100, "sb", "ob", 1);
    target_scope(&mut b).exclude_operation_run_ids = vec![a_id.clone()];
    let preview = s
        .extensions()
        .preview_operation_run(b.clone())
        .await
        .expect("b")
        .into_inner();
    assert_eq!(preview.targets.len(), 10);
    let a_racks: Vec<String> = a_targets
        .targets
        .iter()
        .map(|t| t.rack_external_id.clone())
        .collect();
    for t in &preview.targets {
        let types: Vec<i32> = t
            .components_by_type
            .as_ref()
            .unwrap()
            .groups
            .iter()
            .map(|g| g.r#type)
            .collect();
        if a_racks.contains(&t.rack_external_id) {
            assert_eq!(
                types,
                vec![
                    pb::ComponentType::Nvswitch as i32,
                    pb::ComponentType::Powershelf as i32
                ]
            );
        } else {
            assert_eq!(types.len(), 3);
        }
    }
    // Excluding with the same filter drops A's racks entirely.
    target_scope(&mut b).default_scope_component_filter = Some(pb::ComponentFilter {
        filter: Some(pb::component_filter::Filter::Types(pb::ComponentTypes {
            types: vec![pb::ComponentType::Compute as i32],
        })),
    });
    let preview = s
        .extensions()
        .preview_operation_run(b.clone())
        .await
        .expect("b filtered")
        .into_inner();
    assert_eq!(preview.targets.len(), 7);
    assert!(
        preview
            .targets
            .iter()
            .all(|t| !a_racks.contains(&t.rack_external_id))
    );
    // An unknown excluded run fails creation (the reference's message with
    // the ids listed; NOT_FOUND, not the reference's INTERNAL: the caller
    // named it — issue 14).
    let ghost = Uuid::new_v4();
    target_scope(&mut b).exclude_operation_run_ids = vec![uuid(ghost)];
    let err = s
        .client
        .create_operation_run(b)
        .await
        .expect_err("unknown excluded run");
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(
        err.message(),
        format!(
            "plan operation run targets: resolve excluded operation runs [{ghost}]: operation run not found: {ghost}"
        )
    );
    s.stop().await;
}

async fn list_runs_filters_order_and_paginate(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 3).await;
    let mut ids = Vec::new();
    for name in ["alpha-one", "alpha-two", "beta"] {
        ids.push(
            s.client
                .create_operation_run(run_request(name, 100, "s", "o", 1))
                .await
                .unwrap()
                .into_inner()
                .id
                .unwrap()
                .id,
        );
    }
    let list = |filter: Option<pb::OperationRunFilter>, pagination: Option<pb::Pagination>| {
        pb::ListOperationRunsRequest { filter, pagination }
    };
    let names = |r: &pb::ListOperationRunsResponse| {
        r.operation_runs
            .iter()
            .map(|r| r.name.clone())
            .collect::<Vec<_>>()
    };

    let all = s
        .client
        .list_operation_runs(list(None, None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.total, 3);
    assert_eq!(
        names(&all),
        vec!["beta", "alpha-two", "alpha-one"],
        "created_at DESC"
    );
    assert!(all.operation_runs.iter().all(|r| r.id.is_some()));

    let page = s
        .client
        .list_operation_runs(list(
            None,
            Some(pb::Pagination {
                offset: 1,
                limit: 1,
            }),
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (page.total, names(&page)),
        (3, vec!["alpha-two".to_string()])
    );

    let name_filter = |patterns: &[&str], wildcard: bool, use_or: bool| {
        Some(pb::OperationRunFilter {
            name: Some(pb::StringQueryInfo {
                patterns: patterns.iter().map(|p| p.to_string()).collect(),
                is_wildcard: wildcard,
                use_or,
            }),
            ..Default::default()
        })
    };
    let r = s
        .client
        .list_operation_runs(list(name_filter(&["beta"], false, false), None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(names(&r), vec!["beta"]);
    let r = s
        .client
        .list_operation_runs(list(name_filter(&["alpha"], true, false), None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.total, 2);
    let r = s
        .client
        .list_operation_runs(list(name_filter(&["ALPHA"], true, false), None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.total, 0, "LIKE is case-sensitive");
    let r = s
        .client
        .list_operation_runs(list(name_filter(&["one", "two"], true, false), None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.total, 0, "AND of patterns");
    let r = s
        .client
        .list_operation_runs(list(name_filter(&["one", "beta"], true, true), None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(names(&r), vec!["beta", "alpha-one"], "OR of patterns (D6)");
    let r = s
        .client
        .list_operation_runs(list(
            name_filter(&["beta", "alpha-one"], false, false),
            None,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.total, 2, "IN list");

    let states = |status: Option<i32>, reason: Option<i32>| {
        Some(pb::OperationRunFilter {
            states: vec![pb::OperationRunStateFilter { status, reason }],
            ..Default::default()
        })
    };
    let r = s
        .client
        .list_operation_runs(list(states(Some(1), None), None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.total, 3);
    let r = s
        .client
        .list_operation_runs(list(states(Some(2), None), None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((r.total, r.operation_runs.len()), (0, 0));
    let r = s
        .client
        .list_operation_runs(list(states(Some(1), Some(1)), None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.total, 3);
    let kinds = |t: i32, code: Option<&str>| {
        Some(pb::OperationRunFilter {
            operation_kinds: vec![pb::OperationKind {
                r#type: t,
                code: code.map(String::from),
            }],
            ..Default::default()
        })
    };
    let r = s
        .client
        .list_operation_runs(list(kinds(2, Some("upgrade")), None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.total, 3);
    let r = s
        .client
        .list_operation_runs(list(kinds(1, None), None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.total, 0);

    let bad: Vec<(Option<pb::OperationRunFilter>, &str)> = vec![
        (
            states(None, None),
            "operation run state filter must set status, reason, or both",
        ),
        (
            states(Some(0), None),
            "unknown operation run status in filter",
        ),
        (
            states(Some(42), None),
            "unknown operation run status in filter",
        ),
        (
            states(None, Some(0)),
            "unknown operation run status reason in filter",
        ),
        (
            kinds(0, None),
            "operation kind filter must set operation type",
        ),
        (
            kinds(2, Some("")),
            "operation kind filter code must not be empty",
        ),
    ];
    for (filter, message) in bad {
        let err = s
            .client
            .list_operation_runs(list(filter, None))
            .await
            .expect_err(message);
        assert_eq!(
            (err.code(), err.message()),
            (Code::InvalidArgument, message)
        );
    }
    s.stop().await;
}

async fn list_targets_scopes_filters_and_enrichment(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 10).await;
    let id = s
        .client
        .create_operation_run(run_request("t", 100, "selector-seed", "ordering-seed", 3))
        .await
        .unwrap()
        .into_inner()
        .id;
    let req = |status: i32, scope: i32, pagination: Option<pb::Pagination>| {
        pb::ListOperationRunTargetsRequest {
            operation_run_id: id.clone(),
            status,
            pagination,
            phase_scope: scope,
        }
    };
    let r = s
        .client
        .list_operation_run_targets(req(0, 0, None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.total, 4, "UNKNOWN scope = current phase");
    let r = s
        .client
        .list_operation_run_targets(req(0, 2, None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.total, 0, "no completed phases yet");
    let r = s
        .client
        .list_operation_run_targets(req(
            0,
            1,
            Some(pb::Pagination {
                offset: 1,
                limit: 2,
            }),
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.total, 4, "total before paging");
    assert_eq!(
        r.targets
            .iter()
            .map(|t| t.sequence_index)
            .collect::<Vec<_>>(),
        vec![1, 2]
    );
    let r = s
        .client
        .list_operation_run_targets(req(pb::OperationRunTargetStatus::Pending as i32, 1, None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.total, 4);
    let r = s
        .client
        .list_operation_run_targets(req(pb::OperationRunTargetStatus::Completed as i32, 1, None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.total, 0);
    let err = s
        .client
        .list_operation_run_targets(req(99, 1, None))
        .await
        .expect_err("bad status");
    assert_eq!(
        (err.code(), err.message()),
        (
            Code::InvalidArgument,
            "unknown operation run target status in filter"
        )
    );
    let err = s
        .client
        .list_operation_run_targets(req(0, 9, None))
        .await
        .expect_err("bad scope");
    assert_eq!(
        (err.code(), err.message()),
        (
            Code::InvalidArgument,
            "unsupported operation run target phase scope"
        )
    );
    let err = s
        .client
        .list_operation_run_targets(pb::ListOperationRunTargetsRequest {
            operation_run_id: None,
            ..Default::default()
        })
        .await
        .expect_err("no id");
    assert_eq!(
        (err.code(), err.message()),
        (Code::InvalidArgument, "operation run ID is required")
    );
    let ghost = Uuid::new_v4();
    let err = s
        .client
        .list_operation_run_targets(pb::ListOperationRunTargetsRequest {
            operation_run_id: Some(uuid(ghost)),
            ..Default::default()
        })
        .await
        .expect_err("unknown run");
    assert_eq!(
        (err.code(), err.message().to_string()),
        (Code::NotFound, format!("operation run not found: {ghost}"))
    );

    // A rack without an external id makes the listing FailedPrecondition.
    let mut bare = common::rack(50, None, 1);
    bare.external_id = String::new();
    for c in &mut bare.components {
        c.component_id = format!("bare-{}", c.info.as_ref().unwrap().name);
    }
    let rack_id = s
        .client
        .create_expected_rack(pb::CreateExpectedRackRequest { rack: Some(bare) })
        .await
        .unwrap()
        .into_inner()
        .id
        .unwrap();
    let mut only = run_request("bare", 100, "s", "o", 1);
    upgrade(&mut only).target_spec = Some(pb::OperationTargetSpec {
        targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
            targets: vec![pb::RackTarget {
                identifier: Some(pb::rack_target::Identifier::Id(rack_id.clone())),
                component_types: vec![],
            }],
        })),
    });
    let bare_run = s
        .client
        .create_operation_run(only)
        .await
        .unwrap()
        .into_inner()
        .id;
    let err = s
        .client
        .list_operation_run_targets(pb::ListOperationRunTargetsRequest {
            operation_run_id: bare_run,
            ..Default::default()
        })
        .await
        .expect_err("no external id");
    assert_eq!(
        (err.code(), err.message().to_string()),
        (
            Code::FailedPrecondition,
            format!("rack \"{}\" has no external ID", rack_id.id)
        )
    );
    s.stop().await;
}

async fn stats_and_not_found(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 10).await;
    let id = s
        .client
        .create_operation_run(run_request("stats", 100, "s", "o", 3))
        .await
        .unwrap()
        .into_inner()
        .id;
    let run = s
        .client
        .get_operation_run(pb::GetOperationRunRequest {
            id: id.clone(),
            include_stats: true,
        })
        .await
        .unwrap()
        .into_inner()
        .operation_run
        .unwrap();
    let stats = run.stats.expect("stats requested");
    let current = stats.current_phase_stats.unwrap();
    let cumulative = stats.cumulative_phase_stats.unwrap();
    assert_eq!((current.phase_index, current.selected_targets), (0, 4));
    assert_eq!(
        (cumulative.phase_index, cumulative.selected_targets),
        (0, 4)
    );
    assert_eq!(
        cumulative.outcome_counts,
        Some(pb::OperationRunTargetOutcomeCounts::default())
    );

    let ghost = Uuid::new_v4();
    let err = s
        .client
        .get_operation_run(pb::GetOperationRunRequest {
            id: Some(uuid(ghost)),
            include_stats: false,
        })
        .await
        .expect_err("nf");
    assert_eq!(
        (err.code(), err.message().to_string()),
        (Code::NotFound, format!("operation run not found: {ghost}"))
    );
    for bad in [
        None,
        Some(pb::Uuid { id: "x".into() }),
        Some(uuid(Uuid::nil())),
    ] {
        let err = s
            .client
            .get_operation_run(pb::GetOperationRunRequest {
                id: bad,
                include_stats: false,
            })
            .await
            .expect_err("bad id");
        assert_eq!(
            (err.code(), err.message()),
            (Code::InvalidArgument, "operation run ID is required")
        );
    }
    let paused = s
        .client
        .pause_operation_run(pb::PauseOperationRunRequest { id })
        .await
        .expect("pause")
        .into_inner();
    let state = paused.summary.unwrap().state.unwrap();
    assert_eq!(
        (state.status, state.reason),
        (
            pb::OperationRunStatus::Paused as i32,
            pb::OperationRunStatusReason::OperatorPaused as i32
        )
    );
    assert!(paused.stats.is_none(), "control responses carry no stats");
    s.stop().await;
}

/// Without a data encryption key, firmware credentials are refused (never
/// stored in clear), for runs and plain upgrades alike; nothing is written.
async fn firmware_credentials_are_refused_without_a_key(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 2).await;
    let credentials = Some(pb::FirmwareAuthenticationData {
        value: Some(pb::firmware_authentication_data::Value::Shared(
            "secret".into(),
        )),
    });
    let mut req = run_request("creds", 100, "s", "o", 1);
    upgrade(&mut req).authentication_data = credentials.clone();
    let err = s
        .client
        .create_operation_run(req)
        .await
        .expect_err("refused");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message().contains("authentication_data"),
        "{}",
        err.message()
    );
    assert!(!err.message().contains("secret"));
    assert_eq!(total_runs(&mut s).await, 0);

    let err = s
        .client
        .upgrade_firmware(pb::UpgradeFirmwareRequest {
            target_spec: Some(pb::OperationTargetSpec {
                targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
                    targets: vec![pb::RackTarget {
                        identifier: Some(pb::rack_target::Identifier::ExternalId("r-0001".into())),
                        component_types: vec![],
                    }],
                })),
            }),
            authentication_data: credentials,
            ..Default::default()
        })
        .await
        .expect_err("refused");
    assert_eq!(err.code(), Code::FailedPrecondition);
    let tasks = s
        .client
        .list_tasks(pb::ListTasksRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(tasks.total, 0, "nothing submitted");
    s.stop().await;
}
