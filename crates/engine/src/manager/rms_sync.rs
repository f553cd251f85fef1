//! Registering Flow's inventory with a rack manager (`rackflow rms sync`,
//! and `rms.sync_on_start`): every component with an external id and a BMC
//! address becomes the node the `rms` provider addresses — `node_id` = the
//! component's external id, `rack_id` = the rack's external id (its name
//! when it has none) — with its node
//! type from the component type and the rack's model, registered by
//! `CreateNodes` in batches. The rack manager updates a registered node only
//! while it is idle and says which it updated; a node busy with a job is
//! refused (in band) and left as it is.

use rackflow_api::rack_manager as pb;
use rackflow_api::rack_manager::rack_manager_client::RackManagerClient;
use rackflow_domain::ComponentType;
use rackflow_domain::inventory::{Component, Rack};
use rackflow_domain::run::{Page, SecretText};
use rackflow_store::{RackFilter, Store};
use serde::Serialize;
use tonic::transport::Channel;

/// Nodes per `CreateNodes` call.
pub const SYNC_BATCH: usize = 500;

/// What a node is made from: one component and its rack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSource {
    /// The rack manager's rack id: the rack's external id, else its name.
    pub rack_id: String,
    pub rack_model: Option<String>,
    pub component_type: ComponentType,
    /// The component's name (for messages about it).
    pub name: String,
    pub manufacturer: String,
    pub external_id: Option<String>,
    pub bmc_ip: Option<String>,
    pub bmc_mac: Option<String>,
}

impl NodeSource {
    /// A stored component of `rack` (its first BMC).
    pub fn of(rack: &Rack, component: &Component) -> NodeSource {
        let bmc = component.bmcs.first();
        NodeSource {
            rack_id: rack
                .external_id
                .clone()
                .unwrap_or_else(|| rack.name.clone()),
            rack_model: rack.model.clone(),
            component_type: component.component_type,
            name: component.name.clone(),
            manufacturer: component.manufacturer.clone(),
            external_id: component.external_id.clone(),
            bmc_ip: bmc.and_then(|b| b.ip_address.clone()),
            bmc_mac: bmc.map(|b| b.mac_address.clone()),
        }
    }
}

/// How the rack manager logs in to the BMCs; without a user name, nodes
/// are registered without credentials (the rack manager's back end then
/// uses its own defaults).
#[derive(Debug, Clone, Default)]
pub struct BmcLogin {
    pub username: String,
    pub password: Option<SecretText>,
    /// 0: the rack manager's default (443).
    pub port: u32,
}

/// The rack manager's node type of a component, from its type, its rack's
/// model (GB200 / GB300 / VR NVL72) and, for power shelves and GB300
/// compute trays, its manufacturer. `None` when the model says nothing the
/// rack manager knows (the node is then registered without a type).
pub fn node_type(
    component_type: ComponentType,
    rack_model: Option<&str>,
    manufacturer: &str,
) -> Option<pb::NodeType> {
    let maker = manufacturer.to_ascii_lowercase();
    let family = model_family(rack_model)?;
    use pb::NodeType as T;
    Some(match (component_type, family) {
        (ComponentType::Compute, "gb200") => T::ComputeGb200Nvidia,
        (ComponentType::Compute, "gb300") if maker.contains("lenovo") => T::ComputeGb300Lenovo,
        (ComponentType::Compute, "gb300") => T::ComputeGb300Nvidia,
        (ComponentType::Compute, _) => T::ComputeVrnvl72Nvidia,
        (ComponentType::NvSwitch, "gb200") => T::SwitchGb200Nvidia,
        (ComponentType::NvSwitch, "gb300") => T::SwitchGb300Nvidia,
        (ComponentType::NvSwitch, _) => T::SwitchVrnvl72Nvidia,
        (ComponentType::PowerShelf, "gb200") if maker.contains("delta") => T::PowershelfGb200Delta,
        (ComponentType::PowerShelf, "gb200") => T::PowershelfGb200Liteon,
        (ComponentType::PowerShelf, "gb300") if maker.contains("delta") => T::PowershelfGb300Delta,
        (ComponentType::PowerShelf, "gb300") => T::PowershelfGb300Liteon,
        _ => return None,
    })
}

/// The descriptor of a component the rack manager has no node type for — a
/// ToR switch, a UMS or a CDU (the reference's `NodeType` names only
/// compute trays, NVLink switches and power shelves): `role` (`tor_switch`,
/// `ums`, `cdu`), `vendor` (the manufacturer, lower case) and
/// `product_family` (`gb200`, `gb300`, `vr`) when the rack model says it —
/// the dispatch keys a descriptor carries. `None` for the typed kinds.
pub fn node_descriptor(
    component_type: ComponentType,
    rack_model: Option<&str>,
    manufacturer: &str,
) -> Option<pb::NodeDescriptor> {
    let role = match component_type {
        ComponentType::TorSwitch => "tor_switch",
        ComponentType::Ums => "ums",
        ComponentType::Cdu => "cdu",
        _ => return None,
    };
    let mut attributes = std::collections::HashMap::new();
    attributes.insert("role".to_string(), role.to_string());
    let vendor = manufacturer.trim().to_ascii_lowercase();
    if !vendor.is_empty() {
        attributes.insert("vendor".to_string(), vendor);
    }
    if let Some(family) = model_family(rack_model) {
        attributes.insert("product_family".to_string(), family.to_string());
    }
    Some(pb::NodeDescriptor { attributes })
}

/// `gb200`, `gb300` or `vr` (VR NVL72) from a rack model.
fn model_family(rack_model: Option<&str>) -> Option<&'static str> {
    let model = rack_model.unwrap_or_default().to_ascii_lowercase();
    if model.contains("gb300") {
        Some("gb300")
    } else if model.contains("gb200") {
        Some("gb200")
    } else if model.contains("vr") && model.contains("nvl72") {
        Some("vr")
    } else {
        None
    }
}

/// The node of `source`, or why it cannot be one.
pub fn node_info(source: &NodeSource, login: &BmcLogin) -> Result<pb::NodeInfo, String> {
    let Some(node_id) = source
        .external_id
        .as_deref()
        .filter(|s| !s.trim().is_empty())
    else {
        return Err(format!(
            "{}/{}: no external id (not linked to real inventory)",
            source.rack_id, source.name
        ));
    };
    let Some(ip) = source.bmc_ip.as_deref().filter(|s| !s.trim().is_empty()) else {
        return Err(format!("{node_id}: no BMC address"));
    };
    let credentials = (!login.username.is_empty()).then(|| pb::Credentials {
        auth: Some(pb::credentials::Auth::UserPass(pb::UsernamePassword {
            username: login.username.clone(),
            password: login
                .password
                .as_ref()
                .map(|p| p.expose().to_owned())
                .unwrap_or_default(),
        })),
    });
    Ok(pb::NodeInfo {
        node_id: node_id.to_owned(),
        rack_id: source.rack_id.clone(),
        r#type: node_type(
            source.component_type,
            source.rack_model.as_deref(),
            &source.manufacturer,
        )
        .map(|t| t as i32),
        node_descriptor: node_descriptor(
            source.component_type,
            source.rack_model.as_deref(),
            &source.manufacturer,
        ),
        bmc_endpoint: Some(pb::Endpoint {
            interface: Some(pb::NetworkInterface {
                ip_address: ip.to_owned(),
                mac_address: source.bmc_mac.clone().unwrap_or_default(),
                host_name: None,
            }),
            port: login.port,
            credentials,
        }),
        ..Default::default()
    })
}

/// The nodes of `sources`, and why the others are none (see [`node_info`]).
pub fn nodes_of(sources: &[NodeSource], login: &BmcLogin) -> (Vec<pb::NodeInfo>, Vec<String>) {
    let mut nodes = Vec::new();
    let mut skipped = Vec::new();
    for source in sources {
        match node_info(source, login) {
            Ok(node) => nodes.push(node),
            Err(reason) => skipped.push(reason),
        }
    }
    (nodes, skipped)
}

/// What a sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SyncOutcome {
    /// Nodes sent to the rack manager.
    pub sent: u32,
    /// Registered (created, updated or unchanged).
    pub registered: u32,
    /// Refused by the rack manager (e.g. busy with a job).
    pub refused: u32,
    /// Components that are no node, with the reason.
    pub skipped: Vec<String>,
    /// The rack manager's answer per batch ("Created N nodes; updated
    /// existing: …", "… failed: node: reason").
    pub messages: Vec<String>,
}

/// Registers `sources` in batches of [`SYNC_BATCH`]. A transport error or
/// a refused request stops the sync and is returned; per-node refusals are
/// counted in the outcome.
pub async fn register(
    client: &mut RackManagerClient<Channel>,
    sources: &[NodeSource],
    login: &BmcLogin,
) -> Result<SyncOutcome, tonic::Status> {
    let (nodes, skipped) = nodes_of(sources, login);
    let mut outcome = SyncOutcome {
        skipped,
        ..SyncOutcome::default()
    };
    for batch in nodes.chunks(SYNC_BATCH) {
        let reply = client
            .create_nodes(pb::CreateNodesRequest {
                nodes: Some(pb::NodeSet {
                    nodes: batch.to_vec(),
                }),
            })
            .await?
            .into_inner();
        let stats = reply.stats.unwrap_or_default();
        outcome.sent += stats.total_nodes;
        outcome.registered += stats.successful_nodes;
        outcome.refused += stats.failed_nodes;
        if let Some(response) = reply.response {
            outcome.messages.push(response.message);
        }
    }
    Ok(outcome)
}

/// Why a sync from the store failed.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("read the inventory: {0}")]
    Store(#[from] rackflow_store::StoreError),
    #[error("register nodes with the rack manager: {0}")]
    RackManager(#[from] tonic::Status),
}

/// The store's whole inventory as node sources (non-deleted racks).
pub async fn inventory_sources(store: &dyn Store) -> Result<Vec<NodeSource>, SyncError> {
    const PAGE: i64 = 1_000;
    let mut sources = Vec::new();
    let mut offset = 0;
    loop {
        let (racks, _) = store
            .rack_list(
                &RackFilter::default(),
                Page {
                    offset,
                    limit: PAGE,
                },
            )
            .await?;
        if racks.is_empty() {
            break;
        }
        let ids: Vec<uuid::Uuid> = racks.iter().map(|r| r.id).collect();
        let mut by_rack: std::collections::HashMap<uuid::Uuid, Vec<Component>> =
            std::collections::HashMap::new();
        for c in store.components_of_racks(&ids).await? {
            if let Some(rack_id) = c.rack_id {
                by_rack.entry(rack_id).or_default().push(c);
            }
        }
        for rack in &racks {
            for c in by_rack.get(&rack.id).into_iter().flatten() {
                sources.push(NodeSource::of(rack, c));
            }
        }
        offset += i64::try_from(racks.len()).unwrap_or(PAGE);
    }
    Ok(sources)
}

/// Registers the store's inventory with the rack manager.
pub async fn sync_from_store(
    store: &dyn Store,
    client: &mut RackManagerClient<Channel>,
    login: &BmcLogin,
) -> Result<SyncOutcome, SyncError> {
    let sources = inventory_sources(store).await?;
    Ok(register(client, &sources, login).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(ty: ComponentType, model: &str, maker: &str) -> NodeSource {
        NodeSource {
            rack_id: "rack-7".into(),
            rack_model: Some(model.into()),
            component_type: ty,
            name: "compute-00".into(),
            manufacturer: maker.into(),
            external_id: Some("r7-c0".into()),
            bmc_ip: Some("10.0.0.7".into()),
            bmc_mac: Some("aa:bb:cc:dd:ee:07".into()),
        }
    }

    #[test]
    fn node_types_follow_type_model_and_maker() {
        use ComponentType as C;
        use pb::NodeType as T;
        let cases = [
            (
                C::Compute,
                "GB200 NVL72",
                "NVIDIA",
                Some(T::ComputeGb200Nvidia),
            ),
            (
                C::Compute,
                "gb300-nvl72",
                "NVIDIA",
                Some(T::ComputeGb300Nvidia),
            ),
            (
                C::Compute,
                "GB300 NVL72",
                "Lenovo",
                Some(T::ComputeGb300Lenovo),
            ),
            (
                C::Compute,
                "VR NVL72",
                "NVIDIA",
                Some(T::ComputeVrnvl72Nvidia),
            ),
            (
                C::NvSwitch,
                "GB200 NVL72",
                "NVIDIA",
                Some(T::SwitchGb200Nvidia),
            ),
            (
                C::NvSwitch,
                "GB300 NVL72",
                "NVIDIA",
                Some(T::SwitchGb300Nvidia),
            ),
            (
                C::NvSwitch,
                "VR NVL72",
                "NVIDIA",
                Some(T::SwitchVrnvl72Nvidia),
            ),
            (
                C::PowerShelf,
                "GB200 NVL72",
                "Lite-On",
                Some(T::PowershelfGb200Liteon),
            ),
            (
                C::PowerShelf,
                "GB200 NVL72",
                "Delta",
                Some(T::PowershelfGb200Delta),
            ),
            (
                C::PowerShelf,
                "GB300 NVL72",
                "LITEON",
                Some(T::PowershelfGb300Liteon),
            ),
            (
                C::PowerShelf,
                "GB300 NVL72",
                "Delta Electronics",
                Some(T::PowershelfGb300Delta),
            ),
            (C::PowerShelf, "VR NVL72", "Delta", None),
            (C::Compute, "HGX H100", "NVIDIA", None),
        ];
        for (ty, model, maker, want) in cases {
            assert_eq!(
                node_type(ty, Some(model), maker),
                want,
                "{ty} {model} {maker}"
            );
        }
        assert_eq!(node_type(C::Compute, None, "NVIDIA"), None);
        for ty in [C::TorSwitch, C::Ums, C::Cdu] {
            assert_eq!(node_type(ty, Some("GB200 NVL72"), "NVIDIA"), None, "{ty}");
        }
    }

    #[test]
    fn tor_switches_ums_and_cdus_register_with_a_descriptor() {
        use ComponentType as C;
        let attributes = |d: Option<pb::NodeDescriptor>| {
            let mut pairs: Vec<(String, String)> =
                d.expect("descriptor").attributes.into_iter().collect();
            pairs.sort();
            pairs
        };
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(
            attributes(node_descriptor(C::TorSwitch, Some("GB300 NVL72"), "Arista")),
            [
                pair("product_family", "gb300"),
                pair("role", "tor_switch"),
                pair("vendor", "arista")
            ]
        );
        assert_eq!(
            attributes(node_descriptor(C::Ums, None, "")),
            [pair("role", "ums")]
        );
        assert_eq!(
            attributes(node_descriptor(C::Cdu, Some("VR NVL72"), "Vertiv")),
            [
                pair("product_family", "vr"),
                pair("role", "cdu"),
                pair("vendor", "vertiv")
            ]
        );
        for ty in [C::Compute, C::NvSwitch, C::PowerShelf, C::Unknown] {
            assert_eq!(
                node_descriptor(ty, Some("GB200 NVL72"), "NVIDIA"),
                None,
                "{ty}"
            );
        }
        let node = node_info(
            &source(C::Cdu, "GB200 NVL72", "Vertiv"),
            &BmcLogin::default(),
        )
        .expect("node");
        assert_eq!(node.r#type, None);
        assert_eq!(
            node.node_descriptor.expect("descriptor").attributes["role"],
            "cdu"
        );
    }

    #[test]
    fn a_node_is_the_component_in_its_rack_with_its_bmc() {
        let login = BmcLogin {
            username: "admin".into(),
            password: Some(SecretText::new("s3cret")),
            port: 8443,
        };
        let node =
            node_info(&source(ComponentType::Compute, "GB200", "NVIDIA"), &login).expect("node");
        assert_eq!(node.node_id, "r7-c0");
        assert_eq!(node.rack_id, "rack-7");
        assert_eq!(node.r#type, Some(pb::NodeType::ComputeGb200Nvidia as i32));
        let endpoint = node.bmc_endpoint.expect("endpoint");
        assert_eq!(endpoint.port, 8443);
        let interface = endpoint.interface.expect("interface");
        assert_eq!(interface.ip_address, "10.0.0.7");
        assert_eq!(interface.mac_address, "aa:bb:cc:dd:ee:07");
        match endpoint.credentials.and_then(|c| c.auth) {
            Some(pb::credentials::Auth::UserPass(up)) => {
                assert_eq!(
                    (up.username.as_str(), up.password.as_str()),
                    ("admin", "s3cret")
                );
            }
            other => panic!("credentials: {other:?}"),
        }
        // Without a user name: no credentials at all.
        let node = node_info(
            &source(ComponentType::Compute, "GB200", "NVIDIA"),
            &BmcLogin::default(),
        )
        .expect("node");
        assert!(node.bmc_endpoint.expect("endpoint").credentials.is_none());
        // The password never shows in Debug.
        assert!(!format!("{login:?}").contains("s3cret"));
    }

    #[test]
    fn components_without_an_external_id_or_a_bmc_address_are_skipped_with_the_reason() {
        let mut s = source(ComponentType::Compute, "GB200", "NVIDIA");
        s.bmc_ip = None;
        assert_eq!(
            node_info(&s, &BmcLogin::default()),
            Err("r7-c0: no BMC address".to_owned())
        );
        s.external_id = None;
        assert_eq!(
            node_info(&s, &BmcLogin::default()),
            Err("rack-7/compute-00: no external id (not linked to real inventory)".to_owned())
        );
    }
}
