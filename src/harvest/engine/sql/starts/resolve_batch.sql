-- Runs after start_batch in the same transaction, with a fresh snapshot:
-- every item's resolved execution — its own if it created it, else the run
-- holding its key, else the run its workflow_id names — and whether its key
-- is held by a run whose window has lapsed (`lapsed`: the key is released and
-- the item tried again). `collided`: the item did not create its run, and the
-- live run holding its key was recorded from a record with another
-- fingerprint. Only a key hit pays for that probe; a run with no fingerprint
-- (older rows, keys not derived from a record) never collides.
-- With `refuse` ($3), a collided item raises an error, so the batch's
-- transaction commits nothing; the CASE is evaluated per row, so nothing is
-- raised while no item collides. The error's text starts with
-- 'harvest: coordinate collision', which the C++ side looks for
-- (kCollisionRefused in execution_store_starts.cpp): keep the two the same.
-- $1: the batch's keys, a jsonb array of items (the columns below), $2: the
-- number of items, $3: refuse, whether a collision raises
-- Returns one row per item in batch order: `ord`, `execution_id` (text; null
-- when the run it resolved to is gone), `lapsed`, `collided`, `refused`
-- (always null: a refusal raises).
SELECT r.*, CASE WHEN $3::bool AND r.collided THEN
  ('harvest: coordinate collision at item ' || r.ord)::int END AS refused FROM (
WITH items AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS t(ord int, wf text, wid text,
  key text, id uuid, fp bigint) LIMIT $2),
-- An item whose own execution now exists created it in this batch (ids are
-- fresh): it resolves to itself, with one probe and no key lookup.
own AS (SELECT i.*, (SELECT true FROM harvest_workflow_executions x WHERE x.id = i.id)
  IS NOT NULL AS created FROM items i OFFSET 0)
SELECT i.ord, CASE WHEN i.created THEN i.id ELSE COALESCE(
  (SELECT e.id FROM harvest_workflow_executions e WHERE i.key IS NOT NULL
   AND e.workflow_name = i.wf AND e.idempotency_key = i.key AND e.key_expires_at > now()),
  (SELECT c.execution_id FROM harvest_start_claims c WHERE i.key IS NOT NULL
   AND c.workflow_name = i.wf AND c.idempotency_key = i.key AND c.expires_at > now()),
  (SELECT e.id FROM harvest_workflow_executions e WHERE i.wid IS NOT NULL
   AND e.workflow_name = i.wf AND e.workflow_id = i.wid AND NOT e.superseded))
  END::text AS execution_id,
  (NOT i.created AND i.key IS NOT NULL AND (SELECT true
   FROM harvest_workflow_executions e WHERE e.workflow_name = i.wf
   AND e.idempotency_key = i.key AND e.key_expires_at <= now()) IS NOT NULL) AS lapsed,
  (NOT i.created AND i.key IS NOT NULL AND i.fp IS NOT NULL AND (SELECT e.key_fingerprint
   <> i.fp FROM harvest_workflow_executions e WHERE e.workflow_name = i.wf
   AND e.idempotency_key = i.key AND e.key_expires_at > now())) IS TRUE AS collided
FROM own i) r ORDER BY r.ord
