-- The lock names with a queue row of a closed run (a run that closed while
-- holding or waiting for the lock).
SELECT DISTINCT q.name FROM harvest_mutex_queue q WHERE NOT EXISTS (
  SELECT 1 FROM harvest_workflow_executions e WHERE e.id = q.execution_id
  AND e.status NOT IN
\ir ../fragments/closed_statuses.sql
)
