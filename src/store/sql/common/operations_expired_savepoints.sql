-- The completed savepoints past their job's retention policy (the job's own, else its
-- cluster's): beyond max_count of the newest, or older than max_age_ms, never the newest (views
-- savepoint_ages and savepoint_disposals, migration V7); with no disposal of them open or done,
-- fewer than :max_retries failed ones, the last one older than its backoff (fragment
-- backoff_ms). Only completed savepoints of the cluster, with a location, and never a location
-- that a latest savepoint of the cluster also names (two completions reporting one path). A max
-- age is taken as at most 100 years (the API's bound; a larger one written by hand would put the
-- cut-off outside the timestamps the database holds).
SELECT s.cluster_id, s.job_id, s.location, COALESCE(d.tries, 0) AS retries
  FROM savepoint_ages s JOIN savepoint_retention r ON r.cluster_id = s.cluster_id
   AND r.job_id = COALESCE((SELECT j.job_id FROM savepoint_retention j WHERE j.cluster_id = s.cluster_id AND j.job_id = s.job_id), '')
  LEFT JOIN savepoint_disposals d ON d.cluster_id = s.cluster_id AND d.savepoint_path = s.location
 WHERE s.n > 1 AND (s.n > r.max_count OR s.completed_at < {now_minus_ms({least(r.max_age_ms, 3155760000000)})})
   AND NOT EXISTS (SELECT 1 FROM savepoint_ages k WHERE k.cluster_id = s.cluster_id AND k.n = 1 AND k.location = s.location)
   AND COALESCE(d.live, 0) = 0 AND COALESCE(d.tries, 0) < :max_retries
   AND (d.last_completed IS NULL OR d.last_completed < {now_minus_ms({backoff_ms(d.tries)})})
 ORDER BY s.cluster_id, s.job_id, s.completed_at LIMIT 100
