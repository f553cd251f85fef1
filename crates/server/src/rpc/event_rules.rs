//! Event rules and their bindings (`v1.Flow`) over the engine's
//! [`EventRuleManager`].

use rackflow_api::v1 as pb;
use rackflow_engine::event_rules::EventRuleManager;

use super::ApiResult;
use crate::convert::{self, invalid_page};

/// Default and largest page of `ListEventRules` (the reference's default).
const DEFAULT_LIMIT: usize = 100;

pub(crate) async fn create(
    rules: &EventRuleManager,
    req: pb::CreateEventRuleRequest,
) -> ApiResult<pb::EventRule> {
    let actions = convert::event_rule_actions(&req.actions)?;
    let rule = rules
        .create(req.name, req.description, &req.event_type, actions)
        .await?;
    Ok(convert::pb_event_rule(&rule))
}

pub(crate) async fn get(
    rules: &EventRuleManager,
    req: pb::GetEventRuleRequest,
) -> ApiResult<pb::EventRule> {
    let id = convert::event_rule_id(req.rule_id.as_ref())?;
    Ok(convert::pb_event_rule(&rules.get(id).await?))
}

pub(crate) async fn effective(
    rules: &EventRuleManager,
    req: pb::GetEffectiveEventRuleRequest,
) -> ApiResult<pb::EventRule> {
    let target = convert::event_target(&req)?;
    Ok(convert::pb_event_rule(
        &rules.effective(&req.event_type, target).await?,
    ))
}

pub(crate) async fn list(
    rules: &EventRuleManager,
    req: pb::ListEventRulesRequest,
) -> ApiResult<pb::ListEventRulesResponse> {
    let (offset, limit) = match &req.pagination {
        None => (0, DEFAULT_LIMIT),
        Some(p) if p.offset < 0 => return Err(invalid_page("offset must not be negative").into()),
        Some(p) if p.limit <= 0 => return Err(invalid_page("limit must be positive").into()),
        Some(p) => (
            usize::try_from(p.offset).unwrap_or(usize::MAX),
            usize::try_from(p.limit).unwrap_or(DEFAULT_LIMIT),
        ),
    };
    let page = rules
        .list(req.event_type.as_deref(), req.enabled, offset, limit)
        .await?;
    Ok(pb::ListEventRulesResponse {
        rules: super::fit_reply(page.rules.iter().map(convert::pb_event_rule).collect()),
        total: page.total,
    })
}

pub(crate) async fn update(
    rules: &EventRuleManager,
    req: pb::UpdateEventRuleRequest,
) -> ApiResult<pb::EventRule> {
    let (id, change) = convert::event_rule_change(&req)?;
    Ok(convert::pb_event_rule(&rules.update(id, change).await?))
}

pub(crate) async fn set_enabled(
    rules: &EventRuleManager,
    rule_id: Option<&pb::Uuid>,
    enabled: bool,
) -> ApiResult<pb::EventRule> {
    let id = convert::event_rule_id(rule_id)?;
    Ok(convert::pb_event_rule(
        &rules.set_enabled(id, enabled).await?,
    ))
}

pub(crate) async fn delete(
    rules: &EventRuleManager,
    req: pb::DeleteEventRuleRequest,
) -> ApiResult<()> {
    let id = convert::event_rule_id(req.rule_id.as_ref())?;
    rules.delete(id).await?;
    Ok(())
}

pub(crate) async fn bind(
    rules: &EventRuleManager,
    req: pb::CreateEventRuleBindingRequest,
) -> ApiResult<pb::EventRuleBinding> {
    let id = convert::event_rule_id(req.rule_id.as_ref())?;
    let scope = convert::event_rule_scope(req.scope.as_ref())?;
    Ok(convert::pb_event_rule_binding(
        &rules.bind(id, scope).await?,
    ))
}

pub(crate) async fn binding(
    rules: &EventRuleManager,
    req: pb::GetEventRuleBindingRequest,
) -> ApiResult<pb::EventRuleBinding> {
    let scope = convert::event_rule_scope(req.scope.as_ref())?;
    Ok(convert::pb_event_rule_binding(
        &rules.binding(&req.event_type, scope).await?,
    ))
}

pub(crate) async fn unbind(
    rules: &EventRuleManager,
    req: pb::DeleteEventRuleBindingRequest,
) -> ApiResult<()> {
    let scope = convert::event_rule_scope(req.scope.as_ref())?;
    rules.unbind(&req.event_type, scope).await?;
    Ok(())
}
