-- Leak state (issue 34): what a leak source last said about a component
-- (NULL leak_observed_at = no report, the reference's UNKNOWN), and the leak
-- events. An event is one leak occurrence on one component: reports of it
-- while it is open add observations; a not-detected report (or an operator)
-- closes it, and a later leak is a new event. The partial unique index keeps
-- one open event per component, so two replicas taking the same report
-- record one event (and act once). Same model as
-- migrations/sqlite/0014_leaks.sql.
ALTER TABLE component ADD COLUMN leak_status VARCHAR(16) NOT NULL DEFAULT 'unknown';
ALTER TABLE component ADD COLUMN leak_observed_at TIMESTAMPTZ;

CREATE TABLE leak_events (
    id               UUID PRIMARY KEY,
    component_id     UUID NOT NULL REFERENCES component (id) ON DELETE CASCADE,
    rack_id          UUID REFERENCES rack (id) ON DELETE CASCADE,
    source           VARCHAR(128) NOT NULL,
    severity         VARCHAR(16) NOT NULL,
    message          TEXT NOT NULL DEFAULT '',
    detected_at      TIMESTAMPTZ NOT NULL,
    last_reported_at TIMESTAMPTZ NOT NULL,
    observations     INTEGER NOT NULL DEFAULT 1,
    closed_at        TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX uq_leak_events_open ON leak_events (component_id) WHERE closed_at IS NULL;
CREATE INDEX idx_leak_events_rack ON leak_events (rack_id, detected_at);
CREATE INDEX idx_leak_events_detected_at ON leak_events (detected_at);
