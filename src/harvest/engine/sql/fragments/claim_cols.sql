-- The execution columns a claim reads, of the execution row `e` (a select
-- list).
e.id, e.workflow_name, e.concurrency_key, e.workflow_id, e.input, e.attempt, e.max_attempts,
e.signal_seq, e.entity_reuse, e.start_trace, e.run_after, e.cancel_requested_at, e.crash_count
