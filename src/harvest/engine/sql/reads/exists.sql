-- Whether an execution exists.
-- $1: execution id
-- Returns one row when it does, none otherwise.
SELECT 1 FROM harvest_workflow_executions WHERE id = $1::uuid
