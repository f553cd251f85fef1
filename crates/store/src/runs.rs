//! Operation runs and their targets: the run half of [`crate::Store`],
//! written once for any [`Backend`].
//!
//! Mapping to the schema (operation-runs §7): `description`,
//! `status_message` and a target's `message` are NULL when empty; the run's
//! configuration is the three JSON columns `selector`, `options` and
//! `operation_template` (serde of the domain types, §5.6), with
//! `operation_type` / `operation_code` copied from the template so they can
//! be filtered on.
//!
//! Dispatch ([`run_lock_apply`]): one transaction locks the run row, then
//! its current-phase target rows (always in that order, run first, targets
//! by phase and sequence, so two lockers cannot deadlock), reads the
//! earlier-phase aggregate, lets the caller change the loaded copy, and
//! writes back only what changed. Row locks are `FOR UPDATE [SKIP LOCKED]`
//! on PostgreSQL; on SQLite the `BEGIN IMMEDIATE` write transaction holds
//! the whole database, which is the same guarantee for its single node.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use rackflow_domain::dispatch::EarlierPhases;
use rackflow_domain::run::{
    KindFilter, OperationRun, OperationRunTarget, Page, PhaseScope, RetryState, RunConfiguration,
    RunListFilter, RunReason, RunStatus, StateFilter, TargetQuery, TargetStatus,
};
use rackflow_domain::task::TaskStatus;
use uuid::Uuid;

use crate::backend::{Backend, Txn, fetch_count};
use crate::sql::{
    Conditions, RowReader, Sql, balanced_join, micros, non_empty, now, parse_named, to_json,
    write_error,
};
use crate::{LockMode, RunLock, StoreError, StoreResult};

const RUN_COLUMNS: &str = "id, name, description, status, status_reason, status_message, \
     current_phase_index, total_phases, selector, options, operation_template, operation_type, \
     operation_code, created_at, updated_at, started_at, finished_at";

const TARGET_COLUMNS: &str = "id, operation_run_id, rack_id, sequence_index, phase_index, \
     components_by_type, task_id, status, message, retry_after, retry_state, created_at, \
     updated_at";

fn run_from_row(row: &impl RowReader) -> StoreResult<OperationRun> {
    Ok(OperationRun {
        id: row.uuid("id")?,
        name: row.text("name")?,
        description: row.opt_text("description")?.unwrap_or_default(),
        status: parse_named(
            "operation_run.status",
            &row.text("status")?,
            RunStatus::parse,
        )?,
        reason: parse_named(
            "operation_run.status_reason",
            &row.text("status_reason")?,
            RunReason::parse,
        )?,
        status_message: row.opt_text("status_message")?.unwrap_or_default(),
        current_phase_index: row.i32("current_phase_index")?,
        total_phases: row.i32("total_phases")?,
        configuration: RunConfiguration {
            selector: row.json("selector")?,
            options: row.json("options")?,
            operation: row.json("operation_template")?,
        },
        created_at: row.ts("created_at")?,
        updated_at: row.ts("updated_at")?,
        started_at: row.opt_ts("started_at")?,
        finished_at: row.opt_ts("finished_at")?,
    })
}

fn target_from_row(row: &impl RowReader) -> StoreResult<OperationRunTarget> {
    Ok(OperationRunTarget {
        id: row.uuid("id")?,
        operation_run_id: row.uuid("operation_run_id")?,
        rack_id: row.uuid("rack_id")?,
        sequence_index: row.i32("sequence_index")?,
        phase_index: row.i32("phase_index")?,
        components_by_type: row.json("components_by_type")?,
        task_id: row.opt_uuid("task_id")?,
        status: parse_named(
            "operation_run_target.status",
            &row.text("status")?,
            TargetStatus::parse,
        )?,
        message: row.opt_text("message")?.unwrap_or_default(),
        retry_after: row.opt_ts("retry_after")?,
        retry_state: retry_state_from_row(row)?,
        created_at: row.ts("created_at")?,
        updated_at: row.ts("updated_at")?,
    })
}

/// The spec treats a malformed retry state as "first block" (§5.6), so an
/// undecodable one reads as `None` instead of failing the whole listing.
fn retry_state_from_row(row: &impl RowReader) -> StoreResult<Option<RetryState>> {
    let Some(value) = row.opt_json_value("retry_state")? else {
        return Ok(None);
    };
    match serde_json::from_value(value) {
        Ok(state) => Ok(Some(state)),
        Err(e) => {
            tracing::warn!(error = %e, "ignoring malformed operation_run_target.retry_state");
            Ok(None)
        }
    }
}

/// Inserts the run, then its targets, in one transaction. The store stamps
/// `created_at` / `updated_at` (one instant for all rows); targets are
/// attached to `run` whatever their own `operation_run_id` says.
/// Targets per INSERT statement: 13 parameters each stays far below
/// SQLite's 32,766-parameter limit.
const TARGET_INSERT_CHUNK: usize = 100;

pub(crate) async fn run_create<B: Backend>(
    backend: &B,
    run: &OperationRun,
    targets: &[OperationRunTarget],
) -> StoreResult<()> {
    let now = now();
    let config = &run.configuration;
    let insert = Sql::new(format!(
        "INSERT INTO operation_run ({RUN_COLUMNS}) VALUES \
         ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14, $15, $16)"
    ))
    .arg(run.id)
    .arg(run.name.as_str())
    .arg(non_empty(&run.description))
    .arg(run.status.as_str())
    .arg(run.reason.as_str())
    .arg(non_empty(&run.status_message))
    .arg(run.current_phase_index)
    .arg(run.total_phases)
    .arg(to_json("operation_run.selector", &config.selector)?)
    .arg(to_json("operation_run.options", &config.options)?)
    .arg(to_json(
        "operation_run.operation_template",
        &config.operation,
    )?)
    .arg(config.operation.operation_type.as_str())
    .arg(config.operation.code.as_str())
    .arg(now)
    .arg(run.started_at)
    .arg(run.finished_at);

    let mut tx = backend.begin().await?;
    tx.execute(insert).await.map_err(|e| {
        write_error(
            e,
            |_| format!("operation run id \"{}\"", run.id),
            || "referenced row".to_string(),
        )
    })?;
    // Duplicates are refused before writing, with the texts the unique
    // constraints would give: the batched inserts below cannot tell which
    // row of a statement broke a constraint.
    let mut racks = std::collections::HashSet::new();
    let mut sequences = std::collections::HashSet::new();
    let mut ids = std::collections::HashSet::new();
    for target in targets {
        if !ids.insert(target.id) {
            return Err(StoreError::AlreadyExists(format!(
                "operation run target id \"{}\"",
                target.id
            )));
        }
        if !racks.insert(target.rack_id) {
            return Err(StoreError::AlreadyExists(format!(
                "operation run target rack_id \"{}\" in run \"{}\"",
                target.rack_id, run.id
            )));
        }
        if !sequences.insert(target.sequence_index) {
            return Err(StoreError::AlreadyExists(format!(
                "operation run target sequence_index {} in run \"{}\"",
                target.sequence_index, run.id
            )));
        }
    }
    // Many rows per statement: one round trip per chunk instead of per
    // target (a 100-target run was 100 statements).
    for chunk in targets.chunks(TARGET_INSERT_CHUNK) {
        let mut insert = Sql::default();
        let mut rows = Vec::with_capacity(chunk.len());
        for target in chunk {
            let values = [
                insert.bind(target.id),
                insert.bind(run.id),
                insert.bind(target.rack_id),
                insert.bind(target.sequence_index),
                insert.bind(target.phase_index),
                insert.bind(to_json(
                    "operation_run_target.components_by_type",
                    &target.components_by_type,
                )?),
                insert.bind(target.task_id),
                insert.bind(target.status.as_str()),
                insert.bind(non_empty(&target.message)),
                insert.bind(target.retry_after),
                insert.bind(
                    target
                        .retry_state
                        .as_ref()
                        .map(|s| to_json("operation_run_target.retry_state", s))
                        .transpose()?,
                ),
                insert.bind(now),
                insert.bind(now),
            ];
            rows.push(format!("({})", values.join(", ")));
        }
        let text = format!(
            "INSERT INTO operation_run_target ({TARGET_COLUMNS}) VALUES {}",
            rows.join(", ")
        );
        insert = Sql {
            text,
            args: insert.args,
        };
        tx.execute(insert).await.map_err(|e| {
            write_error(
                e,
                |_| format!("operation run target of run \"{}\"", run.id),
                // The run was inserted just before: only a task can be missing.
                || match chunk.iter().find_map(|t| t.task_id) {
                    Some(task_id) => format!("task {task_id}"),
                    None => format!("operation run \"{}\"", run.id),
                },
            )
        })?;
    }
    tx.commit().await?;
    crate::inventory::refresh_statistics(backend, &["operation_run_target"]).await;
    Ok(())
}

pub(crate) async fn run_get<B: Backend>(
    backend: &B,
    id: Uuid,
) -> StoreResult<Option<OperationRun>> {
    let sql = Sql::new(format!(
        "SELECT {RUN_COLUMNS} FROM operation_run WHERE id = $1"
    ))
    .arg(id);
    let rows = backend.fetch_all(sql).await?;
    rows.first().map(run_from_row).transpose()
}

/// The `states` condition: entries deduplicated, then grouped — statuses
/// alone in one `IN`, reasons alone in one `IN`, (status, reason) pairs
/// each — so that thousands of entries make a short statement (SQLite
/// refuses an expression tree deeper than 1,000). An entry with neither
/// field (which validation refuses) matches everything: no condition.
fn states_condition(sql: &mut Sql, states: &[StateFilter]) -> Option<String> {
    let entries: BTreeSet<(Option<&str>, Option<&str>)> = states
        .iter()
        .map(|s| (s.status.map(|x| x.as_str()), s.reason.map(|x| x.as_str())))
        .collect();
    if entries.is_empty() || entries.contains(&(None, None)) {
        return None;
    }
    let statuses: Vec<&str> = entries
        .iter()
        .filter_map(|e| match e {
            (Some(status), None) => Some(*status),
            _ => None,
        })
        .collect();
    let reasons: Vec<&str> = entries
        .iter()
        .filter_map(|e| match e {
            (None, Some(reason)) => Some(*reason),
            _ => None,
        })
        .collect();
    let mut groups = Vec::new();
    if !statuses.is_empty() {
        groups.push(format!("status IN {}", sql.bind_list(statuses)));
    }
    if !reasons.is_empty() {
        groups.push(format!("status_reason IN {}", sql.bind_list(reasons)));
    }
    for entry in &entries {
        if let (Some(status), Some(reason)) = entry {
            groups.push(format!(
                "(status = {} AND status_reason = {})",
                sql.bind(*status),
                sql.bind(*reason)
            ));
        }
    }
    Some(balanced_join(&groups, "OR"))
}

/// The `kinds` condition: entries deduplicated and grouped by operation
/// type (a type without a code takes every code of that type), one `IN` of
/// codes per type.
fn kinds_condition(sql: &mut Sql, kinds: &[KindFilter]) -> Option<String> {
    // type → its codes; `None` = any code.
    let mut by_type: BTreeMap<&str, Option<BTreeSet<&str>>> = BTreeMap::new();
    for kind in kinds {
        let codes = by_type
            .entry(kind.operation_type.as_str())
            .or_insert_with(|| Some(BTreeSet::new()));
        match (&kind.code, codes.as_mut()) {
            (None, _) => *codes = None,
            (Some(code), Some(set)) => {
                set.insert(code.as_str());
            }
            (Some(_), None) => {}
        }
    }
    if by_type.is_empty() {
        return None;
    }
    let any_code: Vec<&str> = by_type
        .iter()
        .filter(|(_, codes)| codes.is_none())
        .map(|(ty, _)| *ty)
        .collect();
    let mut groups = Vec::new();
    if !any_code.is_empty() {
        groups.push(format!("operation_type IN {}", sql.bind_list(any_code)));
    }
    for (ty, codes) in &by_type {
        if let Some(codes) = codes {
            groups.push(format!(
                "(operation_type = {} AND operation_code IN {})",
                sql.bind(*ty),
                sql.bind_list(codes.iter().copied())
            ));
        }
    }
    Some(balanced_join(&groups, "OR"))
}

pub(crate) async fn run_list<B: Backend>(
    backend: &B,
    filter: &RunListFilter,
    page: Page,
) -> StoreResult<(Vec<OperationRun>, i64)> {
    let mut cond = Conditions::default();
    if let Some(name) = crate::backend::text_condition::<B>(&mut cond.sql, "name", &filter.name) {
        cond.add(name);
    }
    if let Some(states) = states_condition(&mut cond.sql, &filter.states) {
        cond.add(states);
    }
    if let Some(kinds) = kinds_condition(&mut cond.sql, &filter.kinds) {
        cond.add(kinds);
    }
    let total = fetch_count(backend, cond.count("operation_run")).await?;
    if total == 0 {
        return Ok((Vec::new(), 0));
    }
    let rows = backend
        .fetch_all(cond.page(
            RUN_COLUMNS,
            "operation_run",
            "created_at DESC, id DESC",
            page,
        ))
        .await?;
    let runs = rows.iter().map(run_from_row).collect::<StoreResult<_>>()?;
    Ok((runs, total))
}

pub(crate) async fn run_targets_list<B: Backend>(
    backend: &B,
    query: &TargetQuery,
) -> StoreResult<(Vec<OperationRunTarget>, i64)> {
    let mut cond = Conditions::default();
    let run = cond.sql.bind(query.operation_run_id);
    cond.add(format!("operation_run_id = {run}"));
    if let Some(status) = query.status {
        let status = cond.sql.bind(status.as_str());
        cond.add(format!("status = {status}"));
    }
    let comparison = match query.phase_scope {
        PhaseScope::Current => Some("="),
        PhaseScope::Completed => Some("<"),
        PhaseScope::CurrentAndCompleted => Some("<="),
        PhaseScope::All => None,
    };
    if let Some(op) = comparison {
        let current = cond.sql.bind(query.current_phase_index);
        cond.add(format!("phase_index {op} {current}"));
    }
    let total = fetch_count(backend, cond.count("operation_run_target")).await?;
    if total == 0 {
        return Ok((Vec::new(), 0));
    }
    let rows = backend
        .fetch_all(cond.page(
            TARGET_COLUMNS,
            "operation_run_target",
            "phase_index ASC, sequence_index ASC",
            query.page,
        ))
        .await?;
    let targets = rows
        .iter()
        .map(target_from_row)
        .collect::<StoreResult<_>>()?;
    Ok((targets, total))
}

/// The statement writing a target's dispatch state with `updated_at`.
fn target_update_sql(target: &OperationRunTarget, updated_at: DateTime<Utc>) -> StoreResult<Sql> {
    Ok(Sql::new(
        "UPDATE operation_run_target SET task_id = $2, status = $3, message = $4, \
         retry_after = $5, retry_state = $6, updated_at = $7 WHERE id = $1",
    )
    .arg(target.id)
    .arg(target.task_id)
    .arg(target.status.as_str())
    .arg(non_empty(&target.message))
    .arg(target.retry_after)
    .arg(
        target
            .retry_state
            .as_ref()
            .map(|s| to_json("operation_run_target.retry_state", s))
            .transpose()?,
    )
    .arg(updated_at))
}

/// Runs [`target_update_sql`]: a missing row answers `NotFound`
/// (`operation run target <id>`), a `task_id` naming no task `NotFound`
/// (`task <id>`).
pub(crate) async fn write_target<T: Txn>(
    tx: &mut T,
    target: &OperationRunTarget,
    updated_at: DateTime<Utc>,
) -> StoreResult<()> {
    let updated = tx
        .execute(target_update_sql(target, updated_at)?)
        .await
        .map_err(|e| {
            write_error(
                e,
                |_| format!("operation run target id \"{}\"", target.id),
                || format!("task {}", target.task_id.unwrap_or_default()),
            )
        })?;
    if updated == 0 {
        return Err(StoreError::NotFound(format!(
            "operation run target {}",
            target.id
        )));
    }
    Ok(())
}

/// Writes a target's dispatch state, stamping `updated_at` with the store's
/// clock (the triggers of both dialects keep a value the statement sets).
pub(crate) async fn run_target_update<B: Backend>(
    backend: &B,
    target: &OperationRunTarget,
) -> StoreResult<()> {
    let mut tx = backend.begin().await?;
    write_target(&mut tx, target, now()).await?;
    tx.commit().await?;
    Ok(())
}

pub(crate) async fn run_ids_runnable<B: Backend>(
    backend: &B,
    limit: i64,
) -> StoreResult<Vec<Uuid>> {
    if limit <= 0 {
        return Ok(Vec::new());
    }
    let sql = Sql::new(
        "SELECT id FROM operation_run WHERE status IN ('pending', 'running') \
         ORDER BY updated_at ASC, id ASC LIMIT $1",
    )
    .arg(limit);
    backend
        .fetch_all(sql)
        .await?
        .iter()
        .map(|row| row.uuid("id"))
        .collect()
}

pub(crate) async fn run_current_targets<B: Backend>(
    backend: &B,
    run_id: Uuid,
) -> StoreResult<Vec<OperationRunTarget>> {
    let sql = Sql::new(format!(
        "SELECT {TARGET_COLUMNS} FROM operation_run_target WHERE operation_run_id = $1 \
         AND phase_index = (SELECT current_phase_index FROM operation_run WHERE id = $1) \
         ORDER BY sequence_index ASC"
    ))
    .arg(run_id);
    backend
        .fetch_all(sql)
        .await?
        .iter()
        .map(target_from_row)
        .collect()
}

/// See [`crate::Store::run_lock_apply`]. The transaction is committed only
/// after `apply` and every write succeeded; any other way out rolls back
/// explicitly, releasing the locks at once.
pub(crate) async fn run_lock_apply<'a, B: Backend>(
    backend: &B,
    run_id: Uuid,
    mode: LockMode,
    apply: &'a mut (dyn for<'l> FnMut(&'l mut RunLock) -> StoreResult<()> + Send + 'a),
) -> StoreResult<Option<()>> {
    let mut tx = backend.begin().await?;
    match lock_apply_persist::<B>(&mut tx, run_id, mode, apply).await {
        Ok(Some(())) => {
            tx.commit().await?;
            Ok(Some(()))
        }
        Ok(None) => {
            tx.rollback().await?;
            Ok(None)
        }
        Err(e) => {
            if let Err(rollback) = tx.rollback().await {
                tracing::warn!(run = %run_id, error = %rollback, "rollback after a failed run lock attempt");
            }
            Err(e)
        }
    }
}

/// Steps 1–6 of [`crate::Store::run_lock_apply`] inside `tx`; `None` when
/// the run was not obtained.
async fn lock_apply_persist<'a, B: Backend>(
    tx: &mut B::Tx,
    run_id: Uuid,
    mode: LockMode,
    apply: &'a mut (dyn for<'l> FnMut(&'l mut RunLock) -> StoreResult<()> + Send + 'a),
) -> StoreResult<Option<()>> {
    let lock_run = match mode {
        LockMode::Runnable => format!(
            "SELECT {RUN_COLUMNS} FROM operation_run \
             WHERE id = $1 AND status IN ('pending', 'running'){}",
            B::for_update(true)
        ),
        LockMode::Wait => format!(
            "SELECT {RUN_COLUMNS} FROM operation_run WHERE id = $1{}",
            B::for_update(false)
        ),
    };
    let rows = tx.fetch_all(Sql::new(lock_run).arg(run_id)).await?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let run = run_from_row(row)?;
    let phase = run.current_phase_index;

    // The child tasks' states come with the targets (an outer join, so the
    // statement costs what the target read alone did); only the target rows
    // are locked. Pending targets only up to the claim window, in sequence
    // order: no attempt claims more, and a large run's per-slot attempt
    // would otherwise read (and decode) every remaining row.
    let qualified: Vec<String> = TARGET_COLUMNS
        .split(", ")
        .map(|column| format!("t.{column} AS {column}"))
        .collect();
    let row_lock = match B::for_update(false) {
        "" => String::new(),
        clause => format!("{clause} OF t"),
    };
    let select_targets = |statuses: &str, limit: &str| {
        Sql::new(format!(
            "SELECT {}, k.status AS task_status, k.message AS task_message \
             FROM operation_run_target t LEFT JOIN task k ON k.id = t.task_id \
             WHERE t.operation_run_id = $1 AND t.phase_index = $2 AND {statuses} \
             ORDER BY t.sequence_index ASC{limit}{row_lock}",
            qualified.join(", ")
        ))
        .arg(run_id)
        .arg(phase)
    };
    let mut targets = Vec::new();
    let mut task_states = std::collections::HashMap::new();
    let active = tx
        .fetch_all(select_targets(
            &format!("t.status NOT IN {SETTLED} AND t.status <> 'pending'"),
            "",
        ))
        .await?;
    load_locked(&active, &mut targets, &mut task_states)?;
    let window = rackflow_domain::dispatch::claim_window(&run, &targets, &task_states, now());
    let pending = match window {
        Some(window) => select_targets("t.status = 'pending'", " LIMIT $3").arg(window),
        None => select_targets("t.status = 'pending'", ""),
    };
    load_locked(
        &tx.fetch_all(pending).await?,
        &mut targets,
        &mut task_states,
    )?;
    targets.sort_by_key(|t| t.sequence_index);
    let (earlier, mut settled, pending) = phase_aggregates::<B>(tx, run_id, phase).await?;
    // The pending targets past the window count as selected, not loaded.
    let loaded_pending = targets
        .iter()
        .filter(|t| t.status == TargetStatus::Pending)
        .count();
    settled.selected = settled
        .selected
        .saturating_add(i32::try_from(pending.saturating_sub(loaded_pending)).unwrap_or(i32::MAX));

    let mut lock = RunLock {
        run: run.clone(),
        targets: targets.clone(),
        settled,
        earlier,
        task_states,
        audit: Vec::new(),
    };
    apply(&mut lock)?;

    let now = now();
    // By id: a thousand targets in flight made a linear find per target
    // a million comparisons per attempt.
    let loaded_by_id: std::collections::HashMap<Uuid, &OperationRunTarget> =
        targets.iter().map(|t| (t.id, t)).collect();
    for target in &lock.targets {
        let Some(&loaded) = loaded_by_id.get(&target.id) else {
            return Err(StoreError::NotFound(format!(
                "locked operation run target {} of run {run_id}",
                target.id
            )));
        };
        if !target_state_changed(loaded, target) {
            continue;
        }
        write_target(tx, target, after(now, loaded.updated_at)).await?;
    }
    if mode == LockMode::Runnable || run_state_changed(&run, &lock.run) {
        let update = Sql::new(
            "UPDATE operation_run SET status = $2, status_reason = $3, status_message = $4, \
             current_phase_index = $5, started_at = $6, finished_at = $7, updated_at = $8 \
             WHERE id = $1",
        )
        .arg(run_id)
        .arg(lock.run.status.as_str())
        .arg(lock.run.reason.as_str())
        .arg(non_empty(&lock.run.status_message))
        .arg(lock.run.current_phase_index)
        .arg(lock.run.started_at)
        .arg(lock.run.finished_at)
        .arg(after(now, run.updated_at));
        if tx.execute(update).await? == 0 {
            return Err(StoreError::NotFound(format!("operation run {run_id}")));
        }
    }
    crate::audit::append_in(tx, &lock.audit).await?;
    Ok(Some(()))
}

/// Decodes locked target rows (with their child task's status and message)
/// into `targets` and `task_states`.
fn load_locked<R: RowReader>(
    rows: &[R],
    targets: &mut Vec<OperationRunTarget>,
    task_states: &mut std::collections::HashMap<Uuid, (TaskStatus, String)>,
) -> StoreResult<()> {
    for row in rows {
        let target = target_from_row(row)?;
        if let (Some(task_id), Some(status)) = (target.task_id, row.opt_text("task_status")?) {
            let status = parse_named("task.status", &status, TaskStatus::parse)?;
            let message = row.opt_text("task_message")?.unwrap_or_default();
            task_states.insert(task_id, (status, message));
        }
        targets.push(target);
    }
    Ok(())
}

/// Terminal target statuses: a settled target never changes again.
const SETTLED: &str = "('completed', 'failed', 'terminated', 'skipped')";

/// In one row of counts: the aggregate of the run's targets in phases
/// before `phase` (§3.4, §7.3), of the settled targets of `phase`, and the
/// number of its pending targets.
async fn phase_aggregates<B: Backend>(
    tx: &mut B::Tx,
    run_id: Uuid,
    phase: i32,
) -> StoreResult<(EarlierPhases, EarlierPhases, usize)> {
    let mut columns = vec![format!(
        "{} AS current_pending",
        B::count_where("phase_index = $2 AND status = 'pending'")
    )];
    for (prefix, scope) in [
        ("earlier", "phase_index < $2"),
        ("settled", "phase_index = $2"),
    ] {
        let selected = if prefix == "settled" {
            format!("{scope} AND status IN {SETTLED}")
        } else {
            scope.to_string()
        };
        columns.push(format!(
            "{} AS {prefix}_selected",
            B::count_where(&selected)
        ));
        for status in ["completed", "failed", "terminated", "skipped"] {
            columns.push(format!(
                "{} AS {prefix}_{status}",
                B::count_where(&format!("{scope} AND status = '{status}'"))
            ));
        }
    }
    let sql = Sql::new(format!(
        "SELECT {} FROM operation_run_target WHERE operation_run_id = $1 AND phase_index <= $2",
        columns.join(", ")
    ))
    .arg(run_id)
    .arg(phase);
    let rows = tx.fetch_all(sql).await?;
    let Some(row) = rows.first() else {
        return Ok((EarlierPhases::default(), EarlierPhases::default(), 0));
    };
    let count = |col: &'static str| -> StoreResult<i32> {
        Ok(i32::try_from(row.i64(col)?).unwrap_or(i32::MAX))
    };
    let earlier = EarlierPhases {
        selected: count("earlier_selected")?,
        completed: count("earlier_completed")?,
        failed: count("earlier_failed")?,
        terminated: count("earlier_terminated")?,
        skipped: count("earlier_skipped")?,
    };
    let settled = EarlierPhases {
        selected: count("settled_selected")?,
        completed: count("settled_completed")?,
        failed: count("settled_failed")?,
        terminated: count("settled_terminated")?,
        skipped: count("settled_skipped")?,
    };
    let pending = usize::try_from(row.i64("current_pending")?).unwrap_or(0);
    Ok((earlier, settled, pending))
}

/// Whether a target's written columns differ (what else `apply` may have
/// changed is not stored by a dispatch write).
fn target_state_changed(loaded: &OperationRunTarget, now: &OperationRunTarget) -> bool {
    loaded.task_id != now.task_id
        || loaded.status != now.status
        || loaded.message != now.message
        || loaded.retry_after != now.retry_after
        || loaded.retry_state != now.retry_state
}

/// Whether a run's written columns differ.
fn run_state_changed(loaded: &OperationRun, now: &OperationRun) -> bool {
    loaded.status != now.status
        || loaded.reason != now.reason
        || loaded.status_message != now.status_message
        || loaded.current_phase_index != now.current_phase_index
        || loaded.started_at != now.started_at
        || loaded.finished_at != now.finished_at
}

/// The `updated_at` of a row written at `now` whose previous value was
/// `previous`: the store's clock, but strictly later than `previous` (a
/// write within the same microsecond, or after a clock step back, still
/// moves the row in `updated_at` order).
fn after(now: DateTime<Utc>, previous: DateTime<Utc>) -> DateTime<Utc> {
    now.max(micros(previous) + chrono::Duration::microseconds(1))
}
