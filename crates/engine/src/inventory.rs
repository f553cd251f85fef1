//! The inventory manager: racks, their components, and the task records
//! read per rack or component. Owns every inventory store call the API makes;
//! the server converts the wire request, calls one method here and maps the
//! error.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rackflow_domain::drift::{self, DriftReport, ExpectedComponent};

use rackflow_domain::inventory::{
    Component, GatedOperation, NvlDomain, Observation, OperationalState, Phase, Rack, RackLabels,
};
use rackflow_domain::run::{NameQuery, Page};
use rackflow_domain::target::{ComponentTarget, RackIdentifier, TargetSpec};
use rackflow_domain::task::Task;
use uuid::Uuid;

use rackflow_store::{
    ComponentFilterQuery, ComponentPatch, NvlDomainQuery, PurgeOutcome, RackFilter, RackImport,
    RackPatch, Store, TaskFilter,
};

use crate::error::{EngineError, LookupKind};
use crate::executor::{InventoryObserver, Readiness};
use crate::manager::InventorySource;
use crate::resolve;

/// How a caller names one rack: by UUID, or — when the text is not a UUID —
/// by external id. `text` is kept as given for the not-found message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RackRef {
    Id { id: Uuid, text: String },
    ExternalId(String),
}

/// A rack with its components (empty unless asked for).
#[derive(Debug, Clone)]
pub struct RackWithComponents {
    pub rack: Rack,
    pub components: Vec<Component>,
}

/// The reference's `NVLinkDomain` view of a domain: its member racks,
/// the phase aggregated over their components, the racks' shared model as
/// its topology, and the components when they were asked for.
#[derive(Debug, Clone)]
pub struct NvlinkDomainView {
    pub domain: NvlDomain,
    pub racks: Vec<Rack>,
    pub operation_status: Phase,
    /// The model every member rack has (`None`: no racks, or models differ).
    pub topology: Option<String>,
    /// Empty unless asked for.
    pub components: Vec<Component>,
}

/// Where [`InventoryManager::rack_labels`] takes the racks' phases from.
#[derive(Debug, Clone, Copy)]
pub enum Phases<'a> {
    /// Not wanted (component listings).
    Skip,
    /// Read the racks' components for them.
    Read,
    /// From these components, already read (with the racks).
    From(&'a [Component]),
}

/// A component query: store filters, optionally narrowed by a target spec.
#[derive(Debug, Clone, Default)]
pub struct ComponentQuery {
    pub filter: ComponentFilterQuery,
    pub target: Option<TargetSpec>,
}

/// A task query: the rack named as [`RackRef`], the rest as the store's.
#[derive(Debug, Clone, Default)]
pub struct TaskQuery {
    pub rack: Option<RackRef>,
    pub component_id: Option<Uuid>,
    pub active_only: bool,
    pub with_report: bool,
}

/// The executor's [`Readiness`]: the readiness gate asks the store which
/// components' operational state holds an operation back.
pub struct StoreReadiness {
    store: Arc<dyn Store>,
}

impl StoreReadiness {
    pub fn new(store: Arc<dyn Store>) -> Self {
        StoreReadiness { store }
    }
}

#[async_trait::async_trait]
impl Readiness for StoreReadiness {
    async fn holding(
        &self,
        components: &[Uuid],
        operation: GatedOperation,
    ) -> Result<Vec<Uuid>, String> {
        self.store
            .components_in_states(components, &OperationalState::blocking(operation))
            .await
            .map_err(|e| e.to_string())
    }
}

/// The executor's [`InventoryObserver`]: records versions and power states
/// read back from the hardware in the store, off the task's critical path.
/// Observations go to a queue; one writer drains it, many tasks' read-backs
/// per transaction (group commit), each write bounded by
/// [`OBSERVATION_WRITE_LIMIT`]. A task waits for its own observations only
/// once, when it ends ([`InventoryObserver::flush`]), so a finished task's
/// versions are in the inventory when its status says so. A failed write is
/// logged (the next read-back records the fact again), never fails a task;
/// a full queue drops the observation with a warning rather than block.
pub struct StoreObserver {
    queue: tokio::sync::mpsc::Sender<(u64, Vec<Observation>)>,
    /// The last sequence number queued. Numbered and queued under this
    /// lock (never held across an await), so the queue is in number order
    /// and "written up to N" means every observation numbered ≤ N.
    queued: std::sync::Mutex<u64>,
    /// The last sequence number written (or given up on).
    written: tokio::sync::watch::Receiver<u64>,
    background: crate::Background,
}

/// Bound of one observation write: a database that is away must not hold
/// the writer (and the tasks flushing) for a pool timeout.
pub const OBSERVATION_WRITE_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);
/// Observation batches the queue holds before dropping new ones.
const OBSERVATION_QUEUE: usize = 4096;

impl StoreObserver {
    /// Starts the writer; stop it with [`StoreObserver::shutdown`] after the
    /// executors (it writes what is queued, then ends).
    pub fn start(store: Arc<dyn Store>) -> Arc<StoreObserver> {
        let (queue, mut rx) = tokio::sync::mpsc::channel(OBSERVATION_QUEUE);
        let (written_tx, written) = tokio::sync::watch::channel(0u64);
        let background = crate::Background::new("inventory observer");
        let stop = background.token().clone();
        background.spawn("observation writer", async move {
            loop {
                let first = tokio::select! {
                    next = rx.recv() => match next {
                        Some(next) => next,
                        None => break,
                    },
                    () = stop.cancelled() => break,
                };
                write_batch(&store, first, &mut rx, &written_tx).await;
            }
            // Stopping: what is queued still goes in.
            while let Ok(next) = rx.try_recv() {
                write_batch(&store, next, &mut rx, &written_tx).await;
            }
        });
        Arc::new(StoreObserver {
            queue,
            queued: std::sync::Mutex::new(0),
            written,
            background,
        })
    }

    /// Writes what is queued and stops the writer.
    pub async fn shutdown(&self) {
        self.background.shutdown().await;
    }
}

/// Writes `first` and whatever else is queued now, in one transaction, then
/// publishes the highest sequence number written.
async fn write_batch(
    store: &Arc<dyn Store>,
    first: (u64, Vec<Observation>),
    rx: &mut tokio::sync::mpsc::Receiver<(u64, Vec<Observation>)>,
    written: &tokio::sync::watch::Sender<u64>,
) {
    let (mut last, mut batch) = first;
    while batch.len() < 10_000 {
        match rx.try_recv() {
            Ok((seq, more)) => {
                last = last.max(seq);
                batch.extend(more);
            }
            Err(_) => break,
        }
    }
    let write = store.components_observe(&batch);
    match tokio::time::timeout(OBSERVATION_WRITE_LIMIT, write).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(
            observations = batch.len(),
            error = %e,
            "recording observed component state failed"
        ),
        Err(_) => tracing::warn!(
            observations = batch.len(),
            "recording observed component state timed out"
        ),
    }
    written.send_modify(|w| *w = (*w).max(last));
}

#[async_trait::async_trait]
impl InventoryObserver for StoreObserver {
    async fn observed(&self, observations: &[Observation]) -> u64 {
        let sent = {
            // A poisoned counter is still a counter.
            let mut queued = self.queued.lock().unwrap_or_else(|e| e.into_inner());
            let seq = *queued + 1;
            match self.queue.try_send((seq, observations.to_vec())) {
                Ok(()) => {
                    *queued = seq;
                    Ok(seq)
                }
                Err(e) => Err(e.to_string()),
            }
        };
        match sent {
            Ok(seq) => seq,
            Err(error) => {
                // Never block a task on the inventory; it is told again on
                // the next read-back. Nothing for a flush to wait for.
                tracing::warn!(observations = observations.len(), error = %error, "observation queue full or closed; dropped");
                0
            }
        }
    }

    async fn flush(&self, upto: u64) {
        let mut written = self.written.clone();
        let caught_up = written.wait_for(|w| *w >= upto);
        // A writer that is gone or stuck must not hold the task's end.
        let _ = tokio::time::timeout(OBSERVATION_WRITE_LIMIT * 2, caught_up).await;
    }
}

/// Reads and writes the inventory (racks, components) and reads tasks.
#[derive(Clone)]
pub struct InventoryManager {
    store: Arc<dyn Store>,
    /// The component manager's own inventory (`None`: the simulated fleet,
    /// which has none), for `ValidateComponents`.
    source: Option<Arc<dyn InventorySource>>,
}

/// Components read per store page while validating.
const VALIDATE_PAGE: i64 = 1_000;

impl InventoryManager {
    pub fn new(store: Arc<dyn Store>) -> Self {
        InventoryManager {
            store,
            source: None,
        }
    }

    /// `ValidateComponents` compares the inventory with `source`'s.
    pub fn with_source(mut self, source: Option<Arc<dyn InventorySource>>) -> Self {
        self.source = source;
        self
    }

    /// Expected-vs-actual drift of the components `query` selects (all of
    /// them without a target): computed on each call from the component
    /// manager's inventory, so it is never stale. With a rack target, nodes
    /// of those racks that Flow does not know are unexpected; with a
    /// component target none are; without a target every unknown node is.
    /// A type filter narrows unexpected nodes to those types too.
    pub async fn validate(&self, query: ComponentQuery) -> Result<DriftReport, EngineError> {
        let source = self.source.as_ref().ok_or(EngineError::NoInventorySource)?;
        let whole_fleet = query.target.is_none();
        let by_component = matches!(query.target, Some(TargetSpec::Components(_)));
        let types = query.filter.types.clone();
        // Resolved once: a rack target's racks are the filter's rack ids.
        let filter = self.resolved_filter(query).await?;
        let mut components = Vec::new();
        loop {
            let page = Page {
                offset: i64::try_from(components.len()).unwrap_or(i64::MAX),
                limit: VALIDATE_PAGE,
            };
            let (batch, total) = self.store.component_list(&filter, page).await?;
            let got = batch.len();
            components.extend(batch);
            if got == 0 || i64::try_from(components.len()).unwrap_or(i64::MAX) >= total {
                break;
            }
        }
        let mut rack_ids = filter.rack_ids.clone();
        rack_ids.extend(components.iter().filter_map(|c| c.rack_id));
        rack_ids.sort_unstable();
        rack_ids.dedup();
        let keys: HashMap<Uuid, String> = self
            .store
            .racks_get_many(&rack_ids)
            .await?
            .into_iter()
            .map(|r| (r.id, r.manager_id().to_string()))
            .collect();
        let expected: Vec<ExpectedComponent> = components
            .into_iter()
            .map(|component| ExpectedComponent {
                rack: component
                    .rack_id
                    .and_then(|id| keys.get(&id).cloned())
                    .unwrap_or_default(),
                component,
            })
            .collect();
        let scope: Option<HashSet<String>> = if whole_fleet {
            None
        } else if by_component {
            Some(HashSet::new())
        } else {
            Some(keys.values().cloned().collect())
        };
        let mut nodes = source.nodes().await.map_err(EngineError::InventorySource)?;
        if !types.is_empty() {
            nodes.retain(|n| n.component_type.is_none_or(|t| types.contains(&t)));
        }
        Ok(drift::compare(&expected, &nodes, scope.as_ref())?)
    }

    /// Creates a rack with its components in one transaction.
    pub async fn create_rack(
        &self,
        rack: &Rack,
        components: &[Component],
    ) -> Result<(), EngineError> {
        match self.store.rack_create(rack, components).await {
            Ok(()) => {}
            // The external id is taken, but by no rack a lookup finds: a
            // deleted one holds it until purged; say so.
            Err(rackflow_store::StoreError::AlreadyExists(what))
                if what.contains("external_id")
                    && let Some(ext) = rack.external_id.as_deref()
                    && self.store.rack_get_by_external_id(ext).await?.is_none() =>
            {
                return Err(EngineError::HeldByDeleted(format!(
                    "rack external_id {ext:?}"
                )));
            }
            Err(e) => return Err(e.into()),
        }
        tracing::info!(rack_id = %rack.id, name = %rack.name, components = components.len(), "rack created");
        Ok(())
    }

    /// Creates the racks of a batch whose external id is new and skips the
    /// others, in one transaction ([`Store::racks_import`]); answers per
    /// rack, in order.
    pub async fn import_racks(
        &self,
        racks: &[(Rack, Vec<Component>)],
    ) -> Result<Vec<RackImport>, EngineError> {
        let outcome = self.store.racks_import(racks).await?;
        let created = outcome
            .iter()
            .filter(|o| matches!(o, RackImport::Created(_)))
            .count();
        tracing::info!(
            racks = racks.len(),
            created,
            skipped = racks.len() - created,
            components = racks.iter().map(|(_, c)| c.len()).sum::<usize>(),
            "rack batch imported"
        );
        Ok(outcome)
    }

    /// One rack, with its components when `with_components`.
    pub async fn rack(
        &self,
        rack: &RackRef,
        with_components: bool,
    ) -> Result<RackWithComponents, EngineError> {
        let rack = self.find_rack(rack).await?;
        self.with_components(rack, with_components).await
    }

    /// `rack` with its components when `with_components`.
    async fn with_components(
        &self,
        rack: Rack,
        with_components: bool,
    ) -> Result<RackWithComponents, EngineError> {
        let mut components = if with_components {
            self.store.components_of_racks(&[rack.id]).await?
        } else {
            Vec::new()
        };
        self.derive_leak_handling(&mut components).await?;
        Ok(RackWithComponents { rack, components })
    }

    /// The non-deleted rack with this (manufacturer, serial number), with
    /// its components when asked.
    pub async fn rack_by_serial(
        &self,
        manufacturer: &str,
        serial_number: &str,
        with_components: bool,
    ) -> Result<RackWithComponents, EngineError> {
        let rack = self
            .store
            .rack_get_by_serial(manufacturer, serial_number)
            .await?
            .ok_or_else(|| EngineError::Lookup {
                kind: crate::error::LookupKind::NotFound,
                message: format!(
                    "rack with manufacturer {manufacturer:?} and serial number {serial_number:?} not found"
                ),
            })?;
        self.with_components(rack, with_components).await
    }

    /// A non-deleted component by id, with its rack when asked (and it has
    /// one).
    pub async fn component_by_id(
        &self,
        id: Uuid,
        with_rack: bool,
    ) -> Result<(Component, Option<Rack>), EngineError> {
        let mut component = self
            .store
            .component_get(id)
            .await?
            .filter(|c| c.deleted_at.is_none())
            .ok_or(EngineError::ComponentNotFound(id))?;
        self.derive_leak_handling(std::slice::from_mut(&mut component))
            .await?;
        let rack = self.rack_of(&component, with_rack).await?;
        Ok((component, rack))
    }

    /// The non-deleted component with this (manufacturer, serial number),
    /// with its rack when asked.
    pub async fn component_by_serial(
        &self,
        manufacturer: &str,
        serial_number: &str,
        with_rack: bool,
    ) -> Result<(Component, Option<Rack>), EngineError> {
        let mut component = self
            .store
            .component_get_by_serial(manufacturer, serial_number)
            .await?
            .ok_or_else(|| EngineError::Lookup {
                kind: crate::error::LookupKind::NotFound,
                message: format!(
                    "component with manufacturer {manufacturer:?} and serial number {serial_number:?} not found"
                ),
            })?;
        self.derive_leak_handling(std::slice::from_mut(&mut component))
            .await?;
        let rack = self.rack_of(&component, with_rack).await?;
        Ok((component, rack))
    }

    async fn rack_of(
        &self,
        component: &Component,
        with_rack: bool,
    ) -> Result<Option<Rack>, EngineError> {
        match component.rack_id {
            Some(rack_id) if with_rack => Ok(self.store.rack_get(rack_id, false).await?),
            _ => Ok(None),
        }
    }

    /// A page of racks (each with its components when `with_components`)
    /// and the filtered total.
    pub async fn racks(
        &self,
        filter: &RackFilter,
        page: Page,
        with_components: bool,
    ) -> Result<(Vec<RackWithComponents>, i64), EngineError> {
        let (racks, total) = self.store.rack_list(filter, page).await?;
        let mut components_by_rack: HashMap<Uuid, Vec<Component>> = HashMap::new();
        if with_components && !racks.is_empty() {
            let ids: Vec<Uuid> = racks.iter().map(|r| r.id).collect();
            let mut components = self.store.components_of_racks(&ids).await?;
            self.derive_leak_handling(&mut components).await?;
            for c in components {
                if let Some(rack_id) = c.rack_id {
                    components_by_rack.entry(rack_id).or_default().push(c);
                }
            }
        }
        let racks = racks
            .into_iter()
            .map(|rack| RackWithComponents {
                components: components_by_rack.remove(&rack.id).unwrap_or_default(),
                rack,
            })
            .collect();
        Ok((racks, total))
    }

    /// Soft-deletes a rack.
    pub async fn delete_rack(&self, id: Uuid) -> Result<(), EngineError> {
        if !self.store.rack_soft_delete(id).await? {
            return Err(EngineError::RackNotFound(id.to_string()));
        }
        tracing::info!(rack_id = %id, "rack deleted");
        Ok(())
    }

    /// Patches a rack's name, description and location; answers the report
    /// of what changed (a JSON document: `{"rack_id", "changed": {field:
    /// {"from", "to"}}}`; `changed` is empty when the patch changed
    /// nothing).
    pub async fn patch_rack(&self, id: Uuid, patch: &RackPatch) -> Result<String, EngineError> {
        let (before, after) = self
            .store
            .rack_patch(id, patch)
            .await?
            .ok_or_else(|| EngineError::RackNotFound(id.to_string()))?;
        let report = rack_patch_report(&before, &after);
        tracing::info!(rack_id = %id, report = %report, "rack patched");
        Ok(report)
    }

    /// Deletes a soft-deleted rack for good (its components, tasks, rule
    /// associations and schedule scopes with it): its external id and
    /// (manufacturer, serial number) can be used again.
    pub async fn purge_rack(&self, id: Uuid) -> Result<(), EngineError> {
        match self.store.rack_purge(id).await? {
            PurgeOutcome::Purged => {
                tracing::info!(rack_id = %id, "rack purged");
                Ok(())
            }
            PurgeOutcome::NotFound => Err(EngineError::RackNotFound(id.to_string())),
            PurgeOutcome::NotDeleted => Err(EngineError::InventoryState(format!(
                "rack {id} is not deleted: only a deleted rack can be purged (DeleteRack first)"
            ))),
            PurgeOutcome::Busy(tasks) => Err(EngineError::InventoryState(format!(
                "rack {id} still has {tasks} unfinished task(s): cancel them or let them end \
                 before purging"
            ))),
        }
    }

    /// Soft-deletes a component: hidden from lookups, listings and targets
    /// until purged.
    pub async fn delete_component(&self, id: Uuid) -> Result<(), EngineError> {
        if !self.store.component_soft_delete(id).await? {
            return Err(EngineError::ComponentNotFound(id));
        }
        tracing::info!(component_id = %id, "component deleted");
        Ok(())
    }

    /// Deletes a soft-deleted component for good.
    pub async fn purge_component(&self, id: Uuid) -> Result<(), EngineError> {
        match self.store.component_purge(id).await? {
            PurgeOutcome::Purged => {
                tracing::info!(component_id = %id, "component purged");
                Ok(())
            }
            PurgeOutcome::NotFound => Err(EngineError::ComponentNotFound(id)),
            PurgeOutcome::NotDeleted | PurgeOutcome::Busy(_) => {
                Err(EngineError::InventoryState(format!(
                    "component {id} is not deleted: only a deleted component can be purged \
                     (DeleteComponent first)"
                )))
            }
        }
    }

    /// Creates an NVLink domain; answers its id. The name is required and
    /// unique (a name or external id in use: ALREADY_EXISTS naming it).
    pub async fn create_nvl_domain(&self, domain: &NvlDomain) -> Result<Uuid, EngineError> {
        self.store.nvl_domain_create(domain).await?;
        tracing::info!(nvl_domain_id = %domain.id, name = %domain.label(), "NVL domain created");
        Ok(domain.id)
    }

    /// The domain an identifier names (by id, else by name); NOT_FOUND
    /// names what was asked.
    pub async fn nvl_domain(&self, identifier: &Identifier) -> Result<NvlDomain, EngineError> {
        let found = match identifier {
            Identifier::Id(id) => self.store.nvl_domain_get(*id).await?,
            Identifier::Name(name) => self.store.nvl_domain_get_by_name(name).await?,
        };
        found.ok_or_else(|| EngineError::Lookup {
            kind: LookupKind::NotFound,
            message: format!("NVL domain {identifier} not found"),
        })
    }

    /// The racks identifiers name (by id, else by name; an ambiguous name
    /// is refused): all found, or the first one missing is the error.
    async fn racks_named(&self, identifiers: &[Identifier]) -> Result<Vec<Rack>, EngineError> {
        let mut racks = Vec::with_capacity(identifiers.len());
        for identifier in identifiers {
            let target = match identifier {
                Identifier::Id(id) => RackIdentifier::Id(*id),
                Identifier::Name(name) => RackIdentifier::Name(name.clone()),
            };
            let rack = resolve::resolve_rack(self.store.as_ref(), &target)
                .await
                .map_err(|e| EngineError::Lookup {
                    kind: e.kind,
                    message: e.message,
                })?;
            racks.push(rack);
        }
        Ok(racks)
    }

    /// Puts racks into a domain (a rack is in at most one: attaching moves
    /// it). Every rack is found first: an unknown one changes nothing.
    pub async fn attach_racks_to_nvl_domain(
        &self,
        domain: &Identifier,
        racks: &[Identifier],
    ) -> Result<(), EngineError> {
        let domain = self.nvl_domain(domain).await?;
        let racks = self.racks_named(racks).await?;
        let ids: Vec<Uuid> = racks.iter().map(|r| r.id).collect();
        let changed = self
            .store
            .racks_set_nvl_domain(&ids, Some(domain.id))
            .await?;
        tracing::info!(nvl_domain_id = %domain.id, racks = changed, "racks attached to NVL domain");
        Ok(())
    }

    /// Takes racks out of whatever domain they are in. Every rack is found
    /// first: an unknown one changes nothing.
    pub async fn detach_racks_from_nvl_domain(
        &self,
        racks: &[Identifier],
    ) -> Result<(), EngineError> {
        let racks = self.racks_named(racks).await?;
        let ids: Vec<Uuid> = racks.iter().map(|r| r.id).collect();
        let changed = self.store.racks_set_nvl_domain(&ids, None).await?;
        tracing::info!(racks = changed, "racks detached from their NVL domain");
        Ok(())
    }

    /// A page of domains whose name matches `name`, by name then id, and
    /// the total.
    pub async fn nvl_domains(
        &self,
        name: &NameQuery,
        page: Page,
    ) -> Result<(Vec<NvlDomain>, i64), EngineError> {
        let query = rackflow_store::NvlDomainQuery {
            name: name.clone(),
            ..Default::default()
        };
        Ok(self.store.nvl_domain_list(&query, page).await?)
    }

    /// The reference's `NVLinkDomain` view of the domain `id` names: its
    /// external id (the rack group id, as the reference looks it up), else
    /// its UUID, else its name; NOT_FOUND names what was asked.
    pub async fn nvlink_domain(
        &self,
        id: &str,
        with_components: bool,
    ) -> Result<NvlinkDomainView, EngineError> {
        let mut found = self.store.nvl_domain_get_by_external_id(id).await?;
        if found.is_none()
            && let Ok(uuid) = Uuid::parse_str(id)
        {
            found = self.store.nvl_domain_get(uuid).await?;
        }
        if found.is_none() {
            found = self.store.nvl_domain_get_by_name(id).await?;
        }
        let Some(domain) = found else {
            return Err(EngineError::Lookup {
                kind: LookupKind::NotFound,
                message: format!("NVLink domain {id:?} not found"),
            });
        };
        let mut views = self.nvlink_views(vec![domain], with_components).await?;
        Ok(views.remove(0))
    }

    /// A page of the reference's `NVLinkDomain` views (domains that have an
    /// external id) and the total before paging; three reads whatever the
    /// page size: the domains, their racks, the racks' components.
    pub async fn nvlink_domains(
        &self,
        query: &NvlDomainQuery,
        page: Page,
        with_components: bool,
    ) -> Result<(Vec<NvlinkDomainView>, i64), EngineError> {
        let (domains, total) = self.store.nvl_domain_list(query, page).await?;
        Ok((self.nvlink_views(domains, with_components).await?, total))
    }

    /// The views of `domains`, in their order.
    async fn nvlink_views(
        &self,
        domains: Vec<NvlDomain>,
        with_components: bool,
    ) -> Result<Vec<NvlinkDomainView>, EngineError> {
        if domains.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Uuid> = domains.iter().map(|d| d.id).collect();
        let racks = self.store.racks_of_nvl_domains(&ids).await?;
        let rack_ids: Vec<Uuid> = racks.iter().map(|r| r.id).collect();
        // The phase needs every member component; BMCs only when shown.
        let components = if with_components {
            self.store.components_of_racks(&rack_ids).await?
        } else {
            self.store
                .components_of_racks_without_bmcs(&rack_ids)
                .await?
        };
        let mut racks_of: HashMap<Uuid, Vec<Rack>> = HashMap::new();
        for rack in racks {
            if let Some(domain) = rack.nvl_domain_id {
                racks_of.entry(domain).or_default().push(rack);
            }
        }
        let mut components_of: HashMap<Uuid, Vec<Component>> = HashMap::new();
        for component in components {
            if let Some(rack) = component.rack_id {
                components_of.entry(rack).or_default().push(component);
            }
        }
        Ok(domains
            .into_iter()
            .map(|domain| {
                let racks = racks_of.remove(&domain.id).unwrap_or_default();
                let components: Vec<Component> = racks
                    .iter()
                    .flat_map(|r| components_of.remove(&r.id).unwrap_or_default())
                    .collect();
                let mut models = racks.iter().map(|r| r.model.as_deref());
                let first = models.next().flatten();
                let topology = first
                    .filter(|m| models.all(|other| other == Some(*m)))
                    .map(str::to_string);
                NvlinkDomainView {
                    operation_status: Phase::aggregate(&components),
                    topology,
                    components: if with_components {
                        components
                    } else {
                        Vec::new()
                    },
                    domain,
                    racks,
                }
            })
            .collect())
    }

    /// The labels the wire form of `racks` and of components of the racks
    /// `other_rack_ids` carries: each rack's external id and NVLink domain,
    /// and the phase of each of `racks` as `phases` says. Racks not given
    /// are read (with `other_rack_ids`), then the domains.
    pub async fn rack_labels(
        &self,
        racks: &[&Rack],
        other_rack_ids: &[Uuid],
        phases: Phases<'_>,
    ) -> Result<RackLabels, EngineError> {
        let known: HashSet<Uuid> = racks.iter().map(|r| r.id).collect();
        let missing: Vec<Uuid> = other_rack_ids
            .iter()
            .copied()
            .filter(|id| !known.contains(id))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let read = if missing.is_empty() {
            Vec::new()
        } else {
            self.store.racks_get_many(&missing).await?
        };
        let all: Vec<&Rack> = racks.iter().copied().chain(read.iter()).collect();
        let domain_ids: Vec<Uuid> = all
            .iter()
            .filter_map(|r| r.nvl_domain_id)
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let domains = if domain_ids.is_empty() {
            Vec::new()
        } else {
            self.store.nvl_domains_get_many(&domain_ids).await?
        };
        let labels = RackLabels::new(all, &domains);
        match phases {
            Phases::Skip => Ok(labels),
            Phases::From(components) => Ok(labels.with_phases(components)),
            Phases::Read if racks.is_empty() => Ok(labels),
            Phases::Read => {
                let ids: Vec<Uuid> = racks.iter().map(|r| r.id).collect();
                let components = self.store.components_of_racks_without_bmcs(&ids).await?;
                Ok(labels.with_phases(&components))
            }
        }
    }

    /// The racks of a domain, by name then id.
    pub async fn racks_of_nvl_domain(
        &self,
        domain: &Identifier,
    ) -> Result<(NvlDomain, Vec<Rack>), EngineError> {
        let domain = self.nvl_domain(domain).await?;
        let racks = self.store.racks_of_nvl_domains(&[domain.id]).await?;
        Ok((domain, racks))
    }

    /// A page of components and the filtered total. A rack target narrows
    /// to the rack (resolved as task submission and planning resolve it)
    /// and adds its component types to the filter.
    pub async fn components(
        &self,
        query: ComponentQuery,
        page: Page,
    ) -> Result<(Vec<Component>, i64), EngineError> {
        let filter = self.resolved_filter(query).await?;
        let (mut components, total) = self.store.component_list(&filter, page).await?;
        self.derive_leak_handling(&mut components).await?;
        Ok((components, total))
    }

    /// Fills `leak_handling` of the components a leak source has reported
    /// on: the state of the newest leak-response task acting on each
    /// (`none` without one). One task read per such component; the others
    /// (almost all) cost nothing.
    async fn derive_leak_handling(&self, components: &mut [Component]) -> Result<(), EngineError> {
        for component in components.iter_mut().filter(|c| c.leak.is_some()) {
            let filter = rackflow_store::TaskFilter {
                component_id: Some(component.id),
                ..rackflow_store::TaskFilter::default()
            };
            let (tasks, _) = self
                .store
                .task_list(
                    &filter,
                    Page {
                        offset: 0,
                        limit: 100,
                    },
                    false,
                )
                .await?;
            // Newest first: the latest leak response decides.
            let response = tasks.iter().find(|t| {
                t.idempotency_key
                    .as_deref()
                    .is_some_and(|k| k.starts_with("leak:"))
            });
            component.leak_handling = Some(
                response.map_or(rackflow_domain::inventory::LeakHandling::Nothing, |t| {
                    rackflow_domain::inventory::LeakHandling::of(t.status)
                }),
            );
        }
        Ok(())
    }

    /// The store filter of `query`: its target resolved into rack ids (with
    /// their component types), component ids or external ids.
    async fn resolved_filter(
        &self,
        query: ComponentQuery,
    ) -> Result<ComponentFilterQuery, EngineError> {
        let ComponentQuery { mut filter, target } = query;
        match target {
            None => {}
            Some(TargetSpec::Racks(racks)) => {
                for target in racks {
                    let rack = resolve::resolve_rack(self.store.as_ref(), &target.identifier)
                        .await
                        .map_err(|e| EngineError::Lookup {
                            kind: e.kind,
                            message: e.message,
                        })?;
                    filter.rack_ids.push(rack.id);
                    filter.types.extend(target.component_types);
                }
            }
            Some(TargetSpec::Components(components)) => {
                for c in components {
                    match c {
                        ComponentTarget::Id(id) => filter.ids.push(id),
                        ComponentTarget::External { id, .. } => filter.external_ids.push(id),
                    }
                }
            }
            Some(TargetSpec::NvlDomains(domains)) => {
                for target in domains {
                    let racks = resolve::domain_racks(self.store.as_ref(), &target.identifier)
                        .await
                        .map_err(|e| EngineError::Lookup {
                            kind: e.kind,
                            message: e.message,
                        })?;
                    filter.rack_ids.extend(racks.iter().map(|r| r.id));
                    filter.types.extend(target.component_types.iter().copied());
                }
            }
        }
        Ok(filter)
    }

    /// Adds a component, after checking that its rack (if any) exists.
    pub async fn add_component(&self, component: &Component) -> Result<(), EngineError> {
        if let Some(rack_id) = component.rack_id
            && self.store.rack_get(rack_id, false).await?.is_none()
        {
            return Err(EngineError::RackNotFound(rack_id.to_string()));
        }
        self.store.component_create(component).await?;
        Ok(())
    }

    /// Patches a component; a patch naming a missing rack answers the
    /// store's NotFound.
    pub async fn patch_component(
        &self,
        id: Uuid,
        patch: &ComponentPatch,
    ) -> Result<Component, EngineError> {
        self.store
            .component_patch(id, patch)
            .await?
            .ok_or(EngineError::ComponentNotFound(id))
    }

    /// A page of tasks, newest first, and the filtered total.
    pub async fn tasks(
        &self,
        query: &TaskQuery,
        page: Page,
    ) -> Result<(Vec<Task>, i64), EngineError> {
        let rack_id = match &query.rack {
            None => None,
            Some(rack) => Some(self.find_rack(rack).await?.id),
        };
        let filter = TaskFilter {
            rack_id,
            component_id: query.component_id,
            active_only: query.active_only,
            statuses: Vec::new(),
        };
        Ok(self
            .store
            .task_list(&filter, page, query.with_report)
            .await?)
    }

    /// The tasks that exist among `ids`.
    pub async fn tasks_by_ids(&self, ids: &[Uuid]) -> Result<Vec<Task>, EngineError> {
        Ok(self.store.tasks_get_many(ids).await?)
    }

    async fn find_rack(&self, rack: &RackRef) -> Result<Rack, EngineError> {
        let (found, text) = match rack {
            RackRef::Id { id, text } => (self.store.rack_get(*id, false).await?, text),
            RackRef::ExternalId(text) => (self.store.rack_get_by_external_id(text).await?, text),
        };
        found.ok_or_else(|| EngineError::RackNotFound(text.clone()))
    }
}

/// A rack or an NVL domain as the reference's `Identifier` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identifier {
    Id(Uuid),
    Name(String),
}

impl std::fmt::Display for Identifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Identifier::Id(id) => write!(f, "{id}"),
            Identifier::Name(name) => write!(f, "name={name}"),
        }
    }
}

/// PatchRack's report: the rack and, per changed field, its value before
/// and after.
fn rack_patch_report(before: &Rack, after: &Rack) -> String {
    let mut changed = serde_json::Map::new();
    let mut field = |name: &str, from: serde_json::Value, to: serde_json::Value| {
        if from != to {
            changed.insert(
                name.to_string(),
                serde_json::json!({"from": from, "to": to}),
            );
        }
    };
    field(
        "name",
        before.name.clone().into(),
        after.name.clone().into(),
    );
    field(
        "description",
        before.description.clone().into(),
        after.description.clone().into(),
    );
    let location = |l: &rackflow_domain::inventory::Location| {
        serde_json::to_value(l).unwrap_or(serde_json::Value::Null)
    };
    field(
        "location",
        location(&before.location),
        location(&after.location),
    );
    serde_json::json!({"rack_id": after.id.to_string(), "changed": changed}).to_string()
}

#[cfg(test)]
mod patch_report_tests {
    use super::*;

    #[test]
    fn the_report_names_each_changed_field_with_both_values() {
        let before = Rack {
            id: Uuid::nil(),
            name: "a".into(),
            manufacturer: "NVIDIA".into(),
            model: None,
            serial_number: "s".into(),
            description: Some("old".into()),
            location: Default::default(),
            external_id: None,
            nvl_domain_id: None,
            lifecycle: Default::default(),
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
            deleted_at: None,
        };
        let mut after = before.clone();
        after.name = "b".into();
        after.location.room = "r1".into();
        let report: serde_json::Value =
            serde_json::from_str(&rack_patch_report(&before, &after)).unwrap();
        assert_eq!(report["rack_id"], Uuid::nil().to_string());
        assert_eq!(
            report["changed"]["name"],
            serde_json::json!({"from": "a", "to": "b"})
        );
        assert_eq!(report["changed"]["location"]["to"]["room"], "r1");
        assert!(report["changed"].get("description").is_none());
        let same: serde_json::Value =
            serde_json::from_str(&rack_patch_report(&before, &before)).unwrap();
        assert_eq!(same["changed"], serde_json::json!({}));
    }
}
