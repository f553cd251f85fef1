//! The handlers of `v1.Flow` and `v1.FlowExtensions`, one file per area.
//!
//! Every handler has the same shape: convert the wire request (all
//! validation lives in [`crate::convert`]), call one engine method, convert
//! the answer. Handlers return [`ApiError`]; `flow.rs` turns it into a
//! status through the one mapping in `error.rs`.

pub(crate) mod audit;
pub(crate) mod inventory;
pub(crate) mod rules;
pub(crate) mod runs;
pub(crate) mod schedules;
pub(crate) mod tasks;
pub(crate) mod watch;

use rackflow_api::v1 as pb;

use crate::convert;
use crate::error::ApiError;

pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// Firmware credentials need encryption at rest, which needs a key; none is
/// configured in this build, so non-empty credentials are refused rather
/// than stored in clear (operation runs, plain firmware tasks and schedules
/// alike).
pub(crate) fn refuse_authentication_data(
    data: Option<&pb::FirmwareAuthenticationData>,
) -> ApiResult<()> {
    if convert::has_authentication_data(data) {
        return Err(ApiError::CredentialsNeedKey);
    }
    Ok(())
}
