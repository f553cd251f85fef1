//! Replays recorded task-workflow histories against today's workflow code
//! (Temporal's determinism check): a change to `TaskWorkflow` that would
//! break a workflow in flight on a running cluster fails here, before it
//! ships. The histories (`tests/histories/*.json`, `temporal workflow show
//! -o json` of real runs on a dev server) are a two-stage firmware upgrade
//! that completed and one cancelled in its first stage.
//!
//! After an intended change of the workflow's command sequence, version it
//! (`ctx.patched`) rather than re-record: histories of the old code may be
//! running.

#![allow(clippy::unwrap_used)]

use rackflow_temporal::workflow::TaskWorkflow;
use temporalio_client::WorkflowHistory;
use temporalio_sdk::workflow_replayer::{WorkflowReplayer, WorkflowReplayerOptions};

async fn replay(file: &str) {
    let path = format!("{}/tests/histories/{file}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap();
    let history = WorkflowHistory::from_json(&bytes).unwrap();
    let replayer = WorkflowReplayer::new(
        WorkflowReplayerOptions::new()
            .register_workflow::<TaskWorkflow>()
            .unwrap()
            .build(),
    )
    .unwrap();
    if let Err(e) = replayer.replay_workflow(history).await {
        panic!("{file} no longer replays against TaskWorkflow: {e}");
    }
}

#[tokio::test]
async fn a_completed_two_stage_upgrade_replays() {
    replay("completed-two-stages.json").await;
}

#[tokio::test]
async fn a_task_cancelled_in_its_first_stage_replays() {
    replay("cancelled-in-stage-1.json").await;
}
