//! The `rackflow` command line: argument parsing and output.
//!
//! One module per command group: [`serve`] (the flow server), [`demo`] (the
//! one-command demo), [`fleet`] (synthetic fleets and their import),
//! [`rack`], [`run`] (with [`control`] for pause/resume/advance/cancel and
//! [`watch`] for the live view), [`ops`] (`power` and `firmware`, which
//! submit tasks), [`task`], [`rule`], [`rms`] (`rms serve`, the rack manager); [`client`] holds
//! the gRPC connection and the error line, [`output`] the tables and JSON,
//! [`args`] the flag value parsers, [`targets`] the target flags, [`spec`]
//! the run spec format, [`report`] the task report and [`rule_file`] rule
//! definition and batch files. Client commands talk to the server over gRPC
//! only; none opens the database.

pub mod args;
pub mod audit;
pub mod client;
pub mod component;
pub mod control;
pub mod demo;
pub mod diagnose;
pub mod drift;
pub mod event_rule;
pub mod firmware_object;
pub mod fleet;
pub mod leak;
pub mod lifecycle;
pub mod ops;
pub mod output;
pub mod rack;
pub mod report;
pub mod rms;
pub mod rule;
pub mod rule_file;
pub mod run;
pub mod schedule;
pub mod secrets;
pub mod serve;
pub mod spec;
pub mod targets;
pub mod task;
pub mod watch;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::output::OutputFormat;

/// Version of this binary (the client side of `rackflow version`).
pub const CLIENT_VERSION: &str = env!("CARGO_PKG_VERSION");
/// Server of client commands without `--server` or `RACKFLOW_SERVER`.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:50051";

/// rackflow: phased firmware rollouts over datacenter racks.
#[derive(Debug, Parser)]
#[command(name = "rackflow", version, propagate_version = true)]
pub struct Cli {
    /// Flow server address (`http://host:port`, or `host:port`).
    #[arg(
        long,
        global = true,
        env = "RACKFLOW_SERVER",
        default_value = DEFAULT_SERVER,
        value_parser = args::normalize_server
    )]
    pub server: String,
    /// CA bundle the server's certificate must chain to (`https://` only;
    /// without it, the system's roots).
    #[arg(long, global = true, env = "RACKFLOW_TLS_CA", value_name = "PEM")]
    pub tls_ca: Option<PathBuf>,
    /// Client certificate for mTLS (with --tls-key).
    #[arg(
        long,
        global = true,
        env = "RACKFLOW_TLS_CLIENT_CERT",
        value_name = "PEM"
    )]
    pub tls_cert: Option<PathBuf>,
    /// Private key of --tls-cert.
    #[arg(
        long,
        global = true,
        env = "RACKFLOW_TLS_CLIENT_KEY",
        value_name = "PEM"
    )]
    pub tls_key: Option<PathBuf>,
    /// Name to check the server's certificate against, when it is not the
    /// address's host.
    #[arg(long, global = true, value_name = "NAME")]
    pub tls_server_name: Option<String>,
    /// Output format of client commands.
    #[arg(long, short = 'o', global = true, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    /// Log format of the servers (`serve`, `rms serve`): `text`, or `json`
    /// (one object per line).
    #[arg(
        long,
        global = true,
        env = "RACKFLOW_LOG_FORMAT",
        value_enum,
        default_value_t = serve::LogFormat::Text
    )]
    pub log_format: serve::LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the flow server.
    Serve(serve::ServeArgs),
    /// One process, nothing to set up: a simulated 24-rack fleet, an
    /// in-process server and a canary firmware rollout, shown live.
    Demo(demo::DemoArgs),
    /// Generate and import fleets.
    #[command(subcommand)]
    Fleet(FleetCommand),
    /// The rack inventory: list, show, patch, delete, purge.
    #[command(subcommand)]
    Rack(RackCommand),
    /// Components: the operational state the readiness gate reads;
    /// delete and purge.
    #[command(subcommand)]
    Component(component::ComponentCommand),
    /// NVLink domains: create, attach and detach racks, list, members.
    #[command(subcommand, name = "nvl-domain")]
    NvlDomain(lifecycle::NvlDomainCommand),
    /// Create, inspect, watch and steer operation runs.
    #[command(subcommand)]
    Run(RunCommand),
    /// Power racks or components on, off, or cycle them (one task per rack).
    #[command(subcommand)]
    Power(ops::PowerCommand),
    /// Upgrade firmware (one task per rack).
    #[command(subcommand)]
    Firmware(ops::FirmwareCommand),
    /// List, show, cancel and watch tasks.
    #[command(subcommand)]
    Task(task::TaskCommand),
    /// Manage operation rules and their rack associations.
    #[command(subcommand)]
    Rule(rule::RuleCommand),
    /// Event rules: what Flow does on its own when hardware reports an event
    /// (a coolant leak), and their site and rack bindings.
    #[command(subcommand)]
    EventRule(event_rule::EventRuleCommand),
    /// Coolant leaks: report one (as a leak monitor would), list the events.
    #[command(subcommand)]
    Leak(leak::LeakCommand),
    /// Task schedules: run an operation on persistent rack scopes at an
    /// interval, on a cron schedule or once.
    #[command(subcommand)]
    Schedule(schedule::ScheduleCommand),
    /// The audit trail: who did what, when, with what outcome.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Data keys of firmware credentials at rest: make one, rotate.
    #[command(subcommand)]
    Secrets(secrets::SecretsCommand),
    /// The rack manager (RackManager gRPC API over node back ends).
    #[command(subcommand)]
    Rms(rms::RmsCommand),
    /// Print the client and server versions.
    Version,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Mutating calls and run controls, oldest first: time, caller
    /// identity, RPC or action, outcome, run.
    List(audit::AuditListArgs),
}

#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Print a synthetic, seed-deterministic fleet as JSON.
    Generate {
        /// Number of racks (1..=65535).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(fleet::MAX_GENERATED_RACKS)))]
        racks: u32,
        /// Seed: the same seed gives the same fleet.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Group the racks into NVLink domains of this many racks (in file
        /// order; the last may be smaller); `fleet import` creates them.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        racks_per_domain: Option<u32>,
        /// Also give each rack a ToR switch, a UMS and a CDU (38
        /// components instead of 35; no built-in rule acts on them).
        #[arg(long)]
        tor_ums_cdu: bool,
    },
    /// Create the racks of a fleet file that the server does not have yet,
    /// and its NVLink domains (attaching each rack to the one it names).
    Import {
        /// Fleet file, JSON or YAML.
        file: PathBuf,
    },
    /// What differs: without --bundle, the inventory against the component
    /// manager's own (ValidateComponents: missing, unexpected and
    /// mismatched components); with --bundle, which racks and trays differ
    /// from a firmware bundle (versions as last observed, or as imported
    /// when never observed).
    Drift {
        /// Bundle file (YAML): `models: {"GB200 NVL72": {compute: …}, …}`.
        #[arg(long, value_name = "FILE.yaml", conflicts_with = "firmware_object")]
        bundle: Option<PathBuf>,
        /// A firmware object of the rack manager's catalogue instead of a
        /// bundle file: its id, or `default` (each hardware type's default);
        /// its hardware type is the rack model it covers, and per tray type
        /// the version of `[rms] version_entry` (BMC) is what is expected.
        #[arg(long, value_name = "ID")]
        firmware_object: Option<String>,
        #[command(flatten)]
        rack_manager: firmware_object::RackManagerArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum RackCommand {
    /// List racks.
    List {
        /// Include components (counts in the table, all of them in JSON).
        #[arg(long)]
        with_components: bool,
        /// Page size [server default: 100].
        #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
        limit: Option<i32>,
        /// Racks to skip.
        #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
        offset: Option<i32>,
        /// Only racks in these lifecycle statuses (comma-separated or repeated).
        #[arg(long, value_enum, value_delimiter = ',')]
        status: Vec<rack::LifecycleArg>,
    },
    /// Show one rack.
    Get {
        /// Rack UUID or external id.
        id: String,
        /// Include the rack's components.
        #[arg(long)]
        with_components: bool,
    },
    /// Create an expected rack (no components: `fleet import` brings racks
    /// with theirs), optionally in an NVLink domain.
    Create(lifecycle::RackCreateArgs),
    /// Change a rack's name, description or location; prints what changed.
    Patch(lifecycle::RackPatchArgs),
    /// AC power cycle (task power_control/cold_reset: the built-in rule
    /// cycles the compute trays); prints the task ids.
    AcPowerCycle(ops::RackOperationArgs),
    /// Bring racks up (task bring_up/bring_up: shelves, compute and
    /// switches powered on in order, compute firmware, the switches'
    /// firmware checked, compute cycled); prints the task ids.
    BringUp(ops::RackOperationArgs),
    /// Register racks' compute trays and switches with their manager (task
    /// bring_up/ingest); prints the task ids.
    Ingest(ops::RackOperationArgs),
    /// Retire racks (task decommission/decommission: compute, switches,
    /// shelves, each waited for; admin role); prints the task ids.
    Decommission(ops::RackOperationArgs),
    /// Delete a rack (soft: hidden everywhere; its external id stays
    /// reserved until it is purged).
    Delete {
        /// Rack UUID or external id.
        rack: String,
    },
    /// Delete a deleted rack for good, with its components and tasks: its
    /// external id and serial number can be imported again.
    Purge {
        /// Rack UUID (a deleted rack is found by id only).
        #[arg(value_parser = args::parse_uuid)]
        id: uuid::Uuid,
    },
}

#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// Create (or, with --preview, plan) an operation run.
    Create(Box<run::CreateArgs>),
    /// Show one run.
    Get {
        /// Run id.
        #[arg(value_parser = args::parse_uuid)]
        id: uuid::Uuid,
        /// Include per-phase target outcome counts.
        #[arg(long)]
        stats: bool,
    },
    /// List runs, newest first.
    List {
        /// Name to match; repeat for any of several.
        #[arg(long, value_name = "PATTERN")]
        name: Vec<String>,
        /// Match --name as a substring (`%` wildcards allowed).
        #[arg(long, requires = "name")]
        wildcard: bool,
        /// STATUS, STATUS:REASON or :REASON; repeat for any of several.
        #[arg(long, value_name = "STATUS[:REASON]", value_parser = run::parse_state_filter)]
        status: Vec<run::StateFilter>,
        /// Page size [server default: 100].
        #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
        limit: Option<i32>,
        /// Runs to skip.
        #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
        offset: Option<i32>,
    },
    /// List a run's targets (phase, then sequence order).
    Targets {
        /// Run id.
        #[arg(value_parser = args::parse_uuid)]
        id: uuid::Uuid,
        /// Only targets in this status.
        #[arg(long, value_parser = run::parse_target_status)]
        status: Option<rackflow_api::v1::OperationRunTargetStatus>,
        /// Which phases to list.
        #[arg(long, value_enum, default_value_t = run::PhaseScope::Current)]
        phase_scope: run::PhaseScope,
        /// Page size [server default: 100].
        #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
        limit: Option<i32>,
        /// Targets to skip.
        #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
        offset: Option<i32>,
    },
    /// Follow a run live until it ends: progress per phase, state, last
    /// message; says why it paused and which command continues it. Exit
    /// code 0 when it completed, 1 when it failed, was cancelled or
    /// completed with failures, 3 when it paused (with --exit-on-pause).
    Watch {
        /// Run id.
        #[arg(value_parser = args::parse_uuid)]
        id: uuid::Uuid,
        /// Stop (exit code 3) when the run pauses instead of watching on.
        #[arg(long)]
        exit_on_pause: bool,
    },
    /// Pause a pending or running run (targets already submitted go on).
    Pause {
        /// Run id.
        #[arg(value_parser = args::parse_uuid)]
        id: uuid::Uuid,
    },
    /// Resume a run paused by an operator, a safety gate or a conflict
    /// timeout (a phase gate needs `run advance`).
    Resume {
        /// Run id.
        #[arg(value_parser = args::parse_uuid)]
        id: uuid::Uuid,
    },
    /// Open the next phase of a run paused at a phase gate.
    Advance {
        /// Run id.
        #[arg(value_parser = args::parse_uuid)]
        id: uuid::Uuid,
        /// Only advance if this is the phase that opens (0-based), so that
        /// a repeated command never skips a phase.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..))]
        expected_phase: Option<i32>,
    },
    /// Cancel a run and the current phase's child tasks.
    Cancel {
        /// Run id.
        #[arg(value_parser = args::parse_uuid)]
        id: uuid::Uuid,
        /// Why; kept in the run's message (`operation run cancelled: TEXT`).
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
    },
}

/// Parses the command line, runs the command, and turns an error into one
/// stderr line and exit code 1 (usage errors exit with 2, from clap).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(execute(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            client::report_error(&err);
            ExitCode::from(client::exit_code(&err))
        }
    }
}

/// Runs one parsed command.
pub async fn execute(cli: Cli) -> anyhow::Result<()> {
    let server = &client::ServerAddress::new(
        cli.server.clone(),
        rackflow_security::ClientTlsFiles {
            ca: cli.tls_ca.clone(),
            cert: cli.tls_cert.clone(),
            key: cli.tls_key.clone(),
            server_name: cli.tls_server_name.clone(),
        },
    );
    let output = cli.output;
    serve::set_log_format(cli.log_format);
    // Commands whose failures are about `server` (not the embedded one of
    // `demo`, nor the rack manager `rms` talks to).
    let talks_to_server = !matches!(
        cli.command,
        Command::Serve(_)
            | Command::Demo(_)
            | Command::Rms(_)
            | Command::Fleet(FleetCommand::Generate { .. })
    );
    let result = run_command(cli.command, server, output).await;
    match result {
        Err(err) if talks_to_server => Err(diagnose::diagnose(server, err).await),
        other => other,
    }
}

async fn run_command(
    command: Command,
    server: &client::ServerAddress,
    output: OutputFormat,
) -> anyhow::Result<()> {
    match command {
        Command::Serve(args) => serve::run(&args).await,
        Command::Demo(args) => demo::run(&args, output).await,
        Command::Fleet(FleetCommand::Generate {
            racks,
            seed,
            racks_per_domain,
            tor_ums_cdu,
        }) => fleet::run_generate(racks, seed, racks_per_domain, tor_ums_cdu),
        Command::Fleet(FleetCommand::Import { file }) => {
            fleet::run_import(server, &file, output).await
        }
        Command::Fleet(FleetCommand::Drift {
            bundle,
            firmware_object,
            rack_manager,
        }) => match (bundle, firmware_object) {
            (Some(bundle), _) => drift::run_drift(server, &bundle, output).await,
            (None, Some(object)) => {
                drift::run_object_drift(server, &rack_manager, &object, output).await
            }
            (None, None) => drift::run_validate(server, output).await,
        },
        Command::Rack(RackCommand::List {
            with_components,
            limit,
            offset,
            status,
        }) => rack::run_list(server, with_components, limit, offset, &status, output).await,
        Command::Rack(RackCommand::Get {
            id,
            with_components,
        }) => rack::run_get(server, &id, with_components, output).await,
        Command::Rack(RackCommand::Create(args)) => {
            lifecycle::run_rack_create(server, &args, output).await
        }
        Command::Rack(RackCommand::AcPowerCycle(args)) => {
            ops::run_rack_operation(server, ops::RackOperation::AcPowerCycle, &args, output).await
        }
        Command::Rack(RackCommand::BringUp(args)) => {
            ops::run_rack_operation(server, ops::RackOperation::BringUp, &args, output).await
        }
        Command::Rack(RackCommand::Ingest(args)) => {
            ops::run_rack_operation(server, ops::RackOperation::Ingest, &args, output).await
        }
        Command::Rack(RackCommand::Decommission(args)) => {
            ops::run_rack_operation(server, ops::RackOperation::Decommission, &args, output).await
        }
        Command::Rack(RackCommand::Patch(args)) => {
            lifecycle::run_rack_patch(server, &args, output).await
        }
        Command::Rack(RackCommand::Delete { rack }) => {
            lifecycle::run_rack_delete(server, &rack, output).await
        }
        Command::Rack(RackCommand::Purge { id }) => {
            lifecycle::run_rack_purge(server, id, output).await
        }
        Command::NvlDomain(command) => lifecycle::run_nvl_domain(server, &command, output).await,
        Command::Run(RunCommand::Create(args)) => run::run_create(server, &args, output).await,
        Command::Run(RunCommand::Get { id, stats }) => {
            run::run_get(server, id, stats, output).await
        }
        Command::Run(RunCommand::List {
            name,
            wildcard,
            status,
            limit,
            offset,
        }) => run::run_list(server, &name, wildcard, &status, limit, offset, output).await,
        Command::Run(RunCommand::Targets {
            id,
            status,
            phase_scope,
            limit,
            offset,
        }) => run::run_targets(server, id, status, phase_scope, limit, offset, output).await,
        Command::Run(RunCommand::Watch { id, exit_on_pause }) => {
            watch::run_watch(server, id, exit_on_pause, output).await
        }
        Command::Run(RunCommand::Pause { id }) => {
            control::run_control(server, id, &control::Control::Pause, output).await
        }
        Command::Run(RunCommand::Resume { id }) => {
            control::run_control(server, id, &control::Control::Resume, output).await
        }
        Command::Run(RunCommand::Advance { id, expected_phase }) => {
            let control = control::Control::Advance { expected_phase };
            control::run_control(server, id, &control, output).await
        }
        Command::Run(RunCommand::Cancel { id, reason }) => {
            let control = control::Control::Cancel { reason };
            control::run_control(server, id, &control, output).await
        }
        Command::Power(command) => ops::run_power(server, &command, output).await,
        Command::Firmware(command) => ops::run_firmware(server, &command, output).await,
        Command::Task(task::TaskCommand::List(args)) => task::run_list(server, &args, output).await,
        Command::Task(task::TaskCommand::Get { ids }) => task::run_get(server, &ids, output).await,
        Command::Task(task::TaskCommand::Cancel { id }) => {
            task::run_cancel(server, id, output).await
        }
        Command::Task(task::TaskCommand::Watch { id, interval }) => {
            task::run_watch(server, id, interval, output).await
        }
        Command::Rule(command) => rule::run(server, &command, output).await,
        Command::EventRule(command) => event_rule::run(server, &command, output).await,
        Command::Leak(command) => leak::run(server, &command, output).await,
        Command::Schedule(command) => schedule::run(server, &command, output).await,
        Command::Rms(command) => rms::run(&command, server, output).await,
        Command::Audit(AuditCommand::List(args)) => audit::run_list(server, &args, output).await,
        Command::Secrets(command) => secrets::run(server, &command, output).await,
        Command::Component(command) => component::run(server, &command, output).await,
        Command::Version => version(server, output).await,
    }
}

/// JSON of `rackflow version`.
#[derive(Debug, serde::Serialize)]
struct VersionView {
    client: String,
    server: ServerVersionView,
}

#[derive(Debug, serde::Serialize)]
struct ServerVersionView {
    version: String,
    build_time: String,
    git_commit: String,
}

/// `rackflow version`: the client version, then the server's.
async fn version(
    server: &crate::client::ServerAddress,
    output: OutputFormat,
) -> anyhow::Result<()> {
    if output == OutputFormat::Table {
        crate::outln!("client: rackflow {CLIENT_VERSION}");
    }
    let mut flow = client::connect(server).await?;
    let info = flow
        .version(rackflow_api::v1::VersionRequest {})
        .await?
        .into_inner();
    match output {
        OutputFormat::Json => output::print_json(&VersionView {
            client: CLIENT_VERSION.to_string(),
            server: ServerVersionView {
                version: info.version,
                build_time: info.build_time,
                git_commit: info.git_commit,
            },
        })?,
        OutputFormat::Table => {
            let mut line = format!("server: rackflow {} at {server}", info.version);
            let extra: Vec<String> = [("commit", &info.git_commit), ("built", &info.build_time)]
                .iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            if !extra.is_empty() {
                line.push_str(&format!(" ({})", extra.join(", ")));
            }
            crate::outln!("{line}");
        }
    }
    Ok(())
}
