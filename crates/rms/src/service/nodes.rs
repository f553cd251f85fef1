//! Registered nodes and request normalisation (spec §2.1).
//!
//! Owns the in-memory node registry — racks are created on first node and
//! kept only in memory, as in the reference, which is stateless with respect
//! to inventory — the per-rack power guard, and the conversion of wire
//! `NodeInfo` into a back end's [`NodeTarget`] with the reference's endpoint
//! policy (port 0 → 443, ports above 65535 and session tokens refused).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use rackflow_api::rack_manager as pb;
use tonic::Status;

use crate::backend::{BmcCredentials, BmcEndpoint, NodeTarget, Secret};

/// Port a BMC endpoint of port 0 means.
pub const DEFAULT_BMC_PORT: u16 = 443;

/// A registered node: its wire description (for inventory listings) and the
/// back-end target built from it.
#[derive(Debug, Clone)]
pub struct RegisteredNode {
    pub info: pb::NodeInfo,
    pub target: NodeTarget,
}

/// Why a registered node could not be found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    RackNotFound,
    NodeNotFound,
}

impl Lookup {
    /// The in-band message of the reference.
    pub fn message(self) -> &'static str {
        match self {
            Lookup::RackNotFound => "rack not found",
            Lookup::NodeNotFound => "node not found",
        }
    }
}

/// Racks → nodes, in memory. The lock is a std lock held only to copy data
/// in or out, never across an await.
#[derive(Debug, Default)]
pub struct NodeRegistry {
    racks: RwLock<BTreeMap<String, BTreeMap<String, RegisteredNode>>>,
    power_busy: Arc<Mutex<HashSet<String>>>,
}

impl NodeRegistry {
    /// Registers (or replaces) a node; its rack is created if missing.
    pub fn insert(&self, node: RegisteredNode) {
        let mut racks = self.racks.write().unwrap_or_else(PoisonError::into_inner);
        racks
            .entry(node.target.rack_id.clone())
            .or_default()
            .insert(node.target.node_id.clone(), node);
    }

    pub fn get(&self, rack_id: &str, node_id: &str) -> Result<RegisteredNode, Lookup> {
        let racks = self.racks.read().unwrap_or_else(PoisonError::into_inner);
        let rack = racks.get(rack_id).ok_or(Lookup::RackNotFound)?;
        rack.get(node_id).cloned().ok_or(Lookup::NodeNotFound)
    }

    /// Removes a node; a rack left empty is removed too.
    pub fn remove(&self, rack_id: &str, node_id: &str) -> Result<(), Lookup> {
        let mut racks = self.racks.write().unwrap_or_else(PoisonError::into_inner);
        let rack = racks.get_mut(rack_id).ok_or(Lookup::RackNotFound)?;
        rack.remove(node_id).ok_or(Lookup::NodeNotFound)?;
        if rack.is_empty() {
            racks.remove(rack_id);
        }
        Ok(())
    }

    /// The nodes of one rack, in node-id order.
    pub fn rack_nodes(&self, rack_id: &str) -> Result<Vec<RegisteredNode>, Lookup> {
        let racks = self.racks.read().unwrap_or_else(PoisonError::into_inner);
        racks
            .get(rack_id)
            .map(|rack| rack.values().cloned().collect())
            .ok_or(Lookup::RackNotFound)
    }

    /// Every node, by rack then node id.
    pub fn all_nodes(&self) -> Vec<RegisteredNode> {
        let racks = self.racks.read().unwrap_or_else(PoisonError::into_inner);
        racks.values().flat_map(|r| r.values().cloned()).collect()
    }

    pub fn rack_ids(&self) -> Vec<String> {
        let racks = self.racks.read().unwrap_or_else(PoisonError::into_inner);
        racks.keys().cloned().collect()
    }

    /// Takes the rack's power guard, or `None` while another power
    /// operation (or a delete) holds it.
    pub fn try_power_guard(&self, rack_id: &str) -> Option<PowerGuard> {
        let mut busy = self
            .power_busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        busy.insert(rack_id.to_owned()).then(|| PowerGuard {
            rack_id: rack_id.to_owned(),
            busy: Arc::clone(&self.power_busy),
        })
    }
}

/// Holds a rack's power guard; released on drop (also on panic or a
/// dropped RPC future).
#[derive(Debug)]
pub struct PowerGuard {
    rack_id: String,
    busy: Arc<Mutex<HashSet<String>>>,
}

impl Drop for PowerGuard {
    fn drop(&mut self) {
        self.busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.rack_id);
    }
}

/// The node type number of a `NodeInfo`; an unknown enum number is a
/// malformed request (`INVALID_ARGUMENT`, spec §2.1 case 2).
pub fn node_type_of(info: &pb::NodeInfo) -> Result<i32, Status> {
    match info.r#type {
        None => Ok(0),
        Some(n) => pb::NodeType::try_from(n)
            .map(|t| t as i32)
            .map_err(|_| Status::invalid_argument(format!("invalid node type: {n}"))),
    }
}

/// Checks every node's type before anything else happens.
pub fn normalize_node_set(nodes: &[pb::NodeInfo]) -> Result<(), Status> {
    nodes.iter().try_for_each(|n| node_type_of(n).map(|_| ()))
}

/// Builds the back-end target of a node. `Err` is the in-band message.
pub fn target_of(info: &pb::NodeInfo, require_credentials: bool) -> Result<NodeTarget, String> {
    if info.node_id.trim().is_empty() {
        return Err("node_id is required".to_owned());
    }
    let Some(endpoint) = &info.bmc_endpoint else {
        return Err(format!(
            "BMC endpoint is required for node {}",
            info.node_id
        ));
    };
    let port = match endpoint.port {
        0 => DEFAULT_BMC_PORT,
        p => u16::try_from(p).map_err(|_| format!("port {p} is out of range (must be 1-65535)"))?,
    };
    let interface = endpoint.interface.clone().unwrap_or_default();
    if interface.ip_address.trim().is_empty()
        && interface.host_name.as_deref().is_none_or(str::is_empty)
    {
        return Err(format!(
            "BMC endpoint of node {} has no address",
            info.node_id
        ));
    }
    let credentials = match endpoint.credentials.as_ref().and_then(|c| c.auth.as_ref()) {
        Some(pb::credentials::Auth::UserPass(up)) => BmcCredentials {
            username: up.username.clone(),
            password: Secret::new(up.password.clone()),
        },
        Some(pb::credentials::Auth::SessionToken(_)) => {
            return Err(
                "BMC endpoint credentials use unsupported session_token auth; use user_pass credentials"
                    .to_owned(),
            );
        }
        None if require_credentials => {
            return Err(format!("Missing BMC credentials for node {}", info.node_id));
        }
        None => BmcCredentials::default(),
    };
    let address = if interface.ip_address.trim().is_empty() {
        interface.host_name.clone().unwrap_or_default()
    } else {
        interface.ip_address.clone()
    };
    if is_switch(info.r#type.unwrap_or(0)) {
        check_host_endpoints(info)?;
    }
    Ok(NodeTarget {
        rack_id: info.rack_id.clone(),
        node_id: info.node_id.clone(),
        node_type: info.r#type.unwrap_or(0),
        bmc: BmcEndpoint {
            address,
            port,
            mac_address: interface.mac_address,
            credentials,
        },
    })
}

/// Switch node types (their host endpoint is the NVOS / NVUE side).
fn is_switch(node_type: i32) -> bool {
    crate::backend::NodeKind::of(node_type) == Some(crate::backend::NodeKind::Switch)
}

/// A switch's host endpoints get the BMC endpoint's policy: a port above
/// 65535 and `session_token` credentials are refused.
fn check_host_endpoints(info: &pb::NodeInfo) -> Result<(), String> {
    for endpoint in info
        .host_endpoint
        .iter()
        .chain(info.additional_host_endpoints.iter())
    {
        if endpoint.port > u32::from(u16::MAX) {
            return Err(format!(
                "host endpoint port {} is out of range (must be 1-65535)",
                endpoint.port
            ));
        }
        if let Some(pb::credentials::Auth::SessionToken(_)) =
            endpoint.credentials.as_ref().and_then(|c| c.auth.as_ref())
        {
            return Err(
                "host endpoint credentials use unsupported session_token auth; use user_pass credentials"
                    .to_owned(),
            );
        }
    }
    Ok(())
}

/// The wire inventory entry of a registered node.
pub fn inventory_of(node: &RegisteredNode) -> pb::NodeInventoryInfo {
    let hosts = node
        .info
        .host_endpoint
        .iter()
        .chain(node.info.additional_host_endpoints.iter())
        .filter_map(|e| e.interface.as_ref());
    let (host_ip_addresses, host_mac_addresses) = hosts
        .map(|i| (i.ip_address.clone(), i.mac_address.clone()))
        .unzip();
    pb::NodeInventoryInfo {
        node_id: node.target.node_id.clone(),
        product: String::new(),
        health: String::new(),
        ip_address: node.target.bmc.address.clone(),
        port: u32::from(node.target.bmc.port),
        r#type: node.target.node_type,
        components: Vec::new(),
        mac_address: node.target.bmc.mac_address.clone(),
        rack_id: node.target.rack_id.clone(),
        host_mac_addresses,
        host_ip_addresses,
        node_descriptor: node.info.node_descriptor.clone(),
    }
}

/// Which registered nodes of a rack a by-type request means: a node type,
/// or (for an unspecified type) a descriptor.
#[derive(Debug, Clone)]
pub struct NodeSelector {
    node_type: pb::NodeType,
    descriptor: Option<pb::NodeDescriptor>,
}

impl NodeSelector {
    /// An unknown type, or neither a type nor a descriptor, is a
    /// malformed request (`INVALID_ARGUMENT`).
    pub fn parse(node_type: i32, descriptor: Option<&pb::NodeDescriptor>) -> Result<Self, Status> {
        let node_type = pb::NodeType::try_from(node_type)
            .map_err(|_| Status::invalid_argument(format!("invalid node type: {node_type}")))?;
        let descriptor = descriptor.filter(|d| !d.attributes.is_empty()).cloned();
        if node_type == pb::NodeType::Unspecified && descriptor.is_none() {
            return Err(Status::invalid_argument(
                "node_type or node_descriptor is required",
            ));
        }
        Ok(NodeSelector {
            node_type,
            descriptor,
        })
    }

    pub fn matches(&self, node: &RegisteredNode) -> bool {
        if self.node_type != pb::NodeType::Unspecified {
            node.target.node_type == self.node_type as i32
        } else {
            self.descriptor
                .as_ref()
                .is_some_and(|d| descriptor_matches(node.info.node_descriptor.as_ref(), d))
        }
    }
}

/// True when every attribute of `wanted` is present with the same value in
/// the node's descriptor.
pub fn descriptor_matches(node: Option<&pb::NodeDescriptor>, wanted: &pb::NodeDescriptor) -> bool {
    let Some(node) = node else {
        return false;
    };
    !wanted.attributes.is_empty()
        && wanted
            .attributes
            .iter()
            .all(|(k, v)| node.attributes.get(k) == Some(v))
}

/// Credentials with the password removed, for storing a node's wire
/// description (inventory listings never echo secrets).
pub fn redacted(info: &pb::NodeInfo) -> pb::NodeInfo {
    let strip = |e: &pb::Endpoint| pb::Endpoint {
        credentials: None,
        ..e.clone()
    };
    pb::NodeInfo {
        bmc_endpoint: info.bmc_endpoint.as_ref().map(strip),
        host_endpoint: info.host_endpoint.as_ref().map(strip),
        additional_host_endpoints: info.additional_host_endpoints.iter().map(strip).collect(),
        ..info.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(port: u32, auth: Option<pb::credentials::Auth>) -> pb::NodeInfo {
        pb::NodeInfo {
            node_id: "n1".into(),
            rack_id: "r1".into(),
            r#type: Some(pb::NodeType::ComputeGb200Nvidia as i32),
            bmc_endpoint: Some(pb::Endpoint {
                interface: Some(pb::NetworkInterface {
                    ip_address: "10.0.0.5".into(),
                    ..Default::default()
                }),
                port,
                credentials: auth.map(|a| pb::Credentials { auth: Some(a) }),
            }),
            ..Default::default()
        }
    }

    fn user_pass() -> Option<pb::credentials::Auth> {
        Some(pb::credentials::Auth::UserPass(pb::UsernamePassword {
            username: "admin".into(),
            password: "s3cret".into(),
        }))
    }

    #[test]
    fn endpoint_policy() {
        let t = target_of(&node(0, user_pass()), true).unwrap();
        assert_eq!(t.bmc.port, 443);
        assert_eq!(t.bmc.credentials.password.expose(), "s3cret");
        assert!(!format!("{t:?}").contains("s3cret"));
        assert_eq!(
            target_of(&node(70000, None), false).unwrap_err(),
            "port 70000 is out of range (must be 1-65535)"
        );
        assert_eq!(
            target_of(
                &node(443, Some(pb::credentials::Auth::SessionToken("t".into()))),
                false
            )
            .unwrap_err(),
            "BMC endpoint credentials use unsupported session_token auth; use user_pass credentials"
        );
        assert_eq!(
            target_of(&node(443, None), true).unwrap_err(),
            "Missing BMC credentials for node n1"
        );
        assert!(target_of(&node(443, None), false).is_ok());
        let mut no_bmc = node(443, None);
        no_bmc.bmc_endpoint = None;
        assert_eq!(
            target_of(&no_bmc, false).unwrap_err(),
            "BMC endpoint is required for node n1"
        );
    }

    #[test]
    fn unknown_node_type_is_invalid_argument() {
        let mut n = node(443, None);
        n.r#type = Some(99);
        let status = node_type_of(&n).unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(normalize_node_set(&[node(443, None)]).is_ok());
    }

    #[test]
    fn registry_lookup_remove_and_power_guard() {
        let registry = NodeRegistry::default();
        let info = node(443, user_pass());
        let target = target_of(&info, false).unwrap();
        registry.insert(RegisteredNode {
            info: redacted(&info),
            target,
        });
        assert!(registry.get("r1", "n1").is_ok());
        assert_eq!(registry.get("r2", "n1").unwrap_err(), Lookup::RackNotFound);
        assert_eq!(registry.get("r1", "n2").unwrap_err(), Lookup::NodeNotFound);
        assert!(
            registry
                .get("r1", "n1")
                .unwrap()
                .info
                .bmc_endpoint
                .unwrap()
                .credentials
                .is_none()
        );
        let guard = registry.try_power_guard("r1").unwrap();
        assert!(registry.try_power_guard("r1").is_none());
        assert!(registry.try_power_guard("r2").is_some());
        drop(guard);
        assert!(registry.try_power_guard("r1").is_some());
        registry.remove("r1", "n1").unwrap();
        assert!(registry.rack_ids().is_empty());
    }

    #[test]
    fn descriptor_matching_needs_every_attribute() {
        let d = |pairs: &[(&str, &str)]| pb::NodeDescriptor {
            attributes: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        };
        let node = d(&[("role", "compute"), ("vendor", "wiwynn")]);
        assert!(descriptor_matches(Some(&node), &d(&[("role", "compute")])));
        assert!(!descriptor_matches(Some(&node), &d(&[("role", "switch")])));
        assert!(!descriptor_matches(None, &d(&[("role", "compute")])));
        assert!(!descriptor_matches(Some(&node), &d(&[])));
    }
}

#[cfg(test)]
mod host_endpoint_tests {
    use super::*;

    fn switch_with_host(port: u32, token: bool) -> pb::NodeInfo {
        let credentials = token.then(|| pb::Credentials {
            auth: Some(pb::credentials::Auth::SessionToken("t".into())),
        });
        pb::NodeInfo {
            node_id: "sw-1".into(),
            rack_id: "r".into(),
            r#type: Some(pb::NodeType::SwitchGb200Nvidia as i32),
            bmc_endpoint: Some(pb::Endpoint {
                interface: Some(pb::NetworkInterface {
                    ip_address: "10.0.0.1".into(),
                    ..Default::default()
                }),
                port: 0,
                credentials: None,
            }),
            host_endpoint: Some(pb::Endpoint {
                interface: Some(pb::NetworkInterface {
                    ip_address: "10.0.0.2".into(),
                    ..Default::default()
                }),
                port,
                credentials,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn switch_host_endpoints_follow_the_bmc_policy() {
        assert!(target_of(&switch_with_host(22, false), false).is_ok());
        assert_eq!(
            target_of(&switch_with_host(70_000, false), false).unwrap_err(),
            "host endpoint port 70000 is out of range (must be 1-65535)"
        );
        assert_eq!(
            target_of(&switch_with_host(443, true), false).unwrap_err(),
            "host endpoint credentials use unsupported session_token auth; use user_pass credentials"
        );
        // A compute node's host endpoint is not a switch's: left alone.
        let mut compute = switch_with_host(70_000, true);
        compute.r#type = Some(pb::NodeType::ComputeGb200Nvidia as i32);
        assert!(target_of(&compute, false).is_ok());
    }
}
