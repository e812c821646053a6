-- Operators cancel or terminate runs (ENG-17) and a crash-looping run is contained
-- (ENG-18).
--
-- Two more terminal statuses: `cancelled` (the run saw a cancel request at a
-- durable operation and ended) and `terminated` (an operator ended it at
-- once; the worker still executing it is fenced off by the status).
ALTER TABLE harvest_workflow_executions
  DROP CONSTRAINT harvest_workflow_executions_status_check;
ALTER TABLE harvest_workflow_executions
  ADD CONSTRAINT harvest_workflow_executions_status_check CHECK (status IN
    ('pending', 'running', 'waiting', 'completed', 'failed', 'cancelled', 'terminated'));
DROP INDEX harvest_executions_terminal;
CREATE INDEX harvest_executions_terminal ON harvest_workflow_executions (completed_at)
  WHERE status IN ('completed', 'failed', 'cancelled', 'terminated');

-- A cancel request waits on the row until the run sees it; who asked and
-- why are in its CancelRequested event too.
ALTER TABLE harvest_workflow_executions ADD COLUMN cancel_requested_at timestamptz;
ALTER TABLE harvest_workflow_executions ADD COLUMN cancel_reason text;

-- Leases taken over from a holder that recorded no outcome since the run
-- last suspended, retried or was replayed: a run that keeps killing its
-- worker stops being claimed once this reaches its workflow's threshold.
ALTER TABLE harvest_workflow_executions
  ADD COLUMN crash_count integer NOT NULL DEFAULT 0;

-- Why a run is in the engine's dead letters: `failed` (its attempts ran out)
-- or `crashed_worker` (the poison-pill threshold).
ALTER TABLE harvest_engine_dead_letters
  ADD COLUMN reason text NOT NULL DEFAULT 'failed';
