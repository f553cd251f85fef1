//! Rack conflicts and the waiting queue (spec flow-core §3.3 step 6, §3.4,
//! §3.5).
//!
//! This module owns the conflict table — held as data in [`CONFLICT_TABLE`]
//! and nowhere else, so submission, the promoter and schedule conflict
//! checks cannot disagree — and the two queue decisions made under the
//! rack's lock: what happens to a new submission ([`decide_submission`]) and
//! which waiting tasks expire or start ([`plan_promotions`]). The caller
//! loads the rack's tasks, calls these, and writes the result.

use std::collections::HashSet;

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

use crate::run::QueueStrategy;
use crate::task::{DEFAULT_QUEUE_TIMEOUT_SECS, MAX_WAITING_PER_RACK, TaskStatus, TaskType, Window};
use crate::{ComponentType, ComponentsByType};

/// What a conflict check needs to know about a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskShape<'a> {
    pub task_type: TaskType,
    pub components: &'a ComponentsByType,
}

/// Which tasks a side of a table row is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKind {
    /// Any task type.
    Any,
    Is(TaskType),
}

/// What that side's task must include.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Nothing in particular.
    Anything,
    /// At least one component of this type.
    Type(ComponentType),
}

/// When a matching pair conflicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// Whatever components the two tasks hold (rack-wide effect).
    Always,
    /// Only if they share at least one component.
    Overlap,
}

/// One row of the conflict table; rows apply in both directions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConflictRow {
    pub kind_a: TaskKind,
    pub needs_a: Needs,
    pub kind_b: TaskKind,
    pub needs_b: Needs,
    pub condition: Condition,
}

const fn row(
    kind_a: TaskKind,
    needs_a: Needs,
    kind_b: TaskKind,
    needs_b: Needs,
    condition: Condition,
) -> ConflictRow {
    ConflictRow {
        kind_a,
        needs_a,
        kind_b,
        needs_b,
        condition,
    }
}

const POWER: TaskKind = TaskKind::Is(TaskType::PowerControl);
const FIRMWARE: TaskKind = TaskKind::Is(TaskType::FirmwareControl);
const BRING_UP: TaskKind = TaskKind::Is(TaskType::BringUp);
const DECOMMISSION: TaskKind = TaskKind::Is(TaskType::Decommission);
const ANY_TASK: TaskKind = TaskKind::Any;
const COMPUTE: Needs = Needs::Type(ComponentType::Compute);
const NVSWITCH: Needs = Needs::Type(ComponentType::NvSwitch);
const POWERSHELF: Needs = Needs::Type(ComponentType::PowerShelf);
const ANY: Needs = Needs::Anything;
const ALWAYS: Condition = Condition::Always;
const OVERLAP: Condition = Condition::Overlap;

/// The conflict table of spec §3.4. Pairs not covered by a row do not
/// conflict. Tasks are compared only within one rack.
#[rustfmt::skip]
pub const CONFLICT_TABLE: &[ConflictRow] = &[
    // Cutting a shelf's power affects every component of the rack.
    row(POWER,        POWERSHELF, POWER,    ANY,      ALWAYS),
    // Flashing anything while shelf power is in flux is unsafe.
    row(POWER,        POWERSHELF, FIRMWARE, ANY,      ALWAYS),
    // Tray and switch power only affects the components targeted.
    row(POWER,        COMPUTE,    POWER,    COMPUTE,  OVERLAP),
    row(POWER,        NVSWITCH,   POWER,    NVSWITCH, OVERLAP),
    row(POWER,        COMPUTE,    FIRMWARE, COMPUTE,  OVERLAP),
    row(POWER,        NVSWITCH,   FIRMWARE, NVSWITCH, OVERLAP),
    // Flashing the same hardware twice at once is unsafe, whatever its type.
    row(FIRMWARE,     ANY,        FIRMWARE, ANY,      OVERLAP),
    // Bring-up (and ingest, which runs as bring_up) and decommission touch
    // the whole rack: exclusive with everything, themselves included.
    row(BRING_UP,     ANY,        ANY_TASK, ANY,      ALWAYS),
    row(DECOMMISSION, ANY,        ANY_TASK, ANY,      ALWAYS),
];

impl TaskKind {
    fn matches(self, task_type: TaskType) -> bool {
        match self {
            TaskKind::Any => true,
            TaskKind::Is(t) => t == task_type,
        }
    }
}

impl Needs {
    fn satisfied_by(self, components: &ComponentsByType) -> bool {
        match self {
            Needs::Anything => true,
            Needs::Type(ty) => components.get(ty).is_some_and(|ids| !ids.is_empty()),
        }
    }
}

impl ConflictRow {
    /// This row, read with `a` on its A side and `b` on its B side.
    fn applies(&self, a: &TaskShape, b: &TaskShape) -> bool {
        self.kind_a.matches(a.task_type)
            && self.kind_b.matches(b.task_type)
            && self.needs_a.satisfied_by(a.components)
            && self.needs_b.satisfied_by(b.components)
            && match self.condition {
                Condition::Always => true,
                Condition::Overlap => share_a_component(a.components, b.components),
            }
    }
}

/// Whether the two tasks share at least one component id.
fn share_a_component(a: &ComponentsByType, b: &ComponentsByType) -> bool {
    let mine: HashSet<&Uuid> = a.iter().flat_map(|(_, ids)| ids).collect();
    b.iter()
        .flat_map(|(_, ids)| ids)
        .any(|id| mine.contains(id))
}

/// Whether two tasks of one rack may not run at the same time.
pub fn conflicts(a: &TaskShape, b: &TaskShape) -> bool {
    CONFLICT_TABLE
        .iter()
        .any(|row| row.applies(a, b) || row.applies(b, a))
}

/// Index of the first task in `active` that `candidate` conflicts with.
pub fn first_conflict<'a>(
    candidate: &TaskShape,
    active: impl IntoIterator<Item = TaskShape<'a>>,
) -> Option<usize> {
    active
        .into_iter()
        .position(|other| conflicts(candidate, &other))
}

/// Whether tasks of these two types can ever conflict, whatever their
/// components: the coarse check for schedules, whose components are only
/// known when they fire (spec §6.6). Never misses a conflict the precise
/// check would find.
pub fn types_may_conflict(a: TaskType, b: TaskType) -> bool {
    CONFLICT_TABLE.iter().any(|row| {
        (row.kind_a.matches(a) && row.kind_b.matches(b))
            || (row.kind_a.matches(b) && row.kind_b.matches(a))
    })
}

// ---- submission ---------------------------------------------------------------

/// What becomes of a new task on its rack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submission {
    /// No conflict: insert as pending and start it.
    Pending,
    /// Conflict, queueing asked for: insert as waiting until `expires_at`.
    Waiting { expires_at: DateTime<Utc> },
    /// Conflict, rejecting asked for (or the strategy was unspecified).
    RejectConflict,
    /// Conflict, but the rack already has `waiting` queued tasks.
    RejectQueueFull { waiting: usize },
}

/// The error text of [`Submission::RejectConflict`].
pub fn rack_conflict_message(rack_id: Uuid) -> String {
    format!("rack {rack_id} already has a conflicting task")
}

/// The error text of [`Submission::RejectQueueFull`].
pub fn queue_full_message(waiting: usize) -> String {
    format!("waiting queue is full ({waiting}/{MAX_WAITING_PER_RACK} tasks)")
}

/// Decides a submission on one rack (spec §3.3 step 6). Only the rack's
/// pending and running tasks in `unfinished` can block it: waiting tasks do
/// not, the promoter keeps their order. `waiting_count` is the rack's
/// number of waiting tasks; `queue_timeout_secs` ≤ 0 means the default
/// (one hour).
pub fn decide_submission(
    new: &TaskShape,
    strategy: QueueStrategy,
    unfinished: &[(TaskShape, TaskStatus)],
    waiting_count: usize,
    now: DateTime<Utc>,
    queue_timeout_secs: i64,
) -> Submission {
    let active = unfinished
        .iter()
        .filter(|(_, status)| status.is_active())
        .map(|(shape, _)| *shape);
    if first_conflict(new, active).is_none() {
        return Submission::Pending;
    }
    match strategy {
        QueueStrategy::Reject => Submission::RejectConflict,
        QueueStrategy::Queue if waiting_count >= MAX_WAITING_PER_RACK => {
            Submission::RejectQueueFull {
                waiting: waiting_count,
            }
        }
        QueueStrategy::Queue => Submission::Waiting {
            expires_at: queue_deadline(now, queue_timeout_secs),
        },
    }
}

/// A submission whose maintenance window opens after `now` (issue 12):
/// a task that could start waits for its window instead, and a queued
/// one's queue timeout counts from the opening (a window a day away must
/// not expire in the queue after an hour). Other decisions stand.
pub fn hold_for_window(
    decision: Submission,
    window: Window,
    waiting_count: usize,
    now: DateTime<Utc>,
    queue_timeout_secs: i64,
) -> Submission {
    let Some(opens) = window.opens_after(now) else {
        return decision;
    };
    match decision {
        Submission::Pending if waiting_count >= MAX_WAITING_PER_RACK => {
            Submission::RejectQueueFull {
                waiting: waiting_count,
            }
        }
        Submission::Pending | Submission::Waiting { .. } => Submission::Waiting {
            expires_at: queue_deadline(opens, queue_timeout_secs),
        },
        other => other,
    }
}

/// `now + timeout` (≤ 0 → the default), saturating far in the future.
fn queue_deadline(now: DateTime<Utc>, queue_timeout_secs: i64) -> DateTime<Utc> {
    let secs = if queue_timeout_secs > 0 {
        queue_timeout_secs
    } else {
        DEFAULT_QUEUE_TIMEOUT_SECS
    };
    TimeDelta::try_seconds(secs)
        .and_then(|d| now.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

// ---- promotion ------------------------------------------------------------------

/// A task of the rack, as the promoter sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromotionInput<'a> {
    pub id: Uuid,
    pub shape: TaskShape<'a>,
    pub status: TaskStatus,
    pub created_at: DateTime<Utc>,
    pub queue_expires_at: Option<DateTime<Utc>>,
    /// Its maintenance window (none for most tasks).
    pub window: Window,
}

/// What the promoter does to a waiting task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Promotion {
    /// Terminate: its queue deadline has passed.
    Expire,
    /// Terminate: its maintenance window closed before it could start.
    WindowClosed(DateTime<Utc>),
    /// Move to pending and start it.
    Promote,
}

/// One promoter pass over a rack's tasks (spec §3.5): first every waiting
/// task whose `queue_expires_at` ≤ `now` expires; then the other waiting
/// tasks, oldest first (`created_at`, ties by id), are promoted while they
/// do not conflict with the active tasks and those promoted before them in
/// this pass. The pass stops at the first one that conflicts: strict FIFO,
/// a later task never overtakes an earlier one. Finished tasks are ignored.
/// Maintenance windows (issue 12): a waiting task whose window closed ends
/// like an expired one; one whose window has not opened stays waiting and
/// holds its components — later tasks that conflict with it wait behind
/// it, others may pass.
///
/// Returns expirations and closed windows (oldest first), then promotions
/// in promotion order.
pub fn plan_promotions(tasks: &[PromotionInput], now: DateTime<Utc>) -> Vec<(Uuid, Promotion)> {
    let mut waiting: Vec<&PromotionInput> = tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Waiting)
        .collect();
    waiting.sort_by_key(|t| (t.created_at, t.id));
    let mut plan: Vec<(Uuid, Promotion)> = Vec::new();
    let mut candidates: Vec<&PromotionInput> = Vec::new();
    for t in waiting {
        if let Some(closed) = t.window.closed_by(now) {
            plan.push((t.id, Promotion::WindowClosed(closed)));
        } else if t.queue_expires_at.is_some_and(|at| at <= now) {
            plan.push((t.id, Promotion::Expire));
        } else {
            candidates.push(t);
        }
    }
    let mut active: Vec<TaskShape> = tasks
        .iter()
        .filter(|t| t.status.is_active())
        .map(|t| t.shape)
        .collect();
    for candidate in candidates {
        if first_conflict(&candidate.shape, active.iter().copied()).is_some() {
            break;
        }
        if candidate.window.opens_after(now).is_none() {
            plan.push((candidate.id, Promotion::Promote));
        }
        active.push(candidate.shape);
    }
    plan
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use ComponentType::{Cdu, Compute, NvSwitch, PowerShelf, TorSwitch, Ums};
    use TaskType::{BringUp, Decommission, FirmwareControl, InjectExpectation, PowerControl};

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    /// Components by (type, id number) pairs.
    fn set(items: &[(ComponentType, u128)]) -> ComponentsByType {
        let mut s = ComponentsByType::new();
        for (ty, n) in items {
            s.push(*ty, id(*n));
        }
        s
    }

    fn shape(task_type: TaskType, components: &ComponentsByType) -> TaskShape<'_> {
        TaskShape {
            task_type,
            components,
        }
    }

    /// The spec's table in words, written independently of
    /// [`CONFLICT_TABLE`]: the matrix test checks the data against it.
    fn oracle(
        a: TaskType,
        a_types: &[ComponentType],
        b: TaskType,
        b_types: &[ComponentType],
        overlap: bool,
    ) -> bool {
        let rack_wide = [BringUp, Decommission];
        if rack_wide.contains(&a) || rack_wide.contains(&b) {
            return true;
        }
        let has = |types: &[ComponentType], t| types.contains(&t);
        for (x, x_types, y, y_types) in [(a, a_types, b, b_types), (b, b_types, a, a_types)] {
            if x == PowerControl
                && has(x_types, PowerShelf)
                && (y == PowerControl || y == FirmwareControl)
            {
                return true;
            }
            if !overlap {
                continue;
            }
            if x == FirmwareControl && y == FirmwareControl {
                return true;
            }
            let same_type = |t| has(x_types, t) && has(y_types, t);
            if x == PowerControl
                && (y == PowerControl || y == FirmwareControl)
                && (same_type(Compute) || same_type(NvSwitch))
            {
                return true;
            }
        }
        false
    }

    /// Every combination of the types the table mentions, plus one it
    /// does not (ToRSwitch) and the empty set.
    fn type_sets() -> Vec<Vec<ComponentType>> {
        let base = [Compute, NvSwitch, PowerShelf, TorSwitch];
        (0u32..16)
            .map(|mask| {
                base.iter()
                    .enumerate()
                    .filter(|(i, _)| mask & (1 << i) != 0)
                    .map(|(_, t)| *t)
                    .collect()
            })
            .collect()
    }

    /// Builds the two component sets: distinct ids per task, except that
    /// with `shared = Some(t)` both hold the same id under type `t`.
    fn build(
        a_types: &[ComponentType],
        b_types: &[ComponentType],
        shared: Option<ComponentType>,
    ) -> (ComponentsByType, ComponentsByType) {
        let a = set(&a_types
            .iter()
            .map(|t| (*t, 100 + *t as u128))
            .collect::<Vec<_>>());
        let b = set(&b_types
            .iter()
            .map(|t| {
                let n = if shared == Some(*t) { 100 } else { 200 };
                (*t, n + *t as u128)
            })
            .collect::<Vec<_>>());
        (a, b)
    }

    #[test]
    fn whole_matrix_matches_the_spec() {
        let mut checked = 0;
        let mut conflicting = 0;
        for a_type in TaskType::ALL {
            for b_type in TaskType::ALL {
                for a_types in type_sets() {
                    for b_types in type_sets() {
                        let common: Vec<ComponentType> = a_types
                            .iter()
                            .copied()
                            .filter(|t| b_types.contains(t))
                            .collect();
                        let sharing = std::iter::once(None).chain(common.into_iter().map(Some));
                        for shared in sharing {
                            let (ca, cb) = build(&a_types, &b_types, shared);
                            let got = conflicts(&shape(*a_type, &ca), &shape(*b_type, &cb));
                            let want =
                                oracle(*a_type, &a_types, *b_type, &b_types, shared.is_some());
                            assert_eq!(
                                got, want,
                                "{a_type} {a_types:?} vs {b_type} {b_types:?}, shared {shared:?}"
                            );
                            checked += 1;
                            conflicting += usize::from(got);
                        }
                    }
                }
            }
        }
        // 25 type pairs × 16 × 16 sets, plus one overlap case per common type.
        assert!(checked > 25 * 256);
        assert!(conflicting > 0 && conflicting < checked);
    }

    #[test]
    fn table_examples_from_the_spec() {
        let shelf = set(&[(PowerShelf, 1)]);
        let c1 = set(&[(Compute, 2)]);
        let c1_again = set(&[(Compute, 2)]);
        let c3 = set(&[(Compute, 3)]);
        let n4 = set(&[(NvSwitch, 4)]);
        let n4_again = set(&[(NvSwitch, 4)]);
        let empty = ComponentsByType::new();
        let yes = |a: TaskShape, b: TaskShape| assert!(conflicts(&a, &b), "{a:?} vs {b:?}");
        let no = |a: TaskShape, b: TaskShape| assert!(!conflicts(&a, &b), "{a:?} vs {b:?}");

        // Shelf power is rack-wide against power and firmware...
        yes(shape(PowerControl, &shelf), shape(PowerControl, &c3));
        yes(shape(FirmwareControl, &n4), shape(PowerControl, &shelf));
        // ...but not against other kinds.
        no(
            shape(PowerControl, &shelf),
            shape(InjectExpectation, &shelf),
        );
        // Compute / NVSwitch power and firmware need a shared component.
        yes(shape(PowerControl, &c1), shape(PowerControl, &c1_again));
        no(shape(PowerControl, &c1), shape(PowerControl, &c3));
        yes(shape(PowerControl, &n4), shape(FirmwareControl, &n4_again));
        no(shape(PowerControl, &n4), shape(FirmwareControl, &c1));
        // Firmware on compute + power on nvswitch, disjoint: no conflict.
        no(shape(FirmwareControl, &c1), shape(PowerControl, &n4));
        yes(
            shape(FirmwareControl, &c1),
            shape(FirmwareControl, &c1_again),
        );
        no(shape(FirmwareControl, &c1), shape(FirmwareControl, &c3));
        // Bring-up (and ingest) and decommission conflict with anything.
        yes(shape(BringUp, &empty), shape(InjectExpectation, &c3));
        yes(shape(PowerControl, &c1), shape(BringUp, &n4));
        yes(shape(Decommission, &c1), shape(Decommission, &c3));
        yes(shape(Decommission, &empty), shape(BringUp, &empty));
        no(
            shape(InjectExpectation, &c1),
            shape(InjectExpectation, &c1_again),
        );
    }

    #[test]
    fn overlap_is_any_shared_component_not_only_the_rows_type() {
        // Both hold compute (disjoint) and share an NVSwitch: the compute
        // row applies and the tasks overlap, as in the reference.
        let a = set(&[(Compute, 1), (NvSwitch, 9)]);
        let b = set(&[(Compute, 2), (NvSwitch, 9)]);
        assert!(conflicts(
            &shape(PowerControl, &a),
            &shape(PowerControl, &b)
        ));
        // Unmentioned types: an overlap on a ToR switch alone does not make
        // power tasks conflict (no row needs ToR switches)...
        let t1 = set(&[(TorSwitch, 5)]);
        let t2 = set(&[(TorSwitch, 5)]);
        assert!(!conflicts(
            &shape(PowerControl, &t1),
            &shape(PowerControl, &t2)
        ));
        // ...but it does for firmware, which conflicts on any overlap.
        assert!(conflicts(
            &shape(FirmwareControl, &t1),
            &shape(FirmwareControl, &t2)
        ));
    }

    #[test]
    fn first_conflict_finds_the_earliest() {
        let c1 = set(&[(Compute, 1)]);
        let c2 = set(&[(Compute, 2)]);
        let shelf = set(&[(PowerShelf, 3)]);
        let candidate = shape(PowerControl, &c1);
        let active = [
            shape(PowerControl, &c2),
            shape(FirmwareControl, &c1),
            shape(PowerControl, &shelf),
        ];
        assert_eq!(first_conflict(&candidate, active), Some(1));
        assert_eq!(first_conflict(&candidate, [shape(PowerControl, &c2)]), None);
        assert_eq!(first_conflict(&candidate, []), None);
    }

    #[test]
    fn coarse_type_check_never_misses() {
        for a in TaskType::ALL {
            for b in TaskType::ALL {
                let expected = !matches!(
                    (a, b),
                    (InjectExpectation, InjectExpectation)
                        | (InjectExpectation, PowerControl | FirmwareControl)
                        | (PowerControl | FirmwareControl, InjectExpectation)
                );
                assert_eq!(types_may_conflict(*a, *b), expected, "{a} {b}");
            }
        }
    }

    fn component_types() -> impl Strategy<Value = ComponentType> {
        prop::sample::select(vec![Compute, NvSwitch, PowerShelf, TorSwitch, Ums, Cdu])
    }

    fn task_types() -> impl Strategy<Value = TaskType> {
        prop::sample::select(TaskType::ALL.to_vec())
    }

    /// Ids drawn from a small pool per type so overlaps are common; an id
    /// stays under one type, as in a real rack.
    fn components() -> impl Strategy<Value = ComponentsByType> {
        prop::collection::vec((component_types(), 0u128..4), 0..6).prop_map(|items| {
            let mut s = ComponentsByType::new();
            for (ty, n) in items {
                s.push(ty, id(ty as u128 * 10 + n));
            }
            s
        })
    }

    proptest! {
        #[test]
        fn conflicts_is_symmetric(
            a in task_types(), ca in components(),
            b in task_types(), cb in components(),
        ) {
            prop_assert_eq!(
                conflicts(&shape(a, &ca), &shape(b, &cb)),
                conflicts(&shape(b, &cb), &shape(a, &ca))
            );
        }

        #[test]
        fn precise_conflict_implies_coarse(
            a in task_types(), ca in components(),
            b in task_types(), cb in components(),
        ) {
            if conflicts(&shape(a, &ca), &shape(b, &cb)) {
                prop_assert!(types_may_conflict(a, b));
            }
        }
    }

    // ---- submission -----------------------------------------------------------

    fn t0() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2030-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn submission_without_conflict_is_pending() {
        let mine = set(&[(Compute, 1)]);
        let other = set(&[(Compute, 2)]);
        let new = shape(PowerControl, &mine);
        let unfinished = [(shape(PowerControl, &other), TaskStatus::Running)];
        for strategy in [QueueStrategy::Queue, QueueStrategy::Reject] {
            assert_eq!(
                decide_submission(&new, strategy, &unfinished, 5, t0(), 60),
                Submission::Pending
            );
        }
    }

    #[test]
    fn only_pending_and_running_tasks_block() {
        let c = set(&[(Compute, 1)]);
        let new = shape(PowerControl, &c);
        for status in [
            TaskStatus::Waiting,
            TaskStatus::Completed,
            TaskStatus::Failed,
            TaskStatus::Terminated,
        ] {
            let unfinished = [(shape(BringUp, &c), status)];
            assert_eq!(
                decide_submission(&new, QueueStrategy::Reject, &unfinished, 0, t0(), 0),
                Submission::Pending,
                "{status}"
            );
        }
        for status in [TaskStatus::Pending, TaskStatus::Running] {
            let unfinished = [(shape(BringUp, &c), status)];
            assert_eq!(
                decide_submission(&new, QueueStrategy::Reject, &unfinished, 0, t0(), 0),
                Submission::RejectConflict,
                "{status}"
            );
        }
    }

    #[test]
    fn conflict_with_queue_strategy_waits_or_is_full() {
        let c = set(&[(Compute, 1)]);
        let new = shape(FirmwareControl, &c);
        let unfinished = [(shape(PowerControl, &c), TaskStatus::Pending)];
        let decide = |waiting, timeout| {
            decide_submission(
                &new,
                QueueStrategy::Queue,
                &unfinished,
                waiting,
                t0(),
                timeout,
            )
        };
        assert_eq!(
            decide(0, 600),
            Submission::Waiting {
                expires_at: t0() + TimeDelta::seconds(600)
            }
        );
        // Unset timeout: the one-hour default.
        assert_eq!(
            decide(4, 0),
            Submission::Waiting {
                expires_at: t0() + TimeDelta::seconds(3600)
            }
        );
        assert_eq!(decide(5, 600), Submission::RejectQueueFull { waiting: 5 });
        assert_eq!(decide(7, 600), Submission::RejectQueueFull { waiting: 7 });
        // A huge timeout saturates rather than panicking.
        assert_eq!(
            decide(0, i64::MAX),
            Submission::Waiting {
                expires_at: DateTime::<Utc>::MAX_UTC
            }
        );
        assert_eq!(queue_full_message(5), "waiting queue is full (5/5 tasks)");
        assert_eq!(
            rack_conflict_message(id(7)),
            format!("rack {} already has a conflicting task", id(7))
        );
    }

    // ---- promotion ------------------------------------------------------------

    fn input<'a>(
        n: u128,
        shape: TaskShape<'a>,
        status: TaskStatus,
        created_min: i64,
        expires_min: Option<i64>,
    ) -> PromotionInput<'a> {
        PromotionInput {
            id: id(n),
            shape,
            status,
            created_at: t0() + TimeDelta::minutes(created_min),
            queue_expires_at: expires_min.map(|m| t0() + TimeDelta::minutes(m)),
            window: Window::default(),
        }
    }

    fn window(opens_min: Option<i64>, closes_min: Option<i64>) -> Window {
        Window {
            opens: opens_min.map(|m| t0() + TimeDelta::minutes(m)),
            closes: closes_min.map(|m| t0() + TimeDelta::minutes(m)),
        }
    }

    #[test]
    fn a_window_to_come_holds_its_task_and_its_components() {
        let c1 = set(&[(Compute, 1)]);
        let c1b = set(&[(Compute, 1)]);
        let c2 = set(&[(Compute, 2)]);
        let mut held = input(
            1,
            shape(FirmwareControl, &c1),
            TaskStatus::Waiting,
            0,
            Some(600),
        );
        held.window = window(Some(30), None);
        // Later: one conflicting with the held task, one independent.
        let blocked = input(
            2,
            shape(FirmwareControl, &c1b),
            TaskStatus::Waiting,
            1,
            Some(60),
        );
        let free = input(
            3,
            shape(FirmwareControl, &c2),
            TaskStatus::Waiting,
            2,
            Some(60),
        );
        let tasks = [held, blocked, free];
        assert_eq!(plan_promotions(&tasks, t0()), vec![]);
        // The window opens: the held task goes first, the conflicting one
        // stays behind it (strict FIFO).
        let at_open = t0() + TimeDelta::minutes(30);
        let mut tasks = tasks;
        tasks[2].status = TaskStatus::Running;
        assert_eq!(
            plan_promotions(&tasks, at_open),
            vec![(id(1), Promotion::Promote)]
        );
    }

    #[test]
    fn a_closed_window_ends_the_waiting_task_before_expiry() {
        let c1 = set(&[(Compute, 1)]);
        let mut late = input(
            1,
            shape(FirmwareControl, &c1),
            TaskStatus::Waiting,
            0,
            Some(600),
        );
        late.window = window(Some(-60), Some(10));
        let now = t0() + TimeDelta::minutes(10);
        assert_eq!(
            plan_promotions(&[late], now),
            vec![(id(1), Promotion::WindowClosed(now))]
        );
        // Open window, before it closes: promoted as usual.
        assert_eq!(
            plan_promotions(&[late], t0()),
            vec![(id(1), Promotion::Promote)]
        );
    }

    #[test]
    fn submissions_wait_for_a_window_to_come() {
        let later = window(Some(120), None);
        let now = t0();
        assert_eq!(
            hold_for_window(Submission::Pending, later, 0, now, 60),
            Submission::Waiting {
                expires_at: t0() + TimeDelta::minutes(121)
            }
        );
        assert_eq!(
            hold_for_window(
                Submission::Waiting {
                    expires_at: t0() + TimeDelta::minutes(1)
                },
                later,
                1,
                now,
                60
            ),
            Submission::Waiting {
                expires_at: t0() + TimeDelta::minutes(121)
            }
        );
        assert_eq!(
            hold_for_window(Submission::Pending, later, MAX_WAITING_PER_RACK, now, 60),
            Submission::RejectQueueFull {
                waiting: MAX_WAITING_PER_RACK
            }
        );
        assert_eq!(
            hold_for_window(Submission::RejectConflict, later, 0, now, 60),
            Submission::RejectConflict
        );
        // An open window (or none) changes nothing.
        for w in [window(Some(-5), Some(60)), Window::default()] {
            assert_eq!(
                hold_for_window(Submission::Pending, w, 0, now, 60),
                Submission::Pending
            );
        }
    }

    #[test]
    fn window_checks_at_submission() {
        let now = t0();
        assert!(window(Some(10), Some(20)).check(now).is_ok());
        assert!(Window::default().check(now).is_ok());
        assert_eq!(
            window(Some(20), Some(10)).check(now).unwrap_err(),
            "maintenance window: end_time must be after start_time"
        );
        assert_eq!(
            window(None, Some(-1)).check(now).unwrap_err(),
            "maintenance window already closed: end_time 2029-12-31T23:59:00Z is in the past"
        );
    }

    #[test]
    fn promotes_in_fifo_order_against_the_growing_active_set() {
        let c1 = set(&[(Compute, 1)]);
        let c2 = set(&[(Compute, 2)]);
        let c1b = set(&[(Compute, 1)]);
        let tasks = [
            // Listed out of order: created_at decides.
            input(3, shape(PowerControl, &c1b), TaskStatus::Waiting, 3, None),
            input(1, shape(PowerControl, &c1), TaskStatus::Waiting, 1, None),
            input(2, shape(PowerControl, &c2), TaskStatus::Waiting, 2, None),
            input(9, shape(PowerControl, &c2), TaskStatus::Completed, 0, None),
        ];
        // 1 and 2 are free; 3 conflicts with 1, promoted in this same pass.
        assert_eq!(
            plan_promotions(&tasks, t0()),
            [(id(1), Promotion::Promote), (id(2), Promotion::Promote)]
        );
    }

    #[test]
    fn no_overtaking_behind_a_blocked_task() {
        let c1 = set(&[(Compute, 1)]);
        let c2 = set(&[(Compute, 2)]);
        let tasks = [
            input(10, shape(PowerControl, &c1), TaskStatus::Running, 0, None),
            input(1, shape(FirmwareControl, &c1), TaskStatus::Waiting, 1, None),
            // Would not conflict with anything, but is behind task 1.
            input(2, shape(PowerControl, &c2), TaskStatus::Waiting, 2, None),
        ];
        assert!(plan_promotions(&tasks, t0()).is_empty());
    }

    #[test]
    fn expires_first_then_promotes_the_rest() {
        let shelf = set(&[(PowerShelf, 1)]);
        let c1 = set(&[(Compute, 2)]);
        let tasks = [
            input(
                10,
                shape(PowerControl, &shelf),
                TaskStatus::Pending,
                0,
                None,
            ),
            // Expired (deadline == now counts), even though it heads the queue.
            input(
                1,
                shape(PowerControl, &c1),
                TaskStatus::Waiting,
                1,
                Some(10),
            ),
            input(
                2,
                shape(InjectExpectation, &c1),
                TaskStatus::Waiting,
                2,
                Some(11),
            ),
            input(
                3,
                shape(PowerControl, &c1),
                TaskStatus::Waiting,
                3,
                Some(60),
            ),
            input(
                4,
                shape(InjectExpectation, &c1),
                TaskStatus::Waiting,
                4,
                None,
            ),
        ];
        let now = t0() + TimeDelta::minutes(10);
        // 1 expires; 2 (no conflict with shelf power) is promoted; 3
        // conflicts with the shelf power task and stops the pass before 4.
        assert_eq!(
            plan_promotions(&tasks, now),
            [(id(1), Promotion::Expire), (id(2), Promotion::Promote)]
        );
        // Later, everything but 4 has expired.
        let later = t0() + TimeDelta::minutes(60);
        assert_eq!(
            plan_promotions(&tasks, later),
            [
                (id(1), Promotion::Expire),
                (id(2), Promotion::Expire),
                (id(3), Promotion::Expire),
                (id(4), Promotion::Promote)
            ]
        );
    }

    #[test]
    fn rack_wide_task_blocks_the_whole_queue_and_ties_break_by_id() {
        let c = set(&[(Compute, 1)]);
        let n = set(&[(NvSwitch, 2)]);
        let tasks = [
            input(2, shape(PowerControl, &n), TaskStatus::Waiting, 1, None),
            input(1, shape(BringUp, &c), TaskStatus::Waiting, 1, None),
        ];
        // Same created_at: id 1 (bring-up) goes first and then blocks id 2.
        assert_eq!(plan_promotions(&tasks, t0()), [(id(1), Promotion::Promote)]);
        // With nothing waiting there is nothing to do.
        assert!(plan_promotions(&[], t0()).is_empty());
    }
}
