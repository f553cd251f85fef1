//! `rackflow rack list` and `rackflow rack get`.

use std::collections::BTreeMap;

use anyhow::Context;
use rackflow_api::v1;
use rackflow_domain::ComponentType;
use serde::Serialize;

use crate::client;
use crate::output::{Fields, OutputFormat, Table, enum_name, or_dash, print_json};

/// JSON view of a rack.
#[derive(Debug, Clone, Serialize)]
pub struct RackView {
    pub id: String,
    pub external_id: String,
    pub name: String,
    pub manufacturer: String,
    pub model: Option<String>,
    pub serial_number: String,
    pub description: Option<String>,
    pub location: LocationView,
    /// The NVLink domain the rack is in (UUIDs; empty: none).
    pub nvl_domain_ids: Vec<String>,
    /// Its external id (the rack group id), when it has one.
    pub nvl_domain_external_ids: Vec<String>,
    /// Aggregated component phase (`ready`, `in_use`, `unknown`, …).
    pub operation_status: String,
    /// `new`, `ingesting`, `ingested` or `decommissioned`.
    pub lifecycle_status: String,
    pub ingested_at: Option<String>,
    pub decommissioned_at: Option<String>,
    pub task_stats: TaskStatsView,
    /// Only with `--with-components`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub components: Option<Vec<ComponentView>>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct LocationView {
    pub region: String,
    pub datacenter: String,
    pub room: String,
    pub position: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct TaskStatsView {
    pub waiting: u32,
    pub pending: u32,
    pub running: u32,
}

/// JSON view of a component.
#[derive(Debug, Clone, Serialize)]
pub struct ComponentView {
    pub id: String,
    /// `Compute`, `NVSwitch`, `PowerShelf`, …
    #[serde(rename = "type")]
    pub component_type: String,
    pub name: String,
    pub external_id: String,
    pub manufacturer: String,
    pub model: Option<String>,
    pub serial_number: String,
    pub firmware_version: String,
    /// When the version was last read back from the hardware (RFC 3339);
    /// `None`: never, the version is as imported.
    pub firmware_observed_at: Option<String>,
    pub slot_id: i32,
    pub tray_idx: i32,
    pub host_id: i32,
    pub power_state: String,
    pub power_state_observed_at: Option<String>,
    /// `in_service`, `drained`, `maintenance`, or "" (never set: ready).
    pub operational_state: String,
    pub operational_reason: String,
    /// `detected`, `not_detected`, or "" (no leak source has reported).
    pub leak_status: String,
    pub leak_observed_at: Option<String>,
    /// `none`, `shutting_down`, `down`, `failed`, or "" (no leak report).
    pub leak_handling: String,
    pub rack_external_id: String,
    /// The NVLink domain of the component's rack.
    pub nvl_domain_id: Option<String>,
    pub nvl_domain_external_id: Option<String>,
    pub bmcs: Vec<BmcView>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BmcView {
    #[serde(rename = "type")]
    pub bmc_type: String,
    pub mac_address: String,
    pub ip_address: Option<String>,
}

/// Display name of a wire component type number (`Compute`, `NVSwitch`, …).
pub fn type_name(value: i32) -> String {
    ComponentType::from_i32(value)
        .map(|t| t.name().to_string())
        .unwrap_or_else(|| format!("type-{value}"))
}

/// `in_service`, `drained`, `maintenance`; "" when unset.
pub fn operational_state_name(value: i32) -> String {
    match v1::OperationalState::try_from(value) {
        Ok(v1::OperationalState::Unspecified) => String::new(),
        Ok(state) => enum_name(state.as_str_name(), "OPERATIONAL_STATE_"),
        Err(_) => format!("state-{value}"),
    }
}

/// `new`, `ingesting`, `ingested`, `decommissioned` of a wire
/// `RackLifecycleStatus` ("unknown" for a server that does not send it).
pub fn lifecycle_name(value: i32) -> String {
    match v1::RackLifecycleStatus::try_from(value) {
        Ok(v1::RackLifecycleStatus::Unspecified) | Err(_) => "unknown".to_string(),
        Ok(status) => enum_name(status.as_str_name(), "RACK_LIFECYCLE_STATUS_"),
    }
}

/// `ready`, `in_use`, `unknown`, … of a wire `Phase`.
pub fn phase_name(value: i32) -> String {
    v1::Phase::try_from(value)
        .map(|p| enum_name(p.as_str_name(), "PHASE_"))
        .unwrap_or_else(|_| "unknown".to_string())
}

fn uuid_text(id: Option<&v1::Uuid>) -> String {
    id.map(|u| u.id.clone()).unwrap_or_default()
}

impl RackView {
    pub fn from_proto(rack: &v1::Rack, with_components: bool) -> RackView {
        let info = rack.info.clone().unwrap_or_default();
        let location = rack.location.clone().unwrap_or_default();
        let stats = rack.task_stats.unwrap_or_default();
        RackView {
            id: uuid_text(info.id.as_ref()),
            external_id: rack.external_id.clone(),
            name: info.name,
            manufacturer: info.manufacturer,
            model: info.model,
            serial_number: info.serial_number,
            description: info.description,
            location: LocationView {
                region: location.region,
                datacenter: location.datacenter,
                room: location.room,
                position: location.position,
            },
            nvl_domain_ids: rack.nvl_domain_ids.iter().map(|u| u.id.clone()).collect(),
            nvl_domain_external_ids: rack.nvl_domain_external_ids.clone(),
            operation_status: phase_name(rack.operation_status),
            lifecycle_status: lifecycle_name(rack.lifecycle_status),
            ingested_at: crate::output::timestamp(rack.ingested_at.as_ref()),
            decommissioned_at: crate::output::timestamp(rack.decommissioned_at.as_ref()),
            task_stats: TaskStatsView {
                waiting: stats.waiting_task_count,
                pending: stats.pending_task_count,
                running: stats.running_task_count,
            },
            components: with_components.then(|| {
                rack.components
                    .iter()
                    .map(ComponentView::from_proto)
                    .collect()
            }),
        }
    }

    /// `18 Compute, 9 NVSwitch, 8 PowerShelf` (types in name order).
    pub fn component_summary(&self) -> String {
        let Some(components) = &self.components else {
            return String::new();
        };
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for c in components {
            *counts.entry(c.component_type.as_str()).or_default() += 1;
        }
        counts
            .iter()
            .map(|(t, n)| format!("{n} {t}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `group-7 (UUID)`, the UUID alone without an external id, `-`
    /// outside any domain.
    pub fn nvl_domain_text(&self) -> String {
        let Some(id) = self.nvl_domain_ids.first() else {
            return "-".to_string();
        };
        match self.nvl_domain_external_ids.first() {
            Some(external) => format!("{external} ({id})"),
            None => id.clone(),
        }
    }

    fn location_text(&self) -> String {
        let l = &self.location;
        [&l.region, &l.datacenter, &l.room, &l.position]
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(" / ")
    }
}

impl ComponentView {
    pub fn from_proto(c: &v1::Component) -> ComponentView {
        let info = c.info.clone().unwrap_or_default();
        let position = c.position.unwrap_or_default();
        ComponentView {
            id: uuid_text(info.id.as_ref()),
            component_type: type_name(c.r#type),
            name: info.name,
            external_id: c.component_id.clone(),
            manufacturer: info.manufacturer,
            model: info.model,
            serial_number: info.serial_number,
            firmware_version: c.firmware_version.clone(),
            firmware_observed_at: crate::output::timestamp(c.firmware_observed_at.as_ref()),
            slot_id: position.slot_id,
            tray_idx: position.tray_idx,
            host_id: position.host_id,
            power_state: c.power_state.clone(),
            power_state_observed_at: crate::output::timestamp(c.power_state_observed_at.as_ref()),
            operational_state: operational_state_name(c.operational_state),
            operational_reason: c.operational_reason.clone(),
            leak_status: match v1::LeakStatus::try_from(c.leak_status) {
                Ok(v1::LeakStatus::Unknown) | Err(_) => String::new(),
                Ok(status) => enum_name(status.as_str_name(), "LEAK_STATUS_"),
            },
            leak_observed_at: crate::output::timestamp(c.leak_observed_at.as_ref()),
            leak_handling: match v1::LeakHandlingStatus::try_from(c.leak_handling_status) {
                Ok(v1::LeakHandlingStatus::Unknown) | Err(_) => String::new(),
                Ok(status) => enum_name(status.as_str_name(), "LEAK_HANDLING_STATUS_"),
            },
            rack_external_id: c.rack_external_id.clone(),
            nvl_domain_id: c.nvl_domain_id.as_ref().map(|u| u.id.clone()),
            nvl_domain_external_id: c.nvl_domain_external_id.clone(),
            bmcs: c
                .bmcs
                .iter()
                .map(|b| BmcView {
                    bmc_type: match v1::BmcType::try_from(b.r#type) {
                        Ok(v1::BmcType::Host) => "Host".to_string(),
                        Ok(v1::BmcType::Dpu) => "DPU".to_string(),
                        _ => "Unknown".to_string(),
                    },
                    mac_address: b.mac_address.clone(),
                    ip_address: b.ip_address.clone(),
                })
                .collect(),
        }
    }
}

/// A lifecycle status on the command line (`rack list --status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LifecycleArg {
    New,
    Ingesting,
    Ingested,
    Decommissioned,
}

impl LifecycleArg {
    fn to_wire(self) -> i32 {
        (match self {
            LifecycleArg::New => v1::RackLifecycleStatus::New,
            LifecycleArg::Ingesting => v1::RackLifecycleStatus::Ingesting,
            LifecycleArg::Ingested => v1::RackLifecycleStatus::Ingested,
            LifecycleArg::Decommissioned => v1::RackLifecycleStatus::Decommissioned,
        }) as i32
    }
}

/// JSON of `rack list`.
#[derive(Debug, Clone, Serialize)]
pub struct RackListView {
    pub total: i32,
    pub racks: Vec<RackView>,
}

/// `rackflow rack list`.
pub async fn run_list(
    server: &crate::client::ServerAddress,
    with_components: bool,
    limit: Option<i32>,
    offset: Option<i32>,
    status: &[LifecycleArg],
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    let pagination = (limit.is_some() || offset.is_some()).then(|| v1::Pagination {
        offset: offset.unwrap_or(0),
        limit: limit.unwrap_or(0),
    });
    let response = flow
        .get_list_of_racks(v1::GetListOfRacksRequest {
            with_components,
            pagination,
            lifecycle_statuses: status.iter().map(|s| s.to_wire()).collect(),
            ..Default::default()
        })
        .await
        .context("list racks")?
        .into_inner();
    let view = RackListView {
        total: response.total,
        racks: response
            .racks
            .iter()
            .map(|r| RackView::from_proto(r, with_components))
            .collect(),
    };
    match output {
        OutputFormat::Json => print_json(&view)?,
        OutputFormat::Table => {
            let mut headers = vec![
                "EXTERNAL ID",
                "NAME",
                "MANUFACTURER",
                "MODEL",
                "LOCATION",
                "STATUS",
            ];
            if with_components {
                headers.push("COMPONENTS");
            }
            headers.push("ID");
            let mut table = Table::new(headers);
            for rack in &view.racks {
                let mut row = vec![
                    or_dash(&rack.external_id),
                    or_dash(&rack.name),
                    or_dash(&rack.manufacturer),
                    or_dash(rack.model.as_deref().unwrap_or("")),
                    or_dash(&rack.location_text()),
                    rack.operation_status.clone(),
                ];
                if with_components {
                    row.push(or_dash(&rack.component_summary()));
                }
                row.push(rack.id.clone());
                table.row(row);
            }
            table.print();
            crate::outln!(
                "{} of {} racks",
                view.racks.len(),
                view.total
                    .max(i32::try_from(view.racks.len()).unwrap_or(i32::MAX))
            );
        }
    }
    Ok(())
}

/// Every rack, a page of 100 at a time (with components if asked).
pub async fn all_racks(
    flow: &mut client::Flow,
    with_components: bool,
) -> anyhow::Result<Vec<v1::Rack>> {
    const PAGE: i32 = 100;
    let mut racks = Vec::new();
    loop {
        let page = flow
            .get_list_of_racks(v1::GetListOfRacksRequest {
                with_components,
                pagination: Some(v1::Pagination {
                    offset: i32::try_from(racks.len()).unwrap_or(i32::MAX),
                    limit: PAGE,
                }),
                ..Default::default()
            })
            .await
            .context("list racks")?
            .into_inner();
        let got = page.racks.len();
        racks.extend(page.racks);
        let total = usize::try_from(page.total).unwrap_or(0);
        if got == 0 || racks.len() >= total {
            return Ok(racks);
        }
    }
}

/// `rackflow rack get ID_OR_EXTERNAL_ID`.
pub async fn run_get(
    server: &crate::client::ServerAddress,
    id: &str,
    with_components: bool,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    let response = flow
        .get_rack_info_by_id(v1::GetRackInfoByIdRequest {
            id: Some(v1::Uuid { id: id.to_string() }),
            with_components,
        })
        .await
        .with_context(|| format!("get rack {id}"))?
        .into_inner();
    let rack = response
        .rack
        .with_context(|| format!("get rack {id}: the server answered without a rack"))?;
    let view = RackView::from_proto(&rack, with_components);
    match output {
        OutputFormat::Json => print_json(&view)?,
        OutputFormat::Table => print_rack(&view),
    }
    Ok(())
}

fn print_rack(rack: &RackView) {
    let mut fields = Fields::new();
    fields
        .add("ID", &rack.id)
        .add("External ID", or_dash(&rack.external_id))
        .add("Name", or_dash(&rack.name))
        .add("Manufacturer", or_dash(&rack.manufacturer))
        .add("Model", or_dash(rack.model.as_deref().unwrap_or("")))
        .add("Serial number", or_dash(&rack.serial_number));
    if let Some(d) = &rack.description {
        fields.add("Description", d);
    }
    fields
        .add("Region", or_dash(&rack.location.region))
        .add("Datacenter", or_dash(&rack.location.datacenter))
        .add("Room", or_dash(&rack.location.room))
        .add("Position", or_dash(&rack.location.position))
        .add("NVLink domain", rack.nvl_domain_text())
        .add("Status", &rack.operation_status)
        .add(
            "Lifecycle",
            match (&rack.ingested_at, &rack.decommissioned_at) {
                (_, Some(at)) if rack.lifecycle_status == "decommissioned" => {
                    format!("decommissioned {at}")
                }
                (Some(at), _) if rack.lifecycle_status == "ingested" => {
                    format!("ingested {at}")
                }
                _ => rack.lifecycle_status.clone(),
            },
        )
        .add(
            "Tasks",
            format!(
                "{} waiting, {} pending, {} running",
                rack.task_stats.waiting, rack.task_stats.pending, rack.task_stats.running
            ),
        );
    if rack.components.is_some() {
        fields.add("Components", or_dash(&rack.component_summary()));
    }
    fields.print();
    if let Some(components) = &rack.components {
        crate::outln!();
        components_table(components).print();
    }
}

/// The components table of `rack get --with-components` and
/// `component list`.
pub fn components_table(components: &[ComponentView]) -> Table {
    {
        let mut table = Table::new([
            "TYPE",
            "NAME",
            "EXTERNAL ID",
            "MODEL",
            "FIRMWARE",
            "OBSERVED",
            "POWER",
            "STATE",
            "LEAK",
            "SLOT",
            "TRAY",
            "HOST",
            "BMC MAC",
            "BMC IP",
            "ID",
        ]);
        for c in components {
            let bmc = c.bmcs.first();
            table.row([
                c.component_type.clone(),
                or_dash(&c.name),
                or_dash(&c.external_id),
                or_dash(c.model.as_deref().unwrap_or("")),
                or_dash(&c.firmware_version),
                // "-": as imported, never read back from the hardware.
                or_dash(c.firmware_observed_at.as_deref().unwrap_or("")),
                or_dash(&c.power_state),
                or_dash(&c.operational_state),
                or_dash(&if c.leak_handling.is_empty() {
                    c.leak_status.clone()
                } else {
                    format!("{} ({})", c.leak_status, c.leak_handling)
                }),
                c.slot_id.to_string(),
                c.tray_idx.to_string(),
                c.host_id.to_string(),
                or_dash(bmc.map(|b| b.mac_address.as_str()).unwrap_or("")),
                or_dash(bmc.and_then(|b| b.ip_address.as_deref()).unwrap_or("")),
                c.id.clone(),
            ]);
        }
        table
    }
}
