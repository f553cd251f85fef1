-- A rack's lifecycle (flow-core §2.2 rack.status, issue 33): new ->
-- ingesting -> ingested, and decommissioned; set by the ingest and
-- decommission tasks, the final states in the transaction that records the
-- task's outcome. Same model as migrations/sqlite/0012_rack_lifecycle.sql.
ALTER TABLE rack ADD COLUMN status VARCHAR(16) NOT NULL DEFAULT 'new';
ALTER TABLE rack ADD COLUMN ingested_at TIMESTAMPTZ;
ALTER TABLE rack ADD COLUMN decommissioned_at TIMESTAMPTZ;
CREATE INDEX idx_rack_status ON rack (status);
