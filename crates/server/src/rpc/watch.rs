//! `WatchOperationRun` (`v1.FlowExtensions`): the run now and on every
//! change. Each stream is a loop owned by [`Watches`], which the server
//! stops on shutdown — before it waits for in-flight RPCs, so that open
//! streams do not hold shutdown up until the grace period runs out.

use std::pin::Pin;
use std::time::Duration;

use rackflow_api::v1 as pb;
use rackflow_engine::dispatcher::Dispatcher;
use rackflow_engine::runs::RunManager;
use tokio::sync::broadcast::error::RecvError;
use tokio_stream::Stream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::Status;

use super::ApiResult;
use super::runs::run_id;
use crate::convert;
use crate::error::ApiError;

/// The stream a watch answers with.
pub(crate) type RunStream = Pin<Box<dyn Stream<Item = Result<pb::OperationRun, Status>> + Send>>;

/// Child tasks progress without touching the run row, so a watch re-reads
/// at least this often.
const REREAD_INTERVAL: Duration = Duration::from_secs(1);

/// The message a stream ends with when the server shuts down (UNAVAILABLE:
/// clients reconnect to the next server).
pub(crate) const SHUTTING_DOWN: &str = "server is shutting down";

/// The open watch streams: their loops stop when `stop` fires.
#[derive(Clone)]
pub(crate) struct Watches {
    stop: CancellationToken,
    tracker: TaskTracker,
}

impl Watches {
    pub(crate) fn new(stop: CancellationToken) -> Self {
        Watches {
            stop,
            tracker: TaskTracker::new(),
        }
    }

    /// Ends every watch loop (if the shutdown token has not already) and
    /// waits until they have returned.
    pub(crate) async fn stop(&self) {
        self.stop.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

pub(crate) async fn watch(
    watches: &Watches,
    runs: &RunManager,
    dispatcher: &Dispatcher,
    req: pb::WatchOperationRunRequest,
) -> ApiResult<RunStream> {
    let id = run_id(req.id.as_ref())?;
    // Fail fast on an unknown run.
    runs.get(id, false).await?;
    let runs = runs.clone();
    let mut changes = dispatcher.subscribe();
    let stop = watches.stop.clone();
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    watches.tracker.spawn(async move {
        let mut last: Option<pb::OperationRun> = None;
        loop {
            match runs.get(id, true).await {
                Ok((run, stats)) => {
                    let terminal = run.status.is_terminal();
                    let message = convert::operation_run(&run, stats.as_ref());
                    if last.as_ref() != Some(&message) {
                        // A client that stops reading fills the channel; the
                        // send must not hold shutdown up.
                        tokio::select! {
                            sent = tx.send(Ok(message.clone())) => {
                                if sent.is_err() {
                                    return;
                                }
                            }
                            () = stop.cancelled() => {
                                let _ = tx.try_send(Err(Status::unavailable(SHUTTING_DOWN)));
                                return;
                            }
                        }
                        last = Some(message);
                    }
                    if terminal {
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(Status::from(ApiError::from(e)))).await;
                    return;
                }
            }
            // Wake on this run's changes, at the latest after the re-read
            // interval; leave when the client does or the server stops.
            tokio::select! {
                () = run_changed(&mut changes, id) => {}
                () = tokio::time::sleep(REREAD_INTERVAL) => {}
                () = tx.closed() => return,
                () = stop.cancelled() => {
                    let _ = tx.try_send(Err(Status::unavailable(SHUTTING_DOWN)));
                    return;
                }
            }
        }
    });
    Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)))
}

/// Returns when the dispatcher announces a change of run `id` (or when
/// announcements were missed: the caller re-reads anyway); never when the
/// announcements end.
pub(crate) async fn run_changed(
    changes: &mut tokio::sync::broadcast::Receiver<uuid::Uuid>,
    id: uuid::Uuid,
) {
    loop {
        match changes.recv().await {
            Ok(changed) if changed == id => return,
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => return,
            Err(RecvError::Closed) => std::future::pending::<()>().await,
        }
    }
}
