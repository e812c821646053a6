-- Schema v2, first step: a durable start writes one row.
--
-- * No WorkflowStarted event row: the execution row holds everything that
--   event said (workflow, start source and reference, trace), so history
--   shows it from the row. Runs started before this migration keep their
--   event row and show it instead; nothing is rewritten.
-- * A completion stores its output once, on the row: the WorkflowCompleted
--   event's payload is null and history shows the row's output. Older
--   events keep their copy.
-- * No foreign key from the history tables to the executions: each check
--   was a trigger on every hot-path insert (every event, every signal).
--   Every writer of those rows already holds the run (its lease or its row
--   lock), and retention deletes a run's children with it in one statement.
ALTER TABLE harvest_workflow_events DROP CONSTRAINT harvest_workflow_events_execution_id_fkey;
ALTER TABLE harvest_signals DROP CONSTRAINT harvest_signals_execution_id_fkey;
ALTER TABLE harvest_engine_dead_letters
  DROP CONSTRAINT harvest_engine_dead_letters_execution_id_fkey;
ALTER TABLE harvest_batch_items DROP CONSTRAINT harvest_batch_items_fired_execution_fkey;
