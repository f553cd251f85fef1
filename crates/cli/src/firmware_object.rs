//! `rackflow rms firmware-object …`: the rack manager's firmware-object
//! catalogue (issue 35) — add a manifest, list, show, make default, delete,
//! read the apply history, compare a rack against an object — and the rack
//! manager connection `rackflow fleet drift --firmware-object` shares.
//!
//! The rack manager is found as `rackflow rms sync` finds it: `--config`
//! (Flow's file: its `[rms]` address, TLS and `version_entry`), then
//! `--rack-manager`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use rackflow_api::rack_manager as pb;
use rackflow_api::rack_manager::rack_manager_client::RackManagerClient;
use rackflow_engine::manager::rms::{RmsManager, RmsProviderConfig};
use serde::Serialize;
use tonic::transport::Channel;

use crate::output::{OutputFormat, Table, or_dash, print_json};

/// Where the rack manager is.
#[derive(Debug, Clone, Default, Args)]
pub struct RackManagerArgs {
    /// Flow's configuration file: its `[rms]` section gives the rack
    /// manager's address and TLS files (and the version entry, BMC login).
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// The rack manager's address [default: rms.address of --config, else
    /// http://127.0.0.1:8801].
    #[arg(long, value_name = "URL")]
    pub rack_manager: Option<String>,
}

impl RackManagerArgs {
    /// The `[rms]` settings: the file's, then the flag.
    pub fn settings(&self) -> anyhow::Result<RmsProviderConfig> {
        let mut rms = match &self.config {
            Some(path) => {
                rackflow_server::Config::load(Some(path))
                    .with_context(|| format!("load {}", path.display()))?
                    .rms
            }
            None => RmsProviderConfig::default(),
        };
        if let Some(address) = &self.rack_manager {
            rms.address = address.clone();
        }
        Ok(rms)
    }

    pub fn client(&self) -> anyhow::Result<(RackManagerClient<Channel>, RmsProviderConfig)> {
        let settings = self.settings()?;
        let client = RmsManager::new(settings.clone())
            .context("connect to the rack manager")?
            .client();
        Ok((client, settings))
    }
}

/// `rackflow rms firmware-object …`.
#[derive(Debug, Subcommand)]
pub enum FirmwareObjectCommand {
    /// Add a firmware object from its manifest (the reference's release
    /// catalogue JSON, see docs/rms.md); its artifacts are fetched in the
    /// background and it is available once all are verified.
    Add(AddArgs),
    /// List firmware objects.
    List(ListArgs),
    /// Show one object: availability, components per device type, artifacts.
    Get(IdArgs),
    /// Make an object the default of its hardware type.
    SetDefault(IdArgs),
    /// Delete an object and its files (refused while an apply runs).
    Delete(IdArgs),
    /// Where objects were applied, newest first.
    History(HistoryArgs),
    /// Compare a rack's registered nodes with an object: per node and
    /// component, MATCHED / MISMATCHED / MISSING / UNVERIFIED.
    Compare(CompareArgs),
}

#[derive(Debug, Clone, Args)]
pub struct AddArgs {
    /// The manifest (JSON).
    #[arg(value_name = "MANIFEST.json")]
    pub file: PathBuf,
    /// Hardware type the object is for (defaults are per hardware type);
    /// for Flow, the rack model (e.g. "GB200 NVL72").
    #[arg(long)]
    pub hardware_type: String,
    /// Make it its hardware type's default (the first object of a type
    /// becomes the default anyway).
    #[arg(long)]
    pub set_default: bool,
    /// File whose first line is the token the artifact store wants (sent as
    /// a bearer token for the download only; never stored).
    #[arg(long, value_name = "FILE")]
    pub access_token_file: Option<PathBuf>,
    /// Wait until the object is available (or its download failed), at most
    /// this many seconds; fails if it is not available.
    #[arg(long, value_name = "SECONDS")]
    pub wait: Option<u64>,
    #[command(flatten)]
    pub rack_manager: RackManagerArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    /// Only objects whose artifacts are all present and verified.
    #[arg(long)]
    pub available: bool,
    /// Only this hardware type.
    #[arg(long)]
    pub hardware_type: Option<String>,
    #[command(flatten)]
    pub rack_manager: RackManagerArgs,
}

#[derive(Debug, Clone, Args)]
pub struct IdArgs {
    /// Firmware object id (`{ProductName}_{Milestone}`).
    pub id: String,
    #[command(flatten)]
    pub rack_manager: RackManagerArgs,
}

#[derive(Debug, Clone, Args)]
pub struct HistoryArgs {
    /// Only this object.
    #[arg(long)]
    pub object: Option<String>,
    /// Only these racks (repeat or comma-separate).
    #[arg(long, value_delimiter = ',')]
    pub rack: Vec<String>,
    #[command(flatten)]
    pub rack_manager: RackManagerArgs,
}

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Firmware object id.
    pub id: String,
    /// The rack (its id at the rack manager: Flow's rack external id).
    #[arg(long)]
    pub rack: String,
    /// Artifact channel [default: prod].
    #[arg(long)]
    pub firmware_type: Option<String>,
    #[command(flatten)]
    pub rack_manager: RackManagerArgs,
}

/// Runs one `rackflow rms firmware-object` command.
pub async fn run(command: &FirmwareObjectCommand, output: OutputFormat) -> anyhow::Result<()> {
    match command {
        FirmwareObjectCommand::Add(args) => add(args, output).await,
        FirmwareObjectCommand::List(args) => {
            let (mut client, _) = args.rack_manager.client()?;
            let objects = client
                .list_firmware_objects(pb::ListFirmwareObjectsRequest {
                    only_available: args.available,
                    hardware_type: args.hardware_type.clone().unwrap_or_default(),
                })
                .await
                .map_err(status_error("list firmware objects"))?
                .into_inner()
                .objects;
            print_objects(&objects, output)
        }
        FirmwareObjectCommand::Get(args) => {
            let (mut client, _) = args.rack_manager.client()?;
            let object = get(&mut client, &args.id).await?;
            print_object(&object, output)
        }
        FirmwareObjectCommand::SetDefault(args) => {
            let (mut client, _) = args.rack_manager.client()?;
            let object = client
                .set_default_firmware_object(pb::SetDefaultFirmwareObjectRequest {
                    object_id: args.id.clone(),
                })
                .await
                .map_err(status_error("set the default firmware object"))?
                .into_inner()
                .object
                .context("the rack manager returned no object")?;
            match output {
                OutputFormat::Json => print_json(&ObjectView::of(&object)),
                OutputFormat::Table => {
                    crate::outln!("{} is the default for {}", object.id, object.hardware_type);
                    Ok(())
                }
            }
        }
        FirmwareObjectCommand::Delete(args) => {
            let (mut client, _) = args.rack_manager.client()?;
            let response = client
                .delete_firmware_object(pb::DeleteFirmwareObjectRequest {
                    id: args.id.clone(),
                })
                .await
                .map_err(status_error("delete the firmware object"))?
                .into_inner()
                .response
                .unwrap_or_default();
            anyhow::ensure!(
                response.status == pb::ReturnCode::Success as i32,
                "{}",
                response.message
            );
            crate::outln!("{}", response.message);
            Ok(())
        }
        FirmwareObjectCommand::History(args) => history(args, output).await,
        FirmwareObjectCommand::Compare(args) => compare(args, output).await,
    }
}

fn status_error(what: &'static str) -> impl Fn(tonic::Status) -> anyhow::Error {
    move |status| anyhow::anyhow!("{what}: {} ({:?})", status.message(), status.code())
}

async fn get(
    client: &mut RackManagerClient<Channel>,
    id: &str,
) -> anyhow::Result<pb::FirmwareObject> {
    client
        .get_firmware_object(pb::GetFirmwareObjectRequest { id: id.to_owned() })
        .await
        .map_err(status_error("get the firmware object"))?
        .into_inner()
        .object
        .context("the rack manager returned no object")
}

async fn add(args: &AddArgs, output: OutputFormat) -> anyhow::Result<()> {
    let config_json = std::fs::read_to_string(&args.file)
        .with_context(|| format!("read {}", args.file.display()))?;
    let access_token = match &args.access_token_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("read --access-token-file {}", path.display()))?
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned(),
        ),
        None => None,
    };
    let (mut client, _) = args.rack_manager.client()?;
    let mut object = client
        .add_firmware_object(pb::AddFirmwareObjectRequest {
            config_json,
            access_token,
            hardware_type: args.hardware_type.clone(),
            set_default: args.set_default,
        })
        .await
        .map_err(status_error("add the firmware object"))?
        .into_inner()
        .object
        .context("the rack manager returned no object")?;
    if let Some(seconds) = args.wait {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
        while !object.available && object.unavailable_reason.is_none() {
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "firmware object {} is not available after {seconds} s (its artifacts are still being fetched)",
                object.id
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
            object = get(&mut client, &object.id).await?;
        }
    }
    print_object(&object, output)?;
    if args.wait.is_some() {
        anyhow::ensure!(
            object.available,
            "firmware object {} is not available: {}",
            object.id,
            object.unavailable_reason.as_deref().unwrap_or_default()
        );
    }
    Ok(())
}

async fn history(args: &HistoryArgs, output: OutputFormat) -> anyhow::Result<()> {
    let (mut client, _) = args.rack_manager.client()?;
    let records = client
        .get_firmware_object_history(pb::GetFirmwareObjectHistoryRequest {
            object_id: args.object.clone().unwrap_or_default(),
            rack_ids: args.rack.clone(),
        })
        .await
        .map_err(status_error("read the firmware object history"))?
        .into_inner()
        .records;
    let views: Vec<HistoryView> = records
        .iter()
        .map(|r| HistoryView {
            object_id: r.object_id.clone(),
            rack_id: r.rack_id.clone(),
            firmware_type: r.firmware_type.clone(),
            applied_at: crate::output::timestamp(r.applied_at.as_ref()),
            hardware_type: r.hardware_type.clone(),
            node_ids: r.node_ids.clone(),
        })
        .collect();
    match output {
        OutputFormat::Json => print_json(&views),
        OutputFormat::Table => {
            let mut table = Table::new(["APPLIED", "OBJECT", "RACK", "CHANNEL", "NODES"]);
            for v in &views {
                table.row([
                    or_dash(v.applied_at.as_deref().unwrap_or_default()),
                    v.object_id.clone(),
                    v.rack_id.clone(),
                    or_dash(&v.firmware_type),
                    v.node_ids.join(","),
                ]);
            }
            table.print();
            Ok(())
        }
    }
}

async fn compare(args: &CompareArgs, output: OutputFormat) -> anyhow::Result<()> {
    let (mut client, _) = args.rack_manager.client()?;
    let object = get(&mut client, &args.id).await?;
    let inventory = client
        .list_node_inventory(pb::ListNodeInventoryRequest {})
        .await
        .map_err(status_error("list the rack manager's nodes"))?
        .into_inner()
        .nodes;
    // Registered nodes by reference: the rack manager reads them through
    // the endpoints it has.
    let nodes: Vec<pb::NodeInfo> = inventory
        .into_iter()
        .filter(|n| n.rack_id == args.rack)
        .map(|n| pb::NodeInfo {
            node_id: n.node_id,
            rack_id: n.rack_id,
            ..Default::default()
        })
        .collect();
    anyhow::ensure!(
        !nodes.is_empty(),
        "the rack manager has no node registered in rack {} (rackflow rms sync registers Flow's inventory)",
        args.rack
    );
    let resp = client
        .compare_firmware_object(pb::CompareFirmwareObjectRequest {
            config_json: object.config_json,
            firmware_type: args.firmware_type.clone().unwrap_or_default(),
            nodes: Some(pb::NodeSet { nodes }),
            ..Default::default()
        })
        .await
        .map_err(status_error("compare"))?
        .into_inner();
    let response = resp.response.unwrap_or_default();
    let rows: Vec<ComparisonRow> = resp
        .nodes
        .iter()
        .flat_map(|n| {
            n.components.iter().map(|c| ComparisonRow {
                node: n.node_id.clone(),
                component: c.component.clone(),
                installed: c.installed_version.clone(),
                proposed: c.proposed_version.clone(),
                status: pb::FirmwareComparisonStatus::try_from(c.status)
                    .map(|s| {
                        s.as_str_name()
                            .trim_start_matches("FIRMWARE_COMPARISON_STATUS_")
                            .to_owned()
                    })
                    .unwrap_or_else(|_| c.status.to_string()),
                reason: c.reason.clone(),
            })
        })
        .collect();
    let failed: Vec<String> = response
        .node_results
        .iter()
        .filter(|r| r.status != pb::ReturnCode::Success as i32)
        .map(|r| format!("{}: {}", r.node_id, r.error_message))
        .collect();
    match output {
        OutputFormat::Json => print_json(&CompareView {
            object_id: resp.object_id.clone(),
            matches: resp.matches_manifest,
            components: rows,
            failed_nodes: failed.clone(),
        })?,
        OutputFormat::Table => {
            let mut table = Table::new([
                "NODE",
                "COMPONENT",
                "INSTALLED",
                "OBJECT",
                "STATUS",
                "REASON",
            ]);
            for r in &rows {
                table.row([
                    r.node.clone(),
                    r.component.clone(),
                    or_dash(&r.installed),
                    or_dash(&r.proposed),
                    r.status.clone(),
                    or_dash(&r.reason),
                ]);
            }
            table.print();
            for f in &failed {
                crate::outln!("not read: {f}");
            }
            crate::outln!("{}", response.message);
        }
    }
    anyhow::ensure!(
        resp.matches_manifest,
        "rack {} does not match firmware object {}",
        args.rack,
        args.id
    );
    Ok(())
}

#[derive(Debug, Serialize)]
struct ObjectView {
    id: String,
    hardware_type: String,
    available: bool,
    is_default: bool,
    unavailable_reason: Option<String>,
    updated: Option<String>,
    components: Vec<ComponentView>,
    switch_images: Vec<String>,
}

#[derive(Debug, Serialize)]
struct ComponentView {
    device_type: String,
    name: String,
    version: String,
    artifacts: Vec<String>,
}

impl ObjectView {
    fn of(o: &pb::FirmwareObject) -> ObjectView {
        let meta = o.metadata.clone().unwrap_or_default();
        // One entry per device type (the metadata repeats it per node type).
        let mut components: Vec<ComponentView> = Vec::new();
        for device in &meta.device_components {
            for c in &device.components {
                if components
                    .iter()
                    .any(|v| v.device_type == device.device_type && v.name == c.name)
                {
                    continue;
                }
                components.push(ComponentView {
                    device_type: device.device_type.clone(),
                    name: c.name.clone(),
                    version: c.version.clone(),
                    artifacts: c.artifacts.iter().map(|a| a.filename.clone()).collect(),
                });
            }
        }
        ObjectView {
            id: o.id.clone(),
            hardware_type: o.hardware_type.clone(),
            available: o.available,
            is_default: o.is_default,
            unavailable_reason: o.unavailable_reason.clone(),
            updated: crate::output::timestamp(o.updated.as_ref()),
            components,
            switch_images: meta
                .switch_system_images
                .iter()
                .map(|i| format!("{} {} ({})", i.package_name, i.version, i.image_filename))
                .collect(),
        }
    }
}

#[derive(Debug, Serialize)]
struct HistoryView {
    object_id: String,
    rack_id: String,
    firmware_type: String,
    applied_at: Option<String>,
    hardware_type: String,
    node_ids: Vec<String>,
}

#[derive(Debug, Serialize)]
struct ComparisonRow {
    node: String,
    component: String,
    installed: String,
    proposed: String,
    status: String,
    reason: String,
}

#[derive(Debug, Serialize)]
struct CompareView {
    object_id: String,
    matches: bool,
    components: Vec<ComparisonRow>,
    failed_nodes: Vec<String>,
}

fn availability(o: &pb::FirmwareObject) -> String {
    if o.available {
        "available".to_owned()
    } else if let Some(reason) = &o.unavailable_reason {
        format!("unavailable: {reason}")
    } else {
        "fetching".to_owned()
    }
}

fn print_objects(objects: &[pb::FirmwareObject], output: OutputFormat) -> anyhow::Result<()> {
    match output {
        OutputFormat::Json => print_json(&objects.iter().map(ObjectView::of).collect::<Vec<_>>()),
        OutputFormat::Table => {
            let mut table = Table::new(["ID", "HARDWARE TYPE", "DEFAULT", "STATE", "UPDATED"]);
            for o in objects {
                table.row([
                    o.id.clone(),
                    o.hardware_type.clone(),
                    if o.is_default { "yes" } else { "" }.to_owned(),
                    availability(o),
                    or_dash(&crate::output::timestamp(o.updated.as_ref()).unwrap_or_default()),
                ]);
            }
            table.print();
            Ok(())
        }
    }
}

fn print_object(o: &pb::FirmwareObject, output: OutputFormat) -> anyhow::Result<()> {
    let view = ObjectView::of(o);
    match output {
        OutputFormat::Json => print_json(&view),
        OutputFormat::Table => {
            crate::outln!("id:            {}", view.id);
            crate::outln!(
                "hardware type: {}{}",
                view.hardware_type,
                if view.is_default { " (default)" } else { "" }
            );
            crate::outln!("state:         {}", availability(o));
            let mut table = Table::new(["DEVICE", "COMPONENT", "VERSION", "ARTIFACTS"]);
            for c in &view.components {
                table.row([
                    c.device_type.clone(),
                    c.name.clone(),
                    or_dash(&c.version),
                    c.artifacts.join(","),
                ]);
            }
            table.print();
            for image in &view.switch_images {
                crate::outln!("switch system image: {image}");
            }
            Ok(())
        }
    }
}
