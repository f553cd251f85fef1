//! Leak reports and events (issue 34): the leak half of [`crate::Store`],
//! written once for any [`Backend`].
//!
//! A report is applied in one transaction under a per-component lock
//! (PostgreSQL advisory lock; SQLite's single writer): the component's leak
//! status and observation time, then the event — opened, observed again or
//! closed. The partial unique index on open events per component is the
//! backstop that makes a report taken by two replicas at once one event.

use chrono::{DateTime, Utc};
use rackflow_domain::event_rule::Severity;
use rackflow_domain::inventory::LeakStatus;
use rackflow_domain::leak::{LeakEvent, LeakReport, LeakReported};
use rackflow_domain::run::Page;
use uuid::Uuid;

use crate::StoreResult;
use crate::backend::{Backend, Txn, fetch_count, xact_lock};
use crate::sql::{Conditions, RowReader, Sql, lock_key, now, parse_named};

const EVENT_COLUMNS: &str = "id, component_id, rack_id, source, severity, message, detected_at, \
     last_reported_at, observations, closed_at";

/// Which events a listing shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeakEventFilter {
    pub rack_id: Option<Uuid>,
    pub component_id: Option<Uuid>,
    /// Only events still open.
    pub open_only: bool,
}

fn event_from_row(row: &impl RowReader) -> StoreResult<LeakEvent> {
    Ok(LeakEvent {
        id: row.uuid("id")?,
        component_id: row.uuid("component_id")?,
        rack_id: row.opt_uuid("rack_id")?,
        source: row.text("source")?,
        severity: parse_named(
            "leak_events.severity",
            &row.text("severity")?,
            Severity::parse,
        )?,
        message: row.text("message")?,
        detected_at: row.ts("detected_at")?,
        last_reported_at: row.ts("last_reported_at")?,
        observations: row.i32("observations")?,
        closed_at: row.opt_ts("closed_at")?,
    })
}

async fn open_event<T: Txn>(tx: &mut T, component: Uuid) -> StoreResult<Option<LeakEvent>> {
    tx.fetch_all(
        Sql::new(format!(
            "SELECT {EVENT_COLUMNS} FROM leak_events WHERE component_id = $1 AND closed_at IS NULL"
        ))
        .arg(component),
    )
    .await?
    .first()
    .map(event_from_row)
    .transpose()
}

pub(crate) async fn leak_report<B: Backend>(
    backend: &B,
    report: &LeakReport,
) -> StoreResult<LeakReported> {
    let component = report.component_id;
    let mut tx = backend.begin().await?;
    xact_lock::<B>(&mut tx, lock_key("leak", component.as_bytes())).await?;
    let rows = tx
        .fetch_all(
            Sql::new(
                "SELECT rack_id, leak_observed_at FROM component \
                 WHERE id = $1 AND deleted_at IS NULL",
            )
            .arg(component),
        )
        .await?;
    let Some(row) = rows.first() else {
        tx.rollback().await?;
        return Ok(LeakReported::ComponentNotFound);
    };
    let rack_id = row.opt_uuid("rack_id")?;
    let latest: Option<DateTime<Utc>> = row.opt_ts("leak_observed_at")?;
    if latest.is_some_and(|latest| report.observed_at < latest) {
        tx.rollback().await?;
        return Ok(LeakReported::Stale);
    }
    let status = if report.detected {
        LeakStatus::Detected
    } else {
        LeakStatus::NotDetected
    };
    tx.execute(
        Sql::new("UPDATE component SET leak_status = $1, leak_observed_at = $2 WHERE id = $3")
            .arg(status.as_str())
            .arg(report.observed_at)
            .arg(component),
    )
    .await?;
    let open = open_event(&mut tx, component).await?;
    let outcome = match (report.detected, open) {
        (true, Some(event)) => {
            tx.execute(
                Sql::new(
                    "UPDATE leak_events SET observations = observations + 1, \
                     last_reported_at = $1 WHERE id = $2",
                )
                .arg(report.observed_at)
                .arg(event.id),
            )
            .await?;
            LeakReported::Repeat(LeakEvent {
                observations: event.observations + 1,
                last_reported_at: report.observed_at,
                ..event
            })
        }
        (true, None) => {
            let event = LeakEvent {
                id: Uuid::new_v4(),
                component_id: component,
                rack_id,
                source: report.source.clone(),
                severity: report.severity,
                message: report.message.clone(),
                detected_at: report.observed_at,
                last_reported_at: report.observed_at,
                observations: 1,
                closed_at: None,
            };
            tx.execute(
                Sql::new(format!(
                    "INSERT INTO leak_events ({EVENT_COLUMNS}, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
                ))
                .arg(event.id)
                .arg(component)
                .arg(rack_id)
                .arg(event.source.as_str())
                .arg(event.severity.as_str())
                .arg(event.message.as_str())
                .arg(event.detected_at)
                .arg(event.last_reported_at)
                .arg(1)
                .arg(None::<DateTime<Utc>>)
                .arg(now()),
            )
            .await?;
            LeakReported::New(event)
        }
        (false, Some(event)) => {
            let closed = now();
            tx.execute(
                Sql::new("UPDATE leak_events SET closed_at = $1 WHERE id = $2")
                    .arg(closed)
                    .arg(event.id),
            )
            .await?;
            LeakReported::Cleared(Some(LeakEvent {
                closed_at: Some(closed),
                ..event
            }))
        }
        (false, None) => LeakReported::Cleared(None),
    };
    tx.commit().await?;
    Ok(outcome)
}

pub(crate) async fn leak_events_list<B: Backend>(
    backend: &B,
    filter: &LeakEventFilter,
    page: Page,
) -> StoreResult<(Vec<LeakEvent>, i64)> {
    let mut cond = Conditions::default();
    if let Some(rack) = filter.rack_id {
        let r = cond.sql.bind(rack);
        cond.add(format!("rack_id = {r}"));
    }
    if let Some(component) = filter.component_id {
        let c = cond.sql.bind(component);
        cond.add(format!("component_id = {c}"));
    }
    if filter.open_only {
        cond.add("closed_at IS NULL".to_string());
    }
    let total = fetch_count(backend, cond.count("leak_events")).await?;
    if total == 0 {
        return Ok((Vec::new(), 0));
    }
    let rows = backend
        .fetch_all(cond.page(EVENT_COLUMNS, "leak_events", "detected_at DESC, id", page))
        .await?;
    let events = rows
        .iter()
        .map(event_from_row)
        .collect::<StoreResult<_>>()?;
    Ok((events, total))
}

/// Marks an event's response as run; false when it was already (or the
/// event is gone).
pub(crate) async fn leak_event_handled<B: Backend>(backend: &B, id: Uuid) -> StoreResult<bool> {
    let mut tx = backend.begin().await?;
    let updated = tx
        .execute(
            Sql::new("UPDATE leak_events SET handled_at = $1 WHERE id = $2 AND handled_at IS NULL")
                .arg(now())
                .arg(id),
        )
        .await?;
    tx.commit().await?;
    Ok(updated > 0)
}

/// Open events whose response has not run, stored at or before `before`,
/// oldest first.
pub(crate) async fn leak_events_unhandled<B: Backend>(
    backend: &B,
    before: DateTime<Utc>,
) -> StoreResult<Vec<LeakEvent>> {
    let sql = Sql::new(format!(
        "SELECT {EVENT_COLUMNS} FROM leak_events \
         WHERE handled_at IS NULL AND closed_at IS NULL AND created_at <= $1 \
         ORDER BY created_at, id LIMIT 1000"
    ))
    .arg(before);
    backend
        .fetch_all(sql)
        .await?
        .iter()
        .map(event_from_row)
        .collect()
}
