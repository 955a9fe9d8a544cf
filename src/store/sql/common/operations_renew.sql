-- The holder's lease is :lease_ms more from now; :triggered: Flink accepted the trigger;
-- :flink_trigger_id the trigger id Flink gave a disposal (its latest, when it was asked
-- again): only while :attempt still holds the open operation.
UPDATE savepoint_operations
   SET lease_expires_at = {now_plus_ms(:lease_ms)},
       triggered_at = CASE WHEN :triggered THEN COALESCE(triggered_at, {now}) ELSE triggered_at END,
       last_error = :last_error, flink_trigger_id = COALESCE(:flink_trigger_id, flink_trigger_id)
 WHERE cluster_id = :cluster AND job_id = :job AND request_id = :request AND attempt = :attempt
   AND status = 'IN_PROGRESS' AND lease_owner IS NOT NULL
