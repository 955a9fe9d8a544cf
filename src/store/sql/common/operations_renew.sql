-- $1 cluster, $2 job, $3 request, $4 lease in ms, $5 Flink accepted the trigger, $6 the last
-- error, $7 the holder's attempt, $8 the trigger id Flink gave a disposal (its latest, when it
-- was asked again): only while that attempt still holds the open operation.
UPDATE savepoint_operations
   SET lease_expires_at = {now_plus_ms($4)},
       triggered_at = CASE WHEN $5 THEN COALESCE(triggered_at, {now}) ELSE triggered_at END,
       last_error = $6, flink_trigger_id = COALESCE($8, flink_trigger_id)
 WHERE cluster_id = $1 AND job_id = $2 AND request_id = $3 AND attempt = $7
   AND status = 'IN_PROGRESS' AND lease_owner IS NOT NULL
