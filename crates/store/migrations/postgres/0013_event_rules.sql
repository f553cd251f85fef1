-- Event rules and their bindings (issue 34, the reference's event_rules and
-- event_rule_bindings). A rule's actions are the JSON of
-- rackflow_domain::event_rule::Action. A binding puts a persisted rule on a
-- scope for its event type: the composite foreign key keeps the binding's
-- event type the rule's, the partial unique indexes allow one rule per
-- (event type, site) and per (event type, rack). Deleting a rule or purging
-- a rack deletes its bindings. Same model as
-- migrations/sqlite/0013_event_rules.sql.
CREATE TABLE event_rules (
    id          UUID PRIMARY KEY,
    name        VARCHAR(128) NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    enabled     BOOLEAN NOT NULL DEFAULT FALSE,
    event_type  VARCHAR(128) NOT NULL,
    actions     JSONB NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    CONSTRAINT uq_event_rules_id_event_type UNIQUE (id, event_type)
);
CREATE INDEX idx_event_rules_event_type ON event_rules (event_type, id);

CREATE TABLE event_rule_bindings (
    id         UUID PRIMARY KEY,
    rule_id    UUID NOT NULL,
    event_type VARCHAR(128) NOT NULL,
    scope_type VARCHAR(8) NOT NULL
        CONSTRAINT event_rule_bindings_scope_type_check CHECK (scope_type IN ('site', 'rack')),
    rack_id    UUID REFERENCES rack (id) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL,
    CONSTRAINT event_rule_bindings_rule_fkey FOREIGN KEY (rule_id, event_type)
        REFERENCES event_rules (id, event_type) ON DELETE CASCADE,
    CONSTRAINT event_rule_bindings_scope_check CHECK ((scope_type = 'site') = (rack_id IS NULL))
);
CREATE UNIQUE INDEX uq_event_rule_bindings_site
    ON event_rule_bindings (event_type) WHERE scope_type = 'site';
CREATE UNIQUE INDEX uq_event_rule_bindings_rack
    ON event_rule_bindings (event_type, rack_id) WHERE scope_type = 'rack';
CREATE INDEX idx_event_rule_bindings_rule ON event_rule_bindings (rule_id);
