-- With a fresh snapshot (the runs exist now, whoever created them): locks
-- every target run in id order (the lock serialises signal writers, so signal
-- ids follow commit order), stages the new signals of open runs in batch
-- order, and bumps each woken run's signal sequence once per staged signal.
-- $1: the batch, a json array of items (fragments/starts_entity_columns.sql),
-- $2: the number of items, $3: refuse, whether a collision raises
-- Returns one row per item in batch order: `ord`; its target run's `id`
-- (text), `status` and `run_no` (null when there is none); `existed`,
-- `collided`, `refused` (always null: a refusal raises), `staged`,
-- `before_start`.
WITH items AS (SELECT * FROM json_to_recordset($1::json) AS t(
\ir ../fragments/starts_entity_columns.sql
) LIMIT $2),
targets AS (SELECT e.id, e.workflow_name, e.workflow_id, e.status, e.run_no
  FROM harvest_workflow_executions e
  WHERE (e.workflow_name, e.workflow_id) IN (SELECT wf, wid FROM items) AND NOT e.superseded
  ORDER BY e.id FOR NO KEY UPDATE),
staged AS (INSERT INTO harvest_signals (execution_id, name, payload, idempotency_key,
  fingerprint)
  SELECT t.id, i.signal, i.payload, i.key, CASE WHEN i.key IS NOT NULL THEN i.fp END
  FROM items i JOIN targets t
  ON t.workflow_name = i.wf AND t.workflow_id = i.wid
  WHERE t.status NOT IN
\ir ../fragments/closed_statuses.sql
-- An item whose start input is invalid may attach only to a run that it did
-- not precede: created before this batch or by an earlier item.
  AND (i.startable OR NOT EXISTS (SELECT 1 FROM items c WHERE c.id = t.id AND c.ord > i.ord))
  AND NOT
\ir ../fragments/starts_delivered_before.sql
  ORDER BY i.ord
  ON CONFLICT (execution_id, idempotency_key) DO NOTHING
  RETURNING execution_id, idempotency_key),
woken AS (UPDATE harvest_workflow_executions e SET signal_seq = signal_seq + n.staged,
  run_after = CASE WHEN e.status = 'waiting' THEN now() ELSE e.run_after END
  FROM (SELECT execution_id, count(*) AS staged FROM staged GROUP BY execution_id) n
  WHERE e.id = n.execution_id)
-- `existed`: the key was delivered before (fragments/starts_delivered_before.sql,
-- read through the lateral `d` so its fingerprint comes with it); `collided`:
-- from a record with another fingerprint.
-- With `refuse` ($3), a collided item raises (as resolve_batch does). The
-- error's text starts with 'harvest: coordinate collision', which the C++
-- side looks for (kCollisionRefused in execution_store_starts.cpp): keep the
-- two the same.
SELECT i.ord, t.id::text AS id, t.status, t.run_no, d.delivered IS NOT NULL AS existed,
  (i.fp IS NOT NULL AND d.fingerprint IS NOT NULL AND d.fingerprint <> i.fp) AS collided,
  CASE WHEN $3::bool AND i.fp IS NOT NULL AND d.fingerprint <> i.fp THEN
  ('harvest: coordinate collision at item ' || i.ord)::int END AS refused,
  (i.key IS NOT NULL AND EXISTS (SELECT 1 FROM staged s
   WHERE s.execution_id = t.id AND s.idempotency_key = i.key)) AS staged,
  (NOT i.startable AND EXISTS (SELECT 1 FROM items c WHERE c.id = t.id AND c.ord > i.ord))
   AS before_start
FROM items i LEFT JOIN targets t ON t.workflow_name = i.wf AND t.workflow_id = i.wid
LEFT JOIN LATERAL (SELECT true AS delivered, s.fingerprint FROM harvest_signals s
  JOIN harvest_workflow_executions x ON x.id = s.execution_id WHERE i.key IS NOT NULL
  AND x.workflow_name = i.wf AND x.workflow_id = i.wid AND s.idempotency_key = i.key
  LIMIT 1) d ON true
ORDER BY i.ord
