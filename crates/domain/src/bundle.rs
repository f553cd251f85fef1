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

/// How rack models compare (trimmed, case-insensitive).
pub fn model_key(model: &str) -> String {
    model.trim().to_lowercase()
}

/// The version each of `types` of a rack of `rack_model` is to install
/// under `payload`: its model's versions from the bundle (none when the
/// bundle does not cover the model: the submission refuses that rack), or
/// the one `target_version` for every type; empty without a version.
pub fn versions_for_rack(
    payload: &crate::run::FirmwarePayload,
    rack_model: Option<&str>,
    types: impl IntoIterator<Item = ComponentType>,
) -> BTreeMap<ComponentType, String> {
    let types = types.into_iter();
    match (&payload.bundle, payload.target_version.as_deref()) {
        (Some(bundle), _) => match bundle.for_rack("", rack_model) {
            Ok(versions) => types
                .filter_map(|ty| Some((ty, versions.get(&ty)?.clone())))
                .collect(),
            Err(_) => BTreeMap::new(),
        },
        (None, Some(version)) if !version.trim().is_empty() => {
            types.map(|ty| (ty, version.to_string())).collect()
        }
        (None, _) => BTreeMap::new(),
    }
}

/// Rack model families a version string may name even when no targeted
/// rack is of that family (`gb200-fw-25.05.2` on a GB300-only fleet).
pub const KNOWN_MODEL_FAMILIES: [&str; 5] = ["gb200", "gb300", "gh200", "vr200", "vr300"];

/// What to do instead, appended to every refusal of [`check_one_version`].
pub const ONE_VERSION_REMEDY: &str = "give each rack model its versions with a firmware bundle \
     (--bundle FILE.yaml; firmware_bundle on the wire), or, if every model really takes this \
     version, say so with --same-version-for-all-models (same_version_for_all_models)";

/// The family a model name or version string names: its first token of one
/// to four letters then three digits (`GB200 NVL72` → `gb200`,
/// `nvsw-gb300-1.14` → `gb300`); `NVL72` (two digits) is a form factor,
/// not a family.
fn families(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|token| {
            let letters = token.chars().take_while(char::is_ascii_alphabetic).count();
            let digits = &token[letters..];
            (1..=4).contains(&letters)
                && digits.len() == 3
                && digits.chars().all(|c| c.is_ascii_digit())
        })
        .map(str::to_ascii_lowercase)
}

fn family_of(model: &str) -> Option<String> {
    families(model).next()
}

/// Issue 31: one firmware version for every targeted rack (`target_version`
/// without a bundle) is refused when the racks span several rack models —
/// one model's image would be installed on the others — or when the version
/// names a model family (`gb200-…`) that a targeted rack's model is not of.
/// `models` has one entry per targeted rack; racks without a model count
/// for neither check (nothing is known about them). The error says which
/// models and how many racks of each, and what to do instead.
pub fn check_one_version<'a>(
    version: &str,
    models: impl IntoIterator<Item = Option<&'a str>>,
) -> Result<(), String> {
    // model key → (name as first seen, racks)
    let mut by_model: BTreeMap<String, (&str, usize)> = BTreeMap::new();
    for model in models.into_iter().flatten() {
        let model = model.trim();
        if model.is_empty() {
            continue;
        }
        by_model.entry(model_key(model)).or_insert((model, 0)).1 += 1;
    }
    let listed = |models: &mut dyn Iterator<Item = &(&str, usize)>| {
        models
            .map(|(name, racks)| {
                format!("{name}: {racks} rack{}", if *racks == 1 { "" } else { "s" })
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if by_model.len() > 1 {
        return Err(format!(
            "one target_version ({version:?}) for racks of {} rack models ({}) would install \
             one model's image on the others: {ONE_VERSION_REMEDY}",
            by_model.len(),
            listed(&mut by_model.values())
        ));
    }
    let targeted: Vec<String> = by_model
        .values()
        .filter_map(|(name, _)| family_of(name))
        .collect();
    let named: Vec<String> = families(version)
        .filter(|f| KNOWN_MODEL_FAMILIES.contains(&f.as_str()) || targeted.contains(f))
        .collect();
    let Some(family) = named.first() else {
        return Ok(());
    };
    let other: Vec<&(&str, usize)> = by_model
        .values()
        .filter(|(name, _)| family_of(name).is_some_and(|f| !named.contains(&f)))
        .collect();
    if other.is_empty() {
        return Ok(());
    }
    Err(format!(
        "target_version {version:?} is a {} image, but the targeted racks are of another \
         model ({}): {ONE_VERSION_REMEDY}",
        family.to_ascii_uppercase(),
        listed(&mut other.into_iter())
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_for_a_rack_come_from_its_model_or_the_one_version() {
        let bundle = FirmwareBundle::from_yaml(FILE).unwrap();
        let mut payload = crate::run::FirmwarePayload {
            bundle: Some(bundle),
            ..Default::default()
        };
        let both = [ComponentType::Compute, ComponentType::NvSwitch];
        assert_eq!(
            versions_for_rack(&payload, Some("gb200 nvl72"), both),
            BTreeMap::from([
                (ComponentType::Compute, "gb200-fw-25.05.2".to_string()),
                (ComponentType::NvSwitch, "nvsw-1.14".to_string()),
            ])
        );
        assert_eq!(
            versions_for_rack(&payload, Some("GB300 NVL72"), both),
            BTreeMap::from([(ComponentType::Compute, "gb300-fw-26.01.0".to_string())])
        );
        assert!(versions_for_rack(&payload, Some("other"), both).is_empty());
        assert!(versions_for_rack(&payload, None, both).is_empty());
        payload.bundle = None;
        payload.target_version = Some("2.0.0".into());
        assert_eq!(
            versions_for_rack(&payload, None, [ComponentType::Compute]),
            BTreeMap::from([(ComponentType::Compute, "2.0.0".to_string())])
        );
        payload.target_version = None;
        assert!(versions_for_rack(&payload, None, both).is_empty());
    }

    #[test]
    fn one_version_for_one_model_or_no_model_passes() {
        let gb200 = Some("GB200 NVL72");
        check_one_version("2.0.0", [gb200, gb200, Some(" gb200 nvl72 ")]).unwrap();
        check_one_version("2.0.0", [None, None]).unwrap();
        check_one_version("2.0.0", [gb200, None]).unwrap();
        check_one_version("gb200-fw-25.05.2", [gb200]).unwrap();
        check_one_version("nvsw-gb200-1.14", [gb200]).unwrap();
        // NVL72 is a form factor both families share, not a family.
        check_one_version("nvl72-1.0", [Some("GB300 NVL72")]).unwrap();
        check_one_version("anything", std::iter::empty()).unwrap();
    }

    #[test]
    fn one_version_across_models_is_refused_with_counts_and_the_remedy() {
        let err = check_one_version(
            "2.0.0",
            [
                Some("GB200 NVL72"),
                Some("GB300 NVL72"),
                Some("GB200 NVL72"),
                None,
            ],
        )
        .unwrap_err();
        assert!(
            err.starts_with(
                "one target_version (\"2.0.0\") for racks of 2 rack models (GB200 NVL72: 2 racks, \
                 GB300 NVL72: 1 rack) would install one model's image on the others: "
            ),
            "{err}"
        );
        assert!(err.contains("--bundle FILE.yaml"), "{err}");
        assert!(err.contains("--same-version-for-all-models"), "{err}");
    }

    #[test]
    fn a_version_of_another_family_is_refused() {
        let err = check_one_version("gb200-fw-25.05.2", [Some("GB300 NVL72")]).unwrap_err();
        assert!(
            err.starts_with(
                "target_version \"gb200-fw-25.05.2\" is a GB200 image, but the targeted racks \
                 are of another model (GB300 NVL72: 1 rack): "
            ),
            "{err}"
        );
        // A family only the fleet's own models name counts too.
        let err = check_one_version("xb900-1.0", [Some("XB901 Rack")]);
        assert!(err.is_ok(), "xb900 is neither known nor targeted: {err:?}");
        check_one_version("GB300-1.0", [Some("GB300 NVL72")]).unwrap();
    }

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
