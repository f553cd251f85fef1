//! Event rules and their bindings (issue 34): the event-rule half of
//! [`crate::Store`], written once for any [`Backend`].
//!
//! Mapping to the schema (migrations 0013): a rule's actions are the JSON of
//! `Vec<Action>`; a binding is `(event_type, scope_type, rack_id)` with the
//! rule id. Bindings are written under a per-event-type transaction lock
//! (PostgreSQL advisory lock; SQLite's single writer), so the checks that
//! make a binding conflict explicit — the scope taken, a rule mixing site
//! and rack scopes — see every committed binding; the partial unique
//! indexes stay the backstop.

use rackflow_domain::event_rule::{Action, Binding, EventRule, Scope};
use uuid::Uuid;

use crate::backend::{Backend, Txn, xact_lock};
use crate::sql::{RowReader, Sql, lock_key, now, to_json, write_error};
use crate::tasks::live_rack_exists;
use crate::{StoreError, StoreResult};

const RULE_COLUMNS: &str =
    "id, name, description, enabled, event_type, actions, created_at, updated_at";
const BINDING_COLUMNS: &str = "id, rule_id, event_type, scope_type, rack_id";

/// A change to a persisted rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventRuleUpdate {
    /// Replaces both name and description.
    Metadata {
        name: String,
        description: String,
    },
    /// Replaces the whole action list.
    Actions(Vec<Action>),
    Enabled(bool),
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventRuleDeleted {
    Deleted,
    NotFound,
    /// Refused: the rule is bound (unbind first).
    Bound(Vec<Binding>),
}

/// What a bind did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindOutcome {
    Created(Binding),
    RuleNotFound,
    RackNotFound,
    /// The scope has a rule for the event type already.
    ScopeTaken(Binding),
    /// The rule is bound to the other kind of scope already.
    MixedScopes(Binding),
}

fn rule_from_row(row: &impl RowReader) -> StoreResult<EventRule> {
    Ok(EventRule {
        id: row.uuid("id")?,
        name: row.text("name")?,
        description: row.text("description")?,
        enabled: row.bool("enabled")?,
        event_type: row.text("event_type")?,
        actions: row.json("actions")?,
        read_only: false,
        created_at: Some(row.ts("created_at")?),
        updated_at: Some(row.ts("updated_at")?),
    })
}

fn binding_from_row(row: &impl RowReader) -> StoreResult<Binding> {
    let scope = match (row.text("scope_type")?.as_str(), row.opt_uuid("rack_id")?) {
        ("site", None) => Scope::Site,
        ("rack", Some(rack)) => Scope::Rack(rack),
        (other, rack) => {
            return Err(StoreError::Decode {
                what: "event_rule_bindings.scope_type",
                detail: format!("scope {other:?} with rack {rack:?}"),
            });
        }
    };
    Ok(Binding {
        id: row.uuid("id")?,
        rule_id: row.uuid("rule_id")?,
        event_type: row.text("event_type")?,
        scope,
    })
}

fn scope_parts(scope: Scope) -> (&'static str, Option<Uuid>) {
    match scope {
        Scope::Site => ("site", None),
        Scope::Rack(rack) => ("rack", Some(rack)),
    }
}

/// `scope_type = $n AND rack_id = $m` (or `IS NULL` for the site).
fn scope_condition(sql: &mut Sql, scope: Scope) -> String {
    let (scope_type, rack) = scope_parts(scope);
    let t = sql.bind(scope_type);
    match rack {
        None => format!("scope_type = {t} AND rack_id IS NULL"),
        Some(rack) => format!("scope_type = {t} AND rack_id = {}", sql.bind(rack)),
    }
}

fn binding_lock(event_type: &str) -> i64 {
    lock_key("event-rule-binding", event_type.as_bytes())
}

pub(crate) async fn event_rule_create<B: Backend>(
    backend: &B,
    rule: &EventRule,
) -> StoreResult<()> {
    let created = rule.created_at.unwrap_or_else(now);
    let sql = Sql::new(format!(
        "INSERT INTO event_rules ({RULE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
    ))
    .arg(rule.id)
    .arg(rule.name.as_str())
    .arg(rule.description.as_str())
    .arg(rule.enabled)
    .arg(rule.event_type.as_str())
    .arg(to_json("event_rules.actions", &rule.actions)?)
    .arg(created)
    .arg(rule.updated_at.unwrap_or(created));
    let mut tx = backend.begin().await?;
    tx.execute(sql).await.map_err(|e| {
        write_error(
            e,
            |_| format!("event rule id \"{}\"", rule.id),
            || "referenced row".to_string(),
        )
    })?;
    tx.commit().await?;
    Ok(())
}

pub(crate) async fn event_rule_get<B: Backend>(
    backend: &B,
    id: Uuid,
) -> StoreResult<Option<EventRule>> {
    let sql = Sql::new(format!(
        "SELECT {RULE_COLUMNS} FROM event_rules WHERE id = $1"
    ))
    .arg(id);
    backend
        .fetch_all(sql)
        .await?
        .first()
        .map(rule_from_row)
        .transpose()
}

/// Persisted rules matching the filters, ascending id.
pub(crate) async fn event_rule_list<B: Backend>(
    backend: &B,
    event_type: Option<&str>,
    enabled: Option<bool>,
) -> StoreResult<Vec<EventRule>> {
    let mut sql = Sql::default();
    let mut conditions = Vec::new();
    if let Some(event_type) = event_type {
        conditions.push(format!("event_type = {}", sql.bind(event_type)));
    }
    if let Some(enabled) = enabled {
        conditions.push(format!("enabled = {}", sql.bind(enabled)));
    }
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conditions.join(" AND "))
    };
    sql.push(&format!(
        "SELECT {RULE_COLUMNS} FROM event_rules{filter} ORDER BY id"
    ));
    backend
        .fetch_all(sql)
        .await?
        .iter()
        .map(rule_from_row)
        .collect()
}

pub(crate) async fn event_rule_update<B: Backend>(
    backend: &B,
    id: Uuid,
    update: &EventRuleUpdate,
) -> StoreResult<Option<EventRule>> {
    let mut sql = Sql::default();
    let mut sets = vec![format!("updated_at = {}", sql.bind(now()))];
    match update {
        EventRuleUpdate::Metadata { name, description } => {
            sets.push(format!("name = {}", sql.bind(name.as_str())));
            sets.push(format!("description = {}", sql.bind(description.as_str())));
        }
        EventRuleUpdate::Actions(actions) => {
            let json = to_json("event_rules.actions", actions)?;
            sets.push(format!("actions = {}", sql.bind(json)));
        }
        EventRuleUpdate::Enabled(enabled) => {
            sets.push(format!("enabled = {}", sql.bind(*enabled)));
        }
    }
    let id_param = sql.bind(id);
    sql.push(&format!(
        "UPDATE event_rules SET {} WHERE id = {id_param} RETURNING {RULE_COLUMNS}",
        sets.join(", ")
    ));
    let mut tx = backend.begin().await?;
    let rows = tx.fetch_all(sql).await?;
    tx.commit().await?;
    rows.first().map(rule_from_row).transpose()
}

pub(crate) async fn event_rule_delete<B: Backend>(
    backend: &B,
    id: Uuid,
) -> StoreResult<EventRuleDeleted> {
    let mut tx = backend.begin().await?;
    let rows = tx
        .fetch_all(Sql::new("SELECT event_type FROM event_rules WHERE id = $1").arg(id))
        .await?;
    let Some(row) = rows.first() else {
        tx.rollback().await?;
        return Ok(EventRuleDeleted::NotFound);
    };
    let event_type = row.text("event_type")?;
    xact_lock::<B>(&mut tx, binding_lock(&event_type)).await?;
    let bound = tx
        .fetch_all(
            Sql::new(format!(
                "SELECT {BINDING_COLUMNS} FROM event_rule_bindings WHERE rule_id = $1 \
                 ORDER BY scope_type DESC, rack_id"
            ))
            .arg(id),
        )
        .await?
        .iter()
        .map(binding_from_row)
        .collect::<StoreResult<Vec<_>>>()?;
    if !bound.is_empty() {
        tx.rollback().await?;
        return Ok(EventRuleDeleted::Bound(bound));
    }
    tx.execute(Sql::new("DELETE FROM event_rules WHERE id = $1").arg(id))
        .await?;
    tx.commit().await?;
    Ok(EventRuleDeleted::Deleted)
}

/// The binding at `(event_type, scope)`.
fn binding_query(event_type: &str, scope: Scope) -> Sql {
    let mut sql = Sql::default();
    let t = sql.bind(event_type);
    let at = scope_condition(&mut sql, scope);
    sql.push(&format!(
        "SELECT {BINDING_COLUMNS} FROM event_rule_bindings WHERE event_type = {t} AND {at}"
    ));
    sql
}

async fn binding_at<T: Txn>(
    tx: &mut T,
    event_type: &str,
    scope: Scope,
) -> StoreResult<Option<Binding>> {
    tx.fetch_all(binding_query(event_type, scope))
        .await?
        .first()
        .map(binding_from_row)
        .transpose()
}

/// Binds `binding.rule_id` to `binding.scope`; the binding's event type is
/// the rule's (whatever `binding.event_type` says).
pub(crate) async fn event_rule_bind<B: Backend>(
    backend: &B,
    binding: &Binding,
) -> StoreResult<BindOutcome> {
    let mut tx = backend.begin().await?;
    let rows = tx
        .fetch_all(
            Sql::new("SELECT event_type FROM event_rules WHERE id = $1").arg(binding.rule_id),
        )
        .await?;
    let Some(row) = rows.first() else {
        tx.rollback().await?;
        return Ok(BindOutcome::RuleNotFound);
    };
    let event_type = row.text("event_type")?;
    xact_lock::<B>(&mut tx, binding_lock(&event_type)).await?;
    if let Scope::Rack(rack) = binding.scope
        && !live_rack_exists(&mut tx, rack).await?
    {
        tx.rollback().await?;
        return Ok(BindOutcome::RackNotFound);
    }
    if let Some(taken) = binding_at(&mut tx, &event_type, binding.scope).await? {
        tx.rollback().await?;
        return Ok(BindOutcome::ScopeTaken(taken));
    }
    let other_kind = match binding.scope {
        Scope::Site => "rack",
        Scope::Rack(_) => "site",
    };
    let mixed = tx
        .fetch_all(
            Sql::new(format!(
                "SELECT {BINDING_COLUMNS} FROM event_rule_bindings \
                 WHERE rule_id = $1 AND scope_type = $2 ORDER BY rack_id"
            ))
            .arg(binding.rule_id)
            .arg(other_kind),
        )
        .await?;
    if let Some(row) = mixed.first() {
        let existing = binding_from_row(row)?;
        tx.rollback().await?;
        return Ok(BindOutcome::MixedScopes(existing));
    }
    let (scope_type, rack) = scope_parts(binding.scope);
    tx.execute(
        Sql::new(format!(
            "INSERT INTO event_rule_bindings ({BINDING_COLUMNS}, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)"
        ))
        .arg(binding.id)
        .arg(binding.rule_id)
        .arg(event_type.as_str())
        .arg(scope_type)
        .arg(rack)
        .arg(now()),
    )
    .await
    .map_err(|e| {
        write_error(
            e,
            |_| format!("a binding of {event_type} at {}", binding.scope.describe()),
            || format!("event rule {} or rack", binding.rule_id),
        )
    })?;
    tx.commit().await?;
    Ok(BindOutcome::Created(Binding {
        event_type,
        ..binding.clone()
    }))
}

pub(crate) async fn event_rule_binding_get<B: Backend>(
    backend: &B,
    event_type: &str,
    scope: Scope,
) -> StoreResult<Option<Binding>> {
    backend
        .fetch_all(binding_query(event_type, scope))
        .await?
        .first()
        .map(binding_from_row)
        .transpose()
}

pub(crate) async fn event_rule_unbind<B: Backend>(
    backend: &B,
    event_type: &str,
    scope: Scope,
) -> StoreResult<bool> {
    let mut sql = Sql::default();
    let t = sql.bind(event_type);
    let at = scope_condition(&mut sql, scope);
    sql.push(&format!(
        "DELETE FROM event_rule_bindings WHERE event_type = {t} AND {at}"
    ));
    let mut tx = backend.begin().await?;
    let deleted = tx.execute(sql).await?;
    tx.commit().await?;
    Ok(deleted > 0)
}

/// The persisted rules bound to `rack` and to the site for `event_type`
/// (enabled or not: selection skips the disabled ones).
pub(crate) async fn event_rules_bound<B: Backend>(
    backend: &B,
    event_type: &str,
    rack: Uuid,
) -> StoreResult<(Option<EventRule>, Option<EventRule>)> {
    let sql = Sql::new(
        "SELECT r.id, r.name, r.description, r.enabled, r.event_type, r.actions, \
         r.created_at, r.updated_at, b.scope_type \
         FROM event_rule_bindings b JOIN event_rules r ON r.id = b.rule_id \
         WHERE b.event_type = $1 AND (b.scope_type = 'site' OR b.rack_id = $2)",
    )
    .arg(event_type)
    .arg(rack);
    let (mut rack_bound, mut site_bound) = (None, None);
    for row in backend.fetch_all(sql).await? {
        let rule = rule_from_row(&row)?;
        match row.text("scope_type")?.as_str() {
            "rack" => rack_bound = Some(rule),
            _ => site_bound = Some(rule),
        }
    }
    Ok((rack_bound, site_bound))
}
