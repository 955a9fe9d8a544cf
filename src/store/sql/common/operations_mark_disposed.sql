-- $1 cluster, $2 a disposed savepoint's location: the completed savepoints of the cluster at
-- that location are marked disposed of (in the transaction that completes the disposal).
UPDATE savepoint_operations SET disposed_at = {now}
 WHERE cluster_id = $1 AND location = $2 AND status = 'COMPLETED' AND disposed_at IS NULL
