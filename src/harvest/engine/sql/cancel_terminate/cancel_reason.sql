-- The reason a run's cancel was requested with.
-- $1: execution id
-- Returns one row if the run exists: `reason` ('' if none).
SELECT COALESCE(cancel_reason, '') AS reason FROM harvest_workflow_executions
WHERE id = $1::uuid
