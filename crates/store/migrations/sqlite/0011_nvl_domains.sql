-- NVLink domains (flow-core §2.2 `nvldomain`): groups of racks sharing an
-- NVLink fabric; a rack names its domain in rack.nvldomain_id (0001).
-- Same model as migrations/postgres/0011_nvl_domains.sql. A name and an
-- external id are unique when set, over deleted rows too (as the rack's
-- external id).
CREATE TABLE nvldomain (
    id              TEXT PRIMARY KEY NOT NULL,
    name            TEXT,
    external_id     TEXT,
    nmxc_cluster_id TEXT,
    created_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    updated_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    deleted_at      TEXT
);

CREATE UNIQUE INDEX uq_nvldomain_name ON nvldomain (name) WHERE name IS NOT NULL;
CREATE UNIQUE INDEX uq_nvldomain_external_id ON nvldomain (external_id)
    WHERE external_id IS NOT NULL;
CREATE INDEX idx_rack_nvldomain ON rack (nvldomain_id) WHERE nvldomain_id IS NOT NULL;
