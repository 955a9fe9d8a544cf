-- $1 cluster, $2 job, $3 name, $4 state: a job as Flink's job overview showed it.
INSERT INTO flink_jobs (cluster_id, job_id, name, state, seen_at)
VALUES ($1, $2, $3, $4, {now})
ON CONFLICT (cluster_id, job_id) DO UPDATE
   SET name = excluded.name, state = excluded.state, seen_at = excluded.seen_at
