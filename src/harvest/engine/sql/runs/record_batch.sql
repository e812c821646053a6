-- Records a batch of operations, each only while its lease token still holds
-- its run; a position already written is skipped. The execution rows are
-- locked (lock_batch.sql): no takeover or terminate can change a lease before
-- this transaction ends. The batch travels as jsonb, its length as a LIMIT for
-- the planner; payloads travel as text so a JSON null stays a jsonb null
-- rather than becoming SQL NULL.
-- $1: the items (jsonb array of {id, lease, seq, kind, name, payload}),
-- $2: how many items
-- Returns a row (`execution_id`) per operation recorded.
WITH items AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS
  t(id uuid, lease text, seq int, kind text, name text, payload text) LIMIT $2)
INSERT INTO harvest_workflow_events (execution_id, op_seq, kind, name, payload)
SELECT i.id, i.seq, i.kind, i.name, i.payload::jsonb FROM items i
WHERE (SELECT l.lease_owner FROM harvest_run_leases l WHERE l.execution_id = i.id) =
  i.lease
ORDER BY i.id ON CONFLICT (execution_id, op_seq) DO NOTHING RETURNING execution_id::text
