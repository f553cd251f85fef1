//! The operation-run dispatcher loop and the manual controls (spec
//! operation-runs §3, §4).
//!
//! One pass takes up to `batch` runnable runs, oldest `updated_at` first (a
//! processed run moves to the back, which keeps many concurrent runs fair).
//! Each run gets up to two attempts: one transaction that loads the locked
//! run and its unsettled current-phase targets, hands them to the domain's
//! [`dispatch::attempt`] (reconcile, decide, claim: pure code), writes the
//! plan it returns and commits; then, after the commit, each claimed
//! target's child task is submitted, inserted in one transaction with the
//! target's new state (a conflict or an error writes the target after).
//! A claimed target whose submission was lost (crash) keeps its lease and
//! is re-claimed once it expires; the idempotency key
//! `operation-run-target:<id>` makes the re-submission return the same task.
//!
//! Decision D2: the loop passes at start, is woken at once by create,
//! resume, advance, cancel and every child-task status change, and polls
//! every `poll_interval` as the safety net. Time-driven changes get a timer
//! of their own: the loop also wakes when a conflict backoff ends, a
//! conflict streak reaches `retry_timeout` or a claim lease expires, after
//! an auto-advance, and shortly after an attempt found its run locked.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use rackflow_domain::dispatch::{
    self, AttemptPlan, ChildSubmission, ControlError, Decision, PhaseSummary, SubmitEffect,
    SubmitResult,
};
use rackflow_domain::run::{OperationRun, RunStatus};
use rackflow_store::{LockMode, RunLock, Store, StoreError};
use tokio::sync::{Notify, broadcast};
use uuid::Uuid;

use crate::background::Background;
use crate::error::EngineError;
use crate::error::TaskError;
use crate::tasks::{ChildReads, TaskEvent, TaskManager};

/// Dispatcher tunables; defaults are the reference's (documented in
/// `docs/configuration.md`).
#[derive(Debug, Clone)]
pub struct DispatcherConfig {
    /// Safety-net poll; events wake the loop earlier.
    pub poll_interval: Duration,
    /// Runs per pass.
    pub batch: i64,
    /// How long a claim holds a target before another pass may re-claim it.
    pub claim_lease: Duration,
    /// Bound on the post-submission target write.
    pub submit_persist_timeout: Duration,
    /// Shared budget for cancelling child tasks after CancelOperationRun.
    pub cancel_budget: Duration,
}

impl Default for DispatcherConfig {
    fn default() -> Self {
        DispatcherConfig {
            poll_interval: Duration::from_secs(10),
            batch: 10,
            claim_lease: dispatch::DEFAULT_CLAIM_LEASE,
            submit_persist_timeout: Duration::from_secs(5),
            cancel_budget: Duration::from_secs(5),
        }
    }
}

/// Runs dispatched concurrently. Their transactions serialise on the
/// database anyway; what overlaps is the child submissions, so that one
/// run's refill does not wait behind nineteen others.
const CONCURRENT_RUNS: usize = 8;

/// What one attempt left to do after its commit.
struct Attempt {
    /// Claimed targets' child tasks, submitted after the commit.
    claimed: Vec<ChildSubmission>,
    /// The attempt moved the run to its next phase (decision #9), whose
    /// targets only the next pass locks and claims.
    advanced: bool,
    /// When time alone next changes a decision for this run
    /// ([`dispatch::next_due`]).
    due: Option<DateTime<Utc>>,
    /// The run's conflict policy, read under the lock (saves a re-read per
    /// submission batch).
    conflict_policy: rackflow_domain::run::ConflictPolicy,
    /// Child tasks the attempt read as finished, and so reconciled.
    seen_finished: Vec<Uuid>,
}

/// Requests for a run that came in while it was being dispatched.
#[derive(Default)]
struct Pending {
    /// Asked for again, for a reason other than a child's finish.
    again: bool,
    /// Children whose finish asked for the run meanwhile. A finish that an
    /// attempt of the dispatch in progress already read (it committed before
    /// that attempt's read) needs no further attempt: in a refill wave a
    /// third of all attempts used to be such no-ops, each a write
    /// transaction other refills queued behind.
    finished_children: HashSet<Uuid>,
}

impl Pending {
    /// Whether these requests need one more dispatch after one that read
    /// `seen_finished` children as finished.
    fn needs_another(&self, seen_finished: &HashSet<Uuid>) -> bool {
        self.again
            || self
                .finished_children
                .iter()
                .any(|task_id| !seen_finished.contains(task_id))
    }
}

/// Drives operation runs and applies manual controls.
pub struct Dispatcher {
    store: Arc<dyn Store>,
    tasks: Arc<TaskManager>,
    config: DispatcherConfig,
    wake: Notify,
    /// Run ids whose row was written (for watchers).
    changes: broadcast::Sender<Uuid>,
    /// Child task → its run, for the tasks this process submitted: a
    /// finished child wakes its own run at once instead of a whole pass.
    run_of_task: Mutex<HashMap<Uuid, Uuid>>,
    /// Runs being dispatched right now, and the requests that came in
    /// meanwhile (then the run is dispatched once more when it is done,
    /// unless the dispatch already covered them).
    busy: Mutex<HashMap<Uuid, Pending>>,
    /// Bounds how many runs are dispatched at once.
    slots: tokio::sync::Semaphore,
    /// The loop, runs dispatched from task events, and cancellations of
    /// child tasks; [`Dispatcher::shutdown`] waits for all of them.
    background: Background,
    /// The earliest backoff end, conflict timeout or lease expiry an attempt
    /// saw: the loop sleeps no longer than that (D2).
    next_due: Mutex<Option<DateTime<Utc>>>,
    /// `next_due` moved earlier: the loop recomputes its sleep.
    due_changed: Notify,
    /// Runs asked for by id ([`Dispatcher::wake_run`]); the loop drains it.
    requested: Mutex<Vec<Uuid>>,
    run_requested: Notify,
}

impl Dispatcher {
    pub fn new(
        store: Arc<dyn Store>,
        tasks: Arc<TaskManager>,
        config: DispatcherConfig,
    ) -> Arc<Dispatcher> {
        let (changes, _) = broadcast::channel(1024);
        Arc::new(Dispatcher {
            store,
            tasks,
            config,
            wake: Notify::new(),
            changes,
            run_of_task: Mutex::new(HashMap::new()),
            busy: Mutex::new(HashMap::new()),
            slots: tokio::sync::Semaphore::new(CONCURRENT_RUNS),
            background: Background::new("dispatcher"),
            next_due: Mutex::new(None),
            due_changed: Notify::new(),
            requested: Mutex::new(Vec::new()),
            run_requested: Notify::new(),
        })
    }

    /// Asks for a pass as soon as possible.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Asks for one run to be dispatched at once (create, resume, advance,
    /// auto-advance). A pass takes only `batch` runs, oldest first, so with
    /// more runs than that a new run used to wait for the safety-net poll
    /// (10 s) once the others were dispatching themselves from their child
    /// tasks' events.
    pub fn wake_run(&self, id: Uuid) {
        self.requested.lock().push(id);
        self.run_requested.notify_one();
    }

    /// Run ids whose state was written, as they happen.
    pub fn subscribe(&self) -> broadcast::Receiver<Uuid> {
        self.changes.subscribe()
    }

    fn changed(&self, run_id: Uuid) {
        let _ = self.changes.send(run_id);
    }

    /// Records a future instant at which a pass must run.
    fn due_at(&self, at: Option<DateTime<Utc>>) {
        let Some(at) = at else { return };
        let mut due = self.next_due.lock();
        if due.is_none_or(|d| at < d) {
            *due = Some(at);
            // The loop may be asleep with a longer timeout.
            self.due_changed.notify_one();
        }
    }

    /// How long the loop may sleep: the poll interval, or less if a
    /// backoff, conflict timeout or lease ends sooner. Without this a
    /// blocked target waited for the safety-net poll (default 10 s) however
    /// short its backoff, and a conflict timeout was noticed that late.
    fn sleep_for(&self) -> Duration {
        let poll = self.config.poll_interval;
        let due = *self.next_due.lock();
        match due.map(|at| (at - Utc::now()).to_std()) {
            // A little slack so that the pass sees the instant as passed.
            Some(Ok(left)) => poll.min(left + Duration::from_millis(5)),
            Some(Err(_)) => poll.min(Duration::from_millis(5)),
            None => poll,
        }
    }

    /// Forgets a due instant that has passed (the pass about to run
    /// records the next ones).
    fn clear_passed_due(&self) {
        let mut due = self.next_due.lock();
        if due.is_some_and(|d| d <= Utc::now()) {
            *due = None;
        }
    }

    /// Starts the loop; [`Dispatcher::shutdown`] stops it.
    pub fn spawn(self: &Arc<Self>) {
        let dispatcher = Arc::clone(self);
        let mut task_events = self.tasks.subscribe();
        let shutdown = self.background.token().clone();
        self.background.spawn("dispatcher loop", async move {
            let mut full_pass = true;
            loop {
                if full_pass {
                    dispatcher.pass().await;
                }
                full_pass = true;
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = dispatcher.wake.notified() => {}
                    () = dispatcher.due_changed.notified() => full_pass = false,
                    () = dispatcher.run_requested.notified() => {
                        let requested = std::mem::take(&mut *dispatcher.requested.lock());
                        for id in requested {
                            dispatcher.dispatch_soon(id);
                        }
                        full_pass = false;
                    }
                    event = task_events.recv() => {
                        // Events of children this process submitted go
                        // straight to their run; anything else (and a lagged
                        // receiver) falls back to a full pass.
                        let mut unknown = false;
                        let mut handle = |event: Result<TaskEvent, broadcast::error::RecvError>| match event {
                            // Pending, waiting and running all count as an
                            // active child (§3.3), so an unfinished task
                            // changes no decision. Every child this process
                            // submits announces itself that way, often after
                            // its run is known here: an attempt for each was a
                            // third of all attempts in a refill wave, and a
                            // full pass for each (before the run is known) a
                            // sixth of the dispatcher's CPU with twenty runs.
                            Ok(e) if !e.status.is_finished() => {}
                            Ok(e) => match dispatcher.finished_child_run(e.task_id) {
                                Some(run) => dispatcher.request(run, Some(e.task_id)),
                                None => unknown = true,
                            },
                            Err(broadcast::error::RecvError::Lagged(_)) => unknown = true,
                            Err(broadcast::error::RecvError::Closed) => {}
                        };
                        handle(event);
                        loop {
                            match task_events.try_recv() {
                                Ok(e) => handle(Ok(e)),
                                Err(broadcast::error::TryRecvError::Lagged(n)) => {
                                    handle(Err(broadcast::error::RecvError::Lagged(n)))
                                }
                                Err(_) => break,
                            }
                        }
                        full_pass = unknown;
                    }
                    () = tokio::time::sleep(dispatcher.sleep_for()) => dispatcher.clear_passed_due(),
                }
            }
            tracing::debug!("dispatcher loop stopped");
        });
    }

    /// Stops the loop and waits for the runs being dispatched from task
    /// events (they run outside the loop): a submission finishing after the
    /// task manager stopped would leave a task `running` that no executor
    /// runs (or a claim only its lease recovers). No new dispatch starts
    /// once this is called.
    pub async fn shutdown(&self) {
        self.background.shutdown().await;
    }

    /// The run a finished child task belongs to, which is forgotten.
    fn finished_child_run(&self, task_id: Uuid) -> Option<Uuid> {
        self.run_of_task.lock().remove(&task_id)
    }

    /// Dispatches one run in the background; if it is being dispatched
    /// right now, once more after that.
    fn dispatch_soon(self: &Arc<Self>, id: Uuid) {
        self.request(id, None);
    }

    /// Dispatches one run in the background, for `finished_child` if a
    /// child's finish asks. If the run is being dispatched right now, the
    /// request is kept and served by one more dispatch after that — unless
    /// it only reported a child that dispatch read as finished already.
    fn request(self: &Arc<Self>, id: Uuid, finished_child: Option<Uuid>) {
        {
            let mut busy = self.busy.lock();
            if let Some(pending) = busy.get_mut(&id) {
                match finished_child {
                    Some(task_id) => {
                        pending.finished_children.insert(task_id);
                    }
                    None => pending.again = true,
                }
                return;
            }
            busy.insert(id, Pending::default());
        }
        let dispatcher = Arc::clone(self);
        let started = self.background.spawn("dispatch run", async move {
            loop {
                if dispatcher.background.is_stopping() {
                    dispatcher.busy.lock().remove(&id);
                    return;
                }
                let seen_finished = {
                    let _slot = dispatcher.slots.acquire().await;
                    match dispatcher.dispatch_run(id).await {
                        Ok(seen) => seen,
                        Err(e) => {
                            tracing::warn!(run_id = %id, error = %e, "dispatch operation run {id}: {e}");
                            HashSet::new()
                        }
                    }
                };
                let mut busy = dispatcher.busy.lock();
                let Some(pending) = busy.get_mut(&id) else {
                    return;
                };
                if !std::mem::take(pending).needs_another(&seen_finished) {
                    busy.remove(&id);
                    return;
                }
            }
        });
        if started.is_none() {
            self.busy.lock().remove(&id);
        }
    }

    /// One pass over up to `batch` runnable runs, dispatched concurrently;
    /// returns when they are done. Errors are logged per run.
    pub async fn pass(self: &Arc<Self>) {
        let ids = match self.store.run_ids_runnable(self.config.batch).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e, "dispatcher could not list runnable runs");
                return;
            }
        };
        let mut set = tokio::task::JoinSet::new();
        for id in ids {
            let dispatcher = Arc::clone(self);
            set.spawn(async move {
                let _slot = dispatcher.slots.acquire().await;
                if let Err(e) = dispatcher.dispatch_run(id).await {
                    tracing::warn!(run_id = %id, error = %e, "dispatch operation run {id}: {e}");
                }
            });
        }
        while set.join_next().await.is_some() {}
    }

    /// Up to two attempts for one run (§3.2 step 8), with the same `now`.
    /// Returns the child tasks the attempts read as finished. Its log lines
    /// carry the run's id.
    #[tracing::instrument(name = "run_dispatch", level = "info", skip_all, fields(run_id = %id))]
    pub async fn dispatch_run(&self, id: Uuid) -> Result<HashSet<Uuid>, EngineError> {
        let now = Utc::now();
        let mut seen_finished = HashSet::new();
        for _ in 0..2 {
            let Some(attempt) = self.attempt(id, now).await? else {
                self.retry_if_locked(id).await;
                return Ok(seen_finished);
            };
            seen_finished.extend(attempt.seen_finished.iter().copied());
            self.changed(id);
            self.due_at(attempt.due);
            if attempt.advanced {
                // Decision #9 claims nothing: the new phase's targets are
                // locked by the next pass. No event announces that pass (no
                // child task changed), so without this wake an auto-advancing
                // run sat idle until the safety-net poll (D2).
                self.wake_run(id);
                return Ok(seen_finished);
            }
            if !self
                .submit_claimed(id, attempt.claimed, &attempt.conflict_policy)
                .await
            {
                return Ok(seen_finished);
            }
        }
        Ok(seen_finished)
    }

    /// An attempt did not obtain the run. If it is still pending or running,
    /// its row was locked (SKIP LOCKED) by a manual control — even one that
    /// fails or changes nothing, like a rejected Resume — or by another
    /// attempt of this process that read the child tasks before the change
    /// that asked for this one. Nothing would ask again (the event was
    /// spent), so the run idled until the safety-net poll: retry shortly.
    async fn retry_if_locked(&self, id: Uuid) {
        if let Ok(Some(run)) = self.store.run_get(id).await
            && matches!(run.status, RunStatus::Pending | RunStatus::Running)
        {
            self.due_at(Some(Utc::now() + chrono::TimeDelta::milliseconds(20)));
        }
    }

    /// One locked transaction: load the run, let the domain plan the
    /// attempt ([`dispatch::attempt`]), write what it planned. `None` when
    /// the run was not obtained.
    async fn attempt(&self, id: Uuid, now: DateTime<Utc>) -> Result<Option<Attempt>, EngineError> {
        let lease = self.config.claim_lease;
        let started = std::time::Instant::now();
        let mut planned: Option<AttemptPlan> = None;
        let mut seen_finished = Vec::new();
        let mut tripped = None;
        let mut apply = |lock: &mut RunLock| -> Result<(), StoreError> {
            seen_finished = lock
                .task_states
                .iter()
                .filter(|(_, (status, _))| status.is_finished())
                .map(|(id, _)| *id)
                .collect();
            let plan = dispatch::attempt(lock, now, lease);
            // A gate trip, an automatic advance or the run's end is recorded
            // with the change, in its transaction.
            lock.audit.extend(rackflow_domain::audit::system_event(
                now, &lock.run, &plan.run,
            ));
            tripped = crate::metrics::gate_trip(&lock.run, &plan.run);
            lock.run.clone_from(&plan.run);
            lock.targets.clone_from(&plan.targets);
            planned = Some(plan);
            Ok(())
        };
        let obtained = self
            .store
            .run_lock_apply(id, LockMode::Runnable, &mut apply)
            .await?;
        let metrics = self.tasks.metrics();
        metrics.dispatch_attempt(started.elapsed());
        let Some(plan) = obtained.and(planned) else {
            return Ok(None);
        };
        if let Some(reason) = tripped {
            metrics.gate_tripped(reason);
        }
        if plan.is_transition() {
            tracing::info!(run_id = %plan.run.id, status = %plan.run.status, reason = %plan.run.reason, message = %plan.run.status_message, "operation run transition");
        }
        tracing::debug!(run_id = %plan.run.id, claimed = plan.submissions.len(), waiting_on = ?plan.waiting_on, "dispatcher attempt");
        Ok(Some(Attempt {
            advanced: matches!(plan.decision, Decision::AdvancePhase { .. }),
            due: plan.next_due,
            conflict_policy: plan.run.configuration.options.conflict_policy,
            claimed: plan.submissions,
            seen_finished,
        }))
    }

    /// The racks of the claimed children read together
    /// ([`TaskManager::read_children_racks`]) when they are of one
    /// operation without an explicit rule (a run's children always are of
    /// one operation); otherwise each child reads its own.
    async fn read_children_racks(&self, claimed: &[ChildSubmission]) -> ChildReads {
        let [first, _, ..] = claimed else {
            return ChildReads::new();
        };
        let (task_type, code) = (first.request.task_type, &first.request.information.code);
        let one_operation = claimed.iter().all(|s| {
            s.request.rule_id.is_none()
                && s.request.task_type == task_type
                && s.request.information.code == *code
        });
        if !one_operation {
            return ChildReads::new();
        }
        let rack_ids: Vec<Uuid> = claimed.iter().map(|s| s.request.required_rack_id).collect();
        self.tasks
            .read_children_racks(task_type, code, &rack_ids)
            .await
    }

    /// Submits claimed targets' child tasks; true when a slot was freed (a
    /// conflict or a failure), which earns the run a second attempt.
    async fn submit_claimed(
        &self,
        run_id: Uuid,
        claimed: Vec<ChildSubmission>,
        policy: &rackflow_domain::run::ConflictPolicy,
    ) -> bool {
        let mut freed = false;
        let mut started: Vec<Uuid> = Vec::new();
        // The claimed targets sit on different racks, so their submissions
        // are independent: each goes in its own transaction, side by side,
        // so that the first child starts as soon as its own reads and
        // insert are done. (One transaction for all of them made every child
        // of a wave wait for the slowest one's reads and the whole batch's
        // commit; the wave then finished and refilled as one block, and the
        // makespan bench's freed-slot time went up instead of down.)
        //
        // What they read first is read for all of them at once, though: a
        // child's own reads (six statements) were ~15 % of the server's CPU
        // at 1,000 in flight.
        let mut reads = self.read_children_racks(&claimed).await;
        let mut submissions = tokio::task::JoinSet::new();
        for (index, ChildSubmission { target, request }) in claimed.into_iter().enumerate() {
            let tasks = Arc::clone(&self.tasks);
            let read_ahead = reads.remove(&request.required_rack_id);
            submissions.spawn(async move {
                let result = tasks
                    .submit_child(request.into(), &target, read_ahead)
                    .await;
                (index, target, result)
            });
        }
        let mut results = Vec::new();
        while let Some(joined) = submissions.join_next().await {
            match joined {
                Ok(result) => results.push(result),
                // A panicked submission leaves its claim to expire and be
                // claimed again (same idempotency key).
                Err(e) => {
                    tracing::error!(run_id = %run_id, error = %e, "child submission panicked")
                }
            }
        }
        results.sort_by_key(|(index, _, _)| *index);
        for (_, mut target, result) in results {
            let now = Utc::now();
            // The submission wrote the target with its new task already.
            let written = matches!(result, Ok((_, true)));
            let result = result.map(|(id, _)| vec![id]);
            let effect = match &result {
                Ok(ids) => {
                    dispatch::on_submit_result(&mut target, SubmitResult::Tasks(ids), policy, now)
                }
                Err(EngineError::Task(e)) if e.is_unavailable() => {
                    dispatch::on_submit_result(&mut target, SubmitResult::Unavailable, policy, now)
                }
                Err(EngineError::Task(TaskError::RackConflict(_))) => {
                    let text = result
                        .as_ref()
                        .err()
                        .map(ToString::to_string)
                        .unwrap_or_default();
                    dispatch::on_submit_result(
                        &mut target,
                        SubmitResult::Conflict(&text),
                        policy,
                        now,
                    )
                }
                Err(e) => {
                    let text = e.to_string();
                    dispatch::on_submit_result(&mut target, SubmitResult::Error(&text), policy, now)
                }
            };
            match &effect {
                SubmitEffect::Active(task_id) => {
                    started.push(*task_id);
                    self.run_of_task.lock().insert(*task_id, run_id);
                    tracing::debug!(run_id = %run_id, target_id = %target.id, task_id = %task_id, "operation run target submitted");
                }
                SubmitEffect::Blocked(outcome) => {
                    self.due_at(dispatch::next_due(
                        std::slice::from_ref(&target),
                        policy,
                        now,
                    ));
                    tracing::info!(run_id = %run_id, target_id = %target.id, retry_in_secs = outcome.delay.as_secs(), "operation run target blocked by a rack conflict");
                }
                SubmitEffect::Failed => {
                    tracing::warn!(run_id = %run_id, target_id = %target.id, message = %target.message, "operation run target failed at submission");
                }
                SubmitEffect::Unknown => {
                    let error = result
                        .as_ref()
                        .err()
                        .map(ToString::to_string)
                        .unwrap_or_default();
                    tracing::warn!(run_id = %run_id, target_id = %target.id, error = %error, "child submission could not reach the database; the target stays claimed and is submitted again when its claim lease expires");
                    self.due_at(dispatch::next_due(
                        std::slice::from_ref(&target),
                        policy,
                        now,
                    ));
                }
            }
            freed |= effect.frees_slot();
            // Nothing to write: the target is as the claim left it.
            if written || effect == SubmitEffect::Unknown {
                continue;
            }
            let write = self.store.run_target_update(&target);
            match tokio::time::timeout(self.config.submit_persist_timeout, write).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(target_id = %target.id, error = %e, "target write after submission failed; the claim lease recovers it")
                }
                Err(_) => {
                    tracing::warn!(target_id = %target.id, "target write after submission timed out; the claim lease recovers it")
                }
            }
        }
        self.cancel_if_run_cancelled(run_id, &started).await;
        self.changed(run_id);
        freed
    }

    /// A CancelOperationRun that committed while these children were being
    /// submitted cancelled only the children whose target already had a
    /// task id; the ones created here were still `claimed` and would have
    /// run on after the run was cancelled. Reading the run after every
    /// target write closes the gap: either the cancel listed the target
    /// after its write (and cancels the task), or this read comes after the
    /// cancel's commit (and we do). Cancelling twice is harmless.
    async fn cancel_if_run_cancelled(&self, run_id: Uuid, started: &[Uuid]) {
        if started.is_empty() {
            return;
        }
        match self.store.run_get(run_id).await {
            Ok(Some(run)) if run.status == RunStatus::Cancelled => {
                for task_id in started {
                    if let Err(e) = self.tasks.cancel(*task_id).await {
                        tracing::warn!(run_id = %run_id, task_id = %task_id, error = %e, "child submitted during the cancel not cancelled");
                    }
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(run_id = %run_id, error = %e, "could not re-read the run after submissions")
            }
        }
    }

    // ---- manual controls (§4) ---------------------------------------------

    async fn control(
        &self,
        id: Uuid,
        actor: &str,
        action: &str,
        mut f: impl FnMut(
            &OperationRun,
            &PhaseSummary,
        ) -> Result<dispatch::ControlOutcome, ControlError>
        + Send,
    ) -> Result<OperationRun, EngineError> {
        let mut result: Option<Result<OperationRun, ControlError>> = None;
        let mut written = false;
        let mut apply = |lock: &mut RunLock| -> Result<(), StoreError> {
            let summary =
                PhaseSummary::for_run(&lock.run, &lock.targets, lock.settled, lock.earlier);
            match f(&lock.run, &summary) {
                Ok(outcome) => {
                    written = outcome.changed;
                    if outcome.changed {
                        // The control and its record commit together.
                        lock.audit.push(rackflow_domain::audit::control_event(
                            Utc::now(),
                            actor,
                            action,
                            &lock.run,
                            &outcome.run,
                        ));
                    }
                    lock.run = outcome.run.clone();
                    result = Some(Ok(outcome.run));
                }
                Err(e) => result = Some(Err(e)),
            }
            Ok(())
        };
        let found = self
            .store
            .run_lock_apply(id, LockMode::Wait, &mut apply)
            .await?;
        if found.is_none() {
            return Err(EngineError::RunNotFound(id));
        }
        match result {
            Some(Ok(run)) => {
                self.changed(id);
                if !written {
                    return Ok(run);
                }
                // The store stamps `updated_at` with its own clock and keeps
                // microseconds, so the in-memory row carried an
                // `updated_at` (and `started_at` / `finished_at`) that
                // GetOperationRun never returns: a reply must show the row
                // as persisted. If the dispatcher changed the row in
                // between, our own outcome is the better answer.
                match self.store.run_get(id).await {
                    Ok(Some(stored))
                        if stored.status == run.status
                            && stored.reason == run.reason
                            && stored.status_message == run.status_message
                            && stored.current_phase_index == run.current_phase_index =>
                    {
                        Ok(stored)
                    }
                    _ => Ok(run),
                }
            }
            Some(Err(e)) => Err(EngineError::Control(e)),
            None => Err(EngineError::RunNotFound(id)),
        }
    }

    /// Pauses the run; `actor` (the caller's identity) and `action` (the
    /// RPC) go to the audit trail with the change.
    pub async fn pause(
        &self,
        id: Uuid,
        actor: &str,
        action: &str,
    ) -> Result<OperationRun, EngineError> {
        let run = self
            .control(id, actor, action, |run, _| dispatch::pause(run, Utc::now()))
            .await?;
        tracing::info!(run_id = %id, status = %run.status, "pause requested");
        Ok(run)
    }

    pub async fn resume(
        &self,
        id: Uuid,
        actor: &str,
        action: &str,
    ) -> Result<OperationRun, EngineError> {
        let run = self
            .control(id, actor, action, |run, summary| {
                dispatch::resume(run, summary, Utc::now())
            })
            .await?;
        tracing::info!(run_id = %id, status = %run.status, "resume requested");
        self.wake_run(id);
        Ok(run)
    }

    pub async fn advance(
        &self,
        id: Uuid,
        expected_phase_index: Option<i32>,
        actor: &str,
        action: &str,
    ) -> Result<OperationRun, EngineError> {
        let run = self
            .control(id, actor, action, |run, summary| {
                dispatch::advance(run, summary, expected_phase_index, Utc::now())
            })
            .await?;
        tracing::info!(run_id = %id, phase = run.current_phase_index, status = %run.status, "advance requested");
        self.wake_run(id);
        Ok(run)
    }

    /// Cancels the run, then — only after the commit — its current phase's
    /// child tasks within one shared budget. Failures there are logged; the
    /// run stays cancelled and its targets are not modified.
    pub async fn cancel(
        &self,
        id: Uuid,
        reason: &str,
        actor: &str,
        action: &str,
    ) -> Result<OperationRun, EngineError> {
        let mut was_terminal = false;
        let run = self
            .control(id, actor, action, |run, _| {
                was_terminal = run.status.is_terminal();
                Ok(dispatch::cancel(run, reason, Utc::now()))
            })
            .await?;
        if was_terminal {
            return Ok(run);
        }
        tracing::info!(run_id = %id, "operation run cancelled");
        let tasks = Arc::clone(&self.tasks);
        let store = Arc::clone(&self.store);
        let budget = self.config.cancel_budget;
        let cancel_children = async move {
            let targets = match store.run_current_targets(id).await {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(run_id = %id, error = %e, "could not list targets to cancel");
                    return;
                }
            };
            for task_id in dispatch::tasks_to_cancel(&targets) {
                if let Err(e) = tasks.cancel(task_id).await {
                    tracing::warn!(run_id = %id, task_id = %task_id, error = %e, "child task not cancelled");
                }
            }
        };
        // Detached from the caller's cancellation, bounded by the budget.
        let bounded = async move {
            if tokio::time::timeout(budget, cancel_children).await.is_err() {
                tracing::warn!(run_id = %id, "cancelling child tasks ran out of its budget");
            }
        };
        match self.background.spawn("cancel child tasks", bounded) {
            Some(handle) => {
                let _ = handle.await;
            }
            // Shutting down: the children stop with the task manager and
            // the run is cancelled already.
            None => tracing::warn!(run_id = %id, "child tasks not cancelled: shutting down"),
        }
        self.wake();
        Ok(run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finishes_the_dispatch_read_need_no_other_attempt() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let seen: HashSet<Uuid> = [a, b].into();
        let pending = Pending {
            again: false,
            finished_children: [a, b].into(),
        };
        assert!(!pending.needs_another(&seen));
        assert!(!Pending::default().needs_another(&seen));
    }

    #[test]
    fn a_finish_the_dispatch_did_not_read_needs_another_attempt() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let pending = Pending {
            again: false,
            finished_children: [a, b].into(),
        };
        assert!(pending.needs_another(&[a].into()));
        // A dispatch that failed read nothing.
        assert!(pending.needs_another(&HashSet::new()));
    }

    #[test]
    fn any_other_request_needs_another_attempt() {
        let a = Uuid::new_v4();
        let pending = Pending {
            again: true,
            finished_children: [a].into(),
        };
        assert!(pending.needs_another(&[a].into()));
    }
}
