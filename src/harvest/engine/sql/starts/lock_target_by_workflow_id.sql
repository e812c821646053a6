-- Locks a signal's target run, the live run of a workflow_id, for the rest of
-- the transaction.
-- $1: workflow name, $2: workflow_id
-- Returns its `id` and `status`, or no row.
SELECT id, status FROM harvest_workflow_executions
WHERE workflow_name = $1 AND workflow_id = $2 AND NOT superseded FOR NO KEY UPDATE
