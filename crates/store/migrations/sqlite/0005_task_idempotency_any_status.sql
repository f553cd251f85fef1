-- An idempotency key names one task for good, whatever its status: a
-- submitter that lost the answer gets the same task back instead of running
-- the operation twice (e.g. an operation-run target re-claimed after a crash
-- whose first child task has already finished).
DROP INDEX IF EXISTS uq_task_idempotency_key;
CREATE UNIQUE INDEX uq_task_idempotency_key ON task (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
