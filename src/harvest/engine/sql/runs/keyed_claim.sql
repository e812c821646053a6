-- ENG-19: claims up to $4 due runs of the keyed workflow $3, at most $5 held
-- per concurrency key (their leases count), oldest first: each gets a lease
-- of its own. Claims of one keyed workflow serialise on keyed_lock.sql, taken
-- by the statement before in the same transaction, so this statement's
-- snapshot sees every lease a concurrent claim inserted.
-- $1: lease token prefix (each run's token is $1/<n>), $2: lease duration in
-- ms, $3: the workflow's name, $4: the most runs to claim, $5: the most runs
-- held per concurrency key
-- Returns a row per run claimed: `id`, `lease_owner`, `workflow_name`,
-- `workflow_id`, `input`, `attempt`, `max_attempts`, `signal_seq`,
-- `entity_reuse`, `start_trace`, `run_after_us`, `cancel_requested`,
-- `db_now_ms`, `crash_count`.
WITH busy AS (SELECT concurrency_key, count(*) AS n FROM harvest_run_leases
  WHERE workflow_name = $3 AND concurrency_key IS NOT NULL GROUP BY concurrency_key),
cand AS (SELECT e.id, e.concurrency_key, e.run_after, row_number() OVER (PARTITION BY
  e.concurrency_key ORDER BY e.run_after, e.id) AS rn FROM harvest_workflow_executions e
  WHERE e.workflow_name = $3 AND e.status IN ('pending', 'waiting') AND e.run_after <= now()
  AND NOT
\ir ../fragments/has_lease.sql
  ),
pick AS (SELECT cand.id FROM cand LEFT JOIN busy b ON b.concurrency_key =
  cand.concurrency_key WHERE cand.concurrency_key IS NULL OR cand.rn + COALESCE(b.n, 0) <= $5
  ORDER BY cand.run_after LIMIT $4),
c AS (SELECT
\ir ../fragments/claim_cols.sql
  FROM harvest_workflow_executions e WHERE e.id IN (SELECT id FROM pick)
  AND e.status IN ('pending', 'waiting') FOR NO KEY UPDATE OF e SKIP LOCKED),
\ir ../fragments/claim_tail.sql
