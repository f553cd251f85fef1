//! The operator web console: plain HTTP on its own listener (`[console]`),
//! reading and controlling through the engine directly (no gRPC hop).
//!
//! Pages: `/runs` (every run with its phase and progress), `/runs/{id}` (a
//! bar per phase, the racks coloured by target state, the safety gates
//! against their thresholds, the pause reason, and the controls) and
//! `/tasks/{id}` (a task's per-stage report). A run page stays current
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
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How often a live run page re-reads while nothing announced a change
/// (child tasks progress without touching the run row).
const REREAD_INTERVAL: Duration = Duration::from_secs(1);

/// What the console reads and controls.
#[derive(Clone)]
pub struct Console {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) runs: RunManager,
    pub(crate) dispatcher: Arc<Dispatcher>,
    /// Ends the live streams at shutdown.
    pub(crate) stop: CancellationToken,
}

/// Every route of the console.
pub fn router(console: Console) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/runs") }))
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
            // Until this run changes, the re-read interval passes, the
            // browser goes away or the server stops.
            let wait = async {
                loop {
                    match changes.recv().await {
                        Ok(changed) if changed == id => return,
                        Ok(_) => {}
                        Err(RecvError::Lagged(_)) => return,
                        Err(RecvError::Closed) => std::future::pending::<()>().await,
                    }
                }
            };
            tokio::select! {
                () = wait => {}
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
