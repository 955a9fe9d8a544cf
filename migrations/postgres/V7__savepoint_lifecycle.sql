-- The savepoint lifecycle (issue 16): checkpoints and disposals as operations beside
-- savepoints, what triggered each operation, savepoints marked disposed, schedules and
-- retention policies per cluster with per-job overrides, and the job names Flink reports.

ALTER TABLE savepoint_operations DROP CONSTRAINT savepoint_operations_kind_check;
ALTER TABLE savepoint_operations DROP CONSTRAINT savepoint_operations_check1;

ALTER TABLE savepoint_operations
    -- who made the operation: a client of the API, a schedule, or a retention policy
    ADD COLUMN trigger         text        NOT NULL DEFAULT 'api'
                                           CHECK (trigger IN ('api', 'schedule', 'retention')),
    -- CHECKPOINT: the type asked for; the checkpoint id Flink completed
    ADD COLUMN checkpoint_type text        CHECK (checkpoint_type IN ('CONFIGURED', 'FULL')),
    ADD COLUMN checkpoint_id   bigint      CHECK (checkpoint_id >= 1),
    -- DISPOSAL: the savepoint to dispose of, and the trigger id Flink gave the disposal
    -- (Flink takes none from its client)
    ADD COLUMN savepoint_path  text        CHECK (savepoint_path <> ''),
    ADD COLUMN flink_trigger_id text       CHECK (flink_trigger_id ~ '^[0-9a-f]{32}$'),
    -- a completed savepoint whose location jobstore disposed of
    ADD COLUMN disposed_at     timestamptz,
    -- schedule: the due time the operation serves, and its retry within that due time;
    -- retention: the retry of a disposal
    ADD COLUMN due_at          timestamptz,
    ADD COLUMN retry           integer     NOT NULL DEFAULT 0 CHECK (retry >= 0),
    -- the job's name when the operation was made (Flink's job overview), if known
    ADD COLUMN job_name        text;

ALTER TABLE savepoint_operations
    ADD CONSTRAINT savepoint_operations_kind_check CHECK (kind IN ('SAVEPOINT',
        'CANCEL_WITH_SAVEPOINT', 'STOP_WITH_SAVEPOINT', 'TERMINATE_WITH_SAVEPOINT',
        'CHECKPOINT', 'DISPOSAL')),
    -- what a completed operation carries: a savepoint its location, a checkpoint its id, a
    -- disposal nothing more; or any of them a failure-cause. An open one carries none.
    ADD CONSTRAINT savepoint_operations_outcome_check CHECK (CASE
        WHEN status = 'IN_PROGRESS'
            THEN location IS NULL AND failure_cause IS NULL AND checkpoint_id IS NULL
        WHEN kind = 'CHECKPOINT'
            THEN location IS NULL AND (checkpoint_id IS NULL) <> (failure_cause IS NULL)
        WHEN kind = 'DISPOSAL'
            THEN location IS NULL AND checkpoint_id IS NULL
        ELSE checkpoint_id IS NULL AND (location IS NULL) <> (failure_cause IS NULL) END),
    ADD CONSTRAINT savepoint_operations_checkpoint_check
        CHECK ((kind = 'CHECKPOINT') = (checkpoint_type IS NOT NULL)),
    ADD CONSTRAINT savepoint_operations_disposal_check
        CHECK ((kind = 'DISPOSAL') = (savepoint_path IS NOT NULL)
               AND (flink_trigger_id IS NULL OR kind = 'DISPOSAL')),
    ADD CONSTRAINT savepoint_operations_disposed_check
        CHECK (disposed_at IS NULL OR location IS NOT NULL),
    ADD CONSTRAINT savepoint_operations_due_check
        CHECK ((due_at IS NOT NULL) = (trigger = 'schedule'));

-- The newest completed savepoints of a job, not disposed of: latest-savepoint and retention.
CREATE INDEX savepoint_operations_savepoints
    ON savepoint_operations (cluster_id, job_id, completed_at DESC)
    WHERE status = 'COMPLETED' AND location IS NOT NULL AND disposed_at IS NULL;
-- A disposal by its trigger id (GET /savepoint-disposal/{triggerId}) and by its path.
CREATE INDEX savepoint_operations_disposals_by_request
    ON savepoint_operations (cluster_id, request_id) WHERE kind = 'DISPOSAL';
CREATE INDEX savepoint_operations_disposals_by_path
    ON savepoint_operations (cluster_id, savepoint_path) WHERE kind = 'DISPOSAL';

-- A schedule per cluster (job_id '') with per-job overrides: every interval the executor
-- triggers a savepoint (or checkpoint) of every RUNNING job of the cluster, exactly once
-- per due time across replicas (the trigger id is derived from the schedule and the due
-- time). A job's row with no interval means: no schedule for that job.
CREATE TABLE savepoint_schedules (
    cluster_id        text        NOT NULL CHECK (cluster_id ~ '^[A-Za-z0-9._-]{1,128}$'),
    job_id            text        NOT NULL DEFAULT '' CHECK (job_id ~ '^([0-9a-f]{32})?$'),
    interval_ms       bigint      CHECK (interval_ms >= 1000),
    kind              text        NOT NULL DEFAULT 'SAVEPOINT'
                                  CHECK (kind IN ('SAVEPOINT', 'CHECKPOINT')),
    target_directory  text        CHECK (target_directory <> ''),
    format_type       text        NOT NULL DEFAULT 'CANONICAL'
                                  CHECK (format_type IN ('CANONICAL', 'NATIVE')),
    -- the next due time (NULL without an interval) and when it last triggered
    next_due_at       timestamptz,
    last_triggered_at timestamptz,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster_id, job_id),
    CHECK ((interval_ms IS NULL) = (next_due_at IS NULL)),
    CHECK (job_id <> '' OR interval_ms IS NOT NULL)
);

-- A retention policy per cluster (job_id '') with per-job overrides: keep at most
-- max_count completed savepoints per job and none older than max_age_ms, never the latest.
CREATE TABLE savepoint_retention (
    cluster_id  text        NOT NULL CHECK (cluster_id ~ '^[A-Za-z0-9._-]{1,128}$'),
    job_id      text        NOT NULL DEFAULT '' CHECK (job_id ~ '^([0-9a-f]{32})?$'),
    max_count   integer     CHECK (max_count >= 1),
    max_age_ms  bigint      CHECK (max_age_ms >= 1000),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster_id, job_id),
    CHECK (max_count IS NOT NULL OR max_age_ms IS NOT NULL)
);

-- The jobs Flink reported (its job overview, read by the scheduler), for the latest
-- savepoint by job name: a redeployed job gets a new id and keeps its name.
CREATE TABLE flink_jobs (
    cluster_id  text        NOT NULL CHECK (cluster_id ~ '^[A-Za-z0-9._-]{1,128}$'),
    job_id      text        NOT NULL CHECK (job_id ~ '^[0-9a-f]{32}$'),
    name        text        NOT NULL CHECK (length(name) BETWEEN 1 AND 4096),
    state       text        NOT NULL CHECK (length(state) BETWEEN 1 AND 64),
    seen_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster_id, job_id)
);
CREATE INDEX flink_jobs_name ON flink_jobs (cluster_id, name);

-- The completed savepoints of each job, not disposed of, newest first (n = 1: the latest,
-- which no retention policy disposes of).
CREATE VIEW savepoint_ages AS
    SELECT o.cluster_id, o.job_id, o.request_id, o.location, o.completed_at, row_number() OVER (PARTITION BY o.cluster_id, o.job_id ORDER BY o.completed_at DESC, o.request_id DESC) AS n
      FROM savepoint_operations o WHERE o.status = 'COMPLETED' AND o.location IS NOT NULL AND o.disposed_at IS NULL
       AND o.kind IN ('SAVEPOINT', 'CANCEL_WITH_SAVEPOINT', 'STOP_WITH_SAVEPOINT', 'TERMINATE_WITH_SAVEPOINT');

-- The disposals of each savepoint location: how many were made, how many are open or
-- succeeded (live), and when the last one completed.
CREATE VIEW savepoint_disposals AS
    SELECT cluster_id, savepoint_path, count(*) AS tries, sum(CASE WHEN status = 'IN_PROGRESS' OR failure_cause IS NULL THEN 1 ELSE 0 END) AS live, max(completed_at) AS last_completed
      FROM savepoint_operations WHERE kind = 'DISPOSAL' GROUP BY cluster_id, savepoint_path;

-- The names jobs had: Flink's job overview (flink_jobs), the operations, the job results.
CREATE VIEW job_names AS
    SELECT cluster_id, job_id, name FROM flink_jobs
    UNION SELECT cluster_id, job_id, job_name FROM savepoint_operations WHERE job_name IS NOT NULL
    UNION SELECT cluster_id, job_id, result ->> 'name' FROM job_results WHERE result ->> 'name' IS NOT NULL;
