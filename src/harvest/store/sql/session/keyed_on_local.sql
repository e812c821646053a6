-- keyed_on behind a transaction pooler: sequential scans disabled, local to
-- the pipeline's transaction (implicit, or the caller's), so it never
-- outlives it on a shared server session.
-- Returns one row (dropped).
SELECT set_config('enable_seqscan', 'off', true)
