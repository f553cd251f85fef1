//! Counts by status for the metrics endpoint: one grouped read per table,
//! kept to rows that can still change (the unfinished runs' targets, the
//! unfinished tasks; their partial indexes serve them), so a scrape stays
//! cheap however long the history grows. Operation runs are few; all count.

use rackflow_domain::run::{RunStatus, TargetStatus};
use rackflow_domain::task::{TaskStatus, TaskType};

use crate::StoreResult;
use crate::backend::Backend;
use crate::sql::{RowReader, Sql, parse_named};

/// What [`crate::Store::status_counts`] reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusCounts {
    /// Every operation run, by status.
    pub runs: Vec<(RunStatus, i64)>,
    /// The targets of pending, running and paused runs, by status.
    pub targets: Vec<(TargetStatus, i64)>,
    /// Waiting, pending and running tasks, by type and status.
    pub tasks: Vec<(TaskType, TaskStatus, i64)>,
}

pub(crate) async fn status_counts<B: Backend>(backend: &B) -> StoreResult<StatusCounts> {
    let runs = backend
        .fetch_all(Sql::new(
            "SELECT status, COUNT(*) AS n FROM operation_run GROUP BY status",
        ))
        .await?
        .iter()
        .map(|row| {
            let status = parse_named(
                "operation_run.status",
                &row.text("status")?,
                RunStatus::parse,
            )?;
            Ok((status, row.i64("n")?))
        })
        .collect::<StoreResult<_>>()?;
    let targets = backend
        .fetch_all(Sql::new(
            "SELECT t.status AS status, COUNT(*) AS n FROM operation_run_target t \
             JOIN operation_run r ON r.id = t.operation_run_id \
             WHERE r.status IN ('pending', 'running', 'paused') GROUP BY t.status",
        ))
        .await?
        .iter()
        .map(|row| {
            let status = parse_named(
                "operation_run_target.status",
                &row.text("status")?,
                TargetStatus::parse,
            )?;
            Ok((status, row.i64("n")?))
        })
        .collect::<StoreResult<_>>()?;
    let tasks = backend
        .fetch_all(Sql::new(
            "SELECT type, status, COUNT(*) AS n FROM task \
             WHERE status IN ('waiting', 'pending', 'running') GROUP BY type, status",
        ))
        .await?
        .iter()
        .map(|row| {
            let task_type = parse_named("task.type", &row.text("type")?, TaskType::parse)?;
            let status = parse_named("task.status", &row.text("status")?, TaskStatus::parse)?;
            Ok((task_type, status, row.i64("n")?))
        })
        .collect::<StoreResult<_>>()?;
    Ok(StatusCounts {
        runs,
        targets,
        tasks,
    })
}
