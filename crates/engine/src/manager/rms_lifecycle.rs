//! The rack-lifecycle capabilities of the `rms` provider (issue 33): ingest,
//! decommission, the bring-up's firmware consistency check and the AC power
//! cycle, over the rack manager's `RackManager` API.
//!
//! * ingest ([`ExpectationInjector`]): registers every node of the racks of
//!   the given components with `CreateNodes` — what `rackflow rms sync`
//!   does, for those racks only. The rack manager keeps no inventory of its
//!   own, so the nodes (BMC address, node type, the configured BMC login)
//!   come from Flow's store. A component that cannot be a node (no external
//!   id, no BMC address) or that the rack manager refuses fails the step,
//!   named.
//! * decommission ([`Decommissioner`]): per component `SetPowerState` Off,
//!   then `DeleteNode`; a node the rack manager does not know is already
//!   gone. [`DecommissionStatus`] reads `ListNodeInventory`: a node still
//!   listed is `Decommissioning/Deregistering`, one no longer listed is
//!   `Decommissioned`.
//! * firmware consistency ([`FirmwareConsistency`]): `GetNodeFirmwareInventory`
//!   of each component; the `version_entry` versions must agree.
//! * AC power cycle (`PowerControl` with `cold_reset`): one
//!   `ExecuteColdReboot` per rack with every node of the rack from the store
//!   (shelves, compute and switch trays), the timings of `[rms.cold_reboot]`,
//!   then `GetJobStatus` every `poll_interval_ms` until the coordinator job
//!   ends; a failed job fails the step with the job's message (it names the
//!   runbook stage and the nodes).
//!
//! All of these need the store: [`RmsManager::with_inventory`]. Without it
//! (a manager built for a one-off CLI call) ingest and decommission are not
//! offered and `cold_reset` falls back to a force-restart of each component.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rackflow_api::rack_manager as pb;
use rackflow_domain::inventory::{Component, Rack};
use rackflow_store::Store;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::rms::{RmsManager, job_error};
use super::rms_sync::{self, BmcLogin, NodeSource};
use super::{
    ComponentRef, DecommissionState, DecommissionStatus, Decommissioner, ExpectationInjector,
    FirmwareConsistency, ManagerError,
};

/// What the lifecycle capabilities read nodes from.
#[derive(Clone)]
pub struct RmsInventory {
    pub store: Arc<dyn Store>,
    pub login: BmcLogin,
}

impl std::fmt::Debug for RmsInventory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RmsInventory")
            .field("bmc_username", &self.login.username)
            .finish_non_exhaustive()
    }
}

/// `[rms.cold_reboot]`: the `ExecuteColdReboot` timing fields Flow sends
/// (seconds; unset = the rack manager's default, see `docs/rms.md`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ColdRebootSettings {
    pub prestage_shutdown_floor_seconds: Option<u32>,
    pub prestage_shutdown_poll_max_seconds: Option<u32>,
    pub discharge_floor_seconds: Option<u32>,
    pub discharge_poll_max_seconds: Option<u32>,
    pub bmc_up_floor_seconds: Option<u32>,
    pub bmc_up_poll_max_seconds: Option<u32>,
    pub nvos_hello_backoff_seconds: Option<u32>,
    pub compute_boot_wait_seconds: Option<u32>,
    pub poll_interval_seconds: Option<u32>,
}

impl ColdRebootSettings {
    fn request(&self, nodes: Vec<pb::NodeInfo>) -> pb::ExecuteColdRebootRequest {
        pb::ExecuteColdRebootRequest {
            nodes: Some(pb::NodeSet { nodes }),
            domain: None,
            prestage_shutdown_floor_seconds: self.prestage_shutdown_floor_seconds,
            prestage_shutdown_poll_max_seconds: self.prestage_shutdown_poll_max_seconds,
            discharge_floor_seconds: self.discharge_floor_seconds,
            discharge_poll_max_seconds: self.discharge_poll_max_seconds,
            bmc_up_floor_seconds: self.bmc_up_floor_seconds,
            bmc_up_poll_max_seconds: self.bmc_up_poll_max_seconds,
            nvos_hello_backoff_seconds: self.nvos_hello_backoff_seconds,
            compute_boot_wait_seconds: self.compute_boot_wait_seconds,
            poll_interval_seconds: self.poll_interval_seconds,
        }
    }
}

fn failed(call: &str, components: Vec<String>, message: String) -> ManagerError {
    ManagerError::CallFailed {
        call: call.to_owned(),
        components,
        message,
    }
}

fn store_error(e: impl std::fmt::Display) -> ManagerError {
    ManagerError::CallFailed {
        call: "read the inventory".to_owned(),
        components: Vec::new(),
        message: e.to_string(),
    }
}

/// One rack of the store with all its components.
struct RackNodes {
    rack: Rack,
    components: Vec<Component>,
}

impl RackNodes {
    fn sources(&self) -> Vec<NodeSource> {
        self.components
            .iter()
            .map(|c| NodeSource::of(&self.rack, c))
            .collect()
    }
}

impl RmsManager {
    fn inventory(&self) -> Result<&RmsInventory, ManagerError> {
        self.inventory_source()
            .ok_or_else(|| ManagerError::Refused {
                call: "rack lifecycle".to_owned(),
                message: "this rack-manager provider has no inventory store".to_owned(),
            })
    }

    /// The racks of `components`, each with all its components.
    async fn racks_of(&self, components: &[ComponentRef]) -> Result<Vec<RackNodes>, ManagerError> {
        let inventory = self.inventory()?;
        // One read for all of them (a step's components share a rack).
        let query = rackflow_store::ComponentFilterQuery {
            ids: components.iter().map(|c| c.id).collect(),
            ..Default::default()
        };
        let (stored, _) = inventory
            .store
            .component_list(
                &query,
                rackflow_domain::run::Page {
                    offset: 0,
                    limit: 0,
                },
            )
            .await
            .map_err(store_error)?;
        if let Some(gone) = components
            .iter()
            .find(|c| !stored.iter().any(|s| s.id == c.id))
        {
            return Err(failed(
                "read the inventory",
                vec![gone.external_id.clone()],
                format!("component {} is no longer in the inventory", gone.id),
            ));
        }
        let mut rack_ids: Vec<Uuid> = Vec::new();
        let mut seen = HashSet::new();
        for rack_id in stored.iter().filter_map(|c| c.rack_id) {
            if seen.insert(rack_id) {
                rack_ids.push(rack_id);
            }
        }
        let racks = inventory
            .store
            .racks_get_many(&rack_ids)
            .await
            .map_err(store_error)?;
        let mut by_rack: HashMap<Uuid, Vec<Component>> = HashMap::new();
        for c in inventory
            .store
            .components_of_racks(&rack_ids)
            .await
            .map_err(store_error)?
        {
            if let Some(rack_id) = c.rack_id {
                by_rack.entry(rack_id).or_default().push(c);
            }
        }
        Ok(racks
            .into_iter()
            .map(|rack| RackNodes {
                components: by_rack.remove(&rack.id).unwrap_or_default(),
                rack,
            })
            .collect())
    }

    /// `cold_reset` through the rack manager: one `ExecuteColdReboot` per
    /// rack, waited for. `None` when there is no store to read the rack's
    /// nodes from (the caller then falls back to per-component restarts).
    pub(crate) async fn cold_reboot(
        &self,
        components: &[ComponentRef],
    ) -> Option<Result<(), ManagerError>> {
        let inventory = self.inventory_source()?;
        Some(self.cold_reboot_racks(components, &inventory.login).await)
    }

    async fn cold_reboot_racks(
        &self,
        components: &[ComponentRef],
        login: &BmcLogin,
    ) -> Result<(), ManagerError> {
        let names: Vec<String> = components.iter().map(|c| c.external_id.clone()).collect();
        for rack in self.racks_of(components).await? {
            let (nodes, skipped) = rms_sync::nodes_of(&rack.sources(), login);
            if !skipped.is_empty() {
                return Err(ManagerError::Refused {
                    call: "ExecuteColdReboot".to_owned(),
                    message: format!(
                        "rack {} cannot be power cycled as a whole: {}",
                        rack.rack.manager_id(),
                        super::first_listed(&skipped, "; ", " and")
                    ),
                });
            }
            let request = self.config().cold_reboot.request(nodes);
            let reply = self
                .client()
                .execute_cold_reboot(request)
                .await
                .map_err(|status| {
                    failed(
                        "ExecuteColdReboot",
                        names.clone(),
                        status.message().to_owned(),
                    )
                })?
                .into_inner()
                .response
                .unwrap_or_default();
            if reply.status != pb::ReturnCode::Success as i32 {
                let mut message = reply.message;
                for node in &reply.node_results {
                    if node.status != pb::ReturnCode::Success as i32 {
                        message.push_str(&format!("; {}: {}", node.node_id, node.error_message));
                    }
                }
                return Err(failed("ExecuteColdReboot", names.clone(), message));
            }
            tracing::info!(rack = %rack.rack.manager_id(), job_id = %reply.job_id, "rack manager cold reboot started");
            self.wait_job(&reply.job_id, &names).await?;
        }
        Ok(())
    }

    /// Polls a rack-manager job until it is terminal.
    async fn wait_job(&self, job_id: &str, names: &[String]) -> Result<(), ManagerError> {
        let interval = Duration::from_millis(self.config().poll_interval_ms.max(1));
        let deadline = tokio::time::Instant::now()
            + Duration::from_secs(self.config().job_timeout_secs.max(1));
        loop {
            tokio::time::sleep(interval).await;
            let reply = self
                .client()
                .get_job_status(pb::GetJobStatusRequest {
                    job_id: job_id.to_owned(),
                    include_child_job_states: false,
                })
                .await;
            match reply {
                Ok(reply) => {
                    let Some(status) = reply.into_inner().job_states.into_iter().next() else {
                        continue;
                    };
                    match pb::JobExecutionState::try_from(status.execution_state) {
                        Ok(pb::JobExecutionState::Completed) => return Ok(()),
                        Ok(pb::JobExecutionState::Failed) => {
                            return Err(failed(
                                "ExecuteColdReboot",
                                names.to_vec(),
                                job_error(&status),
                            ));
                        }
                        _ => {}
                    }
                }
                Err(status) if status.code() == tonic::Code::NotFound => {
                    return Err(failed(
                        "ExecuteColdReboot",
                        names.to_vec(),
                        format!("job {job_id} not found: {}", status.message()),
                    ));
                }
                Err(status) => {
                    tracing::debug!(job_id, error = %status, "cold reboot status poll failed; polling on");
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(failed(
                    "ExecuteColdReboot",
                    names.to_vec(),
                    format!(
                        "job {job_id} not finished after {}s",
                        self.config().job_timeout_secs
                    ),
                ));
            }
        }
    }
}

#[async_trait]
impl ExpectationInjector for RmsManager {
    async fn inject_expectation(&self, components: &[ComponentRef]) -> Result<(), ManagerError> {
        let login = self.inventory()?.login.clone();
        let wanted: HashSet<Uuid> = components.iter().map(|c| c.id).collect();
        for rack in self.racks_of(components).await? {
            // Every node of the rack (power shelves too: the built-in rule
            // ingests compute and switch trays, and bring-up then powers
            // the shelves through the rack manager).
            let sources = rack.sources();
            let (nodes, skipped) = rms_sync::nodes_of(&sources, &login);
            let missing: Vec<String> = rack
                .components
                .iter()
                .zip(&sources)
                .filter(|(c, _)| wanted.contains(&c.id))
                .filter_map(|(_, s)| rms_sync::node_info(s, &login).err())
                .collect();
            if !missing.is_empty() {
                return Err(ManagerError::Refused {
                    call: "CreateNodes".to_owned(),
                    message: format!(
                        "cannot register with the rack manager: {}",
                        super::first_listed(&missing, "; ", " and")
                    ),
                });
            }
            if !skipped.is_empty() {
                tracing::warn!(rack = %rack.rack.manager_id(), skipped = ?skipped, "components of the rack not registered");
            }
            let reply = self
                .client()
                .create_nodes(pb::CreateNodesRequest {
                    nodes: Some(pb::NodeSet { nodes }),
                })
                .await
                .map_err(|status| {
                    failed(
                        "CreateNodes",
                        components.iter().map(|c| c.external_id.clone()).collect(),
                        status.message().to_owned(),
                    )
                })?
                .into_inner();
            let stats = reply.stats.unwrap_or_default();
            let message = reply.response.map(|r| r.message).unwrap_or_default();
            if stats.failed_nodes > 0 {
                return Err(failed(
                    "CreateNodes",
                    components.iter().map(|c| c.external_id.clone()).collect(),
                    message,
                ));
            }
            tracing::info!(rack = %rack.rack.manager_id(), registered = stats.successful_nodes, answer = %message, "rack registered with the rack manager");
        }
        Ok(())
    }
}

#[async_trait]
impl Decommissioner for RmsManager {
    async fn decommission(&self, components: &[ComponentRef]) -> Result<(), ManagerError> {
        self.inventory()?;
        let listed = self.listed_nodes().await.map_err(|message| {
            failed(
                "ListNodeInventory",
                components.iter().map(|c| c.external_id.clone()).collect(),
                message,
            )
        })?;
        let mut failures = Vec::new();
        let mut messages = Vec::new();
        for component in components {
            // A node the rack manager does not list is already gone.
            if !listed.contains(&(component.rack.clone(), component.external_id.clone())) {
                continue;
            }
            if let Err(message) = self.power_off_and_delete(component).await {
                failures.push(component.external_id.clone());
                messages.push(format!("{}: {message}", component.external_id));
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failed("decommission", failures, messages.join("; ")))
        }
    }
}

impl RmsManager {
    async fn power_off_and_delete(&self, component: &ComponentRef) -> Result<(), String> {
        let mut client = self.client();
        let power = client
            .set_power_state(pb::SetPowerStateRequest {
                node_id: component.external_id.clone(),
                operation: pb::PowerOperation::Off as i32,
                rack_id: component.rack.clone(),
            })
            .await
            .map_err(|s| format!("power off: {}", s.message()))?
            .into_inner();
        if power.status != pb::ReturnCode::Success as i32 {
            return Err("power off: the rack manager reported failure".to_owned());
        }
        let deleted = client
            .delete_node(pb::DeleteNodeRequest {
                node_id: component.external_id.clone(),
                rack_id: component.rack.clone(),
            })
            .await
            .map_err(|s| format!("deregister: {}", s.message()))?
            .into_inner()
            .response
            .unwrap_or_default();
        if deleted.status != pb::ReturnCode::Success as i32
            && !deleted.message.contains("not found")
        {
            return Err(format!("deregister: {}", deleted.message));
        }
        Ok(())
    }

    /// (rack, node) of every node the rack manager lists.
    async fn listed_nodes(&self) -> Result<HashSet<(String, String)>, String> {
        let reply = self
            .client()
            .list_node_inventory(pb::ListNodeInventoryRequest {})
            .await
            .map_err(|s| format!("ListNodeInventory: {}", s.message()))?
            .into_inner();
        Ok(reply
            .nodes
            .into_iter()
            .map(|n| (n.rack_id, n.node_id))
            .collect())
    }
}

#[async_trait]
impl DecommissionStatus for RmsManager {
    async fn decommission_status(
        &self,
        components: &[ComponentRef],
    ) -> Result<HashMap<String, DecommissionState>, ManagerError> {
        let listed = self.listed_nodes().await.map_err(|message| {
            failed(
                "ListNodeInventory",
                components.iter().map(|c| c.external_id.clone()).collect(),
                message,
            )
        })?;
        Ok(components
            .iter()
            .map(|c| {
                let state = if listed.contains(&(c.rack.clone(), c.external_id.clone())) {
                    DecommissionState::Decommissioning("Deregistering".to_owned())
                } else {
                    DecommissionState::Decommissioned
                };
                (c.external_id.clone(), state)
            })
            .collect())
    }
}

#[async_trait]
impl FirmwareConsistency for RmsManager {
    async fn check_firmware_consistency(
        &self,
        components: &[ComponentRef],
    ) -> Result<(), ManagerError> {
        let entry = self.config().version_entry.clone();
        let versions = super::FirmwareStatus::installed_versions(self, components, &[]).await?;
        let unread: Vec<String> = components
            .iter()
            .filter(|c| !versions.contains_key(&c.external_id))
            .map(|c| c.external_id.clone())
            .collect();
        if !unread.is_empty() {
            return Err(failed(
                "GetNodeFirmwareInventory",
                unread,
                format!("no {entry} version could be read"),
            ));
        }
        let mut by_version: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (node, version) in &versions {
            by_version.entry(version).or_default().push(node);
        }
        if by_version.len() <= 1 {
            return Ok(());
        }
        let described: Vec<String> = by_version
            .iter_mut()
            .map(|(version, nodes)| {
                nodes.sort_unstable();
                format!("{version} on {}", super::first_listed(nodes, ", ", " and"))
            })
            .collect();
        Err(failed(
            "VerifyFirmwareConsistency",
            components.iter().map(|c| c.external_id.clone()).collect(),
            format!("{entry} versions differ: {}", described.join("; ")),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_timings_are_left_to_the_rack_manager() {
        let request = ColdRebootSettings::default().request(Vec::new());
        assert_eq!(request.discharge_floor_seconds, None);
        assert_eq!(request.poll_interval_seconds, None);
        let set = ColdRebootSettings {
            discharge_floor_seconds: Some(1),
            compute_boot_wait_seconds: Some(2),
            ..ColdRebootSettings::default()
        }
        .request(Vec::new());
        assert_eq!(set.discharge_floor_seconds, Some(1));
        assert_eq!(set.compute_boot_wait_seconds, Some(2));
        assert_eq!(set.bmc_up_floor_seconds, None);
    }
}
