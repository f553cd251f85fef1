//! `JobStore`: the authoritative job records and their derived node index.
//!
//! The store is plain data with no locking of its own; the registry keeps it
//! behind one `RwLock` so records and index always change together. Every
//! state change goes through [`JobStore::transition_state`], which consults
//! the transition table in `state.rs` and keeps the node index in step.
//!
//! Invariants (checked by `assert_consistent` in tests):
//! - `active_by_node[rack][node]` holds exactly the IDs of the non-terminal
//!   records whose `node_id` is non-empty;
//! - `child_tallies[parent]` counts the parent's present children by state,
//!   so aggregating a large batch on read needs no walk over its children
//!   (only the one read that seals a failed batch lists its failures).

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::aggregate::result_is_already_up_to_date;
use super::ids::JobId;
use super::registry::JobSnapshot;
use super::state::{
    JobLifecycleState, RemovalTrigger, TransitionClass, TransitionError, removal_allowed,
    transition_rule,
};

/// What an applied transition reports back to the registry.
pub(crate) enum TransitionEvent {
    /// `Started` or `Progress`, with the fields their log lines need.
    Running {
        class: TransitionClass,
        job_id: JobId,
        rack_id: String,
        node_id: String,
        description: String,
        span: tracing::Span,
    },
    /// The first terminal transition, with the post-transition snapshot.
    Terminal(JobSnapshot),
}

impl TransitionEvent {
    pub(crate) fn class(&self) -> TransitionClass {
        match self {
            TransitionEvent::Running { class, .. } => *class,
            TransitionEvent::Terminal(_) => TransitionClass::Terminal,
        }
    }
}

/// Present children of one parent, by state.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChildTally {
    pub queued: usize,
    pub running: usize,
    pub completed: usize,
    pub failed: usize,
    /// Completed children whose result says `"status":"already_up_to_date"`.
    pub skipped: usize,
}

impl ChildTally {
    fn apply(&mut self, state: &JobLifecycleState, add: bool) {
        let bump = |count: &mut usize| {
            *count = if add {
                count.saturating_add(1)
            } else {
                count.saturating_sub(1)
            };
        };
        match state {
            JobLifecycleState::Queued { .. } => bump(&mut self.queued),
            JobLifecycleState::Running { .. } => bump(&mut self.running),
            JobLifecycleState::Completed { result_json, .. } => {
                bump(&mut self.completed);
                if result_is_already_up_to_date(result_json) {
                    bump(&mut self.skipped);
                }
            }
            JobLifecycleState::Failed { .. } => bump(&mut self.failed),
        }
    }

    /// Children still present.
    pub fn present(&self) -> usize {
        self.queued + self.running + self.completed + self.failed
    }
}

/// Job records plus the `rack_id → node_id → active IDs` index and the
/// per-parent child tallies.
#[derive(Default)]
pub(crate) struct JobStore {
    by_id: HashMap<JobId, JobSnapshot>,
    active_by_node: HashMap<String, HashMap<String, HashSet<JobId>>>,
    child_tallies: HashMap<JobId, ChildTally>,
}

impl JobStore {
    /// Inserts a record under a vacant ID. A generated ID that collides with an
    /// existing record is regenerated until free; an existing record is never
    /// replaced. Returns the final ID.
    pub(crate) fn insert(&mut self, record: JobSnapshot) -> JobId {
        self.insert_with_id_generator(record, JobId::new)
    }

    /// Number of records, terminal ones included (what the capacity cap counts).
    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }

    pub(crate) fn get(&self, job_id: &str) -> Option<&JobSnapshot> {
        self.by_id.get(job_id)
    }

    pub(crate) fn snapshots(&self) -> impl Iterator<Item = &JobSnapshot> {
        self.by_id.values()
    }

    /// Any indexed active job for the node. Several may exist when jobs were
    /// created without the idle check; the node-busy message names one.
    pub(crate) fn active_job_for_node(&self, rack_id: &str, node_id: &str) -> Option<JobId> {
        self.active_by_node
            .get(rack_id)
            .and_then(|nodes| nodes.get(node_id))
            .and_then(|jobs| jobs.iter().next())
            .cloned()
    }

    /// A parent can accept a child only when it exists, is non-terminal and is
    /// not itself a child.
    pub(crate) fn can_accept_child(&self, parent_job_id: &str) -> bool {
        self.by_id
            .get(parent_job_id)
            .is_some_and(|parent| !parent.state.is_terminal() && parent.parent_job_id.is_none())
    }

    /// Appends the inserted record `child_id` to its parent's children,
    /// counts it in the parent's tally and bumps the parent's `updated_at`.
    /// False when the parent cannot accept it or the child is not stored.
    pub(crate) fn attach_child(
        &mut self,
        parent_job_id: &str,
        child_id: &JobId,
        now: DateTime<Utc>,
    ) -> bool {
        if !self.can_accept_child(parent_job_id) {
            return false;
        }
        let Some(child) = self.by_id.get(child_id) else {
            return false;
        };
        let mut tally = ChildTally::default();
        tally.apply(&child.state, true);
        let Some(parent) = self.by_id.get_mut(parent_job_id) else {
            return false;
        };
        parent.child_job_ids.push(child_id.clone());
        parent.updated_at = now;
        let entry = self.child_tallies.entry(parent.job_id.clone()).or_default();
        entry.queued += tally.queued;
        entry.running += tally.running;
        entry.completed += tally.completed;
        entry.failed += tally.failed;
        entry.skipped += tally.skipped;
        true
    }

    /// The parent's present children by state (all zero when it has none).
    pub(crate) fn child_tally(&self, parent_job_id: &str) -> ChildTally {
        self.child_tallies
            .get(parent_job_id)
            .copied()
            .unwrap_or_default()
    }

    /// Removes an unstarted leaf: only a `Queued` record that is not a parent
    /// and not linked to a parent (removing a linked child would make its
    /// parent count it as missing and fail).
    pub(crate) fn remove_queued_leaf(&mut self, job_id: &str) -> bool {
        let Some(record) = self.by_id.get(job_id) else {
            return false;
        };
        if record.is_parent()
            || record.parent_job_id.is_some()
            || !removal_allowed(record.state.state(), RemovalTrigger::RemoveQueuedLeaf)
        {
            return false;
        }
        self.remove(job_id).is_some()
    }

    /// Applies `next` if the transition table allows `current → next`, and,
    /// when `expected_children` is given, only if the record still has exactly
    /// that many children (a conditional parent seal). Returns what the
    /// registry needs to log and notify once the lock is released.
    pub(crate) fn transition_state(
        &mut self,
        job_id: &str,
        next: JobLifecycleState,
        now: DateTime<Utc>,
        expected_children: Option<usize>,
    ) -> Result<TransitionEvent, TransitionError> {
        let Some(record) = self.by_id.get_mut(job_id) else {
            return Err(TransitionError::UnknownJob(JobId::from(job_id)));
        };
        let from = record.state.state();
        let to = next.state();
        let Some(rule) = transition_rule(from, to) else {
            return Err(TransitionError::NotAllowed {
                job_id: record.job_id.clone(),
                from,
                to,
            });
        };
        if let Some(expected) = expected_children
            && record.child_job_ids.len() != expected
        {
            return Err(TransitionError::ChildrenChanged {
                job_id: record.job_id.clone(),
            });
        }

        let was_indexed = should_index(record);
        let parent = record.parent_job_id.clone();
        if let Some(tally) = parent.as_ref().and_then(|p| self.child_tallies.get_mut(p)) {
            tally.apply(&record.state, false);
            tally.apply(&next, true);
        }
        record.state = next;
        record.updated_at = now;
        let event = match rule.class {
            // Only the terminal observer needs a whole snapshot; progress
            // events carry just their log fields, so a parent with thousands
            // of children is not cloned on every progress update.
            TransitionClass::Terminal => TransitionEvent::Terminal(record.clone()),
            class => TransitionEvent::Running {
                class,
                job_id: record.job_id.clone(),
                rack_id: record.rack_id.clone(),
                node_id: record.node_id.clone(),
                description: record.state.description().to_owned(),
                span: record.span.clone(),
            },
        };
        if was_indexed && !should_index(record) {
            let (rack_id, node_id, job_id) = (
                record.rack_id.clone(),
                record.node_id.clone(),
                record.job_id.clone(),
            );
            self.remove_active_job(&rack_id, &node_id, &job_id);
        }
        Ok(event)
    }

    /// Evicts expired terminal records, protecting children of live parents
    /// (spec §1.13), and returns how many were removed.
    ///
    /// One pass: children of every parent that is not (terminal and expired)
    /// are protected; then every expired, unprotected record is removed unless
    /// it is a parent with children still present. An expired parent with
    /// expired children therefore needs two passes.
    pub(crate) fn cleanup_expired(&mut self, now: DateTime<Utc>, ttl: Duration) -> usize {
        let protected: HashSet<&JobId> = self
            .by_id
            .values()
            .filter(|job| job.is_parent() && !is_expired(job, now, ttl))
            .flat_map(|job| job.child_job_ids.iter())
            .collect();
        let removable: Vec<JobId> = self
            .by_id
            .iter()
            .filter(|(job_id, job)| {
                is_expired(job, now, ttl)
                    && !protected.contains(job_id)
                    && !job
                        .child_job_ids
                        .iter()
                        .any(|child| self.by_id.contains_key(child))
            })
            .map(|(job_id, _)| job_id.clone())
            .collect();
        for job_id in &removable {
            self.remove(job_id);
        }
        removable.len()
    }

    /// Shifts a record's timestamps into the past.
    #[cfg(test)]
    pub(crate) fn age_job_for_test(&mut self, job_id: &str, age: Duration) {
        let delta = chrono::Duration::from_std(age).expect("test age fits in chrono::Duration");
        if let Some(job) = self.by_id.get_mut(job_id) {
            job.created_at -= delta;
            job.updated_at -= delta;
        }
    }

    /// Removes a record outright (to simulate a child that went missing).
    #[cfg(test)]
    pub(crate) fn remove_for_test(&mut self, job_id: &str) -> bool {
        self.remove(job_id).is_some()
    }

    /// Asserts the node index holds exactly the records `should_index` accepts.
    #[cfg(test)]
    pub(crate) fn assert_consistent(&self) {
        let mut expected = HashMap::<String, HashMap<String, HashSet<JobId>>>::new();
        for job in self.by_id.values().filter(|job| should_index(job)) {
            expected
                .entry(job.rack_id.clone())
                .or_default()
                .entry(job.node_id.clone())
                .or_default()
                .insert(job.job_id.clone());
        }
        assert_eq!(self.active_by_node, expected, "node index out of step");

        for parent in self.by_id.values().filter(|job| job.is_parent()) {
            let mut recount = ChildTally::default();
            for child in parent
                .child_job_ids
                .iter()
                .filter_map(|id| self.by_id.get(id))
            {
                recount.apply(&child.state, true);
            }
            assert_eq!(
                self.child_tally(&parent.job_id),
                recount,
                "child tally of {} out of step",
                parent.job_id
            );
        }
        for parent in self.child_tallies.keys() {
            assert!(
                self.by_id.contains_key(parent),
                "tally for a removed parent"
            );
        }
    }

    fn insert_with_id_generator(
        &mut self,
        mut record: JobSnapshot,
        mut next_job_id: impl FnMut() -> JobId,
    ) -> JobId {
        loop {
            match self.by_id.entry(record.job_id.clone()) {
                Entry::Vacant(entry) => {
                    if should_index(&record) {
                        self.active_by_node
                            .entry(record.rack_id.clone())
                            .or_default()
                            .entry(record.node_id.clone())
                            .or_default()
                            .insert(record.job_id.clone());
                    }
                    let job_id = record.job_id.clone();
                    entry.insert(record);
                    return job_id;
                }
                Entry::Occupied(_) => record.job_id = next_job_id(),
            }
        }
    }

    /// Removes a record and its own index entry (never another job's entry
    /// for the same node).
    fn remove(&mut self, job_id: &str) -> Option<JobSnapshot> {
        let record = self.by_id.remove(job_id)?;
        self.remove_active_job(&record.rack_id, &record.node_id, &record.job_id);
        // A removed child counts as missing from now on.
        if let Some(tally) = record
            .parent_job_id
            .as_ref()
            .and_then(|parent| self.child_tallies.get_mut(parent))
        {
            tally.apply(&record.state, false);
        }
        self.child_tallies.remove(job_id);
        Some(record)
    }

    /// Removes one indexed ID and prunes empty node and rack buckets.
    fn remove_active_job(&mut self, rack_id: &str, node_id: &str, job_id: &JobId) {
        let Some(nodes) = self.active_by_node.get_mut(rack_id) else {
            return;
        };
        let Some(jobs) = nodes.get_mut(node_id) else {
            return;
        };
        jobs.remove(job_id);
        if jobs.is_empty() {
            nodes.remove(node_id);
            if nodes.is_empty() {
                self.active_by_node.remove(rack_id);
            }
        }
    }
}

/// Index membership turns only on carrying a node and not being terminal.
/// Being a leaf is deliberately not part of it: a top-level job that later
/// gains children keeps blocking its node while live; `new_parent` records
/// have an empty node and are never indexed.
fn should_index(job: &JobSnapshot) -> bool {
    !job.node_id.is_empty() && !job.state.is_terminal()
}

/// Terminal and `now - updated_at >= ttl`. A negative elapsed time (a
/// backwards clock step) is not expired.
pub(crate) fn is_expired(job: &JobSnapshot, now: DateTime<Utc>, ttl: Duration) -> bool {
    job.state.is_terminal()
        && now
            .signed_duration_since(job.updated_at)
            .to_std()
            .is_ok_and(|elapsed| elapsed >= ttl)
}

#[cfg(test)]
mod tests {
    use tokio_util::sync::CancellationToken;

    use super::*;

    fn leaf(description: &str, now: DateTime<Utc>) -> JobSnapshot {
        JobSnapshot {
            job_id: JobId::new(),
            span: tracing::Span::none(),
            state: JobLifecycleState::Queued {
                description: description.to_owned(),
            },
            rack_id: "rack".to_owned(),
            node_id: "node".to_owned(),
            created_at: now,
            updated_at: now,
            child_job_ids: Vec::new(),
            parent_job_id: None,
            cancellation_token: CancellationToken::new(),
            workflow_type: None,
        }
    }

    #[test]
    fn insert_retries_colliding_id_without_replacing_existing_record() {
        let now = Utc::now();
        let mut store = JobStore::default();
        let first = store.insert(leaf("first", now));
        let mut colliding = leaf("second", now);
        colliding.job_id = first.clone();
        let vacant = JobId::from("known-vacant-id");
        let mut ids = [first.clone(), vacant.clone()].into_iter();

        let second = store.insert_with_id_generator(colliding, || ids.next().expect("ids left"));

        assert_eq!(second, vacant);
        assert!(ids.next().is_none(), "both generated IDs were consumed");
        assert_eq!(store.len(), 2);
        assert_eq!(store.get(&first).unwrap().state.description(), "first");
        assert_eq!(store.get(&second).unwrap().state.description(), "second");
        assert_eq!(store.active_by_node["rack"]["node"].len(), 2);
        store.assert_consistent();
    }

    #[test]
    fn removing_queued_leaf_prunes_empty_buckets() {
        let mut store = JobStore::default();
        let id = store.insert(leaf("queued", Utc::now()));
        assert!(store.remove_queued_leaf(&id));
        assert_eq!(store.len(), 0);
        assert!(store.active_by_node.is_empty());
        store.assert_consistent();
    }

    #[test]
    fn attaching_child_bumps_parent_updated_at() {
        let now = Utc::now();
        let mut store = JobStore::default();
        let parent = store.insert(leaf("parent", now));
        let mut child = leaf("child", now);
        child.parent_job_id = Some(parent.clone());
        let child = store.insert(child);
        let later = now + chrono::Duration::seconds(5);
        assert!(store.attach_child(&parent, &child, later));
        assert_eq!(store.get(&parent).unwrap().updated_at, later);
        assert!(store.get(&parent).unwrap().is_parent());
        assert!(!store.attach_child(&parent, &JobId::from("not-stored"), later));
        store.assert_consistent();
    }

    #[test]
    fn child_tally_follows_transitions_and_removal() {
        let now = Utc::now();
        let mut store = JobStore::default();
        let parent = store.insert(leaf("parent", now));
        let children: Vec<JobId> = (0..3)
            .map(|_| {
                let mut child = leaf("child", now);
                child.parent_job_id = Some(parent.clone());
                let id = store.insert(child);
                assert!(store.attach_child(&parent, &id, now));
                id
            })
            .collect();
        assert_eq!(store.child_tally(&parent).queued, 3);
        let running = JobLifecycleState::Running {
            description: "r".into(),
        };
        store
            .transition_state(&children[0], running, now, None)
            .unwrap();
        let skipped = JobLifecycleState::Completed {
            description: "c".into(),
            result_json: r#"{"status":"already_up_to_date"}"#.into(),
        };
        store
            .transition_state(&children[1], skipped, now, None)
            .unwrap();
        let tally = store.child_tally(&parent);
        assert_eq!(
            (tally.queued, tally.running, tally.completed, tally.skipped),
            (1, 1, 1, 1)
        );
        store.assert_consistent();
        assert!(store.remove_for_test(&children[1]));
        assert_eq!(
            store.child_tally(&parent).present(),
            2,
            "removed child is missing"
        );
        store.assert_consistent();
        assert!(store.remove_for_test(&parent));
        assert_eq!(store.child_tally(&parent), ChildTally::default());
        store.assert_consistent();
    }

    #[test]
    fn removing_old_terminal_job_keeps_newer_active_entry_for_same_node() {
        let now = Utc::now();
        let mut store = JobStore::default();
        let old = store.insert(leaf("old", now));
        store
            .transition_state(
                &old,
                JobLifecycleState::Completed {
                    description: "done".into(),
                    result_json: String::new(),
                },
                now,
                None,
            )
            .unwrap();
        let newer = store.insert(leaf("new", now));
        let removed = store.cleanup_expired(now + chrono::Duration::seconds(10), Duration::ZERO);
        assert_eq!(removed, 1);
        assert_eq!(store.active_job_for_node("rack", "node"), Some(newer));
        store.assert_consistent();
    }

    #[test]
    fn backwards_clock_step_never_expires() {
        let now = Utc::now();
        let mut job = leaf("x", now);
        job.state = JobLifecycleState::Completed {
            description: "d".into(),
            result_json: String::new(),
        };
        assert!(!is_expired(
            &job,
            now - chrono::Duration::seconds(1),
            Duration::ZERO
        ));
        assert!(is_expired(&job, now, Duration::ZERO));
        assert!(!is_expired(&job, now, Duration::from_secs(1)));
        assert!(is_expired(
            &job,
            now + chrono::Duration::seconds(1),
            Duration::from_secs(1)
        ));
    }
}
