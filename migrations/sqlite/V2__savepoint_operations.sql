-- Savepoint operations (Flink's asynchronous trigger/stop/status API), kept durably, and the
-- per-cluster configuration the executor needs. Times are RFC 3339 UTC text.

CREATE TABLE clusters (
    cluster_id          TEXT PRIMARY KEY CHECK (length(cluster_id) BETWEEN 1 AND 128
                                                AND cluster_id NOT GLOB '*[^A-Za-z0-9._-]*'),
    flink_rest_url      TEXT CHECK (flink_rest_url GLOB 'http://*' OR flink_rest_url GLOB 'https://*'),
    savepoint_directory TEXT CHECK (savepoint_directory <> ''),
    -- 'flags' rows follow the serve flags of the default cluster; 'api' rows were PUT and win.
    configured_by       TEXT NOT NULL CHECK (configured_by IN ('flags', 'api')),
    updated_at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT, WITHOUT ROWID;

CREATE TABLE savepoint_operations (
    cluster_id       TEXT NOT NULL CHECK (length(cluster_id) BETWEEN 1 AND 128
                                          AND cluster_id NOT GLOB '*[^A-Za-z0-9._-]*'),
    job_id           TEXT NOT NULL CHECK (length(job_id) = 32 AND job_id NOT GLOB '*[^0-9a-f]*'),
    -- Flink's triggerId / request-id; also the triggerId the executor sends to Flink.
    request_id       TEXT NOT NULL CHECK (length(request_id) = 32 AND request_id NOT GLOB '*[^0-9a-f]*'),
    kind             TEXT NOT NULL CHECK (kind IN ('SAVEPOINT', 'CANCEL_WITH_SAVEPOINT',
                                                   'STOP_WITH_SAVEPOINT', 'TERMINATE_WITH_SAVEPOINT')),
    status           TEXT NOT NULL DEFAULT 'IN_PROGRESS' CHECK (status IN ('IN_PROGRESS', 'COMPLETED')),
    target_directory TEXT,
    format_type      TEXT NOT NULL DEFAULT 'CANONICAL' CHECK (format_type IN ('CANONICAL', 'NATIVE')),
    location         TEXT,
    failure_cause    TEXT CHECK (failure_cause IS NULL
                                  OR (json_valid(failure_cause) AND json_type(failure_cause) = 'object')),
    created_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    completed_at     TEXT,
    -- The executor: who holds the operation, until when, and the attempt number that fences
    -- every write of a holder whose lease was taken over.
    attempt          INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    lease_owner      TEXT,
    lease_expires_at TEXT,
    triggered_at     TEXT,
    next_attempt_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    last_error       TEXT,
    PRIMARY KEY (cluster_id, job_id, request_id),
    CHECK ((status = 'COMPLETED') = (completed_at IS NOT NULL)),
    -- A completed operation has exactly one of location / failure-cause; an open one neither.
    CHECK (CASE status WHEN 'COMPLETED' THEN (location IS NULL) <> (failure_cause IS NULL)
                       ELSE location IS NULL AND failure_cause IS NULL END),
    CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL))
) STRICT, WITHOUT ROWID;

CREATE INDEX savepoint_operations_open ON savepoint_operations (next_attempt_at)
    WHERE status = 'IN_PROGRESS';
CREATE INDEX savepoint_operations_completed ON savepoint_operations (completed_at)
    WHERE status = 'COMPLETED';
