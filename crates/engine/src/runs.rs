//! The operation-run manager: resolves the candidate scope from inventory,
//! hands it to the pure planner, persists a run with its targets in one
//! transaction, and answers the run reads (get with stats, list, targets).

use std::collections::HashMap;
use std::sync::Arc;

use chrono::Utc;
use rackflow_domain::ComponentsByType;
use rackflow_domain::inventory::LifecycleStatus;
use rackflow_domain::inventory::{Component, Rack};
use rackflow_domain::planner::{self, CandidateEntry, Plan, PlanError};
use rackflow_domain::run::{
    OperationRun, OperationRunTarget, Page, PhaseScope, RunConfiguration, RunListFilter, RunReason,
    RunStats, RunStatus, TargetQuery, TargetStatus,
};
use rackflow_domain::target::ComponentFilter;
use rackflow_store::{RackFilter, Store};
use uuid::Uuid;

use crate::error::{EngineError, LookupKind};
use crate::resolve::{self, LookupError};

/// The run's one firmware version for every rack, when it has to pass the
/// check across rack models (issue 31).
fn single_version(config: &RunConfiguration) -> Option<&str> {
    config.operation.payload.unchecked_single_version()
}

/// Issue 31: a run with one `target_version` for racks of several models
/// (or a version naming another model family) is refused at creation and
/// in its preview, unless it sets `same_version_for_all_models`.
fn check_one_version<'a>(
    config: &RunConfiguration,
    racks: impl Iterator<Item = &'a Rack>,
) -> Result<(), EngineError> {
    let Some(version) = single_version(config) else {
        return Ok(());
    };
    rackflow_domain::bundle::check_one_version(version, racks.map(|r| r.model.as_deref()))
        .map_err(EngineError::PlanInvalid)
}

/// Appended to the reference's candidate-limit error (whose code and text
/// stay as they are): which setting raises the limit.
pub const CANDIDATE_LIMIT_HINT: &str = " (the server's planner.max_candidate_targets, or \
     RACKFLOW_MAX_CANDIDATE_TARGETS in its environment, raises the limit; 0 = unlimited)";

/// [`planner::check_candidate_limit`] with [`CANDIDATE_LIMIT_HINT`] after
/// the reference's text.
fn candidate_limit(count: usize, limit: usize) -> Result<(), LookupError> {
    planner::check_candidate_limit(count, limit).map_err(|e| {
        let mut e = LookupError::from(e);
        e.message.push_str(CANDIDATE_LIMIT_HINT);
        e
    })
}

/// Page size used when the manager pages through the store itself.
const READ_PAGE: i64 = 100;

/// A validated request to create (or preview) a run.
#[derive(Debug, Clone)]
pub struct NewRun {
    /// Already trimmed and non-empty.
    pub name: String,
    pub description: String,
    /// Effective configuration: seeds generated, defaults filled.
    pub configuration: RunConfiguration,
}

/// A plan with the racks it names, for previews.
#[derive(Debug, Clone)]
pub struct PlanPreview {
    pub plan: Plan,
    pub racks: HashMap<Uuid, Rack>,
    /// The components of the first [`PREVIEW_VERSION_RACKS`] planned racks
    /// (plan order), for the installed versions the preview shows.
    pub components: HashMap<Uuid, Vec<Component>>,
}

/// Planned racks whose installed versions a preview reads (a whole
/// 10,000-rack plan's 350,000 components would dwarf the plan itself).
pub const PREVIEW_VERSION_RACKS: usize = 1_000;

/// A target page with the external ids of its racks.
#[derive(Debug, Clone)]
pub struct TargetPage {
    pub targets: Vec<(OperationRunTarget, String)>,
    pub total: i64,
}

/// Creates, previews and reads operation runs.
#[derive(Clone)]
pub struct RunManager {
    store: Arc<dyn Store>,
    /// Candidate limit (decision D5: racks after merging); 0 = unlimited.
    max_candidate_targets: usize,
}

impl RunManager {
    pub fn new(store: Arc<dyn Store>, max_candidate_targets: usize) -> Self {
        RunManager {
            store,
            max_candidate_targets,
        }
    }

    /// Plans a run as `create` would, persisting nothing.
    pub async fn preview(&self, run: &NewRun) -> Result<PlanPreview, EngineError> {
        let plan = self.plan(&run.configuration).await?;
        let ids: Vec<Uuid> = plan.targets.iter().map(|t| t.rack_id).collect();
        let racks: HashMap<Uuid, Rack> = self
            .store
            .racks_get_many(&ids)
            .await?
            .into_iter()
            .map(|r| (r.id, r))
            .collect();
        check_one_version(&run.configuration, racks.values())?;
        let first = &ids[..ids.len().min(PREVIEW_VERSION_RACKS)];
        let mut components: HashMap<Uuid, Vec<Component>> = HashMap::new();
        for c in self.store.components_of_racks_without_bmcs(first).await? {
            if let Some(rack) = c.rack_id {
                components.entry(rack).or_default().push(c);
            }
        }
        Ok(PlanPreview {
            plan,
            racks,
            components,
        })
    }

    /// Plans the run and writes it with all its targets in one transaction.
    pub async fn create(&self, run: &NewRun) -> Result<Uuid, EngineError> {
        let plan = self.plan(&run.configuration).await?;
        if single_version(&run.configuration).is_some() {
            let ids: Vec<Uuid> = plan.targets.iter().map(|t| t.rack_id).collect();
            let racks = self.store.racks_get_many(&ids).await?;
            check_one_version(&run.configuration, racks.iter())?;
        }
        let now = Utc::now();
        let id = Uuid::new_v4();
        let record = OperationRun {
            id,
            name: run.name.clone(),
            description: run.description.clone(),
            status: RunStatus::Pending,
            reason: RunReason::None,
            status_message: String::new(),
            current_phase_index: 0,
            total_phases: plan.total_phases(),
            configuration: run.configuration.clone(),
            created_at: now,
            updated_at: now,
            started_at: None,
            finished_at: None,
        };
        let mut targets = Vec::with_capacity(plan.targets.len());
        for (i, planned) in plan.targets.iter().enumerate() {
            planned.components_by_type.validate().map_err(|e| {
                EngineError::PlanInvalid(format!(
                    "operation run target {i} components_by_type: {e}"
                ))
            })?;
            targets.push(OperationRunTarget {
                id: Uuid::new_v4(),
                operation_run_id: id,
                rack_id: planned.rack_id,
                sequence_index: planned.sequence_index,
                phase_index: planned.phase_index,
                components_by_type: planned.components_by_type.clone(),
                task_id: None,
                status: TargetStatus::Pending,
                message: String::new(),
                retry_after: None,
                retry_state: None,
                created_at: now,
                updated_at: now,
            });
        }
        self.store.run_create(&record, &targets).await?;
        tracing::info!(run_id = %id, name = %run.name, targets = targets.len(), phases = record.total_phases, "operation run created");
        Ok(id)
    }

    /// The whole planning pipeline of spec §2.1; an empty plan is an error.
    pub async fn plan(&self, config: &RunConfiguration) -> Result<Plan, EngineError> {
        let plan = self.plan_inner(config).await.map_err(|e| match e {
            PlanFailure::Invalid(err) => EngineError::PlanInvalid(err.to_string()),
            PlanFailure::Lookup(err) => EngineError::Plan {
                kind: err.kind,
                message: format!("plan operation run targets: {}", err.message),
            },
        })?;
        if plan.targets.is_empty() {
            return Err(EngineError::NoPlannedTargets);
        }
        Ok(plan)
    }

    async fn plan_inner(&self, config: &RunConfiguration) -> Result<Plan, PlanFailure> {
        let template = &config.operation;
        let (source, base) = match &template.target_spec {
            Some(spec) => (
                "target_spec scope",
                resolve::resolve_spec(self.store.as_ref(), spec).await,
            ),
            None => (
                "default scope",
                self.default_scope(
                    template
                        .target_scope
                        .default_scope_component_filter
                        .as_ref(),
                )
                .await,
            ),
        };
        let base = base.map_err(|e| e.wrap(&format!("build {source}")))?;
        let candidates = planner::normalize_candidates(base)
            .map_err(|e| LookupError::from(e).wrap(&format!("normalize {source}")))?;
        candidate_limit(candidates.len(), self.max_candidate_targets)
            .map_err(|e| e.wrap(&format!("build {source}")))?;
        if candidates.is_empty() {
            return Ok(Plan::default());
        }

        let excluded_ids = &template.target_scope.excluded_operation_run_ids;
        let candidates = if excluded_ids.is_empty() {
            candidates
        } else {
            let excluded = self.excluded_scope(excluded_ids).await.map_err(|e| {
                let ids: Vec<String> = excluded_ids.iter().map(Uuid::to_string).collect();
                e.wrap(&format!(
                    "resolve excluded operation runs [{}]",
                    ids.join(" ")
                ))
            })?;
            planner::subtract_exclusions(candidates, &excluded)
        };
        if candidates.is_empty() {
            return Ok(Plan::default());
        }
        planner::plan_targets(
            candidates,
            &config.selector,
            &config.options.ordering_policy,
            &config.options.phase_policy.plan,
        )
        .map_err(|e| match e {
            PlanError::ZeroTargetPhase { .. } | PlanError::CountOverflow => PlanFailure::Invalid(e),
            other => PlanFailure::Lookup(other.into()),
        })
    }

    /// Every non-deleted rack that is not decommissioned with at least one
    /// component passing `filter`.
    async fn default_scope(
        &self,
        filter: Option<&ComponentFilter>,
    ) -> Result<Vec<CandidateEntry>, LookupError> {
        let limit = self.max_candidate_targets;
        let mut out = Vec::new();
        let mut offset = 0i64;
        loop {
            let (racks, total) = self
                .store
                .rack_list(
                    &RackFilter {
                        lifecycle: vec![
                            LifecycleStatus::New,
                            LifecycleStatus::Ingesting,
                            LifecycleStatus::Ingested,
                        ],
                        ..RackFilter::default()
                    },
                    Page {
                        offset,
                        limit: READ_PAGE,
                    },
                )
                .await?;
            if racks.is_empty() {
                break;
            }
            let ids: Vec<Uuid> = racks.iter().map(|r| r.id).collect();
            let keys = self.store.component_keys_of_racks(&ids).await?;
            let mut by_rack: HashMap<Uuid, ComponentsByType> = HashMap::new();
            for (rack_id, ty, id) in keys {
                if filter.is_none_or(|f| f.matches(ty, id)) {
                    by_rack.entry(rack_id).or_default().push(ty, id);
                }
            }
            for rack in &racks {
                if let Some(components) = by_rack.remove(&rack.id) {
                    out.push(CandidateEntry {
                        rack_id: rack.id,
                        components,
                    });
                }
            }
            // Stop reading as soon as the limit is known to be exceeded.
            candidate_limit(out.len(), limit)?;
            offset += racks.len() as i64;
            if offset >= total {
                break;
            }
        }
        Ok(out)
    }

    /// All materialised targets of the excluded runs, merged by rack.
    async fn excluded_scope(&self, run_ids: &[Uuid]) -> Result<Vec<CandidateEntry>, LookupError> {
        let mut rows = Vec::new();
        for run_id in run_ids {
            if self.store.run_get(*run_id).await?.is_none() {
                // The caller named it: NOT_FOUND (the reference answers
                // INTERNAL; issue 14 asks for the caller's code).
                return Err(LookupError {
                    kind: LookupKind::NotFound,
                    message: format!("operation run not found: {run_id}"),
                });
            }
            let query = TargetQuery {
                operation_run_id: *run_id,
                status: None,
                phase_scope: PhaseScope::All,
                current_phase_index: 0,
                page: Page {
                    offset: 0,
                    limit: 0,
                },
            };
            let (targets, _) = self.store.run_targets_list(&query).await?;
            rows.extend(targets.into_iter().map(|t| CandidateEntry {
                rack_id: t.rack_id,
                components: t.components_by_type,
            }));
            let merged = planner::normalize_candidates(rows.clone())?;
            candidate_limit(merged.len(), self.max_candidate_targets)?;
        }
        Ok(planner::normalize_candidates(rows)?)
    }

    /// A run, with stats when asked (spec §4.8).
    pub async fn get(
        &self,
        id: Uuid,
        include_stats: bool,
    ) -> Result<(OperationRun, Option<RunStats>), EngineError> {
        let run = self
            .store
            .run_get(id)
            .await?
            .ok_or(EngineError::RunNotFound(id))?;
        if !include_stats {
            return Ok((run, None));
        }
        let mut stats = RunStats::default();
        let mut offset = 0;
        loop {
            let query = TargetQuery {
                operation_run_id: id,
                status: None,
                phase_scope: PhaseScope::CurrentAndCompleted,
                current_phase_index: run.current_phase_index,
                page: Page {
                    offset,
                    limit: READ_PAGE,
                },
            };
            let (targets, total) = self.store.run_targets_list(&query).await?;
            if offset >= total {
                break;
            }
            if targets.is_empty() {
                return Err(EngineError::StatsGap { offset, total });
            }
            for t in &targets {
                stats.add(t.phase_index, t.status);
            }
            offset += targets.len() as i64;
        }
        Ok((run, Some(stats)))
    }

    pub async fn list(
        &self,
        filter: &RunListFilter,
        page: Page,
    ) -> Result<(Vec<OperationRun>, i64), EngineError> {
        Ok(self.store.run_list(filter, page).await?)
    }

    /// Targets of a run in a phase scope, each with its rack's external id.
    pub async fn list_targets(
        &self,
        run_id: Uuid,
        status: Option<TargetStatus>,
        phase_scope: PhaseScope,
        page: Page,
    ) -> Result<TargetPage, EngineError> {
        let run = self
            .store
            .run_get(run_id)
            .await?
            .ok_or(EngineError::RunNotFound(run_id))?;
        let query = TargetQuery {
            operation_run_id: run_id,
            status,
            phase_scope,
            current_phase_index: run.current_phase_index,
            page,
        };
        let (targets, total) = self.store.run_targets_list(&query).await?;
        let ids: Vec<Uuid> = targets.iter().map(|t| t.rack_id).collect();
        let external: HashMap<Uuid, Option<String>> = self
            .store
            .racks_get_many(&ids)
            .await?
            .into_iter()
            .map(|r| (r.id, r.external_id))
            .collect();
        let mut out = Vec::with_capacity(targets.len());
        for t in targets {
            match external.get(&t.rack_id).cloned().flatten() {
                Some(ext) if !ext.is_empty() => out.push((t, ext)),
                _ => return Err(EngineError::RackWithoutExternalId(t.rack_id)),
            }
        }
        Ok(TargetPage {
            targets: out,
            total,
        })
    }
}

enum PlanFailure {
    /// Bad input discovered by phase allocation (InvalidArgument).
    Invalid(PlanError),
    Lookup(LookupError),
}

impl From<LookupError> for PlanFailure {
    fn from(e: LookupError) -> Self {
        PlanFailure::Lookup(e)
    }
}
