//! Operation rules and rack-rule associations (`v1.Flow`) over the engine's
//! [`RuleManager`].

use rackflow_api::v1 as pb;
use rackflow_engine::rules::RuleManager;
use uuid::Uuid;

use super::ApiResult;
use crate::convert::{self, pb_uuid, wire_count};

pub(crate) async fn create(
    rules: &RuleManager,
    req: pb::CreateOperationRuleRequest,
) -> ApiResult<pb::CreateOperationRuleResponse> {
    let draft = convert::rule_draft(req)?;
    let id = rules.create(draft).await?;
    Ok(pb::CreateOperationRuleResponse {
        id: Some(pb_uuid(id)),
    })
}

pub(crate) async fn update(
    rules: &RuleManager,
    req: pb::UpdateOperationRuleRequest,
) -> ApiResult<()> {
    let (id, update) = convert::rule_update(req)?;
    rules.update(id, update).await?;
    Ok(())
}

pub(crate) async fn delete(
    rules: &RuleManager,
    req: pb::DeleteOperationRuleRequest,
) -> ApiResult<()> {
    let id = convert::rule_id(req.rule_id.as_ref())?;
    rules.delete(id).await?;
    Ok(())
}

pub(crate) async fn get(
    rules: &RuleManager,
    req: pb::GetOperationRuleRequest,
) -> ApiResult<pb::OperationRule> {
    let id = convert::rule_id(req.rule_id.as_ref())?;
    let rule = rules.get(id).await?;
    Ok(convert::pb_rule(&rule))
}

pub(crate) async fn list(
    rules: &RuleManager,
    req: pb::ListOperationRulesRequest,
) -> ApiResult<pb::ListOperationRulesResponse> {
    let (operation_type, is_default, page) = convert::rule_list_query(&req)?;
    let (found, total) = rules.list(operation_type, is_default, page).await?;
    Ok(pb::ListOperationRulesResponse {
        rules: super::fit_reply(found.iter().map(convert::pb_rule).collect()),
        total_count: wire_count(total),
    })
}

pub(crate) async fn set_default(
    rules: &RuleManager,
    req: pb::SetRuleAsDefaultRequest,
) -> ApiResult<()> {
    let id = convert::rule_id(req.rule_id.as_ref())?;
    rules.set_default(id).await?;
    Ok(())
}

pub(crate) async fn associate(
    rules: &RuleManager,
    req: pb::AssociateRuleWithRackRequest,
) -> ApiResult<()> {
    let rack_id = convert::rack_id(req.rack_id.as_ref())?;
    let rule_id = convert::rule_id(req.rule_id.as_ref())?;
    rules.associate(rack_id, rule_id).await?;
    Ok(())
}

pub(crate) async fn disassociate(
    rules: &RuleManager,
    req: pb::DisassociateRuleFromRackRequest,
) -> ApiResult<()> {
    let rack_id = convert::rack_id(req.rack_id.as_ref())?;
    let operation_type = convert::rule_type(req.operation_type, "operation_type")?;
    rules
        .disassociate(rack_id, operation_type, &req.operation_code)
        .await?;
    Ok(())
}

pub(crate) async fn association(
    rules: &RuleManager,
    req: pb::GetRackRuleAssociationRequest,
) -> ApiResult<pb::GetRackRuleAssociationResponse> {
    let rack_id = convert::rack_id(req.rack_id.as_ref())?;
    let operation_type = convert::rule_type(req.operation_type, "operation_type")?;
    let found = rules
        .association(rack_id, operation_type, &req.operation_code)
        .await?;
    Ok(pb::GetRackRuleAssociationResponse {
        rule_id: Some(pb_uuid(found.map_or(Uuid::nil(), |a| a.rule_id))),
    })
}

pub(crate) async fn associations(
    rules: &RuleManager,
    req: pb::ListRackRuleAssociationsRequest,
) -> ApiResult<pb::ListRackRuleAssociationsResponse> {
    let rack_id = convert::rack_id(req.rack_id.as_ref())?;
    let found = rules.associations(rack_id).await?;
    Ok(pb::ListRackRuleAssociationsResponse {
        associations: found.iter().map(convert::pb_association).collect(),
    })
}
