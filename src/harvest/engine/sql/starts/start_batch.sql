-- Creates the executions of a batch of starts whose key and workflow_id no
-- run holds: one row each, carrying its key's claim and the fingerprint of
-- the record the key came from (no event: history shows WorkflowStarted from
-- the row). A key still claimed by a v1 claim row (harvest_start_claims,
-- migration engine_0013) is held too. Inserts are ordered (by workflow_id then batch
-- position, keyless-id items by key) so that concurrent batches take index
-- locks in one order, and the earliest item of a workflow_id is the one that
-- creates it.
-- $1: the batch, a json array of items (the columns below), $2: the key's
-- window in seconds, $3: the number of items
-- Returns the ids created (`id`).
WITH items AS (SELECT * FROM json_to_recordset($1::json) AS t(ord int, wf text, wid text,
  key text, id uuid, input json, source text, ref text, max_attempts int, trace jsonb,
  ckey text, fp bigint) LIMIT $3),
inserted AS (INSERT INTO harvest_workflow_executions
  (id, workflow_name, workflow_id, status, input, start_source, start_source_ref,
  max_attempts, start_trace, concurrency_key, idempotency_key, key_expires_at,
  key_fingerprint)
  SELECT id, wf, wid, 'pending', input, source, ref, max_attempts, trace, ckey, key,
  CASE WHEN key IS NOT NULL THEN now() + $2 * interval '1 second' END,
  CASE WHEN key IS NOT NULL THEN fp END FROM items i
  WHERE i.key IS NULL OR (SELECT true FROM harvest_start_claims c
   WHERE c.workflow_name = i.wf AND c.idempotency_key = i.key AND c.expires_at > now())
   IS NULL
  ORDER BY wf, wid, CASE WHEN wid IS NULL THEN key END, ord
  ON CONFLICT DO NOTHING RETURNING id)
SELECT id::text AS id FROM inserted
