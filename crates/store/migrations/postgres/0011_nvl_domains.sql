-- NVLink domains (flow-core §2.2 `nvldomain`): groups of racks sharing an
-- NVLink fabric; a rack names its domain in rack.nvldomain_id (0001).
-- A name and an external id are unique when set, over deleted rows too (as
-- the rack's external id). name is COLLATE "C" so listings order as SQLite's.
CREATE TABLE nvldomain (
    id              UUID PRIMARY KEY,
    name            TEXT COLLATE "C",
    external_id     TEXT,
    nmxc_cluster_id TEXT,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    deleted_at      TIMESTAMPTZ
);

CREATE UNIQUE INDEX uq_nvldomain_name ON nvldomain (name) WHERE name IS NOT NULL;
CREATE UNIQUE INDEX uq_nvldomain_external_id ON nvldomain (external_id)
    WHERE external_id IS NOT NULL;
CREATE INDEX idx_rack_nvldomain ON rack (nvldomain_id) WHERE nvldomain_id IS NOT NULL;

-- Listings may now order on manufacturer and model too (order_by): byte
-- order, as SQLite's BINARY collation, so both dialects list identically.
ALTER TABLE rack ALTER COLUMN manufacturer TYPE TEXT COLLATE "C";
ALTER TABLE rack ALTER COLUMN model TYPE TEXT COLLATE "C";
ALTER TABLE component ALTER COLUMN manufacturer TYPE TEXT COLLATE "C";
ALTER TABLE component ALTER COLUMN model TYPE TEXT COLLATE "C";
