-- Tasks, operation rules and the rules pinned to racks (flow-core §2.2,
-- §3, §4). Same model as migrations/postgres/0003_tasks_and_rules.sql;
-- type encodings as described in 0001_inventory.sql, booleans are INTEGER
-- 0/1, VARCHAR lengths are CHECKs, updated_at triggers as in 0002.

CREATE TABLE operation_rules (
    id              TEXT PRIMARY KEY NOT NULL,
    name            TEXT NOT NULL
        CONSTRAINT operation_rules_name_length_check CHECK (length(name) <= 128),
    description     TEXT,
    operation_type  TEXT NOT NULL
        CONSTRAINT operation_rules_operation_type_check
        CHECK (operation_type IN ('power_control', 'firmware_control', 'bring_up',
                                  'decommission', 'inject_expectation')),
    operation_code  TEXT NOT NULL
        CONSTRAINT operation_rules_operation_code_length_check
        CHECK (length(operation_code) <= 64),
    rule_definition TEXT NOT NULL CHECK (json_valid(rule_definition)),
    is_default      INTEGER NOT NULL DEFAULT 0 CHECK (is_default IN (0, 1)),
    created_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    updated_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')
);

-- At most one default rule per (type, code).
CREATE UNIQUE INDEX uq_operation_rules_default
    ON operation_rules (operation_type, operation_code) WHERE is_default;
CREATE INDEX idx_operation_rules_operation ON operation_rules (operation_type, operation_code);
CREATE INDEX idx_operation_rules_created_at ON operation_rules (created_at);

CREATE TRIGGER operation_rules_set_updated_at
    AFTER UPDATE ON operation_rules
    FOR EACH ROW WHEN NEW.updated_at IS OLD.updated_at
BEGIN
    UPDATE operation_rules
    SET updated_at = strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'
    WHERE id = NEW.id;
END;

CREATE TABLE rack_rule_associations (
    rack_id        TEXT NOT NULL REFERENCES rack (id) ON DELETE CASCADE,
    operation_type TEXT NOT NULL
        CONSTRAINT rack_rule_associations_operation_type_length_check
        CHECK (length(operation_type) <= 64),
    operation_code TEXT NOT NULL
        CONSTRAINT rack_rule_associations_operation_code_length_check
        CHECK (length(operation_code) <= 64),
    rule_id        TEXT NOT NULL REFERENCES operation_rules (id) ON DELETE CASCADE,
    created_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    updated_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    PRIMARY KEY (rack_id, operation_type, operation_code)
);

CREATE INDEX idx_rack_rule_associations_rule ON rack_rule_associations (rule_id);

CREATE TRIGGER rack_rule_associations_set_updated_at
    AFTER UPDATE ON rack_rule_associations
    FOR EACH ROW WHEN NEW.updated_at IS OLD.updated_at
BEGIN
    UPDATE rack_rule_associations
    SET updated_at = strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'
    WHERE rack_id = NEW.rack_id
      AND operation_type = NEW.operation_type
      AND operation_code = NEW.operation_code;
END;

CREATE TABLE task (
    id                 TEXT PRIMARY KEY NOT NULL,
    type               TEXT NOT NULL
        CONSTRAINT task_type_check
        CHECK (type IN ('power_control', 'firmware_control', 'bring_up', 'decommission',
                        'inject_expectation')),
    executor_type      TEXT
        CONSTRAINT task_executor_type_length_check CHECK (length(executor_type) <= 32),
    -- TaskInformation: the operation code and its parameters.
    information        TEXT NOT NULL CHECK (json_valid(information)),
    description        TEXT,
    -- A purged rack takes its task history with it.
    rack_id            TEXT NOT NULL REFERENCES rack (id) ON DELETE CASCADE,
    -- {"components_by_type": {"Compute": [uuid, …], …}}
    attributes         TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(attributes)),
    execution_id       TEXT,
    status             TEXT NOT NULL
        CONSTRAINT task_status_check
        CHECK (status IN ('waiting', 'pending', 'running', 'completed', 'failed',
                          'terminated')),
    message            TEXT,
    report             TEXT CHECK (report IS NULL OR json_valid(report)),
    applied_rule_id    TEXT REFERENCES operation_rules (id) ON DELETE SET NULL,
    rule_definition    TEXT CHECK (rule_definition IS NULL OR json_valid(rule_definition)),
    conflict_strategy  TEXT NOT NULL DEFAULT 'reject'
        CONSTRAINT task_conflict_strategy_check CHECK (conflict_strategy IN ('queue', 'reject')),
    queue_timeout_secs INTEGER NOT NULL DEFAULT 3600,
    created_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    updated_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    started_at         TEXT,
    finished_at        TEXT,
    queue_expires_at   TEXT,
    idempotency_key    TEXT
);

CREATE INDEX idx_task_rack_status ON task (rack_id, status);
CREATE INDEX idx_task_created_at ON task (created_at);
CREATE INDEX idx_task_unfinished_status ON task (status)
    WHERE status IN ('waiting', 'pending', 'running');
CREATE INDEX idx_task_applied_rule ON task (applied_rule_id) WHERE applied_rule_id IS NOT NULL;
-- One unfinished task per idempotency key.
CREATE UNIQUE INDEX uq_task_idempotency_key ON task (idempotency_key)
    WHERE idempotency_key IS NOT NULL AND status IN ('waiting', 'pending', 'running');

CREATE TRIGGER task_set_updated_at
    AFTER UPDATE ON task
    FOR EACH ROW WHEN NEW.updated_at IS OLD.updated_at
BEGIN
    UPDATE task
    SET updated_at = strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'
    WHERE id = NEW.id;
END;

-- The reference's FK of a run target to its task, deferred from 0002 until
-- the task table existed. SQLite cannot add a constraint to a table, so the
-- table is rebuilt (https://www.sqlite.org/lang_altertable.html#otheralter):
-- new table, copy, drop, rename, then its indexes and trigger again. Nothing
-- references operation_run_target, so dropping it with foreign keys on is
-- safe. Task ids recorded before this migration (none are expected: nothing
-- submitted tasks yet) would violate the FK and are cleared in the copy.

CREATE TABLE operation_run_target_new (
    id                 TEXT PRIMARY KEY NOT NULL,
    operation_run_id   TEXT NOT NULL REFERENCES operation_run (id) ON DELETE CASCADE,
    rack_id            TEXT NOT NULL,
    sequence_index     INTEGER NOT NULL
        CONSTRAINT operation_run_target_sequence_index_check CHECK (sequence_index >= 0),
    phase_index        INTEGER NOT NULL
        CONSTRAINT operation_run_target_phase_index_check CHECK (phase_index >= 0),
    components_by_type TEXT NOT NULL CHECK (json_valid(components_by_type)),
    task_id            TEXT REFERENCES task (id) ON DELETE SET NULL,
    status             TEXT NOT NULL DEFAULT 'pending'
        CONSTRAINT operation_run_target_status_check
        CHECK (status IN ('pending', 'claimed', 'blocked', 'submitted', 'completed', 'failed',
                          'terminated', 'skipped')),
    message            TEXT,
    -- Backoff deadline while blocked; lease expiry while claimed.
    retry_after        TEXT,
    retry_state        TEXT CHECK (retry_state IS NULL OR json_valid(retry_state)),
    created_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    updated_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    CONSTRAINT operation_run_target_operation_run_id_rack_id_key
        UNIQUE (operation_run_id, rack_id),
    CONSTRAINT operation_run_target_operation_run_id_sequence_index_key
        UNIQUE (operation_run_id, sequence_index)
);

INSERT INTO operation_run_target_new (
    id, operation_run_id, rack_id, sequence_index, phase_index, components_by_type, task_id,
    status, message, retry_after, retry_state, created_at, updated_at
)
SELECT
    id, operation_run_id, rack_id, sequence_index, phase_index, components_by_type,
    CASE WHEN task_id IN (SELECT id FROM task) THEN task_id END,
    status, message, retry_after, retry_state, created_at, updated_at
FROM operation_run_target;

DROP TABLE operation_run_target;

ALTER TABLE operation_run_target_new RENAME TO operation_run_target;

CREATE INDEX idx_operation_run_target_run_status
    ON operation_run_target (operation_run_id, status);
CREATE INDEX idx_operation_run_target_run_phase_sequence
    ON operation_run_target (operation_run_id, phase_index, sequence_index);
CREATE INDEX idx_operation_run_target_run_status_retry_after
    ON operation_run_target (operation_run_id, status, retry_after);
CREATE INDEX idx_operation_run_target_task
    ON operation_run_target (task_id) WHERE task_id IS NOT NULL;

CREATE TRIGGER operation_run_target_set_updated_at
    AFTER UPDATE ON operation_run_target
    FOR EACH ROW WHEN NEW.updated_at IS OLD.updated_at
BEGIN
    UPDATE operation_run_target
    SET updated_at = strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'
    WHERE id = NEW.id;
END;
