-- keyed_off behind a transaction pooler: sequential scans enabled again,
-- local to the pipeline's transaction.
-- Returns one row (dropped).
SELECT set_config('enable_seqscan', 'on', true)
