-- Opens a fenced outcome ($1 = execution id, $2 = lease token) as two CTEs:
-- `w` locks the execution row, then `held` deletes the lease if the token
-- still holds it (one row, `held_id`, or none). The outcome's UPDATE of the
-- execution row joins `held`. Every writer that takes both locks takes the
-- execution row's first, so none waits for the other in reverse.
w AS (SELECT id FROM harvest_workflow_executions WHERE id = $1::uuid FOR NO KEY UPDATE),
held AS (DELETE FROM harvest_run_leases WHERE execution_id = (SELECT id FROM w)
  AND lease_owner = $2 RETURNING execution_id AS held_id)
