//! The cost of TLS (issue 14): `Version` and `CreateOperationRun` p50 over
//! mTLS against the same calls in plaintext, measured in one run, each on
//! one long-lived connection (the handshake is paid once per connection;
//! its time is printed apart). Rerun with
//! `cargo bench -p rackflow-server --bench tls`.
//!
//! Environment: `BENCH_VERSIONS` (default 2000), `BENCH_CREATES` (default
//! 200). The two servers alternate call by call, so drift hits both.

use std::time::{Duration, Instant};

use rackflow_api::v1 as pb;
use rackflow_security::Role;
use rackflow_server::Config;
use rackflow_testkit::pki::{TestPki, tls_channel};
use rackflow_testkit::{Backend, FlowClient, TestServer, fixture_fleet, run_request};
use tonic::transport::Channel;

const IDENTITY: &str = "spiffe://rackflow.bench/operator";

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn timed<F: std::future::Future>(f: F) -> Duration {
    let start = Instant::now();
    f.await;
    start.elapsed()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(bench());
}

async fn bench() {
    let versions = env_count("BENCH_VERSIONS", 2000);
    let creates = env_count("BENCH_CREATES", 200);
    let pki = TestPki::new("bench");
    let mut plain_config = Config::default();
    plain_config.dispatcher.enabled = false;
    plain_config.schedules.enabled = false;
    let mut tls_config = plain_config.clone();
    tls_config.tls = pki.server_tls(true);
    tls_config.authorization.identities = [(IDENTITY.to_string(), Role::Admin)].into();

    let plain = TestServer::start_with(Backend::Sqlite, plain_config)
        .await
        .expect("plaintext server");
    let secure = TestServer::start_with(Backend::Sqlite, tls_config)
        .await
        .expect("mTLS server");
    let plain_channel = Channel::from_shared(format!("http://{}", plain.addr))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let files = pki.client(IDENTITY);
    let mut handshakes = Vec::new();
    for _ in 0..20 {
        handshakes
            .push(timed(async { tls_channel(secure.addr, &files).await.expect("mTLS") }).await);
    }
    let tls_channel = tls_channel(secure.addr, &files)
        .await
        .expect("mTLS connect");
    let mut clients = [FlowClient::new(plain_channel), FlowClient::new(tls_channel)];
    for client in &mut clients {
        fixture_fleet(client, 20).await;
    }

    let mut version = [Vec::new(), Vec::new()];
    for _ in 0..versions {
        for (i, client) in clients.iter_mut().enumerate() {
            version[i].push(
                timed(async {
                    client
                        .version(pb::VersionRequest {})
                        .await
                        .expect("version");
                })
                .await,
            );
        }
    }
    let mut create = [Vec::new(), Vec::new()];
    for n in 0..creates {
        for (i, client) in clients.iter_mut().enumerate() {
            let request = run_request(&format!("bench-{n}"), 100, "s", "o", 2);
            create[i].push(
                timed(async {
                    client.create_operation_run(request).await.expect("create");
                })
                .await,
            );
        }
    }
    let [v_plain, v_tls] = version.map(p50);
    let [c_plain, c_tls] = create.map(p50);
    println!("TLS cost, one connection each, calls alternating (SQLite, 20 racks)");
    println!(
        "  mTLS connect (handshake)     p50 {:8.3} ms over 20 connections",
        ms(p50(handshakes))
    );
    println!(
        "  Version             plain p50 {:8.3} ms   mTLS p50 {:8.3} ms   ratio {:.3}   ({versions} calls each)",
        ms(v_plain),
        ms(v_tls),
        ms(v_tls) / ms(v_plain)
    );
    println!(
        "  CreateOperationRun  plain p50 {:8.3} ms   mTLS p50 {:8.3} ms   ratio {:.3}   ({creates} calls each)",
        ms(c_plain),
        ms(c_tls),
        ms(c_tls) / ms(c_plain)
    );
    plain.stop().await;
    secure.stop().await;
}
