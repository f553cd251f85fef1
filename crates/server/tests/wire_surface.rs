//! The services the server answers: `v1.Flow` and `v1.FlowExtensions`
//! (health reports both), and the fault-injection `SimAdmin` only with the
//! simulated fleet (`provider = "sim"`).

use rackflow_testkit as common;
use rackflow_testkit::both_stores;

use common::{Backend, TestServer};
use rackflow_api::sim::v1 as sim;
use rackflow_api::sim::v1::sim_admin_client::SimAdminClient;
use rackflow_server::Config;
use rackflow_server::config::Provider;
use rackflow_testkit::grpc::{health, reflected_services};
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

both_stores!(
    health_reports_flow_and_extensions,
    reflection_lists_flow_and_extensions,
    sim_admin_is_served_with_the_sim_provider,
    sim_admin_is_unimplemented_with_the_rms_provider
);

async fn health_reports_flow_and_extensions(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    for service in ["v1.Flow", "v1.FlowExtensions"] {
        let status = health(s.addr, service)
            .await
            .unwrap_or_else(|e| panic!("health of {service}: {e}"));
        assert_eq!(status, ServingStatus::Serving, "{service}");
    }
    s.stop().await;
}

async fn reflection_lists_flow_and_extensions(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    // Exactly what this server answers (the sim provider's SimAdmin
    // included), not the rack manager's services of the same descriptors.
    assert_eq!(
        reflected_services(s.addr).await,
        [
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "rackflow.sim.v1.SimAdmin",
            "v1.Flow",
            "v1.FlowExtensions",
        ]
    );
    s.stop().await;
}

async fn sim_admin_is_served_with_the_sim_provider(backend: Backend) {
    let mut config = Config::default();
    config.dispatcher.enabled = false;
    config.provider = Provider::Sim;
    let Some(s) = TestServer::start_with(backend, config).await else {
        return;
    };
    let mut admin = SimAdminClient::connect(format!("http://{}", s.addr))
        .await
        .expect("connect SimAdmin");
    admin
        .list_faults(sim::ListFaultsRequest {})
        .await
        .expect("SimAdmin answers with the sim provider");
    s.stop().await;
}

async fn sim_admin_is_unimplemented_with_the_rms_provider(backend: Backend) {
    let mut config = Config::default();
    config.dispatcher.enabled = false;
    // Nothing listens there; the rms provider connects lazily and this test
    // makes no call that reaches it.
    config.provider = Provider::Rms;
    let Some(s) = TestServer::start_with(backend, config).await else {
        return;
    };
    let mut admin = SimAdminClient::connect(format!("http://{}", s.addr))
        .await
        .expect("connect");
    let err = admin
        .set_faults(sim::SetFaultsRequest { faults: vec![] })
        .await
        .expect_err("no fault injection into real hardware");
    assert_eq!(err.code(), Code::Unimplemented, "{err:?}");
    // The Flow API itself is served.
    let mut client = s.client.clone();
    client
        .version(rackflow_api::v1::VersionRequest {})
        .await
        .expect("Flow answers with the rms provider");
    s.stop().await;
}
