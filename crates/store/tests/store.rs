//! The store's behaviour, each case written once and run against both
//! dialects: `sqlite::<case>` on a fresh database file under the temp dir,
//! `postgres::<case>` on a fresh database created for the test on the server
//! of `DATABASE_URL` (dropped afterwards, also when the test panics), so
//! cases run in parallel without seeing each other's rows.
//!
//! Without `DATABASE_URL` the PostgreSQL cases print a loud "skipped" line
//! and pass, unless `CI` is set: then they fail, so CI cannot go green
//! without PostgreSQL (the test kit's `TestDatabase` decides).
//!
//! `DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//!  CARGO_TARGET_DIR=/work/target-store cargo test -j2 -p rackflow-store`

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use rackflow_domain::ComponentType;
use rackflow_domain::ComponentsByType;
use rackflow_domain::audit::{AuditEvent, SYSTEM_ACTOR};
use rackflow_domain::dispatch::{CLAIM_WINDOW_MARGIN, EarlierPhases};
use rackflow_domain::inventory::{
    Bmc, BmcType, Component, Location, NvlDomain, OperationalState, OperationalStatus, Position,
    Rack,
};
use rackflow_domain::rule::{
    ActionConfig, OperationRule, RackRuleAssociation, RetryPolicy, RuleDefinition, SequenceStep,
};
use rackflow_domain::run::{
    AdvancePolicy, ConflictPolicy, EncryptedSecret, FirmwarePayload, GateScope, KindFilter,
    NameQuery, OperationRun, OperationRunTarget, OperationTemplate, OrderingPolicy, Page,
    PhasePlan, PhasePolicy, PhaseScope, QueueOptions, QueueStrategy, RetryState, RunConfiguration,
    RunListFilter, RunOptions, RunReason, RunStatus, SafetyGate, SafetyPolicy, Selector,
    StateFilter, TargetQuery, TargetScope, TargetStatus,
};
use rackflow_domain::target::{ComponentFilter, RackIdentifier, RackTarget, TargetSpec};
use rackflow_domain::task::{
    QueuePolicy, Task, TaskInformation, TaskStatus, TaskTrigger, TaskType, messages,
};
use rackflow_store::{
    AuditFilter, ComponentFilterQuery, ComponentPatch, DbTarget, InventoryColumn, ListOrder,
    LockMode, NvlDomainQuery, PgStore, PurgeOutcome, RackFilter, RackImport, RackPatch, RunLock,
    SqliteStore, Store, StoreError, SubmitDecision, SubmitOutcome, SubmitReject, TaskFilter,
    TaskLease, TaskStart, TaskTransition, TaskUpdate, TextFilter, open_store,
};
use rackflow_testkit::db::TestDatabase;
use uuid::Uuid;

// ---- harness ---------------------------------------------------------------

/// A fresh, migrated database of one dialect (the kit's [`TestDatabase`]
/// removes it, also when the test panics).
struct Db {
    kind: Kind,
    // Last: removed after the pool is closed.
    database: Option<TestDatabase>,
}

enum Kind {
    Sqlite(SqliteStore),
    Postgres(PgStore),
}

impl Db {
    async fn sqlite() -> Db {
        let database = TestDatabase::sqlite();
        let path = database.sqlite_path().expect("a SQLite file");
        let store = SqliteStore::open(path).await.expect("open SQLite store");
        Db {
            kind: Kind::Sqlite(store),
            database: Some(database),
        }
    }

    /// `None` when PostgreSQL tests are skipped (no `DATABASE_URL`, no `CI`).
    async fn postgres() -> Option<Db> {
        let database = TestDatabase::postgres().await?;
        let url = database.postgres_url().expect("a PostgreSQL database");
        // On failure the database guard drops the database.
        let store = PgStore::connect(url)
            .await
            .unwrap_or_else(|e| panic!("connect PostgreSQL store: {e}"));
        Some(Db {
            kind: Kind::Postgres(store),
            database: Some(database),
        })
    }

    fn store(&self) -> &dyn Store {
        match &self.kind {
            Kind::Sqlite(s) => s,
            Kind::Postgres(s) => s,
        }
    }

    /// The store as an owned handle (same pool), for spawned tasks.
    fn shared(&self) -> Arc<dyn Store> {
        match &self.kind {
            Kind::Sqlite(s) => Arc::new(s.clone()),
            Kind::Postgres(s) => Arc::new(s.clone()),
        }
    }

    /// Runs a query returning one integer (`SELECT COUNT(*) …`).
    async fn scalar(&self, sql: &str) -> i64 {
        match &self.kind {
            Kind::Sqlite(s) => sqlx::query_scalar(sql).fetch_one(s.pool()).await,
            Kind::Postgres(s) => sqlx::query_scalar(sql).fetch_one(s.pool()).await,
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Runs a raw statement (to set up states the store API cannot make).
    async fn execute(&self, sql: &str) {
        match &self.kind {
            Kind::Sqlite(s) => sqlx::query(sql).execute(s.pool()).await.map(|_| ()),
            Kind::Postgres(s) => sqlx::query(sql).execute(s.pool()).await.map(|_| ()),
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    async fn count(&self, table: &str) -> i64 {
        self.scalar(&format!("SELECT COUNT(*) FROM {table}")).await
    }

    /// Closes the pool and removes the database.
    async fn finish(mut self) {
        match &self.kind {
            Kind::Sqlite(s) => s.close().await,
            Kind::Postgres(s) => s.close().await,
        }
        if let Some(database) = self.database.take() {
            database.remove().await;
        }
    }
}

/// Instantiates every case once per dialect, on a multi-threaded runtime
/// (cases that spawn tasks run them in parallel).
macro_rules! both_dialects {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let db = super::Db::sqlite().await;
                    super::$case(&db).await;
                    db.finish().await;
                }
            )*
        }

        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(db) = super::Db::postgres().await else {
                        return;
                    };
                    super::$case(&db).await;
                    db.finish().await;
                }
            )*
        }
    };
}

both_dialects!(
    run_list_answers_filters_of_ten_thousand_entries,
    secrets_reseal_rewrites_every_sealed_envelope,
    audit_trail_appends_lists_pages_and_prunes,
    a_run_control_and_its_audit_event_commit_together,
    task_updates_quiet_applies_each_in_one_transaction,
    run_lock_apply_loads_pending_targets_up_to_the_claim_window,
    task_submit_for_target_writes_the_target_only_with_a_new_task,
    task_leases_renew_adopt_and_fence,
    task_cancel_announcements_reach_listeners,
    task_submit_inserts_started_tasks,
    run_lock_apply_loads_unsettled_targets_with_child_states,
    rack_create_get_and_lookups,
    rack_list_orders_pages_and_filters,
    rack_soft_delete_cascades_to_components,
    rack_patch_changes_only_the_named_fields,
    rack_purge_follows_a_delete_and_frees_the_external_id,
    rack_list_text_filters_and_order,
    component_delete_and_purge,
    nvl_domains_create_lookup_list_and_membership,
    rack_lifecycle_moves_with_its_ingest_and_decommission_tasks,
    rack_create_conflicts_write_nothing,
    racks_import_creates_the_new_and_finds_the_known,
    racks_import_names_the_rack_that_breaks_a_batch,
    component_create_list_and_filters,
    component_patch_updates_fields_and_upserts_bmcs,
    components_in_states_answers_the_readiness_gate,
    components_observe_records_facts_newest_wins,
    run_create_and_get_round_trip,
    run_create_with_a_bad_target_writes_nothing,
    run_list_filters_by_name,
    run_list_filters_by_state_and_kind,
    run_list_orders_pages_and_counts,
    run_targets_list_scopes_status_order_and_paging,
    run_target_update_round_trip,
    run_lock_apply_loads_and_persists_only_changes,
    run_lock_apply_rolls_back_on_error,
    run_lock_apply_runnable_skips_paused_terminal_and_missing_runs,
    run_lock_apply_concurrent_attempts,
    run_ids_runnable_orders_by_updated_at_and_filters,
    task_submit_inserts_rejects_and_dedupes,
    task_submit_is_serialised_per_rack,
    task_promote_applies_transitions,
    status_counts_group_runs_active_targets_and_unfinished_tasks,
    task_update_is_conditional_and_stamps,
    task_states_report_status_and_message_only,
    task_list_filters_orders_and_pages,
    rules_crud_and_defaults,
    rule_delete_cascades_and_nulls_applied_rule,
    rule_associations_upsert_get_list_disassociate,
    event_rules_crud_bindings_and_selection,
    leak_reports_keep_state_and_one_open_event_per_component,
);

// ---- fixtures --------------------------------------------------------------

fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

fn ts(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("fixture timestamp")
        .with_timezone(&Utc)
}

/// Caller timestamps the store must ignore on insert.
fn epoch() -> DateTime<Utc> {
    ts("2000-01-01T00:00:00Z")
}

fn rack(n: u128, name: &str, external_id: Option<&str>) -> Rack {
    Rack {
        id: id(n),
        name: name.to_string(),
        manufacturer: "NVIDIA".to_string(),
        model: Some("GB200 NVL72".to_string()),
        serial_number: format!("SN-{n}"),
        description: Some(format!("rack {name}")),
        location: Location {
            region: "eu".to_string(),
            datacenter: "dc1".to_string(),
            room: "r2".to_string(),
            position: format!("row-{n}"),
        },
        external_id: external_id.map(str::to_string),
        nvl_domain_id: Some(id(0xD0_0000 + n)),
        lifecycle: Default::default(),
        created_at: epoch(),
        updated_at: epoch(),
        deleted_at: None,
    }
}

fn bmc(mac: &str, bmc_type: BmcType, ip: Option<&str>) -> Bmc {
    Bmc {
        bmc_type,
        mac_address: mac.to_string(),
        ip_address: ip.map(str::to_string),
    }
}

fn component(
    n: u128,
    rack_id: Option<Uuid>,
    component_type: ComponentType,
    name: &str,
    external_id: Option<&str>,
) -> Component {
    Component {
        id: id(n),
        rack_id,
        component_type,
        name: name.to_string(),
        manufacturer: "NVIDIA".to_string(),
        model: Some("model-x".to_string()),
        serial_number: format!("CSN-{n}"),
        description: None,
        firmware_version: "1.0.0".to_string(),
        position: Position {
            slot_id: 1,
            tray_idx: 0,
            host_id: 0,
        },
        bmcs: Vec::new(),
        external_id: external_id.map(str::to_string),
        power_state: Some("on".to_string()),
        firmware_observed_at: None,
        power_observed_at: None,
        operational: None,
        leak: None,
        leak_handling: None,
        created_at: epoch(),
        updated_at: epoch(),
        deleted_at: None,
    }
}

fn configuration(operation_type: &str, code: &str) -> RunConfiguration {
    RunConfiguration {
        selector: Selector::Percentage {
            percentage: 50,
            seed: "seed-1".to_string(),
        },
        options: RunOptions {
            max_concurrent_targets: 4,
            safety_policy: SafetyPolicy {
                gates: vec![
                    SafetyGate::FailureRate {
                        scope: GateScope::CurrentPhase,
                        failure_threshold_percent: 10,
                    },
                    SafetyGate::FailureCount {
                        scope: GateScope::CumulativeRun,
                        failure_threshold_count: 3,
                    },
                ],
            },
            conflict_policy: ConflictPolicy::default(),
            ordering_policy: OrderingPolicy::Random {
                seed: "order-1".to_string(),
            },
            phase_policy: PhasePolicy {
                plan: PhasePlan::Equal { phase_count: 3 },
                advance_policy: AdvancePolicy { auto_advance: true },
            },
        },
        operation: OperationTemplate {
            operation_type: operation_type.to_string(),
            code: code.to_string(),
            target_spec: Some(TargetSpec::Racks(vec![RackTarget {
                identifier: RackIdentifier::ExternalId("r-0001".to_string()),
                component_types: vec![ComponentType::Compute],
            }])),
            description: "nightly".to_string(),
            queue_options: Some(QueueOptions {
                conflict_strategy: QueueStrategy::Reject,
                queue_timeout_seconds: 60,
            }),
            target_scope: TargetScope {
                excluded_operation_run_ids: vec![id(0xE1)],
                default_scope_component_filter: Some(ComponentFilter::Types {
                    types: vec![ComponentType::Compute, ComponentType::NvSwitch],
                }),
            },
            payload: FirmwarePayload {
                target_version: Some("2.1.0".to_string()),
                start_time: 1_700_000_000,
                end_time: 1_700_003_600,
                rule_id: Some(id(0xF1)),
                sub_targets: vec!["bios".to_string()],
                override_readiness_check: true,
                override_version_check: false,
                authentication_data: Some(EncryptedSecret("v1:ciphertext".to_string())),
                // Round-trips with the run's configuration.
                bundle: Some(
                    rackflow_domain::bundle::FirmwareBundle::from_entries(
                        "b".to_string(),
                        [(
                            "GB200 NVL72".to_string(),
                            ComponentType::Compute,
                            "2.1.0".to_string(),
                        )],
                    )
                    .unwrap(),
                ),
                same_version_for_all_models: true,
                // Round-trips with the run (issue 35).
                firmware_objects: [("GB200 NVL72".to_string(), "GB200-NVL72_2026.11".to_string())]
                    .into(),
            },
        },
    }
}

fn run(n: u128, name: &str) -> OperationRun {
    OperationRun {
        id: id(n),
        name: name.to_string(),
        description: String::new(),
        status: RunStatus::Pending,
        reason: RunReason::None,
        status_message: String::new(),
        current_phase_index: 0,
        total_phases: 3,
        configuration: configuration("firmware_control", "upgrade"),
        created_at: epoch(),
        updated_at: epoch(),
        started_at: None,
        finished_at: None,
    }
}

fn target(
    n: u128,
    run_id: Uuid,
    sequence_index: i32,
    phase_index: i32,
    status: TargetStatus,
) -> OperationRunTarget {
    let mut components = ComponentsByType::new();
    components.push(ComponentType::Compute, id(0xC000 + n));
    components.push(ComponentType::NvSwitch, id(0xC100 + n));
    OperationRunTarget {
        id: id(n),
        operation_run_id: run_id,
        rack_id: id(0xA000 + n),
        sequence_index,
        phase_index,
        components_by_type: components,
        task_id: None,
        status,
        message: String::new(),
        retry_after: None,
        retry_state: None,
        created_at: epoch(),
        updated_at: epoch(),
    }
}

fn page(offset: i64, limit: i64) -> Page {
    Page { offset, limit }
}

fn all() -> Page {
    page(0, 0)
}

/// `expected` with the timestamps the store stamps taken from `got`, after
/// checking them: equal created/updated, taken during the test.
fn stamped_rack(mut expected: Rack, got: &Rack, since: DateTime<Utc>) -> Rack {
    assert_eq!(got.created_at, got.updated_at);
    assert!(got.created_at >= since.trunc_subsecs(6) && got.created_at <= Utc::now());
    expected.created_at = got.created_at;
    expected.updated_at = got.updated_at;
    expected
}

fn stamped_component(mut expected: Component, got: &Component) -> Component {
    expected.created_at = got.created_at;
    expected.updated_at = got.updated_at;
    expected
}

fn names<T>(items: &[T], name: impl Fn(&T) -> &str) -> Vec<String> {
    items.iter().map(|i| name(i).to_string()).collect()
}

fn rack_names(racks: &[Rack]) -> Vec<String> {
    names(racks, |r| &r.name)
}

fn component_names(components: &[Component]) -> Vec<String> {
    names(components, |c| &c.name)
}

fn run_names(runs: &[OperationRun]) -> Vec<String> {
    names(runs, |r| &r.name)
}

fn sequences(targets: &[OperationRunTarget]) -> Vec<i32> {
    targets.iter().map(|t| t.sequence_index).collect()
}

fn already_exists(result: Result<(), StoreError>) -> String {
    match result {
        Err(StoreError::AlreadyExists(what)) => what,
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
}

// ---- racks -----------------------------------------------------------------

async fn rack_create_get_and_lookups(db: &Db) {
    let store = db.store();
    let since = Utc::now();
    let a = rack(1, "rack-a", Some("r-0001"));
    let mut compute = component(11, None, ComponentType::Compute, "compute-1", Some("m-1"));
    compute.bmcs = vec![
        bmc("aa:bb:cc:dd:ee:01", BmcType::Host, Some("10.0.0.1")),
        bmc("aa:bb:cc:dd:ee:02", BmcType::Dpu, None),
    ];
    let switch = component(12, Some(id(999)), ComponentType::NvSwitch, "switch-1", None);
    store
        .rack_create(&a, &[compute.clone(), switch.clone()])
        .await
        .unwrap();

    let got = store.rack_get(a.id, false).await.unwrap().expect("rack a");
    assert_eq!(got, stamped_rack(a.clone(), &got, since));
    assert_eq!(store.rack_get(id(404), false).await.unwrap(), None);

    // Components of a rack belong to it whatever their own rack_id said.
    let components = store.components_of_racks(&[a.id]).await.unwrap();
    assert_eq!(component_names(&components), ["compute-1", "switch-1"]);
    let mut expected_compute = compute.clone();
    expected_compute.rack_id = Some(a.id);
    assert_eq!(
        components[0],
        stamped_component(expected_compute, &components[0])
    );
    assert_eq!(components[0].created_at, got.created_at);
    assert_eq!(components[1].rack_id, Some(a.id));

    // Names are not unique; lookups by name order by id.
    let mut b = rack(2, "rack-a", None);
    b.manufacturer = String::new();
    b.model = Some(String::new());
    b.description = None;
    store.rack_create(&b, &[]).await.unwrap();
    let by_name = store.rack_get_by_name("rack-a").await.unwrap();
    assert_eq!(
        by_name.iter().map(|r| r.id).collect::<Vec<_>>(),
        [a.id, b.id]
    );
    assert_eq!(
        by_name[1].model, None,
        "empty optional text reads back as None"
    );
    assert_eq!(by_name[1].external_id, None);
    assert!(store.rack_get_by_name("RACK-A").await.unwrap().is_empty());

    let by_external = store.rack_get_by_external_id("r-0001").await.unwrap();
    assert_eq!(by_external.map(|r| r.id), Some(a.id));
    assert_eq!(store.rack_get_by_external_id("r-9999").await.unwrap(), None);

    let many = store
        .racks_get_many(&[b.id, id(404), a.id, b.id])
        .await
        .unwrap();
    assert_eq!(many.iter().map(|r| r.id).collect::<Vec<_>>(), [a.id, b.id]);
    assert!(store.racks_get_many(&[]).await.unwrap().is_empty());
}

async fn rack_list_orders_pages_and_filters(db: &Db) {
    let store = db.store();
    let mut fixtures = vec![
        rack(5, "delta", None),
        rack(4, "alpha", Some("r-4")),
        rack(3, "Charlie", None),
        rack(2, "bravo", Some("r-2")),
        rack(1, "alpha", None),
    ];
    fixtures[0].manufacturer = "Dell".to_string();
    fixtures[2].model = Some("other".to_string());
    for r in &fixtures {
        store.rack_create(r, &[]).await.unwrap();
    }

    let (racks, total) = store
        .rack_list(&RackFilter::default(), Page::DEFAULT)
        .await
        .unwrap();
    assert_eq!(total, 5);
    // Byte order of names (upper case first) in both dialects, then id.
    assert_eq!(
        rack_names(&racks),
        ["Charlie", "alpha", "alpha", "bravo", "delta"]
    );
    assert_eq!(racks[1].id, id(1));
    assert_eq!(racks[2].id, id(4));

    let (paged, total) = store
        .rack_list(&RackFilter::default(), page(1, 2))
        .await
        .unwrap();
    assert_eq!(total, 5);
    assert_eq!(paged, racks[1..3]);
    let (unlimited, _) = store
        .rack_list(&RackFilter::default(), page(2, 0))
        .await
        .unwrap();
    assert_eq!(unlimited, racks[2..]);
    let (beyond, total) = store
        .rack_list(&RackFilter::default(), page(10, 2))
        .await
        .unwrap();
    assert!(beyond.is_empty());
    assert_eq!(total, 5);

    let filtered = |filter: RackFilter| async move {
        let (racks, total) = store.rack_list(&filter, all()).await.unwrap();
        assert_eq!(total, racks.len() as i64);
        rack_names(&racks)
    };
    assert_eq!(
        filtered(RackFilter {
            names: vec!["alpha".into(), "delta".into()],
            ..Default::default()
        })
        .await,
        ["alpha", "alpha", "delta"]
    );
    assert_eq!(
        filtered(RackFilter {
            manufacturers: vec!["Dell".into()],
            ..Default::default()
        })
        .await,
        ["delta"]
    );
    assert_eq!(
        filtered(RackFilter {
            models: vec!["other".into(), "GB200 NVL72".into()],
            names: vec!["Charlie".into(), "bravo".into()],
            ..Default::default()
        })
        .await,
        ["Charlie", "bravo"]
    );
    assert_eq!(
        filtered(RackFilter {
            with_external_id_only: true,
            ..Default::default()
        })
        .await,
        ["alpha", "bravo"]
    );

    assert!(store.rack_soft_delete(id(5)).await.unwrap());
    assert_eq!(
        filtered(RackFilter::default()).await,
        ["Charlie", "alpha", "alpha", "bravo"]
    );
    assert_eq!(
        filtered(RackFilter {
            include_deleted: true,
            ..Default::default()
        })
        .await,
        ["Charlie", "alpha", "alpha", "bravo", "delta"]
    );
    assert!(
        filtered(RackFilter {
            names: vec!["nothing".into()],
            ..Default::default()
        })
        .await
        .is_empty()
    );
}

async fn rack_soft_delete_cascades_to_components(db: &Db) {
    let store = db.store();
    let a = rack(1, "rack-a", Some("r-1"));
    let keep = rack(2, "rack-b", None);
    store
        .rack_create(
            &a,
            &[
                component(11, None, ComponentType::Compute, "c-1", None),
                component(12, None, ComponentType::PowerShelf, "p-1", None),
            ],
        )
        .await
        .unwrap();
    store
        .rack_create(
            &keep,
            &[component(21, None, ComponentType::Compute, "c-2", None)],
        )
        .await
        .unwrap();

    let before = Utc::now().trunc_subsecs(6);
    assert!(store.rack_soft_delete(a.id).await.unwrap());
    assert!(
        !store.rack_soft_delete(a.id).await.unwrap(),
        "already deleted"
    );
    assert!(!store.rack_soft_delete(id(404)).await.unwrap());

    assert_eq!(store.rack_get(a.id, false).await.unwrap(), None);
    let deleted = store
        .rack_get(a.id, true)
        .await
        .unwrap()
        .expect("deleted rack");
    let deleted_at = deleted.deleted_at.expect("deleted_at set");
    assert!(deleted_at >= before);
    assert_eq!(deleted.updated_at, deleted_at);
    assert!(store.rack_get_by_name("rack-a").await.unwrap().is_empty());
    assert_eq!(store.rack_get_by_external_id("r-1").await.unwrap(), None);
    assert_eq!(store.racks_get_many(&[a.id]).await.unwrap().len(), 1);

    let (live, total) = store
        .component_list(&ComponentFilterQuery::default(), all())
        .await
        .unwrap();
    assert_eq!(
        (component_names(&live), total),
        (vec!["c-2".to_string()], 1)
    );
    let (everything, total) = store
        .component_list(
            &ComponentFilterQuery {
                include_deleted: true,
                ..Default::default()
            },
            all(),
        )
        .await
        .unwrap();
    assert_eq!(total, 3);
    for c in everything.iter().filter(|c| c.rack_id == Some(a.id)) {
        assert_eq!(c.deleted_at, Some(deleted_at));
    }
    assert!(store.components_of_racks(&[a.id]).await.unwrap().is_empty());
    let got = store
        .component_get(id(11))
        .await
        .unwrap()
        .expect("still readable");
    assert_eq!(got.deleted_at, Some(deleted_at));
    assert_eq!(
        store.rack_get(keep.id, false).await.unwrap().map(|r| r.id),
        Some(keep.id)
    );

    // The (manufacturer, serial) pair is free again once its rack is deleted.
    let mut again = rack(3, "rack-a2", None);
    again.serial_number = a.serial_number.clone();
    store.rack_create(&again, &[]).await.unwrap();
}

async fn rack_patch_changes_only_the_named_fields(db: &Db) {
    let store = db.store();
    let original = rack(1, "rack-a", Some("r-1"));
    store.rack_create(&original, &[]).await.unwrap();
    let created = store.rack_get(original.id, false).await.unwrap().unwrap();

    let moved = Location {
        region: "us".into(),
        datacenter: "dc9".into(),
        room: "r1".into(),
        position: "row-9".into(),
    };
    let (before, after) = store
        .rack_patch(
            original.id,
            &RackPatch {
                name: Some("rack-renamed".into()),
                description: None,
                location: Some(moved.clone()),
            },
        )
        .await
        .unwrap()
        .expect("rack exists");
    assert_eq!(before, created);
    assert_eq!(after.name, "rack-renamed");
    assert_eq!(after.location, moved);
    assert_eq!(after.description, created.description, "not named: kept");
    assert_eq!(
        (after.manufacturer.as_str(), after.serial_number.as_str()),
        (
            created.manufacturer.as_str(),
            created.serial_number.as_str()
        )
    );
    assert!(after.updated_at >= created.updated_at);
    assert_eq!(
        store.rack_get(original.id, false).await.unwrap(),
        Some(after.clone())
    );

    // An empty description clears it.
    let (_, cleared) = store
        .rack_patch(
            original.id,
            &RackPatch {
                description: Some(String::new()),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cleared.description, None);
    assert_eq!(cleared.name, "rack-renamed");

    assert_eq!(
        store
            .rack_patch(id(404), &RackPatch::default())
            .await
            .unwrap(),
        None
    );
    assert!(store.rack_soft_delete(original.id).await.unwrap());
    assert_eq!(
        store
            .rack_patch(
                original.id,
                &RackPatch {
                    name: Some("ghost".into()),
                    ..Default::default()
                }
            )
            .await
            .unwrap(),
        None,
        "a deleted rack is not patched"
    );
    let deleted = store.rack_get(original.id, true).await.unwrap().unwrap();
    assert_eq!(deleted.name, "rack-renamed");
}

async fn rack_purge_follows_a_delete_and_frees_the_external_id(db: &Db) {
    let store = db.store();
    let a = rack(1, "rack-a", Some("r-1"));
    let mut c = component(11, None, ComponentType::Compute, "c-1", Some("c-ext"));
    c.bmcs = vec![bmc("aa:bb:cc:00:00:01", BmcType::Host, None)];
    store.rack_create(&a, &[c]).await.unwrap();
    store
        .rack_create(&rack(2, "rack-b", None), &[])
        .await
        .unwrap();
    submit(store, task(0x51, a.id), TaskStatus::Completed).await;

    assert_eq!(
        store.rack_purge(id(404)).await.unwrap(),
        PurgeOutcome::NotFound
    );
    assert_eq!(
        store.rack_purge(a.id).await.unwrap(),
        PurgeOutcome::NotDeleted
    );
    assert!(store.rack_get(a.id, false).await.unwrap().is_some());

    // Unfinished work on a deleted rack keeps it.
    let waiting = submit(store, task(0x52, a.id), TaskStatus::Waiting).await;
    assert!(store.rack_soft_delete(a.id).await.unwrap());
    assert_eq!(store.rack_purge(a.id).await.unwrap(), PurgeOutcome::Busy(1));
    assert!(store.rack_get(a.id, true).await.unwrap().is_some());
    store
        .task_update(
            waiting.id,
            &TaskUpdate {
                expected: vec![TaskStatus::Waiting],
                status: Some(TaskStatus::Terminated),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .expect("cancelled");

    assert_eq!(store.rack_purge(a.id).await.unwrap(), PurgeOutcome::Purged);
    assert_eq!(store.rack_get(a.id, true).await.unwrap(), None);
    assert_eq!(store.component_get(id(11)).await.unwrap(), None);
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM bmc WHERE mac_address = 'aa:bb:cc:00:00:01'")
            .await,
        0
    );
    assert_eq!(db.count("task").await, 0, "the rack's tasks go with it");
    assert_eq!(
        store.rack_purge(a.id).await.unwrap(),
        PurgeOutcome::NotFound
    );
    assert!(store.rack_get(id(2), false).await.unwrap().is_some());

    // The external id, serial and component identities are free again.
    let mut replacement = rack(3, "rack-a", Some("r-1"));
    replacement.serial_number = a.serial_number.clone();
    let mut c = component(31, None, ComponentType::Compute, "c-1", Some("c-ext"));
    c.bmcs = vec![bmc("aa:bb:cc:00:00:01", BmcType::Host, None)];
    store.rack_create(&replacement, &[c]).await.unwrap();
    assert_eq!(
        store
            .rack_get_by_external_id("r-1")
            .await
            .unwrap()
            .map(|r| r.id),
        Some(replacement.id)
    );
}

fn text(column: InventoryColumn, patterns: &[&str], is_wildcard: bool, use_or: bool) -> TextFilter {
    TextFilter {
        column,
        query: NameQuery {
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
            is_wildcard,
            use_or,
        },
    }
}

async fn rack_list_text_filters_and_order(db: &Db) {
    let store = db.store();
    let mut fixtures = vec![
        rack(1, "gb200-a", None),
        rack(2, "gb200-b", None),
        rack(3, "h100-a", None),
        rack(4, "gb300_x", None),
    ];
    fixtures[0].manufacturer = "Quanta".into();
    fixtures[1].manufacturer = "Foxconn".into();
    fixtures[2].manufacturer = "Wiwynn".into();
    fixtures[3].manufacturer = "Foxconn".into();
    fixtures[3].model = None;
    for r in &fixtures {
        store.rack_create(r, &[]).await.unwrap();
    }
    let listed = |filter: RackFilter| async move {
        let (racks, total) = store.rack_list(&filter, all()).await.unwrap();
        assert_eq!(total, racks.len() as i64);
        rack_names(&racks)
    };
    let with = |text: Vec<TextFilter>, order: Option<ListOrder>| RackFilter {
        text,
        order,
        ..Default::default()
    };
    assert_eq!(
        listed(with(
            vec![text(InventoryColumn::Name, &["gb"], true, false)],
            None
        ))
        .await,
        ["gb200-a", "gb200-b", "gb300_x"],
        "a wildcard pattern is contained"
    );
    // LIKE syntax: a pattern with an edge `%` is taken as it is; `_` is
    // one character.
    assert_eq!(
        listed(with(
            vec![text(InventoryColumn::Name, &["gb3%"], true, false)],
            None
        ))
        .await,
        ["gb300_x"]
    );
    assert_eq!(
        listed(with(
            vec![text(InventoryColumn::Name, &["%-a"], true, false)],
            None
        ))
        .await,
        ["gb200-a", "h100-a"]
    );
    assert_eq!(
        listed(with(
            vec![text(InventoryColumn::Name, &["gb20_-a"], true, false)],
            None
        ))
        .await,
        ["gb200-a"]
    );
    assert!(
        listed(with(
            vec![text(InventoryColumn::Name, &["GB"], true, false)],
            None
        ))
        .await
        .is_empty(),
        "case-sensitive"
    );
    assert_eq!(
        listed(with(
            vec![text(InventoryColumn::Name, &["-a", "h"], true, false)],
            None
        ))
        .await,
        ["h100-a"],
        "patterns AND without use_or"
    );
    assert_eq!(
        listed(with(
            vec![text(InventoryColumn::Name, &["-b", "h"], true, true)],
            None
        ))
        .await,
        ["gb200-b", "h100-a"]
    );
    assert_eq!(
        listed(with(
            vec![
                text(InventoryColumn::Manufacturer, &["Foxconn"], false, false),
                text(InventoryColumn::Name, &["gb2"], true, false),
            ],
            None
        ))
        .await,
        ["gb200-b"],
        "filters AND"
    );
    assert_eq!(
        listed(with(
            vec![text(InventoryColumn::Model, &["GB200"], true, false)],
            None
        ))
        .await,
        ["gb200-a", "gb200-b", "h100-a"]
    );
    let order = |column, descending| Some(ListOrder { column, descending });
    assert_eq!(
        listed(with(vec![], order(InventoryColumn::Name, true))).await,
        ["h100-a", "gb300_x", "gb200-b", "gb200-a"]
    );
    assert_eq!(
        listed(with(vec![], order(InventoryColumn::Manufacturer, false))).await,
        ["gb200-b", "gb300_x", "gb200-a", "h100-a"],
        "ties in id order"
    );
    assert_eq!(
        listed(with(vec![], order(InventoryColumn::Model, false))).await,
        ["gb300_x", "gb200-a", "gb200-b", "h100-a"],
        "no model first ascending, in both dialects"
    );
    assert_eq!(
        listed(with(vec![], order(InventoryColumn::Model, true))).await,
        ["gb200-a", "gb200-b", "h100-a", "gb300_x"],
        "no model last descending; ties stay in id order"
    );

    // Components: the same filters and order.
    store
        .component_create(&component(
            11,
            Some(id(1)),
            ComponentType::Compute,
            "tray-b",
            None,
        ))
        .await
        .unwrap();
    let mut other = component(12, Some(id(1)), ComponentType::NvSwitch, "tray-a", None);
    other.manufacturer = "Mellanox".into();
    store.component_create(&other).await.unwrap();
    let components = |filter: ComponentFilterQuery| async move {
        let (components, total) = store.component_list(&filter, all()).await.unwrap();
        assert_eq!(total, components.len() as i64);
        component_names(&components)
    };
    assert_eq!(
        components(ComponentFilterQuery {
            text: vec![text(InventoryColumn::Manufacturer, &["Mell"], true, false)],
            ..Default::default()
        })
        .await,
        ["tray-a"]
    );
    assert_eq!(
        components(ComponentFilterQuery {
            order: order(InventoryColumn::Name, false),
            ..Default::default()
        })
        .await,
        ["tray-a", "tray-b"]
    );
    assert_eq!(
        components(ComponentFilterQuery::default()).await,
        ["tray-b", "tray-a"],
        "default order: by type first"
    );
}

async fn component_delete_and_purge(db: &Db) {
    let store = db.store();
    store
        .rack_create(&rack(1, "rack-a", None), &[])
        .await
        .unwrap();
    let mut c = component(
        11,
        Some(id(1)),
        ComponentType::Compute,
        "c-1",
        Some("c-ext"),
    );
    c.bmcs = vec![bmc("aa:bb:cc:00:00:01", BmcType::Host, None)];
    store.component_create(&c).await.unwrap();
    store
        .component_create(&component(
            12,
            Some(id(1)),
            ComponentType::Compute,
            "c-2",
            None,
        ))
        .await
        .unwrap();

    assert_eq!(
        store.component_purge(c.id).await.unwrap(),
        PurgeOutcome::NotDeleted
    );
    assert_eq!(
        store.component_purge(id(404)).await.unwrap(),
        PurgeOutcome::NotFound
    );
    assert!(store.component_soft_delete(c.id).await.unwrap());
    assert!(!store.component_soft_delete(c.id).await.unwrap(), "once");
    assert!(!store.component_soft_delete(id(404)).await.unwrap());
    let deleted = store.component_get(c.id).await.unwrap().unwrap();
    assert!(deleted.deleted_at.is_some());
    assert_eq!(
        component_names(&store.components_of_racks(&[id(1)]).await.unwrap()),
        ["c-2"]
    );
    assert_eq!(
        store.component_purge(c.id).await.unwrap(),
        PurgeOutcome::Purged
    );
    assert_eq!(store.component_get(c.id).await.unwrap(), None);
    assert_eq!(db.count("bmc").await, 0);
    assert!(store.component_get(id(12)).await.unwrap().is_some());
    // Its identity can be used again.
    let mut again = component(
        13,
        Some(id(1)),
        ComponentType::Compute,
        "c-1",
        Some("c-ext"),
    );
    again.bmcs = vec![bmc("aa:bb:cc:00:00:01", BmcType::Host, None)];
    store.component_create(&again).await.unwrap();
}

fn nvl_domain(n: u128, name: Option<&str>, external_id: Option<&str>) -> NvlDomain {
    NvlDomain {
        id: id(n),
        name: name.map(str::to_string),
        external_id: external_id.map(str::to_string),
        nmxc_cluster_id: Some(format!("nmxc-{n}")),
        created_at: epoch(),
        updated_at: epoch(),
        deleted_at: None,
    }
}

/// Issue 33: an ingest or decommission task moves its rack in the
/// transaction that writes the task — accepted ingest: ingesting; completed:
/// ingested (stamped); abandoned: back; completed decommission:
/// decommissioned (stamped); a later ingest brings it back. Listings filter
/// by status.
async fn rack_lifecycle_moves_with_its_ingest_and_decommission_tasks(db: &Db) {
    use rackflow_domain::inventory::{LifecycleChange, LifecycleStatus as L};
    let store = db.store();
    let r = rack(1, "rack-1", None);
    store.rack_create(&r, &[]).await.unwrap();
    store
        .rack_create(&rack(2, "rack-2", None), &[])
        .await
        .unwrap();
    let status = |id| async move { store.rack_get(id, false).await.unwrap().unwrap().lifecycle };
    assert_eq!(status(r.id).await.status, L::New, "imported as new");

    let ingest = |n: u128, code: &str, ty: TaskType| Task {
        task_type: ty,
        information: TaskInformation {
            code: code.into(),
            override_readiness_check: false,
            firmware: None,
        },
        ..task(n, r.id)
    };
    let first = submit(
        store,
        ingest(0x1_0001, "ingest", TaskType::BringUp),
        TaskStatus::Running,
    )
    .await;
    assert_eq!(status(r.id).await.status, L::Ingesting);
    // A failed ingest of a never-ingested rack: new again.
    let end = |status: TaskStatus, change| TaskUpdate {
        expected: vec![TaskStatus::Running],
        status: Some(status),
        rack_lifecycle: change,
        ..Default::default()
    };
    let failed = TaskStatus::Failed;
    store
        .task_update(
            first.id,
            &end(
                failed,
                LifecycleChange::of(TaskType::BringUp, "ingest", failed),
            ),
        )
        .await
        .unwrap()
        .expect("updated");
    assert_eq!(status(r.id).await.status, L::New);

    let second = submit(
        store,
        ingest(0x1_0002, "ingest", TaskType::BringUp),
        TaskStatus::Running,
    )
    .await;
    let done = TaskStatus::Completed;
    assert!(
        store
            .task_update_quiet(
                second.id,
                &end(done, LifecycleChange::of(TaskType::BringUp, "ingest", done)),
            )
            .await
            .unwrap()
    );
    let now = status(r.id).await;
    assert_eq!(now.status, L::Ingested);
    assert!(now.ingested_at.is_some());
    // An update that does not apply (the task is no longer running) moves
    // nothing.
    store
        .task_update(
            second.id,
            &end(failed, Some(LifecycleChange::IngestAbandoned)),
        )
        .await
        .unwrap();
    assert_eq!(status(r.id).await.status, L::Ingested);

    let retire = submit(
        store,
        ingest(0x1_0003, "decommission", TaskType::Decommission),
        TaskStatus::Running,
    )
    .await;
    assert_eq!(status(r.id).await.status, L::Ingested, "running: unchanged");
    store
        .task_updates_quiet(&[(
            retire.id,
            end(
                done,
                LifecycleChange::of(TaskType::Decommission, "decommission", done),
            ),
        )])
        .await
        .unwrap();
    let now = status(r.id).await;
    assert_eq!(now.status, L::Decommissioned);
    assert!(now.decommissioned_at.is_some());
    let listed = |lifecycle: Vec<L>| async move {
        let (racks, total) = store
            .rack_list(
                &RackFilter {
                    lifecycle,
                    ..Default::default()
                },
                all(),
            )
            .await
            .unwrap();
        (rack_names(&racks), total)
    };
    assert_eq!(
        listed(vec![L::Decommissioned]).await,
        (vec!["rack-1".to_string()], 1)
    );
    assert_eq!(
        listed(vec![L::New, L::Ingested]).await,
        (vec!["rack-2".to_string()], 1)
    );

    // A re-ingest that is abandoned leaves it decommissioned; one that
    // completes brings it back.
    let again = submit(
        store,
        ingest(0x1_0004, "ingest", TaskType::BringUp),
        TaskStatus::Running,
    )
    .await;
    assert_eq!(status(r.id).await.status, L::Ingesting);
    store
        .task_update(
            again.id,
            &end(
                TaskStatus::Terminated,
                Some(LifecycleChange::IngestAbandoned),
            ),
        )
        .await
        .unwrap();
    assert_eq!(status(r.id).await.status, L::Decommissioned);
    let back = submit(
        store,
        ingest(0x1_0005, "ingest", TaskType::BringUp),
        TaskStatus::Running,
    )
    .await;
    store
        .task_update(back.id, &end(done, Some(LifecycleChange::Ingested)))
        .await
        .unwrap();
    let now = status(r.id).await;
    assert_eq!((now.status, now.decommissioned_at), (L::Ingested, None));
}

async fn nvl_domains_create_lookup_list_and_membership(db: &Db) {
    let store = db.store();
    let first = nvl_domain(0xD1, Some("domain-b"), Some("nvl-1"));
    store.nvl_domain_create(&first).await.unwrap();
    store
        .nvl_domain_create(&nvl_domain(0xD2, Some("domain-a"), None))
        .await
        .unwrap();
    store
        .nvl_domain_create(&nvl_domain(0xD3, None, None))
        .await
        .unwrap();

    let got = store.nvl_domain_get(first.id).await.unwrap().unwrap();
    assert_eq!(
        NvlDomain {
            created_at: first.created_at,
            updated_at: first.updated_at,
            ..got.clone()
        },
        first
    );
    assert!(got.created_at > epoch(), "stamped by the store");
    assert_eq!(
        store.nvl_domain_get_by_name("domain-b").await.unwrap(),
        Some(got.clone())
    );
    assert_eq!(
        store.nvl_domain_get_by_external_id("nvl-1").await.unwrap(),
        Some(got)
    );
    assert_eq!(store.nvl_domain_get(id(404)).await.unwrap(), None);
    assert_eq!(store.nvl_domain_get_by_name("nope").await.unwrap(), None);

    let count_before = db.count("nvldomain").await;
    let dup_name = store
        .nvl_domain_create(&nvl_domain(0xD4, Some("domain-b"), None))
        .await;
    assert_eq!(already_exists(dup_name), "NVL domain name \"domain-b\"");
    let dup_external = store
        .nvl_domain_create(&nvl_domain(0xD5, Some("domain-c"), Some("nvl-1")))
        .await;
    assert_eq!(
        already_exists(dup_external),
        "NVL domain external_id \"nvl-1\""
    );
    assert_eq!(db.count("nvldomain").await, count_before, "nothing written");

    let listed = |name: NameQuery, descending: bool, page: Page| async move {
        let query = NvlDomainQuery {
            name,
            descending,
            external_only: false,
        };
        let (domains, total) = store.nvl_domain_list(&query, page).await.unwrap();
        (
            domains.iter().map(NvlDomain::label).collect::<Vec<_>>(),
            total,
        )
    };
    let unnamed = id(0xD3).to_string();
    assert_eq!(
        listed(NameQuery::default(), false, all()).await,
        (
            vec![unnamed.clone(), "domain-a".into(), "domain-b".into()],
            3
        )
    );
    assert_eq!(
        listed(NameQuery::default(), true, page(0, 2)).await,
        (vec!["domain-b".into(), "domain-a".into()], 3)
    );
    let pattern = NameQuery {
        patterns: vec!["-a".into()],
        is_wildcard: true,
        use_or: false,
    };
    assert_eq!(
        listed(pattern, false, all()).await,
        (vec!["domain-a".to_string()], 1)
    );
    // The NVLink-domain view: only domains with an external id, whose
    // patterns match the name or the external id.
    let external = |patterns: &[&str]| {
        let query = NvlDomainQuery {
            name: NameQuery {
                patterns: patterns.iter().map(|p| p.to_string()).collect(),
                is_wildcard: true,
                use_or: true,
            },
            external_only: true,
            descending: false,
        };
        async move {
            let (domains, total) = store.nvl_domain_list(&query, all()).await.unwrap();
            (
                domains.iter().map(NvlDomain::label).collect::<Vec<_>>(),
                total,
            )
        }
    };
    assert_eq!(external(&[]).await, (vec!["domain-b".to_string()], 1));
    assert_eq!(external(&["nvl-"]).await, (vec!["domain-b".to_string()], 1));
    assert_eq!(external(&["-b"]).await, (vec!["domain-b".to_string()], 1));
    assert_eq!(external(&["-a", "zzz"]).await, (Vec::new(), 0));
    let many = store
        .nvl_domains_get_many(&[id(0xD3), first.id, id(404), id(0xD2)])
        .await
        .unwrap();
    assert_eq!(
        many.iter().map(|d| d.id).collect::<Vec<_>>(),
        [first.id, id(0xD2), id(0xD3)]
    );

    // Membership: set, list, clear; deleted racks neither join nor list.
    let mut members = Vec::new();
    for n in 1..=3 {
        let mut r = rack(n, &format!("rack-{n}"), None);
        r.nvl_domain_id = None;
        store.rack_create(&r, &[]).await.unwrap();
        members.push(r.id);
    }
    assert_eq!(
        store
            .racks_set_nvl_domain(&[id(2), id(1), id(404)], Some(first.id))
            .await
            .unwrap(),
        2
    );
    let of = |ids: Vec<Uuid>| async move {
        rack_names(&store.racks_of_nvl_domains(&ids).await.unwrap())
    };
    assert_eq!(of(vec![first.id]).await, ["rack-1", "rack-2"]);
    assert!(of(vec![id(0xD2)]).await.is_empty());
    let (in_domain, total) = store
        .rack_list(
            &RackFilter {
                nvl_domain_id: Some(first.id),
                ..Default::default()
            },
            all(),
        )
        .await
        .unwrap();
    assert_eq!(
        (rack_names(&in_domain), total),
        (vec!["rack-1".to_string(), "rack-2".into()], 2)
    );
    assert_eq!(
        store
            .rack_get(id(1), false)
            .await
            .unwrap()
            .unwrap()
            .nvl_domain_id,
        Some(first.id)
    );
    store
        .racks_set_nvl_domain(&[id(3)], Some(id(0xD2)))
        .await
        .unwrap();
    assert_eq!(
        of(vec![first.id, id(0xD2)]).await,
        ["rack-1", "rack-2", "rack-3"]
    );
    assert_eq!(store.racks_set_nvl_domain(&[id(1)], None).await.unwrap(), 1);
    assert_eq!(of(vec![first.id]).await, ["rack-2"]);
    assert!(store.rack_soft_delete(id(2)).await.unwrap());
    assert!(of(vec![first.id]).await.is_empty());
    assert_eq!(
        store
            .racks_set_nvl_domain(&[id(2)], Some(first.id))
            .await
            .unwrap(),
        0
    );
}

async fn racks_import_creates_the_new_and_finds_the_known(db: &Db) {
    let store = db.store();
    store
        .rack_create(&rack(1, "known", Some("r-1")), &[])
        .await
        .unwrap();

    let mut c21 = component(21, None, ComponentType::Compute, "c-21", Some("m-21"));
    c21.bmcs = vec![
        bmc("AA-BB-CC-DD-EE-21", BmcType::Host, Some("10.0.0.21")),
        bmc("aa:bb:cc:dd:ee:22", BmcType::Dpu, None),
    ];
    let c22 = component(22, None, ComponentType::NvSwitch, "c-22", Some("m-22"));
    let batch = vec![
        (rack(2, "new", Some("r-2")), vec![c21.clone(), c22.clone()]),
        (rack(3, "known again", Some("r-1")), vec![]),
        (rack(4, "no external id", None), vec![]),
        (rack(5, "new again", Some("r-2")), vec![]),
    ];
    let outcome = store.racks_import(&batch).await.unwrap();
    assert_eq!(
        outcome,
        vec![
            RackImport::Created(id(2)),
            RackImport::Existing(id(1)),
            RackImport::Created(id(4)),
            RackImport::Existing(id(2)),
        ]
    );
    assert_eq!(db.count("rack").await, 3);
    assert_eq!(db.count("bmc").await, 2);

    // Read back as a rack created on its own would be.
    let got = store.rack_get(id(2), false).await.unwrap().unwrap();
    assert_eq!(
        (got.name.as_str(), got.external_id.as_deref()),
        ("new", Some("r-2"))
    );
    assert_eq!(got.location, rack(2, "new", None).location);
    assert_eq!(got.nvl_domain_id, Some(id(0xD0_0002)));
    let components = store.components_of_racks(&[id(2)]).await.unwrap();
    assert_eq!(components.len(), 2);
    for (read, written) in components.iter().zip([&c21, &c22]) {
        assert_eq!(read.id, written.id);
        assert_eq!(read.rack_id, Some(id(2)));
        assert_eq!(read.component_type, written.component_type);
        assert_eq!(read.external_id, written.external_id);
        assert_eq!(read.position, written.position);
        assert_eq!(read.power_state, written.power_state);
        assert_eq!(read.firmware_version, written.firmware_version);
    }
    let macs: Vec<&str> = components[0]
        .bmcs
        .iter()
        .map(|b| b.mac_address.as_str())
        .collect();
    assert_eq!(macs, ["aa:bb:cc:dd:ee:21", "aa:bb:cc:dd:ee:22"]);

    // The racks with an external id again: nothing new.
    let known: Vec<_> = batch
        .into_iter()
        .filter(|(r, _)| r.external_id.is_some())
        .collect();
    let again = store.racks_import(&known).await.unwrap();
    assert_eq!(
        again,
        vec![
            RackImport::Existing(id(2)),
            RackImport::Existing(id(1)),
            RackImport::Existing(id(2)),
        ]
    );
    assert_eq!(db.count("rack").await, 3);
    assert_eq!(db.count("component").await, 2);
}

/// PostgreSQL: a fleet import that grows the inventory well past the
/// planner's statistics analyzes the tables it wrote. Without statistics
/// the planner guessed that a component-id list matched 0.5 % of the BMC
/// table and scanned all of it for every task of a large run. (The counters
/// the store reads lag the writes by a second or so: a later batch
/// triggers the `ANALYZE` an earlier one earned.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_racks_import_refreshes_planner_statistics() {
    let Some(db) = Db::postgres().await else {
        return;
    };
    let store = db.store();
    let analyzed = "SELECT COUNT(*) FROM pg_stat_user_tables \
                    WHERE relname IN ('component', 'bmc') AND last_analyze IS NOT NULL";
    assert_eq!(db.scalar(analyzed).await, 0, "analyzed before any import");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut next: u128 = 1;
    loop {
        // 20 racks of 30 components with a BMC each per batch.
        let mut batch = Vec::new();
        for _ in 0..20 {
            let rack_n = next;
            next += 1;
            let components = (0..30)
                .map(|_| {
                    let n = next;
                    next += 1;
                    let mut c = component(
                        n,
                        None,
                        ComponentType::Compute,
                        "c",
                        Some(&format!("m-{n}")),
                    );
                    c.bmcs = vec![bmc(
                        &format!(
                            "02:00:00:{:02x}:{:02x}:{:02x}",
                            (n >> 16) & 0xff,
                            (n >> 8) & 0xff,
                            n & 0xff
                        ),
                        BmcType::Host,
                        None,
                    )];
                    c
                })
                .collect();
            let external = format!("r-{rack_n}");
            batch.push((rack(rack_n, "r", Some(&external)), components));
        }
        store.racks_import(&batch).await.unwrap();
        if db.scalar(analyzed).await == 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "component and bmc not analyzed after {} components",
            db.count("component").await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    db.finish().await;
}

async fn racks_import_names_the_rack_that_breaks_a_batch(db: &Db) {
    let store = db.store();
    let taken = component(11, None, ComponentType::Compute, "c-11", Some("m-1"));
    store
        .rack_create(&rack(1, "first", Some("r-1")), &[taken])
        .await
        .unwrap();
    let batch = vec![
        (rack(2, "fine", Some("r-2")), vec![]),
        (
            rack(3, "clash", Some("r-3")),
            vec![component(
                31,
                None,
                ComponentType::Compute,
                "c-31",
                Some("m-1"),
            )],
        ),
        (rack(4, "after", Some("r-4")), vec![]),
    ];
    assert_eq!(
        already_exists(store.racks_import(&batch).await.map(|_| ())),
        r#"component type "Compute" external_id "m-1""#
    );
    // The racks before the one that broke the batch are in, it and the
    // rest are not: importing again goes on from there.
    assert!(store.rack_get(id(2), false).await.unwrap().is_some());
    assert_eq!(store.rack_get(id(3), true).await.unwrap(), None);
    assert_eq!(store.rack_get(id(4), true).await.unwrap(), None);
}

async fn rack_create_conflicts_write_nothing(db: &Db) {
    let store = db.store();
    let mut first = rack(1, "first", Some("r-1"));
    first.serial_number = "S1".to_string();
    let mut c1 = component(11, None, ComponentType::Compute, "c-1", Some("m-1"));
    c1.bmcs = vec![bmc("aa:bb:cc:dd:ee:01", BmcType::Host, None)];
    store.rack_create(&first, &[c1]).await.unwrap();

    // Same external id: refused, its components not written either.
    let dup_external = rack(2, "second", Some("r-1"));
    let err = already_exists(
        store
            .rack_create(
                &dup_external,
                &[component(21, None, ComponentType::Compute, "c-21", None)],
            )
            .await,
    );
    assert_eq!(err, r#"rack external_id "r-1""#);
    assert_eq!(
        StoreError::AlreadyExists(err).to_string(),
        r#"rack external_id "r-1" already exists"#
    );

    let mut dup_serial = rack(3, "third", None);
    dup_serial.serial_number = "S1".to_string();
    assert_eq!(
        already_exists(store.rack_create(&dup_serial, &[]).await),
        r#"rack manufacturer "NVIDIA" serial_number "S1""#
    );

    let dup_id = rack(1, "again", None);
    assert_eq!(
        already_exists(store.rack_create(&dup_id, &[]).await),
        format!("rack id \"{}\"", id(1))
    );

    // A component clash rolls back the rack and the components before it.
    let fourth = rack(4, "fourth", Some("r-4"));
    assert_eq!(
        already_exists(
            store
                .rack_create(
                    &fourth,
                    &[
                        component(41, None, ComponentType::Compute, "c-41", Some("m-41")),
                        component(42, None, ComponentType::Compute, "c-42", Some("m-1")),
                    ],
                )
                .await
        ),
        r#"component type "Compute" external_id "m-1""#
    );

    // A BMC clash, with the MAC given in another spelling.
    let fifth = rack(5, "fifth", None);
    let mut c51 = component(51, None, ComponentType::NvSwitch, "c-51", Some("m-1"));
    c51.bmcs = vec![bmc("AA-BB-CC-DD-EE-01", BmcType::Host, None)];
    assert_eq!(
        already_exists(store.rack_create(&fifth, &[c51]).await),
        r#"bmc mac_address "aa:bb:cc:dd:ee:01""#
    );

    assert_eq!(db.count("rack").await, 1);
    assert_eq!(db.count("component").await, 1);
    assert_eq!(db.count("bmc").await, 1);
    for n in [2, 3, 4, 5] {
        assert_eq!(store.rack_get(id(n), true).await.unwrap(), None);
    }

    // The same external id under another type is fine.
    store
        .rack_create(
            &fifth,
            &[component(
                52,
                None,
                ComponentType::NvSwitch,
                "c-52",
                Some("m-1"),
            )],
        )
        .await
        .unwrap();
    assert_eq!(db.count("component").await, 2);
}

// ---- components ------------------------------------------------------------

async fn component_create_list_and_filters(db: &Db) {
    let store = db.store();
    let (a, b) = (rack(0xA, "a", None), rack(0xB, "b", None));
    store.rack_create(&a, &[]).await.unwrap();
    store.rack_create(&b, &[]).await.unwrap();

    let mut fixtures = vec![
        component(
            1,
            Some(b.id),
            ComponentType::PowerShelf,
            "b-shelf",
            Some("ps-1"),
        ),
        component(2, None, ComponentType::Compute, "loose", None),
        component(
            3,
            Some(a.id),
            ComponentType::NvSwitch,
            "a-switch",
            Some("sw-1"),
        ),
        component(
            4,
            Some(a.id),
            ComponentType::Compute,
            "a-compute-slot2",
            Some("m-2"),
        ),
        component(
            5,
            Some(a.id),
            ComponentType::Compute,
            "a-compute-slot1",
            Some("m-1"),
        ),
        component(
            6,
            Some(a.id),
            ComponentType::Compute,
            "a-compute-slot1-tray1",
            None,
        ),
    ];
    fixtures[3].position.slot_id = 2;
    fixtures[5].position.tray_idx = 1;
    fixtures[4].bmcs = vec![
        bmc("aa:bb:cc:dd:ee:01", BmcType::Host, Some("10.0.0.1")),
        bmc("aa:bb:cc:dd:ee:02", BmcType::Dpu, Some("10.0.0.2")),
    ];
    fixtures[4].description = Some("first tray".to_string());
    for c in &fixtures {
        store.component_create(c).await.unwrap();
    }

    let got = store
        .component_get(id(5))
        .await
        .unwrap()
        .expect("component 5");
    assert_eq!(got, stamped_component(fixtures[4].clone(), &got));
    assert_eq!(got.created_at, got.updated_at);
    assert_eq!(store.component_get(id(404)).await.unwrap(), None);

    let (listed, total) = store
        .component_list(&ComponentFilterQuery::default(), Page::DEFAULT)
        .await
        .unwrap();
    assert_eq!(total, 6);
    // rack id, type name, slot, tray, name, id; unassigned last.
    assert_eq!(
        component_names(&listed),
        [
            "a-compute-slot1",
            "a-compute-slot1-tray1",
            "a-compute-slot2",
            "a-switch",
            "b-shelf",
            "loose"
        ]
    );
    assert_eq!(listed[0], got, "listings carry the BMCs too");

    let (paged, total) = store
        .component_list(&ComponentFilterQuery::default(), page(2, 3))
        .await
        .unwrap();
    assert_eq!(total, 6);
    assert_eq!(paged, listed[2..5]);

    let filtered = |filter: ComponentFilterQuery| async move {
        let (components, total) = store.component_list(&filter, all()).await.unwrap();
        assert_eq!(total, components.len() as i64);
        component_names(&components)
    };
    assert_eq!(
        filtered(ComponentFilterQuery {
            rack_ids: vec![b.id],
            ..Default::default()
        })
        .await,
        ["b-shelf"]
    );
    assert_eq!(
        filtered(ComponentFilterQuery {
            types: vec![ComponentType::Compute],
            ..Default::default()
        })
        .await,
        [
            "a-compute-slot1",
            "a-compute-slot1-tray1",
            "a-compute-slot2",
            "loose"
        ]
    );
    assert_eq!(
        filtered(ComponentFilterQuery {
            rack_ids: vec![a.id],
            types: vec![ComponentType::NvSwitch, ComponentType::PowerShelf],
            ..Default::default()
        })
        .await,
        ["a-switch"]
    );
    assert_eq!(
        filtered(ComponentFilterQuery {
            ids: vec![id(1), id(2)],
            ..Default::default()
        })
        .await,
        ["b-shelf", "loose"]
    );
    assert_eq!(
        filtered(ComponentFilterQuery {
            external_ids: vec!["m-1".into(), "ps-1".into()],
            ..Default::default()
        })
        .await,
        ["a-compute-slot1", "b-shelf"]
    );
    assert_eq!(
        filtered(ComponentFilterQuery {
            names: vec!["loose".into(), "a-switch".into()],
            ..Default::default()
        })
        .await,
        ["a-switch", "loose"]
    );

    let by_mac = store.components_by_bmc_mac("AABB.CCDD.EE02").await.unwrap();
    assert_eq!(component_names(&by_mac), ["a-compute-slot1"]);
    assert!(
        store
            .components_by_bmc_mac("aa:bb:cc:dd:ee:ff")
            .await
            .unwrap()
            .is_empty()
    );

    let of_racks = store.components_of_racks(&[b.id, a.id]).await.unwrap();
    assert_eq!(component_names(&of_racks), component_names(&listed[..5]));
    assert!(of_racks.iter().any(|c| !c.bmcs.is_empty()));
    // Their keys, in the same order (read one row per rack).
    let keys = store.component_keys_of_racks(&[b.id, a.id]).await.unwrap();
    let expected: Vec<(Uuid, ComponentType, Uuid)> = of_racks
        .iter()
        .map(|c| (c.rack_id.unwrap(), c.component_type, c.id))
        .collect();
    assert_eq!(keys, expected);
    assert!(
        store
            .component_keys_of_racks(&[id(0xDEAD)])
            .await
            .unwrap()
            .is_empty()
    );
    // The same rows without their BMCs.
    let without = store
        .components_of_racks_without_bmcs(&[b.id, a.id])
        .await
        .unwrap();
    let stripped: Vec<Component> = of_racks
        .iter()
        .cloned()
        .map(|mut c| {
            c.bmcs.clear();
            c
        })
        .collect();
    assert_eq!(without, stripped);

    let orphan = component(7, Some(id(0xDEAD)), ComponentType::Compute, "orphan", None);
    match store.component_create(&orphan).await {
        Err(StoreError::NotFound(what)) => assert_eq!(what, format!("rack \"{}\"", id(0xDEAD))),
        other => panic!("expected NotFound, got {other:?}"),
    }
    assert_eq!(db.count("component").await, 6);
}

async fn components_observe_records_facts_newest_wins(db: &Db) {
    use rackflow_domain::inventory::Observation;
    let store = db.store();
    let a = rack(0xA, "a", None);
    let c = component(1, None, ComponentType::Compute, "c", Some("m-1"));
    let d = component(2, None, ComponentType::Compute, "d", Some("m-2"));
    store
        .rack_create(&a, &[c.clone(), d.clone()])
        .await
        .unwrap();
    let fresh = store.component_get(c.id).await.unwrap().expect("c");
    assert_eq!(fresh.firmware_observed_at, None, "imported, never observed");
    assert_eq!(fresh.power_observed_at, None);

    let t1 = epoch() + chrono::Duration::seconds(10);
    let t2 = t1 + chrono::Duration::seconds(5);
    store
        .components_observe(&[
            Observation {
                component_id: c.id,
                firmware_version: Some("2.0.0".into()),
                power_state: None,
                observed_at: t2,
            },
            Observation {
                component_id: d.id,
                firmware_version: None,
                power_state: Some("Off".into()),
                observed_at: t1,
            },
            // Unknown ids are skipped, not an error.
            Observation {
                component_id: id(0xDEAD),
                firmware_version: Some("9".into()),
                power_state: None,
                observed_at: t1,
            },
        ])
        .await
        .unwrap();
    let got_c = store.component_get(c.id).await.unwrap().expect("c");
    assert_eq!(got_c.firmware_version, "2.0.0");
    assert_eq!(got_c.firmware_observed_at, Some(t2));
    assert_eq!(
        got_c.power_state.as_deref(),
        Some("on"),
        "power not observed"
    );
    assert_eq!(got_c.power_observed_at, None);
    let got_d = store.component_get(d.id).await.unwrap().expect("d");
    assert_eq!(got_d.firmware_version, "1.0.0");
    assert_eq!(got_d.power_state.as_deref(), Some("Off"));
    assert_eq!(got_d.power_observed_at, Some(t1));

    // An older observation (a slower step finishing later) does not win.
    store
        .components_observe(&[Observation {
            component_id: c.id,
            firmware_version: Some("1.5.0".into()),
            power_state: Some("On".into()),
            observed_at: t1,
        }])
        .await
        .unwrap();
    let got_c = store.component_get(c.id).await.unwrap().expect("c");
    assert_eq!(got_c.firmware_version, "2.0.0");
    assert_eq!(got_c.firmware_observed_at, Some(t2));
    assert_eq!(got_c.power_state.as_deref(), Some("On"), "first power fact");
    assert_eq!(got_c.power_observed_at, Some(t1));

    // A version patched by hand is a claim again, not an observation.
    let patched = store
        .component_patch(
            c.id,
            &ComponentPatch {
                firmware_version: Some("3.0.0".into()),
                ..ComponentPatch::default()
            },
        )
        .await
        .unwrap()
        .expect("patched");
    assert_eq!(patched.firmware_observed_at, None);
    assert_eq!(patched.power_observed_at, Some(t1));
}

/// The readiness gate's question: of these ids, which are in one of these
/// operational states (deleted components and unknown ids never are).
async fn components_in_states_answers_the_readiness_gate(db: &Db) {
    let store = db.store();
    let a = rack(1, "a", Some("a-ext"));
    let comps: Vec<Component> = (10..14)
        .map(|i| {
            component(
                i,
                Some(a.id),
                ComponentType::Compute,
                &format!("c{i}"),
                None,
            )
        })
        .collect();
    store.rack_create(&a, &comps).await.unwrap();
    let set = |state: Option<OperationalState>| ComponentPatch {
        operational: Some(state.map(|state| OperationalStatus {
            state,
            reason: String::new(),
        })),
        ..Default::default()
    };
    store
        .component_patch(comps[0].id, &set(Some(OperationalState::InService)))
        .await
        .unwrap();
    store
        .component_patch(comps[1].id, &set(Some(OperationalState::Drained)))
        .await
        .unwrap();
    store
        .component_patch(comps[2].id, &set(Some(OperationalState::InService)))
        .await
        .unwrap();
    let ids: Vec<Uuid> = comps.iter().map(|c| c.id).chain([Uuid::new_v4()]).collect();
    let mut held = store
        .components_in_states(&ids, &[OperationalState::InService])
        .await
        .unwrap();
    held.sort();
    let mut want = vec![comps[0].id, comps[2].id];
    want.sort();
    assert_eq!(held, want);
    assert_eq!(
        store
            .components_in_states(
                &ids,
                &[OperationalState::Drained, OperationalState::Maintenance]
            )
            .await
            .unwrap(),
        [comps[1].id]
    );
    assert!(
        store
            .components_in_states(&ids, &[])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .components_in_states(&[], &[OperationalState::InService])
            .await
            .unwrap()
            .is_empty()
    );
    // Clearing releases it; a deleted rack's components are never held.
    store
        .component_patch(comps[2].id, &set(None))
        .await
        .unwrap();
    let cleared = store.component_get(comps[2].id).await.unwrap().expect("c2");
    assert_eq!(cleared.operational, None);
    assert_eq!(
        store
            .components_in_states(&ids, &[OperationalState::InService])
            .await
            .unwrap(),
        [comps[0].id]
    );
    assert!(store.rack_soft_delete(a.id).await.unwrap());
    assert!(
        store
            .components_in_states(&ids, &[OperationalState::InService])
            .await
            .unwrap()
            .is_empty()
    );
}

async fn component_patch_updates_fields_and_upserts_bmcs(db: &Db) {
    let store = db.store();
    let (a, b) = (rack(0xA, "a", None), rack(0xB, "b", None));
    let mut c = component(1, None, ComponentType::Compute, "c", Some("m-1"));
    c.bmcs = vec![bmc("aa:bb:cc:dd:ee:01", BmcType::Host, Some("10.0.0.1"))];
    c.description = Some("old".to_string());
    let mut d = component(2, None, ComponentType::Compute, "d", Some("m-2"));
    d.bmcs = vec![bmc("aa:bb:cc:dd:ee:03", BmcType::Host, None)];
    store.rack_create(&a, &[c.clone(), d]).await.unwrap();
    store.rack_create(&b, &[]).await.unwrap();
    let original = store.component_get(c.id).await.unwrap().expect("c");

    let patched = store
        .component_patch(
            c.id,
            &ComponentPatch {
                firmware_version: Some("2.0.0".into()),
                slot_id: Some(7),
                tray_idx: Some(3),
                host_id: Some(1),
                description: Some("moved".into()),
                rack_id: Some(Some(b.id)),
                bmcs: vec![
                    bmc("AA:BB:CC:DD:EE:01", BmcType::Dpu, Some("10.0.0.9")),
                    bmc("aa:bb:cc:dd:ee:02", BmcType::Host, Some("10.0.0.2")),
                ],
                operational: Some(Some(OperationalStatus {
                    state: OperationalState::InService,
                    reason: "tenant job 42".into(),
                })),
            },
        )
        .await
        .unwrap()
        .expect("patched");
    let mut expected = original.clone();
    expected.operational = Some(OperationalStatus {
        state: OperationalState::InService,
        reason: "tenant job 42".into(),
    });
    expected.firmware_version = "2.0.0".into();
    expected.position = Position {
        slot_id: 7,
        tray_idx: 3,
        host_id: 1,
    };
    expected.description = Some("moved".into());
    expected.rack_id = Some(b.id);
    expected.bmcs = vec![
        bmc("aa:bb:cc:dd:ee:01", BmcType::Dpu, Some("10.0.0.9")),
        bmc("aa:bb:cc:dd:ee:02", BmcType::Host, Some("10.0.0.2")),
    ];
    expected.updated_at = patched.updated_at;
    assert_eq!(patched, expected);
    assert!(patched.updated_at >= original.updated_at);
    assert_eq!(
        store.component_get(c.id).await.unwrap(),
        Some(patched.clone())
    );

    // Unset fields stay; an empty description clears it; Some(None) unassigns.
    let cleared = store
        .component_patch(
            c.id,
            &ComponentPatch {
                description: Some(String::new()),
                rack_id: Some(None),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .expect("patched");
    assert_eq!(cleared.description, None);
    assert_eq!(cleared.rack_id, None);
    assert_eq!(cleared.firmware_version, "2.0.0");
    assert_eq!(cleared.position.slot_id, 7);
    assert_eq!(cleared.bmcs, expected.bmcs);

    // A MAC owned by another component is refused and nothing changes.
    let err = store
        .component_patch(
            c.id,
            &ComponentPatch {
                firmware_version: Some("3.0.0".into()),
                bmcs: vec![bmc("aa:bb:cc:dd:ee:03", BmcType::Host, None)],
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::AlreadyExists(what) if what == r#"bmc mac_address "aa:bb:cc:dd:ee:03""#),
        "{err:?}"
    );
    let unchanged = store.component_get(c.id).await.unwrap().expect("c");
    assert_eq!(unchanged, cleared);
    assert_eq!(
        store.component_get(id(2)).await.unwrap().expect("d").bmcs,
        [bmc("aa:bb:cc:dd:ee:03", BmcType::Host, None)]
    );

    let err = store
        .component_patch(
            c.id,
            &ComponentPatch {
                rack_id: Some(Some(id(0xDEAD))),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");

    assert_eq!(
        store
            .component_patch(id(404), &ComponentPatch::default())
            .await
            .unwrap(),
        None
    );
    assert!(store.rack_soft_delete(a.id).await.unwrap());
    assert_eq!(
        store
            .component_patch(id(2), &ComponentPatch::default())
            .await
            .unwrap(),
        None,
        "soft-deleted components are not patched"
    );
}

// ---- operation runs --------------------------------------------------------

async fn run_create_and_get_round_trip(db: &Db) {
    let store = db.store();
    // The task a target points at must exist (FK, both dialects).
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    submit(store, task(0x7A5C, id(1)), TaskStatus::Completed).await;
    let since = Utc::now().trunc_subsecs(6);
    let mut r = run(1, "nightly upgrade");
    r.description = "upgrade everything".into();
    r.status = RunStatus::Paused;
    r.reason = RunReason::SafetyGate;
    r.status_message = "failure rate 12% over 10%".into();
    r.current_phase_index = 1;
    r.started_at = Some(ts("2024-05-01T10:00:00.123456Z"));
    r.finished_at = Some(ts("2024-05-01T11:30:00Z"));
    let mut t0 = target(10, r.id, 0, 0, TargetStatus::Completed);
    t0.task_id = Some(id(0x7A5C));
    t0.message = "done".into();
    let mut t1 = target(11, r.id, 1, 1, TargetStatus::Blocked);
    t1.retry_after = Some(ts("2024-05-01T10:05:00.654321Z"));
    t1.retry_state = Some(RetryState {
        blocked_since: ts("2024-05-01T10:00:00.5Z"),
        attempts: 2,
        last_retry_delay_seconds: 60,
    });
    // Targets name another run: they are attached to this one regardless.
    let mut t2 = target(12, id(0xBAD), 2, 1, TargetStatus::Pending);
    store
        .run_create(&r, &[t0.clone(), t1.clone(), t2.clone()])
        .await
        .unwrap();

    let got = store.run_get(r.id).await.unwrap().expect("run");
    assert_eq!(got.created_at, got.updated_at);
    assert!(got.created_at >= since && got.created_at <= Utc::now());
    let mut expected = r.clone();
    expected.created_at = got.created_at;
    expected.updated_at = got.updated_at;
    assert_eq!(got, expected);
    assert_eq!(store.run_get(id(404)).await.unwrap(), None);

    let (targets, total) = store
        .run_targets_list(&TargetQuery {
            operation_run_id: r.id,
            status: None,
            phase_scope: PhaseScope::All,
            current_phase_index: 1,
            page: all(),
        })
        .await
        .unwrap();
    assert_eq!(total, 3);
    t2.operation_run_id = r.id;
    for t in [&mut t0, &mut t1, &mut t2] {
        t.created_at = got.created_at;
        t.updated_at = got.created_at;
    }
    assert_eq!(targets, [t0, t1, t2]);

    // Empty description / status message are stored as NULL; nanoseconds
    // are cut to the microseconds both dialects keep.
    let mut plain = run(2, "plain");
    plain.started_at = Some(ts("2024-05-01T10:00:00.123456789Z"));
    store.run_create(&plain, &[]).await.unwrap();
    let got = store.run_get(plain.id).await.unwrap().expect("plain");
    assert_eq!(got.started_at, Some(ts("2024-05-01T10:00:00.123456Z")));
    assert_eq!(
        (got.description.as_str(), got.status_message.as_str()),
        ("", "")
    );
    assert_eq!(
        db.scalar(&format!(
            "SELECT COUNT(*) FROM operation_run WHERE id = '{}' \
             AND description IS NULL AND status_message IS NULL \
             AND operation_type = 'firmware_control' AND operation_code = 'upgrade'",
            plain.id
        ))
        .await,
        1
    );

    assert_eq!(
        already_exists(store.run_create(&plain, &[]).await),
        format!("operation run id \"{}\"", plain.id)
    );

    // A target naming no task: NotFound, nothing written.
    let mut dangling = target(20, id(3), 0, 0, TargetStatus::Submitted);
    dangling.task_id = Some(id(0xDEAD));
    match store.run_create(&run(3, "dangling"), &[dangling]).await {
        Err(StoreError::NotFound(what)) => assert_eq!(what, format!("task {}", id(0xDEAD))),
        other => panic!("expected NotFound, got {other:?}"),
    }
    assert_eq!(store.run_get(id(3)).await.unwrap(), None);
}

async fn run_create_with_a_bad_target_writes_nothing(db: &Db) {
    let store = db.store();
    let r = run(1, "bad");
    let good = target(10, r.id, 0, 0, TargetStatus::Pending);

    let mut dup_sequence = target(11, r.id, 0, 0, TargetStatus::Pending);
    assert_eq!(
        already_exists(
            store
                .run_create(&r, &[good.clone(), dup_sequence.clone()])
                .await
        ),
        format!("operation run target sequence_index 0 in run \"{}\"", r.id)
    );

    dup_sequence.sequence_index = 1;
    dup_sequence.rack_id = good.rack_id;
    assert_eq!(
        already_exists(
            store
                .run_create(&r, &[good.clone(), dup_sequence.clone()])
                .await
        ),
        format!(
            "operation run target rack_id \"{}\" in run \"{}\"",
            good.rack_id, r.id
        )
    );

    let mut dup_id = target(10, r.id, 1, 0, TargetStatus::Pending);
    dup_id.rack_id = id(0xFFFF);
    assert_eq!(
        already_exists(store.run_create(&r, &[good.clone(), dup_id]).await),
        format!("operation run target id \"{}\"", good.id)
    );

    let negative_phase = target(12, r.id, 1, -1, TargetStatus::Pending);
    let err = store
        .run_create(&r, &[good.clone(), negative_phase])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Database(_)), "{err:?}");

    assert_eq!(store.run_get(r.id).await.unwrap(), None);
    assert_eq!(db.count("operation_run").await, 0);
    assert_eq!(db.count("operation_run_target").await, 0);

    store.run_create(&r, &[good]).await.unwrap();
    assert_eq!(db.count("operation_run_target").await, 1);
}

/// Runs named `names` (ids 1, 2, … in order), each in its own instant.
async fn create_runs(store: &dyn Store, names: &[&str]) -> Vec<OperationRun> {
    let mut runs = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let r = run(i as u128 + 1, name);
        store.run_create(&r, &[]).await.unwrap();
        runs.push(r);
    }
    runs
}

async fn listed_names(store: &dyn Store, filter: RunListFilter) -> Vec<String> {
    let (runs, total) = store.run_list(&filter, all()).await.unwrap();
    assert_eq!(total, runs.len() as i64);
    let mut names = run_names(&runs);
    names.sort();
    names
}

fn name_filter(patterns: &[&str], is_wildcard: bool, use_or: bool) -> RunListFilter {
    RunListFilter {
        name: NameQuery {
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
            is_wildcard,
            use_or,
        },
        ..Default::default()
    }
}

async fn run_list_filters_by_name(db: &Db) {
    let store = db.store();
    create_runs(
        store,
        &[
            "fw-upgrade-a",
            "fw-upgrade-b",
            "FW-UPGRADE-C",
            "rollback",
            "50%_done",
            "500 done",
        ],
    )
    .await;
    let matching = |patterns: &'static [&'static str], wildcard: bool, or: bool| async move {
        listed_names(store, name_filter(patterns, wildcard, or)).await
    };

    assert_eq!(matching(&[], false, false).await.len(), 6);
    assert_eq!(matching(&["rollback"], false, false).await, ["rollback"]);
    assert!(
        matching(&["roll"], false, false).await.is_empty(),
        "equality, not LIKE"
    );
    assert_eq!(
        matching(&["rollback", "fw-upgrade-a", "missing"], false, false).await,
        ["fw-upgrade-a", "rollback"]
    );
    // Wildcards: wrapped in %…%, case-sensitive.
    assert_eq!(
        matching(&["upgrade"], true, false).await,
        ["fw-upgrade-a", "fw-upgrade-b"]
    );
    assert_eq!(matching(&["UPGRADE"], true, false).await, ["FW-UPGRADE-C"]);
    assert_eq!(matching(&["%-a"], true, false).await, ["fw-upgrade-a"]);
    assert_eq!(
        matching(&["fw-upgrade-_"], true, false).await,
        ["fw-upgrade-a", "fw-upgrade-b"]
    );
    // Backslash escapes a wildcard character (PostgreSQL's LIKE default).
    assert_eq!(matching(&[r"50\%\_"], true, false).await, ["50%_done"]);
    assert_eq!(
        matching(&["50_"], true, false).await,
        ["50%_done", "500 done"]
    );
    // Several wildcards: all (AND) or any (OR) must match.
    assert_eq!(matching(&["fw", "-b"], true, false).await, ["fw-upgrade-b"]);
    assert_eq!(
        matching(&["-a", "roll"], true, true).await,
        ["fw-upgrade-a", "rollback"]
    );

    // D6: the OR group is one condition, AND'ed with the other filters.
    let mut r = run(7, "rollback-running");
    r.status = RunStatus::Running;
    store.run_create(&r, &[]).await.unwrap();
    let mut filter = name_filter(&["-a", "roll"], true, true);
    filter.states = vec![StateFilter {
        status: Some(RunStatus::Running),
        reason: None,
    }];
    assert_eq!(listed_names(store, filter).await, ["rollback-running"]);
}

async fn run_list_filters_by_state_and_kind(db: &Db) {
    let store = db.store();
    let fixtures: [(&str, RunStatus, RunReason, &str, &str); 6] = [
        (
            "a",
            RunStatus::Pending,
            RunReason::None,
            "firmware_control",
            "upgrade",
        ),
        (
            "b",
            RunStatus::Running,
            RunReason::None,
            "firmware_control",
            "upgrade",
        ),
        (
            "c",
            RunStatus::Paused,
            RunReason::OperatorPaused,
            "firmware_control",
            "upgrade",
        ),
        (
            "d",
            RunStatus::Paused,
            RunReason::SafetyGate,
            "firmware_control",
            "rollback",
        ),
        (
            "e",
            RunStatus::Completed,
            RunReason::None,
            "power_control",
            "on",
        ),
        (
            "f",
            RunStatus::CompletedWithFailures,
            RunReason::None,
            "power_control",
            "off",
        ),
    ];
    for (i, (name, status, reason, op_type, code)) in fixtures.iter().enumerate() {
        let mut r = run(i as u128 + 1, name);
        r.status = *status;
        r.reason = *reason;
        r.configuration = configuration(op_type, code);
        store.run_create(&r, &[]).await.unwrap();
    }
    let state =
        |status: Option<RunStatus>, reason: Option<RunReason>| StateFilter { status, reason };
    let kind = |operation_type: &str, code: Option<&str>| KindFilter {
        operation_type: operation_type.to_string(),
        code: code.map(str::to_string),
    };
    let by_states = |states: Vec<StateFilter>| {
        listed_names(
            store,
            RunListFilter {
                states,
                ..Default::default()
            },
        )
    };
    let by_kinds = |kinds: Vec<KindFilter>| {
        listed_names(
            store,
            RunListFilter {
                kinds,
                ..Default::default()
            },
        )
    };

    assert_eq!(
        by_states(vec![state(Some(RunStatus::Paused), None)]).await,
        ["c", "d"]
    );
    assert_eq!(
        by_states(vec![state(None, Some(RunReason::SafetyGate))]).await,
        ["d"]
    );
    assert_eq!(
        by_states(vec![state(
            Some(RunStatus::Paused),
            Some(RunReason::OperatorPaused)
        )])
        .await,
        ["c"]
    );
    assert!(
        by_states(vec![state(
            Some(RunStatus::Running),
            Some(RunReason::SafetyGate)
        )])
        .await
        .is_empty()
    );
    assert_eq!(
        by_states(vec![
            state(Some(RunStatus::Running), None),
            state(Some(RunStatus::Paused), Some(RunReason::SafetyGate)),
        ])
        .await,
        ["b", "d"]
    );

    assert_eq!(
        by_kinds(vec![kind("firmware_control", None)]).await,
        ["a", "b", "c", "d"]
    );
    assert_eq!(
        by_kinds(vec![kind("firmware_control", Some("rollback"))]).await,
        ["d"]
    );
    assert_eq!(
        by_kinds(vec![
            kind("power_control", Some("on")),
            kind("firmware_control", Some("rollback"))
        ])
        .await,
        ["d", "e"]
    );
    assert!(by_kinds(vec![kind("nothing", None)]).await.is_empty());

    // States, kinds and name AND together.
    let filter = RunListFilter {
        name: NameQuery {
            patterns: vec!["a".into(), "b".into(), "c".into(), "e".into()],
            is_wildcard: false,
            use_or: false,
        },
        states: vec![
            state(Some(RunStatus::Paused), None),
            state(Some(RunStatus::Pending), None),
            state(Some(RunStatus::Completed), None),
        ],
        kinds: vec![kind("firmware_control", Some("upgrade"))],
    };
    assert_eq!(listed_names(store, filter).await, ["a", "c"]);
}

/// Issue 31 item 8: filters of thousands of entries (the request guard's
/// 10,000 per list) answer on both stores, the same as their distinct
/// entries do — no statement over SQLite's expression-depth or variable
/// limits.
async fn run_list_answers_filters_of_ten_thousand_entries(db: &Db) {
    let store = db.store();
    for (i, (name, status, reason, code)) in [
        ("a", RunStatus::Running, RunReason::None, "upgrade"),
        ("b", RunStatus::Paused, RunReason::SafetyGate, "rollback"),
        ("c", RunStatus::Completed, RunReason::None, "upgrade"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut r = run(i as u128 + 1, name);
        r.status = status;
        r.reason = reason;
        r.configuration = configuration("firmware_control", code);
        store.run_create(&r, &[]).await.unwrap();
    }
    let statuses = [RunStatus::Running, RunStatus::Paused];
    let reasons = [None, Some(RunReason::SafetyGate), Some(RunReason::None)];
    let states: Vec<StateFilter> = (0..10_000)
        .map(|i| StateFilter {
            status: Some(statuses[i % 2]),
            reason: reasons[i % 3],
        })
        .collect();
    let by_states = RunListFilter {
        states,
        ..Default::default()
    };
    assert_eq!(listed_names(store, by_states).await, ["a", "b"]);
    // Reasons alone, many times over.
    let reasons_only = RunListFilter {
        states: (0..10_000)
            .map(|_| StateFilter {
                status: None,
                reason: Some(RunReason::SafetyGate),
            })
            .collect(),
        ..Default::default()
    };
    assert_eq!(listed_names(store, reasons_only).await, ["b"]);
    // 10,000 distinct codes (one of them real) and type-wide entries.
    let mut kinds: Vec<KindFilter> = (0..9_999)
        .map(|i| KindFilter {
            operation_type: "firmware_control".into(),
            code: Some(format!("code-{i}")),
        })
        .collect();
    kinds.push(KindFilter {
        operation_type: "firmware_control".into(),
        code: Some("rollback".into()),
    });
    let by_kinds = RunListFilter {
        kinds: kinds.clone(),
        ..Default::default()
    };
    assert_eq!(listed_names(store, by_kinds).await, ["b"]);
    kinds.push(KindFilter {
        operation_type: "firmware_control".into(),
        code: None,
    });
    let type_wide = RunListFilter {
        kinds,
        ..Default::default()
    };
    assert_eq!(listed_names(store, type_wide).await, ["a", "b", "c"]);
    // 10,000 wildcard names, any of which may match.
    let mut patterns: Vec<String> = (0..9_999).map(|i| format!("nothing-{i}")).collect();
    patterns.push("c".into());
    let by_names = RunListFilter {
        name: NameQuery {
            patterns,
            is_wildcard: true,
            use_or: true,
        },
        ..Default::default()
    };
    assert_eq!(listed_names(store, by_names).await, ["c"]);
}

async fn run_list_orders_pages_and_counts(db: &Db) {
    let store = db.store();
    let (empty, total) = store
        .run_list(&RunListFilter::default(), Page::DEFAULT)
        .await
        .unwrap();
    assert!(empty.is_empty());
    assert_eq!(total, 0);

    let created = create_runs(store, &["r1", "r2", "r3", "r4", "r5"]).await;
    let (runs, total) = store
        .run_list(&RunListFilter::default(), Page::DEFAULT)
        .await
        .unwrap();
    assert_eq!(total, 5);
    assert_eq!(runs.len(), 5);
    for pair in runs.windows(2) {
        assert!(
            (pair[0].created_at, pair[0].id) > (pair[1].created_at, pair[1].id),
            "created_at DESC, id DESC"
        );
    }
    for r in &runs {
        assert_eq!(Some(r), store.run_get(r.id).await.unwrap().as_ref());
    }
    let mut listed_ids: Vec<Uuid> = runs.iter().map(|r| r.id).collect();
    listed_ids.sort();
    assert_eq!(listed_ids, created.iter().map(|r| r.id).collect::<Vec<_>>());

    let (paged, total) = store
        .run_list(&RunListFilter::default(), page(1, 2))
        .await
        .unwrap();
    assert_eq!(total, 5);
    assert_eq!(paged, runs[1..3]);
    let (rest, _) = store
        .run_list(&RunListFilter::default(), page(3, 0))
        .await
        .unwrap();
    assert_eq!(rest, runs[3..]);
    let (beyond, total) = store
        .run_list(&RunListFilter::default(), page(10, 10))
        .await
        .unwrap();
    assert!(beyond.is_empty());
    assert_eq!(total, 5);

    // The total counts the filtered rows, not the page.
    let (one, total) = store
        .run_list(&name_filter(&["r2", "r4"], false, false), page(0, 1))
        .await
        .unwrap();
    assert_eq!(total, 2);
    assert_eq!(one.len(), 1);

    // Equal created_at: id DESC decides.
    db.execute(&format!(
        "UPDATE operation_run SET created_at = (SELECT created_at FROM operation_run WHERE id = '{}')",
        created[0].id
    ))
    .await;
    let (tied, _) = store
        .run_list(&RunListFilter::default(), all())
        .await
        .unwrap();
    assert_eq!(run_names(&tied), ["r5", "r4", "r3", "r2", "r1"]);
}

async fn run_targets_list_scopes_status_order_and_paging(db: &Db) {
    let store = db.store();
    let mut r = run(1, "phased");
    r.current_phase_index = 1;
    // (sequence, phase, status), inserted out of order.
    let layout = [
        (4, 1, TargetStatus::Completed),
        (0, 0, TargetStatus::Completed),
        (6, 2, TargetStatus::Pending),
        (2, 1, TargetStatus::Submitted),
        (1, 0, TargetStatus::Failed),
        (5, 2, TargetStatus::Pending),
        (3, 1, TargetStatus::Pending),
    ];
    let targets: Vec<OperationRunTarget> = layout
        .iter()
        .map(|(seq, phase, status)| target(100 + *seq as u128, r.id, *seq, *phase, *status))
        .collect();
    store.run_create(&r, &targets).await.unwrap();
    let other = run(2, "other");
    store
        .run_create(
            &other,
            &[target(200, other.id, 0, 1, TargetStatus::Pending)],
        )
        .await
        .unwrap();

    let list = |scope: PhaseScope, status: Option<TargetStatus>, current: i32, page: Page| {
        let query = TargetQuery {
            operation_run_id: r.id,
            status,
            phase_scope: scope,
            current_phase_index: current,
            page,
        };
        async move {
            let (targets, total) = store.run_targets_list(&query).await.unwrap();
            (sequences(&targets), total)
        }
    };

    assert_eq!(
        list(PhaseScope::Current, None, 1, all()).await,
        (vec![2, 3, 4], 3)
    );
    assert_eq!(
        list(PhaseScope::Completed, None, 1, all()).await,
        (vec![0, 1], 2)
    );
    assert_eq!(
        list(PhaseScope::CurrentAndCompleted, None, 1, all()).await,
        (vec![0, 1, 2, 3, 4], 5)
    );
    assert_eq!(
        list(PhaseScope::All, None, 1, all()).await,
        (vec![0, 1, 2, 3, 4, 5, 6], 7)
    );
    // The scope follows the given current phase.
    assert_eq!(
        list(PhaseScope::Current, None, 2, all()).await,
        (vec![5, 6], 2)
    );
    assert_eq!(
        list(PhaseScope::Completed, None, 0, all()).await,
        (vec![], 0)
    );

    assert_eq!(
        list(
            PhaseScope::CurrentAndCompleted,
            Some(TargetStatus::Completed),
            1,
            all()
        )
        .await,
        (vec![0, 4], 2)
    );
    assert_eq!(
        list(PhaseScope::All, Some(TargetStatus::Pending), 1, all()).await,
        (vec![3, 5, 6], 3)
    );

    // Paging after filtering; total before paging.
    assert_eq!(
        list(PhaseScope::All, None, 1, page(2, 3)).await,
        (vec![2, 3, 4], 7)
    );
    assert_eq!(
        list(PhaseScope::CurrentAndCompleted, None, 1, page(4, 0)).await,
        (vec![4], 5)
    );
    assert_eq!(
        list(PhaseScope::All, None, 1, page(100, 10)).await,
        (vec![], 7)
    );

    let (none, total) = store
        .run_targets_list(&TargetQuery {
            operation_run_id: id(404),
            status: None,
            phase_scope: PhaseScope::All,
            current_phase_index: 0,
            page: Page::DEFAULT,
        })
        .await
        .unwrap();
    assert!(none.is_empty());
    assert_eq!(total, 0);
}

// ---- operation run targets: dispatch updates -------------------------------

async fn run_target_update_round_trip(db: &Db) {
    let store = db.store();
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    let t = submit(store, task(0x7A5C, id(1)), TaskStatus::Pending).await;
    let r = run(1, "dispatch");
    let target0 = target(10, r.id, 0, 0, TargetStatus::Pending);
    store.run_create(&r, &[target0]).await.unwrap();
    let query = TargetQuery {
        operation_run_id: r.id,
        status: None,
        phase_scope: PhaseScope::All,
        current_phase_index: 0,
        page: all(),
    };
    let (before, _) = store.run_targets_list(&query).await.unwrap();

    let mut changed = before[0].clone();
    changed.task_id = Some(t.id);
    changed.status = TargetStatus::Blocked;
    changed.message = "waiting on rack conflicts".into();
    changed.retry_after = Some(ts("2024-05-01T10:05:00.654321Z"));
    changed.retry_state = Some(RetryState {
        blocked_since: ts("2024-05-01T10:00:00.5Z"),
        attempts: 1,
        last_retry_delay_seconds: 30,
    });
    // Fields the update does not write: changing them here has no effect.
    changed.sequence_index = 7;
    store.run_target_update(&changed).await.unwrap();
    let (after, _) = store.run_targets_list(&query).await.unwrap();
    assert!(after[0].updated_at >= before[0].updated_at);
    let mut expected = changed.clone();
    expected.sequence_index = 0;
    expected.updated_at = after[0].updated_at;
    assert_eq!(after[0], expected);

    // Back to plain: NULLs round-trip.
    let mut plain = expected.clone();
    plain.task_id = None;
    plain.status = TargetStatus::Pending;
    plain.message = String::new();
    plain.retry_after = None;
    plain.retry_state = None;
    store.run_target_update(&plain).await.unwrap();
    let (after, _) = store.run_targets_list(&query).await.unwrap();
    plain.updated_at = after[0].updated_at;
    assert_eq!(after[0], plain);

    let mut unknown = plain.clone();
    unknown.id = id(404);
    match store.run_target_update(&unknown).await {
        Err(StoreError::NotFound(what)) => {
            assert_eq!(what, format!("operation run target {}", id(404)))
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
    let mut no_task = plain.clone();
    no_task.task_id = Some(id(0xDEAD));
    match store.run_target_update(&no_task).await {
        Err(StoreError::NotFound(what)) => assert_eq!(what, format!("task {}", id(0xDEAD))),
        other => panic!("expected NotFound, got {other:?}"),
    }
}

// ---- operation runs: dispatcher attempts and manual controls ---------------

/// All targets of a run, phase ASC, sequence ASC.
async fn all_targets(store: &dyn Store, run_id: Uuid) -> Vec<OperationRunTarget> {
    store
        .run_targets_list(&TargetQuery {
            operation_run_id: run_id,
            status: None,
            phase_scope: PhaseScope::All,
            current_phase_index: 0,
            page: all(),
        })
        .await
        .unwrap()
        .0
}

fn target_ids(targets: &[OperationRunTarget]) -> Vec<Uuid> {
    targets.iter().map(|t| t.id).collect()
}

/// Lets the store's clock move on, so "stamped again" is observable
/// (scenario, not polling: the store stamps with the wall clock).
async fn tick() {
    tokio::time::sleep(Duration::from_millis(5)).await;
}

/// A running run in phase 1 of 3: phase 0 holds every outcome (and a row
/// still claimed), phase 1 is inserted out of sequence order, phase 2 waits.
/// A second run's rows must not leak into the aggregate.
async fn phased_run(store: &dyn Store) -> OperationRun {
    let mut r = run(1, "phased");
    r.status = RunStatus::Running;
    r.current_phase_index = 1;
    r.started_at = Some(ts("2024-05-01T10:00:00.123456Z"));
    let targets = [
        target(10, r.id, 0, 0, TargetStatus::Completed),
        target(11, r.id, 1, 0, TargetStatus::Completed),
        target(12, r.id, 2, 0, TargetStatus::Failed),
        target(13, r.id, 3, 0, TargetStatus::Terminated),
        target(14, r.id, 4, 0, TargetStatus::Skipped),
        target(15, r.id, 5, 0, TargetStatus::Claimed),
        target(22, r.id, 8, 1, TargetStatus::Pending),
        target(20, r.id, 6, 1, TargetStatus::Submitted),
        target(21, r.id, 7, 1, TargetStatus::Blocked),
        target(30, r.id, 9, 2, TargetStatus::Pending),
    ];
    store.run_create(&r, &targets).await.unwrap();
    let mut other = run(2, "other");
    other.current_phase_index = 1;
    let other_targets = [
        target(40, other.id, 0, 0, TargetStatus::Failed),
        target(41, other.id, 1, 1, TargetStatus::Pending),
    ];
    store.run_create(&other, &other_targets).await.unwrap();
    store.run_get(r.id).await.unwrap().unwrap()
}

/// The lock loads only the current phase's unsettled targets, each with its
/// child task's status and message, and counts the settled ones.
async fn run_lock_apply_loads_unsettled_targets_with_child_states(db: &Db) {
    let store = db.store();
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    let running = submit(store, task(0x7A51, id(1)), TaskStatus::Running).await;
    let mut r = run(3, "settled");
    r.status = RunStatus::Running;
    let mut active = target(50, r.id, 0, 0, TargetStatus::Submitted);
    active.task_id = Some(running.id);
    let targets = [
        active,
        target(51, r.id, 1, 0, TargetStatus::Completed),
        target(52, r.id, 2, 0, TargetStatus::Failed),
        target(53, r.id, 3, 0, TargetStatus::Pending),
        target(54, r.id, 4, 0, TargetStatus::Skipped),
        target(57, r.id, 5, 0, TargetStatus::Terminated),
        target(56, r.id, 6, 0, TargetStatus::Claimed),
        target(55, r.id, 7, 1, TargetStatus::Completed),
    ];
    store.run_create(&r, &targets).await.unwrap();

    let mut seen: Option<RunLock> = None;
    store
        .run_lock_apply(r.id, LockMode::Runnable, &mut |lock| {
            seen = Some(lock.clone());
            Ok(())
        })
        .await
        .unwrap()
        .unwrap();
    let seen = seen.expect("apply was called");
    assert_eq!(target_ids(&seen.targets), [id(50), id(53), id(56)]);
    assert_eq!(
        seen.settled,
        EarlierPhases {
            selected: 4,
            completed: 1,
            failed: 1,
            terminated: 1,
            skipped: 1,
        }
    );
    assert_eq!(seen.earlier, EarlierPhases::default());
    // Only targets with a task have a state; the phase-1 target is neither
    // loaded nor counted.
    assert_eq!(seen.task_states.len(), 1);
    assert_eq!(
        seen.task_states.get(&running.id),
        Some(&(TaskStatus::Running, running.message.clone()))
    );
}

/// A run with more pending targets than it may run at once: the lock loads
/// every unsettled non-pending target but of the pending ones only as many,
/// in sequence order, as the slots the surely active targets leave free
/// plus [`CLAIM_WINDOW_MARGIN`]; the rest count in `settled.selected` only.
async fn run_lock_apply_loads_pending_targets_up_to_the_claim_window(db: &Db) {
    let store = db.store();
    let mut r = run(4, "window");
    r.status = RunStatus::Running;
    r.configuration.options.max_concurrent_targets = 3;
    // A live claim takes a slot; an expired one does not (it is claimable).
    let mut live = target(61, r.id, 1, 0, TargetStatus::Claimed);
    live.retry_after = Some(Utc::now() + chrono::TimeDelta::hours(1));
    let mut expired = target(68, r.id, 3, 0, TargetStatus::Claimed);
    expired.retry_after = Some(ts("2024-01-01T00:00:00Z"));
    let mut targets = vec![
        target(60, r.id, 0, 0, TargetStatus::Completed),
        live,
        expired,
    ];
    // Pending ones in a scrambled insert order; the window follows sequence.
    let window = usize::try_from(2 + CLAIM_WINDOW_MARGIN).unwrap();
    let pending_count = window + 3;
    let mut sequences: Vec<i32> = (0..pending_count)
        .map(|i| 10 + i32::try_from(i).unwrap())
        .collect();
    sequences.reverse();
    for sequence in sequences {
        targets.push(target(
            1000 + u128::try_from(sequence).unwrap(),
            r.id,
            sequence,
            0,
            TargetStatus::Pending,
        ));
    }
    targets.push(target(67, r.id, 5, 0, TargetStatus::Blocked));
    store.run_create(&r, &targets).await.unwrap();

    let mut seen: Option<RunLock> = None;
    store
        .run_lock_apply(r.id, LockMode::Runnable, &mut |lock| {
            seen = Some(lock.clone());
            Ok(())
        })
        .await
        .unwrap()
        .unwrap();
    let seen = seen.expect("apply was called");
    let mut expected = vec![id(61), id(68), id(67)];
    expected.extend((0..window).map(|i| id(1010 + u128::try_from(i).unwrap())));
    assert_eq!(
        target_ids(&seen.targets),
        expected,
        "non-pending unsettled ones and the first {window} pending ones, in sequence order"
    );
    assert_eq!(
        seen.settled,
        EarlierPhases {
            selected: 4,
            completed: 1,
            ..EarlierPhases::default()
        }
    );
    assert_eq!(seen.pending_not_loaded(), 3);
}

async fn run_lock_apply_loads_and_persists_only_changes(db: &Db) {
    let store = db.store();
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    let t = submit(store, task(0x7A5C, id(1)), TaskStatus::Pending).await;
    let r = phased_run(store).await;
    let before = all_targets(store, r.id).await;
    tick().await;

    // One attempt: claim target 22, leave 20 and 21 alone (21 gets a change
    // to a column a dispatch write does not store), note it on the run.
    let mut seen: Option<RunLock> = None;
    let outcome = store
        .run_lock_apply(r.id, LockMode::Runnable, &mut |lock| {
            seen = Some(lock.clone());
            let claimed = &mut lock.targets[2];
            claimed.status = TargetStatus::Claimed;
            claimed.task_id = Some(t.id);
            claimed.message = "claimed".into();
            claimed.retry_after = Some(ts("2024-05-01T10:05:00.654321Z"));
            claimed.retry_state = Some(RetryState {
                blocked_since: ts("2024-05-01T10:00:00.5Z"),
                attempts: 2,
                last_retry_delay_seconds: 60,
            });
            lock.targets[1].sequence_index = 99;
            lock.run.status_message = "1 claimed".into();
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(outcome, Some(()));
    let seen = seen.expect("apply was called");
    assert_eq!(seen.run, r);
    assert_eq!(target_ids(&seen.targets), [id(20), id(21), id(22)]);
    let phase1: Vec<_> = before
        .iter()
        .filter(|t| t.phase_index == 1)
        .cloned()
        .collect();
    assert_eq!(seen.targets, phase1);
    assert_eq!(
        seen.earlier,
        EarlierPhases {
            selected: 6,
            completed: 2,
            failed: 1,
            terminated: 1,
            skipped: 1,
        }
    );

    let after = all_targets(store, r.id).await;
    for (old, new) in before.iter().zip(&after) {
        if old.id == id(22) {
            assert!(new.updated_at > old.updated_at);
            let mut expected = seen.targets[2].clone();
            expected.status = TargetStatus::Claimed;
            expected.task_id = Some(t.id);
            expected.message = "claimed".into();
            expected.retry_after = Some(ts("2024-05-01T10:05:00.654321Z"));
            expected.retry_state = Some(RetryState {
                blocked_since: ts("2024-05-01T10:00:00.5Z"),
                attempts: 2,
                last_retry_delay_seconds: 60,
            });
            expected.updated_at = new.updated_at;
            assert_eq!(new, &expected);
        } else {
            // Not written at all: updated_at untouched, sequence 99 not stored.
            assert_eq!(new, old);
        }
    }
    let stored = store.run_get(r.id).await.unwrap().unwrap();
    assert!(stored.updated_at > r.updated_at);
    let mut expected = r.clone();
    expected.status_message = "1 claimed".into();
    expected.updated_at = stored.updated_at;
    assert_eq!(stored, expected);

    // A manual control that changes nothing writes nothing.
    tick().await;
    let outcome = store
        .run_lock_apply(r.id, LockMode::Wait, &mut |_| Ok(()))
        .await
        .unwrap();
    assert_eq!(outcome, Some(()));
    assert_eq!(store.run_get(r.id).await.unwrap().unwrap(), stored);
    assert_eq!(all_targets(store, r.id).await, after);

    // A dispatcher attempt that changes nothing still moves the run to the
    // back of the runnable order; its targets stay untouched.
    let outcome = store
        .run_lock_apply(r.id, LockMode::Runnable, &mut |_| Ok(()))
        .await
        .unwrap();
    assert_eq!(outcome, Some(()));
    let touched = store.run_get(r.id).await.unwrap().unwrap();
    assert!(touched.updated_at > stored.updated_at);
    let mut expected = stored.clone();
    expected.updated_at = touched.updated_at;
    assert_eq!(touched, expected);
    assert_eq!(all_targets(store, r.id).await, after);

    // Phase 1 finishes and the run advances: both persisted; the next lock
    // sees phase 2 and an aggregate over phases 0 and 1.
    tick().await;
    store
        .run_lock_apply(r.id, LockMode::Runnable, &mut |lock| {
            for target in &mut lock.targets {
                target.status = TargetStatus::Completed;
                target.message = String::new();
            }
            lock.run.current_phase_index = 2;
            lock.run.status_message = String::new();
            Ok(())
        })
        .await
        .unwrap()
        .unwrap();
    let advanced = store.run_get(r.id).await.unwrap().unwrap();
    assert_eq!(advanced.current_phase_index, 2);
    assert_eq!(advanced.status_message, "");
    let current = store.run_current_targets(r.id).await.unwrap();
    assert_eq!(target_ids(&current), [id(30)]);
    let mut seen: Option<RunLock> = None;
    store
        .run_lock_apply(r.id, LockMode::Wait, &mut |lock| {
            seen = Some(lock.clone());
            Ok(())
        })
        .await
        .unwrap()
        .unwrap();
    let seen = seen.unwrap();
    assert_eq!(seen.run, advanced);
    assert_eq!(seen.targets, current);
    assert_eq!(
        seen.earlier,
        EarlierPhases {
            selected: 9,
            completed: 5,
            failed: 1,
            terminated: 1,
            skipped: 1,
        }
    );
    let finished_phase1: Vec<_> = all_targets(store, r.id)
        .await
        .into_iter()
        .filter(|t| t.phase_index == 1)
        .collect();
    assert!(
        finished_phase1
            .iter()
            .all(|t| t.status == TargetStatus::Completed && t.message.is_empty())
    );

    // The run's lifecycle columns round-trip, NULLs included.
    store
        .run_lock_apply(r.id, LockMode::Wait, &mut |lock| {
            lock.run.status = RunStatus::CompletedWithFailures;
            lock.run.reason = RunReason::SafetyGate;
            lock.run.status_message = "done".into();
            lock.run.started_at = None;
            lock.run.finished_at = Some(ts("2024-05-01T11:00:00.000001Z"));
            Ok(())
        })
        .await
        .unwrap()
        .unwrap();
    let done = store.run_get(r.id).await.unwrap().unwrap();
    assert_eq!(
        (
            done.status,
            done.reason,
            done.status_message.as_str(),
            done.started_at,
            done.finished_at
        ),
        (
            RunStatus::CompletedWithFailures,
            RunReason::SafetyGate,
            "done",
            None,
            Some(ts("2024-05-01T11:00:00.000001Z"))
        )
    );

    // No targets in the current phase, no earlier rows: empty lock.
    let lone = run(3, "lone");
    store.run_create(&lone, &[]).await.unwrap();
    let mut seen: Option<RunLock> = None;
    store
        .run_lock_apply(lone.id, LockMode::Runnable, &mut |lock| {
            seen = Some(lock.clone());
            Ok(())
        })
        .await
        .unwrap()
        .unwrap();
    let seen = seen.unwrap();
    assert!(seen.targets.is_empty());
    assert_eq!(seen.earlier, EarlierPhases::default());
    assert!(store.run_current_targets(lone.id).await.unwrap().is_empty());
    assert!(store.run_current_targets(id(404)).await.unwrap().is_empty());
}

async fn run_lock_apply_rolls_back_on_error(db: &Db) {
    let store = db.store();
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    let t = submit(store, task(0x7A5C, id(1)), TaskStatus::Pending).await;
    let r = phased_run(store).await;
    let targets = all_targets(store, r.id).await;

    // apply fails after changing everything: nothing is written.
    let result = store
        .run_lock_apply(r.id, LockMode::Runnable, &mut |lock| {
            for target in &mut lock.targets {
                target.status = TargetStatus::Failed;
            }
            lock.run.status = RunStatus::Failed;
            Err(StoreError::NotFound("the reason".into()))
        })
        .await;
    match result {
        Err(StoreError::NotFound(what)) => assert_eq!(what, "the reason"),
        other => panic!("expected apply's error, got {other:?}"),
    }
    assert_eq!(store.run_get(r.id).await.unwrap().unwrap(), r);
    assert_eq!(all_targets(store, r.id).await, targets);

    // A write that fails after another succeeded (a task that does not
    // exist) rolls the whole attempt back.
    let result = store
        .run_lock_apply(r.id, LockMode::Runnable, &mut |lock| {
            lock.targets[0].task_id = Some(t.id);
            lock.targets[1].task_id = Some(id(0xDEAD));
            lock.run.status_message = "never".into();
            Ok(())
        })
        .await;
    match result {
        Err(StoreError::NotFound(what)) => assert_eq!(what, format!("task {}", id(0xDEAD))),
        other => panic!("expected NotFound, got {other:?}"),
    }
    assert_eq!(store.run_get(r.id).await.unwrap().unwrap(), r);
    assert_eq!(all_targets(store, r.id).await, targets);

    // Only the locked rows may be written: a row of another phase is refused.
    let result = store
        .run_lock_apply(r.id, LockMode::Wait, &mut |lock| {
            lock.targets[0].message = "changed".into();
            let mut foreign = targets[9].clone();
            foreign.status = TargetStatus::Claimed;
            lock.targets.push(foreign);
            Ok(())
        })
        .await;
    match result {
        Err(StoreError::NotFound(what)) => assert_eq!(
            what,
            format!("locked operation run target {} of run {}", id(30), r.id)
        ),
        other => panic!("expected NotFound, got {other:?}"),
    }
    assert_eq!(all_targets(store, r.id).await, targets);

    // The locks went with the rollbacks: the next attempt gets the run.
    let outcome = store
        .run_lock_apply(r.id, LockMode::Runnable, &mut |_| Ok(()))
        .await
        .unwrap();
    assert_eq!(outcome, Some(()));
}

async fn run_lock_apply_runnable_skips_paused_terminal_and_missing_runs(db: &Db) {
    let store = db.store();
    let statuses = [
        RunStatus::Pending,
        RunStatus::Running,
        RunStatus::Paused,
        RunStatus::Completed,
        RunStatus::CompletedWithFailures,
        RunStatus::Cancelled,
        RunStatus::Failed,
    ];
    for (n, status) in statuses.iter().enumerate() {
        let mut r = run(n as u128 + 1, status.as_str());
        r.status = *status;
        store
            .run_create(
                &r,
                &[target(10 + n as u128, r.id, 0, 0, TargetStatus::Pending)],
            )
            .await
            .unwrap();
    }
    for (n, status) in statuses.iter().enumerate() {
        let run_id = id(n as u128 + 1);
        let before = store.run_get(run_id).await.unwrap().unwrap();
        let mut called = false;
        let outcome = store
            .run_lock_apply(run_id, LockMode::Runnable, &mut |_| {
                called = true;
                Ok(())
            })
            .await
            .unwrap();
        let runnable = matches!(status, RunStatus::Pending | RunStatus::Running);
        assert_eq!(outcome.is_some(), runnable, "{status:?}");
        assert_eq!(called, runnable, "{status:?}");
        if !runnable {
            assert_eq!(store.run_get(run_id).await.unwrap().unwrap(), before);
        }

        // Manual controls get any run.
        let mut seen = None;
        let outcome = store
            .run_lock_apply(run_id, LockMode::Wait, &mut |lock| {
                seen = Some(lock.run.status);
                Ok(())
            })
            .await
            .unwrap();
        assert_eq!(outcome, Some(()));
        assert_eq!(seen, Some(*status));
    }

    // Resume: a manual control moves a paused run back to running, after
    // which the dispatcher gets it.
    store
        .run_lock_apply(id(3), LockMode::Wait, &mut |lock| {
            lock.run.status = RunStatus::Running;
            Ok(())
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store
            .run_lock_apply(id(3), LockMode::Runnable, &mut |_| Ok(()))
            .await
            .unwrap(),
        Some(())
    );

    for mode in [LockMode::Runnable, LockMode::Wait] {
        let mut called = false;
        let outcome = store
            .run_lock_apply(id(404), mode, &mut |_| {
                called = true;
                Ok(())
            })
            .await
            .unwrap();
        assert_eq!(outcome, None);
        assert!(!called);
    }
}

/// One attempt holds the run (its `apply` blocks until released, on a
/// multi-threaded runtime): on PostgreSQL a second dispatcher attempt skips the run at
/// once; a manual control waits and then sees the holder's write. (SQLite
/// serialises all writers, so there the dispatcher attempt would wait too:
/// only the waiting half runs.)
async fn run_lock_apply_concurrent_attempts(db: &Db) {
    let store = db.shared();
    let r = run(1, "busy");
    store
        .run_create(&r, &[target(10, r.id, 0, 0, TargetStatus::Pending)])
        .await
        .unwrap();

    let (entered_tx, entered_rx) = tokio::sync::oneshot::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holder = tokio::spawn({
        let store = store.clone();
        async move {
            let mut entered = Some(entered_tx);
            store
                .run_lock_apply(r.id, LockMode::Runnable, &mut move |lock| {
                    if let Some(entered) = entered.take() {
                        entered.send(()).ok();
                    }
                    // Holds the locks until released. Plain blocking would
                    // also stall the runtime's I/O and timer driver (no
                    // other attempt could make progress); block_in_place
                    // hands this worker's queue to another thread first.
                    tokio::task::block_in_place(|| {
                        release_rx
                            .recv_timeout(Duration::from_secs(30))
                            .expect("holder released")
                    });
                    lock.run.status = RunStatus::Running;
                    lock.run.status_message = "holder".into();
                    lock.targets[0].status = TargetStatus::Claimed;
                    Ok(())
                })
                .await
        }
    });
    tokio::time::timeout(Duration::from_secs(10), entered_rx)
        .await
        .expect("holder entered apply")
        .unwrap();

    if store.dialect() == "postgres" {
        let mut called = false;
        let outcome = tokio::time::timeout(
            Duration::from_secs(5),
            store.run_lock_apply(r.id, LockMode::Runnable, &mut |_| {
                called = true;
                Ok(())
            }),
        )
        .await
        .expect("a locked run is skipped, not waited for")
        .unwrap();
        assert_eq!(outcome, None);
        assert!(!called);
    }

    let waiter = tokio::spawn({
        let store = store.clone();
        async move {
            let mut seen = None;
            let outcome = store
                .run_lock_apply(r.id, LockMode::Wait, &mut |lock| {
                    seen = Some((
                        lock.run.status,
                        lock.run.status_message.clone(),
                        lock.targets[0].status,
                    ));
                    lock.run.status = RunStatus::Paused;
                    lock.run.status_message = "waiter".into();
                    Ok(())
                })
                .await;
            (outcome, seen)
        }
    });
    // Scenario, not polling: the waiter must still be blocked after a while
    // (that it is not done is no event to wait for).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "a manual control waits for the lock");
    release_tx.send(()).unwrap();
    assert_eq!(holder.await.unwrap().unwrap(), Some(()));
    let (outcome, seen) = waiter.await.unwrap();
    assert_eq!(outcome.unwrap(), Some(()));
    assert_eq!(
        seen,
        Some((
            RunStatus::Running,
            "holder".to_string(),
            TargetStatus::Claimed
        ))
    );
    let stored = store.run_get(r.id).await.unwrap().unwrap();
    assert_eq!(
        (stored.status, stored.status_message.as_str()),
        (RunStatus::Paused, "waiter")
    );
}

async fn run_ids_runnable_orders_by_updated_at_and_filters(db: &Db) {
    let store = db.store();
    let statuses = [
        RunStatus::Pending,
        RunStatus::Running,
        RunStatus::Paused,
        RunStatus::Completed,
        RunStatus::Pending,
        RunStatus::Running,
        RunStatus::Cancelled,
        RunStatus::Failed,
        RunStatus::CompletedWithFailures,
    ];
    for (n, status) in statuses.iter().enumerate() {
        let mut r = run(n as u128 + 1, "r");
        r.status = *status;
        store.run_create(&r, &[]).await.unwrap();
        tick().await;
    }
    assert_eq!(
        store.run_ids_runnable(10).await.unwrap(),
        [id(1), id(2), id(5), id(6)]
    );
    // Dispatcher attempts rotate runs to the back; a manual control that
    // writes nothing does not.
    for n in [2, 1] {
        store
            .run_lock_apply(id(n), LockMode::Runnable, &mut |_| Ok(()))
            .await
            .unwrap()
            .unwrap();
        tick().await;
    }
    store
        .run_lock_apply(id(5), LockMode::Wait, &mut |_| Ok(()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store.run_ids_runnable(10).await.unwrap(),
        [id(5), id(6), id(2), id(1)]
    );
    assert_eq!(
        store.run_ids_runnable(3).await.unwrap(),
        [id(5), id(6), id(2)]
    );
    assert!(store.run_ids_runnable(0).await.unwrap().is_empty());
    assert!(store.run_ids_runnable(-1).await.unwrap().is_empty());

    // A run paused by a manual control leaves the list.
    store
        .run_lock_apply(id(6), LockMode::Wait, &mut |lock| {
            lock.run.status = RunStatus::Paused;
            Ok(())
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store.run_ids_runnable(10).await.unwrap(),
        [id(5), id(2), id(1)]
    );
}

// ---- tasks -----------------------------------------------------------------

fn definition(max_parallel: i32) -> RuleDefinition {
    let mut parameters = serde_json::Map::new();
    parameters.insert("operation".into(), serde_json::json!("power_on"));
    RuleDefinition {
        version: "v1".into(),
        steps: vec![SequenceStep {
            component_type: ComponentType::Compute,
            stage: 1,
            max_parallel,
            timeout: Some(Duration::from_secs(600)),
            retry: Some(RetryPolicy {
                max_attempts: 3,
                initial_interval: Duration::from_secs(5),
                backoff_coefficient: 2.0,
                max_interval: Some(Duration::from_secs(60)),
            }),
            pre_operation: Vec::new(),
            main_operation: ActionConfig {
                name: "PowerControl".into(),
                timeout: None,
                poll_interval: Some(Duration::from_millis(1500)),
                parameters,
            },
            post_operation: Vec::new(),
            delay_after: None,
        }],
    }
}

/// A power task on `rack_id` over compute component 0xC000 + n. The
/// status, message, queue deadline and timestamps are the store's to set.
fn task(n: u128, rack_id: Uuid) -> Task {
    let mut components = ComponentsByType::new();
    components.push(ComponentType::Compute, id(0xC000 + n));
    Task {
        id: id(n),
        task_type: TaskType::PowerControl,
        information: TaskInformation {
            code: "power_on".into(),
            override_readiness_check: false,
            firmware: None,
        },
        description: format!("task {n}"),
        rack_id,
        components_by_type: components,
        executor_type: "local".into(),
        execution_id: String::new(),
        status: TaskStatus::Completed,
        message: "ignored".into(),
        report: None,
        applied_rule_id: None,
        rule_definition: None,
        queue_policy: QueuePolicy {
            strategy: QueueStrategy::Queue,
            timeout_secs: 3600,
        },
        queue_expires_at: Some(epoch()),
        idempotency_key: None,
        trigger: TaskTrigger::Api,
        created_at: epoch(),
        updated_at: epoch(),
        started_at: Some(epoch()),
        finished_at: Some(epoch()),
    }
}

fn insert_as(status: TaskStatus, message: &str) -> SubmitDecision {
    SubmitDecision::Insert {
        status,
        message: message.into(),
        queue_expires_at: None,
        start: None,
    }
}

/// Submits with a decision that always inserts as `status`.
/// Several conditional updates in one transaction, each with its own
/// answer; one the database refuses rolls all of them back.
async fn task_updates_quiet_applies_each_in_one_transaction(db: &Db) {
    let store = db.store();
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    let running = submit(store, task(0x51, id(1)), TaskStatus::Running).await;
    let done = submit(store, task(0x52, id(1)), TaskStatus::Completed).await;
    let report = |n: i64| TaskUpdate {
        expected: vec![TaskStatus::Running],
        report: Some(serde_json::json!({ "n": n })),
        ..Default::default()
    };
    let written = store
        .task_updates_quiet(&[
            (running.id, report(1)),
            (done.id, report(2)),
            (id(0x404), report(3)),
            (running.id, report(4)),
        ])
        .await
        .unwrap();
    assert_eq!(written, [true, false, false, true]);
    let got = store.task_get(running.id).await.unwrap().unwrap();
    assert_eq!(got.report, Some(serde_json::json!({ "n": 4 })), "in order");
    assert_eq!(store.task_get(done.id).await.unwrap().unwrap().report, None);

    // A rule that does not exist: the whole batch is refused.
    let bad = TaskUpdate {
        applied_rule_id: Some(Some(id(0xF404))),
        ..Default::default()
    };
    assert!(
        store
            .task_updates_quiet(&[(running.id, report(5)), (running.id, bad)])
            .await
            .is_err()
    );
    let got = store.task_get(running.id).await.unwrap().unwrap();
    assert_eq!(
        got.report,
        Some(serde_json::json!({ "n": 4 })),
        "rolled back"
    );
    assert!(store.task_updates_quiet(&[]).await.unwrap().is_empty());
}

async fn submit(store: &dyn Store, t: Task, status: TaskStatus) -> Task {
    let decision = insert_as(status, &format!("as {status}"));
    match store
        .task_submit(&t, &move |_| decision.clone())
        .await
        .unwrap()
    {
        SubmitOutcome::Inserted(stored) => stored,
        other => panic!("expected Inserted, got {other:?}"),
    }
}

fn ids(tasks: &[Task]) -> Vec<Uuid> {
    tasks.iter().map(|t| t.id).collect()
}

/// `t` as the store keeps it after inserting with `status` / `message` /
/// `deadline` (timestamps taken from `got`, after checking them).
fn as_inserted(
    mut t: Task,
    got: &Task,
    status: TaskStatus,
    message: &str,
    deadline: Option<DateTime<Utc>>,
    since: DateTime<Utc>,
) -> Task {
    assert_eq!(got.created_at, got.updated_at);
    assert!(got.created_at >= since && got.created_at <= Utc::now());
    t.status = status;
    t.message = message.into();
    t.queue_expires_at = deadline;
    t.started_at = None;
    t.finished_at = None;
    t.created_at = got.created_at;
    t.updated_at = got.updated_at;
    t
}

/// A task its submitter starts at once is inserted as running in the same
/// write: the frozen rule, the execution and `started_at` come from the
/// decision's [`TaskStart`], not from the task.
async fn task_submit_inserts_started_tasks(db: &Db) {
    let store = db.store();
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    let since = Utc::now().trunc_subsecs(6);
    let t = task(0x5171, id(1));
    let start = TaskStart {
        applied_rule_id: None,
        rule_definition: definition(3),
        executor_type: "local".into(),
        execution_id: "local:started".into(),
        lease: Some(TaskLease {
            owner: "replica-a".into(),
            expires_at: Utc::now() + chrono::TimeDelta::seconds(30),
        }),
    };
    let decision = SubmitDecision::Insert {
        status: TaskStatus::Running,
        message: messages::RUNNING.into(),
        queue_expires_at: None,
        start: Some(start.clone()),
    };
    let SubmitOutcome::Inserted(stored) = store
        .task_submit(&t, &move |_| decision.clone())
        .await
        .unwrap()
    else {
        panic!("expected Inserted");
    };
    assert_eq!(stored.status, TaskStatus::Running);
    assert_eq!(stored.rule_definition, Some(start.rule_definition));
    assert_eq!(stored.applied_rule_id, None);
    assert_eq!(stored.executor_type, "local");
    assert_eq!(stored.execution_id, "local:started");
    let started = stored.started_at.expect("started_at stamped");
    assert!(started >= since);
    assert_eq!(Some(started), Some(stored.created_at));
    assert_eq!(stored.finished_at, None);
    assert_eq!(stored.trigger, TaskTrigger::Api);
    assert_eq!(store.task_get(t.id).await.unwrap(), Some(stored));

    // An event rule's task keeps the rule as its trigger.
    let mut by_rule = task(0x5172, id(1));
    by_rule.trigger = TaskTrigger::EventRuleExecution { rule_id: id(0xE1) };
    let queued = SubmitDecision::Insert {
        status: TaskStatus::Pending,
        message: messages::PENDING.into(),
        queue_expires_at: None,
        start: None,
    };
    let SubmitOutcome::Inserted(stored) = store
        .task_submit(&by_rule, &move |_| queued.clone())
        .await
        .unwrap()
    else {
        panic!("expected Inserted");
    };
    assert_eq!(
        stored.trigger,
        TaskTrigger::EventRuleExecution { rule_id: id(0xE1) }
    );
    assert_eq!(
        store.task_get(by_rule.id).await.unwrap().map(|t| t.trigger),
        Some(stored.trigger)
    );
}

fn lease(owner: &str, from_now_secs: i64) -> TaskLease {
    TaskLease {
        owner: owner.into(),
        expires_at: Utc::now() + chrono::TimeDelta::seconds(from_now_secs),
    }
}

/// Inserts `t` as running, executed by `lease.owner`.
async fn insert_running(store: &dyn Store, t: &Task, lease: TaskLease) -> Task {
    let decision = SubmitDecision::Insert {
        status: TaskStatus::Running,
        message: messages::RUNNING.into(),
        queue_expires_at: None,
        start: Some(TaskStart {
            applied_rule_id: None,
            rule_definition: definition(3),
            executor_type: "local".into(),
            execution_id: format!("local:{}", t.id),
            lease: Some(lease),
        }),
    };
    match store.task_submit(t, &move |_| decision.clone()).await {
        Ok(SubmitOutcome::Inserted(stored)) => stored,
        other => panic!("expected Inserted, got {other:?}"),
    }
}

/// A run target's child: inserted, its target is written with it; rejected,
/// an existing task under its key, or a missing rack, the target is left as
/// the claim left it.
async fn task_submit_for_target_writes_the_target_only_with_a_new_task(db: &Db) {
    let store = db.store();
    for n in [0xA001, 0xA002, 0xA003] {
        store
            .rack_create(&rack(n, &format!("r{n:x}"), None), &[])
            .await
            .unwrap();
    }
    let r = run(0xC41D, "children");
    let targets: Vec<_> = (1..=3)
        .map(|n| target(n, r.id, n as i32, 0, TargetStatus::Claimed))
        .collect();
    store.run_create(&r, &targets).await.unwrap();
    let mut keyed = task(0x5EED, id(0xA001));
    keyed.idempotency_key = Some("operation-run-target:earlier".into());
    let earlier = submit(store, keyed.clone(), TaskStatus::Running).await;

    let inserted = task(0xC1, id(0xA001));
    let rejected = task(0xC2, id(0xA002));
    let orphan = task(0xC3, id(0xDEAD));
    let mut again = task(0xC4, id(0xA001));
    again.idempotency_key = keyed.idempotency_key.clone();
    let insert = |_: &[Task]| insert_as(TaskStatus::Running, "running");
    let reject = |_: &[Task]| SubmitDecision::Reject(SubmitReject::RackConflict);
    let linked = |t: &OperationRunTarget, task_id: Uuid| {
        let mut linked = t.clone();
        linked.status = TargetStatus::Submitted;
        linked.task_id = Some(task_id);
        linked.message = "submitted".into();
        linked
    };
    let links = [
        linked(&targets[0], inserted.id),
        linked(&targets[1], rejected.id),
        linked(&targets[2], orphan.id),
        linked(&targets[0], again.id),
    ];
    let results = [
        store
            .task_submit_for_target(&inserted, &insert, &links[0])
            .await,
        store
            .task_submit_for_target(&rejected, &reject, &links[1])
            .await,
        store
            .task_submit_for_target(&orphan, &insert, &links[2])
            .await,
        store
            .task_submit_for_target(&again, &insert, &links[3])
            .await,
    ];
    assert!(matches!(&results[0], Ok(SubmitOutcome::Inserted(t)) if t.id == inserted.id));
    assert!(matches!(
        &results[1],
        Ok(SubmitOutcome::Rejected(SubmitReject::RackConflict))
    ));
    assert!(matches!(&results[2], Err(StoreError::NotFound(what)) if what.contains("rack")));
    assert!(matches!(&results[3], Ok(SubmitOutcome::Existing(t)) if t.id == earlier.id));

    assert!(store.task_get(inserted.id).await.unwrap().is_some());
    for absent in [rejected.id, orphan.id, again.id] {
        assert_eq!(store.task_get(absent).await.unwrap(), None);
    }
    let query = TargetQuery {
        operation_run_id: r.id,
        status: None,
        phase_scope: PhaseScope::All,
        current_phase_index: 0,
        page: all(),
    };
    let (stored, _) = store.run_targets_list(&query).await.unwrap();
    let status_of = |n: u128| {
        let t = stored.iter().find(|t| t.id == id(n)).unwrap();
        (t.status, t.task_id)
    };
    assert_eq!(status_of(1), (TargetStatus::Submitted, Some(inserted.id)));
    assert_eq!(status_of(2), (TargetStatus::Claimed, None));
    assert_eq!(status_of(3), (TargetStatus::Claimed, None));
}

/// Clustered execution: an owner renews only what it still holds; another
/// replica adopts only expired leases (or any other owner's with
/// `any_lease`); an outcome write fenced on the owner does not apply once
/// the task was adopted.
async fn task_leases_renew_adopt_and_fence(db: &Db) {
    let store = db.store();
    assert_eq!(store.exclusive(), db.store().dialect() == "sqlite");
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    store.rack_create(&rack(2, "r2", None), &[]).await.unwrap();
    let live = insert_running(store, &task(0x1ea5e1, id(1)), lease("a", 30)).await;
    let expired = insert_running(store, &task(0x1ea5e2, id(2)), lease("a", -1)).await;
    let both = [live.id, expired.id];

    // Renewal: whatever the expiry, only the owner's running tasks.
    let mut renewed = store
        .task_leases_renew("a", &both, Utc::now() + chrono::TimeDelta::seconds(30))
        .await
        .unwrap();
    renewed.sort();
    let mut expected = both.to_vec();
    expected.sort();
    assert_eq!(renewed, expected);
    assert!(
        store
            .task_leases_renew("b", &both, Utc::now())
            .await
            .unwrap()
            .is_empty()
    );
    // Let one lapse again.
    store
        .task_leases_renew(
            "a",
            &[expired.id],
            Utc::now() - chrono::TimeDelta::seconds(1),
        )
        .await
        .unwrap();

    // Adoption takes the expired one only, and gives it the new lease.
    let adopted = store
        .task_adopt(&lease("b", 30), Utc::now(), false, 10)
        .await
        .unwrap();
    assert_eq!(
        adopted.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![expired.id]
    );
    assert_eq!(adopted[0].status, TaskStatus::Running);
    assert!(
        store
            .task_adopt(&lease("c", 30), Utc::now(), false, 10)
            .await
            .unwrap()
            .is_empty(),
        "a fresh lease is not adoptable"
    );
    // The old owner's renewal no longer finds it: it must stop.
    assert_eq!(
        store
            .task_leases_renew("a", &both, Utc::now() + chrono::TimeDelta::seconds(30))
            .await
            .unwrap(),
        vec![live.id]
    );

    // Fencing: the old owner's outcome does not apply, the new owner's does.
    let outcome = |owner: &str| TaskUpdate {
        expected: vec![TaskStatus::Running],
        status: Some(TaskStatus::Completed),
        message: Some(messages::COMPLETED.into()),
        expected_owner: Some(owner.into()),
        ..Default::default()
    };
    assert!(
        !store
            .task_update_quiet(expired.id, &outcome("a"))
            .await
            .unwrap()
    );
    assert_eq!(
        store.task_get(expired.id).await.unwrap().unwrap().status,
        TaskStatus::Running
    );
    assert!(
        store
            .task_update_quiet(expired.id, &outcome("b"))
            .await
            .unwrap()
    );

    // `any_lease` (a process alone on its database at start) takes every
    // running task of another owner, live lease or not, and never its own.
    assert!(
        store
            .task_adopt(&lease("a", 30), Utc::now(), true, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let taken = store
        .task_adopt(&lease("c", 30), Utc::now(), true, 10)
        .await
        .unwrap();
    assert_eq!(
        taken.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![live.id]
    );
    // The finished one is nobody's to adopt.
    assert!(
        store
            .task_adopt(
                &lease("d", 30),
                Utc::now() + chrono::TimeDelta::seconds(60),
                false,
                10
            )
            .await
            .unwrap()
            .iter()
            .all(|t| t.id != expired.id)
    );

    // A task a durable executor (Temporal) runs has no lease and is never
    // adopted, whichever way adoption asks.
    let durable = task(0x7e3, id(1));
    let decision = SubmitDecision::Insert {
        status: TaskStatus::Running,
        message: messages::RUNNING.into(),
        queue_expires_at: None,
        start: Some(TaskStart {
            applied_rule_id: None,
            rule_definition: definition(3),
            executor_type: "temporal".into(),
            execution_id: durable.id.to_string(),
            lease: None,
        }),
    };
    let Ok(SubmitOutcome::Inserted(stored)) = store
        .task_submit(&durable, &move |_| decision.clone())
        .await
    else {
        panic!("expected Inserted");
    };
    assert_eq!(stored.executor_type, "temporal");
    for any_lease in [false, true] {
        assert!(
            store
                .task_adopt(
                    &lease("e", 30),
                    Utc::now() + chrono::TimeDelta::seconds(60),
                    any_lease,
                    10
                )
                .await
                .unwrap()
                .iter()
                .all(|t| t.id != durable.id),
            "a durable executor's task was adopted (any_lease = {any_lease})"
        );
    }
}

/// A cancel announced through the store reaches a listener (PostgreSQL);
/// SQLite, which admits one process, has no feed and announcing is a no-op.
async fn task_cancel_announcements_reach_listeners(db: &Db) {
    let store = db.store();
    let task_id = id(0xca9ce1);
    match store.task_cancel_feed().await.unwrap() {
        None => {
            assert_eq!(store.dialect(), "sqlite");
            store.task_cancel_announce(task_id).await.unwrap();
        }
        Some(mut feed) => {
            assert_eq!(store.dialect(), "postgres");
            store.task_cancel_announce(task_id).await.unwrap();
            let heard = tokio::time::timeout(Duration::from_secs(5), feed.next())
                .await
                .expect("announcement within 5 s")
                .unwrap();
            assert_eq!(heard, task_id);
        }
    }
}

async fn task_submit_inserts_rejects_and_dedupes(db: &Db) {
    let store = db.store();
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    store.rack_create(&rack(2, "r2", None), &[]).await.unwrap();
    let since = Utc::now().trunc_subsecs(6);

    // Insert: every field round-trips, the decision sets status, message
    // and deadline, the store the timestamps.
    let mut first = task(1, id(1));
    first.idempotency_key = Some("op-run-1/rack-1".into());
    first.information.firmware = Some(FirmwarePayload {
        target_version: Some("2.1.0".into()),
        start_time: 1_700_000_000,
        end_time: 0,
        rule_id: None,
        sub_targets: vec!["bios".into()],
        override_readiness_check: false,
        override_version_check: true,
        authentication_data: Some(EncryptedSecret("v1:ciphertext".into())),
        bundle: None,
        same_version_for_all_models: false,
        firmware_objects: Default::default(),
    });
    first
        .components_by_type
        .push(ComponentType::NvSwitch, id(0xC100));
    first.report = Some(serde_json::json!({"version": 1, "stages": []}));
    first.rule_definition = Some(definition(2));
    let deadline = ts("2024-05-01T11:00:00.123456789Z");
    let seen = Mutex::new(Vec::new());
    let outcome = store
        .task_submit(&first, &|unfinished| {
            seen.lock().unwrap().push(ids(unfinished));
            SubmitDecision::Insert {
                status: TaskStatus::Waiting,
                message: messages::WAITING.into(),
                queue_expires_at: Some(deadline),
                start: None,
            }
        })
        .await
        .unwrap();
    let SubmitOutcome::Inserted(stored) = outcome else {
        panic!("expected Inserted, got {outcome:?}");
    };
    let expected = as_inserted(
        first.clone(),
        &stored,
        TaskStatus::Waiting,
        messages::WAITING,
        Some(ts("2024-05-01T11:00:00.123456Z")),
        since,
    );
    assert_eq!(stored, expected);
    assert_eq!(
        store.task_get(first.id).await.unwrap(),
        Some(expected.clone())
    );
    assert_eq!(seen.lock().unwrap().as_slice(), [Vec::<Uuid>::new()]);

    // decide sees the rack's unfinished tasks, oldest first, and only them.
    let second = submit(store, task(2, id(1)), TaskStatus::Running).await;
    let done = submit(store, task(3, id(1)), TaskStatus::Pending).await;
    store
        .task_update(
            done.id,
            &TaskUpdate {
                status: Some(TaskStatus::Completed),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    submit(store, task(4, id(2)), TaskStatus::Pending).await;
    seen.lock().unwrap().clear();

    // Reject: nothing written.
    let outcome = store
        .task_submit(&task(5, id(1)), &|unfinished| {
            seen.lock().unwrap().push(ids(unfinished));
            SubmitDecision::Reject(SubmitReject::RackConflict)
        })
        .await
        .unwrap();
    assert_eq!(outcome, SubmitOutcome::Rejected(SubmitReject::RackConflict));
    assert_eq!(seen.lock().unwrap().as_slice(), [vec![id(1), id(2)]]);
    assert_eq!(store.task_get(id(5)).await.unwrap(), None);
    assert_eq!(db.count("task").await, 4);

    // Existing: same key while the first is unfinished, on any rack; decide
    // is not asked and nothing is written.
    for rack_id in [id(1), id(2)] {
        let mut again = task(6, rack_id);
        again.idempotency_key = first.idempotency_key.clone();
        let outcome = store
            .task_submit(&again, &|_| panic!("decide must not run"))
            .await
            .unwrap();
        assert_eq!(outcome, SubmitOutcome::Existing(expected.clone()));
    }
    assert_eq!(db.count("task").await, 4);

    // A finished keyed task still owns its key: submitting again returns it
    // (a submitter that lost the answer must not run the operation twice).
    let terminated = store
        .task_update(
            first.id,
            &TaskUpdate {
                status: Some(TaskStatus::Terminated),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    let mut again = task(6, id(1));
    again.idempotency_key = first.idempotency_key.clone();
    let outcome = store
        .task_submit(&again, &|_| panic!("decide must not run"))
        .await
        .unwrap();
    assert_eq!(outcome, SubmitOutcome::Existing(terminated));
    assert_eq!(db.count("task").await, 4);

    // Empty texts are NULL.
    assert_eq!(
        db.scalar(&format!(
            "SELECT COUNT(*) FROM task WHERE id = '{}' AND execution_id IS NULL \
             AND report IS NULL AND rule_definition IS NULL AND applied_rule_id IS NULL",
            second.id
        ))
        .await,
        1
    );

    // Errors: unknown rack, a task id in use, an unknown rule.
    match store
        .task_submit(&task(7, id(404)), &|_| panic!("decide must not run"))
        .await
    {
        Err(StoreError::NotFound(what)) => assert_eq!(what, format!("rack {}", id(404))),
        other => panic!("expected NotFound, got {other:?}"),
    }
    match store
        .task_submit(&task(2, id(1)), &|_| insert_as(TaskStatus::Pending, ""))
        .await
    {
        Err(StoreError::AlreadyExists(what)) => {
            assert_eq!(what, format!("task id \"{}\"", id(2)))
        }
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    let mut unknown_rule = task(8, id(1));
    unknown_rule.applied_rule_id = Some(id(0xF404));
    match store
        .task_submit(&unknown_rule, &|_| insert_as(TaskStatus::Pending, ""))
        .await
    {
        Err(StoreError::NotFound(what)) => {
            assert_eq!(what, format!("operation rule {}", id(0xF404)))
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
    assert_eq!(db.count("task").await, 4, "no error wrote a task");
}

/// Several submits on one rack at once, each rejecting when the rack has
/// any unfinished task: the per-rack serialisation lets exactly one in.
async fn task_submit_is_serialised_per_rack(db: &Db) {
    const SUBMITTERS: u128 = 8;
    let store = db.shared();
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    store.rack_create(&rack(2, "r2", None), &[]).await.unwrap();
    let barrier = Arc::new(tokio::sync::Barrier::new(2 * SUBMITTERS as usize));
    let mut handles = Vec::new();
    for n in 0..2 * SUBMITTERS {
        let store = store.clone();
        let barrier = barrier.clone();
        // Half on each rack: racks do not block each other's first task.
        let rack_id = id(1 + n % 2);
        handles.push(tokio::spawn(async move {
            barrier.wait().await;
            store
                .task_submit(&task(100 + n, rack_id), &|unfinished| {
                    if unfinished.is_empty() {
                        insert_as(TaskStatus::Pending, messages::PENDING)
                    } else {
                        SubmitDecision::Reject(SubmitReject::QueueFull { waiting: 5 })
                    }
                })
                .await
                .unwrap()
        }));
    }
    let mut inserted = Vec::new();
    for handle in handles {
        match handle.await.unwrap() {
            SubmitOutcome::Inserted(t) => inserted.push(t.rack_id),
            SubmitOutcome::Rejected(reason) => {
                assert_eq!(reason, SubmitReject::QueueFull { waiting: 5 })
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    inserted.sort();
    assert_eq!(inserted, [id(1), id(2)]);
    assert_eq!(db.count("task").await, 2);
}

async fn status_counts_group_runs_active_targets_and_unfinished_tasks(db: &Db) {
    let store = db.store();
    assert_eq!(
        store.status_counts().await.unwrap(),
        rackflow_store::StatusCounts::default()
    );
    let active = run(1, "active");
    store
        .run_create(
            &active,
            &[
                target(100, active.id, 0, 0, TargetStatus::Completed),
                target(101, active.id, 1, 0, TargetStatus::Submitted),
                target(102, active.id, 2, 1, TargetStatus::Pending),
                target(103, active.id, 3, 1, TargetStatus::Pending),
            ],
        )
        .await
        .unwrap();
    let mut done = run(2, "done");
    done.status = RunStatus::Completed;
    store
        .run_create(&done, &[target(200, done.id, 0, 0, TargetStatus::Pending)])
        .await
        .unwrap();
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    submit(store, task(1, id(1)), TaskStatus::Running).await;
    submit(store, task(2, id(1)), TaskStatus::Waiting).await;
    submit(store, task(3, id(1)), TaskStatus::Waiting).await;
    submit(store, task(4, id(1)), TaskStatus::Completed).await;
    let mut counts = store.status_counts().await.unwrap();
    counts.runs.sort_by_key(|(s, _)| s.as_str());
    counts.targets.sort_by_key(|(s, _)| s.as_str());
    counts.tasks.sort_by_key(|(_, s, _)| s.as_str());
    assert_eq!(
        counts.runs,
        [(RunStatus::Completed, 1), (RunStatus::Pending, 1)]
    );
    // The finished run's targets are not counted.
    assert_eq!(
        counts.targets,
        [
            (TargetStatus::Completed, 1),
            (TargetStatus::Pending, 2),
            (TargetStatus::Submitted, 1)
        ]
    );
    // Finished tasks are not counted.
    assert_eq!(
        counts.tasks,
        [
            (TaskType::PowerControl, TaskStatus::Running, 1),
            (TaskType::PowerControl, TaskStatus::Waiting, 2)
        ]
    );
}

async fn task_promote_applies_transitions(db: &Db) {
    let store = db.store();
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    store.rack_create(&rack(2, "r2", None), &[]).await.unwrap();
    let since = Utc::now().trunc_subsecs(6);
    let deadline = ts("2030-01-01T00:00:00Z");
    let running = submit(store, task(1, id(1)), TaskStatus::Running).await;
    let mut waiting = Vec::new();
    for n in 2..=4 {
        let t = task(n, id(1));
        let stored = match store
            .task_submit(&t, &|_| SubmitDecision::Insert {
                status: TaskStatus::Waiting,
                message: messages::WAITING.into(),
                queue_expires_at: Some(deadline),
                start: None,
            })
            .await
            .unwrap()
        {
            SubmitOutcome::Inserted(stored) => stored,
            other => panic!("expected Inserted, got {other:?}"),
        };
        waiting.push(stored);
    }
    submit(store, task(5, id(2)), TaskStatus::Pending).await;
    assert_eq!(store.racks_with_waiting_tasks().await.unwrap(), [id(1)]);

    let seen = Mutex::new(Vec::new());
    let updated = store
        .task_promote(id(1), &|unfinished| {
            seen.lock().unwrap().extend(ids(unfinished));
            vec![
                // Expire the oldest waiting task, promote the next.
                TaskTransition {
                    id: id(2),
                    status: TaskStatus::Terminated,
                    message: messages::EXPIRED.into(),
                },
                TaskTransition {
                    id: id(3),
                    status: TaskStatus::Pending,
                    message: messages::PROMOTED.into(),
                },
                // Shown as waiting, pending by now: skipped.
                TaskTransition {
                    id: id(3),
                    status: TaskStatus::Terminated,
                    message: "late".into(),
                },
                // Not a task of this rack: skipped.
                TaskTransition {
                    id: id(5),
                    status: TaskStatus::Terminated,
                    message: "other rack".into(),
                },
            ]
        })
        .await
        .unwrap();
    assert_eq!(
        seen.lock().unwrap().as_slice(),
        [running.id, id(2), id(3), id(4)]
    );
    assert_eq!(ids(&updated), [id(2), id(3)]);

    let expired = &updated[0];
    assert_eq!(
        (
            expired.status,
            expired.message.as_str(),
            expired.queue_expires_at
        ),
        (TaskStatus::Terminated, messages::EXPIRED, None)
    );
    let finished = expired.finished_at.expect("finished_at stamped");
    assert!(finished >= since && finished <= Utc::now());
    // One clock, the store's, for every stamp of a write (both dialects).
    assert_eq!(expired.updated_at, finished);
    assert_eq!(expired.started_at, None);
    assert!(expired.updated_at >= waiting[0].updated_at);
    let promoted = &updated[1];
    assert_eq!(
        (
            promoted.status,
            promoted.message.as_str(),
            promoted.queue_expires_at,
            promoted.finished_at
        ),
        (TaskStatus::Pending, messages::PROMOTED, None, None)
    );
    for t in &updated {
        assert_eq!(store.task_get(t.id).await.unwrap().as_ref(), Some(t));
    }
    // The last waiting task and the other rack are untouched.
    assert_eq!(
        store.task_get(id(4)).await.unwrap().as_ref(),
        Some(&waiting[2])
    );
    assert_eq!(
        store.task_get(id(5)).await.unwrap().unwrap().status,
        TaskStatus::Pending
    );
    assert_eq!(store.racks_with_waiting_tasks().await.unwrap(), [id(1)]);

    // Nothing to do: nothing changes.
    let none = store.task_promote(id(1), &|_| Vec::new()).await.unwrap();
    assert!(none.is_empty());

    let updated = store
        .task_promote(id(1), &|_| {
            vec![TaskTransition {
                id: id(4),
                status: TaskStatus::Terminated,
                message: messages::CANCELLED.into(),
            }]
        })
        .await
        .unwrap();
    assert_eq!(ids(&updated), [id(4)]);
    assert!(store.racks_with_waiting_tasks().await.unwrap().is_empty());
    // A rack without tasks (or unknown) is shown nothing.
    let updated = store
        .task_promote(id(404), &|unfinished| {
            assert!(unfinished.is_empty());
            Vec::new()
        })
        .await
        .unwrap();
    assert!(updated.is_empty());
}

async fn task_update_is_conditional_and_stamps(db: &Db) {
    let store = db.store();
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    let r = rule(0xF1, "power on", TaskType::PowerControl, "power_on", false);
    store.rule_create(&r).await.unwrap();
    let since = Utc::now().trunc_subsecs(6);
    let pending = submit(store, task(1, id(1)), TaskStatus::Pending).await;

    // Not in an expected status: nothing changes.
    let update = TaskUpdate {
        expected: vec![TaskStatus::Running, TaskStatus::Waiting],
        status: Some(TaskStatus::Completed),
        ..Default::default()
    };
    assert_eq!(store.task_update(pending.id, &update).await.unwrap(), None);
    assert_eq!(
        store.task_get(pending.id).await.unwrap().as_ref(),
        Some(&pending)
    );
    assert_eq!(store.task_update(id(404), &update).await.unwrap(), None);

    // Start: executor, execution, rule and report written; started_at set.
    let start = TaskUpdate {
        expected: vec![TaskStatus::Pending],
        status: Some(TaskStatus::Running),
        message: Some(messages::RUNNING.into()),
        report: Some(serde_json::json!({"version": 1})),
        applied_rule_id: Some(Some(r.id)),
        rule_definition: Some(definition(4)),
        executor_type: Some("temporal".into()),
        execution_id: Some("wf-1".into()),
        queue_expires_at: None,
        lease: None,
        expected_owner: None,
        rack_lifecycle: None,
    };
    let running = store
        .task_update(pending.id, &start)
        .await
        .unwrap()
        .expect("updated");
    let started = running.started_at.expect("started_at stamped");
    assert!(started >= since && started <= Utc::now());
    assert_eq!(running.updated_at, started);
    assert!(running.updated_at >= pending.updated_at);
    let mut expected = pending.clone();
    expected.status = TaskStatus::Running;
    expected.message = messages::RUNNING.into();
    expected.report = Some(serde_json::json!({"version": 1}));
    expected.applied_rule_id = Some(r.id);
    expected.rule_definition = Some(definition(4));
    expected.executor_type = "temporal".into();
    expected.execution_id = "wf-1".into();
    expected.started_at = running.started_at;
    expected.updated_at = running.updated_at;
    assert_eq!(running, expected);
    assert_eq!(
        store.task_get(pending.id).await.unwrap().as_ref(),
        Some(&expected)
    );

    // Running again (e.g. a resumed task) keeps the first started_at; a
    // message-only update with no status touches only the message.
    let again = store
        .task_update(
            pending.id,
            &TaskUpdate {
                status: Some(TaskStatus::Running),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.started_at, running.started_at);
    let progress = store
        .task_update(
            pending.id,
            &TaskUpdate {
                message: Some("stage 1/2".into()),
                applied_rule_id: Some(None),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            progress.status,
            progress.message.as_str(),
            progress.applied_rule_id
        ),
        (TaskStatus::Running, "stage 1/2", None)
    );

    // Finish: finished_at set once, kept on later updates.
    let done = store
        .task_update(
            pending.id,
            &TaskUpdate {
                expected: vec![TaskStatus::Pending, TaskStatus::Running],
                status: Some(TaskStatus::Failed),
                message: Some("Failed".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    let finished = done.finished_at.expect("finished_at stamped");
    assert!(finished >= started && finished <= Utc::now());
    assert_eq!(done.started_at, running.started_at);
    let later = store
        .task_update(
            pending.id,
            &TaskUpdate {
                status: Some(TaskStatus::Failed),
                message: Some(String::new()),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (later.finished_at, later.message.as_str()),
        (done.finished_at, "")
    );

    // A waiting task: deadline cleared on leaving waiting, unless set too.
    let deadline = ts("2030-01-01T00:00:00Z");
    let parked = store
        .task_update(
            submit(store, task(2, id(1)), TaskStatus::Pending).await.id,
            &TaskUpdate {
                status: Some(TaskStatus::Waiting),
                message: Some("Waiting for target linkage: r1".into()),
                queue_expires_at: Some(Some(deadline)),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (parked.status, parked.queue_expires_at),
        (TaskStatus::Waiting, Some(deadline))
    );
    let cancelled = store
        .task_update(
            parked.id,
            &TaskUpdate {
                expected: vec![TaskStatus::Waiting],
                status: Some(TaskStatus::Terminated),
                message: Some(messages::CANCELLED.into()),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cancelled.queue_expires_at, None);
    assert!(cancelled.finished_at.is_some());
    assert_eq!(cancelled.started_at, None);

    // An unknown rule is NotFound and writes nothing.
    match store
        .task_update(
            parked.id,
            &TaskUpdate {
                message: Some("x".into()),
                applied_rule_id: Some(Some(id(0xF404))),
                ..Default::default()
            },
        )
        .await
    {
        Err(StoreError::NotFound(what)) => {
            assert_eq!(what, format!("operation rule {}", id(0xF404)))
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
    assert_eq!(
        store.task_get(parked.id).await.unwrap().as_ref(),
        Some(&cancelled)
    );
}

async fn task_list_filters_orders_and_pages(db: &Db) {
    let store = db.store();
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    store.rack_create(&rack(2, "r2", None), &[]).await.unwrap();
    // ids 1..=6, created in that order; statuses and racks vary.
    let plan = [
        (1, id(1), TaskStatus::Pending),
        (2, id(2), TaskStatus::Waiting),
        (3, id(1), TaskStatus::Running),
        (4, id(1), TaskStatus::Pending),
        (5, id(2), TaskStatus::Pending),
        (6, id(1), TaskStatus::Pending),
    ];
    for (n, rack_id, status) in plan {
        let mut t = task(n, rack_id);
        t.report = Some(serde_json::json!({"task": n as u64}));
        if n == 4 {
            // Shares task 1's compute component, under another type too.
            t.components_by_type = ComponentsByType::new();
            t.components_by_type
                .push(ComponentType::PowerShelf, id(0xE000));
            t.components_by_type
                .push(ComponentType::Compute, id(0xC001));
        }
        submit(store, t, status).await;
    }
    for (n, status) in [(4, TaskStatus::Completed), (6, TaskStatus::Failed)] {
        store
            .task_update(
                id(n),
                &TaskUpdate {
                    status: Some(status),
                    ..Default::default()
                },
            )
            .await
            .unwrap()
            .unwrap();
    }

    let list = |filter: TaskFilter, page: Page, with_report: bool| async move {
        store.task_list(&filter, page, with_report).await.unwrap()
    };
    // created_at DESC, id DESC; reports stripped unless asked for.
    let (tasks, total) = list(TaskFilter::default(), all(), false).await;
    assert_eq!(total, 6);
    assert_eq!(ids(&tasks), [6, 5, 4, 3, 2, 1].map(id));
    assert!(tasks.iter().all(|t| t.report.is_none()));
    let (tasks, _) = list(TaskFilter::default(), page(1, 2), true).await;
    assert_eq!(ids(&tasks), [id(5), id(4)]);
    assert_eq!(tasks[0].report, Some(serde_json::json!({"task": 5})));
    assert_eq!(tasks[0], store.task_get(id(5)).await.unwrap().unwrap());
    let (tasks, total) = list(TaskFilter::default(), page(10, 2), false).await;
    assert_eq!((tasks.len(), total), (0, 6));

    let by_rack = TaskFilter {
        rack_id: Some(id(1)),
        ..Default::default()
    };
    let (tasks, total) = list(by_rack.clone(), page(0, 2), false).await;
    assert_eq!((ids(&tasks), total), (vec![id(6), id(4)], 4));
    let active = TaskFilter {
        active_only: true,
        ..by_rack.clone()
    };
    let (tasks, total) = list(active, all(), false).await;
    assert_eq!((ids(&tasks), total), (vec![id(3), id(1)], 2));
    let statuses = TaskFilter {
        statuses: vec![TaskStatus::Waiting, TaskStatus::Failed],
        ..Default::default()
    };
    let (tasks, _) = list(statuses, all(), false).await;
    assert_eq!(ids(&tasks), [id(6), id(2)]);
    let component = TaskFilter {
        component_id: Some(id(0xC001)),
        ..Default::default()
    };
    let (tasks, total) = list(component.clone(), all(), false).await;
    assert_eq!((ids(&tasks), total), (vec![id(4), id(1)], 2));
    let (tasks, _) = list(
        TaskFilter {
            component_id: Some(id(0xE000)),
            ..Default::default()
        },
        all(),
        false,
    )
    .await;
    assert_eq!(ids(&tasks), [id(4)]);
    let (tasks, _) = list(
        TaskFilter {
            active_only: true,
            ..component
        },
        all(),
        false,
    )
    .await;
    assert_eq!(ids(&tasks), [id(1)]);
    let (tasks, total) = list(
        TaskFilter {
            component_id: Some(id(404)),
            ..Default::default()
        },
        all(),
        false,
    )
    .await;
    assert_eq!((tasks.len(), total), (0, 0));

    // By ids, in the order asked; unknown ones skipped.
    let many = store
        .tasks_get_many(&[id(3), id(404), id(1), id(3)])
        .await
        .unwrap();
    assert_eq!(ids(&many), [id(3), id(1), id(3)]);
    assert!(many[0].report.is_some());
    assert!(store.tasks_get_many(&[]).await.unwrap().is_empty());

    // Recovery: created_at ASC.
    let recovering = store
        .tasks_with_status(&[TaskStatus::Pending, TaskStatus::Running])
        .await
        .unwrap();
    assert_eq!(ids(&recovering), [id(1), id(3), id(5)]);
    assert!(store.tasks_with_status(&[]).await.unwrap().is_empty());
}

// ---- operation rules -------------------------------------------------------

fn rule(n: u128, name: &str, task_type: TaskType, code: &str, is_default: bool) -> OperationRule {
    OperationRule {
        id: id(n),
        name: name.into(),
        description: format!("rule {name}"),
        operation_type: task_type,
        operation_code: code.into(),
        definition: definition(n as i32 % 7),
        is_default,
        created_at: epoch(),
        updated_at: epoch(),
    }
}

fn stamped_rule(mut expected: OperationRule, got: &OperationRule) -> OperationRule {
    expected.created_at = got.created_at;
    expected.updated_at = got.updated_at;
    expected
}

fn rule_ids(rules: &[OperationRule]) -> Vec<Uuid> {
    rules.iter().map(|r| r.id).collect()
}

async fn rules_crud_and_defaults(db: &Db) {
    let store = db.store();
    let since = Utc::now().trunc_subsecs(6);
    let on_a = rule(1, "on a", TaskType::PowerControl, "power_on", true);
    let on_b = rule(2, "on b", TaskType::PowerControl, "power_on", false);
    let off = rule(3, "off", TaskType::PowerControl, "power_off", true);
    let mut fw = rule(4, "fw", TaskType::FirmwareControl, "upgrade", false);
    fw.description = String::new();
    for r in [&on_a, &on_b, &off, &fw] {
        store.rule_create(r).await.unwrap();
    }
    let got = store.rule_get(on_a.id).await.unwrap().expect("rule");
    assert_eq!(got.created_at, got.updated_at);
    assert!(got.created_at >= since && got.created_at <= Utc::now());
    assert_eq!(got, stamped_rule(on_a.clone(), &got));
    let got_fw = store.rule_get(fw.id).await.unwrap().unwrap();
    assert_eq!(got_fw.description, "");
    assert_eq!(store.rule_get(id(404)).await.unwrap(), None);

    // A second default for (type, code), or a used id: nothing written.
    let second = rule(5, "on c", TaskType::PowerControl, "power_on", true);
    assert_eq!(
        already_exists(store.rule_create(&second).await),
        "a default rule for (power_control, power_on)"
    );
    assert_eq!(
        store.rule_create(&second).await.unwrap_err().to_string(),
        "a default rule for (power_control, power_on) already exists"
    );
    let mut same_id = rule(1, "dup", TaskType::BringUp, "ingest", false);
    same_id.is_default = false;
    assert_eq!(
        already_exists(store.rule_create(&same_id).await),
        format!("operation rule id \"{}\"", id(1))
    );
    assert_eq!(db.count("operation_rules").await, 4);

    // Listing: created_at DESC, id DESC; filters AND; total before paging.
    let (rules, total) = store.rule_list(None, None, all()).await.unwrap();
    assert_eq!(
        (rule_ids(&rules), total),
        ([4, 3, 2, 1].map(id).to_vec(), 4)
    );
    let (rules, total) = store
        .rule_list(Some(TaskType::PowerControl), None, page(1, 1))
        .await
        .unwrap();
    assert_eq!((rule_ids(&rules), total), (vec![id(2)], 3));
    let (rules, _) = store
        .rule_list(Some(TaskType::PowerControl), Some(true), all())
        .await
        .unwrap();
    assert_eq!(rule_ids(&rules), [id(3), id(1)]);
    let (rules, _) = store.rule_list(None, Some(false), all()).await.unwrap();
    assert_eq!(rule_ids(&rules), [id(4), id(2)]);
    let (rules, total) = store
        .rule_list(Some(TaskType::Decommission), None, all())
        .await
        .unwrap();
    assert_eq!((rules.len(), total), (0, 0));

    // Update: only the given fields; an empty description clears it.
    let updated = store
        .rule_update(on_b.id, Some("on b v2"), Some(""), Some(&definition(6)))
        .await
        .unwrap()
        .expect("updated");
    let before = store.rule_list(None, None, all()).await.unwrap().0;
    assert!(updated.updated_at >= updated.created_at);
    let mut expected = on_b.clone();
    expected.name = "on b v2".into();
    expected.description = String::new();
    expected.definition = definition(6);
    assert_eq!(updated, stamped_rule(expected.clone(), &updated));
    let renamed = store
        .rule_update(on_b.id, None, Some("described"), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            renamed.name.as_str(),
            renamed.description.as_str(),
            &renamed.definition
        ),
        ("on b v2", "described", &definition(6))
    );
    assert_eq!(
        store
            .rule_update(id(404), Some("x"), None, None)
            .await
            .unwrap(),
        None
    );
    assert_eq!(before.len(), 4);

    // Set default: swaps within (type, code) only.
    assert_eq!(
        store
            .rule_default_for(TaskType::PowerControl, "power_on")
            .await
            .unwrap()
            .map(|r| r.id),
        Some(on_a.id)
    );
    assert!(store.rule_set_default(on_b.id).await.unwrap());
    assert_eq!(
        store
            .rule_default_for(TaskType::PowerControl, "power_on")
            .await
            .unwrap()
            .map(|r| r.id),
        Some(on_b.id)
    );
    assert!(!store.rule_get(on_a.id).await.unwrap().unwrap().is_default);
    assert!(store.rule_get(off.id).await.unwrap().unwrap().is_default);
    // Idempotent; unknown → false.
    assert!(store.rule_set_default(on_b.id).await.unwrap());
    assert!(!store.rule_set_default(id(404)).await.unwrap());
    assert!(store.rule_set_default(fw.id).await.unwrap());
    assert_eq!(
        store
            .rule_default_for(TaskType::FirmwareControl, "upgrade")
            .await
            .unwrap()
            .map(|r| r.id),
        Some(fw.id)
    );
    assert_eq!(
        store
            .rule_default_for(TaskType::FirmwareControl, "downgrade")
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM operation_rules WHERE is_default")
            .await,
        3
    );

    assert!(store.rule_delete(on_a.id).await.unwrap());
    assert!(!store.rule_delete(on_a.id).await.unwrap());
    assert_eq!(store.rule_get(on_a.id).await.unwrap(), None);
}

async fn rule_delete_cascades_and_nulls_applied_rule(db: &Db) {
    let store = db.store();
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    store.rack_create(&rack(2, "r2", None), &[]).await.unwrap();
    let on = rule(1, "on", TaskType::PowerControl, "power_on", false);
    let off = rule(2, "off", TaskType::PowerControl, "power_off", false);
    store.rule_create(&on).await.unwrap();
    store.rule_create(&off).await.unwrap();
    for rack_id in [id(1), id(2)] {
        store.rule_associate(rack_id, on.id).await.unwrap();
        store.rule_associate(rack_id, off.id).await.unwrap();
    }
    let mut t = task(10, id(1));
    t.applied_rule_id = Some(on.id);
    t.rule_definition = Some(on.definition.clone());
    let running = submit(store, t, TaskStatus::Running).await;
    assert_eq!(running.applied_rule_id, Some(on.id));

    assert!(store.rule_delete(on.id).await.unwrap());
    for rack_id in [id(1), id(2)] {
        let codes: Vec<String> = store
            .rule_associations_list(rack_id)
            .await
            .unwrap()
            .into_iter()
            .map(|a| a.operation_code)
            .collect();
        assert_eq!(codes, ["power_off"]);
    }
    // The task keeps running with the definition it started with.
    let after = store.task_get(running.id).await.unwrap().unwrap();
    assert_eq!(after.applied_rule_id, None);
    assert_eq!(after.rule_definition, Some(on.definition.clone()));
    assert_eq!(after.status, TaskStatus::Running);
}

async fn rule_associations_upsert_get_list_disassociate(db: &Db) {
    let store = db.store();
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    store
        .rack_create(&rack(2, "gone", None), &[])
        .await
        .unwrap();
    store.rack_soft_delete(id(2)).await.unwrap();
    let on_a = rule(1, "on a", TaskType::PowerControl, "power_on", false);
    let on_b = rule(2, "on b", TaskType::PowerControl, "power_on", false);
    let fw = rule(3, "fw", TaskType::FirmwareControl, "upgrade", false);
    let off = rule(4, "off", TaskType::PowerControl, "power_off", false);
    for r in [&on_a, &on_b, &fw, &off] {
        store.rule_create(r).await.unwrap();
    }
    let since = Utc::now().trunc_subsecs(6);

    let not_found = |result: Result<(), StoreError>| match result {
        Err(StoreError::NotFound(what)) => what,
        other => panic!("expected NotFound, got {other:?}"),
    };
    assert_eq!(
        not_found(store.rule_associate(id(404), on_a.id).await),
        format!("rack {}", id(404))
    );
    assert_eq!(
        not_found(store.rule_associate(id(2), on_a.id).await),
        format!("rack {}", id(2))
    );
    assert_eq!(
        not_found(store.rule_associate(id(1), id(0xF404)).await),
        format!("operation rule {}", id(0xF404))
    );
    assert_eq!(db.count("rack_rule_associations").await, 0);

    store.rule_associate(id(1), on_a.id).await.unwrap();
    let got = store
        .rule_association_get(id(1), TaskType::PowerControl, "power_on")
        .await
        .unwrap()
        .expect("association");
    assert_eq!(got.created_at, got.updated_at);
    assert!(got.created_at >= since && got.created_at <= Utc::now());
    assert_eq!(
        got,
        RackRuleAssociation {
            rack_id: id(1),
            operation_type: TaskType::PowerControl,
            operation_code: "power_on".into(),
            rule_id: on_a.id,
            created_at: got.created_at,
            updated_at: got.updated_at,
        }
    );

    // Upsert on (rack, type, code): the newer rule replaces the older.
    store.rule_associate(id(1), on_b.id).await.unwrap();
    let replaced = store
        .rule_association_get(id(1), TaskType::PowerControl, "power_on")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(replaced.rule_id, on_b.id);
    assert_eq!(replaced.created_at, got.created_at);
    assert!(replaced.updated_at >= got.updated_at);
    store.rule_associate(id(1), fw.id).await.unwrap();
    store.rule_associate(id(1), off.id).await.unwrap();

    let list = store.rule_associations_list(id(1)).await.unwrap();
    let keys: Vec<(TaskType, &str, Uuid)> = list
        .iter()
        .map(|a| (a.operation_type, a.operation_code.as_str(), a.rule_id))
        .collect();
    assert_eq!(
        keys,
        [
            (TaskType::FirmwareControl, "upgrade", fw.id),
            (TaskType::PowerControl, "power_off", off.id),
            (TaskType::PowerControl, "power_on", on_b.id),
        ]
    );
    assert!(
        store
            .rule_associations_list(id(404))
            .await
            .unwrap()
            .is_empty()
    );
    // For many racks at once, one operation: only its associations.
    let for_racks = store
        .rule_associations_for_racks(&[id(404), id(1)], TaskType::PowerControl, "power_off")
        .await
        .unwrap();
    assert_eq!(
        for_racks
            .iter()
            .map(|a| (a.rack_id, a.rule_id))
            .collect::<Vec<_>>(),
        [(id(1), off.id)]
    );
    assert!(
        store
            .rule_associations_for_racks(&[id(1)], TaskType::PowerControl, "restart")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .rule_association_get(id(1), TaskType::PowerControl, "restart")
            .await
            .unwrap(),
        None
    );

    store
        .rule_disassociate(id(1), TaskType::PowerControl, "power_on")
        .await
        .unwrap();
    store
        .rule_disassociate(id(1), TaskType::PowerControl, "power_on")
        .await
        .unwrap();
    store
        .rule_disassociate(id(404), TaskType::BringUp, "ingest")
        .await
        .unwrap();
    assert_eq!(
        store
            .rule_association_get(id(1), TaskType::PowerControl, "power_on")
            .await
            .unwrap(),
        None
    );
    assert_eq!(store.rule_associations_list(id(1)).await.unwrap().len(), 2);
}

// ---- dialect-specific ------------------------------------------------------

/// Both migrated schemas describe the same model: same tables, same columns.
#[tokio::test]
async fn sqlite_and_postgres_schemas_have_the_same_tables_and_columns() {
    let sqlite = Db::sqlite().await;
    let Some(postgres) = Db::postgres().await else {
        sqlite.finish().await;
        return;
    };
    let Kind::Sqlite(lite) = &sqlite.kind else {
        unreachable!()
    };
    let Kind::Postgres(pg) = &postgres.kind else {
        unreachable!()
    };
    let lite_columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT m.name, p.name FROM sqlite_master AS m JOIN pragma_table_info(m.name) AS p \
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name NOT LIKE '_sqlx_%'",
    )
    .fetch_all(lite.pool())
    .await
    .unwrap();
    let pg_columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name NOT LIKE '\\_sqlx\\_%'",
    )
    .fetch_all(pg.pool())
    .await
    .unwrap();
    let by_table = |rows: Vec<(String, String)>| {
        let mut tables: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (table, column) in rows {
            tables.entry(table).or_default().push(column);
        }
        for columns in tables.values_mut() {
            columns.sort();
        }
        tables
    };
    let lite_tables = by_table(lite_columns);
    assert_eq!(
        lite_tables.keys().collect::<Vec<_>>(),
        [
            "audit_event",
            "bmc",
            "component",
            "event_rule_bindings",
            "event_rules",
            "leak_events",
            "nvldomain",
            "operation_rules",
            "operation_run",
            "operation_run_target",
            "rack",
            "rack_rule_associations",
            "task",
            "task_schedule",
            "task_schedule_scope"
        ]
    );
    assert_eq!(lite_tables, by_table(pg_columns));
    sqlite.finish().await;
    postgres.finish().await;
}

/// SQLite serves one process: a second open of the same file — what a
/// second `rackflow serve` would do — is refused with a message that names
/// the file and the way out, and the file opens again once the first store
/// is gone.
#[tokio::test]
async fn a_sqlite_file_admits_one_process() {
    let database = TestDatabase::sqlite();
    let path = database.sqlite_path().expect("a SQLite file").to_path_buf();
    let first = SqliteStore::open(&path).await.unwrap();
    assert!(first.exclusive());
    let refused = SqliteStore::open(&path)
        .await
        .expect_err("second open refused");
    let text = refused.to_string();
    assert!(matches!(refused, StoreError::Locked(_)), "{refused:?}");
    assert!(
        text.contains(&path.display().to_string())
            && text.contains("another rackflow process")
            && text.contains("PostgreSQL"),
        "{text}"
    );
    // Clones share the lock; it goes with the last of them.
    let clone = first.clone();
    first.close().await;
    drop(first);
    assert!(
        SqliteStore::open(&path).await.is_err(),
        "a clone still holds the file"
    );
    drop(clone);
    let again = SqliteStore::open(&path).await.unwrap();
    again.close().await;
    database.remove().await;
}

#[tokio::test]
async fn open_store_opens_sqlite_in_wal_mode_with_foreign_keys() {
    let database = TestDatabase::sqlite();
    let path = database.sqlite_path().expect("a SQLite file").to_path_buf();
    let store = open_store(&DbTarget::Sqlite(path.clone())).await.unwrap();
    assert_eq!(store.dialect(), "sqlite");
    store.rack_create(&rack(1, "r", None), &[]).await.unwrap();
    drop(store);

    // Reopening runs the (already applied) migrations again harmlessly.
    let db = Db {
        kind: Kind::Sqlite(SqliteStore::open(&path).await.unwrap()),
        database: Some(database),
    };
    assert_eq!(db.count("rack").await, 1);
    let Kind::Sqlite(lite) = &db.kind else {
        unreachable!()
    };
    let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(lite.pool())
        .await
        .unwrap();
    assert_eq!(journal, "wal");
    assert_eq!(db.scalar("PRAGMA foreign_keys").await, 1);
    db.finish().await;
}

#[tokio::test]
async fn in_memory_sqlite_store_works() {
    let store = SqliteStore::open_in_memory().await.unwrap();
    store.rack_create(&rack(1, "r", None), &[]).await.unwrap();
    let (racks, total) = store
        .rack_list(&RackFilter::default(), Page::DEFAULT)
        .await
        .unwrap();
    assert_eq!((racks.len(), total), (1, 1));
}

#[test]
fn db_target_debug_hides_the_postgres_url() {
    let target = DbTarget::Postgres("postgres://admin:hunter2@db/rackflow".into());
    assert_eq!(format!("{target:?}"), "Postgres(<redacted>)");
}

/// `task_states` answers status and message of the tasks that exist, once
/// each, whatever the order or repeats of the ids asked for.
async fn task_states_report_status_and_message_only(db: &Db) {
    let store = db.store();
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    let a = submit(store, task(1, id(1)), TaskStatus::Pending).await;
    let b = submit(store, task(2, id(1)), TaskStatus::Waiting).await;
    let done = TaskUpdate {
        status: Some(TaskStatus::Failed),
        message: Some("stage 1 failed".into()),
        ..Default::default()
    };
    store.task_update(b.id, &done).await.unwrap().unwrap();
    let mut states = store
        .task_states(&[b.id, id(404), a.id, b.id])
        .await
        .unwrap();
    states.sort_by_key(|(id, _, _)| *id);
    assert_eq!(
        states,
        vec![
            (a.id, TaskStatus::Pending, a.message.clone()),
            (b.id, TaskStatus::Failed, "stage 1 failed".to_string()),
        ]
    );
    assert!(store.task_states(&[]).await.unwrap().is_empty());
}

fn audit_event(actor: &str, action: &str, run: Option<Uuid>, at: DateTime<Utc>) -> AuditEvent {
    AuditEvent {
        run_id: run,
        subject_ids: vec!["a".into(), "b".into()],
        summary: "summary".into(),
        message: "ok".into(),
        ..AuditEvent::new(at, actor, action)
    }
}

async fn audit_trail_appends_lists_pages_and_prunes(db: &Db) {
    let store = db.store();
    let old = Utc::now().trunc_subsecs(6) - chrono::Duration::days(10);
    let now = Utc::now().trunc_subsecs(6);
    let run = id(0xA0D1);
    store
        .audit_append(&[
            audit_event("alice", "v1.Flow/CreateOperationRun", Some(run), old),
            audit_event("alice", "v1.Flow/PauseOperationRun", Some(run), now),
            audit_event(SYSTEM_ACTOR, "run/gate_tripped", Some(run), now),
            audit_event("bob", "v1.Flow/CreateOperationRule", None, now),
        ])
        .await
        .unwrap();
    let all = store
        .audit_list(&AuditFilter::default(), 100)
        .await
        .unwrap();
    assert_eq!(all.len(), 4);
    assert!(all.windows(2).all(|w| w[0].seq < w[1].seq), "{all:?}");
    assert_eq!(all[0].at, old);
    assert_eq!(all[0].subject_ids, ["a", "b"]);
    assert_eq!(all[0].summary, "summary");
    let by_run = AuditFilter {
        run_id: Some(run),
        ..AuditFilter::default()
    };
    let actions: Vec<String> = store
        .audit_list(&by_run, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect();
    assert_eq!(
        actions,
        [
            "v1.Flow/CreateOperationRun",
            "v1.Flow/PauseOperationRun",
            "run/gate_tripped"
        ]
    );
    let controls = AuditFilter {
        run_id: Some(run),
        controls_only: true,
        newest_first: true,
        ..AuditFilter::default()
    };
    let latest = store.audit_list(&controls, 1).await.unwrap();
    assert_eq!(latest[0].action, "run/gate_tripped");
    assert_eq!(latest[0].actor, SYSTEM_ACTOR);
    // Pages follow the sequence.
    let first = store.audit_list(&AuditFilter::default(), 2).await.unwrap();
    let next = store
        .audit_list(
            &AuditFilter {
                after_seq: Some(first[1].seq),
                ..AuditFilter::default()
            },
            2,
        )
        .await
        .unwrap();
    assert_eq!(
        next.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [all[2].seq, all[3].seq]
    );
    let bob = AuditFilter {
        actor: Some("bob".into()),
        since: Some(now - chrono::Duration::minutes(1)),
        ..AuditFilter::default()
    };
    assert_eq!(store.audit_list(&bob, 10).await.unwrap().len(), 1);
    // Retention: the old event goes, the rest stay.
    let removed = store
        .audit_prune(now - chrono::Duration::days(1))
        .await
        .unwrap();
    assert_eq!(removed, 1);
    assert_eq!(
        store
            .audit_list(&AuditFilter::default(), 100)
            .await
            .unwrap()
            .len(),
        3
    );
}

async fn a_run_control_and_its_audit_event_commit_together(db: &Db) {
    let store = db.store();
    let r = phased_run(store).await;
    let by_run = AuditFilter {
        run_id: Some(r.id),
        ..AuditFilter::default()
    };
    // A failed apply writes neither the change nor its event.
    let failed = store
        .run_lock_apply(r.id, LockMode::Wait, &mut |lock| {
            lock.run.status = RunStatus::Paused;
            lock.audit.push(audit_event(
                "alice",
                "v1.Flow/PauseOperationRun",
                Some(r.id),
                Utc::now(),
            ));
            Err(StoreError::NotFound("no".into()))
        })
        .await;
    assert!(failed.is_err());
    assert!(store.audit_list(&by_run, 10).await.unwrap().is_empty());
    // A committed one writes both.
    store
        .run_lock_apply(r.id, LockMode::Wait, &mut |lock| {
            lock.run.status = RunStatus::Paused;
            lock.run.reason = RunReason::OperatorPaused;
            lock.audit.push(audit_event(
                "alice",
                "v1.Flow/PauseOperationRun",
                Some(r.id),
                Utc::now(),
            ));
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(
        store.run_get(r.id).await.unwrap().unwrap().status,
        RunStatus::Paused
    );
    let events = store.audit_list(&by_run, 10).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].actor, "alice");
}

async fn secrets_reseal_rewrites_every_sealed_envelope(db: &Db) {
    let store = db.store();
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    let mut sealed = task(0x5EA1, id(1));
    sealed.information.firmware = Some(FirmwarePayload {
        authentication_data: Some(EncryptedSecret("old:1".into())),
        ..FirmwarePayload::default()
    });
    let t = submit(store, sealed, TaskStatus::Pending).await;
    let plain = submit(store, task(0x5EA2, id(1)), TaskStatus::Waiting).await;
    let outcome = store
        .secrets_reseal(&|envelope: &str| match envelope {
            "old:1" => Ok(Some("new:1".to_string())),
            other => Err(format!("unexpected {other}")),
        })
        .await
        .unwrap();
    assert_eq!(outcome.resealed, 1, "{outcome:?}");
    assert!(outcome.failures.is_empty(), "{outcome:?}");
    let stored = store.task_get(t.id).await.unwrap().unwrap();
    assert_eq!(
        stored.information.firmware.unwrap().authentication_data,
        Some(EncryptedSecret("new:1".into()))
    );
    assert_eq!(
        store.task_get(plain.id).await.unwrap().unwrap().information,
        plain.information
    );
    // Already current: counted, not written; an unknown key: reported.
    let outcome = store.secrets_reseal(&|_: &str| Ok(None)).await.unwrap();
    assert_eq!((outcome.resealed, outcome.already_current), (0, 1));
    let outcome = store
        .secrets_reseal(&|_: &str| Err("sealed with key k0, which is not configured".into()))
        .await
        .unwrap();
    assert_eq!(outcome.failures.len(), 1);
    assert!(
        outcome.failures[0].contains(&t.id.to_string()),
        "{outcome:?}"
    );
}

// ---- event rules -------------------------------------------------------------

fn event_rule(n: u128, name: &str) -> rackflow_domain::event_rule::EventRule {
    use rackflow_domain::event_rule::{Action, ActionSpec, Condition, LEAK_DETECTED, new_rule};
    new_rule(
        id(n),
        name.to_string(),
        format!("rule {name}"),
        LEAK_DETECTED,
        vec![Action {
            name: "audit".into(),
            condition: Condition::default(),
            spec: ActionSpec::Noop {
                reason: "record".into(),
            },
        }],
        Utc::now().trunc_subsecs(6),
    )
    .unwrap()
}

async fn event_rules_crud_bindings_and_selection(db: &Db) {
    use rackflow_domain::event_rule::{Binding, LEAK_DETECTED, Scope};
    use rackflow_store::{BindOutcome, EventRuleDeleted, EventRuleUpdate};
    let store = db.store();
    store.rack_create(&rack(1, "r1", None), &[]).await.unwrap();
    store.rack_create(&rack(2, "r2", None), &[]).await.unwrap();
    let (a, b) = (event_rule(0xA, "a"), event_rule(0xB, "b"));
    store.event_rule_create(&b).await.unwrap();
    store.event_rule_create(&a).await.unwrap();
    assert_eq!(store.event_rule_get(a.id).await.unwrap(), Some(a.clone()));
    assert_eq!(store.event_rule_get(id(0xF404)).await.unwrap(), None);
    let ids = |rules: Vec<rackflow_domain::event_rule::EventRule>| {
        rules.into_iter().map(|r| r.id).collect::<Vec<_>>()
    };
    assert_eq!(
        ids(store.event_rule_list(None, None).await.unwrap()),
        [a.id, b.id]
    );
    assert!(
        store
            .event_rule_list(None, Some(true))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .event_rule_list(Some("other.type"), None)
            .await
            .unwrap()
            .is_empty()
    );

    // Updates: metadata, actions, enabled.
    let renamed = store
        .event_rule_update(
            a.id,
            &EventRuleUpdate::Metadata {
                name: "a2".into(),
                description: String::new(),
            },
        )
        .await
        .unwrap()
        .expect("updated");
    assert_eq!(
        (renamed.name.as_str(), renamed.description.as_str()),
        ("a2", "")
    );
    assert!(renamed.updated_at >= renamed.created_at);
    let enabled = store
        .event_rule_update(a.id, &EventRuleUpdate::Enabled(true))
        .await
        .unwrap()
        .expect("enabled");
    assert!(enabled.enabled);
    let actions = b.actions.iter().cloned().chain(a.actions.iter().map(|x| {
        let mut x = x.clone();
        x.name = "second".into();
        x
    }));
    let replaced = store
        .event_rule_update(b.id, &EventRuleUpdate::Actions(actions.collect()))
        .await
        .unwrap()
        .expect("replaced");
    assert_eq!(replaced.actions.len(), 2);
    assert_eq!(
        store
            .event_rule_update(id(0xF404), &EventRuleUpdate::Enabled(true))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        ids(store
            .event_rule_list(Some(LEAK_DETECTED), Some(true))
            .await
            .unwrap()),
        [a.id]
    );

    // Bindings: scopes, conflicts, mixing, unknown racks and rules.
    let bind = |n: u128, rule: Uuid, scope: Scope| Binding {
        id: id(n),
        rule_id: rule,
        event_type: "ignored: the rule's".into(),
        scope,
    };
    let created = match store
        .event_rule_bind(&bind(0x100, a.id, Scope::Rack(id(1))))
        .await
        .unwrap()
    {
        BindOutcome::Created(binding) => binding,
        other => panic!("{other:?}"),
    };
    assert_eq!(created.event_type, LEAK_DETECTED);
    assert!(matches!(
        store.event_rule_bind(&bind(0x101, b.id, Scope::Rack(id(1)))).await.unwrap(),
        BindOutcome::ScopeTaken(taken) if taken.rule_id == a.id
    ));
    assert!(matches!(
        store.event_rule_bind(&bind(0x102, a.id, Scope::Site)).await.unwrap(),
        BindOutcome::MixedScopes(existing) if existing.scope == Scope::Rack(id(1))
    ));
    assert_eq!(
        store
            .event_rule_bind(&bind(0x103, a.id, Scope::Rack(id(404))))
            .await
            .unwrap(),
        BindOutcome::RackNotFound
    );
    assert_eq!(
        store
            .event_rule_bind(&bind(0x104, id(0xF404), Scope::Site))
            .await
            .unwrap(),
        BindOutcome::RuleNotFound
    );
    assert!(matches!(
        store
            .event_rule_bind(&bind(0x105, a.id, Scope::Rack(id(2))))
            .await
            .unwrap(),
        BindOutcome::Created(_)
    ));
    assert!(matches!(
        store
            .event_rule_bind(&bind(0x106, b.id, Scope::Site))
            .await
            .unwrap(),
        BindOutcome::Created(_)
    ));
    assert_eq!(db.count("event_rule_bindings").await, 3);
    assert_eq!(
        store
            .event_rule_binding_get(LEAK_DETECTED, Scope::Rack(id(1)))
            .await
            .unwrap()
            .map(|b| (b.id, b.rule_id)),
        Some((id(0x100), a.id))
    );
    assert_eq!(
        store
            .event_rule_binding_get(LEAK_DETECTED, Scope::Site)
            .await
            .unwrap()
            .map(|b| b.rule_id),
        Some(b.id)
    );
    let (rack_bound, site_bound) = store.event_rules_bound(LEAK_DETECTED, id(1)).await.unwrap();
    assert_eq!(rack_bound.map(|r| r.id), Some(a.id));
    assert_eq!(site_bound.map(|r| r.id), Some(b.id));
    let (rack_bound, site_bound) = store.event_rules_bound(LEAK_DETECTED, id(3)).await.unwrap();
    assert_eq!((rack_bound, site_bound.map(|r| r.id)), (None, Some(b.id)));

    // A bound rule is not deleted; unbinding frees it.
    match store.event_rule_delete(a.id).await.unwrap() {
        EventRuleDeleted::Bound(bindings) => assert_eq!(bindings.len(), 2),
        other => panic!("{other:?}"),
    }
    assert!(
        store
            .event_rule_unbind(LEAK_DETECTED, Scope::Rack(id(1)))
            .await
            .unwrap()
    );
    assert!(
        !store
            .event_rule_unbind(LEAK_DETECTED, Scope::Rack(id(1)))
            .await
            .unwrap()
    );
    assert!(
        store
            .event_rule_unbind(LEAK_DETECTED, Scope::Rack(id(2)))
            .await
            .unwrap()
    );
    assert_eq!(
        store.event_rule_delete(a.id).await.unwrap(),
        EventRuleDeleted::Deleted
    );
    assert_eq!(
        store.event_rule_delete(a.id).await.unwrap(),
        EventRuleDeleted::NotFound
    );
    // Purging a rack removes its bindings.
    assert!(matches!(
        store
            .event_rule_bind(&bind(0x107, b.id, Scope::Rack(id(2))))
            .await
            .unwrap(),
        BindOutcome::MixedScopes(_)
    ));
    assert!(
        store
            .event_rule_unbind(LEAK_DETECTED, Scope::Site)
            .await
            .unwrap()
    );
    assert!(matches!(
        store
            .event_rule_bind(&bind(0x108, b.id, Scope::Rack(id(2))))
            .await
            .unwrap(),
        BindOutcome::Created(_)
    ));
    store.rack_soft_delete(id(2)).await.unwrap();
    store.rack_purge(id(2)).await.unwrap();
    assert_eq!(db.count("event_rule_bindings").await, 0);
}

// ---- leaks -------------------------------------------------------------------

async fn leak_reports_keep_state_and_one_open_event_per_component(db: &Db) {
    use rackflow_domain::event_rule::Severity;
    use rackflow_domain::inventory::LeakStatus;
    use rackflow_domain::leak::{LeakReport, LeakReported};
    use rackflow_store::LeakEventFilter;
    let store = db.store();
    let tray = component(
        10,
        Some(id(1)),
        ComponentType::Compute,
        "c1",
        Some("ext-c1"),
    );
    store
        .rack_create(&rack(1, "r1", None), std::slice::from_ref(&tray))
        .await
        .unwrap();
    let at = |s: i64| ts("2026-12-01T00:00:00Z") + chrono::TimeDelta::seconds(s);
    let report = |detected: bool, s: i64| LeakReport {
        component_id: tray.id,
        source: "cdu-1".into(),
        severity: Severity::Critical,
        detected,
        observed_at: at(s),
        message: "drip tray wet".into(),
    };
    let leak = |c: rackflow_domain::inventory::Component| c.leak.map(|l| (l.status, l.observed_at));
    // No report yet: unknown.
    assert_eq!(
        leak(store.component_get(tray.id).await.unwrap().unwrap()),
        None
    );

    let first = match store.leak_report(&report(true, 10)).await.unwrap() {
        LeakReported::New(event) => event,
        other => panic!("{other:?}"),
    };
    assert_eq!((first.rack_id, first.observations), (Some(id(1)), 1));
    assert_eq!(
        leak(store.component_get(tray.id).await.unwrap().unwrap()),
        Some((LeakStatus::Detected, at(10)))
    );
    // The same leak again: one event, two observations.
    match store.leak_report(&report(true, 20)).await.unwrap() {
        LeakReported::Repeat(event) => {
            assert_eq!((event.id, event.observations), (first.id, 2));
        }
        other => panic!("{other:?}"),
    }
    // An older report changes nothing.
    assert_eq!(
        store.leak_report(&report(false, 5)).await.unwrap(),
        LeakReported::Stale
    );
    // Cleared: the event closes; a later leak is a new event.
    match store.leak_report(&report(false, 30)).await.unwrap() {
        LeakReported::Cleared(Some(event)) => {
            assert_eq!(event.id, first.id);
            assert!(event.closed_at.is_some());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        leak(store.component_get(tray.id).await.unwrap().unwrap()),
        Some((LeakStatus::NotDetected, at(30)))
    );
    assert_eq!(
        store.leak_report(&report(false, 31)).await.unwrap(),
        LeakReported::Cleared(None)
    );
    let second = match store.leak_report(&report(true, 40)).await.unwrap() {
        LeakReported::New(event) => event,
        other => panic!("{other:?}"),
    };
    assert_ne!(second.id, first.id);
    let unknown = LeakReport {
        component_id: id(404),
        ..report(true, 50)
    };
    assert_eq!(
        store.leak_report(&unknown).await.unwrap(),
        LeakReported::ComponentNotFound
    );

    // Listing: newest first, open only, by rack / component.
    let page = rackflow_domain::run::Page {
        offset: 0,
        limit: 10,
    };
    let (all, total) = store
        .leak_events_list(&LeakEventFilter::default(), page)
        .await
        .unwrap();
    assert_eq!(total, 2);
    assert_eq!(
        all.iter().map(|e| e.id).collect::<Vec<_>>(),
        [second.id, first.id]
    );
    let open = LeakEventFilter {
        open_only: true,
        rack_id: Some(id(1)),
        ..LeakEventFilter::default()
    };
    let (events, total) = store.leak_events_list(&open, page).await.unwrap();
    assert_eq!((events.len(), total), (1, 1));
    assert_eq!(events[0].id, second.id);

    // Many reports of one leak at once (replicas, a flapping monitor): one
    // open event.
    store.leak_report(&report(false, 60)).await.unwrap();
    let shared = db.shared();
    let mut handles = Vec::new();
    for i in 0..8 {
        let store = shared.clone();
        let r = report(true, 70 + i);
        handles.push(tokio::spawn(async move { store.leak_report(&r).await }));
    }
    let mut new = 0;
    for h in handles {
        if matches!(h.await.unwrap().unwrap(), LeakReported::New(_)) {
            new += 1;
        }
    }
    assert_eq!(new, 1, "one leak, one new event");
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM leak_events WHERE closed_at IS NULL")
            .await,
        1
    );
}
