-- Flink's JobResultStore and ApplicationResultStore.
-- Ids are stored as Flink prints them (32 lowercase hex) so that psql shows them as they
-- appear in Flink's logs and REST API; the schema, not the service, enforces every invariant.

CREATE TABLE job_results (
    cluster_id  text        NOT NULL CHECK (cluster_id ~ '^[A-Za-z0-9._-]{1,128}$'),
    job_id      text        NOT NULL CHECK (job_id ~ '^[0-9a-f]{32}$'),
    state       text        NOT NULL CHECK (state IN ('dirty', 'clean')),
    result      jsonb       NOT NULL CHECK (jsonb_typeof(result) = 'object'
                                            AND lower(result ->> 'id') = job_id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    cleaned_at  timestamptz,
    PRIMARY KEY (cluster_id, job_id),
    CHECK ((state = 'clean') = (cleaned_at IS NOT NULL))
);

-- "The dirty entries of a cluster" is what every JobManager asks at start: keep it an index
-- range scan however many clean entries accumulate.
CREATE INDEX job_results_dirty ON job_results (cluster_id, job_id) WHERE state = 'dirty';

CREATE TABLE application_results (
    cluster_id      text        NOT NULL CHECK (cluster_id ~ '^[A-Za-z0-9._-]{1,128}$'),
    application_id  text        NOT NULL CHECK (application_id ~ '^[0-9a-f]{32}$'),
    state           text        NOT NULL CHECK (state IN ('dirty', 'clean')),
    result          jsonb       NOT NULL CHECK (jsonb_typeof(result) = 'object'
                                                AND lower(result ->> 'application-id') = application_id),
    created_at      timestamptz NOT NULL DEFAULT now(),
    cleaned_at      timestamptz,
    PRIMARY KEY (cluster_id, application_id),
    CHECK ((state = 'clean') = (cleaned_at IS NOT NULL))
);

CREATE INDEX application_results_dirty ON application_results (cluster_id, application_id)
    WHERE state = 'dirty';
