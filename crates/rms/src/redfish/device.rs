//! A node's place in its rack, read from its chassis resources.
//!
//! NVIDIA's BMCs publish the tray topology on the chassis of the cable
//! cartridge (CBC) in `Oem.Nvidia`: `ChassisPhysicalSlotNumber` (newer
//! firmware: `TraySlotNumber`) and `ComputeTrayIndex` (`TraySlotIndex`),
//! and that chassis' `SerialNumber` is the rack chassis serial, a number.
//! A BMC without that OEM block is read from the standard
//! `Location.PartLocation.LocationOrdinalValue` (the slot) of its first
//! chassis; whatever it does not say stays unset.

use serde_json::Value;

use super::error::RedfishError;
use super::leak::link;
use super::node::RedfishNode;
use super::types::member_uris;

/// Normalised device metadata of a node (`NodeDeviceInfo`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceInfo {
    pub chassis_serial: Option<i64>,
    pub slot_number: Option<u32>,
    pub tray_index: Option<u32>,
}

impl DeviceInfo {
    /// What one chassis body says; `None` when it says nothing.
    pub fn of_chassis(chassis: &Value) -> Option<DeviceInfo> {
        let nvidia = chassis.get("Oem").and_then(|o| o.get("Nvidia"));
        let oem_number = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| nvidia.and_then(|n| n.get(*k)).and_then(number))
        };
        let slot = oem_number(&["ChassisPhysicalSlotNumber", "TraySlotNumber"]);
        let tray = oem_number(&["ComputeTrayIndex", "TraySlotIndex"]);
        if slot.is_some() || tray.is_some() {
            return Some(DeviceInfo {
                chassis_serial: chassis
                    .get("SerialNumber")
                    .and_then(Value::as_str)
                    .and_then(|s| s.trim().parse::<i64>().ok()),
                slot_number: slot,
                tray_index: tray,
            });
        }
        let ordinal = chassis
            .get("Location")
            .and_then(|l| l.get("PartLocation"))
            .and_then(|p| p.get("LocationOrdinalValue"))
            .and_then(number);
        ordinal.map(|slot| DeviceInfo {
            chassis_serial: None,
            slot_number: Some(slot),
            tray_index: None,
        })
    }
}

/// A non-negative integer, also when a BMC sends it as a string.
fn number(value: &Value) -> Option<u32> {
    match value {
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

impl RedfishNode {
    /// The node's device metadata: the first chassis with the NVIDIA tray
    /// topology, else the first chassis with a standard slot location.
    pub async fn device_info(&self) -> Result<DeviceInfo, RedfishError> {
        let root = self.service_root().await?;
        let Some(chassis_uri) = link(&root, "Chassis") else {
            return Ok(DeviceInfo::default());
        };
        let collection = self.client().get_json(chassis_uri).await?;
        let members = member_uris(&collection).ok_or_else(|| RedfishError::InvalidResponse {
            uri: chassis_uri.to_string(),
            reason: "the Chassis collection has no Members".to_string(),
        })?;
        let mut fallback = None;
        for member in members {
            let Some(chassis) = self.optional(&member).await? else {
                continue;
            };
            let nvidia = chassis.get("Oem").and_then(|o| o.get("Nvidia")).is_some();
            match DeviceInfo::of_chassis(&chassis) {
                Some(info) if nvidia => return Ok(info),
                Some(info) => {
                    fallback.get_or_insert(info);
                }
                None => {}
            }
        }
        Ok(fallback.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nvidia_topology_wins_and_standard_location_is_the_fallback() {
        let cbc = json!({
            "SerialNumber": "1821220000000",
            "Oem": { "Nvidia": { "ChassisPhysicalSlotNumber": 7, "ComputeTrayIndex": 3 } }
        });
        assert_eq!(
            DeviceInfo::of_chassis(&cbc),
            Some(DeviceInfo {
                chassis_serial: Some(1_821_220_000_000),
                slot_number: Some(7),
                tray_index: Some(3)
            })
        );
        let newer = json!({ "SerialNumber": "ABC", "Oem": { "Nvidia": { "TraySlotNumber": "12", "TraySlotIndex": 0 } } });
        assert_eq!(
            DeviceInfo::of_chassis(&newer),
            Some(DeviceInfo {
                chassis_serial: None,
                slot_number: Some(12),
                tray_index: Some(0)
            })
        );
        let standard = json!({ "Location": { "PartLocation": { "LocationOrdinalValue": 4 } } });
        assert_eq!(
            DeviceInfo::of_chassis(&standard).unwrap().slot_number,
            Some(4)
        );
        assert_eq!(DeviceInfo::of_chassis(&json!({ "Id": "1U" })), None);
        assert_eq!(
            DeviceInfo::of_chassis(&json!({ "Oem": { "Nvidia": { "ComputeTrayIndex": -1 } } })),
            None
        );
    }
}
