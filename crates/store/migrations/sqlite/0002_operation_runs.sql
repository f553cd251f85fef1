-- Operation runs and their rack targets (operation-runs §7.1, §7.2). Same
-- model as migrations/postgres/0002_operation_runs.sql; type encodings as
-- described in 0001_inventory.sql. VARCHAR lengths, which SQLite does not
-- enforce, are CHECKs here so both dialects refuse the same rows.
--
-- updated_at triggers: PostgreSQL's BEFORE UPDATE trigger always stamps the
-- transaction time. SQLite triggers cannot modify NEW, so an AFTER UPDATE
-- trigger stamps the row only when the statement left updated_at unchanged;
-- the store always sets it itself (with microsecond precision), the trigger
-- covers any other writer.

CREATE TABLE operation_run (
    id                  TEXT PRIMARY KEY NOT NULL,
    name                TEXT NOT NULL
        CONSTRAINT operation_run_name_length_check CHECK (length(name) <= 255),
    description         TEXT,
    status              TEXT NOT NULL DEFAULT 'pending'
        CONSTRAINT operation_run_status_check
        CHECK (status IN ('pending', 'running', 'paused', 'completed',
                          'completed_with_failures', 'cancelled', 'failed')),
    status_reason       TEXT NOT NULL DEFAULT 'none'
        CONSTRAINT operation_run_status_reason_check
        CHECK (status_reason IN ('none', 'operator_paused', 'phase_gate', 'safety_gate',
                                 'conflict_retry_timeout')),
    status_message      TEXT,
    current_phase_index INTEGER NOT NULL DEFAULT 0
        CONSTRAINT operation_run_current_phase_index_check CHECK (current_phase_index >= 0),
    total_phases        INTEGER NOT NULL
        CONSTRAINT operation_run_total_phases_check CHECK (total_phases >= 0),
    selector            TEXT NOT NULL CHECK (json_valid(selector)),
    options             TEXT NOT NULL CHECK (json_valid(options)),
    operation_template  TEXT NOT NULL CHECK (json_valid(operation_template)),
    operation_type      TEXT NOT NULL
        CONSTRAINT operation_run_operation_type_length_check CHECK (length(operation_type) <= 64),
    operation_code      TEXT NOT NULL
        CONSTRAINT operation_run_operation_code_length_check CHECK (length(operation_code) <= 64),
    created_at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    updated_at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    started_at          TEXT,
    finished_at         TEXT
);

CREATE INDEX idx_operation_run_status_updated_at ON operation_run (status, updated_at);
CREATE INDEX idx_operation_run_operation ON operation_run (operation_type, operation_code);
CREATE INDEX idx_operation_run_created_at ON operation_run (created_at);

CREATE TRIGGER operation_run_set_updated_at
    AFTER UPDATE ON operation_run
    FOR EACH ROW WHEN NEW.updated_at IS OLD.updated_at
BEGIN
    UPDATE operation_run
    SET updated_at = strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'
    WHERE id = NEW.id;
END;

CREATE TABLE operation_run_target (
    id                 TEXT PRIMARY KEY NOT NULL,
    operation_run_id   TEXT NOT NULL REFERENCES operation_run (id) ON DELETE CASCADE,
    rack_id            TEXT NOT NULL,
    sequence_index     INTEGER NOT NULL
        CONSTRAINT operation_run_target_sequence_index_check CHECK (sequence_index >= 0),
    phase_index        INTEGER NOT NULL
        CONSTRAINT operation_run_target_phase_index_check CHECK (phase_index >= 0),
    components_by_type TEXT NOT NULL CHECK (json_valid(components_by_type)),
    -- The reference has FK -> task(id) ON DELETE SET NULL; it is added by the
    -- migration that creates the task table, which does not exist yet.
    task_id            TEXT,
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
