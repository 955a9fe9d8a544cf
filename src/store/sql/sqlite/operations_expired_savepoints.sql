-- $1 base backoff in ms, $2 most retries: the completed savepoints past their job's retention
-- policy (the job's own, else its cluster's): beyond max_count of the newest, or older than
-- max_age_ms, never the newest (views savepoint_ages and savepoint_disposals, migration V7);
-- with no disposal of them open or done, fewer than $2 failed ones, the last one older than
-- its backoff ($1 * 2^tries). Only completed savepoints of the cluster, with a location, and
-- never a location that a latest savepoint of the cluster also names (two completions
-- reporting one path). A max age is taken as at most 100 years (the API's bound; a larger
-- one written by hand would put the cut-off outside the timestamps the database holds).
SELECT s.cluster_id, s.job_id, s.location, COALESCE(d.tries, 0) AS retries
  FROM savepoint_ages s JOIN savepoint_retention r ON r.cluster_id = s.cluster_id
   AND r.job_id = COALESCE((SELECT j.job_id FROM savepoint_retention j WHERE j.cluster_id = s.cluster_id AND j.job_id = s.job_id), '')
  LEFT JOIN savepoint_disposals d ON d.cluster_id = s.cluster_id AND d.savepoint_path = s.location
 WHERE s.n > 1 AND (s.n > r.max_count OR s.completed_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || (CAST(MIN(r.max_age_ms, 3155760000000) AS REAL) / 1000.0) || ' seconds'))
   AND NOT EXISTS (SELECT 1 FROM savepoint_ages k WHERE k.cluster_id = s.cluster_id AND k.n = 1 AND k.location = s.location)
   AND COALESCE(d.live, 0) = 0 AND COALESCE(d.tries, 0) < $2
   AND (d.last_completed IS NULL OR d.last_completed < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || (CAST($1 * (1 << d.tries) AS REAL) / 1000.0) || ' seconds'))
 ORDER BY s.cluster_id, s.job_id, s.completed_at LIMIT 100
