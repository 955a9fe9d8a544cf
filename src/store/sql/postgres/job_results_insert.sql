-- $1 cluster, $2 job_id, $3 result (JSON text, kept as written), $4 state ('dirty', or 'clean' for imports of clean files).
-- A present id is a unique violation: Flink's IllegalStateException.
INSERT INTO job_results (cluster_id, job_id, state, result, cleaned_at)
VALUES ($1, $2, $4, CAST($3 AS json), CASE WHEN $4 = 'clean' THEN now() END)
RETURNING cluster_id, job_id, state, result, created_at, cleaned_at
