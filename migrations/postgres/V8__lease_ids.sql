-- A lease acquisition is named by a random lease id beside its epoch, and every fenced write
-- names both. An epoch alone can be handed out twice: when a database failover loses the
-- commit that recorded an acquisition (asynchronous replication), the next acquisition on the
-- new primary counts from the older row and gets the same epoch again. A lease id is drawn at
-- random by the acquirer, so no later acquisition gets it again, whatever the database lost:
-- the deposed holder's writes find another lease id and land nowhere.
--
-- Leases granted before this migration get a lease id nobody knows: their holders' next
-- fenced write is refused and they acquire again (one leader change at the upgrade).
ALTER TABLE ha_leases ADD COLUMN lease_id uuid NOT NULL DEFAULT gen_random_uuid();
ALTER TABLE ha_leases ALTER COLUMN lease_id DROP DEFAULT;

-- Who leads each cluster, under which lease, since when, until when.
CREATE OR REPLACE VIEW ha_leaders AS
    SELECT l.cluster_id, l.holder, l.epoch, l.acquired_at AS leader_since, l.renewed_at,
           l.expires_at, l.expires_at > now() AS live,
           (SELECT count(*) FROM ha_leader_info i
             WHERE i.cluster_id = l.cluster_id AND i.epoch = l.epoch) AS published_components,
           l.lease_id
      FROM ha_leases l;
