-- Leak state (issue 34): what a leak source last said about a component
-- (NULL leak_observed_at = no report, the reference's UNKNOWN), and the leak
-- events. An event is one leak occurrence on one component: reports of it
-- while it is open add observations; a not-detected report (or an operator)
-- closes it, and a later leak is a new event. The partial unique index keeps
-- one open event per component, so two replicas taking the same report
-- record one event (and act once). Same model as
-- migrations/postgres/0014_leaks.sql.
ALTER TABLE component ADD COLUMN leak_status TEXT NOT NULL DEFAULT 'unknown';
ALTER TABLE component ADD COLUMN leak_observed_at TEXT;

CREATE TABLE leak_events (
    id               TEXT PRIMARY KEY NOT NULL,
    component_id     TEXT NOT NULL REFERENCES component (id) ON DELETE CASCADE,
    rack_id          TEXT REFERENCES rack (id) ON DELETE CASCADE,
    source           TEXT NOT NULL CHECK (length(source) <= 128),
    severity         TEXT NOT NULL,
    message          TEXT NOT NULL DEFAULT '',
    detected_at      TEXT NOT NULL,
    last_reported_at TEXT NOT NULL,
    observations     INTEGER NOT NULL DEFAULT 1,
    closed_at        TEXT,
    created_at       TEXT NOT NULL
);
CREATE UNIQUE INDEX uq_leak_events_open ON leak_events (component_id) WHERE closed_at IS NULL;
CREATE INDEX idx_leak_events_rack ON leak_events (rack_id, detected_at);
CREATE INDEX idx_leak_events_detected_at ON leak_events (detected_at);
