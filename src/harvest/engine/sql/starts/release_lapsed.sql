-- Releases keys whose window has lapsed from the runs that hold them, so a
-- start can claim them (rare: a key reused after its window).
-- $1: the keys, a jsonb array of {wf, key}, $2: the number of keys
UPDATE harvest_workflow_executions e SET idempotency_key = NULL, key_expires_at = NULL
FROM (SELECT * FROM jsonb_to_recordset($1::jsonb) AS t(wf text, key text) LIMIT $2) k
WHERE e.workflow_name = k.wf AND e.idempotency_key = k.key AND e.key_expires_at <= now()
