-- When a leak event's response ran (issue 34): NULL while it has not, so a
-- response a crash interrupted is run again by the detection loop. Same
-- model as migrations/sqlite/0015_leak_event_handled.sql.
ALTER TABLE leak_events ADD COLUMN handled_at TIMESTAMPTZ;
CREATE INDEX idx_leak_events_unhandled ON leak_events (created_at)
    WHERE handled_at IS NULL AND closed_at IS NULL;
