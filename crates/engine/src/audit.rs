//! The audit trail's engine side: appending the API's events, reading the
//! trail, and the pruner that keeps it within its retention. Run controls
//! are not written here: the dispatcher records them in the run's own
//! transaction.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use rackflow_domain::audit::AuditEvent;
use rackflow_store::{AuditFilter, Store};

use crate::background::Background;
use crate::error::EngineError;

/// Most events one read returns.
pub const MAX_AUDIT_PAGE: i64 = 1000;

/// How long events are kept, and how often the pruner looks.
#[derive(Debug, Clone, Copy)]
pub struct AuditConfig {
    /// Events older than this are removed; `None` keeps them forever.
    pub retention: Option<Duration>,
    /// Interval of the pruner.
    pub prune_interval: Duration,
    /// Longest an API call's answer waits for its audit event to be
    /// written (the call has happened; a failure is logged).
    pub write_timeout: Duration,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            retention: Some(Duration::from_secs(90 * 24 * 3600)),
            prune_interval: Duration::from_secs(3600),
            write_timeout: Duration::from_secs(5),
        }
    }
}

/// The trail of one server.
pub struct AuditTrail {
    store: Arc<dyn Store>,
    config: AuditConfig,
    background: Background,
}

impl AuditTrail {
    pub fn new(store: Arc<dyn Store>, config: AuditConfig) -> Arc<AuditTrail> {
        Arc::new(AuditTrail {
            store,
            config,
            background: Background::new("audit trail"),
        })
    }

    /// Appends an event. A failure is logged with the event's who / what /
    /// outcome and not returned: the call it describes has already
    /// happened, and its caller gets that call's own outcome.
    pub async fn record(&self, event: AuditEvent) {
        let append = self.store.audit_append(std::slice::from_ref(&event));
        let error = match tokio::time::timeout(self.config.write_timeout, append).await {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            // A database that is away must not hold the caller's answer for
            // the pool's whole acquire timeout a second time.
            Err(_) => format!(
                "no answer from the database within {:?}",
                self.config.write_timeout
            ),
        };
        tracing::error!(
            actor = %event.actor, action = %event.action, code = %event.code,
            run_id = event.run_id.map(tracing::field::display), error = %error,
            "audit event not recorded"
        );
    }

    /// Up to `limit` (capped at [`MAX_AUDIT_PAGE`]) events matching
    /// `filter`.
    pub async fn list(
        &self,
        filter: &AuditFilter,
        limit: i64,
    ) -> Result<Vec<AuditEvent>, EngineError> {
        let limit = if limit <= 0 {
            MAX_AUDIT_PAGE
        } else {
            limit.min(MAX_AUDIT_PAGE)
        };
        Ok(self.store.audit_list(filter, limit).await?)
    }

    /// Starts the pruner (no-op without a retention).
    pub fn spawn_pruner(self: &Arc<Self>) {
        let Some(retention) = self.config.retention else {
            return;
        };
        let trail = Arc::clone(self);
        let token = self.background.token().clone();
        self.background.spawn("audit pruner", async move {
            let mut tick = tokio::time::interval(trail.config.prune_interval);
            loop {
                tokio::select! {
                    () = token.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let Ok(age) = chrono::Duration::from_std(retention) else {
                    return;
                };
                match trail.store.audit_prune(Utc::now() - age).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(removed = n, "audit events past retention pruned"),
                    Err(e) => tracing::warn!(error = %e, "audit pruning failed; retrying later"),
                }
            }
        });
    }

    /// Stops the pruner.
    pub async fn shutdown(&self) {
        self.background.shutdown().await;
    }
}
