//! Firmware-object manifests: the release catalogue JSON (`config_json`) a
//! firmware object is made of, parsed into what the rack manager applies.
//!
//! The shape is the reference's "source of truth" document, so a manifest
//! written for the reference works here unchanged:
//!
//! ```json
//! { "ProductName": "GB200-NVL72",
//!   "Milestones": [ { "Name": "2026.11",
//!     "BoardSKUs": [ { "SKUID": "699-1", "Name": "Compute tray", "Type": "Compute Node",
//!       "Components": {
//!         "Firmware": [ { "Component": "BMC", "Version": "2.1.0", "Bundle": "fw-bundle", "Type": "Prod",
//!                         "Locations": [ { "Location": "https://artifacts/bmc-2.1.0.fwpkg",
//!                                          "LocationType": "HTTPS", "Type": "Firmware",
//!                                          "SHA256": "<64 hex>" } ],
//!                         "SubComponents": [ { "Component": "ERoT", "Version": "1.4", "SKUID": "x" } ] } ],
//!         "Software": [ { "Component": "NVOS", "Version": "25.02", "Type": "Prod",
//!                         "Locations": [ { "Location": "https://artifacts/nvos-amd64-25.02.bin",
//!                                          "LocationType": "HTTPS", "PackageName": "nvos" } ] } ] } } ] } ] }
//! ```
//!
//! The object's id is `{ProductName}_{Milestones[0].Name}` (exactly one
//! milestone). Board SKU `Type` names the device type (`Compute Node`,
//! `Switch Tray`, `Power Shelf`; other boards are skipped); each firmware component becomes one
//! applyable component whose payload locations (`Type` absent or
//! `Firmware`) are its artifacts, and a switch tray's `NVOS` software entry
//! a switch system image. A location's optional `Target` (rackflow's
//! addition) is the update target passed to the node; without it the
//! component name is (a BMC resolves it against its firmware inventory).
//! Locations are `http(s)://` URLs; `SHA256` is checked after download.

use std::collections::BTreeMap;

use rackflow_api::rack_manager as pb;
use serde_json::Value;

use crate::backend::NodeKind;

/// Why a manifest was refused; the message names the offending path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ManifestError(pub String);

fn invalid(message: impl Into<String>) -> ManifestError {
    ManifestError(message.into())
}

/// The device types of a board SKU, as the manifest spells them.
pub const COMPUTE_DEVICE: &str = "Compute Node";
pub const SWITCH_DEVICE: &str = "Switch Tray";
pub const POWER_SHELF_DEVICE: &str = "Power Shelf";

/// A parsed manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// `{ProductName}_{Milestone}`.
    pub id: String,
    pub product_name: String,
    pub milestone: String,
    /// Applyable components per device type, device types in manifest order.
    pub devices: Vec<DeviceComponents>,
    /// Switch system images (NVOS) of switch trays.
    pub switch_images: Vec<SwitchImage>,
}

/// The components of one device type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceComponents {
    /// `Compute Node`, `Switch Tray` or `Power Shelf`.
    pub device_type: String,
    pub kind: NodeKind,
    pub components: Vec<ManifestComponent>,
}

/// One firmware component of a device type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestComponent {
    /// The name apply filters and comparisons use (the manifest's
    /// `Component`).
    pub name: String,
    /// The proposed version; `None` when the manifest states none (a
    /// comparison then cannot verify it).
    pub version: Option<String>,
    pub bundle: String,
    /// Release channel (`prod`, `dev`, …; lower case; empty = any).
    pub channel: String,
    pub sku_id: String,
    pub subcomponents: Vec<pb::FirmwareObjectSubcomponent>,
    pub artifacts: Vec<Artifact>,
}

/// One file to fetch into the firmware store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Where it is fetched from (`http(s)://`).
    pub url: String,
    /// The cached file name (path-safe, one component).
    pub filename: String,
    /// Expected SHA-256 (lower-case hex), when the manifest gives one.
    pub sha256: Option<String>,
    /// The update target passed to the node.
    pub target: String,
    /// Whether the object is available only with this file present.
    pub required: bool,
}

/// A switch system image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchImage {
    pub software_type: String,
    pub version: String,
    pub package_name: String,
    pub artifact: Artifact,
}

impl Manifest {
    /// Parses a manifest; every refusal says where and why.
    pub fn parse(config_json: &str) -> Result<Manifest, ManifestError> {
        let config: Value = serde_json::from_str(config_json)
            .map_err(|e| invalid(format!("config_json is not valid JSON: {e}")))?;
        if !config.is_object() {
            return Err(invalid("config_json must be a JSON object"));
        }
        let product_name = required_string(&config, "ProductName", "config_json")?;
        let milestones = config
            .get("Milestones")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid("config_json must contain a 'Milestones' array"))?;
        let [milestone] = milestones.as_slice() else {
            return Err(invalid(format!(
                "Milestones must contain exactly one milestone; found {}",
                milestones.len()
            )));
        };
        let milestone_name = required_string(milestone, "Name", "Milestones[0]")?;
        let id = format!("{product_name}_{milestone_name}");
        validate_object_id(&id)?;
        let boards = milestone
            .get("BoardSKUs")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid("Milestones[0] must contain a 'BoardSKUs' array"))?;
        let mut devices: Vec<DeviceComponents> = Vec::new();
        let mut switch_images = Vec::new();
        for (b, board) in boards.iter().enumerate() {
            let context = format!("Milestones[0].BoardSKUs[{b}]");
            let device_type = required_string(board, "Type", &context)?;
            let Some(kind) = device_kind(&device_type) else {
                // A release catalogue also lists boards no node of a rack
                // manager is (cable cartridges, …): nothing to apply there,
                // as in the reference.
                tracing::debug!(%context, %device_type, "board type not applied by the rack manager; skipped");
                continue;
            };
            let sku_id = optional_string(board, "SKUID").unwrap_or_default();
            let components = board.get("Components");
            let firmware = components
                .and_then(|c| c.get("Firmware"))
                .map(|f| {
                    f.as_array().ok_or_else(|| {
                        invalid(format!("{context}.Components.Firmware must be an array"))
                    })
                })
                .transpose()?;
            let mut parsed = Vec::new();
            for (f, entry) in firmware.into_iter().flatten().enumerate() {
                let context = format!("{context}.Components.Firmware[{f}]");
                parsed.push(parse_component(entry, &context, &sku_id)?);
            }
            match devices.iter_mut().find(|d| d.device_type == device_type) {
                Some(existing) => existing.components.extend(parsed),
                None => devices.push(DeviceComponents {
                    device_type: device_type.clone(),
                    kind,
                    components: parsed,
                }),
            }
            if kind == NodeKind::Switch
                && let Some(software) = components.and_then(|c| c.get("Software"))
            {
                let software = software.as_array().ok_or_else(|| {
                    invalid(format!("{context}.Components.Software must be an array"))
                })?;
                for (s, entry) in software.iter().enumerate() {
                    if optional_string(entry, "Component").as_deref() != Some("NVOS") {
                        continue;
                    }
                    let context = format!("{context}.Components.Software[{s}]");
                    switch_images.push(parse_switch_image(entry, &context, &product_name)?);
                }
            }
        }
        for device in &devices {
            let mut seen = BTreeMap::new();
            for component in &device.components {
                if seen
                    .insert((component.name.clone(), component.channel.clone()), ())
                    .is_some()
                {
                    return Err(invalid(format!(
                        "component {} appears twice for {} (channel {:?})",
                        component.name, device.device_type, component.channel
                    )));
                }
            }
        }
        let manifest = Manifest {
            id,
            product_name,
            milestone: milestone_name,
            devices,
            switch_images,
        };
        let mut filenames = BTreeMap::new();
        for artifact in manifest.every_artifact() {
            if let Some(other) = filenames.insert(artifact.filename.clone(), artifact.url.clone())
                && other != artifact.url
            {
                return Err(invalid(format!(
                    "two artifacts share the file name {} ({} and {})",
                    artifact.filename,
                    redact_url(&other),
                    redact_url(&artifact.url)
                )));
            }
        }
        Ok(manifest)
    }

    /// Every artifact reference (device firmware, then switch images); a
    /// file two components share appears twice.
    fn every_artifact(&self) -> impl Iterator<Item = &Artifact> {
        self.devices
            .iter()
            .flat_map(|d| d.components.iter().flat_map(|c| c.artifacts.iter()))
            .chain(self.switch_images.iter().map(|i| &i.artifact))
    }

    /// Every artifact (device firmware, then switch images), each file once.
    pub fn artifacts(&self) -> Vec<&Artifact> {
        let mut out: Vec<&Artifact> = Vec::new();
        for artifact in self.every_artifact() {
            if !out.iter().any(|a| a.filename == artifact.filename) {
                out.push(artifact);
            }
        }
        out
    }

    /// The components of a node kind, if the manifest has that device type.
    pub fn device(&self, kind: NodeKind) -> Option<&DeviceComponents> {
        self.devices.iter().find(|d| d.kind == kind)
    }

    /// The wire metadata: one entry per node type the device types cover,
    /// artifacts named by their path under the firmware directory.
    pub fn metadata(&self, cache_prefix: &str) -> pb::FirmwareObjectMetadata {
        let mut device_components = Vec::new();
        for device in &self.devices {
            let components: Vec<pb::FirmwareObjectComponent> = device
                .components
                .iter()
                .map(|c| pb::FirmwareObjectComponent {
                    name: c.name.clone(),
                    version: c.version.clone().unwrap_or_default(),
                    bundle: c.bundle.clone(),
                    source_component: c.name.clone(),
                    subcomponents: c.subcomponents.clone(),
                    artifacts: c
                        .artifacts
                        .iter()
                        .map(|a| pb::FirmwareObjectArtifact {
                            firmware_type: c.channel.clone(),
                            filename: format!("{cache_prefix}/{}", a.filename),
                            target: a.target.clone(),
                            bundle: c.bundle.clone(),
                        })
                        .collect(),
                })
                .collect();
            if components.is_empty() {
                continue;
            }
            for node_type in node_types_of(device.kind) {
                device_components.push(pb::FirmwareObjectDeviceComponents {
                    node_type: *node_type as i32,
                    device_type: device.device_type.clone(),
                    components: components.clone(),
                    node_descriptor: None,
                });
            }
        }
        pb::FirmwareObjectMetadata {
            device_components,
            switch_system_images: self
                .switch_images
                .iter()
                .map(|i| pb::FirmwareObjectSwitchSystemImage {
                    software_type: i.software_type.clone(),
                    version: i.version.clone(),
                    package_name: i.package_name.clone(),
                    image_filename: i.artifact.filename.clone(),
                    required: i.artifact.required,
                })
                .collect(),
        }
    }
}

/// The reference node types a device type covers.
pub fn node_types_of(kind: NodeKind) -> &'static [pb::NodeType] {
    use pb::NodeType as T;
    match kind {
        NodeKind::Compute => &[
            T::ComputeGb200Nvidia,
            T::ComputeGb300Nvidia,
            T::ComputeGb300Lenovo,
            T::ComputeVrnvl72Nvidia,
        ],
        NodeKind::PowerShelf => &[
            T::PowershelfGb200Liteon,
            T::PowershelfGb200Delta,
            T::PowershelfGb300Liteon,
            T::PowershelfGb300Delta,
        ],
        NodeKind::Switch => &[
            T::SwitchGb200Nvidia,
            T::SwitchGb300Nvidia,
            T::SwitchVrnvl72Nvidia,
        ],
    }
}

fn device_kind(device_type: &str) -> Option<NodeKind> {
    match device_type {
        COMPUTE_DEVICE => Some(NodeKind::Compute),
        SWITCH_DEVICE => Some(NodeKind::Switch),
        POWER_SHELF_DEVICE => Some(NodeKind::PowerShelf),
        _ => None,
    }
}

fn parse_component(
    entry: &Value,
    context: &str,
    sku_id: &str,
) -> Result<ManifestComponent, ManifestError> {
    let name = required_string(entry, "Component", context)?;
    let channel = optional_string(entry, "Type")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let mut artifacts = Vec::new();
    if let Some(locations) = entry.get("Locations") {
        let locations = locations
            .as_array()
            .ok_or_else(|| invalid(format!("{context}.Locations must be an array")))?;
        for (l, location) in locations.iter().enumerate() {
            let context = format!("{context}.Locations[{l}]");
            // Only payloads are fetched: signatures, CoRIMs and release
            // notes ride along in the catalogue but are not flashed.
            let payload = optional_string(location, "Type")
                .is_none_or(|t| t.is_empty() || t.eq_ignore_ascii_case("firmware"));
            if !payload {
                continue;
            }
            let mut artifact = parse_location(location, &context)?;
            if artifact.target.is_empty() {
                artifact.target.clone_from(&name);
            }
            artifacts.push(artifact);
        }
    }
    let subcomponents = entry
        .get("SubComponents")
        .and_then(Value::as_array)
        .map(|subs| {
            subs.iter()
                .filter_map(|s| {
                    let name = optional_string(s, "Component")?;
                    let version = optional_string(s, "Version")?;
                    Some(pb::FirmwareObjectSubcomponent {
                        name,
                        version,
                        sku_id: optional_string(s, "SKUID").unwrap_or_default(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(ManifestComponent {
        name,
        version: optional_string(entry, "Version").filter(|v| !v.trim().is_empty()),
        bundle: optional_string(entry, "Bundle").unwrap_or_default(),
        channel,
        sku_id: sku_id.to_owned(),
        subcomponents,
        artifacts,
    })
}

fn parse_switch_image(
    entry: &Value,
    context: &str,
    product_name: &str,
) -> Result<SwitchImage, ManifestError> {
    let version = required_string(entry, "Version", context)?;
    let software_type = required_string(entry, "Type", context)?.to_ascii_lowercase();
    let locations = entry
        .get("Locations")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid(format!("{context}.Locations is required")))?;
    let images: Vec<(usize, &Value)> = locations
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            optional_string(l, "Location")
                .and_then(|u| filename_of_url(&u).ok())
                .is_some_and(|f| f.to_ascii_lowercase().ends_with(".bin"))
        })
        .collect();
    let [(index, location)] = images.as_slice() else {
        return Err(invalid(format!(
            "{context}.Locations must hold exactly one .bin system image; found {}",
            images.len()
        )));
    };
    let artifact = parse_location(location, &format!("{context}.Locations[{index}]"))?;
    let package_name = optional_string(location, "PackageName")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| product_name.to_owned());
    Ok(SwitchImage {
        software_type,
        version,
        package_name,
        artifact,
    })
}

fn parse_location(location: &Value, context: &str) -> Result<Artifact, ManifestError> {
    let url = required_string(location, "Location", context)?;
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(invalid(format!(
            "{context}.Location must be an http:// or https:// URL, not {}",
            redact_url(&url)
        )));
    }
    let filename = match optional_string(location, "FileName").filter(|f| !f.is_empty()) {
        Some(name) => name,
        None => filename_of_url(&url).map_err(|e| invalid(format!("{context}.Location: {e}")))?,
    };
    validate_filename(&filename).map_err(|e| invalid(format!("{context}: {e}")))?;
    let sha256 =
        match optional_string(location, "SHA256").or_else(|| optional_string(location, "Sha256")) {
            None => None,
            Some(digest) if digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()) => {
                Some(digest.to_ascii_lowercase())
            }
            Some(_) => {
                return Err(invalid(format!(
                    "{context}.SHA256 must be 64 hexadecimal characters"
                )));
            }
        };
    Ok(Artifact {
        url,
        filename,
        sha256,
        target: optional_string(location, "Target").unwrap_or_default(),
        required: location
            .get("Required")
            .and_then(Value::as_bool)
            .unwrap_or(true),
    })
}

/// The last path segment of a URL (query and fragment dropped).
fn filename_of_url(url: &str) -> Result<String, String> {
    let without_query = url.split(['?', '#']).next().unwrap_or_default();
    let after_scheme = without_query
        .split_once("://")
        .map_or(without_query, |(_, rest)| rest);
    let path = after_scheme.split_once('/').map_or("", |(_, p)| p);
    let name = path.rsplit('/').next().unwrap_or_default();
    if name.is_empty() {
        return Err("the URL names no file".to_owned());
    }
    Ok(name.to_owned())
}

/// A cached file name: one path-safe component.
fn validate_filename(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name == "."
        || name == ".."
        || name.contains(['/', '\\', '\0'])
        || name.len() > 255
    {
        return Err(format!("file name {name:?} is not one path-safe component"));
    }
    Ok(())
}

/// An object id is also a directory name of the firmware store.
pub fn validate_object_id(id: &str) -> Result<(), ManifestError> {
    validate_filename(id).map_err(|_| {
        invalid(format!(
            "firmware object id {id:?} must be a single path-safe component"
        ))
    })
}

/// A URL for logs and messages: query string and user info dropped (access
/// tokens travel there).
pub fn redact_url(url: &str) -> String {
    let without_query = url.split(['?', '#']).next().unwrap_or_default();
    match without_query.split_once("://") {
        Some((scheme, rest)) => {
            let rest = rest.split_once('@').map_or(rest, |(_, host)| host);
            format!("{scheme}://{rest}")
        }
        None => without_query.to_owned(),
    }
}

fn required_string(value: &Value, key: &str, context: &str) -> Result<String, ManifestError> {
    match value.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(invalid(format!("{context}.{key} must not be empty"))),
        Some(_) => Err(invalid(format!("{context}.{key} must be a string"))),
        None => Err(invalid(format!("{context} must contain '{key}'"))),
    }
}

fn optional_string(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn manifest(boards: Value) -> String {
        serde_json::json!({
            "ProductName": "GB200-NVL72",
            "Milestones": [ { "Name": "2026.11", "BoardSKUs": boards } ]
        })
        .to_string()
    }

    fn compute_board() -> Value {
        serde_json::json!({
            "SKUID": "699-1", "Name": "Compute", "Type": "Compute Node",
            "Components": { "Firmware": [
                { "Component": "BMC", "Version": "2.1.0", "Bundle": "b1", "Type": "Prod",
                  "Locations": [
                    { "Location": "http://h/fw/bmc-2.1.0.fwpkg", "LocationType": "HTTP", "Type": "Firmware", "SHA256": SHA },
                    { "Location": "http://h/fw/bmc.corim", "LocationType": "HTTP", "Type": "CoRIM" } ],
                  "SubComponents": [ { "Component": "ERoT", "Version": "1.4" } ] },
                { "Component": "BIOS", "Version": "0.9.5",
                  "Locations": [ { "Location": "http://h/fw/bios.fwpkg?sig=secret", "Target": "/redfish/v1/UpdateService/FirmwareInventory/BIOS" } ] }
            ] }
        })
    }

    #[test]
    fn parses_the_reference_shape() {
        let switch = serde_json::json!({
            "Type": "Switch Tray", "Name": "Switch",
            "Components": {
                "Firmware": [ { "Component": "BMC", "Version": "3.0",
                                "Locations": [ { "Location": "https://h/sw-bmc.fwpkg" } ] } ],
                "Software": [ { "Component": "NVOS", "Version": "25.02", "Type": "Prod",
                    "Locations": [ { "Location": "https://h/nvos-amd64.bin", "PackageName": "nvos" },
                                   { "Location": "https://h/notes.txt" } ] } ] }
        });
        let m = Manifest::parse(&manifest(serde_json::json!([compute_board(), switch]))).unwrap();
        assert_eq!(m.id, "GB200-NVL72_2026.11");
        let compute = m.device(NodeKind::Compute).unwrap();
        assert_eq!(compute.components.len(), 2);
        let bmc = &compute.components[0];
        assert_eq!(bmc.version.as_deref(), Some("2.1.0"));
        assert_eq!(bmc.channel, "prod");
        assert_eq!(bmc.artifacts.len(), 1, "the CoRIM is not a payload");
        assert_eq!(bmc.artifacts[0].filename, "bmc-2.1.0.fwpkg");
        assert_eq!(bmc.artifacts[0].target, "BMC");
        assert_eq!(bmc.artifacts[0].sha256.as_deref(), Some(SHA));
        let bios = &compute.components[1];
        assert_eq!(bios.artifacts[0].filename, "bios.fwpkg", "query dropped");
        assert_eq!(
            bios.artifacts[0].target,
            "/redfish/v1/UpdateService/FirmwareInventory/BIOS"
        );
        assert_eq!(m.switch_images.len(), 1);
        assert_eq!(m.switch_images[0].artifact.filename, "nvos-amd64.bin");
        assert_eq!(m.artifacts().len(), 4);
        let meta = m.metadata("firmware_objects/x");
        // 4 compute node types + 3 switch node types.
        assert_eq!(meta.device_components.len(), 7);
        assert_eq!(
            meta.device_components[0].components[0].artifacts[0].filename,
            "firmware_objects/x/bmc-2.1.0.fwpkg"
        );
        assert_eq!(meta.switch_system_images[0].version, "25.02");
    }

    #[test]
    fn refusals_name_the_problem() {
        let cases: Vec<(String, &str)> = vec![
            ("not json".into(), "not valid JSON"),
            ("[]".into(), "must be a JSON object"),
            (r#"{"Milestones": []}"#.into(), "must contain 'ProductName'"),
            (r#"{"ProductName": "P"}"#.into(), "'Milestones' array"),
            (
                r#"{"ProductName": "P", "Milestones": []}"#.into(),
                "exactly one milestone; found 0",
            ),
            (
                r#"{"ProductName": "P", "Milestones": [{"Name": "a/b", "BoardSKUs": []}]}"#.into(),
                "path-safe",
            ),
            (
                manifest(serde_json::json!([{ "Name": "no type" }])),
                "BoardSKUs[0] must contain 'Type'",
            ),
            (
                manifest(
                    serde_json::json!([{ "Type": "Compute Node", "Components": { "Firmware": [
                    { "Component": "BMC", "Locations": [ { "Location": "ftp://h/x.bin" } ] } ] } }]),
                ),
                "http:// or https://",
            ),
            (
                manifest(
                    serde_json::json!([{ "Type": "Compute Node", "Components": { "Firmware": [
                    { "Component": "BMC", "Locations": [ { "Location": "http://h/x.bin", "SHA256": "abc" } ] } ] } }]),
                ),
                "64 hexadecimal",
            ),
            (
                manifest(
                    serde_json::json!([{ "Type": "Compute Node", "Components": { "Firmware": [
                    { "Component": "BMC", "Locations": [ { "Location": "http://h/" } ] } ] } }]),
                ),
                "names no file",
            ),
            (
                manifest(
                    serde_json::json!([{ "Type": "Compute Node", "Components": { "Firmware": [
                    { "Component": "BMC", "Locations": [ { "Location": "http://h/a", "FileName": ".." } ] } ] } }]),
                ),
                "path-safe",
            ),
            (
                manifest(
                    serde_json::json!([{ "Type": "Compute Node", "Components": { "Firmware": [
                    { "Component": "BMC", "Locations": [ { "Location": "http://h/1/x.bin" } ] },
                    { "Component": "BIOS", "Locations": [ { "Location": "http://h/2/x.bin" } ] } ] } }]),
                ),
                "share the file name",
            ),
        ];
        for (json, expected) in cases {
            let error = Manifest::parse(&json).unwrap_err().0;
            assert!(error.contains(expected), "{json}: {error}");
        }
    }

    #[test]
    fn boards_the_rack_manager_does_not_update_are_skipped() {
        let m = Manifest::parse(&manifest(serde_json::json!([
            { "Type": "Cable Cartridge", "Components": { "Firmware": [ { "Component": "CBC" } ] } },
            compute_board()
        ])))
        .unwrap();
        assert_eq!(m.devices.len(), 1);
        assert_eq!(m.devices[0].kind, NodeKind::Compute);
    }

    #[test]
    fn urls_are_redacted_of_tokens() {
        assert_eq!(
            redact_url("https://user:pw@h/x.bin?token=abc"),
            "https://h/x.bin"
        );
        assert_eq!(filename_of_url("http://h/a/b.bin?x=1").unwrap(), "b.bin");
    }
}
