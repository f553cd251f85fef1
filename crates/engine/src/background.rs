//! The one way the engine runs background work: each subsystem (dispatcher,
//! task manager, schedule dispatcher, rack-manager pollers) owns a
//! [`Background`], spawns its loops and helpers on it, and stops them with
//! [`Background::shutdown`]. The order in which subsystems stop is written
//! once, in [`crate::Engine::shutdown`].

use std::future::Future;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A subsystem's cancellation token and the tracker of everything it
/// spawned.
#[derive(Debug, Clone)]
pub struct Background {
    name: &'static str,
    token: CancellationToken,
    tracker: TaskTracker,
}

impl Background {
    /// `name` labels the subsystem in logs.
    pub fn new(name: &'static str) -> Background {
        Background {
            name,
            token: CancellationToken::new(),
            tracker: TaskTracker::new(),
        }
    }

    /// Fires when shutdown starts; loops select on it.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Whether shutdown has started.
    pub fn is_stopping(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Spawns `task` (named `what` in logs), tracked until it ends. After
    /// shutdown started nothing new starts: `None`.
    pub fn spawn<F>(&self, what: &'static str, task: F) -> Option<JoinHandle<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if self.token.is_cancelled() {
            tracing::debug!(
                subsystem = self.name,
                task = what,
                "not started: shutting down"
            );
            return None;
        }
        Some(self.tracker.spawn(task))
    }

    /// Cancels the token, then waits for every task spawned here to end.
    pub async fn shutdown(&self) {
        self.token.cancel();
        self.tracker.close();
        self.tracker.wait().await;
        tracing::debug!(subsystem = self.name, "stopped");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[tokio::test]
    async fn shutdown_cancels_then_waits_and_refuses_new_work() {
        let background = Background::new("test");
        let finished = Arc::new(AtomicBool::new(false));
        let token = background.token().clone();
        let done = finished.clone();
        let handle = background.spawn("loop", async move {
            token.cancelled().await;
            // Work after the cancel still runs to its end before shutdown
            // returns.
            tokio::task::yield_now().await;
            done.store(true, Ordering::SeqCst);
        });
        assert!(handle.is_some());
        background.shutdown().await;
        assert!(finished.load(Ordering::SeqCst));
        assert!(background.is_stopping());
        assert!(background.spawn("late", async {}).is_none());
    }
}
