-- A takeover of the lease rows the CTE `cand` locked (their `execution_id`),
-- closing its WITH: the open runs among them are locked (SKIP LOCKED), their
-- leases get a new token ($1/<n>) and expiry ($2 ms), and a crash is counted
-- on the execution row (ENG-18). Returns what claim_select.sql lists, and
-- `crash_count`.
c AS (SELECT
\ir claim_cols.sql
  FROM harvest_workflow_executions e WHERE e.id IN (SELECT execution_id FROM cand)
  AND e.status NOT IN
\ir closed_statuses.sql
  FOR NO KEY UPDATE OF e SKIP LOCKED),
n AS (SELECT c.*, row_number() OVER () AS n FROM c),
l AS (UPDATE harvest_run_leases r SET lease_owner = $1 || '/' || n.n,
  lease_expires_at = now() + $2 * interval '1 millisecond', claimed_at = now()
  FROM n WHERE r.execution_id = n.id RETURNING r.execution_id, r.lease_owner),
-- crash_count: takeovers since the run last recorded a durable operation. A
-- holder that recorded one since the previous takeover (crash_mark: the
-- newest op_seq then) starts the count again at this one; otherwise it goes
-- up by one (ENG-18).
p AS (SELECT l.execution_id, (SELECT max(ev.op_seq) FROM harvest_workflow_events ev
  WHERE ev.execution_id = l.execution_id) AS mark FROM l),
k AS (UPDATE harvest_workflow_executions x SET crash_count = CASE
  WHEN p.mark > x.crash_mark THEN 1 ELSE x.crash_count + 1 END, crash_mark = p.mark,
  updated_at = now() FROM p WHERE x.id = p.execution_id RETURNING x.id, x.crash_count)
\ir claim_select.sql
  k.crash_count AS crash_count
FROM l JOIN n ON n.id = l.execution_id JOIN k ON k.id = n.id
