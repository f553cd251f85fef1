//! `RedfishNode`: one computer system behind one BMC, and the discovery of
//! which system that is.
//!
//! The system URI is read from the service root's `Systems` collection the
//! first time it is needed (never hard-coded) and kept for the node's life;
//! a node may also be pinned to a system URI when the BMC has several.
//! Power lives in `power.rs`, firmware in `firmware.rs`.

use serde_json::Value;
use tokio::sync::OnceCell;

use super::client::RedfishClient;
use super::error::RedfishError;
use super::types::member_uris;

/// The Redfish service root; the one fixed path of the protocol.
pub const SERVICE_ROOT: &str = "/redfish/v1/";

/// One computer system managed through Redfish. Methods take `&self`; the
/// type is `Send + Sync` and holds no global state, so a node back end can
/// share it between jobs (the job model's node exclusion keeps two jobs
/// from driving one node at once).
#[derive(Debug)]
pub struct RedfishNode {
    pub(super) client: RedfishClient,
    system: OnceCell<String>,
}

impl RedfishNode {
    /// A node whose system is discovered from `/redfish/v1/Systems`.
    pub fn new(client: RedfishClient) -> Self {
        RedfishNode {
            client,
            system: OnceCell::new(),
        }
    }

    /// A node pinned to one system URI (e.g. `/redfish/v1/Systems/1`), for
    /// BMCs that list several systems.
    pub fn with_system(client: RedfishClient, system_uri: impl Into<String>) -> Self {
        RedfishNode {
            client,
            system: OnceCell::new_with(Some(system_uri.into())),
        }
    }

    pub fn client(&self) -> &RedfishClient {
        &self.client
    }

    /// The system's URI path, discovering it on first use.
    pub async fn system_uri(&self) -> Result<String, RedfishError> {
        self.system
            .get_or_try_init(|| self.discover_system())
            .await
            .cloned()
    }

    /// The service root resource.
    pub async fn service_root(&self) -> Result<Value, RedfishError> {
        self.client.get_json(SERVICE_ROOT).await
    }

    /// The URI of a service the root links to (`Systems`, `UpdateService`,
    /// `TaskService`).
    pub(super) async fn root_link(&self, service: &str) -> Result<String, RedfishError> {
        let root = self.service_root().await?;
        root.get(service)
            .and_then(|s| s.get("@odata.id"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| RedfishError::NotAdvertised {
                resource: "the service root".to_string(),
                what: service.to_string(),
            })
    }

    async fn discover_system(&self) -> Result<String, RedfishError> {
        let collection_uri = self.root_link("Systems").await?;
        let collection = self.client.get_json(&collection_uri).await?;
        let members = member_uris(&collection).ok_or_else(|| RedfishError::InvalidResponse {
            uri: collection_uri.clone(),
            reason: "the Systems collection has no Members".to_string(),
        })?;
        match members.as_slice() {
            [] => Err(RedfishError::NoSystem {
                uri: collection_uri,
            }),
            [only] => {
                tracing::debug!(system = %only, "redfish system discovered");
                Ok(only.clone())
            }
            many => Err(RedfishError::AmbiguousSystem {
                uri: collection_uri,
                count: many.len(),
            }),
        }
    }

    /// The ComputerSystem resource and its URI. A 404 here means the node's
    /// system does not exist on this BMC.
    pub(super) async fn system(&self) -> Result<(String, Value), RedfishError> {
        let uri = self.system_uri().await?;
        match self.client.get_json(&uri).await {
            Ok(body) => Ok((uri, body)),
            Err(RedfishError::NotFound { message, .. }) => {
                Err(RedfishError::SystemNotFound { uri, message })
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    fn assert_send<T: Send>(_: &T) {}

    #[test]
    fn node_and_client_are_send_and_sync() {
        assert_send_sync::<RedfishNode>();
        assert_send_sync::<RedfishClient>();
    }

    #[test]
    fn operation_futures_are_send() {
        // A node back-end trait spawns these on tokio; never polled here.
        use super::super::{FirmwareImage, RedfishConfig, ResetType};
        let client = RedfishClient::new("http://127.0.0.1:9", None, RedfishConfig::default())
            .expect("client");
        let node = RedfishNode::new(client);
        let image = FirmwareImage::default();
        assert_send(&node.power_state());
        assert_send(&node.reset(&ResetType::On));
        assert_send(&node.set_power_and_wait(
            &ResetType::On,
            std::time::Duration::ZERO,
            std::time::Duration::ZERO,
        ));
        assert_send(&node.firmware_inventory());
        assert_send(&node.update_firmware(&image, &|_| {}));
    }
}
