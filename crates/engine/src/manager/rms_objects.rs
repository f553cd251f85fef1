//! Firmware objects of the rack manager's catalogue as Flow uses them
//! (issue 35): a firmware task or operation run may name an object (by id,
//! or `default`: the default object of each rack's hardware type) instead
//! of a version or a bundle file.
//!
//! An object becomes a [`FirmwareBundle`] entry: its `hardware_type` is the
//! rack model it is for, and per component type (compute tray ← `Compute
//! Node`, NVLink switch ← `Switch Tray`, power shelf ← `Power Shelf`) the
//! version of the component Flow reads a tray's installed version from
//! (`[rms] version_entry`, default `BMC`). That version is what the task's
//! version check expects after the update; the update itself applies the
//! whole object to the tray through `ApplyStoredFirmwareObject`
//! ([`super::rms::RmsManager`]). So a rack of a model no object covers is
//! refused at submission, exactly as with a bundle file.

use std::collections::BTreeMap;

use rackflow_api::rack_manager as pb;
use rackflow_api::rack_manager::rack_manager_client::RackManagerClient;
use rackflow_domain::ComponentType;
use rackflow_domain::bundle::FirmwareBundle;
use tonic::transport::Channel;

/// What a request names: one object, or each hardware type's default.
pub const DEFAULT_OBJECT: &str = "default";

/// An object set resolved for a request: the bundle the version checks use
/// and, per rack model (the bundle's keys), the object to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedObjects {
    pub bundle: FirmwareBundle,
    /// Rack model → firmware object id.
    pub objects: BTreeMap<String, String>,
}

/// The Flow component type a catalogue device type updates.
pub fn component_type_of(device_type: &str) -> Option<ComponentType> {
    match device_type {
        "Compute Node" => Some(ComponentType::Compute),
        "Switch Tray" => Some(ComponentType::NvSwitch),
        "Power Shelf" => Some(ComponentType::PowerShelf),
        _ => None,
    }
}

/// Per component type, the version of `version_entry` in the object (types
/// whose device has no such component are left out).
pub fn versions_of(
    object: &pb::FirmwareObject,
    version_entry: &str,
) -> BTreeMap<ComponentType, String> {
    let mut versions = BTreeMap::new();
    for device in object
        .metadata
        .iter()
        .flat_map(|m| m.device_components.iter())
    {
        let Some(ty) = component_type_of(&device.device_type) else {
            continue;
        };
        if let Some(c) = device
            .components
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(version_entry) && !c.version.is_empty())
        {
            versions.entry(ty).or_insert_with(|| c.version.clone());
        }
    }
    versions
}

/// The bundle and object map of `objects` (each must be available; one
/// per hardware type).
pub fn resolve(
    label: &str,
    objects: &[pb::FirmwareObject],
    version_entry: &str,
) -> Result<ResolvedObjects, String> {
    let mut entries = Vec::new();
    let mut map = BTreeMap::new();
    for object in objects {
        if !object.available {
            return Err(format!(
                "firmware object {} is not available{}",
                object.id,
                object.unavailable_reason.as_deref().map_or_else(
                    || " yet (its artifacts are being fetched)".to_owned(),
                    |r| format!(": {r}")
                )
            ));
        }
        let versions = versions_of(object, version_entry);
        if versions.is_empty() {
            return Err(format!(
                "firmware object {} names no {version_entry} version for any compute tray, \
                 NVLink switch or power shelf: Flow cannot check what it installed",
                object.id
            ));
        }
        if map
            .insert(object.hardware_type.clone(), object.id.clone())
            .is_some()
        {
            return Err(format!(
                "two firmware objects for hardware type {}",
                object.hardware_type
            ));
        }
        entries.extend(
            versions
                .into_iter()
                .map(|(ty, v)| (object.hardware_type.clone(), ty, v)),
        );
    }
    if entries.is_empty() {
        return Err(format!("{label}: no firmware object to apply"));
    }
    let bundle =
        FirmwareBundle::from_entries(label.to_owned(), entries).map_err(|e| e.to_string())?;
    Ok(ResolvedObjects {
        bundle,
        objects: map,
    })
}

/// Reads what `requested` names from the rack manager: the object with that
/// id, or every hardware type's default (`default`).
pub async fn fetch(
    client: &mut RackManagerClient<Channel>,
    requested: &str,
    version_entry: &str,
) -> Result<ResolvedObjects, FetchError> {
    let requested = requested.trim();
    if requested == DEFAULT_OBJECT {
        let objects: Vec<pb::FirmwareObject> = client
            .list_firmware_objects(pb::ListFirmwareObjectsRequest {
                only_available: false,
                hardware_type: String::new(),
            })
            .await
            .map_err(FetchError::RackManager)?
            .into_inner()
            .objects
            .into_iter()
            .filter(|o| o.is_default)
            .collect();
        if objects.is_empty() {
            return Err(FetchError::Refused(
                "the rack manager's catalogue has no default firmware object".to_owned(),
            ));
        }
        return resolve("default firmware objects", &objects, version_entry)
            .map_err(FetchError::Refused);
    }
    let object = client
        .get_firmware_object(pb::GetFirmwareObjectRequest {
            id: requested.to_owned(),
        })
        .await
        .map_err(|status| match status.code() {
            tonic::Code::NotFound => FetchError::Refused(status.message().to_owned()),
            _ => FetchError::RackManager(status),
        })?
        .into_inner()
        .object
        .ok_or_else(|| {
            FetchError::Refused(format!(
                "the rack manager returned no object for {requested}"
            ))
        })?;
    resolve(
        &format!("firmware object {requested}"),
        &[object],
        version_entry,
    )
    .map_err(FetchError::Refused)
}

/// Why a firmware object could not be used.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The request cannot be served as it is (unknown, unavailable object).
    #[error("{0}")]
    Refused(String),
    /// The rack manager did not answer.
    #[error("rack manager: {}", .0.message())]
    RackManager(tonic::Status),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(
        id: &str,
        hw: &str,
        available: bool,
        devices: &[(&str, &str, &str)],
    ) -> pb::FirmwareObject {
        pb::FirmwareObject {
            id: id.into(),
            hardware_type: hw.into(),
            available,
            metadata: Some(pb::FirmwareObjectMetadata {
                device_components: devices
                    .iter()
                    .map(
                        |(device, name, version)| pb::FirmwareObjectDeviceComponents {
                            device_type: (*device).into(),
                            components: vec![pb::FirmwareObjectComponent {
                                name: (*name).into(),
                                version: (*version).into(),
                                ..Default::default()
                            }],
                            ..Default::default()
                        },
                    )
                    .collect(),
                switch_system_images: Vec::new(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn objects_become_bundle_entries_per_hardware_type() {
        let a = object(
            "A",
            "GB200 NVL72",
            true,
            &[
                ("Compute Node", "BMC", "2.1"),
                ("Switch Tray", "BMC", "3.0"),
                ("Compute Node", "BIOS", "9"),
            ],
        );
        let b = object("B", "GB300 NVL72", true, &[("Power Shelf", "bmc", "1.4")]);
        let resolved = resolve("defaults", &[a, b], "BMC").unwrap();
        let gb200 = resolved.bundle.for_rack("r1", Some("gb200 nvl72")).unwrap();
        assert_eq!(
            gb200.get(&ComponentType::Compute).map(String::as_str),
            Some("2.1")
        );
        assert_eq!(
            gb200.get(&ComponentType::NvSwitch).map(String::as_str),
            Some("3.0")
        );
        let gb300 = resolved.bundle.for_rack("r2", Some("GB300 NVL72")).unwrap();
        assert_eq!(
            gb300.get(&ComponentType::PowerShelf).map(String::as_str),
            Some("1.4")
        );
        assert_eq!(
            resolved.objects.get("GB200 NVL72").map(String::as_str),
            Some("A")
        );
    }

    #[test]
    fn unusable_objects_are_refused_with_the_reason() {
        let mut pending = object("P", "X", false, &[("Compute Node", "BMC", "1")]);
        assert!(
            resolve("l", std::slice::from_ref(&pending), "BMC")
                .unwrap_err()
                .contains("not available yet")
        );
        pending.unavailable_reason = Some("bmc.fwpkg: 404".into());
        assert!(
            resolve("l", &[pending], "BMC")
                .unwrap_err()
                .ends_with(": bmc.fwpkg: 404")
        );
        let no_bmc = object("N", "X", true, &[("Compute Node", "BIOS", "1")]);
        assert!(
            resolve("l", &[no_bmc], "BMC")
                .unwrap_err()
                .contains("names no BMC version")
        );
        let twice = [
            object("A", "X", true, &[("Compute Node", "BMC", "1")]),
            object("B", "X", true, &[("Compute Node", "BMC", "2")]),
        ];
        assert!(
            resolve("l", &twice, "BMC")
                .unwrap_err()
                .contains("two firmware objects")
        );
    }
}
