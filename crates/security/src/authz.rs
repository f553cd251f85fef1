//! Authorization: the roles, the one table of which role each RPC of both
//! services needs, the `[authorization]` section and the decision.
//!
//! Roles nest: an `operator` may do what a `viewer` may, an `admin` what
//! an `operator` may. `enforce` denies what the table does not allow;
//! `audit` logs the same decision and lets the call through (the only
//! mode without mTLS, as in the reference).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::SecurityError;
use crate::tls::Transport;

/// What a caller may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads and watches.
    Viewer,
    /// Tasks, operation runs and their controls, schedules.
    Operator,
    /// Rules, inventory writes, fault injection, rack-manager node
    /// registration.
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }
}

/// The role each RPC needs, by its gRPC path. An RPC missing here needs
/// `admin` (a new RPC is closed until someone decides otherwise); a test
/// checks every RPC the services serve is listed.
pub const RPC_ROLES: &[(&str, Role)] = &[
    // v1.Flow (the reference's surface).
    ("/v1.Flow/Version", Role::Viewer),
    ("/v1.Flow/CreateTaskSchedule", Role::Operator),
    ("/v1.Flow/GetTaskSchedule", Role::Viewer),
    ("/v1.Flow/ListTaskSchedules", Role::Viewer),
    ("/v1.Flow/UpdateTaskSchedule", Role::Operator),
    ("/v1.Flow/PauseTaskSchedule", Role::Operator),
    ("/v1.Flow/ResumeTaskSchedule", Role::Operator),
    ("/v1.Flow/DeleteTaskSchedule", Role::Operator),
    ("/v1.Flow/TriggerTaskSchedule", Role::Operator),
    ("/v1.Flow/AddTaskScheduleScope", Role::Operator),
    ("/v1.Flow/RemoveTaskScheduleScope", Role::Operator),
    ("/v1.Flow/UpdateTaskScheduleScope", Role::Operator),
    ("/v1.Flow/ListTaskScheduleScopes", Role::Viewer),
    ("/v1.Flow/CheckScheduleConflicts", Role::Viewer),
    ("/v1.Flow/CreateExpectedRack", Role::Admin),
    ("/v1.Flow/GetRackInfoByID", Role::Viewer),
    ("/v1.Flow/GetListOfRacks", Role::Viewer),
    ("/v1.Flow/DeleteRack", Role::Admin),
    ("/v1.Flow/PatchRack", Role::Admin),
    ("/v1.Flow/PurgeRack", Role::Admin),
    ("/v1.Flow/GetRackInfoBySerial", Role::Viewer),
    ("/v1.Flow/GetComponentInfoByID", Role::Viewer),
    ("/v1.Flow/GetComponentInfoBySerial", Role::Viewer),
    ("/v1.Flow/GetComponents", Role::Viewer),
    ("/v1.Flow/ValidateComponents", Role::Viewer),
    ("/v1.Flow/AddComponent", Role::Admin),
    ("/v1.Flow/PatchComponent", Role::Admin),
    ("/v1.Flow/DeleteComponent", Role::Admin),
    ("/v1.Flow/PurgeComponent", Role::Admin),
    ("/v1.Flow/CreateNVLDomain", Role::Admin),
    ("/v1.Flow/AttachRacksToNVLDomain", Role::Admin),
    ("/v1.Flow/DetachRacksFromNVLDomain", Role::Admin),
    ("/v1.Flow/GetListOfNVLDomains", Role::Viewer),
    ("/v1.Flow/GetRacksForNVLDomain", Role::Viewer),
    ("/v1.Flow/GetNVLinkDomain", Role::Viewer),
    ("/v1.Flow/GetListOfNVLinkDomains", Role::Viewer),
    ("/v1.Flow/CreateOperationRun", Role::Operator),
    ("/v1.Flow/GetOperationRun", Role::Viewer),
    ("/v1.Flow/ListOperationRuns", Role::Viewer),
    ("/v1.Flow/ListOperationRunTargets", Role::Viewer),
    ("/v1.Flow/PauseOperationRun", Role::Operator),
    ("/v1.Flow/ResumeOperationRun", Role::Operator),
    ("/v1.Flow/AdvanceOperationRunPhase", Role::Operator),
    ("/v1.Flow/CancelOperationRun", Role::Operator),
    ("/v1.Flow/UpgradeFirmware", Role::Operator),
    ("/v1.Flow/PowerOnRack", Role::Operator),
    ("/v1.Flow/PowerOffRack", Role::Operator),
    ("/v1.Flow/PowerResetRack", Role::Operator),
    ("/v1.Flow/ACPowerCycleRack", Role::Operator),
    ("/v1.Flow/BringUpRack", Role::Operator),
    ("/v1.Flow/IngestRack", Role::Operator),
    // Retiring a rack is not undone by an operator's next command.
    ("/v1.Flow/DecommissionRack", Role::Admin),
    ("/v1.Flow/ListTasks", Role::Viewer),
    ("/v1.Flow/GetTasksByIDs", Role::Viewer),
    ("/v1.Flow/CancelTask", Role::Operator),
    ("/v1.Flow/CreateOperationRule", Role::Admin),
    ("/v1.Flow/UpdateOperationRule", Role::Admin),
    ("/v1.Flow/DeleteOperationRule", Role::Admin),
    ("/v1.Flow/GetOperationRule", Role::Viewer),
    ("/v1.Flow/ListOperationRules", Role::Viewer),
    ("/v1.Flow/SetRuleAsDefault", Role::Admin),
    ("/v1.Flow/AssociateRuleWithRack", Role::Admin),
    ("/v1.Flow/DisassociateRuleFromRack", Role::Admin),
    ("/v1.Flow/GetRackRuleAssociation", Role::Viewer),
    ("/v1.Flow/ListRackRuleAssociations", Role::Viewer),
    // Event rules act on hardware without a person: admins change them.
    ("/v1.Flow/CreateEventRule", Role::Admin),
    ("/v1.Flow/GetEventRule", Role::Viewer),
    ("/v1.Flow/GetEffectiveEventRule", Role::Viewer),
    ("/v1.Flow/ListEventRules", Role::Viewer),
    ("/v1.Flow/UpdateEventRule", Role::Admin),
    ("/v1.Flow/EnableEventRule", Role::Admin),
    ("/v1.Flow/DisableEventRule", Role::Admin),
    ("/v1.Flow/DeleteEventRule", Role::Admin),
    ("/v1.Flow/CreateEventRuleBinding", Role::Admin),
    ("/v1.Flow/GetEventRuleBinding", Role::Viewer),
    ("/v1.Flow/DeleteEventRuleBinding", Role::Admin),
    // v1.FlowExtensions (rackflow's own RPCs).
    ("/v1.FlowExtensions/PreviewOperationRun", Role::Viewer),
    ("/v1.FlowExtensions/WatchOperationRun", Role::Viewer),
    ("/v1.FlowExtensions/ImportRacks", Role::Admin),
    ("/v1.FlowExtensions/ListAuditEvents", Role::Viewer),
    ("/v1.FlowExtensions/RotateSecrets", Role::Admin),
    // A leak monitor reports as an operator: its reports power hardware
    // off through the leak rules.
    ("/v1.FlowExtensions/ReportLeak", Role::Operator),
    ("/v1.FlowExtensions/ListLeakEvents", Role::Viewer),
    // Fault injection into the simulated fleet.
    ("/rackflow.sim.v1.SimAdmin/SetFaults", Role::Admin),
    ("/rackflow.sim.v1.SimAdmin/ClearFaults", Role::Admin),
    ("/rackflow.sim.v1.SimAdmin/ListFaults", Role::Admin),
    ("/rackflow.sim.v1.SimAdmin/GetCallLog", Role::Admin),
    ("/rackflow.sim.v1.SimAdmin/GetComponentStates", Role::Admin),
    ("/rackflow.sim.v1.SimAdmin/SetLeak", Role::Admin),
    // The rack manager.
    ("/rack_manager.RackManager/CreateNodes", Role::Admin),
    ("/rack_manager.RackManager/ListNodeInventory", Role::Viewer),
    ("/rack_manager.RackManager/ListRacks", Role::Viewer),
    ("/rack_manager.RackManager/DeleteNode", Role::Admin),
    ("/rack_manager.RackManager/SetPowerState", Role::Operator),
    ("/rack_manager.RackManager/GetPowerState", Role::Viewer),
    (
        "/rack_manager.RackManager/BatchSetPowerState",
        Role::Operator,
    ),
    ("/rack_manager.RackManager/BatchGetPowerState", Role::Viewer),
    ("/rack_manager.RackManager/UpdateFirmware", Role::Operator),
    (
        "/rack_manager.RackManager/BatchUpdateFirmwareByNodeType",
        Role::Operator,
    ),
    (
        "/rack_manager.RackManager/BatchUpdateFirmware",
        Role::Operator,
    ),
    (
        "/rack_manager.RackManager/GetNodeFirmwareInventory",
        Role::Viewer,
    ),
    ("/rack_manager.RackManager/GetJobStatus", Role::Viewer),
    (
        "/rack_manager.RackManager/GetFirmwareJobStatus",
        Role::Viewer,
    ),
    ("/rack_manager.RackManager/GetVersion", Role::Viewer),
    // Power cycles a whole rack, as BatchSetPowerState does per node.
    (
        "/rack_manager.RackManager/ExecuteColdReboot",
        Role::Operator,
    ),
    // Node registration changes and reads.
    ("/rack_manager.RackManager/UpdateNode", Role::Admin),
    ("/rack_manager.RackManager/GetNodeDeviceInfo", Role::Viewer),
    (
        "/rack_manager.RackManager/ListNodeDeviceInfoByNodeType",
        Role::Viewer,
    ),
    (
        "/rack_manager.RackManager/BatchGetNodeDeviceInfo",
        Role::Viewer,
    ),
    (
        "/rack_manager.RackManager/GetRackFirmwareInventory",
        Role::Viewer,
    ),
    (
        "/rack_manager.RackManager/BatchGetFirmwareInventory",
        Role::Viewer,
    ),
    // The firmware-object catalogue: admins curate it, operators apply
    // it (it flashes hardware, as UpdateFirmware does).
    ("/rack_manager.RackManager/AddFirmwareObject", Role::Admin),
    ("/rack_manager.RackManager/GetFirmwareObject", Role::Viewer),
    (
        "/rack_manager.RackManager/ListFirmwareObjects",
        Role::Viewer,
    ),
    (
        "/rack_manager.RackManager/DeleteFirmwareObject",
        Role::Admin,
    ),
    (
        "/rack_manager.RackManager/SetDefaultFirmwareObject",
        Role::Admin,
    ),
    (
        "/rack_manager.RackManager/GetFirmwareObjectHistory",
        Role::Viewer,
    ),
    (
        "/rack_manager.RackManager/ApplyStoredFirmwareObject",
        Role::Operator,
    ),
    (
        "/rack_manager.RackManager/ApplyFirmwareObject",
        Role::Operator,
    ),
    (
        "/rack_manager.RackManager/CompareFirmwareObject",
        Role::Viewer,
    ),
    // NVLink switch system images: installing one reboots the switch.
    (
        "/rack_manager.RackManager/UpdateSwitchSystemImage",
        Role::Operator,
    ),
    (
        "/rack_manager.RackManager/ListSwitchSystemImages",
        Role::Viewer,
    ),
    (
        "/rack_manager.RackManager/ApplySwitchSystemImage",
        Role::Operator,
    ),
    (
        "/rack_manager.RackManager/ApplyStoredSwitchSystemImage",
        Role::Operator,
    ),
    // Resets wipe a switch's configuration; mTLS and passwords are its
    // security: admins only.
    (
        "/rack_manager.RackManager/BatchResetSwitchFactoryDefault",
        Role::Admin,
    ),
    (
        "/rack_manager.RackManager/BatchResetSwitchSdnFactoryDefault",
        Role::Admin,
    ),
    (
        "/rack_manager.RackManager/BatchDisableSwitchMtls",
        Role::Admin,
    ),
    (
        "/rack_manager.RackManager/UpdateSwitchSystemPassword",
        Role::Admin,
    ),
    ("/rack_manager.RackManager/ListSwitchFirmware", Role::Viewer),
    (
        "/rack_manager.RackManager/ConfigureSwitchCertificate",
        Role::Admin,
    ),
    (
        "/rack_manager.RackManager/GetConfigureSwitchCertificateJobStatus",
        Role::Viewer,
    ),
    // Stages a file on the switch (no install): an operator's step.
    (
        "/rack_manager.RackManager/PushSwitchFirmware",
        Role::Operator,
    ),
    // Reads evidence; changes nothing on the switch.
    (
        "/rack_manager.RackManager/BatchCollectSwitchSpdmAttestationEvidence",
        Role::Viewer,
    ),
    (
        "/rack_manager.RackManager/GetSwitchSystemImageJobStatus",
        Role::Viewer,
    ),
    // rackflow's own rack-manager RPCs: reading BMC leak detectors.
    (
        "/rackflow.rms.v1.RackManagerExtensions/ListLeakDetectors",
        Role::Viewer,
    ),
    // Standard services both servers carry.
    ("/grpc.health.v1.Health/Check", Role::Viewer),
    ("/grpc.health.v1.Health/Watch", Role::Viewer),
    (
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        Role::Viewer,
    ),
    (
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        Role::Viewer,
    ),
];

/// `path` as the table spells it, when a service of this project serves
/// it: a bounded label for per-RPC metrics.
pub fn served_rpc(path: &str) -> Option<&'static str> {
    RPC_ROLES.iter().find(|(p, _)| *p == path).map(|&(p, _)| p)
}

/// The role `path` needs (`admin` for a path the table does not list).
pub fn required_role(path: &str) -> Role {
    RPC_ROLES
        .iter()
        .find(|(p, _)| *p == path)
        .map_or(Role::Admin, |&(_, role)| role)
}

/// `enforce` or `audit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Deny what the allowlist does not allow.
    Enforce,
    /// Log the decision and allow every call.
    Audit,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Audit => "audit",
        }
    }
}

/// `[authorization]` of a service.
///
/// ```toml
/// [authorization]
/// mode = "enforce"          # default: enforce with mTLS, audit without
/// [authorization.identities]
/// "spiffe://example.org/sre/alice" = "operator"
/// "spiffe://example.org/flow" = "operator"
/// "admin.example.org" = "admin"
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthorizationSection {
    /// Unset: `enforce` when the service runs mTLS, `audit` otherwise.
    pub mode: Option<Mode>,
    /// Allowlist: identity (SPIFFE URI, DNS name or CN of the client
    /// certificate) → role.
    pub identities: BTreeMap<String, Role>,
}

/// Longest identity the allowlist accepts.
pub const MAX_IDENTITY_LEN: usize = 2048;

impl AuthorizationSection {
    /// The checked policy for a service with this transport.
    pub fn policy(&self, transport: Transport) -> Result<Policy, SecurityError> {
        let mode = self.mode.unwrap_or(if transport.has_identities() {
            Mode::Enforce
        } else {
            Mode::Audit
        });
        if mode == Mode::Enforce && !transport.has_identities() {
            return Err(SecurityError::Invalid {
                key: "authorization.mode",
                detail: "\"enforce\" needs mTLS (tls.cert, tls.key and tls.client_ca): without \
                         client certificates no caller has an identity; use \"audit\""
                    .into(),
            });
        }
        if !self.identities.is_empty() && !transport.has_identities() {
            return Err(SecurityError::Invalid {
                key: "authorization.identities",
                detail: "needs mTLS (tls.client_ca): without client certificates there is no \
                         identity to match"
                    .into(),
            });
        }
        if mode == Mode::Enforce && self.identities.is_empty() {
            return Err(SecurityError::Invalid {
                key: "authorization.identities",
                detail: "is empty: under \"enforce\" every call would be denied; list the \
                         identities and their roles"
                    .into(),
            });
        }
        for identity in self.identities.keys() {
            if identity.is_empty()
                || identity.len() > MAX_IDENTITY_LEN
                || identity
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control())
            {
                return Err(SecurityError::Invalid {
                    key: "authorization.identities",
                    detail: format!(
                        "{identity:?} is not an identity: 1 to {MAX_IDENTITY_LEN} characters, \
                         no spaces or control characters"
                    ),
                });
            }
        }
        Ok(Policy {
            mode,
            identities: self.identities.clone(),
            callers_identified: transport.has_identities(),
        })
    }
}

/// The checked authorization policy of one service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    mode: Mode,
    identities: BTreeMap<String, Role>,
    /// Callers present certificates (mTLS). Without, every call is
    /// anonymous and an audit-mode "would refuse" says nothing new.
    callers_identified: bool,
}

/// Why a call is (or under `audit` would be) refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No identity on the call.
    Unauthenticated,
    /// An identity the allowlist does not hold.
    Unknown { identity: String },
    /// An identity whose role is below what the RPC needs.
    Insufficient {
        identity: String,
        role: Role,
        needs: Role,
    },
}

/// The decision on one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed by the allowlist; `role` is the caller's.
    Allow { role: Role },
    /// `enforce`: refused.
    Deny(Refusal),
    /// `audit`: the call goes through although `enforce` would refuse it.
    AuditRefused(Refusal),
}

impl Refusal {
    /// The status the caller gets under `enforce`, naming the identity and
    /// the RPC.
    pub fn status(&self, path: &str) -> tonic::Status {
        let rpc = path.trim_start_matches('/');
        match self {
            Refusal::Unauthenticated => tonic::Status::unauthenticated(format!(
                "{rpc}: no client identity: present a client certificate"
            )),
            Refusal::Unknown { identity } => tonic::Status::permission_denied(format!(
                "{identity} may not call {rpc}: the identity is not in the authorization allowlist"
            )),
            Refusal::Insufficient {
                identity,
                role,
                needs,
            } => tonic::Status::permission_denied(format!(
                "{identity} may not call {rpc}: it needs the {} role, the identity has {}",
                needs.as_str(),
                role.as_str()
            )),
        }
    }
}

impl Policy {
    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn identity_count(&self) -> usize {
        self.identities.len()
    }

    /// Whether callers carry identities (the service runs mTLS).
    pub fn callers_identified(&self) -> bool {
        self.callers_identified
    }

    /// The role an identity holds, if any.
    pub fn role_of(&self, identity: &str) -> Option<Role> {
        self.identities.get(identity).copied()
    }

    /// Decides a call to `path` by `identity`.
    pub fn decide(&self, identity: Option<&str>, path: &str) -> Decision {
        let needs = required_role(path);
        let verdict = match identity {
            None => Err(Refusal::Unauthenticated),
            Some(identity) => match self.role_of(identity) {
                None => Err(Refusal::Unknown {
                    identity: identity.to_string(),
                }),
                Some(role) if role < needs => Err(Refusal::Insufficient {
                    identity: identity.to_string(),
                    role,
                    needs,
                }),
                Some(role) => Ok(role),
            },
        };
        match (verdict, self.mode) {
            (Ok(role), _) => Decision::Allow { role },
            (Err(refusal), Mode::Enforce) => Decision::Deny(refusal),
            (Err(refusal), Mode::Audit) => Decision::AuditRefused(refusal),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    const MTLS: Transport = Transport::Tls { mtls: true };

    fn policy(mode: Option<Mode>) -> Policy {
        AuthorizationSection {
            mode,
            identities: [
                ("spiffe://t/viewer".to_string(), Role::Viewer),
                ("spiffe://t/operator".to_string(), Role::Operator),
                ("spiffe://t/admin".to_string(), Role::Admin),
            ]
            .into(),
        }
        .policy(MTLS)
        .unwrap()
    }

    /// Every RPC the services serve, from the compiled descriptors.
    fn served_rpcs() -> Vec<String> {
        let set = prost_types::FileDescriptorSet::decode(rackflow_api::FILE_DESCRIPTOR_SET)
            .expect("descriptor set");
        let mut paths = Vec::new();
        for file in set.file {
            let package = file.package.clone().unwrap_or_default();
            for service in &file.service {
                for method in &service.method {
                    paths.push(format!(
                        "/{package}.{}/{}",
                        service.name.as_deref().unwrap_or_default(),
                        method.name.as_deref().unwrap_or_default()
                    ));
                }
            }
        }
        paths
    }

    #[test]
    fn every_served_rpc_is_in_the_table_once() {
        let served = served_rpcs();
        assert!(served.len() > 60, "{served:?}");
        for path in &served {
            let n = RPC_ROLES.iter().filter(|(p, _)| p == path).count();
            assert_eq!(n, 1, "{path} is listed {n} times in RPC_ROLES");
        }
        let mut seen = std::collections::HashSet::new();
        for (path, _) in RPC_ROLES {
            assert!(seen.insert(path), "{path} twice");
        }
    }

    #[test]
    fn each_role_gets_exactly_its_rpcs_under_enforce() {
        let p = policy(None);
        assert_eq!(p.mode(), Mode::Enforce);
        for &(path, needs) in RPC_ROLES {
            for role in [Role::Viewer, Role::Operator, Role::Admin] {
                let identity = format!("spiffe://t/{}", role.as_str());
                let decision = p.decide(Some(&identity), path);
                if role >= needs {
                    assert_eq!(decision, Decision::Allow { role }, "{identity} {path}");
                } else {
                    let Decision::Deny(refusal) = decision else {
                        panic!("{identity} {path}: {decision:?}")
                    };
                    let status = refusal.status(path);
                    assert_eq!(status.code(), tonic::Code::PermissionDenied);
                    assert!(status.message().contains(&identity), "{status:?}");
                    assert!(status.message().contains(&path[1..]), "{status:?}");
                }
            }
            let Decision::Deny(refusal) = p.decide(None, path) else {
                panic!("anonymous allowed on {path}")
            };
            assert_eq!(refusal.status(path).code(), tonic::Code::Unauthenticated);
            let Decision::Deny(refusal) = p.decide(Some("spiffe://t/stranger"), path) else {
                panic!("stranger allowed on {path}")
            };
            assert_eq!(refusal.status(path).code(), tonic::Code::PermissionDenied);
        }
    }

    #[test]
    fn the_roles_of_the_issue() {
        use Role::*;
        for (path, role) in [
            ("/v1.Flow/GetOperationRun", Viewer),
            ("/v1.FlowExtensions/WatchOperationRun", Viewer),
            ("/v1.Flow/CreateOperationRun", Operator),
            ("/v1.Flow/PauseOperationRun", Operator),
            ("/v1.Flow/CreateTaskSchedule", Operator),
            ("/v1.Flow/UpgradeFirmware", Operator),
            ("/v1.Flow/CreateOperationRule", Admin),
            ("/v1.Flow/CreateExpectedRack", Admin),
            ("/v1.FlowExtensions/ImportRacks", Admin),
            ("/rackflow.sim.v1.SimAdmin/ListFaults", Admin),
            ("/rack_manager.RackManager/CreateNodes", Admin),
            ("/rack_manager.RackManager/BatchUpdateFirmware", Operator),
            ("/no.Such/Rpc", Admin),
        ] {
            assert_eq!(required_role(path), role, "{path}");
        }
    }

    #[test]
    fn audit_allows_what_enforce_refuses_and_says_so() {
        let p = policy(Some(Mode::Audit));
        assert_eq!(
            p.decide(None, "/v1.Flow/CreateOperationRun"),
            Decision::AuditRefused(Refusal::Unauthenticated)
        );
        assert_eq!(
            p.decide(Some("spiffe://t/viewer"), "/v1.Flow/Version"),
            Decision::Allow { role: Role::Viewer }
        );
        let plain = AuthorizationSection::default()
            .policy(Transport::Plaintext)
            .unwrap();
        assert_eq!(plain.mode(), Mode::Audit);
    }

    #[test]
    fn settings_that_cannot_work_are_refused_at_start() {
        let with_ids = |mode| AuthorizationSection {
            mode,
            identities: [("spiffe://t/a".to_string(), Role::Admin)].into(),
        };
        for (section, transport, key) in [
            (
                AuthorizationSection {
                    mode: Some(Mode::Enforce),
                    ..Default::default()
                },
                Transport::Plaintext,
                "authorization.mode",
            ),
            (
                with_ids(Some(Mode::Enforce)),
                Transport::Tls { mtls: false },
                "authorization.mode",
            ),
            (
                with_ids(Some(Mode::Audit)),
                Transport::Plaintext,
                "authorization.identities",
            ),
            (
                AuthorizationSection::default(),
                MTLS,
                "authorization.identities",
            ),
            (
                AuthorizationSection {
                    mode: None,
                    identities: [("has space".to_string(), Role::Admin)].into(),
                },
                MTLS,
                "authorization.identities",
            ),
        ] {
            let err = section.policy(transport).unwrap_err().to_string();
            assert!(err.starts_with(key), "{section:?} {transport:?}: {err}");
        }
        assert!(with_ids(None).policy(MTLS).is_ok());
        let parsed: AuthorizationSection =
            toml::from_str("mode = \"audit\"\n[identities]\n\"spiffe://x/y\" = \"operator\"\n")
                .unwrap();
        assert_eq!(parsed.identities["spiffe://x/y"], Role::Operator);
        assert!(toml::from_str::<AuthorizationSection>("[identities]\na = \"root\"\n").is_err());
    }
}
