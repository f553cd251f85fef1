//! A server whose log reader goes away keeps serving (issue 31 item 1):
//! `rackflow serve 2>&1 | tee log`, then the `tee` dies. Every log line
//! written afterwards fails with EPIPE; the process must keep answering and
//! still stop on SIGTERM. Real processes, stdout and stderr on one pipe
//! whose read end the test closes; `RUST_LOG=debug` so that h2's own
//! connection tasks log on every call.

mod common;

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_addr, rackflow, temp_path};

/// Spawns `cmd` with stdout and stderr on one pipe, reads it until a line
/// contains `ready`, then closes the read end.
fn spawn_then_close_log(mut cmd: Command, ready: &str) -> Child {
    let (reader, writer) = std::io::pipe().expect("pipe");
    let child = cmd
        .env("RUST_LOG", "debug")
        .env_remove("RACKFLOW_SERVER")
        .env_remove("DATABASE_URL")
        .env_remove("RACKFLOW_LISTEN")
        .env_remove("RACKFLOW_DB")
        .stdin(Stdio::null())
        .stdout(writer.try_clone().expect("clone pipe"))
        .stderr(writer)
        .spawn()
        .expect("spawn server");
    // The parent's copies of the write end are gone with `cmd`.
    drop(cmd);
    let mut lines = BufReader::new(reader).lines();
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < give_up, "no {ready:?} in the log");
        match lines.next() {
            Some(Ok(line)) if line.contains(ready) => break,
            Some(_) => {}
            None => panic!("the server exited before {ready:?}"),
        }
    }
    // Closing the read end: every later write of the server fails (EPIPE).
    drop(lines);
    child
}

/// SIGTERM, then waits (bounded) for the process to exit; its exit status.
fn terminate(child: &mut Child) -> std::process::ExitStatus {
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -TERM failed");
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > give_up {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server ignored SIGTERM with its log pipe closed");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A flow-server call that goes through h2 and the store.
fn flow_calls_succeed(addr: SocketAddr) {
    for _ in 0..5 {
        rackflow(Some(addr), &["version"]).ok();
        rackflow(Some(addr), &["rack", "list", "--output", "json"]).ok();
    }
}

#[test]
fn flow_server_keeps_serving_and_stops_after_its_log_reader_dies() {
    let addr = free_addr();
    let db = temp_path("pipe.db");
    let config = temp_path("pipe.toml");
    std::fs::write(&config, "").expect("write config");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rackflow"));
    cmd.args(["serve", "--listen", &addr.to_string(), "--db"])
        .arg(&db)
        .arg("--config")
        .arg(&config);
    let mut child = spawn_then_close_log(cmd, common::SERVE_LISTENING);
    flow_calls_succeed(addr);
    let status = terminate(&mut child);
    assert!(status.success(), "serve exited with {status}");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let _ = std::fs::remove_file(&config);
}

#[test]
fn rack_manager_keeps_serving_and_stops_after_its_log_reader_dies() {
    use rackflow_api::rack_manager::rack_manager_client::RackManagerClient;

    let addr = free_addr();
    let metrics = free_addr();
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("rms.toml");
    let firmware = dir.path().join("firmware");
    std::fs::create_dir_all(&firmware).expect("firmware dir");
    std::fs::write(
        &config,
        format!(
            "[workflows]\nfirmware_dir = {:?}\n",
            firmware.to_str().expect("utf-8 path")
        ),
    )
    .expect("write rms config");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rackflow"));
    cmd.args([
        "rms",
        "serve",
        "--listen",
        &addr.to_string(),
        "--metrics-listen",
        &metrics.to_string(),
        "--config",
    ])
    .arg(&config);
    let mut child = spawn_then_close_log(cmd, "rack manager listening");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        for _ in 0..5 {
            let mut client = RackManagerClient::connect(format!("http://{addr}"))
                .await
                .expect("connect to the rack manager");
            let listed = tokio::time::timeout(
                Duration::from_secs(10),
                client.list_racks(rackflow_api::rack_manager::ListRacksRequest::default()),
            )
            .await
            .expect("the rack manager answers in time");
            assert!(listed.is_ok(), "ListRacks failed: {listed:?}");
        }
    });
    let status = terminate(&mut child);
    assert!(status.success(), "rms serve exited with {status}");
}

/// `--log-format json`: every line the server writes is one JSON object
/// with its timestamp, level, target and message, the event's fields
/// flattened beside them (not Rust `Debug` text).
#[test]
fn json_logs_are_one_object_per_line() {
    let addr = free_addr();
    let db = temp_path("json-log.db");
    let config = temp_path("json-log.toml");
    std::fs::write(&config, "").expect("write config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rackflow"))
        .args([
            "serve",
            "--log-format",
            "json",
            "--listen",
            &addr.to_string(),
            "--db",
        ])
        .arg(&db)
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "info,rackflow_engine=debug")
        .env_remove("RACKFLOW_SERVER")
        .env_remove("DATABASE_URL")
        .env_remove("RACKFLOW_LISTEN")
        .env_remove("RACKFLOW_DB")
        .env_remove("RACKFLOW_LOG_FORMAT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let stderr = child.stderr.take().expect("stderr");
    // Lines through a channel, so that a line that never comes fails the
    // test at a deadline instead of hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let give_up = Instant::now() + Duration::from_secs(60);
    let next_object = || {
        let wait = give_up.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(wait)
            .expect("the awaited log line within 60 s")
            .expect("read log");
        let object: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
        for key in ["timestamp", "level", "target", "message"] {
            assert!(object.get(key).is_some(), "no {key} in {line}");
        }
        object
    };
    let listening = loop {
        let object = next_object();
        if object["message"] == common::SERVE_LISTENING {
            break object;
        }
    };
    assert_eq!(listening["level"], "INFO");
    assert_eq!(
        listening["store"], "sqlite",
        "fields are flattened: {listening}"
    );
    // A plain address, not Rust's `Some(…)`.
    assert_eq!(listening["addr"], addr.to_string(), "{listening}");
    // One access line per RPC: method, code, caller, peer, latency.
    rackflow(Some(addr), &["version"]).ok();
    let access = loop {
        let object = next_object();
        if object["target"] == "rackflow::access" {
            break object;
        }
    };
    assert_eq!(access["rpc"], "/v1.Flow/Version", "{access}");
    assert_eq!(access["code"], "Ok", "{access}");
    assert_eq!(access["caller"], "anonymous", "{access}");
    let peer = access["peer"].as_str().expect("peer");
    assert!(peer.parse::<SocketAddr>().is_ok(), "{access}");
    assert!(access["elapsed_ms"].as_f64().is_some(), "{access}");
    // A task's lines carry its id, rack and operation (the task's span).
    common::import_fleet(Some(addr), 1);
    let on = rackflow(
        Some(addr),
        &["power", "on", "--rack-external-ids", "r-0001", "-o", "json"],
    )
    .ok()
    .json();
    let task_id = on["task_ids"][0].as_str().expect("task id").to_string();
    let in_task = loop {
        let object = next_object();
        if object["span"]["name"] == "task" && object["span"]["task_id"] == task_id.as_str() {
            break object;
        }
    };
    assert_eq!(
        in_task["span"]["operation"], "power_control/power_on",
        "{in_task}"
    );
    assert!(
        in_task["span"]["rack_id"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{in_task}"
    );
    let status = terminate(&mut child);
    assert!(status.success(), "serve exited with {status}");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let _ = std::fs::remove_file(&config);
}
