-- Ends the leases the items' tokens still hold and completes those runs.
-- The leases are reached by primary key ($3, the items' ids): no plan reads
-- the whole lease table. Renewals skip a lease being deleted, so no order is
-- needed against them. The batch travels as jsonb, its length as a LIMIT for
-- the planner; outputs travel as text so a JSON null stays a jsonb null.
-- $1: the items (jsonb array of {id, lease, output}), $2: how many items,
-- $3: the items' execution ids (uuid array)
-- Returns a row (`id`) per run completed.
WITH items AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS
  t(id uuid, lease text, output text) LIMIT $2),
held AS (DELETE FROM harvest_run_leases l WHERE l.execution_id = ANY($3::uuid[])
  AND (l.execution_id, l.lease_owner) IN (SELECT id, lease FROM items)
  RETURNING l.execution_id),
done AS (UPDATE harvest_workflow_executions e SET status = 'completed',
  output = i.output::jsonb, completed_at = now(), updated_at = now() FROM items i, held h
  WHERE e.id = i.id AND h.execution_id = i.id AND e.status NOT IN
\ir ../fragments/closed_statuses.sql
  RETURNING e.id)
SELECT id::text FROM done
