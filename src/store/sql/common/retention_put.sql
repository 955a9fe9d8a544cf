-- $1 cluster, $2 job ('' for the cluster's policy), $3 max count, $4 max age in ms.
INSERT INTO savepoint_retention (cluster_id, job_id, max_count, max_age_ms)
VALUES ($1, $2, $3, $4)
ON CONFLICT (cluster_id, job_id) DO UPDATE
   SET max_count = excluded.max_count, max_age_ms = excluded.max_age_ms,
       updated_at = excluded.updated_at
RETURNING cluster_id, NULLIF(job_id, '') AS job_id, max_count, max_age_ms
