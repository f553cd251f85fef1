-- Inventory (flow-core §2.2): racks, the components inside them and the
-- components' BMCs. Reference-only columns with no domain counterpart yet
-- (rack status/profile/health, component status/leak, BMC credentials) are
-- left out; they arrive with the features that use them.
--
-- rack.name, component.type and component.name are ordered on by the
-- listings; COLLATE "C" makes that byte order, the same order SQLite's
-- BINARY collation gives, so both dialects list identically.

CREATE TABLE rack (
    id            UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    name          TEXT COLLATE "C" NOT NULL,
    manufacturer  TEXT NOT NULL DEFAULT '',
    serial_number TEXT NOT NULL DEFAULT '',
    model         TEXT,
    description   TEXT,
    location      JSONB NOT NULL DEFAULT '{}',
    external_id   TEXT,
    nvldomain_id  UUID,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    deleted_at    TIMESTAMPTZ
);

-- Unique over deleted rows too, as in the reference: a soft-deleted rack
-- keeps its external id until it is purged.
CREATE UNIQUE INDEX uq_rack_external_id ON rack (external_id)
    WHERE external_id IS NOT NULL;
CREATE UNIQUE INDEX uq_rack_manufacturer_serial ON rack (manufacturer, serial_number)
    WHERE manufacturer <> '' AND serial_number <> '' AND deleted_at IS NULL;
CREATE INDEX idx_rack_name ON rack (name);

CREATE TABLE component (
    id               UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    rack_id          UUID REFERENCES rack (id),
    type             VARCHAR(16) COLLATE "C" NOT NULL DEFAULT 'Compute'
        CONSTRAINT component_type_check
        CHECK (type IN ('Unknown', 'Compute', 'NVSwitch', 'PowerShelf', 'ToRSwitch', 'UMS', 'CDU')),
    name             TEXT COLLATE "C" NOT NULL,
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
    created_at       TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    deleted_at       TIMESTAMPTZ
);

CREATE UNIQUE INDEX uq_component_type_external_id ON component (type, external_id)
    WHERE external_id IS NOT NULL;
CREATE INDEX idx_component_rack ON component (rack_id);

CREATE TABLE bmc (
    mac_address  TEXT PRIMARY KEY,
    type         VARCHAR(16) NOT NULL
        CONSTRAINT bmc_type_check CHECK (type IN ('Unknown', 'Host', 'DPU')),
    component_id UUID NOT NULL REFERENCES component (id) ON DELETE CASCADE,
    ip_address   TEXT
);

CREATE INDEX idx_bmc_component ON bmc (component_id);
