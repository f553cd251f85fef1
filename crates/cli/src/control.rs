//! `rackflow run pause|resume|advance|cancel`: the manual controls of an
//! operation run. Each prints the run's resulting state (`-o json`: the run
//! with its configuration, as `run get` shows it).

use anyhow::Context;
use rackflow_api::v1;

use crate::client;
use crate::output::{OutputFormat, print_json};
use crate::run::{RunSummaryView, RunView};
use crate::spec::RunSpec;
use crate::watch::{pause_help, status_line};

/// One manual control.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    Pause,
    Resume,
    /// Open the next phase of a run paused at a phase gate; with
    /// `expected_phase`, only if that is the phase it opens.
    Advance {
        expected_phase: Option<i32>,
    },
    Cancel {
        reason: Option<String>,
    },
}

impl Control {
    fn verb(&self) -> &'static str {
        match self {
            Control::Pause => "pause",
            Control::Resume => "resume",
            Control::Advance { .. } => "advance",
            Control::Cancel { .. } => "cancel",
        }
    }
}

/// Sends `control` for run `id` and returns the run the server answered.
pub async fn send(
    flow: &mut client::Flow,
    id: uuid::Uuid,
    control: &Control,
) -> anyhow::Result<v1::OperationRun> {
    let uuid = Some(v1::Uuid { id: id.to_string() });
    let result = match control {
        Control::Pause => {
            flow.pause_operation_run(v1::PauseOperationRunRequest { id: uuid })
                .await
        }
        Control::Resume => {
            flow.resume_operation_run(v1::ResumeOperationRunRequest { id: uuid })
                .await
        }
        Control::Advance { expected_phase } => {
            flow.advance_operation_run_phase(v1::AdvanceOperationRunPhaseRequest {
                id: uuid,
                expected_phase_index: *expected_phase,
            })
            .await
        }
        Control::Cancel { reason } => {
            flow.cancel_operation_run(v1::CancelOperationRunRequest {
                id: uuid,
                reason: reason.clone().unwrap_or_default(),
            })
            .await
        }
    };
    Ok(result
        .with_context(|| format!("{} run {id}", control.verb()))?
        .into_inner())
}

/// `rackflow run pause|resume|advance|cancel ID`.
pub async fn run_control(
    server: &crate::client::ServerAddress,
    id: uuid::Uuid,
    control: &Control,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    let run = send(&mut flow, id, control).await?;
    let view = RunView {
        summary: RunSummaryView::from_proto(&run.summary.clone().unwrap_or_default()),
        configuration: run
            .configuration
            .as_ref()
            .map(RunSpec::from_proto)
            .unwrap_or_default(),
        stats: None,
        last_control: None,
    };
    match output {
        OutputFormat::Json => print_json(&view)?,
        OutputFormat::Table => {
            crate::outln!("{}", status_line(&view.summary));
            if view.summary.status == "paused" {
                // The phase of a phase gate is not in the answer: ask.
                let current_phase = if view.summary.reason == "phase_gate" {
                    current_phase(&mut flow, id).await.unwrap_or(0)
                } else {
                    0
                };
                if let Some(help) =
                    pause_help(&view.summary, current_phase, &server.command_prefix())
                {
                    crate::outln!("continue with: {}", help.command);
                    if let Some(note) = help.note {
                        crate::outln!("note: {note}");
                    }
                }
            }
        }
    }
    Ok(())
}

/// The run's current phase index, from its stats.
async fn current_phase(flow: &mut client::Flow, id: uuid::Uuid) -> anyhow::Result<i32> {
    let run = flow
        .get_operation_run(v1::GetOperationRunRequest {
            id: Some(v1::Uuid { id: id.to_string() }),
            include_stats: true,
        })
        .await?
        .into_inner()
        .operation_run
        .context("the server answered without a run")?;
    Ok(run
        .stats
        .and_then(|s| s.current_phase_stats)
        .map_or(0, |s| s.phase_index))
}
