//! Wire ⇄ domain conversion, with all request validation.
//!
//! Every check of spec operation-runs §5 lives here, in the reference's
//! order and with its exact messages; a failure is a [`Invalid`] carrying
//! the text the client sees with gRPC InvalidArgument.

mod event_rules;
mod inventory;
mod leaks;
mod runs;
pub mod schedules;
mod tasks;

pub use event_rules::*;
pub use inventory::*;
pub use leaks::*;
pub use runs::*;
pub use tasks::*;

use chrono::{DateTime, TimeZone, Utc};
use rackflow_api::v1 as pb;
use rackflow_domain::run::Page;
use uuid::Uuid;

/// A request that fails validation; the text names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

pub type Checked<T> = Result<T, Invalid>;

pub(crate) fn invalid<T>(message: impl Into<String>) -> Checked<T> {
    Err(Invalid(message.into()))
}

/// Parses a UUID like the reference (Go `uuid.Parse`) and words errors the
/// same way.
pub fn parse_uuid(text: &str) -> Result<Uuid, String> {
    Uuid::parse_str(text.trim()).map_err(|_| match text.trim().len() {
        32 | 36 | 38 | 45 => "invalid UUID format".to_string(),
        n => format!("invalid UUID length: {n}"),
    })
}

/// A required id: missing, unparseable or nil ids answer `message`.
pub fn required_id(id: Option<&pb::Uuid>, message: &str) -> Checked<Uuid> {
    match id.map(|u| parse_uuid(&u.id)) {
        Some(Ok(id)) if !id.is_nil() => Ok(id),
        _ => invalid(message),
    }
}

pub fn pb_uuid(id: Uuid) -> pb::Uuid {
    pb::Uuid { id: id.to_string() }
}

pub fn timestamp(t: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

/// Unix seconds to a timestamp; 0 means unset.
pub fn unix_timestamp(seconds: i64) -> Option<prost_types::Timestamp> {
    (seconds != 0).then_some(prost_types::Timestamp { seconds, nanos: 0 })
}

pub fn from_timestamp(t: &prost_types::Timestamp) -> Option<DateTime<Utc>> {
    Utc.timestamp_opt(t.seconds, u32::try_from(t.nanos).ok()?)
        .single()
}

/// Optional pagination: absent → offset 0, limit 100; negative values are
/// rejected naming the field.
pub fn page(pagination: Option<&pb::Pagination>) -> Checked<Page> {
    match pagination {
        None => Ok(Page::DEFAULT),
        Some(p) if p.offset < 0 => invalid("pagination.offset must not be negative"),
        Some(p) if p.limit < 0 => invalid("pagination.limit must not be negative"),
        Some(p) => Ok(Page {
            offset: i64::from(p.offset),
            limit: i64::from(p.limit),
        }),
    }
}

/// A pagination the reference refuses (`invalid pagination information: …`).
pub fn invalid_page(detail: &str) -> Invalid {
    Invalid(format!("invalid pagination information: {detail}"))
}

/// Saturating conversion for counts that go on the wire as int32.
pub fn wire_count(n: impl TryInto<i32>) -> i32 {
    n.try_into().unwrap_or(i32::MAX)
}
