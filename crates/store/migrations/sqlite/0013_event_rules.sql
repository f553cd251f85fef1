-- Event rules and their bindings (issue 34, the reference's event_rules and
-- event_rule_bindings). A rule's actions are the JSON of
-- rackflow_domain::event_rule::Action. A binding puts a persisted rule on a
-- scope for its event type: the composite foreign key keeps the binding's
-- event type the rule's, the partial unique indexes allow one rule per
-- (event type, site) and per (event type, rack). Deleting a rule or purging
-- a rack deletes its bindings. Same model as
-- migrations/postgres/0013_event_rules.sql.
CREATE TABLE event_rules (
    id          TEXT PRIMARY KEY NOT NULL,
    name        TEXT NOT NULL CHECK (length(name) <= 128),
    description TEXT NOT NULL DEFAULT '',
    enabled     INTEGER NOT NULL DEFAULT 0 CHECK (enabled IN (0, 1)),
    event_type  TEXT NOT NULL CHECK (length(event_type) <= 128),
    actions     TEXT NOT NULL CHECK (json_valid(actions)),
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    CONSTRAINT uq_event_rules_id_event_type UNIQUE (id, event_type)
);
CREATE INDEX idx_event_rules_event_type ON event_rules (event_type, id);

CREATE TABLE event_rule_bindings (
    id         TEXT PRIMARY KEY NOT NULL,
    rule_id    TEXT NOT NULL,
    event_type TEXT NOT NULL,
    scope_type TEXT NOT NULL CHECK (scope_type IN ('site', 'rack')),
    rack_id    TEXT REFERENCES rack (id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    FOREIGN KEY (rule_id, event_type) REFERENCES event_rules (id, event_type) ON DELETE CASCADE,
    CHECK ((scope_type = 'site') = (rack_id IS NULL))
);
CREATE UNIQUE INDEX uq_event_rule_bindings_site
    ON event_rule_bindings (event_type) WHERE scope_type = 'site';
CREATE UNIQUE INDEX uq_event_rule_bindings_rack
    ON event_rule_bindings (event_type, rack_id) WHERE scope_type = 'rack';
CREATE INDEX idx_event_rule_bindings_rule ON event_rule_bindings (rule_id);
