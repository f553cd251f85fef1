//! Credentials and TLS against sushy-tools' own emulator (unmodified):
//! HTTP basic auth checked by sushy against a bcrypt htpasswd file, wrong
//! or missing credentials, HTTPS with a self-signed certificate (verified by
//! default, accepted by an explicit flag or a trusted CA), and the password
//! never appearing in `Debug`, error texts or `tracing` output.

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

use rackflow_testkit::redfish as support;

use std::io::Write;
use std::sync::{Arc, Mutex};

use rackflow_rms::job::JobError;
use rackflow_rms::redfish::{
    Credentials, PowerState, RedfishError, RedfishNode, ResetType, TransportKind,
};
use support::{Emulator, Flavor, Options, fast_config};

const USER: &str = "rackflow";
const PASSWORD: &str = "Sup3r-S3cret!pw";
const WRONG: &str = "Wr0ng-guess!pw";

/// Everything `tracing` writes, at every level, while the guard lives.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// The emulator tests of this file run one at a time. tracing caches each
/// log call site's interest process-wide: a call site first reached by the
/// other test (no subscriber on its thread) while the capturing subscriber
/// was being installed could stay switched off for it, and the capture then
/// missed `redfish request` (seen once in CI).
static SERIAL: std::sync::LazyLock<tokio::sync::Mutex<()>> =
    std::sync::LazyLock::new(|| tokio::sync::Mutex::new(()));

fn capture_tracing() -> (Captured, tracing::subscriber::DefaultGuard) {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    // Every call site re-decides with this subscriber among the live ones.
    tracing::callsite::rebuild_interest_cache();
    (captured, guard)
}

fn base64(input: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn assert_hidden(what: &str, text: &str) {
    for secret in [
        PASSWORD.to_string(),
        WRONG.to_string(),
        base64(format!("{USER}:{PASSWORD}").as_bytes()),
        base64(format!("{USER}:{WRONG}").as_bytes()),
    ] {
        assert!(!text.contains(&secret), "{what} shows a secret: {text}");
    }
}

#[tokio::test]
async fn basic_auth_accepts_the_right_password_and_refuses_others() {
    let _serial = SERIAL.lock().await;
    let mut options = Options::new(Flavor::Sushy);
    options.auth = Some((USER.into(), PASSWORD.into()));
    let Some(emu) = Emulator::start(options).await else {
        return;
    };
    let (captured, _guard) = capture_tracing();

    let creds = Credentials::new(USER, PASSWORD);
    let node = RedfishNode::new(emu.client(Some(creds.clone()), fast_config()));
    assert_eq!(node.power_state().await.unwrap(), PowerState::Off);
    node.reset(&ResetType::On).await.unwrap();

    // sushy answers its alias "fake" with a 307 to the UUID: the redirect
    // keeps the credentials (same host), and the reset goes to the target
    // the redirected resource advertises.
    let alias = RedfishNode::with_system(
        emu.client(Some(creds.clone()), fast_config()),
        "/redfish/v1/Systems/fake",
    );
    assert!(alias.power_state().await.is_ok());
    alias.reset(&ResetType::ForceOff).await.unwrap();

    let wrong = RedfishNode::new(emu.client(Some(Credentials::new(USER, WRONG)), fast_config()));
    let err = wrong.power_state().await.unwrap_err();
    match &err {
        RedfishError::Unauthorized {
            status, message, ..
        } => {
            assert_eq!(*status, 401);
            assert_eq!(message, "Incorrect username or password");
        }
        other => panic!("expected Unauthorized, got {other:?}"),
    }
    assert_eq!(err.job_error(), JobError::Unauthenticated);
    assert!(!err.is_transient());
    assert_hidden("the wrong-password error", &err.to_string());
    assert_hidden("the wrong-password error's Debug", &format!("{err:?}"));

    let anonymous = RedfishNode::new(emu.client(None, fast_config()));
    match anonymous.reset(&ResetType::ForceOff).await.unwrap_err() {
        RedfishError::Unauthorized { message, .. } => {
            assert_eq!(message, "Authorization required")
        }
        other => panic!("expected Unauthorized, got {other:?}"),
    }

    // Credentials never show in Debug, nor in what tracing wrote, which did
    // record the requests.
    let shown = format!("{creds:?}");
    assert!(shown.contains("***"), "{shown}");
    assert_hidden("Credentials' Debug", &shown);
    assert_hidden("RedfishNode's Debug", &format!("{node:?} {wrong:?}"));
    let logs = captured.text();
    assert!(logs.contains("redfish request"), "nothing captured: {logs}");
    assert!(logs.contains("redfish reset accepted"), "{logs}");
    assert!(logs.contains("status=401"), "{logs}");
    assert_hidden("tracing output", &logs);
}

#[tokio::test]
async fn tls_verifies_by_default_and_trusts_a_self_signed_bmc_only_when_told() {
    let _serial = SERIAL.lock().await;
    let mut options = Options::new(Flavor::Sushy);
    options.tls = true;
    options.auth = Some((USER.into(), PASSWORD.into()));
    let Some(emu) = Emulator::start(options).await else {
        return;
    };
    assert!(emu.base_url.starts_with("https://"));
    let creds = || Some(Credentials::new(USER, PASSWORD));

    // Default: the self-signed certificate is refused at the handshake.
    let strict = RedfishNode::new(emu.client(creds(), fast_config()));
    let err = strict.power_state().await.unwrap_err();
    match &err {
        RedfishError::Transport { kind, message, .. } => {
            assert_eq!(*kind, TransportKind::Connect, "{err}");
            assert!(message.to_lowercase().contains("certificate"), "{message}");
        }
        other => panic!("expected a TLS transport error, got {other:?}"),
    }

    // Explicitly unverified.
    let mut config = fast_config();
    config.verify_tls = false;
    let lax = RedfishNode::new(emu.client(creds(), config));
    assert_eq!(lax.power_state().await.unwrap(), PowerState::Off);

    // Verified against the BMC's certificate as a trusted root.
    let mut config = fast_config();
    config.ca_cert_pem = emu.cert_pem.clone();
    let pinned = RedfishNode::new(emu.client(creds(), config));
    assert_eq!(pinned.power_state().await.unwrap(), PowerState::Off);
}

#[test]
fn base64_helper_matches_a_known_value() {
    // RFC 4648 test vectors, so the hidden-secret checks above look for the
    // header value a leak would really contain.
    assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    assert_eq!(base64(b"fooba"), "Zm9vYmE=");
    assert_eq!(base64(b"foob"), "Zm9vYg==");
    assert_eq!(
        base64(b"Aladdin:open sesame"),
        "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
    );
}
