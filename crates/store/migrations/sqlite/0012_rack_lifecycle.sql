-- A rack's lifecycle (flow-core §2.2 rack.status, issue 33): new ->
-- ingesting -> ingested, and decommissioned; set by the ingest and
-- decommission tasks, the final states in the transaction that records the
-- task's outcome. Same model as migrations/postgres/0012_rack_lifecycle.sql.
ALTER TABLE rack ADD COLUMN status TEXT NOT NULL DEFAULT 'new';
ALTER TABLE rack ADD COLUMN ingested_at TEXT;
ALTER TABLE rack ADD COLUMN decommissioned_at TEXT;
CREATE INDEX idx_rack_status ON rack (status);
