//! Task schedules through the real gRPC API, on SQLite and PostgreSQL
//! (spec flow-core §1.6, §6): kinds and next runs, the dispatcher firing
//! on time with the overlap policies, one-time schedules firing once, pause
//! and resume, scopes and conflicts, catch-up after a restart, and two
//! replicas on one PostgreSQL database firing every occurrence exactly once.
//!
//! Servers drive the simulated fleet with short latencies; a task is held
//! running with a `hang` fault on the rack's power shelf. Schedules use
//! intervals of a second and one-time instants a second or two ahead, and
//! the schedule loop polls every 200 ms as a safety net (it otherwise
//! sleeps until the next due time).

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

use rackflow_testkit as common;
use rackflow_testkit::both_stores;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::{
    Backend, TestServer, attach_fixture_racks, create_nvl_domain, fixture_fleet, fixture_id,
    nvl_domain_target, uuid,
};
use rackflow_api::sim::v1 as simpb;
use rackflow_api::sim::v1::sim_admin_client::SimAdminClient;
use rackflow_api::v1 as pb;
use rackflow_api::v1::flow_client::FlowClient;
use rackflow_engine::sim::SimConfig;
use rackflow_server::Config;
use rackflow_testkit::changes::Changes;
use rackflow_testkit::db::TestDatabase;
use rackflow_testkit::flow::Replica;
use tonic::Code;
use tonic::transport::Channel;
use uuid::Uuid;

both_stores!(
    interval_fires_every_occurrence_with_description_and_last_task,
    one_time_fires_exactly_once_then_is_spent,
    overlap_skip_holds_back_while_queue_piles_up,
    pause_and_resume_recompute_the_next_run,
    cron_next_run_and_preview_fields,
    validation_errors_and_codes,
    scopes_merge_reconcile_and_never_empty,
    conflict_check_is_by_rack_and_type,
    trigger_fires_now_even_when_paused,
    restart_after_a_missed_window_fires_once_without_replay,
    restart_within_a_catchup_window_coalesces,
    domain_scopes_are_the_members_at_creation,
);

/// Replicas share a PostgreSQL database; SQLite admits one process (its
/// file is locked at open: `crates/store/tests/store.rs`).
mod postgres_replicas {
    #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_replicas_fire_each_occurrence_exactly_once() {
        super::two_replicas_fire_each_occurrence_exactly_once(super::common::Backend::Postgres)
            .await;
    }
}

type Client = FlowClient<Channel>;

const DEADLINE: Duration = Duration::from_secs(30);

fn config() -> Config {
    let mut config = Config {
        sim: SimConfig {
            power_ms: 20,
            firmware_update_ms: 50,
            jitter: 0.0,
            ..SimConfig::default()
        },
        ..Config::default()
    };
    config.dispatcher.enabled = false;
    config.schedules.poll_interval_ms = 200;
    config
}

async fn start(backend: Backend) -> Option<TestServer> {
    let mut server = TestServer::start_with(backend, config()).await?;
    fixture_fleet(&mut server.client, 3).await;
    Some(server)
}

fn racks_spec(targets: Vec<pb::RackTarget>) -> pb::OperationTargetSpec {
    pb::OperationTargetSpec {
        targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
            targets,
        })),
    }
}

fn rack(n: u32, types: &[pb::ComponentType]) -> pb::RackTarget {
    pb::RackTarget {
        identifier: Some(pb::rack_target::Identifier::Id(uuid(fixture_id(n)))),
        component_types: types.iter().map(|t| *t as i32).collect(),
    }
}

fn whole(racks: &[u32]) -> pb::OperationTargetSpec {
    racks_spec(racks.iter().map(|n| rack(*n, &[])).collect())
}

fn power_on(spec: pb::OperationTargetSpec) -> pb::ScheduledOperation {
    pb::ScheduledOperation {
        operation: Some(pb::scheduled_operation::Operation::PowerOn(
            pb::PowerOnRackRequest {
                target_spec: Some(spec),
                description: "ignored".into(),
                ..Default::default()
            },
        )),
    }
}

fn spec(kind: pb::ScheduleSpecType, text: &str, tz: &str) -> pb::ScheduleSpec {
    pb::ScheduleSpec {
        r#type: kind as i32,
        spec: text.into(),
        timezone: tz.into(),
    }
}

fn create_req(
    name: &str,
    spec: pb::ScheduleSpec,
    overlap: pb::OverlapPolicy,
    operation: pb::ScheduledOperation,
) -> pb::CreateTaskScheduleRequest {
    pb::CreateTaskScheduleRequest {
        schedule: Some(pb::ScheduleConfig {
            name: name.into(),
            spec: Some(spec),
            overlap_policy: overlap as i32,
            catchup_window: None,
        }),
        operation: Some(operation),
    }
}

async fn create(client: &mut Client, req: pb::CreateTaskScheduleRequest) -> pb::TaskSchedule {
    client
        .create_task_schedule(req)
        .await
        .expect("create schedule")
        .into_inner()
}

async fn get(client: &mut Client, id: &pb::Uuid) -> pb::TaskSchedule {
    client
        .get_task_schedule(pb::GetTaskScheduleRequest {
            id: Some(id.clone()),
        })
        .await
        .expect("get schedule")
        .into_inner()
}

async fn pause(client: &mut Client, id: &pb::Uuid) -> pb::TaskSchedule {
    client
        .pause_task_schedule(pb::PauseTaskScheduleRequest {
            id: Some(id.clone()),
        })
        .await
        .expect("pause")
        .into_inner()
}

async fn rack_tasks(client: &mut Client, n: u32) -> Vec<pb::Task> {
    client
        .list_tasks(pb::ListTasksRequest {
            rack_id: Some(uuid(fixture_id(n))),
            pagination: Some(pb::Pagination {
                offset: 0,
                limit: 1000,
            }),
            ..Default::default()
        })
        .await
        .expect("list tasks")
        .into_inner()
        .tasks
}

/// Tasks of rack `n` a schedule named `name` submitted, oldest fire first,
/// with their fire times parsed back from the description.
async fn fired(client: &mut Client, n: u32, name: &str) -> Vec<(DateTime<Utc>, pb::Task)> {
    let prefix = format!("{name} — ");
    let mut out: Vec<(DateTime<Utc>, pb::Task)> = rack_tasks(client, n)
        .await
        .into_iter()
        .filter_map(|t| {
            let at = t.description.strip_prefix(&prefix)?;
            let at = DateTime::parse_from_rfc3339(at)
                .unwrap_or_else(|e| panic!("fire time of {:?}: {e}", t.description))
                .with_timezone(&Utc);
            Some((at, t))
        })
        .collect();
    out.sort_by_key(|(at, _)| *at);
    out
}

/// Waits (re-reading on each store write) until schedule `name` fired
/// `count` tasks on rack `n`.
async fn wait_fired(
    client: &mut Client,
    changes: &Changes,
    n: u32,
    name: &str,
    count: usize,
) -> Vec<(DateTime<Utc>, pb::Task)> {
    let mut waiter = changes.waiter(
        format!("schedule {name} to fire {count} tasks on rack {n}"),
        DEADLINE,
    );
    loop {
        let got = fired(client, n, name).await;
        if got.len() >= count {
            return got;
        }
        waiter.next(format!("{} fired", got.len())).await;
    }
}

/// Waits (re-reading on each store write) until `done` holds for the
/// schedule.
async fn wait_schedule(
    client: &mut Client,
    changes: &Changes,
    id: &pb::Uuid,
    what: &str,
    done: impl Fn(&pb::TaskSchedule) -> bool,
) -> pb::TaskSchedule {
    let mut waiter = changes.waiter(format!("the schedule to be {what}"), DEADLINE);
    loop {
        let s = get(client, id).await;
        if done(&s) {
            return s;
        }
        waiter.next(&s).await;
    }
}

fn ts(t: &Option<prost_types::Timestamp>) -> Option<DateTime<Utc>> {
    t.as_ref()
        .and_then(|t| DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).ok()?))
}

fn id_of(s: &pb::TaskSchedule) -> pb::Uuid {
    s.id.clone().expect("schedule id")
}

/// Holds every power call on these racks' power shelves (replaces the
/// whole fault plan).
async fn hang_power(server: &TestServer, racks: &[u32]) {
    let mut sim = SimAdminClient::connect(format!("http://{}", server.addr))
        .await
        .expect("connect SimAdmin");
    sim.set_faults(simpb::SetFaultsRequest {
        faults: racks
            .iter()
            .map(|rack| simpb::Fault {
                rack: format!("r-{rack:04}"),
                component_type: "PowerShelf".into(),
                component: String::new(),
                operation: "power".into(),
                effect: "hang".into(),
            })
            .collect(),
    })
    .await
    .expect("set faults");
}

// ---- firing ------------------------------------------------------------------

async fn interval_fires_every_occurrence_with_description_and_last_task(backend: Backend) {
    let Some(mut server) = start(backend).await else {
        return;
    };
    let changes = server.changes().clone();
    let c = &mut server.client;
    let created_at = Utc::now();
    let s = create(
        c,
        create_req(
            "every-second",
            spec(pb::ScheduleSpecType::Interval, "1s", "Europe/Paris"),
            pb::OverlapPolicy::Unspecified,
            power_on(whole(&[1, 2])),
        ),
    )
    .await;
    assert!(s.enabled);
    assert_eq!(
        s.overlap_policy,
        pb::OverlapPolicy::Skip as i32,
        "unspecified → skip"
    );
    assert_eq!(
        s.spec.as_ref().expect("spec").timezone,
        "",
        "zone cleared for intervals"
    );
    assert_eq!(s.operation_type, "POWER_ON");
    assert_eq!(s.description, "Power On");
    let first = ts(&s.next_run_at).expect("next run");
    let lag = first - created_at;
    assert!(
        lag > chrono::TimeDelta::milliseconds(900) && lag < chrono::TimeDelta::milliseconds(1500),
        "first run is now + 1s, was {lag}"
    );

    let on_rack1 = wait_fired(c, &changes, 1, "every-second", 3).await;
    let s = pause(c, &id_of(&s)).await;
    assert!(!s.enabled);
    // Fire times sit on the schedule's 1 s grid from the first run.
    let times: Vec<DateTime<Utc>> = on_rack1.iter().map(|(at, _)| *at).collect();
    for w in times.windows(2) {
        assert_eq!(
            (w[1] - w[0]).num_seconds(),
            1,
            "consecutive occurrences: {times:?}"
        );
    }
    assert_eq!(times[0].timestamp(), first.timestamp());
    // Firing lag: the loop sleeps until the due time, so each task is
    // created within a fraction of a second of its occurrence.
    let lags: Vec<i64> = on_rack1
        .iter()
        .enumerate()
        .map(|(k, (_, t))| {
            let due = first + chrono::TimeDelta::seconds(k as i64);
            (ts(&t.created_at).expect("created_at") - due).num_milliseconds()
        })
        .collect();
    eprintln!("measured firing lag (ms) per occurrence: {lags:?}");
    assert!(
        lags.iter().all(|l| (0..500).contains(l)),
        "firing lag: {lags:?}"
    );
    // One task per scope per occurrence: rack 2 gets the same fire times.
    // An occurrence's scopes are submitted one after another, and one
    // claimed before the pause still completes, so compare once both racks
    // have caught up (or fail at the deadline with what each has).
    let fire_times = |tasks: Vec<(DateTime<Utc>, pb::Task)>| -> BTreeSet<DateTime<Utc>> {
        tasks.into_iter().map(|(at, _)| at).collect()
    };
    let mut waiter = changes.waiter("rack 2 to have rack 1's fire times", DEADLINE);
    let (on_rack1, on_rack2) = loop {
        let on_rack1 = fire_times(fired(c, 1, "every-second").await);
        let on_rack2 = fire_times(fired(c, 2, "every-second").await);
        if on_rack1 == on_rack2 {
            break (on_rack1, on_rack2);
        }
        waiter.next((&on_rack1, &on_rack2)).await;
    };
    assert_eq!(on_rack1, on_rack2);
    assert!(
        times.iter().all(|at| on_rack1.contains(at)),
        "{times:?} vs {on_rack1:?}"
    );
    assert!(s.last_run_at.is_some());
    assert_eq!(s.skipped_count, 0, "{}", s.last_skip_reason);
    // Each scope records its latest task (written after the occurrence's
    // submissions, so allow it the same catch-up).
    let mut waiter = changes.waiter("rack 1's scope to record its latest task", DEADLINE);
    loop {
        let scopes = c
            .list_task_schedule_scopes(pb::ListTaskScheduleScopesRequest {
                schedule_id: s.id.clone(),
            })
            .await
            .expect("scopes")
            .into_inner()
            .scopes;
        assert_eq!(scopes.len(), 2);
        let latest = fired(c, 1, "every-second").await;
        let latest_id = latest.last().expect("a task").1.id.clone();
        let scope1 = scopes
            .iter()
            .find(|sc| sc.rack_id == Some(uuid(fixture_id(1))))
            .expect("rack 1 scope");
        if scope1.last_task_id == latest_id {
            break;
        }
        waiter.next((&scope1.last_task_id, &latest_id)).await;
    }
    server.stop().await;
}

async fn one_time_fires_exactly_once_then_is_spent(backend: Backend) {
    let Some(mut server) = start(backend).await else {
        return;
    };
    let changes = server.changes().clone();
    let c = &mut server.client;
    let at = Utc::now() + chrono::TimeDelta::milliseconds(1500);
    let at_text = at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let s = create(
        c,
        create_req(
            "once",
            spec(pb::ScheduleSpecType::OneTime, &at_text, ""),
            pb::OverlapPolicy::Skip,
            power_on(whole(&[1])),
        ),
    )
    .await;
    assert_eq!(
        ts(&s.next_run_at).map(|t| t.timestamp_millis()),
        Some(at.timestamp_millis())
    );
    let done = wait_schedule(c, &changes, &id_of(&s), "spent", |s| !s.enabled).await;
    assert_eq!(done.next_run_at, None);
    assert!(done.last_run_at.is_some());
    let runs = wait_fired(c, &changes, 1, "once", 1).await;
    let fired_at = Utc::now();
    assert!(fired_at >= at, "fired before its instant");
    // Scenario, not polling: give any duplicate firing time to show up
    // (the absence of a second firing is no event to wait for).
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        fired(c, 1, "once").await.len(),
        1,
        "one-time fires once: {runs:?}"
    );
    // A spent one-time schedule cannot be paused, resumed or triggered.
    for code in [
        c.pause_task_schedule(pb::PauseTaskScheduleRequest { id: s.id.clone() })
            .await
            .map(|_| ())
            .unwrap_err()
            .code(),
        c.resume_task_schedule(pb::ResumeTaskScheduleRequest { id: s.id.clone() })
            .await
            .map(|_| ())
            .unwrap_err()
            .code(),
        c.trigger_task_schedule(pb::TriggerTaskScheduleRequest { id: s.id.clone() })
            .await
            .map(|_| ())
            .unwrap_err()
            .code(),
    ] {
        assert_eq!(code, Code::FailedPrecondition);
    }
    server.stop().await;
}

async fn overlap_skip_holds_back_while_queue_piles_up(backend: Backend) {
    let mut config = config();
    let metrics = rackflow_testkit::metrics::enable(&mut config);
    let Some(mut server) = TestServer::start_with(backend, config).await else {
        return;
    };
    fixture_fleet(&mut server.client, 3).await;
    hang_power(&server, &[1, 2]).await;
    let changes = server.changes().clone();
    let c = &mut server.client;
    let skip = create(
        c,
        create_req(
            "skipper",
            spec(pb::ScheduleSpecType::Interval, "1s", ""),
            pb::OverlapPolicy::Skip,
            power_on(whole(&[1])),
        ),
    )
    .await;
    let queue = create(
        c,
        create_req(
            "queuer",
            spec(pb::ScheduleSpecType::Interval, "1s", ""),
            pb::OverlapPolicy::Queue,
            power_on(whole(&[2])),
        ),
    )
    .await;
    // The queue schedule piles up waiting tasks behind the hung one.
    let queued = wait_fired(c, &changes, 2, "queuer", 3).await;
    let skipped = wait_schedule(c, &changes, &id_of(&skip), "skipping", |s| {
        s.skipped_count >= 2
    })
    .await;
    pause(c, &id_of(&skip)).await;
    pause(c, &id_of(&queue)).await;
    let statuses: Vec<i32> = queued.iter().map(|(_, t)| t.status).collect();
    assert_eq!(statuses[0], pb::TaskStatus::Running as i32, "{statuses:?}");
    assert!(
        statuses[1..]
            .iter()
            .all(|s| *s == pb::TaskStatus::Waiting as i32),
        "later occurrences queue behind the running task: {statuses:?}"
    );
    // The skip schedule never started a second task while the first runs.
    let on_rack1 = fired(c, 1, "skipper").await;
    assert_eq!(on_rack1.len(), 1, "{on_rack1:?}");
    assert_eq!(on_rack1[0].1.status, pb::TaskStatus::Running as i32);
    assert!(
        skipped.last_skip_reason.contains("still active"),
        "{}",
        skipped.last_skip_reason
    );
    assert!(skipped.last_run_at.is_some());
    // The same story in the metrics: automatic firings, the overlap skips,
    // the queue behind the hung task.
    let scrape = rackflow_testkit::metrics::scrape(metrics).await;
    let firings = scrape.value("rackflow_schedule_firings", &[("trigger", "automatic")]);
    assert!(firings >= 4.0, "{scrape:?}");
    let skips = scrape.value(
        "rackflow_schedule_skipped_occurrences",
        &[("reason", "overlap")],
    );
    assert!(skips >= skipped.skipped_count as f64, "{scrape:?}");
    let waiting = scrape.value("rackflow_task_queue_waiting", &[]);
    assert!(waiting >= 2.0, "{scrape:?}");
    assert_eq!(
        scrape.value(
            "rackflow_tasks",
            &[("task_type", "power_control"), ("status", "waiting")]
        ),
        waiting
    );
    assert_eq!(
        scrape.value("rackflow_schedule_firings", &[("trigger", "manual")]),
        0.0
    );
    server.stop().await;
}

async fn pause_and_resume_recompute_the_next_run(backend: Backend) {
    let Some(mut server) = start(backend).await else {
        return;
    };
    let changes = server.changes().clone();
    let c = &mut server.client;
    let s = create(
        c,
        create_req(
            "hourly",
            spec(pb::ScheduleSpecType::Interval, "1h", ""),
            pb::OverlapPolicy::Skip,
            power_on(whole(&[1])),
        ),
    )
    .await;
    let first = ts(&s.next_run_at).expect("next");
    let paused = pause(c, &id_of(&s)).await;
    assert!(!paused.enabled);
    // Pausing twice is a no-op.
    let again = pause(c, &id_of(&s)).await;
    assert_eq!(again.updated_at, paused.updated_at);
    // Scenario, not polling: wall time must pass so that the next run
    // recomputed at resume differs from the one computed at create (the
    // server runs on the system clock).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before_resume = Utc::now();
    let resumed = c
        .resume_task_schedule(pb::ResumeTaskScheduleRequest { id: s.id.clone() })
        .await
        .expect("resume")
        .into_inner();
    assert!(resumed.enabled);
    let next = ts(&resumed.next_run_at).expect("next");
    assert!(
        next > first,
        "recomputed from the resume time: {first} → {next}"
    );
    assert!(
        next >= before_resume + chrono::TimeDelta::hours(1) - chrono::TimeDelta::milliseconds(50)
    );
    // Resuming an enabled schedule changes nothing.
    let again = c
        .resume_task_schedule(pb::ResumeTaskScheduleRequest { id: s.id.clone() })
        .await
        .expect("resume")
        .into_inner();
    assert_eq!(again.next_run_at, resumed.next_run_at);

    // A paused 1 s schedule does not fire; resumed, it does.
    let fast = create(
        c,
        create_req(
            "fast",
            spec(pb::ScheduleSpecType::Interval, "1s", ""),
            pb::OverlapPolicy::Skip,
            power_on(whole(&[2])),
        ),
    )
    .await;
    pause(c, &id_of(&fast)).await;
    // Scenario, not polling: a paused 1 s schedule must stay silent while
    // more than one of its due times passes (the absence of a firing is no
    // event to wait for).
    tokio::time::sleep(Duration::from_millis(1600)).await;
    assert!(
        fired(c, 2, "fast").await.is_empty(),
        "a paused schedule fired"
    );
    c.resume_task_schedule(pb::ResumeTaskScheduleRequest {
        id: fast.id.clone(),
    })
    .await
    .expect("resume");
    wait_fired(c, &changes, 2, "fast", 1).await;
    pause(c, &id_of(&fast)).await;
    server.stop().await;
}

async fn cron_next_run_and_preview_fields(backend: Backend) {
    let Some(mut server) = start(backend).await else {
        return;
    };
    let c = &mut server.client;
    let s = create(
        c,
        create_req(
            "nightly",
            spec(pb::ScheduleSpecType::Cron, "30 2 * * *", "America/New_York"),
            pb::OverlapPolicy::Queue,
            pb::ScheduledOperation {
                operation: Some(pb::scheduled_operation::Operation::PowerOff(
                    pb::PowerOffRackRequest {
                        target_spec: Some(whole(&[1])),
                        forced: true,
                        ..Default::default()
                    },
                )),
            },
        ),
    )
    .await;
    assert_eq!(s.operation_type, "POWER_OFF");
    assert_eq!(s.description, "Power Off (forced)");
    let next = ts(&s.next_run_at).expect("next");
    let local = next.with_timezone(&chrono_tz::America::New_York);
    use chrono::Timelike;
    // 02:30 local, or 03:00 on a spring-forward day.
    assert!(
        (local.hour(), local.minute()) == (2, 30) || (local.hour(), local.minute()) == (3, 0),
        "{local}"
    );
    assert!(next > Utc::now() && next <= Utc::now() + chrono::TimeDelta::hours(25));
    // Changing only the zone recomputes a cron schedule's next run.
    let updated = c
        .update_task_schedule(pb::UpdateTaskScheduleRequest {
            id: s.id.clone(),
            schedule: Some(pb::ScheduleConfig {
                spec: Some(spec(pb::ScheduleSpecType::Unspecified, "", "Asia/Tokyo")),
                ..Default::default()
            }),
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["schedule.spec.timezone".into()],
            }),
        })
        .await
        .expect("update zone")
        .into_inner();
    let spec_now = updated.spec.expect("spec");
    assert_eq!(
        (spec_now.spec.as_str(), spec_now.timezone.as_str()),
        ("30 2 * * *", "Asia/Tokyo")
    );
    let next = ts(&updated.next_run_at).expect("next");
    let local = next.with_timezone(&chrono_tz::Asia::Tokyo);
    assert_eq!((local.hour(), local.minute()), (2, 30));
    // Change the spec and the catch-up window.
    let updated = c
        .update_task_schedule(pb::UpdateTaskScheduleRequest {
            id: s.id.clone(),
            schedule: Some(pb::ScheduleConfig {
                spec: Some(spec(pb::ScheduleSpecType::Cron, "@hourly", "")),
                catchup_window: Some(prost_types::Duration {
                    seconds: 600,
                    nanos: 0,
                }),
                ..Default::default()
            }),
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["schedule.spec".into(), "schedule.catchup_window".into()],
            }),
        })
        .await
        .expect("update spec")
        .into_inner();
    assert_eq!(updated.spec.as_ref().expect("spec").timezone, "UTC");
    let next = ts(&updated.next_run_at).expect("next");
    assert_eq!((next.minute(), next.second()), (0, 0));
    assert_eq!(updated.catchup_window.map(|d| d.seconds), Some(600));
    server.stop().await;
}

async fn validation_errors_and_codes(backend: Backend) {
    let Some(mut server) = start(backend).await else {
        return;
    };
    let c = &mut server.client;
    let ok = || {
        create_req(
            "dup",
            spec(pb::ScheduleSpecType::Interval, "1h", ""),
            pb::OverlapPolicy::Skip,
            power_on(whole(&[1])),
        )
    };
    let s = create(c, ok()).await;
    let code = |r: Result<tonic::Response<pb::TaskSchedule>, tonic::Status>| {
        r.map(|_| ()).unwrap_err().code()
    };
    assert_eq!(
        code(c.create_task_schedule(ok()).await),
        Code::AlreadyExists
    );
    let bad = |kind: pb::ScheduleSpecType, text: &str, tz: &str| {
        let mut r = ok();
        r.schedule.as_mut().expect("config").name = "other".into();
        r.schedule.as_mut().expect("config").spec = Some(spec(kind, text, tz));
        r
    };
    for (kind, text, tz) in [
        (pb::ScheduleSpecType::Interval, "0s", ""),
        (pb::ScheduleSpecType::Interval, "-1s", ""),
        (pb::ScheduleSpecType::Interval, "soon", ""),
        (pb::ScheduleSpecType::Cron, "0 0 3 * * *", ""),
        (pb::ScheduleSpecType::Cron, "@daily", "Nowhere/Land"),
        (pb::ScheduleSpecType::OneTime, "tomorrow", ""),
        (pb::ScheduleSpecType::Unspecified, "1s", ""),
    ] {
        assert_eq!(
            code(c.create_task_schedule(bad(kind, text, tz)).await),
            Code::InvalidArgument,
            "{kind:?} {text} {tz}"
        );
    }
    let mut no_op = ok();
    no_op.operation = None;
    assert_eq!(
        code(c.create_task_schedule(no_op).await),
        Code::InvalidArgument
    );
    let mut unknown_rack = ok();
    unknown_rack.schedule.as_mut().expect("config").name = "ghost".into();
    unknown_rack.operation = Some(power_on(racks_spec(vec![pb::RackTarget {
        identifier: Some(pb::rack_target::Identifier::Id(uuid(Uuid::new_v4()))),
        component_types: vec![],
    }])));
    assert_eq!(
        code(c.create_task_schedule(unknown_rack).await),
        Code::NotFound
    );
    let mut dup_rack = ok();
    dup_rack.schedule.as_mut().expect("config").name = "twice".into();
    dup_rack.operation = Some(power_on(whole(&[1, 1])));
    assert_eq!(
        code(c.create_task_schedule(dup_rack).await),
        Code::InvalidArgument
    );
    // Nothing of the refused requests was written.
    let all = c
        .list_task_schedules(pb::ListTaskSchedulesRequest::default())
        .await
        .expect("list")
        .into_inner();
    assert_eq!(all.total, 1);

    assert_eq!(
        code(
            c.get_task_schedule(pb::GetTaskScheduleRequest {
                id: Some(uuid(Uuid::new_v4()))
            })
            .await
        ),
        Code::NotFound
    );
    assert_eq!(
        code(
            c.get_task_schedule(pb::GetTaskScheduleRequest { id: None })
                .await
        ),
        Code::InvalidArgument
    );
    // Update: unknown mask path; a name in use.
    let other = create(
        c,
        create_req(
            "second",
            spec(pb::ScheduleSpecType::Interval, "1h", ""),
            pb::OverlapPolicy::Skip,
            power_on(whole(&[2])),
        ),
    )
    .await;
    let rename = |id: &pb::Uuid, name: &str, path: &str| pb::UpdateTaskScheduleRequest {
        id: Some(id.clone()),
        schedule: Some(pb::ScheduleConfig {
            name: name.into(),
            ..Default::default()
        }),
        update_mask: Some(prost_types::FieldMask {
            paths: vec![path.into()],
        }),
    };
    assert_eq!(
        code(
            c.update_task_schedule(rename(&id_of(&other), "x", "schedule.enabled"))
                .await
        ),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            c.update_task_schedule(rename(&id_of(&other), "dup", "schedule.name"))
                .await
        ),
        Code::AlreadyExists
    );
    let renamed = c
        .update_task_schedule(rename(&id_of(&other), "renamed", "schedule.name"))
        .await
        .expect("rename")
        .into_inner();
    assert_eq!(renamed.name, "renamed");
    // Delete, then it is gone.
    c.delete_task_schedule(pb::DeleteTaskScheduleRequest { id: s.id.clone() })
        .await
        .expect("delete");
    assert_eq!(
        c.delete_task_schedule(pb::DeleteTaskScheduleRequest { id: s.id.clone() })
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    server.stop().await;
}

// ---- scopes and conflicts -----------------------------------------------------------

async fn scopes_merge_reconcile_and_never_empty(backend: Backend) {
    let Some(mut server) = start(backend).await else {
        return;
    };
    let c = &mut server.client;
    let s = create(
        c,
        create_req(
            "scoped",
            spec(pb::ScheduleSpecType::Interval, "1h", ""),
            pb::OverlapPolicy::Skip,
            power_on(racks_spec(vec![rack(1, &[pb::ComponentType::Compute])])),
        ),
    )
    .await;
    let types_of = |scope: &pb::TaskScheduleScope| match &scope.component_filter {
        Some(pb::task_schedule_scope::ComponentFilter::Types(t)) => t.types.clone(),
        other => panic!("expected a types filter, got {other:?}"),
    };
    // Same kind merges.
    let added = c
        .add_task_schedule_scope(pb::AddTaskScheduleScopeRequest {
            schedule_id: s.id.clone(),
            target_spec: Some(racks_spec(vec![rack(1, &[pb::ComponentType::Nvswitch])])),
        })
        .await
        .expect("add")
        .into_inner()
        .scopes;
    assert_eq!(added.len(), 1);
    assert_eq!(
        types_of(&added[0]),
        vec![
            pb::ComponentType::Compute as i32,
            pb::ComponentType::Nvswitch as i32
        ]
    );
    // A component list cannot merge into a type filter.
    let components = c
        .get_components(pb::GetComponentsRequest {
            target_spec: Some(whole(&[1])),
            ..Default::default()
        })
        .await
        .expect("components")
        .into_inner()
        .components;
    let comp = components[0]
        .info
        .as_ref()
        .and_then(|i| i.id.clone())
        .expect("component id");
    let by_component = pb::OperationTargetSpec {
        targets: Some(pb::operation_target_spec::Targets::Components(
            pb::ComponentTargets {
                targets: vec![pb::ComponentTarget {
                    identifier: Some(pb::component_target::Identifier::Id(comp)),
                }],
            },
        )),
    };
    assert_eq!(
        c.add_task_schedule_scope(pb::AddTaskScheduleScopeRequest {
            schedule_id: s.id.clone(),
            target_spec: Some(by_component.clone()),
        })
        .await
        .unwrap_err()
        .code(),
        Code::InvalidArgument
    );
    // The whole rack absorbs the filter; a new rack adds a scope.
    let added = c
        .add_task_schedule_scope(pb::AddTaskScheduleScopeRequest {
            schedule_id: s.id.clone(),
            target_spec: Some(whole(&[1, 2])),
        })
        .await
        .expect("add")
        .into_inner()
        .scopes;
    assert_eq!(added.len(), 2);
    assert!(added.iter().all(|sc| sc.component_filter.is_none()));
    // Reconcile to racks 2 (typed) and 3.
    let done = c
        .update_task_schedule_scope(pb::UpdateTaskScheduleScopeRequest {
            schedule_id: s.id.clone(),
            desired_scope: Some(racks_spec(vec![
                rack(2, &[pb::ComponentType::Powershelf]),
                rack(3, &[]),
            ])),
        })
        .await
        .expect("reconcile")
        .into_inner();
    assert_eq!((done.added, done.removed, done.updated), (1, 1, 1));
    let racks: BTreeSet<String> = done
        .scopes
        .iter()
        .map(|sc| sc.rack_id.as_ref().expect("rack").id.clone())
        .collect();
    assert_eq!(
        racks,
        [fixture_id(2), fixture_id(3)]
            .iter()
            .map(|u| u.to_string())
            .collect()
    );
    // List by rack filter.
    let listed = c
        .list_task_schedules(pb::ListTaskSchedulesRequest {
            rack_id: Some(uuid(fixture_id(1))),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(listed.total, 0);
    let listed = c
        .list_task_schedules(pb::ListTaskSchedulesRequest {
            rack_id: Some(uuid(fixture_id(3))),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(listed.total, 1);
    // Remove one scope; the last one stays.
    let scope_ids: Vec<pb::Uuid> = done
        .scopes
        .iter()
        .map(|sc| sc.id.clone().expect("id"))
        .collect();
    c.remove_task_schedule_scope(pb::RemoveTaskScheduleScopeRequest {
        scope_id: Some(scope_ids[0].clone()),
    })
    .await
    .expect("remove");
    assert_eq!(
        c.remove_task_schedule_scope(pb::RemoveTaskScheduleScopeRequest {
            scope_id: Some(scope_ids[1].clone()),
        })
        .await
        .unwrap_err()
        .code(),
        Code::FailedPrecondition
    );
    assert_eq!(
        c.remove_task_schedule_scope(pb::RemoveTaskScheduleScopeRequest {
            scope_id: Some(scope_ids[0].clone()),
        })
        .await
        .unwrap_err()
        .code(),
        Code::NotFound
    );
    let left = c
        .list_task_schedule_scopes(pb::ListTaskScheduleScopesRequest {
            schedule_id: s.id.clone(),
        })
        .await
        .expect("scopes")
        .into_inner()
        .scopes;
    assert_eq!(left.len(), 1);
    server.stop().await;
}

async fn conflict_check_is_by_rack_and_type(backend: Backend) {
    let Some(mut server) = start(backend).await else {
        return;
    };
    let c = &mut server.client;
    let s = create(
        c,
        create_req(
            "power-1-2",
            spec(pb::ScheduleSpecType::Interval, "1h", ""),
            pb::OverlapPolicy::Skip,
            power_on(whole(&[1, 2])),
        ),
    )
    .await;
    let check =
        |op: pb::ScheduledOperation, exclude: Option<pb::Uuid>| pb::CheckScheduleConflictsRequest {
            operation: Some(op),
            exclude_schedule_id: exclude,
        };
    let hits = c
        .check_schedule_conflicts(check(power_on(whole(&[2, 3])), None))
        .await
        .expect("check")
        .into_inner()
        .conflicts;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].id, s.id);
    let none = c
        .check_schedule_conflicts(check(power_on(whole(&[3])), None))
        .await
        .expect("check")
        .into_inner()
        .conflicts;
    assert!(none.is_empty(), "no shared rack: {none:?}");
    let excluded = c
        .check_schedule_conflicts(check(power_on(whole(&[1])), s.id.clone()))
        .await
        .expect("check")
        .into_inner()
        .conflicts;
    assert!(excluded.is_empty());
    // Paused schedules are not considered.
    pause(c, &id_of(&s)).await;
    let paused = c
        .check_schedule_conflicts(check(power_on(whole(&[1])), None))
        .await
        .expect("check")
        .into_inner()
        .conflicts;
    assert!(paused.is_empty());
    server.stop().await;
}

async fn trigger_fires_now_even_when_paused(backend: Backend) {
    let mut config = config();
    let metrics = rackflow_testkit::metrics::enable(&mut config);
    let Some(mut server) = TestServer::start_with(backend, config).await else {
        return;
    };
    fixture_fleet(&mut server.client, 3).await;
    let c = &mut server.client;
    let s = create(
        c,
        create_req(
            "manual",
            spec(pb::ScheduleSpecType::Interval, "1h", ""),
            pb::OverlapPolicy::Skip,
            power_on(whole(&[1, 2])),
        ),
    )
    .await;
    pause(c, &id_of(&s)).await;
    let before = Utc::now();
    let ids = c
        .trigger_task_schedule(pb::TriggerTaskScheduleRequest { id: s.id.clone() })
        .await
        .expect("trigger")
        .into_inner()
        .task_ids;
    assert_eq!(ids.len(), 2, "one task per scope");
    let tasks = c
        .get_tasks_by_i_ds(pb::GetTasksByIDsRequest { task_ids: ids })
        .await
        .expect("tasks")
        .into_inner()
        .tasks;
    for t in &tasks {
        let at = t
            .description
            .strip_prefix("manual — ")
            .expect("description");
        let at = DateTime::parse_from_rfc3339(at)
            .expect("rfc3339")
            .with_timezone(&Utc);
        assert!(at.timestamp() >= before.timestamp() && at <= Utc::now());
    }
    let after = get(c, &id_of(&s)).await;
    assert!(!after.enabled, "trigger keeps the enabled state");
    assert!(after.last_run_at.is_some());
    let scrape = rackflow_testkit::metrics::scrape(metrics).await;
    assert_eq!(
        scrape.value("rackflow_schedule_firings", &[("trigger", "manual")]),
        1.0
    );
    assert_eq!(
        scrape.value("rackflow_schedule_firings", &[("trigger", "automatic")]),
        0.0
    );
    server.stop().await;
}

// ---- restarts and catch-up ---------------------------------------------------------

/// A server whose schedule loop is off: schedules exist but nothing fires,
/// as while the service is down.
fn down_config() -> Config {
    let mut config = config();
    config.schedules.enabled = false;
    config
}

async fn restart_after_a_missed_window_fires_once_without_replay(backend: Backend) {
    let Some(mut server) = TestServer::start_with(backend, down_config()).await else {
        return;
    };
    fixture_fleet(&mut server.client, 3).await;
    let c = &mut server.client;
    let every = create(
        c,
        create_req(
            "missed-interval",
            spec(pb::ScheduleSpecType::Interval, "1s", ""),
            pb::OverlapPolicy::Skip,
            power_on(whole(&[1])),
        ),
    )
    .await;
    let at = Utc::now() + chrono::TimeDelta::milliseconds(500);
    let once = create(
        c,
        create_req(
            "missed-once",
            spec(
                pb::ScheduleSpecType::OneTime,
                &at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "",
            ),
            pb::OverlapPolicy::Skip,
            power_on(whole(&[2])),
        ),
    )
    .await;
    // Scenario, not polling: due times pass while no server fires them (the
    // schedule loop runs on the system clock).
    tokio::time::sleep(Duration::from_millis(3600)).await;
    assert!(
        fired(&mut server.client, 1, "missed-interval")
            .await
            .is_empty()
    );
    let restarted_at = Utc::now();
    server.restart_with(config()).await;
    let changes = server.changes().clone();
    let c = &mut server.client;
    let first = wait_fired(c, &changes, 1, "missed-interval", 1).await;
    let s = pause(c, &id_of(&every)).await;
    // Of the ≥3 occurrences missed while down, exactly one fired: the latest.
    let all = fired(c, 1, "missed-interval").await;
    let missed: Vec<_> = all.iter().filter(|(at, _)| *at <= restarted_at).collect();
    assert_eq!(
        missed.len(),
        1,
        "missed occurrences are not replayed: {all:?}"
    );
    // The latest missed one (descriptions carry whole seconds).
    assert!(
        restarted_at - first[0].0 < chrono::TimeDelta::seconds(2),
        "{first:?}"
    );
    assert!(s.skipped_count >= 2, "{s:#?}");
    assert!(
        s.last_skip_reason.contains("not replayed"),
        "{}",
        s.last_skip_reason
    );
    // The one-time schedule due while down fires once, late.
    wait_fired(c, &changes, 2, "missed-once", 1).await;
    let once = wait_schedule(c, &changes, &id_of(&once), "spent", |s| !s.enabled).await;
    assert_eq!(once.next_run_at, None);
    assert_eq!(once.skipped_count, 0);
    server.stop().await;
}

async fn restart_within_a_catchup_window_coalesces(backend: Backend) {
    let Some(mut server) = TestServer::start_with(backend, down_config()).await else {
        return;
    };
    fixture_fleet(&mut server.client, 3).await;
    let c = &mut server.client;
    let mut req = create_req(
        "catch-up",
        spec(pb::ScheduleSpecType::Interval, "1s", ""),
        pb::OverlapPolicy::Skip,
        power_on(whole(&[1])),
    );
    req.schedule.as_mut().expect("config").catchup_window = Some(prost_types::Duration {
        seconds: 2,
        nanos: 500_000_000,
    });
    let every = create(c, req).await;
    assert_eq!(
        every.catchup_window.map(|d| d.seconds),
        Some(3),
        "rounded up to whole seconds"
    );
    // A one-time schedule missed by more than its window does not fire.
    let at = Utc::now() + chrono::TimeDelta::milliseconds(300);
    let mut late = create_req(
        "too-late",
        spec(
            pb::ScheduleSpecType::OneTime,
            &at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "",
        ),
        pb::OverlapPolicy::Skip,
        power_on(whole(&[2])),
    );
    late.schedule.as_mut().expect("config").catchup_window = Some(prost_types::Duration {
        seconds: 1,
        nanos: 0,
    });
    let late = create(c, late).await;
    // Scenario, not polling: occurrences are missed for longer than the
    // windows (the schedule loop runs on the system clock).
    tokio::time::sleep(Duration::from_millis(5500)).await;
    let restarted_at = Utc::now();
    server.restart_with(config()).await;
    let changes = server.changes().clone();
    let c = &mut server.client;
    wait_fired(c, &changes, 1, "catch-up", 1).await;
    let s = pause(c, &id_of(&every)).await;
    let all = fired(c, 1, "catch-up").await;
    let missed: Vec<_> = all.iter().filter(|(at, _)| *at <= restarted_at).collect();
    assert_eq!(missed.len(), 1, "coalesced into one: {all:?}");
    // ~5 missed: about 3 inside the 3 s window (2 coalesced), 2 older.
    assert!(s.skipped_count >= 3, "{s:#?}");
    assert!(
        s.last_skip_reason.contains("coalesced"),
        "{}",
        s.last_skip_reason
    );
    let late = wait_schedule(c, &changes, &id_of(&late), "spent", |s| !s.enabled).await;
    assert_eq!(late.skipped_count, 1);
    assert!(
        late.last_skip_reason.contains("catch-up window"),
        "{}",
        late.last_skip_reason
    );
    // Scenario, not polling: a skipped occurrence must not fire afterwards
    // either (its absence is no event to wait for).
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(fired(c, 2, "too-late").await.is_empty());
    server.stop().await;
}

// ---- replicas -----------------------------------------------------------------------

/// A second server on the database of `target`, sharing nothing with the
/// first but the database.
const NAMES: [&str; 3] = ["rep-a", "rep-b", "rep-c"];

async fn two_replicas_fire_each_occurrence_exactly_once(backend: Backend) {
    let Some(db) = TestDatabase::create(backend).await else {
        return;
    };
    // Open once first so the two replicas do not race the migrations.
    drop(
        rackflow_store::open_store(db.target())
            .await
            .expect("migrate"),
    );
    let changes = Changes::new();
    let mut cfg = config();
    // Both replicas wake at the same due times; a slow poll on one of them
    // must not matter either.
    cfg.schedules.poll_interval_ms = 100;
    let mut a = Replica::start(&db, &changes, cfg.clone()).await;
    let mut b = Replica::start(&db, &changes, cfg.clone()).await;
    fixture_fleet(&mut a.client, 3).await;
    let mut ids = Vec::new();
    // One schedule per rack, so no occurrence is refused by a rack
    // conflict with another schedule's task.
    for (i, name) in NAMES.iter().enumerate() {
        // Created on alternating replicas.
        let client = if i % 2 == 0 {
            &mut a.client
        } else {
            &mut b.client
        };
        let s = create(
            client,
            create_req(
                name,
                spec(pb::ScheduleSpecType::Interval, "1s", ""),
                pb::OverlapPolicy::Queue,
                power_on(whole(&[i as u32 + 1])),
            ),
        )
        .await;
        ids.push(id_of(&s));
    }
    let at = Utc::now() + chrono::TimeDelta::milliseconds(1500);
    let once = create(
        &mut b.client,
        create_req(
            "rep-once",
            spec(
                pb::ScheduleSpecType::OneTime,
                &at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "",
            ),
            pb::OverlapPolicy::Queue,
            power_on(whole(&[1, 2, 3])),
        ),
    )
    .await;
    for (i, name) in NAMES.iter().enumerate() {
        wait_fired(&mut a.client, &changes, i as u32 + 1, name, 4).await;
    }
    for id in &ids {
        pause(&mut b.client, id).await;
    }
    wait_schedule(&mut a.client, &changes, &id_of(&once), "spent", |s| {
        !s.enabled
    })
    .await;
    // Count after both replicas stopped: a schedule loop submits an
    // occurrence before it looks at its stop token, so a stopped replica
    // has no submission in flight. A third server (firing nothing) reads.
    a.stop().await;
    b.stop().await;
    cfg.schedules.enabled = false;
    let mut a = Replica::start(&db, &changes, cfg).await;
    for rack in 1..=3 {
        let tasks = rack_tasks(&mut a.client, rack).await;
        let mut per_occurrence: BTreeMap<String, usize> = BTreeMap::new();
        for t in &tasks {
            *per_occurrence.entry(t.description.clone()).or_default() += 1;
        }
        let dup: Vec<_> = per_occurrence.iter().filter(|(_, n)| **n > 1).collect();
        assert!(
            dup.is_empty(),
            "rack {rack}: occurrences fired twice: {dup:?}"
        );
        {
            let name = NAMES[rack as usize - 1];
            let times: Vec<DateTime<Utc>> = fired(&mut a.client, rack, name)
                .await
                .into_iter()
                .map(|(at, _)| at)
                .collect();
            assert!(times.len() >= 4, "rack {rack} {name}: {times:?}");
            for w in times.windows(2) {
                assert_eq!(
                    (w[1] - w[0]).num_seconds(),
                    1,
                    "rack {rack} {name}: an occurrence was lost or doubled: {times:?}"
                );
            }
        }
        assert_eq!(fired(&mut a.client, rack, "rep-once").await.len(), 1);
    }
    a.stop().await;
    db.remove().await;
}

async fn scope_racks(c: &mut Client, id: &pb::Uuid) -> BTreeSet<String> {
    c.list_task_schedule_scopes(pb::ListTaskScheduleScopesRequest {
        schedule_id: Some(id.clone()),
    })
    .await
    .expect("scopes")
    .into_inner()
    .scopes
    .iter()
    .map(|sc| sc.rack_id.clone().expect("rack").id)
    .collect()
}

/// A schedule aimed at an NVLink domain covers the domain's racks when it
/// is created (with the type filter); a rack attached later joins only
/// when the scope is reconciled; an unknown or empty domain is refused as
/// for tasks, and nothing is written.
async fn domain_scopes_are_the_members_at_creation(backend: Backend) {
    let Some(mut server) = start(backend).await else {
        return;
    };
    let c = &mut server.client;
    for name in ["nvl-s", "nvl-empty"] {
        create_nvl_domain(c, name, None, None).await;
    }
    attach_fixture_racks(c, "nvl-s", &[1, 2]).await;
    let s = create(
        c,
        create_req(
            "by-domain",
            spec(pb::ScheduleSpecType::Interval, "1h", ""),
            pb::OverlapPolicy::Skip,
            power_on(nvl_domain_target("nvl-s", &[pb::ComponentType::Compute])),
        ),
    )
    .await;
    let id = s.id.clone().expect("id");
    let members = |ns: &[u32]| -> BTreeSet<String> {
        ns.iter().map(|n| fixture_id(*n).to_string()).collect()
    };
    assert_eq!(scope_racks(c, &id).await, members(&[1, 2]));
    let scopes = c
        .list_task_schedule_scopes(pb::ListTaskScheduleScopesRequest {
            schedule_id: Some(id.clone()),
        })
        .await
        .expect("scopes")
        .into_inner()
        .scopes;
    for sc in &scopes {
        assert_eq!(
            sc.component_filter,
            Some(pb::task_schedule_scope::ComponentFilter::Types(
                pb::ComponentTypes {
                    types: vec![pb::ComponentType::Compute as i32]
                }
            )),
            "{sc:?}"
        );
    }

    // Rack 3 joins the domain: not in the schedule until reconciled.
    attach_fixture_racks(c, "nvl-s", &[3]).await;
    assert_eq!(scope_racks(c, &id).await, members(&[1, 2]));
    let ids = c
        .trigger_task_schedule(pb::TriggerTaskScheduleRequest { id: s.id.clone() })
        .await
        .expect("trigger")
        .into_inner()
        .task_ids;
    assert_eq!(ids.len(), 2, "one task per scope");
    let done = c
        .update_task_schedule_scope(pb::UpdateTaskScheduleScopeRequest {
            schedule_id: s.id.clone(),
            desired_scope: Some(nvl_domain_target("nvl-s", &[pb::ComponentType::Compute])),
        })
        .await
        .expect("reconcile")
        .into_inner();
    assert_eq!((done.added, done.removed, done.updated), (1, 0, 0));
    assert_eq!(scope_racks(c, &id).await, members(&[1, 2, 3]));

    // Unknown and empty domains: refused, nothing written.
    let count = |c: &mut Client| {
        let mut c = c.clone();
        async move {
            c.list_task_schedules(pb::ListTaskSchedulesRequest::default())
                .await
                .expect("list")
                .into_inner()
                .task_schedules
                .len()
        }
    };
    let before = count(c).await;
    for (domain, code, text) in [
        ("nvl-zz", Code::NotFound, "nvl-zz"),
        ("nvl-empty", Code::InvalidArgument, "has no racks"),
    ] {
        let err = c
            .create_task_schedule(create_req(
                domain,
                spec(pb::ScheduleSpecType::Interval, "1h", ""),
                pb::OverlapPolicy::Skip,
                power_on(nvl_domain_target(domain, &[])),
            ))
            .await
            .expect_err("refused");
        assert_eq!(err.code(), code, "{err:?}");
        assert!(err.message().contains(text), "{err:?}");
    }
    assert_eq!(count(c).await, before, "nothing written");
}
