-- Extends the leases the tokens hold. Only the lease rows change. A lease
-- locked by another transaction is skipped: it is being ended (an outcome, a
-- terminate) or taken over, and needs no renewal; history writes lock it FOR
-- KEY SHARE, which a renewal does not wait for. So a renewal never waits and
-- never deadlocks.
-- $1: lease tokens (text array), $2: lease duration in ms
-- Returns a row per lease renewed: `lease_owner`, `cancel_requested`
-- (whether its run was asked to cancel).
WITH l AS (SELECT execution_id FROM harvest_run_leases WHERE lease_owner = ANY($1::text[])
  FOR NO KEY UPDATE SKIP LOCKED)
UPDATE harvest_run_leases r SET lease_expires_at = now() + $2 * interval
  '1 millisecond' FROM l WHERE r.execution_id = l.execution_id
RETURNING r.lease_owner, (SELECT e.cancel_requested_at IS NOT NULL FROM
  harvest_workflow_executions e WHERE e.id = r.execution_id) AS cancel_requested
