-- The rest of retention's purge, after its CTE `gone` (the ids of the
-- executions deleted): events, signals, dead letters, fired batch items and
-- leases go with their execution, in the same statement (no foreign keys:
-- schema v2), and the statement returns one row, `purged`, the count.
events AS (DELETE FROM harvest_workflow_events WHERE execution_id IN
  (SELECT id FROM gone)),
signals AS (DELETE FROM harvest_signals WHERE execution_id IN (SELECT id FROM gone)),
letters AS (DELETE FROM harvest_engine_dead_letters WHERE execution_id IN
  (SELECT id FROM gone)),
items AS (DELETE FROM harvest_batch_items WHERE fired_execution IN (SELECT id FROM gone)),
leases AS (DELETE FROM harvest_run_leases WHERE execution_id IN (SELECT id FROM gone))
SELECT count(*) AS purged FROM gone
