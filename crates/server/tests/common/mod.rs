//! Test harness: a real flow server on a free loopback port, on SQLite or on
//! a fresh PostgreSQL database, and a gRPC client to it.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use rackflow_api::v1 as pb;
use rackflow_api::v1::flow_client::FlowClient;
use rackflow_server::Config;
use rackflow_store::{DbTarget, Store};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;
use uuid::Uuid;

#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub struct TestServer {
    pub client: FlowClient<Channel>,
    pub addr: std::net::SocketAddr,
    shutdown: CancellationToken,
    handle: Option<tokio::task::JoinHandle<()>>,
    cleanup: Cleanup,
}

enum Cleanup {
    File(PathBuf),
    Database { admin_url: String, name: String },
}

/// The PostgreSQL server URL for tests; `None` means skip (only outside CI).
fn postgres_url() -> Option<String> {
    match std::env::var("DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("DATABASE_URL must be set in CI: the PostgreSQL tests may not be skipped")
        }
        _ => None,
    }
}

/// Replaces the database name of a PostgreSQL URL.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..].find('/').map(|i| i + scheme_end);
    let host = match path_start {
        Some(i) => &base[..i],
        None => base,
    };
    match query {
        Some(q) => format!("{host}/{name}?{q}"),
        None => format!("{host}/{name}"),
    }
}

impl TestServer {
    /// Starts a server whose dispatcher does not drive runs (plans and
    /// reads stay as created); `None` when the backend is unavailable
    /// outside CI.
    pub async fn start(backend: Backend) -> Option<TestServer> {
        let mut config = Config::default();
        config.dispatcher.enabled = false;
        Self::start_with(backend, config).await
    }

    pub async fn start_with(backend: Backend, mut config: Config) -> Option<TestServer> {
        let (target, cleanup) = match backend {
            Backend::Sqlite => {
                let path =
                    std::env::temp_dir().join(format!("rackflow-test-{}.db", Uuid::new_v4()));
                (DbTarget::Sqlite(path.clone()), Cleanup::File(path))
            }
            Backend::Postgres => {
                let Some(admin_url) = postgres_url() else {
                    eprintln!("skipped: DATABASE_URL unset (PostgreSQL variant)");
                    return None;
                };
                let name = format!("rackflow_t_{}", Uuid::new_v4().simple());
                let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&admin_url)
                    .await
                    .expect("connect to PostgreSQL");
                sqlx::query(&format!("CREATE DATABASE {name}"))
                    .execute(&mut conn)
                    .await
                    .expect("create test database");
                let url = with_database(&admin_url, &name);
                (
                    DbTarget::Postgres(url),
                    Cleanup::Database { admin_url, name },
                )
            }
        };
        let store: Arc<dyn Store> = rackflow_store::open_store(&target)
            .await
            .expect("open store");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        config.listen = addr;
        config.shutdown_grace_secs = 1;
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let handle = tokio::spawn(async move {
            rackflow_server::serve_on(config, store, listener, stop)
                .await
                .expect("server runs");
        });
        let channel = Channel::from_shared(format!("http://{addr}"))
            .expect("uri")
            .connect()
            .await
            .expect("connect to test server");
        Some(TestServer {
            client: FlowClient::new(channel),
            addr,
            shutdown,
            handle: Some(handle),
            cleanup,
        })
    }

    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(h) = self.handle.take() {
            let _ = h.await;
        }
        match &self.cleanup {
            Cleanup::File(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
            }
            Cleanup::Database { admin_url, name } => {
                if let Ok(mut conn) =
                    <sqlx::PgConnection as sqlx::Connection>::connect(admin_url).await
                {
                    let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .execute(&mut conn)
                        .await;
                }
            }
        }
    }
}

/// Runs an async test body against both stores.
#[macro_export]
macro_rules! both_stores {
    ($($name:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::common::Backend::Sqlite).await;
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::common::Backend::Postgres).await;
                }
            )+
        }
    };
}

/// The upstream fixture id `00000000-0000-0000-0000-0000000000NN`.
pub fn fixture_id(n: u32) -> Uuid {
    Uuid::parse_str(&format!("00000000-0000-0000-0000-{n:012}")).expect("fixture id")
}

pub fn uuid(id: Uuid) -> pb::Uuid {
    pb::Uuid { id: id.to_string() }
}

fn component(kind: pb::ComponentType, rack_ext: &str, i: usize, mac_seed: u32) -> pb::Component {
    let type_name = format!("{kind:?}").to_lowercase();
    pb::Component {
        r#type: kind as i32,
        info: Some(pb::DeviceInfo {
            name: format!("{rack_ext}-{type_name}-{i:02}"),
            manufacturer: "NVIDIA".into(),
            serial_number: format!("SN-{rack_ext}-{type_name}-{i:02}"),
            ..Default::default()
        }),
        firmware_version: "1.0.0".into(),
        component_id: format!("{rack_ext}-{type_name}-{i:02}"),
        bmcs: vec![pb::BmcInfo {
            r#type: pb::BmcType::Host as i32,
            mac_address: format!(
                "02:00:{:02x}:{:02x}:{:02x}:{:02x}",
                (mac_seed >> 16) & 0xff,
                (mac_seed >> 8) & 0xff,
                mac_seed & 0xff,
                (kind as u32) * 16 + i as u32
            ),
            ip_address: None,
        }],
        position: Some(pb::RackPosition {
            slot_id: i as i32,
            tray_idx: i as i32,
            host_id: 0,
        }),
        ..Default::default()
    }
}

/// A rack with `compute` compute trays, one NVSwitch and one power shelf.
pub fn rack(n: u32, id: Option<Uuid>, compute: usize) -> pb::Rack {
    let ext = format!("r-{n:04}");
    let mut components: Vec<pb::Component> = (0..compute)
        .map(|i| component(pb::ComponentType::Compute, &ext, i, n))
        .collect();
    components.push(component(pb::ComponentType::Nvswitch, &ext, 0, n));
    components.push(component(pb::ComponentType::Powershelf, &ext, 0, n));
    pb::Rack {
        info: Some(pb::DeviceInfo {
            id: id.map(uuid),
            name: format!("rack-{n:03}"),
            manufacturer: "NVIDIA".into(),
            model: Some("GB200 NVL72".into()),
            serial_number: format!("RSN-{n:05}"),
            ..Default::default()
        }),
        location: Some(pb::Location {
            region: "eu".into(),
            datacenter: "dc1".into(),
            room: "a".into(),
            position: format!("row-1/pos-{n}"),
        }),
        external_id: ext,
        components,
        ..Default::default()
    }
}

/// Creates racks 1..=count with fixture ids; returns their ids in order.
pub async fn fixture_fleet(client: &mut FlowClient<Channel>, count: u32) -> Vec<Uuid> {
    let mut ids = Vec::new();
    for n in 1..=count {
        let id = fixture_id(n);
        client
            .create_expected_rack(pb::CreateExpectedRackRequest {
                rack: Some(rack(n, Some(id), 2)),
            })
            .await
            .expect("create rack");
        ids.push(id);
    }
    ids
}

/// A valid create request: `percentage`% with the given seeds, one
/// failure-rate gate, equal phases.
pub fn run_request(
    name: &str,
    percentage: i32,
    selector_seed: &str,
    ordering_seed: &str,
    phases: i32,
) -> pb::CreateOperationRunRequest {
    pb::CreateOperationRunRequest {
        name: name.into(),
        description: "test run".into(),
        configuration: Some(pb::OperationRunConfiguration {
            selector: Some(pb::OperationRunSelector {
                selector: Some(pb::operation_run_selector::Selector::Percentage(
                    pb::PercentageSelector {
                        percentage,
                        seed: selector_seed.into(),
                    },
                )),
            }),
            options: Some(pb::OperationRunOptions {
                max_concurrent_targets: 2,
                safety_policy: Some(pb::OperationRunSafetyPolicy {
                    gates: vec![pb::OperationRunSafetyGate {
                        gate: Some(pb::operation_run_safety_gate::Gate::FailureRate(
                            pb::OperationRunFailureRateGate {
                                scope: pb::OperationRunSafetyGateScope::CurrentPhase as i32,
                                failure_threshold_percent: 50,
                            },
                        )),
                    }],
                }),
                ordering_policy: Some(pb::OperationRunOrderingPolicy {
                    ordering: Some(pb::operation_run_ordering_policy::Ordering::Random(
                        pb::OperationRunRandomOrdering {
                            seed: ordering_seed.into(),
                        },
                    )),
                }),
                phase_policy: Some(pb::OperationRunPhasePolicy {
                    plan: Some(pb::operation_run_phase_policy::Plan::Equal(
                        pb::EqualOperationRunPhases {
                            phase_count: phases,
                        },
                    )),
                    advance_policy: None,
                }),
                conflict_policy: None,
            }),
            operation: Some(pb::OperationRunOperation {
                operation: Some(pb::operation_run_operation::Operation::UpgradeFirmware(
                    pb::UpgradeFirmwareRequest {
                        target_version: Some("2.0.0".into()),
                        ..Default::default()
                    },
                )),
                target_scope: None,
            }),
        }),
    }
}

/// Shortcuts into a request's nested configuration.
pub fn options(req: &mut pb::CreateOperationRunRequest) -> &mut pb::OperationRunOptions {
    req.configuration
        .as_mut()
        .and_then(|c| c.options.as_mut())
        .expect("options")
}

pub fn upgrade(req: &mut pb::CreateOperationRunRequest) -> &mut pb::UpgradeFirmwareRequest {
    match req
        .configuration
        .as_mut()
        .and_then(|c| c.operation.as_mut())
        .and_then(|o| o.operation.as_mut())
    {
        Some(pb::operation_run_operation::Operation::UpgradeFirmware(fw)) => fw,
        None => panic!("no upgrade_firmware"),
    }
}

pub fn target_scope(req: &mut pb::CreateOperationRunRequest) -> &mut pb::OperationRunTargetScope {
    req.configuration
        .as_mut()
        .and_then(|c| c.operation.as_mut())
        .expect("operation")
        .target_scope
        .get_or_insert_with(Default::default)
}

impl TestServer {
    /// Stops the server gracefully (as `stop`, but keeping its database) and
    /// starts a new one on the same database with `config`, on a new port;
    /// `client` and `addr` then point at the new server.
    pub async fn restart_with(&mut self, mut config: Config) {
        self.shutdown.cancel();
        if let Some(h) = self.handle.take() {
            let _ = h.await;
        }
        let target = match &self.cleanup {
            Cleanup::File(path) => DbTarget::Sqlite(path.clone()),
            Cleanup::Database { admin_url, name } => {
                DbTarget::Postgres(with_database(admin_url, name))
            }
        };
        let store: Arc<dyn Store> = rackflow_store::open_store(&target)
            .await
            .expect("reopen store");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        config.listen = addr;
        config.shutdown_grace_secs = 1;
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        self.handle = Some(tokio::spawn(async move {
            rackflow_server::serve_on(config, store, listener, stop)
                .await
                .expect("server runs");
        }));
        let channel = Channel::from_shared(format!("http://{addr}"))
            .expect("uri")
            .connect()
            .await
            .expect("connect to restarted test server");
        self.client = FlowClient::new(channel);
        self.addr = addr;
        self.shutdown = shutdown;
    }
}

impl TestServer {
    /// [`TestServer::start_with`] whose server drives `fleet`: the test keeps
    /// a handle on the simulated hardware and may hand it to the next server
    /// ([`TestServer::restart_with_fleet`]), as real hardware outlives a
    /// restart of the flow server. (The fresh server is swapped at once for
    /// one on `fleet`; nothing ran on it.)
    pub async fn start_with_fleet(
        backend: Backend,
        config: Config,
        fleet: Arc<rackflow_engine::sim::SimFleet>,
    ) -> Option<TestServer> {
        let mut server = Self::start_with(backend, config.clone()).await?;
        server.restart_with_fleet(config, fleet).await;
        Some(server)
    }

    /// [`TestServer::restart_with`], the new server driving `fleet`.
    pub async fn restart_with_fleet(
        &mut self,
        mut config: Config,
        fleet: Arc<rackflow_engine::sim::SimFleet>,
    ) {
        self.shutdown.cancel();
        if let Some(h) = self.handle.take() {
            let _ = h.await;
        }
        let target = match &self.cleanup {
            Cleanup::File(path) => DbTarget::Sqlite(path.clone()),
            Cleanup::Database { admin_url, name } => {
                DbTarget::Postgres(with_database(admin_url, name))
            }
        };
        let store: Arc<dyn Store> = rackflow_store::open_store(&target)
            .await
            .expect("reopen store");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        config.listen = addr;
        config.shutdown_grace_secs = 1;
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        self.handle = Some(tokio::spawn(async move {
            rackflow_server::serve_with_fleet(config, store, fleet, listener, stop)
                .await
                .expect("server runs");
        }));
        let channel = Channel::from_shared(format!("http://{addr}"))
            .expect("uri")
            .connect()
            .await
            .expect("connect to restarted test server");
        self.client = FlowClient::new(channel);
        self.addr = addr;
        self.shutdown = shutdown;
    }
}
