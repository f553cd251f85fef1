//! `rackflow fleet drift --bundle FILE` (issue 12): which racks and trays
//! run something other than what a firmware bundle says their model should
//! run, read from the inventory (versions as last observed by a firmware
//! step, or as imported when never observed).
//!
//! The comparison is a pure function over rack views ([`drift`]); the
//! command pages through `GetListOfRacks` with components and prints the
//! differences only, then a summary line.

use anyhow::Context;
use rackflow_api::v1;
use rackflow_domain::ComponentType;
use rackflow_domain::bundle::{BUNDLE_TYPES, FirmwareBundle};
use serde::Serialize;

use crate::client;
use crate::output::{OutputFormat, Table, or_dash, print_json};
use crate::rack::RackView;

/// How one component compares with the bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftStatus {
    /// Observed at the bundle's version.
    Matches,
    /// At the bundle's version by the inventory's claim, never read back.
    Unobserved,
    /// Another version.
    Differs,
}

/// One component of a bundle type on a covered rack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComponentDrift {
    pub rack: String,
    pub component: String,
    #[serde(rename = "type")]
    pub component_type: String,
    pub expected: String,
    pub found: String,
    pub observed_at: Option<String>,
    pub status: DriftStatus,
}

/// The whole comparison.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DriftReport {
    pub bundle: String,
    pub racks: usize,
    /// Racks whose model the bundle does not cover (or that have none).
    pub uncovered_racks: Vec<String>,
    /// Components whose version differs, or was never observed.
    pub components: Vec<ComponentDrift>,
    pub matching: usize,
}

impl DriftReport {
    fn differing(&self) -> usize {
        self.components
            .iter()
            .filter(|c| c.status == DriftStatus::Differs)
            .count()
    }
    fn unobserved(&self) -> usize {
        self.components
            .iter()
            .filter(|c| c.status == DriftStatus::Unobserved)
            .count()
    }
}

/// Compares every rack's components of the bundle's types with the
/// versions of the rack's model. A type the bundle gives no version for
/// the model is not compared.
pub fn drift(bundle: &FirmwareBundle, racks: &[RackView]) -> DriftReport {
    let mut report = DriftReport {
        bundle: bundle.name.clone(),
        racks: racks.len(),
        ..DriftReport::default()
    };
    for rack in racks {
        let label = if rack.external_id.is_empty() {
            rack.name.clone()
        } else {
            rack.external_id.clone()
        };
        let Ok(versions) = bundle.for_rack(&label, rack.model.as_deref()) else {
            report.uncovered_racks.push(label);
            continue;
        };
        for c in rack.components.iter().flatten() {
            let Some(ty) = ComponentType::parse(&c.component_type) else {
                continue;
            };
            let Some(expected) = versions.get(&ty).filter(|_| BUNDLE_TYPES.contains(&ty)) else {
                continue;
            };
            let status = match (&c.firmware_version == expected, &c.firmware_observed_at) {
                (true, Some(_)) => {
                    report.matching += 1;
                    continue;
                }
                (true, None) => DriftStatus::Unobserved,
                (false, _) => DriftStatus::Differs,
            };
            report.components.push(ComponentDrift {
                rack: label.clone(),
                component: if c.external_id.is_empty() {
                    c.name.clone()
                } else {
                    c.external_id.clone()
                },
                component_type: ty.name().to_string(),
                expected: expected.clone(),
                found: c.firmware_version.clone(),
                observed_at: c.firmware_observed_at.clone(),
                status,
            });
        }
    }
    report
}

/// `rackflow fleet drift`.
pub async fn run_drift(
    server: &crate::client::ServerAddress,
    bundle_path: &std::path::Path,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(bundle_path)
        .with_context(|| format!("read --bundle {}", bundle_path.display()))?;
    let bundle = FirmwareBundle::from_yaml(&text)
        .map_err(|e| anyhow::anyhow!("--bundle {}: {e}", bundle_path.display()))?;
    report_drift(server, &bundle, output).await
}

/// `rackflow fleet drift --firmware-object ID` (issue 35): the object (or
/// each hardware type's default) read from the rack manager, compared as a
/// bundle: its hardware type is the rack model, the version of `[rms]
/// version_entry` per tray type the expected one.
pub async fn run_object_drift(
    server: &crate::client::ServerAddress,
    rack_manager: &crate::firmware_object::RackManagerArgs,
    object: &str,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let (mut rms, settings) = rack_manager.client()?;
    let resolved =
        rackflow_engine::manager::rms_objects::fetch(&mut rms, object, &settings.version_entry)
            .await
            .map_err(|e| anyhow::anyhow!("--firmware-object {object}: {e}"))?;
    report_drift(server, &resolved.bundle, output).await
}

async fn report_drift(
    server: &crate::client::ServerAddress,
    bundle: &FirmwareBundle,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    let racks: Vec<RackView> = crate::rack::all_racks(&mut flow, true)
        .await?
        .iter()
        .map(|r| RackView::from_proto(r, true))
        .collect();
    let report = drift(bundle, &racks);
    match output {
        OutputFormat::Json => print_json(&report)?,
        OutputFormat::Table => {
            if !report.components.is_empty() {
                let mut table = Table::new([
                    "RACK",
                    "COMPONENT",
                    "TYPE",
                    "EXPECTED",
                    "FOUND",
                    "OBSERVED",
                    "STATUS",
                ]);
                for c in &report.components {
                    table.row([
                        c.rack.clone(),
                        c.component.clone(),
                        c.component_type.clone(),
                        c.expected.clone(),
                        or_dash(&c.found),
                        or_dash(c.observed_at.as_deref().unwrap_or("")),
                        match c.status {
                            DriftStatus::Differs => "differs",
                            DriftStatus::Unobserved => "unobserved",
                            DriftStatus::Matches => "matches",
                        }
                        .to_string(),
                    ]);
                }
                table.print();
            }
            if !report.uncovered_racks.is_empty() {
                crate::outln!(
                    "racks whose model the bundle does not cover: {}",
                    report.uncovered_racks.join(", ")
                );
            }
            crate::outln!(
                "{} racks: {} components differ, {} at the version but never observed, {} match",
                report.racks,
                report.differing(),
                report.unobserved(),
                report.matching
            );
        }
    }
    Ok(())
}

/// JSON of `rackflow fleet drift` without a bundle.
#[derive(Debug, Clone, Serialize)]
pub struct ValidateView {
    pub total_diffs: i32,
    pub missing: i32,
    pub unexpected: i32,
    pub mismatch: i32,
    pub matching: i32,
    pub diffs: Vec<DiffView>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DiffView {
    /// `missing`, `unexpected` or `mismatch`.
    #[serde(rename = "type")]
    pub diff_type: String,
    pub rack: String,
    pub component: String,
    pub mac_address: String,
    /// `field: expected → actual`.
    pub fields: Vec<String>,
}

/// `rackflow fleet drift` without `--bundle`: `ValidateComponents` over the
/// whole inventory, every page.
pub async fn run_validate(
    server: &crate::client::ServerAddress,
    output: OutputFormat,
) -> anyhow::Result<()> {
    const PAGE: i32 = 500;
    let mut flow = client::connect(server).await?;
    let mut diffs = Vec::new();
    let mut first: Option<v1::ValidateComponentsResponse> = None;
    loop {
        let page = flow
            .validate_components(v1::ValidateComponentsRequest {
                pagination: Some(v1::Pagination {
                    offset: i32::try_from(diffs.len()).unwrap_or(i32::MAX),
                    limit: PAGE,
                }),
                ..Default::default()
            })
            .await
            .context("validate components")?
            .into_inner();
        let got = page.diffs.len();
        diffs.extend(page.diffs.iter().map(|d| {
            let rack = d
                .expected
                .as_ref()
                .or(d.actual.as_ref())
                .map(|c| c.rack_external_id.clone())
                .unwrap_or_default();
            DiffView {
                diff_type: v1::DiffType::try_from(d.r#type)
                    .map(|t| crate::output::enum_name(t.as_str_name(), "DIFF_TYPE_"))
                    .unwrap_or_else(|_| d.r#type.to_string()),
                rack,
                component: d.component_id.clone(),
                mac_address: d.component_mac_address.clone(),
                fields: d
                    .field_diffs
                    .iter()
                    .map(|f| {
                        format!(
                            "{}: {} → {}",
                            f.field_name, f.expected_value, f.actual_value
                        )
                    })
                    .collect(),
            }
        }));
        let total = usize::try_from(page.total_diffs).unwrap_or(0);
        first.get_or_insert(page);
        if got == 0 || diffs.len() >= total {
            break;
        }
    }
    let counts = first.unwrap_or_default();
    let view = ValidateView {
        total_diffs: counts.total_diffs,
        missing: counts.missing_count,
        unexpected: counts.unexpected_count,
        mismatch: counts.mismatch_count,
        matching: counts.match_count,
        diffs,
    };
    match output {
        OutputFormat::Json => print_json(&view)?,
        OutputFormat::Table => {
            if !view.diffs.is_empty() {
                let mut table = Table::new(["DIFF", "RACK", "COMPONENT", "BMC MAC", "FIELDS"]);
                for d in &view.diffs {
                    table.row([
                        d.diff_type.clone(),
                        or_dash(&d.rack),
                        d.component.clone(),
                        or_dash(&d.mac_address),
                        d.fields.join("; "),
                    ]);
                }
                table.print();
            }
            crate::outln!(
                "{} missing, {} unexpected, {} mismatched, {} matching",
                view.missing,
                view.unexpected,
                view.mismatch,
                view.matching
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rack::{ComponentView, LocationView, TaskStatsView};

    fn component(ext: &str, ty: &str, version: &str, observed: bool) -> ComponentView {
        ComponentView {
            id: String::new(),
            component_type: ty.into(),
            name: ext.into(),
            external_id: ext.into(),
            manufacturer: String::new(),
            model: None,
            serial_number: String::new(),
            firmware_version: version.into(),
            firmware_observed_at: observed.then(|| "2026-12-02T10:00:00Z".to_string()),
            slot_id: 0,
            tray_idx: 0,
            host_id: 0,
            power_state: String::new(),
            power_state_observed_at: None,
            operational_state: String::new(),
            leak_status: String::new(),
            leak_observed_at: None,
            leak_handling: String::new(),
            operational_reason: String::new(),
            rack_external_id: String::new(),
            nvl_domain_id: None,
            nvl_domain_external_id: None,
            bmcs: Vec::new(),
        }
    }

    fn rack(ext: &str, model: Option<&str>, components: Vec<ComponentView>) -> RackView {
        RackView {
            id: String::new(),
            external_id: ext.into(),
            name: ext.into(),
            manufacturer: String::new(),
            model: model.map(str::to_string),
            serial_number: String::new(),
            description: None,
            location: LocationView::default(),
            nvl_domain_ids: Vec::new(),
            nvl_domain_external_ids: Vec::new(),
            operation_status: String::new(),
            lifecycle_status: String::new(),
            ingested_at: None,
            decommissioned_at: None,
            task_stats: TaskStatsView::default(),
            components: Some(components),
        }
    }

    #[test]
    fn differences_unobserved_and_uncovered_racks() {
        let bundle = FirmwareBundle::from_yaml(
            "name: b\nmodels:\n  GB200 NVL72: {compute: '2.0', nvswitch: '1.1'}\n  GB300 NVL72: {compute: '3.0'}\n",
        )
        .unwrap();
        let racks = [
            rack(
                "r-1",
                Some("GB200 NVL72"),
                vec![
                    component("r-1-c0", "Compute", "2.0", true),
                    component("r-1-c1", "Compute", "1.9", true),
                    component("r-1-s0", "NVSwitch", "1.1", false),
                    component("r-1-p0", "PowerShelf", "0.1", true),
                ],
            ),
            rack(
                "r-2",
                Some("gb300 nvl72"),
                vec![component("r-2-c0", "Compute", "3.0", true)],
            ),
            rack(
                "r-3",
                Some("GB100"),
                vec![component("r-3-c0", "Compute", "1", true)],
            ),
        ];
        let report = drift(&bundle, &racks);
        assert_eq!(report.racks, 3);
        assert_eq!(report.matching, 2);
        assert_eq!(report.uncovered_racks, ["r-3"]);
        let rows: Vec<_> = report
            .components
            .iter()
            .map(|c| {
                (
                    c.component.as_str(),
                    c.expected.as_str(),
                    c.found.as_str(),
                    c.status,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("r-1-c1", "2.0", "1.9", DriftStatus::Differs),
                ("r-1-s0", "1.1", "1.1", DriftStatus::Unobserved),
            ]
        );
    }
}
