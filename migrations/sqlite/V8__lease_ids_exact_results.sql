-- A lease acquisition is named by a random lease id beside its epoch, and every fenced write
-- names both. An epoch alone can be handed out twice: when a database failover loses the
-- commit that recorded an acquisition, the next acquisition counts from the older row and gets
-- the same epoch again. A lease id is drawn at random by the acquirer, so no later acquisition
-- gets it again, whatever the database lost. (SQLite does not fail over; the schema is the
-- same on both backends.)
--
-- Leases granted before this migration get a lease id nobody knows: their holders' next
-- fenced write is refused and they acquire again (one leader change at the upgrade).
ALTER TABLE ha_leases ADD COLUMN lease_id TEXT NOT NULL
    DEFAULT '00000000-0000-0000-0000-000000000000'
    CHECK (length(lease_id) = 36 AND lease_id NOT GLOB '*[^0-9a-f-]*');
UPDATE ha_leases SET lease_id = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4'
    || substr(hex(randomblob(2)), 2) || '-a' || substr(hex(randomblob(2)), 2) || '-'
    || hex(randomblob(6)));

-- Who leads each cluster, under which lease, since when, until when.
DROP VIEW ha_leaders;
CREATE VIEW ha_leaders AS
    SELECT l.cluster_id, l.holder, l.epoch, l.acquired_at AS leader_since, l.renewed_at,
           l.expires_at, l.expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now') AS live,
           (SELECT count(*) FROM ha_leader_info i
             WHERE i.cluster_id = l.cluster_id AND i.epoch = l.epoch) AS published_components,
           l.lease_id
      FROM ha_leases l;
