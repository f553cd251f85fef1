//! `rackflow fleet generate` and `rackflow fleet import`: the fleet file
//! format, a deterministic synthetic fleet, and its idempotent import over
//! gRPC.
//!
//! The file carries no UUIDs: the server assigns them. Racks are matched by
//! their external id, so importing the same file twice creates nothing new.

use std::collections::HashSet;
use std::path::Path;

use anyhow::{Context, bail};
use rackflow_api::v1;
use rackflow_domain::ComponentType;
use serde::{Deserialize, Serialize};

use crate::client;
use crate::output::{OutputFormat, print_json};

// ---------------------------------------------------------------------------
// File format
// ---------------------------------------------------------------------------

/// A fleet file: racks with their components (JSON or YAML), and the
/// NVLink domains they are grouped into.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetFile {
    /// NVLink domains the racks name (`nvl_domain`); created on import
    /// when the server has none of that name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvl_domains: Vec<FleetNvlDomain>,
    pub racks: Vec<FleetRack>,
}

/// An NVLink domain of a fleet file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetNvlDomain {
    /// Unique name; racks name their domain by it.
    pub name: String,
    /// Id in the external inventory (the rack group id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nmxc_cluster_id: Option<String>,
}

/// One rack of a fleet file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetRack {
    /// Display name, e.g. `rack-a01` (not required to be unique).
    pub name: String,
    /// Id in the external inventory, e.g. `r-0001`; unique, the import key.
    pub external_id: String,
    pub manufacturer: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub serial_number: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub location: FleetLocation,
    /// The NVLink domain (a name from `nvl_domains`) the rack is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvl_domain: Option<String>,
    #[serde(default)]
    pub components: Vec<FleetComponent>,
}

/// Physical location of a rack.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetLocation {
    #[serde(default)]
    pub region: String,
    #[serde(default)]
    pub datacenter: String,
    #[serde(default)]
    pub room: String,
    /// `row-<ROW>/pos-<NN>`, e.g. `row-A/pos-01`.
    #[serde(default)]
    pub position: String,
}

/// One component (tray, shelf, switch) of a rack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetComponent {
    /// `Compute`, `NVSwitch`, `PowerShelf`, `ToRSwitch`, `UMS` or `CDU`
    /// (case-insensitive on input).
    #[serde(rename = "type")]
    pub component_type: ComponentType,
    pub name: String,
    pub manufacturer: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub serial_number: String,
    /// Id in the external inventory, unique per component type.
    pub external_id: String,
    #[serde(default)]
    pub firmware_version: String,
    #[serde(default)]
    pub position: FleetPosition,
    #[serde(default)]
    pub bmcs: Vec<FleetBmc>,
}

/// Position of a component inside its rack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetPosition {
    /// Physical slot, 1 = top of the rack.
    #[serde(default)]
    pub slot_id: i32,
    /// Index among the components of the same type, from 0.
    #[serde(default)]
    pub tray_idx: i32,
    /// Host number of a compute tray (1..=18); 0 for other types.
    #[serde(default)]
    pub host_id: i32,
}

/// Kind of BMC.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum FleetBmcType {
    #[default]
    #[serde(alias = "host", alias = "HOST")]
    Host,
    #[serde(rename = "DPU", alias = "dpu", alias = "Dpu")]
    Dpu,
}

/// A BMC of a component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetBmc {
    #[serde(rename = "type", default)]
    pub bmc_type: FleetBmcType,
    pub mac_address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_address: Option<String>,
}

impl FleetFile {
    /// Reads a fleet file: JSON for `.json`, YAML for `.yaml`/`.yml`,
    /// otherwise JSON if the text starts with `{`, else YAML.
    pub fn load(path: &Path) -> anyhow::Result<FleetFile> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("read fleet file {}", path.display()))?;
        let fleet: FleetFile = parse_by_format(path, &text)
            .with_context(|| format!("parse fleet file {}", path.display()))?;
        fleet
            .check()
            .with_context(|| format!("fleet file {}", path.display()))?;
        Ok(fleet)
    }

    /// Checks what the server would reject less clearly: missing external
    /// ids and duplicates inside the file.
    pub fn check(&self) -> anyhow::Result<()> {
        let mut domains = HashSet::new();
        for (i, d) in self.nvl_domains.iter().enumerate() {
            if d.name.trim().is_empty() {
                bail!("nvl_domains[{i}] has no name");
            }
            if !domains.insert(d.name.as_str()) {
                bail!("nvl_domains[{i}]: duplicate name {:?}", d.name);
            }
        }
        for (i, rack) in self.racks.iter().enumerate() {
            if let Some(domain) = &rack.nvl_domain
                && !domains.contains(domain.as_str())
            {
                bail!(
                    "racks[{i}] ({:?}): nvl_domain {domain:?} is not one of nvl_domains",
                    rack.name
                );
            }
        }
        let mut racks = HashSet::new();
        let mut components = HashSet::new();
        let mut macs = HashSet::new();
        for (i, rack) in self.racks.iter().enumerate() {
            if rack.external_id.trim().is_empty() {
                bail!("racks[{i}] ({:?}) has no external_id", rack.name);
            }
            if !racks.insert(rack.external_id.as_str()) {
                bail!("racks[{i}]: duplicate external_id {:?}", rack.external_id);
            }
            for (j, c) in rack.components.iter().enumerate() {
                if c.external_id.trim().is_empty() {
                    bail!(
                        "racks[{i}].components[{j}] ({:?}) has no external_id",
                        c.name
                    );
                }
                if !components.insert((c.component_type, c.external_id.as_str())) {
                    bail!(
                        "racks[{i}].components[{j}]: duplicate {} external_id {:?}",
                        c.component_type,
                        c.external_id
                    );
                }
                for bmc in &c.bmcs {
                    if !macs.insert(bmc.mac_address.to_ascii_lowercase()) {
                        bail!(
                            "racks[{i}].components[{j}]: duplicate BMC MAC {:?}",
                            bmc.mac_address
                        );
                    }
                }
            }
        }
        Ok(())
    }
}

/// Parses JSON or YAML, chosen by the file extension, else by the content.
pub fn parse_by_format<T: serde::de::DeserializeOwned>(
    path: &Path,
    text: &str,
) -> anyhow::Result<T> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let json = match ext.as_deref() {
        Some("json") => true,
        Some("yaml" | "yml") => false,
        _ => text.trim_start().starts_with('{'),
    };
    if json {
        Ok(serde_json::from_str(text)?)
    } else {
        Ok(serde_yaml::from_str(text)?)
    }
}

// ---------------------------------------------------------------------------
// Generation
// ---------------------------------------------------------------------------

/// Most racks `fleet generate` makes: the rack number is 16 bits of every
/// BMC MAC and IP address, which keeps them unique without bookkeeping.
pub const MAX_GENERATED_RACKS: u32 = 65_535;
/// Components per generated rack (GB200/GB300 NVL72 layout).
pub const COMPONENTS_PER_RACK: usize = COMPUTE_TRAYS + NVSWITCH_TRAYS + POWER_SHELVES;
const COMPUTE_TRAYS: usize = 18;
const NVSWITCH_TRAYS: usize = 9;
const POWER_SHELVES: usize = 8;
/// Racks per row and rows per hall of the generated floor plan.
const RACKS_PER_ROW: u32 = 8;
const ROWS_PER_HALL: u32 = 4;

/// splitmix64: a tiny, well-mixed, seedable generator. Plenty for synthetic
/// data; not for anything secret.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform-enough value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        let len = u64::try_from(items.len()).unwrap_or(u64::MAX);
        let i = usize::try_from(self.below(len)).unwrap_or(0);
        &items[i]
    }

    /// `len` characters of `[0-9A-Z]`.
    pub fn alnum(&mut self, len: usize) -> String {
        const CHARS: &[u8] = b"0123456789ABCDEFGHJKLMNPQRSTUVWXYZ";
        (0..len).map(|_| char::from(*self.pick(CHARS))).collect()
    }
}

/// Sites a generated fleet is placed in: (region, datacenter code).
const SITES: &[(&str, &str)] = &[
    ("us-west-2", "sjc"),
    ("us-east-1", "iad"),
    ("us-central-1", "dfw"),
    ("eu-north-1", "arn"),
    ("eu-west-1", "dub"),
    ("ap-northeast-1", "nrt"),
];

/// Rack integrators: (manufacturer, serial prefix).
const INTEGRATORS: &[(&str, &str)] = &[
    ("Foxconn", "FXN"),
    ("Quanta", "QCT"),
    ("Wiwynn", "WYN"),
    ("Supermicro", "SMC"),
];

/// Power-shelf vendors: (manufacturer, serial prefix, model).
const POWER_VENDORS: &[(&str, &str, &str)] = &[
    ("Delta", "DLT", "Delta 33kW Power Shelf"),
    ("Lite-On", "LTN", "Lite-On 33kW Power Shelf"),
];

/// A rack generation with the firmware it ships and what the fleet runs now.
struct Platform {
    model: &'static str,
    compute_model: &'static str,
    /// (previous, current) firmware bundles per component type.
    compute_fw: (&'static str, &'static str),
    nvswitch_fw: (&'static str, &'static str),
    powershelf_fw: (&'static str, &'static str),
}

const GB200: Platform = Platform {
    model: "GB200 NVL72",
    compute_model: "GB200 Compute Tray",
    compute_fw: ("gb200-fw-24.09.2", "gb200-fw-24.11.1"),
    nvswitch_fw: ("nvos-25.02.2141", "nvos-25.05.1007"),
    powershelf_fw: ("pmc-1.7.0", "pmc-1.8.3"),
};

const GB300: Platform = Platform {
    model: "GB300 NVL72",
    compute_model: "GB300 Compute Tray",
    compute_fw: ("gb300-fw-25.03.0", "gb300-fw-25.05.2"),
    nvswitch_fw: ("nvos-25.05.1007", "nvos-25.08.1301"),
    powershelf_fw: ("pmc-1.8.3", "pmc-2.0.1"),
};

/// Row letters: a..z, then aa, ab, … (bijective base 26).
fn row_letters(mut row: u32) -> String {
    let mut letters = Vec::new();
    loop {
        letters.push(char::from(b'a' + u8::try_from(row % 26).unwrap_or(0)));
        if row < 26 {
            break;
        }
        row = row / 26 - 1;
    }
    letters.iter().rev().collect()
}

/// Generates `racks` GB200/GB300 NVL72 racks, fully determined by `seed`.
///
/// Per rack: 18 compute trays, 9 NVLink switch trays and 8 power shelves
/// (35 components) in the NVL72 slot layout (4 shelves, 10 compute, 9
/// switches, 8 compute, 4 shelves, top to bottom), one host BMC each with a
/// locally administered MAC `02:SS:RR:RR:TT:II` (seed byte, rack number,
/// type, tray) and an IP `10.RR.RR.(10+slot)`. About a quarter of the racks
/// still run the previous firmware bundle, as a real fleet mid-rollout does.
pub fn generate(racks: u32, seed: u64) -> anyhow::Result<FleetFile> {
    if racks == 0 || racks > MAX_GENERATED_RACKS {
        bail!("--racks must be between 1 and {MAX_GENERATED_RACKS}");
    }
    let mut rng = SplitMix64::new(seed);
    let (region, dc_code) = *rng.pick(SITES);
    let datacenter = format!("{dc_code}-dc{:02}", 1 + rng.below(12));
    let seed_byte = u8::try_from(rng.below(256)).unwrap_or(0);
    let primary = rng.below(INTEGRATORS.len() as u64) as usize;
    let year = 24 + rng.below(2);
    let mut out = Vec::with_capacity(racks as usize);
    for index in 0..racks {
        let number = index + 1;
        let row = index / RACKS_PER_ROW;
        let pos = index % RACKS_PER_ROW + 1;
        let hall = row / ROWS_PER_HALL + 1;
        let letters = row_letters(row);
        let name = format!("rack-{letters}{pos:02}");
        let external_id = format!("r-{number:04}");
        // Most racks come from the fleet's main integrator.
        let (manufacturer, prefix) = if rng.chance(75) {
            INTEGRATORS[primary]
        } else {
            *rng.pick(INTEGRATORS)
        };
        let platform = if rng.chance(80) { &GB200 } else { &GB300 };
        let outdated = rng.chance(25);
        let fw = |pair: (&'static str, &'static str)| {
            if outdated { pair.0 } else { pair.1 }
        };
        let week = 1 + rng.below(52);
        let lot = rng.alnum(3);
        let serial_number = format!("{prefix}{year}{week:02}{lot}{number:05}");
        let power = *rng.pick(POWER_VENDORS);

        let [rack_hi, rack_lo] = u16::try_from(number).unwrap_or(u16::MAX).to_be_bytes();
        let bmc = |type_code: u8, tray: usize, slot: i32| {
            let tray_byte = u8::try_from(tray + 1).unwrap_or(u8::MAX);
            FleetBmc {
                bmc_type: FleetBmcType::Host,
                mac_address: format!(
                    "02:{seed_byte:02x}:{rack_hi:02x}:{rack_lo:02x}:{type_code:02x}:{tray_byte:02x}"
                ),
                ip_address: Some(format!("10.{rack_hi}.{rack_lo}.{}", 10 + slot)),
            }
        };

        // NVL72 layout, top to bottom: which type sits in each slot.
        let layout = std::iter::repeat_n(ComponentType::PowerShelf, POWER_SHELVES / 2)
            .chain(std::iter::repeat_n(ComponentType::Compute, 10))
            .chain(std::iter::repeat_n(ComponentType::NvSwitch, NVSWITCH_TRAYS))
            .chain(std::iter::repeat_n(
                ComponentType::Compute,
                COMPUTE_TRAYS - 10,
            ))
            .chain(std::iter::repeat_n(
                ComponentType::PowerShelf,
                POWER_SHELVES - POWER_SHELVES / 2,
            ));
        let mut counts = [0usize; 3];
        let mut components = Vec::with_capacity(COMPONENTS_PER_RACK);
        for (slot0, ty) in layout.enumerate() {
            let slot = i32::try_from(slot0 + 1).unwrap_or(i32::MAX);
            let (kind, type_code, counter) = match ty {
                ComponentType::Compute => ("compute", 1u8, &mut counts[0]),
                ComponentType::NvSwitch => ("nvswitch", 2u8, &mut counts[1]),
                _ => ("powershelf", 3u8, &mut counts[2]),
            };
            let tray = *counter;
            *counter += 1;
            let tray_idx = i32::try_from(tray).unwrap_or(i32::MAX);
            let (comp_manufacturer, comp_prefix, model, firmware, host_id) = match ty {
                ComponentType::Compute => (
                    manufacturer,
                    prefix,
                    platform.compute_model,
                    fw(platform.compute_fw),
                    tray_idx + 1,
                ),
                ComponentType::NvSwitch => (
                    "NVIDIA",
                    "NVS",
                    "NVLink Switch Tray",
                    fw(platform.nvswitch_fw),
                    0,
                ),
                _ => (power.0, power.1, power.2, fw(platform.powershelf_fw), 0),
            };
            let lot = rng.alnum(4);
            components.push(FleetComponent {
                component_type: ty,
                name: format!("{name}-{kind}-{:02}", tray + 1),
                manufacturer: comp_manufacturer.to_string(),
                model: Some(model.to_string()),
                serial_number: format!(
                    "{comp_prefix}{}{year}{lot}{number:05}{:02}",
                    kind[..1].to_ascii_uppercase(),
                    tray + 1
                ),
                external_id: format!("{external_id}-{kind}-{:02}", tray + 1),
                firmware_version: firmware.to_string(),
                position: FleetPosition {
                    slot_id: slot,
                    tray_idx,
                    host_id,
                },
                bmcs: vec![bmc(type_code, tray, slot)],
            });
        }
        out.push(FleetRack {
            name,
            external_id,
            manufacturer: manufacturer.to_string(),
            model: Some(platform.model.to_string()),
            serial_number,
            description: None,
            location: FleetLocation {
                region: region.to_string(),
                datacenter: datacenter.clone(),
                room: format!("hall-{hall}"),
                position: format!("row-{}/pos-{pos:02}", letters.to_ascii_uppercase()),
            },
            nvl_domain: None,
            components,
        });
    }
    Ok(FleetFile {
        nvl_domains: Vec::new(),
        racks: out,
    })
}

/// The rack's other devices `--tor-ums-cdu` adds: type, name part, maker,
/// model, firmware, BMC type code.
const FACILITY_COMPONENTS: [(ComponentType, &str, &str, &str, &str, u8); 3] = [
    (
        ComponentType::TorSwitch,
        "torswitch",
        "NVIDIA",
        "Spectrum-4 SN5600",
        "cumulus-5.10.1",
        4,
    ),
    (ComponentType::Ums, "ums", "NVIDIA", "UMS", "ums-1.4.0", 5),
    (
        ComponentType::Cdu,
        "cdu",
        "Vertiv",
        "CoolChip CDU 100",
        "cdu-fw-2.3.1",
        6,
    ),
];

/// Gives every rack the rest of the reference's component model: one ToR
/// switch, one UMS and one CDU, in slots 36–38 under the NVL72 layout, each
/// with a BMC in the generator's scheme (type codes 4–6, so MACs and IPs
/// stay unique). Derived from each rack alone: the fleet stays
/// deterministic by seed.
pub fn add_facility_components(fleet: &mut FleetFile) {
    for rack in &mut fleet.racks {
        let Some(template) = rack.components.iter().find_map(|c| c.bmcs.first()) else {
            continue;
        };
        // The rack's BMC prefix `02:SS:RR:RR` and IP prefix `10.RR.RR`.
        let mac_prefix: String = template.mac_address.chars().take(11).collect();
        let ip_prefix = template
            .ip_address
            .as_deref()
            .and_then(|ip| ip.rsplit_once('.'))
            .map(|(head, _)| head.to_string())
            .unwrap_or_default();
        let first_free = rack
            .components
            .iter()
            .map(|c| c.position.slot_id)
            .max()
            .unwrap_or(0)
            + 1;
        for (i, (ty, kind, maker, model, firmware, code)) in FACILITY_COMPONENTS.iter().enumerate()
        {
            let slot = first_free + i32::try_from(i).unwrap_or(0);
            rack.components.push(FleetComponent {
                component_type: *ty,
                name: format!("{}-{kind}-01", rack.name),
                manufacturer: (*maker).to_string(),
                model: Some((*model).to_string()),
                serial_number: format!("{}{}", kind[..3].to_ascii_uppercase(), rack.serial_number),
                external_id: format!("{}-{kind}-01", rack.external_id),
                firmware_version: (*firmware).to_string(),
                position: FleetPosition {
                    slot_id: slot,
                    tray_idx: 0,
                    host_id: 0,
                },
                bmcs: vec![FleetBmc {
                    bmc_type: FleetBmcType::Host,
                    mac_address: format!("{mac_prefix}:{code:02x}:01"),
                    ip_address: (!ip_prefix.is_empty())
                        .then(|| format!("{ip_prefix}.{}", 10 + slot)),
                }],
            });
        }
    }
}

/// Groups the racks, in file order, into NVLink domains of
/// `racks_per_domain` (the last one may be smaller): `<datacenter>-nvl-NNN`,
/// with the rack group id `grp-<datacenter>-NNN` as external id, so that
/// fleets of different data centers never share a domain.
pub fn group_into_domains(fleet: &mut FleetFile, racks_per_domain: u32) -> anyhow::Result<()> {
    if racks_per_domain == 0 {
        bail!("--racks-per-domain must be at least 1");
    }
    let per = usize::try_from(racks_per_domain).unwrap_or(usize::MAX);
    let mut domains = Vec::new();
    for (k, racks) in fleet.racks.chunks_mut(per).enumerate() {
        let datacenter = racks
            .first()
            .map(|r| r.location.datacenter.clone())
            .unwrap_or_default();
        let domain = FleetNvlDomain {
            name: format!("{datacenter}-nvl-{:03}", k + 1),
            external_id: Some(format!("grp-{datacenter}-{:03}", k + 1)),
            nmxc_cluster_id: None,
        };
        for rack in racks {
            rack.nvl_domain = Some(domain.name.clone());
        }
        domains.push(domain);
    }
    fleet.nvl_domains = domains;
    Ok(())
}

/// `rackflow fleet generate`: prints the fleet as JSON on stdout, its
/// racks grouped into NVLink domains with `racks_per_domain`, with a ToR
/// switch, a UMS and a CDU each with `facility`.
pub fn run_generate(
    racks: u32,
    seed: u64,
    racks_per_domain: Option<u32>,
    facility: bool,
) -> anyhow::Result<()> {
    let mut fleet = generate(racks, seed)?;
    if facility {
        add_facility_components(&mut fleet);
    }
    if let Some(per) = racks_per_domain {
        group_into_domains(&mut fleet, per)?;
    }
    print_json(&fleet)
}

// ---------------------------------------------------------------------------
// Import
// ---------------------------------------------------------------------------

/// The wire rack (no ids: the server assigns them) of a fleet rack.
pub fn to_proto_rack(rack: &FleetRack) -> v1::Rack {
    v1::Rack {
        info: Some(v1::DeviceInfo {
            id: None,
            name: rack.name.clone(),
            manufacturer: rack.manufacturer.clone(),
            model: rack.model.clone(),
            serial_number: rack.serial_number.clone(),
            description: rack.description.clone(),
        }),
        location: Some(v1::Location {
            region: rack.location.region.clone(),
            datacenter: rack.location.datacenter.clone(),
            room: rack.location.room.clone(),
            position: rack.location.position.clone(),
        }),
        components: rack.components.iter().map(to_proto_component).collect(),
        external_id: rack.external_id.clone(),
        ..Default::default()
    }
}

fn to_proto_component(c: &FleetComponent) -> v1::Component {
    v1::Component {
        r#type: c.component_type as i32,
        info: Some(v1::DeviceInfo {
            id: None,
            name: c.name.clone(),
            manufacturer: c.manufacturer.clone(),
            model: c.model.clone(),
            serial_number: c.serial_number.clone(),
            description: None,
        }),
        firmware_version: c.firmware_version.clone(),
        position: Some(v1::RackPosition {
            slot_id: c.position.slot_id,
            tray_idx: c.position.tray_idx,
            host_id: c.position.host_id,
        }),
        bmcs: c
            .bmcs
            .iter()
            .map(|b| v1::BmcInfo {
                r#type: match b.bmc_type {
                    FleetBmcType::Host => v1::BmcType::Host as i32,
                    FleetBmcType::Dpu => v1::BmcType::Dpu as i32,
                },
                mac_address: b.mac_address.clone(),
                ip_address: b.ip_address.clone(),
            })
            .collect(),
        component_id: c.external_id.clone(),
        ..Default::default()
    }
}

/// One rack of the import summary.
#[derive(Debug, Clone, Serialize)]
pub struct ImportedRack {
    pub external_id: String,
    pub name: String,
    /// Server-assigned id (of the new rack, or of the one that existed).
    pub id: String,
}

/// What `fleet import` did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportSummary {
    pub created: Vec<ImportedRack>,
    pub skipped: Vec<ImportedRack>,
    /// The file's NVLink domains: created or found, and their racks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nvl_domains: Vec<ImportedDomain>,
}

/// One NVLink domain of the import summary.
#[derive(Debug, Clone, Serialize)]
pub struct ImportedDomain {
    pub name: String,
    /// False: the server had a domain of that name already.
    pub created: bool,
    /// Racks of the file attached to it.
    pub racks: usize,
}

/// Rack identifiers per `AttachRacksToNVLDomain` call.
const ATTACH_BATCH: usize = 500;

/// Creates the file's NVLink domains the server does not have (by name)
/// and attaches each rack to the domain it names (attaching is idempotent:
/// a rack already there stays). `ids` are the racks' server ids by
/// external id, from the import.
async fn apply_domains(
    flow: &mut client::Flow,
    fleet: &FleetFile,
    summary: &mut ImportSummary,
    print: bool,
) -> anyhow::Result<()> {
    let ids: std::collections::HashMap<&str, &str> = summary
        .created
        .iter()
        .chain(&summary.skipped)
        .map(|r| (r.external_id.as_str(), r.id.as_str()))
        .collect();
    let mut applied = Vec::with_capacity(fleet.nvl_domains.len());
    for domain in &fleet.nvl_domains {
        let created = flow
            .create_nvl_domain(v1::CreateNvlDomainRequest {
                nvl_domain: Some(v1::NvlDomain {
                    identifier: Some(v1::Identifier {
                        id: None,
                        name: domain.name.clone(),
                    }),
                    external_id: domain.external_id.clone(),
                    nmxc_cluster_id: domain.nmxc_cluster_id.clone(),
                }),
            })
            .await;
        let created = match created {
            Ok(_) => true,
            Err(status) if status.code() == tonic::Code::AlreadyExists => false,
            Err(status) => {
                return Err(anyhow::Error::new(status)
                    .context(format!("create NVL domain {}", domain.name)));
            }
        };
        let members: Vec<v1::Identifier> = fleet
            .racks
            .iter()
            .filter(|r| r.nvl_domain.as_deref() == Some(domain.name.as_str()))
            .filter_map(|r| ids.get(r.external_id.as_str()))
            .map(|id| v1::Identifier {
                id: Some(v1::Uuid { id: id.to_string() }),
                name: String::new(),
            })
            .collect();
        for batch in members.chunks(ATTACH_BATCH) {
            flow.attach_racks_to_nvl_domain(v1::AttachRacksToNvlDomainRequest {
                nvl_domain_identifier: Some(v1::Identifier {
                    id: None,
                    name: domain.name.clone(),
                }),
                rack_identifiers: batch.to_vec(),
            })
            .await
            .with_context(|| format!("attach racks to NVL domain {}", domain.name))?;
        }
        if print {
            let verb = if created { "created" } else { "found" };
            crate::outln!(
                "{verb} NVL domain {} with {} rack(s)",
                domain.name,
                members.len()
            );
        }
        applied.push(ImportedDomain {
            name: domain.name.clone(),
            created,
            racks: members.len(),
        });
    }
    summary.nvl_domains = applied;
    Ok(())
}

/// `rackflow fleet import FILE`: creates the racks whose external id the
/// server does not know yet; skips the others.
pub async fn run_import(
    server: &crate::client::ServerAddress,
    path: &Path,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let fleet = FleetFile::load(path)?;
    let mut flow = client::connect(server).await?;
    let summary = import_fleet(&mut flow, &fleet, output == OutputFormat::Table).await?;
    match output {
        OutputFormat::Table => crate::outln!(
            "created {}, skipped {}",
            summary.created.len(),
            summary.skipped.len()
        ),
        OutputFormat::Json => print_json(&summary)?,
    }
    Ok(())
}

/// Racks per `ImportRacks` message: a GB200 rack of 35 components is ~7 KB
/// on the wire, so a batch stays well under the 4 MiB message limit.
const IMPORT_BATCH: usize = 100;
/// Batches per `ImportRacks` call: each call is bounded by the client's
/// request deadline.
const IMPORT_BATCHES_PER_CALL: usize = 10;
/// `ImportRacks` calls at once.
const IMPORT_CALLS_IN_FLIGHT: usize = 2;

/// Creates the racks of `fleet` whose external id the server does not know
/// yet and skips the others, then its NVLink domains (see
/// `apply_domains`); with `print`, one line per rack and domain on stdout.
/// Batches of [`IMPORT_BATCH`] racks, each one transaction on the server
/// (`FlowExtensions.ImportRacks`); a server without that RPC gets the racks
/// one by one (`GetRackInfoById`, `CreateExpectedRack`).
pub async fn import_fleet(
    flow: &mut client::Flow,
    fleet: &FleetFile,
    print: bool,
) -> anyhow::Result<ImportSummary> {
    let mut summary = import_racks(flow, fleet, print).await?;
    apply_domains(flow, fleet, &mut summary, print).await?;
    Ok(summary)
}

/// The racks of [`import_fleet`].
async fn import_racks(
    flow: &mut client::Flow,
    fleet: &FleetFile,
    print: bool,
) -> anyhow::Result<ImportSummary> {
    let mut summary = ImportSummary::default();
    let calls: Vec<&[FleetRack]> = fleet
        .racks
        .chunks(IMPORT_BATCH * IMPORT_BATCHES_PER_CALL)
        .collect();
    // Two calls in flight: the server converts one call's racks while the
    // database writes the other's (SQLite has one writer; the conversion
    // is the other half of an import's time).
    let mut in_flight = tokio::task::JoinSet::new();
    let mut answers: Vec<Option<Result<v1::ImportRacksResponse, tonic::Status>>> =
        (0..calls.len()).map(|_| None).collect();
    let mut next = 0;
    let mut done = 0;
    while done < calls.len() {
        while next < calls.len() && in_flight.len() < IMPORT_CALLS_IN_FLIGHT {
            let batches: Vec<v1::ImportRacksRequest> = calls[next]
                .chunks(IMPORT_BATCH)
                .map(|batch| v1::ImportRacksRequest {
                    racks: batch.iter().map(to_proto_rack).collect(),
                })
                .collect();
            let mut client = flow.extensions().clone();
            let call = next;
            in_flight.spawn(async move {
                let answer = client.import_racks(tokio_stream::iter(batches)).await;
                (call, answer.map(tonic::Response::into_inner))
            });
            next += 1;
        }
        let Some(joined) = in_flight.join_next().await else {
            break;
        };
        let (call, answer) = joined.context("import call")?;
        answers[call] = Some(answer);
        // Answers are used in file order, as soon as every earlier one is in.
        while let Some(Some(answer)) = answers.get_mut(done).map(Option::take) {
            let answer = match answer {
                Ok(answer) => answer,
                Err(status) if status.code() == tonic::Code::Unimplemented && done == 0 => {
                    in_flight.abort_all();
                    return import_fleet_one_by_one(flow, fleet, print).await;
                }
                Err(status) => {
                    let first = done * IMPORT_BATCH * IMPORT_BATCHES_PER_CALL;
                    return Err(anyhow::Error::new(status).context(format!(
                        "import racks {}..{} of {}",
                        first + 1,
                        first + calls[done].len(),
                        fleet.racks.len()
                    )));
                }
            };
            done += 1;
            summary.add(answer, print);
        }
    }
    Ok(summary)
}

impl ImportSummary {
    /// One `ImportRacks` answer, printed rack by rack with `print`.
    fn add(&mut self, answer: v1::ImportRacksResponse, print: bool) {
        for imported in answer.racks {
            let rack = ImportedRack {
                external_id: imported.external_id,
                name: imported.name,
                id: imported.id.map(|u| u.id).unwrap_or_default(),
            };
            if imported.created {
                if print {
                    crate::outln!(
                        "created {} ({}) as {}",
                        rack.name,
                        rack.external_id,
                        rack.id
                    );
                }
                self.created.push(rack);
            } else {
                if print {
                    crate::outln!(
                        "skipped {} ({}): already exists as {}",
                        rack.name,
                        rack.external_id,
                        rack.id
                    );
                }
                self.skipped.push(rack);
            }
        }
    }
}

/// [`import_fleet`] against a server without `ImportRacks`: a lookup and a
/// create per rack.
async fn import_fleet_one_by_one(
    flow: &mut client::Flow,
    fleet: &FleetFile,
    print: bool,
) -> anyhow::Result<ImportSummary> {
    let mut summary = ImportSummary::default();
    for rack in &fleet.racks {
        let existing = flow
            .get_rack_info_by_id(v1::GetRackInfoByIdRequest {
                id: Some(v1::Uuid {
                    id: rack.external_id.clone(),
                }),
                with_components: false,
            })
            .await;
        match existing {
            Ok(found) => {
                let id = found
                    .into_inner()
                    .rack
                    .and_then(|r| r.info)
                    .and_then(|i| i.id)
                    .map(|u| u.id)
                    .unwrap_or_default();
                if print {
                    crate::outln!(
                        "skipped {} ({}): already exists as {id}",
                        rack.name,
                        rack.external_id
                    );
                }
                summary.skipped.push(ImportedRack {
                    external_id: rack.external_id.clone(),
                    name: rack.name.clone(),
                    id,
                });
            }
            Err(status) if status.code() == tonic::Code::NotFound => {
                let created = flow
                    .create_expected_rack(v1::CreateExpectedRackRequest {
                        rack: Some(to_proto_rack(rack)),
                    })
                    .await
                    .with_context(|| format!("create rack {} ({})", rack.name, rack.external_id))?;
                let id = created.into_inner().id.map(|u| u.id).unwrap_or_default();
                if print {
                    crate::outln!("created {} ({}) as {id}", rack.name, rack.external_id);
                }
                summary.created.push(ImportedRack {
                    external_id: rack.external_id.clone(),
                    name: rack.name.clone(),
                    id,
                });
            }
            Err(status) => {
                return Err(anyhow::Error::new(status)
                    .context(format!("look up rack {}", rack.external_id)));
            }
        }
    }
    Ok(summary)
}
