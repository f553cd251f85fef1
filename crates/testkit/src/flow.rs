//! A real flow server on a free loopback port, on a [`TestDatabase`], with
//! its store observed ([`Changes`]), and the fixtures the flow tests build
//! on.
//!
//! [`TestServer`] runs in the test's runtime (async tests);
//! [`ThreadServer`] runs on its own runtime thread, for synchronous tests
//! that drive the `rackflow` binary.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rackflow_api::v1 as pb;
pub use rackflow_api::v1::flow_client::FlowClient;
pub use rackflow_api::v1::flow_extensions_client::FlowExtensionsClient;
use rackflow_engine::sim::SimFleet;
use rackflow_server::Config;
use rackflow_store::Store;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;
use uuid::Uuid;

use crate::changes::{Changes, ObservedStore, Waiter};
use crate::db::{Backend, TestDatabase};

/// The client of our own RPCs on `v1.FlowExtensions`
/// (`PreviewOperationRun`, `WatchOperationRun`): the one place in the kit
/// that names their service.
pub type ExtensionsClient = FlowExtensionsClient<Channel>;

/// [`ExtensionsClient`] on `channel`.
pub fn flow_extensions(channel: Channel) -> ExtensionsClient {
    FlowExtensionsClient::new(channel)
}

pub struct TestServer {
    pub client: FlowClient<Channel>,
    pub addr: SocketAddr,
    channel: Channel,
    /// The store the server runs on (SQLite admits one process: a test
    /// reads through this handle, not a second pool).
    store: Option<Arc<dyn Store>>,
    changes: Changes,
    shutdown: CancellationToken,
    handle: Option<tokio::task::JoinHandle<()>>,
    // Last: removed after the server is gone.
    db: Option<TestDatabase>,
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

    pub async fn start_with(backend: Backend, config: Config) -> Option<TestServer> {
        Self::start_on(backend, config, None).await
    }

    /// [`TestServer::start_with`] whose server drives `fleet`: the test keeps
    /// a handle on the simulated hardware and may hand it to the next server
    /// ([`TestServer::restart_with_fleet`]), as real hardware outlives a
    /// restart of the flow server.
    pub async fn start_with_fleet(
        backend: Backend,
        config: Config,
        fleet: Arc<SimFleet>,
    ) -> Option<TestServer> {
        Self::start_on(backend, config, Some(fleet)).await
    }

    async fn start_on(
        backend: Backend,
        config: Config,
        fleet: Option<Arc<SimFleet>>,
    ) -> Option<TestServer> {
        let db = TestDatabase::create(backend).await?;
        let changes = Changes::new();
        let (channel, addr, shutdown, handle, store) = launch(&db, &changes, config, fleet).await;
        Some(TestServer {
            client: FlowClient::new(channel.clone()),
            addr,
            channel,
            store: Some(store),
            changes,
            shutdown,
            handle: Some(handle),
            db: Some(db),
        })
    }

    /// Creates the run of `req` and waits (up to `deadline`) until it
    /// stops at its first phase gate; returns its id.
    pub async fn run_to_phase_gate(
        &mut self,
        req: pb::CreateOperationRunRequest,
        deadline: Duration,
    ) -> pb::Uuid {
        let id = self
            .client
            .create_operation_run(req)
            .await
            .expect("create operation run")
            .into_inner()
            .id
            .expect("run id");
        let mut watch = self.extensions();
        crate::wait::wait_run(&mut watch, &id, "the phase gate", deadline, |run| {
            run.summary
                .as_ref()
                .and_then(|s| s.state)
                .is_some_and(|s| s.reason() == pb::OperationRunStatusReason::PhaseGate)
        })
        .await;
        id
    }

    /// A client of our own RPCs (see [`flow_extensions`]).
    pub fn extensions(&self) -> ExtensionsClient {
        flow_extensions(self.channel.clone())
    }

    /// This server's store (tests that look at what was stored, as an
    /// operator with database access would).
    pub fn store(&self) -> &Arc<dyn Store> {
        self.store.as_ref().expect("a running server")
    }

    /// The writes to this server's store.
    pub fn changes(&self) -> &Changes {
        &self.changes
    }

    /// A waiter on this server's store writes (see [`Changes::waiter`]).
    pub fn waiter(&self, what: impl Into<String>, deadline: Duration) -> Waiter {
        self.changes.waiter(what, deadline)
    }

    /// Rack `id` as `GetRackInfoByID` answers it, with its components when
    /// asked (panics when it is unknown).
    pub async fn rack(&self, id: Uuid, with_components: bool) -> pb::Rack {
        self.client
            .clone()
            .get_rack_info_by_id(pb::GetRackInfoByIdRequest {
                id: Some(uuid(id)),
                with_components,
            })
            .await
            .expect("GetRackInfoByID")
            .into_inner()
            .rack
            .expect("a rack")
    }

    /// Task `id` as `GetTasksByIDs` answers it (panics when it is unknown).
    pub async fn task(&mut self, id: Uuid) -> pb::Task {
        let mut tasks = self
            .client
            .get_tasks_by_i_ds(pb::GetTasksByIDsRequest {
                task_ids: vec![uuid(id)],
            })
            .await
            .expect("GetTasksByIDs")
            .into_inner()
            .tasks;
        assert_eq!(tasks.len(), 1, "task {id}: {tasks:#?}");
        tasks.remove(0)
    }

    /// Re-reads task `id` after every store write until `done` holds, for
    /// at most `deadline` (`what` names the wait in the failure).
    pub async fn wait_task(
        &mut self,
        id: Uuid,
        what: &str,
        deadline: Duration,
        done: impl Fn(&pb::Task) -> bool,
    ) -> pb::Task {
        let mut changes = self.waiter(format!("task {id} to become {what}"), deadline);
        loop {
            let t = self.task(id).await;
            if done(&t) {
                return t;
            }
            changes.next(&t).await;
        }
    }

    /// Stops the server and removes its database.
    pub async fn stop(mut self) {
        self.halt().await;
        if let Some(db) = self.db.take() {
            db.remove().await;
        }
    }

    async fn halt(&mut self) {
        self.shutdown.cancel();
        if let Some(h) = self.handle.take() {
            let _ = h.await;
        }
        // The store's pool (and SQLite's process lock) goes with the server.
        self.store = None;
    }

    /// Stops the server gracefully (as `stop`, but keeping its database) and
    /// starts a new one on the same database with `config`, on a new port;
    /// `client` and `addr` then point at the new server.
    pub async fn restart_with(&mut self, config: Config) {
        self.relaunch(config, None).await;
    }

    /// [`TestServer::restart_with`], the new server driving `fleet`.
    pub async fn restart_with_fleet(&mut self, config: Config, fleet: Arc<SimFleet>) {
        self.relaunch(config, Some(fleet)).await;
    }

    async fn relaunch(&mut self, config: Config, fleet: Option<Arc<SimFleet>>) {
        self.halt().await;
        let db = self.db.as_ref().expect("database kept until stop");
        let (channel, addr, shutdown, handle, store) =
            launch(db, &self.changes, config, fleet).await;
        self.store = Some(store);
        self.client = FlowClient::new(channel.clone());
        self.channel = channel;
        self.addr = addr;
        self.shutdown = shutdown;
        self.handle = Some(handle);
    }
}

/// Opens the store, binds port 0 and serves; returns a connected channel.
async fn launch(
    db: &TestDatabase,
    changes: &Changes,
    mut config: Config,
    fleet: Option<Arc<SimFleet>>,
) -> (
    Channel,
    SocketAddr,
    CancellationToken,
    tokio::task::JoinHandle<()>,
    Arc<dyn Store>,
) {
    let store: Arc<dyn Store> = rackflow_store::open_store(db.target())
        .await
        .expect("open store");
    let store = ObservedStore::wrap(store, changes.clone());
    let handle_store = store.clone();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    config.listen = addr;
    config.shutdown_grace_secs = 1;
    let tls = config.tls.cert.is_some();
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let handle = tokio::spawn(async move {
        let served = match fleet {
            Some(fleet) => {
                rackflow_server::serve_with_fleet(config, store, fleet, listener, stop).await
            }
            None => rackflow_server::serve_on(config, store, listener, stop).await,
        };
        served.expect("server runs");
    });
    let endpoint = Channel::from_shared(format!("http://{addr}")).expect("uri");
    // A TLS server: the test connects with its own certificates; the kit's
    // plaintext channel is never used (and must not fail the start).
    let channel = if tls {
        endpoint.connect_lazy()
    } else {
        endpoint.connect().await.expect("connect to test server")
    };
    (channel, addr, shutdown, handle, handle_store)
}

/// One of several servers on one database the test owns (replicas); its
/// writes go to the [`Changes`] it is given.
pub struct Replica {
    pub client: FlowClient<Channel>,
    pub addr: SocketAddr,
    shutdown: CancellationToken,
    handle: tokio::task::JoinHandle<()>,
}

impl Replica {
    pub async fn start(db: &TestDatabase, changes: &Changes, config: Config) -> Replica {
        let (channel, addr, shutdown, handle, _) = launch(db, changes, config, None).await;
        Replica {
            client: FlowClient::new(channel),
            addr,
            shutdown,
            handle,
        }
    }

    /// Stops the server gracefully (in-flight work ends first).
    pub async fn stop(self) {
        self.shutdown.cancel();
        let _ = self.handle.await;
    }
}

/// A flow server on SQLite on its own runtime thread, for synchronous tests
/// (the CLI's); stopped on drop.
pub struct ThreadServer {
    pub addr: SocketAddr,
    changes: Changes,
    shutdown: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
    // Last: removed after the server is gone.
    _db: TestDatabase,
}

impl ThreadServer {
    pub fn start() -> ThreadServer {
        ThreadServer::start_with(|_| {})
    }

    /// [`ThreadServer::start`] with the configuration changed by `configure`
    /// (simulated latencies, dispatcher poll, …).
    pub fn start_with(configure: impl FnOnce(&mut Config) + Send + 'static) -> ThreadServer {
        let db = TestDatabase::sqlite();
        let target = db.target().clone();
        let changes = Changes::new();
        let observed = changes.clone();
        let shutdown = CancellationToken::new();
        let (tx, rx) = std::sync::mpsc::channel();
        let token = shutdown.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
                let addr = listener.local_addr().expect("addr");
                let store = rackflow_store::open_store(&target)
                    .await
                    .expect("open store");
                let store = ObservedStore::wrap(store, observed);
                let mut config = Config {
                    listen: addr,
                    shutdown_grace_secs: 1,
                    ..Default::default()
                };
                configure(&mut config);
                tx.send(addr).expect("send addr");
                rackflow_server::serve_on(config, store, listener, token)
                    .await
                    .expect("serve");
            });
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("server did not start");
        ThreadServer {
            addr,
            changes,
            shutdown,
            thread: Some(thread),
            _db: db,
        }
    }

    /// A waiter on this server's store writes (see [`Changes::waiter`]).
    pub fn waiter(&self, what: impl Into<String>, deadline: Duration) -> Waiter {
        self.changes.waiter(what, deadline)
    }
}

impl Drop for ThreadServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

// ---- fixtures ---------------------------------------------------------------

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

/// The whole fixture rack `n` (every component type) as a target.
pub fn whole_rack(n: u32) -> pb::OperationTargetSpec {
    pb::OperationTargetSpec {
        targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
            targets: vec![pb::RackTarget {
                identifier: Some(pb::rack_target::Identifier::Id(uuid(fixture_id(n)))),
                component_types: Vec::new(),
            }],
        })),
    }
}

/// A nightly (02:00 Europe/Paris, overlap skipped) power-on of fixture rack
/// `n`, named `name`.
pub fn nightly_power_on(name: &str, n: u32) -> pb::CreateTaskScheduleRequest {
    pb::CreateTaskScheduleRequest {
        schedule: Some(pb::ScheduleConfig {
            name: name.into(),
            spec: Some(pb::ScheduleSpec {
                r#type: pb::ScheduleSpecType::Cron as i32,
                spec: "0 2 * * *".into(),
                timezone: "Europe/Paris".into(),
            }),
            overlap_policy: pb::OverlapPolicy::Skip as i32,
            catchup_window: None,
        }),
        operation: Some(pb::ScheduledOperation {
            operation: Some(pb::scheduled_operation::Operation::PowerOn(
                pb::PowerOnRackRequest {
                    target_spec: Some(whole_rack(n)),
                    ..Default::default()
                },
            )),
        }),
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

/// A target of the NVLink domain named `name`, with a type filter.
pub fn nvl_domain_target(name: &str, types: &[pb::ComponentType]) -> pb::OperationTargetSpec {
    pb::OperationTargetSpec {
        targets: Some(pb::operation_target_spec::Targets::NvlDomains(
            pb::NvlDomainTargets {
                targets: vec![pb::NvlDomainTarget {
                    identifier: Some(pb::nvl_domain_target::Identifier::Name(name.into())),
                    component_types: types.iter().map(|t| *t as i32).collect(),
                }],
            },
        )),
    }
}

/// Creates the NVLink domain `name` (external and NMX-C cluster ids when
/// given); returns its id.
pub async fn create_nvl_domain(
    client: &mut FlowClient<Channel>,
    name: &str,
    external_id: Option<&str>,
    nmxc_cluster_id: Option<&str>,
) -> Uuid {
    let id = client
        .create_nvl_domain(pb::CreateNvlDomainRequest {
            nvl_domain: Some(pb::NvlDomain {
                identifier: Some(pb::Identifier {
                    id: None,
                    name: name.into(),
                }),
                external_id: external_id.map(str::to_string),
                nmxc_cluster_id: nmxc_cluster_id.map(str::to_string),
            }),
        })
        .await
        .expect("create NVL domain")
        .into_inner()
        .id
        .expect("domain id");
    id.id.parse().expect("domain id is a UUID")
}

/// An identifier of the fixture rack `n` by id.
pub fn fixture_rack_identifier(n: u32) -> pb::Identifier {
    pb::Identifier {
        id: Some(uuid(fixture_id(n))),
        name: String::new(),
    }
}

/// Attaches the fixture racks `racks` to the domain named `domain`.
pub async fn attach_fixture_racks(client: &mut FlowClient<Channel>, domain: &str, racks: &[u32]) {
    client
        .attach_racks_to_nvl_domain(pb::AttachRacksToNvlDomainRequest {
            nvl_domain_identifier: Some(pb::Identifier {
                id: None,
                name: domain.into(),
            }),
            rack_identifiers: racks.iter().map(|n| fixture_rack_identifier(*n)).collect(),
        })
        .await
        .expect("attach racks");
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

/// Makes a firmware `upgrade` rule the default: one stage per type of
/// `types` (in order, e.g. `["Compute", "NvSwitch"]`), polling the
/// simulated update every `poll` (e.g. `"20ms"`), one attempt per step (a
/// failed update fails the task at once).
pub async fn create_fast_firmware_rule(
    client: &mut FlowClient<Channel>,
    types: &[&str],
    poll: &str,
) {
    let steps: Vec<String> = types
        .iter()
        .enumerate()
        .map(|(i, ty)| {
            format!(
                r#"{{"component_type": "{ty}", "stage": {}, "retry": {{"max_attempts": 1, "initial_interval": "1s"}},
                   "main_operation": {{"name": "FirmwareControl", "parameters": {{"poll_interval": "{poll}", "poll_timeout": "60s"}}}}}}"#,
                i + 1
            )
        })
        .collect();
    client
        .create_operation_rule(pb::CreateOperationRuleRequest {
            name: "fast firmware".into(),
            description: format!("test rule: polls every {poll}"),
            operation_type: pb::OperationType::FirmwareControl as i32,
            operation_code: "upgrade".into(),
            rule_definition_json: format!(
                r#"{{"version": "v1", "steps": [{}]}}"#,
                steps.join(", ")
            ),
            is_default: true,
        })
        .await
        .expect("create the fast default firmware rule");
}

/// The benches' default firmware rule: one stage updating compute and
/// NVLink switch trays in parallel, so a rack's hardware time is one
/// firmware update.
pub async fn create_one_stage_firmware_rule(client: &mut FlowClient<Channel>) {
    let step = |ty: &str| {
        format!(
            r#"{{"component_type": "{ty}", "stage": 1, "timeout": "10m", "main_operation": {{"name": "FirmwareControl", "parameters": {{"poll_interval": "2m", "poll_timeout": "30m"}}}}}}"#
        )
    };
    let definition = format!(
        r#"{{"version": "v1", "steps": [{}, {}]}}"#,
        step("compute"),
        step("nvswitch")
    );
    client
        .create_operation_rule(pb::CreateOperationRuleRequest {
            name: "bench one-stage upgrade".into(),
            description: String::new(),
            operation_type: pb::OperationType::FirmwareControl as i32,
            operation_code: "upgrade".into(),
            rule_definition_json: definition,
            is_default: true,
        })
        .await
        .expect("rule");
}

/// The benches' rollout: every rack (by external id) in one phase, up to
/// `max_concurrent` at once, stopping at the first failure, to firmware
/// 2.0.0.
pub fn rollout_request(
    name: &str,
    racks: &[String],
    max_concurrent: i32,
) -> pb::CreateOperationRunRequest {
    let targets = racks
        .iter()
        .map(|r| pb::RackTarget {
            identifier: Some(pb::rack_target::Identifier::ExternalId(r.clone())),
            component_types: vec![],
        })
        .collect();
    pb::CreateOperationRunRequest {
        name: name.into(),
        description: String::new(),
        configuration: Some(pb::OperationRunConfiguration {
            selector: Some(pb::OperationRunSelector {
                selector: Some(pb::operation_run_selector::Selector::Percentage(
                    pb::PercentageSelector {
                        percentage: 100,
                        seed: "s".into(),
                    },
                )),
            }),
            options: Some(pb::OperationRunOptions {
                max_concurrent_targets: max_concurrent,
                safety_policy: Some(pb::OperationRunSafetyPolicy {
                    gates: vec![pb::OperationRunSafetyGate {
                        gate: Some(pb::operation_run_safety_gate::Gate::FailureCount(
                            pb::OperationRunFailureCountGate {
                                scope: 2,
                                failure_threshold_count: 1,
                            },
                        )),
                    }],
                }),
                ..Default::default()
            }),
            operation: Some(pb::OperationRunOperation {
                operation: Some(pb::operation_run_operation::Operation::UpgradeFirmware(
                    pb::UpgradeFirmwareRequest {
                        target_spec: Some(pb::OperationTargetSpec {
                            targets: Some(pb::operation_target_spec::Targets::Racks(
                                pb::RackTargets { targets },
                            )),
                        }),
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
