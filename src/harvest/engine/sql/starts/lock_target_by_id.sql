-- Locks a signal's target run, named by id, for the rest of the transaction.
-- $1: execution id
-- Returns its `id` and `status`, or no row.
SELECT id, status FROM harvest_workflow_executions WHERE id = $1::uuid
FOR NO KEY UPDATE
