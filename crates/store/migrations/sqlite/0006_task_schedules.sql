-- Task schedules and their per-rack scopes (flow-core §2.2, §6). Same model
-- as migrations/postgres/0006_task_schedules.sql; type encodings as described
-- in 0001_inventory.sql, booleans are INTEGER 0/1, VARCHAR lengths are
-- CHECKs, updated_at trigger as in 0003.

CREATE TABLE task_schedule (
    id                  TEXT PRIMARY KEY NOT NULL,
    name                TEXT NOT NULL
        CONSTRAINT task_schedule_name_length_check CHECK (length(name) <= 255),
    spec_type           TEXT NOT NULL
        CONSTRAINT task_schedule_spec_type_check
        CHECK (spec_type IN ('interval', 'cron', 'one-time')),
    spec                TEXT NOT NULL,
    timezone            TEXT NOT NULL DEFAULT 'UTC',
    operation_template  TEXT NOT NULL CHECK (json_valid(operation_template)),
    overlap_policy      TEXT NOT NULL DEFAULT 'skip'
        CONSTRAINT task_schedule_overlap_policy_check CHECK (overlap_policy IN ('skip', 'queue')),
    enabled             INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    next_run_at         TEXT,
    last_run_at         TEXT,
    catchup_window_secs INTEGER NOT NULL DEFAULT 0
        CONSTRAINT task_schedule_catchup_window_check CHECK (catchup_window_secs >= 0),
    skipped_count       INTEGER NOT NULL DEFAULT 0,
    last_skip_reason    TEXT,
    created_at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    updated_at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    CONSTRAINT uq_task_schedule_name UNIQUE (name)
);

CREATE INDEX idx_task_schedule_due ON task_schedule (next_run_at)
    WHERE enabled AND next_run_at IS NOT NULL;
CREATE INDEX idx_task_schedule_created_at ON task_schedule (created_at, id);

CREATE TRIGGER task_schedule_set_updated_at
    AFTER UPDATE ON task_schedule
    FOR EACH ROW WHEN NEW.updated_at IS OLD.updated_at
BEGIN
    UPDATE task_schedule
    SET updated_at = strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'
    WHERE id = NEW.id;
END;

CREATE TABLE task_schedule_scope (
    id               TEXT PRIMARY KEY NOT NULL,
    schedule_id      TEXT NOT NULL REFERENCES task_schedule (id) ON DELETE CASCADE,
    rack_id          TEXT NOT NULL REFERENCES rack (id) ON DELETE CASCADE,
    component_filter TEXT CHECK (component_filter IS NULL OR json_valid(component_filter)),
    last_task_id     TEXT REFERENCES task (id) ON DELETE SET NULL,
    created_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    CONSTRAINT uq_task_schedule_scope_rack UNIQUE (schedule_id, rack_id)
);

CREATE INDEX idx_task_schedule_scope_rack ON task_schedule_scope (rack_id);
CREATE INDEX idx_task_schedule_scope_last_task ON task_schedule_scope (last_task_id)
    WHERE last_task_id IS NOT NULL;
