-- Inventory (flow-core §2.2): racks, the components inside them and the
-- components' BMCs. Same model as migrations/postgres/0001_inventory.sql,
-- in SQLite's types:
--   * UUIDs are TEXT in canonical lowercase hyphenated form, so text order
--     is the same as PostgreSQL's uuid order;
--   * timestamps are TEXT, RFC 3339 UTC with exactly six fractional digits
--     (2024-05-01T10:00:00.123456Z), so text order is time order and
--     microseconds round-trip like TIMESTAMPTZ;
--   * JSON is TEXT checked with json_valid().
-- The default timestamp expression only has millisecond precision
-- (strftime %f); it pads to the same six-digit shape.

CREATE TABLE rack (
    id            TEXT PRIMARY KEY NOT NULL,
    name          TEXT NOT NULL,
    manufacturer  TEXT NOT NULL DEFAULT '',
    serial_number TEXT NOT NULL DEFAULT '',
    model         TEXT,
    description   TEXT,
    location      TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(location)),
    external_id   TEXT,
    nvldomain_id  TEXT,
    created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    updated_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    deleted_at    TEXT
);

-- Unique over deleted rows too, as in the reference: a soft-deleted rack
-- keeps its external id until it is purged.
CREATE UNIQUE INDEX uq_rack_external_id ON rack (external_id)
    WHERE external_id IS NOT NULL;
CREATE UNIQUE INDEX uq_rack_manufacturer_serial ON rack (manufacturer, serial_number)
    WHERE manufacturer <> '' AND serial_number <> '' AND deleted_at IS NULL;
CREATE INDEX idx_rack_name ON rack (name);

CREATE TABLE component (
    id               TEXT PRIMARY KEY NOT NULL,
    rack_id          TEXT REFERENCES rack (id),
    type             TEXT NOT NULL DEFAULT 'Compute'
        CONSTRAINT component_type_check
        CHECK (type IN ('Unknown', 'Compute', 'NVSwitch', 'PowerShelf', 'ToRSwitch', 'UMS', 'CDU')),
    name             TEXT NOT NULL,
    manufacturer     TEXT NOT NULL DEFAULT '',
    model            TEXT,
    serial_number    TEXT NOT NULL DEFAULT '',
    description      TEXT,
    firmware_version TEXT NOT NULL DEFAULT '',
    slot_id          INTEGER NOT NULL DEFAULT 0,
    tray_index       INTEGER NOT NULL DEFAULT 0,
    host_id          INTEGER NOT NULL DEFAULT 0,
    external_id      TEXT,
    power_state      TEXT,
    created_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    updated_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    deleted_at       TEXT
);

CREATE UNIQUE INDEX uq_component_type_external_id ON component (type, external_id)
    WHERE external_id IS NOT NULL;
CREATE INDEX idx_component_rack ON component (rack_id);

CREATE TABLE bmc (
    mac_address  TEXT PRIMARY KEY NOT NULL,
    type         TEXT NOT NULL
        CONSTRAINT bmc_type_check CHECK (type IN ('Unknown', 'Host', 'DPU')),
    component_id TEXT NOT NULL REFERENCES component (id) ON DELETE CASCADE,
    ip_address   TEXT
);

CREATE INDEX idx_bmc_component ON bmc (component_id);
