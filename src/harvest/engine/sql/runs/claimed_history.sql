-- The recorded history of claimed runs, read in a statement of its own after
-- the claims committed: a previous holder can write nothing after that.
-- $1: execution ids (uuid array)
-- Returns a row per recorded operation, by run and position: `execution_id`,
-- `op_seq`, `kind`, `name`, `payload`.
SELECT execution_id::text AS execution_id, op_seq, kind, name, payload::text AS payload
FROM harvest_workflow_events WHERE execution_id = ANY($1::uuid[]) AND op_seq IS NOT NULL
ORDER BY execution_id, op_seq
