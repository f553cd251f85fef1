//! Operation runs and their targets: the run half of [`crate::Store`],
//! written once for any [`Backend`].
//!
//! Mapping to the schema (operation-runs §7): `description`,
//! `status_message` and a target's `message` are NULL when empty; the run's
//! configuration is the three JSON columns `selector`, `options` and
//! `operation_template` (serde of the domain types, §5.6), with
//! `operation_type` / `operation_code` copied from the template so they can
//! be filtered on.

use rackflow_domain::run::{
    NameQuery, OperationRun, OperationRunTarget, Page, PhaseScope, RetryState, RunConfiguration,
    RunListFilter, RunReason, RunStatus, TargetQuery, TargetStatus,
};
use uuid::Uuid;

use crate::backend::{Backend, Txn, fetch_count};
use crate::sql::{Conditions, RowReader, Sql, UniqueKey, non_empty, now, to_json, write_error};
use crate::{StoreError, StoreResult};

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

fn parse_named<T>(
    what: &'static str,
    text: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> StoreResult<T> {
    parse(text).ok_or_else(|| StoreError::Decode {
        what,
        detail: format!("unknown value {text:?}"),
    })
}

/// Inserts the run, then its targets, in one transaction. The store stamps
/// `created_at` / `updated_at` (one instant for all rows); targets are
/// attached to `run` whatever their own `operation_run_id` says.
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
    for target in targets {
        let insert = Sql::new(format!(
            "INSERT INTO operation_run_target ({TARGET_COLUMNS}) VALUES \
             ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)"
        ))
        .arg(target.id)
        .arg(run.id)
        .arg(target.rack_id)
        .arg(target.sequence_index)
        .arg(target.phase_index)
        .arg(to_json(
            "operation_run_target.components_by_type",
            &target.components_by_type,
        )?)
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
        .arg(now);
        tx.execute(insert).await.map_err(|e| {
            write_error(
                e,
                |key| match key {
                    Some(UniqueKey::TargetRunRack) => format!(
                        "operation run target rack_id \"{}\" in run \"{}\"",
                        target.rack_id, run.id
                    ),
                    Some(UniqueKey::TargetRunSequence) => format!(
                        "operation run target sequence_index {} in run \"{}\"",
                        target.sequence_index, run.id
                    ),
                    _ => format!("operation run target id \"{}\"", target.id),
                },
                || format!("operation run \"{}\"", run.id),
            )
        })?;
    }
    tx.commit().await?;
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

/// The name condition of §4.6 (with decision D6: several wildcard patterns
/// with `use_or` mean "any pattern matches", so the OR group is
/// parenthesised).
fn name_condition<B: Backend>(sql: &mut Sql, query: &NameQuery) -> Option<String> {
    match query.patterns.as_slice() {
        [] => None,
        [one] if query.is_wildcard => Some(B::like(sql, "name", &NameQuery::like_pattern(one))),
        [one] => Some(format!("name = {}", sql.bind(one.as_str()))),
        many if !query.is_wildcard => Some(format!(
            "name IN {}",
            sql.bind_list(many.iter().map(String::as_str))
        )),
        many => {
            let likes: Vec<String> = many
                .iter()
                .map(|p| B::like(sql, "name", &NameQuery::like_pattern(p)))
                .collect();
            let joiner = if query.use_or { " OR " } else { " AND " };
            Some(format!("({})", likes.join(joiner)))
        }
    }
}

/// `(a AND b) OR (c) …` over the entries; an entry with no set field (which
/// validation refuses) matches everything, as an empty AND would.
fn or_of_ands(entries: Vec<Vec<String>>) -> String {
    let groups: Vec<String> = entries
        .into_iter()
        .map(|parts| {
            if parts.is_empty() {
                "1 = 1".to_string()
            } else {
                format!("({})", parts.join(" AND "))
            }
        })
        .collect();
    format!("({})", groups.join(" OR "))
}

pub(crate) async fn run_list<B: Backend>(
    backend: &B,
    filter: &RunListFilter,
    page: Page,
) -> StoreResult<(Vec<OperationRun>, i64)> {
    let mut cond = Conditions::default();
    if let Some(name) = name_condition::<B>(&mut cond.sql, &filter.name) {
        cond.add(name);
    }
    if !filter.states.is_empty() {
        let entries = filter
            .states
            .iter()
            .map(|state| {
                let mut parts = Vec::new();
                if let Some(status) = state.status {
                    parts.push(format!("status = {}", cond.sql.bind(status.as_str())));
                }
                if let Some(reason) = state.reason {
                    parts.push(format!(
                        "status_reason = {}",
                        cond.sql.bind(reason.as_str())
                    ));
                }
                parts
            })
            .collect();
        let states = or_of_ands(entries);
        cond.add(states);
    }
    if !filter.kinds.is_empty() {
        let entries = filter
            .kinds
            .iter()
            .map(|kind| {
                let mut parts = vec![format!(
                    "operation_type = {}",
                    cond.sql.bind(kind.operation_type.as_str())
                )];
                if let Some(code) = &kind.code {
                    parts.push(format!("operation_code = {}", cond.sql.bind(code.as_str())));
                }
                parts
            })
            .collect();
        let kinds = or_of_ands(entries);
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
