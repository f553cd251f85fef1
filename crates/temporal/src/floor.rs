//! Temporal's own floor, the baseline of the scale benchmark (issue 11):
//! how fast the same server starts and completes a trivial workflow (one
//! no-op activity) with the same number of workers. rackflow's task
//! workflows are measured against it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use temporalio_client::WorkflowGetResultOptions;
use temporalio_client::WorkflowStartOptions;
use temporalio_macros::{activities, workflow, workflow_methods};
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use temporalio_sdk::{ActivityOptions, WorkerOptions, WorkflowContext, WorkflowResult};
use tokio::sync::Semaphore;

use crate::{TemporalError, TemporalSettings, Worker, connect};

/// One no-op activity.
#[workflow]
#[derive(Default)]
pub struct TrivialWorkflow;

#[workflow_methods]
impl TrivialWorkflow {
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>, n: u32) -> WorkflowResult<u32> {
        let n = ctx
            .execute_activity(
                NoopActivities::noop,
                n,
                ActivityOptions::start_to_close_timeout(Duration::from_secs(30)),
            )
            .await?;
        Ok(n)
    }
}

pub struct NoopActivities;

#[activities]
impl NoopActivities {
    #[activity]
    pub async fn noop(_ctx: ActivityContext, n: u32) -> Result<u32, ActivityError> {
        Ok(n)
    }
}

/// What [`measure`] saw.
#[derive(Debug, Clone, Copy)]
pub struct Floor {
    pub workflows: usize,
    pub elapsed: Duration,
}

impl Floor {
    /// Workflows started and completed per second.
    pub fn rate(&self) -> f64 {
        self.workflows as f64 / self.elapsed.as_secs_f64().max(f64::EPSILON)
    }
}

/// Runs `workers` workers of [`TrivialWorkflow`] on a task queue of their
/// own and starts `workflows` of them, at most `concurrent` at a time,
/// awaiting each result: the time from the first start to the last result.
pub async fn measure(
    settings: &TemporalSettings,
    workers: usize,
    workflows: usize,
    concurrent: usize,
) -> Result<Floor, TemporalError> {
    let queue = format!("floor-{}", uuid::Uuid::new_v4().simple());
    let mut started_workers = Vec::new();
    for _ in 0..workers {
        let settings = TemporalSettings {
            task_queue: queue.clone(),
            ..settings.clone()
        };
        let queue = queue.clone();
        started_workers.push(Worker::spawn_with(settings, move || {
            let options = WorkerOptions::new(queue)
                .register_workflow::<TrivialWorkflow>()
                .map_err(|e| e.to_string())?;
            Ok(options.register_activities(NoopActivities).build())
        })?);
    }
    let client = connect(settings)
        .await
        .map_err(|e| TemporalError::Worker(e.to_string()))?;
    let permits = Arc::new(Semaphore::new(concurrent.max(1)));
    let mut running = tokio::task::JoinSet::new();
    let started = Instant::now();
    for n in 0..workflows {
        let permit = Arc::clone(&permits)
            .acquire_owned()
            .await
            .map_err(|e| TemporalError::Worker(e.to_string()))?;
        let client = client.clone();
        let queue = queue.clone();
        running.spawn(async move {
            let _permit = permit;
            let id = format!("{queue}-{n}");
            let handle = client
                .start_workflow(
                    TrivialWorkflow::run,
                    u32::try_from(n).unwrap_or(u32::MAX),
                    WorkflowStartOptions::new(queue, id).build(),
                )
                .await
                .map_err(|e| e.to_string())?;
            handle
                .get_result(WorkflowGetResultOptions::default())
                .await
                .map_err(|e| e.to_string())
        });
    }
    let mut failures = Vec::new();
    while let Some(joined) = running.join_next().await {
        match joined {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => failures.push(e),
            Err(e) => failures.push(e.to_string()),
        }
    }
    let elapsed = started.elapsed();
    for worker in started_workers {
        worker.shutdown().await;
    }
    if let Some(first) = failures.first() {
        return Err(TemporalError::Worker(format!(
            "{} of {workflows} trivial workflows failed, first: {first}",
            failures.len()
        )));
    }
    Ok(Floor { workflows, elapsed })
}
