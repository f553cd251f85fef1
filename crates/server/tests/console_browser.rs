//! The web console in a real browser: headless Chromium driven through
//! chromedriver (WebDriver). A rollout over the simulated fleet stops at
//! its phase gate and the run page shows it paused; Advance (confirmed in
//! the browser's dialog) moves it on and the page shows the next phase
//! without a reload (the live stream); a failed rack's cell opens that
//! rack's task report.
//!
//! Needs `chromedriver` and `chromium` (Debian's `chromium-driver` and
//! `chromium`): `CHROMEDRIVER` / `CHROMIUM` or the PATH. Without them the
//! test is skipped with a message — and fails when `CI` is set.
//! `RACKFLOW_SCREENSHOTS=DIR` (absolute: tests run in the crate's directory)
//! saves the pages it visits as PNGs (the
//! screenshots in docs/console/ come from here).

// Test helpers may unwrap: the panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use rackflow_api::v1 as pb;
use rackflow_engine::sim::{FaultEffect, FaultOperation, SimFault};
use rackflow_testkit as common;
use rackflow_testkit::{Backend, TestServer, fixture_fleet};

const DEADLINE: Duration = Duration::from_secs(60);

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// chromedriver and chromium, or a skip (a failure under `CI`).
fn browser() -> Option<(PathBuf, PathBuf)> {
    let driver = std::env::var_os("CHROMEDRIVER")
        .map(PathBuf::from)
        .or_else(|| on_path("chromedriver"));
    let chromium = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| on_path("chromium"))
        .or_else(|| on_path("chromium-browser"));
    match (driver, chromium) {
        (Some(d), Some(c)) => Some((d, c)),
        _ if std::env::var_os("CI").is_some() => panic!(
            "chromedriver / chromium not found and CI is set: \
             apt-get install chromium chromium-driver"
        ),
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: chromedriver / chromium not found (apt-get install chromium \
                 chromium-driver); the console's browser test did not run"
            );
            None
        }
    }
}

/// A chromedriver process on a free loopback port; killed on drop.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    async fn start(path: &PathBuf) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        // Its own process group: dropping the driver kills chromium too,
        // even when the test panicked before closing the session.
        let child = Command::new(path)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", path.display()));
        let give_up = tokio::time::Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                tokio::time::Instant::now() < give_up,
                "chromedriver did not listen on {port}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    async fn session(&self, chromium: &PathBuf) -> Client {
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,1000"],
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("WebDriver session: {e}"))
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The whole group: chromedriver and the browsers it started.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn screenshot(client: &Client, name: &str) {
    let Some(dir) = std::env::var_os("RACKFLOW_SCREENSHOTS") else {
        return;
    };
    let png = client.screenshot().await.unwrap();
    let path = PathBuf::from(dir).join(format!("{name}.png"));
    std::fs::write(&path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// The live summary's `data-*` attribute, as the page shows it now.
async fn summary(client: &Client, attribute: &str) -> String {
    client
        .find(Locator::Css("#live .summary"))
        .await
        .unwrap()
        .attr(attribute)
        .await
        .unwrap()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advance_from_the_run_page_and_open_a_failed_racks_report() {
    let Some((driver_path, chromium)) = browser() else {
        return;
    };
    let console_addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    let mut config = rackflow_server::Config::default();
    config.console.enabled = true;
    config.console.listen = console_addr;
    config.sim.firmware_update_ms = 300;
    config.sim.jitter = 0.0;
    // Rack 1's compute trays fail their update, whichever phase it is in.
    config.sim.faults = vec![SimFault {
        rack: Some("r-0001".into()),
        component_type: None,
        component: None,
        operation: FaultOperation::Firmware,
        effect: FaultEffect::Fail,
    }];
    let mut s = TestServer::start_with(Backend::Sqlite, config)
        .await
        .unwrap();
    fixture_fleet(&mut s.client, 6).await;
    // One attempt per step: the failed rack fails at once, no retries.
    common::create_fast_firmware_rule(&mut s.client, &["Compute", "NvSwitch"], "20ms").await;
    // Two phases; a gate the one failure does not trip.
    let mut req = common::run_request("console", 100, "s", "o", 2);
    common::options(&mut req).safety_policy = Some(pb::OperationRunSafetyPolicy {
        gates: vec![pb::OperationRunSafetyGate {
            gate: Some(pb::operation_run_safety_gate::Gate::FailureCount(
                pb::OperationRunFailureCountGate {
                    scope: pb::OperationRunSafetyGateScope::CumulativeRun as i32,
                    failure_threshold_count: 5,
                },
            )),
        }],
    });
    let id = s.run_to_phase_gate(req, DEADLINE).await;

    let driver = Driver::start(&driver_path).await;
    let client = driver.session(&chromium).await;
    let base = format!("http://{console_addr}");
    client.goto(&format!("{base}/runs")).await.unwrap();
    screenshot(&client, "runs").await;
    client
        .find(Locator::LinkText("console"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    client
        .wait()
        .at_most(DEADLINE)
        .for_element(Locator::Css("#live .summary"))
        .await
        .unwrap();
    assert_eq!(summary(&client, "data-status").await, "paused");
    assert_eq!(summary(&client, "data-phase").await, "0");
    let reason = client.find(Locator::Css("#live .reason")).await.unwrap();
    assert!(
        reason.text().await.unwrap().contains("phase gate"),
        "the pause reason is shown"
    );
    screenshot(&client, "run-paused").await;

    // A marker that a reload would wipe.
    client
        .execute("window.__rackflowMarker = 'no reload';", vec![])
        .await
        .unwrap();
    let advance = client
        .find(Locator::Css("button[data-action='advance']"))
        .await
        .unwrap();
    assert_eq!(
        advance
            .attr("data-expected-phase")
            .await
            .unwrap()
            .as_deref(),
        Some("1")
    );
    advance.click().await.unwrap();
    // The browser asks first; the run moves only once confirmed.
    client.accept_alert().await.unwrap();
    client
        .wait()
        .at_most(DEADLINE)
        .for_element(Locator::Css("#live .summary[data-phase='1']"))
        .await
        .unwrap();
    let marker = client
        .execute("return window.__rackflowMarker || null;", vec![])
        .await
        .unwrap();
    assert_eq!(
        marker,
        serde_json::json!("no reload"),
        "the page was reloaded"
    );
    // Then the live stream carries the run to its end.
    client
        .wait()
        .at_most(DEADLINE)
        .for_element(Locator::Css(
            "#live .summary[data-status='completed_with_failures']",
        ))
        .await
        .unwrap();
    assert_eq!(
        client
            .execute("return window.__rackflowMarker || null;", vec![])
            .await
            .unwrap(),
        serde_json::json!("no reload")
    );
    screenshot(&client, "run-finished").await;
    // The timeline names the advance (who sent it), the gate and the
    // failed rack.
    let timeline = client
        .find(Locator::Css(".timeline"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "console/advance by console@127.0.0.1:",
        "run/phase_gate",
        "rack r-0001 failed",
    ] {
        assert!(
            timeline.contains(line),
            "{line:?} not in the timeline:\n{timeline}"
        );
    }

    // The failed rack's cell opens its task's report.
    let failed = client.find(Locator::Css(".cell.t-failed a")).await.unwrap();
    assert_eq!(failed.text().await.unwrap(), "r-0001");
    failed.click().await.unwrap();
    let status = client
        .wait()
        .at_most(DEADLINE)
        .for_element(Locator::Css("dd .badge[data-status]"))
        .await
        .unwrap();
    assert_eq!(
        status.attr("data-status").await.unwrap().as_deref(),
        Some("failed")
    );
    let heading = client
        .find(Locator::Css("h1"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(heading.contains("r-0001"), "{heading}");
    assert!(
        client.find(Locator::Css(".stage.r-failed")).await.is_ok(),
        "the report shows the failed stage"
    );
    screenshot(&client, "task-report").await;
    // The fleet page, by the main navigation (keyboard-reachable links).
    client
        .find(Locator::LinkText("Fleet"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let heading = client
        .wait()
        .at_most(DEADLINE)
        .for_element(Locator::Css("h1"))
        .await
        .unwrap();
    assert_eq!(heading.text().await.unwrap(), "Fleet");
    screenshot(&client, "fleet").await;

    // A schedule paused from its page: confirmed, then shown paused.
    s.client
        .create_task_schedule(common::nightly_power_on("nightly power-on", 2))
        .await
        .unwrap();
    client.goto(&format!("{base}/schedules")).await.unwrap();
    screenshot(&client, "schedules").await;
    client
        .execute("window.__rackflowMarker = 'schedules';", vec![])
        .await
        .unwrap();
    client
        .find(Locator::Css("button[data-schedule-action='pause']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    client.accept_alert().await.unwrap();
    client
        .wait()
        .at_most(DEADLINE)
        .for_element(Locator::XPath("//td[normalize-space()='paused']"))
        .await
        .unwrap();
    assert!(
        client
            .find(Locator::Css("button[data-schedule-action='resume']"))
            .await
            .is_ok(),
        "a paused schedule offers Resume"
    );
    let outcome = client
        .find(Locator::Css("#control-status"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(outcome, "paused");
    // Still the same page: the table was re-read in place, not reloaded.
    assert_eq!(
        client
            .execute("return window.__rackflowMarker || null;", vec![])
            .await
            .unwrap(),
        serde_json::json!("schedules"),
        "the schedules page was reloaded"
    );

    // On a phone: no page scrolls sideways.
    client.set_window_size(390, 844).await.unwrap();
    for path in [
        "/fleet".to_string(),
        "/runs".to_string(),
        format!("/runs/{}", id.id),
        "/tasks".to_string(),
    ] {
        client.goto(&format!("{base}{path}")).await.unwrap();
        client
            .wait()
            .at_most(DEADLINE)
            .for_element(Locator::Css("h1"))
            .await
            .unwrap();
        let overflow = client
            .execute(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth;",
                vec![],
            )
            .await
            .unwrap();
        assert!(
            overflow.as_i64().is_some_and(|px| px <= 0),
            "{path} scrolls sideways by {overflow} px at 390 px"
        );
        if path.starts_with("/runs/") {
            screenshot(&client, "run-phone").await;
        }
    }
    client.close().await.unwrap();
    s.stop().await;
}
