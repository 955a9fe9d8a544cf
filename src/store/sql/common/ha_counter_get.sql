-- The next id the job's counter hands out (at least the timeline's floor, as
-- ha_counter_get_and_increment hands it out).
SELECT CASE WHEN value > {checkpoint_id_floor} THEN value ELSE {checkpoint_id_floor} + 1 END AS value
  FROM ha_counters WHERE cluster_id = :cluster AND job_id = :job
