//! A firmware request naming a firmware object of the rack manager's
//! catalogue (`UpgradeFirmwareRequest.firmware_object`, issue 35), resolved
//! before the request is converted: the object (or each hardware type's
//! default) is read from the rack manager and becomes the request's
//! `firmware_bundle` — the versions the tasks check after updating — and
//! the rack model → object map each rack's task applies
//! (`rackflow_engine::manager::rms_objects`).

use std::collections::BTreeMap;

use rackflow_api::rack_manager::rack_manager_client::RackManagerClient;
use rackflow_api::v1 as pb;
use rackflow_engine::manager::rms_objects::{self, FetchError};
use tonic::transport::Channel;

use super::ApiResult;
use crate::convert;
use crate::error::ApiError;

/// Where firmware objects are read: the `rms` provider's rack manager.
#[derive(Debug, Clone)]
pub(crate) struct FirmwareObjects {
    pub(crate) client: RackManagerClient<Channel>,
    /// `[rms] version_entry`: the component whose version Flow checks.
    pub(crate) version_entry: String,
}

/// Resolves `req.firmware_object` in place (into `firmware_bundle`) and
/// returns the rack model → object map; empty when the request names none.
pub(crate) async fn resolve(
    source: Option<&FirmwareObjects>,
    req: &mut pb::UpgradeFirmwareRequest,
) -> ApiResult<BTreeMap<String, String>> {
    let requested = req.firmware_object.trim().to_owned();
    if requested.is_empty() {
        return Ok(BTreeMap::new());
    }
    if req
        .target_version
        .as_deref()
        .is_some_and(|v| !v.trim().is_empty())
    {
        return Err(convert::Invalid(
            "firmware_object and target_version are exclusive: set one".into(),
        )
        .into());
    }
    if req.firmware_bundle.is_some() {
        return Err(convert::Invalid(
            "firmware_object and firmware_bundle are exclusive: set one".into(),
        )
        .into());
    }
    let Some(source) = source else {
        return Err(ApiError::FirmwareObject(format!(
            "firmware object {requested}: firmware objects live in a rack manager's catalogue; \
             this server runs provider = \"sim\" (use provider = \"rms\")"
        )));
    };
    let resolved = rms_objects::fetch(
        &mut source.client.clone(),
        &requested,
        &source.version_entry,
    )
    .await
    .map_err(|e| match e {
        FetchError::Refused(message) => ApiError::FirmwareObject(message),
        FetchError::RackManager(status) => ApiError::RackManagerUnavailable(format!(
            "read firmware object {requested} from the rack manager: {}",
            status.message()
        )),
    })?;
    req.firmware_bundle = Some(convert::pb_firmware_bundle(&resolved.bundle));
    req.firmware_object.clear();
    Ok(resolved.objects)
}
