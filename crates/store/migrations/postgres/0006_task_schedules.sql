-- Task schedules and their per-rack scopes (flow-core §2.2, §6). Beyond
-- the reference: catchup_window_secs (how late a missed occurrence may still
-- fire; 0 = the reference's fire-once-late behaviour), skipped_count and
-- last_skip_reason (occurrences that did not fire, and why). updated_at is
-- set by the store, as for the other tables (trigger of 0003 as a net).

CREATE TABLE task_schedule (
    id                  UUID PRIMARY KEY,
    name                VARCHAR(255) NOT NULL,
    spec_type           VARCHAR(16) NOT NULL
        CONSTRAINT task_schedule_spec_type_check
        CHECK (spec_type IN ('interval', 'cron', 'one-time')),
    spec                TEXT NOT NULL,
    timezone            TEXT NOT NULL DEFAULT 'UTC',
    -- OperationTemplate: { op, task_type, information, queue_timeout_secs, rule_id }
    operation_template  JSONB NOT NULL,
    overlap_policy      VARCHAR(8) NOT NULL DEFAULT 'skip'
        CONSTRAINT task_schedule_overlap_policy_check CHECK (overlap_policy IN ('skip', 'queue')),
    enabled             BOOLEAN NOT NULL DEFAULT TRUE,
    next_run_at         TIMESTAMPTZ,
    last_run_at         TIMESTAMPTZ,
    catchup_window_secs BIGINT NOT NULL DEFAULT 0
        CONSTRAINT task_schedule_catchup_window_check CHECK (catchup_window_secs >= 0),
    skipped_count       BIGINT NOT NULL DEFAULT 0,
    last_skip_reason    TEXT,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    CONSTRAINT uq_task_schedule_name UNIQUE (name)
);

-- The dispatcher's claim query: enabled schedules by next_run_at.
CREATE INDEX idx_task_schedule_due ON task_schedule (next_run_at)
    WHERE enabled AND next_run_at IS NOT NULL;
CREATE INDEX idx_task_schedule_created_at ON task_schedule (created_at, id);

CREATE TRIGGER task_schedule_set_updated_at
    BEFORE UPDATE ON task_schedule
    FOR EACH ROW EXECUTE FUNCTION set_updated_at_if_unchanged();

CREATE TABLE task_schedule_scope (
    id               UUID PRIMARY KEY,
    schedule_id      UUID NOT NULL REFERENCES task_schedule (id) ON DELETE CASCADE,
    rack_id          UUID NOT NULL REFERENCES rack (id) ON DELETE CASCADE,
    -- NULL (whole rack) | {"kind":"types","types":[…]} | {"kind":"components","components":[…]}
    component_filter JSONB,
    last_task_id     UUID REFERENCES task (id) ON DELETE SET NULL,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    CONSTRAINT uq_task_schedule_scope_rack UNIQUE (schedule_id, rack_id)
);

CREATE INDEX idx_task_schedule_scope_rack ON task_schedule_scope (rack_id);
CREATE INDEX idx_task_schedule_scope_last_task ON task_schedule_scope (last_task_id)
    WHERE last_task_id IS NOT NULL;
