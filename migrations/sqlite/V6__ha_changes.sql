-- A job's HA data (its checkpoints) is found by job when the job is cleaned up. (On SQLite
-- one jobstore process makes every write, so it wakes its long polls of the leader
-- information itself; PostgreSQL's V6 adds a NOTIFY trigger for other replicas.)

CREATE INDEX ha_state_handles_job ON ha_state_handles (cluster_id, job_id);
