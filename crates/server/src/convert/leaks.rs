//! Leak reports and events on the wire (`v1.FlowExtensions`: `ReportLeak`,
//! `ListLeakEvents`).

use chrono::{DateTime, TimeDelta, Utc};
use rackflow_api::v1 as pb;
use rackflow_domain::event_rule::Severity;
use rackflow_domain::leak::{LeakEvent, LeakReport, LeakReported};
use rackflow_engine::store::LeakEventFilter;

use super::{Checked, from_timestamp, invalid, parse_uuid, pb_uuid, required_id, timestamp};

/// How far in the future a report's `observed_at` may be (clock skew
/// between the monitor and Flow).
const MAX_CLOCK_SKEW: TimeDelta = TimeDelta::minutes(5);

/// `ReportLeakRequest` → the report (`now` fills an unset observation time).
pub fn leak_report(req: &pb::ReportLeakRequest, now: DateTime<Utc>) -> Checked<LeakReport> {
    let component_id = required_id(
        req.component_id.as_ref(),
        "component_id must be a valid non-zero UUID",
    )?;
    let severity = match req.severity {
        0 => Severity::Critical,
        n => Severity::from_wire(n).map_or_else(|| invalid(format!("unknown severity {n}")), Ok)?,
    };
    let observed_at = match &req.observed_at {
        None => now,
        Some(t) => match from_timestamp(t) {
            Some(at) if at <= now + MAX_CLOCK_SKEW => at,
            Some(_) => return invalid("observed_at is in the future"),
            None => return invalid("observed_at is not a valid time"),
        },
    };
    let report = LeakReport {
        component_id,
        source: req.source.clone(),
        severity,
        detected: !req.cleared,
        observed_at,
        message: req.message.clone(),
    };
    report.check().map_err(super::Invalid)?;
    Ok(report)
}

pub fn pb_leak_event(e: &LeakEvent) -> pb::LeakEvent {
    pb::LeakEvent {
        id: Some(pb_uuid(e.id)),
        component_id: Some(pb_uuid(e.component_id)),
        rack_id: e.rack_id.map(pb_uuid),
        source: e.source.clone(),
        severity: e.severity.to_wire(),
        message: e.message.clone(),
        detected_at: Some(timestamp(e.detected_at)),
        last_reported_at: Some(timestamp(e.last_reported_at)),
        observations: e.observations,
        closed_at: e.closed_at.map(timestamp),
    }
}

pub fn pb_leak_reported(
    outcome: &LeakReported,
    response: Option<&rackflow_engine::leaks::Response>,
) -> pb::ReportLeakResponse {
    use pb::LeakReportOutcome as O;
    let (outcome, event) = match outcome {
        LeakReported::New(e) => (O::New, Some(e)),
        LeakReported::Repeat(e) => (O::Repeat, Some(e)),
        LeakReported::Cleared(e) => (O::Cleared, e.as_ref()),
        LeakReported::Stale | LeakReported::ComponentNotFound => (O::Stale, None),
    };
    pb::ReportLeakResponse {
        outcome: outcome as i32,
        event: event.map(pb_leak_event),
        rule_id: response.and_then(|r| r.rule_id).map(pb_uuid),
        submitted_task_ids: response
            .map(|r| r.submitted.iter().copied().map(pb_uuid).collect())
            .unwrap_or_default(),
        cancelled_task_ids: response
            .map(|r| r.cancelled.iter().copied().map(pb_uuid).collect())
            .unwrap_or_default(),
    }
}

pub fn leak_event_filter(req: &pb::ListLeakEventsRequest) -> Checked<LeakEventFilter> {
    let id = |u: &Option<pb::Uuid>, what: &str| -> Checked<Option<uuid::Uuid>> {
        match u {
            None => Ok(None),
            Some(u) => parse_uuid(&u.id)
                .map(Some)
                .map_err(|e| super::Invalid(format!("{what}: {e}"))),
        }
    };
    Ok(LeakEventFilter {
        rack_id: id(&req.rack_id, "rack_id")?,
        component_id: id(&req.component_id, "component_id")?,
        open_only: req.open_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_default_to_a_critical_leak_now_and_refuse_the_future() {
        let now = Utc::now();
        let req = pb::ReportLeakRequest {
            component_id: Some(pb_uuid(uuid::Uuid::from_u128(9))),
            source: "cdu-3".into(),
            ..Default::default()
        };
        let report = leak_report(&req, now).unwrap();
        assert_eq!(report.severity, Severity::Critical);
        assert!(report.detected);
        assert_eq!(report.observed_at, now);
        let future = pb::ReportLeakRequest {
            observed_at: Some(timestamp(now + TimeDelta::hours(1))),
            ..req.clone()
        };
        assert!(leak_report(&future, now).unwrap_err().0.contains("future"));
        let nobody = pb::ReportLeakRequest {
            source: String::new(),
            ..req.clone()
        };
        assert!(leak_report(&nobody, now).unwrap_err().0.contains("source"));
        let bad = pb::ReportLeakRequest { severity: 9, ..req };
        assert!(leak_report(&bad, now).is_err());
    }
}
