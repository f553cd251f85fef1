//! A real rack manager on a free loopback port (gRPC and `/metrics`) with
//! a firmware directory of images and a gRPC client; the `sim` back end
//! unless the test brings its own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rackflow_api::rack_manager as pb;
use rackflow_api::rack_manager::rack_manager_client::RackManagerClient;
use rackflow_api::rms_ext::v1::rack_manager_extensions_client::RackManagerExtensionsClient;
use rackflow_rms::backend::NodeBackend;
use rackflow_rms::backend::sim::{SimBackend, SimBackendConfig};
use rackflow_rms::config::RmsConfig;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

use crate::wait::wait_until;

/// Builds a rack manager's node back end from its final configuration.
pub type BuildBackend = dyn Fn(&RmsConfig) -> Arc<dyn NodeBackend>;

pub const RACK: &str = "rack-1";
pub const IMAGES: [&str; 3] = ["bmc-2.0.fwpkg", "bios-3.1.fwpkg", "psu-1.5.fwpkg"];

pub struct TestRms {
    pub client: RackManagerClient<Channel>,
    /// rackflow's own rack-manager RPCs, on the same connection.
    pub extensions: RackManagerExtensionsClient<Channel>,
    /// The simulated nodes (`None` when the test brought its back end).
    sim: Option<Arc<SimBackend>>,
    pub addr: SocketAddr,
    pub metrics_addr: SocketAddr,
    pub firmware_dir: PathBuf,
    /// Where the firmware-object catalogue is kept.
    pub catalog_dir: PathBuf,
    /// What [`TestRms::restart`] serves again.
    config: RmsConfig,
    backend: Arc<dyn NodeBackend>,
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

    /// A rack manager on the `redfish` back end (plain HTTP to the BMCs,
    /// fast polling, 30 s BMC calls) with `images`, no node yet.
    pub async fn start_redfish(images: &[(&str, &[u8])]) -> TestRms {
        let build = |config: &RmsConfig| {
            rackflow_rms::server::build_backend(&config.nodes).expect("redfish back end")
        };
        Self::start_custom(
            images,
            |config| {
                use rackflow_rms::backend::redfish::Scheme;
                config.workflows.bmc_call_timeout_seconds = 30.try_into().expect("non-zero");
                config.nodes.backend = rackflow_rms::config::BackendKind::Redfish;
                let redfish = &mut config.nodes.redfish;
                redfish.scheme = Scheme::Http;
                redfish.request_timeout_seconds = 15;
                redfish.task_poll_interval_ms = 50;
                redfish.task_timeout_seconds = 20;
                redfish.power_poll_interval_ms = 100;
                redfish.power_wait_timeout_seconds = 25;
            },
            Some(&build),
        )
        .await
    }

    pub async fn start_with(adjust: impl FnOnce(&mut RmsConfig)) -> TestRms {
        let images: Vec<(&str, &[u8])> = IMAGES.iter().map(|i| (*i, &b"image"[..])).collect();
        Self::start_custom(&images, adjust, None).await
    }

    /// A rack manager with `images` (name, contents) in its firmware
    /// directory, its configuration changed by `adjust`, on the sim back end
    /// or on the one `backend` builds from the final configuration.
    pub async fn start_custom(
        images: &[(&str, &[u8])],
        adjust: impl FnOnce(&mut RmsConfig),
        backend: Option<&BuildBackend>,
    ) -> TestRms {
        let firmware_dir =
            std::env::temp_dir().join(format!("rms-test-fw-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&firmware_dir).expect("firmware dir");
        for (name, contents) in images {
            std::fs::write(firmware_dir.join(name), contents).expect("write image");
        }
        let mut config = RmsConfig::default();
        config.workflows.firmware_dir = firmware_dir.clone();
        config.workflows.catalog_dir = firmware_dir.join(".catalog");
        config.workflows.shutdown_timeout_seconds = 1;
        config.shutdown_grace_seconds = 1;
        config.nodes.sim = fast_sim();
        // The kit's rack manager is plaintext on loopback and its tests
        // register nodes with credentials: allowed explicitly, as an
        // operator would have to (a test of the refusal turns it off).
        config.tls.allow_insecure = true;
        adjust(&mut config);
        let catalog_dir = config.workflows.catalog_dir.clone();
        let kept = config.clone();
        let (sim, node_backend): (Option<Arc<SimBackend>>, Arc<dyn NodeBackend>) = match backend {
            Some(build) => (None, build(&config)),
            None => {
                let sim = Arc::new(SimBackend::new(config.nodes.sim.clone()));
                (Some(sim.clone()), sim)
            }
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let metrics = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let metrics_addr = metrics.local_addr().expect("addr");
        let shutdown = CancellationToken::new();
        let tls = config.tls.cert.is_some();
        let handle = serve(&config, &node_backend, listener, metrics, shutdown.clone());
        let endpoint = Channel::from_shared(format!("http://{addr}")).expect("uri");
        // A TLS rack manager: the test connects with its own certificates.
        let channel = if tls {
            endpoint.connect_lazy()
        } else {
            endpoint.connect().await.expect("connect")
        };
        TestRms {
            client: RackManagerClient::new(channel.clone()),
            extensions: RackManagerExtensionsClient::new(channel),
            sim,
            addr,
            metrics_addr,
            firmware_dir,
            catalog_dir,
            config: kept,
            backend: node_backend,
            shutdown,
            handle: Some(handle),
        }
    }

    /// The simulated nodes; panics if the test brought its own back end.
    pub fn sim(&self) -> &Arc<SimBackend> {
        self.sim
            .as_ref()
            .expect("a rack manager on the sim back end")
    }

    /// Stops the rack manager as a process stop would (its job tracker
    /// drains) and serves again on the same addresses with the same
    /// configuration, directories and node back end (the BMCs keep their
    /// state): what a client sees across a rack-manager restart.
    pub async fn restart(&mut self) {
        self.shutdown.cancel();
        if let Some(h) = self.handle.take() {
            let _ = h.await;
        }
        let listener = bind_again(self.addr).await;
        let metrics = bind_again(self.metrics_addr).await;
        self.shutdown = CancellationToken::new();
        self.handle = Some(serve(
            &self.config,
            &self.backend,
            listener,
            metrics,
            self.shutdown.clone(),
        ));
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
            resp.response.expect("response").status,
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

    /// Waits until the job is terminal (10 s at most); see
    /// [`wait_job_terminal`].
    pub async fn wait_terminal(&self, job_id: &str) -> pb::JobStatus {
        wait_job_terminal(&mut self.client.clone(), job_id, Duration::from_secs(10)).await
    }

    /// Waits until the job is Running (the worker started), 10 s at most.
    pub async fn wait_running(&self, job_id: &str) {
        wait_job(
            &mut self.client.clone(),
            job_id,
            "Running",
            Duration::from_secs(10),
            |state| state == pb::JobExecutionState::Running as i32,
        )
        .await;
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

fn serve(
    config: &RmsConfig,
    backend: &Arc<dyn NodeBackend>,
    listener: TcpListener,
    metrics: TcpListener,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let config = config.clone();
    let backend = Arc::clone(backend);
    tokio::spawn(async move {
        rackflow_rms::server::serve_on(config, backend, listener, Some(metrics), stop)
            .await
            .expect("rack manager runs");
    })
}

/// Binds `addr` again once the previous server released it (bounded).
async fn bind_again(addr: SocketAddr) -> TcpListener {
    wait_until(
        &format!("{addr} to be free again"),
        Duration::from_secs(10),
        Duration::from_millis(20),
        || async move { TcpListener::bind(addr).await.ok() },
        String::new,
    )
    .await
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

/// Waits until the job is Completed or Failed and returns its status.
pub async fn wait_job_terminal(
    client: &mut RackManagerClient<Channel>,
    job_id: &str,
    deadline: Duration,
) -> pb::JobStatus {
    wait_job(client, job_id, "a terminal state", deadline, |state| {
        state == pb::JobExecutionState::Completed as i32
            || state == pb::JobExecutionState::Failed as i32
    })
    .await
}

/// Reads GetJobStatus until `done` holds for its execution state. The rack
/// manager publishes no job events (GetJobStatus is its only view of a
/// job), so this is a bounded poll every 5 ms — the one wait of the kit
/// that re-reads on a timer while in-process.
pub async fn wait_job(
    client: &mut RackManagerClient<Channel>,
    job_id: &str,
    what: &str,
    deadline: Duration,
    done: impl Fn(i32) -> bool,
) -> pb::JobStatus {
    let last = std::sync::Mutex::new(None);
    let what = format!("job {job_id} to reach {what}");
    wait_until(
        &what,
        deadline,
        Duration::from_millis(5),
        || {
            let mut client = client.clone();
            let last = &last;
            let done = &done;
            async move {
                let status = client
                    .get_job_status(pb::GetJobStatusRequest {
                        job_id: job_id.to_owned(),
                        include_child_job_states: false,
                    })
                    .await
                    .expect("GetJobStatus")
                    .into_inner()
                    .job_states
                    .remove(0);
                let reached = done(status.execution_state);
                *last
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(status.clone());
                reached.then_some(status)
            }
        },
        || {
            format!(
                "last status: {:?}",
                last.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            )
        },
    )
    .await
}

/// Waits (20 s at most) until a firmware object's download ended —
/// available, or unavailable with a reason — and returns it.
pub async fn settled_object(client: &RackManagerClient<Channel>, id: &str) -> pb::FirmwareObject {
    wait_until(
        &format!("firmware object {id} to settle"),
        Duration::from_secs(20),
        Duration::from_millis(20),
        || {
            let mut client = client.clone();
            async move {
                let object = client
                    .get_firmware_object(pb::GetFirmwareObjectRequest { id: id.to_owned() })
                    .await
                    .ok()?
                    .into_inner()
                    .object?;
                (object.available || object.unavailable_reason.is_some()).then_some(object)
            }
        },
        String::new,
    )
    .await
}
