-- Ends a run's attempt for a retry, if its lease still holds it (ending the
-- lease): the run is pending again after a backoff, with the next attempt,
-- and an AttemptFailed event records the error.
-- $1: execution id, $2: lease token, $3: error, $4: backoff in ms,
-- $5: the attempt that failed
-- Returns one row (`execution_id`) when retried, none otherwise.
WITH
\ir ../fragments/held_ctes.sql
, retry AS (UPDATE harvest_workflow_executions SET status = 'pending',
  attempt = attempt + 1, error = $3, crash_count = 0,
  run_after = now() + $4 * interval '1 millisecond', updated_at = now() FROM held
  WHERE id = held.held_id AND status NOT IN
\ir ../fragments/closed_statuses.sql
  RETURNING id)
INSERT INTO harvest_workflow_events (execution_id, kind, payload)
SELECT id, 'AttemptFailed', jsonb_build_object('attempt', $5::int,
  'error', $3::text) FROM retry RETURNING execution_id
