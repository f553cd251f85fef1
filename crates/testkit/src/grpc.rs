//! The standard gRPC services both servers carry, as a test reads them:
//! a service's health status and the services reflection lists.

use std::net::SocketAddr;

use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

async fn channel(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect()
        .await
        .expect("connect")
}

/// `grpc.health.v1.Health/Check` of `service` on the plaintext server at
/// `addr`.
pub async fn health(addr: SocketAddr, service: &str) -> Result<ServingStatus, tonic::Status> {
    let answer = HealthClient::new(channel(addr).await)
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await?
        .into_inner();
    Ok(answer.status())
}

/// The services reflection lists on the plaintext server at `addr`,
/// sorted.
pub async fn reflected_services(addr: SocketAddr) -> Vec<String> {
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let answer = ServerReflectionClient::new(channel(addr).await)
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("reflection")
        .into_inner()
        .message()
        .await
        .expect("reflection answer")
        .expect("one answer");
    let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
        panic!("not a service list: {answer:?}");
    };
    let mut names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    names.sort();
    names
}
