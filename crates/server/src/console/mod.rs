//! The operator web console: plain HTTP on its own listener (`[console]`),
//! reading and controlling through the engine directly (no gRPC hop).
//!
//! Pages: `/fleet` (racks by model, location and NVLink domain; firmware
//! versions per component type), `/runs` (every run with its phase and
//! progress), `/runs/{id}` (a bar per phase, the racks coloured by target
//! state, the safety gates against their thresholds, the pause reason, the
//! controls and the run's event timeline), `/tasks` (filter by rack,
//! status, type), `/tasks/{id}` (a task's per-stage report) and
//! `/schedules` (next fire times; pause, resume, trigger). A run page stays current
//! through `/runs/{id}/events`, a server-sent-event stream of the page's
//! live part, pushed on every change the dispatcher announces (and re-read
//! every second while child tasks progress) — the browser never polls.
//!
//! The controls POST to `/runs/{id}/{advance|pause|resume|cancel}`; advance
//! carries the phase the operator saw (`expected_phase`), the same guard
//! the CLI sends. The console has no login of its own: it listens on
//! loopback by default, and every control is audited with the actor
//! `console` and the caller's address.

mod pages;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use futures_util::Stream;
use rackflow_engine::dispatcher::Dispatcher;
use rackflow_engine::error::EngineError;
use rackflow_engine::runs::RunManager;
use rackflow_engine::store::Store;
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How often a live run page re-reads while nothing announced a change
/// (child tasks progress without touching the run row).
const REREAD_INTERVAL: Duration = Duration::from_secs(1);

/// The least time between two reads of one live page: a busy run changes
/// many times a second, a person needs a few updates a second, and every
/// read is a few queries the rollout's own writes compete with.
const MIN_REREAD_INTERVAL: Duration = Duration::from_millis(250);

/// What the console reads and controls.
#[derive(Clone)]
pub struct Console {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) runs: RunManager,
    pub(crate) dispatcher: Arc<Dispatcher>,
    pub(crate) audit: Arc<rackflow_engine::audit::AuditTrail>,
    pub(crate) schedules: Arc<rackflow_engine::schedules::ScheduleManager>,
    /// Ends the live streams at shutdown.
    pub(crate) stop: CancellationToken,
}

/// Every route of the console.
pub fn router(console: Console) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/runs") }))
        .route("/fleet", get(fleet_page))
        .route("/tasks", get(tasks_page))
        .route("/schedules", get(schedules_page))
        .route("/schedules/{id}/{action}", post(schedule_control))
        .route("/runs", get(runs_page))
        .route("/runs/{id}", get(run_page))
        .route("/runs/{id}/live", get(run_live))
        .route("/runs/{id}/events", get(run_events))
        .route("/runs/{id}/{action}", post(run_control))
        .route("/tasks/{id}", get(task_page))
        .route("/assets/console.css", get(css))
        .route("/assets/console.js", get(js))
        .fallback(|| async { not_found("no such page") })
        .with_state(console)
}

/// Serves the console on `listener` until `shutdown` fires.
pub async fn serve(
    listener: TcpListener,
    console: Console,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(
        listener,
        router(console).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async move { shutdown.cancelled().await })
    .await
}

/// An answer that is an error page (or, for a control, its text).
struct PageError(StatusCode, String);

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        (
            self.0,
            Html(pages::error_page(self.0, &self.1).into_string()),
        )
            .into_response()
    }
}

impl From<EngineError> for PageError {
    fn from(e: EngineError) -> Self {
        // The gRPC edge's mapping decides the HTTP class too.
        let status = tonic::Status::from(crate::error::ApiError::from(e));
        let code = match status.code() {
            tonic::Code::NotFound => StatusCode::NOT_FOUND,
            tonic::Code::InvalidArgument | tonic::Code::OutOfRange => StatusCode::BAD_REQUEST,
            tonic::Code::FailedPrecondition | tonic::Code::Aborted | tonic::Code::AlreadyExists => {
                StatusCode::CONFLICT
            }
            tonic::Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        PageError(code, status.message().to_string())
    }
}

fn not_found(what: &str) -> PageError {
    PageError(StatusCode::NOT_FOUND, what.to_string())
}

fn parse_id(text: &str) -> Result<Uuid, PageError> {
    Uuid::parse_str(text)
        .map_err(|_| PageError(StatusCode::BAD_REQUEST, format!("{text:?} is not a UUID")))
}

async fn runs_page(State(c): State<Console>) -> Result<Html<String>, PageError> {
    let (runs, total) = c
        .runs
        .list(
            &rackflow_domain::run::RunListFilter::default(),
            rackflow_domain::run::Page {
                offset: 0,
                limit: 200,
            },
        )
        .await?;
    let mut rows = Vec::with_capacity(runs.len());
    for run in runs {
        let stats = if run.status.is_terminal() || run.started_at.is_some() {
            c.runs.get(run.id, true).await?.1
        } else {
            None
        };
        rows.push((run, stats));
    }
    Ok(Html(pages::runs_page(&rows, total).into_string()))
}

async fn run_page(
    State(c): State<Console>,
    Path(id): Path<String>,
) -> Result<Html<String>, PageError> {
    let view = pages::RunView::read(&c, parse_id(&id)?).await?;
    Ok(Html(pages::run_page(&view).into_string()))
}

/// The live part of a run page alone (what the event stream pushes).
async fn run_live(
    State(c): State<Console>,
    Path(id): Path<String>,
) -> Result<Html<String>, PageError> {
    let view = pages::RunView::read(&c, parse_id(&id)?).await?;
    Ok(Html(pages::run_live(&view).into_string()))
}

/// `text/event-stream` of the run page's live part: one `run` event now
/// and one per change; the stream ends after the run's terminal state.
async fn run_events(
    State(c): State<Console>,
    Path(id): Path<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, PageError> {
    let id = parse_id(&id)?;
    // Fail fast on an unknown run.
    c.runs.get(id, false).await?;
    let mut changes = c.dispatcher.subscribe();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(8);
    let stop = c.stop.clone();
    tokio::spawn(async move {
        let mut last = String::new();
        loop {
            match pages::RunView::read(&c, id).await {
                Ok(view) => {
                    let html = pages::run_live(&view).into_string();
                    if html != last {
                        let event = Event::default().event("run").data(html.clone());
                        if tx.send(Ok(event)).await.is_err() {
                            return;
                        }
                        last = html;
                    }
                    if view.run.status.is_terminal() {
                        return;
                    }
                }
                Err(e) => {
                    tracing::debug!(run_id = %id, error = ?e.1, "console: run read failed; retrying")
                }
            }
            // Not sooner than the least interval; then until this run
            // changes, the re-read interval passes, the browser goes away
            // or the server stops.
            tokio::select! {
                () = tokio::time::sleep(MIN_REREAD_INTERVAL) => {}
                () = tx.closed() => return,
                () = stop.cancelled() => return,
            }
            tokio::select! {
                () = crate::rpc::watch::run_changed(&mut changes, id) => {}
                () = tokio::time::sleep(REREAD_INTERVAL) => {}
                () = tx.closed() => return,
                () = stop.cancelled() => return,
            }
        }
    });
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

#[derive(Deserialize)]
struct ControlQuery {
    /// Advance: the phase index the operator saw as the next one.
    expected_phase: Option<i32>,
    /// Cancel: why.
    reason: Option<String>,
}

/// A control; answers the new live part, or the refusal's text with its
/// HTTP class (the page shows it).
async fn run_control(
    State(c): State<Console>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path((id, action)): Path<(String, String)>,
    Query(q): Query<ControlQuery>,
) -> Response {
    let answer = async {
        let id = parse_id(&id)?;
        let actor = format!("console@{peer}");
        match action.as_str() {
            "advance" => {
                c.dispatcher
                    .advance(id, q.expected_phase, &actor, "console/advance")
                    .await?
            }
            "pause" => c.dispatcher.pause(id, &actor, "console/pause").await?,
            "resume" => c.dispatcher.resume(id, &actor, "console/resume").await?,
            "cancel" => {
                let reason = q
                    .reason
                    .filter(|r| !r.trim().is_empty())
                    .unwrap_or_else(|| "cancelled from the console".into());
                c.dispatcher
                    .cancel(id, &reason, &actor, "console/cancel")
                    .await?
            }
            other => return Err(not_found(&format!("no control {other:?}"))),
        };
        let view = pages::RunView::read(&c, id).await?;
        Ok::<_, PageError>(pages::run_live(&view).into_string())
    };
    match answer.await {
        Ok(html) => Html(html).into_response(),
        Err(PageError(status, message)) => (status, message).into_response(),
    }
}

#[derive(Deserialize, Default)]
struct FleetQuery {
    model: Option<String>,
    datacenter: Option<String>,
    /// An NVLink domain id.
    domain: Option<String>,
}

async fn fleet_page(
    State(c): State<Console>,
    Query(q): Query<FleetQuery>,
) -> Result<Html<String>, PageError> {
    let view = pages::FleetView::read(&c, &q.model, &q.datacenter, &q.domain).await?;
    Ok(Html(pages::fleet_page(&view).into_string()))
}

#[derive(Deserialize, Default)]
struct TasksQuery {
    /// A rack id or external id.
    rack: Option<String>,
    status: Option<String>,
    #[serde(rename = "type")]
    task_type: Option<String>,
}

async fn tasks_page(
    State(c): State<Console>,
    Query(q): Query<TasksQuery>,
) -> Result<Html<String>, PageError> {
    let bad = |what: &str, text: &str| {
        PageError(StatusCode::BAD_REQUEST, format!("unknown {what} {text:?}"))
    };
    let blank = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
    };
    let status = match blank(&q.status) {
        Some(t) => {
            Some(rackflow_domain::task::TaskStatus::parse(&t).ok_or_else(|| bad("status", &t))?)
        }
        None => None,
    };
    let task_type = match blank(&q.task_type) {
        Some(t) => Some(rackflow_domain::task::TaskType::parse(&t).ok_or_else(|| bad("type", &t))?),
        None => None,
    };
    let rack = match blank(&q.rack) {
        None => None,
        Some(text) => Some(match Uuid::parse_str(&text) {
            Ok(id) => id,
            Err(_) => c
                .store
                .rack_get_by_external_id(&text)
                .await
                .map_err(EngineError::from)?
                .map(|r| r.id)
                .ok_or_else(|| not_found(&format!("no rack {text:?}")))?,
        }),
    };
    let filter = rackflow_engine::store::TaskFilter {
        rack_id: rack,
        statuses: status.into_iter().collect(),
        ..Default::default()
    };
    // A type filter is applied to the newest page read.
    let (mut tasks, total) = c
        .store
        .task_list(
            &filter,
            rackflow_domain::run::Page {
                offset: 0,
                limit: 200,
            },
            false,
        )
        .await
        .map_err(EngineError::from)?;
    if let Some(t) = task_type {
        tasks.retain(|task| task.task_type == t);
    }
    let racks = pages::rack_labels(&c, tasks.iter().map(|t| t.rack_id)).await?;
    Ok(Html(
        pages::tasks_page(&tasks, total, &racks, &q.rack, status, task_type).into_string(),
    ))
}

async fn schedules_page(State(c): State<Console>) -> Result<Html<String>, PageError> {
    let (schedules, total) = c
        .schedules
        .list(
            &rackflow_engine::store::ScheduleFilter::default(),
            rackflow_domain::run::Page {
                offset: 0,
                limit: 200,
            },
        )
        .await?;
    let rows: Vec<_> = schedules
        .into_iter()
        .map(|s| {
            let next = c.schedules.upcoming(&s, 3);
            (s, next)
        })
        .collect();
    Ok(Html(pages::schedules_page(&rows, total).into_string()))
}

/// Pause, resume or trigger a schedule; answers the schedules page's URL
/// to go back to, or the refusal's text.
async fn schedule_control(
    State(c): State<Console>,
    Path((id, action)): Path<(String, String)>,
) -> Response {
    let answer = async {
        let id = parse_id(&id)?;
        let text = match action.as_str() {
            "pause" => {
                c.schedules.pause(id).await?;
                "paused".to_string()
            }
            "resume" => {
                c.schedules.resume(id).await?;
                "resumed".to_string()
            }
            "trigger" => {
                let tasks = c.schedules.trigger(id).await?;
                format!("fired: {} task(s) submitted", tasks.len())
            }
            other => return Err(not_found(&format!("no control {other:?}"))),
        };
        tracing::info!(schedule_id = %id, action = %action, "schedule control from the console");
        Ok::<_, PageError>(text)
    };
    match answer.await {
        Ok(text) => text.into_response(),
        Err(PageError(status, message)) => (status, message).into_response(),
    }
}

async fn task_page(
    State(c): State<Console>,
    Path(id): Path<String>,
) -> Result<Html<String>, PageError> {
    let id = parse_id(&id)?;
    let task = c
        .store
        .task_get(id)
        .await
        .map_err(EngineError::from)?
        .ok_or_else(|| not_found(&format!("task {id} not found")))?;
    let rack = c
        .store
        .rack_get(task.rack_id, false)
        .await
        .map_err(EngineError::from)?;
    Ok(Html(pages::task_page(&task, rack.as_ref()).into_string()))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=300"),
            ),
        ],
        body,
    )
        .into_response()
}

async fn css() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("assets/console.css"),
    )
}

async fn js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("assets/console.js"),
    )
}
