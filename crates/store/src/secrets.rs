//! Sealed secrets in the stored JSON documents: found and re-sealed in
//! place for a key rotation. The store only walks the rows and writes what
//! the caller's function returns; it never sees a key or a plaintext.

use serde_json::Value;

use crate::backend::{Backend, Txn};
use crate::sql::{RowReader, Sql};
use crate::{ResealOutcome, StoreResult};

/// Where envelopes live: table, JSON column, path to the envelope.
const SEALED: &[(&str, &str, &[&str])] = &[
    ("task", "information", &["firmware", "authentication_data"]),
    (
        "operation_run",
        "operation_template",
        &["payload", "authentication_data"],
    ),
    (
        "task_schedule",
        "operation_template",
        &["information", "firmware", "authentication_data"],
    ),
];

/// Rows per read and per write transaction.
const PAGE: i64 = 500;

pub(crate) async fn secrets_reseal<'a, B: Backend>(
    backend: &'a B,
    reseal: &'a (dyn for<'s> Fn(&'s str) -> Result<Option<String>, String> + Send + Sync + 'a),
) -> StoreResult<ResealOutcome> {
    let mut outcome = ResealOutcome::default();
    for &(table, column, path) in SEALED {
        let mut after: Option<String> = None;
        loop {
            // CAST(… AS TEXT) reads JSONB (PostgreSQL) and TEXT (SQLite)
            // alike; the LIKE only narrows, the path decides.
            let mut sql = Sql::new(format!(
                "SELECT CAST(id AS TEXT) AS id, CAST({column} AS TEXT) AS body FROM {table} \
                 WHERE CAST({column} AS TEXT) LIKE '%authentication_data%'"
            ));
            if let Some(after) = &after {
                let a = sql.bind(after.as_str());
                sql.push(&format!(" AND CAST(id AS TEXT) > {a}"));
            }
            let limit = sql.bind(PAGE);
            sql.push(&format!(" ORDER BY CAST(id AS TEXT) LIMIT {limit}"));
            let rows = backend.fetch_all(sql).await?;
            let Some(last) = rows.last() else { break };
            after = Some(last.text("id")?);
            let mut writes = Vec::new();
            for row in &rows {
                let id = row.text("id")?;
                let body = row.text("body")?;
                let Ok(mut document) = serde_json::from_str::<Value>(&body) else {
                    continue;
                };
                let Some(Value::String(envelope)) = pointer_mut(&mut document, path) else {
                    continue;
                };
                match reseal(envelope) {
                    Ok(None) => outcome.already_current += 1,
                    Ok(Some(resealed)) => {
                        *envelope = resealed;
                        writes.push((id, body, document));
                    }
                    Err(why) => outcome.failures.push(format!("{table} {id}: {why}")),
                }
            }
            if !writes.is_empty() {
                let mut tx = backend.begin().await?;
                for (id, body, document) in writes {
                    // Only if the row is as read: a concurrent change keeps
                    // its own (older) envelope, reported as not re-sealed.
                    let update = Sql::new(format!(
                        "UPDATE {table} SET {column} = $1 \
                         WHERE CAST(id AS TEXT) = $2 AND CAST({column} AS TEXT) = $3"
                    ))
                    .arg(document)
                    .arg(id.as_str())
                    .arg(body);
                    if tx.execute(update).await? == 1 {
                        outcome.resealed += 1;
                    } else {
                        outcome.failures.push(format!(
                            "{table} {id}: changed during the rotation; run it again"
                        ));
                    }
                }
                tx.commit().await?;
            }
            if i64::try_from(rows.len()).unwrap_or(i64::MAX) < PAGE {
                break;
            }
        }
    }
    Ok(outcome)
}

fn pointer_mut<'a>(document: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    path.iter()
        .try_fold(document, |node, key| node.as_object_mut()?.get_mut(*key))
}
