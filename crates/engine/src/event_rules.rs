//! The event-rule manager (issue 34): persisted event rules and their
//! bindings, the read-only built-ins beside them, and the effective rule of
//! a rack or component. Owns every event-rule store call the API makes; the
//! validation and selection order are the domain's
//! (`rackflow_domain::event_rule`).
//!
//! Contract (the reference's): rules are created disabled; built-ins are
//! always enabled and cannot be updated, enabled, disabled, deleted or
//! bound (failed precondition); a binding's event type is its rule's; one
//! rule per (event type, site) and per (event type, rack); a rule is bound
//! to the site or to racks, never both; a bound rule is not deleted (delete
//! its bindings first — the issue asks for the refusal, which keeps a rack's
//! leak response from silently falling back to the built-in); listing gives
//! the persisted rules, then the built-ins, each by ascending id.

use std::sync::Arc;

use chrono::Utc;
use rackflow_domain::event_rule::{
    self, Action, Binding, EventRule, EventRuleInvalid, Scope, check_event_type,
};
use rackflow_store::{BindOutcome, EventRuleDeleted, EventRuleUpdate, Store};
use uuid::Uuid;

use crate::error::{EngineError, EventRuleError};

/// What an effective-rule lookup is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventTarget {
    Rack(Uuid),
    Component(Uuid),
}

/// A change a caller asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleChange {
    Metadata { name: String, description: String },
    Actions(Vec<Action>),
}

/// A page of a listing: the rules and the matching count before paging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulePage {
    pub rules: Vec<EventRule>,
    pub total: i64,
}

/// Creates, changes, binds and resolves event rules.
#[derive(Clone)]
pub struct EventRuleManager {
    store: Arc<dyn Store>,
}

fn not_found(id: Uuid) -> EngineError {
    EventRuleError::NotFound(format!("event rule {id} not found")).into()
}

fn read_only(id: Uuid, what: &str) -> EngineError {
    EventRuleError::Precondition(format!(
        "event rule {id} is a built-in rule: it cannot be {what}"
    ))
    .into()
}

fn invalid(e: EventRuleInvalid) -> EngineError {
    EventRuleError::Invalid(e).into()
}

impl EventRuleManager {
    pub fn new(store: Arc<dyn Store>) -> Self {
        EventRuleManager { store }
    }

    /// Validates and stores a new, disabled rule.
    pub async fn create(
        &self,
        name: String,
        description: String,
        event_type: &str,
        actions: Vec<Action>,
    ) -> Result<EventRule, EngineError> {
        let rule = event_rule::new_rule(
            Uuid::new_v4(),
            name,
            description,
            event_type,
            actions,
            Utc::now(),
        )
        .map_err(invalid)?;
        self.store.event_rule_create(&rule).await?;
        tracing::info!(rule_id = %rule.id, name = %rule.name, event_type = %rule.event_type, "event rule created (disabled)");
        // As stored (timestamps at the store's precision).
        self.get(rule.id).await
    }

    /// A persisted or built-in rule.
    pub async fn get(&self, id: Uuid) -> Result<EventRule, EngineError> {
        if let Some(builtin) = event_rule::builtin_rule(id) {
            return Ok(builtin);
        }
        self.store
            .event_rule_get(id)
            .await?
            .ok_or_else(|| not_found(id))
    }

    /// Persisted rules then built-ins, each ascending id, filtered, then
    /// `limit` from `offset`.
    pub async fn list(
        &self,
        event_type: Option<&str>,
        enabled: Option<bool>,
        offset: usize,
        limit: usize,
    ) -> Result<RulePage, EngineError> {
        if let Some(event_type) = event_type {
            check_event_type(event_type).map_err(invalid)?;
        }
        let mut rules = self.store.event_rule_list(event_type, enabled).await?;
        rules.extend(event_rule::builtin_rules().into_iter().filter(|r| {
            event_type.is_none_or(|t| r.event_type == t) && enabled.is_none_or(|e| r.enabled == e)
        }));
        let total = i64::try_from(rules.len()).unwrap_or(i64::MAX);
        Ok(RulePage {
            rules: rules.into_iter().skip(offset).take(limit).collect(),
            total,
        })
    }

    /// Replaces the metadata (name and description) or the action list.
    pub async fn update(&self, id: Uuid, change: RuleChange) -> Result<EventRule, EngineError> {
        if event_rule::builtin_rule(id).is_some() {
            return Err(read_only(id, "updated"));
        }
        let update = match change {
            RuleChange::Metadata { name, description } => {
                event_rule::check_name(&name).map_err(invalid)?;
                event_rule::check_description(&description).map_err(invalid)?;
                EventRuleUpdate::Metadata { name, description }
            }
            RuleChange::Actions(actions) => {
                event_rule::check_actions(&actions).map_err(invalid)?;
                EventRuleUpdate::Actions(actions)
            }
        };
        let rule = self
            .store
            .event_rule_update(id, &update)
            .await?
            .ok_or_else(|| not_found(id))?;
        tracing::info!(rule_id = %id, "event rule updated");
        Ok(rule)
    }

    /// Enables or disables a persisted rule; enabling checks the stored
    /// rule is still valid first.
    pub async fn set_enabled(&self, id: Uuid, enabled: bool) -> Result<EventRule, EngineError> {
        if event_rule::builtin_rule(id).is_some() {
            return Err(read_only(id, if enabled { "enabled" } else { "disabled" }));
        }
        if enabled {
            let current = self
                .store
                .event_rule_get(id)
                .await?
                .ok_or_else(|| not_found(id))?;
            check_event_type(&current.event_type).map_err(invalid)?;
            event_rule::check_actions(&current.actions).map_err(invalid)?;
        }
        let rule = self
            .store
            .event_rule_update(id, &EventRuleUpdate::Enabled(enabled))
            .await?
            .ok_or_else(|| not_found(id))?;
        tracing::info!(rule_id = %id, enabled, "event rule {}", if enabled { "enabled" } else { "disabled" });
        Ok(rule)
    }

    /// Deletes an unbound persisted rule.
    pub async fn delete(&self, id: Uuid) -> Result<(), EngineError> {
        if event_rule::builtin_rule(id).is_some() {
            return Err(read_only(id, "deleted"));
        }
        match self.store.event_rule_delete(id).await? {
            EventRuleDeleted::Deleted => {
                tracing::info!(rule_id = %id, "event rule deleted");
                Ok(())
            }
            EventRuleDeleted::NotFound => Err(not_found(id)),
            EventRuleDeleted::Bound(bindings) => {
                let scopes: Vec<String> = bindings.iter().map(|b| b.scope.describe()).collect();
                Err(EventRuleError::Precondition(format!(
                    "event rule {id} is bound to {}; delete its bindings first \
                     (DeleteEventRuleBinding)",
                    crate::manager::first_listed(&scopes, ", ", " and")
                ))
                .into())
            }
        }
    }

    /// Binds a persisted rule to a scope.
    pub async fn bind(&self, rule_id: Uuid, scope: Scope) -> Result<Binding, EngineError> {
        if event_rule::builtin_rule(rule_id).is_some() {
            return Err(read_only(rule_id, "bound"));
        }
        let binding = Binding {
            id: Uuid::new_v4(),
            rule_id,
            event_type: String::new(),
            scope,
        };
        match self.store.event_rule_bind(&binding).await? {
            BindOutcome::Created(binding) => {
                tracing::info!(rule_id = %rule_id, scope = %binding.scope.describe(), event_type = %binding.event_type, "event rule bound");
                Ok(binding)
            }
            BindOutcome::RuleNotFound => Err(not_found(rule_id)),
            BindOutcome::RackNotFound => Err(invalid(EventRuleInvalid(format!(
                "rack scope names no existing rack: {}",
                scope.describe()
            )))),
            BindOutcome::ScopeTaken(taken) => Err(EventRuleError::Precondition(format!(
                "{} already has event rule {} bound for {}; delete that binding first",
                capitalised(&taken.scope.describe()),
                taken.rule_id,
                taken.event_type
            ))
            .into()),
            BindOutcome::MixedScopes(existing) => Err(EventRuleError::Precondition(format!(
                "event rule {rule_id} is bound to {} already: a rule is bound to the site or \
                 to racks, not both",
                existing.scope.describe()
            ))
            .into()),
        }
    }

    pub async fn binding(&self, event_type: &str, scope: Scope) -> Result<Binding, EngineError> {
        let event_type = check_event_type(event_type).map_err(invalid)?;
        self.store
            .event_rule_binding_get(event_type, scope)
            .await?
            .ok_or_else(|| no_binding(event_type, scope))
    }

    pub async fn unbind(&self, event_type: &str, scope: Scope) -> Result<(), EngineError> {
        let event_type = check_event_type(event_type).map_err(invalid)?;
        if !self.store.event_rule_unbind(event_type, scope).await? {
            return Err(no_binding(event_type, scope));
        }
        tracing::info!(scope = %scope.describe(), event_type, "event rule binding deleted");
        Ok(())
    }

    /// The rule that acts on `event_type` for the target: an enabled rule
    /// bound to its rack, else one bound to the site, else the built-in.
    pub async fn effective(
        &self,
        event_type: &str,
        target: EventTarget,
    ) -> Result<EventRule, EngineError> {
        let event_type = check_event_type(event_type).map_err(invalid)?;
        let rack = match target {
            EventTarget::Rack(rack) => {
                self.store
                    .rack_get(rack, false)
                    .await?
                    .ok_or_else(|| EngineError::RackNotFound(rack.to_string()))?;
                rack
            }
            EventTarget::Component(component) => self
                .store
                .component_get(component)
                .await?
                .filter(|c| c.deleted_at.is_none())
                .ok_or(EngineError::ComponentNotFound(component))?
                .rack_id
                .ok_or_else(|| {
                    EventRuleError::NotFound(format!("component {component} is in no rack"))
                })?,
        };
        self.effective_for_rack(event_type, rack).await
    }

    /// [`Self::effective`] for a rack known to exist.
    pub async fn effective_for_rack(
        &self,
        event_type: &str,
        rack: Uuid,
    ) -> Result<EventRule, EngineError> {
        let builtin = event_rule::builtin_for(event_type).ok_or_else(|| {
            invalid(EventRuleInvalid(format!(
                "no built-in rule for event type {event_type}"
            )))
        })?;
        let (rack_bound, site_bound) = self.store.event_rules_bound(event_type, rack).await?;
        Ok(event_rule::select(rack_bound, site_bound, builtin))
    }
}

fn no_binding(event_type: &str, scope: Scope) -> EngineError {
    EventRuleError::NotFound(format!(
        "no event rule is bound to {} for {event_type}",
        scope.describe()
    ))
    .into()
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
