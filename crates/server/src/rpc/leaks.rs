//! Leak reports and events (`v1.FlowExtensions`) over the engine's
//! [`LeakManager`].

use chrono::Utc;
use rackflow_api::v1 as pb;
use rackflow_engine::leaks::LeakManager;

use super::ApiResult;
use crate::convert;

pub(crate) async fn report(
    leaks: &LeakManager,
    req: pb::ReportLeakRequest,
) -> ApiResult<pb::ReportLeakResponse> {
    let report = convert::leak_report(&req, Utc::now())?;
    let (outcome, response) = leaks.report(report).await?;
    Ok(convert::pb_leak_reported(&outcome, response.as_ref()))
}

pub(crate) async fn list(
    leaks: &LeakManager,
    req: pb::ListLeakEventsRequest,
) -> ApiResult<pb::ListLeakEventsResponse> {
    let filter = convert::leak_event_filter(&req)?;
    let page = convert::page(req.pagination.as_ref())?;
    let (events, total) = leaks.list(&filter, page).await?;
    Ok(pb::ListLeakEventsResponse {
        events: super::fit_reply(events.iter().map(convert::pb_leak_event).collect()),
        total: convert::wire_count(total),
    })
}
