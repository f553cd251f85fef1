//! A handler that panics answers INTERNAL with a correlation id, and the
//! server (and the same connection) keeps answering: a real tonic server
//! on a loopback port behind the edge layer.

use std::convert::Infallible;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use rackflow_security::tls::Transport;
use rackflow_security::{AuthorizationSection, EdgeLayer};
use tonic::body::Body;
use tonic::codegen::http::uri::PathAndQuery;

/// A service whose every call panics.
#[derive(Clone)]
struct Panicking;

impl tonic::server::NamedService for Panicking {
    const NAME: &'static str = "test.Panicking";
}

impl tower::Service<http::Request<Body>> for Panicking {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _request: http::Request<Body>) -> Self::Future {
        Box::pin(async { panic!("a bug in a handler") })
    }
}

async fn call(channel: &tonic::transport::Channel, path: &'static str) -> tonic::Status {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.expect("ready");
    match grpc
        .unary(
            tonic::Request::new(()),
            PathAndQuery::from_static(path),
            tonic_prost::ProstCodec::<(), ()>::default(),
        )
        .await
    {
        Ok(_) => tonic::Status::ok(""),
        Err(status) => status,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_answers_internal_and_the_server_lives_on() {
    let policy = AuthorizationSection::default()
        .policy(Transport::Plaintext)
        .expect("audit policy");
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = tokio_util::sync::CancellationToken::new();
    let server = {
        let stop = stop.clone();
        tokio::spawn(
            tonic::transport::Server::builder()
                .layer(EdgeLayer::new("test", policy))
                .add_service(health)
                .add_service(Panicking)
                .serve_with_incoming_shutdown(
                    tonic::transport::server::TcpIncoming::from(listener),
                    async move { stop.cancelled().await },
                ),
        )
    };
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    for _ in 0..3 {
        let status = call(&channel, "/test.Panicking/Anything").await;
        assert_eq!(status.code(), tonic::Code::Internal, "{status:?}");
        assert!(
            status.message().contains("correlation id") && !status.message().contains("a bug"),
            "INTERNAL carries a correlation id, not the panic text: {status:?}"
        );
        let mut health_client = tonic_health::pb::health_client::HealthClient::new(channel.clone());
        let reply = health_client
            .check(tonic_health::pb::HealthCheckRequest::default())
            .await
            .expect("the next call on the same connection succeeds");
        assert_eq!(
            reply.into_inner().status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        );
    }
    stop.cancel();
    server.await.expect("join").expect("served");
}
