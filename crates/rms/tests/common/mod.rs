//! Test harness: a real rack manager with the `sim` back end on a free
//! loopback port (gRPC and `/metrics`), a firmware directory with a few
//! images, and a gRPC client.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rackflow_api::rack_manager as pb;
use rackflow_api::rack_manager::rack_manager_client::RackManagerClient;
use rackflow_rms::backend::sim::{SimBackend, SimBackendConfig};
use rackflow_rms::config::RmsConfig;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

pub const RACK: &str = "rack-1";
pub const IMAGES: [&str; 3] = ["bmc-2.0.fwpkg", "bios-3.1.fwpkg", "psu-1.5.fwpkg"];

pub struct TestRms {
    pub client: RackManagerClient<Channel>,
    pub sim: Arc<SimBackend>,
    pub addr: SocketAddr,
    pub metrics_addr: SocketAddr,
    pub firmware_dir: PathBuf,
    shutdown: CancellationToken,
    handle: Option<tokio::task::JoinHandle<()>>,
}

/// Short sim latencies without jitter so tests stay fast and predictable.
pub fn fast_sim() -> SimBackendConfig {
    SimBackendConfig {
        power_latency_ms: 5,
        read_latency_ms: 1,
        firmware_latency_ms: 40,
        jitter: 0.0,
        ..SimBackendConfig::default()
    }
}

impl TestRms {
    pub async fn start() -> TestRms {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(adjust: impl FnOnce(&mut RmsConfig)) -> TestRms {
        let firmware_dir =
            std::env::temp_dir().join(format!("rms-test-fw-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&firmware_dir).expect("firmware dir");
        for image in IMAGES {
            std::fs::write(firmware_dir.join(image), b"image").expect("write image");
        }
        let mut config = RmsConfig::default();
        config.workflows.firmware_dir = firmware_dir.clone();
        config.workflows.shutdown_timeout_seconds = 1;
        config.shutdown_grace_seconds = 1;
        config.nodes.sim = fast_sim();
        adjust(&mut config);
        let sim = Arc::new(SimBackend::new(config.nodes.sim.clone()));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let metrics = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let metrics_addr = metrics.local_addr().expect("addr");
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let backend = sim.clone();
        let handle = tokio::spawn(async move {
            rackflow_rms::server::serve_on(config, backend, listener, Some(metrics), stop)
                .await
                .expect("rack manager runs");
        });
        let channel = Channel::from_shared(format!("http://{addr}"))
            .expect("uri")
            .connect()
            .await
            .expect("connect");
        TestRms {
            client: RackManagerClient::new(channel),
            sim,
            addr,
            metrics_addr,
            firmware_dir,
            shutdown,
            handle: Some(handle),
        }
    }

    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(h) = self.handle.take() {
            let _ = h.await;
        }
        let _ = std::fs::remove_dir_all(&self.firmware_dir);
    }

    /// Registers compute nodes `names` in `rack`.
    pub async fn register(&self, rack: &str, names: &[&str], node_type: pb::NodeType) {
        let nodes = names
            .iter()
            .map(|n| node_info(rack, n, node_type))
            .collect();
        let resp = self
            .client
            .clone()
            .create_nodes(pb::CreateNodesRequest {
                nodes: Some(pb::NodeSet { nodes }),
            })
            .await
            .expect("CreateNodes")
            .into_inner();
        assert_eq!(
            resp.response.unwrap().status,
            pb::ReturnCode::Success as i32
        );
    }

    pub async fn job(&self, job_id: &str, children: bool) -> Vec<pb::JobStatus> {
        self.client
            .clone()
            .get_job_status(pb::GetJobStatusRequest {
                job_id: job_id.to_owned(),
                include_child_job_states: children,
            })
            .await
            .expect("GetJobStatus")
            .into_inner()
            .job_states
    }

    /// Polls GetJobStatus until the job is terminal (10 s at most).
    pub async fn wait_terminal(&self, job_id: &str) -> pb::JobStatus {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let status = self.job(job_id, false).await.remove(0);
            let state = status.execution_state;
            if state == pb::JobExecutionState::Completed as i32
                || state == pb::JobExecutionState::Failed as i32
            {
                return status;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "job {job_id} not terminal: {status:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Polls GetJobStatus until the job is Running (the worker started).
    pub async fn wait_running(&self, job_id: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.job(job_id, false).await[0].execution_state
            != pb::JobExecutionState::Running as i32
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "job {job_id} never ran"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// `GET /metrics` over a raw HTTP/1.1 connection: (status line, body).
    pub async fn scrape(&self, path: &str) -> (String, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(self.metrics_addr)
            .await
            .expect("connect metrics");
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut raw = String::new();
        stream.read_to_string(&mut raw).await.expect("read");
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
        (
            head.lines().next().unwrap_or("").to_owned(),
            body.to_owned(),
        )
    }
}

pub fn endpoint(ip: &str, port: u32, auth: Option<pb::credentials::Auth>) -> pb::Endpoint {
    pb::Endpoint {
        interface: Some(pb::NetworkInterface {
            ip_address: ip.to_owned(),
            mac_address: "aa:bb:cc:dd:ee:ff".to_owned(),
            host_name: None,
        }),
        port,
        credentials: auth.map(|a| pb::Credentials { auth: Some(a) }),
    }
}

pub fn user_pass() -> Option<pb::credentials::Auth> {
    Some(pb::credentials::Auth::UserPass(pb::UsernamePassword {
        username: "admin".to_owned(),
        password: "super-secret".to_owned(),
    }))
}

pub fn node_info(rack: &str, node: &str, node_type: pb::NodeType) -> pb::NodeInfo {
    pb::NodeInfo {
        node_id: node.to_owned(),
        rack_id: rack.to_owned(),
        r#type: Some(node_type as i32),
        bmc_endpoint: Some(endpoint("127.0.0.1", 0, user_pass())),
        ..Default::default()
    }
}

pub fn fw(target: &str, filename: &str) -> pb::FirmwareTarget {
    pb::FirmwareTarget {
        target: target.to_owned(),
        filename: filename.to_owned(),
    }
}
