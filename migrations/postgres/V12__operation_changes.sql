-- Status polls are answered from memory: each jobstore process keeps the completed savepoint
-- operations it read (`--operation-cache-size`), and forgets one when its row changes or goes.
-- A completed operation changes only by its disposal mark and goes only by the retention's
-- purge or a delete; an operation in progress is never kept, so its completion needs no word.
-- Every update or delete of a completed row, whoever makes it (any jobstore replica, `jobstore
-- gc`, an operator in psql), notifies channel `jobstore_operations` at commit with the
-- operation's key as payload, `JOB_ID REQUEST_ID CLUSTER_ID` (at most 194 bytes); a TRUNCATE
-- notifies `*` (every operation). Each jobstore process with the cache on LISTENs.
CREATE FUNCTION jobstore_operation_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('jobstore_operations', '*');
    ELSE
        PERFORM pg_notify('jobstore_operations',
                          OLD.job_id || ' ' || OLD.request_id || ' ' || OLD.cluster_id);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER savepoint_operations_notify
    AFTER UPDATE OR DELETE ON savepoint_operations
    FOR EACH ROW WHEN (OLD.status = 'COMPLETED')
    EXECUTE FUNCTION jobstore_operation_notify();

CREATE TRIGGER savepoint_operations_truncate_notify
    AFTER TRUNCATE ON savepoint_operations
    FOR EACH STATEMENT EXECUTE FUNCTION jobstore_operation_notify();
