-- The signals of the execution row `e` that its run left unread (no
-- SignalReceived event names them), as a query of their ids.
SELECT s.id FROM harvest_signals s WHERE s.execution_id = e.id AND NOT EXISTS (
  SELECT 1 FROM harvest_workflow_events ev WHERE ev.execution_id = e.id
  AND ev.kind = 'SignalReceived' AND (ev.payload->>'signal_id')::bigint = s.id)
