-- Flink's JobResultStore and ApplicationResultStore.
-- Ids are stored as Flink prints them (32 lowercase hex) so that sqlite3 shows them as they
-- appear in Flink's logs and REST API; times are RFC 3339 UTC text. The schema, not the
-- service, enforces every invariant (STRICT tables, CHECKs, primary keys).

CREATE TABLE job_results (
    cluster_id  TEXT NOT NULL CHECK (length(cluster_id) BETWEEN 1 AND 128
                                     AND cluster_id NOT GLOB '*[^A-Za-z0-9._-]*'),
    job_id      TEXT NOT NULL CHECK (length(job_id) = 32 AND job_id NOT GLOB '*[^0-9a-f]*'),
    state       TEXT NOT NULL CHECK (state IN ('dirty', 'clean')),
    result      TEXT NOT NULL CHECK (json_valid(result) AND json_type(result) = 'object'
                                     AND lower(json_extract(result, '$.id')) = job_id),
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    cleaned_at  TEXT,
    PRIMARY KEY (cluster_id, job_id),
    CHECK ((state = 'clean') = (cleaned_at IS NOT NULL))
) STRICT, WITHOUT ROWID;

CREATE INDEX job_results_dirty ON job_results (cluster_id, job_id) WHERE state = 'dirty';

CREATE TABLE application_results (
    cluster_id      TEXT NOT NULL CHECK (length(cluster_id) BETWEEN 1 AND 128
                                         AND cluster_id NOT GLOB '*[^A-Za-z0-9._-]*'),
    application_id  TEXT NOT NULL CHECK (length(application_id) = 32
                                         AND application_id NOT GLOB '*[^0-9a-f]*'),
    state           TEXT NOT NULL CHECK (state IN ('dirty', 'clean')),
    result          TEXT NOT NULL CHECK (json_valid(result) AND json_type(result) = 'object'
                                         AND lower(json_extract(result, '$."application-id"')) = application_id),
    created_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    cleaned_at      TEXT,
    PRIMARY KEY (cluster_id, application_id),
    CHECK ((state = 'clean') = (cleaned_at IS NOT NULL))
) STRICT, WITHOUT ROWID;

CREATE INDEX application_results_dirty ON application_results (cluster_id, application_id)
    WHERE state = 'dirty';
