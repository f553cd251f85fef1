//! The engine's running subsystems as one value, so that the order in which
//! they stop is written once.

use std::sync::Arc;

use crate::audit::AuditTrail;
use crate::dispatcher::Dispatcher;
use crate::schedules::ScheduleManager;
use crate::tasks::TaskManager;

/// The subsystems with background loops of one server.
pub struct Engine {
    pub tasks: Arc<TaskManager>,
    pub dispatcher: Arc<Dispatcher>,
    pub schedules: Arc<ScheduleManager>,
    pub audit: Arc<AuditTrail>,
    pub leaks: crate::leaks::LeakManager,
}

impl Engine {
    /// Stops the background loops in order, each waiting for its work in
    /// flight: leak detection, then the run dispatcher (its submissions in flight need the
    /// task manager), then the schedule dispatcher (the reference's order),
    /// then the promoter and the executors (task rows are left as they are,
    /// so the next start resumes them), and last the audit pruner. The
    /// store is closed by its owner after this.
    pub async fn shutdown(&self) {
        // Leak detection first: its responses submit tasks.
        self.leaks.shutdown().await;
        self.dispatcher.shutdown().await;
        self.schedules.shutdown().await;
        self.tasks.shutdown().await;
        self.audit.shutdown().await;
    }
}
