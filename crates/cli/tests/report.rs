//! Task reports: parsing the version-1 JSON, the stages/steps table of
//! `task get`, the terminal frame and the change lines of `task watch`.

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use rackflow_api::v1;
use rackflow_cli::report::{ChangeLog, Report, render_report};
use rackflow_cli::task::{TaskView, render_task, render_watch_frame};

/// A power-on report half way: stage 1 done, stage 2 running, stage 3 not
/// started, with a skipped step and a failed component.
const RUNNING: &str = r#"{
  "version": 1,
  "stages": [
    {
      "number": 1,
      "status": "completed",
      "steps": [
        {"component_type": "PowerShelf", "status": "completed", "total_components": 8,
         "completed_components": 8, "failed_components": 0,
         "started_at": "2026-06-01T10:00:00Z", "finished_at": "2026-06-01T10:00:20Z", "error": ""}
      ],
      "started_at": "2026-06-01T10:00:00Z", "finished_at": "2026-06-01T10:00:20Z", "error": ""
    },
    {
      "number": 2,
      "status": "running",
      "steps": [
        {"component_type": "NVSwitch", "status": "running", "total_components": 9,
         "completed_components": 3, "failed_components": 1,
         "started_at": "2026-06-01T10:00:20Z", "finished_at": null, "error": ""},
        {"component_type": "ToRSwitch", "status": "skipped", "total_components": 0,
         "completed_components": 0, "failed_components": 0}
      ],
      "started_at": "2026-06-01T10:00:20Z"
    },
    {
      "number": 3,
      "status": "pending",
      "steps": [
        {"component_type": "Compute", "status": "pending", "total_components": 18,
         "completed_components": 0, "failed_components": 0}
      ]
    }
  ],
  "error": ""
}"#;

fn running() -> Report {
    Report::parse(RUNNING).unwrap().unwrap()
}

#[test]
fn report_parses_leniently() {
    let r = running();
    assert_eq!(r.stages.len(), 3);
    assert_eq!(r.stages[1].steps[0].completed_components, Some(3));
    assert_eq!(r.stages[1].steps[0].finished_at, None);
    assert_eq!(Report::parse("").unwrap(), None);
    assert_eq!(Report::parse("  ").unwrap(), None);
    // Unknown keys and missing ones are fine; a non-object is not.
    let odd = Report::parse(r#"{"stages":[{"steps":[{}],"extra":1}],"new_field":true}"#)
        .unwrap()
        .unwrap();
    assert_eq!(odd.stages[0].steps.len(), 1);
    assert!(Report::parse("[1,2]").is_err());
}

#[test]
fn report_renders_as_stage_and_step_table() {
    let text = render_report(&running());
    let expected = "\
STAGE  STAGE STATUS  COMPONENT TYPE  STATUS     COMPLETED  FAILED  TOTAL  ERROR
1      completed     PowerShelf      completed  8          0       8
2      running       NVSwitch        running    3          1       9
                     ToRSwitch       skipped    0          0       0
3      pending       Compute         pending    0          0       18
";
    assert_eq!(text, expected);
}

#[test]
fn failed_report_shows_step_stage_and_report_errors() {
    let mut r = running();
    r.stages[1].status = Some("failed".into());
    r.stages[1].error =
        Some("stage 2 failed: component type NVSwitch failed: timeout after 5m0s".into());
    r.stages[1].steps[0].status = Some("failed".into());
    r.stages[1].steps[0].error = Some("timeout after 5m0s waiting for power status".into());
    r.error = Some("stage 2 failed".into());
    let text = render_report(&r);
    assert!(
        text.contains("2      failed        NVSwitch        failed     3          1       9      timeout after 5m0s waiting for power status"),
        "{text}"
    );
    assert!(
        text.contains(
            "\nstage 2: stage 2 failed: component type NVSwitch failed: timeout after 5m0s\n"
        ),
        "{text}"
    );
    assert!(text.ends_with("error: stage 2 failed\n"), "{text}");
    assert_eq!(r.summary(), "stage 2 failed (1/3 completed)");
    assert_eq!(running().summary(), "stage 2 running (1/3 completed)");
}

#[test]
fn empty_report_and_summary() {
    let r = Report::parse(r#"{"version":1,"stages":[],"error":"rule definition has no steps"}"#)
        .unwrap()
        .unwrap();
    assert_eq!(
        render_report(&r),
        "(the report has no stages)\nerror: rule definition has no steps\n"
    );
    assert_eq!(r.summary(), "no stages");
    let mut done = running();
    for s in &mut done.stages {
        s.status = Some("completed".into());
    }
    assert_eq!(done.summary(), "3/3 stages completed");
}

fn task(status: v1::TaskStatus, message: &str, report: &str) -> TaskView {
    TaskView::from_proto(&v1::Task {
        id: Some(v1::Uuid {
            id: "5f0e2a55-6d0b-4b8f-9d5e-3b1f3a0c2e77".into(),
        }),
        operation: "power_control/power_on".into(),
        rack_id: Some(v1::Uuid {
            id: "d2d25749-b00e-4272-8008-f27e13d3b767".into(),
        }),
        component_uuids: vec![v1::Uuid { id: "c1".into() }, v1::Uuid { id: "c2".into() }],
        execution_id: "local:5f0e2a55-6d0b-4b8f-9d5e-3b1f3a0c2e77".into(),
        status: status as i32,
        message: message.into(),
        created_at: Some(prost_types::Timestamp {
            seconds: 1_780_308_000,
            nanos: 0,
        }),
        report: report.into(),
        ..Default::default()
    })
}

#[test]
fn task_view_and_get_block() {
    let t = task(v1::TaskStatus::Running, "Running", RUNNING);
    assert_eq!(t.status, "running");
    assert_eq!(t.executor, "local");
    assert!(!t.is_finished());
    assert_eq!(t.component_ids.len(), 2);
    assert_eq!(t.report.as_ref().unwrap()["stages"][0]["number"], 1);
    let text = render_task(&t);
    assert!(
        text.starts_with("ID:           5f0e2a55-6d0b-4b8f-9d5e-3b1f3a0c2e77\n"),
        "{text}"
    );
    assert!(
        text.contains("Operation:    power_control/power_on\n"),
        "{text}"
    );
    assert!(text.contains("Rule:         built-in\n"), "{text}");
    assert!(
        text.contains("Created:      2026-06-01T10:00:00Z\n"),
        "{text}"
    );
    assert!(text.contains("\nSTAGE  STAGE STATUS"), "{text}");
    let none = task(v1::TaskStatus::Waiting, "Queued", "");
    assert!(none.report.is_none());
    assert!(render_task(&none).ends_with("(no report yet)\n"));
    // A report the CLI does not understand is shown raw.
    let raw = task(v1::TaskStatus::Running, "", "not json");
    assert!(render_task(&raw).contains("Report (unrecognised shape): \"not json\""));
    let done = task(v1::TaskStatus::Completed, "Succeeded", RUNNING);
    assert!(done.is_finished());
    assert_eq!(
        done.status_line(),
        "task 5f0e2a55-6d0b-4b8f-9d5e-3b1f3a0c2e77 completed: Succeeded"
    );
}

#[test]
fn watch_frame_has_header_table_and_hint_until_finished() {
    let t = task(v1::TaskStatus::Running, "Running", RUNNING);
    let frame = render_watch_frame(&t, Duration::from_secs(2));
    assert!(frame.starts_with(
        "Task 5f0e2a55-6d0b-4b8f-9d5e-3b1f3a0c2e77  power_control/power_on  rack d2d25749-b00e-4272-8008-f27e13d3b767\nStatus: running (Running)\n\n"
    ), "{frame}");
    assert!(frame.contains("2      running       NVSwitch"), "{frame}");
    assert!(frame.ends_with("polling every 2s; Ctrl-C stops watching (the task keeps running)\n"));
    let done = task(v1::TaskStatus::Completed, "Succeeded", RUNNING);
    assert!(!render_watch_frame(&done, Duration::from_secs(2)).contains("polling"));
}

#[test]
fn change_log_prints_everything_once_then_only_changes() {
    let mut log = ChangeLog::new();
    let first = log.changes("pending", "Pending", None);
    assert_eq!(first, vec!["task pending: Pending"]);
    assert!(log.changes("pending", "Pending", None).is_empty());

    let r = running();
    let lines = log.changes("running", "Running", Some(&r));
    assert_eq!(
        lines,
        vec![
            "stage 1 completed",
            "stage 1 PowerShelf completed (8/8 completed, 0 failed)",
            "stage 2 running",
            "stage 2 NVSwitch running (3/9 completed, 1 failed)",
            "stage 2 ToRSwitch skipped (0/0 completed, 0 failed)",
            "stage 3 pending",
            "stage 3 Compute pending (0/18 completed, 0 failed)",
            "task running: Running",
        ]
    );
    // The same state again: nothing.
    assert!(log.changes("running", "Running", Some(&r)).is_empty());

    // Progress in one step only.
    let mut next = r.clone();
    next.stages[1].steps[0].completed_components = Some(8);
    assert_eq!(
        log.changes("running", "Running", Some(&next)),
        vec!["stage 2 NVSwitch running (8/9 completed, 1 failed)"]
    );

    // The stage fails: stage line with its error, the step, the report error.
    next.stages[1].status = Some("failed".into());
    next.stages[1].error = Some("component type NVSwitch failed".into());
    next.stages[1].steps[0].status = Some("failed".into());
    next.stages[1].steps[0].error = Some("1 component failed".into());
    next.error = Some("stage 2 failed".into());
    assert_eq!(
        log.changes("failed", "stage 2 failed", Some(&next)),
        vec![
            "stage 2 failed: component type NVSwitch failed",
            "stage 2 NVSwitch failed (8/9 completed, 1 failed): 1 component failed",
            "error: stage 2 failed",
            "task failed: stage 2 failed",
        ]
    );
    assert!(
        log.changes("failed", "stage 2 failed", Some(&next))
            .is_empty()
    );
}
