-- Views made for people inspecting the store with sqlite3. Ages are in seconds.

-- Dirty entries of both stores with their age: cleanups that have not finished.
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

-- Per cluster: how many dirty entries, and how old the oldest is (what to alert on).
CREATE VIEW dirty_results_per_cluster AS
    SELECT kind, cluster_id, count(*) AS dirty, min(created_at) AS oldest_created_at,
           max(age_seconds) AS oldest_age_seconds
      FROM dirty_results GROUP BY kind, cluster_id;

-- Job results with the fields of Flink's JobResult as columns.
CREATE VIEW job_results_readable AS
    SELECT cluster_id, job_id, json_extract(result, '$.name') AS name,
           json_extract(result, '$."application-status"') AS status,
           json_extract(result, '$."net-runtime"') AS net_runtime_ms,
           json_extract(result, '$."failure-cause".class') AS failure_class,
           state, created_at, cleaned_at
      FROM job_results;

-- Savepoint history per job: what was taken, where, or why it failed, and how long it took.
CREATE VIEW savepoint_history AS
    SELECT cluster_id, job_id, request_id, kind, status, target_directory, format_type,
           location, json_extract(failure_cause, '$.class') AS failure_class,
           created_at, completed_at,
           CAST(round((julianday(completed_at) - julianday(created_at)) * 86400000) AS INTEGER) AS duration_ms,
           attempt, lease_owner, last_error
      FROM savepoint_operations;
