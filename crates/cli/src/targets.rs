//! Target flags shared by the task-submitting commands (`power`, `firmware
//! upgrade`): which racks or components an operation touches, as an
//! `OperationTargetSpec`.
//!
//! `--racks` reads its values as `run create --racks` does (a UUID is the
//! rack id, anything else a rack name); the other flags say explicitly what
//! their values are.

use anyhow::bail;
use clap::Args;
use rackflow_api::v1;
use rackflow_domain::ComponentType;

use crate::args::{parse_component_type, parse_uuid};

/// A rack named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RackRef {
    Id(uuid::Uuid),
    Name(String),
    ExternalId(String),
}

/// `--racks` value: a UUID is the rack id, anything else the rack name.
pub fn rack_by_id_or_name(text: &str) -> RackRef {
    let text = text.trim();
    match uuid::Uuid::parse_str(text) {
        Ok(id) => RackRef::Id(id),
        Err(_) => RackRef::Name(text.to_string()),
    }
}

/// Parses `TYPE:ID` (`compute:r-0001-compute-01`), the value of
/// `--component-external-ids`.
pub fn parse_component_external_id(text: &str) -> Result<(ComponentType, String), String> {
    let (ty, id) = text.split_once(':').ok_or_else(|| {
        format!("invalid component reference {text:?}: expected TYPE:EXTERNAL_ID, e.g. compute:r-0001-compute-01")
    })?;
    let ty = parse_component_type(ty)?;
    let id = id.trim();
    if id.is_empty() {
        return Err(format!(
            "invalid component reference {text:?}: empty external id"
        ));
    }
    Ok((ty, id.to_string()))
}

/// Where a task-submitting command acts: racks (by name, id or external id,
/// optionally limited to some component types) or single components (by
/// UUID or by type and external id). Rack and component flags cannot be
/// mixed: one request carries one kind of target.
#[derive(Debug, Clone, Default, Args)]
pub struct TargetArgs {
    /// Racks by name; a UUID is taken as the rack id (comma-separated or repeated).
    #[arg(
        long,
        value_name = "RACK",
        value_delimiter = ',',
        help_heading = "Targets"
    )]
    pub racks: Vec<String>,
    /// Racks by UUID (comma-separated or repeated).
    #[arg(long, value_name = "UUID", value_delimiter = ',', value_parser = parse_uuid, help_heading = "Targets")]
    pub rack_ids: Vec<uuid::Uuid>,
    /// Racks by external id, e.g. r-0001 (comma-separated or repeated).
    #[arg(
        long,
        value_name = "EXTERNAL_ID",
        value_delimiter = ',',
        help_heading = "Targets"
    )]
    pub rack_external_ids: Vec<String>,
    /// NVLink domains by name; a UUID is taken as the domain id
    /// (comma-separated or repeated): their member racks when the request
    /// is served.
    #[arg(
        long = "nvl-domain",
        visible_alias = "nvl-domains",
        value_name = "DOMAIN",
        value_delimiter = ',',
        help_heading = "Targets"
    )]
    pub nvl_domains: Vec<String>,
    /// With rack or NVLink-domain targets: only these component types, e.g. compute,nvswitch [default: all].
    #[arg(long, value_name = "TYPES", value_delimiter = ',', value_parser = parse_component_type, help_heading = "Targets")]
    pub component_types: Vec<ComponentType>,
    /// Components by UUID (comma-separated or repeated).
    #[arg(long, value_name = "UUID", value_delimiter = ',', value_parser = parse_uuid, help_heading = "Targets")]
    pub components: Vec<uuid::Uuid>,
    /// Components by TYPE:EXTERNAL_ID, e.g. compute:r-0001-compute-01 (comma-separated or repeated).
    #[arg(long, value_name = "TYPE:ID", value_delimiter = ',', value_parser = parse_component_external_id, help_heading = "Targets")]
    pub component_external_ids: Vec<(ComponentType, String)>,
}

const TARGET_FLAGS: &str = "--racks, --rack-ids, --rack-external-ids, --nvl-domain, --components \
     or --component-external-ids";

/// A `--nvl-domain` value as the wire names a domain: a UUID is its id,
/// anything else its name.
pub fn nvl_domain_target(text: &str, component_types: &[i32]) -> v1::NvlDomainTarget {
    use v1::nvl_domain_target::Identifier;
    let text = text.trim();
    v1::NvlDomainTarget {
        identifier: Some(match uuid::Uuid::parse_str(text) {
            Ok(id) => Identifier::Id(v1::Uuid { id: id.to_string() }),
            Err(_) => Identifier::Name(text.to_string()),
        }),
        component_types: component_types.to_vec(),
    }
}

impl TargetArgs {
    /// The racks named by the rack flags, in flag order (`--racks`,
    /// `--rack-ids`, `--rack-external-ids`), blanks dropped.
    pub fn rack_refs(&self) -> Vec<RackRef> {
        let racks = self
            .racks
            .iter()
            .filter(|r| !r.trim().is_empty())
            .map(|r| rack_by_id_or_name(r));
        let ids = self.rack_ids.iter().map(|id| RackRef::Id(*id));
        let external = self
            .rack_external_ids
            .iter()
            .map(|r| r.trim())
            .filter(|r| !r.is_empty())
            .map(|r| RackRef::ExternalId(r.to_string()));
        racks.chain(ids).chain(external).collect()
    }

    /// The target spec of these flags. Errors (exit 1) when no target is
    /// given, when rack and component flags are mixed, or when
    /// `--component-types` comes with component targets.
    pub fn to_proto(&self) -> anyhow::Result<v1::OperationTargetSpec> {
        use v1::operation_target_spec::Targets;
        let racks = self.rack_refs();
        let has_components = !self.components.is_empty() || !self.component_external_ids.is_empty();
        if self.component_types.contains(&ComponentType::Unknown) {
            bail!("--component-types: the Unknown component type cannot be targeted");
        }
        let domains: Vec<&str> = self
            .nvl_domains
            .iter()
            .map(|d| d.trim())
            .filter(|d| !d.is_empty())
            .collect();
        if !domains.is_empty() {
            if !racks.is_empty() || has_components {
                bail!(
                    "--nvl-domain cannot be combined with rack or component flags: one request \
                     targets either racks, NVLink domains or components"
                );
            }
            let component_types: Vec<i32> =
                self.component_types.iter().map(|t| *t as i32).collect();
            return Ok(v1::OperationTargetSpec {
                targets: Some(Targets::NvlDomains(v1::NvlDomainTargets {
                    targets: domains
                        .iter()
                        .map(|d| nvl_domain_target(d, &component_types))
                        .collect(),
                })),
            });
        }
        let targets = match (racks.is_empty(), has_components) {
            (true, false) => bail!("no targets: pass {TARGET_FLAGS}"),
            (false, true) => bail!(
                "rack flags (--racks, --rack-ids, --rack-external-ids) and component flags \
                 (--components, --component-external-ids) cannot be combined: one request \
                 targets either racks or components"
            ),
            (false, false) => {
                let component_types: Vec<i32> =
                    self.component_types.iter().map(|t| *t as i32).collect();
                Targets::Racks(v1::RackTargets {
                    targets: racks
                        .into_iter()
                        .map(|r| v1::RackTarget {
                            identifier: Some(match r {
                                RackRef::Id(id) => {
                                    v1::rack_target::Identifier::Id(v1::Uuid { id: id.to_string() })
                                }
                                RackRef::Name(n) => v1::rack_target::Identifier::Name(n),
                                RackRef::ExternalId(e) => {
                                    v1::rack_target::Identifier::ExternalId(e)
                                }
                            }),
                            component_types: component_types.clone(),
                        })
                        .collect(),
                })
            }
            (true, true) => {
                if !self.component_types.is_empty() {
                    bail!(
                        "--component-types only applies to rack targets; component targets \
                         name their components exactly"
                    );
                }
                use v1::component_target::Identifier;
                let by_id = self.components.iter().map(|id| v1::ComponentTarget {
                    identifier: Some(Identifier::Id(v1::Uuid { id: id.to_string() })),
                });
                let by_external =
                    self.component_external_ids
                        .iter()
                        .map(|(ty, id)| v1::ComponentTarget {
                            identifier: Some(Identifier::External(v1::ExternalRef {
                                r#type: *ty as i32,
                                id: id.clone(),
                            })),
                        });
                Targets::Components(v1::ComponentTargets {
                    targets: by_id.chain(by_external).collect(),
                })
            }
        };
        Ok(v1::OperationTargetSpec {
            targets: Some(targets),
        })
    }
}
