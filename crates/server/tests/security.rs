//! The flow server and the rack manager behind TLS, mTLS and the role
//! allowlist (issue 14): certificates made at test time, every RPC of both
//! services called by each role over a real mTLS connection.

use std::collections::BTreeMap;
use std::time::Duration;

use prost::Message;
use rackflow_security::{ClientTlsFiles, Role};
use rackflow_server::Config;
use rackflow_testkit::pki::{TestPki, tls_channel};
use rackflow_testkit::rms::TestRms;
use rackflow_testkit::{Backend, TestServer};
use tonic::Code;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;

const VIEWER: &str = "spiffe://rackflow.test/sre/viewer";
const OPERATOR: &str = "spiffe://rackflow.test/sre/operator";
const ADMIN: &str = "spiffe://rackflow.test/sre/admin";
/// A valid certificate of the same CA whose identity is not on the list.
const STRANGER: &str = "spiffe://rackflow.test/sre/stranger";
const CALL_DEADLINE: Duration = Duration::from_secs(20);

fn allowlist() -> BTreeMap<String, Role> {
    [
        (VIEWER.to_string(), Role::Viewer),
        (OPERATOR.to_string(), Role::Operator),
        (ADMIN.to_string(), Role::Admin),
    ]
    .into()
}

/// Every RPC of the given services, from the compiled descriptors, plus the
/// standard health and reflection services both servers carry.
fn rpcs(services: &[&str]) -> Vec<String> {
    let set = prost_types::FileDescriptorSet::decode(rackflow_api::FILE_DESCRIPTOR_SET)
        .expect("descriptor set");
    let mut paths = Vec::new();
    for file in set.file {
        let package = file.package().to_string();
        for service in &file.service {
            let full = format!("{package}.{}", service.name());
            if services.contains(&full.as_str()) {
                for method in &service.method {
                    paths.push(format!("/{full}/{}", method.name()));
                }
            }
        }
    }
    assert!(!paths.is_empty(), "no RPC of {services:?}");
    paths
}

/// The role each RPC needs, written independently of the server's table:
/// reads are `viewer`'s, rules / inventory writes / fault injection / node
/// registration / the firmware-object catalogue / switch resets, mTLS and
/// passwords / key rotation `admin`'s,
/// everything else (tasks, runs, controls,
/// schedules, power and firmware) `operator`'s.
fn expected_role(path: &str) -> Role {
    let (service, method) = path[1..].split_once('/').expect("path");
    const ADMIN_RPCS: &[&str] = &[
        "CreateExpectedRack",
        "PatchRack",
        "DeleteRack",
        "PurgeRack",
        "AddComponent",
        "PatchComponent",
        "DeleteComponent",
        "PurgeComponent",
        "CreateNVLDomain",
        "AttachRacksToNVLDomain",
        "DetachRacksFromNVLDomain",
        "ImportRacks",
        "DecommissionRack",
        "CreateOperationRule",
        "UpdateOperationRule",
        "DeleteOperationRule",
        "SetRuleAsDefault",
        "AssociateRuleWithRack",
        "DisassociateRuleFromRack",
        "CreateNodes",
        "DeleteNode",
        "UpdateNode",
        "AddFirmwareObject",
        "DeleteFirmwareObject",
        "SetDefaultFirmwareObject",
        "BatchResetSwitchFactoryDefault",
        "BatchResetSwitchSdnFactoryDefault",
        "BatchDisableSwitchMtls",
        "UpdateSwitchSystemPassword",
        "ConfigureSwitchCertificate",
        "RotateSecrets",
        "CreateEventRule",
        "UpdateEventRule",
        "EnableEventRule",
        "DisableEventRule",
        "DeleteEventRule",
        "CreateEventRuleBinding",
        "DeleteEventRuleBinding",
    ];
    if service == "rackflow.sim.v1.SimAdmin" || ADMIN_RPCS.contains(&method) {
        Role::Admin
    } else if [
        "Get",
        "List",
        "Check",
        "Watch",
        "Preview",
        "BatchGet",
        "Server",
        "Validate",
        "Compare",
        "BatchCollect",
    ]
    .iter()
    .any(|p| method.starts_with(p))
        || method == "Version"
    {
        Role::Viewer
    } else {
        Role::Operator
    }
}

/// Calls `path` with an empty message (valid for every request type) as a
/// stream of one, so unary and streaming RPCs alike answer with their
/// headers; the code of the answer.
async fn call(channel: &Channel, path: &str) -> tonic::Status {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    let attempt = async {
        grpc.ready()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        let request = tonic::Request::new(tokio_stream::iter(vec![()]));
        grpc.streaming(
            request,
            PathAndQuery::try_from(path).expect("path"),
            tonic_prost::ProstCodec::<(), ()>::default(),
        )
        .await
        .map(|_| tonic::Status::ok(""))
    };
    match tokio::time::timeout(CALL_DEADLINE, attempt).await {
        Ok(Ok(status)) | Ok(Err(status)) => status,
        Err(_) => panic!("{path}: no answer within {CALL_DEADLINE:?}"),
    }
}

/// Each identity gets exactly the RPCs of its role, the others answer
/// PERMISSION_DENIED naming the identity and the RPC.
async fn check_roles(
    pki: &TestPki,
    addr: std::net::SocketAddr,
    paths: &[String],
) -> BTreeMap<&'static str, usize> {
    let mut allowed = BTreeMap::new();
    for (identity, role) in [
        (VIEWER, Some(Role::Viewer)),
        (OPERATOR, Some(Role::Operator)),
        (ADMIN, Some(Role::Admin)),
        (STRANGER, None),
    ] {
        let channel = tls_channel(addr, &pki.client(identity))
            .await
            .expect("mTLS connect");
        for path in paths {
            let status = call(&channel, path).await;
            let may = role.is_some_and(|r| r >= expected_role(path));
            if may {
                assert!(
                    !matches!(
                        status.code(),
                        Code::PermissionDenied | Code::Unauthenticated
                    ),
                    "{identity} should be allowed {path}: {status:?}"
                );
                *allowed.entry(identity).or_default() += 1;
            } else {
                assert_eq!(
                    status.code(),
                    Code::PermissionDenied,
                    "{identity} on {path}: {status:?}"
                );
                assert!(
                    status.message().contains(identity) && status.message().contains(&path[1..]),
                    "the refusal names the identity and the RPC: {status:?}"
                );
            }
        }
    }
    allowed
}

/// A connection without a client certificate, or with one from another
/// CA, never reaches a handler.
async fn check_refused_without_a_valid_certificate(
    pki: &TestPki,
    addr: std::net::SocketAddr,
    path: &str,
) {
    let other = TestPki::new("other");
    for (what, files) in [
        ("no client certificate", pki.anonymous_client()),
        (
            "a certificate of another CA",
            ClientTlsFiles {
                ca: Some(pki.ca_pem.clone()),
                ..other.client(ADMIN)
            },
        ),
    ] {
        match tls_channel(addr, &files).await {
            Err(_) => {}
            Ok(channel) => {
                let status = call(&channel, path).await;
                assert!(
                    matches!(
                        status.code(),
                        Code::Unavailable | Code::Unknown | Code::Internal | Code::Cancelled
                    ),
                    "{what}: the handshake must fail, got {status:?}"
                );
            }
        }
    }
    // Plaintext to a TLS port gets nowhere either.
    let plain = Channel::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect_lazy();
    let status = call(&plain, path).await;
    assert_ne!(
        status.code(),
        Code::Ok,
        "plaintext to the TLS port: {status:?}"
    );
}

fn mtls_flow_config(pki: &TestPki) -> Config {
    let mut config = Config::default();
    config.dispatcher.enabled = false;
    config.schedules.enabled = false;
    config.tls = pki.server_tls(true);
    config.authorization.identities = allowlist();
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_flow_rpc_is_allowed_to_exactly_its_roles_over_mtls() {
    let pki = TestPki::new("flow");
    let Some(flow) = TestServer::start_with(Backend::Sqlite, mtls_flow_config(&pki)).await else {
        return;
    };
    let mut paths = rpcs(&["v1.Flow", "v1.FlowExtensions", "rackflow.sim.v1.SimAdmin"]);
    paths.extend(
        [
            "/grpc.health.v1.Health/Check",
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        ]
        .map(String::from),
    );
    check_refused_without_a_valid_certificate(&pki, flow.addr, "/v1.Flow/Version").await;
    let allowed = check_roles(&pki, flow.addr, &paths).await;
    // Sanity of the split: each role strictly more than the one below.
    assert!(allowed[VIEWER] < allowed[OPERATOR] && allowed[OPERATOR] < allowed[ADMIN]);
    assert_eq!(allowed[ADMIN], paths.len());
    assert!(!allowed.contains_key(STRANGER));
    flow.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rack_manager_rpc_is_allowed_to_exactly_its_roles_over_mtls() {
    let pki = TestPki::new("rms");
    let rms = TestRms::start_with(|config| {
        config.tls = pki.server_tls(true);
        config.authorization.identities = allowlist();
    })
    .await;
    let mut paths = rpcs(&["rack_manager.RackManager"]);
    paths.push("/grpc.health.v1.Health/Check".into());
    check_refused_without_a_valid_certificate(
        &pki,
        rms.addr,
        "/rack_manager.RackManager/GetVersion",
    )
    .await;
    let allowed = check_roles(&pki, rms.addr, &paths).await;
    assert!(allowed[VIEWER] < allowed[OPERATOR] && allowed[OPERATOR] < allowed[ADMIN]);
    rms.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_mode_lets_every_caller_through() {
    let pki = TestPki::new("audit");
    let mut config = mtls_flow_config(&pki);
    config.authorization.mode = Some(rackflow_security::Mode::Audit);
    let Some(flow) = TestServer::start_with(Backend::Sqlite, config).await else {
        return;
    };
    let channel = tls_channel(flow.addr, &pki.client(STRANGER))
        .await
        .expect("connect");
    for path in [
        "/v1.Flow/Version",
        "/v1.Flow/CreateOperationRule",
        "/rackflow.sim.v1.SimAdmin/ListFaults",
    ] {
        let status = call(&channel, path).await;
        assert!(
            !matches!(
                status.code(),
                Code::PermissionDenied | Code::Unauthenticated
            ),
            "audit allows {path}: {status:?}"
        );
    }
    flow.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_refuses_to_start_with_settings_that_cannot_work() {
    let pki = TestPki::new("start");
    for (what, change, key) in [
        (
            "enforce without mTLS",
            (|c: &mut Config| {
                c.tls.client_ca = None;
                c.authorization.identities.clear();
                c.authorization.mode = Some(rackflow_security::Mode::Enforce);
            }) as fn(&mut Config),
            "authorization.mode",
        ),
        ("a certificate without its key", |c| c.tls.key = None, "tls"),
        (
            "an unreadable CA",
            |c| c.tls.client_ca = Some("/nonexistent/ca.pem".into()),
            "tls.client_ca: read",
        ),
    ] {
        let mut config = mtls_flow_config(&pki);
        change(&mut config);
        let store = rackflow_store::open_store(&rackflow_store::DbTarget::Sqlite(
            tempfile::tempdir().expect("dir").keep().join("f.db"),
        ))
        .await
        .expect("store");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let err = rackflow_server::serve_on(
            config,
            store,
            listener,
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .expect_err(what)
        .to_string();
        assert!(err.starts_with(key), "{what}: {err}");
    }
}

/// Authorization comes before the request guard: a caller may not learn
/// what an RPC it may not call would say about its request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_answers_before_the_request_is_read() {
    let pki = TestPki::new("order");
    let Some(flow) = TestServer::start_with(Backend::Sqlite, mtls_flow_config(&pki)).await else {
        return;
    };
    let channel = tls_channel(flow.addr, &pki.client(VIEWER))
        .await
        .expect("connect");
    let mut client = rackflow_api::v1::flow_client::FlowClient::new(channel.clone());
    let bad = rackflow_api::v1::CreateOperationRunRequest {
        name: "bad\0name".into(),
        ..Default::default()
    };
    let refused = client
        .create_operation_run(bad.clone())
        .await
        .expect_err("a viewer may not create runs");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let operator = tls_channel(flow.addr, &pki.client(OPERATOR))
        .await
        .expect("connect");
    let refused = rackflow_api::v1::flow_client::FlowClient::new(operator)
        .create_operation_run(bad)
        .await
        .expect_err("a NUL in a name");
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    assert_eq!(refused.message(), "name: contains a NUL character");
    flow.stop().await;
}
