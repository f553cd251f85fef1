//! rackflow's engine: the parts that carry the domain's decisions out against
//! the store — for now the operation-run manager (planning inputs, create,
//! preview, reads). Later: the dispatcher loop, task submission, executors.
//!
//! The engine never parses wire messages; the server converts them first.

pub mod audit;
pub mod background;
pub mod dispatcher;
mod engine;
pub mod error;
pub mod event_rules;
pub mod executor;
pub mod inventory;
pub mod leaks;
pub mod manager;
pub mod metrics;
pub mod resolve;
pub mod rules;
pub mod runs;
pub mod schedules;
pub mod secrets;
pub mod sim;
pub mod tasks;

/// The store handle and the query types of the engine's methods, re-exported
/// so that the server opens the store only to hand it to the engine and never
/// depends on the store crate itself.
pub mod store {
    pub use rackflow_store::{
        AuditFilter, BindOutcome, ComponentFilterQuery, ComponentPatch, DbTarget, EventRuleDeleted,
        EventRuleUpdate, InventoryColumn, LeakEventFilter, ListOrder, NvlDomainQuery, PurgeOutcome,
        RackFilter, RackImport, RackPatch, ResealOutcome, ScheduleFilter, Store, StoreError,
        TaskFilter, TextFilter, open_store,
    };
}

pub use background::Background;
pub use engine::Engine;
pub use error::EngineError;
