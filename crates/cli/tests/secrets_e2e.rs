//! Firmware credentials end to end through the binary (issue 14): a data
//! key made with `rackflow secrets generate-key`, credentials sent from a
//! file with `firmware upgrade --authentication-data-file`, the task run
//! on the simulated fleet; neither the server's logs (at debug), nor the
//! database file, nor any command's output holds the plaintext; a key
//! rotation with `rackflow secrets rotate` re-seals what is stored.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{
    ServeChild, create_fast_default_rule, free_addr, import_generated_fleet, path_str, rackflow,
    rackflow_within, temp_path,
};

const SECRET: &str = "hunter2-e2e-SECRET-7f3a";

/// What the server logs: everything of ours at debug.
const DEBUG_LOG: &str = "debug,h2=info,hyper=info,tower=info,sqlx=debug";

fn config(dir: &Path, key: &Path, previous: Option<&Path>) -> PathBuf {
    let file = dir.join("serve.toml");
    let previous = previous.map_or(String::new(), |p| format!("\"{}\"", p.display()));
    std::fs::write(
        &file,
        format!(
            "[sim]\nfirmware_update_ms = 100\npower_ms = 10\njitter = 0.0\n\
             [secrets]\nkey_file = \"{}\"\nprevious_key_files = [{previous}]\n",
            key.display()
        ),
    )
    .expect("config");
    file
}

#[test]
fn credentials_stay_sealed_in_logs_database_and_answers_and_rotate() {
    let dir = tempfile::tempdir().expect("dir");
    let (key_a, key_b) = (dir.path().join("a.key"), dir.path().join("b.key"));
    for key in [&key_a, &key_b] {
        rackflow(None, &["secrets", "generate-key", "--out", path_str(key)]).ok();
    }
    // A key file is never overwritten.
    let again = rackflow(
        None,
        &["secrets", "generate-key", "--out", path_str(&key_a)],
    );
    assert_eq!(again.code, Some(1), "{}", again.stdout);
    let addr = free_addr();
    let s = Some(addr);
    let db = temp_path("secrets.db");
    let log = temp_path("secrets-serve.log");
    let server = ServeChild::start(
        addr,
        Some(&db),
        &config(dir.path(), &key_a, None),
        DEBUG_LOG,
        &log,
    );
    import_generated_fleet(s, 1);
    create_fast_default_rule(s, "50ms");

    let credentials = dir.path().join("credentials.json");
    std::fs::write(&credentials, format!("{{\"shared\": \"{SECRET}\"}}")).expect("creds");
    let submitted = rackflow(
        s,
        &[
            "firmware",
            "upgrade",
            "--rack-external-ids",
            "r-0001",
            "--authentication-data-file",
            path_str(&credentials),
            "-o",
            "json",
        ],
    )
    .ok();
    let task = submitted.json()["task_ids"][0]
        .as_str()
        .expect("task id")
        .to_string();
    let watched = rackflow_within(Duration::from_secs(60), s, &["task", "watch", &task]);
    assert_eq!(
        watched.code,
        Some(0),
        "{}\n{}",
        watched.stdout,
        watched.stderr
    );
    let mut outputs = vec![submitted.stdout, watched.stdout];
    outputs.push(
        rackflow(s, &["task", "get", &task, "-o", "json"])
            .ok()
            .stdout,
    );
    let audit = rackflow(s, &["audit", "list", "-o", "json"]).ok().stdout;
    assert!(audit.contains("<redacted>"), "{audit}");
    outputs.push(audit);

    // Rotation: B active, A still known; everything re-sealed under B.
    server.kill();
    let server = ServeChild::start(
        addr,
        Some(&db),
        &config(dir.path(), &key_b, Some(&key_a)),
        DEBUG_LOG,
        &log,
    );
    let rotated = rackflow(s, &["secrets", "rotate"]).ok().stdout;
    assert!(
        rotated.contains(": 1 re-sealed, 0 already current, 0 not re-sealed"),
        "{rotated}"
    );
    // B alone opens what is stored now.
    server.kill();
    let server = ServeChild::start(
        addr,
        Some(&db),
        &config(dir.path(), &key_b, None),
        DEBUG_LOG,
        &log,
    );
    let again = rackflow(s, &["secrets", "rotate", "-o", "json"])
        .ok()
        .json();
    assert_eq!(again["resealed"], 0);
    assert_eq!(again["already_current"], 1);
    server.kill();

    // Nowhere in clear: answers, logs (debug), the database and its WAL.
    for output in &outputs {
        assert!(!output.contains(SECRET), "{output}");
    }
    let log_text = std::fs::read_to_string(&log).expect("log");
    assert!(
        log_text.contains("firmware credentials are sealed at rest"),
        "{log_text}"
    );
    assert!(
        !log_text.contains(SECRET),
        "the server log holds the secret"
    );
    for suffix in ["", "-wal", "-shm"] {
        let file = format!("{}{suffix}", db.display());
        if let Ok(bytes) = std::fs::read(&file) {
            assert!(
                !String::from_utf8_lossy(&bytes).contains(SECRET),
                "{file} holds the secret in clear"
            );
        }
    }
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let _ = std::fs::remove_file(&log);
}
