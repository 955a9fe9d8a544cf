-- $1 base backoff in ms, $2 most retries: the completed savepoints past their job's retention
-- policy (the job's own, else its cluster's): beyond max_count of the newest, or older than
-- max_age_ms, never the newest; with no disposal of them open or done, and the last failed
-- one ($3: its retry count) older than its backoff. Only savepoints of the cluster, with a
-- location, not disposed of.
WITH s AS (
    SELECT o.cluster_id, o.job_id, o.location, o.completed_at,
           row_number() OVER (PARTITION BY o.cluster_id, o.job_id
                              ORDER BY o.completed_at DESC, o.request_id DESC) AS n
      FROM savepoint_operations o
     WHERE o.status = 'COMPLETED' AND o.location IS NOT NULL AND o.disposed_at IS NULL
       AND o.kind IN ('SAVEPOINT', 'CANCEL_WITH_SAVEPOINT', 'STOP_WITH_SAVEPOINT', 'TERMINATE_WITH_SAVEPOINT')
), d AS (
    SELECT cluster_id, savepoint_path, count(*) AS tries,
           sum(CASE WHEN status = 'IN_PROGRESS' OR failure_cause IS NULL THEN 1 ELSE 0 END) AS live,
           max(completed_at) AS last_completed
      FROM savepoint_operations WHERE kind = 'DISPOSAL' GROUP BY cluster_id, savepoint_path
)
SELECT s.cluster_id, s.job_id, s.location, COALESCE(d.tries, 0) AS retries
  FROM s
  JOIN savepoint_retention r
    ON r.cluster_id = s.cluster_id
   AND r.job_id = COALESCE((SELECT j.job_id FROM savepoint_retention j
                             WHERE j.cluster_id = s.cluster_id AND j.job_id = s.job_id), '')
  LEFT JOIN d ON d.cluster_id = s.cluster_id AND d.savepoint_path = s.location
 WHERE s.n > 1
   AND (s.n > r.max_count OR s.completed_at < now() - make_interval(secs => CAST(r.max_age_ms AS double precision) / 1000.0))
   AND COALESCE(d.live, 0) = 0 AND COALESCE(d.tries, 0) < $2
   AND (d.last_completed IS NULL OR d.last_completed < now() - make_interval(secs => CAST($1 * (CAST(1 AS bigint) << CAST(d.tries AS integer)) AS double precision) / 1000.0))
 ORDER BY s.cluster_id, s.job_id, s.completed_at LIMIT 100
