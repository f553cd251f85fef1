//! Snapshot tests (insta) of plans: what PreviewOperationRun answers for
//! fixed seeds over the fixture fleet (racks with fixed ids, so the seeded
//! selection and ordering are fixed), on both stores against the same
//! `.snap` files under `tests/snapshots/`. A change of the planner's
//! selection, ordering or phase split shows as a diff to review
//! (`cargo insta review`); under `CI` a mismatch fails and nothing is
//! written.

use std::fmt::Write as _;

use rackflow_api::v1 as pb;
use rackflow_testkit::both_stores;
use rackflow_testkit::{Backend, TestServer, fixture_fleet, options, run_request};

both_stores!(previews_of_fixed_seeds);

/// The plan as text: the effective seeds and phase sizes, then one line per
/// target in phase and sequence order.
fn render(preview: &pb::PreviewOperationRunResponse) -> String {
    let configuration = preview.configuration.as_ref().expect("configuration");
    let selector = match configuration
        .selector
        .as_ref()
        .and_then(|s| s.selector.as_ref())
    {
        Some(pb::operation_run_selector::Selector::Percentage(p)) => {
            format!("{}% seed {:?}", p.percentage, p.seed)
        }
        other => format!("{other:?}"),
    };
    let ordering = match configuration
        .options
        .as_ref()
        .and_then(|o| o.ordering_policy.as_ref())
        .and_then(|o| o.ordering.as_ref())
    {
        Some(pb::operation_run_ordering_policy::Ordering::Random(r)) => {
            format!("random seed {:?}", r.seed)
        }
        other => format!("{other:?}"),
    };
    let mut out = format!(
        "candidates {}, phases {} {:?}\nselector {selector}\nordering {ordering}\n",
        preview.candidate_count, preview.total_phases, preview.phase_sizes
    );
    for t in &preview.targets {
        // Component ids are random: their count per type is what is planned.
        let components: Vec<String> = t
            .components_by_type
            .iter()
            .flat_map(|c| &c.groups)
            .map(|g| {
                let kind = pb::ComponentType::try_from(g.r#type)
                    .map_or_else(|_| g.r#type.to_string(), |k| format!("{k:?}"));
                format!("{kind}={}", g.component_ids.len())
            })
            .collect();
        let components = components.join(" ");
        writeln!(
            out,
            "phase {} seq {:>2}  {}  {}  {}  {components}",
            t.phase_index,
            t.sequence_index,
            t.rack_external_id,
            t.rack_name,
            t.rack_id.as_ref().map_or("-", |id| id.id.as_str()),
        )
        .expect("write to a String");
    }
    out
}

async fn previews_of_fixed_seeds(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 12).await;
    let mut half = run_request("half", 50, "plan-seed-1", "order-seed-1", 2);
    options(&mut half).max_concurrent_targets = 3;
    let all = run_request("all", 100, "plan-seed-2", "order-seed-2", 4);
    for (name, request) in [
        ("preview_half_two_phases", half),
        ("preview_all_four_phases", all),
    ] {
        let preview = s
            .extensions()
            .preview_operation_run(request)
            .await
            .expect("preview")
            .into_inner();
        insta::with_settings!({ prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!(name, render(&preview));
        });
    }
    s.stop().await;
}
