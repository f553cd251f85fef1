//! The Flow server's Prometheus metrics: one registry the engine's parts
//! count into and the server's `/metrics` endpoint encodes (OpenMetrics
//! text, through the official `prometheus-client`).
//!
//! Families (labels are closed sets or ids the operator created, never
//! free text a caller sends, so their cardinality stays bounded):
//! * `rackflow_event_rule_alerts_total{rule, severity}` — `send_alert`
//!   actions an event rule ran;
//! * `rackflow_leak_reports_total{outcome}` — leak reports by what they did
//!   (`new`, `repeat`, `cleared`, `stale`);
//! * `rackflow_leak_response_tasks_total{effect}` — tasks leak responses
//!   `submitted` and `cancelled`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AlertLabels {
    rule: String,
    severity: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EffectLabels {
    effect: String,
}

/// The registry and the families the engine counts into. Share as
/// `Arc<Metrics>`; counting is lock-free.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    alerts: Family<AlertLabels, Counter>,
    leak_reports: Family<OutcomeLabels, Counter>,
    leak_response_tasks: Family<EffectLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("rackflow");
        let alerts = Family::<AlertLabels, Counter>::default();
        registry.register(
            "event_rule_alerts",
            "Alerts event rules sent (send_alert actions)",
            alerts.clone(),
        );
        let leak_reports = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "leak_reports",
            "Leak reports taken, by what they did to the leak events",
            leak_reports.clone(),
        );
        let leak_response_tasks = Family::<EffectLabels, Counter>::default();
        registry.register(
            "leak_response_tasks",
            "Tasks leak responses submitted or cancelled to go first",
            leak_response_tasks.clone(),
        );
        Metrics {
            registry,
            alerts,
            leak_reports,
            leak_response_tasks,
        }
    }
}

impl Metrics {
    /// An event rule's `send_alert` ran.
    pub fn alert_sent(&self, rule: uuid::Uuid, severity: &str) {
        self.alerts
            .get_or_create(&AlertLabels {
                rule: rule.to_string(),
                severity: severity.to_string(),
            })
            .inc();
    }

    /// A leak report was taken with this outcome.
    pub fn leak_reported(&self, outcome: &str) {
        self.leak_reports
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_string(),
            })
            .inc();
    }

    /// A leak response submitted `submitted` and cancelled `cancelled`
    /// tasks.
    pub fn leak_response(&self, submitted: usize, cancelled: usize) {
        for (effect, n) in [("submitted", submitted), ("cancelled", cancelled)] {
            self.leak_response_tasks
                .get_or_create(&EffectLabels {
                    effect: effect.to_string(),
                })
                .inc_by(u64::try_from(n).unwrap_or(u64::MAX));
        }
    }

    /// The OpenMetrics text of every family.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_show_in_the_text_with_their_labels() {
        let m = Metrics::default();
        let rule = uuid::Uuid::nil();
        m.alert_sent(rule, "critical");
        m.alert_sent(rule, "critical");
        m.leak_reported("new");
        m.leak_response(1, 2);
        let text = m.encode();
        assert!(
            text.contains(&format!(
                "rackflow_event_rule_alerts_total{{rule=\"{rule}\",severity=\"critical\"}} 2"
            )),
            "{text}"
        );
        assert!(
            text.contains("rackflow_leak_reports_total{outcome=\"new\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("rackflow_leak_response_tasks_total{effect=\"cancelled\"} 2"),
            "{text}"
        );
        assert!(text.contains("# HELP rackflow_event_rule_alerts"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
