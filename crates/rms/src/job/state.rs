//! Job states and the transition table (spec §1.3).
//!
//! The allowed moves between states are held as data ([`TRANSITIONS`],
//! [`CREATION_RULES`], [`REMOVAL_RULES`]). The store consults this table on
//! every state change, so the table is the single definition of the
//! lifecycle: there is no second copy of the rules in code paths.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::ids::JobId;

/// The stored state of a job (spec §1.2).
#[derive(Debug, Clone)]
pub enum JobLifecycleState {
    Queued {
        description: String,
    },
    Running {
        description: String,
    },
    Completed {
        description: String,
        result_json: String,
    },
    Failed {
        description: String,
        /// The failure cause, shared so snapshots stay cheap to clone; its
        /// root carries the `JobError` code.
        failure: Arc<dyn StdError + Send + Sync + 'static>,
        message: String,
        result_json: String,
    },
}

impl JobLifecycleState {
    /// True for `Completed` and `Failed`.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Completed { .. } | Self::Failed { .. })
    }

    /// The user-visible state description.
    pub fn description(&self) -> &str {
        match self {
            Self::Queued { description }
            | Self::Running { description }
            | Self::Completed { description, .. }
            | Self::Failed { description, .. } => description,
        }
    }

    /// The public state this stored state corresponds to.
    pub fn state(&self) -> JobState {
        match self {
            Self::Queued { .. } => JobState::Queued,
            Self::Running { .. } => JobState::Running,
            Self::Completed { .. } => JobState::Completed,
            Self::Failed { .. } => JobState::Failed,
        }
    }
}

/// The public job state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    Queued,
    Running,
    Completed,
    Failed,
}

impl JobState {
    /// Every state.
    pub const ALL: [JobState; 4] = [
        JobState::Queued,
        JobState::Running,
        JobState::Completed,
        JobState::Failed,
    ];

    /// The wire string used by status RPCs.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
        }
    }

    /// True for `Completed` and `Failed`.
    pub fn is_terminal(self) -> bool {
        matches!(self, JobState::Completed | JobState::Failed)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an applied transition is classified, which picks its log line and
/// whether the terminal observer (metrics) fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransitionClass {
    /// The first `Queued → Running`: logged "job started".
    Started,
    /// A `Running → Running` description update: logged "job progress".
    Progress,
    /// The first non-terminal → terminal move: "job completed"/"job failed";
    /// the terminal observer fires exactly once, here.
    Terminal,
}

/// One allowed state-to-state move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransitionRule {
    pub from: JobState,
    pub to: JobState,
    pub class: TransitionClass,
    /// What triggers the move (documentation, shown in tests' messages).
    pub trigger: &'static str,
}

/// Every allowed state-to-state move. Any pair not listed is refused; in
/// particular terminal states are final and nothing returns to `Queued`.
pub const TRANSITIONS: [TransitionRule; 6] = [
    TransitionRule {
        from: JobState::Queued,
        to: JobState::Running,
        class: TransitionClass::Started,
        trigger: "JobHandle::progress or JobRegistry::mark_running",
    },
    TransitionRule {
        from: JobState::Running,
        to: JobState::Running,
        class: TransitionClass::Progress,
        trigger: "JobHandle::progress or JobRegistry::mark_running",
    },
    TransitionRule {
        from: JobState::Queued,
        to: JobState::Completed,
        class: TransitionClass::Terminal,
        trigger: "JobHandle::complete",
    },
    TransitionRule {
        from: JobState::Running,
        to: JobState::Completed,
        class: TransitionClass::Terminal,
        trigger: "JobHandle::complete",
    },
    TransitionRule {
        from: JobState::Queued,
        to: JobState::Failed,
        class: TransitionClass::Terminal,
        trigger: "JobHandle::fail, or an unsealed handle dropped",
    },
    TransitionRule {
        from: JobState::Running,
        to: JobState::Failed,
        class: TransitionClass::Terminal,
        trigger: "JobHandle::fail, or an unsealed handle dropped",
    },
];

/// The rule allowing `from → to`, if any.
pub fn transition_rule(from: JobState, to: JobState) -> Option<&'static TransitionRule> {
    TRANSITIONS
        .iter()
        .find(|rule| rule.from == from && rule.to == to)
}

/// What kind of record a creation makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreationKind {
    /// A leaf, child or reservation (`JobSpec::new`).
    Leaf,
    /// A top-level aggregate (`JobSpec::new_parent`).
    Parent,
}

/// The state each kind of record starts in.
pub const CREATION_RULES: [(CreationKind, JobState); 2] = [
    (CreationKind::Leaf, JobState::Queued),
    (CreationKind::Parent, JobState::Running),
];

/// The initial state for a creation kind.
pub fn initial_state(kind: CreationKind) -> JobState {
    match CREATION_RULES.iter().find(|(k, _)| *k == kind) {
        Some((_, state)) => *state,
        // Unreachable: both kinds are in the table (checked by a test).
        None => JobState::Queued,
    }
}

/// Ways a record leaves the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemovalTrigger {
    /// TTL eviction by the reaper or by capacity pruning (child-protected).
    TtlEviction,
    /// `remove_queued_leaf`: pre-spawn rollback of an unstarted reservation.
    RemoveQueuedLeaf,
}

/// From which states each removal may take a record.
pub const REMOVAL_RULES: [(JobState, RemovalTrigger); 3] = [
    (JobState::Completed, RemovalTrigger::TtlEviction),
    (JobState::Failed, RemovalTrigger::TtlEviction),
    (JobState::Queued, RemovalTrigger::RemoveQueuedLeaf),
];

/// True when `trigger` may remove a record in `state`.
pub fn removal_allowed(state: JobState, trigger: RemovalTrigger) -> bool {
    REMOVAL_RULES.contains(&(state, trigger))
}

/// Why a requested transition was not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    #[error("job {0} is not tracked")]
    UnknownJob(JobId),
    #[error("job {job_id}: transition from {from} to {to} is not allowed")]
    NotAllowed {
        job_id: JobId,
        from: JobState,
        to: JobState,
    },
    /// A conditional parent seal found a different number of children than
    /// the aggregation that computed it (a child attached in between).
    #[error("job {job_id}: children changed while aggregating")]
    ChildrenChanged { job_id: JobId },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_allows_exactly_the_spec_pairs() {
        use JobState::*;
        let allowed = [
            (Queued, Running, TransitionClass::Started),
            (Running, Running, TransitionClass::Progress),
            (Queued, Completed, TransitionClass::Terminal),
            (Running, Completed, TransitionClass::Terminal),
            (Queued, Failed, TransitionClass::Terminal),
            (Running, Failed, TransitionClass::Terminal),
        ];
        for from in JobState::ALL {
            for to in JobState::ALL {
                let expected = allowed
                    .iter()
                    .find(|(f, t, _)| *f == from && *t == to)
                    .map(|(_, _, class)| *class);
                assert_eq!(
                    transition_rule(from, to).map(|rule| rule.class),
                    expected,
                    "{from} -> {to}"
                );
            }
        }
    }

    #[test]
    fn terminal_states_have_no_outgoing_transitions() {
        for from in JobState::ALL.into_iter().filter(|s| s.is_terminal()) {
            for to in JobState::ALL {
                assert!(transition_rule(from, to).is_none(), "{from} -> {to}");
            }
        }
    }

    #[test]
    fn creation_and_removal_rules() {
        assert_eq!(initial_state(CreationKind::Leaf), JobState::Queued);
        assert_eq!(initial_state(CreationKind::Parent), JobState::Running);
        for state in JobState::ALL {
            assert_eq!(
                removal_allowed(state, RemovalTrigger::TtlEviction),
                state.is_terminal(),
                "TTL eviction from {state}"
            );
            assert_eq!(
                removal_allowed(state, RemovalTrigger::RemoveQueuedLeaf),
                state == JobState::Queued,
                "rollback from {state}"
            );
        }
    }

    #[test]
    fn wire_strings() {
        assert_eq!(JobState::Queued.as_str(), "queued");
        assert_eq!(JobState::Running.as_str(), "running");
        assert_eq!(JobState::Completed.as_str(), "completed");
        assert_eq!(JobState::Failed.as_str(), "failed");
        assert_eq!(
            serde_json::to_string(&JobState::Completed).unwrap(),
            "\"completed\""
        );
        assert!(!JobState::Queued.is_terminal());
        assert!(!JobState::Running.is_terminal());
        assert!(JobState::Completed.is_terminal());
        assert!(JobState::Failed.is_terminal());
    }
}
