//! Shutdown ends open `WatchOperationRun` streams: the watch loops own the
//! server's shutdown token, so a stream ends with UNAVAILABLE as soon as the
//! server stops instead of holding the graceful stop up.

use rackflow_testkit as common;
use rackflow_testkit::both_stores;

use std::time::Duration;

use common::{Backend, TestServer, fixture_fleet, run_request};
use rackflow_api::v1 as pb;
use rackflow_api::v1::flow_extensions_client::FlowExtensionsClient;
use tonic::Code;

/// Far above what a stop takes; a hung stream fails the test instead of
/// hanging it.
const DEADLINE: Duration = Duration::from_secs(10);

both_stores!(watch_stream_ends_on_shutdown);

async fn watch_stream_ends_on_shutdown(backend: Backend) {
    // The dispatcher is off: the run stays pending and its watch open.
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    fixture_fleet(&mut s.client, 2).await;
    let id = s
        .client
        .create_operation_run(run_request("watched", 100, "s", "o", 1))
        .await
        .expect("create run")
        .into_inner()
        .id;
    let mut extensions = FlowExtensionsClient::connect(format!("http://{}", s.addr))
        .await
        .expect("connect FlowExtensions");
    let mut stream = extensions
        .watch_operation_run(pb::WatchOperationRunRequest { id: id.clone() })
        .await
        .expect("watch")
        .into_inner();
    let first = tokio::time::timeout(DEADLINE, stream.message())
        .await
        .expect("first message in time")
        .expect("first message")
        .expect("the run now");
    assert_eq!(first.summary.and_then(|s| s.id), id);

    let stopping = tokio::spawn(s.stop());
    let end = tokio::time::timeout(DEADLINE, stream.message())
        .await
        .expect("the stream ends when the server shuts down");
    let status = end.expect_err("the stream ends with a status, not a message");
    assert_eq!(
        (status.code(), status.message()),
        (Code::Unavailable, "server is shutting down")
    );
    tokio::time::timeout(DEADLINE, stopping)
        .await
        .expect("the server stops in time")
        .expect("stop task");
}
