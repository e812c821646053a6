-- A takeover counts towards the poison-pill threshold only when the run
-- recorded nothing since the previous takeover: each takeover keeps here the
-- id of the run's newest history event at that moment, and the next one
-- compares. A long run that records steps and loses its worker to three node
-- restarts is not a poison pill; a run that dies at the same step each time
-- is. NULL (no takeover yet, or counting restarted by a suspension, a retry
-- or a replay): the next takeover counts.
-- Nullable without a default: a catalog update only, whatever the table's size.
ALTER TABLE harvest_workflow_executions ADD COLUMN crash_mark bigint;
