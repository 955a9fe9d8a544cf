-- Views made for people inspecting the store with psql.

-- Dirty entries of both stores with their age: cleanups that have not finished.
CREATE VIEW dirty_results AS
    SELECT 'job' AS kind, cluster_id, job_id AS id, result ->> 'name' AS name,
           created_at, now() - created_at AS age
      FROM job_results WHERE state = 'dirty'
    UNION ALL
    SELECT 'application', cluster_id, application_id, result ->> 'application-name',
           created_at, now() - created_at
      FROM application_results WHERE state = 'dirty';

-- Per cluster: how many dirty entries, and how old the oldest is (what to alert on).
CREATE VIEW dirty_results_per_cluster AS
    SELECT kind, cluster_id, count(*) AS dirty, min(created_at) AS oldest_created_at,
           max(age) AS oldest_age
      FROM dirty_results GROUP BY kind, cluster_id;

-- Job results with the fields of Flink's JobResult as columns.
CREATE VIEW job_results_readable AS
    SELECT cluster_id, job_id, result ->> 'name' AS name,
           result ->> 'application-status' AS status,
           (result ->> 'net-runtime')::bigint AS net_runtime_ms,
           result #>> '{failure-cause,class}' AS failure_class,
           state, created_at, cleaned_at
      FROM job_results;

-- Savepoint history per job: what was taken, where, or why it failed, and how long it took.
CREATE VIEW savepoint_history AS
    SELECT cluster_id, job_id, request_id, kind, status, target_directory, format_type,
           location, failure_cause ->> 'class' AS failure_class,
           created_at, completed_at, completed_at - created_at AS duration,
           attempt, lease_owner, last_error
      FROM savepoint_operations;
