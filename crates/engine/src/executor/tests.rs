//! Executor tests on the sim, with tokio's paused clock: timings are exact
//! and no test sleeps for real.

use std::collections::HashMap;
use std::sync::Mutex;

use rackflow_domain::report::ComponentStatus;

use serde_json::json;
use tokio::time::Instant;

use super::*;
use crate::manager::{ComponentManager, PowerControl, PowerState, PowerStatus};
use crate::sim::{FaultEffect, FaultOperation, SimConfig, SimFault, SimFleet};

#[derive(Default)]
struct Recorder {
    reports: Mutex<Vec<Report>>,
}

#[async_trait]
impl ReportSink for Recorder {
    async fn report(&self, _task_id: Uuid, report: &Report) {
        self.reports.lock().unwrap().push(report.clone());
    }
}

impl Recorder {
    fn last(&self) -> Report {
        self.reports.lock().unwrap().last().cloned().unwrap()
    }
    fn all(&self) -> Vec<Report> {
        self.reports.lock().unwrap().clone()
    }
}

fn components(ty: ComponentType, prefix: &str, n: usize) -> Vec<ComponentRef> {
    (0..n)
        .map(|i| ComponentRef {
            id: Uuid::new_v4(),
            component_type: ty,
            external_id: format!("{prefix}-{i}"),
            rack: "rack-1".to_string(),
        })
        .collect()
}

fn definition(steps: serde_json::Value) -> RuleDefinition {
    serde_json::from_value(json!({ "version": "v1", "steps": steps })).unwrap()
}

fn power(code: &str) -> TaskInformation {
    TaskInformation {
        code: code.to_string(),
        override_readiness_check: false,
        firmware: None,
    }
}

fn firmware(version: &str) -> TaskInformation {
    TaskInformation {
        code: "upgrade".to_string(),
        override_readiness_check: false,
        firmware: Some(rackflow_domain::run::FirmwarePayload {
            target_version: Some(version.to_string()),
            ..Default::default()
        }),
    }
}

fn job(
    information: TaskInformation,
    definition: RuleDefinition,
    components: Vec<ComponentRef>,
) -> TaskJob {
    TaskJob {
        task_id: Uuid::new_v4(),
        information,
        definition,
        components,
        resume_from: None,
    }
}

fn fleet(config: SimConfig) -> (Arc<SimFleet>, LocalExecutor) {
    let fleet = SimFleet::new(config);
    let executor = LocalExecutor::new(Arc::new(fleet.registry()), ExecutorConfig::default());
    (fleet, executor)
}

/// Latency without jitter so elapsed times are exact.
fn steady() -> SimConfig {
    SimConfig {
        jitter: 0.0,
        ..SimConfig::default()
    }
}

async fn run(executor: &LocalExecutor, job: TaskJob) -> (TaskOutcome, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    let outcome = executor
        .run(job, recorder.clone(), CancellationToken::new())
        .await;
    (outcome, recorder)
}

fn one_attempt() -> serde_json::Value {
    json!({ "max_attempts": 1, "initial_interval": "1s" })
}

#[tokio::test(start_paused = true)]
async fn stages_run_in_order_and_report_completes() {
    let (fleet, executor) = fleet(SimConfig::default());
    let def = definition(json!([
        { "component_type": "Compute", "stage": 2, "main_operation": { "name": "PowerControl" } },
        { "component_type": "PowerShelf", "stage": 1, "main_operation": { "name": "PowerControl" },
          "post_operation": [{ "name": "VerifyPowerStatus", "timeout": "1m", "poll_interval": "5s",
                               "parameters": { "expected_status": "on" } }] },
    ]));
    let mut targets = components(ComponentType::Compute, "c", 2);
    targets.extend(components(ComponentType::PowerShelf, "ps", 2));
    let (outcome, recorder) = run(&executor, job(power("power_on"), def, targets)).await;
    assert_eq!(outcome, TaskOutcome::Completed);
    let log = fleet.call_log(0);
    let calls: Vec<_> = log
        .iter()
        .map(|e| (e.call.as_str(), e.component_type))
        .collect();
    assert_eq!(
        calls,
        [
            ("power_control", ComponentType::PowerShelf),
            ("power_status", ComponentType::PowerShelf),
            ("power_control", ComponentType::Compute),
        ]
    );
    let report = recorder.last();
    assert!(report.error.is_none());
    assert!(
        report
            .stages
            .iter()
            .all(|s| s.status == ReportStatus::Completed)
    );
    let step = report.step(2, ComponentType::Compute).unwrap();
    assert_eq!((step.completed_components, step.failed_components), (2, 0));
    assert!(step.started_at.is_some() && step.finished_at.is_some());
    // Snapshots: initial, then each transition; stage 2 ran after stage 1.
    let all = recorder.all();
    assert!(all.len() >= 8);
    assert_eq!(all[0].stages[0].status, ReportStatus::Pending);
    let first_stage2 = all
        .iter()
        .position(|r| r.stages[1].status == ReportStatus::Running)
        .unwrap();
    assert_eq!(all[first_stage2].stages[0].status, ReportStatus::Completed);
}

#[tokio::test(start_paused = true)]
async fn steps_of_a_stage_run_in_parallel() {
    let (fleet, executor) = fleet(steady());
    let def = definition(json!([
        { "component_type": "Compute", "stage": 1, "main_operation": { "name": "PowerControl" } },
        { "component_type": "NVSwitch", "stage": 1, "main_operation": { "name": "PowerControl" } },
        { "component_type": "PowerShelf", "stage": 1, "main_operation": { "name": "PowerControl" } },
    ]));
    let mut targets = components(ComponentType::Compute, "c", 1);
    targets.extend(components(ComponentType::NvSwitch, "n", 1));
    targets.extend(components(ComponentType::PowerShelf, "p", 1));
    let start = Instant::now();
    let (outcome, _) = run(&executor, job(power("power_off"), def, targets)).await;
    assert_eq!(outcome, TaskOutcome::Completed);
    // Three 200 ms calls side by side, not one after another.
    assert_eq!(start.elapsed(), Duration::from_millis(200));
    assert_eq!(fleet.call_log(0).len(), 3);
    assert!(
        fleet
            .component_states(&[])
            .iter()
            .all(|s| s.power_state == PowerState::Off)
    );
}

#[tokio::test(start_paused = true)]
async fn components_are_batched_by_max_parallel() {
    let (fleet, executor) = fleet(steady());
    let def = definition(json!([
        { "component_type": "Compute", "stage": 1, "max_parallel": 2,
          "main_operation": { "name": "PowerControl", "parameters": { "operation": "force_power_off" } },
          "post_operation": [{ "name": "Sleep", "parameters": { "duration": "1s" } }] },
    ]));
    let start = Instant::now();
    let (outcome, recorder) = run(
        &executor,
        job(
            power("power_on"),
            def,
            components(ComponentType::Compute, "c", 5),
        ),
    )
    .await;
    assert_eq!(outcome, TaskOutcome::Completed);
    let log = fleet.call_log(0);
    let sizes: Vec<_> = log.iter().map(|e| e.components.len()).collect();
    assert_eq!(sizes, [2, 2, 1]);
    // The `operation` parameter wins over the task's code.
    assert!(log.iter().all(|e| e.detail == "force_power_off"));
    // Three sequential batches of 200 ms, then one Sleep for the step.
    assert_eq!(start.elapsed(), Duration::from_millis(1600));
    // Progress went 2 → 4 → 5.
    let counts: Vec<u32> = recorder
        .all()
        .iter()
        .map(|r| r.stages[0].steps[0].completed_components)
        .collect();
    assert!(counts.contains(&2) && counts.contains(&4));
}

#[tokio::test(start_paused = true)]
async fn retry_then_success() {
    let (fleet, executor) = fleet(steady());
    fleet.set_faults(vec![SimFault {
        component: Some("c-0".into()),
        operation: FaultOperation::Power,
        ..SimFault::default()
    }]);
    let healer = fleet.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(2000)).await;
        healer.clear_faults();
    });
    let def = definition(json!([
        { "component_type": "Compute", "stage": 1, "main_operation": { "name": "PowerControl" },
          "retry": { "max_attempts": 3, "initial_interval": "1s", "backoff_coefficient": 2.0 } },
    ]));
    let start = Instant::now();
    let (outcome, _) = run(
        &executor,
        job(
            power("power_off"),
            def,
            components(ComponentType::Compute, "c", 2),
        ),
    )
    .await;
    assert_eq!(outcome, TaskOutcome::Completed);
    let outcomes: Vec<_> = fleet
        .call_log(0)
        .iter()
        .map(|e| e.outcome.clone())
        .collect();
    assert_eq!(outcomes, ["fail", "fail", "ok"]);
    // 200 ms + 1 s + 200 ms + 2 s + 200 ms.
    assert_eq!(start.elapsed(), Duration::from_millis(3600));
}

#[tokio::test(start_paused = true)]
async fn retries_exhausted_fail_the_stage_with_type_and_cause() {
    let (fleet, executor) = fleet(steady());
    fleet.set_faults(vec![SimFault {
        component: Some("c-1".into()),
        ..SimFault::default()
    }]);
    let def = definition(json!([
        { "component_type": "PowerShelf", "stage": 1, "main_operation": { "name": "PowerControl" } },
        { "component_type": "Compute", "stage": 1, "main_operation": { "name": "PowerControl" },
          "retry": { "max_attempts": 2, "initial_interval": "1s" } },
        { "component_type": "NVSwitch", "stage": 2, "main_operation": { "name": "PowerControl" } },
    ]));
    let mut targets = components(ComponentType::Compute, "c", 3);
    targets.extend(components(ComponentType::PowerShelf, "p", 1));
    targets.extend(components(ComponentType::NvSwitch, "n", 1));
    let (outcome, recorder) = run(&executor, job(power("power_on"), def, targets)).await;
    let message = "stage 1 failed: component type Compute failed: \
                   power_on failed for components [c-1]: simulated power fault";
    assert_eq!(outcome, TaskOutcome::Failed(message.to_string()));
    // Default policy for PowerShelf was not needed; Compute tried twice;
    // stage 2 never started.
    let compute_calls = fleet
        .call_log(0)
        .iter()
        .filter(|e| e.component_type == ComponentType::Compute)
        .count();
    assert_eq!(compute_calls, 2);
    assert!(
        fleet
            .call_log(0)
            .iter()
            .all(|e| e.component_type != ComponentType::NvSwitch)
    );
    let report = recorder.last();
    assert_eq!(report.error.as_deref(), Some(message));
    assert_eq!(report.stages[0].status, ReportStatus::Failed);
    assert_eq!(report.stages[1].status, ReportStatus::Pending);
    let step = report.step(1, ComponentType::Compute).unwrap();
    assert_eq!(step.status, ReportStatus::Failed);
    assert_eq!(step.failed_components, 3);
    assert_eq!(
        report.step(1, ComponentType::PowerShelf).unwrap().status,
        ReportStatus::Completed
    );
}

#[tokio::test(start_paused = true)]
async fn verify_power_status_times_out_with_reference_message() {
    let (_fleet, executor) = fleet(steady());
    let def = definition(json!([
        { "component_type": "Compute", "stage": 1, "retry": one_attempt(),
          "main_operation": { "name": "VerifyPowerStatus", "timeout": "5s", "poll_interval": "1s",
                              "parameters": { "expected_status": "off" } } },
    ]));
    let start = Instant::now();
    let (outcome, _) = run(
        &executor,
        job(
            power("power_off"),
            def,
            components(ComponentType::Compute, "c", 2),
        ),
    )
    .await;
    assert_eq!(
        outcome,
        TaskOutcome::Failed(
            "stage 1 failed: component type Compute failed: timeout after 5s waiting for power status"
                .to_string()
        )
    );
    assert_eq!(start.elapsed(), Duration::from_secs(5));
}

fn firmware_step(retry: serde_json::Value) -> RuleDefinition {
    definition(json!([
        { "component_type": "Compute", "stage": 1, "retry": retry,
          "main_operation": { "name": "FirmwareControl",
                              "parameters": { "poll_interval": "1s", "poll_timeout": "30s" } } },
    ]))
}

#[tokio::test(start_paused = true)]
async fn firmware_update_completes_and_counts_progress() {
    let (fleet, executor) = fleet(steady());
    let (outcome, recorder) = run(
        &executor,
        job(
            firmware("2.0.0"),
            firmware_step(one_attempt()),
            components(ComponentType::Compute, "c", 3),
        ),
    )
    .await;
    assert_eq!(outcome, TaskOutcome::Completed);
    assert!(
        fleet
            .component_states(&[])
            .iter()
            .all(|s| s.firmware_version == "2.0.0")
    );
    let starts = fleet
        .call_log(0)
        .iter()
        .filter(|e| e.call == "firmware_start")
        .count();
    assert_eq!(starts, 1);
    assert_eq!(recorder.last().stages[0].steps[0].completed_components, 3);
}

#[tokio::test(start_paused = true)]
async fn firmware_failure_names_components() {
    let (fleet, executor) = fleet(steady());
    fleet.set_faults(vec![SimFault {
        component: Some("c-1".into()),
        operation: FaultOperation::Firmware,
        effect: FaultEffect::Fail,
        ..SimFault::default()
    }]);
    let (outcome, recorder) = run(
        &executor,
        job(
            firmware("2.0.0"),
            firmware_step(one_attempt()),
            components(ComponentType::Compute, "c", 3),
        ),
    )
    .await;
    assert_eq!(
        outcome,
        TaskOutcome::Failed(
            "stage 1 failed: component type Compute failed: firmware update failed for components: [c-1]"
                .to_string()
        )
    );
    let step = recorder.last().stages[0].steps[0].clone();
    assert_eq!((step.completed_components, step.failed_components), (2, 1));
}

/// Collects what the executor read back for the inventory.
#[derive(Default)]
struct Observations(Mutex<Vec<Observation>>);

#[async_trait]
impl InventoryObserver for Observations {
    async fn observed(&self, observations: &[Observation]) -> u64 {
        self.0.lock().unwrap().extend_from_slice(observations);
        1
    }
}

impl Observations {
    /// The last observed firmware version per component id.
    fn versions(&self) -> HashMap<Uuid, String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|o| Some((o.component_id, o.firmware_version.clone()?)))
            .collect()
    }
    fn power(&self) -> HashMap<Uuid, String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|o| Some((o.component_id, o.power_state.clone()?)))
            .collect()
    }
}

fn observed_fleet(config: SimConfig) -> (Arc<SimFleet>, LocalExecutor, Arc<Observations>) {
    let (fleet, executor) = fleet(config);
    let observations = Arc::new(Observations::default());
    let executor = executor.with_observer(Some(observations.clone()));
    (fleet, executor, observations)
}

fn firmware_starts(fleet: &SimFleet) -> Vec<Vec<String>> {
    fleet
        .call_log(0)
        .into_iter()
        .filter(|e| e.call == "firmware_start")
        .map(|e| e.components)
        .collect()
}

fn outcomes(report: &Report) -> Vec<(String, ComponentStatus, Option<String>)> {
    report.stages[0].steps[0]
        .components
        .iter()
        .map(|c| (c.component.clone(), c.status, c.found_version.clone()))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn installed_versions_are_read_back_and_a_rerun_skips_every_component() {
    let (fleet, executor, observed) = observed_fleet(steady());
    let targets = components(ComponentType::Compute, "c", 3);
    let first = job(
        firmware("2.0.0"),
        firmware_step(one_attempt()),
        targets.clone(),
    );
    let (outcome, recorder) = run(&executor, first).await;
    assert_eq!(outcome, TaskOutcome::Completed);
    let versions = observed.versions();
    for c in &targets {
        assert_eq!(versions.get(&c.id).map(String::as_str), Some("2.0.0"));
    }
    let done = |id: &str| {
        (
            id.to_string(),
            ComponentStatus::Completed,
            Some("2.0.0".to_string()),
        )
    };
    assert_eq!(
        outcomes(&recorder.last()),
        vec![done("c-0"), done("c-1"), done("c-2")]
    );

    // The same rollout again: nothing is sent, every component is reported
    // skipped, the step completes.
    let second = job(
        firmware("2.0.0"),
        firmware_step(one_attempt()),
        targets.clone(),
    );
    let (outcome, recorder) = run(&executor, second).await;
    assert_eq!(outcome, TaskOutcome::Completed);
    assert_eq!(firmware_starts(&fleet).len(), 1, "no second update");
    let skipped = |id: &str| {
        (
            id.to_string(),
            ComponentStatus::Skipped,
            Some("2.0.0".to_string()),
        )
    };
    assert_eq!(
        outcomes(&recorder.last()),
        vec![skipped("c-0"), skipped("c-1"), skipped("c-2")]
    );
    assert_eq!(recorder.last().stages[0].steps[0].completed_components, 3);
}

#[tokio::test(start_paused = true)]
async fn a_tray_that_silently_keeps_its_firmware_fails_with_expected_and_found() {
    let (fleet, executor, observed) = observed_fleet(steady());
    fleet.set_faults(vec![SimFault {
        component: Some("c-1".into()),
        operation: FaultOperation::Firmware,
        effect: FaultEffect::Stale,
        ..SimFault::default()
    }]);
    let targets = components(ComponentType::Compute, "c", 3);
    let (outcome, recorder) = run(
        &executor,
        job(
            firmware("2.0.0"),
            firmware_step(one_attempt()),
            targets.clone(),
        ),
    )
    .await;
    assert_eq!(
        outcome,
        TaskOutcome::Failed(
            "stage 1 failed: component type Compute failed: firmware version check failed: \
             c-1: expected 2.0.0, found 1.0.0"
                .to_string()
        )
    );
    let report = recorder.last();
    let step = &report.stages[0].steps[0];
    assert_eq!((step.completed_components, step.failed_components), (2, 1));
    let c1 = &step.components[1];
    assert_eq!(c1.status, ComponentStatus::Failed);
    assert_eq!(c1.expected_version.as_deref(), Some("2.0.0"));
    assert_eq!(c1.found_version.as_deref(), Some("1.0.0"));
    // The inventory learns the truth, not the request.
    assert_eq!(
        observed.versions().get(&targets[1].id).map(String::as_str),
        Some("1.0.0")
    );

    // override_version_check: the same silence is accepted.
    let mut info = firmware("2.0.0");
    if let Some(f) = info.firmware.as_mut() {
        f.override_version_check = true;
    }
    let (outcome, _) = run(&executor, job(info, firmware_step(one_attempt()), targets)).await;
    assert_eq!(outcome, TaskOutcome::Completed);
}

#[tokio::test(start_paused = true)]
async fn a_retry_reflashes_only_the_tray_whose_version_did_not_change() {
    let (fleet, executor) = fleet(steady());
    fleet.set_faults(vec![SimFault {
        component: Some("c-1".into()),
        operation: FaultOperation::Firmware,
        effect: FaultEffect::Stale,
        ..SimFault::default()
    }]);
    // Polls rarely (the built-in rule's 2 m): the sim's change feed must
    // wake the retry's poller when the re-flash ends.
    let def = definition(json!([
        { "component_type": "Compute", "stage": 1,
          "retry": { "max_attempts": 2, "initial_interval": "1s" },
          "main_operation": { "name": "FirmwareControl",
                              "parameters": { "poll_interval": "2m", "poll_timeout": "30m" } } },
    ]));
    let start = Instant::now();
    let (outcome, _) = run(
        &executor,
        job(
            firmware("2.0.0"),
            def,
            components(ComponentType::Compute, "c", 3),
        ),
    )
    .await;
    assert_eq!(
        outcome,
        TaskOutcome::Failed(
            "stage 1 failed: component type Compute failed: firmware version check failed: \
             c-1: expected 2.0.0, found 1.0.0"
                .to_string()
        )
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(
        firmware_starts(&fleet),
        vec![
            vec!["c-0".to_string(), "c-1".to_string(), "c-2".to_string()],
            vec!["c-1".to_string()],
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn one_failed_tray_waits_for_the_batch_and_a_retry_resends_only_it() {
    let (fleet, executor) = fleet(steady());
    fleet.set_faults(vec![
        SimFault {
            component: Some("c-1".into()),
            operation: FaultOperation::Firmware,
            effect: FaultEffect::Fail,
            ..SimFault::default()
        },
        // c-0 flashes ten times longer: still flashing when c-1 fails.
        SimFault {
            component: Some("c-0".into()),
            operation: FaultOperation::Firmware,
            effect: FaultEffect::Slow,
            ..SimFault::default()
        },
    ]);
    let retry = json!({ "max_attempts": 2, "initial_interval": "1s" });
    let (outcome, recorder) = run(
        &executor,
        job(
            firmware("2.0.0"),
            firmware_step(retry),
            components(ComponentType::Compute, "c", 3),
        ),
    )
    .await;
    assert_eq!(
        outcome,
        TaskOutcome::Failed(
            "stage 1 failed: component type Compute failed: firmware update failed for components: [c-1]"
                .to_string()
        )
    );
    assert_eq!(
        firmware_starts(&fleet),
        vec![
            vec!["c-0".to_string(), "c-1".to_string(), "c-2".to_string()],
            vec!["c-1".to_string()],
        ],
        "the retry re-sends only the failed tray"
    );
    let states = fleet.component_states(&[]);
    assert!(
        states
            .iter()
            .filter(|s| s.component != "c-1")
            .all(|s| s.firmware_version == "2.0.0")
    );
    let report = recorder.last();
    let statuses: Vec<_> = outcomes(&report)
        .into_iter()
        .map(|(c, s, _)| (c, s))
        .collect();
    assert_eq!(
        statuses,
        vec![
            ("c-0".to_string(), ComponentStatus::Completed),
            ("c-1".to_string(), ComponentStatus::Failed),
            ("c-2".to_string(), ComponentStatus::Completed),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn power_steps_record_the_state_read_back() {
    let (_fleet, executor, observed) = observed_fleet(steady());
    let def = definition(json!([
        { "component_type": "Compute", "stage": 1, "main_operation": { "name": "PowerControl" } },
    ]));
    let targets = components(ComponentType::Compute, "c", 2);
    let (outcome, _) = run(&executor, job(power("power_off"), def, targets.clone())).await;
    assert_eq!(outcome, TaskOutcome::Completed);
    let power = observed.power();
    for c in &targets {
        assert_eq!(power.get(&c.id).map(String::as_str), Some("Off"));
    }
}

#[tokio::test(start_paused = true)]
async fn firmware_timeout_names_type_and_duration() {
    let (fleet, executor) = fleet(steady());
    fleet.set_faults(vec![SimFault {
        operation: FaultOperation::Firmware,
        effect: FaultEffect::Hang,
        ..SimFault::default()
    }]);
    let start = Instant::now();
    let (outcome, _) = run(
        &executor,
        job(
            firmware("2.0.0"),
            firmware_step(one_attempt()),
            components(ComponentType::Compute, "c", 1),
        ),
    )
    .await;
    assert_eq!(
        outcome,
        TaskOutcome::Failed(
            "stage 1 failed: component type Compute failed: Compute firmware update timed out after 30s"
                .to_string()
        )
    );
    // 20 ms version read, 20 ms start call, 30 s of polling, 20 ms read-back.
    assert_eq!(start.elapsed(), Duration::from_millis(30_060));
}

#[tokio::test(start_paused = true)]
async fn cancellation_mid_step_stops_promptly() {
    let (fleet, executor) = fleet(steady());
    fleet.set_faults(vec![SimFault {
        effect: FaultEffect::Hang,
        ..SimFault::default()
    }]);
    let def = definition(json!([
        { "component_type": "Compute", "stage": 1, "main_operation": { "name": "PowerControl" } },
        { "component_type": "NVSwitch", "stage": 2, "main_operation": { "name": "PowerControl" } },
    ]));
    let mut targets = components(ComponentType::Compute, "c", 2);
    targets.extend(components(ComponentType::NvSwitch, "n", 1));
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        trigger.cancel();
    });
    let recorder = Arc::new(Recorder::default());
    let start = Instant::now();
    let outcome = executor
        .run(
            job(power("power_off"), def, targets),
            recorder.clone(),
            cancel,
        )
        .await;
    assert_eq!(outcome, TaskOutcome::Cancelled);
    assert_eq!(start.elapsed(), Duration::from_secs(3));
    let report = recorder.last();
    assert_eq!(report.error.as_deref(), Some(CANCELLED));
    assert_eq!(report.stages[0].status, ReportStatus::Failed);
    assert_eq!(report.stages[0].error.as_deref(), Some(CANCELLED));
    assert_eq!(report.stages[0].steps[0].error.as_deref(), Some(CANCELLED));
    assert_eq!(report.stages[1].status, ReportStatus::Pending);
    // The hanging call was dropped: nothing changed, the fleet still works.
    fleet.clear_faults();
    assert!(
        fleet
            .component_states(&[])
            .iter()
            .all(|s| s.power_state == PowerState::On)
    );
}

#[tokio::test(start_paused = true)]
async fn resume_skips_completed_stages_and_repolls_firmware() {
    let fleet = SimFleet::new(SimConfig {
        firmware_update_ms: 10_000,
        jitter: 0.0,
        ..SimConfig::default()
    });
    let executor = LocalExecutor::new(Arc::new(fleet.registry()), ExecutorConfig::default());
    let def = definition(json!([
        { "component_type": "PowerShelf", "stage": 1, "main_operation": { "name": "PowerControl",
          "parameters": { "operation": "power_on" } } },
        { "component_type": "Compute", "stage": 2,
          "main_operation": { "name": "FirmwareControl",
                              "parameters": { "poll_interval": "1s", "poll_timeout": "1m" } } },
    ]));
    let mut targets = components(ComponentType::PowerShelf, "p", 1);
    targets.extend(components(ComponentType::Compute, "c", 2));
    let first = job(firmware("3.0.0"), def, targets);

    // First run: interrupted (process "crash") while the update is running.
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        trigger.cancel();
    });
    let recorder = Arc::new(Recorder::default());
    let outcome = executor.run(first.clone(), recorder.clone(), cancel).await;
    assert_eq!(outcome, TaskOutcome::Cancelled);
    // The last snapshot persisted before the crash (before the cancel mark).
    let persisted = recorder
        .all()
        .into_iter()
        .rev()
        .find(|r| r.error.is_none())
        .unwrap();
    assert_eq!(persisted.stages[0].status, ReportStatus::Completed);
    assert_eq!(persisted.stages[1].status, ReportStatus::Running);
    assert_eq!(persisted.first_unfinished_stage(), Some(2));
    let seen = fleet.call_log(0).last().unwrap().sequence;

    // Second run resumes from it.
    let resumed = TaskJob {
        resume_from: Some(persisted),
        ..first
    };
    let start = Instant::now();
    let (outcome, recorder) = run(&executor, resumed).await;
    assert_eq!(outcome, TaskOutcome::Completed);
    let calls: Vec<String> = fleet
        .call_log(seen)
        .iter()
        .map(|e| e.call.clone())
        .collect();
    assert!(!calls.iter().any(|c| c == "power_control"), "{calls:?}");
    assert!(!calls.iter().any(|c| c == "firmware_start"), "{calls:?}");
    // Only reads: the update's status, and the installed versions (before,
    // to skip components already at 3.0.0, and after, as the proof).
    assert!(
        calls
            .iter()
            .all(|c| c == "firmware_status" || c == "firmware_inventory"),
        "{calls:?}"
    );
    // The update kept its original schedule: started at ~0.2 s, ends ~10.2 s.
    assert!(
        start.elapsed() <= Duration::from_secs(9),
        "{:?}",
        start.elapsed()
    );
    assert!(
        fleet
            .component_states(&[])
            .iter()
            .filter(|s| s.component_type == ComponentType::Compute)
            .all(|s| s.firmware_version == "3.0.0")
    );
    let report = recorder.last();
    assert!(
        report
            .stages
            .iter()
            .all(|s| s.status == ReportStatus::Completed)
    );
}

#[tokio::test(start_paused = true)]
async fn resume_restarts_firmware_that_never_started() {
    let (fleet, executor) = fleet(steady());
    let def = firmware_step(one_attempt());
    let targets = components(ComponentType::Compute, "c", 2);
    // A report persisted just as stage 1 started, before any firmware call.
    let mut persisted = Report::initial(&def, &BTreeMap::from([(ComponentType::Compute, 2)]));
    persisted.stages[0].start(Utc::now());
    persisted.stages[0].steps[0].start(Utc::now());
    let resumed = TaskJob {
        resume_from: Some(persisted),
        ..job(firmware("2.0.0"), def, targets)
    };
    let (outcome, _) = run(&executor, resumed).await;
    assert_eq!(outcome, TaskOutcome::Completed);
    let calls: Vec<String> = fleet.call_log(0).iter().map(|e| e.call.clone()).collect();
    assert_eq!(
        calls[..3],
        ["firmware_inventory", "firmware_status", "firmware_start"]
    );
}

/// A manager with power capabilities only (backed by the sim).
struct PowerOnly(Arc<SimFleet>);

impl ComponentManager for PowerOnly {
    fn name(&self) -> &str {
        "power-only"
    }
    fn as_power_control(&self) -> Option<&dyn PowerControl> {
        Some(self.0.as_ref())
    }
    fn as_power_status(&self) -> Option<&dyn PowerStatus> {
        Some(self.0.as_ref())
    }
}

#[tokio::test(start_paused = true)]
async fn capability_check_fails_before_any_call() {
    let fleet = SimFleet::new(SimConfig::instant());
    let mut registry = ManagerRegistry::for_all_types(fleet.clone());
    registry.register(ComponentType::NvSwitch, Arc::new(PowerOnly(fleet.clone())));
    let executor = LocalExecutor::new(Arc::new(registry), ExecutorConfig::default());
    let def = definition(json!([
        { "component_type": "Compute", "stage": 1, "main_operation": { "name": "PowerControl",
          "parameters": { "operation": "power_on" } } },
        { "component_type": "NVSwitch", "stage": 2, "main_operation": { "name": "FirmwareControl" } },
    ]));
    let mut targets = components(ComponentType::Compute, "c", 1);
    targets.extend(components(ComponentType::NvSwitch, "n", 1));
    let message = "component manager for NVSwitch lacks capability FirmwareControl";
    assert_eq!(executor.check(&def, &targets).unwrap_err(), message);
    let (outcome, recorder) = run(&executor, job(firmware("2.0.0"), def.clone(), targets)).await;
    assert_eq!(outcome, TaskOutcome::Failed(message.to_string()));
    assert!(fleet.call_log(0).is_empty());
    assert_eq!(recorder.last().error.as_deref(), Some(message));

    // Untargeted types are not checked: their steps are skipped.
    let computes = components(ComponentType::Compute, "c", 1);
    assert!(executor.check(&def, &computes).is_ok());
    let (outcome, recorder) = run(&executor, job(firmware("2.0.0"), def, computes)).await;
    assert_eq!(outcome, TaskOutcome::Completed);
    let report = recorder.last();
    assert_eq!(report.stages[1].status, ReportStatus::Skipped);
    assert_eq!(report.stages[1].steps[0].status, ReportStatus::Skipped);

    // Unknown actions are refused before dispatch as well.
    let bad = definition(json!([
        { "component_type": "Compute", "stage": 1, "main_operation": { "name": "Reboot" } },
    ]));
    assert_eq!(
        executor
            .check(&bad, &components(ComponentType::Compute, "c", 1))
            .unwrap_err(),
        "stage 1 component type Compute: unknown action: Reboot"
    );
}

#[tokio::test(start_paused = true)]
async fn empty_definition_fails() {
    let (_fleet, executor) = fleet(SimConfig::instant());
    let (outcome, _) = run(
        &executor,
        job(
            power("power_on"),
            definition(json!([])),
            components(ComponentType::Compute, "c", 1),
        ),
    )
    .await;
    assert_eq!(outcome, TaskOutcome::Failed(NO_STEPS.to_string()));
}

#[tokio::test(start_paused = true)]
async fn verify_reachability_lists_unreachable_types() {
    let (fleet, executor) = fleet(steady());
    fleet.set_faults(vec![SimFault {
        component_type: Some(ComponentType::NvSwitch),
        operation: FaultOperation::Power,
        ..SimFault::default()
    }]);
    let def = definition(json!([
        { "component_type": "Compute", "stage": 1, "retry": one_attempt(),
          "main_operation": { "name": "VerifyReachability", "timeout": "10s", "poll_interval": "2s",
                              "parameters": { "component_types": ["compute", "nvswitch", "cdu"] } } },
    ]));
    let mut targets = components(ComponentType::Compute, "c", 2);
    targets.extend(components(ComponentType::NvSwitch, "n", 1));
    let (outcome, _) = run(&executor, job(power("power_on"), def, targets)).await;
    assert_eq!(
        outcome,
        TaskOutcome::Failed(
            "stage 1 failed: component type Compute failed: \
             timeout after 10s waiting for reachability of component types: [NVSwitch]"
                .to_string()
        )
    );
    // Compute became reachable in the first round and was not polled again.
    let compute_reads = fleet
        .call_log(0)
        .iter()
        .filter(|e| e.component_type == ComponentType::Compute)
        .count();
    assert_eq!(compute_reads, 1);
}

#[tokio::test(start_paused = true)]
async fn step_timeout_bounds_each_attempt() {
    let (fleet, executor) = fleet(steady());
    fleet.set_faults(vec![SimFault {
        effect: FaultEffect::Hang,
        ..SimFault::default()
    }]);
    let def = definition(json!([
        { "component_type": "Compute", "stage": 1, "timeout": "2s",
          "retry": { "max_attempts": 2, "initial_interval": "1s" },
          "main_operation": { "name": "PowerControl" } },
    ]));
    let start = Instant::now();
    let (outcome, _) = run(
        &executor,
        job(
            power("power_on"),
            def,
            components(ComponentType::Compute, "c", 1),
        ),
    )
    .await;
    assert_eq!(
        outcome,
        TaskOutcome::Failed(
            "stage 1 failed: component type Compute failed: Compute step timed out after 2s"
                .to_string()
        )
    );
    assert_eq!(start.elapsed(), Duration::from_secs(5));
}

#[test]
fn run_future_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let (_fleet, executor) = fleet(SimConfig::instant());
    let future = executor.run(
        job(power("power_on"), definition(json!([])), Vec::new()),
        Arc::new(Recorder::default()),
        CancellationToken::new(),
    );
    assert_send(&future);
}

/// The built-in upgrade rule polls firmware every 2 minutes; a provider that
/// pushes change notifications (the sim) must end each stage as soon as the
/// update finishes, not at the next poll.
#[tokio::test(start_paused = true)]
async fn firmware_completion_wakes_the_poller_before_its_interval() {
    let (_fleet, executor) = fleet(steady());
    let definition = rackflow_domain::rule::builtin_rule(
        rackflow_domain::task::TaskType::FirmwareControl,
        "upgrade",
    );
    let mut targets = components(ComponentType::Compute, "c", 2);
    targets.extend(components(ComponentType::NvSwitch, "s", 1));
    let started = tokio::time::Instant::now();
    let (outcome, _) = run(&executor, job(firmware("2.0.0"), definition, targets)).await;
    assert_eq!(outcome, TaskOutcome::Completed);
    // Two stages of one 2 s update each, plus call latencies: far below
    // even one 2-minute poll interval.
    let elapsed = started.elapsed();
    assert!(
        elapsed < std::time::Duration::from_secs(5),
        "took {elapsed:?}: the poller waited for its interval"
    );
}

/// A readiness source whose held-back components tests change while a task
/// waits; counts the checks.
#[derive(Default)]
struct Held {
    ids: Mutex<Vec<Uuid>>,
    checks: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl Readiness for Held {
    async fn holding(
        &self,
        components: &[Uuid],
        _operation: GatedOperation,
    ) -> Result<Vec<Uuid>, String> {
        self.checks
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let held = self.ids.lock().unwrap();
        Ok(components
            .iter()
            .filter(|id| held.contains(id))
            .copied()
            .collect())
    }
}

fn gated_fleet(held: &Arc<Held>) -> (Arc<SimFleet>, LocalExecutor) {
    let fleet = SimFleet::new(steady());
    let config = ExecutorConfig {
        readiness_timeout: Duration::from_secs(60),
        readiness_poll: Duration::from_secs(5),
        ..ExecutorConfig::default()
    };
    let executor = LocalExecutor::new(Arc::new(fleet.registry()), config)
        .with_readiness(Some(held.clone() as Arc<dyn Readiness>));
    (fleet, executor)
}

fn power_step() -> RuleDefinition {
    definition(json!([
        { "component_type": "Compute", "stage": 1, "main_operation": { "name": "PowerControl" },
          "retry": one_attempt() },
    ]))
}

#[tokio::test(start_paused = true)]
async fn the_readiness_gate_waits_for_in_service_components_to_be_released() {
    let held = Arc::new(Held::default());
    let (fleet, executor) = gated_fleet(&held);
    let targets = components(ComponentType::Compute, "c", 3);
    *held.ids.lock().unwrap() = vec![targets[1].id];
    let recorder = Arc::new(Recorder::default());
    let task = {
        let executor = executor.clone();
        let recorder = recorder.clone();
        let job = job(power("power_off"), power_step(), targets.clone());
        tokio::spawn(async move { executor.run(job, recorder, CancellationToken::new()).await })
    };
    tokio::time::sleep(Duration::from_secs(12)).await;
    // Nothing was powered while c-1 is in service; the step says why.
    assert!(fleet.call_log(0).is_empty(), "{:?}", fleet.call_log(0));
    let waiting = recorder.last().stages[0].steps[0].waiting_for.clone();
    assert_eq!(
        waiting.as_deref(),
        Some("readiness: 1 component held back from power control (in service): c-1")
    );
    held.ids.lock().unwrap().clear();
    let outcome = task.await.unwrap();
    assert_eq!(outcome, TaskOutcome::Completed);
    assert_eq!(fleet.call_log(0).len(), 1);
    let report = recorder.last();
    assert_eq!(report.stages[0].steps[0].waiting_for, None);
    // Asked at 0 s, 5 s, 10 s (held) and 15 s (released).
    assert_eq!(held.checks.load(std::sync::atomic::Ordering::SeqCst), 4);
}

#[tokio::test(start_paused = true)]
async fn the_readiness_gate_fails_the_task_naming_the_components_after_its_timeout() {
    let held = Arc::new(Held::default());
    let (fleet, executor) = gated_fleet(&held);
    let targets = components(ComponentType::Compute, "c", 7);
    *held.ids.lock().unwrap() = targets.iter().map(|c| c.id).collect();
    let started = Instant::now();
    let (outcome, _) = run(
        &executor,
        job(firmware("2.0"), firmware_step(one_attempt()), targets),
    )
    .await;
    assert_eq!(started.elapsed(), Duration::from_secs(60));
    assert_eq!(
        outcome,
        TaskOutcome::Failed(
            "stage 1 failed: component type Compute failed: readiness check timed out after \
             1m0s: 7 components are not ready for firmware control: c-0, c-1, c-2, c-3, c-4 \
             and 2 more"
                .to_string()
        )
    );
    assert!(fleet.call_log(0).is_empty(), "nothing may be flashed");
}

#[tokio::test(start_paused = true)]
async fn override_readiness_check_skips_the_gate() {
    let held = Arc::new(Held::default());
    let (fleet, executor) = gated_fleet(&held);
    let targets = components(ComponentType::Compute, "c", 2);
    *held.ids.lock().unwrap() = targets.iter().map(|c| c.id).collect();
    let mut info = power("power_on");
    info.override_readiness_check = true;
    let started = Instant::now();
    let (outcome, _) = run(&executor, job(info, power_step(), targets)).await;
    assert_eq!(outcome, TaskOutcome::Completed);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(held.checks.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(fleet.call_log(0).len(), 1);
}
