-- Claims up to $4 due runs of the workflows $3 that nobody holds, oldest
-- first, walking the runnable index: each gets a lease of its own.
-- $1: lease token prefix (each run's token is $1/<n>), $2: lease duration in
-- ms, $3: workflow names (text array), $4: the most runs to claim
-- Returns a row per run claimed: `id`, `lease_owner`, `workflow_name`,
-- `workflow_id`, `input`, `attempt`, `max_attempts`, `signal_seq`,
-- `entity_reuse`, `start_trace`, `run_after_us`, `cancel_requested`,
-- `db_now_ms`, `crash_count`.
WITH c AS (SELECT
\ir ../fragments/claim_cols.sql
  FROM harvest_workflow_executions e
  WHERE e.workflow_name = ANY($3::text[]) AND e.status IN ('pending', 'waiting')
  AND e.run_after <= now() AND NOT
\ir ../fragments/has_lease.sql
  ORDER BY e.run_after LIMIT $4
  FOR NO KEY UPDATE OF e SKIP LOCKED),
\ir ../fragments/claim_tail.sql
