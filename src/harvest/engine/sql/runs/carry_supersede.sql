-- Runs in the completion's transaction, after complete.sql: marks an entity
-- run (entity_reuse) that this transaction completed and that left signals
-- unread as superseded by a next run (carry_next_run.sql).
-- $1: execution id
-- Returns one row (`id`) when superseded, none otherwise.
UPDATE harvest_workflow_executions e SET superseded = true
WHERE e.id = $1 AND e.status = 'completed' AND e.completed_at = now() AND e.entity_reuse
AND NOT e.superseded AND EXISTS (
\ir ../fragments/carry_unread.sql
) RETURNING e.id
