-- One run, locked for the rest of the statement ($1 = execution id), as the
-- CTE `t`: `id`, `workflow_name`, `status` (stored), `shown_status` and
-- `cancel_requested_at`.
t AS (SELECT id, workflow_name, status,
\ir shown_status.sql
  AS shown_status, cancel_requested_at FROM harvest_workflow_executions e
  WHERE id = $1::uuid FOR NO KEY UPDATE)
