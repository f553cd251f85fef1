-- Clustered execution (issue 11): who executes a running task, and until
-- when that claim holds unless renewed. A replica adopts a running task only
-- when its lease has expired (or it has none: rows from before this
-- migration). Both stay NULL for tasks that never ran.
ALTER TABLE task ADD COLUMN owner TEXT
    CONSTRAINT task_owner_length_check CHECK (owner IS NULL OR length(owner) <= 200);
ALTER TABLE task ADD COLUMN lease_expires_at TEXT;
-- No index of their own: renewal goes by primary key, and adoption reads
-- the running tasks through the status index (they are few next to the
-- history), so every task write does not pay for two more indexes.
