//! Operation rules and their rack associations: the rule half of
//! [`crate::Store`], written once for any [`Backend`].
//!
//! Mapping to the schema (flow-core §2.2, migrations 0003): an empty
//! description is NULL; the definition is the `rule_definition` JSON (serde
//! of [`RuleDefinition`]); "one default per (type, code)" is the partial
//! unique index `uq_operation_rules_default`.

use rackflow_domain::rule::{OperationRule, RackRuleAssociation, RuleDefinition};
use rackflow_domain::run::Page;
use rackflow_domain::task::TaskType;
use uuid::Uuid;

use crate::backend::{Backend, Txn, fetch_count, xact_lock};
use crate::sql::{
    Conditions, RowReader, Sql, UniqueKey, lock_key, non_empty, now, parse_named, to_json,
    write_error,
};
use crate::tasks::live_rack_exists;
use crate::{StoreError, StoreResult};

const RULE_COLUMNS: &str = "id, name, description, operation_type, operation_code, \
     rule_definition, is_default, created_at, updated_at";

const ASSOCIATION_COLUMNS: &str =
    "rack_id, operation_type, operation_code, rule_id, created_at, updated_at";

fn rule_from_row(row: &impl RowReader) -> StoreResult<OperationRule> {
    Ok(OperationRule {
        id: row.uuid("id")?,
        name: row.text("name")?,
        description: row.opt_text("description")?.unwrap_or_default(),
        operation_type: parse_named(
            "operation_rules.operation_type",
            &row.text("operation_type")?,
            TaskType::parse,
        )?,
        operation_code: row.text("operation_code")?,
        definition: row.json("rule_definition")?,
        is_default: row.bool("is_default")?,
        created_at: row.ts("created_at")?,
        updated_at: row.ts("updated_at")?,
    })
}

fn association_from_row(row: &impl RowReader) -> StoreResult<RackRuleAssociation> {
    Ok(RackRuleAssociation {
        rack_id: row.uuid("rack_id")?,
        operation_type: parse_named(
            "rack_rule_associations.operation_type",
            &row.text("operation_type")?,
            TaskType::parse,
        )?,
        operation_code: row.text("operation_code")?,
        rule_id: row.uuid("rule_id")?,
        created_at: row.ts("created_at")?,
        updated_at: row.ts("updated_at")?,
    })
}

fn first_rule<R: RowReader>(rows: &[R]) -> StoreResult<Option<OperationRule>> {
    rows.first().map(rule_from_row).transpose()
}

/// Serialises the default switches of one (type, code) on PostgreSQL, so
/// two concurrent [`rule_set_default`]s cannot both unset and then collide
/// on the unique index.
fn default_lock(task_type: &str, code: &str) -> i64 {
    lock_key("rule-default", format!("{task_type}\0{code}").as_bytes())
}

fn default_exists(task_type: &str, code: &str) -> String {
    format!("a default rule for ({task_type}, {code})")
}

pub(crate) async fn rule_create<B: Backend>(backend: &B, rule: &OperationRule) -> StoreResult<()> {
    let now = now();
    let task_type = rule.operation_type.as_str();
    let insert = Sql::new(format!(
        "INSERT INTO operation_rules ({RULE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)"
    ))
    .arg(rule.id)
    .arg(rule.name.as_str())
    .arg(non_empty(&rule.description))
    .arg(task_type)
    .arg(rule.operation_code.as_str())
    .arg(to_json(
        "operation_rules.rule_definition",
        &rule.definition,
    )?)
    .arg(rule.is_default)
    .arg(now);
    let mut tx = backend.begin().await?;
    if rule.is_default {
        xact_lock::<B>(&mut tx, default_lock(task_type, &rule.operation_code)).await?;
    }
    tx.execute(insert).await.map_err(|e| {
        write_error(
            e,
            |key| match key {
                Some(UniqueKey::RuleDefault) => default_exists(task_type, &rule.operation_code),
                _ => format!("operation rule id \"{}\"", rule.id),
            },
            || "referenced row".to_string(),
        )
    })?;
    tx.commit().await?;
    Ok(())
}

pub(crate) async fn rule_update<B: Backend>(
    backend: &B,
    id: Uuid,
    name: Option<&str>,
    description: Option<&str>,
    definition: Option<&RuleDefinition>,
) -> StoreResult<Option<OperationRule>> {
    let mut sql = Sql::default();
    let mut sets = vec![format!("updated_at = {}", sql.bind(now()))];
    if let Some(name) = name {
        sets.push(format!("name = {}", sql.bind(name)));
    }
    if let Some(description) = description {
        sets.push(format!(
            "description = {}",
            sql.bind(non_empty(description))
        ));
    }
    if let Some(definition) = definition {
        let json = to_json("operation_rules.rule_definition", definition)?;
        sets.push(format!("rule_definition = {}", sql.bind(json)));
    }
    let id_param = sql.bind(id);
    sql.push(&format!(
        "UPDATE operation_rules SET {} WHERE id = {id_param} RETURNING {RULE_COLUMNS}",
        sets.join(", ")
    ));
    first_rule(&backend.fetch_all(sql).await?)
}

pub(crate) async fn rule_delete<B: Backend>(backend: &B, id: Uuid) -> StoreResult<bool> {
    let mut tx = backend.begin().await?;
    let deleted = tx
        .execute(Sql::new("DELETE FROM operation_rules WHERE id = $1").arg(id))
        .await?;
    tx.commit().await?;
    Ok(deleted > 0)
}

pub(crate) async fn rule_get<B: Backend>(
    backend: &B,
    id: Uuid,
) -> StoreResult<Option<OperationRule>> {
    let sql = Sql::new(format!(
        "SELECT {RULE_COLUMNS} FROM operation_rules WHERE id = $1"
    ))
    .arg(id);
    first_rule(&backend.fetch_all(sql).await?)
}

pub(crate) async fn rule_list<B: Backend>(
    backend: &B,
    task_type: Option<TaskType>,
    is_default: Option<bool>,
    page: Page,
) -> StoreResult<(Vec<OperationRule>, i64)> {
    let mut cond = Conditions::default();
    if let Some(task_type) = task_type {
        let t = cond.sql.bind(task_type.as_str());
        cond.add(format!("operation_type = {t}"));
    }
    if let Some(is_default) = is_default {
        let d = cond.sql.bind(is_default);
        cond.add(format!("is_default = {d}"));
    }
    let total = fetch_count(backend, cond.count("operation_rules")).await?;
    if total == 0 {
        return Ok((Vec::new(), 0));
    }
    let rows = backend
        .fetch_all(cond.page(
            RULE_COLUMNS,
            "operation_rules",
            "created_at DESC, id DESC",
            page,
        ))
        .await?;
    let rules = rows.iter().map(rule_from_row).collect::<StoreResult<_>>()?;
    Ok((rules, total))
}

pub(crate) async fn rule_set_default<B: Backend>(backend: &B, id: Uuid) -> StoreResult<bool> {
    let mut tx = backend.begin().await?;
    let rows = tx
        .fetch_all(
            Sql::new("SELECT operation_type, operation_code FROM operation_rules WHERE id = $1")
                .arg(id),
        )
        .await?;
    let Some(row) = rows.first() else {
        tx.rollback().await?;
        return Ok(false);
    };
    let task_type = row.text("operation_type")?;
    let code = row.text("operation_code")?;
    xact_lock::<B>(&mut tx, default_lock(&task_type, &code)).await?;
    let now = now();
    tx.execute(
        Sql::new(
            "UPDATE operation_rules SET is_default = $1, updated_at = $2 \
             WHERE operation_type = $3 AND operation_code = $4 AND is_default AND id <> $5",
        )
        .arg(false)
        .arg(now)
        .arg(task_type.as_str())
        .arg(code.as_str())
        .arg(id),
    )
    .await?;
    let set = tx
        .execute(
            Sql::new(
                "UPDATE operation_rules SET is_default = $1, updated_at = $2 \
                 WHERE id = $3 AND NOT is_default",
            )
            .arg(true)
            .arg(now)
            .arg(id),
        )
        .await
        .map_err(|e| {
            write_error(
                e,
                |_| default_exists(&task_type, &code),
                || "referenced row".to_string(),
            )
        })?;
    if set == 0 {
        // Already the default (or deleted meanwhile: the next read tells).
        tx.rollback().await?;
        return Ok(rule_get(backend, id).await?.is_some());
    }
    tx.commit().await?;
    Ok(true)
}

pub(crate) async fn rule_default_for<B: Backend>(
    backend: &B,
    task_type: TaskType,
    code: &str,
) -> StoreResult<Option<OperationRule>> {
    let sql = Sql::new(format!(
        "SELECT {RULE_COLUMNS} FROM operation_rules \
         WHERE operation_type = $1 AND operation_code = $2 AND is_default"
    ))
    .arg(task_type.as_str())
    .arg(code);
    first_rule(&backend.fetch_all(sql).await?)
}

pub(crate) async fn rule_associate<B: Backend>(
    backend: &B,
    rack_id: Uuid,
    rule_id: Uuid,
) -> StoreResult<()> {
    let mut tx = backend.begin().await?;
    if !live_rack_exists(&mut tx, rack_id).await? {
        tx.rollback().await?;
        return Err(StoreError::NotFound(format!("rack {rack_id}")));
    }
    // Type and code come from the rule; no row selected = no such rule.
    let upsert = Sql::new(
        "INSERT INTO rack_rule_associations \
         (rack_id, operation_type, operation_code, rule_id, created_at, updated_at) \
         SELECT $1, operation_type, operation_code, id, $3, $3 FROM operation_rules \
         WHERE id = $2 \
         ON CONFLICT (rack_id, operation_type, operation_code) DO UPDATE \
         SET rule_id = excluded.rule_id, updated_at = excluded.updated_at",
    )
    .arg(rack_id)
    .arg(rule_id)
    .arg(now());
    let affected = tx.execute(upsert).await.map_err(|e| {
        write_error(
            e,
            |_| format!("rack rule association of rack {rack_id}"),
            || format!("operation rule {rule_id}"),
        )
    })?;
    if affected == 0 {
        tx.rollback().await?;
        return Err(StoreError::NotFound(format!("operation rule {rule_id}")));
    }
    tx.commit().await?;
    Ok(())
}

pub(crate) async fn rule_disassociate<B: Backend>(
    backend: &B,
    rack_id: Uuid,
    task_type: TaskType,
    code: &str,
) -> StoreResult<()> {
    let mut tx = backend.begin().await?;
    tx.execute(
        Sql::new(
            "DELETE FROM rack_rule_associations \
             WHERE rack_id = $1 AND operation_type = $2 AND operation_code = $3",
        )
        .arg(rack_id)
        .arg(task_type.as_str())
        .arg(code),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

pub(crate) async fn rule_association_get<B: Backend>(
    backend: &B,
    rack_id: Uuid,
    task_type: TaskType,
    code: &str,
) -> StoreResult<Option<RackRuleAssociation>> {
    let sql = Sql::new(format!(
        "SELECT {ASSOCIATION_COLUMNS} FROM rack_rule_associations \
         WHERE rack_id = $1 AND operation_type = $2 AND operation_code = $3"
    ))
    .arg(rack_id)
    .arg(task_type.as_str())
    .arg(code);
    let rows = backend.fetch_all(sql).await?;
    rows.first().map(association_from_row).transpose()
}

pub(crate) async fn rule_associations_for_racks<B: Backend>(
    backend: &B,
    rack_ids: &[Uuid],
    task_type: TaskType,
    code: &str,
) -> StoreResult<Vec<RackRuleAssociation>> {
    let mut associations = Vec::new();
    for chunk in rack_ids.chunks(crate::sql::ID_CHUNK) {
        let mut sql = Sql::default();
        let list = sql.bind_list(chunk.iter().copied());
        let operation_type = sql.bind(task_type.as_str());
        let operation_code = sql.bind(code);
        sql.push(&format!(
            "SELECT {ASSOCIATION_COLUMNS} FROM rack_rule_associations \
             WHERE rack_id IN {list} AND operation_type = {operation_type} \
             AND operation_code = {operation_code}"
        ));
        for row in backend.fetch_all(sql).await? {
            associations.push(association_from_row(&row)?);
        }
    }
    Ok(associations)
}

pub(crate) async fn rule_associations_list<B: Backend>(
    backend: &B,
    rack_id: Uuid,
) -> StoreResult<Vec<RackRuleAssociation>> {
    let sql = Sql::new(format!(
        "SELECT {ASSOCIATION_COLUMNS} FROM rack_rule_associations WHERE rack_id = $1 \
         ORDER BY operation_type, operation_code"
    ))
    .arg(rack_id);
    let rows = backend.fetch_all(sql).await?;
    rows.iter().map(association_from_row).collect()
}
