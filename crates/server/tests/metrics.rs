//! `/metrics` of the Flow server, read through an OpenMetrics parser, on
//! SQLite and PostgreSQL: every family is there before anything happened;
//! a phased rollout over the simulated fleet shows up as runs, targets and
//! tasks by status, task and stage durations, dispatcher attempts, the
//! phase gate's trip and the RPCs by method and code.

// Test helpers may unwrap: the panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use rackflow_testkit as common;
use rackflow_testkit::both_stores;
use rackflow_testkit::metrics::{MetricType, scrape};

use common::{Backend, TestServer, fixture_fleet};
use rackflow_api::v1 as pb;

both_stores!(a_phased_rollout_shows_in_every_family);

const DEADLINE: Duration = Duration::from_secs(60);

/// Every family the Flow server documents, with its type, but
/// `rackflow_event_rule_alerts` (its series are per rule: it appears with
/// the first alert; tests/event_rules.rs reads it).
const FAMILIES: &[(&str, MetricType)] = &[
    ("rackflow_operation_runs", MetricType::Gauge),
    ("rackflow_operation_run_targets", MetricType::Gauge),
    ("rackflow_tasks", MetricType::Gauge),
    ("rackflow_task_queue_waiting", MetricType::Gauge),
    ("rackflow_tasks_finished", MetricType::Counter),
    ("rackflow_task_duration_seconds", MetricType::Histogram),
    ("rackflow_stage_duration_seconds", MetricType::Histogram),
    (
        "rackflow_dispatch_attempt_duration_seconds",
        MetricType::Histogram,
    ),
    ("rackflow_gate_trips", MetricType::Counter),
    ("rackflow_schedule_firings", MetricType::Counter),
    ("rackflow_schedule_skipped_occurrences", MetricType::Counter),
    ("rackflow_leak_reports", MetricType::Counter),
    ("rackflow_leak_response_tasks", MetricType::Counter),
    ("rackflow_rpc_requests", MetricType::Counter),
    ("rackflow_rpc_duration_seconds", MetricType::Histogram),
];

/// The rack manager's families (crates/rms/tests/grpc_api.rs reads them).
const RMS_FAMILIES: &[&str] = &["rms_workflows_counts", "rms_workflows_in_flight"];

/// The Grafana dashboard in docs/ queries only families the services export.
#[test]
fn the_dashboard_queries_exported_families() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/grafana/rackflow-rollouts.json"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut queried = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if !(word.starts_with("rackflow_") || word.starts_with("rms_")) {
                    continue;
                }
                let family = ["_total", "_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| word.strip_suffix(suffix))
                    .unwrap_or(word);
                let known = FAMILIES.iter().any(|(f, _)| *f == family)
                    || RMS_FAMILIES.contains(&family)
                    || family == "rackflow_event_rule_alerts";
                assert!(known, "the dashboard queries {word}, which nothing exports");
                queried += 1;
            }
        }
    }
    assert!(queried > 10, "{queried}");
}

const FIRMWARE: (&str, &str) = ("task_type", "firmware_control");

fn uuid_of(id: &pb::Uuid) -> pb::Uuid {
    id.clone()
}

async fn a_phased_rollout_shows_in_every_family(backend: Backend) {
    let mut config = rackflow_server::Config::default();
    config.sim.firmware_update_ms = 50;
    config.sim.jitter = 0.0;
    let addr = rackflow_testkit::metrics::enable(&mut config);
    let Some(mut s) = TestServer::start_with(backend, config).await else {
        return;
    };
    fixture_fleet(&mut s.client, 4).await;

    let before = scrape(addr).await;
    // Counters and gauges are there at 0; a histogram's series appear
    // with its first observation (the RPC families' with the fixture's
    // calls).
    for (family, kind) in FAMILIES {
        if *kind != MetricType::Histogram {
            assert_eq!(before.kind(family), *kind, "{family}");
        }
    }
    assert_eq!(
        before.value("rackflow_operation_runs", &[("status", "pending")]),
        0.0
    );
    assert_eq!(
        before.value("rackflow_gate_trips", &[("reason", "phase_gate")]),
        0.0
    );
    assert_eq!(
        before.value(
            "rackflow_tasks_finished",
            &[FIRMWARE, ("status", "completed")]
        ),
        0.0
    );

    // Two phases of two racks; the first phase ends at the phase gate.
    let id = s
        .run_to_phase_gate(common::run_request("metrics", 100, "s", "o", 2), DEADLINE)
        .await;
    let at_gate = scrape(addr).await;
    for (family, kind) in FAMILIES {
        assert_eq!(at_gate.kind(family), *kind, "{family}");
    }
    assert_eq!(
        at_gate.value("rackflow_operation_runs", &[("status", "paused")]),
        1.0
    );
    assert_eq!(
        at_gate.value("rackflow_gate_trips", &[("reason", "phase_gate")]),
        1.0
    );
    assert_eq!(at_gate.sum("rackflow_operation_run_targets", &[]), 4.0);
    assert_eq!(
        at_gate.value("rackflow_operation_run_targets", &[("status", "pending")]),
        2.0
    );
    assert_eq!(
        at_gate.value(
            "rackflow_tasks_finished",
            &[FIRMWARE, ("status", "completed")]
        ),
        2.0
    );
    assert_eq!(
        at_gate.value(
            "rackflow_task_duration_seconds",
            &[FIRMWARE, ("status", "completed")]
        ),
        2.0
    );
    assert!(
        at_gate.histogram_sum(
            "rackflow_task_duration_seconds",
            &[FIRMWARE, ("status", "completed")]
        ) > 0.0,
        "{at_gate:?}"
    );
    assert!(
        at_gate.sum(
            "rackflow_stage_duration_seconds",
            &[FIRMWARE, ("status", "completed")]
        ) >= 2.0
    );
    assert!(at_gate.sum("rackflow_dispatch_attempt_duration_seconds", &[]) >= 1.0);
    assert_eq!(at_gate.sum("rackflow_tasks", &[]), 0.0);
    let create = [
        ("service", "flow"),
        ("rpc", "/v1.Flow/CreateOperationRun"),
        ("code", "OK"),
    ];
    assert_eq!(at_gate.value("rackflow_rpc_requests", &create), 1.0);
    assert_eq!(at_gate.value("rackflow_rpc_duration_seconds", &create), 1.0);

    // A stale guard is refused and counted under its code.
    let stale = s
        .client
        .advance_operation_run_phase(pb::AdvanceOperationRunPhaseRequest {
            id: Some(uuid_of(&id)),
            expected_phase_index: Some(7),
        })
        .await
        .unwrap_err();
    s.client
        .advance_operation_run_phase(pb::AdvanceOperationRunPhaseRequest {
            id: Some(uuid_of(&id)),
            expected_phase_index: Some(1),
        })
        .await
        .unwrap();
    let mut watch = s.extensions();
    common::wait::wait_run(&mut watch, &id, "the run's end", DEADLINE, |run| {
        run.summary
            .as_ref()
            .and_then(|s| s.state)
            .is_some_and(|s| s.status() == pb::OperationRunStatus::Completed)
    })
    .await;
    let after = scrape(addr).await;
    let code = rackflow_security::code_name(stale.code());
    assert_eq!(
        after.value(
            "rackflow_rpc_requests",
            &[("rpc", "/v1.Flow/AdvanceOperationRunPhase"), ("code", code)]
        ),
        1.0
    );
    assert_eq!(
        after.value("rackflow_operation_runs", &[("status", "completed")]),
        1.0
    );
    assert_eq!(
        after.value("rackflow_operation_runs", &[("status", "paused")]),
        0.0
    );
    // A finished run's targets are no longer counted.
    assert_eq!(after.sum("rackflow_operation_run_targets", &[]), 0.0);
    assert_eq!(
        after.value(
            "rackflow_tasks_finished",
            &[FIRMWARE, ("status", "completed")]
        ),
        4.0
    );
    assert_eq!(after.value("rackflow_task_queue_waiting", &[]), 0.0);
    s.stop().await;
}
