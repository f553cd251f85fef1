//! The audit trail's rows: appended by the API and inside a run's lock
//! transaction (its controls), listed oldest first by sequence number,
//! pruned by age.

use chrono::{DateTime, Utc};
use rackflow_domain::audit::{AuditEvent, CONTROL_RPCS, SYSTEM_RUN_ACTION_PREFIX};

use crate::backend::{Backend, Txn};
use crate::sql::{Conditions, RowReader, Sql, non_empty};
use crate::{AuditFilter, StoreResult};

const AUDIT_COLUMNS: &str = "seq, at, actor, action, run_id, subject_ids, summary, code, message";

/// The statement appending `event` (its `seq` is the store's).
fn insert(event: &AuditEvent) -> Sql {
    Sql::new(
        "INSERT INTO audit_event (at, actor, action, run_id, subject_ids, summary, code, message) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .arg(event.at)
    .arg(event.actor.as_str())
    .arg(event.action.as_str())
    .arg(event.run_id)
    .arg(non_empty(&event.subject_ids.join(",")))
    .arg(non_empty(&event.summary))
    .arg(event.code.as_str())
    .arg(non_empty(&event.message))
}

/// Appends `events` inside an open transaction (a run control's).
pub(crate) async fn append_in<T: Txn>(tx: &mut T, events: &[AuditEvent]) -> StoreResult<()> {
    for event in events {
        tx.execute(insert(event)).await?;
    }
    Ok(())
}

pub(crate) async fn audit_append<B: Backend>(
    backend: &B,
    events: &[AuditEvent],
) -> StoreResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    let mut tx = backend.begin().await?;
    append_in(&mut tx, events).await?;
    tx.commit().await?;
    Ok(())
}

pub(crate) async fn audit_list<B: Backend>(
    backend: &B,
    filter: &AuditFilter,
    limit: i64,
) -> StoreResult<Vec<AuditEvent>> {
    let mut cond = Conditions::default();
    if let Some(run_id) = filter.run_id {
        let r = cond.sql.bind(run_id);
        cond.add(format!("run_id = {r}"));
    }
    if let Some(since) = filter.since {
        let s = cond.sql.bind(since);
        cond.add(format!("at >= {s}"));
    }
    if let Some(actor) = &filter.actor {
        let a = cond.sql.bind(actor.as_str());
        cond.add(format!("actor = {a}"));
    }
    if let Some(after) = filter.after_seq {
        let a = cond.sql.bind(after);
        cond.add(format!(
            "seq {} {a}",
            if filter.newest_first { "<" } else { ">" }
        ));
    }
    if filter.controls_only {
        // The domain's definition of a control (AuditEvent::is_control).
        let prefix = cond.sql.bind(format!("{SYSTEM_RUN_ACTION_PREFIX}%"));
        let rpcs = cond.sql.bind_list(CONTROL_RPCS);
        cond.add(format!("(action LIKE {prefix} OR action IN {rpcs})"));
    }
    let order = if filter.newest_first { "DESC" } else { "ASC" };
    let limit = cond.sql.bind(limit.max(1));
    let text = format!(
        "SELECT {AUDIT_COLUMNS} FROM audit_event{} ORDER BY seq {order} LIMIT {limit}",
        cond.where_clause()
    );
    let mut sql = cond.sql;
    sql.text = text;
    let rows = backend.fetch_all(sql).await?;
    rows.iter().map(event_from_row).collect()
}

pub(crate) async fn audit_prune<B: Backend>(
    backend: &B,
    before: DateTime<Utc>,
) -> StoreResult<u64> {
    let mut tx = backend.begin().await?;
    let removed = tx
        .execute(Sql::new("DELETE FROM audit_event WHERE at < $1").arg(before))
        .await?;
    tx.commit().await?;
    Ok(removed)
}

fn event_from_row(row: &impl RowReader) -> StoreResult<AuditEvent> {
    Ok(AuditEvent {
        seq: row.i64("seq")?,
        at: row.ts("at")?,
        actor: row.text("actor")?,
        action: row.text("action")?,
        run_id: row.opt_uuid("run_id")?,
        subject_ids: row
            .opt_text("subject_ids")?
            .map(|ids| ids.split(',').map(str::to_string).collect())
            .unwrap_or_default(),
        summary: row.opt_text("summary")?.unwrap_or_default(),
        code: row.text("code")?,
        message: row.opt_text("message")?.unwrap_or_default(),
    })
}
