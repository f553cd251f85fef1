//! The leak manager (issue 34): takes leak reports from every source and
//! keeps the components' leak state and the leak events (see
//! `rackflow_domain::leak`). Running the effective event rule's response to
//! a new leak is the next step of issue 34; until then a report records the
//! leak and logs it, and acts on nothing.

use std::sync::Arc;

use rackflow_domain::event_rule::EventRuleInvalid;
use rackflow_domain::leak::{LeakEvent, LeakReport, LeakReported};
use rackflow_domain::run::Page;
use rackflow_store::{LeakEventFilter, Store};

use crate::error::{EngineError, EventRuleError};

/// Records leak reports and lists leak events.
#[derive(Clone)]
pub struct LeakManager {
    store: Arc<dyn Store>,
}

impl LeakManager {
    pub fn new(store: Arc<dyn Store>) -> Self {
        LeakManager { store }
    }

    /// Applies one report; an unknown component is not found.
    pub async fn report(&self, report: LeakReport) -> Result<LeakReported, EngineError> {
        report
            .check()
            .map_err(|m| EngineError::EventRule(EventRuleError::Invalid(EventRuleInvalid(m))))?;
        let outcome = self.store.leak_report(&report).await?;
        let component = report.component_id;
        match &outcome {
            LeakReported::ComponentNotFound => {
                return Err(EngineError::ComponentNotFound(component));
            }
            LeakReported::New(event) => tracing::warn!(
                %component,
                rack = ?event.rack_id,
                event_id = %event.id,
                source = %event.source,
                severity = %event.severity,
                "coolant leak detected"
            ),
            LeakReported::Repeat(event) => tracing::debug!(
                %component,
                event_id = %event.id,
                observations = event.observations,
                "leak reported again"
            ),
            LeakReported::Cleared(Some(event)) => tracing::info!(
                %component,
                event_id = %event.id,
                source = %report.source,
                "leak cleared"
            ),
            LeakReported::Cleared(None) => {
                tracing::debug!(%component, source = %report.source, "no leak")
            }
            LeakReported::Stale => tracing::debug!(
                %component,
                source = %report.source,
                "leak report older than the latest one: ignored"
            ),
        }
        Ok(outcome)
    }

    pub async fn list(
        &self,
        filter: &LeakEventFilter,
        page: Page,
    ) -> Result<(Vec<LeakEvent>, i64), EngineError> {
        Ok(self.store.leak_events_list(filter, page).await?)
    }
}
