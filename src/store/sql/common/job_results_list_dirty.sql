-- A page of a cluster's dirty job results: those after :after (the last id of the previous
-- page, '' before the first), at most :limit.
-- SQLite's planner (without ANALYZE statistics) prefers the covering primary key and then
-- walks every clean entry of the cluster (BENCHMARKS.md): it is told to use the partial index.
SELECT cluster_id, job_id, state, result, created_at, cleaned_at
  FROM job_results{indexed_by(job_results_dirty)}
 WHERE cluster_id = :cluster AND state = 'dirty' AND job_id > :after
 ORDER BY job_id LIMIT :limit
