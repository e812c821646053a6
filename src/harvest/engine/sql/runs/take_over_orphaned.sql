-- Takes over up to $4 leases on runs of the workflows $3 held by a previous
-- incarnation of this process (token prefix $5, but not this incarnation's
-- $6), lapsed or not: their owner is gone and nobody else will renew them. A
-- new token ($1/<n>) and expiry, and a crash counted on the execution row
-- (ENG-18). Both locks are taken with SKIP LOCKED, so a takeover never waits:
-- a lease being renewed, written under (history writes hold it FOR KEY
-- SHARE) or ended is skipped.
-- $1: lease token prefix (each run's token is $1/<n>), $2: lease duration in
-- ms, $3: workflow names (text array), $4: the most runs to take over, $5:
-- the process's stable token prefix, $6: this incarnation's token prefix
-- Returns a row per run taken over: `id`, `lease_owner`, `workflow_name`,
-- `workflow_id`, `input`, `attempt`, `max_attempts`, `signal_seq`,
-- `entity_reuse`, `start_trace`, `run_after_us`, `cancel_requested`,
-- `db_now_ms`, `crash_count`.
WITH cand AS (SELECT execution_id FROM harvest_run_leases
  WHERE workflow_name = ANY($3::text[])
  AND starts_with(lease_owner, $5) AND NOT starts_with(lease_owner, $6)
  ORDER BY lease_expires_at LIMIT $4
  FOR UPDATE SKIP LOCKED),
\ir ../fragments/takeover_tail.sql
