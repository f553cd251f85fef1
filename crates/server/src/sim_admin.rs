//! The simulated fleet's admin API (`rackflow.sim.v1.SimAdmin`): fault
//! injection at run time, the call log and component states, for tests and
//! the demo.
//!
//! This module owns the wire ⇄ sim conversion and the validation of fault
//! fields; the fleet itself lives in `rackflow_engine::sim`. Errors reach
//! the wire through the server's one mapping ([`crate::error::to_status`]).

use std::sync::Arc;

use rackflow_api::sim::v1 as pb;
use rackflow_api::sim::v1::sim_admin_server::{SimAdmin, SimAdminServer};
use rackflow_domain::ComponentType;
use rackflow_engine::sim::{
    FaultEffect, FaultOperation, SimCall, SimComponentState, SimFault, SimFleet,
};
use tonic::{Request, Response, Status};

use crate::convert::Invalid;
use crate::error::{ApiError, to_status};

/// Serves `SimAdmin` over one shared fleet (the one the executor uses).
#[derive(Debug, Clone)]
pub struct SimAdminService {
    fleet: Arc<SimFleet>,
}

impl SimAdminService {
    pub fn new(fleet: Arc<SimFleet>) -> Self {
        SimAdminService { fleet }
    }

    /// The tonic service, ready for `Server::add_service`.
    pub fn into_server(self) -> SimAdminServer<Self> {
        SimAdminServer::new(self)
    }
}

/// Wire fault → sim fault. Empty strings mean "any" (an empty effect means
/// `fail`, as in the TOML config); unknown values name the field.
pub fn fault_from_wire(index: usize, fault: &pb::Fault) -> Result<SimFault, Invalid> {
    let field = |name: &str| format!("faults[{index}].{name}");
    let non_empty = |text: &str| {
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_string())
    };
    let component_type = match non_empty(&fault.component_type) {
        None => None,
        Some(name) => Some(ComponentType::parse(&name).ok_or_else(|| {
            Invalid(format!(
                "{}: unknown component type {name:?}",
                field("component_type")
            ))
        })?),
    };
    let operation = FaultOperation::parse(&fault.operation).ok_or_else(|| {
        Invalid(format!(
            "{}: unknown operation {:?} (expected firmware, power, ingest, decommission or any)",
            field("operation"),
            fault.operation
        ))
    })?;
    let effect = FaultEffect::parse(&fault.effect).ok_or_else(|| {
        Invalid(format!(
            "{}: unknown effect {:?} (expected fail, hang, slow or stale)",
            field("effect"),
            fault.effect
        ))
    })?;
    Ok(SimFault {
        rack: non_empty(&fault.rack),
        component_type,
        component: non_empty(&fault.component),
        operation,
        effect,
    })
}

pub fn fault_to_wire(fault: &SimFault) -> pb::Fault {
    pb::Fault {
        rack: fault.rack.clone().unwrap_or_default(),
        component_type: fault
            .component_type
            .map(|t| t.name().to_string())
            .unwrap_or_default(),
        component: fault.component.clone().unwrap_or_default(),
        operation: fault.operation.as_str().to_string(),
        effect: fault.effect.as_str().to_string(),
    }
}

fn call_to_wire(call: SimCall) -> pb::CallLogEntry {
    pb::CallLogEntry {
        sequence: call.sequence,
        call: call.call,
        component_type: call.component_type.name().to_string(),
        components: call.components,
        detail: call.detail,
        outcome: call.outcome,
        at_unix_ms: call.at.timestamp_millis(),
    }
}

fn state_to_wire(state: SimComponentState) -> pb::ComponentState {
    pb::ComponentState {
        component: state.component,
        component_type: state.component_type.name().to_string(),
        power_state: state.power_state.name().to_string(),
        firmware_version: state.firmware_version,
        firmware_updating: state.firmware_updating,
        leaking: state.leaking,
    }
}

#[tonic::async_trait]
impl SimAdmin for SimAdminService {
    async fn set_faults(
        &self,
        request: Request<pb::SetFaultsRequest>,
    ) -> Result<Response<pb::SetFaultsResponse>, Status> {
        let faults = request
            .into_inner()
            .faults
            .iter()
            .enumerate()
            .map(|(i, f)| fault_from_wire(i, f))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| to_status(ApiError::Invalid(e)))?;
        tracing::info!(faults = faults.len(), "sim fault plan replaced");
        self.fleet.set_faults(faults);
        Ok(Response::new(pb::SetFaultsResponse {}))
    }

    async fn clear_faults(
        &self,
        _request: Request<pb::ClearFaultsRequest>,
    ) -> Result<Response<pb::ClearFaultsResponse>, Status> {
        self.fleet.clear_faults();
        tracing::info!("sim faults cleared");
        Ok(Response::new(pb::ClearFaultsResponse {}))
    }

    async fn list_faults(
        &self,
        _request: Request<pb::ListFaultsRequest>,
    ) -> Result<Response<pb::ListFaultsResponse>, Status> {
        let faults = self.fleet.faults().iter().map(fault_to_wire).collect();
        Ok(Response::new(pb::ListFaultsResponse { faults }))
    }

    async fn get_call_log(
        &self,
        request: Request<pb::GetCallLogRequest>,
    ) -> Result<Response<pb::GetCallLogResponse>, Status> {
        let after = request.into_inner().after_sequence;
        let entries = self
            .fleet
            .call_log(after)
            .into_iter()
            .map(call_to_wire)
            .collect();
        Ok(Response::new(pb::GetCallLogResponse { entries }))
    }

    async fn set_leak(
        &self,
        request: Request<pb::SetLeakRequest>,
    ) -> Result<Response<pb::SetLeakResponse>, Status> {
        let req = request.into_inner();
        let component = req.component.trim();
        if component.is_empty() {
            return Err(to_status(ApiError::Invalid(Invalid(
                "component (an external id) is required".into(),
            ))));
        }
        self.fleet.set_leak(component, req.leaking);
        tracing::info!(component, leaking = req.leaking, "sim leak detector set");
        Ok(Response::new(pb::SetLeakResponse {}))
    }

    async fn get_component_states(
        &self,
        request: Request<pb::GetComponentStatesRequest>,
    ) -> Result<Response<pb::GetComponentStatesResponse>, Status> {
        let components = request.into_inner().components;
        let states = self
            .fleet
            .component_states(&components)
            .into_iter()
            .map(state_to_wire)
            .collect();
        Ok(Response::new(pb::GetComponentStatesResponse { states }))
    }
}

#[cfg(test)]
mod tests {
    use rackflow_engine::sim::SimConfig;

    use super::*;

    fn wire(component_type: &str, operation: &str, effect: &str) -> pb::Fault {
        pb::Fault {
            rack: "rack-1".into(),
            component_type: component_type.into(),
            component: String::new(),
            operation: operation.into(),
            effect: effect.into(),
        }
    }

    #[test]
    fn faults_convert_both_ways() {
        let fault = fault_from_wire(0, &wire("compute", "", "hang")).unwrap();
        assert_eq!(fault.component_type, Some(ComponentType::Compute));
        assert_eq!(fault.operation, FaultOperation::Any);
        assert_eq!(fault.effect, FaultEffect::Hang);
        assert_eq!(fault.component, None);
        let back = fault_to_wire(&fault);
        assert_eq!(back.component_type, "Compute");
        assert_eq!(back.operation, "any");
        assert_eq!(back.rack, "rack-1");
    }

    #[test]
    fn invalid_fields_are_named() {
        let err = fault_from_wire(2, &wire("toaster", "", "fail")).unwrap_err();
        assert_eq!(
            err.0,
            "faults[2].component_type: unknown component type \"toaster\""
        );
        let err = fault_from_wire(0, &wire("", "reboot", "fail")).unwrap_err();
        assert!(err.0.starts_with("faults[0].operation: "), "{}", err.0);
        let err = fault_from_wire(1, &wire("", "", "explode")).unwrap_err();
        assert!(err.0.starts_with("faults[1].effect: "), "{}", err.0);
    }

    #[tokio::test]
    async fn set_list_and_clear() {
        let fleet = SimFleet::new(SimConfig::instant());
        let service = SimAdminService::new(fleet.clone());
        let status = service
            .set_faults(Request::new(pb::SetFaultsRequest {
                faults: vec![wire("compute", "power", "slow"), wire("x", "", "")],
            }))
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(fleet.faults().is_empty());
        service
            .set_faults(Request::new(pb::SetFaultsRequest {
                faults: vec![wire("compute", "power", "slow")],
            }))
            .await
            .unwrap();
        let listed = service
            .list_faults(Request::new(pb::ListFaultsRequest {}))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(listed.faults.len(), 1);
        assert_eq!(listed.faults[0].effect, "slow");
        service
            .clear_faults(Request::new(pb::ClearFaultsRequest {}))
            .await
            .unwrap();
        assert!(fleet.faults().is_empty());
        let log = service
            .get_call_log(Request::new(pb::GetCallLogRequest { after_sequence: 0 }))
            .await
            .unwrap()
            .into_inner();
        assert!(log.entries.is_empty());
        let states = service
            .get_component_states(Request::new(pb::GetComponentStatesRequest {
                components: vec![],
            }))
            .await
            .unwrap()
            .into_inner();
        assert!(states.states.is_empty());
    }
}
