-- Schema v2, second step: a keyed start's idempotency claim is held on the
-- execution row it created, not in a row of its own.
--
-- * The row carries its start's key and the end of the key's window; a
--   unique index over the keys that rows hold makes a second start with a
--   held key conflict on the same insert that creates the run. A start
--   whose window has lapsed releases the key from the old run first.
-- * Retention keeps a closed run while its key's window is open, so a
--   redelivery inside the window still finds it.
-- * v1 claims move onto the run they point at. What cannot move (a claim
--   whose run retention already deleted, or a second key on one run) stays
--   in harvest_start_claims, which starts still honour until each claim
--   expires; nothing writes new rows there.
-- * harvest_start_idempotency becomes a view of every live claim, wherever
--   it is held, for operators' queries.
ALTER TABLE harvest_workflow_executions
  ADD COLUMN idempotency_key text,
  ADD COLUMN key_expires_at timestamptz;

ALTER TABLE harvest_start_idempotency RENAME TO harvest_start_claims;
ALTER INDEX harvest_start_idempotency_pkey RENAME TO harvest_start_claims_pkey;
ALTER INDEX harvest_start_idempotency_expiry RENAME TO harvest_start_claims_expiry;
DELETE FROM harvest_start_claims WHERE expires_at <= now();

WITH moved AS (
  SELECT DISTINCT ON (c.execution_id) c.workflow_name, c.idempotency_key, c.execution_id,
         c.expires_at
  FROM harvest_start_claims c
  JOIN harvest_workflow_executions e
    ON e.id = c.execution_id AND e.workflow_name = c.workflow_name
  ORDER BY c.execution_id, c.created_at, c.idempotency_key),
placed AS (
  UPDATE harvest_workflow_executions e
  SET idempotency_key = m.idempotency_key, key_expires_at = m.expires_at
  FROM moved m WHERE e.id = m.execution_id
  RETURNING m.workflow_name, m.idempotency_key)
DELETE FROM harvest_start_claims c USING placed p
WHERE c.workflow_name = p.workflow_name AND c.idempotency_key = p.idempotency_key;

CREATE UNIQUE INDEX harvest_executions_key
  ON harvest_workflow_executions (workflow_name, idempotency_key)
  WHERE idempotency_key IS NOT NULL;

CREATE VIEW harvest_start_idempotency AS
  SELECT workflow_name, idempotency_key, id AS execution_id, key_expires_at AS expires_at,
         created_at
  FROM harvest_workflow_executions
  WHERE idempotency_key IS NOT NULL AND key_expires_at > now()
  UNION ALL
  SELECT workflow_name, idempotency_key, execution_id, expires_at, created_at
  FROM harvest_start_claims
  WHERE expires_at > now();
