-- The audit trail (issue 14); same model as
-- migrations/postgres/0008_audit_trail.sql. AUTOINCREMENT: a sequence
-- number is never reused, even after the newest rows are pruned.
CREATE TABLE audit_event (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    at          TEXT NOT NULL,
    actor       TEXT NOT NULL,
    action      TEXT NOT NULL,
    run_id      TEXT,
    subject_ids TEXT,
    summary     TEXT,
    code        TEXT NOT NULL,
    message     TEXT
);
CREATE INDEX audit_event_run_idx ON audit_event (run_id, seq) WHERE run_id IS NOT NULL;
CREATE INDEX audit_event_at_idx ON audit_event (at);
