-- Requests a cooperative cancel of one open run, once, and records it. A
-- pending or waiting run becomes runnable now: it replays to its next
-- durable operation and sees the request there.
-- $1: execution id, $2: reason, $3: who asked
-- Returns one row if the run exists: `workflow_name`, `status` (as shown,
-- before the request), `was_requested` (a cancel was already requested) and
-- `changed` (this request took).
WITH
\ir ../fragments/target_locked.sql
,
upd AS (UPDATE harvest_workflow_executions e SET cancel_requested_at = now(),
  cancel_reason = $2, updated_at = now(),
  run_after = CASE WHEN e.status IN ('pending', 'waiting') THEN LEAST(e.run_after, now())
  ELSE e.run_after END
  FROM t WHERE e.id = t.id AND t.cancel_requested_at IS NULL AND t.status NOT IN
\ir ../fragments/closed_statuses.sql
  RETURNING e.id),
ev AS (INSERT INTO harvest_workflow_events (execution_id, kind, payload)
  SELECT id, 'CancelRequested', jsonb_build_object('reason', $2::text,
  'requested_by', $3::text) FROM upd)
SELECT t.workflow_name, t.shown_status AS status,
  t.cancel_requested_at IS NOT NULL AS was_requested,
  EXISTS (SELECT 1 FROM upd) AS changed FROM t
