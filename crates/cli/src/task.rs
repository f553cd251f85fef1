//! `rackflow task list|get|cancel|watch`.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Subcommand;
use rackflow_api::v1;
use serde::Serialize;

use crate::args::{format_duration, parse_duration, parse_uuid};
use crate::client::{self, Flow, SilentFailure};
use crate::output::{Fields, OutputFormat, Table, enum_name, or_dash, print_json, timestamp};
use crate::report::{ChangeLog, Report, render_report};

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// List tasks, newest first.
    List(ListArgs),
    /// Show tasks with their reports.
    Get {
        /// Task ids.
        #[arg(required = true, value_parser = parse_uuid)]
        ids: Vec<uuid::Uuid>,
    },
    /// Cancel a waiting, pending or running task.
    Cancel {
        /// Task id.
        #[arg(value_parser = parse_uuid)]
        id: uuid::Uuid,
    },
    /// Follow a task's stages and steps until it finishes; exit code 0 when
    /// it completed, 1 when it failed or was terminated.
    Watch {
        /// Task id.
        #[arg(value_parser = parse_uuid)]
        id: uuid::Uuid,
        /// Time between polls.
        #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_interval)]
        interval: Duration,
    },
}

/// Parses `--interval`: a duration of at least 100ms.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d < Duration::from_millis(100) {
        return Err("interval must be at least 100ms".to_string());
    }
    Ok(d)
}

/// Flags of `task list`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ListArgs {
    /// Only tasks of this rack (UUID or external id).
    #[arg(long, value_name = "RACK")]
    pub rack_id: Option<String>,
    /// Only tasks touching this component.
    #[arg(long, value_name = "UUID", value_parser = parse_uuid)]
    pub component_id: Option<uuid::Uuid>,
    /// Only waiting, pending and running tasks.
    #[arg(long)]
    pub active: bool,
    /// Page size [server default: 100].
    #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
    pub limit: Option<i32>,
    /// Tasks to skip.
    #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
    pub offset: Option<i32>,
    /// Include each task's report (a PROGRESS column in the table).
    #[arg(long)]
    pub with_report: bool,
}

impl ListArgs {
    pub fn to_request(&self) -> anyhow::Result<v1::ListTasksRequest> {
        let rack_id = match self.rack_id.as_deref().map(str::trim) {
            Some("") => bail!("--rack-id: empty rack id"),
            Some(id) => Some(v1::Uuid { id: id.to_string() }),
            None => None,
        };
        Ok(v1::ListTasksRequest {
            rack_id,
            active_only: self.active,
            pagination: (self.limit.is_some() || self.offset.is_some()).then(|| v1::Pagination {
                offset: self.offset.unwrap_or(0),
                limit: self.limit.unwrap_or(0),
            }),
            component_id: self.component_id.map(|id| v1::Uuid { id: id.to_string() }),
            with_report: self.with_report,
        })
    }
}

/// JSON view of a task.
#[derive(Debug, Clone, Serialize)]
pub struct TaskView {
    pub id: String,
    /// `<type>/<code>`, e.g. `power_control/power_on`.
    pub operation: String,
    pub rack_id: String,
    pub component_ids: Vec<String>,
    pub description: String,
    /// `pending`, `running`, `completed`, `failed`, `terminated`, `waiting`.
    pub status: String,
    pub message: String,
    /// `temporal`, `local` or `unknown`.
    pub executor: String,
    pub execution_id: String,
    pub applied_rule_id: Option<String>,
    /// `api` or `event_rule_execution` (empty from a server that does not
    /// say).
    pub trigger: String,
    /// The event rule that started it, for `event_rule_execution`.
    pub trigger_id: Option<String>,
    pub queue_expires_at: Option<String>,
    pub created_at: Option<String>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub updated_at: Option<String>,
    /// The report JSON as the server wrote it (absent when empty or not
    /// requested).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<serde_json::Value>,
}

/// Lower-case name of a wire task status.
pub fn task_status_name(value: i32) -> String {
    v1::TaskStatus::try_from(value)
        .map(|s| enum_name(s.as_str_name(), "TASK_STATUS_"))
        .unwrap_or_else(|_| "unknown".to_string())
}

impl TaskView {
    pub fn from_proto(task: &v1::Task) -> TaskView {
        let executor = match v1::TaskExecutorType::try_from(task.executor_type) {
            Ok(v1::TaskExecutorType::Temporal) => "temporal".to_string(),
            _ if task.execution_id.starts_with("local:") => "local".to_string(),
            _ => "unknown".to_string(),
        };
        let report = if task.report.trim().is_empty() {
            None
        } else {
            Some(
                serde_json::from_str(&task.report)
                    .unwrap_or_else(|_| serde_json::Value::String(task.report.clone())),
            )
        };
        TaskView {
            id: task.id.as_ref().map(|u| u.id.clone()).unwrap_or_default(),
            operation: task.operation.clone(),
            rack_id: task
                .rack_id
                .as_ref()
                .map(|u| u.id.clone())
                .unwrap_or_default(),
            component_ids: task.component_uuids.iter().map(|u| u.id.clone()).collect(),
            description: task.description.clone(),
            status: task_status_name(task.status),
            message: task.message.clone(),
            executor,
            execution_id: task.execution_id.clone(),
            applied_rule_id: task
                .applied_rule_id
                .as_ref()
                .map(|u| u.id.clone())
                .filter(|s| !s.is_empty()),
            trigger: task.trigger_type.clone(),
            trigger_id: task
                .trigger_id
                .as_ref()
                .map(|u| u.id.clone())
                .filter(|s| !s.is_empty()),
            queue_expires_at: timestamp(task.queue_expires_at.as_ref()),
            created_at: timestamp(task.created_at.as_ref()),
            started_at: timestamp(task.started_at.as_ref()),
            finished_at: timestamp(task.finished_at.as_ref()),
            updated_at: timestamp(task.updated_at.as_ref()),
            report,
        }
    }

    /// The parsed report, if there is one in the version-1 shape.
    pub fn parsed_report(&self) -> Option<Report> {
        self.report.as_ref().and_then(Report::from_value)
    }

    /// Completed, failed or terminated.
    pub fn is_finished(&self) -> bool {
        matches!(self.status.as_str(), "completed" | "failed" | "terminated")
    }

    /// `task <id> completed: Succeeded`.
    pub fn status_line(&self) -> String {
        if self.message.is_empty() {
            format!("task {} {}", self.id, self.status)
        } else {
            format!("task {} {}: {}", self.id, self.status, self.message)
        }
    }
}

fn date(value: &Option<String>) -> String {
    or_dash(value.as_deref().unwrap_or(""))
}

/// Key/value block of one task, then its report table.
pub fn render_task(task: &TaskView) -> String {
    let mut fields = Fields::new();
    fields
        .add("ID", &task.id)
        .add("Operation", or_dash(&task.operation))
        .add("Rack", or_dash(&task.rack_id))
        .add("Components", task.component_ids.len().to_string())
        .add("Description", or_dash(&task.description))
        .add("Status", &task.status)
        .add("Message", or_dash(&task.message))
        .add(
            "Executor",
            if task.execution_id.is_empty() {
                task.executor.clone()
            } else {
                format!("{} ({})", task.executor, task.execution_id)
            },
        )
        .add(
            "Rule",
            task.applied_rule_id
                .clone()
                .unwrap_or_else(|| "built-in".to_string()),
        );
    match (&task.trigger_id, task.trigger.as_str()) {
        (Some(rule), trigger) => fields.add("Trigger", format!("{trigger} (event rule {rule})")),
        (None, "") => &mut fields,
        (None, trigger) => fields.add("Trigger", trigger),
    };
    if task.queue_expires_at.is_some() {
        fields.add("Queue expires", date(&task.queue_expires_at));
    }
    fields
        .add("Created", date(&task.created_at))
        .add("Started", date(&task.started_at))
        .add("Finished", date(&task.finished_at))
        .add("Updated", date(&task.updated_at));
    let mut out = fields.render();
    out.push('\n');
    match (&task.report, task.parsed_report()) {
        (None, _) => out.push_str("(no report yet)\n"),
        (Some(_), Some(report)) => out.push_str(&render_report(&report)),
        (Some(raw), None) => out.push_str(&format!("Report (unrecognised shape): {raw}\n")),
    }
    out
}

/// JSON of `task list`.
#[derive(Debug, Clone, Serialize)]
pub struct TaskListView {
    pub total: i32,
    pub tasks: Vec<TaskView>,
}

/// `rackflow task list`.
pub async fn run_list(
    server: &crate::client::ServerAddress,
    args: &ListArgs,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let request = args.to_request()?;
    let mut flow = client::connect(server).await?;
    let response = flow
        .list_tasks(request)
        .await
        .context("list tasks")?
        .into_inner();
    let view = TaskListView {
        total: response.total,
        tasks: response.tasks.iter().map(TaskView::from_proto).collect(),
    };
    match output {
        OutputFormat::Json => print_json(&view)?,
        OutputFormat::Table => {
            let mut headers = vec!["ID", "OPERATION", "STATUS"];
            if args.with_report {
                headers.push("PROGRESS");
            }
            headers.extend(["CREATED", "FINISHED", "RACK", "MESSAGE"]);
            let mut table = Table::new(headers);
            for t in &view.tasks {
                let mut row = vec![t.id.clone(), or_dash(&t.operation), t.status.clone()];
                if args.with_report {
                    row.push(or_dash(
                        &t.parsed_report().map(|r| r.summary()).unwrap_or_default(),
                    ));
                }
                row.extend([
                    date(&t.created_at),
                    date(&t.finished_at),
                    or_dash(&t.rack_id),
                    or_dash(&t.message),
                ]);
                table.row(row);
            }
            table.print();
            crate::outln!("{} of {} tasks", view.tasks.len(), view.total);
        }
    }
    Ok(())
}

/// Fetches tasks by id; the ids the server did not return are listed
/// separately.
async fn fetch(
    flow: &mut Flow,
    ids: &[uuid::Uuid],
) -> anyhow::Result<(Vec<v1::Task>, Vec<uuid::Uuid>)> {
    // The server cuts a reply to its size limit: ask again for the ids not
    // yet returned until a reply brings none of them.
    let mut tasks: Vec<v1::Task> = Vec::new();
    let mut pending: Vec<uuid::Uuid> = ids.to_vec();
    while !pending.is_empty() {
        let page = flow
            .get_tasks_by_i_ds(v1::GetTasksByIDsRequest {
                task_ids: pending
                    .iter()
                    .map(|id| v1::Uuid { id: id.to_string() })
                    .collect(),
            })
            .await
            .context("get tasks")?
            .into_inner()
            .tasks;
        if page.is_empty() {
            break;
        }
        let got: Vec<uuid::Uuid> = page
            .iter()
            .filter_map(|t| {
                t.id.as_ref()
                    .and_then(|u| uuid::Uuid::parse_str(&u.id).ok())
            })
            .collect();
        let before = pending.len();
        pending.retain(|id| !got.contains(id));
        tasks.extend(page);
        if pending.len() == before {
            break;
        }
    }
    let missing = ids
        .iter()
        .filter(|id| {
            !tasks.iter().any(|t| {
                t.id.as_ref()
                    .and_then(|u| uuid::Uuid::parse_str(&u.id).ok())
                    .is_some_and(|u| u == **id)
            })
        })
        .copied()
        .collect();
    Ok((tasks, missing))
}

fn not_found(missing: &[uuid::Uuid]) -> anyhow::Error {
    let ids: Vec<String> = missing.iter().map(ToString::to_string).collect();
    if ids.len() == 1 {
        anyhow::anyhow!("task {} not found", ids[0])
    } else {
        anyhow::anyhow!("tasks not found: {}", ids.join(", "))
    }
}

/// JSON of `task get`.
#[derive(Debug, Clone, Serialize)]
pub struct TasksView {
    pub tasks: Vec<TaskView>,
}

/// `rackflow task get ID…`: the tasks found, in the order asked; then an
/// error naming the ids the server does not know.
pub async fn run_get(
    server: &crate::client::ServerAddress,
    ids: &[uuid::Uuid],
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    let (tasks, missing) = fetch(&mut flow, ids).await?;
    let mut views: Vec<TaskView> = tasks.iter().map(TaskView::from_proto).collect();
    views.sort_by_key(|v| {
        ids.iter()
            .position(|id| id.to_string() == v.id)
            .unwrap_or(usize::MAX)
    });
    match output {
        OutputFormat::Json => print_json(&TasksView { tasks: views })?,
        OutputFormat::Table => {
            let blocks: Vec<String> = views.iter().map(render_task).collect();
            crate::output::write_out(&blocks.join("\n"));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(not_found(&missing))
    }
}

/// `rackflow task cancel ID`.
pub async fn run_cancel(
    server: &crate::client::ServerAddress,
    id: uuid::Uuid,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    let task = flow
        .cancel_task(v1::CancelTaskRequest {
            task_id: Some(v1::Uuid { id: id.to_string() }),
        })
        .await
        .with_context(|| format!("cancel task {id}"))?
        .into_inner()
        .task;
    match (task, output) {
        (Some(task), OutputFormat::Json) => print_json(&TaskView::from_proto(&task))?,
        (Some(task), OutputFormat::Table) => {
            crate::outln!("{}", TaskView::from_proto(&task).status_line())
        }
        (None, OutputFormat::Json) => print_json(&serde_json::json!({ "id": id.to_string() }))?,
        (None, OutputFormat::Table) => crate::outln!("task {id} cancelled"),
    }
    Ok(())
}

/// Consecutive failed polls `task watch` tolerates (server restarting,
/// network blip) before giving up.
const WATCH_RETRIES: u32 = 5;

fn transient(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<tonic::Status>().is_some_and(|s| {
            matches!(
                s.code(),
                tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
            )
        })
    })
}

/// One screen of `task watch` on a terminal.
pub fn render_watch_frame(task: &TaskView, interval: Duration) -> String {
    let mut out = format!(
        "Task {}  {}  rack {}\nStatus: {}{}\n",
        task.id,
        or_dash(&task.operation),
        or_dash(&task.rack_id),
        task.status,
        if task.message.is_empty() {
            String::new()
        } else {
            format!(" ({})", task.message)
        }
    );
    if let Some(expires) = &task.queue_expires_at {
        out.push_str(&format!("Queued until: {expires}\n"));
    }
    out.push('\n');
    match (&task.report, task.parsed_report()) {
        (None, _) => out.push_str("(no report yet)\n"),
        (Some(_), Some(report)) => out.push_str(&render_report(&report)),
        (Some(raw), None) => out.push_str(&format!("Report (unrecognised shape): {raw}\n")),
    }
    if !task.is_finished() {
        out.push_str(&format!(
            "\npolling every {}; Ctrl-C stops watching (the task keeps running)\n",
            format_duration(interval)
        ));
    }
    out
}

/// `rackflow task watch ID`: polls until the task finishes. On a terminal
/// the screen is cleared and redrawn when the task changed; otherwise only
/// the changes are printed, each line prefixed with the UTC time. `-o json` prints nothing while
/// waiting and the final task at the end.
pub async fn run_watch(
    server: &crate::client::ServerAddress,
    id: uuid::Uuid,
    interval: Duration,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut flow = client::connect(server).await?;
    let tty = output == OutputFormat::Table && std::io::stdout().is_terminal();
    let mut log = ChangeLog::new();
    let mut last_frame = String::new();
    let mut failures = 0;
    let view = loop {
        let polled = match fetch(&mut flow, &[id]).await {
            Ok((_, missing)) if !missing.is_empty() => return Err(not_found(&missing)),
            Ok((tasks, _)) => tasks.first().map(TaskView::from_proto),
            Err(err) if transient(&err) && failures < WATCH_RETRIES => {
                failures += 1;
                tokio::time::sleep(interval).await;
                continue;
            }
            Err(err) => return Err(err),
        };
        failures = 0;
        let Some(view) = polled else {
            return Err(not_found(&[id]));
        };
        match output {
            OutputFormat::Json => {}
            OutputFormat::Table if tty => {
                // Redraw only when something changed: no flicker.
                let frame = render_watch_frame(&view, interval);
                if frame != last_frame {
                    crate::output::write_out(&format!("\x1b[H\x1b[2J{frame}"));
                    last_frame = frame;
                }
            }
            OutputFormat::Table => {
                let report = view.parsed_report();
                let now = chrono::Utc::now().format("%H:%M:%S");
                for line in log.changes(&view.status, &view.message, report.as_ref()) {
                    crate::outln!("{now} {line}");
                }
            }
        }
        if view.is_finished() {
            break view;
        }
        tokio::time::sleep(interval).await;
    };
    match output {
        OutputFormat::Json => print_json(&view)?,
        OutputFormat::Table => {
            if tty {
                crate::outln!();
            }
            crate::outln!("{}", view.status_line());
        }
    }
    if view.status == "completed" {
        Ok(())
    } else {
        Err(SilentFailure.into())
    }
}
