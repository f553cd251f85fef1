//! `rackflow component …`: one component's operational state, which the
//! readiness gate reads (an `in_service` component holds power and firmware
//! actions back until it is drained, put in maintenance or cleared).

use anyhow::Context;
use clap::{Subcommand, ValueEnum};
use rackflow_api::v1;

use crate::client::{self, ServerAddress};
use crate::output::{Fields, OutputFormat, or_dash, print_json};
use crate::rack::ComponentView;

#[derive(Debug, Subcommand)]
pub enum ComponentCommand {
    /// List components, in rack, type and slot order: all of them, a
    /// rack's, or those in given leak statuses (`--leak detected` finds
    /// every leaking tray of the fleet).
    List {
        /// Only this rack's components (UUID).
        #[arg(long, value_parser = crate::args::parse_uuid)]
        rack_id: Option<uuid::Uuid>,
        /// Only components in these leak statuses (repeat or comma-separate).
        #[arg(long, value_enum, value_delimiter = ',')]
        leak: Vec<LeakArg>,
        #[arg(long, default_value_t = 100)]
        limit: i32,
        #[arg(long, default_value_t = 0)]
        offset: i32,
    },
    /// Show one component: its rack, NVLink domain, firmware (as observed
    /// or as imported), power, operational state, position and BMCs.
    Get {
        /// Component UUID.
        #[arg(value_parser = crate::args::parse_uuid)]
        id: uuid::Uuid,
    },
    /// Set (or clear) a component's operational state. Power and firmware
    /// tasks wait while any of their components is in service (the
    /// readiness gate), unless they override the readiness check.
    SetState {
        /// Component UUID.
        #[arg(value_parser = crate::args::parse_uuid)]
        id: uuid::Uuid,
        /// The new state; `clear` removes it (ready for anything).
        #[arg(value_enum)]
        state: StateArg,
        /// Why (shown with the component and in the reference's `status`).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Delete a component (an RMA'd tray): hidden from lookups, listings
    /// and targets until purged.
    Delete {
        /// Component UUID.
        #[arg(value_parser = crate::args::parse_uuid)]
        id: uuid::Uuid,
    },
    /// Delete a deleted component for good.
    Purge {
        /// Component UUID.
        #[arg(value_parser = crate::args::parse_uuid)]
        id: uuid::Uuid,
    },
}

/// Leak statuses, as typed on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LeakArg {
    Detected,
    NotDetected,
    /// No leak source has reported on it.
    Unknown,
}

impl LeakArg {
    fn to_wire(self) -> v1::LeakStatus {
        match self {
            LeakArg::Detected => v1::LeakStatus::Detected,
            LeakArg::NotDetected => v1::LeakStatus::NotDetected,
            LeakArg::Unknown => v1::LeakStatus::Unknown,
        }
    }
}

/// The operational states, as typed on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StateArg {
    InService,
    Drained,
    Maintenance,
    Clear,
}

impl StateArg {
    fn to_wire(self) -> v1::OperationalState {
        match self {
            StateArg::InService => v1::OperationalState::InService,
            StateArg::Drained => v1::OperationalState::Drained,
            StateArg::Maintenance => v1::OperationalState::Maintenance,
            StateArg::Clear => v1::OperationalState::Unspecified,
        }
    }
}

pub async fn run(
    server: &ServerAddress,
    command: &ComponentCommand,
    output: OutputFormat,
) -> anyhow::Result<()> {
    match command {
        ComponentCommand::List {
            rack_id,
            leak,
            limit,
            offset,
        } => {
            let mut flow = client::connect(server).await?;
            let target_spec = rack_id.map(|id| v1::OperationTargetSpec {
                targets: Some(v1::operation_target_spec::Targets::Racks(v1::RackTargets {
                    targets: vec![v1::RackTarget {
                        identifier: Some(v1::rack_target::Identifier::Id(v1::Uuid {
                            id: id.to_string(),
                        })),
                        component_types: Vec::new(),
                    }],
                })),
            });
            let reply = flow
                .get_components(v1::GetComponentsRequest {
                    target_spec,
                    pagination: Some(v1::Pagination {
                        offset: *offset,
                        limit: *limit,
                    }),
                    leak_statuses: leak.iter().map(|l| l.to_wire() as i32).collect(),
                    ..Default::default()
                })
                .await
                .context("list components")?
                .into_inner();
            let views: Vec<ComponentView> = reply
                .components
                .iter()
                .map(ComponentView::from_proto)
                .collect();
            match output {
                OutputFormat::Json => print_json(&serde_json::json!({
                    "components": views,
                    "total": reply.total,
                }))?,
                OutputFormat::Table => {
                    crate::rack::components_table(&views).print();
                    crate::outln!("{} of {} components", views.len(), reply.total);
                }
            }
            Ok(())
        }
        ComponentCommand::Get { id } => {
            crate::lifecycle::run_component_get(server, *id, output).await
        }
        ComponentCommand::Delete { id } => {
            crate::lifecycle::run_component_removal(server, *id, false, output).await
        }
        ComponentCommand::Purge { id } => {
            crate::lifecycle::run_component_removal(server, *id, true, output).await
        }
        ComponentCommand::SetState { id, state, reason } => {
            if *state == StateArg::Clear && reason.is_some() {
                anyhow::bail!("--reason goes with a state, not with clear");
            }
            let mut flow = client::connect(server).await?;
            let component = flow
                .patch_component(v1::PatchComponentRequest {
                    id: Some(v1::Uuid { id: id.to_string() }),
                    operational_state: Some(state.to_wire() as i32),
                    operational_reason: reason.clone(),
                    ..Default::default()
                })
                .await
                .with_context(|| format!("set the operational state of component {id}"))?
                .into_inner()
                .component
                .with_context(|| format!("component {id}: the server answered without it"))?;
            let view = ComponentView::from_proto(&component);
            match output {
                OutputFormat::Json => print_json(&view)?,
                OutputFormat::Table => {
                    let mut fields = Fields::new();
                    fields
                        .add("ID", &view.id)
                        .add("Name", or_dash(&view.name))
                        .add("External ID", or_dash(&view.external_id))
                        .add("State", or_dash(&view.operational_state))
                        .add("Reason", or_dash(&view.operational_reason));
                    fields.print();
                }
            }
            Ok(())
        }
    }
}
