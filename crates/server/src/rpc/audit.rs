//! `ListAuditEvents` (`v1.FlowExtensions`): the audit trail, a page at a
//! time.

use rackflow_api::v1 as pb;
use rackflow_domain::audit::AuditEvent;
use rackflow_engine::audit::AuditTrail;
use rackflow_engine::store::AuditFilter;

use super::ApiResult;
use crate::convert::{self, Invalid, pb_uuid};

/// Events per page when the request names no limit.
const DEFAULT_PAGE: i64 = 100;
/// Longest actor filter accepted (an identity's limit).
const MAX_ACTOR_LEN: usize = rackflow_security::authz::MAX_IDENTITY_LEN;

pub(crate) async fn list(
    trail: &AuditTrail,
    req: pb::ListAuditEventsRequest,
) -> ApiResult<pb::ListAuditEventsResponse> {
    let run_id = match req.run_id.as_ref().filter(|u| !u.id.trim().is_empty()) {
        Some(id) => Some(convert::parse_uuid(&id.id).map_err(|e| Invalid(format!("run_id: {e}")))?),
        None => None,
    };
    let since = match req.since.as_ref() {
        Some(t) => Some(
            convert::from_timestamp(t)
                .ok_or_else(|| Invalid("since: not a valid timestamp".into()))?,
        ),
        None => None,
    };
    if req.actor.len() > MAX_ACTOR_LEN || req.actor.contains('\0') {
        return Err(Invalid(format!("actor: at most {MAX_ACTOR_LEN} characters, no NUL")).into());
    }
    if req.after_seq < 0 {
        return Err(Invalid("after_seq: must not be negative".into()).into());
    }
    let limit = match req.limit {
        0 => DEFAULT_PAGE,
        n if n < 0 => return Err(Invalid("limit: must not be negative".into()).into()),
        n => i64::from(n).min(rackflow_engine::audit::MAX_AUDIT_PAGE),
    };
    let filter = AuditFilter {
        run_id,
        since,
        actor: (!req.actor.trim().is_empty()).then(|| req.actor.trim().to_string()),
        controls_only: req.controls_only,
        after_seq: (req.after_seq > 0).then_some(req.after_seq),
        newest_first: req.newest_first,
    };
    let events = trail.list(&filter, limit).await?;
    let full_page = i64::try_from(events.len()).unwrap_or(i64::MAX) == limit;
    let next_after_seq = if full_page {
        events.last().map_or(0, |e| e.seq)
    } else {
        0
    };
    Ok(pb::ListAuditEventsResponse {
        events: events.iter().map(event).collect(),
        next_after_seq,
    })
}

fn event(e: &AuditEvent) -> pb::AuditEvent {
    pb::AuditEvent {
        seq: e.seq,
        at: Some(convert::timestamp(e.at)),
        actor: e.actor.clone(),
        action: e.action.clone(),
        run_id: e.run_id.map(pb_uuid),
        subject_ids: e.subject_ids.clone(),
        summary: e.summary.clone(),
        code: e.code.clone(),
        message: e.message.clone(),
    }
}
