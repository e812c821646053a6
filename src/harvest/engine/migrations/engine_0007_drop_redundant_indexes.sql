-- Two indexes every start paid for and no query needs:
-- * harvest_executions_source covered every connector-started run, so no
--   filter on start_source was ever selective through it (listing by source
--   sorts on created_at either way);
-- * harvest_events_execution (execution_id, id) duplicated the leading column
--   of the (execution_id, op_seq) unique index, which serves every history
--   read (one execution's events, sorted by id in memory).
DROP INDEX IF EXISTS harvest_executions_source;
DROP INDEX IF EXISTS harvest_events_execution;
