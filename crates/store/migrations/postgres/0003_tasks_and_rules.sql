-- Tasks, operation rules and the rules pinned to racks (flow-core §2.2,
-- §3, §4). Differences from the reference's task table: the conflict
-- strategy and queue timeout the task was submitted with are kept
-- (conflict_strategy, queue_timeout_secs), and so is the rule definition
-- fixed when the task became pending (rule_definition); the event-rule
-- trigger columns (trigger_type, trigger_id) arrive with event rules.

-- Stamps updated_at only when the statement left it unchanged. The store
-- always sets it itself, with its own clock at write time (set_updated_at
-- of 0002 would put the transaction's start there, which for a write that
-- waited on a lock can be older than the row), as the SQLite triggers do.
CREATE FUNCTION set_updated_at_if_unchanged() RETURNS trigger AS $$
BEGIN
    IF NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
        NEW.updated_at = clock_timestamp();
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TABLE operation_rules (
    id              UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    name            VARCHAR(128) NOT NULL,
    description     TEXT,
    operation_type  VARCHAR(64) NOT NULL
        CONSTRAINT operation_rules_operation_type_check
        CHECK (operation_type IN ('power_control', 'firmware_control', 'bring_up',
                                  'decommission', 'inject_expectation')),
    operation_code  VARCHAR(64) NOT NULL,
    rule_definition JSONB NOT NULL,
    is_default      BOOLEAN NOT NULL DEFAULT FALSE,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT current_timestamp
);

-- At most one default rule per (type, code).
CREATE UNIQUE INDEX uq_operation_rules_default
    ON operation_rules (operation_type, operation_code) WHERE is_default;
CREATE INDEX idx_operation_rules_operation ON operation_rules (operation_type, operation_code);
CREATE INDEX idx_operation_rules_created_at ON operation_rules (created_at);

CREATE TRIGGER operation_rules_set_updated_at
    BEFORE UPDATE ON operation_rules
    FOR EACH ROW EXECUTE FUNCTION set_updated_at_if_unchanged();

-- COLLATE "C": listed in byte order, as SQLite's BINARY collation does.
CREATE TABLE rack_rule_associations (
    rack_id        UUID NOT NULL REFERENCES rack (id) ON DELETE CASCADE,
    operation_type VARCHAR(64) COLLATE "C" NOT NULL,
    operation_code VARCHAR(64) COLLATE "C" NOT NULL,
    rule_id        UUID NOT NULL REFERENCES operation_rules (id) ON DELETE CASCADE,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (rack_id, operation_type, operation_code)
);

CREATE INDEX idx_rack_rule_associations_rule ON rack_rule_associations (rule_id);

CREATE TRIGGER rack_rule_associations_set_updated_at
    BEFORE UPDATE ON rack_rule_associations
    FOR EACH ROW EXECUTE FUNCTION set_updated_at_if_unchanged();

CREATE TABLE task (
    id                 UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    type               VARCHAR(64) NOT NULL
        CONSTRAINT task_type_check
        CHECK (type IN ('power_control', 'firmware_control', 'bring_up', 'decommission',
                        'inject_expectation')),
    executor_type      VARCHAR(32),
    -- TaskInformation: the operation code and its parameters.
    information        JSONB NOT NULL,
    description        TEXT,
    -- A purged rack takes its task history with it.
    rack_id            UUID NOT NULL REFERENCES rack (id) ON DELETE CASCADE,
    -- {"components_by_type": {"Compute": [uuid, …], …}}
    attributes         JSONB NOT NULL DEFAULT '{}',
    execution_id       TEXT,
    status             VARCHAR(16) NOT NULL
        CONSTRAINT task_status_check
        CHECK (status IN ('waiting', 'pending', 'running', 'completed', 'failed',
                          'terminated')),
    message            TEXT,
    report             JSONB,
    applied_rule_id    UUID REFERENCES operation_rules (id) ON DELETE SET NULL,
    rule_definition    JSONB,
    conflict_strategy  VARCHAR(16) NOT NULL DEFAULT 'reject'
        CONSTRAINT task_conflict_strategy_check CHECK (conflict_strategy IN ('queue', 'reject')),
    queue_timeout_secs BIGINT NOT NULL DEFAULT 3600,
    created_at         TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    updated_at         TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    started_at         TIMESTAMPTZ,
    finished_at        TIMESTAMPTZ,
    queue_expires_at   TIMESTAMPTZ,
    idempotency_key    TEXT
);

CREATE INDEX idx_task_rack_status ON task (rack_id, status);
CREATE INDEX idx_task_created_at ON task (created_at);
CREATE INDEX idx_task_unfinished_status ON task (status)
    WHERE status IN ('waiting', 'pending', 'running');
CREATE INDEX idx_task_applied_rule ON task (applied_rule_id) WHERE applied_rule_id IS NOT NULL;
-- Default jsonb_ops: the component filter's jsonpath uses the .* accessor,
-- which jsonb_path_ops cannot index.
CREATE INDEX idx_task_attributes ON task USING GIN (attributes);
-- One unfinished task per idempotency key.
CREATE UNIQUE INDEX uq_task_idempotency_key ON task (idempotency_key)
    WHERE idempotency_key IS NOT NULL AND status IN ('waiting', 'pending', 'running');

CREATE TRIGGER task_set_updated_at
    BEFORE UPDATE ON task
    FOR EACH ROW EXECUTE FUNCTION set_updated_at_if_unchanged();

-- The reference's FK of a run target to its task, deferred from 0002 until
-- the task table existed. Task ids recorded before it (none are expected:
-- nothing submitted tasks yet) would violate it and are cleared first.
UPDATE operation_run_target SET task_id = NULL
    WHERE task_id IS NOT NULL AND task_id NOT IN (SELECT id FROM task);
ALTER TABLE operation_run_target
    ADD CONSTRAINT operation_run_target_task_id_fkey
    FOREIGN KEY (task_id) REFERENCES task (id) ON DELETE SET NULL;
