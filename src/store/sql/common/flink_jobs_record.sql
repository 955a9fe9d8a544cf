-- A job as Flink's job overview showed it: its :name and :state.
INSERT INTO flink_jobs (cluster_id, job_id, name, state, seen_at)
VALUES (:cluster, :job, :name, :state, {now})
ON CONFLICT (cluster_id, job_id) DO UPDATE
   SET name = excluded.name, state = excluded.state, seen_at = excluded.seen_at
