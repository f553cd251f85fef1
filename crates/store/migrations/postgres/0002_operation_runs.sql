-- Operation runs and their rack targets (operation-runs §7.1, §7.2).

-- Shared by every table whose updated_at the database maintains.
CREATE OR REPLACE FUNCTION set_updated_at() RETURNS trigger AS $$
BEGIN
    NEW.updated_at = current_timestamp;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TABLE operation_run (
    id                  UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    name                VARCHAR(255) NOT NULL,
    description         TEXT,
    status              VARCHAR(32) NOT NULL DEFAULT 'pending'
        CONSTRAINT operation_run_status_check
        CHECK (status IN ('pending', 'running', 'paused', 'completed',
                          'completed_with_failures', 'cancelled', 'failed')),
    status_reason       VARCHAR(64) NOT NULL DEFAULT 'none'
        CONSTRAINT operation_run_status_reason_check
        CHECK (status_reason IN ('none', 'operator_paused', 'phase_gate', 'safety_gate',
                                 'conflict_retry_timeout')),
    status_message      TEXT,
    current_phase_index INTEGER NOT NULL DEFAULT 0
        CONSTRAINT operation_run_current_phase_index_check CHECK (current_phase_index >= 0),
    total_phases        INTEGER NOT NULL
        CONSTRAINT operation_run_total_phases_check CHECK (total_phases >= 0),
    selector            JSONB NOT NULL,
    options             JSONB NOT NULL,
    operation_template  JSONB NOT NULL,
    operation_type      VARCHAR(64) NOT NULL,
    operation_code      VARCHAR(64) NOT NULL,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    started_at          TIMESTAMPTZ,
    finished_at         TIMESTAMPTZ
);

CREATE INDEX idx_operation_run_status_updated_at ON operation_run (status, updated_at);
CREATE INDEX idx_operation_run_operation ON operation_run (operation_type, operation_code);
CREATE INDEX idx_operation_run_created_at ON operation_run (created_at);

CREATE TRIGGER operation_run_set_updated_at
    BEFORE UPDATE ON operation_run
    FOR EACH ROW EXECUTE FUNCTION set_updated_at();

CREATE TABLE operation_run_target (
    id                 UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    operation_run_id   UUID NOT NULL REFERENCES operation_run (id) ON DELETE CASCADE,
    rack_id            UUID NOT NULL,
    sequence_index     INTEGER NOT NULL
        CONSTRAINT operation_run_target_sequence_index_check CHECK (sequence_index >= 0),
    phase_index        INTEGER NOT NULL
        CONSTRAINT operation_run_target_phase_index_check CHECK (phase_index >= 0),
    components_by_type JSONB NOT NULL,
    -- The reference has FK -> task(id) ON DELETE SET NULL; it is added by the
    -- migration that creates the task table, which does not exist yet.
    task_id            UUID,
    status             VARCHAR(32) NOT NULL DEFAULT 'pending'
        CONSTRAINT operation_run_target_status_check
        CHECK (status IN ('pending', 'claimed', 'blocked', 'submitted', 'completed', 'failed',
                          'terminated', 'skipped')),
    message            TEXT,
    -- Backoff deadline while blocked; lease expiry while claimed.
    retry_after        TIMESTAMPTZ,
    retry_state        JSONB,
    created_at         TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    updated_at         TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
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
    BEFORE UPDATE ON operation_run_target
    FOR EACH ROW EXECUTE FUNCTION set_updated_at();
