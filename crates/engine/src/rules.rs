//! The rule manager: operation rules (validated and built from a draft) and
//! their pinning to racks. Owns every rule store call the API makes; the
//! record and definition rules themselves are the domain's
//! (`rackflow_domain::rule`).

use std::sync::Arc;

use chrono::Utc;
use rackflow_domain::rule::validate::MAX_RULE_NAME_LEN;
use rackflow_domain::rule::{
    OperationRule, RackRuleAssociation, RuleError, parse_rule_definition, validate_rule_record,
};
use rackflow_domain::run::Page;
use rackflow_domain::task::TaskType;
use rackflow_store::Store;
use uuid::Uuid;

use crate::error::EngineError;

/// A rule as a caller asks for it: the definition still as JSON text.
#[derive(Debug, Clone)]
pub struct RuleDraft {
    pub name: String,
    pub description: String,
    pub operation_type: TaskType,
    pub operation_code: String,
    pub definition_json: String,
    pub is_default: bool,
}

impl RuleDraft {
    /// Validates the record (name, type, code) and then the definition, and
    /// builds the rule with a fresh id and `now` as both timestamps.
    pub fn build(self, now: chrono::DateTime<Utc>) -> Result<OperationRule, RuleError> {
        validate_rule_record(&self.name, self.operation_type, &self.operation_code)?;
        let definition = parse_rule_definition(&self.definition_json)?;
        Ok(OperationRule {
            id: Uuid::new_v4(),
            name: self.name.trim().to_string(),
            description: self.description,
            operation_type: self.operation_type,
            operation_code: self.operation_code,
            definition,
            is_default: self.is_default,
            created_at: now,
            updated_at: now,
        })
    }
}

/// The changes of an update; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct RuleUpdate {
    pub name: Option<String>,
    pub description: Option<String>,
    pub definition_json: Option<String>,
}

/// Creates, changes, reads and pins operation rules.
#[derive(Clone)]
pub struct RuleManager {
    store: Arc<dyn Store>,
}

impl RuleManager {
    pub fn new(store: Arc<dyn Store>) -> Self {
        RuleManager { store }
    }

    /// Validates and stores a new rule; returns its id.
    pub async fn create(&self, draft: RuleDraft) -> Result<Uuid, EngineError> {
        let rule = draft.build(Utc::now())?;
        self.store.rule_create(&rule).await?;
        tracing::info!(rule_id = %rule.id, name = %rule.name, operation_code = %rule.operation_code, is_default = rule.is_default, "operation rule created");
        Ok(rule.id)
    }

    /// Renames, re-describes and / or redefines a rule. A new name follows
    /// create's record rules (non-blank, at most 128 characters).
    pub async fn update(&self, id: Uuid, update: RuleUpdate) -> Result<(), EngineError> {
        let name = update.name.as_deref().map(str::trim);
        if name.is_some_and(str::is_empty) {
            return Err(RuleError::NameRequired.into());
        }
        if name.is_some_and(|n| n.chars().count() > MAX_RULE_NAME_LEN) {
            return Err(RuleError::NameTooLong.into());
        }
        let definition = update
            .definition_json
            .as_deref()
            .map(parse_rule_definition)
            .transpose()?;
        self.store
            .rule_update(id, name, update.description.as_deref(), definition.as_ref())
            .await?
            .ok_or(EngineError::RuleNotFound(id))?;
        Ok(())
    }

    pub async fn delete(&self, id: Uuid) -> Result<(), EngineError> {
        if !self.store.rule_delete(id).await? {
            return Err(EngineError::RuleNotFound(id));
        }
        Ok(())
    }

    pub async fn get(&self, id: Uuid) -> Result<OperationRule, EngineError> {
        self.store
            .rule_get(id)
            .await?
            .ok_or(EngineError::RuleNotFound(id))
    }

    /// A page of rules, newest first, and the filtered total.
    pub async fn list(
        &self,
        operation_type: Option<TaskType>,
        is_default: Option<bool>,
        page: Page,
    ) -> Result<(Vec<OperationRule>, i64), EngineError> {
        Ok(self
            .store
            .rule_list(operation_type, is_default, page)
            .await?)
    }

    /// Makes the rule the default of its (type, code).
    pub async fn set_default(&self, id: Uuid) -> Result<(), EngineError> {
        if !self.store.rule_set_default(id).await? {
            return Err(EngineError::RuleNotFound(id));
        }
        Ok(())
    }

    /// Pins the rule to the rack for the rule's (type, code).
    pub async fn associate(&self, rack_id: Uuid, rule_id: Uuid) -> Result<(), EngineError> {
        Ok(self.store.rule_associate(rack_id, rule_id).await?)
    }

    /// Unpins the rack's rule for (type, code); missing is a no-op.
    pub async fn disassociate(
        &self,
        rack_id: Uuid,
        operation_type: TaskType,
        code: &str,
    ) -> Result<(), EngineError> {
        Ok(self
            .store
            .rule_disassociate(rack_id, operation_type, code)
            .await?)
    }

    pub async fn association(
        &self,
        rack_id: Uuid,
        operation_type: TaskType,
        code: &str,
    ) -> Result<Option<RackRuleAssociation>, EngineError> {
        Ok(self
            .store
            .rule_association_get(rack_id, operation_type, code)
            .await?)
    }

    pub async fn associations(
        &self,
        rack_id: Uuid,
    ) -> Result<Vec<RackRuleAssociation>, EngineError> {
        Ok(self.store.rule_associations_list(rack_id).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(name: &str, code: &str, json: &str) -> RuleDraft {
        RuleDraft {
            name: name.into(),
            description: String::new(),
            operation_type: TaskType::PowerControl,
            operation_code: code.into(),
            definition_json: json.into(),
            is_default: false,
        }
    }

    #[test]
    fn build_checks_the_record_before_the_definition() {
        let err = draft("  ", "power_on", "not json")
            .build(Utc::now())
            .expect_err("blank name");
        assert_eq!(err.to_string(), "name is required");
        let err = draft("r", "power_on", "not json")
            .build(Utc::now())
            .expect_err("bad definition");
        assert!(
            err.to_string().starts_with("invalid rule definition"),
            "{err}"
        );
    }
}
