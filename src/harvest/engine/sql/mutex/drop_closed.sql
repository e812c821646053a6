-- Drops a lock's queue rows of closed runs.
-- $1: the lock's name
DELETE FROM harvest_mutex_queue q WHERE q.name = $1 AND NOT EXISTS (
  SELECT 1 FROM harvest_workflow_executions e WHERE e.id = q.execution_id
  AND e.status NOT IN
\ir ../fragments/closed_statuses.sql
)
