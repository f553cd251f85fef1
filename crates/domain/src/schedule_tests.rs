//! Unit tests of schedule time math, catch-up planning, overlap and scopes.

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use proptest::prelude::*;
use uuid::Uuid;

use super::*;
use crate::ComponentType;
use crate::target::ComponentFilter;
use crate::task::{TaskInformation, TaskStatus, TaskType};

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("test timestamp")
        .with_timezone(&Utc)
}

fn timing(kind: SpecKind, spec: &str, tz: &str) -> Timing {
    ScheduleSpec::normalize(Some(kind), spec, tz)
        .expect("valid spec")
        .1
}

fn secs(n: i64) -> TimeDelta {
    TimeDelta::seconds(n)
}

// ---- parsing and normalisation ----------------------------------------------

#[test]
fn interval_specs_parse_as_go_durations_and_must_be_positive() {
    let t = timing(SpecKind::Interval, " 1h30m ", "Europe/Paris");
    assert!(matches!(t, Timing::Interval(d) if d == TimeDelta::minutes(90)));
    let (spec, _) =
        ScheduleSpec::normalize(Some(SpecKind::Interval), "2s", "Europe/Paris").expect("valid");
    assert_eq!(spec.spec, "2s");
    assert_eq!(spec.timezone, "", "the zone is cleared for non-cron kinds");
    for bad in ["0", "0s", "-5s", "5", "abc", "1x"] {
        assert!(
            matches!(
                ScheduleSpec::normalize(Some(SpecKind::Interval), bad, ""),
                Err(SpecError::Interval { .. })
            ),
            "{bad} must be refused"
        );
    }
}

#[test]
fn missing_kind_or_spec_is_refused() {
    assert_eq!(
        ScheduleSpec::normalize(None, "1s", "").unwrap_err(),
        SpecError::MissingKind
    );
    assert_eq!(
        ScheduleSpec::normalize(Some(SpecKind::Cron), "  ", "").unwrap_err(),
        SpecError::MissingSpec
    );
}

#[test]
fn cron_accepts_five_fields_and_descriptors_and_defaults_to_utc() {
    let (spec, _) =
        ScheduleSpec::normalize(Some(SpecKind::Cron), "@daily", "").expect("descriptor");
    assert_eq!(spec.timezone, "UTC");
    for ok in [
        "0 3 * * *",
        "*/15 * * * *",
        "0 22 * * 1-5",
        "@hourly",
        "@weekly",
        "@monthly",
        "@yearly",
        "@annually",
        "@midnight",
        "0 0 1 JAN *",
        "0 0 * * SUN",
    ] {
        assert!(
            ScheduleSpec::normalize(Some(SpecKind::Cron), ok, "UTC").is_ok(),
            "{ok} must parse"
        );
    }
}

#[test]
fn cron_refuses_seconds_years_garbage_and_impossible_dates() {
    for bad in [
        "0 0 3 * * *",
        "0 0 3 * * * 2030",
        "61 * * * *",
        "* * *",
        "hello",
        "0 0 30 2 *",
    ] {
        assert!(
            matches!(
                ScheduleSpec::normalize(Some(SpecKind::Cron), bad, "UTC"),
                Err(SpecError::Cron { .. })
            ),
            "{bad} must be refused"
        );
    }
}

#[test]
fn cron_refuses_unknown_zones() {
    assert_eq!(
        ScheduleSpec::normalize(Some(SpecKind::Cron), "@daily", "Mars/Olympus").unwrap_err(),
        SpecError::Timezone("Mars/Olympus".into())
    );
}

#[test]
fn one_time_is_stored_in_utc_and_must_be_rfc3339() {
    let (spec, t) =
        ScheduleSpec::normalize(Some(SpecKind::OneTime), "2026-12-24T18:00:00+01:00", "X/Y")
            .expect("valid");
    assert_eq!(spec.spec, "2026-12-24T17:00:00Z");
    assert_eq!(spec.timezone, "");
    assert!(matches!(t, Timing::OneTime(at) if at == utc("2026-12-24T17:00:00Z")));
    for bad in ["tomorrow", "2026-12-24 18:00", "2026-12-24"] {
        assert!(matches!(
            ScheduleSpec::normalize(Some(SpecKind::OneTime), bad, ""),
            Err(SpecError::OneTime { .. })
        ));
    }
}

// ---- next-run computation -------------------------------------------------------

#[test]
fn interval_first_run_is_now_plus_duration_and_steps_by_it() {
    let t = timing(SpecKind::Interval, "6h", "");
    let now = utc("2026-01-01T10:00:00Z");
    assert_eq!(t.first_run(now), Some(utc("2026-01-01T16:00:00Z")));
    assert_eq!(
        t.upcoming(now, 3),
        vec![
            utc("2026-01-01T16:00:00Z"),
            utc("2026-01-01T22:00:00Z"),
            utc("2026-01-02T04:00:00Z")
        ]
    );
}

#[test]
fn cron_first_run_is_the_next_match_strictly_after_now() {
    let t = timing(SpecKind::Cron, "0 3 * * *", "UTC");
    assert_eq!(
        t.first_run(utc("2026-01-01T02:59:59Z")),
        Some(utc("2026-01-01T03:00:00Z"))
    );
    assert_eq!(
        t.first_run(utc("2026-01-01T03:00:00Z")),
        Some(utc("2026-01-02T03:00:00Z")),
        "a match at now itself is not next"
    );
}

#[test]
fn cron_is_evaluated_in_its_zone() {
    // 03:00 in Tokyo (UTC+9, no DST) is 18:00 UTC the day before.
    let t = timing(SpecKind::Cron, "0 3 * * *", "Asia/Tokyo");
    assert_eq!(
        t.first_run(utc("2026-06-01T00:00:00Z")),
        Some(utc("2026-06-01T18:00:00Z"))
    );
    // Weekdays in the zone: Monday 22:00 in New York (EDT) is Tuesday 02:00 UTC.
    let t = timing(SpecKind::Cron, "0 22 * * MON", "America/New_York");
    assert_eq!(
        t.first_run(utc("2026-06-01T00:00:00Z")),
        Some(utc("2026-06-02T02:00:00Z"))
    );
}

#[test]
fn one_time_first_run_is_its_instant_even_when_past_and_has_no_next() {
    let t = timing(SpecKind::OneTime, "2026-01-01T00:00:00Z", "");
    let later = utc("2026-06-01T00:00:00Z");
    assert_eq!(t.first_run(later), Some(utc("2026-01-01T00:00:00Z")));
    assert_eq!(t.next_after(utc("2026-01-01T00:00:00Z")), None);
    assert_eq!(t.upcoming(later, 5), vec![utc("2026-01-01T00:00:00Z")]);
}

// ---- DST (America/New_York: spring forward 2026-03-08 02:00 EST → 03:00
// EDT; fall back 2026-11-01 02:00 EDT → 01:00 EST) -----------------------------

#[test]
fn dst_spring_forward_fixed_time_in_the_gap_fires_once_right_after_it() {
    let t = timing(SpecKind::Cron, "30 2 * * *", "America/New_York");
    // 2026-03-08 01:00 EST = 06:00Z. 02:30 does not exist that day.
    let first = t.first_run(utc("2026-03-08T06:00:00Z")).expect("next");
    assert_eq!(
        first,
        utc("2026-03-08T07:00:00Z"),
        "03:00 EDT, the first instant after the gap"
    );
    let second = t.next_after(first).expect("next");
    assert_eq!(
        second,
        utc("2026-03-09T06:30:00Z"),
        "02:30 EDT the next day"
    );
    // The day before is a normal 02:30 EST.
    assert_eq!(
        t.first_run(utc("2026-03-07T06:00:00Z")),
        Some(utc("2026-03-07T07:30:00Z"))
    );
}

#[test]
fn dst_spring_forward_wildcard_pattern_has_nothing_in_the_gap() {
    let t = timing(SpecKind::Cron, "*/30 * * * *", "America/New_York");
    assert_eq!(
        t.upcoming(utc("2026-03-08T06:10:00Z"), 3),
        vec![
            utc("2026-03-08T06:30:00Z"), // 01:30 EST
            utc("2026-03-08T07:00:00Z"), // 03:00 EDT
            utc("2026-03-08T07:30:00Z"), // 03:30 EDT
        ]
    );
}

#[test]
fn dst_fall_back_fixed_time_in_the_repeated_hour_fires_once_at_the_first() {
    let t = timing(SpecKind::Cron, "30 1 * * *", "America/New_York");
    // 2026-11-01 00:00 EDT = 04:00Z.
    let first = t.first_run(utc("2026-11-01T04:00:00Z")).expect("next");
    assert_eq!(first, utc("2026-11-01T05:30:00Z"), "01:30 EDT");
    let second = t.next_after(first).expect("next");
    assert_eq!(
        second,
        utc("2026-11-02T06:30:00Z"),
        "not again at 01:30 EST the same night; next is 01:30 EST the next day"
    );
}

#[test]
fn dst_fall_back_wildcard_pattern_fires_in_both_halves() {
    let t = timing(SpecKind::Cron, "*/30 * * * *", "America/New_York");
    assert_eq!(
        t.upcoming(utc("2026-11-01T04:50:00Z"), 5),
        vec![
            utc("2026-11-01T05:00:00Z"), // 01:00 EDT
            utc("2026-11-01T05:30:00Z"), // 01:30 EDT
            utc("2026-11-01T06:00:00Z"), // 01:00 EST
            utc("2026-11-01T06:30:00Z"), // 01:30 EST
            utc("2026-11-01T07:00:00Z"), // 02:00 EST
        ]
    );
}

#[test]
fn intervals_ignore_dst_they_are_elapsed_time() {
    let t = timing(SpecKind::Interval, "1h", "");
    assert_eq!(
        t.upcoming(utc("2026-03-08T06:00:00Z"), 2),
        vec![utc("2026-03-08T07:00:00Z"), utc("2026-03-08T08:00:00Z")]
    );
}

// ---- plan_due -------------------------------------------------------------------

#[test]
fn on_time_interval_fires_its_occurrence_and_stays_on_its_grid() {
    let t = timing(SpecKind::Interval, "10s", "");
    let due = utc("2026-01-01T00:00:10Z");
    let now = due + TimeDelta::milliseconds(37);
    let plan = plan_due(&t, due, now, TimeDelta::zero());
    assert_eq!(plan.fire_at, Some(due));
    assert_eq!((plan.coalesced, plan.skipped), (0, 0));
    assert_eq!(plan.next_run_at, Some(utc("2026-01-01T00:00:20Z")));
    assert!(!plan.disable);
    assert_eq!(plan.reason, None);
}

#[test]
fn not_yet_due_changes_nothing() {
    let t = timing(SpecKind::Interval, "10s", "");
    let due = utc("2026-01-01T00:00:10Z");
    let plan = plan_due(&t, due, due - secs(1), TimeDelta::zero());
    assert_eq!(plan.fire_at, None);
    assert_eq!(plan.next_run_at, Some(due));
    assert_eq!((plan.coalesced, plan.skipped), (0, 0));
}

#[test]
fn window_zero_fires_the_latest_missed_occurrence_once_and_skips_the_rest() {
    let t = timing(SpecKind::Interval, "10s", "");
    let due = utc("2026-01-01T00:00:10Z");
    // Down for 45 s: occurrences at :10 :20 :30 :40 and :50 is not yet due.
    let now = utc("2026-01-01T00:00:45Z");
    let plan = plan_due(&t, due, now, TimeDelta::zero());
    assert_eq!(plan.fire_at, Some(utc("2026-01-01T00:00:40Z")));
    assert_eq!(plan.skipped, 3);
    assert_eq!(plan.coalesced, 0);
    assert_eq!(plan.next_run_at, Some(utc("2026-01-01T00:00:50Z")));
    assert!(plan.reason.expect("reason").contains("not replayed"));
}

#[test]
fn window_coalesces_recent_misses_and_skips_older_ones() {
    let t = timing(SpecKind::Interval, "10s", "");
    let due = utc("2026-01-01T00:00:10Z");
    let now = utc("2026-01-01T00:00:45Z");
    // Window 20 s: [:25, :45] holds :30 and :40; :10 and :20 are older.
    let plan = plan_due(&t, due, now, secs(20));
    assert_eq!(plan.fire_at, Some(utc("2026-01-01T00:00:40Z")));
    assert_eq!(plan.coalesced, 1);
    assert_eq!(plan.skipped, 2);
    let reason = plan.reason.expect("reason");
    assert!(reason.contains("coalesced 1"), "{reason}");
    assert!(reason.contains("skipped 2"), "{reason}");
}

#[test]
fn window_covering_everything_coalesces_all() {
    let t = timing(SpecKind::Interval, "10s", "");
    let due = utc("2026-01-01T00:00:10Z");
    let now = utc("2026-01-01T00:00:45Z");
    let plan = plan_due(&t, due, now, secs(3600));
    assert_eq!(plan.fire_at, Some(utc("2026-01-01T00:00:40Z")));
    assert_eq!((plan.coalesced, plan.skipped), (3, 0));
}

#[test]
fn window_older_than_every_miss_fires_nothing_and_skips_all() {
    let t = timing(SpecKind::Cron, "0 3 * * *", "UTC");
    let due = utc("2026-01-01T03:00:00Z");
    let now = utc("2026-01-03T12:00:00Z");
    let plan = plan_due(&t, due, now, secs(3600));
    assert_eq!(plan.fire_at, None);
    assert_eq!(plan.skipped, 3);
    assert_eq!(plan.next_run_at, Some(utc("2026-01-04T03:00:00Z")));
    assert!(plan.reason.expect("reason").contains("catch-up window"));
}

#[test]
fn cron_misses_are_counted_occurrence_by_occurrence() {
    let t = timing(SpecKind::Cron, "0 * * * *", "UTC");
    let due = utc("2026-01-01T00:00:00Z");
    let now = utc("2026-01-01T05:30:00Z");
    let plan = plan_due(&t, due, now, TimeDelta::zero());
    assert_eq!(plan.fire_at, Some(utc("2026-01-01T05:00:00Z")));
    assert_eq!(plan.skipped, 5);
    assert_eq!(plan.next_run_at, Some(utc("2026-01-01T06:00:00Z")));
    let plan = plan_due(&t, due, now, TimeDelta::minutes(150));
    // Window [03:00, 05:30]: 03:00, 04:00, 05:00.
    assert_eq!((plan.coalesced, plan.skipped), (2, 3));
}

#[test]
fn one_time_fires_once_and_is_spent() {
    let t = timing(SpecKind::OneTime, "2026-01-01T00:00:05Z", "");
    let due = utc("2026-01-01T00:00:05Z");
    let plan = plan_due(&t, due, due + secs(1), TimeDelta::zero());
    assert_eq!(plan.fire_at, Some(due));
    assert!(plan.disable);
    assert_eq!(plan.next_run_at, None);
    // Missed by more than its window: spent without firing.
    let plan = plan_due(&t, due, due + secs(120), secs(60));
    assert_eq!(plan.fire_at, None);
    assert_eq!(plan.skipped, 1);
    assert!(plan.disable);
    assert_eq!(plan.next_run_at, None);
}

proptest! {
    #[test]
    fn plan_due_accounts_for_every_occurrence(
        step in 1i64..600,
        late_ms in 0i64..86_400_000,
        window in 0i64..7_200,
    ) {
        let t = Timing::Interval(TimeDelta::seconds(step));
        let due = utc("2026-01-01T00:00:00Z");
        let now = due + TimeDelta::milliseconds(late_ms);
        let plan = plan_due(&t, due, now, TimeDelta::seconds(window));
        let n = (late_ms / 1000 / step) as u64 + 1;
        let fired = u64::from(plan.fire_at.is_some());
        prop_assert_eq!(fired + plan.coalesced + plan.skipped, n);
        let next = plan.next_run_at.expect("interval keeps running");
        prop_assert!(next > now);
        prop_assert!(next <= now + TimeDelta::seconds(step));
        if let Some(fire) = plan.fire_at {
            prop_assert!(fire <= now);
            prop_assert!(fire > now - TimeDelta::seconds(step));
        }
        if window == 0 {
            prop_assert_eq!(fired, 1);
        }
    }

    #[test]
    fn cron_next_after_is_strictly_increasing(start in 0i64..2_000_000_000) {
        let t = timing(SpecKind::Cron, "*/7 3-5 * * *", "Europe/Berlin");
        let now = Utc.timestamp_opt(start, 0).single().expect("ts");
        let runs = t.upcoming(now, 4);
        prop_assert_eq!(runs.len(), 4);
        prop_assert!(runs[0] > now);
        for w in runs.windows(2) {
            prop_assert!(w[0] < w[1]);
        }
    }
}

// ---- overlap --------------------------------------------------------------------

#[test]
fn skip_holds_back_a_scope_whose_previous_task_is_unfinished() {
    for status in [
        TaskStatus::Waiting,
        TaskStatus::Pending,
        TaskStatus::Running,
    ] {
        assert!(!scope_eligible(OverlapPolicy::Skip, Some(status)));
        assert!(scope_eligible(OverlapPolicy::Queue, Some(status)));
    }
    for status in [
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Terminated,
    ] {
        assert!(scope_eligible(OverlapPolicy::Skip, Some(status)));
    }
    assert!(scope_eligible(OverlapPolicy::Skip, None));
}

#[test]
fn wire_numbers_and_names_match_the_contract() {
    assert_eq!(SpecKind::from_wire(1), Some(SpecKind::Interval));
    assert_eq!(SpecKind::from_wire(3), Some(SpecKind::OneTime));
    assert_eq!(SpecKind::from_wire(0), None);
    assert_eq!(SpecKind::OneTime.as_str(), "one-time");
    assert_eq!(OverlapPolicy::from_wire(2), Some(OverlapPolicy::Queue));
    assert_eq!(OverlapPolicy::from_wire(0), None);
}

// ---- templates ------------------------------------------------------------------

fn template(op: ScheduledOp, task_type: TaskType, code: &str) -> OperationTemplate {
    OperationTemplate {
        op,
        task_type,
        information: TaskInformation {
            code: code.into(),
            override_readiness_check: false,
            firmware: None,
        },
        queue_timeout_secs: 3600,
        rule_id: None,
    }
}

#[test]
fn template_names_and_descriptions() {
    let t = template(
        ScheduledOp::PowerOff,
        TaskType::PowerControl,
        "force_power_off",
    );
    assert_eq!(t.operation_type(), "POWER_OFF");
    assert_eq!(t.description(), "Power Off (forced)");
    let t = template(ScheduledOp::PowerOn, TaskType::PowerControl, "power_on");
    assert_eq!(
        (t.operation_type(), t.description().as_str()),
        ("POWER_ON", "Power On")
    );
    let mut t = template(
        ScheduledOp::UpgradeFirmware,
        TaskType::FirmwareControl,
        "upgrade",
    );
    t.information.firmware = Some(crate::run::FirmwarePayload {
        target_version: Some("2.3.1".into()),
        ..Default::default()
    });
    assert_eq!(t.operation_type(), "UPGRADE_FIRMWARE");
    assert_eq!(t.description(), "Upgrade Firmware to 2.3.1");
    let json = serde_json::to_value(&t).expect("json");
    let back: OperationTemplate = serde_json::from_value(json).expect("back");
    assert_eq!(back, t);
}

#[test]
fn task_description_is_name_dash_rfc3339_utc() {
    assert_eq!(
        task_description("nightly", utc("2026-01-01T03:00:00.123456Z")),
        "nightly — 2026-01-01T03:00:00Z"
    );
}

// ---- scopes ---------------------------------------------------------------------

fn types(t: &[ComponentType]) -> Option<ComponentFilter> {
    Some(ComponentFilter::Types { types: t.to_vec() })
}

fn comps(c: &[Uuid]) -> Option<ComponentFilter> {
    Some(ComponentFilter::Components {
        components: c.to_vec(),
    })
}

#[test]
fn merge_rules_whole_rack_absorbs_same_kind_unites_mismatch_fails() {
    let r = Uuid::from_u128(1);
    let (a, b) = (Uuid::from_u128(10), Uuid::from_u128(11));
    assert_eq!(
        merge_filter(r, &None, &types(&[ComponentType::Compute])),
        Ok(None)
    );
    assert_eq!(merge_filter(r, &comps(&[a]), &None), Ok(None));
    assert_eq!(
        merge_filter(
            r,
            &types(&[ComponentType::NvSwitch]),
            &types(&[ComponentType::Compute, ComponentType::NvSwitch])
        ),
        Ok(types(&[ComponentType::Compute, ComponentType::NvSwitch]))
    );
    assert_eq!(
        merge_filter(r, &comps(&[b]), &comps(&[a, b])),
        Ok(comps(&[a, b]))
    );
    assert_eq!(
        merge_filter(r, &comps(&[a]), &types(&[ComponentType::Compute])),
        Err(ScopeError::KindMismatch(r))
    );
}

#[test]
fn scopes_from_entries_group_components_and_refuse_duplicates() {
    let (r1, r2) = (Uuid::from_u128(1), Uuid::from_u128(2));
    let (a, b) = (Uuid::from_u128(10), Uuid::from_u128(11));
    let scopes = scopes_from_entries(vec![
        ScopeSpec {
            rack_id: r1,
            filter: comps(&[b]),
        },
        ScopeSpec {
            rack_id: r2,
            filter: None,
        },
        ScopeSpec {
            rack_id: r1,
            filter: comps(&[a]),
        },
    ])
    .expect("valid");
    assert_eq!(
        scopes,
        vec![
            ScopeSpec {
                rack_id: r1,
                filter: comps(&[a, b])
            },
            ScopeSpec {
                rack_id: r2,
                filter: None
            },
        ]
    );
    assert_eq!(
        scopes_from_entries(vec![
            ScopeSpec {
                rack_id: r1,
                filter: None
            },
            ScopeSpec {
                rack_id: r1,
                filter: types(&[ComponentType::Compute])
            },
        ]),
        Err(ScopeError::DuplicateRack(r1))
    );
    assert_eq!(
        scopes_from_entries(vec![
            ScopeSpec {
                rack_id: r1,
                filter: comps(&[a])
            },
            ScopeSpec {
                rack_id: r1,
                filter: comps(&[a])
            },
        ]),
        Err(ScopeError::DuplicateComponent(a))
    );
}

fn stored(id: u128, rack: Uuid, filter: Option<ComponentFilter>) -> ScheduleScope {
    ScheduleScope {
        id: Uuid::from_u128(id),
        schedule_id: Uuid::from_u128(99),
        rack_id: rack,
        filter,
        last_task_id: None,
        created_at: utc("2026-01-01T00:00:00Z"),
    }
}

#[test]
fn reconcile_adds_removes_and_updates_and_never_empties() {
    let (r1, r2, r3) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
    let existing = vec![
        stored(100, r1, None),
        stored(101, r2, types(&[ComponentType::Compute])),
    ];
    let plan = reconcile(
        &existing,
        &[
            ScopeSpec {
                rack_id: r2,
                filter: types(&[ComponentType::PowerShelf]),
            },
            ScopeSpec {
                rack_id: r3,
                filter: None,
            },
        ],
    )
    .expect("valid");
    assert_eq!(
        plan.add,
        vec![ScopeSpec {
            rack_id: r3,
            filter: None
        }]
    );
    assert_eq!(plan.remove, vec![Uuid::from_u128(100)]);
    assert_eq!(
        plan.update,
        vec![(Uuid::from_u128(101), types(&[ComponentType::PowerShelf]))]
    );
    // Same set in another order is no change.
    let plan = reconcile(
        &[stored(
            5,
            r1,
            types(&[ComponentType::Compute, ComponentType::NvSwitch]),
        )],
        &[ScopeSpec {
            rack_id: r1,
            filter: types(&[ComponentType::NvSwitch, ComponentType::Compute]),
        }],
    )
    .expect("valid");
    assert_eq!(plan, Reconcile::default());
    assert_eq!(reconcile(&existing, &[]), Err(ScopeError::NoScopes));
}

#[test]
fn scope_targets_name_the_rack_or_its_components() {
    let r = Uuid::from_u128(1);
    let a = Uuid::from_u128(10);
    match scope_target(&stored(1, r, None)) {
        TargetSpec::Racks(t) => {
            assert_eq!(t[0].identifier, RackIdentifier::Id(r));
            assert!(t[0].component_types.is_empty());
        }
        other => panic!("unexpected {other:?}"),
    }
    match scope_target(&stored(1, r, types(&[ComponentType::Compute]))) {
        TargetSpec::Racks(t) => assert_eq!(t[0].component_types, vec![ComponentType::Compute]),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        scope_target(&stored(1, r, comps(&[a]))),
        TargetSpec::Components(vec![ComponentTarget::Id(a)])
    );
}

#[test]
fn note_skip_counts_and_keeps_the_last_reason() {
    let mut s = TaskSchedule {
        id: Uuid::nil(),
        name: "n".into(),
        spec: ScheduleSpec {
            kind: SpecKind::Interval,
            spec: "1s".into(),
            timezone: String::new(),
        },
        overlap_policy: OverlapPolicy::Skip,
        enabled: true,
        next_run_at: None,
        last_run_at: None,
        template: template(ScheduledOp::PowerOn, TaskType::PowerControl, "power_on"),
        catchup_window_secs: 0,
        skipped_count: 0,
        last_skip_reason: String::new(),
        created_at: utc("2026-01-01T00:00:00Z"),
        updated_at: utc("2026-01-01T00:00:00Z"),
    };
    s.note_skip(0, "ignored".into());
    assert_eq!((s.skipped_count, s.last_skip_reason.as_str()), (0, ""));
    s.note_skip(2, "a".into());
    s.note_skip(1, "b".into());
    assert_eq!((s.skipped_count, s.last_skip_reason.as_str()), (3, "b"));
    assert!(!s.is_spent_one_time());
}
