-- The columns of an entity batch's items (signal-with-start), for
-- json_to_recordset's column definition list: a start's columns, then the
-- signal's. They match the objects signal_batch_round builds in
-- execution_store_starts.cpp.
ord int, wf text, wid text, id uuid, input json, source text, ref text, max_attempts int,
trace jsonb, startable bool, signal text, payload jsonb, key text, reuse bool, ckey text,
fp bigint
