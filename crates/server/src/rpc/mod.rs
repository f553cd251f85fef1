//! The handlers of `v1.Flow` and `v1.FlowExtensions`, one file per area.
//!
//! Every handler has the same shape: convert the wire request (all
//! validation lives in [`crate::convert`]), call one engine method, convert
//! the answer. Handlers return [`ApiError`]; `flow.rs` turns it into a
//! status through the one mapping in `error.rs`.

pub(crate) mod audit;
pub(crate) mod event_rules;
pub(crate) mod firmware_objects;
pub(crate) mod inventory;
pub(crate) mod leaks;
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

/// Most bytes of list items one reply carries: under tonic's 4 MiB message
/// limit with room for the reply's other fields, so no page, however large
/// its items, becomes a reply the client cannot decode.
pub(crate) const REPLY_BUDGET: usize = 3 * 1024 * 1024;

/// The longest prefix of `items` (at least one) whose encoding fits
/// [`REPLY_BUDGET`]: a page cut short by size. The reply's `total` stays
/// the whole count, so a client pages on from the items it got (the
/// reference's offset / limit paging allows a short page).
pub(crate) fn fit_reply<T: prost::Message>(mut items: Vec<T>) -> Vec<T> {
    let mut used = 0usize;
    let keep = items
        .iter()
        .position(|item| {
            // The field tag and length prefix of a repeated message.
            used += item.encoded_len() + 8;
            used > REPLY_BUDGET
        })
        .unwrap_or(items.len())
        .max(1);
    items.truncate(keep);
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_cut_to_the_reply_budget_and_never_to_nothing() {
        let item = |bytes: usize| pb::Uuid {
            id: "x".repeat(bytes),
        };
        let mib = 1024 * 1024;
        assert_eq!(fit_reply(vec![item(mib), item(mib), item(mib)]).len(), 2);
        assert_eq!(fit_reply(vec![item(10 * mib), item(1)]).len(), 1);
        assert_eq!(fit_reply(vec![item(10); 5]).len(), 5);
        assert!(fit_reply(Vec::<pb::Uuid>::new()).is_empty());
    }
}
