//! The inventory manager: racks, their components, and the task records
//! read per rack or component. Owns every inventory store call the API makes;
//! the server converts the wire request, calls one method here and maps the
//! error.

use std::collections::HashMap;
use std::sync::Arc;

use rackflow_domain::inventory::{Component, Observation, Rack};
use rackflow_domain::run::Page;
use rackflow_domain::target::{ComponentTarget, TargetSpec};
use rackflow_domain::task::Task;
use uuid::Uuid;

use rackflow_store::{
    ComponentFilterQuery, ComponentPatch, RackFilter, RackImport, Store, TaskFilter,
};

use crate::error::EngineError;
use crate::executor::InventoryObserver;
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

/// The executor's [`InventoryObserver`]: records versions and power states
/// read back from the hardware in the store. A write waits at most
/// [`OBSERVATION_WRITE_LIMIT`]; a failure is logged (the next read-back
/// records the fact again), never fails the task.
pub struct StoreObserver {
    store: Arc<dyn Store>,
}

/// Bound of one observation write: a database that is away must not hold
/// a firmware step for a pool timeout.
pub const OBSERVATION_WRITE_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

impl StoreObserver {
    pub fn new(store: Arc<dyn Store>) -> Self {
        StoreObserver { store }
    }
}

#[async_trait::async_trait]
impl InventoryObserver for StoreObserver {
    async fn observed(&self, observations: &[Observation]) {
        let write = self.store.components_observe(observations);
        match tokio::time::timeout(OBSERVATION_WRITE_LIMIT, write).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(
                observations = observations.len(),
                error = %e,
                "recording observed component state failed"
            ),
            Err(_) => tracing::warn!(
                observations = observations.len(),
                "recording observed component state timed out"
            ),
        }
    }
}

/// Reads and writes the inventory (racks, components) and reads tasks.
#[derive(Clone)]
pub struct InventoryManager {
    store: Arc<dyn Store>,
}

impl InventoryManager {
    pub fn new(store: Arc<dyn Store>) -> Self {
        InventoryManager { store }
    }

    /// Creates a rack with its components in one transaction.
    pub async fn create_rack(
        &self,
        rack: &Rack,
        components: &[Component],
    ) -> Result<(), EngineError> {
        self.store.rack_create(rack, components).await?;
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
        let components = if with_components {
            self.store.components_of_racks(&[rack.id]).await?
        } else {
            Vec::new()
        };
        Ok(RackWithComponents { rack, components })
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
            for c in self.store.components_of_racks(&ids).await? {
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

    /// A page of components and the filtered total. A rack target narrows
    /// to the rack (resolved as task submission and planning resolve it)
    /// and adds its component types to the filter.
    pub async fn components(
        &self,
        query: ComponentQuery,
        page: Page,
    ) -> Result<(Vec<Component>, i64), EngineError> {
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
            Some(TargetSpec::NvlDomains(_)) => return Err(EngineError::NvlDomainsUnsupported),
        }
        Ok(self.store.component_list(&filter, page).await?)
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
