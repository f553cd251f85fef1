//! The schedule manager against a real (in-memory SQLite) store and task
//! manager, with a manual clock: catch-up, grid alignment and one-time
//! firing are checked at exact instants, without sleeping.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeDelta, Utc};
use rackflow_domain::ComponentType;
use rackflow_domain::inventory::{Component, Location, Position, Rack};
use rackflow_domain::schedule::{
    OperationTemplate, OverlapPolicy, ScheduledOp, SpecKind, TaskSchedule,
};
use rackflow_domain::target::{RackIdentifier, RackTarget, TargetSpec};
use rackflow_domain::task::{TaskInformation, TaskType};
use rackflow_store::{SqliteStore, Store, TaskFilter};
use uuid::Uuid;

use super::*;
use crate::executor::{ExecutorConfig, LocalExecutor};
use crate::sim::{SimConfig, SimFleet};
use crate::tasks::{TaskConfig, TaskManager};

struct ManualClock(Mutex<DateTime<Utc>>);

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().expect("clock")
    }
}

impl ManualClock {
    fn set(&self, t: DateTime<Utc>) {
        *self.0.lock().expect("clock") = t;
    }
}

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("t0")
        .with_timezone(&Utc)
}

fn at(secs: i64) -> DateTime<Utc> {
    t0() + TimeDelta::seconds(secs)
}

struct Fixture {
    store: Arc<dyn Store>,
    manager: Arc<ScheduleManager>,
    clock: Arc<ManualClock>,
    rack_id: Uuid,
    tasks: Arc<TaskManager>,
}

async fn fixture() -> Fixture {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open_in_memory().await.expect("store"));
    let rack_id = Uuid::new_v4();
    let now = Utc::now();
    let rack = Rack {
        id: rack_id,
        name: "rack-1".into(),
        manufacturer: "NVIDIA".into(),
        model: None,
        serial_number: "RSN-1".into(),
        description: None,
        location: Location {
            region: "eu".into(),
            datacenter: "dc1".into(),
            room: "a".into(),
            position: "1".into(),
        },
        external_id: Some("r-0001".into()),
        nvl_domain_id: None,
        lifecycle: Default::default(),
        created_at: now,
        updated_at: now,
        deleted_at: None,
    };
    let component = Component {
        id: Uuid::new_v4(),
        rack_id: Some(rack_id),
        component_type: ComponentType::PowerShelf,
        name: "shelf".into(),
        manufacturer: "NVIDIA".into(),
        model: None,
        serial_number: "CSN-1".into(),
        description: None,
        firmware_version: "1.0.0".into(),
        position: Position {
            slot_id: 0,
            tray_idx: 0,
            host_id: 0,
        },
        bmcs: Vec::new(),
        external_id: Some("r-0001-powershelf-00".into()),
        power_state: None,
        firmware_observed_at: None,
        power_observed_at: None,
        operational: None,
        leak: None,
        leak_handling: None,
        created_at: now,
        updated_at: now,
        deleted_at: None,
    };
    store.rack_create(&rack, &[component]).await.expect("rack");
    let fleet = SimFleet::new(SimConfig::instant());
    let registry = Arc::new(fleet.registry());
    let executor = Arc::new(LocalExecutor::new(
        registry.clone(),
        ExecutorConfig::default(),
    ));
    let tasks = TaskManager::new(store.clone(), executor, registry, TaskConfig::default());
    let clock = Arc::new(ManualClock(Mutex::new(t0())));
    let manager = ScheduleManager::new(
        store.clone(),
        tasks.clone(),
        ScheduleConfig::default(),
        clock.clone(),
    );
    Fixture {
        store,
        manager,
        clock,
        rack_id,
        tasks,
    }
}

fn new_schedule(f: &Fixture, name: &str, kind: SpecKind, spec: &str, window: i64) -> NewSchedule {
    NewSchedule {
        name: name.into(),
        kind: Some(kind),
        spec: spec.into(),
        timezone: String::new(),
        overlap_policy: OverlapPolicy::Queue,
        catchup_window_secs: window,
        template: OperationTemplate {
            op: ScheduledOp::PowerOn,
            task_type: TaskType::PowerControl,
            information: TaskInformation {
                code: "power_on".into(),
                override_readiness_check: false,
                firmware: None,
            },
            queue_timeout_secs: 3600,
            rule_id: None,
        },
        target: TargetSpec::Racks(vec![RackTarget {
            identifier: RackIdentifier::Id(f.rack_id),
            component_types: Vec::new(),
        }]),
    }
}

async fn descriptions(f: &Fixture) -> Vec<String> {
    let (tasks, _) = f
        .store
        .task_list(
            &TaskFilter::default(),
            rackflow_domain::run::Page {
                offset: 0,
                limit: 0,
            },
            false,
        )
        .await
        .expect("tasks");
    let mut d: Vec<String> = tasks.into_iter().map(|t| t.description).collect();
    d.sort();
    d
}

async fn reload(f: &Fixture, s: &TaskSchedule) -> TaskSchedule {
    f.manager.get(s.id).await.expect("schedule")
}

#[tokio::test]
async fn interval_fires_on_its_grid_and_skips_what_was_missed() {
    let f = fixture().await;
    let s = f
        .manager
        .create(new_schedule(&f, "grid", SpecKind::Interval, "10s", 0))
        .await
        .expect("create");
    assert_eq!(s.next_run_at, Some(at(10)));
    f.clock.set(at(9));
    assert_eq!(f.manager.tick().await.expect("tick"), 0, "not due yet");
    f.clock.set(at(10));
    assert_eq!(f.manager.tick().await.expect("tick"), 1);
    assert_eq!(reload(&f, &s).await.next_run_at, Some(at(20)));
    // Down from 10 s to 45 s: 20, 30, 40 were due; 40 fires, 2 skipped.
    f.clock.set(at(45));
    assert_eq!(f.manager.tick().await.expect("tick"), 1);
    assert_eq!(f.manager.tick().await.expect("tick"), 0, "claimed once");
    let after = reload(&f, &s).await;
    assert_eq!(after.next_run_at, Some(at(50)), "stays on the grid");
    assert_eq!(after.skipped_count, 2);
    assert_eq!(after.last_run_at, Some(at(45)));
    assert_eq!(
        descriptions(&f).await,
        vec![
            "grid — 2026-01-01T00:00:10Z".to_string(),
            "grid — 2026-01-01T00:00:40Z".to_string()
        ]
    );
    f.tasks.shutdown().await;
}

#[tokio::test]
async fn catchup_window_coalesces_and_one_time_fires_once() {
    let f = fixture().await;
    let s = f
        .manager
        .create(new_schedule(&f, "window", SpecKind::Interval, "10s", 25))
        .await
        .expect("create");
    // Due at 10..=60 (6 occurrences) by 65; window [40, 65] holds 40, 50,
    // 60: one fire (at 60), 2 coalesced, 3 skipped.
    f.clock.set(at(65));
    assert_eq!(f.manager.tick().await.expect("tick"), 1);
    let after = reload(&f, &s).await;
    assert_eq!(after.skipped_count, 5);
    assert!(
        after.last_skip_reason.contains("coalesced 2"),
        "{}",
        after.last_skip_reason
    );
    assert_eq!(
        descriptions(&f).await,
        vec!["window — 2026-01-01T00:01:00Z".to_string()]
    );
    f.manager.pause(s.id).await.expect("pause");

    let once = f
        .manager
        .create(new_schedule(
            &f,
            "once",
            SpecKind::OneTime,
            "2026-01-01T00:01:10Z",
            0,
        ))
        .await
        .expect("create");
    f.clock.set(at(71));
    assert_eq!(f.manager.tick().await.expect("tick"), 1);
    f.clock.set(at(3600));
    assert_eq!(f.manager.tick().await.expect("tick"), 0);
    let spent = reload(&f, &once).await;
    assert!(!spent.enabled);
    assert_eq!(spent.next_run_at, None);
    assert!(spent.is_spent_one_time());
    assert_eq!(
        descriptions(&f)
            .await
            .iter()
            .filter(|d| d.starts_with("once"))
            .count(),
        1
    );
    // Resume recomputes a paused interval from now.
    let resumed = f.manager.resume(s.id).await.expect("resume");
    assert_eq!(resumed.next_run_at, Some(at(3610)));
    f.tasks.shutdown().await;
}
