-- Flink's high-availability services (issue 15): a leader lease per cluster, the leader
-- information each component publishes, the state-handle pointers of execution plans,
-- applications and checkpoints, and the checkpoint id counters. Times are RFC 3339 UTC text.
--
-- Every write of a leader is fenced by the lease epoch in the same statement: it lands only
-- while that epoch is the cluster's live lease. Lease times are the database's clock.
-- The lease row of a cluster is never deleted by jobstore, so that epochs never repeat.

CREATE TABLE ha_leases (
    cluster_id  TEXT PRIMARY KEY CHECK (length(cluster_id) BETWEEN 1 AND 128
                                        AND cluster_id NOT GLOB '*[^A-Za-z0-9._-]*'),
    holder      TEXT NOT NULL CHECK (length(holder) BETWEEN 1 AND 256),
    -- Raised at every new acquisition (after an expiry, a release, or by another holder).
    epoch       INTEGER NOT NULL CHECK (epoch >= 1),
    acquired_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    renewed_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    expires_at  TEXT NOT NULL,
    CHECK (acquired_at <= renewed_at)
) STRICT, WITHOUT ROWID;

CREATE TABLE ha_leader_info (
    cluster_id  TEXT NOT NULL CHECK (length(cluster_id) BETWEEN 1 AND 128
                                     AND cluster_id NOT GLOB '*[^A-Za-z0-9._-]*'),
    -- Flink's component id: 'resourcemanager', 'dispatcher', 'restserver' or a job id.
    component   TEXT NOT NULL CHECK (length(component) BETWEEN 1 AND 256),
    -- The lease epoch of the leader that published it.
    epoch       INTEGER NOT NULL CHECK (epoch >= 1),
    address     TEXT NOT NULL CHECK (length(address) BETWEEN 1 AND 4096),
    -- The leader session UUID (the RPC fencing token).
    session_id  TEXT NOT NULL CHECK (length(session_id) BETWEEN 1 AND 256),
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (cluster_id, component)
) STRICT, WITHOUT ROWID;

CREATE TABLE ha_state_handles (
    cluster_id          TEXT NOT NULL CHECK (length(cluster_id) BETWEEN 1 AND 128
                                             AND cluster_id NOT GLOB '*[^A-Za-z0-9._-]*'),
    kind                TEXT NOT NULL CHECK (kind IN ('execution-plan', 'application', 'checkpoint')),
    -- The job of a checkpoint; '' for entries of no job.
    job_id              TEXT NOT NULL DEFAULT '' CHECK (job_id = ''
                                 OR (length(job_id) = 32 AND job_id NOT GLOB '*[^0-9a-f]*')),
    name                TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 256),
    -- Compare-and-set version: 1 at the first write, + 1 at every replace.
    version             INTEGER NOT NULL CHECK (version >= 1),
    -- Flink's serialized RetrievableStateHandle: a pointer to the state in
    -- high-availability.storageDir, never the state itself.
    handle              BLOB NOT NULL CHECK (length(handle) BETWEEN 1 AND 65536),
    marked_for_deletion INTEGER NOT NULL DEFAULT 0 CHECK (marked_for_deletion IN (0, 1)),
    updated_at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (cluster_id, kind, job_id, name)
) STRICT, WITHOUT ROWID;

CREATE TABLE ha_counters (
    cluster_id  TEXT NOT NULL CHECK (length(cluster_id) BETWEEN 1 AND 128
                                     AND cluster_id NOT GLOB '*[^A-Za-z0-9._-]*'),
    job_id      TEXT NOT NULL CHECK (length(job_id) = 32 AND job_id NOT GLOB '*[^0-9a-f]*'),
    -- The next checkpoint id to hand out (Flink's INITIAL_CHECKPOINT_ID is 1).
    value       INTEGER NOT NULL CHECK (value >= 1),
    PRIMARY KEY (cluster_id, job_id)
) STRICT, WITHOUT ROWID;

-- Who leads each cluster, since when, until when, and whether the lease is still live (1/0).
CREATE VIEW ha_leaders AS
    SELECT l.cluster_id, l.holder, l.epoch, l.acquired_at AS leader_since, l.renewed_at,
           l.expires_at, l.expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now') AS live,
           (SELECT count(*) FROM ha_leader_info i
             WHERE i.cluster_id = l.cluster_id AND i.epoch = l.epoch) AS published_components
      FROM ha_leases l;

-- Which execution plans, applications and checkpoints are held, per cluster, kind and job.
CREATE VIEW ha_held_state AS
    SELECT s.cluster_id, s.kind, s.job_id, count(*) AS handles,
           sum(s.marked_for_deletion) AS marked_for_deletion,
           max(s.version) AS max_version, max(s.updated_at) AS last_updated_at,
           (SELECT c.value FROM ha_counters c
             WHERE c.cluster_id = s.cluster_id AND c.job_id = s.job_id) AS next_checkpoint_id
      FROM ha_state_handles s GROUP BY s.cluster_id, s.kind, s.job_id;
