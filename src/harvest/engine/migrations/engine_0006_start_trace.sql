-- The producer's W3C trace context ({"traceparent": ..., "tracestate": ...}),
-- kept with the start's provenance when the message that started the run
-- carried one; null otherwise. The WorkflowStarted event carries it too.
ALTER TABLE harvest_workflow_executions ADD COLUMN start_trace jsonb;
