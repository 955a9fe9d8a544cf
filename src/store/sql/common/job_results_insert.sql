-- A new job result: :result is the JSON text, kept as written; :state is 'dirty', or 'clean'
-- for imports of clean files. A present id is a unique violation: Flink's
-- IllegalStateException.
INSERT INTO job_results (cluster_id, job_id, state, result, cleaned_at)
VALUES (:cluster, :id, :state, {json(:result)}, CASE WHEN :state = 'clean' THEN {now} END)
RETURNING cluster_id, job_id, state, result, created_at, cleaned_at
