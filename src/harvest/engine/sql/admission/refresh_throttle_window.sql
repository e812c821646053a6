-- Starts a new throttle window for a workflow when the current one has
-- elapsed, and locks the workflow's throttle row for the rest of the
-- transaction.
-- $1: workflow name, $2: the throttle's period in milliseconds
-- Returns one row, or none when the workflow has no throttle row yet:
-- `used`, the tokens used in the window, and `queued`, whether earlier
-- starts are still deferred.
UPDATE harvest_admission_throttle SET
used = CASE WHEN window_started_at + $2 * interval '1 millisecond' <= now() THEN 0
ELSE used END,
window_started_at = CASE WHEN window_started_at + $2 * interval '1 millisecond' <= now()
THEN now() ELSE window_started_at END
WHERE workflow_name = $1 RETURNING used,
EXISTS (SELECT 1 FROM harvest_deferred_starts d WHERE d.workflow_name = $1) AS queued
