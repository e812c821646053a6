-- A fresh claim of the runs CTE `c` locked, closing its WITH: each gets a
-- lease row with a token of its own ($1/<n>) expiring in $2 ms. The execution
-- row is only locked, not written: the lease row is the claim (migration
-- 0016). Returns what claim_select.sql lists, and `crash_count`.
n AS (SELECT c.*, row_number() OVER () AS n FROM c),
l AS (INSERT INTO harvest_run_leases (execution_id, workflow_name, concurrency_key,
  lease_owner, lease_expires_at) SELECT id, workflow_name, concurrency_key, $1 || '/' || n,
  now() + $2 * interval '1 millisecond' FROM n ON CONFLICT DO NOTHING
  RETURNING execution_id, lease_owner)
\ir claim_select.sql
  n.crash_count AS crash_count
FROM l JOIN n ON n.id = l.execution_id
