//! Test support for the Redfish back end: runs a Redfish emulator on
//! 127.0.0.1 for one test and stops it when dropped.
//!
//! Two emulators, both from sushy-tools 2.2.0 (PyPI, OpenStack's code):
//! - `Flavor::Sushy`: `sushy-emulator --fake` exactly as shipped;
//! - `Flavor::Firmware`: `sushy_fw.py` beside this file, OUR extension of
//!   sushy's Flask app with an UpdateService, FirmwareInventory and
//!   TaskService (its module comment says what it adds), run with the same
//!   arguments and the python of the sushy-tools installation. It lives in
//!   this crate (`crates/testkit/sushy_fw.py`).
//!
//! Each emulator gets a free port and a fresh temp dir holding its config
//! (`SUSHY_EMULATOR_STATE_DIR`, and the htpasswd file or TLS key when
//! asked). The binary is `$SUSHY_EMULATOR`, else `sushy-emulator` on PATH,
//! else the virtualenv `scripts/redfish-emulator.sh` installs. When none is
//! found a test fails if `CI` is set and is skipped with a message if not.
use std::fs;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rackflow_rms::redfish::{Credentials, RedfishClient, RedfishConfig, RedfishNode};
use tempfile::TempDir;

use crate::wait::wait_until;

/// Where sushy-tools is installed.
#[derive(Debug, Clone)]
pub struct Sushy {
    pub emulator: PathBuf,
    /// The interpreter that runs `emulator` (its shebang), for our
    /// extension and for bcrypt.
    pub python: PathBuf,
}

/// Finds sushy-tools, or decides the test is skipped (`None`) or failed
/// (panic, under `CI`).
pub fn sushy() -> Option<Sushy> {
    let emulator = match std::env::var_os("SUSHY_EMULATOR") {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(
                path.is_file(),
                "SUSHY_EMULATOR={} is not a file",
                path.display()
            );
            Some(path)
        }
        None => on_path("sushy-emulator").or_else(default_venv),
    };
    let Some(emulator) = emulator else {
        if std::env::var_os("CI").is_some() {
            panic!(
                "sushy-emulator not found and CI is set: install it with \
                 `export SUSHY_EMULATOR=\"$(scripts/redfish-emulator.sh)\"`"
            );
        }
        // Straight to stderr: libtest captures `eprintln!`, and a skip must
        // be seen.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: sushy-emulator not found (set SUSHY_EMULATOR or run \
             scripts/redfish-emulator.sh); this Redfish emulator test did not run"
        );
        return None;
    };
    let python = interpreter_of(&emulator);
    Some(Sushy { emulator, python })
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

fn default_venv() -> Option<PathBuf> {
    let venv = match std::env::var_os("RACKFLOW_SUSHY_VENV") {
        Some(v) => PathBuf::from(v),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".cache/rackflow/sushy-tools-2.2.0"),
    };
    let path = venv.join("bin/sushy-emulator");
    path.is_file().then_some(path)
}

/// The python of a console script: its `#!` line, else a sibling python.
fn interpreter_of(script: &Path) -> PathBuf {
    let first_line = fs::read_to_string(script)
        .ok()
        .and_then(|t| t.lines().next().map(str::to_string))
        .unwrap_or_default();
    if let Some(shebang) = first_line.strip_prefix("#!") {
        let mut words = shebang.split_whitespace();
        match (words.next(), words.next()) {
            (Some(env), Some(program)) if env.ends_with("/env") => return PathBuf::from(program),
            (Some(interpreter), _) => return PathBuf::from(interpreter),
            _ => {}
        }
    }
    let dir = script.parent().unwrap_or(Path::new("."));
    for name in ["python3", "python"] {
        if dir.join(name).is_file() {
            return dir.join(name);
        }
    }
    PathBuf::from("python3")
}

/// Which emulator to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// sushy-tools as shipped.
    Sushy,
    /// sushy-tools plus our firmware extension (`sushy_fw.py`).
    Firmware,
}

#[derive(Debug, Clone)]
pub struct Options {
    pub flavor: Flavor,
    /// Require HTTP basic auth with this user and password (bcrypt htpasswd).
    pub auth: Option<(String, String)>,
    /// Serve HTTPS with a fresh self-signed certificate for 127.0.0.1.
    pub tls: bool,
    /// Extra environment (the extension's switches).
    pub env: Vec<(String, String)>,
}

impl Options {
    pub fn new(flavor: Flavor) -> Self {
        Options {
            flavor,
            auth: None,
            tls: false,
            env: Vec::new(),
        }
    }
}

/// `sushy_fw.py` at the root of this crate.
fn extension_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sushy_fw.py")
}

/// A running emulator; killed on drop.
pub struct Emulator {
    child: Child,
    pub base_url: String,
    /// The self-signed certificate (PEM) when serving TLS.
    pub cert_pem: Option<Vec<u8>>,
    pub sushy: Sushy,
    log: PathBuf,
    // Last, so the process is gone before its directory is removed.
    dir: TempDir,
}

impl Emulator {
    /// Starts an emulator and waits until it answers; `None` when the test
    /// is skipped (see [`sushy`]).
    pub async fn start(options: Options) -> Option<Emulator> {
        let sushy = sushy()?;
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let state_dir = dir.path().join("state");
        let mut config = format!(
            "SUSHY_EMULATOR_STATE_DIR = {:?}\n",
            state_dir.to_str().expect("utf-8 temp path")
        );
        if let Some((user, password)) = &options.auth {
            let htpasswd = dir.path().join("htpasswd");
            let line = bcrypt_line(&sushy.python, user, password);
            fs::write(&htpasswd, format!("{line}\n")).expect("write htpasswd");
            config.push_str(&format!(
                "SUSHY_EMULATOR_AUTH_FILE = {:?}\n",
                htpasswd.to_str().expect("utf-8 temp path")
            ));
        }
        let mut cert_pem = None;
        if options.tls {
            let (cert, key) = self_signed_cert(dir.path());
            config.push_str(&format!(
                "SUSHY_EMULATOR_SSL_CERT = {:?}\nSUSHY_EMULATOR_SSL_KEY = {:?}\n",
                cert.to_str().expect("utf-8 temp path"),
                key.to_str().expect("utf-8 temp path")
            ));
            cert_pem = Some(fs::read(&cert).expect("read cert"));
        }
        let config_path = dir.path().join("emulator.conf");
        fs::write(&config_path, config).expect("write emulator config");

        let mut command = match options.flavor {
            Flavor::Sushy => Command::new(&sushy.emulator),
            Flavor::Firmware => {
                let mut c = Command::new(&sushy.python);
                c.arg(extension_script());
                c
            }
        };
        let log = dir.path().join("emulator.log");
        let log_file = fs::File::create(&log).expect("emulator log");
        command
            .args([
                "--fake",
                "-i",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "--config",
            ])
            .arg(&config_path)
            .env("SUSHY_EMULATOR_STATE_DIR", &state_dir)
            .envs(options.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("log fd"))
            .stderr(log_file);
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
        let scheme = if options.tls { "https" } else { "http" };
        let mut emulator = Emulator {
            child,
            base_url: format!("{scheme}://127.0.0.1:{port}"),
            cert_pem,
            sushy,
            log,
            dir,
        };
        emulator.wait_ready().await;
        Some(emulator)
    }

    /// The emulator is a separate process with nothing to follow: probe
    /// its service root until it answers (bounded), failing at once if it
    /// exits.
    async fn wait_ready(&mut self) {
        let probe = reqwest::Client::builder()
            .danger_accept_invalid_certs(true)
            .timeout(Duration::from_secs(2))
            .build()
            .expect("probe client");
        let url = format!("{}/redfish/v1/", self.base_url);
        let what = format!("the emulator to answer on {url}");
        let child = std::sync::Mutex::new(&mut self.child);
        let log = self.log.clone();
        wait_until(
            &what,
            Duration::from_secs(30),
            Duration::from_millis(100),
            || {
                let exited = child
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .try_wait()
                    .expect("try_wait");
                if let Some(status) = exited {
                    panic!(
                        "emulator exited with {status} before answering:\n{}",
                        fs::read_to_string(&log).unwrap_or_default()
                    );
                }
                let request = probe.get(&url).send();
                async move {
                    match request.await {
                        Ok(answer) if answer.status().is_success() => Some(()),
                        _ => None,
                    }
                }
            },
            || fs::read_to_string(&log).unwrap_or_default(),
        )
        .await;
    }

    /// The emulator's output so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn client(&self, credentials: Option<Credentials>, config: RedfishConfig) -> RedfishClient {
        RedfishClient::new(&self.base_url, credentials, config).expect("client")
    }

    /// A node on this emulator with short test timings.
    pub fn node(&self) -> RedfishNode {
        RedfishNode::new(self.client(None, fast_config()))
    }

    /// The emulator's address (plain HTTP emulators).
    pub fn addr(&self) -> std::net::SocketAddr {
        self.base_url
            .strip_prefix("http://")
            .and_then(|a| a.parse().ok())
            .expect("emulator address")
    }

    /// The rack-manager node whose BMC is this emulator (no credentials).
    pub fn node_info(
        &self,
        rack: &str,
        node: &str,
        node_type: rackflow_api::rack_manager::NodeType,
    ) -> rackflow_api::rack_manager::NodeInfo {
        let addr = self.addr();
        rackflow_api::rack_manager::NodeInfo {
            node_id: node.to_owned(),
            rack_id: rack.to_owned(),
            r#type: Some(node_type as i32),
            bmc_endpoint: Some(crate::rms::endpoint(
                &addr.ip().to_string(),
                u32::from(addr.port()),
                None,
            )),
            ..Default::default()
        }
    }

    /// `(time, ResetType)` of every reset the emulator received
    /// (`GET /rackflow/resets`), oldest first.
    pub async fn resets(&self) -> Vec<(f64, String)> {
        let log: serde_json::Value = reqwest::get(format!("{}/rackflow/resets", self.base_url))
            .await
            .expect("reset log")
            .json()
            .await
            .expect("reset log JSON");
        log.as_array()
            .expect("a list")
            .iter()
            .map(|r| {
                (
                    r["time"].as_f64().expect("time"),
                    r["reset_type"].as_str().expect("reset type").to_owned(),
                )
            })
            .collect()
    }

    /// Sets what one of the emulator's leak detectors reads (`OK`,
    /// `Warning`, `Critical`) through `POST /rackflow/leak`.
    pub async fn set_leak(&self, detector: &str, state: &str) {
        let answer = reqwest::Client::new()
            .post(format!("{}/rackflow/leak", self.base_url))
            .json(&serde_json::json!({"detector": detector, "state": state}))
            .send()
            .await
            .expect("POST /rackflow/leak");
        assert_eq!(answer.status().as_u16(), 204, "{:?}", answer.text().await);
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Short intervals for tests: emulator tasks last about a second.
pub fn fast_config() -> RedfishConfig {
    RedfishConfig {
        request_timeout: Duration::from_secs(15),
        connect_timeout: Duration::from_secs(5),
        task_poll_interval: Duration::from_millis(50),
        task_timeout: Duration::from_secs(20),
        task_status_error_grace: Duration::from_secs(2),
        ..RedfishConfig::default()
    }
}

/// A serving of files over plain HTTP on 127.0.0.1 (python's http.server),
/// standing in for the image server a BMC downloads a SimpleUpdate from.
pub struct FileServer {
    child: Child,
    pub base_url: String,
    pub dir: TempDir,
}

impl FileServer {
    pub async fn start(python: &Path) -> FileServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let child = Command::new(python)
            .args([
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                &port.to_string(),
                "--directory",
            ])
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start http.server");
        let server = FileServer {
            child,
            base_url: format!("http://127.0.0.1:{port}"),
            dir,
        };
        // A separate process: probe its port until it listens (bounded).
        wait_until(
            "http.server to listen",
            Duration::from_secs(15),
            Duration::from_millis(50),
            || async move {
                tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .ok()
                    .map(drop)
            },
            String::new,
        )
        .await;
        server
    }

    /// Writes a file and returns its URL.
    pub fn put(&self, name: &str, contents: &str) -> String {
        fs::write(self.dir.path().join(name), contents).expect("write served file");
        format!("{}/{name}", self.base_url)
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// An htpasswd line with a bcrypt hash, made by the bcrypt sushy itself
/// uses to check it.
fn bcrypt_line(python: &Path, user: &str, password: &str) -> String {
    let out = Command::new(python)
        .args([
            "-c",
            "import bcrypt, sys; print(bcrypt.hashpw(sys.argv[1].encode(), bcrypt.gensalt(4)).decode())",
            password,
        ])
        .output()
        .expect("run python bcrypt");
    assert!(
        out.status.success(),
        "bcrypt failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hash = String::from_utf8(out.stdout).expect("utf-8 hash");
    format!("{user}:{}", hash.trim())
}

/// A self-signed end-entity certificate for 127.0.0.1 (openssl CLI).
fn self_signed_cert(dir: &Path) -> (PathBuf, PathBuf) {
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-addext",
            "basicConstraints=critical,CA:FALSE",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("run openssl (needed for the TLS test)");
    assert!(
        out.status.success(),
        "openssl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}
