//! The operation-run dispatcher's decisions and the manual controls, as pure
//! functions over the rows the engine has locked (spec operation-runs §3,
//! §4.2–4.5, decisions D1 and D3).
//!
//! This module owns:
//! - reconciliation of a target from its child task (§3.3);
//! - the phase summary and its predicates (§3.4);
//! - the safety gates and their exact messages (§3.8);
//! - the decision order of one dispatcher attempt (§3.5) and how a decision
//!   changes the run row;
//! - claiming under the concurrency quota (§3.6);
//! - what a submission outcome does to a target, including the conflict
//!   backoff that keeps its retry state across claims (§3.7, §3.9, D1);
//! - pause, resume, advance and cancel (§4.2–4.5);
//! - the order of one whole attempt, as one step ([`attempt`]).
//!
//! One file per concern: `reconcile`, `phase`, `gates`, `decide`, `claim`,
//! `backoff`, `control`, `messages` and `attempt`; each one's tests sit
//! beside it.
//!
//! Nothing here reads a clock, does I/O or is async: `now` is always a
//! parameter, so that one attempt decides with one instant and the engine's
//! transaction writes exactly what these functions computed.

mod attempt;
mod backoff;
mod claim;
mod control;
mod decide;
mod gates;
pub mod messages;
mod phase;
mod reconcile;
#[cfg(test)]
pub(crate) mod test_support;

pub use attempt::*;
pub use backoff::*;
pub use claim::*;
pub use control::*;
pub use decide::*;
use decide::{enter_running, finish, pause_with, stamp};
pub use gates::*;
pub use phase::*;
pub use reconcile::*;

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

use crate::duration::format_go_duration;
use crate::run::{
    ConflictPolicy, GateScope, OperationRun, OperationRunTarget, OutcomeCounts, PhaseStats,
    RetryState, RunOptions, RunReason, RunStatus, SafetyGate, TargetStatus,
};
use crate::task::TaskStatus;

/// How long a claim holds a target before another pass may re-claim it
/// (spec §3.1 "claim lease").
pub const DEFAULT_CLAIM_LEASE: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Time arithmetic
// ---------------------------------------------------------------------------

/// `now + d`, saturating: a configured duration too large for chrono must not
/// panic the dispatcher, and "practically never" is the right meaning.
fn add(now: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|delta| now.checked_add_signed(delta))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}
