-- operation_run and operation_run_target keep the updated_at the store
-- writes (its clock at write time, microseconds), like task and the rule
-- tables of 0003, instead of set_updated_at() of 0002, which overwrote it
-- with the transaction's start. The dispatcher picks runs by updated_at
-- (operation-runs §3.1); a transaction that waited on a run's row lock
-- would otherwise stamp an instant older than the write it waited for.
-- Writers that do not set updated_at still get the time of the write.
-- SQLite's triggers (0002) behave like this already.

DROP TRIGGER operation_run_set_updated_at ON operation_run;
CREATE TRIGGER operation_run_set_updated_at
    BEFORE UPDATE ON operation_run
    FOR EACH ROW EXECUTE FUNCTION set_updated_at_if_unchanged();

DROP TRIGGER operation_run_target_set_updated_at ON operation_run_target;
CREATE TRIGGER operation_run_target_set_updated_at
    BEFORE UPDATE ON operation_run_target
    FOR EACH ROW EXECUTE FUNCTION set_updated_at_if_unchanged();
