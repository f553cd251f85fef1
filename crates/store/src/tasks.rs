//! Tasks: the task half of [`crate::Store`], written once for any
//! [`Backend`].
//!
//! Mapping to the schema (flow-core §2.2, migrations 0003): empty
//! `description`, `executor_type`, `execution_id`, `message` and
//! `idempotency_key` are NULL; the components are the `attributes` JSON
//! `{"components_by_type": {...}}`; the queue policy is the two columns
//! `conflict_strategy` / `queue_timeout_secs`.
//!
//! Submission and promotion run under a per-rack lock ([`rack_lock`]):
//! PostgreSQL takes a transaction-scoped advisory lock keyed on the rack id,
//! SQLite's `BEGIN IMMEDIATE` serialises all writers anyway. Either way a
//! decision taken on the rack's unfinished tasks cannot race another one.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rackflow_domain::ComponentsByType;
use rackflow_domain::run::{OperationRunTarget, Page, QueueStrategy};
use rackflow_domain::task::{QueuePolicy, Task, TaskStatus, TaskTrigger, TaskType};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::backend::{Backend, Txn, fetch_count, xact_lock};
use crate::sql::{
    Conditions, ID_CHUNK, RowReader, Sql, UniqueKey, Violation, lock_key, non_empty, now,
    opt_non_empty, parse_named, to_json, violation, write_error,
};
use crate::{
    StoreError, StoreResult, SubmitDecision, SubmitOutcome, TaskFilter, TaskLease, TaskTransition,
    TaskUpdate,
};

const TASK_COLUMNS: &str = "id, type, executor_type, information, description, rack_id, \
     attributes, execution_id, status, message, report, applied_rule_id, rule_definition, \
     conflict_strategy, queue_timeout_secs, created_at, updated_at, started_at, finished_at, \
     queue_expires_at, idempotency_key, trigger_type, trigger_id";

/// [`TASK_COLUMNS`] without `report`, for listings that strip it (reports
/// can be large).
const TASK_COLUMNS_NO_REPORT: &str = "id, type, executor_type, information, description, \
     rack_id, attributes, execution_id, status, message, applied_rule_id, rule_definition, \
     conflict_strategy, queue_timeout_secs, created_at, updated_at, started_at, finished_at, \
     queue_expires_at, idempotency_key, trigger_type, trigger_id";

/// Waiting, pending and running, as an SQL list.
pub(crate) const UNFINISHED: &str = "('waiting', 'pending', 'running')";

/// The `attributes` JSON column.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Attributes {
    #[serde(default)]
    components_by_type: ComponentsByType,
}

fn strategy_name(strategy: QueueStrategy) -> &'static str {
    match strategy {
        QueueStrategy::Queue => "queue",
        QueueStrategy::Reject => "reject",
    }
}

fn strategy_from_db(name: &str) -> Option<QueueStrategy> {
    match name {
        "queue" => Some(QueueStrategy::Queue),
        "reject" => Some(QueueStrategy::Reject),
        _ => None,
    }
}

fn task_from_row(row: &impl RowReader, with_report: bool) -> StoreResult<Task> {
    let attributes: Attributes = row.json("attributes")?;
    Ok(Task {
        id: row.uuid("id")?,
        task_type: parse_named("task.type", &row.text("type")?, TaskType::parse)?,
        information: row.json("information")?,
        description: row.opt_text("description")?.unwrap_or_default(),
        rack_id: row.uuid("rack_id")?,
        components_by_type: attributes.components_by_type,
        executor_type: row.opt_text("executor_type")?.unwrap_or_default(),
        execution_id: row.opt_text("execution_id")?.unwrap_or_default(),
        status: parse_named("task.status", &row.text("status")?, TaskStatus::parse)?,
        message: row.opt_text("message")?.unwrap_or_default(),
        report: if with_report {
            row.opt_json_value("report")?
        } else {
            None
        },
        applied_rule_id: row.opt_uuid("applied_rule_id")?,
        rule_definition: row.opt_json("rule_definition")?,
        queue_policy: QueuePolicy {
            strategy: parse_named(
                "task.conflict_strategy",
                &row.text("conflict_strategy")?,
                strategy_from_db,
            )?,
            timeout_secs: row.i64("queue_timeout_secs")?,
        },
        queue_expires_at: row.opt_ts("queue_expires_at")?,
        idempotency_key: row.opt_text("idempotency_key")?,
        trigger: {
            let (name, id) = (row.text("trigger_type")?, row.opt_uuid("trigger_id")?);
            TaskTrigger::from_parts(&name, id).ok_or_else(|| StoreError::Decode {
                what: "task.trigger",
                detail: format!("trigger_type {name:?} with trigger_id {id:?}"),
            })?
        },
        created_at: row.ts("created_at")?,
        updated_at: row.ts("updated_at")?,
        started_at: row.opt_ts("started_at")?,
        finished_at: row.opt_ts("finished_at")?,
    })
}

fn tasks_from_rows<R: RowReader>(rows: &[R]) -> StoreResult<Vec<Task>> {
    rows.iter().map(|row| task_from_row(row, true)).collect()
}

fn first_task<R: RowReader>(rows: &[R]) -> StoreResult<Option<Task>> {
    rows.first().map(|row| task_from_row(row, true)).transpose()
}

/// The per-rack lock key (scope `rack`, the id's 16 bytes).
pub(crate) fn rack_lock(rack_id: Uuid) -> i64 {
    lock_key("rack", rack_id.as_bytes())
}

/// `SET` assignments of a status change at `now`: the status, then the
/// stamps §3.2 ties to it. `started_at` / `finished_at` are kept once set
/// (first transition wins); any status but waiting clears the queue
/// deadline unless `keep_deadline`.
fn status_sets(
    sql: &mut Sql,
    status: TaskStatus,
    now: DateTime<Utc>,
    keep_deadline: bool,
) -> Vec<String> {
    let mut sets = vec![format!("status = {}", sql.bind(status.as_str()))];
    if status == TaskStatus::Running {
        sets.push(format!(
            "started_at = COALESCE(started_at, {})",
            sql.bind(now)
        ));
    }
    if status.is_finished() {
        sets.push(format!(
            "finished_at = COALESCE(finished_at, {})",
            sql.bind(now)
        ));
    }
    if status != TaskStatus::Waiting && !keep_deadline {
        sets.push("queue_expires_at = NULL".to_string());
    }
    sets
}

/// The rack's unfinished tasks, oldest first, inside `tx`.
async fn unfinished_of_rack<T: Txn>(tx: &mut T, rack_id: Uuid) -> StoreResult<Vec<Task>> {
    let sql = Sql::new(format!(
        "SELECT {TASK_COLUMNS} FROM task WHERE rack_id = $1 AND status IN {UNFINISHED} \
         ORDER BY created_at, id"
    ))
    .arg(rack_id);
    tasks_from_rows(&tx.fetch_all(sql).await?)
}

/// The task already submitted under `key`, in any status. A finished one
/// counts too: a submitter that lost the answer (a crash between submitting
/// and recording the task id) must get the same task back, not run the
/// operation a second time.
fn by_key_sql(key: &str) -> Sql {
    Sql::new(format!(
        "SELECT {TASK_COLUMNS} FROM task WHERE idempotency_key = $1 ORDER BY created_at, id"
    ))
    .arg(key)
}

/// Whether the rack exists and is not soft-deleted, inside `tx`.
pub(crate) async fn live_rack_exists<T: Txn>(tx: &mut T, rack_id: Uuid) -> StoreResult<bool> {
    let sql = Sql::new("SELECT id FROM rack WHERE id = $1 AND deleted_at IS NULL").arg(rack_id);
    Ok(!tx.fetch_all(sql).await?.is_empty())
}

pub(crate) async fn task_submit<'d, B: Backend>(
    backend: &B,
    task: &Task,
    decide: &'d (dyn for<'t> Fn(&'t [Task]) -> SubmitDecision + Send + Sync + 'd),
    target: Option<&OperationRunTarget>,
) -> StoreResult<SubmitOutcome> {
    let mut tx = backend.begin().await?;
    match submit_in_tx::<B>(&mut tx, task, decide, target).await {
        Ok(SubmitOutcome::Inserted(stored)) => {
            if let Some(change) = lifecycle_change(&stored) {
                apply_lifecycle::<B>(&mut tx, stored.id, change).await?;
            }
            tx.commit().await?;
            Ok(SubmitOutcome::Inserted(stored))
        }
        Ok(outcome) => {
            tx.rollback().await?;
            Ok(outcome)
        }
        Err(SubmitFailure::Store(e)) => {
            tx.rollback().await.ok();
            Err(e)
        }
        Err(SubmitFailure::Insert(e)) => {
            // PostgreSQL has aborted the transaction: end it before reading.
            tx.rollback().await.ok();
            let existing = match lost_key_race(task, &e) {
                Some(key) => first_task(&backend.fetch_all(by_key_sql(key)).await?)?,
                None => None,
            };
            submit_error(task, e, existing)
        }
    }
}

/// Why one submission inside a transaction wrote nothing.
enum SubmitFailure {
    /// A read or the target write failed, or the rack does not exist.
    Store(StoreError),
    /// The insert failed (the caller ends the transaction or savepoint,
    /// then explains it with [`submit_error`]).
    Insert(sqlx::Error),
}

impl From<StoreError> for SubmitFailure {
    fn from(e: StoreError) -> Self {
        SubmitFailure::Store(e)
    }
}

impl From<sqlx::Error> for SubmitFailure {
    fn from(e: sqlx::Error) -> Self {
        SubmitFailure::Store(e.into())
    }
}

/// The body of a submission (see [`crate::Store::task_submit`]) inside
/// `tx`: an existing or rejected task writes nothing.
async fn submit_in_tx<B: Backend>(
    tx: &mut B::Tx,
    task: &Task,
    decide: &(dyn for<'t> Fn(&'t [Task]) -> SubmitDecision + Send + Sync + '_),
    target: Option<&OperationRunTarget>,
) -> Result<SubmitOutcome, SubmitFailure> {
    let key = opt_non_empty(&task.idempotency_key);
    xact_lock::<B>(tx, rack_lock(task.rack_id)).await?;

    if let Some(key) = &key
        && let Some(existing) = first_task(&tx.fetch_all(by_key_sql(key)).await?)?
    {
        return Ok(SubmitOutcome::Existing(existing));
    }
    if !live_rack_exists(tx, task.rack_id).await? {
        return Err(StoreError::NotFound(format!("rack {}", task.rack_id)).into());
    }

    let unfinished = unfinished_of_rack(tx, task.rack_id).await?;
    let (status, message, queue_expires_at, start) = match decide(&unfinished) {
        SubmitDecision::Reject(reason) => return Ok(SubmitOutcome::Rejected(reason)),
        SubmitDecision::Insert {
            status,
            message,
            queue_expires_at,
            start,
        } => (status, message, queue_expires_at, start),
    };

    let now = now();
    let attributes = Attributes {
        components_by_type: task.components_by_type.clone(),
    };
    let (executor_type, execution_id, applied_rule_id, rule_definition, started_at, lease) =
        match &start {
            Some(start) => (
                start.executor_type.as_str(),
                start.execution_id.as_str(),
                start.applied_rule_id,
                Some(&start.rule_definition),
                Some(now),
                start.lease.as_ref(),
            ),
            None => (
                task.executor_type.as_str(),
                task.execution_id.as_str(),
                task.applied_rule_id,
                task.rule_definition.as_ref(),
                None,
                None,
            ),
        };
    let insert = Sql::new(format!(
        "INSERT INTO task ({TASK_COLUMNS}, owner, lease_expires_at) VALUES \
         ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $16, $19, NULL, \
          $17, $18, $22, $23, $20, $21) RETURNING {TASK_COLUMNS}"
    ))
    .arg(task.id)
    .arg(task.task_type.as_str())
    .arg(non_empty(executor_type))
    .arg(to_json("task.information", &task.information)?)
    .arg(non_empty(&task.description))
    .arg(task.rack_id)
    .arg(to_json("task.attributes", &attributes)?)
    .arg(non_empty(execution_id))
    .arg(status.as_str())
    .arg(non_empty(&message))
    .arg(task.report.clone())
    .arg(applied_rule_id)
    .arg(
        rule_definition
            .map(|d| to_json("task.rule_definition", d))
            .transpose()?,
    )
    .arg(strategy_name(task.queue_policy.strategy))
    .arg(task.queue_policy.timeout_secs)
    .arg(now)
    .arg(queue_expires_at)
    .arg(key.clone())
    .arg(started_at)
    .arg(lease.map(|l| l.owner.clone()))
    .arg(lease.map(|l| l.expires_at))
    .arg(task.trigger.type_name())
    .arg(task.trigger.id());

    let rows = tx.fetch_all(insert).await.map_err(SubmitFailure::Insert)?;
    let stored = first_task(&rows)?.ok_or_else(|| StoreError::Decode {
        what: "task",
        detail: "INSERT … RETURNING gave no row".to_string(),
    })?;
    if let Some(target) = target {
        crate::runs::write_target(tx, target, now).await?;
    }
    Ok(SubmitOutcome::Inserted(stored))
}

/// The task's idempotency key, when `err` is the unique violation of that
/// key: the check ran under the rack's lock, but the key is global, so a
/// submit with the same key on another rack may have won the race, and its
/// task is then the existing one.
fn lost_key_race<'t>(task: &'t Task, err: &sqlx::Error) -> Option<&'t str> {
    match violation(err) {
        Some(Violation::Unique(Some(UniqueKey::TaskIdempotencyKey))) => {
            task.idempotency_key.as_deref().filter(|k| !k.is_empty())
        }
        _ => None,
    }
}

/// A failed submit insert, given the task found under its key when the
/// insert lost the key race ([`lost_key_race`]).
fn submit_error(
    task: &Task,
    err: sqlx::Error,
    existing: Option<Task>,
) -> StoreResult<SubmitOutcome> {
    if let Some(key) = lost_key_race(task, &err) {
        return match existing {
            Some(existing) => Ok(SubmitOutcome::Existing(existing)),
            None => Err(StoreError::AlreadyExists(format!(
                "task with idempotency key {key:?}"
            ))),
        };
    }
    Err(write_error(
        err,
        |_| format!("task id \"{}\"", task.id),
        || match task.applied_rule_id {
            Some(rule) => format!("operation rule {rule}"),
            None => format!("rack {}", task.rack_id),
        },
    ))
}

pub(crate) async fn task_promote<'d, B: Backend>(
    backend: &B,
    rack_id: Uuid,
    decide: &'d (dyn for<'t> Fn(&'t [Task]) -> Vec<TaskTransition> + Send + Sync + 'd),
) -> StoreResult<Vec<Task>> {
    let mut tx = backend.begin().await?;
    xact_lock::<B>(&mut tx, rack_lock(rack_id)).await?;
    let unfinished = unfinished_of_rack(&mut tx, rack_id).await?;
    let transitions = decide(&unfinished);
    if transitions.is_empty() {
        tx.rollback().await?;
        return Ok(Vec::new());
    }
    let now = now();
    let mut updated = Vec::new();
    for transition in &transitions {
        let Some(seen) = unfinished.iter().find(|t| t.id == transition.id) else {
            tracing::warn!(task = %transition.id, rack = %rack_id, "transition for a task not shown; skipped");
            continue;
        };
        let mut sql = Sql::default();
        let mut sets = status_sets(&mut sql, transition.status, now, false);
        sets.push(format!(
            "message = {}",
            sql.bind(non_empty(&transition.message))
        ));
        sets.push(format!("updated_at = {}", sql.bind(now)));
        let id = sql.bind(seen.id);
        let seen_status = sql.bind(seen.status.as_str());
        sql.push(&format!(
            "UPDATE task SET {} WHERE id = {id} AND status = {seen_status} \
             RETURNING {TASK_COLUMNS}",
            sets.join(", ")
        ));
        match first_task(&tx.fetch_all(sql).await?)? {
            Some(task) => {
                if let Some(change) = lifecycle_change(&task) {
                    apply_lifecycle::<B>(&mut tx, task.id, change).await?;
                }
                updated.push(task)
            }
            None => {
                tracing::debug!(task = %seen.id, "task changed status meanwhile; transition skipped")
            }
        }
    }
    tx.commit().await?;
    Ok(updated)
}

/// What a task's current status does to its rack's lifecycle.
fn lifecycle_change(task: &Task) -> Option<rackflow_domain::inventory::LifecycleChange> {
    rackflow_domain::inventory::LifecycleChange::of(
        task.task_type,
        &task.information.code,
        task.status,
    )
}

pub(crate) async fn racks_with_waiting_tasks<B: Backend>(backend: &B) -> StoreResult<Vec<Uuid>> {
    let sql =
        Sql::new("SELECT DISTINCT rack_id FROM task WHERE status = 'waiting' ORDER BY rack_id");
    backend
        .fetch_all(sql)
        .await?
        .iter()
        .map(|row| row.uuid("rack_id"))
        .collect()
}

pub(crate) async fn task_update<B: Backend>(
    backend: &B,
    id: Uuid,
    update: &TaskUpdate,
) -> StoreResult<Option<Task>> {
    let sql = task_update_sql(id, update, true)?;
    let rows = match update.rack_lifecycle {
        None => backend.fetch_all(sql).await,
        Some(change) => {
            let mut tx = backend.begin().await?;
            let rows = tx
                .fetch_all(sql)
                .await
                .map_err(|e| task_update_error(e, update))?;
            if !rows.is_empty() {
                apply_lifecycle::<B>(&mut tx, id, change).await?;
            }
            tx.commit().await?;
            Ok(rows)
        }
    }
    .map_err(|e| task_update_error(e, update))?;
    first_task(&rows)
}

pub(crate) async fn task_update_quiet<B: Backend>(
    backend: &B,
    id: Uuid,
    update: &TaskUpdate,
) -> StoreResult<bool> {
    if update.rack_lifecycle.is_some() {
        return Ok(task_update(backend, id, update).await?.is_some());
    }
    let rows = backend
        .fetch_all(task_update_sql(id, update, false)?)
        .await
        .map_err(|e| task_update_error(e, update))?;
    Ok(!rows.is_empty())
}

/// Moves the rack of task `task_id` in its lifecycle (see
/// [`rackflow_domain::inventory::LifecycleChange`]), inside the caller's
/// transaction.
pub(crate) async fn apply_lifecycle<B: Backend>(
    tx: &mut B::Tx,
    task_id: Uuid,
    change: rackflow_domain::inventory::LifecycleChange,
) -> StoreResult<()> {
    use rackflow_domain::inventory::LifecycleChange as C;
    let now = now();
    let mut sql = Sql::default();
    let at = sql.bind(now);
    let sets = match change {
        C::IngestStarted => "status = 'ingesting'".to_string(),
        C::Ingested => format!("status = 'ingested', ingested_at = {at}, decommissioned_at = NULL"),
        // Back to the last milestone: a completed ingest clears the
        // decommission stamp, so a set one is the later of the two.
        C::IngestAbandoned => "status = CASE WHEN status <> 'ingesting' THEN status \
             WHEN decommissioned_at IS NOT NULL THEN 'decommissioned' \
             WHEN ingested_at IS NOT NULL THEN 'ingested' ELSE 'new' END"
            .to_string(),
        C::Decommissioned => format!("status = 'decommissioned', decommissioned_at = {at}"),
    };
    let task = sql.bind(task_id);
    sql.push(&format!(
        "UPDATE rack SET {sets}, updated_at = {at} \
         WHERE id = (SELECT rack_id FROM task WHERE id = {task})"
    ));
    tx.execute(sql).await?;
    Ok(())
}

pub(crate) async fn task_updates_quiet<B: Backend>(
    backend: &B,
    updates: &[(Uuid, TaskUpdate)],
) -> StoreResult<Vec<bool>> {
    if updates.is_empty() {
        return Ok(Vec::new());
    }
    let mut tx = backend.begin().await?;
    let mut written = Vec::with_capacity(updates.len());
    for (id, update) in updates {
        let rows = tx
            .fetch_all(task_update_sql(*id, update, false)?)
            .await
            .map_err(|e| task_update_error(e, update))?;
        if let (false, Some(change)) = (rows.is_empty(), update.rack_lifecycle) {
            apply_lifecycle::<B>(&mut tx, *id, change).await?;
        }
        written.push(!rows.is_empty());
    }
    tx.commit().await?;
    Ok(written)
}

/// The UPDATE of [`task_update`]; it returns the whole row when
/// `whole_row`, else only the id (so that a match is still visible).
fn task_update_sql(id: Uuid, update: &TaskUpdate, whole_row: bool) -> StoreResult<Sql> {
    let now = now();
    let mut sql = Sql::default();
    let mut sets = vec![format!("updated_at = {}", sql.bind(now))];
    if let Some(status) = update.status {
        let keep_deadline = update.queue_expires_at.is_some();
        sets.extend(status_sets(&mut sql, status, now, keep_deadline));
    }
    if let Some(deadline) = update.queue_expires_at {
        sets.push(format!("queue_expires_at = {}", sql.bind(deadline)));
    }
    if let Some(message) = &update.message {
        sets.push(format!("message = {}", sql.bind(non_empty(message))));
    }
    if let Some(report) = &update.report {
        sets.push(format!("report = {}", sql.bind(report.clone())));
    }
    if let Some(rule) = update.applied_rule_id {
        sets.push(format!("applied_rule_id = {}", sql.bind(rule)));
    }
    if let Some(definition) = &update.rule_definition {
        let json = to_json("task.rule_definition", definition)?;
        sets.push(format!("rule_definition = {}", sql.bind(json)));
    }
    if let Some(executor) = &update.executor_type {
        sets.push(format!("executor_type = {}", sql.bind(non_empty(executor))));
    }
    if let Some(execution) = &update.execution_id {
        sets.push(format!("execution_id = {}", sql.bind(non_empty(execution))));
    }
    if let Some(lease) = &update.lease {
        sets.push(format!("owner = {}", sql.bind(lease.owner.as_str())));
        sets.push(format!("lease_expires_at = {}", sql.bind(lease.expires_at)));
    }
    let id_param = sql.bind(id);
    let mut condition = format!("id = {id_param}");
    if !update.expected.is_empty() {
        let list = sql.bind_list(update.expected.iter().map(|s| s.as_str()));
        condition.push_str(&format!(" AND status IN {list}"));
    }
    if let Some(owner) = &update.expected_owner {
        condition.push_str(&format!(" AND owner = {}", sql.bind(owner.as_str())));
    }
    let returning = if whole_row { TASK_COLUMNS } else { "id" };
    sql.push(&format!(
        "UPDATE task SET {} WHERE {condition} RETURNING {returning}",
        sets.join(", ")
    ));
    Ok(sql)
}

/// See [`crate::Store::task_leases_renew`]. `updated_at` is left alone: a
/// renewal every few seconds is not a change anyone reading the task sees.
pub(crate) async fn task_leases_renew<B: Backend>(
    backend: &B,
    owner: &str,
    ids: &[Uuid],
    expires_at: DateTime<Utc>,
) -> StoreResult<Vec<Uuid>> {
    let mut renewed = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(ID_CHUNK) {
        let mut sql = Sql::default();
        let expires = sql.bind(expires_at);
        let owner = sql.bind(owner);
        let list = sql.bind_list(chunk.iter().copied());
        sql.push(&format!(
            "UPDATE task SET lease_expires_at = {expires} \
             WHERE owner = {owner} AND status = 'running' AND id IN {list} RETURNING id"
        ));
        for row in backend.fetch_all(sql).await? {
            renewed.push(row.uuid("id")?);
        }
    }
    Ok(renewed)
}

/// The executor whose tasks carry leases. Tasks of a durable executor
/// (Temporal) are never adopted: their execution survives its worker.
const LEASED_EXECUTOR: &str = "local";

/// See [`crate::Store::task_adopt`]: the candidates are locked (skipping
/// rows another adopter holds) and re-checked under the lock, so two
/// replicas never adopt the same task.
pub(crate) async fn task_adopt<B: Backend>(
    backend: &B,
    lease: &TaskLease,
    now: DateTime<Utc>,
    any_lease: bool,
    limit: i64,
) -> StoreResult<Vec<Task>> {
    let mut tx = backend.begin().await?;
    let mut select = Sql::default();
    let owner = select.bind(lease.owner.as_str());
    let expired = if any_lease {
        format!("(owner IS NULL OR owner <> {owner})")
    } else {
        format!(
            "(owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at < {})",
            select.bind(now)
        )
    };
    let limit = select.bind(limit);
    select.push(&format!(
        "SELECT id FROM task WHERE status = 'running' AND {expired} \
         AND (executor_type IS NULL OR executor_type = '{LEASED_EXECUTOR}') \
         ORDER BY created_at, id LIMIT {limit}{}",
        B::for_update(true)
    ));
    let ids: Vec<Uuid> = tx
        .fetch_all(select)
        .await?
        .iter()
        .map(|row| row.uuid("id"))
        .collect::<StoreResult<_>>()?;
    let mut adopted = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(ID_CHUNK) {
        let mut update = Sql::default();
        let owner = update.bind(lease.owner.as_str());
        let expires = update.bind(lease.expires_at);
        let list = update.bind_list(chunk.iter().copied());
        update.push(&format!(
            "UPDATE task SET owner = {owner}, lease_expires_at = {expires} \
             WHERE id IN {list} AND status = 'running' RETURNING {TASK_COLUMNS}"
        ));
        adopted.extend(tasks_from_rows(&tx.fetch_all(update).await?)?);
    }
    tx.commit().await?;
    adopted.sort_by_key(|t| (t.created_at, t.id));
    Ok(adopted)
}

fn task_update_error(e: sqlx::Error, update: &TaskUpdate) -> StoreError {
    write_error(
        e,
        |_| "task with this idempotency key".to_string(),
        || {
            format!(
                "operation rule {}",
                update.applied_rule_id.flatten().unwrap_or_default()
            )
        },
    )
}

pub(crate) async fn task_get<B: Backend>(backend: &B, id: Uuid) -> StoreResult<Option<Task>> {
    let sql = Sql::new(format!("SELECT {TASK_COLUMNS} FROM task WHERE id = $1")).arg(id);
    first_task(&backend.fetch_all(sql).await?)
}

pub(crate) async fn tasks_get_many<B: Backend>(
    backend: &B,
    ids: &[Uuid],
) -> StoreResult<Vec<Task>> {
    let mut unique = ids.to_vec();
    unique.sort();
    unique.dedup();
    let mut by_id = HashMap::with_capacity(unique.len());
    for chunk in unique.chunks(ID_CHUNK) {
        let mut sql = Sql::default();
        let list = sql.bind_list(chunk.iter().copied());
        sql.push(&format!(
            "SELECT {TASK_COLUMNS} FROM task WHERE id IN {list}"
        ));
        for task in tasks_from_rows(&backend.fetch_all(sql).await?)? {
            by_id.insert(task.id, task);
        }
    }
    Ok(ids.iter().filter_map(|id| by_id.get(id).cloned()).collect())
}

/// Status and message of many tasks, without decoding reports and rules:
/// what reconciliation needs on every dispatcher attempt.
pub(crate) async fn task_states<B: Backend>(
    backend: &B,
    ids: &[Uuid],
) -> StoreResult<Vec<(Uuid, TaskStatus, String)>> {
    let mut unique = ids.to_vec();
    unique.sort();
    unique.dedup();
    let mut out = Vec::with_capacity(unique.len());
    for chunk in unique.chunks(ID_CHUNK) {
        let mut sql = Sql::default();
        let list = sql.bind_list(chunk.iter().copied());
        sql.push(&format!(
            "SELECT id, status, message FROM task WHERE id IN {list}"
        ));
        for row in backend.fetch_all(sql).await? {
            out.push((
                row.uuid("id")?,
                parse_named("task.status", &row.text("status")?, TaskStatus::parse)?,
                row.opt_text("message")?.unwrap_or_default(),
            ));
        }
    }
    Ok(out)
}

pub(crate) async fn task_list<B: Backend>(
    backend: &B,
    filter: &TaskFilter,
    page: Page,
    with_report: bool,
) -> StoreResult<(Vec<Task>, i64)> {
    let mut cond = Conditions::default();
    if let Some(rack_id) = filter.rack_id {
        let rack = cond.sql.bind(rack_id);
        cond.add(format!("rack_id = {rack}"));
    }
    if let Some(component_id) = filter.component_id {
        let has = B::task_has_component(&mut cond.sql, component_id);
        cond.add(has);
    }
    if filter.active_only {
        cond.add(format!("status IN {UNFINISHED}"));
    }
    if !filter.statuses.is_empty() {
        let list = cond
            .sql
            .bind_list(filter.statuses.iter().map(|s| s.as_str()));
        cond.add(format!("status IN {list}"));
    }
    let total = fetch_count(backend, cond.count("task")).await?;
    if total == 0 {
        return Ok((Vec::new(), 0));
    }
    let columns = if with_report {
        TASK_COLUMNS
    } else {
        TASK_COLUMNS_NO_REPORT
    };
    let rows = backend
        .fetch_all(cond.page(columns, "task", "created_at DESC, id DESC", page))
        .await?;
    let tasks = rows
        .iter()
        .map(|row| task_from_row(row, with_report))
        .collect::<StoreResult<_>>()?;
    Ok((tasks, total))
}

pub(crate) async fn tasks_with_status<B: Backend>(
    backend: &B,
    statuses: &[TaskStatus],
) -> StoreResult<Vec<Task>> {
    if statuses.is_empty() {
        return Ok(Vec::new());
    }
    let mut sql = Sql::default();
    let list = sql.bind_list(statuses.iter().map(|s| s.as_str()));
    sql.push(&format!(
        "SELECT {TASK_COLUMNS} FROM task WHERE status IN {list} ORDER BY created_at, id"
    ));
    tasks_from_rows(&backend.fetch_all(sql).await?)
}
