-- Savepoint operations (Flink's asynchronous trigger/stop/status API), kept durably, and the
-- per-cluster configuration the executor needs.

CREATE TABLE clusters (
    cluster_id          text        PRIMARY KEY CHECK (cluster_id ~ '^[A-Za-z0-9._-]{1,128}$'),
    flink_rest_url      text        CHECK (flink_rest_url ~ '^https?://'),
    savepoint_directory text        CHECK (savepoint_directory <> ''),
    -- 'flags' rows follow the serve flags of the default cluster; 'api' rows were PUT and win.
    configured_by       text        NOT NULL CHECK (configured_by IN ('flags', 'api')),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE savepoint_operations (
    cluster_id       text        NOT NULL CHECK (cluster_id ~ '^[A-Za-z0-9._-]{1,128}$'),
    job_id           text        NOT NULL CHECK (job_id ~ '^[0-9a-f]{32}$'),
    -- Flink's triggerId / request-id; also the triggerId the executor sends to Flink.
    request_id       text        NOT NULL CHECK (request_id ~ '^[0-9a-f]{32}$'),
    kind             text        NOT NULL CHECK (kind IN ('SAVEPOINT', 'CANCEL_WITH_SAVEPOINT',
                                                          'STOP_WITH_SAVEPOINT', 'TERMINATE_WITH_SAVEPOINT')),
    status           text        NOT NULL DEFAULT 'IN_PROGRESS'
                                 CHECK (status IN ('IN_PROGRESS', 'COMPLETED')),
    target_directory text,
    format_type      text        NOT NULL DEFAULT 'CANONICAL' CHECK (format_type IN ('CANONICAL', 'NATIVE')),
    location         text,
    failure_cause    jsonb       CHECK (jsonb_typeof(failure_cause) = 'object'),
    created_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    -- The executor: who holds the operation, until when, and the attempt number that fences
    -- every write of a holder whose lease was taken over.
    attempt          integer     NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    lease_owner      text,
    lease_expires_at timestamptz,
    triggered_at     timestamptz,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_error       text,
    PRIMARY KEY (cluster_id, job_id, request_id),
    CHECK ((status = 'COMPLETED') = (completed_at IS NOT NULL)),
    -- A completed operation has exactly one of location / failure-cause; an open one neither.
    CHECK (CASE status WHEN 'COMPLETED' THEN (location IS NULL) <> (failure_cause IS NULL)
                       ELSE location IS NULL AND failure_cause IS NULL END),
    CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL))
);

-- Open operations, for the executor's claim and the timeout sweep.
CREATE INDEX savepoint_operations_open ON savepoint_operations (next_attempt_at)
    WHERE status = 'IN_PROGRESS';
-- Completed operations by age, for retention.
CREATE INDEX savepoint_operations_completed ON savepoint_operations (completed_at)
    WHERE status = 'COMPLETED';
