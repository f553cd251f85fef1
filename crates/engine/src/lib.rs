//! rackflow's engine: the parts that carry the domain's decisions out against
//! the store — for now the operation-run manager (planning inputs, create,
//! preview, reads). Later: the dispatcher loop, task submission, executors.
//!
//! The engine never parses wire messages; the server converts them first.

pub mod background;
pub mod dispatcher;
mod engine;
pub mod error;
pub mod executor;
pub mod manager;
pub mod resolve;
pub mod runs;
pub mod schedules;
pub mod sim;
pub mod tasks;

pub use background::Background;
pub use engine::Engine;
pub use error::EngineError;
