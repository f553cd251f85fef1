//! Task schedules and their scopes: the schedule half of [`crate::Store`],
//! written once for any [`Backend`].
//!
//! Mapping to the schema (flow-core §2.2, migrations 0006): the spec is
//! `spec_type` / `spec` / `timezone`; the operation template is the
//! `operation_template` JSON (serde of [`OperationTemplate`]); a scope's
//! component filter is NULL (whole rack) or the serde of
//! [`ComponentFilter`] (`{"kind":"types",…}` / `{"kind":"components",…}`);
//! an empty skip reason is NULL.
//!
//! Every change to a schedule after its creation goes through
//! [`schedule_lock_apply`]: one transaction that locks the row (`FOR UPDATE`,
//! or `FOR UPDATE SKIP LOCKED` re-checking "enabled and due" when the
//! dispatcher claims it; SQLite's write transaction serialises instead),
//! lets the caller decide, and writes what changed. That is what makes an
//! occurrence fire at most once across replicas: the claim and the advance
//! of `next_run_at` commit together.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rackflow_domain::run::Page;
use rackflow_domain::schedule::{
    OperationTemplate, OverlapPolicy, ScheduleScope, ScheduleSpec, SpecKind, TaskSchedule,
};
use rackflow_domain::target::ComponentFilter;
use rackflow_domain::task::TaskStatus;
use uuid::Uuid;

use crate::backend::{Backend, Txn, fetch_count};
use crate::sql::{Conditions, RowReader, Sql, non_empty, now, parse_named, to_json, write_error};
use crate::{ScheduleFilter, ScheduleLock, StoreResult};

const SCHEDULE_COLUMNS: &str = "id, name, spec_type, spec, timezone, operation_template, \
     overlap_policy, enabled, next_run_at, last_run_at, catchup_window_secs, skipped_count, \
     last_skip_reason, created_at, updated_at";

const SCOPE_COLUMNS: &str = "id, schedule_id, rack_id, component_filter, last_task_id, created_at";

fn schedule_from_row(row: &impl RowReader) -> StoreResult<TaskSchedule> {
    let template: OperationTemplate = row.json("operation_template")?;
    Ok(TaskSchedule {
        id: row.uuid("id")?,
        name: row.text("name")?,
        spec: ScheduleSpec {
            kind: parse_named(
                "task_schedule.spec_type",
                &row.text("spec_type")?,
                SpecKind::parse,
            )?,
            spec: row.text("spec")?,
            timezone: row.opt_text("timezone")?.unwrap_or_default(),
        },
        overlap_policy: parse_named(
            "task_schedule.overlap_policy",
            &row.text("overlap_policy")?,
            OverlapPolicy::parse,
        )?,
        enabled: row.bool("enabled")?,
        next_run_at: row.opt_ts("next_run_at")?,
        last_run_at: row.opt_ts("last_run_at")?,
        template,
        catchup_window_secs: row.i64("catchup_window_secs")?,
        skipped_count: row.i64("skipped_count")?,
        last_skip_reason: row.opt_text("last_skip_reason")?.unwrap_or_default(),
        created_at: row.ts("created_at")?,
        updated_at: row.ts("updated_at")?,
    })
}

fn scope_from_row(row: &impl RowReader) -> StoreResult<ScheduleScope> {
    let filter: Option<ComponentFilter> = row.opt_json("component_filter")?;
    Ok(ScheduleScope {
        id: row.uuid("id")?,
        schedule_id: row.uuid("schedule_id")?,
        rack_id: row.uuid("rack_id")?,
        filter,
        last_task_id: row.opt_uuid("last_task_id")?,
        created_at: row.ts("created_at")?,
    })
}

fn name_taken(name: &str) -> String {
    format!("task schedule name \"{name}\"")
}

fn filter_json(filter: &Option<ComponentFilter>) -> StoreResult<Option<serde_json::Value>> {
    filter
        .as_ref()
        .map(|f| to_json("task_schedule_scope.component_filter", f))
        .transpose()
}

fn insert_scope_sql(scope: &ScheduleScope, schedule_id: Uuid) -> StoreResult<Sql> {
    Ok(Sql::new(format!(
        "INSERT INTO task_schedule_scope ({SCOPE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)"
    ))
    .arg(scope.id)
    .arg(schedule_id)
    .arg(scope.rack_id)
    .arg(filter_json(&scope.filter)?)
    .arg(scope.last_task_id)
    .arg(now()))
}

async fn insert_scope<T: Txn>(
    tx: &mut T,
    scope: &ScheduleScope,
    schedule_id: Uuid,
) -> StoreResult<()> {
    let rack_id = scope.rack_id;
    tx.execute(insert_scope_sql(scope, schedule_id)?)
        .await
        .map_err(|e| {
            write_error(
                e,
                |_| format!("a scope for rack {rack_id} on schedule {schedule_id}"),
                || format!("rack {rack_id}"),
            )
        })?;
    Ok(())
}

pub(crate) async fn schedule_create<B: Backend>(
    backend: &B,
    schedule: &TaskSchedule,
    scopes: &[ScheduleScope],
) -> StoreResult<()> {
    let now = now();
    let insert = Sql::new(format!(
        "INSERT INTO task_schedule ({SCHEDULE_COLUMNS}) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14)"
    ))
    .arg(schedule.id)
    .arg(schedule.name.as_str())
    .arg(schedule.spec.kind.as_str())
    .arg(schedule.spec.spec.as_str())
    .arg(schedule.spec.timezone.as_str())
    .arg(to_json(
        "task_schedule.operation_template",
        &schedule.template,
    )?)
    .arg(schedule.overlap_policy.as_str())
    .arg(schedule.enabled)
    .arg(schedule.next_run_at)
    .arg(schedule.last_run_at)
    .arg(schedule.catchup_window_secs)
    .arg(schedule.skipped_count)
    .arg(non_empty(&schedule.last_skip_reason))
    .arg(now);
    let mut tx = backend.begin().await?;
    tx.execute(insert).await.map_err(|e| {
        write_error(
            e,
            |_| name_taken(&schedule.name),
            || "referenced row".to_string(),
        )
    })?;
    for scope in scopes {
        insert_scope(&mut tx, scope, schedule.id).await?;
    }
    tx.commit().await?;
    Ok(())
}

pub(crate) async fn schedule_get<B: Backend>(
    backend: &B,
    id: Uuid,
) -> StoreResult<Option<TaskSchedule>> {
    let sql = Sql::new(format!(
        "SELECT {SCHEDULE_COLUMNS} FROM task_schedule WHERE id = $1"
    ))
    .arg(id);
    backend
        .fetch_all(sql)
        .await?
        .first()
        .map(schedule_from_row)
        .transpose()
}

pub(crate) async fn schedule_list<B: Backend>(
    backend: &B,
    filter: &ScheduleFilter,
    page: Page,
) -> StoreResult<(Vec<TaskSchedule>, i64)> {
    let mut cond = Conditions::default();
    if let Some(rack_id) = filter.rack_id {
        let r = cond.sql.bind(rack_id);
        cond.add(format!(
            "EXISTS (SELECT 1 FROM task_schedule_scope s \
             WHERE s.schedule_id = task_schedule.id AND s.rack_id = {r})"
        ));
    }
    if filter.enabled_only {
        let t = cond.sql.bind(true);
        cond.add(format!("enabled = {t}"));
    }
    let total = fetch_count(backend, cond.count("task_schedule")).await?;
    if total == 0 {
        return Ok((Vec::new(), 0));
    }
    let rows = backend
        .fetch_all(cond.page(
            SCHEDULE_COLUMNS,
            "task_schedule",
            "created_at ASC, id ASC",
            page,
        ))
        .await?;
    let schedules = rows
        .iter()
        .map(schedule_from_row)
        .collect::<StoreResult<_>>()?;
    Ok((schedules, total))
}

pub(crate) async fn schedule_delete<B: Backend>(backend: &B, id: Uuid) -> StoreResult<bool> {
    let mut tx = backend.begin().await?;
    let deleted = tx
        .execute(Sql::new("DELETE FROM task_schedule WHERE id = $1").arg(id))
        .await?;
    tx.commit().await?;
    Ok(deleted > 0)
}

pub(crate) async fn schedule_scopes<B: Backend>(
    backend: &B,
    schedule_id: Uuid,
) -> StoreResult<Vec<ScheduleScope>> {
    let sql = Sql::new(format!(
        "SELECT {SCOPE_COLUMNS} FROM task_schedule_scope WHERE schedule_id = $1 \
         ORDER BY created_at ASC, id ASC"
    ))
    .arg(schedule_id);
    backend
        .fetch_all(sql)
        .await?
        .iter()
        .map(scope_from_row)
        .collect()
}

pub(crate) async fn schedule_scope_get<B: Backend>(
    backend: &B,
    scope_id: Uuid,
) -> StoreResult<Option<ScheduleScope>> {
    let sql = Sql::new(format!(
        "SELECT {SCOPE_COLUMNS} FROM task_schedule_scope WHERE id = $1"
    ))
    .arg(scope_id);
    backend
        .fetch_all(sql)
        .await?
        .first()
        .map(scope_from_row)
        .transpose()
}

pub(crate) async fn schedule_due_ids<B: Backend>(
    backend: &B,
    now: DateTime<Utc>,
    limit: i64,
) -> StoreResult<Vec<Uuid>> {
    if limit <= 0 {
        return Ok(Vec::new());
    }
    let sql = Sql::new(format!(
        "SELECT id FROM task_schedule WHERE enabled = $1 AND next_run_at IS NOT NULL \
         AND next_run_at <= $2 ORDER BY next_run_at ASC, id ASC LIMIT {limit}"
    ))
    .arg(true)
    .arg(now);
    backend
        .fetch_all(sql)
        .await?
        .iter()
        .map(|r| r.uuid("id"))
        .collect()
}

pub(crate) async fn schedule_next_due<B: Backend>(
    backend: &B,
) -> StoreResult<Option<DateTime<Utc>>> {
    let sql = Sql::new(
        "SELECT next_run_at FROM task_schedule WHERE enabled = $1 AND next_run_at IS NOT NULL \
         ORDER BY next_run_at ASC LIMIT 1",
    )
    .arg(true);
    match backend.fetch_all(sql).await?.first() {
        Some(row) => row.opt_ts("next_run_at"),
        None => Ok(None),
    }
}

pub(crate) async fn schedule_scope_set_last_task<B: Backend>(
    backend: &B,
    scope_id: Uuid,
    task_id: Uuid,
) -> StoreResult<()> {
    let mut tx = backend.begin().await?;
    tx.execute(
        Sql::new("UPDATE task_schedule_scope SET last_task_id = $1 WHERE id = $2")
            .arg(task_id)
            .arg(scope_id),
    )
    .await
    .map_err(|e| write_error(e, |_| "scope".to_string(), || format!("task {task_id}")))?;
    tx.commit().await?;
    Ok(())
}

pub(crate) async fn schedule_lock_apply<'a, B: Backend>(
    backend: &B,
    id: Uuid,
    claim_due: Option<DateTime<Utc>>,
    apply: &'a mut (dyn for<'l> FnMut(&'l mut ScheduleLock) -> StoreResult<()> + Send + 'a),
) -> StoreResult<Option<ScheduleLock>> {
    let mut tx = backend.begin().await?;
    match lock_apply_persist::<B>(&mut tx, id, claim_due, apply).await {
        Ok(Some(lock)) => {
            tx.commit().await?;
            Ok(Some(lock))
        }
        Ok(None) => {
            tx.rollback().await?;
            Ok(None)
        }
        Err(e) => {
            if let Err(rollback) = tx.rollback().await {
                tracing::warn!(schedule = %id, error = %rollback, "rollback after a failed schedule update");
            }
            Err(e)
        }
    }
}

async fn lock_apply_persist<'a, B: Backend>(
    tx: &mut B::Tx,
    id: Uuid,
    claim_due: Option<DateTime<Utc>>,
    apply: &'a mut (dyn for<'l> FnMut(&'l mut ScheduleLock) -> StoreResult<()> + Send + 'a),
) -> StoreResult<Option<ScheduleLock>> {
    let lock_sql = match claim_due {
        Some(now) => Sql::new(format!(
            "SELECT {SCHEDULE_COLUMNS} FROM task_schedule WHERE id = $1 AND enabled = $2 \
             AND next_run_at IS NOT NULL AND next_run_at <= $3{}",
            B::for_update(true)
        ))
        .arg(id)
        .arg(true)
        .arg(now),
        None => Sql::new(format!(
            "SELECT {SCHEDULE_COLUMNS} FROM task_schedule WHERE id = $1{}",
            B::for_update(false)
        ))
        .arg(id),
    };
    let rows = tx.fetch_all(lock_sql).await?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let loaded = schedule_from_row(row)?;
    let scopes = tx
        .fetch_all(
            Sql::new(format!(
                "SELECT {SCOPE_COLUMNS} FROM task_schedule_scope WHERE schedule_id = $1 \
                 ORDER BY created_at ASC, id ASC"
            ))
            .arg(id),
        )
        .await?
        .iter()
        .map(scope_from_row)
        .collect::<StoreResult<Vec<_>>>()?;
    let task_ids: Vec<Uuid> = scopes.iter().filter_map(|s| s.last_task_id).collect();
    let mut last_task_status = HashMap::new();
    if !task_ids.is_empty() {
        let mut sql = Sql::default();
        let list = sql.bind_list(task_ids.iter().copied());
        sql.push(&format!("SELECT id, status FROM task WHERE id IN {list}"));
        for row in tx.fetch_all(sql).await? {
            last_task_status.insert(
                row.uuid("id")?,
                parse_named("task.status", &row.text("status")?, TaskStatus::parse)?,
            );
        }
    }
    let mut lock = ScheduleLock {
        schedule: loaded.clone(),
        scopes: scopes.clone(),
        last_task_status,
    };
    apply(&mut lock)?;

    // Scopes: deleted, changed, new.
    for old in &scopes {
        match lock.scopes.iter().find(|s| s.id == old.id) {
            None => {
                tx.execute(Sql::new("DELETE FROM task_schedule_scope WHERE id = $1").arg(old.id))
                    .await?;
            }
            Some(new) if new.filter != old.filter || new.last_task_id != old.last_task_id => {
                tx.execute(
                    Sql::new(
                        "UPDATE task_schedule_scope SET component_filter = $1, last_task_id = $2 \
                         WHERE id = $3",
                    )
                    .arg(filter_json(&new.filter)?)
                    .arg(new.last_task_id)
                    .arg(old.id),
                )
                .await
                .map_err(|e| {
                    write_error(e, |_| "scope".to_string(), || "referenced task".to_string())
                })?;
            }
            Some(_) => {}
        }
    }
    for new in &lock.scopes {
        if !scopes.iter().any(|s| s.id == new.id) {
            insert_scope(tx, new, id).await?;
        }
    }

    let s = &lock.schedule;
    if *s != loaded || lock.scopes != scopes {
        let written = now().max(loaded.updated_at + chrono::TimeDelta::microseconds(1));
        let update = Sql::new(
            "UPDATE task_schedule SET name = $1, spec_type = $2, spec = $3, timezone = $4, \
             overlap_policy = $5, enabled = $6, next_run_at = $7, last_run_at = $8, \
             catchup_window_secs = $9, skipped_count = $10, last_skip_reason = $11, \
             updated_at = $12 WHERE id = $13",
        )
        .arg(s.name.as_str())
        .arg(s.spec.kind.as_str())
        .arg(s.spec.spec.as_str())
        .arg(s.spec.timezone.as_str())
        .arg(s.overlap_policy.as_str())
        .arg(s.enabled)
        .arg(s.next_run_at)
        .arg(s.last_run_at)
        .arg(s.catchup_window_secs)
        .arg(s.skipped_count)
        .arg(non_empty(&s.last_skip_reason))
        .arg(written)
        .arg(id);
        tx.execute(update).await.map_err(|e| {
            write_error(e, |_| name_taken(&s.name), || "referenced row".to_string())
        })?;
        lock.schedule.updated_at = crate::sql::micros(written);
    }
    Ok(Some(lock))
}
