-- A component's operational state (in_service | drained | maintenance) and
-- the reason given with it, read by the readiness gate (issue 12). NULL =
-- never set: the gate treats the component as ready, like the reference
-- treats a component without a status.
ALTER TABLE component ADD COLUMN operational_state TEXT
    CHECK (operational_state IN ('in_service', 'drained', 'maintenance'));
ALTER TABLE component ADD COLUMN operational_reason TEXT;
