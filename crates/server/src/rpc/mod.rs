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
use rackflow_domain::run::EncryptedSecret;
use rackflow_security::secrets::DataKeys;

use crate::convert;
use crate::error::ApiError;

pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// Firmware credentials sealed for storage (decision C5): `None` when the
/// request carries none; refused when no data key is configured (the
/// reference's FailedPrecondition) — never stored in clear.
pub(crate) fn seal_authentication_data(
    keys: Option<&DataKeys>,
    data: Option<&pb::FirmwareAuthenticationData>,
) -> ApiResult<Option<EncryptedSecret>> {
    let Some(credentials) = convert::firmware_credentials(data)? else {
        return Ok(None);
    };
    let keys = keys.ok_or(ApiError::CredentialsNeedKey)?;
    let plaintext = serde_json::to_vec(&credentials)
        .map_err(|e| ApiError::Internal(format!("encode firmware credentials: {e}")))?;
    let sealed = keys
        .seal(&plaintext)
        .map_err(|e| ApiError::Internal(format!("seal firmware credentials: {e}")))?;
    Ok(Some(EncryptedSecret(sealed)))
}
