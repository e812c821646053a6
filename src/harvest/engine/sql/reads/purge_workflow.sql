-- Retention's purge for one workflow: deletes its closed runs completed
-- longer ago than the age (except those still holding their start's key),
-- with their events, signals, dead letters, fired batch items and leases.
-- $1: workflow name, $2: age, in seconds
-- Returns one row: `purged`, the count of executions deleted.
WITH gone AS (DELETE FROM harvest_workflow_executions WHERE workflow_name = $1
\ir ../fragments/reads_purge_due.sql
  RETURNING id),
\ir ../fragments/reads_purge_dependents.sql
