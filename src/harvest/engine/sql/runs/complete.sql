-- Completes a run, if its lease still holds it (ending the lease). The row is
-- the completion: history shows WorkflowCompleted from its status, output and
-- completed_at (no event row, migration engine_0016).
-- $1: execution id, $2: lease token, $3: output (json text)
-- Returns one row (`id`) when completed, none otherwise.
WITH
\ir ../fragments/held_ctes.sql
, done AS (UPDATE harvest_workflow_executions SET status = 'completed',
  output = $3::jsonb, completed_at = now(), updated_at = now() FROM held
  WHERE id = held.held_id AND status NOT IN
\ir ../fragments/closed_statuses.sql
  RETURNING id)
SELECT id FROM done
