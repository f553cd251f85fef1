//! The CLI over mTLS end to end (issue 14): `rackflow serve` as a process
//! with a certificate, a client CA and a role allowlist; the built binary
//! imports, creates, watches, pauses and resumes a run with client
//! certificates made at test time, and is refused what its role does not
//! allow. Also: audit mode lets a stranger through and logs it, and TLS
//! flags never fall back to plaintext.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::{
    Run, ServeChild, fast_firmware_rule, free_addr, path_str, rackflow_within, temp_path,
};
use rackflow_security::ClientTlsFiles;
use rackflow_testkit::pki::TestPki;

const VIEWER: &str = "spiffe://rackflow.test/sre/viewer";
const OPERATOR: &str = "spiffe://rackflow.test/sre/operator";
const ADMIN: &str = "spiffe://rackflow.test/sre/admin";
const STRANGER: &str = "spiffe://rackflow.test/sre/stranger";
const DEADLINE: Duration = Duration::from_secs(60);

/// `rackflow serve` with `config` (TOML) on a fresh database, logging at
/// info into a file the test reads.
struct Serve {
    _child: ServeChild,
    log: std::path::PathBuf,
}

impl Serve {
    fn start(addr: SocketAddr, config: &str) -> Serve {
        let file = temp_path("tls.toml");
        std::fs::write(&file, config).expect("write config");
        let log = temp_path("tls-serve.log");
        let child = ServeChild::start(addr, Some(&temp_path("tls.db")), &file, "info", &log);
        Serve { _child: child, log }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn config(pki: &TestPki, mode: &str) -> String {
    let tls = pki.server_tls(true);
    format!(
        "[sim]\nfirmware_update_ms = 200\npower_ms = 10\njitter = 0.0\n\
         [dispatcher]\npoll_interval_ms = 200\n\
         [tls]\ncert = \"{}\"\nkey = \"{}\"\nclient_ca = \"{}\"\n\
         [authorization]\nmode = \"{mode}\"\n\
         [authorization.identities]\n\"{VIEWER}\" = \"viewer\"\n\"{OPERATOR}\" = \"operator\"\n\"{ADMIN}\" = \"admin\"\n",
        tls.cert.expect("cert").display(),
        tls.key.expect("key").display(),
        tls.client_ca.expect("ca").display(),
    )
}

/// The binary against `https://addr` with `files`' flags.
fn as_client(addr: SocketAddr, files: &ClientTlsFiles, args: &[&str]) -> Run {
    let server = format!("https://{addr}");
    let mut all: Vec<&str> = vec!["--server", &server];
    let paths: Vec<(&str, String)> = [
        ("--tls-ca", &files.ca),
        ("--tls-cert", &files.cert),
        ("--tls-key", &files.key),
    ]
    .into_iter()
    .filter_map(|(flag, path)| path.as_deref().map(|p| (flag, path_str(p).to_string())))
    .collect();
    for (flag, path) in &paths {
        all.push(flag);
        all.push(path);
    }
    all.extend_from_slice(args);
    rackflow_within(DEADLINE, None, &all)
}

fn write_fleet(dir: &Path) -> std::path::PathBuf {
    let generated = rackflow_within(
        DEADLINE,
        None,
        &["fleet", "generate", "--racks", "4", "--seed", "5"],
    )
    .ok();
    let file = dir.join("fleet.json");
    std::fs::write(&file, generated.stdout).expect("write fleet");
    file
}

#[test]
fn the_cli_drives_a_run_over_mtls_and_each_role_gets_its_commands() {
    let pki = TestPki::new("cli");
    let addr = free_addr();
    let server = Serve::start(addr, &config(&pki, "enforce"));
    let (viewer, operator, admin) = (pki.client(VIEWER), pki.client(OPERATOR), pki.client(ADMIN));
    let dir = tempfile::tempdir().expect("dir");

    // Inventory and rules are an admin's.
    let fleet = write_fleet(dir.path());
    let refused = as_client(addr, &operator, &["fleet", "import", path_str(&fleet)]);
    assert_eq!(refused.code, Some(1), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("PermissionDenied")
            && refused.stderr.contains(OPERATOR)
            && refused.stderr.contains("v1.FlowExtensions/ImportRacks"),
        "{}",
        refused.stderr
    );
    as_client(addr, &admin, &["fleet", "import", path_str(&fleet)]).ok();
    let rule = dir.path().join("rule.yaml");
    std::fs::write(&rule, fast_firmware_rule("50ms", 1)).expect("rule");
    as_client(
        addr,
        &admin,
        &[
            "rule",
            "create",
            "--name",
            "fast",
            "--type",
            "firmware_control",
            "--code",
            "upgrade",
            "--definition",
            path_str(&rule),
            "--default",
        ],
    )
    .ok();

    // A viewer reads but may not create.
    let refused = as_client(
        addr,
        &viewer,
        &[
            "run",
            "create",
            "--name",
            "no",
            "--percentage",
            "100",
            "--failure-count",
            "3",
        ],
    );
    assert_eq!(refused.code, Some(1));
    assert!(
        refused.stderr.contains("PermissionDenied") && refused.stderr.contains(VIEWER),
        "{}",
        refused.stderr
    );

    // The operator creates, pauses, resumes and watches the run to its end.
    let id = as_client(
        addr,
        &operator,
        &[
            "run",
            "create",
            "--name",
            "tls-rollout",
            "--percentage",
            "100",
            "--max-concurrent",
            "2",
            "--failure-count",
            "3",
            "--phases",
            "count:1",
        ],
    )
    .ok()
    .stdout
    .trim()
    .to_string();
    let paused = as_client(addr, &operator, &["run", "pause", &id]).ok();
    assert!(
        paused.stdout.starts_with(&format!("run {id} paused")),
        "{}",
        paused.stdout
    );
    // The hint to continue carries the TLS flags it needs.
    assert!(
        paused.stdout.contains(&format!(
            "--tls-cert {}",
            path_str(operator.cert.as_deref().expect("cert"))
        )),
        "{}",
        paused.stdout
    );
    let refused = as_client(addr, &viewer, &["run", "resume", &id]);
    assert!(
        refused.stderr.contains("PermissionDenied"),
        "{}",
        refused.stderr
    );
    as_client(addr, &operator, &["run", "resume", &id]).ok();
    // Phase gate after the first rack; the viewer watches, the operator advances.
    let watch = as_client(addr, &viewer, &["run", "watch", &id, "--exit-on-pause"]);
    assert_eq!(watch.code, Some(3), "{}\n{}", watch.stdout, watch.stderr);
    as_client(
        addr,
        &operator,
        &["run", "advance", &id, "--expected-phase", "1"],
    )
    .ok();
    let watch = as_client(addr, &operator, &["run", "watch", &id]);
    assert_eq!(watch.code, Some(0), "{}\n{}", watch.stdout, watch.stderr);
    let run = as_client(addr, &viewer, &["run", "get", &id, "-o", "json"])
        .ok()
        .json();
    assert_eq!(run["status"], "completed", "{run:#}");
    // Who did the last control, and the whole trail of the run.
    let shown = as_client(addr, &viewer, &["run", "get", &id]).ok().stdout;
    assert!(
        shown.contains("Last control:") && shown.contains("finished by rackflow"),
        "{shown}"
    );
    let trail = as_client(
        addr,
        &viewer,
        &["audit", "list", "--run", &id, "-o", "json"],
    )
    .ok()
    .json();
    let seen: Vec<(String, String)> = trail
        .as_array()
        .expect("events")
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap_or_default().to_string(),
                e["actor"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("v1.Flow/CreateOperationRun", OPERATOR),
        ("v1.Flow/PauseOperationRun", OPERATOR),
        ("v1.Flow/ResumeOperationRun", OPERATOR),
        ("run/phase_gate", "rackflow"),
        ("v1.Flow/AdvanceOperationRunPhase", OPERATOR),
        ("run/finished", "rackflow"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(seen, expected, "{trail:#}");
    let table = as_client(addr, &viewer, &["audit", "list", "--since", "1h"])
        .ok()
        .stdout;
    assert!(
        table.contains("PermissionDenied") && table.contains(VIEWER),
        "{table}"
    );

    // No client certificate, or plaintext: refused before any handler.
    let anonymous = as_client(addr, &pki.anonymous_client(), &["version"]);
    assert_eq!(anonymous.code, Some(1), "{}", anonymous.stdout);
    let plain = rackflow_within(DEADLINE, Some(addr), &["version"]);
    assert_eq!(plain.code, Some(1), "{}", plain.stdout);
    // TLS flags with an http:// address are an error, not a downgrade.
    let downgrade = rackflow_within(
        DEADLINE,
        None,
        &[
            "--server",
            &format!("http://{addr}"),
            "--tls-ca",
            path_str(&pki.ca_pem),
            "version",
        ],
    );
    assert_eq!(downgrade.code, Some(1));
    assert!(
        downgrade.stderr.contains("https://"),
        "{}",
        downgrade.stderr
    );
    // Denials are logged with the identity and the RPC.
    let log = server.log_text();
    assert!(
        log.contains("authorization denied the call") && log.contains(VIEWER),
        "{log}"
    );
}

#[test]
fn audit_mode_lets_a_stranger_through_and_logs_it() {
    let pki = TestPki::new("cli-audit");
    let addr = free_addr();
    let server = Serve::start(addr, &config(&pki, "audit"));
    let stranger = pki.client(STRANGER);
    let rules = as_client(addr, &stranger, &["rule", "list"]);
    assert_eq!(rules.code, Some(0), "{}", rules.stderr);
    let mut lines = server.log_text();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !lines.contains("authorization (audit)") && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        lines = server.log_text();
    }
    let line = lines
        .lines()
        .find(|l| l.contains("authorization (audit)"))
        .unwrap_or_else(|| panic!("no audit line:\n{lines}"));
    assert!(
        line.contains(STRANGER) && line.contains("ListOperationRules"),
        "{line}"
    );
}

/// Issue 31 item 6: connection errors say what to do — plaintext against a
/// TLS server, TLS without a client certificate against mTLS, TLS against a
/// plaintext server — and ask whether `rackflow serve` runs only when no
/// TCP connection could be made.
#[test]
fn connection_errors_say_what_to_do() {
    const NOT_RUNNING: &str = "is `rackflow serve` running?";
    let pki = TestPki::new("cli-diagnose");
    let addr = free_addr();
    let _server = Serve::start(addr, &config(&pki, "enforce"));

    let plain = rackflow_within(
        DEADLINE,
        None,
        &["--server", &format!("http://{addr}"), "version"],
    );
    assert_eq!(plain.code, Some(1), "{}", plain.stderr);
    assert!(
        plain.stderr.contains(&format!(
            "the server at {addr} speaks TLS: use https://{addr}"
        )),
        "{}",
        plain.stderr
    );
    assert!(!plain.stderr.contains(NOT_RUNNING), "{}", plain.stderr);

    let anonymous = as_client(addr, &pki.anonymous_client(), &["version"]);
    assert_eq!(anonymous.code, Some(1), "{}", anonymous.stderr);
    assert!(
        anonymous.stderr.contains(&format!("the server at {addr} "))
            && anonymous.stderr.contains("requires a client certificate")
            && anonymous.stderr.contains("--tls-cert")
            && anonymous.stderr.contains("--tls-key"),
        "{}",
        anonymous.stderr
    );
    assert!(
        !anonymous.stderr.contains(NOT_RUNNING),
        "{}",
        anonymous.stderr
    );

    // TLS against a plaintext server.
    let plain_addr = free_addr();
    let plain_config = temp_path("plain.toml");
    std::fs::write(&plain_config, "").expect("write config");
    let _plain_server = ServeChild::start(
        plain_addr,
        Some(&temp_path("plain.db")),
        &plain_config,
        "info",
        &temp_path("plain.log"),
    );
    let tls_to_plain = as_client(plain_addr, &pki.client(VIEWER), &["version"]);
    assert_eq!(tls_to_plain.code, Some(1), "{}", tls_to_plain.stderr);
    assert!(
        tls_to_plain
            .stderr
            .contains(&format!("does not speak TLS: use http://{plain_addr}")),
        "{}",
        tls_to_plain.stderr
    );

    // Nothing listens: the one case for the question.
    let nobody = free_addr();
    let refused = rackflow_within(DEADLINE, Some(nobody), &["version"]);
    assert_eq!(refused.code, Some(1), "{}", refused.stderr);
    assert!(refused.stderr.contains(NOT_RUNNING), "{}", refused.stderr);
}
