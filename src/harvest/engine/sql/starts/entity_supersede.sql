-- Closes the books on entity runs that ended: the current run of a workflow
-- id that is completed or failed is superseded when a new message for it may
-- start a new run (policy allow_after_close, a valid start input, a signal
-- not delivered before). Concurrent writers serialise on the run's row lock.
-- $1: the batch, a json array of items (fragments/starts_entity_columns.sql),
-- $2: the number of items
-- Returns the superseded runs' `id`s.
WITH items AS (SELECT * FROM json_to_recordset($1::json) AS t(
\ir ../fragments/starts_entity_columns.sql
) LIMIT $2),
fresh AS (SELECT DISTINCT i.wf, i.wid FROM items i WHERE i.startable AND i.reuse
  AND NOT
\ir ../fragments/starts_delivered_before.sql
)
UPDATE harvest_workflow_executions e SET superseded = true, updated_at = now()
FROM fresh f WHERE e.workflow_name = f.wf AND e.workflow_id = f.wid AND NOT e.superseded
AND e.status IN
\ir ../fragments/closed_statuses.sql
RETURNING e.id
