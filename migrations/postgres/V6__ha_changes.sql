-- Flink's leader retrieval learns of leader changes promptly (issue 15): every change of a
-- cluster's leader information notifies channel `jobstore_ha_leader_info` with the cluster
-- id as payload, at commit, whoever wrote it (any jobstore replica, or an operator in psql).
-- Each jobstore process LISTENs and wakes its long polls (GET .../ha/leader-info).

CREATE FUNCTION jobstore_ha_leader_info_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('jobstore_ha_leader_info',
                      CASE WHEN TG_OP = 'DELETE' THEN OLD.cluster_id ELSE NEW.cluster_id END);
    RETURN NULL;
END;
$$;

CREATE TRIGGER ha_leader_info_notify
    AFTER INSERT OR UPDATE OR DELETE ON ha_leader_info
    FOR EACH ROW EXECUTE FUNCTION jobstore_ha_leader_info_notify();

-- A job's HA data (its checkpoints) is found by job when the job is cleaned up.
CREATE INDEX ha_state_handles_job ON ha_state_handles (cluster_id, job_id);
