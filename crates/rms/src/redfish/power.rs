//! Power control of a [`RedfishNode`]: `PowerState`, `ComputerSystem.Reset`
//! through the action target the system advertises, and waiting until the
//! power state settles.
//!
//! BMCs apply a reset asynchronously (sushy-tools' fake driver after a
//! random 1–11 s), so a reset's `204` says "accepted", not "done";
//! [`RedfishNode::set_power_and_wait`] polls `PowerState` for the caller.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::error::RedfishError;
use super::node::RedfishNode;
use super::types::{PowerState, ResetType};

const RESET_ACTION: &str = "#ComputerSystem.Reset";

/// How a [`RedfishNode::set_power_and_wait`] went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerWait {
    /// The state waited for, and reached.
    pub target: PowerState,
    /// False when the system was already there and the reset was a no-op.
    pub reset_sent: bool,
    /// Distinct power states read, in order (consecutive repeats folded).
    pub states_seen: Vec<PowerState>,
    /// `PowerState` reads after the reset.
    pub polls: u32,
    pub elapsed: Duration,
}

/// Where and how a system takes a reset, as its resource advertises it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ResetAction {
    pub target: String,
    /// `ResetType@Redfish.AllowableValues`, when listed.
    pub allowed: Option<Vec<String>>,
}

impl ResetAction {
    pub(super) fn of_system(system_uri: &str, system: &Value) -> Result<Self, RedfishError> {
        let action = system
            .get("Actions")
            .and_then(|a| a.get(RESET_ACTION))
            .ok_or_else(|| RedfishError::NotAdvertised {
                resource: system_uri.to_string(),
                what: RESET_ACTION.to_string(),
            })?;
        let target = action
            .get("target")
            .and_then(Value::as_str)
            .ok_or_else(|| RedfishError::InvalidResponse {
                uri: system_uri.to_string(),
                reason: format!("{RESET_ACTION} has no target"),
            })?
            .to_string();
        let allowed = action
            .get("ResetType@Redfish.AllowableValues")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            });
        Ok(ResetAction { target, allowed })
    }

    /// Refuses a reset type the BMC does not list (when it lists any).
    pub(super) fn check(&self, reset_type: &ResetType) -> Result<(), RedfishError> {
        match &self.allowed {
            Some(allowed) if !allowed.iter().any(|a| a == reset_type.as_str()) => {
                Err(RedfishError::ResetTypeNotAllowed {
                    reset_type: reset_type.clone(),
                    allowed: allowed.clone(),
                })
            }
            _ => Ok(()),
        }
    }
}

impl RedfishNode {
    /// The system's `PowerState`.
    pub async fn power_state(&self) -> Result<PowerState, RedfishError> {
        let (_, system) = self.system().await?;
        Ok(PowerState::of_system(&system))
    }

    /// Sends `ComputerSystem.Reset` with `reset_type` to the action target
    /// the system advertises. Returns once the BMC accepted it; the power
    /// state changes later.
    pub async fn reset(&self, reset_type: &ResetType) -> Result<(), RedfishError> {
        let (uri, system) = self.system().await?;
        let action = ResetAction::of_system(&uri, &system)?;
        if self.client.config().check_allowable_values {
            action.check(reset_type)?;
        }
        let body = json!({ "ResetType": reset_type.as_str() });
        match self.client.post_json(&action.target, &body).await {
            Ok(answer) => {
                tracing::info!(system = %uri, reset_type = %reset_type, status = answer.status, "redfish reset accepted");
                Ok(())
            }
            Err(RedfishError::Http {
                status: 501,
                message,
                ..
            }) => Err(RedfishError::ResetTypeUnsupported {
                reset_type: reset_type.clone(),
                message,
            }),
            Err(e) => Err(e),
        }
    }

    /// Resets the system and polls `PowerState` every `poll_interval` until
    /// it is the state `reset_type` settles in, for at most `timeout`.
    /// On/ForceOn/ForceOff/GracefulShutdown are not sent when the system is
    /// already there. A restart is done when the system reads `On` again.
    pub async fn set_power_and_wait(
        &self,
        reset_type: &ResetType,
        timeout: Duration,
        poll_interval: Duration,
    ) -> Result<PowerWait, RedfishError> {
        let target = reset_type
            .settles_in()
            .ok_or_else(|| RedfishError::NoPowerTarget(reset_type.clone()))?;
        let started = Instant::now();
        let mut wait = PowerWait {
            target: target.clone(),
            reset_sent: false,
            states_seen: Vec::new(),
            polls: 0,
            elapsed: Duration::ZERO,
        };
        if reset_type.idempotent() {
            let now = self.power_state().await?;
            if now == target {
                wait.states_seen.push(now);
                wait.elapsed = started.elapsed();
                return Ok(wait);
            }
            wait.states_seen.push(now);
        }
        self.reset(reset_type).await?;
        wait.reset_sent = true;
        loop {
            let state = self.power_state().await?;
            wait.polls += 1;
            if wait.states_seen.last() != Some(&state) {
                tracing::debug!(power_state = %state, target = %target, "redfish power state");
                wait.states_seen.push(state.clone());
            }
            if state == target {
                wait.elapsed = started.elapsed();
                return Ok(wait);
            }
            if started.elapsed() >= timeout {
                return Err(RedfishError::PowerTimeout {
                    target,
                    last: state,
                    waited: started.elapsed(),
                });
            }
            tokio::time::sleep(poll_interval).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_action_reads_target_and_allowable_values() {
        let system = json!({"Actions": {"#ComputerSystem.Reset": {
            "target": "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
            "ResetType@Redfish.AllowableValues": ["On", "ForceOff", "Nmi"]}}});
        let a = ResetAction::of_system("/redfish/v1/Systems/1", &system).unwrap();
        assert_eq!(
            a.target,
            "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"
        );
        assert!(a.check(&ResetType::On).is_ok());
        assert!(a.check(&ResetType::Nmi).is_ok());
        let refused = a.check(&ResetType::Other("Bogus".into())).unwrap_err();
        assert!(matches!(refused, RedfishError::ResetTypeNotAllowed { .. }));
        assert_eq!(
            refused.to_string(),
            "reset type Bogus is not among the BMC's allowable values [On, ForceOff, Nmi]"
        );
        assert!(a.check(&ResetType::GracefulRestart).is_err());
    }

    #[test]
    fn reset_action_without_allowable_values_allows_anything() {
        let system = json!({"Actions": {"#ComputerSystem.Reset": {"target": "/t"}}});
        let a = ResetAction::of_system("/s", &system).unwrap();
        assert_eq!(a.allowed, None);
        assert!(a.check(&ResetType::Other("Anything".into())).is_ok());
    }

    #[test]
    fn reset_action_missing_or_without_target_is_an_error() {
        assert!(matches!(
            ResetAction::of_system("/s", &json!({"Actions": {}})),
            Err(RedfishError::NotAdvertised { .. })
        ));
        assert!(matches!(
            ResetAction::of_system("/s", &json!({})),
            Err(RedfishError::NotAdvertised { .. })
        ));
        assert!(matches!(
            ResetAction::of_system("/s", &json!({"Actions": {"#ComputerSystem.Reset": {}}})),
            Err(RedfishError::InvalidResponse { .. })
        ));
    }
}
