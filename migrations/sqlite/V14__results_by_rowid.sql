-- The result tables become rowid tables: the rows are stored in the order they were created,
-- and the primary key (cluster_id, job_id) is an index beside them. WITHOUT ROWID stored
-- each row in the leaf of its random job id, so every write of a group commit's batch wrote
-- a 4 KB page of its own to the WAL: about 78 pages for a batch of 16 creates and 16
-- mark-cleans. Now the creates share the table's last leaves (a mark-clean usually follows
-- its create closely), and only the key's small entries land at random: about 48 pages for
-- the same batch (scripts/bench/sqlite-pages.py, BENCHMARKS.md). Columns, keys, CHECKs,
-- indexes and views are unchanged.
--
-- SQLite changes a table's kind only by copying it: the views that read the two tables are
-- dropped and made again around the copy.

DROP VIEW job_names;
DROP VIEW job_results_readable;
DROP VIEW dirty_results_per_cluster;
DROP VIEW dirty_results;

CREATE TABLE job_results_by_rowid (
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
) STRICT;
INSERT INTO job_results_by_rowid (cluster_id, job_id, state, result, created_at, cleaned_at)
    SELECT cluster_id, job_id, state, result, created_at, cleaned_at FROM job_results
     ORDER BY created_at, cluster_id, job_id;
DROP TABLE job_results;
ALTER TABLE job_results_by_rowid RENAME TO job_results;
CREATE INDEX job_results_dirty ON job_results (cluster_id, job_id) WHERE state = 'dirty';
CREATE INDEX job_results_cleaned ON job_results (cleaned_at) WHERE state = 'clean';

CREATE TABLE application_results_by_rowid (
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
) STRICT;
INSERT INTO application_results_by_rowid
        (cluster_id, application_id, state, result, created_at, cleaned_at)
    SELECT cluster_id, application_id, state, result, created_at, cleaned_at
      FROM application_results ORDER BY created_at, cluster_id, application_id;
DROP TABLE application_results;
ALTER TABLE application_results_by_rowid RENAME TO application_results;
CREATE INDEX application_results_dirty ON application_results (cluster_id, application_id)
    WHERE state = 'dirty';
CREATE INDEX application_results_cleaned ON application_results (cleaned_at)
    WHERE state = 'clean';

-- The views, as V4 and V7 made them.
CREATE VIEW dirty_results AS
    SELECT 'job' AS kind, cluster_id, job_id AS id, json_extract(result, '$.name') AS name,
           created_at,
           CAST(round((julianday('now') - julianday(created_at)) * 86400) AS INTEGER) AS age_seconds
      FROM job_results WHERE state = 'dirty'
    UNION ALL
    SELECT 'application', cluster_id, application_id,
           json_extract(result, '$."application-name"'), created_at,
           CAST(round((julianday('now') - julianday(created_at)) * 86400) AS INTEGER)
      FROM application_results WHERE state = 'dirty';

CREATE VIEW dirty_results_per_cluster AS
    SELECT kind, cluster_id, count(*) AS dirty, min(created_at) AS oldest_created_at,
           max(age_seconds) AS oldest_age_seconds
      FROM dirty_results GROUP BY kind, cluster_id;

CREATE VIEW job_results_readable AS
    SELECT cluster_id, job_id, json_extract(result, '$.name') AS name,
           json_extract(result, '$."application-status"') AS status,
           json_extract(result, '$."net-runtime"') AS net_runtime_ms,
           json_extract(result, '$."failure-cause".class') AS failure_class,
           state, created_at, cleaned_at
      FROM job_results;

CREATE VIEW job_names AS
    SELECT cluster_id, job_id, name FROM flink_jobs
    UNION SELECT cluster_id, job_id, job_name FROM savepoint_operations WHERE job_name IS NOT NULL
    UNION SELECT cluster_id, job_id, json_extract(result, '$.name') FROM job_results WHERE json_extract(result, '$.name') IS NOT NULL;
