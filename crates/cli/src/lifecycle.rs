//! Inventory lifecycle and NVLink domains on the command line (issue 32):
//! `rack create|patch|delete|purge`, `component get|delete|purge` and
//! `nvl-domain create|attach|detach|list|get|racks`, each one call of the
//! reference's RPC (`CreateExpectedRack`, `PatchRack`, `DeleteRack`,
//! `PurgeRack`, `GetComponentInfoByID`, `DeleteComponent`,
//! `PurgeComponent`, `CreateNVLDomain`, `AttachRacksToNVLDomain`,
//! `DetachRacksFromNVLDomain`, `GetListOfNVLDomains`, `GetNVLinkDomain`,
//! `GetRacksForNVLDomain`); `rack create --nvl-domain` attaches the new
//! rack in a second call.

use anyhow::Context;
use clap::{Args, Subcommand};
use rackflow_api::v1;
use serde::Serialize;

use crate::client::{self, ServerAddress};
use crate::output::{Fields, OutputFormat, Table, or_dash, print_json};

/// `rackflow nvl-domain …`.
#[derive(Debug, Subcommand)]
pub enum NvlDomainCommand {
    /// Create an NVLink domain (its name is unique).
    Create {
        /// The domain's name.
        name: String,
        /// Its id in the external inventory (unique when set).
        #[arg(long, value_name = "ID")]
        external_id: Option<String>,
        /// The NMX-C cluster that manages its fabric.
        #[arg(long, value_name = "ID")]
        nmxc_cluster_id: Option<String>,
    },
    /// Put racks into a domain (a rack in another domain moves).
    Attach {
        /// The domain: UUID or name.
        domain: String,
        /// Racks: UUIDs or names.
        #[arg(required = true)]
        racks: Vec<String>,
    },
    /// Take racks out of their domain.
    Detach {
        /// Racks: UUIDs or names.
        #[arg(required = true)]
        racks: Vec<String>,
    },
    /// List domains by name.
    List(ListArgs),
    /// Show a domain as the reference's NVLink-domain view: its rack group
    /// id, topology (the member racks' model), the phase aggregated over
    /// its components, and with --with-components the components.
    Get {
        /// The domain: its external id (rack group id), UUID or name.
        domain: String,
        /// Include the member racks' components.
        #[arg(long)]
        with_components: bool,
    },
    /// The racks of a domain.
    Racks {
        /// The domain: UUID or name.
        domain: String,
    },
}

/// Flags of `nvl-domain list`.
#[derive(Debug, Clone, Default, Args)]
pub struct ListArgs {
    /// Name patterns: exact names, or with --wildcard LIKE patterns
    /// (`%`, `_`; a pattern without `%` matches anywhere in the name).
    #[arg(long, value_name = "PATTERN")]
    pub name: Vec<String>,
    /// Read --name as LIKE patterns.
    #[arg(long)]
    pub wildcard: bool,
    /// Any pattern may match (default: all must).
    #[arg(long)]
    pub any: bool,
    /// Page size [server default: 100].
    #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
    pub limit: Option<i32>,
    /// Domains to skip.
    #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
    pub offset: Option<i32>,
}

/// A UUID names by id, anything else by name.
pub fn identifier(text: &str) -> v1::Identifier {
    let text = text.trim();
    match uuid::Uuid::parse_str(text) {
        Ok(id) => v1::Identifier {
            id: Some(v1::Uuid { id: id.to_string() }),
            name: String::new(),
        },
        Err(_) => v1::Identifier {
            id: None,
            name: text.to_string(),
        },
    }
}

/// JSON of a domain.
#[derive(Debug, Clone, Serialize)]
pub struct NvlDomainView {
    pub id: String,
    pub name: String,
    pub external_id: Option<String>,
    pub nmxc_cluster_id: Option<String>,
}

impl NvlDomainView {
    fn from_proto(d: &v1::NvlDomain) -> NvlDomainView {
        let identifier = d.identifier.clone().unwrap_or_default();
        NvlDomainView {
            id: identifier.id.map(|u| u.id).unwrap_or_default(),
            name: identifier.name,
            external_id: d.external_id.clone(),
            nmxc_cluster_id: d.nmxc_cluster_id.clone(),
        }
    }
}

/// JSON of `nvl-domain get`.
#[derive(Debug, Clone, Serialize)]
pub struct NvlinkDomainView {
    /// The external id (rack group id); the UUID for a domain without one.
    pub id: String,
    pub name: String,
    pub rack_group_id: String,
    /// The member racks' model (none: no racks, or models differ).
    pub topology: Option<String>,
    /// Aggregated component phase (`ready`, `in_use`, `unknown`, …).
    pub operation_status: String,
    pub nmxc_cluster_id: Option<String>,
    /// Only with `--with-components`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub components: Option<Vec<crate::rack::ComponentView>>,
}

impl NvlinkDomainView {
    fn from_proto(d: &v1::NvLinkDomain, with_components: bool) -> NvlinkDomainView {
        NvlinkDomainView {
            id: d.id.clone(),
            name: d.name.clone(),
            rack_group_id: d.rack_group_id.clone(),
            topology: d.topology.clone(),
            operation_status: crate::rack::phase_name(d.operation_status),
            nmxc_cluster_id: d.nmxc_cluster_id.clone(),
            components: with_components.then(|| {
                d.components
                    .iter()
                    .map(crate::rack::ComponentView::from_proto)
                    .collect()
            }),
        }
    }
}

/// JSON of `nvl-domain list`.
#[derive(Debug, Clone, Serialize)]
pub struct NvlDomainListView {
    pub domains: Vec<NvlDomainView>,
    pub total: i32,
}

/// JSON of a change that answers nothing but success.
#[derive(Debug, Clone, Serialize)]
struct DoneView {
    done: String,
}

fn done(output: OutputFormat, text: String) -> anyhow::Result<()> {
    match output {
        OutputFormat::Json => print_json(&DoneView { done: text }),
        OutputFormat::Table => {
            crate::outln!("{text}");
            Ok(())
        }
    }
}

/// Runs one `nvl-domain` command.
pub async fn run_nvl_domain(
    server: &ServerAddress,
    command: &NvlDomainCommand,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    match command {
        NvlDomainCommand::Create {
            name,
            external_id,
            nmxc_cluster_id,
        } => {
            let id = flow
                .create_nvl_domain(v1::CreateNvlDomainRequest {
                    nvl_domain: Some(v1::NvlDomain {
                        identifier: Some(v1::Identifier {
                            id: None,
                            name: name.clone(),
                        }),
                        external_id: external_id.clone(),
                        nmxc_cluster_id: nmxc_cluster_id.clone(),
                    }),
                })
                .await
                .with_context(|| format!("create NVL domain {name:?}"))?
                .into_inner()
                .id
                .map(|u| u.id)
                .context("the server answered without an id")?;
            match output {
                OutputFormat::Json => print_json(&serde_json::json!({ "id": id })),
                OutputFormat::Table => {
                    crate::outln!("{id}");
                    Ok(())
                }
            }
        }
        NvlDomainCommand::Attach { domain, racks } => {
            flow.attach_racks_to_nvl_domain(v1::AttachRacksToNvlDomainRequest {
                nvl_domain_identifier: Some(identifier(domain)),
                rack_identifiers: racks.iter().map(|r| identifier(r)).collect(),
            })
            .await
            .with_context(|| format!("attach racks to NVL domain {domain}"))?;
            done(
                output,
                format!("{} rack(s) attached to {domain}", racks.len()),
            )
        }
        NvlDomainCommand::Detach { racks } => {
            flow.detach_racks_from_nvl_domain(v1::DetachRacksFromNvlDomainRequest {
                rack_identifiers: racks.iter().map(|r| identifier(r)).collect(),
            })
            .await
            .context("detach racks from their NVL domain")?;
            done(output, format!("{} rack(s) detached", racks.len()))
        }
        NvlDomainCommand::List(args) => {
            let reply = flow
                .get_list_of_nvl_domains(v1::GetListOfNvlDomainsRequest {
                    info: (!args.name.is_empty()).then(|| v1::StringQueryInfo {
                        patterns: args.name.clone(),
                        is_wildcard: args.wildcard,
                        use_or: args.any,
                    }),
                    pagination: (args.limit.is_some() || args.offset.is_some()).then(|| {
                        v1::Pagination {
                            offset: args.offset.unwrap_or(0),
                            limit: args.limit.unwrap_or(0),
                        }
                    }),
                })
                .await
                .context("list NVL domains")?
                .into_inner();
            let view = NvlDomainListView {
                domains: reply
                    .nvl_domains
                    .iter()
                    .map(NvlDomainView::from_proto)
                    .collect(),
                total: reply.total,
            };
            match output {
                OutputFormat::Json => print_json(&view),
                OutputFormat::Table => {
                    let mut table = Table::new(["NAME", "ID", "EXTERNAL ID", "NMX-C CLUSTER"]);
                    for d in &view.domains {
                        table.row([
                            or_dash(&d.name),
                            d.id.clone(),
                            or_dash(d.external_id.as_deref().unwrap_or("")),
                            or_dash(d.nmxc_cluster_id.as_deref().unwrap_or("")),
                        ]);
                    }
                    table.print();
                    crate::outln!("{} of {} domain(s)", view.domains.len(), view.total);
                    Ok(())
                }
            }
        }
        NvlDomainCommand::Get {
            domain,
            with_components,
        } => {
            let found = flow
                .get_nv_link_domain(v1::GetNvLinkDomainRequest {
                    id: domain.clone(),
                    with_components: *with_components,
                })
                .await
                .with_context(|| format!("get NVLink domain {domain}"))?
                .into_inner()
                .domain
                .with_context(|| {
                    format!("NVLink domain {domain}: the server answered without it")
                })?;
            let view = NvlinkDomainView::from_proto(&found, *with_components);
            match output {
                OutputFormat::Json => print_json(&view),
                OutputFormat::Table => {
                    let mut fields = Fields::new();
                    fields
                        .add("ID", &view.id)
                        .add("Name", or_dash(&view.name))
                        .add("Rack group", or_dash(&view.rack_group_id))
                        .add("Topology", or_dash(view.topology.as_deref().unwrap_or("")))
                        .add("Status", &view.operation_status)
                        .add(
                            "NMX-C cluster",
                            or_dash(view.nmxc_cluster_id.as_deref().unwrap_or("")),
                        );
                    fields.print();
                    if let Some(components) = &view.components {
                        crate::outln!();
                        let mut table =
                            Table::new(["TYPE", "NAME", "RACK", "FIRMWARE", "STATE", "ID"]);
                        for c in components {
                            table.row([
                                c.component_type.clone(),
                                or_dash(&c.name),
                                or_dash(&c.rack_external_id),
                                or_dash(&c.firmware_version),
                                or_dash(&c.operational_state),
                                c.id.clone(),
                            ]);
                        }
                        table.print();
                    }
                    Ok(())
                }
            }
        }
        NvlDomainCommand::Racks { domain } => {
            let racks = flow
                .get_racks_for_nvl_domain(v1::GetRacksForNvlDomainRequest {
                    nvl_domain_identifier: Some(identifier(domain)),
                })
                .await
                .with_context(|| format!("racks of NVL domain {domain}"))?
                .into_inner()
                .racks;
            let views: Vec<crate::rack::RackView> = racks
                .iter()
                .map(|r| crate::rack::RackView::from_proto(r, false))
                .collect();
            match output {
                OutputFormat::Json => print_json(&views),
                OutputFormat::Table => {
                    let mut table = Table::new(["NAME", "EXTERNAL ID", "MODEL", "ID"]);
                    for r in &views {
                        table.row([
                            or_dash(&r.name),
                            or_dash(&r.external_id),
                            or_dash(r.model.as_deref().unwrap_or("")),
                            r.id.clone(),
                        ]);
                    }
                    table.print();
                    Ok(())
                }
            }
        }
    }
}

/// The id of the rack `text` names (a UUID, or an external id as `rack
/// get` reads it).
async fn rack_id(flow: &mut client::Flow, text: &str) -> anyhow::Result<String> {
    if let Ok(id) = uuid::Uuid::parse_str(text.trim()) {
        return Ok(id.to_string());
    }
    flow.get_rack_info_by_id(v1::GetRackInfoByIdRequest {
        id: Some(v1::Uuid {
            id: text.to_string(),
        }),
        with_components: false,
    })
    .await
    .with_context(|| format!("find rack {text}"))?
    .into_inner()
    .rack
    .and_then(|r| r.info)
    .and_then(|i| i.id)
    .map(|u| u.id)
    .with_context(|| format!("rack {text}: the server answered without an id"))
}

/// A rack's location flags (`rack create`, `rack patch`).
#[derive(Debug, Clone, Default, Args)]
pub struct LocationArgs {
    /// Location: region.
    #[arg(long)]
    pub region: Option<String>,
    /// Location: datacenter.
    #[arg(long)]
    pub datacenter: Option<String>,
    /// Location: room.
    #[arg(long)]
    pub room: Option<String>,
    /// Location: position.
    #[arg(long)]
    pub position: Option<String>,
}

impl LocationArgs {
    fn any(&self) -> bool {
        [&self.region, &self.datacenter, &self.room, &self.position]
            .iter()
            .any(|f| f.is_some())
    }

    /// The location with these flags over `current`.
    fn over(&self, current: v1::Location) -> v1::Location {
        let pick = |flag: &Option<String>, now: String| flag.clone().unwrap_or(now);
        v1::Location {
            region: pick(&self.region, current.region),
            datacenter: pick(&self.datacenter, current.datacenter),
            room: pick(&self.room, current.room),
            position: pick(&self.position, current.position),
        }
    }
}

/// Flags of `rack create`.
#[derive(Debug, Clone, Default, Args)]
pub struct RackCreateArgs {
    /// The rack's name.
    pub name: String,
    /// Its id in the external inventory (unique; a deleted rack holds it
    /// until purged).
    #[arg(long, value_name = "ID")]
    pub external_id: Option<String>,
    #[arg(long)]
    pub manufacturer: Option<String>,
    /// Rack model, e.g. "GB200 NVL72" (firmware bundles are per model).
    #[arg(long)]
    pub model: Option<String>,
    /// Serial number (unique with the manufacturer).
    #[arg(long)]
    pub serial_number: Option<String>,
    #[arg(long)]
    pub description: Option<String>,
    #[command(flatten)]
    pub location: LocationArgs,
    /// Put the new rack into this NVLink domain (name or UUID).
    #[arg(long, value_name = "DOMAIN")]
    pub nvl_domain: Option<String>,
}

/// JSON of `rack create`.
#[derive(Debug, Clone, Serialize)]
struct CreatedRackView {
    id: String,
    name: String,
    nvl_domain: Option<String>,
}

/// `rackflow rack create`: an expected rack without components (they come
/// with `fleet import` or the inventory sync), attached to a domain when
/// asked.
pub async fn run_rack_create(
    server: &ServerAddress,
    args: &RackCreateArgs,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    let id = flow
        .create_expected_rack(v1::CreateExpectedRackRequest {
            rack: Some(v1::Rack {
                info: Some(v1::DeviceInfo {
                    name: args.name.clone(),
                    manufacturer: text(&args.manufacturer),
                    model: args.model.clone(),
                    serial_number: text(&args.serial_number),
                    description: args.description.clone(),
                    ..Default::default()
                }),
                location: Some(args.location.over(v1::Location::default())),
                external_id: text(&args.external_id),
                ..Default::default()
            }),
        })
        .await
        .with_context(|| format!("create rack {}", args.name))?
        .into_inner()
        .id
        .map(|u| u.id)
        .with_context(|| format!("rack {}: the server answered without an id", args.name))?;
    if let Some(domain) = &args.nvl_domain {
        flow.attach_racks_to_nvl_domain(v1::AttachRacksToNvlDomainRequest {
            nvl_domain_identifier: Some(identifier(domain)),
            rack_identifiers: vec![identifier(&id)],
        })
        .await
        .with_context(|| {
            format!("rack {id} was created; attaching it to NVL domain {domain} failed")
        })?;
    }
    let view = CreatedRackView {
        id: id.clone(),
        name: args.name.clone(),
        nvl_domain: args.nvl_domain.clone(),
    };
    match output {
        OutputFormat::Json => print_json(&view),
        OutputFormat::Table => {
            match &view.nvl_domain {
                Some(domain) => {
                    crate::outln!("rack {} created: {id} (in NVL domain {domain})", view.name)
                }
                None => crate::outln!("rack {} created: {id}", view.name),
            }
            Ok(())
        }
    }
}

/// Flags of `rack patch`.
#[derive(Debug, Clone, Default, Args)]
pub struct RackPatchArgs {
    /// Rack UUID or external id.
    pub rack: String,
    /// New name.
    #[arg(long)]
    pub name: Option<String>,
    /// New description ("" clears it).
    #[arg(long)]
    pub description: Option<String>,
    /// The location parts to change (the others stay as they are).
    #[command(flatten)]
    pub location: LocationArgs,
}

/// `rackflow rack patch`: prints the server's report of what changed.
pub async fn run_rack_patch(
    server: &ServerAddress,
    args: &RackPatchArgs,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    let id = rack_id(&mut flow, &args.rack).await?;
    // PatchRack replaces the location whole: start from the current one.
    let location = if args.location.any() {
        let current = flow
            .get_rack_info_by_id(v1::GetRackInfoByIdRequest {
                id: Some(v1::Uuid { id: id.clone() }),
                with_components: false,
            })
            .await
            .with_context(|| format!("read rack {id}"))?
            .into_inner()
            .rack
            .and_then(|r| r.location)
            .unwrap_or_default();
        Some(args.location.over(current))
    } else {
        None
    };
    let report = flow
        .patch_rack(v1::PatchRackRequest {
            rack: Some(v1::Rack {
                info: Some(v1::DeviceInfo {
                    id: Some(v1::Uuid { id: id.clone() }),
                    name: args.name.clone().unwrap_or_default(),
                    description: args.description.clone(),
                    ..Default::default()
                }),
                location,
                ..Default::default()
            }),
        })
        .await
        .with_context(|| format!("patch rack {id}"))?
        .into_inner()
        .report;
    let report: serde_json::Value =
        serde_json::from_str(&report).unwrap_or(serde_json::Value::String(report));
    match output {
        OutputFormat::Json => print_json(&report),
        OutputFormat::Table => {
            let mut fields = Fields::new();
            fields.add("Rack", &id);
            match report.get("changed").and_then(|c| c.as_object()) {
                Some(changed) if !changed.is_empty() => {
                    for (field, change) in changed {
                        fields.add(field, format!("{} → {}", change["from"], change["to"]));
                    }
                }
                _ => {
                    fields.add("Changed", "nothing");
                }
            }
            fields.print();
            Ok(())
        }
    }
}

/// `rackflow rack delete`.
pub async fn run_rack_delete(
    server: &ServerAddress,
    rack: &str,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    let id = rack_id(&mut flow, rack).await?;
    flow.delete_rack(v1::DeleteRackRequest {
        id: Some(v1::Uuid { id: id.clone() }),
    })
    .await
    .with_context(|| format!("delete rack {id}"))?;
    done(
        output,
        format!("rack {id} deleted (its external id stays reserved until `rack purge {id}`)"),
    )
}

/// `rackflow rack purge`.
pub async fn run_rack_purge(
    server: &ServerAddress,
    id: uuid::Uuid,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    flow.purge_rack(v1::PurgeRackRequest {
        id: Some(v1::Uuid { id: id.to_string() }),
    })
    .await
    .with_context(|| format!("purge rack {id}"))?;
    done(output, format!("rack {id} purged"))
}

/// `rackflow component get`.
pub async fn run_component_get(
    server: &ServerAddress,
    id: uuid::Uuid,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    let component = flow
        .get_component_info_by_id(v1::GetComponentInfoByIdRequest {
            id: Some(v1::Uuid { id: id.to_string() }),
            with_rack: false,
        })
        .await
        .with_context(|| format!("get component {id}"))?
        .into_inner()
        .component
        .with_context(|| format!("component {id}: the server answered without it"))?;
    let view = crate::rack::ComponentView::from_proto(&component);
    match output {
        OutputFormat::Json => print_json(&view),
        OutputFormat::Table => {
            let mut fields = Fields::new();
            let domain = match (&view.nvl_domain_external_id, &view.nvl_domain_id) {
                (Some(external), Some(id)) => format!("{external} ({id})"),
                (None, Some(id)) => id.clone(),
                _ => "-".to_string(),
            };
            let bmcs: Vec<String> = view
                .bmcs
                .iter()
                .map(|b| match &b.ip_address {
                    Some(ip) => format!("{} {} {ip}", b.bmc_type, b.mac_address),
                    None => format!("{} {}", b.bmc_type, b.mac_address),
                })
                .collect();
            fields
                .add("ID", &view.id)
                .add("Type", &view.component_type)
                .add("Name", or_dash(&view.name))
                .add("External ID", or_dash(&view.external_id))
                .add("Rack", or_dash(&view.rack_external_id))
                .add("NVLink domain", domain)
                .add("Manufacturer", or_dash(&view.manufacturer))
                .add("Model", or_dash(view.model.as_deref().unwrap_or("")))
                .add("Serial number", or_dash(&view.serial_number))
                .add(
                    "Firmware",
                    match &view.firmware_observed_at {
                        Some(at) => format!("{} (observed {at})", or_dash(&view.firmware_version)),
                        None => format!("{} (as imported)", or_dash(&view.firmware_version)),
                    },
                )
                .add("Power", or_dash(&view.power_state))
                .add("State", or_dash(&view.operational_state))
                .add(
                    "Position",
                    format!(
                        "slot {} tray {} host {}",
                        view.slot_id, view.tray_idx, view.host_id
                    ),
                )
                .add("BMCs", or_dash(&bmcs.join(", ")));
            fields.print();
            Ok(())
        }
    }
}

/// `rackflow component delete|purge`.
pub async fn run_component_removal(
    server: &ServerAddress,
    id: uuid::Uuid,
    purge: bool,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    let wire = v1::Uuid { id: id.to_string() };
    if purge {
        flow.purge_component(v1::PurgeComponentRequest { id: Some(wire) })
            .await
            .with_context(|| format!("purge component {id}"))?;
        done(output, format!("component {id} purged"))
    } else {
        flow.delete_component(v1::DeleteComponentRequest { id: Some(wire) })
            .await
            .with_context(|| format!("delete component {id}"))?;
        done(output, format!("component {id} deleted"))
    }
}
