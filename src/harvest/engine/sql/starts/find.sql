-- The live (not superseded) run of a workflow_id.
-- $1: workflow name, $2: workflow_id
-- Returns its `id`, or no row.
SELECT id FROM harvest_workflow_executions WHERE workflow_name = $1 AND workflow_id = $2
AND NOT superseded
