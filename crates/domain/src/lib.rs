//! rackflow's domain: the hard rules as plain data and pure functions.
//!
//! This crate owns the inventory types, target specifications, operation-run
//! configuration with its validation and defaults, the planner (seeded
//! selection, ordering and phase allocation) and the run/target state types.
//! It does no I/O, is not async and knows nothing of gRPC or SQL: everything
//! here is tested without a database or a runtime.

#[macro_use]
mod named_enum;

pub mod audit;
pub mod bundle;
pub mod component;
pub mod conflict;
pub mod dispatch;
pub mod drift;
pub mod duration;
pub mod event_rule;
pub mod inventory;
pub mod leak;
pub mod planner;
pub mod report;
pub mod rule;
pub mod run;
pub mod schedule;
pub mod suggest;
pub mod target;
pub mod task;

pub use component::{ComponentSetError, ComponentType, ComponentsByType};
