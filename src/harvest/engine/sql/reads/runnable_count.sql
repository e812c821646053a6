-- How many runs are runnable now: pending or waiting, due, and not held.
-- Returns one row: the count.
SELECT count(*) FROM harvest_workflow_executions e WHERE e.status IN ('pending', 'waiting')
  AND e.run_after <= now() AND NOT
\ir ../fragments/has_lease.sql
