-- What started a task (issue 34, the reference's task trigger): `api` (an
-- operator's request, a schedule or an operation run) or
-- `event_rule_execution`, whose trigger_id is the event rule that acted.
-- Same model as migrations/sqlite/0016_task_trigger.sql.
ALTER TABLE task ADD COLUMN trigger_type VARCHAR(32) NOT NULL DEFAULT 'api'
    CHECK (trigger_type IN ('api', 'event_rule_execution'));
ALTER TABLE task ADD COLUMN trigger_id UUID;
ALTER TABLE task ADD CONSTRAINT chk_task_trigger_id
    CHECK ((trigger_type = 'event_rule_execution') = (trigger_id IS NOT NULL));
