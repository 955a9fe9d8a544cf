-- The completed savepoints of the cluster at a disposed savepoint's :location are marked
-- disposed of (in the transaction that completes the disposal).
UPDATE savepoint_operations SET disposed_at = {now}
 WHERE cluster_id = :cluster AND location = :location AND status = 'COMPLETED' AND disposed_at IS NULL
