//! Task schedules (spec flow-core §6): when to submit tasks on a persistent
//! rack scope.
//!
//! This module owns the pure half of schedules: the three kinds and their
//! time math ([`Timing`]), what a due schedule does when it is claimed
//! ([`plan_due`]: which occurrence fires, which are coalesced or skipped
//! under the catch-up window, the next run), the overlap filter, scope
//! merging and reconciliation, and the operation template a schedule
//! submits. The engine loads rows, calls these under the schedule's row
//! lock, and writes the result.
//!
//! DST policy for cron schedules (the zone is IANA, default UTC), that of the
//! `croner` crate (Open Cron Pattern Specification):
//! * a wall-clock time that does not exist (spring forward, e.g. 02:30 in
//!   America/New_York on the second Sunday of March) fires **once, at the
//!   first instant after the gap** (03:00 local) for a fixed-time pattern
//!   (`30 2 * * *`); an interval / wildcard pattern (`*/15 * * * *`) simply
//!   has no occurrences inside the gap;
//! * a wall-clock time that occurs twice (fall back, e.g. 01:30 in
//!   America/New_York on the first Sunday of November) fires **once, at the
//!   first (daylight-time) instant** for a fixed-time pattern; an interval /
//!   wildcard pattern fires on both instants, as elapsed time passes twice.

use std::collections::BTreeSet;
use std::str::FromStr;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ComponentType;
use crate::target::{ComponentFilter, ComponentTarget, RackIdentifier, RackTarget, TargetSpec};
use crate::task::{TaskInformation, TaskStatus, TaskType};

named_enum!(
    /// Kind of schedule. Numbers are the wire `ScheduleSpecType` values,
    /// names the `task_schedule.spec_type` column.
    SpecKind {
        Interval = 1 => "interval",
        Cron = 2 => "cron",
        OneTime = 3 => "one-time",
    }
);

named_enum!(
    /// What a due schedule does on a scope whose previous task is still
    /// waiting, pending or running. Numbers are the wire `OverlapPolicy`
    /// values (0 = unspecified = skip).
    OverlapPolicy {
        Skip = 1 => "skip",
        Queue = 2 => "queue",
    }
);

/// Time zone used when a cron schedule names none.
pub const DEFAULT_TIMEZONE: &str = "UTC";

/// Most occurrences counted one by one when a cron schedule is late; beyond
/// this the count saturates (a minutely schedule down for ~a week).
pub const MAX_COUNTED_OCCURRENCES: u64 = 10_000;

/// A schedule's timing as stored: kind, spec text, zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleSpec {
    pub kind: SpecKind,
    pub spec: String,
    /// IANA zone; meaningful for cron only (empty for the other kinds).
    pub timezone: String,
}

/// Why a schedule spec was refused (InvalidArgument on the wire).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("schedule spec type is required")]
    MissingKind,
    #[error("schedule spec is required")]
    MissingSpec,
    #[error("invalid interval {spec:?}: {reason}")]
    Interval { spec: String, reason: String },
    #[error("invalid cron expression {spec:?}: {reason}")]
    Cron { spec: String, reason: String },
    #[error("invalid timezone {0:?}")]
    Timezone(String),
    #[error("invalid one-time spec {spec:?}: expected an RFC 3339 timestamp")]
    OneTime { spec: String },
}

/// A parsed spec, ready for time math.
#[derive(Debug, Clone)]
pub enum Timing {
    Interval(TimeDelta),
    Cron { cron: Box<Cron>, tz: Tz },
    OneTime(DateTime<Utc>),
}

fn cron_parser() -> CronParser {
    // Standard 5 fields (robfig ParseStandard): no seconds, no year;
    // day-of-month and day-of-week OR'ed as Vixie cron does.
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
}

impl ScheduleSpec {
    /// Validates and normalises a spec: trims it, defaults a cron zone to
    /// UTC and clears the zone of the other kinds, stores a one-time
    /// instant as RFC 3339 UTC. Returns the stored form and its timing.
    pub fn normalize(
        kind: Option<SpecKind>,
        spec: &str,
        timezone: &str,
    ) -> Result<(ScheduleSpec, Timing), SpecError> {
        let kind = kind.ok_or(SpecError::MissingKind)?;
        let text = spec.trim();
        if text.is_empty() {
            return Err(SpecError::MissingSpec);
        }
        let (stored, timezone) = match kind {
            SpecKind::Interval => (text.to_string(), String::new()),
            SpecKind::Cron => {
                let tz = timezone.trim();
                let tz = if tz.is_empty() { DEFAULT_TIMEZONE } else { tz };
                (text.to_string(), tz.to_string())
            }
            SpecKind::OneTime => {
                let at = DateTime::parse_from_rfc3339(text).map_err(|_| SpecError::OneTime {
                    spec: text.to_string(),
                })?;
                (
                    at.with_timezone(&Utc)
                        .to_rfc3339_opts(SecondsFormat::AutoSi, true),
                    String::new(),
                )
            }
        };
        let spec = ScheduleSpec {
            kind,
            spec: stored,
            timezone,
        };
        let timing = spec.timing()?;
        Ok((spec, timing))
    }

    /// Parses a stored spec.
    pub fn timing(&self) -> Result<Timing, SpecError> {
        match self.kind {
            SpecKind::Interval => {
                let d = crate::duration::parse_go_duration(&self.spec).map_err(|reason| {
                    SpecError::Interval {
                        spec: self.spec.clone(),
                        reason,
                    }
                })?;
                let d = TimeDelta::from_std(d).map_err(|e| SpecError::Interval {
                    spec: self.spec.clone(),
                    reason: e.to_string(),
                })?;
                if d <= TimeDelta::zero() {
                    return Err(SpecError::Interval {
                        spec: self.spec.clone(),
                        reason: "must be positive".into(),
                    });
                }
                Ok(Timing::Interval(d))
            }
            SpecKind::Cron => {
                let zone = if self.timezone.is_empty() {
                    DEFAULT_TIMEZONE
                } else {
                    self.timezone.as_str()
                };
                let tz = Tz::from_str(zone).map_err(|_| SpecError::Timezone(zone.to_string()))?;
                // robfig's `@midnight` is `@daily`; croner does not know it.
                let pattern = if self.spec.trim().eq_ignore_ascii_case("@midnight") {
                    "@daily"
                } else {
                    self.spec.as_str()
                };
                let cron = cron_parser().parse(pattern).map_err(|e| SpecError::Cron {
                    spec: self.spec.clone(),
                    reason: e.to_string(),
                })?;
                let timing = Timing::Cron {
                    cron: Box::new(cron),
                    tz,
                };
                // A pattern that never matches (e.g. 30 February) is refused
                // now rather than leaving a schedule that never runs.
                if timing.next_after(DateTime::<Utc>::UNIX_EPOCH).is_none() {
                    return Err(SpecError::Cron {
                        spec: self.spec.clone(),
                        reason: "pattern never matches".into(),
                    });
                }
                Ok(timing)
            }
            SpecKind::OneTime => DateTime::parse_from_rfc3339(&self.spec)
                .map(|t| Timing::OneTime(t.with_timezone(&Utc)))
                .map_err(|_| SpecError::OneTime {
                    spec: self.spec.clone(),
                }),
        }
    }
}

impl Timing {
    /// `next_run_at` of a new or resumed schedule (spec §6.1): interval
    /// now + duration, cron the next match after now, one-time its instant
    /// (a past one fires on the next claim).
    pub fn first_run(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Timing::Interval(d) => now.checked_add_signed(*d),
            Timing::Cron { .. } => self.next_after(now),
            Timing::OneTime(at) => Some(*at),
        }
    }

    /// The occurrence strictly after `t` (none for one-time).
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Timing::Interval(d) => t.checked_add_signed(*d),
            Timing::Cron { cron, tz } => cron
                .find_next_occurrence(&t.with_timezone(tz), false)
                .ok()
                .map(|n| n.with_timezone(&Utc)),
            Timing::OneTime(_) => None,
        }
    }

    /// The next `n` fire times a schedule created or resumed at `now` has.
    pub fn upcoming(&self, now: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        let mut out = Vec::with_capacity(n);
        let mut next = self.first_run(now);
        while let Some(t) = next {
            if out.len() >= n {
                break;
            }
            out.push(t);
            next = self.next_after(t);
        }
        out
    }

    /// The occurrences from `due` (itself one) up to `now` inclusive:
    /// how many, and the latest. `due > now` gives `(0, due)`.
    fn due_occurrences(&self, due: DateTime<Utc>, now: DateTime<Utc>) -> (u64, DateTime<Utc>) {
        if due > now {
            return (0, due);
        }
        match self {
            Timing::Interval(d) => {
                let late = now - due;
                let (late_us, step_us) = (
                    late.num_microseconds().unwrap_or(i64::MAX),
                    d.num_microseconds().unwrap_or(i64::MAX).max(1),
                );
                let k = late_us / step_us;
                let latest = due
                    .checked_add_signed(TimeDelta::microseconds(k.saturating_mul(step_us)))
                    .unwrap_or(now);
                (u64::try_from(k).unwrap_or(0) + 1, latest)
            }
            Timing::Cron { .. } => {
                let (mut count, mut latest) = (1u64, due);
                while let Some(next) = self.next_after(latest) {
                    if next > now {
                        break;
                    }
                    count += 1;
                    latest = next;
                    if count >= MAX_COUNTED_OCCURRENCES {
                        // Jump to the last occurrence before now without
                        // counting the rest one by one.
                        if let Timing::Cron { cron, tz } = self
                            && let Ok(prev) =
                                cron.find_previous_occurrence(&now.with_timezone(tz), true)
                        {
                            latest = prev.with_timezone(&Utc).max(latest);
                        }
                        break;
                    }
                }
                (count, latest)
            }
            Timing::OneTime(at) => (1, *at),
        }
    }
}

/// What a claimed, due schedule does (spec §6.3 with the catch-up window).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirePlan {
    /// The occurrence that fires now (its scheduled time), if any.
    pub fire_at: Option<DateTime<Utc>>,
    /// Missed occurrences folded into this fire (within the window).
    pub coalesced: u64,
    /// Missed occurrences that will never fire.
    pub skipped: u64,
    /// The schedule's next run; `None` once a one-time schedule is spent.
    pub next_run_at: Option<DateTime<Utc>>,
    /// A one-time schedule is spent: disable it.
    pub disable: bool,
    /// Why occurrences were coalesced or skipped, for the schedule row and
    /// the logs.
    pub reason: Option<String>,
}

/// Decides what a schedule whose `next_run_at` (`due`) has passed does at
/// `now`, under its catch-up window.
///
/// Let the due occurrences be `due = o₁ < … < oₙ ≤ now` (the ones that
/// passed while nothing claimed the schedule, e.g. the server was down):
///
/// * window 0 (the default, the reference's behaviour): the latest, `oₙ`,
///   fires once; the `n − 1` earlier ones are skipped — never replayed;
/// * window `w > 0`: the occurrences in `[now − w, now]` fire once,
///   coalesced into the latest (`oₙ`); the older ones are skipped; when none
///   is that recent, nothing fires and all `n` are skipped.
///
/// Next run: interval `oₙ + duration` (on the schedule's grid, so a slow
/// claim does not drift it; always after now), cron the next match after
/// now, one-time none (the schedule is disabled either way).
pub fn plan_due(
    timing: &Timing,
    due: DateTime<Utc>,
    now: DateTime<Utc>,
    catchup_window: TimeDelta,
) -> FirePlan {
    let (n, latest) = timing.due_occurrences(due, now);
    let next_run_at = match timing {
        Timing::Interval(d) if n > 0 => latest.checked_add_signed(*d),
        Timing::Interval(_) => Some(due),
        Timing::Cron { .. } if n > 0 => timing.next_after(now),
        Timing::Cron { .. } => Some(due),
        Timing::OneTime(_) if n > 0 => None,
        Timing::OneTime(_) => Some(due),
    };
    let disable = matches!(timing, Timing::OneTime(_)) && n > 0;
    if n == 0 {
        return FirePlan {
            fire_at: None,
            coalesced: 0,
            skipped: 0,
            next_run_at,
            disable: false,
            reason: None,
        };
    }
    if catchup_window <= TimeDelta::zero() {
        let skipped = n - 1;
        return FirePlan {
            fire_at: Some(latest),
            coalesced: 0,
            skipped,
            next_run_at,
            disable,
            reason: (skipped > 0).then(|| {
                format!(
                    "missed {skipped} occurrence(s) before {}: not replayed (catch-up window 0)",
                    rfc3339(latest)
                )
            }),
        };
    }
    let horizon = now.checked_sub_signed(catchup_window).unwrap_or(now);
    if latest < horizon {
        return FirePlan {
            fire_at: None,
            coalesced: 0,
            skipped: n,
            next_run_at,
            disable,
            reason: Some(format!(
                "missed {n} occurrence(s), the latest at {}, by more than the catch-up window of {}s",
                rfc3339(latest),
                catchup_window.num_seconds()
            )),
        };
    }
    // Occurrences inside the window: count from the newest backwards is not
    // possible for cron without a reverse search, so count the old ones.
    let in_window = if due >= horizon {
        n
    } else {
        let (old, _) = timing.due_occurrences(due, horizon - TimeDelta::microseconds(1));
        n - old.min(n)
    };
    let coalesced = in_window.saturating_sub(1);
    let skipped = n - in_window;
    let mut reasons = Vec::new();
    if coalesced > 0 {
        reasons.push(format!(
            "coalesced {coalesced} missed occurrence(s) within the catch-up window into the one at {}",
            rfc3339(latest)
        ));
    }
    if skipped > 0 {
        reasons.push(format!(
            "skipped {skipped} occurrence(s) older than the catch-up window of {}s",
            catchup_window.num_seconds()
        ));
    }
    FirePlan {
        fire_at: Some(latest),
        coalesced,
        skipped,
        next_run_at,
        disable,
        reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
    }
}

/// RFC 3339 UTC with whole seconds (task descriptions, reasons).
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The description of a task a schedule submits (spec §6.3).
pub fn task_description(schedule_name: &str, fire_at: DateTime<Utc>) -> String {
    format!("{schedule_name} — {}", rfc3339(fire_at))
}

/// The idempotency key of the task a scheduled occurrence submits on a
/// rack: a second claim of the same occurrence (which the row lock already
/// prevents) would get the same task back instead of a second one.
pub fn occurrence_key(schedule_id: Uuid, fire_at: DateTime<Utc>, rack_id: Uuid) -> String {
    format!(
        "schedule:{schedule_id}:{}:{rack_id}",
        fire_at.timestamp_micros()
    )
}

// ---- overlap ----------------------------------------------------------------

/// Whether a scope may fire now, given the status of its previous task
/// (`None` when it has none, or it was deleted): under `skip` a previous
/// task still waiting, pending or running holds it back.
pub fn scope_eligible(policy: OverlapPolicy, last_task: Option<TaskStatus>) -> bool {
    match policy {
        OverlapPolicy::Queue => true,
        OverlapPolicy::Skip => last_task.is_none_or(TaskStatus::is_finished),
    }
}

// ---- operation template -------------------------------------------------------

/// The scheduled operation, as the wire's `ScheduledOperation` oneof names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduledOp {
    PowerOn,
    PowerOff,
    PowerReset,
    BringUp,
    UpgradeFirmware,
    Ingest,
}

/// What every occurrence submits (the `operation_template` column): the
/// task type and information, queue timeout and explicit rule of the
/// embedded request. The conflict strategy comes from the overlap policy
/// when the schedule fires (queue → QUEUE, skip → REJECT).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationTemplate {
    pub op: ScheduledOp,
    pub task_type: TaskType,
    pub information: TaskInformation,
    pub queue_timeout_secs: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<Uuid>,
}

impl OperationTemplate {
    /// The wire `TaskSchedule.operation_type` string.
    pub fn operation_type(&self) -> &'static str {
        match self.op {
            ScheduledOp::PowerOn => "POWER_ON",
            ScheduledOp::PowerOff => "POWER_OFF",
            ScheduledOp::PowerReset => "POWER_RESET",
            ScheduledOp::BringUp => "BRING_UP",
            ScheduledOp::Ingest => "INGEST",
            ScheduledOp::UpgradeFirmware => match self.information.code.as_str() {
                "downgrade" => "DOWNGRADE_FIRMWARE",
                "rollback" => "ROLLBACK_FIRMWARE",
                _ => "UPGRADE_FIRMWARE",
            },
        }
    }

    /// The human description (`TaskSchedule.description`), e.g. "Power Off
    /// (forced)", "Upgrade Firmware to 2.3.1".
    pub fn description(&self) -> String {
        let forced = self.information.code.starts_with("force_");
        let base = match self.op {
            ScheduledOp::PowerOn => "Power On".to_string(),
            ScheduledOp::PowerOff => "Power Off".to_string(),
            ScheduledOp::PowerReset => "Power Reset".to_string(),
            ScheduledOp::BringUp => "Bring Up".to_string(),
            ScheduledOp::Ingest => "Ingest".to_string(),
            ScheduledOp::UpgradeFirmware => {
                let version = self
                    .information
                    .firmware
                    .as_ref()
                    .and_then(|f| f.target_version.clone());
                match version {
                    Some(v) => format!("Upgrade Firmware to {v}"),
                    None => "Upgrade Firmware".to_string(),
                }
            }
        };
        if forced {
            format!("{base} (forced)")
        } else {
            base
        }
    }
}

// ---- the schedule -------------------------------------------------------------

/// A task schedule as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSchedule {
    pub id: Uuid,
    /// Unique.
    pub name: String,
    pub spec: ScheduleSpec,
    pub overlap_policy: OverlapPolicy,
    pub enabled: bool,
    pub next_run_at: Option<DateTime<Utc>>,
    pub last_run_at: Option<DateTime<Utc>>,
    pub template: OperationTemplate,
    /// rackflow addition: how late a missed occurrence may still fire
    /// (0 = the reference's fire-once-late behaviour), seconds.
    pub catchup_window_secs: i64,
    /// rackflow addition: occurrences (or scopes of an occurrence) that did
    /// not fire — missed beyond the window, coalesced, or held back by the
    /// overlap policy.
    pub skipped_count: i64,
    pub last_skip_reason: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl TaskSchedule {
    /// A one-time schedule that has fired: it can be neither resumed, paused
    /// nor triggered, and its spec is frozen.
    pub fn is_spent_one_time(&self) -> bool {
        self.spec.kind == SpecKind::OneTime && !self.enabled && self.next_run_at.is_none()
    }

    pub fn catchup_window(&self) -> TimeDelta {
        TimeDelta::seconds(self.catchup_window_secs.max(0))
    }

    /// Records that occurrences were skipped or coalesced.
    pub fn note_skip(&mut self, count: u64, reason: String) {
        if count == 0 {
            return;
        }
        self.skipped_count = self
            .skipped_count
            .saturating_add(i64::try_from(count).unwrap_or(i64::MAX));
        self.last_skip_reason = reason;
    }
}

// ---- scopes -----------------------------------------------------------------

/// One rack a schedule covers, and which of its components (`None`: the
/// whole rack).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleScope {
    pub id: Uuid,
    pub schedule_id: Uuid,
    pub rack_id: Uuid,
    pub filter: Option<ComponentFilter>,
    pub last_task_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
}

/// A desired scope before it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeSpec {
    pub rack_id: Uuid,
    pub filter: Option<ComponentFilter>,
}

/// Why a scope change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    #[error("rack {0} appears more than once in the target spec")]
    DuplicateRack(Uuid),
    #[error("component {0} appears more than once in the target spec")]
    DuplicateComponent(Uuid),
    #[error("rack {0}: cannot merge a component-type filter with a component-list filter")]
    KindMismatch(Uuid),
    #[error("a schedule must keep at least one scope")]
    NoScopes,
}

/// Sorted, deduplicated form of a filter, so equal sets compare equal.
pub fn normalize_filter(filter: Option<ComponentFilter>) -> Option<ComponentFilter> {
    filter.map(|f| match f {
        ComponentFilter::Types { types } => {
            let set: BTreeSet<ComponentType> = types.into_iter().collect();
            ComponentFilter::Types {
                types: set.into_iter().collect(),
            }
        }
        ComponentFilter::Components { components } => {
            let set: BTreeSet<Uuid> = components.into_iter().collect();
            ComponentFilter::Components {
                components: set.into_iter().collect(),
            }
        }
    })
}

/// Merges an added filter into a rack's existing one (spec §6.5): the
/// whole rack absorbs anything, same kinds unite, kinds mismatch → error.
pub fn merge_filter(
    rack_id: Uuid,
    existing: &Option<ComponentFilter>,
    added: &Option<ComponentFilter>,
) -> Result<Option<ComponentFilter>, ScopeError> {
    match (existing, added) {
        (None, _) | (_, None) => Ok(None),
        (Some(ComponentFilter::Types { types: a }), Some(ComponentFilter::Types { types: b })) => {
            Ok(normalize_filter(Some(ComponentFilter::Types {
                types: a.iter().chain(b).copied().collect(),
            })))
        }
        (
            Some(ComponentFilter::Components { components: a }),
            Some(ComponentFilter::Components { components: b }),
        ) => Ok(normalize_filter(Some(ComponentFilter::Components {
            components: a.iter().chain(b).copied().collect(),
        }))),
        _ => Err(ScopeError::KindMismatch(rack_id)),
    }
}

/// Scopes of a target spec, one per rack, in the order racks first appear.
/// `entries` are (rack, filter) pairs as resolved: a rack named twice by
/// rack targets, or a component named twice, is an error (spec §6.2);
/// components of one rack are gathered into one component filter.
pub fn scopes_from_entries(entries: Vec<ScopeSpec>) -> Result<Vec<ScopeSpec>, ScopeError> {
    let mut out: Vec<ScopeSpec> = Vec::new();
    let mut seen_components = BTreeSet::new();
    for entry in entries {
        if let Some(ComponentFilter::Components { components }) = &entry.filter {
            for c in components {
                if !seen_components.insert(*c) {
                    return Err(ScopeError::DuplicateComponent(*c));
                }
            }
        }
        match out.iter_mut().find(|s| s.rack_id == entry.rack_id) {
            None => out.push(ScopeSpec {
                rack_id: entry.rack_id,
                filter: normalize_filter(entry.filter),
            }),
            Some(existing) => match (&existing.filter, &entry.filter) {
                (
                    Some(ComponentFilter::Components { .. }),
                    Some(ComponentFilter::Components { .. }),
                ) => {
                    existing.filter = merge_filter(entry.rack_id, &existing.filter, &entry.filter)?;
                }
                _ => return Err(ScopeError::DuplicateRack(entry.rack_id)),
            },
        }
    }
    Ok(out)
}

/// What [`reconcile`] decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reconcile {
    pub add: Vec<ScopeSpec>,
    /// Scope ids to delete.
    pub remove: Vec<Uuid>,
    /// Scope ids whose filter changes.
    pub update: Vec<(Uuid, Option<ComponentFilter>)>,
}

/// Reconciles a schedule's scopes to `desired` (spec §6.5 Update): racks
/// not in `desired` go, new racks come, changed filters change. The result
/// may not be empty.
pub fn reconcile(
    existing: &[ScheduleScope],
    desired: &[ScopeSpec],
) -> Result<Reconcile, ScopeError> {
    if desired.is_empty() {
        return Err(ScopeError::NoScopes);
    }
    let mut plan = Reconcile::default();
    for want in desired {
        match existing.iter().find(|s| s.rack_id == want.rack_id) {
            None => plan.add.push(want.clone()),
            Some(have) => {
                let want_filter = normalize_filter(want.filter.clone());
                if normalize_filter(have.filter.clone()) != want_filter {
                    plan.update.push((have.id, want_filter));
                }
            }
        }
    }
    for have in existing {
        if !desired.iter().any(|d| d.rack_id == have.rack_id) {
            plan.remove.push(have.id);
        }
    }
    Ok(plan)
}

/// The target spec a scope submits (required rack = the scope's rack).
pub fn scope_target(scope: &ScheduleScope) -> TargetSpec {
    match &scope.filter {
        None => TargetSpec::Racks(vec![RackTarget {
            identifier: RackIdentifier::Id(scope.rack_id),
            component_types: Vec::new(),
        }]),
        Some(ComponentFilter::Types { types }) => TargetSpec::Racks(vec![RackTarget {
            identifier: RackIdentifier::Id(scope.rack_id),
            component_types: types.clone(),
        }]),
        Some(ComponentFilter::Components { components }) => {
            TargetSpec::Components(components.iter().map(|c| ComponentTarget::Id(*c)).collect())
        }
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
