-- A standby learns at once that the lease changed (GET .../ha/lease waits for it): every
-- change of a cluster's lease that a standby cares about (an acquisition, a release, an
-- expiry by cleanup, a removal by hand) notifies channel `jobstore_ha_leader_info` with the
-- cluster id at commit, whoever wrote it. It is the channel of the leader information's
-- trigger (V6), on which every jobstore process LISTENs already; its long polls read again
-- and find what changed. A renewal (the same holder, epoch and lease id, still live)
-- notifies nobody: it changes neither the holder, nor the epoch, nor whether it is live.
CREATE FUNCTION jobstore_ha_lease_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.holder = NEW.holder AND OLD.epoch = NEW.epoch
       AND OLD.lease_id = NEW.lease_id AND NEW.expires_at > now() THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('jobstore_ha_leader_info',
                      CASE WHEN TG_OP = 'DELETE' THEN OLD.cluster_id ELSE NEW.cluster_id END);
    RETURN NULL;
END;
$$;

CREATE TRIGGER ha_lease_notify
    AFTER INSERT OR UPDATE OR DELETE ON ha_leases
    FOR EACH ROW EXECUTE FUNCTION jobstore_ha_lease_notify();
