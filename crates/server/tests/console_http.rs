//! The web console over plain HTTP on SQLite and PostgreSQL (the browser
//! test is tests/console_browser.rs): pages and their refusals, hostile
//! text escaped, the controls with the expected-phase guard and their audit
//! entry, the live event stream, and the run page's first byte on a
//! 100-rack run.

// Test helpers may unwrap: the panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use rackflow_api::v1 as pb;
use rackflow_testkit as common;
use rackflow_testkit::both_stores;

use common::{Backend, TestServer, fixture_fleet};

both_stores!(
    pages_controls_and_refusals,
    fleet_tasks_and_schedules_pages,
    the_run_page_of_a_hundred_racks_answers_fast,
);

const DEADLINE: Duration = Duration::from_secs(60);

async fn start(backend: Backend, racks: u32) -> Option<(TestServer, String)> {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    let mut config = rackflow_server::Config::default();
    config.console.enabled = true;
    config.console.listen = addr;
    config.sim.firmware_update_ms = 50;
    config.sim.jitter = 0.0;
    let mut s = TestServer::start_with(backend, config).await?;
    fixture_fleet(&mut s.client, racks).await;
    Some((s, format!("http://{addr}")))
}

async fn paused_at_the_gate(s: &mut TestServer, name: &str) -> pb::Uuid {
    s.run_to_phase_gate(common::run_request(name, 100, "s", "o", 2), DEADLINE)
        .await
}

/// GET and POST `url`: (status, body).
async fn get(http: &reqwest::Client, url: String) -> (u16, String) {
    let r = http.get(url).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn post(http: &reqwest::Client, url: String) -> (u16, String) {
    let r = http.post(url).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn pages_controls_and_refusals(backend: Backend) {
    let Some((mut s, base)) = start(backend, 4).await else {
        return;
    };
    let http = reqwest::Client::new();
    let id = paused_at_the_gate(&mut s, "<script>alert(1)</script>").await;

    // The list escapes what an API caller named the run.
    let (code, list) = get(&http, format!("{base}/runs")).await;
    assert_eq!(code, 200);
    assert!(
        list.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{list}"
    );
    assert!(!list.contains("<script>alert"), "{list}");
    // `/` leads to the runs.
    let (code, _) = get(&http, format!("{base}/")).await;
    assert_eq!(code, 200);

    let (code, page) = get(&http, format!("{base}/runs/{}", id.id)).await;
    assert_eq!(code, 200);
    assert!(page.contains("data-status=\"paused\""), "{page}");
    assert!(page.contains("data-expected-phase=\"1\""), "{page}");

    // Refusals: a malformed id, an unknown run, page or control.
    assert_eq!(get(&http, format!("{base}/runs/not-a-uuid")).await.0, 400);
    let unknown = uuid::Uuid::new_v4();
    assert_eq!(get(&http, format!("{base}/runs/{unknown}")).await.0, 404);
    assert_eq!(get(&http, format!("{base}/tasks/{unknown}")).await.0, 404);
    assert_eq!(get(&http, format!("{base}/nope")).await.0, 404);
    assert_eq!(
        post(&http, format!("{base}/runs/{}/frobnicate", id.id))
            .await
            .0,
        404
    );
    assert_eq!(
        post(&http, format!("{base}/runs/{unknown}/pause")).await.0,
        404
    );
    // A stale guard is refused with its reason; the run stays where it is.
    let (code, why) = post(
        &http,
        format!("{base}/runs/{}/advance?expected_phase=7", id.id),
    )
    .await;
    assert_eq!(code, 409, "{why}");
    assert!(why.contains('7'), "{why}");
    let (_, live) = get(&http, format!("{base}/runs/{}/live", id.id)).await;
    assert!(live.contains("data-phase=\"0\""), "{live}");
    assert_eq!(
        post(
            &http,
            format!("{base}/runs/{}/advance?expected_phase=x", id.id)
        )
        .await
        .0,
        400
    );

    // The event stream's first event is the live part as it stands.
    let mut events = http
        .get(format!("{base}/runs/{}/events", id.id))
        .send()
        .await
        .unwrap();
    assert_eq!(
        events.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut first = String::new();
    while !first.contains("\n\n") {
        let chunk = tokio::time::timeout(DEADLINE, events.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        first.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(first.starts_with("event: run\ndata: "), "{first}");
    assert!(first.contains("data-status=\"paused\""), "{first}");

    // Advance with the right guard: it moves on, the stream says so, and
    // the audit trail names the console and the caller's address.
    let (code, live) = post(
        &http,
        format!("{base}/runs/{}/advance?expected_phase=1", id.id),
    )
    .await;
    assert_eq!(code, 200, "{live}");
    assert!(live.contains("data-phase=\"1\""), "{live}");
    let mut seen = first;
    while !seen.contains("data-phase=\"1\"") {
        let chunk = tokio::time::timeout(DEADLINE, events.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let trail = s
        .extensions()
        .list_audit_events(pb::ListAuditEventsRequest {
            run_id: Some(id.clone()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .events;
    let advance = trail
        .iter()
        .find(|e| e.action == "console/advance")
        .unwrap_or_else(|| panic!("no console/advance in {trail:#?}"));
    assert!(
        advance.actor.starts_with("console@127.0.0.1:"),
        "{advance:?}"
    );
    s.stop().await;
}

/// Acceptance: the run page's first byte within 50 ms on a 100-rack run
/// (a release build; this debug-build test allows 4×, median of 5).
async fn the_run_page_of_a_hundred_racks_answers_fast(backend: Backend) {
    let Some((mut s, base)) = start(backend, 100).await else {
        return;
    };
    let id = paused_at_the_gate(&mut s, "hundred").await;
    let http = reqwest::Client::new();
    let url = format!("{base}/runs/{}", id.id);
    let mut times = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let response = http.get(&url).send().await.unwrap();
        times.push(started.elapsed());
        assert_eq!(response.status(), 200);
        let body = response.text().await.unwrap();
        assert_eq!(body.matches("class=\"cell t-").count(), 100);
    }
    times.sort();
    let median = times[2];
    eprintln!("run page of 100 racks: first byte median {median:?} ({times:?})");
    assert!(median <= Duration::from_millis(200), "{times:?}");
    s.stop().await;
}

async fn fleet_tasks_and_schedules_pages(backend: Backend) {
    let Some((mut s, base)) = start(backend, 3).await else {
        return;
    };
    let http = reqwest::Client::new();
    // The fleet: every rack, firmware versions per type with their counts.
    let (code, fleet) = get(&http, format!("{base}/fleet")).await;
    assert_eq!(code, 200, "{fleet}");
    assert_eq!(fleet.matches("<td>r-000").count(), 3, "{fleet}");
    assert!(fleet.contains("GB200 NVL72"), "{fleet}");
    // Two compute trays per fixture rack, all at one version.
    assert!(fleet.contains("aria-valuenow=\"6\""), "{fleet}");
    let (code, none) = get(&http, format!("{base}/fleet?model=nope")).await;
    assert_eq!(code, 200);
    assert!(none.contains("0 rack(s)"), "{none}");
    assert_eq!(get(&http, format!("{base}/fleet?domain=x")).await.0, 400);

    // A task, then the tasks page filtered by rack and status.
    let ids = s
        .client
        .power_on_rack(pb::PowerOnRackRequest {
            target_spec: Some(common::whole_rack(2)),
            description: "console".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .task_ids;
    assert_eq!(ids.len(), 1);
    let task = ids[0].id.clone();
    let (code, tasks) = get(&http, format!("{base}/tasks?rack=r-0002")).await;
    assert_eq!(code, 200, "{tasks}");
    assert!(tasks.contains(&format!("/tasks/{task}")), "{tasks}");
    let (_, other) = get(&http, format!("{base}/tasks?rack=r-0001")).await;
    assert!(!other.contains(&format!("/tasks/{task}")), "{other}");
    let (_, by_type) = get(&http, format!("{base}/tasks?type=firmware_control")).await;
    assert!(!by_type.contains(&format!("/tasks/{task}")), "{by_type}");
    assert_eq!(get(&http, format!("{base}/tasks?status=nope")).await.0, 400);
    assert_eq!(get(&http, format!("{base}/tasks?rack=r-9999")).await.0, 404);
    let (code, report) = get(&http, format!("{base}/tasks/{task}")).await;
    assert_eq!(code, 200);
    assert!(report.contains("power_control"), "{report}");

    // A schedule: listed with its next fire times; paused from the page.
    let schedule = s
        .client
        .create_task_schedule(common::nightly_power_on("nightly <b>", 3))
        .await
        .unwrap()
        .into_inner();
    let sid = schedule.id.unwrap().id;
    let (code, page) = get(&http, format!("{base}/schedules")).await;
    assert_eq!(code, 200);
    assert!(page.contains("nightly &lt;b&gt;"), "{page}");
    assert!(page.contains("Europe/Paris"), "{page}");
    assert_eq!(
        page.matches("<time datetime=").count(),
        3,
        "three next fire times: {page}"
    );
    assert_eq!(
        post(&http, format!("{base}/schedules/{sid}/pause")).await,
        (200, "paused".to_string())
    );
    let (_, page) = get(&http, format!("{base}/schedules")).await;
    assert!(page.contains("<td>paused</td>"), "{page}");
    assert_eq!(
        post(&http, format!("{base}/schedules/{sid}/explode"))
            .await
            .0,
        404
    );
    let (code, fired) = post(&http, format!("{base}/schedules/{sid}/trigger")).await;
    assert_eq!((code, fired.as_str()), (200, "fired: 1 task(s) submitted"));
    s.stop().await;
}
