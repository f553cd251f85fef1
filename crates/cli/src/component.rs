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
