-- Creates the entity runs that do not exist yet (the first startable item of
-- each workflow_id decides its input), each numbered one past the workflow
-- id's last run.
-- $1: the batch, a json array of items (fragments/starts_entity_columns.sql),
-- $2: the number of items
-- Returns the ids created (`id`).
WITH items AS (SELECT * FROM json_to_recordset($1::json) AS t(
\ir ../fragments/starts_entity_columns.sql
) LIMIT $2),
firsts AS (SELECT DISTINCT ON (wf, wid) * FROM items i WHERE startable
  AND NOT
\ir ../fragments/starts_delivered_before.sql
  ORDER BY wf, wid, ord),
inserted AS (INSERT INTO harvest_workflow_executions
  (id, workflow_name, workflow_id, status, input, start_source, start_source_ref,
  max_attempts, start_trace, run_no, entity_reuse, concurrency_key)
  SELECT id, wf, wid, 'pending', input, source, ref, max_attempts, trace,
  COALESCE((SELECT max(x.run_no) FROM harvest_workflow_executions x
   WHERE x.workflow_name = f.wf AND x.workflow_id = f.wid), 0) + 1, reuse, ckey FROM firsts f
  ORDER BY wf, wid ON CONFLICT DO NOTHING RETURNING id)
SELECT id::text AS id FROM inserted
