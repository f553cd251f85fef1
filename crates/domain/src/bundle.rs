//! Firmware bundles (issue 12): the version each component type of each
//! rack model should run, e.g.
//!
//! ```yaml
//! name: fleet-2026-12
//! models:
//!   GB200 NVL72:
//!     compute: gb200-fw-25.05.2
//!     nvswitch: nvsw-gb200-1.14
//!   GB300 NVL72:
//!     compute: gb300-fw-26.01.0
//! ```
//!
//! This module owns the bundle's shape, its validation, and what it means
//! for one rack: the per-type versions of the rack's model, written as the
//! layered target version the executor already understands. Rack models
//! are matched without case and surrounding blanks; component types by
//! their names (`compute`, `nvswitch`, `powershelf`, case-insensitive).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ComponentType;

/// Component types a bundle may name: those with firmware steps.
pub const BUNDLE_TYPES: [ComponentType; 3] = [
    ComponentType::Compute,
    ComponentType::NvSwitch,
    ComponentType::PowerShelf,
];

/// Longest version text a bundle may carry.
pub const MAX_BUNDLE_VERSION_CHARS: usize = 256;

/// A validated bundle: rack model → component type → version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirmwareBundle {
    #[serde(default)]
    pub name: String,
    pub models: BTreeMap<String, BTreeMap<ComponentType, String>>,
}

/// Why a bundle is not usable. The text names the offending entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BundleError {
    #[error("firmware bundle: {0}")]
    Parse(String),
    #[error("firmware bundle has no models")]
    Empty,
    #[error("firmware bundle model {0:?}: name is empty")]
    EmptyModel(String),
    #[error("firmware bundle names rack model {0:?} twice (models match without case)")]
    DuplicateModel(String),
    #[error(
        "firmware bundle model {model:?}: unknown component type {name:?} (expected compute, nvswitch or powershelf)"
    )]
    UnknownType { model: String, name: String },
    #[error("firmware bundle model {model:?}: {component_type} has no versions")]
    NoVersions {
        model: String,
        component_type: ComponentType,
    },
    #[error("firmware bundle model {model:?}: {component_type} version {reason}")]
    BadVersion {
        model: String,
        component_type: ComponentType,
        reason: &'static str,
    },
    #[error("firmware bundle model {0:?} names no component type")]
    NoTypes(String),
}

/// The file form: types by name, checked into [`FirmwareBundle`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BundleFile {
    #[serde(default)]
    name: String,
    #[serde(default)]
    models: BTreeMap<String, BTreeMap<String, String>>,
}

impl FirmwareBundle {
    /// Parses and validates a YAML (or JSON, a YAML subset) bundle file.
    pub fn from_yaml(text: &str) -> Result<FirmwareBundle, BundleError> {
        let file: BundleFile =
            serde_yaml::from_str(text).map_err(|e| BundleError::Parse(e.to_string()))?;
        let mut entries = Vec::new();
        for (model, types) in file.models {
            if types.is_empty() {
                return Err(BundleError::NoTypes(model));
            }
            for (name, version) in types {
                let component_type = ComponentType::parse(&name)
                    .filter(|t| BUNDLE_TYPES.contains(t))
                    .ok_or_else(|| BundleError::UnknownType {
                        model: model.clone(),
                        name: name.clone(),
                    })?;
                entries.push((model.clone(), component_type, version));
            }
        }
        FirmwareBundle::from_entries(file.name, entries)
    }

    /// A bundle from `(rack model, type, version)` entries (the wire form),
    /// validated: models and versions non-empty, no model twice (without
    /// case), one version per model and type, plain version texts.
    pub fn from_entries(
        name: String,
        entries: impl IntoIterator<Item = (String, ComponentType, String)>,
    ) -> Result<FirmwareBundle, BundleError> {
        let mut models: BTreeMap<String, BTreeMap<ComponentType, String>> = BTreeMap::new();
        let mut keys: BTreeMap<String, String> = BTreeMap::new();
        for (model, component_type, version) in entries {
            let shown = model.trim().to_string();
            if shown.is_empty() {
                return Err(BundleError::EmptyModel(model));
            }
            if !BUNDLE_TYPES.contains(&component_type) {
                return Err(BundleError::UnknownType {
                    model: shown,
                    name: component_type.name().to_string(),
                });
            }
            let key = model_key(&shown);
            let model_name = keys.entry(key).or_insert_with(|| shown.clone()).clone();
            if model_name != shown {
                return Err(BundleError::DuplicateModel(shown));
            }
            let version = version.trim().to_string();
            let bad = |reason| BundleError::BadVersion {
                model: shown.clone(),
                component_type,
                reason,
            };
            if version.is_empty() {
                return Err(BundleError::NoVersions {
                    model: shown,
                    component_type,
                });
            }
            if version.chars().count() > MAX_BUNDLE_VERSION_CHARS {
                return Err(bad("is longer than 256 characters"));
            }
            if version.chars().any(char::is_control) {
                return Err(bad("contains control characters"));
            }
            if version.starts_with('{') || version.starts_with('[') {
                return Err(bad("must be a plain version, not a JSON document"));
            }
            let types = models.entry(model_name).or_default();
            if types.insert(component_type, version).is_some() {
                return Err(bad("is given twice"));
            }
        }
        if models.is_empty() {
            return Err(BundleError::Empty);
        }
        Ok(FirmwareBundle {
            name: name.trim().to_string(),
            models,
        })
    }

    /// The versions of `rack_model` by type; the error names the rack, its
    /// model and the models the bundle covers.
    pub fn for_rack(
        &self,
        rack: &str,
        rack_model: Option<&str>,
    ) -> Result<&BTreeMap<ComponentType, String>, String> {
        let covered = self.models.keys().cloned().collect::<Vec<_>>().join(", ");
        let Some(model) = rack_model.map(str::trim).filter(|m| !m.is_empty()) else {
            return Err(format!(
                "rack {rack} has no model: firmware bundle {} cannot pick its versions (it covers: {covered})",
                self.label()
            ));
        };
        let key = model_key(model);
        self.models
            .iter()
            .find(|(m, _)| model_key(m) == key)
            .map(|(_, types)| types)
            .ok_or_else(|| {
                format!(
                    "firmware bundle {} has no versions for rack model {model:?} (rack {rack}); it covers: {covered}",
                    self.label()
                )
            })
    }

    /// The layered target version (`{"compute": "…", "nvswitch": "…"}`)
    /// of the given per-type versions.
    pub fn layered(versions: &BTreeMap<ComponentType, String>) -> String {
        let object: serde_json::Map<String, serde_json::Value> = versions
            .iter()
            .map(|(ty, v)| {
                (
                    ty.name().to_ascii_lowercase(),
                    serde_json::Value::String(v.clone()),
                )
            })
            .collect();
        serde_json::Value::Object(object).to_string()
    }

    /// `"name"` or `(unnamed)`, for messages.
    pub fn label(&self) -> String {
        if self.name.is_empty() {
            "(unnamed)".to_string()
        } else {
            format!("{:?}", self.name)
        }
    }
}

fn model_key(model: &str) -> String {
    model.trim().to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "
name: fleet-2026-12
models:
  GB200 NVL72:
    compute: gb200-fw-25.05.2
    NVSwitch: nvsw-1.14
  GB300 NVL72:
    Compute: gb300-fw-26.01.0
";

    #[test]
    fn parses_and_picks_per_rack_model() {
        let bundle = FirmwareBundle::from_yaml(FILE).unwrap();
        assert_eq!(bundle.name, "fleet-2026-12");
        let gb200 = bundle.for_rack("r-1", Some(" gb200 nvl72 ")).unwrap();
        assert_eq!(
            FirmwareBundle::layered(gb200),
            r#"{"compute":"gb200-fw-25.05.2","nvswitch":"nvsw-1.14"}"#
        );
        let gb300 = bundle.for_rack("r-2", Some("GB300 NVL72")).unwrap();
        assert_eq!(
            gb300.get(&ComponentType::Compute).unwrap(),
            "gb300-fw-26.01.0"
        );
        assert_eq!(gb300.get(&ComponentType::NvSwitch), None);
        assert_eq!(
            bundle.for_rack("r-3", Some("GB100")).unwrap_err(),
            "firmware bundle \"fleet-2026-12\" has no versions for rack model \"GB100\" (rack r-3); \
             it covers: GB200 NVL72, GB300 NVL72"
        );
        assert!(
            bundle
                .for_rack("r-4", None)
                .unwrap_err()
                .starts_with("rack r-4 has no model")
        );
    }

    #[test]
    fn bad_bundles_say_what_is_wrong() {
        let err = |text: &str| FirmwareBundle::from_yaml(text).unwrap_err().to_string();
        assert_eq!(err("models: {}"), "firmware bundle has no models");
        assert_eq!(
            err("models:\n  GB200:\n    tor: x\n"),
            "firmware bundle model \"GB200\": unknown component type \"tor\" (expected compute, nvswitch or powershelf)"
        );
        assert_eq!(
            err("models:\n  GB200:\n    compute: ''\n"),
            "firmware bundle model \"GB200\": Compute has no versions"
        );
        assert_eq!(
            err("models:\n  GB200:\n    compute: '{\"a\":1}'\n"),
            "firmware bundle model \"GB200\": Compute version must be a plain version, not a JSON document"
        );
        assert_eq!(
            err("models:\n  GB200: {compute: a}\n  gb200: {compute: b}\n"),
            "firmware bundle names rack model \"gb200\" twice (models match without case)"
        );
        assert!(err("models: [1, 2]").starts_with("firmware bundle: "));
        assert!(
            err("modles: {}").starts_with("firmware bundle: "),
            "unknown keys refused"
        );
        assert_eq!(
            err("models:\n  GB200: {}\n"),
            "firmware bundle model \"GB200\" names no component type"
        );
    }

    #[test]
    fn entries_refuse_a_type_twice() {
        let twice = FirmwareBundle::from_entries(
            String::new(),
            [
                ("GB200".to_string(), ComponentType::Compute, "1".to_string()),
                ("GB200".to_string(), ComponentType::Compute, "2".to_string()),
            ],
        );
        assert_eq!(
            twice.unwrap_err().to_string(),
            "firmware bundle model \"GB200\": Compute version is given twice"
        );
    }
}
