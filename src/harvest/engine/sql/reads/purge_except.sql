-- Retention's purge for every workflow but some (those with their own
-- retention): deletes their closed runs completed longer ago than the age
-- (except those still holding their start's key), with their events,
-- signals, dead letters, fired batch items and leases.
-- $1: the workflow names excluded (text[]), $2: age, in seconds
-- Returns one row: `purged`, the count of executions deleted.
WITH gone AS (DELETE FROM harvest_workflow_executions WHERE workflow_name <> ALL($1::text[])
\ir ../fragments/reads_purge_due.sql
  RETURNING id),
\ir ../fragments/reads_purge_dependents.sql
