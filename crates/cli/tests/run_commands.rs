//! The new run commands and the demo without a server: argument parsing of
//! `run pause|resume|advance|cancel|watch` and `demo`, and the pure parts of
//! the watch view (bars, per-phase counts, pause help, change lines) and of
//! the demo (timings, rule, fault placement, summary).

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

use clap::Parser;
use rackflow_api::v1;
use rackflow_cli::demo::{self, Timings};
use rackflow_cli::run::RunSummaryView;
use rackflow_cli::watch::{
    PhaseProgress, Snapshot, bar, build_snapshot, change_lines, command_prefix, pause_help,
    phase_progress, render_frame, render_frame_at,
};
use rackflow_cli::{Cli, Command, RunCommand};

const ID: &str = "6d5e8a28-3943-45a8-876a-e04028900cec";

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("rackflow").chain(args.iter().copied()))
}

fn run_command(args: &[&str]) -> RunCommand {
    match parse(args).unwrap().command {
        Command::Run(c) => c,
        other => panic!("not a run command: {other:?}"),
    }
}

#[test]
fn control_commands_parse() {
    let id: uuid::Uuid = ID.parse().unwrap();
    assert!(matches!(run_command(&["run", "pause", ID]), RunCommand::Pause { id: i } if i == id));
    assert!(matches!(run_command(&["run", "resume", ID]), RunCommand::Resume { id: i } if i == id));
    assert!(matches!(
        run_command(&["run", "advance", ID]),
        RunCommand::Advance { id: i, expected_phase: None } if i == id
    ));
    assert!(matches!(
        run_command(&["run", "advance", ID, "--expected-phase", "2"]),
        RunCommand::Advance {
            expected_phase: Some(2),
            ..
        }
    ));
    assert!(matches!(
        run_command(&["run", "cancel", ID]),
        RunCommand::Cancel { reason: None, .. }
    ));
    match run_command(&["run", "cancel", ID, "--reason", "change freeze"]) {
        RunCommand::Cancel { reason, .. } => assert_eq!(reason.as_deref(), Some("change freeze")),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        run_command(&["run", "watch", ID]),
        RunCommand::Watch {
            exit_on_pause: false,
            ..
        }
    ));
    assert!(matches!(
        run_command(&["-o", "json", "run", "watch", ID, "--exit-on-pause"]),
        RunCommand::Watch {
            exit_on_pause: true,
            ..
        }
    ));
}

#[test]
fn control_command_errors_name_the_argument() {
    for (args, flag) in [
        (vec!["run", "pause", "nope"], "<ID>"),
        (vec!["run", "resume"], "<ID>"),
        (
            vec!["run", "watch", "00000000-0000-0000-0000-000000000000"],
            "<ID>",
        ),
        (
            vec!["run", "advance", ID, "--expected-phase", "0"],
            "--expected-phase",
        ),
        (
            vec!["run", "advance", ID, "--expected-phase", "x"],
            "--expected-phase",
        ),
        (vec!["run", "cancel", ID, "--reason"], "--reason"),
        (vec!["demo", "--racks", "4"], "--racks"),
        (vec!["demo", "--racks", "1001"], "--racks"),
        (vec!["demo", "--speed", "0"], "--speed"),
        (vec!["demo", "--speed=-1"], "--speed"),
        (vec!["demo", "--speed", "fast"], "--speed"),
        (vec!["demo", "--seed", "x"], "--seed"),
    ] {
        let err = parse(&args).unwrap_err().to_string();
        assert!(err.contains(flag), "{args:?}: {err}");
    }
}

#[test]
fn demo_parses_with_defaults() {
    let Command::Demo(args) = parse(&["demo"]).unwrap().command else {
        panic!("not demo");
    };
    assert_eq!(args.racks, 24);
    assert_eq!(args.seed, 7);
    assert!((args.speed - 1.0).abs() < f64::EPSILON);
    assert!(args.db.is_none());
    let Command::Demo(args) = parse(&[
        "demo",
        "--db",
        "/tmp/x.db",
        "--racks",
        "6",
        "--seed",
        "3",
        "--speed",
        "2.5",
    ])
    .unwrap()
    .command
    else {
        panic!("not demo");
    };
    assert_eq!(args.db.as_deref(), Some(std::path::Path::new("/tmp/x.db")));
    assert_eq!((args.racks, args.seed), (6, 3));
    assert!((args.speed - 2.5).abs() < f64::EPSILON);
}

#[test]
fn demo_timings_scale_with_speed() {
    let normal = Timings::for_speed(1.0);
    assert_eq!(normal.firmware_update_ms, 2000);
    assert_eq!(normal.power_ms, 200);
    assert_eq!(normal.poll_interval.as_millis(), 250);
    assert_eq!(normal.gate_pause.as_millis(), 1500);
    let fast = Timings::for_speed(20.0);
    assert_eq!(fast.firmware_update_ms, 100);
    assert_eq!(fast.poll_interval.as_millis(), 13);
    assert_eq!(fast.gate_pause.as_millis(), 75);
    let fastest = Timings::for_speed(1000.0);
    assert_eq!(fastest.firmware_update_ms, 2);
    assert_eq!(fastest.poll_interval.as_millis(), 10);
    assert_eq!(fastest.gate_pause.as_millis(), 50);
    let slow = Timings::for_speed(0.5);
    assert_eq!(slow.firmware_update_ms, 4000);
}

#[test]
fn demo_rule_and_run_request() {
    let rule = demo::rule_definition(std::time::Duration::from_millis(250)).unwrap();
    assert_eq!(rule.stages(), 2);
    assert!(rule.warnings.is_empty(), "{:?}", rule.warnings);
    let json = rule.to_json();
    assert!(json.contains("FirmwareControl"), "{json}");
    let racks: Vec<String> = (1..=6).map(|i| format!("r-{i:04}")).collect();
    let request = demo::create_args(&racks, 7, None)
        .to_spec()
        .unwrap()
        .to_request()
        .unwrap();
    assert_eq!(request.name, demo::RUN_NAME);
    let options = request
        .configuration
        .as_ref()
        .unwrap()
        .options
        .as_ref()
        .unwrap();
    assert_eq!(options.max_concurrent_targets, 4);
    assert_eq!(options.safety_policy.as_ref().unwrap().gates.len(), 2);
    let phases = options.phase_policy.as_ref().unwrap();
    assert!(!phases.advance_policy.unwrap_or_default().auto_advance);
}

fn planned(rack: &str, phase: i32, seq: i32) -> v1::PlannedOperationRunTarget {
    v1::PlannedOperationRunTarget {
        rack_external_id: rack.to_string(),
        phase_index: phase,
        sequence_index: seq,
        ..Default::default()
    }
}

#[test]
fn demo_faults_avoid_the_canary_phase() {
    // 24 racks: phases of 1, 3 and 20.
    let mut plan = vec![planned("r-0100", 0, 0)];
    plan.extend((1..4).map(|i| planned(&format!("r-01{i:02}"), 1, i)));
    plan.extend((4..24).map(|i| planned(&format!("r-02{i:02}"), 2, i)));
    assert_eq!(
        demo::faulty_racks(&plan),
        [("r-0102".to_string(), 1), ("r-0214".to_string(), 2)]
    );
    // 5 racks: phases of 1, 3 and 1.
    let plan = vec![
        planned("a", 0, 0),
        planned("b", 1, 1),
        planned("c", 1, 2),
        planned("d", 1, 3),
        planned("e", 2, 4),
    ];
    assert_eq!(
        demo::faulty_racks(&plan),
        [("c".to_string(), 1), ("e".to_string(), 2)]
    );
}

fn target(
    rack: &str,
    phase: i32,
    seq: i32,
    status: v1::OperationRunTargetStatus,
) -> v1::OperationRunTarget {
    v1::OperationRunTarget {
        rack_external_id: rack.to_string(),
        phase_index: phase,
        sequence_index: seq,
        status: status as i32,
        message: if status == v1::OperationRunTargetStatus::Failed {
            format!("firmware update failed for components: [{rack}-compute-07]")
        } else {
            String::new()
        },
        ..Default::default()
    }
}

#[test]
fn demo_summary_table() {
    use v1::OperationRunTargetStatus as S;
    let targets = vec![
        target("r-0001", 0, 0, S::Completed),
        target("r-0002", 1, 1, S::Completed),
        target("r-0003", 1, 2, S::Failed),
        target("r-0004", 1, 3, S::Completed),
        target("r-0005", 2, 4, S::Terminated),
        target("r-0006", 2, 5, S::Completed),
    ];
    let (phases, failed) = demo::summarize(&targets);
    let summary = demo::DemoSummary {
        run_id: ID.to_string(),
        status: "completed_with_failures".to_string(),
        status_message: "operation run completed with failed targets".to_string(),
        wall_time_secs: 12.34,
        phases,
        failed_racks: failed,
        server_log: String::new(),
        database: None,
    };
    assert_eq!(
        demo::render_summary(&summary),
        "Rollout finished: completed_with_failures (operation run completed with failed targets) in 12.3s\n\
         \n\
         PHASE  RACKS  COMPLETED  FAILED\n\
         0      1      1          0\n\
         1      3      2          1\n\
         2      2      1          1\n\
         total  6      4          2\n\
         Wall time: 12.3s\n\
         \n\
         Failed racks:\n\
         RACK    PHASE  MESSAGE\n\
         r-0003  1      firmware update failed for components: [r-0003-compute-07]\n\
         r-0005  2\n"
    );
}

fn progress(selected: Option<i32>, counts: [i32; 4]) -> PhaseProgress {
    PhaseProgress {
        phase_index: 0,
        selected,
        started: true,
        completed: counts[0],
        failed: counts[1],
        in_flight: counts[2],
        blocked: counts[3],
        pending: selected.unwrap_or(0) - counts.iter().sum::<i32>(),
    }
}

#[test]
fn bars_fill_exactly() {
    assert_eq!(
        bar(&progress(Some(20), [18, 1, 1, 0]), 20),
        "[##################x>]"
    );
    assert_eq!(
        bar(&progress(Some(4), [1, 1, 1, 1]), 20),
        "[#####xxxxx>>>>>~~~~~]"
    );
    assert_eq!(bar(&progress(Some(3), [0, 0, 0, 0]), 10), "[..........]");
    assert_eq!(bar(&progress(None, [0, 0, 0, 0]), 5), "[.....]");
    // One target of a hundred still shows.
    assert_eq!(bar(&progress(Some(100), [0, 1, 0, 0]), 10), "[x.........]");
    assert_eq!(bar(&progress(Some(3), [3, 0, 0, 0]), 10), "[##########]");
    for n in 1..=40 {
        for done in 0..=n {
            let b = bar(&progress(Some(n), [done, 0, n - done, 0]), 20);
            assert_eq!(b.chars().count(), 22, "{b}");
        }
    }
}

#[test]
fn phase_counts_from_targets_and_plan() {
    use v1::OperationRunTargetStatus as S;
    let targets = vec![
        target("a", 0, 0, S::Completed),
        target("b", 1, 1, S::Submitted),
        target("c", 1, 2, S::Claimed),
        target("d", 1, 3, S::Blocked),
        target("e", 1, 4, S::Failed),
        target("f", 1, 5, S::Pending),
        target("g", 1, 6, S::Skipped),
    ];
    let phases = phase_progress(&targets, 3, 1, Some(&[1, 6, 10]));
    assert_eq!(phases.len(), 3);
    assert_eq!((phases[0].selected, phases[0].completed), (Some(1), 1));
    let p = &phases[1];
    assert_eq!(
        (
            p.selected,
            p.completed,
            p.failed,
            p.in_flight,
            p.blocked,
            p.pending
        ),
        (Some(6), 1, 1, 2, 1, 1)
    );
    assert!(!phases[2].started);
    assert_eq!((phases[2].selected, phases[2].pending), (Some(10), 10));
    // A plan that disagrees with what was materialized is not used.
    let phases = phase_progress(&targets, 3, 1, Some(&[2, 5, 10]));
    assert_eq!(phases[2].selected, None);
    let phases = phase_progress(&targets, 3, 1, None);
    assert_eq!(phases[2].selected, None);
}

fn summary(status: &str, reason: &str, message: &str) -> RunSummaryView {
    RunSummaryView {
        id: ID.to_string(),
        name: "canary".to_string(),
        description: String::new(),
        operation: "firmware_control/upgrade".to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        status_message: message.to_string(),
        total_phases: 3,
        created_at: None,
        updated_at: None,
        started_at: None,
        finished_at: None,
    }
}

#[test]
fn pause_help_names_the_command_that_continues() {
    let prefix = command_prefix(Some("http://127.0.0.1:50051"));
    assert_eq!(prefix, "rackflow");
    assert_eq!(
        command_prefix(Some("http://10.0.0.5:6000")),
        "rackflow --server 10.0.0.5:6000"
    );
    let gate = pause_help(
        &summary("paused", "phase_gate", "waiting for phase advance"),
        1,
        &prefix,
    )
    .unwrap();
    assert_eq!(
        gate.command,
        format!("rackflow run advance {ID} --expected-phase 2")
    );
    assert_eq!(
        gate.why,
        "phase 1 is complete; phase 2 waits at the phase gate for an operator"
    );
    let operator = pause_help(
        &summary(
            "paused",
            "operator_paused",
            "operation run paused by operator",
        ),
        0,
        &prefix,
    )
    .unwrap();
    assert_eq!(operator.command, format!("rackflow run resume {ID}"));
    let message = "failure_rate safety gate tripped for current_phase: 1/3 targets failed (33%, threshold 10%)";
    let safety = pause_help(&summary("paused", "safety_gate", message), 0, &prefix).unwrap();
    assert_eq!(safety.command, format!("rackflow run resume {ID}"));
    assert_eq!(safety.why, message);
    assert!(safety.note.unwrap().contains("trips again"));
    let conflict = pause_help(
        &summary(
            "paused",
            "conflict_retry_timeout",
            "target x blocked by rack conflict for 1h0m0s",
        ),
        0,
        "rackflow --server h:1",
    )
    .unwrap();
    assert_eq!(
        conflict.command,
        format!("rackflow --server h:1 run resume {ID}")
    );
    assert!(conflict.note.is_some());
    assert!(pause_help(&summary("running", "none", ""), 0, &prefix).is_none());
}

fn wire_run(
    status: v1::OperationRunStatus,
    reason: v1::OperationRunStatusReason,
    message: &str,
    phase: i32,
) -> v1::OperationRun {
    v1::OperationRun {
        summary: Some(v1::OperationRunSummary {
            id: Some(v1::Uuid { id: ID.to_string() }),
            name: "canary".to_string(),
            state: Some(v1::OperationRunState {
                status: status as i32,
                reason: reason as i32,
            }),
            status_message: message.to_string(),
            total_phases: 2,
            ..Default::default()
        }),
        configuration: None,
        stats: Some(v1::OperationRunStats {
            current_phase_stats: Some(v1::OperationRunPhaseStats {
                phase_index: phase,
                ..Default::default()
            }),
            cumulative_phase_stats: None,
        }),
    }
}

#[test]
fn snapshots_follow_the_message_and_describe_changes() {
    use v1::OperationRunStatus as St;
    use v1::OperationRunStatusReason as R;
    use v1::OperationRunTargetStatus as S;
    let running = wire_run(St::Running, R::None, "submitted 1 operation run target", 0);
    let first = build_snapshot(
        &running,
        &[target("a", 0, 0, S::Submitted)],
        Some(&[1, 2]),
        "rackflow",
    );
    let lines = change_lines(None, &first);
    assert_eq!(
        lines,
        [
            "watching run canary (6d5e8a28-3943-45a8-876a-e04028900cec): 2 phases (1, 2 targets)"
                .to_string(),
            "phase 0: 0 completed, 0 failed, 1 in flight, 0 blocked of 1".to_string(),
            "run running: submitted 1 operation run target".to_string(),
        ]
    );
    // Paused at the gate; the targets were listed after an advance already
    // opened phase 1: the snapshot stays with the message's phase.
    let gate = wire_run(St::Paused, R::PhaseGate, "waiting for phase advance", 0);
    let targets = [
        target("a", 0, 0, S::Completed),
        target("b", 1, 1, S::Submitted),
    ];
    let second = build_snapshot(&gate, &targets, Some(&[1, 2]), "rackflow");
    assert_eq!(second.current_phase, 0);
    assert!(!second.phases[1].started);
    assert!(second.is_paused());
    let lines = change_lines(Some(&first), &second);
    assert_eq!(
        lines,
        [
            "phase 0: 1 completed, 0 failed, 0 in flight, 0 blocked of 1 (phase done)".to_string(),
            "run paused (phase_gate): waiting for phase advance".to_string(),
            "paused: phase 0 is complete; phase 1 waits at the phase gate for an operator"
                .to_string(),
            format!("continue with: rackflow run advance {ID} --expected-phase 1"),
        ]
    );
    let frame = render_frame(&second);
    assert!(frame.contains("Status:   paused (phase_gate)"), "{frame}");
    assert!(
        frame.contains(&format!(
            "Continue: rackflow run advance {ID} --expected-phase 1"
        )),
        "{frame}"
    );
    assert!(
        frame.contains("0*     [####################]  1         1"),
        "{frame}"
    );
    assert!(
        frame.contains("1      [....................]  2         -"),
        "{frame}"
    );
    // Nothing changed: nothing to say.
    assert!(change_lines(Some(&second), &second).is_empty());
    let done = wire_run(
        St::CompletedWithFailures,
        R::None,
        "operation run completed with failed targets",
        1,
    );
    let targets = [
        target("a", 0, 0, S::Completed),
        target("b", 1, 1, S::Failed),
        target("c", 1, 2, S::Completed),
    ];
    let last: Snapshot = build_snapshot(&done, &targets, None, "rackflow");
    assert!(last.is_terminal());
    let lines = change_lines(Some(&second), &last);
    assert_eq!(
        lines,
        [
            "failed b (phase 1): firmware update failed for components: [b-compute-07]".to_string(),
            "phase 1: 1 completed, 1 failed, 0 in flight, 0 blocked of 2 (phase done)".to_string(),
            "run completed_with_failures: operation run completed with failed targets".to_string(),
        ]
    );
    assert_eq!(
        last.status_line(),
        format!("run {ID} completed_with_failures: operation run completed with failed targets")
    );
}

/// Issue 31 item 9: the live view draws its frame without the terminal's
/// auto-wrap, so a line longer than the terminal was cut — the safety
/// gate's note lost the end of its `run cancel <id>`. The frame is wrapped
/// at the width instead: no line over 80 columns, prose wrapped at blanks,
/// each command on its own line, broken (if at all) with shell
/// continuations so that it still pastes as one command.
#[test]
fn a_paused_frame_at_80_columns_keeps_every_command_whole() {
    use v1::OperationRunStatus as St;
    use v1::OperationRunStatusReason as R;
    use v1::OperationRunTargetStatus as S;
    let tripped = wire_run(
        St::Paused,
        R::SafetyGate,
        "failure_rate safety gate tripped for cumulative: 2/4 targets failed (50%, threshold 50%)",
        1,
    );
    for prefix in [
        "rackflow",
        "rackflow --server flow.example.org:50051 --tls-ca /etc/rackflow/tls/ca.pem",
    ] {
        let snapshot = build_snapshot(
            &tripped,
            &[
                target("a", 0, 0, S::Completed),
                target("b", 1, 1, S::Failed),
            ],
            Some(&[1, 2]),
            prefix,
        );
        let raw = render_frame(&snapshot);
        assert!(
            raw.lines().any(|l| l.chars().count() > 80),
            "the unwrapped frame has a line over 80 columns: {raw}"
        );
        let frame = render_frame_at(&snapshot, 80);
        for line in frame.lines() {
            assert!(line.chars().count() <= 80, "{line:?}\n{frame}");
        }
        // Continuations joined, each command is one line again.
        let joined = frame.replace(" \\\n", " ");
        let joined: Vec<String> = joined
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        for command in [
            format!("Continue: {prefix} run resume {ID}"),
            format!("Cancel: {prefix} run cancel {ID}"),
        ] {
            assert!(
                joined.contains(&command),
                "{command:?} not whole in:\n{frame}"
            );
        }
        assert_eq!(
            frame
                .replace(" \\\n", " ")
                .split_whitespace()
                .collect::<Vec<_>>(),
            raw.split_whitespace().collect::<Vec<_>>(),
            "nothing lost or changed but line breaks"
        );
    }
}
