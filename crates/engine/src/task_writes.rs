//! Group commit of the task-row writes that running tasks make on their
//! own: report snapshots and outcomes.
//!
//! With a thousand tasks in flight each of them wrote its snapshots and its
//! outcome in a transaction of its own, so the database spent its time
//! committing (on PostgreSQL every commit waited for its WAL flush, and the
//! writes queued on it). Here a write is queued; whoever finds no flush
//! under way starts one, which writes everything queued by then in one
//! transaction ([`Store::task_updates_quiet`]), answers each writer, and
//! goes on while more came in meanwhile. Under load a batch forms while
//! the previous one commits; alone, a write costs what it cost before.
//!
//! Each write keeps its own condition (expected status, owner) and its own
//! answer; a batch the database refuses is written again one update at a
//! time, so that one bad update fails alone and the others still land.

use std::sync::Arc;

use parking_lot::Mutex;
use rackflow_store::{Store, StoreError, StoreResult, TaskUpdate};
use tokio::sync::oneshot;
use uuid::Uuid;

/// Most updates in one transaction: a batch bounds how long the writers
/// of the next one wait.
const MAX_BATCH: usize = 256;

/// One queued write and where its answer goes.
struct Queued {
    task_id: Uuid,
    update: TaskUpdate,
    reply: oneshot::Sender<StoreResult<bool>>,
}

#[derive(Default)]
struct Queue {
    writes: Vec<Queued>,
    /// A flush is under way: it takes what is queued before it stops.
    flushing: bool,
}

/// The shared writer; see the module comment.
pub(crate) struct TaskWrites {
    store: Arc<dyn Store>,
    queue: Mutex<Queue>,
}

impl TaskWrites {
    pub(crate) fn new(store: Arc<dyn Store>) -> Arc<TaskWrites> {
        Arc::new(TaskWrites {
            store,
            queue: Mutex::new(Queue::default()),
        })
    }

    /// [`Store::task_update_quiet`], committed together with the other
    /// writes queued meanwhile.
    pub(crate) async fn update_quiet(
        self: &Arc<Self>,
        task_id: Uuid,
        update: TaskUpdate,
    ) -> StoreResult<bool> {
        let (reply, answer) = oneshot::channel();
        let start_flush = {
            let mut queue = self.queue.lock();
            queue.writes.push(Queued {
                task_id,
                update,
                reply,
            });
            !std::mem::replace(&mut queue.flushing, true)
        };
        if start_flush {
            // A task of its own, not this caller's future: a writer that
            // stops waiting (its task was cancelled) must not strand the
            // writes of the others. It ends once the queue is empty, and
            // every write it takes is answered.
            let writes = Arc::clone(self);
            tokio::spawn(async move { writes.flush().await });
        }
        // Only a panicked flush drops an answer.
        answer.await.unwrap_or_else(|_| {
            Err(StoreError::Interrupted(
                "the task write batch was dropped".into(),
            ))
        })
    }

    /// Writes batches until the queue is empty.
    async fn flush(&self) {
        // Should the flush panic, the next write starts another instead of
        // queueing behind one that is gone.
        let mut ended = FlushEnded {
            queue: &self.queue,
            unwinding: true,
        };
        loop {
            let batch: Vec<Queued> = {
                let mut queue = self.queue.lock();
                if queue.writes.is_empty() {
                    queue.flushing = false;
                    ended.unwinding = false;
                    return;
                }
                let take = queue.writes.len().min(MAX_BATCH);
                queue.writes.drain(..take).collect()
            };
            self.write(batch).await;
        }
    }

    async fn write(&self, batch: Vec<Queued>) {
        let updates: Vec<(Uuid, TaskUpdate)> = batch
            .iter()
            .map(|q| (q.task_id, q.update.clone()))
            .collect();
        let answers = match self.store.task_updates_quiet(&updates).await {
            Ok(written) if written.len() == batch.len() => written.into_iter().map(Ok).collect(),
            Err(e) if batch.len() == 1 => vec![Err(e)],
            // The database is away: one at a time would wait out the pool's
            // timeout once per write. Every writer hears it at once (and an
            // outcome is retried by its writer).
            Err(e) if e.is_unavailable() => {
                let text = e.to_string();
                batch
                    .iter()
                    .map(|_| Err(StoreError::Interrupted(text.clone())))
                    .collect()
            }
            // One at a time: each writer gets its own answer.
            _ => {
                let mut answers = Vec::with_capacity(batch.len());
                for (task_id, update) in &updates {
                    answers.push(self.store.task_update_quiet(*task_id, update).await);
                }
                answers
            }
        };
        for (queued, answer) in batch.into_iter().zip(answers) {
            // The writer may have stopped waiting; its write stands anyway.
            let _ = queued.reply.send(answer);
        }
    }
}

/// Clears `flushing` when a flush unwinds (it clears it itself when it
/// ends, under the same lock as its last look at the queue).
struct FlushEnded<'a> {
    queue: &'a Mutex<Queue>,
    unwinding: bool,
}

impl Drop for FlushEnded<'_> {
    fn drop(&mut self) {
        if self.unwinding {
            self.queue.lock().flushing = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use rackflow_domain::inventory::{Location, Rack};
    use rackflow_domain::run::QueueStrategy;
    use rackflow_domain::task::{QueuePolicy, Task, TaskInformation, TaskStatus, TaskType};
    use rackflow_domain::{ComponentType, ComponentsByType};
    use rackflow_store::{SqliteStore, SubmitDecision, SubmitOutcome};

    use super::*;

    async fn store_with_running_tasks(n: usize) -> (Arc<dyn Store>, Vec<Uuid>) {
        let (_, store, ids) = sqlite_with_running_tasks(n).await;
        (store, ids)
    }

    async fn sqlite_with_running_tasks(n: usize) -> (SqliteStore, Arc<dyn Store>, Vec<Uuid>) {
        let sqlite = SqliteStore::open_in_memory().await.expect("store");
        let store: Arc<dyn Store> = Arc::new(sqlite.clone());
        let now = Utc::now();
        let rack_id = Uuid::new_v4();
        let rack = Rack {
            id: rack_id,
            name: "rack-1".into(),
            manufacturer: "NVIDIA".into(),
            model: None,
            serial_number: "RSN-1".into(),
            description: None,
            location: Location {
                region: "eu".into(),
                datacenter: "dc1".into(),
                room: "a".into(),
                position: "1".into(),
            },
            external_id: None,
            nvl_domain_id: None,
            lifecycle: Default::default(),
            created_at: now,
            updated_at: now,
            deleted_at: None,
        };
        store.rack_create(&rack, &[]).await.expect("rack");
        let mut ids = Vec::new();
        for i in 0..n {
            let mut components = ComponentsByType::new();
            components.push(ComponentType::Compute, Uuid::new_v4());
            let task = Task {
                id: Uuid::new_v4(),
                task_type: TaskType::PowerControl,
                information: TaskInformation {
                    code: "power_on".into(),
                    override_readiness_check: false,
                    firmware: None,
                },
                description: format!("task {i}"),
                rack_id,
                components_by_type: components,
                executor_type: "local".into(),
                execution_id: String::new(),
                status: TaskStatus::Running,
                message: String::new(),
                report: None,
                applied_rule_id: None,
                rule_definition: None,
                queue_policy: QueuePolicy {
                    strategy: QueueStrategy::Queue,
                    timeout_secs: 3600,
                },
                queue_expires_at: None,
                idempotency_key: None,
                trigger: rackflow_domain::task::TaskTrigger::Api,
                created_at: now,
                updated_at: now,
                started_at: None,
                finished_at: None,
            };
            let insert = |_: &[Task]| SubmitDecision::Insert {
                status: TaskStatus::Running,
                message: "running".into(),
                queue_expires_at: None,
                start: None,
            };
            match store.task_submit(&task, &insert).await.expect("submit") {
                SubmitOutcome::Inserted(stored) => ids.push(stored.id),
                other => panic!("expected Inserted, got {other:?}"),
            }
        }
        (sqlite, store, ids)
    }

    fn report(n: usize) -> TaskUpdate {
        TaskUpdate {
            expected: vec![TaskStatus::Running],
            report: Some(serde_json::json!({ "n": n })),
            ..Default::default()
        }
    }

    /// Many writers at once: each gets its own answer and its write lands;
    /// one the database refuses fails alone, the others of its batch land.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_are_answered_each_and_a_refused_one_fails_alone() {
        let (store, ids) = store_with_running_tasks(40).await;
        let writes = TaskWrites::new(Arc::clone(&store));
        let mut handles = Vec::new();
        for (n, &task_id) in ids.iter().enumerate() {
            let writes = Arc::clone(&writes);
            handles.push(tokio::spawn(async move {
                let update = if n == 7 {
                    // A rule that does not exist: refused by the database.
                    TaskUpdate {
                        applied_rule_id: Some(Some(Uuid::new_v4())),
                        ..report(n)
                    }
                } else {
                    report(n)
                };
                writes.update_quiet(task_id, update).await
            }));
        }
        // A write to a task that is not running: answered false.
        let missing = writes.update_quiet(Uuid::new_v4(), report(99)).await;
        assert!(matches!(missing, Ok(false)), "{missing:?}");
        for (n, handle) in handles.into_iter().enumerate() {
            let answer = handle.await.expect("join");
            if n == 7 {
                assert!(answer.is_err(), "the refused write answered {answer:?}");
            } else {
                assert!(matches!(answer, Ok(true)), "write {n} answered {answer:?}");
            }
        }
        for (n, &task_id) in ids.iter().enumerate() {
            let task = store.task_get(task_id).await.expect("get").expect("task");
            let expected = (n != 7).then(|| serde_json::json!({ "n": n }));
            assert_eq!(task.report, expected, "task {n}");
        }
        assert!(!writes.queue.lock().flushing, "the flush ended");
    }

    /// With the database gone every writer of a batch hears so, as an
    /// error that says "unavailable" (outcome writes retry on it). (SQLite's
    /// closed pool refuses at once, so this does not tell the batch's
    /// answer from one write at a time, which against a PostgreSQL that
    /// went away would wait out the pool's timeout per write.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_against_an_unavailable_database_fails_every_writer_as_unavailable() {
        let (sqlite, store, ids) = sqlite_with_running_tasks(20).await;
        let writes = TaskWrites::new(store);
        sqlite.close().await;
        let mut handles = Vec::new();
        for (n, &task_id) in ids.iter().enumerate() {
            let writes = Arc::clone(&writes);
            handles.push(tokio::spawn(async move {
                writes.update_quiet(task_id, report(n)).await
            }));
        }
        let answers = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            let mut answers = Vec::new();
            for handle in handles {
                answers.push(handle.await.expect("join"));
            }
            answers
        })
        .await
        .expect("every writer answered");
        for answer in answers {
            match answer {
                Err(e) => assert!(e.is_unavailable(), "{e}"),
                Ok(written) => panic!("written ({written}) with the pool closed"),
            }
        }
    }
}
