//! GetJobStatus over gRPC on loopback (plain binary, `harness = false`).
//!
//! Run: `cargo bench -p rackflow-rms --bench grpc_status`
//!
//! Starts a rack manager with the `sim` back end on a free loopback port,
//! creates one completed firmware job and one 100-child batch, then measures
//! calls per second — sequentially on one connection and with 16 calls in
//! flight — of:
//! * `GetVersion` (the baseline: the same transport with no tracker work);
//! * `GetJobStatus` of a leaf job;
//! * `GetJobStatus` of the batch parent with its 100 child states.
//!
//! Request loops are bounded by count, and everything stays on 127.0.0.1.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rackflow_api::rack_manager as pb;
use rackflow_api::rack_manager::rack_manager_client::RackManagerClient;
use rackflow_rms::backend::sim::{SimBackend, SimBackendConfig};
use rackflow_rms::config::RmsConfig;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

const SEQUENTIAL_CALLS: usize = 5_000;
const CONCURRENT_CALLS: usize = 20_000;
const IN_FLIGHT: usize = 16;
const BATCH_CHILDREN: usize = 100;

type Client = RackManagerClient<Channel>;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    // Drive the client from a worker thread like the server, not from the
    // blocking main thread.
    runtime
        .block_on(runtime.spawn(run()))
        .expect("benchmark task");
}

async fn run() {
    let dir = std::env::temp_dir().join(format!("rms-bench-fw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("firmware dir");
    std::fs::write(dir.join("bmc-2.0.fwpkg"), b"image").expect("image");
    let mut config = RmsConfig::default();
    config.workflows.firmware_dir = dir.clone();
    config.nodes.sim = SimBackendConfig {
        firmware_latency_ms: 0,
        power_latency_ms: 0,
        read_latency_ms: 0,
        jitter: 0.0,
        ..SimBackendConfig::default()
    };
    let sim = Arc::new(SimBackend::new(config.nodes.sim.clone()));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = CancellationToken::new();
    let server = tokio::spawn(rackflow_rms::server::serve_on(
        config,
        sim,
        listener,
        None,
        stop.clone(),
    ));
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let client = RackManagerClient::new(channel);
    let (leaf, parent) = setup(client.clone()).await;

    println!("rackflow-rms GetJobStatus over gRPC (loopback, release build)");
    let version = || {
        let mut c = client.clone();
        async move {
            c.get_version(pb::GetVersionRequest {})
                .await
                .expect("GetVersion");
        }
    };
    let leaf_status = |id: String, children: bool| {
        let client = client.clone();
        move || {
            let mut c = client.clone();
            let id = id.clone();
            async move {
                let states = c
                    .get_job_status(pb::GetJobStatusRequest {
                        job_id: id,
                        include_child_job_states: children,
                    })
                    .await
                    .expect("GetJobStatus")
                    .into_inner()
                    .job_states;
                assert!(!states.is_empty());
            }
        }
    };
    // Warm-up.
    measure_sequential(500, version).await;
    for (label, calls_seq, calls_conc) in [
        ("sequential", SEQUENTIAL_CALLS, 0),
        ("16 in flight", 0, CONCURRENT_CALLS),
    ] {
        let (base, leaf_rate, batch_rate) = if calls_seq > 0 {
            (
                measure_sequential(calls_seq, version).await,
                measure_sequential(calls_seq, leaf_status(leaf.clone(), false)).await,
                measure_sequential(calls_seq / 5, leaf_status(parent.clone(), true)).await,
            )
        } else {
            (
                measure_concurrent(calls_conc, version).await,
                measure_concurrent(calls_conc, leaf_status(leaf.clone(), false)).await,
                measure_concurrent(calls_conc / 5, leaf_status(parent.clone(), true)).await,
            )
        };
        println!("  [{label}]");
        println!("    GetVersion (baseline)                  {base:>10.0} calls/s");
        println!(
            "    GetJobStatus leaf                      {leaf_rate:>10.0} calls/s  ({:.2}× baseline)",
            leaf_rate / base
        );
        println!(
            "    GetJobStatus parent + {BATCH_CHILDREN} children       {batch_rate:>10.0} calls/s  ({:.2}× baseline)",
            batch_rate / base
        );
    }
    stop.cancel();
    let _ = server.await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// One completed leaf job and one completed batch of `BATCH_CHILDREN`.
async fn setup(mut client: Client) -> (String, String) {
    let nodes = (0..=BATCH_CHILDREN)
        .map(|i| pb::NodeInfo {
            node_id: format!("n{i}"),
            rack_id: "rack-1".into(),
            r#type: Some(pb::NodeType::ComputeGb200Nvidia as i32),
            bmc_endpoint: Some(pb::Endpoint {
                interface: Some(pb::NetworkInterface {
                    ip_address: "127.0.0.1".into(),
                    ..Default::default()
                }),
                port: 443,
                credentials: None,
            }),
            ..Default::default()
        })
        .collect();
    client
        .create_nodes(pb::CreateNodesRequest {
            nodes: Some(pb::NodeSet { nodes }),
        })
        .await
        .expect("CreateNodes");
    let target = vec![pb::FirmwareTarget {
        target: "BMC".into(),
        filename: "bmc-2.0.fwpkg".into(),
    }];
    let leaf = client
        .update_firmware(pb::UpdateFirmwareRequest {
            node_id: format!("n{BATCH_CHILDREN}"),
            rack_id: "rack-1".into(),
            firmware_targets: target.clone(),
            ..Default::default()
        })
        .await
        .expect("UpdateFirmware")
        .into_inner()
        .job_id;
    wait_terminal(&mut client, &leaf).await;
    // The batch covers n0..n99 (n100 is the leaf's node, already updated; a
    // batch by type would include it too, so use ephemeral nodes instead).
    let batch = client
        .batch_update_firmware(pb::BatchUpdateFirmwareRequest {
            nodes: Some(pb::NodeSet {
                nodes: (0..BATCH_CHILDREN)
                    .map(|i| pb::NodeInfo {
                        node_id: format!("b{i}"),
                        rack_id: "rack-2".into(),
                        r#type: Some(pb::NodeType::ComputeGb200Nvidia as i32),
                        bmc_endpoint: Some(pb::Endpoint {
                            interface: Some(pb::NetworkInterface {
                                ip_address: "127.0.0.1".into(),
                                ..Default::default()
                            }),
                            port: 443,
                            credentials: Some(pb::Credentials {
                                auth: Some(pb::credentials::Auth::UserPass(pb::UsernamePassword {
                                    username: "u".into(),
                                    password: "p".into(),
                                })),
                            }),
                        }),
                        ..Default::default()
                    })
                    .collect(),
            }),
            firmware_targets: [(
                pb::NodeType::ComputeGb200Nvidia as i32,
                pb::FirmwareTargetList { targets: target },
            )]
            .into_iter()
            .collect(),
            ..Default::default()
        })
        .await
        .expect("BatchUpdateFirmware")
        .into_inner()
        .response
        .expect("response")
        .job_id;
    wait_terminal(&mut client, &batch).await;
    (leaf, batch)
}

async fn wait_terminal(client: &mut Client, job_id: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let state = client
            .get_job_status(pb::GetJobStatusRequest {
                job_id: job_id.to_owned(),
                include_child_job_states: false,
            })
            .await
            .expect("GetJobStatus")
            .into_inner()
            .job_states[0]
            .execution_state;
        if state >= pb::JobExecutionState::Completed as i32 {
            return;
        }
        assert!(Instant::now() < deadline, "job {job_id} never finished");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn measure_sequential<F, Fut>(calls: usize, call: F) -> f64
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let start = Instant::now();
    for _ in 0..calls {
        call().await;
    }
    calls as f64 / start.elapsed().as_secs_f64()
}

async fn measure_concurrent<F, Fut>(calls: usize, call: F) -> f64
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..calls {
        if set.len() >= IN_FLIGHT {
            set.join_next().await;
        }
        set.spawn(call());
    }
    while set.join_next().await.is_some() {}
    calls as f64 / start.elapsed().as_secs_f64()
}
