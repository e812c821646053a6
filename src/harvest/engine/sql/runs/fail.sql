-- Fails a run into the engine's dead letters, if its lease still holds it
-- (ending the lease): the run fails, a WorkflowFailed event records why, and
-- the run lands in the engine's dead letters (ENG-14).
-- $1: execution id, $2: lease token, $3: error, $4: reason ('failed',
-- 'crashed_worker')
-- Returns one row (`execution_id`) when failed, none otherwise.
WITH
\ir ../fragments/held_ctes.sql
, failed AS (UPDATE harvest_workflow_executions SET status = 'failed',
  error = $3, completed_at = now(), updated_at = now() FROM held
  WHERE id = held.held_id AND status NOT IN
\ir ../fragments/closed_statuses.sql
  RETURNING id, workflow_name, workflow_id, attempt),
event AS (INSERT INTO harvest_workflow_events (execution_id, kind, payload)
  SELECT id, 'WorkflowFailed', jsonb_build_object('error', $3::text, 'reason',
  $4::text) FROM failed)
INSERT INTO harvest_engine_dead_letters
  (execution_id, workflow_name, workflow_id, error, attempts, reason)
SELECT id, workflow_name, workflow_id, $3, attempt, $4 FROM failed
ON CONFLICT (execution_id) DO UPDATE SET error = EXCLUDED.error,
  attempts = EXCLUDED.attempts, reason = EXCLUDED.reason, failed_at = now(),
  replayed_at = NULL
RETURNING execution_id
