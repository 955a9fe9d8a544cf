-- The savepoint lifecycle (issue 16): checkpoints and disposals as operations beside
-- savepoints, what triggered each operation, savepoints marked disposed, schedules and
-- retention policies per cluster with per-job overrides, and the job names Flink reports.
-- SQLite cannot change a table's CHECKs: savepoint_operations is built anew and its rows
-- copied (in the migration's transaction), with its indexes and the view that reads it.

DROP VIEW savepoint_history;

-- The columns of V2, then the new ones (see migrations/postgres/V7 for their meaning).
CREATE TABLE savepoint_operations_v7 (
    cluster_id TEXT NOT NULL CHECK (length(cluster_id) BETWEEN 1 AND 128 AND cluster_id NOT GLOB '*[^A-Za-z0-9._-]*'),
    job_id TEXT NOT NULL CHECK (length(job_id) = 32 AND job_id NOT GLOB '*[^0-9a-f]*'),
    request_id TEXT NOT NULL CHECK (length(request_id) = 32 AND request_id NOT GLOB '*[^0-9a-f]*'),
    kind TEXT NOT NULL CHECK (kind IN ('SAVEPOINT', 'CANCEL_WITH_SAVEPOINT', 'STOP_WITH_SAVEPOINT', 'TERMINATE_WITH_SAVEPOINT', 'CHECKPOINT', 'DISPOSAL')),
    status TEXT NOT NULL DEFAULT 'IN_PROGRESS' CHECK (status IN ('IN_PROGRESS', 'COMPLETED')),
    target_directory TEXT, format_type TEXT NOT NULL DEFAULT 'CANONICAL' CHECK (format_type IN ('CANONICAL', 'NATIVE')),
    location TEXT, failure_cause TEXT CHECK (failure_cause IS NULL OR (json_valid(failure_cause) AND json_type(failure_cause) = 'object')),
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), completed_at TEXT,
    attempt INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0), lease_owner TEXT, lease_expires_at TEXT, triggered_at TEXT,
    next_attempt_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), last_error TEXT,
    trigger TEXT NOT NULL DEFAULT 'api' CHECK (trigger IN ('api', 'schedule', 'retention')),
    checkpoint_type TEXT CHECK (checkpoint_type IN ('CONFIGURED', 'FULL')), checkpoint_id INTEGER CHECK (checkpoint_id >= 1),
    savepoint_path TEXT CHECK (savepoint_path <> ''),
    flink_trigger_id TEXT CHECK (length(flink_trigger_id) = 32 AND flink_trigger_id NOT GLOB '*[^0-9a-f]*'),
    disposed_at TEXT, due_at TEXT, retry INTEGER NOT NULL DEFAULT 0 CHECK (retry >= 0), job_name TEXT,
    PRIMARY KEY (cluster_id, job_id, request_id),
    CHECK ((status = 'COMPLETED') = (completed_at IS NOT NULL)),
    -- what a completed operation carries: a savepoint its location, a checkpoint its id, a
    -- disposal nothing more; or any of them a failure-cause. An open one carries none.
    CHECK (CASE WHEN status = 'IN_PROGRESS' THEN location IS NULL AND failure_cause IS NULL AND checkpoint_id IS NULL
                WHEN kind = 'CHECKPOINT' THEN location IS NULL AND (checkpoint_id IS NULL) <> (failure_cause IS NULL)
                WHEN kind = 'DISPOSAL' THEN location IS NULL AND checkpoint_id IS NULL
                ELSE checkpoint_id IS NULL AND (location IS NULL) <> (failure_cause IS NULL) END),
    CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL)),
    CHECK ((kind = 'CHECKPOINT') = (checkpoint_type IS NOT NULL)),
    CHECK ((kind = 'DISPOSAL') = (savepoint_path IS NOT NULL) AND (flink_trigger_id IS NULL OR kind = 'DISPOSAL')),
    CHECK (disposed_at IS NULL OR location IS NOT NULL),
    CHECK ((due_at IS NOT NULL) = (trigger = 'schedule'))
) STRICT, WITHOUT ROWID;

INSERT INTO savepoint_operations_v7
    (cluster_id, job_id, request_id, kind, status, target_directory, format_type, location, failure_cause, created_at,
     completed_at, attempt, lease_owner, lease_expires_at, triggered_at, next_attempt_at, last_error)
SELECT cluster_id, job_id, request_id, kind, status, target_directory, format_type, location, failure_cause, created_at,
       completed_at, attempt, lease_owner, lease_expires_at, triggered_at, next_attempt_at, last_error
  FROM savepoint_operations;

DROP TABLE savepoint_operations;
ALTER TABLE savepoint_operations_v7 RENAME TO savepoint_operations;

CREATE INDEX savepoint_operations_open ON savepoint_operations (next_attempt_at) WHERE status = 'IN_PROGRESS';
CREATE INDEX savepoint_operations_completed ON savepoint_operations (completed_at) WHERE status = 'COMPLETED';
-- The newest completed savepoints of a job, not disposed of: latest-savepoint and retention.
CREATE INDEX savepoint_operations_savepoints ON savepoint_operations (cluster_id, job_id, completed_at DESC)
    WHERE status = 'COMPLETED' AND location IS NOT NULL AND disposed_at IS NULL;
-- A disposal by its trigger id (GET /savepoint-disposal/{triggerId}) and by its path.
CREATE INDEX savepoint_operations_disposals_by_request ON savepoint_operations (cluster_id, request_id) WHERE kind = 'DISPOSAL';
CREATE INDEX savepoint_operations_disposals_by_path ON savepoint_operations (cluster_id, savepoint_path) WHERE kind = 'DISPOSAL';

-- Savepoint history per job (V4's view, on the new table).
CREATE VIEW savepoint_history AS
    SELECT cluster_id, job_id, request_id, kind, status, target_directory, format_type, location,
           json_extract(failure_cause, '$.class') AS failure_class, created_at, completed_at,
           CAST(round((julianday(completed_at) - julianday(created_at)) * 86400000) AS INTEGER) AS duration_ms, attempt, lease_owner, last_error
      FROM savepoint_operations;

-- Schedules (cluster's: job_id ''; a job's override, possibly without an interval) and
-- retention policies (see migrations/postgres/V7).
CREATE TABLE savepoint_schedules (
    cluster_id TEXT NOT NULL CHECK (length(cluster_id) BETWEEN 1 AND 128 AND cluster_id NOT GLOB '*[^A-Za-z0-9._-]*'),
    job_id TEXT NOT NULL DEFAULT '' CHECK (job_id = '' OR (length(job_id) = 32 AND job_id NOT GLOB '*[^0-9a-f]*')),
    interval_ms INTEGER CHECK (interval_ms >= 1000), kind TEXT NOT NULL DEFAULT 'SAVEPOINT' CHECK (kind IN ('SAVEPOINT', 'CHECKPOINT')),
    target_directory TEXT CHECK (target_directory <> ''), format_type TEXT NOT NULL DEFAULT 'CANONICAL' CHECK (format_type IN ('CANONICAL', 'NATIVE')),
    next_due_at TEXT, last_triggered_at TEXT, updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (cluster_id, job_id),
    CHECK ((interval_ms IS NULL) = (next_due_at IS NULL)),
    CHECK (job_id <> '' OR interval_ms IS NOT NULL)
) STRICT, WITHOUT ROWID;

CREATE TABLE savepoint_retention (
    cluster_id TEXT NOT NULL CHECK (length(cluster_id) BETWEEN 1 AND 128 AND cluster_id NOT GLOB '*[^A-Za-z0-9._-]*'),
    job_id TEXT NOT NULL DEFAULT '' CHECK (job_id = '' OR (length(job_id) = 32 AND job_id NOT GLOB '*[^0-9a-f]*')),
    max_count INTEGER CHECK (max_count >= 1), max_age_ms INTEGER CHECK (max_age_ms >= 1000),
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (cluster_id, job_id), CHECK (max_count IS NOT NULL OR max_age_ms IS NOT NULL)
) STRICT, WITHOUT ROWID;

-- The jobs Flink reported (its job overview, read by the scheduler), for the latest
-- savepoint by job name: a redeployed job gets a new id and keeps its name.
CREATE TABLE flink_jobs (
    cluster_id TEXT NOT NULL CHECK (length(cluster_id) BETWEEN 1 AND 128 AND cluster_id NOT GLOB '*[^A-Za-z0-9._-]*'),
    job_id TEXT NOT NULL CHECK (length(job_id) = 32 AND job_id NOT GLOB '*[^0-9a-f]*'),
    name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 4096), state TEXT NOT NULL CHECK (length(state) BETWEEN 1 AND 64),
    seen_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (cluster_id, job_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX flink_jobs_name ON flink_jobs (cluster_id, name);

-- The names jobs had: Flink's job overview (flink_jobs), the operations, the job results.
CREATE VIEW job_names AS
    SELECT cluster_id, job_id, name FROM flink_jobs
    UNION SELECT cluster_id, job_id, job_name FROM savepoint_operations WHERE job_name IS NOT NULL
    UNION SELECT cluster_id, job_id, json_extract(result, '$.name') FROM job_results WHERE json_extract(result, '$.name') IS NOT NULL;

-- The disposals of each savepoint location: how many were made, how many are open or
-- succeeded (live), and when the last one completed.
CREATE VIEW savepoint_disposals AS
    SELECT cluster_id, savepoint_path, count(*) AS tries, sum(CASE WHEN status = 'IN_PROGRESS' OR failure_cause IS NULL THEN 1 ELSE 0 END) AS live, max(completed_at) AS last_completed
      FROM savepoint_operations WHERE kind = 'DISPOSAL' GROUP BY cluster_id, savepoint_path;

-- The completed savepoints of each job, not disposed of, newest first (n = 1: the latest,
-- which no retention policy disposes of).
CREATE VIEW savepoint_ages AS
    SELECT o.cluster_id, o.job_id, o.request_id, o.location, o.completed_at, row_number() OVER (PARTITION BY o.cluster_id, o.job_id ORDER BY o.completed_at DESC, o.request_id DESC) AS n
      FROM savepoint_operations o WHERE o.status = 'COMPLETED' AND o.location IS NOT NULL AND o.disposed_at IS NULL
       AND o.kind IN ('SAVEPOINT', 'CANCEL_WITH_SAVEPOINT', 'STOP_WITH_SAVEPOINT', 'TERMINATE_WITH_SAVEPOINT');
