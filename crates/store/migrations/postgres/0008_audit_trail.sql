-- The audit trail (issue 14): who did what, when, to which run or object,
-- with what outcome. `seq` orders the trail; no foreign key to the run, so
-- the trail outlives what it describes and records calls naming runs that
-- do not exist. Rows are pruned by age (the server's retention setting).
CREATE TABLE audit_event (
    seq         BIGSERIAL PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL,
    actor       TEXT NOT NULL,
    action      TEXT NOT NULL,
    run_id      UUID,
    subject_ids TEXT,
    summary     TEXT,
    code        TEXT NOT NULL,
    message     TEXT
);
CREATE INDEX audit_event_run_idx ON audit_event (run_id, seq) WHERE run_id IS NOT NULL;
CREATE INDEX audit_event_at_idx ON audit_event (at);
