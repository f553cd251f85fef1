//! The firmware-object RPCs (issue 35): the catalogue (`Add`, `Get`,
//! `List`, `Delete`, `SetDefault`, `GetFirmwareObjectHistory`), applying an
//! object to nodes (`ApplyStoredFirmwareObject`, `ApplyFirmwareObject`) and
//! comparing nodes against one (`CompareFirmwareObject`).
//!
//! Errors: the RPCs whose responses carry no status (Add, Get, SetDefault,
//! List) answer catalogue errors as gRPC codes (spec §2.1 case 5); the
//! others answer business failures in-band.
//!
//! Apply: every node of the request gets a child job of one parent (the job
//! model's batch admission); a node's firmware targets are its node type's
//! components of the object (narrowed by the component filters), one target
//! per artifact of the requested channel (`firmware_type`; empty means
//! `prod`, and artifacts without a channel serve every channel). A node that
//! carries no BMC endpoint but is registered under (rack, node) is driven
//! through its registered endpoint (rackflow's addition: Flow applies
//! objects to the nodes it registered without sending credentials again).
//! A stored apply records history; an ephemeral one fetches the object's
//! artifacts into a per-request cache after admission, runs the updates, and
//! a cleanup plan removes the cache once every child job is terminal.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::Utc;
use futures_util::StreamExt as _;
use rackflow_api::rack_manager as pb;
use tonic::Status;

use super::firmware::{firmware_failure, resolve_targets, spawn_worker};
use super::{RackManagerService, batch_response, nodes, operation_response, timestamp};
use crate::backend::{NodeKind, NodeTarget, Secret};
use crate::catalog::manifest::{DeviceComponents, ManifestComponent};
use crate::catalog::{
    Catalog, CatalogError, CatalogObject, EPHEMERAL_CACHE_SUBDIR, HistoryRecord, Manifest,
};
use crate::job::{JobError, JobId, JobType, RmsJobHandle};

/// The one place catalogue errors become gRPC statuses.
pub(crate) fn catalog_status(error: CatalogError) -> Status {
    match error {
        CatalogError::NotFound(m) => Status::not_found(m),
        CatalogError::AlreadyExists(m) => Status::already_exists(m),
        CatalogError::InvalidArgument(m) => Status::invalid_argument(m),
        CatalogError::FailedPrecondition(m) => Status::failed_precondition(m),
        CatalogError::Storage(m) => Status::internal(m),
    }
}

/// An id the request must carry (`INVALID_ARGUMENT` "{field} is required").
fn required_id(id: &str, field: &str) -> Result<(), Status> {
    if id.trim().is_empty() {
        return Err(Status::invalid_argument(format!("{field} is required")));
    }
    Ok(())
}

/// The wire form of a stored object.
pub(crate) fn object_proto(object: &CatalogObject) -> pb::FirmwareObject {
    let stored = &object.stored;
    pb::FirmwareObject {
        id: stored.id.clone(),
        config_json: stored.config_json.clone(),
        available: stored.available,
        created: Some(timestamp(stored.created)),
        updated: Some(timestamp(stored.updated)),
        metadata: Some(object.manifest.metadata(&object.cache_prefix())),
        hardware_type: stored.hardware_type.clone(),
        is_default: stored.is_default,
        unavailable_reason: stored.unavailable_reason.clone(),
    }
}

fn history_proto(record: HistoryRecord) -> pb::FirmwareObjectHistoryRecord {
    pb::FirmwareObjectHistoryRecord {
        object_id: record.object_id,
        rack_id: record.rack_id,
        firmware_type: record.firmware_type,
        applied_at: Some(timestamp(record.applied_at)),
        firmware_available: record.firmware_available,
        hardware_type: record.hardware_type,
        node_ids: record.node_ids,
    }
}

/// The request fields an apply or a comparison selects components with.
struct Selection<'a> {
    firmware_type: &'a str,
    component_filters: &'a HashMap<i32, pb::FirmwareObjectComponentFilter>,
    descriptor_filters: &'a [pb::NodeDescriptorFirmwareObjectComponentFilter],
    /// The deprecated global component filter.
    components: &'a [String],
}

/// One node of an apply or comparison, resolved.
struct NodeRequest {
    info: pb::NodeInfo,
    target: Result<NodeTarget, String>,
}

impl RackManagerService {
    fn catalog(&self) -> Result<&Arc<Catalog>, Status> {
        self.catalog.as_ref().ok_or_else(|| {
            Status::failed_precondition(
                "this rack manager runs without a firmware object catalogue",
            )
        })
    }

    pub(super) async fn add_firmware_object(
        &self,
        req: pb::AddFirmwareObjectRequest,
    ) -> Result<pb::AddFirmwareObjectResponse, Status> {
        let token = req
            .access_token
            .filter(|t| !t.trim().is_empty())
            .map(Secret::new);
        let object = self
            .catalog()?
            .add(&req.config_json, token, &req.hardware_type, req.set_default)
            .await
            .map_err(catalog_status)?;
        Ok(pb::AddFirmwareObjectResponse {
            object: Some(object_proto(&object)),
        })
    }

    pub(super) async fn get_firmware_object(
        &self,
        req: pb::GetFirmwareObjectRequest,
    ) -> Result<pb::GetFirmwareObjectResponse, Status> {
        required_id(&req.id, "id")?;
        let object = self.catalog()?.get(&req.id).await.map_err(catalog_status)?;
        Ok(pb::GetFirmwareObjectResponse {
            object: Some(object_proto(&object)),
        })
    }

    pub(super) async fn list_firmware_objects(
        &self,
        req: pb::ListFirmwareObjectsRequest,
    ) -> Result<pb::ListFirmwareObjectsResponse, Status> {
        let objects = self
            .catalog()?
            .list(req.only_available, req.hardware_type.trim())
            .await;
        Ok(pb::ListFirmwareObjectsResponse {
            objects: objects.iter().map(object_proto).collect(),
        })
    }

    pub(super) async fn delete_firmware_object(
        &self,
        req: pb::DeleteFirmwareObjectRequest,
    ) -> Result<pb::DeleteFirmwareObjectResponse, Status> {
        let catalog = self.catalog()?;
        let result = if req.id.trim().is_empty() {
            Err(CatalogError::InvalidArgument("id is required".to_owned()))
        } else {
            catalog.delete(&req.id, |id| self.apply_in_flight(id)).await
        };
        let response = match result {
            Ok(()) => operation_response(true, format!("deleted firmware object {}", req.id)),
            Err(error) => {
                tracing::warn!(object_id = %req.id, %error, "firmware object not deleted");
                operation_response(false, error.to_string())
            }
        };
        Ok(pb::DeleteFirmwareObjectResponse {
            response: Some(response),
        })
    }

    pub(super) async fn set_default_firmware_object(
        &self,
        req: pb::SetDefaultFirmwareObjectRequest,
    ) -> Result<pb::SetDefaultFirmwareObjectResponse, Status> {
        required_id(&req.object_id, "object_id")?;
        let object = self
            .catalog()?
            .set_default(&req.object_id)
            .await
            .map_err(catalog_status)?;
        Ok(pb::SetDefaultFirmwareObjectResponse {
            object: Some(object_proto(&object)),
        })
    }

    pub(super) async fn get_firmware_object_history(
        &self,
        req: pb::GetFirmwareObjectHistoryRequest,
    ) -> Result<pb::GetFirmwareObjectHistoryResponse, Status> {
        let records = self
            .catalog()?
            .history(req.object_id.trim(), &req.rack_ids)
            .await;
        Ok(pb::GetFirmwareObjectHistoryResponse {
            records: records.into_iter().map(history_proto).collect(),
        })
    }

    /// The parent job of an apply of `object_id` that has not ended.
    fn apply_in_flight(&self, object_id: &str) -> Option<String> {
        let mut applies = super::lock(&self.applies);
        let parents = applies.get_mut(object_id)?;
        parents.retain(|parent| {
            self.tracker
                .get_job(parent)
                .is_some_and(|job| !job.state.is_terminal())
        });
        parents.first().cloned()
    }

    fn track_apply(&self, object_id: &str, parent: &str) {
        super::lock(&self.applies)
            .entry(object_id.to_owned())
            .or_default()
            .push(parent.to_owned());
    }

    /// Resolves a request's nodes: its own endpoints, else the registered
    /// node's (module docs). Updates need credentials (as
    /// `BatchUpdateFirmware`); a comparison only reads.
    fn apply_nodes(
        &self,
        set: Option<&pb::NodeSet>,
        rack_id: &str,
        require_credentials: bool,
    ) -> Result<Vec<NodeRequest>, Status> {
        let nodes_in = set.map(|s| s.nodes.clone()).unwrap_or_default();
        self.admit_nodes(&nodes_in)?;
        Ok(nodes_in
            .into_iter()
            .map(|mut info| {
                if info.rack_id.trim().is_empty() {
                    info.rack_id = rack_id.to_owned();
                }
                let target = if info.bmc_endpoint.is_none() {
                    match self.nodes.get(&info.rack_id, &info.node_id) {
                        Ok(registered) => {
                            if info.r#type.is_none() {
                                info.r#type = Some(registered.target.node_type);
                            }
                            if info.node_descriptor.is_none() {
                                info.node_descriptor = registered.info.node_descriptor.clone();
                            }
                            Ok(registered.target)
                        }
                        Err(_) => nodes::target_of(&info, require_credentials),
                    }
                } else {
                    nodes::target_of(&info, require_credentials)
                };
                NodeRequest { info, target }
            })
            .collect())
    }

    pub(super) async fn apply_stored_firmware_object(
        &self,
        req: pb::ApplyStoredFirmwareObjectRequest,
    ) -> Result<pb::ApplyStoredFirmwareObjectResponse, Status> {
        let catalog = Arc::clone(self.catalog()?);
        let respond = |response: pb::NodeBatchResponse, object_id: String, jobs| {
            Ok(pb::ApplyStoredFirmwareObjectResponse {
                response: Some(response),
                object_id,
                jobs,
            })
        };
        let nodes = self.apply_nodes(req.nodes.as_ref(), &req.rack_id, true)?;
        let object = match stored_object(&catalog, &req.object_id, &req.hardware_type).await {
            Ok(object) => object,
            Err(message) => {
                return respond(batch_response::failure(&message), req.object_id, Vec::new());
            }
        };
        let id = object.stored.id.clone();
        if nodes.is_empty() {
            return respond(
                batch_response::failure("No nodes specified in request"),
                id,
                Vec::new(),
            );
        }
        // The deprecated global filter still narrows every node type, as
        // reference clients that send it expect.
        #[allow(deprecated)]
        let components = &req.components;
        let selection = Selection {
            firmware_type: &req.firmware_type,
            component_filters: &req.component_filters,
            descriptor_filters: &req.node_descriptor_component_filters,
            components,
        };
        let prefix = object.cache_prefix();
        let firmware_dir = self.config.firmware_dir.clone();
        let planned = plan_nodes(
            &object.manifest,
            nodes,
            &selection,
            |targets| resolve_targets(&firmware_dir, &targets, true).map_err(|e| e.message),
            &prefix,
        );
        let rack_id = rack_of(&req.rack_id, &planned);
        let (response, jobs, admitted) = self.start_apply(&rack_id, planned);
        if !admitted.is_empty() {
            let parent = response.job_id.clone();
            self.track_apply(&id, &parent);
            let record = HistoryRecord {
                object_id: id.clone(),
                rack_id,
                firmware_type: req.firmware_type.clone(),
                applied_at: Utc::now(),
                firmware_available: true,
                hardware_type: object.stored.hardware_type.clone(),
                node_ids: admitted.iter().map(|(node, _, _)| node.clone()).collect(),
                job_id: parent,
            };
            if let Err(error) = catalog.record_apply(record).await {
                tracing::error!(object_id = %id, %error, "apply history not recorded");
            }
        }
        for (_, job, (target, resolved)) in admitted {
            spawn_worker(
                &self.tracker,
                job,
                self.worker(target, resolved, false, req.force_update),
            );
        }
        respond(response, id, jobs)
    }

    pub(super) async fn apply_firmware_object(
        &self,
        req: pb::ApplyFirmwareObjectRequest,
    ) -> Result<pb::ApplyFirmwareObjectResponse, Status> {
        let catalog = Arc::clone(self.catalog()?);
        let respond = |response: pb::NodeBatchResponse, object_id: String, jobs| {
            Ok(pb::ApplyFirmwareObjectResponse {
                response: Some(response),
                object_id,
                jobs,
            })
        };
        let nodes = self.apply_nodes(req.nodes.as_ref(), &req.rack_id, true)?;
        let manifest = match Manifest::parse(&req.config_json) {
            Ok(m) => m,
            Err(e) => {
                return respond(
                    batch_response::failure(&format!("invalid config_json: {e}")),
                    String::new(),
                    Vec::new(),
                );
            }
        };
        let id = manifest.id.clone();
        if nodes.is_empty() {
            return respond(
                batch_response::failure("No nodes specified in request"),
                id,
                Vec::new(),
            );
        }
        let cache_name = format!("{id}-{}", uuid::Uuid::new_v4());
        let prefix = format!("{EPHEMERAL_CACHE_SUBDIR}/{cache_name}");
        let selection = Selection {
            firmware_type: &req.firmware_type,
            component_filters: &req.component_filters,
            descriptor_filters: &req.node_descriptor_component_filters,
            components: &[],
        };
        // Files are fetched after admission: plan the targets unresolved.
        let planned = plan_nodes(&manifest, nodes, &selection, Ok, &prefix);
        let rack_id = rack_of(&req.rack_id, &planned);
        let (response, jobs, admitted) = self.start_apply(&rack_id, planned);
        if admitted.is_empty() {
            return respond(response, id, jobs);
        }
        let token = req
            .access_token
            .filter(|t| !t.trim().is_empty())
            .map(Secret::new);
        let cache_dir = self
            .config
            .firmware_dir
            .join(EPHEMERAL_CACHE_SUBDIR)
            .join(&cache_name);
        let child_ids: Vec<JobId> = admitted
            .iter()
            .map(|(_, job, _)| job.id().clone())
            .collect();
        let service = self.clone();
        let force = req.force_update;
        tokio::spawn(async move {
            let fetched = catalog
                .fetch_ephemeral(&manifest, token.as_ref(), &cache_dir)
                .await;
            drop(token);
            for (node_id, job, (target, unresolved)) in admitted {
                let outcome = fetched.clone().and_then(|()| {
                    resolve_targets(&service.config.firmware_dir, &unresolved, true)
                        .map_err(|e| e.message)
                });
                match outcome {
                    Ok(resolved) => spawn_worker(
                        &service.tracker,
                        job,
                        service.worker(target, resolved, false, force),
                    ),
                    Err(message) => {
                        tracing::warn!(node = %node_id, error = %message, "ephemeral firmware object apply failed");
                        job.fail(firmware_failure(
                            "planning",
                            JobError::FileNotFound,
                            &format!("firmware object artifacts unavailable: {message}"),
                            None,
                            None,
                        ));
                    }
                }
            }
            // The cache goes once every child is terminal (spec §1.14).
            drop(
                service
                    .tracker
                    .spawn_ephemeral_cache_cleanup(child_ids, cache_dir),
            );
        });
        respond(response, id, jobs)
    }

    /// Admits an apply: one parent, a child per planned node; the workers
    /// are the caller's to spawn.
    #[allow(clippy::type_complexity)]
    fn start_apply<T: Clone>(
        &self,
        rack_id: &str,
        planned: Vec<PlannedNode<T>>,
    ) -> (
        pb::NodeBatchResponse,
        Vec<pb::NodeFirmwareJobInfo>,
        Vec<(String, RmsJobHandle, (NodeTarget, T))>,
    ) {
        let total = planned.len();
        if total == 0 {
            return (
                batch_response::failure(
                    "no node of the request is selected by the component filters",
                ),
                Vec::new(),
                Vec::new(),
            );
        }
        let Some(parent) = self
            .tracker
            .create_parent_job(rack_id, JobType::FirmwareUpdate)
        else {
            return (
                batch_response::failure("failed to create parent firmware update job"),
                Vec::new(),
                Vec::new(),
            );
        };
        let targets = planned
            .into_iter()
            .map(|p| (p.info.rack_id.clone(), p.info.node_id.clone(), p))
            .collect();
        let (admitted, rejected) = self.tracker.create_batch_jobs(
            &parent,
            JobType::FirmwareUpdate,
            targets,
            |p: &PlannedNode<T>| {
                let target = p.target.clone()?;
                let plan = p.plan.clone()?;
                Ok((target, plan))
            },
        );
        if admitted.is_empty() {
            self.tracker
                .mark_failed_message(&parent, "No firmware update jobs created");
        }
        let mut results = Vec::new();
        let mut jobs = Vec::new();
        let mut out = Vec::new();
        for (planned, job, state) in admitted {
            jobs.push(pb::NodeFirmwareJobInfo {
                node_id: planned.info.node_id.clone(),
                job_id: job.id().to_string(),
            });
            results.push(batch_response::node_ok(&planned.info.node_id));
            out.push((planned.info.node_id, job, state));
        }
        let response = super::firmware::ephemeral_batch_response(
            results,
            &rejected,
            jobs.len(),
            total,
            parent,
        );
        (response, jobs, out)
    }

    /// `ApplyStoredSwitchSystemImage`: the object's switch system image
    /// (from its cached files) installed on the request's switches.
    pub(super) async fn apply_stored_switch_system_image(
        &self,
        req: pb::ApplyStoredSwitchSystemImageRequest,
    ) -> Result<pb::ApplyStoredSwitchSystemImageResponse, Status> {
        let catalog = Arc::clone(self.catalog()?);
        let nodes_in = req
            .nodes
            .as_ref()
            .map(|s| s.nodes.clone())
            .unwrap_or_default();
        nodes::normalize_node_set(&nodes_in)?;
        let refused = |message: &str, object_id: String| {
            Ok(pb::ApplyStoredSwitchSystemImageResponse {
                response: Some(batch_response::failure(message)),
                object_id,
                image_filename: String::new(),
                jobs: Vec::new(),
            })
        };
        let object = match stored_object(&catalog, &req.object_id, &req.hardware_type).await {
            Ok(object) => object,
            Err(message) => return refused(&message, req.object_id.clone()),
        };
        let id = object.stored.id.clone();
        let image = match switch_image(&object.manifest, &req.software_type) {
            Ok(image) => image.clone(),
            Err(message) => return refused(&message, id),
        };
        let file = format!("{}/{}", object.cache_prefix(), image.artifact.filename);
        let node_ids: Vec<String> = nodes_in.iter().map(|n| n.node_id.clone()).collect();
        let rack_id = rack_or_first(&req.rack_id, &nodes_in);
        let (response, jobs) = self
            .start_switch_image_batch(nodes_in, &file, &image.artifact.filename)
            .await;
        if !jobs.is_empty() {
            self.track_apply(&id, &response.job_id);
            let record = HistoryRecord {
                object_id: id.clone(),
                rack_id,
                firmware_type: image.software_type.clone(),
                applied_at: Utc::now(),
                firmware_available: true,
                hardware_type: object.stored.hardware_type.clone(),
                node_ids: jobs
                    .iter()
                    .map(|j| j.node_id.clone())
                    .filter(|n| node_ids.contains(n))
                    .collect(),
                job_id: response.job_id.clone(),
            };
            if let Err(error) = catalog.record_apply(record).await {
                tracing::error!(object_id = %id, %error, "apply history not recorded");
            }
        }
        Ok(pb::ApplyStoredSwitchSystemImageResponse {
            response: Some(response),
            object_id: id,
            image_filename: image.artifact.filename,
            jobs,
        })
    }

    /// `ApplySwitchSystemImage`: an ephemeral object's switch system image,
    /// fetched into a per-request cache (removed by a cleanup plan once
    /// every child is terminal), then installed as `UpdateSwitchSystemImage`
    /// would.
    pub(super) async fn apply_switch_system_image(
        &self,
        req: pb::ApplySwitchSystemImageRequest,
    ) -> Result<pb::ApplySwitchSystemImageResponse, Status> {
        let catalog = Arc::clone(self.catalog()?);
        let nodes_in = req
            .nodes
            .as_ref()
            .map(|s| s.nodes.clone())
            .unwrap_or_default();
        nodes::normalize_node_set(&nodes_in)?;
        let refused = |message: &str, object_id: String| {
            Ok(pb::ApplySwitchSystemImageResponse {
                response: Some(batch_response::failure(message)),
                object_id,
                image_filename: String::new(),
                jobs: Vec::new(),
            })
        };
        let manifest = match Manifest::parse(&req.config_json) {
            Ok(m) => m,
            Err(e) => return refused(&format!("invalid config_json: {e}"), String::new()),
        };
        let id = manifest.id.clone();
        let image = match switch_image(&manifest, &req.software_type) {
            Ok(image) => image.clone(),
            Err(message) => return refused(&message, id),
        };
        if nodes_in.is_empty() {
            return refused("No nodes specified in request", id);
        }
        let cache_name = format!("{id}-{}", uuid::Uuid::new_v4());
        let cache_dir = self
            .config
            .firmware_dir
            .join(EPHEMERAL_CACHE_SUBDIR)
            .join(&cache_name);
        let token = req
            .access_token
            .filter(|t| !t.trim().is_empty())
            .map(Secret::new);
        let only_image = Manifest {
            devices: Vec::new(),
            switch_images: vec![image.clone()],
            ..manifest
        };
        if let Err(message) = catalog
            .fetch_ephemeral(&only_image, token.as_ref(), &cache_dir)
            .await
        {
            let _ = tokio::fs::remove_dir_all(&cache_dir).await;
            return refused(&format!("switch system image unavailable: {message}"), id);
        }
        drop(token);
        let file = format!(
            "{EPHEMERAL_CACHE_SUBDIR}/{cache_name}/{}",
            image.artifact.filename
        );
        let (response, jobs) = self
            .start_switch_image_batch(nodes_in, &file, &image.artifact.filename)
            .await;
        // The cache goes once every child is terminal (spec §1.14); with no
        // child, at once.
        let child_ids: Vec<JobId> = jobs.iter().map(|j| JobId::from(j.job_id.clone())).collect();
        drop(
            self.tracker
                .spawn_ephemeral_cache_cleanup(child_ids, cache_dir),
        );
        Ok(pb::ApplySwitchSystemImageResponse {
            response: Some(response),
            object_id: id,
            image_filename: image.artifact.filename,
            jobs,
        })
    }

    pub(super) async fn compare_firmware_object(
        &self,
        req: pb::CompareFirmwareObjectRequest,
    ) -> Result<pb::CompareFirmwareObjectResponse, Status> {
        let respond = |response, object_id: String, matches_manifest, nodes| {
            Ok(pb::CompareFirmwareObjectResponse {
                response: Some(response),
                object_id,
                matches_manifest,
                nodes,
            })
        };
        let nodes = self.apply_nodes(req.nodes.as_ref(), "", false)?;
        let manifest = match Manifest::parse(&req.config_json) {
            Ok(m) => m,
            Err(e) => {
                return respond(
                    batch_response::failure(&format!("invalid config_json: {e}")),
                    String::new(),
                    false,
                    Vec::new(),
                );
            }
        };
        if nodes.is_empty() {
            return respond(
                batch_response::failure("No nodes specified in request"),
                manifest.id,
                false,
                Vec::new(),
            );
        }
        let selection = Selection {
            firmware_type: &req.firmware_type,
            component_filters: &req.component_filters,
            descriptor_filters: &req.node_descriptor_component_filters,
            components: &[],
        };
        let total = nodes.len();
        let timeout = self.bmc_timeout();
        let backend = &self.backend;
        let selection = &selection;
        let manifest_ref = &manifest;
        let compared: Vec<(String, Result<pb::NodeFirmwareManifestComparison, String>)> =
            futures_util::stream::iter(nodes.into_iter().map(|node| async move {
                let node_id = node.info.node_id.clone();
                let components = match selected_components(manifest_ref, &node.info, selection) {
                    Ok(c) => c,
                    Err(message) => return (node_id, Err(message)),
                };
                let target = match node.target {
                    Ok(t) => t,
                    Err(message) => return (node_id, Err(message)),
                };
                let inventory = match tokio::time::timeout(
                    timeout,
                    backend.firmware_inventory(&target),
                )
                .await
                {
                    Ok(Ok(inventory)) => inventory,
                    Ok(Err(e)) => return (node_id, Err(e.to_string())),
                    Err(_) => {
                        return (
                            node_id,
                            Err(format!(
                                "firmware inventory read timed out after {}s",
                                timeout.as_secs()
                            )),
                        );
                    }
                };
                let components: Vec<pb::FirmwareManifestComponentComparison> = components
                    .iter()
                    .map(|c| compare_component(c, &inventory))
                    .collect();
                let matches = components
                    .iter()
                    .all(|c| c.status == pb::FirmwareComparisonStatus::Matched as i32);
                (
                    node_id.clone(),
                    Ok(pb::NodeFirmwareManifestComparison {
                        node_id,
                        matches_manifest: matches,
                        components,
                    }),
                )
            }))
            .buffered(self.config.batch_read_concurrency.get())
            .collect()
            .await;
        let mut node_results = Vec::with_capacity(total);
        let mut comparisons = Vec::new();
        for (node_id, result) in compared {
            match result {
                Ok(c) => {
                    node_results.push(batch_response::node_ok(&node_id));
                    comparisons.push(c);
                }
                Err(e) => node_results.push(batch_response::node_failed(&node_id, &e)),
            }
        }
        let read = comparisons.len();
        let matching = comparisons.iter().filter(|c| c.matches_manifest).count();
        let all_match = read == total && matching == total;
        let message = format!(
            "Compared {read} of {total} nodes with firmware object {}: {matching} match",
            manifest.id
        );
        let response = batch_response::from_results(message, node_results, total);
        respond(response, manifest.id, all_match, comparisons)
    }
}

/// The stored object an apply names (by id, else the default of its
/// hardware type), available; `Err` is the in-band reason.
async fn stored_object(
    catalog: &Catalog,
    object_id: &str,
    hardware_type: &str,
) -> Result<CatalogObject, String> {
    let object = if !object_id.trim().is_empty() {
        catalog.get(object_id.trim()).await
    } else if !hardware_type.trim().is_empty() {
        catalog.default_for(hardware_type.trim()).await
    } else {
        Err(CatalogError::InvalidArgument(
            "object_id or hardware_type is required".to_owned(),
        ))
    };
    let object = object.map_err(|error| {
        tracing::warn!(object_id, %error, "firmware object apply refused");
        error.to_string()
    })?;
    if !object.stored.available {
        let reason = object.stored.unavailable_reason.as_deref().map_or_else(
            || " (its artifacts are still being fetched)".to_owned(),
            |r| format!(": {r}"),
        );
        return Err(format!(
            "firmware object {} is not available{reason}",
            object.stored.id
        ));
    }
    Ok(object)
}

/// The switch system image of `manifest` for `software_type` (empty:
/// `prod`).
fn switch_image<'m>(
    manifest: &'m Manifest,
    software_type: &str,
) -> Result<&'m crate::catalog::manifest::SwitchImage, String> {
    let wanted = channel_name(software_type);
    manifest
        .switch_images
        .iter()
        .find(|i| i.software_type == wanted)
        .ok_or_else(|| {
            format!(
                "firmware object {} has no {wanted} switch system image",
                manifest.id
            )
        })
}

/// One node of an apply after planning: its target and firmware plan, or
/// the in-band reason it has none.
struct PlannedNode<T> {
    info: pb::NodeInfo,
    target: Result<NodeTarget, String>,
    plan: Result<T, String>,
}

/// The rack of a request: its own, else its first node's.
fn rack_or_first(requested: &str, nodes: &[pb::NodeInfo]) -> String {
    if requested.trim().is_empty() {
        nodes.first().map(|n| n.rack_id.clone()).unwrap_or_default()
    } else {
        requested.trim().to_owned()
    }
}

/// The rack an apply is recorded under: the request's, else its first
/// node's.
fn rack_of<T>(requested: &str, planned: &[PlannedNode<T>]) -> String {
    if requested.trim().is_empty() {
        planned
            .first()
            .map(|p| p.info.rack_id.clone())
            .unwrap_or_default()
    } else {
        requested.trim().to_owned()
    }
}

/// Plans every node: nodes the component filters leave out are dropped;
/// the others get their firmware targets (`finish` resolves them, or keeps
/// them as they are for an ephemeral object).
fn plan_nodes<T>(
    manifest: &Manifest,
    nodes: Vec<NodeRequest>,
    selection: &Selection<'_>,
    finish: impl Fn(Vec<pb::FirmwareTarget>) -> Result<T, String>,
    cache_prefix: &str,
) -> Vec<PlannedNode<T>> {
    nodes
        .into_iter()
        .filter(|n| selected_by_filters(&n.info, selection))
        .map(|node| {
            let plan =
                selected_components(manifest, &node.info, selection).and_then(|components| {
                    let targets: Vec<pb::FirmwareTarget> = components
                        .iter()
                        .flat_map(|c| {
                            c.artifacts
                                .iter()
                                .filter(|_| channel_matches(&c.channel, selection.firmware_type))
                                .map(|a| pb::FirmwareTarget {
                                    target: a.target.clone(),
                                    filename: format!("{cache_prefix}/{}", a.filename),
                                })
                        })
                        .collect();
                    if targets.is_empty() {
                        return Err(format!(
                            "firmware object {} has no {} firmware for node {}",
                            manifest.id,
                            channel_name(selection.firmware_type),
                            node.info.node_id
                        ));
                    }
                    finish(targets)
                });
            PlannedNode {
                info: node.info,
                target: node.target,
                plan,
            }
        })
        .collect()
}

fn channel_name(requested: &str) -> String {
    if requested.trim().is_empty() {
        "prod".to_owned()
    } else {
        requested.trim().to_ascii_lowercase()
    }
}

/// Whether a component of `channel` serves the requested firmware type.
fn channel_matches(channel: &str, requested: &str) -> bool {
    channel.is_empty() || channel == channel_name(requested)
}

/// The node's kind: from its type, else its descriptor's `role`.
fn kind_of(info: &pb::NodeInfo) -> Option<NodeKind> {
    NodeKind::of(info.r#type.unwrap_or(0)).or_else(|| {
        let role = info.node_descriptor.as_ref()?.attributes.get("role")?;
        match role.to_ascii_lowercase().as_str() {
            "compute" | "compute_tray" | "compute-tray" => Some(NodeKind::Compute),
            "switch" | "switch_tray" | "switch-tray" => Some(NodeKind::Switch),
            "powershelf" | "power_shelf" | "power-shelf" => Some(NodeKind::PowerShelf),
            _ => None,
        }
    })
}

/// The component filter naming this node, if any filter does.
fn filter_for<'a>(info: &pb::NodeInfo, selection: &Selection<'a>) -> Option<&'a [String]> {
    if let Some(filter) = info
        .r#type
        .filter(|t| *t != 0)
        .and_then(|t| selection.component_filters.get(&t))
    {
        return Some(&filter.components);
    }
    selection
        .descriptor_filters
        .iter()
        .find(|f| {
            f.node_descriptor
                .as_ref()
                .is_some_and(|d| nodes::descriptor_matches(info.node_descriptor.as_ref(), d))
        })
        .map(|f| {
            f.component_filter
                .as_ref()
                .map_or(&[][..], |c| c.components.as_slice())
        })
}

/// With filters, only the node types they list are selected.
fn selected_by_filters(info: &pb::NodeInfo, selection: &Selection<'_>) -> bool {
    (selection.component_filters.is_empty() && selection.descriptor_filters.is_empty())
        || filter_for(info, selection).is_some()
}

/// The object's components for this node, narrowed by the filters; an
/// unknown component name in a filter is refused.
fn selected_components<'m>(
    manifest: &'m Manifest,
    info: &pb::NodeInfo,
    selection: &Selection<'_>,
) -> Result<Vec<&'m ManifestComponent>, String> {
    let kind = kind_of(info)
        .ok_or_else(|| format!("node {} has no node type or descriptor role", info.node_id))?;
    let Some(DeviceComponents {
        components,
        device_type,
        ..
    }) = manifest.device(kind)
    else {
        return Err(format!(
            "firmware object {} has no components for {:?} nodes",
            manifest.id, kind
        ));
    };
    let wanted: Vec<&String> = filter_for(info, selection)
        .unwrap_or_default()
        .iter()
        .chain(selection.components.iter())
        .collect();
    let components: Vec<&ManifestComponent> = components
        .iter()
        .filter(|c| channel_matches(&c.channel, selection.firmware_type))
        .collect();
    // The channel's entry of each name (a name may appear per channel).
    let mut by_name: BTreeMap<String, &ManifestComponent> = BTreeMap::new();
    for c in components {
        by_name.entry(c.name.to_ascii_lowercase()).or_insert(c);
    }
    if wanted.is_empty() {
        return Ok(by_name.into_values().collect());
    }
    wanted
        .into_iter()
        .map(|name| {
            by_name
                .get(&name.to_ascii_lowercase())
                .copied()
                .ok_or_else(|| {
                    format!(
                        "component {name} is not in firmware object {} for {device_type}",
                        manifest.id
                    )
                })
        })
        .collect()
}

/// One manifest component against a node's firmware inventory.
fn compare_component(
    component: &ManifestComponent,
    inventory: &[crate::backend::FirmwareComponent],
) -> pb::FirmwareManifestComponentComparison {
    use pb::FirmwareComparisonStatus as S;
    let last = |uri: &str| {
        uri.trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    let installed = inventory.iter().find(|entry| {
        entry.name.eq_ignore_ascii_case(&component.name)
            || last(&entry.target).eq_ignore_ascii_case(&component.name)
            || component
                .artifacts
                .iter()
                .any(|a| a.target.starts_with('/') && a.target == entry.target)
    });
    let proposed = component.version.clone().unwrap_or_default();
    let (status, reason) = match (installed, &component.version) {
        (None, _) => (
            S::Missing,
            format!("the node's firmware inventory has no {}", component.name),
        ),
        (Some(_), None) => (
            S::Unverified,
            "the firmware object states no version for this component".to_owned(),
        ),
        (Some(entry), Some(version)) if entry.version.trim() == version.trim() => {
            (S::Matched, String::new())
        }
        (Some(entry), Some(version)) => (
            S::Mismatched,
            format!(
                "installed {}, the firmware object has {version}",
                entry.version
            ),
        ),
    };
    pb::FirmwareManifestComponentComparison {
        component: component.name.clone(),
        installed_component: installed.map(|e| e.name.clone()).unwrap_or_default(),
        installed_version: installed.map(|e| e.version.clone()).unwrap_or_default(),
        proposed_version: proposed,
        status: status as i32,
        target: installed
            .map(|e| e.target.clone())
            .or_else(|| component.artifacts.first().map(|a| a.target.clone()))
            .unwrap_or_default(),
        reason,
        sku_id: component.sku_id.clone(),
    }
}
