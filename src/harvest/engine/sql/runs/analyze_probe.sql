-- Whether the executions table was ever analyzed, and its row count read
-- directly (stopping at $1), not from the cumulative statistics, which a
-- backend may publish only seconds later.
-- $1: the row count that is enough
-- Returns one row: `tuples` (negative: never analyzed) and `rows`.
SELECT c.reltuples::bigint AS tuples,
  (SELECT count(*) FROM (SELECT 1 FROM harvest_workflow_executions LIMIT $1) l) AS rows
FROM pg_class c WHERE c.oid = 'harvest_workflow_executions'::regclass
